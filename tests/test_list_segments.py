"""A long S3 listing with a manifest: page 1, then the rest as concurrent segments.

Against moto behind the counting, delaying proxy: the listing equals the
store's own paginated listing (boto3, an independent client), the LIST costs
two round trips whatever its length (page 1 with the manifest GET beside it,
then every segment side by side), and a manifest made stale by objects added
and removed since still gives the exact listing and the right rows (files the
manifest does not match are planned from their footers).
"""

from __future__ import annotations

import importlib
import json
import math
import types
import urllib.parse
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.dataset.discovery import MANIFEST_NAME
from pqindex.dataset.manifest import build_manifest, manifest_keys
from pqindex.format.file import ParquetFile
from pqindex.io.cache import metadata_cache
from pqindex.io.listing import list_objects, list_with
from pqindex.io.source import BytesSource, IOStats
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)

pytestmark = pytest.mark.slow

N = 3000  # with the manifest: 3,001 keys, four LIST pages


def _file(k: int) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": pa.array([2 * k, 2 * k + 1], pa.int64())}), sink)
    return bytes(sink.getvalue().to_pybytes())


def _put_all(ep: S3Endpoint, bucket: str, items: dict[str, bytes]) -> None:
    """PUT all at once, straight to moto (not through the proxy)."""
    import asyncio

    import obstore as obs

    from pqindex.io.objstore import get_store, run

    store = get_store(f"s3://{bucket}/", ep.storage_options(endpoint=ep.direct_url))[0].store
    gate = asyncio.Semaphore(32)

    async def put(key: str, data: bytes) -> None:
        async with gate:
            await obs.put_async(store, key, data)

    async def all_puts() -> None:
        await asyncio.gather(*(put(k, v) for k, v in items.items()))

    run(all_puts())


def _delete_all(ep: S3Endpoint, bucket: str, keys: list[str]) -> None:
    client = ep.boto3()
    for i in range(0, len(keys), 1000):
        client.delete_objects(Bucket=bucket, Delete={
            "Objects": [{"Key": k} for k in keys[i:i + 1000]], "Quiet": True})


def _store_listing(ep: S3Endpoint, bucket: str, prefix: str) -> list[tuple[str, int]]:
    """(URL, size) of every key below ``prefix``, as the store pages them out."""
    out = []
    for page in ep.boto3().get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=f"{prefix}/"):
        out += [(f"s3://{bucket}/{o['Key']}", o["Size"]) for o in page.get("Contents", [])]
    return sorted(out)


def _start_after(query: str) -> str | None:
    return urllib.parse.parse_qs(query).get("start-after", [None])[0]


def _lists(ep: S3Endpoint) -> list[Any]:
    return [r for r in ep.requests if "list-type=2" in r.query]


@pytest.fixture(scope="module")
def lake(s3: S3Endpoint) -> tuple[str, str]:  # noqa: F811
    bucket = s3.new_bucket("segments")
    files = {f"lake/f{k:05d}.parquet": _file(k) for k in range(N)}
    _put_all(s3, bucket, files)
    # The manifest pqindex writes, built from the bytes put and the listing's
    # ETags and mtimes (write_manifest would GET 3,000 tails from moto: slow).
    url = f"s3://{bucket}/lake"
    listed = list_objects(url, s3.storage_options())
    manifest = build_manifest(
        (u[len(url) + 1:], ParquetFile(BytesSource(files[u[len(f"s3://{bucket}/"):]], u)), i)
        for u, i in listed)
    _put_all(s3, bucket, {f"lake/{MANIFEST_NAME}": json.dumps(manifest).encode()})
    return bucket, "lake"


def _listed(ep: S3Endpoint, url: str) -> tuple[list[tuple[str, int]], IOStats]:
    """The listing with the manifest's names, on a fresh log, 20 ms per request."""
    ep.reset_log()
    ep.delay = 0.02
    stats = IOStats()
    try:
        got = list_with(url, ep.storage_options(), stats, MANIFEST_NAME, manifest_keys)
    finally:
        ep.delay = 0.0
    assert got.fetched is not None
    return [(u, i.size) for u, i in got.objects], stats


