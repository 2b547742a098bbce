"""ParquetFile against real files: the parquet-testing corpus and files from five writers.

The footer is checked field by field against ``pyarrow.parquet.read_metadata``;
page indexes, Bloom filters and dictionary pages against what the writers put
there; and every read is counted through ``IOStats``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import writers
from conftest import CORPUS
from pqindex.errors import PqIndexError, UnsupportedError
from pqindex.format.bloom import plain_bytes
from pqindex.format.file import DEFAULT_TAIL_BYTES, ParquetFile
from pqindex.format.schema import PageType, PhysicalType
from pqindex.io.source import LOCAL_MAX_GAP, IOStats

DATA = CORPUS / "data"
BAD_DATA = CORPUS / "bad_data"


def _is_encrypted_footer(p: Path) -> bool:
    with p.open("rb") as f:
        f.seek(-4, 2)
        return f.read(4) == b"PARE"


CORPUS_FILES = sorted(
    p for p in DATA.rglob("*.parquet") if "encrypt" not in p.name and not _is_encrypted_footer(p)
)
ENCRYPTED_FILES = sorted(
    p for p in DATA.rglob("*encrypt*") if p.is_file() and not p.name.endswith(".json")
)
BAD_FILES = sorted(BAD_DATA.glob("*.parquet"))


def _rel(p: Path) -> str:
    return str(p.relative_to(CORPUS))


def _writer_params(names: tuple[str, ...] = writers.ALL_WRITERS) -> list[Any]:
    return [
        pytest.param(
            n, id=f"writer:{n}", marks=[pytest.mark.spark] if n in writers.SPARK_WRITERS else []
        )
        for n in names
    ]


ALL_SOURCES = [pytest.param(p, id=_rel(p)) for p in CORPUS_FILES] + _writer_params()

# nation.dict-malformed.parquet lists no encodings at all (``encodings=[]``, no
# ``encoding_stats``, no ``dictionary_page_offset``) yet starts with a dictionary
# page: the first page's header must decide (regression test).
DICT_SOURCES = [pytest.param(p, id=_rel(p)) for p in CORPUS_FILES] + _writer_params()


def _path(source: Path | str, written_files: writers.FileCache) -> Path:
    return source if isinstance(source, Path) else written_files[source]


@functools.cache
def _pa_metadata(path: Path) -> Any:
    """pyarrow's FileMetaData, or None when pyarrow can't read the footer."""
    try:
        return pq.read_metadata(path)
    except Exception:
        return None


def _chunk_bounds(cmd: Any) -> tuple[int, int]:
    """[start, end) of a chunk's pages, from pyarrow's ColumnChunkMetaData."""
    starts = [o for o in (cmd.data_page_offset, cmd.dictionary_page_offset) if o]
    start = min(starts)
    return start, start + cmd.total_compressed_size


def _chunks(pf: ParquetFile) -> Iterator[tuple[int, int]]:
    for rg in range(pf.num_row_groups):
        for col in range(len(pf.schema.leaves)):
            yield rg, col


# ------------------------------------------------------------------ footer vs pyarrow

_UNPACK = {"INT32": "<i", "INT64": "<q", "DOUBLE": "<d"}


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _compare_with_pyarrow(path: Path) -> list[str]:
    """Every footer field pyarrow exposes, as a list of differences."""
    md = _pa_metadata(path)
    assert md is not None
    pf = ParquetFile.open(path)
    errs: list[str] = []

    def check(what: str, ours: object, theirs: object) -> None:
        if not _same(ours, theirs):
            errs.append(f"{what}: pqindex={ours!r} pyarrow={theirs!r}")

    check("num_rows", pf.num_rows, md.num_rows)
    check("num_row_groups", pf.num_row_groups, md.num_row_groups)
    check("created_by", pf.metadata.created_by or "", md.created_by or "")
    check("leaves", len(pf.schema.leaves), md.num_columns)
    for j, leaf in enumerate(pf.schema.leaves[: md.num_columns]):
        col = md.schema.column(j)
        check(f"leaf {j} path", ".".join(leaf.path), col.path)
        check(f"leaf {j} physical type", PhysicalType(leaf.physical_type).name, col.physical_type)
        check(f"leaf {j} max def level", leaf.max_definition_level, col.max_definition_level)
        check(f"leaf {j} max rep level", leaf.max_repetition_level, col.max_repetition_level)
    for i in range(min(pf.num_row_groups, md.num_row_groups)):
        prg = md.row_group(i)
        check(f"rg {i} num_rows", pf.row_group_rows(i), prg.num_rows)
        for j in range(prg.num_columns):
            c = prg.column(j)
            cm = pf.column_meta(i, j)
            w = f"rg {i} col {j} ({c.path_in_schema})"
            check(f"{w} physical type", PhysicalType(cm.type).name, c.physical_type)
            check(f"{w} path_in_schema", ".".join(cm.path_in_schema or []), c.path_in_schema)
            check(f"{w} num_values", cm.num_values, c.num_values)
            check(f"{w} total_compressed_size", cm.total_compressed_size, c.total_compressed_size)
            check(
                f"{w} total_uncompressed_size",
                cm.total_uncompressed_size,
                c.total_uncompressed_size,
            )
            check(f"{w} data_page_offset", cm.data_page_offset, c.data_page_offset)
            check(
                f"{w} dictionary_page_offset", cm.dictionary_page_offset, c.dictionary_page_offset
            )
            check(f"{w} bloom_filter_offset", cm.bloom_filter_offset, c.bloom_filter_offset)
            check(f"{w} bloom_filter_length", cm.bloom_filter_length, c.bloom_filter_length)
            check(f"{w} has_column_index", pf.has_column_index(i, j), c.has_column_index)
            check(f"{w} has_offset_index", pf.has_offset_index(i, j), c.has_offset_index)
            st = c.statistics if c.is_stats_set else None
            if st is None or not st.has_min_max:
                continue
            ours = cm.statistics
            if ours is None:
                errs.append(f"{w}: pyarrow has min/max statistics, pqindex has none")
                continue
            if st.has_null_count:
                check(f"{w} null_count", ours.null_count, st.null_count)
            if c.physical_type not in ("INT32", "INT64", "DOUBLE", "BYTE_ARRAY"):
                continue
            lo = ours.min_value if ours.min_value is not None else ours.min
            hi = ours.max_value if ours.max_value is not None else ours.max
            if lo is None or hi is None:
                errs.append(f"{w}: pyarrow has min/max, the footer has none")
                continue
            fmt = _UNPACK.get(c.physical_type)
            if fmt is not None:
                (lo,) = struct.unpack(fmt, lo)
                (hi,) = struct.unpack(fmt, hi)
            check(f"{w} min", lo, st.min_raw)
            check(f"{w} max", hi, st.max_raw)
    return errs


def test_corpus_is_not_empty() -> None:
    """The parametrized tests below must have something to check."""
    compared = [p for p in CORPUS_FILES if _pa_metadata(p) is not None]
    assert len(compared) >= 60, [_rel(p) for p in compared]
    assert len(ENCRYPTED_FILES) >= 5
    assert len(BAD_FILES) >= 5


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_footer_matches_pyarrow(source: Path | str, written_files: writers.FileCache) -> None:
    path = _path(source, written_files)
    ParquetFile.open(path)  # opens without error, whatever pyarrow thinks
    if _pa_metadata(path) is None:
        assert path.name == "incorrect_map_schema.parquet"  # the only one pyarrow rejects
        return
    assert _compare_with_pyarrow(path) == []


@pytest.mark.parametrize("path", [pytest.param(p, id=_rel(p)) for p in ENCRYPTED_FILES])
def test_encrypted_files_are_unsupported(path: Path) -> None:
    with pytest.raises(UnsupportedError, match="encrypt"):
        ParquetFile.open(path)


@pytest.mark.parametrize("path", [pytest.param(p, id=_rel(p)) for p in BAD_FILES])
def test_bad_data_raises_only_pqindex_errors(path: Path) -> None:
    """Opening and every lazy read either work or raise a PqIndexError."""
    try:
        pf = ParquetFile.open(path)
    except PqIndexError:
        return
    for rg, col in _chunks(pf):
        for read in (
            pf.offset_index,
            pf.column_index,
            pf.page_rows,
            pf.bloom_filter,
            pf.dictionary_page,
        ):
            with contextlib.suppress(PqIndexError):
                read(rg, col)


# ------------------------------------------------------------------ page index


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_page_index_is_consistent(source: Path | str, written_files: writers.FileCache) -> None:
    path = _path(source, written_files)
    md = _pa_metadata(path)
    if md is None:  # the only one pyarrow rejects (map keys not annotated as required)
        assert path.name == "incorrect_map_schema.parquet"
        pytest.skip("pyarrow, the reference, rejects this file's footer")
    pf = ParquetFile.open(path)
    with_index = 0
    for rg, col in _chunks(pf):
        if not pf.has_offset_index(rg, col):
            assert pf.offset_index(rg, col) is None
            assert pf.page_rows(rg, col) is None
            continue
        with_index += 1
        where = f"rg {rg} col {pf.leaf(col).name}"
        rows = md.row_group(rg).num_rows
        start, end = _chunk_bounds(md.row_group(rg).column(col))
        oi = pf.offset_index(rg, col)
        assert oi is not None and oi.page_locations, where
        locs = oi.page_locations
        firsts = [loc.first_row_index for loc in locs]
        assert firsts[0] == 0, where
        assert all(a < b for a, b in itertools.pairwise(firsts)), where
        page_rows = pf.page_rows(rg, col)
        assert page_rows is not None and len(page_rows) == len(locs), where
        assert sum(page_rows) == rows, where
        if rows:
            assert all(n > 0 for n in page_rows), where
        for a, b in itertools.pairwise(locs):
            assert a.offset + a.compressed_page_size <= b.offset, f"{where}: pages overlap"
        for loc in locs:
            assert start <= loc.offset, where
            assert loc.offset + loc.compressed_page_size <= end, where
        dp = pf.dictionary_page(rg, col)
        if dp is not None:
            assert dp.offset + dp.total_length <= locs[0].offset, where
        if pf.has_column_index(rg, col):
            ci = pf.column_index(rg, col)
            assert ci is not None, where
            n = len(locs)
            assert len(ci.null_pages or []) == n, where
            assert len(ci.min_values or []) == n, where
            assert len(ci.max_values or []) == n, where
            if ci.null_counts is not None:
                assert len(ci.null_counts) == n, where
    if isinstance(source, str) and source != "duckdb":
        # the writers were asked for a page index and small pages
        assert with_index == pf.num_row_groups * len(pf.schema.leaves)
        id_col = pf.schema.leaf("id")
        assert id_col is not None
        pages = [len(pf.page_rows(rg, id_col.index) or []) for rg in range(pf.num_row_groups)]
        assert pf.num_row_groups >= 3 and sum(pages) >= 10, pages
        assert all(
            n > 1 for rg, n in enumerate(pages) if pf.row_group_rows(rg) > 2 * writers.PAGE_ROWS
        ), pages


def test_corpus_has_page_indexes() -> None:
    with_index = []
    for p in CORPUS_FILES:
        pf = ParquetFile.open(p)
        if any(pf.has_offset_index(rg, col) for rg, col in _chunks(pf)):
            with_index.append(p.name)
    assert len(with_index) >= 5, with_index


# ------------------------------------------------------------------ I/O


def _footer_length(path: Path) -> int:
    with path.open("rb") as f:
        f.seek(-8, 2)
        (n,) = struct.unpack("<I", f.read(4))
    return int(n)


SMALL_CORPUS = [p for p in CORPUS_FILES if p.stat().st_size < DEFAULT_TAIL_BYTES]


@pytest.mark.parametrize("path", [pytest.param(p, id=_rel(p)) for p in SMALL_CORPUS])
def test_open_small_file_is_one_request(path: Path) -> None:
    stats = IOStats()
    ParquetFile.open(path, stats=stats)
    size = path.stat().st_size
    assert stats.requests == 1
    assert stats.trace == [(0, size)]
    assert stats.bytes_read == size


def test_open_large_file_small_footer_is_one_request(written_files: writers.FileCache) -> None:
    path = written_files["pyarrow_v1_none_dict"]
    size = path.stat().st_size
    assert size > 4 * DEFAULT_TAIL_BYTES
    stats = IOStats()
    pf = ParquetFile.open(path, stats=stats)
    assert stats.trace == [(size - DEFAULT_TAIL_BYTES, DEFAULT_TAIL_BYTES)]
    # the page index sits right before the footer, inside the tail: no more reads
    for rg, col in _chunks(pf):
        pf.column_index(rg, col)
        pf.offset_index(rg, col)
    assert stats.requests == 1


def test_open_large_footer_is_two_requests(written_files: writers.FileCache) -> None:
    path = written_files["wide_footer"]
    size = path.stat().st_size
    footer_len = _footer_length(path)
    assert footer_len + 8 > DEFAULT_TAIL_BYTES
    stats = IOStats()
    pf = ParquetFile.open(path, stats=stats)
    assert stats.requests == 2
    assert stats.trace == [
        (size - DEFAULT_TAIL_BYTES, DEFAULT_TAIL_BYTES),
        # exactly the part of the footer the tail did not hold
        (size - 8 - footer_len, footer_len + 8 - DEFAULT_TAIL_BYTES),
    ]
    assert pf.num_row_groups == 8 and len(pf.schema.leaves) == 200


def _index_regions(pf: ParquetFile) -> dict[tuple[str, int, int], tuple[int, int]]:
    out = {}
    for rg, col in _chunks(pf):
        cc = pf.column_chunk(rg, col)
        if cc.column_index_offset is not None and cc.column_index_length:
            out["ci", rg, col] = (cc.column_index_offset, cc.column_index_length)
        if cc.offset_index_offset is not None and cc.offset_index_length:
            out["oi", rg, col] = (cc.offset_index_offset, cc.offset_index_length)
    return out


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


@pytest.mark.parametrize(
    ("name", "tail_bytes"),
    [("wide_footer", DEFAULT_TAIL_BYTES), ("pyarrow_v2_snappy_dict", 8)],
)
def test_column_index_reads_only_its_own_bytes(
    written_files: writers.FileCache, name: str, tail_bytes: int
) -> None:
    path = written_files[name]
    stats = IOStats()
    pf = ParquetFile.open(path, stats=stats, tail_bytes=tail_bytes)
    regions = _index_regions(pf)
    rg, col = pf.num_row_groups - 1, len(pf.schema.leaves) // 2
    mine = regions["ci", rg, col]
    stats.reset()
    assert pf.column_index(rg, col) is not None
    assert stats.trace == [mine]
    for key, region in regions.items():
        if key != ("ci", rg, col):
            assert not any(_overlaps(t, region) for t in stats.trace), key
    assert pf.column_index(rg, col) is not None  # cached
    assert stats.requests == 1
    assert pf.offset_index(rg, col) is not None
    assert stats.trace == [mine, regions["oi", rg, col]]


def _clusters(regions: list[tuple[int, int]], max_gap: int) -> int:
    n, end = 0, None
    for off, length in sorted(regions):
        if end is None or off > end + max_gap:
            n += 1
            end = off + length
        else:
            end = max(end, off + length)
    return n


def test_prefetch_page_index_coalesces(written_files: writers.FileCache) -> None:
    path = written_files["wide_footer"]
    stats = IOStats()
    pf = ParquetFile.open(path, stats=stats)
    regions = _index_regions(pf)
    ncols = len(pf.schema.leaves)

    # all column indexes of one row group: adjacent entries, one request
    cis = sorted(regions["ci", 2, c] for c in range(ncols))
    assert all(a[0] + a[1] == b[0] for a, b in itertools.pairwise(cis))
    stats.reset()
    pf.prefetch_page_index([2], range(ncols), offset_index=False, max_gap=0)
    assert stats.trace == [(cis[0][0], cis[-1][0] + cis[-1][1] - cis[0][0])]
    for c in range(ncols):
        assert pf.column_index(2, c) is not None
    assert stats.requests == 1
    for c in range(ncols):
        assert pf.offset_index(2, c) is not None  # not prefetched: one read each
    assert stats.requests == 1 + ncols

    # two entries with a gap between them: max_gap decides
    a, b = regions["ci", 0, 0], regions["ci", 0, 2]
    assert a[0] + a[1] < b[0]
    stats.reset()
    pf.prefetch_page_index([0], [0, 2], offset_index=False, max_gap=0)
    assert stats.trace == [a, b]
    stats.reset()
    pf.prefetch_page_index([1], [0, 2], offset_index=False)
    a1, b1 = regions["ci", 1, 0], regions["ci", 1, 2]
    assert stats.trace == [(a1[0], b1[0] + b1[1] - a1[0])]

    # column and offset indexes of several row groups: as many requests as clusters
    stats.reset()
    pf.prefetch_page_index([4, 5, 7], range(0, ncols, 3))
    cols = range(0, ncols, 3)
    wanted = [regions[k, rg, c] for k in ("ci", "oi") for rg in (4, 5, 7) for c in cols]
    assert stats.requests == _clusters(wanted, LOCAL_MAX_GAP)  # the local store's policy
    for w in wanted:
        assert any(t[0] <= w[0] and w[0] + w[1] <= t[0] + t[1] for t in stats.trace), w
    before = stats.requests
    for rg in (4, 5, 7):
        for c in range(0, ncols, 3):
            pf.column_index(rg, c)
            pf.offset_index(rg, c)
    assert stats.requests == before


# ------------------------------------------------------------------ Bloom filters


def _check_bloom(path: Path) -> None:
    pf = ParquetFile.open(path)
    id_col = pf.schema.leaf("id")
    desc_col = pf.schema.leaf("desc")
    assert id_col is not None and desc_col is not None
    pa_file = pq.ParquetFile(path)
    absent = [10_000_000 + 7919 * k for k in range(500)] + [-1 - 3 * k for k in range(500)]
    for rg in range(pf.num_row_groups):
        bf = pf.bloom_filter(rg, id_col.index)
        assert bf is not None, f"rg {rg}: no Bloom filter on id"
        assert pf.bloom_filter(rg, desc_col.index) is None
        present = pa_file.read_row_group(rg, columns=["id"]).column("id").to_pylist()
        assert present
        missing = [v for v in present if not bf.might_contain(plain_bytes(v, "int64"))]
        assert missing == [], f"rg {rg}: present ids reported absent"
        false_pos = sum(bf.might_contain(plain_bytes(v, "int64")) for v in absent)
        assert false_pos < len(absent) // 10, f"rg {rg}: {false_pos} false positives"


def test_bloom_filter_pyarrow(written_files: writers.FileCache) -> None:
    _check_bloom(written_files["pyarrow_bloom"])


@pytest.mark.spark
def test_bloom_filter_spark(written_files: writers.FileCache, spark: Any) -> None:
    _check_bloom(written_files["spark"])


def test_no_bloom_filter_when_not_written(written_files: writers.FileCache) -> None:
    pf = ParquetFile.open(written_files["pyarrow_v1_zstd_dict"])
    assert all(pf.bloom_filter(rg, col) is None for rg, col in _chunks(pf))


@pytest.mark.parametrize(
    "name",
    ["data_index_bloom_encoding_stats.parquet", "data_index_bloom_encoding_with_length.parquet"],
)
def test_bloom_filter_corpus(name: str) -> None:
    path = DATA / name
    pf = ParquetFile.open(path)
    bf = pf.bloom_filter(0, 0)
    assert bf is not None
    for v in pq.read_table(path).column(0).to_pylist():
        assert bf.might_contain(plain_bytes(v, "bytes")), v
    absent = [f"not-in-the-file-{k}" for k in range(200)]
    assert sum(bf.might_contain(plain_bytes(v, "bytes")) for v in absent) < 20


# ------------------------------------------------------------------ dictionary pages


def _page_type_at(path: Path, offset: int) -> int | None:
    """The ``type`` field of the page header at ``offset``, read without pqindex.

    A compact-protocol PageHeader starts with field 1 (i32): byte 0x15, then a
    zigzag varint.
    """
    with path.open("rb") as f:
        f.seek(offset)
        raw = f.read(8)
    if not raw or raw[0] != 0x15:
        return None
    v = shift = 0
    for byte in raw[1:]:
        v |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return (v >> 1) ^ -(v & 1)


@pytest.mark.parametrize("source", DICT_SOURCES)
def test_dictionary_page_presence(source: Path | str, written_files: writers.FileCache) -> None:
    """A dictionary page is found exactly when the chunk has one.

    Where the footer sets ``dictionary_page_offset`` > 0 this is exactly pyarrow's
    ``has_dictionary_page``. pyarrow's flag only says whether the field is set, so
    elsewhere the truth is the type of the chunk's first page: old parquet-mr and
    Impala files leave the field unset with a dictionary page first, and
    dict-page-offset-zero.parquet sets it to 0 with no dictionary at all.
    """
    path = _path(source, written_files)
    md = _pa_metadata(path)
    if md is None:  # the only one pyarrow rejects (map keys not annotated as required)
        assert path.name == "incorrect_map_schema.parquet"
        pytest.skip("pyarrow, the reference, rejects this file's footer")
    pf = ParquetFile.open(path)
    for rg, col in _chunks(pf):
        c = md.row_group(rg).column(col)
        dp = pf.dictionary_page(rg, col)
        where = f"rg {rg} col {c.path_in_schema}"
        if c.dictionary_page_offset:
            assert (dp is not None) == c.has_dictionary_page, where
            assert dp is not None and dp.offset == c.dictionary_page_offset, where
        else:
            first = _page_type_at(path, _chunk_bounds(c)[0])
            assert (dp is not None) == (first == PageType.DICTIONARY_PAGE), where
        if dp is not None:
            assert dp.header.type == PageType.DICTIONARY_PAGE, where
            assert dp.header.dictionary_page_header is not None, where
            start, end = _chunk_bounds(c)
            assert start <= dp.offset and dp.offset + dp.total_length <= end, where


def test_dictionary_page_offset_zero() -> None:
    path = DATA / "dict-page-offset-zero.parquet"
    c = pq.read_metadata(path).row_group(0).column(0)
    # pyarrow reports the field as set (to 0) ...
    assert c.dictionary_page_offset == 0 and c.has_dictionary_page
    # ... but the chunk's only page, at data_page_offset, is a data page
    assert _page_type_at(path, c.data_page_offset) == PageType.DATA_PAGE
    pf = ParquetFile.open(path)
    assert pf.dictionary_page(0, 0) is None
    assert pq.read_table(path).num_rows == pf.num_rows == 39
