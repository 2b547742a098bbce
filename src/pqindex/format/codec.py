"""A page's compressed part decompressed, its size checked: the one decompressor of
single parts, for the planner's dictionary pages and the scan's numpy paths alike.

``pa.decompress`` hands back a buffer of the size asked for even when the data holds
fewer bytes (snappy, gzip, brotli, LZ4: the rest never written), so a page header
overstating its size would be read past its data. cramjam's decoders say how many
bytes they wrote; a count other than the header's is an ``ArrowInvalid``. cramjam's
snappy (Rust's snap) is also 1.5x as fast as the one pyarrow's wheels bundle
(int64/float64 pages, 1 MiB dictionary pages: 112-883 µs against 170-1,321 µs
here); gzip and LZ4 measured the same, brotli 1.4x slower (a rare codec: the check
is worth it). zstd checks the size itself: pyarrow's. What cramjam refuses, pyarrow
decodes and reports.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from pqindex.format.schema import Codec

__all__ = ["CODECS", "decompress"]

CODECS = {
    Codec.SNAPPY: "snappy",
    Codec.GZIP: "gzip",
    Codec.BROTLI: "brotli",
    Codec.ZSTD: "zstd",
    Codec.LZ4_RAW: "lz4_raw",
}


def _load_into() -> dict[int, Any]:
    try:
        import cramjam
    except ImportError:  # a dependency, but only an accelerator: pyarrow decompresses
        return {}
    found = {
        Codec.SNAPPY: getattr(getattr(cramjam, "snappy", None), "decompress_raw_into", None),
        Codec.GZIP: getattr(getattr(cramjam, "gzip", None), "decompress_into", None),
        Codec.BROTLI: getattr(getattr(cramjam, "brotli", None), "decompress_into", None),
        Codec.LZ4_RAW: getattr(getattr(cramjam, "lz4", None), "decompress_block_into", None),
    }
    return {int(k): f for k, f in found.items() if f is not None}


# Decoders that say how many bytes they wrote, by codec.
_into = _load_into()


def decompress(data: bytes | memoryview, codec: int, size: int) -> Any:
    """One page's compressed part, decompressed to ``size`` bytes (a buffer); an
    ``ArrowInvalid`` when it holds another number of bytes."""
    if codec == Codec.UNCOMPRESSED:
        return data
    into = _into.get(codec)
    if into is not None and size >= 0:
        out = np.empty(size, dtype=np.uint8)
        try:
            done = into(data, out)
        except Exception:  # cramjam.DecompressionError: pyarrow's decoder reports it
            done = -1
        if done == size:
            return out.data
        if done >= 0:
            raise pa.ArrowInvalid(
                f"page part decompresses to {done} bytes, the page header says {size}")
    return pa.decompress(data, decompressed_size=size, codec=CODECS[Codec(codec)],
                         asbytes=False)
