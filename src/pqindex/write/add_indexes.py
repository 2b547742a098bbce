"""Adding indexes to Parquet files that other writers produced.

``add_indexes`` rewrites each file's index tail (``write.tail.rewrite``): the
data pages stay byte for byte where they are, and the tail gets

* the embedded index region for the kinds asked for (``distinct``, ``bloom``,
  ``zone_maps``, ``hll``). It replaces any region the file already has, so
  running twice never stacks regions; a call that asks for no kind keeps the
  existing region as it is. ``drop=True`` removes the region (and its footer
  key) and changes nothing else;
* ColumnIndex string bounds truncated to ``truncate`` bytes (64 for True);
* with ``page_index="add"``, a ColumnIndex and an OffsetIndex for every column
  chunk that has no OffsetIndex (DuckDB, fastparquet, older Spark). Chunks
  that already have one keep theirs.

Retrofitting a page index reads each chunk once, walks its page headers and
decodes every data page on its own (``scan.page_decode.decode_one_page``). A
page's first row is known when a page cannot split a row: always for a column
outside any list or map (one value per row), and from ``num_rows`` for a data
page v2 (the spec forbids splitting rows across v2 pages). A list or map
column with v1 pages may split a row across pages, so it is skipped with a
reason. Bounds follow the column order the footer declares (TYPE_ORDER only):
integers signed or unsigned as their logical type says, strings and binaries
byte-wise, floats without NaN (counted in ``nan_counts``; a zero min is written
-0.0 and a zero max +0.0, as the spec asks). A page holding only NaN has no
bounds, so that chunk gets an OffsetIndex alone, as pyarrow does. Columns
without a usable order (INT96, INTERVAL, a file without ``column_orders``)
also get an OffsetIndex alone.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pqindex.dataset.discovery import pattern_files, split_pattern
from pqindex.errors import (
    CorruptFileError,
    PqIndexError,
    UnsupportedError,
    UserInputError,
    located,
    public_api,
)
from pqindex.format.file import ParquetFile
from pqindex.format.layout import chunk_range
from pqindex.format.pages import PageInfo, walk_pages
from pqindex.format.plain import encode_plain
from pqindex.format.schema import BoundaryOrder, LeafColumn, PageType, PhysicalType
from pqindex.format.structs import ColumnIndex, OffsetIndex, PageLocation
from pqindex.format.truncate import DEFAULT_CAP, truncate_column_index
from pqindex.format.value_type import Kind
from pqindex.format.values import BoundOrder, Comparison, bound_order
from pqindex.indexes.base import Scope
from pqindex.indexes.build import build_blobs
from pqindex.indexes.leaf_values import numbers, storage
from pqindex.indexes.region import encode_region
from pqindex.io.source import IOStats, listing_failed
from pqindex.scan.page_decode import decode_one_page
from pqindex.write.tail import Tail, region_locator, rewrite
from pqindex.write.writer import index_kinds

__all__ = ["DEFAULT_BLOOM_SCOPE", "IndexResult", "IndexTarget", "bloom_scopes",
           "column_names", "fill_page_indexes", "index_file", "index_targets", "is_data_name", "new_region",
           "requested_kinds", "truncation_cap"]

PageIndexMode = Literal["keep", "add"]
Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
# Called after each file: (files done, files in all, that file's result).
Progress = Callable[[int, int, "IndexResult"], None]

_DATA_PAGES = (PageType.DATA_PAGE, PageType.DATA_PAGE_V2)
# Scopes of the embedded Bloom filters ``bloom=`` builds; see ``bloom_scopes``.
DEFAULT_BLOOM_SCOPE: tuple[str, ...] = ("row_group", "page")
_FLOAT_DTYPES = {Kind.FLOAT16: "<f2", Kind.FLOAT: "<f4", Kind.DOUBLE: "<f8"}


@dataclass
class IndexResult:
    """What indexing one file did."""

    path: str
    output: str
    bytes_before: int
    bytes_after: int
    region_bytes: int  # the embedded region in the new file, 0 without one
    indexes: dict[str, list[str]] = field(default_factory=dict)  # kind -> columns with blobs
    page_index_added: int = 0  # chunks that got an OffsetIndex
    column_indexes_added: int = 0  # of those, chunks that also got a ColumnIndex
    column_indexes_truncated: int = 0  # existing ColumnIndexes whose bounds were cut
    region_dropped: bool = False
    rewritten: bool = True  # False when there was nothing to change in place
    skipped: dict[str, str] = field(default_factory=dict)  # column -> why
    seconds: float = 0.0
    # Object stores: bytes sent to the store, and bytes the store copied itself.
    bytes_uploaded: int = 0
    bytes_copied_server_side: int = 0
    # Why the object was streamed down and up instead of copied by the store ("": not).
    streamed_because: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as ``pqindex index --json`` prints it."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class IndexTarget:
    """One file to index and where its result goes (the same path when in place)."""

    source: str
    output: str


# ---------------------------------------------------------------- finding files


def is_data_name(name: str) -> bool:
    return not name.startswith(("_", "."))


def _walk(root: str) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=listing_failed):
        dirnames[:] = sorted(d for d in dirnames if is_data_name(d))
        out += [os.path.join(dirpath, f) for f in sorted(filenames) if is_data_name(f)]
    return out


@public_api
def index_targets(paths: Paths, output: str | os.PathLike[str] | None = None) -> list[IndexTarget]:
    """The files ``paths`` name: files as given, directories walked recursively
    (names starting with ``_`` or ``.`` skipped). With ``output``, each result goes
    to ``output`` under its name relative to the directory given (a file given by
    itself keeps its base name). UserInputError for a path that does not exist or
    two files that would land on the same output."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise UserInputError("no paths given")
    out_dir = None if output is None else os.fspath(output)
    targets: list[IndexTarget] = []
    seen: dict[str, str] = {}
    for item in items:
        p = os.fspath(item)
        if "://" in p:
            raise UnsupportedError("indexes are added to local files only", path=p)
        p = os.path.expanduser(p)
        glob = split_pattern(p)
        if os.path.isdir(p):
            pairs = [(f, os.path.relpath(f, p)) for f in _walk(p)]
        elif os.path.isfile(p):
            pairs = [(p, os.path.basename(p))]
        elif glob is not None:  # a pattern: its files, named relative to its base
            matched = pattern_files(*glob, False, None, IOStats())
            if not matched:
                raise UserInputError("no data files match the pattern", path=p)
            pairs = [(df.path, os.path.relpath(df.path, glob[0] or ".")) for df in matched]
        else:
            raise UserInputError("no such file or directory", path=p)
        for src, rel in pairs:
            dst = src if out_dir is None else os.path.join(out_dir, rel)
            key = os.path.realpath(dst)
            if key in seen:
                if seen[key] == os.path.realpath(src):
                    continue  # the same file named twice
                raise UserInputError(
                    f"{seen[key]} and {src} would both be written to {dst}", path=src
                )
            seen[key] = os.path.realpath(src)
            targets.append(IndexTarget(src, dst))
    return targets


