"""A Delta table's snapshot read from its log by pqindex itself, in one or two round trips.

delta-rs (``delta.py``) reads a log in ~5 sequential requests on a store
(``_last_checkpoint``, a LIST, then each commit file), and reading the same version
again reads it again. Here the log is read as the protocol lays it out, with
pqindex's own I/O:

1. one LIST of ``_delta_log/``: the commits (``<version>.json``) and classic
   checkpoints (``<version>.checkpoint.parquet`` or its parts) there are;
2. one concurrent wave of GETs: the newest complete checkpoint at or before the
   version read, and every commit after it up to that version. For a numbered
   version, that version's checkpoint (pqindex's index commits write one) or, for
   version 0, its commit is fetched beside the LIST: then nothing is left for a
   second wave. The table's key index descriptor comes in the first wave too.

The actions are replayed in order (the checkpoint's adds, then each commit's adds
and removes, a file keyed by its path and deletion vector): the active files, the
protocol and the table's metadata. A commit's adds are read at once by Arrow's JSON
reader (``_commit_adds``): version 0 of a table of 1,000 files cost ~7 ms more CPU
than a checkpoint of it when its 1,000 lines were parsed one by one. The log's per-file statistics (JSON) become the
same per-column table ``delta._stats`` makes of deltalake's, all files' parsed at
once by Arrow's JSON reader.

Anything this reader does not handle is left to deltalake, which stays the
reference (``load_delta``): a timestamp for a version, a store only fsspec reaches,
a missing commit, a V2 checkpoint or a reader feature other than column mapping,
timestamps without time zone and deletion vectors (and an active file with a
deletion vector: delta-rs reads the vectors), binary partition columns, checkpoint
statistics only in ``stats_parsed``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import functools
import json
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from pqindex.dataset.tables.delta import DeltaSnapshot, _join, _physical_names
from pqindex.errors import CorruptFileError, PqIndexError

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
    from pqindex.dataset.key_index import TABLE_DESCRIPTOR
    from pqindex.io.source import is_object_store_url

    remote = is_object_store_url(location)
    if "://" in location and not remote:
        raise _Leave
    log = f"{location}/_delta_log"
    # On a store, objects fetched beside the first request, with no round trip of their
    # own: the table's key index descriptor (the planner's next GET otherwise), and for
    # a numbered version the checkpoint of that very version (where pqindex's index
    # commits put one) or the first commit.
    descriptor = f"{location}/{TABLE_DESCRIPTOR}"
    early: dict[str, bytes | None] = {}
    speculated: tuple[DeltaSnapshot | None, BaseException | None] | None = None
    guess: list[str] = []
    if listed:
        names = list(listed)
    elif remote:
        guess = [descriptor]
        replay: Callable[[Sequence[bytes | None]], DeltaSnapshot | None] | None = None
        if version is not None:
            guess.append(f"{log}/{version:020d}.checkpoint.parquet" if version
                         else f"{log}/{0:020d}.json")
            v = version

            def replay(got: Sequence[bytes | None]) -> DeltaSnapshot | None:
                # The version from its own checkpoint (or commit 0) alone: what the
                # LIST will show is used when it shows just that.
                blob = got[1]
                if blob is None:
                    return None
                return (_replay(location, v, [blob], []) if v
                        else _replay(location, 0, [], [(0, blob)]))

        names, early, speculated = _list_and_get(log, storage_options, guess, replay)
    else:
        names = _list(log, remote, storage_options)
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
    wanted = [f"{log}/{n}" for n in ([] if base is None else base[1])
              + [commits[v] for v in after]]
    if speculated is not None and len(wanted) == 1 and wanted[0] == guess[-1]:
        # The guessed object is all the version needs: replayed while the LIST was out.
        got_snap, error = speculated
        if error is not None:
            raise error
        if got_snap is not None:
            if descriptor in early:
                got_snap.key_descriptor = (early[descriptor],)
            return got_snap
    missing = [u for u in wanted if early.get(u) is None]
    if remote and descriptor not in early:
        try:  # in the same wave as the log's objects
            got = _get([*missing, descriptor], remote, storage_options, optional=1)
            early[descriptor] = got.pop()
        except PqIndexError:  # the descriptor refused: the planner asks again
            got = _get(missing, remote, storage_options)
    else:
        got = _get(missing, remote, storage_options)
    early.update(zip(missing, got, strict=True))
    blobs = [b for u in wanted if (b := early[u]) is not None]  # (all there: _get said)
    n_parts = 0 if base is None else len(base[1])
    snap = _replay(location, target, blobs[:n_parts], list(zip(after, blobs[n_parts:],
                                                               strict=True)))
    if descriptor in early:
        snap.key_descriptor = (early[descriptor],)
    return snap


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


def _list_and_get(log: str, storage_options: Mapping[str, Any] | None,
                  urls: Sequence[str],
                  then: Callable[[Sequence[bytes | None]], DeltaSnapshot | None] | None = None,
                  ) -> tuple[list[str], dict[str, bytes | None],
                             tuple[DeltaSnapshot | None, BaseException | None] | None]:
    """The LIST of the log on a store, and ``urls`` fetched meanwhile (None: absent;
    left out when a GET failed: nothing is known of them); ``then`` is called with
    them as soon as they are there, on the fetching thread (the LIST may still be out):
    its result or its error, None when the GET failed."""
    from pqindex.io.objects import get_objects
    from pqindex.pools import shared_pool

    def fetch() -> tuple[list[bytes | None], tuple[DeltaSnapshot | None,
                                                    BaseException | None] | None]:
        got = get_objects(urls, storage_options)
        if then is None:
            return got, None
        try:
            return got, (then(got), None)
        except Exception as e:  # raised where the result is used, if it is
            return got, (None, e)

    # (A thread kept for the process: starting one per read cost 1-3 ms.)
    fetching = shared_pool("delta-log", 1).submit(fetch)
    try:
        names = _list(log, True, storage_options)
    finally:
        got: tuple[list[bytes | None], Any] | None = None
        with contextlib.suppress(PqIndexError):
            got = fetching.result()
    if got is None:
        return names, {}, None
    return names, dict(zip(urls, got[0], strict=True)), got[1]


def _get(urls: Sequence[str], remote: bool, storage_options: Mapping[str, Any] | None,
         optional: int = 0) -> list[bytes | None]:
    """The objects at ``urls``; the last ``optional`` of them may be absent (None)."""
    if not urls:
        return []
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
    if any(g is None for g in got[:len(got) - optional]):
        raise _Leave  # removed since the LIST (a cleanup): deltalake reads the log again
    return got


class _Adds:
    """Add actions in log order: a checkpoint's, or a commit's read at once, as the
    Arrow arrays Parquet or the JSON reader gave (no Python object per file); a
    commit's read line by line as its parsed JSON."""

    FIELDS = ("path", "size", "modificationTime", "partitionValues", "stats",
              "deletionVector")
    TYPES: ClassVar[dict[str, pa.DataType]] = {
        "path": pa.string(), "size": pa.int64(), "modificationTime": pa.int64(),
        "stats": pa.string()}

    def __init__(self) -> None:
        self.parts: list[pa.StructArray | list[Mapping[str, Any]]] = []
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def extend(self, add: pa.StructArray) -> None:
        self.parts.append(add)
        self.n += len(add)

    def append(self, action: Mapping[str, Any]) -> int:
        last = self.parts[-1] if self.parts else None
        if not isinstance(last, list):
            last = []
            self.parts.append(last)
        last.append(action)
        self.n += 1
        return self.n - 1

    @staticmethod
    def _field(chunk: pa.StructArray, name: str) -> pa.Array | None:
        return chunk.field(name) if chunk.type.get_field_index(name) >= 0 else None

    def keys(self) -> list[tuple[str, str | None]]:
        """Every add's logical file (``_key``), in order."""
        out = []
        for c in self.parts:
            if isinstance(c, list):
                out += [_key(d["path"], d.get("deletionVector")) for d in c]
            else:
                out += _chunk_keys(c)
        return out

    def column(self, name: str, rows: pa.Array | None) -> pa.Array:
        """One field of every add (of those at ``rows`` when given) as one array."""
        t = self.TYPES[name]
        parts = []
        for c in self.parts:
            if isinstance(c, list):
                try:
                    parts.append(pa.array([d.get(name) for d in c], t))
                except (pa.ArrowException, TypeError, ValueError, OverflowError):
                    raise _Leave from None  # a damaged action: deltalake reports it
                continue
            got = self._field(c, name)
            parts.append(pa.nulls(len(c), t) if got is None else got.cast(t))
        return _pick(parts, t, rows)

    def vectors(self, rows: pa.Array | None) -> bool:
        """Whether an add (of those at ``rows``) has a deletion vector."""
        parts = []
        for c in self.parts:
            if isinstance(c, list):
                parts.append(pa.array([d.get("deletionVector") is not None for d in c],
                                      pa.bool_()))
                continue
            dv = self._field(c, "deletionVector")
            parts.append(pa.repeat(False, len(c)) if dv is None else pc.is_valid(dv))
        return bool(pc.any(_pick(parts, pa.bool_(), rows)).as_py())

    def partition(self, physical: str, logical: str, rows: pa.Array | None) -> pa.Array:
        """The raw text of one partition value of every add (keyed by its physical
        name, or else its logical one)."""
        parts = []
        for c in self.parts:
            if isinstance(c, list):
                raw = [d.get("partitionValues") or {} for d in c]
                try:
                    parts.append(pa.array([r.get(physical, r.get(logical)) for r in raw],
                                          pa.string()))
                except (pa.ArrowException, TypeError, AttributeError):
                    raise _Leave from None
                continue
            m = self._field(c, "partitionValues")
            if m is None:
                parts.append(pa.nulls(len(c), pa.string()))
                continue
            if pa.types.is_struct(m.type):  # a commit's (``_commit_adds``)
                have = [m.field(k) for k in dict.fromkeys((physical, logical))
                        if m.type.get_field_index(k) >= 0]
                parts.append(pa.nulls(len(c), pa.string()) if not have
                             else (pc.coalesce(*have) if len(have) > 1 else have[0])
                             .cast(pa.string()))
                continue
            if not pa.types.is_map(m.type):
                raise _Leave
            got = _same_keys(m, physical)
            if got is None:
                got = pc.map_lookup(m, physical, "first")
                if logical != physical:
                    got = pc.coalesce(got, pc.map_lookup(m, logical, "first"))
            parts.append(got.cast(pa.string()))
        return _pick(parts, pa.string(), rows)


