"""Row ranges: which rows of a row group a plan still has to look at.

``RowRanges`` is a sorted list of disjoint, non-adjacent, half-open intervals
``[start, end)`` of row numbers, kept in two int64 numpy arrays. Every pruning
level produces one; AND intersects them, OR unites them, and the read plan asks
which pages of a column overlap them.

``Selection`` pairs the rows that may match with the rows that surely match,
the three-valued answer of a predicate over a row group.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["RowRanges", "Selection"]

IntArray = npt.NDArray[np.int64]


def _frozen(a: npt.ArrayLike) -> IntArray:
    if isinstance(a, np.ndarray) and a.dtype == np.int64 and a.ndim == 1 and (
        not a.flags.writeable and a.base is None
    ):
        return a  # already frozen and owning its memory: nobody can change it
    out = np.array(a, dtype=np.int64, copy=True).reshape(-1)
    out.flags.writeable = False
    return out


def _normalize(starts: IntArray, ends: IntArray) -> tuple[IntArray, IntArray]:
    """Sort, drop empty intervals, merge overlapping and adjacent ones."""
    keep = starts < ends
    starts, ends = starts[keep], ends[keep]
    if starts.size == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    # A new interval begins where the start lies past everything seen so far;
    # `>` (not `>=`) merges adjacent intervals too.
    begins = np.empty(starts.size, dtype=bool)
    begins[0] = True
    begins[1:] = starts[1:] > reach[:-1]
    idx = np.flatnonzero(begins)
    return starts[idx], np.maximum.reduceat(ends, idx)


class RowRanges:
    """Immutable, sorted, disjoint, non-adjacent half-open row intervals."""

    __slots__ = ("_count", "_e", "_indices", "_lazy", "_mask", "_s")

    _s: IntArray  # the starts, see _starts
    _e: IntArray
    _count: int  # set on the first count(): the scanner asks many times per row group
    _mask: tuple[int, int, Any]  # the last span_mask: every returned column asks for it
    _indices: IntArray  # set on the first to_indices(): asked once per returned column
    # (first row, mask) or (0, row numbers) the intervals are worked out from when first
    # asked (lazy): a scan that only counts the rows and cuts by the mask or the row
    # numbers never needs them (TPC-H Q4: ~230k intervals per row group).
    _lazy: tuple[int, Any]

    def __init__(self, starts: npt.ArrayLike, ends: npt.ArrayLike) -> None:
        """Wrap intervals that are already normalized; use ``from_intervals`` otherwise."""
        s, e = _frozen(starts), _frozen(ends)
        if s.shape != e.shape:
            raise ValueError(f"{s.size} starts for {e.size} ends")
        if s.size and (np.any(s >= e) or np.any(s[1:] <= e[:-1])):
            raise ValueError("intervals are not sorted, disjoint, non-adjacent and non-empty")
        object.__setattr__(self, "_s", s)
        object.__setattr__(self, "_e", e)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("RowRanges is immutable")

    # ------------------------------------------------------------ construction

    @classmethod
    def _trusted(cls, starts: IntArray, ends: IntArray) -> RowRanges:
        out = cls.__new__(cls)
        object.__setattr__(out, "_s", _frozen(starts))
        object.__setattr__(out, "_e", _frozen(ends))
        return out

    @classmethod
    def lazy_from_mask(cls, mask: npt.NDArray[np.bool_], first: int = 0) -> RowRanges:
        """The rows ``first + i`` where the read-only ``mask[i]`` is true, kept as the
        mask: the intervals, and the row numbers, are worked out only if asked."""
        if mask.flags.writeable:
            mask = mask.copy()
            mask.flags.writeable = False
        out = cls.__new__(cls)
        object.__setattr__(out, "_lazy", (first, mask))
        object.__setattr__(out, "_count", int(np.count_nonzero(mask)))
        object.__setattr__(out, "_mask", (first, mask.size, mask))
        return out

    @classmethod
    def lazy_from_indices(cls, idx: IntArray) -> RowRanges:
        """The rows of sorted, unique, read-only int64 row numbers ``idx``, kept as
        they are: the intervals are worked out only if asked."""
        out = cls.__new__(cls)
        object.__setattr__(out, "_lazy", (0, None))
        object.__setattr__(out, "_indices", idx)
        object.__setattr__(out, "_count", int(idx.size))
        return out

    def _build(self) -> None:
        """The intervals of a lazy one (see lazy_from_mask, lazy_from_indices)."""
        first, mask = self._lazy
        if mask is not None:
            edges = np.diff(np.concatenate(([False], mask, [False])).astype(np.int8))
            starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
            if first:
                starts += first
                ends += first
        elif self._indices.size == 0:
            starts = ends = np.empty(0, dtype=np.int64)
        else:
            idx = self._indices
            breaks = np.flatnonzero(np.diff(idx) != 1) + 1
            starts = idx[np.concatenate(([0], breaks))]
            ends = idx[np.concatenate((breaks - 1, [idx.size - 1]))] + 1
        object.__setattr__(self, "_s", _frozen(starts))
        object.__setattr__(self, "_e", _frozen(ends))

    @property
    def _starts(self) -> IntArray:
        try:
            return self._s
        except AttributeError:
            self._build()
            return self._s

    @property
    def _ends(self) -> IntArray:
        try:
            return self._e
        except AttributeError:
            self._build()
            return self._e

    @classmethod
    def empty(cls) -> RowRanges:
        """No rows."""
        return _EMPTY

    @classmethod
    def full(cls, n: int) -> RowRanges:
        """Rows ``[0, n)``."""
        if n < 0:
            raise ValueError(f"negative row count {n}")
        if n == 0:
            return cls.empty()
        bounds = _FULL.get(n)
        if bounds is None:  # read-only arrays, shared (planning asks per row group)
            bounds = (_frozen(np.array([0])), _frozen(np.array([n])))
            if len(_FULL) < _FULL_KEPT:
                _FULL[n] = bounds
        out = cls.__new__(cls)  # its own object: its lazily kept masks are per use
        object.__setattr__(out, "_s", bounds[0])
        object.__setattr__(out, "_e", bounds[1])
        return out

    @classmethod
    def from_intervals(cls, intervals: Iterable[tuple[int, int]]) -> RowRanges:
        """Any ``(start, end)`` pairs: sorted, empty ones dropped, touching ones merged."""
        pairs = np.array(list(intervals), dtype=np.int64).reshape(-1, 2)
        return cls._trusted(*_normalize(pairs[:, 0], pairs[:, 1]))

    @classmethod
    def from_mask(cls, mask: npt.ArrayLike) -> RowRanges:
        """The rows where a boolean mask is true."""
        m = np.asarray(mask, dtype=bool).reshape(-1)
        edges = np.diff(np.concatenate(([False], m, [False])).astype(np.int8))
        out = cls._trusted(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1))
        if m.flags.writeable:
            m = m.copy()
            m.flags.writeable = False
        object.__setattr__(out, "_mask", (0, m.size, m))  # span_mask(0, n) is the mask
        return out

    @classmethod
    def from_pages(
        cls,
        page_first_rows: npt.ArrayLike,
        page_row_counts: npt.ArrayLike,
        page_indices: npt.ArrayLike,
    ) -> RowRanges:
        """The rows of the chosen pages, given each page's first row and row count."""
        first = np.asarray(page_first_rows, dtype=np.int64)
        counts = np.asarray(page_row_counts, dtype=np.int64)
        idx = np.asarray(page_indices, dtype=np.int64).reshape(-1)
        starts = first[idx]
        return cls._trusted(*_normalize(starts, starts + counts[idx]))

    # ------------------------------------------------------------ access

    @property
    def starts(self) -> IntArray:
        """Interval starts (read-only)."""
        return self._starts

    @property
    def ends(self) -> IntArray:
        """Interval ends, exclusive (read-only)."""
        return self._ends

    def intervals(self) -> list[tuple[int, int]]:
        """The intervals as ``(start, end)`` pairs of Python ints."""
        return list(zip(self._starts.tolist(), self._ends.tolist(), strict=True))

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(self.intervals())

    def __len__(self) -> int:
        """Number of intervals (``count()`` is the number of rows)."""
        try:
            return int(self._s.size)
        except AttributeError:
            pass
        _first, mask = self._lazy  # counted without building them
        if mask is not None:
            if mask.size == 0:
                return 0
            return int(mask[0]) + int(np.count_nonzero(mask[1:] > mask[:-1]))
        idx = self._indices
        return int(idx.size > 0) + int(np.count_nonzero(np.diff(idx) != 1))

    @property
    def is_empty(self) -> bool:
        try:
            return self._count == 0
        except AttributeError:
            return self._starts.size == 0

    def count(self) -> int:
        """Number of rows covered."""
        try:
            return self._count
        except AttributeError:
            if self._starts.size == 1:  # the usual case, without numpy's reduction
                n = int(self._ends[0]) - int(self._starts[0])
            else:
                n = int((self._ends - self._starts).sum())
            object.__setattr__(self, "_count", n)
            return n

    def first(self) -> int | None:
        """The first row, None when empty."""
        return None if self.is_empty else int(self._starts[0])

    def last(self) -> int | None:
        """One past the last row, None when empty."""
        return None if self.is_empty else int(self._ends[-1])

    # ------------------------------------------------------------ algebra

    def union(self, other: RowRanges) -> RowRanges:
        """Rows in either."""
        if self.is_empty:
            return other
        if other.is_empty:
            return self
        return RowRanges._trusted(*_normalize(
            np.concatenate((self._starts, other._starts)),
            np.concatenate((self._ends, other._ends))))

    def intersection(self, other: RowRanges) -> RowRanges:
        """Rows in both."""
        a, b = self, other
        if a.is_empty or b.is_empty:
            return RowRanges.empty()
        if a is b:
            return a  # (a row group's live rows as both its maybe and all rows)
        # For each interval of a, the intervals of b it overlaps form a run
        # [lo, hi) of b; pieces come out sorted, and stay non-adjacent because the
        # gaps of a and of b both survive.
        lo = np.searchsorted(b._ends, a._starts, side="right")
        hi = np.searchsorted(b._starts, a._ends, side="left")
        n = np.maximum(hi - lo, 0)
        total = int(n.sum())
        if total == 0:
            return RowRanges.empty()
        ai = np.repeat(np.arange(a._starts.size), n)
        offsets = np.arange(total) - np.repeat(np.cumsum(n) - n, n)
        bi = np.repeat(lo, n) + offsets
        starts = np.maximum(a._starts[ai], b._starts[bi])
        ends = np.minimum(a._ends[ai], b._ends[bi])
        return RowRanges._trusted(starts, ends)

    def _gaps(self, lo: int, hi: int) -> RowRanges:
        """Rows of ``[lo, hi)`` not in these ranges."""
        if lo >= hi:
            return RowRanges.empty()
        inside = self.intersection(RowRanges._trusted(np.array([lo]), np.array([hi])))
        starts = np.concatenate(([lo], inside._ends))
        ends = np.concatenate((inside._starts, [hi]))
        keep = starts < ends
        return RowRanges._trusted(starts[keep], ends[keep])

    def complement(self, n: int) -> RowRanges:
        """Rows of ``[0, n)`` not in these ranges."""
        return self._gaps(0, n)

    def difference(self, other: RowRanges) -> RowRanges:
        """Rows in these ranges and not in ``other``."""
        if self.is_empty or other.is_empty:
            return self
        if other is self:
            return RowRanges.empty()
        return self.intersection(other._gaps(int(self._starts[0]), int(self._ends[-1])))

    def __and__(self, other: RowRanges) -> RowRanges:
        return self.intersection(other)

    def __or__(self, other: RowRanges) -> RowRanges:
        return self.union(other)

    def __sub__(self, other: RowRanges) -> RowRanges:
        return self.difference(other)

    def shift(self, offset: int) -> RowRanges:
        """Every row moved by ``offset`` (row-group rows to file rows, for instance)."""
        lazy = getattr(self, "_lazy", None)
        if lazy is not None and lazy[1] is not None and not hasattr(self, "_s"):
            return RowRanges.lazy_from_mask(lazy[1], lazy[0] + offset)
        out = RowRanges._trusted(self._starts + offset, self._ends + offset)
        try:
            start, n, mask = self._mask
        except AttributeError:
            return out
        object.__setattr__(out, "_mask", (start + offset, n, mask))
        return out

    # ------------------------------------------------------------ lookups

    def overlaps(self, start: int, end: int) -> bool:
        """Whether any row of ``[start, end)`` is in these ranges (bisection)."""
        if start >= end:
            return False
        i = int(np.searchsorted(self._ends, start, side="right"))
        return i < self._starts.size and int(self._starts[i]) < end

    def contains(self, row: int) -> bool:
        """Whether ``row`` is in these ranges."""
        return self.overlaps(row, row + 1)

    def overlapping_pages(self, page_first_rows: npt.ArrayLike, total_rows: int) -> IntArray:
        """Indices of the pages holding any of these rows.

        Page ``i`` holds rows ``[page_first_rows[i], page_first_rows[i + 1])``, the
        last page up to ``total_rows`` (the OffsetIndex layout).
        """
        first = np.asarray(page_first_rows, dtype=np.int64).reshape(-1)
        if first.size == 0 or self.is_empty:
            return np.empty(0, dtype=np.int64)
        last = np.concatenate((first[1:], np.array([total_rows], dtype=np.int64)))
        if not hasattr(self, "_s") and self._lazy[1] is None:
            # Row numbers kept, intervals not built: bisected as they are.
            idx = self._indices
            held = np.searchsorted(idx, first) < np.searchsorted(idx, last)
            return np.flatnonzero(held & (first < last)).astype(np.int64)
        i = np.searchsorted(self._ends, first, side="right")
        hit = i < self._starts.size
        hit[hit] = self._starts[i[hit]] < last[hit]
        hit &= first < last
        return np.flatnonzero(hit).astype(np.int64)

    # ------------------------------------------------------------ conversion

    def to_mask(self, n: int) -> npt.NDArray[np.bool_]:
        """A boolean mask of ``n`` rows; ValueError if a range lies outside ``[0, n)``."""
        if not self.is_empty and (self._starts[0] < 0 or self._ends[-1] > n):
            raise ValueError(f"rows [{self.first()}, {self.last()}) do not fit in {n} rows")
        delta = np.zeros(n + 1, dtype=np.int8)
        delta[self._starts] = 1
        delta[self._ends] = -1
        return np.cumsum(delta[:n], dtype=np.int8).astype(bool)

    def span_mask(self, start: int, n: int) -> npt.NDArray[np.bool_]:
        """A boolean mask of rows ``[start, start + n)`` (rows outside ignored),
        for ``filter``: on many short ranges far cheaper than row numbers and ``take``.
        The last one is kept: each returned column cuts the same rows."""
        try:
            known = self._mask
        except AttributeError:
            pass
        else:
            if known[0] == start and known[1] == n:
                return known[2]  # type: ignore[no-any-return]
        lo = int(np.searchsorted(self._ends, start, side="right"))
        hi = int(np.searchsorted(self._starts, start + n, side="left"))
        delta = np.zeros(n + 1, dtype=np.int8)
        # Disjoint, non-adjacent ranges: no start shares a slot with another mark.
        delta[np.clip(self._starts[lo:hi] - start, 0, n)] = 1
        delta[np.clip(self._ends[lo:hi] - start, 0, n)] = -1
        mask = np.cumsum(delta[:n], dtype=np.int8).astype(bool)
        mask.flags.writeable = False
        object.__setattr__(self, "_mask", (start, n, mask))
        return mask

    def to_indices(self) -> IntArray:
        """Every row number, ascending (read-only: kept for the next call)."""
        try:
            return self._indices
        except AttributeError:
            pass
        lazy = getattr(self, "_lazy", None)
        if lazy is not None and lazy[1] is not None:
            out = np.flatnonzero(lazy[1])
            if lazy[0]:
                out += lazy[0]
            out.flags.writeable = False
            object.__setattr__(self, "_indices", out)
            return out
        lengths = self._ends - self._starts
        total = int(lengths.sum())
        if total == 0:
            out = np.empty(0, dtype=np.int64)
        else:
            base = np.repeat(self._starts - (np.cumsum(lengths) - lengths), lengths)
            out = base + np.arange(total, dtype=np.int64)
        out.flags.writeable = False
        object.__setattr__(self, "_indices", out)
        return out

    # ------------------------------------------------------------ identity

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RowRanges):
            return NotImplemented
        return bool(np.array_equal(self._starts, other._starts)
                    and np.array_equal(self._ends, other._ends))

    def __hash__(self) -> int:
        return hash((self._starts.tobytes(), self._ends.tobytes()))

    def __repr__(self) -> str:
        shown = ", ".join(f"[{s}, {e})" for s, e in self.intervals()[:8])
        more = f", … {len(self) - 8} more" if len(self) > 8 else ""
        return f"RowRanges({shown}{more})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Plans travel to Spark executors; rebuild through the checked constructor.
        return (RowRanges, (self._starts.tolist(), self._ends.tolist()))


