"""add_indexes on S3 without moving the data: the data range is copied by the store
(``UploadPartCopy`` with a byte range), only the new tail is uploaded.

Against moto's server behind the counting proxy of tests/s3_server.py. References:
pyarrow reading the original object's bytes, and the object's bytes themselves.
moto ignores ``x-amz-copy-source-if-match`` and ``If-Match`` on completion; the
tests that need a store honouring them let the proxy answer as S3 would (412),
deciding from the object's real ETag at that moment.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import itertools
import urllib.parse
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.io.errors import ObjectChangedError, StorageError
from pqindex.io.objstore import clear_stores
from pqindex.io.s3multipart import MAX_PART_BYTES, MIN_PART_BYTES, S3Multipart, s3_config
from pqindex.io.s3sign import EMPTY_SHA256, Credentials, sign
from pqindex.write import remote_index
from s3_server import LoggedRequest, S3Endpoint, s3  # noqa: F401  (the session fixture)

MiB = 1 << 20


# ------------------------------------------------------------------ SigV4


_DOC_CREDS = Credentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
_DOC_TIME = dt.datetime(2013, 5, 24, tzinfo=dt.UTC)
_DOC_HOST = "examplebucket.s3.amazonaws.com"


def _signature(headers: dict[str, str]) -> str:
    return headers["Authorization"].rsplit("Signature=", 1)[1]


def test_sigv4_matches_the_aws_documentation_examples() -> None:
    """The four header-auth examples of AWS's S3 SigV4 documentation, with the
    signatures it publishes."""
    got = sign("GET", _DOC_HOST, "/test.txt", [], {"Range": "bytes=0-9"}, EMPTY_SHA256,
               _DOC_CREDS, "us-east-1", _DOC_TIME)
    assert _signature(got) == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    assert "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date," in got["Authorization"]
    assert got["x-amz-date"] == "20130524T000000Z"

    body = b"Welcome to Amazon S3."
    got = sign("PUT", _DOC_HOST, "/test%24file.text", [],
               {"Date": "Fri, 24 May 2013 00:00:00 GMT", "x-amz-storage-class": "REDUCED_REDUNDANCY"},
               hashlib.sha256(body).hexdigest(), _DOC_CREDS, "us-east-1", _DOC_TIME)
    assert _signature(got) == "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"

    got = sign("GET", _DOC_HOST, "/", [("lifecycle", "")], {}, EMPTY_SHA256, _DOC_CREDS,
               "us-east-1", _DOC_TIME)
    assert _signature(got) == "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"

    got = sign("GET", _DOC_HOST, "/", [("max-keys", "2"), ("prefix", "J")], {}, EMPTY_SHA256,
               _DOC_CREDS, "us-east-1", _DOC_TIME)
    assert _signature(got) == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"


@pytest.mark.parametrize("token", [None, "FwoGZXIvYXdzEXAMPLE//token+with/odd=chars"])
def test_sigv4_agrees_with_botocore_on_the_multipart_requests(token: str | None) -> None:
    """The requests s3multipart sends, signed by botocore too (an independent
    implementation): same Authorization header, session token included."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials

    creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    client = S3Multipart(s3_config("s3://my-bucket/x", {
        "endpoint": "http://127.0.0.1:9000", "access_key_id": creds.access_key_id,
        "secret_access_key": creds.secret_access_key, "region": "eu-west-3",
        "allow_http": "true", **({"session_token": token} if token else {})})[0] or _fail())
    key = "lake/dt=2024-01-01/part 0 é+ü.parquet"
    path = client._path(key)
    cases: list[tuple[str, list[tuple[str, str]], dict[str, str], bytes]] = [
        ("POST", [("uploads", "")], {}, b""),
        ("PUT", [("partNumber", "3"), ("uploadId", "a/b+c=d")],
         {"x-amz-copy-source": "/my-bucket/lake/dt%3D2024-01-01/part%200.parquet",
          "x-amz-copy-source-range": "bytes=0-5242879",
          "x-amz-copy-source-if-match": '"0123456789abcdef0123456789abcdef"'}, b""),
        ("PUT", [("partNumber", "4"), ("uploadId", "xyz")], {}, b"PAR1 tail bytes"),
        ("POST", [("uploadId", "xyz")], {"If-Match": '"abc"'}, b"<CompleteMultipartUpload/>"),
        ("DELETE", [("uploadId", "xyz")], {}, b""),
        ("HEAD", [], {}, b""),
    ]
    for method, query, headers, body in cases:
        qs = "&".join(f"{k}={v}" if v else k for k, v in
                      [(k, urllib.parse.quote(v, safe="-_.~"))
                       for k, v in query])
        url = f"http://127.0.0.1:9000{path}" + (f"?{qs}" if qs else "")
        req = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
        S3SigV4Auth(BotoCredentials(creds.access_key_id, creds.secret_access_key, token),
                    "s3", "eu-west-3").add_auth(req)
        when = dt.datetime.strptime(req.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(
            tzinfo=dt.UTC)
        digest = hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256
        ours = sign(method, "127.0.0.1:9000", path, query, headers, digest, creds, "eu-west-3",
                    when)
        theirs = req.headers["Authorization"]
        assert _signature(ours) == theirs.rsplit("Signature=", 1)[1], (method, query)
        if token:
            assert ours["x-amz-security-token"] == token
            assert "x-amz-security-token" in ours["Authorization"]


def _fail() -> Any:
    raise AssertionError("no S3 configuration")


# ------------------------------------------------------------------ configuration


def test_s3_config_from_options_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT", "AWS_REGION", "AWS_DEFAULT_REGION",
                 "AWS_ALLOW_HTTP", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "AWS_SKIP_SIGNATURE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "envkey")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "envsecret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "envtoken")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role here
    clear_stores()  # clients are cached by options; the environment changed
    c, _ = s3_config("s3://data.lake/a/b c.parquet")
    assert c is not None and c.credentials() == Credentials("envkey", "envsecret", "envtoken")
    assert c.region == "eu-central-1" and c.endpoint is None
    # AWS: virtual-hosted, except for bucket names with dots (certificate).
    assert S3Multipart(c).address("a/b c") == \
        "https://s3.eu-central-1.amazonaws.com/data.lake/a/b%20c"
    c, _ = s3_config("s3a://lake/x", {"aws_region": "us-west-2"})
    assert c is not None and S3Multipart(c).address("k/y") == \
        "https://lake.s3.us-west-2.amazonaws.com/k/y"
    # Options override the environment (obstore's keys and aliases); an endpoint is
    # path-style, unless virtual_hosted_style_request makes it the bucket's URL.
    c, _ = s3_config("s3://lake/x", {"endpoint_url": "http://127.0.0.1:9/", "key": "k",
                                  "secret": "s", "token": "t", "allow_http": True})
    assert c is not None and c.credentials() == Credentials("k", "s", "t")
    assert S3Multipart(c).address("x") == "http://127.0.0.1:9/lake/x"
    c, _ = s3_config("s3://lake/x", {"endpoint": "https://lake.example.com",
                                  "virtual_hosted_style_request": "true"})
    assert c is not None and S3Multipart(c).address("x") == "https://lake.example.com/x"
    # Plain http without allow_http is refused, as obstore refuses it.
    c, _ = s3_config("s3://lake/x", {"endpoint": "http://127.0.0.1:9"})
    assert c is not None
    with pytest.raises(StorageError, match="allow_http"):
        S3Multipart(c)
    # Nothing to sign with, or not S3: None (the caller streams through obstore).
    assert s3_config("gs://lake/x")[0] is None
    assert s3_config("s3://lake/x", {"skip_signature": "true"}) == (
        None, "requests are unsigned (skip_signature)")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    clear_stores()
    config, reason = s3_config("s3://lake/x")
    assert config is None and "found no credentials" in reason
    clear_stores()


