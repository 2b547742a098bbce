"""RowRanges and Selection against a plain Python set of row numbers."""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pqindex.format.row_ranges import RowRanges, Selection

N = 64  # universe of rows for the randomized tests

intervals = st.lists(
    st.tuples(st.integers(0, N), st.integers(0, N)), max_size=12
)


def as_set(pairs: list[tuple[int, int]]) -> set[int]:
    return {r for s, e in pairs for r in range(s, e)}


def rows(rr: RowRanges) -> set[int]:
    return as_set(rr.intervals())


def check_normal(rr: RowRanges) -> None:
    """Sorted, non-empty, disjoint and non-adjacent."""
    pairs = rr.intervals()
    assert all(s < e for s, e in pairs), pairs
    assert all(e < s2 for (_, e), (s2, _) in itertools.pairwise(pairs)), pairs


# ---------------------------------------------------------------- examples


def test_from_intervals_merges_overlapping_and_adjacent() -> None:
    rr = RowRanges.from_intervals([(10, 12), (0, 3), (3, 5), (4, 7), (12, 12), (9, 10)])
    assert rr.intervals() == [(0, 7), (9, 12)]
    assert len(rr) == 2
    assert rr.count() == 10


def test_empty_and_full() -> None:
    assert RowRanges.empty().is_empty
    assert RowRanges.full(0).is_empty
    assert RowRanges.full(5).intervals() == [(0, 5)]
    assert not RowRanges.full(5).is_empty
    with pytest.raises(ValueError):
        RowRanges.full(-1)


def test_constructor_rejects_unnormalized_intervals() -> None:
    with pytest.raises(ValueError):
        RowRanges([0, 3], [3, 5])  # adjacent: must have been merged
    with pytest.raises(ValueError):
        RowRanges([4], [4])  # empty
    assert RowRanges([0, 4], [3, 5]).intervals() == [(0, 3), (4, 5)]


def test_immutable() -> None:
    rr = RowRanges.full(3)
    with pytest.raises(AttributeError):
        rr._starts = np.array([1])
    with pytest.raises(ValueError):
        rr.starts[0] = 1


def test_from_pages_and_overlapping_pages() -> None:
    # Pages of 5 rows over 30 rows: [0,5) [5,10) ... [25,30).
    first = np.arange(0, 30, 5)
    counts = np.full(6, 5)
    rr = RowRanges.from_pages(first, counts, [1, 2, 4])
    assert rr.intervals() == [(5, 15), (20, 25)]
    # Another column's pages: [0,3) [3,11) [11,20) [20,29) [29,30).
    other = np.array([0, 3, 11, 20, 29])
    assert rr.overlapping_pages(other, 30).tolist() == [1, 2, 3]
    assert RowRanges.from_intervals([(29, 30)]).overlapping_pages(other, 30).tolist() == [4]
    assert RowRanges.empty().overlapping_pages(other, 30).tolist() == []


def test_overlaps_is_half_open() -> None:
    rr = RowRanges.from_intervals([(5, 10), (20, 25)])
    assert rr.overlaps(9, 11)
    assert not rr.overlaps(10, 20), "[10, 20) lies in the gap: 10 is an end, 20 a start"
    assert rr.overlaps(0, 6)
    assert not rr.overlaps(0, 5), "5 is not < 5"
    assert not rr.overlaps(7, 7), "an empty query overlaps nothing"
    assert not rr.overlaps(25, 100)
    assert rr.contains(24) and not rr.contains(25)


def test_mask_indices_shift_repr_pickle() -> None:
    rr = RowRanges.from_intervals([(1, 3), (5, 6)])
    assert rr.to_mask(7).tolist() == [False, True, True, False, False, True, False]
    assert rr.to_indices().tolist() == [1, 2, 5]
    assert rr.shift(100).intervals() == [(101, 103), (105, 106)]
    assert repr(rr) == "RowRanges([1, 3), [5, 6))"
    assert pickle.loads(pickle.dumps(rr)) == rr
    assert hash(rr) == hash(RowRanges.from_intervals([(5, 6), (1, 3)]))
    with pytest.raises(ValueError):
        rr.to_mask(5)


