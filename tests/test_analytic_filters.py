"""Analytic filters (issue 43) on a small lineitem-shaped table: the planner's cost
rules read on planning traces, and the column-by-column evaluation on encoded
pages (dates, INT64 decimals with nulls, dictionary strings) checked against
pyarrow's own filter of a full read.

Two copies: pyarrow's write in the generator's order (ship dates at random: no
row group or page is clustered on them) and ``pqindex.write_table`` sorted by
the ship date."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pqindex
from pqindex.expr.bind import bind
from pqindex.expr.sql import parse_where
from pqindex.format.file import ParquetFile
from pqindex.plan.planner import plan_file
from pqindex.scan.conjuncts import column_groups, conjuncts

ROWS = 48_000
ROW_GROUP = 8_000
DEC = pa.decimal128(15, 2)
COLUMNS = ["shipdate", "discount", "quantity", "price", "mode"]
Q6 = ("shipdate >= DATE '1994-01-01' AND shipdate < DATE '1995-01-01' "
      "AND discount BETWEEN 0.05 AND 0.07 AND quantity < 24")


def _table() -> pa.Table:
    rng = np.random.default_rng(43)
    days = rng.integers(8036, 10561, ROWS)  # 1992-01-02 .. 1998-12-01
    discount = rng.integers(0, 11, ROWS)
    quantity = rng.integers(1, 51, ROWS) * 100
    price = rng.integers(90_000, 10_500_000, ROWS)
    qty = pa.array([Decimal(int(q)).scaleb(-2) for q in quantity], DEC)
    qty = pc.if_else(pa.array(rng.random(ROWS) < 0.02), pa.nulls(ROWS, DEC), qty)
    modes = np.array(["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"])
    return pa.table({
        "shipdate": pa.array(days.astype(np.int32), pa.date32()),
        "discount": pa.array([Decimal(int(d)).scaleb(-2) for d in discount], DEC),
        "quantity": qty,
        "price": pa.array([Decimal(int(p)).scaleb(-2) for p in price], DEC),
        "mode": pa.array(modes[rng.integers(0, 7, ROWS)]),
    })


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("lineitem")
    t = _table()
    gen = d / "generator.parquet"
    # Decimals stored as INT64 and a page index, as tpchgen-cli writes them.
    pq.write_table(t, gen, row_group_size=ROW_GROUP, max_rows_per_page=1_000,
                   write_page_index=True, store_decimal_as_integer=True)
    srt = d / "sorted.parquet"
    pqindex.write_table(t, srt, sort_by=["shipdate"], row_group_rows=ROW_GROUP,
                        page_rows=1_000)
    return {"generator": gen, "sorted": srt}


def _plan(path: Path, where: str, columns: list[str]) -> tuple[ParquetFile, Any]:
    pf = ParquetFile.open(path)
    bound = bind(parse_where(where), pf.schema)
    cols = [c.index for c in pf.schema.leaves if c.path[0] in columns]
    return pf, plan_file(pf, bound, cols)


def _column_indexes_parsed(pf: ParquetFile, names: list[str]) -> int:
    leaves = {c.index for c in pf.schema.leaves if c.path[0] in names}
    return sum(1 for k in pf.derived if isinstance(k, tuple) and len(k) == 3
               and k[0] == "page_index" and k[2] in leaves)


def test_unclustered_q6_parses_one_sampled_column_index_per_leaf(copies: dict[str, Path]
                                                                  ) -> None:
    """On the generator's order no page can rule out more than its row group: of 6
    row groups x 3 predicate leaves, one row group's column index per leaf is parsed
    (the sample that proves it), and a second plan of the open file parses none."""
    pf, plan = _plan(copies["generator"], Q6, ["price", "discount"])
    assert _column_indexes_parsed(pf, ["shipdate", "discount", "quantity"]) == 3
    assert all(not rg.skipped and rg.maybe.count() == rg.num_rows for rg in plan.row_groups)
    assert all("page index not read" in rg.reason and "not clustered" in rg.reason
               for rg in plan.row_groups), plan.row_groups[0].reason
    pf.derived.pop("page_selections", None)
    before = {k for k in pf.derived if isinstance(k, tuple) and k[0] == "page_index"}
    plan_file(pf, bind(parse_where(Q6), pf.schema), [0])
    assert {k for k in pf.derived if isinstance(k, tuple) and k[0] == "page_index"} == before
    pf.close()


def test_unclustered_range_reads_no_dictionary(copies: dict[str, Path]) -> None:
    """A range is answered from a dictionary's smallest and largest entries: exact
    statistics answer it as well, so no dictionary page is read to plan it."""
    pf, _ = _plan(copies["generator"], Q6, ["price"])
    assert not [k for k in pf.derived if isinstance(k, tuple) and k[0] == "dictionary_evidence"]
    pf.close()


def test_sorted_copy_reads_exactly_the_matching_pages(copies: dict[str, Path]) -> None:
    """Sorted by ship date, the planner reads the ship-date pages that hold a row of
    the year, and no other."""
    where = "shipdate >= DATE '1994-01-01' AND shipdate < DATE '1995-01-01'"
    pf, plan = _plan(copies["sorted"], where, ["shipdate", "price"])
    t = pq.read_table(copies["sorted"], columns=["shipdate"])
    d = t.column("shipdate").to_numpy()
    lo, hi = np.datetime64("1994-01-01"), np.datetime64("1995-01-01")
    col = next(c.index for c in pf.schema.leaves if c.path[0] == "shipdate")
    start = 0
    for rgp in plan.row_groups:
        oi = pf.offset_index(rgp.index, col)
        assert oi is not None and oi.page_locations
        firsts = [loc.first_row_index or 0 for loc in oi.page_locations] + [rgp.num_rows]
        expected = tuple(p for p in range(len(firsts) - 1)
                         if np.any((d[start + firsts[p]:start + firsts[p + 1]] >= lo)
                                   & (d[start + firsts[p]:start + firsts[p + 1]] < hi)))
        start += rgp.num_rows
        read = next((r.pages for r in rgp.reads if r.column == col), ())
        assert (read or ()) == expected, rgp.index
    pf.close()


_DATES = st.dates(dt.date(1991, 12, 1), dt.date(1999, 1, 1))
_LEAF = st.one_of(
    st.tuples(st.just("shipdate"), st.sampled_from(["<", "<=", ">", ">=", "="]), _DATES),
    st.tuples(st.just("discount"), st.sampled_from(["<", "<=", ">", ">=", "=", "!="]),
              st.integers(-1, 12).map(lambda v: Decimal(v).scaleb(-2))),
    st.tuples(st.just("quantity"), st.sampled_from(["<", ">=", "="]),
              st.integers(0, 5200).map(lambda v: Decimal(v).scaleb(-2))),
    st.tuples(st.just("mode"), st.sampled_from(["=", "!="]),
              st.sampled_from(["AIR", "MAIL", "TRUCK", "ZEPPELIN"])),
)


def _sql(leaf: tuple[str, str, Any]) -> str:
    col, op, v = leaf
    lit = f"DATE '{v}'" if isinstance(v, dt.date) else f"'{v}'" if isinstance(v, str) else str(v)
    return f"{col} {op} {lit}"


def _arrow(leaf: tuple[str, str, Any]) -> Any:
    col, op, v = leaf
    f = pc.field(col)
    s = pa.scalar(v, DEC) if isinstance(v, Decimal) else v
    return {"<": f < s, "<=": f <= s, ">": f > s, ">=": f >= s, "=": f == s, "!=": f != s}[op]


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shared=st.lists(_LEAF, min_size=1, max_size=3),
       branches=st.lists(st.lists(_LEAF, min_size=1, max_size=2), min_size=0, max_size=3),
       copy=st.sampled_from(["generator", "sorted"]))
def test_rows_equal_pyarrow(copies: dict[str, Path], shared: list[Any],
                            branches: list[list[Any]], copy: str) -> None:
    """Conjuncts over several columns (and an OR of branches sharing them) give the
    rows of pyarrow's filter of the whole file, NULLs and decimals included."""
    sql = " AND ".join(_sql(x) for x in shared)
    expr = None
    for x in shared:
        expr = _arrow(x) if expr is None else expr & _arrow(x)
    if branches:
        ors = [" AND ".join(_sql(x) for x in b) for b in branches]
        sql = " OR ".join(f"({sql} AND {o})" for o in ors)
        alt = None
        for b in branches:
            e = expr
            for x in b:
                e = e & _arrow(x)
            alt = e if alt is None else alt | e
        expr = alt
    got = pqindex.dataset(str(copies[copy])).scan(columns=COLUMNS, where=sql).to_table()
    want = pq.read_table(copies[copy], columns=COLUMNS).filter(expr)
    key = [("shipdate", "ascending"), ("price", "ascending"), ("mode", "ascending")]
    assert got.sort_by(key).to_pylist() == want.sort_by(key).to_pylist(), sql


