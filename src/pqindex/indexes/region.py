"""The embedded index region: a directory of typed, checksummed blobs in the file body.

The region sits in the file body before the footer (written there by a footer
splice, see ``docs/embedded-indexes.md``); the footer's key/value entry
``pqindex.region = "<absolute offset>:<length>"`` locates it. Other Parquet
readers never look at it. The shape follows Iceberg Puffin: a directory of
blobs, each with a kind, what it indexes, its place and its checksum.

Layout, format version 3.0 (all integers little-endian; offsets relative to the
region's first byte; ``L`` is the region's length, ``D`` the top directory's)::

    offset        size  field
    0             4     magic b"PQIX"
    4             2     major version (u16) = 3
    6             2     minor version (u16) = 0
    8             ...   blob bytes, at the offsets the sub-directories give
    ...           ...   one binary sub-directory per column (``region_dir``)
    L - 20 - D    D     top-level directory: compact UTF-8 JSON (below)
    L - 20        4     trailer: top-level directory length D (u32)
    L - 16        8     trailer: XXH64 (seed 0) of the top-level directory (u64)
    L - 8         2     trailer: major version (u16) = 3; a reader refuses majors
                        other than READ_MAJORS (2 and 3)
    L - 6         2     trailer: minor version (u16) = 0; newer minors only add JSON keys
    L - 4         4     trailer: magic b"PQIX"

    top-level directory = {"columns": [{
        "column": "a.b",                 # dotted leaf path
        "kinds": ["bloom", "distinct"],  # the sub-directory's kind codes index this
        "scopes": ["page", "row_group"], # present scopes: prune without reading
        "blobs": 812,                    # entries in the sub-directory
        "offset": 90210, "length": 15000, "xxh64": "9f0c..."  # the sub-directory
    }, ...]}

A sub-directory holds, per blob, kind, scope, row group, page, length, XXH64
and properties as little-endian arrays (offsets implied: ascending, gaps only
at listed jumps); ``region_dir`` has its layout. A new major version because
2.0's minors promise only added JSON keys; 2.0 regions (one JSON directory,
an entry per blob: 73 KB for 425 page blobs, read by every query) still read.

Top-level directory and trailer end the region, next to the footer, so the
tail read that found the footer usually holds them: opening a region then
costs no request (else one, for trailer, directory and the 4 KiB before it,
where small sub-directories lie). A column's sub-directory is read, checked
and decoded when the column is first used (``open_columns`` reads several in
one request). The header only identifies the region; a reader checks it when
the region's first bytes are at hand and never reads it just for that.
Version 1 regions (directory first) are refused as an unknown version.

Reading is lazy: ``read_region`` reads trailer and top-level directory only;
entries are decoded per column when the column is first asked about; each
blob is read (``pf.read_bytes``), checked against its XXH64 and kept the first
time it is used (``Region.blob``, ``Region.evidence``); blobs of one unit, and
their unread neighbours of the same column and scope, in one request. Blob
bytes at hand (the tail buffer) are checked as their column's entries are
validated. Large "bloom" blobs are probed instead: their header and one 32-byte
block per value looked up (``probe_ranges`` says which, for a planner's wave).

Damage never raises out of ``Region.parse`` / ``read_region`` (unless
``strict=True``): a bad trailer (magic, version), header (when at hand) or
directory checksum ignores the whole region; a bad sub-directory (checksum,
counts, bounds) drops that column's indexes; a bad blob (offset or length
outside the region, malformed entry) drops that blob, and so does a wrong
checksum, found when the blob is read; each with a message in
``Region.warnings``. Lengths are checked before slicing; no more than the
region's bytes are ever held.
"""

from __future__ import annotations

import json
import struct
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import xxhash

from pqindex.errors import PqIndexError, UserInputError
from pqindex.format.file import ParquetFile
from pqindex.format.schema import LeafColumn, Schema
from pqindex.indexes.base import REGISTRY, Blob, IndexKind, Scope
from pqindex.indexes.encoding import RegionError, RegionVersionError
from pqindex.indexes.region_dir import (
    _HEADER,
    _TRAILER,
    HEADER_SIZE,
    MAGIC,
    READ_MAJORS,
    TRAILER_SIZE,
    VERSION,
    BlobEntry,
    ColumnDirectory,
    decode_column,
    encode_region,
    legacy_entry,
    parse_columns,
)
from pqindex.indexes.region_probe import (
    PROBE_MIN_BYTES,
    probe_blocks,
    probe_evidence,
    probe_header_length,
)

