"""The expr layer: builders, SQL and DNF agree; binding coerces exactly; NOT is
pushed down with three-valued logic; evaluation matches DuckDB and IEEE floats."""

from __future__ import annotations

import datetime as dt
import io
import math
import random
import uuid
from collections.abc import Callable
from decimal import Decimal
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
from conftest import import_or_missing
from pqindex.errors import UserInputError
from pqindex.expr import (
    FALSE,
    TRUE,
    And,
    BoundAnd,
    BoundExpr,
    BoundFalse,
    BoundOr,
    BoundPredicate,
    BoundTrue,
    Column,
    Compare,
    Expr,
    ExprVisitor,
    In,
    IsNan,
    IsNull,
    Literal,
    Not,
    Or,
    StartsWith,
    bind,
    col,
    from_dnf,
    lit,
    parse_where,
    push_not,
    to_arrow_mask,
    to_pyarrow_expression,
    visit,
)
from pqindex.expr.evaluate import true_positions
from pqindex.expr.nodes import LeafExpr
from pqindex.format.file import ParquetFile
from pqindex.format.match import LeafOp
from pqindex.format.schema import Schema
from pqindex.format.value_type import NanoTimestamp
from pqindex.format.values import bound_order
from pqindex.io.source import BytesSource

UTC = dt.UTC


def schema_of(table: pa.Table, **write_options: Any) -> Schema:
    """The Parquet schema pyarrow writes for ``table``, read back by pqindex."""
    buf = io.BytesIO()
    pq.write_table(table, buf, **write_options)
    return ParquetFile(BytesSource(buf.getvalue())).schema


TYPES = pa.table({
    "i": pa.array([1, None, 3], pa.int64()),
    "i8": pa.array([1, None, -3], pa.int8()),
    "u8": pa.array([1, 255, None], pa.uint8()),
    "u64": pa.array([0, 2**64 - 1, None], pa.uint64()),
    "dec": pa.array([Decimal("1.00"), Decimal("1.01"), None], pa.decimal128(5, 2)),
    "f": pa.array([1.0, math.nan, None], pa.float64()),
    "f32": pa.array([0.1, 1.0, None], pa.float32()),
    "s": pa.array(["ab", "b", None]),
    "bin": pa.array([b"\x00a", b"b", None], pa.binary()),
    "b": pa.array([True, False, None]),
    "d": pa.array([dt.date(2024, 1, 1), None, dt.date(2024, 1, 2)], pa.date32()),
    "ts": pa.array([dt.datetime(2024, 1, 1, 10), None, None], pa.timestamp("us")),
    "tsz": pa.array([dt.datetime(2024, 1, 1, 10), None, None], pa.timestamp("us", "UTC")),
    "tms": pa.array([dt.datetime(2024, 1, 1, 10), None, None], pa.timestamp("ms")),
    "tns": pa.array([0, None, 5], pa.timestamp("ns")),
    "st": pa.array([{"x": 1}, None, {"x": None}], pa.struct([("x", pa.int32())])),
    "tags": pa.array([[1], [], None], pa.list_(pa.int32())),
})
SCHEMA = schema_of(TYPES)


def bound(where: str | Expr, schema: Schema = SCHEMA) -> BoundExpr:
    return bind(parse_where(where) if isinstance(where, str) else where, schema)


# ---------------------------------------------------------------- one tree, three ways


@pytest.mark.parametrize(("sql", "built", "dnf"), [
    ("x = 1", col("x") == 1, [("x", "=", 1)]),
    ("x == 1", col("x") == 1, [("x", "==", 1)]),
    ("x <> 'a'", col("x") != "a", [("x", "!=", "a")]),
    ("x != 'a'", col("x") != "a", [("x", "!=", "a")]),
    ("x < 1.5 AND y >= 2", (col("x") < Decimal("1.5")) & (col("y") >= 2),
     [("x", "<", Decimal("1.5")), ("y", ">=", 2)]),
    ("x > 1 AND y IN (2, 3) AND z <= 0", (col("x") > 1) & col("y").isin([2, 3])
     & (col("z") <= 0), [("x", ">", 1), ("y", "in", [2, 3]), ("z", "<=", 0)]),
    ("x = 1 OR y = 2", (col("x") == 1) | (col("y") == 2),
     [[("x", "=", 1)], [("y", "=", 2)]]),
    ("(x = 1 AND y = 2) OR z NOT IN (3)",
     ((col("x") == 1) & (col("y") == 2)) | ~col("z").isin([3]),
     [[("x", "=", 1), ("y", "=", 2)], [("z", "not in", [3])]]),
    ("x NOT IN (1, 2)", ~col("x").isin([1, 2]), [("x", "not in", [1, 2])]),
    ("NOT x IN (1, 2)", In(Column("x"), (Literal(1), Literal(2)), negated=True),
     [("x", "NOT IN", (1, 2))]),
    ("d >= DATE '2024-01-01'", col("d") >= dt.date(2024, 1, 1),
     [("d", ">=", dt.date(2024, 1, 1))]),
])
def test_sql_builder_and_dnf_build_the_same_tree(sql: str, built: Expr, dnf: Any) -> None:
    assert parse_where(sql) == built
    assert from_dnf(dnf) == built


