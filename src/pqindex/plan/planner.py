"""Pruning, level by level: file → row group → page → row ranges.

``plan_file`` turns a bound predicate and a projection into a :class:`FilePlan`,
the only thing the scanner needs: per row group, which rows may match
(``maybe``), which surely do (``all``), the level that decided and why, and the
pages of each column that will be read. Levels, cheapest first:

1. constants (hive partition values) and column-chunk statistics;
2. the dictionary page, when every data page of the chunk is dictionary-encoded;
3. the page index (ColumnIndex + OffsetIndex), giving row ranges; AND
   intersects and OR unites them across columns whose pages don't line up;
4. the Bloom filter, for ``=`` and ``IN`` leaves of row groups still undecided.

Each answers NONE / SOME / ALL; anything unusable answers SOME.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np

from pqindex.errors import CorruptFileError, PqIndexError
from pqindex.expr.bind import (
    BoundCondition,
    BoundExpr,
    BoundPredicate,
    bound_leaves,
)
from pqindex.format.checksum import check_page
from pqindex.format.column_index import PageIndex
from pqindex.format.file import ParquetFile
from pqindex.format.match import LeafOp, Match
from pqindex.format.plain import decompress, plain_entries
from pqindex.format.row_ranges import RowRanges, Selection
from pqindex.format.schema import LeafColumn, PageType
from pqindex.format.structs import PageHeader
from pqindex.format.thrift import ThriftError, decode
from pqindex.format.value_type import Kind
from pqindex.format.values import bound_order
from pqindex.indexes.base import Scope
from pqindex.indexes.distinct import DistinctEvidence
from pqindex.indexes.evidence import (
    BloomEvidence,
    ConstantEvidence,
    DictionaryEvidence,
    Evidence,
    bloom_hashes,
    compared_columns,
)
from pqindex.indexes.region import Region, read_region
from pqindex.io.cache import DICTIONARY_EVIDENCE
from pqindex.plan.file_level import REASON, row_group_statistics, ruled_out
from pqindex.plan.tree import evaluate, leaves, select

__all__ = [
    "ColumnRead",
    "FilePlan",
    "PlanOptions",
    "RowGroupPlan",
    "plan_file",
    "round_trip_bytes",
    "settled_by_statistics",
]

# A dictionary larger than this is not worth reading to prune one row group.
MAX_DICTIONARY_BYTES = 1 << 20
MAX_DICTIONARY_VALUES = 100_000
# Bytes worth reading on an object store to save a round trip (10-100 ms each).
ROUND_TRIP_BYTES_REMOTE = 4 * 1024 * 1024


@dataclass(frozen=True)
class PlanOptions:
    """Which levels to use; all on by default. ``verify_checksums``: the CRC32 of each
    dictionary page read to prune is checked first (``format.checksum``)."""

    statistics: bool = True
    dictionary: bool = True
    page_index: bool = True
    bloom: bool = True
    embedded: bool = True
    verify_checksums: bool = False


@dataclass(frozen=True)
class ColumnRead:
    """The pages of one leaf column a row group's scan reads (None: the whole chunk)."""

    column: int
    name: str
    pages: tuple[int, ...] | None
    pages_total: int | None
    bytes: int


@dataclass(frozen=True)
class RowGroupPlan:
    """One row group: what may match, what surely matches, and why."""

    index: int
    num_rows: int
    match: Match
    decided_by: str  # "statistics", "dictionary", "page index", "bloom filter", "partition", "-"
    reason: str
    maybe: RowRanges
    all: RowRanges
    reads: tuple[ColumnRead, ...] = ()  # upper bound of what the scan reads

    @property
    def skipped(self) -> bool:
        return self.maybe.is_empty


@dataclass(frozen=True)
class FilePlan:
    """The access plan of one file, the planner's only output."""

    path: str
    num_rows: int
    row_groups: tuple[RowGroupPlan, ...]
    skipped_by: str | None = None  # set when the whole file is skipped before opening
    reason: str = ""
    partition: dict[str, Any] = field(default_factory=dict)

    @property
    def skipped(self) -> bool:
        return self.skipped_by is not None or all(rg.skipped for rg in self.row_groups)


