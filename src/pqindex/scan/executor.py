"""Executing a file's access plan: fetch byte ranges, decode pages, late materialization.

Per row group that may match:

1. rows the page level could not decide (``maybe - all``) are checked exactly:
   the predicate columns' pages overlapping them are fetched and decoded, the
   predicate is evaluated with pyarrow.compute, giving the exact matching rows
   (together with ``all``, the rows every index agreed match);
2. only then are the projected columns' pages that hold those rows fetched,
   decoded and cut to the matching rows.

Byte ranges are computed first (a pure function of the plan and the offset
index), then coalesced and read — one counted request per coalesced range.
A column without an offset index is read as a whole chunk through pyarrow.
Where :mod:`pqindex.scan.encoded` handles a chunk (numpy on the encoded pages),
it goes first and pyarrow decodes the rest.
"""

from __future__ import annotations

import bisect
import io
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from pqindex.errors import CorruptFileError, PqIndexError
from pqindex.expr.bind import BoundExpr, BoundTrue
from pqindex.expr.evaluate import to_arrow_mask, true_positions
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.format.row_ranges import RowRanges
from pqindex.io.source import coalesce
from pqindex.plan.planner import FilePlan, RowGroupPlan, leaves
from pqindex.scan import encoded
from pqindex.scan.page_decode import (
    decode_columns,
    decode_field_pages,
    decode_pages,
    field_byte_ranges,
    page_byte_ranges,
)

__all__ = [
    "ScanOptions",
    "ScanStats",
    "pyarrow_opens_free",
    "read_row_group",
    "read_whole_row_groups",
    "scan_row_group",
]


@dataclass(frozen=True)
class ScanOptions:
    """How the scanner reads: the gap under which byte ranges are merged."""

    coalesce_gap: int = 64 * 1024


@dataclass
class ScanStats:
    """What executing one file's plan did."""

    row_groups_read: int = 0
    pages_read: int = 0
    rows_out: int = 0
    fetch_seconds: float = 0.0
    decode_seconds: float = 0.0
    data_bytes: int = 0
    warnings: list[str] = field(default_factory=list)


class _Buffers:
    """Fetched byte ranges of one row group, served to the page decoder."""

    def __init__(self, pf: ParquetFile, stats: ScanStats, gap: int) -> None:
        self.pf = pf
        self.stats = stats
        self.gap = gap
        self._starts: list[int] = []
        self._bufs: list[bytes] = []

    def fetch(self, ranges: Sequence[tuple[int, int]]) -> None:
        missing = [
            (o, n)
            for o, n in ranges
            if n > 0 and not self._covered(o, n) and not self.pf.has_bytes(o, n)
        ]
        if not missing:
            return
        t0 = time.perf_counter()
        for off, n in coalesce(missing, self.gap):
            buf = self.pf.read_bytes(off, n)  # parts read while planning aren't read again
            self.stats.data_bytes += n
            i = bisect.bisect(self._starts, off)
            self._starts.insert(i, off)
            self._bufs.insert(i, buf)
        self.stats.fetch_seconds += time.perf_counter() - t0

    def _find(self, offset: int, length: int) -> bytes | None:
        view = self.view(offset, length)
        return None if view is None else bytes(view)

    def view(self, offset: int, length: int) -> memoryview | None:
        """The fetched bytes at ``offset`` without a copy, if one fetch holds them all."""
        i = bisect.bisect(self._starts, offset) - 1
        while i >= 0:
            s, b = self._starts[i], self._bufs[i]
            if s <= offset and offset + length <= s + len(b):
                return memoryview(b)[offset - s : offset - s + length]
            if s + len(b) < offset:
                break
            i -= 1
        return None

    def _covered(self, offset: int, length: int) -> bool:
        return self.view(offset, length) is not None

    def __call__(self, offset: int, length: int) -> bytes:
        b = self._find(offset, length)
        if b is None:
            b = self.pf.read_bytes(offset, length)
        return b


