"""Object storage: the same answers on S3 (moto behind a counting proxy) as locally,
in the fewest requests and round trips, with clean errors.

Requests are asserted on two independent counters: the proxy's log of what
reached the server, and the source's IOStats.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
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
import writers
from conftest import CORPUS
from pqindex.dataset.discovery import discover
from pqindex.errors import PqIndexError
from pqindex.format.file import ParquetFile
from pqindex.io.cache import metadata_cache
from pqindex.io.errors import (
    ObjectChangedError,
    ObjectNotFoundError,
    StorageAccessError,
    StorageTimeoutError,
    ThrottledError,
)
from pqindex.io.listing import list_objects
from pqindex.io.objstore import ObjectStoreSource
from pqindex.io.source import (
    LOCAL_MAX_GAP,
    REMOTE_MAX_GAP,
    REMOTE_TAIL_BYTES,
    SPLIT_PART_BYTES,
    IOStats,
    LocalFileSource,
    ObjectInfo,
)
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)

DATA = CORPUS / "data"
# large_string_map.brotli.parquet inflates 4 KB into 2 GB of strings: its reads cost
# 35 s and take no path on S3 that the other files do not take.
CORPUS_FILES = sorted(
    p for p in DATA.glob("*.parquet")
    if "encrypt" not in p.name and p.stat().st_size < 2_000_000
    and p.name != "large_string_map.brotli.parquet"
)


@pytest.fixture(scope="module")
def bucket(s3: S3Endpoint) -> str:  # noqa: F811
    return s3.new_bucket()


def _gets(ep: S3Endpoint) -> list[Any]:
    return [r for r in ep.requests if r.method == "GET"]


def _url(bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key}"


# ------------------------------------------------------------------ same answers


@pytest.fixture(scope="module")
def corpus_bucket(s3: S3Endpoint) -> str:  # noqa: F811
    b = s3.new_bucket("corpus")
    for p in CORPUS_FILES:
        s3.put(b, p.name, p.read_bytes())
    return b


def _same(a: pa.Table, b: pa.Table) -> bool:
    """Equal schemas and values; NaN equals NaN (``Table.equals`` says it does not)."""
    return a.schema == b.schema and (a.equals(b) or repr(a.to_pylist()) == repr(b.to_pylist()))


def _read_or_error(source: str, **kw: Any) -> pa.Table | type[BaseException]:
    try:
        return pqindex.dataset(source, **kw).to_table()
    except Exception as e:  # the same failure both ways (not this test's concern which)
        return type(e)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in CORPUS_FILES])
def test_corpus_reads_the_same_on_s3(
    s3: S3Endpoint, corpus_bucket: str, path: Path  # noqa: F811
) -> None:
    local = _read_or_error(str(path))
    remote = _read_or_error(_url(corpus_bucket, path.name), storage_options=s3.storage_options())
    if isinstance(local, pa.Table):
        assert isinstance(remote, pa.Table), remote
        assert _same(remote, local)
    else:
        assert remote is local


WHERES = [None, "id = 1234", "id BETWEEN 1990 AND 2010", "category = 'beta' AND f64 > 10",
          "shuffled IN (3, 4000, 77)"]


@pytest.mark.parametrize("name", list(writers.WRITERS))
def test_writers_read_the_same_on_s3(
    s3: S3Endpoint, bucket: str, written_files: writers.FileCache, name: str  # noqa: F811
) -> None:
    path = written_files[name]
    key = f"writers/{name}/{path.name}"
    s3.put(bucket, key, path.read_bytes())
    ref = pq.read_table(path)
    for where in WHERES:
        local = pqindex.dataset(str(path)).scan(where=where).to_table()
        remote = pqindex.dataset(_url(bucket, key), storage_options=s3.storage_options()) \
            .scan(where=where).to_table()
        assert _same(remote, local), where
        if where == "id = 1234":
            assert remote.column("id").to_pylist() == [1234]
            assert _same(remote.select(ref.column_names), ref.slice(1234, 1))
        if where is None:
            assert _same(remote.select(ref.column_names), ref)


@pytest.fixture(scope="module")
def sorted_dataset(s3: S3Endpoint, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table]:  # noqa: F811
    """Six files of 4,000 ids each, sorted across files, hive-partitioned by ``part``."""
    b = s3.new_bucket("sorted")
    rng = np.random.default_rng(11)
    tables = []
    for i in range(6):
        ids = np.arange(i * 4000, (i + 1) * 4000, dtype=np.int64)
        t = pa.table({"id": ids, "x": rng.normal(size=4000),
                      "s": pa.array([f"v{k % 97}" for k in ids])})
        local = tmp_path_factory.mktemp("sorted") / "f.parquet"
        pqindex.write_table(t, local, sort_by="id", row_group_rows=2000, page_rows=250)
        s3.put(b, f"t/part={i % 2}/f{i}.parquet", local.read_bytes())
        tables.append(t.append_column("part", pa.array([i % 2] * 4000, pa.int64())))
    return f"s3://{b}/t", pa.concat_tables(tables)


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(lo=st.integers(-100, 24_100), width=st.integers(0, 3000), part=st.sampled_from([None, 0, 1]))
def test_random_ranges_match_pyarrow(
    s3: S3Endpoint, sorted_dataset: tuple[str, pa.Table], lo: int, width: int,  # noqa: F811
    part: int | None,
) -> None:
    url, ref = sorted_dataset
    where = f"id BETWEEN {lo} AND {lo + width}" + ("" if part is None else f" AND part = {part}")
    got = pqindex.dataset(url, storage_options=s3.storage_options()).scan(where=where).to_table()
    mask = pc.and_(pc.greater_equal(ref["id"], lo), pc.less_equal(ref["id"], lo + width))
    if part is not None:
        mask = pc.and_(mask, pc.equal(ref["part"], part))
    want = ref.filter(mask)
    assert got.sort_by("id").select(want.column_names).equals(want.sort_by("id"))


# ------------------------------------------------------------------ requests


def _written(tmp_path: Path, rows: int = 100_000, **kw: Any) -> Path:
    t = pa.table({"id": np.arange(rows, dtype=np.int64),
                  "x": np.random.default_rng(3).normal(size=rows)})
    p = tmp_path / "f.parquet"
    pqindex.write_table(t, p, sort_by="id", row_group_rows=25_000, page_rows=1_000, **kw)
    return p


def test_footer_and_page_index_in_one_request(
    s3: S3Endpoint, bucket: str, tmp_path: Path  # noqa: F811
) -> None:
    path = _written(tmp_path)
    key = f"one-request/{uuid.uuid4().hex}.parquet"
    s3.put(bucket, key, path.read_bytes())
    s3.reset_log()
    stats = IOStats()
    pf = ParquetFile.open(_url(bucket, key), stats=stats, storage_options=s3.storage_options())
    for rg in range(pf.num_row_groups):
        for col in range(len(pf.schema.leaves)):
            assert pf.column_index(rg, col) is not None
            assert pf.offset_index(rg, col) is not None
    size = path.stat().st_size
    assert size > 12 and pf.file_size == size
    # One suffix-range GET, no HEAD; the page index was inside it.
    assert [(r.method, r.range) for r in s3.requests] == [("GET", f"bytes=-{REMOTE_TAIL_BYTES}")]
    assert (stats.requests, stats.round_trips) == (1, 1)
    assert stats.trace == [(max(0, size - REMOTE_TAIL_BYTES), min(size, REMOTE_TAIL_BYTES))]
    assert pf.source.etag is not None


def test_footer_larger_than_the_tail_costs_exactly_one_more_request(
    s3: S3Endpoint, bucket: str, written_files: writers.FileCache  # noqa: F811
) -> None:
    path = written_files["wide_footer"]
    key = f"wide/{uuid.uuid4().hex}.parquet"
    s3.put(bucket, key, path.read_bytes())
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(-8, 2)
        footer_len = int.from_bytes(f.read(4), "little")
    tail = 4096
    assert footer_len + 8 > tail
    stats = IOStats()
    ParquetFile.open(_url(bucket, key), stats=stats, tail_bytes=tail,
                     storage_options=s3.storage_options())
    start = size - 8 - footer_len
    assert stats.trace == [(size - tail, tail), (start, size - tail - start)]
    assert stats.round_trips == 2


def test_read_ranges_is_one_concurrent_wave(
    s3: S3Endpoint, bucket: str, tmp_path: Path  # noqa: F811
) -> None:
    path = _written(tmp_path)
    key = f"wave/{uuid.uuid4().hex}.parquet"
    s3.put(bucket, key, path.read_bytes())
    size = path.stat().st_size
    rng = np.random.default_rng(5)
    ranges = [(int(o), int(n)) for o, n in zip(rng.integers(0, size - 5000, 12),
                                                rng.integers(1, 5000, 12), strict=True)]
    stats = IOStats()
    src = ObjectStoreSource(_url(bucket, key), stats, s3.storage_options(),
                            ObjectInfo(size=size))
    s3.reset_log()
    s3.delay = 0.2  # long enough that concurrent requests overlap at the proxy
    try:
        got = src.read_ranges(ranges)
    finally:
        s3.delay = 0.0
    local = LocalFileSource(path)
    assert got == [local.read(o, n) for o, n in ranges]
    assert (stats.requests, stats.round_trips) == (12, 1)
    assert len(_gets(s3)) == 12
    assert s3.max_in_flight > 1


def test_a_large_range_is_split_into_parallel_parts(
    s3: S3Endpoint, bucket: str  # noqa: F811
) -> None:
    n = 2 * SPLIT_PART_BYTES + 12345
    blob = np.random.default_rng(1).integers(0, 256, n, dtype=np.uint8).tobytes()
    key = f"big/{uuid.uuid4().hex}.bin"
    s3.put(bucket, key, blob)
    stats = IOStats()
    src = ObjectStoreSource(_url(bucket, key), stats, s3.storage_options(), ObjectInfo(size=n))
    (got,) = src.read_ranges([(7, n - 7)])
    assert got == blob[7:]
    assert stats.requests == 2 and stats.round_trips == 1
    assert all(length >= SPLIT_PART_BYTES for _, length in stats.trace)
    assert sum(length for _, length in stats.trace) == n - 7


def test_coalescing_by_store_cost(s3: S3Endpoint, bucket: str, tmp_path: Path) -> None:  # noqa: F811
    path = _written(tmp_path)
    local = LocalFileSource(path)
    remote = ObjectStoreSource(_url(bucket, "x.parquet"), None, s3.storage_options(),
                               ObjectInfo(size=1))
    ranges = [(0, 100), (100 + LOCAL_MAX_GAP, 10), (100 + LOCAL_MAX_GAP + 10 + LOCAL_MAX_GAP + 1, 5)]
    assert local.coalesce(ranges) == [(0, 100 + LOCAL_MAX_GAP + 10), ranges[2]]
    far = [(0, 10), (10 + REMOTE_MAX_GAP, 10), (20 + 2 * REMOTE_MAX_GAP + 1, 10)]
    assert remote.coalesce(far) == [(0, 20 + REMOTE_MAX_GAP), far[2]]
    assert remote.coalesce(ranges) == [(0, ranges[2][0] + 5)]
    # Large neighbours are merged only up to one split part: a wave's parts transfer
    # in parallel, one long response would serialize them. Overlaps always merge.
    mib = 1024 * 1024
    chunks = [(k * 4 * mib, 4 * mib - 1000) for k in range(4)]  # 1,000-byte gaps
    assert remote.coalesce(chunks) == [(0, 8 * mib - 1000), (8 * mib, 8 * mib - 1000)]
    assert all(n <= SPLIT_PART_BYTES for _, n in remote.coalesce(chunks))
    assert remote.coalesce([(0, 9 * mib), (mib, 9 * mib)]) == [(0, 10 * mib)]
    assert local.coalesce(chunks) == [(0, 16 * mib - 1000)]  # local: no cap


# ------------------------------------------------------------------ listing


def test_listing_one_request_with_hive_partitions(
    s3: S3Endpoint, bucket: str, tmp_path: Path  # noqa: F811
) -> None:
    path = _written(tmp_path, rows=2000)
    data = path.read_bytes()
    root = f"list-{uuid.uuid4().hex[:8]}"
    keys = ["year=2024/month=1/a.parquet", "year=2024/month=2/b.parquet",
            "year=2025/month=1/c.parquet", "year=2025/month=1/_SUCCESS",
            "_temporary/year=2025/d.parquet", ".hidden/e.parquet", "year=2025/.f.parquet.crc"]
    for k in keys:
        s3.put(bucket, f"{root}/{k}", data)
    s3.reset_log()
    disc = discover(f"s3://{bucket}/{root}", s3.storage_options())
    # One LIST, and the manifest looked for beside it (absent here: a 404).
    assert sorted(r.query for r in s3.requests) == ["", f"list-type=2&prefix={root}%2F"]
    assert [r.path for r in s3.requests if not r.query] == [
        f"/{bucket}/{root}/_pqindex_manifest.json"]
    assert disc.manifest is None
    assert (disc.io.requests, disc.io.round_trips) == (2, 1)
    assert [f.path for f in disc.files] == [f"s3://{bucket}/{root}/{k}" for k in keys[:3]]
    assert disc.partition_columns == ("year", "month")
    assert disc.partition_types == {"year": "int64", "month": "int64"}
    assert [disc.partition_values(f) for f in disc.files] == [
        {"year": 2024, "month": 1}, {"year": 2024, "month": 2}, {"year": 2025, "month": 1}]
    for f in disc.files:
        assert f.info is not None and f.info.size == len(data) and f.info.etag
    # A later open needs no HEAD: the listing gave size and ETag.
    s3.reset_log()
    stats = IOStats()
    ParquetFile.open(disc.files[0].path, stats=stats, storage_options=s3.storage_options(),
                     info=disc.files[0].info)
    assert all(r.range is not None for r in s3.requests)
    ds = pqindex.dataset(f"s3://{bucket}/{root}", storage_options=s3.storage_options())
    got = ds.to_table()
    assert got.num_rows == 3 * 2000
    assert sorted(set(zip(got["year"].to_pylist(), got["month"].to_pylist(), strict=True))) == [
        (2024, 1), (2024, 2), (2025, 1)]


def test_listing_paginates(s3: S3Endpoint, bucket: str) -> None:  # noqa: F811
    root = f"many-{uuid.uuid4().hex[:8]}"
    client = s3.boto3()
    for i in range(1003):
        client.put_object(Bucket=bucket, Key=f"{root}/f{i:04d}.parquet", Body=b"x")
    s3.reset_log()
    listed = list_objects(f"s3://{bucket}/{root}", s3.storage_options())
    assert len(listed) == 1003
    assert len(s3.requests) == 2  # two pages of at most 1,000 keys


# ------------------------------------------------------------------ cache


def test_warm_open_costs_no_request(s3: S3Endpoint, bucket: str, tmp_path: Path) -> None:  # noqa: F811
    path = _written(tmp_path)
    key = f"warm/{uuid.uuid4().hex}.parquet"
    s3.put(bucket, key, path.read_bytes())
    (url, info), = list_objects(_url(bucket, key.rsplit("/", 1)[0]) + "/",
                                s3.storage_options())
    cold = IOStats()
    a = ParquetFile.open(url, stats=cold, storage_options=s3.storage_options(), info=info)
    assert cold.requests == 1
    s3.reset_log()
    warm = IOStats()
    b = ParquetFile.open(url, stats=warm, storage_options=s3.storage_options(), info=info)
    assert (warm.requests, warm.round_trips, len(s3.requests)) == (0, 0, 0)
    assert b.footer_bytes == a.footer_bytes
    assert b.column_index(0, 0) == a.column_index(0, 0)
    assert len(s3.requests) == 0


def test_a_changed_object_is_reread_never_mixed(
    s3: S3Endpoint, bucket: str, tmp_path: Path  # noqa: F811
) -> None:
    old = _written(tmp_path, rows=200_000)  # larger than the tail: data is read later
    key = f"changed/{uuid.uuid4().hex}.parquet"
    s3.put(bucket, key, old.read_bytes())
    opts = s3.storage_options()
    url = _url(bucket, key)
    ds = pqindex.dataset(url, storage_options=opts)
    assert ds.scan(where="id = 10").to_table().num_rows == 1
    # Rewritten with other rows while the dataset is open.
    t = pa.table({"id": np.arange(1_000_000, 1_070_000, dtype=np.int64),
                  "x": np.zeros(70_000)})
    new = tmp_path / "new.parquet"
    pqindex.write_table(t, new, sort_by="id", row_group_rows=25_000, page_rows=1_000)
    s3.put(bucket, key, new.read_bytes())
    with pytest.raises(ObjectChangedError) as exc:
        ds.scan(where="id = 20").to_table()  # the old footer with the new object's bytes
    assert url in str(exc.value)
    # A new listing sees a new ETag: the new tail is read, not the cached one.
    fresh = pqindex.dataset(url, storage_options=opts).to_table()
    assert fresh.column("id").to_pylist() == t.column("id").to_pylist()


def test_cache_is_bounded_in_bytes() -> None:
    from pqindex.io.cache import MetadataCache

    cache = MetadataCache(max_bytes=1000)
    for i in range(5):
        cache.put((f"s3://b/{i}", 400, "e"), [(0, b"x" * 400)])
    assert cache.nbytes <= 1000
    assert cache.get(("s3://b/4", 400, "e")) is not None
    assert cache.get(("s3://b/0", 400, "e")) is None
    cache.put(("s3://b/4", 400, "e2"), [(0, b"y" * 400)])  # a new version replaces the old
    assert cache.get(("s3://b/4", 400, "e")) is None
    assert cache.get(("s3://b/4", 400, "e2")) == ((0, b"y" * 400),)


# ------------------------------------------------------------------ errors


def test_absent_bucket(s3: S3Endpoint) -> None:  # noqa: F811
    url = f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/t"
    with pytest.raises(ObjectNotFoundError) as exc:
        pqindex.dataset(url, storage_options=s3.storage_options()).to_table()
    assert url in str(exc.value) and "LIST" in str(exc.value)
    with pytest.raises(ObjectNotFoundError) as exc2:
        ParquetFile.open(url + "/f.parquet", storage_options=s3.storage_options())
    assert "bucket does not exist" in str(exc2.value)


def test_absent_key(s3: S3Endpoint, bucket: str) -> None:  # noqa: F811
    url = _url(bucket, f"absent/{uuid.uuid4().hex}.parquet")
    with pytest.raises(PqIndexError) as exc:
        pqindex.dataset(url, storage_options=s3.storage_options()).to_table()
    assert url in str(exc.value)
    with pytest.raises(ObjectNotFoundError) as exc2:
        ParquetFile.open(url, storage_options=s3.storage_options())
    assert url in str(exc2.value) and "no such object" in str(exc2.value)


@pytest.fixture
def enforced_auth() -> Iterator[None]:
    """moto checks signatures and keys only when told to (the server runs in-process)."""
    from moto import settings as moto_settings
    from moto.core.authorization import ActionAuthenticatorMixin

    before = moto_settings.INITIAL_NO_AUTH_ACTION_COUNT
    moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    ActionAuthenticatorMixin.request_count = 0
    try:
        yield
    finally:
        moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = before


def test_bad_credentials(s3: S3Endpoint, bucket: str, enforced_auth: None) -> None:  # noqa: F811
    opts = s3.storage_options(access_key_id="AKIAWRONGWRONGWRONG1",
                              secret_access_key="wrong", max_retries="0")
    url = _url(bucket, "any.parquet")
    with pytest.raises(StorageAccessError) as exc:
        ParquetFile.open(url, storage_options=opts)
    assert url in str(exc.value) and "GET" in str(exc.value)
    with pytest.raises(StorageAccessError):
        pqindex.dataset(f"s3://{bucket}/", storage_options=opts).files  # noqa: B018


def test_throttling_is_retried_then_an_error(
    s3: S3Endpoint, bucket: str, tmp_path: Path  # noqa: F811
) -> None:
    path = _written(tmp_path, rows=2000)
    key = f"throttle/{uuid.uuid4().hex}.parquet"
    s3.put(bucket, key, path.read_bytes())
    opts = s3.storage_options(max_retries="3", init_backoff="0.01", max_backoff="0.05")
    s3.reset_log()
    s3.fail_next = 2  # two 503 SlowDown, then the real answer
    pf = ParquetFile.open(_url(bucket, key), storage_options=opts)
    assert pf.num_rows == 2000
    assert len(s3.requests) == 3
    s3.fail_next = 100
    try:
        with pytest.raises(ThrottledError) as exc:
            ParquetFile.open(_url(bucket, key), storage_options=opts)
    finally:
        s3.fail_next = 0
    assert _url(bucket, key) in str(exc.value)


def test_timeout(s3: S3Endpoint, bucket: str) -> None:  # noqa: F811
    opts = s3.storage_options(timeout="0.3", max_retries="0")
    s3.delay = 1.0
    try:
        with pytest.raises(StorageTimeoutError) as exc:
            ParquetFile.open(_url(bucket, "slow.parquet"), storage_options=opts)
    finally:
        s3.delay = 0.0
    assert "slow.parquet" in str(exc.value)


def test_environment_configures_the_store(
    s3: S3Endpoint, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    path = _written(tmp_path, rows=3000)
    key = f"env/{uuid.uuid4().hex}.parquet"
    s3.put(bucket, key, path.read_bytes())
    for k, v in {"AWS_ENDPOINT_URL": s3.url, "AWS_ACCESS_KEY_ID": "testing",
                 "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                 "AWS_ALLOW_HTTP": "true"}.items():
        monkeypatch.setenv(k, v)
    got = pqindex.dataset(_url(bucket, key)).to_table()
    assert _same(got, pq.read_table(path))
    assert os.environ["AWS_ENDPOINT_URL"] == s3.url


def test_footers_of_many_files_in_one_wave(
    s3: S3Endpoint, sorted_dataset: tuple[str, pa.Table]  # noqa: F811
) -> None:
    url, _ = sorted_dataset
    metadata_cache().clear()
    s3.reset_log()
    s3.delay = 0.05  # a wave's requests overlap for sure: the proxy counts waves
    try:
        ds = pqindex.dataset(url, storage_options=s3.storage_options())
        scan = ds.scan(where="id = 9001")
        assert scan.to_table().column("id").to_pylist() == [9001]
    finally:
        s3.delay = 0.0
    tails = [r for r in s3.requests if r.range == f"bytes=-{REMOTE_TAIL_BYTES}"]
    # every file's tail in one wave (the predicate names no partition column)
    assert len(tails) == 6
    assert sum(r.query.startswith("list-type=2") for r in s3.requests) == 1
    rep = scan.report.to_dict()
    # every request: the LIST, the manifest looked for beside it, tails, data
    assert rep["requests"] == len(s3.requests)
    assert rep["bytes_read"] <= s3.body_bytes  # the proxy also counts LIST/404 bodies
    assert rep["round_trips"] == s3.waves
    # warm: a new dataset over the same unchanged objects reads no tail again
    s3.reset_log()
    again = pqindex.dataset(url, storage_options=s3.storage_options()).scan(where="id = 9001")
    assert again.to_table().num_rows == 1
    assert not [r for r in s3.requests if r.range == f"bytes=-{REMOTE_TAIL_BYTES}"]


def test_head_of_a_lake_reads_the_tails_of_its_first_step_only(
    s3: S3Endpoint, tmp_path: Path  # noqa: F811
) -> None:
    """``head(n)`` of 40 objects of 50 rows: one LIST, then steps of objects (1, 4,
    ...), each one wave of tails; for 80 rows the first two steps, and the other 35
    objects are never requested. Rows as ``to_table()``'s first n."""
    from pqindex.dataset.dataset import HEAD_FIRST, HEAD_GROWTH

    b = s3.new_bucket("head")
    local = tmp_path / "f.parquet"
    for i in range(40):
        pq.write_table(pa.table({"k": np.arange(i * 50, (i + 1) * 50, dtype=np.int64)}), local)
        s3.put(b, f"t/f{i:02d}.parquet", local.read_bytes())
    url = f"s3://{b}/t"
    want = pqindex.dataset(url, storage_options=s3.storage_options()).to_table().slice(0, 80)
    metadata_cache().clear()
    s3.reset_log()
    ds = pqindex.dataset(url, storage_options=s3.storage_options())
    got = ds.head(80)
    assert got.equals(want)
    keys = {r.path.rsplit("/", 1)[-1] for r in _gets(s3) if r.path.endswith(".parquet")}
    assert keys == {f"f{i:02d}.parquet" for i in range(HEAD_FIRST * (1 + HEAD_GROWTH))}
    assert sum(r.query.startswith("list-type=2") for r in s3.requests) == 1


