"""Row groups where every row is wanted, read by pyarrow's own Parquet reader.

Nothing to prune inside them, so pyarrow decodes them as ``read_table`` would:

* a **local file** is read by pyarrow itself (``pyarrow.OSFile``: ``pread`` in
  its I/O threads, pre-buffered, no copy through Python bytes) with the footer we
  already decoded, so the footer is not read or parsed again. pyarrow opens the
  descriptor the footer came from (:func:`native_file`), never the path again, and
  the file is checked unchanged once it has read (a file rewritten meanwhile is an
  ``ObjectChangedError``, never rows of two versions). The row groups are
  split into a few contiguous tasks run side by side, as pyarrow's dataset scanner
  does, on a pool of threads kept for the process (as pyarrow keeps its own). What
  pyarrow reads — the projected chunks, merged like our own reads — is counted in
  the file's ``IOStats`` as requests of ours would be; where the tail we read holds
  the end of the last chunks, those few KiB are read (and counted) again.
* any other source: the chunks are fetched first in one wave per
  ``ScanOptions.read_ahead_bytes`` (one round trip however many ranges), then
  pyarrow decodes them from memory through :class:`~pqindex.scan.fetch.SourceFile`.

Either way no index bytes are read.

:func:`iter_sifted_row_groups` reads small row groups no index narrowed the same
fetched way (bytes planning holds are not read again), decoded in one call per
file and filtered by the predicate: the page-by-page flow's Python per row group
and column costs more there (see ``dataset._segments``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from pqindex.errors import DECODE_ERRORS, CorruptFileError, PqIndexError, translate
from pqindex.expr.bind import BoundExpr
from pqindex.expr.evaluate import to_arrow_mask
from pqindex.format.checksum import check_chunks
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.format.views import computable_table
from pqindex.io.source import LocalFileSource, coalesce
from pqindex.pools import shared_pool
from pqindex.scan.fetch import (
    Buffers,
    ScanOptions,
    ScanStats,
    SourceFile,
    arrow_metadata,
    merge_stats,
)

__all__ = [
    "iter_sifted_row_groups",
    "iter_whole_row_groups",
    "located",
    "native_file",
    "native_path",
    "pyarrow_opens_free",
    "read_native_ranges",
    "read_whole_row_groups",
    "side_by_side",
    "size_batches",
]

# Arrow C++ reads this much from the end of a file to find the footer.
_ARROW_FOOTER_READ = 64 * 1024
# A task of the native local read holds at least this much compressed data: fewer,
# larger tasks when row groups are small (a task costs a reader construction).
_MIN_TASK_BYTES = 1 << 20
# At most this many tasks per call.
_MAX_TASKS = 8
# Threads of the process-wide pool the native reads run on: they only wait on pyarrow
# (which releases the GIL), as a scan's own pool would.
_NATIVE_WORKERS = min(8, (os.cpu_count() or 2) * 2)
# A sifted read hands pyarrow the file's bytes up to its last chunk as one buffer
# (most of it never touched) while that span is at most this.
SIFT_IMAGE_BYTES = 256 << 20
# A sifted read decodes a file's row groups in runs of at most this many bytes of chunks.
SIFT_BATCH_BYTES = 32 << 20
# Zeros after each chunk of that buffer: pyarrow reads up to 100 bytes past a chunk
# of some writers.
_IMAGE_PAD = 128
_T = TypeVar("_T")
_PARQUET_MR = re.compile(r"parquet-mr version (\d+)\.(\d+)\.(\d+)")


# A dictionary page at most this share of its chunk's stored bytes: the chunk's strings
# are read as dictionary indices and cast to their type once read (dense_strings).
# pyarrow's dense decode of dictionary strings appends value by value: 1M rows of
# TPC-H's l_returnflag 20.3 -> 9.8 ms of CPU, l_shipmode 24.2 -> 14.9, Spark's copy
# 61.7 -> 30.7. A large dictionary (high cardinality) is decoded as before.
_DICTIONARY_SHARE = 0.25
# Arrow types read as a dictionary and cast back (views: pyarrow's dictionary of them
# holds plain strings, and a view decodes cheaply anyway).
_DENSE_STRINGS = (pa.string(), pa.large_string(), pa.binary(), pa.large_binary())


def _file_types(pf: ParquetFile) -> pa.Schema:
    """The Arrow schema pyarrow reads the file with (its stored Arrow schema applied)."""
    known = pf.derived.get("arrow_read_schema")
    if known is None:
        known = pf.derived["arrow_read_schema"] = arrow_metadata(pf).schema.to_arrow_schema()
    assert isinstance(known, pa.Schema)
    return known


def dictionary_strings(pf: ParquetFile, rgs: Sequence[int], fields: Sequence[str]
                       ) -> list[str]:
    """Flat string and binary ``fields`` that pyarrow reads faster as dictionaries in
    row groups ``rgs``: every data page of their chunks dictionary-encoded, the
    dictionary page a small share of the chunk (see :data:`_DICTIONARY_SHARE`)."""
    types = _file_types(pf)
    out = []
    for name in fields:
        leaves = [c for c in pf.schema.leaves if c.path[0] == name]
        if (len(leaves) != 1 or len(leaves[0].path) != 1 or name not in types.names
                or types.field(name).type not in _DENSE_STRINGS):
            continue
        col = leaves[0].index
        if all(_small_dictionary(pf, rg, col) for rg in rgs):
            out.append(name)
    return out


def _small_dictionary(pf: ParquetFile, rg: int, col: int) -> bool:
    if pf.all_dictionary_encoded(rg, col) is not True:
        return False
    ext = pf.dictionary_extent(rg, col)
    stored = pf.column_meta(rg, col).total_compressed_size or 0
    return ext is not None and ext[1] <= stored * _DICTIONARY_SHARE


def dense_strings(t: pa.Table, names: Sequence[str], pf: ParquetFile) -> pa.Table:
    """``t`` with the columns ``names``, read as dictionaries, cast to the types pyarrow
    reads them with otherwise."""
    types = _file_types(pf)
    for name in names:
        i = t.schema.get_field_index(name)
        if i >= 0 and pa.types.is_dictionary(t.schema.field(i).type):
            t = t.set_column(i, t.schema.field(i).with_type(types.field(name).type),
                             t.column(i).cast(types.field(name).type))
    return t


def _native_pool() -> ThreadPoolExecutor:
    """The threads native reads run on (see :mod:`pqindex.pools`)."""
    return shared_pool("native", _NATIVE_WORKERS)


def pool_map(fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterable[Any]:
    """``map`` on the process-wide pool native reads run on (a ``map_fn`` that lets
    :func:`iter_whole_row_groups` read its tasks side by side)."""
    return _native_pool().map(fn, items)


def side_by_side(jobs: Sequence[Callable[[], Any]]) -> list[Any]:
    """Every job's result, in order: the first run on the calling thread, the others on
    the process-wide pool (jobs that wait on pyarrow, which releases the GIL). A job
    no pool thread has started yet is taken back and run here: a caller that is itself
    a pool thread never waits on a queue its own wait keeps full."""
    if len(jobs) < 2:
        return [job() for job in jobs]
    pool = _native_pool()
    futures = [pool.submit(job) for job in jobs[1:]]
    try:
        out = [jobs[0]()]
    except BaseException:
        for f in futures:
            f.cancel()
        raise
    for job, f in zip(jobs[1:], futures, strict=True):
        out.append(job() if f.cancel() else f.result())
    return out


def pyarrow_opens_free(pf: ParquetFile) -> bool:
    """Whether pyarrow opening the file is served by the tail already read (no request,
    no index bytes): its speculative footer read lies inside our tail."""
    size = pf.source.size()
    n = min(size, _ARROW_FOOTER_READ)
    return pf.has_bytes(size - n, n)


def _decode_error(pf: ParquetFile, batch: Sequence[int], e: BaseException) -> PqIndexError:
    one = batch[0] if len(batch) == 1 else None
    what = "cannot decode" if one is not None else (
        f"cannot decode row groups {', '.join(map(str, batch))}")
    return translate(e, default=CorruptFileError, what=what, path=pf.path, row_group=one)


def native_path(pf: ParquetFile) -> str | None:
    """The local file's path when pyarrow may read it itself (through
    :func:`native_file`), else None. ObjectChangedError when the file is no longer the
    version the footer came from."""
    src = pf.source
    if not isinstance(src, LocalFileSource) or not src.native_readable:
        return None
    src.verify()
    return src.path


@contextlib.contextmanager
def native_file(pf: ParquetFile) -> Iterator[pa.NativeFile]:
    """pyarrow's file for a local ``pf`` (see :func:`native_path`), opened through the
    descriptor its footer came from; the file is checked unchanged when the block
    ends without an error, so what pyarrow read there is of that one version."""
    src = pf.source
    assert isinstance(src, LocalFileSource)
    f = src.native_file()
    try:
        yield f
    except BaseException:
        f.close()
        src.verify()  # a file changed under pyarrow: that, not what pyarrow made of it
        raise
    f.close()
    src.verify()


def read_native_ranges(
    pf: ParquetFile, ranges: Sequence[tuple[int, int]], gap: int | None, stats: ScanStats
) -> int:
    """Count the chunk ranges pyarrow read itself from a local file (pre-buffered, merged
    like ours) as requests of the file's source; how many requests that makes."""
    merged = pf.source.coalesce(ranges) if gap is None else coalesce(ranges, gap)
    for off, n in merged:
        pf.source.stats.record(off, n)
        stats.data_bytes += n
    return len(merged)


