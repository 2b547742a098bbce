"""Decode a chosen subset of a column chunk's data pages with pyarrow.

Arrow's C++ reader decodes whole column chunks only. To decode some pages, this
module copies them (header and data, byte for byte) after a ``PAR1`` magic into
a small in-memory Parquet file, with the chunk's dictionary page in front when
there is one, and writes a synthetic footer describing just those columns and
pages: the schema pruned to the chosen leaves (ancestor groups kept, so levels
are unchanged), one row group of the chosen pages' rows, one column chunk per
leaf whose sizes, value counts and offsets are recomputed for the copied pages.

This is sound because, with an OffsetIndex, every data page starts at a record
boundary (``first_row_index``), so a run of pages is a run of whole rows. The
decoded rows come back in page order; ``first_row_index`` maps them back.

The footer carries no ``ARROW:schema``: the original one describes every column
of the real file and could disagree with the pruned schema. Instead the caller
passes the Arrow type ``pq.read_table`` gives the top-level field (see
:func:`arrow_schema`), and the decoded result is cast to it, pruned to the
leaves actually decoded.
"""

from __future__ import annotations

import bisect
import dataclasses
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pqindex.errors import CorruptFileError, UnsupportedError, located
from pqindex.format import views
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.format.pages import PageInfo
from pqindex.format.schema import ConvertedType, Encoding, PageType, PhysicalType
from pqindex.format.structs import (
    ColumnChunk,
    ColumnOrder,
    FileMetaData,
    ListType,
    LogicalType,
    OffsetIndex,
    PageEncodingStats,
    PageHeader,
    RowGroup,
    SchemaElement,
)
from pqindex.format.thrift import ThriftError, decode
from pqindex.scan.fetch import arrow_metadata

__all__ = [
    "Fetch",
    "arrow_schema",
    "decode_field_pages",
    "decode_one_page",
    "decode_pages",
    "field_byte_ranges",
    "page_byte_ranges",
    "page_first_rows",
    "page_row_spans",
]

# Bytes already fetched, keyed by their file offset (exact page ranges or larger
# coalesced ranges), or a function reading ``(offset, length)`` on demand.
Fetch = Mapping[int, bytes] | Callable[[int, int], bytes | memoryview]

_MAGIC = b"PAR1"
_DATA_PAGES = (PageType.DATA_PAGE, PageType.DATA_PAGE_V2)
_DICTIONARY_PAGE_ENCODINGS = frozenset({Encoding.PLAIN_DICTIONARY, Encoding.RLE_DICTIONARY})


# ---------------------------------------------------------------- byte ranges


def _offset_index(pf: ParquetFile, rg: int, col: int) -> OffsetIndex:
    oi = pf.offset_index(rg, col)
    if oi is None or not oi.page_locations:
        raise UnsupportedError(
            "decoding chosen pages needs an OffsetIndex; this chunk has none",
            path=pf.path,
            row_group=rg,
            column=pf.leaf(col).name,
        )
    return oi


def _check_pages(pf: ParquetFile, rg: int, col: int, pages: Sequence[int]) -> list[int]:
    """Pages as a sorted list; they must exist and be distinct."""
    n = len(_offset_index(pf, rg, col).page_locations or [])
    out = sorted(pages)
    if not out:
        raise ValueError("no pages chosen")
    if out[0] < 0 or out[-1] >= n:
        raise ValueError(f"page numbers must lie in [0, {n}), got {list(pages)}")
    if len(set(out)) != len(out):
        raise ValueError(f"page numbers repeat: {list(pages)}")
    return out


def _prefix_range(pf: ParquetFile, rg: int, col: int) -> tuple[int, int] | None:
    """The bytes before the first data page: the dictionary page, if the chunk has one.

    Found without I/O: the chunk starts at its dictionary page, and the
    OffsetIndex says where the first data page starts.
    """
    start, _ = chunk_range(pf.column_meta(rg, col))
    locs = _offset_index(pf, rg, col).page_locations or []
    first = locs[0].offset or 0
    return (start, first - start) if first > start else None