@pytest.mark.parametrize(("sql", "built"), [
    ("3 < x", col("x") > 3),
    ("3 < x", 3 < col("x")),  # noqa: SIM300 - the reflected operator is under test
    ("3 >= x", col("x") <= 3),
    ("'a' = s", col("s") == "a"),
    ("x BETWEEN 1 AND 5", col("x").between(1, 5)),
    ("x BETWEEN 1 AND 5", (col("x") >= 1) & (col("x") <= 5)),
    ("x NOT BETWEEN 1 AND 5", ~col("x").between(1, 5)),
    ("x IS NULL", col("x").is_null()),
    ("x IS NOT NULL", col("x").is_not_null()),
    ("NOT x IS NULL", col("x").is_not_null()),
    ("s LIKE 'ab%'", col("s").startswith("ab")),
    ("s NOT LIKE 'ab%'", ~col("s").startswith("ab")),
    ("NOT s LIKE 'ab%'", StartsWith(Column("s"), "ab", negated=True)),
    ("starts_with(s, 'a_b')", col("s").startswith("a_b")),
    ("isnan(f)", col("f").is_nan()),
    ("NOT NOT x < 1", col("x") < 1),
    ("NOT x = 1", col("x") != 1),
    ("a.b.c = 1", col("a.b.c") == 1),
    ('"a".b = 1', col("a.b") == 1),
    ('"my col" = 1', col("my col") == 1),
    ('"we""ird" = 1', col('we"ird') == 1),
    ("`x` = 1", col("x") == 1),
    ("flag", col("flag") == True),  # noqa: E712 - builds a predicate, not a bool
    ("NOT flag", col("flag") != True),  # noqa: E712
    ("x = 1 AND TRUE", col("x") == 1),
    ("x = 1 OR TRUE", TRUE),
    ("x = 1 AND FALSE", FALSE),
    ("WHERE x = -2", col("x") == -2),
    ("x = 1;", col("x") == 1),
    ("date = DATE '2024-01-01'", col("date") == dt.date(2024, 1, 1)),
])
def test_sql_shapes(sql: str, built: Expr) -> None:
    assert parse_where(sql) == built, f"{sql!r} parsed as {parse_where(sql)}"


def test_and_is_left_nested_and_folds_constants() -> None:
    a, b, c = col("a") == 1, col("b") == 2, col("c") == 3
    assert parse_where("a = 1 AND b = 2 AND c = 3") == And(And(a, b), c) == a & b & c
    assert parse_where("a = 1 OR b = 2 OR c = 3") == Or(Or(a, b), c)
    assert a & TRUE == a and (a | FALSE) == a
    assert (a & FALSE) == FALSE and (a | TRUE) == TRUE
    assert ~TRUE == FALSE and ~~a == a
    assert ~(col("x") < 1) == Not(col("x") < 1), "NOT < stays until the type is known"


@pytest.mark.parametrize(("text", "value"), [
    ("1", 1),
    ("-7", -7),
    ("1.50", Decimal("1.50")),
    ("-.5", Decimal("-0.5")),
    ("1e3", 1000.0),
    ("2.5E-1", 0.25),
    ("'it''s'", "it's"),
    ("TRUE", True),
    ("NULL", None),
    ("DATE '2024-02-29'", dt.date(2024, 2, 29)),
    ("TIMESTAMP '2024-01-01 10:00:00'", dt.datetime(2024, 1, 1, 10)),
    ("TIMESTAMP '2024-01-01 10:00:00.123456'", dt.datetime(2024, 1, 1, 10, 0, 0, 123456)),
    ("TIMESTAMP '2024-01-01T10:00:00+00:00'", dt.datetime(2024, 1, 1, 10, tzinfo=UTC)),
    ("TIMESTAMP '2024-01-01 10:00:00.5+02:00'",
     dt.datetime(2024, 1, 1, 10, 0, 0, 500000, tzinfo=dt.timezone(dt.timedelta(hours=2)))),
    ("TIME '10:30:00'", dt.time(10, 30)),
    ("X'00ff'", b"\x00\xff"),
])
def test_literals(text: str, value: object) -> None:
    expr = parse_where(f"x = {text}")
    assert isinstance(expr, Compare)
    got = expr.literal.value
    assert type(got) is type(value) and got == value, f"{text} gave {got!r}"
    if isinstance(value, Decimal):
        assert str(got) == str(value), "the written scale is kept"


def test_literal_equality_is_typed() -> None:
    assert lit(1) != lit(True) and lit(1) != lit(1.0)
    assert (col("x") == 1) != (col("x") == True)  # noqa: E712
    assert lit(Decimal("1.5")) == lit(Decimal("1.50")), "numerically equal decimals"


def test_dnf_details() -> None:
    assert from_dnf([("x", "in", {3, 1, 2})]) == col("x").isin([1, 2, 3]), "sets are sorted"
    assert from_dnf([["x", "=", 1]]) == (col("x") == 1), "a 3-list is a term too"
    bad: Any
    for bad in ([], [("x", "like", "a")], [("x", "=")], [("x", "in", 3)], "x = 1",
                [[("x", "=", 1)], ("y", "=", 2)], [[]]):
        with pytest.raises(UserInputError):
            from_dnf(bad)


# ---------------------------------------------------------------- printing


@pytest.mark.parametrize(("sql", "printed"), [
    ("x=1", "x = 1"),
    ("3 < x", "x > 3"),
    ("x <> 'it''s'", "x != 'it''s'"),
    ("(x = 1 OR y = 2) AND z = 3", "(x = 1 OR y = 2) AND z = 3"),
    ("x = 1 OR y = 2 AND z = 3", "x = 1 OR y = 2 AND z = 3"),
    ("NOT (x < 1 OR y IS NULL)", "NOT (x < 1 OR y IS NULL)"),
    ("x NOT IN (1, 2.50, 'a', NULL)", "x NOT IN (1, 2.50, 'a', NULL)"),
    ("x BETWEEN 1 AND 2", "x >= 1 AND x <= 2"),
    ("x = 1e3", "x = 1000.0E0"),
    ("s LIKE 'a%'", "s LIKE 'a%'"),
    ("starts_with(s, '5%_')", "starts_with(s, '5%_')"),
    ("NOT isnan(f)", "NOT isnan(f)"),
    ('"a b".c = DATE \'2024-01-01\'', "\"a b\".c = DATE '2024-01-01'"),
    ('"and" = TIMESTAMP \'2024-01-01 10:00:00\'', "\"and\" = TIMESTAMP '2024-01-01 10:00:00'"),
])
def test_printing_is_sql_that_parses_back(sql: str, printed: str) -> None:
    expr = parse_where(sql)
    assert str(expr) == printed
    assert parse_where(str(expr)) == expr


