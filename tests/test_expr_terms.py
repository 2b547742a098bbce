"""Value expressions in predicates: parsing, the ``col`` API, binding, derived bounds.

The bounds ``bind`` derives through an expression (``x * 2 > 10`` gives ``x > 5``)
are checked as a property: on random rows, every row where the condition is TRUE
satisfies each derived leaf (a bound may keep too much, never drop a match).
Results against DuckDB are in ``test_expr_differential.py``.
"""

from __future__ import annotations

import datetime as dt
import io
import math
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pqindex
from pqindex.errors import UserInputError
from pqindex.expr import bind, col, parse_where, to_arrow_mask
from pqindex.expr.bind import BoundAnd, BoundCondition, BoundExpr, BoundPredicate
from pqindex.expr.evaluate import mask_bools
from pqindex.expr.nodes import Compare, Condition, Interval, Literal, case, func
from pqindex.expr.sql import parse_value
from pqindex.format.file import ParquetFile
from pqindex.format.schema import Schema
from pqindex.io.source import BytesSource

UTC = dt.UTC


def schema_of(table: pa.Table) -> Schema:
    buf = io.BytesIO()
    pq.write_table(table, buf, store_decimal_as_integer=True)
    return ParquetFile(BytesSource(buf.getvalue())).schema


TABLE = pa.table({
    "a": pa.array([1, 5, None, -3], pa.int32()),
    "b": pa.array([2, 5, 7, None], pa.int64()),
    "p": pa.array([Decimal("1.50"), Decimal("2.00"), None, Decimal("0.10")],
                  pa.decimal128(15, 2)),
    "f": pa.array([1.5, math.nan, None, -2.0], pa.float64()),
    "d": pa.array([dt.date(1995, 1, 31), dt.date(1996, 2, 29), None, dt.date(1994, 12, 31)],
                  pa.date32()),
    "ts": pa.array([dt.datetime(2020, 1, 1, 23, tzinfo=UTC), None,
                    dt.datetime(2021, 3, 1, tzinfo=UTC), dt.datetime(2020, 12, 31, tzinfo=UTC)],
                   pa.timestamp("us", "UTC")),
    "s": pa.array([" Ab ", "abc", None, "xyz"]),
})
SCHEMA = schema_of(TABLE)


def rows(where: str) -> list[int]:
    """Positions of TABLE's rows where ``where`` is TRUE (the row evaluator)."""
    mask = mask_bools(to_arrow_mask(bind(parse_where(where), SCHEMA), TABLE))
    return [i for i, m in enumerate(mask) if m]


def implied(expr: BoundExpr) -> list[BoundPredicate]:
    """The leaves bound beside a condition (ANDed before it)."""
    out: list[BoundPredicate] = []
    todo = [expr]
    while todo:
        e = todo.pop()
        if isinstance(e, BoundAnd):
            todo += [e.right, e.left]
        elif isinstance(e, BoundPredicate):
            out.append(e)
    return out


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(("sql", "printed"), [
    ("a < b", "a < b"),
    ("a + 1 > b * 2", "a + 1 > b * 2"),
    ("(a + 1) * 2 > b", "(a + 1) * 2 > b"),
    ("a - (b - 1) > 0", "a - (b - 1) > 0"),
    ("a - b - 1 > 0", "a - b - 1 > 0"),
    ("-a < 3", "-a < 3"),
    ("p * (1 - 0.05) > 1", "p * 0.95 > 1"),  # constants folded exactly
    ("a > 2 * 3", "a > 6"),
    ("d < DATE '1995-01-01' + INTERVAL 1 YEAR", "d < DATE '1996-01-01'"),
    ("d < DATE '1995-01-01' + INTERVAL '10' DAY", "d < DATE '1995-01-11'"),
    ("d + INTERVAL 1 DAY < DATE '1995-01-01'", "d + INTERVAL 1 DAY < DATE '1995-01-01'"),
    ("d + INTERVAL '3 months' < DATE '1995-01-01'",
     "d + INTERVAL 3 MONTH < DATE '1995-01-01'"),
    ("lower(s) = 'ab'", "lower(s) = 'ab'"),
    ("substring(s, 1, 2) = 'ab'", "substr(s, 1, 2) = 'ab'"),
    ("EXTRACT(YEAR FROM d) = 1995", "year(d) = 1995"),
    ("CAST(p AS INTEGER) = 2", "CAST(p AS INTEGER) = 2"),
    ("p::DOUBLE > 1", "CAST(p AS DOUBLE) > 1"),
    ("CAST(p AS numeric(10, 1)) > 1", "CAST(p AS DECIMAL(10,1)) > 1"),
    ("CASE WHEN a > 1 THEN 'x' ELSE 'y' END = 'x'",
     "CASE WHEN a > 1 THEN 'x' ELSE 'y' END = 'x'"),
    ("CASE a WHEN 1 THEN 10 END = 10", "CASE WHEN a = 1 THEN 10 END = 10"),
    ("coalesce(a, b, 0) = 0", "coalesce(a, b, 0) = 0"),
    ("a + b BETWEEN 1 AND 5", "a + b >= 1 AND a + b <= 5"),
    ("a + 1 IN (1, 2)", "a + 1 IN (1, 2)"),
    ("a + 1 NOT IN (1, 2)", "NOT (a + 1 IN (1, 2))"),
    ("lower(s) LIKE 'a%'", "lower(s) LIKE 'a%'"),
    ("a + b IS NULL", "a + b IS NULL"),
    ("contains(s, 'b')", "contains(s, 'b')"),
    ("s || 'x' = 'abcx'", "s || 'x' = 'abcx'"),
])
def test_sql_parses_and_prints(sql: str, printed: str) -> None:
    expr = parse_where(sql)
    assert str(expr) == printed
    assert parse_where(str(expr)) == expr, "printing then parsing gives the same tree"


