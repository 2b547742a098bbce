"""A real S3 endpoint for tests and benchmarks: moto's server behind a delaying proxy.

``S3Endpoint`` starts moto's threaded server on 127.0.0.1 (a free port) and an
asyncio HTTP proxy in front of it. The proxy waits ``delay`` seconds before it
forwards each request (the first-byte latency of a real object store) and logs
every request (method, path, Range header, body length, headers; on its own clock,
when the request arrived and when its delay ended), so tests assert request counts,
uploaded bytes, round trips and the delay as the proxy applied it, not durations
they time themselves; an ``answer`` hook can reply as a real store would where moto
does not (a 412, a 501). ``bench/objstore.py`` and ``bench/lake_write.py`` import this module too.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

__all__ = ["LoggedRequest", "S3Endpoint", "s3"]

REGION = "us-east-1"
ACCESS_KEY = "testing"
SECRET_KEY = "testing"


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    """One request the proxy forwarded."""

    method: str
    path: str  # URL path, e.g. /bucket/key
    query: str
    range: str | None  # the Range header, if any
    length: int = 0  # request body bytes (uploads)
    headers: tuple[tuple[str, str], ...] = ()  # as sent, names as the client spelled them
    # The proxy's clock (time.monotonic, its event loop's) when the request arrived and
    # when its delay ended and it was forwarded or answered (None: not yet). Left out
    # of comparisons: a log compares by what was asked.
    received: float = field(default=0.0, compare=False)
    released: float | None = field(default=None, compare=False)

    def header(self, name: str) -> str | None:
        """A request header's value (name case-insensitive), None if absent."""
        return _get(list(self.headers), name.lower())

    def held(self) -> float | None:
        """Seconds the proxy held the request before forwarding or answering it."""
        return None if self.released is None else self.released - self.received


@dataclass
class _Log:
    requests: list[LoggedRequest] = field(default_factory=list)
    body_bytes: int = 0  # response bodies sent to clients
    waves: int = 0  # requests that arrived while none was in flight
    lock: threading.Lock = field(default_factory=threading.Lock)


async def _read_head(reader: asyncio.StreamReader) -> bytes | None:
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


