"""Push NOT down to the leaves, keeping SQL's three-valued logic and IEEE floats.

After ``push_not`` a tree has no ``Not``: each negated leaf is replaced by the leaf
with the negated operator (``NEGATION``). That is exact for a non-null value of a
non-float column. The two other cases:

* NULL: a comparison on a NULL row is NULL, and NOT NULL is NULL: neither the
  leaf nor its negation matches. Every leaf op already behaves so (IS NULL is
  never NULL, and its negation IS NOT NULL is exact), so nothing is added.
* NaN: ``x < 1`` is false for NaN, so NOT(x < 1) is true for it, while
  ``x >= 1`` is false: on FLOAT/DOUBLE/FLOAT16 columns the negation of an ordering
  comparison is ``x >= 1 OR isnan(x)``. ``=``/``!=``/IN/NOT IN need no extra case
  (``!=`` and NOT IN are true for NaN).

A comparison with a NaN literal is false for every non-null row, so the
negation of ``x < NaN`` is ``x != NaN`` (true for every non-null row, NULL for
NULL), not ``x >= NaN``, which would be false too. ``IS NOT NULL`` would select
the same rows but is FALSE, not NULL, on NULL rows, so a further NOT would differ.
A comparison with a NULL literal is NULL for every row, and so is its negation:
no ``isnan`` is added there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal

from pqindex.expr.nodes import (
    FALSE,
    TRUE,
    Column,
    Compare,
    Condition,
    Expr,
    ExprVisitor,
    IsNan,
    LeafExpr,
    and_,
    leaf_node,
    leaf_values,
    not_,
    or_,
    visit,
)
from pqindex.format.match import NEGATION, LeafOp

__all__ = ["negate", "push_not"]

_ORDERING = frozenset({LeafOp.LT, LeafOp.LE, LeafOp.GT, LeafOp.GE})


def is_nan_literal(value: object) -> bool:
    """A float or Decimal NaN."""
    if isinstance(value, float):
        return math.isnan(value)
    return isinstance(value, Decimal) and value.is_nan()


def push_not(expr: Expr, is_float: Callable[[Column], bool]) -> Expr:
    """``expr`` without Not nodes; ``is_float`` says which columns hold IEEE floats."""
    return visit(expr, _PushNot(is_float))


def negate(expr: Expr, is_float: Callable[[Column], bool]) -> Expr:
    """NOT ``expr`` for a Not-free ``expr``, itself Not-free (De Morgan + NEGATION)."""
    return visit(expr, _Negate(is_float))


class _PushNot(ExprVisitor[Expr]):
    def __init__(self, is_float: Callable[[Column], bool]) -> None:
        self.is_float = is_float

    def visit_true(self) -> Expr:
        return TRUE

    def visit_false(self) -> Expr:
        return FALSE

    def visit_not(self, child: Expr) -> Expr:
        # The child has already lost its own Nots.
        return negate(child, self.is_float)

    def visit_and(self, left: Expr, right: Expr) -> Expr:
        return and_(left, right)

    def visit_or(self, left: Expr, right: Expr) -> Expr:
        return or_(left, right)

    def visit_leaf(self, node: LeafExpr) -> Expr:
        return node


class _Negate(ExprVisitor[Expr]):
    def __init__(self, is_float: Callable[[Column], bool]) -> None:
        self.is_float = is_float

    def visit_true(self) -> Expr:
        return FALSE

    def visit_false(self) -> Expr:
        return TRUE

    def visit_not(self, child: Expr) -> Expr:
        raise AssertionError("negate() takes a tree without Not nodes")

    def visit_and(self, left: Expr, right: Expr) -> Expr:
        return or_(left, right)

    def visit_or(self, left: Expr, right: Expr) -> Expr:
        return and_(left, right)

    def visit_leaf(self, node: LeafExpr) -> Expr:
        if isinstance(node, Condition):
            return not_(node)  # NOT of a term: exact under three-valued logic
        op = node.leaf_op
        if (isinstance(node, Compare) and op in _ORDERING
                and is_nan_literal(node.literal.value)):
            # TRUE for non-null rows and NULL (not FALSE) for NULL rows, like the
            # negation it stands for, so a further NOT stays exact: x != NaN.
            return Compare(LeafOp.NE, node.column, node.literal)
        negated = leaf_node(NEGATION[op], node.column, leaf_values(node))
        if isinstance(node, Compare) and node.literal.value is None:
            return negated  # x < NULL is NULL for every row, and so is its negation
        if op in _ORDERING and self.is_float(node.column):
            return or_(negated, IsNan(node.column))
        return negated