def _chunk_keys(c: pa.StructArray) -> list[tuple[str, str | None]]:
    """The logical files (``_key``) of adds read as Arrow arrays."""
    paths = c.field("path").to_pylist()
    dv = _Adds._field(c, "deletionVector")
    vectors = ([None] * len(c) if dv is None or dv.null_count == len(c)
               else dv.to_pylist())  # the common case: no vector, no dict per file
    return [_key(p, v) for p, v in zip(paths, vectors, strict=True)]


_ADD_LINE = b'{"add":'


def _commit_adds(data: bytes, metadata: Mapping[str, Any] | None
                 ) -> tuple[pa.StructArray, list[dict[str, Any]]] | None:
    """A commit's add actions read at once by Arrow's JSON reader (the lines a writer
    starts with ``{"add":``; a commit that writes a table or appends to it is
    mostly those), and its other actions parsed line by line, in order. None where
    the commit is read line by line instead: a line either way refuses, an add with a
    deletion vector, a remove of a file the commit adds (their order would matter),
    or no table metadata yet to type partition values with."""
    adds: list[bytes] = []
    others: list[dict[str, Any]] = []
    for line in data.splitlines():
        if line.startswith(_ADD_LINE):
            adds.append(line)
        elif line.strip():
            try:
                action = json.loads(line)
            except ValueError:
                return None  # the line-by-line reading names the line
            if not isinstance(action, dict) or "add" in action:
                return None
            others.append(action)
    if len(adds) < 2:
        return None  # (nothing to gain)
    for action in others:
        if isinstance(action.get("metaData"), dict):
            metadata = action["metaData"]
    if metadata is None:
        return None
    try:
        physical = _physical_names(str(metadata["schemaString"]))
        names = dict.fromkeys(k for c in metadata.get("partitionColumns") or ()
                              for k in (physical.get(c, c), c))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    vector = pa.struct([("storageType", pa.string()), ("pathOrInlineDv", pa.string())])
    add = pa.struct([
        ("path", pa.string()), ("size", pa.int64()), ("modificationTime", pa.int64()),
        ("partitionValues", pa.struct([(k, pa.string()) for k in names])),
        ("stats", pa.string()), ("deletionVector", vector)])
    lines = b"\n".join(adds)
    try:
        t = pa_json.read_json(
            pa.BufferReader(lines),
            read_options=pa_json.ReadOptions(use_threads=False,
                                             block_size=max(1 << 20, len(lines) + 1)),
            parse_options=pa_json.ParseOptions(explicit_schema=pa.schema([("add", add)]),
                                               unexpected_field_behavior="ignore"))
        got = t.column("add").combine_chunks()
    except (pa.ArrowException, UnicodeError):
        return None
    if (len(got) != len(adds) or got.null_count
            or got.field("deletionVector").null_count < len(got)):
        return None
    removed = {_key(r["path"], r.get("deletionVector")) for a in others
               if isinstance(r := a.get("remove"), dict) and "path" in r}
    if removed and not removed.isdisjoint(_chunk_keys(got)):
        return None
    return got, others


