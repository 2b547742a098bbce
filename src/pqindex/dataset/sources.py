"""Sources: which files a dataset has, and what is known of them without opening them.

A source answers with :class:`FileFacts`: one row per file as Arrow columns (path,
size, ETag, mtime, rows, the manifest schema the file has, and per hive key its raw
partition value), and per data column, on demand, its statistics as Arrow arrays
aligned with those rows (:class:`ColumnStatistics`). Planning prunes over them in
bulk (``dataset/stages.py``): 100,000 files are one pass of Arrow kernels.

The protocol (:class:`Source`) is small on purpose; table snapshots (Delta, Iceberg)
and a key index add implementations of it:

* ``name``: what the facts come from, as ``explain`` prints it;
* ``listed``: whether the files were found by listing the store (a commit point that
  names them, a manifest the pipeline committed or a table log, needs no LIST);
* ``facts()``: the :class:`FileFacts`.

Statistics are *sort keys* under the column's type-defined order, so one comparison
kernel serves every type: ``int64`` for integers, booleans, dates, times and
timestamps (their ticks), ``float64`` for floats, ``binary`` for strings, binary and
UUIDs (unsigned byte order, what Arrow's binary comparison is). A null bound is
unknown (the file is kept). A bound that is not trustworthy is never put here: NaN,
INT96, unknown column orders and legacy min/max in the wrong order come out null,
judged by the same code as footer statistics (``format.values.statistics_bounds``).
A column whose keys do not fit these types (decimals, unsigned 64-bit values above
2^63) has no :class:`ColumnStatistics`; planning then asks each file's own evidence.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

from pqindex.format.arrow_build import (
    FALSE,
    ZERO,
    bool_array,
    bytes_array,
    int64_array,
    ints_of,
    key_array,
    key_scalar,
    mask_of,
    string_array,
)
from pqindex.format.file import ParquetFile
from pqindex.format.schema import LeafColumn
from pqindex.format.value_type import Kind, ValueType
from pqindex.format.values import bound_order, statistics_bounds
from pqindex.indexes.evidence import value_key

if TYPE_CHECKING:
    from pqindex.dataset.discovery import Discovery
    from pqindex.dataset.manifest import FileEntry, ManifestView

__all__ = [
    "FALSE",
    "FILES_SCHEMA",
    "ZERO",
    "ColumnStatistics",
    "FileFacts",
    "ListingSource",
    "ManifestSource",
    "Source",
    "bool_array",
    "bytes_array",
    "int64_array",
    "ints_of",
    "key_array",
    "key_scalar",
    "key_type",
    "mask_of",
    "partition_column",
    "string_array",
]

# The columns every FileFacts table starts with; a null is "not known".
FILES_SCHEMA = pa.schema([
    pa.field("path", pa.string(), nullable=False),  # as the dataset names the file
    pa.field("size", pa.int64()),
    pa.field("etag", pa.string()),
    pa.field("mtime", pa.int64()),  # nanoseconds (local files)
    pa.field("rows", pa.int64()),
    pa.field("schema", pa.int32()),  # index into FileFacts.schemas
])

_BYTE_KINDS = frozenset({Kind.STRING, Kind.BINARY, Kind.UUID})
_FLOAT_KINDS = frozenset({Kind.FLOAT, Kind.DOUBLE, Kind.FLOAT16})
_TICK_KINDS = frozenset({Kind.BOOL, Kind.INT, Kind.UINT, Kind.DATE, Kind.TIME,
                         Kind.TIMESTAMP})


def partition_column(key: str) -> str:
    """The FileFacts column holding hive key ``key``'s raw value (string, from the path)."""
    return f"partition({key})"


def key_type(vt: ValueType) -> pa.DataType | None:
    """The Arrow type of the sort keys of values of ``vt``; None when they have none."""
    if vt.kind in _TICK_KINDS:
        return pa.int64()
    if vt.kind in _FLOAT_KINDS:
        return pa.float64()
    if vt.kind in _BYTE_KINDS:
        return pa.binary()
    return None


