"""write_table's default ``indexes="auto"``: a distinct index on low-cardinality columns.

What gets an index is checked in the file's own region (not only in the
WriteResult); rows are checked against DuckDB and pyarrow reading the same file;
the I/O of a rare-value query against the pages that hold the value, found from
the values and the OffsetIndex, not from the planner.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pqindex
from pqindex.format.file import ParquetFile
from pqindex.indexes import REGION_KEY, Scope, read_region
from pqindex.spark.commit import _written_indexes
from pqindex.spark.task import parse_options
from pqindex.write.auto_indexes import AUTO, AUTO_MAX_DISTINCT

RNG_SEED = 12


def _region_scopes(path: Path | str) -> dict[str, set[str]]:
    """{column: scopes} of the distinct blobs embedded in the file."""
    with ParquetFile.open(str(path)) as pf:
        region, _ = read_region(pf, strict=True)
        if region is None:
            return {}
        out: dict[str, set[str]] = {}
        for e in region.find(kind="distinct"):
            out.setdefault(e.column, set()).add(Scope(e.scope).value)
        return out


def _mixed_table(rows: int = 60_000) -> pa.Table:
    rng = np.random.default_rng(RNG_SEED)
    cats = np.array([f"cat-{i:02d}" for i in range(50)])
    category = cats[rng.integers(0, 50, rows)].astype(object)
    # Between the common values: page min/max can't exclude it, only the sets can.
    category[rng.choice(rows, 7, replace=False)] = "cat-25-rare"
    base = dt.date(2024, 1, 1)
    return pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "category": pa.array(category, pa.string()),
        "user_id": pa.array(rng.permutation(rows * 10)[:rows].astype(np.int64)),
        "small": pa.array(rng.integers(-5, 5, rows).astype(np.int32)),
        "day": pa.array([base + dt.timedelta(days=int(d)) for d in rng.integers(0, 30, rows)],
                        pa.date32()),
        "flag": pa.array(rng.integers(0, 2, rows).astype(bool)),
        "amount": pa.array(rng.normal(size=rows)),
    })


def test_auto_indexes_low_cardinality_columns_only(tmp_path: Path) -> None:
    p = tmp_path / "mixed.parquet"
    r = pqindex.write_table(_mixed_table(), p, row_group_rows=20_000, page_rows=5_000)
    # ids, user ids and normal floats are unique; booleans aren't a distinct kind.
    assert set(r.indexes) == {"distinct"}
    assert sorted(r.indexes["distinct"]) == ["category", "day", "small"]
    scopes = _region_scopes(p)
    assert set(scopes) == {"category", "small", "day"}
    assert all(s == {"file", "row_group", "page"} for s in scopes.values()), scopes
    assert r.region_bytes > 0
    assert r.region_bytes < 0.05 * r.bytes  # the sets stay small next to the data


def test_none_and_empty_mapping_mean_no_index(tmp_path: Path) -> None:
    t = _mixed_table(5_000)
    for given_ in (None, {}):
        p = tmp_path / f"none-{given_!r}.parquet"
        r = pqindex.write_table(t, p, indexes=given_)
        assert r.indexes == {} and r.region_bytes == 0
        assert _region_scopes(p) == {}
        kv = pq.ParquetFile(p).metadata.metadata or {}
        assert REGION_KEY.encode() not in kv


def test_explicit_indexes_override_auto(tmp_path: Path) -> None:
    p = tmp_path / "explicit.parquet"
    r = pqindex.write_table(_mixed_table(10_000), p, indexes={"zone_maps": ["amount"]})
    assert r.indexes == {"zone_maps": ["amount"]}
    assert _region_scopes(p) == {}  # no distinct set on category: auto is off
    with ParquetFile.open(str(p)) as pf:
        region, _ = read_region(pf, strict=True)
        assert region is not None
        assert {e.column for e in region.blobs} == {"amount"}


def test_bad_indexes_string_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(pqindex.UserInputError, match="indexes must be"):
        pqindex.write_table(_mixed_table(100), tmp_path / "x.parquet", indexes="automatic")


def _repeated(values: int, each: int, *, offset: int = 0) -> pa.Array:
    return pa.array(np.repeat(np.arange(offset, offset + values, dtype=np.int32), each))


@pytest.mark.parametrize("values", [AUTO_MAX_DISTINCT, AUTO_MAX_DISTINCT + 1])
def test_cap_boundary(tmp_path: Path, values: int) -> None:
    """1,024 distinct values in a row group: indexed; 1,025: not."""
    t = pa.table({"v": _repeated(values, 40)})
    p = tmp_path / f"cap-{values}.parquet"
    r = pqindex.write_table(t, p, row_group_rows=len(t))
    expect = {"v"} if values <= AUTO_MAX_DISTINCT else set()
    assert set(_region_scopes(p)) == expect
    assert set(r.indexes.get("distinct", [])) == expect


def test_cap_counts_per_row_group(tmp_path: Path) -> None:
    """Under the cap in one row group and over it in another: no index. Under it in
    each row group though over it in the file: indexed (the file set is omitted)."""
    over = pa.table({"v": pa.concat_arrays([_repeated(1000, 20), _repeated(1025, 19)])})
    p = tmp_path / "over.parquet"
    pqindex.write_table(over, p, row_group_rows=20_000)
    assert pq.ParquetFile(p).metadata.num_row_groups == 2
    assert _region_scopes(p) == {}

    split = pa.table({"v": pa.concat_arrays([_repeated(900, 20),
                                             _repeated(900, 20, offset=900)])})
    q = tmp_path / "split.parquet"
    pqindex.write_table(split, q, row_group_rows=18_000)
    assert _region_scopes(q) == {"v": {"file", "row_group", "page"}}
    with ParquetFile.open(str(q)) as pf:
        region, _ = read_region(pf, strict=True)
        assert region is not None
        (file_blob,) = region.find(kind="distinct", column="v", scope=Scope.FILE)
        assert file_blob.properties.get("omitted") and file_blob.properties["count"] == 1800


def test_budget_drops_page_sets_first(tmp_path: Path) -> None:
    """1,000 values spread over every page: page sets would be ~100x the row-group
    set, over the budget; the file and row-group sets still fit."""
    rng = np.random.default_rng(RNG_SEED)
    t = pa.table({"v": pa.array(rng.integers(0, 1000, 200_000).astype(np.int32))})
    p = tmp_path / "budget.parquet"
    r = pqindex.write_table(t, p, row_group_rows=200_000, page_rows=2_000)
    assert _region_scopes(p) == {"v": {"file", "row_group"}}
    assert r.region_bytes < 16 * 1024 + 1024


def test_nulls_and_all_null_columns(tmp_path: Path) -> None:
    rng = np.random.default_rng(RNG_SEED)
    n = 30_000
    vals = rng.integers(0, 20, n).astype(np.int64)
    mask = rng.random(n) < 0.3
    t = pa.table({
        "some_null": pa.array(vals, mask=mask),
        "all_null": pa.nulls(n, pa.int64()),
        "all_null_str": pa.nulls(n, pa.string()),
        "rid": pa.array(np.arange(n)),
    })
    p = tmp_path / "nulls.parquet"
    pqindex.write_table(t, p, row_group_rows=10_000, page_rows=1_000)
    assert set(_region_scopes(p)) == {"some_null"}
    for where in ("some_null IS NULL", "some_null = 3", "some_null != 3",
                  "some_null IN (1, 19, 40)", "all_null IS NULL", "all_null = 1",
                  "some_null > 17"):
        _same_as_duckdb(p, where, "rid")


def test_types(tmp_path: Path) -> None:
    rng = np.random.default_rng(RNG_SEED)
    n = 12_000
    pick = rng.integers(0, 8, n)
    ts0 = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    t = pa.table({
        "rid": pa.array(np.arange(n)),
        "i8": pa.array(pick.astype(np.int8)),
        "u64": pa.array(pick.astype(np.uint64) + np.uint64(2**63)),
        "s": pa.array([f"s{v}" for v in pick], pa.large_string()),
        "b": pa.array([bytes([v, 0, 255]) for v in pick], pa.binary()),
        "dict": pa.array([f"d{v}" for v in pick]).dictionary_encode(),
        "d": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=int(v)) for v in pick],
                      pa.date32()),
        "ts": pa.array([ts0 + dt.timedelta(hours=int(v)) for v in pick],
                       pa.timestamp("us", "UTC")),
        "dec": pa.array([decimal.Decimal(int(v)) / 4 for v in pick], pa.decimal128(9, 2)),
        "f": pa.array(pick.astype(np.float64) / 2),
    })
    p = tmp_path / "types.parquet"
    r = pqindex.write_table(t, p, row_group_rows=4_000, page_rows=2_000)
    got = set(_region_scopes(p))
    assert got == {"i8", "u64", "s", "b", "dict", "d", "ts", "dec", "f"}
    assert set(r.indexes["distinct"]) == got
    for where in ("i8 = 3", "u64 = 9223372036854775811", "s = 's5'", "s IN ('s1', 'x')",
                  "dict = 'd7'", "d = DATE '2020-01-04'", "d >= DATE '2020-01-07'",
                  "ts = TIMESTAMP '2024-05-01 03:00:00'", "dec = 1.25", "f = 3.5",
                  "s LIKE 's3%'", "i8 NOT IN (0, 1, 2)"):
        _same_as_pyarrow(p, where)


def test_other_types_never_fail_the_write(tmp_path: Path) -> None:
    """Types the kind skips or Arrow can't count: the write succeeds, rows round-trip."""
    rng = np.random.default_rng(RNG_SEED)
    n = 5_000
    pick = rng.integers(0, 6, n)
    t = pa.table({
        "rid": pa.array(np.arange(n)),
        "f16": pa.array(pick.astype(np.float16)),
        "dec256": pa.array([decimal.Decimal(int(v)) for v in pick], pa.decimal256(40, 0)),
        "fixed": pa.array([bytes([v]) * 4 for v in pick], pa.binary(4)),
        "t32": pa.array([dt.time(int(v)) for v in pick], pa.time32("s")),
        "ns": pa.array((pick * 1_000_000_007).astype("datetime64[ns]")),
        "dict_int": pa.array(pick.astype(np.int64)).dictionary_encode(),
        "uuid": pa.array([bytes([v]) * 16 for v in pick], pa.uuid()),
        "lst": pa.array([[int(v)] for v in pick]),
        "st": pa.array([{"a": int(v)} for v in pick]),
        "flag": pa.array(pick > 2),
    })
    p = tmp_path / "other.parquet"
    r = pqindex.write_table(t, p, row_group_rows=2_000, page_rows=1_000)
    assert pq.read_table(p).select(["rid", "fixed", "t32", "dict_int"]).to_pylist() == \
        t.select(["rid", "fixed", "t32", "dict_int"]).to_pylist()
    got = set(_region_scopes(p))
    assert got == set(r.indexes.get("distinct", []))
    assert not got & {"lst", "st", "flag", "rid"}
    assert {"dict_int", "ns", "t32"} <= got
    for where in ("dict_int = 4", "dict_int IN (1, 7)", "f16 IS NULL"):
        _same_as_pyarrow(p, where)


