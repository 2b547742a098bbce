"""``pqindex.write_table`` and ``pqindex.Writer``: plain Parquet every reader reads
unchanged, with a page index on every chunk, sorting metadata, truncated bounds,
Bloom filters, the dictionary decision, and embedded indexes.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import pqindex
from pqindex.cli import cli
from pqindex.format.bloom import plain_bytes
from pqindex.format.file import ParquetFile
from pqindex.indexes.region import REGION_KEY, read_region

ROWS = 6_000
ROW_GROUP_ROWS = 2_500
PAGE_ROWS = 200
CATEGORIES = [f"cat-{i:02d}" for i in range(10)]
EMBEDDED = {
    "distinct": ["category", "small"],
    "bloom": ["long_text"],
    "zone_maps": ["amount", "ts", "price", "id"],
    "hll": ["id", "category"],
}
BLOOM = ["id", "long_text"]


def make_table(rows: int = ROWS, seed: int = 7) -> pa.Table:
    """Unsorted rows of many types; ``id`` is a permutation of 0..rows-1."""
    rng = np.random.default_rng(seed)
    ids = rng.permutation(rows).astype(np.int64)
    amount = rng.normal(0, 100, rows)
    amount[ids % 17 == 3] = np.nan
    t0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    return pa.table(
        {
            "id": ids,
            "small": pa.array((ids % 50).astype(np.int32), mask=ids % 23 == 5),
            "amount": pa.array(amount, mask=ids % 29 == 1),
            "category": pa.array([CATEGORIES[i % 10] for i in (ids * 7) % 97]),
            # 200-byte unique strings: bounds must be truncated in the ColumnIndex
            "long_text": pa.array([f"{i:08d}" + "abcdefghij" * 19 + "xx" for i in ids]),
            "day": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=int(i % 900)) for i in ids]),
            "ts": pa.array(
                [t0 + dt.timedelta(seconds=int(i) * 13) for i in ids],
                pa.timestamp("us", tz="UTC"),
            ),
            "price": pa.array(
                [decimal.Decimal(int(i) * 37 % 100_000) / 100 for i in ids], pa.decimal128(12, 2)
            ),
            "flag": pa.array(ids % 3 == 0),
            "tags": pa.array(
                [None if i % 11 == 4 else [int(i % 5)] * int(i % 3) for i in ids],
                pa.list_(pa.int32()),
            ),
        }
    )


def write(table: pa.Table, path: Path, **kw: Any) -> pqindex.WriteResult:
    opts: dict[str, Any] = {
        "sort_by": "id",
        "row_group_rows": ROW_GROUP_ROWS,
        "page_rows": PAGE_ROWS,
        "bloom": BLOOM,
        "indexes": EMBEDDED,
    }
    opts.update(kw)
    return pqindex.write_table(table, path, **opts)


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return make_table()


@pytest.fixture(scope="module")
def files(table: pa.Table, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("written")
    out = {}
    variants: dict[str, dict[str, Any]] = {
        "asc": {},
        "desc": {"sort_by": [("id", "descending")]},
        "multi": {"sort_by": ["category", ("id", "descending")]},
        "plain_no_embedded": {"indexes": None, "bloom": None},
    }
    for name, kw in variants.items():
        p = d / f"{name}.parquet"
        write(table, p, **kw)
        out[name] = p
    return out


def expected(table: pa.Table, name: str) -> pa.Table:
    if name == "desc":
        return table.sort_by([("id", "descending")])
    if name == "multi":
        return table.sort_by([("category", "ascending"), ("id", "descending")])
    return table.sort_by("id")


# ---------------------------------------------------------------- row comparison


def _norm(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, list):
        return [_norm(x) for x in v]
    return v


def rows_of(t: pa.Table, like: pa.Table, *, sort: bool = True) -> list[tuple[Any, ...]]:
    """Rows of ``t`` with columns cast to ``like``'s types, optionally ordered by id."""
    cols = []
    for f in like.schema:
        c = t.column(f.name)
        if pa.types.is_dictionary(c.type):
            c = c.cast(c.type.value_type)
        if not c.type.equals(f.type):
            c = c.cast(f.type)
        cols.append(c)
    t2 = pa.table(cols, schema=like.schema)
    if sort:
        t2 = t2.sort_by("id")
    return [tuple(_norm(v) for v in r.values()) for r in t2.to_pylist()]