def page_byte_ranges(
    pf: ParquetFile, rg: int, col: int, pages: Sequence[int], *, prefix_needed: bool = True
) -> list[tuple[int, int]]:
    """``(offset, length)`` of the chunk's dictionary page (if any) and of each chosen page.

    Pure: reads nothing beyond the (cached) OffsetIndex. Ranges are in file order;
    fetching and coalescing them is the I/O layer's job. The dictionary range is
    everything between the chunk's start and its first data page; it is left out
    when ``prefix_needed`` is False (the caller already holds the decoded dictionary)
    and when the footer says the chosen pages are not dictionary-encoded (a decoder
    that meets one after all reads the dictionary on demand).
    """
    locs = _offset_index(pf, rg, col).page_locations or []
    out = []
    wanted = prefix_needed and pf.pages_need_dictionary(rg, col, pages)
    prefix = _prefix_range(pf, rg, col) if wanted else None
    if prefix is not None:
        out.append(prefix)
    for p in _check_pages(pf, rg, col, pages):
        loc = locs[p]
        assert loc.offset is not None and loc.compressed_page_size is not None  # checked by pf
        out.append((loc.offset, loc.compressed_page_size))
    return out


def field_byte_ranges(
    pf: ParquetFile, rg: int, leaf_cols: Sequence[int], pages_per_leaf: Sequence[Sequence[int]]
) -> list[tuple[int, int]]:
    """:func:`page_byte_ranges` of several leaves, for :func:`decode_field_pages`."""
    out = []
    for col, pages in zip(leaf_cols, pages_per_leaf, strict=True):
        out += page_byte_ranges(pf, rg, col, pages)
    return sorted(out)


def page_first_rows(pf: ParquetFile, rg: int, col: int, pages: Sequence[int]) -> np.ndarray:
    """First row (within the row group) of each chosen page, in ascending page order."""
    locs = _offset_index(pf, rg, col).page_locations or []
    return np.asarray(
        [locs[p].first_row_index or 0 for p in _check_pages(pf, rg, col, pages)], dtype=np.int64
    )


def page_row_spans(
    pf: ParquetFile, rg: int, col: int, pages: Sequence[int]
) -> list[tuple[int, int]]:
    """The rows the chosen pages hold, as merged ``[start, end)`` spans."""
    rows = pf.page_rows(rg, col)
    assert rows is not None  # _check_pages needs the OffsetIndex
    spans: list[tuple[int, int]] = []
    for p, first in zip(
        _check_pages(pf, rg, col, pages), page_first_rows(pf, rg, col, pages), strict=True
    ):
        start, end = int(first), int(first) + rows[p]
        if spans and spans[-1][1] == start:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return spans


class _Bytes:
    """Serves ``(offset, length)`` reads from a Fetch."""

    def __init__(self, fetch: Fetch) -> None:
        self._fn: Callable[[int, int], bytes | memoryview] | None = None
        self._map: Mapping[int, bytes] | None = None
        self._starts: list[int] = []
        if callable(fetch):
            self._fn = fetch
        else:
            self._map = fetch
            self._starts = sorted(fetch)

    def get(self, offset: int, length: int) -> bytes:
        if self._fn is not None:
            buf = bytes(self._fn(offset, length))
            if len(buf) != length:
                raise ValueError(f"fetch({offset}, {length}) returned {len(buf)} bytes")
            return buf
        assert self._map is not None
        exact = self._map.get(offset)
        if exact is not None and len(exact) >= length:
            return bytes(exact[:length])
        # A coalesced range that covers this one.
        i = bisect.bisect_right(self._starts, offset) - 1
        while i >= 0:
            start = self._starts[i]
            buf = self._map[start]
            if offset + length <= start + len(buf):
                return bytes(buf[offset - start : offset - start + length])
            i -= 1
        raise KeyError(f"bytes [{offset}, {offset + length}) were not fetched")


# ---------------------------------------------------------------- synthetic file