# ---------------------------------------------------------------- page index retrofit


@dataclass
class _Retrofit:
    offset_index: OffsetIndex | None = None
    column_index: ColumnIndex | None = None
    reason: str | None = None  # why the chunk got less than both


def _page_rows(
    pf: ParquetFile, rg: int, leaf: LeafColumn, pages: list[PageInfo]
) -> list[int] | str:
    """Rows per data page, or why they are not known."""
    rows = []
    for p in pages:
        v2 = p.header.data_page_header_v2
        if not leaf.nested:
            rows.append(p.num_values or 0)
        elif v2 is not None and v2.num_rows is not None:
            rows.append(v2.num_rows)
        else:
            return "pages may not start at row boundaries (list or map column, data page v1)"
    if sum(rows) != pf.row_group_rows(rg):
        return f"pages hold {sum(rows)} rows, the row group {pf.row_group_rows(rg)}"
    return rows


def _leaf_values(arr: pa.Array) -> pa.Array:
    """The leaf's values out of the decoded top-level field (one leaf only)."""
    while True:
        t = arr.type
        if pa.types.is_struct(t):
            arr = arr.flatten()[0]  # parent nulls become leaf nulls
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            arr = arr.flatten()  # values of non-null lists only
        elif pa.types.is_dictionary(t):
            arr = arr.dictionary_decode()
        else:
            return arr


def _decimal_bytes(leaf: LeafColumn, order: BoundOrder, value: Any) -> bytes | None:
    vt = order.value_type
    if vt.physical != PhysicalType.BYTE_ARRAY:
        return encode_plain(vt, value)
    unscaled = int(value.scaleb(vt.scale or 0))
    # BYTE_ARRAY decimals: big-endian two's complement, shortest form.
    return unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True)


