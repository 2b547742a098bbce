"""Values of a flat fixed-width leaf's chosen data pages, or of a few rows of them,
decoded with numpy from the encoded pages (see :mod:`pqindex.scan.encoded` for the
page layouts), dictionaries decoded once per file (:class:`Dictionaries`).

When only a few rows of snappy pages are wanted, a dictionary's first use takes
only the entries those rows use, and a PLAIN page without nulls only the rows'
values (:func:`pqindex.scan.decompress.gather`): one 8-byte entry of a 1 MiB
dictionary page otherwise costs its whole decompression.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from pqindex.format.file import ParquetFile, chunk_range
from pqindex.format.schema import Codec, Encoding, PageType
from pqindex.io.cache import DECODED_DICTIONARIES
from pqindex.scan.decompress import CODECS as _CODECS
from pqindex.scan.decompress import gather
from pqindex.scan.encoded import (
    _decoded_pages,
    _Dictionary,
    _Fallback,
    _indices,
    _levels,
    _Page,
    _plain,
    _read_page,
    _Stored,
    _stored,
    _stream,
    decimal_buffer,
    decode_hybrid_at,
    stored_dtype,
)

__all__ = ["Dictionaries", "decode_pages"]


class Dictionaries:
    """Decoded fixed-width dictionaries of one file, by ``(row group, column)``.

    Decompressing a large dictionary page (up to pyarrow's 1 MiB limit) costs more
    than the data page that needs it; queries reading the same chunks again (warm)
    reuse them, within ``io.cache.DECODED_DICTIONARIES`` (per file and for all open
    files: a long-lived dataset of thousands of files grew by 64 MiB a file).
    ``owner``: the file's budget token (None: a cache of its own, unbounded, for
    tests). Thread-safe under the GIL (one insert per key; a race decodes a
    dictionary twice, harmlessly).
    """

    def __init__(self, owner: int | None = None) -> None:
        self.owner = owner
        self._items: dict[tuple[int, int], np.ndarray | None] = {}
        self._entries_taken: set[tuple[int, int]] = set()

    def first_use(self, key: tuple[int, int]) -> bool:
        """True the first time ``key`` is asked: a dictionary used once (a cold query)
        has only its wanted entries decompressed; used again, it is decoded whole
        and kept."""
        if key in self._entries_taken:
            return False
        self._entries_taken.add(key)
        return True

    def has(self, key: tuple[int, int]) -> bool:
        return key in self._items

    def get(self, key: tuple[int, int]) -> np.ndarray | None:
        return self._items[key]

    def put(self, key: tuple[int, int], value: np.ndarray | None) -> None:
        size = 0 if value is None else value.nbytes
        if self.owner is None or DECODED_DICTIONARIES.take(self.owner, size):
            self._items[key] = value

    @classmethod
    def of(cls, pf: ParquetFile) -> Dictionaries:
        """The file's cache (kept with its footer)."""
        found = pf.derived.get("encoded_dictionaries")
        if found is None:
            found = pf.derived.setdefault("encoded_dictionaries", cls(pf.budget_owner))
        assert isinstance(found, Dictionaries)
        return found


def _fill_page(page: _Page, dtype: np.dtype[Any], dictionary: np.ndarray | None,
               out: np.ndarray) -> np.ndarray | None:
    """A fixed-width page's values written to ``out`` (one per row, null slots zero);
    returns its validity. Written in place: no per-page array concatenated after."""
    if page.dictionary:
        if dictionary is None:
            raise _Fallback
        idx = _indices(page, dictionary.size)
        if page.valid is None:
            np.take(dictionary, idx, out=out)
            return None
        values = dictionary.take(idx)
    else:
        values = _plain(page, dtype)
        if page.valid is None:
            out[:] = values
            return None
    out[:] = 0
    out[page.valid] = values
    return page.valid


