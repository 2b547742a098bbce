"""Rows a table deleted without rewriting their file, taken out of each file's plan.

Delta deletion vectors (and Iceberg position deletes) name deleted rows by their
position in the data file: row ``p`` is the ``p``-th row of the file, counted across
its row groups. A file's deleted positions (sorted, unique) are mapped onto its row
groups by their first-row offsets, and every planned row group loses them from both
its ``maybe`` and its ``all`` rows. Every reader of a plan (the scan, aggregates,
``head``, ``explain``) then works on the remaining rows only:

* a row group whose every row matched is no longer "all" once some are deleted, so
  aggregates do not answer it from footer statistics (a deleted row may hold the
  minimum) and the scan does not read it whole;
* a row group whose rows are all deleted is skipped;
* a row group whose every live row matches is still read whole by pyarrow, and its
  deleted rows filtered out after (``Holes.keep_mask``): thousands of scattered
  holes would otherwise cut its reads into as many ranges.

Pruning stays correct: it only ever keeps rows a predicate may match; taking deleted
rows out of what it kept cannot drop a live matching row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pqindex.errors import CorruptFileError
from pqindex.format.file import ParquetFile
from pqindex.format.match import Match
from pqindex.format.row_ranges import RowRanges
from pqindex.plan.planner import FilePlan, RowGroupPlan
from pqindex.scan.cut import ranges_from_indices

__all__ = ["DeletedRows", "Holes", "drop_deleted", "row_group_holes"]

# Per data file (the dataset's path of it): its deleted row positions, sorted, unique.
DeletedRows = Mapping[str, npt.NDArray[np.int64]]


@dataclass(frozen=True)
class Holes:
    """One row group's deleted rows (positions within the row group)."""

    positions: npt.NDArray[np.int64]  # sorted
    gone: RowRanges
    live: RowRanges  # the row group's other rows

    def keep_mask(self, n: int) -> npt.NDArray[np.bool_]:
        keep = np.ones(n, np.bool_)
        keep[self.positions] = False
        return keep


def row_group_holes(pf: ParquetFile, deleted: npt.NDArray[np.int64], by: str
                    ) -> dict[int, Holes]:
    """The file's deleted ``positions`` per row group that has some, mapped by the row
    groups' first-row offsets; CorruptFileError when one lies past the file's end."""
    counts = [rg.num_rows or 0 for rg in pf.metadata.row_groups or []]
    firsts = np.concatenate(([0], np.cumsum(counts, dtype=np.int64))).astype(np.int64)
    total = int(firsts[-1])
    if deleted.size and (int(deleted[-1]) >= total or int(deleted[0]) < 0):
        raise CorruptFileError(
            f"the table's {by} deletes row {int(deleted[-1])}, the file has {total} rows: "
            "it does not belong to this file", path=pf.path)
    out: dict[int, Holes] = {}
    cuts = np.searchsorted(deleted, firsts)
    for rg, n in enumerate(counts):
        a, b = int(cuts[rg]), int(cuts[rg + 1])
        if a == b:
            continue
        local = deleted[a:b] - firsts[rg]
        gone = ranges_from_indices(local)
        out[rg] = Holes(local, gone, RowRanges.full(n) - gone)
    return out


def _without(rows: RowRanges, holes: Holes, n: int) -> RowRanges:
    if len(rows) == 1 and rows.count() == n:
        return holes.live  # every row (the common case): made once per row group
    return rows - holes.gone


def drop_deleted(plan: FilePlan, holes: Mapping[int, Holes], by: str) -> FilePlan:
    """``plan`` without the rows of ``holes`` (``row_group_holes``; ``by``: what deleted
    them, for the plan's reasons: "deletion vector", "position deletes")."""
    if not holes:
        return plan
    groups: list[RowGroupPlan] = []
    for rgp in plan.row_groups:
        h = holes.get(rgp.index)
        if h is None:
            groups.append(rgp)
            continue
        maybe = _without(rgp.maybe, h, rgp.num_rows)
        sure = _without(rgp.all, h, rgp.num_rows)
        match = rgp.match
        if maybe.is_empty:
            match = Match.NONE
        elif match == Match.ALL and sure.count() < rgp.num_rows:
            match = Match.SOME
        reason = f"{rgp.reason}; {h.positions.size} rows deleted by the {by}".lstrip("; ")
        decided_by = by if maybe.is_empty and not rgp.maybe.is_empty else rgp.decided_by
        groups.append(dataclasses.replace(rgp, maybe=maybe, all=sure, match=match,
                                          reason=reason, decided_by=decided_by))
    return dataclasses.replace(plan, row_groups=tuple(groups))