@dataclass(frozen=True)
class ColumnStatistics:
    """One column's statistics across the files of a :class:`FileFacts`, aligned with
    its rows; nulls are unknown. ``min``/``max`` are sort keys (module doc)."""

    min: pa.Array
    max: pa.Array
    nulls: pa.Array  # int64: null values in the file
    nans: pa.Array  # int64: NaN values (floats only; null elsewhere)
    values: pa.Array  # int64: values (rows for a flat column), nulls included
    exact: pa.Array  # bool: both bounds are actual values (not shortened)
    all_nan: pa.Array  # bool: every non-null value is NaN

    def take(self, indices: pa.Array) -> ColumnStatistics:
        return ColumnStatistics(*(getattr(self, f).take(indices) for f in _STAT_FIELDS))


_STAT_FIELDS = ("min", "max", "nulls", "nans", "values", "exact", "all_nan")


@dataclass(frozen=True)
class FileFacts:
    """What a source knows of its files without opening them: ``files`` (columns of
    :data:`FILES_SCHEMA` then one :func:`partition_column` per hive key), and per data
    column its statistics, built the first time a predicate asks for it."""

    files: pa.Table
    origin: str  # the source's name
    listed: bool  # the files were found by a LIST (not named by a commit point)
    # Footer-only stand-ins (schema, column orders, Arrow schema) the ``schema`` column
    # points into: a predicate is bound once per schema, not per file.
    schemas: tuple[ParquetFile, ...] = ()
    # Columns some file has embedded file-level summaries of (distinct sets, zone
    # maps): the embedded stage asks those files' own evidence.
    summarized: frozenset[str] = frozenset()
    statistics_of: Callable[[str], ColumnStatistics | None] | None = field(
        default=None, repr=False, compare=False)
    _cache: dict[str, ColumnStatistics | None] = field(default_factory=dict, repr=False,
                                                       compare=False)

    @property
    def num_files(self) -> int:
        return int(self.files.num_rows)

    @property
    def paths(self) -> list[str]:
        return [str(p) for p in self.files.column("path").to_pylist()]

    def statistics(self, column: str) -> ColumnStatistics | None:
        """The statistics of the leaf named ``column`` (dotted path), or None when the
        source has none usable for it."""
        if column not in self._cache:
            self._cache[column] = (None if self.statistics_of is None
                                   else self.statistics_of(column))
        return self._cache[column]


class Source(Protocol):
    """Where a dataset's files, and the facts known of them, come from."""

    @property
    def name(self) -> str: ...

    @property
    def listed(self) -> bool: ...

    def facts(self) -> FileFacts: ...


def _files_table(paths: Sequence[str], sizes: Sequence[int | None],
                 etags: Sequence[str | None], mtimes: Sequence[int | None],
                 rows: Sequence[int | None], schemas: Sequence[int | None],
                 partitions: Mapping[str, Sequence[str | None]],
                 given: Mapping[str, Any] | None = None) -> pa.Table:
    """The files table; ``given``: columns already built (Arrow), by name."""
    g = dict(given or {})
    cols = [g["path"] if "path" in g else string_array(paths)]
    for name, values, arrow in (("size", sizes, pa.int64()), ("etag", etags, pa.string()),
                                ("mtime", mtimes, pa.int64()), ("rows", rows, pa.int64()),
                                ("schema", schemas, pa.int32())):
        cols.append(g[name] if name in g else pa.array(values, arrow))
    fields = list(FILES_SCHEMA)
    for k, vals in partitions.items():
        cols.append(string_array(vals))
        fields.append(pa.field(partition_column(k), pa.string()))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))


def _partitions(disc: Discovery) -> dict[str, list[str | None]]:
    out: dict[str, list[str | None]] = {k: [] for k in disc.partition_columns}
    if not out:
        return out
    for df in disc.files:
        raw = dict(df.partition)
        for k, vals in out.items():
            vals.append(raw.get(k))
    return out


@dataclass(frozen=True)
class ListingSource:
    """The files a listing (or a glob, or a list of paths) found; sizes and ETags as
    the listing gave them, no statistics."""

    discovery: Discovery
    name: str = "listing"
    listed: bool = True

    def facts(self) -> FileFacts:
        files = self.discovery.files
        infos = [df.info for df in files]
        table = _files_table(
            [df.path for df in files], [None if i is None else i.size for i in infos],
            [None if i is None else i.etag for i in infos],
            [None if i is None else i.mtime for i in infos], [None] * len(files),
            [None] * len(files), _partitions(self.discovery))
        return FileFacts(table, self.name, self.listed)


