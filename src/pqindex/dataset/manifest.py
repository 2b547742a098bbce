"""The dataset manifest: a dataset-level index in ``_pqindex_manifest.json``.

Per data file it records what the listing says (size, ETag, mtime), the row
count, per leaf column the footer statistics folded over the row groups (typed
bounds kept as the footer's bytes, string bounds shortened like the ColumnIndex)
and the small file-scope embedded summaries (distinct sets, zone maps). The
planner prunes files with it before reading any footer, so planning a dataset of
thousands of files costs one GET plus the files that survive.

Trust rules:

* A manifest is parsed strictly: bad JSON, an unknown ``version`` or any entry
  that does not have the documented shape makes the whole manifest ignored (a
  warning), never partly trusted.
* An entry is used only for a file the listing shows with the same relative
  path and size, and the same ETag when both sides have one (else the same
  mtime when both have one; a local file's ctime too, which a rewrite with its
  size and mtime restored still moves). Files without a matching entry are planned from
  their footers, so a stale, partial or concurrently rewritten manifest gives
  the same rows as none.
* Bounds are judged by the same code as footer statistics
  (:func:`~pqindex.format.values.statistics_bounds`): an entry keeps the
  footer's bound bytes, the field they came from and counts, and the manifest
  keeps the file's schema and column orders, so INT96, unknown column orders,
  NaN and legacy min/max are refused exactly as in the footer. Only a "no row
  can match" answer is used.

The format is described in docs/manifest.md.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pqindex.dataset.discovery import MANIFEST_NAME
from pqindex.errors import PqIndexError, UserInputError
from pqindex.expr.bind import BoundExpr, BoundPredicate
from pqindex.format.file import MAGIC, ParquetFile
from pqindex.format.match import Match
from pqindex.format.schema import LeafColumn, PhysicalType
from pqindex.format.structs import FileMetaData, KeyValue, Statistics
from pqindex.format.thrift import encode
from pqindex.format.truncate import DEFAULT_CAP, lower_bound, upper_bound
from pqindex.format.values import Comparison, Kind, bound_order, statistics_bounds
from pqindex.indexes.base import REGISTRY, Blob, Scope
from pqindex.indexes.evidence import ConstantEvidence, StatisticsEvidence
from pqindex.io.source import BytesSource, IOStats, ObjectInfo, local_info
from pqindex.plan.file_level import fold_statistics
from pqindex.plan.planner import file_region
from pqindex.plan.tree import evaluate

if TYPE_CHECKING:
    from pqindex.dataset.discovery import DataFile, Discovery
    from pqindex.io.objstore import TailWave

__all__ = [
    "COMMIT_POINT",
    "MANIFEST_NAME",
    "MANIFEST_VERSION",
    "Manifest",
    "ManifestError",
    "ManifestView",
    "annotate",
    "build_manifest",
    "committed_files",
    "file_entry",
    "load_view",
    "manifest_keys",
    "parse_manifest",
    "write_manifest",
]

log = logging.getLogger("pqindex")

MANIFEST_VERSION = 1
# Embedded file-scope blobs larger than this stay in the file only.
SUMMARY_MAX_BYTES = 4096
# Kinds whose file-scope blobs are copied (Bloom filters stay per file).
SUMMARY_KINDS = ("distinct", "zone_maps")
_ARROW_SCHEMA = "ARROW:schema"


class ManifestError(PqIndexError):
    """A manifest that cannot be trusted (bad JSON, unknown version, bad entry)."""


# ------------------------------------------------------------------ building


def schema_stub(pf: ParquetFile) -> bytes:
    """The footer without row groups: schema, column orders, created_by and the
    Arrow schema entry, so bounds are judged and the Arrow schema built as from
    the file."""
    md = pf.metadata
    kv = [KeyValue(k.key, k.value) for k in md.key_value_metadata or [] if k.key == _ARROW_SCHEMA]
    stub = FileMetaData(
        version=md.version, schema=md.schema, num_rows=0, row_groups=[],
        key_value_metadata=kv or None, created_by=md.created_by, column_orders=md.column_orders,
    )
    return encode(stub)


def stub_file(stub: bytes, path: str) -> ParquetFile:
    """A footer-only ParquetFile (no row groups) standing in for the file at ``path``."""
    data = MAGIC + stub + struct.pack("<I", len(stub)) + MAGIC
    return ParquetFile(BytesSource(data, path))


def _b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode("ascii")


def _column_stats(pf: ParquetFile, leaf: LeafColumn, cap: int) -> Statistics | None:
    """The file's statistics for one leaf, folded over its row groups; None if unknown."""
    folded = fold_statistics(pf, leaf)
    if folded is None:
        return None
    out = folded.statistics
    vt = bound_order(leaf).value_type
    if (folded.source == "min_value/max_value" and folded.comparison == Comparison.BYTES
            and vt.kind in (Kind.STRING, Kind.BINARY) and vt.physical == PhysicalType.BYTE_ARRAY
            and out.min_value is not None and out.max_value is not None):
        # Shortened like the ColumnIndex: min rounded down, max rounded up.
        text = vt.kind == Kind.STRING
        short_lo = lower_bound(out.min_value, cap, text=text)
        short_hi = upper_bound(out.max_value, cap, text=text)
        if short_lo != out.min_value:
            out.min_value, out.is_min_value_exact = short_lo, False
        if short_hi != out.max_value:
            out.max_value, out.is_max_value_exact = short_hi, False
    return out


