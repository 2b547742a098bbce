"""What one source of evidence says about one predicate leaf on one unit.

Every source answers the same question — ``match(pred) -> Match`` — so the
planner combines them without knowing where the answer came from (the
"statistics protocol" of STYLE.md): chunk statistics, a dictionary page, a
Bloom filter, a constant (hive partition value). Unknown is always SOME.
The page level answers through ``format.column_index.PageIndex``.
"""

from __future__ import annotations

import bisect
import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pqindex.expr.bind import BoundPredicate
from pqindex.expr.evaluate import PATTERNS, pattern_values, true_positions
from pqindex.format.arrow_build import bool_array, bytes_array
from pqindex.format.bloom import BloomFilter, BloomProbe, xxhash64
from pqindex.format.column_index import prefix_upper_bound
from pqindex.format.match import LeafOp, Match
from pqindex.format.plain import encode_plain
from pqindex.format.schema import PhysicalType
from pqindex.format.value_type import Kind, ValueType
from pqindex.format.values import Bounds, Comparison, bound_order

__all__ = [
    "BloomEvidence",
    "ConstantEvidence",
    "DictionaryEvidence",
    "Evidence",
    "StatisticsEvidence",
    "bloom_hashes",
    "float_key",
    "value_key",
]

_MASKS_KEPT = 4  # literal sets whose masks a dictionary keeps
_WORDS_FROM = 16  # literals from which fixed-width entries are matched by searchsorted
_FLOATS = frozenset({Kind.FLOAT, Kind.DOUBLE, Kind.FLOAT16})
# Dictionary entries compared in numpy: (kind, physical type) -> their PLAIN dtype.
_NUMERIC_DTYPES: dict[tuple[Kind, int | None], np.dtype[Any]] = {
    (Kind.INT, PhysicalType.INT32): np.dtype("<i4"),
    (Kind.INT, PhysicalType.INT64): np.dtype("<i8"),
    (Kind.FLOAT, PhysicalType.FLOAT): np.dtype("<f4"),
    (Kind.DOUBLE, PhysicalType.DOUBLE): np.dtype("<f8"),
}
_BYTES = frozenset({Kind.STRING, Kind.BINARY})
_COMPARISONS = frozenset(
    {
        LeafOp.EQ,
        LeafOp.NE,
        LeafOp.LT,
        LeafOp.LE,
        LeafOp.GT,
        LeafOp.GE,
        LeafOp.IN,
        LeafOp.NOT_IN,
        LeafOp.STARTS_WITH,
        LeafOp.NOT_STARTS_WITH,
    }
)


class Evidence(Protocol):
    """Anything that can answer NONE / SOME / ALL for a predicate leaf on a unit."""

    def match(self, pred: BoundPredicate) -> Match: ...


def float_key(value: Any) -> float:
    """Floats compare numerically for pruning: -0.0 == +0.0, as IEEE equality says."""
    return float(value)


def value_key(vt: ValueType, value: Any) -> Any:
    """The key a decoded value or a literal is compared by during pruning."""
    if vt.kind in _FLOATS:
        return float_key(value)
    return vt.sort_key(value)


@dataclass(frozen=True)
class _Summary:
    """A unit's values as bounds and counts (keys already in pruning form)."""

    lo: Any  # None when unknown
    hi: Any
    exact: bool  # lo and hi are values of the unit (not truncated bounds)
    nulls: int | None  # None: unknown
    rows: int | None  # values in the unit (nulls included), None: unknown
    nans: int | None  # float columns only; None: unknown
    all_nan: bool


