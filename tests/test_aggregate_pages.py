"""Aggregates inside partly matching row groups, answered page by page.

The file (``make_table``): 40,000 rows sorted by ``id`` (``id = 3 * row + 7``),
4 row groups of 10,000 rows, 1,000-row pages::

    column  nulls                          embedded zone maps   notes
    ------  -----------------------------  -------------------  ----------------------
    id      none                           no                   the sort key
    ts      3 %                            yes                  timestamp[us, UTC]
    amount  5 %, and all of rows           yes                  float64
            [5,000, 6,000) (page 5 of
            row group 0)
    x       10 %                           no                   int64 (ColumnIndex
                                                                null counts only)
    score   2 %                            yes                  float64, NaN in rows
                                                                12,345-12,346, 31,000
    cat     none                           no                   string

Copies: ``zone_maps`` (``pqindex.write_table`` with zone maps on ts, amount,
score), ``plain`` (``pqindex.write_table``, no embedded index) and
``misaligned`` (pyarrow with 4 kB pages, so no two columns' pages line up, then
``pqindex.add_indexes`` with the same zone maps).

A range on ``id`` makes every page strictly inside the range an ALL page and the
at most two pages where the range starts and ends SOME pages. Answered from
metadata: count(*) (the page's rows), count(col) (zone map, or ColumnIndex
null counts), min / max / sum (zone map, unless the page holds NaN). Read: the
edge pages, and the pages no metadata answers. Every result is compared with
DuckDB.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.dataset.aggregate import _Acc, _pages_inside, parse_aggregations
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.format.row_ranges import RowRanges
from pqindex.scan.executor import ScanOptions

ROWS = 40_000
RG_ROWS = 10_000
PAGE_ROWS = 1_000
NULL_PAGE = (5_000, 6_000)  # amount is null in every row of this page
NAN_ROWS = (12_345, 12_346, 31_000)  # score is NaN here
MAX_ID = 3 * (ROWS - 1) + 7
ZONE_MAPS = ["amount", "ts", "score"]

# Aggregates every page of `all` answers from metadata on the zone_maps copy.
IO_AGGS = [
    "count(*)", "count(amount)", "sum(amount)", "min(amount)", "max(amount)",
    "min(ts)", "max(ts)", "count(ts)", "count(x)",
]  # fmt: skip
# And some that read (no zone map: sum(x), sum(id), min(cat); NaN pages: score).
ALL_AGGS = [
    *IO_AGGS, "sum(x)", "min(x)", "max(x)", "sum(id)", "min(id)", "max(id)",
    "count(score)", "sum(score)", "min(score)", "max(score)", "min(cat)", "max(cat)",
]  # fmt: skip


def make_table() -> pa.Table:
    rng = np.random.default_rng(20240707)
    ids = np.arange(ROWS, dtype=np.int64) * 3 + 7
    amount_null = rng.random(ROWS) < 0.05
    amount_null[NULL_PAGE[0] : NULL_PAGE[1]] = True
    score = np.round(rng.normal(50, 10, ROWS), 2)
    score[list(NAN_ROWS)] = np.nan
    cats = np.array(["able", "baker", "charlie", "dog"], dtype=object)[rng.integers(0, 4, ROWS)]
    return pa.table(
        {
            "id": ids,
            "ts": pa.array(1_700_000_000_000_000 + ids * 1_000_000, pa.timestamp("us", tz="UTC"),
                           mask=rng.random(ROWS) < 0.03),
            "amount": pa.array(np.round(rng.normal(0, 100, ROWS), 3), mask=amount_null),
            "x": pa.array(rng.integers(0, 1_000, ROWS), pa.int64(), mask=rng.random(ROWS) < 0.1),
            "score": pa.array(score, mask=rng.random(ROWS) < 0.02),
            "cat": pa.array(list(cats), pa.string()),
        }
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("aggregate_pages")
    t = make_table()
    out = {name: d / f"{name}.parquet" for name in ("zone_maps", "plain", "misaligned")}
    common: dict[str, Any] = {"sort_by": "id", "row_group_rows": RG_ROWS,
                              "page_rows": PAGE_ROWS}
    pqindex.write_table(t, out["zone_maps"], indexes={"zone_maps": ZONE_MAPS}, **common)
    pqindex.write_table(t, out["plain"], **common)
    pq.write_table(t, out["misaligned"], row_group_size=RG_ROWS, write_page_index=True,
                   data_page_size=4096, write_batch_size=128, use_dictionary=False)
    pqindex.add_indexes(out["misaligned"], zone_maps=ZONE_MAPS)
    return out


# ---------------------------------------------------------------- the file's pages


@dataclass(frozen=True)
class Page:
    column: str
    row_group: int
    page: int
    offset: int
    length: int
    first_row: int  # in the file
    rows: int


def file_pages(path: Path) -> list[Page]:
    """Every data page of the file, with its rows, from the OffsetIndex."""
    out = []
    with ParquetFile.open(path) as pf:
        start = 0
        for rg in range(pf.num_row_groups):
            n = pf.row_group_rows(rg)
            for leaf in pf.schema.leaves:
                oi = pf.offset_index(rg, leaf.index)
                assert oi is not None and oi.page_locations
                locs = oi.page_locations
                firsts = [loc.first_row_index or 0 for loc in locs]
                ends = [*firsts[1:], n]
                for k, loc in enumerate(locs):
                    out.append(Page(leaf.name, rg, k, loc.offset or 0,
                                    loc.compressed_page_size or 0, start + firsts[k],
                                    ends[k] - firsts[k]))
            start += n
    return out


def dictionary_ranges(path: Path) -> dict[str, list[tuple[int, int]]]:
    """Per column, the bytes before each chunk's first data page (its dictionary page)."""
    out: dict[str, list[tuple[int, int]]] = {}
    with ParquetFile.open(path) as pf:
        for rg in range(pf.num_row_groups):
            for leaf in pf.schema.leaves:
                oi = pf.offset_index(rg, leaf.index)
                assert oi is not None and oi.page_locations
                start, _ = chunk_range(pf.column_meta(rg, leaf.index))
                first = oi.page_locations[0].offset or 0
                if first > start:
                    out.setdefault(leaf.name, []).append((start, first - start))
    return out