def _bound_key(vt: ValueType, value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value_key(vt, value)


def _leaf_named(pf: ParquetFile, name: str) -> LeafColumn | None:
    return next((lf for lf in pf.schema.leaves if lf.name == name), None)


def entry_statistics(entries: Sequence[FileEntry | None], schemas: Sequence[ParquetFile],
                     column: str) -> ColumnStatistics | None:
    """The statistics of leaf ``column`` from manifest entries (None: no entry), built
    as ``StatisticsEvidence`` judges an entry's bounds; None when the column's keys
    have no common Arrow type (or it is repeated: its values are not rows)."""
    leaves: dict[int, LeafColumn | None] = {}
    arrow: pa.DataType | None = None
    cols: dict[str, list[Any]] = {f: [] for f in _STAT_FIELDS}
    for e in entries:
        leaf = None
        if e is not None and e.schema is not None and e.columns:
            if e.schema not in leaves:
                leaves[e.schema] = _leaf_named(schemas[e.schema], column)
            leaf = leaves[e.schema]
        if leaf is not None:
            if leaf.max_repetition_level > 0:
                return None
            vt = bound_order(leaf).value_type
            kt = key_type(vt)
            if kt is None or (arrow is not None and kt != arrow):
                return None
            arrow = kt
        col = None if leaf is None else e.columns[leaf.index]  # type: ignore[union-attr]
        if leaf is None or col is None:
            for f in _STAT_FIELDS:
                cols[f].append(None)
            continue
        st, values = col
        b = statistics_bounds(st, leaf, values)
        cols["min"].append(_bound_key(vt, b.min))
        cols["max"].append(_bound_key(vt, b.max))
        cols["nulls"].append(b.null_count)
        cols["nans"].append(b.nan_count)
        cols["values"].append(values)
        cols["exact"].append(bool(b.min_exact and b.max_exact) or vt.kind not in (
            Kind.STRING, Kind.BINARY))
        cols["all_nan"].append(b.all_nan)
    if arrow is None:
        return None
    try:
        lo, hi = pa.array(cols["min"], arrow), pa.array(cols["max"], arrow)
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None  # keys outside int64 (unsigned 64-bit values above 2^63)
    return ColumnStatistics(lo, hi, pa.array(cols["nulls"], pa.int64()),
                            pa.array(cols["nans"], pa.int64()),
                            pa.array(cols["values"], pa.int64()),
                            pa.array(cols["exact"], pa.bool_()),
                            pa.array(cols["all_nan"], pa.bool_()))


@dataclass(frozen=True)
class ManifestSource:
    """A pqindex manifest's files and statistics, for the files its view matched (the
    listing's other files are planned from their footers)."""

    view: ManifestView
    discovery: Discovery
    name: str = "manifest"
    listed: bool = True

    def facts(self) -> FileFacts:
        files = self.discovery.files
        matched = self.view.matched
        entries = [None if (hit := matched.get(df.path)) is None else hit[0] for df in files]
        schemas = tuple(self.view.manifest.schemas)
        infos = [df.info for df in files]
        table = _files_table(
            [df.path for df in files],
            [e.size if e is not None else (None if i is None else i.size)
             for e, i in zip(entries, infos, strict=True)],
            [e.etag if e is not None else (None if i is None else i.etag)
             for e, i in zip(entries, infos, strict=True)],
            [e.mtime if e is not None else (None if i is None else i.mtime)
             for e, i in zip(entries, infos, strict=True)],
            [None if e is None else e.rows for e in entries],
            [None if e is None else e.schema for e in entries],
            _partitions(self.discovery))

        def statistics(column: str) -> ColumnStatistics | None:
            return entry_statistics(entries, schemas, column)

        summarized = frozenset(b.column for e in entries if e is not None for b in e.summaries)
        return FileFacts(table, self.name, self.listed, schemas, summarized, statistics)