def _headers(
    raw: bytes, pf: ParquetFile, rg: int, col: int, offset: int
) -> Iterator[tuple[PageHeader, int, int]]:
    """Walk the pages packed in ``raw``: (header, header length, position in raw)."""
    pos = 0
    while pos < len(raw):
        try:
            ph, end = decode(PageHeader, raw, pos)
        except ThriftError as e:
            raise CorruptFileError(
                f"corrupt page header: {e.reason}",
                path=pf.path,
                row_group=rg,
                column=pf.leaf(col).name,
                offset=offset + e.offset,
            ) from None
        size = ph.compressed_page_size
        if size is None or size < 0 or end + size > len(raw):
            raise CorruptFileError(
                f"page of {size} bytes runs past its range [{offset}, {offset + len(raw)})",
                path=pf.path,
                row_group=rg,
                column=pf.leaf(col).name,
                offset=offset + pos,
            )
        yield ph, end - pos, pos
        pos = end + size


@dataclasses.dataclass
class _Chunk:
    """One leaf's pages, ready to be laid out in the synthetic file."""

    col: int
    dictionary: bytes | None
    dictionary_header: PageHeader | None
    pages: list[tuple[bytes, PageHeader, int]]  # (bytes, header, header length)
    rows: int


def _gather(pf: ParquetFile, rg: int, col: int, pages: list[int], src: _Bytes) -> _Chunk:
    name = pf.leaf(col).name
    dictionary = dict_header = None
    locs = _offset_index(pf, rg, col).page_locations or []
    page_rows = pf.page_rows(rg, col) or []
    out = []
    for p in pages:
        off, size = locs[p].offset or 0, locs[p].compressed_page_size or 0
        raw = src.get(off, size)
        found = list(_headers(raw, pf, rg, col, off))
        if len(found) != 1 or found[0][0].type not in _DATA_PAGES:
            raise CorruptFileError(
                f"offset index page {p} [{off}, {off + size}) is not exactly one data page",
                path=pf.path,
                row_group=rg,
                column=name,
                offset=off,
            )
        ph, hlen, _ = found[0]
        out.append((raw, ph, hlen))
    # The dictionary page only when a chosen page is dictionary-encoded (PLAIN pages
    # after a writer's fallback need none, and page_byte_ranges may not fetch it).
    prefix = _prefix_range(pf, rg, col)
    if prefix is not None and any(_encoding(ph) in _DICTIONARY_PAGE_ENCODINGS
                                  for _, ph, _ in out):
        raw = src.get(*prefix)
        for ph, hlen, pos in _headers(raw, pf, rg, col, prefix[0]):
            if ph.type == PageType.DICTIONARY_PAGE:
                dictionary = raw[pos : pos + hlen + (ph.compressed_page_size or 0)]
                dict_header = ph
                break
    return _Chunk(col, dictionary, dict_header, out, sum(page_rows[p] for p in pages))


def _num_values(ph: PageHeader) -> int:
    h = ph.data_page_header if ph.type == PageType.DATA_PAGE else ph.data_page_header_v2
    return (h.num_values if h is not None else None) or 0


def _encoding(ph: PageHeader) -> int | None:
    if ph.type == PageType.DATA_PAGE and ph.data_page_header is not None:
        return ph.data_page_header.encoding
    if ph.type == PageType.DATA_PAGE_V2 and ph.data_page_header_v2 is not None:
        return ph.data_page_header_v2.encoding
    if ph.dictionary_page_header is not None:
        return ph.dictionary_page_header.encoding
    return None


def _encoding_stats(chunk: _Chunk) -> list[PageEncodingStats]:
    """Recount page types and encodings for the copied pages."""
    counts: dict[tuple[int, int], int] = {}
    headers = [ph for _, ph, _ in chunk.pages]
    if chunk.dictionary_header is not None:
        headers.insert(0, chunk.dictionary_header)
    for ph in headers:
        key = (ph.type or 0, _encoding(ph) or 0)
        counts[key] = counts.get(key, 0) + 1
    return [PageEncodingStats(page_type=t, encoding=e, count=n) for (t, e), n in counts.items()]


