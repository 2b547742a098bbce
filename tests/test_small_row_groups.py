"""Lakes of small files: row groups no index narrows read whole by pyarrow and
filtered (``dataset._segments`` "sift", ``whole.iter_sifted_row_groups``), and the
open files a dataset keeps between scans bounded in bytes (``max_open_bytes``).

The reference is pyarrow alone: the files read whole with ``pyarrow.parquet`` and
filtered with a ``pyarrow.compute`` expression built from the same random
predicate as the SQL text pqindex gets. Every case also runs with the sifting
switched off, so both of pqindex's paths meet the reference.
"""

from __future__ import annotations

import importlib
import itertools
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
from pqindex.format.file import ParquetFile, chunk_range

# The module (``pqindex.dataset.dataset`` names the function).
dataset_mod = importlib.import_module("pqindex.dataset.dataset")
whole_mod = importlib.import_module("pqindex.scan.whole")
FILES = 12
ROWS = 900


def _table(seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = ROWS
    amount = rng.normal(0, 10, n)
    amount[rng.random(n) < 0.03] = np.nan
    null = rng.random(n) < 0.1
    return pa.table({
        "id": np.arange(seed * n, (seed + 1) * n, dtype=np.int64),
        "k": pa.array(rng.integers(0, 40, n), mask=null),
        "s": pa.array([f"v{x}" for x in rng.integers(0, 30, n)], mask=rng.random(n) < 0.05),
        "amount": amount,
        "flag": rng.random(n) < 0.5,
        "ts": pa.array(rng.integers(0, 10**9, n) * 1000, pa.timestamp("us")),
    })


def _write_lake(root: Path, seed: int) -> pa.Table:
    """FILES files in two hive partitions, each written with other options."""
    rng = np.random.default_rng(seed)
    parts = []
    for i in range(FILES):
        t = _table(seed * 100 + i)
        region = ("east", "west")[i % 2]
        d = root / f"region={region}"
        d.mkdir(parents=True, exist_ok=True)
        pq.write_table(
            t, d / f"part-{i:03d}.parquet",
            row_group_size=int(rng.choice([150, 300, 900])),
            data_page_size=int(rng.choice([512, 4096, 1 << 20])),
            compression=str(rng.choice(["snappy", "zstd", "none"])),
            use_dictionary=bool(rng.random() < 0.7),
            data_page_version=str(rng.choice(["1.0", "2.0"])),
            write_page_index=bool(rng.random() < 0.7),
        )
        parts.append(t.append_column("region", pa.array([region] * t.num_rows)))
    return pa.concat_tables(parts)


def _isin(name: str, values: list[Any]) -> Any:
    """SQL's IN, NULL for a NULL value (pyarrow's ``isin`` says False): an OR of
    equalities (Kleene logic)."""
    out = pc.field(name) == values[0]
    for v in values[1:]:
        out = out | (pc.field(name) == v)
    return out


@st.composite
def _predicates(draw: Any) -> tuple[str, Any]:
    """(SQL text, pyarrow expression) of one random predicate."""
    def leaf() -> tuple[str, Any]:
        kind = draw(st.sampled_from(["k", "k_in", "k_null", "s", "s_in", "amount", "flag",
                                     "region", "id"]))
        op = draw(st.sampled_from(["=", "!=", "<", ">="]))
        f = pc.field
        ops = {"=": lambda a, b: a == b, "!=": lambda a, b: a != b,
               "<": lambda a, b: a < b, ">=": lambda a, b: a >= b}
        if kind == "k":
            v = draw(st.integers(-1, 41))
            return f"k {op} {v}", ops[op](f("k"), v)
        if kind == "k_in":
            vs = draw(st.lists(st.integers(0, 45), min_size=1, max_size=4))
            return f"k IN ({', '.join(map(str, vs))})", _isin("k", vs)
        if kind == "k_null":
            return ("k IS NULL", f("k").is_null()) if draw(st.booleans()) else (
                "k IS NOT NULL", f("k").is_valid())
        if kind == "s":
            v = f"v{draw(st.integers(0, 32))}"
            return f"s {op} '{v}'", ops[op](f("s"), v)
        if kind == "s_in":
            vs = [f"v{x}" for x in draw(st.lists(st.integers(0, 32), min_size=1, max_size=3))]
            return f"s IN ({', '.join(repr(v) for v in vs)})", _isin("s", vs)
        if kind == "amount":
            v = draw(st.floats(-25, 25, allow_nan=False))
            return f"amount {op} {v!r}", ops[op](f("amount"), v)
        if kind == "flag":
            v = draw(st.booleans())
            return f"flag = {str(v).lower()}", f("flag") == v
        if kind == "region":
            v = draw(st.sampled_from(["east", "west", "north"]))
            return f"region = '{v}'", f("region") == v
        v = draw(st.integers(0, 3 * FILES * ROWS))
        return f"id {op} {v}", ops[op](f("id"), v)

    sql, expr = leaf()
    for _ in range(draw(st.integers(0, 2))):
        how = draw(st.sampled_from(["AND", "OR", "AND NOT"]))
        s2, e2 = leaf()
        if how == "AND":
            sql, expr = f"({sql}) AND ({s2})", expr & e2
        elif how == "OR":
            sql, expr = f"({sql}) OR ({s2})", expr | e2
        else:
            sql, expr = f"({sql}) AND NOT ({s2})", expr & ~e2
    return sql, expr


def _values(a: Any) -> list[Any]:
    """The values, NaN made comparable (NaN != NaN)."""
    return ["NaN" if isinstance(v, float) and v != v else v for v in a.to_pylist()]


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([("id", "ascending")])


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    root = tmp_path_factory.mktemp("small_lake")
    return root, _write_lake(root, 7)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pred=_predicates(), columns=st.sampled_from([
    ["id", "s", "amount"], ["id", "region", "k"], ["id", "ts", "flag", "amount"], None]))