def test_factoring_keeps_the_rows(copies: dict[str, Path]) -> None:
    """TPC-H Q19's shape: the shared conjuncts of three branches are factored out,
    the branches' rest reads one column, and the rows equal pyarrow's."""
    pf = ParquetFile.open(copies["generator"])
    shared = "mode IN ('AIR', 'REG AIR') AND discount < 0.05"
    where = " OR ".join(f"(quantity >= {lo} AND quantity <= {lo + 10} AND {shared})"
                        for lo in (1, 10, 20))
    bound = bind(parse_where(where), pf.schema)
    parts = conjuncts(bound)
    assert len(parts) == 3
    groups = column_groups(bound, len(pf.schema.leaves))
    assert groups.rest is None and len(groups.by_column) == 3
    got = pqindex.dataset(str(copies["generator"])).scan(columns=COLUMNS, where=where).to_table()
    q = pc.field("quantity")

    def d(v: int) -> pa.Scalar:
        return pa.scalar(Decimal(v), DEC)

    want = pq.read_table(copies["generator"], columns=COLUMNS).filter(
        pc.field("mode").isin(["AIR", "REG AIR"]) & (pc.field("discount") < pa.scalar(
            Decimal("0.05"), DEC))
        & (((q >= d(1)) & (q <= d(11))) | ((q >= d(10)) & (q <= d(20)))
           | ((q >= d(20)) & (q <= d(30)))))
    key = [("shipdate", "ascending"), ("price", "ascending")]
    assert got.sort_by(key).to_pylist() == want.sort_by(key).to_pylist()
    pf.close()


