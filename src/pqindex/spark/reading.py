"""Spark reads that use pqindex's indexes: plan on the driver, read the kept files natively.

The file list is Spark's own (``inputFiles()`` of ``spark.read.parquet(path)``):
pqindex only takes files away from it, so Spark never reads a file it would not
have read, and the result keeps the full dataset's schema (partition column
types included) because it is passed explicitly. Whenever pqindex cannot judge
a predicate the way Spark does (syntax it does not parse, a partition column
Spark types differently), nothing is pruned.
"""

from __future__ import annotations

import os
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pqindex.dataset.dataset import column_list
from pqindex.errors import PqIndexError

__all__ = ["SparkPlan", "explain", "frame", "plan", "read", "table"]


@dataclass
class SparkPlan:
    """Which of Spark's files a query needs, and why the others were dropped."""

    path: str
    where: str | None
    files_total: int = 0
    kept: list[str] = field(default_factory=list)  # as Spark names them (URIs)
    pruned: list[dict[str, str]] = field(default_factory=list)  # file, by, reason
    manifest: str = "absent"  # current / stale / absent
    fallback: str | None = None  # why nothing could be pruned
    plan_seconds: float = 0.0
    engine: str = "native"  # the reader chosen: "native" (Spark's) or "pqindex"
    engine_reason: str = ""
    bytes_kept: int | None = None  # pages the plan keeps (when planned with columns)
    bytes_threshold: int | None = None  # engine="auto"'s threshold
    units: int = 0  # tasks of the pqindex reader
    engine_mode: str | None = None  # pqindex: "driver" (small plan) or "tasks"
    read_columns: list[str] | None = None  # pqindex: the columns its DataFrame has

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "where": self.where,
            "files_total": self.files_total,
            "files_kept": len(self.kept),
            "files_pruned": len(self.pruned),
            "kept": list(self.kept),
            "pruned": list(self.pruned),
            "manifest": self.manifest,
            "fallback": self.fallback,
            "plan_seconds": self.plan_seconds,
            "engine": self.engine,
            "engine_reason": self.engine_reason,
            "bytes_kept": self.bytes_kept,
            "bytes_threshold": self.bytes_threshold,
            "units": self.units,
            "engine_mode": self.engine_mode,
        }

    def __str__(self) -> str:
        lines = [
            f"{self.path} where {self.where or 'true'}: {len(self.kept)} of "
            f"{self.files_total} file(s) to read, {len(self.pruned)} pruned "
            f"(manifest {self.manifest}, planned in {self.plan_seconds * 1000:.0f} ms)",
            f"  engine {self.engine}{' on the ' + self.engine_mode if self.engine_mode else ''}"
            f": {self.engine_reason or '-'}",
        ]
        if self.fallback:
            lines.append(f"  no pruning: {self.fallback}")
        for p in self.pruned:
            lines.append(f"  - {p['file']}: {p['by']} — {p['reason']}")
        return "\n".join(lines)


def _local(uri: str) -> str | None:
    u = urllib.parse.urlparse(uri)
    if u.scheme in ("", "file"):
        return os.path.normpath(urllib.parse.unquote(u.path))
    return None


def _mismatched_partitions(spark_schema: Any, disc: Any) -> set[str]:
    """Partition columns pqindex would type differently from Spark."""
    from pyspark.sql import types as T

    out = set()
    for k in disc.partition_columns:
        if k not in spark_schema.fieldNames():
            out.add(k)
            continue
        dt = spark_schema[k].dataType
        ours = disc.partition_types.get(k)
        same = ((ours == "int64" and isinstance(dt, (T.IntegerType, T.LongType)))
                or (ours == "date32" and isinstance(dt, T.DateType))
                or (ours == "string" and isinstance(dt, T.StringType)))
        if not same:
            out.add(k)
    return out


PLANNING_TAIL_BYTES = 16 * 1024


def _manifest_discovery(dest: str, manifest: dict[str, Any]) -> Any:
    from pqindex.dataset.discovery import DataFile, Discovery, _hive_parts, _infer_type

    files = []
    for f in manifest["files"]:
        rel = f["path"].split("/")
        files.append(DataFile(os.path.join(dest, *rel), _hive_parts(rel[:-1])))
    keys: list[str] = []
    for df in files:
        for k, _ in df.partition:
            if k not in keys:
                keys.append(k)
    types = {k: _infer_type(v for df in files for kk, v in df.partition if kk == k) for k in keys}
    return Discovery(tuple(files), tuple(keys), types)


