"""Aggregates answered from metadata where the indexes allow, from data pages elsewhere.

``Dataset.aggregate(["count(*)", "sum(amount)", "min(ts)", "max(ts)", "count(x)"],
where=...)`` plans like a scan. A row group where no row can match is skipped;
one where every row matches is answered from its metadata — zone maps of the
embedded region (count, nulls, min, max, sum), or the footer (row count, null
count, and min/max when they are exact) — without reading a data page.

Elsewhere the planner's rows that surely match (``all``) are answered page by
page: per aggregate, the pages of its column lying wholly inside ``all`` whose
metadata answers it (below) count from metadata, and only the rest is read —
the rows of ``all`` outside those pages, plus the rows that may match
(``maybe - all``), checked exactly. A range on the sort key thus reads its two
edge pages per column. Per page, from metadata:

=================  ===========================================================
aggregate          answered by
=================  ===========================================================
``count(*)``       the page's rows (OffsetIndex first rows)
``count(x)``       page zone map; else ColumnIndex null counts; else no nulls
                   in the chunk (footer statistics)
``sum(x)``         page zone map without NaN
``min/max(x)``     page zone map without NaN (exact values). ColumnIndex
                   bounds are not used: the format makes them bounds, not
                   values (truncated strings, separators, writers may widen)
any                a page the ColumnIndex marks all-null (no value)
=================  ===========================================================

``count(distinct x)`` counts the distinct non-null values: a row group where
every row matches gives them from its embedded ``distinct`` set (the exact values
of the unit, when it kept them: integers, floats, strings, binaries, decimals and
dates), the others from their data pages. Floats compare as SQL engines compare
them, -0.0 equal to 0.0 and every NaN one value.

``avg(x)`` (or ``mean(x)``) is ``sum(x) / count(x)``, both answered as above: a
float for integer and float columns (as DuckDB and Spark give it; the integer
sum is exact before the one division), a ``Decimal`` with 4 more fractional
digits for decimals, rounded half up (Spark's ``avg`` of a DECIMAL; DuckDB
gives a DOUBLE). NULL when no value is counted.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from pqindex.errors import PqIndexError, UserInputError
from pqindex.expr.bind import BoundTrue, bound_leaves
from pqindex.expr.evaluate import mask_bools, to_arrow_mask
from pqindex.format.column_index import PageIndex
from pqindex.format.file import ParquetFile
from pqindex.format.row_ranges import RowRanges
from pqindex.format.schema import LeafColumn
from pqindex.format.value_type import Kind, ValueType
from pqindex.format.values import statistics_bounds
from pqindex.indexes.base import Scope
from pqindex.indexes.distinct import DistinctEvidence
from pqindex.indexes.leaf_values import exact_int_sum, limb_sum, unscaled_limbs
from pqindex.indexes.region import BlobEntry, Region
from pqindex.indexes.zone_maps import ZoneMapEvidence
from pqindex.indexes.zone_maps import aggregates as zone_map_aggregates
from pqindex.plan.planner import RowGroupPlan, file_region

if TYPE_CHECKING:
    from pqindex.dataset.plan import DatasetPlan, FileEntry

__all__ = ["AggregateReport", "AggregateResult", "Aggregation", "parse_aggregations",
           "run_aggregate"]


class AggregateResult(dict[str, Any]):
    """``Dataset.aggregate``'s answer: aggregate text -> value, and ``report``, what was
    answered from metadata and what was read (its own: threads sharing a dataset each
    get theirs)."""

    def __init__(self, values: dict[str, Any], report: AggregateReport) -> None:
        super().__init__(values)
        self.report = report

# A column: a dotted path of names, each bare or double-quoted ("my col", "a""b").
_IDENT = r'(?:"(?:[^"]|"")+"|\w+)'
_SPEC = re.compile(rf"^\s*(count|sum|min|max|avg|mean)\s*\(\s*(distinct\s+)?"
                   rf"(\*|{_IDENT}(?:\s*\.\s*{_IDENT})*)\s*\)\s*$", re.IGNORECASE)
_FLOATS = frozenset({Kind.FLOAT, Kind.DOUBLE, Kind.FLOAT16})
# count(distinct): unique values held from the parts read before they are merged.
_DISTINCT_MERGE = 1 << 20
# Decimal arithmetic of sums and averages: 80 digits, so DECIMAL(38) sums stay exact
# (Python's default context keeps 28).
_EXACT = Context(prec=80)


@dataclass(frozen=True)
class Aggregation:
    """One ``func(column)``; ``column`` is None for ``count(*)``."""

    text: str
    func: str
    column: str | None


@dataclass
class AggregateReport:
    """Units answered from metadata vs read, on top of the scan counters."""

    row_groups_from_metadata: int = 0
    row_groups_read: int = 0
    row_groups_skipped: int = 0
    # In row groups answered page by page: pages of aggregate columns inside the rows
    # that surely match whose every aggregate came from metadata, and the data pages
    # decoded and data bytes fetched for the rest.
    pages_from_metadata: int = 0
    pages_read: int = 0
    bytes_read: int = 0
    # Column chunks of whole row groups whose sum / count came from their encoded pages
    # (scan/sums.py), with no Arrow array decoded.
    chunks_summed: int = 0
    notes: list[str] = field(default_factory=list)
    # Embedded-index blobs skipped while answering from metadata (damaged, unknown
    # body version): those row groups were read instead.
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "row_groups_from_metadata": self.row_groups_from_metadata,
            "row_groups_read": self.row_groups_read,
            "row_groups_skipped": self.row_groups_skipped,
            "pages_from_metadata": self.pages_from_metadata,
            "pages_read": self.pages_read,
            "bytes_read": self.bytes_read,
            "chunks_summed": self.chunks_summed,
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


def parse_aggregations(specs: str | Sequence[str]) -> list[Aggregation]:
    out = []
    for text in [specs] if isinstance(specs, str) else specs:  # one alone: not its letters
        if not isinstance(text, str):
            raise UserInputError(f"an aggregate is text such as 'sum(col)', not {text!r}")
        m = _SPEC.match(text)
        if not m:
            raise UserInputError(
                f"cannot parse aggregate {text!r}: use count(*), count(col), "
                "count(distinct col), sum(col), avg(col), min(col) or max(col)"
            )
        func = m.group(1).lower()
        col = ".".join(p[1:-1].replace('""', '"') if p.startswith('"') else p
                       for p in re.findall(_IDENT, m.group(3))) or "*"
        func = "avg" if func == "mean" else func
        if m.group(2):
            if func != "count" or col == "*":
                raise UserInputError(f"cannot parse aggregate {text!r}: DISTINCT is taken by "
                                     "count(distinct col) only")
            func = "count_distinct"
        if col == "*" and func != "count":
            raise UserInputError(f"{func}(*) is not an aggregate; name a column")
        out.append(Aggregation(text.strip(), func, None if col == "*" else col))
    return out


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _before(a: Any, b: Any) -> bool:
    """``a < b`` with NaN above every number (as DuckDB and Spark order it)."""
    if _is_nan(a):
        return False
    return _is_nan(b) or bool(a < b)


class _Acc:
    """A running aggregate; ``None`` stays None until a value arrives."""

    def __init__(self, agg: Aggregation, target: pa.DataType | None = None) -> None:
        self.agg = agg
        self.value: Any = 0 if agg.func == "count" else None
        self.distinct: list[pa.Array] = []  # count(distinct): unique values per part
        self.held = 0
        # count(distinct): the dataset's type of the column, which parts read from files
        # of other types (int32 and int64, string and large_string) are cast to.
        self.target = (target.value_type if target is not None
                       and pa.types.is_dictionary(target) else target)

    def add(self, v: Any) -> None:
        f = self.agg.func
        if f == "count":
            self.value += int(v)
        elif f == "count_distinct":
            if isinstance(v, list):  # an embedded distinct set's values
                v = _distinct_values(pa.array(v, type=self.target)) if v else None
            if v is not None and len(v):
                if self.target is not None and v.type != self.target:
                    v = v.cast(self.target)
                self.distinct.append(v)
                self.held += len(v)
                if self.held > _DISTINCT_MERGE and len(self.distinct) > 1:
                    # Parts repeat each other's values: merged, memory holds one copy.
                    self.distinct = [pc.unique(pa.chunked_array(self.distinct))]
                    self.held = len(self.distinct[0])
        elif v is None:
            return
        elif self.value is None:
            self.value = v
        elif f == "sum":
            with localcontext(_EXACT):
                self.value = self.value + v
        elif f == "min":
            if _before(v, self.value):
                self.value = v
        elif _before(self.value, v):
            self.value = v


def _rows_column(table: pa.Table, column: str) -> Any:
    """A top-level column, or a struct field by dotted path (a NULL parent gives NULL)."""
    if column in table.column_names:
        return table.column(column)
    parts = column.split(".")
    for split in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:split])
        if head in table.column_names:
            arr: Any = table.column(head)
            for name in parts[split:]:
                arr = pc.struct_field(arr, name)
            return arr
    raise UserInputError(f"no column {column!r}", column=column)


def _from_rows(table: pa.Table, agg: Aggregation) -> Any:
    if agg.column is None:
        return table.num_rows
    col = _rows_column(table, agg.column)
    if agg.func == "count":
        return len(col) - col.null_count
    if len(col) - col.null_count == 0:
        return None
    if pa.types.is_dictionary(col.type):  # the kernels below take the values
        col = col.cast(col.type.value_type)
    if agg.func == "count_distinct":
        return _distinct_values(col)
    if agg.func == "sum":
        if pa.types.is_decimal(col.type) or pa.types.is_integer(col.type):
            return _exact_sum(col)
        return pc.sum(col).as_py()
    # NaN sorts above every number (as DuckDB and Spark order it).
    if pa.types.is_floating(col.type) and pc.any(pc.is_nan(col)).as_py():
        return math.nan if agg.func == "max" else pc.min(col).as_py()
    return (pc.min if agg.func == "min" else pc.max)(col).as_py()


def _distinct_values(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The distinct non-null values of ``col``; floats as SQL engines count them (Spark
    normalizes them so, DuckDB compares so): -0.0 as 0.0, every NaN the one NaN
    (Arrow's hashing tells -0.0 from 0.0, and NaNs by their payload)."""
    col = pc.drop_null(col)
    if pa.types.is_floating(col.type):
        col = pc.add(col, pa.scalar(0.0, col.type))  # -0.0 + 0.0 is 0.0
        col = pc.if_else(pc.is_nan(col), pa.scalar(math.nan, col.type), col)
    out = pc.unique(col)
    return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out


