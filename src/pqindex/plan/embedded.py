"""The embedded file-level indexes stage: the file's embedded index region (read once
per file), what its file-scope blobs and the partition values say of the whole file,
and what probing its Bloom filters reads (one wave, before the row-group levels)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from pqindex.expr.bind import BoundExpr, BoundPredicate
from pqindex.format.file import ParquetFile
from pqindex.format.match import Match
from pqindex.format.row_ranges import RowRanges
from pqindex.indexes.base import Scope
from pqindex.indexes.evidence import ConstantEvidence, bloom_hashes
from pqindex.indexes.region import Region, read_region
from pqindex.plan.access import FilePlan, PlanOptions, RowGroupPlan
from pqindex.plan.row_group_evidence import AllOf
from pqindex.plan.tree import evaluate, leaves

__all__ = ["EmbeddedFileStage", "embedded_file_match", "embedded_file_stage", "file_region",
           "probe_ranges"]


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


def embedded_file_match(pf: ParquetFile, expr: BoundExpr, region: Region | None,
                partition: dict[str, Any]) -> Match:
    """What file-scope evidence (embedded file indexes, partition values) says."""
    n = len(pf.schema.leaves)

    def leaf_match(pred: BoundPredicate) -> Match:
        if pred.leaf.index >= n:
            return Match(ConstantEvidence(partition.get(pred.leaf.name)).match(pred))
        if region is None:
            return Match.SOME
        evs = region.evidence(Scope.FILE, pred.leaf.name, leaf=pred.leaf)
        return AllOf(evs).match(pred) if evs else Match.SOME

    return evaluate(expr, leaf_match)


def probe_ranges(region: Region, scope: Scope, expr: BoundExpr,
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


@dataclass(frozen=True)
class EmbeddedFileStage:
    """The embedded file-level stage's outcome: the region (None: not read, or the
    file has none), how many of its warnings were there before this plan, and the
    plan of a file its file-scope blobs rule out (else None)."""

    region: Region | None
    warnings_seen: int
    skipped: FilePlan | None


def embedded_file_stage(
    pf: ParquetFile, expr: BoundExpr, options: PlanOptions, partition: dict[str, Any],
    row_groups: Collection[int] | None, warnings: list[str] | None,
) -> EmbeddedFileStage:
    """Read the embedded region where a predicate leaf is on a file column, probe its
    Bloom filters of the file and of every row group in one wave, and rule the file
    out where its file-scope blobs (or the partition values) say no row matches."""
    n_leaves = len(pf.schema.leaves)
    region_warnings: list[str] = []
    # No predicate on a column of the file: nothing for the region to answer, no read.
    wants_region = options.embedded and any(
        p.leaf.index < n_leaves for p in leaves(expr))
    region = file_region(pf, region_warnings) if wants_region else None
    if warnings is not None:
        warnings += region_warnings
    if region is None:
        return EmbeddedFileStage(None, 0, None)
    seen = len(region.warnings)
    # The predicate columns' sub-directories, in one request (format 3.0).
    region.open_columns(p.leaf.name for p in leaves(expr) if p.leaf.index < n_leaves)
    # Embedded Bloom filters of the file and of every row group are probed one
    # block per value: their headers and blocks in one wave, before either level.
    units: list[tuple[int | None, int | None]] = [
        (rg, None) for rg in range(pf.num_row_groups)
        if (row_groups is None or rg in row_groups) and pf.row_group_rows(rg)]
    pf.prefetch([], exact=probe_ranges(region, Scope.FILE, expr, [(None, None)])
                + probe_ranges(region, Scope.ROW_GROUP, expr, units))
    if embedded_file_match(pf, expr, region, partition) != Match.NONE:
        return EmbeddedFileStage(region, seen, None)
    if warnings is not None:  # blobs refused while planning: this scan reports them
        warnings += region.warnings[seen:]
    skipped = tuple(
        RowGroupPlan(rg, pf.row_group_rows(rg), Match.NONE, "embedded index",
                     "file-level embedded index: no row matches", RowRanges.empty(),
                     RowRanges.empty())
        for rg in range(pf.num_row_groups)
    )
    return EmbeddedFileStage(region, seen, FilePlan(
        pf.path, pf.num_rows, skipped, partition=partition,
        stages=("embedded file-level index: no row matches; stopped",)))
