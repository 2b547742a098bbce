"""add_indexes: indexes embedded into files other writers produced.

Files from pyarrow, DuckDB, DataFusion, polars and Spark get an embedded index
region (and, where they have none, a retrofitted page index); every engine
reads the same rows before and after, the data pages stay byte-identical,
running twice changes nothing, and ``drop`` takes the region out again. The
retrofitted page index is checked against the one pyarrow writes for the same
pages, against the rows of every page, and by pqindex and DataFusion scans
that prune pages with it. Then the ``pqindex index`` command and the
``embedded_indexes`` part of ``inspect``.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import pqindex
import writers
from pqindex.cli import cli
from pqindex.dataset.indexing import add_indexes
from pqindex.errors import CorruptFileError, UserInputError
from pqindex.format.file import ParquetFile
from pqindex.format.pages import check_file
from pqindex.format.schema import BoundaryOrder
from pqindex.format.values import bound_order, page_bounds, validate_column_index
from pqindex.indexes.region import REGION_KEY, read_region
from pqindex.inspect import inspect_file
from pqindex.write.add_indexes import IndexResult, index_targets
from pqindex.write.tail import data_end

KINDS: dict[str, Any] = {
    "distinct": ["category"],
    "bloom": ["id"],
    "zone_maps": ["id", "desc"],
    "hll": ["id", "category"],
}

# ---------------------------------------------------------------- helpers


@pytest.fixture
def copy_of(written_files: writers.FileCache, tmp_path: Path) -> Callable[[str], Path]:
    """A private copy of a session fixture file (indexing must not touch the shared one)."""

    def make(name: str) -> Path:
        dst = tmp_path / f"{name}.parquet"
        shutil.copyfile(written_files[name], dst)
        return dst

    return make


def pages_digest(path: Path) -> tuple[int, str]:
    """Where the data pages end and a hash of ``[4, data_end)``."""
    with ParquetFile.open(path) as pf:
        end = data_end(pf)
    with open(path, "rb") as f:
        f.seek(4)
        return end, hashlib.sha256(f.read(end - 4)).hexdigest()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rows_by_reader(path: Path, spark: Any = None) -> dict[str, str]:
    """Each engine's rows ordered by id, as text (so NaN equals NaN)."""
    import datafusion
    import polars as pl

    p = str(path)
    out = {"pyarrow": repr(pq.read_table(p).sort_by("id").to_pylist())}
    con = duckdb.connect()
    try:
        out["duckdb"] = repr(
            con.sql(f"SELECT * FROM read_parquet('{p}') ORDER BY id").to_arrow_table().to_pylist()
        )
    finally:
        con.close()
    ctx = datafusion.SessionContext()
    ctx.register_parquet("t", p)
    out["datafusion"] = repr(ctx.sql("SELECT * FROM t ORDER BY id").to_arrow_table().to_pylist())
    out["polars"] = repr(pl.read_parquet(p).sort("id").to_dicts())
    if spark is not None:
        out["spark"] = repr(
            [r.asDict(recursive=True) for r in spark.read.parquet(p).orderBy("id").collect()]
        )
    return out


FILTERS = [
    "id = 1234",
    "id BETWEEN 1990 AND 2010",
    "desc < 30",
    "category = 'beta' AND id < 40",
    "long_text > '004990-'",
    "shuffled IS NULL AND id < 100",
]


def filtered_by_datafusion(path: Path) -> list[str]:
    """Filtered reads through DataFusion, which prunes pages with the column index."""
    import datafusion

    config = datafusion.SessionConfig().set("datafusion.execution.parquet.pushdown_filters", "true")
    ctx = datafusion.SessionContext(config)
    ctx.register_parquet("t", str(path))
    return [
        repr(ctx.sql(f"SELECT id FROM t WHERE {f} ORDER BY id").to_arrow_table().to_pylist())
        for f in FILTERS
    ]


def region_keys(path: Path) -> list[str]:
    with ParquetFile.open(path) as pf:
        return [kv.key or "" for kv in pf.metadata.key_value_metadata or [] if kv.key == REGION_KEY]


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


