"""Sums of whole column chunks from their encoded pages (``scan/sums.py``,
``encoded.chunk_sum``, ``hybrid.dictionary_sum`` and the C kernels behind them).

References: a plain-Python sum of the encoder's values (the dictionary sums, C
kernel and numpy code alike), cramjam's snappy decoder (the batched C one),
and for ``Dataset.aggregate`` a full pyarrow read summed exactly in Python
(``math.fsum`` for floats, ``sum`` of ints), over files of several writers,
every codec, v1 and v2 pages, nulls, NaN and infinities, dictionary and PLAIN
pages (and chunks that fall from one to the other), the corpus, S3.
"""

from __future__ import annotations

import math
import random
import zlib
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext
from pathlib import Path
from typing import Any

import cramjam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pqindex
from conftest import CORPUS, import_or_missing
from pqindex.errors import PqIndexError
from pqindex.format.file import chunk_range
from pqindex.scan import hybrid
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)
from test_hybrid_c import Plan, _case, _encode, _expected
from writers import WRITERS

_KINDS = [np.float64, np.float32, np.int64, np.int32, np.uint64, np.uint32]


def _reference(values: list[int], dictionary: np.ndarray) -> Any:
    picked = [dictionary[v].item() for v in values]
    if dictionary.dtype.kind == "f":
        return math.fsum(picked) if all(math.isfinite(x) for x in picked) else sum(picked)
    return sum(int(x) for x in picked)


def _close(got: Any, want: Any) -> bool:
    if isinstance(want, float):
        if math.isnan(want):
            return isinstance(got, float) and math.isnan(got)
        return got == want or abs(got - want) <= 1e-12 * max(abs(want), 1.0)
    return type(got) is int and got == want


# ---------------------------------------------------------------- dictionary sums


@settings(max_examples=300, deadline=None)
@given(_case(st.integers(1, 20)), st.sampled_from(_KINDS), st.integers(0, 2**32 - 1),
       st.integers(1, 3))
def test_dictionary_sums_add_the_entries_the_indices_name(
    case: tuple[list[int], int, Plan], kind: Any, seed: int, streams: int
) -> None:
    values, width, plan = case
    count = sum(n for _, n in plan)
    expected = _expected(values, plan, count)
    rng = np.random.default_rng(seed)
    size = max(expected, default=0) + 1 + int(rng.integers(0, 3))
    if np.dtype(kind).kind == "f":
        dictionary = (rng.normal(0, 1e6, size)).astype(kind)
    else:
        info = np.iinfo(kind)
        dictionary = rng.integers(info.min, info.max, size, dtype=kind, endpoint=True)
    data = _encode(values, width, plan)
    parts = [(data, 0, len(data), width, count)] * streams
    want = _reference(expected * streams, dictionary)
    got = hybrid.dictionary_sum(parts, dictionary)
    assert _close(got, want), (got, want)
    saved = hybrid._c
    hybrid._c = None  # the numpy code
    try:
        assert _close(hybrid.dictionary_sum(parts, dictionary), want)
    finally:
        hybrid._c = saved


def test_dictionary_sums_of_nan_infinities_and_extreme_integers() -> None:
    data = _encode([0, 1, 2, 1], 2, [(True, 4)])
    stream = [(data, 0, len(data), 2, 4)]
    assert math.isnan(hybrid.dictionary_sum(stream, np.array([1.0, np.nan, 2.0])))
    assert hybrid.dictionary_sum(stream, np.array([1.0, np.inf, 2.0])) == math.inf
    assert math.isnan(hybrid.dictionary_sum(
        [(_encode([0, 1], 1, [(True, 2)]), 0, 2, 1, 2)], np.array([np.inf, -np.inf])))
    big = np.array([2**63 - 1, 2**63 - 1, -(2**63)], dtype=np.int64)
    assert hybrid.dictionary_sum(stream, big) == 3 * (2**63 - 1) - 2**63
    top = np.array([2**64 - 1] * 3, dtype=np.uint64)
    assert hybrid.dictionary_sum(stream, top) == 4 * (2**64 - 1)
    rle = _encode([2] * 1000, 2, [(False, 1000)])  # an RLE run: value times count
    assert hybrid.dictionary_sum([(rle, 0, len(rle), 2, 1000)], big) == -1000 * 2**63


