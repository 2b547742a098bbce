"""A lake-wide key index: which files and row groups hold a key of an unsorted column.

For each indexed column, the distinct ``(key, file, row_group)`` entries of the data
files, sorted by key, go into Parquet shards with a page index (pyarrow's writer:
pages of at most :data:`PAGE_BYTES`; integer keys, their file ids and row groups
as deltas, other keys zstd with page checksums and file ids and row groups as
dictionary indices), range-sharded by key
(shards of at most :data:`SHARD_BYTES`). The shards live under the dataset's
``_pqindex/key_index/<column>/`` and end in :data:`SHARD_SUFFIX`: readers skip
``_``-prefixed directories, and no ``*.parquet`` glob matches them.

The manifest's top-level ``key_index`` entry (:data:`MANIFEST_KEY`) describes it::

    {"version": 1,
     "files": [{"id": 0, "path": "part-0.parquet", "bytes": 1234, "etag": "...",
                "mtime": ...}, ...],
     "columns": {"user_id": {"schema": "<base64 footer stub of a shard>",
                             "shards": [{"path": "_pqindex/key_index/user_id/...pqkey",
                                         "bytes": 999, "etag": "...", "entries": 10,
                                         "min": <key>, "max": <key>, "delta": false,
                                         "crc32": 123}]}}}

``files`` are the data files the index covers, as the manifest lists them (name,
size, ETag/mtime); a shard's ``file`` column holds their ``id``. A file the listing
shows with another size or ETag (rewritten), or that the index does not name (added
since), is not covered: planning opens it as before, so answers stay exact; entries
naming a file the listing lacks (removed) name nothing. Appending builds a delta
shard over the uncovered files only. ``min``/``max`` are the sort keys of the shard's
first and last key under the shard's key column order (``int`` as is, bytes as
``{"b": hex}``, decimals as ``{"d": text}``), so a lookup picks the shards of its
keys from the manifest alone, then reads those shards whole (one wave; each checked
against its ``crc32``, decoded once per process, every probe of a shard at once), or
for a shard above :data:`WHOLE_SHARD_BYTES` its tail and the pages holding the keys.
Shards a rebuild or a compaction no longer names are deleted once the manifest that
drops them is committed (:func:`drop_superseded`).
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import io
import itertools
import json
import os
import threading
import uuid
import zlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pqindex.dataset.discovery import MANIFEST_NAME, DataFile, Discovery
from pqindex.errors import PqIndexError, UserInputError
from pqindex.expr.bind import BoundPredicate, bind
from pqindex.expr.nodes import And, Column, Compare, Expr, In, Literal
from pqindex.format.match import LeafOp
from pqindex.format.values import bound_order
from pqindex.indexes.evidence import value_key
from pqindex.io.source import IOStats, ObjectInfo

if TYPE_CHECKING:
    from pqindex.dataset.manifest import ManifestView
    from pqindex.format.file import ParquetFile
    from pqindex.io.objstore import TailWave

__all__ = [
    "KEY_INDEX_SKIP",
    "MANIFEST_KEY",
    "PAGE_BYTES",
    "SHARD_BYTES",
    "SHARD_SUFFIX",
    "KeyLookup",
    "add_key_index",
    "build_key_index",
    "build_table_key_index",
    "clear_decoded",
    "commit_key_index",
    "compact_key_index",
    "describe_lookup",
    "drop_superseded",
    "extend_key_index",
    "file_keys",
    "key_conjunct",
    "lookup_keys",
    "lookup_table_keys",
]

MANIFEST_KEY = "key_index"
INDEX_VERSION = 1
INDEX_DIR = "_pqindex/key_index"
SHARD_SUFFIX = ".pqkey"  # not .parquet: no data glob matches a shard
# Small shards: a lookup reads a whole shard (tail and pages) in one request, and a
# build writes many at once. The issue allows up to 64 MiB.
SHARD_BYTES = 1 << 20  # raw entries; a shard of 8-byte keys is ~0.6 MB compressed
PAGE_BYTES = 64 << 10
# A shard up to this size is read whole by a lookup (its tail read takes it all).
WHOLE_SHARD_BYTES = 4 << 20
_KEY, _FILE, _ROW_GROUP = "key", "file", "row_group"
# Why a file the index covers was not opened (a FilePlan's reason).
KEY_INDEX_SKIP = "key index: no row group of the file holds the key"


# ------------------------------------------------------------------ keys as JSON

def _key_json(key: Any) -> Any:
    if isinstance(key, bytes):
        return {"b": key.hex()}
    if isinstance(key, Decimal):
        return {"d": str(key)}
    if isinstance(key, int) and not isinstance(key, bool):
        return key
    raise TypeError(f"key of type {type(key).__name__} has no JSON form")


def _key_from_json(raw: Any) -> Any:
    if isinstance(raw, bool):
        raise ValueError("a boolean is not a key")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, dict) and isinstance(raw.get("b"), str):
        return bytes.fromhex(raw["b"])
    if isinstance(raw, dict) and isinstance(raw.get("d"), str):
        return Decimal(raw["d"])
    raise ValueError(f"not a key: {raw!r}")


def _supported(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_binary(t) or pa.types.is_large_binary(t)
            or pa.types.is_fixed_size_binary(t) or pa.types.is_decimal(t)
            or pa.types.is_date(t) or pa.types.is_timestamp(t)
            or t in (pa.string_view(), pa.binary_view()))


def _plain(t: pa.DataType) -> pa.DataType:
    """Views as their plain types (pyarrow sorts and writes those)."""
    if t == pa.string_view():
        return pa.string()
    if t == pa.binary_view():
        return pa.binary()
    return t


# ------------------------------------------------------------------ the descriptor

@dataclass(frozen=True)
class Covered:
    """A data file the index covers, as the manifest lists it."""

    id: int
    path: str  # relative to the dataset's root
    size: int
    etag: str | None
    mtime: int | None
    ctime: int | None = None  # local files: a rewrite with size and mtime restored moves it


@dataclass(frozen=True)
class Shard:
    path: str  # relative to the dataset's root
    size: int
    etag: str | None
    mtime: int | None  # local shards: a rewrite of the same size changes it
    entries: int
    min: Any  # sort keys of the first and last key
    max: Any
    delta: bool
    # zlib CRC-32 of the whole object: a lookup reading it whole checks this (~0.5 ms
    # a shard) instead of pyarrow's page checksums (~17 ms). None: pages checked.
    crc32: int | None = None


@dataclass(frozen=True)
class ColumnIndex:
    column: str
    schema: bytes  # footer stub of a shard: binds probes to the key column's order
    shards: tuple[Shard, ...]


@dataclass(frozen=True)
class KeyIndex:
    files: tuple[Covered, ...]
    columns: dict[str, ColumnIndex]


def _str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def parse_key_index(raw: Any) -> KeyIndex:
    """The descriptor; ValueError when anything is off."""
    if not isinstance(raw, dict) or raw.get("version") != INDEX_VERSION:
        raise ValueError(f"unknown key index version {raw.get('version') if isinstance(raw, dict) else raw!r}")
    files = []
    for f in raw.get("files") or []:
        fid, path, size = _int_or_none(f.get("id")), f.get("path"), _int_or_none(f.get("bytes"))
        if fid is None or not isinstance(path, str) or size is None:
            raise ValueError(f"bad file entry {f!r}")
        files.append(Covered(fid, path, size, _str_or_none(f.get("etag")),
                             _int_or_none(f.get("mtime")), _int_or_none(f.get("ctime"))))
    columns = {}
    for name, c in (raw.get("columns") or {}).items():
        shards = []
        for s in c.get("shards") or []:
            path, size, n = s.get("path"), _int_or_none(s.get("bytes")), _int_or_none(s.get("entries"))
            if not isinstance(path, str) or size is None or n is None or ".." in path.split("/"):
                raise ValueError(f"bad shard entry {s!r}")
            shards.append(Shard(path, size, _str_or_none(s.get("etag")),
                                _int_or_none(s.get("mtime")), n,
                                _key_from_json(s.get("min")), _key_from_json(s.get("max")),
                                bool(s.get("delta")), _int_or_none(s.get("crc32"))))
        columns[str(name)] = ColumnIndex(str(name), base64.b64decode(c["schema"]), tuple(shards))
    return KeyIndex(tuple(files), columns)


def _descriptor(index: KeyIndex) -> dict[str, Any]:
    return {
        "version": INDEX_VERSION,
        "files": [{"id": f.id, "path": f.path, "bytes": f.size, "etag": f.etag,
                   "mtime": f.mtime, "ctime": f.ctime} for f in index.files],
        "columns": {c.column: {
            "schema": base64.b64encode(c.schema).decode("ascii"),
            "shards": [{"path": s.path, "bytes": s.size, "etag": s.etag, "mtime": s.mtime,
                        "entries": s.entries,
                        "min": _key_json(s.min), "max": _key_json(s.max), "delta": s.delta,
                        **({} if s.crc32 is None else {"crc32": s.crc32})}
                       for s in c.shards]} for c in index.columns.values()},
    }


def _same_object(c: Covered, info: ObjectInfo | None) -> bool:
    """The listed object is the version the index read (as manifest entries match)."""
    if info is None or info.size != c.size:
        return False
    if c.etag and info.etag:
        return c.etag.strip('"') == info.etag.strip('"')
    if info.ctime is not None and c.ctime != info.ctime:
        return False
    if c.mtime is not None and info.mtime is not None:
        return c.mtime == info.mtime
    return True


# ------------------------------------------------------------------ building

def _join(base: str, rel: str) -> str:
    if "://" in base:
        return base.rstrip("/") + "/" + rel
    return os.path.join(base, *rel.split("/"))


def _rel(base: str, path: str) -> str:
    rel = path[len(base):] if path.startswith(base) else path
    return rel.replace(os.sep, "/").strip("/")


def _info(df: DataFile) -> ObjectInfo | None:
    from pqindex.io.source import local_info

    return df.info if df.info is not None else local_info(df.path)


class _HeldBytes(io.RawIOBase):
    """A remote Parquet file as pyarrow reads it: bytes from what pqindex's
    ``ParquetFile`` holds (its cached tail, the key chunks prefetched), a request
    for anything else."""

    def __init__(self, pf: ParquetFile) -> None:
        self._pf = pf
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        size = self._pf.file_size
        self._pos = offset if whence == io.SEEK_SET else (
            self._pos + offset if whence == io.SEEK_CUR else size + offset)
        return self._pos

    def read(self, n: int = -1) -> bytes:
        size = self._pf.file_size
        n = size - self._pos if n is None or n < 0 else min(n, size - self._pos)
        if n <= 0:
            return b""
        data = self._pf.read_bytes(self._pos, n)
        self._pos += len(data)
        return data

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)


def _cached_whole(df: DataFile, storage_options: Mapping[str, Any] | None
                  ) -> bytes | memoryview | None:
    """The whole object when the metadata cache holds it from offset 0 (a tail read
    that took it all), else None."""
    from pqindex.io.cache import metadata_cache
    from pqindex.io.source import open_source

    if df.info is None:
        return None
    src = open_source(df.path, None, storage_options, df.info)
    try:
        bufs = metadata_cache().get(src.cache_key())
    finally:
        src.close()
    for start, data in bufs or ():
        if start == 0 and len(data) == df.info.size:
            return data
    return None


def _read_keys(df: DataFile, columns: Sequence[str],
               storage_options: Mapping[str, Any] | None) -> tuple[pq.ParquetFile, Any]:
    """pyarrow's reader of ``df`` and what to close after. On a store, only the tail
    (cached when the build's wave fetched it) and the key columns' chunks are read,
    the chunks of a file in one wave."""
    from pqindex.format.file import ParquetFile
    from pqindex.format.layout import chunk_range

    if "://" in df.path and not df.path.startswith("file://"):
        whole = _cached_whole(df, storage_options)
        if whole is not None:
            # The wave's tail read took the whole file: pyarrow reads it from memory,
            # with no second parse of its footer by pqindex's reader (the manifest
            # written beside the index parses it).
            return pq.ParquetFile(pa.BufferReader(whole)), None
        pf = ParquetFile.open(df.path, storage_options=storage_options, info=df.info)
        if pf.file_size <= getattr(pf.source, "default_tail_bytes", 0):
            # The tail read took the whole file: pyarrow reads it from memory (through
            # _HeldBytes each of its reads is a Python call and a copy).
            return pq.ParquetFile(pa.BufferReader(pf.read_bytes(0, pf.file_size))), pf
        wanted = {c for c in columns}
        leaves = [leaf.index for leaf in pf.schema.leaves if leaf.path[:1] and
                  leaf.path[0] in wanted]
        pf.prefetch([chunk_range(pf.column_meta(rg, c)) for rg in range(pf.num_row_groups)
                     for c in leaves])
        return pq.ParquetFile(pa.PythonFile(_HeldBytes(pf), mode="r")), pf
    return pq.ParquetFile(df.path), None


# A file's key type and the non-null keys of each of its row groups.
_FileChunks = tuple[pa.DataType, list[pa.Array]]


def _file_chunks(pf: pq.ParquetFile, column: str, path: str) -> _FileChunks | None:
    """The key type and the non-null keys of each row group of one file's ``column``,
    in row order (duplicates kept: the build drops them after its one sort, where
    they sit side by side; a hash per row group cost more than the sort). The row
    group and file ids are made a run at a time (one ``np.repeat``, not an array a
    file)."""
    schema = pf.schema_arrow
    if column not in schema.names:
        return None  # the file lacks the column: no key of it is there
    t = _plain(schema.field(column).type)
    if not _supported(t):
        raise UserInputError(f"a key index takes integers, strings, binary, decimals, "
                             f"dates and timestamps, not {t}", path=path, column=column)
    chunks: list[pa.Array] = []
    for rg in range(pf.num_row_groups):
        # One thread: files are read 16 at once; a small chunk on pyarrow's pool
        # costs more in hand-offs than in decoding.
        arr = pf.read_row_group(rg, columns=[column], use_threads=False).column(0)
        if arr.null_count:
            arr = pc.drop_null(arr)
        one = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
        chunks.append(one if one.type == t else one.cast(t))
    return t, chunks


def _chunk_entries(parts: Sequence[tuple[int, list[pa.Array]]]
                   ) -> tuple[pa.Array, np.ndarray, np.ndarray] | None:
    """The keys, row groups and file ids of files' row group chunks (``(file id,
    chunks)``), row group and file ids repeated once for all, in the narrowest
    integer type that holds them; None when no chunk holds a key."""
    arrays = [a for _, chunks in parts for a in chunks if len(a)]
    if not arrays:
        return None
    counts = np.array([len(a) for _, chunks in parts for a in chunks], np.int64)
    rgs = np.repeat(np.concatenate([np.arange(len(chunks), dtype=_narrow(len(chunks)))
                                    for _, chunks in parts]), counts)
    ids = [fid for fid, chunks in parts for _ in chunks]
    fids = np.repeat(np.array(ids, _narrow(max(ids))), counts)
    return (arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)), rgs, fids


def _narrow(most: int) -> np.dtype[Any]:
    """The integer type of ids up to ``most``: a run holds its row groups and file ids
    in 1 or 2 bytes where they fit, not 4 (the runs are the build's largest memory,
    and on the machines measured every MB first touched cost ~1 ms of page faults);
    a shard holds them as int32."""
    return np.dtype(np.uint8 if most < 1 << 8 else np.uint16 if most < 1 << 16
                    else np.int32)


def _file_entries(got: _FileChunks | None) -> tuple[pa.DataType, pa.Table] | None:
    """A file's key type and non-null ``(key, row_group)`` entries, in row order."""
    if got is None:
        return None
    t, chunks = got
    entries = _chunk_entries([(0, chunks)])
    if entries is None:
        return t, pa.table({_KEY: pa.array([], t), _ROW_GROUP: pa.array([], pa.int32())})
    return t, pa.table({_KEY: entries[0], _ROW_GROUP: _int32s(entries[1])})