def _pruned_schema(pf: ParquetFile, leaf_cols: Sequence[int]) -> list[SchemaElement]:
    """The schema elements on the paths to ``leaf_cols``, group child counts adjusted."""
    elements = pf.metadata.schema or []
    wanted = set(leaf_cols)
    # Depth-first walk; each element's leaf range tells whether it is kept.
    kept: list[SchemaElement] = []
    pos = 1
    leaf = 0

    def walk() -> int:
        """Visit the subtree at ``pos``; returns how many wanted leaves it holds."""
        nonlocal pos, leaf
        el = elements[pos]
        pos += 1
        if el.num_children is None or el.num_children <= 0:
            if el.type is None:  # a group without children holds no leaves
                return 0
            hit = leaf in wanted
            leaf += 1
            if hit:
                kept.append(el)
            return int(hit)
        slot = len(kept)
        kept.append(el)  # placeholder, replaced once the kept children are counted
        counts = [walk() for _ in range(el.num_children)]
        if sum(counts):
            kept[slot] = dataclasses.replace(el, num_children=sum(n > 0 for n in counts))
        else:
            del kept[slot:]
        return sum(counts)

    root = elements[0]
    kids = sum(walk() > 0 for _ in range(root.num_children or 0))
    return [dataclasses.replace(root, num_children=kids), *_half_maps_as_lists(kept)]


def _is_map(el: SchemaElement) -> bool:
    return el.converted_type == ConvertedType.MAP or (
        el.logicalType is not None and el.logicalType.MAP is not None
    )


def _half_maps_as_lists(elements: list[SchemaElement]) -> list[SchemaElement]:
    """Re-annotate maps pruned to their keys or values alone as lists of them.

    pyarrow rejects a map without keys; a LIST whose repeated group has one
    field reads as a list of that field, for keys and values alike.
    """
    out = list(elements)
    for i, el in enumerate(out[:-1]):
        kv = out[i + 1]
        if _is_map(el) and el.num_children == 1 and kv.num_children == 1:
            out[i] = dataclasses.replace(
                el, converted_type=ConvertedType.LIST, logicalType=LogicalType(LIST=ListType())
            )
            if kv.converted_type == ConvertedType.MAP_KEY_VALUE:
                out[i + 1] = dataclasses.replace(kv, converted_type=None)
    return out


def _synthetic_file(pf: ParquetFile, rg: int, chunks: list[_Chunk]) -> bytes:
    """The in-memory Parquet file holding these chunks' pages."""
    body = bytearray(_MAGIC)
    columns = []
    total_uncompressed = 0
    for ch in chunks:
        real = pf.column_meta(rg, ch.col)
        start = len(body)
        dict_offset = None
        uncompressed = 0
        if ch.dictionary is not None:
            assert ch.dictionary_header is not None
            dict_offset = start
            body += ch.dictionary
            uncompressed += (
                len(ch.dictionary)
                - (ch.dictionary_header.compressed_page_size or 0)
                + (ch.dictionary_header.uncompressed_page_size or 0)
            )
        data_offset = len(body)
        for raw, ph, hlen in ch.pages:
            body += raw
            uncompressed += hlen + (ph.uncompressed_page_size or 0)
        total_uncompressed += uncompressed
        meta = dataclasses.replace(
            real,
            num_values=sum(_num_values(ph) for _, ph, _ in ch.pages),
            total_uncompressed_size=uncompressed,
            total_compressed_size=len(body) - start,
            data_page_offset=data_offset,
            index_page_offset=None,
            dictionary_page_offset=dict_offset,
            statistics=None,
            encoding_stats=_encoding_stats(ch) if real.encoding_stats is not None else None,
            bloom_filter_offset=None,
            bloom_filter_length=None,
            size_statistics=None,
            geospatial_statistics=None,
            unknown_fields=(),  # newer fields could describe the whole chunk
        )
        columns.append(ColumnChunk(file_offset=start, meta_data=meta))
    rows = chunks[0].rows
    orders: list[ColumnOrder] | None = None
    if pf.metadata.column_orders is not None and len(pf.metadata.column_orders) > max(
        ch.col for ch in chunks
    ):
        orders = [pf.metadata.column_orders[ch.col] for ch in chunks]
    md = FileMetaData(
        version=pf.metadata.version or 1,
        schema=_pruned_schema(pf, [ch.col for ch in chunks]),
        num_rows=rows,
        row_groups=[
            RowGroup(
                columns=columns,
                total_byte_size=total_uncompressed,
                num_rows=rows,
                file_offset=4,
                total_compressed_size=len(body) - 4,
                ordinal=0,
            )
        ],
        # pyarrow works around old writers' bugs based on created_by.
        created_by=pf.metadata.created_by,
        column_orders=orders,
    )
    footer = md.encode()
    body += footer
    body += struct.pack("<I", len(footer))
    body += _MAGIC
    return bytes(body)


