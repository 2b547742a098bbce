"""Exact row-level evaluation of a bound predicate with ``pyarrow.compute``.

Columns are found in a table by their leaf path: the first part names a table
column, the rest are struct fields (``pc.struct_field`` carries a NULL parent
down to its fields). A NULL answer never selects a row: the mask has no nulls.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, assert_never

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pqindex.errors import UserInputError
from pqindex.expr.bind import (
    BoundAnd,
    BoundCondition,
    BoundExpr,
    BoundFalse,
    BoundOr,
    BoundPredicate,
    BoundTrue,
    BoundVisitor,
    visit_bound,
)
from pqindex.expr.nodes import term_sql
from pqindex.format.arrow_build import bool_array, key_array, typed_scalar
from pqindex.format.match import LeafOp
from pqindex.format.value_type import Kind, NanoTimestamp, Value
from pqindex.format.views import computable

__all__ = ["numpy_values_mask", "table_column", "to_arrow_mask", "to_pyarrow_expression"]

_COMPARE = {
    LeafOp.EQ: pc.equal, LeafOp.NE: pc.not_equal, LeafOp.LT: pc.less,
    LeafOp.LE: pc.less_equal, LeafOp.GT: pc.greater, LeafOp.GE: pc.greater_equal,
}


def _column(table: pa.Table, path: tuple[str, ...]) -> Any:
    """The (chunked) array of a leaf path; a dotted top-level name is tried first."""
    names = table.column_names
    for split in range(len(path), 0, -1):
        head = ".".join(path[:split])
        if head not in names:
            continue
        arr: Any = table.column(head)
        try:
            for field in path[split:]:
                arr = pc.struct_field(arr, field)
        except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError, TypeError):
            continue
        if isinstance(arr.type, pa.BaseExtensionType):  # e.g. arrow.uuid: compare storage
            storage = arr.type.storage_type
            arr = (pa.chunked_array([c.storage for c in arr.chunks], storage)
                   if isinstance(arr, pa.ChunkedArray) else arr.storage)
        if pa.types.is_dictionary(arr.type):
            # Evaluated on the dictionary's values, then spread by the indices.
            if isinstance(arr, pa.ChunkedArray):
                return arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
            return arr
        if pa.types.is_float16(arr.type):
            arr = arr.cast(pa.float32())  # exact; compute kernels lack half floats
        return computable(arr)  # string_view etc.: no kernels either
    raise UserInputError(f"the table has no column {'.'.join(path)!r}",
                         column=".".join(path))


def table_column(table: pa.Table, name: str) -> Any:
    """The values of the dotted column ``name`` in ``table`` (struct fields looked up)."""
    return _column(table, tuple(name.split(".")))


def _plain(value: Value) -> Any:
    """A bound value as pyarrow takes it."""
    if isinstance(value, NanoTimestamp):
        return pa.scalar(value.nanos, pa.timestamp("ns", "UTC" if value.utc else None))
    if isinstance(value, uuid.UUID):
        return value.bytes
    return value


def _scalar(value: Value, arrow_type: pa.DataType) -> Any:
    """The value as a scalar of the column's Arrow type, or as pyarrow infers it."""
    plain = _plain(value)
    if isinstance(plain, pa.Scalar):
        try:
            return plain.cast(arrow_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return plain
    got = typed_scalar(plain, arrow_type)  # no pa.scalar: pyarrow would import pandas
    if got is not None:
        return got
    try:
        return pa.scalar(plain, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError,
            OverflowError):
        return pa.scalar(plain)


def _value_set(values: tuple[Value, ...], arrow_type: pa.DataType) -> pa.Array:
    plain = [_plain(v) for v in values]
    if pa.types.is_integer(arrow_type) and all(type(p) is int for p in plain):
        # From a numpy buffer: pa.array imports pandas (0.4-1 s in a fresh process,
        # paid by every cold IN list).
        got = key_array(plain, pa.int64())
        if got is not None:
            try:
                return got if arrow_type == pa.int64() else got.cast(arrow_type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass  # a value the type cannot hold: as below
    if any(isinstance(p, pa.Scalar) for p in plain):
        return pa.array([_scalar(v, arrow_type) for v in values])
    try:
        return pa.array(plain, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array(plain)


def _compare_mask(pred: BoundPredicate, arr: Any) -> Any:
    return _COMPARE[pred.op](arr, _scalar(pred.values[0], arr.type))


# From this many IN values, integer rows are looked up in the sorted values with
# numpy (is_in hashes the whole list again for every batch of every file).
_SEARCH_IN_FROM = 64


def _searched_mask(pred: BoundPredicate, arr: Any) -> Any:
    """``is_in`` of an integer array by binary search in the sorted IN values; None
    when a value does not fit the array's type (left to ``is_in``)."""
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks != 1:
            return None
        arr = arr.chunk(0)
    t = arr.type
    dtype = np.dtype(f"<{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}")

    def literal(v: Value) -> Any:
        raise _NotNumpy

    try:
        wanted = _numpy_in_values(pred, dtype, literal, ordered=True)
    except _NotNumpy:
        return None
    n = len(arr)
    if not wanted.size or not n:
        return bool_array(np.zeros(n, np.bool_))
    # The values buffer as it is (no to_numpy: pyarrow would import pandas); a null
    # row's slot holds anything, and the validity masks it below.
    rows = np.frombuffer(arr.buffers()[1], dtype=dtype, count=n, offset=arr.offset * dtype.itemsize)
    at = np.minimum(np.searchsorted(wanted, rows), wanted.size - 1)
    found = bool_array(wanted[at] == rows)
    return pc.and_(found, pc.is_valid(arr)) if arr.null_count else found


def _found_mask(pred: BoundPredicate, arr: Any) -> Any:
    if (len(pred.values) >= _SEARCH_IN_FROM and pa.types.is_integer(arr.type)
            and (got := _searched_mask(pred, arr)) is not None):
        return got
    if pa.types.is_floating(arr.type):
        # is_in hashes bit patterns: adding +0.0 turns -0.0 into 0.0, as = sees it.
        arr = pc.add(arr, pa.scalar(0.0, arr.type))
    return pc.is_in(arr, value_set=in_value_set(pred, arr.type))


def in_value_set(pred: BoundPredicate, arrow_type: pa.DataType) -> pa.Array:
    """The IN list's values as one Arrow array for ``arrow_type``'s ``is_in``, built
    once per predicate and type (every batch and file of a scan asks again)."""
    key = ("value_set", arrow_type)
    got: pa.Array | None = pred.memo.get(key)
    if got is None:
        got = _value_set(pred.values, arrow_type)
        if pa.types.is_floating(got.type):
            got = pc.add(got, pa.scalar(0.0, got.type))
        pred.memo[key] = got
    return got


def _prefix_mask(pred: BoundPredicate, arr: Any) -> Any:
    prefix = pred.values[0]
    if isinstance(prefix, bytes) or not (pa.types.is_string(arr.type)
                                         or pa.types.is_large_string(arr.type)):
        raw = prefix if isinstance(prefix, bytes) else str(prefix).encode("utf-8")
        head = pc.binary_slice(arr, 0, len(raw))
        return pc.equal(head, pa.scalar(raw, type=head.type))
    return pc.starts_with(arr, pattern=prefix)


def like_mask(values: Any, pattern: str, ignore_case: bool = False) -> Any:
    """LIKE (``ignore_case``: ILIKE) of a string array, or of an Expression, for a
    pattern in Arrow's form (a backslash escapes: ``Like.arrow_pattern``): Arrow's
    ``match_like``; ILIKE matches the values lowercased by Arrow's ``utf8_lower``
    against the pattern lowercased the same way, the one definition every level
    uses (the row evaluation and the value sets that prune). ``'%literal%'`` is
    searched for in a string array's buffer at once (:func:`_contains`)."""
    if ignore_case:
        pattern = pc.utf8_lower(pa.scalar(pattern, pa.string())).as_py()
        values = pc.utf8_lower(values)
    anchored = _anchored_literal(pattern)
    if anchored is None:
        return pc.match_like(values, pattern=pattern)
    literal, head, tail = anchored
    if head and tail and literal and not any(c in literal for c in "%_\\"):
        return _contains(values, literal)
    if "\\" not in literal:
        return pc.match_like(values, pattern=pattern)
    # Arrow's shortcuts for these forms keep an escaped backslash escaped (pyarrow
    # 26: '%\\\\' matches nothing), so the unescaped literal goes to the kernels.
    if head and tail:
        return pc.match_substring(values, pattern=literal)
    if head:
        return pc.ends_with(values, pattern=literal)
    if tail:
        return pc.starts_with(values, pattern=literal)
    kind = values.type if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.string()
    return pc.equal(values, pa.scalar(literal.encode() if pa.types.is_binary(kind)
                                      or pa.types.is_large_binary(kind) else literal, kind))


def _anchored_literal(pattern: str) -> tuple[str, bool, bool] | None:
    """An Arrow-form LIKE pattern that is one literal with at most a leading and a
    trailing ``%``: ``(literal unescaped, leading %, trailing %)``; None for any
    other pattern (``_``, or ``%`` inside)."""
    head = pattern.startswith("%")
    i = 1 if head else 0
    chars: list[str] = []
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            chars.append(pattern[i + 1])
            i += 2
            continue
        if ch == "%" and i == len(pattern) - 1 and (i > 0):
            return "".join(chars), head, True
        if ch in "%_\\":
            return None
        chars.append(ch)
        i += 1
    return "".join(chars), head, False


# At most this share of a chunk's rows found by :func:`_contains`' search, past
# which a match costs more as a Python step than Arrow's per-row kernel does.
_CONTAINS_MAX_SHARE = 1 / 16


def _contains(values: Any, literal: str) -> Any:
    """Which strings hold ``literal``: for a string array, the occurrences found in
    its data buffer at once (``re`` over the buffer: 41 against 118 ms for Arrow's
    per-row search of 4,000,000 strings, bench/like.py's column), each mapped to its
    row by the offsets and kept when it does not cross into the next string; UTF-8
    is self-synchronizing, so a found sequence starts at a character. Expressions,
    other types and frequent matches go to Arrow's ``match_substring``."""
    if isinstance(values, pa.ChunkedArray):
        return pa.chunked_array([_contains(c, literal) for c in values.chunks],
                                type=pa.bool_())
    if not isinstance(values, pa.Array) or values.type not in (pa.string(), pa.large_string()):
        return pc.match_substring(values, pattern=literal)
    n = len(values)
    bufs = values.buffers()
    if n == 0 or bufs[2] is None:
        return pc.match_substring(values, pattern=literal)
    width = 8 if values.type == pa.large_string() else 4
    offsets = np.frombuffer(bufs[1], dtype=np.int64 if width == 8 else np.int32,
                            count=n + 1, offset=values.offset * width)
    needle = literal.encode("utf-8")
    limit = max(64, int(n * _CONTAINS_MAX_SHARE))
    found = []
    for m in re.finditer(re.escape(needle), memoryview(bufs[2])[int(offsets[0]):int(offsets[-1])]):
        found.append(m.start())
        if len(found) > limit:
            return pc.match_substring(values, pattern=literal)
    starts = np.asarray(found, dtype=np.int64) + int(offsets[0])
    rows = np.searchsorted(offsets, starts, side="right") - 1
    inside = starts + len(needle) <= offsets[rows + 1].astype(np.int64)
    hits = np.zeros(n, dtype=np.bool_)
    hits[rows[inside]] = True
    # A null row stays NULL: NOT LIKE must not select it.
    return pa.array(hits, mask=values.is_null().to_numpy(zero_copy_only=False)
                    if values.null_count else None)


# Pattern leaves: answered by sets of values only (dictionaries, distinct sets,
# partition values), through :func:`pattern_mask`.
PATTERNS = frozenset({LeafOp.LIKE, LeafOp.NOT_LIKE, LeafOp.ILIKE, LeafOp.NOT_ILIKE,
                      LeafOp.REGEXP, LeafOp.NOT_REGEXP})
_NEGATED_PATTERNS = frozenset({LeafOp.NOT_LIKE, LeafOp.NOT_ILIKE, LeafOp.NOT_REGEXP})


def pattern_mask(values: Any, pred: BoundPredicate) -> Any:
    """Which of ``values`` (a string array, or an Expression) the pattern of the
    [I]LIKE or regexp leaf ``pred`` matches, its negation aside."""
    pattern = str(pred.values[0])
    if pred.op in (LeafOp.REGEXP, LeafOp.NOT_REGEXP):
        return pc.match_substring_regex(values, pattern=pattern)
    return like_mask(values, pattern, pred.op in (LeafOp.ILIKE, LeafOp.NOT_ILIKE))


def pattern_values(values: Sequence[str] | pa.Array, pred: BoundPredicate
                   ) -> tuple[bool, bool]:
    """Whether some, and whether every, one of ``values`` satisfies the pattern leaf
    ``pred`` (its negation included): the row evaluation's kernel over a set."""
    arr = values if isinstance(values, pa.Array) else pa.array(values, pa.string())
    mask = pattern_mask(arr, pred)
    some, every = bool(pc.any(mask).as_py()), bool(pc.all(mask).as_py())
    return (not every, not some) if pred.op in _NEGATED_PATTERNS else (some, every)


def _predicate_mask(pred: BoundPredicate, arr: Any) -> Any:
    """The leaf's answer per row (NULL where SQL says unknown). Every operator has
    its case; a new one fails type checking (``assert_never``) until it has one."""
    op = pred.op
    match op:
        case LeafOp.EQ | LeafOp.NE | LeafOp.LT | LeafOp.LE | LeafOp.GT | LeafOp.GE:
            return _compare_mask(pred, arr)
        case LeafOp.IN:
            return _found_mask(pred, arr)
        case LeafOp.NOT_IN:
            return pc.and_(pc.invert(_found_mask(pred, arr)), pc.is_valid(arr))
        case LeafOp.IS_NULL:
            return pc.is_null(arr)
        case LeafOp.IS_NOT_NULL:
            return pc.is_valid(arr)
        case LeafOp.IS_NAN:
            return pc.is_nan(arr)
        case LeafOp.IS_NOT_NAN:
            return pc.invert(pc.is_nan(arr))
        case LeafOp.STARTS_WITH:
            return _prefix_mask(pred, arr)
        case LeafOp.NOT_STARTS_WITH:
            return pc.invert(_prefix_mask(pred, arr))
        case LeafOp.LIKE | LeafOp.ILIKE | LeafOp.REGEXP:
            return pattern_mask(arr, pred)
        case LeafOp.NOT_LIKE | LeafOp.NOT_ILIKE | LeafOp.NOT_REGEXP:
            return pc.invert(pattern_mask(arr, pred))
        case _:
            assert_never(op)


def _spread(per_value: Any, indices: Any) -> Any:
    """The per-dictionary-value answer spread over the rows (a NULL index is False).

    A take over a million indices costs several times an integer compare, and a
    selective predicate matches few dictionary values: compare indices to those.
    """
    hits = np.flatnonzero(np.asarray(per_value, dtype=np.bool_))
    if len(hits) == 0:
        return pa.array(np.zeros(len(indices), dtype=np.bool_))
    if len(hits) <= 2:
        mask = pc.equal(indices, pa.scalar(int(hits[0]), indices.type))
        if len(hits) == 2:
            mask = pc.or_(mask, pc.equal(indices, pa.scalar(int(hits[1]), indices.type)))
        return _no_null(mask)
    return _no_null(pc.take(per_value, indices))


def _no_null(mask: Any) -> Any:
    """NULL as False; a mask without nulls as it is (fill_null copies it every time)."""
    return pc.fill_null(mask, False) if mask.null_count else mask


class _Mask(BoundVisitor[Any]):
    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.arrays: dict[tuple[str, ...], Any] = {}

    def _constant(self, value: bool) -> pa.Array:
        return pa.array(np.full(self.table.num_rows, value, dtype=np.bool_))

    def visit_true(self) -> Any:
        return self._constant(True)

    def visit_false(self) -> Any:
        return self._constant(False)

    def visit_and(self, left: Any, right: Any) -> Any:
        return pc.and_(left, right)

    def visit_or(self, left: Any, right: Any) -> Any:
        return pc.or_(left, right)

    def visit_condition(self, cond: BoundCondition) -> Any:
        from pqindex.expr.compute import condition_mask  # it imports like_mask from here

        paths = {leaf.name: leaf.path for leaf in cond.leaves}

        def column(name: str) -> Any:
            path = paths[name]
            if path not in self.arrays:
                self.arrays[path] = _column(self.table, path)
            return self.arrays[path]

        return _no_null(condition_mask(cond.term, column, self.table.num_rows))

    def visit_predicate(self, pred: BoundPredicate) -> Any:
        path = pred.leaf.path
        if path not in self.arrays:
            self.arrays[path] = _column(self.table, path)
        arr = self.arrays[path]
        if pa.types.is_dictionary(arr.type):
            if pred.op in (LeafOp.IS_NULL, LeafOp.IS_NOT_NULL):
                return _no_null(_predicate_mask(pred, arr.indices))
            per_value = _no_null(_predicate_mask(pred, arr.dictionary))
            return _spread(per_value, arr.indices)
        return _no_null(_predicate_mask(pred, arr))


def to_arrow_mask(expr: BoundExpr, table: pa.Table) -> pa.BooleanArray:
    """One boolean per row of ``table``: True where ``expr`` is TRUE (never NULL)."""
    mask = visit_bound(expr, _Mask(table))
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks() if mask.num_chunks else pa.array([], pa.bool_())
    assert isinstance(mask, pa.BooleanArray)
    return mask


_NUMPY_COMPARE = {
    LeafOp.EQ: np.equal, LeafOp.NE: np.not_equal, LeafOp.LT: np.less,
    LeafOp.LE: np.less_equal, LeafOp.GT: np.greater, LeafOp.GE: np.greater_equal,
}


def numpy_values_mask(
    expr: BoundExpr, dtype: np.dtype[Any]
) -> Callable[[np.ndarray], np.ndarray] | None:
    """``expr`` as a function of a column's non-null values (a numpy array of the
    integer ``dtype``) giving :func:`to_arrow_mask`'s answer for them, without Arrow
    arrays: comparisons, IN / NOT IN and NULL tests on one integer column, under AND
    / OR. None for anything else (floats, NaN tests, other types, a literal the dtype
    cannot hold), which :func:`to_arrow_mask` evaluates. Null rows are the caller's
    to ask :func:`to_arrow_mask` about."""
    if dtype.kind not in "iu":
        return None
    info = np.iinfo(dtype)

    def literal(v: Value) -> Any:
        if type(v) is not int or not info.min <= v <= info.max:
            raise _NotNumpy
        return dtype.type(v)

    def build(e: BoundExpr) -> Callable[[np.ndarray], np.ndarray]:
        if isinstance(e, BoundTrue):
            return lambda a: np.ones(a.shape, dtype=np.bool_)
        if isinstance(e, BoundFalse):
            return lambda a: np.zeros(a.shape, dtype=np.bool_)
        if isinstance(e, (BoundAnd, BoundOr)):
            parts = [build(x) for x in (e.left, e.right)]
            both = np.logical_and if isinstance(e, BoundAnd) else np.logical_or
            return lambda a: both(parts[0](a), parts[1](a))
        if not isinstance(e, BoundPredicate):
            raise _NotNumpy
        op = e.op
        if op in _NUMPY_COMPARE:
            fn, v = _NUMPY_COMPARE[op], literal(e.values[0])
            return lambda a: fn(a, v)
        if op in (LeafOp.IN, LeafOp.NOT_IN):
            vs = _numpy_in_values(e, dtype, literal)
            invert = op == LeafOp.NOT_IN
            return lambda a: np.isin(a, vs, invert=invert)
        if op in (LeafOp.IS_NULL, LeafOp.IS_NOT_NULL):  # of non-null values
            return build(BoundFalse() if op == LeafOp.IS_NULL else BoundTrue())
        raise _NotNumpy

    leaves = _small_leaves(expr)
    if leaves is None or len({p.leaf.index for p in leaves}) > 1:
        return None
    try:
        return build(expr)
    except _NotNumpy:
        return None


class _NotNumpy(Exception):
    """The expression is left to pyarrow.compute."""


def _numpy_in_values(pred: BoundPredicate, dtype: np.dtype[Any],
                     literal: Callable[[Value], Any], ordered: bool = False) -> np.ndarray:
    """The IN list as an array of ``dtype`` (``ordered``: sorted), once per
    predicate and dtype (every chunk of every file asks); _NotNumpy when a value
    does not fit, as ``literal`` decides."""
    if ordered:
        key: Any = ("numpy_values_sorted", dtype)
        got_sorted: np.ndarray | None = pred.memo.get(key)
        if got_sorted is None:
            got_sorted = pred.memo[key] = np.sort(_numpy_in_values(pred, dtype, literal))
        return got_sorted
    key = ("numpy_values", dtype)
    got: np.ndarray | None = pred.memo.get(key)
    if got is None:
        info = np.iinfo(dtype)
        ints: tuple[int, ...] = pred.values  # type: ignore[assignment]  # when all are
        if all(type(v) is int for v in ints) and (
                not ints or (info.min <= min(ints) and max(ints) <= info.max)):
            got = np.array(ints, dtype=dtype)
        else:
            got = np.array([literal(v) for v in pred.values], dtype=dtype)
        pred.memo[key] = got
    return got


# Nodes of an expression numpy_values_mask takes at most (its functions nest as the
# expression does; a wider one is left to pyarrow.compute).
_NUMPY_MAX_NODES = 64


def _small_leaves(expr: BoundExpr) -> list[BoundPredicate] | None:
    """The predicates of ``expr``, found without recursion; None past
    _NUMPY_MAX_NODES nodes."""
    out: list[BoundPredicate] = []
    todo = [expr]
    seen = 0
    while todo:
        e = todo.pop()
        seen += 1
        if seen > _NUMPY_MAX_NODES:
            return None
        if isinstance(e, (BoundAnd, BoundOr)):
            todo += [e.left, e.right]
        elif isinstance(e, BoundPredicate):
            out.append(e)
    return out


def _expr_scalar(value: Value) -> Any:
    plain = _plain(value)
    if isinstance(plain, (Decimal, dt.date, dt.time, bool, int, float, str, bytes)):
        return pa.scalar(plain)
    return plain


class _Expression(BoundVisitor[Any]):
    def visit_true(self) -> Any:
        return pc.scalar(True)

    def visit_false(self) -> Any:
        return pc.scalar(False)

    def visit_and(self, left: Any, right: Any) -> Any:
        return left & right

    def visit_or(self, left: Any, right: Any) -> Any:
        return left | right

    def visit_condition(self, cond: BoundCondition) -> Any:
        raise UserInputError(f"{term_sql(cond.term)}: conditions on expressions have no "
                             "pyarrow Expression form here; use to_arrow_mask")

    def visit_predicate(self, pred: BoundPredicate) -> Any:
        field = pc.field(*pred.leaf.path)
        if pred.value_type.kind == Kind.FLOAT16:
            field = field.cast(pa.float32())  # exact; compute kernels lack half floats
        elif pred.value_type.kind == Kind.UUID:
            field = field.cast(pa.binary(16))  # the uuid extension has no kernels
        op = pred.op
        match op:
            case LeafOp.EQ | LeafOp.NE | LeafOp.LT | LeafOp.LE | LeafOp.GT | LeafOp.GE:
                return _COMPARE[op](field, _expr_scalar(pred.values[0]))
            case LeafOp.IN:
                return self._found(pred, field)
            case LeafOp.NOT_IN:
                return ~self._found(pred, field) & field.is_valid()
            case LeafOp.IS_NULL:
                return field.is_null()
            case LeafOp.IS_NOT_NULL:
                return field.is_valid()
            case LeafOp.IS_NAN:
                return pc.is_nan(field)
            case LeafOp.IS_NOT_NAN:
                return ~pc.is_nan(field)
            case LeafOp.STARTS_WITH:
                return self._prefix(pred, field)
            case LeafOp.NOT_STARTS_WITH:
                return ~self._prefix(pred, field)
            case LeafOp.LIKE | LeafOp.ILIKE | LeafOp.REGEXP:
                return pattern_mask(field, pred)
            case LeafOp.NOT_LIKE | LeafOp.NOT_ILIKE | LeafOp.NOT_REGEXP:
                return ~pattern_mask(field, pred)
            case _:
                assert_never(op)

    @staticmethod
    def _found(pred: BoundPredicate, field: Any) -> Any:
        values = pred.memo.get("expr_value_set")
        if values is None:
            values = pred.memo["expr_value_set"] = pa.array(
                [_expr_scalar(v) for v in pred.values])
        if pa.types.is_floating(values.type):
            # -0.0 and 0.0 hash apart in is_in; adding +0.0 maps -0.0 to 0.0.
            return pc.add(field, 0.0).isin(pc.add(values, 0.0))
        return field.isin(values)

    @staticmethod
    def _prefix(pred: BoundPredicate, field: Any) -> Any:
        prefix = pred.values[0]
        if isinstance(prefix, bytes):
            return pc.equal(pc.binary_slice(field, 0, len(prefix)), pa.scalar(prefix))
        return pc.starts_with(field, pattern=str(prefix))


def to_pyarrow_expression(expr: BoundExpr) -> pc.Expression:
    """The same predicate as a ``pyarrow.compute.Expression`` (NULL drops the row)."""
    result = visit_bound(expr, _Expression())
    assert isinstance(result, pc.Expression)
    return result


def mask_bools(mask: pa.BooleanArray) -> np.ndarray:
    """``mask`` as a numpy bool array (a fresh one); a NULL counts as False. Unpacked
    from the bitmap by numpy: ``to_numpy`` goes through pandas' converter, one bit at
    a time (0.50 against 0.03 ms for 500,000 values)."""
    if mask.null_count:
        mask = pc.fill_null(mask, False)
    off, n = mask.offset, len(mask)
    if n == 0:
        return np.zeros(0, dtype=np.bool_)
    data = np.frombuffer(mask.buffers()[1], dtype=np.uint8)[off // 8 : (off + n + 7) // 8]
    bits = np.unpackbits(data, bitorder="little", count=off % 8 + n)[off % 8 :]
    return bits.view(np.bool_)


# Masks up to this long are turned into positions by numpy alone.
_SMALL_MASK = 4096


def true_positions(mask: pa.BooleanArray) -> np.ndarray:
    """Positions (int64, ascending) where ``mask`` is True; a NULL counts as False.

    A selective predicate leaves few True bits: then the value bitmap is scanned
    a 64-bit word at a time and only the bytes holding a True bit are expanded,
    several times cheaper than pyarrow's ``indices_nonzero``, which visits every
    row (and is kept for dense masks, where it is the faster).
    """
    n = len(mask)
    if n <= _SMALL_MASK and not mask.null_count:
        # numpy keeps the GIL for so few values; a pyarrow call gives it up and, on a
        # pool thread, waits up to the switch interval to get it back (a dictionary's
        # 50 entries: 3 us alone, 150 us while another thread runs Python).
        return np.flatnonzero(mask_bools(mask)).astype(np.int64, copy=False)
    if mask.null_count:
        mask = pc.fill_null(mask, False)
    count = mask.true_count
    if count == 0:
        return np.empty(0, dtype=np.int64)
    if count * 64 >= n:
        return np.asarray(pc.indices_nonzero(mask).to_numpy(), dtype=np.int64)
    off = mask.offset
    first, stop = off // 8, (off + n + 7) // 8
    data = np.frombuffer(mask.buffers()[1], dtype=np.uint8)[first:stop]
    whole = len(data) // 8 * 8
    words = np.flatnonzero(data[:whole].view(np.uint64))
    candidates = np.concatenate(
        ((words[:, None] * 8 + np.arange(8)).ravel(), np.arange(whole, len(data)))
    )
    nz = candidates[data[candidates] != 0]
    bits = np.unpackbits(data[nz], bitorder="little").reshape(-1, 8).astype(bool)
    # The first and last bytes may hold bits of rows outside the slice.
    pos = (nz[:, None] * 8 + np.arange(8))[bits] - (off - first * 8)
    return np.asarray(pos[(pos >= 0) & (pos < n)], dtype=np.int64)
