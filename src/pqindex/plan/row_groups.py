"""The row-group stages of one file's plan, cheapest first, each a function of the
previous one's output (a list of ``RowGroupDecision``, one per row group):

1. ``footer_stage``: partition values, footer statistics and row-group blobs of the
   embedded region; nothing is read.
2. ``equality_stage``: wave 1 for the row groups still undecided: their Bloom
   filters (32 bytes a value) and the dictionaries of ``=`` / ``IN`` leaves, with the
   page indexes (``plan/pages.py``) fetched alongside in the same wave.
3. (the page stage, ``plan/pages.py``)
4. ``late_stage``: wave 2, only for row groups the pages left undecided: the other
   dictionaries and the Bloom filters whose header had to be read first.

The byte ranges each level will read are pure functions of the footer
(``dictionary_ranges``, ``bloom_ranges``...), so a wave is built before it is read.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pqindex.errors import PqIndexError
from pqindex.expr.bind import BoundCondition, BoundExpr, BoundPredicate
from pqindex.format.file import ParquetFile
from pqindex.format.match import LeafOp, Match
from pqindex.format.row_ranges import Selection
from pqindex.indexes.evidence import Evidence, bloom_hashes, compared_columns
from pqindex.indexes.region import Region
from pqindex.plan.access import PlanOptions
from pqindex.plan.row_group_evidence import (
    MAX_DICTIONARY_BYTES,
    RowGroupEvidence,
    dictionary_can_tell,
    has_hits,
)
from pqindex.plan.tree import evaluate

__all__ = ["ROUND_TRIP_BYTES_REMOTE", "FileContext", "PageOutcome", "RowGroupDecision",
           "Stage", "bloom_block_ranges", "bloom_ranges", "dictionary_ranges",
           "early_stages", "equality_stage", "footer_stage", "late_stage", "only_columns",
           "predictable_blooms", "round_trip_bytes", "selection_of", "staged_match",
           "wants_late"]

# Bytes worth reading on an object store to save a round trip (10-100 ms each).
ROUND_TRIP_BYTES_REMOTE = 4 * 1024 * 1024

# A level: its name (explain's "decided by") and its evidence for a leaf (None: none).
Stage = tuple[str, Callable[[BoundPredicate], "Evidence | None"]]


@dataclass(frozen=True)
class FileContext:
    """What every row-group and page stage of one file's plan reads."""

    pf: ParquetFile
    expr: BoundExpr
    options: PlanOptions
    partition: dict[str, Any]
    region: Region | None
    file_preds: tuple[BoundPredicate, ...]  # predicate leaves on the file's own columns
    pred_cols: tuple[int, ...]  # their leaf columns, sorted
    read_cols: tuple[int, ...]  # leaf columns the scan reads (projection and predicate)
    on_partition: bool  # a leaf on a partition column (not in the file)

    @property
    def n_leaves(self) -> int:
        return len(self.pf.schema.leaves)

    def early(self, ev: RowGroupEvidence) -> list[Stage]:
        return early_stages(ev, self.options, self.on_partition, self.region is not None)

    def dictionary_preds(self, ev: RowGroupEvidence) -> list[BoundPredicate]:
        """Leaves whose dictionary may be read: a row group with an exact embedded
        value set of the leaf reads none."""
        return [p for p in self.file_preds if not ev.exact_set(p)]


@dataclass(frozen=True)
class RowGroupDecision:
    """One row group after a row-group stage: its answer, the level that gave it, and
    the evidence gathered so far (kept for the next stages)."""

    index: int
    num_rows: int
    evidence: RowGroupEvidence
    match: Match
    decided_by: str
    reason: str

    @property
    def undecided(self) -> bool:
        return self.match == Match.SOME


@dataclass(frozen=True)
class PageOutcome:
    """One row group after the page stage (and the late stage): the rows that may
    match and those that surely do, and the level that decided."""

    selection: Selection
    decided_by: str
    reason: str


def selection_of(m: Match, n: int) -> Selection:
    if m == Match.NONE:
        return Selection.none()
    if m == Match.ALL:
        return Selection.everything(n)
    return Selection.unknown(n)