# ---------------------------------------------------------------- arrow types

# A footer up to this long has its Arrow schema from pyarrow's parse of all of it.
_PARSED_WHOLE = 16 << 10


def arrow_schema(pf: ParquetFile) -> pa.Schema:
    """The Arrow schema ``pq.read_table`` gives the real file, from its footer alone."""
    # A damaged ARROW:schema entry makes pyarrow raise OSError / ArrowInvalid.
    with located(default=CorruptFileError, what="the footer's Arrow schema does not decode",
                 path=pf.path):
        if "arrow_metadata" in pf.derived or pf.footer_length <= _PARSED_WHOLE:
            # pyarrow's parse of the whole footer, which its reads of small row groups
            # take too: one parse a file, not two (~0.1 ms of a small file's scan).
            return arrow_metadata(pf).schema.to_arrow_schema()
        # The footer without its row groups: pyarrow's schema comes from the schema,
        # key-value metadata and column orders only, and a footer of many row groups
        # parses slowly.
        footer = dataclasses.replace(pf.metadata, row_groups=[], num_rows=0).encode()
        buf = _MAGIC + footer + struct.pack("<I", len(footer)) + _MAGIC
        return pq.read_schema(pa.BufferReader(buf))


def _aligned(decoded: pa.DataType, target: pa.DataType) -> pa.DataType:
    """``target`` pruned to the children ``decoded`` has (the leaves actually read).

    Where the shapes don't match, the decoded type is kept.
    """
    if pa.types.is_struct(decoded):
        if not pa.types.is_struct(target):
            return decoded
        fields = []
        for f in decoded:
            i = target.get_field_index(f.name)
            if i < 0:
                return decoded
            t = target.field(i)
            fields.append(pa.field(t.name, _aligned(f.type, t.type), t.nullable, t.metadata))
        return pa.struct(fields)
    if pa.types.is_map(decoded):
        if not pa.types.is_map(target):
            return decoded
        key = target.key_field.with_type(_aligned(decoded.key_type, target.key_type))
        item = target.item_field.with_type(_aligned(decoded.item_type, target.item_type))
        return pa.map_(key, item, keys_sorted=target.keys_sorted)
    if pa.types.is_list(decoded) and pa.types.is_map(target):
        # A map pruned to its keys or its values (see _half_maps_as_lists).
        side = target.key_field if decoded.value_field.name == target.key_field.name else None
        side = side or target.item_field
        return pa.list_(side.with_type(_aligned(decoded.value_type, side.type)))
    if pa.types.is_list(decoded) or pa.types.is_large_list(decoded):
        if isinstance(target, (pa.ListType, pa.LargeListType, pa.FixedSizeListType)) or (
            pa.types.is_list_view(target) or pa.types.is_large_list_view(target)
        ):
            vf = target.value_field
            vf = vf.with_type(_aligned(decoded.value_type, vf.type))
            if pa.types.is_large_list(target):
                return pa.large_list(vf)
            if pa.types.is_fixed_size_list(target):
                return pa.list_(vf, target.list_size)
            if pa.types.is_list_view(target):
                return pa.list_view(vf)
            if pa.types.is_large_list_view(target):
                return pa.large_list_view(vf)
            return pa.list_(vf)
        return decoded
    if pa.types.is_nested(target):
        return decoded
    return target


def _cast(arr: pa.Array, target: pa.DataType | None) -> pa.Array:
    if target is None:
        return arr
    want = _aligned(arr.type, target)
    return arr if want == arr.type else views.cast(arr, want)


def _read(
    buf: bytes, pf: ParquetFile, rg: int, cols: list[int], read_dictionary: list[str] | None = None
) -> pa.Table:
    try:
        reader = pq.ParquetFile(pa.BufferReader(buf), pre_buffer=False,
                                read_dictionary=read_dictionary)
        return reader.read_row_group(0, use_threads=False)
    except (pa.ArrowException, OSError) as e:
        # Headers were checked; what is left is damaged page data (or a schema
        # pyarrow refuses, which it would refuse in the real file too).
        raise CorruptFileError(
            f"pyarrow could not decode the chosen pages: {e}",
            path=pf.path,
            row_group=rg,
            column=", ".join(pf.leaf(c).name for c in cols),
        ) from e


