"""Where a file's column chunks and pages lie, and the checks that they fit.

Run when a file is opened (row groups and chunks) and when an OffsetIndex is
decoded: every offset the metadata declares must lie inside the data region
before anything is read at it.
"""

from __future__ import annotations

from pqindex.errors import CorruptFileError, UnsupportedError
from pqindex.format.schema import Schema
from pqindex.format.structs import ColumnMetaData, FileMetaData, OffsetIndex

__all__ = ["check_offset_index", "check_row_groups", "chunk_range"]


def chunk_range(cmd: ColumnMetaData) -> tuple[int, int]:
    """``(offset, length)`` of a column chunk's pages, dictionary page included."""
    # Offset 0 is the magic, never a page: writers use it for "absent" (a chunk
    # without data pages, or no dictionary).
    data, dictionary = cmd.data_page_offset, cmd.dictionary_page_offset
    start = min(data, dictionary) if data and dictionary else (data or dictionary or 0)
    return start, cmd.total_compressed_size or 0


def check_row_groups(md: FileMetaData, schema: Schema, data_end: int,
                     path: str) -> tuple[int, int] | None:
    """Check each row group and column chunk against the schema and the data
    region ``[4, data_end)``.

    Returns ``(declared, counted)`` rows when the footer's num_rows differs from the
    row groups' sum, else None.
    """
    if md.num_rows is None or md.num_rows < 0:
        raise CorruptFileError(f"invalid num_rows {md.num_rows}", path=path)
    nleaves = len(schema.leaves)
    total = 0
    for i, rg in enumerate(md.row_groups or []):
        if rg.num_rows is None or rg.num_rows < 0:
            raise CorruptFileError(
                f"invalid num_rows {rg.num_rows}", path=path, row_group=i
            )
        total += rg.num_rows
        cols = rg.columns or []
        if len(cols) != nleaves:
            raise CorruptFileError(
                f"row group has {len(cols)} column chunks, the schema has {nleaves} leaves",
                path=path,
                row_group=i,
            )
        for j, cc in enumerate(cols):
            name = schema.leaves[j].name
            if cc.crypto_metadata is not None or cc.encrypted_column_metadata is not None:
                raise UnsupportedError(
                    "encrypted column chunk: encrypted files are not supported",
                    path=path,
                    row_group=i,
                    column=name,
                )
            if cc.file_path:
                raise UnsupportedError(
                    f"column data in another file ({cc.file_path!r}) is not supported",
                    path=path,
                    row_group=i,
                    column=name,
                )
            cmd = cc.meta_data
            if cmd is None:
                raise CorruptFileError(
                    "column chunk has no meta_data", path=path, row_group=i, column=name
                )
            start, length = chunk_range(cmd)
            if cmd.type != schema.leaves[j].element.type:
                raise CorruptFileError(
                    f"column chunk type {cmd.type} differs from the schema's "
                    f"{schema.leaves[j].element.type}",
                    path=path,
                    row_group=i,
                    column=name,
                )
            empty = not cmd.num_values and not length  # pyarrow's 0-row row groups
            if not empty and (
                cmd.data_page_offset is None
                or start < 4
                or length < 0
                or start + length > data_end
            ):
                raise CorruptFileError(
                    f"column chunk [{start}, {start + length}) lies outside the data "
                    f"region [4, {data_end})",
                    path=path,
                    row_group=i,
                    column=name,
                    offset=start,
                )
            if cmd.num_values is None or cmd.num_values < 0:
                raise CorruptFileError(
                    f"invalid num_values {cmd.num_values}",
                    path=path,
                    row_group=i,
                    column=name,
                )
    if total != md.num_rows:
        # pyarrow and parquet-java trust the row groups; so do we, but say so loudly
        # only when a caller asks (inspect shows both numbers).
        return (md.num_rows, total)
    return None


def check_offset_index(oi: OffsetIndex, cmd: ColumnMetaData, rows: int, *, path: str,
                       row_group: int, column: str) -> None:
    """Pages must lie inside the chunk and start at increasing rows from 0."""
    locs = oi.page_locations
    if not locs:
        raise CorruptFileError(
            "offset index lists no pages", path=path, row_group=row_group, column=column
        )
    start, length = chunk_range(cmd)
    prev_row = -1
    for i, loc in enumerate(locs):
        if (
            loc.offset is None
            or loc.compressed_page_size is None
            or loc.first_row_index is None
        ):
            raise CorruptFileError(
                f"offset index page {i} lacks a required field",
                path=path,
                row_group=row_group,
                column=column,
            )
        if (
            loc.offset < start
            or loc.compressed_page_size <= 0
            or loc.offset + loc.compressed_page_size > start + length
        ):
            raise CorruptFileError(
                f"offset index page {i} [{loc.offset}, {loc.offset + loc.compressed_page_size}) "
                f"lies outside its column chunk [{start}, {start + length})",
                path=path,
                row_group=row_group,
                column=column,
                offset=loc.offset,
            )
        if loc.first_row_index <= prev_row or loc.first_row_index >= max(rows, 1):
            raise CorruptFileError(
                f"offset index page {i} starts at row {loc.first_row_index}, after "
                f"{prev_row} in a row group of {rows} rows",
                path=path,
                row_group=row_group,
                column=column,
            )
        prev_row = loc.first_row_index
    if locs[0].first_row_index != 0:
        raise CorruptFileError(
            f"offset index's first page starts at row {locs[0].first_row_index}, not 0",
            path=path,
            row_group=row_group,
            column=column,
        )
