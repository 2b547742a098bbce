"""add_indexes on Azure and GCS without moving the data (write.cloud_copy).

Against Azurite and fake-gcs-server, each behind the counting proxy of
tests/s3_server.py, so the bytes that went up are counted on the wire.
References: pyarrow and DuckDB reading the original object's bytes, and the
bytes themselves (the old object is a prefix of the new one when it is kept
whole). Azurite honours ``If-Match`` on Put Block List and answers 501 to Put
Block From URL (the streaming fallback is tested so; the copy itself through
a proxy that answers it as Azure does, see ``_CopyingProxy``);
fake-gcs-server ignores every ``ifGenerationMatch``, so a change there is
caught by the look at the generation before compose.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import io
import itertools
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import obstore
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex
from azurite_server import ACCOUNT, ACCOUNT_KEY, Azurite, azurite  # noqa: F401
from gcs_server import Gcs, gcs  # noqa: F401  (the module fixture)
from pqindex.io import azblocks
from pqindex.io.azblocks import AzureBlocks, azure_config, blob_sas, shared_key_signature
from pqindex.io.cache import metadata_cache
from pqindex.io.errors import ObjectChangedError
from pqindex.io.gcscompose import GcsCompose, gcs_config
from pqindex.io.source import REMOTE_TAIL_BYTES
from pqindex.write.cloud_copy import block_ranges
from s3_server import _Log, _Proxy

MiB = 1 << 20
N_ROWS = 300_000
ABSENT = "s150x"  # between two present values: min/max cannot rule it out


@pytest.fixture(scope="module")
def original() -> tuple[pa.Table, bytes]:
    rng = np.random.default_rng(7)
    t = pa.table({
        "id": pa.array(np.arange(N_ROWS), pa.int64()),
        "k": pa.array(rng.integers(0, 5000, N_ROWS), pa.int64()),
        "s": pa.array([f"s{v:03d}" for v in rng.integers(0, 300, N_ROWS)]),
        "x": pa.array(rng.normal(size=N_ROWS), mask=rng.random(N_ROWS) < 0.05),
    })
    buf = io.BytesIO()
    # No page index (pyarrow's default): page_index="add" retrofits one.
    pq.write_table(t, buf, compression="none", use_dictionary=False, row_group_size=75_000)
    return t, buf.getvalue()


def _data_end(data: bytes) -> int:
    md = pq.read_metadata(io.BytesIO(data))
    end = 4
    for rg in range(md.num_row_groups):
        for c in range(md.num_columns):
            col = md.row_group(rg).column(c)
            start = col.dictionary_page_offset or col.data_page_offset
            end = max(end, start + col.total_compressed_size)
    return end


def _same_rows(after: bytes, before: bytes, tmp_path: Path) -> None:
    """pyarrow and DuckDB read the rewritten bytes as they read the original."""
    want = pq.read_table(io.BytesIO(before))
    assert pq.read_table(io.BytesIO(after)).equals(want)
    paths = []
    for name, data in (("before", before), ("after", after)):
        p = tmp_path / f"{name}.parquet"
        p.write_bytes(data)
        paths.append(str(p))
    con = duckdb.connect()
    got = [con.sql(f"SELECT id, k, s, x FROM read_parquet('{p}') ORDER BY id").to_arrow_table()
           for p in paths]
    assert got[0].equals(got[1])
    assert got[1].num_rows == want.num_rows
    con.close()


def _check_indexed(url: str, so: dict[str, str], t: pa.Table, before: bytes,
                   size: int) -> None:
    """pqindex reads the original rows, and the new embedded index is used."""
    ds = pqindex.dataset(url, storage_options=so)
    assert ds.to_table().equals(pq.read_table(io.BytesIO(before)))
    probe = t["s"][12345].as_py()
    got = pqindex.dataset(url, storage_options=so).to_table(where=f"s = '{probe}'")
    assert got.sort_by("id").equals(t.filter(pc.equal(t["s"], probe)).sort_by("id"))
    metadata_cache().clear()
    ds = pqindex.dataset(url, storage_options=so)
    scan = ds.scan(where=f"s = '{ABSENT}'")
    assert scan.to_table().num_rows == 0
    assert scan.report.pages_read == 0 and sum(scan.report.row_groups_skipped.values()) == 4
    assert scan.report.data_bytes == 0
    # I/O trace (the object's and the dataset's own; a HEAD on Azure is (0, 0)):
    # one GET, of the tail, which holds the footer and the embedded region
    trace = [t for st in ds.io_stats(include_listing=True).values() for t in st.trace
             if t != (0, 0)]
    assert trace == [(size - min(size, REMOTE_TAIL_BYTES), min(size, REMOTE_TAIL_BYTES))], trace


# ------------------------------------------------------------------ units


def test_block_ranges_cover_the_data_within_the_block_limit() -> None:
    for size in (1, 5 * MiB, 100 * MiB, 100 * MiB + 1, 1234 * MiB + 7):
        r = block_ranges(size)
        assert r[0][0] == 0 and r[-1][1] == size
        assert all(a[1] == b[0] for a, b in itertools.pairwise(r))
        assert all(0 < e - s <= azblocks.MAX_COPY_BLOCK_BYTES for s, e in r)
        assert len(r) == -(-size // azblocks.MAX_COPY_BLOCK_BYTES)


def test_azure_config_needs_a_key_a_sas_or_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.upper().startswith("AZURE_")]:
        monkeypatch.delenv(name)
    url = "az://c1/a/b.parquet"
    assert azure_config(url, {"account_name": "acct"}) is None  # anonymous: obstore's job
    cfg = azure_config(url, {"azure_storage_account_name": "acct",
                             "azure_storage_account_key": ACCOUNT_KEY})
    assert cfg is not None and cfg.key == base64.b64decode(ACCOUNT_KEY)
    assert cfg.endpoint == "https://acct.blob.core.windows.net" and cfg.container == "c1"
    assert "Eby8" not in repr(cfg)
    cfg = azure_config("abfss://c2@acct2.dfs.core.windows.net/x", {"sas_token": "?sv=1&sig=z"})
    assert cfg is not None and (cfg.account, cfg.container, cfg.sas) == ("acct2", "c2",
                                                                         "sv=1&sig=z")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "envacct")
    monkeypatch.setenv("AZURE_STORAGE_TOKEN", "tok")
    cfg = azure_config(url)
    assert cfg is not None and (cfg.account, cfg.token, cfg.key) == ("envacct", "tok", None)
    # plain http without allow_http: obstore refuses it, and so does this path
    assert azure_config(url, {"account_key": ACCOUNT_KEY,
                              "endpoint": "http://127.0.0.1:1/acct"}) is None


def test_gcs_config_only_without_oauth(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [n for n in os.environ if n.upper().startswith("GOOGLE_")]:
        monkeypatch.delenv(name)
    url = "gs://b1/k.parquet"
    assert gcs_config(url) is None
    real = {"type": "service_account", "client_email": "x@y", "private_key": "-----BEGIN"}
    assert gcs_config(url, {"service_account_key": json.dumps(real)}) is None  # needs OAuth
    emu = {"gcs_base_url": "http://127.0.0.1:9/", "disable_oauth": True}
    cfg = gcs_config(url, {"google_service_account_key": json.dumps(emu)})
    assert cfg is not None and (cfg.bucket, cfg.base_url) == ("b1", "http://127.0.0.1:9")
    path = tmp_path / "key.json"
    path.write_text(json.dumps(emu))
    monkeypatch.setenv("GOOGLE_SERVICE_ACCOUNT", str(path))
    assert gcs_config(url) == cfg
    cfg = gcs_config(url, {"skip_signature": "true"})
    assert cfg is not None and cfg.base_url == "https://storage.googleapis.com"


def test_gcs_content_check_reads_both_etag_forms() -> None:
    """obstore's ETag is the XML API's (MD5 in hex on GCS, the base64 MD5 on
    fake-gcs-server); the JSON resource gives the MD5 in base64."""
    import hashlib

    from pqindex.write.cloud_copy import _same_content

    digest = hashlib.md5(b"abc").digest()
    meta = {"md5Hash": base64.b64encode(digest).decode(), "etag": "CKih16GjycICEAE="}
    assert _same_content(meta, f'"{digest.hex()}"')
    assert _same_content(meta, f'"{meta["md5Hash"]}"')
    assert not _same_content(meta, f'"{hashlib.md5(b"abd").hexdigest()}"')
    assert _same_content({"etag": "x"}, '"whatever"')  # composite: the generation decides


def test_shared_key_canonical_form() -> None:
    """The documented canonical form, recomputed by hand: standard headers in
    their order, Content-Length empty when 0, x-ms- headers sorted, the query
    lower-cased, sorted and decoded."""
    import hashlib
    import hmac

    key = b"k" * 32
    headers = {"x-ms-version": "2021-08-06", "x-ms-date": "Mon, 01 Jan 2024 00:00:00 GMT",
               "Content-Length": "0", "If-Match": '"0x1"', "x-ms-source-range": "bytes=0-9"}
    got = shared_key_signature("PUT", "/acct/c/a%20b", [("comp", "block"), ("blockid", "QQ==")],
                               headers, "acct", key)
    to_sign = ("PUT\n\n\n\n\n\n\n\n" + '"0x1"' + "\n\n\n\n"
               "x-ms-date:Mon, 01 Jan 2024 00:00:00 GMT\nx-ms-source-range:bytes=0-9\n"
               "x-ms-version:2021-08-06\n/acct/acct/c/a%20b\nblockid:QQ==\ncomp:block")
    want = base64.b64encode(hmac.new(key, to_sign.encode(), hashlib.sha256).digest()).decode()
    assert got == f"SharedKey acct:{want}"


# ------------------------------------------------------------------ Azure (Azurite)


class _AzureEndpoint:
    def __init__(self, azurite: Azurite) -> None:  # noqa: F811
        self.azurite = azurite
        self.proxy = _Proxy(("127.0.0.1", azurite.port), _Log())
        self.endpoint = f"http://127.0.0.1:{self.proxy.port}/{ACCOUNT}"

    def options(self) -> dict[str, str]:
        return {"account_name": ACCOUNT, "account_key": ACCOUNT_KEY,
                "endpoint": self.endpoint, "allow_http": "true"}

    def reset_log(self) -> None:
        with self.proxy.log.lock:
            self.proxy.log.requests.clear()

    @property
    def uploaded_bytes(self) -> int:
        with self.proxy.log.lock:
            return sum(r.length for r in self.proxy.log.requests)


@pytest.fixture(scope="module")
def az(azurite: Azurite) -> Iterator[_AzureEndpoint]:  # noqa: F811
    ep = _AzureEndpoint(azurite)
    try:
        yield ep
    finally:
        ep.proxy.stop()


@pytest.fixture(scope="module")
def container(az: _AzureEndpoint) -> str:
    return az.azurite.new_container("cloudcopy")


def _az_client(az: _AzureEndpoint, container: str) -> AzureBlocks:
    cfg = azure_config(f"az://{container}/x", az.options())
    assert cfg is not None
    return AzureBlocks(cfg)


def test_azure_sas_for_the_copy_source_is_accepted_and_checked(
    az: _AzureEndpoint, container: str, original: tuple[pa.Table, bytes]
) -> None:
    store = az.azurite.store(container)
    obstore.put(store, "sas/f.bin", b"0123456789")
    client = _az_client(az, container)
    try:
        src = client.source_address("sas/f.bin")
        with urllib.request.urlopen(src, timeout=10) as res:
            assert res.read() == b"0123456789"
        forged = blob_sas(ACCOUNT, b"not the key", container, "sas/f.bin")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(client.blob_address("sas/f.bin", sas=forged), timeout=10)
        assert info.value.code == 403
    finally:
        client.close()


def _az_put(az: _AzureEndpoint, container: str, key: str, data: bytes, *, blocks: bool) -> None:
    store = az.azurite.store(container)
    if blocks:  # obstore's multipart upload: Put Block + Put Block List
        obstore.put(store, key, io.BytesIO(data), use_multipart=True, chunk_size=5 * MiB)
    else:  # one Put Blob: no block list
        obstore.put(store, key, data, use_multipart=False)


def test_azure_reuses_the_committed_blocks(
    az: _AzureEndpoint, container: str, original: tuple[pa.Table, bytes], tmp_path: Path
) -> None:
    t, before = original
    key = "blocks/f.parquet"
    _az_put(az, container, key, before, blocks=True)
    client = _az_client(az, container)
    etag0, blocks0 = client.committed_blocks(key)
    assert len(blocks0) >= 2 and sum(n for _b, n in blocks0) == len(before)
    url = f"az://{container}/{key}"
    so = az.options()

    az.reset_log()
    [res] = pqindex.add_indexes(url, distinct=["s"], page_index="add", storage_options=so)
    after = bytes(obstore.get(az.azurite.store(container), key).bytes())
    sent = az.uploaded_bytes
    with az.proxy.log.lock:
        [commit] = [r for r in az.proxy.log.requests if "comp=blocklist" in r.query
                    and r.method == "PUT"]
    assert commit.header("If-Match") == etag0
    etag1, blocks1 = client.committed_blocks(key)
    client.close()

    # Only the tail went up (and the block list naming the old blocks again).
    assert after[: len(before)] == before
    assert res.bytes_uploaded == len(after) - len(before) < 0.05 * len(before)
    assert res.bytes_copied_server_side == len(before) and res.bytes_after == len(after)
    assert res.bytes_uploaded <= sent < res.bytes_uploaded + 64 * 1024, (sent, res)
    assert blocks1[:-1] == blocks0 and blocks1[-1][1] == res.bytes_uploaded
    assert etag1 != etag0 and res.page_index_added > 0

    _same_rows(after, before, tmp_path)
    _check_indexed(url, so, t, before, len(after))


def test_azure_with_a_sas_token_only(
    az: _AzureEndpoint, container: str, original: tuple[pa.Table, bytes], tmp_path: Path
) -> None:
    """No account key: every request carries the configured SAS token (Azurite
    checks its signature), and so does the copy source."""
    t, before = original
    key = "sas/f.parquet"
    _az_put(az, container, key, before, blocks=True)
    sas = blob_sas(ACCOUNT, base64.b64decode(ACCOUNT_KEY), container, key, permissions="racw")
    so = {"account_name": ACCOUNT, "sas_key": sas, "endpoint": az.endpoint,
          "allow_http": "true"}
    url = f"az://{container}/{key}"
    az.reset_log()
    [res] = pqindex.add_indexes(url, distinct=["s"], storage_options=so)
    with az.proxy.log.lock:
        log = list(az.proxy.log.requests)
    ours = [r for r in log if "comp=block" in r.query]
    assert ours and all("sig=" in r.query and r.header("Authorization") is None for r in ours)
    after = bytes(obstore.get(az.azurite.store(container), key).bytes())
    assert after[: len(before)] == before
    assert res.bytes_uploaded == len(after) - len(before)
    _same_rows(after, before, tmp_path)
    _check_indexed(url, so, t, before, len(after))
    # A SAS that does not allow writing is refused, and nothing changes.
    ro = blob_sas(ACCOUNT, base64.b64decode(ACCOUNT_KEY), container, key, permissions="r")
    with pytest.raises(pqindex.PqIndexError) as info:
        pqindex.add_indexes(url, bloom=["k"], storage_options={**so, "sas_key": ro})
    assert info.value.path == url
    assert bytes(obstore.get(az.azurite.store(container), key).bytes()) == after


def test_azure_blob_without_blocks_falls_back_to_streaming(
    az: _AzureEndpoint, container: str, original: tuple[pa.Table, bytes], tmp_path: Path
) -> None:
    """A Put Blob blob has no block list: Put Block From URL is tried, Azurite
    answers 501, nothing is committed and the data range is streamed instead."""
    t, before = original
    key = "putblob/f.parquet"
    _az_put(az, container, key, before, blocks=False)
    url = f"az://{container}/{key}"
    so = az.options()
    etag = _az_client(az, container).properties(key)["etag"]
    az.reset_log()
    [res] = pqindex.add_indexes(url, distinct=["s"], storage_options=so)
    with az.proxy.log.lock:
        log = list(az.proxy.log.requests)
    copies = [r for r in log if r.header("x-ms-copy-source")]
    assert copies, "Put Block From URL was not tried"
    data_end = _data_end(before)
    assert all(r.header("x-ms-source-range") == f"bytes=0-{data_end - 1}" for r in copies)
    assert all((r.header("x-ms-copy-source") or "").count("sig=") == 1 for r in copies)
    assert all(r.header("x-ms-source-if-match") == etag for r in copies)
    assert all((r.header("Authorization") or "").startswith(f"SharedKey {ACCOUNT}:")
               for r in copies)
    after = bytes(obstore.get(az.azurite.store(container), key).bytes())
    assert after[:data_end] == before[:data_end]
    assert res.bytes_uploaded == len(after) and res.bytes_copied_server_side == 0
    _same_rows(after, before, tmp_path)
    _check_indexed(url, so, t, before, len(after))


@pytest.mark.parametrize("when", ["after the tail block", "at the commit"])
def test_azure_change_before_commit_leaves_the_new_object(
    az: _AzureEndpoint, container: str, original: tuple[pa.Table, bytes],
    monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """Another writer replaces the blob between the read and the commit: the
    look at the ETag (first case) or Azurite's If-Match (second) refuses it;
    the other writer's blob stays."""
    _t, before = original
    key = f"race/{when.replace(' ', '_')}.parquet"
    _az_put(az, container, key, before, blocks=True)
    store = az.azurite.store(container)
    changed = b"PAR1 someone else's object"
    target = "put_block" if when == "after the tail block" else "put_block_list"
    real = getattr(AzureBlocks, target)

    def change_then(self: AzureBlocks, *a: Any, **kw: Any) -> Any:
        if target == "put_block":
            out = real(self, *a, **kw)
            obstore.put(store, key, changed)
            return out
        obstore.put(store, key, changed)
        return real(self, *a, **kw)

    monkeypatch.setattr(AzureBlocks, target, change_then)
    url = f"az://{container}/{key}"
    with pytest.raises(ObjectChangedError) as info:
        pqindex.add_indexes(url, distinct=["s"], storage_options=az.options())
    assert info.value.path == url
    assert info.value.operation == ("Get Blob Properties" if target == "put_block"
                                    else "Put Block List")
    assert bytes(obstore.get(store, key).bytes()) == changed


