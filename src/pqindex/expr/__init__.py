"""The ``expr`` layer: predicate trees, their parsers, binding and exact evaluation.

Build a predicate with ``col("x") == 3``, ``parse_where("x BETWEEN 1 AND 5")`` or
``from_dnf([("x", "=", 3)])``; ``bind`` it to a file's schema; evaluate the bound
tree on a table with ``to_arrow_mask``. Semantics: ``docs/semantics.md``.
"""

from pqindex.expr.bind import (
    BoundAnd,
    BoundExpr,
    BoundFalse,
    BoundOr,
    BoundPredicate,
    BoundTrue,
    BoundVisitor,
    bind,
    columns,
    visit_bound,
)
from pqindex.expr.dnf import from_dnf
from pqindex.expr.evaluate import to_arrow_mask, to_pyarrow_expression
from pqindex.expr.nodes import (
    FALSE,
    TRUE,
    AlwaysFalse,
    AlwaysTrue,
    And,
    Column,
    Compare,
    Expr,
    ExprVisitor,
    In,
    IsNan,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
    Regexp,
    StartsWith,
    and_,
    col,
    like,
    lit,
    not_,
    or_,
    visit,
)
from pqindex.expr.normalize import push_not
from pqindex.expr.sql import parse_where

__all__ = [
    "FALSE",
    "TRUE",
    "AlwaysFalse",
    "AlwaysTrue",
    "And",
    "BoundAnd",
    "BoundExpr",
    "BoundFalse",
    "BoundOr",
    "BoundPredicate",
    "BoundTrue",
    "BoundVisitor",
    "Column",
    "Compare",
    "Expr",
    "ExprVisitor",
    "In",
    "IsNan",
    "IsNull",
    "Like",
    "Literal",
    "Not",
    "Or",
    "Regexp",
    "StartsWith",
    "and_",
    "bind",
    "col",
    "columns",
    "from_dnf",
    "like",
    "lit",
    "not_",
    "or_",
    "parse_where",
    "push_not",
    "to_arrow_mask",
    "to_pyarrow_expression",
    "visit",
    "visit_bound",
]
