"""Value expressions evaluated on Arrow arrays with ``pyarrow.compute``.

:func:`condition_mask` gives a condition's answer per row with SQL's
three-valued logic (NULL where the answer is unknown). Each function and
operator has its kernel and follows DuckDB's semantics where engines differ
(``docs/semantics.md``): ``/`` divides as DOUBLE, integers are added and
multiplied in 64 bits with overflow refused, ``round`` and ``CAST`` to an
integer round half away from zero, a month added to Jan 31 gives the month's
last day, ``substr`` counts from 1, ``||`` is NULL when a side is NULL,
``concat`` skips NULLs. Any error Arrow raises reaches the user as a
``UserInputError`` naming the sub-expression.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pqindex.errors import UserInputError
from pqindex.expr.nodes import (
    Case,
    Cast,
    Column,
    Func,
    Interval,
    Literal,
    Term,
    arrow_like,
    like_tokens,
    term_sql,
)

__all__ = ["condition_mask", "evaluate_term"]

# An evaluated term: an array of the rows, or one scalar for every row.
Value = Any
ColumnValues = Callable[[str], Any]

_COMPARE = {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
            ">": pc.greater, ">=": pc.greater_equal}
_CHECKED = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked}
_PARTS = {"year": pc.year, "quarter": pc.quarter, "month": pc.month, "day": pc.day,
          "hour": pc.hour, "minute": pc.minute, "second": pc.second,
          "dayofyear": pc.day_of_year}
_CAST_ARROW = {
    "BOOLEAN": pa.bool_(), "TINYINT": pa.int8(), "SMALLINT": pa.int16(),
    "INTEGER": pa.int32(), "BIGINT": pa.int64(), "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(), "VARCHAR": pa.string(), "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us"), "TIMESTAMPTZ": pa.timestamp("us", "UTC"),
}
_NANOS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
_NULL = pa.scalar(None, pa.null())


def condition_mask(value: Term, column: ColumnValues, n: int) -> pa.Array:
    """The boolean term ``value`` for each of ``n`` rows (NULL where unknown);
    ``column(name)`` gives a column's values."""
    return _broadcast(_boolean(Evaluator(column, n).eval(value), value), n)


def evaluate_term(value: Term, column: ColumnValues, n: int) -> pa.Array:
    """The term ``value`` for each of ``n`` rows."""
    return _broadcast(Evaluator(column, n).eval(value), n)


def _broadcast(v: Value, n: int) -> pa.Array:
    if isinstance(v, pa.Scalar):
        if v.type == pa.null():
            return pa.nulls(n, pa.bool_())
        return pa.array([v.as_py()] * n, v.type) if n else pa.array([], v.type)
    if isinstance(v, pa.ChunkedArray):
        return v.combine_chunks() if v.num_chunks else pa.array([], v.type)
    return v


def _boolean(v: Value, node: Term) -> Value:
    if v.type == pa.null():
        return pa.scalar(None, pa.bool_())
    if v.type != pa.bool_():
        raise UserInputError(f"{term_sql(node)} is not a condition (its values are {v.type})")
    return v


def arrow_scalar(value: object) -> pa.Scalar:
    """A literal as an Arrow scalar: integers as int64, aware timestamps in UTC."""
    if value is None:
        return _NULL
    if isinstance(value, bool):
        return pa.scalar(value, pa.bool_())
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return pa.scalar(value, pa.int64())
        return pa.scalar(Decimal(value))
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None and value.utcoffset() is not None:
            utc = value.astimezone(dt.UTC).replace(tzinfo=None)
            return pa.scalar(utc, pa.timestamp("us", "UTC"))
        return pa.scalar(value, pa.timestamp("us"))
    if isinstance(value, dt.date):
        return pa.scalar(value, pa.date32())
    if isinstance(value, dt.time):
        return pa.scalar(value, pa.time64("us"))
    return pa.scalar(value)


def _is_null(v: Value) -> bool:
    return bool(v.type == pa.null())


