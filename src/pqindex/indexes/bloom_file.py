"""Kind "bloom": one split-block Bloom filter per column for the whole file.

Parquet's own Bloom filters live per column chunk, so a point lookup over a
file of many row groups reads one filter per row group; this blob answers the
file-level question with a single filter. The filter is the Parquet spec's
split-block Bloom filter with the same hash (XXH64, seed 0, of the value's PLAIN
bytes), so ``format.bloom.BloomFilter`` and ``plan.evidence.BloomEvidence`` read
it unchanged. It only ever answers NONE (for ``=`` and ``IN``) or SOME.

Sizing follows parquet-java: ``-8 * ndv / ln(1 - fpp ** (1/8))`` bits, between
32 bytes and ``max_bytes`` (default 1 MiB, parquet-java's default cap), but
rounded up to whole 32-byte blocks rather than a power of two (the block index
is a multiply-shift, right for any block count): a row group of 500k distinct
values needs 605 KB, not 1 MiB, which per-row-group and per-page filters
multiply. ``ndv`` is the number of distinct PLAIN values
(counted exactly while building); option ``fpp`` defaults to 0.01.

Body (version 1)::

    u8   body version = 1
    ..   value type (``encoding.write_value_type``)
    u32  bitset bytes b (a multiple of 32)
    b    bitset: blocks of eight little-endian u32 words
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from pqindex.errors import UserInputError
from pqindex.format.bloom import BLOCK_BYTES, MAX_BLOOM_BYTES, BloomFilter
from pqindex.format.schema import LeafColumn
from pqindex.format.structs import BloomFilterHeader
from pqindex.format.value_type import Kind, ValueType
from pqindex.indexes.base import Blob, Scope, register
from pqindex.indexes.encoding import (
    BodyReader,
    BodyWriter,
    RegionError,
    check_leaf_type,
    read_value_type,
    write_value_type,
)
from pqindex.indexes.evidence import BloomEvidence
from pqindex.indexes.leaf_values import indexable, unit_hashes
from pqindex.indexes.units import scopes_option, units

__all__ = [
    "BloomFileKind",
    "bloom_bytes",
    "build_bitset",
    "read_bloom",
    "read_bloom_header",
    "unique_count",
]

DEFAULT_FPP = 0.01
DEFAULT_MAX_BYTES = 1024 * 1024
_VERSION = 1
_BATCH = 1 << 16
_SALT = np.array([0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D, 0x705495C7, 0x2DF1424B,
                  0x9EFC4947, 0x5C6BFB31], dtype=np.uint64)
_SALT32 = _SALT.astype(np.uint32)
_SUPPORTED = frozenset({Kind.INT, Kind.UINT, Kind.FLOAT, Kind.DOUBLE, Kind.FLOAT16,
                        Kind.DECIMAL, Kind.DATE, Kind.TIME, Kind.TIMESTAMP, Kind.STRING,
                        Kind.BINARY, Kind.UUID})


def bloom_bytes(ndv: int, fpp: float, max_bytes: int = DEFAULT_MAX_BYTES) -> int:
    """Bitset size for ``ndv`` distinct values at false-positive rate ``fpp``."""
    if not 0.0 < fpp < 1.0:
        raise UserInputError(f"fpp must be between 0 and 1, not {fpp}")
    bits = -8.0 * max(ndv, 1) / math.log(1.0 - fpp ** (1.0 / 8.0))
    want = max(BLOCK_BYTES, math.ceil(bits / 8))
    size = -(-want // BLOCK_BYTES) * BLOCK_BYTES  # whole blocks
    cap = max(BLOCK_BYTES, min(max_bytes, MAX_BLOOM_BYTES) // BLOCK_BYTES * BLOCK_BYTES)
    return min(size, cap)


def build_bitset(hashes: np.ndarray, num_bytes: int) -> bytes:
    """The split-block bitset with every hash inserted (vectorized ``insert_hash``).

    Each hash sets one bit in each of the eight 32-bit words of its block; the
    bits are set in a boolean array (one entry per bitset bit, little-endian word
    order) that ``np.packbits`` turns into the bitset's bytes.
    """
    nb = num_bytes // BLOCK_BYTES
    bits = np.zeros(num_bytes * 8, dtype=np.bool_)
    all_hashes = hashes.astype(np.uint64, copy=False)
    for i in range(0, len(all_hashes), _BATCH):  # bounded temporaries
        h = all_hashes[i : i + _BATCH]
        block = (((h >> np.uint64(32)) * np.uint64(nb)) >> np.uint64(32)).astype(np.int64)
        key = (h & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        base = block * (BLOCK_BYTES * 8)
        for j in range(8):
            bit = ((key * _SALT32[j]) >> np.uint32(27)).astype(np.int64)  # wraps mod 2**32
            bits[base + (32 * j) + bit] = True
    return np.packbits(bits, bitorder="little").tobytes()


def unique_count(hashes: np.ndarray) -> tuple[np.ndarray, int]:
    """The distinct hashes (sorted) and their number; a sort is far faster than a hash set."""
    s = np.sort(hashes.astype(np.uint64, copy=False))
    if s.size == 0:
        return s, 0
    keep = np.empty(s.size, dtype=np.bool_)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    u = s[keep]
    return u, int(u.size)


def read_bloom(blob: Blob) -> tuple[ValueType, BloomFilter]:
    """Decode a "bloom" blob; RegionError when it is malformed."""
    r = BodyReader(blob.data, f"bloom blob for {blob.column!r}")
    vt, size = _header(r)
    if size != r.remaining:
        raise RegionError(f"{r.what}: bitset of {size} bytes with {r.remaining} in the body")
    bitset = r.raw(size)
    return vt, BloomFilter(BloomFilterHeader(numBytes=size), bitset)


def _header(r: BodyReader) -> tuple[ValueType, int]:
    r.version(_VERSION)
    vt = read_value_type(r)
    size = r.u32()
    if size == 0 or size % BLOCK_BYTES or size > MAX_BLOOM_BYTES:
        raise RegionError(f"{r.what}: bitset of {size} bytes")
    return vt, size


def read_bloom_header(data: bytes, column: str, body_length: int) -> tuple[ValueType, int]:
    """Value type and bitset size from the first bytes of a "bloom" blob of
    ``body_length`` bytes: ``data`` must be exactly what precedes the bitset
    (a probe reads it and the blocks it needs, never the whole blob)."""
    r = BodyReader(data, f"bloom blob for {column!r}")
    vt, size = _header(r)
    if r.remaining or len(data) + size != body_length:
        raise RegionError(f"{r.what}: a {len(data)}-byte header and a bitset of {size} "
                          f"bytes in a {body_length}-byte body")
    return vt, size


@register
class BloomFileKind:
    """A file-level split-block Bloom filter per column (``fpp``, ``max_bytes`` options)."""

    name: ClassVar[str] = "bloom"

    def build(
        self,
        leaf: LeafColumn,
        column: pa.Array,
        row_group_bounds: list[tuple[int, int]],
        page_bounds: list[list[tuple[int, int]]] | None,
        options: Mapping[str, Any],
    ) -> list[Blob]:
        found = indexable(leaf, column, _SUPPORTED)
        if found is None:
            return []
        vt, stored = found
        fpp = float(options.get("fpp", DEFAULT_FPP))
        max_bytes = int(options.get("max_bytes", DEFAULT_MAX_BYTES))
        scopes = scopes_option(options, (Scope.FILE,))
        blobs = []
        for u in units(len(stored), row_group_bounds, page_bounds, scopes):
            hashes = unit_hashes(vt, stored, u.start, u.rows)
            if hashes is None:
                return []
            hashes, ndv = unique_count(hashes)
            size = bloom_bytes(ndv, fpp, max_bytes)
            w = BodyWriter()
            w.u8(_VERSION)
            write_value_type(w, vt)
            w.u32(size)
            w.raw(build_bitset(hashes, size))
            props = {"ndv": len(hashes), "fpp": fpp, "bytes": size}
            blobs.append(Blob(self.name, leaf.name, u.scope, u.row_group, u.page,
                              w.getvalue(), props))
        return blobs

    def evidence(self, leaf: LeafColumn, blob: Blob) -> BloomEvidence:
        vt, bloom = read_bloom(blob)
        check_leaf_type(leaf, vt, f"bloom blob for {blob.column!r}")
        return BloomEvidence(bloom)