__all__ = [
    "HEADER_SIZE",
    "MAGIC",
    "PROBE_MIN_BYTES",
    "REGION_KEY",
    "TRAILER_SIZE",
    "VERSION",
    "BlobEntry",
    "Region",
    "encode_region",
    "read_region",
    "region_key_value",
]

REGION_KEY = "pqindex.region"
# Reading blobs lazily: unread bytes between two wanted blobs worth reading to save a
# request, and how many bytes of neighbouring blobs (same column and scope) to read
# along with a wanted one.
GAP_BYTES = 4096
COALESCE_BYTES = 64 * 1024
# Opening a region whose trailer is not buffered: the first read takes this many
# bytes before the trailer too, enough for most directories.
SPECULATIVE_DIRECTORY_BYTES = 16 * 1024
# Reading the top-level directory (format 3.0) costs a request: it takes this many
# bytes before it too, where the sub-directories of a small region lie.
SUBDIRECTORY_AHEAD_BYTES = 4096
# Kinds whose evidence depends on the blob's bytes (and the column) only.
_BYTES_ONLY = frozenset({"distinct"})


def _xxh64(data: bytes | memoryview) -> int:
    return xxhash.xxh64_intdigest(data, 0)


# ---------------------------------------------------------------- writing


def region_key_value(offset: int, length: int) -> str:
    """The footer value that locates a region written at absolute ``offset``."""
    return f"{offset}:{length}"


# ---------------------------------------------------------------- reading


def _where(entry: BlobEntry) -> str:
    unit = {Scope.FILE: "file", Scope.ROW_GROUP: f"row group {entry.row_group}",
            Scope.PAGE: f"row group {entry.row_group} page {entry.page}"}[entry.scope]
    return f"{entry.kind} blob for column {entry.column!r} ({unit})"


def _gives_evidence(name: str) -> bool:
    """Whether a kind's ``evidence`` needs the blob at all (an "hll" sketch gives none)."""
    factory = REGISTRY.get(name)
    return factory is not None and bool(getattr(factory, "gives_evidence", True))


def _known_evidence(kinds: Iterable[str]) -> set[str]:
    """The kinds among ``kinds`` this reader has and that give evidence."""
    return {k for k in set(kinds) if k in REGISTRY and _gives_evidence(k)}


Fetch = Callable[[int, int], bytes]  # (offset relative to the region, length) -> bytes


# A column name no directory holds (asked by a name the aliases lack).
_NO_COLUMN = "\x00no column"


