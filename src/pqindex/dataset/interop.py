"""Handing results to other Arrow libraries: the PyCapsule stream and pyarrow datasets.

``Scan.__arrow_c_stream__`` streams record batches as the scan produces them, so
polars, DuckDB, DataFusion and pyarrow read a scan directly without the result
being materialized first. ``Dataset.to_pyarrow_dataset`` turns pqindex's pruning
into a ``pyarrow.dataset`` of the kept files and row groups, with the predicate
attached as a pyarrow expression, for engines that scan pyarrow datasets.
"""

from __future__ import annotations

import datetime as dt
import math
import operator
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from pqindex.errors import UserInputError
from pqindex.expr.evaluate import like_mask
from pqindex.expr.nodes import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    Compare,
    Expr,
    In,
    IsNan,
    IsNull,
    Like,
    Literal,
    LiteralValue,
    Not,
    Or,
    Regexp,
    StartsWith,
)
from pqindex.format.match import LeafOp

if TYPE_CHECKING:
    from pqindex.dataset.dataset import Dataset, Scan

__all__ = [
    "KeptFile",
    "arrow_expression",
    "scan_schema",
    "stream_capsule",
    "to_polars",
    "to_pyarrow_dataset",
    "to_reader",
]


# ---------------------------------------------------------------- streaming


def scan_schema(scan: Scan) -> pa.Schema:
    """The Arrow schema of a scan's batches, known before any data page is read:
    ``Dataset.schema`` (every file's footer unified, or a current manifest's, plus
    the partition columns) narrowed to the requested top-level columns, in their
    order. Batches of files with narrower types are cast to it."""
    full = scan.dataset.schema
    columns = scan.columns
    if columns is None:
        return full
    names = full.names
    missing = [c for c in columns if c not in names]
    if missing:
        raise UserInputError(
            f"no column named {missing[0]!r} (columns: {', '.join(names)})",
            path=scan.dataset.files[0] if scan.dataset.files else None,
        )
    return pa.schema([full.field(c) for c in columns])