def _exact_sum(col: pa.Array | pa.ChunkedArray) -> int | Decimal:
    """The exact sum of integers or decimals: pyarrow's wraps silently past 64 bits
    (integers) and 38 digits (a DECIMAL(38) sum); numpy adds 32-bit halves here."""
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    t = col.type
    if pa.types.is_decimal(t):
        unscaled = sum(limb_sum(unscaled_limbs(c)) for c in chunks)
        with localcontext(_EXACT):
            return Decimal(unscaled).scaleb(-t.scale)
    return sum(exact_int_sum(pc.drop_null(c).to_numpy(zero_copy_only=False)) for c in chunks)


def _file_leaf(pf: ParquetFile, column: str, partitions: Collection[str]) -> LeafColumn | None:
    """The file's leaf ``column``; None for a partition column, also where the file
    has a column of that name (the path's value wins, docs/semantics.md)."""
    return None if column.split(".")[0] in partitions else pf.schema.leaf(column)


def _from_metadata(pf: ParquetFile, rg: int, agg: Aggregation,
                   warnings: list[str] | None = None,
                   partitions: Collection[str] = ()) -> tuple[bool, Any]:
    """``(answered, value)`` for a row group where every row matches.

    A zone-map blob that cannot be read or decoded is skipped (footer statistics,
    else the data, answer instead) with a message in ``warnings``.
    """
    if agg.column is None:
        return True, pf.row_group_rows(rg)
    leaf = _file_leaf(pf, agg.column, partitions)
    if leaf is None or leaf.nested:
        return False, None
    opened: list[str] = []
    region = file_region(pf, opened if "region" not in pf.derived else None)
    if warnings is not None:
        warnings += opened
    if agg.func == "count_distinct":
        return _distinct_set(pf, rg, leaf, region, warnings)
    if region is not None:
        for entry in region.find(kind="zone_maps", column=leaf.name, scope=Scope.ROW_GROUP):
            if entry.row_group != rg:
                continue
            try:
                z = zone_map_aggregates(region.blob(entry))
            except PqIndexError as e:
                if warnings is not None:
                    where = f"{pf.path}: " if pf.path else ""
                    warnings.append(f"{where}embedded index: zone_maps blob for column "
                                    f"{leaf.name!r} (row group {rg}) unusable: {e.reason}")
                break
            if agg.func == "count":
                return True, z["count"] - z["null_count"]
            if z["nan_count"]:
                break  # NaN ordering and sums: read the values
            if agg.func == "sum":
                if z["sum"] is None:
                    break
                return True, z["sum"] if z["count"] > z["null_count"] else None
            return True, z[agg.func]
    cmd = pf.column_meta(rg, leaf.index)
    stats = cmd.statistics
    if stats is None or stats.null_count is None:
        return False, None
    if agg.func == "count":
        return True, (cmd.num_values or 0) - stats.null_count
    if agg.func == "sum":
        return False, None
    if stats.null_count == cmd.num_values:
        return True, None
    b = statistics_bounds(stats, leaf, cmd.num_values)
    kind = ValueType.from_leaf(leaf).kind
    exact = stats.is_min_value_exact if agg.func == "min" else stats.is_max_value_exact
    # Footer bounds of numbers are the values themselves unless a writer says otherwise;
    # strings may be truncated, floats may hide NaN.
    if exact is False or kind in _FLOATS or (exact is None and kind in (Kind.STRING, Kind.BINARY)):
        return False, None
    value = b.min if agg.func == "min" else b.max
    if value is None or b.source != "min_value/max_value":
        return False, None
    return True, value


