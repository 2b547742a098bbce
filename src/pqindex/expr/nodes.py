"""The unbound predicate tree: small frozen nodes, operator overloads, a visitor.

``col("x") == 3`` builds ``Compare(LeafOp.EQ, Column("x"), Literal(3))``; ``&``,
``|`` and ``~`` combine predicates and fold TRUE/FALSE as they go. Nothing here
knows a file's schema: ``bind`` resolves columns and coerces literals later.

Semantics are SQL's (three-valued: a comparison with NULL is never true) with
IEEE floats; see ``docs/semantics.md``.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import Any, Generic, TypeAlias, TypeVar, assert_never

from pqindex.errors import UserInputError
from pqindex.format.match import LeafOp

__all__ = [
    "FALSE",
    "TRUE",
    "AlwaysFalse",
    "AlwaysTrue",
    "And",
    "Case",
    "Cast",
    "Column",
    "Compare",
    "Condition",
    "Expr",
    "ExprVisitor",
    "Func",
    "In",
    "Interval",
    "IsNan",
    "IsNull",
    "Like",
    "Literal",
    "LiteralValue",
    "Not",
    "Or",
    "Regexp",
    "StartsWith",
    "Term",
    "add_months",
    "and_",
    "case",
    "col",
    "compare_terms",
    "func",
    "leaf_exprs",
    "leaf_node",
    "like",
    "lit",
    "not_",
    "or_",
    "regexp_prefix",
    "term",
    "term_columns",
    "term_sql",
    "visit",
]

LiteralValue: TypeAlias = (
    bool | int | float | Decimal | str | bytes | dt.date | dt.datetime | dt.time | uuid.UUID
    | None
)

T = TypeVar("T")

COMPARISON_OPS = (LeafOp.EQ, LeafOp.NE, LeafOp.LT, LeafOp.LE, LeafOp.GT, LeafOp.GE)
# `3 < x` is `x > 3`.
FLIPPED: dict[LeafOp, LeafOp] = {
    LeafOp.EQ: LeafOp.EQ, LeafOp.NE: LeafOp.NE, LeafOp.LT: LeafOp.GT,
    LeafOp.LE: LeafOp.GE, LeafOp.GT: LeafOp.LT, LeafOp.GE: LeafOp.LE,
}

_KEYWORDS = frozenset({
    "AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "LIKE", "TRUE", "FALSE",
    "ILIKE", "ESCAPE", "CASE", "WHEN", "THEN", "ELSE", "END", "CAST", "INTERVAL",
})


# ---------------------------------------------------------------- limits

# Far beyond any Parquet type (DECIMAL holds 38 digits at most, FLBA decimals a few
# hundred); the cap keeps int/str conversions of absurd literals cheap.
MAX_LITERAL_DIGITS = 1_000
# An IN list longer than this is refused before it is materialized.
MAX_IN_VALUES = 1_000_000
_MAX_INT_BITS = int(MAX_LITERAL_DIGITS * 3.33) + 1


def check_literal(value: object) -> None:
    """UserInputError for a literal no column can hold or no file can encode:
    a number of more than ``MAX_LITERAL_DIGITS`` digits, a string with a lone
    surrogate (not UTF-8)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > _MAX_INT_BITS:
            raise UserInputError(
                f"integer literal of {value.bit_length()} bits is too large "
                f"(at most {MAX_LITERAL_DIGITS} digits)")
    elif isinstance(value, Decimal):
        if value.is_finite() and len(value.as_tuple().digits) > MAX_LITERAL_DIGITS:
            raise UserInputError(
                f"decimal literal of {len(value.as_tuple().digits)} digits is too large "
                f"(at most {MAX_LITERAL_DIGITS})")
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise UserInputError(
                f"string literal is not valid Unicode: lone surrogate "
                f"{value[e.start]!r} at position {e.start}") from None


def literal_list(values: Iterable[object], column: str | None = None) -> tuple[Literal, ...]:
    """The values of an IN list as literals, refusing more than ``MAX_IN_VALUES``
    before materializing them (``range(10**9)`` is refused by its length, an
    endless generator after ``MAX_IN_VALUES + 1`` items)."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise UserInputError(f"IN needs a list of values, not {values!r}", column=column)
    n: int | None
    try:
        n = len(values)  # type: ignore[arg-type]
    except (TypeError, OverflowError):  # no len(); or len() past sys.maxsize
        n = None if not hasattr(values, "__len__") else MAX_IN_VALUES + 1
    too_many = UserInputError(
        f"IN list longer than {MAX_IN_VALUES:,} values "
        f"(pqindex.expr.nodes.MAX_IN_VALUES); filter in pieces or use a range",
        column=column)
    if n is not None and n > MAX_IN_VALUES:
        raise too_many
    fast = _same_type_literals(values)
    if fast is not None:
        return fast
    out = []
    for v in values:
        out.append(lit(v))
        if len(out) > MAX_IN_VALUES:
            raise too_many
    return tuple(out)


def _same_type_literals(values: object) -> tuple[Literal, ...] | None:
    """The literals of a list (or numpy / Arrow array) of plain ints, floats or
    strings, checked once for the list rather than once per value (a 1,000,000-value
    IN list: ~0.3 s, not ~2 s); None for anything else, which ``literal_list`` takes
    value by value."""
    if isinstance(values, (list, tuple)):
        seq: Sequence[object] = values
    elif type(values).__module__ == "numpy" and getattr(values, "ndim", 0) == 1 \
            and getattr(getattr(values, "dtype", None), "kind", "") in "iuf":
        seq = values.tolist()  # type: ignore[attr-defined]  # what .item() gives each
    else:
        return None
    if len(seq) < 8:
        return None
    kinds = set(map(type, seq))
    if len(kinds) != 1:
        return None
    (kind,) = kinds
    if kind is int:
        if max(map(abs, (min(seq), max(seq)))).bit_length() > _MAX_INT_BITS:  # type: ignore[type-var, arg-type]
            return None  # literal_list names the one too large
    elif kind is str:
        try:
            "".join(seq).encode("utf-8")  # type: ignore[arg-type]
        except UnicodeEncodeError:
            return None  # literal_list names the one not valid Unicode
    elif kind is not float:
        return None
    out = []
    new, setattr_ = object.__new__, object.__setattr__
    for v in seq:  # checked above: no __post_init__ per value
        one = new(Literal)
        setattr_(one, "value", v)
        out.append(one)
    return tuple(out)


# ---------------------------------------------------------------- terms


def _literal_value(value: object) -> LiteralValue:
    """A Python value accepted as a literal; numpy/pyarrow scalars are unwrapped."""
    if isinstance(value, Literal):
        return value.value
    if value is None or isinstance(value, (bool, int, float, Decimal, str, bytes, dt.date,
                                           dt.time, uuid.UUID)):
        return value
    for unwrap in ("as_py", "item"):  # pyarrow / numpy scalars
        method = getattr(value, unwrap, None)
        if callable(method):
            return _literal_value(method())
    raise UserInputError(f"unsupported literal {value!r} of type {type(value).__name__}")


def literal_type_name(value: LiteralValue) -> str:
    """The literal's SQL-ish type, for error messages."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, Decimal):
        return "decimal"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "binary"
    if isinstance(value, dt.datetime):
        return "TIMESTAMP"
    if isinstance(value, dt.date):
        return "DATE"
    if isinstance(value, dt.time):
        return "TIME"
    return "UUID"


def _quote(text: str, quote: str) -> str:
    return quote + text.replace(quote, quote * 2) + quote


