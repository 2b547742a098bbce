"""Page pruning over one column chunk's ColumnIndex + OffsetIndex.

``PageIndex`` decodes a chunk's page index once (first rows, row counts, bound
keys, null and NaN facts) and then answers, per page, whether a leaf predicate
matches no row, some rows or all rows (``Match``). Ordered column indexes
(``boundary_order`` ASCENDING / DESCENDING) are searched by bisection over the
pages that have usable bounds, unordered ones by one vectorized pass.

Conservative fallbacks, each pinned by a test in ``tests/test_column_index.py``:

============================================ ===================================
situation                                    answer
============================================ ===================================
no OffsetIndex                               ``PageIndex.load`` returns None
no ColumnIndex                               every page SOME
ColumnIndex fails ``validate_column_index``  every page SOME; IS [NOT] NULL still
(page counts disagree, min > max, a false    use null_pages / null_counts when
boundary_order, bad widths, ...)             those lists are consistent
null_counts / nan_counts exceed page rows    every page SOME, IS [NOT] NULL too
or contradict null_pages                     (NaN counts only: IS [NOT] NULL kept)
column order unusable (INT96, no             value predicates SOME except on
column_orders, unknown logical type)         null pages (NONE)
NaN bound under TYPE_ORDER                   that page SOME
NaN literal                                  SOME (engines disagree on NaN = NaN)
nan_count unknown on a float column          never ALL for a comparison NaN fails
-0.0 / +0.0 under IEEE_754_TOTAL_ORDER       zero bounds widened to both zeros
string / binary bounds (maybe truncated)     no ALL for = / IN, no NONE for != /
                                             NOT IN from equal bounds
repeated column (lists)                      never ALL
empty NOT IN list                            SOME
============================================ ===================================
"""

from __future__ import annotations

import bisect
import contextlib
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from pqindex.errors import CorruptFileError
from pqindex.format.match import LeafOp, Match
from pqindex.format.row_ranges import RowRanges, Selection
from pqindex.format.schema import BoundaryOrder, LeafColumn, PhysicalType
from pqindex.format.structs import ColumnIndex, OffsetIndex
from pqindex.format.value_type import Kind
from pqindex.format.values import (
    BoundOrder,
    Comparison,
    bound_order,
    page_bounds,
    validate_column_index,
)

if TYPE_CHECKING:
    from pqindex.format.file import ParquetFile

