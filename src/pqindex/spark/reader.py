"""The read side of the ``"pqindex"`` data source: Spark tasks that read through pqindex.

The driver plans the query with pqindex (hive partitions, footer statistics,
embedded file- and row-group-level indexes, page index, dictionaries, Bloom
filters); the kept row groups become :class:`ReadTask` partitions of about
:data:`TASK_BYTES` of kept pages each, a task's row groups of one file one
:class:`FileUnit` (path, hive values, kept row-group indexes). ``where`` and ``columns`` travel as
data source options; the filters of the query itself reach the reader through
Spark's filter pushdown (``pushFilters``, Spark 4.1+, see :mod:`pqindex.spark.filters`):
the ones pqindex applies exactly are ANDed with ``where``, the others go back to
Spark, which applies them after the scan. A task re-plans only its file, restricted to its row groups
(``pqindex.dataset(..., row_groups=)``), reads only the pages that plan keeps
and yields Arrow batches typed as Spark's schema for the columns.

The rows a task yields are pqindex's matching rows; ``pqindex.spark.read``
applies ``where`` again in Spark, so Spark's semantics decide the result and
pqindex only ever removes rows that cannot match.

A pushed filter is the state of one reader, but PySpark 4.3 does not keep a reader
to one scan: the JVM stores the last pushdown's reader and partitions on the data
source object of the relation (``PythonDataSourceV2.setReadInfo``) and every later
scan of that relation that pushes nothing takes them (``getOrCreateReadInfo``), as
do all scans of one query (both sides of a self-join, a union of two filters of one
DataFrame), which read them only when they execute. No Python call is made for such
a scan, so the reader cannot tell: :data:`GUARD` makes every query of a
:func:`~pqindex.spark.reading.frame` push, which covers one scan per query; several
scans of one relation in one query get the last scan's rows (see
``tests/test_spark_pushdown.py``, the limitation pinned there).

Python data sources get no column pruning: every task yields every column of
the schema. pqindex reads the predicate's pages first and the other columns'
pages only where rows match, so an unselected column costs its matching pages.

Options (all strings): ``path``; ``where``; ``columns`` (JSON list, the columns
to read, predicate columns included); ``storage_options`` (JSON object, or
``spark.secrets.hide``'s redacted encoding);
``units`` (JSON, the driver's plan: the tasks' partitions, so the planning
process does not plan again); ``task_bytes`` (:data:`TASK_BYTES`: a task's kept pages);
``parallelism`` (Spark's default parallelism, the tasks a small plan is split into;
default: the planning process's cores).

A plan keeping few row groups but many pages (TPC-H Q6 at sf 1: 46 pages of one
row group) would be one task on one core: a row group whose kept pages exceed a
task's share is split at page boundaries into row ranges (``FileUnit.ranges``),
each task reading only the pages of its rows (:func:`restrict`).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from pqindex.errors import UserInputError
from pqindex.expr.nodes import Expr, and_
from pqindex.expr.sql import parse_where
from pqindex.format.row_ranges import RowRanges
from pqindex.spark.secrets import reveal

__all__ = ["GUARD", "FileUnit", "PqIndexReader", "ReadTask", "restrict", "tasks_of"]

# The column of a guarded read (option ``guard``, see :func:`pqindex.spark.reading.frame`):
# constant 1, and every query of a guarded DataFrame filters on ``IS NOT NULL`` of it, so
# Spark pushes at least that filter to every query. PySpark 4.3 keeps the partitions and
# reader of the last filter pushdown on the data source object of a DataFrame's relation
# (PythonDataSourceV2.setReadInfo) and reuses them for a later query of the same relation
# that has no filter it can push: without the guard, that query would get the rows of the
# earlier query's filters.
GUARD = "__pqindex_query"

# A task reads kept row groups (of one or more files) until their kept pages reach this
# many bytes: a selective read (a lookup, an absent value, a few pages) is one task, and
# its one Python worker; a larger one is split by row group across the executors' cores.
# Measured on TPC-H sf 1 (docs/benchmarks.md, spark-native): a task costs tens of ms in
# Spark and its Python worker before its first byte.
TASK_BYTES = 8 * 1024 * 1024

# A plan smaller than ``parallelism`` tasks of TASK_BYTES is spread over the cores, but
# no task gets less than this many bytes of kept pages: below it a task's start costs
# more than the core it adds (a selective read stays one task).
SPLIT_MIN_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class FileUnit(InputPartition):
    """One task's share: a file, the hive values its path carries, kept row groups."""

    path: str
    partition: tuple[tuple[str, str], ...]
    row_groups: tuple[int, ...]
    partition_types: tuple[tuple[str, str], ...] = ()  # hive key -> "int64" / "date32" / "string"
    # (row group, first row, end row): only these rows of that row group (a row group
    # split across tasks); a row group named by none is read whole.
    ranges: tuple[tuple[int, int, int], ...] = ()

    def to_json(self) -> list[Any]:
        return [self.path, [list(kv) for kv in self.partition], list(self.row_groups),
                [list(kv) for kv in self.partition_types], [list(r) for r in self.ranges]]

    @classmethod
    def from_json(cls, v: Sequence[Any]) -> FileUnit:
        return cls(str(v[0]), tuple((str(k), str(x)) for k, x in v[1]),
                   tuple(int(i) for i in v[2]), tuple((str(k), str(t)) for k, t in v[3]),
                   tuple((int(g), int(a), int(b)) for g, a, b in (v[4] if len(v) > 4 else ())))


