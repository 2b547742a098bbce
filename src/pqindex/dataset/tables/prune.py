"""Files ruled out by a table's per-file statistics, all files at once.

A table's log or manifests record per file its row count and, per column, a
min, a max and a null count. ``may_match(expr, stats)`` answers, for every file
in one pass of Arrow kernels (one row of ``stats`` per file: ``rows``,
``min.<col>``, ``max.<col>``, ``nulls.<col>``), whether some row may satisfy
``expr``: False only where the bounds prove no row can. Anything not known —
a column without statistics, a null bound, a NaN bound, a literal that does not
convert to the column's type, a predicate kind not handled here — is True.

Bounds a writer may have cut are widened first (``widen``): Delta's string
statistics are prefixes (a max prefix may sort below the real max), and its
timestamps are kept to the millisecond.
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pqindex.expr.nodes import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    Compare,
    Expr,
    In,
    IsNull,
    Literal,
    Or,
)
from pqindex.expr.normalize import push_not
from pqindex.format.match import LeafOp

__all__ = ["may_match"]


def _all(n: int, value: bool) -> pa.Array:
    return pa.array([value] * n, pa.bool_())


def _known(mask: pa.Array) -> pa.Array:
    """Unknown (null) answers become True: the file is kept."""
    return pc.fill_null(mask, True)


def _scalar(lit: Literal, type_: pa.DataType) -> pa.Scalar | None:
    value = lit.value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    try:
        return pa.scalar(value).cast(type_)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError,
            TypeError, ValueError):
        return None


def _bound(stats: pa.Table, kind: str, name: str) -> pa.Array | None:
    key = f"{kind}.{name}"
    if key not in stats.column_names:
        return None
    arr = stats.column(key).combine_chunks()
    if pa.types.is_floating(arr.type):
        # A NaN bound says nothing usable: unknown.
        arr = pc.if_else(pc.is_nan(arr), pa.scalar(None, arr.type), arr)
    return arr


def _compare(op: LeafOp, stats: pa.Table, name: str, lit: Literal) -> pa.Array | None:
    lo, hi = _bound(stats, "min", name), _bound(stats, "max", name)
    if lo is None or hi is None:
        return None
    v = _scalar(lit, lo.type)
    if v is None:
        return None
    if op == LeafOp.EQ:
        return pc.and_kleene(pc.less_equal(lo, v), pc.greater_equal(hi, v))
    if op == LeafOp.NE:
        return pc.invert(pc.and_kleene(pc.equal(lo, v), pc.equal(hi, v)))
    if op == LeafOp.LT:
        return pc.less(lo, v)
    if op == LeafOp.LE:
        return pc.less_equal(lo, v)
    if op == LeafOp.GT:
        return pc.greater(hi, v)
    if op == LeafOp.GE:
        return pc.greater_equal(hi, v)
    return None


def _leaf(e: Expr, stats: pa.Table) -> pa.Array | None:
    if isinstance(e, Compare):
        return _compare(e.op, stats, e.column.name, e.literal)
    if isinstance(e, In) and not e.negated:
        out = None
        for lit in e.values:
            one = _compare(LeafOp.EQ, stats, e.column.name, lit)
            if one is None:
                if lit.value is None:
                    continue  # x IN (NULL) matches no row
                return None
            out = one if out is None else pc.or_kleene(out, one)
        return out if out is not None else _all(stats.num_rows, False)
    if isinstance(e, IsNull):
        nulls = _bound(stats, "nulls", e.column.name)
        if nulls is None:
            return None
        if not e.negated:
            return pc.greater(nulls, 0)
        rows = stats.column("rows").combine_chunks()
        return pc.less(nulls, rows)
    return None


def _walk(e: Expr, stats: pa.Table) -> pa.Array:
    n = stats.num_rows
    if isinstance(e, AlwaysTrue):
        return _all(n, True)
    if isinstance(e, AlwaysFalse):
        return _all(n, False)
    if isinstance(e, And):
        return pc.and_(_walk(e.left, stats), _walk(e.right, stats))
    if isinstance(e, Or):
        return pc.or_(_walk(e.left, stats), _walk(e.right, stats))
    got = _leaf(e, stats)
    return _all(n, True) if got is None else _known(got)


def may_match(expr: Expr, stats: pa.Table, float_columns: frozenset[str] = frozenset()
              ) -> pa.Array:
    """Per file (row of ``stats``), whether a row may satisfy ``expr`` (see the module doc)."""
    flat = push_not(expr, lambda c: c.name in float_columns)
    return _walk(flat, stats)


def widen(stats: pa.Table, truncated_strings: int | None = None,
          millisecond_timestamps: bool = False) -> pa.Table:
    """``stats`` with the bounds a writer may have cut made unknown or wider: a string
    max of ``truncated_strings`` characters or more is unknown (a prefix may sort
    below the value); a timestamp max gets a millisecond more."""
    cols: dict[str, Any] = {}
    for name in stats.column_names:
        arr = stats.column(name).combine_chunks()
        if name.startswith("max."):
            if truncated_strings is not None and (pa.types.is_string(arr.type)
                                                  or pa.types.is_large_string(arr.type)):
                arr = pc.if_else(pc.greater_equal(pc.utf8_length(arr), truncated_strings),
                                 pa.scalar(None, arr.type), arr)
            elif millisecond_timestamps and pa.types.is_timestamp(arr.type):
                unit = {"s": 0, "ms": 1, "us": 1000, "ns": 1_000_000}[arr.type.unit]
                if unit:
                    arr = pc.add(arr, pa.scalar(unit, pa.duration(arr.type.unit)))
        cols[name] = arr
    return pa.table(cols)
