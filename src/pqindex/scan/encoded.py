"""A predicate column's chunk decoded straight from its encoded pages with numpy.

pyarrow decodes whole row groups through its general reader: page by page into
builders, dictionary indices unpacked one run at a time. For the columns a
predicate must read whole, the common encodings are simple enough to decode
with a handful of numpy operations per page:

* PLAIN fixed-width values (INT32, INT64, FLOAT, DOUBLE) are the decompressed
  page bytes themselves: the Arrow array wraps them without a copy when the
  page has no nulls.
* Dictionary pages (RLE_DICTIONARY / PLAIN_DICTIONARY) hold RLE / bit-packed
  hybrid indices (see :mod:`pqindex.scan.hybrid`: its C kernel when built, a
  pass over the runs without the GIL; else numpy, bit-packed runs gathered and
  unpacked together, RLE runs spread with one ``repeat``). A
  BYTE_ARRAY chunk stays a DictionaryArray, so the predicate is evaluated once
  per dictionary entry and spread over the indices (see
  :mod:`pqindex.expr.evaluate`); a fixed-width chunk is taken through its
  dictionary, which also covers writers falling back to PLAIN mid-chunk.

A whole chunk is walked a window of about a MiB at a time (read, decompressed,
evaluated, then dropped: no buffer of the chunk's size), from its bytes or from a
function reading them; PLAIN values are evaluated per window, integer predicates
by numpy on each page where it was decompressed. A chunk that fell back to PLAIN
(pyarrow's default once a dictionary reaches 1 MiB) leaves its dictionary-encoded
pages compressed where no entry matches and nulls do not: an equality on a
high-cardinality column of such files read ~15% less.

Definition levels of flat optional columns (max level 1) are decoded the same
way, in data pages v1 (length-prefixed, inside the compressed data) and v2
(before the compressed values). Anything else — nested leaves, BOOLEAN, INT96,
FIXED_LEN_BYTE_ARRAY, PLAIN BYTE_ARRAY pages, DELTA and BYTE_STREAM_SPLIT
encodings, LZO / Hadoop-LZ4, a logical type whose Arrow values are not the
stored integers — returns None and the caller decodes with pyarrow, as it does
for anything this module finds malformed (pyarrow then names the error).
"""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa

from pqindex.errors import CorruptFileError
from pqindex.expr.evaluate import mask_bools, true_positions
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.format.layout import check_offset_index
from pqindex.format.pages import header_at
from pqindex.format.plain import split_byte_array
from pqindex.format.schema import Codec, ConvertedType, Encoding, PageType, PhysicalType
from pqindex.format.structs import OffsetIndex, PageHeader, PageLocation
from pqindex.indexes.leaf_values import exact_int_sum
from pqindex.scan.decompress import BATCH_BYTES, decompress_many
from pqindex.scan.decompress import CODECS as _CODECS
from pqindex.scan.decompress import decompress as _decompress
from pqindex.scan.hybrid import (
    Buffer,
    _runs,
    _varint,
    accelerated,
    decode_hybrid,
    decode_hybrid_at,
    decode_levels,
    dictionary_sum,
    find_hybrid,
    find_many,
    find_table,
)

__all__ = [
    "Evaluate",
    "Read",
    "Span",
    "ValuesMask",
    "chunk_sum",
    "decimal_buffer",
    "decode_chunk",
    "decode_hybrid",
    "decode_hybrid_at",
    "decodes_pages",
    "dictionary_needed",
    "find_hybrid",
    "find_many",
    "matching_page_rows",
    "matching_rows",
    "spans",
    "stored_dtype",
    "summable",
    "supported",
    "worth_matching",
]

_DICT_ENCODINGS = (Encoding.PLAIN_DICTIONARY, Encoding.RLE_DICTIONARY)
_NUMPY: dict[int, np.dtype[Any]] = {
    PhysicalType.INT32: np.dtype("<i4"),
    PhysicalType.INT64: np.dtype("<i8"),
    PhysicalType.FLOAT: np.dtype("<f4"),
    PhysicalType.DOUBLE: np.dtype("<f8"),
}
# Largest BYTE_ARRAY dictionary split in Python (a loop over its entries).
_MAX_BYTE_DICTIONARY = 1 << 16


class _Fallback(Exception):
    """This chunk is left to pyarrow."""


class _Short(Exception):
    """The page runs past the bytes at hand; ``need``: its length from its header on,
    when the header was read (else 0)."""

    def __init__(self, need: int) -> None:
        super().__init__(need)
        self.need = need


# ---------------------------------------------------------------- types


def _fixed_dtype(pf: ParquetFile, col: int, target: pa.DataType) -> np.dtype[Any] | None:
    """The numpy dtype of the stored values when ``target`` holds the same numbers."""
    leaf = pf.leaf(col)
    phys = leaf.physical_type
    dtype = _NUMPY.get(phys)
    if dtype is None:
        return None
    if phys == PhysicalType.FLOAT:
        return dtype if target == pa.float32() else None
    if phys == PhysicalType.DOUBLE:
        return dtype if target == pa.float64() else None
    el = leaf.element
    lt = el.logicalType
    ct = el.converted_type
    bits = 32 if phys == PhysicalType.INT32 else 64
    if pa.types.is_integer(target):
        if target.bit_width != bits:
            return None
        signed = pa.types.is_signed_integer(target)
        if lt is not None and lt.INTEGER is not None:
            ok = lt.INTEGER.bitWidth == bits and bool(lt.INTEGER.isSigned) == signed
        elif lt is not None and _other_logical(lt):
            ok = False
        elif ct is not None:
            ok = ct in ((ConvertedType.INT_32, ConvertedType.INT_64) if signed
                        else (ConvertedType.UINT_32, ConvertedType.UINT_64))
        else:
            ok = signed
        return (dtype if signed else np.dtype(f"<u{bits // 8}")) if ok else None
    if pa.types.is_date32(target):
        date = (lt is not None and lt.DATE is not None) or ct == ConvertedType.DATE
        return dtype if date and bits == 32 else None
    unit = _unit(lt, ct)
    if unit is None:
        return None
    if pa.types.is_timestamp(target) and lt is not None and lt.TIMESTAMP is not None:
        return dtype if target.unit == unit and bits == 64 else None
    if ct in (ConvertedType.TIMESTAMP_MILLIS, ConvertedType.TIMESTAMP_MICROS) and (
        lt is None or lt.TIMESTAMP is not None
    ):
        return dtype if pa.types.is_timestamp(target) and target.unit == unit else None
    if (pa.types.is_time32(target) or pa.types.is_time64(target)) and (
        (lt is not None and lt.TIME is not None)
        or ct in (ConvertedType.TIME_MILLIS, ConvertedType.TIME_MICROS)
    ):
        return dtype if target.unit == unit and target.bit_width == bits else None
    return None


