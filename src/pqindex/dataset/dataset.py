"""``pqindex.dataset(path)``: many files, hive partitions, parallel planning, a metadata cache.

A dataset is lazy: nothing is read until a scan or an explain needs it. Footers
are read once per file and cached for the dataset's lifetime. Files are planned
and read concurrently on threads (file I/O and pyarrow release the GIL).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pqindex.dataset.discovery import DataFile, Discovery, discover
from pqindex.dataset.plan import DatasetPlan, FileEntry
from pqindex.dataset.schema import conform, unify
from pqindex.errors import CorruptFileError, UserInputError, located, public_api
from pqindex.expr.bind import BoundExpr, BoundTrue, bind
from pqindex.expr.dnf import from_dnf
from pqindex.expr.nodes import TRUE, Expr
from pqindex.expr.sql import parse_where
from pqindex.format.file import DEFAULT_TAIL_BYTES, ParquetFile
from pqindex.format.match import Match
from pqindex.format.schema import LeafColumn, Repetition, Schema
from pqindex.format.structs import (
    ColumnOrder,
    LogicalType,
    SchemaElement,
    StringType,
    TypeDefinedOrder,
)
from pqindex.indexes.evidence import ConstantEvidence
from pqindex.io.source import IOStats
from pqindex.plan.planner import FilePlan, PlanOptions, evaluate, leaves, plan_file
from pqindex.scan.executor import (
    ScanOptions,
    ScanStats,
    pyarrow_opens_free,
    read_row_group,
    read_whole_row_groups,
)
from pqindex.scan.page_decode import arrow_schema
from pqindex.scan.report import ScanReport

__all__ = ["Dataset", "Scan", "dataset"]

Where = str | Expr | None


def _where(where: Where, filters: Sequence[Any] | None) -> Expr:
    exprs: list[Expr] = []
    if isinstance(where, str):
        if where.strip():
            exprs.append(parse_where(where))
    elif isinstance(where, Expr):
        exprs.append(where)
    elif where is not None:
        raise UserInputError(f"where must be SQL text or an expression, not {type(where).__name__}")
    if filters:
        exprs.append(from_dnf(filters))
    out: Expr = TRUE
    for e in exprs:
        out = e if out is TRUE else out & e
    return out


def _whole_runs(work: list[Any], fields: Sequence[str]) -> list[Any]:
    """Work items with each run of a file's row groups where every row matches merged
    into one item (its row-group list), which pyarrow then reads like ``read_table``."""
    out: list[Any] = []
    for item in work:
        of, plan, bound, rgp = item
        whole = (
            rgp.num_rows > 0
            and rgp.all.count() == rgp.num_rows
            and any(c.path[0] in fields for c in of.pf.schema.leaves)
            and pyarrow_opens_free(of.pf)
        )
        if not whole:
            out.append(item)
        elif out and out[-1][0] is of and isinstance(out[-1][3], list):
            out[-1][3].append(rgp.index)
        else:
            out.append((of, plan, bound, [rgp.index]))
    return out


def _count_pages(units: Sequence[tuple[ParquetFile, int, list[int]]]) -> int:
    """Data pages of the involved chunks, as far as the metadata read so far tells."""
    return sum(pf.data_page_count(rg, c) for pf, rg, cols in units for c in cols)


class _OpenFile:
    """A data file with its footer, Arrow schema and bound schema, opened once."""

    def __init__(self, df: DataFile, pf: ParquetFile, stats: IOStats) -> None:
        self.df = df
        self.pf = pf
        self.stats = stats
        self._arrow: pa.Schema | None = None

    @property
    def arrow(self) -> pa.Schema:
        """The Arrow schema pyarrow gives this file; built when first needed (a file
        that planning skips never needs it)."""
        if self._arrow is None:
            self._arrow = arrow_schema(self.pf)
        return self._arrow


@dataclass(frozen=True)
class _Plans:
    files: list[tuple[DataFile, _OpenFile | None, FilePlan | None, BoundExpr | None]]
    report: ScanReport
    fields: list[str]
    schema: pa.Schema
    page_units: list[tuple[ParquetFile, int, list[int]]]


class Dataset:
    """One or many Parquet files read as one table."""

    def __init__(
        self,
        source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        tail_bytes: int = DEFAULT_TAIL_BYTES,
        max_workers: int | None = None,
        plan_options: PlanOptions | None = None,
        scan_options: ScanOptions | None = None,
        discovery: Discovery | None = None,
    ) -> None:
        if not isinstance(source, (str, os.PathLike)) and not (
            isinstance(source, Sequence)
            and all(isinstance(s, (str, os.PathLike)) for s in source)
        ):
            raise UserInputError(
                "a dataset is a path, a URL or a list of them, "
                f"not {type(source).__name__}"
            )
        self._source = source
        # A discovery already made (Spark's manifest) saves walking the directory again.
        self._discovery: Discovery | None = discovery
        self._open: dict[str, _OpenFile] = {}
        self._lock = threading.Lock()
        self.tail_bytes = tail_bytes
        self.max_workers = max_workers or min(8, (os.cpu_count() or 2) * 2)
        self.plan_options = plan_options or PlanOptions()
        self.scan_options = scan_options or ScanOptions()

    # ------------------------------------------------------------ files

    @property
    def discovery(self) -> Discovery:
        if self._discovery is None:
            self._discovery = discover(self._source)
        return self._discovery

    @property
    @public_api
    def files(self) -> list[str]:
        return [f.path for f in self.discovery.files]

    def _file(self, df: DataFile) -> _OpenFile:
        with self._lock:
            of = self._open.get(df.path)
        if of is not None:
            return of
        stats = IOStats()
        pf = ParquetFile.open(df.path, stats=stats, tail_bytes=self.tail_bytes)
        of = _OpenFile(df, pf, stats)
        with self._lock:
            self._open.setdefault(df.path, of)
            return self._open[df.path]

    def io_stats(self) -> dict[str, IOStats]:
        """Per file opened so far, its I/O counters and request trace."""
        with self._lock:
            return {path: of.stats for path, of in self._open.items()}

    def close(self) -> None:
        with self._lock:
            for of in self._open.values():
                of.pf.close()
            self._open.clear()

    def __enter__(self) -> Dataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    @public_api
    def schema(self) -> pa.Schema:
        """The Arrow schema of every file, unified (``dataset/schema.py``: int32 and
        int64 give int64, ...), plus the partition columns. Reads every footer."""
        return self._unified([self._file(df) for df in self.discovery.files])

    def _first_schema(self) -> pa.Schema:
        """The first file's Arrow schema plus the partition columns (no other footer)."""
        return self._unified([self._file(self.discovery.files[0])])

    def _unified(self, opened: Sequence[_OpenFile]) -> pa.Schema:
        base = unify([(of.df.path, of.arrow) for of in opened])
        return pa.schema([*base, *(pa.field(k, self._partition_type(k))
                                   for k in self._partition_keys)])

    @property
    def _partition_keys(self) -> tuple[str, ...]:
        """The hive keys that are partition columns: a key that is also a column of
        the (first) file is not one; the file's column wins (docs/semantics.md)."""
        keys = self.discovery.partition_columns
        if not keys:
            return keys
        names = set(self._file(self.discovery.files[0]).arrow.names)
        return tuple(k for k in keys if k not in names)

    def _partition_type(self, key: str) -> pa.DataType:
        return pa.int64() if self.discovery.partition_types.get(key) == "int64" else pa.string()

    def _bound_schema(self, pf: ParquetFile) -> Schema:
        """The file's leaves plus one synthetic leaf per partition column."""
        extra = []
        n = len(pf.schema.leaves)
        for i, k in enumerate(self._partition_keys):
            if self.discovery.partition_types.get(k) == "int64":
                el = SchemaElement(type=2, repetition_type=Repetition.OPTIONAL, name=k)
            else:
                el = SchemaElement(
                    type=6,
                    repetition_type=Repetition.OPTIONAL,
                    name=k,
                    converted_type=0,
                    logicalType=LogicalType(STRING=StringType()),
                )
            order = ColumnOrder(TYPE_ORDER=TypeDefinedOrder())
            extra.append(LeafColumn(n + i, (k,), el, 1, 0, order))
        return Schema(pf.schema.root, pf.schema.leaves + tuple(extra))

    # ------------------------------------------------------------ planning

    def _plan(self, columns: Sequence[str] | None, expr: Expr) -> _Plans:
        t0 = time.perf_counter()
        disc = self.discovery
        report = ScanReport(files_total=len(disc.files))
        first = self._file(disc.files[0])
        schema = self._first_schema()
        names = [f.name for f in schema]
        if columns is None:
            fields = names
        else:
            fields = list(columns)
            for c in fields:
                if c not in names:
                    raise UserInputError(
                        f"no column named {c!r} (columns: {', '.join(names)})", path=first.df.path
                    )
        first_bound = bind(expr, self._bound_schema(first.pf))
        n_first = len(first.pf.schema.leaves)

        def prune_by_partition(df: DataFile) -> bool:
            if not disc.partition_columns or isinstance(first_bound, BoundTrue):
                return False
            values = disc.partition_values(df)

            def leaf(pred: Any) -> Match:
                if pred.leaf.index >= n_first:
                    return ConstantEvidence(values.get(pred.leaf.name)).match(pred)
                return Match.SOME

            return evaluate(first_bound, leaf) == Match.NONE

        def plan_one(
            df: DataFile,
        ) -> tuple[DataFile, _OpenFile | None, FilePlan | None, BoundExpr | None, list[str]]:
            if prune_by_partition(df):
                return df, None, None, None, []
            of = self._file(df)
            try:
                bound = first_bound if of is first else bind(expr, self._bound_schema(of.pf))
            except UserInputError as e:
                raise e.located(path=df.path) from None
            warnings: list[str] = []
            leaf_cols = [c.index for c in of.pf.schema.leaves
                         if columns is None or c.path[0] in fields]
            # The planner decodes index and dictionary bytes: their damage is the file's.
            with located(default=CorruptFileError, what="planning", path=df.path):
                plan = plan_file(
                    of.pf,
                    bound,
                    leaf_cols,
                    partition=disc.partition_values(df),
                    options=self.plan_options,
                    warnings=warnings,
                )
            return df, of, plan, bound, warnings

        if len(disc.files) == 1:
            results = [plan_one(disc.files[0])]
        else:
            with ThreadPoolExecutor(self.max_workers) as pool:
                results = list(pool.map(plan_one, disc.files))
        files = []
        page_units: list[tuple[ParquetFile, int, list[int]]] = []
        for df, of, plan, bound, warnings in results:
            report.warnings += [f"{df.path}: {w}" for w in warnings]
            if plan is None or of is None:
                report.files_skipped["partition"] += 1
                files.append((df, of, plan, bound))
                continue
            report.row_groups_total += len(plan.row_groups)
            report.rows_total += plan.num_rows
            involved = [c.index for c in of.pf.schema.leaves
                        if columns is None or c.path[0] in fields]
            n_here = len(of.pf.schema.leaves)
            if bound is not None:
                involved += [p.leaf.index for p in leaves(bound) if p.leaf.index < n_here]
            for rg in plan.row_groups:
                if rg.skipped:
                    report.row_groups_skipped[rg.decided_by] += 1
                page_units.append((of.pf, rg.index, sorted(set(involved))))
            if plan.skipped:
                report.files_skipped["row groups"] += 1
            files.append((df, of, plan, bound))
        report.pages_total = _count_pages(page_units)
        report.plan_seconds = time.perf_counter() - t0
        with self._lock:
            opened = list(self._open.values())
        report.bytes_read = sum(of.stats.bytes_read for of in opened)
        report.requests = sum(of.stats.requests for of in opened)
        # The files read decide the types: pyarrow's unification across them.
        schema = self._unified([first, *(of for _df, of, _p, _b in files
                                         if of is not None and of is not first)])
        if columns is None:  # every column of the files read
            fields = schema.names
        out_schema = pa.schema([schema.field(f) for f in fields])
        return _Plans(files, report, fields, out_schema, page_units)

    # ------------------------------------------------------------ public

    @public_api
    def scan(
        self,
        columns: Sequence[str] | None = None,
        where: Where = None,
        *,
        filters: Sequence[Any] | None = None,
        batch_size: int = 65_536,
    ) -> Scan:
        """A lazy scan of ``columns`` (top-level fields; all when None) where ``where`` holds."""
        if batch_size <= 0:
            raise UserInputError("batch_size must be positive")
        return Scan(self, columns, _where(where, filters), batch_size)

    @public_api
    @public_api
    def plan(
        self,
        columns: Sequence[str] | None = None,
        where: Where = None,
        *,
        filters: Sequence[Any] | None = None,
    ) -> DatasetPlan:
        """The typed plan of a scan, without reading data pages (``dataset/plan.py``)."""
        plans = self._plan(columns, _where(where, filters))
        disc = self.discovery
        entries = tuple(
            FileEntry(
                path=df.path,
                partition={k: v for k, v in disc.partition_values(df).items()
                           if k in self._partition_keys},
                file=None if of is None else of.pf,
                arrow_schema=None if of is None else of.arrow,
                access=plan,
                predicate=bound,
            )
            for df, of, plan, bound in plans.files
        )
        return DatasetPlan(
            files=entries,
            fields=tuple(plans.fields),
            schema=plans.schema,
            partition_types={k: self._partition_type(k) for k in self._partition_keys},
            scan_options=self.scan_options,
            report=plans.report,
        )

    def to_table(
        self, columns: Sequence[str] | None = None, where: Where = None, **kw: Any
    ) -> pa.Table:
        return self.scan(columns, where, **kw).to_table()

    @public_api
    def aggregate(
        self,
        aggregates: Sequence[str],
        where: Where = None,
        *,
        filters: Sequence[Any] | None = None,
    ) -> dict[str, Any]:
        """Exact ``count(*)``, ``count(col)``, ``sum``, ``min``, ``max`` where ``where`` holds.

        Row groups where every row matches are answered from zone maps and footer
        statistics; only row groups with some matching rows are read.
        ``self.last_aggregate_report`` says which was which.
        """
        from pqindex.dataset.aggregate import parse_aggregations, run_aggregate

        aggs = parse_aggregations(aggregates)
        cols = sorted({a.column.split(".")[0] for a in aggs if a.column is not None})
        result, report = run_aggregate(self.plan(cols, where, filters=filters), aggs)
        self.last_aggregate_report = report
        return result

    @public_api
    def statistics(self) -> dict[str, dict[str, Any]]:
        """Per column: rows, nulls and, where embedded HyperLogLog sketches exist, an
        estimate of the distinct values over the whole dataset.

        A sketch that cannot be read or decoded (damaged, newer body version) is
        skipped: the estimate covers the other files' sketches, the column's entry
        gets a ``warnings`` list, and the message is logged (logger ``pqindex``)."""
        import logging

        from pqindex.errors import PqIndexError
        from pqindex.indexes.base import Scope
        from pqindex.indexes.hll import read_sketch
        from pqindex.plan.planner import file_region

        out: dict[str, dict[str, Any]] = {}
        sketches: dict[str, Any] = {}
        for df in self.discovery.files:
            of = self._file(df)
            pf = of.pf
            for leaf in pf.schema.leaves:
                st = out.setdefault(leaf.name, {"values": 0, "nulls": 0, "distinct_estimate": None})
                for rg in range(pf.num_row_groups):
                    cmd = pf.column_meta(rg, leaf.index)
                    st["values"] += cmd.num_values or 0
                    if st["nulls"] is not None and cmd.statistics is not None and (
                        cmd.statistics.null_count is not None
                    ):
                        st["nulls"] += cmd.statistics.null_count
                    else:
                        st["nulls"] = None
            region = file_region(pf)
            if region is None:
                continue
            for entry in region.find(kind="hll", scope=Scope.FILE):
                try:
                    _vt, sketch = read_sketch(region.blob(entry))
                except PqIndexError as e:  # damaged or newer sketch: skipped, logged
                    message = (f"{pf.path}: embedded index: hll blob for column "
                               f"{entry.column!r} unusable: {e.reason}")
                    logging.getLogger("pqindex").warning("%s", message)
                    if entry.column in out:
                        out[entry.column].setdefault("warnings", []).append(message)
                    continue
                if entry.column in sketches:
                    sketches[entry.column] = sketches[entry.column].merge(sketch)
                else:
                    sketches[entry.column] = sketch
        for name, sketch in sketches.items():
            if name in out:
                out[name]["distinct_estimate"] = round(sketch.estimate())
        return out

    @public_api
    def explain(
        self,
        columns: Sequence[str] | None = None,
        where: Where = None,
        *,
        filters: Sequence[Any] | None = None,
        format: str = "text",
    ) -> str:
        """The plan and why, without reading data pages: a tree of text, or JSON."""
        from pqindex.dataset.explain import explain_json, explain_text

        plans = self._plan(columns, _where(where, filters))
        if format == "json":
            import json

            return json.dumps(explain_json(plans.files, plans.report), indent=2)
        if format != "text":
            raise UserInputError(f"unknown explain format {format!r} (text or json)")
        return explain_text(plans.files, plans.report)