def _summary_match(s: _Summary, pred: BoundPredicate) -> Match:
    vt = pred.value_type
    op = pred.op
    is_float = vt.kind in _FLOATS
    all_null = s.nulls is not None and s.rows is not None and s.nulls == s.rows
    no_nulls = s.nulls == 0
    nan_free = not is_float or s.nans == 0
    if op == LeafOp.IS_NULL:
        return Match.ALL if all_null else Match.NONE if no_nulls else Match.SOME
    if op == LeafOp.IS_NOT_NULL:
        return Match.NONE if all_null else Match.ALL if no_nulls else Match.SOME
    if all_null:
        return Match.NONE  # every other leaf needs a non-null value
    if op == LeafOp.IS_NAN:
        if not is_float or s.nans == 0:
            return Match.NONE
        return Match.ALL if s.all_nan and no_nulls else Match.SOME
    if op == LeafOp.IS_NOT_NAN:
        if s.all_nan:
            return Match.NONE
        return Match.ALL if no_nulls and nan_free else Match.SOME
    if op not in _COMPARISONS:
        return Match.SOME
    if s.all_nan:
        # NaN fails every comparison but != and NOT IN.
        if op in (LeafOp.NE, LeafOp.NOT_IN):
            return Match.ALL if no_nulls else Match.SOME
        return Match.NONE
    keys: list[Any]
    if op in (LeafOp.STARTS_WITH, LeafOp.NOT_STARTS_WITH):
        keys = list(pred.keys)
    else:
        keys = value_keys(pred)
    lo, hi = s.lo, s.hi
    sure = no_nulls and nan_free  # every row is a comparable value
    if op == LeafOp.EQ:
        (v,) = keys
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            return Match.NONE
        if s.exact and lo == v == hi and sure:
            return Match.ALL
        return Match.SOME
    if op == LeafOp.NE:
        (v,) = keys
        if s.exact and lo == v == hi and nan_free:
            return Match.NONE
        if ((lo is not None and v < lo) or (hi is not None and v > hi)) and no_nulls:
            return Match.ALL
        return Match.SOME
    if op in (LeafOp.LT, LeafOp.LE, LeafOp.GT, LeafOp.GE):
        (v,) = keys
        if op == LeafOp.LT:
            none = lo is not None and lo >= v
            all_ = hi is not None and hi < v
        elif op == LeafOp.LE:
            none = lo is not None and lo > v
            all_ = hi is not None and hi <= v
        elif op == LeafOp.GT:
            none = hi is not None and hi <= v
            all_ = lo is not None and lo > v
        else:
            none = hi is not None and hi < v
            all_ = lo is not None and lo >= v
        if none:
            return Match.NONE
        return Match.ALL if all_ and sure else Match.SOME
    if op in (LeafOp.IN, LeafOp.NOT_IN):
        within, one = _keys_within(pred, keys, lo, hi)
        if op == LeafOp.IN:
            if not within:
                return Match.NONE
            return Match.ALL if s.exact and lo == hi and one and sure else Match.SOME
        if s.exact and lo == hi and one and nan_free:
            return Match.NONE
        return Match.ALL if not within and no_nulls else Match.SOME
    # STARTS_WITH / NOT_STARTS_WITH on byte keys
    (p,) = keys
    if not isinstance(p, bytes) or (lo is not None and not isinstance(lo, bytes)):
        return Match.SOME
    upper = prefix_upper_bound(p)
    outside = (hi is not None and hi < p) or (upper is not None and lo is not None and lo >= upper)
    inside = bool(lo is not None and hi is not None and lo.startswith(p) and hi.startswith(p))
    if op == LeafOp.STARTS_WITH:
        if outside:
            return Match.NONE
        return Match.ALL if inside and no_nulls else Match.SOME
    if inside:
        return Match.NONE
    return Match.ALL if outside and no_nulls else Match.SOME


def value_keys(pred: BoundPredicate) -> list[Any]:
    """The leaf's values as pruning keys (:func:`value_key`), once per predicate."""
    keys: list[Any] | None = pred.memo.get("value_keys")
    if keys is None:
        vt = pred.value_type
        if vt.kind in (Kind.INT, Kind.UINT) and all(type(v) is int for v in pred.values):
            keys = list(pred.values)  # an int's key is itself
        else:
            keys = [value_key(vt, v) for v in pred.values]
        pred.memo["value_keys"] = keys
    return keys


def value_key_set(pred: BoundPredicate) -> frozenset[Any]:
    """:func:`value_keys` as a set, once per predicate."""
    got: frozenset[Any] | None = pred.memo.get("value_key_set")
    if got is None:
        got = pred.memo["value_key_set"] = frozenset(value_keys(pred))
    return got


