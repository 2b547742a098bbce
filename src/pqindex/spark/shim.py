"""The JVM read shim: Spark's own Parquet reader on the row groups pqindex keeps.

A Python data source pays a fixed cost per query (a planning Python process, Python
tasks) and gets no column pruning (PySpark 4.3's ``DataSourceReader`` has no hook for
it). On a classic session :func:`~pqindex.spark.reading.frame` uses instead a small
DataSource V2 table written in Java (``jvm/PqIndexShim.java``):

* **Build.** Compiled on first use with ``javac`` against the running Spark's jars
  (pyspark's ``jars``, else ``$SPARK_HOME/jars``) into a cache directory keyed by
  the Spark version and the source's hash (:func:`cache_dir`), loaded into the
  session's JVM by a class loader of its own. Nothing is downloaded. It uses Spark
  internals (``ParquetScan``, ``FilePartition``, ``PartitionedFile``), so only the
  Spark versions of :data:`SPARK_VERSIONS` load it; anywhere else (another
  version, no ``javac``, a failed compilation or load) pqindex warns once and
  reads through the Python data source, as it does on Spark Connect.
* **Plan.** Every scan of every query gets a new scan builder; it takes Spark's
  pushed filters and required columns, and when it builds the scan asks the
  planner registered by this Python process (a Py4J callback, :class:`Planner`).
  The planner turns the filters into pqindex's predicate
  (:func:`pqindex.spark.filters.split_filters`), plans the dataset and answers the
  tasks: per kept file, byte ranges that hold the midpoints of exactly the kept row
  groups (:func:`row_group_spans`: Parquet readers read the row groups whose
  midpoint falls in their split), packed as Spark packs splits. When a sorted
  column's page bounds confine the kept rows to a few value ranges, the answer adds
  an *implied filter* on it (:func:`implied_filter`): Parquet then reads only those
  pages.
* **Read.** Spark's ``ParquetScan`` makes the reader factory: the native vectorized
  reader reads the ranges with the pruned columns and the pushed filters (its own
  row-group and page pruning on top). Every filter goes back to Spark, which
  applies it after the scan: pqindex only ever removes row groups (and, through the
  implied filter, pages) no row of which can match. Executors need no pqindex class (the tasks are Spark's own classes).
* **Small results read by the driver.** When the plan keeps at most
  ``driver_read_bytes`` of pages (:data:`DRIVER_READ_BYTES`; the bytes pqindex's
  planner counts for the query's columns), is expected to return at most
  :data:`LOCAL_ROWS` rows (its kept pages' rows, or a lookup's Bloom estimate:
  :func:`_few_rows`) and every column is of a flat type, the
  planner reads the rows itself (pqindex's page-level reader, on the dataset it
  keeps open) and hands them over as an Arrow IPC stream file; the scan becomes a
  ``LocalScan`` whose rows Spark serves from the driver (``LocalTableScanExec``):
  no task opens a file, no Parquet footer is read again. ``driver_read_bytes=-1``
  (:func:`frame`) keeps every read in Spark's tasks (a cluster whose driver should
  not read data). Spark still applies every filter above either scan.
* **Cost per query.** The planner keeps one open :class:`pqindex.Dataset` per path
  (footers, page indexes and embedded indexes decoded once) while the directory's
  listing (names, sizes, mtimes) stays the same; a changed listing opens it afresh.
  Both scans report statistics (rows, bytes) to Spark's planner.

Datasets the shim does not read (the Python data source does): object-store URLs,
hive-partitioned directories, lake tables (their snapshots and deletion vectors).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import uuid
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pqindex.errors import PqIndexError, UserInputError
from pqindex.format.column_index import PageIndex
from pqindex.format.schema import BoundaryOrder, PhysicalType
from pqindex.format.value_type import Kind, ValueType
from pqindex.format.values import Comparison, bound_order

if TYPE_CHECKING:
    from pqindex.dataset.dataset import Dataset
    from pqindex.format.file import ParquetFile
    from pqindex.plan.access import RowGroupPlan

__all__ = ["DRIVER_READ_BYTES", "SPARK_VERSIONS", "Planner", "cache_dir", "frame", "implied_filter", "is_environment",
           "row_group_spans", "tasks_of", "unavailable"]

# Spark versions (major.minor) the shim was checked with: it builds Spark-internal
# objects whose constructors change between versions.
SPARK_VERSIONS = ("4.3",)

SOURCE = Path(__file__).resolve().parent / "jvm" / "PqIndexShim.java"
CLASS = "pqindex.spark.jvm.PqIndexShim"

# Spark's defaults for packing file splits into tasks (spark.sql.files.maxPartitionBytes,
# spark.sql.files.openCostInBytes).
MAX_SPLIT_BYTES = 128 * 1024 * 1024
OPEN_COST_BYTES = 4 * 1024 * 1024

# A plan keeping at most this many bytes of pages (the planner's count for the query's
# columns) and expected to return at most LOCAL_ROWS rows (_few_rows) is read by the
# driver (see the module's notes). TPC-H sf 1 (bench/spark_native.py, docs/
# benchmarks.md): a lookup's 0.3 MiB read in 3-8 ms on an open dataset, the query
# 0.33-0.46x Spark's native reader against 0.46-0.61x through Spark's tasks; Q14's
# 76k rows (0.5 MiB) in 7-25 ms but as Arrow streams in the tasks 0.95-1.46x native,
# against 0.94-0.98x through byte ranges: more rows stay with Spark's reader.
DRIVER_READ_BYTES = 2 * 1024 * 1024
# A driver read of at most this many rows is served by the driver itself (a LocalScan:
# Spark copies each row, then serializes them into its tasks); more rows (an estimate
# that was low) go to the tasks as Arrow streams, ARROW_TASK_ROWS or more a task,
# which read them as columns.
LOCAL_ROWS = 1000
ARROW_TASK_ROWS = 32_768

# Spark types the driver read hands over (ArrowColumnVector reads them; flat only, so
# Spark's nested column pruning cannot differ from the files' fields).
_DRIVER_TYPES = frozenset({"boolean", "tinyint", "smallint", "int", "bigint", "float", "double",
                           "string", "binary", "date", "timestamp", "timestamp_ntz"})

_lock = threading.Lock()
# The loaded shim per Py4J gateway (one JVM), or why it cannot be loaded.
_shims: dict[int, Any] = {}
_why_not: dict[int, str] = {}
_warned: set[str] = set()
# Gateways whose executors have the shim's jar (driver reads handed to tasks as Arrow),
# and why not.
_arrow_ok: set[int] = set()
_why_not_arrow: dict[int, str] = {}


@dataclass(frozen=True)
class _Table:
    """What the planner needs of a shim table (its key travels with every request)."""

    path: str
    schema: Any  # Spark's StructType of the files
    parallelism: int
    driver_read_bytes: int  # see DRIVER_READ_BYTES; negative: never
    arrow_tasks: bool  # the executors can read Arrow partitions (the shim's jar)


_tables: dict[str, _Table] = {}

# Open datasets by path, with the listing they were opened on (see _dataset).
_OPEN_MAX = 16
_open: OrderedDict[str, tuple[Any, Dataset]] = OrderedDict()
_open_lock = threading.Lock()


def _dataset(path: str) -> Dataset:
    """The open dataset at ``path``: reused while the directory's listing (every file's
    name, size and mtime) is the one it was opened on, so its decoded footers and
    indexes serve the next query; opened afresh otherwise (a snapshot of its own)."""
    import pqindex
    from pqindex.spark.reading import _local_listing

    listing = _local_listing(path)
    with _open_lock:
        hit = _open.get(path)
        if hit is not None and listing is not None and hit[0] == listing:
            _open.move_to_end(path)
            return hit[1]
    ds = pqindex.dataset(path)
    if listing is not None:
        with _open_lock:
            # A replaced dataset is not closed: a query may still be planning or
            # reading with it; it is closed when the last reference goes.
            _open[path] = (listing, ds)
            _open.move_to_end(path)
            while len(_open) > _OPEN_MAX:
                _open.popitem(last=False)
    return ds


def cache_dir(spark_version: str, source: bytes) -> Path:
    """Where the classes compiled for ``spark_version`` from ``source`` live
    (``$PQINDEX_CACHE_DIR`` or ``~/.cache/pqindex``, then ``spark-shim/<version>-<hash>``)."""
    root = os.environ.get("PQINDEX_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pqindex")
    digest = hashlib.sha256(source).hexdigest()[:16]
    return Path(root) / "spark-shim" / f"{spark_version}-{digest}"


def _jars() -> Path | None:
    try:
        import pyspark
    except ImportError:
        return None
    here = Path(pyspark.__file__).resolve().parent / "jars"
    if here.is_dir():
        return here
    home = os.environ.get("SPARK_HOME")
    return Path(home) / "jars" if home and (Path(home) / "jars").is_dir() else None


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "javac"), os.X_OK):
        return os.path.join(home, "bin", "javac")
    return shutil.which("javac")


def compile_shim(spark_version: str) -> Path:
    """The directory of the shim's classes for ``spark_version``, compiled when missing.
    Raises :class:`RuntimeError` saying why it cannot be."""
    source = SOURCE.read_bytes()
    out = cache_dir(spark_version, source)
    if (out / "classes" / "ok").exists():
        return out / "classes"
    javac = _javac()
    if javac is None:
        raise RuntimeError("no javac (a JDK's compiler) on PATH or in JAVA_HOME")
    jars = _jars()
    if jars is None:
        raise RuntimeError("Spark's jars not found (pyspark's jars directory or $SPARK_HOME/jars)")
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out, prefix="build-"))
    try:
        proc = subprocess.run(
            [javac, "-nowarn", "-encoding", "UTF-8", "--release", "17", "-proc:none",
             "-cp", str(jars / "*"), "-d", str(tmp), str(SOURCE)],
            capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            first = (proc.stderr or proc.stdout).strip().splitlines()
            raise RuntimeError(f"javac failed: {first[0] if first else proc.returncode}")
        (tmp / "ok").write_text(spark_version)
        try:
            os.rename(tmp, out / "classes")  # atomic: another process may have won
        except OSError:
            if not (out / "classes" / "ok").exists():
                raise
    except subprocess.TimeoutExpired:
        raise RuntimeError("javac took over 300 s") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out / "classes"


def unavailable(spark: Any) -> str | None:
    """Why ``spark`` cannot read through the shim (None: it can), loading it on first use."""
    from pqindex.spark.workers import is_connect

    if is_connect(spark):
        return "a Spark Connect session (the shim needs the driver's JVM)"
    return None if _shim(spark) is not None else _why_not.get(id(_gateway(spark)))


def _gateway(spark: Any) -> Any:
    return spark.sparkContext._gateway


def _shim(spark: Any) -> Any:
    gw = _gateway(spark)
    key = id(gw)
    with _lock:
        if key in _shims:
            return _shims[key]
        if key in _why_not:
            return None
        try:
            shim = _load(spark, gw)
        except Exception as e:  # any failure: the Python data source reads instead
            text = " ".join(str(e).split())
            _why_not[key] = text[:300]
            return None
        _shims[key] = shim
        return shim


def _load(spark: Any, gw: Any) -> Any:
    from pyspark.java_gateway import ensure_callback_server_started

    version = str(spark.version)
    if ".".join(version.split(".")[:2]) not in SPARK_VERSIONS:
        raise RuntimeError(f"Spark {version}: the shim is checked with Spark "
                           f"{', '.join(SPARK_VERSIONS)} only (it uses Spark internals)")
    classes = compile_shim(version)
    jvm = spark._jvm
    urls = gw.new_array(jvm.java.net.URL, 1)
    urls[0] = jvm.java.io.File(str(classes) + os.sep).toURI().toURL()
    # A loader of its own under Spark's: no jar added to the session, nothing on the
    # executors (the tasks are Spark's classes).
    loader = jvm.java.net.URLClassLoader(urls, spark._jsparkSession.getClass().getClassLoader())
    cls = loader.loadClass(CLASS)
    shim = cls.getDeclaredConstructor(gw.new_array(jvm.java.lang.Class, 0)).newInstance(
        gw.new_array(jvm.java.lang.Object, 0))
    if str(shim.sparkVersion()) != version:
        raise RuntimeError(f"the JVM runs Spark {shim.sparkVersion()}, pyspark says {version}")
    ensure_callback_server_started(gw)  # type: ignore[no-untyped-call]
    shim.setPlanner(Planner())
    try:
        # The classes a task of a driver read deserializes (its Arrow partition and
        # reader): the executors load them from this jar.
        spark.sparkContext._jsc.sc().addJar(str(_jar(classes)))
        _arrow_ok.add(id(gw))
    except Exception as e:  # driver reads then serve their rows from the driver only
        _why_not_arrow[id(gw)] = " ".join(str(e).split())[:300]
    return shim


def _jar(classes: Path) -> Path:
    """A jar of the compiled ``classes`` next to them (made once)."""
    import zipfile

    jar = classes.parent / "pqindex-shim.jar"
    if jar.exists():
        return jar
    fd, tmp = tempfile.mkstemp(dir=classes.parent, prefix="jar-")
    try:
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w") as z:
            for p in sorted(classes.rglob("*.class")):
                z.write(p, p.relative_to(classes).as_posix())
        os.replace(tmp, jar)
    except BaseException:
        os.unlink(tmp)
        raise
    return jar


def is_environment(why: str) -> bool:
    """Whether ``why`` (from :func:`frame`) is a failure to build or load the shim (worth
    a warning), not a dataset or session it does not read."""
    return why in _why_not.values()


def warn_fallback(why: str) -> None:
    """Say once per reason that the Python data source reads instead of the shim."""
    if why in _warned:
        return
    _warned.add(why)
    warnings.warn(f"pqindex: the JVM read shim is unavailable ({why}); reading through "
                  "the Python data source", RuntimeWarning, stacklevel=4)


def frame(spark: Any, path: str, driver_read_bytes: int | None = None
          ) -> tuple[Any, str | None]:
    """(DataFrame of the dataset at ``path`` read through the shim, None), or (None, why
    not). ``driver_read_bytes``: see :data:`DRIVER_READ_BYTES` (None: that)."""
    from pqindex.spark.reading import _local, _native_base, parallelism

    why = unavailable(spark)
    if why is not None:
        return None, why
    local = _local(path) if "://" in path else os.path.abspath(path)
    if local is None:
        return None, "not a local path (Spark's reader would need the store's connector)"
    import pqindex
    from pqindex.dataset.tables.source import is_table_source

    if is_table_source(local):
        return None, "a lake table (its snapshot decides the files and rows)"
    with pqindex.dataset(local) as ds:
        if ds.discovery.partition_columns:
            return None, "hive partition columns"
    base = _native_base(spark, local)
    if base is None:
        return None, "Spark cannot read the path"
    from pyspark.sql.classic.dataframe import DataFrame

    key = uuid.uuid4().hex
    _tables[key] = _Table(local, base.schema,
                          parallelism(spark) or os.cpu_count() or 1,
                          DRIVER_READ_BYTES if driver_read_bytes is None else driver_read_bytes,
                          id(_gateway(spark)) in _arrow_ok)
    schema = base.schema.json()
    jdf = _shim(spark).frame(spark._jsparkSession, key, os.path.basename(local) or local,
                             schema, schema)
    return DataFrame(jdf, spark), None


class Planner:
    """The Py4J callback the shim's scans call with their pushed filters and columns."""

    def apply(self, request: str) -> str:
        try:
            return json.dumps(plan(json.loads(request)))
        except Exception as e:  # answered, so the JVM raises it with this message
            return json.dumps({"error": f"{type(e).__name__}: {e}"})

    class Java:
        implements: ClassVar[list[str]] = ["java.util.function.Function"]


