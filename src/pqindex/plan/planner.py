"""Pruning, stage by stage: file → row group → page → row ranges.

``plan_file`` turns a bound predicate and a projection into a :class:`FilePlan`
(``plan/access.py``), the only thing the scanner needs: per row group, which rows
may match (``maybe``), which surely do (``all``), the level that decided and why,
and the pages of each column that will be read. It runs the stages, cheapest first,
each a function of the previous one's output:

1. the file: folded footer statistics (``plan/file_level.py``), then the embedded
   file-level indexes (``plan/embedded.py``);
2. the row groups' footer: partition values, column-chunk statistics, row-group
   blobs (``plan/row_groups.py``, ``footer_stage``);
3. wave 1: Bloom filters and dictionaries of ``=`` / ``IN`` (``equality_stage``),
   with the page indexes the page stage will parse;
4. the pages: ColumnIndex + OffsetIndex and page-scope blobs, giving row ranges;
   AND intersects and OR unites them across columns whose pages don't line up
   (``plan/pages.py``, ``page_stage``), skipped for leaves it cannot narrow;
5. wave 2: the other dictionaries and Bloom filters of row groups still undecided
   (``late_stage``).

Each level answers NONE / SOME / ALL; anything unusable answers SOME. The evidence
of one row group is ``plan/row_group_evidence.py``'s.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from pqindex.expr.bind import BoundExpr, bound_leaves
from pqindex.format.file import ParquetFile
from pqindex.format.match import Match
from pqindex.plan.access import ColumnRead, FilePlan, PlanOptions, RowGroupPlan
from pqindex.plan.embedded import embedded_file_stage, file_region
from pqindex.plan.file_level import settled_by_statistics
from pqindex.plan.pages import (
    UNCLUSTERED_SPAN,
    PageFutility,
    column_reads,
    futile_leaves,
    page_index_futile,
    page_index_ranges,
    page_stage,
)
from pqindex.plan.row_group_evidence import (
    MAX_DICTIONARY_BYTES,
    MAX_DICTIONARY_VALUES,
    LazyHits,
    RowGroupEvidence,
    dictionary_can_tell,
    dictionary_hits,
    has_hits,
)
from pqindex.plan.row_groups import (
    ROUND_TRIP_BYTES_REMOTE,
    FileContext,
    PageOutcome,
    RowGroupDecision,
    equality_stage,
    footer_stage,
    late_stage,
    round_trip_bytes,
)
from pqindex.plan.tree import leaves

__all__ = [
    "MAX_DICTIONARY_BYTES",
    "MAX_DICTIONARY_VALUES",
    "ROUND_TRIP_BYTES_REMOTE",
    "UNCLUSTERED_SPAN",
    "ColumnRead",
    "FilePlan",
    "PlanOptions",
    "RowGroupPlan",
    "dictionary_can_tell",
    "dictionary_hits",
    "file_context",
    "file_region",
    "page_index_futile",
    "plan_file",
    "round_trip_bytes",
    "settled_by_statistics",
]

# The names tests patch or inspect under their old place.
_RowGroupEvidence = RowGroupEvidence
_LazyHits = LazyHits
_has_hits = has_hits


def file_context(pf: ParquetFile, expr: BoundExpr, columns: Sequence[int],
                 options: PlanOptions, partition: dict[str, Any],
                 region: Any = None) -> FileContext:
    """The row-group and page stages' input for reading leaf ``columns`` of ``pf``."""
    n_leaves = len(pf.schema.leaves)
    preds = leaves(expr)
    file_preds = tuple(p for p in preds if p.leaf.index < n_leaves)
    # A condition on an expression reads its columns too (bound_leaves has them).
    read_cols = sorted(set(columns) | {c.index for c in bound_leaves(expr) if c.index < n_leaves})
    return FileContext(
        pf, expr, options, partition, region, file_preds,
        pred_cols=tuple(sorted({p.leaf.index for p in file_preds})),
        read_cols=tuple(read_cols),
        on_partition=any(p.leaf.index >= n_leaves for p in preds),
    )


