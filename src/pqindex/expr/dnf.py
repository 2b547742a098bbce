"""pyarrow-style DNF filters (``[("x", "=", 1), ...]``) to an expression tree.

A flat list is an AND of tuples; a list of lists is an OR of such ANDs, as in
``pyarrow.parquet.read_table(filters=...)``. The trees equal those of the
equivalent SQL text: ``[[("x", ">", 1), ("y", "in", [2, 3])]]`` is
``parse_where("x > 1 AND y IN (2, 3)")``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pqindex.errors import UserInputError
from pqindex.expr.nodes import Compare, Expr, In, and_, col, lit, literal_list, or_
from pqindex.format.match import LeafOp

__all__ = ["from_dnf"]

_OPS = {"=": LeafOp.EQ, "==": LeafOp.EQ, "!=": LeafOp.NE, "<": LeafOp.LT,
        "<=": LeafOp.LE, ">": LeafOp.GT, ">=": LeafOp.GE}


def _term(term: object) -> Expr:
    if not isinstance(term, (tuple, list)) or len(term) != 3:
        raise UserInputError(
            f"a DNF term is a (column, op, value) tuple, not {term!r}")
    name, op, value = term
    if not isinstance(name, str):
        raise UserInputError(f"DNF column name must be a string, not {name!r}")
    if not isinstance(op, str):
        raise UserInputError(f"DNF operator must be a string, not {op!r}", column=name)
    key = " ".join(op.lower().split())
    column = col(name)
    if key in _OPS:
        return Compare(_OPS[key], column, lit(value))
    if key in ("in", "not in"):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise UserInputError(f"{op!r} needs a list of values, not {value!r}", column=name)
        literals = literal_list(value, name)  # bounded: range(10**9) is refused, not listed
        if isinstance(value, (set, frozenset)):
            # A set has no order; make the tree deterministic.
            literals = tuple(lit(v) for v in _sorted([x.value for x in literals]))
        return In(column, literals, negated=key == "not in")
    raise UserInputError(
        f"unsupported DNF operator {op!r}; expected one of "
        "=, ==, !=, <, <=, >, >=, in, not in", column=name)


def _sorted(values: list[Any]) -> list[Any]:
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=repr)


def _is_term(item: object) -> bool:
    return isinstance(item, tuple) or (
        isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
        and isinstance(item[1], str))


def from_dnf(filters: Sequence[Any]) -> Expr:
    """The expression of pyarrow DNF ``filters``: an AND of terms, or an OR of ANDs."""
    if isinstance(filters, (str, bytes)) or not isinstance(filters, Sequence):
        raise UserInputError(f"DNF filters must be a list, not {type(filters).__name__}")
    if not filters:
        raise UserInputError("DNF filters are empty")
    if all(_is_term(item) for item in filters):
        return and_(*(_term(t) for t in filters))
    conjunctions: list[Expr] = []
    for conj in filters:
        if _is_term(conj) or not isinstance(conj, (list, tuple)) or not conj:
            raise UserInputError(
                "DNF filters mix terms and lists of terms, or hold an empty list: "
                f"{conj!r}")
        conjunctions.append(and_(*(_term(t) for t in conj)))
    return or_(*conjunctions)