def _bounds(
    leaf: LeafColumn, order: BoundOrder, values: pa.Array
) -> tuple[bytes, bytes, int | None] | str:
    """PLAIN ``(min, max, nan count)`` of a page's non-null values (at least one), or why not."""
    vt = order.value_type
    if vt.kind == Kind.BOOL:
        mm = pc.min_max(values)
        return (bytes([int(mm["min"].as_py())]), bytes([int(mm["max"].as_py())]), None)
    stored = storage(leaf, values)
    if stored is None:
        return f"bounds of {vt.name} values are not supported"
    if vt.kind in _FLOAT_DTYPES:
        nums = numbers(vt, stored)
        assert nums is not None
        nan = np.isnan(nums)
        finite = nums[~nan]
        if finite.size == 0:
            return "a page holds only NaN values"
        lo, hi = finite.min(), finite.max()
        # A zero bound may stand for both zeros: -0.0 below, +0.0 above.
        lo = -0.0 if lo == 0 else lo
        hi = 0.0 if hi == 0 else hi
        dt = _FLOAT_DTYPES[vt.kind]
        return (np.array([lo], dt).tobytes(), np.array([hi], dt).tobytes(), int(nan.sum()))
    nums = numbers(vt, stored)
    if nums is not None:
        return (
            nums.min(keepdims=True).astype(nums.dtype.newbyteorder("<")).tobytes(),
            nums.max(keepdims=True).astype(nums.dtype.newbyteorder("<")).tobytes(),
            None,
        )
    mm = pc.min_max(stored)
    lo_v, hi_v = mm["min"].as_py(), mm["max"].as_py()
    if vt.kind == Kind.DECIMAL:
        lo_b, hi_b = _decimal_bytes(leaf, order, lo_v), _decimal_bytes(leaf, order, hi_v)
        if lo_b is None or hi_b is None:
            return f"bounds of {vt.name} values are not supported"
        return lo_b, hi_b, None
    if vt.kind in (Kind.STRING, Kind.BINARY, Kind.UUID):
        return bytes(lo_v), bytes(hi_v), None
    return f"bounds of {vt.name} values are not supported"


def _boundary_order(order: BoundOrder, ci: ColumnIndex) -> int:
    """ASCENDING when mins and maxes never go down, DESCENDING when never up."""
    assert ci.null_pages is not None and ci.min_values is not None and ci.max_values is not None
    vt = order.value_type
    keys = [
        (order.key(vt.decode(lo)), order.key(vt.decode(hi)))
        for null, lo, hi in zip(ci.null_pages, ci.min_values, ci.max_values, strict=True)
        if not null
    ]
    pairs = list(itertools.pairwise(keys))
    if all(a[0] <= b[0] and a[1] <= b[1] for a, b in pairs):
        return BoundaryOrder.ASCENDING
    if all(a[0] >= b[0] and a[1] >= b[1] for a, b in pairs):
        return BoundaryOrder.DESCENDING
    return BoundaryOrder.UNORDERED


def _retrofit(pf: ParquetFile, rg: int, col: int) -> _Retrofit:
    """An OffsetIndex and, where the column's order allows, a ColumnIndex for one chunk."""
    leaf = pf.leaf(col)
    pages = [p for p in walk_pages(pf, rg, col) if p.page_type in _DATA_PAGES]
    if not pages:
        return _Retrofit(reason="the chunk has no data pages")
    rows = _page_rows(pf, rg, leaf, pages)
    if isinstance(rows, str):
        return _Retrofit(reason=rows)
    first = np.concatenate([[0], np.cumsum(rows)[:-1]]).tolist()
    oi = OffsetIndex(
        page_locations=[
            PageLocation(offset=p.offset, compressed_page_size=p.total_length, first_row_index=r)
            for p, r in zip(pages, first, strict=True)
        ]
    )
    order = bound_order(leaf)
    if order.comparison is None:
        return _Retrofit(oi, reason=f"offset index only: {order.reason}")
    if order.comparison not in (
        Comparison.SIGNED,
        Comparison.UNSIGNED,
        Comparison.BYTES,
        Comparison.FLOAT,
    ):
        return _Retrofit(
            oi, reason=f"offset index only: {order.comparison.value} bounds are not computed"
        )
    start, length = chunk_range(pf.column_meta(rg, col))
    fetched = {start: pf.read_bytes(start, length)}
    ci = ColumnIndex(
        null_pages=[],
        min_values=[],
        max_values=[],
        null_counts=[],
        nan_counts=[] if order.value_type.is_float else None,
    )
    assert ci.null_pages is not None and ci.min_values is not None
    assert ci.max_values is not None and ci.null_counts is not None
    for i, (page, n) in enumerate(zip(pages, rows, strict=True)):
        values = _leaf_values(decode_one_page(pf, rg, col, page, n, fetched))
        present = len(values) - values.null_count
        ci.null_counts.append((page.num_values or 0) - present)
        nan: int | None = 0
        if present == 0:
            lo, hi = b"", b""  # the spec's bounds for a null page
        else:
            bounds = _bounds(leaf, order, pc.drop_null(values))
            if isinstance(bounds, str):
                return _Retrofit(oi, reason=f"offset index only: page {i}: {bounds}")
            lo, hi, nan = bounds
        ci.null_pages.append(present == 0)
        ci.min_values.append(lo)
        ci.max_values.append(hi)
        if ci.nan_counts is not None:
            ci.nan_counts.append(nan or 0)
    ci.boundary_order = _boundary_order(order, ci)
    return _Retrofit(oi, ci)


