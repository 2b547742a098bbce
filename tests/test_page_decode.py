"""Decoding chosen pages through a synthetic in-memory file equals a full read of those rows."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import random
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import writers
from conftest import PARQUET_TESTING, missing
from pqindex.errors import PqIndexError
from pqindex.format.file import ParquetFile
from pqindex.format.schema import Encoding, PageType
from pqindex.format.structs import PageHeader
from pqindex.format.thrift import decode
from pqindex.scan.page_decode import (
    arrow_schema,
    decode_field_pages,
    decode_pages,
    field_byte_ranges,
    page_byte_ranges,
    page_first_rows,
    page_row_spans,
)

CORPUS = PARQUET_TESTING / "data"
ROWS = 1_200
RG_ROWS = 500
PAGE_ROWS = 60


# ------------------------------------------------------------------ data


def make_table(n: int = ROWS) -> pa.Table:
    rng = np.random.default_rng(7)
    k = [int(i) for i in range(n)]
    ka = np.arange(n)
    floats = rng.normal(0, 10, n)
    floats[ka % 9 == 2] = np.nan
    t0 = dt.datetime(2022, 1, 1, tzinfo=dt.UTC)
    lists = [
        None if i % 11 == 3 else [f"s{i}" if j % 4 else None for j in range(i % 4)]
        for i in range(n)
    ]
    return pa.table(
        {
            "i64": pa.array(ka * 3 - 1000, pa.int64()),
            "i32": pa.array(rng.integers(-50, 50, n), pa.int32(), mask=ka % 5 == 1),
            "f64": pa.array(floats, pa.float64()),
            "str": pa.array([f"v{i % 97}-{'x' * (i % 13)}" for i in range(n)], pa.string()),
            "lstr": pa.array(
                [None if i % 17 == 0 else f"L{i}" for i in range(n)], pa.large_string()
            ),
            "bin": pa.array([bytes([i % 256, (i * 7) % 256]) * (i % 3) for i in range(n)]),
            "day": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=int(i)) for i in k]),
            "ts_us": pa.array(
                [t0 + dt.timedelta(seconds=int(i) * 61) for i in k], pa.timestamp("us", "UTC")
            ),
            "ts_ns": pa.array(ka * 1_000_000_007 + 3, pa.timestamp("ns")),
            "dec": pa.array(
                [None if i % 13 == 0 else decimal.Decimal(i * 7919 % 10**9) / 1000 for i in k],
                pa.decimal128(12, 3),
            ),
            "flag": pa.array([None if i % 7 == 0 else i % 3 == 0 for i in k], pa.bool_()),
            "li": pa.array(
                [None if i % 6 == 0 else list(range(i % 5)) for i in k], pa.list_(pa.int64())
            ),
            "ls": pa.array(lists, pa.list_(pa.string())),
            "st": pa.array(
                [
                    None if i % 8 == 5 else {"a": None if i % 3 == 1 else i, "b": f"b{i % 5}"}
                    for i in k
                ],
                pa.struct([("a", pa.int32()), ("b", pa.string())]),
            ),
            "mp": pa.array(
                [
                    None
                    if i % 10 == 4
                    else [(f"k{j}", None if j == 1 else int(i + j)) for j in range(i % 3)]
                    for i in k
                ],
                pa.map_(pa.string(), pa.int32()),
            ),
            "dict": pa.array(
                [None if i % 19 == 0 else f"cat{i % 6}" for i in k]
            ).dictionary_encode(),
        }
    )


def write(path: Path, table: pa.Table | None = None, **kw: Any) -> Path:
    pq.write_table(
        make_table() if table is None else table,
        path,
        row_group_size=RG_ROWS,
        max_rows_per_page=PAGE_ROWS,
        write_batch_size=PAGE_ROWS,
        data_page_size=1 << 20,  # the row limit alone cuts pages: leaves stay row-aligned
        write_page_index=True,
        **kw,
    )
    return path


# ------------------------------------------------------------------ comparison


def _norm(v: Any) -> Any:
    """NaN-aware, hashable-free comparable form of a to_pylist value."""
    if isinstance(v, float) and math.isnan(v):
        return "<NaN>"
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    return v


def _project(v: Any, got: pa.DataType, full: pa.DataType) -> Any:
    """A full-field value reduced to the leaves present in ``got``."""
    if v is None:
        return None
    if pa.types.is_struct(got) and pa.types.is_struct(full):
        return {
            f.name: _project(v[f.name], f.type, full.field(full.get_field_index(f.name)).type)
            for f in got
        }
    if pa.types.is_map(full) and not pa.types.is_map(got):
        side = 0 if got.value_field.name == full.key_field.name else 1
        sub = full.key_type if side == 0 else full.item_type
        return [_project(kv[side], got.value_type, sub) for kv in v]
    if pa.types.is_map(full):
        return [
            (_project(a, got.key_type, full.key_type), _project(b, got.item_type, full.item_type))
            for a, b in v
        ]
    if pa.types.is_list(full) or pa.types.is_large_list(full):
        return [_project(x, got.value_type, full.value_type) for x in v]
    return v


def _rows(first: np.ndarray, counts: list[int], pages: list[int]) -> list[int]:
    out: list[int] = []
    for f, p in zip(first, pages, strict=True):
        out += range(int(f), int(f) + counts[p])
    return out


def _expected(full: pa.ChunkedArray, rg_start: int, rows: list[int]) -> list[Any]:
    taken = full.take(pa.array(np.asarray(rows, dtype=np.int64) + rg_start))
    out: list[Any] = taken.to_pylist()
    return out


def _subsets(n: int, rnd: random.Random) -> Iterator[list[int]]:
    yield list(range(n))
    yield [0]
    yield [n - 1]
    if n > 2:
        yield sorted(rnd.sample(range(n), rnd.randint(1, n - 1)))
        a = rnd.randrange(n - 1)
        yield list(range(a, rnd.randint(a + 1, n)))


def _fetch(pf: ParquetFile, ranges: list[tuple[int, int]]) -> dict[int, bytes]:
    return {off: pf.read_bytes(off, n) for off, n in ranges}


def check_file(path: Path, *, max_subsets: int = 5, fields: list[str] | None = None) -> int:
    """Decode subsets of pages of every leaf and every whole field; returns checks made."""
    full = pq.read_table(path)
    checks = 0
    rnd = random.Random(zlib.crc32(str(path).encode()))
    with ParquetFile.open(path) as pf:
        schema = arrow_schema(pf)
        assert schema == pq.read_schema(path)
        rg_start = 0
        for rg in range(pf.num_row_groups):
            by_field: dict[str, list[int]] = {}
            for leaf in pf.schema.leaves:
                by_field.setdefault(leaf.path[0], []).append(leaf.index)
            for name, cols in by_field.items():
                if fields is not None and name not in fields:
                    continue
                if not all(pf.has_offset_index(rg, c) for c in cols):
                    continue
                target = schema.field(name).type
                column = full.column(name)
                for col in cols:
                    counts = pf.page_rows(rg, col)
                    assert counts is not None
                    for pages in list(_subsets(len(counts), rnd))[:max_subsets]:
                        ranges = page_byte_ranges(pf, rg, col, pages)
                        arr, first = decode_pages(
                            pf, rg, col, pages, _fetch(pf, ranges), arrow_type=target
                        )
                        assert list(first) == list(page_first_rows(pf, rg, col, pages))
                        rows = _rows(first, counts, pages)
                        assert len(arr) == len(rows), (name, col, pages)
                        want = [
                            _project(v, arr.type, target) for v in _expected(column, rg_start, rows)
                        ]
                        assert _norm(arr.to_pylist()) == _norm(want), (path, rg, col, pages)
                        if len(cols) == 1:
                            assert arr.type == target, (name, arr.type, target)
                        checks += 1
                # The whole field, from all pages of every leaf.
                all_pages = [list(range(len(pf.page_rows(rg, c) or []))) for c in cols]
                ranges = field_byte_ranges(pf, rg, cols, all_pages)
                arr = decode_field_pages(
                    pf, rg, cols, all_pages, _fetch(pf, ranges), arrow_type=target
                )
                want_full = column.slice(rg_start, pf.row_group_rows(rg))
                assert arr.type == target, (name, arr.type, target)
                assert _norm(arr.to_pylist()) == _norm(want_full.to_pylist()), (path, rg, name)
                checks += 1
            rg_start += pf.row_group_rows(rg)
    return checks


# ------------------------------------------------------------------ pyarrow matrix

CODECS = ["none", "snappy", "gzip", "zstd", "lz4", "brotli"]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("dictionary", [True, False], ids=["dict", "plain"])
def test_pyarrow_matrix(tmp_path: Path, codec: str, version: str, dictionary: bool) -> None:
    path = write(
        tmp_path / "t.parquet",
        compression=codec,
        data_page_version=version,
        use_dictionary=dictionary,
    )
    # Fewer subsets off the main diagonal: the codec matters less than the encoding.
    assert check_file(path, max_subsets=5 if codec in ("none", "zstd") else 2) > 0


ENCODINGS: dict[str, dict[str, str]] = {
    "DELTA_BINARY_PACKED": {
        c: "DELTA_BINARY_PACKED" for c in ("i64", "i32", "day", "ts_us", "ts_ns", "li.list.element")
    },
    "DELTA_LENGTH_BYTE_ARRAY": {
        c: "DELTA_LENGTH_BYTE_ARRAY" for c in ("str", "lstr", "bin", "ls.list.element", "st.b")
    },
    "DELTA_BYTE_ARRAY": {
        c: "DELTA_BYTE_ARRAY"
        for c in ("str", "lstr", "bin", "ls.list.element", "mp.key_value.key", "dec")
    },
    "BYTE_STREAM_SPLIT": {
        c: "BYTE_STREAM_SPLIT" for c in ("f64", "i64", "i32", "dec", "ts_ns", "st.a")
    },
}


@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_pyarrow_encodings(tmp_path: Path, encoding: str, version: str) -> None:
    cols = ENCODINGS[encoding]
    path = write(
        tmp_path / "t.parquet",
        compression="zstd",
        data_page_version=version,
        use_dictionary=False,
        column_encoding=cols,
    )
    with ParquetFile.open(path) as pf:
        leaves = range(len(pf.schema.leaves))
        used = {e for c in leaves for e in pf.column_meta(0, c).encodings or []}
    assert Encoding[encoding] in used
    assert check_file(path) > 0


def test_dictionary_fallback_to_plain(tmp_path: Path) -> None:
    """A chunk whose later pages fell back to PLAIN still decodes with its dictionary."""
    n = 3000
    table = pa.table({"s": pa.array([f"value-{i:08d}-{'y' * 40}" for i in range(n)])})
    path = tmp_path / "f.parquet"
    pq.write_table(
        table,
        path,
        dictionary_pagesize_limit=4096,
        max_rows_per_page=100,
        write_page_index=True,
        row_group_size=n,
    )
    with ParquetFile.open(path) as pf:
        stats = pf.column_meta(0, 0).encoding_stats or []
        data = {(s.page_type, s.encoding) for s in stats if s.page_type != PageType.DICTIONARY_PAGE}
        assert {e for _, e in data} == {Encoding.PLAIN, Encoding.RLE_DICTIONARY}
    assert check_file(path, max_subsets=5) > 0


# ------------------------------------------------------------------ API behaviour


@pytest.fixture(scope="module")
def small_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("pd") / "s.parquet", compression="snappy")


def _leaf(pf: ParquetFile, name: str) -> int:
    leaf = pf.schema.leaf(name)
    assert leaf is not None
    return leaf.index


def test_byte_ranges_and_callable_fetch(small_file: Path) -> None:
    with ParquetFile.open(small_file) as pf:
        col = _leaf(pf, "str")
        ranges = page_byte_ranges(pf, 0, col, [3, 1])
        dictionary = pf.dictionary_page(0, col)
        assert dictionary is not None
        assert ranges[0] == (dictionary.offset, dictionary.total_length)
        locs = (pf.offset_index(0, col) or pytest.fail()).page_locations or []
        assert ranges[1:] == [(locs[p].offset, locs[p].compressed_page_size) for p in (1, 3)]
        calls: list[tuple[int, int]] = []

        def read(off: int, n: int) -> bytes:
            calls.append((off, n))
            return pf.read_bytes(off, n)

        arr, first = decode_pages(pf, 0, col, [3, 1], read)
        assert sorted(calls) == sorted(ranges)
        assert list(first) == [PAGE_ROWS, 3 * PAGE_ROWS]
        full = pq.read_table(small_file, columns=["str"]).column(0)
        want = (
            full.slice(PAGE_ROWS, PAGE_ROWS).to_pylist()
            + full.slice(3 * PAGE_ROWS, PAGE_ROWS).to_pylist()
        )
        assert arr.to_pylist() == want
        assert arr.type == pa.string()  # no arrow_type: the Parquet schema's own type


def test_coalesced_fetch(small_file: Path) -> None:
    """One coalesced buffer covering several ranges serves them all."""
    with ParquetFile.open(small_file) as pf:
        col = _leaf(pf, "i64")
        ranges = page_byte_ranges(pf, 1, col, [0, 2, 4])
        start = ranges[0][0]
        end = ranges[-1][0] + ranges[-1][1]
        arr, first = decode_pages(pf, 1, col, [0, 2, 4], {start: pf.read_bytes(start, end - start)})
        full = pq.read_table(small_file, columns=["i64"]).column(0)
        rows = _rows(first, pf.page_rows(1, col) or [], [0, 2, 4])
        assert arr.to_pylist() == _expected(full, RG_ROWS, rows)
        with pytest.raises(KeyError):
            decode_pages(pf, 1, col, [0, 2, 4], {start: pf.read_bytes(start, 10)})


def test_bad_pages(small_file: Path) -> None:
    with ParquetFile.open(small_file) as pf:
        col = _leaf(pf, "i64")
        n = len(pf.page_rows(0, col) or [])
        for pages in ([], [n], [-1], [1, 1]):
            with pytest.raises(ValueError):
                page_byte_ranges(pf, 0, col, pages)


def test_struct_field_from_chosen_pages(small_file: Path) -> None:
    with ParquetFile.open(small_file) as pf:
        schema = arrow_schema(pf)
        cols = [_leaf(pf, "st.a"), _leaf(pf, "st.b")]
        pages = [[1, 2, 5], [1, 2, 5]]
        ranges = field_byte_ranges(pf, 0, cols, pages)
        arr = decode_field_pages(
            pf, 0, cols, pages, _fetch(pf, ranges), arrow_type=schema.field("st").type
        )
        spans = page_row_spans(pf, 0, cols[0], pages[0])
        assert spans == [(PAGE_ROWS, 3 * PAGE_ROWS), (5 * PAGE_ROWS, 6 * PAGE_ROWS)]
        full = pq.read_table(small_file, columns=["st"]).column(0)
        want = [v for a, b in spans for v in full.slice(a, b - a).to_pylist()]
        assert arr.type == schema.field("st").type
        assert arr.to_pylist() == want
        # Leaves listed in any order.
        again = decode_field_pages(
            pf, 0, cols[::-1], pages, _fetch(pf, ranges), arrow_type=schema.field("st").type
        )
        assert again.equals(arr)


def test_field_pages_must_cover_the_same_rows(small_file: Path) -> None:
    with ParquetFile.open(small_file) as pf:
        cols = [_leaf(pf, "mp.key_value.key"), _leaf(pf, "mp.key_value.value")]
        with pytest.raises(ValueError, match="different rows"):
            decode_field_pages(pf, 0, cols, [[0, 1], [1]], lambda o, n: pf.read_bytes(o, n))
        with pytest.raises(ValueError, match="several top-level"):
            decode_field_pages(
                pf,
                0,
                [_leaf(pf, "i64"), _leaf(pf, "str")],
                [[0], [0]],
                lambda o, n: pf.read_bytes(o, n),
            )


def test_half_map_leaves(small_file: Path) -> None:
    """A map leaf alone decodes as a list of its keys or of its values."""
    with ParquetFile.open(small_file) as pf:
        target = arrow_schema(pf).field("mp").type
        full = pq.read_table(small_file, columns=["mp"]).column(0)
        for name, side in (("mp.key_value.key", 0), ("mp.key_value.value", 1)):
            col = _leaf(pf, name)
            arr, first = decode_pages(
                pf, 0, col, [2], lambda o, n: pf.read_bytes(o, n), arrow_type=target
            )
            assert pa.types.is_list(arr.type)
            rows = full.slice(int(first[0]), PAGE_ROWS).to_pylist()
            assert arr.to_pylist() == [None if r is None else [kv[side] for kv in r] for r in rows]


# ------------------------------------------------------------------ other writers' files

# Files with an offset index that pyarrow reads. Left out: datapage_v2.snappy.parquet
# (no offset index: no pages to pick) and incorrect_map_schema.parquet (pyarrow, the
# reference, refuses it: "Map keys must be annotated as required").
CORPUS_FILES = [
    "alltypes_tiny_pages.parquet",
    "alltypes_tiny_pages_plain.parquet",
    "binary_truncated_min_max.parquet",
    "data_index_bloom_encoding_stats.parquet",
    "data_index_bloom_encoding_with_length.parquet",
    "datapage_v1-snappy-compressed-checksum.parquet",
    "datapage_v1-uncompressed-checksum.parquet",
    "datapage_v2_empty_datapage.snappy.parquet",
    "delta_encoding_required_column.parquet",
    "dict-page-offset-zero.parquet",
    "fixed_length_byte_array.parquet",
    "floating_orders_nan_count.parquet",
    "hadoop_lz4_compressed_larger.parquet",
    "int32_with_null_pages.parquet",
    "int96_from_spark.parquet",
    "map_no_value.parquet",
    "old_list_structure.parquet",
    "plain-dict-uncompressed-checksum.parquet",
    "repeated_primitive_no_list.parquet",
    "rle-dict-snappy-checksum.parquet",
]


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus(name: str) -> None:
    path = CORPUS / name
    if not path.exists():
        missing(f"{path} is not in the corpus")
    with ParquetFile.open(path) as pf:
        indexed = any(
            pf.has_offset_index(rg, c)
            for rg in range(pf.num_row_groups)
            for c in range(len(pf.schema.leaves))
        )
    assert indexed, f"{name} has no offset index: nothing to check"
    assert check_file(path) > 0


def test_arrow_schema_is_pyarrows_on_the_whole_corpus() -> None:
    """``arrow_schema`` parses a footer without row groups: the schema pyarrow gives
    the real file all the same, on every corpus file both can open."""
    compared = 0
    for path in sorted(CORPUS.glob("**/*.parquet")):
        try:
            want = pq.read_schema(path)
            pf = ParquetFile.open(path)
        except (pa.ArrowException, OSError, PqIndexError):
            continue  # files either side refuses (bad_data/, encrypted, ...)
        with pf:
            got = arrow_schema(pf)
        assert got.equals(want, check_metadata=True), path.name
        compared += 1
    assert compared >= 50


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=[pytest.mark.spark] if n in writers.SPARK_WRITERS else [])
        for n in writers.ALL_WRITERS
    ],
)
def test_writer_files(written_files: writers.FileCache, name: str) -> None:
    path = written_files[name]
    with ParquetFile.open(path) as pf:
        if not any(pf.has_offset_index(rg, 0) for rg in range(pf.num_row_groups)):
            pytest.skip(f"{name} writes no offset index")
    assert check_file(path, max_subsets=3) > 0


def test_damaged_pages_raise_corrupt_file_error(small_file: Path) -> None:
    from pqindex.errors import CorruptFileError

    with ParquetFile.open(small_file) as pf:
        col = _leaf(pf, "i64")
        ranges = page_byte_ranges(pf, 0, col, [2])
        fetched = _fetch(pf, ranges)
        off, n = ranges[-1]
        good = fetched[off]
        with pytest.raises(CorruptFileError):
            decode_pages(pf, 0, col, [2], {**fetched, off: b"\xff" * n})
        # Keep the header, damage the snappy length preamble behind it.
        _, hlen = decode(PageHeader, good)
        bad = good[:hlen] + bytes([good[hlen] ^ 0x7F]) + good[hlen + 1 :]
        with pytest.raises(CorruptFileError, match="row group 0"):
            decode_pages(pf, 0, col, [2], {**fetched, off: bad})
