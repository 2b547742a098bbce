"""Fetched byte ranges of a file, and the options and counters of a scan.

:class:`Buffers` holds what one or more waves of ``read_ranges`` fetched and serves
it to the page decoders; :class:`SourceFile` is a file object over a
:class:`~pqindex.format.file.ParquetFile` for pyarrow, so that what pyarrow reads is
served from those buffers or read (and counted) through the source.
"""

from __future__ import annotations

import bisect
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pqindex.format.file import ParquetFile
from pqindex.io.pyfile import SourceReader
from pqindex.io.source import coalesce

__all__ = ["Buffers", "ScanOptions", "ScanStats", "SourceFile", "arrow_metadata", "merge_stats",
           "stats_since"]


@dataclass(frozen=True)
class ScanOptions:
    """How the scanner reads.

    ``coalesce_gap``: merge byte ranges whose gap is at most this many bytes; None
    uses the store's policy (a few KiB on local files, up to 1 MiB remote).
    ``read_ahead_bytes``: at most this much planned data is fetched in one wave for a
    file's row groups; beyond it the row groups go in batches.
    ``speculative_bytes``: when the other columns' pages for every row that *may*
    match add at most this much, they join the predicate columns' wave (one round
    trip instead of two; a page the predicate then rules out is read for nothing).
    None: the store's price of a round trip (``plan.planner.round_trip_bytes``: 0 on
    local files, bytes first; a few MiB on object stores).
    ``verify_checksums``: check the CRC32 of every page read whose header has one
    before it is decoded (``format.checksum``); a mismatch is a CorruptFileError.
    """

    coalesce_gap: int | None = None
    read_ahead_bytes: int = 256 * 1024 * 1024
    speculative_bytes: int | None = None
    verify_checksums: bool = False


@dataclass
class ScanStats:
    """What executing one file's plan did."""

    row_groups_read: int = 0
    pages_read: int = 0
    rows_out: int = 0
    fetch_seconds: float = 0.0
    decode_seconds: float = 0.0
    data_bytes: int = 0
    warnings: list[str] = field(default_factory=list)