def _column_entry(pf: ParquetFile, leaf: LeafColumn, cap: int) -> dict[str, Any] | None:
    values = 0
    for rg in range(pf.num_row_groups):
        n = pf.column_meta(rg, leaf.index).num_values
        if n is None:
            return None
        values += n
    st = _column_stats(pf, leaf, cap)
    if st is None:
        return None
    entry: dict[str, Any] = {"values": values, "nulls": st.null_count}
    if st.nan_count is not None:
        entry["nans"] = st.nan_count
    if st.min_value is not None and st.max_value is not None:
        entry.update(field="min_value", min=_b64(st.min_value), max=_b64(st.max_value),
                     min_exact=st.is_min_value_exact, max_exact=st.is_max_value_exact)
    elif st.min is not None and st.max is not None:
        entry.update(field="min", min=_b64(st.min), max=_b64(st.max))
    return entry


def _summaries(pf: ParquetFile, kinds: Sequence[str] = SUMMARY_KINDS,
               max_bytes: int = SUMMARY_MAX_BYTES) -> list[dict[str, Any]]:
    try:
        region = file_region(pf)
        if region is None:
            return []
        out = []
        for e in region.find(scope=Scope.FILE):
            if e.kind not in kinds or e.length > max_bytes:
                continue
            blob = region.blob(e)
            out.append({"kind": e.kind, "column": e.column, "data": _b64(blob.data),
                        "properties": dict(blob.properties)})
        return out
    except PqIndexError as e:  # a damaged region: the manifest simply has no summary
        log.warning("%s: embedded summaries not copied to the manifest: %s", pf.path, e.reason)
        return []


def file_entry(pf: ParquetFile, rel: str, info: ObjectInfo | None, schema: int,
               *, cap: int = DEFAULT_CAP, summary_kinds: Sequence[str] = SUMMARY_KINDS,
               summary_max_bytes: int = SUMMARY_MAX_BYTES) -> dict[str, Any]:
    """The manifest entry of one file (``schema``: its index in the manifest's schemas;
    ``summary_kinds``: the file-scope embedded blobs copied, up to ``summary_max_bytes``
    each)."""
    entry: dict[str, Any] = {
        "path": rel,
        "bytes": pf.file_size if info is None else info.size,
        "rows": pf.num_rows,
        "row_groups": pf.num_row_groups,
        "schema": schema,
    }
    if info is not None and info.etag:
        entry["etag"] = info.etag
    if info is not None and info.mtime is not None:
        entry["mtime"] = info.mtime
    if info is not None and info.ctime is not None:
        entry["ctime"] = info.ctime
    entry["columns"] = [_column_entry(pf, leaf, cap) for leaf in pf.schema.leaves]
    entry["summaries"] = _summaries(pf, summary_kinds, summary_max_bytes)
    return entry


