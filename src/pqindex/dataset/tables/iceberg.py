"""An Apache Iceberg snapshot read through pyiceberg: its data files, pruned by the manifests.

pyiceberg owns the metadata: the snapshot, its manifests, partition specs and
transforms, the manifests' per-file bounds. ``plan_files(row_filter)`` gives the
data files a predicate may match (partition values and column bounds), so files
are ruled out before any footer is read; pqindex converts its predicate into
pyiceberg's expressions (a part it cannot convert becomes AlwaysTrue: keep).

From a table location, the metadata file is chosen as Iceberg's static readers
choose it: ``metadata/version-hint.text`` when present, else the metadata file
of the highest version number (``NNNNN-<uuid>.metadata.json`` or ``vN.metadata.json``).

On a store the manifest list and the manifests are fetched by pqindex (one GET each,
the list beside the manifest its commit wrote first, as the writers name it, the
other manifests in a second wave when there are others); without delete manifests the
live entries are decoded by pyiceberg's Avro reader directly into plain lists
(``_live_entries``); pyiceberg's DataFile is made only for a file the bounds did not
rule out.
``iceberg_io.PqIndexFileIO`` (catalog property ``py-io-impl``) also reads the
metadata.json in one GET.

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
import functools
import io
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from pqindex.dataset.tables.prune import may_match
from pqindex.errors import CorruptFileError, PqIndexError, UnsupportedError, UserInputError
from pqindex.expr.bind import columns as columns_of
from pqindex.expr.nodes import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    Compare,
    Expr,
    In,
    IsNull,
    Or,
    leaf_exprs,
)
from pqindex.expr.normalize import push_not
from pqindex.format.match import LeafOp

__all__ = ["IcebergFile", "IcebergSnapshot", "current_metadata", "load_iceberg"]


class IcebergFile(NamedTuple):  # (a tuple: made once per file, a dataclass costs more)
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
    # The manifest entries of ``files``: partition values and column bounds.
    entries: _Entries | None = None
    # The table's key index descriptor, when fetched with the manifests: (its bytes, or
    # None when there is none).
    key_descriptor: tuple[bytes | None] | None = None

    def describe(self) -> str:
        return (f"Iceberg table {self.location}, snapshot {self.snapshot_id}, "
                f"{len(self.files)} files")

    def plan(self, expr: Expr) -> list[bool]:
        """Per file (``files``' order), whether ``expr`` may match a row of it, by
        pyiceberg's own evaluators (partition values, then the manifests' column
        bounds) over the entries the snapshot's one plan read: no manifest is read again."""
        from pyiceberg.table import ManifestGroupPlanner

        entries = self.entries
        if entries is None or not self.files:
            return [True] * len(self.files)
        floats = frozenset(f.name for f in self.schema if pa.types.is_floating(f.type))
        flat = push_not(expr, lambda c: c.name in floats)
        # The integer-like columns' bounds, decoded at once, rule files out for all files
        # in a few Arrow kernels; pyiceberg's evaluators decide the files left, whose
        # DataFiles are made then (not for the files already ruled out).
        nulls = {e.column.name for e in leaf_exprs(flat) if isinstance(e, IsNull)}
        first = may_match(flat, self._bounds(columns_of(flat), nulls), floats)
        out = [False] * len(self.files)
        kept = np.flatnonzero(np.asarray(first.to_numpy(zero_copy_only=False), bool))
        if not len(kept):
            return out
        row_filter = _to_iceberg(flat, self.table)
        planner = ManifestGroupPlanner(self.table.metadata, self.table.io, row_filter)
        metrics = planner._build_metrics_evaluator()
        by_spec: dict[int, Any] = {}
        for i in kept.tolist():
            df = entries.data_file(i)
            part = by_spec.get(df.spec_id)
            if part is None:
                part = by_spec[df.spec_id] = planner._build_partition_evaluator(df.spec_id)
            out[i] = bool(part(df)) and bool(metrics(df))
        return out

    def _bounds(self, names: Collection[str], nulls: Collection[str] = ()) -> pa.Table:
        """Per data file (``prune.may_match``'s layout) its rows and, for the top-level
        columns of ``names`` of an integer-like type, the manifest's lower and upper
        bounds, and for those of ``nulls`` (IS NULL's columns) the null count (unknown
        where a manifest has none)."""
        assert self.entries is not None
        entries = self.entries
        cols: dict[str, pa.Array] = {"rows": pa.array([f.rows for f in self.files],
                                                      pa.int64())}
        by_name = {n: i for i, n in self.field_names.items()}
        for name in names:
            fid = by_name.get(name)
            width = _BOUND_BYTES.get(self.schema.field(name).type.id) if (
                fid is not None and name in self.schema.names) else None
            if fid is None or width is None:
                continue
            t = self.schema.field(name).type
            for kind, maps in (("min", entries.lower()), ("max", entries.upper())):
                cols[f"{kind}.{name}"] = _int_bounds(
                    [None if m is None else m.get(fid) for m in maps], width).cast(t)
            if name not in nulls:
                continue
            cols[f"nulls.{name}"] = pa.array(
                [None if m is None else m.get(fid) for m in entries.nulls()], pa.int64())
        return pa.table(cols)