def test_column_against_literal_stays_the_prunable_leaf() -> None:
    assert parse_where("a < 3") == Compare(pqindex.expr.nodes.LeafOp.LT, col("a"), Literal(3))
    assert isinstance(parse_where("a < b"), Condition)
    assert parse_where("starts_with(s, 'ab')") == col("s").startswith("ab")
    assert parse_where("(a) = 1") == (col("a") == 1)


def test_api_builds_the_same_trees_as_sql() -> None:
    a, b, p, d, s = col("a"), col("b"), col("p"), col("d"), col("s")
    assert (a < b) == parse_where("a < b")
    assert a.eq(b) == parse_where("a = b")
    assert ((a + 1) * 2 > b) == parse_where("(a + 1) * 2 > b")
    assert (p * (1 - col("q")) > 100) == parse_where("p * (1 - q) > 100")
    assert (d + Interval(days=1) < dt.date(1995, 1, 1)) == parse_where(
        "d + INTERVAL 1 DAY < DATE '1995-01-01'")
    assert (s.lower() == "ab") == parse_where("lower(s) = 'ab'")
    assert (d.year() == 1995) == parse_where("year(d) = 1995")
    assert (a.abs().between(1, 2)) == parse_where("abs(a) BETWEEN 1 AND 2")
    assert (p.cast("integer") == 2) == parse_where("CAST(p AS INTEGER) = 2")
    assert (case([(a > 1, "x")], "y") == "x") == parse_where(
        "CASE WHEN a > 1 THEN 'x' ELSE 'y' END = 'x'")
    assert (func("coalesce", a, Literal(0)) == 0) == parse_where("coalesce(a, 0) = 0")
    assert ~(a + 1 < b) == parse_where("NOT (a + 1 < b)")
    assert ~~(a + 1 < b) == (a + 1 < b)
    assert a == col("a") and a != b, "== between columns stays structural"


@pytest.mark.parametrize(("sql", "parts"), [
    ("a % 2 = 1", ["modulo operator '%' is not supported"]),
    ("median(a) > 1", ["aggregate function median() is not allowed"]),
    ("soundex(s) = 'x'", ["function soundex() is not supported", "position 0"]),
    ("lower(s, 1) = 'x'", ["lower() takes 1 arguments, not 2"]),
    ("a + 1", ["expected a condition, found a + 1"]),
    ("CAST(a AS INTERVAL) = 1", ["CAST to INTERVAL is not supported"]),
    ("EXTRACT(epoch FROM d) = 1", ["EXTRACT(epoch FROM ...) is not supported"]),
    ("d + INTERVAL 1 DAY TO HOUR > d", ["INTERVAL ... TO ... is not supported"]),
    ("CASE WHEN a > 1 THEN 1", ["expected END"]),
    ("contains(s, b) ", ["argument 2 of contains() must be a literal"]),
    ("1 + 1 = 2", ["both sides are literals"]),
    ("sum(a) OVER () > 1", ["aggregate function sum()"]),
])
def test_unsupported_syntax_names_the_construct(sql: str, parts: list[str]) -> None:
    with pytest.raises(UserInputError) as info:
        parse_where(sql)
    for part in parts:
        assert part in str(info.value), f"{part!r} missing from {info.value}"


