"""Arrow's view types as the types pyarrow computes on.

A file whose Arrow schema says ``string_view`` or ``binary_view`` (arrow-rs writers:
DataFusion, tpchgen-cli; pyarrow writing view-typed tables) is decoded by pyarrow
into views, and pyarrow 26 has no filter, take, comparison, IN or sort kernels for
them. pqindex evaluates and cuts such columns as ``large_string`` / ``large_binary``
and casts the rows back to the file's types at the end (``dataset.schema.conform``),
as ``read_table`` returns them. List views are kept as they are: pyarrow casts a
list view to a list into an invalid array, and has no cast the other way (``cast``).
"""

from __future__ import annotations

import functools
from typing import TypeVar

import numpy as np
import pyarrow as pa

__all__ = ["base_type", "cast", "computable", "computable_schema", "computable_table"]

_A = TypeVar("_A", pa.Array, pa.ChunkedArray)


@functools.lru_cache(maxsize=256)
def base_type(t: pa.DataType) -> pa.DataType:
    """``t`` with its string and binary views (nested ones too) as large types."""
    if pa.types.is_string_view(t):
        return pa.large_string()
    if pa.types.is_binary_view(t):
        return pa.large_binary()
    if pa.types.is_list(t):
        return pa.list_(_base_field(t.value_field))
    if pa.types.is_large_list(t):
        return pa.large_list(_base_field(t.value_field))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_base_field(t.value_field), t.list_size)
    if pa.types.is_map(t):
        return pa.map_(_base_field(t.key_field), _base_field(t.item_field),
                       keys_sorted=t.keys_sorted)
    if pa.types.is_struct(t):
        return pa.struct([_base_field(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_dictionary(t):
        return pa.dictionary(t.index_type, base_type(t.value_type), t.ordered)
    return t


def _base_field(f: pa.Field) -> pa.Field:
    t = base_type(f.type)
    return f if t == f.type else f.with_type(t)


def computable(arr: _A) -> _A:
    """``arr`` without view types (itself when it has none)."""
    t = base_type(arr.type)
    return arr if t == arr.type else arr.cast(t)


# Type ids that may hold a string or binary view: asked first, a wide schema of
# primitive columns is answered without a field's type rebuilt (a scan asks per row group).
_MAY_HOLD = frozenset(t.id for t in (
    pa.string_view(), pa.binary_view(), pa.list_(pa.int8()), pa.large_list(pa.int8()),
    pa.list_(pa.int8(), 1), pa.map_(pa.int8(), pa.int8()), pa.struct([("a", pa.int8())]),
    pa.dictionary(pa.int8(), pa.string())))


def computable_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` without view types (itself when it has none)."""
    if not any(t.id in _MAY_HOLD for t in schema.types):
        return schema
    fields = [_base_field(f) for f in schema]
    if all(f.type == t for f, t in zip(fields, schema.types, strict=True)):
        return schema
    return pa.schema(fields, metadata=schema.metadata)


def computable_table(table: pa.Table) -> pa.Table:
    """``table`` without view types (itself when it has none)."""
    schema = table.schema  # a new wrapper at every access: compared by identity below
    target = computable_schema(schema)
    return table if target is schema else table.cast(target)


def cast(arr: _A, target: pa.DataType) -> _A:
    """``arr.cast(target)``, a list cast to a list view by hand: pyarrow 26 has no
    such cast (its decoders give lists where the Arrow schema says list view)."""
    if (pa.types.is_list_view(target) or pa.types.is_large_list_view(target)) and (
            pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        if isinstance(arr, pa.ChunkedArray):
            return pa.chunked_array([_list_view(c, target) for c in arr.chunks], target)
        return _list_view(arr, target)
    return arr.cast(target)


def _list_view(arr: pa.Array, target: pa.DataType) -> pa.Array:
    # The slice's n + 1 offsets, into the whole child array (``values``).
    offsets = arr.offsets.to_numpy(zero_copy_only=False)
    width = np.int32 if pa.types.is_list_view(target) else np.int64
    starts = pa.array(offsets[:-1].astype(width))
    sizes = pa.array(np.diff(offsets).astype(width))
    values = cast(arr.values, target.value_type)
    make = pa.ListViewArray if pa.types.is_list_view(target) else pa.LargeListViewArray
    out: pa.Array = make.from_arrays(starts, sizes, values, type=target,
                                     mask=arr.is_null() if arr.null_count else None)
    return out
