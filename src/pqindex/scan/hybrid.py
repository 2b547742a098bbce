"""The RLE / bit-packed hybrid encoding of Parquet levels and dictionary indices,
decoded and searched (see :mod:`pqindex.scan.encoded`).

The optional C kernel ``pqindex.scan._hybrid`` does the work when it was built:
one pass over the runs, the GIL released (row groups on a thread pool decode in
parallel), buffers read in place. Without it (no compiler, or
``PQINDEX_PURE_PYTHON=1`` at import) the numpy code below runs; it is also the
reference the C kernel is tested against: both accept and reject the same
streams with the same ValueError messages.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from pqindex.indexes.leaf_values import exact_int_sum

__all__ = [
    "accelerated",
    "decode_hybrid",
    "decode_hybrid_at",
    "decode_levels",
    "dictionary_sum",
    "find_hybrid",
    "find_many",
    "find_table",
]

# A bytes-like stream: bytes, a memoryview, a contiguous uint8 array.
Buffer = bytes | memoryview | np.ndarray

# Largest wanted-value table find_many builds for the C kernel (1 byte a value);
# ids past it are searched by the numpy code.
_MAX_TABLE = 1 << 24
_INTP = np.dtype(np.intp)


def _load() -> Any:
    if os.environ.get("PQINDEX_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("pqindex.scan._hybrid")
    except ImportError:
        return None


_c: Any = _load()


def accelerated() -> bool:
    """Whether the C kernel is in use."""
    return _c is not None


def _unpack(packed: bytes | np.ndarray, width: int) -> np.ndarray:
    """Values of concatenated bit-packed 8-value groups of ``width`` bits (LSB first),
    as intp (ready to index with)."""
    raw = np.frombuffer(packed, dtype=np.uint8) if isinstance(packed, bytes) else packed
    groups = raw.size // width
    if not groups:
        return np.zeros(0, dtype=np.intp)
    # Each group padded so that an 8-byte read at any value's first byte stays inside it.
    stride = width + 8
    padded = np.zeros((groups, stride), dtype=np.uint8)
    padded[:, :width] = raw[: groups * width].reshape(groups, width)
    out = np.empty((groups, 8), dtype=np.intp)
    mask = np.uint64((1 << width) - 1)
    for i in range(8):
        bit = i * width
        window = np.ndarray(
            (groups,), dtype="<u8", buffer=padded, offset=bit >> 3, strides=(stride,)
        )
        out[:, i] = (window >> np.uint64(bit & 7)) & mask
    return out.reshape(-1)


def _varint(data: Buffer, pos: int, end: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= end or shift > 35:
            raise ValueError("run header runs past the data")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


@dataclasses.dataclass
class _Runs:
    """The runs of a hybrid-encoded stream, in output order."""

    packed: list[np.ndarray]  # bit-packed runs' bytes
    kinds: list[bool]  # bit-packed (True) or RLE
    lengths: list[int]  # values each run gives
    sources: list[int]  # bit-packed: first value among the unpacked ones; RLE: the value


def _runs(data: Buffer, pos: int, end: int, width: int, count: int) -> _Runs:
    if not 1 <= width <= 32:
        raise ValueError(f"bit width {width}")
    value_bytes = (width + 7) // 8
    arr: np.ndarray | None = None
    packed: list[np.ndarray] = []
    # Segments in output order: bit-packed or not, how many values, and where its
    # values start among the unpacked ones (bit-packed) or its value (RLE).
    kinds: list[bool] = []
    lengths: list[int] = []
    sources: list[int] = []
    done = 0
    unpacked = 0
    while done < count:
        if pos >= end:
            raise ValueError(f"runs end after {done} of {count} values")
        header, body = _varint(data, pos, end)
        if header & 1:
            groups = header >> 1
            size = groups * width
            run = body - pos + size
            if arr is None:
                arr = np.frombuffer(data, dtype=np.uint8)
            # Writers repeat full-size literal runs: take every run that follows with
            # the same header in one step instead of one loop turn each.
            k = 1
            left = count - done
            if 0 < groups * 8 < left:  # (an empty run is one step)
                most = min((end - pos) // run, -(-left // (groups * 8)))
                if most > 1:
                    heads = arr[pos : pos + most * run].reshape(most, run)[:, : body - pos]
                    same = np.all(heads == arr[pos:body], axis=1)
                    k = most if bool(same.all()) else int(np.argmin(same))
            if pos + k * run <= end:
                block = arr[pos : pos + k * run].reshape(k, run)[:, body - pos :].reshape(-1)
            else:
                # The last run may stop at the last value it needs; only the groups
                # holding values wanted are kept (its header may claim any size).
                need = (min(groups * 8, left) * width + 7) // 8
                if body + need > end:
                    raise ValueError("bit-packed run runs past the data")
                groups = -(-min(groups * 8, left) // 8)
                block = np.zeros(groups * width, dtype=np.uint8)
                kept = min(end - body, block.size)
                block[:kept] = arr[body : body + kept]
            n = k * groups * 8
            take = min(n, left)
            packed.append(block)
            kinds.append(True)
            lengths.append(take)
            sources.append(unpacked)
            unpacked += n
            done += take
            pos += k * run
        else:
            n = header >> 1
            pos = body
            if pos + value_bytes > end:
                raise ValueError("RLE run value runs past the data")
            value = int.from_bytes(data[pos : pos + value_bytes], "little")
            pos += value_bytes
            if value >> width:
                raise ValueError(f"RLE value {value} wider than {width} bits")
            take = min(n, count - done)
            kinds.append(False)
            lengths.append(take)
            sources.append(value)
            done += take
    return _Runs(packed, kinds, lengths, sources)


def _int64s(raw: bytearray) -> np.ndarray:
    """The C kernel's native int64 output as intp (no copy where they are the same)."""
    out = np.frombuffer(raw, dtype=np.int64)
    return out if _INTP.itemsize == 8 else out.astype(np.intp)


