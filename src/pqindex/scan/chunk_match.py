"""A predicate evaluated over a whole column chunk on its encoded pages.

The executor's entry to :func:`pqindex.scan.encoded.matching_rows` for a chunk
that must be read whole: the chunk comes from fetched bytes, or from a local
file through :func:`local_reader` (read by the row group's own task, a window at
a time, into buffers of Arrow's pool); an integer predicate is handed to numpy
as well (:func:`pqindex.expr.evaluate.numpy_values_mask`); and when fewer row
groups than cores are decoded at once, the chunk's pages are split into spans
matched side by side (:func:`pqindex.scan.encoded.spans`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from pqindex.expr.bind import BoundAnd, BoundExpr, BoundOr, BoundPredicate
from pqindex.expr.evaluate import numpy_values_mask, to_arrow_mask
from pqindex.format.file import ParquetFile
from pqindex.format.match import LeafOp
from pqindex.io.source import LocalFileSource
from pqindex.plan.planner import dictionary_hits
from pqindex.scan import encoded
from pqindex.scan.whole import side_by_side

__all__ = ["local_reader", "match_chunk", "on_values"]

# Cores the pages of a predicate chunk are split between when fewer row groups are
# decoded at once; a part holds at least this many compressed bytes (a hand-off costs
# ~0.1 ms, decompressing a MiB of zstd ~1 ms).
_CORES = os.cpu_count() or 1
_SPAN_MIN_BYTES = 1 << 20


def on_values(expr: BoundExpr, target: pa.DataType) -> bool:
    """Whether numpy evaluates ``expr`` on the stored values of a column of type
    ``target`` (integers only: other types' stored numbers are not their values)."""
    if not pa.types.is_integer(target):
        return False
    return numpy_values_mask(expr, np.dtype(target.to_pandas_dtype())) is not None


def few_matches(expr: BoundExpr) -> bool:
    """Whether ``expr`` can only hold for a few listed values of its column: an
    equality or IN (OR of such; AND with one). On a high-cardinality column those
    are a handful of rows, worth row numbers rather than a mask. Walked without
    recursion: an OR of thousands of terms is a tree that deep."""
    todo: list[tuple[BoundExpr, bool]] = [(expr, False)]
    got: list[bool] = []  # answers of the subtrees done, left before right
    while todo:
        node, expanded = todo.pop()
        if not isinstance(node, (BoundAnd, BoundOr)):
            got.append(isinstance(node, BoundPredicate) and node.op in (LeafOp.EQ, LeafOp.IN))
        elif expanded:
            right, left = got.pop(), got.pop()
            got.append(left and right if isinstance(node, BoundOr) else left or right)
        else:
            todo += [(node, True), (node.right, False), (node.left, False)]
    return got[0]


def local_reader(source: LocalFileSource, start: int) -> encoded.Read:
    """``read(offset, length)`` of the chunk at ``start`` of a local file, uncounted
    (the caller counts the chunk), on the calling thread. Each window goes into a
    buffer of Arrow's pool, which reuses freed memory at once: fresh Python bytes
    of a MiB are new pages, each a fault (~5 ms more on a 24 MiB column)."""
    last: list[tuple[int, memoryview]] = []  # the window read before

    def read(offset: int, n: int) -> memoryview:
        buf = memoryview(pa.allocate_buffer(n))
        have = 0
        if last and last[0][0] <= offset < last[0][0] + len(last[0][1]):
            # The page the last window cut: copied from it, not read again.
            lo, prev = last[0]
            have = min(n, lo + len(prev) - offset)
            np.frombuffer(buf, dtype=np.uint8)[:have] = np.frombuffer(
                prev, dtype=np.uint8)[offset - lo : offset - lo + have]
        if have < n:
            source.read_into(start + offset + have, buf[have:])
        last[:] = [(offset, buf)]
        return buf

    return read


def match_chunk(
    pf: ParquetFile, rg: int, col: int, target: pa.DataType, expr: BoundExpr,
    raw: bytes | memoryview | Callable[[], encoded.Read], siblings: int,
) -> np.ndarray | None:
    """Rows of row group ``rg`` where ``expr``, a predicate on the flat leaf ``col``
    alone, holds; None where pyarrow must decode. ``raw``: the chunk's bytes, or a
    function making a reader of them (one per span: each keeps its last window).
    ``siblings``: row groups decoded at the same time as this one."""
    name = pf.leaf(col).path[0]

    def evaluate(arr: pa.Array) -> pa.BooleanArray:
        return to_arrow_mask(expr, pa.table({name: arr}))

    def values_mask(dtype: np.dtype[Any]) -> Callable[[np.ndarray], np.ndarray] | None:
        # Integer columns only: other types' stored numbers are not their values.
        return numpy_values_mask(expr, dtype) if pa.types.is_integer(target) else None

    hits = dictionary_hits(pf, rg, col, expr)

    def match(span: encoded.Span) -> np.ndarray | None:
        source = raw if isinstance(raw, (bytes, memoryview)) else raw()
        return encoded.matching_rows(pf, rg, col, target, source, evaluate, span, values_mask,
                                     hits)

    # Fewer row groups than cores: the chunk's pages are split between threads.
    parts = -(-_CORES // siblings) if siblings < _CORES else 1
    found = side_by_side([functools.partial(match, sp)
                          for sp in encoded.spans(pf, rg, col, parts, _SPAN_MIN_BYTES)])
    if any(f is None for f in found):
        return None
    return found[0] if len(found) == 1 else np.concatenate(found)
