"""Probing large embedded "bloom" blobs block by block instead of reading them whole.

A "bloom" blob at least ``PROBE_MIN_BYTES`` long is looked up by reading its
header and, per value, the one 32-byte block the value's hash selects. Only its
header is checked then: the blob's XXH64 covers bytes the probe never reads, as
Parquet's own Bloom filters carry no checksum at all.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pqindex.errors import PqIndexError
from pqindex.format.bloom import BLOCK_BYTES, BloomProbe, block_index
from pqindex.format.schema import LeafColumn
from pqindex.format.structs import BloomFilterHeader
from pqindex.indexes.bloom_file import read_bloom_header
from pqindex.indexes.encoding import check_leaf_type
from pqindex.indexes.evidence import BloomEvidence
from pqindex.indexes.region_dir import BlobEntry

__all__ = ["PROBE_MIN_BYTES", "probe_blocks", "probe_evidence", "probe_header_length"]

PROBE_MIN_BYTES = 4096
_MAX_BLOOM_HEADER = 64  # version, value type and size: a few bytes


def probe_header_length(e: BlobEntry) -> int | None:
    """The header length of a "bloom" blob large enough to probe, its size property
    consistent; else None (read it whole)."""
    if e.kind != "bloom" or e.length < PROBE_MIN_BYTES:
        return None
    size = e.properties.get("bytes")
    if type(size) is not int or size % BLOCK_BYTES:
        return None
    hlen = e.length - size
    return hlen if 0 < hlen <= _MAX_BLOOM_HEADER else None


def probe_evidence(e: BlobEntry, hlen: int, leaf: LeafColumn, read: Callable[[int, int], bytes],
                   warnings: list[str], where: Callable[[], str],
                   checked: dict[tuple[bytes, int], int] | None = None) -> Any:
    """Evidence that reads the blob's header now and, per value looked up, the one
    block the value's hash selects (free when prefetched); None, with a warning,
    when the header is unusable. ``checked``: header bytes and blob length already
    found valid for ``leaf``, with their bitset size (a column's page filters share
    one header: parsed once)."""
    header = bytes(read(e.offset, hlen))
    size = checked.get((header, e.length)) if checked is not None else None
    if size is None:
        try:
            vt, size = read_bloom_header(header, e.column, e.length)
            check_leaf_type(leaf, vt, f"bloom blob for {e.column!r}")
        except (PqIndexError, ValueError, struct.error) as err:
            reason = err.reason if isinstance(err, PqIndexError) else str(err)
            warnings.append(f"embedded index: {where()} unusable: {reason}")
            return None
        if checked is not None:
            checked[(header, e.length)] = size
    return BloomEvidence(BloomProbe(BloomFilterHeader(numBytes=size), e.offset + hlen,
                                    size, read))


def probe_blocks(e: BlobEntry, hlen: int, base: int,
                 hashes: Iterable[int]) -> Sequence[tuple[int, int]]:
    """File ranges a lookup of ``hashes`` reads in the blob (region at ``base``)."""
    nblocks = (e.length - hlen) // BLOCK_BYTES
    start = base + e.offset + hlen
    blocks = {(start + block_index(h, nblocks) * BLOCK_BYTES, BLOCK_BYTES) for h in hashes}
    return [(base + e.offset, hlen), *sorted(blocks)]