class Buffers:
    """Fetched byte ranges of one or more row groups of a file, served to the page
    decoder. Each :meth:`fetch` is one wave: one ``read_ranges`` call."""

    def __init__(self, pf: ParquetFile, stats: ScanStats, gap: int | None) -> None:
        self.pf = pf
        self.stats = stats
        self.gap = gap
        self._starts: list[int] = []
        self._bufs: list[bytes | memoryview] = []  # views of the store's buffers
        self._lock = threading.Lock()
        # Whether pyarrow's own reads of this step were counted as a wave already.
        self.native_waved = False

    def fetch(self, ranges: Iterable[tuple[int, int]]) -> None:
        for _ in self.fetch_each([list(ranges)]):
            pass

    def fetch_each(self, groups: Sequence[Sequence[tuple[int, int]]]) -> Iterator[None]:
        """One wave for the ranges of all ``groups``, each group coalesced on its own
        (no request spans two groups); yields each time a request's bytes are in, so
        the caller can decode the groups complete so far while the rest transfer."""
        t0 = time.perf_counter()
        merged: list[tuple[int, int]] = []
        for group in groups:
            missing = [
                (o, n)
                for o, n in group
                if n > 0 and not self._covered(o, n) and not self.pf.has_bytes(o, n)
            ]
            if missing:
                merged += (self.pf.source.coalesce(missing) if self.gap is None
                           else coalesce(missing, self.gap))
        merged = self._unheld(merged)  # a merged gap never re-reads what a fetch holds
        if not merged:
            return
        # Parts read while planning (tail, dictionaries) aren't read again.
        for i, buf in self.pf.iter_ranges(merged, views=True):
            off, n = merged[i]
            with self._lock:
                self.stats.data_bytes += n
                k = bisect.bisect(self._starts, off)
                self._starts.insert(k, off)
                self._bufs.insert(k, buf)
            yield
        with self._lock:
            self.stats.fetch_seconds += time.perf_counter() - t0

    def holds(self, ranges: Iterable[tuple[int, int]]) -> bool:
        """Whether every range is served without a request (fetched or held by the file)."""
        return all(n <= 0 or self._covered(o, n) or self.pf.has_bytes(o, n) for o, n in ranges)

    def first_native_read(self) -> bool:
        """True once per step: pyarrow's own reads of a step's row groups, side by side,
        make one wave."""
        with self._lock:
            first, self.native_waved = not self.native_waved, True
            return first

    def holds_any(self, offset: int, length: int) -> bool:
        """Whether a fetch holds any byte of ``[offset, offset + length)``."""
        end = offset + length
        with self._lock:
            return any(s < end and offset < s + len(b)
                       for s, b in zip(self._starts, self._bufs, strict=True))

    def _unheld(self, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """The parts of ``ranges`` that no earlier fetch holds."""
        with self._lock:
            held = [(s, s + len(b)) for s, b in zip(self._starts, self._bufs, strict=True)]
        if not held:
            return list(ranges)
        out: list[tuple[int, int]] = []
        for off, n in ranges:
            pos, end = off, off + n
            for s, e in held:  # sorted by start
                if e <= pos or s >= end:
                    continue
                if s > pos:
                    out.append((pos, s - pos))
                pos = max(pos, e)
                if pos >= end:
                    break
            if pos < end:
                out.append((pos, end - pos))
        return out

    def _find(self, offset: int, length: int) -> bytes | None:
        view = self.view(offset, length)
        return None if view is None else bytes(view)

    def view(self, offset: int, length: int) -> memoryview | None:
        """The fetched bytes at ``offset`` without a copy, if one fetch holds them all."""
        with self._lock:
            i = bisect.bisect(self._starts, offset) - 1
            while i >= 0:
                s, b = self._starts[i], self._bufs[i]
                if s <= offset and offset + length <= s + len(b):
                    return memoryview(b)[offset - s : offset - s + length]
                if s + len(b) < offset:
                    break
                i -= 1
        return None

    def _covered(self, offset: int, length: int) -> bool:
        return self.view(offset, length) is not None

    def __call__(self, offset: int, length: int) -> bytes:
        b = self._find(offset, length)
        if b is None:
            b = self._assemble(offset, length)
        return b

    def _assemble(self, offset: int, length: int) -> bytes:
        """Bytes spanning adjacent fetches (a reader merged ranges we fetched apart);
        what no fetch holds comes from the file (the tail, else one more request)."""
        out: list[bytes | memoryview] = []
        pos, end = offset, offset + length
        while pos < end:
            with self._lock:
                i = bisect.bisect(self._starts, pos) - 1
                hit = None
                if i >= 0 and self._starts[i] + len(self._bufs[i]) > pos:
                    hit = (self._starts[i], self._bufs[i])
                nxt = self._starts[i + 1] if i + 1 < len(self._starts) else end
            if hit is None:
                # Only the gap up to the next fetch: what a fetch holds is not read again.
                stop = min(end, nxt)
                out.append(self.pf.read_bytes(pos, stop - pos))
                pos = stop
                continue
            s, b = hit
            stop = min(end, s + len(b))
            out.append(memoryview(b)[pos - s : stop - s])
            pos = stop
        return b"".join(out)


class SourceFile(SourceReader):
    """A file as a file object for pyarrow: reads go through ``ParquetFile.read_bytes``,
    so they are counted, and bytes already read (the tail) are not read again."""

    def __init__(self, pf: ParquetFile, buffers: Buffers | None = None) -> None:
        super().__init__(pf.source)
        self._buffers = buffers
        self._fetch: Callable[[int, int], bytes] = buffers or pf.read_bytes

    def read(self, size: int | None = -1) -> bytes | memoryview:
        # pyarrow wraps what read() returns without copying: hand it fetched bytes as is.
        n = self._size - self._pos if size is None or size < 0 else min(size,
                                                                         self._size - self._pos)
        if n <= 0:
            return b""
        data: bytes | memoryview | None = (
            self._buffers.view(self._pos, n) if self._buffers is not None else None
        )
        if data is None:
            data = self._fetch(self._pos, n)
        self._pos += n
        return data

    def readinto(self, b: Any) -> int:
        n = min(len(b), self._size - self._pos)
        if n <= 0:
            return 0
        data = self._fetch(self._pos, n)
        b[:n] = data
        self._pos += n
        return n


def arrow_metadata(pf: ParquetFile) -> pq.FileMetaData:
    """pyarrow's view of the footer we already read (no second footer read)."""
    md = pf.derived.get("arrow_metadata")
    if md is None:
        buf = b"PAR1" + pf.footer_bytes + struct.pack("<I", len(pf.footer_bytes)) + b"PAR1"
        md = pq.read_metadata(pa.BufferReader(buf))
        pf.derived["arrow_metadata"] = md
    return md


def stats_since(now: ScanStats, shown: ScanStats) -> ScanStats:
    """What ``now`` counts beyond ``shown`` (which is then brought up to ``now``): the
    costs of a file read in steps, handed on step by step."""
    delta = ScanStats(
        now.row_groups_read - shown.row_groups_read, now.pages_read - shown.pages_read,
        now.rows_out - shown.rows_out, now.fetch_seconds - shown.fetch_seconds,
        now.decode_seconds - shown.decode_seconds, now.data_bytes - shown.data_bytes,
        now.warnings[len(shown.warnings):])
    merge_stats(shown, delta)
    return delta


def merge_stats(into: ScanStats, st: ScanStats) -> None:
    """Add ``st``'s counts to ``into``."""
    into.row_groups_read += st.row_groups_read
    into.pages_read += st.pages_read
    into.rows_out += st.rows_out
    into.fetch_seconds += st.fetch_seconds
    into.decode_seconds += st.decode_seconds
    into.data_bytes += st.data_bytes
    into.warnings += st.warnings
