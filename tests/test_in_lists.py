"""IN / NOT IN lists of 0 to 5,000 values, pqindex against a full pyarrow read
filtered in Python.

Two files in one directory, one with dictionaries, one PLAIN, both with Bloom
filters on some columns and small pages and a page index (a sorted column gives an ordered one, so
the page level bisects). Random lists over every column type mix values present
in the column, duplicates, NULLs, values out of the column's range and literals of
another type (ints and floats against decimals, ISO strings against dates,
strings against binary). The reference is SQL's: ``x IN (...)`` holds when x
equals a listed value (NULLs in the list never match, NaN equals nothing, -0.0
equals 0.0); ``x NOT IN (...)`` when x is not NULL, no listed value is NULL and
none equals it. The same lists go through ``col().isin()``, SQL text and DNF
``filters``.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.expr.nodes import Literal, literal_list, literal_sql

N = 2_000  # rows per file
SIZES = (0, 1, 20, 5_000)
COLUMNS = ("srt", "i8", "u32", "i64", "f64", "dec", "s", "b", "d")
START = dt.date(2020, 1, 1)


def _table(offset: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    i = np.arange(N)

    def nulls(every: int) -> np.ndarray:
        return (i % every) == 3

    f64 = rng.integers(-50, 50, N).astype(np.float64) / 4
    f64[i % 23 == 5] = math.nan
    f64[i % 31 == 7] = -0.0
    return pa.table({
        "rid": pa.array(i + offset, pa.int64()),
        "srt": pa.array((i + offset) // 3, pa.int64()),
        "i8": pa.array(rng.integers(-128, 128, N), pa.int8(), mask=nulls(11)),
        "u32": pa.array(rng.integers(2**31 - 200, 2**31 + 200, N), pa.uint32()),
        "i64": pa.array(rng.integers(-5_000, 5_000, N), pa.int64(), mask=nulls(13)),
        "f64": pa.array(f64, pa.float64(), mask=nulls(17)),
        "dec": pa.array([Decimal(int(x)).scaleb(-2) for x in rng.integers(-3_000, 3_000, N)],
                        pa.decimal128(9, 2), mask=nulls(7)),
        "s": pa.array([f"k{x:05d}" for x in rng.integers(0, 4_000, N)], pa.string(),
                      mask=nulls(19)),
        "b": pa.array([f"b{x:03d}".encode() for x in rng.integers(0, 600, N)], pa.binary()),
        "d": pa.array([START + dt.timedelta(days=int(x)) for x in rng.integers(0, 900, N)],
                      pa.date32(), mask=nulls(29)),
    })


Lake = tuple[Path, dict[int, dict[str, Any]], dict[str, list[Any]]]


def _edges(path: Path, table: pa.Table) -> dict[str, list[Any]]:
    """Per column, the values at the first and last row of every page (where the
    bounds of pages and row groups lie: an off-by-one in pruning shows there)."""
    pf = pqindex.ParquetFile.open(str(path))
    out: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    for rg in range(pf.num_row_groups):
        base = sum(pf.row_group_rows(g) for g in range(rg))
        for col, name in enumerate(table.column_names):
            oi = pf.offset_index(rg, col)
            if name not in out or oi is None:
                continue
            firsts = [loc.first_row_index for loc in oi.page_locations]
            lasts = [f - 1 for f in firsts[1:]] + [pf.row_group_rows(rg) - 1]
            values = table.column(name)
            out[name] += [values[base + r].as_py() for r in firsts + lasts]
    return {c: [v for v in vs if v is not None] for c, vs in out.items()}


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    root = tmp_path_factory.mktemp("in_lists")
    a, b = _table(0, 1), _table(N, 2)
    pq.write_table(a, root / "a.parquet", row_group_size=700, data_page_size=512,
                   write_page_index=True,
                   bloom_filter_options={"i64": {"ndv": N}, "s": {"ndv": N}, "d": {"ndv": N}})
    pq.write_table(b, root / "b.parquet", row_group_size=700, data_page_size=512,
                   write_page_index=True, use_dictionary=False,
                   bloom_filter_options={"i64": {"ndv": N}, "s": {"ndv": N}, "d": {"ndv": N},
                                         "u32": {"ndv": N}})
    rows = {r["rid"]: r for t in (a, b) for r in t.to_pylist()}
    edges = _edges(root / "a.parquet", a)
    for c, vs in _edges(root / "b.parquet", b).items():
        edges[c] += vs
    return root, rows, edges


def _candidates(rng: np.random.Generator, column: str, rows: dict[int, dict[str, Any]]
                ) -> list[Any]:
    """Values present in the column, out of its range, and of other literal types."""
    present = [r[column] for r in rows.values() if r[column] is not None]
    if column in ("srt", "i8", "u32", "i64"):
        lo, hi = min(present), max(present)
        other = [lo - 1, hi + 1, -(2**70), 2**70, 300, -129, 2**32, 2**31 - 201]
        other += [float(v) for v in present[:5]] + [present[0] + 0.5, Decimal(present[1])]
    elif column == "f64":
        other = [0.0, -0.0, math.nan, math.inf, 1e300, 3, Decimal("0.25"), 0.1]
    elif column == "dec":
        other = [int(present[0]), float(present[1]), Decimal("1.005"), Decimal("0.1"),
                 Decimal("9999999.99"), Decimal("-9999999.99"), 10**9, 0.1, 0]
    elif column == "s":
        other = ["", "k", "zzz", "k0001", "K00010", "k000100"]
    elif column == "b":
        other = [b"", b"b", b"b9999", "b001", "b599"]  # str literals compare as UTF-8
    else:
        other = [START - dt.timedelta(days=1), dt.date(1900, 1, 1), "2020-01-05",
                 (START + dt.timedelta(days=3)).isoformat()]
    pool = present + other * 20
    return [pool[j] for j in rng.integers(0, len(pool), 5_000)]


def _normalized(literal: Any, column: str) -> Any:
    """The literal as the value it equals in the column's Python domain (Python's
    numeric equality and hashing are exact across int, float and Decimal); None
    when it equals no value."""
    if column == "f64":
        literal = float(literal)  # a DOUBLE column compares with the literal as a double
    elif column == "b" and isinstance(literal, str):
        literal = literal.encode()
    elif column == "d" and isinstance(literal, str):
        literal = dt.date.fromisoformat(literal)
    if isinstance(literal, float) and math.isnan(literal):
        return None  # NaN equals nothing, itself included
    return literal


def _expected(rows: dict[int, dict[str, Any]], column: str, values: list[Any],
              negated: bool) -> set[int]:
    listed = {_normalized(v, column) for v in values if v is not None} - {None}
    has_null = any(v is None for v in values)
    out = set()
    for rid, r in rows.items():
        x = r[column]
        if x is None:
            continue
        found = not (isinstance(x, float) and math.isnan(x)) and x in listed
        if negated:
            if not found and not has_null:
                out.add(rid)
        elif found:
            out.add(rid)
    return out


def _draw(seed: int, column: str, size: int, lake: Lake) -> list[Any]:
    _, rows, edges = lake
    rng = np.random.default_rng([seed, size, COLUMNS.index(column)])
    pool = _candidates(rng, column, rows)
    if size <= 20 and seed % 2:  # short lists: values at page bounds, from one file
        pool = edges[column] + [pool[0]]
    values = [pool[j] for j in rng.integers(0, len(pool), size)] if size else []
    if size and rng.random() < 0.3:
        values[int(rng.integers(0, size))] = None
    if size > 1:
        values += values[: size // 4]  # duplicates
    return values


def _rids(table: pa.Table) -> set[int]:
    return set(table.column("rid").to_pylist())


@pytest.mark.parametrize("column", COLUMNS)
def test_isin_matches_a_full_read(lake: Lake,
                                  column: str) -> None:
    root, rows, _ = lake
    ds = pqindex.dataset(root)
    for size in SIZES:
        for seed in range(6 if size <= 20 else 2):
            values = _draw(seed, column, size, lake)
            for negated in (False, True):
                expr = pqindex.col(column).isin(values)
                if negated:
                    expr = ~expr
                got = _rids(ds.to_table(["rid"], expr))
                want = _expected(rows, column, values, negated)
                assert got == want, (column, size, seed, negated, len(got), len(want))


@pytest.mark.parametrize("column", ["i64", "s", "dec", "d"])
def test_sql_and_filters_agree(lake: Lake,
                               column: str) -> None:
    root, rows, _ = lake
    ds = pqindex.dataset(root)
    for seed in range(3):
        values = [v for v in _draw(seed, column, 20, lake) if not isinstance(v, float)]
        sql_list = ", ".join(literal_sql(v) for v in values)
        want = _expected(rows, column, values, False)
        assert _rids(ds.to_table(["rid"], f"{column} IN ({sql_list})")) == want
        assert _rids(ds.to_table(["rid"], f"{column} NOT IN ({sql_list})")) == \
            _expected(rows, column, values, True)
        assert _rids(ds.to_table(["rid"], filters=[(column, "in", values)])) == want


def test_numpy_and_arrow_lists(lake: Lake) -> None:
    root, rows, _ = lake
    ds = pqindex.dataset(root)
    keys = np.arange(-100, 3_000, 7, dtype=np.int32)
    want = _expected(rows, "i64", keys.tolist(), False)
    assert _rids(ds.to_table(["rid"], pqindex.col("i64").isin(keys))) == want
    assert _rids(ds.to_table(["rid"], pqindex.col("i64").isin(pa.array(keys)))) == want
    floats = np.array([0.0, 0.25, -1.5, math.nan] * 3)
    assert _rids(ds.to_table(["rid"], pqindex.col("f64").isin(floats))) == \
        _expected(rows, "f64", floats.tolist(), False)


def test_literal_list_keeps_each_type() -> None:
    """The list-at-once path gives the literals value by value would (types kept:
    True is not 1, 1.0 is not 1)."""
    for values in ([1, 2, 3, 4, 5, 6, 7, 8, 9], [1.0] * 9, ["a"] * 9, [True] * 9,
                   [1, 2.0, 3, 4, 5, 6, 7, 8, 9], np.arange(9, dtype=np.int8),
                   np.linspace(0, 1, 9), np.array([2**63 - 1] * 9, dtype=np.uint64)):
        got = literal_list(values)
        each = tuple(Literal(v.item() if hasattr(v, "item") else v) for v in values)
        assert got == each
        assert [type(x.value) for x in got] == [type(x.value) for x in each]


def test_out_of_range_list_reads_no_page(lake: Lake
                                         ) -> None:
    """5,000 keys beyond every file's range: the statistics rule every row group out."""
    root, _, _ = lake
    scan = pqindex.dataset(root).scan(["rid"], pqindex.col("srt").isin(range(10**6, 10**6 + 5_000)))
    assert scan.to_table().num_rows == 0
    assert scan.report.pages_read == 0


