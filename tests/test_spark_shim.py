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
from scan_fixtures import damage_except

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


def _scan_line(df: Any) -> str:
    plan = df._jdf.queryExecution().executedPlan().toString()
    return next(line for line in plan.splitlines() if "Scan" in line)


@pytest.mark.spark
@pytest.mark.parametrize("local_rows", [1000, 0])  # a LocalScan; Arrow streams in the tasks
def test_driver_reads_match_spark(loaded: Any, lake: Path, local_rows: int,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Small results read by the driver's pqindex (nulls, NaN, decimals, dates, UTC
    timestamps, strings), served as Spark rows or as Arrow columns in the tasks: the
    rows of ``spark.read.parquet``; two queries of one view each get their own."""
    spark = loaded
    monkeypatch.setattr(shim, "LOCAL_ROWS", local_rows)
    monkeypatch.setattr(shim, "_few_rows", lambda dplan, expr: True)  # any size
    monkeypatch.setattr(shim, "ARROW_TASK_ROWS", 50)  # several tasks
    df = ps.table(spark, "shim_driver", lake, shim=True, driver_read_bytes=1 << 30)
    native = spark.read.parquet(str(lake))
    native.createOrReplaceTempView("shim_driver_native")
    wheres = ["id BETWEEN 100 AND 400 AND cat = 'c3'", "cat IS NULL AND id < 900",
              "isnan(x) AND id > 59000", "price < 0.5", "cat = 'absent'",
              "ts >= TIMESTAMP '2021-01-20 10:00:00+02:00' AND ts < TIMESTAMP '2021-01-20 12:00'",
              "day = DATE '2020-06-01' AND price > 50"]
    for w in wheres:
        want = _rows(native.where(w))
        assert _rows(df.where(w)) == want, w
        assert _rows(spark.sql(f"SELECT * FROM shim_driver WHERE {w}")) == want, w
    line = _scan_line(df.where("id < 300"))
    assert ("LocalTableScan" in line) == (local_rows > 0), line
    assert local_rows > 0 or "Arrow stream" in line, line
    got = df.where("id < 3").union(df.where("id > 59997")).select("id").collect()
    assert sorted(r["id"] for r in got) == [0, 1, 2, 59998, 59999]


@pytest.mark.spark
def test_a_changed_directory_is_planned_afresh(loaded: Any, tmp_path: Path) -> None:
    """The planner's open dataset serves while the listing stays; a new file is seen."""
    spark = loaded
    t = _table(2000)
    pqindex.write_table(t.slice(0, 1000), tmp_path / "a.parquet", sort_by="id")
    df = ps.frame(spark, tmp_path, shim=True)
    assert df.where("id >= 900").count() == 100
    pqindex.write_table(t.slice(1000, 1000), tmp_path / "b.parquet", sort_by="id")
    assert df.where("id >= 900").count() == 1100


@pytest.mark.spark
def test_only_kept_row_groups_and_needed_columns_are_read(loaded: Any, tmp_path: Path) -> None:
    """Every row group but one damaged: queries the plan confines to it answer; an absent
    value plans no task; the scan reads only the query's columns."""
    spark = loaded
    path = tmp_path / "sorted.parquet"
    pqindex.write_table(_table(), path, sort_by="id", row_group_rows=GROUP, page_rows=1000,
                        indexes={"distinct": ["cat"]})
    damage_except(path, {3})
    df = ps.frame(spark, path, shim=True, driver_read_bytes=-1)  # Spark's tasks read
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


# ------------------------------------------------------------ implied page filters
#
# The planner adds ``col BETWEEN lo AND hi`` (ORed ranges) on a sorted column, from the
# bounds of its pages over the rows pqindex keeps, so Parquet reads only those pages.

KROWS, KGROUP, KPAGE = 24_000, 8_000, 400