# ---------------------------------------------------------------- one file


def column_names(values: str | Iterable[str]) -> list[str]:
    return [values] if isinstance(values, str) else list(values)


def requested_kinds(indexes: Mapping[str, str | Sequence[str]] | None,
           **named: str | Iterable[str]) -> dict[str, list[str]]:
    """``indexes={kind: columns}`` (any registered kind) merged with the older
    per-kind keywords (``distinct=``, ``bloom=``, ...)."""
    out = index_kinds(indexes)
    for kind, cols in named.items():
        extra = [c for c in column_names(cols) if c not in out.get(kind, [])]
        if extra:
            out.setdefault(kind, []).extend(extra)
    return out


def bloom_scopes(scope: str | Iterable[str]) -> tuple[str, ...]:
    """The scopes of the Bloom filters to build ("file", "row_group", "page"; a string
    may list several, comma-separated); UserInputError for anything else.

    A file-scope filter can only rule out a value the whole file lacks; row-group
    and page filters also skip the row groups and pages that lack it (the default:
    see docs/benchmarks.md, "Bloom filter scope", for the measurement).
    """
    raw = scope.split(",") if isinstance(scope, str) else list(scope)
    names = [str(s).strip() for s in raw if str(s).strip()]
    known = {s.value for s in Scope}
    bad = [n for n in names if n not in known]
    if not names or bad:
        raise UserInputError(
            f"bloom scope must be among file, row_group, page, not {scope!r}")
    return tuple(dict.fromkeys(names))


def truncation_cap(truncate: bool | int) -> int | None:
    if isinstance(truncate, bool):
        return DEFAULT_CAP if truncate else None
    if not isinstance(truncate, int) or truncate < 1:
        raise UserInputError(f"truncate must be True, False or a byte count >= 1, not {truncate!r}")
    return truncate


@public_api
def index_file(
    source: str | os.PathLike[str],
    *,
    output: str | os.PathLike[str] | None = None,
    distinct: str | Iterable[str] = (),
    bloom: str | Iterable[str] = (),
    zone_maps: str | Iterable[str] = (),
    hll: str | Iterable[str] = (),
    truncate: bool | int = True,
    page_index: PageIndexMode = "keep",
    drop: bool = False,
    indexes: Mapping[str, str | Sequence[str]] | None = None,
    bloom_scope: str | Iterable[str] = DEFAULT_BLOOM_SCOPE,
) -> IndexResult:
    """Index one file (see :func:`add_indexes`); ``output`` is the new file's path."""
    t0 = time.perf_counter()
    src = os.fspath(source)
    dst = src if output is None else os.fspath(output)
    kinds = requested_kinds(indexes, distinct=distinct, bloom=bloom, zone_maps=zone_maps, hll=hll)
    options = {"bloom": {"scopes": bloom_scopes(bloom_scope)}}
    if page_index not in ("keep", "add"):
        raise UserInputError(f"page_index must be 'keep' or 'add', not {page_index!r}")
    if drop and (kinds or page_index == "add"):
        raise UserInputError(
            "drop removes the embedded indexes; it takes no index kinds and no page_index='add'"
        )
    cap = truncation_cap(truncate)
    try:
        # What fails while reading the file's pages is the file's damage.
        with located(default=CorruptFileError, path=src):
            return _index_file(src, dst, kinds, cap, page_index, drop, t0, options)
    except PqIndexError as e:
        raise e.located(path=src) from e.__cause__


