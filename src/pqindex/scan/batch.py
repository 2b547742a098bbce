"""A file's row groups read in waves: the batch flow of :func:`scan_file`.

The row groups of one file are taken in batches (as far as
``ScanOptions.read_ahead_bytes`` allows). Per batch, the predicate columns' pages
of every row group are fetched in one ``read_ranges`` call, each row group's
predicate is evaluated (:func:`pqindex.scan.executor.exact_rows`), then the other
columns' pages of the matching rows of every row group are fetched in one more and
cut (:func:`pqindex.scan.executor.project`). On object stores a wave costs one
round trip however many ranges it holds. Row groups run on the caller's pool only
where they cost more than the hand-off (:func:`pqindex.pools.spread`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from pqindex.expr.bind import BoundExpr
from pqindex.format.file import ParquetFile
from pqindex.format.row_ranges import RowRanges
from pqindex.format.views import computable_schema
from pqindex.io.source import BytesSource, LocalFileSource
from pqindex.plan.planner import FilePlan, RowGroupPlan, round_trip_bytes
from pqindex.pools import spread
from pqindex.scan import executor
from pqindex.scan.fetch import Buffers, ScanOptions, ScanStats, merge_stats

__all__ = ["planned_data_waves", "scan_file"]


def _speculation_budget(pf: ParquetFile, options: ScanOptions) -> int:
    if options.speculative_bytes is not None:
        return options.speculative_bytes
    return round_trip_bytes(pf)


def planned_data_waves(plan: FilePlan, expr: BoundExpr) -> int:
    """Waves of data requests :func:`scan_file` plans for a file on a local store (within
    one read-ahead), at most: one for the predicate columns when some rows need the
    exact check, one for the projected columns (none when the check finds no row). An
    object store may merge the two."""
    kept = [rg for rg in plan.row_groups if not rg.skipped]
    if not kept:
        return 0
    return 2 if any(not executor.uncertain_rows(rg, expr).is_empty for rg in kept) else 1


# Row groups averaging this much predicate-column data, or this many matching rows,
# go to the pool at once (pools.spread): a 4 MiB PLAIN int64 chunk takes ~9 ms to
# evaluate, 10k of 500k rows ~10 ms to cut; a 10-row rare value ~1 ms a row group.
_COSTLY_BYTES = 1 << 20
_COSTLY_ROWS = 4096
# Or this much output of zstd (or gzip...) pages a row group, decompressed whole: ~0.5
# ms of work that releases the GIL. 10 rare rows of the zstd issue file (4 row groups,
# ~1.2 MB each) then all go to the pool at once: 11.4 -> 9.3 ms warm (with the columns
# of each kept on its thread: executor.RowGroupReader.columns_aside). The same holds for
# predicate columns: the 20M-row file's `category` (610 KB of zstd a row group) on the
# pool took its rare value from 27.3 to 24.3 ms warm, 33.7 to 29.8 cold (16 rounds).
_COSTLY_INFLATE = 512 << 10
_CORES = os.cpu_count() or 1


def _planned_bytes(rgp: RowGroupPlan) -> int:
    return sum(r.bytes for r in rgp.reads)


def _batches(rgps: Sequence[RowGroupPlan], limit: int) -> Iterator[list[RowGroupPlan]]:
    """Consecutive row groups whose planned reads fit in ``limit`` bytes (at least one)."""
    batch: list[RowGroupPlan] = []
    size = 0
    for rgp in rgps:
        n = _planned_bytes(rgp)
        if batch and size + n > limit:
            yield batch
            batch, size = [], 0
        batch.append(rgp)
        size += n
    if batch:
        yield batch


class _Batch:
    """Row groups of one file read together: one wave per step, not one per row group."""

    def __init__(
        self,
        pf: ParquetFile,
        plan: FilePlan,
        batch: Sequence[RowGroupPlan],
        expr: BoundExpr,
        fields: Sequence[str],
        schema: pa.Schema,
        partition_types: dict[str, pa.DataType],
        options: ScanOptions,
        stats: ScanStats,
    ) -> None:
        self.pf = pf
        self.expr = expr
        self.fields = fields
        self.partition = plan.partition
        self.partition_types = partition_types
        self.options = options
        self.buffers = Buffers(pf, stats, options.coalesce_gap)
        self.stats = [ScanStats() for _ in batch]  # one per row group: decoded in parallel
        self.readers = [
            executor.RowGroupReader(pf, rgp, schema, st, options, self.buffers)
            for rgp, st in zip(batch, self.stats, strict=True)
        ]
        for rd in self.readers:
            rd.keep_views = True  # scan_file's tables all go through conform
            rd.siblings = len(self.readers)
        self.pred_cols = executor.predicate_leaves(pf, expr)
        # Fields the predicate fixes are repeated, not read (executor.implied_values).
        self.implied = executor.implied_values(expr, fields, computable_schema(schema))
        self.kept = [f for f in fields if f not in self.implied]
        self.file_fields = [f for f in self.kept if f not in partition_types]
        self.exact: list[RowRanges] = []
        # A remote row group may still wait on a request (what the waves missed): all
        # of them go to the pool at once, their waits side by side.
        self.remote = not isinstance(pf.source, (LocalFileSource, BytesSource))

    def _predicate_ranges(self, rd: executor.RowGroupReader) -> list[tuple[int, int]]:
        rows = executor.uncertain_rows(rd.plan, self.expr)
        return [r for c in self.pred_cols for r in rd.leaf_ranges(c, rows, self.expr)]

    def _field_ranges(self, rd: executor.RowGroupReader, rows: RowRanges) -> list[tuple[int, int]]:
        return [r for f in self.file_fields for r in rd.field_ranges(f, rows)]

    def _fetch(self, wave: list[tuple[int, int]]) -> None:
        self.buffers.native_waved = False  # a new step
        executor.at_row_group(self.pf, self.readers[0].rg, self.buffers.fetch, wave)

    def predicate_wave(self) -> None:
        """The predicate columns' pages of every row group (and, when cheap enough, the
        other columns' pages of every row that may match)."""
        pf = self.pf
        wave = [r for rd in self.readers
                for r in executor.at_row_group(pf, rd.rg, self._predicate_ranges, rd)]
        budget = _speculation_budget(pf, self.options) if wave else 0
        if budget:
            maybe = [r for rd in self.readers for r in executor.at_row_group(
                pf, rd.rg, self._field_ranges, rd, rd.plan.maybe)]
            if sum(n for _, n in maybe) <= budget:
                wave += maybe
        self._fetch(wave)

    def costly_predicate(self) -> bool:
        """Whether the predicate columns' planned pages average ``_COSTLY_BYTES`` or
        more per row group, or ``_COSTLY_INFLATE`` of zstd (gzip...) output: each row
        group's evaluation is then worth a thread."""
        if self.remote:
            return True
        cols = set(self.pred_cols)
        planned = inflated = 0
        for rd in self.readers:
            for r in rd.plan.reads:
                if r.column in cols:
                    planned += r.bytes
                    inflated += rd.inflated(r.column, r.bytes)
        n = len(self.readers)
        return planned >= _COSTLY_BYTES * n or inflated >= _COSTLY_INFLATE * n

    def costly_projection(self) -> bool:
        """Whether the row groups average ``_COSTLY_ROWS`` or more matching rows, or
        ``_COSTLY_INFLATE`` bytes of pages to decompress whole."""
        n = len(self.readers)
        if self.remote or sum(r.count() for r in self.exact) >= _COSTLY_ROWS * n:
            return True
        return sum(rd.projection_cost(self.file_fields, rows) for rd, rows in zip(
            self.readers, self.exact, strict=True)) >= _COSTLY_INFLATE * n

    def exact_rows(self, i: int) -> RowRanges:
        rd = self.readers[i]
        return executor.at_row_group(self.pf, rd.rg, executor.exact_rows, rd, self.expr,
                                     self.kept, self.partition, self.partition_types,
                                     self.stats[i])

    def projection_wave(self) -> None:
        """The projected columns' pages holding the matching rows of every row group."""
        self._fetch([
            r for rd, rows in zip(self.readers, self.exact, strict=True)
            for r in executor.at_row_group(self.pf, rd.rg, self._field_ranges, rd, rows)
        ])

    def project(self, i: int) -> pa.Table | None:
        rd = self.readers[i]
        try:
            return executor.at_row_group(self.pf, rd.rg, executor.project, rd, self.exact[i],
                                         self.fields, self.partition, self.partition_types,
                                         self.stats[i], self.implied)
        finally:
            rd.release()  # its decoded pages are in the table now (or no longer needed)


