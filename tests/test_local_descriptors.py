"""Local files hold few descriptors: a process-wide pool keeps at most ``limit`` idle
ones open, and a file whose descriptor was closed is opened again only if it is still
the file first opened."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.format.file import ParquetFile
from pqindex.io import source as source_mod
from pqindex.io.errors import ObjectChangedError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def small_pool() -> Iterator[None]:
    pool = source_mod._descriptors
    old = pool.limit
    pool.limit = 2
    try:
        yield
    finally:
        pool.limit = old


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _files(d: Path, n: int, rows: int = 100) -> None:
    d.mkdir()
    for k in range(n):
        pq.write_table(pa.table({"x": np.arange(k * rows, (k + 1) * rows, dtype=np.int64),
                                 "s": [f"v{i % 7}" for i in range(rows)]}),
                       d / f"part-{k:04d}.parquet", row_group_size=25)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_a_dataset_of_many_files_holds_a_bounded_number_of_descriptors(
    tmp_path: Path, small_pool: None
) -> None:
    d = tmp_path / "d"
    _files(d, 60)
    before = _open_fds()
    ds = pqindex.dataset(d)
    got = ds.scan(where="x >= 0 AND s != 'v3'").to_table()
    want = pq.read_table(d).filter((pc.field("x") >= 0) & (pc.field("s") != "v3"))
    assert got.sort_by("x").equals(want.sort_by("x").cast(got.schema))
    assert _open_fds() <= before + source_mod._descriptors.limit
    # Every file again (their descriptors closed meanwhile): opened again, same rows.
    again = ds.scan(where="x >= 0 AND s != 'v3'").to_table()
    assert again.sort_by("x").equals(got.sort_by("x"))
    assert _open_fds() <= before + source_mod._descriptors.limit
    ds.close()
    assert _open_fds() <= before


def test_more_files_than_the_open_file_limit(tmp_path: Path) -> None:
    """With the soft limit on open files at 128, a dataset of 300 files is read whole
    and looked up (before the pool: 'Too many open files')."""
    resource = pytest.importorskip("resource")
    d = tmp_path / "d"
    _files(d, 300, rows=10)
    code = f"""
import resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))
import pqindex
ds = pqindex.dataset({str(d)!r})
t = ds.scan(where="x >= 0").to_table()
one = ds.scan(where="x = 2995").to_table()
print(t.num_rows, one.num_rows, int(one.column("x")[0].as_py()))
"""
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[1] >= 128 or \
        resource.getrlimit(resource.RLIMIT_NOFILE)[1] == resource.RLIM_INFINITY
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["3000", "1", "2995"]


def test_a_file_replaced_after_its_descriptor_was_closed_is_not_mixed(
    tmp_path: Path, small_pool: None
) -> None:
    """The pool closed the descriptor of an idle file; the file was then replaced by
    another of the same name: the next read raises ObjectChangedError naming it, never
    bytes of the new file under the old footer."""
    a = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": np.arange(200_000, dtype=np.int64)}), a,
                   compression="none")  # larger than the tail read at open
    pf = ParquetFile.open(a)
    others = [tmp_path / f"o{k}.parquet" for k in range(4)]
    for o in others:
        pq.write_table(pa.table({"x": np.arange(10, dtype=np.int64)}), o)
    opened = [ParquetFile.open(o) for o in others]  # a's descriptor is closed now
    assert pf.source._fd is None
    tmp = tmp_path / "a.tmp"
    pq.write_table(pa.table({"x": np.arange(1, 200_001, dtype=np.int64)}), tmp,
                   compression="none")  # the same size
    os.replace(tmp, a)
    with pytest.raises(ObjectChangedError) as e:
        pf.read_bytes(4, 16)
    assert str(a) in str(e.value) and "replaced" in str(e.value)
    for p in [pf, *opened]:
        p.close()


def test_an_untouched_file_is_opened_again_and_reads_its_bytes(
    tmp_path: Path, small_pool: None
) -> None:
    a = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": np.arange(200_000, dtype=np.int64)}), a,
                   compression="none")  # larger than the tail read at open
    data = a.read_bytes()
    pf = ParquetFile.open(a)
    others = [ParquetFile.open(a) for _ in range(4)]
    assert pf.source._fd is None
    before = pf.source.stats.requests
    assert pf.read_bytes(4, 100) == data[4:104]
    assert pf.source.stats.requests == before + 1
    for p in [pf, *others]:
        p.close()
    with pytest.raises(pqindex.PqIndexError, match="closed"):
        pf.source.read(4, 10)


def test_threads_reading_many_files_through_a_small_pool(
    tmp_path: Path, small_pool: None
) -> None:
    """Four threads read eight files at once while the pool keeps two idle descriptors:
    a descriptor in use is never closed under its reader (every byte is the file's)."""
    paths = [tmp_path / f"f{k}.parquet" for k in range(8)]
    for k, p in enumerate(paths):
        pq.write_table(pa.table({"x": np.arange(k, k + 20_000, dtype=np.int64)}), p,
                       compression="none")
    data = [p.read_bytes() for p in paths]
    files = [ParquetFile.open(p) for p in paths]
    errors: list[str] = []

    def work(seed: int) -> None:
        r = np.random.default_rng(seed)
        for _ in range(400):
            k = int(r.integers(0, len(files)))
            off = int(r.integers(4, len(data[k]) - 3000))
            n = int(r.integers(1, 3000))
            if files[k].source.read(off, n) != data[k][off : off + n]:
                errors.append(f"file {k} [{off}, {off + n})")

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for f in files:
        f.close()
    assert errors == []


def test_files_collected_while_the_pools_are_busy_do_not_deadlock(tmp_path: Path) -> None:
    """A garbage collection can start at any allocation, also while this thread holds
    the descriptor pool's or a budget's lock; a source or file it frees gives its
    descriptor and budget back through the same locks (reentrant)."""
    import gc

    from pqindex.io import cache
    from pqindex.io.source import LocalFileSource

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": np.arange(10, dtype=np.int64)}), path)

    def collected_under(lock: object) -> bool:
        src: object = LocalFileSource(path)
        pf: object = ParquetFile.open(path)
        src.me = src  # type: ignore[attr-defined]  # cycles: only the collector frees them
        pf.me = pf  # type: ignore[attr-defined]
        del src, pf
        done = threading.Event()

        def work() -> None:
            with lock:  # type: ignore[attr-defined]
                gc.collect()
            done.set()

        threading.Thread(target=work, daemon=True).start()
        return done.wait(20)

    assert collected_under(source_mod._descriptors._lock)
    assert collected_under(cache.DICTIONARY_EVIDENCE._lock)
    assert collected_under(cache.KEPT_PAGES._lock)


def test_a_small_wave_takes_the_descriptor_once_and_counts_every_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A planner's wave of Bloom probes is dozens of tiny reads: one descriptor
    acquisition for the wave, each read still a request in the trace, one round trip;
    a range outside the file fails before anything is read or counted."""
    p = tmp_path / "f.bin"
    data = os.urandom(50_000)
    p.write_bytes(data)
    src = source_mod.LocalFileSource(str(p))
    taken = []
    acquire = source_mod._descriptors.acquire
    monkeypatch.setattr(source_mod._descriptors, "acquire",
                        lambda s: taken.append(s) or acquire(s))
    ranges = [(k * 1_000 + 7, 22 + k % 11) for k in range(40)]
    got = src.read_ranges(ranges)
    assert got == [data[o:o + n] for o, n in ranges]
    assert len(taken) == 1
    assert src.stats.trace == ranges
    assert (src.stats.requests, src.stats.round_trips) == (40, 1)
    assert src.stats.bytes_read == sum(n for _, n in ranges)
    with pytest.raises(pqindex.PqIndexError, match="outside the file"):
        src.read_ranges([(0, 10), (49_995, 10)])
    assert (src.stats.requests, src.stats.round_trips) == (40, 1)
    assert len(taken) == 1
    src.close()


def test_a_file_rewritten_in_place_under_an_open_descriptor_is_not_mixed(
        tmp_path: Path) -> None:
    """A file rewritten in place (same inode: truncated and written again, as
    ``pyarrow.parquet.write_table`` over the same path does) while its descriptor is
    still open: the next read of its bytes raises ObjectChangedError, never pages of
    the new file under the old footer. Replaced by a rename, the open descriptor still
    reads the old file, whole and consistent."""
    path = tmp_path / "big.parquet"
    rows = 200_000
    pq.write_table(pa.table({"x": np.arange(rows, dtype=np.int64)}), path,
                   row_group_size=50_000, write_page_index=True)
    ds = pqindex.dataset(path)
    assert ds.scan(where="x = 7").to_table()["x"].to_pylist() == [7]
    inode, size = path.stat().st_ino, path.stat().st_size
    pq.write_table(pa.table({"x": np.arange(rows, 2 * rows, dtype=np.int64)}), path,
                   row_group_size=50_000, write_page_index=True)
    # Rewritten in place, not replaced, and another size (what the check compares: a
    # touched file, same bytes and a newer mtime, stays readable).
    assert path.stat().st_ino == inode and path.stat().st_size != size
    with pytest.raises(ObjectChangedError, match="modified since it was opened"):
        ds.scan(where="x = 150000").to_table()  # pages not read before: read now
    # A rename leaves the open file as it was: the old rows, whole.
    ds = pqindex.dataset(path)
    assert ds.scan(where="x = 200007").to_table()["x"].to_pylist() == [200007]
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": np.arange(5, dtype=np.int64)}), other)
    os.replace(other, path)
    assert ds.scan(where="x = 350000").to_table()["x"].to_pylist() == [350000]