def literal_sql(value: LiteralValue) -> str:
    """SQL text of a literal (floats carry an exponent so they re-parse as floats)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, float):
        text = repr(value)
        if text in ("nan", "inf", "-inf"):
            return text.upper().replace("INF", "Infinity").replace("NAN", "NaN")
        return text if "e" in text else f"{text}E0"
    if isinstance(value, str):
        return _quote(value, "'")
    if isinstance(value, bytes):
        return f"X'{value.hex()}'"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, dt.time):
        return f"TIME '{value.isoformat()}'"
    return f"'{value}'"


def column_sql(name: str) -> str:
    """A dotted name with each part quoted only where needed."""
    parts = []
    for part in name.split("."):
        plain = (part.isidentifier() and part.isascii()
                 and part.upper() not in _KEYWORDS)
        parts.append(part if plain else _quote(part, '"'))
    return ".".join(parts)


class Term:
    """A value expression: a :class:`Column`, a :class:`Literal`, an :class:`Interval`,
    a :class:`Func` (operators and functions), a :class:`Case` or a :class:`Cast`.

    ``+ - * /`` and unary ``-`` build :class:`Func` nodes; ``< <= > >=`` and
    :meth:`eq` / :meth:`ne` build predicates. ``==`` and ``!=`` between two terms
    are structural equality (a bool, which keeps trees comparable); with any other
    value they build a predicate.
    """

    __slots__ = ()

    def _key(self) -> tuple[object, ...]:
        """The fields that make two terms of one class equal."""
        raise NotImplementedError

    def __eq__(self, other: object) -> Any:
        if isinstance(other, Term):
            return type(self) is type(other) and self._key() == other._key()
        return compare_terms(LeafOp.EQ, self, term(other))

    def __ne__(self, other: object) -> Any:
        if isinstance(other, Term):
            same = self.__eq__(other)  # a subclass's own structural equality
            return same if same is NotImplemented else not same
        return compare_terms(LeafOp.NE, self, term(other))

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def __add__(self, other: object) -> Term:
        return func("+", self, term(other))

    def __radd__(self, other: object) -> Term:
        return func("+", term(other), self)

    def __sub__(self, other: object) -> Term:
        return func("-", self, term(other))

    def __rsub__(self, other: object) -> Term:
        return func("-", term(other), self)

    def __mul__(self, other: object) -> Term:
        return func("*", self, term(other))

    def __rmul__(self, other: object) -> Term:
        return func("*", term(other), self)

    def __truediv__(self, other: object) -> Term:
        return func("/", self, term(other))

    def __rtruediv__(self, other: object) -> Term:
        return func("/", term(other), self)

    def __neg__(self) -> Term:
        return func("negate", self)

    def __lt__(self, other: object) -> Expr:
        return compare_terms(LeafOp.LT, self, term(other))

    def __le__(self, other: object) -> Expr:
        return compare_terms(LeafOp.LE, self, term(other))

    def __gt__(self, other: object) -> Expr:
        return compare_terms(LeafOp.GT, self, term(other))

    def __ge__(self, other: object) -> Expr:
        return compare_terms(LeafOp.GE, self, term(other))

    def eq(self, other: object) -> Expr:
        """``self = other`` as a predicate (also between two columns)."""
        return compare_terms(LeafOp.EQ, self, term(other))

    def ne(self, other: object) -> Expr:
        """``self != other`` as a predicate (also between two columns)."""
        return compare_terms(LeafOp.NE, self, term(other))

    def isin(self, values: Iterable[object]) -> Expr:
        """``self IN (values)``; at most ``MAX_IN_VALUES`` of them."""
        return in_terms(self, literal_list(values))

    def is_null(self) -> Expr:
        return condition(func("is_null", self))

    def is_not_null(self) -> Expr:
        return not_(self.is_null())

    def between(self, low: object, high: object) -> Expr:
        """``low <= self AND self <= high`` (inclusive, like SQL BETWEEN)."""
        return and_(compare_terms(LeafOp.GE, self, term(low)),
                    compare_terms(LeafOp.LE, self, term(high)))

    def like(self, pattern: str, escape: str | None = None) -> Expr:
        """``self LIKE pattern [ESCAPE escape]``."""
        return like_term(self, pattern, escape=escape)

    def ilike(self, pattern: str, escape: str | None = None) -> Expr:
        """``self ILIKE pattern``."""
        return like_term(self, pattern, ignore_case=True, escape=escape)

    def startswith(self, prefix: str) -> Expr:
        """``starts_with(self, prefix)``."""
        return predicate_term(func("starts_with", self, term(prefix)))

    def endswith(self, suffix: str) -> Expr:
        """``ends_with(self, suffix)``."""
        return predicate_term(func("ends_with", self, term(suffix)))

    def contains(self, part: str) -> Expr:
        """``contains(self, part)``."""
        return predicate_term(func("contains", self, term(part)))

    def cast(self, type_name: str) -> Term:
        """``CAST(self AS type_name)`` (``BIGINT``, ``DOUBLE``, ``DECIMAL(p, s)``, ...)."""
        return Cast(self, cast_type(type_name))

    def abs(self) -> Term:
        return func("abs", self)

    def round(self, digits: int = 0) -> Term:
        return func("round", self, Literal(digits))

    def lower(self) -> Term:
        return func("lower", self)

    def upper(self) -> Term:
        return func("upper", self)

    def length(self) -> Term:
        return func("length", self)

    def trim(self) -> Term:
        return func("trim", self)

    def substr(self, start: int, length: int | None = None) -> Term:
        """SQL ``substr``: ``start`` counts from 1 (negative: from the end)."""
        args = (Literal(start),) if length is None else (Literal(start), Literal(length))
        return func("substr", self, *args)

    def year(self) -> Term:
        return func("year", self)

    def month(self) -> Term:
        return func("month", self)

    def day(self) -> Term:
        return func("day", self)


@dataclass(frozen=True, slots=True, eq=False)
class Column(Term):
    """A column by its dotted leaf path; comparing it with a value builds a predicate.

    ``Column == Column`` is structural equality (a bool), which keeps trees
    comparable; ``col("a").eq(col("b"))`` is the predicate, and ``<`` between two
    columns builds one directly.
    """

    name: str

    def __eq__(self, other: object) -> Any:
        if isinstance(other, Term) and not isinstance(other, Literal):
            return isinstance(other, Column) and self.name == other.name
        return Compare(LeafOp.EQ, self, lit(other))

    def __ne__(self, other: object) -> Any:
        if isinstance(other, Term) and not isinstance(other, Literal):
            return not (isinstance(other, Column) and self.name == other.name)
        return Compare(LeafOp.NE, self, lit(other))

    def __hash__(self) -> int:
        return hash(("Column", self.name))

    def isin(self, values: Iterable[object]) -> In:
        """``x IN (values)``; at most ``MAX_IN_VALUES`` of them."""
        return In(self, literal_list(values, self.name))

    def is_null(self) -> IsNull:
        return IsNull(self)

    def is_not_null(self) -> IsNull:
        return IsNull(self, negated=True)

    def is_nan(self) -> IsNan:
        """True for NaN (floating-point columns only); NULL is not NaN."""
        return IsNan(self)

    def between(self, low: object, high: object) -> Expr:
        """``low <= x AND x <= high`` (inclusive, like SQL BETWEEN)."""
        return and_(self >= low, self <= high)

    def startswith(self, prefix: str | bytes) -> StartsWith:
        """``x LIKE 'prefix%'``."""
        return StartsWith(self, prefix)

    def like(self, pattern: str, escape: str | None = None) -> Expr:
        """``x LIKE pattern [ESCAPE escape]`` (see :func:`like`)."""
        return like(self, pattern, escape=escape)

    def ilike(self, pattern: str, escape: str | None = None) -> Expr:
        """``x ILIKE pattern``: LIKE on the values and the pattern lowercased."""
        return like(self, pattern, ignore_case=True, escape=escape)

    def regexp_matches(self, pattern: str) -> Regexp:
        """``regexp_matches(x, pattern)``: the RE2 expression found in the value."""
        return Regexp(self, pattern)

    def __str__(self) -> str:
        return column_sql(self.name)


@dataclass(frozen=True, slots=True, eq=False)
class Literal(Term):
    """A constant; equal only to a literal of the same Python type and value."""

    value: LiteralValue

    def __post_init__(self) -> None:
        check_literal(self.value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Literal):
            return NotImplemented
        return type(self.value) is type(other.value) and bool(self.value == other.value)

    def __hash__(self) -> int:
        return hash((type(self.value).__name__, self.value))

    def __str__(self) -> str:
        return literal_sql(self.value)


def col(name: str) -> Column:
    """The column ``name`` (dotted for struct fields: ``"a.b"``)."""
    if not isinstance(name, str) or not name:
        raise UserInputError(f"a column name must be a non-empty string, not {name!r}")
    return Column(name)


def lit(value: object) -> Literal:
    """A literal from a Python value (None is SQL NULL)."""
    return value if isinstance(value, Literal) else Literal(_literal_value(value))


def term(value: object) -> Term:
    """A term as it is, anything else as a literal."""
    return value if isinstance(value, Term) else lit(value)


@dataclass(frozen=True, slots=True, eq=False)
class Interval(Term):
    """An ``INTERVAL``: months, days and microseconds, kept apart as SQL engines do
    (a month has no fixed number of days)."""

    months: int = 0
    days: int = 0
    micros: int = 0

    def _key(self) -> tuple[object, ...]:
        return (self.months, self.days, self.micros)

    def __str__(self) -> str:
        parts = [f"{n} {unit}" for n, unit in ((self.months, "MONTH"), (self.days, "DAY"),
                                                (self.micros, "MICROSECOND")) if n]
        return " + ".join(f"INTERVAL {p}" for p in parts) if parts else "INTERVAL 0 DAY"


# The functions a Func node may name: (fewest, most) arguments; None: any number.
# Operators are functions too ("+", "=", "and", ...).
FUNCTION_ARITY: dict[str, tuple[int, int | None]] = {
    "+": (2, 2), "-": (2, 2), "*": (2, 2), "/": (2, 2), "||": (2, 2), "negate": (1, 1),
    "abs": (1, 1), "round": (1, 2), "floor": (1, 1), "ceil": (1, 1),
    "lower": (1, 1), "upper": (1, 1), "length": (1, 1), "trim": (1, 1), "ltrim": (1, 1),
    "rtrim": (1, 1), "substr": (2, 3), "concat": (1, None), "coalesce": (1, None),
    "nullif": (2, 2),
    "year": (1, 1), "quarter": (1, 1), "month": (1, 1), "day": (1, 1), "hour": (1, 1),
    "minute": (1, 1), "second": (1, 1), "dayofweek": (1, 1), "dayofyear": (1, 1),
    # boolean-valued
    "=": (2, 2), "!=": (2, 2), "<": (2, 2), "<=": (2, 2), ">": (2, 2), ">=": (2, 2),
    "in": (2, None), "is_null": (1, 1), "isnan": (1, 1), "like": (2, 3), "ilike": (2, 3),
    "regexp_matches": (2, 2), "starts_with": (2, 2), "ends_with": (2, 2),
    "contains": (2, 2), "not": (1, 1), "and": (2, 2), "or": (2, 2),
}
PREDICATE_FUNCTIONS = frozenset({
    "=", "!=", "<", "<=", ">", ">=", "in", "is_null", "isnan", "like", "ilike",
    "regexp_matches", "starts_with", "ends_with", "contains", "not", "and", "or"})
# Other spellings DuckDB and Spark users write.
FUNCTION_ALIASES = {
    "substring": "substr", "char_length": "length", "character_length": "length",
    "lcase": "lower", "ucase": "upper", "ceiling": "ceil", "startswith": "starts_with",
    "endswith": "ends_with", "suffix": "ends_with", "prefix": "starts_with",
    "dayofmonth": "day", "dow": "dayofweek", "doy": "dayofyear", "ifnull": "coalesce",
    "nvl": "coalesce",
}
# Arguments that must be literals (the kernels take them as options).
_LITERAL_ARGS = {"like": (1, 2), "ilike": (1, 2), "regexp_matches": (1,), "starts_with": (1,),
                 "ends_with": (1,), "contains": (1,), "substr": (1, 2), "round": (1,)}
_INFIX = {"+": 6, "-": 6, "*": 7, "/": 7, "||": 5}


@dataclass(frozen=True, slots=True, eq=False)
class Func(Term):
    """A function or operator applied to terms (``name`` one of ``FUNCTION_ARITY``)."""

    name: str
    args: tuple[Term, ...]

    def __post_init__(self) -> None:
        arity = FUNCTION_ARITY.get(self.name)
        if arity is None:
            raise UserInputError(f"function {self.name}() is not supported")
        low, high = arity
        if len(self.args) < low or (high is not None and len(self.args) > high):
            want = f"{low}" if low == high else f"{low} to {high}" if high else f"{low} or more"
            raise UserInputError(
                f"{self.name}() takes {want} arguments, not {len(self.args)}")
        for i in _LITERAL_ARGS.get(self.name, ()):
            if i < len(self.args) and not isinstance(self.args[i], Literal):
                raise UserInputError(
                    f"argument {i + 1} of {self.name}() must be a literal, not {self.args[i]}")
        if self.name in ("like", "ilike"):
            pattern, escape = self.args[1], self.args[2] if len(self.args) > 2 else None
            assert isinstance(pattern, Literal)
            check_like_pattern(pattern.value, None if escape is None else escape_value(escape),
                               self.name.upper())

    def _key(self) -> tuple[object, ...]:
        return (self.name, self.args)

    def __str__(self) -> str:
        return term_sql(self)


@dataclass(frozen=True, slots=True, eq=False)
class Case(Term):
    """``CASE WHEN condition THEN value ... ELSE default END``."""

    whens: tuple[tuple[Term, Term], ...]  # (boolean condition, value)
    default: Term

    def _key(self) -> tuple[object, ...]:
        return (self.whens, self.default)

    def __str__(self) -> str:
        return term_sql(self)


def case(whens: Sequence[tuple[Expr | Term, object]], default: object = None) -> Term:
    """``CASE WHEN cond THEN value ... ELSE default END`` (conditions as predicates
    or boolean terms)."""
    if not whens:
        raise UserInputError("CASE needs at least one WHEN")
    return Case(tuple((as_term(c) if isinstance(c, Expr) else c, term(v)) for c, v in whens),
                term(default))


def as_term(expr: Expr) -> Term:
    """A predicate as the boolean term that evaluates it (for CASE conditions and
    NOT over a :class:`Condition`)."""
    return visit(expr, _AsTerm())


# CAST targets: the SQL spellings of each type, and the name it is printed as.
CAST_TYPES = {
    "BOOLEAN": "BOOLEAN", "BOOL": "BOOLEAN",
    "TINYINT": "TINYINT", "INT1": "TINYINT", "BYTE": "TINYINT",
    "SMALLINT": "SMALLINT", "INT2": "SMALLINT", "SHORT": "SMALLINT",
    "INTEGER": "INTEGER", "INT": "INTEGER", "INT4": "INTEGER", "SIGNED": "INTEGER",
    "BIGINT": "BIGINT", "INT8": "BIGINT", "LONG": "BIGINT",
    "REAL": "FLOAT", "FLOAT": "FLOAT", "FLOAT4": "FLOAT",
    "DOUBLE": "DOUBLE", "FLOAT8": "DOUBLE",
    "VARCHAR": "VARCHAR", "STRING": "VARCHAR", "TEXT": "VARCHAR",
    "DATE": "DATE", "TIMESTAMP": "TIMESTAMP", "TIMESTAMPTZ": "TIMESTAMPTZ",
    "DECIMAL": "DECIMAL", "NUMERIC": "DECIMAL",
}
_DECIMAL_TYPE = re.compile(r"^(?:DECIMAL|NUMERIC)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$")


def cast_type(type_name: str) -> str:
    """The canonical spelling of a CAST target (``DECIMAL(p,s)`` with both numbers)."""
    if not isinstance(type_name, str):
        raise UserInputError(f"CAST needs a type name, not {type_name!r}")
    text = " ".join(type_name.upper().split())
    m = _DECIMAL_TYPE.match(text)
    if m:
        precision = int(m.group(1) or 18)
        scale = int(m.group(2) or (0 if m.group(1) else 3))
        if not 1 <= precision <= 38 or scale > precision:
            raise UserInputError(f"CAST to {type_name}: precision 1 to 38, scale at most "
                                 "the precision")
        return f"DECIMAL({precision},{scale})"
    if text == "DOUBLE PRECISION":
        return "DOUBLE"
    if text not in CAST_TYPES:
        raise UserInputError(f"CAST to {type_name} is not supported (types: "
                             "BOOLEAN, TINYINT, SMALLINT, INTEGER, BIGINT, FLOAT, DOUBLE, "
                             "DECIMAL(p,s), VARCHAR, DATE, TIMESTAMP)")
    return CAST_TYPES[text]


@dataclass(frozen=True, slots=True, eq=False)
class Cast(Term):
    """``CAST(value AS type)``; ``type`` as :func:`cast_type` spells it."""

    value: Term
    type: str

    def _key(self) -> tuple[object, ...]:
        return (self.value, self.type)

    def __str__(self) -> str:
        return term_sql(self)


def func(name: str, *args: Term) -> Term:
    """``name(args)``, constant-folded when every argument is a literal it can fold
    exactly (numbers, dates and intervals)."""
    name = FUNCTION_ALIASES.get(name, name)
    node = Func(name, tuple(args))
    folded = fold_constant(node)
    return node if folded is None else folded


def escape_value(arg: Term) -> str:
    if not isinstance(arg, Literal) or not isinstance(arg.value, str) or len(arg.value) != 1:
        raise UserInputError(f"ESCAPE needs a string of one character, not {arg}")
    return arg.value


def check_like_pattern(pattern: object, escape: str | None, word: str) -> None:
    """UserInputError for a pattern ``like`` refuses (see :func:`like`)."""
    if not isinstance(pattern, str):
        raise UserInputError(f"{word} needs a string pattern, not {pattern!r}")
    if escape is None and "\\" in pattern:
        raise UserInputError(
            f"{word} patterns with a backslash are not supported ({literal_sql(pattern)}) "
            "without ESCAPE: DuckDB reads it as a character, Spark as an escape")
    like_tokens(pattern, escape)


def _plain_number(value: LiteralValue) -> bool:
    return isinstance(value, (int, Decimal)) and not isinstance(value, bool)


def fold_constant(node: Func) -> Term | None:
    """The literal a function of literals equals, where folding is exact and agrees
    with evaluation: integer and decimal ``+ - *`` and negation, and a date or
    timestamp plus or minus an interval of days. None otherwise (evaluated per row)."""
    args = node.args
    if node.name == "negate" and isinstance(args[0], Literal):
        x0 = args[0].value
        if isinstance(x0, (int, Decimal)) and _plain_number(x0):
            return Literal(-x0)
    if node.name not in ("+", "-", "*") or len(args) != 2:
        return None
    a, b = args
    if isinstance(a, Literal) and isinstance(b, Literal):
        x, y = a.value, b.value
        if isinstance(x, (int, Decimal)) and isinstance(y, (int, Decimal)) \
                and _plain_number(x) and _plain_number(y):
            with localcontext() as ctx:
                ctx.prec = 2 * MAX_LITERAL_DIGITS + 1  # exact for any literal accepted
                out = x + y if node.name == "+" else x - y if node.name == "-" else x * y
            return Literal(out)
        return None
    if node.name == "+" and isinstance(a, Interval):
        a, b = b, a
    if node.name in ("+", "-") and isinstance(a, Literal) and isinstance(b, Interval) \
            and isinstance(a.value, dt.date):
        sign = 1 if node.name == "+" else -1
        delta = dt.timedelta(days=b.days, microseconds=b.micros)
        day: dt.date = a.value
        try:
            shifted = add_months(day, sign * b.months) + sign * delta
        except (OverflowError, ValueError):
            return None
        return Literal(shifted)
    return None


def add_months(value: dt.date, months: int) -> dt.date:
    """``value`` plus ``months`` calendar months, the day clamped to the month's
    last (DuckDB's and Spark's rule); a datetime keeps its time of day."""
    total = value.year * 12 + (value.month - 1) + months
    year, month = divmod(total, 12)
    month += 1
    nxt = dt.date(year + (month == 12), month % 12 + 1, 1)
    last = (nxt - dt.timedelta(days=1)).day
    return value.replace(year=year, month=month, day=min(value.day, last))



def compare_terms(op: LeafOp, left: Term, right: Term) -> Expr:
    """``left op right``: a column against a literal is the :class:`Compare` leaf,
    anything else a :class:`Condition`."""
    if isinstance(left, Column) and isinstance(right, Literal):
        return Compare(op, left, right)
    if isinstance(left, Literal) and isinstance(right, Column):
        return Compare(FLIPPED[op], right, left)
    return Condition(Func(op.value, (left, right)))


def in_terms(value: Term, values: tuple[Literal, ...], negated: bool = False) -> Expr:
    """``value [NOT] IN (values)``: the :class:`In` leaf for a column."""
    if isinstance(value, Column):
        return In(value, values, negated=negated)
    found = Condition(Func("in", (value, *values)))
    return not_(found) if negated else found


def like_term(value: Term, pattern: str, negated: bool = False, *,
              ignore_case: bool = False, escape: str | None = None) -> Expr:
    """``value [NOT] [I]LIKE pattern``: :func:`like`'s leaves for a column."""
    if isinstance(value, Column):
        return like(value, pattern, negated, ignore_case=ignore_case, escape=escape)
    name = "ilike" if ignore_case else "like"
    extra = () if escape is None else (Literal(escape),)
    found = Condition(Func(name, (value, Literal(pattern), *extra)))
    return not_(found) if negated else found