@pytest.mark.parametrize(("sql", "parts"), [
    ("lower(a) = 'x'", ["lower(a)", "lower() needs VARCHAR, not INTEGER"]),
    ("d + 'x' < d", ["cannot apply '+' to DATE and VARCHAR"]),
    ("a + s > 1", ["cannot apply '+' to INTEGER and VARCHAR"]),
    ("a + 1 = 'x'", ["cannot compare INTEGER with VARCHAR"]),
    ("year(a) = 1", ["year() needs DATE or TIMESTAMP"]),
    ("CASE WHEN a > 1 THEN 1 ELSE 'x' END = 1", ["values of different types"]),
    ("abs(a) + nope > 1", ["unknown column 'nope'"]),
])
def test_type_errors_are_bad_input_naming_the_expression(sql: str, parts: list[str]) -> None:
    with pytest.raises(UserInputError) as info:
        bind(parse_where(sql), SCHEMA)
    for part in parts:
        assert part in str(info.value), f"{part!r} missing from {info.value}"


# ---------------------------------------------------------------- evaluation


@pytest.mark.parametrize(("sql", "expected"), [
    ("a < b", [0]),  # NULLs on either side: no row
    ("a = b", [1]),
    ("a + b > 6", [1]),
    ("NOT (a + b > 6)", [0]),  # NULL sums stay out under NOT
    ("coalesce(a, b) = 7", [2]),
    ("a + b IS NULL", [2, 3]),
    ("p * (1 - 0.5) > 0.5", [0, 1]),
    ("f * 2 < 10", [0, 3]),  # NaN compares false (IEEE)
    ("NOT (f * 2 < 10)", [1]),
    ("d + INTERVAL 1 MONTH = DATE '1995-02-28'", [0]),  # the day clamped
    ("d + INTERVAL 1 YEAR = DATE '1997-02-28'", [1]),
    ("d - 1 = DATE '1994-12-30'", [3]),
    ("d - DATE '1995-01-01' > 0", [0, 1]),
    ("year(d) = 1995", [0]),
    ("month(ts) = 12", [3]),
    ("ts + INTERVAL 1 HOUR >= TIMESTAMP '2020-01-02 00:00:00'", [0, 2, 3]),
    ("trim(s) = 'Ab'", [0]),
    ("lower(trim(s)) = 'ab'", [0]),
    ("length(s) = 3", [1, 3]),
    ("substr(s, 2, 2) = 'bc'", [1]),
    ("substr(s, -2) = 'yz'", [3]),
    ("upper(s) LIKE 'A%'", [1]),
    ("s || '!' = 'xyz!'", [3]),
    ("concat(s, '!') = '!'", [2]),  # concat skips NULLs
    ("CASE WHEN a > 1 THEN 'big' WHEN a < 0 THEN 'neg' END = 'neg'", [3]),
    ("CAST(p AS INTEGER) = 2", [0, 1]),  # 1.50 rounds half away from zero
    ("round(p, 0) = 2", [0, 1]),
    ("a / 2 = 0.5", [0]),
    ("abs(a) = 3", [3]),
    ("a + 1 IN (2, NULL)", [0]),
    ("NOT (a + 1 IN (2, NULL))", []),  # never TRUE: NULL is in the list
])
def test_row_evaluation_three_valued(sql: str, expected: list[int]) -> None:
    assert rows(sql) == expected


def test_integer_overflow_is_an_error_not_a_wrapped_value() -> None:
    big = pa.table({"x": pa.array([2**62, 1], pa.int64())})
    with pytest.raises(UserInputError, match="overflow"):
        to_arrow_mask(bind(parse_where("x * 4 > 0"), schema_of(big)), big)


