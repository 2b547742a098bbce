"""PageIndex: per-page answers from a ColumnIndex + OffsetIndex.

A 30-row fixture drawn as a table (three columns whose pages do not line up,
after parquet-java's ColumnIndexFilter test), the conservative fallbacks one by
one, binary search against the linear pass on random indexes, and soundness
on real files: a page answered NONE holds no matching row, a page answered ALL
holds only matching rows.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import operator
import random
import struct
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from conftest import PARQUET_TESTING, missing
from pqindex.format.column_index import PageIndex, prefix_upper_bound
from pqindex.format.file import ParquetFile
from pqindex.format.match import LeafOp, Match
from pqindex.format.row_ranges import RowRanges
from pqindex.format.schema import LeafColumn, PhysicalType
from pqindex.format.structs import (
    ColumnIndex,
    ColumnOrder,
    IEEE754TotalOrder,
    IntType,
    LogicalType,
    OffsetIndex,
    PageLocation,
    SchemaElement,
    StringType,
    TypeDefinedOrder,
)
from pqindex.format.values import total_order_key

CORPUS = PARQUET_TESTING / "data"
TYPE_ORDER = ColumnOrder(TYPE_ORDER=TypeDefinedOrder())
IEEE_ORDER = ColumnOrder(IEEE_754_TOTAL_ORDER=IEEE754TotalOrder())
N, S, A = Match.NONE, Match.SOME, Match.ALL
Op = LeafOp
NAN = float("nan")

# ---------------------------------------------------------------- building indexes


def make_leaf(kind: str, *, order: ColumnOrder | None = TYPE_ORDER,
              repeated: bool = False) -> LeafColumn:
    """A leaf of kind "int" (INT32), "double" or "string"."""
    ptype, logical = {"int": (PhysicalType.INT32, None),
                      "double": (PhysicalType.DOUBLE, None),
                      "string": (PhysicalType.BYTE_ARRAY, LogicalType(STRING=StringType()))}[kind]
    el = SchemaElement(type=int(ptype), name=kind, repetition_type=2 if repeated else 1,
                       logicalType=logical)
    return LeafColumn(0, (kind,), el, 1, 1 if repeated else 0, order)


def encode(v: Any) -> bytes:
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, float):
        return struct.pack("<d", v)
    return struct.pack("<i", v)


def natural(v: Any) -> Any:
    """A value in the order the column sorts by (strings as UTF-8 bytes)."""
    return v.encode() if isinstance(v, str) else v


def is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def build_index(values: list[Any], starts: list[int], *, null_counts: bool = True,
                nan_counts: bool = True) -> tuple[ColumnIndex, OffsetIndex]:
    """The ColumnIndex a correct writer would write for these pages (NaN left out of bounds)."""
    ends = [*starts[1:], len(values)]
    null_pages, mins, maxs, nulls, nans = [], [], [], [], []
    bounds: list[tuple[Any, Any] | None] = []
    for s, e in zip(starts, ends, strict=True):
        page = values[s:e]
        present = [v for v in page if v is not None]
        real = [v for v in present if not is_nan(v)]
        null_pages.append(not present)
        nulls.append(len(page) - len(present))
        nans.append(len(present) - len(real))
        if not present:
            mins.append(b"")
            maxs.append(b"")
            bounds.append(None)
        elif not real:  # all NaN: only NaN to write
            mins.append(encode(NAN))
            maxs.append(encode(NAN))
            bounds.append((NAN, NAN))
        else:
            lo, hi = min(real, key=natural), max(real, key=natural)
            mins.append(encode(lo))
            maxs.append(encode(hi))
            bounds.append((natural(lo), natural(hi)))
    usable = [b for b in bounds if b is not None]
    order = 0
    if not any(is_nan(b[0]) for b in usable):
        for direction, cmp in ((1, operator.le), (2, operator.ge)):
            if all(cmp(p[0], q[0]) and cmp(p[1], q[1]) for p, q in itertools.pairwise(usable)):
                order = direction
                break
    is_float = any(isinstance(v, float) for v in values)
    ci = ColumnIndex(null_pages=null_pages, min_values=mins, max_values=maxs,
                     boundary_order=order, null_counts=nulls if null_counts else None,
                     nan_counts=nans if nan_counts and is_float else None)
    oi = OffsetIndex(page_locations=[
        PageLocation(offset=4 + 100 * i, compressed_page_size=100, first_row_index=s)
        for i, s in enumerate(starts)])
    return ci, oi


def row_matches(op: LeafOp, keys: tuple[Any, ...], v: Any) -> bool:
    """SQL + IEEE semantics of one row: NULL never matches, NaN only != and NOT IN."""
    if op == Op.IS_NULL:
        return v is None
    if v is None:
        return False
    nan = is_nan(v)
    if op == Op.IS_NOT_NULL:
        return True
    if op == Op.IS_NAN:
        return nan
    if op == Op.IS_NOT_NAN:
        return not nan
    if op in (Op.NE, Op.NOT_IN) and nan:
        return True
    if nan:
        return False
    x = natural(v)
    if op in (Op.STARTS_WITH, Op.NOT_STARTS_WITH):
        hit = isinstance(x, bytes) and x.startswith(keys[0])
        return hit if op == Op.STARTS_WITH else not hit and isinstance(x, bytes)
    compare: dict[LeafOp, Callable[[], bool]] = {
        Op.EQ: lambda: bool(x == keys[0]), Op.NE: lambda: bool(x != keys[0]),
        Op.LT: lambda: bool(x < keys[0]), Op.LE: lambda: bool(x <= keys[0]),
        Op.GT: lambda: bool(x > keys[0]), Op.GE: lambda: bool(x >= keys[0]),
        Op.IN: lambda: x in keys, Op.NOT_IN: lambda: x not in keys}
    return compare[op]()


def assert_sound(answers: np.ndarray, page_truths: list[list[bool]], what: str) -> None:
    """NONE pages hold no matching row; ALL pages only matching rows."""
    for p, (ans, truth) in enumerate(zip(answers.tolist(), page_truths, strict=True)):
        if ans == N:
            assert not any(truth), f"{what}: page {p} answered NONE but holds a match"
        elif ans == A:
            assert all(truth), f"{what}: page {p} answered ALL but holds a non-match"


# ---------------------------------------------------------------- the drawn fixture

# Each column's page number sits next to its value: the pages do not line up.
FIXTURE = """
row |  a  pg | b         pg | c     pg
  0 |  1   0 | zulu       0 |  0.5   0
  1 |  1   0 | yankee     0 | -1.0   0
  2 |  2   0 | xray       0 |  2.0   0
  3 |  3   0 | whiskey    1 |  nan   0
  4 |  3   0 | victor     1 |  3.5   0
  5 |  3   1 | null       1 |  0.0   0
  6 |  4   1 | uniform    1 |  1.0   0
  7 | null 1 | tango      1 | null   1
  8 |  5   1 | sierra     1 | 10.0   1
  9 |  6   1 | romeo      1 | 11.0   1
 10 | null 2 | quebec     1 | 12.0   1
 11 | null 2 | papa       2 | 10.5   1
 12 | null 2 | oscar      2 | 11.5   1
 13 | null 2 | november   2 | 12.0   1
 14 | null 2 | mike       2 | null   1
 15 |  7   3 | lima       2 |  nan   2
 16 |  7   3 | kilo       2 | -5.0   3
 17 |  7   3 | juliet     2 | -4.0   3
 18 |  7   3 | india      2 | -3.0   3
 19 |  7   3 | hotel      2 | -2.0   3
 20 |  8   4 | golf       3 | -1.0   3
 21 |  9   4 | foxtrot    3 | -0.0   3
 22 | null 4 | echo       3 |  0.0   3
 23 | 10   4 | null       3 |  1.0   3
 24 | null 4 | delta      3 |  2.0   3
 25 | 12   5 | charlie    3 |  3.0   3
 26 | 13   5 | bravo      3 |  4.0   3
 27 | 15   5 | alpha      4 |  5.0   3
 28 | 17   5 | alpha      4 |  6.0   3
 29 | 20   5 | alpha      4 |  7.0   3