def _tasks(sizes: Sequence[tuple[int, int]]) -> list[list[int]]:
    """Row groups ``(index, bytes)`` as at most ``_MAX_TASKS`` contiguous runs of
    similar size (each at least ``_MIN_TASK_BYTES`` where the data allows)."""
    total = sum(n for _, n in sizes)
    target = max(total / _MAX_TASKS, _MIN_TASK_BYTES)
    out: list[list[int]] = []
    size = 0.0
    for rg, n in sizes:
        if out and size < target:
            out[-1].append(rg)
        else:
            out.append([rg])
            size = 0.0
        size += n
    return out


def _read_native(
    pf: ParquetFile, rgs: list[int], file_fields: list[str], verify: bool
) -> pa.Table:
    try:
        if verify:  # pyarrow reads the file itself: the chunks are read once more to check
            check_chunks(pf, rgs, file_fields)
        dictionary = dictionary_strings(pf, rgs, file_fields)
        with native_file(pf) as f:
            reader = pq.ParquetFile(f, metadata=arrow_metadata(pf), pre_buffer=True,
                                    read_dictionary=dictionary or None)
            t = reader.read_row_groups(rgs, columns=file_fields, use_threads=True)
        return dense_strings(t, dictionary, pf)
    except PqIndexError as e:
        raise e.located(path=pf.path) from None
    except DECODE_ERRORS as e:  # pyarrow raises OSError for damaged pages
        if len(rgs) > 1:
            for rg in rgs:  # name the row group that fails alone
                _read_native(pf, [rg], file_fields, verify)
        raise _decode_error(pf, rgs, e) from e


