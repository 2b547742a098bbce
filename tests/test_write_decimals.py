"""Decimals as pqindex's writer stores them: precision <= 9 as INT32, <= 18 as INT64,
wider as FIXED_LEN_BYTE_ARRAY. Every reader must read the written values back, the
page index must bound each page's values exactly, and pruning on these columns must
keep every matching row (checked against pyarrow's full read + filter).
"""

from __future__ import annotations

import decimal
import itertools
import random
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.format.file import ParquetFile
from pqindex.format.values import page_bounds
from pqindex.io.source import LocalFileSource

ROWS = 3_000
PAGE_ROWS = 200
ROW_GROUP_ROWS = 1_000
# (precision, scale, the physical type the writer must choose)
SPECS = {
    "d9": (9, 2, "INT32"),
    "d10": (10, 0, "INT64"),
    "d18": (18, 4, "INT64"),
    "d19": (19, 3, "FIXED_LEN_BYTE_ARRAY"),
    "d38": (38, 10, "FIXED_LEN_BYTE_ARRAY"),
}


def _column(rng: random.Random, precision: int, scale: int) -> pa.Array:
    top = 10**precision - 1
    # Both extremes of the precision, zero, small and full-width magnitudes of both
    # signs, and nulls.
    fixed = [top, -top, 0, 1, -1, top // 7, -(top // 3)]
    drawn = [rng.randint(-top, top) if i % 2 else rng.randint(-(10**6), 10**6)
             for i in range(ROWS - len(fixed))]
    exact = decimal.Context(prec=50)  # the default 28 digits would round DECIMAL(38)
    values = [decimal.Decimal(u).scaleb(-scale, exact) for u in fixed + drawn]
    mask = np.zeros(ROWS, bool)
    mask[len(fixed)::13] = True
    return pa.array(values, pa.decimal128(precision, scale), mask=mask)


@pytest.fixture(scope="module")
def table() -> pa.Table:
    rng = random.Random(43)
    cols = {name: _column(rng, p, s) for name, (p, s, _) in SPECS.items()}
    return pa.table({"id": np.arange(ROWS, dtype=np.int64), **cols})


@pytest.fixture(scope="module")
def path(table: pa.Table, tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("decimals") / "d.parquet"
    # Sorted by the INT64 decimal so that its pages are disjoint and prunable.
    pqindex.write_table(table, p, sort_by="d18", row_group_rows=ROW_GROUP_ROWS,
                        page_rows=PAGE_ROWS, indexes={"distinct": ["d9"],
                                                      "zone_maps": ["d10", "d19"]})
    return p


def _sorted(t: pa.Table) -> pa.Table:
    return t.select(["id", *SPECS]).sort_by("id")


def test_physical_types_follow_the_precision(path: Path) -> None:
    schema = pq.ParquetFile(path).schema
    for name, (p, s, physical) in SPECS.items():
        col = schema.column(schema.names.index(name))
        assert col.physical_type == physical, name
        assert (col.precision, col.scale) == (p, s)


@pytest.mark.parametrize("reader", ["pyarrow", "duckdb", "polars", "pqindex"])
def test_every_reader_reads_the_written_values(path: Path, table: pa.Table, reader: str
                                               ) -> None:
    if reader == "pyarrow":
        got = pq.read_table(path)
    elif reader == "duckdb":
        import duckdb

        con = duckdb.connect()
        got = con.sql(f"SELECT * FROM read_parquet('{path}')").to_arrow_table()
        con.close()
    elif reader == "polars":
        import polars as pl

        got = pl.read_parquet(path).to_arrow()
    else:
        got = pqindex.dataset(str(path)).to_table()
    got = _sorted(got)
    for name in SPECS:
        # DuckDB returns DECIMAL(38, s) beyond precision 18; the values must agree.
        assert got.column(name).to_pylist() == table.column(name).to_pylist(), (reader, name)


@pytest.mark.spark
def test_spark_reads_the_written_values(spark: Any, path: Path, table: pa.Table) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _sorted(spark.read.parquet(str(path)).toArrow())
    for name in SPECS:
        assert got.column(name).to_pylist() == table.column(name).to_pylist(), name


def test_page_index_bounds_are_each_pages_min_and_max(path: Path) -> None:
    data = pq.read_table(path)
    checked = 0
    with ParquetFile(LocalFileSource(str(path))) as pf:
        names = data.schema.names
        start = 0
        for rg in range(pf.num_row_groups):
            rows = pf.row_group_rows(rg)
            for name in SPECS:
                col = names.index(name)
                ci, oi = pf.column_index(rg, col), pf.offset_index(rg, col)
                assert ci is not None and oi is not None and oi.page_locations is not None
                firsts = [loc.first_row_index for loc in oi.page_locations] + [rows]
                for page, (a, b) in enumerate(itertools.pairwise(firsts)):
                    values = data.column(name).slice(start + a, b - a)
                    bounds = page_bounds(ci, pf.leaf(col), page)
                    if values.null_count == len(values):
                        assert bounds.all_null
                        continue
                    mm = pc.min_max(values)
                    # Bounds may be looser, never tighter; here they are exact.
                    assert (bounds.min, bounds.max) == (mm["min"].as_py(), mm["max"].as_py())
                    assert bounds.null_count == values.null_count
                    checked += 1
            start += rows
    assert checked >= len(SPECS) * ROWS // PAGE_ROWS - 5


PREDICATES = [
    "d9 = {v9}", "d9 < 0", "d9 BETWEEN -1000.50 AND 1000.25", "d9 IN ({v9}, 9999999.99)",
    "d9 IS NULL", "d10 >= {v10}", "d10 = -9999999999", "d18 > {v18}",
    "d18 BETWEEN -0.0001 AND 0.0001", "d18 = 99999999999999.9999", "d19 < {v19}",
    "d19 = -9999999999999999.999", "d38 > 0", "d9 < 0 AND d18 > {v18}",
    "d10 = {v10} OR d19 IS NULL",
]


def _literal(v: decimal.Decimal) -> str:
    return format(v, "f")


@pytest.mark.parametrize("where", PREDICATES)
def test_pruning_keeps_every_matching_row(path: Path, table: pa.Table, where: str) -> None:
    picks = {f"v{k[1:]}": _literal(table.column(k)[1_234].as_py() or decimal.Decimal(0))
             for k in SPECS}
    where = where.format(**picks)
    import duckdb

    con = duckdb.connect()
    con.register("t", table)
    want = con.sql(f"SELECT id FROM t WHERE {where} ORDER BY id").to_arrow_table()
    con.close()
    scan = pqindex.dataset(str(path)).scan(columns=["id", *SPECS], where=where)
    got = scan.to_table()
    assert sorted(got.column("id").to_pylist()) == want.column("id").to_pylist(), where
    assert _sorted(got).equals(_sorted(table.take(want.column("id"))))


def test_sorted_int64_decimal_prunes_pages(path: Path, table: pa.Table) -> None:
    d18 = table.column("d18").drop_null().sort()
    lo, hi = d18[1_000].as_py(), d18[1_050].as_py()
    scan = pqindex.dataset(str(path)).scan(
        columns=["id", "d18"], where=f"d18 BETWEEN {_literal(lo)} AND {_literal(hi)}")
    got = scan.to_table()
    assert got.num_rows == 51
    # 51 sorted rows span at most two 200-row pages of the predicate column.
    assert scan.report.rows_matched == 51
    assert scan.report.pages_read <= 2 * 2
    assert scan.report.pages_read < scan.report.pages_total // 4
