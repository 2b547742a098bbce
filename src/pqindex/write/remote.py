"""Writing and re-indexing Parquet files on object stores (obstore).

A new file streams to the store as a multipart upload while pyarrow writes it:
data bytes are handed to ``obstore.put`` in parts as they come (a bounded queue,
so at most a few parts are in memory), and only the bytes after the last data
page — pyarrow's index tail — stay in memory. That tail is then rebuilt as for
a local file (``write.tail``: truncated bounds, embedded region, new footer) and
sent as the last part. The object appears only when the upload completes; any
error aborts it and leaves nothing.

``add_indexes`` on an object replaces it with its unchanged data range plus a
new tail. On S3 the range is copied server side (``write.remote_index``,
``io.s3multipart``), on Azure and GCS the object is kept and the tail appended
server side (``write.cloud_copy``); :func:`rewrite_remote` is the path for
everything else (other stores or credentials, ranges under S3's 5 MiB part
minimum, stores without the request): obstore 0.12 exposes no
ranged part copy, so the data range is streamed down and up again, a part at a
time, each ranged GET conditional on the ETag read at open. A small object is
rewritten with one PUT conditional on that ETag (``If-Match``); a large one is
a multipart upload whose completion cannot carry a condition through obstore,
so the ETag is checked again just before the last part is handed over — a
concurrent change in the short window after that check goes undetected.
"""

from __future__ import annotations

import queue
import struct
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from pqindex.errors import PqIndexError, UnsupportedError
from pqindex.format.file import MAGIC, ParquetFile
from pqindex.io.errors import ObjectChangedError, StorageError, translate
from pqindex.io.source import ByteSource, IOStats
from pqindex.write.tail import RewriteResult, Tail, _build, data_end

__all__ = [
    "PART_BYTES",
    "SMALL_OBJECT_BYTES",
    "Upload",
    "build_tail",
    "even_ranges",
    "is_remote",
    "rewrite_remote",
    "run_all",
    "write_parquet_remote",
]

T = TypeVar("T")

PART_BYTES = 8 << 20  # parts handed to the store; S3's minimum is 5 MiB
SMALL_OBJECT_BYTES = 16 << 20  # rewritten with one conditional PUT at or under this
_MAX_CONCURRENCY = 4  # parts in flight per upload: bounds memory to a few parts


def even_ranges(size: int, n: int) -> list[tuple[int, int]]:
    """``[0, size)`` as ``n`` consecutive ``(start, end)`` ranges differing by at most
    one byte (server-side copies in parts or blocks)."""
    step, extra = divmod(size, n)
    out, pos = [], 0
    for i in range(n):
        end = pos + step + (i < extra)
        out.append((pos, end))
        pos = end
    return out


def run_all(jobs: Sequence[Callable[[], T]], workers: int) -> list[T]:
    """The jobs' results, in order, run ``workers`` at a time (server-side copies);
    the first failure cancels what has not started and is raised."""
    with ThreadPoolExecutor(min(workers, len(jobs)) or 1,
                            thread_name_prefix="pqindex-copy") as pool:
        futures: list[Future[T]] = [pool.submit(j) for j in jobs]
        finished, _pending = wait(futures, return_when=FIRST_EXCEPTION)
        for f in finished:
            err = f.exception()
            if err is not None:
                pool.shutdown(wait=True, cancel_futures=True)
                raise err
    return [f.result() for f in futures]


def is_remote(path: str) -> bool:
    """Whether ``path`` is an object-store URL (written through obstore)."""
    from pqindex.io.source import is_object_store_url

    return is_object_store_url(path)


# ---------------------------------------------------------------- sources


