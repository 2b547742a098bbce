"""Azure block blobs assembled from blocks the store already holds or copies itself.

obstore 0.12 cannot list a blob's blocks, commit a block list that reuses them,
or stage a block from a URL range. ``add_indexes`` on ``az://`` needs those
(``write.remote_index``), so they are sent here over ``io.restcall``:

* Get Block List (committed) and Get Blob Properties;
* Put Block (the new index tail);
* Put Block From URL: a block copied by the store from a byte range
  (``x-ms-source-range``) of a source URL, only from the version read
  (``x-ms-source-if-match``). The source must be authorized even in the same
  account: with an account key a read-only service SAS for the one blob is made
  here (valid 1 hour); with a SAS token that token is appended; with a bearer
  token it goes in ``x-ms-copy-source-authorization``;
* Put Block List, conditional on the ETag read (``If-Match``).

Requests are signed with SharedKey (HMAC-SHA256 of the documented canonical
form) when an account key is configured, carry the SAS token in the query, or a
bearer token. Configuration is obstore's: storage options over the
``AZURE_STORAGE_*`` environment variables; :func:`azure_config` returns None
without any of the three (the caller streams through obstore instead).
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import hmac
import secrets
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

from pqindex.io.errors import (
    ObjectChangedError,
    ObjectNotFoundError,
    StorageAccessError,
    StorageError,
    ThrottledError,
)
from pqindex.io.restcall import (
    RETRY_STATUS,
    Http,
    Response,
    client_options,
    commit_reconciled,
    store_settings,
)

__all__ = ["API_VERSION", "MAX_BLOCKS", "MAX_COPY_BLOCK_BYTES", "AzureBlocks", "AzureConfig",
           "BlockNotSupportedError", "azure_config", "blob_sas", "shared_key_signature"]

API_VERSION = "2021-08-06"
MAX_BLOCKS = 50_000  # committed blocks per blob
MAX_COPY_BLOCK_BYTES = 100 << 20  # Put Block From URL's documented block limit
_SAS_HOURS = 1

_KEYS = {  # obstore's Azure keys and aliases -> one name here
    "account_name": "account", "storage_account_name": "account",
    "account_key": "key", "access_key": "key", "storage_account_key": "key",
    "storage_access_key": "key",
    "sas_key": "sas", "sas_token": "sas", "storage_sas_key": "sas", "storage_sas_token": "sas",
    "bearer_token": "token", "token": "token", "storage_token": "token",
    "endpoint": "endpoint", "storage_endpoint": "endpoint", "endpoint_url": "endpoint",
    "use_emulator": "emulator", "storage_use_emulator": "emulator",
    "allow_http": "allow_http", "timeout": "timeout", "max_retries": "max_retries",
}


class BlockNotSupportedError(StorageError):
    """The store does not implement the request (501; Azurite and Put Block From URL)."""


@dataclass(frozen=True)
class AzureConfig:
    """Where and as whom to send Blob requests for one container."""

    account: str
    container: str
    endpoint: str  # scheme://host[:port][/account] (the blob service root)
    key: bytes | None = None
    sas: str | None = None  # without the leading '?'
    token: str | None = None
    timeout: float = 60.0
    max_retries: int = 5
    client_options: Mapping[str, Any] = field(default_factory=dict)  # proxy, TLS

    def __repr__(self) -> str:  # never print secrets
        return f"AzureConfig(account={self.account!r}, container={self.container!r}, ...)"


def _settings(storage_options: Mapping[str, Any] | None) -> dict[str, str]:
    def key(k: str) -> str | None:
        for prefix in ("azure_", "storage_"):
            if k.startswith(prefix) and (k[len(prefix):] in _KEYS or prefix == "azure_"):
                k = k[len(prefix):]
        return _KEYS.get(k)

    return store_settings("AZURE_", storage_options, key)


def _flag(v: str | None) -> bool:
    return (v or "").strip().lower() in ("1", "true", "yes", "on")


def azure_config(url: str, storage_options: Mapping[str, Any] | None = None
                 ) -> AzureConfig | None:
    """The configuration for ``url`` (``az://container/key``, ``azure://``,
    ``abfs[s]://container@account.dfs.core.windows.net/key``), or None when no
    account key, SAS token or bearer token is configured."""
    u = urllib.parse.urlsplit(url)
    if u.scheme.lower() not in ("az", "azure", "abfs", "abfss", "adl") or not u.netloc:
        return None
    s = _settings(storage_options)
    container, _, host = u.netloc.partition("@")
    account = s.get("account") or (host.split(".", 1)[0] if host else "")
    if _flag(s.get("emulator")):
        account = account or "devstoreaccount1"
    if not account or not container:
        return None
    key = s.get("key")
    sas = (s.get("sas") or "").lstrip("?") or None
    if not (key or sas or s.get("token")):
        return None
    endpoint = s.get("endpoint") or (
        f"http://127.0.0.1:10000/{account}" if _flag(s.get("emulator"))
        else f"https://{account}.blob.core.windows.net")
    if endpoint.startswith("http://") and not (_flag(s.get("allow_http"))
                                               or _flag(s.get("emulator"))):
        return None  # obstore refuses it too; its error is the one to show
    try:
        secret = base64.b64decode(key, validate=True) if key else None
    except ValueError:
        return None
    retries = s.get("max_retries", "")
    return AzureConfig(account=account, container=container, endpoint=endpoint.rstrip("/"),
                       key=secret, sas=sas, token=s.get("token") or None,
                       timeout=float(s.get("timeout", "60").rstrip("s") or 60),
                       max_retries=int(retries) if retries.isdigit() else 5,
                       client_options=client_options(storage_options))


# ---------------------------------------------------------------- signing

_STANDARD = ("content-encoding", "content-language", "content-length", "content-md5",
             "content-type", "date", "if-modified-since", "if-match", "if-none-match",
             "if-unmodified-since", "range")


def shared_key_signature(method: str, path: str, query: Sequence[tuple[str, str]],
                         headers: Mapping[str, str], account: str, key: bytes) -> str:
    """The SharedKey ``Authorization`` value of a request (Blob service, 2009-09-19+
    form): verb, the standard headers (Content-Length empty when 0), sorted
    ``x-ms-`` headers, then ``/account/path`` and the sorted query."""
    h = {k.lower(): " ".join(str(v).split()) for k, v in headers.items()}
    if h.get("content-length") == "0":
        h["content-length"] = ""
    lines = [method.upper()] + [h.get(name, "") for name in _STANDARD]
    ms = "".join(f"{k}:{h[k]}\n" for k in sorted(h) if k.startswith("x-ms-"))
    resource = f"/{account}{path}"
    params: dict[str, list[str]] = {}
    for k, v in query:
        params.setdefault(k.lower(), []).append(v)
    for k in sorted(params):
        resource += f"\n{k}:{','.join(sorted(params[k]))}"
    to_sign = "\n".join(lines) + "\n" + ms + resource
    sig = base64.b64encode(hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).digest())
    return f"SharedKey {account}:{sig.decode()}"


def blob_sas(account: str, key: bytes, container: str, blob: str, *, permissions: str = "r",
             expiry: _dt.datetime | None = None, version: str = API_VERSION) -> str:
    """A service SAS (query string) for one blob: ``permissions`` until ``expiry``
    (2020-12-06+ string to sign)."""
    end = (expiry or _dt.datetime.now(_dt.UTC) + _dt.timedelta(hours=_SAS_HOURS))
    se = end.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    resource = f"/blob/{account}/{container}/{blob}"
    # permissions, start, expiry, resource, identifier, IP, protocol, version,
    # resource type, snapshot time, encryption scope, five response headers
    fields = [permissions, "", se, resource, "", "", "", version, "b", "", "",
              "", "", "", "", ""]
    sig = base64.b64encode(hmac.new(key, "\n".join(fields).encode("utf-8"),
                                    hashlib.sha256).digest()).decode()
    return urllib.parse.urlencode({"sv": version, "se": se, "sr": "b", "sp": permissions,
                                   "sig": sig})


# ---------------------------------------------------------------- errors


def _code(resp: Response) -> tuple[str, str]:
    code = resp.headers.get("x-ms-error-code", "")
    message = ""
    if resp.body.strip():
        try:
            root = ET.fromstring(resp.body)
            code = code or (root.findtext("Code") or "")
            message = (root.findtext("Message") or "").split("\n", 1)[0]
        except ET.ParseError:
            pass
    return code, message


def _error(resp: Response, url: str, operation: str) -> StorageError:
    code, message = _code(resp)
    detail = f"HTTP {resp.status}" + (f" {code}" if code else "") + (
        f": {message}" if message else "")
    status = resp.status
    if resp.status == 412 or "ConditionNotMet" in code:
        return ObjectChangedError(
            f"the object changed while it was read (ETag mismatch; {detail})",
            path=url, operation=operation)
    if resp.status == 501 or code == "NotImplemented":
        return BlockNotSupportedError(f"the store does not implement this request ({detail})",
                                      path=url, operation=operation)
    if resp.status == 404:
        return ObjectNotFoundError(f"no such object or container ({detail})", path=url,
                                   operation=operation)
    if resp.status in (401, 403):
        return StorageAccessError(f"access denied or no valid credentials ({detail})",
                                  path=url, operation=operation)
    if resp.status in (429, 503):
        return ThrottledError(f"throttled by the store after retries ({detail})", path=url,
                              operation=operation, status=status, code=code, transient=True)
    return StorageError(detail, path=url, operation=operation, status=status, code=code,
                        transient=status in RETRY_STATUS)


# ---------------------------------------------------------------- requests


class AzureBlocks:
    """The block requests on one container (thread-safe)."""

    def __init__(self, config: AzureConfig) -> None:
        self.config = config
        self.http = Http(config.endpoint, timeout=config.timeout,
                         max_retries=config.max_retries, client_options=config.client_options)

    def close(self) -> None:
        self.http.close()

    def url(self, blob: str) -> str:
        return f"az://{self.config.container}/{blob}"

    def blob_address(self, blob: str, *, sas: str | None = None) -> str:
        """The blob's HTTP(S) URL (a copy source), with ``sas`` as its query."""
        path = self._path(blob)
        return f"{self.http.scheme}://{self.http.host}{path}" + (f"?{sas}" if sas else "")

    def _path(self, blob: str) -> str:
        c = urllib.parse.quote(self.config.container, safe="")
        return f"{self.http.base_path}/{c}/{urllib.parse.quote(blob, safe='/~')}"

    def source_address(self, blob: str) -> str:
        """The blob's URL as a copy source, authorized for reading (see the module)."""
        if self.config.key is not None:
            return self.blob_address(blob, sas=blob_sas(
                self.config.account, self.config.key, self.config.container, blob))
        return self.blob_address(blob, sas=self.config.sas)

    def request(self, method: str, blob: str, operation: str, *,
                query: Sequence[tuple[str, str]] = (), headers: Mapping[str, str] | None = None,
                body: bytes = b"", ok: Sequence[int] = (200, 201),
                retries: int | None = None) -> Response:
        path = self._path(blob)
        cfg = self.config
        full_query = list(query)
        target = path
        if cfg.key is None and cfg.sas:
            target_q = "&".join(f"{urllib.parse.quote(k)}={urllib.parse.quote(v, safe='')}"
                                for k, v in full_query)
            target += "?" + "&".join(q for q in (target_q, cfg.sas) if q)
        elif full_query:
            target += "?" + "&".join(f"{urllib.parse.quote(k)}={urllib.parse.quote(v, safe='')}"
                                     for k, v in full_query)

        def signed() -> dict[str, str]:
            h = {"x-ms-version": API_VERSION, "x-ms-date": formatdate(usegmt=True),
                 "Content-Length": str(len(body))}
            h.update(headers or {})
            if cfg.key is not None:
                h["Authorization"] = shared_key_signature(method, path, full_query, h,
                                                          cfg.account, cfg.key)
            elif cfg.token and not cfg.sas:
                h["Authorization"] = f"Bearer {cfg.token}"
            return h

        resp = self.http.send(method, target, url=self.url(blob), operation=operation,
                              headers=signed, body=body, retries=retries)
        if resp.status not in ok:
            raise _error(resp, self.url(blob), operation)
        return resp

    # ------------------------------------------------------------ operations

    def properties(self, blob: str) -> dict[str, str]:
        """Get Blob Properties: the response headers (lower-case names)."""
        return self.request("HEAD", blob, "Get Blob Properties").headers

    def committed_blocks(self, blob: str) -> tuple[str, list[tuple[str, int]]]:
        """(ETag, committed blocks as (id, size)) — an empty list for a blob written
        in one Put Blob, which has no block list."""
        r = self.request("GET", blob, "Get Block List",
                         query=[("comp", "blocklist"), ("blocklisttype", "committed")])
        blocks: list[tuple[str, int]] = []
        root = ET.fromstring(r.body) if r.body.strip() else None
        committed = root.find("CommittedBlocks") if root is not None else None
        for b in (committed if committed is not None else []):
            name, size = b.findtext("Name"), b.findtext("Size")
            if name is None or size is None:
                raise StorageError("a block without a name or size in the block list",
                                   path=self.url(blob), operation="Get Block List")
            blocks.append((name, int(size)))
        return r.headers.get("etag", ""), blocks

    def put_block(self, blob: str, block_id: str, data: bytes) -> None:
        self.request("PUT", blob, "Put Block", query=[("comp", "block"), ("blockid", block_id)],
                     body=data)

    def put_block_from_url(self, blob: str, block_id: str, source_url: str, start: int,
                           end: int, *, source_if_match: str | None = None) -> None:
        """Block ``block_id`` := bytes ``[start, end)`` of ``source_url``, copied by
        the store, only from the version whose ETag is ``source_if_match``."""
        headers = {"x-ms-copy-source": source_url,
                   "x-ms-source-range": f"bytes={start}-{end - 1}"}
        if source_if_match:
            headers["x-ms-source-if-match"] = source_if_match
        if self.config.key is None and self.config.sas is None and self.config.token:
            headers["x-ms-copy-source-authorization"] = f"Bearer {self.config.token}"
        self.request("PUT", blob, f"Put Block From URL (bytes {start}-{end - 1})",
                     query=[("comp", "block"), ("blockid", block_id)], headers=headers)

    def put_block_list(self, blob: str, blocks: Sequence[tuple[str, str]], *,
                       if_match: str | None = None,
                       keep: Mapping[str, str] | None = None) -> str:
        """Commit ``blocks`` as (``Committed``|``Latest``, id) in order, only if the
        blob's ETag is still ``if_match``; ``keep``: the blob's Get Blob Properties
        headers, whose content headers and metadata are carried over. Returns the
        new ETag.

        Transient failures are sent again. A 412 to a second attempt is ours when
        the blob's committed block list is now exactly ``blocks`` (the ids are new
        and random): the first attempt committed and its answer was lost."""
        body = ('<?xml version="1.0" encoding="utf-8"?><BlockList>' + "".join(
            f"<{kind}>{bid}</{kind}>" for kind, bid in blocks) + "</BlockList>").encode()
        headers = {"Content-Type": "application/xml"}
        if if_match:
            headers["If-Match"] = if_match
        for name, value in (keep or {}).items():
            if name.startswith("x-ms-meta-"):
                headers[name] = value
            elif name in ("content-type", "content-encoding", "content-language",
                          "content-disposition", "cache-control"):
                headers[f"x-ms-blob-{name}"] = value
        sent = [b for _kind, b in blocks]

        def send() -> str:
            r = self.request("PUT", blob, "Put Block List", query=[("comp", "blocklist")],
                             headers=headers, body=body, retries=0)
            return r.headers.get("etag", "")

        def ours() -> str | None:
            etag, committed = self.committed_blocks(blob)
            return etag if [b for b, _n in committed] == sent else None

        return commit_reconciled(send, attempts=self.config.max_retries + 1,
                                 lost=lambda e: isinstance(e, ObjectChangedError),
                                 reconcile=ours)


def new_block_ids(count: int, taken: Sequence[str], size: int = 32) -> list[str]:
    """``count`` fresh base64 block ids of ``size`` bytes (a blob's ids must all be
    as long), none among ``taken``."""
    seen = set(taken)
    out: list[str] = []
    while len(out) < count:
        bid = base64.b64encode(secrets.token_bytes(size)).decode()
        if bid not in seen:
            seen.add(bid)
            out.append(bid)
    return out


def block_id_size(blocks: Sequence[tuple[str, int]]) -> int:
    """The decoded length the blob's block ids have (32 when it has none)."""
    for bid, _n in blocks:
        try:
            return len(base64.b64decode(bid))
        except ValueError:
            break
    return 32
