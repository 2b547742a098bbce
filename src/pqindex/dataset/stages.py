"""The file-level stages of planning a dataset, each over all files at once.

Planning runs as stages, each a function of the previous stage's output::

    sources        Source.facts(): which files, and what is known of them unopened
    partitions     partition_stage: hive values rule files out          (no I/O)
    statistics     statistics_stage: per-file statistics rule files out (no I/O)
    embedded       embedded_stage: file-level summaries and whatever the
                   vectorized pass could not decide, asked per file     (no I/O)
    row groups     plan.planner.plan_file over each kept file's footer  (tail wave)
    pages          plan.planner (ColumnIndex / OffsetIndex)             (index wave)

The first three are vectorized: each leaf of the bound predicate becomes one Arrow
kernel call over the files' columns (DataFusion's ``PruningStatistics`` is the
model), and AND / OR combine the "no row can match" masks. The rules are
``indexes.evidence``'s, applied to columns: unknown means keep, and where a leaf has
no vectorized form (LIKE, a long IN list, a decimal column) the leaf keeps every
file and the embedded stage asks that file's own evidence, so the outcome is the
per-file outcome exactly (tests/test_stages.py compares them on random manifests).
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from pqindex.dataset.partition_kinds import HIVE_KINDS
from pqindex.dataset.sources import (
    ZERO,
    ColumnStatistics,
    FileFacts,
    bool_array,
    int64_array,
    ints_of,
    key_array,
    key_scalar,
    key_type,
    mask_of,
    partition_column,
)
from pqindex.expr.bind import BoundExpr, BoundPredicate, BoundTrue, fold_bound, has_condition
from pqindex.format.column_index import prefix_upper_bound
from pqindex.format.match import LeafOp
from pqindex.format.value_type import Kind
from pqindex.indexes.evidence import value_key

__all__ = [
    "FileSelection",
    "embedded_stage",
    "every_row_stage",
    "file_stages",
    "leaf_every_row",
    "partition_stage",
    "partition_statistics",
    "ruled_out",
    "statistics_stage",
]

Mask = npt.NDArray[np.bool_]
# IN lists longer than this are left to each file's evidence (one kernel per value).
MAX_VECTOR_IN = 64
_FLOATS = frozenset({Kind.FLOAT, Kind.DOUBLE, Kind.FLOAT16})
_NULL_OPS = frozenset({LeafOp.IS_NULL, LeafOp.IS_NOT_NULL})
_ORDERED = {LeafOp.LT: (pc.greater_equal, "min"), LeafOp.LE: (pc.greater, "min"),
            LeafOp.GT: (pc.less_equal, "max"), LeafOp.GE: (pc.less, "max")}


@dataclass(frozen=True)
class FileSelection:
    """Per file of a :class:`FileFacts` (by row), whether a stage ruled it out and by
    which stage; ``undecided``: files whose outcome needs their own evidence."""

    ruled_out: Mask
    decided_by: npt.NDArray[np.object_]  # per file: the stage (its reason), or None
    undecided: Mask

    @staticmethod
    def everything(n: int) -> FileSelection:
        return FileSelection(np.zeros(n, np.bool_), np.full(n, None, object),
                             np.zeros(n, np.bool_))

    def then(self, stage: str, out: Mask, undecided: Mask | None = None) -> FileSelection:
        """This selection with ``out`` (files ``stage`` ruled out) added."""
        new = out & ~self.ruled_out
        by = self.decided_by
        if new.any():
            by = by.copy()
            by[new] = stage
        und = self.undecided if undecided is None else (self.undecided | undecided)
        return FileSelection(self.ruled_out | out, by, und & ~(self.ruled_out | out))

    @property
    def kept(self) -> Mask:
        return ~self.ruled_out


def _bool(a: Any, n: int) -> Mask:
    """An Arrow boolean result as a numpy mask, null (unknown) as False."""
    if isinstance(a, (pa.ChunkedArray, pa.Array)):
        return mask_of(a)
    return np.full(n, bool(a.as_py()) if a.is_valid else False, np.bool_)


def _sorted_keys(pred: BoundPredicate, keys: list[Any]) -> list[Any] | None:
    """The distinct keys in order, once per predicate; None when they do not order."""
    got = pred.memo.get("sorted_value_keys")
    if got is None:
        try:
            got = sorted(set(keys))
        except TypeError:
            got = []
        pred.memo["sorted_value_keys"] = got
    return got or None


def leaf_ruled_out(pred: BoundPredicate, s: ColumnStatistics) -> Mask | None:
    """Files no row of which can satisfy ``pred`` given ``s`` (``_summary_match``'s
    NONE cases on columns); None when the leaf has no vectorized form."""
    n = len(s.values)
    vt = pred.value_type
    op = pred.op
    arrow = key_type(vt)
    if arrow is None or pred.leaf.max_repetition_level > 0:
        return None
    known = _bool(pc.is_valid(s.values), n)
    all_null = _bool(pc.equal(s.nulls, s.values), n) & known
    if op == LeafOp.IS_NULL:
        return _bool(pc.equal(s.nulls, ZERO), n) & known
    if op == LeafOp.IS_NOT_NULL:
        return all_null
    is_float = vt.kind in _FLOATS
    all_nan = _bool(s.all_nan, n) & known
    if op == LeafOp.IS_NAN:
        nan_free = np.ones(n, np.bool_) if not is_float else _bool(pc.equal(s.nans, ZERO), n)
        return all_null | (nan_free & known)
    if op == LeafOp.IS_NOT_NAN:
        return all_null | all_nan
    if op == LeafOp.STARTS_WITH:
        (p,) = pred.keys
        if not isinstance(p, bytes) or arrow != pa.binary():
            return None
        out = _bool(pc.less(s.max, key_scalar(p, pa.binary())), n)
        upper = prefix_upper_bound(p)
        if upper is not None:
            out |= _bool(pc.greater_equal(s.min, key_scalar(upper, pa.binary())), n)
        return all_null | all_nan | out
    if op not in (LeafOp.EQ, LeafOp.NE, LeafOp.IN, LeafOp.NOT_IN, *_ORDERED):
        return None
    keys = pred.memo.get("value_keys")
    if keys is None:
        keys = pred.memo["value_keys"] = [value_key(vt, v) for v in pred.values]
    if op == LeafOp.IN and len(keys) > MAX_VECTOR_IN:
        # A long list: each file's [min, max] searched in the keys sorted once (a
        # kernel call per key would cost O(keys) passes over the files).
        ordered = _sorted_keys(pred, keys)
        if ordered is None or key_array(ordered[:1], arrow) is None:
            return None
        k = len(ordered)
        first = np.fromiter((0 if lo is None else bisect.bisect_left(ordered, lo)
                             for lo in s.min.to_pylist()), np.int64, n)
        stop = np.fromiter((k if hi is None else bisect.bisect_right(ordered, hi)
                            for hi in s.max.to_pylist()), np.int64, n)
        return all_null | all_nan | (~(first < stop) & known)
    value_set = key_array(keys, arrow)
    if value_set is None:
        return None
    scalars = list(value_set)
    nan_free = np.ones(n, np.bool_) if not is_float else _bool(pc.equal(s.nans, ZERO), n)
    if op in (LeafOp.NE, LeafOp.NOT_IN):
        single = (_bool(s.exact, n) & _bool(pc.equal(s.min, s.max), n) & nan_free)
        if op == LeafOp.NE:
            hit = _bool(pc.equal(s.min, scalars[0]), n)
        else:
            hit = _bool(pc.is_in(s.min, value_set=value_set), n)
        return all_null | (~all_nan & single & hit)
    if op == LeafOp.EQ:
        v = scalars[0]
        out = _bool(pc.greater(s.min, v), n) | _bool(pc.less(s.max, v), n)
    elif op == LeafOp.IN:
        within = np.zeros(n, np.bool_)
        for v in scalars:
            lo_ok = pc.or_kleene(pc.is_null(s.min), pc.less_equal(s.min, v))
            hi_ok = pc.or_kleene(pc.is_null(s.max), pc.greater_equal(s.max, v))
            within |= _bool(pc.and_kleene(lo_ok, hi_ok), n)
        out = ~within & known
    else:
        cmp, side = _ORDERED[op]
        out = _bool(cmp(getattr(s, side), scalars[0]), n)
    return all_null | all_nan | out


def ruled_out(bound: BoundExpr, n: int,
              leaf: Callable[[BoundPredicate], Mask | None]) -> tuple[Mask, bool]:
    """Files no row of which can satisfy ``bound`` (AND: either side rules a file out,
    OR: both must), from a mask per leaf; and whether some leaf had none (it kept
    every file: the outcome is then only a lower bound of what each file's evidence
    rules out)."""
    residual = False

    def one(pred: BoundPredicate) -> Mask:
        nonlocal residual
        got = leaf(pred)
        if got is None:
            residual = True
            return np.zeros(n, np.bool_)
        return got

    out = fold_bound(bound, leaf=one, true=np.zeros(n, np.bool_), false=np.ones(n, np.bool_),
                     and_=np.logical_or, or_=np.logical_and,
                     and_done=_never, or_done=_never,
                     unknown=np.zeros(n, np.bool_))  # a condition on an expression
    return out, residual or has_condition(bound)


def _never(_m: Mask) -> bool:
    return False


def _partition_key(kind: str, raw: str | None) -> Any:
    if raw is None or raw == "__HIVE_DEFAULT_PARTITION__":
        return None
    if kind == "int64":
        return int(raw)
    if kind == "date32":
        return (dt.date.fromisoformat(raw) - dt.date(1970, 1, 1)).days
    return raw.encode("utf-8")


def partition_statistics(facts: FileFacts, key: str, kind: str) -> ColumnStatistics:
    """Hive key ``key``'s values (typed as ``kind``: discovery's int64, date32 or
    string) as statistics: one known value per file, or a null one."""
    raw = facts.files.column(partition_column(key)).to_pylist()
    keys = [_partition_key(kind, r) for r in raw]
    arrow = pa.binary() if kind not in ("int64", "date32") else pa.int64()
    arr = key_array(keys, arrow)
    if arr is None:  # not expected (discovery typed the values): pyarrow's conversion
        arr = pa.array(keys, arrow)
    nulls = pc.cast(arr.is_null(), pa.int64())
    n = len(keys)
    return ColumnStatistics(arr, arr, nulls, pa.nulls(n, pa.int64()),
                            int64_array(np.ones(n, np.int64)), bool_array(np.ones(n, np.bool_)),
                            bool_array(np.zeros(n, np.bool_)))


def _partition_leaf(facts: FileFacts, types: Mapping[str, str], n_leaves: int,
                    cache: dict[str, ColumnStatistics]
                    ) -> Callable[[BoundPredicate], Mask | None]:
    def leaf(pred: BoundPredicate) -> Mask | None:
        if pred.leaf.index < n_leaves:
            return np.zeros(facts.num_files, np.bool_)  # a file column: the statistics stage's
        name = pred.leaf.name
        if partition_column(name) not in facts.files.column_names or (
                types.get(name, "string") not in HIVE_KINDS):
            return None  # a table's typed kind: file by file (dataset/partition_kinds.py)
        if name not in cache:
            cache[name] = partition_statistics(facts, name, types.get(name, "string"))
        return leaf_ruled_out(pred, cache[name])
    return leaf


def partition_stage(facts: FileFacts, bound: BoundExpr, n_leaves: int,
                    types: Mapping[str, str], selection: FileSelection | None = None
                    ) -> FileSelection:
    """Files whose hive partition values rule them out. ``bound``: the predicate bound
    to a schema of ``n_leaves`` file leaves plus one leaf per partition column."""
    n = facts.num_files
    sel = selection or FileSelection.everything(n)
    if isinstance(bound, BoundTrue) or not types:
        return sel
    cache: dict[str, ColumnStatistics] = {}
    out, residual = ruled_out(bound, n, _partition_leaf(facts, types, n_leaves, cache))
    return sel.then("partition", out, np.ones(n, np.bool_) if residual else None)


def statistics_stage(facts: FileFacts, bind_schema: Callable[[int], BoundExpr | None],
                     types: Mapping[str, str], selection: FileSelection) -> FileSelection:
    """Files their per-file statistics (and partition values) rule out: per schema of
    the facts, the predicate bound once (``bind_schema``; None: not bindable there,
    the files are left undecided) and evaluated over that schema's files."""
    n = facts.num_files
    schema_col = facts.files.column("schema")
    if schema_col.null_count == n or not facts.schemas:
        return selection
    ids = ints_of(schema_col, -1)
    rows = facts.files.column("rows")
    empty = _bool(pc.equal(rows, ZERO), n)
    out = np.zeros(n, np.bool_)
    undecided = np.zeros(n, np.bool_)
    by_zero = np.zeros(n, np.bool_)
    present = ids[(ids >= 0) & selection.kept]
    # np.flatnonzero(bincount), not np.unique: that imports numpy.ma (~50 ms cold).
    for sid in np.flatnonzero(np.bincount(present)).tolist() if len(present) else []:
        where = np.flatnonzero((ids == sid) & selection.kept)
        bound = bind_schema(int(sid))
        if bound is None:
            undecided[where] = True
            continue
        by_zero[where] = empty[where]
        if isinstance(bound, BoundTrue):
            continue
        take = int64_array(where)
        n_leaves = len(facts.schemas[int(sid)].schema.leaves)
        part = _partition_leaf(facts, types, n_leaves, {})
        stats: dict[str, ColumnStatistics | None] = {}

        def leaf(pred: BoundPredicate, take: pa.Array = take, n_leaves: int = n_leaves,
                 part: Callable[[BoundPredicate], Mask | None] = part,
                 stats: dict[str, ColumnStatistics | None] = stats,
                 where: npt.NDArray[np.intp] = where) -> Mask | None:
            if pred.leaf.index >= n_leaves:
                got = part(pred)
                return None if got is None else got[where]
            name = pred.leaf.name
            if name not in stats:
                s = facts.statistics(name)
                # One schema over every file (a pipeline's lake): no copy by take.
                stats[name] = None if s is None else s if len(where) == n else s.take(take)
            s = stats[name]
            return None if s is None else leaf_ruled_out(pred, s)

        mask, residual = ruled_out(bound, len(where), leaf)
        out[where] = mask
        if residual or facts.summarized & {p.leaf.name for p in _leaves(bound)}:
            undecided[where] = ~mask
    sel = selection.then("manifest: the file has no rows", by_zero)
    return sel.then("manifest: no row of the file can match", out, undecided)


