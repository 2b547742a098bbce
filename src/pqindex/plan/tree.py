"""A bound predicate tree evaluated level-agnostically: given an answer per leaf
(three-valued ``Match``, or a row ``Selection``), the answer of the tree. Every
planning level and the file-level statistics use these."""

from __future__ import annotations

from collections.abc import Callable

from pqindex.expr.bind import (
    BoundAnd,
    BoundCondition,
    BoundExpr,
    BoundOr,
    BoundPredicate,
    fold_bound,
)
from pqindex.format.match import Match
from pqindex.format.row_ranges import Selection

__all__ = ["evaluate", "leaves", "select"]


def leaves(expr: BoundExpr) -> list[BoundPredicate]:
    """The predicate leaves of a bound tree, left to right."""
    out: list[BoundPredicate] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, BoundPredicate):
            out.append(e)
        elif isinstance(e, (BoundAnd, BoundOr)):
            stack += [e.right, e.left]
    return out


def _match_and(a: Match, b: Match) -> Match:
    return a & b


def _match_or(a: Match, b: Match) -> Match:
    return a | b


def _is_none(m: Match) -> bool:
    return m == Match.NONE


def _is_all(m: Match) -> bool:
    return m == Match.ALL


def evaluate(expr: BoundExpr, leaf_match: Callable[[BoundPredicate], Match],
             condition: Callable[[BoundCondition], Match] | None = None) -> Match:
    """Three-valued evaluation of the tree given an answer per leaf (iterative:
    a 10,000-term OR does not recurse; AND stops at NONE, OR at ALL); a condition on
    an expression answers ``condition``'s, else SOME."""
    if isinstance(expr, BoundPredicate):  # one leaf, the common predicate: no fold
        return leaf_match(expr)
    return fold_bound(expr, leaf=leaf_match, true=Match.ALL, false=Match.NONE,
                      and_=_match_and, or_=_match_or, and_done=_is_none, or_done=_is_all,
                      unknown=Match.SOME, condition=condition)


def _select_and(a: Selection, b: Selection) -> Selection:
    return a & b


def _select_or(a: Selection, b: Selection) -> Selection:
    return a | b


def _nothing_left(s: Selection) -> bool:
    return s.maybe.is_empty


def _never(s: Selection) -> bool:
    return False


def select(
    expr: BoundExpr, leaf_select: Callable[[BoundPredicate], Selection], n: int
) -> Selection:
    """Row-range evaluation of the tree given a selection per leaf (iterative)."""
    return fold_bound(expr, leaf=leaf_select, true=Selection.everything(n),
                      false=Selection.none(), and_=_select_and, or_=_select_or,
                      and_done=_nothing_left, or_done=_never, unknown=Selection.unknown(n))
