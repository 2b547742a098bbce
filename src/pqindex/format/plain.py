"""PLAIN encoding of single values: splitting a dictionary page, encoding a literal.

Bloom filters hash a value's PLAIN bytes, and dictionary pages store their values
PLAIN-encoded, so both lookups compare literals in this form.
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
import struct
import uuid
from decimal import Decimal
from types import ModuleType

import numpy as np
import pyarrow as pa

from pqindex.errors import CorruptFileError
from pqindex.format.codec import CODECS
from pqindex.format.codec import decompress as decompress_part
from pqindex.format.schema import Codec, PhysicalType
from pqindex.format.values import Kind, NanoTimestamp, Value, ValueType

__all__ = ["decompress", "encode_plain", "plain_entries", "split_byte_array", "split_plain"]


def _load_c() -> ModuleType | None:
    if os.environ.get("PQINDEX_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("pqindex.format._plain")
    except ImportError:  # built without a compiler: the Python walk below
        return None


_c = _load_c()

_FIXED = {
    PhysicalType.INT32: 4,
    PhysicalType.INT64: 8,
    PhysicalType.INT96: 12,
    PhysicalType.FLOAT: 4,
    PhysicalType.DOUBLE: 8,
}
_UNIT_NANOS = {"millis": 10**6, "micros": 10**3, "nanos": 1}
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def decompress(data: bytes, codec: int, uncompressed_size: int) -> bytes | memoryview | None:
    """A page's data decompressed (size checked: ``codec.decompress``), or None for a
    codec pyarrow can't do alone. A view of the decompressed buffer, not a copy (a
    copy of a 900 KB dictionary page cost as much as decompressing it)."""
    if codec == Codec.UNCOMPRESSED:
        return data
    if codec not in CODECS or uncompressed_size < 0:
        return None
    return memoryview(decompress_part(data, codec, uncompressed_size)).cast("B")


def split_plain(physical: int, type_length: int | None, data: bytes, count: int) -> list[bytes]:
    """``count`` PLAIN values of a physical type, each as its own bytes.

    BYTE_ARRAY values lose their 4-byte length prefix. Raises CorruptFileError when
    the data is shorter than the count needs.
    """
    if count < 0:
        raise CorruptFileError(f"dictionary claims {count} values")
    if physical == PhysicalType.BYTE_ARRAY:
        out = []
        pos = 0
        n = len(data)
        for _ in range(count):
            if pos + 4 > n:
                raise CorruptFileError("dictionary page ends inside a value's length")
            (ln,) = struct.unpack_from("<I", data, pos)
            pos += 4
            if ln > n - pos:
                raise CorruptFileError(f"dictionary value of {ln} bytes runs past the page")
            out.append(data[pos : pos + ln])
            pos += ln
        return out
    width = _fixed_width(physical, type_length, len(data), count)
    return [data[i * width : (i + 1) * width] for i in range(count)]


def _fixed_width(physical: int, type_length: int | None, size: int, count: int) -> int:
    """The width of a fixed-width physical type's PLAIN values, checked: ``count`` of
    them fit in ``size`` bytes (else CorruptFileError)."""
    width = (
        type_length
        if physical == PhysicalType.FIXED_LEN_BYTE_ARRAY
        else _FIXED.get(PhysicalType(physical))
    )
    if not width or width <= 0:
        raise CorruptFileError(f"cannot split PLAIN values of physical type {physical}")
    if width * count > size:
        raise CorruptFileError(
            f"dictionary of {count} values of {width} bytes needs {width * count} bytes, "
            f"the page has {size}"
        )
    return width


def split_byte_array(data: bytes | memoryview, count: int) -> tuple[bytes, bytes]:
    """The first ``count`` PLAIN BYTE_ARRAY values of ``data`` in Arrow's layout:
    ``count + 1`` native int32 offsets and the values' bytes (the optional C module
    ``_plain``, else a Python walk). Raises CorruptFileError when ``data`` is too
    short for them."""
    if _c is not None and count >= 0:
        got = _c.split(data, count)
        if got is not None:
            offsets, body = got
            return offsets, body
    values = split_plain(PhysicalType.BYTE_ARRAY, None, bytes(data), count)
    ends = np.cumsum([len(v) for v in values], dtype=np.int64)
    if len(ends) and ends[-1] > 2**31 - 1:
        raise CorruptFileError(f"{count} values of {int(ends[-1])} bytes: over 2 GiB")
    offsets_arr = np.zeros(count + 1, dtype=np.int32)
    offsets_arr[1:] = ends
    return offsets_arr.tobytes(), b"".join(values)


def plain_entries(physical: int, type_length: int | None, data: bytes | memoryview,
                  count: int) -> pa.Array:
    """``count`` PLAIN values as an Arrow array of their PLAIN bytes (BYTE_ARRAY
    without the length prefix): ``binary`` for BYTE_ARRAY, ``fixed_size_binary``
    (a view of ``data``, no copy) for the fixed-width types. Raises CorruptFileError
    like :func:`split_plain`."""
    if count < 0:
        raise CorruptFileError(f"dictionary claims {count} values")
    if physical == PhysicalType.BYTE_ARRAY:
        offsets, body = split_byte_array(data, count)
        return pa.Array.from_buffers(pa.binary(), count,
                                     [None, pa.py_buffer(offsets), pa.py_buffer(body)])
    width = _fixed_width(physical, type_length, len(data), count)
    return pa.Array.from_buffers(pa.binary(width), count,
                                 [None, pa.py_buffer(data)[: width * count]])


def _ticks(vt: ValueType, value: Value) -> int | None:
    """A temporal value as an integer count of the column's unit, if exact."""
    assert vt.unit is not None
    per = _UNIT_NANOS[vt.unit]
    if isinstance(value, NanoTimestamp):
        nanos = value.nanos
    elif isinstance(value, dt.datetime):
        base = _EPOCH_UTC if value.tzinfo is not None else _EPOCH
        delta = value - base
        nanos = (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000
    elif isinstance(value, dt.time):
        nanos = ((value.hour * 60 + value.minute) * 60 + value.second) * 10**9
        nanos += value.microsecond * 1000
    elif isinstance(value, int):
        return value
    else:
        return None
    if nanos % per:
        return None
    return nanos // per


def encode_plain(vt: ValueType, value: Value) -> bytes | None:
    """The PLAIN bytes of ``value`` in the column's physical type, or None when the
    value has no single exact encoding (callers then keep the unit)."""
    k = vt.kind
    p = vt.physical
    try:
        if k == Kind.STRING:
            return value.encode("utf-8") if isinstance(value, str) else bytes(value)  # type: ignore[arg-type]
        if k == Kind.BINARY:
            return bytes(value) if isinstance(value, (bytes, bytearray)) else None
        if k == Kind.UUID:
            return value.bytes if isinstance(value, uuid.UUID) else None
        if k == Kind.FLOAT and isinstance(value, (int, float)):
            return struct.pack("<f", value)
        if k == Kind.DOUBLE and isinstance(value, (int, float)):
            return struct.pack("<d", value)
        if k == Kind.FLOAT16 and isinstance(value, (int, float)):
            return struct.pack("<e", value)
        if k == Kind.DECIMAL and isinstance(value, (Decimal, int)):
            scaled = Decimal(value).scaleb(vt.scale or 0)
            if scaled != scaled.to_integral_value():
                return None
            unscaled = int(scaled)
            if p == PhysicalType.INT32:
                return unscaled.to_bytes(4, "little", signed=True)
            if p == PhysicalType.INT64:
                return unscaled.to_bytes(8, "little", signed=True)
            if p == PhysicalType.FIXED_LEN_BYTE_ARRAY and vt.type_length:
                return unscaled.to_bytes(vt.type_length, "big", signed=True)
            return None  # BYTE_ARRAY decimals have no single width
        ints: int | None = None
        if k in (Kind.INT, Kind.UINT) and isinstance(value, int) and not isinstance(value, bool):
            ints = value
        elif k == Kind.DATE:
            if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
                ints = (value - dt.date(1970, 1, 1)).days
            elif isinstance(value, int):
                ints = value
        elif k in (Kind.TIME, Kind.TIMESTAMP):
            ints = _ticks(vt, value)
        if ints is None:
            return None
        if p == PhysicalType.INT32:
            if k == Kind.UINT:
                return (ints & 0xFFFFFFFF).to_bytes(4, "little")
            return ints.to_bytes(4, "little", signed=True)
        if p == PhysicalType.INT64:
            if k == Kind.UINT:
                return (ints & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")
            return ints.to_bytes(8, "little", signed=True)
    except (OverflowError, ValueError, TypeError, AttributeError):
        return None
    return None
