"""``Scan.head`` / ``Dataset.head``, ``Dataset.count_rows`` and ``avg`` aggregates.

References: ``pyarrow.parquet.read_table`` of every file then ``Table.filter`` (rows,
in file order), DuckDB (counts and averages), Python's exact int and Decimal
arithmetic (sums that pyarrow's and DuckDB's fixed widths overflow).
"""

from __future__ import annotations

import math
import random
from decimal import ROUND_HALF_UP, Decimal, localcontext
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex

FILES = 6
ROWS = 3_000


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """Six pyarrow-written files (500-row row groups, page index on) with nulls, NaN and
    a DECIMAL column; ``k`` counts rows across files, so file order is row order."""
    root = tmp_path_factory.mktemp("lake")
    rng = np.random.default_rng(11)
    paths = []
    for f in range(FILES):
        n = ROWS
        amount = rng.normal(100, 30, n)
        amount[rng.random(n) < 0.002] = np.nan
        x = rng.integers(-5, 50, n).astype(object)
        x[rng.random(n) < 0.1] = None
        price = [None if v % 17 == 0 else Decimal(int(v)).scaleb(-2)
                 for v in rng.integers(0, 10**9, n)]
        t = pa.table({
            "k": pa.array(np.arange(f * n, (f + 1) * n), pa.int64()),
            "cat": pa.array(rng.choice(["a", "b", "c", "rare" if f == 3 else "d"], n)),
            "x": pa.array(list(x), pa.int32()),
            "amount": pa.array(amount),
            "price": pa.array(price, pa.decimal128(15, 2)),
        })
        p = root / f"part-{f}.parquet"
        pq.write_table(t, p, row_group_size=500, write_page_index=True,
                       data_page_size=2_000)
        paths.append(p)
    return root, paths


def _reference(paths: list[Path], where: Any) -> pa.Table:
    t = pa.concat_tables(pq.read_table(p) for p in paths)
    return t.filter(where) if where is not None else t


HEADS = [
    (None, None),
    ("cat = 'rare'", pc.field("cat") == "rare"),
    ("x > 40", pc.field("x") > 40),
    ("k BETWEEN 2990 AND 3010", (pc.field("k") >= 2990) & (pc.field("k") <= 3010)),
    ("x IS NULL AND cat = 'b'", pc.field("x").is_null() & (pc.field("cat") == "b")),
    ("amount > 1000", pc.field("amount") > 1000),
]


@pytest.mark.parametrize(("where", "arrow"), HEADS)
def test_head_is_the_first_rows_of_to_table(lake: tuple[Path, list[Path]], where: Any,
                                            arrow: Any) -> None:
    root, paths = lake
    want = _reference(paths, arrow)
    ds = pqindex.dataset(root)
    for n in (0, 1, 7, 499, 501, 3_001, want.num_rows, want.num_rows + 5):
        got = ds.head(n, ["k", "x", "price"], where)
        assert got.schema == ds.scan(["k", "x", "price"], where).to_table().schema
        assert got.equals(want.select(["k", "x", "price"]).slice(0, n)), (where, n)
    full = ds.head(10, where=where)
    assert full.column_names == want.column_names
    assert full.equals(want.slice(0, 10))