def _keys_within(pred: BoundPredicate, keys: list[Any], lo: Any, hi: Any) -> tuple[bool, bool]:
    """Whether some key lies in [lo, hi] (None: unbounded), and whether ``lo`` is one
    of the keys: by bisection in the keys sorted once per predicate (a unit of a
    100,000-value IN list costs microseconds, not a pass over the list)."""
    ordered: list[Any] | None = pred.memo.get("sorted_value_keys")
    if ordered is None:
        try:
            ordered = sorted(set(keys))
        except TypeError:  # keys of mixed types: compared one by one
            ordered = []
        pred.memo["sorted_value_keys"] = ordered
    if not ordered and keys:
        within = any((lo is None or v >= lo) and (hi is None or v <= hi) for v in keys)
        return within, lo is not None and lo in keys
    start = 0 if lo is None else bisect.bisect_left(ordered, lo)
    stop = len(ordered) if hi is None else bisect.bisect_right(ordered, hi)
    one = lo is not None and start < len(ordered) and ordered[start] == lo
    return start < stop, one


@dataclass(frozen=True)
class StatisticsEvidence:
    """Column-chunk statistics (min/max, null and NaN counts) of a row group."""

    bounds: Bounds
    num_values: int | None
    # The bounds as keys, per value type: planning asks the same row group again for
    # every query, and decoding the keys is most of a match's cost.
    _summaries: dict[ValueType, _Summary] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # The last (value type, summary) asked for, found by identity: a dataset binds a
    # predicate once per schema, and hashing a ValueType costs more than the match.
    _last: list[tuple[ValueType, _Summary] | None] = field(
        default_factory=lambda: [None], init=False, repr=False, compare=False
    )

    def match(self, pred: BoundPredicate) -> Match:
        b = self.bounds
        vt = pred.value_type
        if pred.leaf.max_repetition_level > 0:
            return Match.SOME  # values of a list don't map one-to-one to rows
        last = self._last[0]
        if last is not None and last[0] is vt:
            s = last[1]
        else:
            got = self._summaries.get(vt)
            s = self._summaries[vt] = self._summary(vt) if got is None else got
            self._last[0] = (vt, s)  # one assignment: threads see a consistent pair
        if (
            s.lo is None
            and s.hi is None
            and not (b.all_null or b.all_nan)
            and pred.op
            not in (LeafOp.IS_NULL, LeafOp.IS_NOT_NULL, LeafOp.IS_NAN, LeafOp.IS_NOT_NAN)
        ):
            return Match.SOME
        return _summary_match(s, pred)

    def _summary(self, vt: ValueType) -> _Summary:
        b = self.bounds
        lo = hi = None
        if b.min is not None and not (isinstance(b.min, float) and math.isnan(b.min)):
            lo = _bound_key(vt, b.min, b.comparison)
        if b.max is not None and not (isinstance(b.max, float) and math.isnan(b.max)):
            hi = _bound_key(vt, b.max, b.comparison)
        exact = bool(b.min_exact and b.max_exact) or vt.kind not in _BYTES
        return _Summary(lo, hi, exact, b.null_count, self.num_values, b.nan_count, b.all_nan)


    def summary(self, vt: ValueType) -> _Summary:
        """The bounds as keys of ``vt``'s order, with the counts."""
        got = self._summaries.get(vt)
        if got is None:
            got = self._summaries[vt] = self._summary(vt)
        return got