def leaf_every_row(pred: BoundPredicate, s: ColumnStatistics) -> Mask:
    """Files every row of which satisfies ``pred`` given ``s`` (``_summary_match``'s ALL
    cases of the leaves a lake's scans keep whole: =, !=, the orders, IS [NOT] NULL);
    False where it cannot tell. Shortened bounds still bound the values (a truncated
    min is at most the true one), so the orders hold without exact bounds."""
    n = len(s.values)
    vt = pred.value_type
    op = pred.op
    arrow = key_type(vt)
    none = np.zeros(n, np.bool_)
    if arrow is None or pred.leaf.max_repetition_level > 0:
        return none
    known = _bool(pc.is_valid(s.values), n)
    no_nulls = _bool(pc.equal(s.nulls, ZERO), n) & known
    if op == LeafOp.IS_NOT_NULL:
        return no_nulls
    if op == LeafOp.IS_NULL:
        return _bool(pc.equal(s.nulls, s.values), n) & known
    if op not in (LeafOp.EQ, LeafOp.NE, *_ORDERED):
        return none
    keys = pred.memo.get("value_keys")
    if keys is None:
        keys = pred.memo["value_keys"] = [value_key(vt, v) for v in pred.values]
    value_set = key_array(keys, arrow)
    if value_set is None:
        return none
    v = value_set[0]
    is_float = vt.kind in _FLOATS
    nan_free = (np.ones(n, np.bool_) if not is_float
                else _bool(pc.equal(s.nans, ZERO), n))
    not_nan = ~_bool(s.all_nan, n)
    all_null = _bool(pc.equal(s.nulls, s.values), n) & known
    if op == LeafOp.NE:
        # Every value outside [min, max] of v's side: the file holds no v.
        outside = _bool(pc.greater(s.min, v), n) | _bool(pc.less(s.max, v), n)
        return outside & no_nulls & ~all_null
    sure = no_nulls & nan_free & not_nan & ~all_null
    if op == LeafOp.EQ:
        single = (_bool(s.exact, n) & _bool(pc.equal(s.min, v), n)
                  & _bool(pc.equal(s.max, v), n))
        return single & sure
    side_ok = {LeafOp.LT: lambda: _bool(pc.less(s.max, v), n),
               LeafOp.LE: lambda: _bool(pc.less_equal(s.max, v), n),
               LeafOp.GT: lambda: _bool(pc.greater(s.min, v), n),
               LeafOp.GE: lambda: _bool(pc.greater_equal(s.min, v), n)}[op]()
    return side_ok & sure