@pytest.mark.parametrize("sift", [True, False])
def test_head_stops_reading_once_it_has_the_rows(lake: tuple[Path, list[Path]], sift: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways a row group is read: small ones whole and filtered (sifted), the
    others in waves of pages (``scan/batch.py``)."""
    import importlib

    if not sift:
        monkeypatch.setattr(importlib.import_module("pqindex.dataset.dataset"),
                            "SIFT_ROW_GROUP_BYTES", 0)
    root, paths = lake
    where = "x > 40"  # matches in every file
    planned = pqindex.dataset(root)
    planned.plan(["k", "x"], where)
    plan_bytes = {p: st.bytes_read for p, st in planned.io_stats().items()}

    ds = pqindex.dataset(root)
    scan = ds.scan(["k", "x"], where)
    assert scan.head(3).num_rows == 3
    read = {p: st.bytes_read for p, st in ds.io_stats().items()}
    # The report counts what the stream did before it stopped: one file, its first
    # row group (the executor's streamed tables come one row group at a time).
    assert scan.report.files_read == 1
    assert scan.report.row_groups_read == 1
    assert scan.report.rows_matched >= 3
    first = str(paths[0])
    assert read[first] > plan_bytes[first]  # the first file's pages were read
    for p in paths[1:]:  # the others: never opened (head plans in steps of files)
        assert str(p) not in read, p

    whole = pqindex.dataset(root)
    whole.to_table(["k", "x"], where)
    assert all(st.bytes_read > plan_bytes[p] for p, st in whole.io_stats().items())


def test_head_refuses_a_bad_count(lake: tuple[Path, list[Path]]) -> None:
    ds = pqindex.dataset(lake[0])
    for bad in (-1, 2.5, True, "3"):
        with pytest.raises(pqindex.UserInputError, match="number of rows"):
            ds.head(bad)  # type: ignore[arg-type]


def test_count_rows_matches_duckdb(lake: tuple[Path, list[Path]]) -> None:
    root, paths = lake
    files = ", ".join(f"'{p}'" for p in paths)
    rng = random.Random(5)
    # (No comparison on `amount` here: DuckDB orders NaN above every number, pqindex
    # compares as IEEE does, like pyarrow; checked against pyarrow below.)
    wheres = ["", "cat = 'rare'", "x IS NULL", "NOT (x < 10)",
              "price < 5000000.00", "cat IN ('a', 'rare') AND k >= 5000"]
    for _ in range(25):
        a = rng.randrange(-100, FILES * ROWS + 100)
        wheres.append(f"k BETWEEN {a} AND {a + rng.choice([0, 1, 499, 500, 4_000])}")
    ds = pqindex.dataset(root)
    for where in wheres:
        sql = f"SELECT count(*) FROM read_parquet([{files}])" + (
            f" WHERE {where}" if where else "")
        row = duckdb.sql(sql).fetchall()[0]
        assert row is not None
        assert ds.count_rows(where or None) == row[0], where
    assert ds.count_rows(filters=[("cat", "=", "rare")]) == ds.count_rows("cat = 'rare'")
    full = _reference(paths, None)
    assert ds.count_rows("amount > 100") == full.filter(pc.field("amount") > 100).num_rows
    assert ds.count_rows("NOT (amount > 100)") == full.filter(
        ~(pc.field("amount") > 100)).num_rows  # NaN > 100 is FALSE: NaN rows count here


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def test_avg_matches_duckdb_and_exact_decimal_arithmetic(
        lake: tuple[Path, list[Path]]) -> None:
    root, paths = lake
    files = ", ".join(f"'{p}'" for p in paths)
    full = _reference(paths, None)
    ds = pqindex.dataset(root)
    wheres = ["", "cat = 'rare'", "k < 1", "k < 0", "x IS NULL", "amount < 70",
              "k BETWEEN 1234 AND 9876", "cat = 'b' AND x > 3"]
    for where in wheres:
        got = ds.aggregate(["avg(x)", "mean(amount)", "avg(price)", "avg(k)"], where or None)
        sql = (f"SELECT avg(x), avg(amount), avg(price), avg(k) FROM read_parquet([{files}])"
               + (f" WHERE {where}" if where else ""))
        want = duckdb.sql(sql).fetchall()[0]
        assert want is not None
        for name, w in zip(["avg(x)", "mean(amount)", "avg(price)", "avg(k)"], want,
                           strict=True):
            assert _close(got[name], w), (where, name, got[name], w)
        # The decimal average exactly: Decimal sum / count, 4 more places, half up.
        rows = full.filter(_arrow_where(where)) if where else full
        prices = [v for v in rows.column("price").to_pylist() if v is not None]
        if prices:
            with localcontext() as ctx:
                ctx.prec = 60
                exact = (sum(prices) / len(prices)).quantize(Decimal("0.000001"),
                                                             rounding=ROUND_HALF_UP)
            assert got["avg(price)"] == exact, where
        else:
            assert got["avg(price)"] is None
        ints = [v for v in rows.column("x").to_pylist() if v is not None]
        assert got["avg(x)"] == (sum(ints) / len(ints) if ints else None), where


def _arrow_where(where: str) -> Any:
    return {
        "cat = 'rare'": pc.field("cat") == "rare",
        "k < 1": pc.field("k") < 1,
        "k < 0": pc.field("k") < 0,
        "x IS NULL": pc.field("x").is_null(),
        "amount < 70": pc.field("amount") < 70,
        "k BETWEEN 1234 AND 9876": (pc.field("k") >= 1234) & (pc.field("k") <= 9876),
        "cat = 'b' AND x > 3": (pc.field("cat") == "b") & (pc.field("x") > 3),
    }[where]


def test_sums_past_fixed_widths_are_exact(tmp_path: Path) -> None:
    """pyarrow's sum wraps past 38 digits (a DECIMAL(38) column) and 64 bits; DuckDB
    raises an overflow. pqindex returns the exact Decimal / int."""
    big = [Decimal("9" * 36 + ".12"), Decimal("8" * 35 + ".01"), Decimal("-1.50"), None] * 600
    ints = [2**62, 2**62 - 1, -5, None] * 600
    p = tmp_path / "wide.parquet"
    pq.write_table(pa.table({"d": pa.array(big, pa.decimal128(38, 2)),
                             "i": pa.array(ints, pa.int64()),
                             "k": pa.array(range(len(big)), pa.int64())}),
                   p, row_group_size=700)
    arr = pa.array(big, pa.decimal128(38, 2))
    assert pc.sum(arr).as_py() < 0  # the wrap this guards against
    ds = pqindex.dataset(p)
    with localcontext() as ctx:
        ctx.prec = 80
        dsum = sum(v for v in big if v is not None)
        davg = (dsum / 1800).quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP)
        dsum_after_first = dsum - big[0]
    isum = sum(v for v in ints if v is not None)
    for where in ("k >= 0", "k >= 1", None):  # the row groups read, and from metadata
        got = ds.aggregate(["sum(d)", "avg(d)", "sum(i)", "avg(i)"], where)
        rows = None if where != "k >= 1" else 1
        if rows is None:
            assert got["sum(d)"] == dsum and got["avg(d)"] == davg
            assert got["sum(i)"] == isum and got["avg(i)"] == isum / 1800
        else:
            assert got["sum(d)"] == dsum_after_first
            assert got["sum(i)"] == isum - ints[0]


def test_avg_and_where_type_errors(lake: tuple[Path, list[Path]]) -> None:
    ds = pqindex.dataset(lake[0])
    with pytest.raises(pqindex.UserInputError, match="avg needs a numeric column"):
        ds.aggregate(["avg(cat)"])
    with pytest.raises(pqindex.UserInputError, match="avg"):
        ds.aggregate(["avg(*)"])
    with pytest.raises(pqindex.UserInputError, match="pyarrow Expression"):
        ds.scan(where=pc.field("k") > 5)  # type: ignore[arg-type]


def test_count_distinct_matches_duckdb(lake: tuple[Path, list[Path]]) -> None:
    root, paths = lake
    files = ", ".join(f"'{p}'" for p in paths)
    ds = pqindex.dataset(root)
    cols = ["cat", "x", "price", "k"]
    for where in ["", "cat = 'rare'", "x IS NULL", "k BETWEEN 2500 AND 9000", "k < 0",
                  "cat IN ('a', 'b') AND x > 40"]:
        got = ds.aggregate([f"count(distinct {c})" for c in cols], where or None)
        sql = (f"SELECT {', '.join(f'count(DISTINCT {c})' for c in cols)} "
               f"FROM read_parquet([{files}])" + (f" WHERE {where}" if where else ""))
        want = duckdb.sql(sql).fetchall()[0]
        assert [got[f"count(distinct {c})"] for c in cols] == list(want), where


def test_count_distinct_counts_floats_as_sql_does(tmp_path: Path) -> None:
    """-0.0 equals 0.0 and every NaN is one value (DuckDB and Spark), across files,
    row groups and a hive partition column."""
    nan2 = np.frombuffer(np.uint64(0x7FF8000000000001).tobytes(), dtype=np.float64)[0]
    values = [[0.0, -0.0, math.nan, 1.5, None], [nan2, -0.0, 2.5, 1.5, math.nan]]
    for i, vals in enumerate(values):
        d = tmp_path / f"part={i % 2}"
        d.mkdir()
        pq.write_table(pa.table({"f": pa.array(vals * 3, pa.float64()),
                                 "g": pa.array(vals * 3, pa.float64()).cast(pa.float32())}),
                       d / "x.parquet", row_group_size=4)
    ds = pqindex.dataset(tmp_path)
    got = ds.aggregate(["count(distinct f)", "count(distinct g)", "count(distinct part)",
                        "count(f)"])
    want = duckdb.sql(
        f"SELECT count(DISTINCT f), count(DISTINCT g), count(DISTINCT part), count(f) "
        f"FROM read_parquet('{tmp_path}/*/*.parquet', hive_partitioning=true)").fetchall()[0]
    assert list(got.values()) == list(want) == [4, 4, 2, 27]
    with pytest.raises(pqindex.UserInputError, match="DISTINCT"):
        ds.aggregate(["sum(distinct f)"])


def test_count_distinct_merges_its_parts(lake: tuple[Path, list[Path]],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts of unique values are merged once they hold more than the bound; the count
    does not change."""
    from pqindex.dataset import aggregate

    ds = pqindex.dataset(lake[0])
    full = pa.concat_tables(pq.read_table(p) for p in lake[1])
    want = {f"count(distinct {c})": pc.count_distinct(full[c]).as_py() for c in ("k", "cat")}
    assert want["count(distinct k)"] == FILES * ROWS
    assert ds.aggregate(list(want)) == want
    monkeypatch.setattr(aggregate, "_DISTINCT_MERGE", 10)
    assert ds.aggregate(list(want)) == want


def _many(root: Path, files: int, wide_from: int | None = None) -> pa.Table:
    """``files`` small files under two hive partitions; ``x`` is int32 in the files
    before ``wide_from`` and int64 after (a lake whose writer widened it)."""
    tables = []
    for i in range(files):
        k = np.arange(i * 100, (i + 1) * 100, dtype=np.int64)
        x_type = pa.int64() if wide_from is not None and i >= wide_from else pa.int32()
        t = pa.table({"k": k, "x": pa.array(k % 7, x_type)})
        d = root / f"p={i % 2}"
        d.mkdir(parents=True, exist_ok=True)
        pq.write_table(t, d / f"f{i:03d}.parquet")
        tables.append(t.cast(pa.schema([("k", pa.int64()), ("x", pa.int64())]))
                      .append_column("p", pa.array([i % 2] * 100, pa.int64())))
    return pa.concat_tables(tables)


def test_head_of_many_files_opens_only_the_files_it_needs(tmp_path: Path) -> None:
    """Planned in steps of files (1, 4, 16, ...): rows in the first files open their
    footers, not 100; rows only in the last files are found through every step, and
    the steps' types are unified."""
    from pqindex.dataset.dataset import HEAD_FIRST, HEAD_GROWTH

    two_steps = HEAD_FIRST * (1 + HEAD_GROWTH)

    full = _many(tmp_path, 100, wide_from=90)
    ds = pqindex.dataset(tmp_path)
    order = [str(f) for f in ds.files]
    reference = ds.to_table(["k", "x", "p"])  # every file, in file order
    assert sorted(reference.column("k").to_pylist()) == full.column("k").to_pylist()

    fresh = pqindex.dataset(tmp_path)
    scan = fresh.scan(["k", "x", "p"], "x = 3")
    got = scan.head(20)  # 14 of the first file's rows match: a second step is needed
    want = reference.filter(pc.field("x") == 3).slice(0, 20)
    assert got.cast(want.schema).equals(want)
    assert set(fresh.io_stats()) <= set(order[:two_steps])
    assert len(fresh.io_stats()) > HEAD_FIRST
    assert scan.report.files_total == 100 and scan.report.files_read >= 1

    # Rows in files of the last step only: every step planned, types unified (int64).
    late = pqindex.dataset(tmp_path)
    tail = late.head(150, ["k", "x"], "k >= 9500")
    assert tail.schema.field("x").type == pa.int64()
    assert tail.equals(reference.select(["k", "x"]).filter(pc.field("k") >= 9500).slice(0, 150))

    # With a manifest: each step's files pruned by it, then opened as without.
    from pqindex.dataset.manifest import write_manifest

    write_manifest(tmp_path)
    listed = pqindex.dataset(tmp_path)
    assert listed.manifest_view() is not None
    assert listed.head(20, ["k", "x", "p"], "x = 3").cast(want.schema).equals(want)
    assert set(listed.io_stats()) <= set(order[:two_steps])
    pruned = pqindex.dataset(tmp_path)  # only the last file matches: the manifest says so
    assert pruned.head(3, ["k"], "k >= 9990").column("k").to_pylist() == [9990, 9991, 9992]
    assert set(pruned.io_stats()) == {order[-1]}, set(pruned.io_stats())

    # Partition pruning works within every step; n = 0 plans the first step only.
    some = pqindex.dataset(tmp_path)
    assert some.head(5, ["k", "p"], "p = 1").column("p").to_pylist() == [1] * 5
    empty = pqindex.dataset(tmp_path)
    assert empty.head(0, ["k"]).num_rows == 0
    assert len(empty.io_stats()) <= HEAD_FIRST


def test_stream_plans_files_in_steps_as_it_is_consumed(tmp_path: Path) -> None:
    """``to_batches`` and the Arrow stream read every footer for the stream's schema,
    then plan and read the files in steps as batches are taken: DuckDB's LIMIT over
    the stream plans the first steps' files only. Taken whole, the stream is
    ``to_table`` (the last files' wider ``x`` cast to the dataset's type), with the
    same counts in its report."""
    from pqindex.dataset.dataset import HEAD_FIRST, HEAD_GROWTH

    two_steps = HEAD_FIRST * (1 + HEAD_GROWTH)
    full = _many(tmp_path, 100, wide_from=90)
    ds = pqindex.dataset(tmp_path)
    whole = ds.scan(["k", "x", "p"], "x = 3")
    reference = whole.to_table()
    assert reference.schema.field("x").type == pa.int64()
    want = full.filter(pc.field("x") == 3).sort_by("k")
    assert reference.sort_by("k").cast(want.schema).equals(want)

    stream = pqindex.dataset(tmp_path).scan(["k", "x", "p"], "x = 3")
    batches = list(stream.to_batches())
    assert all(b.schema.equals(reference.schema) for b in batches)
    assert pa.Table.from_batches(batches, reference.schema).equals(reference)
    for name in ("files_total", "files_read", "row_groups_total", "row_groups_read",
                 "rows_total", "rows_matched", "pages_read"):
        assert getattr(stream.report, name) == getattr(whole.report, name), name

    # Taken a few rows at a time: the files after the rows are never planned.
    few = pqindex.dataset(tmp_path).scan(["k", "x"], "x = 3")
    first = next(iter(few.to_batches()))
    assert first.num_rows and few.report.row_groups_total <= HEAD_FIRST
    con = duckdb.connect()
    limited = pqindex.dataset(tmp_path).scan(["k", "x"], "x = 3")
    rows = con.execute("SELECT k, x FROM limited LIMIT 20").fetchall()
    assert len(rows) == 20 and all(x == 3 for _, x in rows)
    assert {k for k, _ in rows} <= set(reference.column("k").to_pylist())
    assert limited.report.files_total == 100
    assert limited.report.row_groups_total <= two_steps < 100, limited.report


def test_count_distinct_across_files_of_different_types(tmp_path: Path) -> None:
    """A column int32 in one file and int64 in another, string and large_string: the
    parts are counted as the dataset's unified type (DuckDB's union of the files)."""
    pq.write_table(pa.table({"i": pa.array([1, 2, 3], pa.int32()),
                             "s": pa.array(["a", "b", "c"], pa.string())}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"i": pa.array([3, 4, 2**40], pa.int64()),
                             "s": pa.array(["c", "d", None], pa.large_string())}),
                   tmp_path / "b.parquet")
    got = pqindex.dataset(tmp_path).aggregate(["count(distinct i)", "count(distinct s)"])
    want = duckdb.sql(f"SELECT count(DISTINCT i), count(DISTINCT s) FROM read_parquet("
                      f"'{tmp_path}/*.parquet', union_by_name=true)").fetchall()[0]
    assert [got["count(distinct i)"], got["count(distinct s)"]] == list(want) == [5, 4]