def test_bound_printing() -> None:
    assert str(bound("NOT (u8 < 200 OR dec = 1.5)")) == "u8 >= 200 AND dec != 1.50"
    assert str(bound("tsz = TIMESTAMP '2024-01-01 10:00:00'")) == \
        "tsz = TIMESTAMP '2024-01-01 10:00:00+00:00'"
    assert str(bound("u8 < 300 OR s NOT LIKE 'x%'")) == "u8 IS NOT NULL OR s NOT LIKE 'x%'"


# ---------------------------------------------------------------- errors


def error_of(call: Callable[[], object]) -> str:
    with pytest.raises(UserInputError) as info:
        call()
    return str(info.value)


def test_unknown_column_lists_close_names() -> None:
    msg = error_of(lambda: bound("u9 = 1"))
    assert "unknown column 'u9'" in msg and "'u8'" in msg
    msg = error_of(lambda: bound("nothing_like_it = 1"))
    assert "columns: i, i8, u8" in msg


def test_group_and_repeated_columns_are_refused() -> None:
    msg = error_of(lambda: bound("st = 1"))
    assert "'st' is a group" in msg and "st.x" in msg
    msg = error_of(lambda: bound("tags.list.element = 1"))
    assert "predicates on repeated (list/map) columns are not supported" in msg


@pytest.mark.parametrize(("sql", "parts"), [
    ("i = 'a'", ["'i'", "INT64", "string literal 'a'"]),
    ("s = 3", ["'s'", "STRING", "integer literal 3"]),
    ("s < 1.5", ["'s'", "STRING", "decimal literal 1.5"]),
    ("b = 1", ["'b'", "BOOLEAN", "integer literal 1"]),
    ("d = 3", ["'d'", "DATE", "integer literal 3"]),
    ("d = 'tomorrow'", ["'d'", "DATE", "'tomorrow'", "ISO"]),
    ("u8 = DATE '2024-01-01'", ["'u8'", "UINT8", "DATE literal"]),
    ("i LIKE 'a%'", ["'i'", "INT64", "LIKE", "string"]),
    ("i LIKE '%a_'", ["'i'", "INT64", "LIKE '%a_'", "string"]),
    ("isnan(i)", ["'i'", "isnan", "INT64"]),
    ("ts = TIMESTAMP '2024-01-01 10:00:00+02:00'", ["'ts'", "local", "time-zoned"]),
])
def test_wrong_literal_type_names_column_and_types(sql: str, parts: list[str]) -> None:
    msg = error_of(lambda: bound(sql))
    for part in parts:
        assert part in msg, f"{part!r} missing from {msg!r}"


@pytest.mark.parametrize(("sql", "parts"), [
    ("s LIKE '%a\\b'", ["backslash", "'%a\\b'", "position 7"]),
    ("s NOT LIKE 'a\\%'", ["backslash", "DuckDB", "Spark"]),
    ("s LIKE 'a!b' ESCAPE '!'", ["escape character '!' must be followed by", "position 7"]),
    ("s GLOB 'a*'", ["GLOB is not supported", "position 2"]),
    ("s ILIKE 'a%' ESCAPE '!!'", ["ESCAPE needs a string of one character"]),
    ("s = 'a' ESCAPE '!'", ["ESCAPE outside LIKE is not supported"]),
    ("x % 2 = 1", ["modulo operator '%' is not supported", "position 2"]),
    ("x IS DISTINCT FROM y", ["IS [NOT] DISTINCT FROM is not supported"]),
    ("sum(x) > 2", ["aggregate function sum() is not allowed", "position 0"]),
    ("x > foo(3)", ["function foo() is not supported", "position 4"]),
    ("x = TRY_CAST(y AS INT)", ["function TRY_CAST() is not supported"]),
    ("1 = 1", ["both sides are literals"]),
    ("x < DATE '2024-01-01' + INTERVAL 1 FORTNIGHT", ["INTERVAL unit", "'FORTNIGHT'"]),
    ("x = 1 AND", ["at the end of"]),
    ("x = 1)", ["unexpected ')'", "position 5"]),
    ("(x = 1", ["expected ')'"]),
    ("x = 'abc", ["unterminated quote", "position 4"]),
    ("x = 1 @ 2", ["unexpected character '@'", "position 6"]),
    ("x IN (1, y)", ["IN lists must be literals", "column y"]),
    ("5 BETWEEN x AND 7", ["BETWEEN needs a column", "'5'"]),
    ("x IS TRUE", ["IS [NOT] TRUE is not supported"]),
    ("x = DATE '2024-13-01'", ["invalid DATE literal"]),
    ("x = TIMESTAMP '2024-01-01 10:00:00.1234567'", ["invalid TIMESTAMP literal"]),
    ("", ["empty"]),
    ("(" * 300 + "x = 1" + ")" * 300, ["nested deeper than"]),
])
def test_parse_errors_say_what_and_where(sql: str, parts: list[str]) -> None:
    msg = error_of(lambda: parse_where(sql))
    for part in parts:
        assert part in msg, f"{part!r} missing from {msg!r}"


def test_builder_errors() -> None:
    assert "unsupported literal" in error_of(lambda: col("x") < object())
    assert "unsupported literal" in error_of(lambda: col("x") == object())
    with pytest.raises(TypeError, match="no truth value"):
        bool(col("x") == 1)
    assert "combines predicates" in error_of(lambda: (col("x") == 1) & 3)


# ---------------------------------------------------------------- binding: coercion


def single(expr: BoundExpr) -> BoundPredicate:
    assert isinstance(expr, BoundPredicate), f"expected one predicate, got {expr}"
    return expr