def staged_match(
    expr: BoundExpr, stages: Sequence[tuple[str, Callable[[BoundPredicate], Evidence | None]]]
) -> tuple[Match, str, str]:
    """Evaluate with more evidence per stage until the answer is NONE or ALL."""
    answers: dict[int, Match] = {}
    last = Match.SOME
    used: list[str] = []
    for name, source in stages:
        consulted = False

        def leaf_match(pred: BoundPredicate, source: Any = source) -> Match:
            nonlocal consulted
            key = id(pred)
            prev = answers.get(key, Match.SOME)
            if prev != Match.SOME:
                return prev
            ev = source(pred)
            if ev is None:
                return prev
            consulted = True
            m = Match(ev.match(pred))
            answers[key] = m
            return m

        def condition_match(cond: BoundCondition, source: Any = source) -> Match:
            # Two columns compared: their statistics (min/max) may rule the unit out.
            nonlocal consulted
            if cond.compared is None:
                return Match.SOME
            op, left, right = cond.compared
            found = compared_columns(op, (source(left), left), (source(right), right))
            consulted = consulted or found != Match.SOME
            return found

        last = evaluate(expr, leaf_match, condition_match)
        if consulted:
            used.append(name)
        if last != Match.SOME:
            return last, name, f"{'no row' if last == Match.NONE else 'every row'} matches"
    return last, "-", "no level could decide" if used else "no usable statistics"


def bloom_block_ranges(
    pf: ParquetFile, rg: int, preds: Sequence[BoundPredicate]
) -> list[tuple[int, int]]:
    """Blocks of the filters whose layout could not be predicted (header read already)."""
    out = []
    for p in preds:
        col = p.leaf.index
        if pf.column_meta(rg, col).bloom_filter_offset is None:
            continue
        hs = bloom_hashes(p)
        if hs is None:
            continue
        try:
            if pf.bloom_header_length(rg, col) is not None:
                continue
            probe = pf.bloom_probe(rg, col)
        except PqIndexError:
            continue  # reported when the level reads it
        if probe is not None and probe.num_blocks:
            out += [probe.block_range(h) for h in hs]
    return out


def early_stages(
    ev: RowGroupEvidence, options: PlanOptions, on_partition: bool, has_region: bool
) -> list[tuple[str, Callable[[BoundPredicate], Evidence | None]]]:
    """The levels that need nothing but the footer (and the embedded region)."""
    stages: list[tuple[str, Callable[[BoundPredicate], Evidence | None]]] = (
        [("partition", ev.constant)] if on_partition else []
    )
    if options.statistics:
        stages.append(("statistics", ev.statistics))
    if has_region:
        stages.append(("embedded index", ev.embedded))
    return stages


def wants_late(m: Match, sel: Selection, n: int, options: PlanOptions) -> bool:
    """Whether the dictionary/Bloom levels are consulted after the page level."""
    return (
        m == Match.SOME
        and not sel.maybe.is_empty
        and sel.all.count() < n
        and (options.dictionary or options.bloom)
    )


def round_trip_bytes(pf: ParquetFile) -> int:
    """How many bytes are worth reading to save one round trip on this file's store:
    0 on local files (bytes first), a few MiB where the store's merge policy says a
    request costs more than reading 256 KiB."""
    remote = len(pf.source.coalesce([(0, 1), (256 * 1024, 1)])) == 1
    return ROUND_TRIP_BYTES_REMOTE if remote else 0


def only_columns(
    source: Callable[[BoundPredicate], Evidence | None], cols: frozenset[int]
) -> Callable[[BoundPredicate], Evidence | None]:
    """``source`` for the leaves of ``cols`` only."""
    def answer(pred: BoundPredicate) -> Evidence | None:
        return source(pred) if pred.leaf.index in cols else None
    return answer


def predictable_blooms(
    pf: ParquetFile, rg: int, preds: Sequence[BoundPredicate]
) -> frozenset[int]:
    """Leaves of = / IN predicates whose Bloom header and blocks can be read in one wave."""
    out = set()
    for p in preds:
        col = p.leaf.index
        if pf.column_meta(rg, col).bloom_filter_offset is None or bloom_hashes(p) is None:
            continue
        try:
            if pf.bloom_header_length(rg, col) is not None:
                out.add(col)
        except PqIndexError:
            continue
    return frozenset(out)


def dictionary_ranges(
    pf: ParquetFile, rg: int, preds: Sequence[BoundPredicate], *, equality_only: bool
) -> list[tuple[int, tuple[int, int]]]:
    """``(column, range)`` of the dictionary pages the dictionary level of this row
    group will read, where their place is known without reading (the footer or a
    loaded offset index)."""
    out = []
    wanted = [p for p in preds if (not equality_only or p.op in (LeafOp.EQ, LeafOp.IN))
              and dictionary_can_tell(pf, rg, p)]
    for col in sorted({p.leaf.index for p in wanted}):
        leaf = pf.leaf(col)
        if leaf.max_repetition_level or not pf.all_dictionary_encoded(rg, col):
            continue
        if all(has_hits(pf, rg, col, p) for p in wanted if p.leaf.index == col):
            continue  # answered by an earlier plan's entries: nothing to read
        ext = pf.dictionary_extent(rg, col)
        if ext is not None and ext[1] <= MAX_DICTIONARY_BYTES:
            out.append((col, ext))
    return out