def write_duckdb(path: Path) -> Path:
    """A DuckDB file with nulls, NaN, long strings, a struct and a list (v1 pages)."""
    con = duckdb.connect()
    try:
        con.execute(
            f"""COPY (SELECT
                  range AS id,
                  CASE WHEN range % 7 = 3 THEN NULL
                       ELSE 'name-' || lpad((range * 7919 % 20000)::VARCHAR, 6, '0')
                            || repeat('x', 90) END AS s,
                  CASE WHEN range % 5 = 0 THEN NULL ELSE range % 1000 END AS n,
                  CASE WHEN range % 11 = 0 THEN 'nan'::DOUBLE WHEN range % 13 = 0 THEN NULL
                       ELSE range / 3.0 - 500 END AS f,
                  CASE WHEN range BETWEEN 2048 AND 4095 THEN NULL
                       ELSE ['a', 'b', 'c'][range % 3 + 1] END AS mostly_null,
                  {{'x': range % 17, 'y': CASE WHEN range % 4 = 0 THEN NULL
                                               ELSE 'y' || (range % 9) END}} AS st,
                  [range % 3, range % 5] AS l
                FROM range(10000)) TO '{path}'
               (FORMAT parquet, ROW_GROUP_SIZE 2048, COMPRESSION snappy)"""
        )
    finally:
        con.close()
    return path


# ---------------------------------------------------------------- every writer


@pytest.mark.parametrize(
    "name",
    [
        "pyarrow_v1_zstd_dict",
        "pyarrow_v2_snappy_dict",
        "pyarrow_bloom",
        "duckdb",
        "datafusion",
        "polars",
        pytest.param("spark", marks=pytest.mark.spark),
    ],
)
def test_writers_files_get_indexes_and_read_the_same(
    name: str, copy_of: Callable[[str], Path], request: pytest.FixtureRequest
) -> None:
    spark = request.getfixturevalue("spark") if name == "spark" else None
    path = copy_of(name)
    rows = rows_by_reader(path, spark)
    filtered = filtered_by_datafusion(path)
    pages = pages_digest(path)

    [res] = add_indexes(path, page_index="add", **KINDS)

    assert res.rewritten and res.region_bytes > 0
    assert res.bytes_after == path.stat().st_size
    assert res.indexes == {k: v for k, v in KINDS.items()}, res.skipped
    assert rows_by_reader(path, spark) == rows, "an engine reads different rows"
    assert filtered_by_datafusion(path) == filtered, "page pruning lost or invented rows"
    assert pages_digest(path) == pages, "data pages changed"
    with ParquetFile.open(path) as pf:
        check_file(pf, decode=False)  # offset indexes list exactly the data pages
        region, warnings = read_region(pf)
        assert region is not None and not warnings
        assert {e.kind for e in region.blobs} == set(KINDS)
        # Every chunk has an offset index now, except the skipped ones.
        missing = {
            pf.leaf(c).name
            for rg in range(pf.num_row_groups)
            for c in range(len(pf.schema.leaves))
            if pf.offset_index(rg, c) is None
        }
    assert missing <= set(res.skipped)
    if name == "duckdb":
        assert res.page_index_added > 0
        assert set(res.skipped) == {"tags.list.element"}


@pytest.mark.parametrize("name", ["pyarrow_v1_none_dict", "duckdb", "polars"])
def test_indexing_twice_replaces_the_region(name: str, copy_of: Callable[[str], Path]) -> None:
    path = copy_of(name)
    [first] = add_indexes(path, page_index="add", **KINDS)
    size, digest = path.stat().st_size, file_digest(path)
    [second] = add_indexes(path, page_index="add", **KINDS)
    assert second.page_index_added == 0, "page indexes are added once"
    assert path.stat().st_size == size == first.bytes_after
    assert file_digest(path) == digest
    assert region_keys(path) == [REGION_KEY]
    # Fewer kinds: the region shrinks to them, never stacks.
    [third] = add_indexes(path, hll=["id"])
    assert third.indexes == {"hll": ["id"]}
    with ParquetFile.open(path) as pf:
        region, _ = read_region(pf)
        assert region is not None and {e.kind for e in region.blobs} == {"hll"}
    assert region_keys(path) == [REGION_KEY]
    assert path.stat().st_size < size