def _int_bounds(raw: list[bytes | None], width: int) -> pa.Array:
    """Iceberg's single-value serialization of ints and longs (little-endian two's
    complement of ``width`` bytes) decoded; a bound missing or of another width is null."""
    dtype = np.dtype("<i8" if width == 8 else "<i4")
    arrow = pa.int64() if width == 8 else pa.int32()
    present = [b for b in raw if b is not None and len(b) == width]
    if len(present) == len(raw):
        return pa.array(np.frombuffer(b"".join(present), dtype).astype(dtype.newbyteorder("=")),
                        arrow)
    return pa.array([None if b is None or len(b) != width
                     else int.from_bytes(b, "little", signed=True) for b in raw], arrow)


@dataclass
class _Entries:
    """The live entries of a snapshot's data manifests (``files``' order): their
    data_file structs, in the layout of pyiceberg's DataFile (read as plain lists by
    ``_live_entries``, or pyiceberg's DataFiles themselves: ``whole``)."""

    records: list[Any]
    spec_ids: list[int]
    whole: bool

    def _column(self, name: str) -> list[Any]:
        i = _data_file_positions()[name]
        return [r[i] for r in self.records]

    def lower(self) -> list[Mapping[int, bytes] | None]:
        return self._column("lower_bounds")

    def upper(self) -> list[Mapping[int, bytes] | None]:
        return self._column("upper_bounds")

    def nulls(self) -> list[Mapping[int, int] | None]:
        return self._column("null_value_counts")

    def data_file(self, i: int) -> Any:
        """pyiceberg's DataFile of entry ``i``, as its manifest reader makes it."""
        r = self.records[i]
        if self.whole:
            return r
        from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
        from pyiceberg.typedef import Record

        values = {name: r[j] for name, j in _data_file_positions().items()}
        values["partition"] = Record(*values["partition"])
        values["content"] = DataFileContent(values["content"])
        values["file_format"] = FileFormat(values["file_format"])
        df = DataFile.from_args(**values)
        df.spec_id = self.spec_ids[i]
        return df


@functools.cache
def _data_file_positions() -> dict[str, int]:
    """pyiceberg's DataFile fields (the manifest schema it reads with): name -> position."""
    from pyiceberg.manifest import DATA_FILE_TYPE, DEFAULT_READ_VERSION

    return {f.name: i for i, f in enumerate(DATA_FILE_TYPE[DEFAULT_READ_VERSION].fields)}


# Arrow types whose Iceberg bounds are little-endian integers (int, long, date,
# timestamps): their serialized width.
_BOUND_BYTES = {pa.int32().id: 4, pa.int64().id: 8, pa.date32().id: 4,
                pa.timestamp("us").id: 8}

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
           storage_options: Mapping[str, Any] | None = None
           ) -> tuple[list[Any] | _Entries, tuple[bytes | None] | None]:
    """Every data file of the snapshot: with its delete files, pyiceberg's planning
    (its tasks); without any, the live manifest entries (``_live_entries``). Read once
    per snapshot, on metadata fetched in one or two concurrent waves where pqindex
    reaches the store (``_prefetched``); and the table's key index descriptor when
    fetched in the first ((its bytes or None: there is none); None: not fetched)."""
    from pyiceberg.expressions import AlwaysTrue as IceTrue
    from pyiceberg.manifest import ManifestContent
    from pyiceberg.table import ManifestGroupPlanner

    snap = (table.current_snapshot() if snapshot_id is None
            else table.snapshot_by_id(snapshot_id))
    if snap is None:
        return [], None
    location = _local(table.location()).rstrip("/")
    fio, descriptor = _prefetched(table.io, snap.manifest_list, storage_options, location)
    manifests = fio.manifests if isinstance(fio, _HeldIO) else snap.manifests(fio)
    if any(m.content != ManifestContent.DATA for m in manifests):
        planner = ManifestGroupPlanner(table.metadata, fio, IceTrue())
        return list(planner.plan_files(manifests)), descriptor  # deletes matched to files
    # No delete file: no residual to make, no sequence number to compare, no filter to
    # evaluate (pqindex plans later): the live entries are all it takes.
    return _live_entries(fio, _live(manifests)), descriptor