def _value(v: dict[str, str]) -> Any:
    t, text = v["t"], v["v"]
    if t == "null":
        return None
    if t == "bool":
        return text == "true"
    if t == "int":
        return int(text)
    if t == "float":
        return float(text)
    if t == "decimal":
        return Decimal(text)
    if t == "str":
        return text
    if t == "bytes":
        return base64.b64decode(text)
    if t == "date":
        return dt.date.fromisoformat(text)
    if t == "instant":
        return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=int(text))
    if t == "local":
        return dt.datetime.fromisoformat(text)
    raise PqIndexError(f"unknown literal type {t!r} from the shim")


def spark_filter(j: dict[str, Any]) -> Any:
    """The shim's JSON of a Spark filter as pyspark's data source filter."""
    from pyspark.sql import datasource as D

    cls = getattr(D, j["name"])
    attr = tuple(j["columnPath"])
    if "value" not in j:
        f = cls(attribute=attr)
    elif j["name"] == "In":
        f = cls(attribute=attr, value=tuple(_value(v) for v in j["value"]))
    else:
        f = cls(attribute=attr, value=_value(j["value"]))
    return D.Not(f) if j["isNegated"] else f


def plan(request: dict[str, Any]) -> dict[str, Any]:
    """The planner's answer to one scan: ``{"tasks": [[[uri, start, length, file size,
    mtime ms], ...], ...], "rows", "bytes"}`` (plus ``"implied"``), or, for a result
    the driver read, ``{"local": Arrow IPC stream file or None (no row), "rows",
    "bytes"}``. ``rows`` and ``bytes`` are Spark's statistics: for tasks, the kept row
    groups' rows and the kept pages' bytes (upper bounds)."""
    from pqindex.expr.nodes import and_
    from pqindex.spark.filters import split_filters
    from pqindex.spark.reading import _kept_bytes

    table = _tables.get(request["id"])
    if table is None:
        raise PqIndexError(f"no shim table {request['id']!r} in this process")
    filters = [spark_filter(j) for j in request.get("filters", ())]
    used, _ = split_filters(filters, table.schema)
    exprs = [e for _, e in used]
    columns = [str(c) for c in request.get("columns", ())]
    ds = _dataset(table.path)
    while True:
        try:
            where = and_(*exprs) if exprs else None
            dplan = ds.plan(columns, where)
            break
        except UserInputError:
            # A literal the files' types refuse: find it, leave it to Spark.
            bad = next((i for i, e in enumerate(exprs) if not _plans(ds, e)), None)
            if bad is None:
                raise
            exprs.pop(bad)
    kept_bytes = _kept_bytes(dplan)
    if columns and 0 <= kept_bytes <= table.driver_read_bytes \
            and _driver_readable(request, table) \
            and _few_rows(dplan, where):
        try:
            return _read_here(ds, dplan, table, columns)
        except UserInputError:
            pass  # a column Spark's Arrow type refuses (as_spark): Spark's reader reads it
    pieces = []
    groups: list[tuple[ParquetFile, RowGroupPlan]] = []
    rows = 0
    for entry in dplan.kept:
        pf = entry.file
        kept = [rg.index for rg in entry.row_groups if not rg.skipped]
        rows += sum(rg.num_rows for rg in entry.row_groups if not rg.skipped)
        if pf is not None:
            groups += [(pf, rg) for rg in entry.row_groups if not rg.skipped]
        st = os.stat(entry.path)
        uri = Path(entry.path).resolve().as_uri()
        for start, length in _ranges(pf, kept):
            pieces.append([uri, start, length, st.st_size, st.st_mtime_ns // 1_000_000])
    answer: dict[str, Any] = {"tasks": tasks_of(pieces, table.parallelism), "rows": rows,
                              "bytes": kept_bytes}
    if IMPLIED_FILTERS and groups:
        imp = implied_filter(groups, _spark_types(table.schema), columns)
        if imp is not None:
            answer["implied"] = imp
    return answer


def _few_rows(dplan: Any, expr: Any) -> bool:
    """Whether the plan is expected to return at most :data:`LOCAL_ROWS` rows: the rows
    of its kept pages, or an equality lookup's estimate from its Bloom filters' sizes
    (``reading.lookup_rows``: a page of 20,000 rows may hold one key)."""
    from pqindex.spark.reading import lookup_rows

    kept = list(dplan.kept)
    if sum(rg.maybe.count() for e in kept for rg in e.row_groups) <= LOCAL_ROWS:
        return True
    if expr is None or any(e.file is None for e in kept):
        return False
    rows = lookup_rows(dplan, expr)
    return rows is not None and rows <= LOCAL_ROWS


def _driver_readable(request: dict[str, Any], table: _Table) -> bool:
    """Whether the scan's columns may be read by the driver: each a top-level field of
    the files with a flat type of :data:`_DRIVER_TYPES` (or a decimal). (No column, a
    count with no filter, stays with Spark: its footers give the count.)"""
    if table.driver_read_bytes < 0:
        return False
    fields = {f.name: f for f in table.schema.fields}
    for c in request.get("columns", ()):
        f = fields.get(c)
        if f is None:
            return False
        kind = f.dataType.simpleString()
        if kind not in _DRIVER_TYPES and not kind.startswith("decimal("):
            return False
    return True


def _read_here(ds: Dataset, dplan: Any, table: _Table, columns: list[str]
               ) -> dict[str, Any]:
    """The driver read of a small plan: the rows, cast to Spark's Arrow types for the
    scan's ``columns``, in an Arrow IPC stream file the JVM reads and deletes."""
    import pyarrow as pa
    from pyspark.sql.types import StructField, StructType

    from pqindex.spark.reader import as_spark, spark_arrow_schema

    got = ds.scan(plan=dplan).to_table()
    fields = {f.name: f for f in table.schema.fields}
    schema = StructType([StructField(c, fields[c].dataType, True) for c in columns])
    target = spark_arrow_schema(schema)
    n = got.num_rows
    if n == 0:
        return {"local": None, "rows": 0, "bytes": 0}
    pieces = 1
    if n > LOCAL_ROWS and table.arrow_tasks:
        pieces = max(1, min(table.parallelism, n // ARROW_TASK_ROWS))
    names = []
    try:
        for i in range(pieces):
            part = got.slice(i * n // pieces, (i + 1) * n // pieces - i * n // pieces)
            fd, name = tempfile.mkstemp(prefix="pqindex-rows-", suffix=".arrow")
            names.append(name)
            with os.fdopen(fd, "wb") as f, pa.ipc.new_stream(f, target) as w:
                for b in part.to_batches():
                    w.write_batch(as_spark(b, target))
    except BaseException:
        for name in names:
            os.unlink(name)
        raise
    if n > LOCAL_ROWS and table.arrow_tasks:
        return {"arrow": names, "rows": n, "bytes": got.nbytes}
    return {"local": names[0], "rows": n, "bytes": got.nbytes}


def _plans(ds: Any, expr: Any) -> bool:
    try:
        ds.plan([], expr)
    except UserInputError:
        return False
    return True


def row_group_spans(pf: Any) -> list[tuple[int, int]] | None:
    """Per row group of ``pf`` (pqindex's ParquetFile), the byte span ``[start, end)``
    from its first column chunk to the next row group's (the footer for the last),
    when each row group's midpoint as Parquet readers compute it (parquet-mr:
    first chunk's offset plus half the row group's compressed size) lies in its own
    span; None when it does not (a file laid out otherwise: read it whole)."""
    groups = pf.metadata.row_groups or []
    starts, mids = [], []
    for rg in groups:
        cols = rg.columns or []
        if not cols or any(c.meta_data is None for c in cols):
            return None
        offs = []
        for c in cols:
            md = c.meta_data
            o = md.data_page_offset or 0
            d = md.dictionary_page_offset
            offs.append(min(o, d) if d is not None and d > 0 else o)
        starts.append(min(offs))
        total = rg.total_compressed_size or sum(c.meta_data.total_compressed_size or 0
                                                for c in cols)
        mids.append(offs[0] + total // 2)
    ends = [*starts[1:], pf.footer_offset]
    for s, m, e in zip(starts, mids, ends, strict=True):
        if not s < e or not s <= m < e:
            return None
    return list(zip(starts, ends, strict=True))


def _ranges(pf: Any, kept: list[int]) -> list[tuple[int, int]]:
    """(start, length) pieces of ``pf`` holding exactly the row groups ``kept``
    (consecutive ones in one piece); the whole file when its layout is unusual."""
    spans = row_group_spans(pf)
    if spans is None:
        return [(0, int(pf.file_size))]
    out: list[tuple[int, int]] = []
    prev = None
    for i in sorted(kept):
        s, e = spans[i]
        if prev is not None and prev == i - 1:
            out[-1] = (out[-1][0], e - out[-1][0])
        else:
            out.append((s, e - s))
        prev = i
    return out


def tasks_of(pieces: list[list[Any]], parallelism: int) -> list[list[list[Any]]]:
    """Pieces packed into tasks as Spark packs file splits: largest first, next fit,
    up to a split size of the total spread over ``parallelism`` (4 MiB to 128 MiB)."""
    if not pieces:
        return []
    total = sum(p[2] + OPEN_COST_BYTES for p in pieces)
    limit = min(MAX_SPLIT_BYTES, max(OPEN_COST_BYTES, total // max(1, parallelism)))
    tasks: list[list[list[Any]]] = []
    size = 0
    for p in sorted(pieces, key=lambda p: -p[2]):
        if tasks and size + p[2] <= limit:
            tasks[-1].append(p)
            size += p[2] + OPEN_COST_BYTES
        else:
            tasks.append([p])
            size = p[2] + OPEN_COST_BYTES
    return tasks


# ---------------------------------------------------------------- implied filters
#
# Spark's Parquet reader takes whole row groups; pqindex often knows the few pages of a
# row group that may match (a page-scope index, the page index of another column).
# parquet-mr selects pages only through the pushed filters (column-index filtering on
# their columns). So the planner adds a filter every row pqindex keeps satisfies: for a
# column whose bounds pqindex trusts, kept rows [r0, r1) hold values within the bounds
# of the column's pages overlapping [r0, r1). ``col BETWEEN lo AND hi`` (an OR of
# such ranges over every kept row group) drops no row that may match; on a sorted
# column parquet-mr then reads only its pages in the ranges and the other columns'
# pages of those rows. Spark never sees the filter: its own are applied after the scan.

IMPLIED_FILTERS = True  # off: the shim hands Parquet Spark's filters only (tests, A/B)
IMPLIED_MAX_RANGES = 8  # more ranges are merged (widened): still implied
# Added only when pqindex keeps at most this share of the kept row groups' rows and
# the ranges select at most this share of them (else Parquet would read as much).
IMPLIED_MAX_SHARE = 0.5

# Parquet types whose order (pqindex's bound order SIGNED) is Spark's, as the type tag
# the JVM turns into the literal Spark's Parquet filters take, with the Spark types
# it reads as. Floats (NaN, -0.0), strings (truncated bounds, collations), decimals
# and INT96 are left out.
_TAGS = {"int": ("IntegerType", "ShortType", "ByteType"), "long": ("LongType",),
         "date": ("DateType",), "micros": ("TimestampType",), "millis": ("TimestampType",)}


def _spark_types(schema: Any) -> dict[str, str]:
    """Top-level field name -> Spark type name (``IntegerType``, ...)."""
    return {f.name: type(f.dataType).__name__ for f in schema.fields}


def _tag(vt: ValueType) -> str | None:
    if vt.kind == Kind.INT and vt.physical == PhysicalType.INT32:
        return "int"
    if vt.kind == Kind.INT and vt.physical == PhysicalType.INT64:
        return "long"
    if vt.kind == Kind.DATE and vt.physical == PhysicalType.INT32:
        return "date"
    if vt.kind == Kind.TIMESTAMP and vt.physical == PhysicalType.INT64 and vt.utc \
            and vt.unit in ("micros", "millis"):
        return str(vt.unit)
    return None


def _leaf_of(pf: ParquetFile, name: str, tag: str) -> int | None:
    """The leaf ``name`` of ``pf`` if it is top-level, flat, of type ``tag`` and its
    bounds compare as signed integers."""
    for leaf in pf.schema.leaves:
        if leaf.path == (name,):
            if leaf.max_repetition_level or _tag(ValueType.from_leaf(leaf)) != tag:
                return None
            if bound_order(leaf).comparison != Comparison.SIGNED:
                return None
            return leaf.index
    return None


def _page_ranges(pf: ParquetFile, rg: RowGroupPlan, col: int, width: int
                 ) -> tuple[list[tuple[int, int]], PageIndex, Any] | None:
    """The (min, max) raw values of the pages of ``col`` overlapping the rows ``rg``
    keeps; None unless each is trusted by pqindex and has no null."""
    pi = PageIndex.load(pf, rg.index, col)
    ci = pf.column_index(rg.index, col)
    if pi is None or ci is None or pi.reason is not None or ci.min_values is None \
            or ci.max_values is None:
        return None
    pages = rg.maybe.overlapping_pages(pi.first_rows, rg.num_rows).tolist()
    out = []
    for p in pages:
        if not (pi.bounds_usable[p] and pi.no_nulls[p]) or pi.all_null[p]:
            return None
        lo = int.from_bytes(ci.min_values[p], "little", signed=True)
        hi = int.from_bytes(ci.max_values[p], "little", signed=True)
        if len(ci.min_values[p]) != width or len(ci.max_values[p]) != width or lo > hi:
            return None
        out.append((lo, hi))
    return out, pi, ci


def merge_ranges(ranges: list[tuple[int, int]], cap: int) -> list[tuple[int, int]]:
    """``ranges`` sorted and merged (overlapping or adjacent integers), then the
    closest neighbours merged until at most ``cap`` remain (a merge only widens)."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    while len(out) > cap:
        i = min(range(len(out) - 1), key=lambda k: out[k + 1][0] - out[k][1])
        out[i:i + 2] = [(out[i][0], max(out[i][1], out[i + 1][1]))]
    return out


def _selected_rows(pi: PageIndex, ci: Any, ranges: list[tuple[int, int]]) -> int:
    """Rows in the pages whose bounds meet ``ranges`` (what parquet-mr keeps)."""
    rows = 0
    for p in range(pi.num_pages):
        if pi.bounds_usable[p] and not pi.all_null[p]:
            lo = int.from_bytes(ci.min_values[p], "little", signed=True)
            hi = int.from_bytes(ci.max_values[p], "little", signed=True)
            if not any(a <= hi and lo <= b for a, b in ranges):
                continue
        rows += int(pi.row_counts[p])
    return rows


def implied_filter(groups: list[tuple[ParquetFile, RowGroupPlan]],
                   spark_types: dict[str, str], columns: Any = ()) -> dict[str, Any] | None:
    """The implied filter for the kept row groups ``groups`` (see above) as
    ``{"column", "type", "ranges": [[lo, hi], ...]}`` (raw Parquet values: days,
    micros or millis), or None when none is both safe and worth it. Of several, the
    one selecting the fewest rows, then one of ``columns`` (read anyway)."""
    read = set(columns)
    total = sum(rg.num_rows for _, rg in groups)
    if sum(rg.maybe.count() for _, rg in groups) > IMPLIED_MAX_SHARE * total:
        return None
    pf0, rg0 = groups[0]
    best: tuple[tuple[int, bool], dict[str, Any]] | None = None
    for leaf in pf0.schema.leaves:
        name = leaf.path[0]
        tag = _tag(ValueType.from_leaf(leaf))
        if tag is None or spark_types.get(name) not in _TAGS[tag] or "." in name \
                or "`" in name or _leaf_of(pf0, name, tag) is None:
            continue
        ci0 = pf0.column_index(rg0.index, leaf.index)
        if ci0 is None or ci0.boundary_order not in (BoundaryOrder.ASCENDING,
                                                      BoundaryOrder.DESCENDING):
            continue  # an unsorted column's pages span most values: no page is skipped
        width = 4 if leaf.physical_type == PhysicalType.INT32 else 8
        found = []
        for pf, rg in groups:
            col = _leaf_of(pf, name, tag)
            got = None if col is None else _page_ranges(pf, rg, col, width)
            if got is None:
                break
            found.append(got)
        else:
            ranges = merge_ranges([r for got in found for r in got[0]], IMPLIED_MAX_RANGES)
            rows = sum(_selected_rows(pi, ci, ranges) for _, pi, ci in found)
            key = (rows, name not in read)
            if rows <= IMPLIED_MAX_SHARE * total and (best is None or key < best[0]):
                best = (key, {"column": name, "type": tag,
                               "ranges": [list(r) for r in ranges]})
    return None if best is None else best[1]