def test_selection_rejects_all_outside_maybe() -> None:
    with pytest.raises(ValueError):
        Selection(RowRanges.full(3), RowRanges.from_intervals([(2, 4)]))
    maybe, all_ = Selection.unknown(4)
    assert maybe == RowRanges.full(4) and all_.is_empty
    assert Selection.everything(4).uncertain.is_empty
    assert Selection.none().maybe.is_empty
    sel = Selection(RowRanges.from_intervals([(0, 9)]), RowRanges.from_intervals([(2, 4)]))
    assert pickle.loads(pickle.dumps(sel)) == sel
    assert sel.uncertain.intervals() == [(0, 2), (4, 9)]


# ---------------------------------------------------------------- against sets


@given(intervals)
def test_normalization(pairs: list[tuple[int, int]]) -> None:
    rr = RowRanges.from_intervals(pairs)
    check_normal(rr)
    assert rows(rr) == as_set(pairs)
    assert rr.count() == len(as_set(pairs))
    assert rr.is_empty == (not as_set(pairs))


@given(intervals, intervals)
def test_count_is_kept_per_value_and_never_shared(a: list[tuple[int, int]],
                                                  b: list[tuple[int, int]]) -> None:
    """count() is computed once per value (the scanner asks it often): results of
    operations, pickled copies and the shared empty value each count their own rows."""
    ra, rb = RowRanges.from_intervals(a), RowRanges.from_intervals(b)
    assert ra.count() == ra.count() == len(as_set(a))
    for got, want in ((ra | rb, as_set(a) | as_set(b)), (ra - rb, as_set(a) - as_set(b)),
                      (ra.complement(N), set(range(N)) - as_set(a))):
        assert got.count() == len(want)
    copy = pickle.loads(pickle.dumps(ra))
    assert copy.count() == ra.count() and copy == ra
    assert RowRanges.empty().count() == 0 and RowRanges.full(N).count() == N


@given(intervals, intervals)
def test_union_intersection_difference(a: list[tuple[int, int]],
                                       b: list[tuple[int, int]]) -> None:
    ra, rb = RowRanges.from_intervals(a), RowRanges.from_intervals(b)
    sa, sb = as_set(a), as_set(b)
    for got, want in ((ra | rb, sa | sb), (ra & rb, sa & sb), (ra - rb, sa - sb)):
        check_normal(got)
        assert rows(got) == want
    assert ra | rb == rb | ra
    assert ra & rb == rb & ra


@given(intervals, st.integers(0, N + 5))
def test_complement(a: list[tuple[int, int]], n: int) -> None:
    got = RowRanges.from_intervals(a).complement(n)
    check_normal(got)
    assert rows(got) == set(range(n)) - as_set(a)


@given(intervals, st.integers(0, N), st.integers(0, N))
def test_overlaps(a: list[tuple[int, int]], start: int, end: int) -> None:
    assert RowRanges.from_intervals(a).overlaps(start, end) == bool(
        as_set(a) & set(range(start, end)))


@given(st.lists(st.booleans(), max_size=N))
def test_mask_round_trip(mask: list[bool]) -> None:
    rr = RowRanges.from_mask(mask)
    check_normal(rr)
    assert rows(rr) == {i for i, m in enumerate(mask) if m}
    assert rr.to_mask(len(mask)).tolist() == mask
    assert rr.to_indices().tolist() == [i for i, m in enumerate(mask) if m]


@given(intervals, st.integers(-N, N))
def test_shift(a: list[tuple[int, int]], k: int) -> None:
    assert rows(RowRanges.from_intervals(a).shift(k)) == {r + k for r in as_set(a)}


page_layouts = st.lists(st.integers(1, 9), min_size=1, max_size=10)


@given(page_layouts, st.data())
def test_pages(sizes: list[int], data: st.DataObject) -> None:
    first = np.cumsum([0, *sizes[:-1]])
    total = sum(sizes)
    chosen = data.draw(st.lists(st.integers(0, len(sizes) - 1), max_size=len(sizes)))
    rr = RowRanges.from_pages(first, sizes, chosen)
    page_rows = [set(range(f, f + s)) for f, s in zip(first.tolist(), sizes, strict=True)]
    assert rows(rr) == set().union(*(page_rows[i] for i in chosen))
    query = RowRanges.from_intervals(data.draw(intervals))
    want = [i for i, pr in enumerate(page_rows) if pr & rows(query)]
    assert query.overlapping_pages(first, total).tolist() == want