def _single(col: pa.ChunkedArray) -> pa.Array:
    if col.num_chunks == 1:
        return col.chunk(0)
    return col.combine_chunks()


# ---------------------------------------------------------------- decoding


def decode_pages(
    pf: ParquetFile,
    rg: int,
    col: int,
    pages: Sequence[int],
    fetched: Fetch,
    *,
    arrow_type: pa.DataType | None = None,
    as_dictionary: bool = False,
) -> tuple[pa.Array, np.ndarray]:
    """Decode the chosen data pages of leaf ``col`` in row group ``rg``.

    ``as_dictionary`` (flat BYTE_ARRAY leaves) returns a DictionaryArray over the
    chunk's dictionary instead of materialized values, and ignores ``arrow_type``:
    a predicate is evaluated once per dictionary entry, not once per row.

    ``fetched`` serves the bytes of :func:`page_byte_ranges` (exact or coalesced
    ranges keyed by offset, or a read function). Pages are taken in ascending
    order. Returns the decoded top-level field and each page's first row within
    the row group; decoded rows are those pages' rows, in order.

    For a leaf nested in a struct, list or map, the result is the top-level
    field as pyarrow decodes it with only this leaf (a StructArray with one
    child, a ListArray of it, ...), struct and list validity included; a map
    leaf alone comes back as a list of its keys or of its values. The caller
    assembles the field, or uses :func:`decode_field_pages`. ``arrow_type``, the field's type in
    ``pq.read_table`` (see :func:`arrow_schema`), is pruned to that leaf and the
    result cast to it; without it the result has the type pyarrow infers from
    the Parquet schema alone (string instead of large_string or dictionary, for
    instance).
    """
    chosen = _check_pages(pf, rg, col, pages)
    chunk = _gather(pf, rg, col, chosen, _Bytes(fetched))
    leaf = pf.leaf(col)
    dictionary = (
        as_dictionary and len(leaf.path) == 1 and leaf.element.type == PhysicalType.BYTE_ARRAY
    )
    table = _read(
        _synthetic_file(pf, rg, [chunk]), pf, rg, [col], [leaf.path[0]] if dictionary else None
    )
    _check_rows(pf, rg, table, chunk.rows, [col])
    arr = _single(table.column(0))
    if dictionary:
        return arr, page_first_rows(pf, rg, col, chosen)
    return _cast(arr, arrow_type), page_first_rows(pf, rg, col, chosen)


def decode_field_pages(
    pf: ParquetFile,
    rg: int,
    leaf_cols: Sequence[int],
    pages_per_leaf: Sequence[Sequence[int]],
    fetch: Fetch,
    *,
    arrow_type: pa.DataType | None = None,
) -> pa.Array:
    """Decode a top-level field made of several leaves, from chosen pages of each.

    ``pages_per_leaf[i]`` are the pages chosen for ``leaf_cols[i]``; together they
    must cover exactly the same rows in every leaf (all pages, or row-aligned
    subsets), else ValueError: the caller then decodes whole chunks. The result
    holds those rows in order (see :func:`page_row_spans`), typed like
    ``arrow_type`` pruned to the leaves given.
    """
    if len(leaf_cols) != len(pages_per_leaf) or not leaf_cols:
        raise ValueError("leaf_cols and pages_per_leaf must be non-empty and of equal length")
    if len(set(leaf_cols)) != len(leaf_cols):
        raise ValueError(f"leaf columns repeat: {list(leaf_cols)}")
    tops = {pf.leaf(c).path[0] for c in leaf_cols}
    if len(tops) != 1:
        raise ValueError(f"leaves belong to several top-level fields: {sorted(tops)}")
    order = sorted(range(len(leaf_cols)), key=lambda i: leaf_cols[i])
    spans = [page_row_spans(pf, rg, leaf_cols[i], pages_per_leaf[i]) for i in order]
    if any(s != spans[0] for s in spans[1:]):
        names = [pf.leaf(leaf_cols[i]).name for i in order]
        raise ValueError(f"chosen pages of {names} cover different rows: {spans}")
    src = _Bytes(fetch)
    chunks = [
        _gather(pf, rg, leaf_cols[i], _check_pages(pf, rg, leaf_cols[i], pages_per_leaf[i]), src)
        for i in order
    ]
    table = _read(_synthetic_file(pf, rg, chunks), pf, rg, [ch.col for ch in chunks])
    _check_rows(pf, rg, table, chunks[0].rows, [ch.col for ch in chunks])
    return _cast(_single(table.column(0)), arrow_type)


