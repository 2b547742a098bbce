"""Rewrite everything after a Parquet file's data pages: the index tail.

A file is ``PAR1``, the column chunks' pages, then whatever the writer put
after them (ColumnIndexes, OffsetIndexes, Bloom filters), then the footer.
``rewrite`` copies the pages untouched (``[0, data_end)``) and writes a new
tail after them, in this order::

    ColumnIndexes · OffsetIndexes · Bloom filters · embedded index region · footer

Every ColumnChunk's ``column_index_offset/length``, ``offset_index_offset/length``
and ``meta_data.bloom_filter_offset/length`` are recomputed; the rest of the
footer, unknown Thrift fields included, is re-encoded as it was decoded.

What a :class:`Tail` does not mention is carried over from the source when
``keep_existing`` is True (the default) and left out when it is False:

* a chunk without an entry in ``column_indexes`` / ``offset_indexes`` /
  ``bloom_filters`` keeps its existing structure (an entry of None drops it);
* ``region=None`` keeps the existing embedded index region, if any;
  ``drop_region=True`` removes it whatever ``keep_existing`` says;
* ``key_value`` always merges into the footer's key/value list (None removes a
  key); keys not named stay, whatever ``keep_existing`` says.

The region is located by the footer entry ``pqindex.region`` =
``"<absolute offset>:<length>"``, which only ``rewrite`` sets.

A structure that lies inside the copied range (arrow-rs, for one, can write a
row group's Bloom filters right after its pages) stays where it is when kept.

Crash safety: the new file is built under a temporary name in the target's
directory (``.{name}.pqindex-tmp-<random>``), fsynced, renamed over the target
with ``os.replace`` and the directory fsynced; a crash at any moment leaves the
target either the complete original or the complete new file. The temporary
file is locked (``flock``) while in use, so the next rewrite of the same target
removes temporaries whose writer died, and only those.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import glob
import os
import secrets
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

from pqindex.errors import CorruptFileError, PqIndexError, UnsupportedError, UserInputError
from pqindex.format.file import MAGIC, ParquetFile
from pqindex.format.layout import chunk_range
from pqindex.format.structs import (
    BloomFilterHeader,
    ColumnChunk,
    ColumnIndex,
    FileMetaData,
    KeyValue,
    OffsetIndex,
    SortingColumn,
)
from pqindex.format.thrift import ThriftError, decode

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "REGION_KEY",
    "RewriteError",
    "RewriteResult",
    "SourceChangedError",
    "Tail",
    "data_end",
    "read_region",
    "region_locator",
    "rewrite",
]

REGION_KEY = "pqindex.region"
TMP_MARKER = ".pqindex-tmp-"
_COPY_CHUNK = 8 * 1024 * 1024
# copy_file_range errors that mean "not here, copy by hand" rather than a real failure.
_NO_COPY_RANGE = frozenset({errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL,
                            errno.EPERM, errno.EBADF})

# Called with a phase name ("copy" after each copied chunk, "tail", "synced",
# "replaced") so tests can stall or disturb a rewrite at a chosen moment.
_test_hook: Callable[[str], None] | None = None

Key = tuple[int, int]


class RewriteError(PqIndexError):
    """A rewrite failed (no space, no permission, file missing); nothing was changed."""


class SourceChangedError(RewriteError):
    """The source file changed while it was being rewritten; nothing was replaced."""


@dataclass
class Tail:
    """What the new tail holds; see the module doc for what is not mentioned.

    Keys are ``(row group, leaf column)``. ``bloom_filters`` values are a whole
    Bloom filter: BloomFilterHeader bytes followed by the bitset.
    ``sorting_columns`` sets ``RowGroup.sorting_columns`` per row group (an empty
    list removes it); None leaves every row group as it is.
    """

    column_indexes: dict[Key, ColumnIndex | None] = field(default_factory=dict)
    offset_indexes: dict[Key, OffsetIndex] = field(default_factory=dict)
    bloom_filters: dict[Key, bytes | None] = field(default_factory=dict)
    region: bytes | None = None
    drop_region: bool = False
    key_value: dict[str, str | None] = field(default_factory=dict)
    sorting_columns: dict[int, list[SortingColumn]] | None = None


@dataclass(frozen=True)
class RewriteResult:
    """Where the new file put things. Sizes are bytes written by this rewrite."""

    path: str
    size: int
    data_end: int
    region: tuple[int, int] | None  # (absolute offset, length)
    column_index_bytes: int
    offset_index_bytes: int
    bloom_filter_bytes: int
    footer_offset: int
    footer_bytes: int


def data_end(pf: ParquetFile) -> int:
    """Where the last column chunk's pages end: everything before it is copied as is."""
    end = len(MAGIC)
    for rg in range(pf.num_row_groups):
        for col in range(len(pf.schema.leaves)):
            start, length = chunk_range(pf.column_meta(rg, col))
            end = max(end, start + length)
    if end > pf.footer_offset:
        raise CorruptFileError(
            f"column data ends at {end}, after the footer at {pf.footer_offset}", path=pf.path)
    return end


