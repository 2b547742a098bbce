"""Sums of whole column chunks taken from their encoded pages, for ``Dataset.aggregate``.

Where every row of a row group is aggregated, ``sum(x)`` and ``count(x)`` of a flat
integer or float column need only the sum and the number of the chunk's non-null
values. :func:`pqindex.scan.encoded.chunk_sum` gives both from the pages without an
Arrow array of them: PLAIN pages summed where they were decompressed, dictionary
pages as the entries their indices name, added as the C kernel unpacks them. On
the issue's snappy file (``amount``: 4M doubles, dictionary-encoded) that is 9 ms
where pyarrow's decode alone takes 15 (docs/benchmarks.md).

The chunks are read as the other whole-row-group reads read them: a local file by
the task summing them, a window at a time, counted as pyarrow's reads are
(``read_native_ranges``); any other source fetched in waves of
``ScanOptions.read_ahead_bytes``. Row groups are summed by one task per core on the
process-wide pool. A chunk this cannot sum (another encoding, a nested or decimal
column, damage) comes back None, and the caller reads it with pyarrow, which names
any error.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence

import pyarrow as pa

from pqindex.format.checksum import check_chunks
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.io.source import LocalFileSource
from pqindex.scan import encoded
from pqindex.scan.chunk_match import local_reader
from pqindex.scan.fetch import Buffers, ScanOptions, ScanStats
from pqindex.scan.whole import (
    located,
    native_path,
    read_native_ranges,
    side_by_side,
    size_batches,
)

__all__ = ["Sums", "chunk_sums"]

_CORES = os.cpu_count() or 1
# (row group, leaf) -> (sum of the non-null values, or None when there are none; how
# many there are)
Sums = dict[tuple[int, int], tuple[int | float | None, int]]
# One chunk's result from a task: (row group, leaf, its sum and count, or None when
# the chunk is left to pyarrow).
_Summed = tuple[int, int, tuple[int | float | None, int] | None]


def chunk_sums(
    pf: ParquetFile,
    row_groups: Sequence[int],
    leaves: Sequence[tuple[int, pa.DataType]],
    options: ScanOptions,
) -> tuple[Sums, ScanStats]:
    """The sums of the chunks of ``leaves`` (leaf index, Arrow type) in ``row_groups``
    that :func:`~pqindex.scan.encoded.chunk_sum` sums, and what reading them cost.
    The chunks missing from the result are the caller's to read."""
    stats = ScanStats()
    todo = {rg: cols for rg in row_groups
            if (cols := [(c, t) for c, t in leaves if encoded.summable(pf, rg, c, t)])}
    out: Sums = {}
    if not todo:
        return out, stats

    def chunk(rg: int, col: int) -> tuple[int, int]:
        return chunk_range(pf.column_meta(rg, col))

    def job(rgs: Sequence[int], raw: Callable[[int, int], bytes | memoryview | encoded.Read]
            ) -> list[_Summed]:
        return [(rg, col, encoded.chunk_sum(pf, rg, col, t, raw(rg, col)))
                for rg in rgs for col, t in todo[rg]]

    def jobs(rgs: Sequence[int], raw: Callable[[int, int], bytes | memoryview | encoded.Read]
             ) -> list[Callable[[], list[_Summed]]]:
        # One job per core: more threads only take turns at the GIL for the Python
        # between pages (issue file, sum(amount): one per row group 12.6 ms, per core 9.6).
        k = max(1, min(_CORES, len(rgs)))
        return [functools.partial(job, rgs[i::k], raw) for i in range(k)]

    source = pf.source
    results: list[list[_Summed]] = []
    if native_path(pf) is not None and isinstance(source, LocalFileSource):
        # Each task reads its chunks; one wait for them all, as pyarrow's own reads are
        # counted.
        if read_native_ranges(pf, [chunk(rg, c) for rg in todo for c, _ in todo[rg]],
                              options.coalesce_gap, stats):
            source.stats.record_wave()
        if options.verify_checksums:  # read in windows: the chunks are read once more whole
            for rg, cols in todo.items():
                check_chunks(pf, [rg], [pf.leaf(c).path[0] for c, _ in cols])

        def local(rg: int, col: int) -> encoded.Read:
            return local_reader(source, chunk(rg, col)[0])

        results = side_by_side(jobs(list(todo), local))
    else:
        sizes = [(rg, sum(chunk(rg, c)[1] for c, _ in cols)) for rg, cols in todo.items()]
        for batch in size_batches(sizes, options.read_ahead_bytes):
            buffers = Buffers(pf, stats, options.coalesce_gap)
            located(pf, batch, buffers.fetch, [chunk(rg, c) for rg in batch for c, _ in todo[rg]])
            for rg in batch if options.verify_checksums else ():
                check_chunks(pf, [rg], [pf.leaf(c).path[0] for c, _ in todo[rg]], buffers)

            def fetched(rg: int, col: int, buffers: Buffers = buffers) -> bytes | memoryview:
                start, length = chunk(rg, col)
                view = buffers.view(start, length)
                return buffers(start, length) if view is None else view

            results += side_by_side(jobs(batch, fetched))
    for rg, col, got in (r for part in results for r in part):
        if got is not None:
            out[(rg, col)] = got
            stats.pages_read += pf.data_page_count(rg, col)
    return out, stats