def predicate_term(value: Term) -> Expr:
    """A boolean-valued term as a predicate: the leaves pqindex prunes best where
    they apply (``starts_with(col, 'p')``, ``isnan(col)``, ``regexp_matches(col,
    'p')``, a bare column), else a :class:`Condition`."""
    if isinstance(value, Column):
        return Compare(LeafOp.EQ, value, Literal(True))  # `WHERE flag`
    if isinstance(value, Literal):
        raise UserInputError(f"expected a condition, found the literal {value}")
    if isinstance(value, Func) and value.args and isinstance(value.args[0], Column):
        column, rest = value.args[0], value.args[1:]
        arg = rest[0].value if rest and isinstance(rest[0], Literal) else None
        if value.name == "isnan":
            return IsNan(column)
        if value.name == "starts_with" and isinstance(arg, (str, bytes)):
            return StartsWith(column, arg)
        if value.name == "regexp_matches" and isinstance(arg, str):
            return Regexp(column, arg)
    if isinstance(value, Func) and value.name not in PREDICATE_FUNCTIONS:
        raise UserInputError(f"expected a condition, found {term_sql(value)} "
                             "(compare it with something)")
    return Condition(value)


def condition(value: Term) -> Expr:
    """``value`` (a boolean term) as a predicate, without looking for simpler leaves."""
    return Condition(value)


