"""Planning the files of a dataset: bind once per schema, prune, plan on a pool.

``DatasetPlanner.plan_files`` is the body of ``Dataset._plan``: the first file (or the
manifest's stand-in for it) binds the predicate and gives the output fields;
partition values and the manifest rule files out without a request; every other
file is opened and planned by ``plan_file`` on the process's planning pool. Remote tails
travel in one wave (``io.objstore.start_tails``) and each file is planned as soon
as its own tail lands, while the others are still in flight: with a hook
(``on_planned``) a scan starts reading a kept file's data right away, so when the
last tail arrives nearly everything else is done.

Round trips are counted as the sequential waves a file's chain waited for (tail,
planning reads, data): waves of different pool threads overlap, so per phase the
busiest thread is the critical path (``WaveClock``).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from pqindex.dataset.discovery import DataFile
from pqindex.dataset.key_index import KEY_INDEX_SKIP, lookup_keys, lookup_table_keys
from pqindex.dataset.open_files import OpenFile
from pqindex.dataset.stages import every_row_stage, file_stages
from pqindex.errors import CorruptFileError, PqIndexError, UserInputError, located
from pqindex.expr.bind import BoundExpr, BoundTrue, absent_columns, bind, bound_leaves
from pqindex.expr.bind import columns as columns_of
from pqindex.expr.nodes import Expr
from pqindex.format.arrow_build import ints_of
from pqindex.format.file import ParquetFile
from pqindex.format.match import Match
from pqindex.indexes.evidence import ConstantEvidence
from pqindex.io.source import IOStats
from pqindex.plan.planner import FilePlan, plan_file, settled_by_statistics
from pqindex.plan.tree import evaluate
from pqindex.pools import python_slot
from pqindex.scan.report import ScanReport

if TYPE_CHECKING:
    from pqindex.dataset.dataset import Dataset

__all__ = ["BULK_MIN_FILES", "BusyClock", "DatasetPlanner", "Deferred", "OpenFile", "Planned",
           "Plans", "StageSkipped", "WaveClock", "count_pages", "gc_paused"]

T = TypeVar("T")
# One file's outcome: the file, its opened footer (None when never opened), its
# plan (None when partition values pruned it), the predicate bound to it.
Planned = tuple[DataFile, "OpenFile | None", FilePlan | None, BoundExpr | None]
# Called on a pool thread with a kept file's outcome and the scan's fields (None:
# every column) as soon as the file is planned.
# The key/value entry pyarrow keeps its schema in (part of a footer's Arrow schema).
_ARROW_SCHEMA = "ARROW:schema"
OnPlanned = Callable[[Planned, "list[str] | None"], None]


_gc_lock = threading.Lock()
_gc_pauses = 0  # scans planning many files right now
_gc_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while many footers are planned (scans of the
    process nest: it is back on when the last one ends, if it was on before). A wave
    of 1,000 footers allocates ~100k objects that live as long as the dataset: the
    collector traversed them (and the metadata cache) over and over, ~10% of the
    scan's CPU; reference counting still frees everything that is not a cycle."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


class WaveClock:
    """Waves of requests per pool thread. A thread waits for its waves one after
    another; threads wait side by side: the busiest thread is the critical path."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waves: dict[int, int] = {}

    def add(self, waves: int) -> None:
        me = threading.get_ident()
        with self._lock:
            self._waves[me] = self._waves.get(me, 0) + waves

    def critical(self) -> int:
        with self._lock:
            return max(self._waves.values(), default=0)


class BusyClock:
    """Seconds of planning per pool thread: threads plan side by side, so the busiest
    one is planning's critical path. A thread's other work in between (a scan reads a
    kept file's data on the thread that planned it) is not counted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[int, float] = {}

    def add(self, seconds: float) -> None:
        me = threading.get_ident()
        with self._lock:
            self._seconds[me] = self._seconds.get(me, 0.0) + seconds

    def critical(self, besides: int | None = None) -> float:
        """The busiest thread's seconds (``besides``: a thread left out)."""
        with self._lock:
            return max((v for k, v in self._seconds.items() if k != besides), default=0.0)


