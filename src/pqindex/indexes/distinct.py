"""Kind "distinct": the exact set of values of a file, row group or page.

Unlike a dictionary page (whose entries may be unused by the pages that follow),
the set holds exactly the values present, so "every value matches" means every
non-null row matches: ``!=`` / ``NOT IN`` and ranges can answer NONE or ALL too.

A unit with more than ``max_values`` distinct values (option, default 1024)
stores only its counts and answers SOME: beyond about a thousand values the set
is as large as the unit's own dictionary page, a Bloom filter answers ``=`` and
``IN`` in far fewer bytes, and evaluating ``IN`` / ``NOT IN`` against the set
would stop being cheap for the planner.

Body (version 1, little-endian)::

    u8   body version = 1
    ..   value type (``encoding.write_value_type``)
    u8   flags: bit 0 = values omitted (more than max_values)
    u64  rows in the unit, u64 nulls in the unit
    u32  distinct non-null values n (the true count, even when omitted)
    ..   unless omitted: n PLAIN values (BYTE_ARRAY with their u32 length),
         sorted by the column's order, NaN last
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pqindex.expr.bind import BoundPredicate
from pqindex.expr.evaluate import PATTERNS, pattern_values
from pqindex.format.match import LeafOp, Match
from pqindex.format.plain import split_plain
from pqindex.format.schema import LeafColumn, PhysicalType
from pqindex.format.value_type import Kind, ValueType
from pqindex.indexes.base import Blob, Scope, register
from pqindex.indexes.encoding import (
    BodyReader,
    BodyWriter,
    RegionError,
    check_leaf_type,
    read_value_type,
    write_value_type,
)
from pqindex.indexes.evidence import value_key, value_key_set
from pqindex.indexes.leaf_values import indexable, plain_bytes, storage
from pqindex.indexes.units import scopes_option, units

__all__ = ["DEFAULT_MAX_VALUES", "SUPPORTED_KINDS", "DistinctEvidence", "DistinctKind",
           "DistinctSet", "ValueCodes", "blobs_from_codes", "read_distinct", "value_codes",
           "value_type"]

DEFAULT_MAX_VALUES = 1024
_VERSION = 1
_OMITTED = 1
_SUPPORTED = frozenset({Kind.INT, Kind.UINT, Kind.FLOAT, Kind.DOUBLE, Kind.FLOAT16,
                        Kind.DECIMAL, Kind.DATE, Kind.TIME, Kind.TIMESTAMP, Kind.STRING,
                        Kind.BINARY, Kind.UUID})
SUPPORTED_KINDS = _SUPPORTED  # the value kinds the sets hold
_FLOATS = frozenset({Kind.FLOAT, Kind.DOUBLE, Kind.FLOAT16})


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


class DistinctSet:
    """A decoded blob: counts, and the values unless there were too many."""

    def __init__(self, vt: ValueType, rows: int, nulls: int, count: int,
                 raw: list[bytes] | None) -> None:
        self.vt = vt
        self.rows = rows
        self.nulls = nulls
        self.count = count
        self.raw = raw
        self.has_nan = False
        keys: list[Any] = []
        if vt.kind in (Kind.STRING, Kind.BINARY) and vt.physical == PhysicalType.BYTE_ARRAY:
            # Their key is the raw bytes (see ValueType.sort_key): no decode per value.
            keys = [bytes(r) for r in raw or []]
        else:
            for r in raw or []:
                v = vt.decode(r)
                if _is_nan(v):
                    self.has_nan = True
                else:
                    keys.append(value_key(vt, v))
        self.keys = sorted(set(keys))  # -0.0 and +0.0 are one key
        self.key_set = frozenset(self.keys)

    @property
    def known(self) -> bool:
        return self.raw is not None


def _sort_key(vt: ValueType, raw: bytes) -> tuple[int, Any]:
    v = vt.decode(raw)
    return (1, 0) if _is_nan(v) else (0, value_key(vt, v))


# Columns with at most this many distinct values are built from one dictionary
# encoding of the whole column (per unit: a bincount of the codes) instead of a hash
# of every unit's values: the cost per unit is its rows plus this many entries.
CODES_MAX_VALUES = 8 * DEFAULT_MAX_VALUES


class ValueCodes:
    """A column's values as dictionary codes: which values a span of rows holds.

    ``codes`` are int32 with -1 for nulls; ``dictionary`` holds the values in the
    leaf's stored form; their PLAIN bytes and order (the column's, NaN last) are
    computed once, when first asked for.
    """

    def __init__(self, vt: ValueType, dictionary: pa.Array, codes: np.ndarray) -> None:
        self.vt = vt
        self.dictionary = dictionary
        self.codes = codes
        self._raw: list[bytes] | None = None
        self._rank: np.ndarray | None = None
        self._present: dict[tuple[int, int], np.ndarray] = {}  # sizing, then building

    @property
    def size(self) -> int:
        return len(self.dictionary)

    def present(self, start: int, end: int) -> np.ndarray:
        """The sorted ids of the values rows [start, end) hold (nulls left out)."""
        found = self._present.get((start, end))
        if found is None:
            part = self.codes[start:end]
            if len(part) and part.min() < 0:
                part = part[part >= 0]
            found = np.flatnonzero(np.bincount(part, minlength=self.size))
            self._present[(start, end)] = found
        return found

    def raw(self) -> list[bytes] | None:
        """Each dictionary value's PLAIN bytes (None where the type has none)."""
        if self._raw is None:
            self._raw = plain_bytes(self.vt, self.dictionary)
        return self._raw

    def ordered(self, ids: np.ndarray) -> list[bytes]:
        """The PLAIN bytes of values ``ids``, in the column's order (NaN last)."""
        raw = self.raw()
        assert raw is not None
        if self._rank is None:
            order = sorted(range(len(raw)), key=lambda i: _sort_key(self.vt, raw[i]))
            self._rank = np.empty(len(raw), dtype=np.int64)
            self._rank[np.asarray(order, dtype=np.int64)] = np.arange(len(raw))
        return [raw[i] for i in ids[np.argsort(self._rank[ids], kind="stable")]]


