"""Byte-range sources: the only way pqindex reads a file, so every read is counted.

The contract the planner and executor rely on:

* ``read(offset, length)`` is one request and one round trip.
* ``read_ranges(ranges)`` is one *wave*: every range goes out at once (on remote
  stores concurrently, at most ``max_in_flight`` in flight, default
  :data:`DEFAULT_MAX_IN_FLIGHT`), the bytes come back in the order given. It counts
  one request per range (a very large remote range is split into parallel parts of
  at least :data:`SPLIT_PART_BYTES`, each part a request) and one round trip per
  call. Callers hand it all the ranges that do not depend on each other.
  :func:`iter_ranges` is the same wave with each range handed over as it lands
  (object stores; other sources in order once all are read), so a caller decodes
  the first row groups while the rest transfer.
* ``coalesce(ranges)`` merges ranges when fetching the gap costs less than one
  more request: a gap of at most :data:`LOCAL_MAX_GAP` on local files, at most
  :data:`REMOTE_MAX_GAP` on remote stores (obstore's), where ranges apart are
  merged only while the result stays within :data:`SPLIT_PART_BYTES` (a wave's
  parts transfer in parallel). It only merges; splitting happens inside
  ``read_ranges``.
* ``tail(length)`` is the last ``length`` bytes (fewer if the file is shorter) in
  ONE request; on object stores a suffix-range GET with no HEAD, the size, ETag
  and version come back with the response, so ``size()`` afterwards costs nothing.
* ``default_tail_bytes`` is how much a footer read should fetch: 512 KiB on remote
  stores (footer, page index and embedded directory in one request), 64 KiB locally.
* ``etag`` / ``version`` identify the object's content when the store says
  (None otherwise); later range reads of an object store are conditional on them,
  so an object that changes during a scan raises
  :class:`~pqindex.io.errors.ObjectChangedError` instead of mixing versions.

Every request is recorded in an :class:`IOStats` (requests, bytes, round trips
and the trace of ranges), which tests assert instead of timings.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol, TypeVar, cast, runtime_checkable

from pqindex.errors import CorruptFileError, PqIndexError
from pqindex.io.errors import (
    ObjectChangedError,
    ObjectNotFoundError,
    StorageAccessError,
    StorageError,
    translate,
)
from pqindex.pools import shared_pool

__all__ = [
    "DEFAULT_MAX_IN_FLIGHT",
    "LOCAL_MAX_GAP",
    "LOCAL_TAIL_BYTES",
    "REMOTE_MAX_GAP",
    "REMOTE_TAIL_BYTES",
    "SPLIT_PART_BYTES",
    "ByteSource",
    "BytesSource",
    "FsspecSource",
    "IOStats",
    "LocalFileSource",
    "ObjectInfo",
    "coalesce",
    "in_order",
    "iter_ranges",
    "listing_failed",
    "local_info",
    "open_error",
    "open_source",
    "quoted_etag",
]

LOCAL_TAIL_BYTES = 64 * 1024
REMOTE_TAIL_BYTES = 512 * 1024
# A local request costs about as much as reading 8 KiB; a remote one (10-100 ms to
# the first byte) as much as ~1 MiB.
LOCAL_MAX_GAP = 8 * 1024
REMOTE_MAX_GAP = 1024 * 1024
# Remote ranges larger than two parts are fetched as parallel parts of this size or more.
SPLIT_PART_BYTES = 8 * 1024 * 1024
# Requests in flight per wave on a remote store (``max_in_flight`` storage option).
DEFAULT_MAX_IN_FLIGHT = 64
# A local wave of at least this many bytes is read by several threads: copying
# megabytes out of the page cache on one thread left the others idle (~5% of a
# rare-value query that reads 10 MB).
PARALLEL_READ_BYTES = 2 << 20
_READ_THREADS = 4
# A file's timestamps resolve changes this finely or better (ext4/xfs: a clock tick;
# network and FAT file systems: up to 2 s). A file modified this recently when it was
# opened could be rewritten again with stat showing nothing: its footer bytes decide.
RACY_NS = 2_000_000_000
# Where a descriptor can be opened again as a file of its own (the same inode,
# whatever its name points to now): pyarrow's reader takes paths, not descriptors.
_DESCRIPTOR_DIR = next((d for d in ("/proc/self/fd", "/dev/fd") if os.path.isdir(d)), None)
_T = TypeVar("_T")


@dataclass
class IOStats:
    """Counts of what a source read.

    ``requests`` and ``bytes_read`` count requests; ``round_trips`` counts the
    sequential waves the caller waited for (a ``read`` or a ``read_ranges`` call);
    ``trace`` lists ``(offset, length)`` per request.
    """

    requests: int = 0
    bytes_read: int = 0
    round_trips: int = 0
    trace: list[tuple[int, int]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, offset: int, length: int) -> None:
        """One request of ``length`` bytes at ``offset``."""
        with self._lock:
            self.requests += 1
            self.bytes_read += length
            self.trace.append((offset, length))

    def record_many(self, ranges: Sequence[tuple[int, int]]) -> None:
        """One request per ``(offset, length)``."""
        with self._lock:
            self.requests += len(ranges)
            self.bytes_read += sum(n for _, n in ranges)
            self.trace.extend(ranges)

    def record_wave(self) -> None:
        """One round trip: a batch of concurrent requests the caller waited for."""
        with self._lock:
            self.round_trips += 1

    def add(self, requests: int, bytes_read: int, round_trips: int) -> None:
        """Counts another reader took, charged to this one (no trace entries)."""
        with self._lock:
            self.requests += requests
            self.bytes_read += bytes_read
            self.round_trips += round_trips

    def reset(self) -> None:
        with self._lock:
            self.requests = 0
            self.bytes_read = 0
            self.round_trips = 0
            self.trace.clear()

    def to_dict(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "bytes_read": self.bytes_read,
            "round_trips": self.round_trips,
        }


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """What a listing says about an object, so opening it needs no HEAD.

    ``etag`` or ``mtime`` (ns since the epoch) tell versions of the same URL apart
    (the metadata cache's key). ``ctime`` (local files: the inode's status change
    time, ns) moves with every write and with any ``utime``, so a file rewritten with
    its size and mtime restored is still told apart.
    """

    size: int
    etag: str | None = None
    version: str | None = None
    mtime: int | None = None
    ctime: int | None = None


def local_info(path: str | os.PathLike[str]) -> ObjectInfo | None:
    """What ``stat`` says of a local file (size, mtime, ctime), or None when it cannot."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return ObjectInfo(st.st_size, mtime=st.st_mtime_ns, ctime=st.st_ctime_ns)