def _read_fetched(
    pf: ParquetFile, buffers: Buffers, rgs: list[int], file_fields: list[str], verify: bool
) -> pa.Table:
    # Imported here: pyarrow.dataset imports pandas (~0.2 s of every process's
    # ``import pqindex``, the CLI's and each Spark worker's).
    import pyarrow.dataset as pads

    try:
        if verify:
            check_chunks(pf, rgs, file_fields, buffers)
        dictionary = dictionary_strings(pf, rgs, file_fields)
        fmt = pads.ParquetFileFormat(read_options=pads.ParquetReadOptions(
            dictionary_columns=set(dictionary))) if dictionary else pads.ParquetFileFormat()
        fragment = fmt.make_fragment(SourceFile(pf, buffers), row_groups=rgs)
        t = fragment.to_table(columns=file_fields, use_threads=True)
        return dense_strings(t, dictionary, pf)
    except PqIndexError as e:
        raise e.located(path=pf.path) from None
    except DECODE_ERRORS as e:  # pyarrow raises OSError for damaged pages
        raise _decode_error(pf, rgs, e) from e


def size_batches(sizes: Sequence[tuple[int, int]], limit: int) -> list[list[int]]:
    """Consecutive row groups whose chunks fit in ``limit`` bytes (at least one each)."""
    batches: list[list[int]] = []
    size = 0
    for rg, n in sizes:
        if batches and size + n <= limit:
            batches[-1].append(rg)
            size += n
        else:
            batches.append([rg])
            size = n
    return batches