# Kinds whose PLAIN values decode to Python values pa.array takes as they are.
_LISTED_KINDS = frozenset({Kind.INT, Kind.UINT, Kind.FLOAT, Kind.DOUBLE, Kind.STRING,
                           Kind.BINARY, Kind.DECIMAL, Kind.DATE})


def _distinct_set(pf: ParquetFile, rg: int, leaf: LeafColumn, region: Region | None,
                  warnings: list[str] | None) -> tuple[bool, Any]:
    """``(answered, values)``: row group ``rg``'s distinct values of ``leaf`` from its
    embedded ``distinct`` set, as a list, when the set kept them. The region's own
    evidence (decoded once, shared with the planner) is used: a set that cannot be
    read, or was built for another type, is skipped there with a warning; one built
    for other rows is skipped here."""
    if region is None:
        return False, None
    seen = len(region.warnings)
    evidence = region.evidence(Scope.ROW_GROUP, leaf.name, rg, leaf=leaf)
    where = f"{pf.path}: " if pf.path else ""
    if warnings is not None:
        warnings += [f"{where}{w}" for w in region.warnings[seen:]]
    found = next((e.values for e in evidence if isinstance(e, DistinctEvidence)), None)
    if found is None:
        return False, None
    if found.rows != pf.row_group_rows(rg):
        if warnings is not None:
            warnings.append(f"{where}embedded index: distinct blob for column {leaf.name!r} "
                            f"(row group {rg}) holds {found.rows} rows for a row group of "
                            f"{pf.row_group_rows(rg)}: not used")
        return False, None
    if found.raw is None or found.vt.kind not in _LISTED_KINDS:
        return False, None  # values omitted (too many), or not listed here
    values = [found.vt.decode(r) for r in found.raw]
    if found.vt.kind == Kind.STRING and any(isinstance(v, bytes) for v in values):
        return False, None  # not UTF-8: the data decides how it reads
    return True, values


