"""The access plan of a file, the planner's only output, and the options that pick
its levels: what the scanner reads (``FilePlan``, ``RowGroupPlan``, ``ColumnRead``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pqindex.format.match import Match
from pqindex.format.row_ranges import RowRanges

__all__ = ["ColumnRead", "FilePlan", "PlanOptions", "RowGroupPlan"]


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
    # What each stage of the planner did, in order, and where it stopped and why
    # (explain prints it; not part of the plan's identity).
    stages: tuple[str, ...] = field(default=(), compare=False)

    @property
    def skipped(self) -> bool:
        return self.skipped_by is not None or all(rg.skipped for rg in self.row_groups)