def iter_whole_row_groups(
    pf: ParquetFile,
    row_groups: Sequence[int],
    fields: Sequence[str],
    partition: dict[str, Any],
    partition_types: dict[str, pa.DataType],
    options: ScanOptions | None = None,
    map_fn: Callable[..., Iterable[Any]] = map,
    *,
    stream: bool = False,
) -> Iterator[tuple[pa.Table, ScanStats]]:
    """Row groups where every row is wanted, projected to ``fields`` (partition
    columns filled in), read by pyarrow's own reader (see the module docstring), with
    what each part cost. ``map_fn``: builtin ``map`` reads the tasks one after another
    on the calling thread; a pool's ``map`` lets them run side by side (the native
    read's on the process-wide pool of :func:`_native_pool`). ``stream``: one table
    per row group, decoded as it is consumed (memory holds one decoded row group, and
    on the fetched path the read-ahead's bytes)."""
    options = options or ScanOptions()
    file_fields = [f for f in fields if f not in partition_types]
    leaves = [c.index for c in pf.schema.leaves if c.path[0] in file_fields]

    def chunks(rg: int) -> list[tuple[int, int]]:
        return [chunk_range(pf.column_meta(rg, c)) for c in leaves]

    def finish(t: pa.Table, rgs: Sequence[int], stats: ScanStats) -> pa.Table:
        for name in fields:
            if name in partition_types:
                value = pa.array([partition.get(name)] * t.num_rows, partition_types[name])
                t = t.append_column(name, value)
        stats.rows_out += t.num_rows
        stats.row_groups_read += len(rgs)
        for rg in rgs:
            stats.pages_read += sum(pf.data_page_count(rg, c) for c in leaves)
        return t.select(list(fields))

    path = native_path(pf) if file_fields else None
    if path is None:
        yield from _fetched_parts(pf, row_groups, chunks, finish, file_fields, options, stream)
        return
    # Every row group natively, the last one too when the tail already holds the end of
    # its chunks: pyarrow reads those few KiB again (counted), which costs far less
    # than fetching the row group and decoding it from Python bytes.
    sizes = [(rg, sum(n for _, n in chunks(rg))) for rg in row_groups]
    steps = [[[rg]] for rg in row_groups] if stream else [_tasks(sizes)]
    parallel = map_fn is not map

    def read(rgs: list[int]) -> pa.Table:
        return _read_native(pf, rgs, file_fields, options.verify_checksums)

    for step in steps:
        stats = ScanStats()
        t0 = time.perf_counter()
        parts = list(_native_pool().map(read, step) if parallel and len(step) > 1
                     else map(read, step))
        rgs = [rg for task in step for rg in task]
        # One wait for the step's reads: pyarrow's, side by side.
        if read_native_ranges(pf, [r for rg in rgs for r in chunks(rg)],
                              options.coalesce_gap, stats):
            pf.source.stats.record_wave()
        t = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        stats.decode_seconds += time.perf_counter() - t0
        yield finish(t, rgs, stats), stats


def _fetched_parts(
    pf: ParquetFile,
    row_groups: Sequence[int],
    chunks: Callable[[int], list[tuple[int, int]]],
    finish: Callable[[pa.Table, Sequence[int], ScanStats], pa.Table],
    file_fields: list[str],
    options: ScanOptions,
    stream: bool,
) -> Iterator[tuple[pa.Table, ScanStats]]:
    """The row groups' chunks fetched in waves of ``options.read_ahead_bytes``, then
    decoded by pyarrow from memory."""
    sizes = [(rg, sum(n for _, n in chunks(rg))) for rg in row_groups]
    pipelined = not stream and hasattr(pf.source, "iter_ranges")
    for batch in size_batches(sizes, options.read_ahead_bytes):
        stats = ScanStats()
        buffers = Buffers(pf, stats, options.coalesce_gap)
        if pipelined and len(batch) > 1:
            units = _units([(rg, n) for rg, n in sizes if rg in batch], _unit_bytes(pf))
            if len(units) > 1:
                t = _pipelined(pf, buffers, units, chunks, file_fields, stats,
                               options.verify_checksums)
                yield finish(t, batch, stats), stats
                continue
        located(pf, batch, buffers.fetch, [r for rg in batch for r in chunks(rg)])
        for rgs in [[rg] for rg in batch] if stream else [batch]:
            t0 = time.perf_counter()
            t = _read_fetched(pf, buffers, rgs, file_fields, options.verify_checksums)
            stats.decode_seconds += time.perf_counter() - t0
            yield finish(t, rgs, stats), stats
            stats = ScanStats()


def _unit_bytes(pf: ParquetFile) -> int:
    """Row groups are decoded in units of at least this many bytes as they land: the
    bytes one more request is worth on the store (its coalescing gap)."""
    return int(getattr(pf.source, "max_gap", 0)) or 1


def _units(sizes: Sequence[tuple[int, int]], least: int) -> list[list[int]]:
    """Consecutive row groups as units of at least ``least`` bytes (the last may be
    smaller, and joins the one before)."""
    units: list[list[int]] = []
    size = least
    for rg, n in sizes:
        if size >= least:
            units.append([rg])
            size = n
        else:
            units[-1].append(rg)
            size += n
    if len(units) > 1 and size < least:
        last = units.pop()
        units[-1] += last
    return units