def spark_only(expr: Any) -> str | None:
    """Why Spark, not pqindex, must apply ``expr`` (None: pqindex may). ILIKE: Spark
    lowercases with Java's rules (full mappings, the JVM's locale), Arrow with
    Unicode's simple ones, so a value could match in one and not the other;
    regexp_matches: Spark has no such function (its RLIKE reads Java's syntax)."""
    from pqindex.expr.nodes import Like, Regexp, leaf_exprs

    if any((isinstance(node, Like) and node.ignore_case) or isinstance(node, Regexp)
           for node in leaf_exprs(expr)):
        return ("ILIKE and regular expressions are left to Spark: it lowercases and "
                "matches with Java's rules, pqindex with Arrow's")
    return None


def plan(path: str, where: str | None, spark_files: Sequence[str], spark_schema: Any) -> SparkPlan:
    """Prune ``spark_files`` (Spark's listing of the dataset at ``path``) for ``where``."""
    import pqindex
    from pqindex.expr.bind import columns as expr_columns
    from pqindex.expr.sql import parse_where
    from pqindex.spark.commit import load_manifest, manifest_status
    from pqindex.spark.filters import float_columns, spark_float_order

    t0 = time.perf_counter()
    dest = os.path.abspath(path)
    out = SparkPlan(dest, where, files_total=len(spark_files), kept=list(spark_files))
    local = {uri: _local(uri) for uri in spark_files}
    try:
        if where is None or not where.strip():
            out.fallback = "no predicate"
            return out
        if any(p is None for p in local.values()) or not os.path.isdir(dest):
            out.fallback = "not a local directory"
            return out
        manifest = load_manifest(dest)
        on_disk = {}
        for p in local.values():
            assert p is not None
            try:
                on_disk[os.path.relpath(p, dest)] = os.stat(p).st_size
            except OSError:
                out.fallback = f"{p} vanished while planning"
                return out
        out.manifest = manifest_status(dest, manifest, on_disk)
        try:
            expr = parse_where(where)
        except PqIndexError as e:
            out.fallback = f"predicate not understood by pqindex: {e}"
            return out
        if (why := spark_only(expr)) is not None:
            out.fallback = why
            return out
        try:
            expr = spark_float_order(expr, float_columns(spark_schema))
        except PqIndexError as e:
            out.fallback = str(e)
            return out
        # Planning decides files only: a small tail read (Spark's footers are a few
        # KiB) and no projection, so no offset index of a non-predicate column is read.
        known = (_manifest_discovery(dest, manifest)  # no second directory walk
                 if out.manifest == "current" and manifest is not None else None)
        with pqindex.dataset(dest, tail_bytes=PLANNING_TAIL_BYTES, discovery=known) as ds:
            disc = ds.discovery
            odd = _mismatched_partitions(spark_schema, disc) & set(expr_columns(expr))
            if odd:
                out.fallback = (
                    f"partition column(s) {', '.join(sorted(odd))} typed differently by Spark"
                )
                return out
            try:
                dplan = ds.plan([], expr)
            except PqIndexError as e:
                out.fallback = f"pqindex could not plan: {e}"
                return out
        pruned: dict[str, dict[str, str]] = {}
        for entry in dplan.files:
            fp = entry.access
            key = os.path.normpath(os.path.abspath(entry.path))
            if fp is None:
                pruned[key] = {"file": key, "by": "partition", "reason": "partition values"}
            elif fp.skipped:
                by = fp.skipped_by or ",".join(sorted({rg.decided_by for rg in fp.row_groups}))
                reason = fp.reason or "; ".join(sorted({rg.reason for rg in fp.row_groups}))
                pruned[key] = {"file": key, "by": by or "empty", "reason": reason or "no rows"}
        out.kept = [uri for uri in spark_files if local[uri] not in pruned]
        out.pruned = [pruned[p] for uri, p in local.items() if p in pruned]
        return out
    finally:
        out.plan_seconds = time.perf_counter() - t0


def _base(spark: Any, path: str | os.PathLike[str]) -> Any:
    return spark.read.parquet(os.fspath(path))


