"""The compressed parts of several pages decompressed in one call where that is safe.

``pa.decompress`` sets up a fresh codec on every call: for zstd a decompression
context, ~17 µs, more than decompressing a 15 KB page whose blocks are stored raw.
A zstd decoder reads concatenated frames one after another into one output, so
the pages of a chunk are joined, decompressed together and the output cut at the
pages' uncompressed sizes. Only parts that are exactly one frame whose content
size is known, equal to the page header's, are joined: stated in the frame header
(zstd checks every frame's output against it) or given by its blocks when all are
stored raw or RLE, so a slice can only ever hold its own page's bytes. Frames of
writers that state no size (arrow-rs's streaming encoder) with compressed blocks
are decompressed one by one.
Other parts, and all parts of a batch whose call fails, are decompressed one by
one, so an error comes from the page that has it, as it did before batching.

Snappy parts are decompressed in one call of the optional C module ``_snappy``
(``decompress_many``: every part into one buffer, the GIL released once). Its
decoder is no faster per byte than cramjam's (measured 0.9-1.0x), but a call per
~15 µs page hands the GIL to another thread each time: summing the issue file's
``amount`` on two threads took 13 ms so, 9.7 ms batched. A part it finds malformed
is decompressed again on its own, which reports the error.

Other codecs are decompressed page by page: LZ4 raw blocks cannot be concatenated.
Arrow's gzip codec does read concatenated members, but its call costs ~3 µs against
~65 µs of inflating a 15 KB page (50 such pages: 3.19 ms joined, 3.36 ms one by
one), and a member's end is only known by inflating it: proving each slice its
page's would take a CRC32 per page (0.31 ms for those 50).

:func:`gather` takes a few fixed-width values out of a snappy part without
decompressing all of it (the optional C module ``_snappy``): one value of a
pyarrow-written 1 MiB dictionary page otherwise costs ~1.3 ms of decompression.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa

from pqindex.format.codec import CODECS, decompress
from pqindex.format.schema import Codec

__all__ = ["CODECS", "decompress", "decompress_many", "gather", "zstd_frame_content_size"]

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# Bytes of the frame content size field by its flag (flag 0: one byte only in a
# single-segment frame, else absent).
_FCS_BYTES = (0, 2, 4, 8)
# Output of one batched call at most: the batch is held decompressed at once.
BATCH_BYTES = 8 << 20
# gather writes every 64 KiB fragment holding a wanted value: past this share of the
# output, decompressing it whole costs about the same.
_GATHER_MAX_SHARE = 0.5


def _load_snappy() -> ModuleType | None:
    try:
        return importlib.import_module("pqindex.scan._snappy")
    except ImportError:  # built without a compiler: whole pages are decompressed
        return None


_snappy = _load_snappy()


def gather(
    data: bytes | memoryview, codec: int, size: int, offsets: np.ndarray, width: int
) -> bytes | None:
    """The ``width``-byte values at ``offsets`` (int64, ascending) of ``data``
    decompressed to ``size`` bytes, concatenated, decompressing only the 64 KiB
    fragments that hold them; None when that is not done here (the caller then
    decompresses the part whole, which reports any damage): another codec, no C
    module, values spread over much of the output, or a block it cannot serve."""
    if _snappy is None or codec != Codec.SNAPPY or not len(offsets) or width <= 0:
        return None
    # Bytes written: from each wanted fragment's start to its last wanted value's end.
    if len(offsets) == 1:  # the usual case, without numpy's per-call costs
        written = int(offsets[0]) % (1 << 16) + width
    else:
        frag = offsets >> 16
        last = np.append(frag[1:] != frag[:-1], True)
        written = int((offsets[last] + width - (frag[last] << 16)).sum())
    if written > size * _GATHER_MAX_SHARE:
        return None
    found: bytes | None = _snappy.gather(
        data, size, np.ascontiguousarray(offsets, dtype=np.int64), width)
    return found


def zstd_frame_content_size(data: bytes | memoryview) -> int | None:
    """The size ``data`` decompresses to when it is exactly one zstd frame (no
    dictionary) whose size is known without decompressing it: stated in its header
    (zstd checks the output against it), or, for a frame of raw and RLE blocks
    only (incompressible pages), the sum of its blocks' sizes. None otherwise."""
    n = len(data)
    if n < 6 or bytes(data[:4]) != _ZSTD_MAGIC:
        return None
    fhd = data[4]
    if fhd & 0x0B:  # reserved bit, or a dictionary id
        return None
    single = fhd & 0x20
    fcs_flag = fhd >> 6
    pos = 5 if single else 6  # the window descriptor, unless single-segment
    width = 1 if fcs_flag == 0 and single else _FCS_BYTES[fcs_flag]
    if pos + width > n:
        return None
    stated = (int.from_bytes(data[pos : pos + width], "little") + (256 if width == 2 else 0)
              if width else None)
    pos += width
    # The blocks: a 3-byte header each (last flag, type, size); an RLE block stores
    # one byte, raw and compressed blocks their size. Raw and RLE blocks hold
    # ``size`` bytes of content.
    content: int | None = 0
    while True:
        if pos + 3 > n:
            return None
        header = int.from_bytes(data[pos : pos + 3], "little")
        kind = (header >> 1) & 3
        size = header >> 3
        if kind == 3:
            return None
        if kind == 2:
            content = None
        elif content is not None:
            content += size
        pos += 3 + (1 if kind == 1 else size)
        if header & 1:
            break
    pos += 4 if fhd & 0x04 else 0  # content checksum
    if pos != n:
        return None
    return stated if stated is not None else content


