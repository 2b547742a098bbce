"""A Parquet file's metadata: footer, schema, page index, Bloom filters, dictionary pages.

Opening a file costs one speculative read of its tail (64 KiB by default); a
second read happens only when the footer is larger. Page-index entries and Bloom
filters are read lazily, per column chunk, and served from the tail buffer when
the speculative read already holds them. Every offset and length the file
declares is checked against the file's size before anything is read or
allocated.
"""

from __future__ import annotations

import bisect
import os
import struct
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pqindex.errors import (
    CorruptFileError,
    PqIndexError,
    UnsupportedError,
    UserInputError,
    located,
)
from pqindex.format.bloom import (
    BLOCK_BYTES,
    MAX_BLOOM_BYTES,
    BloomFilter,
    BloomProbe,
    block_index,
)
from pqindex.format.layout import check_offset_index, check_row_groups, chunk_range
from pqindex.format.schema import Encoding, LeafColumn, PageType, Schema
from pqindex.format.structs import (
    BloomFilterAlgorithm,
    BloomFilterCompression,
    BloomFilterHash,
    BloomFilterHeader,
    ColumnChunk,
    ColumnIndex,
    ColumnMetaData,
    FileMetaData,
    OffsetIndex,
    PageHeader,
    RowGroup,
    SplitBlockAlgorithm,
    Uncompressed,
    XxHash,
)
from pqindex.format.thrift import ThriftError, ThriftStruct, decode, encode
from pqindex.io.cache import (
    DECODED_DICTIONARIES,
    DICTIONARY_EVIDENCE,
    KEPT_PAGES,
    budget_owner,
    metadata_cache,
)
from pqindex.io.source import (
    ByteSource,
    IOStats,
    ObjectInfo,
    coalesce,
    in_order,
    iter_ranges,
    open_source,
)

# chunk_range stays importable from here (pages.py, user code).
__all__ = ["DEFAULT_TAIL_BYTES", "DictionaryPage", "ParquetFile", "chunk_range"]

DEFAULT_TAIL_BYTES = 64 * 1024
# Earlier waves' buffers a file keeps besides its tail: a long-lived dataset's Bloom
# probes (32 bytes per value) would otherwise grow the list, and every lookup in it.
MAX_HELD_BUFFERS = 4096
# Memory of decoded metadata, for retained_bytes: objects per footer byte (the
# footer's own copy included) and per page of a decoded offset + column index.
_FOOTER_OBJECT_BYTES = 15
_INDEX_PAGE_BYTES = 400
MAGIC = b"PAR1"
MAGIC_ENCRYPTED = b"PARE"
# A page header is small; this much is read first and grown only if needed.
_PAGE_HEADER_PROBE = 256
# A Bloom filter header is about 17 bytes; this much is read when its length is unknown.
_BLOOM_HEADER_PROBE = 64
_DICTIONARY_ENCODINGS = frozenset({Encoding.PLAIN_DICTIONARY, Encoding.RLE_DICTIONARY})


@dataclass(frozen=True, slots=True)
class DictionaryPage:
    """Where a chunk's dictionary page is: header and data together."""

    offset: int
    header_length: int
    header: PageHeader

    @property
    def total_length(self) -> int:
        """Header plus compressed page bytes."""
        return self.header_length + (self.header.compressed_page_size or 0)