def test_report_counts_the_requests_this_scan_caused(
    s3: S3Endpoint, sorted_dataset: tuple[str, pa.Table]  # noqa: F811
) -> None:
    """The first scan of a dataset pays the LIST (and the manifest lookup); later
    scans of the same dataset do not, and their reports say so. Requests and bytes
    equal the proxy's counts, scan after scan; io_stats(include_listing=True) adds
    up to every request made."""
    url, _ = sorted_dataset
    metadata_cache().clear()
    ds = pqindex.dataset(url, storage_options=s3.storage_options())
    total = 0
    for where in ("id = 9001", "id BETWEEN 100 AND 5000", "id = 9001"):
        s3.reset_log()
        scan = ds.scan(where=where)
        scan.to_table()
        lists = sum(r.query.startswith("list-type=2") for r in s3.requests)
        assert lists == (1 if total == 0 else 0)
        assert scan.report.requests == len(s3.requests), (where, str(scan.report))
        data = sum(int(r.range.split("=")[1].split("-")[1]) - int(r.range.split("=")[1]
                   .split("-")[0]) + 1 for r in s3.requests
                   if r.range and not r.range.startswith("bytes=-"))
        assert scan.report.bytes_read >= data
        total += len(s3.requests)
    assert sum(st.requests for st in ds.io_stats(include_listing=True).values()) == total
    assert sum(st.requests for st in ds.io_stats().values()) == total - 2  # LIST, 404
    # plan() and explain() report what they read too
    metadata_cache().clear()
    ds = pqindex.dataset(url, storage_options=s3.storage_options())
    s3.reset_log()
    plan = ds.plan(where="id = 9001")
    assert plan.report.requests == len(s3.requests)