def decode_one_page(
    pf: ParquetFile, rg: int, col: int, page: PageInfo, rows: int, fetch: Fetch
) -> pa.Array:
    """Decode one data page of a chunk that may have no OffsetIndex.

    ``page`` comes from :func:`~pqindex.format.pages.walk_pages`; ``rows`` is how
    many rows the caller knows it holds (its values for a leaf outside any list,
    ``num_rows`` of a v2 page). A page not starting at a record boundary decodes
    to another count and raises CorruptFileError. ``fetch`` serves the page and
    the chunk's dictionary page. Returns the top-level field as pyarrow decodes
    it with only this leaf, typed from the Parquet schema alone.
    """
    if page.page_type not in _DATA_PAGES:
        raise ValueError(f"page at {page.offset} is not a data page")
    src = _Bytes(fetch)
    dictionary = dict_header = None
    dic = pf.dictionary_page(rg, col)
    if dic is not None:
        dictionary, dict_header = src.get(dic.offset, dic.total_length), dic.header
    raw = src.get(page.offset, page.total_length)
    chunk = _Chunk(col, dictionary, dict_header, [(raw, page.header, page.header_length)], rows)
    table = _read(_synthetic_file(pf, rg, [chunk]), pf, rg, [col])
    _check_rows(pf, rg, table, rows, [col])
    return _single(table.column(0))


def _check_rows(
    pf: ParquetFile, rg: int, table: pa.Table, rows: int, cols: list[int], fields: int = 1
) -> None:
    # A page not starting at a record boundary would shift rows silently; pyarrow
    # notices only a count mismatch, so make that an error here.
    if table.num_rows != rows or table.num_columns != fields:
        raise CorruptFileError(
            f"decoded {table.num_rows} rows from pages holding {rows}",
            path=pf.path,
            row_group=rg,
            column=", ".join(pf.leaf(c).name for c in cols),
        )


def decode_columns(
    pf: ParquetFile,
    rg: int,
    cols: Sequence[int],
    pages_per_col: Sequence[Sequence[int]],
    fetch: Fetch,
    *,
    arrow_types: Sequence[pa.DataType | None] | None = None,
) -> list[pa.Array]:
    """Decode several flat leaves at once from one synthetic file.

    Their chosen pages must cover the same rows (ValueError otherwise); one
    footer and one pyarrow read serve every column, which is what makes a point
    lookup over many columns cheap. Results follow ``cols``' order.
    """
    if len(cols) != len(pages_per_col) or not cols:
        raise ValueError("cols and pages_per_col must be non-empty and of equal length")
    if len(set(cols)) != len(cols):
        raise ValueError(f"columns repeat: {list(cols)}")
    spans = [page_row_spans(pf, rg, c, p) for c, p in zip(cols, pages_per_col, strict=True)]
    if any(s != spans[0] for s in spans[1:]):
        raise ValueError("chosen pages of the columns cover different rows")
    order = sorted(range(len(cols)), key=lambda i: cols[i])
    src = _Bytes(fetch)
    chunks = [_gather(pf, rg, cols[i], _check_pages(pf, rg, cols[i], pages_per_col[i]), src)
              for i in order]
    table = _read(_synthetic_file(pf, rg, chunks), pf, rg, [ch.col for ch in chunks])
    _check_rows(pf, rg, table, chunks[0].rows, [ch.col for ch in chunks], len(chunks))
    out: list[pa.Array] = [pa.array([])] * len(cols)
    for pos, i in enumerate(order):
        target = arrow_types[i] if arrow_types is not None else None
        out[i] = _cast(_single(table.column(pos)), target)
    return out