_Loaded = tuple[ObjectInfo, dict[str, "_FileChunks | None"]]


def _load(df: DataFile, columns: Sequence[str],
          storage_options: Mapping[str, Any] | None) -> _Loaded | None:
    info = _info(df)
    if info is None:
        return None  # gone since the listing
    held = None
    try:
        pf, held = _read_keys(df, columns, storage_options)
        return info, {c: _file_chunks(pf, c, df.path) for c in columns}
    except (OSError, pa.ArrowException) as e:
        raise UserInputError(f"the file cannot be read for the key index: {e}",
                             path=df.path) from None
    finally:
        if held is not None:
            held.close()


# Files read at once while building; on a store, their tails go out a batch at a time
# in one wave (into the metadata cache, where the manifest written next finds them).
_BUILD_THREADS = 16
_TAIL_BATCH = 256
# Files a build task reads and sorts as one run: runs sorted beside the reads leave
# only their merge (by key range, beside the uploads) after the last file.
_RUN_FILES = 64
# Shards written at once (most of a shard's time on a store is its PUT's round trip),
# of which merging or encoding at once (pyarrow and numpy work without the GIL).
_WRITE_THREADS = 16
_ENCODE_THREADS = 2


def _int32s(values: np.ndarray) -> pa.Array:
    """int32 numpy values as an Arrow array, from the buffer (no pandas import)."""
    v = np.ascontiguousarray(values, np.int32)
    return pa.Array.from_buffers(pa.int32(), len(v), [None, pa.py_buffer(v)])