def term_columns(value: Term) -> list[str]:
    """The distinct column names of a term, in order of appearance."""
    out: dict[str, None] = {}
    todo: list[Term] = [value]
    while todo:
        t = todo.pop()
        if isinstance(t, Column):
            out.setdefault(t.name)
        elif isinstance(t, Func):
            todo += reversed(t.args)
        elif isinstance(t, Cast):
            todo.append(t.value)
        elif isinstance(t, Case):
            todo.append(t.default)
            for cond, then in reversed(t.whens):
                todo += [then, cond]
    return list(out)


def replace_columns(value: Term, by: Mapping[str, Term]) -> Term:
    """``value`` with the columns named in ``by`` replaced (a column a file lacks
    becomes NULL)."""
    if isinstance(value, Column):
        return by.get(value.name, value)
    if isinstance(value, Func):
        return Func(value.name, tuple(replace_columns(a, by) for a in value.args))
    if isinstance(value, Cast):
        return Cast(replace_columns(value.value, by), value.type)
    if isinstance(value, Case):
        return Case(tuple((replace_columns(c, by), replace_columns(t, by))
                          for c, t in value.whens), replace_columns(value.default, by))
    return value


# Binding strength of infix operators in printed SQL (higher binds tighter).
_CMP_STRENGTH, _ATOM = 4, 9


