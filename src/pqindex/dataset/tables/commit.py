"""Indexing a lake table as a commit: a file a table records is never rewritten.

Delta:

Each active file chosen is indexed into a copy under a new name beside it
(``<name>.pqindex-<token>.parquet``); then one transaction removes the old files
and adds the copies, ``dataChange=false``, with the old partition values, row
counts and column statistics (the rows are the same rows). Until that commit
the table's log names only the old files, so a crash or a kill leaves the table
readable at its old version; the copies it leaves behind are files no version
names, which ``VACUUM`` removes. A concurrent commit that conflicts (delta-rs's
conflict checker: another writer removed one of the same files) fails the
commit: the copies are removed and a ``TableCommitError`` raised. A commit that
does not conflict (another writer appended) goes through, as Delta allows.

Iceberg (a pyiceberg ``Table``, committed through its catalog): the same copies,
then one overwrite snapshot that deletes each old data file and adds its copy with
the old entry's partition, metrics and split offsets (the data pages did not move).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from pqindex.dataset.tables.delta import DeltaFile, DeltaSnapshot, load_delta, partition_text
from pqindex.errors import PqIndexError, UnsupportedError, UserInputError

__all__ = ["TableCommitError", "commit_delta_files", "footer_stats", "index_delta_table",
           "index_iceberg_table", "indexed_name", "remove_written"]

INDEXED_MARKER = ".pqindex-"
log = logging.getLogger("pqindex")


class TableCommitError(PqIndexError):
    """A table commit failed (a concurrent writer's conflicting commit): nothing changed."""


def indexed_name(path: str) -> str:
    """A new name beside ``path`` (a local path or a URL) for its indexed copy (an
    earlier copy's marker replaced)."""
    head, sep, name = path.rpartition("/" if "://" in path else os.sep)
    stem = name[:-len(".parquet")] if name.endswith(".parquet") else name
    at = stem.find(INDEXED_MARKER)
    if at >= 0:
        stem = stem[:at]
    return f"{head}{sep}{stem}{INDEXED_MARKER}{secrets.token_hex(6)}.parquet"


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def remove_written(paths: Sequence[str], storage_options: Mapping[str, Any] | None) -> None:
    """Remove files or objects a failed commit leaves (best effort: VACUUM removes any
    left)."""
    remote = [p for p in paths if _is_remote(p)]
    for p in paths:
        if not _is_remote(p):
            with contextlib.suppress(OSError):
                os.unlink(p)
    if remote:
        from pqindex.io.native import obstore_api
        from pqindex.io.objstore import get_store

        obs = obstore_api()
        for url in remote:
            handle, key = get_store(url, storage_options)
            with contextlib.suppress(Exception):  # the store's own errors: a leftover copy
                obs.delete(handle.store, key)


def _json_value(v: Any, upper: bool = False) -> Any:
    """A statistics value as the log writes it; ``upper``: a max, rounded up where the
    log's millisecond timestamps cannot hold it."""
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        if upper and v.microsecond % 1000:
            v += dt.timedelta(microseconds=1000 - v.microsecond % 1000)
        return v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}Z"
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, bytes):
        return v.decode("latin-1")
    if isinstance(v, dict):
        return {k: _json_value(x, upper) for k, x in v.items() if x is not None}
    return v


def _stats_json(adds: Mapping[str, Any]) -> str:
    """The log's ``stats`` of a file again (keys are the log's own, physical names)."""
    out: dict[str, Any] = {"numRecords": adds.get("num_records")}
    for key, name in (("min", "minValues"), ("max", "maxValues"), ("null_count", "nullCount")):
        values = adds.get(key)
        if values:
            out[name] = _json_value(values, upper=key == "max")
    return json.dumps(out)


def _log_stats(snapshot: DeltaSnapshot) -> dict[str, str]:
    """Each active file's stats JSON, by the path the log records."""
    adds = pa.table(snapshot.table.get_add_actions(flatten=False))
    keep = [c for c in ("path", "num_records", "min", "max", "null_count") if c in adds.column_names]
    return {row["path"]: _stats_json(row) for row in adds.select(keep).to_pylist()}


def _chosen(snapshot: DeltaSnapshot, only: Collection[str] | None) -> list[DeltaFile]:
    if only is None:
        return list(snapshot.files)

    def key(p: str) -> str:
        return p if _is_remote(p) else os.path.realpath(p)

    wanted = {key(p) for p in only}
    return [f for f in snapshot.files if key(f.path) in wanted]


REMOTE_CONCURRENCY = 8  # objects indexed at once on a store (each a few round trips)


