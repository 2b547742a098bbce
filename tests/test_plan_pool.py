"""Where a dataset's files are planned: files nothing needs to be read for are settled
on the calling thread, the rest on the process's planning pool (its threads reused by
every dataset), and a planning error leaves no plan running behind it. Rows are checked
against pyarrow's read + filter."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.dataset import planning
from pqindex.dataset.manifest import write_manifest

FILES = 12
ROWS = 400


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``id`` ascending across files; ``c`` one of two values everywhere (no statistic
    rules it out); a distinct index on ``c``; a manifest."""
    root = tmp_path_factory.mktemp("planpool") / "lake"
    root.mkdir()
    for k in range(FILES):
        ids = np.arange(k * ROWS, (k + 1) * ROWS, dtype=np.int64)
        pqindex.write_table(pa.table({"id": ids, "c": pa.array(np.array(["a", "c"])[ids % 2])}),
                            root / f"part-{k:03d}.parquet", indexes={"distinct": ["c"]})
    write_manifest(root)
    return root


def _reference(root: Path, flt: Any) -> pa.Table:
    files = sorted(root.glob("part-*.parquet"))
    t = pa.concat_tables([pq.read_table(f) for f in files])
    return t.filter(flt)


class _Spy:
    """Which files the pool was handed, and on which threads plan_file ran."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.handed: list[str] = []
        self.threads: list[str] = []
        self.running = 0
        self._lock = threading.Lock()
        as_landed, plan_file = planning.DatasetPlanner.as_landed, planning.plan_file

        def spy_as_landed(planner: Any, ds: Any, pool: Any, fn: Any, files: Any) -> Any:
            self.handed += [df.path for df in files]
            return as_landed(planner, ds, pool, fn, files)

        def spy_plan_file(pf: Any, *a: Any, **kw: Any) -> Any:
            with self._lock:
                self.running += 1
                self.threads.append(threading.current_thread().name)
            try:
                return plan_file(pf, *a, **kw)
            finally:
                with self._lock:
                    self.running -= 1

        monkeypatch.setattr(planning.DatasetPlanner, "as_landed", spy_as_landed)
        monkeypatch.setattr(planning, "plan_file", spy_plan_file)


def test_files_the_manifest_rules_out_are_never_handed_to_the_pool(
    lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _Spy(monkeypatch)
    ds = pqindex.dataset(lake)
    got = ds.scan(where="id BETWEEN 1000 AND 1010", columns=["id", "c"]).to_table()
    want = _reference(lake, (pc.field("id") >= 1000) & (pc.field("id") <= 1010))
    assert got.equals(want.select(["id", "c"]))
    # Only the file holding those ids is left once the manifest has spoken (a single
    # local file left is planned on the caller's thread: nothing handed at all).
    assert spy.handed == []
    files = pqindex.dataset(lake).plan(["id"], "id BETWEEN 1000 AND 1010").kept
    assert [Path(e.path).name for e in files] == ["part-002.parquet"]
    # A value no file holds: the manifest's distinct summaries settle every file.
    spy.handed.clear()
    empty = pqindex.dataset(lake).scan(where="c = 'b'").to_table()
    assert empty.num_rows == 0 and spy.handed == []


def test_planning_threads_are_shared_by_datasets(
    lake: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Files the footers cannot settle are planned on the process's ``plan`` pool,
    whose threads every fresh dataset reuses (none started per plan)."""
    root = tmp_path / "plain"
    root.mkdir()
    for f in sorted(lake.glob("part-*.parquet")):
        (root / f.name).write_bytes(f.read_bytes())  # no manifest: every file planned
    spy = _Spy(monkeypatch)
    want = _reference(root, pc.field("c") == "a")
    for _ in range(6):
        ds = pqindex.dataset(root, max_workers=2)
        got = ds.scan(where="c = 'a'", columns=["id", "c"]).to_table()
        assert got.sort_by("id").equals(want.select(["id", "c"]))
    assert spy.threads and all(t.startswith("pqindex-plan") for t in spy.threads)
    assert len(set(spy.threads)) <= 2


def test_a_planning_error_leaves_nothing_running(
    lake: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One file's plan fails: the error names it, the plans still queued skip their
    files, and none still runs once the error is raised."""
    root = tmp_path / "plain"
    root.mkdir()
    for f in sorted(lake.glob("part-*.parquet")):
        (root / f.name).write_bytes(f.read_bytes())
    spy = _Spy(monkeypatch)
    plan_file = planning.plan_file

    def failing(pf: Any, *a: Any, **kw: Any) -> Any:
        if pf.path.endswith("part-003.parquet"):
            raise pqindex.PqIndexError("planning broke", path=pf.path)
        return plan_file(pf, *a, **kw)

    monkeypatch.setattr(planning, "plan_file", failing)
    with pytest.raises(pqindex.PqIndexError, match=r"part-003\.parquet"):
        pqindex.dataset(root, max_workers=2).scan(where="c = 'a'").to_table()
    assert spy.running == 0


def test_local_python_work_takes_turns_in_slots(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening and planning a local file and a sifted read hold one of the process's
    Python slots: with one slot, never two of them at once, however many files are
    in flight; the rows are pyarrow's. Work that waits on a store takes no slot."""
    import importlib
    import time

    from pqindex import pools

    dataset_mod = importlib.import_module("pqindex.dataset.dataset")
    for k in range(10):
        pq.write_table(pa.table({"id": np.arange(k * 300, (k + 1) * 300),
                                 "s": pa.array([f"v{i % 7}" for i in range(300)])}),
                       tmp_path / f"p{k}.parquet", row_group_size=100)
    monkeypatch.setattr(pools, "PYTHON_SLOTS", 1)
    monkeypatch.setattr(pools, "_slots", None)
    lock = threading.Lock()
    busy = [0, 0]  # now, most at once
    seen = {"plan": 0, "sift": 0}

    def tracked(fn: Any, kind: str, *a: Any, **k: Any) -> Any:
        with lock:
            busy[0] += 1
            busy[1] = max(busy[1], busy[0])
            seen[kind] += 1
        try:
            time.sleep(0.003)  # long enough for another thread to come in
            return fn(*a, **k)
        finally:
            with lock:
                busy[0] -= 1

    plan_file, sift = planning.plan_file, dataset_mod.iter_sifted_row_groups

    def sifted(*a: Any, **k: Any) -> Any:  # a generator: tracked while it runs
        yield from tracked(lambda: list(sift(*a, **k)), "sift")

    monkeypatch.setattr(planning, "plan_file",
                        lambda *a, **k: tracked(plan_file, "plan", *a, **k))
    monkeypatch.setattr(dataset_mod, "iter_sifted_row_groups", sifted)
    got = pqindex.dataset(str(tmp_path), max_workers=4).scan(
        ["id"], where="s = 'v3'").to_table()
    want = pq.read_table(tmp_path).filter(pc.field("s") == "v3")
    assert sorted(got.column("id").to_pylist()) == sorted(want.column("id").to_pylist())
    assert seen == {"plan": 10, "sift": 10}
    assert busy[1] == 1

    # A block that waits on a store holds no slot: it runs while another holds them all.
    with pools.python_slot():
        done = threading.Event()

        def remote_work() -> None:
            with pools.python_slot(False):
                done.set()

        t = threading.Thread(target=remote_work)
        t.start()
        assert done.wait(5)
        t.join()
