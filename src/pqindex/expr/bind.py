"""Bind a predicate to a file's schema: resolve columns, coerce literals once.

``bind`` resolves every column to its ``LeafColumn``, pushes NOT to the leaves
(``normalize.push_not``), then turns each leaf into a ``BoundPredicate`` whose
values live in the column's domain (the Python types ``ValueType.decode``
returns) with their ``sort_key``s under ``bound_order(leaf)``, ready to compare
with decoded bounds.

Literals that cannot be represented exactly are folded, never rounded blindly:
``uint8_col < 300`` becomes ``IS NOT NULL`` (NULL rows still do not match),
``dec2 = 1.005`` becomes FALSE, ``dec2 < 1.005`` becomes ``dec2 <= 1.00``.
Folding happens after NOT push-down, where no NOT can turn a FALSE into a TRUE.
"""

from __future__ import annotations

import datetime as dt
import math
import struct
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any, Generic, TypeVar

from pqindex.errors import UserInputError
from pqindex.expr.derive import implied_leaves
from pqindex.expr.nodes import (
    Column,
    Compare,
    Condition,
    Expr,
    ExprVisitor,
    Func,
    In,
    IsNan,
    IsNull,
    LeafExpr,
    Like,
    Literal,
    LiteralValue,
    Regexp,
    StartsWith,
    Term,
    leaf_exprs,
    leaf_sql,
    literal_sql,
    literal_type_name,
    regexp_prefix,
    replace_columns,
    starts_with_sql,
    term_sql,
    visit,
)
from pqindex.expr.normalize import push_not
from pqindex.expr.term_types import TermType, column_type, term_type
from pqindex.format.match import NEGATION, LeafOp
from pqindex.format.schema import LeafColumn, PhysicalType, Schema
from pqindex.format.value_type import Kind, NanoTimestamp, Value, ValueType
from pqindex.format.values import bound_order

__all__ = [
    "BoundAnd",
    "BoundCondition",
    "BoundExpr",
    "BoundFalse",
    "BoundOr",
    "BoundPredicate",
    "BoundTrue",
    "BoundVisitor",
    "absent_columns",
    "bind",
    "bound_leaves",
    "has_condition",
    "visit_bound",
]

T = TypeVar("T")

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)
_LIKES = frozenset({LeafOp.LIKE, LeafOp.NOT_LIKE, LeafOp.ILIKE, LeafOp.NOT_ILIKE})
_UNIT_NANOS = {"millis": 10**6, "micros": 10**3, "nanos": 1}
_INT64 = (-(2**63), 2**63 - 1)
_GRID_KINDS = frozenset({Kind.INT, Kind.UINT, Kind.DECIMAL, Kind.DATE, Kind.TIMESTAMP,
                         Kind.TIME})
_COMPARABLE_KINDS = _GRID_KINDS | {Kind.BOOL, Kind.FLOAT, Kind.DOUBLE, Kind.FLOAT16,
                                   Kind.STRING, Kind.BINARY, Kind.UUID}


# ---------------------------------------------------------------- bound nodes


class BoundExpr:
    """A predicate bound to a schema: no NOT, literals in the columns' domains."""

    __slots__ = ()

    def __str__(self) -> str:
        return visit_bound(self, _BoundPrinter())[0]


@dataclass(frozen=True, slots=True)
class BoundTrue(BoundExpr):
    """Every row matches."""

    def __str__(self) -> str:
        return "TRUE"


@dataclass(frozen=True, slots=True)
class BoundFalse(BoundExpr):
    """No row matches."""

    def __str__(self) -> str:
        return "FALSE"


@dataclass(frozen=True, slots=True)
class BoundPredicate(BoundExpr):
    """One leaf: ``op`` on ``leaf`` with ``values`` coerced to the column's type.

    ``keys`` are the values' sort keys under ``bound_order(leaf)`` (in the same
    order as ``values``), comparable with the keys of decoded bounds. IN / NOT IN
    values are distinct and sorted by key.
    """

    leaf: LeafColumn
    value_type: ValueType
    op: LeafOp
    values: tuple[Value, ...]
    keys: tuple[Any, ...]
    # Derived forms of the values other layers compute once per predicate (pruning
    # keys): a dataset asks the same predicate of thousands of files.
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def name(self) -> str:
        """The column's dotted path."""
        return self.leaf.name

    def __hash__(self) -> int:
        # LeafColumn holds a mutable SchemaElement; its path identifies it here.
        return hash((self.leaf.index, self.leaf.path, self.op, self.keys))


class _ValuesToken:
    """A predicate's values as a dictionary key, hashed once: per-file caches key
    their answers by the values, and hashing a 100,000-value tuple for every chunk
    asked costs more than the answer."""

    __slots__ = ("_hash", "values")

    def __init__(self, values: tuple[Value, ...]) -> None:
        self.values = values
        self._hash = hash((type(self).__name__, values))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ValuesToken) and (
            self.values is other.values or (self._hash == other._hash
                                            and self.values == other.values))