_EMPTY = RowRanges._trusted(np.empty(0, np.int64), np.empty(0, np.int64))
_FULL: dict[int, tuple[IntArray, IntArray]] = {}
_FULL_KEPT = 4096  # distinct row counts kept; others are built per call


@dataclass(frozen=True, slots=True)
class Selection:
    """Three-valued rows of a predicate: ``maybe`` may match, ``all`` surely match.

    Rows outside ``maybe`` surely do not match (or are NULL). ``all`` is a subset
    of ``maybe``. There is no ``~``: a row outside ``maybe`` may be NULL, and NOT
    NULL is no match either, so NOT is pushed to the leaves instead.
    """

    maybe: RowRanges
    all: RowRanges

    def __post_init__(self) -> None:
        if self.all is self.maybe:  # every row (planned per row group: kept cheap)
            return
        if not self.all.is_empty and (self.all & self.maybe).count() != self.all.count():
            raise ValueError("rows that surely match must be rows that may match")

    @classmethod
    def none(cls) -> Selection:
        """No row matches."""
        return _NONE

    @classmethod
    def unknown(cls, n: int) -> Selection:
        """Every row of ``n`` may match, none surely does."""
        return cls(RowRanges.full(n), RowRanges.empty())

    @classmethod
    def everything(cls, n: int) -> Selection:
        """Every row of ``n`` matches."""
        rows = RowRanges.full(n)
        return cls(rows, rows)

    def __and__(self, other: Selection) -> Selection:
        return Selection(self.maybe & other.maybe, self.all & other.all)

    def __or__(self, other: Selection) -> Selection:
        return Selection(self.maybe | other.maybe, self.all | other.all)

    @property
    def uncertain(self) -> RowRanges:
        """Rows that may match but must still be checked row by row."""
        return self.maybe - self.all

    def __iter__(self) -> Iterator[RowRanges]:
        """Unpacks as ``maybe, all_ = selection``."""
        return iter((self.maybe, self.all))


_NONE = Selection(_EMPTY, _EMPTY)