def read_duckdb(path: Path) -> pa.Table:
    import duckdb

    con = duckdb.connect()
    try:
        return con.sql(f"SELECT * FROM read_parquet('{path}')").to_arrow_table()
    finally:
        con.close()


def read_datafusion(path: Path) -> pa.Table:
    import datafusion

    ctx = datafusion.SessionContext()
    return ctx.read_parquet(str(path)).to_arrow_table()


def read_polars(path: Path) -> pa.Table:
    import polars as pl

    return pl.read_parquet(path).to_arrow()


def read_spark(spark: Any, path: Path) -> pa.Table:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return spark.read.parquet(str(path)).toArrow()


# ---------------------------------------------------------------- plain Parquet


@pytest.mark.parametrize("name", ["asc", "desc", "multi", "plain_no_embedded"])
def test_pyarrow_reads_identical_rows_in_order(
    files: dict[str, Path], table: pa.Table, name: str
) -> None:
    got = pq.read_table(files[name])
    assert got.schema.names == table.schema.names
    want = expected(table, name)
    assert rows_of(got, want, sort=False) == rows_of(want, want, sort=False)


@pytest.mark.parametrize("reader", ["duckdb", "datafusion", "polars", "pqindex"])
@pytest.mark.parametrize("name", ["asc", "desc"])
def test_other_readers_read_identical_rows(
    files: dict[str, Path], table: pa.Table, name: str, reader: str
) -> None:
    path = files[name]
    if reader == "duckdb":
        got = read_duckdb(path)
    elif reader == "datafusion":
        got = read_datafusion(path)
    elif reader == "polars":
        got = read_polars(path)
    else:
        got = pqindex.dataset(str(path)).to_table()
    assert got.num_rows == table.num_rows
    assert rows_of(got, table) == rows_of(table, table)