def decode_hybrid(data: Buffer, pos: int, end: int, width: int, count: int) -> np.ndarray:
    """``count`` values of the RLE / bit-packed hybrid encoding in ``data[pos:end]``.

    Returns intp values. Raises ValueError when the runs end before ``count``
    values or a value does not fit ``width`` bits.
    """
    if width == 0 and count >= 0:
        return np.zeros(count, dtype=np.intp)
    if _c is not None:
        return _int64s(_c.decode(data, pos, end, width, count, 8))
    return _decode_np(data, pos, end, width, count)


def decode_levels(data: Buffer, pos: int, end: int, count: int) -> np.ndarray:
    """``count`` definition levels of bit width 1 (max level 1) as booleans (True:
    a value is present). Raises ValueError like :func:`decode_hybrid`."""
    if _c is not None:
        return np.frombuffer(_c.decode(data, pos, end, 1, count, 1), dtype=np.bool_)
    return _decode_np(data, pos, end, 1, count).astype(np.bool_)


def _decode_np(data: Buffer, pos: int, end: int, width: int, count: int) -> np.ndarray:
    """:func:`decode_hybrid` with numpy."""
    if width == 0 and count >= 0:
        return np.zeros(count, dtype=np.intp)
    r = _runs(data, pos, end, width, count)
    packed, kinds, lengths, sources = r.packed, r.kinds, r.lengths, r.sources
    if len(kinds) == 1 and not kinds[0]:
        return np.full(count, sources[0], dtype=np.intp)
    values = (
        _unpack(packed[0] if len(packed) == 1 else np.concatenate(packed), width)
        if packed else np.zeros(0, dtype=np.intp)
    )
    if all(kinds):
        return values[:count]
    # Mixed runs: one gather from the unpacked values followed by the RLE values.
    is_bp = np.array(kinds, dtype=np.bool_)
    lens = np.array(lengths, dtype=np.intp)
    src = np.array(sources, dtype=np.intp)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    rle_at = values.size + np.cumsum(~is_bp) - 1
    base = np.where(is_bp, src - starts, rle_at)
    step = np.repeat(is_bp, lens)
    idx = np.repeat(base, lens) + np.arange(count, dtype=np.intp) * step
    return np.concatenate((values, src[~is_bp]))[idx]