# engine="auto" reads through pqindex when the plan keeps at most this many bytes of
# pages, and with Spark's reader (on the kept files) above. Measured with
# bench/spark_pipeline.py --engines (docs/benchmarks.md): pqindex's reader pays per
# row it hands to Spark (Arrow through Python), Spark's per byte of the kept files;
# on TPC-H sf 1 pqindex lost already on a plan keeping 0.6 MiB for 76k rows and won
# on an absent value (nothing kept). The kept bytes are the planner's upper bound
# (whole chunks where the page index cannot narrow), so a point lookup on an
# unsorted column counts MiB: lookups are recognized by LOOKUP_ROWS below. Checked
# again on ship-date ranges of Q14's columns (sf 1, pages of 20k rows; a loaded
# machine): 1 and 3 days keep 145 KiB (2.5k, 7.6k rows), pqindex 0.7-1.0x native;
# 8 and 16 days keep 291 and 436 KiB (20k, 40k rows), pqindex 1.5-1.9x.
AUTO_THRESHOLD_BYTES = 256 * 1024

# A pqindex read whose plan keeps at most this many bytes of pages runs on the
# driver (one pqindex scan, the rows handed to Spark as Arrow): no planning process
# and no task. The Python data source costs about 0.4 s per query before any byte
# is read (its planning process, Python tasks); bigger plans run in its tasks.
DRIVER_READ_BYTES = 16 * 1024 * 1024

ENGINES = ("auto", "native", "pqindex")

# engine="auto" also reads through pqindex (on the driver) a plan above the
# threshold when it is a lookup expected to return at most this many rows: pqindex
# pays per row it hands to Spark, Spark per byte of the kept files.
LOOKUP_ROWS = 1000

# Bits per distinct value of a Bloom filter written for a ~1% false-positive rate:
# its size tells about how many distinct values the row group has.
_BLOOM_BITS_PER_VALUE = 10


def lookup_rows(dplan: Any, expr: Any) -> int | None:
    """Rows an equality lookup is expected to return, from the sizes of the Bloom
    filters that kept its row groups (rows / distinct values, per value looked up);
    None when ``expr`` is no ``=``/``IN`` conjunction on a Bloom-filtered column of
    every kept row group. An estimate for choosing a reader, never for pruning."""
    from pqindex.expr.nodes import And, Compare, In
    from pqindex.format.match import LeafOp

    eqs: list[tuple[str, int]] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, And):
            stack += [e.left, e.right]
        elif isinstance(e, Compare) and e.op == LeafOp.EQ:
            eqs.append((e.column.name, 1))
        elif isinstance(e, In) and not e.negated:
            eqs.append((e.column.name, len(e.values)))
    if not eqs:
        return None
    total = 0.0
    for entry in dplan.kept:
        pf = entry.file
        leaf = {".".join(c.path): c.index for c in pf.schema.leaves}
        for rg in entry.row_groups:
            if rg.skipped:
                continue
            best = None
            for name, values in eqs:
                col = leaf.get(name)
                meta = pf.column_meta(rg.index, col) if col is not None else None
                size = getattr(meta, "bloom_filter_length", None) or 0
                if size <= 0:
                    continue
                ndv = max(1.0, size * 8 / _BLOOM_BITS_PER_VALUE)
                est = values * rg.num_rows / ndv
                best = est if best is None else min(best, est)
            if best is None:
                return None
            total += best
    return int(total)


def _spark_schema_of(arrow_schema: Any, disc: Any) -> Any:
    """The schema Spark would give the dataset (when it cannot read it itself): Spark
    types an integer hive partition column as ``int`` when every value fits 32 bits
    (its partition type inference), pqindex as int64."""
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = from_arrow_schema(arrow_schema)
    fields = []
    for f in schema.fields:
        if f.name in disc.partition_columns and disc.partition_types.get(f.name) == "int64":
            values = [int(v) for df in disc.files for k, v in df.partition
                      if k == f.name and v != "__HIVE_DEFAULT_PARTITION__"]
            if all(-(2**31) <= v < 2**31 for v in values):
                f = T.StructField(f.name, T.IntegerType(), f.nullable, f.metadata)
        fields.append(f)
    return T.StructType(fields)


def _no_connector(e: BaseException) -> bool:
    """Spark failed because no Hadoop file system handles the URL's scheme."""
    text = str(e)
    return "No FileSystem for scheme" in text or "UnsupportedFileSystem" in text


