"""Scope of the Bloom filters ``add_indexes`` / ``pqindex index --bloom`` embed.

Row-group and page filters (the default) must skip the row groups and pages
that lack the value, never a matching row; a file filter alone cannot. Results
are compared with pyarrow's read + filter on files of several writers; what was
skipped is read from the scan report (no timing).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import pqindex
import writers
from pqindex.cli import cli
from pqindex.dataset.indexing import add_indexes
from pqindex.errors import UserInputError
from pqindex.format.file import ParquetFile
from pqindex.indexes.region import read_region
from pqindex.write.add_indexes import DEFAULT_BLOOM_SCOPE, bloom_scopes

WRITERS = ("pyarrow_v1_zstd_dict", "pyarrow_v2_none_plain", "pyarrow_v2_snappy_dict", "duckdb",
           "datafusion", "polars")
COLUMN = "shuffled"  # a permutation (each value in one row group), with nulls


def _indexed(written_files: writers.FileCache, tmp_path: Path, name: str,
             scope: str | tuple[str, ...] = DEFAULT_BLOOM_SCOPE) -> Path:
    tag = scope if isinstance(scope, str) else "+".join(scope)
    dst = tmp_path / f"{name}-{tag.replace(',', '+')}.parquet"
    shutil.copyfile(written_files[name], dst)
    add_indexes(dst, bloom=COLUMN, bloom_scope=scope)
    return dst


def _expected(path: Path, values: list[int]) -> pa.Table:
    t = pq.read_table(path, columns=["id", COLUMN])
    t = t.filter(pc.is_in(t.column(COLUMN), pa.array(values, pa.int64())))
    return t.sort_by("id")


def _query(ds: pqindex.Dataset, values: list[int]) -> tuple[pa.Table, dict[str, object]]:
    where = (f"{COLUMN} = {values[0]}" if len(values) == 1
             else f"{COLUMN} IN ({', '.join(map(str, values))})")
    scan = ds.scan(columns=["id", COLUMN], where=where)
    t = scan.to_table().sort_by("id")
    return t, scan.report.to_dict()


def _present(path: Path) -> np.ndarray:
    col = pq.read_table(path, columns=[COLUMN]).column(0)
    return np.asarray(pc.drop_null(col).to_numpy(), dtype=np.int64)


def _scopes(path: Path) -> set[str]:
    with ParquetFile.open(path) as pf:
        region, _ = read_region(pf)
    assert region is not None
    return {str(e.scope) for e in region.blobs if e.kind == "bloom"}


@pytest.mark.parametrize("name", WRITERS)
def test_default_scope_matches_pyarrow(written_files: writers.FileCache, tmp_path: Path,
                                       name: str) -> None:
    path = _indexed(written_files, tmp_path, name)
    present = _present(path)
    ds = pqindex.dataset(str(path))
    try:
        @settings(max_examples=40, deadline=None, derandomize=True)
        @given(st.lists(st.one_of(st.sampled_from(present.tolist()),
                                  st.integers(-(2**63), 2**63 - 1)), min_size=1, max_size=4))
        def check(values: list[int]) -> None:
            got, _ = _query(ds, values)
            assert got.equals(_expected(path, values).cast(got.schema))

        check()
    finally:
        ds.close()


@pytest.mark.parametrize("name", WRITERS)
def test_row_group_filters_skip_what_file_filters_read(
    written_files: writers.FileCache, tmp_path: Path, name: str
) -> None:
    default = _indexed(written_files, tmp_path, name)
    file_only = _indexed(written_files, tmp_path, name, "file")
    assert _scopes(file_only) == {"file"}
    assert "row_group" in _scopes(default)
    rng = np.random.default_rng(12)
    values = rng.choice(_present(default), 30, replace=False).tolist()
    with ParquetFile.open(default) as pf:
        n_groups = pf.num_row_groups
        col = pf.schema.leaf(COLUMN)
        assert col is not None
        dictionaries = any(pf.all_dictionary_encoded(rg, col.index) for rg in range(n_groups))
    assert n_groups > 1
    read = {"default": 0, "file": 0}
    pages = {"default": 0, "file": 0}
    for label, path in (("default", default), ("file", file_only)):
        ds = pqindex.dataset(str(path))
        try:
            for v in values:
                got, report = _query(ds, [v])
                assert got.equals(_expected(path, [v]).cast(got.schema))
                assert got.num_rows == 1
                read[label] += int(report["row_groups_read"])  # type: ignore[call-overload]
                pages[label] += int(report["pages_read"])  # type: ignore[call-overload]
                if label == "default":
                    assert report["row_groups_read"] >= 1  # type: ignore[operator]
        finally:
            ds.close()
    # A file filter holds every value: without dictionaries to rule row groups out,
    # each is read (min/max of a permutation rule nothing out). Row-group filters
    # read the one holding the value, and a few more for false positives (1% each).
    if not dictionaries:
        assert read["file"] == len(values) * n_groups
    assert read["default"] <= read["file"]
    assert read["default"] <= len(values) + len(values) * (n_groups - 1) // 10 + 1
    assert pages["default"] <= pages["file"]
    if not dictionaries:
        assert pages["default"] < pages["file"]


def test_page_filters_skip_pages(written_files: writers.FileCache, tmp_path: Path) -> None:
    path = _indexed(written_files, tmp_path, "pyarrow_v2_snappy_dict", "page")
    assert _scopes(path) == {"page"}
    ds = pqindex.dataset(str(path))
    try:
        total = 0
        values = _present(path)[::97].tolist()
        for v in values:
            got, report = _query(ds, [v])
            assert got.equals(_expected(path, [v]).cast(got.schema))
            total += int(report["pages_read"])  # type: ignore[call-overload]
        # Two columns, one page each holds the value; false positives add a few.
        assert total <= 2 * len(values) + len(values) // 2
    finally:
        ds.close()


def test_cli_bloom_scope(written_files: writers.FileCache, tmp_path: Path) -> None:
    src = written_files["pyarrow_v1_zstd_dict"]
    runner = CliRunner()
    for args, want in (([], set(DEFAULT_BLOOM_SCOPE)), (["--bloom-scope", "file"], {"file"}),
                       (["--bloom-scope", "file,row_group"], {"file", "row_group"})):
        dst = tmp_path / f"cli{len(args)}{len(want)}.parquet"
        shutil.copyfile(src, dst)
        res = runner.invoke(cli, ["index", "--bloom", COLUMN, *args, str(dst)])
        assert res.exit_code == 0, res.output
        assert _scopes(dst) == want
    res = runner.invoke(cli, ["index", "--bloom", COLUMN, "--bloom-scope", "rowgroup", str(dst)])
    assert res.exit_code != 0
    assert "bloom scope" in res.output


def test_bloom_scopes_option() -> None:
    assert bloom_scopes("row_group, page") == ("row_group", "page")
    assert bloom_scopes(["page", "page"]) == ("page",)
    for bad in ("", "files", ["row_group", "rows"]):
        with pytest.raises(UserInputError):
            bloom_scopes(bad)
    # The CLI's default (spelled out there to keep its import light) is the library's.
    opt = next(p for p in cli.commands["index"].params if p.name == "bloom_scope")
    assert bloom_scopes(str(opt.default)) == DEFAULT_BLOOM_SCOPE


def test_write_table_bloom_scope(tmp_path: Path) -> None:
    """``write_table(bloom_scope=)`` embeds the ``bloom`` index at the scopes asked
    (one filter per file by default); page filters narrow a lookup on an unsorted
    column to the pages holding the value, with pyarrow's rows."""
    rng = np.random.default_rng()
    n = 20_000
    t = pa.table({"id": pa.array(np.arange(n), pa.int64()),
                  COLUMN: pa.array(rng.permutation(n), pa.int64())})
    paths = {}
    for scope in (None, "page", "row_group,page"):
        paths[scope] = tmp_path / f"{scope}.parquet"
        pqindex.write_table(t, paths[scope], sort_by="id", row_group_rows=5_000,
                            page_rows=500, indexes={"bloom": [COLUMN]}, bloom_scope=scope)
    assert _scopes(paths[None]) == {"file"}
    assert _scopes(paths["page"]) == {"page"}
    assert _scopes(paths["row_group,page"]) == {"row_group", "page"}
    values = [int(v) for v in rng.choice(n, 3, replace=False)] + [n + 5]  # one absent
    pages = {}
    for scope, path in paths.items():
        with pqindex.dataset(str(path)) as ds:
            got, report = _query(ds, values)
        assert got.equals(_expected(path, values)), scope
        pages[scope] = report["pages_read"]
    # A file filter lets the 40 pages of the column through; page filters the (at most 3)
    # holding a value and their false positives (1% each), and as many pages of "id".
    assert max(pages["page"], pages["row_group,page"]) * 3 < pages[None], pages
    with pytest.raises(UserInputError, match="bloom scope"):
        pqindex.write_table(t, tmp_path / "bad.parquet", indexes={"bloom": [COLUMN]},
                            bloom_scope="chunk")
