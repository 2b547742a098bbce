"""The public, typed plan of a dataset scan: ``Dataset.plan(columns, where)``.

What the planner decided for every file (kept or skipped, and by what), per row
group the rows that may match and those that surely do, and why; plus what a
reader of the plan needs to execute it (the opened file, its Arrow schema, the
predicate bound to it). ``dataset/aggregate.py``, ``spark/reading.py`` and tests
use this instead of the dataset's private members.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pqindex.expr.bind import BoundExpr
from pqindex.format.file import ParquetFile
from pqindex.format.row_ranges import RowRanges
from pqindex.plan.planner import FilePlan, RowGroupPlan
from pqindex.scan.executor import ScanOptions
from pqindex.scan.report import ScanReport

__all__ = ["DatasetPlan", "FileEntry"]


@dataclass(frozen=True)
class FileEntry:
    """One file of the dataset and what the planner decided for it."""

    path: str
    partition: dict[str, Any]  # hive key -> typed value (partition columns only)
    file: ParquetFile | None  # None when partition values pruned it (never opened)
    arrow_schema: pa.Schema | None  # the Arrow schema pyarrow gives this file
    access: FilePlan | None  # the planner's output; None when never opened
    predicate: BoundExpr | None  # the predicate bound to this file's schema

    @property
    def skipped_by(self) -> str | None:
        """"partition", "row groups" (every row group ruled out) or None (kept)."""
        if self.access is None:
            return "partition"
        if self.access.skipped:
            return self.access.skipped_by or "row groups"
        return None

    @property
    def row_groups(self) -> tuple[RowGroupPlan, ...]:
        """Every row group's plan (empty for a file never opened)."""
        return () if self.access is None else self.access.row_groups

    @property
    def row_groups_kept(self) -> list[int]:
        """Indexes of the row groups that may hold matching rows."""
        return [rg.index for rg in self.row_groups if not rg.skipped]

    @property
    def row_ranges(self) -> dict[int, RowRanges]:
        """Per kept row group, the rows (row-group relative) that may match."""
        return {rg.index: rg.maybe for rg in self.row_groups if not rg.skipped}

    @property
    def reasons(self) -> dict[int, str]:
        """Per row group, which level decided and why."""
        return {rg.index: f"{rg.decided_by}: {rg.reason}" for rg in self.row_groups}


@dataclass(frozen=True)
class DatasetPlan:
    """The plan of one scan over a dataset."""

    files: tuple[FileEntry, ...]
    fields: tuple[str, ...]  # output columns, in order
    schema: pa.Schema  # the output schema (unified across the files read)
    partition_types: dict[str, pa.DataType]  # partition column -> Arrow type
    scan_options: ScanOptions
    report: ScanReport  # planning counters (files / row groups skipped, by level)
    # What made it, so ``Dataset.scan(plan=...)`` reads it without planning again.
    source: Any = field(default=None, repr=False, compare=False)

    @property
    def kept(self) -> list[FileEntry]:
        """The files with row groups to read."""
        return [f for f in self.files if f.skipped_by is None]
