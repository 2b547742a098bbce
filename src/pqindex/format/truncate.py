"""Short ColumnIndex bounds for string and binary columns.

pyarrow stores every page's min and max in full, so a 200-byte key costs 400
bytes per page. ``truncate_column_index`` replaces each min by a prefix of it
(a lower bound) and each max by a short string above it (an upper bound),
never longer than ``cap`` bytes.

On an ordered index the bounds are also cut like B-tree separators: where page
*i*'s max is below page *i+1*'s min, page *i+1*'s lower bound is the shortest
prefix of its min above page *i*'s max, and page *i*'s upper bound the shortest
string at or above its max that stays below that prefix. So a lookup of a value
that is in the data selects exactly the pages the full bounds select; only
absent values can fall into the widened gaps.

Rules, each pinned by ``tests/test_truncate.py``:

* Only BYTE_ARRAY columns whose bounds compare byte-wise (STRING, ENUM, JSON,
  BSON, plain binary); decimals, FLOAT16, UUID and every fixed-width type are
  returned unchanged, as is an index that fails ``validate_column_index``.
* STRING bounds stay valid UTF-8: a lower bound keeps the code points that fit
  and fills the bytes left with the largest code point that fits in them; an
  upper bound increments its last code point that can be incremented (skipping
  the surrogates U+D800..U+DFFF) and drops what follows. Both are the tightest
  bounds within ``cap`` bytes, hence monotone: sorted pages stay sorted. A bound
  that is not valid UTF-8 is kept as it is.
* An upper bound that cannot be made shorter than its value within ``cap``
  bytes (all 0xFF bytes, all U+10FFFF) keeps the original value.
* Null pages keep their bounds. The boundary order is re-checked the way
  pyarrow detects it; the original order is kept when it still holds, else the
  index becomes UNORDERED.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence

from pqindex.format.schema import BoundaryOrder, LeafColumn, PhysicalType
from pqindex.format.structs import ColumnIndex
from pqindex.format.value_type import Kind
from pqindex.format.values import Comparison, bound_order, validate_column_index

__all__ = ["DEFAULT_CAP", "lower_bound", "truncate_column_index", "upper_bound"]

DEFAULT_CAP = 64
_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)

# A bound as a sequence of units: bytes for binary, code points for strings.
Units = Sequence[int]


class _Codec:
    """How bounds split into units, encode back and increment."""

    def __init__(self, text: bool) -> None:
        self.text = text

    def split(self, raw: bytes) -> Units | None:
        if not self.text:
            return raw
        try:
            return [ord(c) for c in raw.decode("utf-8")]
        except UnicodeDecodeError:
            return None

    def join(self, units: Units) -> bytes:
        if not self.text:
            return bytes(units)
        return "".join(map(chr, units)).encode("utf-8")

    def increment(self, unit: int) -> int | None:
        """The next unit up, or None at the top."""
        if not self.text:
            return unit + 1 if unit < 0xFF else None
        if unit >= _MAX_CODE_POINT:
            return None
        nxt = unit + 1
        return _SURROGATES[1] + 1 if _SURROGATES[0] <= nxt <= _SURROGATES[1] else nxt

    def width(self, unit: int) -> int:
        if not self.text:
            return 1
        return 1 if unit < 0x80 else 2 if unit < 0x800 else 3 if unit < 0x10000 else 4


def _prefix_within(codec: _Codec, units: Units, cap: int) -> int:
    """How many leading units fit in ``cap`` bytes."""
    size = 0
    for i, u in enumerate(units):
        size += codec.width(u)
        if size > cap:
            return i
    return len(units)


def _upper_of_prefix(codec: _Codec, units: Units, n: int, cap: int) -> bytes | None:
    """The shortest-encoding bound above every string starting with ``units[:n]``
    that is no longer than ``cap`` bytes: ``units[:j] + inc(units[j])`` for the
    largest ``j < n`` that can be incremented and fits; None when none does."""
    size = sum(codec.width(u) for u in units[:n])
    for j in range(n - 1, -1, -1):
        size -= codec.width(units[j])
        up = codec.increment(units[j])
        if up is not None and size + codec.width(up) <= cap:
            return codec.join([*units[:j], up])
    return None


# The largest code point that UTF-8 encodes in 1, 2 and 3 bytes.
_WIDEST = {1: 0x7F, 2: 0x7FF, 3: 0xFFFF}


def lower_bound(raw: bytes, cap: int = DEFAULT_CAP, *, text: bool = False) -> bytes:
    """The largest string <= ``raw`` within ``cap`` bytes; ``raw`` itself when it
    fits or is not valid UTF-8.

    For binary that is the ``cap``-byte prefix. For text, the code points that
    fit, then the largest code point narrow enough for the bytes left (it sorts
    below the code point that did not fit). Being the largest, the result is
    monotone in ``raw``: cutting sorted mins keeps them sorted.
    """
    codec = _Codec(text)
    units = codec.split(raw)
    if units is None or len(raw) <= cap:
        return raw
    n = _prefix_within(codec, units, cap)
    out = codec.join(units[:n])
    left = cap - len(out)
    if text and left:
        out += chr(_WIDEST[left]).encode("utf-8")
    return out


def upper_bound(raw: bytes, cap: int = DEFAULT_CAP, *, text: bool = False) -> bytes:
    """A string >= ``raw`` of at most ``cap`` bytes (valid UTF-8 when ``text``);
    ``raw`` itself when it fits, is not valid UTF-8, or no shorter bound exists."""
    codec = _Codec(text)
    units = codec.split(raw)
    if units is None or len(raw) <= cap:
        return raw
    up = _upper_of_prefix(codec, units, _prefix_within(codec, units, cap), cap)
    return raw if up is None else up


def _separator(codec: _Codec, hi: Units, lo: Units, cap: int) -> tuple[bytes, bytes] | None:
    """Short ``(upper, lower)`` with ``hi <= upper < lower <= lo``, given ``hi < lo``.

    ``lower`` is the shortest prefix of ``lo`` above ``hi``; ``upper`` the shortest
    bound of ``hi`` below it. None when either would exceed ``cap`` bytes.
    """
    p = 0
    while p < len(hi) and p < len(lo) and hi[p] == lo[p]:
        p += 1
    if p >= len(lo):
        return None  # lo is a prefix of hi: lo <= hi, no gap to cut
    lower = codec.join(lo[: p + 1])
    if len(lower) > cap:
        return None
    full = codec.join(hi)
    upper = full
    # A prefix of hi of n units, incremented, is above hi; the first that stays
    # below ``lower`` is the shortest such bound.
    for n in range(p + 1, len(hi)):
        cand = _upper_of_prefix(codec, hi, n, cap)
        if cand is not None and cand < lower:
            upper = cand
            break
    if len(upper) > cap:
        return None
    return upper, lower


def _monotone(values: list[bytes], pages: list[int], pick: Callable[[bytes, bytes], bytes],
              backward: bool) -> None:
    """Make ``values`` at ``pages`` non-decreasing by moving a bound to its neighbour's.

    Lower bounds go backward with ``min`` (a smaller lower bound of the next page
    is below this page's min too); upper bounds forward with ``max``.
    """
    order = list(reversed(pages)) if backward else pages
    for a, b in itertools.pairwise(order):
        values[b] = pick(values[b], values[a])


def _holds(values: list[bytes], pages: list[int], descending: bool) -> bool:
    seq = [values[p] for p in pages]
    if descending:
        return all(x >= y for x, y in itertools.pairwise(seq))
    return all(x <= y for x, y in itertools.pairwise(seq))


def truncate_column_index(ci: ColumnIndex, leaf: LeafColumn, cap: int = DEFAULT_CAP, *,
                          separate: bool = True) -> ColumnIndex:
    """A copy of ``ci`` with short bounds (see the module doc); ``ci`` is not changed.

    ``separate=False`` only caps each bound at ``cap`` bytes (what parquet-java
    does), without shortening ordered neighbours further.
    """
    if cap < 1:
        raise ValueError(f"cap must be at least 1 byte, got {cap}")
    order = bound_order(leaf)
    vt = order.value_type
    if (vt.physical != PhysicalType.BYTE_ARRAY or vt.kind not in (Kind.STRING, Kind.BINARY)
            or order.comparison != Comparison.BYTES):
        return ci
    if ci.null_pages is None or ci.min_values is None or ci.max_values is None:
        return ci
    if validate_column_index(ci, len(ci.null_pages), leaf) is not None:
        return ci
    codec = _Codec(vt.kind == Kind.STRING)
    text = codec.text
    mins = [lower_bound(v, cap, text=text) for v in ci.min_values]
    maxs = [upper_bound(v, cap, text=text) for v in ci.max_values]
    pages = [i for i, null in enumerate(ci.null_pages) if not null]
    for i in range(len(ci.null_pages)):
        if ci.null_pages[i]:
            mins[i], maxs[i] = ci.min_values[i], ci.max_values[i]

    direction = ci.boundary_order
    if direction in (BoundaryOrder.ASCENDING, BoundaryOrder.DESCENDING):
        descending = direction == BoundaryOrder.DESCENDING
        seq = list(reversed(pages)) if descending else pages
        if separate:
            # seq runs from small values to large: cut each gap between neighbours.
            for a, b in itertools.pairwise(seq):
                hi_raw, lo_raw = ci.max_values[a], ci.min_values[b]
                if not hi_raw < lo_raw:
                    continue
                hi, lo = codec.split(hi_raw), codec.split(lo_raw)
                if hi is None or lo is None:
                    continue
                cut = _separator(codec, hi, lo, cap)
                if cut is not None:
                    maxs[a], mins[b] = cut
        # Tight cuts keep the order; a bound kept whole (not UTF-8, no shorter upper
        # bound) may not, so restore it without breaking a bound.
        _monotone(mins, seq, min, backward=True)
        _monotone(maxs, seq, max, backward=False)
        if not (_holds(mins, pages, descending) and _holds(maxs, pages, descending)):
            direction = BoundaryOrder.UNORDERED
    return dataclasses.replace(ci, min_values=mins, max_values=maxs, boundary_order=direction)
