"""The embedded indexes ``write_table`` adds by default: ``indexes="auto"``.

A "distinct" index (exact value sets per file, row group and page) on each
column whose values are few. ``category = 'rare'`` on such a column otherwise
reads every page of it (min/max of an unsorted column rarely exclude a value);
with the page sets it reads only the pages that hold the value.

The rule, decided from the rows being written (nothing is read back):

* a top-level column of a type the kind indexes (integers, floats, decimals,
  dates, times, timestamps, strings, binaries, UUIDs; not booleans, lists, maps
  or structs) with at least one non-null value;
* at most ``AUTO_MAX_DISTINCT`` (1,024, the kind's own cap) distinct values in
  **every** row group: a column over it in any row group gets no index (its
  page index and dictionary already say what little a large set would);
* the sets fit the budget: all auto indexes of a file together at most
  ``AUTO_MAX_SHARE`` (2%) of the file's data bytes, or ``AUTO_MIN_BYTES``
  (16 KiB) for small files. Columns are taken smallest index first; a column
  whose page sets don't fit gets its file and row-group sets only, if those fit.

Each column is sized before it is built (one dictionary encoding, then
per-row-group and per-page presence counts with numpy, which the build reuses);
page sets that could not fit the budget even alone are never built, and a
column's codes are dropped once its blobs are built, so at most one column's
codes are held at a time. High-cardinality columns are turned away by a
strided sample of each row group first, which costs far less than the write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pqindex.format.file import ParquetFile
from pqindex.format.schema import LeafColumn, PhysicalType
from pqindex.format.views import computable
from pqindex.indexes.base import Blob, Scope
from pqindex.indexes.build import unit_bounds
from pqindex.indexes.distinct import (
    DEFAULT_MAX_VALUES,
    ValueCodes,
    blobs_from_codes,
    value_codes,
    value_type,
)

__all__ = ["AUTO", "AUTO_MAX_DISTINCT", "AUTO_MAX_SHARE", "AUTO_MIN_BYTES", "AutoChoice",
           "auto_blobs", "choose"]

AUTO = "auto"
AUTO_MAX_DISTINCT = DEFAULT_MAX_VALUES
AUTO_MAX_SHARE = 0.02
AUTO_MIN_BYTES = 16 * 1024
# Bytes a blob costs besides its values: body header (version, value type, counts)
# and its sub-directory entry (kind, scope, row group, page, length, XXH64). Added
# to built blobs' bodies too, which already hold the header: a small margin.
BLOB_OVERHEAD = 56
SAMPLE_ROWS = 4096  # per row group, for turning high-cardinality columns away


@dataclass(frozen=True)
class AutoChoice:
    """One column's auto index: the scopes it gets and its estimated size."""

    column: str
    scopes: tuple[Scope, ...]
    bytes: int


@dataclass(frozen=True)
class _Sizes:
    """Estimated bytes of a column's distinct sets by scope."""

    file: int
    row_groups: int
    pages: int


def _candidate(leaf: LeafColumn, table: pa.Table) -> bool:
    return not leaf.nested and len(leaf.path) == 1 and leaf.path[0] in table.column_names


def _strided(column: pa.ChunkedArray, start: int, end: int, step: int) -> pa.Array:
    """Every ``step``-th value of rows [start, end), taken chunk by chunk (a take on
    the chunked column would first join its chunks)."""
    part = computable(column.slice(start, end - start))  # take: no kernel for views
    picked = []
    pos = 0
    for chunk in part.chunks:
        first = (-pos) % step
        if first < len(chunk):
            picked.append(chunk.take(pa.array(np.arange(first, len(chunk), step))))
        pos += len(chunk)
    if not picked:
        return pa.array([], column.type)
    out = pa.concat_arrays(picked)
    return out.dictionary_decode() if pa.types.is_dictionary(out.type) else out