def region_locator(pf: ParquetFile) -> tuple[int, int] | None:
    """``(offset, length)`` of the file's embedded index region, checked; None without one."""
    value = pf.key_value_metadata.get(REGION_KEY)
    if REGION_KEY not in pf.key_value_metadata:
        return None
    try:
        off_s, len_s = (value or "").split(":")
        off, n = int(off_s), int(len_s)
    except ValueError:
        raise CorruptFileError(
            f"footer key {REGION_KEY!r} is {value!r}, not '<offset>:<length>'",
            path=pf.path) from None
    if off < len(MAGIC) or n < 0 or off + n > pf.footer_offset:
        raise CorruptFileError(
            f"embedded index region [{off}, {off + n}) lies outside the data region "
            f"[4, {pf.footer_offset})", path=pf.path, offset=off)
    return off, n


def read_region(pf: ParquetFile) -> bytes | None:
    """The embedded index region's bytes, or None."""
    loc = region_locator(pf)
    return None if loc is None else pf.read_bytes(*loc)


# ---------------------------------------------------------------- building the tail


class _Builder:
    """Collects the new tail's bytes; offsets are absolute in the new file."""

    def __init__(self, pf: ParquetFile, base: int) -> None:
        self.pf = pf
        self.base = base
        self.buf = bytearray()

    @property
    def pos(self) -> int:
        return self.base + len(self.buf)

    def put(self, data: bytes) -> tuple[int, int]:
        at = self.pos
        self.buf += data
        return at, len(data)

    def carry(self, offset: int, length: int, what: str, key: Key) -> tuple[int, int]:
        """Keep an existing structure: in place inside the copied range, else copied."""
        rg, col = key
        if offset < len(MAGIC) or length <= 0 or offset + length > self.pf.footer_offset:
            raise CorruptFileError(
                f"{what} [{offset}, {offset + length}) lies outside the data region "
                f"[4, {self.pf.footer_offset})", path=self.pf.path, row_group=rg,
                column=self.pf.leaf(col).name, offset=offset)
        if offset + length <= self.base:
            return offset, length
        return self.put(self.pf.read_bytes(offset, length))


def _check_bloom(raw: bytes, path: str, key: Key, name: str) -> None:
    try:
        header, hlen = decode(BloomFilterHeader, raw)
    except ThriftError as e:
        raise UserInputError(f"Bloom filter bytes do not start with a header: {e.reason}",
                             path=path, row_group=key[0], column=name) from None
    if header.numBytes is None or hlen + header.numBytes != len(raw):
        raise UserInputError(
            f"Bloom filter of {len(raw)} bytes, its header says {hlen} + {header.numBytes}",
            path=path, row_group=key[0], column=name)


def _check_offset_index(pf: ParquetFile, oi: OffsetIndex, key: Key) -> None:
    rg, col = key
    start, length = chunk_range(pf.column_meta(rg, col))
    for i, loc in enumerate(oi.page_locations or []):
        if (loc.offset is None or loc.compressed_page_size is None
                or loc.offset < start or loc.offset + loc.compressed_page_size > start + length):
            raise UserInputError(
                f"offset index page {i} does not lie inside the column chunk "
                f"[{start}, {start + length})", path=pf.path, row_group=rg,
                column=pf.leaf(col).name)
    if not oi.page_locations:
        raise UserInputError("offset index lists no pages", path=pf.path, row_group=rg,
                             column=pf.leaf(col).name)


