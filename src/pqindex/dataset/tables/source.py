"""A table snapshot as a dataset's source: its files, partition values and statistics.

The snapshot names the files (no LIST): each one's size comes from the log, so
opening it needs no HEAD. Partition values come from the log, typed. Before any
footer is read, the log's per-file statistics (and the partition values, as
min = max) rule files out for a scan's predicate (``prune.may_match``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pqindex.dataset.discovery import DataFile, Discovery
from pqindex.dataset.partition_kinds import partition_kind, partition_text
from pqindex.dataset.planning import Planned, gc_paused
from pqindex.dataset.sources import FILES_SCHEMA, FileFacts, partition_column
from pqindex.dataset.tables.deletes import DeletedRows, Holes, drop_deleted, row_group_holes
from pqindex.dataset.tables.delta import DeltaSnapshot, _local_root, load_delta
from pqindex.dataset.tables.delta_log import read_log
from pqindex.dataset.tables.evidence import TableEvidence
from pqindex.dataset.tables.iceberg import IcebergSnapshot, load_iceberg
from pqindex.dataset.tables.mapping import rename_by_field_id, rename_columns
from pqindex.dataset.tables.prune import may_match, widen
from pqindex.errors import UnsupportedError, UserInputError
from pqindex.expr.nodes import TRUE, Expr
from pqindex.format.file import ParquetFile
from pqindex.io.source import ObjectInfo

__all__ = ["TableSource", "is_table_source", "table_source"]

# Delta writers keep string statistics to a prefix of this many characters.
DELTA_STRING_PREFIX = 32


def _discovery_type(name: str, t: pa.DataType, location: str) -> str:
    """The discovery's partition kind of a table's partition column."""
    if pa.types.is_integer(t) and not pa.types.is_unsigned_integer(t) and t.bit_width == 64:
        return "int64"
    kind = partition_kind(t)
    if kind is None:
        raise UnsupportedError(f"partition column of type {t} is not supported (boolean, "
                               "integers, floats, decimals, dates, timestamps, strings and "
                               "binaries are)", path=location, column=name)
    return kind


@dataclass
class TableSource:
    """What a dataset reads of a table snapshot."""

    description: str  # "Delta table <root>, version 3, 12 files"
    location: str
    discovery: Discovery
    schema: pa.Schema  # the files' columns (physical names), partition columns left out
    # Per file of ``discovery.files``, whether ``expr`` may match a row of it.
    may_match: Callable[[Expr], list[bool]]
    rows: tuple[int | None, ...] = ()  # per file, as the snapshot records it
    # The first file the latest plan kept: the one a plan opens first.
    first: DataFile | None = None
    # Physical -> logical top-level names (Delta column mapping; ``mapping.py``).
    logical_names: dict[str, str] = field(default_factory=dict)
    # Field id -> current top-level name (Iceberg binds columns by id; ``mapping.py``).
    field_names: dict[int, str] = field(default_factory=dict)
    # Whether a column was renamed (or a name reused): a file without field ids is then
    # not read by name.
    renamed: bool = False
    # The version read ("delta:3", "iceberg:<snapshot id>"): a key index is tied to one.
    version: str | None = None
    # pqindex's sidecar of this version (``evidence.py``): file-scope Bloom filters and
    # distinct sets, consulted when the table's statistics keep more than one file.
    evidence: TableEvidence | None = None
    # Per file (its DataFile.path): the row positions the table deleted (``deletes.py``),
    # and what deleted them.
    deleted: DeletedRows = field(default_factory=dict)
    deleted_by: str = "deletion vector"
    # The key index descriptor (``dataset/key_index.py``), when fetched with the log or
    # manifests: (its bytes, or None when there is none); None: not fetched.
    key_descriptor: tuple[bytes | None] | None = None
    # The snapshot's own columns for ``facts`` (path, size, rows, partition(<key>) as
    # text), when it holds them as arrays: no pass over the DataFiles.
    file_facts: dict[str, pa.Array] | None = None
    _holes: dict[str, dict[int, Holes]] = field(default_factory=dict, repr=False)

    def rename(self, pf: ParquetFile) -> None:
        """Give an opened file of the table the table's column names."""
        if self.logical_names:
            rename_columns(pf, self.logical_names)
        elif self.field_names and not rename_by_field_id(pf, self.field_names) and (
                self.renamed):
            raise UnsupportedError("the file has no field ids and the table renamed columns: "
                                   "reading it by name mapping is not supported yet",
                                   path=pf.path)

    def holes(self, path: str, pf: ParquetFile) -> dict[int, Holes]:
        """The deleted rows of the table's file ``path`` (opened as ``pf``), per row
        group (made once)."""
        rows = self.deleted.get(path)
        if rows is None:
            return {}
        got = self._holes.get(path)
        if got is None:
            got = self._holes[path] = row_group_holes(pf, rows, self.deleted_by)
        return got

    def without_deleted(self, planned: Planned) -> Planned:
        """A file's planned outcome without the rows the table deleted."""
        df, of, plan, bound = planned
        if df.path not in self.deleted or of is None or plan is None:
            return planned
        return df, of, drop_deleted(plan, self.holes(df.path, of.pf), self.deleted_by), bound

    # The staged planner's Source protocol (dataset/sources.py).
    @property
    def name(self) -> str:
        return self.description

    @property
    def listed(self) -> bool:
        return False  # the snapshot names its files: no LIST

    def facts(self) -> FileFacts:
        """The snapshot's files as FileFacts: sizes and rows the table records, raw
        partition values; no per-column statistics there (``prune`` used them first)."""
        files = self.discovery.files
        n = len(files)
        if self.file_facts is not None:
            got = self.file_facts
            cols = [got["path"], got["size"], pa.nulls(n, pa.string()),
                    pa.nulls(n, pa.int64()), got["rows"], pa.nulls(n, pa.int32())]
            fields = list(FILES_SCHEMA)
            for k in self.discovery.partition_columns:
                cols.append(got[partition_column(k)])
                fields.append(pa.field(partition_column(k), pa.string()))
            return FileFacts(pa.Table.from_arrays(cols, schema=pa.schema(fields)), self.name,
                             self.listed)
        cols = [
            pa.array([f.path for f in files], pa.string()),
            pa.array([None if f.info is None else f.info.size for f in files], pa.int64()),
            pa.nulls(n, pa.string()), pa.nulls(n, pa.int64()),
            pa.array(list(self.rows) if len(self.rows) == n else [None] * n, pa.int64()),
            pa.nulls(n, pa.int32())]
        fields = list(FILES_SCHEMA)
        for k in self.discovery.partition_columns:
            cols.append(pa.array([dict(f.partition).get(k) for f in files], pa.string()))
            fields.append(pa.field(partition_column(k), pa.string()))
        return FileFacts(pa.Table.from_arrays(cols, schema=pa.schema(fields)), self.name,
                         self.listed)

    def prune(self, expr: Expr) -> tuple[list[DataFile], int]:
        """The files whose statistics let a row satisfy ``expr``, and how many are not."""
        files = list(self.discovery.files)
        if not files or expr == TRUE:
            return files, 0
        keep = self.may_match(expr)
        kept = [f for f, k in zip(files, keep, strict=True) if k]
        if self.evidence is not None and len(kept) > 1:
            out = self.evidence.ruled_out(files, kept, expr)
            kept = [f for f, o in zip(kept, out, strict=True) if not o]
        return kept, len(files) - len(kept)