# ---------------------------------------------------------------- page by page

IntArray = npt.NDArray[np.int64]


def _pages_inside(rows: RowRanges, first: IntArray, counts: IntArray) -> IntArray:
    """Pages whose every row lies in ``rows``; page i holds ``[first[i], first[i] + counts[i])``."""
    if rows.is_empty or first.size == 0:
        return np.empty(0, dtype=np.int64)
    # The interval that could hold a page is the first one ending after its first row
    # (intervals are disjoint and non-adjacent: a page inside lies inside one).
    k = np.searchsorted(rows.ends, first, side="right")
    hit = k < len(rows)
    kk = k[hit]
    hit[hit] = (rows.starts[kk] <= first[hit]) & (first[hit] + counts[hit] <= rows.ends[kk])
    return np.flatnonzero(hit).astype(np.int64)


def _zone_entries(region: Region | None, column: str) -> dict[tuple[int, int], BlobEntry]:
    """Page-scope zone maps of a column by ``(row group, page)`` (no I/O)."""
    if region is None:
        return {}
    return {(e.row_group, e.page): e
            for e in region.find(kind="zone_maps", column=column, scope=Scope.PAGE)
            if e.row_group is not None and e.page is not None}


class _ChunkPages:
    """What metadata says about the pages of one column chunk inside the rows that surely
    match. Page zone maps are read (with their neighbours, through the region) and the
    ColumnIndex decoded only when a page asks for them."""

    def __init__(self, pf: ParquetFile, rg: int, leaf: LeafColumn, sure: RowRanges,
                 region: Region | None, zones: dict[tuple[int, int], BlobEntry],
                 warnings: list[str]) -> None:
        self.pf, self.rg, self.leaf = pf, rg, leaf
        self.where = f"{pf.path}: " if pf.path else ""
        self.region, self.zones, self.warnings = region, zones, warnings
        self.n = pf.row_group_rows(rg)
        empty = np.empty(0, dtype=np.int64)
        self.first, self.counts, self.inside = empty, empty, empty
        self._zone: dict[int, dict[str, Any] | None] = {}
        self._page_index: PageIndex | None = None
        self._page_index_tried = False
        stats = pf.column_meta(rg, leaf.index).statistics
        self.chunk_nulls = None if stats is None else stats.null_count
        try:
            oi = pf.offset_index(rg, leaf.index)
        except PqIndexError:
            return  # the read path reports the damage
        if oi is None or not oi.page_locations:
            return
        first = np.array([loc.first_row_index or 0 for loc in oi.page_locations],
                         dtype=np.int64)
        if first[0] != 0 or np.any(np.diff(first) <= 0) or first[-1] >= self.n:
            return  # the read path reports the damage
        self.first = first
        self.counts = np.diff(np.append(first, np.int64(self.n))).astype(np.int64)
        self.inside = _pages_inside(sure, self.first, self.counts)

    def zone(self, page: int) -> dict[str, Any] | None:
        """The page's zone map (``zone_maps.aggregates``), None when absent or unusable."""
        if page in self._zone:
            return self._zone[page]
        out = None
        entry = self.zones.get((self.rg, page))
        region = self.region
        if entry is not None and region is not None:
            seen = len(region.warnings)
            # One request for this blob and its unread neighbours; the evidence also
            # checks the blob's type against the column.
            evs = region.evidence(Scope.PAGE, self.leaf.name, self.rg, page, leaf=self.leaf)
            what = (f"{self.where}embedded index: zone_maps blob for column "
                    f"{self.leaf.name!r} (row group {self.rg}, page {page})")
            if any(isinstance(e, ZoneMapEvidence) for e in evs):
                try:
                    out = zone_map_aggregates(region.blob(entry))
                except PqIndexError as e:
                    self.warnings.append(f"{what} unusable: {e.reason}")
            rows = int(self.counts[page])
            if out is not None and out["count"] != rows:
                self.warnings.append(f"{what} holds {out['count']} values for a page of "
                                     f"{rows} rows: not used")
                out = None
            self.warnings += region.warnings[seen:]
        self._zone[page] = out
        return out

    def page_index(self) -> PageIndex | None:
        if not self._page_index_tried:
            self._page_index_tried = True
            try:
                self._page_index = PageIndex.load(self.pf, self.rg, self.leaf.index)
            except PqIndexError as e:
                self.warnings.append(f"{self.where}page index of {self.leaf.name!r} not used: {e}")
        return self._page_index

    def answer(self, agg: Aggregation, page: int) -> tuple[bool, Any]:
        """``(answered, value)`` of ``agg`` over every row of one page."""
        func = agg.func
        if func == "count_distinct":
            return False, None  # no page keeps its values
        z = self.zone(page)
        if z is not None:
            values = z["count"] - z["null_count"]
            if func == "count":
                return True, values
            if values == 0:
                return True, None
            if z["nan_count"]:
                return False, None  # NaN ordering and sums: read the values
            return z[func] is not None, z[func]  # no sum for temporal columns
        if self.chunk_nulls == 0:
            # No null in the chunk: no all-null page to find in the ColumnIndex.
            return (True, int(self.counts[page])) if func == "count" else (False, None)
        pi = self.page_index()
        if pi is None or pi.null_reason is not None:
            return False, None
        if pi.all_null[page]:
            return True, 0 if func == "count" else None
        if func == "count" and pi.null_counts is not None:
            return True, int(self.counts[page] - pi.null_counts[page])
        return False, None