def bloom_ranges(
    pf: ParquetFile, rg: int, preds: Sequence[BoundPredicate], *, predictable_only: bool
) -> list[tuple[int, int]]:
    """Header and blocks the Bloom level of this row group reads for its = / IN leaves."""
    hashes: dict[int, list[int]] = {}
    for p in preds:
        if (p.leaf.index >= len(pf.schema.leaves)
                or pf.column_meta(rg, p.leaf.index).bloom_filter_offset is None):
            continue
        hs = bloom_hashes(p)
        if hs is not None:
            hashes.setdefault(p.leaf.index, []).extend(hs)
    out = []
    for col, hs in sorted(hashes.items()):
        try:
            if predictable_only and pf.bloom_header_length(rg, col) is None:
                continue
            out += pf.bloom_probe_ranges(rg, col, hs)
        except PqIndexError:
            continue  # reported when the level reads it
    return out



# ---------------------------------------------------------------- the stages


def footer_stage(ctx: FileContext, row_groups: Collection[int] | None = None
                 ) -> list[RowGroupDecision]:
    """Every row group decided by what needs nothing read: partition values, footer
    statistics and the embedded region's row-group blobs. ``row_groups``: only these
    are considered, the others are skipped "by selection"."""
    pf = ctx.pf
    out: list[RowGroupDecision] = []
    for rg in range(pf.num_row_groups):
        n = pf.row_group_rows(rg)
        ev = RowGroupEvidence(pf, rg, ctx.partition, ctx.n_leaves, ctx.options, ctx.region)
        if row_groups is not None and rg not in row_groups:
            m, by, why = Match.NONE, "selection", "row group not asked for"
        elif n == 0:
            m, by, why = Match.NONE, "statistics", "row group has no rows"
        else:
            m, by, why = staged_match(ctx.expr, ctx.early(ev))
        out.append(RowGroupDecision(rg, n, ev, m, by, why))
    return out


def equality_stage(
    ctx: FileContext, decisions: Sequence[RowGroupDecision],
    page_index_ranges: Callable[[list[int]], list[tuple[int, int]]],
) -> list[RowGroupDecision]:
    """Wave 1 after the tail, for every row group the footer left undecided: Bloom
    header + blocks (when their place is known without reading) and dictionaries
    for ``=`` and ``IN``, with ``page_index_ranges`` of those row groups (the page
    stage's bytes: a round trip costs more than these few bytes). Then the Bloom
    filters and the equality dictionaries decide what they can."""
    pf, options = ctx.pf, ctx.options
    undecided = [d.index for d in decisions if d.undecided]
    if not undecided:
        # Nothing left undecided (most files of a selective dataset scan): no wave.
        return list(decisions)
    out = list(decisions)
    evidence_of = {d.index: d.evidence for d in decisions}
    file_preds = list(ctx.file_preds)
    wave: list[tuple[int, int]] = []
    budget = round_trip_bytes(pf)
    # Where bytes cost more than round trips (local files), the page index of a row
    # group an equality dictionary or Bloom filter may still rule out waits for them:
    # with small pages it is far larger than the dictionary that decides.
    waiting = [] if budget or not (options.dictionary or options.bloom) else [
        rg for rg in undecided
        if (options.dictionary
            and dictionary_ranges(pf, rg, ctx.dictionary_preds(evidence_of[rg]),
                                  equality_only=True))
        or (options.bloom and predictable_blooms(pf, rg, file_preds))]
    wave += page_index_ranges([rg for rg in undecided if rg not in waiting])

    # A Bloom filter answers = and IN for a block of 32 bytes: it goes first, and the
    # dictionaries it covers wait for its answer unless reading them now costs less
    # than a round trip.
    bloomed: dict[int, frozenset[int]] = {}
    blooms: list[tuple[int, int]] = []
    deferred: dict[int, list[tuple[int, int]]] = {}
    for rg in undecided:
        if options.bloom:
            cols = predictable_blooms(pf, rg, file_preds)
            bloomed[rg] = cols
            blooms += bloom_ranges(pf, rg, [p for p in file_preds if p.leaf.index in cols],
                                   predictable_only=True)
        if options.dictionary:
            for col, ext in dictionary_ranges(pf, rg, ctx.dictionary_preds(evidence_of[rg]),
                                              equality_only=True):
                if col in bloomed.get(rg, ()):
                    deferred.setdefault(rg, []).append(ext)
                else:
                    wave.append(ext)
    if sum(n for exts in deferred.values() for _, n in exts) <= budget:
        wave += [ext for exts in deferred.values() for ext in exts]
    if budget and options.dictionary:
        # The other comparisons' dictionaries are read after the page level; on a store
        # where a round trip costs more, with this wave when they are small enough.
        other = [ext for rg in undecided for _, ext in dictionary_ranges(
            pf, rg, ctx.dictionary_preds(evidence_of[rg]), equality_only=False)]
        if sum(n for _, n in other) <= budget:
            wave += other
    pf.prefetch(wave, exact=blooms)
    if options.dictionary or options.bloom:
        for i, d in enumerate(out):
            if not d.undecided or not bloomed.get(d.index):
                continue
            stages = ctx.early(d.evidence)
            stages.append(("bloom filter", only_columns(d.evidence.bloom, bloomed[d.index])))
            out[i] = _decided(d, staged_match(ctx.expr, stages))
        # Dictionaries the Bloom filters did not make useless, in one more wave.
        pf.prefetch([ext for d in out if d.undecided for ext in deferred.get(d.index, [])])
    if options.dictionary:
        # = and IN against a dictionary decide a row group for the price of a page the
        # scan would read anyway.
        for i, d in enumerate(out):
            if d.undecided:
                stages = ctx.early(d.evidence)
                if bloomed.get(d.index):
                    stages.append(("bloom filter",
                                   only_columns(d.evidence.bloom, bloomed[d.index])))
                stages.append(("dictionary", d.evidence.dictionary_for_equality))
                out[i] = _decided(d, staged_match(ctx.expr, stages))
    if waiting:
        still = {d.index for d in out if d.undecided}
        pf.prefetch(page_index_ranges([rg for rg in waiting if rg in still]))
    return out