def test_sifted_rows_equal_pyarrow(lake: tuple[Path, pa.Table], pred: tuple[str, Any],
                                   columns: list[str] | None) -> None:
    root, full = lake
    sql, expr = pred
    want = _sorted(full.filter(expr))
    if columns is not None:
        want = want.select(columns)
    for sift in (dataset_mod.SIFT_ROW_GROUP_BYTES, 0):
        old = dataset_mod.SIFT_ROW_GROUP_BYTES
        dataset_mod.SIFT_ROW_GROUP_BYTES = sift
        try:
            got = pqindex.dataset(str(root)).to_table(columns, where=sql)
        finally:
            dataset_mod.SIFT_ROW_GROUP_BYTES = old
        got = _sorted(got.select(want.column_names))
        assert got.num_rows == want.num_rows, (sql, sift)
        for name in want.column_names:
            g, w = got.column(name), want.column(name)
            if pa.types.is_dictionary(g.type):
                g = g.cast(g.type.value_type)
            if w.type != g.type:
                w = w.cast(g.type)
            assert _values(g) == _values(w), (sql, sift, name)


def _plan_kinds(path: Path, where: str, columns: list[str]) -> list[str]:
    ds = pqindex.dataset(str(path))
    plans = ds._plan(columns, dataset_mod._where(where, None))
    kinds = []
    for _df, of, plan, bound in plans.files:
        assert of is not None and plan is not None
        rgps = [r for r in plan.row_groups if not r.skipped]
        kinds += [kind for kind, group in dataset_mod._segments(of, rgps, columns, bound)
                  for _ in group]
    return kinds