def test_cli_query_with_storage_options(
    s3: S3Endpoint, sorted_dataset: tuple[str, pa.Table]  # noqa: F811
) -> None:
    import json

    from click.testing import CliRunner

    from pqindex.cli import cli

    url, _ = sorted_dataset
    opts = [a for k, v in s3.storage_options().items() for a in ("--storage-option", f"{k}={v}")]
    res = CliRunner().invoke(cli, ["query", url, "--where", "id = 77", "--format", "json",
                                   "--no-report", *opts])
    assert res.exit_code == 0, res.output
    assert [json.loads(line)["id"] for line in res.output.splitlines()] == [77]
    bad = CliRunner().invoke(cli, ["query", url + "-absent/x.parquet", *opts])
    assert bad.exit_code == 2
    assert "pqindex: error:" in bad.output and "-absent/x.parquet" in bad.output
    assert "Traceback" not in bad.output


def test_http_urls(s3: S3Endpoint, bucket: str, tmp_path: Path) -> None:  # noqa: F811
    """A public object read over plain HTTP (obstore's HTTP store, no signing)."""
    path = _written(tmp_path, rows=5000)
    key = f"http/{uuid.uuid4().hex}.parquet"
    s3.boto3().put_object(Bucket=bucket, Key=key, Body=path.read_bytes(), ACL="public-read")
    url = f"{s3.url}/{bucket}/{key}"
    s3.reset_log()
    got = pqindex.dataset(url).scan(where="id BETWEEN 10 AND 19").to_table()
    assert got.column("id").to_pylist() == list(range(10, 20))
    assert [r.method for r in s3.requests] == ["GET"]  # the whole file was in the tail
    with pytest.raises(ObjectNotFoundError) as exc:
        pqindex.dataset(url + ".absent.parquet").to_table()
    assert url + ".absent.parquet" in str(exc.value)


