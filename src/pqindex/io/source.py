"""Byte-range sources: the only way pqindex reads a file, so every read is counted.

A source answers ``read(offset, length)`` and ``read_ranges([...])`` and records
each request in an :class:`IOStats` (requests, bytes, and the trace of ranges),
which tests assert instead of timings.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pqindex.errors import CorruptFileError, PqIndexError

__all__ = [
    "ByteSource",
    "BytesSource",
    "FsspecSource",
    "IOStats",
    "LocalFileSource",
    "coalesce",
    "open_source",
]


@dataclass
class IOStats:
    """Counts of what a source read. ``trace`` lists ``(offset, length)`` per request."""

    requests: int = 0
    bytes_read: int = 0
    round_trips: int = 0  # sequential waves: a read() or a read_ranges() call is one
    trace: list[tuple[int, int]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, offset: int, length: int) -> None:
        with self._lock:
            self.requests += 1
            self.bytes_read += length
            self.trace.append((offset, length))

    def record_wave(self) -> None:
        """One more wave of requests the caller waited for."""
        with self._lock:
            self.round_trips += 1

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


@runtime_checkable
class ByteSource(Protocol):
    """Random access to one file's bytes."""

    path: str
    stats: IOStats

    def size(self) -> int:
        """The file's length in bytes."""
        ...

    def read(self, offset: int, length: int) -> bytes:
        """Exactly ``length`` bytes at ``offset``, or CorruptFileError if the file is shorter."""
        ...

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes of each ``(offset, length)``; one counted request per range, one
        round trip for the call (remote sources issue the ranges concurrently)."""
        ...

    def coalesce(self, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """The store's merge policy: ranges whose gap costs less than a request merged."""
        ...

    def close(self) -> None: ...


# Merge two ranges when reading the gap costs less than one more request.
LOCAL_MAX_GAP = 8 * 1024
REMOTE_MAX_GAP = 1024 * 1024


class _BaseSource:
    path: str
    stats: IOStats
    _size: int
    max_gap: int = LOCAL_MAX_GAP

    def size(self) -> int:
        return self._size

    def _check(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > self._size:
            raise CorruptFileError(
                f"read of {length} bytes at offset {offset} is outside the file "
                f"({self._size} bytes)",
                path=self.path,
                offset=offset,
            )

    def read(self, offset: int, length: int) -> bytes:
        data = self._counted_read(offset, length)
        self.stats.record_wave()
        return data

    def _counted_read(self, offset: int, length: int) -> bytes:
        self._check(offset, length)
        data = self._read(offset, length)
        self.stats.record(offset, length)
        if len(data) != length:
            raise CorruptFileError(
                f"short read: wanted {length} bytes, got {len(data)} (file changed?)",
                path=self.path,
                offset=offset,
            )
        return data

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        out = [self._counted_read(o, n) for o, n in ranges]
        if out:
            self.stats.record_wave()
        return out

    def coalesce(self, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        return coalesce(ranges, self.max_gap)

    def _read(self, offset: int, length: int) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> _BaseSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalFileSource(_BaseSource):
    """A local file read with ``os.pread`` (thread-safe, releases the GIL)."""

    def __init__(self, path: str | os.PathLike[str], stats: IOStats | None = None) -> None:
        self._fd: int | None = None
        self.path = os.fspath(path)
        self.stats = stats if stats is not None else IOStats()
        if os.path.isdir(self.path):
            raise PqIndexError("is a directory, not a file", path=self.path)
        try:
            self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        except FileNotFoundError:
            raise PqIndexError("no such file", path=self.path) from None
        except IsADirectoryError:
            raise PqIndexError("is a directory, not a file", path=self.path) from None
        except OSError as e:
            raise PqIndexError(f"cannot open: {e.strerror}", path=self.path) from None
        self._size = os.fstat(self._fd).st_size

    def _read(self, offset: int, length: int) -> bytes:
        assert self._fd is not None, "source is closed"
        chunks = []
        got = 0
        while got < length:
            b = os.pread(self._fd, length - got, offset + got)
            if not b:
                break
            chunks.append(b)
            got += len(b)
        return b"".join(chunks) if len(chunks) != 1 else chunks[0]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.close()


class BytesSource(_BaseSource):
    """An in-memory file (tests, and buffers handed to us by callers)."""

    def __init__(self, data: bytes, path: str = "<memory>", stats: IOStats | None = None) -> None:
        self.path = path
        self.stats = stats if stats is not None else IOStats()
        self._data = bytes(data)
        self._size = len(self._data)

    def _read(self, offset: int, length: int) -> bytes:
        return self._data[offset : offset + length]


class FsspecSource(_BaseSource):
    """Any fsspec filesystem (s3://, gs://, memory://, ...)."""

    max_gap = REMOTE_MAX_GAP

    def __init__(self, url: str, stats: IOStats | None = None, **storage_options: Any) -> None:
        import fsspec

        self.path = url
        self.stats = stats if stats is not None else IOStats()
        fs, fpath = fsspec.core.url_to_fs(url, **storage_options)
        self._fs = fs
        self._fpath = fpath
        try:
            info = fs.info(fpath)
        except FileNotFoundError:
            raise PqIndexError("no such file", path=url) from None
        if info.get("type") == "directory":
            raise PqIndexError("is a directory, not a file", path=url)
        self._size = int(info["size"])

    def _read(self, offset: int, length: int) -> bytes:
        data: bytes = self._fs.cat_file(self._fpath, start=offset, end=offset + length)
        return data


def open_source(path: str | os.PathLike[str], stats: IOStats | None = None) -> ByteSource:
    """A source for a local path or an fsspec URL (``scheme://...``)."""
    p = os.fspath(path)
    if "://" in p and not p.startswith("file://"):
        return FsspecSource(p, stats)
    if p.startswith("file://"):
        p = p[len("file://") :]
    return LocalFileSource(p, stats)


def coalesce(ranges: Sequence[tuple[int, int]], max_gap: int = 64 * 1024) -> list[tuple[int, int]]:
    """Merge ``(offset, length)`` ranges whose gap is at most ``max_gap`` bytes.

    Returns sorted, non-overlapping ranges covering every input range.
    """
    out: list[tuple[int, int]] = []
    for off, n in sorted(ranges):
        if out:
            o0, n0 = out[-1]
            end0 = o0 + n0
            if off <= end0 + max_gap:
                out[-1] = (o0, max(end0, off + n) - o0)
                continue
        out.append((off, n))
    return out
