"""The key index on an object store: requests and round trips from the proxy's log.

A lake of files whose ``user_id`` is unique and random across files (every file's
min/max covers nearly every key, so statistics rule nothing out); the index is built
with ``pqindex manifest --key-index``. Counts are asserted from what reached the
proxy, never durations.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

import pqindex
from pqindex.cli import cli
from pqindex.dataset.key_index import clear_decoded
from pqindex.io.cache import metadata_cache
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)

FILES = 12
ROWS = 2_000


@pytest.fixture(scope="module")
def lake(s3: S3Endpoint, tmp_path_factory: pytest.TempPathFactory  # noqa: F811
         ) -> tuple[str, pa.Table]:
    bucket = s3.new_bucket("keyindex")
    rng = np.random.default_rng(41)
    ids = rng.permutation(10 * FILES * ROWS)[: FILES * ROWS].astype(np.int64)
    tables = []
    for k in range(FILES):
        part = ids[k * ROWS:(k + 1) * ROWS]
        t = pa.table({"user_id": part, "v": pa.array([f"v{x}" for x in part])})
        local = tmp_path_factory.mktemp("ki") / "f.parquet"
        pqindex.write_table(t, local, row_group_rows=500, indexes=None)
        s3.put(bucket, f"lake/part-{k:03d}.parquet", local.read_bytes())
        tables.append(t)
    url = f"s3://{bucket}/lake"
    opts = s3.storage_options()
    args = ["manifest", url, "--key-index", "user_id"]
    for k, v in opts.items():
        args += ["--storage-option", f"{k}={v}"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    return url, pa.concat_tables(tables)


def _cold_scan(s3: S3Endpoint, url: str, where: str) -> tuple[pa.Table, dict]:  # noqa: F811
    metadata_cache().clear()
    clear_decoded()
    s3.reset_log()
    scan = pqindex.dataset(url, storage_options=s3.storage_options()).scan(where=where)
    got = scan.to_table()
    return got, scan.report.to_dict()


def _data_gets(s3: S3Endpoint) -> list[str]:  # noqa: F811
    return [r.path for r in s3.requests if r.path.endswith(".parquet")]


def test_one_key_is_a_few_round_trips(s3: S3Endpoint, lake: tuple[str, pa.Table]  # noqa: F811
                                      ) -> None:
    url, ref = lake
    key = int(ref["user_id"][ROWS * 5 + 7].as_py())
    got, rep = _cold_scan(s3, url, f"user_id = {key}")
    assert got.column("user_id").to_pylist() == [key]
    files = set(_data_gets(s3))
    assert len(files) == 1, files  # the one file holding the key, nothing else
    assert rep["key_index"]["files_named"] == 1
    assert rep["requests"] == len(s3.requests)
    # LIST (the manifest GET beside it), shard tail, shard pages, data tail, data pages.
    assert s3.waves <= 5, [(r.method, r.path, r.range) for r in s3.requests]
    assert len(s3.requests) <= 3 + 2 * len(files), [(r.path, r.range) for r in s3.requests]


def test_an_in_list_is_one_wave_of_probes(s3: S3Endpoint, lake: tuple[str, pa.Table]  # noqa: F811
                                          ) -> None:
    url, ref = lake
    keys = [int(ref["user_id"][i].as_py()) for i in range(0, FILES * ROWS, FILES * ROWS // 20)]
    got, rep = _cold_scan(s3, url, f"user_id IN ({', '.join(map(str, keys))})")
    assert sorted(got.column("user_id").to_pylist()) == sorted(keys)
    assert rep["key_index"]["shards"] and rep["key_index"]["fallback"] is None
    files = set(_data_gets(s3))
    assert len(files) == len({i // ROWS for i in range(0, FILES * ROWS, FILES * ROWS // 20)})
    assert s3.waves <= 5
    assert len(s3.requests) <= 3 + 2 * len(files)


def test_an_absent_key_opens_no_data_file(s3: S3Endpoint, lake: tuple[str, pa.Table]  # noqa: F811
                                          ) -> None:
    url, ref = lake
    present = set(ref["user_id"].to_pylist())
    lo, hi = pc.min(ref["user_id"]).as_py(), pc.max(ref["user_id"]).as_py()
    absent = next(k for k in range((lo + hi) // 2, hi) if k not in present)
    got, rep = _cold_scan(s3, url, f"user_id = {absent}")
    assert got.num_rows == 0
    assert _data_gets(s3) == []
    assert rep["files_skipped"].get("key index") == FILES
    assert s3.waves <= 3, [(r.method, r.path, r.range) for r in s3.requests]


def test_on_a_commit_point_no_list_and_fewer_round_trips(
        s3: S3Endpoint, tmp_path_factory: pytest.TempPathFactory) -> None:  # noqa: F811
    """A lake the pipeline committed: the index joins its manifest, which stays a
    commit point, so a lookup needs no LIST: the manifest, the shard (whole, one
    GET), the data file's tail and pages."""
    from pqindex.dataset.manifest import COMMIT_POINT, MANIFEST_NAME
    from pqindex.spark.commit import STAGING
    from pqindex.spark.remote_commit import commit_job_remote

    bucket = s3.new_bucket("kicommit")
    so = s3.storage_options()
    rng = np.random.default_rng(7)
    ids = rng.permutation(40_000)[:8_000].astype(np.int64)
    job, staged = "1" * 32, []
    for k in range(4):
        t = pa.table({"user_id": ids[k * 2000:(k + 1) * 2000]})
        local = tmp_path_factory.mktemp("kc") / "f.parquet"
        pqindex.write_table(t, local, row_group_rows=500, indexes=None)
        key = f"lake/{STAGING}/{job}/task-0-0/p{k}.parquet"
        s3.put(bucket, key, local.read_bytes())
        staged.append({"path": f"p{k}.parquet", "staged": f"s3://{bucket}/{key}",
                       "rows": 2000, "bytes": local.stat().st_size, "job": job})
    url = f"s3://{bucket}/lake"
    commit_job_remote(url, job, staged, mode="append", info={}, base_etag=None,
                      storage_options=so)
    args = ["manifest", url, "--key-index", "user_id"]
    for k, v in so.items():
        args += ["--storage-option", f"{k}={v}"]
    s3.reset_log()
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    # The build fetched the manifest once (it names the files, and its version makes
    # the commit conditional): no LIST, and no second or third GET of it in a row.
    assert not any(r.query.startswith("list-type=2") for r in s3.requests)
    manifest_gets = [r for r in s3.requests
                     if r.method == "GET" and r.path.endswith(MANIFEST_NAME)]
    assert len(manifest_gets) == 1, [(r.method, r.path) for r in s3.requests]
    m = json.loads(s3.boto3().get_object(Bucket=bucket, Key=f"lake/{MANIFEST_NAME}")
                   ["Body"].read())
    assert m[COMMIT_POINT] is True and "user_id" in m["key_index"]["columns"]

    def cold(where: str) -> pa.Table:
        metadata_cache().clear()
        clear_decoded()
        s3.reset_log()
        s3.delay = 0.05  # a wave's requests overlap for sure: the proxy counts waves
        try:
            return pqindex.dataset(url, storage_options=so, listing=False).scan(
                where=where).to_table()
        finally:
            s3.delay = 0.0

    key = int(ids[5_555])
    assert cold(f"user_id = {key}")["user_id"].to_pylist() == [key]
    trace = [(r.method, r.path, r.range) for r in s3.requests]
    assert not any(r.query.startswith("list-type=2") for r in s3.requests), trace
    assert len({p for p in _data_gets(s3)}) == 1
    assert s3.waves <= 4 and len(s3.requests) <= 3 + 2, trace
    present = set(ids.tolist())
    absent = next(k for k in range(20_000, 40_000) if k not in present)
    assert cold(f"user_id = {absent}").num_rows == 0
    assert _data_gets(s3) == [] and s3.waves <= 2, [(r.path, r.range) for r in s3.requests]