_BYTES_TYPES = (pa.string(), pa.large_string(), pa.binary(), pa.large_binary())


def _encode_codes(leaf: LeafColumn, vt: ValueType,
                  column: pa.Array | pa.ChunkedArray) -> ValueCodes | None:
    if column.type in _BYTES_TYPES and vt.kind in (Kind.STRING, Kind.BINARY):
        # Encoded as given: no copy of every string into its stored form (large_binary);
        # only the dictionary is converted, which for bytes changes no value.
        enc = pc.dictionary_encode(column)
        chunks = enc.chunks if isinstance(enc, pa.ChunkedArray) else [enc]
        if not chunks:
            return ValueCodes(vt, pa.array([], pa.large_binary()), np.zeros(0, np.int32))
        dictionary = chunks[-1].dictionary
        # One hash table for all chunks: each chunk's dictionary is a prefix of the last.
        if any(len(c.dictionary) > len(dictionary) or not c.dictionary.equals(
                dictionary.slice(0, len(c.dictionary))) for c in chunks[:-1]):
            return None
        indices = [c.indices for c in chunks]
        dictionary = pc.cast(dictionary, pa.large_binary())
    else:
        stored = storage(leaf, column)
        if stored is None:
            return None
        enc = pc.dictionary_encode(stored)
        dictionary, indices = enc.dictionary, [enc.indices]
    # int32 as Arrow's indices are (zero-copy without nulls): half the memory of int64.
    codes = [np.asarray((i.fill_null(-1) if i.null_count else i).to_numpy(zero_copy_only=False),
                        dtype=np.int32) for i in indices]
    return ValueCodes(vt, dictionary, np.concatenate(codes) if len(codes) > 1 else codes[0])


def value_codes(leaf: LeafColumn, column: pa.Array | pa.ChunkedArray) -> ValueCodes | None:
    """``ValueCodes`` of a column the kind indexes, or None when it has more than
    ``CODES_MAX_VALUES`` values or its type can't be dictionary-encoded."""
    vt = value_type(leaf)
    if vt is None:
        return None
    try:
        codes = _encode_codes(leaf, vt, column)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if codes is None or codes.size > CODES_MAX_VALUES or codes.raw() is None:
        return None
    return codes


def value_type(leaf: LeafColumn) -> ValueType | None:
    """The leaf's value type when the kind indexes it (see ``leaf_values.indexable``)."""
    vt = ValueType.from_leaf(leaf)
    if leaf.nested or vt.kind not in _SUPPORTED:
        return None
    if vt.kind == Kind.DECIMAL and vt.physical == PhysicalType.BYTE_ARRAY:
        return None
    return vt


