"""GCS objects replaced by a compose of the object itself and a new tail object.

GCS has no ranged part copy; ``compose`` concatenates whole objects server
side. ``write.remote_index`` uses it for ``add_indexes``: the new index tail is
uploaded as a temporary object (``ifGenerationMatch=0``: created, never
overwriting), then ``compose([object@generation, tail])`` is written over the
object with ``ifGenerationMatch`` on the destination and on the source (the
source is also named by its generation), so a concurrent change is refused
with 412 and nothing is replaced; the temporary object is deleted after,
whatever happened. These JSON API requests are sent over ``io.restcall``.

Credentials: obstore obtains OAuth tokens itself and does not hand them out,
and signing a service-account JWT needs RSA, which pqindex does not depend on.
:func:`gcs_config` therefore covers a service-account key with
``disable_oauth`` (emulators such as fake-gcs-server; its ``gcs_base_url`` is
the endpoint), ``skip_signature`` (anonymous), and user credentials
(``"type": "authorized_user"``, as ``gcloud auth application-default login``
writes them, given as ``application_credentials`` or
``GOOGLE_APPLICATION_CREDENTIALS``): their refresh token is exchanged for an
access token at the file's ``token_uri`` (Google's by default), a plain form
POST. For anything else (service-account keys, the metadata server) it
returns None and the caller streams the object through obstore instead.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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

__all__ = ["MAX_COMPOSE_SOURCES", "GcsCompose", "GcsConfig", "gcs_config", "temp_name"]

MAX_COMPOSE_SOURCES = 32
_PUBLIC = "https://storage.googleapis.com"
_KEYS = {
    "service_account_key": "key", "service_account": "key_path",
    "service_account_path": "key_path", "application_credentials": "key_path",
    "skip_signature": "anon", "anon": "anon", "timeout": "timeout",
    "max_retries": "max_retries",
}


@dataclass(frozen=True)
class GcsConfig:
    """Where to send JSON API requests for one bucket, and the access token
    source when requests are authorized (see the module)."""

    bucket: str
    base_url: str
    timeout: float = 60.0
    max_retries: int = 5
    token: UserToken | None = None
    client_options: Mapping[str, Any] = field(default_factory=dict)  # proxy, TLS


_TOKEN_URI = "https://oauth2.googleapis.com/token"


class UserToken:
    """Access tokens from a user's refresh token (OAuth 2 refresh grant),
    renewed a minute before they expire (thread-safe)."""

    def __init__(self, client_id: str, client_secret: str, refresh_token: str,
                 token_uri: str = _TOKEN_URI, timeout: float = 30.0) -> None:
        self._form = urllib.parse.urlencode({
            "grant_type": "refresh_token", "client_id": client_id,
            "client_secret": client_secret, "refresh_token": refresh_token}).encode()
        self.token_uri = token_uri
        self.timeout = timeout
        self._lock = threading.Lock()
        self._token = ""
        self._until = 0.0

    def __repr__(self) -> str:  # never print secrets
        return f"UserToken(token_uri={self.token_uri!r})"

    def __call__(self) -> str:
        with self._lock:
            if self._token and time.monotonic() < self._until:
                return self._token
            req = urllib.request.Request(self.token_uri, data=self._form, method="POST",
                                         headers={"Content-Type":
                                                  "application/x-www-form-urlencoded"})
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as res:
                    doc = json.loads(res.read())
                token = str(doc["access_token"])
                life = float(doc.get("expires_in", 3600))
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise StorageAccessError(f"no access token from the refresh token "
                                         f"({type(e).__name__}: {e})", path=self.token_uri,
                                         operation="OAuth token refresh") from None
            self._token, self._until = token, time.monotonic() + max(0.0, life - 60)
            return token


def _settings(storage_options: Mapping[str, Any] | None) -> dict[str, str]:
    def key(k: str) -> str | None:
        return _KEYS.get(k[len("google_"):] if k.startswith("google_") else k)

    return store_settings("GOOGLE_", storage_options, key)


def gcs_config(url: str, storage_options: Mapping[str, Any] | None = None) -> GcsConfig | None:
    """The configuration for ``gs://bucket/key``, or None when requests would need
    an OAuth token (see the module)."""
    u = urllib.parse.urlsplit(url)
    if u.scheme.lower() not in ("gs", "gcs") or not u.netloc:
        return None
    s = _settings(storage_options)
    retries = s.get("max_retries", "")
    extra = {"timeout": float(s.get("timeout", "60").rstrip("s") or 60),
             "max_retries": int(retries) if retries.isdigit() else 5,
             "client_options": client_options(storage_options)}
    if s.get("anon", "").strip().lower() in ("1", "true", "yes", "on"):
        return GcsConfig(u.netloc, _PUBLIC, **extra)  # type: ignore[arg-type]
    raw = s.get("key")
    if raw is None and s.get("key_path"):
        try:
            with open(s["key_path"], encoding="utf-8") as f:
                raw = f.read()
        except OSError:
            return None
    if raw is None:
        return None
    try:
        key = json.loads(raw)
    except ValueError:
        return None
    if isinstance(key, dict) and key.get("type") == "authorized_user":
        try:
            token = UserToken(str(key["client_id"]), str(key["client_secret"]),
                              str(key["refresh_token"]), str(key.get("token_uri") or _TOKEN_URI))
        except KeyError:
            return None
        return GcsConfig(u.netloc, _PUBLIC, token=token, **extra)  # type: ignore[arg-type]
    if not isinstance(key, dict) or key.get("disable_oauth") is not True:
        return None
    base = str(key.get("gcs_base_url") or _PUBLIC).rstrip("/")
    return GcsConfig(u.netloc, base, **extra)  # type: ignore[arg-type]


def temp_name(key: str) -> str:
    """A fresh name for the tail object beside ``key``, in a ``_`` folder that
    dataset listings skip."""
    folder = key.rsplit("/", 1)[0] + "/" if "/" in key else ""
    return f"{folder}_pqindex_tmp/{uuid.uuid4().hex}.tail"


def _error(resp: Response, url: str, operation: str) -> StorageError:
    message = ""
    try:
        doc = json.loads(resp.body or b"{}")
        err = doc.get("error") if isinstance(doc, dict) else None
        message = str(err.get("message", "")) if isinstance(err, dict) else str(err or "")
    except ValueError:
        message = resp.body[:200].decode("utf-8", "replace").strip()
    detail = f"HTTP {resp.status}" + (f": {message}" if message else "")
    status = resp.status
    if resp.status == 412:
        return ObjectChangedError(
            f"the object changed while it was read (generation mismatch; {detail})",
            path=url, operation=operation)
    if resp.status == 404:
        return ObjectNotFoundError(f"no such object or bucket ({detail})", path=url,
                                   operation=operation)
    if resp.status in (401, 403):
        return StorageAccessError(f"access denied or no valid credentials ({detail})",
                                  path=url, operation=operation)
    if resp.status == 429:
        return ThrottledError(f"throttled by the store after retries ({detail})", path=url,
                              operation=operation, status=status, transient=True)
    return StorageError(detail, path=url, operation=operation, status=status,
                        transient=status in RETRY_STATUS)


class GcsCompose:
    """The JSON API requests on one bucket."""

    def __init__(self, config: GcsConfig) -> None:
        self.config = config
        self.http = Http(config.base_url, timeout=config.timeout,
                         max_retries=config.max_retries, client_options=config.client_options)

    def close(self) -> None:
        self.http.close()

    def url(self, key: str) -> str:
        return f"gs://{self.config.bucket}/{key}"

    def _object_path(self, key: str, upload: bool = False) -> str:
        b = urllib.parse.quote(self.config.bucket, safe="")
        if upload:
            return f"{self.http.base_path}/upload/storage/v1/b/{b}/o"
        return f"{self.http.base_path}/storage/v1/b/{b}/o/{urllib.parse.quote(key, safe='')}"

    def _call(self, method: str, path: str, query: Sequence[tuple[str, str]], key: str,
              operation: str, *, body: bytes = b"", content_type: str | None = None,
              ok: Sequence[int] = (200,), retries: int | None = None) -> Response:
        target = path + ("?" + urllib.parse.urlencode(list(query)) if query else "")
        def headers() -> dict[str, str]:
            h = {"Content-Length": str(len(body))}
            if content_type:
                h["Content-Type"] = content_type
            if self.config.token is not None:
                h["Authorization"] = f"Bearer {self.config.token()}"
            return h

        resp = self.http.send(method, target, url=self.url(key), operation=operation,
                              headers=headers, body=body, retries=retries)
        if resp.status not in ok:
            raise _error(resp, self.url(key), operation)
        return resp

    @staticmethod
    def _json(resp: Response) -> dict[str, Any]:
        doc = json.loads(resp.body or b"{}")
        return doc if isinstance(doc, dict) else {}

    def metadata(self, key: str) -> dict[str, Any]:
        """The object's resource (``generation``, ``etag``, ``size``, ...)."""
        return self._json(self._call("GET", self._object_path(key), [], key,
                                     "GET object metadata"))

    def create(self, key: str, data: bytes) -> int:
        """Upload ``data`` as a new object ``key`` (never over an existing one);
        its generation."""
        r = self._call("POST", self._object_path(key, upload=True),
                       [("uploadType", "media"), ("name", key), ("ifGenerationMatch", "0")],
                       key, "upload the index tail", body=data,
                       content_type="application/octet-stream")
        return int(self._json(r)["generation"])

    def compose(self, key: str, sources: Sequence[tuple[str, int]], *, if_generation: int,
                keep: Mapping[str, Any] | None = None,
                expect_size: int | None = None) -> dict[str, Any]:
        """``key`` := the concatenation of ``sources`` (name, generation), each only
        at that generation, and only if ``key`` is still at ``if_generation``;
        ``keep``: the old resource, whose content type and metadata carry over.
        Transient failures are retried; a 412 to a retry is ours when the object
        now has a new generation and ``expect_size`` bytes (the lost attempt
        succeeded)."""
        dest: dict[str, Any] = {}
        for name in ("contentType", "contentEncoding", "contentDisposition",
                      "contentLanguage", "cacheControl", "metadata"):
            if keep and keep.get(name) is not None:
                dest[name] = keep[name]
        body = {"sourceObjects": [
            {"name": n, "generation": str(g),
             "objectPreconditions": {"ifGenerationMatch": str(g)}} for n, g in sources],
            "destination": dest}
        data = json.dumps(body).encode()

        def send() -> dict[str, Any]:
            r = self._call("POST", self._object_path(key) + "/compose",
                           [("ifGenerationMatch", str(if_generation))], key, "compose",
                           body=data, content_type="application/json", retries=0)
            return self._json(r)

        def ours() -> dict[str, Any] | None:
            now = self.metadata(key)  # a new generation of the size: the lost attempt's
            if expect_size is not None and int(now.get("size", -1)) == expect_size \
                    and str(now.get("generation")) != str(if_generation):
                return now
            return None

        return commit_reconciled(send, attempts=self.config.max_retries + 1,
                                 lost=lambda e: isinstance(e, ObjectChangedError),
                                 reconcile=ours)

    def delete(self, key: str, generation: int | None = None) -> None:
        query = [("ifGenerationMatch", str(generation))] if generation is not None else []
        self._call("DELETE", self._object_path(key), query, key, "delete the index tail",
                   ok=(200, 204, 404))