def _selection_of(m: Match, n: int) -> Selection:
    if m == Match.NONE:
        return Selection.none()
    if m == Match.ALL:
        return Selection.everything(n)
    return Selection.unknown(n)


# ---------------------------------------------------------------- the planner


class _RowGroupEvidence:
    """Evidence for one row group, fetched lazily and cached per leaf column."""

    def __init__(
        self,
        pf: ParquetFile,
        rg: int,
        partition: dict[str, Any],
        n_file_leaves: int,
        options: PlanOptions,
        region: Region | None = None,
    ) -> None:
        self.pf = pf
        self.rg = rg
        self.partition = partition
        self.n_file_leaves = n_file_leaves
        self.options = options
        self._dicts: dict[int, Evidence | None] = {}
        self._blooms: dict[int, Evidence | None] = {}
        self.warnings: list[str] = []
        self.region: Region | None = region

    def embedded(self, pred: BoundPredicate) -> Evidence | None:
        """Row-group-scope blobs of the embedded index region (zone maps, distinct)."""
        if self.region is None or pred.leaf.index >= self.n_file_leaves:
            return None
        evs = self.region.evidence(Scope.ROW_GROUP, pred.leaf.name, self.rg, leaf=pred.leaf)
        return _AllOf(evs) if evs else None

    def constant(self, pred: BoundPredicate) -> Evidence | None:
        if pred.leaf.index >= self.n_file_leaves:
            return ConstantEvidence(self.partition.get(pred.leaf.name))
        return None

    def statistics(self, pred: BoundPredicate) -> Evidence | None:
        col = pred.leaf.index
        if col >= self.n_file_leaves:
            return None
        # Decoded once per file and kept: a dataset plans the same footers again and again.
        return row_group_statistics(self.pf, self.rg, pred.leaf)

    def exact_set(self, pred: BoundPredicate) -> bool:
        """Whether the embedded region holds the row group's exact value set of the
        leaf: a dictionary (a superset of the values) cannot tell more, so it is not
        read."""
        if self.region is None or pred.leaf.index >= self.n_file_leaves:
            return False
        evs = self.region.evidence(Scope.ROW_GROUP, pred.leaf.name, self.rg, leaf=pred.leaf)
        return any(isinstance(e, DistinctEvidence) and e.values.known for e in evs)

    def dictionary(self, pred: BoundPredicate) -> Evidence | None:
        col = pred.leaf.index
        if col >= self.n_file_leaves:
            return None
        if col in self._dicts:
            return self._dicts[col]
        if self.exact_set(pred) or not dictionary_can_tell(self.pf, self.rg, pred):
            self._dicts[col] = None
            return None
        ev: Evidence | None = None
        pf, rg = self.pf, self.rg
        cmd = pf.column_meta(rg, col)
        if pf.all_dictionary_encoded(rg, col) and pred.leaf.max_repetition_level == 0:
            # Decoded once per file and kept (within a budget): splitting a large
            # dictionary into its entries costs more than the query it prunes.
            key = ("dictionary_evidence", rg, col, pred.value_type)
            if key in pf.derived:
                ev = pf.derived[key]
            elif (known := dictionary_hits(pf, rg, col, pred)) is not None:
                # Not kept: this predicate's answer, left by an earlier plan, for this
                # predicate only (another on the column reads the dictionary).
                stats = cmd.statistics
                return _KnownHits(pred, len(known[0]), known[1],
                                  stats.null_count if stats is not None else None)
            else:
                try:
                    ev = self._read_dictionary(pred, cmd.num_values)
                except PqIndexError as e:
                    self.warnings.append(f"dictionary of {pred.leaf.name!r} not used: {e}")
                else:
                    _keep_dictionary(pf, key, ev)
        self._dicts[col] = ev
        return ev

    def _read_dictionary(self, pred: BoundPredicate, num_values: int | None) -> Evidence | None:
        pf, rg, col = self.pf, self.rg, pred.leaf.index
        ext = pf.dictionary_extent(rg, col)
        offset = ext[0] if ext is not None else 0
        if ext is not None and ext[1] <= MAX_DICTIONARY_BYTES:
            # The offset index tells where the dictionary ends: one read, header included.
            whole = pf.read_bytes(ext[0], ext[1], keep=True)
            try:
                header, hlen = decode(PageHeader, whole)
            except ThriftError as e:
                raise CorruptFileError(
                    f"corrupt dictionary page header: {e.reason}", offset=ext[0] + e.offset
                ) from None
        else:
            page = pf.dictionary_page(rg, col)
            if page is None or page.total_length > MAX_DICTIONARY_BYTES:
                return None
            header, hlen, offset = page.header, page.header_length, page.offset
            # Header and data together, kept: the scan decodes with this same page.
            whole = pf.read_bytes(page.offset, page.total_length, keep=True)
        dh = header.dictionary_page_header
        size = header.uncompressed_page_size
        if header.type != PageType.DICTIONARY_PAGE or dh is None or dh.num_values is None:
            return None
        if size is None or dh.num_values > MAX_DICTIONARY_VALUES:
            return None
        raw = whole[hlen : hlen + (header.compressed_page_size or 0)]
        if self.options.verify_checksums:
            check_page(pf.path, rg, pred.leaf.name, offset, header, raw)
        cmd = pf.column_meta(rg, col)
        data = decompress(raw, cmd.codec or 0, size)
        if data is None:
            return None
        el = pred.leaf.element
        entries = plain_entries(el.type or 0, el.type_length, data, dh.num_values)
        stats = cmd.statistics
        nulls = stats.null_count if stats is not None else None
        return DictionaryEvidence(pred.value_type, entries, nulls, num_values)

    def leave_hits(self, preds: Sequence[BoundPredicate]) -> None:
        """Leave with the file the dictionary entries each ``=`` / ``IN`` of ``preds``
        matched in this row group (consulted dictionaries only), by ``(rg, column)``:
        the scan then searches the indices for them without the dictionary page (a
        lake's large string dictionaries cost the scan a second decompression and
        comparison otherwise), and a later plan of the same predicate reads no
        dictionary the budget could not keep. The latest predicate per chunk: both
        check it (:func:`dictionary_hits`)."""
        for p in preds:
            d = self._dicts.get(p.leaf.index)
            if isinstance(d, DictionaryEvidence):
                self._leave_hits(p, d)

    def _leave_hits(self, p: BoundPredicate, d: DictionaryEvidence) -> None:
        col = p.leaf.index
        hits: np.ndarray | _LazyHits | None
        if (self.pf.derived.get(("dictionary_evidence", self.rg, col, p.value_type)) is d
                and d.can_hit(p)):
            # The file keeps the evidence: the positions are worked out if a scan asks
            # (a small file's row groups read whole never do).
            hits = _LazyHits(d, p)
        else:
            hits = d.hits(p)
        if hits is not None:
            self.pf.derived[("dictionary_hits", self.rg, col)] = (p, hits, len(d.entries))

    def dictionary_for_equality(self, pred: BoundPredicate) -> Evidence | None:
        if pred.op not in (LeafOp.EQ, LeafOp.IN):
            return None
        return self.dictionary(pred)

    def bloom(self, pred: BoundPredicate) -> Evidence | None:
        col = pred.leaf.index
        if col >= self.n_file_leaves:
            return None
        if col not in self._blooms:
            ev: Evidence | None = None
            try:
                # One 32-byte block per value, not the whole bitset.
                bf = self.pf.bloom_probe(self.rg, col)
                ev = BloomEvidence(bf) if bf is not None else None
            except PqIndexError as e:
                self.warnings.append(f"Bloom filter of {pred.leaf.name!r} not used: {e}")
            self._blooms[col] = ev
        return self._blooms[col]


