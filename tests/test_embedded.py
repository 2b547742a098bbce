"""Embedded indexes end to end: planner, scanner, aggregates and statistics on
datasets of many small files written by ``pqindex.write_table``; damaged regions.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import random
import re
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.format.file import ParquetFile
from pqindex.indexes.base import Blob, Scope
from pqindex.indexes.region import HEADER_SIZE, REGION_KEY, TRAILER_SIZE, Region, encode_region
from pqindex.plan.planner import PlanOptions

FILES = 12
FILE_ROWS = 3_000
RG_ROWS = 1_000
PAGE_ROWS = 100
CATS = ["able", "baker", "charlie", "dog", "easy", "fox", "george", "how"]
ABSENT = "absent"  # able < absent < baker: min/max can't rule it out
RARE = "cobra"  # charlie < cobra < dog
RARE_AT = {2: [17, 18, 1_450], 9: [2_999]}  # file -> row positions holding RARE
NAN_AT = {1: [1_234, 1_235]}  # file -> rows where amount is NaN
BAND = 1_000  # z: each page's values lie in one band [b*BAND, (b+1)*BAND)
# z: each row group gets a random group of 10 bands, its pages a permutation of them
Z_GROUPS = np.random.default_rng(99).permutation(FILES * (FILE_ROWS // RG_ROWS))
Z_MAX = FILES * (FILE_ROWS // PAGE_ROWS) * BAND
DIFF_FILES = 4  # the differential test runs on the first files (time)
T0 = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
TAIL = 128 * 1024
INDEXES = {
    "distinct": ["cat", "x"],
    "bloom": ["user_id"],
    "zone_maps": ["amount", "id", "x", "z", "ts"],
    "hll": ["user_id", "cat"],
}


def make_file_table(f: int) -> pa.Table:
    rng = np.random.default_rng([2024, f])
    n = FILE_ROWS
    ids = np.arange(f * n, (f + 1) * n, dtype=np.int64)
    cats = np.array(CATS, dtype=object)[rng.integers(0, len(CATS), n)]
    for i in RARE_AT.get(f, []):
        cats[i] = RARE
    cat_mask = rng.random(n) < 0.02
    for i in RARE_AT.get(f, []):
        cat_mask[i] = False
    amount = np.round(rng.normal(0, 100, n), 3)
    for i in NAN_AT.get(f, []):
        amount[i] = np.nan
    amount_mask = rng.random(n) < 0.03
    x = rng.integers(0, 100, n) * 2  # even values only: odd ones are absent
    x_mask = rng.random(n) < 0.1
    per_rg = RG_ROWS // PAGE_ROWS
    bands = np.concatenate(
        [
            Z_GROUPS[f * (n // RG_ROWS) + r] * per_rg + rng.permutation(per_rg)
            for r in range(n // RG_ROWS)
        ]
    )  # unsorted, clustered by row group and page
    z = (np.repeat(bands, PAGE_ROWS) * BAND + rng.integers(0, BAND, n)).astype(np.int64)
    user_id = rng.integers(0, 20_000, n).astype(np.int64)
    raw = rng.integers(0, 256, (n, 16), dtype=np.uint8)
    payload = [bytes(r).hex() for r in raw]
    return pa.table(
        {
            "id": ids,
            "ts": pa.array(
                [T0 + dt.timedelta(seconds=int(i) * 7) for i in ids], pa.timestamp("us", tz="UTC")
            ),
            "cat": pa.array(list(cats), pa.string(), mask=cat_mask),
            "amount": pa.array(amount, mask=amount_mask),
            "x": pa.array(x, pa.int64(), mask=x_mask),
            "z": z,
            "user_id": user_id,
            "payload": pa.array(payload),
        }
    )


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("embedded")
    for f in range(FILES):
        pqindex.write_table(
            make_file_table(f),
            d / f"part-{f:03d}.parquet",
            sort_by="id",
            row_group_rows=RG_ROWS,
            page_rows=PAGE_ROWS,
            indexes=INDEXES,
        )
    return d


@pytest.fixture(scope="module")
def paths(data_dir: Path) -> list[Path]:
    return sorted(data_dir.glob("*.parquet"))


@pytest.fixture(scope="module")
def full(paths: list[Path]) -> pa.Table:
    return pa.concat_tables(pq.read_table(p) for p in paths)


def page_of(pf: ParquetFile, rg: int, col: int, row_in_rg: int) -> int:
    rows = pf.page_rows(rg, col)
    assert rows is not None
    starts = np.cumsum([0, *rows])
    return int(np.searchsorted(starts, row_in_rg, side="right") - 1)


# ---------------------------------------------------------------- skipping


@pytest.mark.parametrize("where", [f"cat = '{ABSENT}'", "x = 51", f"cat IN ('{ABSENT}', 'bz')"])
def test_absent_value_skips_every_file(data_dir: Path, paths: list[Path], where: str) -> None:
    # The region (~80 KiB here) does not fit the default 64 KiB tail prefetch, but its
    # directory and trailer (at its end, next to the footer) do: one request per file
    # either way. A tail large enough for page index + region + footer holds it all.
    ds = pqindex.dataset(str(data_dir), tail_bytes=TAIL)
    scan = ds.scan(where=where)
    t = scan.to_table()
    assert t.num_rows == 0
    rep = scan.report
    total_rgs = FILES * (FILE_ROWS // RG_ROWS)
    assert rep.row_groups_total == total_rgs
    assert dict(rep.row_groups_skipped) == {"embedded index": total_rgs}
    assert rep.files_read == 0 and rep.row_groups_read == 0
    assert rep.pages_read == 0 and rep.data_bytes == 0
    # per file: one request, the footer tail (which holds the region)
    assert rep.requests == FILES
    sizes = [p.stat().st_size for p in paths]
    assert all(s > TAIL for s in sizes)  # a tail is not the whole file
    assert rep.bytes_read == FILES * TAIL
    assert rep.warnings == []
    # with the default prefetch: the tail only (it holds the directory and the blobs
    # the planner uses), nothing else
    ds = pqindex.dataset(str(data_dir))
    scan = ds.scan(where=where)
    assert scan.to_table().num_rows == 0
    assert scan.report.requests == FILES
    assert scan.report.pages_read == 0 and scan.report.data_bytes == 0
    # the plan says so without reading anything
    assert "embedded index" in pqindex.dataset(str(data_dir)).explain(where=where)


@pytest.mark.parametrize("columns", [["cat"], ["id", "cat", "amount"], None])
def test_rare_value_reads_only_its_pages(
    data_dir: Path, paths: list[Path], full: pa.Table, columns: list[str] | None
) -> None:
    ds = pqindex.dataset(str(data_dir))
    scan = ds.scan(columns=columns, where=f"cat = '{RARE}'")
    t = scan.to_table()
    want_ids = sorted(f * FILE_ROWS + i for f, rows in RARE_AT.items() for i in rows)
    assert t.num_rows == len(want_ids)
    mask = pc.equal(full.column("cat"), RARE)
    ref = full.filter(mask)
    assert ref.column("id").to_pylist() == want_ids
    names = columns or full.schema.names
    assert t.select(names).equals(ref.select(names))
    # the pages that hold the value, from a full read of each file
    expected_pages = 0
    rg_with_value = 0
    for p in paths:
        values = pq.read_table(p, columns=["cat"]).column(0)
        where = np.flatnonzero(np.asarray(pc.fill_null(pc.equal(values, RARE), False)))
        if not len(where):
            continue
        with ParquetFile.open(str(p)) as pf:
            cols = [pf.schema.leaf(c) for c in set(names) | {"cat"}]
            rgs = set()
            for c in cols:
                assert c is not None
                pages = set()
                for row in where:
                    rg = int(row) // RG_ROWS
                    rgs.add(rg)
                    pages.add((rg, page_of(pf, rg, c.index, int(row) % RG_ROWS)))
                expected_pages += len(pages)
            rg_with_value += len(rgs)
    rep = scan.report
    assert rep.pages_read == expected_pages
    assert rep.row_groups_read == rg_with_value
    total_rgs = FILES * (FILE_ROWS // RG_ROWS)
    assert rep.row_groups_skipped["embedded index"] == total_rgs - rg_with_value
    assert rep.files_read == len(RARE_AT)


def test_rare_value_without_embedded_indexes_reads_more(data_dir: Path) -> None:
    """The control: pages with the rare value are found by page-scope distinct sets."""
    ds = pqindex.dataset(str(data_dir), plan_options=PlanOptions(embedded=False))
    scan = ds.scan(columns=["cat"], where=f"cat = '{RARE}'")
    assert scan.to_table().num_rows == sum(len(v) for v in RARE_AT.values())
    assert scan.report.pages_read > 4 * sum(len(v) for v in RARE_AT.values())


def _page_ranges(paths: list[Path], column: str) -> list[tuple[int, int, int, int, Any, Any]]:
    """(file, row group, page, rows, min, max) of every page of ``column``, from the data."""
    out = []
    for fi, p in enumerate(paths):
        values = pq.read_table(p, columns=[column]).column(0).to_numpy()
        with ParquetFile.open(str(p)) as pf:
            leaf = pf.schema.leaf(column)
            assert leaf is not None
            start = 0
            for rg in range(pf.num_row_groups):
                rows = pf.page_rows(rg, leaf.index)
                assert rows is not None
                for pg, n in enumerate(rows):
                    chunk = values[start : start + n]
                    out.append((fi, rg, pg, n, chunk.min(), chunk.max()))
                    start += n
    return out


@pytest.mark.parametrize("seed", range(6))
def test_zone_maps_prune_unsorted_column(
    data_dir: Path, paths: list[Path], full: pa.Table, seed: int
) -> None:
    rng = random.Random(seed)
    lo = rng.randrange(0, Z_MAX)
    hi = lo + rng.choice([0, 10, 500, 2_500, 20_000])
    where = f"z BETWEEN {lo} AND {hi}"
    pages = _page_ranges(paths, "z")
    want_pages = [p for p in pages if p[4] <= hi and p[5] >= lo]
    rg_bounds: dict[tuple[int, int], tuple[int, int]] = {}
    for fi, rg, _pg, _n, mn, mx in pages:
        a, b = rg_bounds.get((fi, rg), (mn, mx))
        rg_bounds[(fi, rg)] = (min(a, mn), max(b, mx))
    want_rgs = {k for k, (a, b) in rg_bounds.items() if a <= hi and b >= lo}
    assert len(want_rgs) < len(rg_bounds)
    ref = full.filter((pc.field("z") >= lo) & (pc.field("z") <= hi))

    # row groups: decided by the zone maps alone when footer statistics are off
    ds = pqindex.dataset(
        str(data_dir), plan_options=PlanOptions(statistics=False, page_index=False)
    )
    scan = ds.scan(columns=["id", "z"], where=where)
    t = scan.to_table()
    assert t.column("id").to_pylist() == ref.column("id").to_pylist()
    total_rgs = FILES * (FILE_ROWS // RG_ROWS)
    skipped = total_rgs - len(want_rgs)
    assert scan.report.row_groups_skipped.get("embedded index", 0) == skipped
    assert scan.report.row_groups_read == len(want_rgs)

    # pages: the plan reads exactly the pages whose values reach into the range
    ds = pqindex.dataset(str(data_dir))
    assert _planned_pages(ds, ["z"], where) == {p[:3] for p in want_pages}
    scan = ds.scan(columns=["z"], where=where)
    t = scan.to_table()
    assert t.column("z").to_pylist() == ref.column("z").to_pylist()
    assert scan.report.row_groups_read == len(want_rgs)
    # (pages_read may count a page twice: see test_pages_read_counts_each_page_once)
    assert len(want_pages) <= scan.report.pages_read <= 2 * len(want_pages)


def _planned_pages(ds: Any, columns: list[str], where: str) -> set[tuple[int, int, int]]:
    import json

    plan = json.loads(ds.explain(columns=columns, where=where, format="json"))
    out = set()
    for fi, f in enumerate(plan["files"]):
        for rg in f["row_groups"]:
            for r in rg["reads"]:
                # None: the whole chunk
                pages = r["pages"] if r["pages"] is not None else range(r["pages_total"])
                out |= {(fi, rg["row_group"], pg) for pg in pages}
    return out


def test_pages_read_counts_each_page_once(data_dir: Path, paths: list[Path]) -> None:
    rng = random.Random(0)
    lo = rng.randrange(0, Z_MAX)
    hi = lo + rng.choice([0, 10, 500, 2_500, 20_000])
    where = f"z BETWEEN {lo} AND {hi}"
    want = [p for p in _page_ranges(paths, "z") if p[4] <= hi and p[5] >= lo]
    inside = [p for p in want if lo <= p[4] and p[5] <= hi]
    assert 0 < len(inside) < len(want)  # some pages match whole, some partly
    scan = pqindex.dataset(str(data_dir)).scan(columns=["z"], where=where)
    scan.to_table()
    assert scan.report.pages_read == len(want)


def test_zone_maps_prune_float_column_with_nan(data_dir: Path, full: pa.Table) -> None:
    ds = pqindex.dataset(str(data_dir), plan_options=PlanOptions(statistics=False))
    for where, expr in [
        ("amount > 280", pc.field("amount") > 280),
        ("amount < -300 OR amount > 310", (pc.field("amount") < -300) | (pc.field("amount") > 310)),
        ("NOT (amount <= 250)", ~(pc.field("amount") <= 250)),
    ]:
        scan = ds.scan(columns=["id", "amount"], where=where)
        t = scan.to_table()
        ref = full.filter(expr)
        assert t.column("id").to_pylist() == ref.column("id").to_pylist(), where
        if "NOT" not in where:
            assert scan.report.row_groups_skipped.get("embedded index", 0) > 0, where


# ---------------------------------------------------------------- differential


class _Gen:
    """Random predicates as SQL text and as the equivalent pyarrow expression."""

    def __init__(self, rng: random.Random, full: pa.Table) -> None:
        self.rng = rng
        self.user_ids = full.column("user_id").to_pylist()[::97]
        self.max_id = DIFF_FILES * FILE_ROWS

    def literal(self, col: str) -> tuple[str, Any]:
        r = self.rng
        if col == "id":
            v = r.randrange(-10, self.max_id + 10)
            return str(v), v
        if col == "x":
            v = r.randrange(-4, 204)
            return str(v), v
        if col == "z":
            v = r.randrange(-100, Z_MAX + 100)
            return str(v), v
        if col == "user_id":
            v = r.choice(self.user_ids) if r.random() < 0.7 else r.randrange(0, 21_000)
            return str(v), v
        if col == "amount":
            f = r.choice([0.0, -0.0, 250.5, -250.5, round(r.uniform(-320, 320), 3)])
            return repr(f), f
        if col == "cat":
            s = r.choice([*CATS, ABSENT, RARE, "zzz", ""])
            return f"'{s}'", s
        if col == "ts":
            v = T0 + dt.timedelta(seconds=7 * r.randrange(-10, self.max_id + 10))
            text = v.strftime("%Y-%m-%d %H:%M:%S")
            return f"TIMESTAMP '{text}'", pa.scalar(v, pa.timestamp("us", tz="UTC"))
        raise AssertionError(col)

    def leaf(self) -> tuple[str, Any]:
        r = self.rng
        col = r.choice(["id", "x", "z", "user_id", "amount", "cat", "ts", "cat", "x"])
        f = pc.field(col)
        kind = r.random()
        if kind < 0.45:
            op = r.choice(["=", "!=", "<", "<=", ">", ">="])
            text, v = self.literal(col)
            expr = {
                "=": f == v,
                "!=": f != v,
                "<": f < v,
                "<=": f <= v,
                ">": f > v,
                ">=": f >= v,
            }[op]
            return f"{col} {op} {text}", expr
        if kind < 0.65:
            (ta, a), (tb, b) = self.literal(col), self.literal(col)
            return f"{col} BETWEEN {ta} AND {tb}", (f >= a) & (f <= b)
        if kind < 0.8 and col != "ts":
            lits = [self.literal(col) for _ in range(r.randrange(1, 5))]
            expr = None
            for _, v in lits:
                expr = (f == v) if expr is None else (expr | (f == v))
            neg = r.random() < 0.3
            text = f"{col} {'NOT IN' if neg else 'IN'} ({', '.join(t for t, _ in lits)})"
            return text, (~expr if neg else expr)
        if kind < 0.87 and col == "cat":
            prefix = r.choice(["b", "co", "c", "a", "ho", "zz"])
            return f"cat LIKE '{prefix}%'", pc.starts_with(f, pattern=prefix)
        if r.random() < 0.5:
            return f"{col} IS NULL", f.is_null()
        return f"{col} IS NOT NULL", f.is_valid()

    def tree(self, depth: int = 0) -> tuple[str, Any]:
        r = self.rng
        k = r.random()
        if depth >= 2 or k < 0.45:
            return self.leaf()
        if k < 0.9:
            (ta, a), (tb, b) = self.tree(depth + 1), self.tree(depth + 1)
            if r.random() < 0.5:
                return f"({ta} AND {tb})", a & b
            return f"({ta} OR {tb})", a | b
        t, e = self.tree(depth + 1)
        return f"NOT ({t})", ~e


def test_randomized_differential(paths: list[Path]) -> None:
    files = paths[:DIFF_FILES]
    full = pa.concat_tables(pq.read_table(p) for p in files)
    rng = random.Random(20240611)
    gen = _Gen(rng, full)
    ds = pqindex.dataset([str(p) for p in files])
    ids = full.column("id")
    nonempty = pruned = 0
    for i in range(300):
        where, expr = gen.tree()
        scan = ds.scan(columns=["id", "x"], where=where)
        got = scan.to_table()
        want = full.filter(expr)
        assert got.column("id").to_pylist() == want.column("id").to_pylist(), (i, where)
        assert got.column("x").equals(want.column("x")), (i, where)
        assert scan.report.warnings == [], (i, where)
        nonempty += got.num_rows > 0
        pruned += sum(scan.report.row_groups_skipped.values()) > 0
    assert len(ids) == DIFF_FILES * FILE_ROWS
    # the generator exercises both outcomes
    assert nonempty > 60 and pruned > 60


# ---------------------------------------------------------------- aggregates


AGGS = ["count(*)", "sum(amount)", "min(ts)", "max(ts)", "count(x)", "sum(id)", "min(cat)",
        "avg(id)", "avg(amount)"]


def _duckdb_aggregates(paths: list[Path], where: str) -> list[Any]:
    import duckdb

    files = ", ".join(f"'{p}'" for p in paths)
    sql = (
        "SELECT count(*), sum(amount), min(ts), max(ts), count(x), sum(id), min(cat), "
        "avg(id), avg(amount) "
        f"FROM read_parquet([{files}]) WHERE {where}"
    )
    con = duckdb.connect()
    try:
        row = con.execute(sql).fetchone()
    finally:
        con.close()
    assert row is not None
    return list(row)


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, dt.datetime):
        return a.astimezone(dt.UTC) == b.astimezone(dt.UTC)
    return bool(a == b)


def _rg_layout(paths: list[Path]) -> list[tuple[int, int, bool]]:
    """(first id, last id, amount has NaN) of every row group."""
    out = []
    for p in paths:
        t = pq.read_table(p, columns=["id", "amount"])
        for s in range(0, t.num_rows, RG_ROWS):
            part = t.slice(s, RG_ROWS)
            nan = bool(pc.any(pc.is_nan(part.column("amount"))).as_py())
            out.append((part.column("id")[0].as_py(), part.column("id")[-1].as_py(), nan))
    return out


def test_aggregates_match_duckdb(data_dir: Path, paths: list[Path]) -> None:
    rng = random.Random(7)
    total = FILES * FILE_ROWS
    layout = _rg_layout(paths)
    wheres = [
        "id BETWEEN 0 AND 1000000",
        f"id >= {RG_ROWS}",
        f"id < {5 * RG_ROWS}",
        "id BETWEEN 5000 AND 4000",
        f"id BETWEEN {RG_ROWS} AND {3 * RG_ROWS - 1}",
    ]
    for _ in range(40):
        a = rng.randrange(-50, total + 50)
        b = a + rng.choice([0, 1, 57, 999, 1_000, 4_321, 17_000, total])
        wheres.append(f"id BETWEEN {a} AND {b}")
    ds = pqindex.dataset(str(data_dir))
    for where in wheres:
        got = ds.aggregate(AGGS, where=where)
        want = _duckdb_aggregates(paths, where)
        for name, w in zip(AGGS, want, strict=True):
            assert _same(got[name], w), (where, name, got[name], w)
        # only the edge row groups (and row groups whose sum hides a NaN) are read
        m = re.fullmatch(r"id BETWEEN (-?\d+) AND (-?\d+)", where)
        if m is None:
            continue
        lo, hi = int(m.group(1)), int(m.group(2))
        rep = ds.last_aggregate_report
        partial = sum(
            1 for a_, b_, _ in layout if a_ <= hi and b_ >= lo and not (lo <= a_ and b_ <= hi)
        )
        inside = [nan for a_, b_, nan in layout if lo <= a_ and b_ <= hi]
        assert rep.row_groups_read == partial + sum(inside), where
        assert rep.row_groups_from_metadata == len(inside) - sum(inside), where
        assert rep.row_groups_skipped == len(layout) - partial - len(inside), where
        if len(inside) - sum(inside) > 0:
            assert rep.row_groups_from_metadata > 0


def test_aggregate_with_predicate_on_other_column(data_dir: Path, paths: list[Path]) -> None:
    ds = pqindex.dataset(str(data_dir))
    for where in ["cat = 'dog' AND id < 9000", "x IS NULL", f"cat = '{RARE}'", "z < 5000 OR x = 4"]:
        got = ds.aggregate(AGGS, where=where)
        want = _duckdb_aggregates(paths, where)
        for name, w in zip(AGGS, want, strict=True):
            assert _same(got[name], w), (where, name, got[name], w)


def test_statistics_hll_estimates(data_dir: Path, full: pa.Table) -> None:
    stats = pqindex.dataset(str(data_dir)).statistics()
    for col in ("user_id", "cat"):
        true = pc.count_distinct(full.column(col)).as_py()
        est = stats[col]["distinct_estimate"]
        assert est is not None, col
        assert abs(est - true) <= 0.05 * true, (col, est, true)
    assert stats["x"]["distinct_estimate"] is None  # no sketch
    assert stats["x"]["nulls"] == full.column("x").null_count
    assert stats["id"]["values"] == FILES * FILE_ROWS


# ---------------------------------------------------------------- damaged regions


def _region_location(path: Path) -> tuple[int, int]:
    with ParquetFile.open(str(path)) as pf:
        value = pf.key_value_metadata[REGION_KEY]
    assert value is not None
    off, length = value.split(":")
    return int(off), int(length)


def _parse_region(path: Path) -> Region:
    off, length = _region_location(path)
    data = path.read_bytes()
    region = Region.parse(
        data[off : off + length], file_size=len(data), region_offset=off, strict=True
    )
    return region


def _patch(path: Path, offset: int, new: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(new)


def _flip(path: Path, offset: int) -> None:
    b = path.read_bytes()[offset]
    _patch(path, offset, bytes([b ^ 0x5A]))


def _set_footer_value(path: Path, make: Callable[[int, int], str]) -> None:
    """Replace the footer's region location in place (same length, same footer size)."""
    off, length = _region_location(path)
    old = f"{off}:{length}".encode()
    new = make(off, length).encode()
    assert len(new) == len(old), (old, new)
    data = path.read_bytes()
    footer_len = struct.unpack("<I", data[-8:-4])[0]
    footer_start = len(data) - 8 - footer_len
    key_at = data.index(REGION_KEY.encode(), footer_start)
    at = data.index(old, key_at)
    _patch(path, at, new)