def term_sql(value: Term) -> str:
    """SQL text of a term, parenthesized where the operators need it."""
    return _term_sql(value)[0]


def _term_sql(value: Term) -> tuple[str, int]:
    if isinstance(value, Func):
        name, args = value.name, value.args
        if name in _INFIX:
            strength = _INFIX[name]
            left, right = _term_sql(args[0]), _term_sql(args[1])
            ltext = left[0] if left[1] >= strength else f"({left[0]})"
            # a - (b - c): the right side of a left-associative operator needs more
            rtext = right[0] if right[1] > strength else f"({right[0]})"
            return f"{ltext} {name} {rtext}", strength
        if name == "negate":
            inner = _term_sql(args[0])
            return f"-{inner[0] if inner[1] >= _ATOM else '(' + inner[0] + ')'}", _ATOM
        if name in ("=", "!=", "<", "<=", ">", ">="):
            left, right = _term_sql(args[0]), _term_sql(args[1])
            return (f"{_wrap(left, _CMP_STRENGTH + 1)} {name} "
                    f"{_wrap(right, _CMP_STRENGTH + 1)}", _CMP_STRENGTH)
        if name in ("and", "or"):
            word = name.upper()
            strength = 2 if name == "and" else 1
            return (f"{_wrap(_term_sql(args[0]), strength)} {word} "
                    f"{_wrap(_term_sql(args[1]), strength)}", strength)
        if name == "not":
            return f"NOT {_wrap(_term_sql(args[0]), _ATOM)}", 3
        if name == "is_null":
            return f"{_wrap(_term_sql(args[0]), _CMP_STRENGTH + 1)} IS NULL", _CMP_STRENGTH
        if name == "in":
            items = ", ".join(term_sql(a) for a in args[1:])
            return f"{_wrap(_term_sql(args[0]), _CMP_STRENGTH + 1)} IN ({items})", _CMP_STRENGTH
        if name in ("like", "ilike"):
            escape = f" ESCAPE {term_sql(args[2])}" if len(args) > 2 else ""
            return (f"{_wrap(_term_sql(args[0]), _CMP_STRENGTH + 1)} {name.upper()} "
                    f"{term_sql(args[1])}{escape}", _CMP_STRENGTH)
        return f"{name}({', '.join(term_sql(a) for a in args)})", _ATOM
    if isinstance(value, Case):
        whens = " ".join(f"WHEN {term_sql(c)} THEN {term_sql(t)}" for c, t in value.whens)
        default = "" if value.default == Literal(None) else f" ELSE {term_sql(value.default)}"
        return f"CASE {whens}{default} END", _ATOM
    if isinstance(value, Cast):
        return f"CAST({term_sql(value.value)} AS {value.type})", _ATOM
    text = str(value)
    if isinstance(value, Literal) and isinstance(value.value, (int, float, Decimal)) \
            and text.startswith("-"):
        return text, 8  # -1 * x, but (-1) is not needed around a product
    return text, _ATOM


def _wrap(part: tuple[str, int], strength: int) -> str:
    return part[0] if part[1] >= strength else f"({part[0]})"



# ---------------------------------------------------------------- predicates


class Expr:
    """A boolean predicate. Combine with ``&``, ``|`` and ``~``."""

    __slots__ = ()

    def __and__(self, other: Expr) -> Expr:
        return and_(self, _expect_expr(other, "&"))

    def __rand__(self, other: Expr) -> Expr:
        return and_(_expect_expr(other, "&"), self)

    def __or__(self, other: Expr) -> Expr:
        return or_(self, _expect_expr(other, "|"))

    def __ror__(self, other: Expr) -> Expr:
        return or_(_expect_expr(other, "|"), self)

    def __invert__(self) -> Expr:
        return not_(self)

    def __bool__(self) -> bool:
        # `a and b` / `if expr:` would silently drop a predicate.
        raise TypeError("a predicate has no truth value: combine with &, | and ~, "
                        "not and/or/not")

    def __str__(self) -> str:
        return visit(self, _SqlPrinter())[0]


def _expect_expr(other: object, op: str) -> Expr:
    if not isinstance(other, Expr):
        raise UserInputError(
            f"{op} combines predicates, got {type(other).__name__} {other!r} "
            "(put comparisons in parentheses: (col('a') == 1) & (col('b') == 2))")
    return other


@dataclass(frozen=True, slots=True, eq=False)
class _Constant(Expr):
    value: bool

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Constant) and self.value == other.value

    def __hash__(self) -> int:
        return hash(("_Constant", self.value))

    def __repr__(self) -> str:
        return "TRUE" if self.value else "FALSE"


class AlwaysTrue(_Constant):
    """Matches every row, NULLs included."""

    __slots__ = ()


class AlwaysFalse(_Constant):
    """Matches no row."""

    __slots__ = ()


TRUE: Expr = AlwaysTrue(True)
FALSE: Expr = AlwaysFalse(False)


@dataclass(frozen=True, slots=True, eq=True)
class Compare(Expr):
    """``column op literal`` with op one of = != < <= > >=."""

    op: LeafOp
    column: Column
    literal: Literal

    def __post_init__(self) -> None:
        if self.op not in COMPARISON_OPS:
            raise UserInputError(f"{self.op.value!r} is not a comparison operator")

    @property
    def leaf_op(self) -> LeafOp:
        return self.op


@dataclass(frozen=True, slots=True, eq=True)
class In(Expr):
    """``column [NOT] IN (values)``."""

    column: Column
    values: tuple[Literal, ...]
    negated: bool = False

    def __post_init__(self) -> None:
        if len(self.values) > MAX_IN_VALUES:
            raise UserInputError(f"IN list longer than {MAX_IN_VALUES:,} values",
                                 column=self.column.name)

    @property
    def leaf_op(self) -> LeafOp:
        return LeafOp.NOT_IN if self.negated else LeafOp.IN


@dataclass(frozen=True, slots=True, eq=True)
class IsNull(Expr):
    """``column IS [NOT] NULL``."""

    column: Column
    negated: bool = False

    @property
    def leaf_op(self) -> LeafOp:
        return LeafOp.IS_NOT_NULL if self.negated else LeafOp.IS_NULL