def _build(pf: ParquetFile, tail: Tail, base: int, keep: bool
           ) -> tuple[_Builder, FileMetaData, dict[str, int], tuple[int, int] | None]:
    """The new tail's bytes (without the footer) and the footer that points at them."""
    md = copy.deepcopy(pf.metadata)
    b = _Builder(pf, base)
    sizes = {"column_index": 0, "offset_index": 0, "bloom": 0}
    nrg, ncol = pf.num_row_groups, len(pf.schema.leaves)
    for mapping in (tail.column_indexes, tail.offset_indexes, tail.bloom_filters):
        for k in mapping:
            if not (0 <= k[0] < nrg and 0 <= k[1] < ncol):
                raise UserInputError(f"no column chunk {k} (the file has {nrg} row groups "
                                     f"of {ncol} columns)", path=pf.path)
    chunks: list[tuple[Key, ColumnChunk]] = [
        ((rg, col), cc) for rg, group in enumerate(md.row_groups or [])
        for col, cc in enumerate(group.columns or [])]

    has_oi: set[Key] = set()
    for k, cc in chunks:
        if k in tail.offset_indexes or (keep and cc.offset_index_offset is not None
                                        and cc.offset_index_length):
            has_oi.add(k)
    for k, cc in chunks:
        name = pf.leaf(k[1]).name
        start = b.pos
        loc: tuple[int, int] | None = None
        if k in tail.column_indexes:
            ci = tail.column_indexes[k]
            if ci is not None:
                n = len(ci.null_pages or [])
                oi = tail.offset_indexes.get(k)
                if oi is None and keep and k in has_oi:
                    oi = pf.offset_index(*k)
                if oi is not None and n != len(oi.page_locations or []):
                    raise UserInputError(
                        f"column index has {n} pages, the offset index "
                        f"{len(oi.page_locations or [])}", path=pf.path, row_group=k[0],
                        column=name)
                loc = b.put(ci.encode())
        elif keep and cc.column_index_offset is not None and cc.column_index_length:
            loc = b.carry(cc.column_index_offset, cc.column_index_length, "column index", k)
        if loc is not None and k not in has_oi:
            raise UserInputError("a column index needs an offset index", path=pf.path,
                                 row_group=k[0], column=name)
        cc.column_index_offset, cc.column_index_length = loc if loc else (None, None)
        sizes["column_index"] += b.pos - start
    for k, cc in chunks:
        start = b.pos
        loc = None
        if k in tail.offset_indexes:
            oi = tail.offset_indexes[k]
            _check_offset_index(pf, oi, k)
            loc = b.put(oi.encode())
        elif keep and cc.offset_index_offset is not None and cc.offset_index_length:
            loc = b.carry(cc.offset_index_offset, cc.offset_index_length, "offset index", k)
        cc.offset_index_offset, cc.offset_index_length = loc if loc else (None, None)
        sizes["offset_index"] += b.pos - start
    for k, cc in chunks:
        cmd = cc.meta_data
        assert cmd is not None  # checked when the file was opened
        start = b.pos
        loc = None
        if k in tail.bloom_filters:
            raw = tail.bloom_filters[k]
            if raw is not None:
                _check_bloom(raw, pf.path, k, pf.leaf(k[1]).name)
                loc = b.put(raw)
        elif keep and cmd.bloom_filter_offset is not None:
            if cmd.bloom_filter_length:
                loc = b.carry(cmd.bloom_filter_offset, cmd.bloom_filter_length, "Bloom filter", k)
            else:
                # No length in the footer: the header says how long the bitset is.
                bf = pf.bloom_filter(*k)
                assert bf is not None
                loc = b.carry(cmd.bloom_filter_offset,
                              len(bf.header.encode()) + len(bf.bitset), "Bloom filter", k)
        if loc is None:
            cmd.bloom_filter_offset = cmd.bloom_filter_length = None
        else:
            cmd.bloom_filter_offset, cmd.bloom_filter_length = loc
        sizes["bloom"] += b.pos - start

    region: tuple[int, int] | None = None
    if tail.region is not None:
        if tail.drop_region:
            raise UserInputError("Tail sets both region and drop_region", path=pf.path)
        region = b.put(tail.region)
    elif keep and not tail.drop_region:
        old = region_locator(pf)
        if old is not None:
            region = old if old[0] + old[1] <= base else b.put(pf.read_bytes(*old))

    if REGION_KEY in tail.key_value:
        raise UserInputError(f"footer key {REGION_KEY!r} is set by rewrite, not by the caller",
                             path=pf.path)
    updates = dict(tail.key_value)
    updates[REGION_KEY] = None if region is None else f"{region[0]}:{region[1]}"
    md.key_value_metadata = _merge_key_value(md.key_value_metadata, updates)
    if tail.sorting_columns is not None:
        groups = md.row_groups or []
        for rg, cols in tail.sorting_columns.items():
            if not 0 <= rg < len(groups):
                raise UserInputError(f"row group {rg} does not exist", path=pf.path)
            groups[rg].sorting_columns = list(cols) or None
    return b, md, sizes, region