@pytest.fixture(scope="module")
def viewed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """String views (kept as views by pyarrow's reader: the Arrow schema is stored)
    beside commit / receipt dates, in row groups no index narrows."""
    rng = np.random.default_rng(431)
    n = 24_000
    flags = np.array(["A", "N", "R"])
    commit = rng.integers(8036, 10561, n)
    t = pa.table({
        "flag": pa.array(flags[rng.integers(0, 3, n)]).cast(pa.string_view()),
        "note": pc.if_else(pa.array(rng.random(n) < 0.05), pa.nulls(n, pa.string()),
                           pa.array([f"n{i % 997}" for i in range(n)])).cast(pa.string_view()),
        "commit": pa.array(commit.astype(np.int32), pa.date32()),
        "receipt": pa.array((commit + rng.integers(-30, 30, n)).astype(np.int32), pa.date32()),
        "qty": pa.array(rng.integers(1, 51, n)),
    })
    path = tmp_path_factory.mktemp("views") / "views.parquet"
    pq.write_table(t, path, row_group_size=6_000, write_page_index=True)
    return path


@pytest.mark.parametrize("where", [
    "commit <= DATE '1998-09-02'",  # nearly every row: decoded whole, cut as views
    "commit < receipt",  # columns against columns: decoded together
    "qty < 30 AND flag = 'R' AND commit < receipt",  # the comparison at survivors only
    "qty > 45 AND (commit < receipt OR note IS NULL)",
])
def test_views_and_column_comparisons_equal_duckdb(viewed: Path, where: str) -> None:
    """Projected string views stay views through the scan and come back as the
    dataset's type; conjuncts over two columns evaluated where the one-column ones
    passed keep DuckDB's rows (NULLs included)."""
    import duckdb

    cols = ["flag", "note", "qty", "commit"]
    ds = pqindex.dataset(str(viewed))
    got = ds.scan(columns=cols, where=where).to_table()
    want = duckdb.sql(f"SELECT {', '.join(cols)} FROM read_parquet('{viewed}') "
                      f"WHERE {where}").to_arrow_table()
    assert got.schema.types == [pa.string_view(), pa.string_view(), pa.int64(), pa.date32()]
    def rows(t: pa.Table) -> list[tuple[Any, ...]]:
        return sorted(t.to_pylist(), key=lambda r: tuple(map(repr, r.values())))  # type: ignore[arg-type]

    assert rows(got) == rows(want)
    # The executor's other callers (aggregates) read the same rows without views.
    assert ds.aggregate(["count(*)"], where=where)["count(*)"] == want.num_rows



def test_q19_shape_reads_samples_and_equality_dictionaries_only(copies: dict[str, Path]
                                                                 ) -> None:
    """TPC-H Q19's shape (three ORed quantity ranges, each with a ship-mode IN) on the
    generator's order: the planner reads the tail and one wave: one sampled column
    index per predicate leaf (neither is clustered), the ship-mode dictionaries (an IN
    they may rule out) and no quantity dictionary (a range exact statistics answer).
    ``stages`` says it stopped before the pages; a second plan reads nothing."""
    where = " OR ".join(f"(quantity >= {lo} AND quantity <= {lo + 10} "
                        "AND mode IN ('AIR', 'REG AIR'))" for lo in (1, 10, 20))
    pf, plan = _plan(copies["generator"], where, ["price", "quantity"])
    assert _column_indexes_parsed(pf, ["quantity"]) == 1
    assert _column_indexes_parsed(pf, ["mode"]) == 1
    mode = next(c.index for c in pf.schema.leaves if c.path[0] == "mode")
    read = {k[2] for k in pf.derived if isinstance(k, tuple) and k[0] == "dictionary_evidence"}
    assert read == {mode}
    assert pf.source.stats.round_trips == 2  # the tail, then one wave
    assert plan.stages[-1].startswith("stopped before the pages"), plan.stages
    assert sum("not clustered" in s for s in plan.stages) == 2
    requests = pf.source.stats.requests
    again = plan_file(pf, bind(parse_where(where), pf.schema), [0])
    assert pf.source.stats.requests == requests
    assert [rg.maybe.count() for rg in again.row_groups] == [
        rg.maybe.count() for rg in plan.row_groups]
    pf.close()