@dataclass(frozen=True, slots=True, eq=True)
class IsNan(Expr):
    """``[NOT] isnan(column)``: NULL rows match neither."""

    column: Column
    negated: bool = False

    @property
    def leaf_op(self) -> LeafOp:
        return LeafOp.IS_NOT_NAN if self.negated else LeafOp.IS_NAN


@dataclass(frozen=True, slots=True, eq=True)
class StartsWith(Expr):
    """``column [NOT] LIKE 'prefix%'``."""

    column: Column
    prefix: str | bytes
    negated: bool = False

    @property
    def leaf_op(self) -> LeafOp:
        return LeafOp.NOT_STARTS_WITH if self.negated else LeafOp.STARTS_WITH


@dataclass(frozen=True, slots=True, eq=True)
class Like(Expr):
    """``column [NOT] LIKE 'pattern' [ESCAPE 'escape']``: ``%`` any run of characters,
    ``_`` one, ``escape`` followed by ``%``, ``_`` or itself that character, every
    other character itself (without ``escape``, a backslash too, as DuckDB reads it).
    ``ignore_case``: ILIKE, the values and the pattern compared lowercased."""

    column: Column
    pattern: str
    negated: bool = False
    ignore_case: bool = False
    escape: str | None = None

    def __post_init__(self) -> None:
        like_tokens(self.pattern, self.escape)  # a malformed pattern is refused here

    @property
    def leaf_op(self) -> LeafOp:
        if self.ignore_case:
            return LeafOp.NOT_ILIKE if self.negated else LeafOp.ILIKE
        return LeafOp.NOT_LIKE if self.negated else LeafOp.LIKE

    @property
    def arrow_pattern(self) -> str:
        """The pattern as Arrow's ``match_like`` reads it (a backslash escapes)."""
        return arrow_like(like_tokens(self.pattern, self.escape))


@dataclass(frozen=True, slots=True, eq=True)
class Regexp(Expr):
    """``[NOT] regexp_matches(column, 'pattern')``: the RE2 regular expression found
    anywhere in the value (DuckDB's function, Arrow's ``match_substring_regex``)."""

    column: Column
    pattern: str
    negated: bool = False

    @property
    def leaf_op(self) -> LeafOp:
        return LeafOp.NOT_REGEXP if self.negated else LeafOp.REGEXP


@dataclass(frozen=True, slots=True, eq=True)
class Condition(Expr):
    """A predicate on value expressions: ``term`` is boolean-valued (terms compared,
    IN / LIKE / IS NULL of a term, a boolean function, a CASE); the row is selected
    where it is TRUE, not where it is FALSE or NULL."""

    term: Term

    @property
    def columns(self) -> list[str]:
        return term_columns(self.term)


def _tree_eq(a: Expr, b: object) -> bool:
    """Structural equality without recursion (a 10,000-term OR is 10,000 deep)."""
    stack: list[tuple[object, object]] = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if type(x) is not type(y):
            return False
        if isinstance(x, (And, Or)):
            assert isinstance(y, (And, Or))
            stack += [(x.right, y.right), (x.left, y.left)]
        elif isinstance(x, Not):
            assert isinstance(y, Not)
            stack.append((x.child, y.child))
        elif x != y:
            return False
    return True


def _tree_hash(e: Expr) -> int:
    return visit(e, _Hasher())


@dataclass(frozen=True, slots=True, eq=True)
class And(Expr):
    left: Expr
    right: Expr

    def __eq__(self, other: object) -> bool:
        return _tree_eq(self, other)

    def __hash__(self) -> int:
        return _tree_hash(self)


@dataclass(frozen=True, slots=True, eq=True)
class Or(Expr):
    left: Expr
    right: Expr

    def __eq__(self, other: object) -> bool:
        return _tree_eq(self, other)

    def __hash__(self) -> int:
        return _tree_hash(self)


@dataclass(frozen=True, slots=True, eq=True)
class Not(Expr):
    child: Expr

    def __eq__(self, other: object) -> bool:
        return _tree_eq(self, other)

    def __hash__(self) -> int:
        return _tree_hash(self)


LeafExpr: TypeAlias = Compare | In | IsNull | IsNan | StartsWith | Like | Regexp | Condition


def leaf_node(op: LeafOp, column: Column, values: tuple[Literal, ...] = ()) -> LeafExpr:
    """The leaf predicate for ``op``; the inverse of each leaf's ``leaf_op``."""
    match op:
        case LeafOp.EQ | LeafOp.NE | LeafOp.LT | LeafOp.LE | LeafOp.GT | LeafOp.GE:
            return Compare(op, column, values[0])
        case LeafOp.IN | LeafOp.NOT_IN:
            return In(column, values, negated=op == LeafOp.NOT_IN)
        case LeafOp.IS_NULL | LeafOp.IS_NOT_NULL:
            return IsNull(column, negated=op == LeafOp.IS_NOT_NULL)
        case LeafOp.IS_NAN | LeafOp.IS_NOT_NAN:
            return IsNan(column, negated=op == LeafOp.IS_NOT_NAN)
        case LeafOp.STARTS_WITH | LeafOp.NOT_STARTS_WITH:
            prefix = values[0].value
            assert isinstance(prefix, (str, bytes))
            return StartsWith(column, prefix, negated=op == LeafOp.NOT_STARTS_WITH)
        case LeafOp.LIKE | LeafOp.NOT_LIKE | LeafOp.ILIKE | LeafOp.NOT_ILIKE:
            pattern = values[0].value
            escape = values[1].value if len(values) > 1 else None
            assert isinstance(pattern, str) and (escape is None or isinstance(escape, str))
            return Like(column, pattern, negated=op in (LeafOp.NOT_LIKE, LeafOp.NOT_ILIKE),
                        ignore_case=op in (LeafOp.ILIKE, LeafOp.NOT_ILIKE), escape=escape)
        case LeafOp.REGEXP | LeafOp.NOT_REGEXP:
            pattern = values[0].value
            assert isinstance(pattern, str)
            return Regexp(column, pattern, negated=op == LeafOp.NOT_REGEXP)
        case _:
            assert_never(op)


# RE2 syntax characters: a literal run of an anchored pattern stops at the first.
_REGEX_SPECIAL = frozenset("\\.[]{}()*+?|^$")
_REGEX_QUANTIFIERS = frozenset("*+?{")


def regexp_prefix(pattern: str) -> str:
    """The literal text every match of ``pattern`` (RE2, searched anywhere) starts
    the value with: the characters after a leading ``^`` up to the first syntax
    character (a punctuation character escaped by a backslash counts as itself),
    without the last one when a quantifier follows it. Empty when the pattern is not
    anchored at its start, or has a ``|`` outside any group (``^ab|cd`` also matches
    "xcd")."""
    if not pattern.startswith("^"):
        return ""
    depth, i, in_class = 0, 0, False
    while i < len(pattern):  # a top-level alternative is not anchored
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "^":
                i += 1
            if pattern[i + 1:i + 2] == "]":  # "[]" and "[^]" open with a literal "]"
                i += 1
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth <= 0:
            return ""
        i += 1
    out: list[str] = []
    i = 1
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            nxt = pattern[i + 1:i + 2]
            if not nxt or nxt.isalnum() or nxt.isspace() or not nxt.isascii():
                break  # a class (\d), an assertion (\b), a code (\x41): not literal
            out.append(nxt)
            i += 2
        elif ch in _REGEX_SPECIAL:
            break
        else:
            out.append(ch)
            i += 1
        if pattern[i:i + 1] in _REGEX_QUANTIFIERS and pattern[i:i + 1]:
            out.pop()  # "^ab*": the b may be absent
            break
    return "".join(out)


# A LIKE pattern read: each item a literal character, or "%" / "_" as the wildcard.
LikeToken = tuple[str, bool]  # (character, is a wildcard)