def test_segments_choose_by_size_and_narrowing(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    n = 20_000
    t = pa.table({"id": np.arange(n, dtype=np.int64), "k": rng.integers(0, 50, n),
                  "pad": rng.random(n)})
    small = tmp_path / "small.parquet"
    pq.write_table(t, small, row_group_size=5_000, data_page_size=2048,
                   write_page_index=True)
    # Every row of every row group may match: small row groups are sifted.
    assert _plan_kinds(small, "k = 7", ["id", "pad"]) == ["sift"] * 4
    # The page index narrows id to a page: read in waves, page by page.
    assert _plan_kinds(small, "id = 123", ["id", "pad"]) == ["waves"]
    # Every row matches: read whole, no filter.
    assert _plan_kinds(small, "k >= 0", ["id"]) == ["whole"] * 4
    big = tmp_path / "big.parquet"
    pq.write_table(pa.concat_tables([t] * 5), big, row_group_size=5 * n,
                   write_page_index=True)
    # ~1.6 MB of id and pad in one row group: past the bound, read in waves.
    assert _plan_kinds(big, "k = 7", ["id", "pad"]) == ["waves"]
    old = dataset_mod.SIFT_ROW_GROUP_BYTES
    dataset_mod.SIFT_ROW_GROUP_BYTES = 64 << 20
    try:
        assert _plan_kinds(big, "k = 7", ["id", "pad"]) == ["sift"]
    finally:
        dataset_mod.SIFT_ROW_GROUP_BYTES = old


@pytest.mark.parametrize("source", ["image", "file object"])
def test_sifted_row_groups_are_read_once_per_file(tmp_path: Path, source: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A file's sifted row groups are fetched and decoded together: every byte of the
    columns read once (the dictionary pages planning read are not read again), and
    the report counts every page of them. pyarrow reads them from an image of the
    file, or (span too large, a writer whose chunks it reads past their end) through
    a file object over the fetched bytes."""
    if source == "file object":
        monkeypatch.setattr(whole_mod, "SIFT_IMAGE_BYTES", -1)
    images: list[Any] = []
    real_image = whole_mod._file_image
    monkeypatch.setattr(whole_mod, "_file_image",
                        lambda *a: images.append(real_image(*a)) or images[-1])
    for i in range(4):
        pq.write_table(_table(i), tmp_path / f"p{i}.parquet", row_group_size=300,
                       write_page_index=True)
    calls: list[list[int]] = []
    real = dataset_mod.iter_sifted_row_groups

    def spy(pf: Any, rgs: list[int], *a: Any, **k: Any) -> Any:
        calls.append(list(rgs))
        return real(pf, rgs, *a, **k)

    monkeypatch.setattr(dataset_mod, "iter_sifted_row_groups", spy)
    ds = pqindex.dataset(str(tmp_path))
    scan = ds.scan(["id", "amount"], where="s = 'v3'")
    got = scan.to_table()
    want = pq.read_table(tmp_path, columns=["id", "amount", "s"]).filter(
        pc.field("s") == "v3")
    assert sorted(got.column("id").to_pylist()) == sorted(want.column("id").to_pylist())
    assert sorted(len(c) for c in calls) == [3, 3, 3, 3]  # 3 row groups a file, one read
    assert len(images) == 4
    assert all((img is not None) == (source == "image") for img in images)
    rep = scan.report
    files = {str(p): ParquetFile.open(p) for p in sorted(tmp_path.glob("*.parquet"))}
    leaves = [c.index for c in next(iter(files.values())).schema.leaves
              if c.name in ("id", "amount", "s")]
    assert rep.pages_read == sum(pf.data_page_count(rg, c) for pf in files.values()
                                 for rg in range(pf.num_row_groups) for c in leaves)
    assert rep.rows_matched == got.num_rows
    for path, stats in ds.io_stats().items():
        spans = sorted(stats.trace)
        for (a, n), (b, _m) in itertools.pairwise(spans):
            assert b >= a + n, f"{path}: bytes from {b} read twice"
        pf = files[path]
        for rg in range(pf.num_row_groups):
            for c in leaves:
                lo, size = chunk_range(pf.column_meta(rg, c))
                covered = sum(max(0, min(a + n, lo + size) - max(a, lo)) for a, n in spans)
                assert covered == size  # every byte of the chunk was read


def test_open_files_are_bounded_between_scans(tmp_path: Path) -> None:
    full = []
    for i in range(30):
        t = _table(100 + i)
        pq.write_table(t, tmp_path / f"f{i:02d}.parquet", row_group_size=300,
                       write_page_index=True)
        full.append(t)
    ref = pa.concat_tables(full)
    ds = pqindex.dataset(str(tmp_path))
    ds.to_table(["id"], where="k = 3")
    assert len(ds._open) == 30  # well within the default bound: every file stays
    one = ParquetFile.open(tmp_path / "f00.parquet")
    assert one.retained_bytes() >= one.footer_length + 8
    ds.max_open_bytes = 3 * one.retained_bytes()
    requests = sum(s.requests for s in ds.io_stats().values())
    for i, k in enumerate((3, 5, 3, 9)):
        scan = ds.scan(["id", "s"], where=f"k = {k}")
        got = scan.to_table()
        want = ref.filter(pc.field("k") == k)
        assert sorted(got.column("id").to_pylist()) == sorted(want.column("id").to_pylist())
        # Dropped files are opened again; their counters go on where they stopped.
        assert len(ds._open) <= 4
        stats = ds.io_stats()
        assert len(stats) == 30
        total = sum(s.requests for s in stats.values())
        assert scan.report.requests == total - requests
        if i:
            assert total > requests  # dropped files' tails read again
        requests = total
    # The files a scan still reads are kept by the scan, not by the dataset.
    batches = ds.scan(["id"], where="k = 4").to_batches()
    first = next(iter(batches))
    ds.to_table(["id"], where="k = 5")  # drops files meanwhile
    rest = list(batches)
    n = sum(b.num_rows for b in [first, *rest])
    assert n == ref.filter(pc.field("k") == 4).num_rows


def test_old_parquet_mr_chunks_are_not_read_from_an_image() -> None:
    """pyarrow reads chunks of parquet-mr before 1.2.9 up to 100 bytes past their
    declared end (their dictionary page header was left out of the size): those
    files are not given an image holding only the declared bytes."""
    pads = whole_mod._pads_chunks
    assert pads("parquet-mr version 1.2.8 (build abc)")
    assert pads("parquet-mr version 1.0.0")
    assert not pads("parquet-mr version 1.2.9 (build abc)")
    assert not pads("parquet-mr version 1.10.0 (build 031a66)")
    assert not pads("parquet-cpp-arrow version 26.0.1")
    assert not pads(None)


def test_a_file_of_many_sifted_row_groups_is_decoded_in_bounded_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of at most ``SIFT_BATCH_BYTES`` of chunks, in order, every row group once
    (one alone when it is larger); the rows are pyarrow's."""
    pq.write_table(_table(5), tmp_path / "f.parquet", row_group_size=60)
    with ParquetFile.open(tmp_path / "f.parquet") as pf:
        leaves = [c.index for c in pf.schema.leaves if c.name in ("id", "s")]
        sizes = [sum(chunk_range(pf.column_meta(rg, c))[1] for c in leaves)
                 for rg in range(pf.num_row_groups)]
        bound = 3 * max(sizes)
        monkeypatch.setattr(whole_mod, "SIFT_BATCH_BYTES", bound)
        runs = whole_mod._sift_batches(pf, list(range(pf.num_row_groups)), leaves)
        assert [rg for run in runs for rg in run] == list(range(pf.num_row_groups))
        assert all(sum(sizes[rg] for rg in run) <= bound for run in runs)
        assert all(sum(sizes[rg] for rg in run) + sizes[nxt[0]] > bound
                   for run, nxt in itertools.pairwise(runs))
        monkeypatch.setattr(whole_mod, "SIFT_BATCH_BYTES", 1)
        assert whole_mod._sift_batches(pf, [0, 1, 2], leaves) == [[0], [1], [2]]
    calls: list[list[int]] = []
    real = whole_mod._read_sifted
    monkeypatch.setattr(whole_mod, "SIFT_BATCH_BYTES", bound)
    monkeypatch.setattr(whole_mod, "_read_sifted",
                        lambda pf, im, b, rgs, *rest: calls.append(list(rgs)) or real(pf, im, b, rgs, *rest))
    got = pqindex.dataset(str(tmp_path)).scan(["id"], where="s = 'v3'").to_table()
    want = pq.read_table(tmp_path / "f.parquet").filter(pc.field("s") == "v3")
    assert sorted(got.column("id").to_pylist()) == sorted(want.column("id").to_pylist())
    flat = [rg for c in calls for rg in c]  # those the dictionaries did not rule out
    assert len(calls) > 1 and flat == sorted(set(flat)) and len(flat) > len(sizes) // 2
    assert all(sum(sizes[rg] for rg in c) <= bound for c in calls)


def test_dictionary_hits_of_kept_evidence_are_worked_out_only_when_asked(
        tmp_path: Path) -> None:
    """A plan leaves the matching dictionary positions of a chunk whose evidence the
    file keeps unresolved: a sifted read never asks for them. Asked, they are the
    evidence's own answer, and kept from then on."""
    from pqindex.plan import planner

    pq.write_table(_table(2), tmp_path / "f.parquet", row_group_size=300)
    ds = pqindex.dataset(str(tmp_path))
    got = ds.scan(["id"], where="s = 'v3'").to_table()
    want = pq.read_table(tmp_path / "f.parquet").filter(pc.field("s") == "v3")
    assert sorted(got.column("id").to_pylist()) == sorted(want.column("id").to_pylist())
    (of,) = ds._open.values()
    pf = of.pf
    col = next(c.index for c in pf.schema.leaves if c.name == "s")
    lazy = [(rg, pf.derived[("dictionary_hits", rg, col)])
            for rg in range(pf.num_row_groups) if ("dictionary_hits", rg, col) in pf.derived]
    assert lazy and all(isinstance(h[1], planner._LazyHits) for _, h in lazy)
    for rg, (pred, hits, size) in lazy:
        assert planner._has_hits(pf, rg, col, pred)
        assert isinstance(pf.derived[("dictionary_hits", rg, col)][1], planner._LazyHits)
        found = planner.dictionary_hits(pf, rg, col, pred)
        assert found is not None
        want_ids = hits.evidence.hits(pred)
        assert want_ids is not None and found[0].tolist() == want_ids.tolist()
        assert found[1] == size == len(hits.evidence.entries)
        entries = hits.evidence.entries.to_pylist()
        assert [entries[i] for i in found[0]] == [b"v3"]  # the stored bytes
        assert pf.derived[("dictionary_hits", rg, col)][1] is found[0]  # kept resolved


def _dictionary_lake(root: Path, files: int, rare_in: set[int]) -> pa.Table:
    """``files`` small files of 4 dictionary-encoded row groups; ``s`` holds 'v0'..'v9'
    everywhere, and the value 'v5x' (inside their min/max: only a dictionary rules it
    out) in the files ``rare_in``."""
    parts = []
    for i in range(files):
        rng = np.random.default_rng(i)
        s = [f"v{x}" for x in rng.integers(0, 10, 400)]
        if i in rare_in:
            s[int(rng.integers(0, 400))] = "v5x"
        t = pa.table({"id": np.arange(i * 400, (i + 1) * 400, dtype=np.int64), "s": s})
        pq.write_table(t, root / f"part-{i:04d}.parquet", row_group_size=100)
        parts.append(t)
    return pa.concat_tables(parts)


def test_dictionaries_that_rule_nothing_out_are_no_longer_read(tmp_path: Path) -> None:
    """A plan stops consulting the dictionaries of small local files once the checked
    row groups show they rule (almost) nothing out, keeps consulting them while they
    do; rows are the same either way."""
    from pqindex.dataset.planning import DictionaryUse

    files = 80
    table = _dictionary_lake(tmp_path, files, rare_in={3, 41, 77})
    # 'v5' is in every row group: after the probe, dictionaries are left unread, except
    # for one file in RESAMPLE_FILES.
    sc = pqindex.dataset(tmp_path).scan(["id"], where="s = 'v5'")
    got = sc.to_table()
    assert got["id"].to_pylist() == pc.filter(table["id"], pc.equal(table["s"], "v5")).to_pylist()
    probe_files = DictionaryUse.PROBE_ROW_GROUPS // 4
    assert 0 < sc.report.dictionaries_unchecked <= 4 * (files - probe_files)
    assert sc.report.dictionaries_unchecked >= 4 * (files - probe_files) * 0.8
    assert sum(sc.report.row_groups_skipped.values()) == 0
    # 'v5x' is in 3 files: the dictionaries rule out nearly every row group, so every
    # one is consulted and only the rare value's row groups are read.
    sc = pqindex.dataset(tmp_path).scan(["id"], where="s = 'v5x'")
    got = sc.to_table()
    assert got["id"].to_pylist() == pc.filter(table["id"], pc.equal(table["s"], "v5x")).to_pylist()
    assert sc.report.dictionaries_unchecked == 0
    assert sc.report.row_groups_skipped["dictionary"] == 4 * files - 3
