"""Byte-level pieces shared by the blob bodies of every index kind.

Blob bodies are little-endian and start with a one-byte body version and the
column's value type (``write_value_type``), so a blob says by itself how its
values decode: ``inspect`` can print it without the schema, and a reader can
refuse a blob whose type differs from the column it is asked about.

``BodyReader`` never reads past its buffer and never allocates more than the
buffer holds: every length is checked against the bytes that remain, and any
overrun raises ``RegionError``.
"""

from __future__ import annotations

import struct

from pqindex.errors import CorruptFileError, UnsupportedError
from pqindex.format.schema import LeafColumn
from pqindex.format.value_type import Kind, ValueType

__all__ = [
    "BodyReader",
    "BodyWriter",
    "RegionError",
    "RegionVersionError",
    "check_leaf_type",
    "read_value_type",
    "same_value_type",
    "write_value_type",
]


class RegionError(CorruptFileError):
    """An embedded index region, or one of its blobs, is damaged."""


class RegionVersionError(UnsupportedError):
    """An embedded index region or blob body of a version this reader does not know."""


_KIND_CODES = {kind: i for i, kind in enumerate(Kind)}
_KINDS_BY_CODE = dict(enumerate(Kind))
_UNITS = {None: 0, "millis": 1, "micros": 2, "nanos": 3}
_UNITS_BY_CODE = {v: k for k, v in _UNITS.items()}
_NONE_U8 = 0xFF
_NONE_I32 = -(2**31)


class BodyWriter:
    """Appends little-endian fields to a blob body."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def u8(self, v: int) -> None:
        self._parts.append(struct.pack("<B", v))

    def u32(self, v: int) -> None:
        self._parts.append(struct.pack("<I", v))

    def u64(self, v: int) -> None:
        self._parts.append(struct.pack("<Q", v))

    def i32(self, v: int) -> None:
        self._parts.append(struct.pack("<i", v))

    def f64(self, v: float) -> None:
        self._parts.append(struct.pack("<d", v))

    def raw(self, data: bytes) -> None:
        self._parts.append(bytes(data))

    def sized(self, data: bytes) -> None:
        """A u32 length, then the bytes."""
        self.u32(len(data))
        self.raw(data)

    def big_int(self, v: int) -> None:
        """An arbitrary-size signed integer: u32 length, two's complement little-endian."""
        width = (v.bit_length() + 8) // 8  # +1 bit for the sign
        self.sized(v.to_bytes(width, "little", signed=True))

    def getvalue(self) -> bytes:
        return b"".join(self._parts)


class BodyReader:
    """Reads the fields ``BodyWriter`` wrote; ``RegionError`` past the end."""

    def __init__(self, data: bytes | memoryview, what: str) -> None:
        self._data = memoryview(data)
        self._pos = 0
        self.what = what

    @property
    def remaining(self) -> int:
        return len(self._data) - self._pos

    def _take(self, n: int) -> memoryview:
        if n < 0 or n > self.remaining:
            raise RegionError(
                f"{self.what}: needs {n} bytes at body offset {self._pos}, "
                f"{self.remaining} remain")
        out = self._data[self._pos : self._pos + n]
        self._pos += n
        return out

    def u8(self) -> int:
        return int(self._take(1)[0])

    def u32(self) -> int:
        return int(struct.unpack("<I", self._take(4))[0])

    def u64(self) -> int:
        return int(struct.unpack("<Q", self._take(8))[0])

    def i32(self) -> int:
        return int(struct.unpack("<i", self._take(4))[0])

    def f64(self) -> float:
        return float(struct.unpack("<d", self._take(8))[0])

    def raw(self, n: int) -> bytes:
        return bytes(self._take(n))

    def sized(self) -> bytes:
        return self.raw(self.u32())

    def big_int(self) -> int:
        return int.from_bytes(self.sized(), "little", signed=True)

    def rest(self) -> bytes:
        return self.raw(self.remaining)

    def version(self, known: int) -> int:
        """The body version byte; RegionVersionError for a newer one."""
        v = self.u8()
        if v == 0 or v > known:
            raise RegionVersionError(f"{self.what}: body version {v}, this reader knows 1..{known}")
        return v

    def end(self) -> None:
        if self.remaining:
            raise RegionError(f"{self.what}: {self.remaining} unexpected trailing bytes")


def _opt_u8(v: int | None) -> int:
    return _NONE_U8 if v is None else v


def write_value_type(w: BodyWriter, vt: ValueType) -> None:
    """The parts of a value type that decide how its PLAIN bytes decode (13 bytes)."""
    w.u8(_KIND_CODES[vt.kind])
    w.u8(_opt_u8(vt.physical))
    w.u8(_opt_u8(vt.bit_width))
    w.i32(_NONE_I32 if vt.scale is None else vt.scale)
    w.i32(_NONE_I32 if vt.precision is None else vt.precision)
    w.u8(_UNITS[vt.unit])
    w.u8(_opt_u8(None if vt.utc is None else int(vt.utc)))
    w.i32(-1 if vt.type_length is None else vt.type_length)


def read_value_type(r: BodyReader) -> ValueType:
    """The value type ``write_value_type`` wrote; RegionError for codes out of range."""
    kind = _KINDS_BY_CODE.get(r.u8())
    physical, bit_width = r.u8(), r.u8()
    scale, precision = r.i32(), r.i32()
    unit_code, utc = r.u8(), r.u8()
    type_length = r.i32()
    if kind is None or unit_code not in _UNITS_BY_CODE or utc not in (0, 1, _NONE_U8):
        raise RegionError(f"{r.what}: value type codes out of range")
    return ValueType(
        kind,
        None if physical == _NONE_U8 else physical,
        bit_width=None if bit_width == _NONE_U8 else bit_width,
        scale=None if scale == _NONE_I32 else scale,
        precision=None if precision == _NONE_I32 else precision,
        unit=_UNITS_BY_CODE[unit_code],
        utc=None if utc == _NONE_U8 else bool(utc),
        type_length=None if type_length < 0 else type_length,
    )


def same_value_type(a: ValueType, b: ValueType) -> bool:
    """Equal in everything that decides decoding and order (``note`` is descriptive)."""
    return (a.kind, a.physical, a.bit_width, a.scale, a.precision, a.unit, a.utc,
            a.type_length) == (b.kind, b.physical, b.bit_width, b.scale, b.precision,
                               b.unit, b.utc, b.type_length)


def check_leaf_type(leaf: LeafColumn, vt: ValueType, what: str) -> None:
    """RegionError when a blob was built for another type than the column now has."""
    have = ValueType.from_leaf(leaf)
    if not same_value_type(have, vt):
        raise RegionError(f"{what}: built for {vt.name}, column {leaf.name!r} is {have.name}")
