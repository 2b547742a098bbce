"""Page checksums: the CRC32 a writer may store in a page header, checked.

``PageHeader.crc`` (parquet.thrift) is the standard CRC-32 (gzip's polynomial,
``zlib.crc32``) of the page as stored, header excluded: the
``compressed_page_size`` bytes after the header. For a dictionary page and a v1
data page that is the (compressed) levels and values; for a v2 data page the
repetition and definition levels, stored uncompressed, then the (compressed)
values. It is an i32 on the wire, so a CRC of 2**31 or more is stored negative.
A page without the field is not checked. parquet-java writes it by default,
pyarrow with ``write_page_checksum=True`` (pqindex's writer does).

:class:`PageChecks` checks pages as a scan gets their bytes: every page whose
header and body lie in a range read from a page boundary, once per page.
"""

from __future__ import annotations

import bisect
import threading
import zlib
from collections.abc import Callable, Sequence

from pqindex.errors import CorruptFileError
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.format.pages import header_at
from pqindex.format.schema import PageType
from pqindex.format.structs import PageHeader

__all__ = ["PageChecks", "check_chunks", "check_page", "page_crc", "page_kind"]


def page_crc(body: bytes | memoryview) -> int:
    """The CRC32 of a page's stored bytes as ``PageHeader.crc`` holds it (a signed i32)."""
    crc = zlib.crc32(body)
    return crc - (1 << 32) if crc >= 1 << 31 else crc


def page_kind(ph: PageHeader) -> str:
    """The page's type in words, for messages."""
    kinds: dict[int | None, str] = {
        PageType.DICTIONARY_PAGE: "dictionary page", PageType.DATA_PAGE: "data page (v1)",
        PageType.DATA_PAGE_V2: "data page (v2)", PageType.INDEX_PAGE: "index page"}
    return kinds.get(ph.type, f"page of type {ph.type}")


def check_page(path: str, rg: int, column: str | None, offset: int, ph: PageHeader,
               body: bytes | memoryview) -> bool:
    """Raise a CorruptFileError when the page at ``offset`` (its header's start) has a
    CRC that ``body`` does not match; whether it had one to check."""
    if ph.crc is None:
        return False
    crc = page_crc(body)
    if crc != ph.crc:
        raise CorruptFileError(
            f"page checksum mismatch in the {page_kind(ph)}: the header says CRC32 "
            f"{ph.crc & 0xFFFFFFFF:#010x}, its {len(body)} bytes give {crc & 0xFFFFFFFF:#010x}",
            path=path, row_group=rg, column=column, offset=offset)
    return True


class PageChecks:
    """Checks the CRCs of one row group's pages as their bytes are read (a scan with
    ``verify_checksums``): each page once, however many paths read it."""

    def __init__(self, pf: ParquetFile, rg: int) -> None:
        self.pf = pf
        self.rg = rg
        self.checked = 0  # pages whose CRC matched
        self._done: set[int] = set()  # header offsets of pages looked at
        self._lock = threading.Lock()
        spans = sorted((*chunk_range(pf.column_meta(rg, c.index)), c.index)
                       for c in pf.schema.leaves)
        self._starts = [s for s, _, _ in spans]
        self._spans = spans

    def _column(self, offset: int) -> str | None:
        i = bisect.bisect_right(self._starts, offset) - 1
        if i >= 0:
            start, length, col = self._spans[i]
            if offset < start + length:
                return self.pf.leaf(col).name
        return None

    def pages(self, offset: int, raw: bytes | memoryview) -> None:
        """Check the pages ``raw`` holds whole, ``raw`` being the file's bytes from
        ``offset``, a page boundary (a chunk's start, an offset index entry). A page
        that runs past ``raw``'s end is left to the read that holds it whole."""
        pos = 0
        while pos < len(raw):
            found = header_at(raw, pos)
            if found is None:
                return
            ph, body = found
            end = body + (ph.compressed_page_size or 0)
            if (ph.compressed_page_size or 0) < 0 or end > len(raw):
                return  # cut here (or a damaged size: the decoders name it)
            at = offset + pos
            with self._lock:
                seen = at in self._done
                self._done.add(at)
            if not seen and check_page(self.pf.path, self.rg, self._column(at), at, ph,
                                       raw[body:end]):
                with self._lock:
                    self.checked += 1
            pos = end

    def chunk(self, col: int, read: Callable[[int, int], bytes | memoryview] | None = None
              ) -> None:
        """Check every page of leaf ``col``'s chunk, read whole (``read(offset, length)``;
        by default through the file)."""
        start, length = chunk_range(self.pf.column_meta(self.rg, col))
        self.pages(start, (read or self.pf.read_bytes)(start, length))


def check_chunks(pf: ParquetFile, rgs: Sequence[int], fields: Sequence[str],
                 read: Callable[[int, int], bytes | memoryview] | None = None) -> None:
    """Check every page of the row groups' chunks of top-level ``fields`` (read whole,
    by ``read`` or through the file), before a reader decodes them."""
    leaves = [c.index for c in pf.schema.leaves if c.path[0] in fields]
    for rg in rgs:
        checks = PageChecks(pf, rg)
        for col in leaves:
            checks.chunk(col, read)
