"""``pqindex.dataset(path)``: many files, hive partitions, parallel planning, a metadata cache.

A dataset is lazy: nothing is read until a scan or an explain needs it. The files
it opens (footers decoded, tails, page-index entries) are kept for later scans up to
``Dataset.max_open_bytes``, least recently used dropped first. Files are planned
and read concurrently on threads (file I/O and pyarrow release the GIL).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import numbers
import os
import time
from collections import OrderedDict
from collections.abc import Collection, Generator, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pqindex.dataset.aggregate import AggregateResult
from pqindex.dataset.discovery import DataFile, Discovery, discover
from pqindex.dataset.open_files import OpenFile, OpenFiles
from pqindex.dataset.partition_kinds import partition_arrow_type, partition_element
from pqindex.dataset.plan import DatasetPlan, FileEntry, PlanFiles
from pqindex.dataset.planning import (
    DatasetPlanner,
    OnPlanned,
    Planned,
    Plans,
    WaveClock,
    count_pages,
    gc_paused,
)
from pqindex.dataset.schema import conform, unify
from pqindex.dataset.sources import FileFacts, ListingSource, ManifestSource, Source
from pqindex.dataset.tables.deletes import Holes
from pqindex.errors import PqIndexError, UnsupportedError, UserInputError, public_api
from pqindex.expr.bind import BoundExpr, BoundTrue, bound_leaves
from pqindex.expr.bind import columns as columns_of
from pqindex.expr.dnf import from_dnf
from pqindex.expr.nodes import TRUE, Expr
from pqindex.expr.sql import parse_where
from pqindex.format.file import ParquetFile
from pqindex.format.schema import LeafColumn, Schema
from pqindex.format.structs import ColumnOrder, TypeDefinedOrder
from pqindex.io.objstore import TailWave
from pqindex.io.source import IOStats, LocalFileSource
from pqindex.plan.planner import FilePlan, PlanOptions, RowGroupPlan
from pqindex.pools import python_slot, shared_pool
from pqindex.scan.batch import scan_file
from pqindex.scan.executor import (
    ScanOptions,
    ScanStats,
    iter_whole_row_groups,
    pyarrow_opens_free,
)
from pqindex.scan.fetch import stats_since
from pqindex.scan.report import ScanReport
from pqindex.scan.whole import iter_sifted_row_groups

__all__ = ["Dataset", "Scan", "dataset"]

Where = str | Expr | None
# Prefix of a file leaf's name a hive key shadows (no predicate can name it).
_SHADOWED = "\x00file:"
# Threads (files in flight) for a dataset on an object store.
REMOTE_WORKERS = 32
# A dataset of at least this many files is planned with the cyclic GC paused.
GC_PAUSE_FILES = 64


def _remote(source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> bool:
    """Whether the dataset lives behind a URL other than ``file://``."""
    first = source if isinstance(source, (str, os.PathLike)) else next(iter(source), "")
    p = os.fspath(first)
    return "://" in p and not p.startswith("file://")


def _where(where: Where, filters: Sequence[Any] | None) -> Expr:
    exprs: list[Expr] = []
    if isinstance(where, str):
        if where.strip():
            exprs.append(parse_where(where))
    elif isinstance(where, Expr):
        exprs.append(where)
    elif isinstance(where, pc.Expression):
        # Opaque to Python: its tree cannot be read back to prune with.
        raise UserInputError(
            f"where takes SQL text or a pqindex expression, not a pyarrow Expression "
            f"({where}): write it as SQL text (\"x > 5\") or as pqindex.col(\"x\") > 5, "
            "or use filters=[(\"x\", \">\", 5)]")
    elif where is not None:
        raise UserInputError(f"where must be SQL text or an expression, not {type(where).__name__}")
    if filters:
        exprs.append(from_dnf(filters))
    out: Expr = TRUE
    for e in exprs:
        out = e if out is TRUE else out & e
    return out


# A row group whose every row may match (no index narrowed it) and whose chunks of the
# columns read hold at most this many bytes is read whole by pyarrow and filtered
# (whole.iter_sifted_row_groups): the page-by-page flow costs ~0.1-0.3 ms of Python a
# row group and column, which on a lake of small files (3,000 files of 4 row groups
# of 500 rows, 8 columns) was the whole scan: 12 ms a file, polars 0.3 ms.
SIFT_ROW_GROUP_BYTES = 256 << 10
# Scan.head plans a dataset of several files in steps of files: this many first,
# then HEAD_GROWTH times more each step (a step is one wave of tails on a store).
HEAD_FIRST = 1
HEAD_GROWTH = 4


def _sift_fields(of: OpenFile, bound: BoundExpr | None) -> list[str] | None:
    """The top-level fields ``bound`` reads when a small row group of the file may be
    read whole and filtered (a local file pyarrow opens itself, flat predicate
    columns), else None."""
    if bound is None or isinstance(bound, BoundTrue):
        return None
    if not isinstance(of.pf.source, LocalFileSource):
        return None  # elsewhere a request costs more than the Python it saves
    read = bound_leaves(bound)
    n = len(of.pf.schema.leaves)
    if any(len(leaf.path) != 1 or (leaf.index < n and leaf.max_repetition_level)
           for leaf in read):
        return None
    return sorted({leaf.path[0] for leaf in read})


def _footer_settled(plan: FilePlan | None) -> bool:
    """Whether the file's footer statistics decided every row group of ``plan`` (no
    index bytes read for it)."""
    return plan is not None and all(rg.decided_by == "statistics" for rg in plan.row_groups)


def _segments(of: OpenFile, rgps: Sequence[RowGroupPlan], fields: Sequence[str],
              bound: BoundExpr | None = None, holes: Mapping[int, Holes] | None = None
              ) -> list[tuple[str, list[RowGroupPlan]]]:
    """A file's planned row groups as consecutive segments: ``("whole", run)`` for a run
    of row groups where every row matches (pyarrow reads it like ``read_table``),
    ``("holed", run)`` for row groups where every row the table did not delete matches
    (``holes``: read whole, the deleted rows filtered out after), ``("sift", run)`` for
    small ones no index narrowed (pyarrow reads them, the predicate filters),
    ``("waves", group)`` for the others (read in waves)."""
    out: list[tuple[str, list[RowGroupPlan]]] = []
    pf = of.pf
    free = any(c.path[0] in fields for c in pf.schema.leaves) and pyarrow_opens_free(pf)
    read = _sift_leaves(of, fields, bound) if free else None
    for rgp in rgps:
        kind = "waves"
        h = None if holes is None else holes.get(rgp.index)
        if free and rgp.num_rows > 0 and rgp.all.count() == rgp.num_rows:
            kind = "whole"
        elif free and h is not None and rgp.all.count() == rgp.num_rows - h.positions.size:
            kind = "holed"  # ``all`` lies within the live rows: it is all of them
        elif (read is not None and rgp.num_rows > 0 and rgp.maybe.count() == rgp.num_rows
              and _sift_small(pf, rgp.index, read)):
            kind = "sift"
        if out and out[-1][0] == kind:
            out[-1][1].append(rgp)
        else:
            out.append((kind, [rgp]))
    return out