def _batches(scan: Scan, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    for batch in scan.to_batches():
        # The stream's schema was announced first; a batch that disagrees (a later
        # file typed differently) is cast to it, as ``to_table`` does.
        yield batch if batch.schema.equals(schema) else batch.select(schema.names).cast(schema)


def to_reader(scan: Scan) -> pa.RecordBatchReader:
    """A ``RecordBatchReader`` over the scan: batches as produced, the schema first.

    Planning and reading start on the first ``read_next_batch``; memory stays
    bounded by a row group's selected data and one batch, not by the result.
    Each call starts a new execution of the scan (readers themselves are single-use).
    """
    schema = scan_schema(scan)
    return pa.RecordBatchReader.from_batches(schema, _batches(scan, schema))


def stream_capsule(scan: Scan, requested_schema: object | None = None) -> object:
    """The Arrow PyCapsule ``ArrowArrayStream`` of a fresh execution of ``scan``."""
    return to_reader(scan).__arrow_c_stream__(requested_schema)


def to_polars(scan: Scan) -> Any:
    """The scan's rows as a ``polars.DataFrame``, read through the stream."""
    try:
        import polars as pl
    except ImportError as e:  # optional dependency
        raise UserInputError("to_polars needs polars: pip install polars") from e
    return pl.DataFrame(scan)  # reads the PyCapsule stream, no pyarrow table first


# ---------------------------------------------------------------- pyarrow dataset


class KeptFile:
    """A file the plan keeps: its path, partition values and kept row groups
    (None: every row group)."""

    __slots__ = ("partition", "path", "row_groups")

    def __init__(self, path: str, partition: dict[str, Any], row_groups: list[int] | None) -> None:
        self.path = path
        self.partition = partition
        self.row_groups = row_groups

    def __repr__(self) -> str:
        return f"KeptFile({self.path!r}, {self.partition!r}, {self.row_groups!r})"


def _kept_files(ds: Dataset, expr: Expr) -> list[KeptFile]:
    """Files and row groups the planner keeps for ``expr`` (the public plan)."""
    out: list[KeptFile] = []
    for entry in ds.plan(where=expr).kept:
        kept = entry.row_groups_kept
        whole = len(kept) == len(entry.row_groups)
        out.append(KeptFile(entry.path, dict(entry.partition), None if whole else kept))
    return out


def _filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    if "://" not in path:
        return pafs.LocalFileSystem(), path
    try:
        fs, inner = pafs.FileSystem.from_uri(path)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
        raise UserInputError(
            f"pyarrow has no filesystem for this location ({e}); pass filesystem=",
            path=path,
        ) from None
    return fs, inner


def _partition_expression(partition: dict[str, Any], schema: pa.Schema) -> pc.Expression:
    out: pc.Expression = pc.scalar(True)
    for k, v in partition.items():
        if k not in schema.names:
            continue
        term = (pc.field(k).is_null() if v is None
                else pc.field(k) == pa.scalar(v, type=schema.field(k).type))
        out = out & term
    return out


def to_pyarrow_dataset(
    ds: Dataset,
    expr: Expr,
    columns: Sequence[str] | None = None,
    *,
    filesystem: pafs.FileSystem | None = None,
    attach_filter: bool = True,
    exact: bool = True,
) -> pads.Dataset:
    """A ``pyarrow.dataset`` of the files and row groups pqindex keeps for ``expr``.

    The predicate goes along as a pyarrow expression (``Dataset.filter``), so a
    scan of the result never returns a row outside it. Where the predicate has
    no exact pyarrow translation, ``exact=True`` raises ``UserInputError``;
    ``exact=False`` returns the pruned dataset without a filter: whole kept row
    groups, which the consumer filters itself. ``attach_filter=False`` never
    attaches one (pyarrow refuses ``get_fragments`` on a filtered dataset).
    """
    full = ds.schema
    wants = attach_filter and not isinstance(expr, AlwaysTrue)
    arrow_filter = arrow_expression(expr, full) if wants else None
    if arrow_filter is None and exact and wants:
        raise UserInputError(
            f"the predicate {expr} has no exact pyarrow translation; "
            "pass exact=False for a dataset pruned by pqindex but not filtered"
        )
    schema = full
    if columns is not None:
        names = list(columns)
        for c in names:
            if c not in full.names:
                raise UserInputError(f"no column named {c!r} (columns: {', '.join(full.names)})")
        # The filter's own columns stay, or pyarrow could not evaluate it.
        if arrow_filter is not None:
            for c in _columns_of(expr):
                if c in full.names and c not in names:
                    names.append(c)
        schema = pa.schema([full.field(c) for c in names])
    fmt = pads.ParquetFileFormat()
    fragments = []
    fs_of_dataset = filesystem
    for kept in _kept_files(ds, expr):
        if filesystem is None:
            fs, path = _filesystem(kept.path)
            fs_of_dataset = fs_of_dataset or fs
        else:
            fs, path = filesystem, kept.path
        fragments.append(
            fmt.make_fragment(
                path,
                fs,
                partition_expression=_partition_expression(kept.partition, schema),
                row_groups=kept.row_groups,
            )
        )
    out = pads.FileSystemDataset(
        fragments, schema, fmt, fs_of_dataset or pafs.LocalFileSystem()
    )
    return out if arrow_filter is None else out.filter(arrow_filter)


# ---------------------------------------------------------------- expressions


def _columns_of(expr: Expr) -> list[str]:
    if isinstance(expr, (And, Or)):
        return _columns_of(expr.left) + _columns_of(expr.right)
    if isinstance(expr, Not):
        return _columns_of(expr.child)
    column = getattr(expr, "column", None)
    return [column.name.split(".")[0]] if column is not None else []


_COMPARE: dict[LeafOp, Callable[[Any, Any], Any]] = {
    LeafOp.EQ: operator.eq,
    LeafOp.NE: operator.ne,
    LeafOp.LT: operator.lt,
    LeafOp.LE: operator.le,
    LeafOp.GT: operator.gt,
    LeafOp.GE: operator.ge,
}


class _Untranslatable(Exception):
    pass


def _field(name: str, schema: pa.Schema) -> tuple[pc.Expression, pa.DataType]:
    if name in schema.names:
        return pc.field(name), schema.field(name).type
    parts = name.split(".")
    if parts[0] not in schema.names:
        raise _Untranslatable(name)
    t = schema.field(parts[0]).type
    for p in parts[1:]:
        if not pa.types.is_struct(t) or t.get_field_index(p) < 0:
            raise _Untranslatable(name)
        t = t.field(p).type
    return pc.field(*parts), t


def _scalar(value: LiteralValue, t: pa.DataType) -> pa.Scalar:
    """The literal as a scalar of the column's type, only where that is exact.

    Mirrors ``expr.bind``: a naive timestamp against a UTC column is UTC, an ISO
    string against a temporal column is that date or time. Anything else that
    would need a rounding rule is refused rather than guessed.
    """
    if value is None:
        raise _Untranslatable("NULL literal")
    try:
        if pa.types.is_boolean(t) and isinstance(value, bool):
            return pa.scalar(value, t)
        if isinstance(value, bool):
            raise _Untranslatable("boolean against a non-boolean column")
        if pa.types.is_integer(t):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, Decimal) and value == value.to_integral_value():
                value = int(value)
            if not isinstance(value, int):
                raise _Untranslatable("non-integral literal against an integer column")
            info_min, info_max = _int_range(t)
            if not info_min <= value <= info_max:
                raise _Untranslatable("literal outside the column's range")
            return pa.scalar(value, t)
        if pa.types.is_floating(t):
            # As bind: the literal as the column's float type stores it.
            if pa.types.is_float16(t) or not isinstance(value, (int, float, Decimal)):
                raise _Untranslatable("literal against this float column")
            x = float(value)
            if not math.isfinite(x) and not (isinstance(value, float) or
                                             (isinstance(value, Decimal) and
                                              not value.is_finite())):
                raise _Untranslatable("literal beyond the double range")
            return pa.scalar(x, t)
        if pa.types.is_decimal(t):
            if isinstance(value, (int, Decimal)) and Decimal(value).is_finite():
                return pa.scalar(Decimal(value))
            raise _Untranslatable("literal against a decimal column")
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            if isinstance(value, str):
                return pa.scalar(value, t)
            raise _Untranslatable("non-string literal against a string column")
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            if isinstance(value, bytes):
                return pa.scalar(value, t)
            raise _Untranslatable("non-binary literal against a binary column")
        if pa.types.is_date32(t) or pa.types.is_date64(t):
            if isinstance(value, str) and len(value.strip()) == 10:
                value = dt.date.fromisoformat(value.strip())
            if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
                return pa.scalar(value, t)
            raise _Untranslatable("literal against a date column")
        if pa.types.is_timestamp(t):
            if isinstance(value, str):
                value = dt.datetime.fromisoformat(value.strip())
            if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
                value = dt.datetime(value.year, value.month, value.day)
            if not isinstance(value, dt.datetime):
                raise _Untranslatable("literal against a timestamp column")
            aware = value.tzinfo is not None and value.utcoffset() is not None
            if t.tz is None:
                if aware:
                    raise _Untranslatable("zoned literal against a local timestamp")
                scalar = pa.scalar(value, pa.timestamp("us"))
            else:
                utc = value.astimezone(dt.UTC) if aware else value.replace(tzinfo=dt.UTC)
                scalar = pa.scalar(utc, pa.timestamp("us", tz=t.tz))
            # Safe cast: a literal finer than the column's unit is refused, not rounded.
            return scalar.cast(t, safe=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, ValueError, TypeError) as e:
        raise _Untranslatable(str(e)) from None
    raise _Untranslatable(f"column type {t}")