def build_manifest(
    files: Iterable[tuple[str, ParquetFile, ObjectInfo | None]],
    extra: Mapping[str, Any] | None = None,
    *,
    keep: Mapping[str, Mapping[str, Any]] | None = None,
    summary_kinds: Sequence[str] = SUMMARY_KINDS,
    summary_max_bytes: int = SUMMARY_MAX_BYTES,
) -> dict[str, Any]:
    """A manifest for ``(relative path, open file, listing info)`` triples.

    ``extra`` adds top-level keys; ``keep`` maps a relative path to keys an
    older entry had that are kept (Spark's key ranges, index figures);
    ``summary_kinds``/``summary_max_bytes``: which file-scope blobs entries copy.
    """
    schemas: list[str] = []
    index: dict[str, int] = {}
    entries = []
    for rel, pf, info in files:
        stub = _b64(schema_stub(pf))
        assert stub is not None
        if stub not in index:
            index[stub] = len(schemas)
            schemas.append(stub)
        e = file_entry(pf, rel, info, index[stub], summary_kinds=summary_kinds,
                       summary_max_bytes=summary_max_bytes)
        old = (keep or {}).get(rel)
        if old:
            e = {**{k: v for k, v in old.items() if k not in _ENTRY_KEYS}, **e}
        entries.append(e)
    entries.sort(key=lambda e: e["path"])
    return {
        "version": MANIFEST_VERSION,
        "format": "pqindex",
        **dict(extra or {}),
        "schemas": schemas,
        "files": entries,
        "rows": sum(int(e["rows"]) for e in entries),
        "bytes": sum(int(e["bytes"]) for e in entries),
    }


