"""The columnar manifest: the dataset manifest's per-file facts as a Parquet file.

``_pqindex/manifest.pqm`` (a Parquet file pqindex writes with its page index; the
``.pqm`` suffix and the ``_pqindex`` directory keep it out of every data glob and
directory scan: ``lake/*.parquet``, ``lake/**/*.parquet``, pyarrow's and Spark's
``_``-prefixed exclusion). One row per file: ``path``, ``bytes``, ``rows``,
``schema``, ``etag``, ``mtime``, ``ctime``, the JSON entry as written (``entry``: Spark's key
ranges, summaries, the raw bound bytes), then per leaf column the statistics as
sort keys (``dataset/sources.py``: ``min(c)``, ``max(c)``, ``nulls(c)``, ``nans(c)``,
``values(c)``, ``exact(c)``, ``all_nan(c)``), judged when it is written exactly as
the JSON entry is judged when read. The manifest's top-level keys (schemas,
version, ``commit_point``...) are the footer's ``pqindex.manifest`` entry.

It is written right after ``_pqindex_manifest.json`` and records that file's size
and mtime (``pqindex.json_manifest``): it is used only while the JSON manifest is
the one it was written with, so a writer that knows only the JSON (an older
pqindex) makes it ignored, never trusted stale. Planning then reads a few Arrow
columns instead of parsing JSON: per-file entries are parsed only for the files a
vectorized stage leaves undecided. Local datasets only for now.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pqindex.dataset.discovery import Discovery
from pqindex.dataset.manifest import (
    MANIFEST_NAME,
    FileEntry,
    Manifest,
    ManifestError,
    ManifestView,
    _local_info,
    _opt_bytes,
    _parse_entry,
    stub_file,
)
from pqindex.dataset.sources import (
    _STAT_FIELDS,
    ColumnStatistics,
    FileFacts,
    _files_table,
    _partitions,
    entry_statistics,
    key_array,
)
from pqindex.format.file import ParquetFile

__all__ = ["COLUMNAR_NAME", "Columnar", "read_columnar", "write_columnar"]

log = logging.getLogger("pqindex")

COLUMNAR_NAME = "_pqindex/manifest.pqm"
_TOP_KEY = b"pqindex.manifest"
_JSON_KEY = b"pqindex.json_manifest"


def _json_stat(path: str) -> dict[str, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _schemas(top: Mapping[str, Any], url: str) -> list[ParquetFile]:
    out = []
    for i, s in enumerate(top.get("schemas") or []):
        stub = _opt_bytes({"s": s}, "s", f"schema {i}")
        if stub is None:
            raise ManifestError(f"manifest not used: schema {i} is empty")
        out.append(stub_file(stub, f"{url}#schema{i}"))
    return out


def write_columnar(root: str, manifest: Mapping[str, Any]) -> None:
    """Write ``root``'s columnar manifest from ``manifest`` (the dict just written as
    ``root``'s JSON manifest), atomically (temporary name + rename)."""
    json_path = os.path.join(root, MANIFEST_NAME)
    stat = _json_stat(json_path)
    if stat is None:
        return
    files = [e for e in manifest.get("files") or [] if isinstance(e, dict)]
    try:
        schemas = _schemas(manifest, json_path)
        entries = [_parse_entry(e, len(schemas), lambda i: len(schemas[i].schema.leaves))
                   for e in files]
    except ManifestError as e:  # the JSON reader will say so; no columnar copy
        log.warning("%s: no columnar manifest: %s", root, e)
        return
    cols: dict[str, pa.Array] = {
        "path": pa.array([e.path for e in entries], pa.string()),
        "bytes": pa.array([e.size for e in entries], pa.int64()),
        "rows": pa.array([e.rows for e in entries], pa.int64()),
        "schema": pa.array([e.schema for e in entries], pa.int32()),
        "etag": pa.array([e.etag for e in entries], pa.string()),
        "mtime": pa.array([e.mtime for e in entries], pa.int64()),
        "ctime": pa.array([e.ctime for e in entries], pa.int64()),
        "entry": pa.array([json.dumps(e, separators=(",", ":"), default=str) for e in files],
                          pa.string()),
    }
    names: list[str] = []
    for pf in schemas:
        names += [lf.name for lf in pf.schema.leaves if lf.name not in names]
    for name in names:
        got = entry_statistics(entries, schemas, name)
        if got is None:
            continue
        for f in _STAT_FIELDS:
            cols[f"{f}({name})"] = getattr(got, f)
    top = {k: v for k, v in manifest.items() if k != "files"}
    # Columns with embedded file-level summaries: the embedded stage asks those files.
    top["summary_columns"] = sorted({b.column for e in entries for b in e.summaries})
    table = pa.table(cols).replace_schema_metadata({
        _TOP_KEY: json.dumps(top, separators=(",", ":"), default=str).encode(),
        _JSON_KEY: json.dumps(stat).encode()})
    target = os.path.join(root, *COLUMNAR_NAME.split("/"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = f"{target}.{os.getpid()}.tmp"
    pq.write_table(table, tmp, write_page_index=True, compression="zstd")
    os.replace(tmp, target)


class _Entries(Mapping[str, FileEntry]):
    """The manifest's entries by relative path, each parsed when first asked for."""

    def __init__(self, columnar: Columnar) -> None:
        self._c = columnar
        self._parsed: dict[int, FileEntry] = {}

    def __getitem__(self, rel: str) -> FileEntry:
        return self._c.entry(self._c.row_of[rel])

    def __iter__(self) -> Iterator[str]:
        return iter(self._c.row_of)

    def __len__(self) -> int:
        return len(self._c.row_of)


@dataclass
class Columnar:
    """A columnar manifest read and checked against its JSON manifest."""

    url: str  # the JSON manifest's (the one this columnar copy stands for)
    path: str  # the columnar file's
    table: pa.Table  # the per-file columns (statistics columns: read when first asked)
    top: dict[str, Any]
    schemas: list[ParquetFile]
    _parsed: dict[int, FileEntry] = field(default_factory=dict)
    _entries: pa.ChunkedArray | None = None  # read when a first entry is parsed
    _row_of: dict[str, int] | None = None
    # The files a commit-point discovery made of this manifest's paths, one per row in
    # order (discovery._committed): a view of those needs no matching.
    named_files: tuple[Any, ...] | None = None
    # The file's statistics columns and (size, mtime) as first read.
    stat_names: frozenset[str] = frozenset()
    read_as: tuple[int, int] | None = None
    _stats: dict[str, ColumnStatistics | None] = field(default_factory=dict)

    @property
    def row_of(self) -> dict[str, int]:
        """Each file's row, by relative path (built when first asked for)."""
        if self._row_of is None:
            paths = self.table.column("path").to_pylist()
            self._row_of = dict(zip(paths, range(len(paths)), strict=True))
        return self._row_of

    @property
    def commit_point(self) -> bool:
        return self.top.get("commit_point") is True

    def entry(self, row: int) -> FileEntry:
        """File ``row``'s entry, parsed from its JSON (once)."""
        got = self._parsed.get(row)
        if got is None:
            if self._entries is None:
                self._entries = pq.ParquetFile(self.path).read(columns=["entry"]).column("entry")
            raw = json.loads(self._entries[row].as_py())
            n = len(self.schemas)
            got = self._parsed[row] = _parse_entry(
                raw, n, lambda i: len(self.schemas[i].schema.leaves))
        return got

    def schema_of(self, row: int) -> int:
        return int(self.table.column("schema")[row].as_py())

    def entries(self) -> Mapping[str, FileEntry]:
        return _Entries(self)

    def statistics(self, column: str, take: pa.Array | None) -> ColumnStatistics | None:
        """Leaf ``column``'s statistics for the rows ``take`` (null: a file without an
        entry; None: every row in order), or None when the manifest has none for it."""
        if f"min({column})" not in self.stat_names:
            return None
        if column not in self._stats:
            # Read now: a lookup reads its predicate's columns, not every column's.
            got = None
            st = _json_stat(self.path)
            if st is not None and (st["size"], st["mtime_ns"]) == self.read_as:
                try:
                    t = pq.ParquetFile(self.path).read(
                        columns=[f"{f}({column})" for f in _STAT_FIELDS])
                except (OSError, pa.ArrowException) as e:
                    log.warning("%s: columnar manifest statistics not used: %s", self.path, e)
                else:
                    if t.num_rows == self.table.num_rows:
                        got = ColumnStatistics(*(c.combine_chunks() for c in t.columns))
            self._stats[column] = got  # None (replaced meanwhile): every file kept
        got = self._stats[column]
        if got is None or take is None:
            return got
        return got.take(take)


# The last columnar manifest read, by (its path, its stat, its JSON manifest's stat):
# discovery and the manifest view of one dataset read it once.
_last: tuple[tuple[Any, ...], Columnar] | None = None


def read_columnar(root: str) -> Columnar | None:
    """``root``'s columnar manifest when it stands for the JSON manifest there now; else
    None (absent, unreadable, or written with another JSON manifest)."""
    global _last
    target = os.path.join(root, *COLUMNAR_NAME.split("/"))
    json_path = os.path.join(root, MANIFEST_NAME)
    own = _json_stat(target)
    if own is None:
        return None
    key = (target, own["size"], own["mtime_ns"], json.dumps(_json_stat(json_path)))
    held = _last
    if held is not None and held[0] == key:
        return held[1]
    try:
        # pq.ParquetFile, not pq.read_table: no pyarrow.dataset import (~0.3 s cold).
        pf = pq.ParquetFile(target)
        meta = pf.schema_arrow.metadata or {}
        if json.loads(meta.get(_JSON_KEY, b"null")) != _json_stat(json_path):
            return None
        top = json.loads(meta[_TOP_KEY])
        if not isinstance(top, dict) or top.get("version") != 1:
            return None
        stat_names = frozenset(n for n in pf.schema_arrow.names if n.endswith(")"))
        names = [n for n in pf.schema_arrow.names if n != "entry" and n not in stat_names]
        got = Columnar(json_path, target, pf.read(columns=names), top,
                       _schemas(top, json_path), stat_names=stat_names,
                       read_as=(own["size"], own["mtime_ns"]))
    except (OSError, ValueError, KeyError, pa.ArrowException, ManifestError) as e:
        log.warning("%s: columnar manifest not used: %s", target, e)
        return None
    _last = (key, got)
    return got


class _Matched(Mapping[str, "tuple[FileEntry, ParquetFile]"]):
    """Data file path -> (entry, stand-in) for the files matched, entries parsed lazily."""

    def __init__(self, columnar: Columnar, rows: dict[str, int] | None,
                 aligned: Sequence[Any] = ()) -> None:
        self.columnar = columnar
        self._rows = rows
        # Files named by the manifest itself, file i at row i (rows built when asked).
        self.aligned = aligned

    @property
    def rows(self) -> dict[str, int]:
        if self._rows is None:
            self._rows = {df.path: i for i, df in enumerate(self.aligned)}
        return self._rows

    def __getitem__(self, path: str) -> tuple[FileEntry, ParquetFile]:
        row = self.rows[path]
        return self.columnar.entry(row), self.columnar.schemas[self.columnar.schema_of(row)]

    def __iter__(self) -> Iterator[str]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


def columnar_view(columnar: Columnar, root: str, disc: Discovery) -> ManifestView:
    """``columnar`` matched against ``disc``'s files: by relative path and, unless the
    manifest itself named them (a commit point), size and mtime / ETag as
    ``manifest.load_view`` matches JSON entries (without parsing them)."""
    named = disc.named_by == columnar.url
    t = columnar.table
    if named and columnar.named_files is disc.files and t.column("schema").null_count == 0:
        # The files are the manifest's rows, in order: nothing to match.
        manifest = Manifest(columnar.url, columnar.schemas, columnar.entries())
        return ManifestView(manifest, root, _Matched(columnar, None, disc.files), 0,
                            columnar=columnar)
    sizes = t.column("bytes").to_pylist()
    etags = t.column("etag").to_pylist()
    mtimes = t.column("mtime").to_pylist()
    ctimes = (t.column("ctime").to_pylist() if "ctime" in t.column_names
              else [None] * t.num_rows)
    schemas = t.column("schema").to_pylist()
    rows: dict[str, int] = {}
    base = root.rstrip(os.sep) + os.sep
    for df in disc.files:
        rel = df.path[len(base):].replace(os.sep, "/") if df.path.startswith(base) else None
        row = None if rel is None else columnar.row_of.get(rel)
        if row is None or schemas[row] is None:
            continue
        if not named:
            info = df.info if df.info is not None else _local_info(df.path)
            if info is None or info.size != sizes[row]:
                continue
            # As manifest._matches: ETags when both sides have one, else the ctime of a
            # local file (a rewrite with size and mtime restored still moves it), mtime.
            if etags[row] and info.etag:
                if etags[row].strip('"') != info.etag.strip('"'):
                    continue
            elif (info.ctime is not None and ctimes[row] != info.ctime) or (mtimes[row] is not None and info.mtime is not None and mtimes[row] != info.mtime):
                continue
        rows[df.path] = row
    manifest = Manifest(columnar.url, columnar.schemas, columnar.entries())
    return ManifestView(manifest, root, _Matched(columnar, rows), len(disc.files) - len(rows),
                        columnar=columnar)


@dataclass(frozen=True)
class ColumnarManifestSource:
    """The columnar manifest's files and statistics, aligned with the listing's files
    (a file without a matched entry has null facts)."""

    view: ManifestView
    columnar: Columnar
    discovery: Discovery
    name: str = "manifest"

    @property
    def listed(self) -> bool:
        return self.discovery.named_by is None

    def facts(self) -> FileFacts:
        files = self.discovery.files
        matched = self.view.matched
        assert isinstance(matched, _Matched)
        take: pa.Array | None = None  # the row of each file (None: file i at row i)
        if matched.aligned is not files:
            rows = matched.rows
            take = key_array([rows.get(df.path) for df in files], pa.int64())
        t = self.columnar.table

        def column(name: str) -> pa.Array:
            got = t.column(name).combine_chunks()
            return got if take is None else got.take(take)

        table = _files_table(
            [df.path for df in files], [], [], [], [], [], _partitions(self.discovery),
            given={"size": column("bytes"), "etag": column("etag"), "mtime": column("mtime"),
                   "rows": column("rows"), "schema": column("schema")})
        summarized = frozenset(str(c) for c in self.columnar.top.get("summary_columns") or [])

        def statistics(column: str) -> ColumnStatistics | None:
            return self.columnar.statistics(column, take)

        return FileFacts(table, self.name, self.listed, tuple(self.columnar.schemas),
                         summarized, statistics)