def values_token(pred: BoundPredicate) -> object:
    """``pred.values`` as a key of cached answers, hashed once per predicate
    (TypeError for an unhashable literal, as hashing the values would raise)."""
    got = pred.memo.get("values_token")
    if got is None:
        got = pred.memo["values_token"] = _ValuesToken(pred.values)
    return got


@dataclass(frozen=True, slots=True)
class BoundCondition(BoundExpr):
    """A predicate on value expressions (``nodes.Condition``), evaluated on the rows
    (``expr/compute.py``). No index answers it: planning treats it as "some rows may
    match", and prunes with the leaves ``bind`` derives from it and ANDs beside it.

    ``term`` names columns as the unbound tree does (columns the file lacks already
    replaced by NULL); ``leaves`` are the columns it reads.
    """

    term: Term
    leaves: tuple[LeafColumn, ...]
    # ``a op b`` on two columns of one ordered type: (op, a, b), each column as an
    # IS NOT NULL leaf the levels' evidence is asked for; min/max of both prune it.
    compared: tuple[LeafOp, BoundPredicate, BoundPredicate] | None = None

    def __hash__(self) -> int:
        return hash((self.term, tuple(leaf.path for leaf in self.leaves)))


@dataclass(frozen=True, slots=True)
class BoundAnd(BoundExpr):
    left: BoundExpr
    right: BoundExpr


@dataclass(frozen=True, slots=True)
class BoundOr(BoundExpr):
    left: BoundExpr
    right: BoundExpr


def bound_and(left: BoundExpr, right: BoundExpr) -> BoundExpr:
    """AND folding TRUE / FALSE."""
    if isinstance(left, BoundFalse) or isinstance(right, BoundTrue):
        return left
    if isinstance(right, BoundFalse) or isinstance(left, BoundTrue):
        return right
    return BoundAnd(left, right)


def bound_or(left: BoundExpr, right: BoundExpr) -> BoundExpr:
    """OR folding TRUE / FALSE."""
    if isinstance(left, BoundTrue) or isinstance(right, BoundFalse):
        return left
    if isinstance(right, BoundTrue) or isinstance(left, BoundFalse):
        return right
    return BoundOr(left, right)


class BoundVisitor(ABC, Generic[T]):
    """Per-node logic for ``visit_bound``; children arrive already visited."""

    @abstractmethod
    def visit_true(self) -> T: ...

    @abstractmethod
    def visit_false(self) -> T: ...

    @abstractmethod
    def visit_and(self, left: T, right: T) -> T: ...

    @abstractmethod
    def visit_or(self, left: T, right: T) -> T: ...

    @abstractmethod
    def visit_predicate(self, pred: BoundPredicate) -> T: ...

    @abstractmethod
    def visit_condition(self, cond: BoundCondition) -> T: ...


def visit_bound(expr: BoundExpr, visitor: BoundVisitor[T]) -> T:
    """Post-order walk of a bound tree; iterative, like ``nodes.visit``."""
    results: list[T] = []
    stack: list[tuple[BoundExpr, bool]] = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        if isinstance(node, (BoundAnd, BoundOr)):
            if not expanded:
                stack += [(node, True), (node.right, False), (node.left, False)]
                continue
            right = results.pop()
            left = results.pop()
            results.append(visitor.visit_and(left, right) if isinstance(node, BoundAnd)
                           else visitor.visit_or(left, right))
        elif isinstance(node, BoundPredicate):
            results.append(visitor.visit_predicate(node))
        elif isinstance(node, BoundCondition):
            results.append(visitor.visit_condition(node))
        elif isinstance(node, BoundTrue):
            results.append(visitor.visit_true())
        elif isinstance(node, BoundFalse):
            results.append(visitor.visit_false())
        else:
            raise TypeError(f"not a bound predicate: {node!r}")
    return results.pop()


def _operands(node: BoundAnd | BoundOr) -> list[BoundExpr]:
    """The operands of a chain of the same connective, left to right (iterative)."""
    kind = type(node)
    out: list[BoundExpr] = []
    stack: list[BoundExpr] = [node]
    while stack:
        e = stack.pop()
        if type(e) is kind:
            assert isinstance(e, (BoundAnd, BoundOr))
            stack += [e.right, e.left]
        else:
            out.append(e)
    return out