def _same_keys(m: pa.MapArray, key: str) -> pa.Array | None:
    """The values of ``key`` in a map column whose every row has the same keys in the
    same order (a writer's partition values: the usual case), taken without a lookup per
    row; None otherwise."""
    n = len(m)
    if n == 0 or m.null_count:
        return None
    offsets = m.offsets.to_numpy()
    width = int(offsets[1] - offsets[0])
    if width == 0 or not np.array_equal(np.diff(offsets), np.full(n, width)):
        return None
    keys = m.keys  # (of the whole buffer: a slice's offsets do not start at 0)
    first = keys.slice(int(offsets[0]), width).to_pylist()
    if first.count(key) != 1:
        return None
    if not pc.all(pc.equal(keys.slice(int(offsets[0]), n * width),
                           pa.array(first * n, keys.type))).as_py():
        return None  # (every row's keys are the first row's: one place per key)
    return m.items.take(pa.array(int(offsets[0]) + first.index(key)
                                 + np.arange(n, dtype=np.int64) * width))


def _pick(parts: Sequence[pa.Array], t: pa.DataType, rows: pa.Array | None) -> pa.Array:
    whole = pa.concat_arrays(parts) if len(parts) != 1 else parts[0]
    if not parts:
        whole = pa.array([], t)
    return whole if rows is None else whole.take(rows)


