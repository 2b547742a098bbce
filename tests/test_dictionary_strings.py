"""Dictionary-encoded string and binary chunks read as dictionaries and cast back
(``whole.dictionary_strings``; issue 43): whole row groups read by pyarrow, and
row groups whose projected chunks are decoded whole and cut
(``RowGroupReader.flat_fields``).

The reference is pyarrow's own read of the same file (the wanted rows a slice of it):
the rows and the types must be equal, on files from pyarrow (data pages v1 and v2,
small and large dictionaries, a fallback to PLAIN), DuckDB and polars, with nulls,
empty strings and rows wanted at page and row-group boundaries.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pqindex
from pqindex.format.file import ParquetFile
from pqindex.scan import whole

ROWS = 30_000
ROW_GROUP = 7_000


def _table(seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    flags = np.array(["A", "N", "R", ""])
    modes = np.array(["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"])
    null = rng.random(ROWS) < 0.05
    flag = pa.array(flags[rng.integers(0, 4, ROWS)], mask=null)
    mode = pa.array(modes[rng.integers(0, 7, ROWS)])
    return pa.table({
        "id": np.arange(ROWS, dtype=np.int64),
        "r": rng.integers(0, 100, ROWS),  # no index narrows a predicate on it
        "flag": flag,
        "mode_bin": mode.cast(pa.binary()),
        "mode_large": mode.cast(pa.large_string()),
        "mode_view": mode.cast(pa.string_view()),
        # High cardinality: a dictionary page as large as the indices (not read so).
        "comment": pa.array([f"c{v}" for v in rng.integers(0, ROWS, ROWS)]),
        "all_null": pa.nulls(ROWS, pa.string()),
    })


def _pyarrow(path: Path, **kw: Any) -> Path:
    pq.write_table(_table(1), path, row_group_size=ROW_GROUP, write_page_index=True,
                   data_page_size=4 * 1024, **kw)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("dictionary_strings")
    out = {
        "pyarrow_v1": _pyarrow(d / "v1.parquet", compression="zstd"),
        "pyarrow_v2": _pyarrow(d / "v2.parquet", compression="snappy",
                               data_page_version="2.0"),
        # The dictionary outgrows its limit: later pages PLAIN (not all dictionary).
        "fallback": _pyarrow(d / "fallback.parquet", dictionary_pagesize_limit=256),
    }
    import duckdb  # both are the test extra's: not skipped where missing
    import polars as pl

    p = d / "duckdb.parquet"
    con = duckdb.connect()
    con.register("t", _table(2).drop_columns(["mode_view"]))
    con.execute(f"COPY t TO '{p}' (FORMAT parquet, ROW_GROUP_SIZE {ROW_GROUP})")
    out["duckdb"] = p
    p = d / "polars.parquet"
    pl.from_arrow(_table(3).drop_columns(["mode_large"])).write_parquet(
        p, row_group_size=ROW_GROUP, statistics=True)
    out["polars"] = p
    return out


def _check(path: Path, where: tuple[int, int, int] | None, columns: list[str]) -> None:
    """pqindex's rows of ``r < k AND id >= lo AND id < hi`` (``where`` = k, lo, hi)
    against pyarrow's read filtered by numpy (pyarrow 26 has no filter kernel for
    views: values are compared as Python objects, types from the file's schema)."""
    want = pq.read_table(path)
    sql = None
    if where is not None:
        k, lo, hi = where
        sql = f"r < {k} AND id >= {lo} AND id < {hi}"
        ids = want.column("id").to_numpy()
        keep = (want.column("r").to_numpy() < k) & (ids >= lo) & (ids < hi)
        positions = np.flatnonzero(keep)
    else:
        positions = np.arange(want.num_rows)
    got = pqindex.dataset(str(path)).scan(columns=columns, where=sql).to_table()
    assert got.schema.types == want.select(columns).schema.types, (got.schema, want.schema)
    assert got.num_rows == positions.size
    for name in columns:
        values = want.column(name).to_pylist()
        assert got.column(name).to_pylist() == [values[i] for i in positions], name


def _present(path: Path) -> list[str]:
    names = pq.read_schema(path).names
    return [c for c in ["id", "r", "flag", "mode_bin", "mode_large", "mode_view", "comment",
                        "all_null"] if c in names]


WRITERS = ["pyarrow_v1", "pyarrow_v2", "fallback", "duckdb", "polars"]


@pytest.mark.parametrize("writer", WRITERS)
def test_full_scans_equal_pyarrow(files: dict[str, Path], writer: str) -> None:
    _check(files[writer], None, _present(files[writer]))


@pytest.mark.parametrize("sift", [True, False], ids=["sifted", "by_pages"])
@pytest.mark.parametrize("writer", WRITERS)
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_dense_rows_equal_pyarrow(files: dict[str, Path], writer: str, sift: bool,
                                  data: st.DataObject) -> None:
    """Most rows of some row groups, from and to any row (page and row-group
    boundaries included): small row groups are read whole and filtered (sifted), else
    their chunks are decoded whole and cut (by pages)."""
    k = data.draw(st.integers(30, 100))
    lo = data.draw(st.integers(0, ROWS - 1))
    hi = data.draw(st.integers(lo + 1, ROWS))
    cols = data.draw(st.lists(st.sampled_from(_present(files[writer])), min_size=1,
                              unique=True))
    # Patched per example, after the draws (hypothesis may stop an example in one).
    with pytest.MonkeyPatch.context() as mp:
        if not sift:
            mp.setattr(importlib.import_module("pqindex.dataset.dataset"),
                       "SIFT_ROW_GROUP_BYTES", 0)
        _check(files[writer], (k, lo, hi), cols)


def test_small_dictionaries_are_read_as_dictionaries(files: dict[str, Path],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The path is taken where it should be (and only there): pyarrow's v1 file's
    small-dictionary strings and binaries, not the views, the high-cardinality
    column, nor the chunks past a PLAIN fallback."""
    pf = ParquetFile.open(files["pyarrow_v1"])
    rgs = list(range(pf.num_row_groups))
    assert whole.dictionary_strings(pf, rgs, _present(files["pyarrow_v1"])) == [
        "flag", "mode_bin", "mode_large"]
    fb = ParquetFile.open(files["fallback"])
    assert "comment" not in whole.dictionary_strings(fb, list(range(fb.num_row_groups)),
                                                     ["comment"])
    asked: list[list[str]] = []
    real = whole.dense_strings

    def spy(t: pa.Table, names: Any, pf: Any) -> pa.Table:
        asked.append(list(names))
        return real(t, names, pf)

    monkeypatch.setattr(whole, "dense_strings", spy)
    _check(files["pyarrow_v1"], None, ["flag", "mode_view", "comment"])
    assert asked and all(names == ["flag"] for names in asked)