def _index_file(
    src: str,
    dst: str,
    kinds: dict[str, list[str]],
    cap: int | None,
    page_index: PageIndexMode,
    drop: bool,
    t0: float,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> IndexResult:
    remove_stale_staging(dst)
    tail = Tail()
    with ParquetFile.open(src) as pf:
        result = IndexResult(
            path=src,
            output=dst,
            bytes_before=pf.file_size,
            bytes_after=pf.file_size,
            region_bytes=0,
        )
        old_region = region_locator(pf)
        if drop:
            tail.drop_region = True
            result.region_dropped = old_region is not None
        else:
            fill_page_indexes(pf, tail, result, cap, page_index)
        unchanged = not (
            tail.column_indexes or tail.offset_indexes or kinds or (drop and old_region is not None)
        )
    if unchanged and dst == src:
        result.rewritten = False
        result.region_bytes = old_region[1] if old_region is not None else 0
        result.seconds = time.perf_counter() - t0
        return result
    if dst != src:
        os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    staged = None
    try:
        base = src
        if kinds and tail.offset_indexes:
            # Page-scope blobs follow the page index: build them on a file that has it,
            # so a second run builds the same region.
            staged = _staging_name(dst)
            rewrite(src, tail, staged)
            base, tail = staged, Tail()
        if kinds:
            with ParquetFile.open(base) as pf:
                tail.region = new_region(pf, kinds, result, options)
        done = rewrite(base, tail, dst)
    finally:
        if staged is not None and os.path.exists(staged):
            os.unlink(staged)
    result.bytes_after = done.size
    result.region_bytes = done.region[1] if done.region else 0
    result.seconds = time.perf_counter() - t0
    return result


STAGING_MARKER = ".pqindex-index-"
# A staging file without a pid in its name (older versions) is stale after this long.
STALE_SECONDS = 3600


def _staging_name(dst: str) -> str:
    """``.NAME.pqindex-index-PID-TOKEN``: the pid lets a later run tell it is stale."""
    d, name = os.path.split(os.path.abspath(dst))
    return os.path.join(d, f".{name}{STAGING_MARKER}{os.getpid()}-{secrets.token_hex(4)}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_stale_staging(dst: str) -> list[str]:
    """Remove staging files of earlier runs on ``dst`` whose process is gone (a
    kill -9 mid-run leaves one, as large as the file); return their paths.

    A name carrying a pid is stale when no process has that pid (same machine:
    the directory is local); one without a pid when older than ``STALE_SECONDS``.
    A staging file of a live run is never touched.
    """
    import glob
    import time as _time

    d, name = os.path.split(os.path.abspath(dst))
    removed = []
    prefix = f".{name}{STAGING_MARKER}"
    for path in glob.glob(os.path.join(glob.escape(d), glob.escape(prefix) + "*")):
        rest = os.path.basename(path)[len(prefix):]
        pid_text, sep, _token = rest.partition("-")
        try:
            if sep and pid_text.isdigit():
                stale = int(pid_text) != os.getpid() and not _alive(int(pid_text))
            else:
                stale = _time.time() - os.stat(path).st_mtime > STALE_SECONDS
            if stale:
                os.unlink(path)
                removed.append(path)
        except OSError:
            continue
    return removed


def new_region(pf: ParquetFile, kinds: dict[str, list[str]], result: IndexResult,
            options: Mapping[str, Mapping[str, Any]] | None = None) -> bytes:
    """The new region; an empty one still replaces the old: the call asked for these kinds."""
    blobs = build_blobs(pf, None, kinds, options)
    for kind, cols in kinds.items():
        done = {b.column for b in blobs if b.kind == kind}
        if done:
            result.indexes[kind] = [c for c in cols if c in done]
        for c in cols:
            if c not in done:
                result.skipped.setdefault(c, f"{kind}: no index for this column's type or values")
    return encode_region(blobs)


def fill_page_indexes(
    pf: ParquetFile, tail: Tail, result: IndexResult, cap: int | None, page_index: PageIndexMode
) -> None:
    """Fill ``tail`` with retrofitted page indexes and truncated ColumnIndexes."""
    for rg in range(pf.num_row_groups):
        for leaf in pf.schema.leaves:
            key = (rg, leaf.index)
            cc = pf.column_chunk(rg, leaf.index)
            if cc.offset_index_offset is None and page_index == "add":
                fit = _retrofit(pf, rg, leaf.index)
                if fit.reason is not None:
                    result.skipped.setdefault(leaf.name, f"row group {rg}: {fit.reason}")
                if fit.offset_index is None:
                    continue
                tail.offset_indexes[key] = fit.offset_index
                # None drops a ColumnIndex a chunk without an OffsetIndex may carry.
                ci = fit.column_index
                if ci is not None and cap is not None:
                    ci = truncate_column_index(ci, leaf, cap=cap)
                tail.column_indexes[key] = ci
                result.page_index_added += 1
                result.column_indexes_added += ci is not None
            elif cap is not None and cc.column_index_offset is not None:
                old = pf.column_index(rg, leaf.index)
                if old is None:
                    continue
                cut = truncate_column_index(old, leaf, cap=cap)
                if cut != old:
                    tail.column_indexes[key] = cut
                    result.column_indexes_truncated += 1
