"""Typed statistic values and their order.

Bounds in the footer and the column index are bytes. What they mean comes from
the physical + logical type (``ValueType``), how they compare from the file's
``column_orders`` (``BoundOrder``). When in doubt a bound is reported unusable,
with the reason: pruning may keep too much, never drop a matching row.

Decoded Python values, by ``ValueType.kind``:

========== ==================================================================
bool       ``bool``
int, uint  ``int`` (uint read unsigned: UINT_64 values above 2**63 stay positive)
float,     ``float`` (FLOAT16 from 2 bytes little-endian)
double,
float16
decimal    ``decimal.Decimal`` (exact; scale applied)
date       ``datetime.date``; ``int`` days since 1970-01-01 outside date's range
time       ``datetime.time`` (tzinfo=UTC when adjusted to UTC) for MILLIS and
           MICROS; ``int`` ticks of the unit since midnight for NANOS (time
           holds microseconds only) or values outside a day
timestamp  ``datetime.datetime`` (aware UTC when adjusted to UTC, naive
           otherwise) for MILLIS and MICROS; ``NanoTimestamp`` for NANOS, or when
           the value is outside datetime's range
string     ``str``; ``bytes`` when not valid UTF-8 (a truncated bound may cut a
           character)
binary     ``bytes``
uuid       ``uuid.UUID``
int96      ``Int96`` (Julian day + nanoseconds of day)
interval   ``Interval``
unknown    ``bytes``
========== ==================================================================
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import struct
import uuid
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any, TypeAlias

import numpy as np

from pqindex.format.schema import ConvertedType, LeafColumn, PhysicalType
from pqindex.format.structs import (
    ColumnIndex,
    ColumnOrder,
    LogicalType,
    SchemaElement,
    Statistics,
    TimeUnit,
)

__all__ = [
    "BoundOrder",
    "Bounds",
    "Comparison",
    "Int96",
    "Interval",
    "Kind",
    "NanoTimestamp",
    "Value",
    "ValueType",
    "bound_order",
    "page_bounds",
    "page_is_contradictory",
    "statistics_bounds",
    "total_order_key",
    "validate_column_index",
]

_UTC = dt.UTC
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)
_JULIAN_EPOCH_DAY = 2_440_588  # Julian day number of 1970-01-01
_NANOS_PER_DAY = 86_400 * 10**9
_UNIT_NANOS = {"millis": 10**6, "micros": 10**3, "nanos": 1}


class Kind(StrEnum):
    """What the bytes of a bound stand for."""

    BOOL = "bool"
    INT = "int"
    UINT = "uint"
    FLOAT = "float"
    DOUBLE = "double"
    FLOAT16 = "float16"
    DECIMAL = "decimal"
    DATE = "date"
    TIME = "time"
    TIMESTAMP = "timestamp"
    STRING = "string"
    BINARY = "binary"
    UUID = "uuid"
    INT96 = "int96"
    INTERVAL = "interval"
    UNKNOWN = "unknown"


_FLOAT_KINDS = frozenset({Kind.FLOAT, Kind.DOUBLE, Kind.FLOAT16})


@dataclass(frozen=True, slots=True, order=True)
class NanoTimestamp:
    """A timestamp as integer nanoseconds since the epoch (datetime stops at microseconds)."""

    nanos: int
    utc: bool = False

    def to_datetime(self) -> dt.datetime:
        """Truncated to microseconds; OverflowError outside datetime's range."""
        micros = self.nanos // 1000
        value = _EPOCH + dt.timedelta(microseconds=micros)
        return value.replace(tzinfo=_UTC) if self.utc else value

    def __str__(self) -> str:
        try:
            base = _EPOCH + dt.timedelta(microseconds=self.nanos // 1000)
        except OverflowError:
            return f"{self.nanos}ns since epoch" + (" UTC" if self.utc else "")
        text = base.strftime("%Y-%m-%dT%H:%M:%S") + f".{self.nanos % 10**9:09d}"
        return text + ("+00:00" if self.utc else "")


@dataclass(frozen=True, slots=True, order=True)
class Int96:
    """A legacy INT96 timestamp; field order is INT96_TIMESTAMP_ORDER (days, then nanos)."""

    julian_day: int
    nanos_of_day: int

    def to_timestamp(self) -> NanoTimestamp:
        """As nanoseconds since the epoch (INT96 carries no time zone)."""
        return NanoTimestamp((self.julian_day - _JULIAN_EPOCH_DAY) * _NANOS_PER_DAY
                             + self.nanos_of_day)

    def __str__(self) -> str:
        return str(self.to_timestamp())


@dataclass(frozen=True, slots=True)
class Interval:
    """INTERVAL: three unsigned little-endian 32-bit counts; the spec defines no order."""

    months: int
    days: int
    millis: int

    def __str__(self) -> str:
        return f"{self.months} months {self.days} days {self.millis} ms"


Value: TypeAlias = (
    bool | int | float | Decimal | dt.date | dt.time | str | bytes | uuid.UUID
    | NanoTimestamp | Int96 | Interval
)


def _unit_name(unit: TimeUnit | None) -> str | None:
    if unit is None:
        return None
    set_ = [n for n, v in (("millis", unit.MILLIS), ("micros", unit.MICROS),
                           ("nanos", unit.NANOS)) if v is not None]
    return set_[0] if len(set_) == 1 else None


def _logical_members(lt: LogicalType) -> list[str]:
    return [name for _, name, _ in LogicalType.THRIFT if getattr(lt, name) is not None]


@dataclass(frozen=True, slots=True)
class ValueType:
    """What the bytes of a bound mean: physical + logical type of one leaf."""

    kind: Kind
    physical: int | None
    bit_width: int | None = None  # int / uint
    scale: int | None = None  # decimal
    precision: int | None = None  # decimal
    unit: str | None = None  # time / timestamp: "millis", "micros" or "nanos"
    utc: bool | None = None  # time / timestamp: adjusted to UTC
    type_length: int | None = None  # FIXED_LEN_BYTE_ARRAY
    note: str | None = None  # for UNKNOWN / INTERVAL: what the annotation was

    # ------------------------------------------------------------ construction

    @classmethod
    def from_leaf(cls, leaf: LeafColumn) -> ValueType:
        """The value type of a leaf column."""
        return cls.from_element(leaf.element)

    @classmethod
    def from_element(cls, el: SchemaElement) -> ValueType:
        """The value type of a primitive SchemaElement; LogicalType wins over converted_type."""
        phys = el.type
        known_phys = phys is not None and phys in PhysicalType._value2member_map_
        if not known_phys:
            return cls(Kind.UNKNOWN, phys, note=f"physical type {phys}")
        lt = el.logicalType
        if lt is not None:
            members = _logical_members(lt)
            if len(members) == 1 and members[0] != "UNKNOWN":
                return cls._from_logical(el, lt, members[0])
            if not members:
                # A logical type newer than this reader: its order is not ours to guess,
                # even if a converted_type is present for old readers.
                return cls(Kind.UNKNOWN, phys, note="unknown logical type")
            if len(members) > 1:
                return cls(Kind.UNKNOWN, phys, note="logical type sets several members")
            # NullType (UNKNOWN): an always-null column; fall through to the physical type.
        if el.converted_type is not None:
            return cls._from_converted(el, el.converted_type)
        return cls._from_physical(el)

    @classmethod
    def _from_physical(cls, el: SchemaElement) -> ValueType:
        p = PhysicalType(el.type or 0)
        if p == PhysicalType.BOOLEAN:
            return cls(Kind.BOOL, p)
        if p == PhysicalType.INT32:
            return cls(Kind.INT, p, bit_width=32)
        if p == PhysicalType.INT64:
            return cls(Kind.INT, p, bit_width=64)
        if p == PhysicalType.INT96:
            return cls(Kind.INT96, p)
        if p == PhysicalType.FLOAT:
            return cls(Kind.FLOAT, p)
        if p == PhysicalType.DOUBLE:
            return cls(Kind.DOUBLE, p)
        if p == PhysicalType.BYTE_ARRAY:
            return cls(Kind.BINARY, p)
        return cls(Kind.BINARY, p, type_length=el.type_length)

    @classmethod
    def _mismatch(cls, el: SchemaElement, what: str) -> ValueType:
        pname = PhysicalType(el.type or 0).name
        return cls(Kind.UNKNOWN, el.type, type_length=el.type_length,
                   note=f"{what} on {pname}")

    @classmethod
    def _decimal(cls, el: SchemaElement, scale: int | None, precision: int | None) -> ValueType:
        p = el.type
        if p not in (PhysicalType.INT32, PhysicalType.INT64, PhysicalType.BYTE_ARRAY,
                     PhysicalType.FIXED_LEN_BYTE_ARRAY):
            return cls._mismatch(el, "DECIMAL")
        if scale is None:
            # Without a scale the literal coercion would be wrong; do not guess 0.
            return cls(Kind.UNKNOWN, p, type_length=el.type_length, note="DECIMAL without scale")
        return cls(Kind.DECIMAL, p, scale=scale, precision=precision,
                   type_length=el.type_length)

    @classmethod
    def _bytes_kind(cls, el: SchemaElement, kind: Kind, what: str) -> ValueType:
        if el.type not in (PhysicalType.BYTE_ARRAY, PhysicalType.FIXED_LEN_BYTE_ARRAY):
            return cls._mismatch(el, what)
        return cls(kind, el.type, type_length=el.type_length, note=what)

    @classmethod
    def _integer(cls, el: SchemaElement, width: int | None, signed: bool | None) -> ValueType:
        what = "INTEGER" if signed is None else f"{'INT' if signed else 'UINT'}({width})"
        if width not in (8, 16, 32, 64) or signed is None:
            return cls._mismatch(el, what)
        want = PhysicalType.INT64 if width == 64 else PhysicalType.INT32
        if el.type != want:
            return cls._mismatch(el, what)
        return cls(Kind.INT if signed else Kind.UINT, el.type, bit_width=width)

    @classmethod
    def _temporal(cls, el: SchemaElement, kind: Kind, unit: str | None,
                  utc: bool | None) -> ValueType:
        what = f"{kind.value.upper()}({unit})"
        if unit is None or utc is None:
            return cls._mismatch(el, what)
        if kind == Kind.TIMESTAMP:
            ok = el.type == PhysicalType.INT64
        else:  # TIME: millis in INT32, micros/nanos in INT64
            ok = el.type == (PhysicalType.INT32 if unit == "millis" else PhysicalType.INT64)
        if not ok:
            return cls._mismatch(el, what)
        return cls(kind, el.type, unit=unit, utc=utc)

    @classmethod
    def _from_logical(cls, el: SchemaElement, lt: LogicalType, member: str) -> ValueType:
        p = el.type
        if member in ("STRING", "ENUM", "JSON"):
            return cls._bytes_kind(el, Kind.STRING, member)
        if member == "BSON":
            return cls._bytes_kind(el, Kind.BINARY, member)
        if member == "DECIMAL":
            d = lt.DECIMAL
            assert d is not None
            scale = d.scale if d.scale is not None else el.scale
            precision = d.precision if d.precision is not None else el.precision
            return cls._decimal(el, scale, precision)
        if member == "DATE":
            return cls(Kind.DATE, p) if p == PhysicalType.INT32 else cls._mismatch(el, "DATE")
        if member == "TIME":
            t = lt.TIME
            assert t is not None
            return cls._temporal(el, Kind.TIME, _unit_name(t.unit), t.isAdjustedToUTC)
        if member == "TIMESTAMP":
            ts = lt.TIMESTAMP
            assert ts is not None
            return cls._temporal(el, Kind.TIMESTAMP, _unit_name(ts.unit), ts.isAdjustedToUTC)
        if member == "INTEGER":
            i = lt.INTEGER
            assert i is not None
            return cls._integer(el, i.bitWidth, i.isSigned)
        if member == "UUID":
            if p != PhysicalType.FIXED_LEN_BYTE_ARRAY or el.type_length != 16:
                return cls._mismatch(el, "UUID")
            return cls(Kind.UUID, p, type_length=16)
        if member == "FLOAT16":
            if p != PhysicalType.FIXED_LEN_BYTE_ARRAY or el.type_length != 2:
                return cls._mismatch(el, "FLOAT16")
            return cls(Kind.FLOAT16, p, type_length=2)
        # LIST, MAP, VARIANT, GEOMETRY, GEOGRAPHY, VECTOR: no defined order for bounds.
        return cls(Kind.UNKNOWN, p, type_length=el.type_length, note=member)

    @classmethod
    def _from_converted(cls, el: SchemaElement, ct: int) -> ValueType:
        try:
            c = ConvertedType(ct)
        except ValueError:
            return cls(Kind.UNKNOWN, el.type, type_length=el.type_length,
                       note=f"converted type {ct}")
        if c in (ConvertedType.UTF8, ConvertedType.ENUM, ConvertedType.JSON):
            return cls._bytes_kind(el, Kind.STRING, c.name)
        if c == ConvertedType.BSON:
            return cls._bytes_kind(el, Kind.BINARY, c.name)
        if c == ConvertedType.DECIMAL:
            return cls._decimal(el, el.scale, el.precision)
        if c == ConvertedType.DATE:
            return (cls(Kind.DATE, el.type) if el.type == PhysicalType.INT32
                    else cls._mismatch(el, "DATE"))
        # Converted TIME_* / TIMESTAMP_* stand for isAdjustedToUTC=true (LogicalTypes.md).
        if c == ConvertedType.TIME_MILLIS:
            return cls._temporal(el, Kind.TIME, "millis", True)
        if c == ConvertedType.TIME_MICROS:
            return cls._temporal(el, Kind.TIME, "micros", True)
        if c == ConvertedType.TIMESTAMP_MILLIS:
            return cls._temporal(el, Kind.TIMESTAMP, "millis", True)
        if c == ConvertedType.TIMESTAMP_MICROS:
            return cls._temporal(el, Kind.TIMESTAMP, "micros", True)
        widths = {ConvertedType.UINT_8: 8, ConvertedType.UINT_16: 16, ConvertedType.UINT_32: 32,
                  ConvertedType.UINT_64: 64, ConvertedType.INT_8: 8, ConvertedType.INT_16: 16,
                  ConvertedType.INT_32: 32, ConvertedType.INT_64: 64}
        if c in widths:
            return cls._integer(el, widths[c], c.name.startswith("INT"))
        if c == ConvertedType.INTERVAL:
            if el.type != PhysicalType.FIXED_LEN_BYTE_ARRAY or el.type_length != 12:
                return cls._mismatch(el, "INTERVAL")
            return cls(Kind.INTERVAL, el.type, type_length=12, note="INTERVAL")
        # MAP, MAP_KEY_VALUE, LIST on a leaf.
        return cls(Kind.UNKNOWN, el.type, type_length=el.type_length, note=c.name)

    # ------------------------------------------------------------ properties

    @property
    def name(self) -> str:
        """Human description, e.g. ``INT32 DECIMAL(9,2)`` or ``INT64 TIMESTAMP(micros, UTC)``."""
        if self.physical is not None and self.physical in PhysicalType._value2member_map_:
            p = PhysicalType(self.physical).name
        else:
            p = f"physical {self.physical}"
        if self.physical == PhysicalType.FIXED_LEN_BYTE_ARRAY and self.type_length is not None:
            p = f"{p}({self.type_length})"
        k = self.kind
        if k in (Kind.INT, Kind.UINT):
            return f"{p} {k.value.upper()}{self.bit_width}"
        if k == Kind.DECIMAL:
            return f"{p} DECIMAL({self.precision},{self.scale})"
        if k in (Kind.TIME, Kind.TIMESTAMP):
            return f"{p} {k.value.upper()}({self.unit}, {'UTC' if self.utc else 'local'})"
        if k == Kind.UNKNOWN:
            return f"{p} {self.note or 'unknown'}"
        if k in (Kind.STRING, Kind.BINARY) and self.note:
            return f"{p} {self.note}"
        if k in (Kind.BOOL, Kind.FLOAT, Kind.DOUBLE, Kind.INT96):
            return p
        return f"{p} {k.value.upper()}"

    @property
    def fixed_size(self) -> int | None:
        """Exact byte length of every bound, or None for variable-length values."""
        p = self.physical
        if p == PhysicalType.BOOLEAN:
            return 1
        if p in (PhysicalType.INT32, PhysicalType.FLOAT):
            return 4
        if p in (PhysicalType.INT64, PhysicalType.DOUBLE):
            return 8
        if p == PhysicalType.INT96:
            return 12
        if p == PhysicalType.FIXED_LEN_BYTE_ARRAY and self.kind not in (
            Kind.BINARY, Kind.STRING, Kind.UNKNOWN
        ):
            return self.type_length
        return None

    @property
    def is_float(self) -> bool:
        return self.kind in _FLOAT_KINDS

    # ------------------------------------------------------------ decoding

    def _check_length(self, raw: bytes) -> None:
        size = self.fixed_size
        if size is not None and len(raw) != size:
            raise ValueError(f"{self.name} bound of {len(raw)} bytes, expected {size}")
        if (self.physical == PhysicalType.FIXED_LEN_BYTE_ARRAY and size is None
                and self.type_length is not None and len(raw) > self.type_length):
            # Plain FLBA bounds may be truncated (shorter), never longer.
            raise ValueError(f"{self.name} bound of {len(raw)} bytes, longer than the type")

    def decode(self, raw: bytes) -> Value:
        """The Python value of a PLAIN-encoded bound; ValueError on a wrong length."""
        raw = bytes(raw)
        self._check_length(raw)
        k = self.kind
        if k == Kind.UNKNOWN or k == Kind.BINARY:
            return raw
        if k == Kind.STRING:
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                return raw
        if k == Kind.BOOL:
            if raw[0] > 1:
                raise ValueError(f"BOOLEAN bound byte {raw[0]:#04x} is neither 0 nor 1")
            return raw[0] == 1
        if k == Kind.FLOAT:
            return float(struct.unpack("<f", raw)[0])
        if k == Kind.DOUBLE:
            return float(struct.unpack("<d", raw)[0])
        if k == Kind.FLOAT16:
            return float(struct.unpack("<e", raw)[0])
        if k == Kind.UUID:
            return uuid.UUID(bytes=raw)
        if k == Kind.INT96:
            nanos, day = struct.unpack("<qi", raw)
            return Int96(day, nanos)
        if k == Kind.INTERVAL:
            months, days, millis = struct.unpack("<III", raw)
            return Interval(months, days, millis)
        if k == Kind.DECIMAL:
            if self.physical in (PhysicalType.INT32, PhysicalType.INT64):
                unscaled = int.from_bytes(raw, "little", signed=True)
            else:
                if not raw:
                    raise ValueError(f"{self.name} bound is empty")
                unscaled = int.from_bytes(raw, "big", signed=True)
            return Decimal(f"{unscaled}E{-(self.scale or 0)}")
        # INT32 / INT64 based: int, uint, date, time, timestamp
        v = int.from_bytes(raw, "little", signed=k != Kind.UINT)
        if k in (Kind.INT, Kind.UINT):
            return v
        if k == Kind.DATE:
            try:
                return _EPOCH_DATE + dt.timedelta(days=v)
            except OverflowError:
                return v
        assert self.unit is not None
        if k == Kind.TIME:
            if self.unit == "nanos" or not 0 <= v < _NANOS_PER_DAY // _UNIT_NANOS[self.unit]:
                return v
            micros = v * 1000 if self.unit == "millis" else v
            secs, us = divmod(micros, 10**6)
            h, rest = divmod(secs, 3600)
            m, s = divmod(rest, 60)
            return dt.time(h, m, s, us, tzinfo=_UTC if self.utc else None)
        # TIMESTAMP
        nanos = v * _UNIT_NANOS[self.unit]
        if self.unit == "nanos":
            return NanoTimestamp(nanos, bool(self.utc))
        try:
            value = _EPOCH + dt.timedelta(microseconds=nanos // 1000)
        except OverflowError:
            return NanoTimestamp(nanos, bool(self.utc))
        return value.replace(tzinfo=_UTC) if self.utc else value

    # ------------------------------------------------------------ order / display

    def sort_key(self, value: Value) -> Any:
        """A key whose Python ordering is the column's type-defined order.

        Unsigned bytes for strings/binary/uuid, numeric for numbers and decimals,
        integer ticks for temporal values. Floats compare numerically (-0.0 == +0.0);
        NaN has no place in this order, callers exclude it first. ValueError for kinds
        without an order (INTERVAL, unknown).
        """
        k = self.kind
        if k in (Kind.STRING, Kind.BINARY):
            if isinstance(value, str):
                return value.encode("utf-8")
            if isinstance(value, bytes):
                return value
        elif k == Kind.UUID:
            if isinstance(value, uuid.UUID):
                return value.bytes
            if isinstance(value, bytes):
                return value
        elif k == Kind.BOOL or k in (Kind.INT, Kind.UINT):
            if isinstance(value, int):
                return int(value)
        elif k in _FLOAT_KINDS:
            if isinstance(value, (int, float)):
                return float(value)
        elif k == Kind.DECIMAL:
            if isinstance(value, (Decimal, int)):
                return Decimal(value)
        elif k == Kind.DATE:
            if isinstance(value, dt.datetime):
                raise TypeError("a datetime is not a date")
            if isinstance(value, dt.date):
                return (value - _EPOCH_DATE).days
            if isinstance(value, int):
                return value
        elif k == Kind.TIME:
            assert self.unit is not None
            if isinstance(value, dt.time):
                micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 10**6 \
                    + value.microsecond
                return micros * 1000 // _UNIT_NANOS[self.unit]
            if isinstance(value, int):
                return value
        elif k == Kind.TIMESTAMP:
            if isinstance(value, NanoTimestamp):
                return value.nanos
            if isinstance(value, dt.datetime):
                base = value if value.tzinfo is None else value.astimezone(_UTC).replace(
                    tzinfo=None)
                delta = base - _EPOCH
                return ((delta.days * 86_400 + delta.seconds) * 10**6
                        + delta.microseconds) * 1000
        elif k == Kind.INT96:
            if isinstance(value, Int96):
                return (value.julian_day, value.nanos_of_day)
        else:
            raise ValueError(f"{self.name} has no defined order")
        raise TypeError(f"{type(value).__name__} is not a {self.name} value")

    def display(self, value: Value) -> str:
        """The value for humans: ISO dates and times, plain decimals, hex for bytes."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, bytes):
            return "0x" + value.hex()
        if isinstance(value, Decimal):
            return format(value, "f")
        if isinstance(value, float):
            return repr(value)
        if isinstance(value, (dt.date, dt.time)):
            return value.isoformat()
        if isinstance(value, int):
            if self.kind == Kind.DATE:
                return f"{value} days since 1970-01-01"
            if self.kind == Kind.TIME:
                return f"{value} {self.unit} since midnight"
            return str(value)
        return str(value)


# ---------------------------------------------------------------- orders


class Comparison(StrEnum):
    """How two bounds of a column compare."""

    SIGNED = "signed"  # numeric: signed ints, decimals, dates, times, timestamps, booleans
    UNSIGNED = "unsigned"  # UINT_*: numeric on the unsigned reading
    BYTES = "bytes"  # unsigned byte-wise: strings, binary, uuid
    FLOAT = "float"  # numeric, NaN excluded, -0.0/+0.0 widened (TYPE_ORDER compat rules)
    FLOAT_TOTAL = "ieee754_total"  # IEEE 754 totalOrder
    INT96 = "int96_timestamp"  # days (last 4 bytes LE), then nanos (first 8 bytes LE)


def total_order_key(value: float, kind: Kind = Kind.DOUBLE) -> int:
    """The IEEE 754 totalOrder key: -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN."""
    # Keys come from the double form for every width: widening is exact and keeps the
    # order, and a literal beyond a narrow type's range (1e300 against FLOAT) still has
    # its place. ``kind`` is kept for callers that name the column's width.
    del kind
    i = int.from_bytes(struct.pack("<d", value), "little", signed=True)
    # Negative floats grow in magnitude as their bits grow: flip them below zero.
    return i if i >= 0 else i ^ ((1 << 63) - 1)


def _type_comparison(vt: ValueType) -> tuple[Comparison | None, str | None]:
    k = vt.kind
    if k in (Kind.BOOL, Kind.INT, Kind.DECIMAL, Kind.DATE, Kind.TIME, Kind.TIMESTAMP):
        return Comparison.SIGNED, None
    if k == Kind.UINT:
        return Comparison.UNSIGNED, None
    if k in _FLOAT_KINDS:
        return Comparison.FLOAT, None
    if k in (Kind.STRING, Kind.BINARY, Kind.UUID):
        return Comparison.BYTES, None
    if k == Kind.INT96:
        return None, "INT96 bounds need INT96_TIMESTAMP_ORDER"
    if k == Kind.INTERVAL:
        return None, "INTERVAL has no defined order"
    return None, f"{vt.name} has no defined order"


def _order_members(co: ColumnOrder) -> list[str]:
    return [n for _, n, _ in ColumnOrder.THRIFT if getattr(co, n) is not None]


@dataclass(frozen=True, slots=True)
class BoundOrder:
    """Whether, and how, the bounds of one column can be compared.

    ``comparison`` governs ``Statistics.min_value/max_value`` and ColumnIndex
    bounds; ``legacy_comparison`` the deprecated ``Statistics.min/max`` (signed
    order only). None means unusable, ``reason``/``legacy_reason`` say why.
    """

    value_type: ValueType
    comparison: Comparison | None
    reason: str | None
    legacy_comparison: Comparison | None
    legacy_reason: str | None

    @property
    def usable(self) -> bool:
        return self.comparison is not None

    @property
    def legacy_usable(self) -> bool:
        return self.legacy_comparison is not None

    def key(self, value: Value, comparison: Comparison | None = None) -> Any:
        """Sort key of a decoded bound under ``comparison`` (default: this order's)."""
        c = comparison or self.comparison
        if c is None:
            raise ValueError(f"bounds are not comparable: {self.reason}")
        if c == Comparison.FLOAT_TOTAL and isinstance(value, float):
            return total_order_key(value, self.value_type.kind)
        return self.value_type.sort_key(value)


_LEGACY_SIGNED = frozenset({Kind.BOOL, Kind.INT, Kind.DATE, Kind.TIME, Kind.TIMESTAMP,
                            Kind.FLOAT, Kind.DOUBLE})


# Leaves are unhashable (their SchemaElement holds lists): cached by identity, the
# leaf kept alive beside its order so that an id is never reused while cached.
_ORDER_CACHE: dict[int, tuple[LeafColumn, BoundOrder]] = {}
_ORDER_CACHE_SIZE = 4096


def bound_order(leaf: LeafColumn) -> BoundOrder:
    """The order usable for a leaf's bounds, from column_order + physical + logical type."""
    hit = _ORDER_CACHE.get(id(leaf))
    if hit is not None and hit[0] is leaf:
        return hit[1]
    order = _bound_order(leaf)
    if len(_ORDER_CACHE) >= _ORDER_CACHE_SIZE:
        _ORDER_CACHE.clear()
    _ORDER_CACHE[id(leaf)] = (leaf, order)
    return order


def _bound_order(leaf: LeafColumn) -> BoundOrder:
    vt = ValueType.from_leaf(leaf)
    co = leaf.column_order
    type_cmp, type_reason = _type_comparison(vt)

    cmp: Comparison | None = None
    reason: str | None
    members = _order_members(co) if co is not None else []
    if co is None:
        reason = "file has no column_orders"
    elif len(members) != 1:
        reason = ("unknown column order" if not members
                  else "column order sets several members")
    elif members[0] == "TYPE_ORDER":
        cmp, reason = type_cmp, type_reason
        if vt.kind == Kind.INT96:
            reason = "INT96 with TYPE_ORDER: statistics must be ignored"
    elif members[0] == "IEEE_754_TOTAL_ORDER":
        if vt.is_float:
            cmp, reason = Comparison.FLOAT_TOTAL, None
        else:
            reason = f"IEEE_754_TOTAL_ORDER on {vt.name}"
    elif vt.kind == Kind.INT96:  # INT96_TIMESTAMP_ORDER
        cmp, reason = Comparison.INT96, None
    else:
        reason = f"INT96_TIMESTAMP_ORDER on {vt.name}"

    # Deprecated min/max are sorted by signed comparison whatever column_orders say, so
    # they only mean something where the type's order is signed.
    legacy: Comparison | None = None
    legacy_reason: str | None = None
    signed = vt.kind in _LEGACY_SIGNED or (
        vt.kind == Kind.DECIMAL and vt.physical in (PhysicalType.INT32, PhysicalType.INT64))
    if co is not None and (len(members) != 1 or (
            members[0] == "IEEE_754_TOTAL_ORDER" and not vt.is_float)):
        legacy_reason = "column order not understood: min/max ignored"
    elif vt.kind == Kind.INT96:
        legacy_reason = "INT96 min/max are never usable without INT96_TIMESTAMP_ORDER"
    elif not signed:
        legacy_reason = f"deprecated min/max are signed-order, not usable for {vt.name}"
    else:
        legacy = Comparison.FLOAT if vt.is_float else Comparison.SIGNED
    return BoundOrder(vt, cmp, reason, legacy, legacy_reason)


# ---------------------------------------------------------------- bounds


@dataclass(frozen=True, slots=True)
class Bounds:
    """Decoded bounds of a column chunk or a page, and whether they can be used.

    ``min``/``max`` are None when that side is not a usable bound (absent, NaN,
    undecodable, unusable order); ``usable`` is True only when both are usable,
    and ``reason`` says what is missing. ``*_raw`` keep the stored bytes as they are.
    ``all_null`` is the ColumnIndex null-page flag for pages, null_count == num_values
    for chunks. ``all_nan``: every non-null value is known to be NaN.
    """

    min: Value | None = None
    max: Value | None = None
    min_raw: bytes | None = None
    max_raw: bytes | None = None
    usable: bool = False
    reason: str | None = None
    null_count: int | None = None
    nan_count: int | None = None
    all_null: bool = False
    all_nan: bool = False
    min_exact: bool | None = None
    max_exact: bool | None = None
    comparison: Comparison | None = None  # the order min/max are in
    source: str | None = None  # "min_value/max_value", "min/max" or "column_index"


def _is_nan(v: Value | None) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _decode_side(vt: ValueType, raw: bytes | None, side: str,
                 reasons: list[str]) -> Value | None:
    if raw is None:
        reasons.append(f"no {side}")
        return None
    try:
        return vt.decode(raw)
    except ValueError as e:
        reasons.append(f"{side}: {e}")
        return None


def _make_bounds(order: BoundOrder, cmp: Comparison, min_raw: bytes | None,
                 max_raw: bytes | None, reasons: list[str], **extra: Any) -> Bounds:
    """Decode both sides and apply the floating-point and sanity rules."""
    vt = order.value_type
    lo = _decode_side(vt, min_raw, "min", reasons)
    hi = _decode_side(vt, max_raw, "max", reasons)
    all_nan = bool(extra.pop("all_nan", False))
    if cmp == Comparison.FLOAT_TOTAL and (_is_nan(lo) or _is_nan(hi)):
        # Total order writes NaN bounds only when every non-null value is NaN.
        return Bounds(min_raw=min_raw, max_raw=max_raw, usable=False,
                      reason="all non-null values are NaN", all_nan=True,
                      comparison=cmp, **extra)
    if cmp == Comparison.FLOAT:
        if _is_nan(lo):
            lo = None
            reasons.append("min is NaN")
        if _is_nan(hi):
            hi = None
            reasons.append("max is NaN")
        # TYPE_ORDER does not order -0.0/+0.0: a zero bound may hide the other zero.
        if isinstance(lo, float) and lo == 0.0:
            lo = -0.0
        if isinstance(hi, float) and hi == 0.0:
            hi = 0.0
    if lo is not None and hi is not None and order.key(lo, cmp) > order.key(hi, cmp):
        reasons.append("min > max")
        lo = hi = None
    usable = lo is not None and hi is not None
    return Bounds(min=lo, max=hi, min_raw=min_raw, max_raw=max_raw, usable=usable,
                  reason=None if usable else "; ".join(reasons), all_nan=all_nan,
                  comparison=cmp, **extra)


def statistics_bounds(stats: Statistics | None, leaf: LeafColumn,
                      num_values: int | None = None) -> Bounds:
    """Bounds of a column chunk (or page header) Statistics.

    ``num_values`` (ColumnMetaData.num_values) lets all-null and all-NaN chunks be
    recognized from the counts. min_value/max_value are preferred; the deprecated
    min/max are used only where their signed order is the column's order.
    """
    if stats is None:
        return Bounds(reason="no statistics")
    order = bound_order(leaf)
    null_count = stats.null_count
    nan_count = stats.nan_count if order.value_type.is_float else None
    all_null = (num_values is not None and null_count is not None
                and null_count == num_values)
    all_nan = (num_values is not None and null_count is not None and nan_count is not None
               and nan_count > 0 and nan_count + null_count == num_values)
    common: dict[str, Any] = {"null_count": null_count, "nan_count": nan_count,
                              "all_null": all_null}
    if all_null:
        return Bounds(min_raw=stats.min_value, max_raw=stats.max_value, usable=False,
                      reason="all values are null", **common)
    reasons: list[str] = []
    has_new = stats.min_value is not None or stats.max_value is not None
    has_old = stats.min is not None or stats.max is not None
    if has_new and order.comparison is not None:
        return _make_bounds(order, order.comparison, stats.min_value, stats.max_value,
                            reasons, min_exact=stats.is_min_value_exact,
                            max_exact=stats.is_max_value_exact,
                            source="min_value/max_value", all_nan=all_nan, **common)
    if has_new:
        reasons.append(f"min_value/max_value: {order.reason}")
    if has_old and order.legacy_comparison is not None:
        return _make_bounds(order, order.legacy_comparison, stats.min, stats.max, reasons,
                            source="min/max", all_nan=all_nan, **common)
    if has_old:
        reasons.append(f"min/max: {order.legacy_reason}")
    if not reasons:
        reasons.append("all non-null values are NaN" if all_nan else "no min/max")
    return Bounds(min_raw=stats.min_value if has_new else stats.min,
                  max_raw=stats.max_value if has_new else stats.max,
                  reason="; ".join(reasons), all_nan=all_nan, **common)


def _entry(lst: list[Any] | None, page: int) -> Any:
    return lst[page] if lst is not None and 0 <= page < len(lst) else None


def page_bounds(ci: ColumnIndex, leaf: LeafColumn, page: int) -> Bounds:
    """Bounds of one page from its ColumnIndex (run ``validate_column_index`` first)."""
    null_page = _entry(ci.null_pages, page)
    lo_raw = _entry(ci.min_values, page)
    hi_raw = _entry(ci.max_values, page)
    order = bound_order(leaf)
    common: dict[str, Any] = {
        "null_count": _entry(ci.null_counts, page),
        "nan_count": _entry(ci.nan_counts, page) if order.value_type.is_float else None,
        "source": "column_index",
    }
    if null_page is None:
        return Bounds(reason=f"column index has no entry for page {page}", **common)
    if null_page:
        return Bounds(usable=False, reason="null page", all_null=True, **common)
    if order.comparison is None:
        return Bounds(min_raw=lo_raw, max_raw=hi_raw, reason=order.reason, **common)
    return _make_bounds(order, order.comparison, lo_raw, hi_raw, [], **common)


# ---------------------------------------------------------------- column index checks


def page_is_contradictory(ci: ColumnIndex, leaf: LeafColumn | None, page: int) -> str | None:
    """Why one page's ColumnIndex entry contradicts itself, or None.

    Without ``leaf`` only counts and flags are checked; with it, the bounds too
    (when the column's order is usable).
    """
    null_page = _entry(ci.null_pages, page)
    null_count = _entry(ci.null_counts, page)
    nan_count = _entry(ci.nan_counts, page)
    if null_count is not None and null_count < 0:
        return f"negative null count {null_count}"
    if nan_count is not None and nan_count < 0:
        return f"negative NaN count {nan_count}"
    if null_page and null_count == 0:
        return "null page with a null count of 0"
    if leaf is None or null_page or null_page is None:
        return None
    order = bound_order(leaf)
    cmp = order.comparison
    if cmp is None:
        return None
    vt = order.value_type
    sides: list[Value] = []
    for side, raw in (("min", _entry(ci.min_values, page)),
                      ("max", _entry(ci.max_values, page))):
        if raw is None:
            return f"no {side} bound"
        if not raw and vt.physical != PhysicalType.BYTE_ARRAY:
            return f"empty {side} bound for {vt.name}"
        try:
            sides.append(vt.decode(raw))
        except ValueError as e:
            return f"{side} bound: {e}"
    lo, hi = sides
    if cmp == Comparison.FLOAT and (_is_nan(lo) or _is_nan(hi)):
        return None  # TYPE_ORDER NaN bounds are ignored side by side, not contradictory
    if order.key(lo) > order.key(hi):
        return f"min {vt.display(lo)} > max {vt.display(hi)}"
    return None


def _check_boundary_order(ci: ColumnIndex, leaf: LeafColumn) -> str | None:
    direction = ci.boundary_order
    if direction not in (1, 2):
        return None
    order = bound_order(leaf)
    if order.comparison is None:
        return None
    assert ci.null_pages is not None and ci.min_values is not None
    assert ci.max_values is not None
    vt = order.value_type
    prev: tuple[int, Any, Any] | None = None
    for i, null_page in enumerate(ci.null_pages):
        if null_page:
            continue
        lo, hi = vt.decode(ci.min_values[i]), vt.decode(ci.max_values[i])
        if order.comparison == Comparison.FLOAT and (_is_nan(lo) or _is_nan(hi)):
            # A NaN entry breaks any binary search under TYPE_ORDER.
            return f"page {i}: NaN bound in an ordered column index"
        keys = (i, order.key(lo), order.key(hi))
        if prev is not None:
            for side, a, b in (("min", prev[1], keys[1]), ("max", prev[2], keys[2])):
                if (b < a) if direction == 1 else (b > a):
                    name = "ASCENDING" if direction == 1 else "DESCENDING"
                    return (f"boundary_order {name} but page {i} {side} is out of order "
                            f"with page {prev[0]}")
        prev = keys
    return None


def validate_column_index(ci: ColumnIndex, num_pages: int,
                          leaf: LeafColumn | None = None) -> str | None:
    """Why the whole ColumnIndex is unusable, or None.

    Checks list lengths against each other and ``num_pages`` (from the
    OffsetIndex), boundary_order, and every page via ``page_is_contradictory``;
    with ``leaf``, also the bounds' widths, min <= max and the claimed boundary order.
    """
    required = (("null_pages", ci.null_pages), ("min_values", ci.min_values),
                ("max_values", ci.max_values))
    for name, lst in required:
        if lst is None:
            return f"column index lacks {name}"
    if ci.boundary_order is None:
        return "column index lacks boundary_order"
    lists: tuple[tuple[str, list[Any] | None], ...] = (
        *required, ("null_counts", ci.null_counts), ("nan_counts", ci.nan_counts))
    for name, lst in lists:
        if lst is not None and len(lst) != num_pages:
            return f"{name} has {len(lst)} entries for {num_pages} pages"
    if ci.boundary_order not in (0, 1, 2):
        return f"boundary_order {ci.boundary_order} is not UNORDERED, ASCENDING or DESCENDING"
    if leaf is not None and (_integer_index_is_sound(ci, leaf) or _bytes_index_is_sound(ci, leaf)):
        return None
    for page in range(num_pages):
        why = page_is_contradictory(ci, leaf, page)
        if why is not None:
            return f"page {page}: {why}"
    if leaf is not None:
        return _check_boundary_order(ci, leaf)
    return None


def _bytes_index_is_sound(ci: ColumnIndex, leaf: LeafColumn) -> bool:
    """True when a string / binary ColumnIndex passes every check, proven on the raw
    bounds: for these the order is the raw bytes' (decoding cannot fail), so no
    per-page decode is needed. False means "not proven"."""
    if leaf.element.type != PhysicalType.BYTE_ARRAY:
        return False
    order = bound_order(leaf)
    if order.comparison != Comparison.BYTES or order.value_type.kind not in (
            Kind.STRING, Kind.BINARY):
        return False
    assert ci.null_pages is not None and ci.min_values is not None
    assert ci.max_values is not None
    if not _counts_are_sound(ci):
        return False
    lows, highs = [], []
    for null_page, lo, hi in zip(ci.null_pages, ci.min_values, ci.max_values, strict=True):
        if null_page:
            continue
        if lo is None or hi is None or lo > hi:
            return False
        lows.append(lo)
        highs.append(hi)
    if ci.boundary_order == 1:
        return all(a <= b for a, b in itertools.pairwise(lows)) and all(
            a <= b for a, b in itertools.pairwise(highs))
    if ci.boundary_order == 2:
        return all(a >= b for a, b in itertools.pairwise(lows)) and all(
            a >= b for a, b in itertools.pairwise(highs))
    return True


def _counts_are_sound(ci: ColumnIndex) -> bool:
    """No negative null or NaN count, and no null page claiming 0 nulls."""
    for counts in (ci.null_counts, ci.nan_counts):
        if counts is not None and min(counts, default=0) < 0:
            return False
    if ci.null_counts is not None and ci.null_pages is not None:
        return not any(p and n == 0 for p, n in zip(ci.null_pages, ci.null_counts, strict=False))
    return True


_INT_WIDTHS = {PhysicalType.INT32: 4, PhysicalType.INT64: 8}


def _integer_index_is_sound(ci: ColumnIndex, leaf: LeafColumn) -> bool:
    """True when an INT32/INT64 ColumnIndex passes every check, proven with numpy.

    The per-page checks cost a Python decode per bound, which dominates opening a
    file's index cold. False means "not proven": the exact checks run and say why.
    """
    order = bound_order(leaf)
    width = _INT_WIDTHS.get(PhysicalType(leaf.element.type or 0)) if (
        leaf.element.type in _INT_WIDTHS) else None
    if width is None or order.comparison not in (Comparison.SIGNED, Comparison.UNSIGNED):
        return False
    assert ci.null_pages is not None and ci.min_values is not None
    assert ci.max_values is not None
    null_pages = np.array(ci.null_pages, dtype=bool)
    if not _counts_are_sound(ci):
        return False
    live = np.flatnonzero(~null_pages)
    lows = [ci.min_values[i] for i in live]
    highs = [ci.max_values[i] for i in live]
    if any(len(b) != width for b in lows) or any(len(b) != width for b in highs):
        return False
    kind = "i" if order.comparison == Comparison.SIGNED else "u"
    dtype = np.dtype(f"<{kind}{width}")
    lo = np.frombuffer(b"".join(lows), dtype=dtype)
    hi = np.frombuffer(b"".join(highs), dtype=dtype)
    if bool(np.any(lo > hi)):
        return False
    if ci.boundary_order == 1:
        return bool(np.all(lo[1:] >= lo[:-1]) and np.all(hi[1:] >= hi[:-1]))
    if ci.boundary_order == 2:
        return bool(np.all(lo[1:] <= lo[:-1]) and np.all(hi[1:] <= hi[:-1]))
    return True
