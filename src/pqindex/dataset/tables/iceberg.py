"""An Apache Iceberg snapshot read through pyiceberg: its data files, pruned by the manifests.

pyiceberg owns the metadata: the snapshot, its manifests, partition specs and
transforms, the manifests' per-file bounds. ``plan_files(row_filter)`` gives the
data files a predicate may match (partition values and column bounds), so files
are ruled out before any footer is read; pqindex converts its predicate into
pyiceberg's expressions (a part it cannot convert becomes AlwaysTrue: keep).

From a table location, the metadata file is chosen as Iceberg's static readers
choose it: ``metadata/version-hint.text`` when present, else the metadata file
of the highest version number (``NNNNN-<uuid>.metadata.json`` or ``vN.metadata.json``).

Columns are bound by field id: each data file opened is renamed to the snapshot
schema's names by its columns' field ids (``mapping.rename_by_field_id``), so a
renamed column is read under its new name and a dropped one is not read even when a
new column took its name.

Position deletes (merge-on-read deletes by Spark, Flink, Trino...; pyiceberg 0.12
writes none, its deletes rewrite files) are applied: ``plan_files`` matches each data
file with the delete files that apply to it (partition and sequence numbers), each
delete file is read once by pyiceberg's own reader (Parquet, ORC, or a v3 deletion
vector in Puffin), and the data file's deleted positions leave its plan
(``deletes.py``). Not handled yet, refused with an UnsupportedError rather than read
wrong: equality deletes (pyiceberg's planning refuses them too), and a file without
field ids in a table that renamed columns (name mapping).
"""

from __future__ import annotations

import datetime as dt
import io
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from pqindex.errors import CorruptFileError, PqIndexError, UnsupportedError, UserInputError
from pqindex.expr.nodes import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    Compare,
    Expr,
    In,
    IsNull,
    Or,
)
from pqindex.expr.normalize import push_not
from pqindex.format.match import LeafOp

__all__ = ["IcebergFile", "IcebergSnapshot", "current_metadata", "load_iceberg"]


@dataclass(frozen=True)
class IcebergFile:
    path: str  # local path or URL
    size: int  # file_size_in_bytes, as the manifest records it
    rows: int


@dataclass
class IcebergSnapshot:
    location: str
    snapshot_id: int | None
    schema: pa.Schema
    files: tuple[IcebergFile, ...]
    table: Any  # the pyiceberg Table
    field_names: dict[int, str]  # the snapshot schema's top-level field ids -> names
    renamed: bool  # some field id had another name, or some name another id, before
    # Per data file (its ``path``) with position deletes: the deleted positions, sorted.
    deleted: dict[str, npt.NDArray[np.int64]] = field(default_factory=dict)
    # pyiceberg's DataFile of each of ``files``: partition values and column bounds.
    data_files: tuple[Any, ...] = ()

    def describe(self) -> str:
        return (f"Iceberg table {self.location}, snapshot {self.snapshot_id}, "
                f"{len(self.files)} files")

    def plan(self, expr: Expr) -> list[bool]:
        """Per file (``files``' order), whether ``expr`` may match a row of it, by
        pyiceberg's own evaluators (partition values, then the manifests' column
        bounds) over the entries the snapshot's one plan read: no manifest is read again."""
        from pyiceberg.table import ManifestGroupPlanner

        floats = frozenset(f.name for f in self.schema if pa.types.is_floating(f.type))
        row_filter = _to_iceberg(push_not(expr, lambda c: c.name in floats), self.table)
        planner = ManifestGroupPlanner(self.table.metadata, self.table.io, row_filter)
        metrics = planner._build_metrics_evaluator()
        by_spec: dict[int, Any] = {}
        out = []
        for df in self.data_files:
            part = by_spec.get(df.spec_id)
            if part is None:
                part = by_spec[df.spec_id] = planner._build_partition_evaluator(df.spec_id)
            out.append(bool(part(df)) and bool(metrics(df)))
        return out


_VERSIONED = re.compile(r"^(?:v)?(\d+)(?:-[^.]*)?\.metadata\.json$")


def current_metadata(location: str) -> str:
    """The metadata file a static reader takes for the table at ``location`` (local)."""
    meta = os.path.join(location, "metadata")
    hint = os.path.join(meta, "version-hint.text")
    names = os.listdir(meta)
    if os.path.isfile(hint):
        with open(hint) as fh:
            v = fh.read().strip()
        for name in (f"v{v}.metadata.json", f"{v}.metadata.json"):
            if name in names:
                return os.path.join(meta, name)
    versioned = [(int(m.group(1)), os.path.getmtime(os.path.join(meta, n)), n)
                 for n in names if (m := _VERSIONED.match(n))]
    if not versioned:
        raise UserInputError("no Iceberg metadata file (metadata/*.metadata.json)",
                             path=location)
    return os.path.join(meta, max(versioned)[2])