@dataclass
class _SparkView:
    """What pqindex needs of ``spark.read.parquet(path)``: Spark's schema and files; the
    DataFrame itself only when a query reads the dataset whole."""

    spark: Any
    path: str
    schema: Any
    files: list[str]
    df_: Any = None
    # DataFrames of kept files, by the files: Spark lists them (a file index, ~15
    # Py4J calls) once per set while the view is valid (the same listing).
    kept_: dict[tuple[str, ...], Any] = field(default_factory=dict)

    def inputFiles(self) -> list[str]:  # as DataFrame.inputFiles
        return list(self.files)

    def df(self) -> Any:
        if self.df_ is None:  # the schema given: Spark lists, but infers nothing
            self.df_ = self.spark.read.schema(self.schema).parquet(self.path)
        return self.df_

    def kept_df(self, kept: Sequence[str]) -> Any:
        key = tuple(kept)
        df = self.kept_.get(key)
        if df is None:
            df = (self.spark.read.schema(self.schema)
                  .option("basePath", os.path.abspath(self.path)).parquet(*kept))
            if len(self.kept_) >= _KEPT_MAX:
                self.kept_.pop(next(iter(self.kept_)))
            self.kept_[key] = df
        return df


_KEPT_MAX = 32


# Spark's schema and files of local datasets, by session, path and listing (every
# file's name, size and mtime): Spark infers a schema with a job reading footers,
# tens of ms per query that a selective read through pqindex would otherwise pay.
_VIEWS: dict[tuple[int, str, tuple[tuple[str, int, int], ...]], _SparkView] = {}
_VIEWS_MAX = 64


def _local_listing(path: str) -> tuple[tuple[str, int, int], ...] | None:
    """Every file under a local ``path`` (hidden ones too) with size and mtime; None when
    it is not local or cannot be listed."""
    local = _local(path) if "://" in path else os.path.abspath(path)
    if local is None:
        return None
    out = []
    try:
        if os.path.isfile(local):
            st = os.stat(local)
            return (("", st.st_size, st.st_mtime_ns),)
        for dirpath, _dirs, names in os.walk(local):
            for name in names:
                st = os.stat(os.path.join(dirpath, name))
                out.append((os.path.relpath(os.path.join(dirpath, name), local),
                            st.st_size, st.st_mtime_ns))
    except OSError:
        return None
    return tuple(sorted(out)) if out else None


def _native_base(spark: Any, path: str) -> _SparkView | None:
    """Spark's view of ``spark.read.parquet(path)``, or None when Spark has no
    connector for it. Cached for local datasets while their files stay the same."""
    listing = _local_listing(path)
    key = (id(spark), os.path.abspath(_local(path) or path), listing) if listing else None
    if key is not None and (hit := _VIEWS.get(key)) is not None:
        return hit
    try:
        base = spark.read.parquet(path)
        view = _SparkView(spark, path, base.schema, base.inputFiles(), base)
    except Exception as e:
        if _no_connector(e):
            return None
        raise
    if key is not None and _local_listing(path) == listing:  # unchanged while Spark listed
        if len(_VIEWS) >= _VIEWS_MAX:
            _VIEWS.pop(next(iter(_VIEWS)))
        _VIEWS[key] = view
    return view


def _native_df(spark: Any, base: _SparkView, path: str, p: SparkPlan) -> Any:
    if p.fallback or not p.pruned:
        return base.df()
    if p.kept:
        return base.kept_df(p.kept)
    from pyspark.sql import functions as F

    return base.df().where(F.lit(False))  # no file can match: an empty result, same schema


def _kept_bytes(dplan: Any) -> int:
    """Bytes of the pages the plan keeps (upper bound the planner gives per column)."""
    return sum(r.bytes for entry in dplan.kept for rg in entry.row_groups
               if not rg.skipped for r in rg.reads)