def _from_page_metadata(
    pf: ParquetFile, rgp: RowGroupPlan, accs: Sequence[_Acc], report: AggregateReport,
    zones: dict[str, dict[tuple[int, int], BlobEntry]], partitions: Collection[str] = (),
) -> dict[str, tuple[list[_Acc], RowRanges]]:
    """Add to ``accs`` what metadata answers about the rows of one row group that surely
    match; return, per aggregated column, its aggregates and the rows of ``all`` they
    still have to read.

    A column's page counts from metadata only when every aggregate on it is answered
    there: each column then reads one set of rows, and no page twice. ``count(*)``
    gets every row of ``all``; the uncertain rows that match come from the reads.
    """
    sure = rgp.all
    every = sure.count() == rgp.num_rows
    chunks: dict[str, _ChunkPages | None] = {}
    pending: dict[str, list[tuple[_Acc, dict[int, Any]]]] = {}
    for acc in accs:
        agg = acc.agg
        if agg.column is None:
            acc.add(sure.count())
            continue
        if every:
            ok, v = _from_metadata(pf, rgp.index, agg, report.warnings, partitions)
            if ok:
                acc.add(v)
                continue
        if agg.column not in chunks:
            leaf = _file_leaf(pf, agg.column, partitions)
            chunk = None
            if leaf is not None and not leaf.nested and not sure.is_empty:
                opened: list[str] = []
                region = file_region(pf, opened if "region" not in pf.derived else None)
                report.warnings += opened
                if agg.column not in zones:
                    zones[agg.column] = _zone_entries(region, leaf.name)
                chunk = _ChunkPages(pf, rgp.index, leaf, sure, region, zones[agg.column],
                                    report.warnings)
            chunks[agg.column] = chunk
        chunk = chunks[agg.column]
        found: dict[int, Any] = {}
        if chunk is not None:
            for p in chunk.inside.tolist():
                ok, v = chunk.answer(agg, p)
                if ok:
                    found[p] = v
        pending.setdefault(agg.column, []).append((acc, found))
    out: dict[str, tuple[list[_Acc], RowRanges]] = {}
    for column, items in pending.items():
        common = sorted(set.intersection(*(set(found) for _, found in items)))
        for acc, found in items:
            for p in common:
                acc.add(found[p])
        rest = sure
        chunk = chunks[column]
        if common and chunk is not None:
            rest = sure - RowRanges.from_pages(chunk.first, chunk.counts, common)
            report.pages_from_metadata += len(common)
        out[column] = ([acc for acc, _ in items], rest)
    return out