def every_row_stage(facts: FileFacts, bind_schema: Callable[[int], BoundExpr | None],
                    kept: Mask) -> Mask:
    """Of the ``kept`` files, those every row of which satisfies the predicate by their
    statistics alone (per schema of the facts, bound once by ``bind_schema``): no
    deeper stage can rule out a row group or a page of them, so they are planned in
    bulk (``dataset/planning.py``). A leaf on a partition column, an expression or a
    leaf without a vectorized form counts as "cannot tell"."""
    n = facts.num_files
    out = np.zeros(n, np.bool_)
    schema_col = facts.files.column("schema")
    if schema_col.null_count == n or not facts.schemas:
        return out
    ids = ints_of(schema_col, -1)
    present = ids[(ids >= 0) & kept]
    for sid in np.flatnonzero(np.bincount(present)).tolist() if len(present) else []:
        where = np.flatnonzero((ids == sid) & kept)
        bound = bind_schema(int(sid))
        if bound is None:
            continue
        if isinstance(bound, BoundTrue):
            out[where] = True
            continue
        n_leaves = len(facts.schemas[int(sid)].schema.leaves)
        take = int64_array(where)
        stats: dict[str, ColumnStatistics | None] = {}
        m = len(where)

        def leaf(pred: BoundPredicate, take: pa.Array = take, n_leaves: int = n_leaves,
                 stats: dict[str, ColumnStatistics | None] = stats, m: int = m) -> Mask:
            if pred.leaf.index >= n_leaves:
                return np.zeros(m, np.bool_)
            name = pred.leaf.name
            if name not in stats:
                s = facts.statistics(name)
                stats[name] = None if s is None else s if m == n else s.take(take)
            s = stats[name]
            return np.zeros(m, np.bool_) if s is None else leaf_every_row(pred, s)

        out[where] = fold_bound(bound, leaf=leaf, true=np.ones(m, np.bool_),
                                false=np.zeros(m, np.bool_), and_=np.logical_and,
                                or_=np.logical_or, and_done=_never, or_done=_never,
                                unknown=np.zeros(m, np.bool_))
    return out


