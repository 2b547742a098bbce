"""Lakes on object storage: write_table, add_indexes and the Spark pipeline against
a real S3 endpoint (moto's server behind the counting proxy of tests/s3_server.py).

References are independent: pyarrow reading the object's bytes (and reading it
from S3 itself), a full read + filter, Spark's own read of local source data.
"""

from __future__ import annotations

import io
import os
import sys
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # before the session starts

import pqindex
from pqindex.errors import InternalError
from pqindex.io.errors import ObjectChangedError, StorageError
from pqindex.io.listing import list_objects
from pqindex.spark.remote_commit import ConcurrentCommitError, commit_job_remote, manifest_etag
from pqindex.spark.task import parse_options, write_task
from pqindex.write import remote, remote_index
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)


@pytest.fixture(scope="module")
def bucket(s3: S3Endpoint) -> str:  # noqa: F811
    return s3.new_bucket("lake")


def _table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({
        "id": pa.array(rng.permutation(n), pa.int64()),
        "k": pa.array(rng.integers(0, max(1, n // 7), n), pa.int64()),
        "s": pa.array([f"s{v:03d}" for v in rng.integers(0, 300, n)]),
        "x": pa.array(rng.normal(size=n), mask=rng.random(n) < 0.05),
    })


def _object(ep: S3Endpoint, bucket: str, key: str) -> bytes:
    return bytes(ep.boto3().get_object(Bucket=bucket, Key=key)["Body"].read())


def _keys(ep: S3Endpoint, bucket: str, prefix: str = "") -> list[str]:
    got = ep.boto3().list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents") or []
    return sorted(o["Key"] for o in got)


def _uploads(ep: S3Endpoint, bucket: str) -> list[Any]:
    return list(ep.boto3().list_multipart_uploads(Bucket=bucket).get("Uploads") or [])


def _arrow_s3(ep: S3Endpoint) -> Any:
    from pyarrow import fs

    from s3_server import ACCESS_KEY, REGION, SECRET_KEY

    return fs.S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION,
                           endpoint_override=ep.direct_url, scheme="http")


# ------------------------------------------------------------------ write_table


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_write_table_to_s3_reads_back(s3: S3Endpoint, bucket: str, seed: int) -> None:  # noqa: F811
    rng = np.random.default_rng(seed)
    t = _table(int(rng.integers(1, 30_000)), seed)
    url = f"s3://{bucket}/w{seed}/f.parquet"
    res = pqindex.write_table(t, url, sort_by="k", bloom=["s"], indexes={"distinct": ["s"]},
                              row_group_rows=int(rng.integers(500, 20_000)), page_rows=700,
                              storage_options=s3.storage_options())
    want = t.sort_by("k")
    data = _object(s3, bucket, f"w{seed}/f.parquet")
    assert res.bytes == len(data) and res.rows == t.num_rows
    assert pq.read_table(io.BytesIO(data)).equals(want)
    # pyarrow reads it from S3 by itself, and pqindex's reads through the index agree.
    assert pq.read_table(f"{bucket}/w{seed}/f.parquet", filesystem=_arrow_s3(s3)).equals(want)
    probe = want["s"][int(rng.integers(0, t.num_rows))].as_py()
    got = pqindex.dataset(url, storage_options=s3.storage_options()).to_table(
        where=f"s = '{probe}'")
    assert got.sort_by("id").equals(want.filter(pc.equal(want["s"], probe)).sort_by("id"))
    assert not _uploads(s3, bucket)


def test_write_streams_in_parts_and_failure_leaves_nothing(
    s3: S3Endpoint, bucket: str, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    monkeypatch.setattr(remote, "PART_BYTES", 5 << 20)
    rng = np.random.default_rng(5)
    n = 1_600_000  # ~13 MB of incompressible doubles: three parts
    t = pa.table({"id": np.arange(n), "x": rng.normal(size=n)})
    url = f"s3://{bucket}/big/f.parquet"
    s3.reset_log()
    res = pqindex.write_table(t, url, compression="none", storage_options=s3.storage_options())
    parts = [r for r in s3.requests if r.method == "PUT" and "partNumber" in r.query]
    assert len(parts) >= 3 and res.bytes > 2 * (5 << 20)
    # Every part but the last is one part size: the upload holds parts, not the file.
    assert sorted(r.length for r in parts)[1:] == [5 << 20] * (len(parts) - 1)
    assert pq.read_table(io.BytesIO(_object(s3, bucket, "big/f.parquet"))).equals(t)

    # The completion fails: no object appears and the upload is gone.
    s3.reject = lambda m, p, q: m == "POST" and "uploadId" in q
    try:
        with pytest.raises(StorageError):
            pqindex.write_table(t, f"s3://{bucket}/big/g.parquet", compression="none",
                                storage_options=s3.storage_options())
    finally:
        s3.reject = None
    assert "big/g.parquet" not in _keys(s3, bucket, "big/") and not _uploads(s3, bucket)
    # A failure while pyarrow writes (after parts went out) aborts the upload too.
    bad = pa.table({"id": np.arange(n), "x": rng.normal(size=n)})
    monkeypatch.setattr(remote, "build_tail", _boom)
    # The error boundary reports an unexpected exception as an InternalError (a bug).
    with pytest.raises(InternalError, match="injected"):
        pqindex.write_table(bad, f"s3://{bucket}/big/h.parquet", compression="none",
                            storage_options=s3.storage_options())
    assert _keys(s3, bucket, "big/") == ["big/f.parquet"] and not _uploads(s3, bucket)


def _boom(*a: Any, **k: Any) -> Any:
    raise RuntimeError("injected failure after the data parts")


def test_writer_rolls_over_on_s3(s3: S3Endpoint, bucket: str) -> None:  # noqa: F811
    t = _table(20_000, 9)
    with pqindex.Writer(f"s3://{bucket}/roll/", target_file_bytes=200_000,
                        storage_options=s3.storage_options(), sort_by="id") as w:
        for b in t.to_batches(max_chunksize=4000):
            w.write(b)
    keys = _keys(s3, bucket, "roll/")
    assert len(keys) == len(w.results) >= 2
    back = pa.concat_tables(pq.read_table(io.BytesIO(_object(s3, bucket, k))) for k in keys)
    assert back.sort_by("id").equals(t.sort_by("id"))


# ------------------------------------------------------------------ add_indexes


def _put_plain(s3: S3Endpoint, bucket: str, key: str, n: int, seed: int) -> tuple[pa.Table, bytes]:  # noqa: F811
    t = _table(n, seed)
    buf = io.BytesIO()
    pq.write_table(t, buf, row_group_size=max(1, n // 3), compression="none")
    s3.put(bucket, key, buf.getvalue())
    return t, buf.getvalue()


@pytest.mark.parametrize("n", [20_000, 900_000])  # one conditional PUT; a multipart stream
def test_add_indexes_on_s3(
    s3: S3Endpoint, bucket: str, n: int, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    monkeypatch.setattr(remote, "PART_BYTES", 5 << 20)
    monkeypatch.setattr(remote, "SMALL_OBJECT_BYTES", 8 << 20)
    # The streaming path other stores take (S3's server-side copy: test_remote_index.py).
    monkeypatch.setattr(remote_index, "rewrite_server_side", lambda *a, **k: "off in this test")
    key = f"ix{n}/f.parquet"
    t, before = _put_plain(s3, bucket, key, n, n)
    url = f"s3://{bucket}/{key}"
    so = s3.storage_options()

    # An injected failure of the final request leaves the original as it was.
    final = (lambda m, p, q: m == "PUT" and p.endswith(key)) if len(before) < 8 << 20 else (
        lambda m, p, q: m == "POST" and "uploadId" in q)
    s3.reject = final
    try:
        with pytest.raises(StorageError):
            pqindex.add_indexes(url, distinct=["s"], storage_options=so)
    finally:
        s3.reject = None
    assert _object(s3, bucket, key) == before

    # A concurrent change between the read and the replacement is detected.
    orig_write = remote.Upload.write
    changed = b"PAR1 changed by someone else"

    def racing(self: remote.Upload, data: Any) -> None:
        if self.sent == 0 and not self._buf:
            s3.put(bucket, key, changed)
        orig_write(self, data)

    monkeypatch.setattr(remote.Upload, "write", racing)
    with pytest.raises(ObjectChangedError):
        pqindex.add_indexes(url, distinct=["s"], storage_options=so)
    monkeypatch.setattr(remote.Upload, "write", orig_write)
    assert _object(s3, bucket, key) == changed
    s3.put(bucket, key, before)

    [res] = pqindex.add_indexes(url, distinct=["s"], storage_options=so)
    after = _object(s3, bucket, key)
    assert res.rewritten and res.bytes_after == len(after)
    # Through obstore the data range travels down and up: no server-side copy.
    assert res.bytes_uploaded == len(after) and res.bytes_copied_server_side == 0
    data_end = _data_end(before)
    assert after[:data_end] == before[:data_end]  # the data pages did not move
    assert pq.read_table(io.BytesIO(after)).equals(t)
    probe = t["s"][7].as_py()
    got = pqindex.dataset(url, storage_options=so).to_table(where=f"s = '{probe}'")
    assert got.sort_by("id").equals(t.filter(pc.equal(t["s"], probe)).sort_by("id"))
    assert not _uploads(s3, bucket)


def _data_end(data: bytes) -> int:
    md = pq.read_metadata(io.BytesIO(data))
    end = 4
    for rg in range(md.num_row_groups):
        for c in range(md.num_columns):
            col = md.row_group(rg).column(c)
            start = col.dictionary_page_offset or col.data_page_offset
            end = max(end, start + col.total_compressed_size)
    return end


# ------------------------------------------------------------------ commit protocol


def _stage(dest: str, job: str, t: pa.Table, so: dict[str, str]) -> list[dict[str, Any]]:
    opts = parse_options({"sort_by": "k", "indexes": '{"distinct": ["s"]}', "page_rows": "500",
                          "storage_option.endpoint": so["endpoint"],
                          "storage_options": __import__("json").dumps(so)})
    _dir, files = write_task(t.to_batches(max_chunksize=3000), dest=dest, job_id=job,
                             partition_id=0, attempt=0, options=opts)
    return files


def test_concurrent_committers_one_wins(s3: S3Endpoint, bucket: str) -> None:  # noqa: F811
    so = s3.storage_options()
    dest = f"s3://{bucket}/race"
    tables = {job: _table(5000, i) for i, job in enumerate(("a" * 32, "b" * 32))}
    base = manifest_etag(dest, so)
    assert base is None
    staged = {job: _stage(dest, job, t, so) for job, t in tables.items()}
    assert any(k.startswith("race/_pqindex_staging/") for k in _keys(s3, bucket, "race/"))
    outcome: dict[str, BaseException | None] = {}
    gate = threading.Barrier(2)

    def commit(job: str) -> None:
        gate.wait()
        try:
            commit_job_remote(dest, job, staged[job], mode="append", info={}, base_etag=base,
                              storage_options=so)
            outcome[job] = None
        except BaseException as e:
            outcome[job] = e

    threads = [threading.Thread(target=commit, args=(j,)) for j in tables]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    winners = [j for j, e in outcome.items() if e is None]
    losers = [e for e in outcome.values() if e is not None]
    assert len(winners) == 1 and len(losers) == 1
    assert isinstance(losers[0], ConcurrentCommitError) and "another job" in str(losers[0])
    win = winners[0]
    keys = _keys(s3, bucket, "race/")
    want = sorted(["race/_SUCCESS", "race/_pqindex_manifest.json"]
                  + [f"race/{f['path']}" for f in staged[win]])
    assert keys == want  # no staging, none of the loser's files
    got = pqindex.dataset(dest, storage_options=so).to_table()
    assert got.sort_by("id").equals(tables[win].sort_by("id"))

    # Appending from the manifest the winner left works; from a stale one does not.
    now = manifest_etag(dest, so)
    more = _stage(dest, "c" * 32, _table(100, 7), so)
    with pytest.raises(ConcurrentCommitError):
        commit_job_remote(dest, "c" * 32, more, mode="append", info={}, base_etag=base,
                          storage_options=so)
    assert _keys(s3, bucket, "race/") == want
    more = _stage(dest, "d" * 32, _table(100, 7), so)
    commit_job_remote(dest, "d" * 32, more, mode="append", info={}, base_etag=now,
                      storage_options=so)
    assert pqindex.dataset(dest, storage_options=so).to_table().num_rows == 5100


# ------------------------------------------------------------------ the Spark pipeline


@pytest.mark.spark
def test_spark_pipeline_on_s3(spark: Any, s3: S3Endpoint, bucket: str, tmp_path: Any) -> None:  # noqa: F811
    import pqindex.spark

    so = s3.storage_options()
    t = _table(8000, 11)
    local = str(tmp_path / "src")
    pq.write_table(t, os.path.join(local + ".parquet"))
    sdf = spark.read.parquet(local + ".parquet")
    dest = f"s3://{bucket}/spark/t"
    r = pqindex.spark.write(sdf, dest, sort_by=["k"], bloom=["s"], indexes={"distinct": ["s"]},
                            page_rows=500, target_file_bytes=60_000, num_partitions=2,
                            storage_options=so)
    assert r["path"] == dest and r["rows"] == 8000 and r["files"] >= 2
    keys = _keys(s3, bucket, "spark/t/")
    assert "spark/t/_pqindex_manifest.json" in keys and "spark/t/_SUCCESS" in keys
    assert not any("_pqindex_staging" in k for k in keys)
    spark_rows = sorted(tuple(x) for x in sdf.select("id", "k", "s").collect())
    back = pqindex.dataset(dest, storage_options=so).to_table(columns=["id", "k", "s"])
    assert sorted(zip(*(back[c].to_pylist() for c in ("id", "k", "s")), strict=True)) == spark_rows
    got = pqindex.dataset(dest, storage_options=so).to_table(where="s = 's042'")
    assert got.num_rows == sdf.where("s = 's042'").count()

    # A failing task aborts the job: the overwrite keeps the old data, no staging left.
    with pytest.raises(Exception, match="fail_task"):
        pqindex.spark.write(sdf, dest, sort_by=["k"], num_partitions=2, mode="overwrite",
                            storage_options=so, options={"pqindex.test.fail_task": "1"})
    assert _keys(s3, bucket, "spark/t/") == keys
    # An overwrite replaces the files once its manifest is in place.
    r2 = pqindex.spark.write(sdf.limit(1000), dest, sort_by=["k"], num_partitions=1,
                             mode="overwrite", storage_options=so)
    assert r2["rows"] == 1000
    assert pqindex.dataset(dest, storage_options=so).to_table().num_rows == 1000
    assert not set(keys) - {"spark/t/_pqindex_manifest.json", "spark/t/_SUCCESS"} & set(
        _keys(s3, bucket, "spark/t/"))
    assert not [u for u, _ in list_objects(dest + "/_pqindex_staging/", so)]


# ------------------------------------------------------------------ the CLI


def test_cli_index_and_check_on_s3(s3: S3Endpoint, bucket: str) -> None:  # noqa: F811
    import json

    from click.testing import CliRunner

    from pqindex.cli import cli

    t, _before = _put_plain(s3, bucket, "cli/f.parquet", 3000, 21)
    url = f"s3://{bucket}/cli/f.parquet"
    opts = [a for k, v in s3.storage_options().items() for a in ("--storage-option", f"{k}={v}")]
    # The file has no page index: it gets one, and the embedded index is built on it.
    res = CliRunner().invoke(cli, ["index", url, "--distinct", "s", "--page-index", "add",
                                   "--json", *opts], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    after = _object(s3, bucket, "cli/f.parquet")
    assert out["files"][0]["bytes_uploaded"] == len(after) == out["totals"]["bytes_after"]
    assert out["totals"]["bytes_copied_server_side"] == 0  # small: streamed, nothing copied
    assert out["files"][0]["page_index_added"] > 0 and out["files"][0]["indexes"] == {
        "distinct": ["s"]}
    assert pq.read_table(io.BytesIO(after)).equals(t)
    md = pq.ParquetFile(io.BytesIO(after)).metadata
    assert md.row_group(0).column(0).has_offset_index
    probe = t["s"][3].as_py()
    got = pqindex.dataset(url, storage_options=s3.storage_options()).to_table(
        where=f"s = '{probe}'")
    assert got.sort_by("id").equals(t.filter(pc.equal(t["s"], probe)).sort_by("id"))
    res = CliRunner().invoke(cli, ["check", url, *opts], catch_exceptions=False)
    assert res.exit_code == 0 and res.output.strip() == f"{url}: ok"
    # Without the options the store is not reachable: a clean error, no traceback.
    res = CliRunner().invoke(cli, ["check", f"s3://{bucket}/cli/nope.parquet", *opts])
    assert res.exit_code != 0 and "Traceback" not in res.output