def _index_all(paths: Sequence[str], index_one: Callable[[str, str], Any], remote: bool,
               progress: Callable[[int, int, Any], None] | None,
               written: list[str]) -> list[tuple[str, Any]]:
    """Each file indexed into its copy, in order: (the copy, "" when nothing needed a
    change; the result); ``written`` collects the copies made as they land (so a
    failure can remove them). Objects on a store are indexed ``REMOTE_CONCURRENCY``
    at once, local files one after another."""
    out: list[tuple[str, Any]] = []

    def one(path: str) -> tuple[str, Any]:
        copy = indexed_name(path)
        result = index_one(path, copy)
        made = getattr(result, "rewritten", True) if remote else os.path.exists(copy)
        if made:
            written.append(copy)
        return (copy if made else ""), result

    def done(item: tuple[str, Any]) -> None:
        out.append(item)
        if progress is not None:
            progress(len(out), len(paths), item[1])

    if not remote or len(paths) < 2:
        for p in paths:
            done(one(p))
        return out
    with ThreadPoolExecutor(REMOTE_CONCURRENCY) as pool:
        futures = [pool.submit(one, p) for p in paths]
        try:
            for fut in futures:
                done(fut.result())
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
    return out


def _copy_size(copy: str, result: Any, remote: bool) -> int:
    return int(result.bytes_after) if remote else os.path.getsize(copy)


