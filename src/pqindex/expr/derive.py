"""Bounds on one column implied by a condition on an expression of it.

``l_shipdate + INTERVAL 1 DAY < DATE '1995-01-01'`` is TRUE only where
``l_shipdate < DATE '1994-12-31'``: the expression is undone step by step on the
constant side (``+ k`` becomes ``- k``, ``* k`` with ``k < 0`` flips the
operator, ``year(d) = 1995`` becomes a range of dates) until a bare column is
left. The leaf found is *implied* by the condition, so ``bind`` ANDs it beside
the condition and every index prunes with it; the condition itself is still
evaluated on the rows. Only necessary conditions are derived, so a bound here
may keep too much, never too little:

* integers and decimals are computed exactly (checked 64-bit integers: an
  overflow is an error, never a wrapped value), and a bound that is not a
  whole tick is rounded outward;
* a step in DOUBLE (a DOUBLE column, a float constant, ``/``) may round: only
  one such step is undone, and its bound is widened by 2^-40 of its size;
* adding months clamps the day (Jan 31 + 1 month is Feb 29): the bound is
  widened by four days;
* anything else (a function that is not monotonic, two columns, a NULL or
  non-finite constant) derives nothing.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction

from pqindex.errors import UserInputError
from pqindex.expr.nodes import (
    FLIPPED,
    Column,
    Compare,
    Expr,
    Func,
    Interval,
    Literal,
    Term,
    add_months,
    and_,
    or_,
    term_columns,
)
from pqindex.expr.term_types import TermType, term_type
from pqindex.format.match import LeafOp

__all__ = ["implied_leaves"]

_OPS = {op.value: op for op in (LeafOp.EQ, LeafOp.NE, LeafOp.LT, LeafOp.LE, LeafOp.GT,
                                  LeafOp.GE)}
_NEGATED = {LeafOp.LT: LeafOp.GE, LeafOp.LE: LeafOp.GT, LeafOp.GT: LeafOp.LE,
            LeafOp.GE: LeafOp.LT, LeafOp.EQ: LeafOp.NE, LeafOp.NE: LeafOp.EQ}
# Relative widening of a bound undone through one DOUBLE step (a rounding is 2^-53).
_FLOAT_SLACK = Fraction(1, 2**40)
# Days a month shift can move a date less than the calendar says (the day clamped).
_MONTH_SLACK = dt.timedelta(days=4)
_DIGITS = 40  # significant digits of a derived numeric bound (rounded outward)

ColumnType = Callable[[str], TermType]
Constant = Fraction | dt.date  # a datetime is a date too


def implied_leaves(value: Term, column: ColumnType) -> list[Expr]:
    """Single-column leaves that hold wherever the boolean term ``value`` is TRUE;
    empty when none is known."""
    if not isinstance(value, Func):
        return []
    name, args = value.name, value.args
    if name == "and":
        return implied_leaves(args[0], column) + implied_leaves(args[1], column)
    if name == "or":
        left, right = implied_leaves(args[0], column), implied_leaves(args[1], column)
        return [or_(and_(*left), and_(*right))] if left and right else []
    if name == "not":
        negated = _negated(args[0], column)
        return [] if negated is None else implied_leaves(negated, column)
    if name in _OPS:
        return _compared(_OPS[name], args[0], args[1], column)
    if name == "in":
        return _within_list(args[0], args[1:], column)
    return []


def _negated(value: Term, column: ColumnType) -> Term | None:
    """NOT ``value`` without a NOT, where that is exact: De Morgan, and an ordering
    comparison of values that cannot be NaN (NOT (x < 1) is x >= 1 only then)."""
    if not isinstance(value, Func):
        return None
    if value.name in ("and", "or"):
        parts = [_negated(a, column) for a in value.args]
        if any(p is None for p in parts):
            return None
        return Func("or" if value.name == "and" else "and", tuple(p for p in parts if p))
    if value.name == "not":
        return value.args[0]
    if value.name in _OPS:
        try:
            types = {term_type(a, column) for a in value.args}
        except UserInputError:  # the binder reports it
            return None
        if TermType.DOUBLE in types:
            return None
        return Func(_NEGATED[_OPS[value.name]].value, value.args)
    return None


def _within_list(value: Term, items: tuple[Term, ...], column: ColumnType) -> list[Expr]:
    """``value IN (items)`` implies ``min <= value <= max`` for numbers and dates."""
    constants = [_constant(i) for i in items if not (isinstance(i, Literal) and i.value is None)]
    if not constants or any(c is None for c in constants):
        return []
    kinds = {isinstance(c, Fraction) for c in constants}
    if len(kinds) != 1:
        return []
    present = [c for c in constants if c is not None]
    try:
        low, high = min(present), max(present)
    except TypeError:  # a date and a datetime with a time zone
        return []
    return (_compared(LeafOp.GE, value, _literal(low, up=False), column)
            + _compared(LeafOp.LE, value, _literal(high, up=True), column))


def _literal(c: Constant, up: bool) -> Literal:
    return Literal(_number_literal(c, up) if isinstance(c, Fraction) else c)


def _compared(op: LeafOp, left: Term, right: Term, column: ColumnType) -> list[Expr]:
    """Leaves implied by ``left op right``, where one side has a single column and
    the other is constant."""
    if op == LeafOp.NE:
        return []
    left_cols, right_cols = term_columns(left), term_columns(right)
    if len(left_cols) == 1 and not right_cols:
        side, const = left, _constant(right)
    elif len(right_cols) == 1 and not left_cols:
        side, const, op = right, _constant(left), FLIPPED[op]
    else:
        return []
    if const is None:
        return []
    try:
        return _undone(op, side, const, column)
    except (ArithmeticError, OverflowError, ValueError, TypeError):
        return []  # a bound beyond the types' ranges: nothing derived


@dataclass
class _Walk:
    """The state of undoing an expression: ``node op bound``."""

    op: LeafOp
    bound: Constant
    float_steps: int = 0  # steps computed in DOUBLE
    month_shifted: bool = False


def _undone(op: LeafOp, node: Term, bound: Constant, column: ColumnType) -> list[Expr]:
    walk = _Walk(op, bound)
    while not isinstance(node, Column):
        if not isinstance(node, Func):
            return []
        if node.name == "year" and isinstance(node.args[0], Column):
            return _year_range(walk, node.args[0], column)
        nxt = _step(walk, node, column)
        if nxt is None:
            return []
        node = nxt
    if walk.float_steps > 1:
        return []  # roundings compound: no bound is trusted
    return _leaves(walk, node, column(node.name))


def _step(walk: _Walk, node: Func, column: ColumnType) -> Term | None:
    """Undo the outermost operation of ``node``; the operand left, or None."""
    name, args = node.name, node.args
    if name == "negate":
        if not isinstance(walk.bound, Fraction):
            return None
        walk.bound, walk.op = -walk.bound, FLIPPED[walk.op]
        return args[0]
    if name not in ("+", "-", "*", "/"):
        return None
    a, b = args
    ka = a if isinstance(a, Interval) else _constant(a)
    kb = b if isinstance(b, Interval) else _constant(b)
    if (ka is None) == (kb is None):
        return None
    if _is_double(node, column):
        walk.float_steps += 1
    if name in ("+", "-"):
        if kb is not None:  # a + k, a - k
            walk.bound = _shift(walk, walk.bound, kb, subtract=name == "+")
            return a
        assert ka is not None
        if name == "+":  # k + b
            walk.bound = _shift(walk, walk.bound, ka, subtract=True)
            return b
        # k - b op bound  <=>  b op' k - bound
        if not isinstance(ka, Fraction) or not isinstance(walk.bound, Fraction):
            return None
        walk.bound, walk.op = ka - walk.bound, FLIPPED[walk.op]
        return b
    k = kb if kb is not None else ka
    if not isinstance(k, Fraction) or not isinstance(walk.bound, Fraction) or k == 0:
        return None
    if name == "/" and kb is None:
        return None  # k / x is not monotonic across 0
    walk.bound = walk.bound / k if name == "*" else walk.bound * k
    if k < 0:
        walk.op = FLIPPED[walk.op]
    return a if kb is not None else b


def _is_double(node: Func, column: ColumnType) -> bool:
    try:
        return term_type(node, column) == TermType.DOUBLE
    except UserInputError:  # the binder reports it
        return True


def _shift(walk: _Walk, bound: Constant, k: Constant | Interval, subtract: bool) -> Constant:
    """``bound - k`` (``subtract``) or ``bound + k``: numbers, days, intervals."""
    sign = -1 if subtract else 1
    if isinstance(bound, Fraction):
        if not isinstance(k, Fraction):
            raise TypeError("a number shifted by a date")
        return bound + sign * k
    if isinstance(k, Interval):
        if k.months:
            walk.month_shifted = True
            bound = add_months(bound, sign * k.months)
        return bound + sign * dt.timedelta(days=k.days, microseconds=k.micros)
    if isinstance(k, Fraction) and k.denominator == 1 and not isinstance(bound, dt.datetime):
        return bound + sign * dt.timedelta(days=int(k))  # a date plus days
    raise TypeError("a date shifted by something other than days or an interval")


def _constant(value: Term) -> Constant | None:
    """A constant term's value: numbers as exact fractions, dates and timestamps,
    a date plus or minus an interval; None for anything else (NULL, NaN, text)."""
    if isinstance(value, Literal):
        v = value.value
        if isinstance(v, bool) or v is None:
            return None
        if isinstance(v, (int, Decimal)):
            return Fraction(v) if not isinstance(v, Decimal) or v.is_finite() else None
        if isinstance(v, float):
            return Fraction(v) if math.isfinite(v) else None
        if isinstance(v, dt.date):
            return v
        return None
    if isinstance(value, Func) and value.name in ("+", "-") and len(value.args) == 2:
        base, shift = value.args
        if value.name == "+" and isinstance(base, Interval):
            base, shift = shift, base
        start = _constant(base)
        if isinstance(start, dt.date) and isinstance(shift, Interval):
            sign = 1 if value.name == "+" else -1
            try:
                shifted = add_months(start, sign * shift.months)
                return shifted + sign * dt.timedelta(days=shift.days, microseconds=shift.micros)
            except (OverflowError, ValueError):
                return None
    return None


def _number_literal(x: Fraction, up: bool) -> Decimal | int:
    """``x`` as an exact literal, or rounded outward (``up``: toward +inf)."""
    if x.denominator == 1:
        return x.numerator
    with localcontext() as ctx:
        ctx.prec = _DIGITS
        ctx.rounding = ROUND_CEILING if up else ROUND_FLOOR
        return Decimal(x.numerator) / Decimal(x.denominator)


def _leaves(walk: _Walk, column: Column, kind: TermType) -> list[Expr]:
    op, bound = walk.op, walk.bound
    if isinstance(bound, Fraction):
        if kind not in (TermType.INTEGER, TermType.DECIMAL, TermType.DOUBLE):
            return []
        slack = abs(bound) * _FLOAT_SLACK + Fraction(1, 10**300) if walk.float_steps else 0
        low, high = bound - slack, bound + slack
        below = Literal(_number_literal(high, up=True))  # x < high, x <= high
        above = Literal(_number_literal(low, up=False))  # x > low, x >= low
    else:
        if kind not in (TermType.DATE, TermType.TIMESTAMP):
            return []
        slack_days = _MONTH_SLACK if walk.month_shifted else dt.timedelta(0)
        below, above = Literal(bound + slack_days), Literal(bound - slack_days)
    return _compare_leaves(op, column, below, above)


def _compare_leaves(op: LeafOp, column: Column, below: Literal, above: Literal) -> list[Expr]:
    """``column op bound`` with the bound widened: ``below`` is the upper limit
    (for < and <=), ``above`` the lower (for > and >=); = is both."""
    if op in (LeafOp.LT, LeafOp.LE):
        # With a widened bound, < is kept as <= (the bound itself may match).
        return [Compare(op if below == above else LeafOp.LE, column, below)]
    if op in (LeafOp.GT, LeafOp.GE):
        return [Compare(op if below == above else LeafOp.GE, column, above)]
    if op == LeafOp.EQ:
        return [Compare(LeafOp.GE, column, above), Compare(LeafOp.LE, column, below)]
    return []


def _year_range(walk: _Walk, column: Column, kind: ColumnType) -> list[Expr]:
    """``year(column) op Y`` as a range of ``column``'s dates or timestamps."""
    bound, op = walk.bound, walk.op
    if walk.float_steps or not isinstance(bound, Fraction):
        return []
    col_type = kind(column.name)
    if col_type not in (TermType.DATE, TermType.TIMESTAMP):
        return []

    def start(year: int) -> Literal | None:
        if not dt.MINYEAR <= year <= dt.MAXYEAR:
            return None
        return Literal(dt.date(year, 1, 1) if col_type == TermType.DATE
                       else dt.datetime(year, 1, 1))

    floor = bound.numerator // bound.denominator
    ceil = -((-bound.numerator) // bound.denominator)
    out: list[Expr] = []
    # year <= Y  <=>  column < start(Y + 1);  year >= Y  <=>  column >= start(Y)
    last = {LeafOp.LT: ceil - 1, LeafOp.LE: floor, LeafOp.EQ: floor}.get(op)
    first = {LeafOp.GT: floor + 1, LeafOp.GE: ceil, LeafOp.EQ: ceil}.get(op)
    if last is not None and (end := start(last + 1)) is not None:
        out.append(Compare(LeafOp.LT, column, end))
    if first is not None and (begin := start(first)) is not None:
        out.append(Compare(LeafOp.GE, column, begin))
    return out
