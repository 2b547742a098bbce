"""Predicates and decoding on encoded pages (pqindex.scan.encoded) against pyarrow.

The reference is always pyarrow's own decode of the same file (``pq.ParquetFile
.read_row_group``) and ``pyarrow.compute`` on it; files come from pyarrow with
random layouts (page versions, codecs, dictionary on/off and falling back to
PLAIN mid-chunk, nulls, NaN), from the other writers of tests/writers.py and
from the corpus.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pqindex
import writers
from conftest import PARQUET_TESTING, missing
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.scan import decompress, encoded, page_values
from pqindex.scan.page_decode import arrow_schema

# The page-by-page flow's machinery, on small files: none of their row groups is
# read whole and filtered instead (conftest.page_by_page).
pytestmark = pytest.mark.usefixtures("page_by_page")

CORPUS = PARQUET_TESTING / "data"
CODECS = ["none", "snappy", "gzip", "brotli", "zstd", "lz4"]


# ---------------------------------------------------------------- RLE / bit-packed


def _encode_hybrid(values: list[int], width: int, plan: list[tuple[bool, int]]) -> bytes:
    """A reference encoder: ``plan`` says run by run (bit-packed?, length)."""
    out = bytearray()

    def varint(v: int) -> None:
        while True:
            b = v & 0x7F
            v >>= 7
            out.append(b | (0x80 if v else 0))
            if not v:
                return

    pos = 0
    for packed, length in plan:
        run = values[pos : pos + length]
        pos += length
        if packed:
            groups = (len(run) + 7) // 8
            varint(groups << 1 | 1)
            bits = 0
            for i, v in enumerate(run + [0] * (groups * 8 - len(run))):
                bits |= v << (i * width)
            out += bits.to_bytes(groups * width, "little")
        else:
            varint(len(run) << 1)
            out += run[0].to_bytes((width + 7) // 8, "little")
    return bytes(out)


@st.composite
def _hybrid_case(draw: st.DrawFn) -> tuple[list[int], int, list[tuple[bool, int]]]:
    width = draw(st.integers(0, 32))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    plan: list[tuple[bool, int]] = []
    values: list[int] = []
    for _ in range(draw(st.integers(1, 12))):
        packed = draw(st.booleans())
        if packed:
            # Runs of whole groups, some repeated at one size (the writers' pattern).
            groups = draw(st.sampled_from([1, 2, 8, 64]))
            for _ in range(draw(st.integers(1, 4))):
                plan.append((True, groups * 8))
                values += [int(v) for v in rng.integers(0, 1 << width, groups * 8)]
        else:
            n = draw(st.integers(1, 300))
            plan.append((False, n))
            values += [draw(st.integers(0, (1 << width) - 1))] * n
    return values, width, plan


@settings(max_examples=200, deadline=None)
@given(_hybrid_case(), st.data())
def test_hybrid_decodes_like_the_reference_encoder(
    case: tuple[list[int], int, list[tuple[bool, int]]], data: st.DataObject
) -> None:
    values, width, plan = case
    buf = b"\xaa" + _encode_hybrid(values, width, plan) + b"\xbb"
    count = data.draw(st.integers(0, len(values)))
    got = encoded.decode_hybrid(buf, 1, len(buf) - 1, width, count)
    assert got.tolist() == values[:count]


@settings(max_examples=300, deadline=None)
@given(_hybrid_case(), st.data())
def test_hybrid_search_finds_exactly_the_wanted_ids(
    case: tuple[list[int], int, list[tuple[bool, int]]], data: st.DataObject
) -> None:
    values, width, plan = case
    buf = _encode_hybrid(values, width, plan)
    count = data.draw(st.integers(0, len(values)))
    pool = [*sorted(set(values)), (1 << width) - 1, 0]
    ids = np.array(sorted(set(data.draw(st.lists(st.sampled_from(pool), min_size=1,
                                                   max_size=5)))), dtype=np.intp)
    got = encoded.find_hybrid(buf, 0, len(buf), width, count, ids)
    want = [i for i, v in enumerate(values[:count]) if v in set(ids.tolist())]
    assert got.tolist() == want


@settings(max_examples=300, deadline=None)
@given(_hybrid_case(), st.data())
def test_hybrid_values_at_positions_are_the_decoded_ones(
    case: tuple[list[int], int, list[tuple[bool, int]]], data: st.DataObject
) -> None:
    values, width, plan = case
    buf = b"\xaa" + _encode_hybrid(values, width, plan) + b"\xbb"
    count = data.draw(st.integers(0, len(values)))
    at = sorted(set(data.draw(st.lists(st.integers(0, max(count - 1, 0)), max_size=12))))
    at = [a for a in at if a < count]
    got = encoded.decode_hybrid_at(buf, 1, len(buf) - 1, width, count, np.array(at, np.intp))
    assert got.tolist() == [values[a] for a in at]


def test_hybrid_rejects_short_data() -> None:
    buf = _encode_hybrid([1, 2, 3, 4, 5, 6, 7, 0], 3, [(True, 8)])
    with pytest.raises(ValueError):
        encoded.decode_hybrid(buf, 0, len(buf), 3, 9)
    with pytest.raises(ValueError):
        encoded.decode_hybrid(bytes([4 << 1, 9]), 0, 2, 3, 4)  # RLE value 9 > 3 bits


# ---------------------------------------------------------------- random files

_TYPES: dict[str, pa.DataType] = {
    "int32": pa.int32(), "int64": pa.int64(), "float32": pa.float32(),
    "float64": pa.float64(), "uint32": pa.uint32(), "ts_ms": pa.timestamp("ms"),
    "ts_us_utc": pa.timestamp("us", tz="UTC"), "date": pa.date32(),
    "time_us": pa.time64("us"), "string": pa.string(), "binary": pa.binary(),
}


@st.composite
def _column(draw: st.DrawFn, kind: str, n: int) -> pa.Array:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    distinct = draw(st.sampled_from([1, 3, 40, 5000]))
    pool = rng.integers(-(2**31), 2**31 - 1, distinct)
    picks = pool[rng.integers(0, distinct, n)]
    null_rate = draw(st.sampled_from([0.0, 0.0, 0.1, 0.9, 1.0]))
    nulls = rng.random(n) < null_rate
    t = _TYPES[kind]
    if kind in ("float32", "float64"):
        vals = picks.astype(np.float64) / 7.0
        special = rng.random(n)
        vals[special < 0.05] = np.nan
        vals[(special >= 0.05) & (special < 0.08)] = -0.0
        vals[(special >= 0.08) & (special < 0.1)] = np.inf
        arr = pa.array(vals.astype(t.to_pandas_dtype()), mask=nulls, type=t)
    elif kind == "uint32":
        arr = pa.array(picks.astype(np.int64) & 0xFFFFFFFF, mask=nulls, type=t)
    elif kind in ("string", "binary"):
        words = [f"w{v % 997}".encode() for v in picks]
        arr = pa.array(words, mask=nulls, type=pa.binary()).cast(t)
    elif kind == "date":
        arr = pa.array(picks % 100_000, mask=nulls, type=pa.int32()).cast(t)
    elif kind == "time_us":
        arr = pa.array(np.abs(picks) * 20, mask=nulls, type=pa.int64()).cast(t)
    elif kind == "int32":
        arr = pa.array(picks.astype(np.int32), mask=nulls, type=t)
    else:  # int64 and timestamps: the same 64-bit integers
        arr = pa.array(picks * 1_000_003, mask=nulls, type=pa.int64()).cast(t)
    return arr


@st.composite
def _file(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    n = draw(st.integers(1, 3000))
    kinds = draw(st.lists(st.sampled_from(sorted(_TYPES)), min_size=1, max_size=3, unique=True))
    table = pa.table({k: draw(_column(k, n)) for k in kinds})
    required = draw(st.booleans())
    if required:
        table = table.cast(pa.schema([
            pa.field(f.name, f.type, nullable=table.column(f.name).null_count > 0)
            for f in table.schema
        ]))
    sink = io.BytesIO()
    pq.write_table(
        table, sink,
        compression=draw(st.sampled_from(CODECS)),
        data_page_version=draw(st.sampled_from(["1.0", "2.0"])),
        use_dictionary=draw(st.booleans()),
        # Small limits: the dictionary fills up and the writer falls back to PLAIN.
        dictionary_pagesize_limit=draw(st.sampled_from([64, 1024, 1 << 20])),
        write_page_index=True,
        data_page_size=draw(st.sampled_from([256, 4096, 1 << 20])),
        row_group_size=draw(st.sampled_from([700, 5000])),
        write_statistics=True,
    )
    return sink.getvalue(), kinds


def _open(data: bytes, tmp: Path) -> ParquetFile:
    path = tmp / "f.parquet"
    path.write_bytes(data)
    return ParquetFile.open(path)


def _raw(pf: ParquetFile, rg: int, col: int) -> bytes:
    start, length = chunk_range(pf.column_meta(rg, col))
    return pf.read_bytes(start, length)


def _predicates(arr: pa.Array, rng: np.random.Generator) -> list[Callable[[Any], Any]]:
    """Predicates built from values the column holds (and NULL / NaN tests)."""
    base = arr.type.value_type if pa.types.is_dictionary(arr.type) else arr.type
    out: list[Callable[[Any], Any]] = [pc.is_null, pc.is_valid]
    valid = arr.drop_null()
    if len(valid):
        v = valid[int(rng.integers(0, len(valid)))]
        out += [lambda a, v=v: pc.equal(a, v), lambda a, v=v: pc.less(a, v),
                lambda a, v=v: pc.greater_equal(a, v), lambda a, v=v: pc.not_equal(a, v)]
    if pa.types.is_floating(base):
        out.append(lambda a: pc.is_nan(a))
    return out


def _same(got: pa.Array, want: pa.Array) -> bool:
    """Equal values and nulls; floats compared bit for bit (NaN and -0.0 kept as stored)."""
    if got.type != want.type or len(got) != len(want):
        return False
    if pa.types.is_floating(want.type):
        if not pc.is_valid(got).equals(pc.is_valid(want)):
            return False
        a = got.fill_null(0).to_numpy(zero_copy_only=False)
        b = want.fill_null(0).to_numpy(zero_copy_only=False)
        uint = np.uint32 if a.dtype.itemsize == 4 else np.uint64
        return bool(np.array_equal(a.view(uint), b.view(uint)))
    return bool(got.equals(want))


def _reference(path: Path, rg: int, name: str) -> pa.Array:
    col = pq.ParquetFile(path).read_row_group(rg, columns=[name]).column(0)
    return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)


def _positions(mask: Any) -> list[int]:
    return np.flatnonzero(pc.fill_null(mask, False).to_numpy(zero_copy_only=False)).tolist()


def _check_file(path: Path, rng: np.random.Generator) -> int:
    """Every chunk this module handles, against pyarrow; returns how many it handled."""
    pf = ParquetFile.open(path)
    schema = arrow_schema(pf)
    handled = 0
    try:
        for rg in range(len(pf.metadata.row_groups or [])):
            for leaf in pf.schema.leaves:
                if len(leaf.path) != 1:
                    continue
                target = schema.field(leaf.path[0]).type
                raw = _raw(pf, rg, leaf.index)
                try:
                    expected = _reference(path, rg, leaf.path[0])
                except (pa.ArrowException, OSError):
                    continue
                got = encoded.decode_chunk(pf, rg, leaf.index, target, raw)
                if got is not None:
                    handled += 1
                    plain = got.cast(expected.type) if pa.types.is_dictionary(got.type) else got
                    assert _same(plain, expected), (path, rg, leaf.name)
                for pred in _predicates(expected, rng):
                    def evaluate(a: pa.Array, pred: Any = pred) -> pa.BooleanArray:
                        return pc.fill_null(pred(a), False)

                    rows = encoded.matching_rows(pf, rg, leaf.index, target, raw, evaluate)
                    if rows is not None:
                        assert rows.tolist() == _positions(pred(expected)), (path, rg, leaf.name)
                oi = pf.offset_index(rg, leaf.index)
                if oi is None or not oi.page_locations:
                    continue
                n_pages = len(oi.page_locations)
                pages = sorted(rng.choice(n_pages, size=int(rng.integers(1, n_pages + 1)),
                                          replace=False).tolist())
                cache = page_values.Dictionaries()
                firsts_ = [loc.first_row_index or 0 for loc in oi.page_locations]
                ends_ = [*firsts_[1:], len(expected)]

                def fetch(off: int, n: int) -> bytes:
                    return pf.read_bytes(off, n)

                arr = page_values.decode_pages(pf, rg, leaf.index, pages, fetch, target, cache)
                if arr is not None:
                    firsts = [loc.first_row_index or 0 for loc in oi.page_locations]
                    ends = [*firsts[1:], len(expected)]
                    want = pa.concat_arrays([expected.slice(firsts[p], ends[p] - firsts[p])
                                             for p in pages])
                    assert _same(arr, want), (path, rg, leaf.name, pages)
                # Predicates on those pages only (dictionary page read from the prefix).
                in_pages = {r for p in pages for r in range(firsts_[p], ends_[p])}
                for pred in _predicates(expected, rng):
                    def evaluate_(a: pa.Array, pred: Any = pred) -> pa.BooleanArray:
                        return pc.fill_null(pred(a), False)

                    rows = encoded.matching_page_rows(pf, rg, leaf.index, target, pages, fetch,
                                                      evaluate_)
                    if rows is not None:
                        want_rows = [r for r in _positions(pred(expected)) if r in in_pages]
                        assert rows.tolist() == want_rows, (path, rg, leaf.name, pages)
                # A few rows of each page, page boundaries included (the sparse path).
                firsts = [loc.first_row_index or 0 for loc in oi.page_locations]
                ends = [*firsts[1:], len(expected)]
                at = []
                for p in pages:
                    size = ends[p] - firsts[p]
                    some = rng.choice(size, size=int(rng.integers(1, min(size, 5) + 1)),
                                      replace=False)
                    at.append(np.unique(np.concatenate((some, [0, size - 1]))).astype(np.intp))
                rows = np.concatenate([firsts[p] + a for p, a in zip(pages, at, strict=True)])
                # With the dictionary decoded, then with a fresh cache (its first use:
                # only the wanted entries taken).
                for dictionaries in (cache, page_values.Dictionaries()):
                    arr = page_values.decode_pages(pf, rg, leaf.index, pages, fetch, target,
                                                   dictionaries, at=at)
                    if arr is not None:
                        assert _same(arr, expected.take(pa.array(rows))), (
                            path, rg, leaf.name, pages)
    finally:
        pf.close()
    return handled


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_file(), seed=st.integers(0, 2**32 - 1))
def test_random_pyarrow_files_decode_and_match_like_pyarrow(
    case: tuple[bytes, list[str]], seed: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    data, _kinds = case
    tmp = tmp_path_factory.mktemp("enc")
    path = tmp / "f.parquet"
    path.write_bytes(data)
    _check_file(path, np.random.default_rng(seed))


@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_and_page_version_is_handled(tmp_path: Path, codec: str, version: str) -> None:
    """The fast paths really run (not only fall back) for every codec and page version."""
    rng = np.random.default_rng(5)
    n = 20_000
    table = pa.table({
        "i": pa.array(rng.integers(0, 50, n), mask=rng.random(n) < 0.1),
        "f": pa.array(np.where(rng.random(n) < 0.05, np.nan, rng.random(n))),
        "s": pa.array([f"v{k}" for k in rng.integers(0, 30, n)]),
        "big": pa.array(rng.integers(0, 10**12, n)),  # dictionary falls back to PLAIN
    })
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, compression=codec, data_page_version=version,
                   write_page_index=True, data_page_size=8192, row_group_size=8000,
                   dictionary_pagesize_limit=16_384)
    handled = _check_file(path, rng)
    assert handled == 4 * 3  # every chunk of every row group


@pytest.fixture
def gather_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """decompress.gather on pages of any size (by default it declines small ones, whose
    whole decompression costs as much): the small files below exercise it too."""
    monkeypatch.setattr(decompress, "_GATHER_MAX_SHARE", 1.0)


@pytest.mark.parametrize("name", sorted(writers.WRITERS))
def test_writer_files(written_files: writers.FileCache, name: str, gather_everywhere: None
                      ) -> None:
    _check_file(written_files[name], np.random.default_rng(1))


CORPUS_FILES = [
    "alltypes_plain.parquet", "alltypes_plain.snappy.parquet", "alltypes_dictionary.parquet",
    "alltypes_tiny_pages.parquet", "alltypes_tiny_pages_plain.parquet",
    "datapage_v2.snappy.parquet", "datapage_v1-snappy-compressed-checksum.parquet",
    "datapage_v1-uncompressed-checksum.parquet", "dict-page-offset-zero.parquet",
    "int32_with_null_pages.parquet", "nan_in_stats.parquet", "nulls.snappy.parquet",
    "lz4_raw_compressed.parquet", "lz4_raw_compressed_larger.parquet",
    "hadoop_lz4_compressed.parquet", "non_hadoop_lz4_compressed.parquet",
    "floating_orders_nan_count.parquet", "nonnullable.impala.parquet",
    "delta_binary_packed.parquet", "byte_stream_split.zstd.parquet",
    "int32_decimal.parquet", "int64_decimal.parquet", "int96_from_spark.parquet",
    "data_index_bloom_encoding_stats.parquet", "concatenated_gzip_members.parquet",
]


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_files(name: str, gather_everywhere: None) -> None:
    path = CORPUS / name
    if not path.exists():
        missing(f"{name} is not in the corpus")
    _check_file(path, np.random.default_rng(2))


# ---------------------------------------------------------------- through the scanner


def test_scans_use_the_encoded_paths_and_agree_with_pyarrow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Full-row-group predicates and late-materialized pages go through this module,
    and the scan returns what pyarrow's read + filter returns."""
    rng = np.random.default_rng(9)
    n = 60_000
    cats = np.array([f"c{i}" for i in range(20)] + ["rare"])
    idx = rng.integers(0, 20, n)
    idx[rng.choice(n, 7, replace=False)] = 20
    table = pa.table({
        "id": np.arange(n, dtype=np.int64),
        "category": pa.array(cats[idx]),
        "user_id": rng.integers(0, 10**12, n),
        "amount": np.round(rng.random(n) * 100, 2),
    })
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, compression="snappy", write_page_index=True,
                   row_group_size=20_000, data_page_size=1 << 30)
    calls = {"match": 0, "pages": 0}
    match, pages = encoded.matching_rows, page_values.decode_pages

    def spy_match(*a: Any, **k: Any) -> Any:
        out = match(*a, **k)
        calls["match"] += out is not None
        return out

    def spy_pages(*a: Any, **k: Any) -> Any:
        out = pages(*a, **k)
        calls["pages"] += out is not None
        return out

    monkeypatch.setattr(encoded, "matching_rows", spy_match)
    monkeypatch.setattr(page_values, "decode_pages", spy_pages)
    uid = int(table.column("user_id")[12345].as_py())
    ds = pqindex.dataset(str(path))
    for where, ref in [
        ("category = 'rare'", pc.equal(table.column("category"), "rare")),
        (f"user_id = {uid}", pc.equal(table.column("user_id"), uid)),
        ("amount < 1.5", pc.less(table.column("amount"), 1.5)),
    ]:
        got = ds.scan(columns=["id", "amount"], where=where).to_table()
        want = table.filter(ref).select(["id", "amount"])
        assert got.sort_by("id").equals(want), where
    assert calls["match"] >= 3 and calls["pages"] >= 2