def _keyed(sorted_col: str | None, seed: int = 3, nulls: bool = False) -> pa.Table:
    """``key``: a random permutation (a page-scope Bloom index finds its page); one
    column sorted (``sorted_col``; None: none), the others shuffled with the rows."""
    rng = np.random.default_rng(seed)
    n = KROWS
    order = np.arange(n)
    base = dt.datetime(2021, 3, 1, tzinfo=dt.UTC)
    cols = {
        "key": pa.array(rng.permutation(n) * 7, pa.int64()),
        "id": pa.array(order, pa.int64()),
        "i32": pa.array(order - n // 2, pa.int32()),
        "i16": pa.array(order // 3 - 4000, pa.int16()),
        "day": pa.array(order // 40, pa.int32()).cast(pa.date32()),
        "ts": pa.array([base + dt.timedelta(seconds=int(k) * 37) for k in order],
                       pa.timestamp("us", "UTC")),
        "tsm": pa.array([base - dt.timedelta(milliseconds=int(k) * 1001) for k in order],
                        pa.timestamp("ms", "UTC")),
        "name": pa.array([f"n{k:06d}" for k in order]),
        "x": pa.array(order * 0.5),
        "amount": pa.array([Decimal(int(k) % 977) / 10 for k in order], pa.decimal128(7, 1)),
    }
    if nulls:
        cols["id"] = pa.array([None if k % 50 == 7 else int(k) for k in order], pa.int64())
    t = pa.table(cols)
    if sorted_col is None:
        return t.take(pa.array(rng.permutation(n)))
    # every column but the sorted one (and key) in random row order
    perm = rng.permutation(n)
    return pa.table({c: t[c] if c in (sorted_col, "key") else t[c].take(pa.array(perm))
                     for c in t.column_names})


def _write_keyed(path: Path, t: pa.Table, sorted_col: str | None,
                 descending: bool = False) -> None:
    sort = None if sorted_col is None else [(sorted_col, "descending" if descending
                                               else "ascending")]
    pqindex.write_table(t, path, sort_by=sort, row_group_rows=KGROUP, page_rows=KPAGE,
                        indexes={"bloom": ["key"]}, bloom_scope="page")


def _plans(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The planner's answers, recorded."""
    seen: list[dict[str, Any]] = []
    real = shim.plan

    def record(request: dict[str, Any]) -> dict[str, Any]:
        got = real(request)
        seen.append(got)
        return got

    monkeypatch.setattr(shim, "plan", record)
    return seen


def _fs_bytes(spark: Any) -> int:
    """Bytes read so far through Hadoop's local file system in this JVM (local mode:
    the executors' reads too)."""
    stats = spark._jvm.org.apache.hadoop.fs.FileSystem.getGlobalStorageStatistics().get("file")
    return 0 if stats is None else int(stats.getLong("bytesRead"))


def test_merge_ranges_only_widens() -> None:
    assert shim.merge_ranges([(5, 9), (1, 3), (4, 4), (20, 30), (25, 26)], 8) == [
        (1, 9), (20, 30)]
    got = shim.merge_ranges([(0, 0), (10, 10), (12, 12), (100, 100), (103, 103)], 2)
    assert got == [(0, 12), (100, 103)]
    rng = np.random.default_rng(1)
    for _ in range(200):
        rs = [(int(a), int(a) + int(b)) for a, b in rng.integers(-50, 50, size=(12, 2)) if b >= 0]
        cap = int(rng.integers(1, 5))
        out = shim.merge_ranges(rs, cap)
        assert len(out) <= cap or not rs
        assert all(any(a <= lo and hi <= b for a, b in out) for lo, hi in rs)


def _implied_of(path: Path, where: str, columns: tuple[str, ...] = ()) -> Any:
    from pyspark.sql import types as T

    with pqindex.dataset(path) as ds:
        dplan = ds.plan([], where)
        groups = [(e.file, rg) for e in dplan.kept for rg in e.row_groups if not rg.skipped]
        sch = T.StructType([T.StructField(c, {"key": T.LongType(), "id": T.LongType(),
                                               "i32": T.IntegerType(), "i16": T.ShortType(),
                                               "day": T.DateType(), "ts": T.TimestampType(),
                                               "tsm": T.TimestampType(), "name": T.StringType(),
                                               "x": T.DoubleType(),
                                               "amount": T.DecimalType(7, 1)}[c])
                            for c in ("key", "id", "i32", "i16", "day", "ts", "tsm", "name",
                                      "x", "amount")])
        return groups, shim.implied_filter(groups, shim._spark_types(sch), columns)


@pytest.mark.parametrize("col,descending", [("id", False), ("i32", False), ("i16", True),
                                            ("day", False), ("ts", False), ("tsm", True),
                                            ("name", False), ("x", False), ("amount", False)])
def test_implied_filter_per_type(tmp_path: Path, col: str, descending: bool) -> None:
    """Integers, dates and UTC timestamps: the ranges hold every kept row's value (read
    back with pyarrow); strings, doubles, decimals: none."""
    t = _keyed(col)
    path = tmp_path / "f.parquet"
    _write_keyed(path, t, col, descending)
    back = pq.read_table(path)
    key = int(back["key"][KROWS // 3].as_py())
    groups, imp = _implied_of(path, f"key = {key}")
    # a page, and a few Bloom false positives
    assert groups and sum(rg.maybe.count() for _, rg in groups) <= 4 * KPAGE
    if col in ("name", "x", "amount"):
        assert imp is None
        return
    assert imp is not None and imp["column"] == col
    raw = back[col].cast({"day": pa.int32(), "ts": pa.int64(), "tsm": pa.int64()}.get(
        col, back[col].type)).to_numpy()
    for _, rg in groups:
        first = rg.index * KGROUP
        for r0, r1 in rg.maybe:
            vals = raw[first + r0:first + r1]
            assert all(any(lo <= v <= hi for lo, hi in imp["ranges"]) for v in vals.tolist())
    assert imp["type"] == {"id": "long", "i32": "int", "i16": "int", "day": "date",
                           "ts": "micros", "tsm": "millis"}[col]


def test_no_implied_filter_without_a_usable_sorted_column(tmp_path: Path) -> None:
    """Nothing sorted; a sorted column with nulls in the kept pages; a plan keeping
    most rows: no implied filter."""
    t = _keyed(None)
    _write_keyed(tmp_path / "none.parquet", t, None)
    key = int(t["key"][5].as_py())
    assert _implied_of(tmp_path / "none.parquet", f"key = {key}")[1] is None
    t = _keyed("id", nulls=True)
    path = tmp_path / "nulls.parquet"
    pqindex.write_table(t, path, presorted=True, sort_by=None, row_group_rows=KGROUP,
                        page_rows=KPAGE, indexes={"bloom": ["key"]}, bloom_scope="page")
    with ParquetFile.open(path) as pf:
        col = next(leaf.index for leaf in pf.schema.leaves if leaf.path == ("id",))
        ci = pf.column_index(0, col)
        assert ci is not None and ci.boundary_order == 1 and all(ci.null_counts or [])
    groups, imp = _implied_of(path, f"key = {int(t['key'][100].as_py())}")
    assert groups and (imp is None or imp["column"] != "id")
    t = _keyed("id")
    _write_keyed(tmp_path / "wide.parquet", t, "id")
    assert _implied_of(tmp_path / "wide.parquet", "key >= 0")[1] is None  # keeps everything


@pytest.fixture(scope="module")
def keyed_lake(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three files, ``id`` sorted across them; two files with nothing sorted; two with
    ``id`` sorted but with nulls in every page."""
    root = tmp_path_factory.mktemp("implied")
    out = {}
    for kind, col in (("sorted", "id"), ("none", None), ("nulls", "id")):
        d = root / kind
        d.mkdir()
        for i in range(3 if kind == "sorted" else 2):
            t = _keyed(col, seed=10 + i, nulls=kind == "nulls")
            t = t.set_column(t.schema.get_field_index("key"), "key",
                             pa.compute.add(t["key"], pa.scalar(i * 1_000_000, pa.int64())))
            if col:
                t = t.set_column(t.schema.get_field_index("id"), "id",
                                 pa.compute.add(t["id"], pa.scalar(i * KROWS, pa.int64())))
            if kind == "nulls":  # in order, nulls where they are (sorting moves them)
                pqindex.write_table(t, d / f"part-{i}.parquet", presorted=True,
                                    row_group_rows=KGROUP, page_rows=KPAGE,
                                    indexes={"bloom": ["key"]}, bloom_scope="page")
            else:
                _write_keyed(d / f"part-{i}.parquet", t, col)
        out[kind] = d
    return out


@pytest.mark.spark
def test_implied_filters_match_spark(loaded: Any, keyed_lake: dict[str, Path],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Random lookups and ranges, several kept row groups and files (an OR of ranges),
    the sorted column selected or not: the rows of ``spark.read.parquet``."""
    spark = loaded
    rng = np.random.default_rng(5)
    for kind, d in keyed_lake.items():
        seen = _plans(monkeypatch)
        df = ps.frame(spark, d, shim=True, driver_read_bytes=-1)
        native = spark.read.parquet(str(d))
        keys = pq.read_table(d, columns=["key"])["key"].to_numpy()
        wheres = []
        for _ in range(6):
            ks = [int(k) for k in rng.choice(keys, size=int(rng.integers(1, 5)))]
            wheres.append(f"key IN ({', '.join(map(str, ks))})")
            wheres.append(f"key = {ks[0]} AND id > {int(rng.integers(0, 3 * KROWS))}")
        wheres += ["key = -7", f"key = {int(keys[0])} OR id < 3",
                   f"key BETWEEN {int(keys[9])} AND {int(keys[9]) + 20}"]
        for w in wheres:
            for cols in (["key", "amount"], ["id", "name", "ts"], ["x"]):
                want = _rows(native.where(w).select(*cols))
                assert _rows(df.where(w).select(*cols)) == want, (kind, w, cols)
        implied = [a["implied"] for a in seen if "implied" in a]
        if kind != "sorted":
            assert not implied
        else:
            assert implied and all(i["column"] == "id" for i in implied)
            assert any(len(i["ranges"]) > 1 for i in implied)  # an OR over files
        monkeypatch.undo()


def _damage_pages_outside(path: Path, sorted_col: str, ranges: list[list[int]],
                          columns: tuple[str, ...]) -> int:
    """Overwrite the header of every data page of ``columns`` whose rows no page of
    ``sorted_col`` with bounds in ``ranges`` holds (what parquet-mr's column-index
    filtering skips); the number damaged."""
    damaged = 0
    with ParquetFile.open(path) as pf:
        leaves = {leaf.path[0]: leaf.index for leaf in pf.schema.leaves}
        spots = []
        for rg in range(len(pf.metadata.row_groups or [])):
            n = pf.row_group_rows(rg)
            ci, oi = pf.column_index(rg, leaves[sorted_col]), pf.offset_index(rg, leaves[sorted_col])
            assert ci is not None and oi is not None and ci.min_values and ci.max_values
            firsts = [int(p.first_row_index or 0) for p in oi.page_locations] + [n]
            rows = []
            for p in range(len(oi.page_locations)):
                lo = int.from_bytes(ci.min_values[p], "little", signed=True)
                hi = int.from_bytes(ci.max_values[p], "little", signed=True)
                if any(a <= hi and lo <= b for a, b in ranges):
                    rows.append((firsts[p], firsts[p + 1]))
            for c in columns:
                o = pf.offset_index(rg, leaves[c])
                assert o is not None
                f2 = [int(p.first_row_index or 0) for p in o.page_locations] + [n]
                for p, loc in enumerate(o.page_locations):
                    if not any(a < f2[p + 1] and f2[p] < b for a, b in rows):
                        spots.append(int(loc.offset or 0))
    with open(path, "r+b") as f:
        for off in spots:
            f.seek(off)
            f.write(b"\xff" * 12)
            damaged += 1
    return damaged


@pytest.mark.spark
def test_implied_filter_reads_only_the_kept_pages(loaded: Any, keyed_lake: dict[str, Path],
                                                  tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A lookup through the page-scope Bloom index: Spark's reader reads only the pages
    of the implied ranges. Proven by damage: every other data page of the columns read
    has its header overwritten; without the implied filter the same read fails.
    (Hadoop's file-system statistics do not see parquet-mr's reads here: they count the
    same bytes either way, so bytes are measured in bench/spark_native.py.)"""
    spark = loaded
    d = tmp_path / "lake"
    shutil.copytree(keyed_lake["sorted"], d)
    t = pq.read_table(d / "part-1.parquet", columns=["key"])
    key = int(t["key"][KROWS // 2].as_py())
    seen = _plans(monkeypatch)
    query = ps.frame(spark, d, shim=True, driver_read_bytes=-1).where(
        f"key = {key}").select("key", "name", "x")
    assert [r["key"] for r in query.collect()] == [key]
    implied = [a["implied"] for a in seen if "implied" in a]
    assert implied and implied[-1]["column"] == "id"
    damaged = sum(_damage_pages_outside(p, "id", implied[-1]["ranges"], ("key", "name", "x"))
                  for p in sorted(d.glob("*.parquet")))
    assert damaged > 3 * 2 * (KROWS // KPAGE)  # most pages of every column
    query = ps.frame(spark, d, shim=True, driver_read_bytes=-1).where(
        f"key = {key}").select("key", "name", "x")
    assert [r["key"] for r in query.collect()] == [key]
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    monkeypatch.setattr(shim, "IMPLIED_FILTERS", False)
    with pytest.raises((Py4JJavaError, PySparkException)):  # the damage is real
        ps.frame(spark, d, shim=True, driver_read_bytes=-1).where(
            f"key = {key}").select("key", "name", "x").collect()