def _texts(values: pa.Array) -> list[str | None]:
    """Typed partition values as the log stores them (``partition_text``): integers and
    strings in one Arrow cast, others once per distinct value."""
    t = values.type
    if pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        got: list[str | None] = values.cast(pa.string()).to_pylist()
        return got
    memo: dict[Any, str | None] = {None: None}
    out = []
    for v in values.to_pylist():
        if v not in memo:
            memo[v] = partition_text(v)
        out.append(memo[v])
    return out


def _delta_source(snap: DeltaSnapshot) -> TableSource:
    if snap.column_mapping and any(pa.types.is_nested(f.type) for f in snap.schema):
        raise UnsupportedError("column mapping (delta.columnMapping.mode) over nested "
                               "columns is not supported yet: read the table with deltalake",
                               path=snap.location)
    types = {k: _discovery_type(k, snap.schema.field(k).type, snap.location)
             for k in snap.partition_columns}
    c = snap.columns
    paths = c.column("path").to_pylist()
    sizes = c.column("size").to_pylist()
    # Per file its (key, text) partition pairs, null values left out.
    texts = [(k, _texts(snap.partitions[k])) for k in snap.partition_columns]
    if not texts:
        parts: list[tuple[tuple[str, str], ...]] = [()] * len(paths)
    elif len(texts) == 1:
        k, one = texts[0]
        parts = [() if v is None else ((k, v),) for v in one]
    else:
        parts = [tuple((k, v) for k, v in zip(snap.partition_columns, vs, strict=True)
                       if v is not None)
                 for vs in zip(*(t for _, t in texts), strict=True)]
    files = tuple(DataFile(p, kv, ObjectInfo(n))
                  for p, kv, n in zip(paths, parts, sizes, strict=True))
    rows = c.column("rows").combine_chunks()
    stats = snap.stats if snap.stats is not None else pa.table({"rows": rows})
    stats = widen(stats, DELTA_STRING_PREFIX, millisecond_timestamps=True)
    # Partition columns: each file's value is its min and max.
    file_facts = {"path": pa.array(paths, pa.string()), "size": c.column("size"),
                  "rows": rows}
    for k, text in texts:
        values = snap.partitions[k]
        file_facts[partition_column(k)] = pa.array(text, pa.string())
        nulls = pc.if_else(pc.is_null(values), stats.column("rows").fill_null(0),
                           pa.scalar(0, pa.int64()))
        for kind, arr in (("min", values), ("max", values), ("nulls", nulls)):
            name = f"{kind}.{k}"
            if name in stats.column_names:
                stats = stats.drop_columns([name])
            stats = stats.append_column(name, arr)
    floats = frozenset(f.name for f in snap.schema if pa.types.is_floating(f.type))

    def keep(expr: Expr) -> list[bool]:
        return [bool(k) for k in may_match(expr, stats, floats).to_pylist()]

    # Files are read under the logical names (column mapping renames their footers).
    schema = pa.schema([f for f in snap.schema if f.name not in snap.partition_columns],
                       metadata=snap.schema.metadata)
    logical = {p: name for name, p in snap.physical.items()} if snap.column_mapping else {}
    return TableSource(snap.describe(), snap.location,
                       Discovery(files, snap.partition_columns, types), schema,
                       keep, tuple(rows.to_pylist()), logical_names=logical,
                       version=f"delta:{snap.version}", deleted=snap.deleted,
                       key_descriptor=snap.key_descriptor, file_facts=file_facts)