# Row groups per call of pyarrow's reader for columns aggregated whole: enough for
# its threads, few enough that memory holds a handful of decoded row groups.
_WHOLE_BATCH = 8


class _Whole:
    """Row groups of one file whose aggregated columns are wanted at every row, grouped
    by what they read and which aggregates take it. They are read after the file's
    other row groups by pyarrow's own reader, several side by side (scan/whole.py),
    not one after another through the executor."""

    def __init__(self) -> None:
        self.groups: dict[tuple[Any, ...], tuple[list[int], dict[str, list[_Acc]]]] = {}

    def add(self, rg: int, columns: Sequence[str],
            todo: dict[str, tuple[list[_Acc], RowRanges]]) -> None:
        cols = sorted(columns)
        key = tuple((c, tuple(id(a) for a in todo[c][0])) for c in cols)
        self.groups.setdefault(key, ([], {c: todo[c][0] for c in cols}))[0].append(rg)

    def read(self, dplan: DatasetPlan, entry: FileEntry, report: AggregateReport) -> None:
        from pqindex.scan.whole import iter_whole_row_groups, pool_map

        pf, plan = entry.file, entry.access
        assert pf is not None and plan is not None
        for rgs, by_column in self.groups.values():
            summed = _encoded_sums(dplan, entry, rgs, by_column, report)
            # The rest read by pyarrow, row groups grouped by the columns they lack.
            rest: dict[tuple[str, ...], list[int]] = {}
            for rg in rgs:
                left = tuple(c for c in by_column if (rg, c) not in summed)
                if left:
                    rest.setdefault(left, []).append(rg)
            for columns, todo in rest.items():
                fields = sorted({c.split(".")[0] for c in columns})
                for i in range(0, len(todo), _WHOLE_BATCH):
                    for t, stats in iter_whole_row_groups(
                            pf, todo[i:i + _WHOLE_BATCH], fields, plan.partition,
                            dplan.partition_types, dplan.scan_options, pool_map):
                        report.pages_read += stats.pages_read
                        report.bytes_read += stats.data_bytes
                        for c in columns:
                            for acc in by_column[c]:
                                acc.add(_from_rows(t, acc.agg))


def _encoded_sums(dplan: DatasetPlan, entry: FileEntry, rgs: Sequence[int],
                  by_column: dict[str, list[_Acc]], report: AggregateReport
                  ) -> set[tuple[int, str]]:
    """Add to the accumulators of the columns only summed and counted the chunks that
    ``scan/sums.py`` sums on their encoded pages; which (row group, column) it did."""
    from pqindex.scan.sums import chunk_sums

    pf, arrow = entry.file, entry.arrow_schema
    assert pf is not None and arrow is not None
    leaves: dict[int, str] = {}
    for column, accs in by_column.items():
        leaf = _file_leaf(pf, column, dplan.partition_types)
        if (leaf is None or column not in arrow.names
                or any(a.agg.func not in ("sum", "count") for a in accs)):
            continue
        leaves[leaf.index] = column
    if not leaves:
        return set()
    sums, stats = chunk_sums(pf, rgs, [(i, arrow.field(c).type) for i, c in leaves.items()],
                             dplan.scan_options)
    report.pages_read += stats.pages_read
    report.bytes_read += stats.data_bytes
    report.chunks_summed += len(sums)
    done = set()
    for (rg, leaf_index), (total, present) in sums.items():
        column = leaves[leaf_index]
        for acc in by_column[column]:
            acc.add(total if acc.agg.func == "sum" else present)
        done.add((rg, column))
    return done


