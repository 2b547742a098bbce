"""The embedded index region's directory codec: directory entries, in and out.

Format 3.0 (``region.py`` has the whole layout) splits the directory in two: a
small top-level JSON directory listing, per column, where that column's
sub-directory lies (and which kinds and scopes it holds), and one binary
sub-directory per column, decoded only when a query first touches the column.

A column sub-directory (all integers little-endian)::

    offset  size    field
    0       4       magic b"PQXD"
    4       4       N, entries (u32)
    8       4       J, offset jumps (u32)
    12      4       P, properties header length (u32)
    16      5       widths W0..W4 (u8, each 0, 1, 2, 4 or 8; 0: every value is 0)
    21      N*W0    kind: index into the column's "kinds" in the top-level directory
            N*W1    scope: 0 file, 1 row group, 2 page
            N*W2    row group + 1 (0: none)
            N*W3    page + 1 (0: none)
            N*W4    blob length
            N*8     XXH64 of each blob (u64)
            J*4     jump entry index (u32, strictly increasing, < N)
            J*8     jump gap (u64)
            P       properties header: compact JSON, one item per property key:
                    [key, "i", width] (non-negative ints, stored + 1, 0 absent) or
                    [key, "t", width, [values]] (stored: index + 1 into values)
            N*w     one array per property key, in header order

Entries are in ascending offset order: the first blob starts at the end of the
region header plus its gap, each next one where the previous ended plus its
gap; gaps are 0 except at the listed jumps. Every count is checked against the
sub-directory's length before anything is allocated.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import xxhash

from pqindex.errors import UserInputError
from pqindex.indexes.base import REGISTRY, Blob, Scope
from pqindex.indexes.encoding import RegionError

__all__ = ["HEADER_SIZE", "MAGIC", "READ_MAJORS", "TRAILER_SIZE", "VERSION", "BlobEntry",
           "ColumnDirectory", "decode_column", "encode_column", "encode_region",
           "legacy_entry", "parse_columns"]

MAGIC = b"PQIX"
VERSION = (3, 0)
READ_MAJORS = (2, 3)  # 2.0: one JSON directory; 3.0: per-column sub-directories
HEADER_SIZE = 8
TRAILER_SIZE = 20
_HEADER = struct.Struct("<4sHH")
_TRAILER = struct.Struct("<IQHH4s")

SUB_MAGIC = b"PQXD"
_SUB_HEAD = struct.Struct("<4sIII5B")
_WIDTHS = (0, 1, 2, 4, 8)
MAX_KIND = 128  # longer kind names are damage, not a future kind
_SCOPE_CODES = {Scope.FILE: 0, Scope.ROW_GROUP: 1, Scope.PAGE: 2}
_SCOPE_BY_CODE = (Scope.FILE, Scope.ROW_GROUP, Scope.PAGE)
_SCOPES = {s.value: s for s in Scope}


class BlobEntry(NamedTuple):
    """One directory entry: what a blob indexes and where its bytes are.

    A named tuple, not a dataclass: a column's thousands of page entries are
    built in a quarter of the time."""

    kind: str
    column: str
    scope: Scope
    row_group: int | None
    page: int | None
    offset: int  # relative to the region start
    length: int
    checksum: int  # XXH64 of the blob bytes
    properties: Mapping[str, Any] = MappingProxyType({})

    @property
    def known(self) -> bool:
        """Whether this reader has the kind (unknown kinds are listed, never used)."""
        return self.kind in REGISTRY

    def to_dict(self) -> dict[str, Any]:
        """The entry as printed by ``inspect --json``."""
        return {"kind": self.kind, "column": self.column, "scope": self.scope.value,
                "row_group": self.row_group, "page": self.page, "offset": self.offset,
                "length": self.length, "xxh64": f"{self.checksum:016x}",
                "properties": dict(self.properties), "known": self.known}


@dataclass(frozen=True)
class ColumnDirectory:
    """A top-level directory item: where one column's sub-directory is."""

    column: str
    kinds: tuple[str, ...]
    scopes: frozenset[Scope]
    count: int
    offset: int
    length: int
    checksum: int