def _decide(
    spark: Any,
    path: str,
    where: str | None,
    columns: Sequence[str] | None,
    engine: str,
    storage_options: dict[str, Any] | None,
    threshold_bytes: int | None,
    driver_read_bytes: int | None = None,
) -> tuple[SparkPlan, Any]:
    """Plan the read and pick the engine; returns the plan and the DataFrame before
    ``where``/``select`` are applied in Spark."""
    import json

    import pqindex
    from pqindex.expr.bind import columns as expr_columns
    from pqindex.expr.sql import parse_where
    from pqindex.spark.filters import float_columns, spark_float_order
    from pqindex.spark.reader import tasks_of

    if engine not in ENGINES:
        raise PqIndexError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    threshold = AUTO_THRESHOLD_BYTES if threshold_bytes is None else threshold_bytes
    from pqindex.dataset.tables.source import is_table_source

    lake_table = is_table_source(_local(path) or path)
    # A lake table: Spark's Parquet reader would list the directory (files the table's
    # log removed included); pqindex's reader takes the snapshot's files.
    base = None if lake_table else _native_base(spark, path)
    if lake_table and engine == "native":
        engine = "pqindex"
    has_where = where is not None and bool(where.strip())
    if engine == "native" or (engine == "auto" and base is not None and not has_where):
        if base is None:
            from pqindex.errors import UserInputError

            raise UserInputError("Spark has no connector for this URL's scheme: use "
                                 "engine='pqindex' or 'auto'", path=path)
        p = plan(path, where, base.inputFiles(), base.schema)
        p.engine = "native"
        p.engine_reason = "asked for" if engine == "native" else "no predicate: a full scan"
        return p, _native_df(spark, base, path, p)
    t0 = time.perf_counter()
    local = "://" not in path or path.startswith("file:")
    dest = os.path.abspath(_local(path) or path) if local else path
    out = SparkPlan(dest, where)
    pq_where: str | None = where if has_where else None
    why_not: str | None = None  # why pqindex cannot apply the predicate itself
    if pq_where is not None:
        try:
            parsed = parse_where(pq_where)
            expr_cols = expr_columns(parsed)
        except PqIndexError as e:
            why_not, pq_where, expr_cols = f"predicate not understood by pqindex: {e}", None, []
        else:
            if (why := spark_only(parsed)) is not None:
                why_not, pq_where, expr_cols = why, None, []
    else:
        expr_cols = []
    # Local files: the small tail Spark's footers need (as the native plan).
    tail = PLANNING_TAIL_BYTES if local else None
    # Open until the engine is chosen: a read on the driver reuses its footers and indexes.
    ds = pqindex.dataset(dest, storage_options=storage_options, tail_bytes=tail)
    try:
        disc = ds.discovery
        if base is not None:
            spark_schema = base.schema
            odd = _mismatched_partitions(spark_schema, disc) & set(expr_cols)
            if odd and why_not is None:
                why_not = (f"partition column(s) {', '.join(sorted(odd))} typed "
                           "differently by Spark")
                pq_where, expr_cols = None, []
        else:
            spark_schema = _spark_schema_of(ds.schema, disc)
        pq_expr = None
        if pq_where is not None:
            try:  # Spark's NaN ordering (the rows Spark's WHERE keeps)
                pq_expr = spark_float_order(parse_where(pq_where), float_columns(spark_schema))
            except PqIndexError as e:
                why_not, pq_where, expr_cols = str(e), None, []
        names = spark_schema.fieldNames()
        wanted = list(columns) if columns is not None else list(names)
        if why_not is not None and has_where:
            wanted = list(names)  # Spark filters every column it may need
        read_cols = wanted + [c for c in expr_cols if c not in wanted]
        missing = [c for c in read_cols if c not in names]
        if missing:
            # Spark would fail the same query: its schema of the dataset lacks the column.
            from pqindex.errors import UserInputError

            raise UserInputError(
                f"no column named {missing[0]!r} in Spark's schema of the dataset "
                f"(columns: {', '.join(names)}); Spark takes the schema from one file "
                "unless the read sets mergeSchema", path=path, column=missing[0])
        dplan = ds.plan(read_cols, pq_expr)
    except BaseException:
        ds.close()
        raise
    out.files_total = len(dplan.files)
    out.kept = [e.path for e in dplan.kept]
    out.pruned = [{"file": e.path, "by": e.skipped_by or "", "reason": ""}
                  for e in dplan.files if e.skipped_by is not None]
    out.bytes_kept = _kept_bytes(dplan)
    out.bytes_threshold = threshold
    out.fallback = why_not
    on_driver = DRIVER_READ_BYTES if driver_read_bytes is None else driver_read_bytes
    if lake_table:
        out.engine, out.engine_reason = "pqindex", (
            "a lake table: its snapshot names the files (Spark's Parquet reader would "
            "read the files its log removed)")
    elif engine == "pqindex":
        out.engine, out.engine_reason = "pqindex", "asked for"
    elif base is None:
        out.engine, out.engine_reason = "pqindex", "Spark has no connector for the URL's scheme"
    elif why_not is not None:
        out.engine, out.engine_reason = "native", why_not
    elif not out.kept:
        # Spark then reads no file at all (an empty relation): no rows to hand over.
        out.engine, out.engine_reason = "native", "the plan keeps no file"
    elif out.bytes_kept <= threshold:
        out.engine, out.engine_reason = "pqindex", (
            f"the plan keeps {out.bytes_kept} bytes <= {threshold}")
    elif (out.bytes_kept <= on_driver and pq_expr is not None
          and (rows := lookup_rows(dplan, pq_expr)) is not None
          and rows <= LOOKUP_ROWS):
        out.engine, out.engine_reason = "pqindex", (
            f"a lookup: about {rows} row(s) expected (Bloom filter sizes) <= {LOOKUP_ROWS}")
    else:
        out.engine, out.engine_reason = "native", (
            f"the plan keeps {out.bytes_kept} bytes > {threshold}")
    if out.engine == "native":
        assert base is not None  # native is chosen only where Spark has a connector
        ds.close()
        spark_files = base.inputFiles()
        kept_paths = {os.path.normpath(os.path.abspath(p)) for p in out.kept}
        out.files_total = len(spark_files)
        out.kept = [u for u in spark_files if _local(u) in kept_paths]
        out.pruned = [{"file": u, "by": "pqindex plan", "reason": "no row can match"}
                      for u in spark_files if _local(u) not in kept_paths]
        if any(_local(u) is None for u in spark_files):
            out.kept, out.pruned = list(spark_files), []  # not local: Spark's own listing
        out.plan_seconds = time.perf_counter() - t0
        return out, _native_df(spark, base, path, out)
    from pyspark.sql import types as T

    from pqindex.spark.pipeline import register
    from pqindex.spark.secrets import hide

    read_schema = T.StructType([spark_schema[c] for c in read_cols])
    out.read_columns = list(read_cols)
    table = ds.lake_table
    # Spark's tasks read each file as plain Parquet: a table's deleted rows (deletion
    # vectors) and renamed columns (column mapping, Iceberg renames) need the table.
    table_only = table is not None and bool(table.deleted or table.logical_names
                                             or table.renamed)
    if out.bytes_kept <= on_driver or table_only:
        out.engine_mode = "driver"
        try:
            df = _driver_read(spark, ds, dplan, read_schema)
        finally:
            ds.close()
        out.plan_seconds = time.perf_counter() - t0
        return out, df
    ds.close()
    out.engine_mode = "tasks"
    tasks = tasks_of(dplan, disc, parallelism=parallelism(spark) or os.cpu_count() or 1)
    out.units = len(tasks)
    register(spark)
    df = (spark.read.format("pqindex").schema(read_schema)
          .option("path", dest)
          .option("where", pq_where or "")
          .option("columns", json.dumps(read_cols))
          .option("storage_options", hide(spark, storage_options) if storage_options else "")
          .option("units", json.dumps([t.to_json() for t in tasks]))
          .load())
    out.plan_seconds = time.perf_counter() - t0
    return out, df