def _other_logical(lt: Any) -> bool:
    """Whether a logical type other than INTEGER is set (their values differ)."""
    return any(
        getattr(lt, f.name) is not None
        for f in dataclasses.fields(lt)
        if f.name not in ("INTEGER", "unknown_fields")
    )


def _unit(lt: Any, ct: int | None) -> str | None:
    if lt is not None:
        t = lt.TIMESTAMP or lt.TIME
        if t is not None and t.unit is not None:
            u = t.unit
            return "ms" if u.MILLIS is not None else "us" if u.MICROS is not None else (
                "ns" if u.NANOS is not None else None)
    return {
        ConvertedType.TIMESTAMP_MILLIS: "ms",
        ConvertedType.TIMESTAMP_MICROS: "us",
        ConvertedType.TIME_MILLIS: "ms",
        ConvertedType.TIME_MICROS: "us",
    }.get(ConvertedType(ct)) if ct is not None and ct in ConvertedType._value2member_map_ else None


def _byte_dictionary_type(pf: ParquetFile, col: int, target: pa.DataType) -> pa.DataType | None:
    leaf = pf.leaf(col)
    if leaf.physical_type != PhysicalType.BYTE_ARRAY:
        return None
    if pa.types.is_dictionary(target):
        target = target.value_type
    if pa.types.is_string(target) or pa.types.is_large_string(target):
        return pa.string()
    if pa.types.is_binary(target) or pa.types.is_large_binary(target):
        return pa.binary()
    return None


def _decimal_dtype(pf: ParquetFile, col: int, target: pa.DataType) -> np.dtype[Any] | None:
    """The numpy dtype of a DECIMAL leaf's stored unscaled integers (INT32 / INT64)
    when ``target`` is its Arrow decimal: a predicate is matched on them through
    :func:`_decimals`, never decoded to Python decimals."""
    leaf = pf.leaf(col)
    lt = leaf.element.logicalType
    phys = leaf.physical_type
    if (not pa.types.is_decimal(target) or phys not in (PhysicalType.INT32, PhysicalType.INT64)
            or (lt is not None and lt.DECIMAL is None)
            or (lt is None and leaf.element.converted_type != ConvertedType.DECIMAL)
            or target.scale != (leaf.element.scale or 0)):
        return None
    return _NUMPY.get(phys)


def decimal_buffer(values: np.ndarray, arrow: pa.DataType) -> pa.Buffer:
    """Unscaled integers as the data buffer of an Arrow decimal array of type
    ``arrow`` (its scale is the column's): each widened to the type's 16 or 32 bytes
    of two's complement, little-endian, no per-value object."""
    words = arrow.byte_width // 8
    # Arrow's allocator, not numpy's: its pool reuses memory where a fresh numpy array
    # of this size is page-faulted in again (1.5M values: 9.4 -> 3.1 ms).
    buf = pa.allocate_buffer(values.size * words * 8)
    wide = np.frombuffer(buf, dtype=np.int64).reshape(-1, words)
    wide[:, 0] = values
    signs = values.astype(np.int64, copy=False)
    if words == 2:
        np.right_shift(signs, 63, out=wide[:, 1])  # the sign, spread over the high word
    else:
        wide[:, 1:] = (signs >> 63)[:, None]
    return buf


def _decimals(values: np.ndarray, arrow: pa.DataType) -> pa.Array:
    """Unscaled integers as an Arrow decimal array of type ``arrow``."""
    return pa.Array.from_buffers(arrow, values.size, [None, decimal_buffer(values, arrow)])


def _as_arrow(values: np.ndarray, arrow: pa.DataType) -> pa.Array:
    """Stored fixed-width values as an Arrow array of ``arrow`` (a decimal widened)."""
    if pa.types.is_decimal(arrow):
        return _decimals(values, arrow)
    return pa.Array.from_buffers(arrow, values.size, [None, pa.py_buffer(values)])


def supported(pf: ParquetFile, rg: int, col: int, target: pa.DataType, *,
              matching: bool = False) -> bool:
    """Whether :func:`decode_chunk` (``matching``: :func:`matching_rows`) may decode
    this chunk (it may still fall back)."""
    leaf = pf.leaf(col)
    if len(leaf.path) != 1 or leaf.max_repetition_level or leaf.max_definition_level > 1:
        return False
    meta = pf.column_meta(rg, col)
    if meta.codec not in _CODECS and meta.codec != Codec.UNCOMPRESSED:
        return False
    if _fixed_dtype(pf, col, target) is not None or (
            matching and _decimal_dtype(pf, col, target) is not None):
        return True
    return (
        _byte_dictionary_type(pf, col, target) is not None
        and pf.all_dictionary_encoded(rg, col) is True
    )


def worth_matching(
    pf: ParquetFile, rg: int, col: int, target: pa.DataType, *, whole: bool = False,
    on_values: bool = False, few: bool = False,
) -> bool:
    """Whether :func:`matching_rows` (``whole``: the whole chunk) or
    :func:`matching_page_rows` beats pyarrow's decode on this chunk, as measured
    (docs/ARCHITECTURE.md, "A scan"): on dictionary-encoded chunks, where the
    predicate runs once per entry and indices are searched for the matching ones
    only; on whole PLAIN fixed-width chunks when the predicate is one numpy
    evaluates on the values (``on_values``: see ``expr.evaluate.numpy_values_mask``)
    where they were decompressed, a window at a time (every codec 7-45% less CPU
    than pyarrow's decode and compare; a float predicate through Arrow measured up
    to 40% slower when dense, so it stays with pyarrow). Chunks that fall back from
    dictionary to PLAIN (pyarrow's writer past a 1 MiB dictionary) only for ``few``
    matches (equality, IN): the dictionary's entries compared once, its pages'
    indices searched, the PLAIN pages compared by numpy (the issue's snappy file,
    ``user_id = x``: 47 -> 37 ms, CPU 80 -> 60 ms); with half the rows matching,
    the row numbers cost more than pyarrow's mask (104 against 113 ms)."""
    if not supported(pf, rg, col, target, matching=True):
        return False
    if pf.all_dictionary_encoded(rg, col) is True:
        return True
    if not (whole and on_values and _fixed_dtype(pf, col, target) is not None):
        return False
    return pf.all_plain_encoded(rg, col) is True or few