def compared_columns(op: LeafOp, left: tuple[object, BoundPredicate],
                     right: tuple[object, BoundPredicate]) -> Match:
    """``a op b`` of two columns on one unit from each one's evidence (its leaf with
    it): NONE where the statistics' ranges rule every row out (``a < b`` where
    min(a) >= max(b)), or a column is all NULL there; SOME otherwise."""
    ev_a, pred_a = left
    ev_b, pred_b = right
    if not (isinstance(ev_a, StatisticsEvidence) and isinstance(ev_b, StatisticsEvidence)):
        return Match.SOME
    a, b = ev_a.summary(pred_a.value_type), ev_b.summary(pred_b.value_type)
    for s in (a, b):
        if s.rows is not None and s.nulls is not None and s.rows and s.nulls >= s.rows:
            return Match.NONE  # a comparison with NULL is never TRUE
    if a.lo is None or a.hi is None or b.lo is None or b.hi is None:
        return Match.SOME
    ruled_out = {
        LeafOp.LT: a.lo >= b.hi, LeafOp.LE: a.lo > b.hi, LeafOp.GT: a.hi <= b.lo,
        LeafOp.GE: a.hi < b.lo, LeafOp.EQ: a.hi < b.lo or b.hi < a.lo,
    }.get(op, False)
    return Match.NONE if ruled_out else Match.SOME


def _bound_key(vt: ValueType, value: Any, comparison: Comparison | None) -> Any:
    if vt.kind in _FLOATS:
        return float_key(value)
    return vt.sort_key(value)


@dataclass(frozen=True)
class ConstantEvidence:
    """A unit where the column has one known value (a hive partition value)."""

    value: Any  # in the column's domain; None for NULL

    def match(self, pred: BoundPredicate) -> Match:
        vt = pred.value_type
        if self.value is None:
            s = _Summary(None, None, True, 1, 1, 0, False)
        else:
            k = value_key(vt, self.value)
            nan = isinstance(self.value, float) and math.isnan(self.value)
            s = _Summary(None if nan else k, None if nan else k, True, 0, 1, 1 if nan else 0, nan)
        if pred.op in (LeafOp.STARTS_WITH, LeafOp.NOT_STARTS_WITH) and self.value is not None:
            raw = self.value.encode() if isinstance(self.value, str) else self.value
            s = _Summary(raw, raw, True, 0, 1, 0, False)
        if pred.op in PATTERNS:
            if not isinstance(self.value, str):
                return Match.NONE if self.value is None else Match.SOME
            return Match.ALL if pattern_values([self.value], pred)[0] else Match.NONE
        return _summary_match(s, pred)


