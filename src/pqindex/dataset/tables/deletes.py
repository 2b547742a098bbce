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
* a row group whose rows are all deleted is skipped.

Pruning stays correct: it only ever keeps rows a predicate may match; taking deleted
rows out of what it kept cannot drop a live matching row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from pqindex.errors import CorruptFileError
from pqindex.format.file import ParquetFile
from pqindex.format.match import Match
from pqindex.plan.planner import FilePlan, RowGroupPlan
from pqindex.scan.cut import ranges_from_indices

__all__ = ["DeletedRows", "drop_deleted"]

# Per data file (the dataset's path of it): its deleted row positions, sorted, unique.
DeletedRows = Mapping[str, npt.NDArray[np.int64]]


def _first_rows(pf: ParquetFile) -> npt.NDArray[np.int64]:
    """Each row group's first row's position in the file, and the file's row count last."""
    counts = [rg.num_rows or 0 for rg in pf.metadata.row_groups or []]
    return np.concatenate(([0], np.cumsum(counts, dtype=np.int64))).astype(np.int64)


def drop_deleted(plan: FilePlan, pf: ParquetFile, deleted: npt.NDArray[np.int64],
                 by: str) -> FilePlan:
    """``plan`` without the rows at ``deleted`` positions of the file (``by``: what
    deleted them, for the plan's reasons: "deletion vector", "position deletes")."""
    if not deleted.size:
        return plan
    firsts = _first_rows(pf)
    total = int(firsts[-1])
    if int(deleted[-1]) >= total or int(deleted[0]) < 0:
        raise CorruptFileError(
            f"the table's {by} deletes row {int(deleted[-1])}, the file has {total} rows: "
            "it does not belong to this file", path=pf.path)
    groups: list[RowGroupPlan] = []
    for rgp in plan.row_groups:
        lo = int(firsts[rgp.index])
        a, b = np.searchsorted(deleted, [lo, lo + rgp.num_rows])
        if a == b:
            groups.append(rgp)
            continue
        gone = ranges_from_indices(deleted[a:b] - lo)
        maybe, sure = rgp.maybe - gone, rgp.all - gone
        match = rgp.match
        if maybe.is_empty:
            match = Match.NONE
        elif match == Match.ALL and sure.count() < rgp.num_rows:
            match = Match.SOME
        reason = f"{rgp.reason}; {b - a} rows deleted by the {by}".lstrip("; ")
        decided_by = by if maybe.is_empty and not rgp.maybe.is_empty else rgp.decided_by
        groups.append(dataclasses.replace(rgp, maybe=maybe, all=sure, match=match,
                                          reason=reason, decided_by=decided_by))
    return dataclasses.replace(plan, row_groups=tuple(groups))