def decodes_pages(pf: ParquetFile, col: int, target: pa.DataType) -> bool:
    """Whether :func:`decode_pages` may decode pages of this leaf (it may still fall
    back to pyarrow)."""
    leaf = pf.leaf(col)
    return (len(leaf.path) == 1 and not leaf.max_repetition_level
            and leaf.max_definition_level <= 1 and stored_dtype(pf, col, target) is not None)


def stored_dtype(pf: ParquetFile, col: int, target: pa.DataType) -> np.dtype[Any] | None:
    """The numpy dtype of a fixed-width leaf's stored values when they give
    ``target``'s values: as they are, or (decimals on INT32 / INT64) widened by
    :func:`decimal_buffer`."""
    dtype = _fixed_dtype(pf, col, target)
    return dtype if dtype is not None else _decimal_dtype(pf, col, target)


def header_offset_index(pf: ParquetFile, rg: int, col: int, raw: bytes | memoryview
                        ) -> OffsetIndex | None:
    """The offset index of a flat leaf's chunk, built from its page headers (``raw``:
    the chunk's bytes), for a chunk written without one; None where the headers do
    not make a sound one (nested leaves, an unknown page, counts that don't add up)."""
    if pf.leaf(col).max_repetition_level:
        return None  # a page's values are not its rows
    meta = pf.column_meta(rg, col)
    start, length = chunk_range(meta)
    if len(raw) != length:
        return None
    locs: list[PageLocation] = []
    rows = pos = 0
    try:
        while pos < length:
            s = _stored(raw, pos)
            if isinstance(s, int):
                pos = s  # an index page
                continue
            if s.ph.type != PageType.DICTIONARY_PAGE:
                locs.append(PageLocation(offset=start + pos, compressed_page_size=s.end - pos,
                                         first_row_index=rows))
                rows += s.rows
            elif locs:
                return None  # a dictionary page after data pages
            pos = s.end
    except (_Fallback, _Short, CorruptFileError):
        return None  # the chunk is decoded whole, and pyarrow names any damage
    if rows != pf.row_group_rows(rg) or not locs:
        return None
    oi = OffsetIndex(page_locations=locs)
    try:
        check_offset_index(oi, meta, rows, path=pf.path, row_group=rg,
                           column=pf.leaf(col).name)
    except CorruptFileError:
        return None  # e.g. a page of no rows: no index, the chunk is decoded whole
    return oi


def dictionary_needed(pf: ParquetFile, rg: int, col: int, pages: Sequence[int]) -> bool:
    """Whether data pages ``pages`` of the chunk may be dictionary-encoded, as far as
    the footer's encoding stats tell (``ParquetFile.pages_need_dictionary``). Only
    a fetch decision: a page found dictionary-encoded after all reads the
    dictionary page on demand."""
    return not pages or pf.pages_need_dictionary(rg, col, pages)


# ---------------------------------------------------------------- pages


def _header(raw: bytes | memoryview, pos: int, final: bool = True) -> tuple[PageHeader, int]:
    """The page header at ``raw[pos:]`` and where it ends. ``final``: ``raw`` ends where
    the chunk does (else a header cut at its end raises _Short)."""
    found = header_at(raw, pos)
    if found is None:
        if final:
            raise _Fallback
        raise _Short(0)
    return found


def _byte_dictionary(data: bytes | memoryview, count: int, arrow: pa.DataType) -> pa.Array:
    try:
        offsets, body = split_byte_array(data, count)
    except CorruptFileError:
        raise _Fallback from None
    arr = pa.Array.from_buffers(arrow, count, [None, pa.py_buffer(offsets), pa.py_buffer(body)])
    if arrow == pa.string():
        arr.validate(full=True)  # invalid UTF-8: leave the error to pyarrow
    return arr


@dataclasses.dataclass
class _Page:
    """One data page, decompressed: its rows and its encoded values."""

    first: int  # first row within the chunk
    rows: int
    valid: np.ndarray | None  # per row, when the page has nulls
    present: int  # non-null values
    dictionary: bool  # RLE_DICTIONARY indices, else PLAIN values
    body: memoryview


@dataclasses.dataclass
class _Dictionary:
    """A dictionary page: its PLAIN values (``data``) decompressed on first use, so a
    scan that takes the planner's entries (:func:`_planned_dictionary`) never
    decompresses it."""

    part: Any  # the page's stored part (decompressed when ``codec`` is None)
    count: int
    codec: int | None = None
    size: int = 0  # the part's decompressed size

    @property
    def data(self) -> Any:
        if self.codec is not None:
            self.part, self.codec = _decompress(self.part, self.codec, self.size), None
        return self.part


@dataclasses.dataclass
class _Deferred:
    """A dictionary-encoded data page, its part not decompressed yet: where no entry of
    the chunk's dictionary matches (and nulls do not), :func:`_matches` needs none of
    its bytes."""

    stored: _Stored
    first: int
    codec: int
    optional: bool


def _loaded(pages: Sequence[_Deferred]) -> list[_Page]:
    """Deferred pages of one chunk decompressed together (zstd frames joined, snappy
    in one call, as :func:`_decoded_batch` does): one at a time, a zstd page's call
    costs more than its ~3 KB of indices (the 20M file's rare value: 474 calls, 18 ms
    of 30)."""
    parts = _decompressed(pages[0].codec, [d.stored for d in pages])
    out = []
    for d, data in zip(pages, parts, strict=True):
        page = _decoded(d.stored, data, d.optional, d.first)
        if not isinstance(page, _Page):
            raise _Fallback
        out.append(page)
    return out


def _stream(body: memoryview) -> Buffer:
    """A page's part as the hybrid decoders take it: the C kernel reads it in place,
    the numpy code indexes bytes faster."""
    return body if accelerated() else bytes(body)


def _levels(data: Buffer, n: int) -> np.ndarray | None:
    """Definition levels (max 1) of ``n`` values; None when all are 1 (no nulls), as
    a page without nulls usually says in one RLE run."""
    if data:
        # The usual case, one RLE run of n ones, read without the general run parser.
        header, pos = _varint(data, 0, len(data))
        if not header & 1 and header >> 1 >= n and pos < len(data) and data[pos] == 1:
            return None
    if accelerated():
        levels = decode_levels(data, 0, len(data), n)
        return None if levels.all() else levels
    data = bytes(data)
    r = _runs(data, 0, len(data), 1, n)
    if len(r.kinds) == 1 and not r.kinds[0] and r.sources[0] == 1:
        return None
    return decode_hybrid(data, 0, len(data), 1, n)