def _sift_leaves(of: OpenFile, fields: Sequence[str] | None,
                 bound: BoundExpr | None) -> list[int] | None:
    """The leaves a sifted read of the file decodes (the fields and the predicate's;
    ``fields`` None: every column), or None when its row groups are never sifted."""
    sift = _sift_fields(of, bound)
    if sift is None:
        return None
    return [c.index for c in of.pf.schema.leaves
            if fields is None or c.path[0] in fields or c.path[0] in sift]


def _sift_small(pf: ParquetFile, rg: int, read: Sequence[int]) -> bool:
    """Whether row group ``rg``'s chunks of leaves ``read`` are small enough to sift."""
    return sum(pf.column_meta(rg, c).total_compressed_size or 0
               for c in read) <= SIFT_ROW_GROUP_BYTES


def _sift_sized(of: OpenFile, fields: Sequence[str] | None, bound: BoundExpr) -> bool:
    """Whether every row group of the file would be read whole and filtered by
    ``_segments`` when no level narrows it (``fields`` None: every column)."""
    pf = of.pf
    read = _sift_leaves(of, fields, bound)
    return (read is not None and pf.num_row_groups > 0 and pyarrow_opens_free(pf)
            and all(_sift_small(pf, rg, read) for rg in range(pf.num_row_groups)))


@dataclass
class _Made:
    """What ``Dataset.plan`` planned, kept for ``Dataset.scan(plan=...)``."""

    dataset: Dataset
    columns: Sequence[str] | None
    expr: Expr
    plans: Plans | None