def _aggregate_row_group(dplan: DatasetPlan, entry: FileEntry, rgp: RowGroupPlan,
                         accs: Sequence[_Acc], report: AggregateReport,
                         zones: dict[str, dict[tuple[int, int], BlobEntry]],
                         whole: _Whole) -> bool:
    """Add one row group to ``accs``: metadata first, then the rows it leaves; whether
    any data page was (or, through ``whole``, will be) read.

    Every row is counted once: rows of ``all`` either from metadata or read, per
    column; rows of ``maybe - all`` read, checked against the predicate, and the
    matching ones read for every aggregate.
    """
    from pqindex.scan.executor import ScanStats, read_row_group

    pf, plan, bound = entry.file, entry.access, entry.predicate
    assert pf is not None and plan is not None and bound is not None
    arrow = entry.arrow_schema
    assert arrow is not None
    ptypes = dplan.partition_types

    def read(rows: RowRanges, fields: Sequence[str]) -> pa.Table | None:
        # maybe == all: the executor reads these rows, it has nothing to check
        sub = dataclasses.replace(rgp, maybe=rows, all=rows, reads=())
        stats = ScanStats()
        t = read_row_group(pf, plan, sub, bound, fields, arrow, ptypes, dplan.scan_options,
                           stats)
        report.pages_read += stats.pages_read
        report.bytes_read += stats.data_bytes
        return t

    todo = _from_page_metadata(pf, rgp, accs, report, zones, dplan.partition_types)
    uncertain = rgp.maybe - rgp.all
    hits = RowRanges.empty()
    checked: set[str] = set()  # aggregated columns read with the predicate's
    did_read = False
    if not uncertain.is_empty:
        # The predicate's columns at the uncertain rows, checked row by row; aggregated
        # columns among them count their matching values from this same read.
        pred_fields = {leaf.path[0] for leaf in bound_leaves(bound)}
        checked = {c for c in todo if c.split(".")[0] in pred_fields}
        t = read(uncertain, sorted(pred_fields | {c.split(".")[0] for c in checked}))
        did_read = True
        n = 0 if t is None else t.num_rows
        mask = (np.ones(n, dtype=bool) if t is None or isinstance(bound, BoundTrue) else
                mask_bools(to_arrow_mask(bound, t)))
        at = uncertain.to_indices()[np.flatnonzero(mask)]
        hit_mask = np.zeros(rgp.num_rows, dtype=bool)
        hit_mask[at] = True
        hits = RowRanges.from_mask(hit_mask)
        for acc in accs:
            if acc.agg.column is None:
                acc.add(int(at.size))
        if t is not None and checked:
            matched = t.filter(pa.array(mask))
            for c in checked:
                for acc in todo[c][0]:
                    acc.add(_from_rows(matched, acc.agg))
    groups: dict[RowRanges, list[str]] = {}
    for column, (_, rest) in todo.items():
        rows = rest if column in checked else rest | hits
        if not rows.is_empty:
            groups.setdefault(rows, []).append(column)
    for rows, columns in groups.items():
        did_read = True
        if uncertain.is_empty and rgp.num_rows > 0 and rows.count() == rgp.num_rows:
            whole.add(rgp.index, columns, todo)
            continue
        t = read(rows, sorted({c.split(".")[0] for c in columns}))
        if t is None:
            continue
        for c in columns:
            for acc in todo[c][0]:
                acc.add(_from_rows(t, acc.agg))
    return did_read


def _field_type(schema: pa.Schema, column: str) -> pa.DataType | None:
    """The Arrow type of a top-level or dotted struct column, None when unknown."""
    parts = column.split(".")
    for split in range(len(parts), 0, -1):
        head = ".".join(parts[:split])
        if head not in schema.names:
            continue
        t: pa.DataType = schema.field(head).type
        for name in parts[split:]:
            if not pa.types.is_struct(t) or t.get_field_index(name) < 0:
                return None
            t = t.field(name).type
        return t
    return None


def _check_types(aggs: Sequence[Aggregation], schema: pa.Schema) -> None:
    """UserInputError for an aggregate the column's type has no meaning for."""
    for a in aggs:
        if a.column is None or a.func == "count":
            continue
        t = _field_type(schema, a.column)
        if t is None:
            continue
        if pa.types.is_dictionary(t):
            t = t.value_type
        if a.func in ("sum", "avg") and not (pa.types.is_integer(t) or pa.types.is_floating(t)
                                             or pa.types.is_decimal(t)):
            raise UserInputError(f"{a.text}: {a.func} needs a numeric column; "
                                 f"{a.column!r} is {t}", column=a.column)
        if a.func == "count_distinct" and pa.types.is_nested(t):
            raise UserInputError(f"{a.text}: count(distinct) needs a column of plain "
                                 f"values; {a.column!r} is {t}", column=a.column)
        if a.func in ("min", "max") and pa.types.is_nested(t):
            raise UserInputError(f"{a.text}: {a.func} needs a column of ordered values; "
                                 f"{a.column!r} is {t}", column=a.column)