def test_dictionary_fallback_column(tmp_path: Path) -> None:
    """A column whose dictionary outgrows pyarrow's 1 MiB dictionary page falls back
    to PLAIN mid-chunk; whatever auto decides, every reader sees the same rows."""
    rng = np.random.default_rng(RNG_SEED)
    n = 20_000
    words = [f"{i:04d}-" + "x" * 1200 for i in range(900)]
    pick = rng.integers(0, 900, n)
    t = pa.table({"rid": pa.array(np.arange(n)),
                  "long": pa.array([words[i] for i in pick]),
                  "few": pa.array((pick % 7).astype(np.int32))})
    p = tmp_path / "fallback.parquet"
    pqindex.write_table(t, p, row_group_rows=n, page_rows=1_000, dictionary=True)
    enc = pq.ParquetFile(p).metadata.row_group(0).column(1).encodings
    assert "PLAIN" in enc and "RLE_DICTIONARY" in enc  # the fallback happened
    assert "few" in _region_scopes(p)
    for where in (f"long = '{words[5]}'", "long = 'absent'", "few = 3"):
        _same_as_duckdb(p, where, "rid")


def _same_as_duckdb(path: Path, where: str, order: str) -> None:
    got = pqindex.dataset(str(path)).scan(where=where).to_table()
    want = duckdb.sql(
        f"SELECT * FROM read_parquet('{path}') WHERE {where} ORDER BY {order}").arrow()
    if isinstance(want, pa.RecordBatchReader):
        want = want.read_all()
    assert got.sort_by(order).to_pylist() == want.to_pylist(), where