def _prepared(arr: Any) -> Any:
    """A column's values in the types the kernels take: dictionaries decoded,
    floats as DOUBLE, integers as int64 (uint64 as an exact decimal), dates as date32."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.array([], arr.type)
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_floating(t) and t != pa.float64():
        return arr.cast(pa.float64())
    if pa.types.is_uint64(t):
        return arr.cast(pa.decimal128(20, 0))
    if pa.types.is_integer(t) and t != pa.int64():
        return arr.cast(pa.int64())
    if pa.types.is_date64(t):
        return arr.cast(pa.date32())
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return arr.cast(pa.string())
    return arr


class Evaluator:
    """Evaluates terms on one batch of rows (``column(name)`` gives a column)."""

    def __init__(self, column: ColumnValues, n: int) -> None:
        self.column = column
        self.n = n
        self.cache: dict[str, Any] = {}

    def eval(self, value: Term) -> Value:
        try:
            return self._eval(value)
        except UserInputError:
            raise
        except (pa.ArrowException, ValueError, OverflowError, TypeError) as e:
            raise UserInputError(f"cannot evaluate {term_sql(value)}: {e}") from None

    def _eval(self, value: Term) -> Value:
        if isinstance(value, Column):
            if value.name not in self.cache:
                self.cache[value.name] = _prepared(self.column(value.name))
            return self.cache[value.name]
        if isinstance(value, Literal):
            return arrow_scalar(value.value)
        if isinstance(value, Interval):
            raise UserInputError(f"an INTERVAL ({value}) can only be added to or "
                                 "subtracted from a date or timestamp")
        if isinstance(value, Cast):
            return self._cast(value)
        if isinstance(value, Case):
            return self._case(value)
        assert isinstance(value, Func)
        return self._func(value)

    # ------------------------------------------------------------ functions

    def _func(self, node: Func) -> Value:
        name, args = node.name, node.args
        if name in ("+", "-") and any(isinstance(a, Interval) for a in args):
            return self._interval_shift(node)
        if name in ("and", "or"):
            left, right = (_boolean(self._eval(a), a) for a in args)
            return (pc.and_kleene if name == "and" else pc.or_kleene)(left, right)
        if name == "in":
            return self._found(node)
        if name == "coalesce":
            vals = _aligned([self._eval(a) for a in args])
            present = [v for v in vals if not _is_null(v)]
            return pc.coalesce(*present) if present else _NULL
        if name == "concat":
            parts = [self._text(self._eval(a)) for a in args]
            present = [p for p in parts if not _is_null(p)]
            if not present:
                return pa.scalar("", pa.string())
            return pc.binary_join_element_wise(*present, "", null_handling="skip")
        vals = [self._eval(a) for a in args]
        if name == "is_null":
            v = vals[0]
            return pa.scalar(True) if _is_null(v) else (
                pa.scalar(not v.is_valid) if isinstance(v, pa.Scalar) else pc.is_null(v))
        if any(_is_null(v) for v in vals):
            return _NULL  # every other function is NULL where an argument is
        if name in _COMPARE:
            left, right = _aligned(vals)
            return _COMPARE[name](left, right)
        if name in ("+", "-", "*", "/"):
            return self._arithmetic(node, vals[0], vals[1])
        return self._scalar_func(node, vals)

    def _scalar_func(self, node: Func, vals: list[Value]) -> Value:
        name, args = node.name, node.args
        v = vals[0]
        if name == "negate":
            return pc.negate_checked(v)
        if name == "abs":
            return pc.abs_checked(v)
        if name in ("round", "floor", "ceil"):
            digits = int(args[1].value) if len(args) > 1 and isinstance(args[1], Literal) \
                and isinstance(args[1].value, int) else 0
            if pa.types.is_integer(v.type) and (name != "round" or digits >= 0):
                return v
            mode = {"round": "half_towards_infinity", "floor": "down", "ceil": "up"}[name]
            return pc.round(v, ndigits=digits, round_mode=mode)
        if name in ("lower", "upper"):
            return (pc.utf8_lower if name == "lower" else pc.utf8_upper)(v)
        if name == "length":
            return pc.utf8_length(v).cast(pa.int64())
        if name in ("trim", "ltrim", "rtrim"):
            kernel = {"trim": pc.utf8_trim, "ltrim": pc.utf8_ltrim, "rtrim": pc.utf8_rtrim}[name]
            return kernel(v, characters=" ")
        if name == "substr":
            return _substr(node, v)
        if name == "||":
            left, right = (self._text(x) for x in vals)
            return pc.binary_join_element_wise(left, right, "", null_handling="emit_null")
        if name == "nullif":
            left, right = _aligned(vals)
            same = pc.fill_null(pc.equal(left, right), False)
            return pc.if_else(same, pa.scalar(None, left.type), left)
        if name in _PARTS or name == "dayofweek":
            if pa.types.is_date(v.type) and name in ("hour", "minute", "second"):
                v = v.cast(pa.timestamp("s"))
            if name == "dayofweek":  # DuckDB: Sunday is 0
                return pc.day_of_week(v, count_from_zero=True, week_start=7)
            return _PARTS[name](v)
        if name == "isnan":
            return pc.is_nan(v)
        if name == "not":
            return pc.invert(v)
        if name in ("like", "ilike"):
            escape = args[2].value if len(args) > 2 and isinstance(args[2], Literal) else None
            pattern = args[1].value if isinstance(args[1], Literal) else None
            assert isinstance(pattern, str) and (escape is None or isinstance(escape, str))
            from pqindex.expr.evaluate import like_mask  # evaluate imports this module

            return like_mask(v, arrow_like(like_tokens(pattern, escape)), name == "ilike")
        text = args[1].value if isinstance(args[1], Literal) else None
        assert isinstance(text, str)
        if name == "regexp_matches":
            return pc.match_substring_regex(v, pattern=text)
        if name == "starts_with":
            return pc.starts_with(v, pattern=text)
        if name == "ends_with":
            return pc.ends_with(v, pattern=text)
        if name == "contains":
            return pc.match_substring(v, pattern=text)
        raise UserInputError(f"function {name}() is not supported")

    def _text(self, v: Value) -> Value:
        if _is_null(v) or v.type == pa.string():
            return v
        if pa.types.is_boolean(v.type):  # DuckDB spells booleans lowercased
            return pc.if_else(v, pa.scalar("true"), pa.scalar("false"))
        return v.cast(pa.string())

    def _found(self, node: Func) -> Value:
        """``x IN (values)``: TRUE when found; NULL when x is NULL, or when not found
        and the list holds a NULL; FALSE otherwise."""
        subject = self._eval(node.args[0])
        items = [self._eval(a) for a in node.args[1:]]
        if _is_null(subject):
            return _NULL
        has_null = any(_is_null(i) or not i.is_valid for i in items)
        present = [i for i in items if not _is_null(i) and i.is_valid]
        if not present:
            return _NULL if has_null else pc.if_else(pc.is_valid(subject), False, None) \
                if not isinstance(subject, pa.Scalar) else pa.scalar(False)
        aligned = _aligned([subject, *present])
        subject, present = aligned[0], aligned[1:]
        values = pa.array([p.as_py() for p in present], present[0].type)
        if pa.types.is_floating(values.type):
            # is_in hashes bit patterns: -0.0 and 0.0 are made one (as = sees them).
            values, subject = pc.add(values, 0.0), pc.add(subject, 0.0)
        if isinstance(subject, pa.Scalar):
            subject = pa.array([subject.as_py()], subject.type)
        found = pc.is_in(subject, value_set=values)
        found = pc.if_else(pc.is_valid(subject), found, pa.scalar(None, pa.bool_()))
        if has_null:
            found = pc.if_else(found, True, pa.scalar(None, pa.bool_()))
        return found

    def _case(self, node: Case) -> Value:
        conds = [_broadcast(pc.fill_null(_boolean(self._eval(c), c), False), self.n)
                 for c, _ in node.whens]
        vals = _aligned([self._eval(t) for _, t in node.whens] + [self._eval(node.default)])
        if all(_is_null(v) for v in vals):
            return _NULL
        kind = next(v.type for v in vals if not _is_null(v))
        vals = [pa.scalar(None, kind) if _is_null(v) else v for v in vals]
        return pc.case_when(pc.make_struct(*conds, field_names=[f"c{i}" for i in
                                                                 range(len(conds))]), *vals)

    # ------------------------------------------------------------ arithmetic

    def _arithmetic(self, node: Func, a: Value, b: Value) -> Value:
        name = node.name
        ta, tb = a.type, b.type
        if pa.types.is_date(ta) or pa.types.is_date(tb) or pa.types.is_timestamp(ta) \
                or pa.types.is_timestamp(tb):
            return _date_arithmetic(node, a, b)
        if name == "/":
            return pc.divide(_as_double(a), _as_double(b))
        if pa.types.is_floating(ta) or pa.types.is_floating(tb):
            return _CHECKED[name](_as_double(a), _as_double(b))
        try:
            return _CHECKED[name](a, b)
        except pa.ArrowInvalid as e:
            if pa.types.is_decimal(ta) or pa.types.is_decimal(tb):
                # Beyond 38 digits: 256-bit decimals hold 76.
                wide = [_wide_decimal(x) for x in (a, b)]
                try:
                    return _CHECKED[name](*wide)
                except pa.ArrowInvalid:
                    pass
            raise UserInputError(f"cannot evaluate {term_sql(node)}: {e} "
                                 "(integers are computed in 64 bits)") from None

    def _interval_shift(self, node: Func) -> Value:
        a, b = node.args
        if node.name == "+" and isinstance(a, Interval):
            a, b = b, a
        if not isinstance(b, Interval) or isinstance(a, Interval):
            raise UserInputError(f"{term_sql(node)}: an INTERVAL is added to a date or "
                                 "timestamp")
        base = self._eval(a)
        if _is_null(base):
            return _NULL
        sign = 1 if node.name == "+" else -1
        if pa.types.is_date(base.type):
            base = base.cast(pa.timestamp("us"))  # DATE + INTERVAL is a TIMESTAMP
        if not pa.types.is_timestamp(base.type):
            raise UserInputError(f"{term_sql(node)}: an INTERVAL is added to a date or "
                                 f"timestamp, not {base.type}")
        if b.months:
            base = _add_months(base, sign * b.months)
        ticks = (b.days * 86_400 * 10**6 + b.micros) * 1000 // _NANOS[base.type.unit]
        if ticks:
            base = pc.add_checked(base, pa.scalar(sign * ticks, pa.duration(base.type.unit)))
        return base

    def _cast(self, node: Cast) -> Value:
        v = self._eval(node.value)
        if _is_null(v):
            return _NULL
        if node.type.startswith("DECIMAL"):
            precision, scale = (int(x) for x in node.type[8:-1].split(","))
            target: pa.DataType = pa.decimal128(precision, scale)
            if pa.types.is_decimal(v.type) or pa.types.is_floating(v.type):
                v = pc.round(v, ndigits=scale, round_mode="half_towards_infinity")
                return v.cast(target, safe=not pa.types.is_floating(v.type))
            if pa.types.is_string(v.type):
                return pc.round(v.cast(pa.decimal128(38, min(38, scale + 10))), ndigits=scale,
                                round_mode="half_towards_infinity").cast(target)
            return v.cast(target)
        target = _CAST_ARROW[node.type]
        if pa.types.is_integer(target) and (pa.types.is_floating(v.type)
                                            or pa.types.is_decimal(v.type)):
            v = pc.round(v, round_mode="half_towards_infinity")  # DuckDB rounds; Arrow cuts
        if node.type == "VARCHAR":
            return self._text(v)
        if pa.types.is_timestamp(target) and pa.types.is_timestamp(v.type) \
                and (target.tz is None) != (v.type.tz is None):
            # Between naive and UTC-adjusted: the same wall clock, read as UTC.
            return v.cast(pa.int64()).cast(pa.timestamp(v.type.unit, target.tz))
        return v.cast(target)


def _wide_decimal(v: Value) -> Value:
    """``v`` as a 256-bit decimal of its own precision (integers: 19 digits)."""
    t = v.type
    if pa.types.is_decimal(t):
        return v.cast(pa.decimal256(t.precision, t.scale))
    return v.cast(pa.decimal256(19, 0))


def _as_double(v: Value) -> Value:
    return v if v.type == pa.float64() else v.cast(pa.float64())


def _aligned(vals: list[Value]) -> list[Value]:
    """Values brought to one type to be compared or chosen between: numbers to the
    widest (decimals meet doubles as doubles), dates meet timestamps as timestamps,
    a naive timestamp meets an aware one as UTC, a string literal takes the type of
    the dates it is compared with."""
    types = [v.type for v in vals if not _is_null(v)]
    if not types or all(t == types[0] for t in types):
        return vals
    if any(pa.types.is_floating(t) for t in types) and all(
            pa.types.is_floating(t) or pa.types.is_integer(t) or pa.types.is_decimal(t)
            for t in types):
        return [v if _is_null(v) else _as_double(v) for v in vals]
    temporal = [t for t in types if pa.types.is_timestamp(t) or pa.types.is_date(t)]
    if temporal:
        stamps = [t for t in temporal if pa.types.is_timestamp(t)]
        if stamps:
            tz = next((t.tz for t in stamps if t.tz is not None), None)
            unit = min((t.unit for t in stamps), key=lambda u: _NANOS[u])
            target: pa.DataType = pa.timestamp(unit, tz)
        else:
            target = pa.date32()
        return [v if _is_null(v) or v.type == target else _to_temporal(v, target)
                for v in vals]
    if any(pa.types.is_decimal(t) for t in types) and all(
            pa.types.is_decimal(t) or pa.types.is_integer(t) for t in types):
        scale = max(t.scale if pa.types.is_decimal(t) else 0 for t in types)
        digits = max((t.precision - t.scale) if pa.types.is_decimal(t) else 19 for t in types)
        if digits + scale <= 38:
            target = pa.decimal128(digits + scale, scale)
        else:
            target = pa.decimal256(min(76, digits + scale), scale)
        return [v if _is_null(v) else v.cast(target) for v in vals]
    return vals  # the kernels take it from here (or say why not)


def _to_temporal(v: Value, target: pa.DataType) -> Value:
    if pa.types.is_string(v.type):
        return v.cast(pa.timestamp(target.unit) if pa.types.is_timestamp(target)
                      else target).cast(target)
    if pa.types.is_timestamp(target) and pa.types.is_timestamp(v.type) \
            and v.type.tz is None and target.tz is not None:
        # A naive timestamp against a UTC-adjusted one is read as UTC (as bind does).
        return v.cast(pa.timestamp(target.unit)).cast(pa.int64()).cast(target)
    if pa.types.is_date(v.type) and pa.types.is_timestamp(target):
        return v.cast(pa.timestamp(target.unit)).cast(pa.int64()).cast(target)
    return v.cast(target)


def _date_arithmetic(node: Func, a: Value, b: Value) -> Value:
    """A date plus or minus days, a date minus a date (days), as DuckDB does."""
    name, ta, tb = node.name, a.type, b.type
    if name == "+" and pa.types.is_integer(ta) and pa.types.is_date(tb):
        a, b, ta, tb = b, a, tb, ta
    if pa.types.is_date(ta) and pa.types.is_integer(tb) and name in ("+", "-"):
        days = _CHECKED[name](a.cast(pa.int32()).cast(pa.int64()), b)
        return days.cast(pa.int32()).cast(pa.date32())
    if pa.types.is_date(ta) and pa.types.is_date(tb) and name == "-":
        return pc.subtract_checked(a.cast(pa.int32()).cast(pa.int64()),
                                   b.cast(pa.int32()).cast(pa.int64()))
    raise UserInputError(f"{term_sql(node)}: cannot apply '{name}' to {ta} and {tb}")


def _add_months(v: Value, months: int) -> Value:
    """Timestamps plus calendar months, the day clamped to the month's last (in UTC
    for UTC-adjusted values)."""
    unit, per_day = v.type.unit, 86_400 * 10**9 // _NANOS[v.type.unit]
    scalar = isinstance(v, pa.Scalar)
    arr = pa.array([v.as_py()], v.type) if scalar else v
    ticks = np.asarray(pc.fill_null(arr.cast(pa.int64()), 0).to_numpy(zero_copy_only=False),
                       dtype=np.int64)
    days, time_of_day = np.divmod(ticks, per_day)
    dates = days.astype("datetime64[D]")
    month = dates.astype("datetime64[M]")
    day_of_month = (dates - month.astype("datetime64[D]")).astype(np.int64)
    target = month + np.timedelta64(months, "M")
    month_days = ((target + np.timedelta64(1, "M")).astype("datetime64[D]")
                  - target.astype("datetime64[D]")).astype(np.int64)
    shifted = target.astype("datetime64[D]") + np.minimum(day_of_month, month_days - 1)
    out_ticks = shifted.astype(np.int64) * per_day + time_of_day
    mask = None if not arr.null_count else np.asarray(
        arr.is_null().to_numpy(zero_copy_only=False), dtype=np.bool_)
    out = pa.array(out_ticks, pa.int64(), mask=mask).cast(pa.timestamp(unit, v.type.tz))
    return out[0] if scalar else out


def _substr(node: Func, v: Value) -> Value:
    """DuckDB's ``substr(s, start[, length])``: ``start`` counts from 1, from the end
    when negative; 0 stands before the first character."""
    given = [a.value if isinstance(a, Literal) else None for a in node.args[1:]]
    numbers = [g for g in given if isinstance(g, int) and not isinstance(g, bool)]
    if len(numbers) != len(given):
        raise UserInputError(f"{term_sql(node)}: substr() takes whole-number literals")
    start, length = numbers[0], (numbers[1] if len(numbers) > 1 else None)
    if length is not None and length < 0:
        raise UserInputError(f"{term_sql(node)}: a negative length is not supported")
    begin = start - 1 if start > 0 else start
    if start == 0:
        begin = 0
        if length is not None:
            length = max(0, length - 1)
    stop: int | None = None if length is None else begin + length
    if begin < 0 and stop is not None and stop >= 0:
        stop = None
    return pc.utf8_slice_codeunits(v, start=begin, stop=stop)