class Region:
    """A parsed region: its directory entries and, on demand, each blob's bytes and evidence.

    The region may hold only its directory and trailer: blob bytes outside the
    bytes given to ``parse`` are read with ``fetch`` the first time they are
    needed (``blob``, ``evidence``), checked against their XXH64 then, and kept.
    A blob whose checksum does not match is dropped (it leaves ``blobs``) with a
    message in ``warnings``.
    """

    def __init__(self, data: bytes, version: tuple[int, int], entries: Sequence[BlobEntry],
                 warnings: list[str], *, region_offset: int = 0, ignored: bool = False,
                 schema: Schema | None = None, length: int | None = None,
                 fetch: Fetch | None = None, verified: Mapping[int, bytes] | None = None,
                 strict: bool = False, pending: Sequence[Any] = (),
                 blob_end: int | None = None,
                 held: Callable[[int, int], bool] | None = None,
                 columns: Sequence[ColumnDirectory] = ()) -> None:
        # ``data``: the region's last bytes (blob bytes in it are served from it).
        self._data = data
        self._length = len(data) if length is None else length
        self._base = self._length - len(data)  # region offset of data[0]
        self._fetch = fetch
        self._held = held  # whether blob bytes are at hand elsewhere (the tail buffer)
        self._strict = strict
        self.version = version
        # Entries by directory position. ``pending`` holds raw directory entries not
        # validated yet: a column's are validated when it is first asked about (a
        # point lookup on one column never parses the other columns' hundreds).
        self._entries: dict[int, BlobEntry] = dict(enumerate(entries))
        self._pending: dict[str | None, list[tuple[int, Any]]] = {}
        first = len(self._entries)
        for k, raw in enumerate(pending):
            col = raw.get("column") if isinstance(raw, dict) else None
            self._pending.setdefault(col if isinstance(col, str) else None, []).append(
                (first + k, raw))
        # Format 3.0: per-column sub-directories not read yet, and the directory
        # position of each one's first entry.
        self._columns: dict[str, tuple[int, ColumnDirectory]] = {}
        first += len(pending)
        for cd in columns:
            self._columns[cd.column] = (first, cd)
            first += cd.count
        self._sub_bytes: dict[str, bytes] = {}  # sub-directories read ahead (open_columns)
        self._blob_end = self._length - TRAILER_SIZE if blob_end is None else blob_end
        self._index: dict[int, int] = {}
        self._bytes: dict[int, bytes] = dict(verified or {})  # checked blob bytes
        self._dropped: set[int] = set()
        self._blobs: tuple[BlobEntry, ...] | None = None
        self.warnings = warnings
        self.region_offset = region_offset
        self.ignored = ignored  # the whole region was unusable
        self.schema = schema
        self.requests = 0  # fetches made for blob bytes
        self._by_unit: dict[tuple[str, Scope, int | None, int | None], list[int]] = {}
        # Blobs that give evidence, per (column, scope), in region order: the
        # neighbours worth fetching along with one of them.
        self._siblings: dict[tuple[str, Scope], list[int]] = {}
        self._position: dict[int, int] = {}
        self._evidence: dict[int, Any] = {}
        self._kinds: dict[str, IndexKind] = {}
        self._same: dict[tuple[str, str, int, bytes], tuple[LeafColumn, Any]] = {}
        self._probed: set[int] = set()  # entries whose evidence probes block by block
        # Probed Bloom headers found valid, per leaf (kept alive beside its answers).
        self._headers: dict[int, tuple[LeafColumn, dict[tuple[bytes, int], int]]] = {}
        self._lock = threading.RLock()
        # Top-level name a caller asks by -> name the directory holds (``alias_columns``).
        self._aliases: dict[str, str] | None = None
        self._add(list(self._entries))

    def alias_columns(self, names: Mapping[str, str]) -> None:
        """Be asked by other top-level column names: ``names`` maps each name a caller
        uses to the one the directory holds (a lake table reads a file whose columns it
        renamed, ``dataset/tables/mapping.py``); a name it lacks finds nothing."""
        self._aliases = dict(names)

    def _column(self, column: str) -> str:
        if self._aliases is None:
            return column
        head, dot, rest = column.partition(".")
        held = self._aliases.get(head)
        return _NO_COLUMN if held is None else held + dot + rest

    def _add(self, positions: Sequence[int]) -> None:
        """Index validated entries (the lookups by unit and the sibling groups)."""
        if not positions:
            return
        entries = self._entries
        useful = _known_evidence(entries[i].kind for i in positions)
        touched = set()
        for i in positions:
            e = entries[i]
            self._index[id(e)] = i
            self._by_unit.setdefault((e.column, e.scope, e.row_group, e.page), []).append(i)
            if e.kind in useful:
                self._siblings.setdefault((e.column, e.scope), []).append(i)
                touched.add((e.column, e.scope))
        for key in touched:
            group = self._siblings[key]
            group.sort(key=lambda i: entries[i].offset)
            self._position.update((i, k) for k, i in enumerate(group))

    def _materialize(self, column: str | None = None, *, every: bool = False) -> None:
        """Validate the pending directory entries of ``column`` (all with ``every``);
        a malformed one is dropped with a warning (raised when strict)."""
        if not self._pending and not self._columns:
            return
        if not every and column not in self._pending and column not in self._columns:
            return  # opened already: no lock taken (asked once per unit while planning)
        with self._lock:
            keys = list(self._pending) if every else [column]
            added = []
            for key in keys:
                for i, raw in self._pending.pop(key, ()):
                    try:
                        self._entries[i] = legacy_entry(raw, HEADER_SIZE, self._blob_end)
                    except RegionError as e:
                        if self._strict:
                            raise
                        self.warnings.append(f"embedded index: {e.reason}")
                        continue
                    added.append(i)
            for key in list(self._columns) if every else [column]:
                if key is not None and key in self._columns:
                    added += self._open_column(key)
            if added:
                self._blobs = None
                self._add(added)
                # Bytes at hand cost nothing to check: now, as the column is opened.
                # The tail buffer is a suffix: look from the end, stop at the first
                # blob not held (one missed elsewhere is checked when used).
                ents = self._entries
                at_hand = [i for i in added if ents[i].offset >= self._base]
                if self._held is not None:
                    for i in sorted((i for i in added if ents[i].offset < self._base),
                                    key=lambda i: ents[i].offset, reverse=True):
                        if not self._held(ents[i].offset, ents[i].length):
                            break
                        at_hand.append(i)
                self._load(at_hand, neighbours=False)

    def _open_column(self, column: str) -> list[int]:
        """Read, check and decode a column's sub-directory (call with the lock held);
        damage drops the column's indexes with a warning (raises when strict)."""
        first, cd = self._columns.pop(column)
        try:
            data = self._sub_bytes.pop(column, None)
            if data is None:
                data = self._read(cd.offset, cd.length)
            if len(data) != cd.length or _xxh64(data) != cd.checksum:
                raise RegionError(f"column {column!r}: sub-directory checksum mismatch")
            entries = decode_column(data, cd, HEADER_SIZE, self._blob_end)
        except RegionError as e:
            if self._strict:
                raise
            self.warnings.append(f"embedded index: {e.reason}; the column's indexes "
                                 f"are not used")
            return []
        for k, entry in enumerate(entries):
            self._entries[first + k] = entry
        return list(range(first, first + len(entries)))

    def open_columns(self, columns: Iterable[str]) -> None:
        """Read the sub-directories of ``columns`` not read yet in as few requests as
        their layout allows (one when they are neighbours); checked when first used.
        I/O errors propagate."""
        with self._lock:
            todo = sorted((self._columns[c][1] for c in set(columns)
                           if c in self._columns and c not in self._sub_bytes),
                          key=lambda cd: cd.offset)
            runs: list[list[ColumnDirectory]] = []
            for cd in todo:
                if runs and cd.offset - (runs[-1][-1].offset + runs[-1][-1].length) <= GAP_BYTES:
                    runs[-1].append(cd)
                else:
                    runs.append([cd])
            for run in runs:
                lo, hi = run[0].offset, max(cd.offset + cd.length for cd in run)
                buf = self._read(lo, hi - lo)
                for cd in run:
                    self._sub_bytes[cd.column] = buf[cd.offset - lo : cd.offset - lo + cd.length]

    @property
    def size(self) -> int:
        """The region's length in bytes (not what has been read of it)."""
        return self._length

    @property
    def blobs(self) -> tuple[BlobEntry, ...]:
        """Directory entries, without the blobs dropped so far (bad checksums)."""
        blobs = self._blobs
        if blobs is None or self._pending or self._columns:
            self._materialize(every=True)
            blobs = tuple(self._entries[i] for i in sorted(self._entries)
                          if i not in self._dropped)
            self._blobs = blobs
        return blobs

    # ------------------------------------------------------------ parsing

    @classmethod
    def parse(cls, data: bytes, *, file_size: int, region_offset: int,
              schema: Schema | None = None, strict: bool = False, length: int | None = None,
              fetch: Fetch | None = None,
              held: Callable[[int, int], bool] | None = None) -> Region:
        """Validate and index a region read from ``region_offset`` of a ``file_size`` file.

        ``data`` is the region's last bytes: all of it, or (with ``length``, the
        region's full length, and ``fetch``) at least its directory and trailer.
        Directory entries are validated, and blobs whose bytes are in ``data``
        (or where ``held(offset, length)`` says) checked, per column when the
        column is first asked about (``evidence``, ``find``; all of them for
        ``blobs`` and with ``strict``); other blobs when first used. Damage gives a Region with warnings (``ignored`` when nothing is
        usable); ``strict=True`` raises RegionError / RegionVersionError instead.
        """
        data = bytes(data)
        length = len(data) if length is None else max(length, len(data))
        warnings: list[str] = []
        try:
            version, pending, columns, end = cls._directory(data, length, file_size,
                                                            region_offset)
        except (RegionError, RegionVersionError) as e:
            if strict:
                raise
            return cls(b"", (0, 0), (), [f"embedded index region ignored: {e.reason}"],
                       region_offset=region_offset, ignored=True, schema=schema,
                       length=length)
        # Entries are validated per column when first used, and blob bytes held in
        # ``data`` checked when first used too (strict: all of them now).
        region = cls(data, version, (), warnings, region_offset=region_offset,
                     schema=schema, length=length, fetch=fetch, strict=strict,
                     pending=pending, blob_end=end, held=held, columns=columns)
        if strict:
            region._materialize(every=True)
            if region._dropped:
                raise RegionError(region.warnings[-1].removeprefix("embedded index: "))
        return region

    @staticmethod
    def _directory(data: bytes, length: int, file_size: int,
                   region_offset: int) -> tuple[tuple[int, int], list[Any],
                                                list[ColumnDirectory], int]:
        """Version, raw 2.0 entries or 3.0 column items, and where the blob area ends."""
        if region_offset < 4 or region_offset + length > file_size:
            raise RegionError(f"region [{region_offset}, {region_offset + length}) lies "
                              f"outside the file's {file_size} bytes")
        if length < HEADER_SIZE + TRAILER_SIZE:
            raise RegionError(f"region of {length} bytes is shorter than its "
                              f"{HEADER_SIZE}-byte header and {TRAILER_SIZE}-byte trailer")
        if len(data) == length:  # the header is at hand: check it (never read for that)
            magic, major, minor = _HEADER.unpack_from(data, 0)
            if magic != MAGIC:
                raise RegionError(f"region starts with {magic!r}, expected {MAGIC!r}")
            if major not in READ_MAJORS:
                raise RegionVersionError(f"region format version {major}.{minor}; this "
                                         f"reader knows major versions {READ_MAJORS}")
        if len(data) < TRAILER_SIZE:
            raise RegionError(f"only {len(data)} bytes of the region's trailer were read")
        dir_len, dir_sum, major, minor, magic = _TRAILER.unpack_from(
            data, len(data) - TRAILER_SIZE)
        if magic != MAGIC:
            raise RegionError(f"region ends with {magic!r}, expected {MAGIC!r} (region "
                              f"truncated or overwritten?)")
        if major not in READ_MAJORS:
            raise RegionVersionError(f"region format version {major}.{minor}; this reader "
                                     f"knows major versions {READ_MAJORS}")
        if HEADER_SIZE + dir_len + TRAILER_SIZE > length:
            raise RegionError(f"directory of {dir_len} bytes does not fit in the region's "
                              f"{length} bytes")
        if dir_len + TRAILER_SIZE > len(data):
            raise RegionError(f"only {len(data)} of the region's last "
                              f"{dir_len + TRAILER_SIZE} bytes (directory and trailer) "
                              f"were read")
        directory = memoryview(data)[len(data) - TRAILER_SIZE - dir_len:
                                     len(data) - TRAILER_SIZE]
        if _xxh64(directory) != dir_sum:
            raise RegionError("directory checksum mismatch")
        try:
            parsed = json.loads(bytes(directory).decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise RegionError("directory is not valid JSON") from None
        end = length - TRAILER_SIZE - dir_len
        if major == 2:
            if not isinstance(parsed, dict) or not isinstance(parsed.get("blobs"), list):
                raise RegionError("directory has no 'blobs' list")
            return (major, minor), parsed["blobs"], [], end
        columns, end = parse_columns(parsed, HEADER_SIZE, end)
        return (major, minor), [], columns, end

    # ------------------------------------------------------------ blob bytes

    def _position_of(self, entry: BlobEntry) -> int:
        i = self._index.get(id(entry))
        if i is None:
            self._materialize(entry.column)
            for k, e in self._entries.items():
                if e == entry:
                    return k
            raise UserInputError(f"{_where(entry)} is not an entry of this region")
        return i

    def _with_neighbours(self, wanted: list[int]) -> list[int]:
        """``wanted`` and the unread evidence blobs of the same column and scope next to
        them in the region, up to ``COALESCE_BYTES`` more (one request instead of many)."""
        chosen = set(wanted)
        budget = COALESCE_BYTES
        entries = self._entries
        # Runs of consecutive wanted siblings grow at their two ends only: linear,
        # where walking out from each wanted blob was quadratic.
        by_group: dict[tuple[str, Scope], set[int]] = {}
        for i in wanted:
            e = entries[i]
            k = self._position.get(i)
            if k is not None and (e.column, e.scope) in self._siblings:
                by_group.setdefault((e.column, e.scope), set()).add(k)
        for key, ks in by_group.items():
            group = self._siblings[key]
            order = sorted(ks)
            starts = [k for k in order if k - 1 not in ks]
            for a in starts:
                b = a
                while b + 1 in ks:
                    b += 1
                for step, j in ((1, b + 1), (-1, a - 1)):
                    first, last = entries[group[a]], entries[group[b]]
                    lo, hi = first.offset, last.offset + last.length
                    while 0 <= j < len(group):
                        n = group[j]
                        ne = entries[n]
                        if n in chosen or n in self._bytes or n in self._dropped \
                                or ne.length > budget:
                            break
                        gap = ne.offset - hi if step > 0 else lo - (ne.offset + ne.length)
                        if gap > GAP_BYTES:
                            break
                        chosen.add(n)
                        budget -= ne.length
                        lo, hi = min(lo, ne.offset), max(hi, ne.offset + ne.length)
                        j += step
        return sorted(chosen, key=lambda i: entries[i].offset)

    def _load(self, wanted: Sequence[int], *, neighbours: bool = True) -> None:
        """Read, check and keep the bytes of blobs ``wanted`` (call with the lock held)."""
        todo = [i for i in wanted if i not in self._bytes and i not in self._dropped]
        if not todo:
            return
        order = self._with_neighbours(todo) if neighbours else sorted(
            todo, key=lambda i: self._entries[i].offset)
        runs: list[list[int]] = []
        run_end = -1
        for i in order:
            e = self._entries[i]
            if runs and e.offset - run_end <= GAP_BYTES:
                runs[-1].append(i)
                run_end = max(run_end, e.offset + e.length)
            else:
                runs.append([i])
                run_end = e.offset + e.length
        for run in runs:
            lo = min(self._entries[i].offset for i in run)
            hi = max(self._entries[i].offset + self._entries[i].length for i in run)
            try:
                buf = self._read(lo, hi - lo)
            except RegionError as err:
                for i in run:
                    self._drop(i, err.reason)
                continue
            for i in run:
                e = self._entries[i]
                blob = buf[e.offset - lo : e.offset - lo + e.length]
                if len(blob) != e.length or _xxh64(blob) != e.checksum:
                    self._drop(i, "checksum mismatch, blob dropped")
                else:
                    self._bytes[i] = blob

    def _read(self, offset: int, length: int) -> bytes:
        if length == 0:
            return b""
        if offset >= self._base:  # in the bytes given to parse
            return self._data[offset - self._base : offset - self._base + length]
        if self._fetch is None:
            raise RegionError("blob bytes were not read with the region and it has no "
                              "way to fetch them")
        self.requests += 1
        return bytes(self._fetch(offset, length))

    def _drop(self, i: int, reason: str) -> None:
        self._dropped.add(i)
        self._blobs = None
        message = f"{_where(self._entries[i])}: {reason}"
        self.warnings.append(f"embedded index: {message}")

    # ------------------------------------------------------------ access

    def blob(self, entry: BlobEntry) -> Blob:
        """The blob of a directory entry, with its bytes.

        May read the file (the first time a blob outside the bytes read with the
        region is asked for). RegionError when its bytes fail their checksum (the
        blob is then dropped, with a warning); I/O errors propagate.
        """
        i = self._position_of(entry)
        with self._lock:
            self._load([i], neighbours=False)
            data = self._bytes.get(i)
        if data is None:
            raise RegionError(f"{_where(entry)}: checksum mismatch, blob dropped")
        return Blob(entry.kind, entry.column, entry.scope, entry.row_group, entry.page,
                    data, entry.properties)

    def find(self, *, kind: str | None = None, column: str | None = None,
             scope: Scope | None = None) -> list[BlobEntry]:
        """Directory entries, filtered. May read the sub-directories of the columns
        (format 3.0) whose kinds and scopes can match, not others."""
        if column is not None:
            column = self._column(column)
        if column is not None or not self._pending:
            wanted = [c for c, (_, cd) in self._columns.items()
                      if (column is None or c == column) and (kind is None or kind in cd.kinds)
                      and (scope is None or scope in cd.scopes)]
            self.open_columns(wanted)
            for c in wanted:
                self._materialize(c)
            if column is not None:
                self._materialize(column)  # a 2.0 column
            entries = [self._entries[i] for i in sorted(self._entries)
                       if i not in self._dropped]
        else:
            entries = list(self.blobs)
        return [e for e in entries if (kind is None or e.kind == kind)
                and (column is None or e.column == column)
                and (scope is None or e.scope == scope)]

    def _kind(self, name: str) -> IndexKind | None:
        if name not in self._kinds:
            factory = REGISTRY.get(name)
            if factory is None:
                return None
            self._kinds[name] = factory()
        return self._kinds[name]

    def evidence(self, scope: Scope, column: str, row_group: int | None = None,
                 page: int | None = None, *, leaf: LeafColumn | None = None) -> list[Any]:
        """Evidence objects (``match(pred) -> Match``) for one unit of one column.

        ``leaf`` defaults to the column of the schema given to ``parse``; without
        either nothing is returned. The unit's blobs are read (together, with
        unread neighbours of the same column and scope when that saves requests)
        and decoded on first request and kept; a blob that fails its checksum or
        to decode is skipped with a warning. May read the file; I/O errors propagate.
        """
        return self.evidence_of_units(scope, column, [(row_group, page)], leaf=leaf)[0]

    def evidence_of_units(self, scope: Scope, column: str,
                          units: Sequence[tuple[int | None, int | None]], *,
                          leaf: LeafColumn | None = None) -> list[list[Any]]:
        """``evidence`` of several units ``(row_group, page)`` of one column, in order:
        the blobs none of them has read yet are read together (a planner asking a row
        group's pages), and the lock is taken once."""
        scope = Scope(scope)
        column = self._column(column)
        self._materialize(column)
        by_unit = self._by_unit
        file_scope, page_scope = scope == Scope.FILE, scope == Scope.PAGE
        per_unit = [by_unit.get((column, scope, None if file_scope else rg,
                                 page if page_scope else None), ()) for rg, page in units]
        if not any(per_unit):
            return [[] for _ in units]
        if leaf is None and self.schema is not None:
            leaf = self.schema.leaf(column)
        if leaf is None:
            return [[] for _ in units]
        with self._lock:
            known = self._evidence
            todo = [i for ixs in per_unit for i in ixs if i not in known]
            if todo:
                todo = list(dict.fromkeys(todo))
                useful = {i for i in todo if self._entries[i].known
                          and _gives_evidence(self._entries[i].kind)}
                probed = {i for i in useful if self._probe_header(i) is not None}
                self._load([i for i in todo if i in useful and i not in probed])
                for i in todo:
                    # A blob to probe may have been read whole meanwhile, as a neighbour
                    # of the blobs just loaded (its checksum checked): decoded then.
                    if i in probed and i not in self._bytes and i not in self._dropped:
                        known[i] = self._probe(i, leaf)
                        self._probed.add(i)
                    else:
                        known[i] = self._decode(i, leaf) if i in useful else None
            return [[ev for ev in (known[i] for i in ixs) if ev is not None]
                    for ixs in per_unit]

    def _probe_header(self, i: int) -> int | None:
        """The header length of a "bloom" blob to probe block by block (its bytes not
        at hand, large enough, its size property consistent), else None."""
        e = self._entries[i]
        if i in self._bytes or self._fetch is None or e.offset >= self._base:
            return None
        return probe_header_length(e)

    def _probe(self, i: int, leaf: LeafColumn) -> Any:
        hlen = self._probe_header(i)
        assert hlen is not None
        e = self._entries[i]
        checked = self._headers.setdefault(id(leaf), (leaf, {}))
        if checked[0] is not leaf:  # another leaf under a reused id
            checked = self._headers[id(leaf)] = (leaf, {})
        return probe_evidence(e, hlen, leaf, self._read, self.warnings, lambda: _where(e),
                              checked[1])

    def probe_ranges(self, scope: Scope, column: str, units: Iterable[tuple[int | None,
                     int | None]], hashes: Sequence[int]) -> list[tuple[int, int]]:
        """File ``(offset, length)`` ranges that looking ``hashes`` up in the probed
        "bloom" blobs of ``column``'s units (``(row_group, page)``) reads: each blob's
        header and the selected blocks. A planner prefetches them in one wave."""
        scope = Scope(scope)
        column = self._column(column)
        self._materialize(column)
        out: list[tuple[int, int]] = []
        base = self.region_offset
        for rg, page in units:
            key = (column, scope, rg if scope != Scope.FILE else None,
                   page if scope == Scope.PAGE else None)
            for i in self._by_unit.get(key, ()):
                # A probed filter is probed again for the next query's values.
                if i in self._dropped or (i in self._evidence and i not in self._probed):
                    continue
                hlen = self._probe_header(i)
                if hlen is None:
                    continue
                out += probe_blocks(self._entries[i], hlen, base, hashes)
        return out

    def _decode(self, i: int, leaf: LeafColumn) -> Any:
        entry = self._entries[i]
        kind = self._kind(entry.kind)
        data = self._bytes.get(i)
        if kind is None or data is None:
            return None  # unknown kind (listed by summary(), never used), or dropped
        same = None
        if entry.kind in _BYTES_ONLY:
            # Page-scope sets repeat (every page of a low-cardinality column holds the
            # same values): equal bytes decode to equal evidence, decoded once.
            same = (entry.kind, entry.column, id(leaf), data)
            found = self._same.get(same)
            if found is not None and found[0] is leaf:
                return found[1]
        blob = Blob(entry.kind, entry.column, entry.scope, entry.row_group, entry.page,
                    data, entry.properties)
        try:
            ev = kind.evidence(leaf, blob)
            if same is not None:
                self._same[same] = (leaf, ev)
            return ev
        except (PqIndexError, ValueError, struct.error, OverflowError) as e:
            reason = e.reason if isinstance(e, PqIndexError) else str(e)
            self.warnings.append(f"embedded index: {_where(entry)} unusable: {reason}")
            return None

    def summary(self) -> dict[str, Any]:
        """Kinds, columns and sizes, for ``pqindex inspect`` (reads no blob; opens every
        column's sub-directory)."""
        kinds: dict[str, dict[str, Any]] = {}
        for e in self.blobs:
            k = kinds.setdefault(e.kind, {"known": e.known, "blobs": 0, "bytes": 0,
                                          "columns": {}})
            k["blobs"] += 1
            k["bytes"] += e.length
            col = k["columns"].setdefault(e.column, {"blobs": 0, "bytes": 0, "scopes": []})
            col["blobs"] += 1
            col["bytes"] += e.length
            if e.scope.value not in col["scopes"]:
                col["scopes"].append(e.scope.value)
        return {
            "offset": self.region_offset,
            "bytes": self.size,
            "version": f"{self.version[0]}.{self.version[1]}",
            "ignored": self.ignored,
            "blobs": len(self.blobs),
            "kinds": kinds,
            "warnings": list(self.warnings),
        }


def _location(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    parts = value.strip().split(":")
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def read_region(pf: ParquetFile, *, strict: bool = False) -> tuple[Region | None, list[str]]:
    """The file's embedded index region and the warnings opening it raised.

    ``(None, [])`` when the footer has no ``pqindex.region`` key; ``(None,
    warnings)`` when the key or the region is unusable; otherwise the Region (whose
    own ``warnings`` list grows as blobs are read and decoded).

    Opening reads the directory and trailer only, which end the region next to
    the footer: no request when the tail buffer holds them (a directory under
    about 60 KiB, with the default tail read), else one for exactly trailer and
    directory (when the trailer is not buffered either, the first read takes
    ``SPECULATIVE_DIRECTORY_BYTES`` before it, and a second one the rest of a
    longer directory). Blobs whose bytes are already buffered are checked now;
    the others are read with ``pf.read_bytes`` when first used. I/O errors propagate.
    """
    kv = pf.key_value_metadata
    if REGION_KEY not in kv:
        return None, []
    where = f"{pf.path}: " if pf.path else ""
    loc = _location(kv[REGION_KEY])
    problem = None
    if loc is None:
        problem = f"footer key {REGION_KEY}={kv[REGION_KEY]!r} is not '<offset>:<length>'"
    else:
        offset, length = loc
        if offset < 4 or offset + length > pf.footer_offset:
            problem = (f"region [{offset}, {offset + length}) lies outside the file's data "
                       f"region [4, {pf.footer_offset})")
        elif length < HEADER_SIZE + TRAILER_SIZE:
            problem = (f"region of {length} bytes is shorter than its {HEADER_SIZE}-byte "
                       f"header and {TRAILER_SIZE}-byte trailer")
    if problem is not None or loc is None:
        if strict:
            raise RegionError(problem or "bad region location", path=pf.path)
        return None, [f"{where}embedded index region ignored: {problem}"]
    offset, length = loc

    def fetch(at: int, n: int) -> bytes:
        return pf.read_bytes(offset + at, n)

    if pf.has_bytes(offset, length):
        data = fetch(0, length)  # all buffered: free
    else:
        if pf.has_bytes(offset + length - TRAILER_SIZE, TRAILER_SIZE):
            data = fetch(length - TRAILER_SIZE, TRAILER_SIZE)  # free
        else:
            n = min(length, TRAILER_SIZE + SPECULATIVE_DIRECTORY_BYTES)
            data = fetch(length - n, n)
        dir_len, _sum, major, _minor, magic = _TRAILER.unpack_from(
            data, len(data) - TRAILER_SIZE)
        need = dir_len + TRAILER_SIZE
        # A hint only: Region.parse checks it all again.
        if magic == MAGIC and len(data) < need <= length - HEADER_SIZE:
            if pf.has_bytes(offset + length - need, need):
                data = fetch(length - need, need)  # free
            else:
                if major == 3:  # small sub-directories, just before, in the same request
                    need = min(length - HEADER_SIZE, need + SUBDIRECTORY_AHEAD_BYTES)
                data = fetch(length - need, need - len(data)) + data
    # Blob bytes already in the tail buffer cost nothing: checked as their column is
    # opened (all now when strict).
    try:
        region = Region.parse(data, file_size=pf.file_size, region_offset=offset,
                              schema=pf.schema, strict=strict, length=length, fetch=fetch,
                              held=lambda at, n: pf.has_bytes(offset + at, n))
    except (RegionError, RegionVersionError) as e:  # strict only
        raise e.located(path=pf.path) from None
    warnings = [f"{where}{w}" for w in region.warnings]
    return (None if region.ignored else region), warnings
