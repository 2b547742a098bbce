"""A small HTTP(S) client for the store requests obstore cannot make.

The server-side copy paths of ``add_indexes`` (``io.azblocks``: Azure block
lists; ``io.gcscompose``: GCS compose; ``io.s3multipart``: S3 part copies) each send a handful of requests obstore
0.12 has no API for. This is their transport: keep-alive connections to one
host reused across threads, retries of dropped connections, 5xx and 429 with
exponential backoff, and the answer returned whole (status, lower-case
headers, body). Signing and error mapping stay with the caller, which knows
the store.
"""

from __future__ import annotations

import base64
import http.client
import os
import random
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pqindex.io.errors import StorageError, StorageTimeoutError

__all__ = ["RETRY_STATUS", "Http", "Response", "backoff", "client_options", "commit_reconciled",
           "connection_error", "store_settings"]

T = TypeVar("T")

RETRY_STATUS = frozenset({500, 502, 503, 504, 429})


@dataclass
class Response:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes


class Http:
    """Requests to one ``scheme://host[:port]`` (thread-safe).

    ``client_options`` are the store's obstore client options, honoured as obstore
    honours them: ``proxy_url`` (else the ``HTTP(S)_PROXY`` / ``NO_PROXY``
    variables, as obstore's HTTP client reads them) with ``proxy_excludes``,
    ``allow_invalid_certificates``, and ``connect_timeout`` / ``timeout``.
    An ``https://`` target is reached through the proxy by a CONNECT tunnel, an
    ``http://`` one by requests in absolute form."""

    def __init__(self, base_url: str, *, timeout: float = 60.0, max_retries: int = 5,
                 client_options: Mapping[str, Any] | None = None) -> None:
        u = urllib.parse.urlsplit(base_url)
        self.scheme = (u.scheme or "https").lower()
        self.host = u.netloc
        self.base_path = u.path.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        opts = dict(client_options or {})
        self._tls = ssl.create_default_context()
        if _truthy(opts.get("allow_invalid_certificates")):
            self._tls.check_hostname = False
            self._tls.verify_mode = ssl.CERT_NONE
        self.proxy = _proxy_for(self.scheme, u.hostname or "", opts)
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []

    def _connection(self) -> http.client.HTTPConnection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        proxy = self.proxy
        if proxy is None:
            if self.scheme == "https":
                return http.client.HTTPSConnection(self.host, timeout=self.timeout,
                                                   context=self._tls)
            return http.client.HTTPConnection(self.host, timeout=self.timeout)
        p = urllib.parse.urlsplit(proxy)
        auth = _proxy_authorization(p)
        if self.scheme == "https":
            conn = http.client.HTTPSConnection(p.hostname or "", p.port or 80,
                                               timeout=self.timeout, context=self._tls)
            conn.set_tunnel(self.host, headers=auth)
            return conn
        return http.client.HTTPConnection(p.hostname or "", p.port or 80, timeout=self.timeout)

    def _target(self, target: str) -> str:
        """The request target: absolute through a plain-HTTP proxy."""
        if self.proxy is not None and self.scheme == "http":
            return f"http://{self.host}{target}"
        return target

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def once(self, method: str, target: str, headers: Mapping[str, str],
             body: bytes) -> Response:
        """One attempt on a pooled keep-alive connection; connection errors raise."""
        conn = self._connection()
        sent = dict(headers)
        if self.proxy is not None and self.scheme == "http":
            sent.update(_proxy_authorization(urllib.parse.urlsplit(self.proxy)))
        try:
            conn.request(method, self._target(target), body=body, headers=sent)
            resp = conn.getresponse()
            data = resp.read()
        except BaseException:
            conn.close()
            raise
        if resp.will_close:
            conn.close()
        else:
            with self._lock:
                self._idle.append(conn)
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)

    def send(self, method: str, target: str, *, url: str, operation: str,
             headers: Callable[[], Mapping[str, str]] | Mapping[str, str] | None = None,
             body: bytes = b"", retries: int | None = None) -> Response:
        """Send ``method target`` (a path with its query), retrying transient failures.

        ``headers`` may be a function, called for each attempt (a fresh signature
        and date). The last answer is returned whatever its status; only a
        connection that never answered raises (a StorageError naming ``url``)."""
        attempts = (self.max_retries if retries is None else retries) + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            h = headers() if callable(headers) else (headers or {})
            try:
                resp = self.once(method, target, h, body)
            except (OSError, http.client.HTTPException) as e:
                if last:
                    raise connection_error(e, self.timeout, url, operation) from None
                backoff(attempt)
                continue
            if resp.status in RETRY_STATUS and not last:
                backoff(attempt)
                continue
            return resp
        raise AssertionError("unreachable")


