"""Partition column kinds: the type of a partition column, its values as text, its leaf.

Hive directories give three kinds, inferred from the values (``discovery``):
``int64``, ``date32``, ``string``. A lake table's log types its partition columns
itself (Delta: boolean, byte/short/int/long, float/double, decimal, date, timestamp,
timestamp without time zone, string, binary); such a column's kind is the name of its
Arrow type (``str(pa.DataType)``: ``bool``, ``int16``, ``decimal128(9, 2)``,
``timestamp[us, tz=UTC]``...). A file's value is carried as text in
``DataFile.partition`` (``partition_text``) and typed again by ``partition_value``.

The three hive kinds are pruned over all files at once (``stages.partition_stage``);
the others file by file on their typed value (the table's own statistics stage ruled
files out by them before, ``tables/prune.py``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from typing import Any

import pyarrow as pa

from pqindex.format.schema import Repetition
from pqindex.format.structs import (
    DateType,
    DecimalType,
    IntType,
    LogicalType,
    MicroSeconds,
    SchemaElement,
    StringType,
    TimestampType,
    TimeUnit,
)

__all__ = ["HIVE_KINDS", "partition_arrow_type", "partition_element", "partition_kind",
           "partition_text", "partition_value"]

HIVE_KINDS = frozenset({"int64", "date32", "string"})

_SIMPLE: dict[str, pa.DataType] = {
    "int64": pa.int64(), "date32": pa.date32(), "string": pa.string(), "bool": pa.bool_(),
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "float": pa.float32(),
    "double": pa.float64(), "binary": pa.binary(), "timestamp[us]": pa.timestamp("us"),
    "timestamp[us, tz=UTC]": pa.timestamp("us", tz="UTC"),
}
_DECIMAL = re.compile(r"^decimal128\((\d+), (-?\d+)\)$")


def partition_kind(t: pa.DataType) -> str | None:
    """The kind of a partition column of Arrow type ``t``; None when not supported."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        t = pa.string()
    elif pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        t = pa.binary()
    elif pa.types.is_date32(t):
        return "date32"
    elif pa.types.is_timestamp(t) and t.tz is not None and t.unit == "us":
        t = pa.timestamp("us", tz="UTC")  # an instant: its zone does not change a value
    kind = str(t)
    if kind in _SIMPLE or _DECIMAL.match(kind):
        return kind
    return None


def partition_arrow_type(kind: str) -> pa.DataType:
    """The Arrow type of a kind (an unknown one: string)."""
    got = _SIMPLE.get(kind)
    if got is not None:
        return got
    m = _DECIMAL.match(kind)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    return pa.string()


def partition_text(value: Any) -> str:
    """A typed value as the text ``partition_value`` reads back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float):
        return repr(value)
    return str(value)


def partition_value(kind: str, text: str) -> Any:
    """The typed value of ``text`` (``partition_text``'s form) for ``kind``."""
    if kind in ("int64", "int8", "int16", "int32"):
        return int(text)
    if kind == "date32":
        return dt.date.fromisoformat(text)
    if kind == "bool":
        return text == "true"
    if kind in ("float", "double"):
        return float(text)
    if kind == "binary":
        return bytes.fromhex(text)
    if kind.startswith("timestamp"):
        ts = dt.datetime.fromisoformat(text)
        return ts.astimezone(dt.UTC) if kind.endswith("tz=UTC]") else ts
    if _DECIMAL.match(kind):
        return decimal.Decimal(text)
    return text


def partition_element(name: str, kind: str) -> SchemaElement:
    """The Parquet leaf a predicate on the partition column binds to: the one a file
    holding the column with its Arrow type would have."""
    def el(physical: int, **kw: Any) -> SchemaElement:
        return SchemaElement(type=physical, repetition_type=Repetition.OPTIONAL, name=name,
                             **kw)

    if kind == "int64":
        return el(2)
    if kind == "date32":
        return el(1, converted_type=6, logicalType=LogicalType(DATE=DateType()))
    if kind == "bool":
        return el(0)
    if kind in ("int8", "int16", "int32"):
        bits = int(kind[3:])
        converted = {8: 15, 16: 16, 32: 17}[bits]  # INT_8, INT_16, INT_32
        return el(1, converted_type=converted,
                  logicalType=LogicalType(INTEGER=IntType(bitWidth=bits, isSigned=True)))
    if kind == "float":
        return el(4)
    if kind == "double":
        return el(5)
    if kind == "binary":
        return el(6)
    if kind.startswith("timestamp"):
        utc = kind.endswith("tz=UTC]")
        return el(2, converted_type=10 if utc else None,  # TIMESTAMP_MICROS
                  logicalType=LogicalType(TIMESTAMP=TimestampType(
                      isAdjustedToUTC=utc, unit=TimeUnit(MICROS=MicroSeconds()))))
    m = _DECIMAL.match(kind)
    if m:
        precision, scale = int(m.group(1)), int(m.group(2))
        common = {"converted_type": 5, "scale": scale, "precision": precision,  # DECIMAL
                  "logicalType": LogicalType(DECIMAL=DecimalType(scale=scale,
                                                                 precision=precision))}
        if precision <= 9:
            return el(1, **common)
        if precision <= 18:
            return el(2, **common)
        return el(7, type_length=16, **common)
    return el(6, converted_type=0, logicalType=LogicalType(STRING=StringType()))