@pytest.mark.parametrize("size", [5 * MiB, 5 * MiB + 1, 32 * MiB - 1, 100 * MiB, 10_000 * MiB,
                                  12 * 5120 * MiB + 7])
@pytest.mark.parametrize("part", [None, 5 * MiB, 64 * MiB])
def test_copy_ranges_respect_the_part_rules(size: int, part: int | None) -> None:
    ranges = remote_index.copy_ranges(size, part)
    assert ranges[0][0] == 0 and ranges[-1][1] == size
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    assert all(MIN_PART_BYTES <= e - s <= MAX_PART_BYTES for s, e in ranges), ranges[:3]


# ------------------------------------------------------------------ against moto


N_ROWS = 600_000


@pytest.fixture(scope="module")
def original() -> tuple[pa.Table, bytes]:
    rng = np.random.default_rng(11)
    t = pa.table({
        "id": pa.array(np.arange(N_ROWS), pa.int64()),
        "k": pa.array(rng.integers(0, 5000, N_ROWS), pa.int64()),
        "s": pa.array([f"s{v:03d}" for v in rng.integers(0, 300, N_ROWS)]),
        "x": pa.array(rng.normal(size=N_ROWS), mask=rng.random(N_ROWS) < 0.05),
    })
    buf = io.BytesIO()
    pq.write_table(t, buf, compression="none", use_dictionary=False, row_group_size=150_000)
    return t, buf.getvalue()