def _encode(vt: ValueType, rows: int, nulls: int, count: int, raw: list[bytes] | None) -> bytes:
    w = BodyWriter()
    w.u8(_VERSION)
    write_value_type(w, vt)
    w.u8(_OMITTED if raw is None else 0)
    w.u64(rows)
    w.u64(nulls)
    w.u32(count)
    for r in raw or []:
        if vt.physical == PhysicalType.BYTE_ARRAY:
            w.sized(r)
        else:
            w.raw(r)
    return w.getvalue()


def read_distinct(blob: Blob) -> DistinctSet:
    """Decode a "distinct" blob; RegionError when it is malformed."""
    r = BodyReader(blob.data, f"distinct blob for {blob.column!r}")
    r.version(_VERSION)
    vt = read_value_type(r)
    flags = r.u8()
    rows, nulls, count = r.u64(), r.u64(), r.u32()
    if nulls > rows or count > rows - nulls:
        raise RegionError(f"{r.what}: {count} values and {nulls} nulls in {rows} rows")
    raw = None
    if not flags & _OMITTED:
        if vt.physical is None or vt.kind not in _SUPPORTED:
            raise RegionError(f"{r.what}: values of {vt.name} are not indexed")
        # A count the remaining bytes cannot hold is damage: check before allocating.
        byte_array = vt.physical == PhysicalType.BYTE_ARRAY
        width = 4 if byte_array else (vt.fixed_size or vt.type_length or 0)
        if width <= 0 or count * width > r.remaining:
            raise RegionError(f"{r.what}: {count} values cannot fit in {r.remaining} bytes")
        rest = r.rest()
        raw = split_plain(vt.physical, vt.type_length, rest, count)
        used = sum(len(x) + 4 for x in raw) if byte_array else count * width
        if used != len(rest):
            raise RegionError(f"{r.what}: {len(rest) - used} bytes after the values")
    else:
        r.end()
    return DistinctSet(vt, rows, nulls, count, raw)


class DistinctEvidence:
    """What a unit's exact value set says about a predicate leaf."""

    def __init__(self, values: DistinctSet) -> None:
        self.values = values

    def match(self, pred: BoundPredicate) -> Match:
        s = self.values
        if pred.leaf.max_repetition_level > 0:
            return Match.SOME
        if s.rows == 0:
            return Match.NONE  # no rows, nothing can match
        op = pred.op
        all_null = s.nulls == s.rows
        no_nulls = s.nulls == 0
        if op == LeafOp.IS_NULL:
            return Match.ALL if all_null else Match.NONE if no_nulls else Match.SOME
        if op == LeafOp.IS_NOT_NULL:
            return Match.NONE if all_null else Match.ALL if no_nulls else Match.SOME
        if all_null:
            return Match.NONE  # every other leaf needs a non-null value
        if not s.known:
            return Match.SOME
        hit, every = self._hit_every(pred)
        if hit is None:
            return Match.SOME
        if not hit:
            return Match.NONE
        return Match.ALL if every and no_nulls else Match.SOME

    def _hit_every(self, pred: BoundPredicate) -> tuple[bool | None, bool]:
        """Whether some / every non-null value satisfies the leaf (None: can't tell)."""
        s = self.values
        vt = pred.value_type
        op = pred.op
        keys, has_nan = s.keys, s.has_nan
        if op == LeafOp.IS_NAN:
            return has_nan, has_nan and not keys
        if op == LeafOp.IS_NOT_NAN:
            return bool(keys), not has_nan
        if op in (LeafOp.EQ, LeafOp.IN, LeafOp.NE, LeafOp.NOT_IN):
            hits = len(s.key_set & value_key_set(pred))
            if op in (LeafOp.EQ, LeafOp.IN):
                return hits > 0, hits == len(keys) and not has_nan
            # NaN is != every literal.
            return has_nan or hits < len(keys), hits == 0
        if op in (LeafOp.LT, LeafOp.LE, LeafOp.GT, LeafOp.GE):
            (k,) = [value_key(vt, v) for v in pred.values]
            if not keys:
                return False, False  # only NaN: every comparison is false
            lo, hi = keys[0], keys[-1]
            if op == LeafOp.LT:
                return lo < k, hi < k and not has_nan
            if op == LeafOp.LE:
                return lo <= k, hi <= k and not has_nan
            if op == LeafOp.GT:
                return hi > k, lo > k and not has_nan
            return hi >= k, lo >= k and not has_nan
        if op in (LeafOp.STARTS_WITH, LeafOp.NOT_STARTS_WITH):
            p = value_key(vt, pred.values[0])
            if not isinstance(p, bytes) or not all(isinstance(k, bytes) for k in keys):
                return None, False
            starts = sum(1 for k in keys if k.startswith(p))
            if op == LeafOp.STARTS_WITH:
                return starts > 0, starts == len(keys)
            return starts < len(keys), starts == 0
        if op in PATTERNS:
            try:
                texts = [k.decode("utf-8") if isinstance(k, bytes) else str(k) for k in keys]
            except UnicodeDecodeError:
                return None, False
            return pattern_values(texts, pred)
        return None, False