def _merge_key_value(kvs: list[KeyValue] | None, updates: dict[str, str | None]
                     ) -> list[KeyValue] | None:
    """Existing entries in their order, values replaced or removed, new keys appended."""
    out: list[KeyValue] = []
    done: set[str] = set()
    for kv in kvs or []:
        key = kv.key or ""
        if key not in updates:
            out.append(kv)
        elif updates[key] is not None and key not in done:
            kv.value = updates[key]
            out.append(kv)
            done.add(key)
    for key, value in updates.items():
        if value is not None and key not in done:
            out.append(KeyValue(key=key, value=value))
    return out if out or kvs is not None else None


# ---------------------------------------------------------------- file handling


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _copy_range(src: int, dst: int, length: int) -> None:
    """Copy ``src[0:length]`` to ``dst`` at 0, in-kernel when the platform allows."""
    done = 0
    fast = hasattr(os, "copy_file_range")
    while done < length:
        n = min(_COPY_CHUNK, length - done)
        got = 0
        if fast:
            try:
                got = os.copy_file_range(src, dst, n, done, done)
            except OSError as e:
                if e.errno not in _NO_COPY_RANGE:
                    raise
                fast = False
        if not fast:
            os.lseek(src, done, os.SEEK_SET)
            os.lseek(dst, done, os.SEEK_SET)
            with open(src, "rb", closefd=False) as fin, open(dst, "wb", closefd=False) as fout:
                shutil.copyfileobj(_Limited(fin, n), fout, 1024 * 1024)
                fout.flush()
            got = os.lseek(dst, 0, os.SEEK_CUR) - done
        if got <= 0:
            raise OSError(errno.EIO, f"source ended at {done} bytes, expected {length}")
        done += got
        if _test_hook is not None:
            _test_hook("copy")
    os.lseek(dst, length, os.SEEK_SET)


class _Limited:
    """A reader that stops after ``n`` bytes (copyfileobj copies to EOF)."""

    def __init__(self, f: IO[bytes], n: int) -> None:
        self.f = f
        self.left = n

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        want = self.left if size < 0 else min(size, self.left)
        data = self.f.read(want)
        self.left -= len(data)
        return data


def _lock(fd: int, block: bool) -> bool:
    if fcntl is None:  # pragma: no cover
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def _remove_stale(directory: str, name: str) -> None:
    """Remove temporaries of earlier rewrites of ``name`` whose writer is gone."""
    pattern = os.path.join(glob.escape(directory), glob.escape(f".{name}{TMP_MARKER}") + "*")
    for stale in glob.glob(pattern):
        try:
            fd = os.open(stale, os.O_RDONLY)
        except OSError:
            continue
        try:
            # A live writer holds the lock; a killed one released it with its process.
            if _lock(fd, block=False):
                with contextlib.suppress(OSError):
                    os.unlink(stale)
        finally:
            os.close(fd)