def _driver_read(spark: Any, ds: Any, dplan: Any, read_schema: Any) -> Any:
    """A small plan read here with pqindex (the plan the choice was made on, read as
    it is: no second planning pass), the rows handed to Spark as Arrow."""
    from pqindex.spark.reader import as_spark, spark_arrow_schema

    target = spark_arrow_schema(read_schema)
    # to_table, not to_batches: files and row groups decode on the pool (a lookup's kept
    # row groups side by side); a plan this small is held whole anyway (arrow_frame).
    table = ds.scan(plan=dplan).to_table()
    batches = [as_spark(b, target) for b in table.to_batches()]
    return arrow_frame(spark, batches, target, read_schema)


def arrow_frame(spark: Any, batches: list[Any], target: Any, schema: Any) -> Any:
    """A DataFrame of Arrow ``batches`` (already of ``target``, Spark's Arrow schema for
    ``schema``): a local relation in the JVM.

    On a classic session the batches go to the JVM as ``createDataFrame`` sends them
    (an Arrow stream file read by ``PythonSQLUtils``), without its ~40 Py4J round trips
    of configuration lookups and conversions, which cost more than a small result's
    rows; those conversions only matter for timestamps and nested types, which take
    ``createDataFrame``. A Connect session sends the Arrow bytes in the plan.
    """
    import pyarrow as pa
    import pyarrow.types as pat

    jvm = _classic_jvm(spark)
    if jvm is None or any(pat.is_nested(t) or pat.is_timestamp(t) for t in target.types):
        # No batch: one empty chunk per column (pyspark's timestamp check cannot type
        # a nested column of no chunks).
        table = (pa.Table.from_batches(batches, schema=target) if batches
                 else target.empty_table())
        return spark.createDataFrame(table, schema=schema)
    import tempfile

    from pyspark.sql.classic.dataframe import DataFrame

    utils = jvm.PythonSQLUtils
    fd, name = tempfile.mkstemp(dir=spark.sparkContext._temp_dir)
    try:
        with os.fdopen(fd, "wb") as f:
            if batches:  # as createDataFrame: no batch, an empty stream file
                with pa.ipc.new_stream(f, target) as w:
                    for b in batches:
                        w.write_batch(b)
        jdf = utils.toDataFrame(utils.readArrowStreamFromFile(name), schema.json(),
                                spark._jsparkSession)
    finally:
        os.unlink(name)
    df = DataFrame(jdf, spark)
    df._schema = schema  # known: no round trip to ask the JVM
    return df