# ---------------------------------------------------------------- writing


def _width(values: Sequence[int]) -> int:
    top = max(values, default=0)
    for w in _WIDTHS:
        if top < (1 << (8 * w)):
            return w
    raise ValueError(f"value {top} does not fit in 8 bytes")


def _array(values: Sequence[int], width: int) -> bytes:
    if width == 0:
        return b""
    return np.asarray(values, dtype=np.uint64).astype(f"<u{width}").tobytes()


def encode_column(kinds: Sequence[str], entries: Sequence[tuple[str, Scope, int | None,
                  int | None, int, int, int, Mapping[str, Any]]], start: int) -> bytes:
    """A column's sub-directory. ``entries``: (kind, scope, row_group, page, offset,
    length, xxh64, properties) in ascending, non-overlapping offset order; ``start``
    is where the region's blob area begins. TypeError/ValueError for properties
    that are not plain JSON values."""
    code = {k: i for i, k in enumerate(kinds)}
    n = len(entries)
    cols: list[list[int]] = [[], [], [], [], []]
    sums: list[int] = []
    jumps: list[tuple[int, int]] = []
    end = start
    for i, (kind, scope, rg, page, offset, length, checksum, _props) in enumerate(entries):
        cols[0].append(code[kind])
        cols[1].append(_SCOPE_CODES[scope])
        cols[2].append(0 if rg is None else rg + 1)
        cols[3].append(0 if page is None else page + 1)
        cols[4].append(length)
        sums.append(checksum)
        if offset != end:
            if offset < end:
                raise ValueError("sub-directory entries overlap or are out of order")
            jumps.append((i, offset - end))
        end = offset + length
    widths = [_width(c) for c in cols]
    keys: list[str] = sorted({k for e in entries for k in e[7]})
    header: list[list[Any]] = []
    prop_arrays: list[bytes] = []
    for key in keys:
        raw = [e[7].get(key, _ABSENT) for e in entries]
        if all(v is _ABSENT or (type(v) is int and 0 <= v < (1 << 62)) for v in raw):
            ints = [0 if v is _ABSENT else v + 1 for v in raw]
            w = _width(ints)
            header.append([key, "i", w])
            prop_arrays.append(_array(ints, w))
            continue
        table: list[Any] = []
        seen: dict[str, int] = {}
        idx = []
        for v in raw:
            if v is _ABSENT:
                idx.append(0)
                continue
            token = json.dumps(v, sort_keys=True, allow_nan=False)
            if token not in seen:
                seen[token] = len(table)
                table.append(v)
            idx.append(seen[token] + 1)
        w = _width(idx)
        header.append([key, "t", w, table])
        prop_arrays.append(_array(idx, w))
    props = json.dumps(header, separators=(",", ":"), allow_nan=False).encode("utf-8")
    parts = [_SUB_HEAD.pack(SUB_MAGIC, n, len(jumps), len(props), *widths)]
    parts += [_array(c, w) for c, w in zip(cols, widths, strict=True)]
    parts.append(_array(sums, 8))
    parts.append(_array([j for j, _ in jumps], 4))
    parts.append(_array([g for _, g in jumps], 8))
    parts.append(props)
    parts += prop_arrays
    return b"".join(parts)


_ABSENT: Any = object()


def _xxh64(data: bytes | memoryview) -> int:
    return xxhash.xxh64_intdigest(data, 0)


def _check_blob(b: Blob) -> None:
    if not isinstance(b.kind, str) or not b.kind or len(b.kind) > MAX_KIND:
        raise UserInputError(f"blob kind must be a non-empty string of at most "
                             f"{MAX_KIND} characters, not {b.kind!r}")
    scope = Scope(b.scope)
    want_rg = scope != Scope.FILE
    want_page = scope == Scope.PAGE
    if (b.row_group is not None) != want_rg or (b.page is not None) != want_page:
        raise UserInputError(
            f"{b.kind} blob for {b.column!r}: scope {scope.value} with row_group="
            f"{b.row_group} page={b.page}", column=b.column)
    for what, v in (("row_group", b.row_group), ("page", b.page)):
        if v is not None and (not isinstance(v, int) or v < 0):
            raise UserInputError(f"{b.kind} blob: {what} must be a non-negative int",
                                 column=b.column)


