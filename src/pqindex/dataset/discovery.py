"""Finding a dataset's files and their hive-style partition values.

``key=value`` directory names become partition columns; their type is inferred
over all files (integers when every value is one, strings otherwise), as
pyarrow's hive partitioning does. Files and directories whose names start with
``_`` or ``.`` (``_SUCCESS``, ``_metadata``, ``.crc``) are not data.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pqindex.dataset.partition_kinds import partition_value
from pqindex.errors import PqIndexError, UserInputError
from pqindex.io.errors import ObjectNotFoundError
from pqindex.io.listing import list_with, probe_object
from pqindex.io.source import IOStats, ObjectInfo, is_object_store_url, listing_failed

__all__ = ["MANIFEST_NAME", "DataFile", "Discovery", "committed_discovery", "discover",
           "pattern_files", "split_pattern"]

MANIFEST_NAME = "_pqindex_manifest.json"  # see pqindex.dataset.manifest
DELTA_LOG = "_delta_log"  # a Delta Lake table's log directory


@dataclass(frozen=True, slots=True)
class DataFile:
    """One Parquet file of a dataset and the partition values its path carries."""

    path: str
    partition: tuple[tuple[str, str], ...] = ()  # raw (key, value) from the path
    info: ObjectInfo | None = None  # size and ETag/mtime from the listing (no HEAD later)


@dataclass(frozen=True, slots=True)
class Discovery:
    """The files of a dataset and the typed partition columns."""

    files: tuple[DataFile, ...]
    partition_columns: tuple[str, ...] = ()
    # "int64", "date32" or "string" (_infer_type); a table's typed ones (partition_kinds)
    partition_types: dict[str, str] = field(default_factory=dict)
    io: IOStats = field(default_factory=IOStats)  # requests made to list and probe
    # The dataset manifest beside the files of a one-directory dataset (URL, listing info).
    manifest: tuple[str, ObjectInfo | None] | None = None
    # Its bytes when they came with the LIST (fetched concurrently, the same version).
    manifest_data: bytes | None = None
    # A Delta Lake log beside the files (``<dir>/_delta_log``): they are read as plain
    # Parquet, files the log removed included; scans say so (``delta_warning``).
    delta_log: str | None = None
    # The files were named by this commit point (a manifest pqindex's pipeline
    # committed), not found by a LIST or a walk of the directory.
    named_by: str | None = None
    # The names in that log, when the LIST that found it showed them (a store).
    delta_log_names: tuple[str, ...] | None = None

    def delta_warning(self) -> str | None:
        if self.delta_log is None:
            return None
        return (f"{self.delta_log}: a Delta Lake table; its Parquet files are read as plain "
                "Parquet, files its log has removed included (read the table through Delta "
                "Lake for its current version)")

    def partition_values(self, f: DataFile) -> dict[str, Any]:
        """Typed partition values of one file (None for the hive null marker)."""
        out: dict[str, Any] = {}
        if not self.partition_columns:
            return out
        raw = dict(f.partition)
        for k in self.partition_columns:
            v = raw.get(k)
            if v is None or v == "__HIVE_DEFAULT_PARTITION__":
                out[k] = None
            elif (kind := self.partition_types.get(k, "string")) != "string":
                out[k] = partition_value(kind, v)  # int64, date32, or a table's kind
            else:
                out[k] = v
        return out


def _is_data_name(name: str) -> bool:
    return not (name.startswith(("_", ".")) or name.endswith((".crc", ".tmp")))


def _hive_parts(rel_dirs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    parts = []
    for d in rel_dirs:
        if "=" in d:
            k, _, v = d.partition("=")
            parts.append((urllib.parse.unquote(k), urllib.parse.unquote(v)))
    return tuple(parts)


def _walk_local(root: str) -> list[DataFile]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=listing_failed):
        dirnames[:] = sorted(d for d in dirnames if _is_data_name(d))
        rel = os.path.relpath(dirpath, root)
        rel_dirs = [] if rel == "." else rel.split(os.sep)
        for fn in sorted(filenames):
            if _is_data_name(fn):
                out.append(DataFile(os.path.join(dirpath, fn), _hive_parts(rel_dirs)))
    return out


def _walk_remote(url: str, listed: list[tuple[str, ObjectInfo]]) -> list[DataFile]:
    base = url.rstrip("/")
    # Directory markers are objects too: the console's "Create folder" and older Hadoop
    # writers leave empty `dir/` keys (listed without their slash) and `dir_$folder$`
    # ones. A key other keys lie below is such a marker, never data.
    dirs = {full.rsplit("/", k)[0] for full, _ in listed for k in range(1, full.count("/"))}
    out = []
    for full, info in listed:
        rel = full[len(base) :].strip("/").split("/")
        if not all(_is_data_name(x) for x in rel) or rel[-1].endswith("_$folder$"):
            continue
        if (full.rstrip("/") == base or full in dirs) and not info.size:
            continue
        out.append(DataFile(full, _hive_parts(rel[:-1]), info))
    return out


# Names that are most likely one file: probed with a tail GET before any LIST.
_FILE_SUFFIXES = (".parquet", ".parq", ".pq")


def _discover_remote(
    url: str, storage_options: Mapping[str, Any] | None, stats: IOStats, probe: bool,
    found: dict[str, ObjectInfo] | None = None, fetched: dict[str, bytes] | None = None,
    logs: list[str] | None = None, log_names: list[str] | None = None,
) -> list[DataFile]:
    """A file or a prefix of a store: one request in the common cases.

    A name ending in ``.parquet`` is probed first (the tail GET also fills the
    metadata cache, so opening it costs nothing more); anything else, or a probe
    that finds no object (Spark's ``table.parquet/`` directories), is LISTed.
    Among many paths (``probe`` false), such names are taken as files unread, so a
    list of 1,000 URLs costs no request here. With ``found``, the manifest is looked
    for in the LIST and GET beside its first page (``fetched``: its bytes, when the
    LIST shows it too); the names it lists split the rest of a long LIST into
    segments listed concurrently.
    """
    object_store = is_object_store_url(url)
    scheme = url.split("://", 1)[0].lower()
    named_file = url.lower().endswith(_FILE_SUFFIXES)
    if object_store and (named_file or scheme in ("http", "https")):
        if not probe:
            return [DataFile(url)]  # one of many paths: opening it says if it is absent
        info = probe_object(url, storage_options, stats)
        if info is not None:
            return [DataFile(url, (), info)]
        if scheme in ("http", "https"):  # plain HTTP servers cannot list
            raise ObjectNotFoundError("no such object", path=url, operation="GET (tail)")
    with_manifest = found is not None and object_store
    keys_of = None
    if with_manifest:
        from pqindex.dataset.manifest import manifest_keys  # (it imports this module)

        keys_of = manifest_keys
    listing = list_with(url, storage_options, stats,
                        MANIFEST_NAME if with_manifest else None, keys_of)
    listed = listing.objects
    if found is not None:  # the manifest, seen in the same LIST
        at = f"{url.rstrip('/')}/{MANIFEST_NAME}"
        found.update((u, i) for u, i in listed if u == at)
        # Any version of it is safe: each entry is matched against this listing.
        if at in found and listing.fetched is not None and fetched is not None:
            fetched[at] = listing.fetched[0]
    if listed:
        at = f"{url.rstrip('/')}/{DELTA_LOG}/"
        if logs is not None and any(u.startswith(at) for u, _ in listed):
            logs.append(at.rstrip("/"))
            if log_names is not None:  # the table's reader needs no LIST of its own
                log_names.extend(u[len(at):] for u, _ in listed
                                 if u.startswith(at) and "/" not in u[len(at):])
        return _walk_remote(url, listed)
    if object_store and not url.endswith("/"):
        return [DataFile(url)]  # a single object; opening it says if it is absent
    if not object_store:
        import fsspec

        fs, fp = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
        if fs.exists(fp):
            return [DataFile(url)]
    raise UserInputError("no such file or directory", path=url)


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _is_date(v: str) -> bool:
    if not _ISO_DATE.fullmatch(v):
        return False
    try:
        dt.date.fromisoformat(v)
    except ValueError:
        return False
    return True


def _infer_type(values: Iterable[str]) -> str:
    """A hive key's type from all its values, as Spark infers the common ones: int64
    when every value is an integer, date32 when every one is an ISO date
    (``dt=2024-01-31``, what ``partitionBy`` on a DATE column writes), else string."""
    kinds = {"int64", "date32"}
    seen = False
    for v in values:
        if v == "__HIVE_DEFAULT_PARTITION__":
            continue
        seen = True
        if "int64" in kinds:
            try:
                int(v)
            except ValueError:
                kinds.discard("int64")
        if "date32" in kinds and not _is_date(v):
            kinds.discard("date32")
        if not kinds:
            return "string"
    if not seen:
        return "string"
    return "int64" if "int64" in kinds else "date32"


def split_pattern(p: str) -> tuple[str, list[str]] | None:
    """``(base, pattern segments)`` of a path with glob characters (``*``, ``?``,
    ``[``) — the base is the directory before the first segment holding one — else
    None. HTTP(S) URLs are never patterns (``?`` starts their query), nor is a local
    name that exists as written: that is the file, brackets or not."""
    if p.lower().startswith(("http://", "https://")):
        return None
    if "://" not in p and os.path.exists(p):
        return None
    at = min((i for i in (p.find(c) for c in "*?[") if i >= 0), default=-1)
    if at < 0:
        return None
    cut = p.rfind("/", 0, at)
    base = p[:cut] if cut >= 0 else ""
    return base, p[cut + 1:].split("/")


def _glob_match(parts: Sequence[str], pattern: Sequence[str]) -> bool:
    """Whether the relative path ``parts`` matches ``pattern`` segment by segment:
    ``*``, ``?`` and ``[...]`` within a segment, ``**`` any number of segments."""
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_glob_match(parts[i:], rest) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], head) and _glob_match(parts[1:], rest)


def pattern_files(base: str, pattern: list[str], remote: bool,
                   storage_options: Mapping[str, Any] | None, stats: IOStats) -> list[DataFile]:
    """The data files under ``base`` whose path below it matches ``pattern``; hive
    partitions are read from the directories below ``base``."""
    if remote:
        listed = _discover_remote(base.rstrip("/") + "/", storage_options, stats, probe=False)
        prefix = base.rstrip("/") + "/"
        rel = {df.path: df.path[len(prefix):].split("/") for df in listed}
    else:
        root = base or "."
        if not os.path.isdir(root):
            raise UserInputError("no such directory", path=root)
        listed = _walk_local(root)
        rel = {df.path: os.path.relpath(df.path, root).split(os.sep) for df in listed}
    return [df for df in listed if _glob_match(rel[df.path], pattern)]


def _committed(root: str, remote: bool, storage_options: Mapping[str, Any] | None,
               stats: IOStats) -> Discovery | None:
    """The files a commit-point manifest in directory ``root`` names (one GET on a
    store, none of LIST), or None when there is no such manifest (absent, not a
    commit point, not readable: the directory is listed instead)."""
    from pqindex.dataset.manifest import committed_files
    from pqindex.io.objects import get_object

    base = root.rstrip("/") if remote else root.rstrip(os.sep)
    url = f"{base}/{MANIFEST_NAME}" if remote else os.path.join(base, MANIFEST_NAME)
    if not remote and not os.path.isfile(url):
        return None
    if not remote:
        from pqindex.dataset.manifest_columnar import read_columnar

        columnar = read_columnar(base)
        if columnar is not None:
            if not columnar.commit_point:
                return None
            disc = _named(base, remote, columnar.table.column("path").to_pylist(), [],
                          stats, url, None)
            # Its files are the manifest's rows in order: its view needs no matching.
            columnar.named_files = None if disc is None else disc.files
            return disc
    try:
        data = get_object(url, storage_options, stats)
    except PqIndexError:
        return None
    named = None if data is None else committed_files(data)
    if named is None:
        return None
    return _named(base, remote, [rel for rel, _ in named], [info for _, info in named],
                  stats, url, data)


def committed_discovery(root: str, data: bytes) -> Discovery | None:
    """The files the commit-point manifest ``data`` of the store directory ``root``
    names, as ``discover(root, listing=False)`` would give them, from bytes the caller
    fetched already (no request); None when ``data`` is not a commit point."""
    from pqindex.dataset.manifest import committed_files

    named = committed_files(data)
    if named is None:
        return None
    base = root.rstrip("/")
    return _named(base, True, [rel for rel, _ in named], [info for _, info in named],
                  IOStats(), f"{base}/{MANIFEST_NAME}", data)


def _named(base: str, remote: bool, rels: Sequence[str], infos: Sequence[ObjectInfo],
           stats: IOStats, url: str, data: bytes | None) -> Discovery | None:
    """The Discovery of the files ``rels`` a commit point at ``url`` names."""
    files = []
    for i, rel in enumerate(rels):
        parts = rel.split("/") if "/" in rel else None
        full = (f"{base}/{rel}" if remote or os.sep == "/"
                else os.path.join(base, *rel.split("/")))
        # A local file is opened as the walk would give it (its size from the file).
        files.append(DataFile(full, () if parts is None else _hive_parts(parts[:-1]),
                              infos[i] if remote else None))
    if not files:
        return None
    keys, types = _partition_keys(files)
    size = len(data) if data is not None else os.path.getsize(url)
    return Discovery(tuple(files), keys, types, stats, (url, ObjectInfo(size)), data, None, url)


def _partition_keys(files: Sequence[DataFile]) -> tuple[tuple[str, ...], dict[str, str]]:
    """The hive keys of ``files`` in order of appearance, and each one's inferred type."""
    keys: list[str] = []
    for f in files:
        for k, _ in f.partition:
            if k not in keys:
                keys.append(k)
    types = {k: _infer_type(v for f in files for kk, v in f.partition if kk == k) for k in keys}
    return tuple(keys), types


def discover(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    storage_options: Mapping[str, Any] | None = None,
    *,
    listing: bool | None = None,
) -> Discovery:
    """The files of a file, a directory tree, a glob pattern (``lake/*/*.parquet``,
    ``s3://b/lake/**/*.parquet``), or a list of these (local paths or URLs).

    ``listing``: whether a directory is listed when a manifest that pqindex's pipeline
    committed names its files. None (default): not listed locally (the manifest is
    read instead of walking the tree); on a store the LIST goes out as before, the
    manifest GET beside its first page. False: never listed then (on a store one GET
    of the manifest, no LIST). True: always listed, every entry validated against
    the listing as for a manifest written over someone else's directory."""
    items = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    if not items:
        raise UserInputError("no paths given")
    if len(items) == 1 and listing is not True:
        p = os.fspath(items[0])
        remote = "://" in p and not p.startswith("file://")
        if not remote:
            p = os.path.expanduser(p[len("file://"):] if p.startswith("file://") else p)
        if split_pattern(p) is None and (
                (remote and listing is False and not p.lower().endswith(_FILE_SUFFIXES)
                 and p.split("://", 1)[0].lower() not in ("http", "https"))
                or (not remote and os.path.isdir(p))):
            got = _committed(p, remote, storage_options, IOStats())
            if got is not None:
                return got
    files: list[DataFile] = []
    stats = IOStats()
    found: dict[str, ObjectInfo] = {}
    fetched: dict[str, bytes] = {}
    logs: list[str] = []
    log_names: list[str] = []
    for item in items:
        p = os.fspath(item)
        remote = "://" in p and not p.startswith("file://")
        if not remote:
            p = os.path.expanduser(p[len("file://"):] if p.startswith("file://") else p)
        glob = split_pattern(p)
        if glob is not None:
            matched = pattern_files(*glob, remote, storage_options, stats)
            if not matched:
                raise UserInputError("no data files match the pattern", path=p)
            files += matched
            continue
        if remote:
            files += _discover_remote(p, storage_options, stats, probe=len(items) == 1,
                                      found=found if len(items) == 1 else None,
                                      fetched=fetched, logs=logs, log_names=log_names)
            continue
        if os.path.isdir(p):
            files += _walk_local(p)
            if os.path.isdir(os.path.join(p, DELTA_LOG)):
                logs.append(os.path.join(p, DELTA_LOG))
            at = os.path.join(p, MANIFEST_NAME)
            if len(items) == 1 and os.path.isfile(at):
                found[at] = ObjectInfo(os.path.getsize(at))
        elif os.path.exists(p):
            files.append(DataFile(p))
        else:
            raise UserInputError("no such file or directory", path=p)
    if not files:
        raise UserInputError("no data files found", path=os.fspath(items[0]))
    keys, types = _partition_keys(files)
    manifest = next(iter(found.items()), None)
    return Discovery(tuple(files), keys, types, stats, manifest,
                     None if manifest is None else fetched.get(manifest[0]),
                     logs[0] if logs else None,
                     delta_log_names=tuple(log_names) if len(items) == 1 and log_names
                     else None)
