"""Conditions on value expressions, pqindex against DuckDB on files from several writers.

Random conditions (hypothesis) over random columns: arithmetic on integers and
decimals of every physical type (INT32, INT64, FIXED_LEN_BYTE_ARRAY), DOUBLE with
NaN, dates and UTC timestamps with intervals, string functions, CASE, COALESCE,
CAST, column-to-column comparisons, IN / BETWEEN / LIKE over expressions, under
AND / OR / NOT, with NULLs everywhere. The same SQL text goes to
``pqindex.dataset(path).scan(where=...)`` (which prunes with the bounds derived
through the expressions) and to DuckDB (``SET TimeZone = 'UTC'``); the row ids
must be equal. Comparisons that meet a NaN are drawn only where IEEE (pqindex)
and DuckDB (NaN is the greatest value) agree: ``<``, ``<=``, ``=``, ``<>`` with
the float expression on the left of a constant. TPC-H's lineitem filters (Q4/Q12
column-to-column, Q6 with an interval, Q19's OR of AND groups, revenue arithmetic)
and ``Dataset.aggregate`` over an expression are checked the same way.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pqindex

N = 3_000
UTC = dt.UTC
CASES = int(os.environ.get("PQINDEX_EXPR_CASES", "30"))  # random conditions per writer


def _table() -> pa.Table:
    rng = np.random.default_rng(43)
    i = np.arange(N)

    def nulls(every: int) -> np.ndarray:
        return (i % every) == 3

    start = dt.date(1994, 1, 1)
    ship = [start + dt.timedelta(days=int(x)) for x in rng.integers(0, 900, N)]
    commit = [d + dt.timedelta(days=int(x)) for d, x in zip(ship, rng.integers(-30, 60, N),
                                                              strict=True)]
    floats = rng.normal(0, 20, N).round(3)
    floats[i % 17 == 5] = math.nan
    return pa.table({
        "rid": pa.array(i, pa.int64()),
        "i32": pa.array(rng.integers(-500, 500, N), pa.int32(), mask=nulls(11)),
        "i64": pa.array(rng.integers(-10_000, 10_000, N), pa.int64(), mask=nulls(13)),
        "qty": pa.array(rng.integers(1, 51, N), pa.int64()),
        "d9": pa.array([Decimal(int(x)).scaleb(-2) for x in rng.integers(-99_999, 99_999, N)],
                       pa.decimal128(9, 2), mask=nulls(7)),
        "d18": pa.array([Decimal(int(x)).scaleb(-2) for x in rng.integers(0, 10**7, N)],
                        pa.decimal128(15, 2)),
        "disc": pa.array([Decimal(int(x)).scaleb(-2) for x in rng.integers(0, 11, N)],
                         pa.decimal128(15, 2)),
        "d25": pa.array([Decimal(int(x)).scaleb(-4) for x in rng.integers(-10**9, 10**9, N)],
                        pa.decimal128(25, 4), mask=nulls(9)),
        "f": pa.array(floats, pa.float64(), mask=nulls(19)),
        "ship": pa.array(ship, pa.date32(), mask=nulls(23)),
        "commit": pa.array(commit, pa.date32()),
        "receipt": pa.array([d + dt.timedelta(days=int(x)) for d, x in
                             zip(ship, rng.integers(1, 30, N), strict=True)], pa.date32()),
        "ts": pa.array([dt.datetime(2020, 1, 1, tzinfo=UTC) + dt.timedelta(minutes=int(x))
                        for x in rng.integers(0, 2 * 525_600, N)],
                       pa.timestamp("us", "UTC"), mask=nulls(29)),
        "s": pa.array([f" {w}{int(x)} " if x % 3 else f"{w}{int(x)}" for w, x in
                       zip(rng.choice(["Air", "mail", "SHIP", "Truck", "rail"], N),
                           rng.integers(0, 40, N), strict=True)], pa.string(),
                      mask=nulls(31)),
        "mode": pa.array(rng.choice(["AIR", "AIR REG", "MAIL", "SHIP", "TRUCK"], N)),
        "instr": pa.array(rng.choice(["DELIVER IN PERSON", "NONE", "COLLECT COD"], N)),
    })


TABLE = _table()


def _write(kind: str, root: Path) -> Path:
    path = root / f"{kind}.parquet"
    if kind == "pyarrow_int_decimals":  # DECIMAL(9) as INT32, (15) as INT64, (25) FLBA
        pq.write_table(TABLE, path, row_group_size=700, data_page_size=4096,
                       write_page_index=True, store_decimal_as_integer=True)
    elif kind == "pyarrow_dictionary":  # every decimal as FIXED_LEN_BYTE_ARRAY
        pq.write_table(TABLE, path, row_group_size=1000, write_page_index=True)
    elif kind == "pqindex":
        pqindex.write_table(TABLE, path, sort_by=["ship"], row_group_rows=1000, page_rows=200)
    else:
        con = duckdb.connect()
        con.register("t", TABLE)
        con.sql(f"COPY (SELECT * FROM t) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 1024)")
    return path


WRITERS = ["pyarrow_int_decimals", "pyarrow_dictionary", "pqindex", "duckdb"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("expr_diff")
    return {kind: _write(kind, root) for kind in WRITERS}


@pytest.fixture(scope="module")
def duck() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.sql("SET TimeZone = 'UTC'")
    return con


def check(path: Path, where: str, con: duckdb.DuckDBPyConnection) -> int:
    got = pqindex.dataset(str(path)).scan(columns=["rid"], where=where).to_table()
    want = con.sql(f"SELECT rid FROM read_parquet('{path}') WHERE {where}").fetchall()
    got_ids = sorted(got.column("rid").to_pylist())
    want_ids = sorted(r[0] for r in want)
    assert got_ids == want_ids, (
        f"{path.name}: {where}\n  pqindex {len(got_ids)} rows, DuckDB {len(want_ids)}; "
        f"only pqindex: {sorted(set(got_ids) - set(want_ids))[:5]}, "
        f"only DuckDB: {sorted(set(want_ids) - set(got_ids))[:5]}")
    return len(want_ids)


# ---------------------------------------------------------------- random conditions

INTS = ["i32", "i64", "qty"]
DECIMALS = ["d9", "d18", "disc", "d25"]
SMALL = st.integers(-20, 20).map(str)
DECIMAL_LITERAL = st.decimals("-50", "50", places=2).map(str)


def _arith(leaf: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.recursive(leaf, lambda t: st.one_of(
        st.tuples(t, st.sampled_from(["+", "-", "*"]), t).map(lambda x: f"({x[0]} {x[1]} {x[2]})"),
        t.map(lambda x: f"abs({x})"),
        t.map(lambda x: f"(-({x}))"),  # not --1: a comment to DuckDB
        st.tuples(t, t).map(lambda x: f"coalesce({x[0]}, {x[1]})"),
        st.tuples(t, t, t).map(lambda x: f"CASE WHEN {x[0]} > {x[1]} THEN {x[1]} ELSE {x[2]} END"),
    ), max_leaves=3)


NUMERIC = _arith(st.one_of(st.sampled_from(INTS + DECIMALS), SMALL, DECIMAL_LITERAL))
CMP = st.sampled_from(["<", "<=", ">", ">=", "=", "<>"])


@st.composite
def numeric_condition(draw: st.DrawFn) -> str:
    left, op = draw(NUMERIC), draw(CMP)
    if not any(c in left for c in INTS + DECIMALS):
        left = f"({left} + {draw(st.sampled_from(INTS + DECIMALS))})"  # a condition reads a column
    form = draw(st.sampled_from(["cmp", "cols", "pair", "between", "in", "div", "cast",
                                 "round"]))
    if form == "pair":  # two bare columns: their statistics prune row groups
        pair = draw(st.sampled_from([("i32", "i64"), ("qty", "i32"), ("d18", "disc"),
                                     ("i64", "qty"), ("d9", "d25")]))
        return f"{pair[0]} {op} {pair[1]}" if draw(st.booleans()) else \
            f"NOT ({pair[0]} {op} {pair[1]})"
    if form == "cols":
        return f"{left} {op} {draw(NUMERIC)}"
    if form == "between":
        lo = draw(st.integers(-2000, 2000))
        return f"{left} BETWEEN {lo} AND {lo + draw(st.integers(0, 3000))}"
    if form == "in":
        return f"{left} IN ({', '.join(draw(st.lists(SMALL, min_size=1, max_size=4)))})"
    if form == "div":
        return f"{left} / {draw(st.sampled_from(['2', '3', '-4', '0.5']))} {op} {draw(SMALL)}"
    if form == "cast":
        return f"CAST({left} AS {draw(st.sampled_from(['BIGINT', 'DOUBLE', 'DECIMAL(20,1)']))}) " \
               f"{op} {draw(DECIMAL_LITERAL)}"
    if form == "round":
        return f"round({draw(st.sampled_from(DECIMALS))}, {draw(st.integers(0, 2))}) {op} " \
               f"{draw(DECIMAL_LITERAL)}"
    return f"{left} {op} {draw(st.one_of(SMALL, DECIMAL_LITERAL, st.integers(-10**6, 10**6).map(str)))}"


@st.composite
def float_condition(draw: st.DrawFn) -> str:
    # DuckDB 2.0 orders NaN inconsistently inside expressions (NaN / 3 < 23 and
    # NaN * 0.05 < 7 are TRUE on a column's rows, FALSE on constants): NaN rows are
    # set aside here, and checked against IEEE in test_nan_follows_ieee.
    expr = draw(st.sampled_from(["f", "f * 2", "f + i32", "f - d9", "abs(f)", "-f", "f / 3",
                                 "coalesce(f, 0)", "f * disc", "f < d9", "f * 2 > i32"]))
    if " < " in expr or " > " in expr:  # already a comparison
        return f"(NOT isnan(f) AND {expr})"
    return f"(NOT isnan(f) AND {expr} {draw(CMP)} {draw(st.integers(-40, 40))})"


DATE_SHIFT = st.tuples(st.sampled_from(["+", "-"]), st.integers(0, 40),
                       st.sampled_from(["DAY", "MONTH", "YEAR"]))
DATES = st.dates(dt.date(1993, 6, 1), dt.date(1996, 12, 31))


@st.composite
def date_condition(draw: st.DrawFn) -> str:
    col = draw(st.sampled_from(["ship", "commit", "receipt"]))
    form = draw(st.sampled_from(["interval", "days", "cols", "year", "month", "diff", "ts",
                                 "tsyear", "quoted"]))
    op = draw(CMP)
    sign, n, unit = draw(DATE_SHIFT)
    if form == "interval":
        return f"{col} {sign} INTERVAL {n} {unit} {op} DATE '{draw(DATES)}'"
    if form == "quoted":
        return f"{col} {sign} INTERVAL '{n}' {unit} {op} DATE '{draw(DATES)}' + INTERVAL 1 MONTH"
    if form == "days":
        return f"{col} {sign} {n} {op} DATE '{draw(DATES)}'"
    if form == "cols":
        other = draw(st.sampled_from(["ship", "commit", "receipt"]))
        if draw(st.booleans()):
            return f"{col} {op} {other}"
        return f"{col} {op} {other} {sign} INTERVAL {n} DAY"
    if form == "year":
        return f"year({col}) {op} {draw(st.integers(1993, 1997))}"
    if form == "month":
        return f"EXTRACT(MONTH FROM {col}) IN ({draw(st.integers(1, 12))}, 12)"
    if form == "diff":
        return f"receipt - {col} {op} {draw(st.integers(-10, 40))}"
    when = dt.datetime(2020, 1, 1) + dt.timedelta(hours=draw(st.integers(0, 17_000)))
    if form == "tsyear":
        return f"month(ts) {op} {draw(st.integers(1, 12))} AND year(ts) = 2020"
    return f"ts {sign} INTERVAL {n} {unit if unit != 'YEAR' else 'HOUR'} {op} TIMESTAMP '{when}'"


@st.composite
def string_condition(draw: st.DrawFn) -> str:
    word = draw(st.sampled_from(["air", "mail", "ship", "truck", "rail", "a", "1", ""]))
    form = draw(st.sampled_from(["lower", "upper", "trim", "length", "substr", "concat",
                                 "starts", "contains", "ends", "like", "case"]))
    if form == "lower":
        return f"lower(trim(s)) = '{word}{draw(st.integers(0, 40))}'"
    if form == "upper":
        return f"upper(s) LIKE '%{word.upper()}%'"
    if form == "trim":
        return "trim(s) <> s"
    if form == "length":
        return f"length(s) {draw(CMP)} {draw(st.integers(2, 9))}"
    if form == "substr":
        return f"substr(s, {draw(st.integers(-4, 4))}, {draw(st.integers(0, 4))}) = " \
               f"'{draw(st.sampled_from(['ai', 'Ai', 'r', ' S', 'SH', '1']))}'"
    if form == "concat":
        return f"s || '!' LIKE '%{draw(st.integers(0, 9))}!'"
    if form == "starts":
        return f"starts_with(lower(s), '{word}')"
    if form == "contains":
        return f"contains(upper(s), '{word.upper()}')"
    if form == "ends":
        return f"ends_with(trim(s), '{draw(st.integers(0, 9))}')"
    if form == "like":
        return f"lower(s) NOT LIKE '{word}%'"
    return f"CASE WHEN length(s) > 6 THEN 'long' WHEN s IS NULL THEN 'none' ELSE 'short' END " \
           f"= '{draw(st.sampled_from(['long', 'none', 'short']))}'"


CONDITION = st.one_of(numeric_condition(), float_condition(), date_condition(),
                      string_condition())


@st.composite
def predicate(draw: st.DrawFn) -> str:
    parts = draw(st.lists(CONDITION, min_size=1, max_size=3))
    text = parts[0]
    for p in parts[1:]:
        text = f"({text}) {draw(st.sampled_from(['AND', 'OR']))} ({p})"
    return f"NOT ({text})" if draw(st.booleans()) else text


@pytest.mark.parametrize("writer", WRITERS)
@settings(max_examples=CASES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(where=predicate())
def test_random_conditions_match_duckdb(files: dict[str, Path], duck: duckdb.DuckDBPyConnection,
                                        writer: str, where: str) -> None:
    check(files[writer], where, duck)


# ---------------------------------------------------------------- fixed cases

TPCH = [
    # Q4 / Q12: column to column
    "commit < receipt",
    "mode IN ('MAIL', 'SHIP') AND commit < receipt AND ship < commit "
    "AND receipt >= DATE '1994-01-01' AND receipt < DATE '1994-01-01' + INTERVAL '1' YEAR",
    # Q6
    "ship >= DATE '1994-01-01' AND ship < DATE '1994-01-01' + INTERVAL '1' YEAR "
    "AND disc BETWEEN 0.06 - 0.01 AND 0.06 + 0.01 AND qty < 24",
    # Q19: an OR of AND groups
    "(mode IN ('AIR', 'AIR REG') AND instr = 'DELIVER IN PERSON' AND qty >= 1 "
    "AND qty <= 1 + 10) OR (mode IN ('AIR', 'AIR REG') AND instr = 'DELIVER IN PERSON' "
    "AND qty >= 10 AND qty <= 10 + 10) OR (mode IN ('AIR', 'AIR REG') "
    "AND instr = 'DELIVER IN PERSON' AND qty >= 20 AND qty <= 20 + 10)",
    # revenue arithmetic
    "d18 * (1 - disc) > 50000",
    "d18 * (1 - disc) * (1 + disc) BETWEEN 10000 AND 20000",
    "ship + INTERVAL 1 DAY < DATE '1994-03-01'",
    "ship + INTERVAL 3 MONTH >= DATE '1996-05-31'",
    "year(ship) = 1995 AND month(ship) IN (1, 2)",
    "NOT (ship - 30 > commit)",
    "coalesce(i32, i64, 0) = 0",
    "i32 + i64 IS NULL",
    "CAST(d9 AS INTEGER) = 5",
    "d25 * 2 > d9",
    "f * 2 < 10",
]


@pytest.mark.parametrize("writer", WRITERS)
def test_tpch_style_filters_match_duckdb(files: dict[str, Path],
                                         duck: duckdb.DuckDBPyConnection, writer: str) -> None:
    counts = [check(files[writer], where, duck) for where in TPCH]
    assert all(c > 0 for c in counts[:4]), f"each TPC-H filter selects rows: {counts}"


@pytest.mark.parametrize(("where", "ieee"), [
    ("f * 2 < 7", lambda f: f * 2 < 7),
    ("f * 2 > 7", lambda f: f * 2 > 7),
    ("NOT (f * 2 > 7)", lambda f: ~(f * 2 > 7)),
    ("f / 3 < 23", lambda f: f / 3 < 23),
    ("f + 1 <> 5", lambda f: f + 1 != 5),
    ("-f >= 0", lambda f: -f >= 0),
])
def test_nan_follows_ieee(files: dict[str, Path], where: str, ieee: Any) -> None:
    """NaN compares false (``<>`` true) after arithmetic too, as a bare NaN does;
    NULL rows never match. The reference is numpy on the rows pyarrow reads."""
    f = TABLE.column("f").to_numpy(zero_copy_only=False)
    valid = ~np.asarray(TABLE.column("f").is_null().to_numpy(zero_copy_only=False))
    with np.errstate(invalid="ignore"):
        want = sorted(np.flatnonzero(ieee(np.nan_to_num(f, nan=np.nan)) & valid).tolist())
    for writer in ("pyarrow_dictionary", "pqindex"):
        got = pqindex.dataset(str(files[writer])).scan(columns=["rid"], where=where).to_table()
        assert sorted(got.column("rid").to_pylist()) == want, (writer, where)
    assert any(math.isnan(x) for x in f[valid]), "the column holds NaN"


def test_a_derived_bound_reads_fewer_row_groups_than_a_plain_scan(files: dict[str, Path]
                                                                  ) -> None:
    ds = pqindex.dataset(str(files["pqindex"]))  # sorted by ship
    scan = ds.scan(columns=["rid"], where="ship + INTERVAL 1 DAY < DATE '1994-02-01'")
    scan.to_table()
    report = scan.report.to_dict()
    assert report["row_groups_read"] < report["row_groups_total"], report


@pytest.mark.parametrize("writer", ["pyarrow_int_decimals", "duckdb"])
def test_aggregates_of_expressions_match_duckdb(files: dict[str, Path],
                                                duck: duckdb.DuckDBPyConnection,
                                                writer: str) -> None:
    path = files[writer]
    specs = ["sum(d18 * (1 - disc))", "sum(d18 * (1 - disc) * (1 + disc))", "avg(qty * 2)",
             "min(ship + INTERVAL 1 DAY)", "max(d25 - d9)", "count(i32 + i64)", "count(*)",
             "sum(qty)"]
    where = ("ship >= DATE '1994-01-01' AND ship < DATE '1994-01-01' + INTERVAL '1' YEAR "
             "AND disc BETWEEN 0.05 AND 0.07 AND qty < 24")
    got = pqindex.dataset(str(path)).aggregate(specs, where=where)
    want = duck.sql(f"SELECT {', '.join(specs)} FROM read_parquet('{path}') "
                    f"WHERE {where}").fetchall()[0]
    for spec, value in zip(specs, want, strict=True):
        if spec.startswith("avg"):
            assert float(got[spec]) == pytest.approx(value), spec
        else:
            assert got[spec] == value, spec


def test_conditions_on_hive_partition_columns(tmp_path: Path,
                                              duck: duckdb.DuckDBPyConnection) -> None:
    """A partition column inside an expression is read from the path, as a leaf's is."""
    for p in (1, 2, 3):
        (tmp_path / f"p={p}").mkdir()
        pq.write_table(pa.table({"a": pa.array(range(p * 10, p * 10 + 20), pa.int64()),
                                 "b": pa.array([x % 7 for x in range(20)], pa.int64())}),
                       tmp_path / f"p={p}" / "f.parquet")
    ds = pqindex.dataset(str(tmp_path))
    for where in ["p + 1 > 2", "a < p * 11", "b * p = 6",
                  "CASE WHEN p = 2 THEN a ELSE 0 END > 25", "NOT (a - p * 10 < 5)"]:
        got = sorted(tuple(r.values()) for r in
                     ds.scan(columns=["a", "b", "p"], where=where).to_table().to_pylist())
        want = sorted(duck.sql(f"SELECT a, b, p FROM read_parquet('{tmp_path}/*/*.parquet', "
                               f"hive_partitioning = true) WHERE {where}").fetchall())
        assert got == want, where
