"""Row arithmetic of the executor: cutting wanted rows out of decoded pages, and
row numbers between positions, ranges and pages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pqindex.expr.evaluate import mask_bools, true_positions
from pqindex.format import views
from pqindex.format.row_ranges import RowRanges

# Up to this many row intervals are cut with zero-copy slices; more use one take.
_MAX_SLICES = 256
# Wanted rows at least 1/_DENSE of the decoded ones: cut with a mask, not row numbers.
_DENSE = 32


def positions(first_rows: np.ndarray, counts: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Index of each wanted row in the concatenation of the decoded pages."""
    if counts.size == 1 and int(first_rows[0]) == 0:
        return rows  # a whole row group decoded: row numbers are positions
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])) if counts.size else counts
    page = np.searchsorted(first_rows, rows, side="right") - 1
    return np.asarray(starts[page] + (rows - first_rows[page]), dtype=np.int64)


def cut(arr: Any, first_rows: np.ndarray, counts: np.ndarray, rows: RowRanges) -> Any:
    """The rows ``rows`` out of ``arr``, the decoded concatenation of pages that start at
    ``first_rows`` and hold ``counts`` rows. Every row of ``rows`` lies in those pages."""
    if rows.count() == len(arr):
        return arr
    if isinstance(arr, pa.Array) and _is_view(arr.type) and len(rows) > 1:
        # No filter / take kernel for views, and pieces of them concatenate to large
        # strings: their 16-byte views are gathered, the strings' buffers shared (a
        # cast to strings and back cost TPC-H Q1 ~40%).
        return _take_views(arr, positions(first_rows, counts, rows.to_indices()))
    if len(rows) <= _MAX_SLICES:
        starts = np.concatenate(([0], np.cumsum(counts)[:-1])) if counts.size else counts
        pieces = []
        for s, e in rows.intervals():
            p = int(np.searchsorted(first_rows, s, side="right")) - 1
            pieces.append(arr.slice(int(starts[p] + s - first_rows[p]), e - s))
        if len(pieces) == 1:
            return pieces[0]
        return pa.concat_arrays(pieces) if isinstance(arr, pa.Array) else pa.chunked_array(
            [c for piece in pieces for c in piece.chunks], type=arr.type
        )
    span = int(counts.sum())
    if rows.count() <= span * _TAKE_SHARE and _numpy_takes(arr):
        return _take_fixed(arr, positions(first_rows, counts, rows.to_indices()))
    arr = views.computable(arr)  # filter / take: no kernel for views (conform restores)
    if rows.count() * _DENSE >= span and span == len(arr) and (
        counts.size == 1 or bool(np.all(first_rows[1:] == first_rows[:-1] + counts[:-1]))
    ):
        # Many rows of pages that follow each other: one mask and filter, instead of
        # every row number worked out and taken.
        return arr.filter(pa.array(rows.span_mask(int(first_rows[0]), span)))
    return arr.take(pa.array(positions(first_rows, counts, rows.to_indices())))


def cut_whole(arrays: dict[str, Any], n: int, rows: RowRanges) -> dict[str, Any]:
    """The rows ``rows`` out of each of ``arrays``, whole row groups of ``n`` rows:
    :func:`cut`, with the mask (or the positions) worked out once for all of them."""
    first, counts = np.zeros(1, dtype=np.int64), np.array([n], dtype=np.int64)
    if rows.count() == n or len(rows) <= _MAX_SLICES or len(arrays) < 2:
        return {k: cut(a, first, counts, rows) for k, a in arrays.items()}
    out: dict[str, Any] = {}
    mask: pa.BooleanArray | None = None
    idx: np.ndarray | None = None
    for k, arr in arrays.items():
        if len(arr) != n:
            out[k] = cut(arr, first, counts, rows)
        elif rows.count() <= n * _TAKE_SHARE and _numpy_takes(arr):
            idx = rows.to_indices() if idx is None else idx
            out[k] = _take_fixed(arr, idx)
        elif isinstance(arr, pa.Array) and _is_view(arr.type):
            idx = rows.to_indices() if idx is None else idx
            out[k] = _take_views(arr, idx)
        elif rows.count() * _DENSE >= n:
            mask = pa.array(rows.span_mask(0, n)) if mask is None else mask
            out[k] = views.computable(arr).filter(mask)
        else:
            idx = rows.to_indices() if idx is None else idx
            out[k] = views.computable(arr).take(pa.array(idx))
    return out


# Wanted rows up to this share of the decoded ones are taken by numpy (_take_fixed);
# more, with long runs between the holes, are copied faster by pyarrow's filter (3M
# decimals: 50% wanted 10.5 against 15.2 ms, 90% 31.4 against 15.4).
_TAKE_SHARE = 0.6
# Unsigned numpy types of the fixed-width Arrow values taken by numpy (_take_fixed),
# by byte width; 16 and 32 bytes (decimals) as rows of 8-byte words.
_WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.uint64,
          32: np.uint64}


