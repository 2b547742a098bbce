"""The footer statistics at the file level: a file's column-chunk statistics folded
over its row groups, so that one comparison per predicate leaf rules a whole file
out. A lake of thousands of files sorted on the predicate column is mostly pruned
here; the per-row-group stages, the embedded region and the planner's waves are
then never reached for those files.

Only a "no row can match" answer is used (as the dataset manifest does with the
same folded figures): the predicate tree has no NOT node, so a leaf that no row of
the file satisfies is satisfied by no row of any of its row groups.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from pqindex.expr.bind import BoundExpr, BoundPredicate
from pqindex.format.file import ParquetFile
from pqindex.format.match import Match
from pqindex.format.row_ranges import Selection
from pqindex.format.schema import LeafColumn
from pqindex.format.structs import Statistics
from pqindex.format.values import Comparison, bound_order, statistics_bounds
from pqindex.indexes.evidence import ConstantEvidence, StatisticsEvidence
from pqindex.plan.access import FilePlan, RowGroupPlan
from pqindex.plan.tree import evaluate

__all__ = ["REASON", "Folded", "fold_statistics", "row_group_statistics", "ruled_out",
           "settled_by_statistics"]

REASON = "no row matches (footer statistics of the file)"


@dataclass(frozen=True)
class Folded:
    """One leaf's statistics over all row groups with rows, bounds as the footer's
    bytes in the field they came from (``source``)."""

    statistics: Statistics
    values: int | None  # num_values summed; None when a row group does not say
    source: str | None
    comparison: Comparison | None


def fold_statistics(pf: ParquetFile, leaf: LeafColumn) -> Folded | None:
    """The file's statistics for one leaf, folded over its row groups; None if a
    row group with rows has none. Bounds stay unset when the row groups' bounds
    cannot be compared (unusable, or from different fields / orders)."""
    order = bound_order(leaf)
    nulls: int | None = 0
    nans: int | None = 0 if order.value_type.is_float else None
    values: int | None = 0
    lo: tuple[Any, bytes, bool | None] | None = None
    hi: tuple[Any, bytes, bool | None] | None = None
    source: str | None = None
    cmp: Comparison | None = None
    bounded = True
    for rg in range(pf.num_row_groups):
        cmd = pf.column_meta(rg, leaf.index)
        values = None if values is None or cmd.num_values is None else values + cmd.num_values
        if pf.row_group_rows(rg) == 0:
            continue
        st = cmd.statistics
        rg_ev = row_group_statistics(pf, rg, leaf)  # decoded once, for the row-group stage too
        if st is None or rg_ev is None:
            return None
        nulls = None if nulls is None or st.null_count is None else nulls + st.null_count
        if nans is not None:
            nans = None if st.nan_count is None else nans + st.nan_count
        b = rg_ev.bounds
        if b.all_null:
            continue
        if not b.usable or b.min_raw is None or b.max_raw is None or (
                source is not None and (b.source != source or b.comparison != cmp)):
            bounded = False
            continue
        source, cmp = b.source, b.comparison
        kmin = order.key(b.min, cmp)  # type: ignore[arg-type]
        kmax = order.key(b.max, cmp)  # type: ignore[arg-type]
        # A tie keeps "exact" only if both are: an inexact (shortened) bound equal to
        # another row group's exact one says nothing exact about its own values.
        if lo is None or kmin < lo[0]:
            lo = (kmin, b.min_raw, b.min_exact)
        elif kmin == lo[0]:
            lo = (kmin, lo[1], _both(lo[2], b.min_exact))
        if hi is None or kmax > hi[0]:
            hi = (kmax, b.max_raw, b.max_exact)
        elif kmax == hi[0]:
            hi = (kmax, hi[1], _both(hi[2], b.max_exact))
    out = Statistics(null_count=nulls, nan_count=nans)
    if bounded and lo is not None and hi is not None:
        if source == "min_value/max_value":
            out.min_value, out.max_value = lo[1], hi[1]
            out.is_min_value_exact, out.is_max_value_exact = lo[2], hi[2]
        else:
            out.min, out.max = lo[1], hi[1]
    return Folded(out, values, source, cmp)


def _both(a: bool | None, b: bool | None) -> bool | None:
    return None if a is None or b is None else a and b


def row_group_statistics(pf: ParquetFile, rg: int, leaf: LeafColumn
                         ) -> StatisticsEvidence | None:
    """One chunk's statistics as evidence, decoded once per open file (the planner's
    row-group stage asks the same)."""
    key = ("statistics", rg, leaf.index)
    if key not in pf.derived:
        cmd = pf.column_meta(rg, leaf.index)
        pf.derived[key] = None if cmd.statistics is None else StatisticsEvidence(
            statistics_bounds(cmd.statistics, leaf, cmd.num_values), cmd.num_values)
    ev: StatisticsEvidence | None = pf.derived[key]
    return ev


def _evidence(pf: ParquetFile, leaf: LeafColumn) -> StatisticsEvidence | None:
    # Folded once per open file: a warm dataset plans the same footers for every query.
    key = ("file statistics", leaf.index)
    if key not in pf.derived:
        if pf.num_row_groups == 1:  # nothing to fold: the row group's own evidence
            pf.derived[key] = row_group_statistics(pf, 0, leaf)
        else:
            folded = fold_statistics(pf, leaf)
            pf.derived[key] = None if folded is None or folded.values is None else (
                StatisticsEvidence(statistics_bounds(folded.statistics, leaf, folded.values),
                                   folded.values))
    ev: StatisticsEvidence | None = pf.derived[key]
    return ev


def _leaf_match(pf: ParquetFile, n: int, partition: dict[str, Any],
                pred: BoundPredicate) -> Match:
    if pred.leaf.index >= n:
        return Match(ConstantEvidence(partition.get(pred.leaf.name)).match(pred))
    ev = _evidence(pf, pred.leaf)
    if ev is None:
        return Match.SOME
    return Match.NONE if ev.match(pred) == Match.NONE else Match.SOME


def ruled_out(pf: ParquetFile, expr: BoundExpr, partition: dict[str, Any]) -> bool:
    """Whether the folded footer statistics (with the file's partition values) show
    that no row of the file can match ``expr``."""
    if pf.num_row_groups == 0 or pf.num_rows == 0:
        return False
    n = len(pf.schema.leaves)
    return evaluate(expr, lambda p: _leaf_match(pf, n, partition, p)) == Match.NONE


def settled_by_statistics(
    pf: ParquetFile, expr: BoundExpr, partition: dict[str, Any],
    row_groups: Collection[int] | None = None,
) -> FilePlan | None:
    """The plan of a file whose folded footer statistics (``plan/file_level.py``)
    show that no row can match — every row group skipped by "statistics" — or None
    (always None for a selection of row groups: those are skipped "by selection")."""
    if row_groups is not None or not ruled_out(pf, expr, partition):
        return None
    none = Selection.none()
    return FilePlan(pf.path, pf.num_rows, tuple(
        RowGroupPlan(rg, rows, Match.NONE, "statistics",
                     REASON if rows else "row group has no rows", none.maybe, none.all)
        for rg in range(pf.num_row_groups) for rows in (pf.row_group_rows(rg),)
    ), partition=partition, stages=("file statistics: no row matches; stopped",))

