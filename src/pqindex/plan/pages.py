"""The page stage of one file's plan: row ranges from the page index (ColumnIndex +
OffsetIndex) of each predicate leaf, sharpened by the embedded region's page-scope
blobs; AND intersects and OR unites them across columns whose pages don't line up.

It is entered only where it can change the plan. A leaf whose row groups and pages
are not clustered (``page_index_futile``) cannot rule a page out that its row group
kept: its column indexes are neither fetched nor parsed, and ``explain`` says so.
``column_reads`` turns the final selection into the pages each column's scan reads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from pqindex.errors import PqIndexError
from pqindex.expr.bind import BoundExpr, BoundPredicate, values_token
from pqindex.format.column_index import PageIndex
from pqindex.format.file import ParquetFile
from pqindex.format.match import LeafOp, Match
from pqindex.format.row_ranges import Selection
from pqindex.format.schema import LeafColumn
from pqindex.format.values import bound_order
from pqindex.indexes.base import Scope
from pqindex.indexes.evidence import bloom_hashes
from pqindex.indexes.region import Region
from pqindex.plan.access import ColumnRead, PlanOptions
from pqindex.plan.file_level import row_group_statistics
from pqindex.plan.row_group_evidence import RowGroupEvidence
from pqindex.plan.row_groups import FileContext, PageOutcome, RowGroupDecision, selection_of
from pqindex.plan.tree import select

__all__ = ["PAGE_BLOB_ANSWERS", "PAGE_SELECTIONS", "UNCLUSTERED_SPAN", "PageFutility",
           "chunk_page_index", "column_reads", "decide_suspects", "futile_leaves",
           "has_column_index", "page_index_futile", "page_index_ranges", "page_level",
           "page_stage", "unclustered_row_groups", "with_page_blobs"]

# Median share of a container's value range its parts' min..max span, from which the
# parts count as unclustered: a page then rules out no more than its row group.
UNCLUSTERED_SPAN = 0.5


_UNKNOWN = object()


def page_index_futile(pf: ParquetFile, leaf: LeafColumn) -> str | None:
    """Why the page index of ``leaf`` cannot narrow the row groups its statistics
    kept, as the file's last plan decided (None: it may, or not decided yet).

    A page holds a slice of its row group's rows. When the row groups' min..max
    each span most of the file's range, the column is not clustered by row order
    (:func:`unclustered_row_groups`, from the footer); one row group's column index
    then tells whether its pages are as wide as it is (:func:`_unclustered_pages`,
    read in the planner's first wave). If they are, no page rules out more than its
    row group did, and the other row groups' column indexes are neither fetched nor
    parsed: TPC-H Q6 on the generator's file parsed 159 of them for nothing (0.6 s).
    Row groups that declare the leaf as their sort column,
    page-scope embedded indexes and files of one row group keep the page level."""
    got = pf.derived.get(("page_index_futile", leaf.index))
    return got if isinstance(got, str) else None


def decide_suspects(pf: ParquetFile, suspects: dict[int, str], undecided: Sequence[int],
                     futile: dict[int, str]) -> None:
    """Decide each suspect leaf from the first of the ``undecided`` row groups (whose
    page index the planner fetched) with a column index: futile ones go to
    ``futile``; the decision is kept with the file."""
    for col, why_rgs in suspects.items():
        sample = next((rg for rg in undecided
                       if pf.column_chunk(rg, col).column_index_offset is not None), None)
        if sample is None:
            continue
        why_not = _unclustered_pages(pf, pf.leaf(col), sample, why_rgs)
        pf.derived[("page_index_futile", col)] = why_not
        if why_not is not None:
            futile[col] = why_not


def _spread(los: Sequence[Any], his: Sequence[Any]) -> float | None:
    """The median share of the whole range ``min(los)..max(his)`` that each part
    ``los[i]..his[i]`` spans (numeric keys), or the share of parts holding both
    ends (byte keys); None for other keys."""
    keys = [*los, *his]
    if all(isinstance(k, (int, float, Decimal)) and not isinstance(k, bool) for k in keys):
        lo = np.asarray([float(k) for k in los], dtype=np.float64)
        hi = np.asarray([float(k) for k in his], dtype=np.float64)
        whole = float(hi.max() - lo.min())
        if not np.isfinite(whole):
            return None
        return 1.0 if whole == 0 else float(np.median((hi - lo) / whole))
    if all(isinstance(k, bytes) for k in keys):
        first, last = min(los), max(his)
        return sum(1 for a, z in zip(los, his, strict=True)
                   if a == first and z == last) / len(los)
    return None


def unclustered_row_groups(pf: ParquetFile, leaf: LeafColumn, region: Region | None
                            ) -> str | None:
    """The footer's half of :func:`page_index_futile`: why the row groups look
    unclustered on ``leaf``, or None."""
    if leaf.max_repetition_level:
        return None
    if region is not None and region.find(column=leaf.name, scope=Scope.PAGE):
        return None
    order = bound_order(leaf)
    los: list[Any] = []
    his: list[Any] = []
    for rg in range(pf.num_row_groups):
        if not pf.row_group_rows(rg):
            continue
        sorting = (pf.metadata.row_groups or [])[rg].sorting_columns
        if sorting and sorting[0].column_idx == leaf.index:
            return None
        st = row_group_statistics(pf, rg, leaf)
        if st is None:
            return None
        b = st.bounds
        if b.all_null:
            continue
        if not b.usable or b.min is None or b.max is None:
            return None
        try:
            los.append(order.key(b.min, b.comparison))
            his.append(order.key(b.max, b.comparison))
        except (ValueError, TypeError):
            return None
    if len(los) < 2:
        return None
    spread = _spread(los, his)
    if spread is None or spread < UNCLUSTERED_SPAN:
        return None
    return f"its row groups span {spread:.0%} of the file's range"


def _unclustered_pages(pf: ParquetFile, leaf: LeafColumn, sample: int,
                       row_groups_say: str) -> str | None:
    """Whether the pages of row group ``sample`` span as much of it as the row groups
    span of the file (then: why the page index is futile), else None."""
    pi = chunk_page_index(pf, sample, leaf.index, [])
    if pi is None or pi.reason is not None or pi.num_pages < 2:
        return None
    keys = [k for p in range(pi.num_pages) if (k := pi.page_keys(p)) is not None]
    if len(keys) < 2:
        return None
    spread = _spread([k[0] for k in keys], [k[1] for k in keys])
    if spread is None or spread < UNCLUSTERED_SPAN:
        return None
    return (f"{leaf.name!r} is not clustered: {row_groups_say}, and row group {sample}'s "
            f"pages {spread:.0%} of its range")



def page_level(
    pf: ParquetFile, rg: int, expr: BoundExpr, ev: RowGroupEvidence, n: int, by: str, why: str,
    futile: dict[int, str],
) -> tuple[Selection, str, str]:
    """Row ranges from the page index of each predicate leaf (``futile``: leaves whose
    page index cannot narrow, left unread)."""
    indexes: dict[int, PageIndex | None] = {}
    used = False

    def leaf_select(pred: BoundPredicate) -> Selection:
        nonlocal used
        col = pred.leaf.index
        # What the row-group levels knew about this leaf alone.
        known = Match.SOME
        for source in (ev.constant, ev.statistics, ev.embedded):
            e = source(pred)
            if e is not None:
                known = e.match(pred)
                if known != Match.SOME:
                    break
        if known != Match.SOME or col >= len(pf.schema.leaves):
            return selection_of(known, n)
        if col in futile:
            return Selection.unknown(n)
        if col not in indexes:
            indexes[col] = chunk_page_index(pf, rg, col, ev.warnings)
        pi = indexes[col]
        if pi is None or (pi.reason is not None and pi.null_reason is not None):
            return Selection.unknown(n)
        if pi.reason is not None and pred.op not in (LeafOp.IS_NULL, LeafOp.IS_NOT_NULL):
            return Selection.unknown(n)
        used = True
        # The answer depends only on the file, the row group, the leaf and whether
        # page-scope blobs are used (explain's page map plans without them): kept per
        # file (a bounded number) so warm queries skip the page search.
        cache: dict[Any, Selection] = pf.derived.setdefault("page_selections", {})
        try:
            key: Any = (rg, col, pred.leaf.name, pred.value_type, pred.op, values_token(pred),
                        ev.region is not None)
            known_sel = cache.get(key)
        except TypeError:  # an unhashable literal: not kept
            key, known_sel = None, None
        if known_sel is not None:
            return known_sel
        matches = pi.matching_pages(pred.op, pred.keys)
        if ev.region is not None:
            matches = with_page_blobs(pf, ev.region, pred, rg, matches)
        found = pi.rows_for(matches)
        if key is not None:
            if len(cache) >= PAGE_SELECTIONS:
                # The oldest goes; a race with another thread only delays that.
                with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                    del cache[next(iter(cache))]
            cache[key] = found  # immutable: shared as it is
        return found

    sel = select(expr, leaf_select, n)
    if used:
        if sel.maybe.is_empty:
            return sel, "page index", "no page can match"
        return sel, "page index", f"{sel.maybe.count():,} of {n:,} rows in pages that may match"
    if futile:
        why = f"{why}; page index not read: {'; '.join(futile.values())}"
    return sel, by, why


def has_column_index(pf: ParquetFile, rg: int, cols: Sequence[int]) -> bool:
    """Whether the page level can narrow this row group: without a ColumnIndex a
    leaf's pages are all unknown, and the footer's answer (SOME) stands."""
    return any(pf.column_chunk(rg, c).column_index_offset is not None for c in cols)


def chunk_page_index(pf: ParquetFile, rg: int, col: int, warnings: list[str]) -> PageIndex | None:
    """The chunk's PageIndex, decoded once per file."""
    key = ("page_index", rg, col)
    if key not in pf.derived:
        try:
            pf.derived[key] = PageIndex.load(pf, rg, col)
        except PqIndexError as e:
            pf.derived[key] = None
            pf.derived[("page_index_error", rg, col)] = str(e)
    err = pf.derived.get(("page_index_error", rg, col))
    if err is not None:
        warnings.append(f"page index of {pf.leaf(col).name!r} not used: {err}")
    result: PageIndex | None = pf.derived[key]
    return result


# Per-file page-blob answers kept (see with_page_blobs).
PAGE_BLOB_ANSWERS = 1024
# Per-leaf page-level selections kept per file (see page_level).
PAGE_SELECTIONS = 4096


def with_page_blobs(
    pf: ParquetFile, region: Region, pred: BoundPredicate, rg: int, matches: Any
) -> Any:
    """Per-page answers sharpened by page-scope embedded blobs (distinct values, zone
    maps, Bloom filters: those probed a block at a time in one wave first).

    The answers depend only on the file and the leaf, so they are kept per file
    (a bounded number): a warm query asks each page's blobs once, not every time."""
    some = np.flatnonzero(np.asarray(matches) == int(Match.SOME)).tolist()
    if not some:
        return matches
    cache: dict[Any, Any] = pf.derived.setdefault("page_blob_answers", {})
    try:
        key: Any = (rg, pred.leaf.index, pred.leaf.name, pred.value_type, pred.op,
                    values_token(pred), np.asarray(matches).tobytes())
        known = cache.get(key)
    except TypeError:  # an unhashable literal: not kept
        key, known = None, None
    if known is not None:
        return known.copy()
    out = None
    hashes = bloom_hashes(pred)
    pages = [(rg, p) for p in some]
    if hashes:
        pf.prefetch([], exact=region.probe_ranges(Scope.PAGE, pred.leaf.name, pages, hashes))
    # The other page blobs at once; equal page sets share one evidence object (a
    # low-cardinality column's pages hold the same values): each is asked once.
    answers: dict[int, Match] = {}
    per_page = region.evidence_of_units(Scope.PAGE, pred.leaf.name, pages, leaf=pred.leaf)
    for page, evs in zip(some, per_page, strict=True):
        if not evs:
            continue
        m = Match.SOME
        for e in evs:
            a = answers.get(id(e))
            if a is None:
                a = answers[id(e)] = Match(e.match(pred))
            if a == Match.NONE:
                m = a
                break
            if a == Match.ALL:
                m = a
        if m != Match.SOME:
            if out is None:
                out = matches.copy()
            out[page] = m
    result = matches if out is None else out
    if key is not None:
        if len(cache) >= PAGE_BLOB_ANSWERS:
            # The oldest goes; a race with another thread only delays that.
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                del cache[next(iter(cache))]
        cache[key] = result.copy()
    return result


def column_reads(
    pf: ParquetFile, rg: int, cols: Sequence[int], sel: Selection, options: PlanOptions
) -> tuple[ColumnRead, ...]:
    """Upper bound of the pages each column's scan reads: those overlapping ``maybe``."""
    out = []
    n = pf.row_group_rows(rg)
    for col in cols:
        name = pf.leaf(col).name
        cmd = pf.column_meta(rg, col)
        whole = cmd.total_compressed_size or 0
        oi = pf.offset_index(rg, col) if options.page_index and sel.maybe.count() < n else None
        if oi is None:
            out.append(ColumnRead(col, name, None, pf.data_page_count(rg, col), whole))
            continue
        locs = oi.page_locations or []
        firsts = [loc.first_row_index or 0 for loc in locs]
        pages = tuple(int(p) for p in sel.maybe.overlapping_pages(firsts, n))
        size = sum(locs[p].compressed_page_size or 0 for p in pages)
        dic = pf.dictionary_extent(rg, col)
        if dic is not None:
            size += dic[1]
        out.append(ColumnRead(col, name, pages, len(locs), size))
    return tuple(out)


# ---------------------------------------------------------------- the stage


@dataclass(frozen=True)
class PageFutility:
    """Which predicate leaves the page stage leaves alone: ``futile``, whose page
    index cannot narrow what the row groups kept (known from an earlier plan of the
    file), and ``suspects``, whose row groups look unclustered from the footer and
    whose sampled row group decides (``decide_suspects``). Leaf -> why."""

    futile: dict[int, str]
    suspects: dict[int, str]
    paged: tuple[int, ...]  # predicate leaves whose column index is fetched (not futile)

    def settled(self, ctx: FileContext, decisions: Sequence[RowGroupDecision]
                ) -> PageFutility:
        """The suspects decided from the first undecided row group whose page index
        the planner fetched (the first plan of the file reads no extra wave for it,
        and parses that sample alone where it proves futile; later plans read none of
        it). Their column indexes were fetched already: ``paged`` stays."""
        if not self.suspects:
            return self
        futile = dict(self.futile)
        decide_suspects(ctx.pf, self.suspects, [d.index for d in decisions if d.undecided],
                        futile)
        return PageFutility(futile, {}, self.paged)


def futile_leaves(ctx: FileContext, decisions: Sequence[RowGroupDecision]) -> PageFutility:
    """The estimate, from the footer alone, of which leaves' page indexes cannot prune
    (nothing to estimate when the footer decided every row group)."""
    pf = ctx.pf
    futile: dict[int, str] = {}
    suspects: dict[int, str] = {}
    if not ctx.options.page_index or not any(d.undecided for d in decisions):
        return PageFutility(futile, suspects, ctx.pred_cols)
    for p in ctx.file_preds:
        col = p.leaf.index
        if col in futile or col in suspects:
            continue
        known = pf.derived.get(("page_index_futile", col), _UNKNOWN)
        if known is _UNKNOWN:
            why_rgs = unclustered_row_groups(pf, p.leaf, ctx.region)
            if why_rgs is None:
                pf.derived[("page_index_futile", col)] = None
            else:
                suspects[col] = why_rgs
        elif known is not None:
            futile[col] = known
    return PageFutility(futile, suspects, tuple(c for c in ctx.pred_cols if c not in futile))


def page_index_ranges(ctx: FileContext, rgs: Sequence[int], paged_cols: Sequence[int]
                      ) -> list[tuple[int, int]]:
    """What the page stage of row groups ``rgs`` reads: the offset indexes of the
    columns read (late materialization finds the pages of the matching rows with
    them), column indexes only of the leaves whose page index may narrow."""
    if not (ctx.options.page_index and rgs and ctx.pred_cols):
        return []
    pf = ctx.pf
    return pf.page_index_ranges(list(rgs), list(paged_cols)) + pf.page_index_ranges(
        list(rgs), [c for c in ctx.read_cols if c not in paged_cols], column_index=False)


def page_stage(ctx: FileContext, decisions: Sequence[RowGroupDecision],
               futility: PageFutility) -> list[PageOutcome]:
    """Each row group's rows after the page level (the row-group answer where the
    page index cannot narrow it, with the reason it was not read)."""
    pf, options = ctx.pf, ctx.options
    futile = futility.futile
    paged_cols = futility.paged
    out: list[PageOutcome] = []
    for d in decisions:
        by, why = d.decided_by, d.reason
        sel = selection_of(d.match, d.num_rows)
        if d.undecided and options.page_index and has_column_index(pf, d.index, paged_cols):
            sel, by, why = page_level(pf, d.index, ctx.expr, d.evidence, d.num_rows, by, why,
                                      futile)
        elif d.undecided and futile:
            why = f"{why}; page index not read: {'; '.join(futile.values())}"
        out.append(PageOutcome(sel, by, why))
    return out
