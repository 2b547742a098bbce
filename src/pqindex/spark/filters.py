"""Spark's pushed filters as pqindex predicates.

Spark (4.1 and later) hands a Python data source's reader the conjuncts of a
query's WHERE that it can express as :class:`pyspark.sql.datasource.Filter`
objects: a column path, an operator and Python literals. :func:`split_filters`
turns each into a pqindex :class:`~pqindex.expr.Expr` that selects exactly the
rows Spark's filter keeps, or leaves it to Spark. Where the two disagree on
meaning, the predicate is rewritten to Spark's:

* floating point: Spark orders NaN above every other value and has NaN = NaN;
  pqindex compares as IEEE 754 (every comparison with NaN is false). So Spark's
  ``x > 1`` is ``x > 1 OR isnan(x)`` here, ``x = NaN`` is ``isnan(x)``;
* ``NOT``: a WHERE keeps a row when its filter is TRUE, so ``NOT f`` is Spark's
  complementary operator (its orders are total: NaN largest), NULL still
  matching nothing; ``NOT (x <=> v)`` is ``x IS NULL OR x != v``;
* ``IN`` with a NULL among the values is never TRUE for other values, and
  ``NOT IN`` with a NULL never TRUE at all;
* substring and suffix filters become LIKE patterns with their ``%``, ``_`` and
  the escape character escaped (one holding a backslash is Spark's: Arrow's
  LIKE shortcuts mis-read an escaped backslash); a prefix is a byte comparison.

A filter on a column pqindex cannot name (a dot inside a field name, a field
under a list or map, a struct as a whole), on a type it does not compare the
way Spark does (booleans beyond equality, intervals, variants, collated
strings), or with a literal of an unexpected Python type, is left to Spark.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any

from pqindex.errors import PqIndexError, UserInputError
from pqindex.expr.nodes import (
    FALSE,
    TRUE,
    Column,
    Compare,
    Condition,
    Expr,
    ExprVisitor,
    In,
    IsNan,
    IsNull,
    LeafExpr,
    and_,
    col,
    like,
    lit,
    or_,
    term_columns,
    visit,
)
from pqindex.expr.normalize import negate
from pqindex.format.match import LeafOp

__all__ = ["PUSHDOWN_CONF", "enable_pushdown", "spark_float_order", "split_filters",
           "to_predicate"]

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

# Spark's operator for each filter class, and for its negation (Spark's orders are
# total for non-null values: NOT x > v is x <= v, NaN included).
_OPS: dict[str, tuple[LeafOp, LeafOp]] = {
    "EqualTo": (LeafOp.EQ, LeafOp.NE),
    "GreaterThan": (LeafOp.GT, LeafOp.LE),
    "GreaterThanOrEqual": (LeafOp.GE, LeafOp.LT),
    "LessThan": (LeafOp.LT, LeafOp.GE),
    "LessThanOrEqual": (LeafOp.LE, LeafOp.GT),
}

_INTEGER_TYPES = ("ByteType", "ShortType", "IntegerType", "LongType")
_FLOAT_TYPES = ("FloatType", "DoubleType")
_ORDERED_TYPES = (*_INTEGER_TYPES, *_FLOAT_TYPES, "DecimalType", "StringType", "BinaryType",
                  "DateType", "TimestampType", "TimestampNTZType")


def _leaf(path: Sequence[str], schema: Any) -> tuple[str, Any] | None:
    """pqindex's dotted name for Spark's column path and the column's Spark type; None
    when pqindex cannot name it (a dot in a name, a field under a list or map)."""
    from pyspark.sql import types as T

    dtype: Any = schema
    for part in path:
        if not isinstance(dtype, T.StructType) or "." in part or not part:
            return None
        fields = {f.name: f for f in dtype.fields}
        if part not in fields:
            return None
        dtype = fields[part].dataType
    if not path:
        return None
    return ".".join(path), dtype


def _type_name(dtype: Any) -> str:
    name = type(dtype).__name__
    if name == "StringType" and getattr(dtype, "collation", "UTF8_BINARY") != "UTF8_BINARY":
        return "CollatedStringType"  # compared by its collation's rules: Spark's job
    return name


def _literal(dtype_name: str, value: Any) -> tuple[bool, Any]:
    """(True, pqindex's literal) for a non-null value of the Python type Spark gives
    a column of ``dtype_name``; (False, None) for anything else."""
    if dtype_name in _INTEGER_TYPES:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif dtype_name in _FLOAT_TYPES:
        ok = isinstance(value, float) or (isinstance(value, int)
                                          and not isinstance(value, bool))
        value = float(value) if ok else value
    elif dtype_name == "DecimalType":
        ok = isinstance(value, Decimal) and value.is_finite()
    elif dtype_name == "StringType":
        ok = isinstance(value, str)
    elif dtype_name == "BinaryType":
        ok = isinstance(value, (bytes, bytearray))
        value = bytes(value) if ok else value
    elif dtype_name == "BooleanType":
        ok = isinstance(value, bool)
    elif dtype_name == "DateType":
        ok = isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    elif dtype_name == "TimestampType":  # an instant: Spark gives it a time zone
        ok = isinstance(value, dt.datetime) and value.utcoffset() is not None
    elif dtype_name == "TimestampNTZType":  # wall-clock time
        ok = isinstance(value, dt.datetime) and value.tzinfo is None
    else:
        ok = False
    return ok, value if ok else None


def _float_compare(c: Column, op: LeafOp, v: float) -> Expr:
    """Spark's ``c op v`` on a float column (NaN above everything, NaN = NaN) as
    pqindex's IEEE predicate."""
    if math.isnan(v):
        return {LeafOp.EQ: c.is_nan(), LeafOp.NE: ~c.is_nan(), LeafOp.GT: FALSE,
                LeafOp.GE: c.is_nan(), LeafOp.LT: ~c.is_nan(),
                LeafOp.LE: c.is_not_null()}[op]
    ieee = Compare(op, c, lit(v))
    if op in (LeafOp.GT, LeafOp.GE):  # NaN is greater than v
        return or_(ieee, c.is_nan())
    return ieee  # = < <= are false for NaN in both; != true in both


def _compare(c: Column, dtype_name: str, op: LeafOp, v: Any) -> Expr | None:
    if dtype_name == "BooleanType" and op not in (LeafOp.EQ, LeafOp.NE):
        return None
    if dtype_name not in _ORDERED_TYPES and dtype_name != "BooleanType":
        return None
    ok, value = _literal(dtype_name, v)
    if not ok:
        return None
    if dtype_name in _FLOAT_TYPES:
        return _float_compare(c, op, value)
    return Compare(op, c, lit(value))


def _in(c: Column, dtype_name: str, values: Iterable[Any], negate: bool) -> Expr | None:
    if dtype_name not in _ORDERED_TYPES and dtype_name != "BooleanType":
        return None
    lits: list[Any] = []
    for v in values:
        ok, value = _literal(dtype_name, v)
        if v is not None and not ok:
            return None
        lits.append(value)
    return _in_values(c, lits, negate)


def _in_values(c: Column, values: list[Any], negate: bool) -> Expr:
    """Spark's ``c [NOT] IN values`` (NaN equal to NaN) for literals of ``c``'s type."""
    if any(v is None for v in values):
        # x IN (.., NULL) is NULL where no value equals x; NOT IN (.., NULL) never TRUE.
        if negate:
            return FALSE
        values = [v for v in values if v is not None]
    nan = any(isinstance(v, float) and math.isnan(v) for v in values)
    plain = [v for v in values if not (isinstance(v, float) and math.isnan(v))]
    if negate:
        base = ~c.isin(plain) if plain else c.is_not_null()
        return and_(base, ~c.is_nan()) if nan else base
    base = c.isin(plain) if plain else FALSE
    return or_(base, c.is_nan()) if nan else base


class _SparkFloats(ExprVisitor[Expr]):
    """Spark's meaning of a predicate as an IEEE predicate: leaves on float columns are
    rewritten (:func:`_float_compare`); a NOT negates its already rewritten child the
    IEEE way, which is then exactly Spark's NOT."""

    def __init__(self, is_float: Callable[[str], bool]) -> None:
        self.is_float = is_float

    def visit_true(self) -> Expr:
        return TRUE

    def visit_false(self) -> Expr:
        return FALSE

    def visit_not(self, child: Expr) -> Expr:
        return negate(child, lambda c: self.is_float(c.name))

    def visit_and(self, left: Expr, right: Expr) -> Expr:
        return and_(left, right)

    def visit_or(self, left: Expr, right: Expr) -> Expr:
        return or_(left, right)

    def visit_leaf(self, node: LeafExpr) -> Expr:
        if isinstance(node, Condition):
            if any(self.is_float(c) for c in term_columns(node.term)):
                raise _NotSparks(f"{node} computes on a float column")
            return node
        if isinstance(node, (IsNull, IsNan)) or not self.is_float(node.column.name):
            return node
        if isinstance(node, Compare):
            value = node.literal.value
            if value is None:
                return node  # NULL for every row in both
            return _float_compare(node.column, node.op, _float(value, node))
        if isinstance(node, In):
            return _in_values(node.column, [None if v.value is None else _float(v.value, node)
                                            for v in node.values], node.negated)
        raise _NotSparks(f"{node} on a float column")


class _NotSparks(Exception):
    """A predicate pqindex cannot give Spark's float semantics."""


def _float(value: Any, node: LeafExpr) -> float:
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return float(value)
    raise _NotSparks(f"{node}: a {type(value).__name__} compared with a float column")


def spark_float_order(expr: Expr, is_float: Callable[[str], bool]) -> Expr:
    """``expr`` (SQL text's predicate, as Spark reads it) as pqindex's IEEE predicate
    selecting exactly the rows Spark's does: Spark orders NaN above every number and
    has NaN = NaN (``x > 5`` keeps NaN rows, ``NOT x < 5`` too). ``is_float``: which
    columns (dotted names) hold floating point. A computation on a float column (a
    function, arithmetic, a comparison of two columns) raises :class:`UserInputError`:
    pqindex cannot give it Spark's ordering."""
    try:
        return visit(expr, _SparkFloats(is_float))
    except _NotSparks as e:
        raise UserInputError(f"pqindex cannot apply {e} with Spark's NaN ordering "
                             "(NaN above every number)") from None


def float_columns(schema: Any) -> Callable[[str], bool]:
    """``is_float`` of :func:`spark_float_order` for a Spark ``StructType``."""
    def is_float(name: str) -> bool:
        found = _leaf(name.split("."), schema)
        return found is not None and _type_name(found[1]) in _FLOAT_TYPES
    return is_float


def _like_escaped(text: str) -> str:
    return "".join("\\" + ch if ch in "%_\\" else ch for ch in text)


def to_predicate(f: Any, schema: Any) -> Expr | None:
    """pqindex's predicate selecting exactly the rows Spark's filter ``f`` keeps in a
    WHERE over ``schema`` (the data source's ``StructType``); None when it has none."""
    return _convert(f, schema, negate=False)


def _convert(f: Any, schema: Any, negate: bool) -> Expr | None:
    kind = type(f).__name__
    if kind == "Not":
        return _convert(f.child, schema, not negate)
    found = _leaf(getattr(f, "attribute", ()), schema)
    if found is None:
        return None
    name, dtype = found
    dtype_name = _type_name(dtype)
    if dtype_name not in _ORDERED_TYPES and dtype_name != "BooleanType":
        return None  # structs, lists, maps, intervals, variants, collated strings
    c = col(name)
    if kind in ("IsNull", "IsNotNull"):
        return c.is_null() if (kind == "IsNull") != negate else c.is_not_null()
    if kind == "EqualNullSafe":
        if f.value is None:
            return c.is_null() if not negate else c.is_not_null()
        equal = _compare(c, dtype_name, LeafOp.NE if negate else LeafOp.EQ, f.value)
        if equal is None:
            return None
        return or_(c.is_null(), equal) if negate else equal
    if kind in _OPS:
        if f.value is None:  # x op NULL is NULL, and so is its NOT
            return FALSE
        return _compare(c, dtype_name, _OPS[kind][negate], f.value)
    if kind == "In":
        return _in(c, dtype_name, f.value, negate)
    if kind in ("StringStartsWith", "StringEndsWith", "StringContains"):
        if dtype_name != "StringType" or not isinstance(f.value, str):
            return None
        if "\\" in f.value and kind != "StringStartsWith":
            # Arrow's LIKE shortcuts for '%suffix' and '%part%' (pyarrow 26) match an
            # escaped backslash as two characters: a prefix is compared as bytes.
            return None
        text = _like_escaped(f.value)
        pattern = {"StringStartsWith": text + "%", "StringEndsWith": "%" + text,
                   "StringContains": "%" + text + "%"}[kind]
        return like(c, pattern, negated=negate, escape="\\")
    return None


def split_filters(filters: Sequence[Any], schema: Any) -> tuple[list[tuple[Any, Expr]], list[Any]]:
    """The filters pqindex applies exactly, each with its predicate, and the others
    (the very objects Spark passed, as ``pushFilters`` must return them)."""
    used: list[tuple[Any, Expr]] = []
    rest: list[Any] = []
    for f in filters:
        try:
            expr = to_predicate(f, schema)
        except PqIndexError:  # a literal pqindex refuses is Spark's to apply
            expr = None
        if expr is None:
            rest.append(f)
        else:
            used.append((f, expr))
    return used, rest


def _version(text: str) -> tuple[int, int]:
    parts = [*text.split("-")[0].split("."), "0", "0"][:2]
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return 0, 0


def enable_pushdown(spark: Any) -> str | None:
    """Turn on Spark's filter pushdown to Python data sources in ``spark``'s session
    (classic or Connect). None when it is on; otherwise why it cannot be."""
    version = str(spark.version)
    if _version(version) < (4, 1):
        return (f"Spark {version} hands no filters to Python data sources (filter pushdown "
                f"came with Spark 4.1): spark.read.format('pqindex') reads every row group "
                f"unless given .option('where', ...); pqindex.spark.read(spark, path, "
                f"where=...) prunes on any version")
    spark.conf.set(PUSHDOWN_CONF, "true")
    return None
