"""Indexing a Delta table as a commit: a file the log records is never rewritten.

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
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import os
import secrets
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

import pyarrow as pa

from pqindex.dataset.tables.delta import DeltaFile, DeltaSnapshot, load_delta, partition_text
from pqindex.errors import PqIndexError, UserInputError

__all__ = ["TableCommitError", "index_delta_table", "indexed_name"]

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