def parallelism(spark: Any) -> int | None:
    """Spark's default parallelism (``spark.default.parallelism``, or the classic
    context's: the cores of ``local[*]``); None when a Connect session does not say."""
    try:
        given = spark.conf.get("spark.default.parallelism", None)
        if given:
            return int(given)
    except Exception:  # a conf Connect does not answer: the reader's default
        pass
    if _classic_jvm(spark) is None:
        return None
    return int(spark.sparkContext.defaultParallelism)


def _classic_jvm(spark: Any) -> Any:
    """The Py4J view of a classic session's JVM; None on Spark Connect."""
    from pqindex.spark.workers import is_connect

    return None if is_connect(spark) else getattr(spark, "_jvm", None)


def read(
    spark: Any,
    path: str | os.PathLike[str],
    where: str | None = None,
    columns: Sequence[str] | None = None,
    engine: str = "auto",
    *,
    storage_options: dict[str, Any] | None = None,
    threshold_bytes: int | None = None,
    driver_read_bytes: int | None = None,
) -> Any:
    """``spark.read.parquet(path).where(where).select(columns)``, reading less.

    ``engine="native"``: Spark's reader on the files pqindex's planner keeps (hive
    partitions, footer statistics, embedded file-level indexes). ``"pqindex"``: the
    ``"pqindex"`` data source, whose tasks read only the pages the plan keeps
    (page index, embedded indexes, Bloom filters) of the kept row groups.
    ``"auto"``: pqindex's reader when Spark has no connector for the URL's scheme,
    when the plan keeps at most ``threshold_bytes`` (:data:`AUTO_THRESHOLD_BYTES`),
    or when it is an equality lookup the Bloom filters expect to return few rows
    (:func:`lookup_rows`); Spark's on the kept files otherwise, and when no file is
    kept (Spark then reads nothing). pqindex reads a plan keeping at most
    ``driver_read_bytes`` (:data:`DRIVER_READ_BYTES`) on the driver, larger ones in
    the data source's tasks. ``where`` is applied in Spark in every case,
    so the rows are Spark's. :func:`explain` tells which engine was chosen and why.
    ``storage_options`` travel to the tasks as a data source option whose value
    Spark's string redaction hides (:mod:`pqindex.spark.secrets`: the session's
    ``spark.sql.redaction.string.regex`` is extended to match it).
    """
    columns = column_list(columns)  # one name alone is that column
    p, df = _decide(spark, os.fspath(path), where, columns, engine, storage_options,
                    threshold_bytes, driver_read_bytes)
    if where is not None and where.strip():
        df = df.where(where)
    # pqindex's DataFrame has exactly ``columns`` when they include the predicate's:
    # the select would project nothing away (one analysis and ~17 Py4J calls saved).
    if columns is not None and p.read_columns != list(columns):
        df = df.select(*columns)
    return df


def explain(
    spark: Any,
    path: str | os.PathLike[str],
    where: str | None = None,
    *,
    columns: Sequence[str] | None = None,
    engine: str = "native",
    storage_options: dict[str, Any] | None = None,
    threshold_bytes: int | None = None,
    driver_read_bytes: int | None = None,
    show: bool = False,
) -> dict[str, Any]:
    """What ``read`` would do for ``where``: the engine and why, files pruned and why
    (printed too with ``show``). The default engine, ``"native"``, plans file pruning
    only, as before."""
    p, _ = _decide(spark, os.fspath(path), where, column_list(columns), engine, storage_options,
                   threshold_bytes, driver_read_bytes)
    if show:
        print(p)
    return p.to_dict()


