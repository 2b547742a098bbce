"""The SQL type family of each value expression, checked once when a predicate is bound.

A term's type is one of a few families (``TermType``): enough to refuse a
misuse with a message that names it (``lower(amount)`` on a number, ``DATE +
'x'``) before any file is read, to pick the evaluation's kernels, and to say
where a bound derived through an expression can be trusted (see ``derive.py``).
The families follow DuckDB's rules: ``/`` gives a DOUBLE, a DATE plus an
INTERVAL a TIMESTAMP, a DATE minus a DATE a number of days.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from enum import StrEnum

from pqindex.errors import UserInputError
from pqindex.expr.nodes import Case, Cast, Column, Func, Interval, Literal, Term, term_sql
from pqindex.format.value_type import Kind

__all__ = ["TermType", "column_type", "term_type"]


class TermType(StrEnum):
    """A family of SQL types."""

    NULL = "NULL"
    BOOLEAN = "BOOLEAN"
    INTEGER = "INTEGER"
    DECIMAL = "DECIMAL"
    DOUBLE = "DOUBLE"
    DATE = "DATE"
    TIMESTAMP = "TIMESTAMP"
    TIME = "TIME"
    INTERVAL = "INTERVAL"
    VARCHAR = "VARCHAR"
    BLOB = "BLOB"
    OTHER = "OTHER"


_NUMERIC = (TermType.INTEGER, TermType.DECIMAL, TermType.DOUBLE)
_TEMPORAL = (TermType.DATE, TermType.TIMESTAMP)
_KIND_TYPES = {
    Kind.BOOL: TermType.BOOLEAN, Kind.INT: TermType.INTEGER, Kind.UINT: TermType.INTEGER,
    Kind.DECIMAL: TermType.DECIMAL, Kind.FLOAT: TermType.DOUBLE, Kind.DOUBLE: TermType.DOUBLE,
    Kind.FLOAT16: TermType.DOUBLE, Kind.DATE: TermType.DATE, Kind.TIMESTAMP: TermType.TIMESTAMP,
    Kind.TIME: TermType.TIME, Kind.STRING: TermType.VARCHAR, Kind.BINARY: TermType.BLOB,
}
_CAST_TYPES = {
    "BOOLEAN": TermType.BOOLEAN, "TINYINT": TermType.INTEGER, "SMALLINT": TermType.INTEGER,
    "INTEGER": TermType.INTEGER, "BIGINT": TermType.INTEGER, "FLOAT": TermType.DOUBLE,
    "DOUBLE": TermType.DOUBLE, "VARCHAR": TermType.VARCHAR, "DATE": TermType.DATE,
    "TIMESTAMP": TermType.TIMESTAMP, "TIMESTAMPTZ": TermType.TIMESTAMP,
}
_STRING_FUNCTIONS = frozenset({"lower", "upper", "trim", "ltrim", "rtrim", "substr"})
_PART_FUNCTIONS = frozenset({"year", "quarter", "month", "day", "hour", "minute", "second",
                             "dayofweek", "dayofyear"})
_TEXT_TESTS = frozenset({"like", "ilike", "regexp_matches", "starts_with", "ends_with",
                         "contains"})
_COMPARISONS = frozenset({"=", "!=", "<", "<=", ">", ">="})


def column_type(kind: Kind) -> TermType:
    """The family of a column's values."""
    return _KIND_TYPES.get(kind, TermType.OTHER)


# Python types of literal values and their families, first match wins (a bool is an
# int, a datetime a date).
_LITERAL_TYPES: tuple[tuple[type, TermType], ...] = (
    (bool, TermType.BOOLEAN), (int, TermType.INTEGER), (Decimal, TermType.DECIMAL),
    (float, TermType.DOUBLE), (str, TermType.VARCHAR), (bytes, TermType.BLOB),
    (dt.datetime, TermType.TIMESTAMP), (dt.date, TermType.DATE), (dt.time, TermType.TIME),
)


def literal_type(value: object) -> TermType:
    """The family of a literal's value."""
    if value is None:
        return TermType.NULL
    return next((t for py, t in _LITERAL_TYPES if isinstance(value, py)), TermType.OTHER)


def numeric_result(a: TermType, b: TermType) -> TermType:
    """The family of ``a op b`` for numbers: DOUBLE wins, then DECIMAL."""
    if TermType.DOUBLE in (a, b):
        return TermType.DOUBLE
    if TermType.DECIMAL in (a, b):
        return TermType.DECIMAL
    return TermType.INTEGER


def comparable(a: TermType, b: TermType, b_is_literal: bool = False) -> bool:
    """Whether values of the two families can be compared (a string literal reads
    as a date or timestamp, as engines cast it)."""
    if TermType.NULL in (a, b) or a == b:
        return True
    if a in _NUMERIC and b in _NUMERIC:
        return True
    if a in _TEMPORAL and b in _TEMPORAL:
        return True
    return b_is_literal and b == TermType.VARCHAR and a in (*_TEMPORAL, TermType.TIME)


def term_type(value: Term, column: Callable[[str], TermType]) -> TermType:
    """The family of ``value``'s result; UserInputError naming the sub-expression
    where an operator or function does not apply to its arguments."""
    if isinstance(value, Column):
        return column(value.name)
    if isinstance(value, Literal):
        return literal_type(value.value)
    if isinstance(value, Interval):
        return TermType.INTERVAL
    if isinstance(value, Cast):
        source = term_type(value.value, column)
        if source in (TermType.INTERVAL, TermType.OTHER, TermType.BLOB):
            raise UserInputError(f"{term_sql(value)}: cannot cast {source} to {value.type}")
        return TermType.DECIMAL if value.type.startswith("DECIMAL") else _CAST_TYPES[value.type]
    if isinstance(value, Case):
        for cond, _ in value.whens:
            _expect(value, cond, term_type(cond, column), (TermType.BOOLEAN,), "WHEN")
        return _common(value, [term_type(t, column) for _, t in value.whens]
                       + [term_type(value.default, column)])
    assert isinstance(value, Func)
    return _func_type(value, [term_type(a, column) for a in value.args])