def test_an_in_list_over_many_shards_on_a_commit_point(
        s3: S3Endpoint, tmp_path_factory: pytest.TempPathFactory,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's 20-key IN, scaled down: 20 keys in 20 files, each key in a shard of
    its own. Every shard is read whole in one wave, every data file in one request
    (its tail holds it all): the manifest, the shards, the files; at most 3 + 2 per
    matching file requests."""
    from pqindex.dataset import key_index
    from pqindex.spark.commit import STAGING
    from pqindex.spark.remote_commit import commit_job_remote

    monkeypatch.setattr(key_index, "SHARD_BYTES", 16 << 10)  # ~1,000 entries a shard
    bucket = s3.new_bucket("kimany")
    so = s3.storage_options()
    rng = np.random.default_rng(20)
    files, rows = 24, 1000
    ids = rng.permutation(100 * files * rows)[: files * rows].astype(np.int64)
    job, staged = "2" * 32, []
    for k in range(files):
        t = pa.table({"user_id": ids[k * rows:(k + 1) * rows]})
        local = tmp_path_factory.mktemp("km") / "f.parquet"
        pqindex.write_table(t, local, row_group_rows=rows, indexes=None)
        key = f"lake/{STAGING}/{job}/task-0-0/p{k:02d}.parquet"
        s3.put(bucket, key, local.read_bytes())
        staged.append({"path": f"p{k:02d}.parquet", "staged": f"s3://{bucket}/{key}",
                       "rows": rows, "bytes": local.stat().st_size, "job": job})
    url = f"s3://{bucket}/lake"
    commit_job_remote(url, job, staged, mode="append", info={}, base_etag=None,
                      storage_options=so)
    key_index.write_manifest_with_key_index(url, ["user_id"], storage_options=so)
    order = np.sort(ids)
    # One key from each of 20 shards, each in a file of its own (the case).
    per_shard = len(order) // len(key_index.parse_key_index(json.loads(
        s3.boto3().get_object(Bucket=bucket, Key="lake/_pqindex_manifest.json")["Body"]
        .read())["key_index"]).columns["user_id"].shards)
    file_of = dict(zip(ids.tolist(), (np.arange(len(ids)) // rows).tolist(), strict=True))
    keys, used = [], set()
    for i in range(20):
        k = next(int(v) for v in order[i * per_shard + 2:(i + 1) * per_shard - 2]
                 if file_of[int(v)] not in used)
        keys.append(k)
        used.add(file_of[k])
    where = f"user_id IN ({', '.join(map(str, keys))})"
    metadata_cache().clear()
    key_index.clear_decoded()
    s3.reset_log()
    s3.delay = 0.05  # a wave's requests overlap for sure: the proxy counts waves
    try:
        scan = pqindex.dataset(url, storage_options=so, listing=False).scan(where=where)
        got = scan.to_table()
    finally:
        s3.delay = 0.0
    assert sorted(got["user_id"].to_pylist()) == sorted(keys)
    trace = [(r.method, r.path, r.range) for r in s3.requests]
    rep = scan.report.to_dict()["key_index"]
    assert rep["shards_whole"] == len(rep["shards"]) >= 15, rep
    matching = {p for p in _data_gets(s3)}
    assert len(matching) == 20
    assert s3.waves <= 3, trace  # the manifest, the shards, the data files
    assert len(s3.requests) <= 3 + 2 * len(matching), trace


def test_a_build_reads_each_file_once_and_a_rebuild_deletes_in_bulk(
        s3: S3Endpoint, tmp_path_factory: pytest.TempPathFactory,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``--key-index`` over a listing is one pass: each data file is read once (its
    tail holds it whole) for both the manifest and the keys, though the lake spans
    several batches and the keys are read as the tails land, and the manifest is
    fetched once before the listing. A rebuild of other columns deletes the
    superseded shards in one bulk request (DeleteObjects), not a DELETE each."""
    from pqindex.dataset import key_index
    from pqindex.dataset import manifest as manifest_mod

    monkeypatch.setattr(key_index, "SHARD_BYTES", 16 << 10)  # several shards
    monkeypatch.setattr(key_index, "_TAIL_BATCH", 3)
    monkeypatch.setattr(manifest_mod, "_WRITE_BATCH", 3)
    bucket = s3.new_bucket("kionepass")
    so = s3.storage_options()
    rng = np.random.default_rng(5)
    ids = rng.permutation(100_000)[:8_000].astype(np.int64)
    for k in range(8):
        part = ids[k * 1000:(k + 1) * 1000]
        t = pa.table({"user_id": part, "v": pa.array([f"v{x}" for x in part])})
        local = tmp_path_factory.mktemp("k1") / "f.parquet"
        pqindex.write_table(t, local, row_group_rows=500, indexes=None)
        s3.put(bucket, f"lake/p{k}.parquet", local.read_bytes())
    url = f"s3://{bucket}/lake"
    metadata_cache().clear()
    s3.reset_log()
    # Tails land one by one while the key reader takes each file as its tail lands:
    # a file it took early would be read a second time.
    monkeypatch.setattr(s3, "delay", 0.02)
    key_index.write_manifest_with_key_index(url, ["user_id"], storage_options=so)
    monkeypatch.setattr(s3, "delay", 0.0)
    gets = [r.path for r in s3.requests if r.method == "GET" and r.path.endswith(".parquet")]
    assert sorted(gets) == sorted(set(gets)) and len(gets) == 8, gets
    manifest_gets = [r for r in s3.requests
                     if r.method == "GET" and r.path.endswith("_pqindex_manifest.json")]
    # One GET decides commit point, previous index and refresh; the other is the
    # listing's own, beside the LIST (four before: three in sequence).
    assert len(manifest_gets) == 2, manifest_gets

    def shards() -> set[str]:
        got = s3.boto3().list_objects_v2(Bucket=bucket, Prefix="lake/_pqindex/")
        return {o["Key"] for o in got.get("Contents", [])}

    first = shards()
    assert len(first) >= 4
    s3.reset_log()
    key_index.write_manifest_with_key_index(url, ["v"], storage_options=so)
    assert not first & shards() and shards()
    manifest_gets = [r for r in s3.requests
                     if r.method == "GET" and r.path.endswith("_pqindex_manifest.json")]
    assert len(manifest_gets) == 2, manifest_gets
    deletes = [r for r in s3.requests if r.method == "DELETE" or (
        r.method == "POST" and "delete" in r.query)]
    assert len(deletes) == 1 and deletes[0].method == "POST", [
        (r.method, r.path, r.query) for r in deletes]
    got = pqindex.dataset(url, storage_options=so).scan(
        where=f"v = 'v{int(ids[4321])}'").to_table()
    assert got["user_id"].to_pylist() == [int(ids[4321])]
