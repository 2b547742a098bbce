"""The JVM read shim (pqindex.spark.shim): Spark's Parquet reader on pqindex's kept row groups.

Rows are compared with ``spark.read.parquet`` of the same files (dates, decimals,
nulls, strings, timestamps; DataFrame filters and SQL; random predicates in
test_spark_pushdown.py). Pruning is proven by damage: the row groups a query must
skip have their first page headers overwritten, so reading one fails. The byte
ranges are checked against pyarrow's row groups without Spark; the fallback to the
Python data source is checked by making the shim unavailable.
"""

from __future__ import annotations

import datetime as dt
import shutil
import warnings
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pqindex
import pqindex.spark as ps
from conftest import in_ci
from pqindex.errors import PqIndexError, UserInputError
from pqindex.format.file import ParquetFile
from pqindex.spark import shim

ROWS, GROUP = 60_000, 10_000


def _rows(df: Any) -> list[str]:
    return sorted(repr(tuple(r)) for r in df.collect())


def _table(n: int = ROWS) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "day": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=int(k) // 100)
                         for k in range(n)], pa.date32()),
        "price": pa.array([Decimal(int(k) % 10_000) / 100 for k in range(n)],
                          pa.decimal128(9, 2)),
        "cat": pa.array([None if k % 13 == 0 else f"c{k % 7}" for k in range(n)]),
        "x": pa.array(np.where(np.arange(n) % 11 == 0, np.nan, rng.normal(size=n))),
        "ts": pa.array([dt.datetime(2021, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=int(k))
                        for k in range(n)], pa.timestamp("us", "UTC")),
    })