@pytest.fixture(scope="module")
def bucket(s3: S3Endpoint) -> str:  # noqa: F811
    return s3.new_bucket("partcopy")


@pytest.fixture(autouse=True)
def _small_copy_parts(monkeypatch: pytest.MonkeyPatch, s3: S3Endpoint) -> Any:  # noqa: F811
    # Several copied parts even for a test-sized object.
    monkeypatch.setattr(remote_index, "COPY_PART_BYTES", 5 * MiB)
    yield
    s3.answer = None
    s3.reject = None


def _object(s3: S3Endpoint, bucket: str, key: str) -> tuple[bytes, str]:  # noqa: F811
    got = s3.boto3().get_object(Bucket=bucket, Key=key)
    return bytes(got["Body"].read()), str(got["ETag"])


def _etag(s3: S3Endpoint, bucket: str, key: str) -> str:  # noqa: F811
    return str(s3.boto3().head_object(Bucket=bucket, Key=key)["ETag"])


def _open_uploads(s3: S3Endpoint, bucket: str) -> list[Any]:  # noqa: F811
    return list(s3.boto3().list_multipart_uploads(Bucket=bucket).get("Uploads") or [])


def _data_end(data: bytes) -> int:
    md = pq.read_metadata(io.BytesIO(data))
    end = 4
    for rg in range(md.num_row_groups):
        for c in range(md.num_columns):
            col = md.row_group(rg).column(c)
            start = col.dictionary_page_offset or col.data_page_offset
            end = max(end, start + col.total_compressed_size)
    return end


def _is_copy(r: LoggedRequest) -> bool:
    return r.method == "PUT" and r.header("x-amz-copy-source") is not None


def _is_complete(r: LoggedRequest) -> bool:
    return r.method == "POST" and "uploadId=" in r.query


def test_add_indexes_copies_the_data_range_server_side(
    s3: S3Endpoint, bucket: str, original: tuple[pa.Table, bytes]  # noqa: F811
) -> None:
    t, before = original
    key = "big/f.parquet"
    s3.put(bucket, key, before)
    _, etag = _object(s3, bucket, key)
    url = f"s3://{bucket}/{key}"
    so = s3.storage_options(session_token="a-session-token")
    data_end = _data_end(before)
    assert data_end >= 3 * MIN_PART_BYTES

    # A value between two present ones: min/max cannot rule it out, a distinct index can.
    absent = "s150x"
    before_scan = pqindex.dataset(url, storage_options=so).scan(where=f"s = '{absent}'")
    assert before_scan.to_table().num_rows == 0 and before_scan.report.pages_read > 0

    s3.reset_log()
    s3.delay = 0.05  # requests overlap only if they are sent together
    try:
        [res] = pqindex.add_indexes(url, distinct=["s"], storage_options=so)
    finally:
        s3.delay = 0.0
    log = s3.requests
    after, new_etag = _object(s3, bucket, key)

    # What was sent: the new tail (and the completion's part list), not the data.
    assert s3.uploaded_bytes < 0.05 * len(before), (s3.uploaded_bytes, len(before))
    assert res.bytes_uploaded == len(after) - data_end
    assert res.bytes_copied_server_side == data_end
    assert res.bytes_after == len(after) and new_etag != etag
    copies = [r for r in log if _is_copy(r)]
    assert len(copies) == len(remote_index.copy_ranges(data_end)) >= 3
    spans = sorted(tuple(map(int, (r.header("x-amz-copy-source-range") or "")[6:].split("-")))
                   for r in copies)
    assert spans[0][0] == 0 and spans[-1][1] == data_end - 1
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(spans))
    assert all(r.header("x-amz-copy-source-if-match") == etag for r in copies)
    assert all(r.length == 0 for r in copies)
    assert s3.max_in_flight >= len(copies) + 1  # the copies and the tail in one wave
    [complete] = [r for r in log if _is_complete(r)]
    assert complete.header("If-Match") == etag
    signed = [r for r in log if r.header("x-amz-copy-source") or _is_complete(r)]
    assert all(r.header("x-amz-security-token") == "a-session-token" for r in signed)
    assert all((r.header("Authorization") or "").startswith("AWS4-HMAC-SHA256 ") for r in signed)

    # The data pages did not move; the file reads as the original did.
    assert after[:data_end] == before[:data_end]
    assert pq.read_table(io.BytesIO(after)).equals(pq.read_table(io.BytesIO(before)))
    ds = pqindex.dataset(url, storage_options=so)
    assert ds.to_table().equals(pq.read_table(io.BytesIO(before)))
    probe = t["s"][12345].as_py()
    got = ds.to_table(where=f"s = '{probe}'")
    assert got.sort_by("id").equals(t.filter(pc.equal(t["s"], probe)).sort_by("id"))
    # The embedded index is used: the absent value now reads no page.
    scan = pqindex.dataset(url, storage_options=so).scan(where=f"s = '{absent}'")
    assert scan.to_table().num_rows == 0
    assert scan.report.pages_read == 0 and sum(scan.report.row_groups_skipped.values()) == 4
    assert not _open_uploads(s3, bucket)