def index_delta_table(
    root: str,
    index_one: Callable[[str, str], Any],
    *,
    only: Collection[str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: Callable[[int, int, Any], None] | None = None,
    evidence: bool = True,
) -> tuple[list[Any], int | None]:
    """Index the active files of the Delta table at ``root`` (a path or a URL; those of
    ``only`` when given: paths of files of the table; others are no file of this
    version) and commit the copies; ``index_one(source, output)`` indexes one file
    into a new file (a new object of the same bucket) and returns its result.
    ``storage_options`` are deltalake's (the commit) and pqindex's (the copies).
    With ``evidence``, the sidecar of the version made is written (``evidence.py``).
    Returns the results and the version committed (None when nothing changed)."""
    from deltalake.exceptions import CommitFailedError, DeltaError
    from deltalake.transaction import AddAction, RemoveAction

    snapshot = load_delta(root, storage_options=storage_options)
    remote = _is_remote(snapshot.location)
    files = _chosen(snapshot, only)
    if any(f.path in snapshot.deleted for f in files):
        # The copy's add action would carry no deletion vector: deleted rows would return.
        raise UnsupportedError("files of the table have deletion vectors: indexing them is "
                               "not supported yet (purge them first, e.g. REORG TABLE ... "
                               "APPLY (PURGE)); no file was changed", path=root)
    written: list[str] = []
    actions: list[Any] = []
    stats = _log_stats(snapshot)
    now = int(time.time() * 1000)
    try:
        indexed = _index_all([f.path for f in files], index_one, remote, progress, written)
        for f, (copy, result) in zip(files, indexed, strict=True):
            if not copy:  # nothing to change in this file
                continue
            size = _copy_size(copy, result, remote)
            mtime = now if remote else int(os.path.getmtime(copy) * 1000)
            # The copy's path as the log records paths: the old one's, new last name.
            head, _, _name = f.relative.rpartition("/")
            rel = (head + "/" if head else "") + copy.rpartition("/" if remote else os.sep)[2]
            raw = {k: partition_text(v) for k, v in f.partition.items()}
            raw = {snapshot.physical.get(k, k): v for k, v in raw.items()}
            actions.append(RemoveAction(path=f.relative, data_change=False,
                                        deletion_timestamp=now, size=f.size,
                                        partition_values=raw))
            actions.append(AddAction(path=rel, size=size, partition_values=raw,
                                     modification_time=mtime, data_change=False,
                                     stats=stats.get(f.relative, json.dumps(
                                         {"numRecords": f.rows}))))
        results = [result for _copy, result in indexed]
        if not actions:
            return results, None
        table = snapshot.table
        table.create_write_transaction(
            actions, mode="append", schema=table.schema(),
            partition_by=list(snapshot.partition_columns) or None)
    except BaseException as e:
        remove_written(written, storage_options)
        if isinstance(e, CommitFailedError):
            raise TableCommitError(f"commit of the indexed files failed (a concurrent "
                                   f"commit conflicts): {e}; the table is unchanged",
                                   path=root) from None
        if isinstance(e, DeltaError):
            raise TableCommitError(f"commit of the indexed files failed: {e}; the table is "
                                   "unchanged", path=root) from None
        raise
    snapshot.table.update_incremental()  # the commit made, and any made since
    version = int(snapshot.table.version())
    # A checkpoint of the version made: the commit named every file twice (remove and
    # add, with statistics), which a cold reader would otherwise fetch and parse as
    # JSON (1,000 files: ~2 MB). Best effort: without it the log is just as valid.
    with contextlib.suppress(Exception):  # delta-rs's and the store's errors
        snapshot.table.create_checkpoint()
    if evidence:
        _write_evidence(snapshot.table, storage_options)
    return results, version


def _write_evidence(table: Any, storage_options: Mapping[str, Any] | None) -> None:
    """The sidecar of the table's version (a failure leaves the table as committed:
    readers then read the files' tails, as without a sidecar)."""
    from pqindex.dataset.tables.evidence import write_evidence

    try:
        now = load_delta(table, storage_options=storage_options)
        write_evidence(now.location, "delta", now.version,
                       [(f.path, f.size) for f in now.files], storage_options)
    except PqIndexError as e:
        log.warning("%s: the table's evidence sidecar was not written: %s",
                    getattr(table, "table_uri", "?"), e)


def _copy_data_file(table: Any, old: Any, path: str, size: int) -> Any:
    """``old``'s manifest entry for its indexed copy: the same rows, partition, column
    metrics and row-group offsets (the data pages did not move); a new path and size."""
    from pyiceberg.manifest import DATA_FILE_TYPE, DataFile

    version = table.format_version
    fields = {f.name: getattr(old, f.name) for f in DATA_FILE_TYPE[version].fields}
    fields.update(file_path=path, file_size_in_bytes=size)
    new = DataFile.from_args(_table_format_version=version, **fields)
    new.spec_id = old.spec_id
    return new


def index_iceberg_table(
    table: Any,
    index_one: Callable[[str, str], Any],
    *,
    only: Collection[str] | None = None,
    progress: Callable[[int, int, Any], None] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    evidence: bool = True,
) -> tuple[list[Any], int | None]:
    """Index the data files of a pyiceberg ``Table``'s current snapshot (those of
    ``only`` when given) into copies beside them (``index_one(source, output)``; on an
    object store, new objects of the same bucket, ``storage_options`` configuring
    pqindex's access), then commit one overwrite snapshot that replaces each file by
    its copy (same rows, metrics and partition values). With ``evidence``, the sidecar
    of the snapshot made is written (``evidence.py``). Returns the results and the new
    snapshot's id (None when nothing changed).

    A concurrent commit is checked by pyiceberg (its commit window validation and the
    catalog's compare-and-swap); a failed commit removes the copies and raises
    ``TableCommitError``: the table is unchanged."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    location = table.location()
    tasks = list(table.scan().plan_files())
    if any(t.delete_files for t in tasks):
        raise UnsupportedError("the snapshot has delete files: indexing such a table is not "
                               "supported yet; no file was changed", path=location)

    def key(uri: str) -> str:
        return uri if _is_remote(uri) else os.path.realpath(uri.removeprefix("file://"))

    wanted = None if only is None else {key(p) for p in only}
    chosen = [t.file for t in tasks if wanted is None or key(t.file.file_path) in wanted]
    remote = any(_is_remote(f.file_path) for f in chosen)
    if remote and not all(_is_remote(f.file_path) for f in chosen):
        raise UnsupportedError("the table's data files are both local and on a store; no "
                               "file was changed", path=location)
    written: list[str] = []
    swaps: list[tuple[Any, Any]] = []
    try:
        paths = [f.file_path if remote else f.file_path.removeprefix("file://")
                 for f in chosen]
        indexed = _index_all(paths, index_one, remote, progress, written)
        for old, (copy, result) in zip(chosen, indexed, strict=True):
            if not copy:
                continue
            new_uri = ("file://" + copy) if old.file_path.startswith("file://") else copy
            swaps.append((old, _copy_data_file(table, old, new_uri,
                                               _copy_size(copy, result, remote))))
        results = [result for _copy, result in indexed]
        if not swaps:
            return results, None
        with table.transaction() as tx, tx.update_snapshot(
                snapshot_properties={"pqindex.operation": "index"}).overwrite() as overwrite:
            for old, new in swaps:
                overwrite.delete_data_file(old)
                overwrite.append_data_file(new)
    except BaseException as e:
        remove_written(written, storage_options)
        if isinstance(e, CommitFailedException | ValidationException):
            raise TableCommitError(f"commit of the indexed files failed (a concurrent "
                                   f"commit conflicts): {e}; the table is unchanged",
                                   path=location) from None
        raise
    snapshot_id = int(table.current_snapshot().snapshot_id)
    if evidence:
        _write_iceberg_evidence(table, storage_options)
    return results, snapshot_id


def _write_iceberg_evidence(table: Any, storage_options: Mapping[str, Any] | None) -> None:
    """The sidecar of the table's current snapshot (a failure leaves the commit made)."""
    from pqindex.dataset.tables.evidence import write_evidence
    from pqindex.dataset.tables.iceberg import load_iceberg

    try:
        now = load_iceberg(table)
        if now.snapshot_id is not None:
            write_evidence(now.location, "iceberg", now.snapshot_id,
                           [(f.path, f.size) for f in now.files], storage_options)
    except PqIndexError as e:
        log.warning("%s: the table's evidence sidecar was not written: %s",
                    table.location(), e)


# ---------------------------------------------------------------- new files committed


def footer_stats(path: str, storage_options: Mapping[str, Any] | None = None,
                 size: int | None = None) -> str:
    """A Parquet file's Delta ``stats`` from its footer (a local file, or an object read
    through pqindex's store with ``storage_options``; ``size`` when known): rows and,
    per flat top-level column with statistics on every row group, min, max and null
    count."""
    import pyarrow.parquet as pq

    if _is_remote(path):
        from pqindex.io.pyfile import SourceReader
        from pqindex.io.source import ObjectInfo, open_source

        src = open_source(path, storage_options=storage_options,
                          info=None if size is None else ObjectInfo(size))
        try:
            md = pq.read_metadata(SourceReader(src))
        finally:
            src.close()
    else:
        md = pq.ParquetFile(path).metadata
    schema = md.schema.to_arrow_schema()
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    leaves = {md.schema.column(j).path: j for j in range(md.num_columns)}
    for f in schema:
        t = f.type
        if not (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
                or pa.types.is_date(t) or pa.types.is_timestamp(t)
                or pa.types.is_floating(t)):
            continue
        col = leaves.get(f.name)
        if col is None:
            continue
        stats = [md.row_group(rg).column(col).statistics for rg in range(md.num_row_groups)]
        if not stats or any(s is None or not s.has_null_count for s in stats):
            continue
        nulls[f.name] = sum(s.null_count for s in stats)
        bounded = [s for s in stats if s.has_min_max]
        if len(bounded) != len(stats) and nulls[f.name] == 0:
            continue
        if bounded:
            lo, hi = min(s.min for s in bounded), max(s.max for s in bounded)
            if isinstance(lo, float) and (lo != lo or hi != hi):
                continue
            lows[f.name], highs[f.name] = lo, hi
    out = {"numRecords": md.num_rows, "minValues": _json_value(lows),
           "maxValues": _json_value(highs, upper=True), "nullCount": nulls}
    return json.dumps(out)


def commit_delta_files(
    root: str,
    files: Sequence[tuple[str, Mapping[str, str | None]]],
    schema: pa.Schema,
    partition_by: Sequence[str],
    mode: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    sizes: Mapping[str, int] | None = None,
) -> int:
    """Commit ``files`` (paths relative to ``root``, already in place, with their raw
    partition values) to the Delta table at ``root`` (a path or a URL: ``sizes`` by
    relative path, ``storage_options`` for deltalake and pqindex's store) as one
    transaction: a new table (``mode`` "error"), an append or an overwrite. Returns
    the version made."""
    from deltalake import DeltaTable
    from deltalake import Schema as DeltaSchema
    from deltalake.exceptions import DeltaError, TableNotFoundError
    from deltalake.transaction import AddAction, create_table_with_add_actions

    delta_schema = DeltaSchema.from_arrow(schema)
    remote = _is_remote(root)
    opts = None if not storage_options else {str(k): str(v) for k, v in
                                             storage_options.items()}
    now = int(time.time() * 1000)
    actions: list[Any] = []
    for rel, partition in files:
        if remote:
            full, size, mtime = f"{root}/{rel}", int((sizes or {})[rel]), now
        else:
            full = os.path.join(root, *rel.split("/"))
            size, mtime = os.path.getsize(full), int(os.path.getmtime(full) * 1000)
        actions.append(AddAction(path=rel, size=size, partition_values=dict(partition),
                                 modification_time=mtime, data_change=True,
                                 stats=footer_stats(full, storage_options, size)))
    try:
        try:
            # (Not DeltaTable.is_deltatable: it holds the GIL while it waits on the store.)
            table = DeltaTable(root, storage_options=opts)
        except TableNotFoundError:
            table = None
        if table is not None:
            if mode == "error":
                raise UserInputError("a Delta table is already there (mode='error')", path=root)
            table.create_write_transaction(actions, mode=mode, schema=delta_schema,
                                           partition_by=list(partition_by) or None)
            table.update_incremental()
            return int(table.version())
        create_table_with_add_actions(root, delta_schema, actions, mode="error",
                                      partition_by=list(partition_by) or None,
                                      storage_options=opts)
    except DeltaError as e:
        raise TableCommitError(f"Delta commit failed: {e}", path=root) from None
    return int(DeltaTable(root, storage_options=opts).version())
