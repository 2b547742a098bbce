"""Spark reads through pqindex (``pqindex.spark.read``, the "pqindex" data source reader).

Differential: for files of several writers and a pipeline output, random Spark SQL
predicates; the rows of ``engine="pqindex"`` (and ``"auto"``) must be exactly
``spark.read.parquet(path).where(where).select(columns)``'s. The auto decision is
asserted through ``explain`` (what was planned), never through timings.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import random
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pqindex.spark as ps
from conftest import import_or_missing
from pqindex.errors import PqIndexError, UserInputError
from pqindex.spark.secrets import PATTERN, REDACTION_CONF, hide, reveal
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)

import_or_missing("pyspark", "pyspark")

# Writers whose files the differential reads (one file each, several row groups).
WRITERS = ("pyarrow_v2_snappy_dict", "pyarrow_bloom", "duckdb", "polars")
CASES = 3  # predicates per writer: every case is two Spark jobs on 2 shared cores
# Columns the random projections draw from (nested ones check the Arrow -> Spark cast).
COLUMNS = ("id", "desc", "shuffled", "f64", "category", "day", "ts", "price", "flag",
           "tags", "point")


def _sql_lit(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v.astimezone(dt.UTC).strftime('%Y-%m-%d %H:%M:%S.%f')}'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    return str(v)


class SparkPredicates:
    """Random predicates in Spark SQL over a table's scalar columns, literals drawn from
    its values (and just beside them), so that they select few, many or no rows."""

    SCALAR = ("id", "desc", "shuffled", "category", "day", "price", "flag", "ts")

    def __init__(self, table: pa.Table, rng: random.Random) -> None:
        self.rng = rng
        self.values = {c: [v for v in table.column(c).to_pylist() if v is not None]
                       for c in self.SCALAR if c in table.column_names}

    def leaf(self) -> str:
        rng = self.rng
        col = rng.choice(sorted(self.values))
        vals = self.values[col]
        if not vals or rng.random() < 0.1:
            return f"`{col}` IS {'NOT ' if rng.random() < 0.5 else ''}NULL"
        v = rng.choice(vals)
        if isinstance(v, bool):
            return f"`{col}` = {_sql_lit(v)}"
        if isinstance(v, int) and rng.random() < 0.2:
            v += rng.choice([-1, 1, 10**6])  # maybe absent
        r = rng.random()
        if r < 0.5:
            return f"`{col}` {rng.choice(['=', '!=', '<', '<=', '>', '>='])} {_sql_lit(v)}"
        if r < 0.7:
            a, b = sorted([v, rng.choice(vals)])
            return f"`{col}` BETWEEN {_sql_lit(a)} AND {_sql_lit(b)}"
        items = ", ".join(_sql_lit(rng.choice(vals)) for _ in range(rng.choice([1, 2, 5])))
        return f"`{col}` {'NOT ' if rng.random() < 0.2 else ''}IN ({items})"

    def tree(self, depth: int = 2) -> str:
        rng = self.rng
        if depth == 0 or rng.random() < 0.4:
            return self.leaf()
        r = rng.random()
        if r < 0.15:
            return f"NOT ({self.tree(depth - 1)})"
        op = " AND " if r < 0.65 else " OR "
        return "(" + op.join(self.tree(depth - 1) for _ in range(2)) + ")"


def _rows(df: Any) -> list[str]:
    # repr: NaN equals itself, and rows of any type sort
    return sorted(repr(tuple(r)) for r in df.collect())


def _explain_text(df: Any) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        df.explain(True)
    return buf.getvalue()


def test_storage_options_redacted_in_what_spark_prints(spark: Any, tmp_path: Path) -> None:
    """Spark's own redaction, not pqindex's: an option carrying ``hide``'s value prints
    as Spark's redaction text in ``explain`` (a file source prints its options in the
    plan; a regex set before in the session is kept), and ``reveal`` decodes it."""
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), path)
    so = {"secret_access_key": f"pqindex-secret-{random.randrange(2**64):x}", "n": 3}
    before = spark.conf.get(REDACTION_CONF, None)
    spark.conf.set(REDACTION_CONF, "(?i)mytoken")
    try:
        value = hide(spark, so)
        assert reveal(value) == so and reveal(json.dumps(so)) == so and reveal("") == {}
        regex = spark.conf.get(REDACTION_CONF)
        assert "(?i)mytoken" in regex and PATTERN in regex
        hide(spark, so)
        assert spark.conf.get(REDACTION_CONF) == regex  # extended once
        df = spark.read.format("parquet").option("path", str(path)).option("pq", value).load()
        df = df.where("a > 1").selectExpr("a", f"'{value}' AS leak", "'mytoken' AS t")
        text = _explain_text(df)
        assert so["secret_access_key"] not in text and value not in text, text
        assert "*********(redacted)" in text
        assert [tuple(r) for r in df.collect()] == [(2, value, "mytoken")]  # data untouched
    finally:
        if before is None:
            spark.conf.unset(REDACTION_CONF)
        else:
            spark.conf.set(REDACTION_CONF, before)
    with pytest.raises(PqIndexError, match="JSON object"):
        reveal("[1]")


def _reference(spark: Any, path: str, where: str, columns: list[str]) -> list[str]:
    return _rows(spark.read.parquet(path).where(where).select(*columns))


def _check(spark: Any, path: str, where: str, columns: list[str], engine: str,
           **kw: Any) -> None:
    got = ps.read(spark, path, where, columns, engine=engine, **kw)
    ref = spark.read.parquet(path).where(where).select(*columns)
    assert got.schema == ref.schema, (where, got.schema, ref.schema)
    assert _rows(got) == _rows(ref), f"{engine} differs from Spark for {path} where {where}"


@pytest.mark.parametrize("writer", WRITERS)
def test_pqindex_engine_matches_spark(spark: Any, written_files: Any, writer: str) -> None:
    path = str(written_files[writer])
    table = pq.read_table(path)
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    gen = SparkPredicates(table, rng)
    for i in range(CASES):
        where = gen.tree()
        columns = rng.sample([c for c in COLUMNS if c in table.column_names], rng.randint(1, 4))
        if rng.random() < 0.5:  # the predicate's columns among those returned
            columns += [c for c in COLUMNS if c in where and c not in columns]
        try:  # in the data source's tasks however small the plan, and on the driver
            _check(spark, path, where, columns, "pqindex",
                   driver_read_bytes=-1 if i % 2 == 0 else None)
        except AssertionError as e:
            raise AssertionError(f"seed {seed}: {e}") from None


def test_driver_read_of_no_rows_with_a_nested_column(spark: Any, tmp_path: Path) -> None:
    """No row of a nested column read on the driver: the DataFrame is built from one
    empty chunk per column (pyspark's timestamp check cannot type a nested column of
    no chunks)."""
    path = tmp_path / "nested.parquet"
    n = 1_000
    pq.write_table(pa.table({
        "id": pa.array(range(0, 2 * n, 2), pa.int64()),  # even: id = 7 keeps row group 0
        "tags": pa.array([[i, i + 1] for i in range(n)], pa.list_(pa.int64())),
        "ts": pa.array([1_700_000_000_000_000 + i for i in range(n)], pa.timestamp("us", "UTC")),
    }), path, row_group_size=250, use_dictionary=False)  # no dictionary rules 7 out
    for where in ("id = 7", "id < 0", "id = 8", "id >= 1990"):
        _check(spark, str(path), where, ["tags", "ts", "id"], "pqindex")


@pytest.mark.parametrize("engine", ["native", "pqindex"])
def test_one_column_given_as_a_string(spark: Any, tmp_path: Path, engine: str) -> None:
    # A string is that one column, as in spark's own select("id"): not its letters.
    path = tmp_path / "one.parquet"
    pq.write_table(pa.table({"id": pa.array(range(100), pa.int64()),
                             "v": pa.array([float(i) for i in range(100)])}), path)
    got = ps.read(spark, str(path), "id < 5", "v", engine=engine)
    assert got.columns == ["v"] and _rows(got) == _rows(
        spark.read.parquet(str(path)).where("id < 5").select("v"))


@pytest.mark.parametrize("engine", ["native", "pqindex"])
def test_nan_rows_are_kept_as_spark_keeps_them(spark: Any, tmp_path: Path, engine: str) -> None:
    """Spark orders NaN above every number: ``x > 5`` keeps NaN rows. Regression: the
    planner's IEEE comparison dropped them, and a file whose numbers are all below 5
    (its statistics leave NaN out) was pruned whole. Spark's own Parquet filter pushdown
    makes that very mistake, so the reference runs without it."""
    lake = tmp_path / "lake"
    lake.mkdir()
    nan = float("nan")
    pq.write_table(pa.table({"id": [1, 2, 3], "x": [1.0, nan, 2.0]}), lake / "a.parquet",
                   write_page_index=True)
    pq.write_table(pa.table({"id": [4, 5, 6], "x": [10.0, 11.0, nan]}), lake / "b.parquet",
                   write_page_index=True)
    base = spark.read.parquet(str(lake))
    spark.conf.set("spark.sql.parquet.filterPushdown", "false")
    try:
        for where in ("x > 5", "NOT x < 5", "x >= 1 AND id < 3", "NOT (x <= 10 OR id = 2)"):
            got = ps.read(spark, str(lake), where, engine=engine, driver_read_bytes=-1)
            assert _rows(got) == _rows(base.where(where)), where
    finally:
        spark.conf.unset("spark.sql.parquet.filterPushdown")


@pytest.mark.parametrize("engine", ["native", "pqindex", "auto"])
def test_like_and_ilike_match_spark(spark: Any, written_files: Any, tmp_path: Path,
                                    engine: str) -> None:
    """LIKE patterns through every engine give Spark's rows; ILIKE is left to Spark
    (Java's lowercasing is not Arrow's), which the plan says."""
    import shutil

    (tmp_path / "lake").mkdir()
    shutil.copy(written_files["pyarrow_v1_snappy_plain"], tmp_path / "lake" / "a.parquet")
    path = str(tmp_path / "lake")
    for where in ("category LIKE '%lt%'", "category NOT LIKE '_e%'", "category LIKE 'a%a'",
                  "category LIKE '%ph%' OR id < 3", "category ILIKE '%ELT%'",
                  "category LIKE 'a!%%' ESCAPE '!' OR category NOT LIKE '%!_%' ESCAPE '!'",
                  "category LIKE 'al!!%' ESCAPE '!' OR category LIKE 'b_t%' ESCAPE '!'"):
        _check(spark, path, where, ["id", "category"], engine, driver_read_bytes=-1)
    info = ps.explain(spark, path, "category ILIKE '%ELT%'", columns=["id"], engine=engine)
    assert "ILIKE and regular expressions are left to Spark" in str(info), info


def test_pqindex_reader_reads_only_kept_row_groups(spark: Any, written_files: Any) -> None:
    """A point lookup: one task per kept file share, the other row groups never planned
    by a task (the units are what the driver's plan kept)."""
    path = str(written_files["pyarrow_bloom"])
    info = ps.explain(spark, path, "id = 4321", columns=["id", "category"], engine="pqindex",
                      driver_read_bytes=-1)
    assert (info["engine"], info["engine_mode"]) == ("pqindex", "tasks")
    assert info["units"] == 1  # one file, one kept row group of 3
    assert 0 < info["bytes_kept"] < Path(path).stat().st_size / 3
    _check(spark, path, "id = 4321", ["id", "category"], "pqindex", driver_read_bytes=-1)
    # So small a plan is read on the driver by default: no task, same rows.
    info = ps.explain(spark, path, "id = 4321", columns=["id", "category"], engine="pqindex")
    assert (info["engine_mode"], info["units"]) == ("driver", 0)
    _check(spark, path, "id = 4321", ["id", "category"], "pqindex")


@pytest.fixture(scope="module")
def pipeline_output(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    from pyspark.sql import functions as F

    dest = str(tmp_path_factory.mktemp("spark_read") / "lake")
    df = spark.range(0, 6000).select(
        F.col("id").alias("k"),
        (F.col("id") % 3).cast("int").alias("part"),
        F.concat(F.lit("name-"), (F.col("id") % 97).cast("string")).alias("name"),
        (F.col("id") * 1.5).alias("amount"),
    )
    ps.write(df, dest, sort_by="k", partition_by="part", row_group_rows=500, page_rows=100,
             bloom=["name"], num_partitions=2)
    return dest


def test_pipeline_output_differential(spark: Any, pipeline_output: str) -> None:
    rng = random.Random()
    seed = rng.randrange(2**32)
    rng.seed(seed)
    k = rng.randrange(6000)
    wheres = [
        f"k = {k}",
        f"part = {k % 3} AND k BETWEEN {k} AND {k + rng.randint(0, 700)}",
        f"name IN ('name-{k % 97}', 'name-{(k + 5) % 97}') OR k < {rng.randint(0, 300)}",
        f"NOT (k >= {rng.randint(0, 6000)}) AND part != {rng.randrange(3)}",
    ]
    for i, where in enumerate(wheres):
        columns = rng.sample(["k", "part", "name", "amount"], rng.randint(1, 3))
        try:  # tasks and driver in turn
            _check(spark, pipeline_output, where, columns, "pqindex",
                   driver_read_bytes=-1 if i % 2 == 0 else None)
        except AssertionError as e:
            raise AssertionError(f"seed {seed}: {e}") from None
    # auto, on whatever it picks, gives the same rows
    _check(spark, pipeline_output, wheres[1], ["k", "part"], "auto")


def test_date_partitions_are_read_by_pqindex_as_spark_types_them(
        spark: Any, tmp_path: Path) -> None:
    """A lake partitioned by a DATE column (``d=2024-01-31/``): Spark and pqindex both
    type ``d`` DATE, so pqindex's reader applies a predicate on it itself (no fallback)
    and its partition values prune files; rows and schema are Spark's."""
    from pyspark.sql import functions as F

    dest = str(tmp_path / "by_date")
    df = spark.range(0, 3000).select(
        F.col("id").alias("k"),
        F.when(F.col("id") % 7 == 0, F.lit(None)).otherwise(
            F.date_add(F.lit("2024-02-27").cast("date"), (F.col("id") % 4).cast("int"))
        ).alias("d"),
        (F.col("id") % 13).alias("v"))
    ps.write(df, dest, sort_by="k", partition_by="d", row_group_rows=400, page_rows=100,
             num_partitions=2)
    assert spark.read.parquet(dest).schema["d"].dataType.typeName() == "date"
    for where in ["d = DATE '2024-02-29'", "d >= '2024-02-28' AND v < 4", "d IS NULL",
                  "d IN (DATE '2024-02-27', DATE '2024-03-01') OR k = 17"]:
        info = ps.explain(spark, dest, where, columns=["k", "d"], engine="pqindex")
        assert info["fallback"] is None, info
        for engine in ("pqindex", "auto", "native"):
            _check(spark, dest, where, ["k", "d", "v"], engine)
        # In the data source's tasks: the partition types travel with each unit.
        _check(spark, dest, where, ["k", "d", "v"], "pqindex", driver_read_bytes=-1)
    info = ps.explain(spark, dest, "d = DATE '2024-02-29'", columns=["k"], engine="native")
    assert len(info["kept"]) < info["files_total"], info


def test_a_lake_whose_files_gained_a_column_reads_as_spark_does(
        spark: Any, tmp_path: Path) -> None:
    """Files that lack a column Spark's schema has (Spark fills NULL there): pqindex's
    reader gives Spark's rows. A column Spark's schema lacks (it reads one file's
    schema) is a UserInputError naming it, as Spark refuses the query too."""
    lake = tmp_path / "evolved"
    lake.mkdir()
    pq.write_table(pa.table({"k": [1, 2, 3], "c": [0.5, None, 2.5]}), lake / "p0.parquet")
    pq.write_table(pa.table({"k": [4, 5, 6]}), lake / "p1.parquet")
    pq.write_table(pa.table({"k": [7, 8], "c": [1.5, 3.5]}), lake / "p2.parquet")
    assert "c" in spark.read.parquet(str(lake)).schema.fieldNames()
    for where in ["c > 1", "c IS NULL", "k > 3 AND (c < 2 OR c IS NULL)"]:
        for engine in ("pqindex", "auto"):
            _check(spark, str(lake), where, ["k", "c"], engine)
    late = tmp_path / "late"
    late.mkdir()
    pq.write_table(pa.table({"k": [1, 2]}), late / "p0.parquet")
    pq.write_table(pa.table({"k": [3], "c": [1.5]}), late / "p1.parquet")
    if "c" not in spark.read.parquet(str(late)).schema.fieldNames():
        with pytest.raises(UserInputError, match="no column named 'c' in Spark"):
            ps.read(spark, str(late), "c > 1", ["k", "c"], engine="pqindex")


def test_auto_picks_by_kept_bytes(spark: Any, pipeline_output: str) -> None:
    point = ps.explain(spark, pipeline_output, "k = 4242", columns=["k", "name"], engine="auto")
    broad = ps.explain(spark, pipeline_output, "k >= 10", columns=["k", "name"], engine="auto")
    assert point["engine"] == "pqindex", point["engine_reason"]
    assert point["bytes_kept"] * 4 < broad["bytes_kept"]
    # A threshold between the two: the broad scan goes to Spark's reader, on kept files.
    threshold = (point["bytes_kept"] + broad["bytes_kept"]) // 2
    broad = ps.explain(spark, pipeline_output, "k >= 10", columns=["k", "name"],
                       engine="auto", threshold_bytes=threshold)
    assert broad["engine"] == "native", broad["engine_reason"]
    point = ps.explain(spark, pipeline_output, "k = 4242", columns=["k", "name"],
                       engine="auto", threshold_bytes=threshold)
    assert point["engine"] == "pqindex"
    got = ps.read(spark, pipeline_output, "k >= 5990", ["k", "name"], engine="auto",
                  threshold_bytes=1)
    assert _rows(got) == _reference(spark, pipeline_output, "k >= 5990", ["k", "name"])
    # No predicate: a full scan is Spark's.
    assert ps.explain(spark, pipeline_output, None, engine="auto")["engine"] == "native"
    # No file can match: Spark's reader on no file (an empty relation), no rows to hand
    # over from pqindex (measured: pqindex's driver read costs more, for nothing).
    none = ps.explain(spark, pipeline_output, "k = -7", columns=["k"], engine="auto")
    assert none["engine"] == "native" and none["files_kept"] == 0, none
    assert "keeps no file" in none["engine_reason"]
    got = ps.read(spark, pipeline_output, "k = -7", ["k", "name"], engine="auto")
    assert _rows(got) == _reference(spark, pipeline_output, "k = -7", ["k", "name"]) == []


@pytest.fixture(scope="module")
def unsorted_lookup_lakes(spark: Any, tmp_path_factory: pytest.TempPathFactory
                          ) -> dict[str, str]:
    """The same rows sorted on ``k``, with ``u`` a permutation of ``k`` (no page statistics
    narrow ``u = x``): Parquet Bloom on ``u``, and an embedded Bloom index on ``u`` of
    one filter per file or per page (``bloom_scope``)."""
    from pyspark.sql import functions as F

    base = tmp_path_factory.mktemp("page_bloom")
    df = spark.range(0, 6000).select(
        F.col("id").alias("k"),
        ((F.col("id") * 2477) % 6000).alias("u"),  # 2477 is prime to 6000
        F.concat(F.lit("v-"), F.col("id").cast("string")).alias("name"),
    )
    out = {}
    for scope in ("file", "page"):
        out[scope] = str(base / scope)
        ps.write(df, out[scope], sort_by="k", row_group_rows=1500, page_rows=100,
                 bloom=["u"], indexes={"bloom": ["u"]}, bloom_scope=scope, num_partitions=2)
    return out


def test_page_bloom_narrows_a_lookup_to_pages(spark: Any,
                                              unsorted_lookup_lakes: dict[str, str]) -> None:
    """A pipeline written with ``bloom_scope="page"`` lets pqindex's reader keep only the
    pages that may hold a looked-up value of an unsorted column (with a file filter:
    every page of the row groups the Parquet Bloom keeps); Spark's rows either way."""
    lakes = unsorted_lookup_lakes
    manifest = json.loads((Path(lakes["page"]) / "_pqindex_manifest.json").read_text())
    assert manifest["bloom_scope"] == ["page"]
    rng = random.Random()
    seed = rng.randrange(2**32)
    rng.seed(seed)
    x, y = rng.sample(range(6000), 2)
    cases = [(f"u = {x}", ["u", "name"]), (f"u IN ({x}, {y}, 7000)", ["k", "name", "u"]),
             ("u = 6001", ["name"]), (f"u = {y} AND k >= {rng.randrange(6000)}", ["k"])]
    kept = {}
    for scope, lake in lakes.items():
        # Bytes kept summed over fixed values: for one value, false positives of its
        # pages' filters make the ratio vary (under 4x for ~2% of values, measured).
        kept[scope] = sum(
            ps.explain(spark, lake, f"u = {v}", columns=["u", "name"],
                       engine="pqindex")["bytes_kept"] for v in (17, 1234, 2999, 4321, 5555))
        for i, (where, columns) in enumerate(cases):
            try:  # the driver, and the data source's tasks (which plan their file again)
                _check(spark, lake, where, columns, "pqindex",
                       driver_read_bytes=-1 if i % 2 else None)
                _check(spark, lake, where, columns, "auto")
            except AssertionError as e:
                raise AssertionError(f"seed {seed}, {scope}: {e}") from None
    # One row group of the 4, 15 pages: page filters keep ~1 (false positives aside).
    assert 0 < kept["page"] * 4 < kept["file"], kept


def test_auto_takes_lookups_by_bloom_size(spark: Any, written_files: Any) -> None:
    """Above the bytes threshold, an equality on a Bloom-filtered column whose filter
    sizes promise few rows per value still goes to pqindex; a range does not."""
    from pqindex.spark.reading import LOOKUP_ROWS

    path = str(written_files["pyarrow_bloom"])  # Bloom on id (unique values)
    v = random.randrange(5000)
    info = ps.explain(spark, path, f"id = {v}", columns=["id", "f64"], engine="auto",
                      threshold_bytes=0)
    assert info["engine"] == "pqindex" and "lookup" in info["engine_reason"], info
    rows = int(info["engine_reason"].split("about ")[1].split()[0])
    assert rows <= LOOKUP_ROWS
    _check(spark, path, f"id = {v}", ["id", "f64"], "auto", threshold_bytes=0)
    info = ps.explain(spark, path, f"id >= {v}", columns=["id", "f64"], engine="auto",
                      threshold_bytes=0)
    assert info["engine"] == "native", info


def test_no_spark_connector_reads_through_pqindex(spark: Any, s3: S3Endpoint,  # noqa: F811
                                                   written_files: Any) -> None:
    """s3:// without hadoop-aws: Spark cannot list it; auto reads it through pqindex
    (driver plan and tasks through pqindex's storage layer), rows as Spark's on the
    same file read locally."""
    local = written_files["duckdb"]
    bucket = s3.new_bucket()
    s3.put(bucket, "t/part-0.parquet", Path(local).read_bytes())
    url = f"s3://{bucket}/t"
    secret = f"pqindex-secret-{random.randrange(2**64):x}"  # moto takes any
    so = s3.storage_options(secret_access_key=secret)
    info = ps.explain(spark, url, "id BETWEEN 100 AND 140", columns=["id", "category"],
                      engine="auto", storage_options=so)
    assert info["engine"] == "pqindex"
    assert "no connector" in info["engine_reason"]
    ref = _reference(spark, str(local), "id BETWEEN 100 AND 140", ["id", "category"])
    for on_driver in (None, -1):  # the tasks read s3:// through pqindex's storage layer too
        got = ps.read(spark, url, "id BETWEEN 100 AND 140", ["id", "category"],
                      storage_options=so, driver_read_bytes=on_driver)
        assert _rows(got) == ref
        # The options went to the tasks redacted wherever Spark prints the plan.
        text = _explain_text(got)
        assert secret not in text and not re.search(PATTERN.replace("*", "+"), text), text
    assert PATTERN in spark.conf.get(REDACTION_CONF)
    with pytest.raises(PqIndexError, match="no connector"):
        ps.read(spark, url, "id = 1", ["id"], engine="native", storage_options=so)


def test_no_spark_connector_types_partitions_as_spark(spark: Any, s3: S3Endpoint,  # noqa: F811
                                                     tmp_path: Path) -> None:
    """Regression: without a connector the schema came from pqindex's Arrow types, so a
    hive column ``p=0`` read as bigint where Spark's read says int (and a value beyond
    32 bits as bigint): same schema and rows as Spark's read of the same objects."""
    bucket = s3.new_bucket()
    t = pa.table({"id": pa.array(range(40), pa.int64()),
                  "s": pa.array([f"v{i % 3}" for i in range(40)])})
    layout = {"small/p=0": t.slice(0, 20), "small/p=7": t.slice(20, 20),
              "big/q=1": t.slice(0, 20), "big/q=5000000000": t.slice(20, 20)}
    for rel, part in layout.items():
        local = tmp_path / rel / "part-0.parquet"
        local.parent.mkdir(parents=True)
        pq.write_table(part, local)
        s3.put(bucket, f"{rel}/part-0.parquet", local.read_bytes())
    so = s3.storage_options()
    for root, where in (("small", "p = 7 AND id < 30"), ("big", "q > 1 AND id < 30")):
        want = spark.read.parquet(str(tmp_path / root)).where(where)
        got = ps.read(spark, f"s3://{bucket}/{root}", where, storage_options=so)
        assert got.schema == want.schema, (got.schema, want.schema)
        assert _rows(got) == _rows(want)


def test_data_source_reader_directly(spark: Any, written_files: Any) -> None:
    """``spark.read.format("pqindex")`` without a driver plan: the planning process plans."""
    path = str(written_files["polars"])
    ps.register(spark)
    df = (spark.read.format("pqindex").option("where", "id < 25")
          .option("columns", '["id", "category"]').load(path))
    assert sorted(r["id"] for r in df.collect()) == list(range(25))