def like_tokens(pattern: str, escape: str | None) -> list[LikeToken]:
    """``pattern``'s characters and wildcards. ``escape`` (one character, not ``%`` or
    ``_``) makes the ``%``, ``_`` or escape after it a literal; before anything else,
    or at the end, it is refused (DuckDB would read it as the next character, Spark
    refuses it: the two must agree)."""
    if not isinstance(pattern, str):
        raise UserInputError(f"LIKE needs a string pattern, not {pattern!r}")
    if escape is not None and (not isinstance(escape, str) or len(escape) != 1
                               or escape in "%_"):
        raise UserInputError(
            f"LIKE ... ESCAPE needs one character other than % and _, not {escape!r}")
    out: list[LikeToken] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape:
            nxt = pattern[i + 1] if i + 1 < len(pattern) else None
            if nxt is None or nxt not in ("%", "_", escape):
                raise UserInputError(
                    f"LIKE pattern {literal_sql(pattern)}: the escape character "
                    f"{literal_sql(escape)} must be followed by %, _ or itself")
            out.append((nxt, False))
            i += 2
            continue
        out.append((ch, ch in "%_"))
        i += 1
    return out


def arrow_like(tokens: Sequence[LikeToken]) -> str:
    """A read pattern in Arrow's ``match_like`` form, where a backslash escapes."""
    return "".join(c if wild else ("\\" + c if c in "%_\\" else c) for c, wild in tokens)


def like(column: Column, pattern: str, negated: bool = False, *,
         ignore_case: bool = False, escape: str | None = None) -> Expr:
    """``column [NOT] LIKE pattern [ESCAPE escape]`` as the leaves that prune it best:
    no wildcard is ``=``, ``'prefix%'`` a :class:`StartsWith` (min/max, page index,
    dictionaries), any other pattern a :class:`Like` (dictionaries and distinct
    sets), ANDed with its literal prefix when it has one. Without ``escape`` a
    backslash is refused: DuckDB reads it as a character, Spark as an escape.
    ``ignore_case`` (ILIKE): one :class:`Like` leaf, whatever the pattern (bounds and
    prefixes are case-sensitive)."""
    word = "ILIKE" if ignore_case else "LIKE"
    if not isinstance(pattern, str):
        raise UserInputError(f"{word} needs a string pattern, not {pattern!r}")
    if escape is None and "\\" in pattern:
        raise UserInputError(
            f"{word} patterns with a backslash are not supported ({literal_sql(pattern)}) "
            "without ESCAPE: DuckDB reads it as a character, Spark as an escape")
    tokens = like_tokens(pattern, escape)
    if ignore_case:
        return Like(column, pattern, negated=negated, ignore_case=True, escape=escape)
    cut = next((i for i, (_, wild) in enumerate(tokens) if wild), len(tokens))
    prefix = "".join(c for c, _ in tokens[:cut])
    if cut == len(tokens):
        return Compare(LeafOp.NE if negated else LeafOp.EQ, column, Literal(prefix))
    if cut == len(tokens) - 1 and tokens[cut] == ("%", True):
        return StartsWith(column, prefix, negated=negated)
    node = Like(column, pattern, negated=negated, escape=escape)
    if negated or not prefix:
        return node
    return And(StartsWith(column, prefix), node)


def and_(*exprs: Expr) -> Expr:
    """Left-nested AND, folding TRUE and FALSE."""
    result: Expr = TRUE
    for e in exprs:
        if isinstance(result, AlwaysFalse) or isinstance(e, AlwaysTrue):
            continue
        if isinstance(e, AlwaysFalse) or isinstance(result, AlwaysTrue):
            result = e
        else:
            result = And(result, e)
    return result


def or_(*exprs: Expr) -> Expr:
    """Left-nested OR, folding TRUE and FALSE."""
    result: Expr = FALSE
    for e in exprs:
        if isinstance(result, AlwaysTrue) or isinstance(e, AlwaysFalse):
            continue
        if isinstance(e, AlwaysTrue) or isinstance(result, AlwaysFalse):
            result = e
        else:
            result = Or(result, e)
    return result


def not_(expr: Expr) -> Expr:
    """NOT, folded where SQL's three-valued logic allows it exactly.

    NOT NOT x is x; NOT of IN / IS NULL / isnan / LIKE flips ``negated``; NOT of
    ``=`` is ``!=`` (also for NaN and NULL). NOT of ``<`` stays a Not: on floats it
    is not ``>=`` (NaN), so ``normalize`` decides once the column type is known.
    """
    if isinstance(expr, _Constant):
        return FALSE if expr.value else TRUE
    if isinstance(expr, Not):
        return expr.child
    if isinstance(expr, Condition):
        inner = expr.term
        if isinstance(inner, Func) and inner.name == "not":
            return Condition(inner.args[0])
        return Condition(Func("not", (inner,)))
    if isinstance(expr, (In, IsNull, IsNan, StartsWith, Like, Regexp)):
        return leaf_node(_FLIP_NEGATED[expr.leaf_op], expr.column,
                         leaf_values(expr))
    if isinstance(expr, Compare) and expr.op in (LeafOp.EQ, LeafOp.NE):
        return Compare(LeafOp.NE if expr.op == LeafOp.EQ else LeafOp.EQ, expr.column,
                       expr.literal)
    return Not(expr)


_FLIP_NEGATED = {
    LeafOp.IN: LeafOp.NOT_IN, LeafOp.NOT_IN: LeafOp.IN,
    LeafOp.IS_NULL: LeafOp.IS_NOT_NULL, LeafOp.IS_NOT_NULL: LeafOp.IS_NULL,
    LeafOp.IS_NAN: LeafOp.IS_NOT_NAN, LeafOp.IS_NOT_NAN: LeafOp.IS_NAN,
    LeafOp.STARTS_WITH: LeafOp.NOT_STARTS_WITH, LeafOp.NOT_STARTS_WITH: LeafOp.STARTS_WITH,
    LeafOp.LIKE: LeafOp.NOT_LIKE, LeafOp.NOT_LIKE: LeafOp.LIKE,
    LeafOp.ILIKE: LeafOp.NOT_ILIKE, LeafOp.NOT_ILIKE: LeafOp.ILIKE,
    LeafOp.REGEXP: LeafOp.NOT_REGEXP, LeafOp.NOT_REGEXP: LeafOp.REGEXP,
}


def leaf_values(node: LeafExpr) -> tuple[Literal, ...]:
    """The literals of a leaf, in the order ``leaf_node`` takes them."""
    if isinstance(node, Compare):
        return (node.literal,)
    if isinstance(node, In):
        return node.values
    if isinstance(node, StartsWith):
        return (Literal(node.prefix),)
    if isinstance(node, Like) and node.escape is not None:
        return (Literal(node.pattern), Literal(node.escape))
    if isinstance(node, (Like, Regexp)):
        return (Literal(node.pattern),)
    return ()


# ---------------------------------------------------------------- visitor


class ExprVisitor(ABC, Generic[T]):
    """Per-node logic for ``visit``; children arrive already visited (post-order)."""

    @abstractmethod
    def visit_true(self) -> T: ...

    @abstractmethod
    def visit_false(self) -> T: ...

    @abstractmethod
    def visit_not(self, child: T) -> T: ...

    @abstractmethod
    def visit_and(self, left: T, right: T) -> T: ...

    @abstractmethod
    def visit_or(self, left: T, right: T) -> T: ...

    @abstractmethod
    def visit_leaf(self, node: LeafExpr) -> T:
        """Compare, In, IsNull, IsNan, StartsWith, Like or Regexp."""