@pytest.mark.parametrize("name", ["pyarrow_v2_zstd_plain", "duckdb"])
def test_drop_restores_a_file_without_region(name: str, copy_of: Callable[[str], Path]) -> None:
    path = copy_of(name)
    rows = rows_by_reader(path)
    pages = pages_digest(path)
    add_indexes(path, page_index="add", **KINDS)
    with ParquetFile.open(path) as pf:
        page_indexes = [pf.column_chunk(rg, 0).offset_index_offset for rg in range(3)]

    [res] = add_indexes(path, drop=True)

    assert res.region_dropped and res.region_bytes == 0
    assert region_keys(path) == []
    assert pq.read_schema(path).metadata is None or REGION_KEY.encode() not in (
        pq.read_schema(path).metadata or {}
    )
    assert rows_by_reader(path) == rows
    assert pages_digest(path) == pages
    with ParquetFile.open(path) as pf:
        assert read_region(pf) == (None, [])
        # The page index stays (dropping is about the embedded region only).
        assert all(pf.has_offset_index(rg, 0) for rg in range(pf.num_row_groups))
        assert None not in page_indexes
    [again] = add_indexes(path, drop=True)
    assert not again.rewritten and not again.region_dropped


def test_keeping_the_region_when_no_kind_is_asked(copy_of: Callable[[str], Path]) -> None:
    path = copy_of("duckdb")
    add_indexes(path, **KINDS)
    with ParquetFile.open(path) as pf:
        before, _ = read_region(pf)
    assert before is not None
    [res] = add_indexes(path, page_index="add")
    assert res.page_index_added > 0
    with ParquetFile.open(path) as pf:
        after, _ = read_region(pf)
    assert after is not None and after.blobs == before.blobs


# ---------------------------------------------------------------- retrofitted page index


@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("dictionary", [True, False])
def test_retrofitted_page_index_equals_pyarrows(
    tmp_path: Path, version: str, dictionary: bool
) -> None:
    """Same table, same pages: the retrofitted index is the one pyarrow writes."""
    table = writers.make_table()
    kw: dict[str, Any] = {
        "row_group_size": writers.ROW_GROUP_ROWS,
        "data_page_size": writers.PAGE_BYTES,
        "max_rows_per_page": writers.PAGE_ROWS,
        "write_batch_size": writers.PAGE_ROWS,
        "data_page_version": version,
        "compression": "snappy",
        "use_dictionary": dictionary,
    }
    ref, raw = tmp_path / "ref.parquet", tmp_path / "raw.parquet"
    pq.write_table(table, ref, write_page_index=True, **kw)
    pq.write_table(table, raw, write_page_index=False, **kw)

    [res] = add_indexes(raw, page_index="add", truncate=False)

    nested_v1 = {"tags.list.element"} if version == "1.0" else set()
    assert set(res.skipped) == nested_v1
    compared = 0
    with ParquetFile.open(ref) as a, ParquetFile.open(raw) as b:
        for rg in range(a.num_row_groups):
            for c in range(len(a.schema.leaves)):
                name = a.leaf(c).name
                ob = b.offset_index(rg, c)
                if name in nested_v1:
                    assert ob is None
                    continue
                oa = a.offset_index(rg, c)
                assert oa is not None and ob is not None
                first = [loc.first_row_index for loc in oa.page_locations or []]
                assert first == [loc.first_row_index for loc in ob.page_locations or []], name
                ca, cb = a.column_index(rg, c), b.column_index(rg, c)
                assert ca is not None and cb is not None, name
                for f in ("null_pages", "min_values", "max_values", "null_counts"):
                    assert getattr(cb, f) == getattr(ca, f), f"{name} rg {rg}: {f}"
                assert cb.boundary_order == ca.boundary_order, name
                compared += 1
    assert compared == 3 * (12 if version == "1.0" else 13)


def test_scan_prunes_pages_with_a_retrofitted_index(tmp_path: Path) -> None:
    path = tmp_path / "raw.parquet"
    pq.write_table(
        writers.make_table(),
        path,
        row_group_size=writers.ROW_GROUP_ROWS,
        max_rows_per_page=writers.PAGE_ROWS,
        write_batch_size=writers.PAGE_ROWS,
        write_page_index=False,
    )
    full = pq.read_table(path)
    add_indexes(path, page_index="add")
    for where, mask in [
        (
            "id BETWEEN 1990 AND 2010",
            pc.and_(pc.greater_equal(full["id"], 1990), pc.less_equal(full["id"], 2010)),
        ),
        ("desc < 30", pc.less(full["desc"], 30)),
    ]:
        scan = pqindex.dataset(str(path)).scan(columns=["id", "desc"], where=where)
        got = scan.to_table()
        want = full.filter(mask).select(["id", "desc"])
        assert got.to_pylist() == want.to_pylist(), where
        report = scan.report.to_dict()
        # Two columns, one or two pages each, out of 8 pages per column.
        assert report["pages_read"] <= 4 < report["pages_total"], (where, report)