def _positions(page: _Page, at: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Value positions of a page's rows ``at`` (sorted) that are not null, and the
    rows' validity (None: no nulls)."""
    if page.valid is None:
        return at, None
    valid = page.valid[at]
    # Rows to value positions: nulls have no stored value.
    return (np.cumsum(page.valid) - 1)[at][valid], valid


def _page_indices_at(page: _Page, pos: np.ndarray) -> np.ndarray:
    """A dictionary page's indices at value positions ``pos``: only those unpacked."""
    body = _stream(page.body)
    try:
        return decode_hybrid_at(body, 1, len(body), body[0], page.present, pos)
    except ValueError:
        raise _Fallback from None


def _with_nulls(values: np.ndarray, valid: np.ndarray | None, dtype: np.dtype[Any]
                ) -> tuple[np.ndarray, np.ndarray | None]:
    if valid is None:
        return values, None
    full = np.zeros(valid.size, dtype=dtype)
    full[valid] = values
    return full, valid


def _gathered_plain(s: _Stored, codec: int, optional: bool, dtype: np.dtype[Any],
                    at: np.ndarray) -> np.ndarray | None:
    """The values at rows ``at`` of a PLAIN page without nulls, taken from its
    compressed part without decompressing it all (:func:`gather`); None otherwise."""
    h = s.ph.data_page_header or s.ph.data_page_header_v2
    if not s.compressed or h is None or h.encoding != Encoding.PLAIN or not at.size:
        return None
    vpos = 0
    if s.ph.type == PageType.DATA_PAGE and optional:
        # The definition levels lead the page: usually one RLE run of ones, ~6 bytes.
        head = gather(s.part, codec, s.size, np.zeros(1, dtype=np.int64), min(s.size, 64))
        if head is None or len(head) < 4:
            return None
        (ln,) = struct.unpack_from("<I", head, 0)
        dh = s.ph.data_page_header
        if (dh is None or dh.definition_level_encoding != Encoding.RLE or 4 + ln > len(head)
                or _levels(head[4 : 4 + ln], s.rows) is not None):
            return None
        vpos = 4 + ln
    elif (s.ph.data_page_header_v2 is not None and optional
          and s.ph.data_page_header_v2.num_nulls != 0):
        return None
    if vpos + s.rows * dtype.itemsize > s.size or int(at[-1]) >= s.rows:
        return None
    found = gather(s.part, codec, s.size, vpos + at.astype(np.int64) * dtype.itemsize,
                   dtype.itemsize)
    return None if found is None else np.frombuffer(found, dtype=dtype)


def decode_pages(
    pf: ParquetFile,
    rg: int,
    col: int,
    pages: Sequence[int],
    fetch: Callable[[int, int], bytes | memoryview],
    target: pa.DataType,
    dictionaries: Dictionaries,
    at: Sequence[np.ndarray] | None = None,
) -> pa.Array | None:
    """The chosen data pages (ascending) of a flat fixed-width leaf, typed ``target``;
    with ``at``, only the rows ``at[i]`` (sorted positions within page ``pages[i]``)
    of each page, in order.

    ``fetch(offset, length)`` serves the pages (OffsetIndex ranges) and the bytes
    before the first data page (the dictionary page); ``dictionaries`` keeps
    decoded dictionaries so that later calls skip them. None when
    this module does not decode these pages: the caller decodes with pyarrow.
    """
    dtype = stored_dtype(pf, col, target)
    oi = pf.offset_index(rg, col)
    leaf = pf.leaf(col)
    if (
        dtype is None or oi is None or not oi.page_locations or len(leaf.path) != 1
        or leaf.max_repetition_level or leaf.max_definition_level > 1
    ):
        return None
    meta = pf.column_meta(rg, col)
    codec = meta.codec or 0
    if codec not in _CODECS and codec != Codec.UNCOMPRESSED:
        return None
    locs = oi.page_locations
    optional = leaf.max_definition_level == 1
    key = (rg, col)

    def dictionary() -> np.ndarray | None:
        # Decoded only for a page that needs it: a large dictionary page costs more to
        # decompress than a page past the writer's fallback to PLAIN.
        if dictionaries.has(key):
            return dictionaries.get(key)
        found = None
        start = chunk_range(meta)[0]
        first = locs[0].offset or 0
        if first > start:
            item, _ = _read_page(fetch(start, first - start), 0, codec, optional, 0)
            if not isinstance(item, _Dictionary):
                raise _Fallback
            if len(item.data) < item.count * dtype.itemsize:
                raise _Fallback
            found = np.frombuffer(item.data, dtype=dtype, count=item.count)
        dictionaries.put(key, found)
        return found

    def taken(idx: np.ndarray) -> np.ndarray | None:
        # Only the dictionary entries ``idx`` from its page (a cold query wants few).
        start = chunk_range(meta)[0]
        first = locs[0].offset or 0
        if first <= start or not idx.size:
            return None
        d = _stored(fetch(start, first - start), 0)
        if (isinstance(d, int) or d.ph.type != PageType.DICTIONARY_PAGE or not d.compressed
                or d.rows * dtype.itemsize > d.size or int(idx.max()) >= d.rows):
            return None
        uniq, inverse = np.unique(idx, return_inverse=True)
        found = gather(d.part, codec, d.size, uniq.astype(np.int64) * dtype.itemsize,
                       dtype.itemsize)
        if found is None:
            return None
        out: np.ndarray = np.frombuffer(found, dtype=dtype)[inverse]
        return out

    def entries(idx: np.ndarray) -> np.ndarray:
        if not idx.size:  # only nulls wanted
            return np.empty(0, dtype=dtype)
        if not dictionaries.has(key) and dictionaries.first_use(key):
            found = taken(idx)
            if found is not None:
                return found
        d = dictionary()
        if d is None or (idx.size and int(idx.max()) >= d.size):
            raise _Fallback
        out: np.ndarray = d[idx]
        return out

    try:
        page_rows = pf.page_rows(rg, col) or []
        stored: list[tuple[_Stored, int]] = []
        for p in pages:
            loc = locs[p]
            size = loc.compressed_page_size or 0
            s = _stored(fetch(loc.offset or 0, size), 0)
            if (isinstance(s, int) or s.ph.type == PageType.DICTIONARY_PAGE
                    or s.end != size or s.rows != page_rows[p]):
                raise _Fallback
            stored.append((s, 0))
        values: list[Any] = [None] * len(stored)
        valid: list[np.ndarray | None] = [None] * len(stored)
        todo = list(range(len(stored)))
        whole: Any = None  # every row of the pages: written into one buffer
        if at is None:
            whole = pa.allocate_buffer(sum(s.rows for s, _ in stored) * dtype.itemsize)
            flat = np.frombuffer(whole, dtype=dtype)
            starts = np.cumsum([0] + [s.rows for s, _ in stored])
        if at is not None:
            # PLAIN pages without nulls: the wanted values without the whole page.
            for i, (s, _) in enumerate(stored):
                values[i] = _gathered_plain(s, codec, optional, dtype, at[i])
            todo = [i for i in todo if values[i] is None]
        wanted: list[tuple[int, np.ndarray]] = []  # dictionary pages' indices at ``at``
        for i, item in zip(todo, _decoded_pages(codec, optional, [stored[i] for i in todo]),
                           strict=True):
            assert isinstance(item, _Page)
            if at is None:
                d = dictionary() if item.dictionary else None
                seg = flat[starts[i] : starts[i + 1]]
                if item.rows != len(seg):
                    raise _Fallback
                valid[i] = _fill_page(item, dtype, d, seg)
                values[i] = seg
                continue
            pos, valid[i] = _positions(item, at[i])
            if item.dictionary:
                wanted.append((i, _page_indices_at(item, pos)))
            else:
                values[i] = _plain(item, dtype)[pos]
        if wanted:
            # One lookup for all pages: the dictionary page is read once.
            found = entries(np.concatenate([idx for _, idx in wanted]))
            cuts = np.cumsum([0] + [idx.size for _, idx in wanted])
            for k, (i, _) in enumerate(wanted):
                values[i] = found[cuts[k] : cuts[k + 1]]
        if at is not None:
            for i in range(len(stored)):
                values[i], valid[i] = _with_nulls(values[i], valid[i], dtype)
    except (_Fallback, pa.ArrowException, ValueError):
        return None
    n = sum(len(v) for v in values)
    if pa.types.is_decimal(target):
        unscaled = np.frombuffer(whole, dtype=dtype) if whole is not None else (
            values[0] if len(values) == 1 else np.concatenate(values))
        data = decimal_buffer(unscaled, target)
    elif whole is not None:
        data = whole
    else:
        data = pa.py_buffer(values[0] if len(values) == 1 else np.concatenate(values))
    bitmap = None
    nulls = 0
    if any(m is not None for m in valid):
        flags = np.concatenate([np.ones(len(v), dtype=np.bool_) if m is None else m
                                for v, m in zip(values, valid, strict=True)])
        nulls = n - int(np.count_nonzero(flags))
        bitmap = pa.py_buffer(np.packbits(flags, bitorder="little"))
    return pa.Array.from_buffers(target, n, [bitmap, data], nulls)