def decode_hybrid_at(
    data: Buffer, pos: int, end: int, width: int, count: int, at: np.ndarray
) -> np.ndarray:
    """The values at the sorted positions ``at`` (all < ``count``) of the stream
    :func:`decode_hybrid` decodes, without unpacking the others: a few rows of a
    page cost a run walk and one 8-byte read each. Same errors (and ValueError for
    positions out of order or range)."""
    if _c is not None and width != 0:
        return _int64s(_c.decode_at(data, pos, end, width, count,
                                    np.ascontiguousarray(at, dtype=np.int64)))
    return _decode_at_np(data, pos, end, width, count, at)


def _decode_at_np(
    data: Buffer, pos: int, end: int, width: int, count: int, at: np.ndarray
) -> np.ndarray:
    """:func:`decode_hybrid_at` with numpy."""
    at = np.asarray(at, dtype=np.intp)
    if width == 0 and count >= 0:
        return np.zeros(at.size, dtype=np.intp)
    r = _runs(data, pos, end, width, count)
    is_bp = np.array(r.kinds, dtype=np.bool_)
    lens = np.array(r.lengths, dtype=np.intp)
    src = np.array(r.sources, dtype=np.intp)
    ends = np.cumsum(lens)
    run = np.searchsorted(ends, at, side="right")
    out = src[run].copy()  # RLE runs: their value
    bp = is_bp[run]
    if bp.any():
        packed = np.concatenate([*r.packed, np.zeros(8, dtype=np.uint8)])
        k = run[bp]
        # Index among the unpacked values (a run's source is its first one there).
        v = src[k] + at[bp] - (ends[k] - lens[k])
        bit = v * width
        first = bit >> 3
        window = np.zeros(first.size, dtype=np.uint64)
        for b in range(8):
            window |= packed[first + b].astype(np.uint64) << np.uint64(8 * b)
        shift = (bit & 7).astype(np.uint64)
        out[bp] = ((window >> shift) & np.uint64((1 << width) - 1)).astype(np.intp)
    return out


# Dictionary types dictionary_sum sums, by numpy kind and size: the C kernel's name for
# each (floats summed in double precision, integers exactly).
_SUM_KINDS = {("f", 8): "d", ("f", 4): "f", ("i", 8): "q", ("i", 4): "i", ("u", 8): "Q",
              ("u", 4): "I"}


def dictionary_sum(
    streams: Sequence[tuple[Buffer, int, int, int, int]], dictionary: np.ndarray
) -> int | float:
    """The sum of ``dictionary[v]`` over the values v of every stream ``(data, pos,
    end, width, count)`` (as :func:`decode_hybrid` takes them), without an array of
    them: the C kernel adds each chunk of values as it unpacks it, all the streams in
    one call. Floats are summed in double precision (NaN and infinities as IEEE adds
    them), integers exactly. Raises ValueError like :func:`decode_hybrid`, and for a
    value not below ``len(dictionary)``."""
    dt = dictionary.dtype
    kind = _SUM_KINDS.get((dt.kind, dt.itemsize))
    if kind is None or not dt.isnative:
        raise ValueError(f"dictionary of {dt} values")
    if _c is not None and hasattr(_c, "dict_sum") and all(s[3] for s in streams):
        total: int | float = _c.dict_sum(streams, np.ascontiguousarray(dictionary), kind)
        return total
    parts: list[Any] = []
    for data, pos, end, width, count in streams:
        idx = decode_hybrid(data, pos, end, width, count)
        if idx.size and int(idx.max()) >= dictionary.size:
            raise ValueError(f"value {int(idx.max())} not below {dictionary.size}")
        values = dictionary[idx]
        parts.append(float(values.sum(dtype=np.float64)) if dt.kind == "f"
                     else exact_int_sum(values))
    out: int | float = sum(parts)
    return out


