"""Aggregates answered from metadata where the indexes allow, from data pages elsewhere.

``Dataset.aggregate(["count(*)", "sum(amount)", "min(ts)", "max(ts)", "count(x)"],
where=...)`` plans like a scan. A row group where no row can match is skipped;
one where every row matches is answered from its metadata — zone maps of the
embedded region (count, nulls, min, max, sum), or the footer (row count, null
count, and min/max when they are exact) — without reading a data page; only
row groups with some matching rows are read, and only their matching rows count.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from pqindex.errors import PqIndexError, UserInputError
from pqindex.format.file import ParquetFile
from pqindex.format.values import Kind, ValueType, statistics_bounds
from pqindex.indexes.base import Scope
from pqindex.indexes.zone_maps import aggregates as zone_map_aggregates
from pqindex.plan.planner import FilePlan, RowGroupPlan, file_region

if TYPE_CHECKING:
    from pqindex.dataset.dataset import Dataset

__all__ = ["AggregateReport", "Aggregation", "parse_aggregations", "run_aggregate"]

_SPEC = re.compile(r"^\s*(count|sum|min|max)\s*\(\s*(\*|[\w.\"]+)\s*\)\s*$", re.IGNORECASE)
_FLOATS = frozenset({Kind.FLOAT, Kind.DOUBLE, Kind.FLOAT16})


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
    notes: list[str] = field(default_factory=list)
    # Embedded-index blobs skipped while answering from metadata (damaged, unknown
    # body version): those row groups were read instead.
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "row_groups_from_metadata": self.row_groups_from_metadata,
            "row_groups_read": self.row_groups_read,
            "row_groups_skipped": self.row_groups_skipped,
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


def parse_aggregations(specs: Sequence[str]) -> list[Aggregation]:
    out = []
    for text in specs:
        m = _SPEC.match(text)
        if not m:
            raise UserInputError(
                f"cannot parse aggregate {text!r}: use count(*), count(col), sum(col), "
                "min(col) or max(col)"
            )
        func, col = m.group(1).lower(), m.group(2).strip('"')
        if col == "*" and func != "count":
            raise UserInputError(f"{func}(*) is not an aggregate; name a column")
        out.append(Aggregation(text.strip(), func, None if col == "*" else col))
    return out


class _Acc:
    """A running aggregate; ``None`` stays None until a value arrives."""

    def __init__(self, agg: Aggregation) -> None:
        self.agg = agg
        self.value: Any = 0 if agg.func == "count" else None

    def add(self, v: Any) -> None:
        f = self.agg.func
        if f == "count":
            self.value += int(v)
        elif v is None:
            return
        elif self.value is None:
            self.value = v
        elif f == "sum":
            self.value = self.value + v
        elif f == "min":
            self.value = min(self.value, v)
        else:
            self.value = max(self.value, v)


def _from_rows(table: pa.Table, agg: Aggregation) -> Any:
    if agg.column is None:
        return table.num_rows
    col = table.column(agg.column)
    if agg.func == "count":
        return len(col) - col.null_count
    if len(col) - col.null_count == 0:
        return None
    if agg.func == "sum":
        if pa.types.is_decimal(col.type):
            return pc.sum(col).as_py()
        if pa.types.is_integer(col.type):
            # Exact, whatever the width: Python ints.
            return sum(v for v in col.to_pylist() if v is not None)
        return pc.sum(col).as_py()
    # NaN sorts above every number (as DuckDB and Spark order it).
    if pa.types.is_floating(col.type) and pc.any(pc.is_nan(col)).as_py():
        return math.nan if agg.func == "max" else pc.min(col).as_py()
    return (pc.min if agg.func == "min" else pc.max)(col).as_py()


def _from_metadata(pf: ParquetFile, rg: int, agg: Aggregation,
                   warnings: list[str] | None = None) -> tuple[bool, Any]:
    """``(answered, value)`` for a row group where every row matches.

    A zone-map blob that cannot be read or decoded is skipped (footer statistics,
    else the data, answer instead) with a message in ``warnings``.
    """
    if agg.column is None:
        return True, pf.row_group_rows(rg)
    leaf = pf.schema.leaf(agg.column)
    if leaf is None or leaf.nested:
        return False, None
    opened: list[str] = []
    region = file_region(pf, opened if "region" not in pf.derived else None)
    if warnings is not None:
        warnings += opened
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


def run_aggregate(ds: Dataset, specs: Sequence[str], where: Any, filters: Any
                  ) -> tuple[dict[str, Any], AggregateReport]:
    from pqindex.dataset.dataset import _where

    aggs = parse_aggregations(specs)
    cols = sorted({a.column.split(".")[0] for a in aggs if a.column is not None})
    plans = ds._plan(cols, _where(where, filters))
    accs = [_Acc(a) for a in aggs]
    report = AggregateReport()
    to_read: list[tuple[Any, FilePlan, Any, RowGroupPlan]] = []
    for _df, of, plan, bound in plans.files:
        if plan is None or of is None:
            continue
        for rgp in plan.row_groups:
            if rgp.skipped:
                report.row_groups_skipped += 1
                continue
            if rgp.all.count() == rgp.num_rows:
                answers = [_from_metadata(of.pf, rgp.index, a, report.warnings)
                           for a in aggs]
                if all(ok for ok, _ in answers):
                    for acc, (_, v) in zip(accs, answers, strict=True):
                        acc.add(v)
                    report.row_groups_from_metadata += 1
                    continue
            to_read.append((of, plan, bound, rgp))
    from pqindex.scan.executor import ScanStats, read_row_group

    ptypes = {k: ds._partition_type(k) for k in ds.discovery.partition_columns}
    for of, plan, bound, rgp in to_read:
        stats = ScanStats()
        t = read_row_group(of.pf, plan, rgp, bound, cols, of.arrow, ptypes, ds.scan_options,
                           stats)
        report.row_groups_read += 1
        if t is None:
            continue
        for acc in accs:
            acc.add(_from_rows(t, acc.agg))
    out = {}
    for acc in accs:
        v = acc.value
        if isinstance(v, Decimal) and acc.agg.func == "sum":
            v = +v
        out[acc.agg.text] = v
    return out, report