def _leaves(bound: BoundExpr) -> list[BoundPredicate]:
    from pqindex.plan.tree import leaves

    return leaves(bound)


def embedded_stage(facts: FileFacts, selection: FileSelection,
                   ask: Callable[[int], str | None]) -> FileSelection:
    """The undecided files asked one by one (``ask(row)``: why no row of that file can
    match, from its own statistics and embedded file-level summaries; or None)."""
    out = np.zeros(facts.num_files, np.bool_)
    reasons: dict[int, str] = {}
    for i in np.flatnonzero(selection.undecided & selection.kept).tolist():
        why = ask(i)
        if why is not None:
            out[i] = True
            reasons[i] = why
    sel = selection.then("embedded", out)
    by = sel.decided_by
    if reasons:
        by = by.copy()
        for i, why in reasons.items():
            by[i] = why
    return FileSelection(sel.ruled_out, by, np.zeros(facts.num_files, np.bool_))


def file_stages(facts: FileFacts, types: Mapping[str, str], *,
                partition_bound: BoundExpr, n_leaves: int,
                bind_schema: Callable[[int], BoundExpr | None] | None,
                ask_partition: Callable[[int], bool],
                ask_file: Callable[[int], str | None]) -> FileSelection:
    """The file-level stages in order: partitions, statistics (only when the facts
    have some: ``bind_schema`` given), embedded. ``partition_bound``: the predicate
    bound to the first schema (``n_leaves`` file leaves); ``ask_partition(row)`` /
    ``ask_file(row)``: one file's own answer where the vectorized pass left it
    undecided."""
    sel = FileSelection.everything(facts.num_files)
    if types and not isinstance(partition_bound, BoundTrue):
        sel = partition_stage(facts, partition_bound, n_leaves, types, sel)
        sel = embedded_stage(facts, sel,
                             lambda i: "partition" if ask_partition(i) else None)
    if bind_schema is not None:
        sel = statistics_stage(facts, bind_schema, types, sel)
        sel = embedded_stage(facts, sel, ask_file)
    return sel