def test_bound_predicate_carries_leaf_type_values_and_keys() -> None:
    pred = single(bound("dec >= 1.5"))
    assert pred.leaf.name == "dec" and pred.value_type.kind.value == "decimal"
    assert pred.op == LeafOp.GE
    assert pred.values == (Decimal("1.50"),) and str(pred.values[0]) == "1.50"
    assert pred.keys == (bound_order(pred.leaf).key(Decimal("1.50")),)
    pred = single(bound("s IN ('b', 'a', 'b')"))
    assert pred.values == ("a", "b"), "IN values are distinct and sorted"
    assert pred.keys == (b"a", b"b")


@pytest.mark.parametrize(("sql", "expected"), [
    # Out of an unsigned range: NULL rows still must not match, so TRUE is IS NOT NULL.
    ("u8 < 300", "u8 IS NOT NULL"),
    ("u8 <= 255", "u8 IS NOT NULL"),
    ("u8 >= -1", "u8 IS NOT NULL"),
    ("u8 != 256", "u8 IS NOT NULL"),
    ("u8 > 300", "FALSE"),
    ("u8 = 256", "FALSE"),
    ("u8 < 0", "FALSE"),
    ("u8 = -1", "FALSE"),
    ("NOT (u8 < 300)", "FALSE"),  # NOT pushed down first: u8 >= 300
    ("u8 IN (1, 256, -1)", "u8 IN (1)"),
    ("u8 IN (256, -1)", "FALSE"),
    ("u8 NOT IN (256)", "u8 IS NOT NULL"),
    ("u64 = 18446744073709551615", "u64 = 18446744073709551615"),
    ("u64 > 18446744073709551615", "FALSE"),
    ("i8 > -200", "i8 IS NOT NULL"),
    ("i8 = 128", "FALSE"),
    ("i > 2.5", "i > 2"),
    ("i >= 2.5", "i >= 3"),
    ("i < 2.5", "i < 3"),
    ("i <= 2.5", "i <= 2"),
    ("i = 2.5", "FALSE"),
    ("i = 2.0", "i = 2"),
    ("i < 1e300", "i IS NOT NULL"),
    ("i = 3e0", "i = 3"),
    # Decimals with more scale than the column: exact, no rounding to a false match.
    ("dec = 1.005", "FALSE"),
    ("dec != 1.005", "dec IS NOT NULL"),
    ("dec < 1.005", "dec < 1.01"),
    ("dec <= 1.005", "dec <= 1.00"),
    ("dec > 1.005", "dec > 1.00"),
    ("dec >= 1.005", "dec >= 1.01"),
    ("dec = 1.5", "dec = 1.50"),
    ("dec = 1", "dec = 1.00"),
    ("dec < 1000", "dec IS NOT NULL"),  # DECIMAL(5,2) holds at most 999.99
    ("dec IN (1.005, 2)", "dec IN (2.00)"),
    # Dates and timestamps.
    ("d = '2024-01-01'", "d = DATE '2024-01-01'"),
    ("d < TIMESTAMP '2024-01-01 12:00:00'", "d < DATE '2024-01-02'"),
    ("d <= TIMESTAMP '2024-01-01 12:00:00'", "d <= DATE '2024-01-01'"),
    ("d = TIMESTAMP '2024-01-01 12:00:00'", "FALSE"),
    ("d = TIMESTAMP '2024-01-01 00:00:00'", "d = DATE '2024-01-01'"),
    ("ts >= DATE '2024-01-02'", "ts >= TIMESTAMP '2024-01-02 00:00:00'"),
    ("tsz = TIMESTAMP '2024-01-01 10:00:00'", "tsz = TIMESTAMP '2024-01-01 10:00:00+00:00'"),
    ("tsz = TIMESTAMP '2024-01-01 12:00:00+02:00'",
     "tsz = TIMESTAMP '2024-01-01 10:00:00+00:00'"),
    ("tsz < '2024-01-01 10:00:00Z'", "tsz < TIMESTAMP '2024-01-01 10:00:00+00:00'"),
    ("tms = TIMESTAMP '2024-01-01 10:00:00.000500'", "FALSE"),
    ("tms < TIMESTAMP '2024-01-01 10:00:00.000500'",
     "tms < TIMESTAMP '2024-01-01 10:00:00.001000'"),
    # Other kinds.
    ("bin = 'b'", "bin = X'62'"),
    ("b < TRUE", "b < TRUE"),
    ("b", "b = TRUE"),
    ("s LIKE '%'", "s IS NOT NULL"),
    ("s NOT LIKE '%'", "FALSE"),
    ("s LIKE '%%'", "s IS NOT NULL"),
    ("s LIKE 'abc'", "s = 'abc'"),
    ("s NOT LIKE 'abc'", "s != 'abc'"),
    ("s LIKE '%a_'", "s LIKE '%a_'"),
    ("s LIKE 'ab%c'", "s LIKE 'ab%' AND s LIKE 'ab%c'"),
    ("NOT (s LIKE 'ab%c')", "s NOT LIKE 'ab%' OR s NOT LIKE 'ab%c'"),
    ("s NOT LIKE 'a_'", "s NOT LIKE 'a_'"),
    ("s ILIKE 'AB%'", "s ILIKE 'AB%'"),
    ("NOT (s ILIKE 'a')", "s NOT ILIKE 'a'"),
    ("s ILIKE '%%'", "s IS NOT NULL"),
    ("st.x > 2", "st.x > 2"),
    # NULL literals: x op NULL is never true, NOT or not.
    ("i = NULL", "FALSE"),
    ("NOT (i = NULL)", "FALSE"),
    ("i IN (1, NULL)", "i IN (1)"),
    ("i NOT IN (1, NULL)", "FALSE"),
    ("NOT (i IN (1, NULL))", "FALSE"),
    ("NOT (i IN (1, NULL)) OR i = 3", "i = 3"),
    ("i > NULL OR i < 0", "i < 0"),
])
def test_coercion(sql: str, expected: str) -> None:
    got = str(bound(sql))
    assert got == expected, f"{sql} bound as {got}, expected {expected}"