class DictionaryEvidence:
    """The full set of values of a chunk whose data pages are all dictionary-encoded.

    Entries stay PLAIN bytes, in an Arrow array (``plain.plain_entries``: no Python
    object per entry, so a 30,000-entry dictionary costs its bytes, not ~3 MiB of
    objects): ``=``, ``IN`` and prefixes compare the literal's PLAIN encoding with
    them in one pyarrow kernel; INT32/INT64/FLOAT/DOUBLE entries are compared as one
    numpy array (ranges by its min and max, floats' equalities by ``isin``); other
    ranges decode the entries to Python keys (once).
    """

    def __init__(
        self, vt: ValueType, entries: pa.Array | Sequence[bytes], null_count: int | None,
        num_values: int | None
    ) -> None:
        self.vt = vt
        self.entries = (entries if isinstance(entries, pa.Array)
                        else pa.array(list(entries), pa.binary()))
        self.null_count = null_count
        self.num_values = num_values
        self._raw: frozenset[bytes] | None = None
        self._keys: tuple[frozenset[Any], bool] | None = None
        self._numbers: tuple[np.ndarray, bool] | None = None
        self._numbers_built = False
        # The masks of the last few literal sets: a plan asks the same one at two
        # levels, and the scan takes the matching entries from it (``hits``).
        self._masks: dict[_Plain, pa.BooleanArray] = {}

    @property
    def raw(self) -> frozenset[bytes]:
        """The entries' PLAIN bytes as a set (built on first use)."""
        if self._raw is None:
            self._raw = frozenset(self.entries.to_pylist())
        return self._raw

    @property
    def nbytes(self) -> int:
        return int(self.entries.nbytes)

    def _decoded(self) -> tuple[frozenset[Any], bool]:
        if self._keys is None:
            self._keys = dictionary_keys(self.vt, list(self.raw))
        return self._keys

    def _numeric(self) -> tuple[np.ndarray, bool] | None:
        """Signed integer or IEEE float entries as numpy values without their NaNs, and
        whether one was NaN: compared in numpy, where decoding each entry to a Python
        key costs ~0.5 us (a 500-entry dictionary's range check took 0.3 ms). None
        for other types."""
        if not self._numbers_built:
            self._numbers_built = True
            dtype: np.dtype[Any] | None = _NUMERIC_DTYPES.get((self.vt.kind, self.vt.physical))
            values = _plain_values(self.entries, dtype) if dtype is not None else None
            if values is not None:
                nan = np.isnan(values) if values.dtype.kind == "f" else None
                if nan is not None and nan.any():
                    self._numbers = (values[~nan], True)
                else:
                    self._numbers = (values, False)
        return self._numbers

    def _numeric_match(self, op: LeafOp, pred: BoundPredicate) -> tuple[bool, bool] | None:
        """(some entry satisfies, every entry does) for a comparison or an (in)equality
        on numeric entries, NaN entries counted as satisfying none; else None."""
        nums = self._numeric()
        if nums is None:
            return None
        values, _ = nums
        keys = value_keys(pred)
        if not values.size:
            return False, True
        if op in (LeafOp.EQ, LeafOp.IN, LeafOp.NE, LeafOp.NOT_IN):
            # Python compares, not numpy: a literal need not fit the entries' dtype.
            wanted = value_key_set(pred)
            found = {v for v in np.unique(values).tolist() if v in wanted}
            inside = np.isin(values, np.array(sorted(found), dtype=values.dtype))
            return bool(inside.any()), bool(inside.all())
        (k,) = keys
        lo, hi = values.min().item(), values.max().item()
        if op == LeafOp.LT:
            return lo < k, hi < k
        if op == LeafOp.LE:
            return lo <= k, hi <= k
        if op == LeafOp.GT:
            return hi > k, lo > k
        if op == LeafOp.GE:
            return hi >= k, lo >= k
        return None

    def _has_nan(self) -> bool:
        nums = self._numeric()
        return nums[1] if nums is not None else self._decoded()[1]

    def _wanted_raw(self, pred: BoundPredicate) -> _Plain | None:
        """The literals' PLAIN bytes, when bytes equality is value equality."""
        if self.vt.kind in _FLOATS or self.vt.kind == Kind.DECIMAL:
            return None  # -0.0/+0.0 and decimal scales: equal values, different bytes
        return plain_literals(pred, self.vt)

    def _mask(self, wanted: _Plain) -> pa.BooleanArray | None:
        """Which entries are one of ``wanted``; None when none can be (no literal of
        the entries' width)."""
        t = self.entries.type
        width = t.byte_width if pa.types.is_fixed_size_binary(t) else None
        kept = wanted.of_width(width)
        if not kept:
            return None
        mask = self._masks.get(kept)
        if mask is None:
            words = kept.words(width) if len(kept) > _WORDS_FROM else None
            entries = None if words is None else _plain_values(self.entries, words.dtype)
            if len(kept) == 1:  # a comparison each, no hashing (is_in hashes every entry)
                mask = pc.equal(self.entries, bytes_array(kept.raw, t)[0])
            elif words is not None and entries is not None:
                # 4- or 8-byte entries against a long list: equal bytes are equal words,
                # searched in the list's words sorted once (is_in would hash the whole
                # list for every dictionary).
                at = np.minimum(np.searchsorted(words, entries), words.size - 1)
                mask = bool_array(words[at] == entries)  # pa.array would import pandas
            else:
                mask = pc.is_in(self.entries, value_set=kept.array(t))
            if len(self._masks) >= _MASKS_KEPT:
                self._masks.clear()
            self._masks[kept] = mask
        return mask

    def _among(self, wanted: _Plain) -> tuple[bool, bool]:
        """Whether some entry, and whether every entry, is one of ``wanted``."""
        mask = self._mask(wanted)
        if mask is None:
            return False, len(self.entries) == 0
        hits = mask.true_count  # no kernel call: two would give up the GIL twice
        return hits > 0, hits == len(self.entries)

    def can_hit(self, pred: BoundPredicate) -> bool:
        """Whether :meth:`hits` gives positions for ``pred`` (not None)."""
        return (pred.op in (LeafOp.EQ, LeafOp.IN) and pred.leaf.max_repetition_level == 0
                and self._wanted_raw(pred) is not None)

    def hits(self, pred: BoundPredicate) -> np.ndarray | None:
        """Positions of the entries ``pred`` (``=`` or ``IN``) holds for, where bytes
        equality is value equality; else None."""
        if pred.op not in (LeafOp.EQ, LeafOp.IN) or pred.leaf.max_repetition_level > 0:
            return None
        wanted = self._wanted_raw(pred)
        if wanted is None:
            return None
        mask = self._mask(wanted)
        if mask is None:
            return np.zeros(0, dtype=np.intp)
        return true_positions(mask).astype(np.intp, copy=False)

    def _prefixed(self, prefix: bytes) -> tuple[bool, bool]:
        """Whether some entry, and whether every entry, starts with ``prefix``."""
        try:
            pattern = prefix.decode()
            mask = pc.starts_with(self.entries, pattern=pattern)
        except (UnicodeDecodeError, pa.ArrowException):
            starts = sum(1 for v in self.raw if v.startswith(prefix))
            return starts > 0, starts == len(self.raw)
        return bool(pc.any(mask).as_py()), bool(pc.all(mask).as_py())

    def _patterned(self, pred: BoundPredicate) -> tuple[bool, bool] | None:
        """Whether some entry, and whether every entry, satisfies the pattern leaf
        (None: entries that are not UTF-8)."""
        try:
            return pattern_values(self.entries.cast(pa.string()), pred)
        except pa.ArrowException:
            return None

    def match(self, pred: BoundPredicate) -> Match:
        op = pred.op
        vt = pred.value_type
        if pred.leaf.max_repetition_level > 0:
            return Match.SOME
        no_nulls = self.null_count == 0
        if op in (LeafOp.IS_NULL, LeafOp.IS_NOT_NULL, LeafOp.IS_NAN, LeafOp.IS_NOT_NAN):
            if op == LeafOp.IS_NAN and vt.kind in _FLOATS:
                return Match.NONE if not self._decoded()[1] else Match.SOME
            return Match.SOME
        if len(self.entries) == 0:
            return Match.SOME
        # Entries may be unused by the pages, so "some entry matches" only means SOME;
        # "every entry matches" is ALL when there are no nulls.
        if op in (LeafOp.EQ, LeafOp.IN, LeafOp.NE, LeafOp.NOT_IN):
            wanted_raw = self._wanted_raw(pred)
            numeric = None if wanted_raw is not None else self._numeric_match(op, pred)
            if wanted_raw is not None:
                some, all_in = self._among(wanted_raw)
                has_nan = False
            elif numeric is not None:
                (some, all_in), has_nan = numeric, self._has_nan()
            else:
                values, has_nan = self._decoded()
                hits = len(values & value_key_set(pred))
                some, all_in = hits > 0, hits == len(values)
            if op in (LeafOp.EQ, LeafOp.IN):
                hit, every = some, all_in and not has_nan
            else:
                hit, every = has_nan or not all_in, not some
        elif op in (LeafOp.STARTS_WITH, LeafOp.NOT_STARTS_WITH):
            (p,) = pred.keys
            if not isinstance(p, bytes) or vt.kind not in _BYTES:
                return Match.SOME
            some, all_in = self._prefixed(p)
            if op == LeafOp.STARTS_WITH:
                hit, every = some, all_in
            else:
                hit, every = not all_in, not some
        elif op in PATTERNS:
            found = self._patterned(pred) if vt.kind == Kind.STRING else None
            if found is None:
                return Match.SOME
            hit, every = found
        elif (numeric := self._numeric_match(op, pred)) is not None:
            hit, every = numeric[0], numeric[1] and not self._has_nan()
        else:
            values, has_nan = self._decoded()
            (k,) = [value_key(vt, v) for v in pred.values]
            if op == LeafOp.LT:
                sat = [v < k for v in values]
            elif op == LeafOp.LE:
                sat = [v <= k for v in values]
            elif op == LeafOp.GT:
                sat = [v > k for v in values]
            else:
                sat = [v >= k for v in values]
            hit = any(sat)
            every = all(sat) and not has_nan
        if not hit:
            return Match.NONE
        return Match.ALL if every and no_nulls else Match.SOME