def _pipelined(
    pf: ParquetFile,
    buffers: Buffers,
    units: list[list[int]],
    chunks: Callable[[int], list[tuple[int, int]]],
    file_fields: list[str],
    stats: ScanStats,
    verify: bool,
) -> pa.Table:
    """One wave for every unit's chunks (no request spans two units); each unit is
    decoded on the process-wide pool as soon as its bytes are in, while the others
    still transfer."""
    ranges = [[r for rg in unit for r in chunks(rg)] for unit in units]
    pool = _native_pool()
    lock = threading.Lock()

    def decode(unit: list[int]) -> pa.Table:
        t0 = time.perf_counter()
        try:
            return _read_fetched(pf, buffers, unit, file_fields, verify)
        finally:
            with lock:
                stats.decode_seconds += time.perf_counter() - t0

    jobs: list[Any] = [None] * len(units)  # the decode's future once its bytes are in
    try:
        for _ in _landing(pf, units, buffers, ranges):
            for k, unit in enumerate(units):
                if jobs[k] is None and buffers.holds(ranges[k]):
                    jobs[k] = pool.submit(decode, unit)
        # A decode no pool thread has started is run here (a caller that is itself a
        # pool thread never waits on a queue its own wait keeps full).
        parts = [decode(unit) if f is None or f.cancel() else f.result()
                 for unit, f in zip(units, jobs, strict=True)]
    except BaseException:
        for f in jobs:
            if f is not None:
                f.cancel()
        raise
    return pa.concat_tables(parts)


def _landing(pf: ParquetFile, units: list[list[int]], buffers: Buffers,
             ranges: list[list[tuple[int, int]]]) -> Iterator[None]:
    """``buffers.fetch_each``, its errors located in the file."""
    rgs = [rg for unit in units for rg in unit]
    try:
        yield from buffers.fetch_each(ranges)
    except PqIndexError as e:
        raise e.located(path=pf.path) from None
    except DECODE_ERRORS as e:
        raise _decode_error(pf, rgs, e) from e


