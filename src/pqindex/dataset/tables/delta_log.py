"""A Delta table's snapshot read from its log by pqindex itself, in two round trips.

delta-rs (``delta.py``) reads a log in ~5 sequential requests on a store
(``_last_checkpoint``, a LIST, then each commit file), and reading the same version
again reads it again. Here the log is read as the protocol lays it out, with
pqindex's own I/O:

1. one LIST of ``_delta_log/``: the commits (``<version>.json``) and classic
   checkpoints (``<version>.checkpoint.parquet`` or its parts) there are;
2. one concurrent wave of GETs: the newest complete checkpoint at or before the
   version read, and every commit after it up to that version.

The actions are replayed in order (the checkpoint's adds, then each commit's adds
and removes, a file keyed by its path and deletion vector): the active files, the
protocol and the table's metadata. The log's per-file statistics (JSON) become the
same per-column table ``delta._stats`` makes of deltalake's.

Anything this reader does not handle is left to deltalake, which stays the
reference (``load_delta``): a timestamp for a version, a store only fsspec reaches,
a missing commit, a V2 checkpoint or a reader feature other than column mapping,
timestamps without time zone and deletion vectors (and an active file with a
deletion vector: delta-rs reads the vectors), binary partition columns, checkpoint
statistics only in ``stats_parsed``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pqindex.dataset.tables.delta import DeltaFile, DeltaSnapshot, _join, _physical_names
from pqindex.errors import CorruptFileError

__all__ = ["read_log"]

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")
# Reader features whose tables this reader reads as deltalake does.
_FEATURES = frozenset({"columnMapping", "timestampNtz", "deletionVectors",
                       "vacuumProtocolCheck"})


class _Leave(Exception):
    """The log needs something this reader leaves to deltalake."""


def read_log(location: str, version: int | None,
             storage_options: Mapping[str, Any] | None = None,
             names: Sequence[str] | None = None) -> DeltaSnapshot | None:
    """The snapshot at ``version`` (default: the latest) of the Delta table at
    ``location`` (a local directory, ``file://`` or object-store URL, no trailing
    slash), or None where deltalake must read it (see the module doc). ``names``: the
    log's object names when a LIST just showed them (none is made here then)."""
    try:
        return _read(location, version, storage_options, names)
    except _Leave:
        return None


def _read(location: str, version: int | None, storage_options: Mapping[str, Any] | None,
          listed: Sequence[str] | None) -> DeltaSnapshot:
    from pqindex.io.source import is_object_store_url

    remote = is_object_store_url(location)
    if "://" in location and not remote:
        raise _Leave
    log = f"{location}/_delta_log"
    names = list(listed) if listed else _list(log, remote, storage_options)
    commits = {int(m.group(1)): n for n in names if (m := _COMMIT.match(n))}
    parts: dict[tuple[int, int], list[str]] = {}
    for n in names:
        if m := _CHECKPOINT.match(n):
            parts.setdefault((int(m.group(1)), int(m.group(3) or 1)), []).append(n)
    complete = sorted((v, sorted(ns)) for (v, total), ns in parts.items() if len(ns) == total)
    latest = max([*commits, *(v for v, _ in complete)], default=None)
    target = latest if version is None else version
    if target is None or latest is None or target > latest:
        raise _Leave  # no table, or no such version: deltalake says which
    base = max(((v, ns) for v, ns in complete if v <= target), default=None)
    start = 0 if base is None else base[0] + 1
    after = list(range(start, target + 1))
    if any(v not in commits for v in after):
        raise _Leave  # a gap (cleaned-up commits before a checkpoint this cannot use)
    wanted = ([] if base is None else base[1]) + [commits[v] for v in after]
    blobs = _get([f"{log}/{n}" for n in wanted], remote, storage_options)
    n_parts = 0 if base is None else len(base[1])
    return _replay(location, target, blobs[:n_parts], list(zip(after, blobs[n_parts:],
                                                               strict=True)))


