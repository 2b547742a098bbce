"""Walking a column chunk's page headers, and checking a file end to end.

The page walk reads each header (never the page data) and checks that the
pages tile the chunk and that their value counts add up to the chunk's. The
file check then reads each chunk to check the CRC32 of every page whose header
has one (``format.checksum``), and the deep check lets pyarrow decode every
column chunk, so that damaged levels or values surface as a
:class:`CorruptFileError` naming the row group and column.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pqindex.errors import CorruptFileError, UnsupportedError, public_api
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.format.schema import PageType
from pqindex.format.structs import PageHeader
from pqindex.format.thrift import ThriftError, decode

__all__ = ["PageInfo", "check_file", "check_indexes", "header_at", "walk_pages"]

# A header is rarely longer; a window this size is decoded first and grown when the
# header runs past it (the Thrift decoder copies what it is given).
_HEADER_WINDOW = 512


def header_at(raw: bytes | memoryview, pos: int) -> tuple[PageHeader, int] | None:
    """The page header at ``raw[pos:]`` and where it ends; None when none decodes before
    ``raw`` ends (a damaged header, or one cut by the end of a range)."""
    window = _HEADER_WINDOW
    while True:
        try:
            ph, length = decode(PageHeader, bytes(raw[pos : pos + window]))
            return ph, pos + length
        except ThriftError:
            if pos + window >= len(raw):
                return None
            window *= 8


@dataclass(frozen=True, slots=True)
class PageInfo:
    """One page of a chunk as its header describes it."""

    offset: int
    header_length: int
    header: PageHeader

    @property
    def page_type(self) -> int:
        return self.header.type if self.header.type is not None else -1

    @property
    def total_length(self) -> int:
        return self.header_length + (self.header.compressed_page_size or 0)

    @property
    def num_values(self) -> int | None:
        h = self.header
        if h.data_page_header is not None:
            return h.data_page_header.num_values
        if h.data_page_header_v2 is not None:
            return h.data_page_header_v2.num_values
        if h.dictionary_page_header is not None:
            return h.dictionary_page_header.num_values
        return None


def walk_pages(pf: ParquetFile, rg: int, col: int) -> Iterator[PageInfo]:
    """Every page of the chunk, in file order, with its header checked."""
    start, length = chunk_range(pf.column_meta(rg, col))
    end = start + length
    name = pf.leaf(col).name
    pos = start
    index = 0
    while pos < end:
        ph, hlen = pf.page_header(pos, rg, col)
        info = PageInfo(pos, hlen, ph)
        nv = info.num_values
        if nv is not None and nv < 0:
            raise CorruptFileError(
                f"page {index} claims {nv} values",
                path=pf.path,
                row_group=rg,
                column=name,
                offset=pos,
            )
        if ph.type == PageType.DICTIONARY_PAGE and index != 0:
            raise CorruptFileError(
                f"dictionary page at position {index}, must be first",
                path=pf.path,
                row_group=rg,
                column=name,
                offset=pos,
            )
        if (ph.uncompressed_page_size or 0) < 0:
            raise CorruptFileError(
                f"page {index} claims an uncompressed size of {ph.uncompressed_page_size}",
                path=pf.path,
                row_group=rg,
                column=name,
                offset=pos,
            )
        yield info
        pos += info.total_length
        index += 1
    if pos != end:
        raise CorruptFileError(
            f"pages end at {pos}, the chunk at {end}",
            path=pf.path,
            row_group=rg,
            column=name,
            offset=pos,
        )


def _check_chunk(pf: ParquetFile, rg: int, col: int) -> None:
    name = pf.leaf(col).name
    cmd = pf.column_meta(rg, col)
    values = 0
    data_offsets = []
    for page in walk_pages(pf, rg, col):
        if page.page_type in (PageType.DATA_PAGE, PageType.DATA_PAGE_V2):
            values += page.num_values or 0
            data_offsets.append(page.offset)
    if values != cmd.num_values:
        raise CorruptFileError(
            f"data pages hold {values} values, the chunk's metadata says {cmd.num_values}",
            path=pf.path,
            row_group=rg,
            column=name,
        )
    oi = pf.offset_index(rg, col)
    if oi is not None:
        listed = [loc.offset for loc in oi.page_locations or []]
        if listed != data_offsets:
            raise CorruptFileError(
                f"offset index lists {len(listed)} pages that differ from the "
                f"{len(data_offsets)} data pages in the chunk",
                path=pf.path,
                row_group=rg,
                column=name,
            )


# Physical type -> how plain_bytes packs a value of it (FLBA and INT96 not checked).
_BLOOM_PHYSICAL = {1: "int32", 2: "int64", 4: "float", 5: "double", 6: "bytes"}


def _bloom_values(pf: ParquetFile, rg: int, col: int, reader: object) -> list[bytes] | None:
    """PLAIN bytes of the chunk's distinct values, when pyarrow gives them in the
    physical representation (flat int/float/binary columns); else None."""
    import pyarrow as pa
    import pyarrow.compute as pc

    leaf = pf.leaf(col)
    physical = _BLOOM_PHYSICAL.get(leaf.element.type if leaf.element.type is not None else -1)
    if physical is None or len(leaf.path) != 1 or leaf.max_repetition_level > 0:
        return None
    t = reader.read_row_group(rg, columns=[leaf.path[0]])  # type: ignore[attr-defined]
    arr = t.column(0)
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    want = {"int32": pa.types.is_int32, "int64": pa.types.is_int64,
            "float": pa.types.is_float32, "double": pa.types.is_float64,
            "bytes": lambda t: pa.types.is_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_string(t) or pa.types.is_large_binary(t)}[physical]
    if not want(arr.type):
        return None
    from pqindex.format.bloom import plain_bytes

    values = pc.unique(arr.drop_null()).to_pylist()
    return [plain_bytes(v, physical) for v in values]


@public_api
def check_indexes(pf: ParquetFile, *, values: bool = True) -> list[str]:
    """Raise a PqIndexError for the first damaged page index or Bloom filter;
    return warnings for ColumnIndexes that decode but that the planner ignores.

    Decodes every ColumnIndex and OffsetIndex (the OffsetIndex checked against
    the chunk), validates each ColumnIndex against its OffsetIndex and the
    column's order (some writers write contradictory entries, e.g. a null count
    of -1: the planner then does not use it, so that is a warning), decodes
    every Bloom filter, and with ``values`` checks that each chunk's distinct
    values are in its filter (a damaged bitset would drop matching rows).
    """
    from pqindex.format.values import validate_column_index

    warnings: list[str] = []
    reader = None
    for rg in range(pf.num_row_groups):
        for leaf in pf.schema.leaves:
            col = leaf.index
            oi = pf.offset_index(rg, col)
            ci = pf.column_index(rg, col)
            if ci is not None and oi is not None:
                reason = validate_column_index(ci, len(oi.page_locations or []), leaf)
                if reason is not None:
                    warnings.append(f"row group {rg}, column {leaf.name!r}: column index "
                                    f"unusable (ignored by the planner): {reason}")
            bf = pf.bloom_filter(rg, col)
            if bf is None or not values:
                continue
            if reader is None:
                import pyarrow as pa
                import pyarrow.parquet as pq

                from pqindex.io.pyfile import for_pyarrow

                try:  # the version the footer came from, never the path opened again
                    reader = pq.ParquetFile(for_pyarrow(pf.path, pf.source))
                except (pa.ArrowException, OSError, ValueError) as e:
                    raise CorruptFileError(f"pyarrow cannot read the file: {e}",
                                           path=pf.path) from None
            plain = _bloom_values(pf, rg, col, reader)
            for raw in plain or ():
                if not bf.might_contain(raw):
                    raise CorruptFileError(
                        "Bloom filter lacks a value the chunk holds (damaged bitset)",
                        path=pf.path, row_group=rg, column=leaf.name)
    return warnings


@public_api
def check_file(pf: ParquetFile, *, decode: bool = True) -> int:
    """Raise a PqIndexError for the first problem found in the file; return how many
    page checksums were checked.

    Walks every page header of every chunk, checks the CRC32 of every page that has
    one (a mismatch names the row group, column and the page's offset); with
    ``decode`` also decodes each column chunk with pyarrow (levels, values,
    dictionary indexes).
    """
    from pqindex.format.checksum import PageChecks  # it walks pages with header_at

    crcs = 0
    for rg in range(pf.num_row_groups):
        checks = PageChecks(pf, rg)
        for col in range(len(pf.schema.leaves)):
            _check_chunk(pf, rg, col)
            checks.chunk(col)  # after the walk: the pages are known to tile the chunk
        crcs += checks.checked
    if not decode:
        return crcs
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        from pqindex.io.pyfile import for_pyarrow

        reader = pq.ParquetFile(for_pyarrow(pf.path, pf.source))
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CorruptFileError(f"pyarrow cannot read the file: {e}", path=pf.path) from None
    top = list(dict.fromkeys(leaf.path[0] for leaf in pf.schema.leaves))
    for rg in range(pf.num_row_groups):
        for name in top:
            try:
                # Batches keep memory bounded and avoid pyarrow's limits on huge chunks.
                for batch in reader.iter_batches(batch_size=65536, row_groups=[rg], columns=[name]):
                    batch.validate(full=True)
            except pa.ArrowNotImplementedError as e:
                raise UnsupportedError(
                    f"pyarrow cannot decode this column: {e}",
                    path=pf.path,
                    row_group=rg,
                    column=name,
                ) from None
            except (pa.ArrowException, OSError, ValueError) as e:
                raise CorruptFileError(
                    f"column data does not decode: {e}", path=pf.path, row_group=rg, column=name
                ) from None
    return crcs
