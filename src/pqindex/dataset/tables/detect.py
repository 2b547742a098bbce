"""Which lake table, if any, a file or directory belongs to.

A table is known by what sits at its root:

* Delta Lake: a ``_delta_log/`` directory;
* Apache Iceberg: ``metadata/`` holding ``*.metadata.json`` files;
* Apache Hudi: a ``.hoodie/`` directory;
* Apache Paimon: both ``snapshot/`` and ``manifest/`` directories.

Detection walks up from the path to the filesystem (or bucket) root, so a data
file deep in a partition directory is found to belong to its table. A file of a
table is immutable for pqindex: its log or manifests record its size, and
readers locate the footer from it.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["TableFormat", "TableRoot", "find_table", "find_table_remote"]


class TableFormat(enum.Enum):
    DELTA = "delta"
    ICEBERG = "iceberg"
    HUDI = "hudi"
    PAIMON = "paimon"


@dataclass(frozen=True)
class TableRoot:
    """A table's format and its root directory (a local path or a URL ending without ``/``)."""

    format: TableFormat
    root: str


def _local_format(d: str) -> TableFormat | None:
    if os.path.isdir(os.path.join(d, "_delta_log")):
        return TableFormat.DELTA
    if os.path.isdir(os.path.join(d, ".hoodie")):
        return TableFormat.HUDI
    meta = os.path.join(d, "metadata")
    if os.path.isdir(meta):
        try:
            if any(n.endswith(".metadata.json") for n in os.listdir(meta)):
                return TableFormat.ICEBERG
        except OSError:
            pass
    if os.path.isdir(os.path.join(d, "snapshot")) and os.path.isdir(os.path.join(d, "manifest")):
        return TableFormat.PAIMON
    return None


def find_table(path: str | os.PathLike[str],
               cache: dict[str, TableFormat | None] | None = None) -> TableRoot | None:
    """The table a local ``path`` (file or directory) lies in, or None.

    ``cache`` (directory -> format found there) saves the checks for the many
    files of one directory tree."""
    d = os.path.abspath(os.fspath(path))
    if not os.path.isdir(d):
        d = os.path.dirname(d)
    seen = cache if cache is not None else {}
    while True:
        if d not in seen:
            seen[d] = _local_format(d)
        found = seen[d]
        if found is not None:
            return TableRoot(found, d)
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _remote_format(names: set[str], files: set[str]) -> TableFormat | None:
    if "_delta_log" in names:
        return TableFormat.DELTA
    if ".hoodie" in names:
        return TableFormat.HUDI
    if "metadata" in names and any(f.endswith(".metadata.json") for f in files):
        return TableFormat.ICEBERG
    if "snapshot" in names and "manifest" in names:
        return TableFormat.PAIMON
    return None


def find_table_remote(url: str, storage_options: Mapping[str, Any] | None = None,
                      cache: dict[str, TableFormat | None] | None = None) -> TableRoot | None:
    """The table an object-store URL lies in, or None: one delimited LIST per
    ancestor prefix (and one of ``metadata/`` where that directory exists)."""
    import obstore

    from pqindex.io.errors import StorageAccessError, translate
    from pqindex.io.objstore import get_store

    handle, key = get_store(url, storage_options)
    parts = key.strip("/").split("/")
    # A key naming an object: its directory first; a prefix: itself first.
    seen = cache if cache is not None else {}
    for n in range(len(parts), -1, -1):
        prefix = "/".join(parts[:n])
        if prefix in seen:
            found = seen[prefix]
        else:
            try:
                listed = obstore.list_with_delimiter(handle.store, prefix or None)
                names = {p.rstrip("/").rsplit("/", 1)[-1] for p in listed["common_prefixes"]}
                files: set[str] = set()
                if "metadata" in names:
                    meta = obstore.list_with_delimiter(
                        handle.store, f"{prefix}/metadata" if prefix else "metadata")
                    files = {o["path"] for o in meta["objects"]}
            except Exception as e:  # the store's error, made ours
                err = translate(e, url, "LIST")
                if isinstance(err, StorageAccessError):
                    # Credentials scoped to objects (a blob SAS) cannot list; a table's
                    # own writers must list its log, so no table is kept here.
                    return None
                raise err from None
            found = seen[prefix] = _remote_format(names, files)
        if found is not None:
            root = handle.url + ("/" + prefix if prefix else "")
            return TableRoot(found, root)
    return None