def _live_entries(fio: Any, manifests: Sequence[Any]) -> _Entries:
    """The live entries of data ``manifests``, decoded by pyiceberg's Avro reader with its
    manifest schema into plain lists: not its ManifestEntry and DataFile objects, enums,
    sequence numbers' inheritance or evaluators (a DataFile is made for a file the
    bounds keep). Where that read fails, pyiceberg's DataFiles (``_live_files``)."""
    try:
        def one(m: Any) -> list[Any]:
            return _live_records(fio.new_input(m.manifest_path))

        per = _map(fio, one, manifests)
    except Exception:  # pyiceberg's internals moved, a manifest it reads otherwise: its reader
        files = _live_files(fio, manifests)
        return _Entries(files, [f.spec_id for f in files], True)
    return _Entries([d for got in per for d in got],
                    [m.partition_spec_id for m, got in zip(manifests, per, strict=True)
                     for _ in got], False)


def _map(fio: Any, fn: Any, manifests: Sequence[Any]) -> list[Any]:
    if isinstance(fio, _HeldIO) or len(manifests) < 2:
        return [fn(m) for m in manifests]
    from pyiceberg.utils.concurrent import ExecutorFactory

    # Read by pyiceberg's FileIO: the manifests side by side, as its planner reads them.
    return list(ExecutorFactory.get_or_create().map(fn, manifests))


def _live_records(input_file: Any) -> list[Any]:
    """The data_file structs (lists) of a manifest's entries that are not deleted."""
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.manifest import DEFAULT_READ_VERSION, MANIFEST_ENTRY_SCHEMAS

    schema = MANIFEST_ENTRY_SCHEMAS[DEFAULT_READ_VERSION]
    names = [f.name for f in schema.fields]
    status, data_file = names.index("status"), names.index("data_file")
    # The entry, its data_file and partition structs as plain lists (field ids -1, 2,
    # 102): filled by index in C, where a Record's item assignment is a Python call
    # (~15% of the decode).
    with AvroFile[Any](input_file, schema,
                       read_types={-1: _plain, 2: _plain, 102: _plain}) as reader:
        return [e[data_file] for e in reader if e[status] != 2]  # 2: DELETED


def _plain(*values: Any) -> list[Any]:
    return [*values]


def _live_files(fio: Any, manifests: Sequence[Any]) -> list[Any]:
    """The live DataFiles of data ``manifests``, decoded by pyiceberg's Avro reader (its
    manifest schema and record types) without what only delete matching and filtering
    use: the sequence numbers' inheritance, the evaluators, a thread per manifest."""
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.manifest import (
        DEFAULT_READ_VERSION,
        MANIFEST_ENTRY_SCHEMAS,
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestEntry,
        ManifestEntryStatus,
    )

    def one(m: Any) -> list[Any]:
        out = []
        with AvroFile[ManifestEntry](
                fio.new_input(m.manifest_path), MANIFEST_ENTRY_SCHEMAS[DEFAULT_READ_VERSION],
                read_types={-1: ManifestEntry, 2: DataFile},
                read_enums={0: ManifestEntryStatus, 101: FileFormat,
                            134: DataFileContent}) as reader:
            for entry in reader:
                if entry.status != ManifestEntryStatus.DELETED:
                    df = entry.data_file
                    df.spec_id = m.partition_spec_id  # as pyiceberg's reader inherits it
                    out.append(df)
        return out

    return [df for got in _map(fio, one, manifests) for df in got]


def _live(manifests: Sequence[Any]) -> list[Any]:
    """The data manifests that may hold a live file: one whose entries are all deleted
    (an overwrite's record of the files it replaced) holds none and is not read."""
    return [m for m in manifests if m.has_added_files() or m.has_existing_files()]