def test_binary_like_prints_as_starts_with() -> None:
    # A bytes prefix is not LIKE text: it prints as starts_with().
    assert str(bound("bin LIKE 'b%'")) == "starts_with(bin, X'62')"


def test_coerced_values_live_in_the_columns_domain() -> None:
    assert single(bound("tsz = TIMESTAMP '2024-01-01 10:00:00'")).values == (
        dt.datetime(2024, 1, 1, 10, tzinfo=UTC),)
    assert single(bound("ts = TIMESTAMP '2024-01-01 10:00:00'")).values == (
        dt.datetime(2024, 1, 1, 10),)
    nanos = single(bound("tns > TIMESTAMP '1970-01-01 00:00:00.000001'"))
    assert nanos.values == (NanoTimestamp(1000),) and nanos.keys == (1000,)
    assert single(bound("bin = 'b'")).values == (b"b",)
    f32 = single(bound("f32 = 0.1")).values[0]
    assert f32 != 0.1 and f32 == pa.scalar(0.1, pa.float32()).as_py(), \
        "a FLOAT literal is rounded to float32, as the column stores it"
    assert single(bound("f = 1")).values == (1.0,)


def test_nan_literals() -> None:
    f = col("f")
    assert isinstance(bound(f == math.nan), BoundFalse)
    assert isinstance(bound(f < math.nan), BoundFalse)
    assert single(bound(f != math.nan)).op == LeafOp.IS_NOT_NULL
    assert single(bound(~(f < math.nan))).op == LeafOp.IS_NOT_NULL, \
        "NOT (x < NaN) is true for every non-null x, NaN included"
    assert str(bound(f.isin([1, math.nan]))) == "f IN (1.0E0)"
    assert str(bound(~(~(f < math.nan) & (col("i") == 1)))) == "i != 1"
    assert isinstance(bound(col("i") == math.nan), BoundFalse)


# ---------------------------------------------------------------- NOT push-down


@pytest.mark.parametrize(("sql", "expected"), [
    ("NOT (f < 1)", "f >= 1.0E0 OR isnan(f)"),
    ("NOT (f >= 1)", "f < 1.0E0 OR isnan(f)"),
    ("NOT (f = 1)", "f != 1.0E0"),
    ("NOT (f != 1)", "f = 1.0E0"),
    ("NOT (f IN (1, 2))", "f NOT IN (1.0E0, 2.0E0)"),
    ("NOT (i < 1)", "i >= 1"),
    ("NOT (i < 1 AND s = 'a')", "i >= 1 OR s != 'a'"),
    ("NOT (i < 1 OR i IS NULL)", "i >= 1 AND i IS NOT NULL"),
    ("NOT (f < 1 OR f IS NULL)", "(f >= 1.0E0 OR isnan(f)) AND f IS NOT NULL"),
    ("NOT NOT (f < 1)", "f < 1.0E0"),
    # Exact, if not minimal: NOT (f >= 1 OR isnan(f)) is (f < 1 OR isnan(f)) AND NOT isnan(f).
    ("NOT (NOT (f < 1) AND i = 2)", "(f < 1.0E0 OR isnan(f)) AND NOT isnan(f) OR i != 2"),
    ("NOT isnan(f)", "NOT isnan(f)"),
    ("NOT (s LIKE 'a%')", "s NOT LIKE 'a%'"),
    ("NOT (i BETWEEN 1 AND 3)", "i < 1 OR i > 3"),
    ("NOT (f BETWEEN 1 AND 3)", "f < 1.0E0 OR isnan(f) OR f > 3.0E0 OR isnan(f)"),
    ("NOT TRUE OR i = 1", "i = 1"),
])
def test_not_push_down(sql: str, expected: str) -> None:
    got = str(bound(sql))
    assert got == expected, f"{sql} bound as {got}"


class _HasNot(ExprVisitor[bool]):
    def visit_true(self) -> bool:
        return False

    def visit_false(self) -> bool:
        return False

    def visit_not(self, child: bool) -> bool:
        return True

    def visit_and(self, left: bool, right: bool) -> bool:
        return left or right

    def visit_or(self, left: bool, right: bool) -> bool:
        return left or right

    def visit_leaf(self, node: LeafExpr) -> bool:
        return False


def test_push_not_leaves_no_not_and_bound_trees_have_none() -> None:
    rng = random.Random(7)
    for _ in range(200):
        expr = _random_float_expr(rng, 4)
        pushed = push_not(expr, lambda c: True)
        assert not visit(pushed, _HasNot()), f"{expr} -> {pushed}"


def test_deep_or_chain_does_not_exhaust_the_stack() -> None:
    text = " OR ".join(f"i = {n}" for n in range(3000))
    expr = bound(text)
    assert isinstance(expr, BoundOr)
    mask = to_arrow_mask(expr, TYPES)
    assert mask.to_pylist() == [True, False, True]


# ---------------------------------------------------------------- evaluation


def test_mask_has_no_nulls_and_struct_fields_follow_parent_nulls() -> None:
    mask = to_arrow_mask(bound("st.x IS NULL"), TYPES)
    assert mask.null_count == 0
    assert mask.to_pylist() == [False, True, True], "a NULL struct has a NULL field"
    assert to_arrow_mask(bound("NOT (i = 1)"), TYPES).to_pylist() == [False, False, True]
    assert to_arrow_mask(BoundTrue(), TYPES).to_pylist() == [True] * 3
    assert to_arrow_mask(BoundFalse(), TYPES).to_pylist() == [False] * 3
    assert to_arrow_mask(bound("bin LIKE 'b%'"), TYPES).to_pylist() == [False, True, False]
    assert to_arrow_mask(bound("tns > TIMESTAMP '1970-01-01'"), TYPES).to_pylist() == \
        [False, False, True]