@functools.cache
def _swar_masks(width: int) -> tuple[int, int, int]:
    """For 8 fields of ``width`` bits: all their bits, each one's low bits, its top bit."""
    fields = (1 << (8 * width)) - 1
    low = sum(((1 << (width - 1)) - 1) << (i * width) for i in range(8))
    top = sum(1 << (i * width + width - 1) for i in range(8))
    return fields, low, top


def _swar_hits(packed: np.ndarray, width: int, ids: np.ndarray, *, padded: bool = False
               ) -> np.ndarray:
    """Positions, among the values of concatenated 8-value groups of ``width`` <= 8 bits,
    of the values in ``ids``: each group read as one 64-bit word and compared with
    every id at once (a field is zero after XOR exactly where the value matches).
    ``padded``: ``packed`` already ends with 8 bytes past its last whole group."""
    groups = (packed.size - 8 if padded else packed.size) // width
    if padded:
        buf = packed
    else:
        buf = np.zeros(groups * width + 8, dtype=np.uint8)
        buf[: groups * width] = packed[: groups * width]
    # One strided copy makes the words contiguous (the arithmetic on the unaligned
    # strided view itself is many times slower).
    words = np.ndarray((groups,), dtype="<u8", buffer=buf, strides=(width,)).copy()
    fields, low, top = _swar_masks(width)
    if fields != (1 << 64) - 1:
        words &= np.uint64(fields)
    # In place, into two buffers: a temporary per operation costs a fresh allocation
    # (and its page faults) each time, several times the arithmetic itself.
    y = np.empty_like(words)
    t = np.empty_like(words)
    found: np.ndarray | None = None
    for k in ids.tolist():
        np.bitwise_xor(words, np.uint64(sum(k << (i * width) for i in range(8))), out=y)
        np.bitwise_and(y, np.uint64(low), out=t)
        t += np.uint64(low)
        t |= y
        np.invert(t, out=t)
        t &= np.uint64(top)
        if found is None:
            found, t = t, np.empty_like(words)
        else:
            found |= t
    if found is None:
        return np.zeros(0, dtype=np.intp)
    any_hit = found != 0  # nonzero() on a bool array is far cheaper than on words
    if not any_hit.any():
        return np.zeros(0, dtype=np.intp)
    hit_groups = np.flatnonzero(any_hit)
    bits = found[hit_groups]
    out: list[np.ndarray] = []
    for i in range(8):
        sel = ((bits >> np.uint64(i * width + width - 1)) & np.uint64(1)) != 0
        if sel.any():
            out.append(hit_groups[sel] * 8 + i)
    return np.sort(np.concatenate(out))


def find_hybrid(
    data: Buffer, pos: int, end: int, width: int, count: int, ids: np.ndarray
) -> np.ndarray:
    """Positions (ascending) among the ``count`` hybrid-encoded values in
    ``data[pos:end]`` whose value is one of ``ids`` — without unpacking the others
    when ``width`` <= 8 and the ids are few. Raises ValueError like
    :func:`decode_hybrid`."""
    return find_many([(data, pos, end, count)], width, ids)[0]


def find_many(
    streams: Sequence[tuple[Buffer, int, int, int]], width: int, ids: np.ndarray
) -> list[np.ndarray]:
    """:func:`find_hybrid` over several streams ``(data, pos, end, count)`` of one bit
    width at once (one call of the C kernel, or, in numpy, their bit-packed runs
    searched in one pass: one page's worth of values is too few to amortize the
    numpy calls)."""
    if _c is not None and 1 <= width <= 32:
        wanted = np.unique(np.asarray(ids, dtype=np.int64))
        wanted = wanted[(wanted >= 0) & (wanted < 1 << width)]
        if not wanted.size or int(wanted[-1]) < _MAX_TABLE:
            table = np.zeros(int(wanted[-1]) + 1 if wanted.size else 0, dtype=np.uint8)
            table[wanted] = 1
            return find_table(streams, width, table)
    return _find_many_np(streams, width, ids)