@pytest.mark.parametrize("numpy_code", [False, True])
def test_an_index_past_the_dictionary_is_an_error(numpy_code: bool,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    if numpy_code:
        monkeypatch.setattr(hybrid, "_c", None)
    for plan, values in (([(True, 8)], [0, 1, 2, 3, 4, 5, 6, 7]), ([(False, 9)], [7] * 9)):
        data = _encode(values, 3, plan)
        with pytest.raises(ValueError, match="not below 5"):
            hybrid.dictionary_sum([(data, 0, len(data), 3, len(values))],
                                  np.arange(5, dtype=np.float64))
    with pytest.raises(ValueError, match="runs end"):
        hybrid.dictionary_sum([(b"", 0, 0, 3, 9)], np.arange(8, dtype=np.float64))
    with pytest.raises(ValueError, match="dictionary of"):
        hybrid.dictionary_sum([(b"", 0, 0, 3, 0)], np.arange(3, dtype=np.int16))


# ---------------------------------------------------------------- batched snappy


def test_batched_snappy_decodes_what_cramjam_decodes() -> None:
    _snappy = import_or_missing("pqindex.scan._snappy", "the C module pqindex.scan._snappy")
    rng = np.random.default_rng(20261127)

    def sample(n: int) -> bytes:
        kind = int(rng.integers(0, 5))
        if kind == 0:
            return rng.bytes(n)
        if kind == 1:
            return bytes(rng.integers(0, 4, n, dtype=np.uint8))
        if kind == 2:
            step = int(rng.integers(1, 1000))
            return (np.arange(n // 8 + 1, dtype=np.int64) * step).tobytes()[:n]
        if kind == 3:
            runs = np.repeat(rng.integers(0, 256, n // 3 + 1, dtype=np.uint8),
                             int(rng.integers(1, 70)))
            return bytes(runs[:n])
        return (b"abcdefghijk" * (n // 11 + 1))[:n]

    accepted = refused = 0
    for _ in range(600):
        parts = []
        for _ in range(int(rng.integers(1, 5))):
            d = sample(int(rng.integers(0, 70_000)))
            c = bytearray(cramjam.snappy.compress_raw(d))
            size = len(d)
            damage = int(rng.integers(0, 6)) if len(c) > 2 else 5
            if damage == 0:
                c = c[: int(rng.integers(1, len(c)))]
            elif damage == 1:
                c[int(rng.integers(0, len(c)))] ^= 1 << int(rng.integers(0, 8))
            elif damage == 2:
                size = max(0, size + int(rng.integers(-3, 4)))
            parts.append((bytes(c), size))
        out = memoryview(pa.allocate_buffer(sum(n for _, n in parts)))
        pos = 0
        for (c, size), ok in zip(parts, _snappy.decompress_many(parts, out), strict=True):
            ref = np.empty(size, dtype=np.uint8)
            try:
                ref_ok = cramjam.snappy.decompress_raw_into(c, ref) == size
            except Exception:  # cramjam.DecompressionError
                ref_ok = False
            assert ok == ref_ok
            if ok:
                assert bytes(out[pos : pos + size]) == ref.tobytes()
                accepted += 1
            else:
                refused += 1
            pos += size
    assert accepted > 500 and refused > 100


# ---------------------------------------------------------------- aggregates


AGGS = ["sum({c})", "count({c})", "avg({c})"]


def _expected_aggs(path: Path, columns: list[str]) -> dict[str, Any]:
    t = pq.read_table(path, columns=columns)
    out: dict[str, Any] = {}
    for c in columns:
        vals = [v for v in t.column(c).to_pylist() if v is not None]
        if pa.types.is_floating(t.schema.field(c).type):
            total: Any = (math.fsum(vals) if all(math.isfinite(v) for v in vals)
                          else sum(vals)) if vals else None
        else:
            total = sum(vals) if vals else None
        out[f"sum({c})"] = total
        out[f"count({c})"] = len(vals)
        out[f"avg({c})"] = None if not vals else total / len(vals)
        t_c = t.schema.field(c).type
        if vals and pa.types.is_decimal(t_c):  # 4 more digits, half up (as Spark's avg)
            with localcontext(Context(prec=100)):
                out[f"avg({c})"] = (total / len(vals)).quantize(
                    Decimal(1).scaleb(-t_c.scale - 4), rounding=ROUND_HALF_UP)
    return out


def _check(path: Path, columns: list[str], **kw: Any) -> pqindex.Dataset:
    ds = pqindex.dataset(str(path), **kw)
    quoted = {c: '"' + c.replace('"', '""') + '"' for c in columns}
    aggs = [(a.format(c=c), a.format(c=quoted[c])) for c in columns for a in AGGS]
    got = ds.aggregate([q for _, q in aggs])
    want = _expected_aggs(path, columns)
    for a, q in aggs:
        w = want[a]
        g = got[q]
        if w is None:
            assert g is None, (path.name, a, g)
        elif isinstance(w, float):
            assert isinstance(g, float) and _close(g, w), (path.name, a, g, w)
        else:
            assert g == w and type(g) is type(w), (path.name, a, g, w)
    return ds


def _table(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    nulls = rng.random(rows) < 0.1
    few = rng.integers(0, 300, rows)  # dictionary-encoded throughout
    floats = np.round(rng.normal(0, 1e3, rows), 2)
    special = floats.copy()
    special[rng.integers(0, rows, 3)] = np.nan if seed % 3 == 0 else np.inf
    return pa.table({
        "i64": pa.array(rng.integers(-(2**62), 2**62, rows), pa.int64()),
        "i32": pa.array(few.astype(np.int32) - 150, pa.int32(), mask=nulls),
        "u32": pa.array(rng.integers(0, 2**32, rows, dtype=np.uint64).astype(np.uint32)),
        "u64": pa.array(rng.integers(2**63, 2**64 - 1, rows, dtype=np.uint64), pa.uint64()),
        "f64": pa.array(floats, mask=nulls),
        "special": pa.array(special),
        "f32": pa.array((few / 7).astype(np.float32)),
        "dict_then_plain": pa.array(rng.integers(0, 2**40, rows)),  # past 1 MiB: PLAIN
        "i8": pa.array((few % 100).astype(np.int8)),  # summed by pyarrow
        "dec": pa.array([None if n else int(v) for n, v in zip(nulls, few, strict=True)],
                        pa.decimal128(9, 0)),
        "allnull": pa.array([None] * rows, pa.float64()),
    })


NUMERIC = ["i64", "i32", "u32", "u64", "f64", "special", "f32", "dict_then_plain", "i8", "dec",
           "allnull"]
# Summed on their pages (allnull: answered by the footer's null count, never read).
SUMMED = ["i64", "i32", "u32", "u64", "f64", "special", "f32", "dict_then_plain"]


@pytest.mark.parametrize("compression", ["snappy", "zstd", "gzip", "lz4", "brotli", "none"])
@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("dictionary", [True, False])
def test_aggregates_from_encoded_pages_equal_the_full_read(
    tmp_path: Path, compression: str, version: str, dictionary: bool
) -> None:
    path = tmp_path / "t.parquet"
    t = _table(150_000, zlib.crc32(f"{compression}{version}{dictionary}".encode()) % 1000)
    pq.write_table(t, path, row_group_size=60_000, compression=compression,
                   data_page_version=version, use_dictionary=dictionary,
                   write_page_index=True, data_page_size=64 * 1024)
    ds = _check(path, NUMERIC)
    report = ds.last_aggregate_report
    if compression != "lz4":  # pyarrow's "lz4" is LZ4_RAW: decoded too
        assert report.chunks_summed == 3 * len(SUMMED), report.to_dict()
    # Every chunk read once: summed ones here, the rest by pyarrow.
    pf = pq.ParquetFile(path).metadata
    names = [pf.schema.column(i).name for i in range(pf.num_columns)]
    chunk_bytes = sum(pf.row_group(rg).column(names.index(c)).total_compressed_size
                      for rg in range(pf.num_row_groups) for c in NUMERIC if c != "allnull")
    assert report.bytes_read == chunk_bytes


def test_the_c_kernels_and_numpy_code_agree_on_files(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(_table(50_000, 7), path, row_group_size=20_000, write_page_index=True)
    first = pqindex.dataset(str(path)).aggregate([f"sum({c})" for c in SUMMED])
    monkeypatch.setattr(hybrid, "_c", None)
    import pqindex.scan.decompress as decompress

    monkeypatch.setattr(decompress, "_snappy", None)
    again = pqindex.dataset(str(path)).aggregate([f"sum({c})" for c in SUMMED])
    for k, v in first.items():
        assert _close(again[k], v) if v is not None else again[k] is None, k
    _check(path, SUMMED)


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_aggregates_on_other_writers_files(written_files: Any, name: str) -> None:
    path = written_files[name]
    schema = pq.read_schema(path)
    numeric = [f.name for f in schema
               if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)]
    assert numeric
    _check(path, numeric)


CORPUS_FILES = sorted(p for p in (CORPUS / "data").glob("*.parquet")
                      if "encrypt" not in p.name and p.stat().st_size < 4_000_000)


def test_aggregates_on_the_corpus() -> None:
    checked = failed = 0
    for path in CORPUS_FILES:
        try:
            schema = pq.read_schema(path)
            numeric = [f.name for f in schema if pa.types.is_integer(f.type) or (
                pa.types.is_floating(f.type) and f.type != pa.float16())]  # no float16 sum
            if not numeric:  # nothing to sum (and large_string_map inflates to 2 GB)
                continue
            pq.read_table(path, columns=numeric)
        except Exception:  # pyarrow refuses it: pqindex must say so
            failed += 1
            with pytest.raises(PqIndexError):
                ds = pqindex.dataset(str(path))
                cols = [f.name for f in ds.schema
                        if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)]
                ds.aggregate([f"sum({c})" for c in cols] or ["count(*)"])
                pqindex.dataset(str(path)).to_table()
            continue
        _check(path, numeric)
        checked += 1
    assert checked > 20


def test_damaged_dictionary_indices_are_a_pqindex_error(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    rows = 40_000
    rng = np.random.default_rng(3)
    pq.write_table(pa.table({"x": rng.integers(0, 50, rows).astype(np.float64)}), path,
                   compression="none", write_page_index=True, row_group_size=rows)
    meta = pq.ParquetFile(path).metadata.row_group(0).column(0)
    start = meta.dictionary_page_offset
    end = start + meta.total_compressed_size
    data = bytearray(path.read_bytes())
    rnd = random.Random(5)
    damaged = tmp_path / "damaged.parquet"
    for _ in range(20):
        copy = bytearray(data)
        at = rnd.randrange(end - 2000, end)  # inside the last data page's indices
        copy[at] = 0xFF
        damaged.write_bytes(bytes(copy))
        try:
            want = sum(pq.read_table(damaged).column(0).to_pylist())
        except Exception:  # pyarrow refuses it: pqindex must say so
            with pytest.raises(PqIndexError):
                pqindex.dataset(str(damaged)).aggregate(["sum(x)"])
            continue
        assert pqindex.dataset(str(damaged)).aggregate(["sum(x)"])["sum(x)"] == want


# ---------------------------------------------------------------- I/O


def test_local_sums_read_each_chunk_once_in_one_wave(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(_table(80_000, 1), path, row_group_size=20_000, write_page_index=True)
    ds = pqindex.dataset(str(path))
    ds.aggregate(["count(*)"])  # the footer
    (stats,) = ds.io_stats().values()
    requests, waves = stats.requests, stats.round_trips
    ds.aggregate(["sum(f64)", "sum(i64)"])
    report = ds.last_aggregate_report
    assert report.chunks_summed == 8
    meta = pq.ParquetFile(path).metadata
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    chunks = [meta.row_group(rg).column(names.index(c)) for rg in range(4)
              for c in ("f64", "i64")]
    ranges = sorted((c.dictionary_page_offset or c.data_page_offset, c.total_compressed_size)
                    for c in chunks)
    assert report.bytes_read == sum(n for _, n in ranges)
    # The columns' chunks are not adjacent: one request each, all in one wave.
    assert sorted(stats.trace[requests:]) == ranges
    assert stats.round_trips == waves + 1


def test_s3_sums_fetch_the_chunks_in_one_round_trip(
    s3: S3Endpoint, tmp_path: Path  # noqa: F811
) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(_table(80_000, 2), path, row_group_size=20_000, write_page_index=True)
    bucket = s3.new_bucket()
    s3.put(bucket, "t.parquet", path.read_bytes())
    ds = pqindex.dataset(f"s3://{bucket}/t.parquet", storage_options=s3.storage_options())
    ds.aggregate(["count(*)"])
    s3.reset_log()
    got = ds.aggregate(["sum(f64)", "sum(u64)"])
    want = _expected_aggs(path, ["f64", "u64"])
    assert _close(got["sum(f64)"], want["sum(f64)"]) and got["sum(u64)"] == want["sum(u64)"]
    assert ds.last_aggregate_report.chunks_summed == 8
    assert s3.waves == 1
    meta = pq.ParquetFile(path).metadata
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    chunks = [meta.row_group(rg).column(names.index(c)) for rg in range(4)
              for c in ("f64", "u64")]
    starts = [c.dictionary_page_offset or c.data_page_offset for c in chunks]
    size = sum(c.total_compressed_size for c in chunks)
    span = max(s + c.total_compressed_size for s, c in zip(starts, chunks, strict=True)) - min(
        starts)
    # Remote: ranges closer than a MiB are merged (REMOTE_MAX_GAP), never more than the span.
    assert size <= ds.last_aggregate_report.bytes_read <= span
    got_ranges = []
    for r in s3.requests:
        assert r.method == "GET" and r.range is not None
        lo, hi = r.range.removeprefix("bytes=").split("-")
        got_ranges.append((int(lo), int(hi) + 1))
    assert size <= sum(b - a for a, b in got_ranges) <= span


def test_chunk_ranges_are_what_the_report_counts(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(_table(30_000, 4), path, row_group_size=10_000, write_page_index=True)
    ds = pqindex.dataset(str(path))
    ds.aggregate(["sum(i32)"])
    pf = ds.plan(["i32"]).files[0].file
    assert pf is not None
    col = pf.schema.leaf("i32").index
    assert ds.last_aggregate_report.bytes_read == sum(
        chunk_range(pf.column_meta(rg, col))[1] for rg in range(pf.num_row_groups))