def test_in_flight_bound_is_configurable(
    s3: S3Endpoint, bucket: str, tmp_path: Path  # noqa: F811
) -> None:
    path = _written(tmp_path)
    key = f"bound/{uuid.uuid4().hex}.parquet"
    s3.put(bucket, key, path.read_bytes())
    size = path.stat().st_size
    ranges = [(i * 1000, 500) for i in range(8)]
    stats = IOStats()
    src = ObjectStoreSource(_url(bucket, key), stats, s3.storage_options(max_in_flight="2"),
                            ObjectInfo(size=size))
    s3.reset_log()
    s3.delay = 0.1
    try:
        got = src.read_ranges(ranges)
    finally:
        s3.delay = 0.0
    assert got == [path.read_bytes()[o : o + n] for o, n in ranges]
    assert s3.max_in_flight <= 2, s3.max_in_flight
    assert (stats.requests, stats.round_trips) == (8, 1), stats


def test_fsspec_wave_counts_one_round_trip(tmp_path: Path) -> None:
    import fsspec

    from pqindex.io.source import open_source

    path = _written(tmp_path, rows=3000)
    url = f"memory:///pqindex-wave-{uuid.uuid4().hex}/f.parquet"
    fs = fsspec.filesystem("memory")
    fs.pipe(url[len("memory://"):], path.read_bytes())
    try:
        stats = IOStats()
        src = open_source(url, stats)
        ranges = [(0, 4), (100, 50), (1000, 10)]
        assert src.read_ranges(ranges) == [path.read_bytes()[o : o + n] for o, n in ranges]
        assert (stats.requests, stats.round_trips) == (3, 1)
        assert src.tail(8)[-4:] == b"PAR1"
        assert stats.round_trips == 2
    finally:
        fs.rm(url[len("memory://"):])


