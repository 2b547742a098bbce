"""The evidence of one row group, level by level, fetched lazily: partition values,
footer statistics, row-group blobs of the embedded region, the dictionary page and
the Bloom filter (``RowGroupEvidence``). Each answers NONE / SOME / ALL for a
predicate leaf; anything unusable answers SOME.

Dictionary answers are kept with the file (within ``io.cache.DICTIONARY_EVIDENCE``)
and the entries an ``=`` / ``IN`` hit are left for the scan (``dictionary_hits``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pqindex.errors import CorruptFileError, PqIndexError
from pqindex.expr.bind import BoundPredicate
from pqindex.format.checksum import check_page
from pqindex.format.file import ParquetFile
from pqindex.format.match import LeafOp, Match
from pqindex.format.plain import decompress, plain_entries
from pqindex.format.schema import PageType
from pqindex.format.structs import PageHeader
from pqindex.format.thrift import ThriftError, decode
from pqindex.format.value_type import Kind
from pqindex.indexes.base import Scope
from pqindex.indexes.distinct import DistinctEvidence
from pqindex.indexes.evidence import (
    BloomEvidence,
    ConstantEvidence,
    DictionaryEvidence,
    Evidence,
)
from pqindex.indexes.region import Region
from pqindex.io.cache import DICTIONARY_EVIDENCE
from pqindex.plan.access import PlanOptions
from pqindex.plan.file_level import row_group_statistics

__all__ = ["MAX_DICTIONARY_BYTES", "MAX_DICTIONARY_VALUES", "AllOf", "KnownHits", "LazyHits",
           "RowGroupEvidence", "dictionary_can_tell", "dictionary_hits", "has_hits",
           "keep_dictionary"]

# A dictionary larger than this is not worth reading to prune one row group.
MAX_DICTIONARY_BYTES = 1 << 20
MAX_DICTIONARY_VALUES = 100_000


class RowGroupEvidence:
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
        return AllOf(evs) if evs else None

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
                return KnownHits(pred, len(known[0]), known[1],
                                  stats.null_count if stats is not None else None)
            else:
                try:
                    ev = self._read_dictionary(pred, cmd.num_values)
                except PqIndexError as e:
                    self.warnings.append(f"dictionary of {pred.leaf.name!r} not used: {e}")
                else:
                    keep_dictionary(pf, key, ev)
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
        hits: np.ndarray | LazyHits | None
        if (self.pf.derived.get(("dictionary_evidence", self.rg, col, p.value_type)) is d
                and d.can_hit(p)):
            # The file keeps the evidence: the positions are worked out if a scan asks
            # (a small file's row groups read whole never do).
            hits = LazyHits(d, p)
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


def keep_dictionary(pf: ParquetFile, key: tuple[Any, ...], ev: Evidence | None) -> None:
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
    (``RowGroupEvidence.leave_hits``). Compared by value: a predicate bound again
    for the next query finds them."""
    got = pf.derived.get(("dictionary_hits", rg, col))
    if got is None or got[0] != expr:
        return None
    pred, hits, size = got
    if isinstance(hits, LazyHits):
        found = hits.evidence.hits(hits.pred)
        if found is None:  # can_hit said otherwise: not expected
            return None
        pf.derived[("dictionary_hits", rg, col)] = (pred, found, size)
        return found, size
    return hits, size


def has_hits(pf: ParquetFile, rg: int, col: int, expr: object) -> bool:
    """Whether :func:`dictionary_hits` has an answer, without working it out."""
    got = pf.derived.get(("dictionary_hits", rg, col))
    return got is not None and got[0] == expr


class LazyHits:
    """Positions of the entries a kept dictionary evidence matches, not yet found."""

    __slots__ = ("evidence", "pred")

    def __init__(self, evidence: DictionaryEvidence, pred: BoundPredicate) -> None:
        self.evidence = evidence
        self.pred = pred


@dataclass(frozen=True)
class KnownHits:
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


class AllOf:
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
