"""``pqindex.spark.write``: distribute, sort (or Z-order) and write through the data source."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from pqindex.errors import UserInputError
from pqindex.io.source import is_object_store_url
from pqindex.spark.commit import data_files, load_manifest
from pqindex.spark.remote_commit import data_objects
from pqindex.spark.secrets import hide
from pqindex.spark.task import DEFAULT_TARGET_FILE_BYTES
from pqindex.spark.workers import WorkerCheck, ensure_workers
from pqindex.write.writer import (
    AUTO,
    DEFAULT_PAGE_ROWS,
    DEFAULT_ROW_GROUP_ROWS,
    IndexSpec,
    index_kinds,
)

__all__ = ["ZKEY", "register", "write", "zorder"]

ZKEY = "__pqindex_zkey"
_HELPER = "__pqindex_z"
ZORDER_BITS = 10  # 1024 rank buckets per column; 4 columns still fit a long
_UNKNOWN_SIZE = 1 << 62

SortSpec = str | Sequence[str | tuple[str, str]] | None


def register(spark: Any) -> WorkerCheck:
    """Make ``df.write.format("pqindex")`` and ``spark.read.format("pqindex")`` available in
    this session, with Spark's filter pushdown to Python data sources turned on
    (a ``RuntimeWarning`` says so where Spark has none: before 4.1).

    First makes sure Spark's Python workers import pqindex (see
    :func:`pqindex.spark.workers.ensure_workers`): the registration carries the
    files shipped to them so far, so it must come after any shipping.
    """
    from pqindex.spark.filters import enable_pushdown
    from pqindex.spark.source import PqIndexDataSource

    check = ensure_workers(spark)
    spark.dataSource.register(PqIndexDataSource)
    missing = enable_pushdown(spark)
    if missing is not None:
        warnings.warn(missing, RuntimeWarning, stacklevel=3)
    return check


def _sort_spec(sort_by: SortSpec) -> list[tuple[str, str]]:
    if sort_by is None:
        return []
    items = [sort_by] if isinstance(sort_by, str) else list(sort_by)
    out = []
    for item in items:
        name, order = (item, "ascending") if isinstance(item, str) else (item[0], item[1])
        if order not in ("ascending", "descending"):
            raise UserInputError(f"sort order of {name!r} must be 'ascending' or 'descending'")
        out.append((name, order))
    return out


def _names(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _sortable(df: Any, name: str) -> Any:
    """A numeric Spark column that orders like ``name`` (strings: their first 7 bytes)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    dtype = df.schema[name].dataType
    c = F.col(name)
    if isinstance(dtype, (T.NumericType,)):
        return c.cast("double")
    if isinstance(dtype, T.BooleanType):
        return c.cast("int").cast("double")
    if isinstance(dtype, T.DateType):
        return F.unix_date(c).cast("double")
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return F.unix_micros(c.cast("timestamp")).cast("double")
    if isinstance(dtype, (T.StringType, T.BinaryType)):
        prefix = F.rpad(F.hex(F.substring(c.cast("binary"), 1, 7)), 14, "0")
        return F.conv(prefix, 16, 10).cast("long").cast("double")
    raise UserInputError(f"cannot cluster by {name!r} of type {dtype.simpleString()}")


def _interleave(buckets: Sequence[np.ndarray], bits: int) -> np.ndarray:
    z = np.zeros(len(buckets[0]), dtype=np.int64)
    k = len(buckets)
    for i in range(bits):
        for j, b in enumerate(buckets):
            z |= ((b >> i) & 1) << (i * k + j)
    return z


