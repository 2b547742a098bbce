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
import os
import secrets
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import pyarrow as pa

from pqindex.dataset.tables.delta import DeltaFile, DeltaSnapshot, load_delta, partition_text
from pqindex.errors import PqIndexError, UnsupportedError, UserInputError

__all__ = ["TableCommitError", "commit_delta_files", "footer_stats", "index_delta_table",
           "index_iceberg_table", "indexed_name"]

INDEXED_MARKER = ".pqindex-"


class TableCommitError(PqIndexError):
    """A table commit failed (a concurrent writer's conflicting commit): nothing changed."""


def indexed_name(path: str) -> str:
    """A new name beside ``path`` for its indexed copy (an earlier copy's marker replaced)."""
    d, name = os.path.split(path)
    stem = name[:-len(".parquet")] if name.endswith(".parquet") else name
    at = stem.find(INDEXED_MARKER)
    if at >= 0:
        stem = stem[:at]
    return os.path.join(d, f"{stem}{INDEXED_MARKER}{secrets.token_hex(6)}.parquet")


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
    wanted = {os.path.realpath(p) for p in only}
    return [f for f in snapshot.files if os.path.realpath(f.path) in wanted]


def index_delta_table(
    root: str,
    index_one: Callable[[str, str], Any],
    *,
    only: Collection[str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: Callable[[int, int, Any], None] | None = None,
) -> tuple[list[Any], int | None]:
    """Index the active files of the Delta table at ``root`` (those of ``only`` when
    given: paths of files of the table; others are no file of this version) and commit
    the copies; ``index_one(source, output)`` indexes one file and returns its result.
    Returns the results and the version committed (None when nothing changed)."""
    from deltalake.exceptions import CommitFailedError, DeltaError
    from deltalake.transaction import AddAction, RemoveAction

    if "://" in root:
        raise UserInputError("Delta tables are indexed locally only for now", path=root)
    snapshot = load_delta(root, storage_options=storage_options)
    files = _chosen(snapshot, only)
    if any(f.path in snapshot.deleted for f in files):
        # The copy's add action would carry no deletion vector: deleted rows would return.
        raise UnsupportedError("files of the table have deletion vectors: indexing them is "
                               "not supported yet (purge them first, e.g. REORG TABLE ... "
                               "APPLY (PURGE)); no file was changed", path=root)
    written: list[str] = []
    results: list[Any] = []
    actions: list[Any] = []
    stats = _log_stats(snapshot)
    now = int(time.time() * 1000)
    try:
        for f in files:
            out = indexed_name(f.path)
            result = index_one(f.path, out)
            if not os.path.exists(out):  # nothing to change in this file
                results.append(result)
                continue
            written.append(out)
            rel = os.path.relpath(out, snapshot.location).replace(os.sep, "/")
            raw = {k: partition_text(v) for k, v in f.partition.items()}
            raw = {snapshot.physical.get(k, k): v for k, v in raw.items()}
            actions.append(RemoveAction(path=f.relative, data_change=False,
                                        deletion_timestamp=now, size=f.size,
                                        partition_values=raw))
            actions.append(AddAction(path=rel, size=os.path.getsize(out), partition_values=raw,
                                     modification_time=int(os.path.getmtime(out) * 1000),
                                     data_change=False,
                                     stats=stats.get(f.relative, json.dumps(
                                         {"numRecords": f.rows}))))
            results.append(result)
            if progress is not None:
                progress(len(results), len(files), result)
        if not actions:
            return results, None
        table = snapshot.table
        table.create_write_transaction(
            actions, mode="append", schema=table.schema(),
            partition_by=list(snapshot.partition_columns) or None)
    except BaseException as e:
        for p in written:
            with contextlib.suppress(OSError):
                os.unlink(p)
        if isinstance(e, CommitFailedError):
            raise TableCommitError(f"commit of the indexed files failed (a concurrent "
                                   f"commit conflicts): {e}; the table is unchanged",
                                   path=root) from None
        if isinstance(e, DeltaError):
            raise TableCommitError(f"commit of the indexed files failed: {e}; the table is "
                                   "unchanged", path=root) from None
        raise
    snapshot.table.update_incremental()  # the commit made, and any made since
    return results, snapshot.table.version()


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
) -> tuple[list[Any], int | None]:
    """Index the data files of a pyiceberg ``Table``'s current snapshot (those of
    ``only`` when given) into copies beside them, then commit one overwrite snapshot
    that replaces each file by its copy (same rows, metrics and partition values).
    Returns the results and the new snapshot's id (None when nothing changed).

    A concurrent commit is checked by pyiceberg (its commit window validation and the
    catalog's compare-and-swap); a failed commit removes the copies and raises
    ``TableCommitError``: the table is unchanged."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    location = table.location()
    tasks = list(table.scan().plan_files())
    if any(t.delete_files for t in tasks):
        raise UnsupportedError("the snapshot has delete files: indexing such a table is not "
                               "supported yet; no file was changed", path=location)
    wanted = None if only is None else {os.path.realpath(p) for p in only}
    written: list[str] = []
    results: list[Any] = []
    swaps: list[tuple[Any, Any]] = []
    chosen = [t.file for t in tasks if wanted is None
              or os.path.realpath(t.file.file_path.removeprefix("file://")) in wanted]
    try:
        for old in chosen:
            uri = old.file_path
            if "://" in uri and not uri.startswith("file://"):
                raise UnsupportedError("Iceberg data files are indexed locally only for now",
                                       path=uri)
            src = uri.removeprefix("file://")
            out = indexed_name(src)
            results.append(index_one(src, out))
            written.append(out)
            new_uri = ("file://" + out) if uri.startswith("file://") else out
            swaps.append((old, _copy_data_file(table, old, new_uri, os.path.getsize(out))))
            if progress is not None:
                progress(len(results), len(chosen), results[-1])
        if not swaps:
            return results, None
        with table.transaction() as tx, tx.update_snapshot(
                snapshot_properties={"pqindex.operation": "index"}).overwrite() as overwrite:
            for old, new in swaps:
                overwrite.delete_data_file(old)
                overwrite.append_data_file(new)
    except BaseException as e:
        for p in written:
            with contextlib.suppress(OSError):
                os.unlink(p)
        if isinstance(e, CommitFailedException | ValidationException):
            raise TableCommitError(f"commit of the indexed files failed (a concurrent "
                                   f"commit conflicts): {e}; the table is unchanged",
                                   path=location) from None
        raise
    return results, table.current_snapshot().snapshot_id


# ---------------------------------------------------------------- new files committed


def footer_stats(path: str) -> str:
    """A Parquet file's Delta ``stats`` from its footer: rows and, per flat top-level
    column with statistics on every row group, min, max and null count."""
    import pyarrow.parquet as pq

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
) -> int:
    """Commit ``files`` (paths relative to ``root``, already in place, with their raw
    partition values) to the Delta table at ``root`` as one transaction: a new table
    (``mode`` "error"), an append or an overwrite. Returns the version made."""
    from deltalake import DeltaTable
    from deltalake import Schema as DeltaSchema
    from deltalake.exceptions import DeltaError
    from deltalake.transaction import AddAction, create_table_with_add_actions

    delta_schema = DeltaSchema.from_arrow(schema)

    actions: list[Any] = []
    for rel, partition in files:
        full = os.path.join(root, *rel.split("/"))
        actions.append(AddAction(path=rel, size=os.path.getsize(full),
                                 partition_values=dict(partition),
                                 modification_time=int(os.path.getmtime(full) * 1000),
                                 data_change=True, stats=footer_stats(full)))
    try:
        if DeltaTable.is_deltatable(root):
            if mode == "error":
                raise UserInputError("a Delta table is already there (mode='error')", path=root)
            table = DeltaTable(root)
            table.create_write_transaction(actions, mode=mode, schema=delta_schema,
                                           partition_by=list(partition_by) or None)
            table.update_incremental()
            return int(table.version())
        create_table_with_add_actions(root, delta_schema, actions, mode="error",
                                      partition_by=list(partition_by) or None)
    except DeltaError as e:
        raise TableCommitError(f"Delta commit failed: {e}", path=root) from None
    return int(DeltaTable(root).version())
