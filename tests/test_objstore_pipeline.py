"""Whole row groups on object storage: one wave, a request per decode unit, and each
unit decoded as soon as its bytes are in (while the others still transfer).

Asserted on the proxy's log and the sources' IOStats, never on durations.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.errors import PqIndexError
from pqindex.io.cache import metadata_cache
from pqindex.io.objstore import ObjectStoreSource
from pqindex.io.source import (
    REMOTE_MAX_GAP,
    REMOTE_TAIL_BYTES,
    SPLIT_PART_BYTES,
    IOStats,
    LocalFileSource,
    ObjectInfo,
)
from pqindex.scan import whole
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)


@pytest.fixture(scope="module")
def bucket(s3: S3Endpoint) -> str:  # noqa: F811
    return s3.new_bucket("pipeline")


def _url(bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key}"


def _data_gets(ep: S3Endpoint) -> list[tuple[int, int]]:
    """(first, last) byte of each GET that is not a tail (suffix) read."""
    out = []
    for r in ep.requests:
        if r.method == "GET" and r.range and not r.range.startswith("bytes=-"):
            lo, hi = r.range.split("=")[1].split("-")
            out.append((int(lo), int(hi)))
    return out


def _upload(ep: S3Endpoint, bucket: str, tmp_path: Path, rows: int, rg_rows: int) -> tuple[
        str, Path]:
    rng = np.random.default_rng(7)
    t = pa.table({"id": np.arange(rows, dtype=np.int64), "x": rng.normal(size=rows),
                  "s": pa.array([f"v{i % 97}" for i in range(rows)])})
    p = tmp_path / "f.parquet"
    pqindex.write_table(t, p, sort_by="id", row_group_rows=rg_rows, page_rows=10_000)
    key = f"whole/{uuid.uuid4().hex}.parquet"
    ep.put(bucket, key, p.read_bytes())
    return _url(bucket, key), p


def _chunks(path: Path, column: str) -> list[tuple[int, int]]:
    """(first, last) byte of ``column``'s chunk in each row group, from pyarrow's footer."""
    md = pq.ParquetFile(path).metadata
    out = []
    for rg in range(md.num_row_groups):
        for c in range(md.num_columns):
            cc = md.row_group(rg).column(c)
            if cc.path_in_schema == column:
                start = cc.dictionary_page_offset or cc.data_page_offset
                out.append((start, start + cc.total_compressed_size - 1))
    return out


def test_iter_ranges_hands_each_range_over_once_in_one_wave(
    s3: S3Endpoint, bucket: str  # noqa: F811
) -> None:
    n = 2 * SPLIT_PART_BYTES + 4321
    blob = np.random.default_rng(2).integers(0, 256, n, dtype=np.uint8).tobytes()
    key = f"iter/{uuid.uuid4().hex}.bin"
    s3.put(bucket, key, blob)
    stats = IOStats()
    src = ObjectStoreSource(_url(bucket, key), stats, s3.storage_options(), ObjectInfo(size=n))
    # A large range (two parallel parts), small ones, an empty one.
    ranges = [(5, n - 10), (0, 100), (1000, 0), (n - 50, 50), (77, 3)]
    s3.reset_log()
    got = list(src.iter_ranges(ranges))
    assert sorted(i for i, _ in got) == list(range(len(ranges)))
    assert {i: d for i, d in got} == {i: blob[o:o + k] for i, (o, k) in enumerate(ranges)}
    # One request per non-empty range, two for the split one; one wave.
    assert (stats.requests, stats.round_trips) == (5, 1)
    assert len(s3.requests) == 5
    assert src.read_ranges(ranges) == [blob[o:o + k] for o, k in ranges]
    # Views of the client's buffers where asked for, the same bytes.
    views = dict(src.iter_ranges(ranges, views=True))
    assert {i: bytes(d) for i, d in views.items()} == {i: d for i, d in got}
    assert isinstance(views[1], memoryview)
    assert all(isinstance(d, bytes) for _, d in got)


def test_whole_row_groups_one_request_each_in_one_wave(
    s3: S3Endpoint, bucket: str, tmp_path: Path  # noqa: F811
) -> None:
    """Row groups of at least a request's worth of bytes are fetched apart (no request
    spans two), in one wave after the tail, and decode to pyarrow's answer."""
    url, path = _upload(s3, bucket, tmp_path, rows=600_000, rg_rows=150_000)
    chunks = _chunks(path, "x")
    assert len(chunks) == 4 and all(hi - lo + 1 >= REMOTE_MAX_GAP for lo, hi in chunks)
    metadata_cache().clear()
    s3.reset_log()
    scan = pqindex.dataset(url, storage_options=s3.storage_options()).scan(columns=["x"])
    got = scan.to_table()
    assert got.equals(pq.read_table(path, columns=["x"]))
    size = path.stat().st_size
    tail_start = size - REMOTE_TAIL_BYTES
    gets = _data_gets(s3)
    # Every chunk byte before the tail is fetched, exactly once, by requests that each
    # lie inside one chunk: one per row group (the last may lie in the tail).
    want = [(lo, min(hi, tail_start - 1)) for lo, hi in chunks if lo < tail_start]
    assert sorted(gets) == want
    assert scan.report.round_trips == 2  # the tail, then every row group at once
    assert scan.report.requests == len(s3.requests) == 1 + len(want)


