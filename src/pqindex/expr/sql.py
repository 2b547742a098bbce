"""SQL WHERE text to an expression tree: a tokenizer and a recursive-descent parser.

The grammar is the predicate subset pqindex can prune with (see
``docs/semantics.md``)::

    expr      := and (OR and)*
    and       := not (AND not)*
    not       := NOT not | predicate
    predicate := '(' expr ')' | TRUE | FALSE | function
               | operand [cmp operand | [NOT] BETWEEN operand AND operand
                          | [NOT] IN '(' literal, ... ')' | IS [NOT] NULL
                          | [NOT] [I]LIKE 'pattern' [ESCAPE 'c']]
    operand   := column | literal
    function  := starts_with(column, 'prefix') | isnan(column)
               | regexp_matches(column, 'pattern')

Errors say what was unexpected and where (``position`` counts characters from 0).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from pqindex.errors import UserInputError
from pqindex.expr.nodes import (
    FALSE,
    FUNCTION_ALIASES,
    FUNCTION_ARITY,
    MAX_LITERAL_DIGITS,
    TRUE,
    Cast,
    Column,
    Expr,
    Interval,
    IsNull,
    Literal,
    LiteralValue,
    Term,
    and_,
    case,
    cast_type,
    compare_terms,
    func,
    in_terms,
    like_term,
    not_,
    or_,
    predicate_term,
    term_sql,
)
from pqindex.format.match import LeafOp

__all__ = ["parse_value", "parse_where"]

_MAX_DEPTH = 200  # nesting of parentheses / NOT; deeper input is refused, not recursed into

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<qident>"(?:[^"]|"")*"|`(?:[^`]|``)*`)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<op>::|<>|!=|<=|>=|==|=|<|>|\|\||[-+*/%(),.;])
""", re.VERBOSE)

_COMPARISONS = {"=": LeafOp.EQ, "==": LeafOp.EQ, "!=": LeafOp.NE, "<>": LeafOp.NE,
                "<": LeafOp.LT, "<=": LeafOp.LE, ">": LeafOp.GT, ">=": LeafOp.GE}
# Binary operators of value expressions and their binding strength.
_BINARY = {"||": 1, "+": 2, "-": 2, "*": 3, "/": 3}
# Words that can never start or continue an operand unquoted.
_RESERVED = {"AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "LIKE", "ILIKE", "TRUE",
             "FALSE", "WHEN", "THEN", "ELSE", "END"}
_UNSUPPORTED_WORDS = {
    "GLOB": "GLOB", "SIMILAR": "SIMILAR TO", "REGEXP": "REGEXP",
    "RLIKE": "RLIKE", "ESCAPE": "ESCAPE outside LIKE", "EXISTS": "subqueries",
    "SELECT": "subqueries", "DISTINCT": "IS [NOT] DISTINCT FROM", "OVER": "window functions",
    "COLLATE": "COLLATE", "ANY": "ANY / ALL", "ALL": "ANY / ALL", "SOME": "ANY / ALL",
}
_AGGREGATES = {"count", "sum", "avg", "min", "max", "mean", "stddev", "variance",
               "any_value", "first", "last", "median"}
# Operators are named as functions inside the tree; they are not callable by name.
_OPERATOR_NAMES = {"negate", "is_null", "in", "not", "and", "or", "like", "ilike"}
_EXTRACT_PARTS = {"year": "year", "quarter": "quarter", "month": "month", "day": "day",
                  "hour": "hour", "minute": "minute", "second": "second",
                  "dow": "dayofweek", "dayofweek": "dayofweek", "doy": "dayofyear",
                  "dayofyear": "dayofyear", "years": "year", "months": "month",
                  "days": "day"}