def _blob_entry(path: Path, kind: str, column: str, scope: Scope) -> Any:
    region = _parse_region(path)
    (entry, *_) = region.find(kind=kind, column=column, scope=scope)
    return entry


def _reseal_blob(path: Path, entry: Any, edit: Callable[[bytearray], None]) -> None:
    """Change a blob's bytes and fix its checksum and the directory's: malformed but
    internally consistent (what a buggy or newer writer would produce)."""
    off, length = _region_location(path)
    data = bytearray(path.read_bytes())
    start = off + entry.offset
    blob = bytearray(data[start : start + entry.length])
    edit(blob)
    assert len(blob) == entry.length
    data[start : start + entry.length] = blob
    # Re-encode the whole region with the edited blob: same lengths, same layout.
    region = _parse_region(path)
    blobs = [Blob(e.kind, e.column, e.scope, e.row_group, e.page,
                  bytes(data[off + e.offset : off + e.offset + e.length]), e.properties)
             for e in sorted(region.blobs, key=lambda e: e.offset)]
    assert [e.offset for e in sorted(region.blobs, key=lambda e: e.offset)] == list(
        itertools.accumulate([HEADER_SIZE] + [len(b.data) for b in blobs[:-1]]))
    encoded = encode_region(blobs)
    assert len(encoded) == length
    data[off : off + length] = encoded
    path.write_bytes(bytes(data))