# ------------------------------------------------------------------ GCS (fake-gcs-server)


def test_gcs_composes_the_object_and_the_new_tail(
    gcs: Gcs, original: tuple[pa.Table, bytes], tmp_path: Path  # noqa: F811
) -> None:
    t, before = original
    bucket = gcs.new_bucket("compose")
    key = "lake/f.parquet"
    gcs.put(bucket, key, before)
    url = f"gs://{bucket}/{key}"
    so = gcs.options

    gcs.reset_log()
    [res] = pqindex.add_indexes(url, bloom=["k"], storage_options=so)
    log = gcs.requests
    after1 = gcs.get(bucket, key)
    assert after1[: len(before)] == before
    assert res.bytes_uploaded == len(after1) - len(before) < 0.05 * len(before)
    assert res.bytes_copied_server_side == len(before)
    # the tail object, the compose request's JSON, nothing else of size
    assert res.bytes_uploaded <= gcs.uploaded_bytes < res.bytes_uploaded + 4096
    [compose] = [r for r in log if r.path.endswith("/compose")]
    assert "ifGenerationMatch=" in compose.query
    assert [r for r in log if r.method == "DELETE" and "_pqindex_tmp" in r.path]
    assert gcs.names(bucket, "lake/_pqindex_tmp/") == []
    _same_rows(after1, before, tmp_path)

    # Again, with a page index retrofitted: the tail goes after the first one.
    [res2] = pqindex.add_indexes(url, distinct=["s"], page_index="add", storage_options=so)
    after2 = gcs.get(bucket, key)
    assert after2[: len(after1)] == after1
    assert res2.bytes_uploaded == len(after2) - len(after1) and res2.page_index_added > 0
    _same_rows(after2, before, tmp_path)
    _check_indexed(url, so, t, before, len(after2))
    assert gcs.names(bucket) == [key]

    # drop: the new footer names no region; the old one is dead bytes.
    [res3] = pqindex.add_indexes(url, drop=True, storage_options=so)
    after3 = gcs.get(bucket, key)
    assert res3.region_dropped and after3[: len(after2)] == after2
    assert b"pqindex.region" in (pq.read_metadata(io.BytesIO(after2)).metadata or {})
    assert b"pqindex.region" not in (pq.read_metadata(io.BytesIO(after3)).metadata or {})
    _same_rows(after3, before, tmp_path)