def _expect(node: Term, arg: Term, got: TermType, allowed: tuple[TermType, ...],
            what: str) -> None:
    if got not in allowed and got != TermType.NULL:
        names = " or ".join(str(t) for t in allowed)
        raise UserInputError(
            f"{term_sql(node)}: {what} needs {names}, not {got} ({term_sql(arg)})")


def _common(node: Term, types: list[TermType]) -> TermType:
    """The family values of ``types`` are brought to (CASE, COALESCE)."""
    known = [t for t in types if t != TermType.NULL]
    if not known:
        return TermType.NULL
    if all(t in _NUMERIC for t in known):
        out: TermType = known[0]
        for t in known[1:]:
            out = numeric_result(out, t)
        return out
    if all(t in _TEMPORAL for t in known):
        return TermType.TIMESTAMP if TermType.TIMESTAMP in known else TermType.DATE
    if len(set(known)) > 1:
        shown = ", ".join(dict.fromkeys(str(t) for t in known))
        raise UserInputError(f"{term_sql(node)}: values of different types ({shown})")
    return known[0]


def _func_type(node: Func, types: list[TermType]) -> TermType:
    name, args = node.name, node.args
    if name in ("+", "-"):
        return _plus_minus(node, types[0], types[1])
    if name in ("*", "/"):
        for arg, t in zip(args, types, strict=True):
            _expect(node, arg, t, _NUMERIC, f"'{name}'")
        return TermType.DOUBLE if name == "/" else numeric_result(types[0], types[1])
    if name in ("negate", "abs", "round", "floor", "ceil"):
        _expect(node, args[0], types[0], _NUMERIC, f"{name}()")
        if name == "round" and len(args) > 1:
            _expect(node, args[1], types[1], (TermType.INTEGER,), "round()'s digits")
        return TermType.INTEGER if types[0] == TermType.NULL else types[0]
    if name in _STRING_FUNCTIONS or name == "length":
        _expect(node, args[0], types[0], (TermType.VARCHAR,), f"{name}()")
        for arg, t in zip(args[1:], types[1:], strict=True):
            _expect(node, arg, t, (TermType.INTEGER,), f"{name}()'s position")
        return TermType.INTEGER if name == "length" else TermType.VARCHAR
    if name in ("||", "concat"):
        for arg, t in zip(args, types, strict=True):
            if t in (TermType.INTERVAL, TermType.OTHER, TermType.BLOB):
                raise UserInputError(f"{term_sql(node)}: cannot concatenate {t} "
                                     f"({term_sql(arg)})")
        return TermType.VARCHAR
    if name == "coalesce":
        return _common(node, types)
    if name == "nullif":
        if not comparable(types[0], types[1], isinstance(args[1], Literal)):
            raise UserInputError(f"{term_sql(node)}: cannot compare {types[0]} with {types[1]}")
        return types[0]
    if name in _PART_FUNCTIONS:
        _expect(node, args[0], types[0], _TEMPORAL, f"{name}()")
        return TermType.INTEGER
    if name in _COMPARISONS or name == "in":
        for arg, t in zip(args[1:], types[1:], strict=True):
            if not (comparable(types[0], t, isinstance(arg, Literal))
                    or comparable(t, types[0], isinstance(args[0], Literal))):
                raise UserInputError(f"{term_sql(node)}: cannot compare {types[0]} with {t}")
        return TermType.BOOLEAN
    if name == "is_null":
        return TermType.BOOLEAN
    if name == "isnan":
        _expect(node, args[0], types[0], (TermType.DOUBLE,), "isnan()")
        return TermType.BOOLEAN
    if name in _TEXT_TESTS:
        _expect(node, args[0], types[0], (TermType.VARCHAR,), f"{name}()")
        _expect(node, args[1], types[1], (TermType.VARCHAR,), f"{name}()'s pattern")
        return TermType.BOOLEAN
    if name in ("not", "and", "or"):
        for arg, t in zip(args, types, strict=True):
            _expect(node, arg, t, (TermType.BOOLEAN,), name.upper())
        return TermType.BOOLEAN
    raise UserInputError(f"function {name}() is not supported")


def _plus_minus(node: Func, a: TermType, b: TermType) -> TermType:
    """DuckDB's ``+`` / ``-``: numbers, a date plus or minus days (an integer), a date
    or timestamp plus or minus an interval, a date minus a date (days)."""
    name = node.name
    if a in _NUMERIC and b in _NUMERIC:
        return numeric_result(a, b)
    if TermType.NULL in (a, b):
        other = b if a == TermType.NULL else a
        return TermType.INTEGER if other == TermType.NULL else (
            TermType.TIMESTAMP if other == TermType.INTERVAL else other)
    if a in _TEMPORAL and b == TermType.INTERVAL:
        return TermType.TIMESTAMP
    if name == "+" and a == TermType.INTERVAL and b in _TEMPORAL:
        return TermType.TIMESTAMP
    if a == TermType.DATE and b == TermType.INTEGER:
        return TermType.DATE
    if name == "+" and a == TermType.INTEGER and b == TermType.DATE:
        return TermType.DATE
    if name == "-" and a == TermType.DATE and b == TermType.DATE:
        return TermType.INTEGER
    raise UserInputError(f"{term_sql(node)}: cannot apply '{name}' to {a} and {b}")