def _checkpoint_actions(data: bytes, name: str) -> tuple[pa.StructArray | None,
                                                         dict[str, Any]]:
    """A checkpoint part's adds (only the fields ``_Adds`` keeps), and its protocol
    and metaData actions."""
    try:
        pf = pq.ParquetFile(pa.BufferReader(data))
        top = pf.schema_arrow
        cols = [c for c in ("metaData", "protocol") if c in top.names]
        if "add" in top.names:
            have = {f.name for f in top.field("add").type}
            if "stats" not in have:
                raise _Leave  # statistics only as stats_parsed
            cols += [f"add.{f}" for f in _Adds.FIELDS if f in have]
        t = pf.read(columns=cols)
    except (pa.ArrowException, OSError) as e:
        raise CorruptFileError(f"Delta checkpoint not readable: {e}", path=name) from None
    other: dict[str, Any] = {}
    for kind in ("metaData", "protocol"):
        if kind in t.column_names:
            got = t.column(kind).drop_null()
            if len(got):
                other[kind] = got[len(got) - 1].as_py()
    if "add" not in t.column_names:
        return None, other
    add = t.column("add").combine_chunks()
    return add.filter(pc.is_valid(add)), other


def _key(path: Any, vector: Any) -> tuple[str, str | None]:
    """A logical file of the log: its path and deletion vector."""
    return (urllib.parse.unquote(str(path)),
            None if vector is None else json.dumps(vector, sort_keys=True, default=str))