"""
KINDS = {"a": "int", "b": "string", "c": "double"}


def parse_fixture() -> dict[str, tuple[list[Any], list[int]]]:
    """column -> (values, first row of each page)."""
    lines = [line for line in FIXTURE.strip().splitlines()[1:]]
    out: dict[str, tuple[list[Any], list[int]]] = {}
    for ci, (name, kind) in enumerate(KINDS.items()):
        values: list[Any] = []
        starts: list[int] = []
        for row, line in enumerate(lines):
            raw, page = line.split("|")[ci + 1].split()
            if int(page) == len(starts):
                starts.append(row)
            conv: Callable[[str], Any] = {"int": int, "double": float, "string": str}[kind]
            values.append(None if raw == "null" else conv(raw))
        out[name] = (values, starts)
    return out


COLUMNS = parse_fixture()


def fixture_index(name: str) -> PageIndex:
    values, starts = COLUMNS[name]
    ci, oi = build_index(values, starts)
    return PageIndex.build(ci, oi, make_leaf(KINDS[name]), len(values))


def page_truths(name: str, op: LeafOp, keys: tuple[Any, ...]) -> list[list[bool]]:
    values, starts = COLUMNS[name]
    ends = [*starts[1:], len(values)]
    return [[row_matches(op, keys, v) for v in values[s:e]]
            for s, e in zip(starts, ends, strict=True)]


def answers(text: str) -> list[Match]:
    return [{"N": N, "S": S, "A": A}[c] for c in text.split()]


def test_fixture_layout() -> None:
    assert COLUMNS["a"][1] == [0, 5, 10, 15, 20, 25]
    assert COLUMNS["b"][1] == [0, 3, 11, 20, 27]
    assert COLUMNS["c"][1] == [0, 7, 15, 16]
    assert fixture_index("a").boundary_order.name == "ASCENDING"
    assert fixture_index("b").boundary_order.name == "DESCENDING"
    assert fixture_index("c").boundary_order.name == "UNORDERED"


@pytest.mark.parametrize(("column", "op", "keys", "expected", "why"), [
    ("a", Op.EQ, (7,), "N N N A N N", "page 3 is all 7 without nulls; page 2 is all null"),
    ("a", Op.LT, (4,), "A S N N N N", "page 0's max 3 < 4 and no nulls; page 1 spans 3..6"),
    ("a", Op.GE, (10,), "N N N N S A", "page 4 reaches 10 but holds nulls; page 5 is 12..20"),
    ("a", Op.NE, (7,), "A S N N S A", "7 is outside 1..3 and 12..20; pages 1, 4 hold nulls"),
    ("a", Op.IN, (2, 13), "S N N N N S", "2 falls in page 0, 13 in page 5"),
    ("a", Op.NOT_IN, (7,), "A S N N S A", "page 3 holds only 7"),
    ("a", Op.IS_NULL, (), "N S A N S N", "null counts 0, 1, 5, 0, 2, 0"),
    ("a", Op.IS_NOT_NULL, (), "A S N A S A", "null counts 0, 1, 5, 0, 2, 0"),
    ("a", Op.IS_NAN, (), "N N N N N N", "an INT32 holds no NaN"),
    ("b", Op.EQ, (b"alpha",), "N N N N S", "bounds alpha..alpha may be truncated: never ALL"),
    ("b", Op.LT, (b"c",), "N N N S A", "page 3 spans bravo..golf; page 4 is all alpha"),
    ("b", Op.STARTS_WITH, (b"p",), "N N S N N", "only hotel..papa can start with p; quebec >= q"),
    ("b", Op.STARTS_WITH, (b"alph",), "N N N N A", "alpha..alpha starts with alph"),
    ("b", Op.NOT_STARTS_WITH, (b"alph",), "A S A S N", "pages 1 and 3 hold a null"),
    ("b", Op.GE, (b"zulu",), "S N N N N", "only page 0 reaches zulu"),
    ("c", Op.GT, (-10.0,), "S S N A", "page 0 holds a NaN, page 1 nulls, page 2 only NaN"),
    ("c", Op.NE, (100.0,), "A S A A", "NaN != 100 is true"),
    ("c", Op.EQ, (0.0,), "S N N S", "-0.0 = 0.0"),
    ("c", Op.IS_NAN, (), "S N A N", "NaN counts 1, 0, 1, 0"),
    ("c", Op.IS_NOT_NAN, (), "S S N A", "page 1 holds nulls, page 2 only NaN"),
])
def test_fixture_answers(column: str, op: LeafOp, keys: tuple[Any, ...], expected: str,
                         why: str) -> None:
    pi = fixture_index(column)
    got = pi.matching_pages(op, keys)
    assert [Match(int(x)) for x in got] == answers(expected), why
    assert_sound(got, page_truths(column, op, keys), f"{column} {op.value} {keys}")
    assert pi.matching_pages(op, keys, strategy="linear").tolist() == got.tolist()


def test_fixture_rows_across_unaligned_pages() -> None:
    """a = 7 AND b < 'n': page rows of a and b intersect, then pick c's pages."""
    a = fixture_index("a").select(Op.EQ, (7,))
    b = fixture_index("b").select(Op.LT, (b"n",))
    assert a.maybe.intervals() == [(15, 20)] and a.all.intervals() == [(15, 20)]
    assert b.maybe.intervals() == [(11, 30)], "papa..hotel, golf..bravo, alpha..alpha"
    assert b.all.intervals() == [(27, 30)], "page 3 holds a null: only page 4 all match"
    both = a & b
    assert both.maybe.intervals() == [(15, 20)]
    assert both.all.is_empty
    c = fixture_index("c")
    assert both.maybe.overlapping_pages(c.first_rows, c.num_rows).tolist() == [2, 3]
    either = a | b
    assert either.maybe.intervals() == [(11, 30)]
    assert either.all.intervals() == [(15, 20), (27, 30)]