def _same_as_pyarrow(path: Path, where: str) -> None:
    """pqindex's rows against the row ids DuckDB finds in the same file, taken from
    pyarrow's full read."""
    got = pqindex.dataset(str(path)).scan(where=where).to_table()
    rows = duckdb.sql(f"SELECT rid FROM read_parquet('{path}') WHERE {where} ORDER BY rid"
                      ).fetchall()
    assert got.column("rid").to_pylist() == [r[0] for r in rows], where
    full = pq.read_table(path)
    want = full.take(pa.array([r[0] for r in rows], pa.int64()))
    assert got.schema == want.schema, where
    assert got.to_pylist() == want.to_pylist(), where


def _pages_holding(path: Path, column: str, mask: np.ndarray) -> int:
    """Pages of ``column`` with a row where ``mask`` holds, from the OffsetIndex."""
    with ParquetFile.open(str(path)) as pf:
        leaf = pf.schema.leaf(column)
        assert leaf is not None
        pages = start = 0
        for rg in range(pf.num_row_groups):
            rows = pf.page_rows(rg, leaf.index)
            assert rows is not None
            for r in rows:
                pages += bool(mask[start:start + r].any())
                start += r
        return pages


def test_rare_value_reads_only_its_pages(tmp_path: Path) -> None:
    t = _mixed_table(200_000)
    p = tmp_path / "rare.parquet"
    pqindex.write_table(t, p, row_group_rows=50_000, page_rows=5_000)
    mask = np.asarray(pc.equal(t.column("category"), "cat-25-rare").to_numpy(
        zero_copy_only=False))
    holding = _pages_holding(p, "category", mask)
    assert 1 <= holding <= 7
    columns = ["category", "amount", "user_id"]
    scan = pqindex.dataset(str(p)).scan(columns=columns, where="category = 'cat-25-rare'")
    got = scan.to_table()
    assert got.num_rows == int(mask.sum())
    rep = scan.report
    assert rep.pages_total == 40 * len(columns)
    # Same page bounds for every column (row-count pages): one page per column each.
    assert rep.pages_read == holding * len(columns)
    plain = tmp_path / "plain.parquet"
    pqindex.write_table(t, plain, row_group_rows=50_000, page_rows=5_000, indexes=None)
    before = pqindex.dataset(str(plain)).scan(columns=columns,
                                              where="category = 'cat-25-rare'")
    before.to_table()
    assert before.report.pages_read > rep.pages_read
    assert before.report.bytes_read > rep.bytes_read
    # An absent value: no data page at all.
    absent = pqindex.dataset(str(p)).scan(columns=columns, where="category = 'nope'")
    assert absent.to_table().num_rows == 0
    assert absent.report.pages_read == 0


