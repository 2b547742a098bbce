"""The executor's row cutting (pqindex.scan.cut) against plain Python row lists: cutting
wanted rows out of decoded pages by slices, by one take and by a mask, and the ranges
a predicate's mask or row numbers give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pqindex
from pqindex.format.row_ranges import RowRanges
from pqindex.scan import cut as cut_mod
from pqindex.scan import encoded
from pqindex.scan.cut import cut, matched_ranges, ranges_from_indices

# The page-by-page flow's machinery, on small files: none of their row groups is
# read whole and filtered instead (conftest.page_by_page).
pytestmark = pytest.mark.usefixtures("page_by_page")


@st.composite
def _pages_and_rows(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, list[int], list[int]]:
    """Pages (first row, count) of a row group, some of them chosen (consecutive or
    not), and sorted wanted rows inside the chosen pages: sparse or dense."""
    counts = draw(st.lists(st.integers(1, 40), min_size=1, max_size=8))
    firsts = np.cumsum([0, *counts[:-1]]).astype(np.int64)
    chosen = sorted(draw(st.sets(st.integers(0, len(counts) - 1), min_size=1)))
    rows_in = [r for p in chosen for r in range(int(firsts[p]), int(firsts[p]) + counts[p])]
    density = draw(st.sampled_from([0.02, 0.3, 0.9, 1.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    keep = np.random.default_rng(seed).random(len(rows_in)) < density
    wanted = [r for r, k in zip(rows_in, keep, strict=True) if k]
    return firsts[chosen], np.array([counts[p] for p in chosen], dtype=np.int64), rows_in, wanted


@settings(max_examples=300, deadline=None)
@given(_pages_and_rows(), st.sampled_from(["int64", "dictionary", "chunked"]), st.booleans())
def test_cut_takes_exactly_the_wanted_rows(
    case: tuple[np.ndarray, np.ndarray, list[int], list[int]], kind: str, few_slices: bool,
) -> None:
    """Every path of ``cut`` (slices, take, mask) returns the wanted rows in order."""
    firsts, counts, rows_in, wanted = case
    if not wanted:
        return
    values = pa.array(rows_in, pa.int64())
    if kind == "dictionary":
        values = pa.array([f"v{r % 5}" for r in rows_in]).dictionary_encode()
    arr: pa.Array | pa.ChunkedArray = values
    if kind == "chunked":
        half = len(values) // 2
        arr = pa.chunked_array([values.slice(0, half), values.slice(half)])
    rows = RowRanges.from_mask(np.isin(np.arange(max(rows_in) + 1), wanted))
    with pytest.MonkeyPatch.context() as mp:
        if not few_slices:
            mp.setattr(cut_mod, "_MAX_SLICES", 0)  # the take and mask paths
        got = cut(arr, firsts, counts, rows)
    pos = {r: i for i, r in enumerate(rows_in)}
    want = values.take(pa.array([pos[r] for r in wanted]))
    got_list = got.to_pylist()
    assert got_list == want.to_pylist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([True, False, None]), min_size=1, max_size=200),
       st.lists(st.tuples(st.integers(0, 30), st.integers(1, 30)), min_size=1, max_size=4))
def test_matched_ranges_are_the_true_rows(mask: list[bool | None],
                                          gaps: list[tuple[int, int]]) -> None:
    """The rows of ``rows`` where the mask is true (NULL false), for one run of rows
    (built from the mask) and several (row numbers)."""
    runs, at = [], 0
    for gap, length in gaps:
        runs.append((at + gap, at + gap + length))
        at += gap + length
    for rows in [RowRanges.full(len(mask)).shift(3), RowRanges.from_intervals(runs)]:
        n = rows.count()
        m = (mask * (n // len(mask) + 1))[:n]
        got = matched_ranges(rows, pa.array(m, pa.bool_()))
        idx = rows.to_indices()
        want = [int(idx[i]) for i, v in enumerate(m) if v]
        assert got.to_indices().tolist() == want


@given(st.sets(st.integers(0, 299)))
def test_ranges_from_indices(idx: set[int]) -> None:
    a = np.array(sorted(idx), dtype=np.int64)
    got = ranges_from_indices(a)
    assert got.to_indices().tolist() == sorted(idx)
    assert got.count() == len(idx)


# ---------------------------------------------------------------- through the scanner


@pytest.fixture(scope="module")
def dictionary_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    """Dictionary-encoded strings (with nulls) in front of plain and dictionary numbers,
    pages of uneven sizes in each column, so that chosen pages do not line up."""
    rng = np.random.default_rng(31)
    n = 30_000
    cats = np.array([f"c{i:02d}" for i in range(40)] + ["rare"])
    weights = np.linspace(1, 3, 40)
    idx = rng.choice(40, n, p=weights / weights.sum())
    idx[rng.choice(n, 5, replace=False)] = 40
    category = pa.array(cats[idx], mask=rng.random(n) < 0.05)
    table = pa.table({
        "id": np.arange(n, dtype=np.int64),
        "category": category,
        "small": rng.integers(0, 7, n).astype(np.int32),
        "amount": np.round(rng.random(n) * 100, 2),
    })
    path = tmp_path_factory.mktemp("cut") / "dict.parquet"
    pq.write_table(table, path, compression="snappy", write_page_index=True,
                   row_group_size=12_000, data_page_size=2_000, use_dictionary=["category",
                                                                                "small"])
    return path, table


@pytest.mark.parametrize("k", [0, 1, 5, 20, 39, 40])
@pytest.mark.parametrize("columns", [["id", "category"], ["category"],
                                     ["category", "small", "amount"]])
def test_a_returned_dictionary_predicate_column_at_every_density(
    dictionary_file: tuple[Path, pa.Table], k: int, columns: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``category IN (k values)`` (plus the rare one) with ``category`` returned: the
    predicate runs on the dictionary pages, the rows come out as pyarrow's filter gives
    them, from sparse (only the rare rows) to nearly every row; the cuts by mask are
    used where many rows match (k >= 5: over 1/32 of the rows), not where few do."""
    path, table = dictionary_file
    values = [f"c{i:02d}" for i in range(k)] + ["rare"]
    where = "category IN (" + ", ".join(f"'{v}'" for v in values) + ")"
    masks = []
    span_mask = RowRanges.span_mask

    def spy(self: RowRanges, start: int, n: int) -> np.ndarray:
        masks.append(n)
        return span_mask(self, start, n)

    matched: list[bool] = []

    def spied(fn: Any) -> Any:
        def spy_match(*a: Any, **kw: Any) -> Any:
            out = fn(*a, **kw)
            matched.append(out is not None)
            return out
        return spy_match

    monkeypatch.setattr(RowRanges, "span_mask", spy)
    for name in ("matching_rows", "matching_page_rows"):
        monkeypatch.setattr(encoded, name, spied(getattr(encoded, name)))
    got = pqindex.dataset(str(path)).scan(columns=columns, where=where).to_table()
    ref = table.filter(pc.is_in(table.column("category"), pa.array(values)))
    assert got.num_rows == ref.num_rows
    assert got.sort_by("category").select(columns).equals(
        ref.select(columns).sort_by("category")) if "id" not in columns else got.equals(
        ref.select(columns))
    assert any(matched)  # on the dictionary pages, though the column is returned
    if k >= 5:
        assert masks
    elif k <= 1:
        assert not masks


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.one_of(st.booleans(), st.none()), max_size=300),
       start=st.integers(0, 20), length=st.integers(0, 300))
def test_mask_bools_is_the_mask_with_nulls_false(values: list[bool | None], start: int,
                                                 length: int) -> None:
    """Unpacked from the bitmap, at any offset of a slice: pyarrow's own values."""
    from pqindex.expr.evaluate import mask_bools

    mask = pa.array(values, pa.bool_()).slice(start, length)
    want = np.array([bool(v) for v in mask.to_pylist()], dtype=bool)
    got = mask_bools(mask)
    assert got.dtype == np.bool_ and np.array_equal(got, want)