def test_cli_query_limit_reads_through_head(tmp_path: Path) -> None:
    """``pqindex query --limit`` is ``Scan.head``: the rows of ``to_table()``, cut, and
    the report shows one file of the 30 read."""
    from click.testing import CliRunner

    from pqindex.cli import cli

    lake = tmp_path / "lake"
    _many(lake, 30)
    out = tmp_path / "out.csv"
    res = CliRunner().invoke(cli, ["query", str(lake), "--where", "x = 3", "--columns",
                                   "k,x", "--limit", "5", "--format", "csv", "--output",
                                   str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    # pyarrow's rows of the files in the dataset's order (their paths sorted), cut.
    full = pa.concat_tables(pq.read_table(p) for p in sorted(lake.rglob("*.parquet")))
    want = full.filter(pc.field("x") == 3).column("k").to_pylist()[:5]
    got = [int(line.split(",")[0]) for line in out.read_text().splitlines()[1:]]
    assert got == want == [3, 10, 17, 24, 31]
    assert "files 1/30 read" in res.output


def test_count_distinct_from_embedded_distinct_sets(tmp_path: Path) -> None:
    """Row groups every row of which matches give their distinct values from the
    embedded ``distinct`` sets, no data page read; the others are read. Equal to
    DuckDB either way, floats and decimals included."""
    rng = np.random.default_rng(4)
    n = 40_000
    t = pa.table({
        "id": np.arange(n, dtype=np.int64),
        "cat": pa.array(rng.choice(["a", "b", "c", "d", "e"], n)),
        "f": pa.array(rng.choice([0.0, -0.0, 1.5, math.nan, 2.5], n)),
        "dec": pa.array([Decimal(int(v)).scaleb(-2) for v in rng.integers(0, 40, n)],
                        pa.decimal128(9, 2)),
        "big": rng.integers(0, 10**9, n),  # too many values: the set omits them
    })
    p = tmp_path / "d.parquet"
    pqindex.write_table(t, p, sort_by="id", row_group_rows=10_000,
                        indexes={"distinct": ["cat", "f", "dec", "big"]})
    cols = ["cat", "f", "dec", "big"]
    ds = pqindex.dataset(p)
    for where in [None, "id >= 10000", "id BETWEEN 5000 AND 30000", "cat = 'b'"]:
        got = ds.aggregate([f"count(distinct {c})" for c in cols], where)
        sql = (f"SELECT {', '.join(f'count(DISTINCT {c})' for c in cols)} FROM '{p}'"
               + (f" WHERE {where}" if where else ""))
        assert [got[f"count(distinct {c})"] for c in cols] == list(duckdb.sql(sql).fetchall()[0])
    only_sets = ds.aggregate(["count(distinct cat)", "count(distinct f)",
                              "count(distinct dec)"], "id >= 10000")
    rep = ds.last_aggregate_report
    assert rep.row_groups_from_metadata == 3 and rep.pages_read == 0, rep
    assert only_sets == {"count(distinct cat)": 5, "count(distinct f)": 4,
                         "count(distinct dec)": 40}
    ds.aggregate(["count(distinct big)"], "id >= 10000")
    assert ds.last_aggregate_report.row_groups_read == 3  # values omitted: read


def test_aggregate_columns_may_be_quoted(tmp_path: Path) -> None:
    """A column whose name holds a space (or a quote) is named in double quotes, as in
    SQL: results equal DuckDB's."""
    p = tmp_path / "q.parquet"
    pq.write_table(pa.table({"my col": pa.array([1, 2, 2, None, 5], pa.int64()),
                             'a"b': pa.array([1.5, 2.5, 2.5, 4.0, None])}), p)
    ds = pqindex.dataset(p)
    got = ds.aggregate(['avg("my col")', 'count(distinct "my col")', 'sum( "a""b" )',
                        'max("my col")'])
    want = duckdb.sql(f"""SELECT avg("my col"), count(DISTINCT "my col"), sum("a""b"),
                          max("my col") FROM '{p}'""").fetchall()[0]
    assert list(got.values()) == list(want)
    with pytest.raises(pqindex.UserInputError, match="cannot parse aggregate"):
        ds.aggregate(["sum(my col)"])