def find_table(
    streams: Sequence[tuple[Buffer, int, int, int]], width: int, table: np.ndarray,
    *, strict: bool = False,
) -> list[np.ndarray]:
    """Per stream ``(data, pos, end, count)`` of ``width``-bit values, the positions
    (ascending) of the values ``v`` with ``v < len(table)`` and ``table[v]`` true
    (``table``: a bool or uint8 array, e.g. a dictionary's matching entries).
    ``strict``: a value not below ``len(table)`` (an index past the dictionary)
    raises ValueError, as a malformed stream does."""
    if _c is not None and 1 <= width <= 32:
        flags = np.ascontiguousarray(table).view(np.uint8)
        return [_int64s(b) for b in _c.find_many(streams, width, flags, strict)]
    return _find_table_np(streams, width, table, strict=strict)


def _find_table_np(
    streams: Sequence[tuple[Buffer, int, int, int]], width: int, table: np.ndarray,
    *, strict: bool = False,
) -> list[np.ndarray]:
    """:func:`find_table` with numpy (each stream decoded whole)."""
    out = []
    for d, p, e, c in streams:
        values = _decode_np(d, p, e, width, c)
        inside = values < table.size
        if strict and not inside.all():
            raise ValueError(f"value {values[~inside][0]} not below {table.size}")
        hit = np.zeros(values.size, dtype=np.bool_)
        hit[inside] = table[values[inside]] != 0
        out.append(np.flatnonzero(hit))
    return out


def _find_many_np(
    streams: Sequence[tuple[Buffer, int, int, int]], width: int, ids: np.ndarray
) -> list[np.ndarray]:
    """:func:`find_many` with numpy."""
    if width == 0 or width > 8 or ids.size > 4:
        return [np.flatnonzero(np.isin(_decode_np(d, p, e, width, c), ids))
                for d, p, e, c in streams]
    wanted = set(ids.tolist())
    out: list[list[np.ndarray]] = [[] for _ in streams]
    packed: list[np.ndarray] = []
    src: list[int] = []  # per bit-packed run: first value among all unpacked ones
    lens: list[int] = []
    at: list[int] = []  # its first position in its stream
    which: list[int] = []  # its stream
    unpacked = 0
    for k, (data, pos, end, count) in enumerate(streams):
        r = _runs(data, pos, end, width, count)
        start = 0
        base = unpacked
        for kind, length, source in zip(r.kinds, r.lengths, r.sources, strict=True):
            if kind:
                src.append(base + source)
                lens.append(length)
                at.append(start)
                which.append(k)
            elif source in wanted:
                out[k].append(np.arange(start, start + length, dtype=np.intp))
            start += length
        for block in r.packed:
            packed.append(block)
            unpacked += block.size // width * 8
    if packed:
        # Concatenated with the padding the 8-byte word reads need: one copy.
        hits = _swar_hits(np.concatenate([*packed, np.zeros(8, dtype=np.uint8)]), width, ids,
                          padded=True)
        if hits.size:
            src_a = np.array(src, dtype=np.intp)
            seg = np.searchsorted(src_a, hits, side="right") - 1
            offset = hits - src_a[seg]
            keep = offset < np.array(lens, dtype=np.intp)[seg]  # padding of a last run
            seg, offset = seg[keep], offset[keep]
            positions = np.array(at, dtype=np.intp)[seg] + offset
            streams_of = np.array(which, dtype=np.intp)[seg]
            for k in np.unique(streams_of).tolist():
                out[k].append(positions[streams_of == k])
    return [np.sort(np.concatenate(o)) if o else np.zeros(0, dtype=np.intp) for o in out]