def test_bloom_lookup_of_many_hashes() -> None:
    """``might_contain_any`` answers as ``might_contain_hash`` of each hash would."""
    from pqindex.format.bloom import BloomFilter

    rng = np.random.default_rng(3)
    bits = BloomFilter.empty(1024)
    inserted = rng.integers(0, 2**63, 300, dtype=np.uint64)
    for h in inserted[:150]:
        BloomFilter.insert_hash(bits, int(h))
    bloom = BloomFilter(None, bytes(bits))  # type: ignore[arg-type]
    for _ in range(300):
        hashes = rng.integers(0, 2**64 - 1, int(rng.integers(0, 6)), dtype=np.uint64)
        if rng.random() < 0.3:
            hashes = np.append(hashes, inserted[rng.integers(0, 300)])
        want = any(bloom.might_contain_hash(int(h)) for h in hashes)
        assert bloom.might_contain_any(hashes) == want


def test_long_list_against_a_manifest(tmp_path: Path) -> None:
    """Over a columnar manifest the file stage searches each file's [min, max] in the
    sorted keys: files holding a listed key (at their bounds too) are kept, the
    others are not opened."""
    from pqindex.dataset.manifest import write_manifest

    files, rows = 40, 50
    for f in range(files):
        ids = np.arange(f * 100, f * 100 + rows, dtype=np.int64)  # gaps between files
        pq.write_table(pa.table({"id": ids}), tmp_path / f"part-{f:03d}.parquet")
    write_manifest(tmp_path)
    rng = np.random.default_rng(5)
    # A third of the files by their min alone, a third by their max alone.
    edges = [f * 100 + (0 if f % 3 == 0 else rows - 1) for f in range(files) if f % 3 < 2]
    gaps = rng.integers(0, files * 100, 300)
    keys = edges + [int(g) for g in gaps if g % 100 >= rows]  # bounds, and absent keys
    ds = pqindex.dataset(tmp_path)
    got = ds.to_table(["id"], pqindex.col("id").isin(keys))
    assert sorted(got.column("id").to_pylist()) == sorted(set(edges))
    opened = [p for p, st in ds.io_stats().items() if st.requests]
    assert len(opened) == len(edges)