def fold_bound(
    expr: BoundExpr,
    *,
    leaf: Callable[[BoundPredicate], T],
    true: T,
    false: T,
    and_: Callable[[T, T], T],
    or_: Callable[[T, T], T],
    and_done: Callable[[T], bool],
    or_done: Callable[[T], bool],
    unknown: T | None = None,
    condition: Callable[[BoundCondition], T] | None = None,
) -> T:
    """Evaluate a bound tree with short-circuits, without recursion.

    Chains of one connective are flattened; an AND stops at the first operand
    for which ``and_done`` holds (an OR at ``or_done``), leaving the rest
    unevaluated, as the recursive form did. Depth costs heap, not stack.
    ``unknown``: the answer for a :class:`BoundCondition` (no index knows it), or
    ``condition`` when given.
    """
    # Frames: [is_and, operands, next operand, accumulated value or None].
    frames: list[list[Any]] = []
    node: BoundExpr = expr
    while True:
        while isinstance(node, (BoundAnd, BoundOr)):
            ops = _operands(node)
            frames.append([isinstance(node, BoundAnd), ops, 1, None])
            node = ops[0]
        if isinstance(node, BoundPredicate):
            value = leaf(node)
        elif isinstance(node, BoundCondition) and condition is not None:
            value = condition(node)
        elif isinstance(node, BoundCondition) and unknown is not None:
            value = unknown
        elif isinstance(node, BoundTrue):
            value = true
        elif isinstance(node, BoundFalse):
            value = false
        else:
            raise TypeError(f"not a bound predicate: {node!r}")
        while frames:
            frame = frames[-1]
            is_and, ops, nxt, acc = frame
            acc = value if acc is None else (and_(acc, value) if is_and else or_(acc, value))
            frame[3] = acc
            if nxt == len(ops) or (and_done(acc) if is_and else or_done(acc)):
                frames.pop()
                value = acc
                continue
            frame[2] = nxt + 1
            node = ops[nxt]
            break
        else:
            return value


def _value_sql(value: Value) -> str:
    if isinstance(value, NanoTimestamp):
        return f"TIMESTAMP '{value}'"
    if value is None or isinstance(value, (bool, int, float, Decimal, str, bytes, dt.date,
                                           dt.time, uuid.UUID)):
        return literal_sql(value)
    return f"'{value}'"


class _BoundPrinter(BoundVisitor[tuple[str, int]]):
    def visit_true(self) -> tuple[str, int]:
        return "TRUE", 3

    def visit_false(self) -> tuple[str, int]:
        return "FALSE", 3

    @staticmethod
    def _join(word: str, strength: int, *parts: tuple[str, int]) -> tuple[str, int]:
        return f" {word} ".join(t if s >= strength else f"({t})" for t, s in parts), strength

    def visit_and(self, left: tuple[str, int], right: tuple[str, int]) -> tuple[str, int]:
        return self._join("AND", 2, left, right)

    def visit_or(self, left: tuple[str, int], right: tuple[str, int]) -> tuple[str, int]:
        return self._join("OR", 1, left, right)

    def visit_condition(self, cond: BoundCondition) -> tuple[str, int]:
        return term_sql(cond.term), 3

    def visit_predicate(self, pred: BoundPredicate) -> tuple[str, int]:
        name = str(Column(pred.name))
        if pred.op in (LeafOp.STARTS_WITH, LeafOp.NOT_STARTS_WITH):
            prefix = pred.values[0]
            assert isinstance(prefix, (str, bytes))
            return starts_with_sql(name, prefix, pred.op == LeafOp.NOT_STARTS_WITH), 3
        vals = [_value_sql(v) for v in pred.values]
        if pred.op in _LIKES and "\\" in str(pred.values[0]):
            vals.append(_value_sql("\\"))  # the pattern is Arrow's: a backslash escapes
        return leaf_sql(name, pred.op, vals), 3


# ---------------------------------------------------------------- column resolution


def _resolve(schema: Schema, name: str) -> LeafColumn:
    leaf = schema.leaf(name)
    if leaf is None:
        parts = tuple(name.split("."))
        below = [lf.name for lf in schema.leaves if lf.path[:len(parts)] == parts]
        if below:
            shown = ", ".join(below[:8]) + (", ..." if len(below) > 8 else "")
            raise UserInputError(
                f"{name!r} is a group (struct, list or map), not a leaf column; "
                f"its leaves: {shown}", column=name)
        names = [lf.name for lf in schema.leaves]
        import difflib  # only to word an error (~5 ms to import)

        close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
        if not close:
            close = [n for n in names if n.lower() == name.lower()]
        if close:
            hint = "did you mean " + ", ".join(repr(c) for c in close) + "?"
        else:
            hint = "columns: " + ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
        raise UserInputError(f"unknown column {name!r}; {hint}", column=name)
    if leaf.nested:
        raise UserInputError(
            "predicates on repeated (list/map) columns are not supported", column=name)
    return leaf


# ---------------------------------------------------------------- literal coercion


class _Impossible(Exception):
    """The literal can equal no value of the column (out of range, between grid points)."""


