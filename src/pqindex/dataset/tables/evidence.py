"""pqindex's per-file evidence for one version of a lake table, in a sidecar.

A table's log keeps per-file min/max, null counts and row counts: enough for a
sorted column, never for a rare or absent value of an unsorted one, where every
file's tail had to be read for its Bloom filter or distinct set. When pqindex
indexes a table it also writes, for the version it committed, one object that
holds each active file's footer statistics and small file-scope summaries
(Bloom filters and distinct sets up to ``SUMMARY_MAX_BYTES``):
``<root>/_pqindex/delta-<version, 20 digits>.json`` (Delta) or
``<location>/_pqindex/iceberg-<snapshot id>.json`` (Iceberg), in the dataset
manifest's format (``dataset/manifest.py``, docs/manifest.md), with a ``table``
key naming the format and version.

Trust rules:

* The sidecar is named by the version it describes; a reader looks for its own
  version's only, so another version's (stale) sidecar is never read.
* An entry is used only for a file of the snapshot at the same relative path and
  with the size the log or manifest records (a table's data file is immutable: a
  path names one content). Files without an entry are planned from their footers as before.
* A sidecar that cannot be read or parsed is ignored (logged): the same rows.
* Only a "no row can match" answer is used; a column the sidecar's schema lacks
  (added later, column mapping's physical names, partition columns) keeps the file.

The sidecar is read lazily, only when the log's statistics leave more than one
file to open: a point lookup on a sorted column never pays for it. Delta's own
VACUUM leaves ``_pqindex/`` alone (a directory whose name starts with ``_``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pqindex.dataset.discovery import DataFile
from pqindex.dataset.manifest import (
    FileEntry,
    ManifestView,
    build_manifest,
    parse_manifest,
)
from pqindex.errors import PqIndexError
from pqindex.expr.bind import BoundExpr, bind
from pqindex.expr.bind import columns as columns_of
from pqindex.expr.nodes import Expr
from pqindex.format.file import ParquetFile
from pqindex.io.objects import get_object, put_object
from pqindex.io.source import IOStats, ObjectInfo, open_source

__all__ = ["SIDECAR_DIR", "SUMMARY_KINDS", "TableEvidence", "evidence_url", "write_evidence"]

log = logging.getLogger("pqindex")

SIDECAR_DIR = "_pqindex"
# File-scope blobs the sidecar copies: Bloom filters too (the dataset manifest
# keeps them in the files), each up to this size (a 20,000-value filter at 1% is ~24 KB).
SUMMARY_KINDS = ("distinct", "zone_maps", "bloom")
SUMMARY_MAX_BYTES = 64 << 10
OPEN_CONCURRENCY = 16  # footers read at once while the sidecar is built


def evidence_url(root: str, version: int, table_format: str = "delta") -> str:
    """Where the sidecar of ``version`` (a Delta version, an Iceberg snapshot id) of
    the table at ``root`` lives."""
    name = (f"delta-{version:020d}.json" if table_format == "delta"
            else f"{table_format}-{version}.json")
    if "://" in root:
        return f"{root}/{SIDECAR_DIR}/{name}"
    return os.path.join(root, SIDECAR_DIR, name)


def _relative(root: str, path: str) -> str:
    """A data file's path relative to the table root, ``/``-separated."""
    if "://" in root or "://" in path:
        return path[len(root) + 1:] if path.startswith(root + "/") else path
    return os.path.relpath(path, root).replace(os.sep, "/")


def write_evidence(root: str, table_format: str, version: int,
                   files: Sequence[tuple[str, int]],
                   storage_options: Mapping[str, Any] | None = None) -> str:
    """Write the sidecar of ``version`` for its ``files`` ((path or URL, size the log or
    manifest records)); returns its URL. Each footer is read (one tail request each,
    ``OPEN_CONCURRENCY`` at once)."""

    def entry(item: tuple[str, int]) -> tuple[str, ParquetFile, ObjectInfo]:
        path, size = item
        src = open_source(path, storage_options=storage_options, info=ObjectInfo(size))
        return _relative(root, path), ParquetFile(src), ObjectInfo(size)

    with ThreadPoolExecutor(OPEN_CONCURRENCY) as pool:
        opened = list(pool.map(entry, files))
    try:
        manifest = build_manifest(
            opened, {"table": {"format": table_format, "version": version}},
            summary_kinds=SUMMARY_KINDS, summary_max_bytes=SUMMARY_MAX_BYTES)
    finally:
        for _rel, pf, _info in opened:
            pf.close()
    url = evidence_url(root, version, table_format)
    if "://" not in url:
        os.makedirs(os.path.dirname(url), exist_ok=True)
    put_object(url, json.dumps(manifest, separators=(",", ":")).encode(), storage_options)
    return url


@dataclass
class TableEvidence:
    """The sidecar of one table version, read on first use (at most one GET)."""

    root: str
    version: int
    storage_options: Mapping[str, Any] | None = None
    table_format: str = "delta"
    stats: IOStats = field(default_factory=IOStats)
    _view: ManifestView | None = None
    _loaded: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return evidence_url(self.root, self.version, self.table_format)

    def _load(self, files: Sequence[DataFile]) -> ManifestView | None:
        with self._lock:
            if self._loaded:
                return self._view
            self._loaded = True
            try:
                data = get_object(self.url, self.storage_options, self.stats)
                if data is None:
                    return None
                manifest = parse_manifest(data, self.url)
            except PqIndexError as e:
                log.warning("%s: table evidence not used: %s", self.url, e)
                return None
            # The name says the version; so does the sidecar's own ``table`` key (early
            # in the object: build_manifest puts it before the entries).
            own = (f'"table":{{"format":"{self.table_format}",'
                   f'"version":{self.version}}}').encode()
            if own not in data[:256]:
                log.warning("%s: not the sidecar of version %d: not used", self.url,
                            self.version)
                return None
            matched: dict[str, tuple[FileEntry, ParquetFile]] = {}
            for df in files:
                entry = manifest.entries.get(_relative(self.root, df.path))
                if (entry is not None and entry.schema is not None and df.info is not None
                        and entry.size == df.info.size):
                    matched[df.path] = (entry, manifest.schemas[entry.schema])
            self._view = ManifestView(manifest, self.root, matched,
                                      len(files) - len(matched), stats=self.stats)
            return self._view

    def ruled_out(self, all_files: Sequence[DataFile], candidates: Sequence[DataFile],
                  expr: Expr) -> list[bool]:
        """Per file of ``candidates``, whether the sidecar shows no row of it can
        satisfy ``expr`` (``all_files``: the snapshot's, matched once)."""
        view = self._load(all_files)
        if view is None:
            return [False] * len(candidates)
        wanted = columns_of(expr)
        by_schema: dict[int, BoundExpr | None] = {}

        def bound(pf: ParquetFile) -> BoundExpr | None:
            if id(pf) not in by_schema:
                absent = [c for c in wanted if pf.schema.leaf(c) is None]
                try:
                    # A column this schema lacks may hold values: its leaves keep the file.
                    by_schema[id(pf)] = bind(expr, pf.schema, absent, absent_null=False)
                except PqIndexError:
                    by_schema[id(pf)] = None
            return by_schema[id(pf)]

        return [view.prune(df, bound, {}) is not None for df in candidates]