class Scan:
    """A planned-on-demand read; ``report`` is filled in as it runs."""

    def __init__(
        self, ds: Dataset, columns: Sequence[str] | None, expr: Expr, batch_size: int
    ) -> None:
        self._ds = ds
        self._columns = columns
        self._expr = expr
        self.batch_size = batch_size
        self.report = ScanReport()
        self._files_read: set[str] = set()

    def _io_before(self) -> dict[str, tuple[int, int]]:
        return {p: (of.stats.bytes_read, of.stats.requests) for p, of in self._ds._open.items()}

    def _finish(self, before: dict[str, tuple[int, int]], t0: float) -> None:
        rep = self.report
        # Offset indexes read while scanning may now tell more pages than the footer did.
        rep.pages_total = _count_pages(getattr(self, "_page_units", []))
        rep.bytes_read = rep.requests = 0
        for p, of in self._ds._open.items():
            b, r = before.get(p, (0, 0))
            rep.bytes_read += of.stats.bytes_read - b
            rep.requests += of.stats.requests - r
        rep.total_seconds = time.perf_counter() - t0

    def _tables(self, parallel: bool) -> Iterator[pa.Table]:
        t0 = time.perf_counter()
        before = self._io_before()
        plans = self._ds._plan(self._columns, self._expr)
        self._page_units = plans.page_units
        self.report = plans.report
        self.schema = plans.schema
        ptypes = {k: self._ds._partition_type(k) for k in self._ds._partition_keys}
        work = [
            (of, plan, bound, rgp)
            for _df, of, plan, bound in plans.files
            if plan is not None and of is not None and bound is not None and not plan.skipped
            for rgp in plan.row_groups
            if not rgp.skipped
        ]
        opts = self._ds.scan_options

        def run(item: Any) -> tuple[list[pa.Table], ScanStats, str]:
            of, plan, bound, rgp = item
            stats = ScanStats()
            # A column other files have and this one lacks is NULL here (conform).
            fields = [f for f in plans.fields if f in ptypes or f in of.arrow.names]
            if isinstance(rgp, list):  # whole row groups of one file
                t = read_whole_row_groups(of.pf, rgp, fields, plan.partition, ptypes, stats)
                return [t], stats, of.pf.path
            t = read_row_group(of.pf, plan, rgp, bound, fields, of.arrow, ptypes, opts, stats)
            return ([] if t is None else [t]), stats, of.pf.path

        try:
            if len(work) <= 1 or not parallel:
                for item in work:
                    tables, stats, path = run(item)
                    self._add(stats, path)
                    yield from tables
            else:
                # Row groups of every file on the pool; results in file and row-group order.
                with ThreadPoolExecutor(self._ds.max_workers) as pool:
                    for tables, stats, path in pool.map(run, _whole_runs(work, plans.fields)):
                        self._add(stats, path)
                        yield from tables
        finally:
            self._finish(before, t0)

    def _add(self, stats: ScanStats, path: str) -> None:
        rep = self.report
        rep.row_groups_read += stats.row_groups_read
        rep.pages_read += stats.pages_read
        rep.rows_matched += stats.rows_out
        rep.fetch_seconds += stats.fetch_seconds
        rep.decode_seconds += stats.decode_seconds
        rep.data_bytes += stats.data_bytes
        if stats.row_groups_read and path not in self._files_read:
            self._files_read.add(path)
            rep.files_read += 1
        rep.warnings += stats.warnings

    def _cast(self, t: pa.Table) -> pa.Table:
        return conform(t, self.schema)

    @public_api
    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Matching rows as record batches of at most ``batch_size`` rows, streaming."""
        # Sequential: memory stays bounded by one row group's selected data.
        for t in self._tables(parallel=False):
            yield from self._cast(t).to_batches(max_chunksize=self.batch_size)

    @public_api
    def to_table(self) -> pa.Table:
        """Every matching row as one table, typed like ``pyarrow.parquet.read_table``."""
        tables = [self._cast(t) for t in self._tables(parallel=True)]
        if not tables:
            return self.schema.empty_table()
        if not self.schema.names:
            # concat_tables forgets the length of tables without columns.
            rows = sum(t.num_rows for t in tables)
            return pa.table({"_": pa.nulls(rows)}).drop_columns(["_"])
        return pa.concat_tables(tables)

    @public_api
    def to_pandas(self, **kwargs: Any) -> Any:
        return self.to_table().to_pandas(**kwargs)


def dataset(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], **kwargs: Any
) -> Dataset:
    """A lazy dataset over a file, a directory (hive ``key=value/`` partitions), or a list."""
    return Dataset(source, **kwargs)
