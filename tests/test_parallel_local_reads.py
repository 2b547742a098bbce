"""Large local waves are read by several threads: the same bytes, the same counts
(requests, bytes, one round trip) as one thread reading them, the same errors."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pqindex.errors import CorruptFileError
from pqindex.io import source as src
from pqindex.io.errors import ObjectChangedError
from pqindex.io.source import PARALLEL_READ_BYTES, LocalFileSource

SIZE = 12 << 20


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    data = np.random.default_rng(3).integers(0, 256, SIZE, dtype=np.uint8).tobytes()
    path = tmp_path_factory.mktemp("reads") / "blob.bin"
    path.write_bytes(data)
    return path, data


def _threads_of_preads(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    names: set[str] = set()
    real = os.pread

    def pread(fd: int, n: int, offset: int) -> bytes:
        names.add(threading.current_thread().name)
        return real(fd, n, offset)

    monkeypatch.setattr(src.os, "pread", pread)
    return names


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, SIZE - 1), st.integers(0, 3 << 20)),
                min_size=1, max_size=12))
def test_same_bytes_and_counts_as_one_thread(data_file: tuple[Path, bytes],
                                             ranges: list[tuple[int, int]]) -> None:
    path, data = data_file
    ranges = [(o, min(n, SIZE - o)) for o, n in ranges]
    with LocalFileSource(path) as a:
        got = a.read_ranges(ranges)
    assert got == [data[o : o + n] for o, n in ranges]
    # The one-thread reference: the base class's loop.
    with LocalFileSource(path) as b:
        ref = src._BaseSource.read_ranges(b, ranges)
    assert got == ref
    assert (a.stats.requests, a.stats.bytes_read, a.stats.round_trips) == (
        b.stats.requests, b.stats.bytes_read, b.stats.round_trips) == (
        len(ranges), sum(n for _, n in ranges), 1)


def test_large_wave_uses_the_read_threads(data_file: tuple[Path, bytes],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path, data = data_file
    names = _threads_of_preads(monkeypatch)
    ranges = [(i << 20, 1 << 20) for i in range(6)]
    assert sum(n for _, n in ranges) >= PARALLEL_READ_BYTES
    with LocalFileSource(path) as s:
        assert s.read_ranges(ranges) == [data[o : o + n] for o, n in ranges]
    assert names and all(n.startswith("pqindex-read") for n in names)
    # A small wave stays on the calling thread.
    names.clear()
    with LocalFileSource(path) as s:
        s.read_ranges([(0, 100), (5000, 100)])
    assert names == {threading.current_thread().name}


def test_range_outside_the_file_fails_before_reading(data_file: tuple[Path, bytes],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = data_file
    names = _threads_of_preads(monkeypatch)
    with LocalFileSource(path) as s, pytest.raises(CorruptFileError, match="outside the file"):
        s.read_ranges([(0, 3 << 20), (SIZE - 10, 20)])
    assert not names


def test_file_shortened_after_open(tmp_path: Path) -> None:
    path = tmp_path / "short.bin"
    path.write_bytes(b"x" * (8 << 20))
    with LocalFileSource(path) as s:
        os.truncate(path, 5 << 20)  # the size was taken at open
        with pytest.raises(ObjectChangedError, match="modified since it was opened") as e:
            s.read_ranges([(0, 3 << 20), (4 << 20, 3 << 20)])
    assert e.value.path == os.fspath(path)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, SIZE - 1), st.integers(0, 3 << 20)),
                min_size=1, max_size=12))
def test_views_into_the_pool_are_the_same_bytes_and_counts(
        data_file: tuple[Path, bytes], ranges: list[tuple[int, int]]) -> None:
    """``iter_ranges(views=True)`` (read into Arrow's pool): the bytes, requests and the
    one round trip of ``read_ranges``; unsigned bytes, whatever the pool's format."""
    path, data = data_file
    ranges = [(o, min(n, SIZE - o)) for o, n in ranges]
    with LocalFileSource(path) as a:
        got = dict(a.iter_ranges(ranges, views=True))
    assert [bytes(got[i]) for i in range(len(ranges))] == [data[o : o + n] for o, n in ranges]
    assert all(isinstance(v, memoryview) and v.format == "B" for v in got.values())
    assert (a.stats.requests, a.stats.bytes_read, a.stats.round_trips) == (
        len(ranges), sum(n for _, n in ranges), 1)


def test_views_fail_before_reading_outside_the_file(data_file: tuple[Path, bytes]) -> None:
    path, _ = data_file
    with LocalFileSource(path) as s, pytest.raises(CorruptFileError, match="outside"):
        list(s.iter_ranges([(0, 10), (SIZE - 5, 10)], views=True))
    assert s.stats.requests == 0