def _local(uri: str) -> str:
    return uri.removeprefix("file://") if uri.startswith("file://") else uri


def _open(source: Any) -> Any:
    from pyiceberg.table import StaticTable, Table

    if isinstance(source, Table):
        return source
    p = _local(os.fspath(source))
    if "://" in p:
        raise UnsupportedError("an Iceberg table on a store is read from a pyiceberg Table "
                               "(catalog.load_table) for now", path=p)
    metadata = p if p.endswith(".metadata.json") else current_metadata(p)
    return StaticTable.from_metadata(metadata)


def _tasks(table: Any, snapshot_id: int | None,
           storage_options: Mapping[str, Any] | None = None) -> list[Any]:
    """Every data file of the snapshot, with its delete files: pyiceberg's planning,
    once per snapshot, on metadata fetched in two concurrent waves where pqindex
    reaches the store (``_prefetched``)."""
    from pyiceberg.table import DataScan

    snap = (table.current_snapshot() if snapshot_id is None
            else table.snapshot_by_id(snapshot_id))
    fio = table.io if snap is None else _prefetched(table.io, snap.manifest_list,
                                                     storage_options)
    return list(DataScan(table_metadata=table.metadata, io=fio,
                         snapshot_id=snapshot_id).plan_files())


def _prefetched(inner: Any, manifest_list: str,
                storage_options: Mapping[str, Any] | None) -> Any:
    """``inner`` (a pyiceberg FileIO) serving the snapshot's manifest list and its
    manifests from memory: fetched by pqindex's I/O, the list in one GET and the
    manifests in one concurrent wave, without pyiceberg's HEAD before each GET. Where
    pqindex cannot fetch them (not an object store, a refusal), pyiceberg reads them."""
    from pyiceberg.manifest import read_manifest_list

    from pqindex.io.objects import get_objects
    from pqindex.io.source import is_object_store_url

    if not is_object_store_url(manifest_list):
        return inner
    try:
        (listed,) = get_objects([manifest_list], storage_options)
        if listed is None:
            return inner
        held = {manifest_list: listed}
        paths = [m.manifest_path for m in read_manifest_list(_held_input(manifest_list,
                                                                         listed))]
        for p, data in zip(paths, get_objects(paths, storage_options), strict=True):
            if data is not None:
                held[p] = data
    except Exception:  # credentials pyiceberg has and pqindex not, a store error: its read
        return inner
    return _held_io(inner, held)


def _held_input(location: str, data: bytes) -> Any:
    from pyiceberg.io import InputFile

    class Held(InputFile):
        def __len__(self) -> int:
            return len(data)

        def exists(self) -> bool:
            return True

        def open(self, seekable: bool = True) -> Any:
            return io.BytesIO(data)

    return Held(location)


def _held_io(inner: Any, held: Mapping[str, bytes]) -> Any:
    from pyiceberg.io import FileIO

    class HeldIO(FileIO):
        def new_input(self, location: str) -> Any:
            data = held.get(location)
            return inner.new_input(location) if data is None else _held_input(location, data)

        def new_output(self, location: str) -> Any:
            return inner.new_output(location)

        def delete(self, location: Any) -> None:
            inner.delete(location)

    return HeldIO(inner.properties)


def _renamed(table: Any, schema: Any) -> bool:
    """Whether some field id of ``schema`` had another name in the table's history, or
    some name another field id."""
    current = {f.field_id: f.name for f in schema.fields}
    by_name = {n: i for i, n in current.items()}
    return any((f.field_id in current and current[f.field_id] != f.name)
               or (f.name in by_name and by_name[f.name] != f.field_id)
               for s in table.metadata.schemas for f in s.fields)


def _plain_types(schema: pa.Schema) -> pa.Schema:
    """pyiceberg's Arrow schema with large strings/binaries as plain ones (what the files
    hold), field ids kept."""
    def plain(t: pa.DataType) -> pa.DataType:
        if pa.types.is_large_string(t):
            return pa.string()
        if pa.types.is_large_binary(t):
            return pa.binary()
        return t
    return pa.schema([f.with_type(plain(f.type)) for f in schema], metadata=schema.metadata)