class _SourceFile(io.RawIOBase):
    """A file as a file object for pyarrow: reads go through ``ParquetFile.read_bytes``,
    so they are counted, and bytes already read (the tail) are not read again."""

    def __init__(self, pf: ParquetFile, buffers: _Buffers | None = None) -> None:
        self._pf = pf
        self._src = pf.source
        self._buffers = buffers
        self._fetch: Callable[[int, int], bytes] = buffers or pf.read_bytes
        self._pos = 0

    def read(self, size: int = -1) -> bytes | memoryview:
        # pyarrow wraps what read() returns without copying: hand it fetched bytes as is.
        n = self._src.size() - self._pos if size < 0 else min(size, self._src.size() - self._pos)
        if n <= 0:
            return b""
        data: bytes | memoryview | None = (
            self._buffers.view(self._pos, n) if self._buffers is not None else None
        )
        if data is None:
            data = self._fetch(self._pos, n)
        self._pos += n
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        size = self._src.size()
        self._pos = pos if whence == 0 else self._pos + pos if whence == 1 else size + pos
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, b: Any) -> int:
        n = min(len(b), self._src.size() - self._pos)
        if n <= 0:
            return 0
        data = self._fetch(self._pos, n)
        b[:n] = data
        self._pos += n
        return n


def _positions(first_rows: np.ndarray, counts: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Index of each wanted row in the concatenation of the decoded pages."""
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])) if counts.size else counts
    page = np.searchsorted(first_rows, rows, side="right") - 1
    return np.asarray(starts[page] + (rows - first_rows[page]), dtype=np.int64)


# Up to this many row intervals are cut with zero-copy slices; more use one take.
_MAX_SLICES = 256


def _cut(arr: Any, first_rows: np.ndarray, counts: np.ndarray, rows: RowRanges) -> Any:
    """The rows ``rows`` out of ``arr``, the decoded concatenation of pages that start at
    ``first_rows`` and hold ``counts`` rows. Every row of ``rows`` lies in those pages."""
    if rows.count() == len(arr):
        return arr
    if len(rows) <= _MAX_SLICES:
        starts = np.concatenate(([0], np.cumsum(counts)[:-1])) if counts.size else counts
        pieces = []
        for s, e in rows.intervals():
            p = int(np.searchsorted(first_rows, s, side="right")) - 1
            pieces.append(arr.slice(int(starts[p] + s - first_rows[p]), e - s))
        if len(pieces) == 1:
            return pieces[0]
        return pa.concat_arrays(pieces) if isinstance(arr, pa.Array) else pa.chunked_array(
            [c for piece in pieces for c in piece.chunks], type=arr.type
        )
    return arr.take(pa.array(_positions(first_rows, counts, rows.to_indices())))


def _arrow_metadata(pf: ParquetFile) -> pq.FileMetaData:
    """pyarrow's view of the footer we already read (no second footer read)."""
    md = pf.derived.get("arrow_metadata")
    if md is None:
        buf = b"PAR1" + pf.footer_bytes + struct.pack("<I", len(pf.footer_bytes)) + b"PAR1"
        md = pq.read_metadata(pa.BufferReader(buf))
        pf.derived["arrow_metadata"] = md
    return md


def _leaf_array(arr: Any, path: Sequence[str]) -> Any:
    """The leaf under a decoded top-level field, with its parents' nulls applied."""
    for name in path[1:]:
        if not pa.types.is_struct(arr.type):
            return arr
        children = arr.flatten()
        idx = arr.type.get_field_index(name)
        arr = children[idx]
    return arr


class _RowGroupReader:
    def __init__(
        self,
        pf: ParquetFile,
        plan: RowGroupPlan,
        schema: pa.Schema,
        stats: ScanStats,
        options: ScanOptions,
    ) -> None:
        self.pf = pf
        self.rg = plan.index
        self.plan = plan
        self.schema = schema
        self.stats = stats
        self.buffers = _Buffers(pf, stats, options.coalesce_gap)
        self.n = pf.row_group_rows(plan.index)
        self._decoded: dict[int, dict[int, pa.Array]] = {}
        self._whole_cache: dict[str, pa.Array] = {}
        self._dictionaries = encoded.Dictionaries.of(pf)

    def _view(self, offset: int, length: int) -> bytes | memoryview:
        view = self.buffers.view(offset, length)
        return self.buffers(offset, length) if view is None else view

    def _encoded_pages(self, col: int, pages: list[int], target: pa.DataType) -> Any:
        """Pages of a flat fixed-width leaf decoded with numpy (None: use pyarrow)."""
        return encoded.decode_pages(
            self.pf, self.rg, col, pages, self._view, target, self._dictionaries
        )

    def _pages_for(
        self, col: int, rows: RowRanges
    ) -> tuple[list[int], np.ndarray, np.ndarray] | None:
        key = ("page_firsts", self.rg, col)
        known = self.pf.derived.get(key)  # per file: warm queries skip the rebuild
        if known is None:
            oi = self.pf.offset_index(self.rg, col)
            if oi is None:
                return None
            locs = oi.page_locations or []
            firsts = np.array([loc.first_row_index or 0 for loc in locs], dtype=np.int64)
            known = self.pf.derived[key] = (firsts, np.diff(np.append(firsts, self.n)))
        firsts, counts = known
        pages = [int(p) for p in rows.overlapping_pages(firsts, self.n)]
        return pages, firsts, counts

    def whole_fields(self, names: Sequence[str], *, as_dictionary: bool = False
                     ) -> dict[str, Any]:
        """Top-level fields of the whole row group, read by pyarrow itself.

        Used when every row is wanted (no offset index needed: a full scan reads no
        index bytes) and for chunks without an offset index. pyarrow gets the
        footer we already decoded and reads through the counting source.
        """
        todo = [n for n in names if n not in self._whole_cache]
        if todo:
            # Fetch the chunks ourselves (coalesced, once); pyarrow then reads from memory.
            cols = [c.index for c in self.pf.schema.leaves if c.path[0] in todo]
            self.buffers.fetch([chunk_range(self.pf.column_meta(self.rg, c)) for c in cols])
            t0 = time.perf_counter()
            # Dictionary-encoded string chunks stay dictionaries for predicates: one
            # comparison per distinct value instead of one per row.
            dictionary = [
                n for n in todo if as_dictionary and self._dictionary_string(n)
            ] or None
            reader = pq.ParquetFile(
                _SourceFile(self.pf, self.buffers), metadata=_arrow_metadata(self.pf),
                pre_buffer=True, read_dictionary=dictionary,
            )
            table = reader.read_row_group(self.rg, columns=todo, use_threads=len(todo) > 1)
            for n in todo:
                self._whole_cache[n] = table.column(n).combine_chunks()
                for leaf in self.pf.schema.leaves:
                    if leaf.path[0] == n:
                        self.stats.pages_read += self.pf.data_page_count(self.rg, leaf.index)
            self.stats.decode_seconds += time.perf_counter() - t0
        return {n: self._whole_cache[n] for n in names}

    def _dictionary_string(self, name: str) -> bool:
        leaves = [c for c in self.pf.schema.leaves if c.path[0] == name]
        return (
            len(leaves) == 1
            and len(leaves[0].path) == 1
            and leaves[0].element.type == 6  # BYTE_ARRAY
            and self.pf.all_dictionary_encoded(self.rg, leaves[0].index) is True
        )

    def _whole(self, field_name: str, *, as_dictionary: bool = False) -> pa.Array:
        arr: pa.Array = self.whole_fields([field_name], as_dictionary=as_dictionary)[field_name]
        target = self.schema.field(field_name).type
        if not as_dictionary and arr.type != target:
            arr = arr.cast(target)
        return arr

    def _decode_leaf(
        self, col: int, rows: RowRanges, target: pa.DataType, *, as_dictionary: bool = False
    ) -> pa.Array | None:
        """One leaf's pages overlapping ``rows``, cut to them; None without an offset index."""
        found = self._pages_for(col, rows)
        if found is None:
            return None
        pages, firsts, counts = found
        if not pages:
            return pa.array([], type=target)
        # Pages decoded earlier (by the predicate pass) are reused; only the rest is
        # decoded now, and each page is counted once.
        cache = self._decoded.setdefault(col, {})
        missing = [p for p in pages if p not in cache]
        t0 = time.perf_counter()
        if missing:
            self.buffers.fetch(page_byte_ranges(self.pf, self.rg, col, missing))
            arr = self._encoded_pages(col, missing, target)
            if arr is None:
                arr, _ = decode_pages(
                    self.pf, self.rg, col, missing, self.buffers, arrow_type=target,
                    as_dictionary=as_dictionary,
                )
            self.stats.pages_read += len(missing)
            start = 0
            for p in missing:
                cache[p] = arr.slice(start, int(counts[p]))
                start += int(counts[p])
        pieces = [cache[p] for p in pages]
        if len({piece.type for piece in pieces}) > 1 or (
            len(pieces) > 1 and pa.types.is_dictionary(pieces[0].type)
        ):
            # Dictionary-decoded pieces from separate decodes don't share a dictionary.
            pieces = [piece.cast(target) if piece.type != target else piece for piece in pieces]
        arr = pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)
        out = _cut(arr, firsts[pages], counts[pages], rows)
        if not as_dictionary and out.type != target:
            out = out.cast(target)
        self.stats.decode_seconds += time.perf_counter() - t0
        return out

    def field(self, field_name: str, rows: RowRanges) -> pa.Array:
        """A top-level field's values at ``rows`` (sorted row numbers of this row group)."""
        leaf_cols = [c.index for c in self.pf.schema.leaves if c.path[0] == field_name]
        target = self.schema.field(field_name).type
        whole_rg = (np.zeros(1, dtype=np.int64), np.array([self.n], dtype=np.int64))
        if rows.count() == self.n or field_name in self._whole_cache:
            return _cut(self._whole(field_name), *whole_rg, rows)
        if len(leaf_cols) == 1:
            out = self._decode_leaf(leaf_cols[0], rows, target)
            if out is not None:
                return out
        elif all(self.pf.offset_index(self.rg, c) is not None for c in leaf_cols):
            # Leaves of one field paginate differently: decode their whole chunks.
            per_leaf = []
            for c in leaf_cols:
                oi = self.pf.offset_index(self.rg, c)
                assert oi is not None
                per_leaf.append(list(range(len(oi.page_locations or []))))
            self.buffers.fetch(field_byte_ranges(self.pf, self.rg, leaf_cols, per_leaf))
            t0 = time.perf_counter()
            arr = decode_field_pages(
                self.pf, self.rg, leaf_cols, per_leaf, self.buffers, arrow_type=target
            )
            self.stats.pages_read += sum(len(p) for p in per_leaf)
            out = _cut(arr, *whole_rg, rows)
            self.stats.decode_seconds += time.perf_counter() - t0
            return out
        return _cut(self._whole(field_name), *whole_rg, rows)

    def _flat_groups(
        self, names: Sequence[str], rows: RowRanges
    ) -> dict[tuple[tuple[int, int], ...], list[tuple[str, int, list[int], Any, Any]]]:
        """Flat single-leaf fields not decoded yet, grouped by the row spans of their
        pages overlapping ``rows`` (a group's pages line up)."""
        groups: dict[tuple[tuple[int, int], ...], list[tuple[str, int, list[int], Any, Any]]] = {}
        for name in names:
            leaves = [c for c in self.pf.schema.leaves if c.path[0] == name]
            if (
                len(leaves) != 1
                or len(leaves[0].path) != 1
                or leaves[0].index in self._decoded
                or name in self._whole_cache
            ):
                continue  # nested, or already decoded by the predicate pass
            found = self._pages_for(leaves[0].index, rows)
            if found is None or not found[0]:
                continue
            pages, firsts, counts = found
            key = tuple(
                (int(firsts[p]), int(firsts[p] + counts[p])) for p in pages
            )
            groups.setdefault(key, []).append((name, leaves[0].index, pages, firsts, counts))
        return groups

    def _decode_group(self, members: list[tuple[str, int, list[int], Any, Any]]) -> list[Any]:
        """Decode the pages of aligned columns in one pass; the pages are kept for reuse."""
        cols = [m[1] for m in members]
        ranges = [r for m in members for r in page_byte_ranges(self.pf, self.rg, m[1], m[2])]
        self.buffers.fetch(ranges)
        t0 = time.perf_counter()
        types = [self.schema.field(m[0]).type for m in members]
        arrays = [self._encoded_pages(m[1], m[2], t) for m, t in zip(members, types, strict=True)]
        rest = [i for i, a in enumerate(arrays) if a is None]
        if rest:
            for i, arr in zip(rest, decode_columns(
                self.pf, self.rg, [cols[i] for i in rest], [members[i][2] for i in rest],
                self.buffers, arrow_types=[types[i] for i in rest],
            ), strict=True):
                arrays[i] = arr
        for (_name, col, pages, _firsts, counts), arr in zip(members, arrays, strict=True):
            self.stats.pages_read += len(pages)
            cache = self._decoded.setdefault(col, {})
            start = 0
            for p in pages:
                cache[p] = arr.slice(start, int(counts[p]))
                start += int(counts[p])
        self.stats.decode_seconds += time.perf_counter() - t0
        return arrays

    def flat_fields(self, names: Sequence[str], rows: RowRanges) -> dict[str, Any]:
        """Flat single-leaf fields whose pages for ``rows`` line up, decoded together."""
        if rows.count() == self.n:
            return {n: self._whole(n) for n in names}
        out: dict[str, Any] = {}
        for members in self._flat_groups(names, rows).values():
            if len(members) < 2:
                continue
            arrays = self._decode_group(members)
            for (name, _col, pages, firsts, counts), arr in zip(members, arrays, strict=True):
                out[name] = _cut(arr, firsts[pages], counts[pages], rows)
        return out

    def encoded_matches(self, expr: BoundExpr, col: int) -> np.ndarray | None:
        """Rows of the whole row group where ``expr``, a predicate on the flat leaf
        ``col`` alone, holds: evaluated on the encoded pages (see
        :mod:`pqindex.scan.encoded`); None where pyarrow decodes instead."""
        leaf = self.pf.leaf(col)
        name = leaf.path[0]
        target = self.schema.field(name).type
        if name in self._whole_cache or not encoded.worth_matching(self.pf, self.rg, col, target):
            return None
        start, length = chunk_range(self.pf.column_meta(self.rg, col))
        self.buffers.fetch([(start, length)])
        t0 = time.perf_counter()
        raw = self.buffers.view(start, length)
        rows = encoded.matching_rows(
            self.pf, self.rg, col, target, self.buffers(start, length) if raw is None else raw,
            lambda arr: to_arrow_mask(expr, pa.table({name: arr})),
        )
        if rows is not None:
            self.stats.pages_read += self.pf.data_page_count(self.rg, col)
        self.stats.decode_seconds += time.perf_counter() - t0
        return rows

    def leaf_values(self, col: int, rows: RowRanges) -> Any:
        """The values of one leaf at ``rows`` (struct parents' nulls applied)."""
        leaf = self.pf.leaf(col)
        target = self.schema.field(leaf.path[0]).type
        if rows.count() == self.n or leaf.path[0] in self._whole_cache:
            whole_rg = (np.zeros(1, dtype=np.int64), np.array([self.n], dtype=np.int64))
            arr = _cut(self._whole(leaf.path[0], as_dictionary=True), *whole_rg, rows)
            return _leaf_array(arr, leaf.path)
        dictionary = self.pf.all_dictionary_encoded(self.rg, col) is True
        arr = self._decode_leaf(col, rows, target, as_dictionary=dictionary)
        if arr is None:
            arr = self.field(leaf.path[0], rows)
        return _leaf_array(arr, leaf.path)


