"""A column's Arrow values in the form its Parquet leaf stores them.

Index builders receive Arrow arrays (the table being written, or a column read
back from a file); what they index is the leaf's physical value: a
``timestamp[s]`` column is written as milliseconds, a ``date64`` as INT32 days, a
``uint32`` as INT32 bits, a decimal as big-endian two's complement. ``storage``
turns the Arrow array into that form once, so PLAIN bytes, hashes and sums all
agree with what a reader decodes from the file.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pqindex.format.plain import encode_plain
from pqindex.format.schema import LeafColumn, PhysicalType
from pqindex.format.value_type import Kind, ValueType
from pqindex.indexes.hashing import xxh64_bytes, xxh64_fixed

__all__ = [
    "exact_int_sum",
    "indexable",
    "limb_sum",
    "numbers",
    "plain_bytes",
    "plain_hashes",
    "storage",
    "unit_hashes",
    "unscaled_limbs",
]

_UNIT_CODES = {"millis": "ms", "micros": "us", "nanos": "ns"}
_NUMPY_KINDS = frozenset({Kind.INT, Kind.UINT, Kind.DATE, Kind.TIME, Kind.TIMESTAMP,
                          Kind.FLOAT, Kind.DOUBLE, Kind.FLOAT16})


def _flat(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks else pa.array([], array.type)
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return array


_STORED: list[tuple[Any, LeafColumn, pa.Array | None]] = []


def indexable(
    leaf: LeafColumn, column: pa.Array, kinds: frozenset[Kind]
) -> tuple[ValueType, pa.Array] | None:
    """The leaf's value type and stored values, when a kind indexing ``kinds`` covers it.

    Value-identity indexes (distinct, Bloom, HLL) skip BYTE_ARRAY decimals: their
    PLAIN bytes aren't unique (sign-extended variants of one value).
    """
    vt = ValueType.from_leaf(leaf)
    if leaf.nested or vt.kind not in kinds:
        return None
    if vt.kind == Kind.DECIMAL and vt.physical == PhysicalType.BYTE_ARRAY:
        return None
    stored = storage(leaf, column)
    return None if stored is None else (vt, stored)


def storage(leaf: LeafColumn, array: pa.Array | pa.ChunkedArray) -> pa.Array | None:
    """``array`` in the leaf's physical form (see ``_storage``), converted once per
    column for all the kinds that index it."""
    for arr, lf, out in _STORED:
        if arr is array and lf == leaf:
            return out
    result = _storage(leaf, array)
    _STORED.append((array, leaf, result))
    del _STORED[:-4]
    return result


def _storage(leaf: LeafColumn, array: pa.Array | pa.ChunkedArray) -> pa.Array | None:
    """``array`` in the leaf's physical form, or None when indexes don't cover the type.

    Integers, dates, times and timestamps become int32/int64/uint32/uint64 in the
    leaf's unit; floats float16/32/64; decimals decimal128/256 of the leaf's
    scale; strings and binaries large_binary (or fixed_size_binary); UUIDs their
    16-byte storage.
    """
    vt = ValueType.from_leaf(leaf)
    arr = _flat(array)
    k, p = vt.kind, vt.physical
    wide = p == PhysicalType.INT64
    try:
        if k in (Kind.INT, Kind.UINT):
            target = {(Kind.INT, False): pa.int32(), (Kind.INT, True): pa.int64(),
                      (Kind.UINT, False): pa.uint32(), (Kind.UINT, True): pa.uint64()}
            return pc.cast(arr, target[(k, wide)])
        if k == Kind.DATE:
            return pc.cast(arr, pa.date32()).view(pa.int32())
        if k == Kind.TIME and vt.unit is not None:
            unit = _UNIT_CODES[vt.unit]
            t = pa.time32(unit) if unit == "ms" else pa.time64(unit)
            return pc.cast(arr, t, safe=False).view(pa.int32() if unit == "ms" else pa.int64())
        if k == Kind.TIMESTAMP and vt.unit is not None:
            tz = arr.type.tz if pa.types.is_timestamp(arr.type) else None
            ts = pc.cast(arr, pa.timestamp(_UNIT_CODES[vt.unit], tz), safe=False)
            return ts.view(pa.int64())
        if k == Kind.FLOAT:
            return pc.cast(arr, pa.float32())
        if k == Kind.DOUBLE:
            return pc.cast(arr, pa.float64())
        if k == Kind.FLOAT16:
            return arr if arr.type == pa.float16() else None
        if k == Kind.DECIMAL and vt.scale is not None:
            precision = vt.precision or 38
            dtype = pa.decimal128(precision, vt.scale) if precision <= 38 else pa.decimal256(
                precision, vt.scale)
            return pc.cast(arr, dtype)
        if k == Kind.UUID:
            return arr.storage if isinstance(arr, pa.ExtensionArray) else arr
        if k in (Kind.STRING, Kind.BINARY):
            if isinstance(arr, pa.ExtensionArray):
                arr = arr.storage
            if pa.types.is_fixed_size_binary(arr.type):
                return arr
            return pc.cast(arr, pa.large_binary())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return None


def numbers(vt: ValueType, stored: pa.Array) -> np.ndarray | None:
    """The non-null values of a numeric storage array as numpy (None otherwise)."""
    if vt.kind not in _NUMPY_KINDS:
        return None
    values = pc.drop_null(stored)
    if len(values) == 0:
        dtype = {1: np.int32, 2: np.int64}.get(vt.physical or 0, np.float64)
        return np.zeros(0, dtype=dtype)
    out = np.asarray(values.to_numpy(zero_copy_only=False))
    return out


def unscaled_limbs(stored: pa.Array) -> np.ndarray:
    """Non-null decimals as rows of 32-bit little-endian limbs (two's complement).

    A decimal128 row has 4 limbs, a decimal256 row 8; the last limb carries the sign.
    """
    values = pc.drop_null(stored)
    width = values.type.byte_width
    n = len(values)
    buf = values.buffers()[1]
    if n == 0 or buf is None:
        return np.zeros((0, width // 4), dtype=np.uint32)
    raw = np.frombuffer(buf, dtype="<u4", count=(values.offset + n) * width // 4)
    return raw.reshape(-1, width // 4)[values.offset :]


def exact_int_sum(values: np.ndarray) -> int:
    """Exact sum of an int/uint numpy array, overflow-free (32-bit halves)."""
    if values.dtype.itemsize < 8:
        return int(values.astype(np.int64).sum())
    hi = values >> 32  # arithmetic for int64, logical for uint64
    lo = values & 0xFFFFFFFF
    return (int(hi.sum(dtype=hi.dtype)) << 32) + int(lo.astype(np.uint64).sum(dtype=np.uint64))


def limb_sum(limbs: np.ndarray) -> int:
    """Exact sum of two's complement integers given as 32-bit limbs (last one signed)."""
    total = 0
    last = limbs.shape[1] - 1
    for i in range(last + 1):
        col = limbs[:, i]
        part = int(col.view(np.int32).astype(np.int64).sum()) if i == last else int(
            col.astype(np.uint64).sum(dtype=np.uint64))
        total += part << (32 * i)
    return total


def plain_bytes(vt: ValueType, stored: pa.Array) -> list[bytes] | None:
    """The PLAIN bytes of each non-null value (BYTE_ARRAY without its length prefix).

    None for types whose PLAIN form is not one fixed byte string per value
    (booleans are bit-packed; BYTE_ARRAY decimals may be sign-extended at will).
    """
    nums = numbers(vt, stored)
    if nums is not None:
        width = nums.dtype.itemsize
        data = nums.astype(nums.dtype.newbyteorder("<"), copy=False).tobytes()
        return [data[i : i + width] for i in range(0, len(data), width)]
    values = pc.drop_null(stored)
    if vt.kind == Kind.DECIMAL:
        if vt.physical == PhysicalType.BYTE_ARRAY:
            return None
        out = []
        for d in values.to_pylist():
            raw = encode_plain(vt, d)
            if raw is None:
                return None
            out.append(raw)
        return out
    if vt.kind in (Kind.STRING, Kind.BINARY, Kind.UUID):
        return [bytes(v) for v in values.to_pylist()]
    return None


# Several kinds (file Bloom filter, HLL) hash the same unit of the same column: the
# last few results are kept, keyed by the array's identity (the array is held, so
# the id stays valid) and the unit's rows.
_HASHES: list[tuple[pa.Array, ValueType, int, int, np.ndarray | None]] = []


def unit_hashes(vt: ValueType, stored: pa.Array, start: int, rows: int) -> np.ndarray | None:
    """XXH64 of the PLAIN bytes of the distinct non-null values of rows
    [start, start + rows) of ``stored`` (None where unsupported). Numbers are hashed
    whole (cheap); byte strings are deduplicated first (hashing them is the cost)."""
    for arr, kind, s0, n0, hashes in _HASHES:
        if arr is stored and kind == vt and s0 == start and n0 == rows:
            return hashes
    part = stored.slice(start, rows)
    nums = numbers(vt, part)
    out = xxh64_fixed(nums) if nums is not None else plain_hashes(vt, pc.unique(part))
    _HASHES.append((stored, vt, start, rows, out))
    del _HASHES[:-4]
    return out


def plain_hashes(vt: ValueType, stored: pa.Array) -> np.ndarray | None:
    """XXH64 of the PLAIN bytes of every non-null value (None where unsupported)."""
    nums = numbers(vt, stored)
    if nums is not None:
        return xxh64_fixed(nums)
    raws = plain_bytes(vt, stored)
    return None if raws is None else xxh64_bytes(raws)
