"""XXH64 (seed 0) of many short PLAIN values at once.

Bloom filters and HyperLogLog sketches hash the PLAIN bytes of every distinct
value. For fixed-width numbers (2, 4, 8 bytes) the hash is computed here on
numpy arrays, lane by lane as the XXH64 specification does for short inputs;
variable-length values go through the ``xxhash`` package one by one. Both give
exactly ``xxhash.xxh64_intdigest(plain, 0)`` (a test checks it).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from pqindex.format.bloom import xxhash64

__all__ = ["xxh64_bytes", "xxh64_fixed"]

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def xxh64_fixed(values: np.ndarray) -> np.ndarray:
    """XXH64 of each element's little-endian bytes; elements of 2, 4 or 8 bytes."""
    width = values.dtype.itemsize
    if width not in (2, 4, 8):
        raise ValueError(f"xxh64_fixed handles 2, 4 or 8-byte values, not {width}")
    flat = np.ascontiguousarray(values).reshape(-1)
    unsigned = flat.view(f"<u{width}").astype(np.uint64)
    h = np.full(unsigned.shape, _P5 + np.uint64(width), dtype=np.uint64)
    if width == 8:
        k1 = _rotl(unsigned * _P2, 31) * _P1
        h ^= k1
        h = _rotl(h, 27) * _P1 + _P4
    elif width == 4:
        h ^= unsigned * _P1
        h = _rotl(h, 23) * _P2 + _P3
    else:  # two trailing single bytes
        for byte in (unsigned & np.uint64(0xFF), unsigned >> np.uint64(8)):
            h ^= byte * _P5
            h = _rotl(h, 11) * _P1
    h ^= h >> np.uint64(33)
    h *= _P2
    h ^= h >> np.uint64(29)
    h *= _P3
    h ^= h >> np.uint64(32)
    return h


def xxh64_bytes(values: Iterable[bytes]) -> np.ndarray:
    """XXH64 of each bytes value (variable length), as a uint64 array."""
    return np.fromiter((xxhash64(v) for v in values), dtype=np.uint64)