def test_a_small_data_range_is_streamed(
    s3: S3Endpoint, bucket: str  # noqa: F811
) -> None:
    rng = np.random.default_rng(3)
    t = pa.table({"s": [f"v{v}" for v in rng.integers(0, 50, 40_000)]})
    buf = io.BytesIO()
    pq.write_table(t, buf, compression="none", row_group_size=10_000)
    before = buf.getvalue()
    assert _data_end(before) < MIN_PART_BYTES
    s3.put(bucket, "small/f.parquet", before)
    s3.reset_log()
    [res] = pqindex.add_indexes(f"s3://{bucket}/small/f.parquet", distinct=["s"],
                                storage_options=s3.storage_options())
    after, _ = _object(s3, bucket, "small/f.parquet")
    assert not any(_is_copy(r) for r in s3.requests)
    assert res.bytes_copied_server_side == 0 and res.bytes_uploaded == len(after)
    assert pq.read_table(io.BytesIO(after)).equals(t)


@pytest.mark.parametrize("refused", ["copy", "create"])
def test_a_store_without_part_copy_gets_the_stream(
    s3: S3Endpoint, bucket: str, original: tuple[pa.Table, bytes], refused: str  # noqa: F811
) -> None:
    """501 NotImplemented on UploadPartCopy (some S3-compatible stores) or on the
    multipart API: the upload (if any) is aborted and the data range streamed down
    and up instead."""
    t, before = original
    key = f"nocopy-{refused}/f.parquet"
    s3.put(bucket, key, before)
    s3.reset_log()
    first = [True]

    def refuse(r: LoggedRequest) -> tuple[int, str] | None:
        if refused == "copy" and _is_copy(r):
            return 501, "NotImplemented"
        if refused == "create" and r.method == "POST" and r.query == "uploads" and first:
            first.clear()  # only our CreateMultipartUpload; obstore's own may follow
            return 501, "NotImplemented"
        return None

    s3.answer = refuse
    [res] = pqindex.add_indexes(f"s3://{bucket}/{key}", distinct=["s"],
                                storage_options=s3.storage_options())
    after, _ = _object(s3, bucket, key)
    assert res.bytes_copied_server_side == 0 and res.bytes_uploaded == len(after)
    assert after[:_data_end(before)] == before[:_data_end(before)]
    assert pq.read_table(io.BytesIO(after)).equals(t)
    aborted = any(r.method == "DELETE" and "uploadId=" in r.query for r in s3.requests)
    assert aborted == (refused == "copy")
    assert any(_is_copy(r) for r in s3.requests) == (refused == "copy")
    assert not _open_uploads(s3, bucket)


def test_a_change_before_the_check_is_caught_where_conditions_are_ignored(
    s3: S3Endpoint, bucket: str, original: tuple[pa.Table, bytes]  # noqa: F811
) -> None:
    """moto copies from whatever the object is now (it ignores the copy condition):
    the HEAD after the copies sees the new ETag, nothing is completed."""
    _t, before = original
    key = "race1/f.parquet"
    s3.put(bucket, key, before)
    changed = b"X" + before[1:]  # as large: moto's ranged copy of it succeeds
    done: list[bool] = []

    def change_once(r: LoggedRequest) -> None:
        if _is_copy(r) and not done:
            done.append(True)
            s3.put(bucket, key, changed)  # straight to moto, before this copy runs

    s3.reset_log()
    s3.answer = change_once
    with pytest.raises(ObjectChangedError) as info:
        pqindex.add_indexes(f"s3://{bucket}/{key}", distinct=["s"],
                            storage_options=s3.storage_options())
    assert info.value.path == f"s3://{bucket}/{key}" and info.value.operation == "HEAD"
    assert _object(s3, bucket, key)[0] == changed
    assert not any(_is_complete(r) for r in s3.requests)
    assert not _open_uploads(s3, bucket)