def _rows_at(ranges: RowRanges, positions: np.ndarray) -> np.ndarray:
    """Row numbers of the given positions within the concatenation of ``ranges``."""
    lengths = ranges.ends - ranges.starts
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    k = np.searchsorted(offsets, positions, side="right") - 1
    return np.asarray(ranges.starts[k] + (positions - offsets[k]), dtype=np.int64)


def _ranges_from_indices(idx: np.ndarray) -> RowRanges:
    if idx.size == 0:
        return RowRanges.empty()
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    starts = idx[np.concatenate(([0], breaks))]
    ends = idx[np.concatenate((breaks - 1, [idx.size - 1]))] + 1
    return RowRanges(starts, ends)


def scan_row_group(
    pf: ParquetFile,
    plan: RowGroupPlan,
    expr: BoundExpr,
    fields: Sequence[str],
    schema: pa.Schema,
    partition: dict[str, Any],
    partition_types: dict[str, pa.DataType],
    stats: ScanStats,
    options: ScanOptions,
) -> pa.Table | None:
    """The matching rows of one row group, projected to ``fields``; None if none match."""
    if plan.maybe.is_empty:
        return None
    reader = _RowGroupReader(pf, plan, schema, stats, options)
    exact = plan.all
    uncertain = plan.maybe - plan.all
    n_leaves = len(pf.schema.leaves)
    preds = [] if isinstance(expr, BoundTrue) else leaves(expr)
    found = None
    if uncertain.count() == reader.n and len({p.leaf.index for p in preds}) == 1 and (
        preds[0].leaf.index < n_leaves and pf.leaf(preds[0].leaf.index).path[0] not in fields
    ):
        # Every row of the row group, one column not returned (a returned one is decoded
        # by pyarrow once, for both): evaluated on its encoded pages.
        found = reader.encoded_matches(expr, preds[0].leaf.index)
    if found is not None:
        exact = exact | _ranges_from_indices(found)
    elif not uncertain.is_empty and not isinstance(expr, BoundTrue):
        cols: dict[str, Any] = {}
        for p in preds:
            name = p.leaf.name
            if name in cols:
                continue
            if p.leaf.index >= n_leaves:
                value = partition.get(name)
                cols[name] = pa.array([value] * uncertain.count(), type=partition_types[name])
            else:
                cols[name] = reader.leaf_values(p.leaf.index, uncertain)
        table = pa.table(cols) if cols else pa.table({"_": pa.nulls(uncertain.count())})
        t0 = time.perf_counter()
        mask = to_arrow_mask(expr, table)
        hits = true_positions(mask)
        idx = _rows_at(uncertain, hits)
        stats.decode_seconds += time.perf_counter() - t0
        exact = exact | _ranges_from_indices(idx)
    elif not uncertain.is_empty:
        exact = plan.maybe
    if exact.is_empty:
        stats.row_groups_read += 1
        return None
    stats.row_groups_read += 1
    out: dict[str, Any] = {}
    count = exact.count()
    out.update(reader.flat_fields([f for f in fields if f not in partition_types], exact))
    for name in fields:
        if name in out:
            continue
        if name in partition_types:
            out[name] = pa.array([partition.get(name)] * count, type=partition_types[name])
        else:
            out[name] = reader.field(name, exact)
    stats.rows_out += count
    if not out:
        return _empty_columns_table(count)
    return pa.table(out)


