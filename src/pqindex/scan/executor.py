"""Executing a file's access plan: fetch byte ranges, decode pages, late materialization.

Per row group that may match:

1. rows the page level could not decide (``maybe - all``) are checked exactly:
   the predicate columns' pages overlapping them are fetched and decoded, the
   predicate is evaluated with pyarrow.compute, giving the exact matching rows
   (together with ``all``, the rows every index agreed match);
2. only then are the projected columns' pages that hold those rows fetched,
   decoded and cut to the matching rows.

Byte ranges are computed first (a pure function of the plan and the offset
index), then coalesced by the source's policy and read — one counted request per
coalesced range. A column without an offset index is read as a whole chunk
through pyarrow.

:mod:`pqindex.scan.batch` runs the row groups of one file in *waves*, its steps
being :func:`exact_rows` and :func:`project` here.
Where :mod:`pqindex.scan.encoded` handles a chunk (numpy on the encoded pages),
it goes first and pyarrow decodes the rest.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pqindex.errors import DECODE_ERRORS, CorruptFileError, PqIndexError, translate
from pqindex.expr.bind import (
    BoundAnd,
    BoundExpr,
    BoundPredicate,
    BoundTrue,
    bound_leaves,
    has_condition,
)
from pqindex.expr.evaluate import to_arrow_mask
from pqindex.format import views
from pqindex.format.checksum import PageChecks
from pqindex.format.column_index import PageIndex
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.format.match import LeafOp, Match
from pqindex.format.row_ranges import RowRanges, Selection
from pqindex.format.schema import Codec, LeafColumn
from pqindex.format.value_type import Kind
from pqindex.io.source import LocalFileSource
from pqindex.plan.file_level import row_group_statistics
from pqindex.plan.planner import FilePlan, RowGroupPlan, dictionary_hits
from pqindex.plan.tree import select
from pqindex.scan import encoded, page_values
from pqindex.scan.chunk_match import few_matches, local_reader, match_chunk, on_values
from pqindex.scan.conjuncts import column_groups
from pqindex.scan.cut import (
    concat_pieces,
    cut,
    cut_whole,
    leaf_array,
    matched_ranges,
    ranges_from_indices,
    within,
)
from pqindex.scan.fetch import (
    Buffers,
    ScanOptions,
    ScanStats,
    SourceFile,
    arrow_metadata,
)
from pqindex.scan.page_decode import (
    decode_columns,
    decode_field_pages,
    decode_pages,
    field_byte_ranges,
    page_byte_ranges,
)
from pqindex.scan.whole import (
    dictionary_strings,
    iter_whole_row_groups,
    native_file,
    native_path,
    pyarrow_opens_free,
    read_native_ranges,
    read_whole_row_groups,
    side_by_side,
)

__all__ = [
    "RowGroupReader",
    "ScanOptions",
    "ScanStats",
    "at_row_group",
    "exact_rows",
    "implied_values",
    "iter_whole_row_groups",
    "predicate_leaves",
    "project",
    "pyarrow_opens_free",
    "read_row_group",
    "read_whole_row_groups",
    "scan_row_group",
    "uncertain_rows",
]

_T = TypeVar("_T")


# Rows of a projected column gathered one by one from its pages (see sparse_fields):
# at most one in this many rows of the pages they lie in. Measured on the issue's
# file, returning ``id`` and ``amount``: 2% of the rows 167 -> 112 ms, 10% 199 -> 152
# ms against decoding the pages whole and cutting; at 50% the two are even.
_SPARSE_RATIO = 4
# Share of a row group's rows from which its projected flat chunks are decoded whole
# by pyarrow and cut (RowGroupReader.flat_fields).
_DENSE_SHARE = 0.5
# Or share of its rows in the pages holding the wanted ones, when too many of those
# pages' rows are wanted to gather them (_SPARSE_RATIO): nearly the same pages are
# decoded either way, and pyarrow's one call over the chunks beats decoding them page
# by page (TPC-H Q10, 25-50% of rows spread over every page of 4 row groups).
_DENSE_PAGES = 0.5
# Share of a row group's rows from which a predicate on several columns is checked
# on their whole chunks (encoded where it can, else one pyarrow decode of them all), as
# for every row: the pages holding that many rows are most of the chunk anyway
# (TPC-H Q6 on the sorted copy: 92% of one row group's rows, two decimal columns).
_MOSTLY = 0.5
_CORES = os.cpu_count() or 1
# Dictionary pages (compressed bytes) worth a thread hand-off (~0.1 ms; 1 MiB: ~1 ms).
_SIDE_BY_SIDE_BYTES = 256 * 1024


class RowGroupReader:
    def __init__(
        self,
        pf: ParquetFile,
        plan: RowGroupPlan,
        schema: pa.Schema,
        stats: ScanStats,
        options: ScanOptions,
        buffers: Buffers | None = None,
    ) -> None:
        self.pf = pf
        self.rg = plan.index
        self.plan = plan
        # View types decoded as their large types (format/views.py); conform restores them.
        # Worked out once per schema a file is read with, not per row group.
        key = ("computable_schema", id(schema))
        known = pf.derived.get(key)
        if known is None or known[0] is not schema:  # the schema is kept: its id stays its
            known = pf.derived[key] = (schema, views.computable_schema(schema))
        self.schema = known[1]
        self.stats = stats
        self.buffers = buffers or Buffers(pf, stats, options.coalesce_gap)
        # verify_checksums: every page's CRC checked as its bytes are read (_view).
        self.checks = PageChecks(pf, plan.index) if options.verify_checksums else None
        self.n = pf.row_group_rows(plan.index)
        self._decoded: dict[int, dict[int, pa.Array]] = {}
        # leaf -> page -> (the array its decode gave, the page's offset in it)
        self._decoded_bases: dict[int, dict[int, tuple[pa.Array, int]]] = {}
        self._whole_cache: dict[str, pa.Array] = {}
        self._counted: dict[int, set[int]] = {}  # leaf -> data pages counted in pages_read
        self._dictionaries = page_values.Dictionaries.of(pf)
        self._native_checked: tuple[str | None] | None = None
        self.siblings = 1  # row groups decoded at the same time as this one
        # Whether projected string / binary views may stay views (cut gathers them
        # without a kernel): only where every table goes through dataset.schema.conform,
        # which restores the dataset's types; a cast to large strings and back cost
        # TPC-H Q1 a quarter of its CPU.
        self.keep_views = False
        # Whether sparse_fields may hand columns to other threads: not when row groups
        # fill the cores already (a thread started for a column waits for the GIL).
        self.columns_aside = True
        # (id(rows), the pages' first rows) -> (rows, the pages holding them): columns
        # with the same page boundaries, and each column's ranges then its decode, ask
        # alike (the rows are held: their id is not reused meanwhile).
        self._page_memo: dict[tuple[int, bytes], tuple[RowRanges, list[int]]] = {}
        self._lock = threading.Lock()  # encoded_match_job's bookkeeping

    def _count(self, col: int, pages: Iterable[int]) -> None:
        """Count pages read once each, however many paths decode them (a page the
        predicate pass decoded, then its whole chunk read for the output)."""
        seen = self._counted.setdefault(col, set())
        before = len(seen)
        seen.update(pages)
        self.stats.pages_read += len(seen) - before

    def release(self) -> None:
        """Drop the decoded pages kept for reuse (the row group is done)."""
        self._decoded.clear()
        self._decoded_bases.clear()
        self._whole_cache.clear()
        self._page_memo.clear()

    def _view(self, offset: int, length: int) -> bytes | memoryview:
        """The bytes of pages (a page range, a chunk) that decoders read, checked first
        when verifying."""
        view = self.buffers.view(offset, length)
        data = self.buffers(offset, length) if view is None else view
        if self.checks is not None:
            self.checks.pages(offset, data)
        return data

    def _encoded_pages(self, col: int, pages: list[int], target: pa.DataType) -> Any:
        """Pages of a flat fixed-width leaf decoded with numpy (None: use pyarrow)."""
        return page_values.decode_pages(
            self.pf, self.rg, col, pages, self._view, target, self._dictionaries
        )

    def _pages_for(
        self, col: int, rows: RowRanges
    ) -> tuple[list[int], np.ndarray, np.ndarray] | None:
        key = ("page_firsts", self.rg, col)
        known = self.pf.derived.get(key)  # per file: warm queries skip the rebuild
        if known is None:
            oi = self.pf.offset_index(self.rg, col)
            if oi is None:
                return None
            locs = oi.page_locations or []
            firsts = np.array([loc.first_row_index or 0 for loc in locs], dtype=np.int64)
            known = self.pf.derived[key] = (firsts, np.diff(np.append(firsts, self.n)),
                                            firsts.tobytes())
        firsts, counts, layout = known
        memo_key = (id(rows), layout)
        hit = self._page_memo.get(memo_key)
        if hit is not None and hit[0] is rows:
            return hit[1], firsts, counts
        pages = rows.overlapping_pages(firsts, self.n).tolist()
        self._page_memo[memo_key] = (rows, pages)
        return pages, firsts, counts

    def _sparse_pages(
        self, col: int, rows: RowRanges
    ) -> tuple[list[int], list[np.ndarray]] | None:
        """The pages of leaf ``col`` holding ``rows`` and the rows' positions in each,
        when so few rows of those pages are wanted that gathering just them beats
        decoding the pages whole (None otherwise)."""
        if col in self._decoded:
            return None
        found = self._pages_for(col, rows)
        if found is None or not found[0]:
            return None
        pages, firsts, counts = found
        if rows.count() * _SPARSE_RATIO > int(counts[pages].sum()):
            return None
        idx = rows.to_indices()
        cuts = np.searchsorted(idx, np.append(firsts[pages], self.n))
        at = [idx[cuts[i] : cuts[i + 1]] - firsts[p] for i, p in enumerate(pages)]
        return pages, at

    def locate_pages(self, names: Sequence[str], rows: RowRanges) -> None:
        """Page locations from the page headers for flat fields whose chunks have no
        offset index (pyarrow's default), when few of the rows are wanted: those rows
        are then taken from the pages holding them, not by decoding the chunks whole
        (the chunks are fetched as that would; the headers are read in memory)."""
        if rows.count() * _SPARSE_RATIO > self.n:
            return
        todo = []
        for name in names:
            leaf = self._flat_leaf(name)
            if leaf is None or name in self._whole_cache:
                continue
            col = leaf.index
            cc = self.pf.column_chunk(self.rg, col)
            if (cc.offset_index_offset is None and col not in self._decoded
                    and (self.rg, col) not in self.pf.derived.get("headers_walked", ())):
                todo.append((col, chunk_range(self.pf.column_meta(self.rg, col))))
        if not todo:
            return
        self.buffers.fetch([r for _c, r in todo])
        walked = self.pf.derived.setdefault("headers_walked", set())
        for col, (start, length) in todo:
            view = self.buffers.view(start, length)
            oi = encoded.header_offset_index(
                self.pf, self.rg, col, self.buffers(start, length) if view is None else view)
            if oi is not None:
                self.pf.adopt_offset_index(self.rg, col, oi)
            walked.add((self.rg, col))  # tried once per chunk: a failed walk is not redone

    def sparse_fields(self, names: Sequence[str], rows: RowRanges) -> dict[str, Any]:
        """Flat fixed-width fields of which only a few rows per page are wanted: just
        those rows gathered from the pages (page_values.decode_pages with positions), the
        pages' byte ranges fetched together. Fields it does not decode are left out."""
        todo = []
        for name in names:
            leaf = self._flat_leaf(name)
            if leaf is None or name in self._whole_cache:
                continue
            target = self.schema.field(name).type
            if not encoded.decodes_pages(self.pf, leaf.index, target):
                continue
            found = self._sparse_pages(leaf.index, rows)
            if found is not None:
                todo.append((name, leaf.index, target, *found))
        if not todo:
            return {}
        self.buffers.fetch([r for _n, col, _t, pages, _a in todo for r in page_byte_ranges(
            self.pf, self.rg, col, pages, prefix_needed=self._prefix_needed(col, pages))])
        t0 = time.perf_counter()
        out = {}
        jobs = [functools.partial(page_values.decode_pages, self.pf, self.rg, col, pages,
                                  self._view, target, self._dictionaries, at=at)
                for _n, col, target, pages, at in todo]
        # A large dictionary page still to decompress (one value needs all of it), or
        # pages decompressed whole (zstd: ~1 ms a MiB of output), are decoded on
        # another thread, beside the other columns (small ones here).
        big = [max(self._dictionary_bytes(col, pages), self._inflated_bytes(col, pages))
               >= _SIDE_BY_SIDE_BYTES for _n, col, _t, pages, _a in todo]
        if any(big) and len(jobs) > 1 and self.columns_aside:
            order = sorted(range(len(jobs)), key=lambda k: big[k])
            done = side_by_side([jobs[k] for k in order])
            arrays: list[Any] = [None] * len(jobs)
            for k, arr in zip(order, done, strict=True):
                arrays[k] = arr
        else:
            arrays = [job() for job in jobs]
        for (name, col, _t, pages, _a), arr in zip(todo, arrays, strict=True):
            if arr is not None:
                self._count(col, pages)
                out[name] = arr
        self.stats.decode_seconds += time.perf_counter() - t0
        return out

    def _inflates(self, col: int) -> bool:
        """Whether leaf ``col``'s pages are decompressed whole to take a few values: not
        uncompressed nor snappy ones (their wanted values are gathered)."""
        codec = self.pf.column_meta(self.rg, col).codec or 0
        return codec not in (Codec.UNCOMPRESSED, Codec.SNAPPY)

    def _inflated_bytes(self, col: int, pages: Sequence[int]) -> int:
        """About the bytes decompressing data ``pages`` of leaf ``col`` whole writes (the
        chunk's ratio applied to their stored sizes); 0 where :meth:`_inflates` is not."""
        oi = self.pf.held_offset_index(self.rg, col)
        if oi is None:
            return 0
        locs = oi.page_locations or []
        return self.inflated(col, sum(locs[p].compressed_page_size or 0
                                      for p in pages if p < len(locs)))

    def inflated(self, col: int, stored: int) -> int:
        """About the bytes ``stored`` bytes of leaf ``col``'s pages decompress to where
        they are decompressed whole (:meth:`_inflates`; the chunk's ratio), else 0."""
        if not self._inflates(col):
            return 0
        meta = self.pf.column_meta(self.rg, col)
        ratio = (meta.total_uncompressed_size or 0) / max(meta.total_compressed_size or 0, 1)
        return int(stored * max(ratio, 1.0))

    def projection_cost(self, names: Sequence[str], rows: RowRanges) -> int:
        """About the bytes projecting ``rows`` of top-level fields ``names`` decompresses
        whole (:meth:`_inflated_bytes` of the pages holding them)."""
        total = 0
        if rows.is_empty or rows.count() == self.n:
            return 0  # nothing, or whole chunks (read by pyarrow itself)
        for name in names:
            leaves = [c for c in self.pf.schema.leaves if c.path[0] == name]
            # Offset indexes already held only: an estimate is not worth a read.
            if (len(leaves) != 1 or not self._inflates(leaves[0].index)
                    or self.pf.held_offset_index(self.rg, leaves[0].index) is None):
                continue
            found = self._pages_for(leaves[0].index, rows)
            if found is not None:
                total += self._inflated_bytes(leaves[0].index, found[0])
        return total

    def _dictionary_bytes(self, col: int, pages: Sequence[int]) -> int:
        """Compressed bytes of the dictionary page decoding ``pages`` decompresses, or 0.
        0 for snappy too: the few entries wanted are gathered (``decompress.gather``),
        which costs less than handing the column to another thread (cold, a 1 MiB
        page's entries: 29.1 ms side by side against 28.5 here for the issue file's
        rare value, 6.9 against 6.7 for an indexed lookup, 100 runs)."""
        if (self._dictionaries.has((self.rg, col))
                or (self.pf.column_meta(self.rg, col).codec or 0) == Codec.SNAPPY
                or not encoded.dictionary_needed(self.pf, self.rg, col, pages)):
            return 0
        ext = self.pf.dictionary_extent(self.rg, col)
        return ext[1] if ext is not None else 0

    def whole_fields(self, names: Sequence[str], *, as_dictionary: bool = False
                     ) -> dict[str, Any]:
        """Top-level fields of the whole row group, read by pyarrow itself.

        Used when every row is wanted (no offset index needed: a full scan reads no
        index bytes) and for chunks without an offset index. pyarrow gets the
        footer we already decoded and reads through the counting source.
        """
        todo = [n for n in names if n not in self._whole_cache]
        if todo:
            ranges = [r for n in todo for r in self._chunk_ranges(n)]
            native = self._native is not None and all(self._native_whole(n) for n in todo)
            if not native:
                # Fetch the chunks ourselves (coalesced, once); pyarrow reads from memory.
                self.buffers.fetch(ranges)
            for off, size in ranges if self.checks is not None else ():
                self._view(off, size)  # natively read chunks are read once more to check
            t0 = time.perf_counter()
            # Dictionary-encoded string chunks stay dictionaries for predicates: one
            # comparison per distinct value instead of one per row; and for output
            # where the dictionary is small, cast once cut (whole.dictionary_strings).
            small = set(dictionary_strings(self.pf, [self.rg], todo))
            dictionary = [
                n for n in todo
                if n in small or (as_dictionary and self._dictionary_string(n))
            ] or None
            if native and self._native is not None:
                # A local file: pyarrow reads the chunks itself (no copy through Python).
                with native_file(self.pf) as f:
                    reader = pq.ParquetFile(f, metadata=arrow_metadata(self.pf),
                                            pre_buffer=True, read_dictionary=dictionary)
                    table = reader.read_row_group(self.rg, columns=todo,
                                                  use_threads=len(todo) > 1)
                read_native_ranges(self.pf, ranges, self.buffers.gap, self.stats)
                if self.buffers.first_native_read():
                    self.pf.source.stats.record_wave()
            else:
                reader = pq.ParquetFile(
                    SourceFile(self.pf, self.buffers), metadata=arrow_metadata(self.pf),
                    pre_buffer=True, read_dictionary=dictionary,
                )
                table = reader.read_row_group(self.rg, columns=todo, use_threads=len(todo) > 1)
            for n in todo:
                column = table.column(n)
                # One chunk (one row group) is used as it is: combine_chunks would copy it.
                self._whole_cache[n] = (column.chunk(0) if column.num_chunks == 1
                                        else column.combine_chunks())
                for leaf in self.pf.schema.leaves:
                    if leaf.path[0] == n:
                        self._count(leaf.index,
                                    range(self.pf.data_page_count(self.rg, leaf.index)))
            self.stats.decode_seconds += time.perf_counter() - t0
        return {n: self._whole_cache[n] for n in names}

    def _dense(self, rows: RowRanges) -> bool:
        """Whether ``rows`` are so many of the row group's that its projected chunks
        are decoded whole and cut (:meth:`flat_fields`)."""
        return rows.count() >= self.n * _DENSE_SHARE

    def _dense_field(self, name: str, rows: RowRanges) -> bool:
        """Whether top-level field ``name`` is decoded whole and cut to ``rows``
        (:meth:`flat_fields`): when ``rows`` are most of the row group's, or when the
        pages holding them are (a flat field) and too many of those pages' rows are
        wanted to gather them (:meth:`_sparse_pages`)."""
        if rows.count() == self.n or self._dense(rows):
            return True
        leaf = self._flat_leaf(name)
        if leaf is None or leaf.index in self._decoded:
            return False
        found = self._pages_for(leaf.index, rows)
        if found is None or not found[0]:
            return False
        pages, _firsts, counts = found
        span = int(counts[pages].sum())
        return span >= self.n * _DENSE_PAGES and rows.count() * _SPARSE_RATIO > span

    def mostly(self, rows: RowRanges, expr: BoundExpr | None) -> bool:
        """Whether the predicate ``expr`` on several columns is checked on their whole
        chunks for ``rows`` (exact_rows; see _MOSTLY)."""
        if rows.count() == self.n:
            return True
        if expr is None or isinstance(expr, BoundTrue) or rows.count() < self.n * _MOSTLY:
            return False
        return len(bound_leaves(expr)) > 1

    def _flat_leaf(self, name: str) -> LeafColumn | None:
        """The one leaf of top-level field ``name`` when the field is flat (not a
        struct or list), else None."""
        leaves = [c for c in self.pf.schema.leaves if c.path[0] == name]
        return leaves[0] if len(leaves) == 1 and len(leaves[0].path) == 1 else None

    def _dictionary_string(self, name: str) -> bool:
        leaf = self._flat_leaf(name)
        return (
            leaf is not None
            and leaf.element.type == 6  # BYTE_ARRAY
            and self.pf.all_dictionary_encoded(self.rg, leaf.index) is True
        )

    def _whole(self, field_name: str, *, as_dictionary: bool = False) -> pa.Array:
        arr: pa.Array = self.whole_fields([field_name], as_dictionary=as_dictionary)[field_name]
        return arr if as_dictionary else self._typed(field_name, arr)

    def _typed(self, field_name: str, arr: Any) -> Any:
        """A decoded field's values as its output type (a dictionary read cast back)."""
        target = self.schema.field(field_name).type
        if arr.type != target and not (
                self.keep_views and views.base_type(arr.type) == target):
            arr = views.cast(arr, target)
        return arr

    def _decode_leaf(
        self, col: int, rows: RowRanges, target: pa.DataType, *, as_dictionary: bool = False
    ) -> pa.Array | None:
        """One leaf's pages overlapping ``rows``, cut to them; None without an offset index."""
        found = self._pages_for(col, rows)
        if found is None:
            return None
        pages, firsts, counts = found
        if not pages:
            return pa.array([], type=target)
        # Pages decoded earlier (by the predicate pass) are reused; only the rest is
        # decoded now, and each page is counted once.
        cache = self._decoded.setdefault(col, {})
        missing = [p for p in pages if p not in cache]
        t0 = time.perf_counter()
        arr = None
        if missing:
            self.buffers.fetch(page_byte_ranges(self.pf, self.rg, col, missing,
                                                prefix_needed=self._prefix_needed(col, missing)))
            arr = self._encoded_pages(col, missing, target)
            if arr is None:
                arr, _ = decode_pages(
                    self.pf, self.rg, col, missing, self._view, arrow_type=target,
                    as_dictionary=as_dictionary,
                )
            self._count(col, missing)
            start = 0
            bases = self._decoded_bases.setdefault(col, {})
            for p in missing:
                cache[p] = arr.slice(start, int(counts[p]))
                bases[p] = (arr, start)
                start += int(counts[p])
        if arr is None or len(missing) != len(pages):
            # Some pages decoded before: a run of one earlier decode is sliced out of
            # it (TPC-H Q6 on a sorted copy: the projected discount's pages the
            # predicate decoded); else the pieces are joined (a copy).
            arr = self._one_run(col, pages, counts)
            if arr is None:
                pieces = [cache[p] for p in pages]
                arr = pieces[0] if len(pieces) == 1 else concat_pieces(pieces, target)
        out = cut(arr, firsts[pages], counts[pages], rows)
        if not as_dictionary and out.type != target:
            out = views.cast(out, target)
        self.stats.decode_seconds += time.perf_counter() - t0
        return out

    def _one_run(self, col: int, pages: Sequence[int], counts: np.ndarray) -> pa.Array | None:
        """``pages`` as one slice of the array one earlier decode gave, when they lie in
        it one after another; else None."""
        bases = self._decoded_bases.get(col, {})
        first = bases.get(pages[0])
        if first is None:
            return None
        base, start = first
        at = start
        for p in pages:
            known = bases.get(p)
            if known is None or known[0] is not base or known[1] != at:
                return None
            at += int(counts[p])
        return base.slice(start, at - start)

    def _partly_decoded(self, field_name: str) -> bool:
        """Whether the predicate pass decoded pages of this field: then the rest of its
        pages are decoded on their own, not the whole chunk fetched and read again."""
        return any(self._decoded.get(c.index) for c in self.pf.schema.leaves
                   if c.path[0] == field_name)

    def field(self, field_name: str, rows: RowRanges) -> pa.Array:
        """A top-level field's values at ``rows`` (sorted row numbers of this row group)."""
        leaf_cols = [c.index for c in self.pf.schema.leaves if c.path[0] == field_name]
        target = self.schema.field(field_name).type
        whole_rg = (np.zeros(1, dtype=np.int64), np.array([self.n], dtype=np.int64))
        if (rows.count() == self.n and not self._partly_decoded(field_name)) or (
            field_name in self._whole_cache
        ):
            # Cut first, then cast (a dictionary read for the predicate): only the
            # wanted rows are converted.
            out = cut(self.whole_fields([field_name])[field_name], *whole_rg, rows)
            return out if out.type == target else views.cast(out, target)
        if len(leaf_cols) == 1:
            # A dictionary chunk's strings stay indices until cut to the wanted rows.
            out = self._decode_leaf(leaf_cols[0], rows, target,
                                    as_dictionary=self._dictionary_string(field_name))
            if out is not None:
                return out if out.type == target else views.cast(out, target)
        elif all(self.pf.offset_index(self.rg, c) is not None for c in leaf_cols):
            # Leaves of one field paginate differently: decode their whole chunks.
            per_leaf = []
            for c in leaf_cols:
                oi = self.pf.offset_index(self.rg, c)
                assert oi is not None
                per_leaf.append(list(range(len(oi.page_locations or []))))
            self.buffers.fetch(field_byte_ranges(self.pf, self.rg, leaf_cols, per_leaf))
            t0 = time.perf_counter()
            arr = decode_field_pages(
                self.pf, self.rg, leaf_cols, per_leaf, self._view, arrow_type=target
            )
            for c, pages in zip(leaf_cols, per_leaf, strict=True):
                self._count(c, pages)
            out = cut(arr, *whole_rg, rows)
            self.stats.decode_seconds += time.perf_counter() - t0
            return out
        return cut(self._whole(field_name), *whole_rg, rows)

    def _flat_groups(
        self, names: Sequence[str], rows: RowRanges
    ) -> dict[tuple[tuple[int, int], ...], list[tuple[str, int, list[int], Any, Any]]]:
        """Flat single-leaf fields not decoded yet, grouped by the row spans of their
        pages overlapping ``rows`` (a group's pages line up)."""
        groups: dict[tuple[tuple[int, int], ...], list[tuple[str, int, list[int], Any, Any]]] = {}
        for name in names:
            leaf = self._flat_leaf(name)
            if (
                leaf is None
                or leaf.index in self._decoded
                or name in self._whole_cache
                or self._dictionary_string(name)
            ):
                # Nested, or already decoded by the predicate pass; dictionary strings
                # are cut as indices first (field).
                continue
            found = self._pages_for(leaf.index, rows)
            if found is None or not found[0]:
                continue
            pages, firsts, counts = found
            key = tuple(
                (int(firsts[p]), int(firsts[p] + counts[p])) for p in pages
            )
            groups.setdefault(key, []).append((name, leaf.index, pages, firsts, counts))
        return groups

    def _decode_group(self, members: list[tuple[str, int, list[int], Any, Any]]) -> list[Any]:
        """Decode the pages of aligned columns in one pass; the pages are kept for reuse."""
        cols = [m[1] for m in members]
        ranges = [r for m in members for r in page_byte_ranges(
            self.pf, self.rg, m[1], m[2], prefix_needed=self._prefix_needed(m[1], m[2]))]
        self.buffers.fetch(ranges)
        t0 = time.perf_counter()
        types = [self.schema.field(m[0]).type for m in members]
        arrays = [self._encoded_pages(m[1], m[2], t) for m, t in zip(members, types, strict=True)]
        rest = [i for i, a in enumerate(arrays) if a is None]
        if rest:
            for i, arr in zip(rest, decode_columns(
                self.pf, self.rg, [cols[i] for i in rest], [members[i][2] for i in rest],
                self._view, arrow_types=[types[i] for i in rest],
            ), strict=True):
                arrays[i] = arr
        for (_name, col, pages, _firsts, counts), arr in zip(members, arrays, strict=True):
            self._count(col, pages)
            cache = self._decoded.setdefault(col, {})
            bases = self._decoded_bases.setdefault(col, {})
            start = 0
            for p in pages:
                cache[p] = arr.slice(start, int(counts[p]))
                bases[p] = (arr, start)
                start += int(counts[p])
        self.stats.decode_seconds += time.perf_counter() - t0
        return arrays

    def flat_fields(self, names: Sequence[str], rows: RowRanges) -> dict[str, Any]:
        """Flat single-leaf fields whose pages for ``rows`` line up, decoded together."""
        out: dict[str, Any] = {}
        whole = [n for n in names if not self._partly_decoded(n) and self._dense_field(n, rows)]
        if whole:
            # Most rows (or most pages) wanted: pyarrow decodes the chunks whole, all of
            # them in one call (its threads over the columns), then they are cut; Q1 of
            # TPC-H (98% of the rows) page by page cost twice the CPU, column by column 1.4x.
            # Dictionary strings are cut as indices, then cast (only the wanted rows).
            raw = self.whole_fields(whole)
            out = {n: self._typed(n, a) for n, a in cut_whole(raw, self.n, rows).items()}
            if rows.count() == self.n or self._dense(rows):
                return out  # the rest (partly decoded by the predicate pass): field()
            names = [n for n in names if n not in out]
        self.locate_pages(names, rows)
        out.update(self.sparse_fields(names, rows))
        names = [n for n in names if n not in out]
        for members in self._flat_groups(names, rows).values():
            if len(members) < 2:
                continue
            arrays = self._decode_group(members)
            for (name, _col, pages, firsts, counts), arr in zip(members, arrays, strict=True):
                out[name] = cut(arr, firsts[pages], counts[pages], rows)
        return out

    def whole_on_pages(self, col: int, target: pa.DataType, expr: BoundExpr | None) -> bool:
        """Whether :meth:`encoded_matches` evaluates ``expr`` on the chunk's pages."""
        return encoded.worth_matching(self.pf, self.rg, col, target, whole=True,
                                      on_values=expr is not None and on_values(expr, target),
                                      few=expr is not None and few_matches(expr))

    def encoded_matches(self, expr: BoundExpr, col: int) -> np.ndarray | None:
        """Rows of the whole row group where ``expr``, a predicate on the flat leaf
        ``col`` alone, holds: evaluated on the encoded pages (see
        :mod:`pqindex.scan.encoded`); None where pyarrow decodes instead."""
        job = self.encoded_match_job(expr, col)
        return None if job is None else job()

    def encoded_match_job(self, expr: BoundExpr, col: int
                          ) -> Callable[[], np.ndarray | None] | None:
        """:meth:`encoded_matches` as a job: its chunk read and counted here, the
        match run (and counted) when the job is called, on any thread; None where
        pyarrow decodes instead."""
        leaf = self.pf.leaf(col)
        name = leaf.path[0]
        target = self.schema.field(name).type
        if name in self._whole_cache or not self.whole_on_pages(col, target, expr):
            return None
        start, length = chunk_range(self.pf.column_meta(self.rg, col))
        raw: bytes | memoryview | Callable[[], encoded.Read]
        if self._native_whole(name):
            # A local file's chunk is read by this task, side by side with the others'
            # decoding; counted as one request, as pyarrow's own reads are.
            read_native_ranges(self.pf, [(start, length)], self.buffers.gap, self.stats)
            if self.buffers.first_native_read():
                self.pf.source.stats.record_wave()
            source = self.pf.source
            assert isinstance(source, LocalFileSource)
            raw = functools.partial(local_reader, source, start)
        else:
            self.buffers.fetch([(start, length)])
            view = self.buffers.view(start, length)
            raw = self.buffers(start, length) if view is None else view
        if self.checks is not None:
            self._view(start, length)  # a local chunk read in windows: read once more whole

        def job() -> np.ndarray | None:
            t0 = time.perf_counter()
            rows = match_chunk(self.pf, self.rg, col, target, expr, raw, self.siblings)
            with self._lock:  # jobs of one row group may run side by side
                if rows is not None:
                    self._count(col, range(self.pf.data_page_count(self.rg, col)))
                self.stats.decode_seconds += time.perf_counter() - t0
            return rows

        return job

    def encoded_page_matches(self, expr: BoundExpr, col: int, rows: RowRanges
                             ) -> np.ndarray | None:
        """Rows of the pages of flat leaf ``col`` overlapping ``rows`` where ``expr``,
        a predicate on that leaf alone, holds: evaluated on those encoded pages (an
        all-dictionary chunk: once per dictionary entry); None where pyarrow decodes."""
        leaf = self.pf.leaf(col)
        name = leaf.path[0]
        target = self.schema.field(name).type
        if (name in self._whole_cache or col in self._decoded
                or not encoded.worth_matching(self.pf, self.rg, col, target)):
            return None
        found = self._pages_for(col, rows)
        if found is None or not found[0]:
            return None
        pages = found[0]
        self.buffers.fetch(page_byte_ranges(self.pf, self.rg, col, pages, prefix_needed=True))
        t0 = time.perf_counter()
        out = encoded.matching_page_rows(
            self.pf, self.rg, col, target, pages, self._view,
            lambda arr: to_arrow_mask(expr, pa.table({name: arr})),
            dictionary_hits(self.pf, self.rg, col, expr),
        )
        if out is not None:
            self._count(col, pages)
        self.stats.decode_seconds += time.perf_counter() - t0
        return out

    def leaf_values(self, col: int, rows: RowRanges) -> Any:
        """The values of one leaf at ``rows`` (struct parents' nulls applied)."""
        leaf = self.pf.leaf(col)
        target = self.schema.field(leaf.path[0]).type
        if rows.count() == self.n or leaf.path[0] in self._whole_cache:
            whole_rg = (np.zeros(1, dtype=np.int64), np.array([self.n], dtype=np.int64))
            arr = cut(self._whole(leaf.path[0], as_dictionary=True), *whole_rg, rows)
            return leaf_array(arr, leaf.path)
        dictionary = self.pf.all_dictionary_encoded(self.rg, col) is True
        arr = self._decode_leaf(col, rows, target, as_dictionary=dictionary)
        if arr is None:
            arr = self.field(leaf.path[0], rows)
        return leaf_array(arr, leaf.path)


    # Byte ranges the methods above will fetch, computed ahead so that the row groups
    # of a file can be fetched together in one wave. They mirror the methods' choices;
    # anything missed is still fetched on demand (one more wave, never a wrong row).

    def _chunk_ranges(self, field_name: str) -> list[tuple[int, int]]:
        return [
            chunk_range(self.pf.column_meta(self.rg, c.index))
            for c in self.pf.schema.leaves
            if c.path[0] == field_name
        ]

    @property
    def _native(self) -> str | None:
        """The local file pyarrow may read itself (checked once, when first needed)."""
        if self._native_checked is None:
            self._native_checked = (native_path(self.pf),)
        return self._native_checked[0]

    def _native_whole(self, field_name: str) -> bool:
        """Whether :meth:`whole_fields` has pyarrow read the field's chunks from the local
        file itself: none of their bytes is held (they would be read twice)."""
        return self._native is not None and not any(
            self.pf.holds_any(o, n) or self.buffers.holds_any(o, n)
            for o, n in self._chunk_ranges(field_name))

    def _whole_ranges(self, field_name: str) -> list[tuple[int, int]]:
        """What :meth:`whole_fields` fetches for a field (nothing when pyarrow reads the
        local file itself)."""
        return [] if self._native_whole(field_name) else self._chunk_ranges(field_name)

    def field_ranges(self, field_name: str, rows: RowRanges) -> list[tuple[int, int]]:
        """What :meth:`field` (and :meth:`flat_fields`) fetch for ``rows``."""
        if rows.is_empty:
            return []
        leaf_cols = [c.index for c in self.pf.schema.leaves if c.path[0] == field_name]
        if (rows.count() == self.n or field_name in self._whole_cache or not leaf_cols
                or (self._flat_leaf(field_name) is not None
                    and not self._partly_decoded(field_name)
                    and self._dense_field(field_name, rows))):
            return self._whole_ranges(field_name)
        if len(leaf_cols) == 1:
            found = self._pages_for(leaf_cols[0], rows)
            if found is not None:
                return page_byte_ranges(self.pf, self.rg, leaf_cols[0], found[0],
                                        prefix_needed=self._prefix_needed(leaf_cols[0], found[0]))
            return self._whole_ranges(field_name)
        ois = [self.pf.offset_index(self.rg, c) for c in leaf_cols]
        if all(oi is not None for oi in ois):
            return field_byte_ranges(
                self.pf, self.rg, leaf_cols,
                [list(range(len(oi.page_locations or []))) for oi in ois if oi is not None],
            )
        return self._whole_ranges(field_name)

    def leaf_ranges(self, col: int, rows: RowRanges, expr: BoundExpr | None = None
                    ) -> list[tuple[int, int]]:
        """What :meth:`leaf_values` (or, given the predicate ``expr``,
        :meth:`encoded_matches`) fetches for ``rows``."""
        if rows.is_empty:
            return []
        leaf = self.pf.leaf(col)
        if leaf.path[0] in self._whole_cache or self.mostly(rows, expr):
            target = self.schema.field(leaf.path[0]).type
            if leaf.path[0] not in self._whole_cache and self.whole_on_pages(
                    col, target, expr):
                # Evaluated on the encoded pages: a local file's chunk is read there, by
                # the row group's task (see encoded_matches).
                return [] if self._native_whole(leaf.path[0]) else self._chunk_ranges(
                    leaf.path[0])
            return self._whole_ranges(leaf.path[0])
        found = self._pages_for(col, rows)
        if found is not None:
            # Predicates on all-dictionary chunks run on the encoded pages, dictionary
            # page included (encoded.matching_rows).
            keep = self._prefix_needed(col, found[0]) or self.pf.all_dictionary_encoded(
                self.rg, col)
            return page_byte_ranges(self.pf, self.rg, col, found[0], prefix_needed=keep is True)
        return self.field_ranges(leaf.path[0], rows)

    def _prefix_needed(self, col: int, pages: Sequence[int]) -> bool:
        """Whether the chunk's dictionary page must be fetched: not when numpy decoded
        it before (warm queries; only ``page_values.decode_pages`` fills that cache), nor
        for pages past the writer's fallback to PLAIN. Were a decoder to need it after
        all, the page is read on demand (one more request)."""
        if self._dictionaries.has((self.rg, col)):
            return False
        target = self.schema.field(self.pf.leaf(col).path[0]).type
        # Only numpy's decode reads the dictionary lazily (pyarrow's wants it in front).
        return not encoded.decodes_pages(self.pf, col, target) or encoded.dictionary_needed(
            self.pf, self.rg, col, pages)


def predicate_leaves(pf: ParquetFile, expr: BoundExpr) -> list[int]:
    """File leaf columns the exact predicate check reads."""
    n_leaves = len(pf.schema.leaves)
    return sorted({leaf.index for leaf in bound_leaves(expr) if leaf.index < n_leaves})


def uncertain_rows(plan: RowGroupPlan, expr: BoundExpr) -> RowRanges:
    """Rows whose predicate must be evaluated (none for a predicate-free scan)."""
    if plan.maybe.is_empty or isinstance(expr, BoundTrue):
        return RowRanges.empty()
    return plan.maybe - plan.all


def _match_encoded(reader: RowGroupReader, col: int, fields: Sequence[str]) -> bool:
    """Whether the predicate on leaf ``col`` may run on its encoded pages: always when
    the column is not returned; when it is, only on an all-dictionary chunk, where the
    match costs one comparison per entry and a scan of the indices, and the returned
    values are then decoded from the pages holding matches only."""
    pf = reader.pf
    return pf.leaf(col).path[0] not in fields or pf.all_dictionary_encoded(
        reader.rg, col) is True


def exact_rows(
    reader: RowGroupReader,
    expr: BoundExpr,
    fields: Sequence[str],
    partition: dict[str, Any],
    partition_types: dict[str, pa.DataType],
    stats: ScanStats,
) -> RowRanges:
    """The rows of the row group where ``expr`` holds: ``all`` plus the rows of
    ``maybe - all`` where the exact check passes. ``fields`` are the projected ones
    (a predicate column among them is decoded once, for both)."""
    pf, plan = reader.pf, reader.plan
    exact = plan.all
    uncertain = plan.maybe - plan.all
    n_leaves = len(pf.schema.leaves)
    # The columns the exact check reads: its predicates' and its conditions'.
    read = [] if isinstance(expr, BoundTrue) else bound_leaves(expr)
    # The encoded paths evaluate on dictionary entries and leave null rows out: a
    # condition on an expression (coalesce, IS NULL of a sum) is evaluated decoded.
    one = len(read) == 1 and not has_condition(expr)
    found = None
    # Most rows uncertain, several columns: checked as if every row were (see _MOSTLY);
    # by columns on their encoded chunks only without a conjunct over several columns,
    # whose columns are decoded whole anyway (TPC-H Q12: 79 ms of CPU that way, 136 by
    # columns first).
    mostly = uncertain.count() == reader.n or (
        len(read) > 1 and not uncertain.is_empty and reader.mostly(uncertain, expr))
    if uncertain.count() == reader.n and one and (
        read[0].index < n_leaves and _match_encoded(reader, read[0].index, fields)
    ):
        # Every row of the row group, one column: evaluated on its encoded pages (a
        # returned one only on dictionary pages, see _match_encoded).
        found = reader.encoded_matches(expr, read[0].index)
    elif not uncertain.is_empty and one and (
        read[0].index < n_leaves and _match_encoded(reader, read[0].index, fields)
    ):
        # Some pages, the same way (rows of those pages outside ``uncertain`` dropped).
        found = reader.encoded_page_matches(expr, read[0].index, uncertain)
        if found is not None:
            found = within(uncertain, found)
    if found is not None:
        exact = exact | ranges_from_indices(found)
    elif mostly and len(read) > 1 and (uncertain.count() == reader.n or column_groups(
            expr, n_leaves).rest is None) and (
            (by_columns := _rows_by_columns(reader, expr, fields, partition,
                                            partition_types, stats, uncertain)) is not None):
        exact = exact | by_columns
    elif not uncertain.is_empty and not isinstance(expr, BoundTrue):
        if mostly:
            _decode_whole(reader, expr, along=_along(reader, expr, fields))
        exact = exact | _checked(reader, expr, uncertain, partition, partition_types, stats)
        if mostly and reader.n:
            with contextlib.suppress(TypeError):  # an unhashable literal: not kept
                rates = pf.derived.setdefault("exact_pass_rates", {})
                if len(rates) < _PASS_RATES_KEPT:
                    rates[expr] = exact.count() / reader.n
    elif not uncertain.is_empty:
        exact = plan.maybe
    return exact


def _along(reader: RowGroupReader, expr: BoundExpr, fields: Sequence[str]) -> list[str]:
    """Projected flat fields decoded whole in the same pyarrow call as the predicate's
    columns (one pass, not two): when the predicate passed at least ``_DENSE_SHARE``
    of the file's last row group checked this way (their chunks would be decoded whole
    for the output anyway, :meth:`RowGroupReader.flat_fields`), and pyarrow reads the
    local file itself (no wave of fetches is planned for them). TPC-H Q4: 60% of the
    rows pass."""
    try:
        rate = reader.pf.derived.get("exact_pass_rates", {}).get(expr)
    except TypeError:
        return []
    if rate is None or rate < _DENSE_SHARE:
        return []
    out = [f for f in fields if f in reader.schema.names and reader._flat_leaf(f) is not None
           and f not in reader._whole_cache]
    return out if all(reader._native_whole(f) for f in out) else []


def _checked(reader: RowGroupReader, expr: BoundExpr, rows: RowRanges,
             partition: dict[str, Any], partition_types: dict[str, pa.DataType],
             stats: ScanStats) -> RowRanges:
    """The ``rows`` where ``expr`` holds: its columns decoded there, then evaluated
    by pyarrow.compute."""
    n_leaves = len(reader.pf.schema.leaves)
    cols: dict[str, Any] = {}
    for leaf in bound_leaves(expr):
        name = leaf.name
        if leaf.index >= n_leaves:
            value = partition.get(name)
            cols[name] = pa.array([value] * rows.count(), type=partition_types[name])
        else:
            cols[name] = reader.leaf_values(leaf.index, rows)
    table = pa.table(cols) if cols else pa.table({"_": pa.nulls(rows.count())})
    t0 = time.perf_counter()
    matched = matched_ranges(rows, to_arrow_mask(expr, table))
    stats.decode_seconds += time.perf_counter() - t0
    return matched


def _rows_by_columns(reader: RowGroupReader, expr: BoundExpr, fields: Sequence[str],
                     partition: dict[str, Any], partition_types: dict[str, pa.DataType],
                     stats: ScanStats, within_rows: RowRanges) -> RowRanges | None:
    """The rows of ``within_rows`` where ``expr`` holds, its conjuncts grouped by
    column (:mod:`pqindex.scan.conjuncts`): each group that runs on its column's
    encoded pages is evaluated there, the most selective first (as measured on the
    file's earlier row groups), their rows intersected, and no later group once none
    is left; the other conjuncts are evaluated by pyarrow on the columns decoded
    whole. None when no group runs on encoded pages (the caller decodes the columns
    as before)."""
    pf = reader.pf
    groups = column_groups(expr, len(pf.schema.leaves))
    rates: dict[Any, float] = pf.derived.setdefault("conjunct_pass_rates", {})
    encodable: list[tuple[int, BoundExpr]] = []
    later: list[BoundExpr] = [] if groups.rest is None else [groups.rest]
    for col, e in groups.by_column:
        target = reader.schema.field(pf.leaf(col).path[0]).type
        if _match_encoded(reader, col, fields) and reader.whole_on_pages(col, target, e):
            encodable.append((col, e))
        else:
            later.append(e)
    if not encodable:
        return None
    encodable.sort(key=lambda ce: _rate(rates, ce[1]))
    n = reader.n
    passed: np.ndarray | None = None
    # Rows of groups checked only where their page index leaves them uncertain.
    bounds: list[RowRanges] = []
    proven_any = False
    whole: list[tuple[int, BoundExpr]] = []  # groups checked on their whole chunks
    for col, e in encodable:
        proven = _proven_rows(reader, col, e)
        if not proven.is_empty:
            edge = within_rows - proven
            if edge.is_empty:
                proven_any = True  # holds on every row checked (TPC-H Q6's l_shipdate)
                continue
            if edge.count() * 2 <= within_rows.count():
                found_edge = reader.encoded_page_matches(e, col, edge)
                if found_edge is not None:
                    bounds.append(proven | ranges_from_indices(within(edge, found_edge)))
                    continue
        whole.append((col, e))
    results: Iterable[tuple[BoundExpr, np.ndarray | None]]
    if len(whole) > 1 and reader.siblings < _CORES:
        # Fewer row groups than cores: the groups' chunks are matched side by side
        # (dictionary chunks are not split into spans; TPC-H Q6's one row group).
        jobs = [(e, reader.encoded_match_job(e, col)) for col, e in whole]
        later += [e for e, job in jobs if job is None]
        todo = [(e, job) for e, job in jobs if job is not None]
        results = zip([e for e, _ in todo], side_by_side([job for _, job in todo]),
                      strict=True)
    else:
        results = ((e, reader.encoded_matches(e, col)) for col, e in whole)
    for e, rows in results:  # the lazy one: none after an empty result
        if rows is None:
            later.append(e)
            continue
        if len(rates) < _PASS_RATES_KEPT:
            with contextlib.suppress(TypeError):  # an unhashable literal: not kept
                rates[e] = rows.size / n if n else 0.0
        if passed is None:
            passed = rows
        else:
            # Both ascending and unique: a membership mask keeps it linear.
            seen = np.zeros(n, dtype=np.bool_)
            seen[rows] = True
            passed = passed[seen[passed]]
        if not passed.size:
            break
    if passed is None and not bounds and not proven_any:
        return None
    if passed is None:
        found = within_rows
    else:
        found = ranges_from_indices(passed)
        if within_rows.count() != n:
            found = found & within_rows  # the encoded groups ran on the whole chunks
    for b in bounds:
        found = found & b
    if later and not found.is_empty:
        rest = later[0]
        for e in later[1:]:
            rest = BoundAnd(rest, e)
        # The other columns are read whole, as the predicate wave fetched them (their
        # pages for the surviving rows only would be one more wave), and evaluated at
        # the surviving rows only (TPC-H Q12: 3% of them).
        _decode_whole(reader, rest, fetched=True)
        found = _checked(reader, rest, found, partition, partition_types, stats)
    return found


def _proven_rows(reader: RowGroupReader, col: int, expr: BoundExpr) -> RowRanges:
    """Rows of the row group where ``expr``, conjuncts on leaf ``col`` alone, holds
    by that leaf's statistics or its page index (pages all of whose rows match):
    those rows need no check. Only a page index the planner already parsed is asked
    (no read, no parse here); pages whose bounds are not trusted prove nothing
    (PageIndex.reason)."""
    pf, rg, n = reader.pf, reader.rg, reader.n
    pi: PageIndex | None = pf.derived.get(("page_index", rg, col))
    if pi is not None and pi.reason is not None:
        pi = None

    def leaf_select(pred: BoundPredicate) -> Selection:
        if pred.leaf.index != col:
            return Selection.unknown(n)
        ev = row_group_statistics(pf, rg, pred.leaf)
        if ev is not None and ev.match(pred) == Match.ALL:
            return Selection.everything(n)
        if pi is None:
            return Selection.unknown(n)
        return pi.rows_for(pi.matching_pages(pred.op, pred.keys))

    try:
        return select(expr, leaf_select, n).all
    except (TypeError, ValueError):  # a literal the bounds do not compare with
        return RowRanges.empty()


def _decode_whole(reader: RowGroupReader, expr: BoundExpr, fetched: bool = False,
                  along: Sequence[str] = ()) -> None:
    """The whole chunks of ``expr``'s file columns decoded by pyarrow in one call (its
    threads over the columns; one at a time cost TPC-H Q4 ~1.5x), kept for
    :meth:`RowGroupReader.leaf_values`. ``fetched``: the predicate wave fetched the
    chunks whole, so one column is decoded whole too (its pages for the surviving rows
    only would be one more wave per row group)."""
    n_leaves = len(reader.pf.schema.leaves)
    names = sorted({leaf.path[0] for leaf in bound_leaves(expr) if leaf.index < n_leaves})
    if len(names) > (0 if fetched else 1):
        # Projected fields ``along`` in the same call (a dictionary string stays one
        # until cut, as for the predicate).
        reader.whole_fields(names + [f for f in along if f not in names], as_dictionary=True)


# Pass rates of conjuncts kept per file (see _rows_by_columns): a few per query.
_PASS_RATES_KEPT = 256


def _rate(rates: dict[Any, float], e: BoundExpr) -> float:
    """The share of rows ``e`` passed in the file's last row group it ran on (a
    half when not known)."""
    try:
        return rates.get(e, 0.5)
    except TypeError:
        return 0.5


def _string_or_binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t)
                or pa.types.is_binary(t) or pa.types.is_large_binary(t))