def _numpy_takes(arr: Any) -> bool:
    """Whether :func:`_take_fixed` cuts ``arr``: one array of fixed-width values
    (numbers, dates, times, decimals) without nulls. numpy's take of them costs a
    fifth to two thirds of pyarrow's filter for decimals, half its take for int64
    (1-3M rows, half wanted at random: TPC-H Q10's columns)."""
    if not isinstance(arr, pa.Array) or arr.null_count:
        return False
    t = arr.type
    if (pa.types.is_boolean(t) or pa.types.is_dictionary(t) or t.num_fields
            or isinstance(t, pa.ExtensionType)):
        return False
    try:
        width = t.bit_width
    except ValueError:  # not fixed-width
        return False
    return width % 8 == 0 and width // 8 in _WORDS and len(arr.buffers()) == 2


def _take_fixed(arr: pa.Array, idx: np.ndarray) -> pa.Array:
    """The elements ``idx`` of a null-free fixed-width array, taken by numpy."""
    width = arr.type.bit_width // 8
    words = max(width // 8, 1)
    dtype = _WORDS[width]
    total = (arr.offset + len(arr)) * words
    values = np.frombuffer(arr.buffers()[1], dtype=dtype, count=total)
    if words > 1:
        values = values.reshape(-1, words)
    taken = np.take(values[arr.offset:], idx, axis=0)
    return pa.Array.from_buffers(arr.type, len(idx), [None, pa.py_buffer(taken)])


def _is_view(t: pa.DataType) -> bool:
    return bool(pa.types.is_string_view(t) or pa.types.is_binary_view(t))


def _take_views(arr: pa.Array, idx: np.ndarray) -> pa.Array:
    """The elements ``idx`` of a string_view / binary_view array: each element's
    16-byte view (length, prefix, buffer and offset) copied, the data buffers the
    views point into shared as they are."""
    bufs = arr.buffers()
    count = len(idx)
    all_views = np.frombuffer(bufs[1], dtype=np.int64,
                              count=2 * (arr.offset + len(arr))).reshape(-1, 2)
    taken = all_views[arr.offset:][idx]
    validity = None
    nulls = 0
    if arr.null_count:
        valid = mask_bools(arr.is_valid())[idx]
        nulls = count - int(np.count_nonzero(valid))
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(arr.type, count, [validity, pa.py_buffer(taken), *bufs[2:]],
                                 nulls)


def concat_pieces(pieces: list[pa.Array], target: pa.DataType) -> pa.Array:
    """Decoded page pieces as one array. Dictionary pieces from separate decodes don't
    share a dictionary: pyarrow (>= 26) unifies them, far cheaper than casting every
    piece to ``target``; mixed types are cast."""
    if len({piece.type for piece in pieces}) == 1:
        return pa.concat_arrays(pieces)
    return pa.concat_arrays([views.cast(p, target) if p.type != target else p for p in pieces])


def leaf_array(arr: Any, path: Sequence[str]) -> Any:
    """The leaf under a decoded top-level field, with its parents' nulls applied."""
    for name in path[1:]:
        if not pa.types.is_struct(arr.type):
            return arr
        children = arr.flatten()
        idx = arr.type.get_field_index(name)
        arr = children[idx]
    return arr


def rows_at(ranges: RowRanges, positions: np.ndarray) -> np.ndarray:
    """Row numbers of the given positions within the concatenation of ``ranges``."""
    lengths = ranges.ends - ranges.starts
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    k = np.searchsorted(offsets, positions, side="right") - 1
    return np.asarray(ranges.starts[k] + (positions - offsets[k]), dtype=np.int64)


def within(ranges: RowRanges, idx: np.ndarray) -> np.ndarray:
    """The sorted row numbers ``idx`` that lie in ``ranges``."""
    k = np.searchsorted(ranges.ends, idx, side="right")
    inside = k < len(ranges)
    inside[inside] = ranges.starts[k[inside]] <= idx[inside]
    return idx[inside]


def ranges_from_indices(idx: np.ndarray) -> RowRanges:
    """Ranges of the sorted row numbers ``idx`` (O(len(idx)): cheaper than a mask of
    the row group at every density measured)."""
    if idx.size == 0:
        return RowRanges.empty()
    kept = np.array(idx, dtype=np.int64, copy=True).reshape(-1)  # the caller's may change
    kept.flags.writeable = False
    # The intervals only if asked: cut takes the row numbers (TPC-H Q10: 4 x 500k).
    return RowRanges.lazy_from_indices(kept)


def matched_ranges(rows: RowRanges, mask: pa.BooleanArray) -> RowRanges:
    """The rows of ``rows`` where ``mask`` (one entry per row of ``rows``, in order) is
    true; NULL counts as false."""
    if mask.null_count:
        mask = pc.fill_null(mask, False)
    count = mask.true_count
    if count == 0:
        return RowRanges.empty()
    if count * _DENSE >= len(mask) and len(rows) == 1:
        # Many matches in one run of rows: ranges straight from the mask.
        first = rows.first()
        assert first is not None
        m = mask_bools(mask)
        m.flags.writeable = False  # a fresh array: kept without a copy
        # Kept as the mask: the cut filters by it; the intervals and row numbers are
        # worked out only if asked (TPC-H Q4: ~230k intervals per row group).
        return RowRanges.lazy_from_mask(m, first)
    return ranges_from_indices(rows_at(rows, true_positions(mask)))