def test_other_readers_read_identical_rows(tmp_path: Path) -> None:
    t = _mixed_table(30_000)
    p = tmp_path / "interop.parquet"
    r = pqindex.write_table(t, p, row_group_rows=10_000, page_rows=1_000)
    assert r.indexes
    assert pq.read_table(p).equals(t)
    got = duckdb.sql(f"SELECT * FROM read_parquet('{p}') ORDER BY id").arrow()
    if isinstance(got, pa.RecordBatchReader):
        got = got.read_all()
    assert got.to_pylist() == t.to_pylist()


def test_streaming_writer_uses_auto(tmp_path: Path) -> None:
    t = _mixed_table(20_000)
    with pqindex.Writer(tmp_path / "out", target_file_bytes=200_000) as w:
        for b in t.to_batches(max_chunksize=4_000):
            w.write(b)
    assert len(w.results) >= 2
    for r in w.results:
        assert "category" in r.indexes["distinct"]
        assert "category" in _region_scopes(r.path)


def test_spark_options_default_to_auto() -> None:
    """The Spark data source's options share write_table's default (no Spark here)."""
    assert parse_options({}).indexes == AUTO
    assert parse_options({"indexes": "auto"}).indexes == AUTO
    assert parse_options({"indexes": "none"}).indexes == {}
    assert parse_options({"indexes": "{}"}).indexes == {}
    assert parse_options({"indexes": '{"zone_maps": ["a"]}'}).indexes == {"zone_maps": ["a"]}
    assert parse_options({"index.distinct": "a,b"}).indexes == {"distinct": ["a", "b"]}
    assert parse_options({"indexes": "auto", "index.hll": "a"}).indexes == {"hll": ["a"]}
    entries = [{"indexes": {"distinct": ["a"]}}, {}, {"indexes": {"distinct": ["b", "a"]}}]
    assert _written_indexes(entries, AUTO) == {"distinct": ["a", "b"]}
    assert _written_indexes(entries, {"bloom": ["x"]}) == {"bloom": ["x"]}


_WORDS = ["a", "b", "ab", "abc", "b-", "zz", ""]


