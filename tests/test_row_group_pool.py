"""One file's row groups decode on a process-wide pool: scans share its threads
instead of starting their own, and concurrent scans on it stay correct. Row groups
cheaper than the hand-off stay on the calling thread (``pools.spread``)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex import pools

# The page-by-page flow's machinery, on small files: none of their row groups is
# read whole and filtered instead (conftest.page_by_page).
pytestmark = pytest.mark.usefixtures("page_by_page")

PREFIX = "pqindex-rowgroups"


@pytest.fixture(autouse=True)
def _hand_off_always(monkeypatch: pytest.MonkeyPatch) -> None:
    """These row groups take well under the hand-off time: force them onto the pool."""
    monkeypatch.setattr(pools, "HAND_OFF_SECONDS", 0.0)


def _pool_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(PREFIX)]


@pytest.fixture(scope="module")
def table_path(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    rng = np.random.default_rng(7)
    n = 60_000
    table = pa.table({
        "id": np.arange(n, dtype=np.int64),
        "cat": pa.array(rng.choice(["a", "b", "c", "rare"], n, p=[0.4, 0.4, 0.1999, 0.0001])),
        "v": rng.normal(size=n),
    })
    path = tmp_path_factory.mktemp("pool") / "t.parquet"
    pq.write_table(table, path, row_group_size=7_500, data_page_size=4096,
                   write_page_index=True)
    return path, table


def _expected(table: pa.Table, mask: pa.ChunkedArray) -> list[int]:
    return sorted(table.filter(mask).column("id").to_pylist())


def test_scans_share_the_pool_threads(table_path: tuple[Path, pa.Table]) -> None:
    path, table = table_path
    before = {t.ident for t in _pool_threads()}  # pools of other sizes, other tests
    for _ in range(6):
        got = pqindex.dataset(path, max_workers=3).scan(where="cat = 'c'",
                                                        columns=["id"]).to_table()
        assert sorted(got.column("id").to_pylist()) == _expected(
            table, pc.equal(table["cat"], "c"))
    new = {t.ident for t in _pool_threads()} - before
    # Six scans of 8 row groups ran on one pool of at most 3 threads, still alive.
    assert 1 <= len(new) <= 3


def test_concurrent_scans_on_the_shared_pool(table_path: tuple[Path, pa.Table]) -> None:
    path, table = table_path
    ds = pqindex.dataset(path, max_workers=2)
    cases = [
        ("cat = 'rare'", pc.equal(table["cat"], "rare")),
        ("cat = 'c' AND v > 1", pc.and_(pc.equal(table["cat"], "c"), pc.greater(table["v"], 1))),
        ("id BETWEEN 100 AND 40000", pc.and_(pc.greater_equal(table["id"], 100),
                                             pc.less_equal(table["id"], 40_000))),
        ("v < -2", pc.less(table["v"], -2)),
    ]

    def one(i: int) -> bool:
        where, mask = cases[i % len(cases)]
        # Half the scans on the shared dataset, half on fresh ones.
        d = ds if i % 2 else pqindex.dataset(path, max_workers=2)
        got = d.scan(where=where, columns=["id"]).to_table()
        return sorted(got.column("id").to_pylist()) == _expected(table, mask)

    with ThreadPoolExecutor(6) as outer:
        assert all(outer.map(one, range(24)))
    assert _pool_threads()


def test_pool_threads_do_not_grow_with_scans(table_path: tuple[Path, pa.Table]) -> None:
    path, _ = table_path
    for _ in range(3):
        pqindex.dataset(path, max_workers=4).scan(where="v > 0", columns=["id"]).to_table()
    before = len(_pool_threads())
    for _ in range(10):
        pqindex.dataset(path, max_workers=4).scan(where="v > 0", columns=["id"]).to_table()
    assert len(_pool_threads()) == before


def test_cheap_row_groups_stay_on_the_calling_thread(
        table_path: tuple[Path, pa.Table], monkeypatch: pytest.MonkeyPatch) -> None:
    path, table = table_path
    monkeypatch.setattr(pools, "HAND_OFF_SECONDS", 3600.0)
    before = {t.ident for t in _pool_threads()}
    # A pool size no other test uses: any thread of it would be this scan's.
    got = pqindex.dataset(path, max_workers=5).scan(where="cat = 'rare'",
                                                    columns=["id", "v"]).to_table()
    assert sorted(got.column("id").to_pylist()) == _expected(
        table, pc.equal(table["cat"], "rare"))
    assert got.num_rows > 0
    assert {t.ident for t in _pool_threads()} == before


def test_spread_keeps_order_and_hands_off_slow_items(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[int]] = []

    def recording_map(fn: Callable[[int], int], items: Iterable[int]) -> list[int]:
        got = list(items)
        calls.append(got)
        return [fn(x) for x in got]

    def square(x: int) -> int:
        return x * x

    items = list(range(7))
    # Builtin map: every item here, in order.
    assert pools.spread(square, items, map) == [x * x for x in items]
    # Cheap items: never handed off.
    monkeypatch.setattr(pools, "HAND_OFF_SECONDS", 3600.0)
    assert pools.spread(square, items, recording_map) == [x * x for x in items]
    assert calls == []
    # Slow items: the first runs here, the rest go to the map in one call.
    monkeypatch.setattr(pools, "HAND_OFF_SECONDS", 0.0)
    assert pools.spread(square, items, recording_map) == [x * x for x in items]
    assert calls == [items[1:]]
    # Nothing left after the last item: no hand-off.
    calls.clear()
    assert pools.spread(square, [3], recording_map) == [9]
    assert calls == []
    # Known costly: every item to the map, none here first.
    monkeypatch.setattr(pools, "HAND_OFF_SECONDS", 3600.0)
    assert pools.spread(square, items, recording_map, costly=True) == [x * x for x in items]
    assert calls == [items]


def test_spread_raises_the_items_error() -> None:
    def boom(x: int) -> int:
        if x == 4:
            raise ValueError("item 4")
        return x

    pool = ThreadPoolExecutor(2)
    try:
        with pytest.raises(ValueError, match="item 4"):
            pools.spread(boom, list(range(8)), pool.map)
    finally:
        pool.shutdown()


def test_costly_predicates_go_to_the_pool_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Row groups whose predicate column averages over 1 MiB are handed off without
    a first one timed on the calling thread (which would leave a core idle)."""
    monkeypatch.setattr(pools, "HAND_OFF_SECONDS", 3600.0)
    rng = np.random.default_rng(11)
    n = 600_000
    uid = rng.integers(0, 10**12, n)
    table = pa.table({"id": np.arange(n, dtype=np.int64), "uid": uid})
    path = tmp_path / "uid.parquet"
    pq.write_table(table, path, row_group_size=200_000, use_dictionary=False,
                   compression="none", write_page_index=True)
    before = {t.ident for t in _pool_threads()}
    target = int(uid[123_456])
    got = pqindex.dataset(path, max_workers=6).scan(where=f"uid = {target}",
                                                    columns=["id"]).to_table()
    assert got.column("id").to_pylist() == np.flatnonzero(uid == target).tolist()
    assert {t.ident for t in _pool_threads()} - before