def test_size_before_any_read_is_one_head(s3: S3Endpoint, bucket: str) -> None:  # noqa: F811
    key = f"head/{uuid.uuid4().hex}.bin"
    s3.put(bucket, key, b"x" * 1234)
    stats = IOStats()
    src = ObjectStoreSource(_url(bucket, key), stats, s3.storage_options())
    s3.reset_log()
    assert src.size() == 1234 and src.etag
    assert [r.method for r in s3.requests] == ["HEAD"]
    assert (stats.requests, stats.round_trips) == (1, 1)
    assert src.read(1000, 10) == b"x" * 10


@pytest.mark.parametrize("body", [b"", b"PAR1", b"not parquet at all, but long enough"])
def test_tiny_or_foreign_objects_are_corrupt_files(
    s3: S3Endpoint, bucket: str, body: bytes  # noqa: F811
) -> None:
    from pqindex.errors import CorruptFileError

    key = f"tiny/{uuid.uuid4().hex}.parquet"
    s3.put(bucket, key, body)
    with pytest.raises(CorruptFileError) as exc:
        ParquetFile.open(_url(bucket, key), storage_options=s3.storage_options())
    assert _url(bucket, key) in str(exc.value)


def test_store_clients_are_shared_by_equal_options_only() -> None:
    """One client per store and options: the same options in another mapping find it
    (a dataset opens thousands of objects), options that differ, even only in type
    (``1`` and ``True``), or hold an unhashable value, are told apart as by value."""
    from pqindex.io.objstore import get_store

    opts = {"endpoint": "http://127.0.0.1:9", "access_key_id": "k", "secret_access_key": "s",
            "region": "us-east-1", "allow_http": "true"}
    a, key = get_store("s3://shared-bucket/x/part-0.parquet", opts)
    assert key == "x/part-0.parquet"
    assert get_store("s3://shared-bucket/y.parquet", dict(reversed(opts.items())))[0] is a
    one = get_store("s3://shared-bucket/y.parquet", {**opts, "max_in_flight": 1})[0]
    true = get_store("s3://shared-bucket/y.parquet", {**opts, "max_in_flight": True})[0]
    assert one is not a and true is not one and one.max_in_flight == true.max_in_flight == 1
    listed = get_store("s3://shared-bucket/y.parquet",
                       {**opts, "default_headers": {"x-a": "1"}})[0]
    assert listed is get_store("s3://shared-bucket/z.parquet",
                               {**opts, "default_headers": {"x-a": "1"}})[0]
    assert get_store("s3://other-bucket/y.parquet", opts)[0] is not a