class _Plain:
    """The distinct PLAIN encodings of a leaf's literals, sorted; hashed once (a
    dictionary keeps its masks by them) and built into Arrow arrays once per type."""

    __slots__ = ("_arrays", "_hash", "_widths", "raw")

    def __init__(self, raw: tuple[bytes, ...]) -> None:
        self.raw = raw
        self._hash = hash(raw)
        self._arrays: dict[Any, Any] = {}  # Arrow arrays by type, words by dtype
        self._widths: dict[int | None, _Plain] = {}

    def __len__(self) -> int:
        return len(self.raw)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, _Plain) and self._hash == other._hash
                                 and self.raw == other.raw)

    def of_width(self, width: int | None) -> _Plain:
        """Those of ``width`` bytes (None: all)."""
        if width is None:
            return self
        got = self._widths.get(width)
        if got is None:
            got = self._widths[width] = _Plain(tuple(w for w in self.raw if len(w) == width))
        return got

    def words(self, width: int | None) -> np.ndarray | None:
        """The encodings (all ``width`` bytes: 4 or 8) as sorted unsigned words."""
        if width not in (4, 8):
            return None
        dtype: np.dtype[Any] = np.dtype(f"<u{width}")
        got = self._arrays.get(dtype)
        if got is None:
            got = self._arrays[dtype] = np.sort(np.frombuffer(b"".join(self.raw), dtype=dtype))
        return got

    def array(self, t: pa.DataType) -> pa.Array:
        got = self._arrays.get(t)
        if got is None:
            got = self._arrays[t] = bytes_array(self.raw, t)
        return got