@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("codec", CODECS)
def test_pages_decoded_from_many_threads_match_pyarrow(
    tmp_path: Path, codec: str, version: str
) -> None:
    """Pages and dictionary pages decompressed side by side on a pool (as row groups
    are decoded) decode as pyarrow does, for every codec: Arrow's gzip codec holds
    stream state, so a codec object shared between threads would garble pages."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(11)
    n = 24_000
    table = pa.table({
        "i": pa.array(rng.integers(0, 50, n), mask=rng.random(n) < 0.1),
        "big": pa.array(rng.integers(0, 10**12, n)),  # dictionary falls back to PLAIN
        "f": pa.array(rng.random(n), mask=rng.random(n) < 0.02),
    })
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, compression=codec, data_page_version=version,
                   write_page_index=True, data_page_size=8192, row_group_size=6000,
                   dictionary_pagesize_limit=16_384)
    pf = ParquetFile.open(path)
    schema = arrow_schema(pf)
    jobs = [(rg, col) for rg in range(pf.num_row_groups) for col in range(3)]

    def decode(job: tuple[int, int]) -> tuple[bool, bool]:
        rg, col = job
        name = pf.leaf(col).path[0]
        pages = list(range(pf.data_page_count(rg, col)))
        at = [np.arange(0, k, 7) for k in (pf.page_rows(rg, col) or [])]
        want = _reference(path, rg, name)
        whole = page_values.decode_pages(pf, rg, col, pages, pf.read_bytes,
                                     schema.field(name).type, page_values.Dictionaries())
        some = page_values.decode_pages(pf, rg, col, pages, pf.read_bytes,
                                    schema.field(name).type, page_values.Dictionaries(), at=at)
        firsts = np.cumsum([0, *(pf.page_rows(rg, col) or [])])[:-1]
        rows = np.concatenate([a + f for a, f in zip(at, firsts, strict=True)])
        assert whole is not None and some is not None  # the fast path ran
        return _same(whole, want), _same(some, want.take(pa.array(rows)))

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(decode, jobs * 4))
    assert results == [(True, True)] * len(jobs) * 4


# ------------------------------------------- a few rows, only their dictionary entries


@pytest.fixture(scope="module")
def big_dictionary_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """pyarrow's defaults with snappy: 1 MiB dictionary pages (``id`` falls back to
    PLAIN mid-chunk), data pages v1 and v2, nulls in ``amount`` and ``small``, NaN."""
    rng = np.random.default_rng(12)
    n = 150_000
    amount = rng.integers(0, 90_000, n) / 100.0
    amount[rng.random(n) < 0.001] = np.nan
    t = pa.table({
        "id": np.arange(n, dtype=np.int64) * 7,
        "ts": pa.array(np.arange(n, dtype=np.int64) * 1000 + 5, pa.timestamp("us", "UTC")),
        "amount": pa.array(amount, mask=rng.random(n) < 0.05),
        "small": pa.array(rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32),
                          mask=rng.random(n) < 0.3),
        "f": rng.random(n).astype(np.float32),
    })
    out = []
    for version in ("1.0", "2.0"):
        path = tmp_path_factory.mktemp("bigdict") / f"v{version}.parquet"
        pq.write_table(t, path, row_group_size=n, write_page_index=True, compression="snappy",
                       max_rows_per_page=10_000, data_page_version=version)
        out.append(path)
    return out


@pytest.mark.parametrize("version", [0, 1])
def test_a_few_rows_decode_from_a_few_dictionary_entries(
        big_dictionary_files: list[Path], version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh cache (a cold query): only the wanted dictionary entries and values of
    PLAIN pages are decompressed; the same cache again decodes the dictionary whole and
    keeps it. Every answer against pyarrow's."""
    calls: list[bool] = []
    real = page_values.gather

    def spy(*args: Any) -> Any:
        found = real(*args)
        calls.append(found is not None)
        return found

    monkeypatch.setattr(page_values, "gather", spy)
    path = big_dictionary_files[version]
    rng = np.random.default_rng(version)
    table = pq.read_table(path)
    pf = ParquetFile.open(path)
    schema = arrow_schema(pf)
    try:
        for leaf in pf.schema.leaves:
            expected = table.column(leaf.name).combine_chunks()
            target = schema.field(leaf.name).type
            oi = pf.offset_index(0, leaf.index)
            assert oi is not None and oi.page_locations
            firsts = [loc.first_row_index or 0 for loc in oi.page_locations]
            ends = [*firsts[1:], len(expected)]
            for trial in range(6):
                pages = sorted(rng.choice(len(firsts), int(rng.integers(1, 4)), replace=False)
                               .tolist())
                at = [np.unique(rng.integers(0, ends[p] - firsts[p], int(rng.integers(1, 4))))
                      .astype(np.intp) for p in pages]
                rows = pa.array(np.concatenate([firsts[p] + a for p, a in zip(pages, at,
                                                                              strict=True)]))
                cache = page_values.Dictionaries()
                for use in range(3):  # first use: entries only; then whole, then kept
                    got = page_values.decode_pages(pf, 0, leaf.index, pages, pf.read_bytes, target,
                                               cache, at=at)
                    assert got is not None, (leaf.name, pages)
                    assert _same(got, expected.take(rows)), (leaf.name, pages, at, use, trial)
    finally:
        pf.close()
    # Dictionary entries and PLAIN values were gathered, not every page decompressed.
    assert sum(calls) > 20, calls
