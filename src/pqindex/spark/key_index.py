"""The lake-wide key index (``dataset/key_index.py``) built by Spark.

Two ways:

* ``pqindex.spark.write(df, path, key_index=["user_id"])``: each task reads the key
  columns of the files it just wrote (its own staged files: a local read or a few
  ranged GETs, on the executor) and sends their distinct ``(key, row_group)``
  entries back in its commit message; the job commit sorts them into shards and
  puts the index in the manifest it commits (:func:`commit_hook`), delta shards when
  an append joins an index of the same columns.
* :func:`build_key_index` for a lake that already exists: tasks read their files'
  key columns, a range shuffle sorts the entries by key, each task writes the shards
  of its key range, and the driver commits the descriptor into the manifest.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from pqindex.dataset.key_index import (
    MANIFEST_KEY,
    FileKeys,
    _base,
    drop_superseded,
    extend_key_index,
    file_keys,
)
from pqindex.errors import UserInputError
from pqindex.io.source import ObjectInfo, local_info

__all__ = ["KeyIndexCommit", "build_key_index", "commit_hook", "key_columns", "task_keys"]

# A task's entries: (relative path, column -> Arrow IPC stream of (key, row_group)).
TaskKeys = list[tuple[str, dict[str, bytes]]]


def key_columns(options: Mapping[str, str]) -> list[str]:
    """The ``key_index`` option: a comma list of key columns."""
    raw = {str(k).lower(): str(v) for k, v in options.items()}.get("key_index") or ""
    return [c.strip() for c in raw.split(",") if c.strip()]


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.BufferReader(data)).read_all()


def task_keys(files: Sequence[Mapping[str, Any]], columns: Sequence[str],
              storage_options: Mapping[str, Any] | None) -> TaskKeys:
    """The entries of the files a task staged (``write_task``'s entries)."""
    out: TaskKeys = []
    for f in files:
        got = file_keys(str(f["staged"]), columns, storage_options)
        out.append((str(f["path"]).replace(os.sep, "/"),
                    {c: _ipc(hit[1]) for c, hit in got.items() if hit is not None}))
    return out


def _current(dest: str, manifest: Mapping[str, Any], remote: bool
             ) -> dict[str, ObjectInfo | None]:
    """Each file the manifest names, as a reader will see it (size, ETag, mtime)."""
    out: dict[str, ObjectInfo | None] = {}
    for e in manifest.get("files") or []:
        rel = str(e["path"])
        if remote:
            out[rel] = ObjectInfo(int(e["bytes"]), e.get("etag"), mtime=e.get("mtime"))
        else:
            out[rel] = local_info(os.path.join(dest, *rel.split("/")))
    return out


class KeyIndexCommit:
    """What the job commit calls with the manifest it is about to write (the job's
    files in place): the manifest with the key index of ``columns`` in it. Once that
    manifest is committed, :meth:`drop_superseded` deletes the shards of the former
    index it no longer names (other columns, or an overwrite)."""

    def __init__(self, dest: str, columns: Sequence[str], keys: TaskKeys, previous: Any,
                 remote: bool, storage_options: Mapping[str, Any] | None,
                 extend: bool = True) -> None:
        self.dest, self.columns, self.keys = dest, list(columns), keys
        self.previous, self.remote, self.extend = previous, remote, extend
        self.storage_options = storage_options
        self.descriptor: dict[str, Any] | None = None

    def __call__(self, manifest: dict[str, Any]) -> dict[str, Any]:
        current = _current(self.dest, manifest, self.remote)
        new: list[tuple[str, ObjectInfo, FileKeys]] = []
        for rel, per_column in self.keys:
            info = current.get(rel)
            if info is None:
                continue  # not committed (cannot happen: the commit names every file)
            got: dict[str, tuple[pa.DataType, pa.Table] | None] = {}
            for c in self.columns:
                t = _from_ipc(per_column[c]) if c in per_column else None
                got[c] = None if t is None else (t.schema.field("key").type, t)
            new.append((rel, info, got))
        self.descriptor = extend_key_index(
            self.dest, self.columns, self.previous if self.extend else None, current, new,
            self.storage_options)
        return {**manifest, MANIFEST_KEY: self.descriptor}

    def drop_superseded(self) -> list[str]:
        """After the commit: the former index's shards the new one does not name,
        deleted (relative paths)."""
        if self.descriptor is None or self.previous is None:
            return []
        return drop_superseded(_base(self.dest), self.previous, self.descriptor,
                               self.storage_options)


def commit_hook(dest: str, columns: Sequence[str], keys: TaskKeys, previous: Any,
                remote: bool, storage_options: Mapping[str, Any] | None, *,
                extend: bool = True) -> KeyIndexCommit:
    """The job commit's hook (see :class:`KeyIndexCommit`): ``previous`` is the
    manifest's index before the job; ``extend`` (not on an overwrite) keeps the files
    it still covers and adds delta shards when it indexes the same columns."""
    return KeyIndexCommit(dest, columns, keys, previous, remote, storage_options, extend)


# ------------------------------------------------------------------ existing lakes


def build_key_index(spark: Any, path: str | os.PathLike[str], columns: Sequence[str], *,
                    storage_options: Mapping[str, Any] | None = None,
                    shards: int | None = None) -> dict[str, Any]:
    """Build the key index of ``columns`` for the lake at ``path`` with Spark and
    commit it into the lake's manifest; returns the manifest.

    Tasks read their files' key columns; ``repartitionByRange`` on the key sorts the
    entries across ``shards`` tasks (default: the session's parallelism), and each
    writes its key range's shards. The manifest is written from the listing when
    there is none; an existing one (a commit point stays one) gets the index only
    if no one replaced it meanwhile."""
    from pyspark.sql.pandas.types import from_arrow_type

    from pqindex.dataset import key_index as ki
    from pqindex.dataset.discovery import discover
    from pqindex.dataset.manifest import write_manifest

    cols = list(dict.fromkeys(columns))
    root = ki._base(os.fspath(path))
    so = dict(storage_options or {})
    manifest, version = ki.read_manifest(root, so)
    point = manifest is not None and manifest.get("commit_point") is True
    disc = discover(root, so, listing=False if point else None)
    files = sorted((ki._rel(root, df.path), df) for df in disc.files)
    current = {rel: ki._info(df) for rel, df in files}
    n = shards or spark.sparkContext.defaultParallelism
    out_columns: dict[str, ki.ColumnIndex] = {}
    for c in cols:
        out_columns[c] = _spark_column(spark, root, c, files, current, so, n, from_arrow_type)
    covered = tuple(ki.Covered(i, rel, info.size, info.etag, info.mtime, info.ctime)
                    for i, (rel, _) in enumerate(files)
                    if (info := current[rel]) is not None)
    descriptor = ki._descriptor(ki.KeyIndex(covered, out_columns))
    if manifest is not None:
        return ki.commit_key_index(root, manifest, version, descriptor, so)
    return write_manifest(root, so, extra={MANIFEST_KEY: descriptor})


def _spark_column(spark: Any, root: str, column: str, files: Sequence[tuple[str, Any]],
                  current: Mapping[str, ObjectInfo | None], so: Mapping[str, Any],
                  n: int, from_arrow_type: Callable[[pa.DataType], Any]) -> Any:
    from pyspark.sql.types import IntegerType, StructField, StructType

    from pqindex.dataset import key_index as ki

    urls = [(i, df.path) for i, (_, df) in enumerate(files)]
    # The key's type from the first file that has the column (all must agree).
    key_type = None
    for _, df in files:
        hit = ki.file_keys(df.path, [column], so, current.get(ki._rel(root, df.path)))[column]
        if hit is not None:
            key_type = hit[0]
            break
    if key_type is None:
        raise UserInputError(f"no file has a non-null value of key column {column!r}",
                             path=root, column=column)
    schema = StructType([StructField("key", from_arrow_type(key_type), False),
                         StructField("row_group", IntegerType(), False),
                         StructField("file", IntegerType(), False)])
    arrow_schema = pa.schema([pa.field("key", key_type), pa.field("row_group", pa.int32()),
                              pa.field("file", pa.int32())])
    options = dict(so)

    def read(batches: Any) -> Any:
        for b in batches:
            for fid, url in zip(b.column(0).to_pylist(), b.column(1).to_pylist(),
                                strict=True):
                hit = ki.file_keys(url, [column], options)[column]
                if hit is None:
                    continue
                t, entries = hit
                if t != key_type:
                    raise UserInputError(f"the key column changed type across files: "
                                         f"{key_type} elsewhere, {t} in {url}", path=url,
                                         column=column)
                yield from entries.select(["key", "row_group"]).append_column(
                    "file", pa.array([fid] * entries.num_rows, pa.int32())
                ).cast(arrow_schema).to_batches()

    def write(batches: Any) -> Any:
        got = list(batches)
        if not got or sum(b.num_rows for b in got) == 0:
            return
        table = pa.Table.from_batches(got).cast(arrow_schema)
        written, stub = ki._write_shards(table, root, column, False, options)
        part = ki._descriptor(ki.KeyIndex((), {column: ki.ColumnIndex(
            column, stub or b"", tuple(written))}))["columns"][column]
        yield pa.RecordBatch.from_pylist([{"descriptor": json.dumps(part)}],
                                         schema=pa.schema([pa.field("descriptor", pa.string())]))

    paths = spark.createDataFrame(urls, "fid int, url string").repartition(
        max(1, min(len(urls), n)))
    entries = paths.mapInArrow(read, schema)
    # The range shuffle: task k gets the k-th key range (each sorts its own entries
    # as it writes them, so no sortWithinPartitions).
    ranged = entries.repartitionByRange(n, "key")
    parts = [json.loads(r["descriptor"]) for r in
             ranged.mapInArrow(write, "descriptor string").collect()]
    raw = {"version": ki.INDEX_VERSION, "files": [],
           "columns": {column: {"schema": parts[0]["schema"],
                                "shards": [s for d in parts for s in d["shards"]]}}}
    return ki.parse_key_index(raw).columns[column]
