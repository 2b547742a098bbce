"""A long S3 listing with a manifest: page 1, then the rest as concurrent segments.

Against moto behind the counting, delaying proxy: the listing equals the
store's own paginated listing (boto3, an independent client), the LIST costs
two round trips whatever its length (page 1 with the manifest GET beside it,
then every segment side by side), and a manifest made stale by objects added
and removed since still gives the exact listing and the right rows (files the
manifest does not match are planned from their footers).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.dataset.discovery import MANIFEST_NAME
from pqindex.dataset.manifest import manifest_keys, write_manifest
from pqindex.io.cache import metadata_cache
from pqindex.io.listing import list_objects, list_with
from pqindex.io.source import IOStats
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)

pytestmark = pytest.mark.slow

N = 3000  # with the manifest: 3,001 keys, four LIST pages


def _file(k: int) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": pa.array([2 * k, 2 * k + 1], pa.int64())}), sink)
    return bytes(sink.getvalue().to_pybytes())


def _put_all(ep: S3Endpoint, bucket: str, items: dict[str, bytes]) -> None:
    client = ep.boto3()  # straight to moto, not through the proxy
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda kv: client.put_object(Bucket=bucket, Key=kv[0], Body=kv[1]),
                      items.items()))


def _store_listing(ep: S3Endpoint, bucket: str, prefix: str) -> list[tuple[str, int]]:
    """(URL, size) of every key below ``prefix``, as the store pages them out."""
    out = []
    for page in ep.boto3().get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=f"{prefix}/"):
        out += [(f"s3://{bucket}/{o['Key']}", o["Size"]) for o in page.get("Contents", [])]
    return sorted(out)


def _lists(ep: S3Endpoint) -> list[Any]:
    return [r for r in ep.requests if "list-type=2" in r.query]


@pytest.fixture(scope="module")
def lake(s3: S3Endpoint) -> tuple[str, str]:  # noqa: F811
    bucket = s3.new_bucket("segments")
    _put_all(s3, bucket, {f"lake/f{k:05d}.parquet": _file(k) for k in range(N)})
    write_manifest(f"s3://{bucket}/lake", s3.storage_options())
    return bucket, "lake"


def _listed(ep: S3Endpoint, url: str, stats: IOStats) -> list[tuple[str, int]]:
    got = list_with(url, ep.storage_options(), stats, MANIFEST_NAME, manifest_keys)
    assert got.fetched is not None
    return [(u, i.size) for u, i in got.objects]


def test_segments_list_exactly_in_two_round_trips(
    s3: S3Endpoint, lake: tuple[str, str]  # noqa: F811
) -> None:
    bucket, prefix = lake
    url = f"s3://{bucket}/{prefix}"
    ref = _store_listing(s3, bucket, prefix)
    assert len(ref) == N + 1
    # without the manifest's names: page after page, one round trip each
    s3.reset_log()
    s3.delay = 0.02
    stats = IOStats()
    try:
        seq = list_objects(url, s3.storage_options(), stats)
    finally:
        s3.delay = 0.0
    assert [(u, i.size) for u, i in seq] == ref
    pages = math.ceil((N + 1) / 1000)
    assert len(_lists(s3)) == stats.requests == pages
    assert stats.round_trips == s3.waves == pages
    # with them: page 1 (and the manifest), then the segments side by side
    s3.reset_log()
    s3.delay = 0.02
    stats = IOStats()
    try:
        got = _listed(s3, url, stats)
    finally:
        s3.delay = 0.0
    assert got == ref
    lists = _lists(s3)
    assert len(lists) >= 3 and sum("start-after=" in r.query for r in lists) == len(lists) - 1
    assert stats.requests == len(s3.requests) == len(lists) + 1
    assert stats.round_trips == s3.waves == 2


def test_segments_stale_manifest_exact_listing_and_rows(
    s3: S3Endpoint, lake: tuple[str, str]  # noqa: F811
) -> None:
    bucket, prefix = lake
    url = f"s3://{bucket}/{prefix}"
    client = s3.boto3()
    # Since the manifest: 1,200 objects inside one segment's range and after the
    # last name (more than a page more in one segment), 300 removed.
    added = {f"{prefix}/f{k:05d}b.parquet": _file(N + k) for k in range(1500, 2100)}
    added |= {f"{prefix}/g{k:05d}.parquet": _file(2 * N + k) for k in range(600)}
    removed = [f"{prefix}/f{k:05d}.parquet" for k in range(2200, 2500)]
    _put_all(s3, bucket, added)
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda key: client.delete_object(Bucket=bucket, Key=key), removed))
        ref = _store_listing(s3, bucket, prefix)
        s3.reset_log()
        s3.delay = 0.02
        stats = IOStats()
        try:
            got = _listed(s3, url, stats)
        finally:
            s3.delay = 0.0
        assert got == ref
        assert stats.requests == len(s3.requests)
        assert stats.round_trips == s3.waves
        # the segment holding the 600 new f-names pays one page more, the rest one
        assert 2 < stats.round_trips < math.ceil(len(ref) / 1000)
        # rows: the new files (no entry) from their footers, the removed ones gone
        present = {2 * k for k in range(N) if not 2200 <= k < 2500}
        present |= {2 * (N + k) for k in range(1500, 2100)}
        present |= {2 * (2 * N + k) for k in range(600)}
        probe = [2 * k for k in (5, 1700, 2300, 2999, N + 1600, N + 2099, 2 * N + 7,
                                 2 * N + 599, 3 * N)]
        metadata_cache().clear()
        s3.reset_log()
        s3.delay = 0.02
        try:
            scan = pqindex.dataset(url, storage_options=s3.storage_options()).scan(
                where=f"id IN ({', '.join(map(str, probe))})")
            rows = sorted(scan.to_table()["id"].to_pylist())
        finally:
            s3.delay = 0.0
        assert rows == sorted(v for v in probe if v in present)
        assert scan.report.requests == len(s3.requests)
        assert scan.report.round_trips == s3.waves
        # every file the manifest does not match had its footer read, no other
        tails = {r.path.rsplit("/", 1)[1] for r in s3.requests if r.path.endswith(".parquet")}
        assert {k.rsplit("/", 1)[1] for k in added} <= tails
        assert len(tails - {k.rsplit("/", 1)[1] for k in added}) == 3  # the matches
    finally:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda key: client.delete_object(Bucket=bucket, Key=key), added))
        _put_all(s3, bucket, {k: _file(int(k[-13:-8])) for k in removed})