def test_a_lake_whose_first_file_lacks_a_column_reads_the_same_on_s3(
    s3: S3Endpoint, bucket: str, tmp_path: Path  # noqa: F811
) -> None:
    """Schema evolution on a store: a predicate on a column the first file lacks makes
    planning read every footer for the dataset's schema (one wave of tails), then the
    rows are the local dataset's and DuckDB's over the reference table."""
    import duckdb

    from test_scan_differential import _evolved_lake

    con = duckdb.connect()
    con.register("t", _evolved_lake(tmp_path))
    root = f"evolved-{uuid.uuid4().hex[:8]}"
    for p in sorted(tmp_path.rglob("*.parquet")):
        s3.put(bucket, f"{root}/{p.relative_to(tmp_path).as_posix()}", p.read_bytes())
    url = f"s3://{bucket}/{root}"
    for where in ["k IS NULL", "NOT (k > 3) AND part = 1", "k = 7 OR a = 3"]:
        metadata_cache().clear()
        s3.reset_log()
        sc = pqindex.dataset(url, storage_options=s3.storage_options()).scan(
            columns=["id", "k", "part"], where=where)
        got = sc.to_table()
        local = pqindex.dataset(tmp_path).scan(columns=["id", "k", "part"], where=where)
        assert _same(got, local.to_table()), where
        want = con.execute(f"SELECT id, k, part FROM t WHERE {where} ORDER BY id").fetchall()
        assert [tuple(r.values()) for r in got.sort_by("id").to_pylist()] == want, where
        # LIST + manifest probe, the tails, the data: nothing waits file by file.
        assert sc.report.round_trips <= 3, (where, sc.report.round_trips)


