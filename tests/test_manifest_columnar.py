"""The columnar manifest (``_pqindex/manifest.pqm``): the same pruning as the JSON
manifest, invisible to other readers, ignored when it no longer stands for the JSON.

References: pyarrow's full read + filter of the files for rows; the JSON manifest's
per-file path (the columnar file removed) for which files are skipped; pyarrow,
DuckDB and polars row counts over the directory and its globs, before and after the
manifest is written.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.dataset.manifest import MANIFEST_NAME, write_manifest
from pqindex.dataset.manifest_columnar import COLUMNAR_NAME, read_columnar

FILES = 24


def _lake(root: Path) -> pa.Table:
    rng = np.random.default_rng(7)
    parts = []
    for k in range(FILES):
        n = 50
        ids = np.arange(k * n, k * n + n)
        x = rng.normal(size=n)
        x[rng.random(n) < 0.1] = np.nan
        t = pa.table({
            "id": pa.array(ids, pa.int64()),
            "x": pa.array(x, mask=rng.random(n) < 0.1),
            "s": pa.array([f"k{k:02d}-" + "z" * 80 + f"{i}" for i in range(n)]),
        })
        sub = root / (f"g={k % 3}" if k % 2 else "")
        sub.mkdir(parents=True, exist_ok=True)
        pq.write_table(t, sub / f"part-{k:03d}.parquet")
        parts.append(t)
    return pa.concat_tables(parts)


def _counts(root: Path) -> dict[str, int]:
    import duckdb
    import polars as pl
    import pyarrow.dataset as pads

    out = {"pyarrow.dataset": pads.dataset(root, format="parquet").count_rows(),
           "pyarrow.read_table": pq.read_table(root).num_rows}
    for glob in ("*.parquet", "**/*.parquet"):
        out[f"duckdb {glob}"] = duckdb.connect().execute(
            f"SELECT count(*) FROM read_parquet('{root}/{glob}', hive_partitioning=false)"
        ).fetchall()[0][0]
        out[f"polars {glob}"] = pl.scan_parquet(f"{root}/{glob}").select(pl.len()).collect().item()
    return out


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table, dict[str, int]]:
    root = tmp_path_factory.mktemp("columnar") / "lake"
    table = _lake(root)
    before = _counts(root)
    write_manifest(root)
    return root, table, before


def test_other_readers_do_not_take_it_for_data(lake: tuple[Path, pa.Table, dict[str, int]]
                                               ) -> None:
    root, _table, before = lake
    assert (root / COLUMNAR_NAME).is_file() and (root / MANIFEST_NAME).is_file()
    assert not COLUMNAR_NAME.endswith(".parquet")
    assert _counts(root) == before


def _leaf(rng: random.Random) -> tuple[str, pc.Expression]:
    """One predicate leaf as SQL text and as a pyarrow expression (IEEE NaN: a NaN
    compares false, is not NULL)."""
    id_, x, s_ = pc.field("id"), pc.field("x"), pc.field("s")
    kind = rng.randrange(8)
    if kind == 0:
        v = rng.randrange(-5, FILES * 50 + 5)
        return f"id = {v}", id_ == v
    if kind == 1:
        a = rng.randrange(0, FILES * 50)
        b = a + rng.randrange(0, 80)
        return f"id BETWEEN {a} AND {b}", (id_ >= a) & (id_ <= b)
    if kind in (2, 3):
        v = round(rng.uniform(-3, 3), 3)
        return (f"x > {v}", x > v) if kind == 2 else (f"x < {v}", x < v)
    if kind == 4:
        return "x IS NULL", x.is_null()
    if kind == 5:
        v = f"k{rng.randrange(0, FILES):02d}-{'z' * 80}3"
        return f"s = '{v}'", s_ == v
    if kind == 6:
        v = f"k{rng.randrange(0, FILES):02d}-zzz"
        return f"s >= '{v}'", s_ >= v
    a, b = rng.randrange(0, 1200), rng.randrange(0, 1200)
    return f"id IN ({a}, {b})", id_.isin([a, b])


def _where(rng: random.Random) -> tuple[str, pc.Expression]:
    (a, ea), (b, eb) = _leaf(rng), _leaf(rng)
    return rng.choice([(a, ea), (f"{a} AND {b}", ea & eb), (f"{a} OR {b}", ea | eb),
                       (f"NOT ({a})", ~ea)])


def _reference(table: pa.Table, expr: pc.Expression) -> list[int]:
    return sorted(table.filter(expr)["id"].to_pylist())


def test_same_rows_and_same_files_as_the_json_manifest(
        lake: tuple[Path, pa.Table, dict[str, int]], tmp_path: Path) -> None:
    root, table, _ = lake
    ds = pqindex.dataset(root)
    view = ds.manifest_view()
    assert view is not None and view.columnar is not None
    rng = random.Random(3)
    cases = [_where(rng) for _ in range(40)]
    got = {where: ds.plan(["id"], where) for where, _ in cases}
    for where, expr in cases:
        rows = sorted(ds.to_table(["id"], where)["id"].to_pylist())
        assert rows == _reference(table, expr), where
    # The same lake with the JSON manifest alone (as an older pqindex wrote it).
    aside = tmp_path / "manifest.pqm"
    os.replace(root / COLUMNAR_NAME, aside)
    try:
        ds_old = pqindex.dataset(root)
        old_view = ds_old.manifest_view()
        assert old_view is not None and old_view.columnar is None
        assert old_view.unmatched == 0
        for where, _ in cases:
            ref = ds_old.plan(["id"], where)
            assert ({f.path: f.skipped_by for f in got[where].files}
                    == {f.path: f.skipped_by for f in ref.files}), where
    finally:
        os.replace(aside, root / COLUMNAR_NAME)
    # The manifest prunes at all.
    assert ds.plan(["id"], "id = 3").report.files_skipped["manifest"] == FILES - 1


def test_ignored_once_the_json_manifest_changes(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    _lake(root)  # its own lake: a copy's files would not match (their ctime moved)
    write_manifest(root)
    assert read_columnar(str(root)) is not None
    m = json.loads((root / MANIFEST_NAME).read_text())
    m["files"] = m["files"][:3]  # another writer's manifest, knowing three files
    (root / MANIFEST_NAME).write_text(json.dumps(m))
    assert read_columnar(str(root)) is None
    ds = pqindex.dataset(root)
    view = ds.manifest_view()
    assert view is not None and view.columnar is None and len(view.matched) == 3
    got = sorted(ds.to_table(["id"], "id >= 1190")["id"].to_pylist())
    assert got == list(range(1190, 1200))


def test_statistics_columns_are_sort_keys(lake: tuple[Path, pa.Table, dict[str, int]]) -> None:
    root, _table, _ = lake
    columnar = read_columnar(str(root))
    assert columnar is not None
    assert "min(id)" not in columnar.table.column_names  # read when a predicate asks
    t = pq.read_table(root / COLUMNAR_NAME)
    assert t.schema.field("min(id)").type == pa.int64()
    assert t.schema.field("min(s)").type == pa.binary()
    by_path = dict(zip(t.column("path").to_pylist(), t.column("min(id)").to_pylist(), strict=True))
    assert by_path["part-000.parquet"] == 0 and by_path["g=1/part-001.parquet"] == 50
    # A shortened string bound is a bound (min rounded down), flagged inexact.
    s_min = t.column("min(s)").to_pylist()
    assert all(len(v) <= 64 for v in s_min if v is not None)
    assert not any(t.column("exact(s)").to_pylist())
    # NaN never a bound: x's bounds exclude it.
    assert pc.sum(pc.is_nan(t.column("max(x)"))).as_py() in (0, None)


def test_a_cold_lookup_imports_neither_pandas_nor_numpy_ma(
        lake: tuple[Path, pa.Table, dict[str, int]]) -> None:
    """pyarrow imports pandas on its first pa.array / pa.scalar / to_numpy (0.7-1.1 s),
    numpy's unique imports numpy.ma: a fresh process planning and reading a lookup and
    a range over the manifest makes none of those calls."""
    import subprocess
    import sys

    root, table, _ = lake
    code = (
        "import sys, pqindex\n"
        f"ds = pqindex.dataset({str(root)!r})\n"
        "n = ds.scan(['id', 's'], 'id = 657').to_table().num_rows\n"
        "m = ds.scan(['id'], 'id BETWEEN 100 AND 300').to_table().num_rows\n"
        "print(n, m, sorted(k for k in ('pandas', 'numpy.ma') if k in sys.modules))\n")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(
                             Path(pqindex.__file__).parent.parent)})
    ids = table.column("id").to_pylist()
    expected = [str(ids.count(657)), str(sum(100 <= i <= 300 for i in ids))]
    assert got.stdout.split()[:2] == expected, got.stdout
    assert got.stdout.strip().endswith("[]"), got.stdout