# ---------------------------------------------------------------- derived bounds


@pytest.mark.parametrize(("sql", "leaves"), [
    ("d + INTERVAL 1 DAY < DATE '1995-01-01'", ["d < DATE '1994-12-31'"]),
    ("d - 3 >= DATE '1995-01-04'", ["d >= DATE '1995-01-07'"]),
    ("d + INTERVAL 1 MONTH < DATE '1995-03-31'", ["d <= DATE '1995-03-04'"]),  # 4 days slack
    ("a * 2 > 10", ["a > 5"]),
    ("a * 3 > 10", ["a >= 4"]),  # 10/3 rounded outward, then to the integer grid
    ("-a < 3", ["a > -3"]),
    ("10 - a <= 4", ["a >= 6"]),
    ("a + 1 IN (3, 5)", ["a >= 2", "a <= 4"]),
    ("a + b > 3", []),  # two columns: nothing on one
    ("year(d) = 1995", ["d < DATE '1996-01-01'", "d >= DATE '1995-01-01'"]),
    ("year(ts) > 2020", ["ts >= TIMESTAMP '2021-01-01 00:00:00+00:00'"]),
    ("p * (1 - 0.05) > 1", ["p >= 1.06"]),
    ("abs(a) < 3", []),  # not monotonic
    ("NOT (a + 1 >= 3)", ["a < 2"]),
    ("NOT (f + 1 >= 3)", []),  # NaN: NOT (x >= 3) is not x < 3
])
def test_bounds_derived_through_monotonic_expressions(sql: str, leaves: list[str]) -> None:
    bound = bind(parse_where(sql), SCHEMA)
    assert [str(p) for p in implied(bound)] == leaves
    assert any(isinstance(e, BoundCondition) for e in [bound, *_parts(bound)]), \
        "the condition itself is still evaluated on the rows"


def _parts(e: BoundExpr) -> list[BoundExpr]:
    return [e.left, *_parts(e.left), e.right, *_parts(e.right)] if isinstance(e, BoundAnd) \
        else []