def plan_file(
    pf: ParquetFile,
    expr: BoundExpr,
    columns: Sequence[int],
    *,
    partition: dict[str, Any] | None = None,
    options: PlanOptions | None = None,
    warnings: list[str] | None = None,
    row_groups: Collection[int] | None = None,
) -> FilePlan:
    """The access plan for reading leaf ``columns`` of ``pf`` where ``expr`` holds.

    ``row_groups``: only these row groups are considered (a Spark task re-planning
    its share of a file); the others are skipped without reading anything for them.
    """
    options = options or PlanOptions()
    partition = partition or {}
    if options.statistics:
        # The file level of the footer statistics first: it needs nothing read, and a
        # sorted lake's files are mostly ruled out here (no region, no wave).
        settled = settled_by_statistics(pf, expr, partition, row_groups)
        if settled is not None:
            return settled
    embedded = embedded_file_stage(pf, expr, options, partition, row_groups, warnings)
    if embedded.skipped is not None:
        return embedded.skipped
    ctx = file_context(pf, expr, columns, options, partition, embedded.region)
    footer = footer_stage(ctx, row_groups)
    # Predicate leaves whose page index cannot narrow what the statistics kept: never
    # fetched nor parsed beyond one sampled row group (see page_index_futile).
    futility = futile_leaves(ctx, footer)
    decisions = equality_stage(
        ctx, footer, lambda rgs: page_index_ranges(ctx, rgs, futility.paged))
    futility = futility.settled(ctx, decisions)
    pages = page_stage(ctx, decisions, futility)
    outcomes = late_stage(ctx, decisions, pages)
    plans = [_row_group_plan(ctx, d, o, warnings)
             for d, o in zip(decisions, outcomes, strict=True)]
    region = embedded.region
    if warnings is not None and region is not None:
        warnings += region.warnings[embedded.warnings_seen:]  # blobs refused while planning
    return FilePlan(pf.path, pf.num_rows, tuple(plans), partition=partition,
                    stages=stage_notes(ctx, footer, decisions, futility, pages, outcomes))


def stage_notes(ctx: FileContext, footer: Sequence[RowGroupDecision],
                decisions: Sequence[RowGroupDecision], futility: PageFutility,
                pages: Sequence[PageOutcome], outcomes: Sequence[PageOutcome]
                ) -> tuple[str, ...]:
    """What each stage decided, and where the planner stopped descending and why
    (``FilePlan.stages``, printed by explain)."""
    n = len(footer)
    left = [d.index for d in footer if d.undecided]
    notes = [f"footer: {n - len(left)} of {n} row groups decided"]
    if not left:
        return (*notes, "stopped: the footer decided every row group")
    still = [d.index for d in decisions if d.undecided]
    if len(still) < len(left):
        notes.append(f"Bloom filters / = and IN dictionaries: {len(left) - len(still)} more")
    if not still:
        return (*notes, "stopped: no row group left undecided")
    if not ctx.options.page_index:
        notes.append("pages: not used (page index off)")
    else:
        notes += [f"pages not read: {why}" for why in futility.futile.values()]
        consulted = [(d, o) for d, o in zip(decisions, pages, strict=True)
                     if d.undecided and o.decided_by == "page index"]
        narrowed = sum(1 for d, o in consulted if o.selection.maybe.count() < d.num_rows)
        if consulted:
            notes.append(f"pages: consulted for {len(consulted)} of {len(still)} row groups, "
                         f"{narrowed} narrowed")
        elif futility.futile and all(c in futility.futile for c in ctx.pred_cols):
            notes.append("stopped before the pages: no predicate column's pages can narrow "
                         "its row groups")
    late = sum(1 for o, f in zip(pages, outcomes, strict=True) if o is not f)
    if late:
        notes.append(f"dictionaries / Bloom filters after the pages: {late} decided")
    return tuple(notes)


def _row_group_plan(ctx: FileContext, d: RowGroupDecision, o: PageOutcome,
                    warnings: list[str] | None) -> RowGroupPlan:
    """The row group's plan from the last stage's outcome, with the pages each column
    reads; the dictionary entries ``=`` / ``IN`` hit are left for the scan."""
    sel, n = o.selection, d.num_rows
    if warnings is not None:
        warnings += d.evidence.warnings
    final = (
        Match.NONE
        if sel.maybe.is_empty
        else (Match.ALL if sel.all.count() == n else Match.SOME)
    )
    if final != Match.ALL:
        d.evidence.leave_hits(ctx.file_preds)
    reads = (column_reads(ctx.pf, d.index, ctx.read_cols, sel, ctx.options)
             if not sel.maybe.is_empty else ())
    return RowGroupPlan(d.index, n, final, o.decided_by, o.reason, sel.maybe, sel.all, reads)