def test_small_row_groups_share_requests(
    s3: S3Endpoint, bucket: str, tmp_path: Path  # noqa: F811
) -> None:
    """Row groups far smaller than a request's worth are fetched together: fewer
    requests than row groups, none reading a byte twice."""
    url, path = _upload(s3, bucket, tmp_path, rows=600_000, rg_rows=20_000)
    chunks = _chunks(path, "x")
    assert len(chunks) == 30
    metadata_cache().clear()
    s3.reset_log()
    scan = pqindex.dataset(url, storage_options=s3.storage_options()).scan(columns=["x"])
    assert scan.to_table().equals(pq.read_table(path, columns=["x"]))
    gets = sorted(_data_gets(s3))
    total = sum(hi - lo + 1 for lo, hi in chunks)
    assert 2 <= len(gets) <= total // REMOTE_MAX_GAP + 1
    assert all(a[1] < b[0] for a, b in itertools.pairwise(gets))
    assert scan.report.round_trips == 2


def test_a_unit_decodes_while_the_others_are_in_flight(
    s3: S3Endpoint, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """The first unit whose bytes are in is decoded before the last range is handed
    over: the source holds back every later range until a decode has started."""
    url, path = _upload(s3, bucket, tmp_path, rows=600_000, rg_rows=150_000)
    started = threading.Event()
    held_back: list[bool] = []
    decode = whole._read_fetched
    iterate = ObjectStoreSource.iter_ranges

    def read_fetched(*args: Any) -> pa.Table:
        started.set()
        return decode(*args)

    def iter_ranges(self: ObjectStoreSource, ranges: Sequence[tuple[int, int]], *,
                    views: bool = False) -> Iterator[tuple[int, bytes | memoryview]]:
        for k, item in enumerate(iterate(self, ranges, views=views)):
            if k == 1 and len(ranges) > 1:
                # A decode must start with only the first range handed over.
                held_back.append(started.wait(30))
            yield item

    monkeypatch.setattr(whole, "_read_fetched", read_fetched)
    monkeypatch.setattr(ObjectStoreSource, "iter_ranges", iter_ranges)
    metadata_cache().clear()
    got = pqindex.dataset(url, storage_options=s3.storage_options()).scan(columns=["x"]).to_table()
    assert held_back == [True]
    assert got.equals(pq.read_table(path, columns=["x"]))


def test_a_failed_request_of_the_wave_names_the_file(
    s3: S3Endpoint, bucket: str, tmp_path: Path  # noqa: F811
) -> None:
    url, path = _upload(s3, bucket, tmp_path, rows=600_000, rg_rows=150_000)
    second = _chunks(path, "x")[1][0]
    metadata_cache().clear()
    ds = pqindex.dataset(url, storage_options=s3.storage_options())
    rejected: list[str] = []

    def refuse(r: Any) -> tuple[int, str] | None:
        # The GET of the second row group's chunk is refused (not retried).
        if r.range and r.range.startswith(f"bytes={second}-"):
            rejected.append(r.range)
            return (403, "AccessDenied")
        return None

    s3.answer = refuse
    try:
        with pytest.raises(PqIndexError) as e:
            ds.scan(columns=["x"]).to_table()
    finally:
        s3.answer = None
    assert rejected and url in str(e.value)


def test_local_reads_are_unchanged(tmp_path: Path) -> None:
    """Local files never take the object-store path: their ranges come in order."""
    p = tmp_path / "b.bin"
    p.write_bytes(bytes(range(256)) * 10)
    from pqindex.io.source import iter_ranges

    src = LocalFileSource(p)
    assert list(iter_ranges(src, [(3, 4), (0, 2)])) == [(0, bytes([3, 4, 5, 6])),
                                                         (1, bytes([0, 1]))]
    assert src.stats.round_trips == 1


@pytest.mark.parametrize("sizes", [[5], [1, 1, 1], [10, 1, 1, 10, 3], [4, 4, 4, 4], [1] * 9,
                                   [20, 1], [1, 20]])
def test_units_keep_order_and_reach_the_least_size(sizes: list[int]) -> None:
    least = 4
    units = whole._units(list(enumerate(sizes)), least)
    assert [rg for u in units for rg in u] == list(range(len(sizes)))
    if len(units) > 1:
        assert all(sum(sizes[rg] for rg in u) >= least for u in units)


def test_gc_paused_nests_and_restores() -> None:
    import gc

    from pqindex.dataset.planning import gc_paused

    was = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():  # another scan of the process
                assert not gc.isenabled()
            assert not gc.isenabled()  # the outer one still plans
        assert gc.isenabled()
        gc.disable()  # off before: stays off
        with gc_paused():
            pass
        assert not gc.isenabled()
        gc.enable()
        with pytest.raises(ValueError), gc_paused():
            raise ValueError("a failed plan")
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_a_tail_from_the_wave_is_a_view_and_reads_give_bytes(
    s3: S3Endpoint, bucket: str, tmp_path: Path  # noqa: F811
) -> None:
    """The wave keeps each tail as a view of the client's buffer (no copy); what the
    file hands out is still ``bytes`` and the same as locally, at no request."""
    from pqindex.format.file import ParquetFile
    from pqindex.io.listing import list_objects
    from pqindex.io.objstore import prefetch_tails

    url, path = _upload(s3, bucket, tmp_path, rows=50_000, rg_rows=25_000)
    key = url.split("/", 3)[3]
    (info,) = [i for k, i in list_objects(f"s3://{bucket}/whole/", s3.storage_options())
               if k.endswith(key.rsplit("/", 1)[1])]
    metadata_cache().clear()
    stats = IOStats()
    assert prefetch_tails([(url, info, stats)], s3.storage_options()) == 1
    cached = metadata_cache().get(
        ObjectStoreSource(url, None, s3.storage_options(), info).cache_key())
    assert cached is not None and isinstance(cached[-1][1], memoryview)
    s3.reset_log()
    pf = ParquetFile.open(url, stats=stats, storage_options=s3.storage_options(), info=info)
    data = path.read_bytes()
    start = len(data) - 100
    got = pf.read_bytes(start, 100)
    assert type(got) is bytes and got == data[start:]
    assert pf.footer_bytes == data[pf.footer_offset:pf.footer_offset + pf.footer_length]
    assert s3.requests == []