@dataclass(frozen=True)
class StageSkipped:
    """The files the file-level stages ruled out, in bulk: positions into ``chosen``
    and each one's reason. No per-file object is made unless :meth:`planned` is asked
    (explain and ``Dataset.plan`` list them; a scan never does)."""

    chosen: Sequence[DataFile]
    positions: npt.NDArray[np.intp]  # ascending
    reasons: npt.NDArray[np.object_]  # "partition" or the manifest's reason
    partition_values: Callable[[DataFile], dict[str, Any]] | None  # hive lakes only

    def planned(self) -> list[Planned]:
        out: list[Planned] = []
        for i, why in zip(self.positions.tolist(), self.reasons.tolist(), strict=True):
            df = self.chosen[i]
            if why == "partition":
                out.append((df, None, None, None))
            else:
                values = {} if self.partition_values is None else self.partition_values(df)
                out.append((df, None, FilePlan(df.path, 0, (), "manifest", why, values), None))
        return out

    def counts(self) -> dict[str, int]:
        """Files per ``ScanReport.files_skipped`` key."""
        n_partition = int(np.count_nonzero(self.reasons == "partition"))
        out = {"partition": n_partition} if n_partition else {}
        if len(self.reasons) > n_partition:
            out["manifest"] = len(self.reasons) - n_partition
        return out


# Fewer files than this every row of which matches are planned one by one, as others.
BULK_MIN_FILES = 1000


class Deferred:
    """The files planned in bulk: the manifest's statistics show that every row of
    each matches, so no stage below the file level can rule out a row group or a page
    of them, and their plans are made when first needed (a scan reading them, an
    entry of ``Dataset.plan`` asked for its access plan, explain) by one plan of just
    these files, footers and all. Until then none of their footers is read.
    ``positions``: into the plan's chosen files, ascending; ``rows``: their rows, by
    the manifest."""

    def __init__(self, chosen: Sequence[DataFile], positions: npt.NDArray[np.intp], rows: int,
                 plan: Callable[[Sequence[DataFile], OnPlanned | None], Plans]) -> None:
        self.chosen = chosen
        self.positions = positions
        self.rows = rows
        self._plan = plan
        self._lock = threading.Lock()
        self._done: Plans | None = None

    @property
    def files(self) -> list[DataFile]:
        return [self.chosen[i] for i in self.positions.tolist()]

    def plans(self, on_planned: OnPlanned | None = None) -> tuple[Plans, bool]:
        """The plan of these files (made once); and whether this call made it."""
        with self._lock:
            if self._done is not None:
                return self._done, False
            self._done = self._plan(self.files, on_planned)
            return self._done, True


@dataclass(frozen=True)
class Plans:
    files: list[Planned]  # the files the file-level stages kept, in order
    report: ScanReport
    fields: list[str]
    schema: pa.Schema
    page_units: list[tuple[ParquetFile, int, list[int]]]
    skipped: StageSkipped | None = None  # the others
    deferred: Deferred | None = None  # files planned in bulk, not in ``files`` yet

    def every_file(self, resolve: bool = True) -> list[Planned]:
        """Every chosen file's outcome in the dataset's order, the stage-skipped too;
        the bulk-planned files resolved (``resolve=False``: left out)."""
        if resolve and self.deferred is not None:
            return self.resolved().every_file()
        if self.skipped is None or not len(self.skipped.positions):
            return self.files
        positions = self.skipped.positions
        if self.deferred is not None:  # positions among the files left in
            positions = positions - np.searchsorted(self.deferred.positions, positions)
        out: list[Planned | None] = [None] * (len(self.files) + len(positions))
        for i, got in zip(positions.tolist(), self.skipped.planned(), strict=True):
            out[i] = got
        kept = iter(self.files)
        return [got if got is not None else next(kept) for got in out]

    def resolved(self, on_planned: OnPlanned | None = None) -> Plans:
        """These plans with the bulk-planned files planned (their footers read, on the
        planning pool; ``on_planned`` as for ``Dataset.make_plans``) and merged in, in
        order. The report is completed in place, once."""
        d = self.deferred
        if d is None:
            return self
        sub, made = d.plans(on_planned)
        n = len(d.chosen)
        mark = np.zeros(n, np.int8)  # 0: in files, 1: stage-skipped, 2: planned in bulk
        if self.skipped is not None:
            mark[self.skipped.positions] = 1
        mark[d.positions] = 2
        now, later = iter(self.files), iter(sub.every_file())
        files = [next(later) if m == 2 else next(now) for m in mark.tolist() if m != 1]
        rep = self.report
        if made:
            total, rows = rep.files_total, rep.rows_total
            rep.merge(sub.report)
            rep.files_total, rep.rows_total = total, rows - d.rows + sub.report.rows_total
        schema, fields = self.schema, self.fields
        if not sub.schema.equals(schema):
            from pqindex.dataset.schema import unify

            schema = unify([("plan", schema), ("bulk", sub.schema)])
            schema = pa.schema([schema.field(f) for f in fields if f in schema.names])
        return Plans(files, rep, fields, schema, self.page_units + sub.page_units,
                     self.skipped)