def zorder(df: Any, columns: Sequence[str], *, bits: int = ZORDER_BITS) -> Any:
    """``df`` with a Z-order key column (``ZKEY``) over rank-normalized ``columns``.

    Each column is mapped to a number that orders like it, cut into ``2**bits``
    buckets at approximate quantiles (so skewed columns still use every bucket),
    and the buckets' bits are interleaved. Nulls fall in bucket 0, first, as
    Spark sorts them.
    """
    from pyspark.sql import types as T

    if not 2 <= len(columns) <= 4:
        raise UserInputError("cluster_by takes 2 to 4 columns")
    for c in columns:
        if c not in df.columns:
            raise UserInputError(f"no column {c!r} to cluster by")
    helpers = [f"{_HELPER}{i}" for i in range(len(columns))]
    tmp = df.select(
        "*", *[_sortable(df, c).alias(h) for c, h in zip(columns, helpers, strict=True)]
    )
    probs = [i / (1 << bits) for i in range(1, 1 << bits)]
    quantiles = tmp.approxQuantile(helpers, probs, 0.001)
    bounds = [np.unique(np.asarray(q, dtype=np.float64)) for q in quantiles]
    names = list(df.columns)
    out_schema = T.StructType([*df.schema.fields, T.StructField(ZKEY, T.LongType(), False)])

    def add_key(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            buckets = []
            for h, bd in zip(helpers, bounds, strict=True):
                col = b.column(h)
                v = col.to_numpy(zero_copy_only=False).astype(np.float64)
                bk = np.searchsorted(bd, v, side="right").astype(np.int64) + 1
                bk[col.is_null().to_numpy(zero_copy_only=False)] = 0
                buckets.append(np.minimum(bk, (1 << bits) - 1))
            z = _interleave(buckets, bits) if b.num_rows else np.zeros(0, np.int64)
            yield pa.RecordBatch.from_arrays(
                [b.column(n) for n in names] + [pa.array(z, pa.int64())], names=[*names, ZKEY]
            )

    return tmp.mapInArrow(add_key, out_schema)


_SIZE = re.compile(r"sizeInBytes=([0-9.]+)\s*([KMGTPE]i)?B")
_UNITS = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50}


def plan_size(df: Any) -> int | None:
    """Spark's estimate of ``df``'s size in bytes (its optimized plan's statistics).

    Read from ``explain(mode="cost")``, which classic and Connect sessions both
    print; None when Spark gives no usable figure.
    """
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            df.explain(mode="cost")
    except Exception:
        return None
    m = _SIZE.search(out.getvalue())
    if m is None or m.group(2) == "Ei":
        return None  # Spark says 8.0 EiB when it does not know
    size = int(float(m.group(1)) * _UNITS[m.group(2)])
    return size if size < _UNKNOWN_SIZE else None


def _partitions(df: Any, target_file_bytes: int, parallelism: int) -> int:
    """Enough tasks that each writes about one target-size file (a task rolls over anyway)."""
    size = plan_size(df)
    if size is None:
        sample = df.limit(10_000).toArrow()
        width = sample.nbytes / max(1, sample.num_rows)
        size = int(df.count() * width)
    n = math.ceil(size / target_file_bytes)
    if n > 1:  # more than one file anyway: use every core
        n = max(n, parallelism)
    return max(1, min(10_000, n))


