"""Delta partition columns of every type deltalake writes, read as typed columns.

Tables written by deltalake partitioned by boolean, byte/short, float/double, decimal,
timestamp, timestamp without time zone and binary columns; rows compared with
deltalake's own read and polars' (polars reads no binary partition column) under
random predicates on those columns.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from conftest import import_or_missing

deltalake = import_or_missing("deltalake", "deltalake")
pl = import_or_missing("polars", "polars")

import pqindex  # noqa: E402
from pqindex.dataset.partition_kinds import (  # noqa: E402
    partition_arrow_type,
    partition_kind,
    partition_text,
    partition_value,
)

UTC = dt.UTC
_POOLS: dict[str, tuple[pa.DataType, list[Any]]] = {
    "b": (pa.bool_(), [True, False, None]),
    "i8": (pa.int8(), [1, -2, 3, None]),
    "i16": (pa.int16(), [300, -2, 4, None]),
    "f32": (pa.float32(), [1.5, -2.25, 0.0, None]),
    "f64": (pa.float64(), [1.5, -2.25, 3.125, 1e10, None]),
    # (deltalake 1.6.6 cannot write a negative decimal partition value: "-3.-50")
    "dec": (pa.decimal128(9, 2), [decimal.Decimal(v) for v in ("1.25", "3.50", "0.00")]
            + [None]),
    "ts": (pa.timestamp("us", tz="UTC"), [
        dt.datetime(2024, 1, 1, 12, 30, tzinfo=UTC), dt.datetime(2024, 1, 2, tzinfo=UTC),
        dt.datetime(2023, 12, 31, 23, 59, 59, 123456, tzinfo=UTC), None]),
    "ntz": (pa.timestamp("us"), [dt.datetime(2024, 1, 1, 12, 30),
                                 dt.datetime(2024, 1, 1, 12, 30, 0, 5),
                                 dt.datetime(2024, 1, 3), None]),
    "bin": (pa.binary(), [b"ab", b"\x00\xff", b"a/b", None]),
}
_TABLES = {"a": ["b", "i8", "dec", "ts", "ntz"], "b": ["i16", "f32", "f64", "bin"]}


def _rows(columns: list[str], n: int, seed: int) -> pa.Table:
    rng = random.Random(seed)
    cols: dict[str, pa.Array] = {"id": pa.array(range(n), pa.int64()),
                                 "v": pa.array([rng.randrange(100) for _ in range(n)])}
    for c in columns:
        t, pool = _POOLS[c]
        cols[c] = pa.array([rng.choice(pool[:2]) if i % 3 else rng.choice(pool)
                            for i in range(n)], t)
    return pa.table(cols)


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from deltalake import write_deltalake

    out = {}
    for name, columns in _TABLES.items():
        path = tmp_path_factory.mktemp("parts") / name
        write_deltalake(str(path), _rows(columns, 36, 1), partition_by=columns)
        write_deltalake(str(path), _rows(columns, 24, 2).set_column(
            0, "id", pa.array(range(100, 124), pa.int64())), mode="append",
            partition_by=columns)
        out[name] = path
    return out


def _literal(c: str, v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v.replace(tzinfo=None).isoformat(sep=' ')}'"
    return str(v)


def _predicate(rng: random.Random, columns: list[str]) -> tuple[str, pc.Expression]:
    c = rng.choice([c for c in columns if c != "bin"] + ["bin"] * ("bin" in columns))
    t, pool = _POOLS[c]
    v = rng.choice(pool)
    f = pc.field(c)
    if v is None or c == "bin":
        if rng.random() < 0.5:
            return f"{c} IS NULL", f.is_null()
        return f"{c} IS NOT NULL", f.is_valid()
    lit = pa.scalar(v, t)
    ops = {"=": f == lit, "!=": f != lit, "<": f < lit, ">=": f >= lit}
    if c == "b":
        ops = {"=": f == lit, "!=": f != lit}
    op = rng.choice(sorted(ops))
    return f"{c} {op} {_literal(c, v)}", ops[op]


def _sorted(t: pa.Table) -> list[dict[str, Any]]:
    t = t.select(sorted(t.column_names))
    return sorted(t.to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("name", sorted(_TABLES))
def test_typed_partition_columns_read_as_deltalake_and_polars_read_them(
        name: str, tables: dict[str, Path]) -> None:
    from deltalake import DeltaTable

    path = tables[name]
    reference = DeltaTable(str(path)).to_pyarrow_table()
    ds = pqindex.dataset(str(path))
    for c in _TABLES[name]:
        assert ds.schema.field(c).type == reference.schema.field(c).type, c
    assert _sorted(ds.to_table()) == _sorted(reference)
    if name == "a":  # polars reads no binary partition column
        assert _sorted(ds.to_table()) == _sorted(pl.read_delta(str(path)).to_arrow())
    rng = random.Random(hash(name) % 1000)
    for _ in range(30):
        sql, expr = _predicate(rng, _TABLES[name])
        if rng.random() < 0.4:
            sql2, expr2 = _predicate(rng, _TABLES[name])
            sql, expr = f"({sql}) AND ({sql2})", expr & expr2
        got = ds.to_table(where=sql)
        assert _sorted(got) == _sorted(reference.filter(expr)), sql
        assert ds.count_rows(sql) == reference.filter(expr).num_rows, sql


def test_partition_values_survive_their_text_form() -> None:
    for t, pool in _POOLS.values():
        kind = partition_kind(t)
        assert kind is not None and partition_arrow_type(kind) == t
        for v in pool:
            if v is not None:
                assert partition_value(kind, partition_text(v)) == v, (kind, v)
    assert partition_kind(pa.timestamp("us", tz="Europe/Paris")) == "timestamp[us, tz=UTC]"
    assert partition_kind(pa.list_(pa.int32())) is None