def test_mask_over_chunked_and_dictionary_columns() -> None:
    table = pa.Table.from_batches([
        pa.record_batch({"s": pa.array(["a", "b"]).dictionary_encode()}),
        pa.record_batch({"s": pa.array(["b", None]).dictionary_encode()}),
    ])
    expr = bind(parse_where("s IN ('b')"), schema_of(table))
    assert to_arrow_mask(expr, table).to_pylist() == [False, True, True, False]


def test_missing_table_column() -> None:
    assert "no column 'i'" in error_of(
        lambda: to_arrow_mask(bound("i = 1"), pa.table({"j": [1]})))


def test_bound_trees_are_frozen_dataclasses() -> None:
    expr = bound("i = 1 AND (s = 'a' OR b)")
    assert isinstance(expr, BoundAnd) and isinstance(expr.right, BoundOr)
    with pytest.raises(AttributeError):
        expr.left = BoundTrue()  # type: ignore[misc]
    assert bound("i = 1") == bound("1 = i") and len({bound("i = 1"), bound("i = 1.0")}) == 1


# ---------------------------------------------------------------- differential: DuckDB


def _diff_table(rng: random.Random, n: int = 48) -> pa.Table:
    def pick(values: list[Any]) -> list[Any]:
        return [rng.choice(values) for _ in range(n)]

    strings = ["", "a", "ab", "abc", "b", "ba", "B", "é", "éa", "a'b"]
    dates = [dt.date(2023, 12, 31), dt.date(2024, 1, 1), dt.date(2024, 1, 2),
             dt.date(2024, 2, 29)]
    stamps = [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, 10),
              dt.datetime(2024, 1, 1, 10, 0, 0, 500), dt.datetime(2024, 1, 2, 23, 59)]
    decimals = [Decimal(x) for x in ("-1.00", "0.00", "1.00", "1.01", "1.50", "999.99")]
    struct_values = [{"x": v} for v in (-1, 0, 1, 2, None)]
    return pa.table({
        "i": pa.array(pick([*range(-3, 4), None, None]), pa.int64()),
        "i8": pa.array(pick([-128, -1, 0, 1, 127, None]), pa.int8()),
        "u8": pa.array(pick([0, 1, 100, 255, None]), pa.uint8()),
        "s": pa.array(pick([*strings, None])),
        "d": pa.array(pick([*dates, None]), pa.date32()),
        "ts": pa.array(pick([*stamps, None]), pa.timestamp("us")),
        "tz": pa.array(pick([*stamps, None]), pa.timestamp("us", "UTC")),
        "dec": pa.array(pick([*decimals, None]), pa.decimal128(5, 2)),
        "b": pa.array(pick([True, False, None])),
        "st": pa.array(pick([*struct_values, None]), pa.struct([("x", pa.int32())])),
    })


_LITERALS: dict[str, list[str]] = {
    "i": ["-3", "0", "1", "2", "3", "4", "2.5", "-0.5", "1.0", "2e0", "2.5E0", "NULL"],
    "i8": ["-129", "-128", "-1", "0", "1", "127", "128", "300", "-200", "0.5"],
    "u8": ["-1", "0", "1", "100", "100.5", "255", "256", "300", "1e3"],
    "s": ["''", "'a'", "'ab'", "'b'", "'B'", "'é'", "'a''b'", "'zzz'"],
    "d": ["DATE '2024-01-01'", "DATE '2024-01-02'", "'2024-02-29'",
          "TIMESTAMP '2024-01-01 12:00:00'", "TIMESTAMP '2024-01-02 00:00:00'"],
    "ts": ["TIMESTAMP '2024-01-01 10:00:00'", "TIMESTAMP '2024-01-01 10:00:00.0005'",
           "DATE '2024-01-01'", "DATE '2024-01-02'", "'2024-01-02 23:59:00'"],
    # DuckDB drops the offset of a TIMESTAMP literal (as PostgreSQL does); TIMESTAMPTZ
    # keeps it, which is what pqindex does for both.
    "tz": ["TIMESTAMP '2024-01-01 10:00:00'", "TIMESTAMPTZ '2024-01-01 12:00:00+02:00'",
           "DATE '2024-01-02'", "TIMESTAMP '2024-01-01 10:00:00.000500'"],
    "dec": ["1.005", "1.00", "1", "1.5", "1.01", "-1", "999.99", "1000", "0.001", "1e0"],
    "b": ["TRUE", "FALSE"],
    "st.x": ["-1", "0", "1", "2", "1.5"],
}
_OPS = ["=", "!=", "<>", "<", "<=", ">", ">="]


def _random_leaf(rng: random.Random) -> str:
    column = rng.choice(list(_LITERALS))
    lits = _LITERALS[column]
    shape = rng.random()
    if column == "b" and shape < 0.15:
        return rng.choice(["b", "NOT b"])
    if column == "s" and shape < 0.2:
        word = rng.choice(["LIKE", "NOT LIKE"])
        return f"s {word} '{rng.choice(['', 'a', 'ab', 'b', 'é', 'B'])}%'"
    if shape < 0.45:
        op = rng.choice(_OPS)
        lit_text = rng.choice(lits)
        return (f"{lit_text} {op} {column}" if rng.random() < 0.25
                else f"{column} {op} {lit_text}")
    if shape < 0.6:
        low, high = sorted(rng.sample(lits, 2), key=lambda _: rng.random())
        word = rng.choice(["BETWEEN", "NOT BETWEEN"])
        return f"{column} {word} {low} AND {high}"
    if shape < 0.8:
        values = rng.sample(lits, rng.randint(1, min(3, len(lits))))
        if rng.random() < 0.2:
            values.append("NULL")
        word = rng.choice(["IN", "NOT IN"])
        return f"{column} {word} ({', '.join(values)})"
    return f"{column} {rng.choice(['IS NULL', 'IS NOT NULL'])}"