def encode_region(blobs: Sequence[Blob]) -> bytes:
    """The region bytes for ``blobs`` (in the given order); UserInputError for a bad blob."""
    for b in blobs:
        _check_blob(b)
    per_column: dict[str, list[tuple[Any, ...]]] = {}
    kinds: dict[str, list[str]] = {}
    pos = HEADER_SIZE
    for b in blobs:
        scope = Scope(b.scope)
        per_column.setdefault(b.column, []).append(
            (b.kind, scope, b.row_group, b.page, pos, len(b.data), _xxh64(b.data),
             dict(b.properties or {})))
        if b.kind not in kinds.setdefault(b.column, []):
            kinds[b.column].append(b.kind)
        pos += len(b.data)
    subs, items = [], []
    for column, entries in per_column.items():
        try:
            sub = encode_column(kinds[column], entries, HEADER_SIZE)
        except (TypeError, ValueError) as err:
            raise UserInputError(f"blob properties must be plain JSON values: {err}",
                                 column=column) from None
        items.append({"column": column, "kinds": kinds[column],
                      "scopes": sorted({e[1].value for e in entries}), "blobs": len(entries),
                      "offset": pos, "length": len(sub), "xxh64": f"{_xxh64(sub):016x}"})
        subs.append(sub)
        pos += len(sub)
    d = json.dumps({"columns": items}, separators=(",", ":")).encode("utf-8")
    if len(d) > 0xFFFFFFFF or pos > 2**62:
        raise UserInputError(f"region directory of {len(d)} bytes is too large")
    header = _HEADER.pack(MAGIC, VERSION[0], VERSION[1])
    trailer = _TRAILER.pack(len(d), _xxh64(d), VERSION[0], VERSION[1], MAGIC)
    return b"".join([header, *(bytes(b.data) for b in blobs), *subs, d, trailer])


# ---------------------------------------------------------------- reading


def parse_columns(parsed: Any, start: int, end: int) -> tuple[list[ColumnDirectory], int]:
    """The top-level directory's column items and where the blob area ends (the first
    sub-directory); RegionError for anything malformed (the directory is checksummed:
    damage there is not partial)."""
    if not isinstance(parsed, dict) or not isinstance(parsed.get("columns"), list):
        raise RegionError("directory has no 'columns' list")
    out = []
    blob_end = end
    names: set[str] = set()
    for item in parsed["columns"]:
        if not isinstance(item, dict):
            raise RegionError("directory column item is not an object")
        column, kinds, scopes = item.get("column"), item.get("kinds"), item.get("scopes")
        if not isinstance(column, str) or column in names:
            raise RegionError(f"directory column item has no valid column: {column!r}")
        names.add(column)
        if not isinstance(kinds, list) or not all(
                isinstance(k, str) and 0 < len(k) <= MAX_KIND for k in kinds):
            raise RegionError(f"column {column!r}: no valid 'kinds' list")
        if not isinstance(scopes, list) or not all(s in _SCOPES for s in scopes):
            raise RegionError(f"column {column!r}: no valid 'scopes' list")
        count: Any = item.get("blobs")
        offset: Any = item.get("offset")
        length: Any = item.get("length")
        if not (_nonneg(count) and _nonneg(offset) and _nonneg(length)):
            raise RegionError(f"column {column!r}: no valid blobs/offset/length")
        if offset < start or offset + length > end:
            raise RegionError(f"column {column!r}: sub-directory [{offset}, "
                              f"{offset + length}) lies outside [{start}, {end})")
        checksum = _hex64(item.get("xxh64"), f"column {column!r} sub-directory")
        blob_end = min(blob_end, offset)
        out.append(ColumnDirectory(column, tuple(kinds), frozenset(_SCOPES[s] for s in scopes),
                                   count, offset, length, checksum))
    return out, blob_end