def _list(log: str, remote: bool, storage_options: Mapping[str, Any] | None) -> list[str]:
    if not remote:
        path = log.removeprefix("file://")
        try:
            return os.listdir(path)
        except FileNotFoundError:
            raise _Leave from None
        except OSError:
            raise _Leave from None  # deltalake reports it as it does
    from pqindex.io.listing import list_objects

    prefix = log.rstrip("/") + "/"
    return [url[len(prefix):] for url, _ in list_objects(log, storage_options)
            if url.startswith(prefix) and "/" not in url[len(prefix):]]


def _get(urls: Sequence[str], remote: bool,
         storage_options: Mapping[str, Any] | None) -> list[bytes]:
    if remote:
        from pqindex.io.objects import get_objects

        got = get_objects(urls, storage_options)
    else:
        got = []
        for u in urls:
            try:
                with open(u.removeprefix("file://"), "rb") as fh:
                    got.append(fh.read())
            except OSError:
                got.append(None)
    if any(g is None for g in got):
        raise _Leave  # removed since the LIST (a cleanup): deltalake reads the log again
    return [g for g in got if g is not None]


def _checkpoint_actions(data: bytes, name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A checkpoint part's adds, and its protocol and metaData actions."""
    try:
        pf = pq.ParquetFile(pa.BufferReader(data))
        cols = [c for c in ("add", "metaData", "protocol") if c in pf.schema_arrow.names]
        t = pf.read(columns=cols)
    except (pa.ArrowException, OSError) as e:
        raise CorruptFileError(f"Delta checkpoint not readable: {e}", path=name) from None
    other: dict[str, Any] = {}
    for kind in ("metaData", "protocol"):
        if kind in t.column_names:
            got = [r for r in t.column(kind).to_pylist() if r is not None]
            if got:
                other[kind] = got[-1]
    adds: list[dict[str, Any]] = []
    if "add" in t.column_names:
        add = t.column("add")
        if "stats" not in {f.name for f in add.type}:
            raise _Leave  # statistics only as stats_parsed
        adds = [r for r in add.to_pylist() if r is not None]
        for r in adds:  # a map column reads as (key, value) pairs
            pv = r.get("partitionValues")
            if isinstance(pv, list):
                r["partitionValues"] = dict(pv)
    return adds, other


def _replay(location: str, version: int, checkpoint: Sequence[bytes],
            commits: Sequence[tuple[int, bytes]]) -> DeltaSnapshot:
    active: dict[tuple[str, str | None], dict[str, Any]] = {}
    protocol: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None

    def key(action: Mapping[str, Any]) -> tuple[str, str | None]:
        dv = action.get("deletionVector")
        return (urllib.parse.unquote(str(action["path"])),
                None if dv is None else json.dumps(dv, sort_keys=True, default=str))

    for i, data in enumerate(checkpoint):
        adds, other = _checkpoint_actions(data, f"{location}/_delta_log checkpoint part {i}")
        protocol = other.get("protocol", protocol)
        metadata = other.get("metaData", metadata)
        for a in adds:
            active[key(a)] = a
    for v, data in commits:
        for n, line in enumerate(data.splitlines()):
            if not line.strip():
                continue
            try:
                action = json.loads(line)
            except ValueError as e:
                raise CorruptFileError(f"Delta commit {v}, line {n + 1}: not JSON ({e})",
                                       path=f"{location}/_delta_log/{v:020d}.json") from None
            if "add" in action:
                active[key(action["add"])] = action["add"]
            elif "remove" in action:
                active.pop(key(action["remove"]), None)
            elif "metaData" in action:
                metadata = action["metaData"]
            elif "protocol" in action:
                protocol = action["protocol"]
    if protocol is None or metadata is None:
        raise _Leave  # not a valid snapshot: deltalake's error
    reader = int(protocol.get("minReaderVersion", 1))
    features = set(protocol.get("readerFeatures") or ())
    if '"variant"' not in str(metadata.get("schemaString", "")):
        features -= {"variantType", "variantType-preview"}  # (delta-rs enables it unused)
    if reader > 3 or not features <= _FEATURES:
        raise _Leave
    adds = list(active.values())
    if any(a.get("deletionVector") is not None for a in adds):
        raise _Leave  # delta-rs reads the vectors (delta._deleted_rows)
    return _snapshot(location, version, metadata, adds)


def _snapshot(location: str, version: int, metadata: Mapping[str, Any],
              adds: Sequence[Mapping[str, Any]]) -> DeltaSnapshot:
    from deltalake import Schema

    schema_json = str(metadata["schemaString"])
    schema = pa.schema(Schema.from_json(schema_json).to_arrow())
    physical = _physical_names(schema_json)
    partition_columns = tuple(metadata.get("partitionColumns") or ())
    types = {k: schema.field(k).type for k in partition_columns}
    stats = [_parse_stats(a.get("stats")) for a in adds]
    files = []
    for a, st in zip(adds, stats, strict=True):
        raw = a.get("partitionValues") or {}
        partition = {k: _partition_value(raw.get(physical.get(k, k), raw.get(k)), types[k])
                     for k in partition_columns}
        rel = str(a["path"])
        rows = st.get("numRecords")
        files.append(DeltaFile(_join(location, rel), rel, int(a["size"]),
                               int(a.get("modificationTime") or 0),
                               None if rows is None else int(rows), partition))
    if len({f.path for f in files}) < len(files):
        raise CorruptFileError("the log names a data file twice in one snapshot",
                               path=location)
    return DeltaSnapshot(location, version, schema, partition_columns, tuple(files), physical,
                         _stats_table(schema, physical, partition_columns, files, stats))


def _parse_stats(text: Any) -> dict[str, Any]:
    if not text:
        return {}
    try:
        # Floats kept as their text: Arrow casts them to the column's exact type.
        got = json.loads(text, parse_float=str, parse_constant=str)
    except ValueError:
        return {}  # unreadable statistics prove nothing: the file is kept
    return got if isinstance(got, dict) else {}


def _column(values: list[Any], t: pa.DataType) -> pa.Array | None:
    """The log's JSON bounds of one column as an Arrow array of its type; None when
    they do not convert (the file's bounds are then unknown)."""
    try:
        if (pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_date(t)
                or pa.types.is_timestamp(t)):
            return pa.array([None if v is None else str(v) for v in values],
                            pa.string()).cast(t)
        if pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_string(t):
            return pa.array(values, t)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None
    return None


def _stats_table(schema: pa.Schema, physical: Mapping[str, str],
                 partition_columns: Sequence[str], files: Sequence[DeltaFile],
                 stats: Sequence[Mapping[str, Any]]) -> pa.Table:
    """What ``delta._stats`` makes of deltalake's add actions: rows, and per flat
    top-level column with statistics its min, max and null count."""
    cols: dict[str, pa.Array] = {"rows": pa.array([f.rows for f in files], pa.int64())}
    parts = set(partition_columns)
    for kind, prefix in (("minValues", "min."), ("maxValues", "max."),
                         ("nullCount", "nulls.")):
        for f in schema:
            if f.name in parts or pa.types.is_nested(f.type):
                continue
            p = physical.get(f.name, f.name)
            values = [(s.get(kind) or {}).get(p) if isinstance(s.get(kind), dict) else None
                      for s in stats]
            if all(v is None for v in values):
                continue
            arr = _column(values, pa.int64() if kind == "nullCount" else f.type)
            if arr is not None:
                cols[prefix + f.name] = arr
    return pa.table(cols)


def _partition_value(text: Any, t: pa.DataType) -> Any:
    """A partition value as the log serializes it, typed (empty: null)."""
    if text is None or text == "":
        return None
    s = str(text)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return s
    try:
        if pa.types.is_integer(t):
            return int(s)
        if pa.types.is_floating(t):
            return float(s)
        if pa.types.is_boolean(t):
            return s.lower() == "true"
        if pa.types.is_date(t):
            return dt.date.fromisoformat(s)
        if pa.types.is_decimal(t):
            return decimal.Decimal(s)
        if pa.types.is_timestamp(t):
            ts = dt.datetime.fromisoformat(s)
            if t.tz is None:
                return ts.astimezone(dt.UTC).replace(tzinfo=None) if ts.tzinfo else ts
            return ts.replace(tzinfo=dt.UTC) if ts.tzinfo is None else ts.astimezone(dt.UTC)
    except (ValueError, decimal.InvalidOperation):
        raise _Leave from None  # deltalake reports the damaged value
    raise _Leave  # binary and others: deltalake types them