def _random_where(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.35:
        return _random_leaf(rng)
    shape = rng.random()
    if shape < 0.2:
        return f"NOT ({_random_where(rng, depth - 1)})"
    word = "AND" if shape < 0.6 else "OR"
    return f"({_random_where(rng, depth - 1)}) {word} ({_random_where(rng, depth - 1)})"


def test_differential_against_duckdb() -> None:
    duckdb = import_or_missing("duckdb", "duckdb")
    rng = random.Random(20240601)
    table = _diff_table(rng)
    schema = schema_of(table)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", table.append_column("rn", pa.array(range(table.num_rows))))
    checked = 0
    for _ in range(400):
        where = _random_where(rng, 3)
        expr = bind(parse_where(where), schema)
        ours = {i for i, hit in enumerate(to_arrow_mask(expr, table).to_pylist()) if hit}
        theirs = {r[0] for r in con.execute(f"SELECT rn FROM t WHERE {where}").fetchall()}
        assert ours == theirs, (
            f"WHERE {where}\nbound: {expr}\nonly pqindex: {sorted(ours - theirs)}\n"
            f"only DuckDB: {sorted(theirs - ours)}")
        via_expression = table.append_column("rn", pa.array(range(table.num_rows))).filter(
            to_pyarrow_expression(expr))
        assert set(via_expression.column("rn").to_pylist()) == ours, f"expression: {where}"
        checked += 1
    assert checked == 400


# ---------------------------------------------------------------- floats: IEEE model


_FLOATS = [math.nan, -math.inf, -1.5, -0.0, 0.0, 1.0, 1.5, math.inf, None]
_FLOAT_LITERALS = [-math.inf, -1.5, -0.0, 0.0, 1, 1.0, 1.5, Decimal("1.5"), math.inf,
                   math.nan, None]


def _random_float_expr(rng: random.Random, depth: int) -> Expr:
    if depth == 0 or rng.random() < 0.3:
        c = col(rng.choice(["f", "g"]))
        shape = rng.random()
        if shape < 0.5:
            op = rng.choice([LeafOp.EQ, LeafOp.NE, LeafOp.LT, LeafOp.LE, LeafOp.GT, LeafOp.GE])
            return Compare(op, c, lit(rng.choice(_FLOAT_LITERALS)))
        if shape < 0.65:
            return c.between(*rng.sample(_FLOAT_LITERALS[:-1], 2))
        if shape < 0.8:
            return c.isin(rng.sample(_FLOAT_LITERALS, rng.randint(1, 3)))
        if shape < 0.9:
            return c.is_nan()
        return c.is_null()
    shape = rng.random()
    if shape < 0.3:
        return ~_random_float_expr(rng, depth - 1)
    left, right = _random_float_expr(rng, depth - 1), _random_float_expr(rng, depth - 1)
    return left & right if shape < 0.65 else left | right


def _kleene(expr: Expr, row: dict[str, float | None]) -> bool | None:
    """The model: SQL three-valued logic over Python's IEEE float comparisons."""
    if expr == TRUE:
        return True
    if expr == FALSE:
        return False
    if isinstance(expr, Not):
        inner = _kleene(expr.child, row)
        return None if inner is None else not inner
    if isinstance(expr, (And, Or)):
        a, b = _kleene(expr.left, row), _kleene(expr.right, row)
        if isinstance(expr, And):
            return False if False in (a, b) else (None if None in (a, b) else True)
        return True if True in (a, b) else (None if None in (a, b) else False)
    assert isinstance(expr, (Compare, In, IsNull, IsNan))
    v = row[expr.column.name]
    if isinstance(expr, IsNull):
        return (v is None) != expr.negated
    if v is None:
        return None
    if isinstance(expr, IsNan):
        return math.isnan(v) != expr.negated
    if isinstance(expr, Compare):
        x = expr.literal.value
        if x is None:
            return None
        assert isinstance(x, (int, float, Decimal))
        x = float(x)
        return {
            LeafOp.EQ: v == x, LeafOp.NE: v != x, LeafOp.LT: v < x, LeafOp.LE: v <= x,
            LeafOp.GT: v > x, LeafOp.GE: v >= x,
        }[expr.op]
    values = [lit_.value for lit_ in expr.values]
    hit = any(x is not None and v == float(x) for x in values)  # type: ignore[arg-type]
    found: bool | None = True if hit else (None if None in values else False)
    return found if not expr.negated or found is None else not found


def test_float_semantics_against_an_ieee_model() -> None:
    rows = [{"f": f, "g": g} for f in _FLOATS for g in _FLOATS]
    table = pa.table({"f": pa.array([r["f"] for r in rows], pa.float64()),
                      "g": pa.array([r["g"] for r in rows], pa.float64())})
    schema = schema_of(table)
    rng = random.Random(11)
    for _ in range(400):
        expr = _random_float_expr(rng, 4)
        want = [_kleene(expr, row) is True for row in rows]
        got = to_arrow_mask(bind(expr, schema), table).to_pylist()
        bad = [(rows[i], want[i]) for i in range(len(rows)) if got[i] != want[i]]
        assert not bad, f"{expr}\nbound: {bind(expr, schema)}\nrows (expected): {bad[:4]}"


def test_regression_not_not_of_a_nan_comparison_matches_nothing() -> None:
    # NOT (x < NaN) once became IS NOT NULL, which is FALSE (not NULL) on NULL rows:
    # a second NOT then selected the NULL rows.
    table = pa.table({"f": pa.array([1.0, None, math.nan])})
    expr = ~(~(col("f") < math.nan) & (col("f") != 7))
    assert to_arrow_mask(bind(expr, schema_of(table)), table).to_pylist() == [False] * 3


def test_regression_negated_null_comparison_gets_no_isnan() -> None:
    # NOT (f <= NULL) is NULL on every row; it once became f > NULL OR isnan(f).
    assert str(bound("NOT (f <= NULL)")) == "FALSE"


@pytest.mark.parametrize(("where", "rows"), [
    # Values:        nan    -inf   -1.5   -0.0   0.0    1.0    1.5    inf    NULL
    ("f < 1",        [0,     1,     1,     1,     1,     0,     0,     0,     0]),
    ("NOT (f < 1)",  [1,     0,     0,     0,     0,     1,     1,     1,     0]),
    ("f = 0",        [0,     0,     0,     1,     1,     0,     0,     0,     0]),
    ("f != 0",       [1,     1,     1,     0,     0,     1,     1,     1,     0]),
    ("NOT (f = 0)",  [1,     1,     1,     0,     0,     1,     1,     1,     0]),
    ("isnan(f)",     [1,     0,     0,     0,     0,     0,     0,     0,     0]),
    ("NOT isnan(f)", [0,     1,     1,     1,     1,     1,     1,     1,     0]),
    ("f NOT IN (1, 1.5)", [1, 1,    1,     1,     1,     0,     0,     1,     0]),
    ("f NOT BETWEEN -1 AND 1", [1, 1, 1,  0,     0,     0,     1,     1,     0]),
    ("f IS NOT NULL", [1,    1,     1,     1,     1,     1,     1,     1,     0]),
])
def test_float_table(where: str, rows: list[int]) -> None:
    table = pa.table({"f": pa.array(_FLOATS, pa.float64())})
    mask = to_arrow_mask(bind(parse_where(where), schema_of(table)), table)
    assert [int(x) for x in mask.to_pylist()] == rows, where


def test_other_kinds_evaluate() -> None:
    five = uuid.UUID(int=5)
    table = pa.table({
        "h": pa.array(np.array([1.5, np.inf, 0.1, np.nan], np.float16)),
        "uu": pa.array([five.bytes, uuid.UUID(int=6).bytes, None, None], pa.uuid()),
        "tm": pa.array([dt.time(10), dt.time(11, 0, 0, 5), None, dt.time(0)], pa.time64("us")),
        "big": pa.array([Decimal("12345678901234567.123"), None, Decimal("1.000"), None],
                        pa.decimal128(20, 3)),
    })
    schema = schema_of(table)
    cases = {
        "h > 70000": [0, 1, 0, 0],  # beyond FLOAT16's range: not rounded to infinity
        "NOT (h < 1)": [1, 1, 0, 1],
        "h = 0.1": [0, 0, 1, 0],  # the literal rounded to float16, like the stored value
        f"uu = '{five}'": [1, 0, 0, 0],
        f"uu > '{five}'": [0, 1, 0, 0],
        "tm > TIME '10:00:00'": [0, 1, 0, 0],
        "tm < '11:00:00.000005'": [1, 0, 0, 1],
        "big > 12345678901234567.1225": [1, 0, 0, 0],
        "big = 1": [0, 0, 1, 0],
    }
    for where, rows in cases.items():
        expr = bind(parse_where(where), schema)
        assert [int(x) for x in to_arrow_mask(expr, table).to_pylist()] == rows, where
        assert table.filter(to_pyarrow_expression(expr)).num_rows == sum(rows), where


# ---------------------------------------------------------------- mask → row positions


@settings(max_examples=300, deadline=None)
@given(
    # Both sides of evaluate._SMALL_MASK (numpy alone up to 4,096 values).
    st.integers(0, 9000).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.sets(st.integers(0, max(n - 1, 0)), max_size=40 if n else 0),
            st.sets(st.integers(0, max(n - 1, 0)), max_size=20 if n else 0),
            st.booleans(),
        )
    ),
    st.integers(0, 70),
    st.integers(0, 70),
)
def test_true_positions_equal_indices_nonzero(
    case: tuple[int, set[int], set[int], bool], start: int, cut: int
) -> None:
    """Sparse and dense masks, slices at any bit offset, NULLs counted as False."""
    n, trues, nulls, dense = case
    values: list[bool | None] = [dense and i % 3 != 0 for i in range(n)]
    for i in trues:
        values[i] = True
    for i in nulls:
        values[i] = None
    arr = pa.array(values, pa.bool_())
    start = min(start, n)
    sliced = arr.slice(start, max(0, n - start - cut))
    expected = pc.indices_nonzero(pc.fill_null(sliced, False)).to_numpy()
    got = true_positions(sliced)
    assert got.dtype == np.int64
    assert got.tolist() == expected.tolist()