def _schema_key(pf: ParquetFile) -> tuple[Any, ...]:
    """What binding a predicate and building the Arrow schema read of a footer (like
    ``manifest.schema_stub``, compared instead of encoded)."""
    md = pf.metadata
    arrow = next((k.value for k in md.key_value_metadata or [] if k.key == _ARROW_SCHEMA),
                 None)
    return (md.version, md.schema, md.created_by, md.column_orders, arrow)


# Files planned by one pool task when their tails are not in flight.
_BATCH_FILES = 16


def _fill(done: Future[T], fn: Callable[[DataFile], T], df: DataFile) -> None:
    """``fn(df)`` into ``done``, unless it was cancelled."""
    if not done.set_running_or_notify_cancel():
        return
    try:
        done.set_result(fn(df))
    except BaseException as e:
        done.set_exception(e)


def _submit_or_cancel(pool: ThreadPoolExecutor, task: Callable[[], None],
                      futures: Sequence[Future[Any]]) -> None:
    try:
        pool.submit(task)
    except RuntimeError:  # the pool shut down (an earlier file failed)
        for f in futures:
            f.cancel()


def _struct_paths(schema: pa.Schema) -> list[str]:
    """The dotted paths of the fields inside struct columns (``s.b``): a predicate
    may name one that some files' structs lack."""
    out: list[str] = []
    todo = [(f.name, f.type) for f in schema]
    while todo:
        name, t = todo.pop()
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                child = t.field(i)
                out.append(f"{name}.{child.name}")
                todo.append((f"{name}.{child.name}", child.type))
    return out


class DictionaryUse:
    """Whether planning a small local file consults its dictionaries, learned during one
    plan. Such a file's row groups are read whole and filtered (``dataset._segments``)
    unless a level rules them out; a dictionary that never does only costs: its page
    read and compared, ~0.1 ms a row group of Python (a 1,000-file lake, ``s = 'v7'``
    present everywhere: 20-30% of the scan). After :data:`PROBE_ROW_GROUPS` checked
    row groups of which under :data:`MIN_PRUNED_SHARE` were ruled out, small files
    are planned without dictionaries, except one in :data:`RESAMPLE_FILES`, which
    keeps the share current. Only what is read changes, never which rows match."""

    PROBE_ROW_GROUPS = 64
    MIN_PRUNED_SHARE = 0.1
    RESAMPLE_FILES = 16

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.checked = 0  # row groups planned with their dictionaries and left to them
        self.pruned = 0  # of those, ruled out by a dictionary
        self.unchecked = 0  # row groups planned without their dictionaries
        self._files = 0

    def consult(self) -> bool:
        with self._lock:
            self._files += 1
            return (self.checked < self.PROBE_ROW_GROUPS
                    or self.pruned >= self.MIN_PRUNED_SHARE * self.checked
                    or self._files % self.RESAMPLE_FILES == 0)

    def record(self, plan: FilePlan, consulted: bool) -> None:
        # Row groups an earlier level decided never reached the dictionaries.
        left = [rg for rg in plan.row_groups
                if not rg.skipped or rg.decided_by == "dictionary"]
        with self._lock:
            if consulted:
                self.checked += len(left)
                self.pruned += sum(rg.decided_by == "dictionary" for rg in left)
            else:
                self.unchecked += len(left)