def test_retrofitted_bounds_hold_every_page_row(tmp_path: Path) -> None:
    """DuckDB pages: every row inside its page's bounds, null counts exact, order right."""
    path = write_duckdb(tmp_path / "duck.parquet")
    full = pq.read_table(path)
    [res] = add_indexes(path, page_index="add")
    assert res.page_index_added > 0
    assert res.skipped == {"l.list.element": res.skipped["l.list.element"]}
    assert "row boundaries" in res.skipped["l.list.element"]

    leaf_values = {
        "id": full["id"],
        "s": full["s"],
        "n": full["n"],
        "f": full["f"],
        "mostly_null": full["mostly_null"],
        "st.x": pc.struct_field(full["st"], "x"),
        "st.y": pc.struct_field(full["st"], "y"),
    }
    checked = null_pages = 0
    with ParquetFile.open(path) as pf:
        start = 0
        for rg in range(pf.num_row_groups):
            for leaf in pf.schema.leaves:
                if leaf.name not in leaf_values:
                    continue
                ci, oi = pf.column_index(rg, leaf.index), pf.offset_index(rg, leaf.index)
                assert ci is not None and oi is not None, leaf.name
                locs = oi.page_locations or []
                assert validate_column_index(ci, len(locs), leaf) is None
                rows = pf.page_rows(rg, leaf.index)
                assert rows is not None
                order = bound_order(leaf)
                for i, loc in enumerate(locs):
                    page = leaf_values[leaf.name].slice(start + (loc.first_row_index or 0), rows[i])
                    b = page_bounds(ci, leaf, i)
                    assert b.null_count == page.null_count, (leaf.name, rg, i)
                    values = [v for v in page.to_pylist() if v is not None]
                    if leaf.name == "f":
                        assert b.nan_count == sum(math.isnan(v) for v in values)
                        values = [v for v in values if not math.isnan(v)]
                    assert b.all_null == (not values)
                    if not values:
                        null_pages += 1
                        continue
                    keys = [order.key(v) for v in values]
                    assert b.min is not None and b.max is not None
                    lo, hi = order.key(b.min), order.key(b.max)
                    assert lo <= min(keys) and max(keys) <= hi, (leaf.name, rg, i)
                    if leaf.name != "s":  # s is truncated to 64 bytes
                        assert (lo, hi) == (min(keys), max(keys)), (leaf.name, rg, i)
                    else:
                        assert len(ci.max_values[i]) <= 64  # type: ignore[index]
                    checked += 1
                if leaf.name == "id":
                    assert ci.boundary_order == BoundaryOrder.ASCENDING
            start += pf.row_group_rows(rg)
    # 5 row groups x 7 columns, one page each; mostly_null's second row group is all null.
    assert (checked, null_pages) == (34, 1)
    # And through the scanner (DuckDB writes one page per chunk: nothing more to prune).
    for where, mask in [
        ("n IS NULL AND id < 3000", pc.and_(pc.is_null(full["n"]), pc.less(full["id"], 3000))),
        ("mostly_null = 'b'", pc.equal(full["mostly_null"], "b")),
        ("s >= 'name-019990'", pc.greater_equal(full["s"], "name-019990")),
    ]:
        scan = pqindex.dataset(str(path)).scan(columns=["id"], where=where)
        assert scan.to_table()["id"].to_pylist() == full.filter(mask)["id"].to_pylist(), where


def test_nested_column_with_v1_pages_is_skipped_with_a_reason(
    copy_of: Callable[[str], Path],
) -> None:
    path = copy_of("duckdb")
    [res] = add_indexes(path, page_index="add")
    reason = res.skipped["tags.list.element"]
    assert "pages may not start at row boundaries" in reason
    with ParquetFile.open(path) as pf:
        col = pf.schema.leaf("tags.list.element")
        assert col is not None
        assert all(
            pf.offset_index(rg, col.index) is None and pf.column_index(rg, col.index) is None
            for rg in range(pf.num_row_groups)
        )