def test_rows_for_checks_length() -> None:
    pi = fixture_index("a")
    sel = pi.rows_for(np.array([N, S, A, N, N, A], dtype=np.int8))
    maybe, all_ = sel
    assert maybe == RowRanges.from_intervals([(5, 15), (25, 30)])
    assert all_ == RowRanges.from_intervals([(10, 15), (25, 30)])
    with pytest.raises(ValueError):
        pi.rows_for([N, S])


def test_prefix_upper_bound() -> None:
    assert prefix_upper_bound(b"ab") == b"ac"
    assert prefix_upper_bound(b"a\xff") == b"b"
    assert prefix_upper_bound(b"\xff\xff") is None
    assert prefix_upper_bound(b"") is None


def test_arguments_are_checked() -> None:
    pi = fixture_index("a")
    with pytest.raises(ValueError):
        pi.matching_pages(Op.EQ, ())
    with pytest.raises(ValueError):
        pi.matching_pages(Op.IS_NULL, (1,))
    with pytest.raises(ValueError):
        fixture_index("c").matching_pages(Op.EQ, (1.0,), strategy="binary")
    with pytest.raises(TypeError):
        fixture_index("b").matching_pages(Op.LT, (3,))


# ---------------------------------------------------------------- fallbacks


def int_index(**changes: Any) -> tuple[ColumnIndex, OffsetIndex, list[Any]]:
    values: list[Any] = [1, 2, 3, None, None, None, 5, 6, None]
    ci, oi = build_index(values, [0, 3, 6])
    for k, v in changes.items():
        setattr(ci, k, v)
    return ci, oi, values


def test_fallback_missing_offset_index(tmp_path: Path) -> None:
    path = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3]}), path)  # no page index
    with ParquetFile.open(path) as pf:
        assert PageIndex.load(pf, 0, 0) is None


def test_fallback_missing_column_index() -> None:
    _, oi, values = int_index()
    pi = PageIndex.build(None, oi, make_leaf("int"), len(values))
    assert pi.reason == "no column index"
    for op, keys in ((Op.EQ, (1,)), (Op.IS_NULL, ()), (Op.IN, (1, 2))):
        assert pi.matching_pages(op, keys).tolist() == [S, S, S]


def test_fallback_page_counts_disagree() -> None:
    ci, oi, values = int_index()
    assert oi.page_locations is not None
    oi.page_locations = oi.page_locations[:2]  # ColumnIndex has 3 entries, OffsetIndex 2
    pi = PageIndex.build(ci, oi, make_leaf("int"), len(values))
    assert pi.reason is not None and pi.null_reason is not None
    assert pi.matching_pages(Op.IS_NULL).tolist() == [S, S]
    assert pi.matching_pages(Op.EQ, (100,)).tolist() == [S, S]


def test_fallback_min_above_max_keeps_null_facts() -> None:
    ci, oi, values = int_index(min_values=[encode(9), b"", encode(5)])
    pi = PageIndex.build(ci, oi, make_leaf("int"), len(values))
    assert pi.reason is not None and "min 9 > max 3" in pi.reason
    assert pi.null_reason is None
    assert pi.matching_pages(Op.EQ, (100,)).tolist() == [S, S, S]
    assert pi.matching_pages(Op.IS_NULL).tolist() == [N, A, S]
    assert pi.matching_pages(Op.IS_NOT_NULL).tolist() == [A, N, S]