@dataclass(frozen=True)
class ReadTask(InputPartition):
    """One task's file shares, read one after another."""

    units: tuple[FileUnit, ...]

    def to_json(self) -> list[Any]:
        return [u.to_json() for u in self.units]

    @classmethod
    def from_json(cls, v: Sequence[Any]) -> ReadTask:
        return cls(tuple(FileUnit.from_json(u) for u in v))


def task_share(total: int, parallelism: int, task_bytes: int = TASK_BYTES) -> int:
    """Kept bytes of a row group's piece for a plan keeping ``total``: the plan spread
    over ``parallelism`` cores in whole waves of tasks of at most twice ``task_bytes``
    (one wave where it fits: a task's start and its re-planning of the file are paid
    once per core), never below :data:`SPLIT_MIN_BYTES`."""
    p = max(1, parallelism)
    waves = max(1, -(-total // (2 * p * task_bytes)))
    return max(min(task_bytes, SPLIT_MIN_BYTES), -(-total // (waves * p)))


def page_cuts(pf: Any, rg: Any, pieces: int) -> list[int]:
    """Rows at which to cut row group plan ``rg`` into about ``pieces`` row ranges of
    equally many kept pages: first rows of kept pages of its largest read column (whose
    pages the others' match in pqindex's files; a page of another column a cut falls
    into is read by both tasks). Empty when it has no offset index to cut by."""
    reads = [r for r in rg.reads if r.pages]
    if pieces < 2 or not reads:
        return []
    best = max(reads, key=lambda r: r.bytes)
    oi = pf.offset_index(rg.index, best.column) if pf is not None else None
    if oi is None or not oi.page_locations:
        return []
    firsts = [loc.first_row_index or 0 for loc in oi.page_locations]
    pages = sorted(p for p in best.pages if 0 <= p < len(firsts))
    pieces = min(pieces, len(pages))
    cuts = sorted({firsts[pages[(i * len(pages)) // pieces]] for i in range(1, pieces)})
    return [c for c in cuts if 0 < c < rg.num_rows]


def tasks_of(dplan: Any, discovery: Any, task_bytes: int = TASK_BYTES,
             parallelism: int = 1) -> list[ReadTask]:
    """The tasks of a :class:`~pqindex.dataset.plan.DatasetPlan`: its kept row groups in
    order, a new task where the next would take the kept pages (the planner's upper
    bound) past ``task_bytes`` (less for a plan smaller than a wave of them:
    :func:`task_share`); a task's row groups of one file are one share. A row group
    of kept pages well above :func:`task_share` is cut into row ranges at page
    boundaries (:func:`page_cuts`), each its own piece."""
    raw = {df.path: df.partition for df in discovery.files}
    types = tuple((k, str(discovery.partition_types.get(k, "string")))
                  for k in discovery.partition_columns)
    kept = [(entry, rg, sum(r.bytes for r in rg.reads))
            for entry in dplan.kept for rg in entry.row_groups if not rg.skipped]
    share = task_share(sum(n for _, _, n in kept), parallelism, task_bytes)
    group = min(share, task_bytes)  # whole row groups share tasks up to this
    # (path, row group, row range or None: whole, bytes)
    pieces: list[tuple[str, int, tuple[int, int] | None, int]] = []
    for entry, rg, nbytes in kept:
        cuts = page_cuts(entry.file, rg, round(nbytes / share)) if nbytes > share else []
        if not cuts:
            pieces.append((entry.path, rg.index, None, nbytes))
            continue
        bounds = [0, *cuts, rg.num_rows]
        rows = max(1, rg.maybe.count())
        for a, b in itertools.pairwise(bounds):
            part = rg.maybe.intersection(RowRanges.from_intervals([(a, b)])).count()
            pieces.append((entry.path, rg.index, (a, b), nbytes * part // rows))
    tasks: list[list[tuple[str, list[int], list[tuple[int, int, int]]]]] = []
    size = 0
    for path, index, rows_range, nbytes in pieces:
        if not tasks or (size + nbytes > group and size > 0):
            tasks.append([])
            size = 0
        task = tasks[-1]
        if not (task and task[-1][0] == path):
            task.append((path, [], []))
        groups, ranges = task[-1][1], task[-1][2]
        if index not in groups:
            groups.append(index)
        if rows_range is not None:
            ranges.append((index, *rows_range))
        size += nbytes
    return [ReadTask(tuple(FileUnit(path, tuple(raw.get(path, ())), tuple(groups), types,
                                    _whole_ranges(groups, ranges, pieces, path))
                           for path, groups, ranges in task)) for task in tasks]


def _whole_ranges(groups: list[int], ranges: list[tuple[int, int, int]],
                  pieces: list[tuple[str, int, tuple[int, int] | None, int]],
                  path: str) -> tuple[tuple[int, int, int], ...]:
    """``ranges``, without those of a row group whose every piece is in this unit (it
    is read whole then)."""
    out = []
    for g in groups:
        mine = [(a, b) for gg, a, b in ranges if gg == g]
        every = [r for p, gg, r, _ in pieces if p == path and gg == g]
        if mine and len(mine) < len(every):
            out += [(g, a, b) for a, b in mine]
    return tuple(out)


def restrict(dplan: Any, ranges: Sequence[tuple[int, int, int]]) -> None:
    """Keep only ``ranges`` ((row group, first row, end row)) of the row groups they
    name in ``dplan``, a plan about to be scanned (``Dataset.scan(plan=)``): the scan
    reads the pages of the rows a row group plan may match (``maybe``), so a task
    reads only its rows' pages. Changes the plans the scan takes, in place."""
    import dataclasses

    by_rg: dict[int, list[tuple[int, int]]] = {}
    for g, a, b in ranges:
        by_rg.setdefault(g, []).append((a, b))
    keep = {g: RowRanges.from_intervals(iv) for g, iv in by_rg.items()}
    # The plans Dataset.scan(plan=) reads: its files' access plans (dataset/planning.py).
    files = dplan.source.plans.files
    for i, (df, of, fp, bound) in enumerate(files):
        if fp is None or not any(rg.index in keep for rg in fp.row_groups):
            continue
        rgs = tuple(dataclasses.replace(rg, maybe=rg.maybe & keep[rg.index],
                                        all=rg.all & keep[rg.index])
                    if rg.index in keep else rg for rg in fp.row_groups)
        files[i] = (df, of, dataclasses.replace(fp, row_groups=rgs), bound)


def spark_arrow_schema(schema: Any) -> pa.Schema:
    """The Arrow schema Spark expects batches of a Python data source to have."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def as_spark(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` with ``target``'s columns, names and types (Spark checks them exactly)."""
    cols = []
    for f in target:
        col = batch.column(f.name)
        if col.type != f.type:
            try:
                col = col.cast(f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise UserInputError(
                    f"column {f.name!r} of type {col.type} does not convert to Spark's "
                    f"{f.type}: {e}", column=f.name) from None
        cols.append(col)
    return pa.RecordBatch.from_arrays(cols, schema=target)


class PqIndexReader(DataSourceReader):
    """Reads the rows of ``where`` in ``columns`` through pqindex, one file share per task."""

    def __init__(self, options: dict[str, str], schema: Any) -> None:
        path = options.get("path")
        if not path:
            raise UserInputError("the pqindex data source needs a path: .load(path)")
        self.path = path
        self.where = options.get("where") or None
        self.columns: list[str] = (json.loads(options["columns"]) if "columns" in options
                                   else [c for c in schema.fieldNames() if c != GUARD])
        self.guarded = GUARD in schema.fieldNames()
        self.storage_options: dict[str, Any] = reveal(options.get("storage_options"))
        self.units_json = options.get("units")
        self.task_bytes = int(options.get("task_bytes", TASK_BYTES))
        self.parallelism = int(options.get("parallelism") or os.cpu_count() or 1)
        self.spark_schema = schema
        self.target = spark_arrow_schema(schema)
        # Set by pushFilters: the AND of the filters of this query pqindex applies, and
        # the partitions planned with them.
        self.pushed: Expr | None = None
        self.planned: list[ReadTask] | None = None

    def open(self, path: str | None = None, **kwargs: Any) -> Any:
        """The pqindex dataset this reader reads (``path``: one of its files): the one
        place a source is made from the options."""
        import pqindex

        return pqindex.dataset(path or self.path, storage_options=self.storage_options,
                               **kwargs)

    def predicate(self) -> Expr | None:
        """``where`` (read as Spark reads SQL: NaN above every number) AND the pushed
        filters (None: every row)."""
        from pqindex.spark.filters import float_columns, spark_float_order

        parts = ([spark_float_order(parse_where(self.where), float_columns(self.spark_schema))]
                 if self.where else [])
        if self.pushed is not None:
            parts.append(self.pushed)
        return and_(*parts) if parts else None

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        """Keep the filters pqindex applies exactly (see :mod:`pqindex.spark.filters`) and
        plan with them; return the others, which Spark applies after the scan."""
        from pqindex.spark.filters import split_filters

        if self.units_json is not None:  # planned on the driver already (pqindex.spark.read)
            return list(filters)
        guards = [f for f in filters if type(f).__name__ == "IsNotNull"
                  and tuple(f.attribute) == (GUARD,)]  # true of every row: nothing to do
        used, rest = split_filters([f for f in filters if f not in guards], self.spark_schema)
        while used:
            self.pushed = and_(*(e for _, e in used))
            try:
                self.planned = self._plan()
                break
            except UserInputError:
                # A filter the dataset's files cannot take (a literal their type refuses):
                # find it alone, give it back to Spark, plan with the rest.
                bad = next((i for i, (_, e) in enumerate(used) if not self._plans(e)), 0)
                rest.append(used.pop(bad)[0])
                self.pushed, self.planned = None, None
        return rest

    def _plans(self, expr: Expr) -> bool:
        self.pushed = expr
        try:
            self._plan()
        except UserInputError:
            return False
        return True

    def _plan(self) -> list[ReadTask]:
        with self.open() as ds:
            dplan = ds.plan(self.columns, self.predicate())
            disc = ds.discovery
        return tasks_of(dplan, disc, self.task_bytes, self.parallelism)

    def partitions(self) -> list[InputPartition]:
        if self.units_json is not None:
            return [ReadTask.from_json(t) for t in json.loads(self.units_json)]
        return list(self.planned if self.planned is not None else self._plan())

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ReadTask):  # Spark's stand-in when nothing is kept
            return
        from pqindex.dataset.discovery import DataFile, Discovery

        predicate = self.predicate()
        for unit in partition.units:
            types = dict(unit.partition_types)
            disc = Discovery((DataFile(unit.path, unit.partition),), tuple(types), types)
            with self.open(unit.path, discovery=disc,
                           row_groups={unit.path: unit.row_groups}) as ds:
                if unit.ranges:  # a row group split across tasks: this task's rows only
                    dplan = ds.plan(self.columns, predicate)
                    restrict(dplan, unit.ranges)
                    scan = ds.scan(plan=dplan)
                else:
                    scan = ds.scan(self.columns, predicate)
                for batch in scan.to_batches():
                    if self.guarded:
                        batch = batch.append_column(GUARD, pa.array(np.ones(batch.num_rows,
                                                                            np.int32)))
                    yield as_spark(batch, self.target)