def _decided(d: RowGroupDecision, answer: tuple[Match, str, str]) -> RowGroupDecision:
    m, by, why = answer
    return replace(d, match=m, decided_by=by, reason=why)


def late_stage(ctx: FileContext, decisions: Sequence[RowGroupDecision],
               pages: Sequence[PageOutcome]) -> list[PageOutcome]:
    """Wave 2, only for row groups the footer and the pages left undecided: every
    dictionary and Bloom filter of their predicate leaves (all of them read at
    once), then the filters whose header had to be read first, in one more wave.
    Dictionaries and Bloom filters cost a read each, so they come last."""
    pf, options = ctx.pf, ctx.options
    file_preds = list(ctx.file_preds)
    late = [wants_late(d.match, o.selection, d.num_rows, options)
            for d, o in zip(decisions, pages, strict=True)]
    late_wave: list[tuple[int, int]] = []
    late_blooms: list[tuple[int, int]] = []
    for d, wanted in zip(decisions, late, strict=True):
        if not wanted:
            continue
        if options.dictionary:
            late_wave += [ext for _, ext in dictionary_ranges(
                pf, d.index, ctx.dictionary_preds(d.evidence), equality_only=False)]
        if options.bloom:
            late_blooms += bloom_ranges(pf, d.index, file_preds, predictable_only=False)
    pf.prefetch(late_wave, exact=late_blooms)
    if options.bloom:
        # Filters whose header had to be read first: their blocks in one more wave.
        pf.prefetch([], exact=[
            r for d, wanted in zip(decisions, late, strict=True) if wanted
            for r in bloom_block_ranges(pf, d.index, file_preds)
        ])
    out: list[PageOutcome] = []
    for d, o, wanted in zip(decisions, pages, late, strict=True):
        if wanted:
            ev = d.evidence
            levels: list[Stage] = [
                ("partition", ev.constant),
                ("statistics", ev.statistics),
                ("embedded index", ev.embedded),
            ]
            if options.dictionary:
                levels.append(("dictionary", ev.dictionary))
            if options.bloom:
                levels.append(("bloom filter", ev.bloom))
            m2, by2, why2 = staged_match(ctx.expr, levels)
            if m2 == Match.NONE:
                o = PageOutcome(Selection.none(), by2, why2)
            elif m2 == Match.ALL:
                o = PageOutcome(Selection.everything(d.num_rows), by2, why2)
        out.append(o)
    return out