def test_local_row_groups_get_one_thread_per_core(table_path: tuple[Path, pa.Table]) -> None:
    """A local file's row groups are CPU work: by default one pool thread per core
    decodes them (more contend for the cores and the GIL); files in flight and an
    explicit ``max_workers`` are unchanged."""
    path, _ = table_path
    cores = os.cpu_count() or 2
    ds = pqindex.dataset(path)
    assert ds.rowgroup_workers == min(8, cores)
    assert ds.max_workers == min(8, 2 * cores)
    assert pqindex.dataset(path, max_workers=3).rowgroup_workers == 3


def _zstd_rare(tmp_path: Path, codec: str) -> tuple[Path, pa.Table]:
    rng = np.random.default_rng(5)
    n, per = 400_000, 100_000
    cat = np.full(n, "common", dtype=object)
    rare = np.sort(rng.choice(n, 12, replace=False))
    cat[rare] = "rare"
    table = pa.table({"id": np.arange(n, dtype=np.int64), "cat": pa.array(cat),
                      "v": rng.normal(size=n)})
    path = tmp_path / f"rare-{codec}.parquet"
    pq.write_table(table, path, row_group_size=per, use_dictionary=["cat"],
                   compression=codec, data_page_size=160_000, write_page_index=True)
    return path, table


@pytest.mark.parametrize("codec", ["zstd", "snappy"])
def test_zstd_projection_goes_to_the_pool_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str) -> None:
    """A few rows of zstd pages are decompressed whole (~1 ms a MiB, the GIL released):
    the row groups' projections go to the pool at once, each keeping its columns on
    its thread. Snappy's few values are gathered cheaply: they stay here."""
    from pqindex.scan import batch, executor
    from pqindex.scan.whole import side_by_side as real

    monkeypatch.setattr(pools, "HAND_OFF_SECONDS", 3600.0)
    aside: list[int] = []

    def recording(jobs: Any) -> Any:
        aside.append(len(jobs))
        return real(jobs)

    monkeypatch.setattr(executor, "side_by_side", recording)
    monkeypatch.setattr(executor, "_SIDE_BY_SIDE_BYTES", 1)  # any column worth a thread
    monkeypatch.setattr(batch, "_CORES", 2)  # 4 row groups fill them, on any machine
    path, table = _zstd_rare(tmp_path, codec)
    before = {t.ident for t in _pool_threads()}
    got = pqindex.dataset(path, max_workers=7).scan(where="cat = 'rare'",
                                                    columns=["id", "v"]).to_table()
    want = table.filter(pc.equal(table["cat"], "rare")).select(["id", "v"])
    assert got.equals(want)
    handed_off = bool({t.ident for t in _pool_threads()} - before)
    if codec == "zstd":
        assert handed_off and not aside
    else:
        assert not handed_off


@pytest.mark.parametrize("codec", ["zstd", "snappy"])
def test_zstd_predicate_chunks_go_to_the_pool_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str) -> None:
    """A predicate column of ~800 KB a row group, stored: under the 1 MiB that makes
    its evaluation worth a thread by size, but zstd pages decompress whole with the
    GIL released (~1 ms a MiB): those row groups go to the pool at once. Snappy's
    decompress in microseconds: they stay here."""
    monkeypatch.setattr(pools, "HAND_OFF_SECONDS", 3600.0)
    rng = np.random.default_rng(3)
    n = 400_000
    uid = rng.integers(0, 10**15, n)
    table = pa.table({"id": np.arange(n, dtype=np.int64), "uid": uid})
    path = tmp_path / f"uid-{codec}.parquet"
    pq.write_table(table, path, row_group_size=100_000, use_dictionary=False,
                   compression=codec, write_page_index=True)
    meta = pq.ParquetFile(path).metadata.row_group(0).column(1)
    assert meta.total_uncompressed_size > 512 << 10 and meta.total_compressed_size < 1 << 20
    before = {t.ident for t in _pool_threads()}
    target = int(uid[234_567])
    got = pqindex.dataset(path, max_workers=5).scan(where=f"uid = {target}",
                                                    columns=["id"]).to_table()
    assert got.column("id").to_pylist() == np.flatnonzero(uid == target).tolist()
    handed_off = bool({t.ident for t in _pool_threads()} - before)
    assert handed_off == (codec == "zstd")