def count_pages(units: Sequence[tuple[ParquetFile, int, list[int]]]) -> int:
    """Data pages of the involved chunks, as far as the metadata read so far tells."""
    return sum(pf.data_page_count(rg, c) for pf, rg, cols in units for c in cols)


class DatasetPlanner:
    """The planning of a dataset's files: the stages from the sources down to each
    kept file's ``plan_file`` (``Plans``). It reads the dataset it is given through
    its public API (files, schemas, open files; it keeps no reference to it: a
    dropped dataset goes by reference counting) and keeps the distinct footer
    schemas it has bound predicates for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shapes: list[tuple[Any, ...]] = []  # distinct footer schemas

    def shape_of(self, pf: ParquetFile) -> int:
        """The number of ``pf``'s footer schema among the distinct ones of the dataset
        (kept in ``pf.derived``: a warm scan finds it without comparing)."""
        got: int | None = pf.derived.get("schema_shape")
        if got is not None:
            return got
        key = _schema_key(pf)
        with self._lock:
            shapes = self._shapes
            got = next((i for i, k in enumerate(shapes) if k == key), None)
            if got is None:
                shapes.append(key)
                got = len(shapes) - 1
        pf.derived["schema_shape"] = got
        return got

    def as_landed(self, ds: Dataset, pool: ThreadPoolExecutor, fn: Callable[[DataFile], T],
                   files: Sequence[DataFile]) -> dict[str, Future[T]]:
        """``fn(df)`` for each file on the pool, each task submitted once the file's tail
        is in (files outside a wave at once): a pool thread only wakes for a file it can
        plan, and the pool grows past its busy threads only (a task per waiting file kept
        up to 32 threads switching on the GIL through a wave of 1,000 tails)."""
        out: dict[str, Future[T]] = {}
        waves = ds.open_files.tail_waves(files)
        # Files whose tail is not in flight (local files, open ones): planned in batches,
        # a few per thread: a task per file costs more in hand-offs than a local open.
        loose = [df for df in files if waves[df.path] is None]
        size = max(1, min(_BATCH_FILES, len(loose) // (4 * ds.max_workers)))
        for i in range(0, len(loose), size):
            batch = loose[i:i + size]
            futures: list[Future[T]] = [Future() for _ in batch]
            out.update((df.path, f) for df, f in zip(batch, futures, strict=True))

            def run_batch(batch: list[DataFile] = batch,
                          futures: list[Future[T]] = futures) -> None:
                for df, done in zip(batch, futures, strict=True):
                    _fill(done, fn, df)

            _submit_or_cancel(pool, run_batch, futures)
        for df in files:
            wave = waves[df.path]
            if wave is None:
                continue
            done: Future[T] = Future()
            out[df.path] = done
            wave.when_landed(df.path, functools.partial(
                _submit_or_cancel, pool, functools.partial(_fill, done, fn, df), [done]))
        return out


    def plan_files(self, ds: Dataset, columns: Sequence[str] | None, expr: Expr, t0: float,
                   report: ScanReport, waves0: dict[str, int],
                   pool: ThreadPoolExecutor | None, view: Any,
                   on_planned: OnPlanned | None = None,
                   subset: Sequence[DataFile] | None = None) -> Plans:
        """Every file of the dataset (or of ``subset``, some of them) planned for ``columns``
        where ``expr`` holds.

        ``waves0``: each file's round trips before this planning (a tail wave already
        started counts in it). ``on_planned`` is called for each kept file as soon as
        it is planned, on the pool thread that planned it (only with a pool: several
        files)."""
        disc = ds.discovery
        chosen = disc.files if subset is None else subset
        open_clock, plan_clock = WaveClock(), WaveClock()
        busy = BusyClock()  # seconds each pool thread spent planning
        waited = 0.0  # seconds this thread waited for the pool's plans
        # Every file will be opened (no partition value or manifest can rule one out):
        # each file's pool task opens it (once its tail landed) and plans it at once.
        every = (pool is not None and view is None
                 and not set(disc.partition_columns) & set(columns_of(expr)))
        head = chosen[0]
        if every:
            first = ds.open_file(head)
            open_clock.add(first.stats.round_trips - waves0.get(head.path, 0))
            first_waves = 0
        else:
            # The first file (or the manifest's stand-in for it) is opened before the
            # others: its schema binds the predicate and prunes partitions first.
            # The manifest's stand-in made no request (its stats are not the file's,
            # which may be open already from an earlier scan).
            first = ds.first_file()
            first_waves = 0 if first is ds.stand_in else (
                first.stats.round_trips - waves0.get(first.df.path, 0))
        waves_start = ds.open_files.round_trips()
        schema = ds.first_schema()
        names = [f.name for f in schema]
        # A column the first file lacks may be another file's (a lake whose later files
        # added it): then every footer is read for the dataset's schema, once.
        full = None
        first_schema = ds.bound_schema(first.pf)
        if (any(c not in names for c in columns or ())
                or any(first_schema.leaf(c) is None for c in columns_of(expr))):
            full = ds.schema
            names = [f.name for f in full]
        if columns is None:
            fields = [f.name for f in schema]
        else:
            fields = list(columns)
            for c in fields:
                if c not in names:
                    raise UserInputError(
                        f"no column named {c!r} (columns: {', '.join(names)})", path=first.df.path
                    )
        known = frozenset([*names, *_struct_paths(full if full is not None else schema)])
        given = ds.narrowed(fields)  # the dataset's given schema, narrowed; or None
        if given is not None:
            # A given schema is the dataset's columns: a predicate names one of them.
            for c in columns_of(expr):
                if c.split(".")[0] not in names:
                    raise UserInputError(
                        f"no column named {c!r} in the dataset's schema (columns: "
                        f"{', '.join(names)})", path=first.df.path, column=c)

        def bind_file(pf: ParquetFile) -> BoundExpr:
            # A column of the dataset this file lacks is NULL in its rows.
            bschema = ds.bound_schema(pf)
            return bind(expr, bschema, absent_columns(expr, bschema, known))

        first_absent = absent_columns(expr, first_schema, known)
        first_bound = bind(expr, first_schema, first_absent)
        # Partition values prune before a file is opened: a column the first file lacks
        # may hold values in the others, so its leaves may match there.
        prune_bound = (bind(expr, first_schema, first_absent, absent_null=False)
                       if first_absent else first_bound)
        n_first = len(first.pf.schema.leaves)

        def partition_rules_out(df: DataFile) -> bool:
            """One file's partition values against the predicate (the leaves the
            vectorized partition stage has no form for)."""
            values = disc.partition_values(df)

            def leaf(pred: Any) -> Match:
                if pred.leaf.index >= n_first:
                    return ConstantEvidence(values.get(pred.leaf.name)).match(pred)
                return Match.SOME

            return evaluate(prune_bound, leaf) == Match.NONE

        stand_in_bound: dict[int, BoundExpr | None] = {}
        # Per footer schema (_shape_of): the predicate bound once, and the first file
        # with it, whose Arrow schema stands for all of them in the unification.
        bound_by_shape: dict[int, BoundExpr] = {}
        reps: dict[int, OpenFile] = {}
        reps[self.shape_of(first.pf)] = first

        def bind_like(of: OpenFile) -> BoundExpr:
            # Files of one writer share a schema: bound once per footer schema, not per file.
            shape = self.shape_of(of.pf)
            reps.setdefault(shape, of)
            got = bound_by_shape.get(shape)
            if got is None:
                got = bound_by_shape[shape] = bind_file(of.pf)
            return got

        def bind_stand_in(pf: ParquetFile) -> BoundExpr | None:
            # Files share a few schemas: bound once per manifest schema.
            if id(pf) not in stand_in_bound:
                try:
                    stand_in_bound[id(pf)] = bind_file(pf)
                except PqIndexError:
                    stand_in_bound[id(pf)] = None  # the footer path reports it
            return stand_in_bound[id(pf)]

        # The file-level stages, over every file at once (dataset/stages.py): partition
        # values, then the manifest's statistics and summaries. No request.
        facts = ds.file_facts(view)
        row_of = ds.fact_rows(facts)
        all_files = disc.files
        use_manifest = view is not None and not isinstance(first_bound, BoundTrue)
        selection = file_stages(
            facts, {k: disc.partition_types.get(k, "string") for k in disc.partition_columns},
            partition_bound=prune_bound, n_leaves=n_first,
            bind_schema=((lambda sid: bind_stand_in(facts.schemas[sid]))
                         if use_manifest else None),
            ask_partition=lambda i: partition_rules_out(all_files[i]),
            ask_file=lambda i: view.prune(all_files[i], bind_stand_in,
                                          disc.partition_values(all_files[i])))
        # The files the file stages ruled out stay in bulk (positions and reasons):
        # nothing below costs anything per such file (a warm lookup of a 10,000-file
        # lake spent ~10 us on each in Python before).
        rows = (np.arange(len(chosen)) if subset is None
                else np.fromiter((row_of[df.path] for df in chosen), np.intp, len(chosen)))
        out_mask = selection.ruled_out[rows]
        positions = np.flatnonzero(out_mask)
        skipped = StageSkipped(chosen, positions, selection.decided_by[rows[positions]],
                               disc.partition_values if disc.partition_columns else None)
        keep = ~out_mask
        # Files the key index or footer statistics settle, planned here at once.
        ruled: dict[str, tuple[Planned, list[str]]] = {}
        # A file column a hive key shadows is never read: the path's value wins.
        hive_keys = frozenset(disc.partition_columns)
        # The manifest's key index names the files and row groups of a key
        # (dataset/key_index.py): the files it covers and does not name are never opened.
        keyed = (lookup_keys(view, disc, expr, ds.storage_options, report.warnings.append)
                 if use_manifest else lookup_table_keys(
                     ds.lake_table, disc, expr, ds.storage_options, report.warnings.append)
                 if ds.lake_table is not None and not isinstance(first_bound, BoundTrue)
                 else None)

        # Files every row of which matches by the manifest's statistics: planned in
        # bulk, their footers read when first needed (Deferred); a plan that keeps every
        # file of a 100,000-file lake opened and planned each before (~0.4 ms a file).
        deferred: Deferred | None = None
        bulk_reps: list[OpenFile] = []  # the manifest schemas of those files
        if (subset is None and keyed is None and ds.lake_table is None and not ds.row_groups
                and getattr(view, "columnar", None) is not None
                and ds.plan_options.statistics
                and int(np.count_nonzero(keep)) >= BULK_MIN_FILES):
            # Rows of the facts are the chosen files here (no subset).
            whole = every_row_stage(facts, lambda sid: bind_stand_in(facts.schemas[sid]),
                                    keep) & keep
            bulk = np.flatnonzero(whole)
            if len(bulk) >= BULK_MIN_FILES:
                n_rows = int(ints_of(facts.files.column("rows"), 0)[bulk].sum())
                deferred = Deferred(chosen, bulk, n_rows,
                                    lambda files, hook: ds.make_plans(columns, expr, hook, files))
                keep = keep & ~whole
                report.rows_total += n_rows
                ids = ints_of(facts.files.column("schema"), -1)[bulk]
                for sid in np.flatnonzero(np.bincount(ids[ids >= 0])).tolist():
                    at = int(bulk[np.flatnonzero(ids == sid)[0]])
                    bulk_reps.append(OpenFile(chosen[at], facts.schemas[sid], IOStats()))
        kept_files = [chosen[i] for i in np.flatnonzero(keep).tolist()]
        if keyed is not None:
            report.key_index = keyed.to_dict()
            for df in kept_files:
                if keyed.named.get(df.path) == frozenset():
                    ruled[df.path] = ((df, None, FilePlan(
                        df.path, 0, (), "key index", KEY_INDEX_SKIP,
                        disc.partition_values(df)), None), [])

        def row_groups_of(df: DataFile) -> frozenset[int] | None:
            given = ds.row_groups.get(df.path)
            named = None if keyed is None else keyed.named.get(df.path)
            if named is None or given is None:
                return given if named is None else named
            return given & named

        scan_fields = None if columns is None else fields
        dictionaries = DictionaryUse()
        no_dictionaries = replace(ds.plan_options, dictionary=False)

        def plan_one(df: DataFile) -> tuple[Planned, list[str]]:
            settled = ruled.get(df.path)
            if settled is not None:
                return settled
            started = time.perf_counter()
            before = waves_start.get(df.path, 0)
            of = ds.open_file(df)  # waits for its tail when that is still in flight
            # Opening all files is a phase of its own; otherwise opening counts as planning.
            (open_clock if every else plan_clock).add(of.stats.round_trips - before)
            before = of.stats.round_trips
            try:
                # Planning a local file is Python without a wait on a store. (Opening one
                # here, without a predicate, overlaps its read with others' Python: a
                # 1,000-file full column took 20% longer with the open in the slot.)
                with python_slot(not ds.remote):
                    done, warnings = plan_opened(df, of)
            finally:
                plan_clock.add(of.stats.round_trips - before)
            plan = done[2]
            busy.add(time.perf_counter() - started)
            if on_planned is not None and pool is not None and plan is not None and (
                    not plan.skipped):
                on_planned(done, scan_fields)
            return done, warnings

        def plan_opened(df: DataFile, of: OpenFile) -> tuple[Planned, list[str]]:
            try:
                bound = first_bound if of is first else bind_like(of)
            except UserInputError as e:
                raise e.located(path=df.path) from None
            warnings: list[str] = []
            leaf_cols = [c.index for c in of.pf.schema.leaves
                         if (columns is None or c.path[0] in fields)
                         and c.path[0] not in hive_keys]
            options = ds.plan_options
            adaptive = options.dictionary and ds.sift_sized(of, scan_fields, bound)
            consulted = not adaptive or dictionaries.consult()
            if not consulted:
                options = no_dictionaries
            # The planner decodes index and dictionary bytes: their damage is the file's.
            with located(default=CorruptFileError, what="planning", path=df.path):
                plan = plan_file(
                    of.pf,
                    bound,
                    leaf_cols,
                    partition=disc.partition_values(df),
                    options=options,
                    warnings=warnings,
                    row_groups=row_groups_of(df),
                )
            if adaptive:
                dictionaries.record(plan, consulted)
            return (df, of, plan, bound), warnings

        def footer_settled(df: DataFile) -> tuple[Planned, list[str]] | None:
            """The plan of an open file its folded footer statistics rule out, else
            None: what ``plan_file`` would decide first, without a task or a wave."""
            of = ds.open_files.get(df.path)
            if not ds.plan_options.statistics or of is None or df.path in ruled:
                return None
            try:
                bound = first_bound if of is first else bind_like(of)
            except UserInputError:
                return None  # the full path reports it, located
            with located(default=CorruptFileError, what="planning", path=df.path):
                plan = settled_by_statistics(of.pf, bound, disc.partition_values(df),
                                             row_groups_of(df))
            return None if plan is None else ((df, of, plan, bound), [])

        tails = None
        if not every:
            # Tails of the files still in play, in one wave (counted here, not per file);
            # each file is planned as soon as its own tail lands.
            tails = ds.open_files.start_ahead([df for df in kept_files if df.path not in ruled])
            if tails is not None:
                first_waves += 1
                waves_start.update(ds.open_files.round_trips())
        try:
            if pool is None:
                results = [plan_one(df) for df in kept_files]  # one file at most
            else:
                if not ds.remote and not isinstance(first_bound, BoundTrue):
                    # Local files are opened here, one after another: a footer read costs
                    # less than a hand-off to a thread, and threads that give up the GIL
                    # at every pread wait for it (a cold 100-file lookup took 1.6x as
                    # long on 4 threads). The pool plans and reads what is not settled.
                    for df in kept_files:
                        if ds.open_files.get(df.path) is not None or df.path in ruled:
                            continue
                        before = waves_start.get(df.path, 0)
                        waves = ds.open_file(df).stats.round_trips
                        (open_clock if every else plan_clock).add(waves - before)
                        waves_start[df.path] = waves
                # Files their partition values or the manifest rule out, and open files
                # their footer statistics rule out, are settled here: no task (planning
                # needs no request then; a task, and a fresh pool's thread, cost more).
                settled = ruled  # plan_one answers these from it as well
                settled.update([(df.path, r) for df in kept_files if df.path not in ruled
                                and (r := footer_settled(df)) is not None])
                todo = [df for df in kept_files if df.path not in settled]
                if len(todo) == 1 and not ds.remote:
                    # One local file left (a lookup): planned here, a hand-off to a pool
                    # thread cost ~1-3 ms of a ~10 ms warm lookup.
                    settled[todo[0].path] = plan_one(todo[0])
                    todo = []
                tasks = self.as_landed(ds, pool, plan_one, todo)
                waiting = time.perf_counter()
                try:
                    results = [settled.get(df.path) or tasks[df.path].result()
                               for df in kept_files]
                    waited = time.perf_counter() - waiting
                except BaseException:
                    for f in tasks.values():
                        f.cancel()  # the pool is shared: its queued plans skip their files
                    wait(tasks.values())  # and none still runs once the error is raised
                    raise
        finally:
            if tails is not None:
                tails.join()
        files: list[Planned] = []
        for reason, n in skipped.counts().items():
            report.files_skipped[reason] += n
        page_units: list[tuple[ParquetFile, int, list[int]]] = []
        involved_by_shape: dict[tuple[int, int], list[int]] = {}
        for (df, of, plan, bound), warnings in results:
            if warnings:
                report.warnings += [f"{df.path}: {w}" for w in warnings]
            if plan is None or of is None:
                report.files_skipped[plan.skipped_by or "partition" if plan else "partition"] += 1
                files.append((df, of, plan, bound))
                continue
            report.row_groups_total += len(plan.row_groups)
            report.rows_total += plan.num_rows
            # The same for every file of a footer schema (the predicate is bound per schema).
            key = (self.shape_of(of.pf), id(bound))
            involved = involved_by_shape.get(key)
            if involved is None:
                cols = [c.index for c in of.pf.schema.leaves
                        if (columns is None or c.path[0] in fields)
                        and c.path[0] not in hive_keys]
                n_here = len(of.pf.schema.leaves)
                if bound is not None:
                    cols += [leaf.index for leaf in bound_leaves(bound) if leaf.index < n_here]
                involved = involved_by_shape[key] = sorted(set(cols))
            for rg in plan.row_groups:
                if rg.skipped:
                    report.row_groups_skipped[rg.decided_by] += 1
                page_units.append((of.pf, rg.index, involved))
            if plan.skipped:
                report.files_skipped["row groups"] += 1
            files.append((df, of, plan, bound))
        report.pages_total = count_pages(page_units)
        report.dictionaries_unchecked = dictionaries.unchecked
        # Files are opened, then planned, concurrently: per phase, the pool thread that
        # waited for the most waves sets the path.
        report.round_trips = first_waves + open_clock.critical() + plan_clock.critical()
        # Planning's own time: the caller's thread outside its waits for the pool, and
        # the busiest pool thread's planning. Until the last file is planned counts
        # more: pool threads read the data of the files planned first (on_planned),
        # and a file's plan may wait behind them (TPC-H Q19, 4 files: 3-5 s "planning",
        # 30-50 ms of it planning).
        report.plan_seconds = (time.perf_counter() - t0 - waited
                               + busy.critical(besides=threading.get_ident()))
        # The files read decide the types: pyarrow's unification across them (one file
        # per footer schema: equal footers give equal Arrow schemas).
        if given is not None:
            out_schema = given
        else:
            out = ds.unified_schema([first, *(of for of in reps.values() if of is not first),
                                     *bulk_reps])
            if columns is None:  # every column of the files read
                fields = out.names
            # A field no file read has (all were pruned) takes the dataset's type.
            out_schema = pa.schema([out.field(f) if f in out.names or full is None
                                    else full.field(f) for f in fields])
        return Plans(files, report, fields, out_schema, page_units, skipped, deferred)