@settings(max_examples=200, deadline=None)  # shared machines: no per-example deadline
@given(intervals, intervals, intervals, intervals)
def test_selection_three_valued(ma: list[tuple[int, int]], aa: list[tuple[int, int]],
                                mb: list[tuple[int, int]], ab: list[tuple[int, int]]) -> None:
    """Rows are TRUE (in all), UNKNOWN (maybe only) or FALSE; & and | follow Kleene logic."""
    def sel(m: list[tuple[int, int]], a: list[tuple[int, int]]) -> Selection:
        maybe = RowRanges.from_intervals(m) | RowRanges.from_intervals(a)
        return Selection(maybe, RowRanges.from_intervals(a))

    def truth(s: Selection, r: int) -> int:  # 0 false, 1 unknown, 2 true
        return 2 if s.all.contains(r) else 1 if s.maybe.contains(r) else 0

    x, y = sel(ma, aa), sel(mb, ab)
    for r in range(N):
        assert truth(x & y, r) == min(truth(x, r), truth(y, r))
        assert truth(x | y, r) == max(truth(x, r), truth(y, r))


@given(intervals, st.integers(-5, N), st.integers(0, N + 5))
def test_span_mask_is_the_mask_of_the_span(a: list[tuple[int, int]], start: int, n: int) -> None:
    r = RowRanges.from_intervals(a)
    want = np.array([r.contains(start + i) for i in range(n)], dtype=bool)
    got = r.span_mask(start, n)
    assert got.dtype == bool and np.array_equal(got, want)
    assert np.array_equal(r.span_mask(start, n), want)  # the kept one, asked again
    assert not got.flags.writeable


@given(st.lists(st.booleans(), max_size=N), st.integers(-N, N), st.integers(-5, N))
def test_a_mask_kept_from_from_mask_survives_shift(mask: list[bool], k: int, start: int
                                                   ) -> None:
    """from_mask keeps its mask for span_mask; shift moves it; a span that differs from
    the kept one is computed afresh."""
    m = np.array(mask, dtype=bool)
    r = RowRanges.from_mask(m)
    m[:] = False  # the caller's array changing afterwards changes nothing
    moved = r.shift(k)
    assert moved == RowRanges.from_intervals((s + k, e + k) for s, e in r.intervals())
    for span in [(k, len(mask)), (start, len(mask)), (start, 3)]:
        want = np.array([moved.contains(span[0] + i) for i in range(span[1])], dtype=bool)
        assert np.array_equal(moved.span_mask(*span), want), span


def _questions(other: RowRanges, first_rows: np.ndarray, total: int
               ) -> list[Callable[[RowRanges], object]]:
    return [lambda r: (r | other).intervals(), lambda r: (other | r).intervals(),
            lambda r: (r & other).intervals(), lambda r: (r - other).intervals(),
            lambda r: (other - r).intervals(), lambda r: r.count(), lambda r: len(r),
            lambda r: r.is_empty, lambda r: r.first(), lambda r: r.last(),
            lambda r: r.to_indices().tolist(),
            lambda r: r.overlapping_pages(first_rows, total).tolist(),
            lambda r: r.span_mask(0, total).tolist(), lambda r: r.to_mask(total).tolist(),
            lambda r: r.shift(3).intervals(), lambda r: r.shift(-1).span_mask(0, 4).tolist(),
            lambda r: r.contains(5), lambda r: hash(r), lambda r: repr(r)]


@given(st.lists(st.booleans(), max_size=N), st.integers(0, 10), intervals, page_layouts)
def test_lazy_ranges_answer_as_built_ones(mask: list[bool], first: int,
                                          other: list[tuple[int, int]], sizes: list[int]
                                          ) -> None:
    """A RowRanges kept as a mask or as row numbers (intervals built only when asked)
    answers every question as the same rows built eagerly; each question asked of a
    fresh one, so none depends on another having built the intervals first."""
    m = np.array(mask, dtype=bool)
    idx = np.flatnonzero(m).astype(np.int64) + first
    idx.flags.writeable = False
    eager = RowRanges.from_intervals((int(i), int(i) + 1) for i in idx)
    firsts = np.cumsum([0, *sizes[:-1]])
    total = max(sum(sizes), len(mask) + first)
    questions = _questions(RowRanges.from_intervals(other), firsts, total)
    makers = [lambda: RowRanges.lazy_from_mask(m.copy(), first),
              lambda: RowRanges.lazy_from_indices(idx)]
    for make in makers:
        for k, ask in enumerate(questions):
            assert ask(make()) == ask(eager), k
        lazy = make()
        assert lazy == eager and pickle.loads(pickle.dumps(lazy)) == eager
        check_normal(lazy)
