"""Split-block Bloom filters (the Parquet spec's SBBF): header, bitset, lookups."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import xxhash

from pqindex.format.structs import BloomFilterHeader

__all__ = [
    "BLOCK_BYTES",
    "MAX_BLOOM_BYTES",
    "BloomFilter",
    "BloomProbe",
    "block_index",
    "plain_bytes",
    "xxhash64",
]

BLOCK_BYTES = 32
# parquet-java and arrow cap a filter at 128 MiB; anything larger is a damaged length.
MAX_BLOOM_BYTES = 128 * 1024 * 1024

_SALT = np.array(
    [
        0x47B6137B,
        0x44974D91,
        0x8824AD5B,
        0xA2B7289D,
        0x705495C7,
        0x2DF1424B,
        0x9EFC4947,
        0x5C6BFB31,
    ],
    dtype=np.uint32,
)
_SALT_INTS = [int(s) for s in _SALT]
_SALT_U32 = np.array(_SALT_INTS, dtype=np.uint32)


def xxhash64(data: bytes) -> int:
    """The hash Parquet Bloom filters use: XXH64 with seed 0."""
    return xxhash.xxh64_intdigest(data, 0)


_PACK = {
    "int32": struct.Struct("<i"),
    "int64": struct.Struct("<q"),
    "uint32": struct.Struct("<I"),
    "uint64": struct.Struct("<Q"),
    "float": struct.Struct("<f"),
    "double": struct.Struct("<d"),
}


def plain_bytes(value: object, physical: str) -> bytes:
    """The PLAIN encoding of one value, as hashed into a Bloom filter.

    ``physical`` is one of int32, int64, uint32, uint64 (stored as int32/int64),
    float, double, bytes (BYTE_ARRAY / FIXED_LEN_BYTE_ARRAY, no length prefix).
    """
    if physical == "bytes":
        if isinstance(value, str):
            return value.encode("utf-8")
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise TypeError(f"expected str or bytes, got {type(value).__name__}")
    packer = _PACK[physical]
    return packer.pack(value)


def block_index(h: int, num_blocks: int) -> int:
    """The block a hash selects: the top 32 bits scaled to the number of blocks."""
    return ((h >> 32) * num_blocks) >> 32


def _block_has(block: bytes | memoryview, h: int, base: int = 0) -> bool:
    key = h & 0xFFFFFFFF
    for i in range(8):
        bit = ((key * _SALT_INTS[i]) & 0xFFFFFFFF) >> 27
        word = int.from_bytes(block[base + 4 * i : base + 4 * i + 4], "little")
        if not (word >> bit) & 1:
            return False
    return True


@dataclass(frozen=True)
class BloomProbe:
    """A split-block Bloom filter looked up one 32-byte block at a time.

    A lookup reads only the block its hash selects (``read(offset, 32)``), so a
    probe costs the header and one block per value, not the whole bitset.
    """

    header: BloomFilterHeader
    bitset_offset: int  # absolute file offset of the first block
    num_bytes: int
    read: Callable[[int, int], bytes]

    @property
    def num_blocks(self) -> int:
        return self.num_bytes // BLOCK_BYTES

    def block_range(self, h: int) -> tuple[int, int]:
        """``(offset, length)`` in the file of the block hash ``h`` selects."""
        return self.bitset_offset + block_index(h, self.num_blocks) * BLOCK_BYTES, BLOCK_BYTES

    def might_contain_hash(self, h: int) -> bool:
        """False only when the value whose hash is ``h`` is certainly absent."""
        if self.num_blocks == 0:
            return True
        return _block_has(self.read(*self.block_range(h)), h)

    def might_contain(self, plain: bytes) -> bool:
        """False only when the value whose PLAIN encoding is ``plain`` is certainly absent."""
        return self.might_contain_hash(xxhash64(plain))


@dataclass(frozen=True)
class BloomFilter:
    """A split-block Bloom filter's bitset, as 32-byte blocks of eight 32-bit words."""

    header: BloomFilterHeader
    bitset: bytes

    @property
    def num_blocks(self) -> int:
        return len(self.bitset) // BLOCK_BYTES

    def _words(self) -> np.ndarray:
        return np.frombuffer(self.bitset, dtype="<u4").reshape(-1, 8)

    def might_contain_hash(self, h: int) -> bool:
        """False only when the value whose hash is ``h`` is certainly absent."""
        nb = self.num_blocks
        if nb == 0:
            return True
        return _block_has(self.bitset, h, block_index(h, nb) * BLOCK_BYTES)

    def might_contain(self, plain: bytes) -> bool:
        """False only when the value whose PLAIN encoding is ``plain`` is certainly absent."""
        return self.might_contain_hash(xxhash64(plain))

    def might_contain_any(self, hashes: np.ndarray) -> bool:
        """``any(might_contain_hash(h) for h in hashes)`` for a uint64 array, in numpy
        (a 100,000-value IN list: one pass, not 100,000 block lookups in Python)."""
        nb = self.num_blocks
        if nb == 0 or hashes.size == 0:
            return nb == 0 and hashes.size > 0
        all_words = self._words()
        for i in range(0, hashes.size, 1 << 16):  # bounded temporaries; stop at a hit
            h = hashes[i:i + (1 << 16)].astype(np.uint64, copy=False)
            block = ((h >> np.uint64(32)) * np.uint64(nb)) >> np.uint64(32)
            key = (h & np.uint64(0xFFFFFFFF)).astype(np.uint32)
            words = all_words[block.astype(np.intp)]  # (n, 8)
            bits = (key[:, None] * _SALT_U32[None, :]) >> np.uint32(27)  # wraps mod 2**32
            if ((words >> bits) & np.uint32(1)).all(axis=1).any():
                return True
        return False

    @staticmethod
    def empty(num_bytes: int) -> bytearray:
        """A zeroed bitset of ``num_bytes`` rounded up to whole blocks."""
        n = max(BLOCK_BYTES, (num_bytes + BLOCK_BYTES - 1) // BLOCK_BYTES * BLOCK_BYTES)
        return bytearray(n)

    @staticmethod
    def insert_hash(bitset: bytearray, h: int) -> None:
        """Set the bits for hash ``h`` in a writable bitset."""
        nb = len(bitset) // BLOCK_BYTES
        block = ((h >> 32) * nb) >> 32
        key = h & 0xFFFFFFFF
        base = block * BLOCK_BYTES
        for i in range(8):
            bit = ((key * _SALT_INTS[i]) & 0xFFFFFFFF) >> 27
            off = base + 4 * i
            word = int.from_bytes(bitset[off : off + 4], "little") | (1 << bit)
            bitset[off : off + 4] = word.to_bytes(4, "little")