def test_fallback_false_boundary_order() -> None:
    ci, oi, values = int_index(min_values=[encode(1), b"", encode(0)], boundary_order=1)
    pi = PageIndex.build(ci, oi, make_leaf("int"), len(values))
    assert pi.reason is not None and "ASCENDING" in pi.reason
    assert not pi.ordered
    assert pi.matching_pages(Op.GT, (100,)).tolist() == [S, S, S]
    assert pi.matching_pages(Op.IS_NULL).tolist() == [N, A, S]


@pytest.mark.parametrize(("null_pages", "null_counts", "why"), [
    ([False, True, False], [0, 0, 1], "null page with a null count of 0"),
    ([False, False, False], [0, 4, 1], "4 nulls in 3 rows"),
    ([False, True, False], [0, 2, 1], "null page with 2 nulls in 3 rows"),
    ([False, True, False], [0, -3, 1], "negative null count"),
])
def test_fallback_contradictory_null_facts(null_pages: list[bool], null_counts: list[int],
                                           why: str) -> None:
    ci, oi, values = int_index(null_pages=null_pages, null_counts=null_counts)
    if not null_pages[1]:
        ci.min_values = [encode(1), encode(0), encode(5)]
        ci.max_values = [encode(3), encode(0), encode(6)]
    pi = PageIndex.build(ci, oi, make_leaf("int"), len(values))
    assert pi.null_reason is not None and why in pi.null_reason, pi.null_reason
    assert pi.reason is not None
    for op, keys in ((Op.IS_NULL, ()), (Op.IS_NOT_NULL, ()), (Op.EQ, (100,))):
        assert pi.matching_pages(op, keys).tolist() == [S, S, S], op


def test_fallback_nan_count_exceeding_rows() -> None:
    values: list[Any] = [1.0, NAN, 2.0]
    ci, oi = build_index(values, [0])
    ci.nan_counts = [5]
    pi = PageIndex.build(ci, oi, make_leaf("double"), 3)
    assert pi.reason is not None and "NaN" in pi.reason
    assert pi.matching_pages(Op.IS_NAN).tolist() == [S]


def test_fallback_unknown_column_order() -> None:
    ci, oi, values = int_index()
    pi = PageIndex.build(ci, oi, make_leaf("int", order=None), len(values))
    assert pi.reason is None and not pi.bounds_usable.any()
    assert pi.matching_pages(Op.EQ, (100,)).tolist() == [S, N, S], "the null page still NONE"
    assert pi.matching_pages(Op.IS_NOT_NULL).tolist() == [A, N, S]


def test_fallback_nan_bound_under_type_order() -> None:
    values: list[Any] = [1.0, 2.0, 3.0, 4.0]
    ci, oi = build_index(values, [0, 2])
    assert ci.max_values is not None
    ci.max_values[1] = encode(NAN)  # a writer that let NaN into a bound
    ci.boundary_order = 0
    pi = PageIndex.build(ci, oi, make_leaf("double"), 4)
    assert pi.bounds_usable.tolist() == [True, False]
    assert pi.matching_pages(Op.GT, (100.0,)).tolist() == [N, S]


def test_fallback_unknown_nan_count_blocks_all() -> None:
    values: list[Any] = [1.0, 2.0, 3.0]
    ci, oi = build_index(values, [0], nan_counts=False)
    pi = PageIndex.build(ci, oi, make_leaf("double"), 3)
    assert pi.matching_pages(Op.LT, (10.0,)).tolist() == [S], "a NaN may hide in the page"
    assert pi.matching_pages(Op.NE, (10.0,)).tolist() == [A], "NaN != 10 anyway"
    assert pi.matching_pages(Op.NE, (1.0,)).tolist() == [S]
    ci, oi = build_index(values, [0])
    pi = PageIndex.build(ci, oi, make_leaf("double"), 3)
    assert pi.matching_pages(Op.LT, (10.0,)).tolist() == [A]


def test_fallback_unknown_null_count_blocks_all() -> None:
    values: list[Any] = [1, 2, 3]
    ci, oi = build_index(values, [0], null_counts=False)
    pi = PageIndex.build(ci, oi, make_leaf("int"), 3)
    assert pi.null_counts is None
    assert pi.matching_pages(Op.LT, (10,)).tolist() == [S]
    assert pi.matching_pages(Op.IS_NULL).tolist() == [S]
    assert pi.matching_pages(Op.GT, (10,)).tolist() == [N]


def test_fallback_zeros_under_total_order() -> None:
    """totalOrder puts -0.0 below +0.0; SQL says -0.0 = 0.0 and -0.0 < 0.0 is false."""
    leaf = make_leaf("double", order=IEEE_ORDER)
    values: list[Any] = [-0.0, -0.0, 0.0, 0.0, -3.0, -0.0]
    ci, oi = build_index(values, [0, 2, 4])
    ci.min_values = [encode(-0.0), encode(0.0), encode(-3.0)]
    ci.max_values = [encode(-0.0), encode(0.0), encode(-0.0)]
    ci.boundary_order = 0
    pi = PageIndex.build(ci, oi, leaf, len(values))
    pos, neg = total_order_key(0.0), total_order_key(-0.0)
    assert pi.matching_pages(Op.EQ, (pos,)).tolist() == [S, S, S]
    assert pi.matching_pages(Op.EQ, (neg,)).tolist() == [S, S, S]
    assert pi.matching_pages(Op.LT, (pos,)).tolist() == [S, S, S], "-0.0 < 0.0 is false"
    assert pi.matching_pages(Op.GE, (pos,)).tolist() == [S, S, S], "-0.0 >= 0.0 is true"
    assert pi.matching_pages(Op.GT, (total_order_key(1.0),)).tolist() == [N, N, N]