class _Window:
    """A ByteSource for a file whose bytes ``[start, size)`` are in memory: pyarrow's
    tail as written, before the upload completes. Reads elsewhere are a bug."""

    default_tail_bytes = 64 * 1024
    max_gap = 0
    etag: str | None = None
    version: str | None = None

    def __init__(self, path: str, size: int, start: int, data: bytes, head: bytes) -> None:
        self.path = path
        self.stats = IOStats()
        self._size = size
        self._start = start
        self._data = data
        self._head = head

    def size(self) -> int:
        return self._size

    def read(self, offset: int, length: int) -> bytes:
        if offset >= self._start and offset + length <= self._size:
            return self._data[offset - self._start : offset - self._start + length]
        if offset + length <= len(self._head):
            return self._head[offset : offset + length]
        raise PqIndexError(f"internal: read of [{offset}, {offset + length}) outside the "
                           f"held tail [{self._start}, {self._size})", path=self.path)

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return [self.read(o, n) for o, n in ranges]

    def coalesce(self, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        return list(ranges)

    def tail(self, length: int) -> bytes:
        n = min(length, self._size)
        return self.read(self._size - n, n)

    def cache_key(self) -> tuple[str, int, str] | None:
        return None

    def close(self) -> None:
        pass


class _Spliced:
    """``base``'s bytes before ``cut`` followed by ``tail``: a rewritten file before it
    is uploaded (page-scope indexes are built on the file that has the page index)."""

    default_tail_bytes = 64 * 1024
    max_gap = 0
    etag: str | None = None
    version: str | None = None

    def __init__(self, base: ByteSource, cut: int, tail: bytes) -> None:
        self.path = base.path
        self.stats = base.stats
        self._base = base
        self._cut = cut
        self._tail = tail
        self.max_gap = getattr(base, "max_gap", 0)

    def size(self) -> int:
        return self._cut + len(self._tail)

    def read(self, offset: int, length: int) -> bytes:
        return self.read_ranges([(offset, length)])[0]

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        below = [(o, min(n, self._cut - o)) for o, n in ranges if o < self._cut]
        got = iter(self._base.read_ranges(below) if below else [])
        out = []
        for o, n in ranges:
            part = next(got) if o < self._cut else b""
            end = o + n
            if end > self._cut:
                lo = max(o, self._cut) - self._cut
                part += self._tail[lo : end - self._cut]
            out.append(part)
        return out

    def coalesce(self, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        return list(ranges)

    def tail(self, length: int) -> bytes:
        n = min(length, self.size())
        return self.read(self.size() - n, n)

    def cache_key(self) -> tuple[str, int, str] | None:
        return None

    def close(self) -> None:
        pass


# ---------------------------------------------------------------- tails


def build_tail(pf: ParquetFile, tail: Tail, keep_existing: bool = True, *,
               at: int | None = None) -> tuple[int, bytes, RewriteResult]:
    """(where the tail starts, the new tail's bytes with footer and magic, what they
    hold) for ``pf`` — ``write.tail.rewrite`` without the file: the bytes go to a
    store. The tail starts at the data end, or at ``at`` (the whole object kept,
    the old footer and indexes as dead bytes before the new tail: GCS compose,
    Azure block reuse); existing structures below it are referenced in place."""
    base = data_end(pf) if at is None else at
    if base < data_end(pf):
        raise PqIndexError(f"internal: a tail at {base} would cut the data", path=pf.path)
    builder, md, sizes, region = _build(pf, tail, base, keep_existing)
    footer = md.encode()
    if len(footer) >= 1 << 32:
        raise UnsupportedError(f"footer of {len(footer)} bytes does not fit in 4 bytes",
                               path=pf.path)
    footer_offset = builder.pos
    data = bytes(builder.buf) + footer + struct.pack("<I", len(footer)) + MAGIC
    done = RewriteResult(
        path=pf.path, size=footer_offset + len(footer) + 8, data_end=base, region=region,
        column_index_bytes=sizes["column_index"], offset_index_bytes=sizes["offset_index"],
        bloom_filter_bytes=sizes["bloom"], footer_offset=footer_offset,
        footer_bytes=len(footer))
    return base, data, done


# ---------------------------------------------------------------- uploads


_END = object()


class Upload:
    """A streaming upload of one object: :meth:`write` bytes, then :meth:`finish`.

    Nothing is sent until a whole part is buffered; a first part starts a
    multipart upload (``obstore.put`` in a worker thread pulling parts from a
    queue of two), so memory holds at most a few parts. An object that never
    reaches a part is sent with one PUT at :meth:`finish` (``mode`` applies to it:
    an ETag condition or create-only). :meth:`abort` (or any error) aborts the
    multipart upload: the store keeps nothing.
    """

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None, *,
                 part_bytes: int | None = None, mode: Any = None) -> None:
        from pqindex.io.objstore import get_store

        self.url = url
        self.part_bytes = part_bytes or PART_BYTES  # read at call time (tests lower it)
        self.mode = mode
        self.handle, self.key = get_store(url, storage_options)
        self.sent = 0  # bytes handed to the store
        self.parts = 0  # parts handed to the multipart upload (0: a single PUT)
        self._buf = bytearray()
        self._q: queue.Queue[Any] = queue.Queue(maxsize=2)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.result: Any = None

    # the pull side, in the worker thread
    def _parts(self) -> Iterator[bytes]:
        while True:
            item = self._q.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def _run(self) -> None:
        from pqindex.io.native import obstore_api

        obs = obstore_api()

        try:
            self.result = obs.put(self.handle.store, self.key, self._parts(),
                                  chunk_size=self.part_bytes, max_concurrency=_MAX_CONCURRENCY,
                                  use_multipart=True)
        except BaseException as e:  # handed to the writer's thread
            self._error = e

    def _push(self, item: Any) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="pqindex-upload",
                                            daemon=True)
            self._thread.start()
        while True:
            if self._error is not None:
                raise translate(self._error, self.url, "multipart upload") from None
            try:
                self._q.put(item, timeout=0.2)
                return
            except queue.Full:
                if not self._thread.is_alive():
                    if self._error is not None:
                        raise translate(self._error, self.url, "multipart upload") from None
                    raise StorageError("the upload stopped", path=self.url,
                                       operation="multipart upload") from None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append ``data``; whole parts go to the store as they fill."""
        self._buf += data
        while len(self._buf) >= self.part_bytes:
            part = bytes(self._buf[: self.part_bytes])
            del self._buf[: self.part_bytes]
            self._push(part)
            self.sent += len(part)
            self.parts += 1

    def finish(self) -> None:
        """Send what is buffered and complete the upload (the object appears now)."""
        from pqindex.io.native import obstore_api

        obs = obstore_api()

        if self._thread is None:
            data = bytes(self._buf)
            self._buf.clear()
            try:
                if self.mode is None:
                    self.result = obs.put(self.handle.store, self.key, data, use_multipart=False)
                else:
                    self.result = obs.put(self.handle.store, self.key, data, mode=self.mode)
            except Exception as e:
                if isinstance(e, obs.exceptions.AlreadyExistsError):
                    raise StorageError("the object already exists", path=self.url,
                                       operation="PUT (create)") from None
                raise translate(e, self.url, "PUT") from None
            self.sent += len(data)
            return
        if self._buf:
            self.sent += len(self._buf)
            self.parts += 1
            self._push(bytes(self._buf))
            self._buf.clear()
        self._push(_END)
        self._thread.join()
        if self._error is not None:
            raise translate(self._error, self.url, "multipart upload") from None

    def abort(self, why: BaseException | None = None) -> None:
        """Abort: obstore aborts the multipart upload when its input fails."""
        self._buf.clear()
        if self._thread is None:
            return
        if self._thread.is_alive():
            err = why if why is not None else PqIndexError("upload aborted", path=self.url)
            try:
                while self._thread.is_alive():
                    try:
                        self._q.put(err, timeout=0.2)
                        break
                    except queue.Full:
                        continue
            finally:
                self._thread.join()


class _Sink:
    """The file object pyarrow writes to: bytes go to an :class:`Upload` until
    :meth:`hold` is called; after that they stay in memory (the index tail)."""

    def __init__(self, upload: Upload) -> None:
        self.upload = upload
        self.pos = 0
        self.closed = False
        self.held = bytearray()
        self.held_from: int | None = None
        self.head = b""

    def write(self, data: Any) -> int:
        b = memoryview(data).cast("B")
        if len(self.head) < 4:
            self.head += bytes(b[: 4 - len(self.head)])
        if self.held_from is None:
            self.upload.write(b)
        else:
            self.held += b
        self.pos += len(b)
        return len(b)

    def hold(self) -> None:
        # Bytes still buffered in the upload (under a part) join the held ones.
        self.held_from = self.pos - len(self.upload._buf)
        self.held = self.upload._buf
        self.upload._buf = bytearray()

    def tell(self) -> int:
        return self.pos

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


@dataclass
class RemoteWrite:
    """What :func:`write_parquet_remote` sent."""

    result: RewriteResult
    uploaded: int
    parts: int


def write_parquet_remote(
    table: pa.Table,
    url: str,
    *,
    writer_options: Mapping[str, Any],
    row_group_rows: int,
    tail_for: Any,
    storage_options: Mapping[str, Any] | None = None,
    part_bytes: int | None = None,
) -> RemoteWrite:
    """Write ``table`` with pyarrow straight into a multipart upload of ``url``.

    ``tail_for(pf)`` returns the :class:`Tail` to put after the data (it sees the
    file as pyarrow wrote it, through its tail only). The upload completes only
    after the new tail is sent; any error aborts it.
    """
    upload = Upload(url, storage_options, part_bytes=part_bytes)
    sink = _Sink(upload)
    try:
        writer = pq.ParquetWriter(sink, table.schema, **writer_options)
        try:
            writer.write_table(table, row_group_size=row_group_rows)
            sink.hold()  # everything after this is pyarrow's index tail
        finally:
            writer.close()
        assert sink.held_from is not None
        size = sink.pos
        window = _Window(url, size, sink.held_from, bytes(sink.held), sink.head)
        with ParquetFile(window) as pf:
            base = data_end(pf)
            if base < sink.held_from:
                raise PqIndexError(f"internal: pyarrow wrote data pages after the row groups "
                                   f"(data ends at {base}, tail held from {sink.held_from})",
                                   path=url)
            tail = tail_for(pf)
            base, tail_bytes, done = build_tail(pf, tail)
        upload.write(window.read(sink.held_from, base - sink.held_from))
        upload.write(tail_bytes)
        upload.finish()
    except BaseException as e:
        upload.abort(e)
        raise
    return RemoteWrite(done, upload.sent, upload.parts)


# ---------------------------------------------------------------- re-indexing


@dataclass
class RemoteRewrite:
    """What :func:`rewrite_remote` did."""

    result: RewriteResult
    uploaded: int  # bytes sent to the store
    copied_server_side: int  # bytes the store copied itself (0 when streamed)
    parts: int


def rewrite_remote(
    source: ByteSource,
    base: int,
    tail_bytes: bytes,
    done: RewriteResult,
    url: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    part_bytes: int | None = None,
    output: str | None = None,
) -> RemoteRewrite:
    """Replace ``url`` (read through ``source``) by its bytes ``[0, base)`` plus
    ``tail_bytes``, only if it is still the object ``source`` read (its ETag);
    with ``output`` (a new object of the same store), write that object instead
    (created only if absent) and leave ``url`` as it is.

    Raises :class:`ObjectChangedError` when it changed; on any error the
    original object stays as it was.
    """
    from pqindex.io.native import obstore_api
    from pqindex.io.objstore import get_store

    obs = obstore_api()

    etag = source.etag
    total = base + len(tail_bytes)
    mode: Any = {"e_tag": etag} if etag else None
    if mode is not None and source.version:
        mode["version"] = source.version  # GCS conditions on the generation, not the ETag
    if output is not None:
        mode = "create"  # a new name: the source is checked by its reads' If-Match
    small = total <= SMALL_OBJECT_BYTES
    # A small object stays in memory and goes in one PUT, which can carry If-Match.
    upload = Upload(output or url, storage_options,
                    part_bytes=total + 1 if small else part_bytes,
                    mode=mode if small else None)
    handle, key = get_store(url, storage_options)

    def fetch(start: int, end: int) -> bytes:
        opts: dict[str, Any] = {"range": (start, end)}
        if etag:
            opts["if_match"] = etag
        try:
            got = obs.get(handle.store, key, options=opts)
            return bytes(got.bytes())
        except Exception as e:
            raise translate(e, url, "GET") from None

    try:
        step = part_bytes or PART_BYTES
        pos = 0
        while pos < base:
            end = min(base, pos + step)
            upload.write(fetch(pos, end))
            pos = end
        if not small and etag:
            # Multipart completion takes no condition through obstore: check last.
            try:
                now = obs.head(handle.store, key)
            except Exception as e:
                raise translate(e, url, "HEAD") from None
            if now.get("e_tag") != etag:
                raise ObjectChangedError(
                    f"the object changed while indexes were added (ETag {etag} -> "
                    f"{now.get('e_tag')}); nothing was replaced", path=url,
                    operation="add_indexes")
        upload.write(tail_bytes)
        upload.finish()
    except BaseException as e:
        upload.abort(e)
        if isinstance(e, ObjectChangedError) or (
            isinstance(e, StorageError) and "PreconditionFailed" in str(e)
        ):
            raise ObjectChangedError(
                "the object changed while indexes were added; nothing was replaced",
                path=url, operation="add_indexes") from None
        raise
    return RemoteRewrite(done, upload.sent, 0, upload.parts)


def spliced(source: ByteSource, base: int, tail_bytes: bytes) -> ByteSource:
    """``source``'s data range with a new tail: the rewritten file, not yet uploaded."""
    return _Spliced(source, base, tail_bytes)