def _empty_columns_table(rows: int) -> pa.Table:
    """A table with ``rows`` rows and no columns (count-only scans)."""
    return pa.table({"_": pa.nulls(rows)}).drop_columns(["_"])


def read_row_group(
    pf: ParquetFile,
    plan: FilePlan,
    rgp: RowGroupPlan,
    expr: BoundExpr,
    fields: Sequence[str],
    schema: pa.Schema,
    partition_types: dict[str, pa.DataType],
    options: ScanOptions,
    stats: ScanStats,
) -> pa.Table | None:
    """The matching rows of one planned row group; errors name file and row group."""
    try:
        return scan_row_group(
            pf, rgp, expr, fields, schema, plan.partition, partition_types, stats, options
        )
    except PqIndexError as e:
        raise e.located(path=pf.path, row_group=rgp.index) from None
    except (pa.ArrowException, ValueError) as e:
        raise CorruptFileError(f"cannot decode: {e}", path=pf.path, row_group=rgp.index) from e


# Arrow C++ reads this much from the end of a file to find the footer.
_ARROW_FOOTER_READ = 64 * 1024


def pyarrow_opens_free(pf: ParquetFile) -> bool:
    """Whether pyarrow opening the file is served by the tail already read (no request,
    no index bytes): its speculative footer read lies inside our tail."""
    size = pf.source.size()
    n = min(size, _ARROW_FOOTER_READ)
    return pf.has_bytes(size - n, n)