def located(pf: ParquetFile, rgs: Sequence[int], fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)``, its errors located in the file (row group ``rgs[0]`` when alone)."""
    try:
        return fn(*args)
    except PqIndexError as e:
        raise e.located(path=pf.path) from None
    except DECODE_ERRORS as e:
        raise _decode_error(pf, rgs, e) from e


def iter_sifted_row_groups(
    pf: ParquetFile,
    row_groups: Sequence[int],
    fields: Sequence[str],
    expr: BoundExpr,
    predicate_fields: Sequence[str],
    partition: dict[str, Any],
    partition_types: dict[str, pa.DataType],
    options: ScanOptions | None = None,
    *,
    stream: bool = False,
) -> Iterator[tuple[pa.Table, ScanStats]]:
    """Small row groups no index narrowed, decoded whole by pyarrow (with
    ``predicate_fields``, the top-level fields ``expr`` reads) and filtered by
    ``expr``: the rows it holds for, projected to ``fields``, with what each part
    cost. ``stream``: one row group at a time."""
    options = options or ScanOptions()
    names = list(dict.fromkeys([*fields, *predicate_fields]))  # a field asked twice: read once
    file_fields = [f for f in names if f not in partition_types]
    leaves = [c.index for c in pf.schema.leaves if c.path[0] in file_fields]
    for batch in ([[rg] for rg in row_groups] if stream else
                  _sift_batches(pf, row_groups, leaves)):
        stats = ScanStats()
        ranges = sorted(chunk_range(pf.column_meta(rg, c)) for rg in batch for c in leaves)
        # Through the file, not read by pyarrow from the disk: planning may hold some
        # of these bytes already (dictionary pages), and none is read twice.
        image = located(pf, batch, _file_image, pf, ranges, stats, options.coalesce_gap)
        buffers = None
        if image is None:
            buffers = Buffers(pf, stats, options.coalesce_gap)
            located(pf, batch, buffers.fetch, ranges)
        t0 = time.perf_counter()
        # Small dictionaries' strings filtered as indices, cast once filtered.
        dictionary = dictionary_strings(pf, batch, file_fields)
        t = _read_sifted(pf, image, buffers, batch, file_fields, options.verify_checksums,
                         dictionary)
        for name in names:
            if name in partition_types:
                t = t.append_column(name, pa.array([partition.get(name)] * t.num_rows,
                                                   partition_types[name]))
        t = computable_table(t)  # filter has no kernel for views (conform restores them)
        kept = dense_strings(t.filter(to_arrow_mask(expr, t)), dictionary, pf)
        stats.decode_seconds += time.perf_counter() - t0
        stats.rows_out += kept.num_rows
        stats.row_groups_read += len(batch)
        stats.pages_read += sum(pf.data_page_count(rg, c) for rg in batch for c in leaves)
        yield kept.select(list(fields)), stats


def _sift_batches(pf: ParquetFile, row_groups: Sequence[int], leaves: Sequence[int]
                  ) -> list[list[int]]:
    """The row groups in runs of at most :data:`SIFT_BATCH_BYTES` of chunks (at least
    one row group each): one decode per run, and a file of many small row groups is
    not held compressed all at once."""
    sizes = [(rg, sum(chunk_range(pf.column_meta(rg, c))[1] for c in leaves))
             for rg in row_groups]
    return size_batches(sizes, SIFT_BATCH_BYTES)


def _read_sifted(pf: ParquetFile, image: pa.Buffer | None, buffers: Buffers | None,
                 rgs: list[int], file_fields: list[str], verify: bool,
                 dictionary: Sequence[str] = ()) -> pa.Table:
    try:
        if verify:
            check_chunks(pf, rgs, file_fields, buffers if image is None else
                         lambda o, n: memoryview(image)[o : o + n])
        source = pa.BufferReader(image) if image is not None else SourceFile(pf, buffers)
        reader = pq.ParquetFile(source, metadata=arrow_metadata(pf),
                                read_dictionary=list(dictionary) or None)
        return reader.read_row_groups(rgs, columns=file_fields, use_threads=False)
    except PqIndexError as e:
        raise e.located(path=pf.path) from None
    except DECODE_ERRORS as e:
        if len(rgs) > 1:
            for rg in rgs:  # name the row group that fails alone
                _read_sifted(pf, image, buffers, [rg], file_fields, verify, dictionary)
        raise _decode_error(pf, rgs, e) from e


def _file_image(pf: ParquetFile, ranges: Sequence[tuple[int, int]], stats: ScanStats,
                gap: int | None) -> pa.Buffer | None:
    """A local file up to the end of the last of ``ranges`` as one buffer, ``ranges``
    read into it at their offsets in one wave (the rest is never read: pyarrow reads
    the chunks its footer names, and these are all of them). pyarrow reads it
    natively: a small file's four row groups cost 0.25 ms against 0.7 through
    :class:`SourceFile`, which calls Python for every read. None for other stores,
    where the span would reserve too much memory, and for parquet-mr <= 1.2.8 files,
    whose chunks pyarrow reads past their declared end (their dictionary page header
    was not counted)."""
    hi = max((o + n for o, n in ranges), default=0)
    if (not isinstance(pf.source, LocalFileSource) or hi > SIFT_IMAGE_BYTES
            or _pads_chunks(pf.created_by)):
        return None
    t0 = time.perf_counter()
    image = pa.allocate_buffer(hi + _IMAGE_PAD)  # not zeroed: only ``ranges`` are read
    view = memoryview(image).cast("B")
    for o, n in ranges:  # a chunk read past its end finds zeros, not stale bytes
        view[o + n : o + n + _IMAGE_PAD] = bytes(min(_IMAGE_PAD, hi + _IMAGE_PAD - o - n))
    stats.data_bytes += sum(n for _, n in pf.read_into(ranges, view, gap))
    stats.fetch_seconds += time.perf_counter() - t0
    return image


@functools.lru_cache(maxsize=256)
def _pads_chunks(created_by: str | None) -> bool:
    """Whether pyarrow reads this writer's chunks past their declared length."""
    m = _PARQUET_MR.match(created_by or "")
    return m is not None and tuple(int(v) for v in m.groups()) < (1, 2, 9)


def read_whole_row_groups(
    pf: ParquetFile,
    row_groups: Sequence[int],
    fields: Sequence[str],
    partition: dict[str, Any],
    partition_types: dict[str, pa.DataType],
    stats: ScanStats,
    options: ScanOptions | None = None,
    map_fn: Callable[..., Iterable[Any]] = map,
) -> pa.Table:
    """All of :func:`iter_whole_row_groups` as one table; its costs added to ``stats``."""
    parts = []
    for t, st in iter_whole_row_groups(pf, row_groups, fields, partition, partition_types,
                                       options, map_fn):
        parts.append(t)
        merge_stats(stats, st)
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)
