"""Arrow arrays and scalars built from numpy buffers, and masks read back the same way.

pyarrow imports pandas (0.7-1.1 s on a loaded 2-core machine) on its first
``pa.array``, ``pa.scalar`` or ``to_numpy`` call, and on a compute call given a
Python value (it becomes a ``pa.scalar``). ``Array.from_buffers``, kernels over
Arrow values and ``np.frombuffer`` of an array's buffers do not: the paths a cold
lookup takes use these instead, so a fresh process does not pay that import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["FALSE", "ZERO", "bool_array", "bytes_array", "int64_array", "ints_of", "key_array",
           "key_scalar", "mask_of", "string_array", "typed_scalar"]


def int64_array(values: npt.ArrayLike) -> pa.Array:
    """An int64 Arrow array of ``values`` (a numpy array or a sequence of ints)."""
    data = np.ascontiguousarray(values, np.int64)
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def bool_array(values: npt.ArrayLike) -> pa.Array:
    data = np.asarray(values, np.bool_)
    bits = np.packbits(data, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(data), [None, pa.py_buffer(bits)])


def bytes_array(values: Sequence[bytes], arrow: pa.DataType | None = None) -> pa.Array:
    """A binary (or string, or fixed-size binary: ``arrow``) Arrow array of ``values``."""
    arrow = pa.binary() if arrow is None else arrow
    if pa.types.is_fixed_size_binary(arrow):
        return pa.Array.from_buffers(arrow, len(values), [None, pa.py_buffer(b"".join(values))])
    offsets = np.zeros(len(values) + 1, np.int32)
    np.cumsum([len(v) for v in values], out=offsets[1:])
    return pa.Array.from_buffers(arrow, len(values), [
        None, pa.py_buffer(offsets), pa.py_buffer(b"".join(values))])


def string_array(values: Sequence[str | None]) -> pa.Array:
    """A string array of ``values`` (None is null)."""
    validity, nulls = _validity(values)
    got = bytes_array([b"" if v is None else v.encode("utf-8") for v in values], pa.string())
    if validity is None:
        return got
    return pa.Array.from_buffers(pa.string(), len(values), [validity, *got.buffers()[1:]],
                                 null_count=len(nulls))


FALSE = bool_array([False])[0]
ZERO = int64_array([0])[0]


def _validity(values: Sequence[Any]) -> tuple[pa.Buffer | None, list[int]]:
    """The validity bitmap of ``values`` (None: no None among them) and the positions
    of the Nones."""
    nulls = [i for i, v in enumerate(values) if v is None]
    if not nulls:
        return None, nulls
    valid = np.ones(len(values), np.bool_)
    valid[nulls] = False
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls


def key_array(keys: Sequence[Any], arrow: pa.DataType) -> pa.Array | None:
    """Sort keys (``arrow``: int64, float64 or binary; None is null) as an array; None
    when one does not fit the type (an int above 2^63, a value of another type)."""
    validity, nulls = _validity(keys)
    if validity is not None:
        filler: Any = b"" if arrow == pa.binary() else 0
        got = key_array([filler if k is None else k for k in keys], arrow)
        if got is None:
            return None
        return pa.Array.from_buffers(arrow, len(keys), [validity, *got.buffers()[1:]],
                                     null_count=len(nulls))
    try:
        if arrow == pa.binary():
            if not all(isinstance(k, bytes) for k in keys):
                return None
            return bytes_array(keys)
        if arrow == pa.float64():
            if not all(isinstance(k, (int, float)) and not isinstance(k, bool) for k in keys):
                return None
            data = np.asarray(keys, np.float64)
            return pa.Array.from_buffers(arrow, len(data), [None, pa.py_buffer(data)])
        if arrow == pa.int64():
            if not all(isinstance(k, int) for k in keys):
                return None
            return int64_array(keys)
    except (OverflowError, ValueError, TypeError):
        return None
    return None


def key_scalar(key: Any, arrow: pa.DataType) -> pa.Scalar | None:
    """One sort key as an Arrow scalar (None: it does not fit ``arrow``)."""
    got = key_array([key], arrow)
    return None if got is None else got[0]


def mask_of(a: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.bool_]:
    """An Arrow boolean array as a numpy mask, null (unknown) as False."""
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks() if a.num_chunks != 1 else a.chunk(0)
    n = len(a)
    if n == 0:
        return np.zeros(0, np.bool_)
    if a.null_count:
        a = pc.fill_null(a, FALSE)
    bits = np.frombuffer(a.buffers()[1], np.uint8)
    return np.unpackbits(bits, bitorder="little", count=a.offset + n)[a.offset:].view(np.bool_)


def ints_of(a: pa.Array | pa.ChunkedArray, null: int) -> npt.NDArray[np.int64]:
    """An Arrow integer array as int64 numpy values, a null as ``null``."""
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks() if a.num_chunks != 1 else a.chunk(0)
    if a.type != pa.int64():
        a = a.cast(pa.int64())
    n = len(a)
    if n == 0:
        return np.zeros(0, np.int64)
    out = np.frombuffer(a.buffers()[1], np.int64, count=n, offset=8 * a.offset).copy()
    if a.null_count:
        out[~mask_of(a.is_valid())] = null
    return out




def typed_scalar(value: Any, arrow: pa.DataType) -> pa.Scalar | None:
    """``value`` as a scalar of ``arrow`` for the common cases (an int into an integer
    type, a float into float64, str into a string type, bytes into a binary type), as
    ``pa.scalar(value, arrow)`` gives it; None otherwise or when it does not fit."""
    try:
        if isinstance(value, bool):
            got = bool_array([value]) if pa.types.is_boolean(arrow) else None
        elif isinstance(value, int) and pa.types.is_integer(arrow):
            got = int64_array([value])
        elif isinstance(value, float) and arrow == pa.float64():
            got = key_array([value], arrow)
        elif isinstance(value, str) and (pa.types.is_string(arrow)
                                         or pa.types.is_large_string(arrow)):
            got = string_array([value])
        elif isinstance(value, bytes) and (pa.types.is_binary(arrow)
                                           or pa.types.is_large_binary(arrow)):
            got = bytes_array([value])
        else:
            got = None
        if got is None:
            return None
        return (got if got.type == arrow else got.cast(arrow))[0]
    except (OverflowError, ValueError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