def _keep_dictionary(pf: ParquetFile, key: tuple[Any, ...], ev: Evidence | None) -> None:
    """Keep a chunk's dictionary evidence with the file while the budget allows."""
    size = 0
    if isinstance(ev, DictionaryEvidence):
        size = ev.nbytes
    # Within io.cache.DICTIONARY_EVIDENCE: per file and for all open files.
    if DICTIONARY_EVIDENCE.take(pf.budget_owner, size):
        pf.derived[key] = ev
        if isinstance(ev, DictionaryEvidence):
            # The scan takes the same entries (no second decompression or split).
            pf.derived[("dictionary_entries", key[1], key[2])] = ev.entries


def dictionary_hits(pf: ParquetFile, rg: int, col: int, expr: object
                    ) -> tuple[np.ndarray, int] | None:
    """The dictionary entries a plan found ``expr`` (one ``=`` / ``IN``) holds for in
    this chunk, and the dictionary's size; None when it left none for ``expr``
    (``_RowGroupEvidence.leave_hits``). Compared by value: a predicate bound again
    for the next query finds them."""
    got = pf.derived.get(("dictionary_hits", rg, col))
    if got is None or got[0] != expr:
        return None
    pred, hits, size = got
    if isinstance(hits, _LazyHits):
        found = hits.evidence.hits(hits.pred)
        if found is None:  # can_hit said otherwise: not expected
            return None
        pf.derived[("dictionary_hits", rg, col)] = (pred, found, size)
        return found, size
    return hits, size