def _int_range(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    if pa.types.is_unsigned_integer(t):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _translate(expr: Expr, schema: pa.Schema) -> pc.Expression:
    if isinstance(expr, AlwaysTrue):
        return pc.scalar(True)
    if isinstance(expr, AlwaysFalse):
        return pc.scalar(False)
    if isinstance(expr, And):
        return _translate(expr.left, schema) & _translate(expr.right, schema)
    if isinstance(expr, Or):
        return _translate(expr.left, schema) | _translate(expr.right, schema)
    if isinstance(expr, Not):
        # Kleene NOT of a comparison: NULL stays NULL (no match), NaN compares false.
        return ~_translate(expr.child, schema)
    if isinstance(expr, Compare):
        f, t = _field(expr.column.name, schema)
        if isinstance(expr.literal.value, float) and math.isnan(expr.literal.value):
            raise _Untranslatable("NaN literal")
        out: pc.Expression = _COMPARE[expr.op](f, _scalar(expr.literal.value, t))
        return out
    if isinstance(expr, In):
        f, t = _field(expr.column.name, schema)
        values = [_literal(v, t) for v in expr.values]
        if not values:
            raise _Untranslatable("empty IN list")
        member = pc.is_in(f, value_set=pa.array(values, type=values[0].type))
        # NULL IN (...) is NULL (is_in says false), so that NOT keeps it out too.
        member = pc.if_else(f.is_valid(), member, pa.scalar(None, pa.bool_()))
        return ~member if expr.negated else member
    if isinstance(expr, IsNull):
        f, _t = _field(expr.column.name, schema)
        return f.is_valid() if expr.negated else f.is_null(nan_is_null=False)
    if isinstance(expr, IsNan):
        f, t = _field(expr.column.name, schema)
        if not pa.types.is_floating(t):
            raise _Untranslatable("isnan of a non-float column")
        nan = pc.is_nan(f)
        return ~nan if expr.negated else nan
    if isinstance(expr, StartsWith):
        f, t = _field(expr.column.name, schema)
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)) or not isinstance(
            expr.prefix, str
        ):
            raise _Untranslatable("prefix match on a non-string column")
        starts = pc.starts_with(f, pattern=expr.prefix)
        return ~starts if expr.negated else starts
    if isinstance(expr, Like):
        f, t = _field(expr.column.name, schema)
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise _Untranslatable("LIKE on a non-string column")
        liked = like_mask(f, expr.arrow_pattern, expr.ignore_case)
        return ~liked if expr.negated else liked
    if isinstance(expr, Regexp):
        f, t = _field(expr.column.name, schema)
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise _Untranslatable("regexp_matches on a non-string column")
        found = pc.match_substring_regex(f, pattern=expr.pattern)
        return ~found if expr.negated else found
    raise _Untranslatable(type(expr).__name__)


def _literal(lit: Literal, t: pa.DataType) -> pa.Scalar:
    if isinstance(lit.value, float) and math.isnan(lit.value):
        raise _Untranslatable("NaN literal")
    return _scalar(lit.value, t)


def arrow_expression(expr: Expr, schema: pa.Schema) -> pc.Expression | None:
    """``expr`` as a ``pyarrow.compute.Expression`` with the same rows, or None.

    None when some part has no exact translation (a literal that would need
    rounding, NaN literals, NULL in IN lists, ...): then only pqindex's own
    evaluation is exact.
    """
    try:
        out = _translate(expr, schema)
        schema.empty_table().filter(out)  # binds: types and kernels exist
    except (_Untranslatable, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return out