def _iceberg_source(snap: IcebergSnapshot) -> TableSource:
    # Partition source columns are in the data files: no partition column to add.
    files = tuple(DataFile(f.path, (), ObjectInfo(f.size)) for f in snap.files)

    def keep(expr: Expr) -> list[bool]:
        return snap.plan(expr)

    return TableSource(snap.describe(), snap.location, Discovery(files), snap.schema, keep,
                       tuple(f.rows for f in snap.files), field_names=snap.field_names,
                       renamed=snap.renamed, version=f"iceberg:{snap.snapshot_id}",
                       deleted=snap.deleted, deleted_by="position deletes",
                       key_descriptor=snap.key_descriptor)


def _read_delta(source: Any, version: int | str | dt.datetime | None,
                storage_options: Mapping[str, Any] | None,
                log_names: Sequence[str] | None = None) -> DeltaSnapshot:
    """A Delta snapshot: from a path or URL at the latest or a numbered version, read
    by pqindex in two round trips (``delta_log.py``); otherwise, and where that
    reader leaves the log to it, by deltalake."""
    if isinstance(source, (str, os.PathLike)) and (
            version is None or (isinstance(version, int) and not isinstance(version, bool))):
        p = os.fspath(source)
        local = "://" not in p or p.startswith("file://")
        location = os.path.abspath(_local_root(p)) if local else p.rstrip("/")
        snap = read_log(location, version, storage_options, log_names)
        if snap is not None:
            return snap
    return load_delta(source, version, storage_options)