def load_iceberg(source: Any, snapshot_id: int | None = None,
                 storage_options: Mapping[str, Any] | None = None) -> IcebergSnapshot:
    """The snapshot of an Iceberg table (a pyiceberg Table, a table location or a
    metadata.json path) at ``snapshot_id`` (default: the current snapshot)."""
    table = _open(source)
    location = _local(table.location()).rstrip("/")
    try:
        if snapshot_id is not None and table.snapshot_by_id(snapshot_id) is None:
            raise UserInputError(f"no snapshot {snapshot_id} in the table", path=location)
        schema = table.schema() if snapshot_id is None else _snapshot_schema(table, snapshot_id)
        tasks = _tasks(table, snapshot_id, storage_options)
    except PqIndexError:
        raise
    except Exception as e:  # pyiceberg raises its own, Avro's and the IO layer's errors
        if "equality deletes" in str(e):
            raise UnsupportedError(f"the snapshot has equality deletes: applying them is not "
                                   f"supported yet ({e})", path=location) from None
        raise UserInputError(f"Iceberg metadata not readable: {e}", path=location) from None
    deleted = _deleted_rows(table, tasks)
    files = tuple(IcebergFile(_local(t.file.file_path), int(t.file.file_size_in_bytes),
                              int(t.file.record_count)) for t in tasks)
    return IcebergSnapshot(location, snapshot_id if snapshot_id is not None else (
        table.metadata.current_snapshot_id), _plain_types(schema.as_arrow()), files, table,
        {f.field_id: f.name for f in schema.fields}, _renamed(table, schema), deleted,
        tuple(t.file for t in tasks))


def _deleted_rows(table: Any, tasks: list[Any]) -> dict[str, npt.NDArray[np.int64]]:
    """Per data file with position deletes, its deleted positions; each delete file is
    read once (one may cover many data files)."""
    from pyiceberg.io.pyarrow import _read_deletes
    from pyiceberg.manifest import DataFileContent

    read: dict[str, dict[str, Any]] = {}
    out: dict[str, npt.NDArray[np.int64]] = {}
    for t in tasks:
        parts = []
        for d in t.delete_files:
            if d.content != DataFileContent.POSITION_DELETES:
                raise UnsupportedError("the snapshot has equality deletes: applying them is "
                                       "not supported yet", path=d.file_path)
            if d.file_path not in read:
                try:
                    # pyiceberg's reader of its delete files (pinned below 0.13): the
                    # positions each one deletes, per data file it names.
                    read[d.file_path] = _read_deletes(table.io, d)
                except Exception as e:  # the IO layer's, Arrow's, Puffin's errors
                    raise CorruptFileError(f"position delete file not readable: {e}",
                                           path=d.file_path) from None
            got = read[d.file_path].get(t.file.file_path)
            if got is not None:
                parts.append(np.asarray(pa.chunked_array(got).to_numpy(), np.int64))
        if parts:
            out[_local(t.file.file_path)] = np.unique(np.concatenate(parts))
    return out


def _snapshot_schema(table: Any, snapshot_id: int) -> Any:
    snap = table.snapshot_by_id(snapshot_id)
    if snap is not None and snap.schema_id is not None:
        for s in table.metadata.schemas:
            if s.schema_id == snap.schema_id:
                return s
    return table.schema()


def _value(v: Any) -> Any:
    if isinstance(v, dt.datetime | dt.date):
        return v.isoformat()
    return v


def _to_iceberg(e: Expr, table: Any) -> Any:
    """pqindex's Not-free predicate as a pyiceberg expression; what does not convert
    (or does not bind to the table's schema) becomes AlwaysTrue."""
    from pyiceberg import expressions
    from pyiceberg.expressions.visitors import bind

    ice: Any = expressions  # (its constructors' stubs are stricter than their behaviour)

    if isinstance(e, AlwaysTrue):
        return ice.AlwaysTrue()
    if isinstance(e, AlwaysFalse):
        return ice.AlwaysFalse()
    if isinstance(e, And):
        return ice.And(_to_iceberg(e.left, table), _to_iceberg(e.right, table))
    if isinstance(e, Or):
        return ice.Or(_to_iceberg(e.left, table), _to_iceberg(e.right, table))
    leaf: Any = None
    if isinstance(e, Compare) and e.literal.value is not None:
        make = {LeafOp.EQ: ice.EqualTo, LeafOp.NE: ice.NotEqualTo, LeafOp.LT: ice.LessThan,
                LeafOp.LE: ice.LessThanOrEqual, LeafOp.GT: ice.GreaterThan,
                LeafOp.GE: ice.GreaterThanOrEqual}[e.op]
        leaf = make(e.column.name, _value(e.literal.value))
    elif isinstance(e, In) and not e.negated:
        values = {_value(v.value) for v in e.values if v.value is not None}
        leaf = ice.In(e.column.name, values) if values else ice.AlwaysFalse()
    elif isinstance(e, IsNull):
        leaf = ice.NotNull(e.column.name) if e.negated else ice.IsNull(e.column.name)
    if leaf is None:
        return ice.AlwaysTrue()
    try:
        bind(table.schema(), leaf, case_sensitive=True)
    except Exception:  # a literal of another type, a nested name: not used to prune
        return ice.AlwaysTrue()
    return leaf