class Dataset:
    """One or many Parquet files read as one table.

    Options (all keyword-only, None for the default):

    * ``storage_options``: credentials, endpoint, region... of an object store
      (``pqindex.io.objstore``); without them the standard environment variables
      configure it.
    * ``max_workers``: files planned and read at once, and a file's row groups decoded
      at once. Default: 32 on object stores (a request waits, it does not compute);
      locally 2 per core (up to 8) for files and one per core (up to 8) for one file's
      row groups, whose work is CPU.
    * ``tail_bytes``: bytes read at each file's end in its first request (footer, page
      index, embedded-index directory). Default 64 KiB local, 512 KiB remote.
    * ``plan_options`` / ``scan_options``: which index levels to use, and how to read
      (``PlanOptions``, ``ScanOptions``).
    * ``verify_checksums``: check the CRC32 of every page read that has one, before it
      is decoded: by scans (``ScanOptions.verify_checksums``; ``scan()`` may say
      otherwise per scan) and by planning, for the dictionary pages it prunes with
      (``PlanOptions.verify_checksums``).
    * ``schema``: the dataset's Arrow schema, given (as ``pyarrow.dataset``'s and
      Spark's readers take one) instead of unified from every file's footer: no footer
      is read for it, so a stream's first batch waits for its first file only. Each
      file's rows are cast to it (a value that does not convert is a ``UserInputError``
      naming the file and column); a column a file lacks is NULL there; a file column
      it lacks is not read. Hive partition columns it does not list are added.
    * ``listing``: whether a directory is listed when a manifest pqindex's pipeline
      committed names its files (``discovery.discover``). None: not locally; on a store
      the LIST still goes out beside the manifest GET. False: never (one GET on a
      store). True: always, the manifest's entries validated against the listing.

    ``max_open_bytes`` (an attribute, default 256 MiB): what the open files may hold
    between scans, estimated; past it the least recently used are dropped and opened
    again when a scan needs them.
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        tail_bytes: int | None = None,
        max_workers: int | None = None,
        plan_options: PlanOptions | None = None,
        scan_options: ScanOptions | None = None,
        verify_checksums: bool = False,
        storage_options: Mapping[str, Any] | None = None,
        discovery: Discovery | None = None,
        row_groups: Mapping[str, Collection[int]] | None = None,
        schema: pa.Schema | None = None,
        version: int | str | Any = None,
        snapshot_id: int | None = None,
        listing: bool | None = None,
    ) -> None:
        if listing not in (None, True, False):
            raise UserInputError(f"listing must be True, False or None, not {listing!r}")
        self._listing = listing
        # A lake table (a Delta table's root, a deltalake/pyiceberg table object): its
        # snapshot names the files (dataset/tables/source.py).
        self._table: Any = None
        table_item = source[0] if (isinstance(source, Sequence) and not isinstance(
            source, (str, bytes)) and len(source) == 1) else source
        from pqindex.dataset.tables.source import is_table_source, table_source

        if storage_options is None and type(table_item).__module__.startswith("pyiceberg"):
            from pqindex.dataset.tables.iceberg_io import table_storage_options

            # A pyiceberg Table's files are read with its catalog's S3 settings.
            storage_options = table_storage_options(table_item)
        if version is not None or snapshot_id is not None or is_table_source(table_item):
            self._table = table_source(table_item, version=version, snapshot_id=snapshot_id,
                                       storage_options=storage_options)
            source, discovery = self._table.location, self._table.discovery
            schema = self._table.schema if schema is None else schema
        if schema is not None and not isinstance(schema, pa.Schema):
            raise UserInputError(f"schema must be a pyarrow.Schema, not {type(schema).__name__}")
        if schema is not None and len(set(schema.names)) != len(schema.names):
            raise UserInputError(f"schema names a column twice: {', '.join(schema.names)}")
        self._given_schema = schema
        if not isinstance(source, (str, os.PathLike)) and not (
            isinstance(source, Sequence)
            and all(isinstance(s, (str, os.PathLike)) for s in source)
        ):
            raise UserInputError(
                "a dataset is a path, a URL or a list of them, "
                f"not {type(source).__name__}"
            )
        for name, value, least in (("max_workers", max_workers, 1), ("tail_bytes", tail_bytes, 0)):
            if value is not None and (isinstance(value, bool) or not isinstance(
                    value, numbers.Integral) or value < least):
                raise UserInputError(f"{name} must be an integer of at least {least} (or None "
                                     f"for the default), not {value!r}")
        max_workers = None if max_workers is None else int(max_workers)
        tail_bytes = None if tail_bytes is None else int(tail_bytes)
        # tail_bytes None: the store's default (64 KiB local, 512 KiB remote).
        # storage_options: credentials, endpoint, ... of the store (see pqindex.io.objstore).
        self._source = source
        self.storage_options = dict(storage_options or {})
        # A discovery already made (Spark's manifest) saves walking the directory again.
        self._discovery: Discovery | None = discovery
        # path -> the only row groups to read of that file (a Spark task's share of it).
        self.row_groups = {k: frozenset(v) for k, v in (row_groups or {}).items()}
        self._manifest: Any = None  # ManifestView, False when there is none (loaded once)
        self._manifest_io = IOStats()  # the manifest GET (when the LIST did not bring it)
        self._stand_in: OpenFile | None = None
        # (manifest view it came from, the source's facts, each file's row in them)
        self._file_facts: tuple[Any, FileFacts, dict[str, int] | None] | None = None
        # Files open, least recently used first, within ``max_open_bytes`` between
        # scans; every file's I/O counters, kept when its file is dropped.
        self.open_files = OpenFiles(storage_options=self.storage_options,
                                    tail_bytes=tail_bytes)
        self.tail_bytes = tail_bytes
        # Files in flight: on object stores a file waits on round trips, not on the CPU.
        self._remote = _remote(source)
        self.max_workers = max_workers or (
            REMOTE_WORKERS if self._remote else min(8, (os.cpu_count() or 2) * 2))
        # One local file's row groups are CPU work (their reads are copies from the page
        # cache): more threads than cores only contend for them and for the GIL. On 2
        # cores, 2 threads against 4: user_id equality on zstd 29 against 33 ms (20M rows:
        # 125 against 144), 5 common values 107 against 123; no query slower. Files in
        # flight keep ``max_workers``: a 1,000-file lake's full column 900 against 1,018.
        self.rowgroup_workers = max_workers or (
            self.max_workers if self._remote else min(8, os.cpu_count() or 2))
        self.plan_options = plan_options or PlanOptions()
        self.scan_options = scan_options or ScanOptions()
        if verify_checksums:  # the pages scans read, and the dictionaries planning reads
            self.plan_options = dataclasses.replace(self.plan_options, verify_checksums=True)
            self.scan_options = dataclasses.replace(self.scan_options, verify_checksums=True)
        # Planning many files: binds per footer schema, prunes, plans on a pool.
        self.planner = DatasetPlanner()

    # ------------------------------------------------------------ files

    @property
    def max_open_bytes(self) -> int:
        """What the open files may hold between scans (see the class's docstring)."""
        return self.open_files.max_open_bytes

    @max_open_bytes.setter
    def max_open_bytes(self, value: int) -> None:
        self.open_files.max_open_bytes = value

    @property
    def _open(self) -> OrderedDict[str, OpenFile]:
        return self.open_files.open  # tests look at the open files

    @property
    def _landing(self) -> dict[str, TailWave]:
        return self.open_files.landing


    @property
    def discovery(self) -> Discovery:
        if self._discovery is None:
            self._discovery = discover(self._source, self.storage_options,
                                       listing=self._listing)
            if self._discovery.delta_log is not None and self._remote and (
                    self._table is None) and (
                    self._discovery.delta_log.rstrip("/") == f"{self._source}".rstrip("/")
                    + "/_delta_log"):
                # A Delta table on a store, seen in the LIST: its log names the files.
                from pqindex.dataset.tables.source import table_source

                self._table = table_source(self._source, storage_options=self.storage_options,
                                           log_names=self._discovery.delta_log_names)
                self._discovery = self._table.discovery
                if self._given_schema is None:
                    self._given_schema = self._table.schema
                return self._discovery
            delta = self._discovery.delta_warning()
            if delta is not None:  # once per dataset here, in every scan's report
                logging.getLogger("pqindex").warning("%s", delta)
        return self._discovery

    @property
    @public_api
    def files(self) -> list[str]:
        return [f.path for f in self.discovery.files]

    def open_file(self, df: DataFile) -> OpenFile:
        """The data file ``df``, opened if it is not (``dataset/open_files.py``)."""
        # A table's column names (mapping, field ids) on a freshly opened footer.
        return self.open_files.file(df, None if self._table is None else self._table.rename)

    def io_stats(self, include_listing: bool = False) -> dict[str, IOStats]:
        """Per file opened so far, its I/O counters and request trace; with
        ``include_listing``, also the dataset's own requests: the LIST pages and
        probes (keyed by the dataset's path) and the manifest GET (by its URL)."""
        with self.open_files.lock:
            out = dict(self.open_files.stats)
        if include_listing:
            out.update(self._meta_io())
        return out

    def _meta_io(self) -> dict[str, IOStats]:
        """The requests of the dataset itself, not of one data file."""
        out: dict[str, IOStats] = {}
        if self._discovery is not None:
            src = self._source
            out[os.fspath(src) if isinstance(src, (str, os.PathLike)) else "<paths>"] = (
                self._discovery.io)
            if self._discovery.manifest is not None:
                out[self._discovery.manifest[0]] = self._manifest_io
        evidence = None if self._table is None else self._table.evidence
        if evidence is not None:  # a table's evidence sidecar (tables/evidence.py)
            out[evidence.url] = evidence.stats
        return out

    def io_counts(self) -> dict[str, tuple[int, int, int]]:
        """(bytes, requests, round trips) of every stats object so far, by key."""
        stats = self.open_files.all_stats()
        stats.update({f"\0{k}": st for k, st in self._meta_io().items()})
        return {k: (st.bytes_read, st.requests, st.round_trips) for k, st in stats.items()}

    def io_since(self, before: Mapping[str, tuple[int, int, int]]) -> tuple[int, int, int]:
        """Bytes, requests and the dataset's own round trips (listing, manifest) since
        ``before``; the files' round trips overlap, so callers count those."""
        nbytes = requests = waves = 0
        for k, (b, r, w) in self.io_counts().items():
            b0, r0, w0 = before.get(k, (0, 0, 0))
            nbytes += b - b0
            requests += r - r0
            if k.startswith("\0"):
                waves += w - w0
        return nbytes, requests, waves

    def close(self) -> None:
        self.open_files.close()

    def __enter__(self) -> Dataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def manifest_view(self, warnings: list[str] | None = None) -> Any:
        """The dataset manifest matched against the listing (see dataset/manifest.py),
        or None; loaded once per dataset, like the listing."""
        if self._manifest is None:
            from pqindex.dataset.manifest import load_view

            view = load_view(self._source, self.discovery, self.storage_options, warnings,
                             self._manifest_io)
            self._manifest = view if view is not None else False
        return self._manifest or None

    def source_description(self) -> str:
        """Where the dataset's files came from, as ``explain`` prints it."""
        disc = self.discovery
        if self._table is not None:
            return f"named by the table snapshot at {self._table.location}: no LIST"
        if disc.named_by is not None:
            return (f"named by the commit point {disc.named_by} (a manifest pqindex's "
                    "pipeline committed): no LIST")
        if disc.manifest is not None:
            return (f"found by listing; the manifest {disc.manifest[0]} is used for the "
                    "files whose entry matches the listing")
        return "found by listing"

    def file_facts(self, view: Any) -> FileFacts:
        """What the dataset's source knows of its files unopened (``dataset/sources.py``):
        the manifest matched against the listing, or the listing; built once."""
        facts = self._file_facts
        if facts is None or facts[0] is not view:
            source: Source
            if self._table is not None:  # a table snapshot
                source = self._table
            elif view is None:
                source = ListingSource(self.discovery)
            elif view.columnar is not None:
                from pqindex.dataset.manifest_columnar import ColumnarManifestSource

                source = ColumnarManifestSource(view, view.columnar, self.discovery)
            else:
                source = ManifestSource(view, self.discovery)
            facts = self._file_facts = (view, source.facts(), None)
        return facts[1]

    def fact_rows(self, facts: FileFacts) -> dict[str, int]:
        """Each file's row in ``facts`` (by path)."""
        held = self._file_facts
        if held is not None and held[1] is facts and held[2] is not None:
            return held[2]
        rows = {p: i for i, p in enumerate(facts.paths)}
        if held is not None and held[1] is facts:
            self._file_facts = (held[0], facts, rows)
        return rows

    @property
    def lake_table(self) -> Any:
        """The lake table whose snapshot names the files (``dataset/tables/source.py``),
        or None."""
        return self._table

    @property
    def given_schema(self) -> pa.Schema | None:
        """The schema given to the dataset (None: unified from the files)."""
        return self._given_schema

    @property
    def remote(self) -> bool:
        """Whether the files are behind a URL other than file://."""
        return self._remote

    @property
    def stand_in(self) -> OpenFile | None:
        """The manifest's footer-only stand-in for the first file, once made."""
        return self._stand_in

    def first_file(self) -> OpenFile:
        """The first file, or a footer-only stand-in from the manifest (no request)."""
        df = self.discovery.files[0]
        if self._table is not None:
            # A table's plan opens a file its statistics kept (the schema is the table's).
            df = self._table.first or df
        view = self.manifest_view()
        if self._stand_in is None and view is not None and self.open_files.get(df.path) is None:
            pf = view.stand_in(df)
            if pf is not None:
                self._stand_in = OpenFile(df, pf, IOStats())
        return self._stand_in or self.open_file(df)

    @property
    @public_api
    def schema(self) -> pa.Schema:
        """The Arrow schema of every file, unified (``dataset/schema.py``: int32 and
        int64 give int64, ...), plus the partition columns. Reads every footer (remote
        tails in one wave), or takes them from a current manifest."""
        return self._full_schema()

    def _full_schema(self) -> pa.Schema:
        if self._given_schema is not None:
            return self._given()
        files = self.discovery.files
        view = self.manifest_view()
        self.open_files.read_ahead([df for df in files
                                    if view is None or view.stand_in(df) is None])
        return self.unified_schema([self._schema_of(df, view) for df in files])

    def _schema_of(self, df: DataFile, view: Any) -> OpenFile:
        """The file, or its footer-only stand-in from a current manifest (no request)."""
        if view is not None and self.open_files.get(df.path) is None:
            pf = view.stand_in(df)
            if pf is not None:
                return OpenFile(df, pf, IOStats())
        return self.open_file(df)

    def first_schema(self) -> pa.Schema:
        """The first file's Arrow schema plus the partition columns (no other footer);
        the given schema, if any."""
        if self._given_schema is not None:
            return self._given()
        return self.unified_schema([self.first_file()])

    def _given(self) -> pa.Schema:
        """The schema given to the dataset plus the partition columns it does not list."""
        given = self._given_schema
        assert given is not None
        keys = self._partition_keys
        return pa.schema([*(f for f in given if f.name not in keys),
                          *(pa.field(k, self._partition_type(k)) for k in keys)])

    def narrowed(self, names: Sequence[str]) -> pa.Schema | None:
        """The given schema's fields ``names`` (None when no schema was given)."""
        if self._given_schema is None:
            return None
        given = self._given()
        return pa.schema([given.field(n) for n in names])

    def unified_schema(self, opened: Sequence[OpenFile]) -> pa.Schema:
        """The files' Arrow schemas unified, plus the partition columns."""
        base = unify([(of.df.path, of.arrow) for of in opened])
        keys = self._partition_keys
        # A hive key that is also a file column is the partition column: the path's
        # value wins, as in DuckDB, polars and Spark (docs/semantics.md).
        return pa.schema([*(f for f in base if f.name not in keys),
                          *(pa.field(k, self._partition_type(k)) for k in keys)])

    @property
    def _partition_keys(self) -> tuple[str, ...]:
        """The hive keys: each is a partition column, also where a file has a column
        of the same name (the path's value wins, docs/semantics.md)."""
        return self.discovery.partition_columns

    def _partition_type(self, key: str) -> pa.DataType:
        return partition_arrow_type(self.discovery.partition_types.get(key, "string"))

    @property
    def partition_types(self) -> dict[str, pa.DataType]:
        """The Arrow type of each hive partition column (a key that is also a file
        column is not one); opens the first file when none is open yet."""
        return {k: self._partition_type(k) for k in self._partition_keys}

    def sift_sized(self, of: OpenFile, fields: Sequence[str] | None,
                   bound: BoundExpr) -> bool:
        """Whether ``of`` is small enough that its row groups are read whole and
        filtered (``_segments``) unless a level rules them out."""
        return _sift_sized(of, fields, bound)

    def bound_schema(self, pf: ParquetFile) -> Schema:
        """The file's leaves plus one synthetic leaf per partition column. A file leaf
        a hive key shadows is renamed out of reach: a predicate on the key binds to
        the partition leaf (index past the file's leaves), never to the file's."""
        extra = []
        n = len(pf.schema.leaves)
        keys = set(self._partition_keys)
        leaves = pf.schema.leaves
        if keys and any(lf.path[0] in keys for lf in leaves):
            leaves = tuple(
                LeafColumn(lf.index, (_SHADOWED + lf.path[0], *lf.path[1:]), lf.element,
                           lf.max_definition_level, lf.max_repetition_level, lf.column_order)
                if lf.path[0] in keys else lf for lf in leaves)
        for i, k in enumerate(self._partition_keys):
            el = partition_element(k, self.discovery.partition_types.get(k, "string"))
            order = ColumnOrder(TYPE_ORDER=TypeDefinedOrder())
            extra.append(LeafColumn(n + i, (k,), el, 1, 0, order))
        return Schema(pf.schema.root, leaves + tuple(extra))

    # ------------------------------------------------------------ planning

    def make_plans(self, columns: Sequence[str] | None, expr: Expr,
                   on_planned: OnPlanned | None = None,
                   subset: Sequence[DataFile] | None = None) -> Plans:
        """Every file (or those of ``subset``) planned: what a ``Scan`` reads
        (``dataset/planning.py``); ``on_planned`` is called with each kept file as soon
        as it is planned, on a pool thread."""
        return self._plan(columns, expr, on_planned, subset)

    def _plan(self, columns: Sequence[str] | None, expr: Expr,
              on_planned: OnPlanned | None = None,
              subset: Sequence[DataFile] | None = None) -> Plans:
        """Every file (or those of ``subset``) planned (``dataset/planning.py``);
        ``on_planned`` is called with each kept file as soon as it is planned, on a
        pool thread."""
        ruled_out = 0
        # A table on a store is found by its listing (self._table is set then): the
        # LIST counts in this plan's report, and so does the table's sidecar GET.
        before = self.io_counts()
        _ = self.discovery
        if self._table is not None and subset is None:
            # The table's per-file statistics rule files out before any footer is read;
            # one file stays when none is left (its footer binds the predicate).
            subset, ruled_out = self._table.prune(expr)
            if not subset:
                subset, ruled_out = [self.discovery.files[0]], ruled_out - 1
            self._table.first = subset[0]
        table = self._table
        if table is not None and table.deleted and on_planned is not None:
            # Rows the table deleted (deletion vectors, position deletes) leave each
            # file's plan before anything reads it (dataset/tables/deletes.py).
            read_early = on_planned

            def on_planned(done: Planned, wanted: list[str] | None) -> None:
                read_early(table.without_deleted(done), wanted)
        self.open_files.plan_started()  # the files this plan opens stay until it is made
        plans = None
        try:
            plans = self._plan_held(columns, expr, on_planned, subset, before)
            if table is not None and table.deleted:
                plans = dataclasses.replace(
                    plans, files=[table.without_deleted(p) for p in plans.files])
            if self._table is not None:
                plans.report.table = self._table.description
                plans.report.files_total += ruled_out
                if ruled_out:
                    plans.report.files_skipped["table statistics"] += ruled_out
            return plans
        finally:
            # What the plan read into its files (page-index entries...) counts from now;
            # files their footer alone settled read nothing more (most of a lookup's).
            self.open_files.plan_made(
                of for _df, of, plan, _bound in (plans.files if plans else ())
                if of is not None and not _footer_settled(plan))

    def _plan_held(self, columns: Sequence[str] | None, expr: Expr,
                   on_planned: OnPlanned | None,
                   subset: Sequence[DataFile] | None = None,
                   before: Mapping[str, tuple[int, int, int]] | None = None) -> Plans:
        columns = column_list(columns)
        t0 = time.perf_counter()
        before = self.io_counts() if before is None else before
        disc = self.discovery
        files = disc.files if subset is None else subset
        report = ScanReport(files_total=len(files))
        delta = disc.delta_warning()
        if delta is not None:
            report.warnings.append(delta)
        view = self.manifest_view(report.warnings)
        tails = None
        if view is None and not set(disc.partition_columns) & set(columns_of(expr)):
            # Nothing prunes before the footers: every tail in one wave, started now;
            # each file is planned as soon as its own tail lands.
            tails = self.open_files.start_ahead(files)
        waves0 = self.open_files.round_trips()
        # The process's planning threads: a dataset's own would be started for every
        # plan (~1-2 ms each when the interpreter is busy; Spark's driver plans per query).
        pool = shared_pool("plan", self.max_workers) if len(files) > 1 else None
        try:
            # Many footers planned (a tail wave, or local files opened one after another).
            with (gc_paused() if len(files) >= GC_PAUSE_FILES
                  else contextlib.nullcontext()):
                plans = self.planner.plan_files(self, columns, expr, t0, report, waves0, pool,
                                                view,
                                         on_planned, subset)
        finally:
            if tails is not None:
                tails.join()  # every request of the wave is over before the counts
        ahead = 0 if tails is None else 1
        # The LIST pages and the manifest GET come before any file's request.
        nbytes, requests, meta_waves = self.io_since(before)
        plans.report.round_trips += ahead + meta_waves
        plans.report.bytes_read, plans.report.requests = nbytes, requests
        return plans

    # ------------------------------------------------------------ public

    @public_api
    def scan(
        self,
        columns: Sequence[str] | None = None,
        where: Where = None,
        *,
        filters: Sequence[Any] | None = None,
        batch_size: int = 65_536,
        plan: DatasetPlan | None = None,
        verify_checksums: bool | None = None,
    ) -> Scan:
        """A lazy scan of ``columns`` (top-level fields; all when None) where ``where`` holds.

        ``plan``: what ``self.plan(columns, where)`` returned, read as it is (no second
        planning pass); ``columns`` and ``where`` are then taken from it.
        ``verify_checksums``: check page CRCs (None: as the dataset's ``scan_options``).
        """
        if batch_size <= 0:
            raise UserInputError("batch_size must be positive")
        if plan is None:
            return Scan(self, columns, _where(where, filters), batch_size, verify_checksums)
        made = plan.source
        if not isinstance(made, _Made) or made.dataset is not self:
            raise UserInputError("plan= takes a plan made by this dataset's plan()")
        if where is not None or filters is not None or columns is not None:
            raise UserInputError("plan= already holds columns and where: give neither")
        # Once: a plan's report becomes its scan's; a second scan plans afresh.
        premade, made.plans = made.plans, None
        return Scan(self, made.columns, made.expr, batch_size, verify_checksums, premade)

    @public_api
    def plan(
        self,
        columns: Sequence[str] | None = None,
        where: Where = None,
        *,
        filters: Sequence[Any] | None = None,
    ) -> DatasetPlan:
        """The typed plan of a scan, without reading data pages (``dataset/plan.py``).
        Files every row of which matches by a columnar manifest's statistics are
        planned in bulk: their footers are read when an entry of theirs is first asked
        for its access plan (``plan.PlanFiles``), or by the scan of the plan."""
        expr = _where(where, filters)
        plans = self._plan(columns, expr)
        disc = self.discovery
        keys = self._partition_keys if disc.partition_columns else ()

        def entry(planned: Planned) -> FileEntry:
            df, of, plan, bound = planned
            return FileEntry(
                path=df.path,
                partition={k: v for k, v in disc.partition_values(df).items() if k in keys}
                if keys else {},
                file=None if of is None else of.pf,
                arrow_schema=None if of is None else of.arrow,
                access=plan,
                predicate=bound,
            )

        # Files planned in bulk stay unplanned until an entry of theirs is asked for.
        entries = PlanFiles(plans, entry) if plans.deferred is not None else tuple(
            entry(p) for p in plans.every_file())
        return DatasetPlan(
            files=entries,
            fields=tuple(plans.fields),
            schema=plans.schema,
            partition_types=self.partition_types,
            scan_options=self.scan_options,
            report=plans.report,
            source=_Made(self, columns, expr, plans),
        )

    def to_table(
        self, columns: Sequence[str] | None = None, where: Where = None, **kw: Any
    ) -> pa.Table:
        return self.scan(columns, where, **kw).to_table()

    @public_api
    def head(self, n: int, columns: Sequence[str] | None = None, where: Where = None, *,
             filters: Sequence[Any] | None = None) -> pa.Table:
        """The first ``n`` rows where ``where`` holds; reading stops once it has them
        (``Scan.head``), as ``pyarrow.dataset.Dataset.head`` does."""
        return self.scan(columns, where, filters=filters).head(n)

    @public_api
    def count_rows(self, where: Where = None, *, filters: Sequence[Any] | None = None) -> int:
        """The number of rows where ``where`` holds: ``aggregate(["count(*)"])``, so row
        groups every row of which matches are counted from metadata, unread."""
        return int(self.aggregate(["count(*)"], where, filters=filters)["count(*)"])

    @public_api
    def aggregate(
        self,
        aggregates: Sequence[str],
        where: Where = None,
        *,
        filters: Sequence[Any] | None = None,
    ) -> AggregateResult:
        """Exact ``count(*)``, ``count(col)``, ``sum``, ``avg``, ``min``, ``max`` where
        ``where`` holds (``dataset/aggregate.py`` says what each returns), as a dict.

        Row groups where every row matches are answered from zone maps and footer
        statistics; only row groups with some matching rows are read. The result's
        ``report`` says which was which (``self.last_aggregate_report`` is the last
        one's, kept for older callers: with threads sharing the dataset, use the
        result's own).
        """
        from pqindex.dataset.aggregate import (
            AggregateReport,
            is_expression_aggregate,
            parse_aggregations,
            run_aggregate,
            run_expression_aggregates,
        )

        specs = [aggregates] if isinstance(aggregates, str) else list(aggregates)
        # sum(price * (1 - discount)): evaluated on the matching rows of a scan.
        of_expressions = [s for s in specs if is_expression_aggregate(s)]
        aggs = parse_aggregations([s for s in specs if not is_expression_aggregate(s)])
        cols = sorted({a.column.split(".")[0] for a in aggs if a.column is not None})
        values, report = (run_aggregate(self.plan(cols, where, filters=filters), aggs)
                          if aggs or not of_expressions else ({}, AggregateReport()))
        if of_expressions:
            values.update(run_expression_aggregates(of_expressions, lambda columns: self.scan(
                columns=columns, where=where, filters=filters).to_table()))
            values = {text.strip(): values[text.strip()] for text in specs}
        self.last_aggregate_report = report
        return AggregateResult(values, report)

    @public_api
    def statistics(self) -> dict[str, dict[str, Any]]:
        """Per column: rows, nulls and, where embedded HyperLogLog sketches exist, an
        estimate of the distinct values over the whole dataset.

        A sketch that cannot be read or decoded (damaged, newer body version) is
        skipped: the estimate covers the other files' sketches, the column's entry
        gets a ``warnings`` list, and the message is logged (logger ``pqindex``)."""
        from pqindex.indexes.base import Scope
        from pqindex.indexes.hll import read_sketch
        from pqindex.plan.planner import file_region

        out: dict[str, dict[str, Any]] = {}
        sketches: dict[str, Any] = {}
        for df in self.discovery.files:
            of = self.open_file(df)
            pf = of.pf
            for leaf in pf.schema.leaves:
                st = out.setdefault(leaf.name, {"values": 0, "nulls": 0, "distinct_estimate": None})
                for rg in range(pf.num_row_groups):
                    cmd = pf.column_meta(rg, leaf.index)
                    st["values"] += cmd.num_values or 0
                    if st["nulls"] is not None and cmd.statistics is not None and (
                        cmd.statistics.null_count is not None
                    ):
                        st["nulls"] += cmd.statistics.null_count
                    else:
                        st["nulls"] = None
            region = file_region(pf)
            if region is None:
                continue
            for entry in region.find(kind="hll", scope=Scope.FILE):
                try:
                    _vt, sketch = read_sketch(region.blob(entry))
                except PqIndexError as e:  # damaged or newer sketch: skipped, logged
                    message = (f"{pf.path}: embedded index: hll blob for column "
                               f"{entry.column!r} unusable: {e.reason}")
                    logging.getLogger("pqindex").warning("%s", message)
                    if entry.column in out:
                        out[entry.column].setdefault("warnings", []).append(message)
                    continue
                if entry.column in sketches:
                    sketches[entry.column] = sketches[entry.column].merge(sketch)
                else:
                    sketches[entry.column] = sketch
        for name, sketch in sketches.items():
            if name in out:
                out[name]["distinct_estimate"] = round(sketch.estimate())
        return out

    @public_api
    def explain(
        self,
        columns: Sequence[str] | None = None,
        where: Where = None,
        *,
        filters: Sequence[Any] | None = None,
        format: str = "text",
    ) -> str:
        """The plan and why, without reading data pages: a tree of text, or JSON."""
        from pqindex.dataset.explain import explain_json, explain_text

        plans = self._plan(columns, _where(where, filters))
        if format == "json":
            import json

            out = explain_json(plans.every_file(), plans.report)
            out["files_from"] = self.source_description()
            return json.dumps(out, indent=2)
        if format != "text":
            raise UserInputError(f"unknown explain format {format!r} (text or json)")
        return explain_text(plans.every_file(), plans.report, self.source_description())

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow PyCapsule stream of every row (a full scan), batches as produced."""
        return self.scan().__arrow_c_stream__(requested_schema)

    def to_pyarrow_dataset(
        self,
        where: Where = None,
        columns: Sequence[str] | None = None,
        *,
        filters: Sequence[Any] | None = None,
        filesystem: Any = None,
        attach_filter: bool = True,
        exact: bool = True,
    ) -> Any:
        """A ``pyarrow.dataset.Dataset`` of the files and row groups kept for ``where``,
        the predicate attached as a pyarrow filter (see docs/interop.md)."""
        from pqindex.dataset.interop import to_pyarrow_dataset

        if self._table is not None and self._table.deleted:
            # pyarrow would read the rows the table deleted: it takes row groups, not rows.
            raise UnsupportedError(
                f"the table has deleted rows ({self._table.deleted_by}): pyarrow's dataset "
                "would read them; use scan() or to_table()", path=self._table.location)
        return to_pyarrow_dataset(
            self, _where(where, filters), column_list(columns), filesystem=filesystem,
            attach_filter=attach_filter, exact=exact,
        )


class Scan:
    """A planned-on-demand read; ``report`` is filled in as it runs."""

    def __init__(
        self, ds: Dataset, columns: Sequence[str] | None, expr: Expr, batch_size: int,
        verify_checksums: bool | None = None, premade: Plans | None = None,
    ) -> None:
        self._ds = ds
        self._options = ds.scan_options if verify_checksums is None else dataclasses.replace(
            ds.scan_options, verify_checksums=bool(verify_checksums))
        self._columns = column_list(columns)
        self._expr = expr
        self.batch_size = batch_size
        self.report = ScanReport()
        self._files_read: set[str] = set()
        self._premade: Plans | None = premade  # a plan made beforehand: read once as is
        self._subset: Sequence[DataFile] | None = None  # these files only (head's steps)
        self._schema: pa.Schema | None = None

    @property
    def dataset(self) -> Dataset:
        """The dataset this scan reads."""
        return self._ds

    @property
    def columns(self) -> list[str] | None:
        """The top-level columns asked for (None: every column)."""
        return self._columns

    @property
    def schema(self) -> pa.Schema:
        """The projected Arrow schema. Before the scan runs: ``Dataset.schema`` narrowed
        to the columns (the given schema, a current manifest, or every footer: no data
        page read); once it ran, the schema of the rows it returned (typed by the files
        it read, as ``to_table``'s)."""
        if self._schema is None:
            from pqindex.dataset.interop import scan_schema

            self._schema = scan_schema(self)
        return self._schema

    @schema.setter
    def schema(self, value: pa.Schema) -> None:
        self._schema = value

    def _finish(self, before: dict[str, tuple[int, int, int]], t0: float) -> None:
        rep = self.report
        # Offset indexes read while scanning may now tell more pages than the footer did.
        rep.pages_total = count_pages(getattr(self, "_page_units", []))
        # Every request the scan caused: the listing and manifest (first scan of the
        # dataset), tails, page index, data.
        rep.bytes_read, rep.requests, _ = self._ds.io_since(before)
        rep.total_seconds = time.perf_counter() - t0

    def _tables(self, parallel: bool) -> Generator[pa.Table, None, None]:
        t0 = time.perf_counter()
        ds = self._ds
        before = ds.io_counts()  # a premade plan's reads were plan()'s
        opts = self._options
        data_clock = WaveClock()
        known: list[dict[str, pa.DataType]] = []
        Results = list[tuple[list[pa.Table], ScanStats, str]]
        early: dict[str, Results] = {}

        def ptypes() -> dict[str, pa.DataType]:
            # The partition columns need the first file's footer: asked once planning runs.
            if not known:
                known.append(ds.partition_types)
            return known[0]

        def run_counted(item: Any, fields: Sequence[str] | None) -> Results:
            of = item[0]
            before = of.stats.round_trips
            try:
                return list(run(item, fields))
            finally:
                data_clock.add(of.stats.round_trips - before)

        def run(item: Any, wanted: Sequence[str] | None, map_fn: Any = map
                ) -> Iterator[tuple[list[pa.Table], ScanStats, str]]:
            """One file: its row groups in waves (or pyarrow for runs of whole ones)."""
            of, plan, bound, rgps = item
            pt = ptypes()
            # A column other files have and this one lacks is NULL here (conform);
            # wanted None: every column of the file and the partition columns.
            fields = ([f for f in wanted if f in pt or f in of.arrow.names]
                      if wanted is not None else
                      [*of.arrow.names, *(k for k in pt if k not in of.arrow.names)])
            table = ds.lake_table
            holes = (None if table is None or not table.deleted
                     else table.holes(of.df.path, of.pf))
            for kind, group in _segments(of, rgps, fields, bound, holes):
                stats = ScanStats()
                if kind == "holed" and holes is not None:
                    for r in group:
                        keep, at = holes[r.index].keep_mask(r.num_rows), 0
                        for t, stats in iter_whole_row_groups(
                                of.pf, [r.index], fields, plan.partition, pt, opts, map_fn,
                                stream=not parallel):
                            part, at = keep[at:at + t.num_rows], at + t.num_rows
                            stats.rows_out -= t.num_rows - int(part.sum())
                            yield [t.filter(pa.array(part))], stats, of.pf.path
                    continue
                if kind == "whole":
                    for t, stats in iter_whole_row_groups(
                            of.pf, [r.index for r in group], fields, plan.partition, pt,
                            opts, map_fn, stream=not parallel):
                        yield [t], stats, of.pf.path
                    continue
                if kind == "sift":
                    sifted = iter_sifted_row_groups(
                        of.pf, [r.index for r in group], fields, bound,
                        _sift_fields(of, bound) or [], plan.partition, pt, opts,
                        stream=not parallel)
                    if parallel:  # read at once: the slot is not held across a yield
                        with python_slot():
                            sifted = iter(list(sifted))
                    for t, stats in sifted:
                        yield [t], stats, of.pf.path
                    continue
                tables = scan_file(of.pf, plan, group, bound, fields, of.arrow, pt,
                                   opts, stats, map_fn, stream=not parallel)
                if parallel:
                    yield list(tables), stats, of.pf.path
                else:
                    # Streaming: each table with the costs counted since the last one
                    # (a consumer that stops early has what it caused in the report).
                    shown = ScanStats()
                    for t in tables:
                        yield [t], stats_since(stats, shown), of.pf.path
                    yield [], stats_since(stats, shown), of.pf.path

        def on_planned(done: Planned, wanted: list[str] | None) -> None:
            # A kept file is read on the planning thread right after its plan: its
            # data requests go out while other files' tails are still in flight.
            _df, of, plan, bound = done
            if of is not None and plan is not None and bound is not None:
                rgps = [rgp for rgp in plan.row_groups if not rgp.skipped]
                early[of.pf.path] = run_counted((of, plan, bound, rgps), wanted)

        # Reading while planning: to_table of a plan made now (files of one dataset
        # go to the planning pool; a single file is read below, its row groups on a pool).
        pipelined = parallel and self._premade is None
        plans, self._premade = self._premade or ds.make_plans(
            self._columns, self._expr, on_planned if pipelined else None, self._subset), None
        pipelined = pipelined and len(self._subset or ds.discovery.files) > 1
        # Files planned in bulk (every row matches) are planned now, footers and all,
        # each read as soon as it is planned when pipelined (planning.Deferred).
        plans = plans.resolved(on_planned if pipelined else None)
        self._page_units = plans.page_units
        self.report = plans.report
        self.schema = plans.schema
        work = [
            (of, plan, bound, [rgp for rgp in plan.row_groups if not rgp.skipped])
            for _df, of, plan, bound in plans.files
            if plan is not None and of is not None and bound is not None and not plan.skipped
        ]
        plan_waves = self.report.round_trips
        waves_before = {of.pf.path: of.stats.round_trips for of, _, _, _ in work}

        def data_waves() -> int:
            return sum(of.stats.round_trips - waves_before.get(of.pf.path, 0)
                       for of, _, _, _ in work)

        try:
            if pipelined:
                # Read while planning, file by file on the planning pool: the critical
                # path is the pool thread that waited for the most data waves.
                for item in work:
                    results = early.pop(item[0].pf.path, None)
                    for tables, stats, path in (results if results is not None
                                                else run_counted(item, plans.fields)):
                        self._add(stats, path)
                        yield from self._given_typed(tables, path)
                self.report.round_trips = plan_waves + data_clock.critical()
            elif len(work) <= 1 or not parallel:
                # One file, or streaming: files one after another (their waves add up);
                # one file's row groups decode on the process-wide pool (a closed scan
                # cancels what has not started).
                # (starting a scan's own threads cost ~10% of a 20-30 ms query; the
                # tasks never wait on this pool: native reads have a pool of their own).
                map_fn = (shared_pool("rowgroups", ds.rowgroup_workers).map if parallel
                          else map)
                for item in work:
                    for tables, stats, path in run(item, plans.fields, map_fn):
                        self._add(stats, path)
                        yield from self._given_typed(tables, path)
                self.report.round_trips = plan_waves + data_waves()
            else:
                # Files on the pool, each in its own waves: the waves of different files
                # overlap, so the critical path is the file with the most.
                with ThreadPoolExecutor(ds.max_workers) as pool:
                    for results in pool.map(lambda item: run_counted(item, plans.fields),
                                            work):
                        for tables, stats, path in results:
                            self._add(stats, path)
                            yield from self._given_typed(tables, path)
                self.report.round_trips = plan_waves + data_clock.critical()
        finally:
            self._finish(before, t0)

    def _add(self, stats: ScanStats, path: str) -> None:
        rep = self.report
        rep.row_groups_read += stats.row_groups_read
        rep.pages_read += stats.pages_read
        rep.rows_matched += stats.rows_out
        rep.fetch_seconds += stats.fetch_seconds
        rep.decode_seconds += stats.decode_seconds
        rep.data_bytes += stats.data_bytes
        if stats.row_groups_read and path not in self._files_read:
            self._files_read.add(path)
            rep.files_read += 1
        rep.warnings += stats.warnings

    def _given_typed(self, tables: list[pa.Table], path: str) -> list[pa.Table]:
        """A file's tables cast to the dataset's given schema here, where the file is
        known (a value that does not convert names it); as they are otherwise."""
        if self._ds.given_schema is None:
            return tables
        return [conform(t, self.schema, path) for t in tables]

    def _cast(self, t: pa.Table) -> pa.Table:
        return conform(t, self.schema)

    @public_api
    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Matching rows as record batches of at most ``batch_size`` rows, streaming.

        A dataset of several files is planned in steps of files as the batches are
        consumed (1, 4, 16, ... as :meth:`head`): a consumer that stops early (a SQL
        ``LIMIT`` over the Arrow stream) leaves the later files unplanned and unread.
        Their batches are then typed by ``Dataset.schema`` narrowed to the columns
        (every footer read once, or a current manifest), the stream's schema."""
        # Sequential: memory stays bounded by one row group's selected data.
        for t in self._stream_tables():
            yield from self._cast(t).to_batches(max_chunksize=self.batch_size)

    def _stream_tables(self) -> Generator[pa.Table, None, None]:
        """:meth:`_tables` (sequential) of every file, in steps of files."""
        ds = self._ds
        files = ds.discovery.files
        if len(files) <= HEAD_FIRST or self._premade is not None or self._subset is not None:
            yield from self._tables(parallel=False)
            return
        from pqindex.dataset.interop import scan_schema

        t0 = time.perf_counter()
        before = ds.io_counts()
        schema = scan_schema(self)  # every footer (one wave of tails), or the manifest
        report = ScanReport(files_total=len(files))
        report.bytes_read, report.requests, report.round_trips = ds.io_since(before)
        report.round_trips += max((w - before.get(k, (0, 0, 0))[2]
                                   for k, (_b, _r, w) in ds.io_counts().items()
                                   if not k.startswith("\0")), default=0)
        report.plan_seconds = time.perf_counter() - t0
        self.report, self.schema = report, schema
        for part in self._steps():
            stream = part._tables(parallel=False)
            try:
                yield from stream
            finally:
                stream.close()  # a consumer that stops: what the step read is counted
                report.merge(part.report)
                report.files_total = len(files)
                report.total_seconds = time.perf_counter() - t0

    def _steps(self) -> Iterator[Scan]:
        """This scan over the dataset's files in steps: the first :data:`HEAD_FIRST`,
        then :data:`HEAD_GROWTH` times as many each step (``head`` and the stream)."""
        files = self._ds.discovery.files
        start, size = 0, HEAD_FIRST
        while start < len(files):
            part = Scan(self._ds, self._columns, self._expr, self.batch_size)
            part._subset = files[start : start + size]
            yield part
            start, size = start + size, size * HEAD_GROWTH

    @public_api
    def to_table(self) -> pa.Table:
        """Every matching row as one table, typed like ``pyarrow.parquet.read_table``."""
        tables = [self._cast(t) for t in self._tables(parallel=True)]
        if not tables:
            # Not schema.empty_table(): it imports pandas (0.4-1 s in a fresh process,
            # paid by a cold lookup of an absent key).
            return pa.Table.from_batches([], schema=self.schema)
        if not self.schema.names:
            # concat_tables forgets the length of tables without columns.
            rows = sum(t.num_rows for t in tables)
            return pa.table({"_": pa.nulls(rows)}).drop_columns(["_"])
        return pa.concat_tables(tables)

    @public_api
    def head(self, n: int) -> pa.Table:
        """The first ``n`` matching rows (``to_table()``'s first ``n``, in file and row
        order), read as a stream that stops once it has them. A dataset of several
        files is planned in steps of files (1, 4, 16, ...: see :data:`HEAD_FIRST`;
        a manifest prunes each step's files), as DuckDB's LIMIT and
        ``pyarrow.dataset``'s ``head`` read files: the files after the rows are
        neither opened nor read. The columns are typed by the files planned
        (``docs/semantics.md``); ``report`` counts what was read."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise UserInputError(f"head takes a number of rows (0 or more), not {n!r}")
        files = self._ds.discovery.files
        if len(files) <= HEAD_FIRST or self._premade is not None:
            return self._head_of(n)
        tables: list[pa.Table] = []
        schemas: list[tuple[str, pa.Schema]] = []
        report = ScanReport(files_total=len(files))
        for part in self._steps():
            if n <= 0 and schemas:
                break
            got = part._head_of(n)
            assert part._subset is not None
            schemas.append((part._subset[0].path, got.schema))
            report.merge(part.report)
            if got.num_rows:
                tables.append(got)
                n -= got.num_rows
        report.files_total = len(files)
        self.report = report
        if self._ds.given_schema is not None:
            from pqindex.dataset.interop import scan_schema

            self.schema = scan_schema(self)  # the given schema, narrowed
        else:
            self.schema = unify(schemas)
        if not tables:
            return self.schema.empty_table()
        return pa.concat_tables([conform(t, self.schema) for t in tables])

    def _head_of(self, n: int) -> pa.Table:
        """:meth:`head` of this scan's files (``_subset``, or all) in one plan."""
        if n == 0:  # the schema needs the plan; no data page is read
            plans = self._ds.make_plans(self._columns, self._expr, None, self._subset)
            self.report, self.schema = plans.report, plans.schema
            return plans.schema.empty_table()
        tables: list[pa.Table] = []
        rows = 0
        stream = self._tables(parallel=False)
        try:
            for t in stream:
                tables.append(self._cast(t).slice(0, n - rows))
                rows += tables[-1].num_rows
                if rows >= n:
                    break
        finally:
            stream.close()
        if not tables:
            return self.schema.empty_table()
        return pa.concat_tables(tables)

    @public_api
    def to_pandas(self, **kwargs: Any) -> Any:
        return self.to_table().to_pandas(**kwargs)

    # Interop (dataset/interop.py). A Scan can run again: each call starts a new stream.

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow PyCapsule stream of the matching rows, batches as produced."""
        from pqindex.dataset.interop import stream_capsule

        return stream_capsule(self, requested_schema)

    def to_reader(self) -> pa.RecordBatchReader:
        """The matching rows as a streaming ``pyarrow.RecordBatchReader``."""
        from pqindex.dataset.interop import to_reader

        return to_reader(self)

    def to_polars(self) -> Any:
        """The matching rows as a ``polars.DataFrame``."""
        from pqindex.dataset.interop import to_polars

        return to_polars(self)


def column_list(columns: str | Sequence[str] | None) -> list[str] | None:
    """``columns`` as a list of names: one name alone is that column (as polars takes
    it; iterated, a string would be its letters)."""
    if columns is None:
        return None
    names = [columns] if isinstance(columns, str) else list(columns)
    for name in names:
        if not isinstance(name, str):
            raise UserInputError(f"columns must be names (strings), not {type(name).__name__}")
    return names


def dataset(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], **kwargs: Any
) -> Dataset:
    """A lazy dataset over a file, a directory (hive ``key=value/`` partitions), or a list
    of them, local or on an object store; ``kwargs`` are :class:`Dataset`'s options."""
    return Dataset(source, **kwargs)
