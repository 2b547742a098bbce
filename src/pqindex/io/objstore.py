"""Cloud object stores (S3, GCS, Azure, HTTP) through obstore.

One obstore client per (store URL, options), shared by every file of every
dataset of the process. Requests of a wave are issued concurrently on one
background asyncio loop (obstore's async API runs them on its Rust runtime) and
bounded by ``max_in_flight``. Every store exception is translated by
:func:`pqindex.io.errors.translate`.

Storage options are obstore's configuration keys (``endpoint``,
``access_key_id``, ``secret_access_key``, ``region``, ``skip_signature``, ...,
for GCS ``service_account_key`` etc., for Azure ``account_name``,
``account_key`` etc.), with the ``aws_``/``google_``/``azure_`` prefixes
accepted, plus client options (``allow_http``, ``timeout``,
``connect_timeout``, ...), retry options (``max_retries``, ``retry_timeout``
in seconds) and ``max_in_flight``. Without options the standard environment
variables (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_REGION``, ``AWS_ALLOW_HTTP``, ``GOOGLE_SERVICE_ACCOUNT``,
``AZURE_STORAGE_ACCOUNT_NAME``, ...) configure the store; obstore reads them.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import functools
import os
import queue
import threading
import types
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar, TypeVarTuple

from pqindex.errors import CorruptFileError, UserInputError
from pqindex.io.credentials import S3CredentialChoice, s3_credentials
from pqindex.io.errors import ObjectChangedError, StorageConfigError, StorageError, translate
from pqindex.io.source import (
    DEFAULT_MAX_IN_FLIGHT,
    REMOTE_MAX_GAP,
    REMOTE_TAIL_BYTES,
    SPLIT_PART_BYTES,
    IOStats,
    ObjectInfo,
    coalesce,
    in_order,
    quoted_etag,
)

__all__ = ["ObjectStoreSource", "StoreHandle", "TailWave", "get_store", "prefetch_tails", "run",
           "start_tails", "submit"]

T = TypeVar("T")
_Ts = TypeVarTuple("_Ts")

# ------------------------------------------------------------------ event loop
#
# obstore's async calls run as tasks on its Rust runtime (tokio threads). Each task
# ends by taking the GIL from its own thread: it asks the future whether it was
# cancelled, then hands the result to the loop (``call_soon_threadsafe``). A tokio
# thread that takes the GIL while the interpreter finalizes is ended by
# ``pthread_exit``, whose unwinding through Rust frames aborts the process (SIGABRT
# after the CLI printed its answer). So the loop knows which of its futures belong
# to a native task still to come back (:class:`_NativeTasks`), and at exit it
# cancels its tasks, waits until every native task has left Python, and only then
# stops, before the interpreter finalizes.

_PLAIN_CALLBACKS = (types.FunctionType, types.MethodType, types.BuiltinFunctionType,
                    types.BuiltinMethodType, functools.partial)
_EXIT_WAIT_SECONDS = 10.0  # at most this long for native tasks at exit


class _NativeTasks:
    """The loop's futures whose native task has not yet come back from Python."""

    def __init__(self) -> None:
        self._pending: set[asyncio.Future[Any]] = set()
        self._idle = threading.Condition(threading.Lock())

    def started(self, fut: asyncio.Future[Any]) -> None:
        with self._idle:
            self._pending.add(fut)

    def finished(self, fut: asyncio.Future[Any]) -> None:
        with self._idle:
            self._pending.discard(fut)
            if not self._pending:
                self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Until no native task is out (True), or ``timeout`` seconds (False)."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._pending, timeout)

    def __len__(self) -> int:
        with self._idle:
            return len(self._pending)


class _IoFuture(asyncio.Future[Any]):
    """A future of the I/O loop that sees a native task take it and give it back."""

    def add_done_callback(self, fn: Callable[[_IoFuture], object], *,
                          context: contextvars.Context | None = None) -> None:
        loop = self.get_loop()
        if isinstance(loop, _IoLoop) and not isinstance(fn, _PLAIN_CALLBACKS):
            # pyo3's waiter (it cancels the native task if this future is cancelled):
            # a native task will come back to this future from one of its threads.
            loop.native.started(self)
        super().add_done_callback(fn, context=context)

    def cancelled(self) -> bool:
        out = super().cancelled()
        loop = self.get_loop()
        if out and isinstance(loop, _IoLoop) and not loop.on_loop_thread():
            loop.native.finished(self)  # a cancelled native task goes no further
        return out


