"""Typed statistic values: what a leaf's bound bytes mean.

``ValueType`` reads the physical + logical type of a leaf and decodes its bound
bytes to Python values; their order and the bounds themselves are in
``pqindex.format.values``.

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
import struct
import uuid
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any, TypeAlias

from pqindex.format.schema import ConvertedType, LeafColumn, PhysicalType
from pqindex.format.structs import LogicalType, SchemaElement, TimeUnit

__all__ = [
    "Int96",
    "Interval",
    "Kind",
    "NanoTimestamp",
    "Value",
    "ValueType",
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