@dataclasses.dataclass
class _Stored:
    """A page's header read, its data not yet decompressed."""

    ph: PageHeader
    end: int  # where the next page starts
    rows: int  # values of a data page (rows: flat leaves only), entries of a dictionary
    part: bytes | memoryview  # the compressed data (a v2 page: its values)
    size: int  # ``part`` decompressed
    compressed: bool  # False: a v2 page's values stored as they are
    levels: bytes | memoryview  # a v2 page's definition levels (stored uncompressed)

    @property
    def dictionary_encoded(self) -> bool:
        h = self.ph.data_page_header or self.ph.data_page_header_v2
        return h is not None and h.encoding in _DICT_ENCODINGS


def _stored(raw: bytes | memoryview, pos: int, final: bool = True) -> _Stored | int:
    """The page at ``raw[pos:]``, undecompressed; for an index page, where the next
    page starts. ``final``: ``raw`` ends where the chunk does (else a page running
    past its end raises _Short)."""
    ph, start = _header(raw, pos, final)
    size = ph.compressed_page_size or 0
    end = start + size
    full = ph.uncompressed_page_size or 0
    if size < 0 or full < 0:
        raise _Fallback
    if end > len(raw):
        if final:
            raise _Fallback
        raise _Short(end - pos)
    if ph.type == PageType.DICTIONARY_PAGE:
        dh = ph.dictionary_page_header
        if dh is None or dh.encoding not in (Encoding.PLAIN, Encoding.PLAIN_DICTIONARY):
            raise _Fallback
        return _Stored(ph, end, dh.num_values or 0, raw[start:end], full, True, b"")
    if ph.type == PageType.DATA_PAGE:
        h = ph.data_page_header
        if h is None:
            raise _Fallback
        return _Stored(ph, end, h.num_values or 0, raw[start:end], full, True, b"")
    if ph.type == PageType.DATA_PAGE_V2:
        h2 = ph.data_page_header_v2
        if h2 is None:
            raise _Fallback
        rep = h2.repetition_levels_byte_length or 0
        dl = h2.definition_levels_byte_length or 0
        if rep or dl < 0 or dl > size:
            raise _Fallback
        return _Stored(ph, end, h2.num_values or 0, raw[start + dl : end], full - dl,
                       h2.is_compressed is not False, raw[start : start + dl])
    return end  # index pages: nothing to decode


def _decoded(s: _Stored, data: Any, optional: bool, first: int) -> _Page | _Dictionary:
    """The page ``s`` given its decompressed part ``data``. ``first`` is the row the
    page starts at."""
    ph = s.ph
    n = s.rows
    levels = None
    if ph.type == PageType.DICTIONARY_PAGE:
        return _Dictionary(data, n)
    if ph.type == PageType.DATA_PAGE:
        h = ph.data_page_header
        assert h is not None
        encoding = h.encoding
        page = memoryview(data)
        vpos = 0
        if optional:
            if h.definition_level_encoding != Encoding.RLE or len(page) < 4:
                raise _Fallback
            (ln,) = struct.unpack_from("<I", page, 0)
            if 4 + ln > len(page):
                raise _Fallback
            levels = _levels(_stream(page[4 : 4 + ln]), n)
            vpos = 4 + ln
        body = page[vpos:]
    else:
        h2 = ph.data_page_header_v2
        assert h2 is not None
        encoding = h2.encoding
        if optional and h2.num_nulls != 0:
            levels = _levels(_stream(memoryview(s.levels)), n)
        body = memoryview(data)
    if n <= 0:
        raise _Fallback
    if encoding in _DICT_ENCODINGS:
        if len(body) < 1:
            raise _Fallback
    elif encoding != Encoding.PLAIN:
        raise _Fallback
    valid = None if levels is None or bool(levels.all()) else levels.astype(np.bool_)
    present = n if valid is None else int(np.count_nonzero(valid))
    return _Page(first, n, valid, present, encoding in _DICT_ENCODINGS, body)


def _decompressed(codec: int, stored: Sequence[_Stored]) -> list[Any]:
    """The pages' parts decompressed (several zstd pages in one call); None for a
    compressed dictionary page (left to :class:`_Dictionary`)."""

    def later(s: _Stored) -> bool:
        return s.compressed and s.ph.type == PageType.DICTIONARY_PAGE

    parts = [(s.part, s.size) for s in stored if s.compressed and not later(s)]
    it = iter(decompress_many(codec, parts))
    return [None if later(s) else next(it) if s.compressed else s.part for s in stored]


def _read_page(
    raw: bytes | memoryview, pos: int, codec: int, optional: bool, first: int
) -> tuple[_Page | _Dictionary | None, int]:
    """The page at ``raw[pos:]``, decompressed (None for an index page), and where the
    next page starts. ``first`` is the row the page starts at."""
    s = _stored(raw, pos)
    if isinstance(s, int):
        return None, s
    data = _decompress(s.part, codec, s.size) if s.compressed else s.part
    return _decoded(s, data, optional, first), s.end


# Compressed bytes of a chunk read, decompressed and evaluated at a time (a longer page:
# one window of its own). Small buffers, used and freed in turn, are cheap: a fresh
# multi-MiB one costs its page faults (a 6 MiB chunk read with os.pread in one
# piece: 3.2 ms; in 1 MiB pieces: 0.6 ms), and no copy of the chunk's values is made.
_WINDOW_BYTES = 1 << 20
# PLAIN values evaluated together: a call of the predicate costs ~15 µs.
_EVALUATE_BYTES = 1 << 20

# Reads ``(offset, length)`` of a column chunk's bytes (offsets within the chunk).
Read = Callable[[int, int], bytes | memoryview]


Item = _Page | _Dictionary | _Deferred


def _decoded_pages(
    codec: int, optional: bool, stored: Iterable[tuple[_Stored, int]], defer: bool = False
) -> Iterator[Item]:
    """Pages ``(page, row it starts at)`` decoded in order, decompressed together up
    to BATCH_BYTES at a time. ``defer``: dictionary-encoded data pages come as
    :class:`_Deferred`."""
    batch: list[tuple[_Stored, int]] = []
    size = 0
    for item in stored:
        batch.append(item)
        size += item[0].size
        if size >= BATCH_BYTES:
            yield from _decoded_batch(codec, optional, batch, defer)
            batch, size = [], 0
    yield from _decoded_batch(codec, optional, batch, defer)


def _decoded_batch(
    codec: int, optional: bool, batch: list[tuple[_Stored, int]], defer: bool = False
) -> Iterator[Item]:
    later = [defer and s.dictionary_encoded for s, _ in batch]
    data = iter(_decompressed(codec, [s for (s, _), x in zip(batch, later, strict=True)
                                      if not x]))
    for (s, first), x in zip(batch, later, strict=True):
        if x:
            yield _Deferred(s, first, codec, optional)
            continue
        d = next(data)
        if d is None:  # a compressed dictionary page: decompressed when used
            yield _Dictionary(s.part, s.rows, codec, s.size)
        else:
            yield _decoded(s, d, optional, first)