@st.composite
def _tables(draw: Any) -> pa.Table:
    n = draw(st.integers(1, 3_000))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    k_int = draw(st.integers(1, 40))
    k_str = draw(st.integers(1, len(_WORDS)))
    null_rate = draw(st.sampled_from([0.0, 0.1, 0.9, 1.0]))
    ints = rng.integers(-k_int, k_int, n)
    words = np.array(_WORDS[:k_str], dtype=object)[rng.integers(0, k_str, n)]
    if draw(st.booleans()):
        order = np.argsort(ints, kind="stable")
        ints, words = ints[order], words[order]
    return pa.table({
        "rid": pa.array(np.arange(n)),
        "i": pa.array(ints, pa.int64(), mask=rng.random(n) < null_rate),
        "s": pa.array(words, pa.string(), mask=rng.random(n) < null_rate / 2),
        "d": pa.array([dt.date(2021, 3, 1) + dt.timedelta(days=int(v) % 5) for v in ints],
                      pa.date32()),
    })


def _predicates(draw: Any) -> str:
    col = draw(st.sampled_from(["i", "s", "d"]))
    if col == "i":
        v = draw(st.integers(-45, 45))
        lit, more = str(v), str(v + 1)
    elif col == "s":
        lit = f"'{draw(st.sampled_from([*_WORDS, 'absent']))}'"
        more = f"'{draw(st.sampled_from(_WORDS))}'"
    else:
        d = dt.date(2021, 2, 26) + dt.timedelta(days=draw(st.integers(0, 9)))
        lit, more = f"DATE '{d}'", f"DATE '{d + dt.timedelta(days=2)}'"
    form = draw(st.sampled_from(["=", "!=", "<", ">=", "IN", "NOT IN", "NULL", "NOT NULL"]))
    if form in ("IN", "NOT IN"):
        return f"{col} {form} ({lit}, {more})"
    if form in ("NULL", "NOT NULL"):
        return f"{col} IS {form}"
    return f"{col} {form} {lit}"


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(table=_tables(), data=st.data())
def test_differential_random_tables(tmp_path: Path, table: pa.Table, data: Any) -> None:
    """Auto-indexed files answer like DuckDB (and pyarrow) reading the same file."""
    p = tmp_path / "random.parquet"
    page_rows = data.draw(st.sampled_from([7, 100, 1_000]))
    r = pqindex.write_table(table, p, row_group_rows=data.draw(st.sampled_from([50, 700, 5_000])),
                            page_rows=page_rows)
    assert pq.read_table(p).equals(table)
    assert set(r.indexes.get("distinct", [])) <= {"i", "s", "d", "rid"}
    for _ in range(6):
        where = _predicates(data.draw)
        _same_as_pyarrow(p, where)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_distinct_blobs_from_codes_equal_blobs_from_values(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: Any) -> None:
    """The codes path of the distinct kind writes the same blobs as the per-unit hash
    path it replaces for columns with few values (NaN, -0.0, nulls, strings, dates)."""
    from pqindex.indexes import distinct
    from pqindex.indexes.build import build_blobs

    n = data.draw(st.integers(1, 2_000))
    floats = data.draw(st.lists(st.sampled_from([0.0, -0.0, 1.5, float("nan"), None, -3.0]),
                                min_size=n, max_size=n))
    words = data.draw(st.lists(st.sampled_from(["", "a", "ab", "\u00e9", None]),
                               min_size=n, max_size=n))
    ints = data.draw(st.lists(st.one_of(st.none(), st.integers(-3, 3)), min_size=n, max_size=n))
    t = pa.table({"f": pa.array(floats, pa.float64()), "s": pa.array(words, pa.string()),
                  "d": pa.array([None if v is None else dt.date(2020, 1, 1 + v + 3)
                                 for v in ints], pa.date32()),
                  "i": pa.array(ints, pa.int16())})
    p = tmp_path / "codes.parquet"
    pq.write_table(t, p, row_group_size=data.draw(st.sampled_from([1, 7, 500, 5_000])),
                   max_rows_per_page=data.draw(st.sampled_from([1, 3, 100])),
                   write_page_index=True)
    cap = data.draw(st.sampled_from([1, 2, 1024]))
    kinds = {"distinct": ["f", "s", "d", "i"]}
    opts = {"distinct": {"max_values": cap}}
    with ParquetFile.open(str(p)) as pf:
        fast = build_blobs(pf, t, kinds, opts)
        monkeypatch.setattr(distinct, "_few_codes", lambda *a: None)  # every unit hashed
        slow = build_blobs(pf, t, kinds, opts)
    assert fast == slow