def test_fallback_truncated_strings_no_all_for_equality() -> None:
    values: list[Any] = ["k", "k", "k"]
    ci, oi = build_index(values, [0])
    pi = PageIndex.build(ci, oi, make_leaf("string"), 3)
    assert pi.matching_pages(Op.EQ, (b"k",)).tolist() == [S]
    assert pi.matching_pages(Op.IN, (b"k", b"z")).tolist() == [S]
    assert pi.matching_pages(Op.NE, (b"k",)).tolist() == [S]
    assert pi.matching_pages(Op.NOT_IN, (b"k",)).tolist() == [S]
    assert pi.matching_pages(Op.LE, (b"k",)).tolist() == [A], "a max bound is never below max"
    assert pi.matching_pages(Op.STARTS_WITH, (b"k",)).tolist() == [A]
    assert pi.matching_pages(Op.STARTS_WITH, (b"",)).tolist() == [A]
    assert pi.matching_pages(Op.NOT_STARTS_WITH, (b"",)).tolist() == [N]


def test_fallback_repeated_column_never_all() -> None:
    values: list[Any] = [1, 2, 3]
    ci, oi = build_index(values, [0])
    pi = PageIndex.build(ci, oi, make_leaf("int", repeated=True), 3)
    assert pi.matching_pages(Op.LT, (10,)).tolist() == [S]
    assert pi.matching_pages(Op.IS_NOT_NULL).tolist() == [S]
    assert pi.matching_pages(Op.GT, (10,)).tolist() == [N]


def test_fallback_nan_literal_and_empty_lists() -> None:
    pi = fixture_index("c")
    for op in (Op.EQ, Op.NE, Op.LT, Op.GE):
        assert pi.matching_pages(op, (NAN,)).tolist() == [S, S, S, S], op
    assert pi.matching_pages(Op.IN, ()).tolist() == [N, N, N, N]
    assert pi.matching_pages(Op.NOT_IN, ()).tolist() == [S, S, S, S]


def test_fallback_huge_in_list() -> None:
    rng = random.Random(7)
    values = sorted(rng.randrange(10**9) for _ in range(20_000))
    ci, oi = build_index(values, list(range(0, 20_000, 100)))
    pi = PageIndex.build(ci, oi, make_leaf("int"), len(values))
    assert pi.ordered
    keys = tuple(rng.randrange(10**9) for _ in range(100_000))
    binary = pi.matching_pages(Op.IN, keys)
    linear = pi.matching_pages(Op.IN, keys, strategy="linear")
    assert binary.tolist() == linear.tolist()
    assert (binary == S).sum() > 150


def test_fallback_corpus_without_offset_index() -> None:
    path = CORPUS / "nan_in_stats.parquet"
    if not path.exists():
        missing("nan_in_stats.parquet is not in the corpus")
    with ParquetFile.open(path) as pf:
        assert not pf.has_offset_index(0, 0)
        assert PageIndex.load(pf, 0, 0) is None


def test_starts_with_on_numbers_only_prunes_null_pages() -> None:
    pi = fixture_index("a")
    assert pi.matching_pages(Op.STARTS_WITH, (b"1",)).tolist() == [S, S, N, S, S, S]
    assert pi.matching_pages(Op.NOT_STARTS_WITH, (b"1",)).tolist() == [S, S, N, S, S, S]


def test_uint64_keys_near_2_63_compare_exactly() -> None:
    """Regression: numpy searched uint64 bounds with an int key in float64 (2**63 - 1 == 2**63)."""
    el = SchemaElement(type=int(PhysicalType.INT64), name="u", repetition_type=1,
                       logicalType=LogicalType(INTEGER=IntType(bitWidth=64, isSigned=False)))
    leaf = LeafColumn(0, ("u",), el, 1, 0, TYPE_ORDER)
    lo, hi = 2**63, 2**63 + 10
    ci = ColumnIndex(null_pages=[False, False], boundary_order=1, null_counts=[0, 0],
                     min_values=[struct.pack("<Q", lo), struct.pack("<Q", hi)],
                     max_values=[struct.pack("<Q", lo), struct.pack("<Q", 2**64 - 1)])
    oi = OffsetIndex(page_locations=[PageLocation(offset=4, compressed_page_size=10,
                                                  first_row_index=0),
                                     PageLocation(offset=14, compressed_page_size=10,
                                                  first_row_index=5)])
    pi = PageIndex.build(ci, oi, leaf, 10)
    assert pi.ordered
    strategies: tuple[Literal["binary", "linear"], ...] = ("binary", "linear")
    for strategy in strategies:
        def match(op: LeafOp, *keys: int) -> list[int]:
            return [int(m) for m in pi.matching_pages(op, keys, strategy=strategy)]  # noqa: B023

        assert match(Op.EQ, 2**63 - 1) == [N, N], strategy
        assert match(Op.EQ, 2**63) == [A, N], strategy
        assert match(Op.IN, 2**63 - 1, 2**64) == [N, N], strategy
        assert match(Op.GT, -1) == [A, A], strategy


def test_offset_index_must_start_at_row_zero() -> None:
    from pqindex.errors import CorruptFileError

    ci, oi, values = int_index()
    assert oi.page_locations is not None
    oi.page_locations[0].first_row_index = 1
    with pytest.raises(CorruptFileError):
        PageIndex.build(ci, oi, make_leaf("int"), len(values))


# ---------------------------------------------------------------- binary vs linear