def _truthy(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("1", "true", "yes", "on")


def _proxy_for(scheme: str, host: str, options: Mapping[str, Any]) -> str | None:
    """The proxy URL requests to ``host`` go through, or None."""
    proxy = options.get("proxy_url")
    excludes = options.get("proxy_excludes")
    if proxy is None:
        env = urllib.request.getproxies_environment()
        proxy = env.get(scheme) or env.get("all")
        if proxy is None or urllib.request.proxy_bypass_environment(  # type: ignore[attr-defined]
                host, env):
            return None
    if excludes and any(host == x or host.endswith("." + x.lstrip("."))
                        for x in (e.strip() for e in str(excludes).split(",")) if x):
        return None
    return str(proxy) if "://" in str(proxy) else f"http://{proxy}"


def _proxy_authorization(proxy: urllib.parse.SplitResult) -> dict[str, str]:
    """``Proxy-Authorization`` for a proxy URL with user and password, else nothing."""
    if proxy.username is None:
        return {}
    user = urllib.parse.unquote(proxy.username)
    password = urllib.parse.unquote(proxy.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Proxy-Authorization": f"Basic {token}"}


def connection_error(e: BaseException, timeout: float, url: str,
                     operation: str) -> StorageError:
    """What a request that never got an answer (after its last retry) raises."""
    if isinstance(e, TimeoutError):
        return StorageTimeoutError(f"timed out after {timeout:g} s", path=url,
                                   operation=operation, transient=True)
    return StorageError(f"cannot connect to the store ({type(e).__name__}: {e})", path=url,
                        operation=operation, transient=True)


def commit_reconciled(send: Callable[[], T], *, attempts: int,
                      lost: Callable[[StorageError], bool],
                      reconcile: Callable[[], T | None]) -> T:
    """A commit (S3 completion, GCS compose, Azure block list), one attempt per
    ``send``, transient failures sent again with backoff. When a later attempt fails
    as a lost earlier success would make it fail (``lost``: a 412, NoSuchUpload),
    ``reconcile`` looks at the object: its answer when the commit is there (the
    earlier attempt succeeded and its answer was lost), None when it is not (the
    error stands)."""
    for attempt in range(attempts):
        try:
            return send()
        except StorageError as e:
            if attempt > 0 and lost(e):
                done = reconcile()
                if done is not None:
                    return done
                raise
            if not e.transient or attempt == attempts - 1:
                raise
            backoff(attempt)
    raise AssertionError("unreachable")


def backoff(attempt: int) -> None:
    time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))


def client_options(storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The obstore client options (proxy, TLS, timeouts) among ``storage_options``."""
    from pqindex.io.objstore import _configure

    return _configure(dict(storage_options or {}))[1]


def store_settings(env_prefix: str, storage_options: Mapping[str, Any] | None,
                   key: Callable[[str], str | None]) -> dict[str, str]:
    """``env_prefix*`` environment variables, overridden by the storage options, under
    the names ``key`` gives their lower-cased names (None: not a setting)."""
    out: dict[str, str] = {}
    pairs = [(n, v) for n, v in os.environ.items() if n.upper().startswith(env_prefix)]
    for raw, value in [*pairs, *((str(k), v) for k, v in (storage_options or {}).items())]:
        k = key(raw.lower())
        if k is not None:
            out[k] = str(value)
    return out
