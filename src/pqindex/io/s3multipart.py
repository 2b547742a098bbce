"""S3 multipart uploads whose parts may be server-side copies of byte ranges.

obstore 0.12 has no ``UploadPartCopy``, the one request that lets a new object
be assembled from a range of an existing one without the bytes leaving S3. The
multipart requests are therefore issued here: signed with ``io.s3sign``, sent
with ``http.client`` (keep-alive connections reused across threads), retried on 5xx,
429 and dropped connections with exponential backoff, and every failure
turned into a :class:`~pqindex.io.errors.StorageError` naming the URL and the
request (``io.errors.s3_error``).

Configuration is the one obstore's S3 store gets: the storage options (same
keys and aliases as ``io.objstore``) over the ``AWS_*`` environment variables.
Only static credentials (with an optional session token) are reproduced;
:func:`s3_config` returns None without them (anonymous access, instance
profiles, ...), and the caller then takes the path obstore can serve. With an
endpoint, requests are path-style (``endpoint/bucket/key``) unless
``virtual_hosted_style_request`` is set (then the endpoint is the bucket's
URL, as obstore reads it); on AWS they go to
``bucket.s3.<region>.amazonaws.com`` (path-style for bucket names with dots,
which the wildcard certificate does not cover).
"""

from __future__ import annotations

import hashlib
import http.client
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape

from pqindex.io.credentials import CredentialSource, s3_settings
from pqindex.io.errors import StorageError, s3_error
from pqindex.io.restcall import (
    RETRY_STATUS,
    Http,
    Response,
    backoff,
    commit_reconciled,
    connection_error,
)
from pqindex.io.s3sign import EMPTY_SHA256, sign, uri_encode

__all__ = ["MAX_PARTS", "MAX_PART_BYTES", "MIN_PART_BYTES", "CopyNotSupportedError",
           "S3Config", "S3Multipart", "etag_matches", "s3_config"]

MIN_PART_BYTES = 5 << 20  # every part but the last
MAX_PART_BYTES = 5 << 30
MAX_PARTS = 10_000
_DEFAULT_TIMEOUT = 60.0  # seconds per socket read; a large part copy answers late
_DEFAULT_RETRIES = 5


class CopyNotSupportedError(StorageError):
    """The store refused ``UploadPartCopy`` (501 NotImplemented): copy the other way."""


@dataclass(frozen=True)
class S3Config:
    """Where and as whom to send S3 requests for one bucket."""

    bucket: str
    region: str
    credentials: CredentialSource  # called per request: refreshed keys are used
    endpoint: str | None = None  # scheme://host[:port][/base]
    virtual_hosted: bool = False
    allow_http: bool = False
    timeout: float = _DEFAULT_TIMEOUT
    max_retries: int = _DEFAULT_RETRIES
    client_options: Mapping[str, Any] = field(default_factory=dict)  # proxy, TLS


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _seconds(value: str | None, default: float) -> float:
    # obstore's form: seconds ("30", "30s"), or a timedelta given as an option
    try:
        if value and value.count(":") == 2:
            h, m, sec = value.split(":")
            return int(h) * 3600 + int(m) * 60 + float(sec)
        return float(value.rstrip("s")) if value else default
    except ValueError:
        return default


def s3_config(url: str, storage_options: Mapping[str, Any] | None = None
              ) -> tuple[S3Config | None, str]:
    """The configuration for ``url`` (``s3://`` or ``s3a://``), or None and the reason
    this module cannot sign for it (another scheme; unsigned requests or credentials
    that cannot be shared, see ``io.credentials``). The credentials are the store's
    (the provider obstore signs with)."""
    from pqindex.io.objstore import get_store, split_url

    root, _key = split_url(url)
    scheme, _, bucket = root.partition("://")
    if scheme.lower() not in ("s3", "s3a") or not bucket:
        return None, "not an S3 URL"
    handle, _ = get_store(url, storage_options)
    choice = handle.s3_credentials
    if choice is None or choice.signer is None:
        return None, choice.reason if choice is not None else "no credentials"
    s = s3_settings(storage_options)
    region = s.get("region") or s.get("default_region") or "us-east-1"
    retries = s.get("max_retries")
    return S3Config(
        bucket=bucket, region=region, credentials=choice.signer,
        endpoint=(s.get("endpoint") or "").rstrip("/") or None,
        virtual_hosted=_flag(s.get("virtual_hosted_style_request")),
        allow_http=_flag(s.get("allow_http")),
        timeout=_seconds(s.get("timeout"), _DEFAULT_TIMEOUT),
        max_retries=int(retries) if retries and retries.isdigit() else _DEFAULT_RETRIES,
        client_options=handle.client_options,
    ), ""


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _xml(body: bytes) -> ET.Element | None:
    try:
        return ET.fromstring(body) if body.strip() else None
    except ET.ParseError:
        return None


