"""Typed statistic values and their order.

Bounds in the footer and the column index are bytes. What they mean comes from
the physical + logical type (``ValueType``), how they compare from the file's
``column_orders`` (``BoundOrder``). When in doubt a bound is reported unusable,
with the reason: pruning may keep too much, never drop a matching row.

The Python values a ``ValueType`` decodes to are listed in
``pqindex.format.value_type``.
"""

from __future__ import annotations

import itertools
import math
import struct
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from pqindex.format.schema import LeafColumn, PhysicalType
from pqindex.format.structs import ColumnIndex, ColumnOrder, Statistics
from pqindex.format.value_type import Int96, Interval, Kind, NanoTimestamp, Value, ValueType

# The value types stay importable from here (re-exported from value_type).
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
    if vt.is_float:
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


def bound_order(leaf: LeafColumn) -> BoundOrder:
    """The order usable for a leaf's bounds, from column_order + physical + logical type
    (derived once per leaf)."""
    order: BoundOrder | None = leaf.memo.get("bound_order")
    if order is None:
        order = leaf.memo["bound_order"] = _bound_order(leaf)
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