def _damage(kind: str, path: Path) -> None:
    off, length = _region_location(path)
    trailer = off + length - TRAILER_SIZE  # dir length, dir XXH64, major, minor, magic
    if kind == "flip_magic":
        _flip(path, off + length - 1)
    elif kind == "flip_directory":
        _flip(path, trailer - 5)
    elif kind == "flip_directory_length":
        _patch(path, trailer, struct.pack("<I", 0xFFFF_FFF0))
    elif kind == "major_version":
        _patch(path, trailer + 12, struct.pack("<H", 9))
    elif kind == "flip_blob":
        e = _blob_entry(path, "distinct", "cat", Scope.FILE)
        _flip(path, off + e.offset + e.length // 2)
    elif kind == "flip_every_blob":
        region = _parse_region(path)
        for e in region.blobs:
            _flip(path, off + e.offset + e.length - 1)
    elif kind == "key_beyond_file":
        _set_footer_value(path, lambda o, n: f"{o}:{'9' * len(str(n))}")
    elif kind == "key_offset_zero":
        _set_footer_value(path, lambda o, n: f"{'0' * len(str(o))}:{n}")
    elif kind == "key_garbage":
        _set_footer_value(path, lambda o, n: "x" * len(f"{o}:{n}"))
    elif kind == "truncated_to_header":
        _set_footer_value(path, lambda o, n: f"{o}:{str(HEADER_SIZE + 4).zfill(len(str(n)))}")
    elif kind == "truncated_blobs":
        region = _parse_region(path)
        keep = min(e.offset for e in region.blobs) + 10  # header + a few blob bytes
        _set_footer_value(path, lambda o, n: f"{o}:{str(keep).zfill(len(str(n)))}")
    elif kind == "blob_body_version":
        e = _blob_entry(path, "distinct", "cat", Scope.FILE)
        _reseal_blob(path, e, lambda b: b.__setitem__(0, 99))
    elif kind == "blob_body_truncated_fields":
        e = _blob_entry(path, "distinct", "cat", Scope.FILE)

        def edit(b: bytearray) -> None:
            b[1:] = b"\xff" * (len(b) - 1)

        _reseal_blob(path, e, edit)
    else:
        raise AssertionError(kind)


DAMAGE = [
    "flip_magic",
    "flip_directory",
    "flip_directory_length",
    "major_version",
    "flip_blob",
    "flip_every_blob",
    "key_beyond_file",
    "key_offset_zero",
    "key_garbage",
    "truncated_to_header",
    "truncated_blobs",
]
# checksum-valid blobs whose body is malformed: refused when decoded
BODY_DAMAGE = ["blob_body_version", "blob_body_truncated_fields"]
QUERIES = [
    (f"cat = '{RARE}'", pc.field("cat") == RARE),
    (f"cat = '{ABSENT}'", pc.field("cat") == ABSENT),
    (
        "x = 51 OR z BETWEEN 5000 AND 5200",
        (pc.field("x") == 51) | ((pc.field("z") >= 5000) & (pc.field("z") <= 5200)),
    ),
    ("amount > 250", pc.field("amount") > 250),
]


@pytest.fixture
def damaged_dir(data_dir: Path, tmp_path: Path) -> Path:
    d = tmp_path / "ds"
    d.mkdir()
    for f in (1, 2, 3):  # file 2 holds the rare value
        shutil.copy(data_dir / f"part-{f:03d}.parquet", d / f"part-{f:03d}.parquet")
    return d


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_region_is_ignored(damaged_dir: Path, damage: str) -> None:
    victim = damaged_dir / "part-002.parquet"
    before = pq.read_table(victim)
    _damage(damage, victim)
    # other readers see the same file: the damage is invisible to them
    assert pq.read_table(victim).equals(before)
    full = pa.concat_tables(pq.read_table(p) for p in sorted(damaged_dir.glob("*.parquet")))
    for where, expr in QUERIES:
        ds = pqindex.dataset(str(damaged_dir))
        scan = ds.scan(where=where)
        got = scan.to_table()
        want = full.filter(expr)
        assert got.column("id").to_pylist() == want.column("id").to_pylist(), (damage, where)
        assert got.equals(want), (damage, where)
        ws = scan.report.warnings
        # One damaged blob (of `cat`) is found when `cat`'s entries are first used:
        # a query on other columns never validates or reads them.
        if damage != "flip_blob" or "cat" in where:
            assert any("part-002.parquet" in w and "embedded index" in w for w in ws), (
                damage,
                where,
                ws,
            )
        assert all("part-002.parquet" in w for w in ws), ws
    # the undamaged files still prune with their indexes
    ds = pqindex.dataset(str(damaged_dir))
    scan = ds.scan(where=f"cat = '{ABSENT}'")
    assert scan.to_table().num_rows == 0
    assert scan.report.row_groups_skipped["embedded index"] >= 6


@pytest.mark.parametrize("damage", BODY_DAMAGE)
def test_malformed_blob_body_is_skipped(damaged_dir: Path, damage: str) -> None:
    victim = damaged_dir / "part-002.parquet"
    _damage(damage, victim)
    full = pa.concat_tables(pq.read_table(p) for p in sorted(damaged_dir.glob("*.parquet")))
    ds = pqindex.dataset(str(damaged_dir))
    for where, expr in QUERIES:
        got = ds.scan(where=where).to_table()
        assert got.equals(full.filter(expr)), (damage, where)
    # the warning is recorded (it shows in the reports of later scans too)
    scan = ds.scan(where=f"cat = '{RARE}'")
    scan.to_table()
    assert any("part-002.parquet" in w and "cat" in w for w in scan.report.warnings)


@pytest.mark.parametrize("damage", BODY_DAMAGE)
def test_malformed_blob_body_warns_in_first_scan(damaged_dir: Path, damage: str) -> None:
    _damage(damage, damaged_dir / "part-002.parquet")
    scan = pqindex.dataset(str(damaged_dir)).scan(where=f"cat = '{RARE}'")
    scan.to_table()
    assert any("part-002.parquet" in w and "cat" in w for w in scan.report.warnings)


@pytest.mark.parametrize("damage", ["flip_every_blob", "blob_body_version"])
def test_damaged_region_aggregates_and_statistics(damaged_dir: Path, damage: str) -> None:
    victim = damaged_dir / "part-002.parquet"
    _damage(damage, victim)
    paths = sorted(damaged_dir.glob("*.parquet"))
    ds = pqindex.dataset(str(damaged_dir))
    where = f"id BETWEEN {FILE_ROWS + 10} AND {4 * FILE_ROWS - 10}"
    got = ds.aggregate(AGGS, where=where)
    want = _duckdb_aggregates(paths, where)
    for name, w in zip(AGGS, want, strict=True):
        assert _same(got[name], w), (damage, name, got[name], w)
    stats = ds.statistics()
    assert stats["id"]["values"] == 3 * FILE_ROWS


def _reseal_zone_map(path: Path) -> None:
    e = _blob_entry(path, "zone_maps", "amount", Scope.ROW_GROUP)
    _reseal_blob(path, e, lambda b: b.__setitem__(0, 99))


def test_malformed_zone_map_blob_aggregate(damaged_dir: Path) -> None:
    victim = damaged_dir / "part-002.parquet"
    _reseal_zone_map(victim)
    paths = sorted(damaged_dir.glob("*.parquet"))
    ds = pqindex.dataset(str(damaged_dir))
    where = f"id BETWEEN {FILE_ROWS} AND {4 * FILE_ROWS}"
    got = ds.aggregate(["sum(amount)", "count(*)"], where=where)
    want = _duckdb_aggregates(paths, where)
    assert _same(got["sum(amount)"], want[1]) and got["count(*)"] == want[0]


def test_malformed_distinct_blob_count_distinct(damaged_dir: Path) -> None:
    """A row group's distinct set that does not decode is not used: its values are
    read, the count equals DuckDB's, and the report says why."""
    import duckdb

    victim = damaged_dir / "part-002.parquet"
    e = _blob_entry(victim, "distinct", "cat", Scope.ROW_GROUP)
    _reseal_blob(victim, e, lambda b: b.__setitem__(0, 99))
    paths = sorted(damaged_dir.glob("*.parquet"))
    ds = pqindex.dataset(str(damaged_dir))
    got = ds.aggregate(["count(distinct cat)"])
    files = ", ".join(f"'{p}'" for p in paths)
    want = duckdb.sql(f"SELECT count(DISTINCT cat) FROM read_parquet([{files}])").fetchall()
    assert got["count(distinct cat)"] == want[0][0]
    rep = ds.last_aggregate_report
    assert rep.row_groups_from_metadata > 0 and rep.row_groups_read >= 1
    assert any("distinct blob for column 'cat'" in w for w in rep.warnings), rep.warnings


def test_malformed_hll_blob_statistics(damaged_dir: Path) -> None:
    victim = damaged_dir / "part-002.parquet"
    e = _blob_entry(victim, "hll", "user_id", Scope.FILE)
    _reseal_blob(victim, e, lambda b: b.__setitem__(0, 99))
    stats = pqindex.dataset(str(damaged_dir)).statistics()
    assert stats["user_id"]["values"] == 3 * FILE_ROWS


def test_scan_without_predicate_reads_no_region(data_dir: Path) -> None:
    ds = pqindex.dataset(str(data_dir))
    ds.explain(columns=["id"])
    assert sum(s.requests for s in ds.io_stats().values()) == FILES  # the tails only


def test_page_blob_answers_kept_per_file_give_the_same_scans(
    data_dir: Path, full: pa.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Warm queries reuse the page-scope answers of earlier ones (planner cache): the
    rows and the pages read stay those of the first scan, also when old answers are
    dropped for new ones (a tiny bound forces that)."""
    from pqindex.plan import pages

    monkeypatch.setattr(pages, "PAGE_BLOB_ANSWERS", 2)
    ds = pqindex.dataset(str(data_dir))
    wheres = {
        f"cat = '{RARE}'": pc.equal(full.column("cat"), RARE),
        f"cat = '{ABSENT}'": pc.equal(full.column("cat"), ABSENT),
        "cat = 'dog'": pc.equal(full.column("cat"), "dog"),
        "x = 40": pc.equal(full.column("x"), 40),
        f"cat IN ('{RARE}', 'fox')": pc.is_in(full.column("cat"), pa.array([RARE, "fox"])),
    }
    for _round in range(2):
        for where, mask in wheres.items():
            first = ds.scan(columns=["id", "cat", "x"], where=where)
            t1 = first.to_table()
            again = ds.scan(columns=["id", "cat", "x"], where=where)
            t2 = again.to_table()
            ref = full.filter(pc.fill_null(mask, False)).select(["id", "cat", "x"])
            assert t1.sort_by("id").equals(ref.sort_by("id")), where
            assert t2.sort_by("id").equals(ref.sort_by("id")), where
            assert again.report.pages_read == first.report.pages_read, where
    kept = [of.pf.derived.get("page_blob_answers") for of in ds._open.values()]
    assert any(kept)  # the scans used (and kept) page-scope answers
    assert all(len(k or {}) <= 2 for k in kept)