def read_whole_row_groups(
    pf: ParquetFile,
    row_groups: Sequence[int],
    fields: Sequence[str],
    partition: dict[str, Any],
    partition_types: dict[str, pa.DataType],
    stats: ScanStats,
) -> pa.Table:
    """Row groups where every row is wanted, read by pyarrow's own scanner.

    Nothing to prune inside them, so pyarrow reads them as ``read_table`` would,
    decoding row groups in parallel; its reads go through the counting source (the
    footer comes from the tail already read) and it reads no index bytes.
    """
    file_fields = [f for f in fields if f not in partition_types]
    leaves = [c.index for c in pf.schema.leaves if c.path[0] in file_fields]
    fragment = pads.ParquetFileFormat().make_fragment(
        _SourceFile(pf), row_groups=list(row_groups)
    )
    t0 = time.perf_counter()
    try:
        t = fragment.to_table(columns=file_fields, use_threads=True)
    except PqIndexError as e:
        raise e.located(path=pf.path) from None
    except (pa.ArrowException, ValueError) as e:
        raise CorruptFileError(f"cannot decode: {e}", path=pf.path) from e
    for name in fields:
        if name in partition_types:
            value = pa.array([partition.get(name)] * t.num_rows, partition_types[name])
            t = t.append_column(name, value)
    stats.decode_seconds += time.perf_counter() - t0
    stats.rows_out += t.num_rows
    stats.row_groups_read += len(row_groups)
    for rg in row_groups:
        stats.pages_read += sum(pf.data_page_count(rg, c) for c in leaves)
        stats.data_bytes += sum(chunk_range(pf.column_meta(rg, c))[1] for c in leaves)
    return t.select(list(fields))
