"""A table snapshot as a dataset's source: its files, partition values and statistics.

The snapshot names the files (no LIST): each one's size comes from the log, so
opening it needs no HEAD. Partition values come from the log, typed. Before any
footer is read, the log's per-file statistics (and the partition values, as
min = max) rule files out for a scan's predicate (``prune.may_match``).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pqindex.dataset.discovery import DataFile, Discovery
from pqindex.dataset.tables.delta import DeltaSnapshot, load_delta
from pqindex.dataset.tables.prune import may_match, widen
from pqindex.errors import UnsupportedError, UserInputError
from pqindex.expr.nodes import Expr
from pqindex.io.source import ObjectInfo

__all__ = ["TableSource", "is_table_source", "table_source"]

# Delta writers keep string statistics to a prefix of this many characters.
DELTA_STRING_PREFIX = 32


def _discovery_type(name: str, t: pa.DataType, location: str) -> str:
    """The discovery's partition type of a table's partition column."""
    if pa.types.is_integer(t):
        return "int64"
    if pa.types.is_date32(t):
        return "date32"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    raise UnsupportedError(f"partition column of type {t} is not supported yet (integer, "
                           "date and string are)", path=location, column=name)


def _partition_text(value: Any) -> str:
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


@dataclass
class TableSource:
    """What a dataset reads of a table snapshot."""

    description: str  # "Delta table <root>, version 3, 12 files"
    location: str
    discovery: Discovery
    schema: pa.Schema  # the files' columns (physical names), partition columns left out
    stats: pa.Table  # one row per file of ``discovery.files``, see prune.may_match
    float_columns: frozenset[str]
    # The first file the latest plan kept: the one a plan opens first.
    first: DataFile | None = None

    def prune(self, expr: Expr) -> tuple[list[DataFile], int]:
        """The files whose statistics let a row satisfy ``expr``, and how many are not."""
        files = list(self.discovery.files)
        if not files:
            return files, 0
        keep = may_match(expr, self.stats, self.float_columns).to_pylist()
        kept = [f for f, k in zip(files, keep, strict=True) if k]
        return kept, len(files) - len(kept)


def _delta_source(snap: DeltaSnapshot) -> TableSource:
    if snap.column_mapping:
        raise UnsupportedError("column mapping (delta.columnMapping.mode) is not supported "
                               "yet: read the table with deltalake", path=snap.location)
    types = {k: _discovery_type(k, snap.schema.field(k).type, snap.location)
             for k in snap.partition_columns}
    files = tuple(
        DataFile(f.path, tuple((k, _partition_text(v)) for k, v in f.partition.items()
                               if v is not None), ObjectInfo(f.size))
        for f in snap.files)
    stats = snap.stats if snap.stats is not None else pa.table({"rows": pa.array(
        [f.rows for f in snap.files], pa.int64())})
    stats = widen(stats, DELTA_STRING_PREFIX, millisecond_timestamps=True)
    # Partition columns: each file's value is its min and max.
    for k in snap.partition_columns:
        t = snap.schema.field(k).type
        values = pa.array([f.partition.get(k) for f in snap.files], t)
        rows = stats.column("rows")
        nulls = pa.array([(r or 0) if f.partition.get(k) is None else 0
                          for f, r in zip(snap.files, rows.to_pylist(), strict=True)], pa.int64())
        for kind, arr in (("min", values), ("max", values), ("nulls", nulls)):
            name = f"{kind}.{k}"
            if name in stats.column_names:
                stats = stats.drop_columns([name])
            stats = stats.append_column(name, arr)
    floats = frozenset(f.name for f in snap.schema if pa.types.is_floating(f.type))
    return TableSource(snap.describe(), snap.location,
                       Discovery(files, snap.partition_columns, types), snap.physical_schema,
                       stats, floats)


def is_table_source(source: Any) -> bool:
    """Whether ``source`` is a table object (deltalake, pyiceberg) or the root of a table."""
    if type(source).__module__.startswith(("deltalake", "pyiceberg")):
        return True
    if not isinstance(source, (str, os.PathLike)):
        return False
    p = os.fspath(source)
    if "://" in p and not p.startswith("file://"):
        return False  # detected by table_source when asked for (a request)
    log = os.path.join(p.removeprefix("file://"), "_delta_log")
    try:
        # A log without a commit (or checkpoint) is no table yet.
        return os.path.isdir(log) and any(n.endswith((".json", ".parquet"))
                                          for n in os.listdir(log))
    except OSError:
        return False


def table_source(source: Any, *, version: int | str | dt.datetime | None = None,
                 storage_options: Mapping[str, Any] | None = None) -> TableSource:
    """The source of a table: a ``deltalake.DeltaTable``, or a Delta table's root (path
    or URL), at ``version`` (a number or a timestamp)."""
    module = type(source).__module__
    if module.startswith("deltalake") or isinstance(source, (str, os.PathLike)):
        return _delta_source(load_delta(source, version, storage_options))
    raise UserInputError(f"not a table: {type(source).__name__}")


def files_of(source: TableSource) -> Sequence[str]:
    return [f.path for f in source.discovery.files]