def test_segments_list_exactly_in_two_round_trips(
    s3: S3Endpoint, lake: tuple[str, str], monkeypatch: pytest.MonkeyPatch  # noqa: F811
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
    got, stats = _listed(s3, url)
    assert got == ref
    lists = _lists(s3)
    assert len(lists) >= 3 and sum("start-after=" in r.query for r in lists) == len(lists) - 1
    assert stats.requests == len(s3.requests) == len(lists) + 1
    assert stats.round_trips == s3.waves == 2
    # planned from the manifest: the listing, then the one file that can match; the
    # manifest's JSON is parsed once, for its keys and its entries alike
    metadata_cache().clear()
    s3.reset_log()
    s3.delay = 0.02
    parsed: list[int] = []
    real_loads = json.loads

    def counting_loads(data: Any, **kw: Any) -> Any:
        parsed.append(len(data))
        return real_loads(data, **kw)

    manifest_module = importlib.import_module("pqindex.dataset.manifest")
    monkeypatch.setattr(manifest_module, "json",
                        types.SimpleNamespace(loads=counting_loads, dumps=json.dumps))
    try:
        scan = pqindex.dataset(url, storage_options=s3.storage_options()).scan(
            where="id = 5001")
        assert scan.to_table()["id"].to_pylist() == [5001]
    finally:
        s3.delay = 0.0
    assert {r.path for r in s3.requests if r.path.endswith(".parquet")} == {
        f"/{bucket}/{prefix}/f02500.parquet"}
    monkeypatch.undo()
    assert len(parsed) == 1  # (without the hand-over: 2)
    assert scan.report.requests == len(s3.requests) == len(lists) + 2
    assert scan.report.round_trips == s3.waves == 3


def test_segments_stale_manifest_exact_listing_and_rows(
    s3: S3Endpoint, lake: tuple[str, str]  # noqa: F811
) -> None:
    bucket, prefix = lake
    url = f"s3://{bucket}/{prefix}"
    # Since the manifest: objects added inside two segments' ranges and after the
    # last name, 300 removed.
    fresh = [*range(1500, 1550), *range(2100, 2130)]
    added = {f"{prefix}/f{k:05d}b.parquet": _file(N + k) for k in fresh}
    added |= {f"{prefix}/g{k:05d}.parquet": _file(2 * N + k) for k in range(50)}
    removed = [f"{prefix}/f{k:05d}.parquet" for k in range(2200, 2500)]
    _put_all(s3, bucket, added)
    try:
        _delete_all(s3, bucket, removed)
        ref = _store_listing(s3, bucket, prefix)
        got, stats = _listed(s3, url)
        assert got == ref
        assert stats.requests == len(s3.requests)
        # Round trips: page 1, then the longest chain of pages of one segment (a
        # segment's requests all carry its start-after). The segment holding the
        # 50 new f-names before its boundary pays one page more, the others one.
        chains = Counter(_start_after(r.query) for r in _lists(s3))
        assert chains.pop(None) == 1 and sorted(chains.values()) == [1, 1, 2]
        assert stats.round_trips == 1 + max(chains.values()) == 3
        # (the proxy sees a wave only when no request is in flight: a segment's
        # second page may overlap another's first)
        assert s3.waves <= stats.round_trips
        # rows: the new files (no entry) from their footers, the removed ones gone
        present = {2 * k for k in range(N) if not 2200 <= k < 2500}
        present |= {2 * (N + k) for k in fresh}
        present |= {2 * (2 * N + k) for k in range(50)}
        probe = [2 * k for k in (5, 1520, 1700, 2120, 2300, 2999, N + 1520, N + 1600,
                                 N + 2129, 2 * N + 7, 2 * N + 50, 3 * N)]
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
        assert s3.waves <= scan.report.round_trips
        # every file the manifest does not match had its footer read, no other
        tails = {r.path.rsplit("/", 1)[1] for r in s3.requests if r.path.endswith(".parquet")}
        assert {k.rsplit("/", 1)[1] for k in added} <= tails
        assert len(tails - {k.rsplit("/", 1)[1] for k in added}) == 5  # the matches
    finally:
        _delete_all(s3, bucket, list(added))
        _put_all(s3, bucket, {k: _file(int(k[-13:-8])) for k in removed})