def _has_hits(pf: ParquetFile, rg: int, col: int, expr: object) -> bool:
    """Whether :func:`dictionary_hits` has an answer, without working it out."""
    got = pf.derived.get(("dictionary_hits", rg, col))
    return got is not None and got[0] == expr


class _LazyHits:
    """Positions of the entries a kept dictionary evidence matches, not yet found."""

    __slots__ = ("evidence", "pred")

    def __init__(self, evidence: DictionaryEvidence, pred: BoundPredicate) -> None:
        self.evidence = evidence
        self.pred = pred


@dataclass(frozen=True)
class _KnownHits:
    """What a dictionary said about ``pred`` in an earlier plan: how many of its
    ``count`` entries match (DictionaryEvidence's answer for ``=`` / ``IN``)."""

    pred: BoundPredicate
    hits: int
    count: int
    null_count: int | None

    def match(self, pred: BoundPredicate) -> Match:
        if pred != self.pred:
            return Match.SOME
        if not self.hits:
            return Match.NONE
        return Match.ALL if self.hits == self.count and self.null_count == 0 else Match.SOME


class _AllOf:
    """Several sound answers about one unit: the most decisive wins."""

    def __init__(self, evidence: Sequence[Any]) -> None:
        self.evidence = list(evidence)

    def match(self, pred: BoundPredicate) -> Match:
        answers = [Match(e.match(pred)) for e in self.evidence]
        if Match.NONE in answers:
            return Match.NONE
        if Match.ALL in answers:
            return Match.ALL
        return Match.SOME


def file_region(pf: ParquetFile, warnings: list[str] | None = None) -> Region | None:
    """The file's embedded index region, read once per ParquetFile."""
    if "region" not in pf.derived:
        region, found = read_region(pf)
        aliases = pf.derived.get("column_aliases")
        if region is not None and aliases is not None:
            region.alias_columns(aliases)  # a table renamed the file's columns
        pf.derived["region"] = region
        pf.derived["region_warnings"] = found
    if warnings is not None:
        warnings += pf.derived["region_warnings"]
        region = pf.derived["region"]
        if region is not None:
            warnings += region.warnings
    result: Region | None = pf.derived["region"]
    return result


def _file_match(pf: ParquetFile, expr: BoundExpr, region: Region | None,
                partition: dict[str, Any]) -> Match:
    """What file-scope evidence (embedded file indexes, partition values) says."""
    n = len(pf.schema.leaves)

    def leaf_match(pred: BoundPredicate) -> Match:
        if pred.leaf.index >= n:
            return Match(ConstantEvidence(partition.get(pred.leaf.name)).match(pred))
        if region is None:
            return Match.SOME
        evs = region.evidence(Scope.FILE, pred.leaf.name, leaf=pred.leaf)
        return _AllOf(evs).match(pred) if evs else Match.SOME

    return evaluate(expr, leaf_match)