def _headers(head: bytes) -> tuple[str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    out = []
    for line in lines[1:]:
        if ":" in line:
            k, _, v = line.partition(":")
            out.append((k.strip(), v.strip()))
    return lines[0], out


def _get(headers: list[tuple[str, str]], name: str) -> str | None:
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


class _Proxy:
    """HTTP/1.1 keep-alive towards clients; one upstream connection per request."""

    def __init__(self, upstream: tuple[str, int], log: _Log) -> None:
        self.upstream = upstream
        self.log = log
        self.delay = 0.0
        self.fail_next = 0  # answer this many next requests with 503 SlowDown
        # Requests (method, path, query) this answers with 400 instead of forwarding.
        self.reject: Callable[[str, str, str], bool] | None = None
        # Called with each request before it is forwarded (in the proxy's thread);
        # (status, S3 error code) answers it with that error instead.
        self.answer: Callable[[LoggedRequest], tuple[int, str] | None] | None = None
        self.in_flight = 0
        self.max_in_flight = 0
        self.loop = asyncio.new_event_loop()
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self.clients: set[asyncio.StreamWriter] = set()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait()

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
            self.port = self.server.sockets[0].getsockname()[1]

        self.loop.run_until_complete(start())
        ready.set()
        self.loop.run_forever()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.clients.add(writer)
        try:
            while True:
                head = await _read_head(reader)
                if head is None:
                    break
                line, headers = _headers(head)
                method, target, _ = [*line.split(" ", 2), "", ""][:3]
                n = int(_get(headers, "content-length") or 0)
                body = await reader.readexactly(n) if n else b""
                url = urllib.parse.urlsplit(target)
                logged = LoggedRequest(method, url.path, url.query, _get(headers, "range"), n,
                                       tuple(headers), received=time.monotonic())
                with self.log.lock:
                    at = len(self.log.requests)
                    self.log.requests.append(logged)
                if self.in_flight == 0:
                    with self.log.lock:
                        self.log.waves += 1
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                try:
                    if self.delay:
                        await asyncio.sleep(self.delay)
                    self._released(at, logged)
                    if self.fail_next > 0:
                        self.fail_next -= 1
                        response = _SLOW_DOWN
                    elif self.reject is not None and self.reject(method, url.path, url.query):
                        response = _REJECTED
                    elif self.answer is not None and (error := self.answer(logged)):
                        response = _error_response(*error)
                    else:
                        try:
                            response = await self._forward(method, head, headers, body)
                        except (OSError, AssertionError, asyncio.IncompleteReadError):
                            response = _BAD_GATEWAY  # moto dropped it: a retryable 502
                finally:
                    self.in_flight -= 1
                with self.log.lock:
                    self.log.body_bytes += len(response) - response.index(b"\r\n\r\n") - 4
                writer.write(response)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.clients.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    def _released(self, at: int, logged: LoggedRequest) -> None:
        """Log when ``logged``'s delay ended (unless the log was reset meanwhile)."""
        with self.log.lock:
            if at < len(self.log.requests) and self.log.requests[at] is logged:
                self.log.requests[at] = dataclasses.replace(logged, released=time.monotonic())

    async def _forward(
        self, method: str, head: bytes, headers: list[tuple[str, str]], body: bytes
    ) -> bytes:
        line = head.split(b"\r\n", 1)[0]
        kept = [(k, v) for k, v in headers if k.lower() not in ("connection", "keep-alive")]
        req = line + b"\r\n" + b"".join(f"{k}: {v}\r\n".encode("latin-1") for k, v in kept)
        req += b"Connection: close\r\n\r\n" + body
        ur, uw = await asyncio.open_connection(*self.upstream)
        uw.write(req)
        await uw.drain()
        rhead = await _read_head(ur)
        assert rhead is not None, "moto closed the connection"
        status, rheaders = _headers(rhead)
        rest = await ur.read()  # upstream closes after the response
        uw.close()
        if (_get(rheaders, "transfer-encoding") or "").lower() == "chunked":
            rest = _dechunk(rest)
        out = [(k, v) for k, v in rheaders
               if k.lower() not in ("connection", "transfer-encoding", "keep-alive")]
        if method != "HEAD":
            out = [(k, v) for k, v in out if k.lower() != "content-length"]
            out.append(("Content-Length", str(len(rest))))
        else:
            rest = b""
        return (status + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in out)
                + "\r\n").encode("latin-1") + rest

    def stop(self) -> None:
        async def close() -> None:
            if self.server is not None:
                self.server.close()
            for _ in range(40):  # a request still sleeping through its delay
                if not self.in_flight:
                    break
                await asyncio.sleep(0.05)
            for w in list(self.clients):
                w.close()
            await asyncio.sleep(0.05)  # let the handlers see EOF and finish

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


_SLOW_DOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
_SLOW_DOWN = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n"
    + f"Content-Length: {len(_SLOW_DOWN_BODY)}\r\n\r\n".encode()
    + _SLOW_DOWN_BODY
)


_BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n"

_REJECTED_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidRequest</Code>'
    b"<Message>rejected by the test proxy</Message></Error>"
)
_REJECTED = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/xml\r\n"
    + f"Content-Length: {len(_REJECTED_BODY)}\r\n\r\n".encode()
    + _REJECTED_BODY
)


