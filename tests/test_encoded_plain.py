"""Whole PLAIN fixed-width chunks: predicates evaluated on their encoded pages.

A predicate on one column that is not returned, over every row of a row group,
runs on the chunk's pages (``encoded.matching_rows``) when the chunk is PLAIN
fixed-width (INT32 / INT64 / FLOAT / DOUBLE, no dictionary) as well as when it is
all-dictionary; a local file's chunk is then read by the row group's task, a
window at a time. The reference is always pyarrow: ``pq.read_table`` filtered
with ``pyarrow.compute``, or its decode of the same row group.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from itertools import pairwise
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
from pqindex.io.source import LocalFileSource
from pqindex.scan import encoded
from pqindex.scan.page_decode import arrow_schema

# The page-by-page flow's machinery, on small files: none of their row groups is
# read whole and filtered instead (conftest.page_by_page).
pytestmark = pytest.mark.usefixtures("page_by_page")

CORPUS = PARQUET_TESTING / "data"
CODECS = ["none", "snappy", "gzip", "brotli", "zstd", "lz4"]
NUMERIC = {"i32": pa.int32(), "i64": pa.int64(), "f32": pa.float32(), "f64": pa.float64()}


def _table(n: int, seed: int, null_rate: float = 0.1, nan_rate: float = 0.02) -> pa.Table:
    rng = np.random.default_rng(seed)
    cols: dict[str, Any] = {"row": np.arange(n, dtype=np.int64)}
    for name, t in NUMERIC.items():
        if pa.types.is_integer(t):
            info = np.iinfo(t.to_pandas_dtype())
            vals: np.ndarray = rng.integers(info.min, info.max, n, endpoint=True,
                                            dtype=t.to_pandas_dtype())
            small = rng.random(n) < 0.3  # values that repeat: equalities with many rows
            vals[small] = rng.integers(-5, 5, int(small.sum()))
        else:
            vals = (rng.integers(-50, 50, n) / 4).astype(t.to_pandas_dtype())
            special = rng.random(n)
            vals[special < nan_rate] = np.nan
            vals[(special >= nan_rate) & (special < nan_rate + 0.02)] = -0.0
            vals[(special >= 0.9) & (special < 0.91)] = np.inf
        cols[name] = pa.array(vals, type=t, mask=rng.random(n) < null_rate)
    cols["req"] = rng.integers(-1000, 1000, n, dtype=np.int64)  # required (no levels)
    schema = pa.schema([pa.field(k, v.type if isinstance(v, pa.Array) else pa.int64(),
                                 nullable=k != "req") for k, v in cols.items()])
    return pa.table(cols, schema=schema)


def _write(table: pa.Table, path: Path, **kw: Any) -> Path:
    kw.setdefault("use_dictionary", False)
    kw.setdefault("write_page_index", True)
    pq.write_table(table, path, **kw)
    return path


def _sql(v: Any) -> str:
    return repr(int(v)) if isinstance(v, (int, np.integer)) else repr(float(v))


def _predicates(table: pa.Table, col: str, rng: np.random.Generator
                ) -> list[tuple[str, Callable[[pa.Array], Any]]]:
    """(SQL, the same predicate with pyarrow.compute, IEEE semantics: NaN matches no
    comparison, ``-0.0 = 0.0``) from the finite values the column holds."""
    arr = table.column(col)
    finite = [v for v in arr.drop_null().to_pylist() if math.isfinite(v)]
    out: list[tuple[str, Callable[[pa.Array], Any]]] = [
        (f"{col} IS NULL", pc.is_null), (f"{col} IS NOT NULL", pc.is_valid)]
    if not finite:
        return out
    a, b = sorted(finite[int(i)] for i in rng.integers(0, len(finite), 2))
    some = [finite[int(i)] for i in rng.integers(0, len(finite), 3)]
    t = arr.type
    sa, sb = pa.scalar(a, t), pa.scalar(b, t)
    out += [
        (f"{col} = {_sql(a)}", lambda x: pc.equal(x, sa)),
        (f"{col} <> {_sql(a)}", lambda x: pc.not_equal(x, sa)),
        (f"{col} < {_sql(b)}", lambda x: pc.less(x, sb)),
        (f"{col} >= {_sql(a)}", lambda x: pc.greater_equal(x, sa)),
        (f"{col} BETWEEN {_sql(a)} AND {_sql(b)}",
         lambda x: pc.and_(pc.greater_equal(x, sa), pc.less_equal(x, sb))),
        (f"{col} IN ({', '.join(_sql(v) for v in some)})",
         lambda x: pc.or_(pc.or_(pc.equal(x, pa.scalar(some[0], t)),
                                 pc.equal(x, pa.scalar(some[1], t))),
                          pc.equal(x, pa.scalar(some[2], t)))),
    ]
    if pa.types.is_floating(t):
        out.append((f"isnan({col})", pc.is_nan))
    return out


class _Spy:
    """Counts the chunks ``encoded.matching_rows`` handled (a result, not None)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.handled = 0
        self.declined = 0
        real = encoded.matching_rows

        def spy(*a: Any, **k: Any) -> Any:
            out = real(*a, **k)
            if out is None:
                self.declined += 1
            else:
                self.handled += 1
            return out

        monkeypatch.setattr(encoded, "matching_rows", spy)


