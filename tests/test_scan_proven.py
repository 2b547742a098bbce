"""Conjuncts the page index proves true are not evaluated (issue 43).

A predicate over several columns, on row groups whose rows are mostly uncertain,
is evaluated column by column on the encoded pages (executor._rows_by_columns). A
column whose page index says every row of the uncertain pages matches its
conjuncts is not evaluated there; where only some of its pages are proven, the
others alone are. Checked against DuckDB on files of pyarrow, pqindex and DuckDB:
dates, decimals stored as INT32, INT64 and FIXED_LEN_BYTE_ARRAY, a column with
nulls, doubles with NaN (compared with `<` only: DuckDB orders NaN above every
number, IEEE and pqindex do not)."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.scan import executor

ROWS = 40_000
ROW_GROUP = 10_000
COLUMNS = ["d", "dec9", "dec15", "dec30", "q", "x", "price"]


def _table() -> pa.Table:
    rng = np.random.default_rng(4343)
    days = np.sort(rng.integers(8036, 10561, ROWS)).astype(np.int32)  # sorted dates
    step = np.sort(rng.integers(0, 1_000_000, ROWS))  # sorted, as the dates
    q = rng.integers(1, 51, ROWS)
    x = rng.normal(size=ROWS)
    x[rng.random(ROWS) < 0.01] = np.nan
    qn = pa.array(q, pa.int64(), mask=rng.random(ROWS) < 0.03)
    return pa.table({
        "d": pa.array(days, pa.date32()),
        "dec9": pa.array([Decimal(int(v)).scaleb(-2) for v in step], pa.decimal128(9, 2)),
        "dec15": pa.array([Decimal(int(v)).scaleb(-2) for v in step], pa.decimal128(15, 2)),
        "dec30": pa.array([Decimal(int(v)).scaleb(-2) for v in step], pa.decimal128(30, 2)),
        "q": qn,
        "x": pa.array(x),
        "price": pa.array(rng.integers(0, 10**6, ROWS)),
    })


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("proven")
    t = _table()
    out = {"pyarrow": d / "pyarrow.parquet", "pqindex": d / "pqindex.parquet",
           "duckdb": d / "duckdb.parquet", "one_row_group": d / "one.parquet"}
    # One row group: its columns' conjuncts are matched side by side.
    pq.write_table(t, out["one_row_group"], row_group_size=ROWS, data_page_size=4096,
                   write_page_index=True, store_decimal_as_integer=True)
    # Decimals as INT32 / INT64 / FIXED_LEN_BYTE_ARRAY by precision.
    pq.write_table(t, out["pyarrow"], row_group_size=ROW_GROUP, data_page_size=4096,
                   write_page_index=True, store_decimal_as_integer=True)
    pqindex.write_table(t, out["pqindex"], row_group_rows=ROW_GROUP, page_rows=500)
    con = duckdb.connect()
    con.register("t", t)
    con.execute(f"COPY t TO '{out['duckdb']}' (FORMAT parquet, ROW_GROUP_SIZE {ROW_GROUP})")
    con.close()
    return out


@pytest.fixture
def evaluated() -> Iterator[list[str]]:
    """Columns whose conjuncts the exact check evaluated on their whole encoded chunks."""
    seen: list[str] = []
    orig = executor.RowGroupReader.encoded_matches

    def spy(self: executor.RowGroupReader, expr: Any, col: int) -> Any:
        seen.append(self.pf.leaf(col).path[0])
        return orig(self, expr, col)

    executor.RowGroupReader.encoded_matches = spy  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        executor.RowGroupReader.encoded_matches = orig  # type: ignore[method-assign]


WHERES = [
    # Most rows of the middle row groups proven by the dates' pages.
    "d >= DATE '1992-06-01' AND d < DATE '1998-06-01' AND q < 24",
    "d BETWEEN DATE '1993-01-01' AND DATE '1997-12-31' AND q >= 10 AND x < 0.3",
    "dec9 >= 1000.00 AND dec9 < 9000.00 AND q < 30",
    "dec15 > 500.00 AND dec15 <= 9500.00 AND q <> 7 AND price < 500000",
    "dec30 >= 100.00 AND dec30 < 9900.00 AND q IS NOT NULL AND q < 40",
    "dec15 >= 100.00 AND d < DATE '1998-01-01' AND x < 0.5",
    # The proven column's edge pages hold rows that fail.
    "d > DATE '1992-01-10' AND d < DATE '1998-11-20' AND q = 3",
    # Nothing proven: every conjunct evaluated.
    "q < 24 AND x < 0",
    "q < 24 AND x < 0 AND price >= 250000 AND dec15 < 5000.00",
    "q = 51 AND x < 0",  # no row: the groups after an empty one may be skipped
]


def _duckdb_rows(path: Path, where: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    try:
        t = con.sql(f"SELECT {', '.join(COLUMNS)} FROM read_parquet('{path}') "
                    f"WHERE {where}").to_arrow_table()
    finally:
        con.close()
    return _sorted_rows(t)


def _sorted_rows(t: pa.Table) -> list[tuple[Any, ...]]:
    # NaN compares unequal to itself: rows compared with NaN as a string.
    rows = [tuple("nan" if isinstance(v, float) and v != v else v for v in r.values())
            for r in t.select(COLUMNS).to_pylist()]
    return sorted(rows, key=repr)


@pytest.mark.parametrize("writer", ["pyarrow", "pqindex", "duckdb", "one_row_group"])
@pytest.mark.parametrize("where", WHERES)
def test_rows_equal_duckdb(files: dict[str, Path], writer: str, where: str) -> None:
    got = pqindex.dataset(str(files[writer])).scan(columns=COLUMNS, where=where).to_table()
    assert _sorted_rows(got) == _duckdb_rows(files[writer], where)


def test_proven_column_is_not_evaluated(files: dict[str, Path], evaluated: list[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """On pyarrow's file (a page index, dates sorted), the middle row groups' date
    pages all fall in the range: only ``q`` is evaluated there, and the rows are
    DuckDB's."""
    where = "d >= DATE '1992-03-01' AND d < DATE '1998-10-01' AND q < 24"
    pages: list[int] = []
    orig = executor.RowGroupReader.encoded_page_matches

    def spy(self: executor.RowGroupReader, expr: Any, col: int, rows: Any) -> Any:
        assert self.pf.leaf(col).path[0] == "d"
        assert rows.count() * 2 <= self.n
        pages.append(self.rg)
        return orig(self, expr, col, rows)

    monkeypatch.setattr(executor.RowGroupReader, "encoded_page_matches", spy)
    got = pqindex.dataset(str(files["pyarrow"])).scan(columns=COLUMNS, where=where).to_table()
    assert _sorted_rows(got) == _duckdb_rows(files["pyarrow"], where)
    # The middle row groups' statistics prove the dates; the first and last row
    # groups' page indexes prove most of their pages, and only the others are
    # evaluated (not the whole chunks).
    assert evaluated.count("q") == 4
    assert evaluated.count("d") == 0
    assert sorted(pages) == [0, 3]