def _staged_match(
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
    ), partition=partition)


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
    n_leaves = len(pf.schema.leaves)
    region_warnings: list[str] = []
    # No predicate on a column of the file: nothing for the region to answer, no read.
    wants_region = options.embedded and any(
        p.leaf.index < n_leaves for p in leaves(expr))
    region = file_region(pf, region_warnings) if wants_region else None
    if warnings is not None:
        warnings += region_warnings
    seen = len(region.warnings) if region is not None else 0
    if region is not None:
        # The predicate columns' sub-directories, in one request (format 3.0).
        region.open_columns(p.leaf.name for p in leaves(expr) if p.leaf.index < n_leaves)
        # Embedded Bloom filters of the file and of every row group are probed one
        # block per value: their headers and blocks in one wave, before either level.
        units = [(rg, None) for rg in range(pf.num_row_groups)
                 if (row_groups is None or rg in row_groups) and pf.row_group_rows(rg)]
        pf.prefetch([], exact=_probe_ranges(region, Scope.FILE, expr, [(None, None)])
                    + _probe_ranges(region, Scope.ROW_GROUP, expr, units))
    if region is not None and _file_match(pf, expr, region, partition) == Match.NONE:
        if warnings is not None:  # blobs refused while planning: this scan reports them
            warnings += region.warnings[seen:]
        skipped = tuple(
            RowGroupPlan(rg, pf.row_group_rows(rg), Match.NONE, "embedded index",
                         "file-level embedded index: no row matches", RowRanges.empty(),
                         RowRanges.empty())
            for rg in range(pf.num_row_groups)
        )
        return FilePlan(pf.path, pf.num_rows, skipped, partition=partition)
    preds = leaves(expr)
    pred_cols = sorted({p.leaf.index for p in preds if p.leaf.index < n_leaves})
    on_partition = any(p.leaf.index >= n_leaves for p in preds)
    # A condition on an expression reads its columns too (bound_leaves has them).
    read_cols = sorted(set(columns) | {c.index for c in bound_leaves(expr) if c.index < n_leaves})
    plans: list[RowGroupPlan] = []
    pending: list[tuple[int, _RowGroupEvidence, Match, str, str]] = []
    for rg in range(pf.num_row_groups):
        n = pf.row_group_rows(rg)
        ev = _RowGroupEvidence(pf, rg, partition, n_leaves, options, region)
        stages = _early_stages(ev, options, on_partition, region is not None)
        if row_groups is not None and rg not in row_groups:
            m, by, why = Match.NONE, "selection", "row group not asked for"
        elif n == 0:
            m, by, why = Match.NONE, "statistics", "row group has no rows"
        else:
            m, by, why = _staged_match(expr, stages)
        pending.append((rg, ev, m, by, why))
    # Wave 1 after the tail, for every row group the footer left undecided: page-index
    # entries, dictionaries for = and IN, Bloom header + blocks (when their place is
    # known without reading). A round trip costs more than these few bytes.
    undecided = [rg for rg, _, m, _, _ in pending if m == Match.SOME]
    file_preds = [p for p in preds if p.leaf.index < n_leaves]
    evidence_of = {rg: ev for rg, ev, _, _, _ in pending}

    def dictionary_preds(rg: int) -> list[BoundPredicate]:
        # Leaves whose row group has an exact embedded value set read no dictionary.
        ev = evidence_of[rg]
        return [p for p in file_preds if not ev.exact_set(p)]

    # Predicate leaves whose page index cannot narrow what the statistics kept: never
    # fetched nor parsed beyond one sampled row group (see page_index_futile).
    futile: dict[int, str] = {}
    suspects: dict[int, str] = {}  # leaf -> why its row groups look unclustered
    if undecided and options.page_index:
        for p in file_preds:
            col = p.leaf.index
            if col in futile or col in suspects:
                continue
            known = pf.derived.get(("page_index_futile", col), _UNKNOWN)
            if known is _UNKNOWN:
                why_rgs = _unclustered_row_groups(pf, p.leaf, region)
                if why_rgs is None:
                    pf.derived[("page_index_futile", col)] = None
                else:
                    suspects[col] = why_rgs
            elif known is not None:
                futile[col] = known
    paged_cols = [c for c in pred_cols if c not in futile]
    # Nothing left undecided (most files of a selective dataset scan): no wave to plan.
    # Nothing left undecided (most files of a selective dataset scan): no wave to plan.
    if undecided:
        wave: list[tuple[int, int]] = []
        budget = round_trip_bytes(pf)

        def page_index_ranges(rgs: list[int]) -> list[tuple[int, int]]:
            if not (options.page_index and rgs and pred_cols):
                return []
            # The offset indexes of the columns read (late materialization finds the
            # pages of the matching rows with them); column indexes only of the leaves
            # whose page index may narrow.
            return pf.page_index_ranges(rgs, paged_cols) + pf.page_index_ranges(
                rgs, [c for c in read_cols if c not in paged_cols], column_index=False)

        # Where bytes cost more than round trips (local files), the page index of a row
        # group an equality dictionary or Bloom filter may still rule out waits for them:
        # with small pages it is far larger than the dictionary that decides.
        waiting = [] if budget or not (options.dictionary or options.bloom) else [
            rg for rg in undecided
            if (options.dictionary
                and _dictionary_ranges(pf, rg, dictionary_preds(rg), equality_only=True))
            or (options.bloom and _predictable_blooms(pf, rg, file_preds))]
        wave += page_index_ranges([rg for rg in undecided if rg not in waiting])

        # A Bloom filter answers = and IN for a block of 32 bytes: it goes first, and the
        # dictionaries it covers wait for its answer unless reading them now costs less
        # than a round trip.
        bloomed: dict[int, frozenset[int]] = {}
        blooms: list[tuple[int, int]] = []
        deferred: dict[int, list[tuple[int, int]]] = {}
        for rg in undecided:
            if options.bloom:
                cols = _predictable_blooms(pf, rg, file_preds)
                bloomed[rg] = cols
                blooms += _bloom_ranges(pf, rg, [p for p in file_preds if p.leaf.index in cols],
                                        predictable_only=True)
            if options.dictionary:
                for col, ext in _dictionary_ranges(pf, rg, dictionary_preds(rg),
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
            other = [ext for rg in undecided for _, ext in _dictionary_ranges(
                pf, rg, dictionary_preds(rg), equality_only=False)]
            if sum(n for _, n in other) <= budget:
                wave += other
        pf.prefetch(wave, exact=blooms)
        if options.dictionary or options.bloom:
            for i, (rg, ev, m, _by, _why) in enumerate(pending):
                if m != Match.SOME or not bloomed.get(rg):
                    continue
                stages = _early_stages(ev, options, on_partition, region is not None)
                stages.append(("bloom filter", _only(ev.bloom, bloomed[rg])))
                pending[i] = (rg, ev, *_staged_match(expr, stages))
            # Dictionaries the Bloom filters did not make useless, in one more wave.
            pf.prefetch([ext for rg, _, m, _, _ in pending if m == Match.SOME
                         for ext in deferred.get(rg, [])])
        if options.dictionary:
            # = and IN against a dictionary decide a row group for the price of a page the
            # scan would read anyway.
            for i, (rg, ev, m, _by, _why) in enumerate(pending):
                if m == Match.SOME:
                    stages = _early_stages(ev, options, on_partition, region is not None)
                    if bloomed.get(rg):
                        stages.append(("bloom filter", _only(ev.bloom, bloomed[rg])))
                    stages.append(("dictionary", ev.dictionary_for_equality))
                    pending[i] = (rg, ev, *_staged_match(expr, stages))
        if waiting:
            still = {rg for rg, _, m, _, _ in pending if m == Match.SOME}
            pf.prefetch(page_index_ranges([rg for rg in waiting if rg in still]))
    # Suspects are decided from their sampled row group, fetched with the others: the
    # first plan of the file reads their page index (no wave added), and parses the
    # sample's alone where it proves futile; later plans read none of it.
    if suspects:
        _decide_suspects(pf, suspects, [rg for rg, _, m, _, _ in pending if m == Match.SOME],
                         futile)
    # Page level, then (wave 2, only for row groups still undecided) the remaining
    # dictionaries and Bloom filters of all of them at once.
    sels: list[tuple[Selection, str, str]] = []
    late_wave: list[tuple[int, int]] = []
    late_blooms: list[tuple[int, int]] = []
    for rg, ev, m, by, why in pending:
        n = pf.row_group_rows(rg)
        sel = _selection_of(m, n)
        if m == Match.SOME and options.page_index and _has_column_index(pf, rg, paged_cols):
            sel, by, why = _page_level(pf, rg, expr, ev, n, by, why, futile)
        elif m == Match.SOME and futile:
            why = f"{why}; page index not read: {'; '.join(futile.values())}"
        sels.append((sel, by, why))
        if _wants_late(m, sel, n, options):
            if options.dictionary:
                late_wave += [ext for _, ext in _dictionary_ranges(
                    pf, rg, dictionary_preds(rg), equality_only=False)]
            if options.bloom:
                late_blooms += _bloom_ranges(pf, rg, file_preds, predictable_only=False)
    pf.prefetch(late_wave, exact=late_blooms)
    if options.bloom:
        # Filters whose header had to be read first: their blocks in one more wave.
        pf.prefetch([], exact=[
            r for (rg, _, m, _, _), (sel, _, _) in zip(pending, sels, strict=True)
            if _wants_late(m, sel, pf.row_group_rows(rg), options)
            for r in _bloom_block_ranges(pf, rg, file_preds)
        ])
    for (rg, ev, m, by, why), (sel, by1, why1) in zip(pending, sels, strict=True):
        n = pf.row_group_rows(rg)
        by, why = by1, why1
        # Dictionaries and Bloom filters cost a read each: only for row groups the
        # statistics and the page index left undecided.
        late: list[tuple[str, Callable[[BoundPredicate], Evidence | None]]] = [
            ("partition", ev.constant),
            ("statistics", ev.statistics),
            ("embedded index", ev.embedded),
        ]
        if options.dictionary:
            late.append(("dictionary", ev.dictionary))
        if options.bloom:
            late.append(("bloom filter", ev.bloom))
        if _wants_late(m, sel, n, options):
            m2, by2, why2 = _staged_match(expr, late)
            if m2 == Match.NONE:
                sel, by, why = Selection.none(), by2, why2
            elif m2 == Match.ALL:
                sel, by, why = Selection.everything(n), by2, why2
        if warnings is not None:
            warnings += ev.warnings
        final = (
            Match.NONE
            if sel.maybe.is_empty
            else (Match.ALL if sel.all.count() == n else Match.SOME)
        )
        if final != Match.ALL:
            ev.leave_hits(file_preds)
        reads = _reads(pf, rg, read_cols, sel, options) if not sel.maybe.is_empty else ()
        plans.append(RowGroupPlan(rg, n, final, by, why, sel.maybe, sel.all, reads))
    if warnings is not None and region is not None:
        warnings += region.warnings[seen:]  # blobs refused while planning this file
    return FilePlan(pf.path, pf.num_rows, tuple(plans), partition=partition)


_RANGES = frozenset({LeafOp.LT, LeafOp.LE, LeafOp.GT, LeafOp.GE})


def dictionary_can_tell(pf: ParquetFile, rg: int, pred: BoundPredicate) -> bool:
    """Whether the chunk's dictionary can answer ``pred`` better than its statistics.

    A range leaf is answered from the entries' smallest and largest values, which
    are never inside exact min/max statistics (a dictionary may hold entries the
    pages no longer use): reading, decompressing and comparing it cannot rule out
    what the statistics kept. TPC-H Q6 on the generator's file read 159
    dictionaries for nothing (0.6 of its 1.8 s of planning)."""
    if pred.op not in _RANGES or pred.leaf.index >= len(pf.schema.leaves):
        return True
    st = row_group_statistics(pf, rg, pred.leaf)
    if st is None:
        return True
    b = st.bounds
    return not (b.usable and b.min is not None and b.max is not None
                and (bool(b.min_exact and b.max_exact)
                     or pred.value_type.kind not in (Kind.STRING, Kind.BINARY)))


# Median share of a container's value range its parts' min..max span, from which the
# parts count as unclustered: a page then rules out no more than its row group.
UNCLUSTERED_SPAN = 0.5


_UNKNOWN = object()


def page_index_futile(pf: ParquetFile, leaf: LeafColumn) -> str | None:
    """Why the page index of ``leaf`` cannot narrow the row groups its statistics
    kept, as the file's last plan decided (None: it may, or not decided yet).

    A page holds a slice of its row group's rows. When the row groups' min..max
    each span most of the file's range, the column is not clustered by row order
    (:func:`_unclustered_row_groups`, from the footer); one row group's column index
    then tells whether its pages are as wide as it is (:func:`_unclustered_pages`,
    read in the planner's first wave). If they are, no page rules out more than its
    row group did, and the other row groups' column indexes are neither fetched nor
    parsed: TPC-H Q6 on the generator's file parsed 159 of them for nothing (0.6 s).
    Row groups that declare the leaf as their sort column,
    page-scope embedded indexes and files of one row group keep the page level."""
    got = pf.derived.get(("page_index_futile", leaf.index))
    return got if isinstance(got, str) else None


def _decide_suspects(pf: ParquetFile, suspects: dict[int, str], undecided: Sequence[int],
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


def _unclustered_row_groups(pf: ParquetFile, leaf: LeafColumn, region: Region | None
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
    pi = _page_index(pf, sample, leaf.index, [])
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


def _bloom_block_ranges(
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


def _early_stages(
    ev: _RowGroupEvidence, options: PlanOptions, on_partition: bool, has_region: bool
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


def _wants_late(m: Match, sel: Selection, n: int, options: PlanOptions) -> bool:
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


def _only(
    source: Callable[[BoundPredicate], Evidence | None], cols: frozenset[int]
) -> Callable[[BoundPredicate], Evidence | None]:
    """``source`` for the leaves of ``cols`` only."""
    def answer(pred: BoundPredicate) -> Evidence | None:
        return source(pred) if pred.leaf.index in cols else None
    return answer


def _predictable_blooms(
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


def _dictionary_ranges(
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
        if all(_has_hits(pf, rg, col, p) for p in wanted if p.leaf.index == col):
            continue  # answered by an earlier plan's entries: nothing to read
        ext = pf.dictionary_extent(rg, col)
        if ext is not None and ext[1] <= MAX_DICTIONARY_BYTES:
            out.append((col, ext))
    return out


def _bloom_ranges(
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


def _page_level(
    pf: ParquetFile, rg: int, expr: BoundExpr, ev: _RowGroupEvidence, n: int, by: str, why: str,
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
            return _selection_of(known, n)
        if col in futile:
            return Selection.unknown(n)
        if col not in indexes:
            indexes[col] = _page_index(pf, rg, col, ev.warnings)
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
            key: Any = (rg, col, pred.leaf.name, pred.value_type, pred.op, pred.values,
                        ev.region is not None)
            known_sel = cache.get(key)
        except TypeError:  # an unhashable literal: not kept
            key, known_sel = None, None
        if known_sel is not None:
            return known_sel
        matches = pi.matching_pages(pred.op, pred.keys)
        if ev.region is not None:
            matches = _with_page_blobs(pf, ev.region, pred, rg, matches)
        found = pi.rows_for(matches)
        if key is not None:
            if len(cache) >= _PAGE_SELECTIONS:
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


def _has_column_index(pf: ParquetFile, rg: int, cols: Sequence[int]) -> bool:
    """Whether the page level can narrow this row group: without a ColumnIndex a
    leaf's pages are all unknown, and the footer's answer (SOME) stands."""
    return any(pf.column_chunk(rg, c).column_index_offset is not None for c in cols)


def _page_index(pf: ParquetFile, rg: int, col: int, warnings: list[str]) -> PageIndex | None:
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


def _probe_ranges(region: Region, scope: Scope, expr: BoundExpr,
                  units: Sequence[tuple[int | None, int | None]]) -> list[tuple[int, int]]:
    """What looking the = / IN values of ``expr`` up in the units' probed embedded
    Bloom filters reads (see ``Region.probe_ranges``)."""
    out: list[tuple[int, int]] = []
    if not units:
        return out
    for pred in leaves(expr):
        hashes = bloom_hashes(pred)
        if hashes:
            out += region.probe_ranges(scope, pred.leaf.name, units, hashes)
    return out


# Per-file page-blob answers kept (see _with_page_blobs).
_PAGE_BLOB_ANSWERS = 1024
# Per-leaf page-level selections kept per file (see _page_level).
_PAGE_SELECTIONS = 4096


def _with_page_blobs(
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
                    pred.values, np.asarray(matches).tobytes())
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
        if len(cache) >= _PAGE_BLOB_ANSWERS:
            # The oldest goes; a race with another thread only delays that.
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                del cache[next(iter(cache))]
        cache[key] = result.copy()
    return result


def _reads(
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