def _not_add(action: Mapping[str, Any], active: dict[tuple[str, str | None], int],
             metadata: dict[str, Any] | None, protocol: dict[str, Any] | None
             ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """A commit's remove, metaData or protocol action applied; the metadata and
    protocol in force after it."""
    if "remove" in action:
        r = action["remove"]
        active.pop(_key(r["path"], r.get("deletionVector")), None)
    elif "metaData" in action:
        metadata = action["metaData"]
    elif "protocol" in action:
        protocol = action["protocol"]
    return metadata, protocol


def _replay(location: str, version: int, checkpoint: Sequence[bytes],
            commits: Sequence[tuple[int, bytes]]) -> DeltaSnapshot:
    adds = _Adds()
    protocol: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    for i, data in enumerate(checkpoint):
        got, other = _checkpoint_actions(data, f"{location}/_delta_log checkpoint part {i}")
        protocol = other.get("protocol", protocol)
        metadata = other.get("metaData", metadata)
        if got is not None:
            adds.extend(got)
    # Logical file -> its row in ``adds`` (a later add of the same file replaces it);
    # made only when a commit follows the checkpoint (its adds are all active).
    active: dict[tuple[str, str | None], int] | None = None
    for v, data in commits:
        if active is None:
            active = {k: i for i, k in enumerate(adds.keys())}
        fast = _commit_adds(data, metadata)
        if fast is not None:
            chunk, others = fast
            for action in others:  # (no remove of a file the commit adds)
                metadata, protocol = _not_add(action, active, metadata, protocol)
            first = len(adds)
            adds.extend(chunk)
            for i, k in enumerate(_chunk_keys(chunk), first):
                active[k] = i
            continue
        for n, line in enumerate(data.splitlines()):
            if not line.strip():
                continue
            try:
                action = json.loads(line)
            except ValueError as e:
                raise CorruptFileError(f"Delta commit {v}, line {n + 1}: not JSON ({e})",
                                       path=f"{location}/_delta_log/{v:020d}.json") from None
            if "add" in action:
                a = action["add"]
                active[_key(a["path"], a.get("deletionVector"))] = adds.append(a)
            else:
                metadata, protocol = _not_add(action, active, metadata, protocol)
    if protocol is None or metadata is None:
        raise _Leave  # not a valid snapshot: deltalake's error
    reader = int(protocol.get("minReaderVersion", 1))
    features = set(protocol.get("readerFeatures") or ())
    if '"variant"' not in str(metadata.get("schemaString", "")):
        features -= {"variantType", "variantType-preview"}  # (delta-rs enables it unused)
    if reader > 3 or not features <= _FEATURES:
        raise _Leave
    rows = None
    if active is not None and list(active.values()) != list(range(len(adds))):
        rows = pa.array(list(active.values()), pa.int64())
    if adds.vectors(rows):
        raise _Leave  # delta-rs reads the vectors (delta._deleted_rows)
    return _snapshot(location, version, metadata, adds, rows)


def _snapshot(location: str, version: int, metadata: Mapping[str, Any], adds: _Adds,
              rows: pa.Array | None) -> DeltaSnapshot:
    from deltalake import Schema

    schema_json = str(metadata["schemaString"])
    schema = pa.schema(Schema.from_json(schema_json).to_arrow())
    physical = _physical_names(schema_json)
    partition_columns = tuple(metadata.get("partitionColumns") or ())
    relative = adds.column("path", rows)
    size = adds.column("size", rows)
    if relative.null_count or size.null_count:
        raise _Leave  # not a valid add action: deltalake's error
    stats = _stats_table(schema, physical, partition_columns, adds.column("stats", rows))
    paths = _paths(location, relative)
    if pc.count_distinct(paths).as_py() < len(paths):
        raise CorruptFileError("the log names a data file twice in one snapshot",
                               path=location)
    columns = pa.table({"path": paths, "relative": relative, "size": size,
                        "modification_time": adds.column("modificationTime", rows).fill_null(0),
                        "rows": stats.column("rows").combine_chunks()})
    partitions = {k: _typed(adds.partition(physical.get(k, k), k, rows), schema.field(k).type)
                  for k in partition_columns}
    return DeltaSnapshot(location, version, schema, partition_columns, columns, partitions,
                         physical, stats)


def _paths(root: str, relative: pa.Array) -> pa.Array:
    """The files' absolute paths or URLs: the root joined to each relative path in one
    Arrow kernel, unless a path needs more (URL-encoded, absolute, doubled slashes)."""
    plain = os.sep == "/" and not pc.any(
        pc.match_substring_regex(relative, "%|//|^/")).as_py()  # ("://" has "//")
    if plain:
        prefix = root if root.endswith("/") else root + "/"
        return pc.binary_join_element_wise(prefix, relative, "")
    return pa.array([_join(root, r) for r in relative.to_pylist()], pa.string())


def _typed(texts: pa.Array, t: pa.DataType) -> pa.Array:
    """Partition values as the log serializes them, typed (empty: null)."""
    texts = pc.if_else(pc.equal(texts, ""), pa.scalar(None, pa.string()), texts)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return texts.cast(t)
    if pa.types.is_integer(t) or pa.types.is_date(t):
        with contextlib.suppress(pa.ArrowInvalid):
            return texts.cast(t)  # the common texts; others are parsed as Python parses them
    distinct = pc.unique(texts)
    try:
        typed = pa.array([_partition_value(v, t) for v in distinct.to_pylist()], t)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        raise _Leave from None  # a value out of the type's range: deltalake reports it
    return typed.take(pc.index_in(texts, distinct))


def _stats_columns(schema: pa.Schema, physical: Mapping[str, str],
                   partition_columns: Sequence[str]) -> list[pa.Field]:
    """The top-level columns whose log statistics are read: flat, not partitions, of a
    type the log's JSON bounds convert to (physical names: the log's keys)."""
    out = []
    for f in schema:
        t = f.type
        if f.name in partition_columns or pa.types.is_nested(t):
            continue
        if (pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_string(t)
                or pa.types.is_floating(t) or pa.types.is_decimal(t)
                or pa.types.is_date(t) or pa.types.is_timestamp(t)):
            out.append(pa.field(physical.get(f.name, f.name), t))
    return out


def _stats_table(schema: pa.Schema, physical: Mapping[str, str],
                 partition_columns: Sequence[str], texts: pa.Array | Sequence[Any]
                 ) -> pa.Table:
    """What ``delta._stats`` makes of deltalake's add actions, from each file's JSON
    statistics (``texts``): rows, and per flat top-level column with statistics its
    min, max and null count."""
    columns = _stats_columns(schema, physical, partition_columns)
    logical = {physical.get(f.name, f.name): f.name for f in schema}
    got = _stats_arrow(columns, texts)
    if got is None:  # a value Arrow's JSON reader refuses: file by file
        return _stats_python(columns, logical, _texts(texts).to_pylist())
    cols: dict[str, pa.Array] = {"rows": got.field("numRecords")}
    for kind, prefix in (("minValues", "min."), ("maxValues", "max."),
                         ("nullCount", "nulls.")):
        by_kind = got.field(kind)
        for f in columns:
            arr = by_kind.field(f.name)
            if arr.null_count == len(arr):
                continue
            if kind != "nullCount" and not arr.type.equals(f.type):
                arr = _column(arr.to_pylist(), f.type)  # (dates, timestamps: from text)
                if arr is None:
                    continue
            cols[prefix + logical[f.name]] = arr
    return pa.table(cols)


def _json_type(t: pa.DataType) -> pa.DataType:
    """The type Arrow's JSON reader converts a bound to: dates and timestamps are text."""
    return pa.string() if pa.types.is_date(t) or pa.types.is_timestamp(t) else t


def _texts(texts: pa.Array | Sequence[Any]) -> pa.Array:
    if isinstance(texts, pa.Array):
        return texts.cast(pa.string())
    return pa.array([None if t is None else str(t) for t in texts], pa.string())


def _json_lines(texts: pa.Array) -> pa.Buffer:
    """The texts as one line each (none: ``{}``) in one buffer. A line break inside a
    text can only be whitespace between tokens (JSON strings escape theirs)."""
    s = texts.fill_null("")
    s = pc.if_else(pc.equal(s, ""), "{}", s)
    s = pc.replace_substring(pc.replace_substring(s, "\n", " "), "\r", " ")
    s = pc.binary_join_element_wise(s, "", "\n")  # each text, then a line break
    offsets = np.frombuffer(s.buffers()[1], np.int32, len(s) + 1, s.offset * 4)
    data = s.buffers()[2]
    if data is None:
        return pa.py_buffer(b"")
    return data[int(offsets[0]):int(offsets[-1])]


def _stats_arrow(columns: Sequence[pa.Field], texts: pa.Array | Sequence[Any]
                 ) -> pa.StructArray | None:
    """Every file's statistics parsed at once by Arrow's JSON reader (one line per
    file), with the columns' types; None when a text does not convert (a damaged or
    unusual statistic: the files are parsed one by one)."""
    bounds = [pa.field(f.name, _json_type(f.type)) for f in columns]
    schema = pa.schema([
        pa.field("numRecords", pa.int64()),
        pa.field("minValues", pa.struct(bounds)), pa.field("maxValues", pa.struct(bounds)),
        pa.field("nullCount", pa.struct([pa.field(f.name, pa.int64()) for f in columns]))])
    if not len(texts):
        return pa.StructArray.from_arrays([pa.array([], f.type) for f in schema],
                                          fields=list(schema))
    lines = _json_lines(_texts(texts))
    try:
        t = pa_json.read_json(
            pa.BufferReader(lines),
            read_options=pa_json.ReadOptions(use_threads=False, block_size=max(
                1 << 20, lines.size + 1)),
            parse_options=pa_json.ParseOptions(explicit_schema=schema,
                                               unexpected_field_behavior="ignore"))
    except (pa.ArrowException, UnicodeError):
        return None
    if t.num_rows != len(texts):
        return None
    return pa.StructArray.from_arrays([t.column(f.name).combine_chunks() for f in schema],
                                      fields=list(schema))


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


def _stats_python(columns: Sequence[pa.Field], logical: Mapping[str, str],
                  texts: Sequence[Any]) -> pa.Table:
    """``_stats_table`` file by file: each text parsed alone (an unreadable one proves
    nothing), each column converted alone (one that does not convert is unknown)."""
    stats = [_parse_stats(t) for t in texts]
    try:
        cols: dict[str, pa.Array] = {"rows": pa.array([s.get("numRecords") for s in stats],
                                                      pa.int64())}
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        cols = {"rows": pa.nulls(len(stats), pa.int64())}
    for kind, prefix in (("minValues", "min."), ("maxValues", "max."),
                         ("nullCount", "nulls.")):
        for f in columns:
            values = [(s.get(kind) or {}).get(f.name) if isinstance(s.get(kind), dict)
                      else None for s in stats]
            if all(v is None for v in values):
                continue
            arr = _column(values, pa.int64() if kind == "nullCount" else f.type)
            if arr is not None:
                cols[prefix + logical[f.name]] = arr
    return pa.table(cols)


def _partition_value(text: Any, t: pa.DataType) -> Any:
    """A partition value as the log serializes it, typed (empty: null)."""
    if text is None or text == "":
        return None
    try:
        return _parser(t)(str(text))
    except (ValueError, decimal.InvalidOperation):
        raise _Leave from None  # deltalake reports the damaged value


@functools.cache
def _parser(t: pa.DataType) -> Callable[[str], Any]:
    """How a partition value of type ``t`` is read from its text (one test per type,
    not per file)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return str
    if pa.types.is_integer(t):
        return int
    if pa.types.is_floating(t):
        return float
    if pa.types.is_boolean(t):
        return lambda s: s.lower() == "true"
    if pa.types.is_date(t):
        return dt.date.fromisoformat
    if pa.types.is_decimal(t):
        return decimal.Decimal
    if pa.types.is_timestamp(t):
        return functools.partial(_timestamp, naive=t.tz is None)
    raise _Leave  # binary and others: deltalake types them


def _timestamp(s: str, naive: bool) -> dt.datetime:
    ts = dt.datetime.fromisoformat(s)
    if naive:
        return ts.astimezone(dt.UTC).replace(tzinfo=None) if ts.tzinfo else ts
    return ts.replace(tzinfo=dt.UTC) if ts.tzinfo is None else ts.astimezone(dt.UTC)