def _text(root: ET.Element | None, name: str) -> str | None:
    if root is None:
        return None
    for el in root.iter():
        if _local(el.tag) == name:
            return (el.text or "").strip()
    return None


def _unquote(etag: str | None) -> str:
    return (etag or "").strip().strip('"')


class S3Multipart:
    """The multipart requests on one bucket of one configuration (thread-safe)."""

    def __init__(self, config: S3Config) -> None:
        self.config = config
        if config.endpoint:
            u = urllib.parse.urlsplit(config.endpoint)
            self._scheme = u.scheme.lower() or "https"
            self._host = u.netloc
            self._base = u.path.rstrip("/")
            self._path_style = not config.virtual_hosted
        else:
            self._scheme = "https"
            dotted = "." in config.bucket
            self._host = (f"s3.{config.region}.amazonaws.com" if dotted
                          else f"{config.bucket}.s3.{config.region}.amazonaws.com")
            self._base = ""
            self._path_style = dotted
        if self._scheme == "http" and not config.allow_http:
            raise StorageError("plain http:// needs the storage option allow_http=true",
                               path=config.endpoint or "", operation="configure the store")
        self._http = Http(f"{self._scheme}://{self._host}", timeout=config.timeout,
                          client_options=config.client_options)

    # ------------------------------------------------------------ transport

    def url(self, key: str) -> str:
        return f"s3://{self.config.bucket}/{key}"

    def address(self, key: str) -> str:
        """The HTTP(S) URL requests about ``key`` go to."""
        return f"{self._scheme}://{self._host}{self._path(key)}"

    def _path(self, key: str) -> str:
        bucket = f"/{uri_encode(self.config.bucket)}" if self._path_style else ""
        return f"{self._base}{bucket}/{uri_encode(key, keep_slash=True)}"

    def close(self) -> None:
        """Close the idle keep-alive connections."""
        self._http.close()

    def _send(self, method: str, key: str, query: Sequence[tuple[str, str]],
              headers: Mapping[str, str], body: bytes) -> Response:
        path = self._path(key)
        if query:
            path += "?" + "&".join(f"{uri_encode(k)}={uri_encode(v)}" if v else uri_encode(k)
                                   for k, v in query)
        digest = hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256
        signed = sign(method, self._host, path.split("?", 1)[0], query, headers, digest,
                      self.config.credentials(), self.config.region)
        return self._http.once(method, path, signed, body)

    def request(self, method: str, key: str, operation: str, *,
                query: Sequence[tuple[str, str]] = (), headers: Mapping[str, str] | None = None,
                body: bytes = b"", retries: int | None = None,
                error_in_body: bool = False) -> Response:
        """Send one request, retrying transient failures; a StorageError otherwise.
        ``error_in_body``: S3 may answer 200 with an ``<Error>`` document (copies,
        completion) — that is a failure too."""
        url = self.url(key)
        attempts = (self.config.max_retries if retries is None else retries) + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                resp = self._send(method, key, query, headers or {}, body)
            except (OSError, http.client.HTTPException) as e:
                if last:
                    raise connection_error(e, self.config.timeout, url, operation) from None
                backoff(attempt)
                continue
            root = _xml(resp.body) if (resp.status >= 300 or error_in_body) else None
            failed = resp.status >= 300 or (root is not None and _local(root.tag) == "Error")
            if not failed:
                return resp
            code, message = _text(root, "Code"), _text(root, "Message") or ""
            if (resp.status in RETRY_STATUS or code in ("InternalError", "SlowDown")) \
                    and not last:
                backoff(attempt)
                continue
            if resp.status == 501 or code == "NotImplemented":
                raise CopyNotSupportedError(
                    f"the store does not implement this request (HTTP {resp.status} "
                    f"{code or ''}: {message})", path=url, operation=operation)
            raise s3_error(resp.status, code, message, url, operation)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------ operations

    def head(self, key: str) -> tuple[str, int]:
        """(ETag, size) of an object."""
        r = self.request("HEAD", key, "HEAD")
        return r.headers.get("etag", ""), int(r.headers.get("content-length", "0"))

    def create(self, key: str) -> str:
        """Start a multipart upload of ``key``; its upload id."""
        r = self.request("POST", key, "CreateMultipartUpload", query=[("uploads", "")],
                         error_in_body=True)
        upload_id = _text(_xml(r.body), "UploadId")
        if not upload_id:
            raise StorageError("no UploadId in the answer", path=self.url(key),
                               operation="CreateMultipartUpload")
        return upload_id

    def copy_part(self, key: str, upload_id: str, number: int, source_key: str,
                  start: int, end: int, *, if_match: str | None = None,
                  version: str | None = None) -> str:
        """Part ``number`` := bytes ``[start, end)`` of ``source_key`` (same bucket),
        copied by the store, only from the object whose ETag is ``if_match``
        (412 otherwise). Returns the part's ETag."""
        source = f"/{uri_encode(self.config.bucket)}/{uri_encode(source_key, keep_slash=True)}"
        if version:
            source += f"?versionId={uri_encode(version)}"
        headers = {"x-amz-copy-source": source,
                   "x-amz-copy-source-range": f"bytes={start}-{end - 1}"}
        if if_match:
            headers["x-amz-copy-source-if-match"] = if_match
        r = self.request("PUT", key, f"UploadPartCopy (part {number})",
                         query=[("partNumber", str(number)), ("uploadId", upload_id)],
                         headers=headers, error_in_body=True)
        etag = _text(_xml(r.body), "ETag")
        if not etag:
            raise StorageError("no ETag in the answer", path=self.url(key),
                               operation=f"UploadPartCopy (part {number})")
        return etag

    def upload_part(self, key: str, upload_id: str, number: int, data: bytes) -> str:
        """Part ``number`` := ``data``; its ETag."""
        r = self.request("PUT", key, f"UploadPart (part {number})",
                         query=[("partNumber", str(number)), ("uploadId", upload_id)],
                         body=data)
        etag = r.headers.get("etag")
        if not etag:
            raise StorageError("no ETag in the answer", path=self.url(key),
                               operation=f"UploadPart (part {number})")
        return etag

    def complete(self, key: str, upload_id: str, parts: Sequence[tuple[int, str]], *,
                 if_match: str | None = None, size: int | None = None) -> str:
        """Assemble the parts into the object; with ``if_match`` only if the object
        still has that ETag (stores that honour the condition answer 412). Returns
        the new object's ETag.

        A retried completion whose first attempt did succeed answers NoSuchUpload;
        then the object is looked at: an ETag of as many parts and the size
        expected mean it is ours."""
        body = "<CompleteMultipartUpload>" + "".join(
            f"<Part><PartNumber>{n}</PartNumber><ETag>{escape(e)}</ETag></Part>"
            for n, e in parts) + "</CompleteMultipartUpload>"
        headers = {"If-Match": if_match} if if_match else {}

        def send() -> str:
            r = self.request("POST", key, "CompleteMultipartUpload",
                             query=[("uploadId", upload_id)], headers=headers,
                             body=body.encode(), retries=0, error_in_body=True)
            return _text(_xml(r.body), "ETag") or ""

        def ours() -> str | None:
            etag, got = self.head(key)
            done = _unquote(etag).endswith(f"-{len(parts)}") and size in (None, got)
            return etag if done else None

        return commit_reconciled(send, attempts=self.config.max_retries + 1,
                                 lost=lambda e: e.code == "NoSuchUpload", reconcile=ours)

    def abort(self, key: str, upload_id: str) -> None:
        """Abort the upload: its parts are deleted; NoSuchUpload counts as done."""
        try:
            self.request("DELETE", key, "AbortMultipartUpload", query=[("uploadId", upload_id)])
        except StorageError as e:
            if e.code != "NoSuchUpload":
                raise


def etag_matches(a: str | None, b: str | None) -> bool:
    """Whether two ETags name the same object version (quotes do not matter)."""
    return bool(a) and _unquote(a) == _unquote(b)