def test_glob_patterns_on_a_store_list_once(
    s3: S3Endpoint, bucket: str, tmp_path: Path  # noqa: F811
) -> None:
    """``s3://b/lake/dt=*/*.parquet``: one LIST of the pattern's base, the matching
    keys, hive partitions below the base, no manifest looked for."""
    path = _written(tmp_path, rows=500)
    data = path.read_bytes()
    root = f"glob-{uuid.uuid4().hex[:8]}"
    keys = ["dt=2024-01-01/a.parquet", "dt=2024-01-02/b.parquet", "dt=2024-01-02/c.txt",
            "other/d.parquet", "dt=2024-01-03/_SUCCESS"]
    for k in keys:
        s3.put(bucket, f"{root}/{k}", data)
    s3.reset_log()
    disc = discover(f"s3://{bucket}/{root}/dt=*/*.parquet", s3.storage_options())
    assert [f.path for f in disc.files] == [f"s3://{bucket}/{root}/{k}" for k in keys[:2]]
    assert [r.query for r in s3.requests] == [f"list-type=2&prefix={root}%2F"]
    assert disc.partition_types == {"dt": "date32"} and disc.manifest is None
    got = pqindex.dataset(f"s3://{bucket}/{root}/**/*.parquet",
                          storage_options=s3.storage_options()).to_table()
    assert got.num_rows == 3 * 500
    with pytest.raises(pqindex.UserInputError, match="no data files match"):
        pqindex.dataset(f"s3://{bucket}/{root}/*.csv",
                        storage_options=s3.storage_options()).to_table()


