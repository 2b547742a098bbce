"""Numeric dictionary entries compared in numpy (``DictionaryEvidence._numeric``):
row groups pruned by their dictionary pages on INT32 / INT64 / FLOAT / DOUBLE
columns (NaN, -0.0 and +0.0 among the entries) give pyarrow's rows, with the
numpy comparison and with the per-entry Python one it replaced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pqindex
from pqindex.indexes.evidence import DictionaryEvidence

GROUPS = 12
ROWS = 200
TYPES = {"i32": pa.int32(), "i64": pa.int64(), "f32": pa.float32(), "f64": pa.float64()}


@pytest.fixture(scope="module")
def numeric_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    """Row groups each drawing from its own narrow band of values, so a dictionary
    often rules a row group out; no statistics, so only the dictionary can."""
    rng = np.random.default_rng(5)
    cols: dict[str, list[Any]] = {k: [] for k in TYPES}
    for _g in range(GROUPS):
        base = rng.integers(-50, 50)
        band = base + rng.integers(0, 6, ROWS)
        for k in ("i32", "i64"):
            cols[k].append(band)
        for k in ("f32", "f64"):
            f = band.astype(np.float64) / 2
            f[rng.random(ROWS) < 0.05] = np.nan
            f[rng.random(ROWS) < 0.05] = -0.0
            f[rng.random(ROWS) < 0.05] = 0.0
            cols[k].append(f)
    t = pa.table({k: pa.array(np.concatenate(v), TYPES[k]) for k, v in cols.items()})
    path = tmp_path_factory.mktemp("numeric") / "n.parquet"
    pq.write_table(t, path, row_group_size=ROWS, write_statistics=False,
                   use_dictionary=True, compression="snappy")
    return path, t


def _expr(col: str, op: str, v: Any) -> Any:
    f = pc.field(col)
    return {"<": f < v, "<=": f <= v, ">": f > v, ">=": f >= v, "=": f == v,
            "!=": f != v}[op]


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(col=st.sampled_from(list(TYPES)), op=st.sampled_from(["<", "<=", ">", ">=", "=", "!=",
                                                              "IN"]),
       k=st.integers(-60, 60), half=st.booleans(), python=st.booleans())
def test_numeric_dictionaries_prune_as_pyarrow_filters(
        numeric_file: tuple[Path, pa.Table], monkeypatch: pytest.MonkeyPatch, col: str,
        op: str, k: int, half: bool, python: bool) -> None:
    path, table = numeric_file
    v: Any = k / 2 if half and col.startswith("f") else k
    if python:  # the per-entry Python comparison, for the same answers
        monkeypatch.setattr(DictionaryEvidence, "_numeric", lambda self: None)
    else:
        monkeypatch.undo()
    if op == "IN":
        vals = [v, v + 1]
        where = f"{col} IN ({vals[0]!r}, {vals[1]!r})"
        expr = _expr(col, "=", vals[0]) | _expr(col, "=", vals[1])
    else:
        where = f"{col} {op} {v!r}"
        expr = _expr(col, op, v)
    scan = pqindex.dataset(path).scan(list(dict.fromkeys([col, "i64"])), where=where)
    got = scan.to_table()
    want = table.filter(expr)
    assert got.num_rows == want.num_rows, where
    assert sorted(got.column("i64").to_pylist()) == sorted(want.column("i64").to_pylist())


def test_dictionaries_rule_out_row_groups(numeric_file: tuple[Path, pa.Table]) -> None:
    path, table = numeric_file
    lo = int(pc.min(table.column("i64")).as_py())
    scan = pqindex.dataset(path).scan(["i64"], where=f"i64 < {lo + 3}")
    got = scan.to_table()
    assert got.num_rows == table.filter(pc.field("i64") < lo + 3).num_rows
    assert sum(scan.report.row_groups_skipped.values()) > 0