def annotate(root: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """``manifest`` (a local dataset's, with ``files`` entries naming ``path``) with
    each file's statistics, listing info and summaries added to its entry and the
    ``schemas`` list set; other keys are kept. A file that cannot be read keeps
    its entry as it was (no statistics: the planner reads its footer)."""
    out = dict(manifest)
    schemas: list[str] = []
    index: dict[str, int] = {}
    files = []
    for e in manifest.get("files") or []:
        rel = e["path"]
        full = os.path.join(root, *rel.split("/"))
        info = _local_info(full)
        try:
            with ParquetFile.open(full) as pf:
                stub = _b64(schema_stub(pf))
                assert stub is not None
                if stub not in index:
                    index[stub] = len(schemas)
                    schemas.append(stub)
                fresh = file_entry(pf, rel, info, index[stub])
        except PqIndexError as err:
            log.warning("%s", f"{full}: no manifest statistics: {err.reason}")
            files.append(dict(e))
            continue
        if info is None or _local_info(full) != info:
            files.append(dict(e))  # changed while read
            continue
        files.append({**e, **fresh})
    out["schemas"] = schemas
    out["files"] = files
    return out


_ENTRY_KEYS = frozenset({"path", "bytes", "rows", "row_groups", "schema", "etag", "mtime", "ctime",
                         "columns", "summaries"})


def _rel(root: str, path: str) -> str:
    rel = path[len(root):] if path.startswith(root) else path
    return rel.replace(os.sep, "/").strip("/")


def _local_info(path: str) -> ObjectInfo | None:
    return local_info(path)


def write_manifest(
    path: str | os.PathLike[str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    extra: Mapping[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
    discovery: Discovery | None = None,
    on_batch: Callable[[Sequence[DataFile], TailWave | None], None] | None = None,
    finish: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    previous: tuple[bytes | None] | None = None,
) -> dict[str, Any]:
    """Write (or refresh) the manifest of the dataset directory or prefix ``path``.

    Every data file's footer is read (remote tails in concurrent waves, through
    the metadata cache), the manifest built and written atomically (temporary
    name + rename locally, one PUT on object stores). Keys of the previous
    manifest that pqindex does not compute (Spark's key ranges) are kept for
    files that did not change. ``progress(done, total)`` is called as footers are
    read (after each file). ``discovery``: the listing, when the caller has it;
    ``on_batch(files, tails)``: called as each batch's tails go out (``tails``, their
    wave, None when none is read: ``tails.wait(url)`` until one is in the metadata
    cache, where the key index reads its keys); ``finish(manifest)``: the manifest to
    write instead; ``previous``: the manifest now there (its bytes, or None for none), when
    the caller fetched it already. Returns the manifest.
    """
    from pqindex.dataset.discovery import discover, split_pattern
    from pqindex.io.objects import get_object, put_object

    root = os.fspath(path)
    if root.startswith("file://"):
        root = root[len("file://"):]
    if split_pattern(root) is not None:
        raise UserInputError("a manifest describes a directory: give the directory, "
                             "not a pattern", path=root)
    disc = discovery if discovery is not None else discover(root, storage_options)
    if len(disc.files) == 1 and disc.files[0].path.rstrip("/") == root.rstrip("/"):
        raise UserInputError("a manifest describes a directory of files, not one file",
                             path=root)
    base = root.rstrip("/").rstrip(os.sep)
    url = _join(base, MANIFEST_NAME)
    old: dict[str, Any] = {}
    raw = get_object(url, storage_options) if previous is None else previous[0]
    if raw is not None:
        try:
            prev = json.loads(raw)
            if isinstance(prev, dict) and isinstance(prev.get("files"), list):
                old = prev
        except ValueError:
            pass
    keep: dict[str, Mapping[str, Any]] = {}
    for e in old.get("files") or []:
        if isinstance(e, dict) and isinstance(e.get("path"), str):
            keep[e["path"]] = e
    opened = _open_files(disc.files, base, storage_options, keep, progress, on_batch)
    # Written from a listing: not a commit point, whoever wrote the previous one.
    top = {k: v for k, v in old.items() if k not in ("version", "format", "schemas", "files",
                                                       "rows", "bytes", COMMIT_POINT)}
    manifest = build_manifest(opened, {**top, **dict(extra or {})}, keep=keep)
    if finish is not None:
        manifest = finish(manifest)
    put_object(url, json.dumps(manifest, separators=(",", ":"), default=str).encode("utf-8"),
               storage_options)
    if "://" not in base:
        from pqindex.dataset.manifest_columnar import write_columnar

        write_columnar(base, manifest)
    return manifest


# Footers read per wave while writing a manifest: tails of a batch are held at once.
_WRITE_BATCH = 256


def _open_files(
    files: Sequence[DataFile], base: str, storage_options: Mapping[str, Any] | None,
    keep: dict[str, Mapping[str, Any]],
    progress: Callable[[int, int], None] | None = None,
    on_batch: Callable[[Sequence[DataFile], TailWave | None], None] | None = None,
) -> Iterator[tuple[str, ParquetFile, ObjectInfo]]:
    """Each readable data file, opened (remote tails a batch at a time, in one wave)
    and closed once its entry is built; ``keep`` loses the entries of changed files."""
    from pqindex.io.objstore import start_tails

    for i in range(0, len(files), _WRITE_BATCH):
        batch = files[i : i + _WRITE_BATCH]
        tails = start_tails([(df.path, df.info, None) for df in batch], storage_options)
        if on_batch is not None:
            on_batch(batch, tails)  # may take each file as its tail lands
        if tails is not None:
            tails.join()
        for j, df in enumerate(batch):
            if progress is not None:
                progress(i + j, len(files))
            info = df.info if df.info is not None else _local_info(df.path)
            try:
                pf = ParquetFile.open(df.path, storage_options=storage_options, info=df.info)
            except PqIndexError as e:  # no entry: a scan reads the footer and says why
                log.warning("%s", f"{df.path}: not in the manifest: {e.reason}")
                continue
            try:
                if df.info is None and (_local_info(df.path) != info
                                        or info is None or pf.file_size != info.size):
                    continue  # changed while read: no entry, the planner reads its footer
                assert info is not None
                rel = _rel(base, df.path)
                k = keep.get(rel)
                if k is not None and k.get("bytes") != info.size:
                    keep.pop(rel)  # a rewritten file: its old figures no longer hold
                yield rel, pf, info
            finally:
                pf.close()
    if progress is not None:
        progress(len(files), len(files))


def _join(root: str, name: str) -> str:
    if "://" in root and not root.startswith("file://"):
        return f"{root.rstrip('/')}/{name}"
    return os.path.join(root, name)


# ------------------------------------------------------------------ parsing


def _fail(what: str) -> ManifestError:
    return ManifestError(f"manifest not used: {what}")


def _opt_int(e: Mapping[str, Any], key: str, what: str) -> int | None:
    v = e.get(key)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise _fail(f"{what}: {key} is not a non-negative integer")
    return v


def _opt_bool(e: Mapping[str, Any], key: str, what: str) -> bool | None:
    v = e.get(key)
    if v is not None and not isinstance(v, bool):
        raise _fail(f"{what}: {key} is not a boolean")
    return v


def _opt_bytes(e: Mapping[str, Any], key: str, what: str) -> bytes | None:
    v = e.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise _fail(f"{what}: {key} is not base64 text")
    try:
        return binascii.a2b_base64(v, strict_mode=True)
    except (ValueError, binascii.Error):
        raise _fail(f"{what}: {key} is not base64") from None


@dataclass(frozen=True)
class FileEntry:
    """One validated manifest entry."""

    path: str
    size: int
    rows: int | None
    etag: str | None
    mtime: int | None
    schema: int | None
    columns: tuple[tuple[Statistics, int] | None, ...] = ()
    summaries: tuple[Blob, ...] = ()
    ctime: int | None = None


def _parse_column(c: Any, what: str) -> tuple[Statistics, int] | None:
    if c is None:
        return None
    if not isinstance(c, dict):
        raise _fail(f"{what} is not an object")
    values = _opt_int(c, "values", what)
    if values is None:
        raise _fail(f"{what}: no values count")
    st = Statistics(null_count=_opt_int(c, "nulls", what), nan_count=_opt_int(c, "nans", what))
    lo, hi = _opt_bytes(c, "min", what), _opt_bytes(c, "max", what)
    kind = c.get("field")
    if (lo is None) != (hi is None) or (lo is not None and kind not in ("min_value", "min")):
        raise _fail(f"{what}: bounds without a known field")
    if kind == "min_value":
        st.min_value, st.max_value = lo, hi
        st.is_min_value_exact = _opt_bool(c, "min_exact", what)
        st.is_max_value_exact = _opt_bool(c, "max_exact", what)
    elif kind == "min":
        st.min, st.max = lo, hi
    return st, values


def _parse_entry(e: Any, n_schemas: int, leaves: Callable[[int], int]) -> FileEntry:
    if not isinstance(e, dict) or not isinstance(e.get("path"), str) or not e["path"]:
        raise _fail("a file entry has no path")
    what = f"entry {e['path']!r}"
    size = _opt_int(e, "bytes", what)
    if size is None:
        raise _fail(f"{what}: no size")
    etag = e.get("etag")
    if etag is not None and not isinstance(etag, str):
        raise _fail(f"{what}: etag is not text")
    schema = _opt_int(e, "schema", what)
    columns: tuple[tuple[Statistics, int] | None, ...] = ()
    summaries: list[Blob] = []
    if schema is not None:
        if schema >= n_schemas:
            raise _fail(f"{what}: schema {schema} does not exist")
        cols = e.get("columns")
        if not isinstance(cols, list) or len(cols) != leaves(schema):
            raise _fail(f"{what}: columns do not match its schema")
        columns = tuple(_parse_column(c, f"{what} column {i}") for i, c in enumerate(cols))
        sums = e.get("summaries", [])
        if not isinstance(sums, list):
            raise _fail(f"{what}: summaries is not a list")
        for s in sums:
            if not isinstance(s, dict) or not isinstance(s.get("kind"), str) or not isinstance(
                    s.get("column"), str) or not isinstance(s.get("properties", {}), dict):
                raise _fail(f"{what}: bad summary")
            data = _opt_bytes(s, "data", what)
            if data is None:
                raise _fail(f"{what}: summary without data")
            summaries.append(Blob(s["kind"], s["column"], Scope.FILE, None, None, data,
                                  s.get("properties", {})))
    return FileEntry(e["path"], size, _opt_int(e, "rows", what), etag,
                     _opt_int(e, "mtime", what), schema, columns, tuple(summaries),
                     _opt_int(e, "ctime", what))


@dataclass
class Manifest:
    """A parsed, validated manifest."""

    url: str
    schemas: list[ParquetFile]  # footer-only stand-ins, one per distinct schema
    entries: Mapping[str, FileEntry]  # by relative path
    # The key index descriptor, as written (dataset/key_index.py parses it when used).
    key_index: Any = None


# The JSON parsed by manifest_keys, kept for parse_manifest of the same bytes: a
# long listing reads the manifest's keys first, and a 3,000-file manifest (~13 MB)
# costs ~100 ms to parse. Held by identity (the same object, not equal bytes).
_parsed: tuple[bytes, Any] | None = None


def _loads(data: bytes) -> Any:
    global _parsed
    held = _parsed
    if held is not None and held[0] is data:
        _parsed = None  # parsed once more at most: parse_manifest is the last reader
        return held[1]
    return json.loads(data)


def manifest_keys(data: bytes) -> list[str] | None:
    """The relative paths a manifest lists, or None if it is not one: where the
    listing splits its pages (any answer gives the exact listing; a wrong one only
    costs pages), so nothing here is trusted beyond that."""
    global _parsed
    try:
        m = json.loads(data)
    except ValueError:
        return None
    _parsed = (data, m)
    files = m.get("files") if isinstance(m, dict) else None
    if not isinstance(files, list):
        return None
    return [e["path"] for e in files if isinstance(e, dict) and isinstance(e.get("path"), str)]


# The top-level key pqindex's pipeline sets in the manifests its job commits write:
# they name every file of the dataset (a commit point), so no LIST is needed.
COMMIT_POINT = "commit_point"


def committed_files(data: bytes) -> list[tuple[str, ObjectInfo]] | None:
    """The (relative path, size/ETag/mtime) of every file a commit-point manifest
    names, or None when ``data`` is not one (not a manifest, written over a listing
    by ``write_manifest``, or any entry without a path and a size)."""
    try:
        m = json.loads(data)
    except ValueError:
        return None
    if (not isinstance(m, dict) or m.get(COMMIT_POINT) is not True
            or m.get("version") != MANIFEST_VERSION or not isinstance(m.get("files"), list)):
        return None
    out = []
    for e in m["files"]:
        if not isinstance(e, dict):
            return None
        rel, size = e.get("path"), e.get("bytes")
        etag, mtime = e.get("etag"), e.get("mtime")
        if (not isinstance(rel, str) or not rel or rel.startswith("/") or ".." in rel.split("/")
                or not isinstance(size, int) or isinstance(size, bool) or size < 0):
            return None
        out.append((rel, ObjectInfo(size, etag if isinstance(etag, str) else None,
                                    mtime=mtime if isinstance(mtime, int) else None)))
    return out


def parse_manifest(data: bytes, url: str) -> Manifest:
    """Parse and validate a manifest; ManifestError if anything is off."""
    try:
        m = _loads(data)
    except ValueError as e:
        raise _fail(f"not JSON ({e})").with_path(url) from None
    try:
        if not isinstance(m, dict):
            raise _fail("not a JSON object")
        if m.get("version") != MANIFEST_VERSION:
            raise _fail(f"unknown version {m.get('version')!r} (this pqindex reads "
                        f"{MANIFEST_VERSION})")
        raw_schemas = m.get("schemas", [])
        files = m.get("files")
        if not isinstance(raw_schemas, list) or not isinstance(files, list):
            raise _fail("schemas or files is not a list")
        schemas = []
        for i, s in enumerate(raw_schemas):
            stub = _opt_bytes({"s": s}, "s", f"schema {i}")
            if stub is None:
                raise _fail(f"schema {i} is empty")
            try:
                schemas.append(stub_file(stub, f"{url}#schema{i}"))
            except PqIndexError as e:
                raise _fail(f"schema {i}: {e.reason}") from None
        entries: dict[str, FileEntry] = {}
        for raw in files:
            fe = _parse_entry(raw, len(schemas), lambda i: len(schemas[i].schema.leaves))
            if fe.path in entries:
                raise _fail(f"entry {fe.path!r} appears twice")
            entries[fe.path] = fe
    except ManifestError as e:
        raise e.with_path(url) from None
    return Manifest(url, schemas, entries, m.get("key_index"))


# ------------------------------------------------------------------ planning


def _matches(e: FileEntry, info: ObjectInfo | None) -> bool:
    """The entry describes the object the listing shows (never a guess)."""
    if info is None or e.size != info.size:
        return False
    if e.etag and info.etag:  # Azure lists ETags bare, other paths quote them
        return e.etag.strip('"') == info.etag.strip('"')
    if info.ctime is not None and e.ctime != info.ctime:
        # A local file: a rewrite with its size and mtime restored still moves the ctime
        # (an entry without one cannot rule that out).
        return False
    if e.mtime is not None and info.mtime is not None:
        return e.mtime == info.mtime
    return True


class _Summaries:
    """Statistics and embedded summaries of one file: the most decisive answer wins."""

    def __init__(self, entry: FileEntry, stand_in: ParquetFile) -> None:
        self.entry = entry
        self.pf = stand_in
        self._ev: dict[int, list[Any]] = {}

    def evidence(self, leaf: LeafColumn) -> list[Any]:
        if leaf.index in self._ev:
            return self._ev[leaf.index]
        out: list[Any] = []
        col = self.entry.columns[leaf.index]
        if col is not None:
            st, values = col
            out.append(StatisticsEvidence(statistics_bounds(st, leaf, values), values))
        for blob in self.entry.summaries:
            if blob.column != leaf.name:
                continue
            factory = REGISTRY.get(blob.kind)
            if factory is None:
                continue
            try:
                ev = factory().evidence(leaf, blob)
            except PqIndexError:
                continue  # an unreadable summary answers nothing
            if ev is not None:
                out.append(ev)
        self._ev[leaf.index] = out
        return out


@dataclass
class ManifestView:
    """A manifest matched against the dataset's listing: the entries it may use."""

    manifest: Manifest
    root: str
    # data file path -> (entry, stand-in)
    matched: Mapping[str, tuple[FileEntry, ParquetFile]]
    unmatched: int  # listed data files planned from their footers
    stats: IOStats = field(default_factory=IOStats)
    _files: dict[str, _Summaries] = field(default_factory=dict)
    # The columnar manifest the view was read from (manifest_columnar.py), if any.
    columnar: Any = None

    def stand_in(self, df: DataFile) -> ParquetFile | None:
        """The footer-only file carrying ``df``'s schema, when the manifest knows it."""
        if self.columnar is not None:  # its schema column: no entry parsed
            row = getattr(self.matched, "rows", {}).get(df.path)
            return None if row is None else self.manifest.schemas[self.columnar.schema_of(row)]
        hit = self.matched.get(df.path)
        return None if hit is None else hit[1]

    def prune(
        self, df: DataFile, bound: Callable[[ParquetFile], BoundExpr | None],
        partition: Mapping[str, Any],
    ) -> str | None:
        """Why no row of ``df`` can match (the file is then never opened), or None.

        ``bound(stand_in)`` binds the predicate against the file's schema (None when
        it cannot be bound: the footer path then reports the problem).
        """
        hit = self.matched.get(df.path)
        if hit is None:
            return None
        entry, stand_in = hit
        expr = bound(stand_in)
        if expr is None:
            return None
        if entry.rows == 0:
            return "manifest: the file has no rows"
        s = self._files.get(df.path)
        if s is None:
            s = self._files[df.path] = _Summaries(entry, stand_in)
        n = len(stand_in.schema.leaves)

        def leaf_match(pred: BoundPredicate) -> Match:
            if pred.leaf.index >= n:
                return Match(ConstantEvidence(partition.get(pred.leaf.name)).match(pred))
            answers = [Match(ev.match(pred)) for ev in s.evidence(pred.leaf)]
            return Match.NONE if Match.NONE in answers else Match.SOME

        if evaluate(expr, leaf_match) == Match.NONE:
            return "manifest: no row of the file can match"
        return None


def _warn(warnings: list[str] | None, message: str) -> None:
    log.warning("%s", message)
    if warnings is not None:
        warnings.append(message)


def _listing_infos(files: Sequence[DataFile]) -> dict[str, ObjectInfo | None]:
    return {df.path: df.info if df.info is not None else _local_info(df.path) for df in files}


def load_view(
    source: Any, disc: Discovery, storage_options: Mapping[str, Any] | None = None,
    warnings: list[str] | None = None, stats: IOStats | None = None,
) -> ManifestView | None:
    """The manifest of a one-directory dataset matched against its listing, or None.

    None when there is no manifest, and when it cannot be read or trusted (then
    with a warning, logged on logger ``pqindex`` and returned in ``warnings``).
    The GET is counted in ``stats``; none is made when the listing brought the
    manifest's bytes along (``Discovery.manifest_data``).
    """
    from pqindex.io.objects import get_object

    found = getattr(disc, "manifest", None)
    if found is None or not isinstance(source, (str, os.PathLike)):
        return None
    url, _info = found
    root = url[: -len(MANIFEST_NAME)].rstrip("/").rstrip(os.sep)
    stats = stats if stats is not None else IOStats()
    if "://" not in url:
        from pqindex.dataset.manifest_columnar import columnar_view, read_columnar

        columnar = read_columnar(root)
        if columnar is not None:
            return columnar_view(columnar, root, disc)
    data: bytes | None = getattr(disc, "manifest_data", None)
    try:
        if data is None:
            data = get_object(url, storage_options, stats)
    except PqIndexError as e:
        _warn(warnings, f"{url}: manifest not read: {e.reason}")
        return None
    if data is None:
        return None  # removed since the listing
    try:
        manifest = parse_manifest(data, url)
    except ManifestError as e:
        _warn(warnings, str(e))
        return None
    matched: dict[str, tuple[FileEntry, ParquetFile]] = {}
    # Files the manifest itself named (a commit point) are its entries: nothing to match.
    named = getattr(disc, "named_by", None) == url
    infos = {} if named else _listing_infos(disc.files)
    unmatched = 0
    for df in disc.files:
        entry = manifest.entries.get(_rel(root, df.path))
        if entry is not None and entry.schema is not None and (
                named or _matches(entry, infos[df.path])):
            matched[df.path] = (entry, manifest.schemas[entry.schema])
        else:
            unmatched += 1
    return ManifestView(manifest, root, matched, unmatched, stats=stats)
