"""Requests pqindex signs itself (S3 ``UploadPartCopy``) use the store's one
credential provider and its client options.

* Credentials from a provider: a container-credentials endpoint served on
  127.0.0.1 (``AWS_CONTAINER_CREDENTIALS_FULL_URI``, as ECS and EKS pod identity
  set it) hands out temporary keys; with no static keys anywhere, obstore's
  reads and pqindex's part copies both carry its session token, and the data
  range is copied by the store, not streamed.
* A proxy (``proxy_url``): obstore's requests and the part copies go through it.
"""

from __future__ import annotations

import datetime as dt
import http.client
import http.server
import io
import json
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.io.objstore import clear_stores
from pqindex.io.s3multipart import MIN_PART_BYTES
from pqindex.write import remote_index
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)

MiB = 1 << 20
TOKEN = "token-from-the-container-endpoint"


def _parquet(rows: int, seed: int) -> tuple[pa.Table, bytes]:
    rng = np.random.default_rng(seed)
    t = pa.table({"id": pa.array(np.arange(rows), pa.int64()),
                  "s": pa.array([f"s{v:03d}" for v in rng.integers(0, 300, rows)])})
    buf = io.BytesIO()
    pq.write_table(t, buf, compression="none", use_dictionary=False, row_group_size=rows // 2)
    return t, buf.getvalue()


@pytest.fixture(scope="module")
def big() -> tuple[pa.Table, bytes]:
    """A file whose data range is above S3's part minimum (it can be part-copied)."""
    t, data = _parquet(750_000, 7)
    assert len(data) > 2 * MIN_PART_BYTES
    return t, data


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler: type[_Handler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.log: list[tuple[str, str, dict[str, str]]] = []
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _CredentialsHandler(_Handler):
    """The container credentials endpoint: temporary keys valid for an hour."""

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.log.append(("GET", self.path, dict(self.headers)))
        expiry = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
        body = json.dumps({"AccessKeyId": "testing", "SecretAccessKey": "testing",
                           "Token": TOKEN,
                           "Expiration": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}).encode()
        self._reply(200, [("Content-Type", "application/json")], body)


class _ForwardProxyHandler(_Handler):
    """A forward HTTP proxy: absolute-form requests, forwarded and logged."""

    def _forward(self) -> None:
        target = urllib.parse.urlsplit(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("proxy-connection", "connection", "keep-alive")}
        with self.server.lock:
            self.server.log.append((self.command, self.path, headers))
        conn = http.client.HTTPConnection(target.netloc, timeout=60)
        try:
            path = target.path + (f"?{target.query}" if target.query else "")
            conn.request(self.command, path, body=body, headers=headers)
            resp = conn.getresponse()
            self._reply(resp.status, resp.getheaders(), resp.read())
        finally:
            conn.close()

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward


@pytest.fixture
def credential_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Server]:
    """No static keys anywhere; the container endpoint is the only credential."""
    server = _Server(_CredentialsHandler)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_AUTHORIZATION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"{server.url}/v2/credentials")
    clear_stores()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        clear_stores()


def _keyless_options(s3: S3Endpoint) -> dict[str, str]:  # noqa: F811
    return {k: v for k, v in s3.storage_options().items()
            if k not in ("access_key_id", "secret_access_key")}


def test_part_copies_use_credentials_from_the_container_endpoint(
    s3: S3Endpoint, credential_endpoint: _Server, big: tuple[pa.Table, bytes],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before, only static keys were reproduced: with keys from a provider the
    whole object was streamed down and up, silently."""
    monkeypatch.setattr(remote_index, "COPY_PART_BYTES", 5 * MiB)
    t, before = big
    bucket = s3.new_bucket("creds")
    s3.put(bucket, "f.parquet", before)
    url = f"s3://{bucket}/f.parquet"
    opts = _keyless_options(s3)
    s3.reset_log()
    [res] = pqindex.add_indexes(url, distinct=["s"], storage_options=opts)
    log = s3.requests
    copies = [r for r in log if r.method == "PUT" and r.header("x-amz-copy-source")]
    assert len(copies) >= 2, "the data range was not copied by the store"
    assert res.streamed_because == "" and res.bytes_copied_server_side > 2 * MIN_PART_BYTES
    assert res.bytes_uploaded < len(before) // 10
    # Every request, obstore's reads and pqindex's own, signed with the endpoint's keys.
    assert log and all(r.header("x-amz-security-token") == TOKEN for r in log), \
        {(r.method, r.header("x-amz-security-token")) for r in log}
    assert credential_endpoint.log, "the container endpoint was never asked"
    got = pqindex.dataset(url, storage_options=opts).to_table()
    assert got.equals(t)


def test_a_streamed_rewrite_says_why(s3: S3Endpoint, monkeypatch: pytest.MonkeyPatch  # noqa: F811
                                     ) -> None:
    """Where the store cannot copy, the result and the CLI say why the object went
    down and up."""
    from click.testing import CliRunner

    from pqindex.cli import cli

    _, small = _parquet(20_000, 3)
    bucket = s3.new_bucket("streamed")
    s3.put(bucket, "f.parquet", small)
    url = f"s3://{bucket}/f.parquet"
    [res] = pqindex.add_indexes(url, distinct=["s"], storage_options=s3.storage_options())
    assert "part minimum" in res.streamed_because and res.bytes_copied_server_side == 0
    s3.put(bucket, "g.parquet", small)
    args = ["index", f"s3://{bucket}/g.parquet", "--distinct", "s"]
    for k, v in s3.storage_options().items():
        args += ["--storage-option", f"{k}={v}"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    assert "not copied by the store" in out.output and "part minimum" in out.output


def test_self_signed_requests_go_through_the_configured_proxy(
    s3: S3Endpoint, big: tuple[pa.Table, bytes], monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    """``proxy_url`` takes obstore's requests and pqindex's part copies alike."""
    monkeypatch.setattr(remote_index, "COPY_PART_BYTES", 5 * MiB)
    proxy = _Server(_ForwardProxyHandler)
    try:
        _, before = big
        bucket = s3.new_bucket("proxied")
        s3.put(bucket, "f.parquet", before)
        url = f"s3://{bucket}/f.parquet"
        opts = s3.storage_options(proxy_url=proxy.url)
        [res] = pqindex.add_indexes(url, distinct=["s"], storage_options=opts)
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert res.streamed_because == ""
    methods = [(m, h.get("x-amz-copy-source") is not None) for m, _p, h in proxy.log]
    assert ("GET", False) in methods, "obstore's reads did not use the proxy"
    assert sum(1 for m, copy in methods if m == "PUT" and copy) >= 2, \
        "the part copies did not use the proxy"
    assert all(p.startswith(s3.url) for _m, p, _h in proxy.log)
