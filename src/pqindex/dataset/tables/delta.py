"""A Delta Lake snapshot read through deltalake (delta-rs): active files and their facts.

delta-rs owns the log: checkpoints, the active files of a version, time travel,
protocol checks. pqindex takes from it, per active file, its path, the size the
log records (readers locate the footer from it), row count, typed partition values
and the log's per-column statistics, plus the table's logical schema and its
column mapping (physical names in the files, logical names to users).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from pqindex.errors import CorruptFileError, PqIndexError, UserInputError

__all__ = ["DeltaFile", "DeltaSnapshot", "load_delta", "open_delta", "partition_text"]


@dataclass(frozen=True)
class DeltaFile:
    """One active file of a snapshot, as the log records it."""

    path: str  # absolute path (local) or URL
    relative: str  # as the log records it (relative to the table root, or absolute)
    size: int
    modification_time: int
    rows: int | None
    partition: dict[str, Any]  # logical partition column -> typed value (None: null)


@dataclass
class DeltaSnapshot:
    """The active files of one version of a Delta table, and how to read them.

    The files are held column by column (``columns``, ``partitions``): a read builds
    a Python object only for a file it opens; ``files`` makes them all when asked."""

    location: str  # table root: a local directory or a URL, without a trailing slash
    version: int
    schema: pa.Schema  # logical, as deltalake reads the table (partition columns included)
    partition_columns: tuple[str, ...]
    # One row per active file: "path" (absolute path or URL), "relative" (as the log
    # records it), "size", "modification_time", "rows" (null: unknown).
    columns: pa.Table
    # Per partition column, its typed value per file (null: a null partition value).
    partitions: dict[str, pa.Array] = field(default_factory=dict)
    # Logical top-level column -> physical name in the files (column mapping), when mapped.
    physical: dict[str, str] = field(default_factory=dict)
    # One row per file (files' order): "rows", "min.<logical>", "max.<logical>",
    # "nulls.<logical>" for the top-level columns the log has statistics of.
    stats: pa.Table | None = None
    table: Any = None  # the deltalake.DeltaTable it came from
    # Per file with a deletion vector (its ``path``): the deleted row positions, sorted.
    deleted: dict[str, npt.NDArray[np.int64]] = field(default_factory=dict)
    # The table's key index descriptor, when fetched with the log: (its bytes, or None
    # when there is none).
    key_descriptor: tuple[bytes | None] | None = None
    _files: tuple[DeltaFile, ...] | None = field(default=None, repr=False)

    @classmethod
    def of_files(cls, location: str, version: int, schema: pa.Schema,
                 partition_columns: tuple[str, ...], files: Sequence[DeltaFile],
                 **kw: Any) -> DeltaSnapshot:
        """A snapshot of files already made one by one (deltalake's add actions)."""
        columns = pa.table({
            "path": pa.array([f.path for f in files], pa.string()),
            "relative": pa.array([f.relative for f in files], pa.string()),
            "size": pa.array([f.size for f in files], pa.int64()),
            "modification_time": pa.array([f.modification_time for f in files], pa.int64()),
            "rows": pa.array([f.rows for f in files], pa.int64())})
        partitions = {k: pa.array([f.partition.get(k) for f in files], schema.field(k).type)
                      for k in partition_columns}
        return cls(location, version, schema, partition_columns, columns, partitions,
                   _files=tuple(files), **kw)

    @property
    def files(self) -> tuple[DeltaFile, ...]:
        if self._files is None:
            c = self.columns
            parts = [(k, v.to_pylist()) for k, v in self.partitions.items()]
            self._files = tuple(
                DeltaFile(path, rel, size, mtime, rows, {k: v[i] for k, v in parts})
                for i, (path, rel, size, mtime, rows) in enumerate(zip(
                    *(c.column(n).to_pylist() for n in (
                        "path", "relative", "size", "modification_time", "rows")),
                    strict=True)))
        return self._files

    @property
    def n_files(self) -> int:
        return int(self.columns.num_rows)

    @property
    def column_mapping(self) -> bool:
        return any(k != v for k, v in self.physical.items())

    def describe(self) -> str:
        return f"Delta table {self.location}, version {self.version}, {self.n_files} files"


def _local_root(uri: str) -> str:
    """A ``file://`` table URI as a local path; other URIs unchanged, without the slash."""
    if uri.startswith("file://"):
        return urllib.parse.unquote(urllib.parse.urlsplit(uri).path).rstrip("/") or "/"
    return uri.rstrip("/")


def _join(root: str, rel: str) -> str:
    if "://" in rel or os.path.isabs(rel):
        return _local_root(rel) if rel.startswith("file://") else rel
    rel = urllib.parse.unquote(rel)  # the log URL-encodes names (partition values)
    if "://" in root:
        return f"{root}/{rel}"
    return os.path.join(root, *rel.split("/"))


def open_delta(source: Any, version: int | str | dt.datetime | None = None,
               storage_options: Mapping[str, Any] | None = None) -> Any:
    """A ``deltalake.DeltaTable`` for a path, URL or table, at ``version`` (a number,
    an RFC 3339 timestamp or a datetime) when given; UserInputError when it is not one."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    # A version number is loaded at once: loading the latest first and then moving
    # back read the log twice (~3 more round trips on a store).
    at = version if isinstance(version, int) and not isinstance(version, bool) else None
    try:
        if isinstance(source, DeltaTable):
            table = source
            if version is not None:
                # Time travel must not move the caller's own table object.
                table = DeltaTable(table.table_uri, version=at,
                                   storage_options=_options(storage_options))
        else:
            uri = os.fspath(source)
            table = DeltaTable(uri, version=at, storage_options=_options(storage_options))
        if version is not None and at is None:
            table.load_as_version(version)
    except TableNotFoundError as e:
        raise UserInputError(f"not a Delta table: {e}", path=str(source)) from None
    except (DeltaError, ValueError, OSError) as e:
        raise UserInputError(f"Delta table at version {version!r}: {e}",
                             path=str(source)) from None
    return table


def _options(storage_options: Mapping[str, Any] | None) -> dict[str, str] | None:
    if not storage_options:
        return None
    return {str(k): str(v) for k, v in storage_options.items()}


def _physical_names(schema_json: str) -> dict[str, str]:
    fields = json.loads(schema_json).get("fields", [])
    out = {}
    for f in fields:
        meta = f.get("metadata") or {}
        out[f["name"]] = str(meta.get("delta.columnMapping.physicalName", f["name"]))
    return out


def load_delta(source: Any, version: int | str | dt.datetime | None = None,
               storage_options: Mapping[str, Any] | None = None) -> DeltaSnapshot:
    """The snapshot of a Delta table (path, URL or ``deltalake.DeltaTable``) at ``version``
    (default: the table's current one, or the version a given table object is at)."""
    table = open_delta(source, version, storage_options)
    location = _local_root(table.table_uri)
    try:
        meta = table.metadata()
        schema = pa.schema(table.schema().to_arrow())
        physical = _physical_names(table.schema().to_json())
        partition_columns = tuple(meta.partition_columns)
        adds = pa.table(table.get_add_actions(flatten=False))
    except PqIndexError:
        raise
    except Exception as e:  # delta-rs raises its own and Arrow's errors
        raise UserInputError(f"Delta log not readable: {e}", path=location) from None
    try:
        deleted = _deleted_rows(table, location)
    except Exception as e:  # delta-kernel's: a vector file missing, damaged, a bad checksum
        raise CorruptFileError(f"deletion vectors not readable: {e}", path=location) from None
    files = []
    parts = adds.column("partition").to_pylist() if "partition" in adds.column_names else None
    for i, row in enumerate(adds.select(["path", "size_bytes", "modification_time",
                                         "num_records"]).to_pylist()):
        partition = {}
        if parts is not None and parts[i] is not None:
            # The partition struct is keyed by physical names under column mapping.
            by_physical = parts[i]
            partition = {k: by_physical.get(physical.get(k, k), by_physical.get(k))
                         for k in partition_columns}
        files.append(DeltaFile(_join(location, row["path"]), row["path"], int(row["size_bytes"]),
                               int(row["modification_time"]), row["num_records"], partition))
    active = {f.path for f in files}
    if len(active) < len(files):
        # Two logical files of one path (two vectors): the log is not a valid snapshot.
        raise CorruptFileError("the log names a data file twice in one snapshot",
                               path=location)
    stray = next((p for p in deleted if p not in active), None)
    if stray is not None:
        raise CorruptFileError("the log has a deletion vector for a file that is not in the "
                               "snapshot", path=stray)
    return DeltaSnapshot.of_files(location, table.version(), schema, partition_columns, files,
                                  physical=physical, stats=_stats(adds, physical), table=table,
                                  deleted=deleted)


def _deleted_rows(table: Any, location: str) -> dict[str, npt.NDArray[np.int64]]:
    """Per active file with a deletion vector, its deleted row positions.

    delta-rs reads the vectors (inline, or in files by relative or absolute path; their
    sizes and checksums checked) and hands each file's keep-mask; the log's add actions
    it exposes carry no vector descriptor to read them ourselves. A mask may end before
    the file does: rows past it are kept."""
    if "deletionVectors" not in (table.protocol().reader_features or []):
        return {}
    out: dict[str, npt.NDArray[np.int64]] = {}
    for batch in table.deletion_vectors():
        rb = pa.record_batch(batch)
        masks = rb.column("selection_vector")
        offsets = masks.offsets.to_numpy()
        keep = masks.values.to_numpy(zero_copy_only=False)
        for i, uri in enumerate(rb.column("filepath").to_pylist()):
            one = keep[offsets[i]:offsets[i + 1]]
            path = _local_root(uri) if uri.startswith("file://") else urllib.parse.unquote(uri)
            if not uri.startswith("file://") and "://" not in uri:
                path = _join(location, uri)
            out[path] = np.flatnonzero(~one).astype(np.int64)
    return {p: rows for p, rows in out.items() if rows.size}


def _stats(adds: pa.Table, physical: Mapping[str, str]) -> pa.Table:
    """Per file: rows and, per top-level logical column with log statistics of a
    flat type, its min, max and null count."""
    logical = {p: name for name, p in physical.items()}
    cols: dict[str, pa.Array] = {"rows": adds.column("num_records").combine_chunks()}
    for kind, prefix in (("min", "min."), ("max", "max."), ("null_count", "nulls.")):
        if kind not in adds.column_names:
            continue
        struct = adds.column(kind).combine_chunks()
        if not pa.types.is_struct(struct.type):
            continue
        for j in range(struct.type.num_fields):
            f = struct.type.field(j)
            if pa.types.is_nested(f.type):
                continue
            name = logical.get(f.name, f.name)
            cols[prefix + name] = struct.field(j)
    return pa.table(cols)


def partition_text(value: Any) -> str | None:
    """A typed partition value as the Delta log stores it (the protocol's
    partition value serialization)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return str(value.strftime("%Y-%m-%d %H:%M:%S.%f"))
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return str(value)