@register
class DistinctKind:
    """Exact distinct values per file, row group and page (``max_values`` cap)."""

    name: ClassVar[str] = "distinct"

    def build(
        self,
        leaf: LeafColumn,
        column: pa.Array,
        row_group_bounds: list[tuple[int, int]],
        page_bounds: list[list[tuple[int, int]]] | None,
        options: Mapping[str, Any],
    ) -> list[Blob]:
        """Options: ``max_values`` (default 1024), ``scopes`` (default all three)."""
        if value_type(leaf) is None:
            return []
        cap = int(options.get("max_values", DEFAULT_MAX_VALUES))
        scopes = scopes_option(options, (Scope.FILE, Scope.ROW_GROUP, Scope.PAGE))
        codes = _few_codes(leaf, column, row_group_bounds)
        if codes is not None:
            return blobs_from_codes(leaf, codes, row_group_bounds, page_bounds, scopes, cap)
        found = indexable(leaf, column, _SUPPORTED)
        if found is None:
            return []
        vt, stored = found
        blobs = []
        for u in units(len(stored), row_group_bounds, page_bounds, scopes):
            part = stored.slice(u.start, u.rows)
            uniq = pc.unique(pc.drop_null(part))
            raw: list[bytes] | None = None
            if len(uniq) <= cap:
                raw = plain_bytes(vt, uniq)
                if raw is None:
                    return []
                raw = sorted(set(raw), key=lambda r: _sort_key(vt, r))
            count = len(uniq) if raw is None else len(raw)
            data = _encode(vt, u.rows, part.null_count, count, raw)
            props = {"count": count} if raw is not None else {"count": count, "omitted": True}
            blobs.append(Blob(self.name, leaf.name, u.scope, u.row_group, u.page, data, props))
        return blobs

    def evidence(self, leaf: LeafColumn, blob: Blob) -> DistinctEvidence:
        values = read_distinct(blob)
        check_leaf_type(leaf, values.vt, f"distinct blob for {blob.column!r}")
        return DistinctEvidence(values)


def blobs_from_codes(leaf: LeafColumn, codes: ValueCodes,
                     row_group_bounds: list[tuple[int, int]],
                     page_bounds: list[list[tuple[int, int]]] | None,
                     scopes: frozenset[Scope], cap: int = DEFAULT_MAX_VALUES) -> list[Blob]:
    """The kind's blobs from the column's codes (the same bytes as from its values)."""
    out = []
    for u in units(len(codes.codes), row_group_bounds, page_bounds, scopes):
        ids = codes.present(u.start, u.end)
        raw = codes.ordered(ids) if len(ids) <= cap else None
        nulls = int(np.count_nonzero(codes.codes[u.start:u.end] < 0))
        data = _encode(codes.vt, u.rows, nulls, len(ids), raw)
        props = {"count": len(ids)} if raw is not None else {"count": len(ids), "omitted": True}
        out.append(Blob(DistinctKind.name, leaf.name, u.scope, u.row_group, u.page, data, props))
    return out


def _few_codes(leaf: LeafColumn, column: pa.Array | pa.ChunkedArray,
               row_group_bounds: list[tuple[int, int]]) -> ValueCodes | None:
    """The column's codes when few enough values make them the cheaper way to build:
    a first look at a row group's start turns most high-cardinality columns away
    before encoding the whole column."""
    if not row_group_bounds:
        return None
    start, end = row_group_bounds[0]
    head = column.slice(start, min(end - start, 4 * CODES_MAX_VALUES))
    if pa.types.is_dictionary(head.type):
        if isinstance(head, pa.ChunkedArray):
            head = head.combine_chunks()  # a few thousand rows
        head = head.dictionary_decode()
    try:
        if pc.count_distinct(head).as_py() > CODES_MAX_VALUES:
            return None
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return value_codes(leaf, column)