@dataclasses.dataclass(frozen=True)
class Span:
    """Consecutive data pages of a chunk: its bytes ``[begin, end)`` (offsets within the
    chunk), rows ``[first, first + rows)`` of the row group."""

    begin: int
    end: int
    first: int
    rows: int


def spans(pf: ParquetFile, rg: int, col: int, parts: int, min_bytes: int) -> list[Span]:
    """A PLAIN chunk's data pages as at most ``parts`` spans of about equal compressed
    bytes (at least ``min_bytes`` each), from its offset index, for
    :func:`matching_rows` to take side by side. One span, the whole chunk, when it is
    not split: no offset index at hand, a dictionary page (every span would need it),
    too few pages or bytes."""
    meta = pf.column_meta(rg, col)
    start, size = chunk_range(meta)
    whole = [Span(0, size, 0, meta.num_values or 0)]
    if parts < 2 or pf.all_plain_encoded(rg, col) is not True:
        return whole
    oi = pf.held_offset_index(rg, col)  # not worth a request
    if oi is None:
        return whole
    locs = oi.page_locations or []
    parts = min(parts, len(locs), size // max(min_bytes, 1))
    if parts < 2 or (locs[0].offset or 0) != start or pf.leaf(col).max_repetition_level:
        return whole
    offsets = [(loc.offset or 0) - start for loc in locs]
    if offsets != sorted(offsets) or offsets[-1] >= size:
        return whole
    cuts = sorted({int(np.searchsorted(offsets, size * k / parts)) for k in range(1, parts)})
    bounds = [0, *(c for c in cuts if 0 < c < len(locs)), len(locs)]
    out = []
    for a, b in pairwise(bounds):
        first = locs[a].first_row_index or 0
        last = (locs[b].first_row_index or 0) if b < len(locs) else (meta.num_values or 0)
        end = offsets[b] if b < len(locs) else size
        out.append(Span(offsets[a], end, first, last - first))
    return out if all(sp.rows > 0 for sp in out) else whole


def _walk(
    pf: ParquetFile, rg: int, col: int, raw: bytes | memoryview | Read, span: Span | None = None,
    defer: bool = False,
) -> Iterator[Item]:
    """The chunk's dictionary page (first, if any) and data pages (of ``span`` only,
    if given), decompressed a window at a time. ``raw``: the chunk's bytes, or a
    function reading them. ``defer``: see :func:`_decoded_pages`."""
    for window in _windows(pf, rg, col, raw, span, defer):
        yield from window


def _windows(
    pf: ParquetFile, rg: int, col: int, raw: bytes | memoryview | Read, span: Span | None = None,
    defer: bool = False,
) -> Iterator[Iterator[Item]]:
    """:func:`_walk`'s pages, a window's at a time."""
    meta = pf.column_meta(rg, col)
    optional = pf.leaf(col).max_definition_level == 1
    size = chunk_range(meta)[1]
    if span is None:
        span = Span(0, size, 0, meta.num_values or 0)
    read: Read
    if isinstance(raw, (bytes, memoryview)):
        view = memoryview(raw)

        def read(offset: int, length: int) -> bytes | memoryview:
            return view[offset : offset + length]
    else:
        read = raw
    codec = meta.codec or 0
    for group in _chunk_pages(span, read):
        yield _decoded_batch(codec, optional, group, defer)


def _chunk_pages(span: Span, read: Read) -> Iterator[list[tuple[_Stored, int]]]:
    """The span's pages, undecompressed, and the row each starts at, in the groups
    read together: windows of about :data:`_WINDOW_BYTES` of its bytes
    (``read(offset, length)``, offsets within the chunk), each up to its last whole
    page (a longer page gets a window of its own)."""
    seen_dictionary = False
    rows = span.first
    total = span.first + span.rows
    size = span.end
    base = span.begin  # where the window starts in the chunk
    want = _WINDOW_BYTES
    biggest = 0  # the longest page so far
    while rows < total:
        length = min(want, size - base)
        if length <= 0:
            raise _Fallback
        buf = memoryview(read(base, length))
        if len(buf) != length:
            raise _Fallback
        final = base + length >= size
        group: list[tuple[_Stored, int]] = []
        pos = 0
        need = 0
        while rows < total and pos < length:
            try:
                s = _stored(buf, pos, final)
            except _Short as e:
                need = e.need
                break
            if isinstance(s, int):
                pos = s  # an index page
                continue
            biggest = max(biggest, s.end - pos)
            pos = s.end
            if s.ph.type == PageType.DICTIONARY_PAGE:
                if seen_dictionary or rows or span.first:
                    raise _Fallback
                seen_dictionary = True
                group.append((s, 0))
                continue
            if rows + s.rows > total or (s.dictionary_encoded and not seen_dictionary):
                raise _Fallback
            group.append((s, rows))
            rows += s.rows
        # Not one whole page in the window: a longer one, from the same place. Else
        # windows of four pages at least: the page a window cuts is read again.
        want = max(_WINDOW_BYTES, 4 * biggest) if pos else max(want * 2, need)
        base += pos
        if group:
            yield group
    if rows != total:
        raise _Fallback


def _indices(page: _Page, dict_size: int) -> np.ndarray:
    """A dictionary page's indices (one per non-null value)."""
    body = _stream(page.body)
    try:
        idx = decode_hybrid(body, 1, len(body), body[0], page.present)
    except ValueError:
        raise _Fallback from None
    if page.present and int(idx.max()) >= dict_size:
        raise _Fallback
    return idx


def _plain(page: _Page, dtype: np.dtype[Any]) -> np.ndarray:
    if len(page.body) < page.present * dtype.itemsize:
        raise _Fallback
    return np.frombuffer(page.body, dtype=dtype, count=page.present)


def _dictionary_array(
    entry: _Dictionary, dtype: np.dtype[Any] | None, arrow: pa.DataType
) -> pa.Array:
    """The dictionary page's values as an Arrow array of type ``arrow``."""
    if dtype is not None:
        if len(entry.data) < entry.count * dtype.itemsize:
            raise _Fallback
        return _as_arrow(np.frombuffer(entry.data, dtype=dtype, count=entry.count), arrow)
    if entry.count > _MAX_BYTE_DICTIONARY:
        raise _Fallback
    return _byte_dictionary(entry.data, entry.count, arrow)


def _planned_dictionary(
    pf: ParquetFile, rg: int, col: int, count: int, dtype: np.dtype[Any] | None,
    arrow: pa.DataType
) -> pa.Array | None:
    """The chunk's dictionary as :func:`_dictionary_array` makes it, from the entries
    the planner split (``plain.plain_entries``, kept with the file), or None."""
    key = ("dictionary_array", rg, col, str(arrow))
    known = pf.derived.get(key)
    if known is not None:
        return known if len(known) == count else None
    entries = pf.derived.get(("dictionary_entries", rg, col))
    if entries is None or len(entries) != count:
        return None
    if dtype is not None:
        if entries.type != pa.binary(dtype.itemsize) or entries.offset:
            return None
        arr = _as_arrow(np.frombuffer(entries.buffers()[1], dtype=dtype, count=count), arrow)
    else:
        if entries.type != pa.binary() or arrow not in (pa.string(), pa.binary()):
            return None
        arr = entries.view(arrow)
        if arrow == pa.string():
            try:
                arr.validate(full=True)
            except pa.ArrowInvalid:
                return None  # invalid UTF-8: the page's own path reports it
    pf.derived[key] = arr  # shares the entries' buffers: no more memory
    return arr


def _types(
    pf: ParquetFile, rg: int, col: int, target: pa.DataType, *, matching: bool = False
) -> tuple[np.dtype[Any] | None, pa.DataType]:
    dtype = stored_dtype(pf, col, target) if matching else _fixed_dtype(pf, col, target)
    if dtype is not None:
        return dtype, target
    dict_type = _byte_dictionary_type(pf, col, target)
    if dict_type is None:
        raise _Fallback
    return None, dict_type


def _chunk(
    pf: ParquetFile, rg: int, col: int, target: pa.DataType, raw: bytes | memoryview
) -> pa.Array:
    dtype, arrow = _types(pf, rg, col, target)
    total = pf.column_meta(rg, col).num_values or 0
    dictionary: Any = None
    dict_size = 0
    # Every page's values go straight to their place in one output array.
    out = np.empty(total, dtype=dtype if dtype is not None else np.int32)
    flags: np.ndarray | None = None  # validity, once a page has nulls
    for page in _walk(pf, rg, col, raw):
        if isinstance(page, _Deferred):  # not asked for
            raise _Fallback
        if isinstance(page, _Dictionary):
            dict_size = page.count
            dictionary = (np.frombuffer(page.data, dtype=dtype, count=dict_size)
                          if dtype is not None and len(page.data) >= dict_size * dtype.itemsize
                          else _dictionary_array(page, dtype, arrow))
            continue
        if page.dictionary:
            idx = _indices(page, dict_size)
            values = dictionary.take(idx) if dtype is not None else idx
        elif dtype is not None:
            values = _plain(page, dtype)
        else:
            raise _Fallback
        part = out[page.first : page.first + page.rows]
        if page.valid is None:
            part[:] = values
        else:
            if flags is None:
                flags = np.ones(total, dtype=np.bool_)
            flags[page.first : page.first + page.rows] = page.valid
            part[:] = 0  # null slots: defined bytes (a valid dictionary index)
            part[page.valid] = values
    bitmap = None
    nulls = 0
    if flags is not None:
        nulls = int(flags.size - np.count_nonzero(flags))
        bitmap = pa.py_buffer(np.packbits(flags, bitorder="little"))
    if dtype is not None:
        return pa.Array.from_buffers(target, total, [bitmap, pa.py_buffer(out)], nulls)
    indices = pa.Array.from_buffers(pa.int32(), total, [bitmap, pa.py_buffer(out)], nulls)
    if dictionary is None:
        dictionary = pa.array([], type=arrow)
    return pa.DictionaryArray.from_arrays(indices, dictionary)


def decode_chunk(
    pf: ParquetFile, rg: int, col: int, target: pa.DataType, raw: bytes | memoryview
) -> pa.Array | None:
    """The whole chunk of flat leaf ``col`` in row group ``rg``, from its bytes ``raw``
    (the chunk's range, see :func:`~pqindex.format.file.chunk_range`).

    Fixed-width columns come back typed ``target``; BYTE_ARRAY columns as a
    DictionaryArray over their string or binary dictionary. None when this
    module does not decode the chunk: the caller decodes it with pyarrow.
    """
    if not supported(pf, rg, col, target):
        return None
    if len(raw) != chunk_range(pf.column_meta(rg, col))[1]:
        return None
    try:
        return _chunk(pf, rg, col, target, raw)
    except (_Fallback, pa.ArrowException, ValueError):
        return None


def summable(pf: ParquetFile, rg: int, col: int, target: pa.DataType) -> bool:
    """Whether :func:`chunk_sum` may sum this chunk (it may still fall back): a flat
    integer or float leaf whose stored numbers are its values."""
    return ((pa.types.is_integer(target) or pa.types.is_floating(target))
            and _fixed_dtype(pf, col, target) is not None and supported(pf, rg, col, target))


def chunk_sum(
    pf: ParquetFile, rg: int, col: int, target: pa.DataType, raw: bytes | memoryview | Read
) -> tuple[int | float | None, int] | None:
    """The sum of the non-null values of the chunk of flat leaf ``col`` in row group
    ``rg`` and how many there are, from its encoded pages without an array of them:
    PLAIN pages summed where they were decompressed, dictionary pages as the sum of
    the entries their indices name (:func:`~pqindex.scan.hybrid.dictionary_sum`).
    Integers exactly; floats in double precision, pages' sums added exactly
    (``math.fsum``), as pyarrow's ``sum`` gives them up to rounding. The sum is None
    when no value is present. ``raw``: the chunk's bytes or a function reading them.
    None when this module does not sum the chunk: the caller decodes it with pyarrow."""
    if not summable(pf, rg, col, target):
        return None
    dtype = _fixed_dtype(pf, col, target)
    assert dtype is not None
    try:
        return _chunk_sum(pf, rg, col, raw, dtype)
    except (_Fallback, pa.ArrowException, ValueError):
        return None


def _chunk_sum(pf: ParquetFile, rg: int, col: int, raw: bytes | memoryview | Read,
               dtype: np.dtype[Any]) -> tuple[int | float | None, int]:
    floats = dtype.kind == "f"
    parts: list[Any] = []
    present = 0
    dictionary: np.ndarray | None = None
    # A window's pages at a time: its dictionary-encoded pages summed in one call.
    for window in _windows(pf, rg, col, raw):
        streams: list[tuple[Buffer, int, int, int, int]] = []
        for page in window:
            if isinstance(page, _Dictionary):
                data = page.data
                if len(data) < page.count * dtype.itemsize:
                    raise _Fallback
                dictionary = np.frombuffer(data, dtype=dtype, count=page.count)
                continue
            assert isinstance(page, _Page)  # nothing deferred: not asked for
            if not page.present:
                continue
            present += page.present
            if page.dictionary:
                body = _stream(page.body)
                streams.append((body, 1, len(body), body[0], page.present))
            elif floats:
                with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: NaN
                    parts.append(float(_plain(page, dtype).sum(dtype=np.float64)))
            else:
                parts.append(exact_int_sum(_plain(page, dtype)))
        if streams:
            if dictionary is None:
                raise _Fallback
            parts.append(dictionary_sum(streams, dictionary))
    if not present:
        return None, 0
    if not floats:
        return sum(parts), present
    total = sum(parts)  # NaN or an infinity: as IEEE adds them (fsum would raise)
    return (math.fsum(parts) if math.isfinite(total) else total), present


# Evaluates a predicate over an array of one column's values: True where it holds
# (never NULL).
Evaluate = Callable[[pa.Array], pa.BooleanArray]
# The same predicate over non-null values as numpy holds them (stored dtype), when it
# can be evaluated that way (see ``expr.evaluate.numpy_values_mask``): None otherwise.
ValuesMask = Callable[[np.dtype[Any]], Callable[[np.ndarray], np.ndarray] | None]


def _dictionary_hits(
    pages: list[_Page], dict_size: int, lut: np.ndarray, ids: np.ndarray
) -> list[np.ndarray]:
    """Per dictionary page, the positions among its non-null values whose entry
    matches; pages of one bit width are searched together."""
    if ids.size == 0:
        # No dictionary entry matches: the indices need no decoding.
        return [ids for _ in pages]
    if accelerated():
        return _dictionary_hits_c(pages, lut)
    bodies = [bytes(p.body) for p in pages]
    out: list[np.ndarray | None] = [None] * len(pages)
    by_width: dict[int, list[int]] = {}
    for i, body in enumerate(bodies):
        by_width.setdefault(body[0], []).append(i)
    for width, members in by_width.items():
        if ids.size <= 4 and 0 < width <= 8:
            if max(ids.tolist()) >= 1 << width:
                raise _Fallback
            try:
                found = find_many([(bodies[i], 1, len(bodies[i]), pages[i].present)
                                   for i in members], width, ids)
            except ValueError:
                raise _Fallback from None
            for i, hits in zip(members, found, strict=True):
                out[i] = hits
        else:
            for i in members:
                out[i] = np.flatnonzero(lut[_indices(pages[i], dict_size)])
    return [o if o is not None else np.zeros(0, dtype=np.intp) for o in out]


def _dictionary_hits_c(pages: list[_Page], lut: np.ndarray) -> list[np.ndarray]:
    """:func:`_dictionary_hits` by the C kernel: every page of one bit width in one
    call, the GIL released, an index past the dictionary an error."""
    out: list[np.ndarray] = [np.zeros(0, dtype=np.intp)] * len(pages)
    by_width: dict[int, list[int]] = {}
    for i, p in enumerate(pages):
        by_width.setdefault(p.body[0], []).append(i)
    for width, members in by_width.items():
        try:
            found = find_table([(pages[i].body, 1, len(pages[i].body), pages[i].present)
                                for i in members], width, lut, strict=True)
        except ValueError:
            raise _Fallback from None
        for i, hits in zip(members, found, strict=True):
            out[i] = hits
    return out


def _to_rows(page: _Page, dense: np.ndarray, null_hit: Callable[[], bool]) -> np.ndarray:
    """Row numbers (within the chunk) of a page's matching non-null values, plus its
    null rows when nulls match."""
    if page.valid is None:
        return np.asarray(dense + page.first, dtype=np.intp)
    rows = np.flatnonzero(page.valid)[dense]
    if null_hit():
        rows = np.sort(np.concatenate((rows, np.flatnonzero(~page.valid))))
    return np.asarray(rows + page.first, dtype=np.intp)


def _matches(
    pf: ParquetFile, rg: int, col: int, target: pa.DataType,
    items: Iterable[Item], evaluate: Evaluate,
    values_mask: ValuesMask | None = None, hits: tuple[np.ndarray, int] | None = None,
) -> np.ndarray:
    dtype, arrow = _types(pf, rg, col, target, matching=True)
    # PLAIN values compared by numpy where it can: each page where it was decompressed,
    # no Arrow array, no copy (~0.4 ms per million int64 against ~1.2 ms).
    on_values = values_mask(dtype) if values_mask is not None and dtype is not None else None
    # Whether null rows match: asked once, and only of a chunk that has nulls (an
    # evaluation costs about 0.1 ms, as much as searching a page's indices).
    asked: list[bool] = []

    def null_hit() -> bool:
        if not asked:
            asked.append(bool(evaluate(pa.nulls(1, type=arrow))[0].as_py()))
        return asked[0]

    def nulls_possible() -> bool:
        """Whether the chunk may hold a null, as its leaf and statistics tell."""
        if pf.leaf(col).max_definition_level == 0:
            return False
        st = pf.column_meta(rg, col).statistics
        return st is None or st.null_count is None or st.null_count != 0

    lut = np.zeros(0, dtype=np.bool_)
    ids = np.zeros(0, dtype=np.intp)
    dict_size = 0
    found: list[np.ndarray] = []
    # PLAIN pages are evaluated a few at a time, as they are decompressed (then
    # dropped); dictionary pages are searched together, at the end.
    plain: list[tuple[_Page, np.ndarray]] = []
    held = 0
    any_plain = False
    indexed: list[_Page] = []
    deferred: list[_Deferred] = []
    for page in items:
        if isinstance(page, _Dictionary):
            dict_size = page.count
            if hits is not None and hits[1] == dict_size:
                # The planner's comparison: the page is not even decompressed.
                ids = hits[0]
                lut = np.zeros(dict_size, dtype=np.bool_)
                lut[ids] = True
                continue
            entries = _planned_dictionary(pf, rg, col, page.count, dtype, arrow)
            if entries is None:
                entries = _dictionary_array(page, dtype, arrow)
            lut = mask_bools(evaluate(entries))
            ids = np.flatnonzero(lut)
        elif isinstance(page, _Deferred):
            # No entry matches: only null rows could, and only where nulls match.
            if ids.size or (nulls_possible() and null_hit()):
                deferred.append(page)
        elif page.dictionary:
            indexed.append(page)
        elif on_values is not None and dtype is not None:
            dense = np.flatnonzero(on_values(_plain(page, dtype)))
            any_plain = True
            if dense.size or (page.valid is not None and null_hit()):
                found.append(_to_rows(page, dense, null_hit))
        elif dtype is not None:
            values = _plain(page, dtype)
            plain.append((page, values))
            held += values.nbytes
            any_plain = True
            if held >= _EVALUATE_BYTES:
                found += _plain_hits(plain, target, evaluate, null_hit)
                plain, held = [], 0
        else:
            raise _Fallback
    if plain:
        found += _plain_hits(plain, target, evaluate, null_hit)
    if deferred:  # with defer, every dictionary-encoded page: in order
        indexed += _loaded(deferred)
    if indexed:
        for page, dense in zip(
            indexed, _dictionary_hits(indexed, dict_size, lut, ids), strict=True
        ):
            found.append(_to_rows(page, dense, null_hit))
    found = [f for f in found if f.size]
    if not found:
        return np.zeros(0, dtype=np.int64)
    if any_plain and indexed:
        # Each piece holds one page's rows, ascending: ordered by their first rows,
        # the pieces join in order (a sort of 2M rows cost 6 ms).
        found.sort(key=lambda f: int(f[0]))
    return np.concatenate(found).astype(np.int64, copy=False)


def _plain_hits(plain: list[tuple[_Page, np.ndarray]], target: pa.DataType,
                evaluate: Evaluate, null_hit: Callable[[], bool]) -> list[np.ndarray]:
    """Rows (within the chunk) of PLAIN pages ``(page, its non-null values)`` where
    ``evaluate`` holds: one call over their values (wrapped without a copy when there
    is one page), page by page back to rows."""
    if len(plain) == 1:
        values = plain[0][1]
        data = pa.py_buffer(values)
    else:
        # Into Arrow's pool, which reuses freed memory at once (no page faults).
        data = pa.allocate_buffer(sum(v.nbytes for _, v in plain))
        values = np.frombuffer(data, dtype=plain[0][1].dtype)
        np.concatenate([v for _, v in plain], out=values)
    hits = true_positions(evaluate(
        _decimals(values, target) if pa.types.is_decimal(target)
        else pa.Array.from_buffers(target, values.size, [None, data])))
    if not hits.size and not any(p.valid is not None for p, _ in plain):
        return []
    starts = np.cumsum([0] + [v.size for _, v in plain])
    # Each page's hits, found by searching the (ascending) hits for the pages' starts:
    # one search per page, not one per hit (a dense predicate has ~a million).
    cuts = np.searchsorted(hits, starts).tolist()
    out = []
    for i, (page, _) in enumerate(plain):
        lo, hi = cuts[i], cuts[i + 1]
        if hi > lo or (page.valid is not None and null_hit()):
            out.append(_to_rows(page, hits[lo:hi] - starts[i], null_hit))
    return out


def matching_rows(
    pf: ParquetFile, rg: int, col: int, target: pa.DataType,
    raw: bytes | memoryview | Read, evaluate: Evaluate, span: Span | None = None,
    values_mask: ValuesMask | None = None, hits: tuple[np.ndarray, int] | None = None,
) -> np.ndarray | None:
    """Rows (ascending, within the row group) of flat leaf ``col`` where ``evaluate``
    holds, read from the chunk's bytes ``raw`` without decoding it to Arrow.

    ``raw``: the chunk's bytes (the range :func:`~pqindex.format.file.chunk_range`
    gives), or ``read(offset, length)`` serving them (offsets within the chunk), which
    is asked for a window of about a MiB at a time: the pages are decompressed and
    evaluated a window at a time. ``evaluate`` is called on the dictionary's values
    once (then only the indices of matching entries are looked for), on the values
    of PLAIN pages, about a MiB of them at a time, and on one null, which says
    whether null rows match. ``span``: the rows of those pages only (see
    :func:`spans`). ``values_mask``: the predicate on the values of PLAIN pages in
    numpy, where it has one (``evaluate`` is still asked about nulls). None when this
    module does not handle the chunk: the caller decodes it with pyarrow.
    """
    if not supported(pf, rg, col, target, matching=True):
        return None
    if isinstance(raw, (bytes, memoryview)) and len(raw) != chunk_range(
            pf.column_meta(rg, col))[1]:
        return None
    try:
        return _matches(pf, rg, col, target, _walk(pf, rg, col, raw, span, defer=True),
                        evaluate, values_mask, hits)
    except (_Fallback, pa.ArrowException, ValueError):
        return None


def _selected(
    pf: ParquetFile, rg: int, col: int, pages: Sequence[int],
    fetch: Callable[[int, int], bytes | memoryview],
) -> Iterator[Item]:
    """The chunk's dictionary page (from the bytes before its first data page, if
    any) and its data pages ``pages`` (OffsetIndex ranges), decompressed."""
    oi = pf.offset_index(rg, col)
    if oi is None or not oi.page_locations:
        raise _Fallback
    locs = oi.page_locations
    meta = pf.column_meta(rg, col)
    optional = pf.leaf(col).max_definition_level == 1
    start = chunk_range(meta)[0]
    first = locs[0].offset or 0
    stored: list[tuple[_Stored, int]] = []
    if first > start:
        d = _stored(fetch(start, first - start), 0)
        if isinstance(d, int) or d.ph.type != PageType.DICTIONARY_PAGE:
            raise _Fallback
        stored.append((d, 0))
    has_dictionary = bool(stored)
    page_rows = pf.page_rows(rg, col) or []
    for p in pages:
        loc = locs[p]
        size = loc.compressed_page_size or 0
        s = _stored(fetch(loc.offset or 0, size), 0)
        if (isinstance(s, int) or s.ph.type == PageType.DICTIONARY_PAGE or s.end != size
                or s.rows != page_rows[p] or (s.dictionary_encoded and not has_dictionary)):
            raise _Fallback
        stored.append((s, loc.first_row_index or 0))
    return _decoded_pages(meta.codec or 0, optional, stored, defer=True)


def matching_page_rows(
    pf: ParquetFile, rg: int, col: int, target: pa.DataType, pages: Sequence[int],
    fetch: Callable[[int, int], bytes | memoryview], evaluate: Evaluate,
    hits: tuple[np.ndarray, int] | None = None,
) -> np.ndarray | None:
    """:func:`matching_rows` over the data pages ``pages`` (ascending) only: rows
    within the row group, from those pages. ``fetch(offset, length)`` serves the
    pages and the bytes before the first data page (the dictionary page).
    ``hits``: the planner's matching entries (``planner.dictionary_hits``)."""
    if not supported(pf, rg, col, target, matching=True):
        return None
    try:
        return _matches(pf, rg, col, target, _selected(pf, rg, col, pages, fetch), evaluate,
                        hits=hits)
    except (_Fallback, pa.ArrowException, ValueError):
        return None