def scan_file(
    pf: ParquetFile,
    plan: FilePlan,
    row_groups: Sequence[RowGroupPlan],
    expr: BoundExpr,
    fields: Sequence[str],
    schema: pa.Schema,
    partition_types: dict[str, pa.DataType],
    options: ScanOptions,
    stats: ScanStats,
    map_fn: Callable[..., Iterable[Any]] = map,
    stream: bool = False,
) -> Iterator[pa.Table]:
    """The matching rows of planned row groups of one file, in row-group order.

    Per batch of row groups (bounded by ``options.read_ahead_bytes``): one wave for
    the predicate columns' pages of all of them, one for the projected columns' pages
    of their matching rows. ``map_fn`` runs the per-row-group decoding (a thread
    pool's ``map`` decodes row groups in parallel). ``stream``: the projected tables
    are decoded one at a time as they are consumed, so memory holds the batch's
    fetched bytes (at most the read-ahead) and one decoded row group.
    """
    rgps = [r for r in row_groups if not r.maybe.is_empty]
    for rows in _batches(rgps, options.read_ahead_bytes):
        batch = _Batch(pf, plan, rows, expr, fields, schema, partition_types, options, stats)
        batch.predicate_wave()
        each = range(len(rows))
        batch.exact = spread(batch.exact_rows, each, map_fn, batch.costly_predicate())
        batch.projection_wave()
        costly = not stream and batch.costly_projection()
        if costly and map_fn is not map and len(rows) >= _CORES:
            for rd in batch.readers:
                rd.columns_aside = False
        if stream:
            # Each row group's costs in ``stats`` before its table is handed on: a
            # consumer that stops early (Scan.head) has them counted.
            for i in each:
                t = batch.project(i)
                merge_stats(stats, batch.stats[i])
                if t is not None:
                    yield t
            continue
        for t in spread(batch.project, each, map_fn, costly):
            if t is not None:
                yield t
        for st in batch.stats:
            merge_stats(stats, st)