# INTERVAL units (singular): the field they add to and how many of its units one is.
_INTERVAL_UNITS: dict[str, tuple[str, int]] = {
    "YEAR": ("months", 12), "QUARTER": ("months", 3), "MONTH": ("months", 1),
    "WEEK": ("days", 7), "DAY": ("days", 1), "HOUR": ("micros", 3_600_000_000),
    "MINUTE": ("micros", 60_000_000), "SECOND": ("micros", 1_000_000),
    "MILLISECOND": ("micros", 1_000), "MICROSECOND": ("micros", 1),
}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # number, string, ident, qident, op, end
    text: str
    pos: int

    @property
    def word(self) -> str | None:
        """The upper-cased keyword for an unquoted identifier."""
        return self.text.upper() if self.kind == "ident" else None


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            snippet = text[pos:pos + 20]
            if text[pos] in "'\"`":
                raise UserInputError(
                    f"unterminated quote at position {pos}: {snippet!r}")
            raise UserInputError(f"unexpected character {text[pos]!r} at position {pos}")
        kind = m.lastgroup
        assert kind is not None
        if kind != "ws":
            tokens.append(_Token(kind, m.group(), pos))
        pos = m.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0
        self.in_case = 0  # CASE expressions open around the current token

    # ------------------------------------------------------------ tokens

    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def peek(self, ahead: int = 1) -> _Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def advance(self) -> _Token:
        tok = self.tok
        if tok.kind != "end":
            self.i += 1
        return tok

    def error(self, message: str, tok: _Token | None = None) -> UserInputError:
        tok = tok or self.tok
        if tok.kind == "end":
            return UserInputError(f"{message} at the end of {self.text!r}")
        near = self.text[tok.pos:tok.pos + 30]
        return UserInputError(f"{message} at position {tok.pos} (near {near!r})")

    def at_word(self, *words: str) -> bool:
        return self.tok.word in words

    def at_op(self, *ops: str) -> bool:
        return self.tok.kind == "op" and self.tok.text in ops

    def expect_word(self, word: str) -> None:
        if not self.at_word(word):
            raise self.error(f"expected {word}, found {self._describe(self.tok)}")
        self.advance()

    def expect_op(self, op: str) -> None:
        if not self.at_op(op):
            raise self.error(f"expected {op!r}, found {self._describe(self.tok)}")
        self.advance()

    @staticmethod
    def _describe(tok: _Token) -> str:
        return "the end of the text" if tok.kind == "end" else repr(tok.text)

    # ------------------------------------------------------------ grammar

    def parse(self) -> Expr:
        expr = self.parse_or()
        if self.at_op(";") and self.peek().kind == "end":
            self.advance()
        if self.tok.kind != "end":
            self._reject_unsupported(self.tok)
            raise self.error(f"unexpected {self._describe(self.tok)}")
        return expr

    def parse_or(self) -> Expr:
        parts = [self.parse_and()]
        while self.at_word("OR"):
            self.advance()
            parts.append(self.parse_and())
        return or_(*parts)

    def parse_and(self) -> Expr:
        parts = [self.parse_not()]
        while self.at_word("AND"):
            self.advance()
            parts.append(self.parse_not())
        return and_(*parts)

    def _nest(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise self.error(f"predicate nested deeper than {_MAX_DEPTH} levels")

    def parse_not(self) -> Expr:
        if self.at_word("NOT"):
            self.advance()
            self._nest()
            inner = self.parse_not()
            self.depth -= 1
            return not_(inner)
        return self.parse_predicate()

    def parse_predicate(self) -> Expr:
        tok = self.tok
        if self.at_op("("):
            # A parenthesized value, as in (a + b) * 2 > c, or a parenthesized condition.
            at, depth, in_case = self.i, self.depth, self.in_case
            value: Term | None
            try:
                value = self.parse_term()
            except UserInputError:
                value = None
            if value is not None and self._continues_predicate(self.tok):
                return self.parse_rest(value, tok)
            self.i, self.depth, self.in_case = at, depth, in_case
            self.advance()
            self._nest()
            inner = self.parse_or()
            self.depth -= 1
            self.expect_op(")")
            if self.tok.kind == "op" and self.tok.text in _COMPARISONS:
                raise self.error("a parenthesized condition cannot be compared")
            return inner
        if tok.word in ("TRUE", "FALSE") and not self._continues_predicate(self.peek()):
            self.advance()
            return TRUE if tok.word == "TRUE" else FALSE
        left = self.parse_term()
        return self.parse_rest(left, tok)

    @staticmethod
    def _continues_predicate(tok: _Token) -> bool:
        return ((tok.kind == "op" and tok.text in _COMPARISONS)
                or tok.word in ("IS", "IN", "BETWEEN", "LIKE", "ILIKE", "NOT"))

    def _built(self, make: Callable[[], Expr], tok: _Token) -> Expr:
        """``make()``, its UserInputError placed at ``tok``."""
        try:
            return make()
        except UserInputError as e:
            raise self.error(e.reason, tok) from None

    def parse_rest(self, left: Term, start: _Token) -> Expr:
        tok = self.tok
        if tok.kind == "op" and tok.text in _COMPARISONS:
            self.advance()
            right_tok = self.tok
            right = self.parse_term()
            return self._compare(_COMPARISONS[tok.text], left, right, start, right_tok)
        if tok.word == "IS":
            self.advance()
            negated = self.at_word("NOT")
            if negated:
                self.advance()
            if not self.at_word("NULL"):
                found = self.tok
                if found.word in ("TRUE", "FALSE", "DISTINCT", "UNKNOWN"):
                    what = "IS [NOT] DISTINCT FROM" if found.word == "DISTINCT" else \
                        f"IS [NOT] {found.word}"
                    raise self.error(f"{what} is not supported; use = or IS NULL", found)
                raise self.error(f"expected NULL after IS, found {self._describe(found)}")
            self.advance()
            value = self._need_value(left, "IS NULL", start)
            if isinstance(value, Column):
                return IsNull(value, negated=negated)
            null_test = self._built(lambda: value.is_null(), start)
            return not_(null_test) if negated else null_test
        negated = False
        if tok.word == "NOT" and self.peek().word in ("BETWEEN", "IN", "LIKE", "ILIKE"):
            self.advance()
            negated = True
        if self.at_word("BETWEEN"):
            self.advance()
            value = self._need_value(left, "BETWEEN", start)
            low_tok = self.tok
            low = self.parse_term()
            self.expect_word("AND")
            high = self.parse_term()
            between = self._built(lambda: and_(compare_terms(LeafOp.GE, value, low),
                                               compare_terms(LeafOp.LE, value, high)), low_tok)
            return not_(between) if negated else between
        if self.at_word("IN"):
            self.advance()
            value = self._need_value(left, "IN", start)
            if not self.at_op("("):
                raise self.error(f"expected '(' after IN, found {self._describe(self.tok)}")
            self.advance()
            values: list[Literal] = []
            while True:
                if self.at_word("SELECT"):
                    raise self.error("subqueries are not supported")
                values.append(self._need_literal(self.parse_term(), "IN lists"))
                if self.at_op(","):
                    self.advance()
                    continue
                self.expect_op(")")
                break
            return self._built(lambda: in_terms(value, tuple(values), negated), start)
        if self.at_word("LIKE", "ILIKE"):
            word = "ILIKE" if self.advance().word == "ILIKE" else "LIKE"
            value = self._need_value(left, word, start)
            pattern_tok = self.tok
            pattern = self._need_literal(self.parse_term(), f"{word} patterns")
            if not isinstance(pattern.value, str):
                raise self.error(f"{word} needs a string pattern", pattern_tok)
            escape: str | None = None
            if self.at_word("ESCAPE"):
                self.advance()
                escape_tok = self.tok
                given = self._need_literal(self.parse_term(), "ESCAPE characters")
                if not isinstance(given.value, str) or len(given.value) != 1:
                    raise self.error("ESCAPE needs a string of one character", escape_tok)
                escape = given.value
            text = pattern.value
            return self._built(lambda: like_term(value, text, negated,
                                                 ignore_case=word == "ILIKE", escape=escape),
                               pattern_tok)
        if isinstance(left, Literal):
            self._reject_unsupported(tok)
            raise self.error(f"expected a condition, found the literal {start.text!r}", start)
        # A bare column is a boolean condition, as in `WHERE flag`; so is a boolean function.
        return self._built(lambda: predicate_term(left), start)

    def _compare(self, op: LeafOp, left: Term, right: Term, start: _Token,
                 right_tok: _Token) -> Expr:
        if isinstance(left, Literal) and isinstance(right, Literal) and not self.in_case:
            # A constant condition is a mistake at the top; CASE WHEN 0 > 1 is not.
            raise self.error(
                "a comparison needs a column on one side; both sides are literals", start)
        return self._built(lambda: compare_terms(op, left, right), start)

    def _need_value(self, value: Term, what: str, tok: _Token) -> Term:
        if isinstance(value, Literal):
            raise self.error(f"{what} needs a column, found the literal {tok.text!r}", tok)
        return value

    def _need_literal(self, value: Term, what: str) -> Literal:
        if not isinstance(value, Literal):
            found = f"the column {value}" if isinstance(value, Column) else term_sql(value)
            raise self.error(f"{what} must be literals, found {found}",
                             self.tokens[self.i - 1])
        return value

    def _reject_unsupported(self, tok: _Token) -> None:
        if tok.kind == "op" and tok.text == "%":
            raise self.error("the modulo operator '%' is not supported", tok)
        if tok.word in _UNSUPPORTED_WORDS:
            raise self.error(f"{_UNSUPPORTED_WORDS[tok.word]} is not supported", tok)

    # ------------------------------------------------------------ value expressions

    def parse_term(self, min_strength: int = 0) -> Term:
        """A value expression: operators by precedence (``||`` < ``+ -`` < ``* /``),
        left to right."""
        left = self._unary()
        while self.tok.kind == "op" and _BINARY.get(self.tok.text, -1) >= min_strength:
            op_tok = self.advance()
            right = self.parse_term(_BINARY[op_tok.text] + 1)
            left = self._binary(op_tok, left, right)
        if self.at_op("%"):
            self._reject_unsupported(self.tok)
        return left

    def _binary(self, op_tok: _Token, left: Term, right: Term) -> Term:
        try:
            return func(op_tok.text, left, right)
        except UserInputError as e:
            raise self.error(e.reason, op_tok) from None

    def _term(self, make: Callable[[], Term], tok: _Token) -> Term:
        try:
            return make()
        except UserInputError as e:
            raise self.error(e.reason, tok) from None

    def _unary(self) -> Term:
        tok = self.tok
        if tok.kind == "op" and tok.text in ("-", "+"):
            self.advance()
            if self.tok.kind == "number":
                number = self._number(self.advance())
                value: Term = Literal(-number if tok.text == "-" else number)
            else:
                self._nest()
                inner = self._unary()
                self.depth -= 1
                value = inner if tok.text == "+" else self._term(
                    lambda: func("negate", inner), tok)
        else:
            value = self._primary()
        while self.at_op("::"):
            self.advance()
            type_tok = self.tok
            type_name = self._type_name()
            value = self._cast_to(value, type_name, type_tok)
        return value

    def _primary(self) -> Term:
        tok = self.tok
        if tok.kind == "number":
            return Literal(self._number(self.advance()))
        if tok.kind == "string":
            return Literal(self._string(self.advance()))
        word = tok.word
        if word in ("TRUE", "FALSE"):
            self.advance()
            return Literal(word == "TRUE")
        if word == "NULL":
            self.advance()
            return Literal(None)
        if word in ("DATE", "TIMESTAMP", "TIME", "TIMESTAMPTZ") \
                and self.peek().kind == "string":
            self.advance()
            return Literal(self._typed(word, self.advance()))
        if word == "X" and self.peek().kind == "string" and self.peek().pos == tok.pos + 1:
            self.advance()
            hex_tok = self.advance()
            try:
                return Literal(bytes.fromhex(self._string(hex_tok)))
            except ValueError:
                raise self.error("invalid hex in X'...' literal", hex_tok) from None
        if word == "INTERVAL":
            return self._interval()
        if word == "CASE":
            return self._case()
        if word in ("CAST", "EXTRACT") and self.peek().text == "(":
            return self._cast() if word == "CAST" else self._extract()
        if tok.kind == "ident" and self.peek().kind == "op" and self.peek().text == "(":
            return self._call()
        if tok.kind == "qident" or (tok.kind == "ident" and word not in _RESERVED):
            return self._column()
        if self.at_op("("):
            self.advance()
            self._nest()
            inner = self.parse_term()
            self.depth -= 1
            self.expect_op(")")
            return inner
        self._reject_unsupported(tok)
        raise self.error(f"expected a column or a literal, found {self._describe(tok)}")

    def _call(self) -> Term:
        name_tok = self.advance()
        name = name_tok.text.lower()
        self.expect_op("(")
        if name in _AGGREGATES:
            raise self.error(f"aggregate function {name}() is not allowed in a WHERE clause",
                             name_tok)
        if FUNCTION_ALIASES.get(name, name) not in FUNCTION_ARITY or name in _OPERATOR_NAMES:
            raise self.error(f"function {name_tok.text}() is not supported", name_tok)
        args: list[Term] = []
        self._nest()
        if not self.at_op(")"):
            while True:
                args.append(self.parse_term())
                if not self.at_op(","):
                    break
                self.advance()
        self.depth -= 1
        if name == "regexp_matches" and len(args) > 2:
            raise self.error("regexp_matches() options are not supported", self.tok)
        self.expect_op(")")
        if self.at_word("OVER"):
            raise self.error("window functions (OVER) are not supported")
        return self._term(lambda: func(name, *args), name_tok)

    def _type_name(self) -> str:
        """The words of a type name (``DECIMAL(10, 2)``, ``DOUBLE PRECISION``)."""
        parts: list[str] = []
        while self.tok.kind == "ident":
            parts.append(self.advance().text)
            if self.at_op("("):
                while not self.at_op(")"):
                    if self.tok.kind == "end":
                        raise self.error("expected ')' closing the type")
                    parts.append(self.advance().text)
                parts.append(self.advance().text)
                break
        if not parts:
            raise self.error(f"expected a type name, found {self._describe(self.tok)}")
        return " ".join(parts).replace("( ", "(").replace(" )", ")").replace(" ,", ",")

    def _cast(self) -> Term:
        self.advance()
        self.expect_op("(")
        self._nest()
        value = self.parse_term()
        self.depth -= 1
        self.expect_word("AS")
        type_tok = self.tok
        type_name = self._type_name()
        self.expect_op(")")
        return self._cast_to(value, type_name, type_tok)

    def _cast_to(self, value: Term, type_name: str, tok: _Token) -> Term:
        try:
            return Cast(value, cast_type(type_name))
        except UserInputError as e:
            raise self.error(e.reason, tok) from None

    def _extract(self) -> Term:
        self.advance()
        self.expect_op("(")
        part_tok = self.advance()
        part = part_tok.text.lower()
        part = _EXTRACT_PARTS.get(part, part)
        if part_tok.kind != "ident" or part not in _EXTRACT_PARTS.values():
            raise self.error(f"EXTRACT({part_tok.text} FROM ...) is not supported", part_tok)
        self.expect_word("FROM")
        self._nest()
        value = self.parse_term()
        self.depth -= 1
        self.expect_op(")")
        return self._term(lambda: func(part, value), part_tok)

    def _interval(self) -> Term:
        """``INTERVAL 3 DAY``, ``INTERVAL '3' MONTH``, ``INTERVAL '1 year 2 days'``."""
        interval_tok = self.advance()
        amounts: list[tuple[str, str]] = []  # (number, unit)
        sign = ""
        if self.at_op("-", "+"):
            sign = self.advance().text
        if self.tok.kind == "number":
            amounts.append((sign + self.advance().text, self._interval_unit()))
        elif self.tok.kind == "string":
            text = self._string(self.advance()).strip()
            if self.tok.kind == "ident" and self.tok.text.upper().rstrip("S") in _INTERVAL_UNITS:
                amounts.append((sign + text, self._interval_unit()))
            else:
                words = text.split()
                if not words or len(words) % 2:
                    raise self.error(f"invalid INTERVAL {text!r}: expected 'number unit ...'",
                                     interval_tok)
                for number, unit in zip(words[::2], words[1::2], strict=True):
                    if unit.upper().rstrip("S") not in _INTERVAL_UNITS:
                        raise self.error(f"INTERVAL unit {unit!r} is not supported",
                                         interval_tok)
                    amounts.append((sign + number, unit.upper().rstrip("S")))
        else:
            raise self.error("expected a number after INTERVAL", self.tok)
        months = days = micros = 0
        for amount, unit in amounts:
            try:
                n = int(amount.replace("+-", "-").replace("--", ""))
            except ValueError:
                raise self.error(f"INTERVAL needs a whole number, not {amount!r}",
                                 interval_tok) from None
            field, scale = _INTERVAL_UNITS[unit]
            if field == "months":
                months += n * scale
            elif field == "days":
                days += n * scale
            else:
                micros += n * scale
        return Interval(months, days, micros)

    def _interval_unit(self) -> str:
        tok = self.tok
        unit = tok.text.upper().rstrip("S") if tok.kind == "ident" else ""
        if unit not in _INTERVAL_UNITS:
            raise self.error(f"expected an INTERVAL unit (YEAR, MONTH, DAY, HOUR, ...), "
                             f"found {self._describe(tok)}", tok)
        self.advance()
        if self.at_word("TO"):
            raise self.error("INTERVAL ... TO ... is not supported")
        return unit

    def _when_equal(self, subject: Term, value: Term, tok: _Token) -> Expr:
        """The condition of a simple CASE's WHEN: ``subject = value``."""
        if isinstance(subject, Literal) and isinstance(value, Literal):
            return TRUE if subject == value else FALSE
        return self._built(lambda: compare_terms(LeafOp.EQ, subject, value), tok)

    def _case(self) -> Term:
        case_tok = self.advance()
        self._nest()
        self.in_case += 1
        operand = None if self.at_word("WHEN") else self.parse_term()
        whens: list[tuple[Expr | Term, Term]] = []
        while self.at_word("WHEN"):
            when_tok = self.advance()
            cond: Expr | Term
            if operand is None:
                cond = self.parse_or()
            else:
                cond = self._when_equal(operand, self.parse_term(), when_tok)
            self.expect_word("THEN")
            whens.append((cond, self.parse_term()))
        if not whens:
            raise self.error("CASE needs at least one WHEN", case_tok)
        default: Term = Literal(None)
        if self.at_word("ELSE"):
            self.advance()
            default = self.parse_term()
        self.expect_word("END")
        self.depth -= 1
        self.in_case -= 1
        return self._term(lambda: case(whens, default), case_tok)

    # ------------------------------------------------------------ operands

    def _column(self) -> Column:
        parts = [self._ident(self.advance())]
        while self.at_op(".") and self.peek().kind in ("ident", "qident"):
            self.advance()
            parts.append(self._ident(self.advance()))
        if self.at_op("("):
            raise self.error(f"function calls are not supported: {'.'.join(parts)}(...)")
        return Column(".".join(parts))

    @staticmethod
    def _ident(tok: _Token) -> str:
        if tok.kind == "qident":
            q = tok.text[0]
            return tok.text[1:-1].replace(q * 2, q)
        return tok.text

    @staticmethod
    def _string(tok: _Token) -> str:
        return tok.text[1:-1].replace("''", "'")

    def _number(self, tok: _Token) -> int | float | Decimal:
        text = tok.text
        if len(text) > MAX_LITERAL_DIGITS:
            raise self.error(f"number of {len(text)} characters is too long "
                             f"(at most {MAX_LITERAL_DIGITS} digits)", tok)
        if "e" in text or "E" in text:
            return float(text)
        if "." in text:
            return Decimal(text)  # exact: 1.50 keeps its scale
        return int(text)

    def _typed(self, word: str, tok: _Token) -> LiteralValue:
        raw = self._string(tok).strip()
        try:
            if word == "DATE":
                return dt.date.fromisoformat(raw)
            if word == "TIME":
                return dt.time.fromisoformat(raw)
            return _timestamp(raw)
        except ValueError as e:
            raise self.error(f"invalid {word} literal {tok.text}: {e}", tok) from None


_FRACTION = re.compile(r"\.(\d+)")


def _timestamp(raw: str) -> dt.datetime:
    """'YYYY-MM-DD[ HH:MM:SS[.ffffff]][+HH:MM|Z]'; finer than microseconds is refused."""
    m = _FRACTION.search(raw)
    if m is not None and len(m.group(1)) > 6:
        digits = m.group(1)
        if digits[6:].strip("0"):
            raise ValueError("finer than microseconds")
        raw = raw[:m.start(1)] + digits[:6] + raw[m.end(1):]
    return dt.datetime.fromisoformat(raw)


def parse_where(text: str) -> Expr:
    """The expression tree of SQL WHERE text (without the ``WHERE`` keyword)."""
    if not isinstance(text, str):
        raise UserInputError(f"a WHERE clause must be text, not {type(text).__name__}")
    if not text.strip():
        raise UserInputError("the WHERE clause is empty")
    stripped = text.lstrip()
    if stripped[:6].upper() == "WHERE " or stripped.upper() == "WHERE":
        text = stripped[5:]
        if not text.strip():
            raise UserInputError("the WHERE clause is empty")
    return _Parser(text).parse()


def parse_value(text: str) -> Term:
    """The tree of a SQL value expression (``l_extendedprice * (1 - l_discount)``)."""
    if not isinstance(text, str) or not text.strip():
        raise UserInputError(f"an expression must be non-empty text, not {text!r}")
    parser = _Parser(text)
    value = parser.parse_term()
    if parser.tok.kind != "end":
        parser._reject_unsupported(parser.tok)
        raise parser.error(f"unexpected {parser._describe(parser.tok)}")
    return value