@dataclass(frozen=True, slots=True)
class _Target:
    """A resolved column and everything coercion needs about it."""

    leaf: LeafColumn
    vt: ValueType
    key: Callable[[Value], Any]

    @property
    def name(self) -> str:
        return self.leaf.name

    def mismatch(self, value: LiteralValue, what: str = "compare") -> UserInputError:
        return UserInputError(
            f"cannot {what} {self.vt.name} with the {literal_type_name(value)} literal "
            f"{literal_sql(value)}", column=self.name)


def _target(leaf: LeafColumn) -> _Target:
    order = bound_order(leaf)
    vt = order.value_type
    key: Callable[[Value], Any] = order.key if order.usable else vt.sort_key
    return _Target(leaf, vt, key)


# -- grid kinds: integers, decimals and temporal types are integer ticks; a literal is
# -- an exact rational number of ticks (or +-inf), and rounding depends on the operator.


def _grid_range(vt: ValueType) -> tuple[int | None, int | None]:
    k = vt.kind
    if k == Kind.INT:
        w = vt.bit_width or 64
        return -(2 ** (w - 1)), 2 ** (w - 1) - 1
    if k == Kind.UINT:
        return 0, 2 ** (vt.bit_width or 64) - 1
    if k == Kind.DECIMAL:
        if vt.precision is not None:
            return -(10**vt.precision - 1), 10**vt.precision - 1
        if vt.physical == PhysicalType.INT32:
            return -(2**31), 2**31 - 1
        if vt.physical == PhysicalType.INT64:
            return _INT64
        return None, None
    if k == Kind.DATE:
        return (dt.date.min - _EPOCH_DATE).days, (dt.date.max - _EPOCH_DATE).days
    if k == Kind.TIME:
        assert vt.unit is not None
        return 0, 86_400 * 10**9 // _UNIT_NANOS[vt.unit] - 1
    return _INT64  # TIMESTAMP


def _micros(d: dt.datetime) -> int:
    delta = d - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 10**6 + delta.microseconds


def _parse_temporal(target: _Target, text: str) -> dt.date | dt.datetime | dt.time:
    """An ISO string compared with a temporal column, as SQL engines cast it."""
    try:
        if target.vt.kind == Kind.TIME:
            return dt.time.fromisoformat(text.strip())
        if target.vt.kind == Kind.DATE and len(text.strip()) == 10:
            return dt.date.fromisoformat(text.strip())
        return dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise UserInputError(
            f"cannot compare {target.vt.name} with the string {literal_sql(text)}: "
            "not an ISO date/time", column=target.name) from None


def _naive_utc(target: _Target, d: dt.datetime) -> dt.datetime:
    """Naive wall-clock for comparison: aware literals are converted to UTC.

    A naive literal against a UTC-adjusted column is taken as UTC; an aware
    literal against a local (not adjusted) column has no defined meaning.
    """
    if d.tzinfo is None or d.utcoffset() is None:
        return d
    if target.vt.kind == Kind.TIMESTAMP and not target.vt.utc:
        raise UserInputError(
            f"cannot compare {target.vt.name} (no time zone) with the time-zoned "
            f"literal {literal_sql(d)}", column=target.name)
    return d.astimezone(dt.UTC).replace(tzinfo=None)


def _ticks(target: _Target, value: LiteralValue) -> Fraction | float:
    """The literal as an exact number of the column's ticks; +-inf stays a float."""
    vt = target.vt
    k = vt.kind
    if k in (Kind.INT, Kind.UINT, Kind.DECIMAL):
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            raise target.mismatch(value)
        if isinstance(value, float) and not math.isfinite(value):
            return value
        if isinstance(value, Decimal) and not value.is_finite():
            return float(value)
        scale = (vt.scale or 0) if k == Kind.DECIMAL else 0
        return Fraction(value) * Fraction(10) ** scale
    if isinstance(value, str):
        value = _parse_temporal(target, value)
    assert vt.unit is not None or k == Kind.DATE
    if k == Kind.TIME:
        if not isinstance(value, dt.time):
            raise target.mismatch(value)
        offset = value.utcoffset()
        if offset:
            raise UserInputError(f"cannot compare {vt.name} with a TIME literal at UTC "
                                 f"offset {offset}", column=target.name)
        micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 10**6 \
            + value.microsecond
        return Fraction(micros * 1000, _UNIT_NANOS[vt.unit or "micros"])
    if isinstance(value, dt.datetime):
        micros = _micros(_naive_utc(target, value))
    elif isinstance(value, dt.date):
        micros = (value - _EPOCH_DATE).days * 86_400 * 10**6  # midnight
    else:
        raise target.mismatch(value)
    if k == Kind.DATE:
        return Fraction(micros, 86_400 * 10**6)
    return Fraction(micros * 1000, _UNIT_NANOS[vt.unit or "micros"])