def quoted_etag(etag: str | None) -> str | None:
    """An ETag in its HTTP form (``"..."`` or ``W/"..."``): Azure lists ETags bare
    but sends them quoted, and If-Match needs the quoted form."""
    if not etag or etag.startswith(('"', 'W/"')):
        return etag or None
    return f'"{etag}"'


@runtime_checkable
class ByteSource(Protocol):
    """Random access to one file's bytes (see the module docstring for the contract)."""

    path: str
    stats: IOStats

    @property
    def default_tail_bytes(self) -> int:
        """How many bytes a footer read should fetch from this kind of store."""
        ...

    @property
    def etag(self) -> str | None:
        """The object's ETag when the store gives one (known after the first response)."""
        ...

    @property
    def version(self) -> str | None:
        """The object's version id when the store gives one."""
        ...

    def size(self) -> int:
        """The file's length in bytes (a HEAD on a remote store unless already known)."""
        ...

    def read(self, offset: int, length: int) -> bytes:
        """Exactly ``length`` bytes at ``offset``, or CorruptFileError if the file is
        shorter. One request, one round trip."""
        ...

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes of each ``(offset, length)``, in order, fetched concurrently.

        One request per range (more when a large remote range is split), one round
        trip per call.
        """
        ...

    def coalesce(self, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """Sorted, non-overlapping ranges covering ``ranges``, merged where the gap
        costs less than one more request on this store."""
        ...

    def tail(self, length: int) -> bytes:
        """The last ``length`` bytes (the whole file if shorter) in one request."""
        ...

    def cache_key(self) -> tuple[str, int, str] | None:
        """(URL, size, ETag or mtime) when known without a request and the store is
        worth caching metadata for; None otherwise."""
        ...

    def close(self) -> None: ...


class _BaseSource:
    """Shared checks and counting; subclasses implement ``_read`` and ``_size``."""

    path: str
    stats: IOStats
    _size: int
    default_tail_bytes: int = LOCAL_TAIL_BYTES
    max_gap: int = LOCAL_MAX_GAP
    etag: str | None = None
    version: str | None = None

    def size(self) -> int:
        return self._size

    def _check(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > self.size():
            raise CorruptFileError(
                f"read of {length} bytes at offset {offset} is outside the file "
                f"({self.size()} bytes)",
                path=self.path,
                offset=offset,
            )

    def _checked(self, offset: int, length: int, data: bytes) -> bytes:
        if len(data) != length:
            raise CorruptFileError(
                f"short read: wanted {length} bytes, got {len(data)} (file changed?)",
                path=self.path,
                offset=offset,
            )
        return data

    def read(self, offset: int, length: int) -> bytes:
        self._check(offset, length)
        data = self._read(offset, length)
        self.stats.record(offset, length)
        self.stats.record_wave()
        return self._checked(offset, length, data)

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        if not ranges:
            return []
        out = []
        for o, n in ranges:
            self._check(o, n)
            data = self._read(o, n)
            self.stats.record(o, n)
            out.append(self._checked(o, n, data))
        self.stats.record_wave()
        return out

    def coalesce(self, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        return coalesce(ranges, self.max_gap)

    def tail(self, length: int) -> bytes:
        size = self.size()
        n = min(size, max(length, 0))
        return self.read(size - n, n)

    def cache_key(self) -> tuple[str, int, str] | None:
        return None

    def _read(self, offset: int, length: int) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> _BaseSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Descriptors:
    """The open descriptors of local files, shared by the process: at most ``limit``
    idle ones. A dataset of thousands of files would otherwise hold one per file for
    its life, past the usual limit of 1,024 (macOS: 256) open files. A source whose
    descriptor was closed opens its file again, checked to be the same file."""

    def __init__(self) -> None:
        # Reentrant: a source collected by a garbage collection that runs while this
        # thread holds the lock (any allocation may start one) closes through it.
        self._lock = threading.RLock()
        # Sources holding a descriptor no read uses, least recently used first.
        self._idle: OrderedDict[int, weakref.ref[LocalFileSource]] = OrderedDict()
        self.limit = _descriptor_limit()

    def acquire(self, src: LocalFileSource) -> int:
        """The source's descriptor, opened again if the pool closed it; in use (never
        closed) until :meth:`release`."""
        with self._lock:
            if src._closed:
                raise PqIndexError("read after the file was closed", path=src.path)
            src._users += 1
            self._idle.pop(id(src), None)
            try:
                if src._fd is None:
                    src._fd = src._reopen()
            except BaseException:
                src._users -= 1
                raise
            return src._fd

    def release(self, src: LocalFileSource) -> None:
        with self._lock:
            src._users -= 1
            if src._users or src._fd is None:
                return
            if src._closed:  # closed during the read
                fd, src._fd = src._fd, None
                os.close(fd)
                return
            self._idle[id(src)] = weakref.ref(src)
            while len(self._idle) > self.limit:
                _, ref = self._idle.popitem(last=False)
                old = ref()
                if old is not None and old._fd is not None and not old._users:
                    fd, old._fd = old._fd, None
                    os.close(fd)

    def close(self, src: LocalFileSource) -> None:
        """No more reads of ``src``: its descriptor closed now, or by the read in
        flight when it ends. Entries never outlive their source (``__del__`` closes),
        so the id names this one."""
        with self._lock:
            src._closed = True
            self._idle.pop(id(src), None)
            if src._fd is not None and not src._users:
                fd, src._fd = src._fd, None
                os.close(fd)


def _descriptor_limit() -> int:
    """Idle descriptors kept: a quarter of the soft limit on open files, 16 to 1,024."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):  # Windows: no resource module
        return 256
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return 1024
    return max(16, min(1024, soft // 4))


_descriptors = _Descriptors()


def open_error(e: OSError, path: str, operation: str = "open") -> StorageError:
    """The :class:`~pqindex.io.errors.StorageError` saying why a local path could not be
    opened or listed: missing, not readable, a directory where a file was expected."""
    code = e.errno
    if code in (errno.ENOENT, errno.ENOTDIR):
        what = "no such file" if code == errno.ENOENT else "a part of the path is not a directory"
        return ObjectNotFoundError(what, path=path, operation=operation)
    if code in (errno.EACCES, errno.EPERM):
        return StorageAccessError("permission denied", path=path, operation=operation)
    if code == errno.EISDIR:
        return _not_a_file(path, operation)
    return StorageError(e.strerror or str(e), path=path, operation=operation)


def listing_failed(e: OSError) -> NoReturn:
    """``os.walk``'s ``onerror``: a directory that cannot be listed is an error saying
    why (a permission denied), never a directory without files."""
    raise open_error(e, os.fspath(e.filename) if e.filename else "?", "list")


def _not_a_file(path: str, operation: str = "open") -> StorageError:
    return StorageError("is a directory, not a file", path=path, operation=operation)


def _stat_identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    """What tells versions of a local file apart: device, inode, size, mtime, ctime."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class LocalFileSource(_BaseSource):
    """A local file read with ``os.pread`` (thread-safe, releases the GIL).

    Local tails are not put in the metadata cache: the OS page cache already
    serves them, and a request here costs microseconds. The descriptor is leased
    per read from a process-wide pool (:class:`_Descriptors`), so many open files
    hold few descriptors.

    One version: every read is checked after it returns (``fstat`` of the descriptor
    it used) against the file as opened (device, inode, size, mtime, ctime), so bytes
    of a file rewritten in place never pass as the version the footer came from.
    Where stat cannot tell (the mtime or ctime moved with the size unchanged, or the
    file was modified within :data:`RACY_NS` of its opening, where a rewrite in the
    same timestamp tick shows in no field), the footer bytes the first tail read
    returned decide: the same bytes are a touch, other bytes
    :class:`~pqindex.io.errors.ObjectChangedError`. pyarrow reads the file through
    the descriptor (:meth:`native_file`), never by its path.
    """

    def __init__(self, path: str | os.PathLike[str], stats: IOStats | None = None) -> None:
        self._fd: int | None = None
        self._users = 0
        self._closed = False
        self.path = os.fspath(path)
        self.stats = stats if stats is not None else IOStats()
        # The footer bytes the first tail read returned: (offset, bytes).
        self._pinned: tuple[int, bytes] | None = None
        fd = self._open()
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            os.close(fd)
            raise _not_a_file(self.path)
        self._size = st.st_size
        self._adopt(st)
        self._fd = fd
        _descriptors.acquire(self)
        _descriptors.release(self)  # idle from now on: the pool may close it

    @property
    def mtime_ns(self) -> int:
        return self._identity[3]

    def _adopt(self, st: os.stat_result) -> None:
        """Take ``st`` as the file's version (at open, and after a touch)."""
        self._identity = _stat_identity(st)
        recent = max(st.st_mtime_ns, st.st_ctime_ns) + RACY_NS
        self._racy_until = recent if recent > time.time_ns() else 0

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        except OSError as e:
            raise open_error(e, self.path) from None

    def _reopen(self) -> int:
        """The file opened again (its descriptor was closed while idle), if it is still
        the file first opened: same device and inode (then :meth:`_verify`)."""
        try:
            fd = self._open()
        except PqIndexError as e:
            raise ObjectChangedError(f"the file is gone or unreadable ({e.reason})",
                                     path=self.path, operation="reopen") from None
        try:
            st = os.fstat(fd)
            if _stat_identity(st)[:2] != self._identity[:2]:
                raise ObjectChangedError(
                    "the file was replaced or modified since it was opened (another "
                    "file has its name now)", path=self.path, operation="reopen")
            self._verify(fd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _verify(self, fd: int) -> None:
        """ObjectChangedError unless the open file is still the version opened (see the
        class docstring). Called after each read, with the descriptor it used."""
        st = os.fstat(fd)
        now = _stat_identity(st)
        if now == self._identity and not self._racy_until:
            return
        if now[2] != self._identity[2]:
            raise ObjectChangedError(
                f"the file was modified since it was opened (its size changed from "
                f"{self._identity[2]} to {now[2]} bytes)", path=self.path, operation="read")
        pinned = self._pinned
        if pinned is not None:
            off, data = pinned
            if self._pread(fd, off, len(data)) != data:
                what = ("its footer changed" if now == self._identity else
                        "its footer changed, and its mtime or status change time moved")
                raise ObjectChangedError(
                    f"the file was modified since it was opened ({what}: rewritten with "
                    f"the same size)", path=self.path, operation="read")
        if now != self._identity:
            self._adopt(st)  # a touch, or metadata: the bytes the footer describes stand
        elif time.time_ns() > self._racy_until and pinned is not None:
            self._racy_until = 0  # any later change moves a timestamp

    def verify(self) -> None:
        """ObjectChangedError unless the file is still the version opened: for reads
        this source did not make itself (pyarrow's, through :meth:`native_file`)."""
        fd = _descriptors.acquire(self)
        try:
            self._verify(fd)
        finally:
            _descriptors.release(self)

    @property
    def native_readable(self) -> bool:
        """Whether :meth:`native_file` can open this file for pyarrow here."""
        return _DESCRIPTOR_DIR is not None

    def native_file(self) -> Any:
        """The file as a ``pyarrow.OSFile`` opened through this source's descriptor (the
        inode the footer came from, whatever its path names now; see
        :attr:`native_readable`). Its reads are not checked: the caller calls
        :meth:`verify` once they are done."""
        if _DESCRIPTOR_DIR is None:
            raise PqIndexError("no descriptor directory to open the file through",
                               path=self.path)
        import pyarrow as pa

        fd = _descriptors.acquire(self)
        try:
            f = pa.OSFile(f"{_DESCRIPTOR_DIR}/{fd}")
            self._verify(fd)
        except OSError as e:
            raise open_error(e, self.path) from None
        finally:
            _descriptors.release(self)
        return f

    def tail(self, length: int) -> bytes:
        data = super().tail(length)
        if self._pinned is None and len(data) >= 8:
            # The footer (with its length and magic) is what later checks compare.
            n = int.from_bytes(data[-8:-4], "little") + 8 if data[-4:] == b"PAR1" else 8
            n = min(len(data), n)
            self._pinned = (self._size - n, bytes(data[-n:]))
        return data

    def _read(self, offset: int, length: int) -> bytes:
        fd = _descriptors.acquire(self)
        try:
            data = self._pread(fd, offset, length)
            self._verify(fd)
            return data
        finally:
            _descriptors.release(self)

    def _pread(self, fd: int, offset: int, length: int) -> bytes:
        chunks = []
        got = 0
        while got < length:
            try:
                b = os.pread(fd, length - got, offset + got)
            except OSError as e:
                raise PqIndexError(
                    f"read failed: {e.strerror}", path=self.path, offset=offset + got
                ) from None
            if not b:
                break
            chunks.append(b)
            got += len(b)
        return b"".join(chunks) if len(chunks) != 1 else chunks[0]

    def read_into(self, offset: int, out: Any) -> None:
        """Fill the writable buffer ``out`` with the bytes at ``offset``, the read not
        counted: for a caller that counts the range it reads in pieces as one request
        (as pyarrow's own reads of the file are), into buffers it reuses."""
        view = memoryview(out).cast("B")
        self._check(offset, len(view))
        self._fill(offset, view)

    def _fill(self, offset: int, view: memoryview) -> None:
        length = len(view)
        if not hasattr(os, "preadv"):  # Windows
            view[:] = self._checked(offset, length, self._read(offset, length))
            return
        fd = _descriptors.acquire(self)
        try:
            got = 0
            while got < length:
                try:
                    n = os.preadv(fd, [view[got:]], offset + got)
                except OSError as e:
                    raise PqIndexError(
                        f"read failed: {e.strerror}", path=self.path, offset=offset + got
                    ) from None
                if not n:
                    self._verify(fd)
                    raise CorruptFileError(
                        f"short read: wanted {length} bytes, got {got} (file changed?)",
                        path=self.path, offset=offset)
                got += n
            self._verify(fd)
        finally:
            _descriptors.release(self)

    def iter_ranges(self, ranges: Sequence[tuple[int, int]], *, views: bool = False
                    ) -> Iterator[tuple[int, bytes | memoryview]]:
        """One wave as ``(index, data)`` pairs. ``views``: each range read into a
        buffer of Arrow's pool, which reuses freed memory at once, and handed over as a
        memoryview: fresh Python bytes are fresh pages, each a fault (40 MiB in 1 MiB
        reads: 25 ms as bytes, 9 ms into the pool)."""
        if not views:
            return enumerate(self.read_ranges(ranges))
        return enumerate(self.read_views(ranges))

    def read_views(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        """One wave, each range in a buffer of Arrow's pool (see :meth:`iter_ranges`)."""
        if not ranges:
            return []
        import pyarrow as pa

        def one(rng: tuple[int, int]) -> memoryview:
            view = memoryview(pa.allocate_buffer(rng[1])).cast("B")
            self._fill(rng[0], view)
            return view

        return self._wave(ranges, one)

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """One wave; a large one (:data:`PARALLEL_READ_BYTES`) read by several
        threads, counted as the sequential read counts it."""
        if len(ranges) < 2 or sum(n for _, n in ranges) < PARALLEL_READ_BYTES:
            return self._read_small(ranges)
        return self._wave(ranges, lambda r: self._checked(r[0], r[1], self._read(*r)))

    def _read_small(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """A small wave on this thread, the descriptor taken once: a planner's wave of
        Bloom probes is dozens of 22- and 32-byte reads, where taking it per read
        cost three times the reads themselves."""
        if not ranges:
            return []
        for o, n in ranges:
            self._check(o, n)
        fd = _descriptors.acquire(self)
        try:
            out = [self._pread(fd, o, n) for o, n in ranges]
            self._verify(fd)
        finally:
            _descriptors.release(self)
        out = [self._checked(o, n, d) for (o, n), d in zip(ranges, out, strict=True)]
        self.stats.record_many(ranges)
        self.stats.record_wave()
        return out

    def _wave(self, ranges: Sequence[tuple[int, int]], one: Callable[[tuple[int, int]], _T]
              ) -> list[_T]:
        """``one(range)`` for each range, all checked against the file first; a large
        wave on the read threads; counted as one request each and one round trip."""
        for o, n in ranges:
            self._check(o, n)
        if len(ranges) < 2 or sum(n for _, n in ranges) < PARALLEL_READ_BYTES:
            out = [one(r) for r in ranges]
        else:
            out = list(shared_pool("read", _READ_THREADS).map(one, ranges))
        for o, n in ranges:
            self.stats.record(o, n)
        self.stats.record_wave()
        return out

    def close(self) -> None:
        _descriptors.close(self)

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            _descriptors.close(self)


class BytesSource(_BaseSource):
    """An in-memory file (tests, and buffers handed to us by callers)."""

    def __init__(self, data: bytes, path: str = "<memory>", stats: IOStats | None = None) -> None:
        self.path = path
        self.stats = stats if stats is not None else IOStats()
        self._data = bytes(data)
        self._size = len(self._data)

    def _read(self, offset: int, length: int) -> bytes:
        return self._data[offset : offset + length]


# fsspec protocols whose requests are cheap (no network in between).
_FSSPEC_LOCAL = frozenset({"memory", "file", "local"})


class FsspecSource(_BaseSource):
    """Any fsspec filesystem not served by obstore (hdfs, memory://, custom ones).

    ``read_ranges`` hands the whole wave to ``fs.cat_ranges`` (concurrent on async
    filesystems). The size comes from ``info`` at open unless a listing gave it.
    """

    def __init__(
        self,
        url: str,
        stats: IOStats | None = None,
        info: ObjectInfo | None = None,
        **storage_options: Any,
    ) -> None:
        import fsspec

        self.path = url
        self.stats = stats if stats is not None else IOStats()
        try:
            fs, fpath = fsspec.core.url_to_fs(url, **storage_options)
        except (ValueError, ImportError) as e:
            raise PqIndexError(f"cannot open: {e}", path=url) from None
        self._fs = fs
        self._fpath = fpath
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        if protocol not in _FSSPEC_LOCAL:
            self.default_tail_bytes = REMOTE_TAIL_BYTES
            self.max_gap = REMOTE_MAX_GAP
        self._mtime: str | None = None
        if info is not None:
            self._size = info.size
            self.etag = info.etag
            self._mtime = None if info.mtime is None else str(info.mtime)
            return
        try:
            meta = fs.info(fpath)
        except FileNotFoundError:
            raise ObjectNotFoundError("no such file", path=url, operation="stat") from None
        except Exception as e:
            raise translate(e, url, "stat") from None
        if meta.get("type") == "directory":
            raise _not_a_file(url, "stat")
        self._size = int(meta["size"])
        etag = meta.get("ETag") or meta.get("etag")
        self.etag = str(etag) if etag else None
        mtime = meta.get("mtime") or meta.get("LastModified") or meta.get("created")
        self._mtime = str(mtime) if mtime is not None else None

    def _read(self, offset: int, length: int) -> bytes:
        try:
            data: bytes = self._fs.cat_file(self._fpath, start=offset, end=offset + length)
        except Exception as e:
            raise translate(e, self.path, "read") from None
        return data

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        if len(ranges) <= 1:
            return super().read_ranges(ranges)
        for o, n in ranges:
            self._check(o, n)
        try:
            got = self._fs.cat_ranges(
                [self._fpath] * len(ranges), [o for o, _ in ranges], [o + n for o, n in ranges]
            )
        except Exception as e:
            raise translate(e, self.path, "read") from None
        out = []
        for (o, n), data in zip(ranges, got, strict=True):
            if isinstance(data, BaseException):
                raise translate(data, self.path, "read")
            self.stats.record(o, n)
            out.append(self._checked(o, n, bytes(data)))
        self.stats.record_wave()
        return out

    def cache_key(self) -> tuple[str, int, str] | None:
        if self.default_tail_bytes != REMOTE_TAIL_BYTES:
            return None
        version = self.etag or self._mtime
        return None if version is None else (self.path, self._size, version)


_OBJECT_STORE_SCHEMES = frozenset(
    {"s3", "s3a", "gs", "gcs", "az", "azure", "abfs", "abfss", "adl", "http", "https"}
)


def is_object_store_url(url: str) -> bool:
    """Whether obstore serves this URL (the cloud schemes and http(s))."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    return scheme in _OBJECT_STORE_SCHEMES


def open_source(
    path: str | os.PathLike[str],
    stats: IOStats | None = None,
    storage_options: Mapping[str, Any] | None = None,
    info: ObjectInfo | None = None,
) -> ByteSource:
    """A source for a local path, ``file://``, a cloud or http(s) URL (obstore), or
    any other fsspec URL.

    ``storage_options`` configure the store (credentials, endpoint, ...); without
    them the standard environment variables do. ``info`` is what a listing said
    about the object (size, ETag), so no request is needed before the first read.
    No request is made here for object stores.
    """
    p = os.fspath(path)
    if is_object_store_url(p):
        from pqindex.io.objstore import ObjectStoreSource

        return ObjectStoreSource(p, stats, storage_options, info)
    if "://" in p and not p.startswith("file://"):
        return FsspecSource(p, stats, info, **dict(storage_options or {}))
    if p.startswith("file://"):
        p = p[len("file://") :]
    return LocalFileSource(p, stats)


def iter_ranges(source: ByteSource, ranges: Sequence[tuple[int, int]], *, views: bool = False
                ) -> Iterator[tuple[int, bytes | memoryview]]:
    """``(index, bytes)`` of each range, one wave as ``source.read_ranges``: in the
    order they land where the source can tell (object stores), else in order once
    all are read. ``views``: the source may hand over a ``memoryview`` of its own
    buffer instead of a copy (object stores)."""
    each = getattr(source, "iter_ranges", None)
    if each is not None:
        return cast("Iterator[tuple[int, bytes | memoryview]]", each(ranges, views=views))
    return enumerate(source.read_ranges(ranges))


def in_order(count: int, landed: Iterator[tuple[int, bytes | memoryview]]) -> list[bytes]:
    """The ``count`` ranges of an ``iter_ranges`` (without views) as a list in request
    order: ``read_ranges`` of a source that hands ranges over as they land."""
    out: list[bytes] = [b""] * count
    for i, data in landed:
        assert isinstance(data, bytes)  # views only where asked for
        out[i] = data
    return out


def coalesce(ranges: Sequence[tuple[int, int]], max_gap: int = 64 * 1024,
             max_merged: int | None = None) -> list[tuple[int, int]]:
    """Merge ``(offset, length)`` ranges whose gap is at most ``max_gap`` bytes.

    With ``max_merged``, ranges apart (not overlapping) are merged only while the
    result stays within ``max_merged`` bytes: the requests of a wave run in
    parallel, and one long response would serialize what parallel ones transfer
    side by side. Returns sorted, non-overlapping ranges covering every input range.
    """
    out: list[tuple[int, int]] = []
    for off, n in sorted(ranges):
        if out:
            o0, n0 = out[-1]
            end0 = o0 + n0
            if off < end0 or (off <= end0 + max_gap and (
                    max_merged is None or max(end0, off + n) - o0 <= max_merged)):
                out[-1] = (o0, max(end0, off + n) - o0)
                continue
        out.append((off, n))
    return out