# Value kinds where equal means the same value, with the output types that hold it as is.
_EXACT_KINDS: dict[Kind, Callable[[pa.DataType], bool]] = {
    Kind.STRING: _string_or_binary,
    Kind.BINARY: _string_or_binary,
    Kind.INT: pa.types.is_integer,
    Kind.UINT: pa.types.is_integer,
    Kind.BOOL: pa.types.is_boolean,
}


def implied_values(expr: BoundExpr, fields: Sequence[str], schema: pa.Schema
                   ) -> dict[str, pa.Array]:
    """Returned ``fields`` whose value on every matching row the predicate fixes, as
    one-value arrays of their output type: a top-level conjunct ``col = v`` (or ``col
    IN (v)``) on a flat string, binary, integer or boolean column, whose matching values
    are ``v`` itself. Their pages are then not read again to return them. Not floats,
    decimals or times: ``x = 0.0`` also holds for -0.0, ``d = 1.5`` for a stored 1.50."""
    out: dict[str, pa.Array] = {}
    todo = [expr]
    while todo:
        e = todo.pop()
        if isinstance(e, BoundAnd):
            todo += [e.left, e.right]
            continue
        if (not isinstance(e, BoundPredicate) or len(e.values) != 1
                or e.op not in (LeafOp.EQ, LeafOp.IN) or len(e.leaf.path) != 1
                or e.value_type.kind not in _EXACT_KINDS):
            continue
        name = e.leaf.path[0]
        if name not in fields or name not in schema.names:
            continue
        target = schema.field(name).type
        if not _EXACT_KINDS[e.value_type.kind](target):
            continue
        try:
            out[name] = pa.array(list(e.values), type=target)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
            continue  # not representable as that type (e.g. a fixed size): decoded
    return out


