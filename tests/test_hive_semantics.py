"""A hive key that is also a file column: the path's value wins (docs/semantics.md).

Checked against DuckDB (``read_parquet(..., hive_partitioning=true)``) and polars
(``scan_parquet(..., hive_partitioning=True)``) on the same directories, with random
predicates, through every entry point (scan, head, count_rows, aggregate, explain,
plan, to_pyarrow_dataset), with and without a manifest (whose statistics of the
shadowed file column must not prune)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.dataset.manifest import write_manifest

# The file column `k` shadowed by the directory key `k`: its values overlap the
# partition values in some files and not in others; one file type per lake.
_FILE_TYPES = {
    "int32": (pa.int32(), lambda r: r.choice([None, *range(0, 8)])),
    "string": (pa.string(), lambda r: r.choice([None, "1", "2", "a", "zz"])),
    "float": (pa.float64(), lambda r: r.choice([None, 0.5, 1.0, 2.0, 7.25])),
}


def _lake(root: Path, file_type: str, seed: int) -> Path:
    rng = random.Random(seed)
    arrow_type, value = _FILE_TYPES[file_type]
    row = 0
    for part in (1, 2, 3, 5):
        d = root / f"k={part}"
        d.mkdir(parents=True)
        for f in range(2):
            n = rng.randint(1, 40)
            ids = list(range(row, row + n))
            row += n
            table = pa.table({
                "id": pa.array(ids, pa.int64()),
                "k": pa.array([value(rng) for _ in ids], arrow_type),
                "x": pa.array([rng.randint(0, 9) for _ in ids], pa.int64()),
            })
            # Small row groups: row-group statistics of the file's `k` exist to mislead.
            pq.write_table(table, d / f"{f}.parquet", row_group_size=8)
    return root


def _predicate(rng: random.Random) -> str:
    def leaf() -> str:
        kind = rng.randrange(5)
        if kind == 0:
            return f"k {rng.choice(['=', '!=', '<', '<=', '>', '>='])} {rng.randint(0, 6)}"
        if kind == 1:
            return f"k IN ({', '.join(str(rng.randint(0, 6)) for _ in range(2))})"
        if kind == 2:
            return f"x {rng.choice(['=', '<', '>='])} {rng.randint(0, 9)}"
        if kind == 3:
            return f"k BETWEEN {rng.randint(0, 3)} AND {rng.randint(2, 6)}"
        return "k IS NOT NULL"

    out = leaf()
    for _ in range(rng.randint(0, 2)):
        out = f"({out}) {rng.choice(['AND', 'OR'])} {'NOT ' if rng.random() < 0.2 else ''}({leaf()})"
    return out


def _duckdb_rows(root: Path, where: str) -> list[tuple[int, int]]:
    # hive_types: the key typed BIGINT as pqindex types it (DuckDB would keep the file's).
    sql = (f"SELECT id, k FROM read_parquet('{root}/*/*.parquet', hive_partitioning=true, "
           f"hive_types={{'k': 'BIGINT'}}) WHERE {where}")
    return sorted(duckdb.sql(sql).fetchall())


def _polars_rows(root: Path, where: str) -> list[tuple[int, int]]:
    frame = pl.scan_parquet(f"{root}/**/*.parquet", hive_partitioning=True,
                            hive_schema={"k": pl.Int64})
    got = pl.SQLContext(t=frame).execute(f"SELECT id, k FROM t WHERE {where}").collect()
    return sorted(got.rows())


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(zip(table.column("id").to_pylist(), table.column("k").to_pylist(),
                      strict=True))


@pytest.mark.parametrize("file_type", sorted(_FILE_TYPES))
@pytest.mark.parametrize("manifest", [False, True])
def test_path_value_wins_against_duckdb_and_polars(tmp_path: Path, file_type: str,
                                                   manifest: bool) -> None:
    seed = sorted(_FILE_TYPES).index(file_type) * 2 + manifest
    root = _lake(tmp_path / "lake", file_type, seed)
    if manifest:
        write_manifest(root)
    ds = pqindex.dataset(root)
    schema = ds.to_table(where="id < 0").schema
    assert schema.field("k").type == pa.int64() and schema.names.count("k") == 1
    rng = random.Random(seed)
    for _ in range(12):
        where = _predicate(rng)
        want = _duckdb_rows(root, where)
        assert _polars_rows(root, where) == want, where
        got = ds.to_table(["id", "k"], where=where)
        assert got.schema.field("k").type == pa.int64()
        assert _rows(got) == want, where
        assert ds.count_rows(where) == len(want), where
        agg = ds.aggregate(["count(*)", "sum(k)", "min(k)", "max(k)"], where=where)
        keys = [k for _, k in want]
        assert agg["count(*)"] == len(want), where
        assert agg["sum(k)"] == (sum(keys) if keys else None), where
        assert agg["min(k)"] == (min(keys) if keys else None), where
        assert agg["max(k)"] == (max(keys) if keys else None), where
        head = ds.head(5, ["id", "k"], where=where)
        assert set(_rows(head)) <= set(want) and head.num_rows == min(5, len(want)), where


def test_every_entry_point_sees_the_path_value(tmp_path: Path) -> None:
    # The case: k=1/a.parquet holds k = 5, 6.
    d = tmp_path / "k=1"
    d.mkdir()
    pq.write_table(pa.table({"k": pa.array([5, 6], pa.int32()), "v": ["a", "b"]}),
                   d / "a.parquet")
    ds = pqindex.dataset(tmp_path)
    assert ds.to_table(where="k = 1").to_pylist() == [{"v": "a", "k": 1}, {"v": "b", "k": 1}]
    assert ds.to_table(where="k = 5").num_rows == 0
    assert ds.head(1, where="k = 1").to_pylist() == [{"v": "a", "k": 1}]
    assert ds.count_rows("k = 1") == 2 and ds.count_rows("k >= 5") == 0
    assert ds.aggregate(["max(k)"], where="k = 1") == {"max(k)": 1}
    assert "skipped by partition" in ds.explain(where="k = 5")
    # The plan reads no chunk of the file's shadowed column.
    text = ds.explain(where="k = 1")
    assert "└─ k:" not in text and "v: whole chunk" in text
    assert [f.partition for f in ds.plan(where="k = 1").files] == [{"k": 1}]
    arrow_ds = ds.to_pyarrow_dataset()
    assert arrow_ds.schema.field("k").type == pa.int64()
    got = arrow_ds.to_table(filter=pc.field("k") == 1)
    assert sorted(got.column("k").to_pylist()) == [1, 1]
    assert arrow_ds.to_table(filter=pc.field("k") == 5).num_rows == 0
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{tmp_path}/*/*.parquet', "
                      "hive_partitioning=true) WHERE k = 1").fetchall() == [(2,)]