class _IoLoop(asyncio.SelectorEventLoop):
    """The background loop: its futures are :class:`_IoFuture`, and results handed
    over from other threads count their native task as back."""

    def __init__(self) -> None:
        super().__init__()
        self.native = _NativeTasks()
        self.thread_id: int | None = None

    def on_loop_thread(self) -> bool:
        return threading.get_ident() == self.thread_id

    def create_future(self) -> asyncio.Future[Any]:
        return _IoFuture(loop=self)

    def call_soon_threadsafe(self, callback: Callable[[*_Ts], object],
                             *args: *_Ts, context: contextvars.Context | None = None
                             ) -> asyncio.Handle:
        try:
            return super().call_soon_threadsafe(callback, *args, context=context)
        finally:
            if not self.on_loop_thread():
                for arg in args:
                    if isinstance(arg, _IoFuture):
                        self.native.finished(arg)

    def serve(self) -> None:
        """The loop thread's body."""
        self.thread_id = threading.get_ident()
        asyncio.set_event_loop(self)
        self.run_forever()


_loop: _IoLoop | None = None
_loop_thread: threading.Thread | None = None
_loop_lock = threading.Lock()


def _background_loop() -> _IoLoop:
    global _loop, _loop_thread
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = _IoLoop()
            thread = threading.Thread(target=loop.serve, name="pqindex-io", daemon=True)
            thread.start()
            _loop, _loop_thread = loop, thread
        return _loop