_NO_PLAIN = _Plain(())  # by identity: "some literal has no single PLAIN encoding"


def plain_literals(pred: BoundPredicate, vt: ValueType) -> _Plain | None:
    """The PLAIN bytes of the leaf's literals in ``vt``, once per predicate and type;
    None when one has none."""
    key = ("plain", vt)
    got: _Plain | None = pred.memo.get(key)
    if got is None:
        packed = _packed_ints(vt, pred.values)
        if packed is not None:
            got = _Plain(tuple(sorted(set(packed))))
        else:
            out = set()
            for v in pred.values:
                raw = encode_plain(vt, v)
                if raw is None:
                    got = _NO_PLAIN
                    break
                out.add(raw)
            else:
                got = _Plain(tuple(sorted(out)))
        pred.memo[key] = got
    return None if got is _NO_PLAIN else got


_INT_PLAIN: dict[tuple[Kind, int | None], str] = {(Kind.INT, PhysicalType.INT32): "<i4", (Kind.INT, PhysicalType.INT64): "<i8",
              (Kind.UINT, PhysicalType.INT32): "<u4", (Kind.UINT, PhysicalType.INT64): "<u8"}


def _packed_ints(vt: ValueType, values: Sequence[Any]) -> list[bytes] | None:
    """``encode_plain`` of Python ints on an integer column, packed by numpy at once;
    None for other values (or one the width cannot hold: encoded one by one)."""
    dtype = _INT_PLAIN.get((vt.kind, vt.physical))
    if dtype is None or not values or not all(type(v) is int for v in values):
        return None
    try:
        raw = np.array(values, dtype=dtype).tobytes()
    except (OverflowError, ValueError):
        return None
    w = int(dtype[-1])
    return [raw[i:i + w] for i in range(0, len(raw), w)]


@dataclass(frozen=True)
class BloomEvidence:
    """A split-block Bloom filter: can only say NONE, for = and IN."""

    bloom: BloomFilter | BloomProbe

    def match(self, pred: BoundPredicate) -> Match:
        hashes = _hash_tuple(pred)
        if hashes is None:
            return Match.SOME
        if len(hashes) > 1 and isinstance(self.bloom, BloomFilter):
            # The whole filter in memory: every hash looked up at once.
            found = self.bloom.might_contain_any(bloom_hash_array(pred, hashes))
            return Match.SOME if found else Match.NONE
        for h in hashes:
            if self.bloom.might_contain_hash(h):
                return Match.SOME
        return Match.NONE