def _numpy_of(a: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A null-free fixed-width integer, date or timestamp array as numpy values, from
    its buffer (``to_numpy`` imports pandas: 0.4-1 s in a fresh process); other
    arrays by ``to_numpy``."""
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks() if a.num_chunks != 1 else a.chunk(0)
    t = a.type
    if a.null_count == 0 and (pa.types.is_integer(t) or pa.types.is_date(t)
                              or pa.types.is_timestamp(t)):
        width = t.bit_width // 8
        dtype = np.dtype(f"<{'u' if pa.types.is_unsigned_integer(t) else 'i'}{width}")
        if len(a) == 0:
            return np.zeros(0, dtype)
        return np.frombuffer(a.buffers()[1], dtype, count=len(a), offset=width * a.offset)
    out: np.ndarray = a.to_numpy(zero_copy_only=False)
    return out


def _fixed_width(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_timestamp(t))


def _bools(a: pa.Array) -> np.ndarray:
    """A null-free boolean array as numpy (from its bitmap: no pandas import)."""
    bits = np.unpackbits(np.frombuffer(a.buffers()[1], np.uint8), bitorder="little")
    return bits[a.offset:a.offset + len(a)].astype(bool)


# Below this many keys a radix pass saves less than it costs.
_RADIX_MIN = 4096


def _key_order(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stable sorting permutation of integer keys, and the keys in that order.
    One pass of a radix sort on the top 16 bits of each key's offset from the least
    (numpy's stable sort of uint16 is a counting sort), then numpy's stable sort (a
    timsort, fast on nearly sorted input) of the result: on random 64-bit keys, a
    third of the time of ``np.argsort`` for runs of 250,000-640,000. Skewed keys
    leave more to the second sort, never a wrong order."""
    n = len(raw)
    if n < _RADIX_MIN:
        order = np.argsort(raw, kind="stable")
        return order, raw[order]
    wide = raw.astype(np.int64 if raw.dtype.kind == "i" else np.uint64, copy=False)
    # Offsets wrap to the right unsigned value even when the span exceeds int64's.
    offsets = (wide - wide.min()).view(np.uint64)
    bits = int(offsets.max()).bit_length()
    if bits > 16:
        np.right_shift(offsets, np.uint64(bits - 16), out=offsets)
    order = np.argsort(offsets.astype(np.uint16), kind="stable")
    del offsets
    ks = raw[order]
    if bits <= 16:
        return order, ks
    fix = np.argsort(ks, kind="stable")
    return order[fix], ks[fix]


def _sorted_entries(keys: pa.Array, rgs: np.ndarray, files: np.ndarray
                    ) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """The entries in key order, each distinct ``(key, file, row_group)`` once (the
    entries of one key by file and row group). One sort by key (numpy's for
    fixed-width keys, 4x pyarrow's), then only the runs of equal keys are ordered by
    file and row group, so that duplicates sit side by side."""
    n = len(keys)
    if n == 0:
        return keys, rgs, files
    if _fixed_width(keys.type) and keys.null_count == 0:
        order, ks = _key_order(_numpy_of(keys))
        keys = pa.Array.from_buffers(keys.type, n, [None, pa.py_buffer(ks)])
        eq = ks[1:] == ks[:-1]
    else:
        order = _numpy_of(pc.sort_indices(keys))
        keys = keys.take(pa.array(order))
        eq = _bools(pc.equal(keys.slice(1), keys.slice(0, n - 1))) if n > 1 else np.zeros(0, bool)
    rgs, files = rgs[order], files[order]
    if not eq.any():
        return keys, rgs, files  # unique keys (the usual case): done
    # Entries of runs of equal keys, ordered by (run, file, row group); a run's keys
    # are all the same, so only the row groups and files move.
    starts = np.concatenate(([True], ~eq))
    run = np.cumsum(starts) - 1
    inrun = np.zeros(n, bool)
    inrun[1:] |= eq
    inrun[:-1] |= eq
    pos = np.flatnonzero(inrun)
    moved = pos[np.lexsort((rgs[pos], files[pos], run[pos]))]
    rgs[pos], files[pos] = rgs[moved], files[moved]
    dup = eq & (files[1:] == files[:-1]) & (rgs[1:] == rgs[:-1])
    if not dup.any():
        return keys, rgs, files
    keep = np.concatenate(([True], ~dup))
    if _fixed_width(keys.type) and keys.null_count == 0:
        ks = _numpy_of(keys)[keep]
        keys = pa.Array.from_buffers(keys.type, len(ks), [None, pa.py_buffer(ks)])
    else:
        keys = keys.filter(pa.Array.from_buffers(
            pa.bool_(), n, [None, pa.py_buffer(np.packbits(keep, bitorder="little"))]))
    return keys, rgs[keep], files[keep]


def _shard_bytes(part: pa.Table) -> bytes:
    """One shard as Parquet in memory, by pyarrow's writer: pages of at most
    :data:`PAGE_BYTES`, the page index (a lookup of a large shard reads only the pages
    holding its keys), the key column declared sorted and alone with statistics."""
    buf = pa.BufferOutputStream()
    # Sorted integer keys as deltas: 23% fewer bytes than zstd alone on random 64-bit
    # keys, and zstd gains nothing after them. pyarrow decodes them (a shard read
    # whole, checked against the descriptor's CRC-32: no page checksums); pqindex's
    # page reader does not, so only shards small enough to be read whole get them,
    # file ids and row groups as deltas too (random ids of 1,000 files: 1.4 bytes,
    # 1.75 with zstd; 20% less CPU than dictionaries, which cost 0.6 bytes an entry
    # more at 10,000 files). Other shards: file ids and row groups as dictionary
    # indices (pqindex's page reader decodes those), page checksums.
    delta = _fixed_width(part.schema.field(_KEY).type) and SHARD_BYTES <= WHOLE_SHARD_BYTES
    if delta:
        codec: dict[str, str] = {_KEY: "none", _ROW_GROUP: "none", _FILE: "none"}
        encoding: dict[str, str] | None = {
            c: "DELTA_BINARY_PACKED" for c in (_KEY, _ROW_GROUP, _FILE)}
    else:
        codec, encoding = {_KEY: "zstd", _ROW_GROUP: "none", _FILE: "none"}, None
    pq.write_table(part, buf, row_group_size=max(1, part.num_rows), compression=codec,
                   use_dictionary=False if delta else [_ROW_GROUP, _FILE],
                   data_page_size=PAGE_BYTES, write_page_index=True,
                   write_statistics=[_KEY], write_page_checksum=not delta,
                   store_decimal_as_integer=True, sorting_columns=[pq.SortingColumn(0)],
                   column_encoding=encoding)
    return bytes(buf.getvalue())


def _shard_order(data: bytes, url: str) -> tuple[Any, bytes]:
    """The key column's value type (the sort keys of min/max) and the footer stub of
    a shard (read with pqindex's own reader: probes bind to it)."""
    from pqindex.dataset.manifest import schema_stub
    from pqindex.format.file import ParquetFile
    from pqindex.io.source import BytesSource

    with ParquetFile(BytesSource(data, url)) as spf:
        return bound_order(spf.schema.leaves[0]).value_type, schema_stub(spf)


def _write_shard(part: pa.Table, base: str, rel: str, delta: bool, vt: Any,
                 storage_options: Mapping[str, Any] | None, data: bytes | None = None
                 ) -> Shard:
    from pqindex.io.objects import put_object
    from pqindex.io.source import local_info

    url = _join(base, rel)
    data = _shard_bytes(part) if data is None else data
    # One PUT on a store (its ETag kept; a multipart upload would be three requests in
    # a row); locally a temporary file renamed. No descriptor names the shard yet.
    etag = put_object(url, data, storage_options)
    info = ObjectInfo(len(data), etag)
    if "://" not in base:
        got = local_info(url)
        if got is None:
            raise PqIndexError("the key index shard just written is not there", path=url)
        info = got
    lo, hi = part.column(_KEY)[0].as_py(), part.column(_KEY)[-1].as_py()
    return Shard(rel, info.size, info.etag, info.mtime, part.num_rows,
                 value_key(vt, lo), value_key(vt, hi), delta, zlib.crc32(data))


def _write_shards(entries: pa.Table, base: str, column: str, delta: bool,
                  storage_options: Mapping[str, Any] | None,
                  ) -> tuple[list[Shard], bytes | None]:
    """``entries`` (key, row_group, file; any order) written as sorted shards."""
    run = _sorted_entries(
        entries.column(_KEY).combine_chunks(),
        np.ascontiguousarray(_numpy_of(entries.column(_ROW_GROUP)), np.int32),
        np.ascontiguousarray(_numpy_of(entries.column(_FILE)), np.int32))
    return _write_runs([run], base, column, delta, storage_options)


def _entries_table(keys: pa.Array, rgs: np.ndarray, files: np.ndarray) -> pa.Table:
    return pa.table({_KEY: keys, _ROW_GROUP: _int32s(rgs), _FILE: _int32s(files)})


# A task of the shard writers merges one key range of the runs (about this many
# shards' entries) and writes its shards: ranges are merged side by side, and the
# first shards upload while later ranges are still merged.
_SHARDS_PER_RANGE = 4


def _key_ranges(runs: Sequence[_Run], target: int) -> list[list[tuple[int, int]]]:
    """Key ranges of about ``target`` entries: per range, each run's ``[lo, hi)``.
    Bounds are keys sampled from the runs; every entry of a key falls in one range."""
    n = sum(len(r[0]) for r in runs)
    target = max(1, target)
    if len(runs) == 1:  # already merged: cut by position
        return [[(lo, min(lo + target, n))] for lo in range(0, n, target)]
    count = -(-n // target)
    raws = [_numpy_of(r[0]) for r in runs]
    if count > 1:
        step = max(1, target // 64)
        sample = np.sort(np.concatenate([raw[::step] for raw in raws]))
        bounds = np.unique(sample[[len(sample) * i // count for i in range(1, count)]])
    else:
        bounds = np.zeros(0, raws[0].dtype)
    edges = [np.concatenate(([0], np.searchsorted(raw, bounds, "left"), [len(raw)]))
             for raw in raws]
    return [[(int(e[i]), int(e[i + 1])) for e in edges] for i in range(len(bounds) + 1)]


def _write_runs(runs: Sequence[_Run], base: str, column: str, delta: bool,
                storage_options: Mapping[str, Any] | None,
                pool: ThreadPoolExecutor | None = None,
                ) -> tuple[list[Shard], bytes | None]:
    """Sorted runs (distinct files each) merged and written as shards of at most
    :data:`SHARD_BYTES` raw, in key order; returns them and the footer stub."""
    runs = [r for r in runs if len(r[0])]
    if not runs:
        return [], None
    n = sum(len(r[0]) for r in runs)
    per_entry = max(1, (sum(r[0].nbytes for r in runs) + 8 * n) // n)
    per_shard = max(1, SHARD_BYTES // per_entry)  # raw size: compressed is smaller
    safe = column.replace("/", "%2F")
    batch = uuid.uuid4().hex[:12]
    if "://" not in base:
        os.makedirs(os.path.join(base, *INDEX_DIR.split("/"), safe), exist_ok=True)
    # The stub and the order of every shard's min/max depend on the key type alone.
    k0, g0, f0 = runs[0]
    vt, stub = _shard_order(_shard_bytes(_entries_table(k0.slice(0, 1), g0[:1], f0[:1])),
                            _join(base, f"{INDEX_DIR}/{safe}/{batch}"))
    if len(runs) > 1 and not (_fixed_width(k0.type) and k0.null_count == 0):
        runs = [_merge_runs(runs)]  # no numpy bounds: one merge, cut by position
    ranges = _key_ranges(runs, per_shard * _SHARDS_PER_RANGE)

    # Merging and encoding take the CPU, a PUT waits on the store: few tasks encode
    # at once (all 16 at once left the store idle until the first range was done,
    # and its server competes for the same cores), the rest upload.
    cpu = threading.BoundedSemaphore(_ENCODE_THREADS)

    def write_range(r: int) -> list[Shard]:
        with cpu:
            keys, rgs, files = _merge_runs([
                (k.slice(lo, hi - lo), g[lo:hi], f[lo:hi])
                for (k, g, f), (lo, hi) in zip(runs, ranges[r], strict=True)])
        m = len(keys)
        if m == 0:
            return []
        count = -(-m // per_shard)
        cuts = [m * i // count for i in range(count + 1)]  # even shards, none above
        out = []
        for j, (a, b) in enumerate(itertools.pairwise(cuts)):
            if b <= a:
                continue
            part = _entries_table(keys.slice(a, b - a), rgs[a:b], files[a:b])
            with cpu:
                data = _shard_bytes(part)
            out.append(_write_shard(
                part, base, f"{INDEX_DIR}/{safe}/{batch}-{r:05d}-{j:03d}{SHARD_SUFFIX}",
                delta, vt, storage_options, data))
        return out

    if pool is not None:
        done = list(pool.map(write_range, range(len(ranges))))
    else:
        with ThreadPoolExecutor(_WRITE_THREADS) as own:
            done = list(own.map(write_range, range(len(ranges))))
    return [s for got in done for s in got], stub


class _KeyReader:
    """The keys of the files an index does not cover yet, read on a pool a batch at
    a time, while the batch's tails are in the metadata cache (the manifest written
    beside it parses their footers from the same tails meanwhile: one pass)."""

    def __init__(self, base: str, columns: Sequence[str], previous: Any, disc: Discovery,
                 storage_options: Mapping[str, Any] | None) -> None:
        self.base, self.columns, self.previous = base, list(dict.fromkeys(columns)), previous
        self.storage_options = storage_options
        by_rel = {_rel(base, df.path): df for df in disc.files}
        self.current = {rel: _info(df) for rel, df in by_rel.items()}
        have = {c.path for c in _still_covered(_old_index(previous, self.columns),
                                               self.current)}
        self.todo = [df for rel, df in sorted(by_rel.items()) if rel not in have]
        self._wanted = {df.path for df in self.todo}
        self._pool = ThreadPoolExecutor(_BUILD_THREADS)
        self._pending: list[list[Future[_Chunk]]] = []  # per batch
        self._read: set[str] = set()
        self._ext = _Extension(base, self.columns, previous, self.current, self._pool)

    def batch(self, files: Sequence[DataFile], tails: TailWave | None = None) -> None:
        """Start reading ``files`` (those not covered), :data:`_RUN_FILES` a task, each
        task sorting its files' entries as a run (all of it beside the manifest's
        parse of the same batch); waits for the batch before, so at most two
        batches' tails need to stay cached. ``tails``: the wave reading their tails
        (each file is read as its tail lands, the last batch's too, before the
        wave's end)."""
        wanted = [df for df in files if df.path in self._wanted]
        tasks = []
        for i in range(0, len(wanted), _RUN_FILES):
            chunk = wanted[i:i + _RUN_FILES]
            first = self._ext.next_id
            self._ext.next_id += len(chunk)  # ids reserved in order (gaps: files gone)
            tasks.append(self._pool.submit(self._load_run, chunk, first, tails))
        self._pending.append(tasks)
        while len(self._pending) > 1:
            self._collect(self._pending.pop(0))

    def _load_run(self, chunk: Sequence[DataFile], first: int, tails: TailWave | None
                  ) -> _Chunk:
        loaded = []
        for i, df in enumerate(chunk):
            if tails is not None:
                tails.wait(df.path)
            loaded.append((df, first + i, _load(df, self.columns, self.storage_options)))
        runs: dict[str, _Run | None] = {}
        for c in self.columns:
            parts: list[tuple[int, list[pa.Array]]] = []
            types = set()
            for _, fid, got in loaded:
                hit = got[1].get(c) if got is not None else None
                if hit is not None:
                    types.add(hit[0])
                    parts.append((fid, hit[1]))
            # Types that differ: no run (the collection raises, naming the files).
            entries = _chunk_entries(parts) if len(types) == 1 else None
            runs[c] = _sorted_entries(*entries) if entries is not None else None
        return loaded, runs

    def _collect(self, tasks: list[Future[_Chunk]]) -> None:
        """A batch's files and sorted runs in (its files' types checked)."""
        for task in tasks:
            loaded, runs = task.result()
            for df, fid, got in loaded:
                self._read.add(df.path)
                if got is not None:
                    self._ext.add_read(_rel(self.base, df.path), got[0],
                                       {c: None if hit is None else hit[0]
                                        for c, hit in got[1].items()}, fid)
            for c, run in runs.items():
                if run is not None:
                    self._ext.runs[c].append(run)

    def descriptor(self) -> dict[str, Any]:
        """The index's descriptor, its new shards written (reads any file no batch
        named)."""
        from pqindex.io.objstore import prefetch_tails

        while self._pending:
            self._collect(self._pending.pop(0))
        rest = [df for df in self.todo if df.path not in self._read]
        for i in range(0, len(rest), _TAIL_BATCH):
            batch = rest[i:i + _TAIL_BATCH]
            prefetch_tails([(df.path, df.info, None) for df in batch], self.storage_options)
            self.batch(batch)
        while self._pending:
            self._collect(self._pending.pop(0))
        return self._ext.finish(self.storage_options)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


# A file's key entries: column -> (key type, its (key, row_group) table); None for a
# column the file lacks.
FileKeys = Mapping[str, "tuple[pa.DataType, pa.Table] | None"]


def file_keys(path: str, columns: Sequence[str],
              storage_options: Mapping[str, Any] | None = None,
              info: ObjectInfo | None = None) -> FileKeys:
    """The distinct ``(key, row_group)`` entries of ``columns`` in one data file (a
    Spark task calls this for the files it wrote)."""
    loaded = _load(DataFile(path, info=info), columns, storage_options)
    if loaded is None:
        raise UserInputError("the file disappeared while the key index was built", path=path)
    return {c: _file_entries(got) for c, got in loaded[1].items()}


def _old_index(previous: Any, columns: Sequence[str]) -> KeyIndex | None:
    """The former descriptor, when it indexes exactly ``columns`` (else a rebuild)."""
    if previous is None:
        return None
    try:
        old = parse_key_index(previous)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return old if set(old.columns) == set(columns) else None


def _still_covered(old: KeyIndex | None, current: Mapping[str, ObjectInfo | None]
                   ) -> list[Covered]:
    """The files of ``old`` that ``current`` (relative path -> info) shows unchanged."""
    if old is None:
        return []
    return [c for c in old.files
            if c.path in current and _same_object(c, current[c.path])]


# Sorted entries of some files: keys, row groups, file ids.
_Run = tuple[pa.Array, np.ndarray, np.ndarray]
# A build task's files (each with its id and what was read) and its runs by column.
_Chunk = tuple[list[tuple[DataFile, int, "_Loaded | None"]], dict[str, "_Run | None"]]


class _Extension:
    """A key index being extended by new files' entries (see :func:`extend_key_index`).
    The entries added since the last :meth:`seal` are sorted as one run on ``pool``
    (beside the reads still going); :meth:`finish` merges the runs and writes them."""

    def __init__(self, base: str, columns: Sequence[str], previous: Any,
                 current: Mapping[str, ObjectInfo | None],
                 pool: ThreadPoolExecutor | None = None) -> None:
        self.base, self.cols = base, list(dict.fromkeys(columns))
        self.old = _old_index(previous, self.cols)
        self.covered = _still_covered(self.old, current)
        if self.old is not None and not self.covered:
            self.old = None  # no file of it is left (an overwrite): a new index
        self.next_id = 1 + max((c.id for c in (self.old.files if self.old else ())),
                               default=-1)
        self.types: dict[str, tuple[pa.DataType, str]] = {}
        if self.old is not None:  # a delta's keys must have the type of the shards it joins
            from pqindex.dataset.manifest import stub_file
            from pqindex.scan.page_decode import arrow_schema

            for c in self.cols:
                shard = stub_file(self.old.columns[c].schema, f"{base}#key_index/{c}")
                self.types[c] = (_plain(arrow_schema(shard).field(_KEY).type),
                                 f"the key index's shards ({INDEX_DIR}/{c})")
        self.pool = pool
        # Per column: the unsealed files' key arrays, row groups and file ids.
        self.parts: dict[str, tuple[list[pa.Array], list[np.ndarray], list[np.ndarray]]] = {
            c: ([], [], []) for c in self.cols}
        self.runs: dict[str, list[Future[_Run] | _Run]] = {c: [] for c in self.cols}
        self.new_files: list[Covered] = []

    def _check(self, where: str, c: str, t: pa.DataType) -> None:
        seen = self.types.setdefault(c, (t, where))
        if seen[0] != t:
            raise UserInputError(
                f"the key column changed type across files: {seen[0]} in {seen[1]}, "
                f"{t} in {where}", path=where, column=c)

    def add(self, rel: str, info: ObjectInfo, got: FileKeys) -> None:
        """A file's entries in (their types checked)."""
        where = _join(self.base, rel)
        for c in self.cols:
            hit = got.get(c)
            if hit is None:
                continue
            t, entries = hit
            self._check(where, c, t)
            if entries.num_rows:
                keys, rgs, fids = self.parts[c]
                keys += entries.column(_KEY).chunks
                rgs.append(_numpy_of(entries.column(_ROW_GROUP)))
                fids.append(np.full(entries.num_rows, self.next_id, np.int32))
        self.new_files.append(Covered(self.next_id, rel, info.size, info.etag, info.mtime,
                                      info.ctime))
        self.next_id += 1

    def add_read(self, rel: str, info: ObjectInfo, types: Mapping[str, pa.DataType | None],
                 fid: int) -> None:
        """A file whose entries are already in a sorted run under ``fid``: its key
        types checked (None: the file lacks the column)."""
        where = _join(self.base, rel)
        for c in self.cols:
            t = types.get(c)
            if t is not None:
                self._check(where, c, t)
        self.new_files.append(Covered(fid, rel, info.size, info.etag, info.mtime,
                                      info.ctime))

    def seal(self) -> None:
        """The entries added so far become a sorted run (each distinct entry once:
        a file's entries are all in one run)."""
        for c in self.cols:
            keys, rgs, fids = self.parts[c]
            if not keys:
                continue
            args = (pa.concat_arrays(keys), np.concatenate(rgs).astype(np.int32, copy=False),
                    np.concatenate(fids))
            self.parts[c] = ([], [], [])
            self.runs[c].append(self.pool.submit(_sorted_entries, *args)
                                if self.pool is not None else _sorted_entries(*args))

    def finish(self, storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
        self.seal()
        old = self.old
        out_columns: dict[str, ColumnIndex] = {}
        for c in self.cols:
            shards: list[Shard] = list(old.columns[c].shards) if old is not None else []
            stub = old.columns[c].schema if old is not None else None
            runs = [r.result() if isinstance(r, Future) else r for r in self.runs[c]]
            if runs:
                written, got_stub = _write_runs(runs, self.base, c, old is not None,
                                                storage_options, self.pool)
                shards += written
                stub = stub or got_stub
            if stub is None:
                raise UserInputError(f"no file has a non-null value of key column {c!r}",
                                     path=self.base, column=c)
            out_columns[c] = ColumnIndex(c, stub, tuple(shards))
        return _descriptor(KeyIndex(tuple(self.covered + self.new_files), out_columns))


def _merge_runs(runs: Sequence[_Run]) -> _Run:
    """Sorted runs (distinct files each) as one sorted run. numpy's stable sort is a
    timsort for 64-bit keys: it merges presorted runs (4 runs of 10M keys: ~6x
    faster than sorting them afresh), and the gathers then read each run in order."""
    if len(runs) == 1:
        return runs[0]
    keys = pa.concat_arrays([r[0] for r in runs])
    rgs = np.concatenate([r[1] for r in runs])
    files = np.concatenate([r[2] for r in runs])
    if _fixed_width(keys.type) and keys.null_count == 0:
        raw = _numpy_of(keys)
        order = np.argsort(raw, kind="stable")
        ks = raw[order]
        keys = pa.Array.from_buffers(keys.type, len(ks), [None, pa.py_buffer(ks)])
    else:
        order = _numpy_of(pc.sort_indices(keys))
        keys = keys.take(pa.array(order))
    return keys, rgs[order], files[order]


def extend_key_index(base: str, columns: Sequence[str], previous: Any,
                     current: Mapping[str, ObjectInfo | None],
                     new: Sequence[tuple[str, ObjectInfo, FileKeys]],
                     storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The descriptor of ``base``'s key index once the ``new`` files' entries are in:
    ``(relative path, info, entries)``, written as delta shards when ``previous``
    indexes the same columns (its files that ``current`` shows unchanged stay
    covered), else as the first shards of a new index (also when no file of
    ``previous`` is left: its shards are then superseded)."""
    ext = _Extension(base, columns, previous, current)
    for rel, info, got in new:
        ext.add(rel, info, got)
    return ext.finish(storage_options)


def build_key_index(
    path: str | os.PathLike[str], columns: Sequence[str], *,
    storage_options: Mapping[str, Any] | None = None,
    previous: Any = None, discovery: Discovery | None = None,
) -> dict[str, Any]:
    """The key index descriptor of the dataset directory ``path`` for ``columns``,
    its shards written. With ``previous`` (the manifest's former descriptor) covering
    the same columns, only the files it does not cover are read, into delta shards;
    otherwise every file is read and new shards replace the old (which stay until
    removed: the manifest no longer names them)."""
    from pqindex.dataset.discovery import discover

    base = _base(os.fspath(path))
    disc = discovery if discovery is not None else discover(base, storage_options)
    reader = _KeyReader(base, columns, previous, disc, storage_options)
    try:
        return reader.descriptor()
    finally:
        reader.close()


def write_manifest_with_key_index(
    path: str | os.PathLike[str], columns: Sequence[str], *,
    storage_options: Mapping[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """``pqindex manifest PATH --key-index COL...``: the key index of ``columns`` built
    (delta shards when the manifest's index covers the same columns) and the manifest
    written with it. A manifest pqindex's pipeline committed (a commit point) stays
    one: the index covers the files it names and joins it in place
    (:func:`add_key_index`); any other manifest is rewritten from the listing."""
    from pqindex.dataset.discovery import discover
    from pqindex.dataset.manifest import committed_files, write_manifest
    from pqindex.io.objects import get_versioned

    root = os.fspath(path)
    base = _base(root)
    # One GET of the manifest serves the commit-point check, the previous index and
    # write_manifest's refresh (three sequential round trips before).
    got = get_versioned(manifest_url(base), storage_options)
    raw = got[0] if got is not None else None
    if raw is not None and got is not None and committed_files(raw) is not None:
        return add_key_index(root, columns, storage_options=storage_options,
                             fetched=(raw, got[1]))
    previous = _index_in(raw)
    disc = discover(base, storage_options)
    # One pass over the files: the manifest parses each batch's footers while the pool
    # decodes its key chunks from the same cached tails (two passes read every tail
    # twice once the lake outgrows the metadata cache).
    reader = _KeyReader(base, columns, previous, disc, storage_options)
    try:
        out = write_manifest(root, storage_options, progress=progress, discovery=disc,
                             previous=(raw,), on_batch=reader.batch,
                             finish=lambda m: {**m, MANIFEST_KEY: reader.descriptor()})
    finally:
        reader.close()
    drop_superseded(base, previous, out[MANIFEST_KEY], storage_options)
    return out


def _commit_point(root: str, storage_options: Mapping[str, Any] | None
                  ) -> tuple[dict[str, Any], str | None] | None:
    """The commit-point manifest at ``root`` and its version, or None (no manifest,
    or one written over a listing)."""
    from pqindex.io.objects import get_versioned

    got = get_versioned(manifest_url(_base(root)), storage_options)
    m = None if got is None else _committed_json(got[0])
    return None if m is None or got is None else (m, got[1])


def _committed_json(raw: bytes) -> dict[str, Any] | None:
    """Manifest bytes as JSON when they are a commit point, else None."""
    from pqindex.dataset.manifest import committed_files

    if committed_files(raw) is None:
        return None
    m = json.loads(raw)
    return m if isinstance(m, dict) else None


def read_manifest(root: str, storage_options: Mapping[str, Any] | None
                  ) -> tuple[dict[str, Any] | None, str | None]:
    """The manifest at ``root`` as JSON and its version (for a conditional replace);
    (None, None) without one, (None, version) when it is not a JSON object."""
    from pqindex.io.objects import get_versioned

    got = get_versioned(manifest_url(_base(root)), storage_options)
    if got is None:
        return None, None
    try:
        m = json.loads(got[0])
    except ValueError:
        return None, got[1]
    return (m if isinstance(m, dict) else None), got[1]


def _base(root: str) -> str:
    base = root[len("file://"):] if root.startswith("file://") else root
    return base.rstrip("/").rstrip(os.sep)


def commit_key_index(root: str, manifest: dict[str, Any], version: str | None,
                     descriptor: Mapping[str, Any] | None,
                     storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``manifest`` (read at ``version``) written back with the key index
    ``descriptor`` (None: without one), only if no one replaced it meanwhile (a
    concurrent commit or rebuild: :class:`~pqindex.errors.PqIndexError`)."""
    from pqindex.io.errors import StorageError
    from pqindex.io.objects import replace_object

    base = _base(root)
    previous = manifest.get(MANIFEST_KEY)
    out = {k: v for k, v in manifest.items() if k != MANIFEST_KEY}
    if descriptor is not None:
        out[MANIFEST_KEY] = dict(descriptor)
    body = json.dumps(out, separators=(",", ":"), default=str).encode("utf-8")
    try:
        replace_object(manifest_url(base), body, version, storage_options)
    except StorageError as e:
        if e.operation != "PUT (if-match)":
            raise
        raise PqIndexError("the manifest changed while the key index was built (another "
                           "commit or rebuild): run it again", path=manifest_url(base)) from None
    if "://" not in base:
        from pqindex.dataset.manifest_columnar import write_columnar

        write_columnar(base, out)
    drop_superseded(base, previous, descriptor, storage_options)
    return out


def _shard_paths(raw: Any) -> set[str]:
    """The shard paths a descriptor names (none when it is damaged)."""
    try:
        index = parse_key_index(raw) if raw is not None else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return set()
    if index is None:
        return set()
    return {s.path for c in index.columns.values() for s in c.shards}


def drop_superseded(base: str, previous: Any, descriptor: Any,
                    storage_options: Mapping[str, Any] | None) -> list[str]:
    """Delete the shards of ``previous`` (the descriptor the manifest held) that the
    committed ``descriptor`` no longer names (a rebuild's or a compaction's); returns
    their relative paths. Called only once the new manifest is committed: a reader
    that took the old manifest before that and reads such a shard afterwards finds
    it missing, and falls back to the files (same rows; ``explain`` says why). Best
    effort: a shard left behind is only bytes."""
    gone = sorted(p for p in _shard_paths(previous) - _shard_paths(descriptor)
                  if p.startswith(INDEX_DIR + "/") and p.endswith(SHARD_SUFFIX))
    _delete([_join(base, p) for p in gone], storage_options)
    return gone


def _delete(urls: Sequence[str], storage_options: Mapping[str, Any] | None) -> None:
    """Best-effort delete; on a store one bulk request per 1,000 objects (S3's
    DeleteObjects through obstore), not a DELETE each (~150 shards of a 10M-key
    index one by one were seconds of round trips)."""
    from pqindex.dataset.tables.commit import remove_written

    remote = {u for u in urls if "://" in u and not u.startswith("file://")}
    remove_written([u for u in urls if u not in remote], storage_options)
    if not remote:
        return
    from pqindex.io.native import obstore_api
    from pqindex.io.objstore import get_store

    obs = obstore_api()
    by_store: dict[int, tuple[Any, list[str], list[str]]] = {}
    for url in sorted(remote):
        handle, key = get_store(url, storage_options)
        got = by_store.setdefault(id(handle.store), (handle.store, [], []))
        got[1].append(key)
        got[2].append(url)
    for store, keys, each in by_store.values():
        try:
            obs.delete(store, keys)
        except Exception:  # the store's own errors: one at a time, best effort
            remove_written(each, storage_options)


def add_key_index(path: str | os.PathLike[str], columns: Sequence[str], *,
                  storage_options: Mapping[str, Any] | None = None,
                  fetched: tuple[bytes, str | None] | None = None) -> dict[str, Any]:
    """The key index of ``columns`` over the files a commit-point manifest names (no
    LIST; delta shards when its index covers the same columns), committed into that
    manifest, which stays a commit point. ``fetched``: the manifest's bytes and
    version, when the caller has them (no GET here). Returns the manifest."""
    from pqindex.dataset.discovery import committed_discovery, discover

    root = _base(os.fspath(path))
    if fetched is None:
        found = _commit_point(root, storage_options)
    else:
        m = _committed_json(fetched[0])
        found = None if m is None else (m, fetched[1])
    if found is None:
        raise UserInputError("no manifest committed by pqindex's pipeline here (write one "
                             "with `pqindex manifest PATH --key-index COL`)", path=root)
    manifest, version = found
    # On a store, the files from the bytes in hand (two sequential GETs before: the
    # commit point's, then discovery's).
    disc = (committed_discovery(root, fetched[0])
            if fetched is not None and "://" in root else None)
    if disc is None:
        disc = discover(root, storage_options, listing=False)
    descriptor = build_key_index(root, columns, storage_options=storage_options,
                                 previous=manifest.get(MANIFEST_KEY), discovery=disc)
    return commit_key_index(root, manifest, version, descriptor, storage_options)


def _read_shard(base: str, shard: Shard, storage_options: Mapping[str, Any] | None
                ) -> pa.Table:
    """A shard's entries, checked against its CRC-32 or its page checksums (whole
    object: one GET)."""
    from pqindex.io.objects import get_object

    url = _join(base, shard.path)
    data = get_object(url, storage_options)
    if data is None or len(data) != shard.size:
        raise PqIndexError("a key index shard is missing or changed; rebuild the index "
                           "(`pqindex manifest PATH --key-index COL`)", path=url)
    if shard.crc32 is not None and zlib.crc32(data) != shard.crc32:
        raise PqIndexError("a key index shard is damaged (its CRC-32 differs from the "
                           "descriptor's); rebuild the index", path=url)
    try:
        return pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True).read()
    except (OSError, pa.ArrowException) as e:
        raise PqIndexError(f"a key index shard cannot be read ({e}); rebuild the index",
                           path=url) from None


def compact_key_index(path: str | os.PathLike[str], *,
                      storage_options: Mapping[str, Any] | None = None,
                      deltas_only: bool = False) -> dict[str, Any]:
    """Merge the key index's shards into one sorted run per column (``deltas_only``:
    the delta shards alone, the first build's left as they are), dropping the
    entries of files the dataset no longer has, and commit the descriptor into the
    manifest (only if no one replaced the manifest meanwhile). The old shards stay
    until removed (a reader holding the old manifest may still read them). Returns
    the manifest."""
    from pqindex.dataset.discovery import discover

    root = _base(os.fspath(path))
    manifest, version = read_manifest(root, storage_options)
    if manifest is None or MANIFEST_KEY not in manifest:
        raise UserInputError("no key index here (build one with `pqindex manifest PATH "
                             "--key-index COL`)", path=root)
    try:
        index = parse_key_index(manifest[MANIFEST_KEY])
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise UserInputError(f"the manifest's key index is damaged ({e}); rebuild it",
                             path=root) from None
    point = manifest.get("commit_point") is True
    disc = discover(root, storage_options, listing=False if point else None)
    listed = {_rel(root, df.path): df for df in disc.files}
    kept = tuple(c for c in index.files
                 if (df := listed.get(c.path)) is not None and _same_object(c, _info(df)))
    ids = np.array(sorted(c.id for c in kept), dtype=np.int32)
    columns: dict[str, ColumnIndex] = {}
    for name, col in index.columns.items():
        merge = [sh for sh in col.shards if sh.delta or not deltas_only]
        stay = [sh for sh in col.shards if not (sh.delta or not deltas_only)]
        if not merge or (len(merge) == 1 and deltas_only):
            columns[name] = col
            continue
        with ThreadPoolExecutor(_BUILD_THREADS) as pool:
            parts = [t.replace_schema_metadata(None) for t in pool.map(
                lambda sh: _read_shard(root, sh, storage_options), merge)]
        table = pa.concat_tables(parts).select([_KEY, _ROW_GROUP, _FILE])
        live = np.isin(_numpy_of(table.column(_FILE)), ids)
        table = table.filter(pa.Array.from_buffers(
            pa.bool_(), len(live), [None, pa.py_buffer(np.packbits(live, bitorder="little"))]))
        written, _ = _write_shards(table, root, name, bool(stay), storage_options)
        columns[name] = ColumnIndex(name, col.schema, tuple(stay + written))
    descriptor = _descriptor(KeyIndex(kept, columns))
    return commit_key_index(root, manifest, version, descriptor, storage_options)


# ------------------------------------------------------------------ looking up

def key_conjunct(expr: Expr, columns: Sequence[str] | None) -> Compare | In | None:
    """A top-level conjunct ``col = v`` or ``col IN (...)`` on an indexed column (on
    any column when ``columns`` is None)."""
    todo = [expr]
    while todo:
        e = todo.pop()
        if isinstance(e, And):
            todo += [e.right, e.left]
        elif ((isinstance(e, Compare) and e.op == LeafOp.EQ)
              or (isinstance(e, In) and not e.negated)) and (
                  columns is None or e.column.name in columns):
            return e
    return None


def _probes(node: Compare | In) -> Expr:
    """The conjunct on the shards' key column."""
    if isinstance(node, Compare):
        return Compare(LeafOp.EQ, Column(_KEY), node.literal)
    return In(Column(_KEY), tuple(Literal(v.value) for v in node.values))


@dataclass
class KeyLookup:
    """What the key index said about one scan's files."""

    column: str
    # Data file path -> the row groups the index names (empty: no row can match).
    named: dict[str, frozenset[int]] = field(default_factory=dict)
    shards: list[str] = field(default_factory=list)  # consulted (relative paths)
    pages: int = 0  # index pages read (of shards too large to read whole)
    whole: int = 0  # shards read whole (one request each, or none when cached)
    files_named: int = 0
    row_groups_named: int = 0
    uncovered: int = 0  # listed files the index does not cover (planned as before)
    fallback: str | None = None  # why the index was not used
    requests: int = 0
    round_trips: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.column, "shards": list(self.shards), "pages": self.pages,
                "shards_whole": self.whole,
                "files_named": self.files_named, "row_groups_named": self.row_groups_named,
                "files_not_covered": self.uncovered, "fallback": self.fallback,
                "requests": self.requests, "round_trips": self.round_trips}



def describe_lookup(d: Mapping[str, Any]) -> str:
    """One line of ``explain`` from :meth:`KeyLookup.to_dict`."""
    if d.get("fallback") is not None:
        return f"key index on {d['column']} not used: {d['fallback']}"
    shards = ", ".join(d["shards"]) or "none (no shard's range holds the keys)"
    read = f"{d['pages']} index page(s)"
    if d.get("shards_whole"):
        read = f"{d['shards_whole']} shard(s) whole" + (f" and {read}" if d["pages"] else "")
    return (f"key index on {d['column']}: shards {shards}; {read} read "
            f"in {d['requests']} request(s); named {d['files_named']} file(s), "
            f"{d['row_groups_named']} row group(s); {d['files_not_covered']} file(s) not "
            f"covered (planned from their footers)")


def lookup_keys(view: ManifestView | None, disc: Discovery, expr: Expr,
                storage_options: Mapping[str, Any] | None,
                on_error: Callable[[str], None] | None = None) -> KeyLookup | None:
    """The files and row groups the manifest's key index names for ``expr``'s
    ``col = v`` / ``col IN (...)`` conjunct, or None when there is no such conjunct
    on an indexed column. Any doubt (a shard missing, changed or damaged) gives a
    lookup with ``fallback`` set, and the files are planned as without the index."""
    raw = None
    if view is not None:
        raw = view.manifest.key_index
        columnar = getattr(view, "columnar", None)  # its top-level keys, as the JSON's
        if raw is None and columnar is not None:
            raw = columnar.top.get(MANIFEST_KEY)
    if raw is None or view is None:
        return None
    return _use(raw, "the manifest's", view.root, view.stats, disc, expr, storage_options,
                on_error)


def _use(raw: Any, whose: str, root: str, stats: IOStats, disc: Discovery, expr: Expr,
         storage_options: Mapping[str, Any] | None,
         on_error: Callable[[str], None] | None, stale: str | None = None
         ) -> KeyLookup | None:
    try:
        index = parse_key_index(raw)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        cols = list(raw.get("columns") or {}) if isinstance(raw, dict) else []
        node = key_conjunct(expr, cols)
        if node is None:
            return None
        return KeyLookup(node.column.name, fallback=f"{whose} key index is damaged ({e})")
    node = key_conjunct(expr, list(index.columns))
    if node is None:
        return None
    column = index.columns[node.column.name]
    found = KeyLookup(column.column, fallback=stale)
    if stale is None:
        try:
            _lookup(found, index, column, node, root, stats, disc, storage_options)
        except PqIndexError as e:
            found.named.clear()
            found.fallback = f"a shard could not be read: {e}"
    if found.fallback is not None and on_error is not None:
        on_error(describe_lookup(found.to_dict()))
    return found


# ------------------------------------------------------------------ tables

# A Delta or Iceberg table's key index: the descriptor with the table version it was
# built at, beside the table (no pqindex manifest there; the table's log names files).
TABLE_DESCRIPTOR = "_pqindex/key_index.json"


# (table location, version) -> None: the versions this process found no descriptor
# for (a table read without a key index pays its GET once).
_TABLE_DESCRIPTORS: dict[tuple[str, str | None], bytes | None] = {}


def table_version(table: Any) -> str | None:
    """The version a table source reads (``delta:<version>``, ``iceberg:<snapshot>``)."""
    v = getattr(table, "version", None)
    return v if isinstance(v, str) else None


def build_table_key_index(table: Any, columns: Sequence[str], *,
                          storage_options: Mapping[str, Any] | None = None
                          ) -> dict[str, Any]:
    """The key index of a table snapshot (``dataset/tables/source.py``'s source),
    tied to its version: a read of any other version ignores it. Written as
    :data:`TABLE_DESCRIPTOR` under the table's location; returns the descriptor."""
    from pqindex.errors import UnsupportedError
    from pqindex.io.objects import put_object

    version = table_version(table)
    if version is None or getattr(table, "logical_names", None) or getattr(
            table, "renamed", False):
        raise UnsupportedError("a key index of this table is not supported yet (no version, "
                               "or columns mapped or renamed)", path=table.location)
    from pqindex.io.objects import get_object

    root = _base(table.location)
    before = get_object(_join(root, TABLE_DESCRIPTOR), storage_options)
    descriptor = build_key_index(root, columns, storage_options=storage_options,
                                 discovery=table.discovery)
    descriptor["table_version"] = version
    _TABLE_DESCRIPTORS.pop((root, version), None)
    put_object(_join(root, TABLE_DESCRIPTOR),
               json.dumps(descriptor, separators=(",", ":")).encode("utf-8"), storage_options)
    if before is not None:  # the former version's shards, once the new one is in place
        with contextlib.suppress(ValueError):
            drop_superseded(root, json.loads(before), descriptor, storage_options)
    return descriptor


def lookup_table_keys(table: Any, disc: Discovery, expr: Expr,
                      storage_options: Mapping[str, Any] | None,
                      on_error: Callable[[str], None] | None = None) -> KeyLookup | None:
    """:func:`lookup_keys` for a table snapshot: its key index, used only when built at
    the version read (one GET of the descriptor; none there: None)."""
    from pqindex.io.objects import get_object

    if key_conjunct(expr, None) is None:
        return None  # no point lookup: the descriptor is not even read
    root = _base(table.location)
    stats = IOStats()
    memo = (root, table_version(table))
    fetched = getattr(table, "key_descriptor", None)  # read with the table's log
    if fetched is not None:
        data = fetched[0]
    elif memo in _TABLE_DESCRIPTORS:
        data = _TABLE_DESCRIPTORS[memo]
    else:
        try:
            data = get_object(_join(root, TABLE_DESCRIPTOR), storage_options, stats)
        except PqIndexError:
            return None
        if data is None:
            _TABLE_DESCRIPTORS[memo] = None  # this version has none: asked once
    if data is None:
        return None
    try:
        raw = json.loads(data)
    except ValueError as e:
        raw = {"damaged": str(e)}
    built = raw.get("table_version") if isinstance(raw, dict) else None
    read = table_version(table)
    stale = None
    if built != read:
        stale = (f"the key index was built for table version {built}; this read is at "
                 f"{read}")
    return _use(raw, "the table's", root, stats, disc, expr, storage_options, on_error,
                stale)


def _lookup(found: KeyLookup, index: KeyIndex, column: ColumnIndex, node: Compare | In,
            root: str, stats: IOStats, disc: Discovery,
            storage_options: Mapping[str, Any] | None) -> None:
    from pqindex.dataset.manifest import stub_file

    by_id: dict[int, str] = {}
    listed = {_rel(root, df.path): df for df in disc.files}
    for c in index.files:
        df = listed.get(c.path)
        if df is not None and _same_object(c, _info(df)):
            by_id[c.id] = df.path
    found.uncovered = len(disc.files) - len(by_id)
    probe = _probes(node)
    stand_in: ParquetFile = stub_file(column.schema, f"{root}#key_index/{column.column}")
    try:
        bound = bind(probe, stand_in.schema)
    except UserInputError as e:
        found.fallback = f"the keys do not bind to the index's key column: {e.reason}"
        return
    keys = [k for p in _predicates(bound) for k in p.keys]
    keys.sort()
    chosen = [s for s in column.shards
              if keys and bisect.bisect_left(keys, s.min) < len(keys)
              and keys[bisect.bisect_left(keys, s.min)] <= s.max]
    named: dict[str, set[int]] = {p: set() for p in by_id.values()}
    small = [s for s in chosen if s.size <= WHOLE_SHARD_BYTES]
    large = [s for s in chosen if s.size > WHOLE_SHARD_BYTES]
    hits: list[tuple[np.ndarray, np.ndarray]] = []
    if small:
        hits += _probe_whole(small, bound, root, stats, found, storage_options)
    if large:
        hits.append(_probe_pages(large, probe, root, stats, found, storage_options))
    found.shards = [s.path for s in chosen]
    for fids, rgs in hits:
        for fid, rg in zip(fids.tolist(), rgs.tolist(), strict=True):
            p = by_id.get(fid)
            if p is not None:
                named[p].add(rg)
    found.named = {p: frozenset(rgs) for p, rgs in named.items()}
    found.files_named = sum(1 for rgs in named.values() if rgs)
    found.row_groups_named = sum(len(rgs) for rgs in named.values())


# Decoded small shards, by (url, size, version): a process that looks keys up again
# decodes none twice. Bounded by the entries' Arrow bytes.
_DECODED: dict[tuple[str, int, Any], pa.Table] = {}
_DECODED_BYTES = 256 << 20
_decoded_lock = threading.Lock()
_decoded_total = 0


def clear_decoded() -> None:
    """Forget the decoded shards (a cold lookup reads its shards again)."""
    global _decoded_total
    with _decoded_lock:
        _DECODED.clear()
        _decoded_total = 0


def _decoded(key: tuple[str, int, Any]) -> pa.Table | None:
    with _decoded_lock:
        t = _DECODED.pop(key, None)
        if t is not None:
            _DECODED[key] = t  # most recently used last
        return t


def _keep_decoded(key: tuple[str, int, Any], table: pa.Table) -> None:
    global _decoded_total
    with _decoded_lock:
        old = _DECODED.pop(key, None)
        _decoded_total += table.nbytes - (0 if old is None else old.nbytes)
        _DECODED[key] = table
        while _decoded_total > _DECODED_BYTES and len(_DECODED) > 1:
            _decoded_total -= _DECODED.pop(next(iter(_DECODED))).nbytes


def _fetch_shard(root: str, shard: Shard, storage_options: Mapping[str, Any] | None,
                 stats: IOStats) -> tuple[tuple[str, int, Any], pa.Table]:
    """A small shard's entries: the whole object in one request (conditional on the
    descriptor's ETag on a store, its size and mtime checked locally), decoded by
    pyarrow with page checksums verified; from the cache when decoded before."""
    from pqindex.io.source import open_source

    url = _join(root, shard.path)
    key = (url, shard.size, shard.etag if shard.etag is not None else shard.mtime)
    got = _decoded(key)
    if got is not None:
        return key, got
    info = ObjectInfo(shard.size, shard.etag, mtime=shard.mtime)
    src = open_source(url, stats, storage_options, info)
    try:
        mtime = getattr(src, "mtime_ns", None)
        if src.size() != shard.size or (shard.mtime is not None and mtime is not None
                                        and mtime != shard.mtime):
            raise PqIndexError("a key index shard changed since the index was built; "
                               "rebuild it (`pqindex manifest PATH --key-index COL`)",
                               path=url)
        data = src.read(0, shard.size)
    finally:
        src.close()
    if shard.crc32 is not None and zlib.crc32(data) != shard.crc32:
        raise PqIndexError("a key index shard is damaged (its CRC-32 differs from the "
                           "descriptor's); rebuild the index", path=url)
    try:
        # ParquetFile, not read_table: the latter imports pyarrow.dataset (~250 ms
        # in a fresh process). One thread: shards are decoded side by side.
        table = pq.ParquetFile(pa.BufferReader(data),
                               page_checksum_verification=shard.crc32 is None
                               ).read(use_threads=False)
    except (OSError, pa.ArrowException) as e:
        raise PqIndexError(f"a key index shard cannot be read ({e}); rebuild the index",
                           path=url) from None
    if table.num_rows != shard.entries:
        raise PqIndexError(f"a key index shard holds {table.num_rows} entries, its "
                           f"descriptor says {shard.entries}; rebuild the index", path=url)
    _keep_decoded(key, table)
    return key, table


def _probe_whole(shards: Sequence[Shard], bound: Any, root: str, stats: IOStats,
                 found: KeyLookup, storage_options: Mapping[str, Any] | None
                 ) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(file ids, row groups)`` of the entries of ``shards`` (each read whole, all
    in one wave) whose key satisfies ``bound`` (every probe key of a shard at once)."""
    from pqindex.expr.evaluate import to_arrow_mask
    from pqindex.pools import shared_pool

    each = [IOStats() for _ in shards]
    if len(shards) == 1:
        tables = [_fetch_shard(root, shards[0], storage_options, each[0])[1]]
    else:
        pool = shared_pool("key-index", 16)
        tables = [t for _, t in pool.map(
            lambda i: _fetch_shard(root, shards[i], storage_options, each[i]),
            range(len(shards)))]
    requests = sum(s.requests for s in each)
    # Charged to the manifest's requests: the dataset's own, before any file's.
    stats.add(requests, sum(s.bytes_read for s in each), 1 if requests else 0)
    found.requests += requests
    found.round_trips += 1 if requests else 0
    found.whole += len(shards)
    out = []
    ints = _int_probes(bound)
    for t in tables:
        keys = t.column(_KEY)
        if ints is not None and pa.types.is_integer(keys.type) and keys.num_chunks == 1:
            # Sorted integer keys: every probe binary-searched at once (is_in hashes
            # all of a shard's keys: ~10x the time).
            arr = _numpy_of(keys)
            lo, hi = np.iinfo(arr.dtype).min, np.iinfo(arr.dtype).max
            want = np.array([k for k in ints if lo <= k <= hi], dtype=arr.dtype)
            first = np.searchsorted(arr, want, "left")
            last = np.searchsorted(arr, want, "right")
            rows = np.concatenate([np.arange(a, b) for a, b in zip(
                first.tolist(), last.tolist(), strict=True) if b > a] or [
                np.zeros(0, np.intp)])
            if len(rows):
                out.append((_numpy_of(t.column(_FILE))[rows],
                            _numpy_of(t.column(_ROW_GROUP))[rows]))
            continue
        mask = to_arrow_mask(bound, t)
        if not pc.any(mask).as_py():
            continue
        hit = t.filter(mask)
        out.append((_numpy_of(hit.column(_FILE)), _numpy_of(hit.column(_ROW_GROUP))))
    return out


def _int_probes(bound: Any) -> list[int] | None:
    """The probe values of an ``=`` / ``IN`` on an integer key, when they are plain
    Python ints (else None: the shard is filtered by pyarrow)."""
    preds = _predicates(bound)
    if len(preds) != 1 or preds[0].op not in (LeafOp.EQ, LeafOp.IN):
        return None
    vals = preds[0].values
    if not all(type(v) is int for v in vals):
        return None
    return sorted(set(vals))  # type: ignore[arg-type]


def _probe_pages(shards: Sequence[Shard], probe: Expr, root: str, stats: IOStats,
                 found: KeyLookup, storage_options: Mapping[str, Any] | None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The same for large shards, scanned as a pqindex dataset: each shard's tail,
    then only the pages whose [min, max] holds a probe key (page checksums checked:
    a damaged page must not name the wrong files)."""
    from pqindex.dataset.dataset import Dataset

    files = tuple(DataFile(_join(root, s.path), info=ObjectInfo(s.size, s.etag, mtime=s.mtime))
                  for s in shards)
    ds = Dataset([f.path for f in files], discovery=Discovery(files=files),
                 storage_options=storage_options, verify_checksums=True)
    scan = ds.scan(columns=[_FILE, _ROW_GROUP], where=probe)
    got = scan.to_table()
    rep = scan.report
    stats.add(rep.requests, rep.bytes_read, rep.round_trips)
    found.requests += rep.requests
    found.round_trips += rep.round_trips
    found.pages += rep.pages_read
    return (_numpy_of(got.column(_FILE)), _numpy_of(got.column(_ROW_GROUP)))


def _predicates(bound: Any) -> list[BoundPredicate]:
    from pqindex.plan.tree import leaves

    return [p for p in leaves(bound) if isinstance(p, BoundPredicate)]


def manifest_url(root: str) -> str:
    return _join(root.rstrip("/").rstrip(os.sep), MANIFEST_NAME)


def previous_index(root: str, storage_options: Mapping[str, Any] | None) -> Any:
    """The key index descriptor of the manifest now at ``root`` (None when none)."""
    from pqindex.io.objects import get_object

    return _index_in(get_object(manifest_url(root), storage_options))


def _index_in(raw: bytes | None) -> Any:
    """The key index descriptor in manifest bytes ``raw`` (None: none there)."""
    if raw is None:
        return None
    try:
        m = json.loads(raw)
    except ValueError:
        return None
    return m.get(MANIFEST_KEY) if isinstance(m, dict) else None