def shutdown(timeout: float = _EXIT_WAIT_SECONDS) -> None:
    """Stop the I/O loop and drop the store clients, in that order: cancel the
    loop's tasks, wait until every native task is back from Python (at most
    ``timeout`` seconds), stop and close the loop, then forget the clients. Runs at
    exit; the next request starts a new loop."""
    global _loop, _loop_thread
    with _loop_lock:
        loop, thread = _loop, _loop_thread
        _loop = _loop_thread = None
    if loop is not None and not loop.is_closed():
        if loop.is_running():
            async def cancel_all() -> None:
                me = asyncio.current_task()
                tasks = [t for t in asyncio.all_tasks() if t is not me]
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(cancel_all(), loop).result(timeout)
            loop.native.wait_idle(timeout)
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(timeout)
        if not loop.is_running():
            loop.close()
    clear_stores()


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's threads: no loop thread, no tokio
    worker serving the parent's clients (whose pooled connections are the parent's
    sockets). It starts its own loop and clients on first use."""
    global _loop, _loop_thread, _loop_lock, _stores_lock
    _loop = _loop_thread = None
    _loop_lock = threading.Lock()
    _stores_lock = threading.Lock()
    _stores.clear()
    _by_fast_key.clear()


atexit.register(shutdown)
os.register_at_fork(after_in_child=_after_fork_in_child)


def run(coro: Awaitable[T]) -> T:
    """Run ``coro`` on the I/O loop and wait for it (callable from any thread)."""
    return submit(coro).result()


def submit(coro: Awaitable[T]) -> concurrent.futures.Future[T]:
    """Start ``coro`` on the I/O loop; its result when the future is done."""

    async def wrap() -> T:
        return await coro

    return asyncio.run_coroutine_threadsafe(wrap(), _background_loop())


# ------------------------------------------------------------------ stores

_CLIENT_KEYS = frozenset({
    "allow_http", "allow_invalid_certificates", "connect_timeout", "default_content_type",
    "default_headers", "pool_idle_timeout", "pool_max_idle_per_host", "proxy_url",
    "proxy_ca_certificate", "proxy_excludes", "randomize_addresses", "read_timeout",
    "timeout", "user_agent", "http1_only", "http2_only",
})
_BOOL_KEYS = frozenset({
    "allow_http", "allow_invalid_certificates", "randomize_addresses", "skip_signature",
    "virtual_hosted_style_request", "unsigned_payload", "disable_tagging", "http1_only",
    "http2_only", "use_emulator", "use_fabric_endpoint", "use_azure_cli",
})
# deltalake's (delta-rs's) own commit settings, which its users pass among the store's:
# the same storage_options serve deltalake and pqindex, so pqindex leaves them out.
_TABLE_COMMIT_KEYS = frozenset({
    "aws_s3_allow_unsafe_rename", "aws_s3_locking_provider", "delta_dynamo_table_name",
})
_TABLE_COMMIT_PREFIXES = ("dynamodb_", "dynamo_lock_")
_ALIASES = {
    "endpoint_url": "endpoint",
    "key": "access_key_id",
    "secret": "secret_access_key",
    "token": "session_token",
    "anon": "skip_signature",
    "region_name": "region",
}


@dataclass(frozen=True)
class StoreHandle:
    """A configured obstore client and what pqindex adds to it."""

    store: Any
    url: str  # the store's root, e.g. s3://bucket
    max_in_flight: int
    # Azure Blob Storage has no suffix ranges: a tail needs the size (listing or HEAD).
    suffix_ranges: bool = True
    # obstore's client options as given (proxy, TLS, timeouts): requests pqindex
    # sends itself (io.restcall) honour them too.
    client_options: Mapping[str, Any] = field(default_factory=dict)
    # S3: what signs requests, for obstore and for pqindex's own (io.credentials).
    s3_credentials: S3CredentialChoice | None = None


_stores: dict[tuple[str, str], StoreHandle] = {}
# The same clients by the options as given (get_store's fast path).
_by_fast_key: dict[tuple[Any, ...], StoreHandle] = {}
_stores_lock = threading.Lock()


def _as_bool(key: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise UserInputError(f"storage option {key}={v!r} is not a boolean")


def _seconds(key: str, v: Any) -> timedelta:
    try:
        return timedelta(seconds=float(str(v).rstrip("s")))
    except ValueError:
        raise UserInputError(f"storage option {key}={v!r} is not a number of seconds") from None


def split_url(url: str) -> tuple[str, str]:
    """(store root URL, object key) of an object-store URL."""
    scheme, sep, rest = url.partition("://")
    if (sep and scheme.isalnum() and scheme.islower() and url.isprintable()
            and not any(c in rest for c in "?#@[]:")):
        # The usual scheme://bucket/key, as urlsplit gives it (a dataset opens thousands).
        netloc, _, path = rest.partition("/")
        if netloc:
            return f"{scheme}://{netloc}", urllib.parse.unquote(path.lstrip("/"))
    u = urllib.parse.urlsplit(url)
    scheme = u.scheme.lower()
    if not u.netloc:
        raise UserInputError("URL names no bucket or host", path=url)
    key = urllib.parse.unquote(u.path.lstrip("/"))
    if scheme in ("az", "azure", "adl") and "@" not in u.netloc and "." not in u.netloc:
        # az://container/key: the account comes from the options or environment.
        return f"{scheme}://{u.netloc}", key
    return f"{scheme}://{u.netloc}", key


def _configure(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any],
                                                     dict[str, Any], int]:
    config: dict[str, Any] = {}
    client: dict[str, Any] = {}
    retry: dict[str, Any] = {}
    in_flight = DEFAULT_MAX_IN_FLIGHT
    for raw, value in options.items():
        key = str(raw).lower()
        key = _ALIASES.get(key, key)
        bare = key
        for prefix in ("aws_", "google_", "azure_"):
            if key.startswith(prefix) and key[len(prefix):] in _CLIENT_KEYS:
                bare = key[len(prefix):]
        if key in _TABLE_COMMIT_KEYS or key.startswith(_TABLE_COMMIT_PREFIXES):
            continue
        if bare == "max_in_flight":
            in_flight = int(value)
            if in_flight < 1:
                raise UserInputError(f"storage option max_in_flight={value!r} must be >= 1")
        elif bare == "max_retries":
            retry["max_retries"] = int(value)
        elif bare == "retry_timeout":
            retry["retry_timeout"] = _seconds(bare, value)
        elif bare in ("init_backoff", "max_backoff"):
            retry.setdefault("backoff", {})[bare] = _seconds(bare, value)
        elif bare in _CLIENT_KEYS:
            if bare in _BOOL_KEYS:
                value = _as_bool(bare, value)
            elif bare.endswith("timeout") and not isinstance(value, timedelta):
                value = _seconds(bare, value)  # plain numbers are seconds
            client[bare] = value
        else:
            config[key] = _as_bool(key, value) if bare in _BOOL_KEYS else value
    return config, client, retry, in_flight


def _fast_key(root: str, options: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    """A cheap key for the options as given (a dataset opens thousands of objects with
    the same mapping), typed so that 1 and True differ; None when a value is unhashable."""
    if not options:
        return (root,)
    key = (root, *((k, type(v), v) for k, v in options.items()))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def get_store(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[StoreHandle,
                                                                                   str]:
    """The shared client for ``url``'s store and the object key inside it."""
    root, key = split_url(url)
    fast = _fast_key(root, storage_options)
    if fast is not None:
        handle = _by_fast_key.get(fast)
        if handle is not None:
            return handle, key
    opts = dict(storage_options or {})
    cache_key = (root, repr(sorted((str(k), repr(v)) for k, v in opts.items())))
    with _stores_lock:
        handle = _stores.get(cache_key)
    if handle is not None:
        if fast is not None:
            with _stores_lock:
                _by_fast_key[fast] = handle
        return handle, key
    from pqindex.io.native import from_url, obstore_api

    config, client, retry, in_flight = _configure(opts)
    if root.startswith("http://"):
        client.setdefault("allow_http", True)  # the URL itself asks for plain HTTP
    choice = s3_credentials(opts) if root.split("://", 1)[0] in ("s3", "s3a") else None
    extra: dict[str, Any] = {}
    if choice is not None and choice.obstore_provider is not None:
        extra["credential_provider"] = choice.obstore_provider  # one provider for both
    try:
        store = from_url(
            root,
            config=config or None,
            client_options=client or None,
            retry_config=retry or None,
            **extra,
        )
    except Exception as e:
        err = translate(e, url, "configure the store")
        if type(err) is StorageError:
            raise StorageConfigError(err.detail, path=url, operation="configure the store") \
                from None
        raise err from None
    handle = StoreHandle(store, root, in_flight,
                         suffix_ranges=not isinstance(store, obstore_api()._store.AzureStore),
                         client_options=client, s3_credentials=choice)
    with _stores_lock:
        handle = _stores.setdefault(cache_key, handle)
        if fast is not None:
            _by_fast_key[fast] = handle
        return handle, key


