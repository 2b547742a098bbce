"""The two small vocabularies every pruning level shares.

``Match`` is a unit's answer (file, row group, page, row range): no row can
match, some may, or all do. ``LeafOp`` names the predicates a single column
can be tested with after NOT has been pushed to the leaves; each has its
negation, so pushing NOT down never leaves a NOT behind.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum

__all__ = ["NEGATION", "LeafOp", "Match"]


class Match(IntEnum):
    """A unit's answer to a predicate; unknown is SOME."""

    NONE = 0
    SOME = 1
    ALL = 2

    def __and__(self, other: object) -> Match:
        if not isinstance(other, Match):
            return NotImplemented
        return Match(min(self, other))

    def __or__(self, other: object) -> Match:
        if not isinstance(other, Match):
            return NotImplemented
        return Match(max(self, other))

    def __invert__(self) -> Match:
        return Match(2 - self)


class LeafOp(StrEnum):
    """A predicate on one column, with SQL three-valued logic (NULL never matches
    a comparison) and IEEE floats (NaN compares false, ``!=`` is true for NaN)."""

    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    IN = "in"
    NOT_IN = "not in"
    IS_NULL = "is null"
    IS_NOT_NULL = "is not null"
    STARTS_WITH = "starts with"
    NOT_STARTS_WITH = "not starts with"
    LIKE = "like"  # a pattern with % and _ anywhere; pruned by sets of values only
    NOT_LIKE = "not like"
    ILIKE = "ilike"  # LIKE on the values and the pattern lowercased
    NOT_ILIKE = "not ilike"
    REGEXP = "regexp"  # an RE2 regular expression found anywhere in the value
    NOT_REGEXP = "not regexp"
    IS_NAN = "is nan"
    IS_NOT_NAN = "is not nan"


# NOT(a op b) for a non-null a. Callers add the NULL and NaN cases: NOT(x < 1) is
# (x >= 1 OR x IS NAN) for floats, and NOT never turns a NULL row into a match.
NEGATION: dict[LeafOp, LeafOp] = {
    LeafOp.EQ: LeafOp.NE,
    LeafOp.NE: LeafOp.EQ,
    LeafOp.LT: LeafOp.GE,
    LeafOp.LE: LeafOp.GT,
    LeafOp.GT: LeafOp.LE,
    LeafOp.GE: LeafOp.LT,
    LeafOp.IN: LeafOp.NOT_IN,
    LeafOp.NOT_IN: LeafOp.IN,
    LeafOp.IS_NULL: LeafOp.IS_NOT_NULL,
    LeafOp.IS_NOT_NULL: LeafOp.IS_NULL,
    LeafOp.STARTS_WITH: LeafOp.NOT_STARTS_WITH,
    LeafOp.NOT_STARTS_WITH: LeafOp.STARTS_WITH,
    LeafOp.LIKE: LeafOp.NOT_LIKE,
    LeafOp.NOT_LIKE: LeafOp.LIKE,
    LeafOp.ILIKE: LeafOp.NOT_ILIKE,
    LeafOp.NOT_ILIKE: LeafOp.ILIKE,
    LeafOp.REGEXP: LeafOp.NOT_REGEXP,
    LeafOp.NOT_REGEXP: LeafOp.REGEXP,
    LeafOp.IS_NAN: LeafOp.IS_NOT_NAN,
    LeafOp.IS_NOT_NAN: LeafOp.IS_NAN,
}