def run_aggregate(dplan: DatasetPlan, aggs: Sequence[Aggregation]
                  ) -> tuple[dict[str, Any], AggregateReport]:
    """The aggregates over the rows ``dplan`` (``Dataset.plan``) selects."""
    _check_types(aggs, dplan.schema)
    # avg(x) runs as sum(x) and count(x); each spec's accumulators, in order.
    parts = [[a] if a.func != "avg" else
             [Aggregation(a.text, "sum", a.column), Aggregation(a.text, "count", a.column)]
             for a in aggs]
    accs = [_Acc(p, _field_type(dplan.schema, p.column)
                 if p.func == "count_distinct" and p.column is not None else None)
            for ps in parts for p in ps]
    report = AggregateReport()
    for entry in dplan.files:
        if entry.access is None or entry.file is None or entry.predicate is None:
            continue
        zones: dict[str, dict[tuple[int, int], BlobEntry]] = {}
        whole = _Whole()
        # A column the file lacks is NULL in all its rows: its aggregates take nothing
        # from the file (count(col) adds 0), count(*) its matching rows.
        has = set(dplan.partition_types)
        has.update(entry.arrow_schema.names if entry.arrow_schema is not None else ())
        here = [a for a in accs if a.agg.column is None or a.agg.column.split(".")[0] in has]
        for rgp in entry.access.row_groups:
            if rgp.skipped:
                report.row_groups_skipped += 1
            elif _aggregate_row_group(dplan, entry, rgp, here, report, zones, whole):
                report.row_groups_read += 1
            else:
                report.row_groups_from_metadata += 1
        whole.read(dplan, entry, report)
    out = {}
    it = iter(accs)
    for a in aggs:
        acc = next(it)
        v = acc.value
        if a.func == "count_distinct":
            v = len(pc.unique(pa.chunked_array(acc.distinct))) if acc.distinct else 0
        elif a.func == "avg":
            t = _field_type(dplan.schema, a.column or "")
            scale = t.scale if t is not None and pa.types.is_decimal(t) else 0
            v = _average(v, next(it).value, scale)
        elif isinstance(v, Decimal) and a.func == "sum":
            with localcontext(_EXACT):
                v = +v  # -0.00 as 0.00
        out[a.text] = v
    return out, report


# An aggregate of a value expression: sum(l_extendedprice * (1 - l_discount)).
_EXPRESSION_SPEC = re.compile(r"^\s*(count|sum|min|max|avg|mean)\s*\((.+)\)\s*$",
                              re.IGNORECASE | re.DOTALL)


def is_expression_aggregate(text: object) -> bool:
    """Whether ``text`` aggregates an expression rather than a column."""
    return isinstance(text, str) and not _SPEC.match(text) and bool(
        _EXPRESSION_SPEC.match(text))


def run_expression_aggregates(specs: Sequence[str], rows: Callable[[list[str]], pa.Table]
                              ) -> dict[str, Any]:
    """``sum`` / ``avg`` / ``min`` / ``max`` / ``count`` of value expressions over the
    matching rows: ``rows(columns)`` scans them, each expression is evaluated on them
    (``expr/compute.py``) and aggregated as a column of that type is."""
    from pqindex.expr.compute import evaluate_term
    from pqindex.expr.evaluate import table_column
    from pqindex.expr.nodes import term_columns
    from pqindex.expr.sql import parse_value

    parsed = []
    for text in specs:
        m = _EXPRESSION_SPEC.match(text)
        assert m is not None
        func = m.group(1).lower()
        try:
            value = parse_value(m.group(2))
        except UserInputError as e:
            raise UserInputError(f"cannot parse aggregate {text!r}: {e.reason}") from None
        parsed.append((text.strip(), "avg" if func == "mean" else func, value))
    names = list(dict.fromkeys(n for _, _, t in parsed for n in term_columns(t)))
    table = rows(sorted({n.split(".")[0] for n in names}))
    values = {text: evaluate_term(t, lambda n: table_column(table, n), table.num_rows)
              for text, _, t in parsed}
    out: dict[str, Any] = {}
    for text, func, _ in parsed:
        col = values[text]
        one = pa.table({"value": col})
        if func == "avg":
            total = _from_rows(one, Aggregation(text, "sum", "value"))
            count = _from_rows(one, Aggregation(text, "count", "value"))
            out[text] = _average(total, count, col.type.scale
                                 if pa.types.is_decimal(col.type) else 0)
            continue
        v = _from_rows(one, Aggregation(text, func, "value"))
        if isinstance(v, Decimal):
            with localcontext(_EXACT):
                v = +v  # -0.00 as 0.00
        out[text] = v
    return out


def _average(total: Any, count: int, scale: int) -> Any:
    """``avg`` from its sum and count (module docstring); ``scale``: a decimal
    column's."""
    if not count or total is None:
        return None
    if isinstance(total, Decimal):
        places = Decimal(1).scaleb(-scale - 4)
        with localcontext(_EXACT):  # exact before the one rounding
            return (total / count).quantize(places, rounding=ROUND_HALF_UP)
    return total / count  # int / int: the correctly rounded float