__all__ = ["PageIndex", "prefix_upper_bound"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
MatchArray = npt.NDArray[np.int8]
Strategy = Literal["auto", "binary", "linear"]

_NONE, _SOME, _ALL = np.int8(Match.NONE), np.int8(Match.SOME), np.int8(Match.ALL)
_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_ARITY = {LeafOp.IS_NULL: 0, LeafOp.IS_NOT_NULL: 0, LeafOp.IS_NAN: 0, LeafOp.IS_NOT_NAN: 0}
_NEGATIVE = frozenset({LeafOp.NE, LeafOp.NOT_IN, LeafOp.NOT_STARTS_WITH})
# Keys are bound_order(leaf).key(...) values; for these kinds that key is the raw
# PLAIN value times a scale, so whole bound lists decode with one frombuffer.
_NUMERIC_KINDS = frozenset({Kind.INT, Kind.UINT, Kind.DATE, Kind.TIME, Kind.TIMESTAMP,
                            Kind.FLOAT, Kind.DOUBLE})
_TIMESTAMP_SCALE = {"millis": 10**6, "micros": 10**3, "nanos": 1}
# IEEE_754_TOTAL_ORDER keys of -0.0 and +0.0 (total_order_key), for any float width.
_NEG_ZERO_KEY, _POS_ZERO_KEY = -1, 0


def prefix_upper_bound(prefix: bytes) -> bytes | None:
    """The smallest byte string above every string starting with ``prefix``.

    None when there is none (empty prefix, or all bytes 0xFF).
    """
    p = prefix.rstrip(b"\xff")
    if not p:
        return None
    return p[:-1] + bytes([p[-1] + 1])


# ---------------------------------------------------------------- bound keys


class _Side:
    """One side (min or max keys) of the pages with usable bounds."""

    __slots__ = ("_asc", "_asc_list", "_list", "descending", "values")

    def __init__(self, values: npt.NDArray[Any], descending: bool) -> None:
        self.values = values
        self.descending = descending
        self._list: list[Any] | None = None
        self._asc_list: list[Any] | None = None
        self._asc = values[::-1] if descending else values

    def numeric_key(self, v: Any) -> bool:
        """Whether ``v`` converts exactly to the array's dtype (else compare as objects)."""
        dtype = self.values.dtype
        if isinstance(v, np.generic):
            v = v.item()
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            return isinstance(v, int) and info.min <= v <= info.max
        if dtype.kind == "f":
            return isinstance(v, float) or (isinstance(v, int) and abs(v) <= 2**53)
        return False

    def _scalar(self, v: Any) -> Any:
        # An explicit scalar of the array's dtype: numpy would otherwise compare
        # uint64 against a Python int in float64.
        return self.values.dtype.type(v)

    def as_list(self) -> list[Any]:
        if self._list is None:
            self._list = self.values.tolist()
        return self._list

    def compare(self, op: str, v: Any) -> BoolArray:
        """Linear: ``values <op> v`` for every page."""
        if self.numeric_key(v):
            return np.asarray(_CMP[op](self.values, self._scalar(v)), dtype=bool)
        f = _CMP[op]
        return np.fromiter((f(x, v) for x in self.as_list()), dtype=bool,
                           count=self.values.size)

    def search(self, v: Any, side: Literal["left", "right"]) -> int:
        """Bisection in the ascending view of the values."""
        if self.numeric_key(v):
            return int(np.searchsorted(self._asc, self._scalar(v), side=side))
        if self._asc_list is None:
            self._asc_list = self._asc.tolist()
        fn = bisect.bisect_left if side == "left" else bisect.bisect_right
        return fn(self._asc_list, v)

    def run(self, op: str, v: Any) -> tuple[int, int]:
        """Binary: the ``[start, stop)`` positions (ascending view) where ``values <op> v``."""
        n = self.values.size
        if op == "<":
            return 0, self.search(v, "left")
        if op == "<=":
            return 0, self.search(v, "right")
        if op == ">":
            return self.search(v, "right"), n
        return self.search(v, "left"), n

    def mask(self, op: str, v: Any) -> BoolArray:
        start, stop = self.run(op, v)
        return self.from_ascending_run(start, stop)

    def from_ascending_run(self, start: int, stop: int) -> BoolArray:
        m = np.zeros(self.values.size, dtype=bool)
        if start < stop:
            m[start:stop] = True
        return m[::-1].copy() if self.descending else m

    def from_ascending(self, m: BoolArray) -> BoolArray:
        return m[::-1].copy() if self.descending else m


@dataclass(frozen=True, slots=True)
class _Keys:
    """Bound keys of the pages whose bounds are usable, in page order."""

    pages: IntArray
    lo: _Side
    hi: _Side
    ordered: bool  # boundary order ASCENDING / DESCENDING and trusted

    @property
    def size(self) -> int:
        return int(self.pages.size)


def _as_key_array(keys: Sequence[Any]) -> npt.NDArray[Any]:
    """int64 or float64 when every key fits, else an object array."""
    if keys and all(type(k) is int for k in keys) and (
            min(keys) >= -(2**63) and max(keys) < 2**63):
        return np.array(keys, dtype=np.int64)
    if keys and all(type(k) is float for k in keys):
        return np.array(keys, dtype=np.float64)
    out = np.empty(len(keys), dtype=object)
    for i, k in enumerate(keys):
        out[i] = k
    return out


def _numeric_bounds(ci: ColumnIndex, pages: IntArray, order: BoundOrder
                    ) -> tuple[npt.NDArray[Any], npt.NDArray[Any]] | None:
    """All bound keys of ``pages`` at once, for fixed-width numeric columns; else None."""
    vt = order.value_type
    if order.comparison not in (Comparison.SIGNED, Comparison.UNSIGNED, Comparison.FLOAT):
        return None
    if vt.kind not in _NUMERIC_KINDS:
        return None
    unsigned = vt.kind == Kind.UINT
    dtype = {PhysicalType.INT32: "<u4" if unsigned else "<i4",
             PhysicalType.INT64: "<u8" if unsigned else "<i8",
             PhysicalType.FLOAT: "<f4", PhysicalType.DOUBLE: "<f8"}.get(
                 PhysicalType(vt.physical or 0))
    if dtype is None:
        return None
    width = int(dtype[-1])
    assert ci.min_values is not None and ci.max_values is not None
    sides = []
    for raw_list in (ci.min_values, ci.max_values):
        raw = b"".join(raw_list[i] for i in pages.tolist())
        if len(raw) != width * pages.size:
            return None
        arr = np.frombuffer(raw, dtype=dtype)
        big = np.uint64 if dtype == "<u8" else np.int64
        sides.append(arr.astype(np.float64 if dtype[1] == "f" else big))
    scale = _TIMESTAMP_SCALE.get(vt.unit or "", 1) if vt.kind == Kind.TIMESTAMP else 1
    if scale != 1:
        limit = (2**63 - 1) // scale
        if any(s.size and max(-int(s.min()), int(s.max())) > limit for s in sides):
            return None  # nanoseconds would overflow int64: let the general path use ints
        sides = [s * scale for s in sides]
    return sides[0], sides[1]


def _bytes_bounds(ci: ColumnIndex, pages: IntArray, leaf: LeafColumn, order: BoundOrder
                  ) -> tuple[IntArray, npt.NDArray[Any], npt.NDArray[Any]] | None:
    """Bound keys of string / binary pages straight from the raw bounds (their key is
    the bytes themselves: ``page_bounds`` would decode each to str and encode it back);
    pages without both bounds or with min > max left out, as ``page_bounds`` does.
    (pages, lo, hi), or None for other columns."""
    if (leaf.element.type != PhysicalType.BYTE_ARRAY or order.comparison != Comparison.BYTES
            or order.value_type.kind not in (Kind.STRING, Kind.BINARY)):
        return None
    assert ci.min_values is not None and ci.max_values is not None
    kept, los, his = [], [], []
    mins, maxs = ci.min_values, ci.max_values
    for p in pages.tolist():
        lo, hi = mins[p], maxs[p]
        if lo is None or hi is None:
            continue
        lo, hi = bytes(lo), bytes(hi)
        if lo > hi:
            continue
        kept.append(p)
        los.append(lo)
        his.append(hi)
    return np.array(kept, dtype=np.int64), _as_key_array(los), _as_key_array(his)


# The sorted keys of the last few IN lists, by identity of the keys tuple: a bound
# predicate asks every page index of a query (each chunk of each file) with the
# same tuple, and sorting or converting 100,000 keys each time cost more than the
# search.
_SORTED_KEPT = 8
_sorted: dict[int, tuple[tuple[Any, ...], bool, list[Any], npt.NDArray[Any]]] = {}


def _sorted_keys(keys: tuple[Any, ...]) -> tuple[bool, list[Any], npt.NDArray[Any]]:
    """Whether a key is NaN; the distinct keys in order, as a list and as
    ``_as_key_array`` (both empty when one is NaN: no order)."""
    got = _sorted.get(id(keys))
    if got is not None and got[0] is keys:
        return got[1], got[2], got[3]
    nan = any(isinstance(k, float) and math.isnan(k) for k in keys)
    values = [] if nan else sorted(set(keys))
    arr = _as_key_array(values)
    if len(_sorted) >= _SORTED_KEPT:
        with contextlib.suppress(KeyError, RuntimeError, StopIteration):
            del _sorted[next(iter(_sorted))]
    _sorted[id(keys)] = (keys, nan, values, arr)  # the tuple held: its id stays its own
    return nan, values, arr


# ---------------------------------------------------------------- consistency


def _null_info_reason(ci: ColumnIndex, row_counts: IntArray, flat: bool) -> str | None:
    """Why null_pages / null_counts cannot be trusted, or None."""
    n = row_counts.size
    if ci.null_pages is None or len(ci.null_pages) != n:
        got = "no" if ci.null_pages is None else len(ci.null_pages)
        return f"null_pages has {got} entries for {n} pages"
    if ci.null_counts is None:
        return None
    if len(ci.null_counts) != n:
        return f"null_counts has {len(ci.null_counts)} entries for {n} pages"
    for i, (null_page, nc) in enumerate(zip(ci.null_pages, ci.null_counts, strict=True)):
        rows = int(row_counts[i])
        if nc < 0:
            return f"page {i}: negative null count {nc}"
        if null_page and nc == 0 and rows > 0:
            return f"page {i}: null page with a null count of 0"
        # Flat columns hold one value per row; repeated ones may hold more.
        if flat and nc > rows:
            return f"page {i}: {nc} nulls in {rows} rows"
        if flat and null_page and nc != rows:
            return f"page {i}: null page with {nc} nulls in {rows} rows"
    return None


def _nan_info_reason(ci: ColumnIndex, row_counts: IntArray, flat: bool) -> str | None:
    """Why nan_counts cannot be trusted, or None."""
    if ci.nan_counts is None:
        return None
    n = row_counts.size
    if len(ci.nan_counts) != n:
        return f"nan_counts has {len(ci.nan_counts)} entries for {n} pages"
    nulls = ci.null_counts or [0] * n
    for i, nan in enumerate(ci.nan_counts):
        if nan < 0:
            return f"page {i}: negative NaN count {nan}"
        if flat and nan + nulls[i] > row_counts[i]:
            return f"page {i}: {nan} NaNs and {nulls[i]} nulls in {row_counts[i]} rows"
    return None


# ---------------------------------------------------------------- the index


@dataclass(frozen=True, eq=False)
class PageIndex:
    """One column chunk's page index, decoded once, answering predicates per page.

    ``reason`` says why the ColumnIndex cannot be used for value predicates (None
    when it can); ``null_reason`` why its null facts cannot be used either.
    Counts are None when absent or untrusted. ``boundary_order`` is the order
    binary search relies on: UNORDERED unless claimed and the index is valid.
    Per-page masks: ``all_null`` (no value present), ``no_nulls`` (null count
    known 0), ``no_nans`` (NaN count known 0, or not a float column), ``all_nan``
    (every non-null value is NaN), ``bounds_usable`` (min/max keys known).
    """

    leaf: LeafColumn
    order: BoundOrder
    num_rows: int
    first_rows: IntArray
    row_counts: IntArray
    boundary_order: BoundaryOrder
    reason: str | None
    null_reason: str | None
    null_pages: BoolArray
    null_counts: IntArray | None
    nan_counts: IntArray | None
    bounds_usable: BoolArray
    all_nan: BoolArray
    all_null: BoolArray
    no_nulls: BoolArray
    no_nans: BoolArray
    _keys: _Keys = field(repr=False)

    # ------------------------------------------------------------ construction

    @classmethod
    def load(cls, pf: ParquetFile, rg: int, col: int) -> PageIndex | None:
        """The chunk's page index; None when it has no OffsetIndex."""
        oi = pf.offset_index(rg, col)
        if oi is None:
            return None
        return cls.build(pf.column_index(rg, col), oi, pf.leaf(col), pf.row_group_rows(rg))

    @classmethod
    def build(cls, ci: ColumnIndex | None, oi: OffsetIndex, leaf: LeafColumn,
              num_rows: int) -> PageIndex:
        """From decoded structs; CorruptFileError when the OffsetIndex is inconsistent."""
        first = _first_rows(oi, num_rows, leaf.name)
        counts = np.diff(np.append(first, np.int64(num_rows))).astype(np.int64)
        n = int(first.size)
        flat = leaf.max_repetition_level == 0
        order = bound_order(leaf)
        is_float = order.value_type.is_float

        null_pages = np.zeros(n, dtype=bool)
        null_counts: IntArray | None = None
        nan_counts: IntArray | None = None
        usable = np.zeros(n, dtype=bool)
        all_nan = np.zeros(n, dtype=bool)
        empty = np.empty(0, dtype=np.int64)
        keys = _Keys(empty, _Side(empty, False), _Side(empty, False), False)
        direction = BoundaryOrder.UNORDERED

        if ci is None:
            reason: str | None = "no column index"
            null_reason: str | None = reason
        else:
            null_reason = _null_info_reason(ci, counts, flat)
            nan_reason = _nan_info_reason(ci, counts, flat) if is_float else None
            reason = validate_column_index(ci, n, leaf) or null_reason or nan_reason
            if null_reason is None:
                assert ci.null_pages is not None
                null_pages = np.array(ci.null_pages, dtype=bool)
                if ci.null_counts is not None:
                    null_counts = np.array(ci.null_counts, dtype=np.int64)
            if is_float and nan_reason is None and ci.nan_counts is not None:
                nan_counts = np.array(ci.nan_counts, dtype=np.int64)
            if reason is None:
                if ci.boundary_order in (BoundaryOrder.ASCENDING, BoundaryOrder.DESCENDING):
                    direction = BoundaryOrder(ci.boundary_order)
                keys, usable, all_nan = _decode_keys(ci, leaf, order, null_pages, direction)

        if nan_counts is not None and null_counts is not None and flat:
            # Every non-null value is NaN: nothing but IS NAN / != can match.
            all_nan |= (nan_counts > 0) & (nan_counts + null_counts == counts)
        all_null = null_pages.copy()
        no_nulls = np.zeros(n, dtype=bool)
        if null_counts is not None:
            no_nulls = (null_counts == 0) & ~null_pages
            if flat:  # one value per row: as many nulls as rows is an all-null page
                all_null |= null_counts == counts
        no_nans = np.ones(n, dtype=bool) if not is_float else (
            nan_counts == 0 if nan_counts is not None else np.zeros(n, dtype=bool))
        return cls(leaf, order, num_rows, first, counts, direction, reason, null_reason,
                   null_pages, null_counts, nan_counts, usable, all_nan, all_null,
                   no_nulls, np.asarray(no_nans, dtype=bool), keys)

    def __repr__(self) -> str:
        state = "usable" if self.reason is None else f"unusable: {self.reason}"
        return (f"PageIndex({self.leaf.name!r}, {self.num_pages} pages, "
                f"{self.boundary_order.name}, {state})")

    # ------------------------------------------------------------ facts per page

    @property
    def num_pages(self) -> int:
        return int(self.first_rows.size)

    @property
    def ordered(self) -> bool:
        """Whether predicates can be answered by binary search."""
        return self._keys.ordered

    def page_keys(self, page: int) -> tuple[Any, Any] | None:
        """The (min, max) bound keys of a page, None when unusable."""
        i = int(np.searchsorted(self._keys.pages, page))
        if i < self._keys.size and self._keys.pages[i] == page:
            return self._keys.lo.as_list()[i], self._keys.hi.as_list()[i]
        return None

    @property
    def _flat(self) -> bool:
        # ALL needs one value per row; a repeated column's page may hold more.
        return self.leaf.max_repetition_level == 0

    # ------------------------------------------------------------ matching

    def matching_pages(self, op: LeafOp, keys: tuple[Any, ...] = (), *,
                       strategy: Strategy = "auto") -> MatchArray:
        """Per page, whether ``column <op> keys`` matches no, some or all rows.

        ``keys`` are literals already in ``bound_order(leaf).key`` form (bytes
        prefix for STARTS_WITH). ``strategy`` "auto" bisects ordered indexes,
        "linear" forces the linear pass, "binary" demands bisection.
        """
        op = LeafOp(op)
        want = _ARITY.get(op, -1 if op in (LeafOp.IN, LeafOp.NOT_IN) else 1)
        if want >= 0 and len(keys) != want:
            raise ValueError(f"{op.value} takes {want} value(s), got {len(keys)}")
        if strategy not in ("auto", "binary", "linear"):
            raise ValueError(f"unknown strategy {strategy!r}")
        if strategy == "binary" and not self.ordered:
            raise ValueError("binary search needs an ASCENDING or DESCENDING column index")
        binary = self.ordered and strategy != "linear"
        try:
            return self._match(op, keys, binary)
        except TypeError as e:
            raise TypeError(f"{op.value} {keys!r} does not compare with the bounds of "
                            f"column {self.leaf.name!r}: {e}") from e

    def _match(self, op: LeafOp, keys: tuple[Any, ...], binary: bool) -> MatchArray:
        n = self.num_pages
        out = np.full(n, _SOME, dtype=np.int8)
        is_float = self.order.value_type.is_float
        if op in (LeafOp.IS_NULL, LeafOp.IS_NOT_NULL) or (
                op == LeafOp.IS_NOT_NAN and not is_float):
            return self._null_match(LeafOp.IS_NULL if op == LeafOp.IS_NULL
                                    else LeafOp.IS_NOT_NULL)
        if op == LeafOp.IS_NAN and not is_float:
            return np.full(n, _NONE, dtype=np.int8)  # only floats hold NaN
        if op == LeafOp.IN and not keys:
            return np.full(n, _NONE, dtype=np.int8)
        if self.reason is not None or (op == LeafOp.NOT_IN and not keys):
            return out
        all_null, no_nulls = self.all_null, self.no_nulls
        flat = self._flat
        if op in (LeafOp.IS_NAN, LeafOp.IS_NOT_NAN):
            no_nans = self.no_nans
            if op == LeafOp.IS_NAN:
                out[all_null | no_nans] = _NONE
                if flat:
                    out[self.all_nan & no_nulls] = _ALL
            else:
                out[all_null | self.all_nan] = _NONE
                if flat:
                    out[no_nulls & no_nans] = _ALL
            return out

        # Value predicates: NULL never matches, NaN only matches != and NOT IN.
        out[all_null] = _NONE
        if op in (LeafOp.LIKE, LeafOp.NOT_LIKE, LeafOp.ILIKE, LeafOp.NOT_ILIKE, LeafOp.REGEXP,
                  LeafOp.NOT_REGEXP):
            return out  # bounds say nothing of a pattern (its prefix is a STARTS_WITH)
        if (_sorted_keys(keys)[0] if op in (LeafOp.IN, LeafOp.NOT_IN)
                else any(isinstance(k, float) and math.isnan(k) for k in keys)):
            return out
        bytes_like = self.order.comparison == Comparison.BYTES and \
            self.order.value_type.kind in (Kind.STRING, Kind.BINARY)
        if op in (LeafOp.STARTS_WITH, LeafOp.NOT_STARTS_WITH):
            if not bytes_like:
                return out
            prefix = keys[0]
            if not isinstance(prefix, bytes):
                raise TypeError(f"a STARTS_WITH prefix must be bytes, not {type(prefix).__name__}")
            if not prefix:  # every non-null value starts with b""
                if op == LeafOp.NOT_STARTS_WITH:
                    return np.full(n, _NONE, dtype=np.int8)
                return self._null_match(LeafOp.IS_NOT_NULL)
        negative = op in _NEGATIVE
        nan_pages = self.all_nan & ~all_null
        if negative:
            if flat:
                out[nan_pages & no_nulls] = _ALL
        else:
            out[nan_pages] = _NONE

        k = self._keys
        if k.size == 0:
            return out
        none_c, all_c = self._bound_masks(op, keys, binary)
        # String / binary bounds may be truncated: equal bounds are not trusted to
        # mean "every value is this one".
        if bytes_like and op in (LeafOp.EQ, LeafOp.IN):
            all_c[:] = False
        if bytes_like and op in (LeafOp.NE, LeafOp.NOT_IN):
            none_c[:] = False
        pages = k.pages
        if negative and op != LeafOp.NOT_STARTS_WITH:
            # A NaN row matches != / NOT IN: no NONE unless NaN is ruled out.
            none_c &= self.no_nans[pages]
            allow_all = no_nulls
        else:
            allow_all = no_nulls & self.no_nans
        all_c &= allow_all[pages] & ~none_c
        if not flat:
            all_c[:] = False
        res = np.full(k.size, _SOME, dtype=np.int8)
        res[all_c] = _ALL
        res[none_c] = _NONE
        # Bounds of a page whose values are all NaN describe nothing that is there.
        keep = ~self.all_nan[pages]
        out[pages[keep]] = res[keep]
        return out

    def _null_match(self, op: LeafOp) -> MatchArray:
        out = np.full(self.num_pages, _SOME, dtype=np.int8)
        if self.null_reason is not None:
            return out
        no_nulls, all_null = self.no_nulls, self.all_null
        if op == LeafOp.IS_NULL:
            out[no_nulls] = _NONE
            if self._flat:
                out[all_null] = _ALL
        else:
            out[all_null] = _NONE
            if self._flat:
                out[no_nulls] = _ALL
        return out

    def _bound_masks(self, op: LeafOp, keys: tuple[Any, ...],
                     binary: bool) -> tuple[BoolArray, BoolArray]:
        """(no row can match, every non-null non-NaN value matches), per bounded page."""
        k = self._keys
        lo, hi = k.lo, k.hi

        def c(side: _Side, cmp: str, v: Any) -> BoolArray:
            return side.mask(cmp, v) if binary else side.compare(cmp, v)

        if op in (LeafOp.IN, LeafOp.NOT_IN):
            hit, exact = self._in_masks(keys, binary)
            return (~hit, exact) if op == LeafOp.IN else (exact, ~hit)
        if op in (LeafOp.STARTS_WITH, LeafOp.NOT_STARTS_WITH):
            p = keys[0]
            u = prefix_upper_bound(p)
            # Values starting with p are exactly those in [p, u).
            below = c(hi, "<", p)
            above = c(lo, ">=", u) if u is not None else np.zeros(k.size, dtype=bool)
            inside = c(lo, ">=", p)
            if u is not None:
                inside &= c(hi, "<", u)
            outside = below | above
            return (outside, inside) if op == LeafOp.STARTS_WITH else (inside, outside)
        v = keys[0]
        if op == LeafOp.EQ:
            return c(lo, ">", v) | c(hi, "<", v), c(lo, ">=", v) & c(hi, "<=", v)
        if op == LeafOp.NE:
            return c(lo, ">=", v) & c(hi, "<=", v), c(lo, ">", v) | c(hi, "<", v)
        if op == LeafOp.LT:
            return c(lo, ">=", v), c(hi, "<", v)
        if op == LeafOp.LE:
            return c(lo, ">", v), c(hi, "<=", v)
        if op == LeafOp.GT:
            return c(hi, "<=", v), c(lo, ">", v)
        if op == LeafOp.GE:
            return c(hi, "<", v), c(lo, ">=", v)
        raise ValueError(f"{op.value} is not a value predicate")

    def _in_masks(self, keys: tuple[Any, ...], binary: bool) -> tuple[BoolArray, BoolArray]:
        """(some key lies in [min, max], min == max == some key), per bounded page."""
        k = self._keys
        lo, hi = k.lo, k.hi
        _, values, arr = _sorted_keys(keys)
        numeric = arr.dtype != object and arr.dtype == lo.values.dtype
        if binary and numeric:
            # Each key marks a run of candidate pages (ascending view), found for all
            # keys in one searchsorted each; a difference array joins the runs.
            runs = []
            for first, last in ((hi._asc, lo._asc), (lo._asc, hi._asc)):
                starts = np.searchsorted(first, arr, side="left")  # first >= v from here
                stops = np.searchsorted(last, arr, side="right")  # last <= v before here
                keep = starts < stops
                diff = np.zeros(k.size + 1, dtype=np.int64)
                np.add.at(diff, starts[keep], 1)
                np.add.at(diff, stops[keep], -1)
                runs.append(lo.from_ascending(np.cumsum(diff[:-1]) > 0))
            return runs[0], runs[1]
        if binary and len(values) < k.size:
            # Few keys over many ordered pages: O(keys * log pages) bisections.
            hits = np.zeros(k.size + 1, dtype=np.int64)
            exact = np.zeros(k.size + 1, dtype=np.int64)
            for v in values:
                a = hi.search(v, "left")  # hi >= v from a on
                b = lo.search(v, "right")  # lo <= v before b
                if a < b:
                    hits[a] += 1
                    hits[b] -= 1
                a2 = lo.search(v, "left")  # lo >= v from a2 on
                b2 = hi.search(v, "right")  # hi <= v before b2
                if a2 < b2:
                    exact[a2] += 1
                    exact[b2] -= 1
            return (lo.from_ascending(np.cumsum(hits[:-1]) > 0),
                    lo.from_ascending(np.cumsum(exact[:-1]) > 0))
        # Each page's bounds searched in the sorted keys: O(pages * log keys).
        lo_v, hi_v = lo.values, hi.values
        # Mixed int64 / uint64 / float64 would meet in float64 and lose precision.
        if numeric:
            first = np.searchsorted(arr, lo_v, side="left")
            count = np.searchsorted(arr, hi_v, side="right") - first
        else:
            lo_l, hi_l = lo.as_list(), hi.as_list()
            first = np.fromiter((bisect.bisect_left(values, x) for x in lo_l), np.int64,
                                count=k.size)
            count = np.fromiter((bisect.bisect_right(values, x) for x in hi_l), np.int64,
                                count=k.size) - first
        hit = count > 0
        if lo_v.dtype != object:
            same = np.asarray(lo_v == hi_v, dtype=bool)
        else:
            same = np.fromiter((a == b for a, b in zip(lo.as_list(), hi.as_list(), strict=True)),
                               dtype=bool, count=k.size)
        return hit, hit & same

    # ------------------------------------------------------------ rows

    def rows_for(self, matches: npt.ArrayLike) -> Selection:
        """Rows of the pages that may match, and of those that all match."""
        m = np.asarray(matches, dtype=np.int8)
        if m.shape != (self.num_pages,):
            raise ValueError(f"{m.size} answers for {self.num_pages} pages")
        maybe = RowRanges.from_pages(self.first_rows, self.row_counts, np.flatnonzero(m != _NONE))
        all_ = RowRanges.from_pages(self.first_rows, self.row_counts, np.flatnonzero(m == _ALL))
        return Selection(maybe, all_)

    def select(self, op: LeafOp, keys: tuple[Any, ...] = (), *,
               strategy: Strategy = "auto") -> Selection:
        """``rows_for(matching_pages(op, keys))``."""
        return self.rows_for(self.matching_pages(op, keys, strategy=strategy))


def _first_rows(oi: OffsetIndex, num_rows: int, column: str) -> IntArray:
    locs = oi.page_locations or []
    firsts = [loc.first_row_index for loc in locs]
    if not firsts or any(f is None for f in firsts):
        raise CorruptFileError("offset index lists no pages or lacks first rows", column=column)
    arr = np.array(firsts, dtype=np.int64)
    if arr[0] != 0 or np.any(np.diff(arr) <= 0) or arr[-1] >= max(num_rows, 1):
        raise CorruptFileError(
            f"offset index first rows {arr.tolist()[:8]} do not increase from 0 "
            f"within {num_rows} rows", column=column)
    return arr


def _decode_keys(ci: ColumnIndex, leaf: LeafColumn, order: BoundOrder, null_pages: BoolArray,
                 direction: BoundaryOrder) -> tuple[_Keys, BoolArray, BoolArray]:
    """Bound keys of every non-null page of a valid ColumnIndex; (keys, usable, all_nan)."""
    n = null_pages.size
    usable = np.zeros(n, dtype=bool)
    all_nan = np.zeros(n, dtype=bool)
    nonnull = np.flatnonzero(~null_pages).astype(np.int64)
    lo: npt.NDArray[Any]
    hi: npt.NDArray[Any]
    if order.comparison is None:
        lo = hi = np.empty(0, dtype=np.int64)
        nonnull = nonnull[:0]
    elif (fast := _numeric_bounds(ci, nonnull, order)) is not None:
        lo, hi = fast
        ok = np.ones(nonnull.size, dtype=bool)
        if lo.dtype.kind == "f":
            ok = ~np.isnan(lo) & ~np.isnan(hi)  # a NaN bound under TYPE_ORDER says nothing
        lo, hi, nonnull = lo[ok], hi[ok], nonnull[ok]
    elif (raw_keys := _bytes_bounds(ci, nonnull, leaf, order)) is not None:
        nonnull, lo, hi = raw_keys
    else:
        pages, los, his = [], [], []
        for p in nonnull.tolist():
            b = page_bounds(ci, leaf, p)
            if b.all_nan:
                all_nan[p] = True
            if not b.usable or b.min is None or b.max is None:
                continue
            lo_k, hi_k = order.key(b.min), order.key(b.max)
            if order.comparison == Comparison.FLOAT_TOTAL:
                # totalOrder separates -0.0 from +0.0; SQL does not: cover both zeros.
                if lo_k in (_NEG_ZERO_KEY, _POS_ZERO_KEY):
                    lo_k = _NEG_ZERO_KEY
                if hi_k in (_NEG_ZERO_KEY, _POS_ZERO_KEY):
                    hi_k = _POS_ZERO_KEY
            pages.append(p)
            los.append(lo_k)
            his.append(hi_k)
        nonnull = np.array(pages, dtype=np.int64)
        lo, hi = _as_key_array(los), _as_key_array(his)
    usable[nonnull] = True
    ordered = direction != BoundaryOrder.UNORDERED
    desc = direction == BoundaryOrder.DESCENDING
    keys = _Keys(nonnull, _Side(lo, desc), _Side(hi, desc), ordered)
    return keys, usable, all_nan