def test_derived_bound_prunes_row_groups_of_a_sorted_file(tmp_path: pytest.TempPathFactory
                                                           ) -> None:
    n = 40_000
    start = dt.date(1992, 1, 1)
    table = pa.table({
        "ship": pa.array([start + dt.timedelta(days=i // 20) for i in range(n)], pa.date32()),
        "v": pa.array(range(n), pa.int64()),
    })
    path = str(tmp_path) + "/sorted.parquet"  # type: ignore[operator]
    pqindex.write_table(table, path, sort_by=["ship"], row_group_rows=5_000, page_rows=1_000)
    ds = pqindex.dataset(path)
    scan = ds.scan(columns=["v"], where="ship + INTERVAL 1 DAY < DATE '1992-02-01'")
    got = scan.to_table()
    assert got.num_rows == 30 * 20
    report = scan.report.to_dict()
    assert report["row_groups_read"] == 1, report


# Random monotone chains over a column: c, c + k, k - c, c * k, c / k, -c, + INTERVAL.
NUMBERS = st.one_of(st.integers(-5, 5), st.decimals("-3", "3", places=2),
                    st.sampled_from([0.5, -1.5, 2.0]))


def chain(column: str) -> st.SearchStrategy[str]:
    def wrap(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/"]), NUMBERS).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})" if not (t[1] == "/" and t[2] == 0)
                else t[0]),
            st.tuples(NUMBERS, st.sampled_from(["+", "-", "*"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"),
            inner.map(lambda x: f"(-{x})"),
        )
    return st.recursive(st.just(column), wrap, max_leaves=3)


DATE_CHAIN = st.recursive(
    st.just("d"),
    lambda inner: st.tuples(inner, st.sampled_from(["+", "-"]), st.integers(-40, 40),
                            st.sampled_from(["DAY", "MONTH", "YEAR"])).map(
        lambda t: f"({t[0]} {t[1]} INTERVAL {t[2]} {t[3]})"),
    max_leaves=3)


@st.composite
def data_and_condition(draw: st.DrawFn) -> tuple[pa.Table, str]:
    ints = draw(st.lists(st.one_of(st.none(), st.integers(-10**6, 10**6)), min_size=1,
                         max_size=60))
    n = len(ints)
    floats = draw(st.lists(st.one_of(st.none(), st.floats(allow_nan=True,
                                                          allow_infinity=True, width=64)),
                           min_size=n, max_size=n))
    decs = draw(st.lists(st.one_of(st.none(), st.decimals("-9999", "9999", places=2)),
                         min_size=n, max_size=n))
    dates = draw(st.lists(st.one_of(st.none(), st.dates(dt.date(1900, 3, 1),
                                                        dt.date(2100, 10, 1))),
                          min_size=n, max_size=n))
    table = pa.table({"i": pa.array(ints, pa.int64()), "x": pa.array(floats, pa.float64()),
                      "q": pa.array(decs, pa.decimal128(8, 2)),
                      "d": pa.array(dates, pa.date32())})
    which = draw(st.sampled_from(["i", "x", "q", "d"]))
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "=", "<>"]))
    negate = draw(st.booleans())
    if which == "d":
        left = draw(DATE_CHAIN)
        right = f"DATE '{draw(st.dates(dt.date(1900, 1, 1), dt.date(2100, 12, 31)))}'"
    else:
        left = draw(chain(which))
        right = str(draw(st.one_of(NUMBERS, st.integers(-10**7, 10**7))))
    text = f"{left} {op} {right}"
    in_list = draw(st.booleans()) and which != "d"
    if in_list:
        text = f"{left} IN ({right}, {draw(NUMBERS)})"
    return table, f"NOT ({text})" if negate else text


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data_and_condition())
def test_no_matching_row_is_outside_a_derived_bound(case_: tuple[pa.Table, str]) -> None:
    table, where = case_
    schema = schema_of(table)
    bound = bind(parse_where(where), schema)
    try:
        matches = mask_bools(to_arrow_mask(bound, table))
    except UserInputError:
        return  # an overflow: the scan reports it, nothing is pruned wrongly
    conditions = [e for e in [bound, *_parts(bound)] if isinstance(e, BoundCondition)]
    for cond in conditions:
        held = mask_bools(to_arrow_mask(cond, table))
        for leaf in implied(bound):
            kept = mask_bools(to_arrow_mask(leaf, table))
            dropped = [i for i in range(table.num_rows) if held[i] and not kept[i]]
            assert not dropped, (f"{where}: derived {leaf} drops rows {dropped} "
                                 f"({table.slice(dropped[0], 1).to_pylist()})")
    assert len(matches) == table.num_rows


# ---------------------------------------------------------------- aggregates


def test_value_expression_parses_alone() -> None:
    assert str(parse_value("l_extendedprice * (1 - l_discount)")) == \
        "l_extendedprice * (1 - l_discount)"
    with pytest.raises(UserInputError, match="unexpected"):
        parse_value("a + 1 b")


def test_two_columns_compared_prune_with_both_columns_bounds(tmp_path: Path) -> None:
    """``a < b`` rules a row group out where min(a) >= max(b): the first half of the
    file has b far above a, the second far below (int64 against int32, dates too)."""
    n = 40_000
    half = n // 2
    table = pa.table({
        "a": pa.array(range(n), pa.int64()),
        "b": pa.array([x + 10_000 if x < half else x - 10_000 for x in range(n)], pa.int32()),
        "d1": pa.array([dt.date(1992, 1, 1) + dt.timedelta(days=x // 20) for x in range(n)],
                       pa.date32()),
        "d2": pa.array([dt.date(1992, 1, 1) + dt.timedelta(days=x // 20 + (400 if x < half
                                                                           else -400))
                        for x in range(n)], pa.date32()),
    })
    path = tmp_path / "pairs.parquet"
    pq.write_table(table, path, row_group_size=5_000)
    ds = pqindex.dataset(str(path))
    for where, rows_read, matches in [("a < b", 4, half), ("a > b", 4, half),
                                      ("NOT (a >= b)", 4, half), ("a = b", 0, 0),
                                      ("d1 < d2", 4, half), ("d2 <= d1", 4, half),
                                      ("a + 0 < b", 8, half)]:  # an expression: no pruning
        scan = ds.scan(columns=["a"], where=where)
        assert scan.to_table().num_rows == matches, where
        assert scan.report.to_dict()["row_groups_read"] == rows_read, where
