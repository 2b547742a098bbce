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
from dataclasses import dataclass
from decimal import Decimal

from pqindex.errors import UserInputError
from pqindex.expr.nodes import (
    FALSE,
    FLIPPED,
    MAX_LITERAL_DIGITS,
    TRUE,
    Column,
    Compare,
    Expr,
    In,
    IsNan,
    IsNull,
    Literal,
    LiteralValue,
    Regexp,
    StartsWith,
    and_,
    like,
    not_,
    or_,
)
from pqindex.format.match import LeafOp

__all__ = ["parse_where"]

_MAX_DEPTH = 200  # nesting of parentheses / NOT; deeper input is refused, not recursed into

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<qident>"(?:[^"]|"")*"|`(?:[^`]|``)*`)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<op><>|!=|<=|>=|==|=|<|>|\|\||[-+*/%(),.;])
""", re.VERBOSE)

_COMPARISONS = {"=": LeafOp.EQ, "==": LeafOp.EQ, "!=": LeafOp.NE, "<>": LeafOp.NE,
                "<": LeafOp.LT, "<=": LeafOp.LE, ">": LeafOp.GT, ">=": LeafOp.GE}
_ARITHMETIC = {"+", "-", "*", "/", "%", "||"}
# Words that can never start or continue an operand unquoted.
_RESERVED = {"AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "LIKE", "ILIKE", "TRUE",
             "FALSE"}
_UNSUPPORTED_WORDS = {
    "GLOB": "GLOB", "SIMILAR": "SIMILAR TO", "REGEXP": "REGEXP",
    "RLIKE": "RLIKE", "ESCAPE": "ESCAPE outside LIKE", "CASE": "CASE expressions",
    "CAST": "CAST", "INTERVAL": "INTERVAL literals", "EXISTS": "subqueries",
    "SELECT": "subqueries", "DISTINCT": "IS [NOT] DISTINCT FROM",
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


_Operand = Column | Literal


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0

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
        if tok.kind == "ident" and self.peek().kind == "op" and self.peek().text == "(":
            return self.parse_function()
        left = self.parse_operand()
        return self.parse_rest(left, tok)

    @staticmethod
    def _continues_predicate(tok: _Token) -> bool:
        return ((tok.kind == "op" and tok.text in _COMPARISONS)
                or tok.word in ("IS", "IN", "BETWEEN", "LIKE", "ILIKE", "NOT"))

    def parse_rest(self, left: _Operand, start: _Token) -> Expr:
        tok = self.tok
        if tok.kind == "op" and tok.text in _COMPARISONS:
            self.advance()
            right_tok = self.tok
            right = self.parse_operand()
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
            return IsNull(self._need_column(left, "IS NULL", start), negated=negated)
        negated = False
        if tok.word == "NOT" and self.peek().word in ("BETWEEN", "IN", "LIKE", "ILIKE"):
            self.advance()
            negated = True
        if self.at_word("BETWEEN"):
            self.advance()
            column = self._need_column(left, "BETWEEN", start)
            low = self._need_literal(self.parse_operand(), "BETWEEN bounds")
            self.expect_word("AND")
            high = self._need_literal(self.parse_operand(), "BETWEEN bounds")
            between = and_(Compare(LeafOp.GE, column, low), Compare(LeafOp.LE, column, high))
            return not_(between) if negated else between
        if self.at_word("IN"):
            self.advance()
            column = self._need_column(left, "IN", start)
            if not self.at_op("("):
                raise self.error(f"expected '(' after IN, found {self._describe(self.tok)}")
            self.advance()
            values: list[Literal] = []
            while True:
                if self.at_word("SELECT"):
                    raise self.error("subqueries are not supported")
                values.append(self._need_literal(self.parse_operand(), "IN lists"))
                if self.at_op(","):
                    self.advance()
                    continue
                self.expect_op(")")
                break
            return In(column, tuple(values), negated=negated)
        if self.at_word("LIKE", "ILIKE"):
            word = "ILIKE" if self.advance().word == "ILIKE" else "LIKE"
            column = self._need_column(left, word, start)
            pattern_tok = self.tok
            pattern = self._need_literal(self.parse_operand(), f"{word} patterns")
            if not isinstance(pattern.value, str):
                raise self.error(f"{word} needs a string pattern", pattern_tok)
            escape: str | None = None
            if self.at_word("ESCAPE"):
                self.advance()
                escape_tok = self.tok
                given = self._need_literal(self.parse_operand(), "ESCAPE characters")
                if not isinstance(given.value, str) or len(given.value) != 1:
                    raise self.error("ESCAPE needs a string of one character", escape_tok)
                escape = given.value
            try:
                return like(column, pattern.value, negated, ignore_case=word == "ILIKE",
                            escape=escape)
            except UserInputError as e:
                raise self.error(e.reason, pattern_tok) from None
        if isinstance(left, Column):
            # A bare column is a boolean condition, as in `WHERE flag`.
            return Compare(LeafOp.EQ, left, Literal(True))
        self._reject_unsupported(tok)
        raise self.error(f"expected a condition, found the literal {start.text!r}", start)

    def parse_function(self) -> Expr:
        name_tok = self.advance()
        name = name_tok.text.lower()
        self.expect_op("(")
        if name not in ("starts_with", "isnan", "regexp_matches"):
            raise self.error(f"function calls are not supported: {name_tok.text}(...)",
                             name_tok)
        arg_tok = self.tok
        column = self._need_column(self.parse_operand(), f"{name}()", arg_tok)
        result: Expr
        if name == "isnan":
            result = IsNan(column)
        elif name == "regexp_matches":
            self.expect_op(",")
            pattern_tok = self.tok
            pattern = self._need_literal(self.parse_operand(), "regexp_matches() patterns")
            if not isinstance(pattern.value, str):
                raise self.error("regexp_matches() needs a string pattern", pattern_tok)
            if self.at_op(","):
                raise self.error("regexp_matches() options are not supported", self.tok)
            result = Regexp(column, pattern.value)
        else:
            self.expect_op(",")
            prefix_tok = self.tok
            prefix = self._need_literal(self.parse_operand(), "starts_with() prefixes")
            if not isinstance(prefix.value, (str, bytes)):
                raise self.error("starts_with() needs a string prefix", prefix_tok)
            result = StartsWith(column, prefix.value)
        self.expect_op(")")
        return result

    def _compare(self, op: LeafOp, left: _Operand, right: _Operand, start: _Token,
                 right_tok: _Token) -> Expr:
        if isinstance(left, Column) and isinstance(right, Column):
            raise self.error(
                f"column-to-column comparison {left} {op.value} {right} is not supported",
                start)
        if isinstance(left, Column) and isinstance(right, Literal):
            return Compare(op, left, right)
        if isinstance(left, Literal) and isinstance(right, Column):
            return Compare(FLIPPED[op], right, left)
        raise self.error("a comparison needs a column on one side; both sides are literals",
                         start)

    def _need_column(self, operand: _Operand, what: str, tok: _Token) -> Column:
        if not isinstance(operand, Column):
            raise self.error(f"{what} needs a column, found the literal {tok.text!r}", tok)
        return operand

    def _need_literal(self, operand: _Operand, what: str) -> Literal:
        if not isinstance(operand, Literal):
            raise self.error(f"{what} must be literals, found the column {operand}",
                             self.tokens[self.i - 1])
        return operand

    def _reject_unsupported(self, tok: _Token) -> None:
        if tok.kind == "op" and tok.text in _ARITHMETIC:
            raise self.error(f"arithmetic ({tok.text!r}) is not supported", tok)
        if tok.word in _UNSUPPORTED_WORDS:
            raise self.error(f"{_UNSUPPORTED_WORDS[tok.word]} is not supported", tok)

    # ------------------------------------------------------------ operands

    def parse_operand(self) -> _Operand:
        operand = self._operand()
        if self.tok.kind == "op" and self.tok.text in _ARITHMETIC:
            raise self.error(f"arithmetic ({self.tok.text!r}) is not supported")
        return operand

    def _operand(self) -> _Operand:
        tok = self.tok
        if tok.kind == "op" and tok.text in ("-", "+") and self.peek().kind == "number":
            self.advance()
            number = self._number(self.advance())
            return Literal(-number if tok.text == "-" else number)
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
        if tok.kind == "qident" or (tok.kind == "ident" and word not in _RESERVED):
            return self._column()
        if tok.kind == "op" and tok.text == "(":
            raise self.error("parenthesized operands are not supported")
        self._reject_unsupported(tok)
        raise self.error(f"expected a column or a literal, found {self._describe(tok)}")

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