def _create_temp(directory: str, name: str, mode: int) -> tuple[str, int]:
    while True:
        tmp = os.path.join(directory, f".{name}{TMP_MARKER}{secrets.token_hex(8)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                     mode)
        _lock(fd, block=True)
        # A concurrent cleanup may have unlinked it between create and lock.
        try:
            if os.path.samestat(os.stat(tmp), os.fstat(fd)):
                return tmp, fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _describe(e: OSError) -> str:
    if e.errno == errno.ENOSPC:
        return "no space left on device"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if e.errno == errno.EROFS:
        return "read-only file system"
    return e.strerror or str(e)


def _stamp(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def rewrite(src_path: str | os.PathLike[str], tail: Tail,
            dst_path: str | os.PathLike[str] | None = None, *,
            keep_existing: bool = True, durable: bool | None = None) -> RewriteResult:
    """Write ``src_path``'s pages plus a new tail to ``dst_path`` (default: in place).

    ``durable`` fsyncs the new file and the directory before and after the rename;
    by default it does whenever an existing file is replaced (a user's data), and
    not for a brand-new file (as a plain pyarrow write doesn't): either way a crash
    leaves the old file or the complete new one, never a partial one.

    Raises :class:`RewriteError` (naming the file) when the rewrite cannot be
    done, :class:`SourceChangedError` when the source changed meanwhile,
    UnsupportedError for encrypted files, CorruptFileError for damaged ones,
    UserInputError for a Tail that does not fit the file. On any error the
    target is untouched and no temporary file is left.
    """
    src = os.fspath(src_path)
    dst = os.fspath(dst_path) if dst_path is not None else src
    if "://" in src or "://" in dst:
        raise UnsupportedError("rewrite works on local files only", path=src)
    if os.path.islink(dst):
        # Replace the file the link points to; the link stays a link.
        dst = os.path.realpath(dst)
    directory = os.path.dirname(os.path.abspath(dst))
    if durable is None:
        durable = os.path.exists(dst)
    name = os.path.basename(dst)
    try:
        src_fd = os.open(src, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise RewriteError("no such file", path=src) from None
    except OSError as e:
        raise RewriteError(f"cannot open: {_describe(e)}", path=src) from None
    tmp: str | None = None
    out_fd: int | None = None
    try:
        before = os.fstat(src_fd)
        with ParquetFile.open(src) as pf:
            if pf.file_size != before.st_size:
                raise SourceChangedError("the file changed while it was opened", path=src)
            base = data_end(pf)
            builder, md, sizes, region = _build(pf, tail, base, keep_existing)
        footer = md.encode()
        if len(footer) >= 1 << 32:
            raise UnsupportedError(f"footer of {len(footer)} bytes does not fit in 4 bytes",
                                   path=src)
        footer_offset = builder.pos
        builder.buf += footer + struct.pack("<I", len(footer)) + MAGIC

        with contextlib.suppress(OSError):
            _remove_stale(directory, name)
        try:
            tmp, out_fd = _create_temp(directory, name, 0o600)
        except OSError as e:
            raise RewriteError(f"cannot create a temporary file in {directory}: {_describe(e)}",
                               path=dst) from None
        try:
            # The new file takes the permissions and owner of the one it replaces.
            old = os.stat(dst) if dst != src and os.path.exists(dst) else before
            os.fchmod(out_fd, old.st_mode & 0o7777)
            if hasattr(os, "fchown") and (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
                # Only root may give a file away; a group we belong to is allowed.
                with contextlib.suppress(PermissionError):
                    os.fchown(out_fd, old.st_uid, old.st_gid)
                with contextlib.suppress(PermissionError):
                    os.fchown(out_fd, -1, old.st_gid)
                os.fchmod(out_fd, old.st_mode & 0o7777)  # chown may clear set-id bits
            _copy_range(src_fd, out_fd, base)
            _write_all(out_fd, builder.buf)
            if _test_hook is not None:
                _test_hook("tail")
            if durable:
                os.fsync(out_fd)
        except OSError as e:
            raise RewriteError(f"writing {tmp} failed: {_describe(e)}", path=dst) from None
        if _test_hook is not None:
            _test_hook("synced")
        try:
            after = os.stat(src)
        except OSError:
            raise SourceChangedError("the file disappeared during the rewrite", path=src) from None
        if _stamp(after) != _stamp(before):
            raise SourceChangedError(
                "the file changed during the rewrite (size or modification time); "
                "nothing was replaced", path=src)
        try:
            os.replace(tmp, dst)
        except OSError as e:
            raise RewriteError(f"cannot replace the file: {_describe(e)}", path=dst) from None
        tmp = None
        # Hadoop's local file system keeps a checksum sidecar (.name.crc) that no
        # longer matches: Spark refuses to read the file until it is gone.
        d, name = os.path.split(dst)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(d, f".{name}.crc"))
        if _test_hook is not None:
            _test_hook("replaced")
        if durable:
            _fsync_dir(directory)
    except BaseException:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    finally:
        if out_fd is not None:
            os.close(out_fd)
        os.close(src_fd)
    return RewriteResult(
        path=dst,
        size=footer_offset + len(footer) + 8,
        data_end=base,
        region=region,
        column_index_bytes=sizes["column_index"],
        offset_index_bytes=sizes["offset_index"],
        bloom_filter_bytes=sizes["bloom"],
        footer_offset=footer_offset,
        footer_bytes=len(footer),
    )