def project(
    reader: RowGroupReader,
    exact: RowRanges,
    fields: Sequence[str],
    partition: dict[str, Any],
    partition_types: dict[str, pa.DataType],
    stats: ScanStats,
    implied: dict[str, pa.Array] | None = None,
) -> pa.Table | None:
    """The projected ``fields`` at the rows ``exact``; None when there are none.
    ``implied`` (see :func:`implied_values`): fields repeated, not read; only for
    rows ``exact`` that hold the predicate."""
    stats.row_groups_read += 1
    if exact.is_empty:
        return None
    out: dict[str, Any] = {}
    count = exact.count()
    implied = implied or {}
    out.update(reader.flat_fields(
        [f for f in fields if f not in partition_types and f not in implied], exact))
    for name in fields:
        if name in out:
            continue
        if name in implied:
            out[name] = implied[name].take(np.zeros(count, dtype=np.int32))
        elif name in partition_types:
            out[name] = pa.array([partition.get(name)] * count, type=partition_types[name])
        else:
            out[name] = reader.field(name, exact)
    stats.rows_out += count
    if not out:
        return _empty_columns_table(count)
    return pa.table(out)


def scan_row_group(
    pf: ParquetFile,
    plan: RowGroupPlan,
    expr: BoundExpr,
    fields: Sequence[str],
    schema: pa.Schema,
    partition: dict[str, Any],
    partition_types: dict[str, pa.DataType],
    stats: ScanStats,
    options: ScanOptions,
) -> pa.Table | None:
    """The matching rows of one row group, projected to ``fields``; None if none match."""
    if plan.maybe.is_empty:
        return None
    reader = RowGroupReader(pf, plan, schema, stats, options)
    # No implied_values here: callers may hand rows the predicate never checked
    # (aggregates read the predicate's columns at "maybe" rows this way).
    exact = exact_rows(reader, expr, fields, partition, partition_types, stats)
    return project(reader, exact, fields, partition, partition_types, stats)


def _empty_columns_table(rows: int) -> pa.Table:
    """A table with ``rows`` rows and no columns (count-only scans)."""
    return pa.table({"_": pa.nulls(rows)}).drop_columns(["_"])


def read_row_group(
    pf: ParquetFile,
    plan: FilePlan,
    rgp: RowGroupPlan,
    expr: BoundExpr,
    fields: Sequence[str],
    schema: pa.Schema,
    partition_types: dict[str, pa.DataType],
    options: ScanOptions,
    stats: ScanStats,
) -> pa.Table | None:
    """The matching rows of one planned row group; errors name file and row group."""
    return at_row_group(pf, rgp.index, scan_row_group, pf, rgp, expr, fields, schema,
                        plan.partition, partition_types, stats, options)


def at_row_group(pf: ParquetFile, rg: int, fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` with errors naming file and row group."""
    try:
        return fn(*args)
    except PqIndexError as e:
        raise e.located(path=pf.path, row_group=rg) from None
    except DECODE_ERRORS as e:  # pyarrow raises OSError for damaged pages
        raise translate(e, default=CorruptFileError, what="cannot decode", path=pf.path,
                        row_group=rg) from e
