"""A predicate as conjuncts grouped by the one column each reads.

A row group the plan keeps whole is filtered column by column: each column's
conjuncts are evaluated on its encoded pages (dictionary ids, stored integers; see
:mod:`pqindex.scan.encoded`), the row sets intersected, and whatever reads several
columns is evaluated afterwards on the surviving rows only. AND is true exactly
where both sides are (SQL's three-valued logic included), so the intersection is
the predicate's rows.

An OR whose branches share conjuncts has them factored out first:
``(a AND x) OR (a AND y)`` is ``a AND (x OR y)`` in three-valued logic too. TPC-H
Q19's three branches share ``l_shipmode IN (...)`` and ``l_shipinstruct = ...``;
what is left reads ``l_quantity`` alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from pqindex.expr.bind import (
    BoundAnd,
    BoundExpr,
    BoundOr,
    bound_and,
    bound_leaves,
    bound_or,
    has_condition,
)

__all__ = ["ColumnGroups", "column_groups", "conjuncts"]


@dataclass(frozen=True)
class ColumnGroups:
    """``by_column``: (leaf index, the AND of the conjuncts reading that leaf alone),
    in the order the columns first appear; ``rest``: the AND of the others (None
    when there are none)."""

    by_column: tuple[tuple[int, BoundExpr], ...]
    rest: BoundExpr | None


def conjuncts(expr: BoundExpr) -> list[BoundExpr]:
    """The top-level conjuncts of ``expr``, ORs with shared conjuncts factored."""
    out: list[BoundExpr] = []
    todo = [expr]
    while todo:
        e = todo.pop()
        if isinstance(e, BoundAnd):
            todo += [e.right, e.left]
        elif isinstance(e, BoundOr):
            factored = _factored(e)
            if factored is None:
                out.append(e)
            else:
                todo += reversed(factored)
        else:
            out.append(e)
    return out


def _branches(e: BoundExpr) -> list[BoundExpr]:
    return _branches(e.left) + _branches(e.right) if isinstance(e, BoundOr) else [e]


def _and_parts(e: BoundExpr) -> list[BoundExpr]:
    return _and_parts(e.left) + _and_parts(e.right) if isinstance(e, BoundAnd) else [e]


def _factored(e: BoundOr) -> list[BoundExpr] | None:
    """``e`` as conjuncts: those every branch has, then the OR of what is left of
    each branch; None when the branches share nothing."""
    parts = [_and_parts(b) for b in _branches(e)]
    shared = [c for c in parts[0] if all(c in p for p in parts[1:])]
    if not shared:
        return None
    rest: BoundExpr | None = None
    for p in parts:
        left = [c for c in p if c not in shared]
        if not left:
            # A branch that is all shared conjuncts: the OR is true wherever they are.
            return shared
        branch = left[0]
        for c in left[1:]:
            branch = bound_and(branch, c)
        rest = branch if rest is None else bound_or(rest, branch)
    assert rest is not None
    return [*shared, rest]


def column_groups(expr: BoundExpr, file_leaves: int) -> ColumnGroups:
    """``expr``'s conjuncts grouped by the one file leaf (index below
    ``file_leaves``) each reads; partition columns, conditions on expressions and
    conjuncts over several columns go to ``rest``."""
    by_column: dict[int, BoundExpr] = {}
    rest: BoundExpr | None = None
    for c in conjuncts(expr):
        cols = {leaf.index for leaf in bound_leaves(c)}
        # A condition on an expression (a sum, coalesce, a column against a column) is
        # evaluated decoded, with its nulls: not on the encoded pages.
        if len(cols) == 1 and (col := next(iter(cols))) < file_leaves and not has_condition(c):
            by_column[col] = c if col not in by_column else bound_and(by_column[col], c)
        else:
            rest = c if rest is None else bound_and(rest, c)
    return ColumnGroups(tuple(by_column.items()), rest)