@pytest.fixture(scope="module")
def small_int_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ints") / "ints.parquet"
    rng = np.random.default_rng(11)
    pq.write_table(pa.table({
        "i8": pa.array(rng.integers(-128, 128, 500), pa.int8()),
        "u16": pa.array(rng.integers(0, 2**16, 500), pa.uint16()),
        "i64": pa.array(rng.integers(-50, 50, 500), pa.int64()),
    }), path, row_group_size=100)
    return path


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["i8", "u16", "i64"]),
       st.lists(st.integers(-2**70, 2**70) | st.integers(-200, 70_000), min_size=1, max_size=30))
def test_in_list_of_python_ints_matches_pyarrow(small_int_file: Path, column: str,
                                               values: list[int]) -> None:
    # Integer IN lists bind in bulk (expr/bind._bind_in); a value the column's type
    # cannot hold matches nothing.
    table = pq.read_table(small_int_file)
    kind = table.schema.field(column).type
    lo, hi = {"i8": (-128, 127), "u16": (0, 2**16 - 1), "i64": (-2**63, 2**63 - 1)}[column]
    held = pa.array([v for v in values if lo <= v <= hi], kind)
    want = table.filter(pc.is_in(table[column], value_set=held))
    got = pqindex.dataset(small_int_file).to_table(filters=[(column, "in", values)])
    assert sorted(got.to_pylist(), key=repr) == sorted(want.to_pylist(), key=repr)