def _prefetched(inner: Any, manifest_list: str, storage_options: Mapping[str, Any] | None,
                location: str) -> tuple[Any, tuple[bytes | None] | None]:
    """``inner`` (a pyiceberg FileIO) serving the snapshot's manifest list and its
    manifests from memory: fetched by pqindex's I/O, without pyiceberg's HEAD before
    each GET. The list comes in one wave with the manifest its commit wrote first
    (``_own_manifest``: in a snapshot of one commit, all of them) and the table's key
    index descriptor; the manifests it names that did not come, in a second wave.
    Where pqindex cannot fetch them (not an object store, a refusal), pyiceberg reads
    them."""
    from pyiceberg.manifest import ManifestContent, read_manifest_list

    from pqindex.dataset.key_index import TABLE_DESCRIPTOR
    from pqindex.io.objects import get_objects
    from pqindex.io.source import is_object_store_url

    if not is_object_store_url(manifest_list):
        return inner, None
    descriptor: tuple[bytes | None] | None = None
    try:
        own = _own_manifest(manifest_list)
        extra = [f"{location}/{TABLE_DESCRIPTOR}"] if is_object_store_url(location) else []
        try:
            listed, *got = get_objects([manifest_list, *own, *extra], storage_options)
            if extra:
                descriptor = (got.pop(),)
        except PqIndexError:  # a guess or the descriptor refused: the list alone
            (listed,), got = get_objects([manifest_list], storage_options), []
        if listed is None:
            return inner, None
        held = {manifest_list: listed}
        early = dict(zip(own, got, strict=False))  # (empty when refused)
        every = list(read_manifest_list(_held_input(manifest_list, listed)))
        manifests = (_live(every) if all(m.content == ManifestContent.DATA for m in every)
                     else every)
        paths = [m.manifest_path for m in manifests]
        for p in paths:
            if early.get(p) is not None:  # used only where the list names it
                held[p] = early[p]  # type: ignore[assignment]
        rest = [p for p in paths if p not in held]
        for p, data in zip(rest, get_objects(rest, storage_options), strict=True):
            if data is not None:
                held[p] = data
    except Exception:  # credentials pyiceberg has and pqindex not, a store error: its read
        return inner, None
    return _HeldIO(inner, held, every), descriptor


# A manifest list as Iceberg's writers name it (Java, pyiceberg, iceberg-rust):
# snap-<snapshot id>-<attempt>-<commit uuid>.avro; the manifests that commit writes
# are <commit uuid>-m<n>.avro beside it, numbered from 0.
_MANIFEST_LIST = re.compile(r"^(?P<dir>.*/)snap-\d+-\d+-(?P<uuid>[0-9a-fA-F-]{36})\.avro$")


def _own_manifest(manifest_list: str) -> list[str]:
    """The first manifest the commit that wrote ``manifest_list`` wrote, by the writers'
    naming: in a snapshot that added or removed files it is usually in the list, and
    in a snapshot of one commit (a table written once, pqindex's index commit) it holds
    all the live entries. Fetched beside the list, so such a snapshot's manifests cost
    no round trip of their own; used only where the list names it. Empty for a list
    named otherwise."""
    m = _MANIFEST_LIST.match(manifest_list)
    return [f"{m['dir']}{m['uuid']}-m0.avro"] if m else []


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


class _HeldIO:
    """A pyiceberg FileIO serving ``held`` objects from memory, others by ``inner``;
    ``manifests``: the snapshot's manifest list, as pyiceberg read it (not again)."""

    def __init__(self, inner: Any, held: Mapping[str, bytes], manifests: Sequence[Any]
                 ) -> None:
        self.inner = inner
        self.held = held
        self.properties = inner.properties
        self.manifests = list(manifests)

    def new_input(self, location: str) -> Any:
        data = self.held.get(location)
        return (self.inner.new_input(location) if data is None
                else _held_input(location, data))

    def new_output(self, location: str) -> Any:
        return self.inner.new_output(location)

    def delete(self, location: Any) -> None:
        self.inner.delete(location)


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
    from pqindex.dataset.tables.iceberg_io import table_storage_options

    table = _open(source)
    location = _local(table.location()).rstrip("/")
    if storage_options is None:  # the catalog's own S3 settings, as pyiceberg reads them
        storage_options = table_storage_options(table)
    try:
        if snapshot_id is not None and table.snapshot_by_id(snapshot_id) is None:
            raise UserInputError(f"no snapshot {snapshot_id} in the table", path=location)
        schema = table.schema() if snapshot_id is None else _snapshot_schema(table, snapshot_id)
        tasks, descriptor = _tasks(table, snapshot_id, storage_options)
    except PqIndexError:
        raise
    except Exception as e:  # pyiceberg raises its own, Avro's and the IO layer's errors
        if "equality deletes" in str(e):
            raise UnsupportedError(f"the snapshot has equality deletes: applying them is not "
                                   f"supported yet ({e})", path=location) from None
        raise UserInputError(f"Iceberg metadata not readable: {e}", path=location) from None
    if isinstance(tasks, _Entries):
        entries, deleted = tasks, {}
    else:
        deleted = _deleted_rows(table, tasks)
        dfs = [t.file for t in tasks]
        entries = _Entries(dfs, [df.spec_id for df in dfs], True)
    p = _data_file_positions()
    path, size, rows = p["file_path"], p["file_size_in_bytes"], p["record_count"]
    files = tuple(IcebergFile(_local(r[path]), int(r[size]), int(r[rows]))
                  for r in entries.records)
    return IcebergSnapshot(location, snapshot_id if snapshot_id is not None else (
        table.metadata.current_snapshot_id), _plain_types(schema.as_arrow()), files, table,
        {f.field_id: f.name for f in schema.fields}, _renamed(table, schema), deleted,
        entries, descriptor)


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

