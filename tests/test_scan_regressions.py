"""Regression tests for wrong-row bugs other Parquet readers shipped, on small handmade files.

Each test names the bug it pins. Files use 10-row pages (``max_rows_per_page``)
so the page index has something to prune; the expected rows are written out
by hand (or computed with plain Python under SQL three-valued logic) and
compared with ``pqindex.dataset(p).scan(columns, where).to_table()``: same
rows, same order, same schema as ``pyarrow.parquet.read_table``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pqindex
import scan_fixtures
import writers
from conftest import PARQUET_TESTING
from pqindex.format.column_index import PageIndex
from pqindex.format.file import ParquetFile
from pqindex.format.match import LeafOp, Match

CORPUS = PARQUET_TESTING / "data"
PAGE = 10


def write(path: Path, table: pa.Table, *, page_rows: int = PAGE, row_group: int = 1_000,
          **kw: Any) -> Path:
    kw.setdefault("write_page_index", True)
    pq.write_table(table, path, row_group_size=row_group, max_rows_per_page=page_rows,
                   write_batch_size=page_rows, **kw)
    return path


def assert_scan(path: Path, where: str, rows: Sequence[int],
                columns: Sequence[str] | None = None) -> None:
    """pqindex returns exactly ``rows`` (positions in the file) of ``columns``."""
    full = pq.read_table(path, columns=None if columns is None else list(columns))
    expected = full.take(pa.array(list(rows), pa.int64()))
    actual = pqindex.dataset(path).scan(columns=columns, where=where).to_table()
    assert actual.schema.equals(expected.schema, check_metadata=False), where
    got = [_canon(r) for r in actual.to_pylist()]
    want = [_canon(r) for r in expected.to_pylist()]
    if got != want:
        missing = [r for r in want if r not in got][:5]
        extra = [r for r in got if r not in want][:5]
        raise AssertionError(f"where {where}: {len(got)} rows, expected {len(want)}; "
                             f"missing {missing}, unexpected {extra}")


def _canon(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row.values())


def where_true(values: Sequence[Any], test: Callable[[Any], bool | None]) -> list[int]:
    """Positions where ``test`` (three-valued: None is unknown) is True."""
    return [i for i, v in enumerate(values) if test(v) is True]


def page_first_rows(path: Path, column: str, rg: int = 0) -> list[int]:
    with ParquetFile.open(path) as pf:
        col = next(c.index for c in pf.schema.leaves if c.name == column)
        oi = pf.offset_index(rg, col)
        assert oi is not None
        return [loc.first_row_index or 0 for loc in oi.page_locations or []]


# ------------------------------------------------------------------ unaligned pages


def test_unaligned_pages_do_not_return_another_rows_values(tmp_path: Path) -> None:
    """Readers that cut every column at the predicate column's page boundaries (or map
    page-level row selections of one column onto another's pages) returned values of
    other rows when columns paginate differently (arrow-rs / DataFusion page-index row
    selection bugs; parquet-java's ColumnIndexFilter test draws exactly this layout)."""
    n = 600
    key = np.arange(n, dtype=np.int64)
    table = pa.table({
        "key": pa.array(key),  # 8 bytes a value: ~120 rows a page
        "text": pa.array([f"row-{k:04d}-" + "t" * (k % 90 + 40) for k in range(n)]),  # few
        "small": pa.array((key * 7 % 100).astype(np.int8)),  # 1 byte: the most per page
    })
    path = tmp_path / "unaligned.parquet"
    pq.write_table(table, path, data_page_size=1024, write_batch_size=7, use_dictionary=False,
                   write_page_index=True, row_group_size=n)
    firsts = {c: page_first_rows(path, c) for c in table.column_names}
    assert len({tuple(f) for f in firsts.values()}) == 3, "pages must not line up"
    assert len(firsts["text"]) > 2 * len(firsts["key"])
    texts = table.column("text").to_pylist()
    smalls = table.column("small").to_pylist()
    cases = [
        ("key BETWEEN 117 AND 131", list(range(117, 132))),
        ("key = 255 OR key = 256", [255, 256]),
        (f"text = '{texts[301]}'", [301]),
        ("text LIKE 'row-04%'", list(range(400, 500))),
        (f"key > 580 OR text = '{texts[3]}'", [3, *range(581, n)]),
        ("small = 42 AND key < 300", where_true(range(300), lambda k: smalls[k] == 42)),
        (f"(key < 50 AND small > 90) OR text >= '{texts[590]}'",
         [k for k in range(n) if (k < 50 and smalls[k] > 90) or k >= 590]),
    ]
    for where, rows in cases:
        for columns in (["key", "text", "small"], ["text"], ["small"], ["key"]):
            assert_scan(path, where, rows, columns)


# ------------------------------------------------------------------ null pages


def _int_with_null_page(tmp_path: Path) -> tuple[Path, list[int | None]]:
    """x: 40 rows in 10-row pages; page 1 (rows 10-19) all null, nulls sprinkled elsewhere."""
    values: list[int | None] = [None if 10 <= i < 20 or i % 7 == 3 else i % 5 for i in range(40)]
    table = pa.table({"x": pa.array(values, pa.int32()), "row": pa.array(range(40), pa.int32())})
    return write(tmp_path / "null_page.parquet", table), values


def test_null_page_with_a_null_count_of_zero_keeps_its_rows(tmp_path: Path) -> None:
    """A writer that flags a page null but records a null count of 0 (seen from buggy
    writers; parquet-java and arrow-rs then skipped the page for IS NULL): the facts
    contradict each other, so neither may be used to drop the page."""
    src, values = _int_with_null_page(tmp_path)

    def lie(ci: Any) -> Any:
        assert ci.null_pages[1] is True and ci.null_counts[1] == PAGE
        ci.null_counts = [0 if i == 1 else c for i, c in enumerate(ci.null_counts)]
        return ci

    path = scan_fixtures.rewrite_column_index(src, tmp_path / "lying.parquet", 0, 0, lie)
    with ParquetFile.open(path) as pf:
        pi = PageIndex.load(pf, 0, 0)
        assert pi is not None
        assert pi.null_reason is not None, "contradictory null facts must be noticed"
        assert Match.NONE not in pi.matching_pages(LeafOp.IS_NULL).tolist()
    assert pq.read_table(path).equals(pq.read_table(src))
    nulls = [i for i, v in enumerate(values) if v is None]
    assert_scan(path, "x IS NULL", nulls)
    assert_scan(path, "x IS NULL", nulls, ["row"])
    assert_scan(path, "x IS NOT NULL", [i for i, v in enumerate(values) if v is not None])
    assert_scan(path, "x < 2 OR x IS NULL", where_true(values, lambda v: v is None or v < 2))


def test_null_page_without_null_counts_keeps_its_rows(tmp_path: Path) -> None:
    """Older writers leave ``null_counts`` out: null_pages alone must still be honoured
    and nothing read from the missing counts."""
    src, values = _int_with_null_page(tmp_path)

    def drop_counts(ci: Any) -> Any:
        ci.null_counts = None
        return ci

    path = scan_fixtures.rewrite_column_index(src, tmp_path / "nocounts.parquet", 0, 0,
                                              drop_counts)
    for where, test in [
        ("x IS NULL", lambda v: v is None),
        ("x IS NOT NULL", lambda v: v is not None),
        ("x < 2 OR x IS NULL", lambda v: v is None or v < 2),
        ("NOT (x >= 2)", lambda v: None if v is None else not v >= 2),
    ]:
        assert_scan(path, where, where_true(values, test))


def test_all_null_page_with_or_is_null(tmp_path: Path) -> None:
    """``x < 2 OR x IS NULL``: the all-null page fails ``x < 2`` (no bounds) but every row
    of it matches ``IS NULL``; readers that pruned each OR branch with the other's page
    answer, or treated a null page's empty bounds as values, dropped those rows."""
    path, values = _int_with_null_page(tmp_path)
    cases: list[tuple[str, Callable[[Any], bool | None]]] = [
        ("x < 2 OR x IS NULL", lambda v: v is None or v < 2),
        ("x IS NULL OR x < 2", lambda v: v is None or v < 2),
        ("x IS NULL", lambda v: v is None),
        ("x IS NULL AND row >= 15", lambda v: v is None),  # checked per row below
        ("NOT (x IS NOT NULL AND x >= 2)", lambda v: v is None or v < 2),
        ("NOT (x >= 2)", lambda v: None if v is None else v < 2),  # NULL rows: no match
        ("x = 0 OR x IS NULL OR x = 4", lambda v: v is None or v in (0, 4)),
    ]
    for where, test in cases:
        rows = where_true(values, test)
        if "row >= 15" in where:
            rows = [r for r in rows if r >= 15]
        assert_scan(path, where, rows)
        assert_scan(path, where, rows, ["row"])


def test_int32_with_null_pages_corpus() -> None:
    """parquet-testing's int32_with_null_pages.parquet (parquet-mr): null pages among
    ordinary ones."""
    path = CORPUS / "int32_with_null_pages.parquet"
    values = pq.read_table(path).column(0).to_pylist()
    v = next(x for x in values if x is not None)
    for where, test in [
        ("int32_field IS NULL", lambda x: x is None),
        ("int32_field < 0 OR int32_field IS NULL", lambda x: x is None or x < 0),
        (f"int32_field = {v}", lambda x: x == v if x is not None else None),
        (f"NOT (int32_field = {v})", lambda x: x != v if x is not None else None),
    ]:
        assert_scan(path, where, where_true(values, test))


def test_nulls_mixed_into_pages(tmp_path: Path) -> None:
    """Negations over pages holding NULLs: NOT, !=, NOT IN, NOT BETWEEN and NOT LIKE never
    select a NULL row (a NULL comparison is unknown, and so is its negation)."""
    n = 80
    ints = [None if i % 4 == 1 or 30 <= i < 40 else i % 6 for i in range(n)]
    strs = [None if i % 5 == 2 else f"s{i % 9}" for i in range(n)]
    table = pa.table({"i": pa.array(ints, pa.int64()), "s": pa.array(strs, pa.string())})
    path = write(tmp_path / "mixed.parquet", table)
    for col_values, cases in [
        (ints, [("i != 5", lambda v: v != 5), ("NOT (i = 5)", lambda v: v != 5),
                ("i NOT IN (1, 2)", lambda v: v not in (1, 2)),
                ("i NOT BETWEEN 1 AND 4", lambda v: not 1 <= v <= 4),
                ("NOT (i > 2 AND i < 5)", lambda v: not 2 < v < 5),
                ("i >= 0", lambda v: v >= 0)]),
        (strs, [("s != 's3'", lambda v: v != "s3"),
                ("s NOT LIKE 's1%'", lambda v: not v.startswith("s1")),
                ("NOT (s IN ('s0', 's8'))", lambda v: v not in ("s0", "s8")),
                ("s > 's4'", lambda v: v > "s4")]),
    ]:
        for where, test in cases:
            rows = where_true(col_values, lambda v, t=test: None if v is None else t(v))
            assert_scan(path, where, rows)
    both = where_true(range(n), lambda k: ints[k] is None or strs[k] is None)
    assert_scan(path, "i IS NULL OR s IS NULL", both)
    assert_scan(path, "NOT (i IS NOT NULL AND s IS NOT NULL)", both)


# ------------------------------------------------------------------ NaN


def _float_pages(tmp_path: Path, ftype: pa.DataType) -> tuple[Path, list[Any]]:
    """f: pages of numbers, a page of only NaN, a page mixing NaN, NULL and both zeros."""
    nan = float("nan")
    values: list[float | None] = [float(i % 7) for i in range(10)]
    values += [nan] * 10
    values += [nan, 1.0, None, -0.0, 0.0, nan, 3.5, None, -2.0, 1.0]
    values += [nan if i % 3 == 0 else None for i in range(10)]  # NaN and NULL only
    values += [5.0 + i for i in range(10)]
    table = pa.table({"f": pa.array(values, ftype), "row": pa.array(range(len(values)))})
    return write(tmp_path / f"nan_{ftype}.parquet", table), values


NAN_CASES: list[tuple[str, Callable[[float], bool]]] = [
    ("{c} != 1", lambda v: v != 1),  # NaN != 1 is true
    ("NOT ({c} < 1)", lambda v: not v < 1),
    ("NOT ({c} = 1)", lambda v: v != 1),
    ("{c} NOT IN (1.0, 2.0)", lambda v: v not in (1.0, 2.0) or math.isnan(v)),
    ("NOT ({c} BETWEEN 0 AND 5)", lambda v: not 0 <= v <= 5),
    ("{c} > 0 OR isnan({c})", lambda v: v > 0 or math.isnan(v)),
    ("isnan({c})", math.isnan),
    ("NOT isnan({c})", lambda v: not math.isnan(v)),
    ("{c} = 0", lambda v: v == 0),  # -0.0 = 0.0
    ("{c} < 0", lambda v: v < 0),
    ("{c} <= -0.0", lambda v: v <= 0),
    ("{c} >= 1", lambda v: v >= 1),
    ("NOT ({c} > 100)", lambda v: not v > 100),
]


@pytest.mark.parametrize("ftype", [pa.float64(), pa.float32()], ids=["double", "float"])
def test_nan_rows_are_not_dropped_by_pruning(tmp_path: Path, ftype: pa.DataType) -> None:
    """NaN compares false with everything but ``!=``: a page of only NaN, or NaN bounds,
    must not make ``x != 1`` or ``NOT (x < 1)`` skip the page (parquet-java / arrow-rs
    NaN-in-statistics bugs, PARQUET-1222)."""
    path, values = _float_pages(tmp_path, ftype)
    for where, test in NAN_CASES:
        rows = where_true(values, lambda v, t=test: None if v is None else t(v))
        assert_scan(path, where.format(c="f"), rows)
        assert_scan(path, where.format(c="f"), rows, ["row"])


def test_nan_in_statistics_corpus() -> None:
    """nan_in_stats.parquet (parquet-cpp 1.3): NaN written as a row group's max."""
    path = CORPUS / "nan_in_stats.parquet"
    values = pq.read_table(path).column("x").to_pylist()
    for where, test in NAN_CASES:
        rows = where_true(values, lambda v, t=test: None if v is None else t(v))
        assert_scan(path, where.format(c="x"), rows)


def test_float_orders_with_nan_counts_corpus() -> None:
    """floating_orders_nan_count.parquet: IEEE_754_TOTAL_ORDER bounds and nan_counts."""
    path = CORPUS / "floating_orders_nan_count.parquet"
    table = pq.read_table(path)
    for name in table.column_names:
        values = [float(v) for v in table.column(name).to_pylist()]
        for where, test in NAN_CASES:
            assert_scan(path, where.format(c=name), where_true(values, test), [name])


# ------------------------------------------------------------------ unsigned


def _unsigned_table() -> tuple[pa.Table, dict[str, list[int | None]]]:
    u64 = [2**63 + 5, 7, 2**64 - 1, None, 2**63, 2**63 - 1, 0, 2**64 - 2, 3, 2**63 + 1] * 3
    u32 = [2**31 + 10, 1, 2**32 - 1, 2**31, None, 5, 2**31 - 1, 0, 2**32 - 2, 17] * 3
    u8 = [200, 1, 255, None, 128, 127, 0, 254, 3, 100] * 3
    cols = {"u64": (u64, pa.uint64()), "u32": (u32, pa.uint32()), "u8": (u8, pa.uint8())}
    table = pa.table({k: pa.array(v, t) for k, (v, t) in cols.items()})
    return table, {k: v for k, (v, _) in cols.items()}


UNSIGNED_CASES: list[tuple[str, str, Callable[[int], bool]]] = [
    ("u64", "u64 > 9223372036854775807", lambda v: v > 2**63 - 1),
    ("u64", "u64 < 10", lambda v: v < 10),
    ("u64", "u64 = 18446744073709551615", lambda v: v == 2**64 - 1),
    ("u64", "u64 BETWEEN 9223372036854775808 AND 18446744073709551614",
     lambda v: 2**63 <= v <= 2**64 - 2),
    ("u64", "u64 IN (0, 9223372036854775808, 18446744073709551614)",
     lambda v: v in (0, 2**63, 2**64 - 2)),
    ("u64", "u64 >= 0", lambda v: True),
    ("u64", "u64 < 0", lambda v: False),
    ("u64", "u64 != 7", lambda v: v != 7),
    ("u32", "u32 > 2147483647", lambda v: v > 2**31 - 1),
    ("u32", "u32 <= 17", lambda v: v <= 17),
    ("u32", "u32 = 4294967295", lambda v: v == 2**32 - 1),
    ("u32", "u32 NOT BETWEEN 2147483648 AND 4294967294", lambda v: not 2**31 <= v <= 2**32 - 2),
    ("u8", "u8 > 127", lambda v: v > 127),
    ("u8", "u8 < 300", lambda v: True),
    ("u8", "u8 = 300", lambda v: False),
    ("u8", "u8 >= -1", lambda v: True),
]


@pytest.mark.parametrize("writer", ["pyarrow", "duckdb"])
def test_unsigned_columns_compare_as_unsigned(tmp_path: Path, writer: str) -> None:
    """UINT_64 / UINT_32 are stored in signed physical types: a reader comparing the
    raw bounds as signed prunes the pages of values above 2**63 / 2**31 (parquet-java
    PARQUET-1244 era statistics, arrow-rs and DuckDB unsigned-stats bugs)."""
    table, values = _unsigned_table()
    if writer == "pyarrow":
        path = write(tmp_path / "unsigned.parquet", table, page_rows=5)
    else:
        import duckdb

        path = tmp_path / "unsigned_duckdb.parquet"
        con = duckdb.connect()
        con.register("t", table)
        con.execute(f"COPY t TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 10)")
        con.close()
    for col, where, test in UNSIGNED_CASES:
        rows = where_true(values[col], lambda v, t=test: None if v is None else t(v))
        assert_scan(path, where, rows)


# ------------------------------------------------------------------ truncated bounds


def test_truncated_string_bounds_corpus() -> None:
    """binary_truncated_min_max.parquet (arrow-rs): bounds truncated to a prefix (min
    rounded down, max rounded up); a reader trusting them as values drops the rows
    whose value is longer than the bound."""
    path = CORPUS / "binary_truncated_min_max.parquet"
    table = pq.read_table(path)
    for name in table.column_names:
        values = table.column(name).to_pylist()
        is_binary = isinstance(values[0], bytes)

        def lit(v: Any, b: bool = is_binary) -> str:
            return f"X'{v.hex()}'" if b else "'" + v.replace("'", "''") + "'"

        for v in sorted(set(values)):
            for op, test in [("=", lambda a, v=v: a == v), (">=", lambda a, v=v: a >= v),
                             ("<", lambda a, v=v: a < v), ("!=", lambda a, v=v: a != v)]:
                assert_scan(path, f"{name} {op} {lit(v)}", where_true(values, test), [name])
            prefix = v[: max(1, len(v) - 3)]
            if not is_binary and "%" not in prefix and "_" not in prefix:
                assert_scan(path, f"{name} LIKE '{prefix}%'",
                            where_true(values, lambda a, p=prefix: a.startswith(p)), [name])


@pytest.mark.spark
def test_truncated_string_bounds_spark(written_files: writers.FileCache) -> None:
    """parquet-java truncates column-index bounds to 64 bytes: ``long_text`` values are
    100 characters, so every page bound is a prefix."""
    path = written_files["spark"]
    with ParquetFile.open(path) as pf:
        col = next(c.index for c in pf.schema.leaves if c.name == "long_text")
        ci = pf.column_index(0, col)
        assert ci is not None and ci.max_values is not None
        assert max(len(m) for m in ci.max_values) <= 64, "bounds are truncated"
    values = pq.read_table(path, columns=["long_text"]).column(0).to_pylist()
    firsts = page_first_rows(path, "long_text")
    picks = sorted({values[firsts[1]], values[firsts[1] - 1], values[firsts[-1]], values[0],
                    values[len(values) // 2], values[-1]})
    for v in picks:
        q = "'" + v + "'"
        for where, test in [
            (f"long_text = {q}", lambda a, v=v: a == v),
            (f"long_text <= {q}", lambda a, v=v: a <= v),
            (f"long_text > {q}", lambda a, v=v: a > v),
            (f"long_text IN ({q}, 'zzz')", lambda a, v=v: a == v),
            (f"long_text LIKE '{v[:70]}%'", lambda a, v=v: a.startswith(v[:70])),
            (f"long_text != {q}", lambda a, v=v: a != v),
        ]:
            assert_scan(path, where, where_true(values, test), ["id", "long_text"])


# ------------------------------------------------------------------ decimals


@pytest.mark.parametrize("as_integer", [False, True], ids=["fixed_len_byte_array", "int32/64"])
def test_decimal_columns_compare_numerically(tmp_path: Path, as_integer: bool) -> None:
    """Decimals are big-endian two's complement (FLBA / BYTE_ARRAY) or INT32/INT64:
    comparing the bytes unsigned puts every negative value after the positives."""
    d = [Decimal(k * 37 % 401 - 200) / 100 for k in range(60)]
    d[5] = None  # type: ignore[call-overload]
    d[33] = None  # type: ignore[call-overload]
    table = pa.table({
        "d9": pa.array(d, pa.decimal128(9, 2)),
        "d18": pa.array([None if v is None else v * 1000 for v in d], pa.decimal128(18, 2)),
        "d38": pa.array([None if v is None else v * 10**20 for v in d], pa.decimal128(38, 2)),
    })
    kw = {"store_decimal_as_integer": True} if as_integer else {}
    path = write(tmp_path / "decimals.parquet", table, **kw)
    values = {c: table.column(c).to_pylist() for c in table.column_names}
    cases: list[tuple[str, str, Callable[[Decimal], bool]]] = [
        ("d9", "d9 < 0", lambda v: v < 0),
        ("d9", "d9 >= -0.01", lambda v: v >= Decimal("-0.01")),
        ("d9", "d9 = -1.50", lambda v: v == Decimal("-1.5")),
        ("d9", "d9 = -1.5", lambda v: v == Decimal("-1.5")),
        ("d9", "d9 BETWEEN -0.5 AND 0.5", lambda v: Decimal("-0.5") <= v <= Decimal("0.5")),
        ("d9", "d9 = 1.005", lambda v: False),
        ("d9", "d9 != 1.005", lambda v: True),
        ("d9", "d9 < 1.005", lambda v: v <= Decimal("1.00")),
        ("d9", "d9 IN (-2.00, 1.99, 0)", lambda v: v in (Decimal(-2), Decimal("1.99"), 0)),
        ("d18", "d18 < -1000", lambda v: v < -1000),
        ("d18", "NOT (d18 > 0)", lambda v: not v > 0),
        ("d38", "d38 > -50000000000000000000", lambda v: v > Decimal(-5 * 10**19)),
        ("d38", "d38 <= -100000000000000000000", lambda v: v <= Decimal(-(10**20))),
    ]
    for col, where, test in cases:
        rows = where_true(values[col], lambda v, t=test: None if v is None else t(v))
        assert_scan(path, where, rows)


@pytest.mark.parametrize("name", ["int32_decimal.parquet", "int64_decimal.parquet",
                                  "byte_array_decimal.parquet", "fixed_length_decimal.parquet",
                                  "fixed_length_decimal_legacy.parquet"])
def test_decimal_corpus_files(name: str) -> None:
    path = CORPUS / name
    values = pq.read_table(path).column("value").to_pylist()
    for where, test in [("value > 10", lambda v: v > 10), ("value = 3.00", lambda v: v == 3),
                        ("value <= 2.5", lambda v: v <= Decimal("2.5")),
                        ("value != 24", lambda v: v != 24)]:
        assert_scan(path, where, where_true(values, test))


# ------------------------------------------------------------------ time


def test_timestamps_with_and_without_time_zone(tmp_path: Path) -> None:
    """Instants (isAdjustedToUTC) compare in UTC whatever the Arrow time zone; naive
    timestamps compare as written; literals with an offset are converted to UTC."""
    base = dt.datetime(2024, 3, 10, 0, 0, 0)
    naive = [base + dt.timedelta(minutes=97 * k) for k in range(60)]
    utc = [v.replace(tzinfo=dt.UTC) for v in naive]
    table = pa.table({
        "ts_utc": pa.array(utc, pa.timestamp("us", tz="UTC")),
        "ts_ny": pa.array(utc, pa.timestamp("ms", tz="America/New_York")),
        "ts_naive": pa.array(naive, pa.timestamp("ns")),
        "ts_s": pa.array(naive, pa.timestamp("s")),
    })
    path = write(tmp_path / "ts.parquet", table)
    cut = base + dt.timedelta(hours=30)
    after = where_true(naive, lambda v: v > cut)
    iso = cut.isoformat(sep=" ")
    for col in table.column_names:
        assert_scan(path, f"{col} > TIMESTAMP '{iso}'", after)
        assert_scan(path, f"{col} > '{iso}'", after)
        assert_scan(path, f"NOT ({col} <= TIMESTAMP '{iso}')", after)
    shifted = (cut + dt.timedelta(hours=2)).isoformat(sep=" ")
    for col in ("ts_utc", "ts_ny"):
        assert_scan(path, f"{col} > TIMESTAMP '{shifted}+02:00'", after)
        assert_scan(path, f"{col} > TIMESTAMP '{iso}Z'", after)
    exact = naive[17]
    assert_scan(path, f"ts_naive = TIMESTAMP '{exact.isoformat(sep=' ')}'", [17])
    assert_scan(path, f"ts_ny = TIMESTAMP '{exact.isoformat(sep=' ')}'", [17])
    assert_scan(path, f"ts_utc IN (TIMESTAMP '{exact.isoformat(sep=' ')}', "
                      f"TIMESTAMP '{naive[40].isoformat(sep=' ')}')", [17, 40])
    day = dt.date(2024, 3, 12)
    assert_scan(path, f"ts_utc >= DATE '{day}'", where_true(naive, lambda v: v.date() >= day))
    assert_scan(path, f"ts_naive < DATE '{day}'", where_true(naive, lambda v: v.date() < day))


def test_date_literals(tmp_path: Path) -> None:
    days = [dt.date(2020, 1, 1) + dt.timedelta(days=3 * k) for k in range(50)]
    days[7] = None  # type: ignore[call-overload]
    table = pa.table({"day": pa.array(days, pa.date32()), "k": pa.array(range(50))})
    path = write(tmp_path / "dates.parquet", table)
    d = dt.date(2020, 2, 3)
    cases: list[tuple[str, Callable[[dt.date], bool]]] = [
        (f"day = DATE '{d}'", lambda v: v == d),
        (f"day >= '{d}'", lambda v: v >= d),
        (f"day < TIMESTAMP '{d} 12:00:00'", lambda v: v <= d),
        (f"day <= TIMESTAMP '{d} 00:00:00'", lambda v: v <= d),
        (f"day > TIMESTAMP '{d} 00:00:01'", lambda v: v > d),
        (f"day BETWEEN DATE '2020-01-10' AND DATE '{d}'",
         lambda v: dt.date(2020, 1, 10) <= v <= d),
        ("day IN (DATE '2020-01-01', DATE '2020-01-02', DATE '2020-03-01')",
         lambda v: v in (dt.date(2020, 1, 1), dt.date(2020, 3, 1))),
        (f"NOT (day != DATE '{d}')", lambda v: v == d),
        ("day < DATE '1969-12-31'", lambda v: False),
    ]
    for where, test in cases:
        assert_scan(path, where, where_true(days, lambda v, t=test: None if v is None else t(v)))


# ------------------------------------------------------------------ structs


def test_predicate_on_a_field_inside_a_struct(tmp_path: Path) -> None:
    """``point.a`` is NULL when ``point`` is: the parent's nulls must reach the leaf both
    in pruning (the leaf's null counts include them) and in the row filter."""
    n = 80
    points = [None if k % 10 == 6 or 40 <= k < 50 else
              {"a": None if k % 7 == 2 else k % 13, "b": f"b{k % 4}",
               "inner": {"x": k * 3 if k % 11 else None}} for k in range(n)]
    table = pa.table({
        "k": pa.array(range(n), pa.int64()),
        "point": pa.array(points, pa.struct([("a", pa.int32()), ("b", pa.string()),
                                             ("inner", pa.struct([("x", pa.int64())]))])),
    })
    path = write(tmp_path / "struct.parquet", table)

    def field(p: Any, *names: str) -> Any:
        for name in names:
            if p is None:
                return None
            p = p[name]
        return p

    a = [field(p, "a") for p in points]
    b = [field(p, "b") for p in points]
    x = [field(p, "inner", "x") for p in points]
    cases: list[tuple[str, list[Any], Callable[[Any], bool | None]]] = [
        ("point.a = 5", a, lambda v: v == 5),
        ("point.a IS NULL", a, lambda v: v is None),
        ("point.a IS NOT NULL", a, lambda v: v is not None),
        ("NOT (point.a > 6)", a, lambda v: not v > 6),
        ("point.b = 'b2'", b, lambda v: v == "b2"),
        ("point.b LIKE 'b1%'", b, lambda v: v.startswith("b1")),
        ("point.inner.x >= 120", x, lambda v: v >= 120),
        ("point.inner.x IS NULL", x, lambda v: v is None),
        ('"point"."a" IN (1, 2, 3)', a, lambda v: v in (1, 2, 3)),
    ]
    for where, values, test in cases:
        if "IS " in where:
            rows = where_true(values, test)
        else:
            rows = where_true(values, lambda v, t=test: None if v is None else t(v))
        assert_scan(path, where, rows)
        assert_scan(path, where, rows, ["k"])
    assert_scan(path, "point.b IS NULL OR k = 3",
                where_true(range(n), lambda k: points[k] is None or k == 3))


def test_struct_field_predicate_on_other_writers(written_files: writers.FileCache) -> None:
    """The shared table's ``point`` struct (NULL every 10th row) as DuckDB and DataFusion
    write it."""
    points = writers.make_table().column("point").to_pylist()
    a = [None if p is None else p["a"] for p in points]
    for name in ("duckdb", "datafusion", "polars", "pyarrow_v2_none_plain"):
        path = written_files[name]
        assert_scan(path, "point.a = 42", where_true(a, lambda v: None if v is None else v == 42),
                    ["id", "point"])
        assert_scan(path, "point.a IS NULL", where_true(a, lambda v: v is None), ["id"])


def test_float16_bounds(tmp_path: Path) -> None:
    """FLOAT16 (2-byte FLBA) bounds decode as half floats, not as bytes."""
    vals = np.array([(k % 17 - 8) / 4 for k in range(60)], dtype=np.float16)
    vals[[3, 30]] = np.nan
    table = pa.table({"h": pa.array(vals, pa.float16())})
    path = write(tmp_path / "half.parquet", table)
    values = [float(v) for v in vals]
    for where, test in NAN_CASES:
        assert_scan(path, where.format(c="h"), where_true(values, test))


# ------------------------------------------------------------------ count-only scans


def test_count_only_scan_keeps_the_row_count(written_files: writers.FileCache) -> None:
    """``columns=[]`` asks for the number of matching rows only (``COUNT(*)``); pyarrow's
    ``read_table(columns=[])`` keeps the row count, and so must the scan."""
    path = written_files["pyarrow_v1_none_dict"]
    ds = pqindex.dataset(path)
    assert sum(b.num_rows for b in ds.scan(columns=[], where="id < 100").to_batches()) == 100
    assert pq.read_table(path, columns=[]).num_rows == writers.NUM_ROWS
    assert ds.scan(columns=[]).to_table().num_rows == writers.NUM_ROWS
    assert ds.scan(columns=[], where="id < 100").to_table().num_rows == 100


# ------------------------------------------------------------------ literals beyond the type


def test_literal_beyond_float_range_under_type_defined_order() -> None:
    """A finite literal beyond FLOAT's range (1e300) stays unrounded: ``x < 1e300`` holds
    for every non-NaN value, ``x = 1e300`` for none."""
    path = CORPUS / "floating_orders_nan_count.parquet"
    values = [float(v) for v in pq.read_table(path, columns=["float_typedef"]).column(0)
              .to_pylist()]
    assert_scan(path, "float_typedef < 1e300", where_true(values, lambda v: v < 1e300))
    assert_scan(path, "float_typedef = 1e300", [])


@pytest.mark.parametrize(("column", "where", "test"), [
    ("float_ieee754", "float_ieee754 < 1e300", lambda v: v < 1e300),
    ("float_ieee754", "float_ieee754 IN (1e300, 1.0)", lambda v: v == 1.0),
    ("float16_ieee754", "float16_ieee754 != 70000", lambda v: v != 70000),
], ids=["float-lt", "float-in", "float16-ne"])
def test_literal_beyond_float_range_under_total_order(column: str, where: str,
                                                      test: Callable[[float], bool]) -> None:
    path = CORPUS / "floating_orders_nan_count.parquet"
    values = [float(v) for v in pq.read_table(path, columns=[column]).column(0).to_pylist()]
    assert_scan(path, where, where_true(values, test), [column])


# ------------------------------------------------------------------ empty files


def test_empty_pyarrow_file_in_a_dataset(tmp_path: Path) -> None:
    """A job whose filter matched nothing leaves an empty part file next to the others."""
    table = pa.table({"a": pa.array([1, 2, 3], pa.int64()),
                      "flag": pa.array([True, False, None])})
    pq.write_table(table, tmp_path / "part-0.parquet", write_page_index=True)
    pq.write_table(table.slice(0, 0), tmp_path / "part-1.parquet", write_page_index=True)
    assert pq.read_table(tmp_path / "part-1.parquet").num_rows == 0
    ds = pqindex.dataset(tmp_path)
    assert ds.scan(where="a >= 2").to_table().column("a").to_pylist() == [2, 3]


def test_file_without_row_groups_in_a_dataset(tmp_path: Path) -> None:
    table = pa.table({"a": pa.array([1, 2, 3], pa.int64()),
                      "flag": pa.array([True, False, None])})
    pq.write_table(table, tmp_path / "part-0.parquet", write_page_index=True)
    with pq.ParquetWriter(tmp_path / "part-1.parquet", table.schema):
        pass
    ds = pqindex.dataset(tmp_path)
    assert ds.scan(where="a >= 2").to_table().column("a").to_pylist() == [2, 3]
    assert ds.scan(where="flag IS NULL").to_table().column("a").to_pylist() == [3]