def bloom_hash_array(pred: BoundPredicate, hashes: Sequence[int]) -> np.ndarray:
    """``hashes`` as a uint64 array, once per predicate."""
    got: np.ndarray | None = pred.memo.get("bloom_hash_array")
    if got is None or got.size != len(hashes):
        got = pred.memo["bloom_hash_array"] = np.array(hashes, dtype=np.uint64)
    return got


def bloom_hashes(pred: BoundPredicate) -> list[int] | None:
    """The Bloom-filter hashes of an ``=``/``IN`` leaf's values; None when a Bloom
    filter cannot answer it (another operator, repeated leaf, a value without a
    PLAIN encoding, a float zero)."""
    got = _hash_tuple(pred)
    return None if got is None else list(got)


def _hash_tuple(pred: BoundPredicate) -> tuple[int, ...] | None:
    if pred.op not in (LeafOp.EQ, LeafOp.IN):
        return None
    if pred.leaf.max_repetition_level > 0:
        return None
    mine: tuple[int, ...] | None = pred.memo.get("bloom_hashes")
    if mine is not None:  # this predicate's, found without hashing its values again
        return None if mine is _NO_HASHES else mine
    vt = pred.value_type
    # Asked per unit and per filter while planning: the hashes of a literal list are
    # kept per predicate and across predicates (a few, bounded; a dataset binds once
    # per schema); an unhashable literal is hashed every time.
    try:
        # Types too: 1, 1.0 and True are equal keys but not always equal bytes.
        key: Any = (vt, tuple(map(type, pred.values)), pred.values)
        known = _HASHES.get(key)
    except TypeError:
        key, known = None, None
    if known is None:
        found = _bloom_hashes(vt, pred.values)
        known = _NO_HASHES if found is None else tuple(found)
        if key is not None:
            if len(_HASHES) >= _HASHES_KEPT:
                with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                    del _HASHES[next(iter(_HASHES))]
            _HASHES[key] = known
    pred.memo["bloom_hashes"] = known
    return None if known is _NO_HASHES else known


_HASHES: dict[Any, tuple[int, ...]] = {}
_HASHES_KEPT = 256
_NO_HASHES: tuple[int, ...] = (-1,)  # by identity: "no Bloom filter can answer"


def _bloom_hashes(vt: ValueType, values: Sequence[Any]) -> list[int] | None:
    out = []
    for v in values:
        raw = encode_plain(vt, v)
        if raw is None:
            return None
        if vt.kind in _FLOATS and isinstance(v, float) and v == 0.0:
            return None  # -0.0 and +0.0 hash differently but compare equal
        out.append(xxhash64(raw))
    return out


def _plain_values(entries: pa.Array, dtype: np.dtype[Any]) -> np.ndarray | None:
    """Fixed-width entries (``plain.plain_entries``: a view of the page) read as
    ``dtype``, no copy; None for entries of another width or type."""
    t = entries.type
    if not pa.types.is_fixed_size_binary(t) or t.byte_width != dtype.itemsize:
        return None
    if not len(entries) or entries.null_count:
        return None
    return np.frombuffer(entries.buffers()[1], dtype=dtype, count=len(entries),
                         offset=entries.offset * dtype.itemsize)


def dictionary_keys(vt: ValueType, raw_values: Sequence[bytes]) -> tuple[frozenset[Any], bool]:
    """Pruning keys of PLAIN dictionary entries, and whether one of them is NaN."""
    keys = set()
    has_nan = False
    for raw in raw_values:
        v = vt.decode(raw)
        if isinstance(v, float) and math.isnan(v):
            has_nan = True
            continue
        keys.add(value_key(vt, v))
    return frozenset(keys), has_nan


def leaf_order_usable(pred: BoundPredicate) -> bool:
    """Whether this leaf's column has any usable order at all (else only counts help)."""
    return bound_order(pred.leaf).usable