def frame(
    spark: Any,
    path: str | os.PathLike[str],
    *,
    where: str | None = None,
    columns: Sequence[str] | None = None,
    storage_options: dict[str, Any] | None = None,
    shim: bool | None = None,
    driver_read_bytes: int | None = None,
) -> Any:
    """The dataset at ``path`` as a DataFrame whose queries prune with the filters Spark
    pushes (:mod:`pqindex.spark.filters`); every query plans afresh.

    On a classic session a local, unpartitioned dataset is read through the JVM read
    shim (:mod:`pqindex.spark.shim`): pqindex plans, Spark's own Parquet reader reads
    the kept row groups with the columns the query needs. ``shim=None`` uses it where
    it can (a one-line warning when it cannot be built or loaded), ``True`` requires
    it (:class:`UserInputError` saying why not), ``False`` never. A query whose plan
    keeps at most ``driver_read_bytes`` of pages (None:
    :data:`pqindex.spark.shim.DRIVER_READ_BYTES`, 2 MiB) is read by the driver with
    pqindex's reader and served by Spark from there (no task reads a file);
    ``driver_read_bytes=-1`` leaves every read to Spark's tasks.

    Otherwise (Spark Connect, object stores, hive partitions, lake tables): the
    ``"pqindex"`` Python data source, guarded, so a query with no filter Spark can push
    never reuses an earlier query's (PySpark 4.3 keeps the last pushdown's partitions
    and reader on the relation; see ``reader.GUARD``). Spark prunes no column of a
    Python data source, so every query reads every column of its matching rows:
    naming the columns the queries need (``columns``) is the one way to read fewer.

    ``where``: a predicate every query gets (SQL text, ANDed with the pushed filters).
    ``columns``: the DataFrame's columns (all by default)."""
    import json

    from pyspark.sql import functions as F

    from pqindex.spark.pipeline import register
    from pqindex.spark.reader import GUARD
    from pqindex.spark.secrets import hide

    if shim is not False and not storage_options:
        from pqindex.spark import shim as jvm_shim

        df, why = jvm_shim.frame(spark, os.fspath(path), driver_read_bytes)
        if df is not None:
            register(spark)  # spark.read.format("pqindex") and its pushdown, as ever
            if where is not None and where.strip():
                df = df.where(where)
            names = column_list(columns)
            return df.select(*names) if names is not None else df
        if shim:
            from pqindex.errors import UserInputError

            raise UserInputError(f"the JVM read shim cannot read this: {why}",
                                 path=os.fspath(path))
        if why is not None and jvm_shim.is_environment(why):
            jvm_shim.warn_fallback(why)
    elif shim:
        from pqindex.errors import UserInputError

        raise UserInputError("the JVM read shim reads local paths only (no storage_options)",
                             path=os.fspath(path))
    register(spark)
    reader = spark.read.format("pqindex").option("guard", "true")
    if (cores := parallelism(spark)) is not None:  # how far a small plan is split
        reader = reader.option("parallelism", str(cores))
    if where is not None and where.strip():
        reader = reader.option("where", where)
    if columns is not None:
        reader = reader.option("columns", json.dumps(column_list(columns)))
    if storage_options:
        reader = reader.option("storage_options", hide(spark, storage_options))
    return reader.load(os.fspath(path)).where(F.col(GUARD).isNotNull()).drop(GUARD)


def table(
    spark: Any,
    name: str,
    path: str | os.PathLike[str],
    *,
    where: str | None = None,
    columns: Sequence[str] | None = None,
    storage_options: dict[str, Any] | None = None,
    shim: bool | None = None,
    driver_read_bytes: int | None = None,
) -> Any:
    """The dataset at ``path`` as the temporary view ``name`` of ``spark``'s session, read
    as :func:`frame` reads it (the JVM shim or the ``"pqindex"`` data source):
    ``spark.sql("SELECT ... FROM name WHERE ...")`` and the DataFrame returned,
    filtered, prune with pqindex's indexes."""
    df = frame(spark, path, where=where, columns=columns, storage_options=storage_options,
               shim=shim, driver_read_bytes=driver_read_bytes)
    df.createOrReplaceTempView(name)
    return df