def _error_response(status: int, code: str) -> bytes:
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>answered by the test proxy</Message></Error>").encode()
    return (f"HTTP/1.1 {status} {code}\r\nContent-Type: application/xml\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    pos = 0
    while True:
        eol = data.index(b"\r\n", pos)
        n = int(data[pos:eol].split(b";")[0], 16)
        if n == 0:
            return bytes(out)
        out += data[eol + 2 : eol + 2 + n]
        pos = eol + 2 + n + 2


class _MotoProcess:
    """moto's server in a process of its own: a benchmark's Python reader then does
    not share the GIL with the server (a real store is never in the client's process)."""

    def __init__(self) -> None:
        import socket
        import subprocess
        import sys

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("moto's server did not start") from None
                time.sleep(0.1)

    def get_host_and_port(self) -> tuple[str, int]:
        return "127.0.0.1", self.port

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(10)


def _reset(proxy: _Proxy, log: _Log) -> None:
    deadline = time.monotonic() + 5
    while proxy.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    with log.lock:
        log.requests.clear()
        log.body_bytes = 0
        log.waves = 0
    proxy.max_in_flight = 0


def _proxy_main(conn: Any, upstream: tuple[str, int]) -> None:
    """A proxy process's loop: the proxy's thread serves; this one answers the
    parent's commands (delay, reset, log, stop) over ``conn``."""
    log = _Log()
    proxy = _Proxy(upstream, log)
    conn.send(proxy.port)
    while True:
        try:
            cmd, arg = conn.recv()
        except EOFError:
            break
        if cmd == "delay":
            proxy.delay = arg
            conn.send(None)
        elif cmd == "reset":
            _reset(proxy, log)
            conn.send(None)
        elif cmd == "log":
            with log.lock:
                conn.send((list(log.requests), log.waves, log.body_bytes, proxy.max_in_flight))
        elif cmd == "stop":
            proxy.stop()
            conn.send(None)
            break


class _ProxyProcess:
    """The proxy in a process of its own: a benchmark's Python reader then does not
    share the GIL with it (a native reader's threads never did)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        import os
        import subprocess
        import sys
        from multiprocessing.connection import Listener

        key = os.urandom(16)
        with Listener(("127.0.0.1", 0), authkey=key) as listener:
            code = ("import sys; from multiprocessing.connection import Client; "
                    "from s3_server import _proxy_main; "
                    f"_proxy_main(Client({listener.address!r}, authkey={key!r}), "
                    f"{upstream!r})")
            self._proc = subprocess.Popen(
                [sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": os.pathsep.join(
                    [os.path.dirname(os.path.abspath(__file__)),
                     os.environ.get("PYTHONPATH", "")])})
            self._conn = listener.accept()
        self.port: int = self._conn.recv()
        self._delay = 0.0

    def call(self, cmd: str, arg: Any = None) -> Any:
        self._conn.send((cmd, arg))
        return self._conn.recv()

    @property
    def delay(self) -> float:
        return self._delay

    @delay.setter
    def delay(self, seconds: float) -> None:
        self.call("delay", seconds)
        self._delay = seconds

    def stop(self) -> None:
        with contextlib.suppress(OSError, EOFError):
            self.call("stop")
        self._proc.wait(10)


class S3Endpoint:
    """moto's S3 server plus the delaying, counting proxy, both on 127.0.0.1.

    ``separate_process``: moto runs in a child process instead of a thread (the
    benchmarks; tests keep the thread, which starts faster). ``proxy_process``: the
    proxy too (its request hooks ``fail_next``, ``reject`` and ``answer`` are then
    not available)."""

    def __init__(self, separate_process: bool = False, proxy_process: bool = False) -> None:
        from moto.server import ThreadedMotoServer  # tests: the s3 fixture checks first

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request
        self._moto: Any
        if separate_process:
            self._moto = _MotoProcess()
        else:
            self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            self._moto.start()
        host, port = self._moto.get_host_and_port()
        self.direct_url = f"http://{host}:{port}"
        self._log = _Log()
        self._remote = _ProxyProcess((host, port)) if proxy_process else None
        self._proxy: Any = self._remote or _Proxy((host, port), self._log)
        self.url = f"http://127.0.0.1:{self._proxy.port}"

    # -------------------------------------------------------------- knobs

    @property
    def delay(self) -> float:
        """Seconds the proxy waits before forwarding each request."""
        return self._proxy.delay

    @delay.setter
    def delay(self, seconds: float) -> None:
        self._proxy.delay = seconds

    @property
    def fail_next(self) -> int:
        """The proxy answers this many next requests with 503 SlowDown (throttling)."""
        return self._proxy.fail_next

    @fail_next.setter
    def fail_next(self, n: int) -> None:
        self._local_proxy().fail_next = n

    @property
    def reject(self) -> Callable[[str, str, str], bool] | None:
        """A predicate on (method, path, query): matching requests get a 400 (not retried)."""
        return self._proxy.reject

    @reject.setter
    def reject(self, pred: Callable[[str, str, str], bool] | None) -> None:
        self._local_proxy().reject = pred

    @property
    def answer(self) -> Callable[[LoggedRequest], tuple[int, str] | None] | None:
        """Called with each request before it is forwarded (in the proxy's thread, so
        it may change objects through :meth:`boto3`); a (status, S3 error code) it
        returns is the answer instead (a store's refusal moto would not give)."""
        return self._proxy.answer

    @answer.setter
    def answer(self, fn: Callable[[LoggedRequest], tuple[int, str] | None] | None) -> None:
        self._local_proxy().answer = fn

    def _local_proxy(self) -> _Proxy:
        if self._remote is not None:
            raise NotImplementedError("the proxy runs in its own process: no request hooks")
        return self._proxy  # type: ignore[no-any-return]

    @property
    def uploaded_bytes(self) -> int:
        """Request body bytes clients sent (PUT, POST) since the last :meth:`reset_log`."""
        return sum(r.length for r in self.requests)

    @property
    def max_in_flight(self) -> int:
        """Most requests the proxy held at once since the last :meth:`reset_log`."""
        if self._remote is not None:
            return int(self._remote.call("log")[3])
        return int(self._proxy.max_in_flight)

    @property
    def requests(self) -> list[LoggedRequest]:
        """Requests forwarded since the last :meth:`reset_log`."""
        if self._remote is not None:
            return list(self._remote.call("log")[0])
        with self._log.lock:
            return list(self._log.requests)

    @property
    def waves(self) -> int:
        """Sequential round trips as the server saw them: requests that arrived while
        no other request was in flight, since the last :meth:`reset_log`."""
        if self._remote is not None:
            return int(self._remote.call("log")[1])
        return self._log.waves

    @property
    def body_bytes(self) -> int:
        """Response body bytes sent to clients since the last :meth:`reset_log`."""
        if self._remote is not None:
            return int(self._remote.call("log")[2])
        return self._log.body_bytes

    def reset_log(self) -> None:
        """Forget the requests so far, once none is in flight (a client that gave up
        on a delayed request leaves it running at the proxy for a while)."""
        if self._remote is not None:
            self._remote.call("reset")
        else:
            _reset(self._proxy, self._log)

    # -------------------------------------------------------------- clients

    def storage_options(self, **extra: str) -> dict[str, str]:
        """What ``pqindex.dataset(..., storage_options=...)`` needs for this endpoint."""
        opts = {
            "endpoint": self.url,
            "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY,
            "region": REGION,
            "allow_http": "true",
        }
        opts.update(extra)
        return opts

    def boto3(self, direct: bool = True) -> Any:
        """A plain boto3 client of this endpoint (by default not through the proxy)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.direct_url if direct else self.url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def new_bucket(self, prefix: str = "pqindex") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.boto3().create_bucket(Bucket=name)
        return name

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.boto3().put_object(Bucket=bucket, Key=key, Body=data)

    def stop(self) -> None:
        self._proxy.stop()
        self._moto.stop()


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Endpoint]:
    """One moto server and proxy for the whole test session."""
    from conftest import import_or_missing

    import_or_missing("moto.server", "moto (the S3 emulator, test extra)")
    ep = S3Endpoint()
    try:
        yield ep
    finally:
        ep.stop()