def touched(pages: Sequence[Page], trace: Sequence[tuple[int, int]]) -> set[Page]:
    return {p for p in pages for off, n in trace if off < p.offset + p.length and p.offset < off + n}


def matching_rows(lo: int, hi: int) -> tuple[int, int]:
    """File rows ``[r0, r1)`` whose id lies in ``[lo, hi]`` (ids are 3 * row + 7)."""
    r0 = max(0, -((7 - lo) // 3))  # ceil((lo - 7) / 3)
    r1 = min(ROWS, max(0, (hi - 7) // 3 + 1))
    return r0, max(r0, r1)


def is_edge(p: Page, r0: int, r1: int) -> bool:
    """Some but not all rows of the page match."""
    overlap = min(r1, p.first_row + p.rows) - max(r0, p.first_row)
    return 0 < overlap < p.rows


def straddles(p: Page, lo: int, hi: int) -> bool:
    """The page's ids reach into ``[lo, hi]`` without lying inside it: its ColumnIndex
    bounds say some rows may match (even when no id falls in the range)."""
    first, last = 3 * p.first_row + 7, 3 * (p.first_row + p.rows - 1) + 7
    return first <= hi and last >= lo and not (lo <= first and last <= hi)


def open_footer_only(path: Path) -> pqindex.Dataset:
    """A dataset whose first read is exactly the footer, without request merging: every
    byte read for the query shows in the trace as itself."""
    with ParquetFile.open(path) as pf:
        footer = pf.file_size - pf.footer_offset
    return pqindex.dataset(path, tail_bytes=footer, scan_options=ScanOptions(coalesce_gap=0))


# ---------------------------------------------------------------- DuckDB


def duckdb_row(path: Path, aggs: Sequence[str], where: str) -> list[Any]:
    import duckdb

    con = duckdb.connect()
    try:
        row = con.execute(f"SELECT {', '.join(aggs)} FROM read_parquet('{path}') WHERE {where}"
                          ).fetchone()
    finally:
        con.close()
    assert row is not None
    return list(row)


def same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)
    if isinstance(a, dt.datetime):
        return bool(a.timestamp() == b.timestamp())
    return bool(a == b)


def assert_like_duckdb(ds: pqindex.Dataset, path: Path, aggs: Sequence[str], where: str) -> None:
    got = ds.aggregate(aggs, where=where)
    want = duckdb_row(path, aggs, where)
    for name, w in zip(aggs, want, strict=True):
        assert same(got[name], w), (where, name, got[name], w)


def random_ranges(seed: int, n: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        lo = rng.randrange(-100, MAX_ID + 100)
        width = rng.choice([0, 1, 2, 3, 100, 2_999, 3_000, 3_001, 7_777, 29_999, 30_000,
                            45_000, 100_000, MAX_ID])
        out.append((lo, lo + width))
    return out


# ---------------------------------------------------------------- I/O


def test_range_on_sort_key_reads_only_the_edge_pages(files: dict[str, Path]) -> None:
    path = files["zone_maps"]
    pages = file_pages(path)
    dictionaries = dictionary_ranges(path)
    ranges = random_ranges(11, 50)
    ranges += [(1_000, 70_000), (15_000, 17_000), (3_007, 5_998), (-5, MAX_ID + 5)]
    read_something = 0
    for lo, hi in ranges:
        where = f"id BETWEEN {lo} AND {hi}"
        ds = open_footer_only(path)
        assert_like_duckdb(ds, path, IO_AGGS, where)
        rep = ds.last_aggregate_report
        trace = list(ds.io_stats()[str(path)].trace)
        r0, r1 = matching_rows(lo, hi)
        read = touched(pages, trace)
        for col in ("id", "ts", "amount", "x", "score", "cat"):
            mine = {p for p in read if p.column == col}
            # a range has two ends: at most two pages where it starts or ends
            assert len(mine) <= 2, (where, col, sorted((p.row_group, p.page) for p in mine))
            # the predicate's pages where the range starts or ends (even when no id
            # falls in the range); the aggregated columns' pages only where rows match
            assert all(straddles(p, lo, hi) if col == "id" else is_edge(p, r0, r1)
                       for p in mine), (where, col, mine)
            if col in ("score", "cat"):  # not aggregated, not in the predicate
                assert not mine, (where, col)
            if not mine:
                assert not any(off < o + n and o < off + length for off, length in trace
                               for o, n in dictionaries.get(col, [])), (where, col)
        assert rep.pages_read == len(read), where
        if not any(p.column == "id" and straddles(p, lo, hi) for p in pages):
            assert rep.pages_read == 0, where
        read_something += bool(read)
    assert 0 < read_something < len(ranges)  # both outcomes exercised


def test_page_aligned_range_reads_no_data_page(files: dict[str, Path]) -> None:
    path = files["zone_maps"]
    # rows [12,000, 17,000): pages 2-6 of row group 1, every row of them matches
    lo, hi = 3 * 12_000 + 7, 3 * 16_999 + 7
    ds = open_footer_only(path)
    assert_like_duckdb(ds, path, IO_AGGS, f"id BETWEEN {lo} AND {hi}")
    rep = ds.last_aggregate_report
    assert touched(file_pages(path), ds.io_stats()[str(path)].trace) == set()
    assert (rep.row_groups_read, rep.row_groups_from_metadata, rep.row_groups_skipped) == (0, 1, 3)
    assert rep.pages_from_metadata == 3 * 5  # amount, ts, x: five pages each
    assert rep.pages_read == 0 and rep.bytes_read == 0


def test_without_zone_maps_counts_come_from_the_column_index(files: dict[str, Path]) -> None:
    path = files["plain"]
    pages = file_pages(path)
    where = "id BETWEEN 1000 AND 70000"
    r0, r1 = matching_rows(1_000, 70_000)
    ds = open_footer_only(path)
    assert_like_duckdb(ds, path, ["count(*)", "count(amount)", "count(x)", "count(ts)"], where)
    read = touched(pages, ds.io_stats()[str(path)].trace)
    assert read and all(is_edge(p, r0, r1) for p in read)
    # min / max / sum have no exact page values here: every page of `all` is read
    ds = open_footer_only(path)
    assert_like_duckdb(ds, path, ["sum(amount)", "min(ts)"], where)
    read = touched(pages, ds.io_stats()[str(path)].trace)
    inner = {p for p in read if p.column == "amount" and not is_edge(p, r0, r1)}
    assert len(inner) > 2
    rep = ds.last_aggregate_report
    assert rep.pages_read == len(read)


def test_nan_page_is_read_and_orders_last(files: dict[str, Path]) -> None:
    path = files["zone_maps"]
    pages = file_pages(path)
    # rows [11,000, 14,000) in row group 1: the page holding rows 12,345-12,346 has NaN
    lo, hi = 3 * 11_000 + 7, 3 * 13_999 + 7
    ds = open_footer_only(path)
    aggs = ["count(score)", "sum(score)", "min(score)", "max(score)"]
    got = ds.aggregate(aggs, where=f"id BETWEEN {lo} AND {hi}")
    read = {(p.column, p.row_group, p.page) for p in touched(pages, ds.io_stats()[str(path)].trace)}
    assert read == {("score", 1, 2)}  # the NaN page only; its neighbours from zone maps
    assert math.isnan(got["max(score)"]) and math.isnan(got["sum(score)"])
    assert not math.isnan(got["min(score)"])
    assert_like_duckdb(ds, path, aggs, f"id BETWEEN {lo} AND {hi}")


def test_all_null_page_and_empty_results(files: dict[str, Path]) -> None:
    aggs = ["count(*)", "count(amount)", "sum(amount)", "min(amount)", "max(amount)"]
    for name, path in files.items():
        ds = pqindex.dataset(path)
        # strictly inside the null page, exactly the null page, and no row at all
        inside = ds.aggregate(aggs, where=f"id BETWEEN {3 * 5_100 + 7} AND {3 * 5_200 + 7}")
        assert inside == {"count(*)": 101, "count(amount)": 0, "sum(amount)": None,
                          "min(amount)": None, "max(amount)": None}, name
        whole = ds.aggregate(aggs, where=f"id BETWEEN {3 * 5_000 + 7} AND {3 * 5_999 + 7}")
        assert whole == {"count(*)": 1_000, "count(amount)": 0, "sum(amount)": None,
                         "min(amount)": None, "max(amount)": None}, name
        none = ds.aggregate(aggs, where="id BETWEEN 8 AND 9")
        assert none == {"count(*)": 0, "count(amount)": 0, "sum(amount)": None,
                        "min(amount)": None, "max(amount)": None}, name
    # on the zone-map copy the null page is answered from metadata, not read
    path = files["zone_maps"]
    ds = open_footer_only(path)
    ds.aggregate(aggs, where=f"id BETWEEN {3 * 4_500 + 7} AND {3 * 6_499 + 7}")
    read = {(p.column, p.page) for p in touched(file_pages(path), ds.io_stats()[str(path)].trace)}
    assert ("amount", 5) not in read and read <= {("id", 4), ("id", 6), ("amount", 4),
                                                   ("amount", 6)}


# ---------------------------------------------------------------- results


@pytest.mark.parametrize("copy", ["zone_maps", "plain", "misaligned"])
def test_results_match_duckdb(files: dict[str, Path], copy: str) -> None:
    path = files[copy]
    ds = pqindex.dataset(path)
    rng = random.Random(hash(copy) % 1000)
    wheres = [f"id BETWEEN {lo} AND {hi}" for lo, hi in random_ranges(23, 40)]
    for lo, hi in random_ranges(29, 10):
        wheres.append(rng.choice([
            f"id BETWEEN {lo} AND {hi} AND x IS NOT NULL",
            f"id BETWEEN {lo} AND {hi} AND amount > 0",
            f"(id < {lo} OR id > {hi})",
            f"id >= {lo}",
            f"id BETWEEN {lo} AND {hi} AND cat = 'dog'",
        ]))
    for where in wheres:
        assert_like_duckdb(ds, path, ALL_AGGS, where)


def test_misaligned_pages_count_every_row_once(files: dict[str, Path]) -> None:
    path = files["misaligned"]
    pages = file_pages(path)
    firsts = {c: {p.first_row for p in pages if p.column == c} for c in ("id", "amount", "ts")}
    assert firsts["id"] != firsts["amount"] != firsts["ts"]  # the premise: pages don't line up
    ds = pqindex.dataset(path)
    for lo, hi in random_ranges(31, 20):
        assert_like_duckdb(ds, path, IO_AGGS, f"id BETWEEN {lo} AND {hi}")
        assert ds.last_aggregate_report.warnings == []
    # pages of amount strictly inside a wide range are answered from zone maps
    ds.aggregate(["sum(amount)"], where="id BETWEEN 1000 AND 100000")
    assert ds.last_aggregate_report.pages_from_metadata > 0


def test_hive_partitions_in_the_predicate_and_the_aggregates(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    import duckdb

    root = tmp_path_factory.mktemp("hive")
    t = make_table()
    for k, year in enumerate((2023, 2024)):
        part = t.slice(k * ROWS // 2, ROWS // 2)
        (root / f"year={year}").mkdir()
        pqindex.write_table(part, root / f"year={year}" / "part-0.parquet", sort_by="id",
                            row_group_rows=RG_ROWS // 2, page_rows=PAGE_ROWS,
                            indexes={"zone_maps": ZONE_MAPS})
    ds = pqindex.dataset(root)
    aggs = ["count(*)", "sum(amount)", "max(ts)", "count(x)", "sum(year)", "min(year)"]
    con = duckdb.connect()
    try:
        for lo, hi in random_ranges(37, 15):
            for where in (f"year = 2024 AND id BETWEEN {lo} AND {hi}",
                          f"(year = 2023 OR id > {hi}) AND id >= {lo}"):
                got = ds.aggregate(aggs, where=where)
                row = con.execute(f"SELECT {', '.join(aggs)} FROM read_parquet("
                                  f"'{root}/*/*.parquet', hive_partitioning = true) "
                                  f"WHERE {where}").fetchone()
                assert row is not None
                for name, w in zip(aggs, row, strict=True):
                    assert same(got[name], w), (where, name, got[name], w)
    finally:
        con.close()


# ---------------------------------------------------------------- pieces


def test_pages_inside_agrees_with_a_set_model() -> None:
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, 80))
        cuts = np.sort(rng.choice(np.arange(1, n), size=min(n - 1, int(rng.integers(0, 10))),
                                  replace=False)) if n > 1 else np.empty(0, dtype=np.int64)
        first = np.concatenate(([0], cuts)).astype(np.int64)
        counts = np.diff(np.append(first, n)).astype(np.int64)
        rows = RowRanges.from_mask(rng.random(n) < 0.7)
        want = [k for k in range(first.size)
                if all(rows.contains(r) for r in range(first[k], first[k] + counts[k]))]
        assert _pages_inside(rows, first, counts).tolist() == want, (rows, first.tolist())


def test_nan_orders_above_every_number_whatever_comes_first() -> None:
    # regression: max(5.0, nan) kept 5.0 when a NaN unit came after a number
    for values in ([5.0, math.nan, 7.0], [math.nan, 5.0], [5.0, None, math.nan]):
        lo, hi = (_Acc(a) for a in parse_aggregations(["min(v)", "max(v)"]))
        for v in values:
            lo.add(v)
            hi.add(v)
        assert lo.value == 5.0, values
        assert math.isnan(hi.value), values
