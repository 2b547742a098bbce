"""Returned columns whose value the predicate fixes (``s = 'x'``) are repeated, not
decoded again: the rows and their types must equal a full pyarrow read + filter."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.expr.bind import bind
from pqindex.expr.sql import parse_where
from pqindex.format.file import ParquetFile
from pqindex.scan import executor

WORDS = ["", "a", "b", "x", "é", "zz", "rare"]


def _table(rng: np.random.Generator, n: int, large: bool) -> pa.Table:
    words = rng.choice(np.array(WORDS, dtype=object), n)
    nulls = rng.random(n) < 0.1
    s = pa.array([None if z else w for w, z in zip(words, nulls, strict=True)],
                 type=pa.large_string() if large else pa.string())
    b = pa.array([None if z else w.encode() for w, z in zip(words, nulls, strict=True)],
                 type=pa.large_binary() if large else pa.binary())
    small = rng.integers(-3, 4, n)
    return pa.table({"s": s, "b": b, "n": np.arange(n, dtype=np.int64),
                     "f": rng.normal(size=n),
                     "i8": pa.array(small, pa.int8(), mask=nulls),
                     "u": pa.array(rng.integers(0, 5, n), pa.uint32()),
                     "flag": pa.array(small > 0, mask=rng.random(n) < 0.2)})


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, pa.Table]]:
    out = []
    rng = np.random.default_rng(7)
    d = tmp_path_factory.mktemp("implied")
    variants: list[dict[str, Any]] = [
        {"use_dictionary": True, "compression": "snappy", "data_page_version": "1.0"},
        {"use_dictionary": False, "compression": "zstd", "data_page_version": "2.0"},
        {"use_dictionary": ["s"], "compression": "none", "data_page_version": "1.0"},
    ]
    for k, opts in enumerate(variants):
        t = _table(rng, 6000, large=k == 1)
        p = d / f"v{k}.parquet"
        pq.write_table(t, p, write_page_index=True, data_page_size=1024,
                       row_group_size=2500, **opts)
        out.append((p, t))
    t = _table(rng, 6000, large=False)
    p = d / "pqindex.parquet"
    pqindex.write_table(t, p, sort_by="s", page_rows=500, row_group_rows=2500)
    out.append((p, pq.read_table(p)))
    return out


def _reference(t: pa.Table, where: str) -> pa.Table:
    """The rows DuckDB selects from the whole table, taken from it (Arrow types kept)."""
    import duckdb

    con = duckdb.connect()
    try:
        con.register("t", t.append_column("__row", pa.array(np.arange(t.num_rows))))
        rows = con.execute(f"SELECT __row FROM t WHERE {where}").fetchall()
    finally:
        con.close()
    return t.take(pa.array([r[0] for r in rows], pa.int64()))


@pytest.mark.parametrize("seed", range(4))
def test_rows_and_types_equal_a_full_read(files: list[tuple[Path, pa.Table]], seed: int
                                          ) -> None:
    rng = random.Random(seed)
    for path, table in files:
        ds = pqindex.dataset(path)
        for _ in range(12):
            w = rng.choice([*WORDS, "absent"])
            lit = "'" + w + "'"
            where = rng.choice([
                f"s = {lit}", f"s IN ({lit})", f"b = {lit}", f"{lit} = s",
                f"s = {lit} AND n > {rng.randrange(6000)}",
                f"s = {lit} AND b = {lit}",
                f"s = {lit} OR n < 10",  # not implied: decoded
                f"s IN ({lit}, 'b')",  # not implied
                f"NOT (s != {lit})",
                f"n = {rng.randrange(6000)}", f"i8 = {rng.randrange(-4, 5)} AND s = {lit}",
                f"u IN ({rng.randrange(6)})", "flag = true", "flag = false AND u = 1",
                f"i8 = {rng.randrange(-4, 5)} OR u = 2",  # not implied
            ])
            # DuckDB casts a literal to BLOB only from ASCII: encode() it.
            duck = where.replace(f"b = {lit}", f"b = encode({lit})")
            cols = rng.choice([None, ["s"], ["n", "s"], ["b", "f"], ["s", "b", "n"],
                               ["i8", "u", "flag"], ["n", "flag"]])
            got = ds.scan(columns=cols, where=where).to_table()
            want = _reference(table, duck).select(got.column_names)
            what = f"{path.name}: columns={cols} where {where}"
            assert got.schema == (ds.schema if cols is None else pa.schema([ds.schema.field(c) for c in cols])), what
            assert _rows(got) == _rows(want.cast(got.schema)), what


def _rows(t: pa.Table) -> list[Any]:
    return sorted(t.to_pylist(), key=repr)


def _bound(path: Path, where: str) -> Any:
    pf = ParquetFile.open(str(path))
    return bind(parse_where(where), pf.schema)


@pytest.mark.parametrize(("where", "implied"), [
    ("s = 'x'", {"s"}),
    ("s IN ('x')", {"s"}),
    ("s = 'x' AND n = 3", {"s", "n"}),
    ("s = 'x' AND b = 'y'", {"s", "b"}),
    ("s = 'x' OR n = 3", set()),
    ("s IN ('x', 'y')", set()),
    ("s != 'x'", set()),
    ("s > 'x'", set()),
    ("n = 3", {"n"}),
    ("n IN (3) AND s = 'x' AND u = 1", {"n", "s", "u"}),
    ("flag = true", {"flag"}),
    ("f = 0.0", set()),  # -0.0 equals 0.0: a float has two spellings of zero
])
def test_which_predicates_fix_a_value(files: list[tuple[Path, pa.Table]], where: str,
                                      implied: set[str]) -> None:
    path, _ = files[0]
    schema = pqindex.dataset(path).schema
    found = executor.implied_values(_bound(path, where), schema.names, schema)
    assert set(found) == implied
    for name, one in found.items():
        assert one.type == schema.field(name).type and len(one) == 1
    # Only fields that are returned.
    assert not executor.implied_values(_bound(path, where), ["f"], schema)


def test_the_fixed_column_is_not_decoded_for_output(
        files: list[tuple[Path, pa.Table]], monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    flat, field = executor.RowGroupReader.flat_fields, executor.RowGroupReader.field

    def flat_fields(self: Any, names: Any, rows: Any) -> Any:
        asked.extend(names)
        return flat(self, names, rows)

    def one_field(self: Any, name: str, rows: Any) -> Any:
        asked.append(name)
        return field(self, name, rows)

    monkeypatch.setattr(executor.RowGroupReader, "flat_fields", flat_fields)
    monkeypatch.setattr(executor.RowGroupReader, "field", one_field)
    for path, table in files:
        got = pqindex.dataset(path).to_table(columns=["s", "n"], where="s = 'rare'")
        want = table.filter(pc.equal(table["s"], "rare")).select(["s", "n"])
        assert got.sort_by("n").equals(want.cast(got.schema).sort_by("n"))
        assert got.num_rows > 0
    assert "n" in asked and "s" not in asked


def test_aggregates_count_only_matching_rows(files: list[tuple[Path, pa.Table]]) -> None:
    """Aggregates read a predicate's columns at rows not yet checked (the executor's
    ``read_row_group``): no value may be implied there."""
    for path, table in files:
        ds = pqindex.dataset(path)
        for where in ("s = 'x'", "n IN (7)", "flag = true AND u = 1"):
            got = ds.aggregate(["count(*)", "count(s)", "sum(n)"], where=where)
            want = _reference(table, where)
            assert got["count(*)"] == want.num_rows, (path.name, where)
            assert got["count(s)"] == pc.count(want["s"]).as_py()
            assert got["sum(n)"] == pc.sum(want["n"]).as_py()