def _from_ticks(vt: ValueType, ticks: int) -> Value:
    """The column-domain value of a tick count (as ``ValueType.decode`` would give it)."""
    k = vt.kind
    if k in (Kind.INT, Kind.UINT):
        return ticks
    if k == Kind.DECIMAL:
        return Decimal(ticks).scaleb(-(vt.scale or 0))
    if k == Kind.DATE:
        return _EPOCH_DATE + dt.timedelta(days=ticks)
    assert vt.unit is not None
    nanos = ticks * _UNIT_NANOS[vt.unit]
    if k == Kind.TIME:
        if vt.unit == "nanos":
            return ticks
        secs, us = divmod(nanos // 1000, 10**6)
        h, rest = divmod(secs, 3600)
        m, s = divmod(rest, 60)
        return dt.time(h, m, s, us, tzinfo=dt.UTC if vt.utc else None)
    if vt.unit == "nanos":
        return NanoTimestamp(nanos, bool(vt.utc))
    try:
        value = _EPOCH + dt.timedelta(microseconds=nanos // 1000)
    except OverflowError:
        return NanoTimestamp(nanos, bool(vt.utc))
    return value.replace(tzinfo=dt.UTC) if vt.utc else value


def _floor(x: Fraction) -> int:
    return x.numerator // x.denominator


def _ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


# Fold results for a comparison whose answer does not depend on the (non-null) value.
_ALL, _NONE = "all", "none"


def _grid_compare(target: _Target, op: LeafOp, value: LiteralValue) -> tuple[LeafOp, int] | str:
    """The comparison on ticks, or _ALL / _NONE when every non-null value answers alike."""
    ticks = _ticks(target, value)
    lo, hi = _grid_range(target.vt)
    if isinstance(ticks, float):  # NaN or +-inf
        if math.isnan(ticks):
            return _ALL if op == LeafOp.NE else _NONE
        above = ticks > 0
        if op == LeafOp.EQ:
            return _NONE
        if op == LeafOp.NE:
            return _ALL
        smaller = op in (LeafOp.LT, LeafOp.LE)
        return _ALL if smaller == above else _NONE
    if op in (LeafOp.EQ, LeafOp.NE):
        on_grid = ticks.denominator == 1 and (lo is None or lo <= ticks) \
            and (hi is None or ticks <= hi)
        if not on_grid:
            return _NONE if op == LeafOp.EQ else _ALL
        return op, int(ticks)
    # x < 1.5 is x < 2; x <= 1.5 is x <= 1; x > 1.5 is x > 1; x >= 1.5 is x >= 2.
    k = _ceil(ticks) if op in (LeafOp.LT, LeafOp.GE) else _floor(ticks)
    below_all = lo is not None and (k <= lo if op in (LeafOp.LT, LeafOp.GE) else k < lo)
    above_all = hi is not None and (k >= hi if op in (LeafOp.LE, LeafOp.GT) else k > hi)
    if op in (LeafOp.LT, LeafOp.LE):
        if above_all:
            return _ALL
        if below_all:
            return _NONE
    else:
        if below_all:
            return _ALL
        if above_all:
            return _NONE
    return op, k


def _round_float(vt: ValueType, x: float) -> float:
    """The literal as the column's float type would store it (as SQL engines cast it).

    A literal beyond the type's range stays as it is: rounded to infinity it would
    make ``x > 70000`` false for an infinite FLOAT16 value.
    """
    fmt = {Kind.FLOAT: "<f", Kind.FLOAT16: "<e"}.get(vt.kind)
    if fmt is None or not math.isfinite(x):
        return x
    try:
        rounded = float(struct.unpack(fmt, struct.pack(fmt, x))[0])
    except OverflowError:
        return x
    return rounded if math.isfinite(rounded) else x


def _scalar(target: _Target, value: LiteralValue) -> Value:
    """A non-grid literal in the column's domain (TypeError-free: mismatch raises)."""
    vt = target.vt
    k = vt.kind
    if k in (Kind.FLOAT, Kind.DOUBLE, Kind.FLOAT16):
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            raise target.mismatch(value)
        try:
            x = float(value)
        except OverflowError:  # an int beyond the double range
            x = math.copysign(math.inf, value)
        return _round_float(vt, x)
    if k == Kind.BOOL:
        if not isinstance(value, bool):
            raise target.mismatch(value)
        return value
    if k == Kind.STRING:
        if not isinstance(value, str):
            raise target.mismatch(value)
        return value
    if k == Kind.BINARY:
        if isinstance(value, str):
            return value.encode("utf-8")
        if not isinstance(value, bytes):
            raise target.mismatch(value)
        return value
    if k == Kind.UUID:
        try:
            if isinstance(value, uuid.UUID):
                return value
            if isinstance(value, str):
                return uuid.UUID(value)
            if isinstance(value, bytes) and len(value) == 16:
                return uuid.UUID(bytes=value)
        except ValueError:
            pass
        raise target.mismatch(value)
    raise UserInputError(
        f"comparisons on {vt.name} columns are not supported (no usable order)",
        column=target.name)


def _predicate(target: _Target, op: LeafOp, values: tuple[Value, ...]) -> BoundPredicate:
    return BoundPredicate(target.leaf, target.vt, op, values,
                          tuple(target.key(v) for v in values))


def _not_null(target: _Target) -> BoundPredicate:
    return _predicate(target, LeafOp.IS_NOT_NULL, ())


def _check_comparable(target: _Target) -> None:
    if target.vt.kind not in _COMPARABLE_KINDS:
        raise UserInputError(
            f"comparisons on {target.vt.name} columns are not supported (no usable order)",
            column=target.name)


def _bind_compare(target: _Target, op: LeafOp, value: LiteralValue) -> BoundExpr:
    _check_comparable(target)
    if value is None:
        return BoundFalse()  # x op NULL is NULL: no row matches
    vt = target.vt
    if vt.kind in _GRID_KINDS:
        folded = _grid_compare(target, op, value)
        if folded == _ALL:
            return _not_null(target)
        if folded == _NONE:
            return BoundFalse()
        assert isinstance(folded, tuple)
        new_op, ticks = folded
        return _predicate(target, new_op, (_from_ticks(vt, ticks),))
    coerced = _scalar(target, value)
    if isinstance(coerced, float) and math.isnan(coerced):
        # IEEE: every comparison with NaN is false, except != which is true.
        return _not_null(target) if op == LeafOp.NE else BoundFalse()
    return _predicate(target, op, (coerced,))


def _bind_in(target: _Target, node: In) -> BoundExpr:
    _check_comparable(target)
    raw = [lit.value for lit in node.values]
    if node.negated and any(v is None for v in raw):
        return BoundFalse()  # x NOT IN (.., NULL) is never true
    coerced: dict[Any, Value] = {}
    kind = target.vt.kind
    if raw and kind in (Kind.INT, Kind.UINT) and all(type(v) is int for v in raw):
        # Python ints on an integer column: each is its own tick and its own key,
        # kept where the column's type can hold it (what _bind_compare decides one by
        # one, ~25 us each, 25 s for a list of MAX_IN_VALUES).
        lo, hi = _grid_range(target.vt)
        ints: list[int] = raw  # type: ignore[assignment]
        if not ((lo is None or lo <= min(ints)) and (hi is None or max(ints) <= hi)):
            ints = [i for i in ints if (lo is None or lo <= i) and (hi is None or i <= hi)]
        if not ints:
            return _not_null(target) if node.negated else BoundFalse()
        in_order = tuple(sorted(set(ints)))
        return BoundPredicate(target.leaf, target.vt, node.leaf_op, in_order, in_order)
    if raw and ((kind == Kind.STRING and all(type(v) is str for v in raw))
                or (kind == Kind.BINARY and all(type(v) is bytes for v in raw))):
        # Strings on a string column (bytes on a binary one) are their own values:
        # only their keys are computed.
        raw_values: list[Any] = raw
        coerced = dict(zip(map(target.key, raw_values), raw_values, strict=True))
        raw = []
    for v in raw:
        if v is None:
            continue  # x IN (.., NULL): the NULL can only add NULL, never TRUE
        one = _bind_compare(target, LeafOp.EQ, v)
        # A value no row can equal adds nothing to IN and removes nothing from NOT IN.
        if isinstance(one, BoundPredicate):
            coerced.setdefault(one.keys[0], one.values[0])
    if not coerced:
        return _not_null(target) if node.negated else BoundFalse()
    ordered = sorted(coerced.items(), key=lambda kv: kv[0])
    return BoundPredicate(target.leaf, target.vt, node.leaf_op,
                          tuple(v for _, v in ordered), tuple(k for k, _ in ordered))


def _bind_starts_with(target: _Target, node: StartsWith) -> BoundExpr:
    vt = target.vt
    prefix: str | bytes = node.prefix
    if vt.kind == Kind.STRING:
        if isinstance(prefix, bytes):
            try:
                prefix = prefix.decode("utf-8")
            except UnicodeDecodeError:
                raise target.mismatch(prefix, "match") from None
    elif vt.kind == Kind.BINARY:
        if isinstance(prefix, str):
            prefix = prefix.encode("utf-8")
    else:
        raise UserInputError(
            f"LIKE 'prefix%' needs a string or binary column, not {vt.name} "
            f"(pattern: {literal_type_name(prefix)} {literal_sql(prefix)})",
            column=target.name)
    if not prefix:  # LIKE '%': every non-null value
        return BoundFalse() if node.negated else _not_null(target)
    return _predicate(target, node.leaf_op, (prefix,))


def _bind_like(target: _Target, node: Like) -> BoundExpr:
    if target.vt.kind != Kind.STRING:
        word = "ILIKE" if node.ignore_case else "LIKE"
        raise UserInputError(
            f"{word} {literal_sql(node.pattern)} needs a string column, not {target.vt.name}",
            column=target.name)
    pattern = node.arrow_pattern  # what the evaluation and the value sets read
    if not pattern.strip("%"):  # '%%': every non-null value
        return BoundFalse() if node.negated else _not_null(target)
    return _predicate(target, node.leaf_op, (pattern,))


def _bind_regexp(target: _Target, node: Regexp) -> BoundExpr:
    import pyarrow as pa
    import pyarrow.compute as pc

    if target.vt.kind != Kind.STRING:
        raise UserInputError(
            f"regexp_matches() needs a string column, not {target.vt.name}", column=target.name)
    try:  # RE2's syntax, as the evaluation reads it: refused here, not per row group
        pc.match_substring_regex(pa.array([""], pa.string()), pattern=node.pattern)
    except pa.ArrowException as e:
        raise UserInputError(f"regexp_matches(): not a valid RE2 expression "
                             f"{literal_sql(node.pattern)}: {e}", column=target.name) from None
    leaf = _predicate(target, node.leaf_op, (node.pattern,))
    # '^lit...': a prefix match ANDed in, which min/max and the page index prune with.
    prefix = "" if node.negated else regexp_prefix(node.pattern)
    if not prefix:
        return leaf
    return bound_and(_predicate(target, LeafOp.STARTS_WITH, (prefix,)), leaf)


class _Binder(ExprVisitor[BoundExpr]):
    def __init__(self, targets: dict[str, _Target], absent_null: bool = True) -> None:
        self.targets = targets
        self.absent_null = absent_null

    def visit_true(self) -> BoundExpr:
        return BoundTrue()

    def visit_false(self) -> BoundExpr:
        return BoundFalse()

    def visit_not(self, child: BoundExpr) -> BoundExpr:
        raise AssertionError("NOT must be pushed down before binding")

    def visit_and(self, left: BoundExpr, right: BoundExpr) -> BoundExpr:
        return bound_and(left, right)

    def visit_or(self, left: BoundExpr, right: BoundExpr) -> BoundExpr:
        return bound_or(left, right)

    def visit_leaf(self, node: LeafExpr) -> BoundExpr:
        if isinstance(node, Condition):
            return self._bind_condition(node)
        target = self.targets.get(node.column.name)
        if target is None:  # a column the file lacks (bind's ``absent``)
            if not self.absent_null or node.leaf_op == LeafOp.IS_NULL:
                return BoundTrue()
            return BoundFalse()
        if isinstance(node, Compare):
            return _bind_compare(target, node.op, node.literal.value)
        if isinstance(node, In):
            return _bind_in(target, node)
        if isinstance(node, IsNull):
            return _predicate(target, node.leaf_op, ())
        if isinstance(node, IsNan):
            if not target.vt.is_float:
                raise UserInputError(
                    f"isnan() needs a floating-point column, not {target.vt.name}",
                    column=target.name)
            return _predicate(target, node.leaf_op, ())
        if isinstance(node, Like):
            return _bind_like(target, node)
        if isinstance(node, Regexp):
            return _bind_regexp(target, node)
        return _bind_starts_with(target, node)


    def _bind_condition(self, node: Condition) -> BoundExpr:
        """The condition with the leaves it implies ANDed before it (they prune; the
        condition itself is evaluated on the rows)."""
        names = node.columns
        missing = {n: Literal(None) for n in names if n not in self.targets}
        if missing and not self.absent_null:
            return BoundTrue()  # may keep too much, never too little
        value = replace_columns(node.term, missing) if missing else node.term
        types = {n: column_type(t.vt.kind) for n, t in self.targets.items()}
        for n in names:
            if n in types and types[n] == TermType.OTHER:
                target = self.targets[n]
                raise UserInputError(f"{term_sql(node.term)}: {target.vt.name} columns are not "
                                     "supported in expressions", column=n)
        result = term_type(value, types.__getitem__)
        if result not in (TermType.BOOLEAN, TermType.NULL):
            raise UserInputError(f"{term_sql(node.term)} is {result}, not a condition")
        out: BoundExpr = BoundCondition(value, tuple(
            self.targets[n].leaf for n in names if n in self.targets),
            self._compared(value))
        for implied in reversed(implied_leaves(value, types.__getitem__)):
            try:
                out = bound_and(visit(implied, self), out)
            except UserInputError:
                continue  # a bound that cannot be bound prunes nothing: the rows decide
        return out


    def _compared(self, value: Term) -> tuple[LeafOp, BoundPredicate, BoundPredicate] | None:
        """``a op b`` (or NOT of it) on two columns whose bounds compare as they do:
        one value type, or integers of any width; not floats (NaN), not strings
        (truncated bounds)."""
        negated = isinstance(value, Func) and value.name == "not"
        if negated:
            assert isinstance(value, Func)
            value = value.args[0]
        if not (isinstance(value, Func) and value.name in _TWO_COLUMN_OPS
                and all(isinstance(a, Column) and a.name in self.targets for a in value.args)):
            return None
        a, b = (self.targets[c.name] for c in value.args if isinstance(c, Column))
        kinds = {a.vt.kind, b.vt.kind}
        if not (a.vt == b.vt or kinds <= {Kind.INT, Kind.UINT}) or \
                not kinds <= _TWO_COLUMN_KINDS or a.leaf.nested or b.leaf.nested:
            return None
        if not (bound_order(a.leaf).usable and bound_order(b.leaf).usable):
            return None
        op = _TWO_COLUMN_OPS[value.name]
        if negated:  # not floats: NOT (a < b) is a >= b
            op = NEGATION[op]
        return op, _not_null(a), _not_null(b)


# Comparisons of two columns their min/max can rule out, and the kinds whose bounds
# are exact values of one order (no NaN, no truncation).
_TWO_COLUMN_OPS = {"<": LeafOp.LT, "<=": LeafOp.LE, ">": LeafOp.GT, ">=": LeafOp.GE,
                   "=": LeafOp.EQ}
_TWO_COLUMN_KINDS = frozenset({Kind.INT, Kind.UINT, Kind.DECIMAL, Kind.DATE, Kind.TIMESTAMP,
                               Kind.TIME})


def _leaf_columns(node: LeafExpr) -> list[str]:
    return node.columns if isinstance(node, Condition) else [node.column.name]


def columns(expr: Expr) -> list[str]:
    """The distinct column names ``expr`` refers to, in order of appearance."""
    return list(dict.fromkeys(n for node in leaf_exprs(expr) for n in _leaf_columns(node)))


def bound_leaves(expr: BoundExpr) -> list[LeafColumn]:
    """The distinct columns a bound tree reads to evaluate it on rows (its
    predicates' and its conditions'), left to right."""
    out: dict[int, LeafColumn] = {}
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, BoundPredicate):
            out.setdefault(e.leaf.index, e.leaf)
        elif isinstance(e, BoundCondition):
            for leaf in e.leaves:
                out.setdefault(leaf.index, leaf)
        elif isinstance(e, (BoundAnd, BoundOr)):
            stack += [e.right, e.left]
    return list(out.values())


def has_condition(expr: BoundExpr) -> bool:
    """Whether the tree holds a :class:`BoundCondition` (only row evaluation answers it)."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, BoundCondition):
            return True
        if isinstance(e, (BoundAnd, BoundOr)):
            stack += [e.right, e.left]
    return False


def absent_columns(expr: Expr, schema: Schema, known: Collection[str]) -> frozenset[str]:
    """The columns of ``expr`` that ``schema`` (one file's) lacks while ``known`` (the
    dataset's top-level columns and dotted struct fields) has them: the file's rows
    hold NULL there."""
    out = set()
    for name in columns(expr):
        if schema.leaf(name) is not None:
            continue
        top = name.split(".", 1)[0]
        below = tuple(name.split("."))
        if any(lf.path[:len(below)] == below for lf in schema.leaves):
            continue  # a group here: bind says so
        if name in known or (top in known and all(lf.path[0] != top for lf in schema.leaves)):
            out.add(name)
    return frozenset(out)


def bind(expr: Expr, schema: Schema, absent: Collection[str] = (),
         absent_null: bool = True) -> BoundExpr:
    """Resolve columns against ``schema``, push NOT down, coerce literals once.

    ``absent``: columns the file lacks (:func:`absent_columns`). With ``absent_null``
    a leaf on one is decided as on NULL: IS NULL is TRUE, every other leaf FALSE
    (after NOT is pushed down the tree is monotone, so a NULL leaf can be read as
    FALSE: exact SQL filtering). Without, every such leaf is TRUE: a bound that may
    keep too much, never too little (partition pruning before the file is known).

    UserInputError for an unknown, group or repeated column, and for a literal
    that cannot be compared with its column's type.
    """
    if not isinstance(expr, Expr):
        raise UserInputError(f"not a predicate: {expr!r}")
    targets = {name: _target(_resolve(schema, name))
               for name in columns(expr) if name not in absent}

    def is_float(column: Column) -> bool:
        target = targets.get(column.name)
        return target is not None and target.vt.is_float

    return visit(push_not(expr, is_float), _Binder(targets, absent_null))