def _check_scan(path: Path, table: pa.Table, seed: int,
                columns: tuple[str, ...] = (*NUMERIC, "req")) -> int:
    """Every predicate on each of ``columns``, not returned, against pyarrow; returns
    how many scans ran."""
    rng = np.random.default_rng(seed)
    ds = pqindex.dataset(str(path))
    scans = 0
    for col in columns:
        for where, pred in _predicates(table, col, rng):
            want = table.filter(pc.fill_null(pred(table.column(col)), False))
            got = ds.scan(columns=["row", "i64" if col != "i64" else "f64"],
                          where=where).to_table()
            assert got.column("row").to_pylist() == want.column("row").to_pylist(), (
                path.name, where)
            scans += 1
    return scans


@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("codec", CODECS)
def test_plain_chunks_are_matched_on_their_pages_for_every_codec(
    tmp_path: Path, codec: str, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path really runs (every whole row group of a predicate column not
    returned), and the scan returns pyarrow's rows."""
    table = _table(12_000, seed=3)
    path = _write(table, tmp_path / "p.parquet", compression=codec, data_page_version=version,
                  row_group_size=5_000, data_page_size=4096)
    spy = _Spy(monkeypatch)
    scans = _check_scan(path, table, seed=4, columns=("i32", "i64", "req"))
    assert spy.declined == 0
    # Three row groups per scan; a few scans need no check (``req IS NULL`` skips every
    # row group, ``req IS NOT NULL`` matches all rows).
    assert scans * 3 - 6 <= spy.handled <= scans * 3
    # Float predicates stay with pyarrow (measured slower through Arrow when dense).
    spy.handled = 0
    _check_scan(path, table, seed=4, columns=("f32", "f64"))
    assert spy.handled == spy.declined == 0


def test_windows_of_every_size_read_each_byte_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk read through ``read(offset, length)``: windows in order, each starting
    where the last whole page ended (a page longer than the window in one of its own),
    every byte read once or twice at most, the rows those of pyarrow."""
    table = _table(20_000, seed=5)
    path = _write(table, tmp_path / "p.parquet", compression="zstd", row_group_size=20_000,
                  data_page_size=8192)
    pf = ParquetFile.open(path)
    schema = arrow_schema(pf)
    ref = pq.ParquetFile(path).read_row_group(0)
    try:
        for window in (64, 1000, 8192, 100_000, 1 << 20):
            monkeypatch.setattr(encoded, "_WINDOW_BYTES", window)
            for leaf in pf.schema.leaves:
                start, length = chunk_range(pf.column_meta(0, leaf.index))
                data = pf.read_bytes(start, length)
                reads: list[tuple[int, int]] = []

                def read(offset: int, n: int, data: bytes = data,
                         reads: list[tuple[int, int]] = reads) -> bytes:
                    reads.append((offset, n))
                    return data[offset : offset + n]

                expected = ref.column(leaf.name)
                value = expected.drop_null()[77]

                def evaluate(a: pa.Array, value: Any = value) -> Any:
                    return pc.fill_null(pc.equal(a, value), False)

                rows = encoded.matching_rows(pf, 0, leaf.index, schema.field(leaf.name).type,
                                             read, evaluate)
                assert rows is not None
                want = np.flatnonzero(evaluate(expected).to_numpy(zero_copy_only=False))
                assert rows.tolist() == want.tolist(), (window, leaf.name)
                assert reads[0][0] == 0 and sum(reads[-1]) == length
                for (o1, n1), (o2, n2) in pairwise(reads):
                    # The next window starts after the last whole page of this one,
                    # or here again, longer (no whole page fitted).
                    assert o1 < o2 <= o1 + n1 or (o2 == o1 and n2 > n1), (window, reads)
                    assert n2 <= max(window, n1 * 2, length - o2)
    finally:
        pf.close()


def test_a_local_chunk_is_read_by_its_row_group_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The predicate column of a local file is read in the row groups' tasks, not in
    the first wave: its windows tile each chunk exactly (nothing read twice), and the
    report counts each chunk as one request, as pyarrow's own reads are counted."""
    table = _table(30_000, seed=6)
    path = _write(table, tmp_path / "p.parquet", compression="snappy", row_group_size=10_000)
    monkeypatch.setattr(encoded, "_WINDOW_BYTES", 16 * 1024)
    reads: list[tuple[int, int]] = []
    real = LocalFileSource.read_into

    def spy(self: LocalFileSource, offset: int, out: Any) -> None:
        reads.append((offset, len(memoryview(out))))
        real(self, offset, out)

    monkeypatch.setattr(LocalFileSource, "read_into", spy)
    v = table.column("i64").drop_null()[1234].as_py()
    scan = pqindex.dataset(str(path)).scan(columns=["row"], where=f"i64 = {v}")
    got = scan.to_table()
    want = table.filter(pc.fill_null(pc.equal(table.column("i64"), v), False))
    assert got.column("row").to_pylist() == want.column("row").to_pylist()
    meta = pq.ParquetFile(path).metadata
    col = meta.schema.names.index("i64")
    chunks = []
    for rg in range(meta.num_row_groups):
        c = meta.row_group(rg).column(col)
        start = c.dictionary_page_offset or c.data_page_offset
        chunks.append((start, c.total_compressed_size))
    for start, length in chunks:
        mine = sorted((o, n) for o, n in reads if start <= o < start + length)
        # The windows cover the chunk without a gap or an overlap ...
        assert mine[0][0] == start
        assert all(o1 + n1 == o2 for (o1, n1), (o2, _) in pairwise(mine))
        assert mine[-1][0] + mine[-1][1] == start + length
    # ... and only those chunks are read that way.
    assert sum(n for _, n in reads) == sum(n for _, n in chunks)
    assert scan.report.bytes_read >= sum(n for _, n in chunks)


@pytest.mark.parametrize("use_dictionary", [False, True])
def test_all_plain_encoded_reads_the_footer(tmp_path: Path, use_dictionary: bool) -> None:
    table = _table(3_000, seed=7)
    path = _write(table, tmp_path / "p.parquet", use_dictionary=use_dictionary,
                  row_group_size=1_000)
    pf = ParquetFile.open(path)
    meta = pq.ParquetFile(path).metadata
    try:
        for rg in range(pf.num_row_groups):
            for leaf in pf.schema.leaves:
                c = meta.row_group(rg).column(leaf.index)
                plain = c.dictionary_page_offset is None and set(c.encodings) <= {"PLAIN", "RLE"}
                assert pf.all_plain_encoded(rg, leaf.index) is plain, (rg, leaf.name)
    finally:
        pf.close()


@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("codec", CODECS)
def test_dictionary_fallback_chunks_match_equalities_on_their_pages(
    tmp_path: Path, codec: str, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk that falls back from dictionary to PLAIN part way is matched on its
    pages for equalities and IN lists (few rows: the dictionary's entries compared
    once, its pages' indices searched, the PLAIN pages compared by numpy), with values
    from the dictionary part, the PLAIN part, absent and NULL; other predicates stay
    with pyarrow (a mask beats row numbers when many rows match). Rows are pyarrow's."""
    table = _table(20_000, seed=8)
    path = _write(table, tmp_path / "p.parquet", use_dictionary=True, compression=codec,
                  data_page_version=version, dictionary_pagesize_limit=2048,
                  row_group_size=10_000, data_page_size=4096)
    pf = ParquetFile.open(path)
    schema = arrow_schema(pf)
    mixed = 0
    for leaf in pf.schema.leaves:
        if leaf.name not in ("i32", "i64", "req"):
            continue
        for rg in range(pf.num_row_groups):
            if pf.all_dictionary_encoded(rg, leaf.index) is False and (
                    pf.all_plain_encoded(rg, leaf.index) is False):
                mixed += 1
                target = schema.field(leaf.name).type
                assert not encoded.worth_matching(pf, rg, leaf.index, target, whole=True,
                                                  on_values=True)
                assert encoded.worth_matching(pf, rg, leaf.index, target, whole=True,
                                              on_values=True, few=True)
    pf.close()
    assert mixed >= 4  # the fallback happened, in each column tried
    ds = pqindex.dataset(str(path))
    for col in ("i32", "i64", "req"):
        arr = table.column(col)
        valid = arr.drop_null()
        # Early rows: stored in the dictionary-encoded pages; late: in the PLAIN ones.
        early, late = valid[3].as_py(), valid[len(valid) - 5].as_py()
        # (where, pyarrow's mask, whether the chunks' pages must have answered it)
        cases: list[tuple[str, Any, bool]] = [
            (f"{col} = {early}", pc.equal(arr, early), True),
            (f"{col} = {late}", pc.equal(arr, late), True),
            (f"{col} IN ({early}, {late}, 7)",
             pc.is_in(arr, pa.array([early, late, 7], arr.type)), True),
            (f"{col} = 1234567", pc.equal(arr, 1234567), False),  # statistics may rule out
            (f"({col} = {late} OR {col} IS NULL)",
             pc.or_kleene(pc.equal(arr, late), pc.is_null(arr)), False),
        ]
        for where, mask, on_pages in cases:
            spy = _Spy(monkeypatch)
            want = table.filter(pc.fill_null(mask, False))
            got = ds.scan(columns=["row", "f64"], where=where).to_table()
            assert got.column("row").to_pylist() == want.column("row").to_pylist(), where
            if on_pages:
                assert spy.handled >= 1 and spy.declined == 0, where
        spy = _Spy(monkeypatch)
        dense = table.filter(pc.fill_null(pc.less(arr, late), False))
        got = ds.scan(columns=["row"], where=f"{col} < {late}").to_table()
        assert got.column("row").to_pylist() == dense.column("row").to_pylist()
        assert spy.handled == spy.declined == 0


@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("codec", ["none", "snappy", "zstd"])
def test_dictionary_encoded_pages_are_decompressed_only_when_they_may_match(
    tmp_path: Path, codec: str, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fallback chunk's dictionary-encoded pages are decompressed only where an entry
    of the dictionary matches or null rows do: a value stored in the PLAIN pages alone
    leaves them compressed. The rows are pyarrow's either way, null rows included where
    the predicate holds for NULL."""
    n = 6_000
    rng = np.random.default_rng(3)
    vals = pa.array(np.arange(n, dtype=np.int64) * 7, mask=rng.random(n) < 0.1)
    table = pa.table({"row": np.arange(n, dtype=np.int64), "v": vals})
    path = _write(table, tmp_path / "f.parquet", use_dictionary=True, compression=codec,
                  data_page_version=version, dictionary_pagesize_limit=1024,
                  row_group_size=n, data_page_size=1024)
    pf = ParquetFile.open(path)
    assert pf.all_dictionary_encoded(0, 1) is False and pf.all_plain_encoded(0, 1) is False
    raw = pf.source.read_ranges([chunk_range(pf.column_meta(0, 1))])[0]
    loads: list[int] = []
    batches: list[int] = []
    real = encoded._loaded

    def load(pages: Any) -> Any:  # deferred pages decompressed, in one batch per chunk
        loads.extend(p.first for p in pages)
        batches.append(len(pages))
        return real(pages)

    monkeypatch.setattr(encoded, "_loaded", load)
    valid = vals.drop_null().to_pylist()
    early, late = valid[2], valid[-3]  # in the dictionary; in a PLAIN page only
    pages = 0  # dictionary-encoded data pages: each read once its dictionary matches
    for value, deferred_read in ((late, False), (early, True), (-7, False)):
        loads.clear()
        rows = encoded.matching_rows(pf, 0, 1, pa.int64(), raw,
                                     lambda a, value=value: pc.equal(a, value))
        assert rows is not None
        want = np.flatnonzero(pc.fill_null(pc.equal(vals, value), False).to_numpy(
            zero_copy_only=False))
        assert rows.tolist() == want.tolist(), value
        assert bool(loads) is deferred_read, value
        pages = max(pages, len(loads))
    # NULL rows match: every dictionary-encoded page is read for them.
    loads.clear()
    rows = encoded.matching_rows(
        pf, 0, 1, pa.int64(), raw,
        lambda a: pc.fill_null(pc.or_kleene(pc.equal(a, late), pc.is_null(a)), True))
    assert rows is not None
    want_mask = pc.fill_null(pc.or_kleene(pc.equal(vals, late), pc.is_null(vals)), True)
    assert rows.tolist() == np.flatnonzero(want_mask.to_numpy(zero_copy_only=False)).tolist()
    assert sorted(loads) == loads and len(loads) == pages
    assert batches and all(b == pages for b in batches)
    pf.close()
    ds = pqindex.dataset(str(path))
    for value in (early, late, -7):
        got = ds.scan(columns=["row"], where=f"v = {value}").to_table()
        want_t = table.filter(pc.fill_null(pc.equal(vals, value), False))
        assert got.column("row").to_pylist() == want_t.column("row").to_pylist()


# ---------------------------------------------------------------- random files


@st.composite
def _fallback_file(draw: st.DrawFn) -> tuple[bytes, pa.Table]:
    n = draw(st.integers(1, 6000))
    table = _table(n, seed=draw(st.integers(0, 2**32 - 1)),
                   null_rate=draw(st.sampled_from([0.0, 0.2, 0.95])))
    sink = io.BytesIO()
    pq.write_table(
        table, sink, use_dictionary=True, write_page_index=draw(st.booleans()),
        dictionary_pagesize_limit=draw(st.sampled_from([64, 1024, 8192])),
        compression=draw(st.sampled_from(CODECS)),
        data_page_version=draw(st.sampled_from(["1.0", "2.0"])),
        data_page_size=draw(st.sampled_from([256, 4096])),
        row_group_size=draw(st.sampled_from([700, 2500, 6000])),
    )
    return sink.getvalue(), table


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_fallback_file(), seed=st.integers(0, 2**32 - 1))
def test_random_fallback_files_answer_equalities_like_pyarrow(
    case: tuple[bytes, pa.Table], seed: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Equalities and IN lists on chunks that fall back from dictionary to PLAIN (and on
    the all-dictionary and all-PLAIN ones around them): pyarrow's rows."""
    data, table = case
    path = tmp_path_factory.mktemp("fallback") / "f.parquet"
    path.write_bytes(data)
    rng = np.random.default_rng(seed)
    ds = pqindex.dataset(str(path))
    for col in ("i32", "i64", "req"):
        arr = table.column(col)
        valid = arr.drop_null().to_pylist()
        picks = [valid[int(i)] for i in rng.integers(0, len(valid), 3)] if valid else []
        picks.append(int(rng.integers(-5, 5)))
        for where, mask in [(f"{col} = {picks[0]}", pc.equal(arr, picks[0])),
                            (f"{col} IN ({', '.join(map(str, picks))})",
                             pc.is_in(arr, pa.array(picks, arr.type)))]:
            want = table.filter(pc.fill_null(mask, False))
            got = ds.scan(columns=["row"], where=where).to_table()
            assert got.column("row").to_pylist() == want.column("row").to_pylist(), where




@st.composite
def _plain_file(draw: st.DrawFn) -> tuple[bytes, pa.Table]:
    n = draw(st.integers(1, 4000))
    table = _table(n, seed=draw(st.integers(0, 2**32 - 1)),
                   null_rate=draw(st.sampled_from([0.0, 0.0, 0.2, 0.95, 1.0])),
                   nan_rate=draw(st.sampled_from([0.0, 0.05, 0.5])))
    sink = io.BytesIO()
    pq.write_table(
        table, sink, use_dictionary=False, write_page_index=draw(st.booleans()),
        compression=draw(st.sampled_from(CODECS)),
        data_page_version=draw(st.sampled_from(["1.0", "2.0"])),
        data_page_size=draw(st.sampled_from([128, 2048, 1 << 20])),
        row_group_size=draw(st.sampled_from([500, 1700, 5000])),
    )
    return sink.getvalue(), table


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_plain_file(), seed=st.integers(0, 2**32 - 1),
       window=st.sampled_from([100, 4096, 1 << 20]))
def test_random_plain_files_scan_like_pyarrow(
    case: tuple[bytes, pa.Table], seed: int, window: int,
    tmp_path_factory: pytest.TempPathFactory
) -> None:
    data, table = case
    path = tmp_path_factory.mktemp("plain") / "f.parquet"
    path.write_bytes(data)
    old = encoded._WINDOW_BYTES
    encoded._WINDOW_BYTES = window
    try:
        _check_scan(path, table, seed)
    finally:
        encoded._WINDOW_BYTES = old


# ---------------------------------------------------------------- other writers


def _check_windowed(path: Path) -> int:
    """matching_rows through small windows, on every flat chunk the scanner would match
    whole, against pyarrow's decode; returns how many chunks it handled."""
    pf = ParquetFile.open(path)
    schema = arrow_schema(pf)
    handled = 0
    rng = np.random.default_rng(9)
    old = encoded._WINDOW_BYTES
    encoded._WINDOW_BYTES = 512
    try:
        for rg in range(pf.num_row_groups):
            for leaf in pf.schema.leaves:
                if len(leaf.path) != 1:
                    continue
                target = schema.field(leaf.path[0]).type
                if not encoded.worth_matching(pf, rg, leaf.index, target, whole=True,
                                              on_values=True):
                    continue
                try:
                    expected = pq.ParquetFile(path).read_row_group(
                        rg, columns=[leaf.path[0]]).column(0).combine_chunks()
                except (pa.ArrowException, OSError):
                    continue
                start, length = chunk_range(pf.column_meta(rg, leaf.index))
                data = pf.read_bytes(start, length)
                valid = expected.drop_null()
                preds: list[Callable[[Any], Any]] = [pc.is_null]
                if len(valid):
                    v = valid[int(rng.integers(0, len(valid)))]
                    preds += [lambda a, v=v: pc.equal(a, v), lambda a, v=v: pc.less(a, v)]
                for pred in preds:
                    def evaluate(a: pa.Array, pred: Any = pred) -> Any:
                        return pc.fill_null(pred(a), False)

                    rows = encoded.matching_rows(
                        pf, rg, leaf.index, target,
                        lambda o, n, data=data: data[o : o + n], evaluate)
                    if rows is None:
                        continue
                    handled += 1
                    want = np.flatnonzero(pc.fill_null(pred(expected), False)
                                          .to_numpy(zero_copy_only=False))
                    assert rows.tolist() == want.tolist(), (path, rg, leaf.name)
    finally:
        encoded._WINDOW_BYTES = old
        pf.close()
    return handled


@pytest.mark.parametrize("name", sorted(writers.WRITERS))
def test_writer_files_match_through_windows(written_files: writers.FileCache, name: str
                                            ) -> None:
    _check_windowed(written_files[name])


CORPUS_FILES = [
    "alltypes_plain.parquet", "alltypes_plain.snappy.parquet", "alltypes_dictionary.parquet",
    "alltypes_tiny_pages_plain.parquet", "datapage_v2.snappy.parquet",
    "datapage_v1-snappy-compressed-checksum.parquet",
    "datapage_v1-uncompressed-checksum.parquet", "int32_with_null_pages.parquet",
    "nan_in_stats.parquet", "nulls.snappy.parquet", "lz4_raw_compressed.parquet",
    "lz4_raw_compressed_larger.parquet", "floating_orders_nan_count.parquet",
    "nonnullable.impala.parquet", "concatenated_gzip_members.parquet",
    "data_index_bloom_encoding_stats.parquet", "plain-dict-uncompressed-checksum.parquet",
    "rle-dict-snappy-checksum.parquet", "page_v2_empty_compressed.parquet",
]


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_files_match_through_windows(name: str) -> None:
    path = CORPUS / name
    if not path.exists():
        missing(f"{name} is not in the corpus")
    _check_windowed(path)


def test_corpus_plain_chunks_are_handled() -> None:
    """The corpus holds PLAIN fixed-width chunks this path takes (the tests above are
    not all skips)."""
    handled = sum(_check_windowed(CORPUS / n) for n in CORPUS_FILES if (CORPUS / n).exists())
    assert handled > 20


# ---------------------------------------------------------------- one chunk, several threads


@pytest.mark.parametrize("parts", [2, 3, 7, 1000])
def test_spans_tile_the_chunk_and_match_like_the_whole(tmp_path: Path, parts: int) -> None:
    table = _table(30_000, seed=10)
    path = _write(table, tmp_path / "p.parquet", compression="zstd", row_group_size=30_000,
                  data_page_size=4096)
    pf = ParquetFile.open(path)
    schema = arrow_schema(pf)
    ref = pq.ParquetFile(path).read_row_group(0)
    try:
        for leaf in pf.schema.leaves:
            start, length = chunk_range(pf.column_meta(0, leaf.index))
            spans = encoded.spans(pf, 0, leaf.index, parts, min_bytes=1)
            assert 1 < len(spans) <= parts
            assert spans[0].begin == 0 and spans[-1].end == length
            assert spans[0].first == 0 and sum(sp.rows for sp in spans) == len(ref)
            for a, b in pairwise(spans):
                assert a.end == b.begin and a.first + a.rows == b.first
            data = pf.read_bytes(start, length)
            value = ref.column(leaf.name).drop_null()[5]
            for pred in (lambda a, v=value: pc.equal(a, v), pc.is_null,
                         lambda a, v=value: pc.less(a, v)):
                def evaluate(a: pa.Array, pred: Any = pred) -> Any:
                    return pc.fill_null(pred(a), False)

                target = schema.field(leaf.name).type
                got = [encoded.matching_rows(pf, 0, leaf.index, target, data, evaluate, sp)
                       for sp in spans]
                assert all(g is not None for g in got)
                want = np.flatnonzero(evaluate(ref.column(leaf.name))
                                      .to_numpy(zero_copy_only=False))
                assert np.concatenate(got).tolist() == want.tolist(), (leaf.name, parts)
    finally:
        pf.close()


def test_spans_need_a_plain_chunk_and_its_offset_index(tmp_path: Path) -> None:
    table = _table(30_000, seed=11)
    for name, kw in [("dictionary", {"use_dictionary": True}),
                     ("no_page_index", {"write_page_index": False})]:
        path = _write(table, tmp_path / f"{name}.parquet", row_group_size=30_000,
                      data_page_size=4096, **kw)
        pf = ParquetFile.open(path)
        try:
            for leaf in pf.schema.leaves:
                assert len(encoded.spans(pf, 0, leaf.index, 4, min_bytes=1)) == 1, name
        finally:
            pf.close()


def test_a_lone_row_group_is_split_between_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One row group: its predicate chunk's pages are matched in spans, side by side;
    the rows are pyarrow's."""
    from pqindex.scan import chunk_match

    table = _table(40_000, seed=12)
    path = _write(table, tmp_path / "p.parquet", compression="snappy", row_group_size=40_000,
                  data_page_size=8192)
    monkeypatch.setattr(chunk_match, "_CORES", 4)
    monkeypatch.setattr(chunk_match, "_SPAN_MIN_BYTES", 1)
    spans: list[Any] = []
    real = encoded.matching_rows

    def spy(*a: Any, **k: Any) -> Any:
        spans.append(a[6] if len(a) > 6 else k.get("span"))
        return real(*a, **k)

    monkeypatch.setattr(encoded, "matching_rows", spy)
    ds = pqindex.dataset(str(path))
    rng = np.random.default_rng(13)
    split = 0
    for col in NUMERIC:
        for where, pred in _predicates(table, col, rng):
            spans.clear()
            want = table.filter(pc.fill_null(pred(table.column(col)), False))
            got = ds.scan(columns=["row"], where=where).to_table()
            assert got.column("row").to_pylist() == want.column("row").to_pylist(), where
            assert len(spans) in (0, 4), where  # pruned, or split in four
            split += len(spans) == 4 and all(sp is not None for sp in spans)
    assert split >= 10


# ---------------------------------------------------------------- numpy on the values


@pytest.fixture(scope="module")
def int_schema(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("schema") / "s.parquet"
    pq.write_table(pa.table({"a": pa.array([1], pa.int32()), "b": pa.array([1], pa.int64()),
                             "u": pa.array([1], pa.uint32())}), path)
    pf = ParquetFile.open(path)
    yield pf.schema
    pf.close()


_INT_TYPES = {"a": pa.int32(), "b": pa.int64(), "u": pa.uint32()}


@st.composite
def _int_where(draw: st.DrawFn, col: str, pool: list[int], depth: int = 0) -> str:
    lit = st.sampled_from(pool)
    kind = draw(st.sampled_from(["cmp", "between", "in", "null"] + (
        ["and", "or", "not"] if depth < 2 else [])))
    if kind == "cmp":
        return f"{col} {draw(st.sampled_from(['=', '<>', '<', '<=', '>', '>=']))} {draw(lit)}"
    if kind == "between":
        return f"{col} {draw(st.sampled_from(['', 'NOT ']))}BETWEEN {draw(lit)} AND {draw(lit)}"
    if kind == "in":
        items = ", ".join(str(v) for v in draw(st.lists(lit, min_size=1, max_size=5)))
        return f"{col} {draw(st.sampled_from(['', 'NOT ']))}IN ({items})"
    if kind == "null":
        return f"{col} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if kind == "not":
        return f"NOT ({draw(_int_where(col, pool, depth + 1))})"
    return (f"({draw(_int_where(col, pool, depth + 1))}) {kind.upper()} "
            f"({draw(_int_where(col, pool, depth + 1))})")


@settings(max_examples=300, deadline=None)
@given(data=st.data(), col=st.sampled_from(sorted(_INT_TYPES)), seed=st.integers(0, 2**32 - 1))
def test_numpy_values_mask_answers_as_pyarrow_compute(
    int_schema: Any, data: st.DataObject, col: str, seed: int
) -> None:
    """On non-null integer values, ``numpy_values_mask`` says what ``to_arrow_mask``
    says, literals at and beyond the type's range included (then it declines)."""
    from pqindex.expr import bind, parse_where, to_arrow_mask
    from pqindex.expr.evaluate import numpy_values_mask

    t = _INT_TYPES[col]
    info = np.iinfo(t.to_pandas_dtype())
    rng = np.random.default_rng(seed)
    values = np.concatenate([rng.integers(-3, 4, 50).clip(info.min, info.max),
                             rng.integers(info.min, info.max, 50, endpoint=True),
                             [info.min, info.max]]).astype(t.to_pandas_dtype())
    pool = [int(v) for v in values[:8]] + [int(info.min), int(info.max), int(info.max) + 1,
                                           int(info.min) - 1, 0, -1]
    where = data.draw(_int_where(col, pool))
    expr = bind(parse_where(where), int_schema)
    fn = numpy_values_mask(expr, values.dtype)
    want = to_arrow_mask(expr, pa.table({col: pa.array(values, t)})).to_numpy(
        zero_copy_only=False)
    if fn is None:
        return  # left to pyarrow.compute
    got = fn(values)
    assert got.dtype == np.bool_ and got.shape == values.shape
    assert got.tolist() == want.tolist(), (where, str(expr))


def test_numpy_values_mask_declines_what_it_does_not_evaluate(int_schema: Any) -> None:
    from pqindex.expr import bind, parse_where
    from pqindex.expr.evaluate import numpy_values_mask

    def mask(where: str, dtype: str = "<i8") -> Any:
        return numpy_values_mask(bind(parse_where(where), int_schema), np.dtype(dtype))

    assert mask("b = 3") is not None and mask("NOT (a IN (1, 2)) OR a < 0", "<i4") is not None
    assert mask("b = 3", "<f8") is None  # floats: NaN semantics stay with pyarrow
    assert mask("a = 1 AND b = 2") is None  # two columns
    wide = " OR ".join(f"b = {i}" for i in range(100))
    assert mask(wide) is None  # its functions would nest 100 deep: pyarrow's


def test_few_matches_reads_equalities_and_in_lists(tmp_path: Path) -> None:
    from pqindex.expr import bind
    from pqindex.expr.sql import parse_where
    from pqindex.scan.chunk_match import few_matches

    path = _write(_table(10, seed=1), tmp_path / "s.parquet")
    schema = ParquetFile.open(path).schema

    def few(where: str) -> bool:
        return few_matches(bind(parse_where(where), schema))

    assert few("i64 = 3") and few("i64 IN (1, 2)") and few("i64 = 3 OR i32 IN (4, 5)")
    assert few("i64 = 3 AND i32 < 7") and few("i32 < 7 AND i64 = 3")
    assert not few("i64 < 3") and not few("i64 = 3 OR i32 < 7") and not few("i64 <> 3")
    assert not few("i64 IS NULL") and not few("i64 NOT IN (1, 2)")
    # Thousands of terms (an OR chain that deep) are walked without recursion.
    assert few(" OR ".join(f"i64 = {k}" for k in range(3000)))
    assert not few(" OR ".join(f"i64 = {k}" for k in range(3000)) + " OR i32 > 1")