def test_all_nan_page_gets_an_offset_index_only(tmp_path: Path) -> None:
    path = tmp_path / "nan.parquet"
    values = [float("nan")] * 100 + [1.0, -0.0, 2.5] * 10
    pq.write_table(
        pa.table({"x": values}),
        path,
        max_rows_per_page=100,
        write_batch_size=100,
        write_page_index=False,
    )
    [res] = add_indexes(path, page_index="add")
    assert "only NaN" in res.skipped["x"]
    assert res.page_index_added == 1 and res.column_indexes_added == 0
    with ParquetFile.open(path) as pf:
        assert pf.offset_index(0, 0) is not None and pf.column_index(0, 0) is None


def test_zero_bounds_are_signed_zeros(tmp_path: Path) -> None:
    path = tmp_path / "zeros.parquet"
    pq.write_table(pa.table({"x": [0.0, 0.0, -0.0]}), path, write_page_index=False)
    add_indexes(path, page_index="add")
    with ParquetFile.open(path) as pf:
        ci = pf.column_index(0, 0)
        assert ci is not None
        assert ci.min_values == [b"\x00" * 7 + b"\x80"]  # -0.0
        assert ci.max_values == [b"\x00" * 8]  # +0.0
        assert ci.nan_counts == [0]


# ---------------------------------------------------------------- truncation, options


def test_truncation_of_existing_column_indexes(copy_of: Callable[[str], Path]) -> None:
    path = copy_of("pyarrow_v1_snappy_plain")
    col = "long_text"
    [kept] = add_indexes(path, truncate=False)
    assert not kept.rewritten and kept.column_indexes_truncated == 0
    [cut] = add_indexes(path, truncate=16)
    assert cut.column_indexes_truncated == 3 and cut.bytes_after < cut.bytes_before
    with ParquetFile.open(path) as pf:
        leaf = pf.schema.leaf(col)
        assert leaf is not None
        ci = pf.column_index(0, leaf.index)
        assert ci is not None and max(len(v) for v in ci.max_values or []) <= 16
    [again] = add_indexes(path, truncate=16)
    assert again.column_indexes_truncated == 0


def test_output_directory_keeps_relative_names(tmp_path: Path, written_files: Any) -> None:
    src = tmp_path / "in"
    (src / "part=1").mkdir(parents=True)
    shutil.copyfile(written_files["duckdb"], src / "part=1" / "a.parquet")
    shutil.copyfile(written_files["polars"], src / "b.parquet")
    (src / "_SUCCESS").write_text("")
    (src / ".hidden.parquet").write_text("not parquet")
    before = {p: file_digest(p) for p in src.rglob("*.parquet")}
    out = tmp_path / "out"

    results = add_indexes(src, output=out, hll=["id"])

    assert [Path(r.output).relative_to(out).as_posix() for r in results] == [
        "b.parquet",
        "part=1/a.parquet",
    ]
    assert {p: file_digest(p) for p in src.rglob("*.parquet")} == before
    for r in results:
        assert region_keys(Path(r.output)) == [REGION_KEY]
        assert pages_digest(Path(r.output)) == pages_digest(Path(r.path))


def test_progress_is_called_per_file(tmp_path: Path, written_files: Any) -> None:
    for n in ("duckdb", "polars"):
        shutil.copyfile(written_files[n], tmp_path / f"{n}.parquet")
    seen: list[tuple[int, int, str]] = []

    def progress(done: int, total: int, result: IndexResult) -> None:
        seen.append((done, total, Path(result.path).name))

    add_indexes(
        [tmp_path / "duckdb.parquet", tmp_path / "polars.parquet"], hll="id", progress=progress
    )
    assert seen == [(1, 2, "duckdb.parquet"), (2, 2, "polars.parquet")]


def test_bad_arguments(copy_of: Callable[[str], Path], tmp_path: Path) -> None:
    path = copy_of("duckdb")
    with pytest.raises(UserInputError, match="drop"):
        add_indexes(path, drop=True, hll=["id"])
    with pytest.raises(UserInputError, match="page_index"):
        add_indexes(path, page_index="rebuild")  # type: ignore[arg-type]
    with pytest.raises(UserInputError, match="truncate"):
        add_indexes(path, truncate=0)
    with pytest.raises(UserInputError, match="no leaf column 'nope'") as e:
        add_indexes(path, distinct=["nope"])
    assert str(path) in str(e.value)
    with pytest.raises(UserInputError, match="no such file"):
        add_indexes(tmp_path / "missing.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 this is not parquet at all PAR1")
    with pytest.raises(CorruptFileError) as bad:
        add_indexes(tmp_path / "junk.parquet", hll=["id"])
    assert "junk.parquet" in str(bad.value)
    assert index_targets([path, path]) == index_targets(path)