def _nonneg(v: Any) -> bool:
    return type(v) is int and v >= 0  # bool is an int subclass: refused too


def _hex64(digest: Any, what: str) -> int:
    try:
        if not isinstance(digest, str) or len(digest) != 16:
            raise ValueError
        return int(digest, 16)
    except ValueError:
        raise RegionError(f"{what} has no valid xxh64: {digest!r}") from None


def _take(buf: bytes, pos: int, n: int, width: int) -> tuple[Any, int]:
    if width == 0:
        return np.zeros(n, dtype=np.uint64), pos
    arr = np.frombuffer(buf, dtype=f"<u{width}", count=n, offset=pos).astype(np.uint64)
    return arr, pos + n * width


def decode_column(data: bytes, cd: ColumnDirectory, start: int,
                  blob_end: int) -> list[BlobEntry]:
    """The entries of a column's sub-directory bytes (already checksum-checked);
    RegionError for anything malformed or outside the blob area ``[start, blob_end)``."""
    col = cd.column
    if len(data) < _SUB_HEAD.size:
        raise RegionError(f"column {col!r}: sub-directory of {len(data)} bytes is too short")
    magic, n, jumps, plen, *widths = _SUB_HEAD.unpack_from(data, 0)
    if magic != SUB_MAGIC:
        raise RegionError(f"column {col!r}: sub-directory starts with {magic!r}")
    if n != cd.count:
        raise RegionError(f"column {col!r}: sub-directory holds {n} entries, the "
                          f"directory says {cd.count}")
    if any(w not in _WIDTHS for w in widths):
        raise RegionError(f"column {col!r}: sub-directory field widths {widths} invalid")
    fixed = _SUB_HEAD.size + n * (sum(widths) + 8) + jumps * 12 + plen
    if fixed > len(data):  # counts checked against the bytes before anything is allocated
        raise RegionError(f"column {col!r}: sub-directory counts (N={n}, J={jumps}, "
                          f"P={plen}) need {fixed} bytes, it has {len(data)}")
    pos = _SUB_HEAD.size
    arrays = []
    for w in widths:
        a, pos = _take(data, pos, n, w)
        arrays.append(a)
    sums, pos = _take(data, pos, n, 8)
    jidx, pos = _take(data, pos, jumps, 4)
    jgap, pos = _take(data, pos, jumps, 8)
    try:
        header = json.loads(data[pos:pos + plen].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise RegionError(f"column {col!r}: properties header is not valid JSON") from None
    pos += plen
    props = _properties(header, data, pos, n, col)
    kinds, scopes, rgs, pages, lengths = arrays
    limit = blob_end - start
    if n and (int(kinds.max()) >= len(cd.kinds) or int(scopes.max()) > 2
              or int(lengths.max()) > limit):
        raise RegionError(f"column {col!r}: sub-directory kind, scope or length out of range")
    if jumps and (int(jidx.max()) >= n or int(jgap.max()) > limit
                  or bool(np.any(np.diff(jidx.astype(np.int64)) <= 0))):
        raise RegionError(f"column {col!r}: sub-directory offset jumps out of range")
    gaps = np.zeros(n, dtype=np.uint64)
    gaps[jidx.astype(np.int64)] = jgap
    # Each term is at most the blob area's size and n is bounded by the bytes: no overflow.
    ends = np.cumsum(gaps + lengths, dtype=np.uint64) + np.uint64(start)
    if n and int(ends[-1]) > blob_end:
        raise RegionError(f"column {col!r}: blobs reach offset {int(ends[-1])}, past the "
                          f"blob area's end {blob_end}")
    # Scope, row group and page agree: row group for all but file scope, page for page.
    if n and bool(np.any((rgs > 0) != (scopes > 0)) or np.any((pages > 0) != (scopes == 2))):
        raise RegionError(f"column {col!r}: sub-directory scope, row group and page disagree")
    names = [cd.kinds[k] for k in kinds.tolist()]
    scope_l = [_SCOPE_BY_CODE[s] for s in scopes.tolist()]
    rg_l = [v - 1 if v else None for v in rgs.tolist()]
    page_l = [v - 1 if v else None for v in pages.tolist()]
    return list(map(BlobEntry, names, [col] * n, scope_l, rg_l, page_l, (ends - lengths).tolist(),
                    lengths.tolist(), sums.tolist(), props))


def _properties(header: Any, data: bytes, pos: int, n: int, col: str) -> list[dict[str, Any]]:
    bad = RegionError(f"column {col!r}: sub-directory properties malformed")
    if not isinstance(header, list):
        raise bad
    keys: list[str] = []
    columns: list[list[Any]] = []
    complete = True  # every entry has every key: dicts built by zip
    for item in header:
        if not isinstance(item, list) or len(item) < 3 or not isinstance(item[0], str):
            raise bad
        key, how, w = item[0], item[1], item[2]
        if w not in _WIDTHS or pos + n * w > len(data):
            raise bad
        values, pos = _take(data, pos, n, w)
        complete = complete and (n == 0 or int(values.min()) > 0)
        if how == "i":
            columns.append([v - 1 if v else _ABSENT for v in values.tolist()])
        elif how == "t" and len(item) == 4 and isinstance(item[3], list):
            table = [_ABSENT, *item[3]]
            if n and int(values.max()) >= len(table):
                raise bad
            columns.append([table[v] for v in values.tolist()])
        else:
            raise bad
        keys.append(key)
    if pos != len(data):
        raise RegionError(f"column {col!r}: sub-directory has {len(data) - pos} bytes "
                          f"more than its counts say")
    if not keys:
        return [{} for _ in range(n)]
    if complete:
        return [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)]
    return [{k: v for k, v in zip(keys, row, strict=True) if v is not _ABSENT}
            for row in zip(*columns, strict=True)]