def test_directory_marker_objects_are_not_data(
    s3: S3Endpoint, bucket: str, tmp_path: Path  # noqa: F811
) -> None:
    """Empty ``dir/`` keys (the S3 console's folders, older Hadoop writers) and
    ``dir_$folder$`` keys are markers, not files; an empty object that is no marker
    is still a corrupt file, named."""
    path = _written(tmp_path, rows=300)
    root = f"markers-{uuid.uuid4().hex[:8]}"
    for k, data in [(f"{root}/", b""), (f"{root}/dt=1/", b""),
                    (f"{root}/dt=1/part-0.parquet", path.read_bytes()),
                    (f"{root}/dt=1_$folder$", b""), (f"{root}_$folder$", b"")]:
        s3.put(bucket, k, data)
    ds = pqindex.dataset(f"s3://{bucket}/{root}", storage_options=s3.storage_options())
    assert ds.files == [f"s3://{bucket}/{root}/dt=1/part-0.parquet"]
    assert ds.to_table().num_rows == 300
    s3.put(bucket, f"{root}/dt=1/empty.parquet", b"")
    with pytest.raises(pqindex.CorruptFileError, match=r"empty\.parquet"):
        pqindex.dataset(f"s3://{bucket}/{root}",
                        storage_options=s3.storage_options()).to_table()


def test_a_delta_log_on_a_store_makes_the_prefix_a_table(
    s3: S3Endpoint, bucket: str, tmp_path: Path  # noqa: F811
) -> None:
    """The LIST shows ``_delta_log/``: the prefix is read as a Delta table, through its
    log (tests/test_tables_delta.py), so a log deltalake cannot read is an error, never
    a read of files the log may have removed."""
    path = _written(tmp_path, rows=200)
    root = f"delta-{uuid.uuid4().hex[:8]}"
    s3.put(bucket, f"{root}/part-0.parquet", path.read_bytes())
    s3.put(bucket, f"{root}/_delta_log/00000000000000000000.json", b"{}")
    with pytest.raises(pqindex.UserInputError, match="Delta"):
        pqindex.dataset(f"s3://{bucket}/{root}", storage_options=s3.storage_options()).scan(
        ).to_table()