def test_gcs_change_before_compose_leaves_the_new_object(
    gcs: Gcs, original: tuple[pa.Table, bytes], monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    _t, before = original
    bucket = gcs.new_bucket("race")
    key = "f.parquet"
    gcs.put(bucket, key, before)
    changed = b"PAR1 someone else's object"
    real = GcsCompose.create

    def create_then_change(self: GcsCompose, name: str, data: bytes) -> int:
        gen = real(self, name, data)
        gcs.put(bucket, key, changed)  # another writer, after the read
        return gen

    monkeypatch.setattr(GcsCompose, "create", create_then_change)
    url = f"gs://{bucket}/{key}"
    gcs.reset_log()
    with pytest.raises(ObjectChangedError) as info:
        pqindex.add_indexes(url, distinct=["s"], storage_options=gcs.options)
    assert info.value.path == url and info.value.operation == "GET object metadata"
    assert gcs.get(bucket, key) == changed
    assert not [r for r in gcs.requests if r.path.endswith("/compose")]
    assert gcs.names(bucket) == [key]  # the tail object was deleted



def test_gcs_failed_compose_leaves_the_object_and_no_tail_object(
    gcs: Gcs, original: tuple[pa.Table, bytes]  # noqa: F811
) -> None:
    _t, before = original
    bucket = gcs.new_bucket("fail")
    key = "f.parquet"
    gcs.put(bucket, key, before)
    gcs.proxy.answer = lambda r: (503, "Unavailable") if r.path.endswith("/compose") else None
    gcs.reset_log()
    try:
        with pytest.raises(pqindex.PqIndexError) as info:
            pqindex.add_indexes(f"gs://{bucket}/{key}", distinct=["s"],
                                storage_options={**gcs.options, "max_retries": "2"})
    finally:
        gcs.proxy.answer = None
    assert info.value.path == f"gs://{bucket}/{key}"
    assert "compose" in str(info.value) and "503" in str(info.value)
    assert len([r for r in gcs.requests if r.path.endswith("/compose")]) == 3  # retried
    assert gcs.get(bucket, key) == before
    assert gcs.names(bucket) == [key]


def test_azure_failed_commit_leaves_the_blob(
    az: _AzureEndpoint, container: str, original: tuple[pa.Table, bytes]
) -> None:
    _t, before = original
    key = "fail/f.parquet"
    _az_put(az, container, key, before, blocks=True)
    az.proxy.answer = lambda r: ((400, "InvalidBlockList") if "comp=blocklist" in r.query
                                 and r.method == "PUT" else None)
    url = f"az://{container}/{key}"
    try:
        with pytest.raises(pqindex.PqIndexError) as info:
            pqindex.add_indexes(url, distinct=["s"], storage_options=az.options())
    finally:
        az.proxy.answer = None
    assert info.value.path == url and "Put Block List" in str(info.value)
    assert bytes(obstore.get(az.azurite.store(container), key).bytes()) == before
    client = _az_client(az, container)
    _etag, blocks = client.committed_blocks(key)
    client.close()
    assert sum(n for _b, n in blocks) == len(before)


class _LosingProxy(_Proxy):
    """The counting proxy, losing the answer to the first Put Block List: Azurite
    commits it, the client gets a 503 (as when the connection drops after the
    commit) and sends the list again."""

    def __init__(self, azurite: Azurite) -> None:  # noqa: F811
        super().__init__(("127.0.0.1", azurite.port), _Log())
        self.lost: list[bytes] = []

    async def _forward(self, method: str, head: bytes, headers: list[tuple[str, str]],
                       body: bytes) -> bytes:
        answer = await super()._forward(method, head, headers, body)
        target = head.split(b"\r\n", 1)[0].decode().split(" ")[1]
        if method == "PUT" and "comp=blocklist" in target and not self.lost:
            self.lost.append(answer)
            return b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
        return answer


def test_azure_lost_commit_answer_is_reconciled(
    azurite: Azurite, container: str, az: _AzureEndpoint,  # noqa: F811
    original: tuple[pa.Table, bytes], tmp_path: Path,
) -> None:
    """Regression: a Put Block List that committed but whose answer was lost was sent
    again, got 412 (the ETag had changed: by that very commit) and was reported as
    ObjectChangedError. The committed list now being ours is a success, as S3's
    NoSuchUpload and GCS's 412 after a lost answer are."""
    t, before = original
    key = "lost/f.parquet"
    _az_put(az, container, key, before, blocks=True)
    proxy = _LosingProxy(azurite)
    so = {"account_name": ACCOUNT, "account_key": ACCOUNT_KEY, "allow_http": "true",
          "endpoint": f"http://127.0.0.1:{proxy.port}/{ACCOUNT}"}
    url = f"az://{container}/{key}"
    try:
        [res] = pqindex.add_indexes(url, distinct=["s"], storage_options=so)
        with proxy.log.lock:
            commits = [r for r in proxy.log.requests
                       if r.method == "PUT" and "comp=blocklist" in r.query]
    finally:
        proxy.stop()
    assert proxy.lost and b" 201 " in proxy.lost[0].split(b"\r\n", 1)[0], \
        "the first commit did not succeed at Azurite: the case is not tested"
    assert len(commits) == 2  # the lost one and the retry that got 412
    after = bytes(obstore.get(az.azurite.store(container), key).bytes())
    assert after[: len(before)] == before and res.bytes_after == len(after)
    assert res.streamed_because == "" and res.bytes_copied_server_side == len(before)
    _same_rows(after, before, tmp_path)
    _check_indexed(url, az.options(), t, before, len(after))


def test_azure_retry_refused_by_another_commit_is_a_change(
    azurite: Azurite, container: str, az: _AzureEndpoint,  # noqa: F811
    original: tuple[pa.Table, bytes],
) -> None:
    """The same lost answer, but the blob's list is not ours any more (someone
    committed over it in between): ObjectChangedError, as before."""
    _t, before = original
    key = "lost2/f.parquet"
    _az_put(az, container, key, before, blocks=True)

    class Overwriting(_LosingProxy):
        async def _forward(self, method: str, head: bytes, headers: list[tuple[str, str]],
                           body: bytes) -> bytes:
            answer = await super()._forward(method, head, headers, body)
            if self.lost and not getattr(self, "overwritten", False):
                self.overwritten = True
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(None, functools.partial(
                    _az_put, az, container, key, b"other" * 10, blocks=False))
            return answer

    proxy = Overwriting(azurite)
    so = {"account_name": ACCOUNT, "account_key": ACCOUNT_KEY, "allow_http": "true",
          "endpoint": f"http://127.0.0.1:{proxy.port}/{ACCOUNT}"}
    try:
        with pytest.raises(ObjectChangedError):
            pqindex.add_indexes(f"az://{container}/{key}", distinct=["s"], storage_options=so)
    finally:
        proxy.stop()
    assert bytes(obstore.get(az.azurite.store(container), key).bytes()) == b"other" * 10


def test_gcs_user_credentials_get_an_access_token(
    gcs: Gcs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """authorized_user credentials: the refresh token is exchanged at token_uri
    (a local OAuth endpoint here), the access token sent as a bearer token and
    reused until a minute before it expires. The requests themselves go to the
    emulator (the JSON file cannot name another endpoint), which ignores it."""
    import dataclasses
    import http.server
    import threading

    seen: list[dict[str, list[str]]] = []
    life = {"s": 3600}

    class Token(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            n = int(self.headers["Content-Length"])
            seen.append(urllib.parse.parse_qs(self.rfile.read(n).decode()))
            body = json.dumps({"access_token": f"tok-{len(seen)}", "expires_in": life["s"],
                               "token_type": "Bearer"}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Token)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        adc = tmp_path / "adc.json"
        adc.write_text(json.dumps({
            "type": "authorized_user", "client_id": "cid", "client_secret": "csecret",
            "refresh_token": "rtok", "token_uri": f"http://127.0.0.1:{server.server_port}/t"}))
        for name in [n for n in os.environ if n.upper().startswith("GOOGLE_")]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc))
        bucket = gcs.new_bucket("token")
        cfg = gcs_config(f"gs://{bucket}/k")
        assert cfg is not None and cfg.base_url == "https://storage.googleapis.com"
        assert cfg.token is not None and "csecret" not in repr(cfg)
        client = GcsCompose(dataclasses.replace(cfg, base_url=gcs.url))
        gcs.reset_log()
        gen = client.create("a/_pqindex_tmp/t.tail", b"tail")
        assert int(client.metadata("a/_pqindex_tmp/t.tail")["size"]) == 4
        assert [r.header("Authorization") for r in gcs.requests] == ["Bearer tok-1"] * 2
        assert len(seen) == 1 and seen[0] == {"grant_type": ["refresh_token"],
                                              "client_id": ["cid"],
                                              "client_secret": ["csecret"],
                                              "refresh_token": ["rtok"]}
        life["s"] = 30  # under the minute of margin: renewed on every use
        client.config.token._until = 0.0  # type: ignore[union-attr]
        client.delete("a/_pqindex_tmp/t.tail", gen)
        assert gcs.requests[-1].header("Authorization") == "Bearer tok-2"
        client.close()
    finally:
        server.shutdown()
        server.server_close()
    # The token endpoint gone: the request fails naming what was tried.
    with pytest.raises(pqindex.PqIndexError) as info:
        cfg.token._until = 0.0  # type: ignore[union-attr]
        cfg.token()
    assert "OAuth token refresh" in str(info.value)


# ------------------------------------------------------------------ Put Block From URL


class _CopyingProxy(_Proxy):
    """The counting proxy, answering Put Block From URL, which Azurite lacks, as
    Azure does: the source range is read from Azurite with the request's source
    URL (its SAS checked by Azurite) and ``x-ms-source-if-match`` as ``If-Match``,
    and staged with Put Block straight to Azurite. Nothing of it passes the
    proxy's counters: on Azure those bytes never leave the store."""

    def __init__(self, azurite: Azurite) -> None:  # noqa: F811
        super().__init__(("127.0.0.1", azurite.port), _Log())
        self.direct = f"http://127.0.0.1:{azurite.port}"
        self.copied: list[tuple[str, str, str | None]] = []  # (block id, range, condition)

    async def _forward(self, method: str, head: bytes, headers: list[tuple[str, str]],
                       body: bytes) -> bytes:
        source = next((v for k, v in headers if k.lower() == "x-ms-copy-source"), None)
        if method == "PUT" and source:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, self._copy, head, dict(
                (k.lower(), v) for k, v in headers), source)
        return await super()._forward(method, head, headers, body)

    def _copy(self, head: bytes, headers: dict[str, str], source: str) -> bytes:
        target = head.split(b"\r\n", 1)[0].decode().split(" ")[1]
        u = urllib.parse.urlsplit(target)
        block_id = dict(urllib.parse.parse_qsl(u.query))["blockid"]
        src = urllib.parse.urlsplit(source)
        get = urllib.request.Request(f"{self.direct}{src.path}?{src.query}", headers={
            "Range": headers["x-ms-source-range"], "x-ms-version": "2021-08-06",
            **({"If-Match": headers["x-ms-source-if-match"]}
               if "x-ms-source-if-match" in headers else {})})
        try:
            with urllib.request.urlopen(get, timeout=30) as res:
                data = res.read()
        except urllib.error.HTTPError as e:
            code = "SourceConditionNotMet" if e.code == 412 else "CannotVerifyCopySource"
            return (f"HTTP/1.1 {e.code} Copy Failed\r\nx-ms-error-code: {code}\r\n"
                    "Content-Length: 0\r\n\r\n").encode()
        parts = u.path.split("/", 3)  # '', account, container, blob
        cfg = azure_config(f"az://{parts[2]}/x", {
            "account_name": ACCOUNT, "account_key": ACCOUNT_KEY, "allow_http": "true",
            "endpoint": f"{self.direct}/{ACCOUNT}"})
        assert cfg is not None
        client = AzureBlocks(cfg)
        try:
            client.put_block(urllib.parse.unquote(parts[3]), block_id, data)
        finally:
            client.close()
        self.copied.append((block_id, headers["x-ms-source-range"],
                            headers.get("x-ms-source-if-match")))
        return b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"