def visit(expr: Expr, visitor: ExprVisitor[T]) -> T:
    """Post-order walk; iterative, so a long OR chain cannot exhaust the stack."""
    results: list[T] = []
    # (node, children done?) pairs.
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        if isinstance(node, (And, Or)):
            if not expanded:
                stack += [(node, True), (node.right, False), (node.left, False)]
                continue
            right = results.pop()
            left = results.pop()
            both = (visitor.visit_and(left, right) if isinstance(node, And)
                    else visitor.visit_or(left, right))
            results.append(both)
        elif isinstance(node, Not):
            if not expanded:
                stack += [(node, True), (node.child, False)]
                continue
            results.append(visitor.visit_not(results.pop()))
        elif isinstance(node, AlwaysTrue):
            results.append(visitor.visit_true())
        elif isinstance(node, AlwaysFalse):
            results.append(visitor.visit_false())
        elif isinstance(node, (Compare, In, IsNull, IsNan, StartsWith, Like, Regexp,
                               Condition)):
            results.append(visitor.visit_leaf(node))
        else:
            raise UserInputError(f"not a predicate: {node!r}")
    return results.pop()


class _Leaves(ExprVisitor[None]):
    def __init__(self) -> None:
        self.found: list[LeafExpr] = []

    def visit_true(self) -> None:
        return None

    def visit_false(self) -> None:
        return None

    def visit_not(self, child: None) -> None:
        return None

    def visit_and(self, left: None, right: None) -> None:
        return None

    def visit_or(self, left: None, right: None) -> None:
        return None

    def visit_leaf(self, node: LeafExpr) -> None:
        self.found.append(node)


class _AsTerm(ExprVisitor[Term]):
    def visit_true(self) -> Term:
        return Literal(True)

    def visit_false(self) -> Term:
        return Literal(False)

    def visit_not(self, child: Term) -> Term:
        return Func("not", (child,))

    def visit_and(self, left: Term, right: Term) -> Term:
        return Func("and", (left, right))

    def visit_or(self, left: Term, right: Term) -> Term:
        return Func("or", (left, right))

    def visit_leaf(self, node: LeafExpr) -> Term:
        if isinstance(node, Condition):
            return node.term
        column: Term = node.column
        out: Term
        if isinstance(node, Compare):
            return Func(node.op.value, (column, node.literal))
        if isinstance(node, In):
            out = Func("in", (column, *node.values))
        elif isinstance(node, IsNull):
            out = Func("is_null", (column,))
        elif isinstance(node, IsNan):
            out = Func("isnan", (column,))
        elif isinstance(node, StartsWith):
            out = Func("starts_with", (column, Literal(node.prefix)))
        elif isinstance(node, Regexp):
            out = Func("regexp_matches", (column, Literal(node.pattern)))
        else:
            extra = () if node.escape is None else (Literal(node.escape),)
            out = Func("ilike" if node.ignore_case else "like",
                       (column, Literal(node.pattern), *extra))
        return Func("not", (out,)) if node.negated else out


def leaf_exprs(expr: Expr) -> list[LeafExpr]:
    """The leaves of ``expr``, in order of appearance (NOT nodes looked through)."""
    leaves = _Leaves()
    visit(expr, leaves)
    return leaves.found


# ---------------------------------------------------------------- printing

# Binding strength, for parentheses: OR < AND < NOT < leaf.
_OR, _AND, _NOT, _LEAF = 1, 2, 3, 4


def leaf_sql(column: str, op: LeafOp, values: Iterable[str]) -> str:
    """SQL text of one leaf, from already-printed column and values (a LIKE's second
    one is its escape character)."""
    vals = list(values)
    escape = f" ESCAPE {vals[1]}" if len(vals) > 1 else ""
    match op:
        case LeafOp.EQ | LeafOp.NE | LeafOp.LT | LeafOp.LE | LeafOp.GT | LeafOp.GE:
            return f"{column} {op.value} {vals[0]}"
        case LeafOp.IN:
            return f"{column} IN ({', '.join(vals)})"
        case LeafOp.NOT_IN:
            return f"{column} NOT IN ({', '.join(vals)})"
        case LeafOp.IS_NULL:
            return f"{column} IS NULL"
        case LeafOp.IS_NOT_NULL:
            return f"{column} IS NOT NULL"
        case LeafOp.IS_NAN:
            return f"isnan({column})"
        case LeafOp.IS_NOT_NAN:
            return f"NOT isnan({column})"
        case LeafOp.STARTS_WITH:
            return f"{column} LIKE {vals[0]}"
        case LeafOp.NOT_STARTS_WITH:
            return f"{column} NOT LIKE {vals[0]}"
        case LeafOp.LIKE:
            return f"{column} LIKE {vals[0]}" + escape
        case LeafOp.NOT_LIKE:
            return f"{column} NOT LIKE {vals[0]}" + escape
        case LeafOp.ILIKE:
            return f"{column} ILIKE {vals[0]}" + escape
        case LeafOp.NOT_ILIKE:
            return f"{column} NOT ILIKE {vals[0]}" + escape
        case LeafOp.REGEXP:
            return f"regexp_matches({column}, {vals[0]})"
        case LeafOp.NOT_REGEXP:
            return f"NOT regexp_matches({column}, {vals[0]})"
        case _:
            assert_never(op)


def starts_with_sql(column: str, prefix: str | bytes, negated: bool) -> str:
    """LIKE 'prefix%' when the prefix has no wildcard of its own, else starts_with()."""
    if isinstance(prefix, str) and "%" not in prefix and "_" not in prefix:
        word = "NOT LIKE" if negated else "LIKE"
        return f"{column} {word} {_quote(prefix + '%', chr(39))}"
    call = f"starts_with({column}, {literal_sql(prefix)})"
    return f"NOT {call}" if negated else call


class _Hasher(ExprVisitor[int]):
    def visit_true(self) -> int:
        return hash(True)

    def visit_false(self) -> int:
        return hash(False)

    def visit_not(self, child: int) -> int:
        return hash(("not", child))

    def visit_and(self, left: int, right: int) -> int:
        return hash(("and", left, right))

    def visit_or(self, left: int, right: int) -> int:
        return hash(("or", left, right))

    def visit_leaf(self, node: LeafExpr) -> int:
        return hash(node)


class _SqlPrinter(ExprVisitor[tuple[str, int]]):
    def visit_true(self) -> tuple[str, int]:
        return "TRUE", _LEAF

    def visit_false(self) -> tuple[str, int]:
        return "FALSE", _LEAF

    def visit_not(self, child: tuple[str, int]) -> tuple[str, int]:
        return f"NOT ({child[0]})", _NOT

    def _join(self, word: str, strength: int, *parts: tuple[str, int]) -> tuple[str, int]:
        texts = [t if s >= strength else f"({t})" for t, s in parts]
        return f" {word} ".join(texts), strength

    def visit_and(self, left: tuple[str, int], right: tuple[str, int]) -> tuple[str, int]:
        return self._join("AND", _AND, left, right)

    def visit_or(self, left: tuple[str, int], right: tuple[str, int]) -> tuple[str, int]:
        return self._join("OR", _OR, left, right)

    def visit_leaf(self, node: LeafExpr) -> tuple[str, int]:
        if isinstance(node, Condition):
            text, strength = _term_sql(node.term)
            return text, min(strength, _LEAF) if strength >= _CMP_STRENGTH else strength
        name = str(node.column)
        if isinstance(node, StartsWith):
            text = starts_with_sql(name, node.prefix, node.negated)
            return text, _NOT if text.startswith("NOT ") else _LEAF
        op = node.leaf_op
        text = leaf_sql(name, op, (str(v) for v in leaf_values(node)))
        return text, _NOT if op in (LeafOp.IS_NOT_NAN, LeafOp.NOT_REGEXP) else _LEAF

