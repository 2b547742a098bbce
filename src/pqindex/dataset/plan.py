"""The public, typed plan of a dataset scan: ``Dataset.plan(columns, where)``.

What the planner decided for every file (kept or skipped, and by what), per row
group the rows that may match and those that surely do, and why; plus what a
reader of the plan needs to execute it (the opened file, its Arrow schema, the
predicate bound to it). ``dataset/aggregate.py``, ``spark/reading.py`` and tests
use this instead of the dataset's private members.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
import pyarrow as pa

from pqindex.expr.bind import BoundExpr
from pqindex.format.file import ParquetFile
from pqindex.format.row_ranges import RowRanges
from pqindex.plan.planner import FilePlan, RowGroupPlan
from pqindex.scan.executor import ScanOptions
from pqindex.scan.report import ScanReport

__all__ = ["DatasetPlan", "FileEntry", "PlanFiles"]


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


class _BulkEntry(FileEntry):
    """An entry of a file planned in bulk: its path and partition values; the footer,
    schema, access plan and bound predicate are looked up when first asked for."""

    def __init__(self, path: str, partition: dict[str, Any], files: PlanFiles,
                 i: int) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "partition", partition)
        object.__setattr__(self, "_at", (files, i))

    def __getattr__(self, name: str) -> Any:
        if name not in ("file", "arrow_schema", "access", "predicate"):
            raise AttributeError(name)
        files, i = self.__dict__["_at"]
        full = files.planned(i)
        for k in ("file", "arrow_schema", "access", "predicate"):
            object.__setattr__(self, k, getattr(full, k))
        return getattr(full, name)


class PlanFiles(Sequence[FileEntry]):
    """The entries of a plan with files planned in bulk (``planning.Deferred``: every
    row of each matches by the manifest's statistics), in the dataset's order. An
    entry is made when first asked for; asking for one of the bulk-planned files
    plans all of them at once (their footers read on the planning pool), so a plan
    that keeps every file of a large lake is made without reading a footer."""

    def __init__(self, plans: Any, entry: Callable[[Any], FileEntry]) -> None:
        self._plans = plans  # planning.Plans with ``deferred`` set
        self._entry = entry
        self._bulk: np.ndarray[Any, Any] = plans.deferred.positions
        self._n = len(plans.deferred.chosen)
        self._now = plans.every_file(resolve=False)  # the other files' outcomes
        self._all: list[Any] | None = None  # every outcome, once the bulk is planned
        self._made: dict[int, FileEntry] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> FileEntry: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[FileEntry]: ...

    def __getitem__(self, i: int | slice) -> FileEntry | Sequence[FileEntry]:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(self._n)))
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        got = self._made.get(i)
        if got is not None:
            return got
        at = int(np.searchsorted(self._bulk, i))
        if self._all is not None:
            got = self._entry(self._all[i])
        elif at < len(self._bulk) and self._bulk[at] == i:
            # Its path and partition now; the rest once asked for (_BulkEntry).
            known = self._entry((self._plans.deferred.chosen[i], None, None, None))
            got = _BulkEntry(known.path, known.partition, self, i)
        else:
            got = self._entry(self._now[i - at])
        self._made[i] = got
        return got

    def planned(self, i: int) -> FileEntry:
        """Entry ``i`` with its access plan: the bulk-planned files planned (once)."""
        with self._lock:
            if self._all is None:
                self._all = self._plans.resolved().every_file()
        return self._entry(self._all[i])

    def __iter__(self) -> Iterator[FileEntry]:
        return (self[i] for i in range(self._n))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class DatasetPlan:
    """The plan of one scan over a dataset."""

    files: Sequence[FileEntry]  # a tuple, or PlanFiles (files planned in bulk)
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