def _damage_except(path: Path, keep: set[int]) -> None:
    md = pq.ParquetFile(path).metadata
    with open(path, "r+b") as f:
        for rg in range(md.num_row_groups):
            if rg in keep:
                continue
            for c in range(md.num_columns):
                cc = md.row_group(rg).column(c)
                first = cc.dictionary_page_offset if cc.has_dictionary_page else None
                f.seek(first if first else cc.data_page_offset)
                f.write(b"\xff" * 12)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two files of 3 row groups each, sorted by id, with a distinct index on ``cat``."""
    root = tmp_path_factory.mktemp("shim_lake")
    t = _table()
    for i in range(2):
        part = t.slice(i * ROWS // 2, ROWS // 2)
        pqindex.write_table(part, root / f"part-{i}.parquet", sort_by="id",
                            row_group_rows=GROUP, page_rows=1000,
                            indexes={"distinct": ["cat"]})
    return root


@pytest.fixture(scope="module")
def loaded(spark: Any) -> Any:
    why = shim.unavailable(spark)
    if why is not None:
        if in_ci() or shutil.which("javac"):
            pytest.fail(f"the JVM shim should load here: {why}")
        pytest.skip(f"no JVM shim: {why}")
    return spark


# ------------------------------------------------------------ without Spark

@pytest.mark.parametrize("writer", ["pqindex", "pyarrow"])
def test_ranges_hold_exactly_the_kept_row_groups(tmp_path: Path, writer: str) -> None:
    """Each range holds the midpoint (parquet-mr's: first chunk's offset plus half the row
    group's compressed size) of exactly the row groups asked for."""
    path = tmp_path / "f.parquet"
    t = _table(25_000)
    if writer == "pqindex":
        pqindex.write_table(t, path, row_group_rows=4000, page_rows=500)
    else:
        pq.write_table(t, path, row_group_size=3000, write_statistics=True)
    md = pq.ParquetFile(path).metadata
    mids = []
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        c0 = rg.column(0)
        off = c0.data_page_offset
        if c0.has_dictionary_page and c0.dictionary_page_offset < off:
            off = c0.dictionary_page_offset
        total = sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
        mids.append(off + total // 2)
    with ParquetFile.open(path) as pf:
        for kept in ([0], [md.num_row_groups - 1], [1, 2, 4], list(range(md.num_row_groups))):
            ranges = shim._ranges(pf, kept)
            got = sorted(i for i, m in enumerate(mids)
                         if any(s <= m < s + n for s, n in ranges))
            assert got == kept, (kept, ranges)
        assert len(shim._ranges(pf, [1, 2, 3])) == 1  # consecutive: one piece


def test_tasks_pack_like_spark() -> None:
    mib = 1 << 20
    pieces = [["f", 0, n * mib, 0, 0] for n in (200, 3, 2, 1, 50)]
    tasks = shim.tasks_of(pieces, 2)
    assert sorted(p[2] for t in tasks for p in t) == sorted(p[2] for p in pieces)
    assert [p[2] for p in tasks[0]] == [200 * mib]  # a piece above the split size: alone
    assert shim.tasks_of([], 4) == []
    one = shim.tasks_of([["f", 0, mib, 0, 0], ["g", 0, mib, 0, 0]], 8)
    assert len(one) == 2  # spread over the cores while small pieces allow


def test_cache_dir_keys_version_and_source() -> None:
    a = shim.cache_dir("4.3.0", b"x")
    assert a != shim.cache_dir("4.3.1", b"x") and a != shim.cache_dir("4.3.0", b"y")


def test_filters_from_the_jvm_become_pyspark_filters() -> None:
    from pyspark.sql import datasource as D

    f = shim.spark_filter({"name": "In", "isNegated": True, "columnPath": ["a", "b"],
                           "value": [{"t": "decimal", "v": "1.50"}, {"t": "null", "v": ""}]})
    assert f == D.Not(D.In(("a", "b"), (Decimal("1.50"), None)))
    f = shim.spark_filter({"name": "LessThan", "isNegated": False, "columnPath": ["ts"],
                           "value": {"t": "instant", "v": "1000001"}})
    assert f.value == dt.datetime(1970, 1, 1, 0, 0, 1, 1, tzinfo=dt.UTC)
    f = shim.spark_filter({"name": "GreaterThan", "isNegated": False, "columnPath": ["x"],
                           "value": {"t": "float", "v": "NaN"}})
    assert f.value != f.value
    assert shim.spark_filter({"name": "IsNull", "isNegated": False, "columnPath": ["c"]}
                             ) == D.IsNull(("c",))


# ------------------------------------------------------------ on Spark

@pytest.mark.spark
def test_filters_and_sql_match_spark(loaded: Any, lake: Path) -> None:
    from pyspark.sql import functions as fn

    spark = loaded
    df = ps.table(spark, "shim_lake", lake, shim=True)
    native = spark.read.parquet(str(lake))
    native.createOrReplaceTempView("shim_native")
    wheres = [
        "id = 12345", "id BETWEEN 100 AND 20500 AND cat = 'c3'", "cat IS NULL AND id < 9000",
        "day >= DATE '2020-06-01' AND day < DATE '2020-06-08'", "price > 99.5",
        "price = 12.34 OR id = 7", "cat IN ('c1', 'nope') AND x > 0.5", "isnan(x) AND id > 59000",
        "ts >= TIMESTAMP '2021-01-20 10:00:00+02:00' AND ts < TIMESTAMP '2021-01-21'",
        "cat = 'absent'", "NOT (id < 59990)", "cat LIKE 'c%' AND id < 3",
    ]
    for w in wheres:
        want = _rows(spark.sql(f"SELECT * FROM shim_native WHERE {w}"))
        assert _rows(spark.sql(f"SELECT * FROM shim_lake WHERE {w}")) == want, w
        assert _rows(df.where(w)) == want, w
    got = df.where((fn.col("day") == dt.date(2020, 3, 1)) & (fn.col("price") < Decimal("50")))
    want = native.where((fn.col("day") == dt.date(2020, 3, 1)) & (fn.col("price") < Decimal("50")))
    assert _rows(got.select("id", "price")) == _rows(want.select("id", "price"))


@pytest.mark.spark
def test_every_query_plans_afresh(loaded: Any, lake: Path) -> None:
    """Two queries of one DataFrame and of one view, a query with nothing to push after a
    filtered one, two scans of one relation in one query: each its own rows."""
    spark = loaded
    df = ps.table(spark, "shim_again", lake, shim=True)
    assert df.where("id = 5").count() == 1
    assert df.where("id IN (6, 40000, 59999)").count() == 3
    assert df.where("id < 2 OR id > 59997").count() == 4  # an OR: nothing pqindex uses
    assert df.count() == ROWS
    assert spark.sql("SELECT count(*) FROM shim_again WHERE id = 9").collect()[0][0] == 1
    assert spark.sql("SELECT count(*) FROM shim_again").collect()[0][0] == ROWS
    got = sorted(r["id"] for r in df.where("id < 3").union(df.where("id > 59997")).collect())
    assert got == [0, 1, 2, 59998, 59999]
    joined = df.where("id < 5").alias("a").join(df.where("id > 59994").alias("b"),
                                                 on="cat", how="inner")
    want = spark.read.parquet(str(lake))
    native = want.where("id < 5").alias("a").join(want.where("id > 59994").alias("b"),
                                                   on="cat", how="inner")
    assert _rows(joined) == _rows(native)


@pytest.mark.spark
def test_only_kept_row_groups_and_needed_columns_are_read(loaded: Any, tmp_path: Path) -> None:
    """Every row group but one damaged: queries the plan confines to it answer; an absent
    value plans no task; the scan reads only the query's columns."""
    spark = loaded
    path = tmp_path / "sorted.parquet"
    pqindex.write_table(_table(), path, sort_by="id", row_group_rows=GROUP, page_rows=1000,
                        indexes={"distinct": ["cat"]})
    _damage_except(path, {3})
    df = ps.frame(spark, path, shim=True)
    lo = 3 * GROUP
    assert [r["id"] for r in df.where(f"id = {lo + 17}").select("id").collect()] == [lo + 17]
    assert df.where(f"id BETWEEN {lo} AND {lo + 99} AND cat = 'c2'").count() == sum(
        1 for k in range(lo, lo + 100) if k % 13 and k % 7 == 2)
    absent = df.where("cat = 'absent'")
    assert absent.count() == 0
    assert absent.rdd.getNumPartitions() == 0
    plan = df.where(f"id = {lo}").select("price")._jdf.queryExecution().executedPlan().toString()
    scan = next(line for line in plan.splitlines() if "BatchScan" in line)
    assert "price" in scan and "id" in scan and "cat" not in scan and "day" not in scan, scan
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    with pytest.raises((Py4JJavaError, PySparkException)):  # the damage is real
        spark.read.parquet(str(path)).where("id = 5").collect()


@pytest.mark.spark
def test_spark_writers_file(loaded: Any, written_files: Any, tmp_path: Path) -> None:
    """A file Spark wrote (its own layout and types) through the shim."""
    spark = loaded
    path = tmp_path / "spark.parquet"
    shutil.copy(written_files["spark"], path)
    df = ps.frame(spark, path, shim=True)
    native = spark.read.parquet(str(path))
    for w in ("id < 100", "id > 4900 AND category = 'beta'", "day >= DATE '2020-05-01'"):
        assert _rows(df.where(w)) == _rows(native.where(w)), w


@pytest.mark.spark
def test_where_and_columns_options(loaded: Any, lake: Path) -> None:
    spark = loaded
    df = ps.frame(spark, lake, where="id < 100", columns=["id", "cat"], shim=True)
    assert df.columns == ["id", "cat"]
    want = spark.read.parquet(str(lake)).where("id < 100 AND cat = 'c3'").select("id", "cat")
    assert _rows(df.where("cat = 'c3'")) == _rows(want)


@pytest.mark.spark
def test_planner_errors_reach_the_user(loaded: Any, tmp_path: Path) -> None:
    spark = loaded
    path = tmp_path / "gone"
    path.mkdir()
    pq.write_table(_table(100), path / "a.parquet")
    df = ps.frame(spark, path, shim=True)
    (path / "a.parquet").write_bytes(b"not parquet")
    with pytest.raises(Exception, match="pqindex planner"):
        df.where("id = 3").collect()


@pytest.mark.spark
def test_fallback_when_the_shim_is_unavailable(loaded: Any, lake: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """No javac (and nothing compiled yet): one warning, the Python data source reads."""
    spark = loaded
    monkeypatch.setattr(shim, "_shims", {})
    monkeypatch.setattr(shim, "_why_not", {})
    monkeypatch.setattr(shim, "_warned", set())
    monkeypatch.setenv("PQINDEX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(shim, "_javac", lambda: None)
    assert "javac" in (shim.unavailable(spark) or "")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        df = ps.frame(spark, lake)
        ps.frame(spark, lake)
    said = [w for w in seen if "JVM read shim is unavailable" in str(w.message)]
    assert len(said) == 1 and "javac" in str(said[0].message)
    assert "pqindex_query" not in df.columns  # the guarded Python source, guard dropped
    want = spark.read.parquet(str(lake)).where("id BETWEEN 10 AND 20")
    assert _rows(df.where("id BETWEEN 10 AND 20")) == _rows(want)
    with pytest.raises(UserInputError, match="javac"):
        ps.frame(spark, lake, shim=True)


@pytest.mark.spark
def test_other_spark_versions_do_not_load_it(loaded: Any, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    monkeypatch.setattr(shim, "_shims", {})
    monkeypatch.setattr(shim, "_why_not", {})
    monkeypatch.setattr(shim, "SPARK_VERSIONS", ("3.9",))
    assert "checked with Spark 3.9 only" in (shim.unavailable(loaded) or "")


@pytest.mark.spark
def test_datasets_it_does_not_read(loaded: Any, tmp_path: Path) -> None:
    """Hive partitions: the Python data source (no warning: nothing failed)."""
    spark = loaded
    for p in (1, 2):
        (tmp_path / f"p={p}").mkdir()
        pq.write_table(_table(50), tmp_path / f"p={p}" / "a.parquet")
    df, why = shim.frame(spark, str(tmp_path))
    assert df is None and why is not None and "partition" in why
    assert not shim.is_environment(why)
    with pytest.raises(PqIndexError, match="partition"):
        ps.frame(spark, tmp_path, shim=True)
    got = ps.frame(spark, tmp_path).where("p = 2 AND id < 3")
    assert sorted((r["id"], r["p"]) for r in got.collect()) == [(0, 2), (1, 2), (2, 2)]