@pytest.fixture
def copying(azurite: Azurite, monkeypatch: pytest.MonkeyPatch  # noqa: F811
            ) -> Iterator[tuple[_CopyingProxy, dict[str, str]]]:
    from pqindex.write import cloud_copy

    monkeypatch.setattr(cloud_copy, "COPY_BLOCK_BYTES", 2 * MiB)  # several blocks
    proxy = _CopyingProxy(azurite)
    so = {"account_name": ACCOUNT, "account_key": ACCOUNT_KEY, "allow_http": "true",
          "endpoint": f"http://127.0.0.1:{proxy.port}/{ACCOUNT}"}
    try:
        yield proxy, so
    finally:
        proxy.stop()


def test_azure_put_block_from_url_copies_the_data_range(
    copying: tuple[_CopyingProxy, dict[str, str]], az: _AzureEndpoint, container: str,
    original: tuple[pa.Table, bytes], tmp_path: Path
) -> None:
    """A Put Blob blob (no block list): the data range as blocks copied by the
    store, each from the version read, then the tail block; only the tail goes up."""
    proxy, so = copying
    t, before = original
    key = "fromurl/f.parquet"
    _az_put(az, container, key, before, blocks=False)
    etag = _az_client(az, container).properties(key)["etag"]
    url = f"az://{container}/{key}"
    [res] = pqindex.add_indexes(url, distinct=["s"], storage_options=so)
    after = bytes(obstore.get(az.azurite.store(container), key).bytes())
    data_end = _data_end(before)
    assert after[:data_end] == before[:data_end]
    assert res.bytes_copied_server_side == data_end
    assert res.bytes_uploaded == len(after) - data_end
    with proxy.log.lock:
        sent = sum(r.length for r in proxy.log.requests)
    assert res.bytes_uploaded <= sent < res.bytes_uploaded + 16 * 1024
    spans = sorted(tuple(map(int, r[6:].split("-"))) for _b, r, _c in proxy.copied)
    assert len(spans) == len(block_ranges(data_end, 2 * MiB)) >= 4
    assert spans[0][0] == 0 and spans[-1][1] == data_end - 1
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(spans))
    assert all(c == etag for _b, _r, c in proxy.copied)
    client = _az_client(az, container)
    _e, blocks = client.committed_blocks(key)
    client.close()
    assert [b for b, _n in blocks[:-1]] == [b for b, _r, _c in sorted(
        proxy.copied, key=lambda x: int(x[1][6:].split("-")[0]))]
    _same_rows(after, before, tmp_path)
    _check_indexed(url, az.options(), t, before, len(after))


def test_azure_copy_from_a_changed_source_is_refused(
    copying: tuple[_CopyingProxy, dict[str, str]], az: _AzureEndpoint, container: str,
    original: tuple[pa.Table, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blob changes once the copies start: the store refuses to copy from
    it (x-ms-source-if-match), nothing is committed, the new blob stays."""
    _proxy, so = copying
    _t, before = original
    key = "fromurl/race.parquet"
    _az_put(az, container, key, before, blocks=False)
    store = az.azurite.store(container)
    changed = b"X" + before[1:]  # as large: the ranges exist in it too
    real = AzureBlocks.put_block_from_url
    done: list[bool] = []

    def change_first(self: AzureBlocks, *a: Any, **kw: Any) -> None:
        if not done:
            done.append(True)
            obstore.put(store, key, changed, use_multipart=False)
        real(self, *a, **kw)

    monkeypatch.setattr(AzureBlocks, "put_block_from_url", change_first)
    url = f"az://{container}/{key}"
    with pytest.raises(ObjectChangedError) as info:
        pqindex.add_indexes(url, distinct=["s"], storage_options=so)
    assert info.value.path == url and info.value.operation.startswith("Put Block From URL")
    assert bytes(obstore.get(store, key).bytes()) == changed