def is_table_source(source: Any) -> bool:
    """Whether ``source`` is a table object (deltalake, pyiceberg) or the root of a table."""
    if type(source).__module__.startswith(("deltalake", "pyiceberg")):
        return True
    if not isinstance(source, (str, os.PathLike)):
        return False
    p = os.fspath(source)
    if "://" in p and not p.startswith("file://"):
        return False  # detected by table_source when asked for (a request)
    p = p.removeprefix("file://")
    if p.endswith(".metadata.json") and os.path.isfile(p):
        return True
    meta = os.path.join(p, "metadata")
    with contextlib.suppress(OSError):
        if os.path.isdir(meta) and any(n.endswith(".metadata.json") for n in os.listdir(meta)):
            return True
    log = os.path.join(p, "_delta_log")
    try:
        # A log without a commit (or checkpoint) is no table yet.
        return os.path.isdir(log) and any(n.endswith((".json", ".parquet"))
                                          for n in os.listdir(log))
    except OSError:
        return False


def _is_iceberg(source: Any) -> bool:
    if type(source).__module__.startswith("pyiceberg"):
        return True
    if not isinstance(source, (str, os.PathLike)):
        return False
    p = os.fspath(source).removeprefix("file://")
    return p.endswith(".metadata.json") or (
        "://" not in p and not os.path.isdir(os.path.join(p, "_delta_log"))
        and os.path.isdir(os.path.join(p, "metadata")))


def table_source(source: Any, *, version: int | str | dt.datetime | None = None,
                 snapshot_id: int | None = None,
                 storage_options: Mapping[str, Any] | None = None,
                 log_names: Sequence[str] | None = None) -> TableSource:
    """The source of a table: a ``deltalake.DeltaTable`` or a Delta table's root (path
    or URL) at ``version`` (a number or a timestamp); a pyiceberg ``Table``, an Iceberg
    table's location or its metadata.json at ``snapshot_id``. ``log_names``: the names
    in a Delta table's ``_delta_log/`` when a LIST just showed them."""
    if _is_iceberg(source):
        if version is not None:
            raise UserInputError("an Iceberg table takes snapshot_id=, not version=")
        # The manifests' entries decode into ~20 objects each that live as long as the
        # dataset: a collection in the middle of it moved them to the oldest generation
        # and set off a full collection every other cold read (60-200 ms in a process
        # that imported pyiceberg, deltalake and polars; more than the decode itself).
        with gc_paused():
            isnap = load_iceberg(source, snapshot_id, storage_options)
            found = _iceberg_source(isnap)
        # A renamed column or a reused name: the sidecar's footers bind by name, not id.
        if isnap.snapshot_id is not None and not isnap.renamed:
            found.evidence = TableEvidence(isnap.location, isnap.snapshot_id, storage_options,
                                           "iceberg")
        return found
    if snapshot_id is not None:
        raise UserInputError("a Delta table takes version=, not snapshot_id=")
    module = type(source).__module__
    if module.startswith("deltalake") or isinstance(source, (str, os.PathLike)):
        snap = _read_delta(source, version, storage_options, log_names)
        found = _delta_source(snap)
        if not snap.column_mapping:  # the sidecar's footers name physical columns
            found.evidence = TableEvidence(snap.location, snap.version, storage_options)
        return found
    raise UserInputError(f"not a table: {type(source).__name__}")