class ParquetFile:
    """Metadata of one Parquet file, read through a counting :class:`ByteSource`."""

    def __init__(self, source: ByteSource, *, tail_bytes: int | None = None) -> None:
        self.source = source
        self.path = source.path
        self._lock = threading.Lock()
        self._column_indexes: dict[tuple[int, int], ColumnIndex | None] = {}
        self._offset_indexes: dict[tuple[int, int], OffsetIndex | None] = {}
        # (offset, bytes) already read, oldest first; a tail read in a wave is a view
        # (no copy).
        self._buffers: list[tuple[int, bytes | memoryview]] = []
        # The same by offset: start -> (stop, bytes), and the starts sorted, a list
        # replaced whole on every change. Reads bisect it: a long-lived file holds up
        # to MAX_HELD_BUFFERS (Bloom blocks of earlier lookups), and scanning them all
        # per read made a service's warm Bloom lookups 4x slower after 500 queries.
        self._spans: dict[int, tuple[int, bytes | memoryview]] = {}
        self._starts: list[int] = []
        # This file's share of the process-wide budgets (kept pages, dictionaries),
        # given back when it is collected.
        self.budget_owner = budget_owner()
        weakref.finalize(self, _give_back, self.budget_owner)
        self._dictionary_pages: dict[tuple[int, int], DictionaryPage | None] = {}
        # Things derived from this file by upper layers (the embedded index region),
        # kept as long as the file is.
        self.derived: dict[Any, Any] = {}
        try:
            with located(default=CorruptFileError, what="cannot read the footer",
                         path=self.path):
                self._read_footer(tail_bytes)
            self._pinned = len(self._buffers)  # the tail: never dropped
        except BaseException:
            source.close()
            raise

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        stats: IOStats | None = None,
        tail_bytes: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
        info: ObjectInfo | None = None,
    ) -> ParquetFile:
        """Open a local path or a URL (object store or fsspec) and read its footer.

        ``tail_bytes`` defaults to the source's ``default_tail_bytes``; ``info`` is
        what a listing said (size, ETag), so a cached tail needs no request.
        """
        with located(default=UserInputError,
                     path=os.fspath(path) if isinstance(path, (str, os.PathLike)) else None):
            return cls(open_source(path, stats, storage_options, info), tail_bytes=tail_bytes)

    def close(self) -> None:
        self.source.close()

    def retained_bytes(self) -> int:
        """About the memory this open file holds outside the process-wide budgets: the
        buffers it keeps (its tail first), the decoded footer (12-14 bytes of objects
        a footer byte, measured on three files, and its own copy) and the decoded
        page-index entries (~400 bytes a page)."""
        pages = sum(len(oi.page_locations or ()) for oi in list(self._offset_indexes.values())
                    if oi is not None)
        held = sum(len(b) for _, b in list(self._buffers))
        footer: int = self.footer_length
        return held + _FOOTER_OBJECT_BYTES * footer + _INDEX_PAGE_BYTES * pages

    def __enter__(self) -> ParquetFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ footer

    def _read_footer(self, tail_bytes: int | None) -> None:
        src = self.source
        cache = metadata_cache()
        cached = cache.get(src.cache_key())
        if cached is not None:
            # An unchanged object (same URL, size and ETag/mtime): no request.
            tail_start, tail = cached[-1]
            self._hold(cached[:-1])
            size = tail_start + len(tail)
        else:
            want = max(src.default_tail_bytes if tail_bytes is None else tail_bytes, 8)
            tail = src.tail(want)
            size = src.size()
            tail_start = size - len(tail)
        self.file_size = size
        if size < 12:
            raise CorruptFileError(
                f"file is {size} bytes, too small to be Parquet (at least 12)", path=self.path
            )
        magic = bytes(tail[-4:])
        if magic == MAGIC_ENCRYPTED:
            raise UnsupportedError(
                "encrypted footer (PARE): encrypted files are not supported", path=self.path
            )
        if magic != MAGIC:
            raise CorruptFileError(
                f"not a Parquet file: ends with {magic!r}, expected b'PAR1'",
                path=self.path,
                offset=size - 4,
            )
        (footer_len,) = struct.unpack("<I", tail[-8:-4])
        if footer_len > size - 12:
            raise CorruptFileError(
                f"footer length {footer_len} exceeds the file size {size}",
                path=self.path,
                offset=size - 8,
            )
        footer_start = size - 8 - footer_len
        if footer_start < tail_start:
            # The footer begins before the tail: fetch exactly the missing part.
            head = src.read(footer_start, tail_start - footer_start)
            tail = head + tail
            tail_start = footer_start
        if cached is None:
            cache.put(src.cache_key(), [(tail_start, tail)])
        self._hold([(tail_start, tail)])
        self.footer_offset = footer_start
        self.footer_length = footer_len
        footer = bytes(tail[footer_start - tail_start : footer_start - tail_start + footer_len])
        self.footer_bytes = footer
        try:
            # Kept as long as the file is open (and in the metadata cache), never
            # made cyclic: left out of the cyclic collector's walks.
            md, _ = decode(FileMetaData, footer, track=False)
        except ThriftError as e:
            raise CorruptFileError(
                f"corrupt footer: {e.reason}", path=self.path, offset=footer_start + e.offset
            ) from None
        self.metadata: FileMetaData = md
        if md.encryption_algorithm is not None:
            raise UnsupportedError(
                "encrypted columns (plaintext footer with an encryption algorithm): "
                "encrypted files are not supported",
                path=self.path,
            )
        try:
            self.schema = Schema.from_elements(md.schema or [], md.column_orders)
        except CorruptFileError as e:
            raise e.located(path=self.path, offset=footer_start) from None
        self.row_count_mismatch = check_row_groups(md, self.schema, footer_start, self.path)

    # ------------------------------------------------------------ basics

    @property
    def num_rows(self) -> int:
        return self.metadata.num_rows or 0

    @property
    def num_row_groups(self) -> int:
        return len(self.metadata.row_groups or [])

    @property
    def created_by(self) -> str | None:
        return self.metadata.created_by

    @property
    def key_value_metadata(self) -> dict[str, str | None]:
        return {kv.key or "": kv.value for kv in self.metadata.key_value_metadata or []}

    def row_group_rows(self, rg: int) -> int:
        return self._row_group(rg).num_rows or 0

    def _row_group(self, rg: int) -> RowGroup:
        groups = self.metadata.row_groups or []
        if not 0 <= rg < len(groups):
            raise PqIndexError(
                f"row group {rg} does not exist (the file has {len(groups)})", path=self.path
            )
        return groups[rg]

    def column_chunk(self, rg: int, col: int) -> ColumnChunk:
        """The ColumnChunk of leaf ``col`` in row group ``rg``."""
        groups = self.metadata.row_groups or []
        if not 0 <= rg < len(groups):
            raise PqIndexError(
                f"row group {rg} does not exist (the file has {len(groups)})", path=self.path
            )
        cols = groups[rg].columns or []
        if not 0 <= col < len(cols):
            raise PqIndexError(f"column {col} does not exist", path=self.path, row_group=rg)
        return cols[col]

    def column_meta(self, rg: int, col: int) -> ColumnMetaData:
        cmd = self.column_chunk(rg, col).meta_data
        assert cmd is not None  # checked at open
        return cmd

    def leaf(self, col: int) -> LeafColumn:
        return self.schema.leaves[col]

    # ------------------------------------------------------------ byte access

    def read_bytes(self, offset: int, length: int, *, keep: bool = False) -> bytes:
        """Bytes of the file, from an earlier read when it covers them, else one request.

        ``keep`` holds on to what was read (dictionary pages read while planning are
        read again by the scan), within ``io.cache.KEPT_PAGES``.
        """
        end = offset + length
        starts, spans = self._held()
        i = bisect.bisect_right(starts, offset) - 1
        span = spans.get(starts[i]) if i >= 0 else None
        if span is not None and end <= span[0]:
            s = starts[i]
            return bytes(span[1][offset - s : offset - s + length])
        # Pieces from earlier reads (the tail, dictionary pages read while planning),
        # requests for the gaps only: no byte is read twice.
        pieces: list[bytes | memoryview] = []
        pos = offset
        while pos < end:
            i = bisect.bisect_right(starts, pos) - 1
            span = spans.get(starts[i]) if i >= 0 else None
            if span is not None and pos < span[0]:
                s = starts[i]
                piece = span[1][pos - s : min(end, span[0]) - s]
            else:
                nxt = starts[i + 1] if i + 1 < len(starts) and starts[i + 1] < end else end
                piece = self.source.read(pos, nxt - pos)
                if keep and KEPT_PAGES.take(self.budget_owner, len(piece)):
                    with self._lock:
                        self._hold([(pos, piece)])
            pieces.append(piece)
            pos += len(piece)
            if not piece:  # a short read: let the caller see it
                break
        return bytes(pieces[0]) if len(pieces) == 1 else b"".join(pieces)

    def read_into(self, ranges: Sequence[tuple[int, int]], out: memoryview,
                  gap: int | None = None) -> list[tuple[int, int]]:
        """Fill ``out[o : o + n]`` for each ``(o, n)`` of ``ranges`` (``out`` spans
        the file from offset 0): bytes earlier reads hold are copied, the rest read
        straight into ``out`` in one wave of requests, merged across gaps of at most
        ``gap`` bytes (the source's own rule if None) but never across held bytes, as
        :meth:`iter_ranges` does. Returns the requests made. Local files only."""
        fill = getattr(self.source, "read_into", None)
        if fill is None:
            raise UnsupportedError("read_into needs a local file", path=self.path)
        wanted = [(o, n) for o, n in ranges if n > 0]
        merged = self.source.coalesce(wanted) if gap is None else coalesce(wanted, gap)
        held = self._held()
        requests = []
        for off, n in merged:
            for o, k, span in _pieces(held, off, n):
                if span is None:
                    requests.append((o, k))
                else:
                    s, buf = span
                    out[o : o + k] = memoryview(buf).cast("B")[o - s : o - s + k]
        for o, k in requests:
            fill(o, out[o : o + k])
            self.source.stats.record(o, k)
        if requests:
            self.source.stats.record_wave()
        return requests

    def has_bytes(self, offset: int, length: int) -> bool:
        """Whether ``read_bytes(offset, length)`` would be served without a request."""
        return not _gaps(self._held(), offset, length)

    def _check_region(
        self, offset: int | None, length: int | None, what: str, rg: int, col: int
    ) -> tuple[int, int] | None:
        if offset is None or length is None:
            return None
        if offset < 4 or length <= 0 or offset + length > self.footer_offset:
            raise CorruptFileError(
                f"{what} [{offset}, {offset + length}) lies outside the file's data region "
                f"[4, {self.footer_offset})",
                path=self.path,
                row_group=rg,
                column=self.schema.leaves[col].name,
                offset=offset,
            )
        return offset, length

    def _decode_at(
        self, cls: type[ThriftStruct], raw: bytes, offset: int, what: str, rg: int, col: int
    ) -> ThriftStruct:
        try:
            obj, _ = decode(cls, raw, track=False)  # page-index entries: kept, read-only
        except ThriftError as e:
            raise CorruptFileError(
                f"corrupt {what}: {e.reason}",
                path=self.path,
                row_group=rg,
                column=self.schema.leaves[col].name,
                offset=offset + e.offset,
            ) from None
        return obj

    # ------------------------------------------------------------ page index

    def has_column_index(self, rg: int, col: int) -> bool:
        cc = self.column_chunk(rg, col)
        return cc.column_index_offset is not None and bool(cc.column_index_length)

    def has_offset_index(self, rg: int, col: int) -> bool:
        cc = self.column_chunk(rg, col)
        return cc.offset_index_offset is not None and bool(cc.offset_index_length)

    def _index_regions(
        self,
        row_groups: Iterable[int],
        columns: Iterable[int],
        column_index: bool,
        offset_index: bool,
    ) -> list[tuple[int, int]]:
        cols = list(columns)
        regions = []
        for rg in row_groups:
            for col in cols:
                cc = self.column_chunk(rg, col)
                if column_index and (rg, col) not in self._column_indexes:
                    r = self._check_region(
                        cc.column_index_offset, cc.column_index_length, "column index", rg, col
                    )
                    if r:
                        regions.append(r)
                if offset_index and (rg, col) not in self._offset_indexes:
                    r = self._check_region(
                        cc.offset_index_offset, cc.offset_index_length, "offset index", rg, col
                    )
                    if r:
                        regions.append(r)
        return regions

    def page_index_ranges(
        self,
        row_groups: Iterable[int],
        columns: Iterable[int],
        *,
        column_index: bool = True,
        offset_index: bool = True,
    ) -> list[tuple[int, int]]:
        """``(offset, length)`` of the page-index entries of these chunks not decoded yet."""
        return self._index_regions(row_groups, columns, column_index, offset_index)

    def prefetch_page_index(
        self,
        row_groups: Iterable[int],
        columns: Iterable[int],
        *,
        column_index: bool = True,
        offset_index: bool = True,
        max_gap: int | None = None,
    ) -> None:
        """Read the page-index entries of these chunks in one wave of requests."""
        self.prefetch(
            self._index_regions(row_groups, columns, column_index, offset_index), max_gap
        )

    def prefetch(
        self,
        ranges: Sequence[tuple[int, int]],
        max_gap: int | None = None,
        *,
        exact: Sequence[tuple[int, int]] = (),
    ) -> None:
        """Read and keep the ranges not held yet, in one wave (one ``read_ranges`` call),
        merged by the source's policy (or ``max_gap``); ``exact`` ranges go out as they
        are (Bloom blocks: 32 bytes far apart). Later reads of them are free."""
        if not ranges and not exact:
            return
        held = self._held()  # once per wave: a planner's wave has a range per filter block
        missing = [r for r in ranges if r[1] > 0 and _gaps(held, *r)]
        merged = (
            self.source.coalesce(missing) if max_gap is None else coalesce(missing, max_gap)
        ) if missing else []
        merged += sorted({r for r in exact if r[1] > 0 and _gaps(held, *r)})
        # Parts already held (the tail, an earlier wave) are not read again.
        merged = sorted({p for o, n in merged for p in _gaps(held, o, n)})
        if not merged:
            return
        got = self.source.read_ranges(merged)
        with self._lock:
            older = len(self._buffers) - self._pinned
            self._hold(list(zip((off for off, _ in merged), got, strict=True)))
            # Oldest waves go first, never this one: what a later query needs again
            # is read again. A quarter more than the excess goes at once, so the
            # sorted starts are rebuilt once per many waves, not on every one.
            excess = len(self._buffers) - self._pinned - MAX_HELD_BUFFERS
            if excess > 0:
                self._drop_oldest(min(older, excess + MAX_HELD_BUFFERS // 4))

    def _hold(self, added: Sequence[tuple[int, bytes | memoryview]]) -> None:
        """Keep ``(offset, bytes)`` read (the caller holds ``_lock`` or owns the file).
        Reads put in place only the gaps between held bytes; two threads reading one
        gap at once keep the first copy (a second start is not indexed)."""
        new: list[int] = []
        for start, buf in added:
            self._buffers.append((start, buf))
            if len(buf) and start not in self._spans:
                self._spans[start] = (start + len(buf), buf)
                new.append(start)
        if new:
            # Two sorted runs: timsort merges them in one pass.
            self._starts = sorted(self._starts + new)

    def _drop_oldest(self, n: int) -> None:
        """Forget the ``n`` oldest unpinned buffers (under ``_lock``). The starts are
        replaced before the spans go: a reader holding the old list finds a start
        without its span and reads those bytes again."""
        gone = self._buffers[self._pinned : self._pinned + n]
        del self._buffers[self._pinned : self._pinned + n]
        dropped = {start for start, buf in gone
                   if (span := self._spans.get(start)) is not None and span[1] is buf}
        if dropped:
            self._starts = [s for s in self._starts if s not in dropped]
            for start in dropped:
                del self._spans[start]

    def _held(self) -> _Held:
        """The bytes earlier reads hold: their starts, sorted, and start -> (stop,
        bytes). A start whose span is missing was just dropped: it holds nothing."""
        return self._starts, self._spans

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes of each range (not kept): the parts earlier reads hold (the tail,
        dictionaries read while planning) from them, the rest in one wave of requests,
        so a range merged across a held part never reads it again."""
        return in_order(len(ranges), self.iter_ranges(ranges))

    def iter_ranges(self, ranges: Sequence[tuple[int, int]], *, views: bool = False
                    ) -> Iterator[tuple[int, bytes | memoryview]]:
        """:meth:`read_ranges` as ``(index, bytes)`` pairs, each range as soon as its
        bytes are in (see :func:`pqindex.io.source.iter_ranges`); ``views``: a range
        fetched whole may come as a ``memoryview`` of the store client's buffer."""
        held = self._held()
        parts = [_gaps(held, off, n) for off, n in ranges]
        need = sorted({p for ps in parts for p in ps})
        # Ranges waiting for each needed piece, and how many pieces each still waits for.
        waiting: dict[tuple[int, int], list[int]] = {}
        for i, ps in enumerate(parts):
            for p in ps:
                waiting.setdefault(p, []).append(i)
        left = [len(ps) for ps in parts]
        got: dict[tuple[int, int], bytes | memoryview] = {}
        for i, ps in enumerate(parts):
            if not ps:
                yield i, self._assemble(ranges[i], ps, got)
        for k, data in (iter_ranges(self.source, need, views=views) if need else ()):
            piece = need[k]
            got[piece] = data
            for i in waiting[piece]:
                left[i] -= 1
                if not left[i]:
                    yield i, self._assemble(ranges[i], parts[i], got)

    def _assemble(self, rng: tuple[int, int], parts: Sequence[tuple[int, int]],
                  got: Mapping[tuple[int, int], bytes | memoryview]) -> bytes | memoryview:
        """A range from its fetched ``parts`` and what earlier reads hold between them."""
        off, n = rng
        if len(parts) == 1 and parts[0] == rng:
            return got[rng]
        pieces: list[bytes | memoryview] = []
        pos = off
        for mo, mn in parts:
            if mo > pos:
                pieces.append(self.read_bytes(pos, mo - pos))  # held: no request
            pieces.append(got[(mo, mn)])
            pos = mo + mn
        if pos < off + n:
            pieces.append(self.read_bytes(pos, off + n - pos))
        return b"".join(pieces)

    def holds_any(self, offset: int, length: int) -> bool:
        """Whether an earlier read holds any byte of ``[offset, offset + length)``."""
        return length > 0 and _gaps(self._held(), offset, length) != [(offset, length)]

    def column_index(self, rg: int, col: int) -> ColumnIndex | None:
        """The chunk's ColumnIndex, or None if the writer wrote none. Cached."""
        key = (rg, col)
        if key in self._column_indexes:
            return self._column_indexes[key]
        cc = self.column_chunk(rg, col)
        r = self._check_region(
            cc.column_index_offset, cc.column_index_length, "column index", rg, col
        )
        ci: ColumnIndex | None = None
        if r is not None:
            raw = self.read_bytes(*r)
            obj = self._decode_at(ColumnIndex, raw, r[0], "column index", rg, col)
            assert isinstance(obj, ColumnIndex)
            ci = obj
        self._column_indexes[key] = ci
        return ci

    def offset_index(self, rg: int, col: int) -> OffsetIndex | None:
        """The chunk's OffsetIndex, checked for consistency, or None. Cached."""
        key = (rg, col)
        if key in self._offset_indexes:
            return self._offset_indexes[key]
        cc = self.column_chunk(rg, col)
        r = self._check_region(
            cc.offset_index_offset, cc.offset_index_length, "offset index", rg, col
        )
        oi: OffsetIndex | None = None
        if r is not None:
            raw = self.read_bytes(*r)
            obj = self._decode_at(OffsetIndex, raw, r[0], "offset index", rg, col)
            assert isinstance(obj, OffsetIndex)
            check_offset_index(obj, self.column_meta(rg, col), self.row_group_rows(rg),
                               path=self.path, row_group=rg,
                               column=self.schema.leaves[col].name)
            oi = obj
        self._offset_indexes[key] = oi
        return oi

    def adopt_offset_index(self, rg: int, col: int, oi: OffsetIndex) -> None:
        """Use ``oi`` (built from the page headers, checked) for a chunk the file gives
        no offset index: later reads of the chunk can then take single pages."""
        cc = self.column_chunk(rg, col)
        if cc.offset_index_offset is None or cc.offset_index_length is None:
            self._offset_indexes[(rg, col)] = oi

    def held_offset_index(self, rg: int, col: int) -> OffsetIndex | None:
        """The chunk's OffsetIndex when it is known without a request (decoded before,
        or its bytes held, as the tail holds a small file's page index); else None."""
        key = (rg, col)
        if key not in self._offset_indexes:
            cc = self.column_chunk(rg, col)
            off, n = cc.offset_index_offset, cc.offset_index_length
            if off is None or n is None or n <= 0 or off < 0 or not self.has_bytes(off, n):
                return None
        return self.offset_index(rg, col)

    def page_rows(self, rg: int, col: int) -> list[int] | None:
        """Rows per data page, from the OffsetIndex; None without one."""
        oi = self.offset_index(rg, col)
        if oi is None:
            return None
        firsts = [loc.first_row_index or 0 for loc in oi.page_locations or []]
        ends = [*firsts[1:], self.row_group_rows(rg)]
        return [e - f for f, e in zip(firsts, ends, strict=True)]

    # ------------------------------------------------------------ bloom filters

    def _bloom_start(self, rg: int, col: int) -> int | None:
        off = self.column_meta(rg, col).bloom_filter_offset
        if off is None:
            return None
        limit = self.footer_offset
        if off < 4 or off >= limit:
            raise CorruptFileError(
                f"Bloom filter offset {off} is outside the data region [4, {limit})",
                path=self.path,
                row_group=rg,
                column=self.schema.leaves[col].name,
                offset=off,
            )
        return off

    def bloom_header_length(self, rg: int, col: int) -> int | None:
        """The header length the usual layout gives for the declared
        ``bloom_filter_length`` (numBytes, BLOCK, XXHASH, UNCOMPRESSED), so header and
        blocks can be read in one wave; None when the length is not declared or fits
        no such header. Checked against the header when it is read."""
        cmd = self.column_meta(rg, col)
        total, off = cmd.bloom_filter_length, cmd.bloom_filter_offset
        if not total or off is None or total > self.footer_offset - off:
            return None
        key = ("bloom_header_length", rg, col)
        if key not in self.derived:
            found = None
            for hlen in range(15, 20):  # 14 fixed bytes + a 1..5-byte varint
                nbytes = total - hlen
                if (nbytes >= BLOCK_BYTES and not nbytes % BLOCK_BYTES
                        and len(encode(_usual_bloom_header(nbytes))) == hlen):
                    found = hlen
                    break
            self.derived[key] = found
        result: int | None = self.derived[key]
        return result

    def bloom_probe_ranges(
        self, rg: int, col: int, hashes: Iterable[int]
    ) -> list[tuple[int, int]]:
        """What :meth:`bloom_probe` lookups of ``hashes`` read: the header and the block
        of each hash when the layout is predictable, else a small over-read of the header."""
        off = self._bloom_start(rg, col)
        if off is None:
            return []
        hlen = self.bloom_header_length(rg, col)
        if hlen is None:
            return [(off, min(_BLOOM_HEADER_PROBE, self.footer_offset - off))]
        total = self.column_meta(rg, col).bloom_filter_length or 0
        nblocks = (total - hlen) // BLOCK_BYTES
        base = off + hlen
        hs = hashes if isinstance(hashes, Sequence) else list(hashes)
        if len(hs) > 64 and nblocks > 0:  # a long IN list: its blocks found in numpy
            import numpy as np

            h = np.fromiter(hs, dtype=np.uint64, count=len(hs))
            idx = np.unique(((h >> np.uint64(32)) * np.uint64(nblocks)) >> np.uint64(32))
            return [(off, hlen)] + [(base + int(i) * BLOCK_BYTES, BLOCK_BYTES)
                                    for i in idx.tolist()]
        blocks = {base + block_index(h, nblocks) * BLOCK_BYTES for h in hs}
        return [(off, hlen)] + [(b, BLOCK_BYTES) for b in sorted(blocks)]

    def _bloom_header(
        self, rg: int, col: int, *, whole: bool = False
    ) -> tuple[int, BloomFilterHeader, int, bytes] | None:
        """Offset, header, header length and the bytes read with it. ``whole`` reads the
        declared length at once (header and bitset in one request)."""
        off = self._bloom_start(rg, col)
        if off is None:
            return None
        name = self.schema.leaves[col].name
        limit = self.footer_offset
        declared = self.column_meta(rg, col).bloom_filter_length
        predicted = self.bloom_header_length(rg, col)
        first = declared if whole and declared and 0 < declared <= limit - off else predicted
        # Reads to try, shortest first: the predicted header is checked against the
        # declared length; a header longer than the probe is read again, longer.
        tries = [first] if first else []
        tries += [min(_BLOOM_HEADER_PROBE, limit - off), min(4096, limit - off)]
        header: BloomFilterHeader | None = None
        hlen = 0
        raw = b""
        error: ThriftError | None = None
        for n in tries:
            raw = self.read_bytes(off, n)
            try:
                header, hlen = decode(BloomFilterHeader, raw)
            except ThriftError as e:
                error, header = e, None
                if n == first or e.offset >= n - 16:
                    continue  # cut short: try a longer read
                break
            if n == predicted and n != declared and (
                    hlen != predicted or header.numBytes != (declared or 0) - predicted):
                header = None  # not the usual layout: read the header as if unknown
                continue
            break
        if header is None:
            assert error is not None
            raise CorruptFileError(
                f"corrupt Bloom filter header: {error.reason}",
                path=self.path,
                row_group=rg,
                column=name,
                offset=off + error.offset,
            ) from None
        assert header is not None
        nbytes = header.numBytes
        if (
            nbytes is None
            or nbytes < BLOCK_BYTES
            or nbytes % BLOCK_BYTES
            or nbytes > MAX_BLOOM_BYTES
            or off + hlen + nbytes > limit
        ):
            raise CorruptFileError(
                f"Bloom filter bitset of {nbytes} bytes is invalid or runs past the data region",
                path=self.path,
                row_group=rg,
                column=name,
                offset=off,
            )
        if (
            header.algorithm is None
            or header.algorithm.BLOCK is None
            or (header.hash is None or header.hash.XXHASH is None)
            or header.compression is None
            or header.compression.UNCOMPRESSED is None
        ):
            raise UnsupportedError(
                "Bloom filter uses an unknown algorithm, hash or compression",
                path=self.path,
                row_group=rg,
                column=name,
                offset=off,
            )
        return off, header, hlen, raw

    def bloom_filter(self, rg: int, col: int) -> BloomFilter | None:
        """The chunk's whole split-block Bloom filter, or None if it has none."""
        found = self._bloom_header(rg, col, whole=True)
        if found is None:
            return None
        off, header, hlen, raw = found
        nbytes = header.numBytes or 0
        if hlen + nbytes <= len(raw):
            bitset = raw[hlen : hlen + nbytes]
        else:
            bitset = self.read_bytes(off + hlen, nbytes)
        return BloomFilter(header, bitset)

    def bloom_probe(self, rg: int, col: int) -> BloomProbe | None:
        """The chunk's Bloom filter for lookups that read one 32-byte block each (from
        :meth:`prefetch` when :meth:`bloom_probe_ranges` was read), or None."""
        found = self._bloom_header(rg, col)
        if found is None:
            return None
        off, header, hlen, _ = found
        return BloomProbe(header, off + hlen, header.numBytes or 0, self.read_bytes)

    # ------------------------------------------------------------ pages

    def page_header(self, offset: int, rg: int, col: int) -> tuple[PageHeader, int]:
        """Decode the page header at ``offset``; returns it and its length in bytes."""
        start, length = chunk_range(self.column_meta(rg, col))
        end = start + length
        name = self.schema.leaves[col].name
        if not start <= offset < end:
            raise CorruptFileError(
                f"page offset {offset} is outside its column chunk [{start}, {end})",
                path=self.path,
                row_group=rg,
                column=name,
                offset=offset,
            )
        n = min(_PAGE_HEADER_PROBE, end - offset)
        while True:
            raw = self.read_bytes(offset, n, keep=True)  # the page is often read next
            try:
                ph, hlen = decode(PageHeader, raw)
                break
            except ThriftError as e:
                if n < end - offset:
                    n = min(n * 4, end - offset)  # statistics can make a header long
                    continue
                raise CorruptFileError(
                    f"corrupt page header: {e.reason}",
                    path=self.path,
                    row_group=rg,
                    column=name,
                    offset=offset + e.offset,
                ) from None
        size = ph.compressed_page_size
        if size is None or size < 0 or offset + hlen + size > end:
            raise CorruptFileError(
                f"page of {size} bytes runs past its column chunk's end {end}",
                path=self.path,
                row_group=rg,
                column=name,
                offset=offset,
            )
        return ph, hlen

    def dictionary_page(self, rg: int, col: int) -> DictionaryPage | None:
        """The chunk's dictionary page, or None.

        ``dictionary_page_offset`` may be absent or 0 (some writers set 0 for "none",
        others point ``data_page_offset`` at the dictionary), so the first page's
        header decides when the footer is not explicit.
        """
        key = (rg, col)
        if key not in self._dictionary_pages:
            self._dictionary_pages[key] = self._find_dictionary_page(rg, col)
        return self._dictionary_pages[key]

    def _find_dictionary_page(self, rg: int, col: int) -> DictionaryPage | None:
        cmd = self.column_meta(rg, col)
        dpo = cmd.dictionary_page_offset
        if dpo is not None and dpo > 0:
            candidate = dpo
        else:
            stats = cmd.encoding_stats
            if stats is not None:
                if not any(s.page_type == PageType.DICTIONARY_PAGE for s in stats):
                    return None
            elif cmd.encodings and not _DICTIONARY_ENCODINGS & set(cmd.encodings):
                return None
            candidate = chunk_range(cmd)[0]
        ph, hlen = self.page_header(candidate, rg, col)
        if ph.type != PageType.DICTIONARY_PAGE:
            return None
        return DictionaryPage(candidate, hlen, ph)

    def dictionary_extent(self, rg: int, col: int) -> tuple[int, int] | None:
        """``(offset, length)`` of the bytes before the first data page, without reading:
        the dictionary page when there is one. None when only a read can tell."""
        cmd = self.column_meta(rg, col)
        dpo, first_data = cmd.dictionary_page_offset, cmd.data_page_offset
        if dpo and first_data and 4 <= dpo < first_data:
            return dpo, first_data - dpo  # the footer says where the data pages begin
        oi = self._offset_indexes.get((rg, col))
        start, _ = chunk_range(cmd)
        if oi is not None and oi.page_locations:
            first = oi.page_locations[0].offset or start
            return (start, first - start) if first > start else None
        return None

    def data_page_count(self, rg: int, col: int) -> int:
        """Data pages of a chunk without reading anything: the offset index when it is
        loaded, else the footer's encoding stats, else 1 (the chunk counted as one)."""
        oi = self._offset_indexes.get((rg, col))
        if oi is not None and oi.page_locations:
            return len(oi.page_locations)
        key = ("data_page_count", rg, col)
        known = self.derived.get(key)
        if known is None:
            known = self.derived[key] = self._footer_page_count(rg, col)
        return int(known)

    def _footer_page_count(self, rg: int, col: int) -> int:
        stats = self.column_meta(rg, col).encoding_stats
        if stats is not None:
            n = sum(
                s.count or 0
                for s in stats
                if s.page_type in (PageType.DATA_PAGE, PageType.DATA_PAGE_V2)
            )
            if n > 0:
                return n
        return 1

    def pages_need_dictionary(self, rg: int, col: int, pages: Iterable[int]) -> bool:
        """Whether decoding data pages ``pages`` may need the chunk's dictionary page.

        False only when the footer's encoding stats say so: no data page is
        dictionary-encoded, or the chosen pages all come after the chunk's
        dictionary-encoded ones (writers fall back to PLAIN once a dictionary is
        full and never return to it: parquet-cpp, parquet-java, arrow-rs). A hint
        for what to fetch: a page that turns out to be dictionary-encoded has its
        dictionary read on demand, never decoded without it.
        """
        key = ("dictionary_pages", rg, col)
        known = self.derived.get(key)
        if known is None:
            known = self._leading_dictionary_pages(rg, col)
            if known is None:
                return True
            self.derived[key] = known
        return any(p < known for p in pages)

    def _leading_dictionary_pages(self, rg: int, col: int) -> int | None:
        """How many data pages (the first ones) are dictionary-encoded, when the
        encoding stats and the offset index agree on the page count; else None."""
        stats = self.column_meta(rg, col).encoding_stats
        if not stats:
            return None
        total = encoded = 0
        for s in stats:
            if s.page_type in (PageType.DATA_PAGE, PageType.DATA_PAGE_V2):
                n = s.count or 0
                total += n
                if s.encoding in _DICTIONARY_ENCODINGS:
                    encoded += n
        if encoded == 0:
            return 0
        oi = self._offset_indexes.get((rg, col))
        if oi is None or len(oi.page_locations or []) != total:
            return None
        return encoded

    def all_dictionary_encoded(self, rg: int, col: int) -> bool | None:
        """Whether every data page is dictionary-encoded; None when the footer can't tell."""
        cmd = self.column_meta(rg, col)
        if cmd.encoding_stats is None:
            return None
        data = [
            s
            for s in cmd.encoding_stats
            if s.page_type in (PageType.DATA_PAGE, PageType.DATA_PAGE_V2)
        ]
        return bool(data) and all(s.encoding in _DICTIONARY_ENCODINGS for s in data)

    def all_plain_encoded(self, rg: int, col: int) -> bool | None:
        """Whether every data page is PLAIN-encoded and there is no dictionary page;
        None when the footer can't tell. Without encoding stats, from the chunk's list
        of encodings, whose RLE / BIT_PACKED are levels (only a BOOLEAN leaf, not asked
        about here, stores values that way)."""
        cmd = self.column_meta(rg, col)
        if cmd.encoding_stats is not None:
            data = [s for s in cmd.encoding_stats
                    if s.page_type in (PageType.DATA_PAGE, PageType.DATA_PAGE_V2)]
            return bool(data) and all(
                s.encoding == Encoding.PLAIN for s in data) and not any(
                s.page_type == PageType.DICTIONARY_PAGE for s in cmd.encoding_stats)
        if not cmd.encodings:
            return None
        levels_or_plain = {Encoding.PLAIN, Encoding.RLE, Encoding.BIT_PACKED}
        return set(cmd.encodings) <= levels_or_plain and not cmd.dictionary_page_offset


def _give_back(owner: int) -> None:
    KEPT_PAGES.give_back(owner)
    DICTIONARY_EVIDENCE.give_back(owner)
    DECODED_DICTIONARIES.give_back(owner)


_Held = tuple[list[int], dict[int, tuple[int, "bytes | memoryview"]]]


def _gaps(held: _Held, offset: int, length: int) -> list[tuple[int, int]]:
    """The parts of ``[offset, offset + length)`` outside the bytes ``held``
    (``ParquetFile._held``), in order."""
    return [(o, n) for o, n, span in _pieces(held, offset, length) if span is None]


def _pieces(held: _Held, offset: int, length: int
            ) -> list[tuple[int, int, tuple[int, bytes | memoryview] | None]]:
    """``[offset, offset + length)`` cut at the edges of the bytes ``held``, in
    order: ``(offset, length, (start, bytes))`` for a held part (the bytes of the
    span starting at ``start``), ``(offset, length, None)`` for a gap."""
    starts, spans = held
    out: list[tuple[int, int, tuple[int, bytes | memoryview] | None]] = []
    pos, end = offset, offset + length
    i = max(bisect.bisect_right(starts, pos) - 1, 0)
    while i < len(starts) and starts[i] < end:
        s = starts[i]
        span = spans.get(s)  # one lookup: another thread may drop it meanwhile
        if span is not None and span[0] > pos:
            if s > pos:
                out.append((pos, s - pos, None))
                pos = s
            stop = min(end, span[0])
            out.append((pos, stop - pos, (s, span[1])))
            pos = stop
            if pos >= end:
                return out
        i += 1
    if pos < end:
        out.append((pos, end - pos, None))
    return out


def _usual_bloom_header(num_bytes: int) -> BloomFilterHeader:
    """The header every known writer writes: split blocks, XXH64, uncompressed."""
    return BloomFilterHeader(
        numBytes=num_bytes,
        algorithm=BloomFilterAlgorithm(BLOCK=SplitBlockAlgorithm()),
        hash=BloomFilterHash(XXHASH=XxHash()),
        compression=BloomFilterCompression(UNCOMPRESSED=Uncompressed()),
    )


def leaf_indices(pf: ParquetFile, names: Sequence[str] | None) -> list[int]:
    """Leaf positions for dotted names (all leaves when ``names`` is None)."""
    if names is None:
        return list(range(len(pf.schema.leaves)))
    out = []
    for n in names:
        hits = [c.index for c in pf.schema.leaves if c.name == n or c.name.startswith(n + ".")]
        if not hits:
            from pqindex.errors import UserInputError

            known = ", ".join(c.name for c in pf.schema.leaves[:20])
            raise UserInputError(f"no column named {n!r} (columns: {known})", path=pf.path)
        out += hits
    return out