def _joinable(codec: int, parts: Sequence[tuple[bytes | memoryview, int]]) -> list[int]:
    """Indices of the parts that may be decompressed in one call with the others."""
    if codec != Codec.ZSTD or len(parts) < 2:
        return []
    return [i for i, (data, size) in enumerate(parts)
            if size > 0 and zstd_frame_content_size(data) == size]


def decompress_many(codec: int, parts: Sequence[tuple[bytes | memoryview, int]]) -> list[Any]:
    """Each ``(compressed part, uncompressed size)`` decompressed (buffers): zstd
    frames in batches of up to :data:`BATCH_BYTES` of output, one call each; the
    rest one call per part. Errors are those of the failing part's own call."""
    out: list[Any] = [None] * len(parts)
    if codec == Codec.SNAPPY and len(parts) > 1 and _snappy is not None:
        _snappy_batch(parts, out)
    joined = _joinable(codec, parts)
    batch: list[int] = []
    total = 0
    for k, i in enumerate(joined):
        batch.append(i)
        total += parts[i][1]
        if total >= BATCH_BYTES or k == len(joined) - 1:
            if len(batch) > 1:
                _batch(parts, batch, total, out)
            batch, total = [], 0
    for i, (data, size) in enumerate(parts):
        if out[i] is None:
            out[i] = decompress(data, codec, size)
    return out


def _snappy_batch(parts: Sequence[tuple[bytes | memoryview, int]], out: list[Any]) -> None:
    """Snappy parts decompressed by the C module in one call (one release of the GIL
    where a call per part, ~15 µs of work each, hands it to another thread every
    time); a part it finds malformed is left to its own call, which reports it."""
    assert _snappy is not None
    buf = pa.allocate_buffer(sum(size for _, size in parts))
    view = memoryview(buf)
    pos = 0
    for i, ok in enumerate(_snappy.decompress_many(parts, view)):
        size = parts[i][1]
        if ok:
            out[i] = view[pos : pos + size]
        pos += size


def _batch(parts: Sequence[tuple[bytes | memoryview, int]], batch: list[int], total: int,
           out: list[Any]) -> None:
    try:
        buf = pa.decompress(b"".join(parts[i][0] for i in batch), decompressed_size=total,
                            codec="zstd", asbytes=False)
    except (pa.ArrowException, OSError, ValueError):
        return  # left to one call per part: the failing part raises its own error
    if buf.size != total:
        return
    view = memoryview(buf)
    pos = 0
    for i in batch:
        size = parts[i][1]
        out[i] = view[pos : pos + size]
        pos += size