@pytest.mark.parametrize("when", ["copy", "complete"])
def test_a_change_is_refused_by_a_store_honouring_the_conditions(
    s3: S3Endpoint, bucket: str, original: tuple[pa.Table, bytes], when: str  # noqa: F811
) -> None:
    """The object is replaced just as the first copy (or the completion) arrives; the
    proxy answers as S3 does when the ETag condition no longer holds (412)."""
    _t, before = original
    key = f"race-{when}/f.parquet"
    s3.put(bucket, key, before)
    changed = b"PAR1 someone else's object"
    hit = _is_copy if when == "copy" else _is_complete
    changes: list[bool] = []

    def s3_conditions(r: LoggedRequest) -> tuple[int, str] | None:
        if hit(r) and not changes:
            changes.append(True)
            s3.put(bucket, key, changed)
        cond = r.header("x-amz-copy-source-if-match") or r.header("If-Match")
        if cond is not None and cond != _etag(s3, bucket, key):
            return 412, "PreconditionFailed"
        return None

    s3.answer = s3_conditions
    with pytest.raises(ObjectChangedError) as info:
        pqindex.add_indexes(f"s3://{bucket}/{key}", distinct=["s"],
                            storage_options=s3.storage_options())
    s3.answer = None
    op = info.value.operation
    assert op.startswith("UploadPartCopy") if when == "copy" else op == \
        "CompleteMultipartUpload", op
    assert f"s3://{bucket}/{key}" in str(info.value)
    assert _object(s3, bucket, key)[0] == changed
    assert not _open_uploads(s3, bucket)


@pytest.mark.parametrize("failing", ["tail", "copy", "complete"])
def test_a_failed_request_aborts_and_leaves_the_object(
    s3: S3Endpoint, bucket: str, original: tuple[pa.Table, bytes], failing: str  # noqa: F811
) -> None:
    _t, before = original
    key = f"fail-{failing}/f.parquet"
    s3.put(bucket, key, before)
    _, etag = _object(s3, bucket, key)
    pick = {
        "tail": lambda r: r.method == "PUT" and "uploadId=" in r.query and not _is_copy(r),
        "copy": _is_copy,
        "complete": _is_complete,
    }[failing]
    s3.answer = lambda r: (403, "AccessDenied") if pick(r) else None
    with pytest.raises(StorageError) as info:
        pqindex.add_indexes(f"s3://{bucket}/{key}", distinct=["s"],
                            storage_options=s3.storage_options())
    s3.answer = None
    assert "AccessDenied" in str(info.value) and f"s3://{bucket}/{key}" in str(info.value)
    assert _object(s3, bucket, key) == (before, etag)
    assert not _open_uploads(s3, bucket)


def test_throttling_is_retried(
    s3: S3Endpoint, bucket: str, original: tuple[pa.Table, bytes]  # noqa: F811
) -> None:
    t, before = original
    key = "slow/f.parquet"
    s3.put(bucket, key, before)
    left = [2]

    def slow_down(r: LoggedRequest) -> tuple[int, str] | None:
        if _is_copy(r) and left[0] > 0:
            left[0] -= 1
            return 503, "SlowDown"
        return None

    s3.answer = slow_down
    [res] = pqindex.add_indexes(f"s3://{bucket}/{key}", distinct=["s"],
                                storage_options=s3.storage_options())
    assert left == [0] and res.bytes_copied_server_side == _data_end(before)
    after, _ = _object(s3, bucket, key)
    assert pq.read_table(io.BytesIO(after)).equals(t)


def test_a_versioned_bucket_copies_from_the_version_read(
    s3: S3Endpoint, original: tuple[pa.Table, bytes]  # noqa: F811
) -> None:
    t, before = original
    b = s3.new_bucket("versioned")
    s3.boto3().put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    s3.put(b, "f.parquet", before)
    version = s3.boto3().head_object(Bucket=b, Key="f.parquet")["VersionId"]
    s3.reset_log()
    [res] = pqindex.add_indexes(f"s3://{b}/f.parquet", distinct=["s"],
                                storage_options=s3.storage_options())
    copies = [r for r in s3.requests if _is_copy(r)]
    assert copies and all((r.header("x-amz-copy-source") or "").endswith(f"?versionId={version}")
                          for r in copies)
    after, _ = _object(s3, b, "f.parquet")
    assert res.bytes_copied_server_side == _data_end(before)
    assert pq.read_table(io.BytesIO(after)).equals(t)