def write(
    df: Any,
    path: str | os.PathLike[str],
    *,
    sort_by: SortSpec,
    cluster_by: Sequence[str] | None = None,
    partition_by: str | Sequence[str] | None = None,
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES,
    page_rows: int = DEFAULT_PAGE_ROWS,
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
    bloom: Sequence[str] | None = None,
    indexes: IndexSpec = AUTO,
    bloom_scope: str | Sequence[str] | None = None,
    mode: str = "error",
    compression: str = "zstd",
    num_partitions: int | None = None,
    options: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    table_format: str | None = None,
    catalog: Mapping[str, str] | None = None,
    key_index: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Write ``df`` as an indexed dataset at ``path``; a summary of what was written.

    ``key_index``: columns whose lake-wide key index (``dataset/key_index.py``) the
    job builds from the files it writes and commits with the manifest (delta shards
    when an append joins an index of the same columns).

    ``table_format="delta"``: ``path`` is a Delta table (made, appended to or
    overwritten as ``mode`` says): Spark writes the indexed files to a staging
    directory as below, then the driver moves them into the table and commits them
    as one Delta transaction with each file's statistics (``_write_delta``; on an
    object store the files are committed where the job wrote them, ``storage_options``
    serving deltalake too). ``table_format="iceberg"``: ``path`` is a table identifier
    (``"ns.events"``) in the pyiceberg catalog ``catalog`` (pyiceberg properties:
    ``{"type": "sql", "uri": ..., "warehouse": ...}``, REST, Glue...): the table is
    created when missing (``mode`` "error" requires that), the files written under
    its ``data/`` and committed as one snapshot (``add_files``; an overwrite replaces
    the table's rows in the same transaction). No ``partition_by`` for Iceberg yet.

    Rows are range-partitioned on ``partition_by`` + ``sort_by`` (or on a Z-order
    key over ``cluster_by``, 2-4 columns, with ``sort_by`` breaking ties) and sorted
    within each task; every task writes files of about ``target_file_bytes`` (Arrow
    size) through pqindex's writer, with ``bloom`` (Parquet Bloom filters) and
    ``indexes`` (embedded, as in ``pqindex.write_table``, whose default ``"auto"`` it
    shares: a distinct index on each low-cardinality column; None: none; ``bloom_scope``: the scopes
    of an embedded ``bloom`` index, e.g. ``"page"`` for filters that narrow a lookup
    on an unsorted column to pages). ``mode``: ``error`` (the
    destination must hold no data), ``append`` or ``overwrite``; the old data of an
    overwrite is removed only once the new data is committed. ``options``: extra
    data source options.

    ``path`` may be an object-store URL (``s3://bucket/table``): executors write
    through pqindex's storage layer with ``storage_options`` (sent to them as a
    data source option; executors need the endpoint and credentials too, or the
    standard environment variables), and the driver commits with conditional
    PUTs of the manifest (``spark.remote_commit``). The option's value is one
    that Spark's string redaction hides wherever it prints the plan (a Spark
    Connect server's event log, ``explain()``; see :mod:`pqindex.spark.secrets`).
    """
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    if mode not in ("error", "append", "overwrite"):
        raise UserInputError(f"mode must be error, append or overwrite, not {mode!r}")
    if table_format is not None and key_index:
        raise UserInputError("key_index is not built for Delta or Iceberg tables yet")
    if table_format is not None:
        inner = dict(sort_by=sort_by, cluster_by=cluster_by, partition_by=partition_by,
                     target_file_bytes=target_file_bytes, page_rows=page_rows,
                     row_group_rows=row_group_rows, bloom=bloom, indexes=indexes,
                     bloom_scope=bloom_scope, compression=compression,
                     num_partitions=num_partitions, options=options)
        if table_format == "delta":
            return _write_delta(df, os.fspath(path), mode, partition_by, t0, inner,
                                storage_options)
        if table_format == "iceberg":
            return _write_iceberg(df, os.fspath(path), mode, catalog, t0, inner,
                                  storage_options)
        raise UserInputError(f"table_format must be 'delta' or 'iceberg' (or None), "
                             f"not {table_format!r}")
    raw_path = os.fspath(path)
    remote = is_object_store_url(raw_path)
    # A URL stays a URL: abspath would turn "s3://b/t" into a local folder "s3:".
    dest = raw_path.rstrip("/") if remote else os.path.abspath(raw_path)
    so = {str(k): str(v) for k, v in (storage_options or {}).items()}
    sort = _sort_spec(sort_by)
    cluster = list(cluster_by or [])
    parts = _names(partition_by)
    if not sort and not cluster:
        raise UserInputError("give sort_by or cluster_by")
    for c in [c for c, _ in sort] + parts:
        if c not in df.columns:
            raise UserInputError(f"no column {c!r} (columns: {', '.join(df.columns)})")
    if mode == "error" and (data_objects(dest, so) if remote else data_files(dest)):
        raise UserInputError("the destination already holds data (mode='error')", path=dest)
    spark = df.sparkSession
    check = register(spark)
    n = num_partitions or _partitions(df, target_file_bytes, check.parallelism)

    def order(name: str, how: str) -> Any:
        return F.col(name).desc() if how == "descending" else F.col(name).asc()

    sort_cols = [order(c, how) for c, how in sort]
    if cluster:
        data = zorder(df, cluster)
        key = [F.col(ZKEY).asc()]
        shaped = (
            data.repartitionByRange(n, *[F.col(p) for p in parts], *key)
            .sortWithinPartitions(*[F.col(p) for p in parts], *key, *sort_cols)
            .drop(ZKEY)
        )
    else:
        shaped = df.repartitionByRange(
            n, *[F.col(p) for p in parts], *sort_cols
        ).sortWithinPartitions(*[F.col(p) for p in parts], *sort_cols)
    job_id = uuid.uuid4().hex
    opts = {
        "sort_by": ",".join(f"{c} {'desc' if how == 'descending' else 'asc'}" for c, how in sort),
        "partition_by": ",".join(parts),
        "cluster_by": ",".join(cluster),
        # Z-ordered files are not sorted by sort_by, so they must not claim to be.
        "presorted": "true",
        "target_file_bytes": str(target_file_bytes),
        "page_rows": str(page_rows),
        "row_group_rows": str(row_group_rows),
        "compression": compression,
        "bloom": ",".join(bloom or []),
        "indexes": AUTO if indexes == AUTO else json.dumps(index_kinds(indexes)),
        **({"bloom_scope": bloom_scope if isinstance(bloom_scope, str)
            else ",".join(bloom_scope)} if bloom_scope else {}),
        "mode": mode,
        "job_id": job_id,
        **({"key_index": ",".join(key_index)} if key_index else {}),
        **({"storage_options": hide(spark, so)} if so else {}),
        **dict(options or {}),
    }
    if cluster:
        opts["sort_by"] = ""
    spark_mode = "overwrite" if mode == "overwrite" else "append"
    shaped.write.format("pqindex").options(**opts).mode(spark_mode).save(dest)
    if remote:
        from pqindex.spark.remote_commit import _load

        manifest = _load(dest, so)[0] or {}
    else:
        manifest = load_manifest(dest) or {}
    last = manifest.get("last_commit") or {}
    if last.get("job") != job_id:
        raise UserInputError("the job finished but its manifest is missing", path=dest)
    return {
        "path": dest,
        "files": last["files"],
        "rows": last["rows"],
        "bytes": last["bytes"],
        "index_bytes": last["index_bytes"],
        "region_bytes": last["region_bytes"],
        "tasks": n,
        "shipped": check.shipped,
        "seconds": time.perf_counter() - t0,
    }


@contextlib.contextmanager
def _table_staging(parent: str) -> Iterator[tuple[str, list[str]]]:
    """A staging directory under ``parent`` for a table write, and the list of the files
    moved from it into the table: removed if the write or its commit fails. The
    staging directory is removed either way."""
    import shutil

    root = os.path.join(parent, "_pqindex_table_staging")
    staging = os.path.join(root, uuid.uuid4().hex)
    moved: list[str] = []
    try:
        yield staging, moved
    except BaseException:
        for p in moved:
            with contextlib.suppress(OSError):
                os.unlink(p)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.rmdir(root)  # (another write's staging may still be there)


def _hive_values(rel: str) -> dict[str, str | None]:
    """The raw partition values of a file's ``k=v`` directories (``rel``: ``/``-separated)."""
    import urllib.parse

    values: dict[str, str | None] = {}
    for d in rel.split("/")[:-1]:
        k, _, v = d.partition("=")
        values[urllib.parse.unquote(k)] = (
            None if v == "__HIVE_DEFAULT_PARTITION__" else urllib.parse.unquote(v))
    return values


def _write_delta(df: Any, path: str, mode: str, partition_by: str | Sequence[str] | None,
                 t0: float, options: dict[str, Any],
                 storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``write(..., table_format="delta")``: the files written to a staging directory
    inside the table (no Delta reader looks at a file its log does not name), moved
    beside the table's files under their (unique) names, then committed as one
    transaction. A failed job or commit removes what it wrote; the table is unchanged.
    On an object store (no rename) the files stay where the job wrote them, in a
    directory of their own inside the table, and the log names them there."""
    from pqindex.dataset.tables.commit import commit_delta_files
    from pqindex.spark.commit import data_files

    if is_object_store_url(path):
        return _write_delta_remote(df, path.rstrip("/"), mode, partition_by, t0, options,
                                   storage_options)
    dest = os.path.abspath(path)
    parts = _names(partition_by)
    with _table_staging(dest) as (staging, moved):
        summary = write(df, staging, mode="error", **options)
        files = []
        for rel in sorted(data_files(staging)):
            rel = rel.replace(os.sep, "/")
            target = os.path.join(dest, *rel.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.rename(os.path.join(staging, *rel.split("/")), target)
            moved.append(target)
            files.append((rel, _hive_values(rel)))
        schema = df.limit(0).toArrow().schema
        version = commit_delta_files(dest, files, schema, parts, mode)
    summary.update(path=dest, table_format="delta", version=version,
                   seconds=time.perf_counter() - t0)
    return summary


def _write_delta_remote(df: Any, dest: str, mode: str,
                        partition_by: str | Sequence[str] | None, t0: float,
                        options: dict[str, Any],
                        storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """:func:`_write_delta` on an object store: the job writes under
    ``<table>/pqindex-write-<id>/`` (a plain directory name: Delta's VACUUM keeps the
    files the log names and removes them once removed), the driver lists them and
    commits them where they are. A failure removes every object the job wrote."""
    from pqindex.dataset.discovery import MANIFEST_NAME
    from pqindex.dataset.tables.commit import commit_delta_files, remove_written

    so = {str(k): str(v) for k, v in (storage_options or {}).items()}
    prefix = f"pqindex-write-{uuid.uuid4().hex[:16]}"
    staging = f"{dest}/{prefix}"
    try:
        summary = write(df, staging, mode="error", storage_options=so, **options)
        objects = data_objects(staging, so)
        files = [(f"{prefix}/{rel}", _hive_values(rel)) for rel in sorted(objects)]
        schema = df.limit(0).toArrow().schema
        version = commit_delta_files(
            dest, files, schema, _names(partition_by), mode, storage_options=so,
            sizes={f"{prefix}/{rel}": info.size for rel, info in objects.items()})
    except BaseException:
        from pqindex.io.listing import list_objects

        with contextlib.suppress(Exception):  # best effort: the table itself is unchanged
            remove_written([url for url, _info in list_objects(staging + "/", so)], so)
        raise
    # The job's own commit point: the log names the files now.
    remove_written([f"{staging}/{MANIFEST_NAME}"], so)
    summary.update(path=dest, table_format="delta", version=version,
                   seconds=time.perf_counter() - t0)
    return summary


def _write_iceberg(df: Any, identifier: str, mode: str, catalog: Mapping[str, str] | None,
                   t0: float, options: dict[str, Any],
                   storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``write(..., table_format="iceberg")``: the files written to a staging directory
    under the table's ``data/``, moved beside it, then committed by pyiceberg as one
    snapshot (``add_files`` reads each footer for the manifest's metrics). A failed
    job or commit removes what it wrote; the table is unchanged. A table on an object
    store: ``_write_iceberg_remote``."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.expressions import AlwaysTrue

    from pqindex.dataset.tables.commit import TableCommitError
    from pqindex.spark.commit import data_files

    if catalog is None:
        raise UserInputError("table_format='iceberg' needs catalog= (pyiceberg properties)")
    if _names(options.get("partition_by")):
        raise UserInputError("partition_by is not supported with table_format='iceberg' yet")
    props = {str(k): str(v) for k, v in catalog.items()}
    cat = load_catalog(props.pop("name", "pqindex"), **props)
    try:
        table = cat.load_table(identifier)
        if mode == "error":
            raise UserInputError("the Iceberg table exists already (mode='error')",
                                 path=identifier)
    except NoSuchTableError:
        table = cat.create_table(identifier, schema=df.limit(0).toArrow().schema)
    location = table.location().removeprefix("file://")
    if is_object_store_url(location):
        return _write_iceberg_remote(df, table, identifier, location.rstrip("/"), mode, t0,
                                     options, storage_options)
    if "://" in location:
        raise UserInputError("table_format='iceberg' writes tables on local disks and "
                             "object stores", path=location)
    data = os.path.join(location, "data")
    with _table_staging(data) as (staging, moved):
        summary = write(df, staging, mode="error", **options)
        for rel in sorted(data_files(staging)):
            target = os.path.join(data, os.path.basename(rel))
            os.rename(os.path.join(staging, rel), target)
            moved.append(target)
        try:
            with table.transaction() as tx:
                if mode == "overwrite":
                    tx.delete(AlwaysTrue())
                tx.add_files([f"file://{p}" for p in moved])
        except Exception as e:  # pyiceberg's commit and validation errors
            raise TableCommitError(f"Iceberg commit failed: {e}", path=identifier) from None
    snapshot = table.current_snapshot()
    summary.update(path=location, table_format="iceberg",
                   snapshot_id=None if snapshot is None else snapshot.snapshot_id,
                   seconds=time.perf_counter() - t0)
    return summary


def _write_iceberg_remote(df: Any, table: Any, identifier: str, location: str, mode: str,
                          t0: float, options: dict[str, Any],
                          storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """:func:`_write_iceberg` on an object store (no rename): the job writes under
    ``<table>/data/pqindex-write-<id>/`` with ``storage_options``, the driver lists the
    files and pyiceberg commits them where they are, as one snapshot (its FileIO,
    configured by the catalog's properties, reads their footers). A failed job or
    commit removes every object the job wrote; the table is unchanged."""
    from pyiceberg.expressions import AlwaysTrue

    from pqindex.dataset.discovery import MANIFEST_NAME
    from pqindex.dataset.tables.commit import TableCommitError, remove_written
    from pqindex.io.listing import list_objects

    so = {str(k): str(v) for k, v in (storage_options or {}).items()}
    staging = f"{location}/data/pqindex-write-{uuid.uuid4().hex[:16]}"
    try:
        summary = write(df, staging, mode="error", storage_options=so, **options)
        files = [f"{staging}/{rel}" for rel in sorted(data_objects(staging, so))]
        try:
            with table.transaction() as tx:
                if mode == "overwrite":
                    tx.delete(AlwaysTrue())
                tx.add_files(files)
        except Exception as e:  # pyiceberg's commit and validation errors
            raise TableCommitError(f"Iceberg commit failed: {e}", path=identifier) from None
    except BaseException:
        with contextlib.suppress(Exception):  # best effort: the table itself is unchanged
            remove_written([url for url, _info in list_objects(staging + "/", so)], so)
        raise
    # The job's own commit point: the table's metadata names the files now.
    remove_written([f"{staging}/{MANIFEST_NAME}"], so)
    snapshot = table.current_snapshot()
    summary.update(path=location, table_format="iceberg",
                   snapshot_id=None if snapshot is None else snapshot.snapshot_id,
                   seconds=time.perf_counter() - t0)
    return summary