# ---------------------------------------------------------------- CLI


def test_cli_index_json_and_summary(tmp_path: Path, written_files: Any) -> None:
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    shutil.copyfile(written_files["duckdb"], a)
    shutil.copyfile(written_files["pyarrow_v1_none_dict"], b)
    code, out, err = run(
        "index",
        str(a),
        str(b),
        "--distinct",
        "category",
        "--hll",
        "id,category",
        "--page-index",
        "add",
        "--json",
    )
    assert code == 0, err
    report = json.loads(out)
    assert [Path(f["path"]).name for f in report["files"]] == ["a.parquet", "b.parquet"]
    assert report["errors"] == []
    assert report["files"][0]["indexes"] == {"distinct": ["category"], "hll": ["id", "category"]}
    assert report["files"][0]["page_index_added"] > 0
    assert report["totals"]["files"] == 2
    code, out, err = run("index", str(a), "--hll", "id")
    assert code == 0, err
    assert "a.parquet" in out and "1 files" in out
    code, out, err = run("index", str(a), "--drop", "--json")
    assert code == 0 and json.loads(out)["files"][0]["region_dropped"]
    assert region_keys(a) == []


def test_cli_index_errors(tmp_path: Path, written_files: Any) -> None:
    good = tmp_path / "good.parquet"
    shutil.copyfile(written_files["duckdb"], good)
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    missing = tmp_path / "missing.parquet"

    code, out, err = run("index", str(missing), str(good), "--hll", "id")
    assert code == 2 and err.count("\n") == 1 and str(missing) in err
    assert region_keys(good) == [], "a missing path is found before any file is touched"

    code, out, err = run("index", str(junk), str(good), "--hll", "id")
    assert code == 2 and err.count("\n") == 1 and str(junk) in err
    assert region_keys(good) == [], "the first error stops the run"

    code, out, err = run("index", str(junk), str(good), "--hll", "id", "--keep-going", "--json")
    assert code == 2 and str(junk) in err
    report = json.loads(out)
    assert [e["path"] for e in report["errors"]] == [str(junk)]
    assert [f["path"] for f in report["files"]] == [str(good)]
    assert region_keys(good) == [REGION_KEY]

    code, _, err = run("index", str(good), "--distinct", "nope")
    assert code == 2 and "nope" in err and str(good) in err


def test_inspect_shows_embedded_indexes(copy_of: Callable[[str], Path]) -> None:
    path = copy_of("duckdb")
    code, out, _ = run("inspect", str(path), "--json")
    assert code == 0 and json.loads(out)["embedded_indexes"] is None
    add_indexes(path, **KINDS)

    code, out, _ = run("inspect", str(path), "--json")
    report = json.loads(out)
    assert report["schema_version"] == 1
    e = report["embedded_indexes"]
    assert e["version"] == "3.0" and e["warnings"] == []
    assert e["locator"] == f"{e['offset']}:{e['length']}"
    assert set(e["kinds"]) == set(KINDS)
    assert {(b["kind"], b["column"]) for b in e["blobs"]} == {
        (k, c) for k, cols in KINDS.items() for c in cols
    }
    assert all(b["bytes"] == b["length"] > 0 for b in e["blobs"])
    assert e["distinct_estimates"]["category"] == 4
    assert abs(e["distinct_estimates"]["id"] - writers.NUM_ROWS) < writers.NUM_ROWS * 0.05

    code, out, _ = run("inspect", str(path), "--json", "--column", "category")
    assert {b["column"] for b in json.loads(out)["embedded_indexes"]["blobs"]} == {"category"}

    code, out, _ = run("inspect", str(path))
    assert code == 0 and "Embedded indexes" in out and "hll" in out

    # Damage the region's directory: inspect still works and says what it ignored.
    data = bytearray(path.read_bytes())
    data[e["offset"] + e["length"] - 20 - 30] ^= 0xFF  # before the 20-byte trailer
    path.write_bytes(bytes(data))
    with ParquetFile.open(path) as pf:
        damaged = inspect_file(pf)["embedded_indexes"]
    assert damaged["offset"] is None and damaged["blobs"] == []
    assert any("checksum" in w for w in damaged["warnings"])
    code, out, _ = run("inspect", str(path))
    assert code == 0 and "unusable" in out