def _few_in_sample(column: pa.ChunkedArray, row_groups: Sequence[tuple[int, int]],
                   cap: int) -> bool:
    """False when a strided sample of some row group already has more than ``cap``
    distinct values (a sample can't have more than its population)."""
    for start, end in row_groups:
        n = end - start
        if n <= cap:
            continue
        sample = _strided(column, start, end, max(1, n // SAMPLE_ROWS))
        if pc.count_distinct(sample).as_py() > cap:
            return False
    return True


def _widths(codes: ValueCodes) -> np.ndarray:
    """Bytes of each dictionary value in a distinct blob (PLAIN, BYTE_ARRAY with its
    u32 length)."""
    raw = codes.raw()
    assert raw is not None
    extra = 4 if codes.vt.physical == PhysicalType.BYTE_ARRAY else 0
    return np.fromiter((len(r) + extra for r in raw), dtype=np.int64, count=len(raw))


def _sizes(codes: ValueCodes, row_groups: Sequence[tuple[int, int]],
           pages: Sequence[Sequence[tuple[int, int]]] | None, cap: int) -> _Sizes | None:
    """Bytes of the column's sets by scope, or None when the column doesn't qualify."""
    if codes.size == 0:
        return None  # all null: the page index's null counts already say everything
    widths = _widths(codes)
    rg_bytes = page_bytes = page_count = 0
    for rg, (start, end) in enumerate(row_groups):
        present = codes.present(start, end)
        if len(present) > cap:
            return None
        rg_bytes += int(widths[present].sum())
        for p_start, p_end in pages[rg] if pages is not None and rg < len(pages) else ():
            page_bytes += int(widths[codes.present(p_start, p_end)].sum())
            page_count += 1
    file_bytes = int(widths.sum()) if codes.size <= cap else 0
    return _Sizes(file=file_bytes + BLOB_OVERHEAD,
                  row_groups=rg_bytes + len(row_groups) * BLOB_OVERHEAD,
                  pages=page_bytes + page_count * BLOB_OVERHEAD)


def _data_bytes(pf: ParquetFile) -> int:
    return sum(int(pf.column_meta(rg, leaf.index).total_compressed_size or 0)
               for rg in range(pf.num_row_groups) for leaf in pf.schema.leaves)


@dataclass(frozen=True)
class _Built:
    """A column's blobs by scope, built before the budget is shared out."""

    column: str
    file_and_row_groups: list[Blob]
    pages: list[Blob]

    @property
    def size(self) -> int:
        return _bytes(self.file_and_row_groups) + _bytes(self.pages)


def _bytes(blobs: list[Blob]) -> int:
    return sum(len(b.data) + BLOB_OVERHEAD for b in blobs)


def _build(pf: ParquetFile, table: pa.Table, leaf: LeafColumn, budget: int, cap: int
           ) -> _Built | None:
    """The column's blobs, or None when it doesn't qualify; page blobs only when their
    estimated size could fit the budget. Its codes are dropped on return."""
    column = table.column(leaf.path[0])
    if value_type(leaf) is None or len(column) != pf.num_rows:
        return None
    row_groups, pages = unit_bounds(pf, leaf)
    try:
        if not _few_in_sample(column, row_groups, cap):
            return None
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None  # a type Arrow can't count: no auto index, never a failed write
    codes = value_codes(leaf, column)
    sizes = None if codes is None else _sizes(codes, row_groups, pages, cap)
    if codes is None or sizes is None or sizes.file + sizes.row_groups > budget:
        return None
    coarse = blobs_from_codes(leaf, codes, row_groups, pages,
                              frozenset({Scope.FILE, Scope.ROW_GROUP}), cap)
    fine = (blobs_from_codes(leaf, codes, row_groups, pages, frozenset({Scope.PAGE}), cap)
            if sizes.file + sizes.row_groups + sizes.pages <= budget else [])
    return _Built(leaf.name, coarse, fine)


def choose(pf: ParquetFile, table: pa.Table, *, cap: int = AUTO_MAX_DISTINCT,
           share: float = AUTO_MAX_SHARE, min_bytes: int = AUTO_MIN_BYTES
           ) -> tuple[list[AutoChoice], list[Blob]]:
    """The columns of the file pyarrow just wrote that get an auto distinct index,
    and their blobs."""
    if pf.num_rows == 0 or table.num_rows != pf.num_rows:
        return [], []
    budget = max(min_bytes, int(share * _data_bytes(pf)))
    built = [b for leaf in pf.schema.leaves if _candidate(leaf, table)
             if (b := _build(pf, table, leaf, budget, cap)) is not None]
    choices: list[AutoChoice] = []
    blobs: list[Blob] = []
    for b in sorted(built, key=lambda b: b.size):  # smallest first: the most columns
        coarse = _bytes(b.file_and_row_groups)
        if b.pages and b.size <= budget:
            choices.append(AutoChoice(b.column, (Scope.FILE, Scope.ROW_GROUP, Scope.PAGE),
                                      b.size))
            blobs += b.file_and_row_groups + b.pages
            budget -= b.size
        elif coarse <= budget:
            choices.append(AutoChoice(b.column, (Scope.FILE, Scope.ROW_GROUP), coarse))
            blobs += b.file_and_row_groups
            budget -= coarse
    return choices, blobs


def auto_blobs(pf: ParquetFile, table: pa.Table) -> tuple[list[Blob], dict[str, list[str]]]:
    """The blobs of the auto indexes, and ``{"distinct": columns}`` they cover."""
    choices, blobs = choose(pf, table)
    columns = [c.column for c in choices]
    return blobs, ({"distinct": columns} if columns else {})