@pytest.mark.spark
def test_spark_reads_identical_rows_and_skips_pages(
    spark: Any, files: dict[str, Path], table: pa.Table
) -> None:
    for name in ("asc", "desc"):
        got = read_spark(spark, files[name])
        assert rows_of(got, table) == rows_of(table, table)
    # Spark's own row-group / page skipping (column index) on the sort column.
    path = str(files["asc"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = spark.read.parquet(path)
        lo, hi = 2_345, 2_456
        sel = df.filter(f"id BETWEEN {lo} AND {hi}").select("id", "long_text", "amount").toArrow()
        point = df.filter("id = 4321").select("id", "category").collect()
        absent = df.filter("long_text = 'nope'").count()
    assert sorted(sel.column("id").to_pylist()) == list(range(lo, hi + 1))
    want = table.sort_by("id").slice(lo, hi - lo + 1)
    assert sel.sort_by("id").column("long_text").to_pylist() == want.column("long_text").to_pylist()
    assert [(r["id"], r["category"]) for r in point] == [(4321, CATEGORIES[(4321 * 7) % 97 % 10])]
    assert absent == 0


def inspect_json(path: Path, *args: str) -> dict[str, Any]:
    res = CliRunner().invoke(cli, ["inspect", "--json", *args, str(path)])
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.output)
    return out


@pytest.mark.parametrize("name", ["asc", "desc", "multi", "plain_no_embedded"])
def test_inspect_shows_page_index_and_sorting_columns(files: dict[str, Path], name: str) -> None:
    info = inspect_json(files[name])
    assert info["num_rows"] == ROWS
    assert info["num_row_groups"] == math.ceil(ROWS / ROW_GROUP_ROWS)
    assert info["warnings"] == []
    want_sort = {
        "asc": [("id", False)],
        "desc": [("id", True)],
        "multi": [("category", False), ("id", True)],
        "plain_no_embedded": [("id", False)],
    }[name]
    for rg in info["row_groups"]:
        assert [(s["path"], s["descending"]) for s in rg["sorting_columns"]] == want_sort
        for c in rg["columns"]:
            assert c["column_index"] is not None, (name, rg["index"], c["path"])
            assert c["offset_index"] is not None, (name, rg["index"], c["path"])
            assert c["column_index"]["length"] > 0 and c["offset_index"]["length"] > 0
    assert (REGION_KEY in info["key_value_metadata"]) == (name != "plain_no_embedded")


def test_inspect_pages_boundary_order(files: dict[str, Path]) -> None:
    info = inspect_json(files["asc"], "--pages", "--column", "id")
    for rg in info["row_groups"]:
        (c,) = rg["columns"]
        assert c["pages"]["boundary_order"] == "ASCENDING"
        assert c["pages"]["column_index_usable"]
        rows = [p["rows"] for p in c["pages"]["pages"]]
        assert max(rows) <= PAGE_ROWS and sum(rows) == rg["num_rows"]


def test_long_string_bounds_truncated(files: dict[str, Path], table: pa.Table) -> None:
    with ParquetFile.open(str(files["asc"])) as pf:
        leaf = pf.schema.leaf("long_text")
        assert leaf is not None
        values = pq.read_table(files["asc"], columns=["long_text"]).column(0).to_pylist()
        start = 0
        for rg in range(pf.num_row_groups):
            ci = pf.column_index(rg, leaf.index)
            assert ci is not None
            rows = pf.page_rows(rg, leaf.index)
            assert rows is not None
            for p, n in enumerate(rows):
                lo, hi = ci.min_values[p], ci.max_values[p]
                assert len(lo) <= 64 and len(hi) <= 64
                page = [v.encode() for v in values[start : start + n]]
                # truncated bounds still bound the page: min rounded down, max rounded up
                assert lo <= min(page) and hi >= max(page)
                start += n
        assert start == ROWS
    # and truncate=None keeps pyarrow's full bounds
    p = files["asc"].parent / "untruncated.parquet"
    write(table, p, truncate=None, indexes=None)
    with ParquetFile.open(str(p)) as pf:
        leaf = pf.schema.leaf("long_text")
        assert leaf is not None
        ci = pf.column_index(0, leaf.index)
        assert ci is not None and max(len(v) for v in ci.min_values) == 200


# ---------------------------------------------------------------- sorting


@pytest.mark.parametrize(
    ("name", "order"), [("asc", "ASCENDING"), ("desc", "DESCENDING"), ("multi", "ASCENDING")]
)
def test_boundary_order_of_first_sort_key(files: dict[str, Path], name: str, order: str) -> None:
    first = "category" if name == "multi" else "id"
    with ParquetFile.open(str(files[name])) as pf:
        leaf = pf.schema.leaf(first)
        assert leaf is not None
        for rg in range(pf.num_row_groups):
            ci = pf.column_index(rg, leaf.index)
            assert ci is not None
            assert ci.boundary_order is not None
            from pqindex.format.schema import BoundaryOrder

            assert BoundaryOrder(ci.boundary_order).name == order
    md = pq.ParquetFile(files[name]).metadata
    for rg in range(md.num_row_groups):
        sc = md.row_group(rg).sorting_columns
        assert sc and sc[0].column_index == md.schema.names.index(first)


def test_write_result_reports_order_and_dictionary(table: pa.Table, tmp_path: Path) -> None:
    r = write(table, tmp_path / "r.parquet", sort_by=[("id", "descending")])
    assert r.rows == ROWS and r.row_groups == 3
    assert r.boundary_orders["id"] == "DESCENDING"
    assert r.region_bytes > 0 and r.index_bytes > r.region_bytes
    assert r.bytes == os.path.getsize(tmp_path / "r.parquet")
    assert "category" in r.dictionary_columns and "long_text" not in r.dictionary_columns


def test_presorted_unsorted_many_pages_raises(table: pa.Table, tmp_path: Path) -> None:
    with pytest.raises(pqindex.PqIndexError, match="presorted"):
        write(table, tmp_path / "p.parquet", presorted=True, indexes=None)


def test_presorted_sorted_data_is_accepted(table: pa.Table, tmp_path: Path) -> None:
    r = write(table.sort_by("id"), tmp_path / "p.parquet", presorted=True)
    assert r.boundary_orders["id"] == "ASCENDING"
    assert pq.read_table(tmp_path / "p.parquet").column("id").to_pylist() == list(range(ROWS))


def test_presorted_reverse_order_raises(table: pa.Table, tmp_path: Path) -> None:
    with pytest.raises(pqindex.PqIndexError):
        write(table.sort_by([("id", "descending")]), tmp_path / "p.parquet", presorted=True)


def test_presorted_unsorted_later_row_group_raises(tmp_path: Path) -> None:
    ids = np.concatenate([np.arange(2000), np.random.default_rng(0).permutation(2000) + 2000])
    with pytest.raises(pqindex.PqIndexError):
        pqindex.write_table(
            pa.table({"id": ids}),
            tmp_path / "p.parquet",
            sort_by="id",
            presorted=True,
            row_group_rows=2000,
            page_rows=100,
        )


def test_presorted_unsorted_single_page_raises(tmp_path: Path) -> None:
    with pytest.raises(pqindex.PqIndexError):
        pqindex.write_table(
            pa.table({"id": np.array([3, 1, 2, 0], dtype=np.int64)}),
            tmp_path / "p.parquet",
            sort_by="id",
            presorted=True,
        )


def test_presorted_rejected_leaves_no_file(table: pa.Table, tmp_path: Path) -> None:
    p = tmp_path / "p.parquet"
    with pytest.raises(pqindex.PqIndexError):
        write(table, p, presorted=True, indexes=None)
    assert not p.exists()


# ---------------------------------------------------------------- dictionary="auto"


def test_dictionary_auto_by_cardinality(tmp_path: Path) -> None:
    n = 20_000
    rng = np.random.default_rng(3)
    t = pa.table(
        {
            "uniq": rng.permutation(n).astype(np.int64),
            "text": pa.array([f"{i:010d}" + "y" * 190 for i in rng.permutation(n)]),
            "category": pa.array([f"c{i}" for i in rng.integers(0, 10, n)]),
        }
    )
    p = tmp_path / "d.parquet"
    r = pqindex.write_table(t, p, page_rows=2_000)
    assert r.dictionary_columns == ["category"]
    md = pq.ParquetFile(p).metadata
    for rg in range(md.num_row_groups):
        enc = {md.schema.column(c).name: md.row_group(rg).column(c) for c in range(3)}
        for name in ("uniq", "text"):
            assert not enc[name].has_dictionary_page, name
            assert not {"PLAIN_DICTIONARY", "RLE_DICTIONARY"} & set(enc[name].encodings)
        assert enc["category"].has_dictionary_page
        assert "RLE_DICTIONARY" in enc["category"].encodings
    # the footer's encoding stats (pqindex's own view) agree
    with ParquetFile.open(str(p)) as pf:
        assert pf.all_dictionary_encoded(0, 2)
        assert not pf.all_dictionary_encoded(0, 0)


# ---------------------------------------------------------------- Bloom filters


def test_bloom_filter_contains_every_value(files: dict[str, Path], table: pa.Table) -> None:
    with ParquetFile.open(str(files["asc"])) as pf:
        for name, physical in (("id", "int64"), ("long_text", "bytes")):
            leaf = pf.schema.leaf(name)
            assert leaf is not None
            start = 0
            values = table.sort_by("id").column(name).to_pylist()
            for rg in range(pf.num_row_groups):
                bf = pf.bloom_filter(rg, leaf.index)
                assert bf is not None, (name, rg)
                n = pf.row_group_rows(rg)
                for v in values[start : start + n]:
                    assert bf.might_contain(plain_bytes(v, physical)), (name, rg, v)
                start += n
            # few false positives at the default fpp
            fp = sum(
                bf.might_contain(plain_bytes(v, physical))
                for v in (
                    [10**9 + i for i in range(2000)]
                    if physical == "int64"
                    else [f"absent-{i}" for i in range(2000)]
                )
            )
            assert fp < 100
        # no filter where none was asked for
        leaf = pf.schema.leaf("amount")
        assert leaf is not None and pf.bloom_filter(0, leaf.index) is None


def test_embedded_region_present_and_clean(files: dict[str, Path]) -> None:
    with ParquetFile.open(str(files["asc"])) as pf:
        region, warns = read_region(pf, strict=True)
        assert region is not None and warns == []
        kinds = {(e.kind, e.column) for e in region.blobs}
        for kind, cols in EMBEDDED.items():
            for c in cols:
                assert (kind, c) in kinds
    with ParquetFile.open(str(files["plain_no_embedded"])) as pf:
        assert REGION_KEY not in pf.key_value_metadata


# ---------------------------------------------------------------- Writer


def test_streaming_writer_rolls_over(tmp_path: Path) -> None:
    d = tmp_path / "out"
    batches = 12
    with pqindex.Writer(
        d,
        target_file_bytes=60_000,
        sort_by="id",
        page_rows=500,
        indexes={"distinct": ["k"], "zone_maps": ["id"]},
    ) as w:
        for i in range(batches):
            ids = np.arange(i * 2_000, (i + 1) * 2_000, dtype=np.int64)
            w.write(pa.record_batch({"id": ids, "k": ids % 7}))
    results = w.results
    assert len(results) >= 3
    files = sorted(os.listdir(d))
    assert files == [f"part-{i:05d}.parquet" for i in range(len(results))]
    ids: list[int] = []
    for f in files:
        with ParquetFile.open(str(d / f)) as pf:
            region, warns = read_region(pf, strict=True)
            assert region is not None and warns == []
            assert {e.kind for e in region.blobs} == {"distinct", "zone_maps"}
            for rg in range(pf.num_row_groups):
                for c in range(2):
                    assert pf.column_index(rg, c) is not None
                    assert pf.offset_index(rg, c) is not None
        ids += pq.read_table(d / f).column("id").to_pylist()
    assert ids == list(range(batches * 2_000))
    # the written directory reads back as one dataset
    t = pqindex.dataset(str(d)).to_table(where="id BETWEEN 4999 AND 5001")
    assert t.column("id").to_pylist() == [4999, 5000, 5001]


def test_single_file_writer_writes_one_file(tmp_path: Path) -> None:
    p = tmp_path / "one.parquet"
    with pqindex.Writer(p, sort_by="id") as w:
        for i in range(3):
            w.write(pa.table({"id": np.arange(i * 10, (i + 1) * 10)}))
    assert len(w.results) == 1
    assert pq.read_table(p).column("id").to_pylist() == list(range(30))
    with pytest.raises(pqindex.UserInputError):
        w.write(pa.table({"id": [1]}))


def test_single_file_writer_cannot_roll_over(tmp_path: Path) -> None:
    with (
        pytest.raises(pqindex.UserInputError, match="roll over"),
        pqindex.Writer(tmp_path / "one.parquet", target_file_bytes=10_000) as w,
    ):
        for i in range(10):
            w.write(pa.table({"id": np.arange(i * 2_000, (i + 1) * 2_000)}))


# ---------------------------------------------------------------- bad input


def test_unknown_sort_column(table: pa.Table, tmp_path: Path) -> None:
    with pytest.raises(pqindex.UserInputError, match="nope"):
        write(table, tmp_path / "x.parquet", sort_by="nope")
    with pytest.raises(pqindex.UserInputError):
        write(table, tmp_path / "x.parquet", sort_by=[("id", "sideways")])
    assert not list(tmp_path.iterdir())


def test_unknown_index_kind(table: pa.Table, tmp_path: Path) -> None:
    with pytest.raises(pqindex.UserInputError, match="unknown index kind"):
        write(table, tmp_path / "x.parquet", indexes={"bitmap": ["id"]})
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("kind", ["distinct", "zone_maps", "bloom", "hll"])
def test_index_on_list_column(table: pa.Table, tmp_path: Path, kind: str) -> None:
    with pytest.raises(pqindex.UserInputError):
        write(table, tmp_path / "x.parquet", indexes={kind: ["tags"]})
    with pytest.raises(pqindex.UserInputError, match="list or map"):
        write(table, tmp_path / "x.parquet", indexes={kind: ["tags.list.element"]})
    # nothing left behind: no target, no temporary
    assert not list(tmp_path.iterdir())


def test_index_error_names_target(table: pa.Table, tmp_path: Path) -> None:
    with pytest.raises(pqindex.UserInputError) as e:
        write(table, tmp_path / "x.parquet", indexes={"distinct": ["nope"]})
    assert "pqindex-write" not in str(e.value)
    assert str(tmp_path / "x.parquet") in str(e.value)


def test_unknown_index_or_bloom_column(table: pa.Table, tmp_path: Path) -> None:
    with pytest.raises(pqindex.UserInputError, match="nope"):
        write(table, tmp_path / "x.parquet", indexes={"distinct": ["nope"]})
    with pytest.raises(pqindex.UserInputError, match="nope"):
        write(table, tmp_path / "x.parquet", bloom=["nope"])


def test_bad_sizes_and_data(tmp_path: Path) -> None:
    t = pa.table({"id": [1, 2]})
    with pytest.raises(pqindex.UserInputError):
        pqindex.write_table(t, tmp_path / "x.parquet", page_rows=0)
    with pytest.raises(pqindex.UserInputError):
        pqindex.write_table(t, tmp_path / "x.parquet", row_group_rows=-1)
    with pytest.raises(pqindex.UserInputError):
        pqindex.write_table({"id": [1, 2]}, tmp_path / "x.parquet")


def test_empty_table_writes_valid_file(table: pa.Table, tmp_path: Path) -> None:
    empty = table.schema.empty_table()
    p = tmp_path / "empty.parquet"
    r = write(empty, p)
    assert r.rows == 0
    got = pq.read_table(p)
    assert got.num_rows == 0 and got.schema.names == table.schema.names
    assert read_duckdb(p).num_rows == 0
    assert read_polars(p).shape == (0, len(table.schema))
    assert pqindex.dataset(str(p)).to_table(where="id = 3").num_rows == 0
    res = CliRunner().invoke(cli, ["inspect", "--json", str(p)])
    assert res.exit_code == 0 and json.loads(res.output)["num_rows"] == 0


def test_pandas_input(tmp_path: Path) -> None:
    import pandas as pd  # the test extra's: not skipped where missing
    df = pd.DataFrame(
        {"a": [3, 1, 2, 5, 4], "b": ["x", "y", "z", "w", "v"], "c": [0.5, None, 1.5, 2.5, 3.5]}
    )
    p = tmp_path / "pd.parquet"
    r = pqindex.write_table(df, p, sort_by="a", indexes={"distinct": ["b"], "zone_maps": ["c"]})
    assert r.rows == 5
    got = pq.read_table(p)
    assert got.column("a").to_pylist() == [1, 2, 3, 4, 5]
    assert got.column("b").to_pylist() == ["y", "z", "x", "v", "w"]
    assert got.column("c").to_pylist() == [None, 1.5, 0.5, 3.5, 2.5]
    assert "__index_level_0__" not in got.schema.names
    assert pqindex.dataset(str(p)).to_table(where="b = 'w'").column("a").to_pylist() == [5]


def test_empty_dictionary_encoded_table(tmp_path: Path) -> None:
    """The empty case that works today: every column dictionary-encoded."""
    t = pa.table({"id": pa.array([], pa.int64()), "s": pa.array([], pa.string())})
    p = tmp_path / "empty.parquet"
    r = pqindex.write_table(t, p, sort_by="id", indexes={"distinct": ["s"], "zone_maps": ["id"]})
    assert r.rows == 0
    assert pq.read_table(p).num_rows == 0
    assert read_duckdb(p).num_rows == 0
    assert pqindex.dataset(str(p)).to_table(where="id = 3").num_rows == 0