def _to_string(x: int) -> str:
    letters = "abcdefghij"
    return letters[x // 10 % 10] + letters[x % 10]


def random_column(rng: random.Random, kind: str) -> tuple[list[Any], list[int]]:
    """Pages with overlapping ranges, sorted ascending, descending or shuffled."""
    npages = rng.randint(1, 14)
    mins = sorted(rng.randint(0, 60) for _ in range(npages))
    maxs, top = [], -1
    for lo in mins:
        top = max(top, lo + rng.choice((0, 0, 1, 3, 8)))
        maxs.append(top)
    ranges = list(zip(mins, maxs, strict=True))
    layout = rng.choice(("asc", "desc", "shuffled"))
    if layout == "desc":
        ranges.reverse()
    elif layout == "shuffled":
        rng.shuffle(ranges)

    def conv(x: int, inner: bool) -> Any:
        if kind == "int":
            return x
        if kind == "double":
            v = x / 2 - 10
            return -0.0 if v == 0 and rng.random() < 0.5 else v
        return _to_string(x) + ("xyz"[: rng.randint(0, 3)] if inner else "")

    values: list[Any] = []
    starts: list[int] = []
    for lo, hi in ranges:
        starts.append(len(values))
        size = rng.randint(1, 6)
        if rng.random() < 0.12:
            values += [None] * size
            continue
        if kind == "double" and rng.random() < 0.05:
            values += [NAN] * size
            continue
        page = [conv(lo, False), conv(hi, False)]
        page += [conv(rng.randint(lo, hi), True) for _ in range(max(0, size - 2))]
        if rng.random() < 0.3:
            page.append(None)
        if kind == "double" and rng.random() < 0.2:
            page.append(NAN)
        rng.shuffle(page)
        values += page
    return values, starts


def random_predicates(rng: random.Random, kind: str, key: Callable[[Any], Any]
                      ) -> list[tuple[LeafOp, tuple[Any, ...], tuple[Any, ...]]]:
    """(op, keys for the index, literals for the truth) triples."""
    def lit() -> Any:
        x = rng.randint(-2, 72)
        if kind == "int":
            return x
        if kind == "double":
            return x / 2 - 10
        return _to_string(x) + ("x" if rng.random() < 0.2 else "")

    out: list[tuple[LeafOp, tuple[Any, ...], tuple[Any, ...]]] = []
    for op in (Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE):
        v = lit()
        out.append((op, (key(v),), (natural(v),)))
    for op in (Op.IN, Op.NOT_IN):
        vs = tuple(lit() for _ in range(rng.randint(1, 5)))
        out.append((op, tuple(key(v) for v in vs), tuple(natural(v) for v in vs)))
    for op in (Op.IS_NULL, Op.IS_NOT_NULL, Op.IS_NAN, Op.IS_NOT_NAN):
        out.append((op, (), ()))
    if kind == "string":
        for op in (Op.STARTS_WITH, Op.NOT_STARTS_WITH):
            p = _to_string(rng.randint(0, 70))[: rng.randint(0, 2)].encode()
            out.append((op, (p,), (p,)))
    return out


@pytest.mark.parametrize(("kind", "order"), [
    ("int", TYPE_ORDER), ("double", TYPE_ORDER), ("double", IEEE_ORDER), ("string", TYPE_ORDER)])
def test_binary_search_agrees_with_linear_scan(kind: str, order: ColumnOrder) -> None:
    rng = random.Random(f"{kind}-{order}")
    leaf = make_leaf(kind, order=order)
    ordered_cases = 0
    for case in range(300):
        values, starts = random_column(rng, kind)
        ci, oi = build_index(values, starts, null_counts=rng.random() < 0.85,
                             nan_counts=rng.random() < 0.8)
        pi = PageIndex.build(ci, oi, leaf, len(values))
        ordered_cases += pi.ordered
        ends = [*starts[1:], len(values)]
        for op, keys, lits in random_predicates(rng, kind, pi.order.key):
            linear = pi.matching_pages(op, keys, strategy="linear")
            what = f"case {case} {op.value} {lits} over {ci}"
            if pi.ordered:
                binary = pi.matching_pages(op, keys, strategy="binary")
                assert binary.tolist() == linear.tolist(), what
            truths = [[row_matches(op, lits, v) for v in values[s:e]]
                      for s, e in zip(starts, ends, strict=True)]
            assert_sound(linear, truths, what)
    assert ordered_cases > 100


# ---------------------------------------------------------------- real files


def truth_mask(arr: pa.ChunkedArray, op: LeafOp, lits: tuple[Any, ...]) -> np.ndarray:
    """Which rows match, with pyarrow.compute (SQL NULL and IEEE NaN semantics)."""
    if pa.types.is_float16(arr.type):
        arr = arr.cast(pa.float32())
    typ = arr.type
    valid = pc.is_valid(arr)
    floating = pa.types.is_floating(typ)
    nan = pc.is_nan(arr) if floating else pa.array(np.zeros(len(arr), bool))
    if op == Op.IS_NULL:
        m = pc.is_null(arr)
    elif op == Op.IS_NOT_NULL:
        m = valid
    elif op == Op.IS_NAN:
        m = nan
    elif op == Op.IS_NOT_NAN:
        m = pc.and_(valid, pc.invert(nan))
    elif op in (Op.IN, Op.NOT_IN):
        hit = pc.is_in(arr, value_set=pa.array(list(lits), type=typ))
        m = hit if op == Op.IN else pc.and_(valid, pc.invert(hit))
    elif op in (Op.STARTS_WITH, Op.NOT_STARTS_WITH):
        p = lits[0]
        py = [None if v is None else (v.encode() if isinstance(v, str) else v).startswith(p)
              for v in arr.to_pylist()]
        m = pa.array(py, pa.bool_())
        if op == Op.NOT_STARTS_WITH:
            m = pc.invert(m)
    else:
        fn = {Op.EQ: pc.equal, Op.NE: pc.not_equal, Op.LT: pc.less, Op.LE: pc.less_equal,
              Op.GT: pc.greater, Op.GE: pc.greater_equal}[op]
        m = fn(arr, pa.scalar(lits[0], type=typ))
    return np.asarray(pc.fill_null(m, False).to_numpy(zero_copy_only=False), dtype=bool)


def literals(arr: pa.ChunkedArray, rng: random.Random) -> list[Any]:
    """Values from the column, and a few around them."""
    if pa.types.is_float16(arr.type):
        arr = arr.cast(pa.float32())
    present = [v for v in arr.to_pylist() if v is not None and not is_nan(v)]
    if not present:
        return []
    ordered = sorted(set(present))
    picks = [ordered[0], ordered[-1], ordered[len(ordered) // 2]]
    picks += rng.sample(ordered, min(3, len(ordered)))
    if isinstance(ordered[0], (int, float, Decimal)) and not isinstance(ordered[0], bool):
        picks += [ordered[0] - 1, ordered[-1] + 1]
    return list(dict.fromkeys(picks))


def check_file_sound(path: Path, *, seed: int = 1) -> dict[str, int]:
    """Every predicate on every column chunk of the file: NONE and ALL pages verified."""
    rng = random.Random(seed)
    table = pq.read_table(path)
    counts = {"NONE": 0, "SOME": 0, "ALL": 0}
    with ParquetFile.open(path) as pf:
        offset = 0
        for rg in range(pf.num_row_groups):
            nrows = pf.row_group_rows(rg)
            for col, leaf in enumerate(pf.schema.leaves):
                pi = PageIndex.load(pf, rg, col)
                if pi is None:
                    continue
                arr = table.column(leaf.name).slice(offset, nrows)
                preds: list[tuple[LeafOp, tuple[Any, ...], tuple[Any, ...]]] = [
                    (op, (), ()) for op in (Op.IS_NULL, Op.IS_NOT_NULL, Op.IS_NAN,
                                            Op.IS_NOT_NAN)]
                if pi.order.comparison is not None:
                    lits = literals(arr, rng)
                    for v in lits:
                        for op in (Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE):
                            preds.append((op, (pi.order.key(v),), (v,)))
                    if lits:
                        some = tuple(rng.sample(lits, min(3, len(lits))))
                        for op in (Op.IN, Op.NOT_IN):
                            preds.append((op, tuple(pi.order.key(v) for v in some), some))
                    if lits and isinstance(lits[0], (str, bytes)):
                        for v in lits[:4]:
                            raw = v.encode() if isinstance(v, str) else v
                            for p in (raw[:1], raw[:3], raw):
                                preds += [(Op.STARTS_WITH, (p,), (p,)),
                                          (Op.NOT_STARTS_WITH, (p,), (p,))]
                bounds = [*pi.first_rows.tolist(), nrows]
                for op, keys, lits_ in preds:
                    got = pi.matching_pages(op, keys)
                    if pi.ordered:
                        linear = pi.matching_pages(op, keys, strategy="linear")
                        assert got.tolist() == linear.tolist()
                    mask = truth_mask(arr, op, lits_)
                    truths = [mask[bounds[p]:bounds[p + 1]].tolist()
                              for p in range(pi.num_pages)]
                    assert_sound(got, truths, f"{path.name} rg {rg} {leaf.name} "
                                              f"{op.value} {lits_!r}")
                    for m in got.tolist():
                        counts[Match(m).name] += 1
            offset += nrows
    return counts


def sample_table(n: int, order: str, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    idx = np.arange(n)
    if order == "desc":
        idx = idx[::-1].copy()
    elif order == "shuffled":
        idx = rng.permutation(n)
    floats = idx / 7.0 - 30.0
    nan_floats = floats.copy()
    nan_floats[idx % 17 == 3] = np.nan
    words = [f"w{i:05d}-{'xyz'[i % 3] * (i % 4)}" for i in idx.tolist()]
    return pa.table({
        "id": pa.array(idx, pa.int64()),
        "i32": pa.array((idx // 3).astype(np.int32), mask=idx % 11 == 5),
        "f64": pa.array(floats, mask=idx % 13 == 7),
        "f64_nan": pa.array(nan_floats),
        "str": pa.array(words, mask=idx % 19 == 2),
        "bin": pa.array([w.encode() + b"\xff" for w in words], pa.binary()),
        "day": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=int(i) // 5) for i in idx]),
        "ts": pa.array([dt.datetime(2021, 1, 1) + dt.timedelta(minutes=int(i)) for i in idx],
                       pa.timestamp("us")),
        "dec": pa.array([Decimal(int(i)) / 4 for i in idx], pa.decimal128(12, 2)),
        "flag": pa.array(idx % 100 < 40),
        "u64": pa.array(idx.astype(np.uint64) * np.uint64(3) + np.uint64(2**63), pa.uint64()),
        "nulls": pa.nulls(n, pa.int32()),
    })


@pytest.mark.parametrize("order", ["asc", "desc", "shuffled"])
@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_pyarrow_files_sound(tmp_path: Path, order: str, version: str) -> None:
    path = tmp_path / f"{order}.parquet"
    pq.write_table(sample_table(1_200, order), path, write_page_index=True,
                   max_rows_per_page=37, row_group_size=500, data_page_version=version,
                   use_dictionary=["str"])
    counts = check_file_sound(path)
    assert counts["NONE"] > 0 and counts["ALL"] > 0


def test_pyarrow_sorted_lookup_hits_one_page(tmp_path: Path) -> None:
    path = tmp_path / "asc.parquet"
    pq.write_table(sample_table(1_200, "asc"), path, write_page_index=True,
                   max_rows_per_page=37, row_group_size=500)
    with ParquetFile.open(path) as pf:
        col = [leaf.name for leaf in pf.schema.leaves].index("id")
        hits = []
        for rg in range(pf.num_row_groups):
            pi = PageIndex.load(pf, rg, col)
            assert pi is not None and pi.ordered
            got = pi.matching_pages(Op.EQ, (777,))
            hits += [(rg, p) for p in np.flatnonzero(got != N).tolist()]
            between = pi.select(Op.GE, (450,)) & pi.select(Op.LT, (520,))
            if rg == 0:  # pages of 37 rows: [444, 481) holds 444..449, [481, 500) all match
                assert between.maybe.intervals() == [(444, 500)]
                assert between.all.intervals() == [(481, 500)]
        assert hits == [(1, (777 - 500) // 37)]


def test_pyarrow_nan_without_nan_counts(tmp_path: Path) -> None:
    """pyarrow leaves NaN out of page bounds and writes no nan_counts: never ALL for <."""
    path = tmp_path / "nan.parquet"
    pq.write_table(sample_table(200, "asc"), path, write_page_index=True, max_rows_per_page=20)
    with ParquetFile.open(path) as pf:
        col = [leaf.name for leaf in pf.schema.leaves].index("f64_nan")
        pi = PageIndex.load(pf, 0, col)
        assert pi is not None and pi.reason is None and pi.nan_counts is None
        assert set(pi.matching_pages(Op.LT, (1000.0,)).tolist()) == {S}
        assert set(pi.matching_pages(Op.GT, (1000.0,)).tolist()) == {N}
        assert set(pi.matching_pages(Op.NE, (1000.0,)).tolist()) == {A}


def test_pyarrow_all_nan_page_drops_the_index(tmp_path: Path) -> None:
    path = tmp_path / "all_nan.parquet"
    x = np.arange(20, dtype=float)
    x[4:8] = np.nan
    pq.write_table(pa.table({"x": x}), path, write_page_index=True, max_rows_per_page=4)
    with ParquetFile.open(path) as pf:
        pi = PageIndex.load(pf, 0, 0)
        assert pi is not None and pi.reason == "no column index"
        assert set(pi.matching_pages(Op.LT, (0.0,)).tolist()) == {S}


@pytest.mark.parametrize("name", [
    "alltypes_tiny_pages.parquet",
    "int32_with_null_pages.parquet",
    "binary_truncated_min_max.parquet",
    "nan_in_stats.parquet",
    "floating_orders_nan_count.parquet",
])
def test_corpus_files_sound(name: str) -> None:
    path = CORPUS / name
    if not path.exists():
        missing(f"{name} not in corpus")
    check_file_sound(path)


def test_corpus_int32_with_null_pages_prunes() -> None:
    path = CORPUS / "int32_with_null_pages.parquet"
    if not path.exists():
        missing("nan_in_stats.parquet is not in the corpus")
    with ParquetFile.open(path) as pf:
        pi = PageIndex.load(pf, 0, 0)
        assert pi is not None
        assert pi.null_pages.any()
        answers_ = pi.matching_pages(Op.IS_NOT_NULL)
        assert (answers_[pi.null_pages] == N).all()
        assert (pi.matching_pages(Op.IS_NULL)[pi.null_pages] == A).all()


# ---------------------------------------------------------------- string / binary keys


@pytest.mark.parametrize("logical", [LogicalType(STRING=StringType()), None])
def test_byte_array_keys_equal_per_page_decode(logical: LogicalType | None) -> None:
    """String and binary bound keys are taken from the raw bounds without decoding each
    page; they must be what decoding every page (``page_bounds`` + the order's key)
    gives: invalid UTF-8, empty and null pages, long bounds, unordered pages."""
    from pqindex.format.values import bound_order, page_bounds

    el = SchemaElement(type=int(PhysicalType.BYTE_ARRAY), name="s", repetition_type=1,
                       logicalType=logical)
    leaf = LeafColumn(0, ("s",), el, 1, 0, TYPE_ORDER)
    order = bound_order(leaf)
    rng = random.Random(f"bytes-keys-{logical is not None}")
    alphabet = [b"a", b"b", b"\x00", b"\xff", b"\xc3\xa9", b"\xc3", b"z" * 40]
    checked = 0
    for case in range(300):
        pages = rng.randint(1, 12)
        null_pages, mins, maxs = [], [], []
        for _ in range(pages):
            if rng.random() < 0.15:
                null_pages.append(True)
                mins.append(b"")
                maxs.append(b"")
                continue
            lo, hi = (b"".join(rng.choices(alphabet, k=rng.randint(0, 4))) for _ in range(2))
            if rng.random() < 0.9:
                lo, hi = min(lo, hi), max(lo, hi)
            null_pages.append(False)
            mins.append(lo)
            maxs.append(hi)
        ci = ColumnIndex(null_pages=null_pages, min_values=mins, max_values=maxs,
                         boundary_order=0, null_counts=[0] * pages)
        oi = OffsetIndex(page_locations=[
            PageLocation(offset=4 + 100 * i, compressed_page_size=100, first_row_index=10 * i)
            for i in range(pages)])
        pi = PageIndex.build(ci, oi, leaf, 10 * pages)
        if pi.reason is not None:
            continue  # the whole index refused (min > max somewhere): no keys to compare
        for p in range(pages):
            b = page_bounds(ci, leaf, p)
            want = ((order.key(b.min), order.key(b.max))
                    if b.usable and b.min is not None and b.max is not None else None)
            assert pi.page_keys(p) == want, f"case {case} page {p}: {mins[p]!r}..{maxs[p]!r}"
            checked += want is not None
    assert checked > 300