def clear_stores() -> None:
    """Forget every cached client (tests that change the environment)."""
    with _stores_lock:
        _stores.clear()
        _by_fast_key.clear()


# ------------------------------------------------------------------ source


def _split(offset: int, length: int) -> list[tuple[int, int]]:
    """A large range as parallel parts of at least SPLIT_PART_BYTES."""
    parts = length // SPLIT_PART_BYTES
    if parts < 2:
        return [(offset, length)]
    step = -(-length // parts)
    return [(o, min(step, offset + length - o)) for o in range(offset, offset + length, step)]


class ObjectStoreSource:
    """One object of a cloud store or HTTP server, read with range GETs.

    Opening makes no request. ``tail`` is a suffix-range GET (no HEAD); after the
    first response ``size``, ``etag`` and ``version`` are known, and every later
    GET is conditional on them (``If-Match``, the version id) and checked against
    the response, so a changed object raises :class:`ObjectChangedError`.
    A HEAD (only when ``size()`` is asked before any read) shows as ``(0, 0)`` in
    the trace.
    """

    default_tail_bytes = REMOTE_TAIL_BYTES
    max_gap = REMOTE_MAX_GAP
    max_merged: int | None = SPLIT_PART_BYTES

    def __init__(
        self,
        url: str,
        stats: IOStats | None = None,
        storage_options: Mapping[str, Any] | None = None,
        info: ObjectInfo | None = None,
    ) -> None:
        self.path = url
        self.stats = stats if stats is not None else IOStats()
        self._options = storage_options
        self._client, self._key = get_store(url, storage_options)
        self._client_pid = os.getpid()
        if not self._key:
            raise UserInputError("URL names a bucket, not an object", path=url)
        self.max_in_flight = self._handle.max_in_flight
        self._size: int | None = None
        self.etag: str | None = None
        self.version: str | None = None
        self._mtime: int | None = None
        if info is not None:
            self._size = info.size
            self.etag = quoted_etag(info.etag)
            self.version = info.version
            self._mtime = info.mtime
        self._lock = threading.Lock()

    @property
    def _handle(self) -> StoreHandle:
        """The store's client; in a forked child, the child's own (the parent's
        belongs to a runtime that did not survive the fork)."""
        if self._client_pid != os.getpid():
            self._client, _ = get_store(self.path, self._options)
            self._client_pid = os.getpid()
        return self._client

    # ------------------------------------------------------------ metadata

    def _learn(self, meta: Mapping[str, Any], operation: str) -> None:
        """Take size/ETag/version from a response; a different ETag means a new object."""
        etag = quoted_etag(meta.get("e_tag"))
        version = meta.get("version")
        with self._lock:
            if (self.etag and etag and etag != self.etag) or (
                self.version and version and version != self.version
            ):
                raise ObjectChangedError(
                    f"the object changed while it was read (ETag {self.etag} became {etag})",
                    path=self.path,
                    operation=operation,
                )
            size = meta.get("size")
            if size is not None:
                if self._size is not None and etag is None and size != self._size:
                    raise ObjectChangedError(
                        f"the object changed while it was read (size {self._size} became "
                        f"{size})",
                        path=self.path,
                        operation=operation,
                    )
                self._size = int(size)
            self.etag = self.etag or etag
            self.version = self.version or version
            lm = meta.get("last_modified")
            if lm is not None and self._mtime is None:
                self._mtime = int(lm.timestamp() * 1_000_000_000)

    def size(self) -> int:
        if self._size is None:
            from pqindex.io.native import obstore_api

            obs = obstore_api()

            async def head() -> Any:
                # obstore's coroutines must be created on the running loop
                return await obs.head_async(self._handle.store, self._key)

            try:
                meta = run(head())
            except Exception as e:
                raise translate(e, self.path, "HEAD") from None
            self.stats.record(0, 0)
            self.stats.record_wave()
            self._learn(meta, "HEAD")
        assert self._size is not None
        return self._size

    def cache_key(self) -> tuple[str, int, str] | None:
        version = self.etag or self.version or (
            None if self._mtime is None else str(self._mtime))
        if self._size is None or version is None:
            return None
        return (self.path, self._size, version)

    # ------------------------------------------------------------ reads

    def _conditions(self) -> dict[str, Any]:
        opts: dict[str, Any] = {}
        if self.etag:
            opts["if_match"] = self.etag
        if self.version:
            opts["version"] = self.version
        return opts

    def _tail_range(self, length: int) -> dict[str, Any]:
        """The range option of a tail GET: a suffix, or where the store has none
        (Azure) the last ``length`` bytes of the known size (a HEAD first if unknown)."""
        if self._handle.suffix_ranges:
            return {"suffix": length}
        size = self.size()
        return {"offset": max(0, size - length)}

    async def _get(self, options: dict[str, Any], operation: str) -> tuple[bytes, int, int]:
        data, start, end = await self._get_view(options, operation)
        return bytes(data), start, end

    async def _get_view(self, options: dict[str, Any], operation: str
                        ) -> tuple[memoryview, int, int]:
        """A GET's body as a view of obstore's buffer, with no copy into ``bytes``
        (a wave of 1,000 tails copied 165 MiB into fresh memory: ~10% of its CPU)."""
        from pqindex.io.native import obstore_api

        obs = obstore_api()

        res = await obs.get_async(self._handle.store, self._key, options=options)
        data = await res.bytes_async()
        self._learn(res.meta, operation)
        start, end = res.range
        return memoryview(data), start, end

    def tail(self, length: int) -> bytes:
        if length <= 0:
            return b""
        if self._size == 0 or (not self._handle.suffix_ranges and self.size() == 0):
            return b""
        options = {"range": self._tail_range(length), **self._conditions()}
        try:
            data, start, end = run(self._get(options, "GET (tail)"))
        except Exception as e:
            err = translate(e, self.path, "GET (tail)")
            # An empty object has no suffix to give: the store refuses the range (416,
            # or a whole answer), an error of no specific class. A HEAD tells.
            if type(err) is StorageError and self._size is None and self.size() == 0:
                return b""
            raise err from None
        self.stats.record(start, end - start)
        self.stats.record_wave()
        return data

    def read(self, offset: int, length: int) -> bytes:
        return self.read_ranges([(offset, length)])[0]

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return in_order(len(ranges), self.iter_ranges(ranges))

    def iter_ranges(self, ranges: Sequence[tuple[int, int]], *, views: bool = False
                    ) -> Iterator[tuple[int, bytes | memoryview]]:
        """``(index, bytes)`` of each range as it lands, in landing order: one wave, as
        ``read_ranges`` (a caller decodes the first ranges while the rest transfer).
        The requests go out on the first ``next``. ``views``: a range of one request
        comes as a ``memoryview`` of obstore's buffer, not copied into ``bytes``."""
        if not ranges:
            return
        for o, n in ranges:
            if o < 0 or n < 0 or (self._size is not None and o + n > self._size):
                raise CorruptFileError(
                    f"read of {n} bytes at offset {o} is outside the file "
                    f"({self._size} bytes)",
                    path=self.path,
                    offset=o,
                )
        parts = [_split(o, n) for o, n in ranges]
        flat = [(i, p) for i, ps in enumerate(parts) for p in ps if p[1] > 0]
        cond = self._conditions()
        limit = self.max_in_flight
        # What lands, from the I/O loop: (index into flat, bytes) or the exception.
        landed: queue.SimpleQueue[tuple[int, memoryview] | Exception] = queue.SimpleQueue()

        async def wave() -> None:
            sem = asyncio.Semaphore(limit)

            async def one(k: int, o: int, n: int) -> None:
                try:
                    async with sem:
                        data, start, end = await self._get_view({"range": (o, o + n), **cond},
                                                                "GET")
                    self.stats.record(start, end - start)
                    landed.put((k, data))
                except Exception as e:
                    landed.put(e)

            await asyncio.gather(*(one(k, o, n) for k, (_, (o, n)) in enumerate(flat)))

        self.stats.record_wave()
        future = submit(wave()) if flat else None
        try:
            pieces: dict[int, list[memoryview | None]] = {}
            for i, ps in enumerate(parts):
                if all(n == 0 for _, n in ps):
                    yield i, self._whole(ranges[i], [b""])
            for _ in flat:
                got = landed.get()
                if isinstance(got, Exception):
                    raise translate(got, self.path, "GET") from None
                k, data = got
                i = flat[k][0]
                if len(parts[i]) == 1:
                    yield i, self._whole(ranges[i], [data if views else bytes(data)])
                    continue
                have = pieces.setdefault(i, [None] * len(parts[i]))
                have[parts[i].index(flat[k][1])] = data
                if all(p is not None for p in have):
                    del pieces[i]
                    yield i, self._whole(ranges[i], have)
        finally:
            if future is not None and not future.done():
                future.cancel()  # abandoned (an error): the rest need not land

    def _whole(self, rng: tuple[int, int], pieces: Sequence[bytes | memoryview | None]
               ) -> bytes | memoryview:
        """A range's bytes from its parts (one part as it is), checked for length."""
        data = pieces[0] if len(pieces) == 1 else b"".join(p or b"" for p in pieces)
        o, n = rng
        if data is None or len(data) != n:
            raise CorruptFileError(
                f"short read: wanted {n} bytes, got {0 if data is None else len(data)} "
                "(object changed?)",
                path=self.path,
                offset=o,
            )
        return data

    def coalesce(self, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        # Merged pieces stay within one split part: parts of a wave transfer in parallel.
        return coalesce(ranges, self.max_gap, self.max_merged)

    def close(self) -> None:
        pass

    def __enter__(self) -> ObjectStoreSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TailWave:
    """The tails of many files in flight together: one wave, awaited file by file.

    ``wait(url)`` returns as soon as that file's tail is in the metadata cache (or
    its request failed: the open then reads the tail itself and reports the error),
    so a planner can work on the files that landed while the rest are in flight.
    ``join()`` waits for all and returns how many tails were fetched.
    """

    def __init__(self, urls: Sequence[str]) -> None:
        # Per file a lock held until its tail lands (lighter than an Event: a wave has
        # thousands); a waiter takes it and hands it on at once.
        self._landed = {u: threading.Lock() for u in urls}
        for lock in self._landed.values():
            lock.acquire()
        self._released: set[str] = set()
        self._hooks: dict[str, list[Callable[[], None]]] = {}
        self._hooks_lock = threading.Lock()
        self._future: concurrent.futures.Future[int] | None = None

    def __contains__(self, url: object) -> bool:
        return url in self._landed

    def __len__(self) -> int:
        return len(self._landed)

    def landed(self, url: str) -> None:
        """``url``'s tail is in (called once per request, on the I/O loop)."""
        with self._hooks_lock:
            if url in self._released:  # a URL listed twice is released once
                return
            self._released.add(url)
            hooks = self._hooks.pop(url, [])
        self._landed[url].release()
        for fn in hooks:
            fn()

    def when_landed(self, url: str, fn: Callable[[], None]) -> None:
        """Call ``fn`` once ``url``'s tail landed: at once (here) if it has or the file
        is not in this wave, else on the I/O loop. ``fn`` must not block or raise."""
        with self._hooks_lock:
            if url in self._landed and url not in self._released:
                self._hooks.setdefault(url, []).append(fn)
                return
        fn()

    def wait(self, url: str) -> None:
        """Until ``url``'s tail landed (at once for a file not in this wave)."""
        lock = self._landed.get(url)
        if lock is not None:
            with lock:
                pass

    def join(self) -> int:
        assert self._future is not None
        return self._future.result()

    def done(self) -> bool:
        """Whether every tail landed."""
        return self._future is not None and self._future.done()

    def add_done_callback(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` once every tail landed (at once if they all have)."""
        assert self._future is not None
        self._future.add_done_callback(lambda _: fn())


def start_tails(
    files: Sequence[tuple[str, ObjectInfo | None, IOStats | None]],
    storage_options: Mapping[str, Any] | None = None,
    tail_bytes: int | None = None,
) -> TailWave | None:
    """Start reading the tails of many object-store files in one wave, into the
    metadata cache; returns at once (None when there is nothing to read).

    ``files`` are (URL, listing info, the file's IOStats). Only files whose listing
    gave size and ETag/mtime take part (their cache key is known before the
    request) and whose tail is not cached yet; opening them afterwards costs no
    request. Each file's stats count its tail as one request and one round trip
    (they all share the same wave; the round trip is counted when it starts, so
    counts taken during the wave already hold it). Failures are left for the open
    to report.
    """
    from pqindex.io.cache import metadata_cache
    from pqindex.io.source import is_object_store_url

    cache = metadata_cache()
    todo: list[ObjectStoreSource] = []
    for url, info, stats in files:
        if info is None or not is_object_store_url(url):
            continue
        src = ObjectStoreSource(url, stats, storage_options, info)
        key = src.cache_key()
        if key is not None and cache.get(key) is None:
            todo.append(src)
    if not todo:
        return None
    limit = todo[0].max_in_flight
    # Sizes are known (listing): no HEAD inside the wave.
    options = [{"range": s._tail_range(tail_bytes or s.default_tail_bytes), **s._conditions()}
               for s in todo]
    tails = TailWave([s.path for s in todo])
    for src in todo:
        src.stats.record_wave()

    async def wave() -> int:
        jobs = iter(zip(todo, options, strict=True))

        async def one(src: ObjectStoreSource, options: dict[str, Any]) -> int:
            try:
                data, start, end = await src._get_view(options, "GET (tail)")
            except Exception:
                return 0
            else:
                src.stats.record(start, end - start)
                cache.put(src.cache_key(), [(start, data)])
                return 1
            finally:
                tails.landed(src.path)  # a planner thread may take this file now

        async def worker() -> int:
            # ``limit`` workers taking the files in order: the requests go out as a
            # semaphore would let them, without a task per file.
            n = 0
            for src, opts in jobs:
                n += await one(src, opts)
            return n

        got = await asyncio.gather(*(worker() for _ in range(min(limit, len(todo)))))
        return sum(got)

    tails._future = submit(wave())
    return tails


def prefetch_tails(
    files: Sequence[tuple[str, ObjectInfo | None, IOStats | None]],
    storage_options: Mapping[str, Any] | None = None,
    tail_bytes: int | None = None,
) -> int:
    """Read the tails of many object-store files in one wave, into the metadata cache
    (:func:`start_tails`, waited for). Returns how many tails were fetched."""
    tails = start_tails(files, storage_options, tail_bytes)
    return 0 if tails is None else tails.join()