def _int(e: Mapping[str, Any], key: str, *, optional: bool = False) -> int | None:
    v = e.get(key)
    if v is None and optional:
        return None
    if type(v) is not int or v < 0:  # bool is an int subclass: refused too
        raise RegionError(f"directory entry has no valid {key!r}: {v!r}")
    return v


def legacy_entry(e: Any, start: int, end: int) -> BlobEntry:
    """A validated format-2.0 JSON directory entry; RegionError says what is wrong."""
    if not isinstance(e, dict):
        raise RegionError("directory entry is not an object")
    kind, column, scope_name = e.get("kind"), e.get("column"), e.get("scope")
    if not isinstance(kind, str) or not kind or len(kind) > MAX_KIND:
        raise RegionError(f"directory entry has no valid kind: {kind!r}")
    if not isinstance(column, str):
        raise RegionError(f"{kind} entry has no valid column: {column!r}")
    scope = _SCOPES.get(scope_name) if isinstance(scope_name, str) else None
    if scope is None:
        raise RegionError(f"{kind} entry for {column!r} has unknown scope {scope_name!r}")
    row_group = _int(e, "row_group", optional=True)
    page = _int(e, "page", optional=True)
    if (row_group is not None) != (scope != Scope.FILE) or (page is not None) != (
            scope == Scope.PAGE):
        raise RegionError(f"{kind} entry for {column!r}: scope {scope.value} with "
                          f"row_group={row_group} page={page}")
    offset, length = _int(e, "offset"), _int(e, "length")
    assert offset is not None and length is not None
    if offset < start or offset + length > end:
        raise RegionError(f"{kind} blob for {column!r} at [{offset}, {offset + length}) lies "
                          f"outside the region's blob area [{start}, {end})")
    checksum = _hex64(e.get("xxh64"), f"{kind} entry for {column!r}")
    props = e.get("properties", {})
    if not isinstance(props, dict):
        raise RegionError(f"{kind} entry for {column!r}: properties are not an object")
    return BlobEntry(kind, column, scope, row_group, page, offset, length, checksum, props)
