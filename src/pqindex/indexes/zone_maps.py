"""Kind "zone_maps": count, nulls, NaNs, exact min / max and sum per row group and page.

Small materialized aggregates for numeric and temporal columns. Unlike footer
statistics and the column index, the bounds are always exact values of the
unit (never truncated, never missing because of NaN), so evidence uses
``_summary_match`` with ``exact=True``, and ``aggregates`` answers
``count / min / max / sum`` for a unit without reading its pages.

Sums are exact for integer and decimal columns (an arbitrary-size integer;
decimals as the unscaled sum). Float sums are the correctly rounded float64 sum
of the values (``math.fsum``): an engine adding the same values in row order
may differ in the last bits. NaN in the unit makes the sum NaN, as SQL's SUM
does; +inf with -inf too. Dates, times and timestamps have no sum.

Body (version 1)::

    u8   body version = 1
    ..   value type (``encoding.write_value_type``)
    u64  values (nulls included), u64 nulls, u64 NaNs
    u8   flags: bit 0 = min/max present (some non-null, non-NaN value)
    ..   if present: u32 length + PLAIN min, u32 length + PLAIN max
    u8   sum tag: 0 none, 1 integer (u32 length + two's complement LE), 2 float64
    ..   sum
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pqindex.expr.bind import BoundPredicate
from pqindex.format.match import Match
from pqindex.format.plain import encode_plain
from pqindex.format.schema import LeafColumn, PhysicalType
from pqindex.format.value_type import Kind, Value, ValueType
from pqindex.indexes.base import Blob, Scope, register
from pqindex.indexes.encoding import (
    BodyReader,
    BodyWriter,
    RegionError,
    check_leaf_type,
    read_value_type,
    write_value_type,
)
from pqindex.indexes.evidence import _Summary, _summary_match, value_key
from pqindex.indexes.leaf_values import (
    exact_int_sum,
    limb_sum,
    numbers,
    storage,
    unscaled_limbs,
)
from pqindex.indexes.units import scopes_option, units

__all__ = ["ZoneMap", "ZoneMapEvidence", "ZoneMapsKind", "aggregates", "read_zone_map"]

_VERSION = 1
_HAS_BOUNDS = 1
_SUM_NONE, _SUM_INT, _SUM_FLOAT = 0, 1, 2
_FLOATS = frozenset({Kind.FLOAT, Kind.DOUBLE, Kind.FLOAT16})
_INTEGERS = frozenset({Kind.INT, Kind.UINT})
_SUPPORTED = _FLOATS | _INTEGERS | {Kind.DECIMAL, Kind.DATE, Kind.TIME, Kind.TIMESTAMP}


@dataclass(frozen=True)
class ZoneMap:
    """A decoded zone map: counts, PLAIN bounds and the sum."""

    vt: ValueType
    count: int  # values, nulls included
    null_count: int
    nan_count: int
    min_raw: bytes | None
    max_raw: bytes | None
    sum: int | float | None  # unscaled for decimals

    def min(self) -> Value | None:
        return None if self.min_raw is None else self.vt.decode(self.min_raw)

    def max(self) -> Value | None:
        return None if self.max_raw is None else self.vt.decode(self.max_raw)


# ---------------------------------------------------------------- building


def _float_sum(values: np.ndarray) -> float:
    if values.size == 0:
        return 0.0
    as64 = values.astype(np.float64)
    if np.isnan(as64).any():
        return math.nan
    pos, neg = bool(np.isposinf(as64).any()), bool(np.isneginf(as64).any())
    if pos or neg:
        return math.nan if pos and neg else (math.inf if pos else -math.inf)
    # numpy's pairwise summation: error O(log n) ulps, at memory speed; an exact
    # (fsum) sum costs more than writing the file, and float sums differ between
    # engines anyway (order of addition).
    return float(as64.sum())


def _decimal_raw(vt: ValueType, value: Decimal) -> bytes:
    raw = encode_plain(vt, value)
    if raw is not None:
        return raw
    # BYTE_ARRAY decimals: the minimal big-endian two's complement.
    unscaled = int(value.scaleb(vt.scale or 0))
    return unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)


def _zone_map(vt: ValueType, part: pa.Array) -> ZoneMap:
    rows, nulls = len(part), part.null_count
    nans = 0
    lo = hi = None
    total: int | float | None = None
    if vt.kind == Kind.DECIMAL:
        mm = pc.min_max(part)
        if mm["min"].is_valid:
            lo = _decimal_raw(vt, mm["min"].as_py())
            hi = _decimal_raw(vt, mm["max"].as_py())
        total = limb_sum(unscaled_limbs(part))
    else:
        vals = numbers(vt, part)
        assert vals is not None
        if vt.kind in _FLOATS:
            nan = np.isnan(vals)
            nans = int(nan.sum())
            total = _float_sum(vals)
            vals = vals[~nan]
        elif vt.kind in _INTEGERS:
            total = exact_int_sum(vals)
        le = vals.dtype.newbyteorder("<")
        if vals.size:
            lo = vals.min().astype(le).tobytes()
            hi = vals.max().astype(le).tobytes()
    return ZoneMap(vt, rows, nulls, nans, lo, hi, total)


def _encode(z: ZoneMap) -> bytes:
    w = BodyWriter()
    w.u8(_VERSION)
    write_value_type(w, z.vt)
    w.u64(z.count)
    w.u64(z.null_count)
    w.u64(z.nan_count)
    if z.min_raw is not None and z.max_raw is not None:
        w.u8(_HAS_BOUNDS)
        w.sized(z.min_raw)
        w.sized(z.max_raw)
    else:
        w.u8(0)
    if isinstance(z.sum, float):
        w.u8(_SUM_FLOAT)
        w.f64(z.sum)
    elif isinstance(z.sum, int):
        w.u8(_SUM_INT)
        w.big_int(z.sum)
    else:
        w.u8(_SUM_NONE)
    return w.getvalue()


def read_zone_map(blob: Blob) -> ZoneMap:
    """Decode a "zone_maps" blob; RegionError when it is malformed."""
    r = BodyReader(blob.data, f"zone_maps blob for {blob.column!r}")
    r.version(_VERSION)
    vt = read_value_type(r)
    count, nulls, nans = r.u64(), r.u64(), r.u64()
    if nulls + nans > count or (nans and vt.kind not in _FLOATS):
        raise RegionError(f"{r.what}: {nulls} nulls and {nans} NaNs in {count} values")
    flags = r.u8()
    lo = hi = None
    if flags & _HAS_BOUNDS:
        lo, hi = r.sized(), r.sized()
        for raw in (lo, hi):
            vt.decode(raw)  # ValueError for a width that does not fit the type
    elif count > nulls + nans:
        raise RegionError(f"{r.what}: no bounds for {count - nulls - nans} values")
    tag = r.u8()
    total: int | float | None
    if tag == _SUM_INT:
        total = r.big_int()
    elif tag == _SUM_FLOAT:
        total = r.f64()
    elif tag == _SUM_NONE:
        total = None
    else:
        raise RegionError(f"{r.what}: unknown sum tag {tag}")
    r.end()
    return ZoneMap(vt, count, nulls, nans, lo, hi, total)


def aggregates(blob: Blob) -> dict[str, Any]:
    """``count`` (nulls included), ``null_count``, ``nan_count``, ``min``, ``max``, ``sum``.

    Values are in the column's domain (``ValueType.decode``); a decimal sum is a
    ``Decimal`` of the column's scale; ``min``/``max`` are None when the unit has
    no non-null, non-NaN value; ``sum`` is None for temporal columns and 0 for a
    unit without values. RegionError for a malformed blob.
    """
    z = read_zone_map(blob)
    total: Any = z.sum
    if z.vt.kind == Kind.DECIMAL and isinstance(total, int):
        total = Decimal(total).scaleb(-(z.vt.scale or 0))
    return {"count": z.count, "null_count": z.null_count, "nan_count": z.nan_count,
            "min": z.min(), "max": z.max(), "sum": total}


# ---------------------------------------------------------------- evidence


class ZoneMapEvidence:
    """Exact bounds and counts of a unit, through the shared ``_summary_match``."""

    def __init__(self, zone: ZoneMap) -> None:
        self.zone = zone
        vt = zone.vt
        lo, hi = zone.min(), zone.max()
        self._lo = None if lo is None else value_key(vt, lo)
        self._hi = None if hi is None else value_key(vt, hi)

    def match(self, pred: BoundPredicate) -> Match:
        if pred.leaf.max_repetition_level > 0:
            return Match.SOME
        z = self.zone
        if z.count == 0:
            return Match.NONE
        all_nan = z.nan_count > 0 and z.nan_count == z.count - z.null_count
        s = _Summary(self._lo, self._hi, True, z.null_count, z.count, z.nan_count, all_nan)
        return _summary_match(s, pred)


@register
class ZoneMapsKind:
    """Zone maps for numeric and temporal columns (``scopes`` default row_group, page)."""

    name: ClassVar[str] = "zone_maps"

    def build(
        self,
        leaf: LeafColumn,
        column: pa.Array,
        row_group_bounds: list[tuple[int, int]],
        page_bounds: list[list[tuple[int, int]]] | None,
        options: Mapping[str, Any],
    ) -> list[Blob]:
        vt = ValueType.from_leaf(leaf)
        if leaf.nested or vt.kind not in _SUPPORTED:
            return []
        if vt.kind == Kind.DECIMAL and vt.physical not in (
                PhysicalType.INT32, PhysicalType.INT64, PhysicalType.FIXED_LEN_BYTE_ARRAY,
                PhysicalType.BYTE_ARRAY):
            return []
        stored = storage(leaf, column)
        if stored is None:
            return []
        scopes = scopes_option(options, (Scope.ROW_GROUP, Scope.PAGE))
        return [
            Blob(self.name, leaf.name, u.scope, u.row_group, u.page,
                 _encode(_zone_map(vt, stored.slice(u.start, u.rows))))
            for u in units(len(stored), row_group_bounds, page_bounds, scopes)
        ]

    def evidence(self, leaf: LeafColumn, blob: Blob) -> ZoneMapEvidence:
        zone = read_zone_map(blob)
        check_leaf_type(leaf, zone.vt, f"zone_maps blob for {blob.column!r}")
        return ZoneMapEvidence(zone)
