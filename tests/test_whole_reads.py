"""Whole row groups and whole chunks read by pyarrow itself from a local file
(pqindex.scan.whole, ``RowGroupReader.whole_fields``).

The reference is ``pyarrow.parquet.read_table`` (plus a filter) on the same file;
the I/O trace must still say exactly what was read: every projected chunk once,
no byte twice, the report equal to the trace.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.errors import CorruptFileError
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.format.pages import walk_pages
from pqindex.scan import encoded, whole

ROWS = 240_000
ROW_GROUP = 40_000


def _table(seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({
        "id": np.arange(ROWS, dtype=np.int64),
        "category": pa.array([f"c{i % 17}" for i in range(ROWS)]).dictionary_encode(),
        "user_id": rng.integers(0, 10**12, ROWS),
        "amount": np.round(rng.random(ROWS) * 1000, 2),
        "note": pa.array([None if i % 5 == 0 else f"n{i % 301}" for i in range(ROWS)]),
    })


def _write(path: Path, codec: str, **kw: Any) -> pa.Table:
    t = _table()
    pq.write_table(t, path, compression=codec, row_group_size=ROW_GROUP,
                   write_page_index=True, data_page_size=32 * 1024, **kw)
    return pq.read_table(path)


def _spy(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"native": 0, "row_groups": 0}
    real = whole._read_native

    def spy(pf: Any, rgs: list[int], *a: Any, **k: Any) -> Any:
        calls["native"] += 1
        calls["row_groups"] += len(rgs)
        return real(pf, rgs, *a, **k)

    monkeypatch.setattr(whole, "_read_native", spy)
    return calls


def _no_byte_twice(trace: list[tuple[int, int]],
                   again: tuple[int, int] | None = None) -> None:
    """No byte read twice, but inside ``again``: the tail, whose end of the last
    chunks pyarrow reads again rather than the row group going the slow way."""
    for (a, n), (b, _m) in itertools.pairwise(sorted(trace)):
        if b < a + n:
            assert again is not None and again[0] <= b and a + n <= sum(again), (
                f"bytes [{b}, {a + n}) read twice")


@pytest.mark.parametrize("codec", ["snappy", "zstd"])
@pytest.mark.parametrize("mode", ["to_table", "to_batches"])
def test_full_scan_is_read_by_pyarrow_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str, mode: str
) -> None:
    path = tmp_path / "f.parquet"
    want = _write(path, codec)
    calls = _spy(monkeypatch)
    columns = ["id", "amount", "note"]
    ds = pqindex.dataset(path)
    scan = ds.scan(columns=columns)
    if mode == "to_table":
        got = scan.to_table()
    else:
        batches = list(scan.to_batches())
        # Streaming: one row group at a time.
        assert all(b.num_rows <= ROW_GROUP for b in batches)
        got = pa.Table.from_batches(batches)
    assert got.equals(want.select(columns).cast(got.schema))
    assert calls["native"] >= 1
    trace = list(ds.io_stats()[str(path)].trace)
    rep = scan.report.to_dict()
    assert rep["requests"] == len(trace)
    assert rep["bytes_read"] == sum(n for _, n in trace)
    _no_byte_twice(trace, again=trace[0])  # the tail is read first
    # Every projected chunk is read once after the tail, nothing else; the tail ends
    # inside the last chunk here, so that row group is read natively too.
    with ParquetFile.open(path) as pf:
        chunks = [chunk_range(pf.column_meta(rg, c.index))
                  for rg in range(ROWS // ROW_GROUP) for c in pf.schema.leaves
                  if c.path[0] in columns]
    tail, data = trace[0], trace[1:]
    assert tail[0] < sum(chunks[-1])
    assert calls["row_groups"] == ROWS // ROW_GROUP
    for off, n in chunks:
        covered = sum(max(0, min(o + m, off + n) - max(o, off)) for o, m in data)
        assert covered == n, (off, n)
    assert rep["bytes_read"] <= sum(n for _, n in chunks) + 64 * 1024
    assert rep["rows_matched"] == ROWS


def _rows_read(path: str) -> int:
    return int(pqindex.dataset(path).scan(columns=["id", "amount"]).to_table().num_rows)


def test_a_forked_child_reads_whole_row_groups(tmp_path: Path) -> None:
    """The native reads' thread pool belongs to the process that made it: a child
    forked after the parent used it (Spark's Python workers are forked) starts threads
    of its own instead of queueing work for the parent's, which it does not have."""
    path = tmp_path / "f.parquet"
    _write(path, "snappy")
    assert _rows_read(str(path)) == ROWS  # the parent's pool now has threads
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_rows_read, (str(path),)).get(timeout=120) == ROWS


def test_a_touched_file_is_still_read_by_pyarrow_through_its_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same bytes, newer mtime (a touch): its footer bytes are the ones read, so
    pyarrow still reads it, through the descriptor the footer came from; all rows."""
    path = tmp_path / "f.parquet"
    want = _write(path, "snappy")
    ds = pqindex.dataset(path)
    assert ds.scan(columns=["id"], where="id = 5").to_table().num_rows == 1  # opened
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    opened: list[str] = []
    real = pa.OSFile
    monkeypatch.setattr(pa, "OSFile", lambda p, *a: opened.append(p) or real(p, *a))
    calls = _spy(monkeypatch)
    got = ds.scan(columns=["id", "amount"]).to_table()
    assert calls["native"] >= 1
    assert opened and all(p.startswith(("/proc/self/fd/", "/dev/fd/")) for p in opened)
    assert got.equals(want.select(["id", "amount"]).cast(got.schema))


def test_hive_partition_columns_are_filled_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for part in ("a", "b"):
        (tmp_path / f"p={part}").mkdir()
        _write(tmp_path / f"p={part}" / "f.parquet", "snappy")
    calls = _spy(monkeypatch)
    got = pqindex.dataset(tmp_path).scan(columns=["id", "p"]).to_table()
    assert calls["native"] >= 2
    assert got.num_rows == 2 * ROWS
    counts = pc.value_counts(got.column("p").cast(pa.string())).to_pylist()
    assert sorted((c["values"], c["counts"]) for c in counts) == [("a", ROWS), ("b", ROWS)]


@pytest.mark.parametrize("mode", ["to_table", "to_batches"])
def test_a_damaged_page_names_its_row_group(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "f.parquet"
    _write(path, "snappy")
    damaged = 3
    with ParquetFile.open(path) as pf:
        col = next(c.index for c in pf.schema.leaves if c.name == "amount")
        page = next(p for p in walk_pages(pf, damaged, col) if p.page_type in (0, 3))
        body = page.offset + page.header_length
        size = page.header.compressed_page_size or 0
    data = bytearray(path.read_bytes())
    for i in range(body, body + size):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    scan = pqindex.dataset(path).scan(columns=["id", "amount"])
    with pytest.raises(CorruptFileError) as e:
        if mode == "to_table":
            scan.to_table()
        else:
            list(scan.to_batches())
    assert e.value.path == str(path) and e.value.row_group == damaged, e.value


@pytest.mark.parametrize("mode", ["to_table", "to_batches"])
def test_a_predicate_column_read_whole_is_read_by_pyarrow_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """``user_id`` (random, its dictionary falling back to PLAIN): no index narrows it,
    so its chunks are read whole — by pyarrow from the file, counted once each."""
    path = tmp_path / "f.parquet"
    want = _write(path, "snappy", dictionary_pagesize_limit=64 * 1024)
    uid = int(want.column("user_id")[123_456].as_py())
    calls = {"reads": 0}
    real = pa.OSFile

    def spy(*a: Any, **k: Any) -> Any:
        calls["reads"] += 1
        return real(*a, **k)

    monkeypatch.setattr(pa, "OSFile", spy)
    ds = pqindex.dataset(path)
    scan = ds.scan(columns=["id", "amount"], where=f"user_id = {uid} OR user_id < 1000000")
    got = scan.to_table() if mode == "to_table" else pa.Table.from_batches(
        list(scan.to_batches()))
    ref = want.filter(pc.or_(pc.equal(want.column("user_id"), uid),
                             pc.less(want.column("user_id"), 1_000_000)))
    assert got.sort_by("id").equals(ref.select(["id", "amount"]).cast(got.schema))
    assert calls["reads"] >= 1
    trace = list(ds.io_stats()[str(path)].trace)
    rep = scan.report.to_dict()
    assert rep["requests"] == len(trace) and rep["bytes_read"] == sum(n for _, n in trace)
    _no_byte_twice(trace)


def test_pages_past_the_plain_fallback_read_no_dictionary_page(tmp_path: Path) -> None:
    """A lookup whose pages lie past the writer's fallback to PLAIN neither fetches nor
    decompresses the chunk's dictionary page; one before it does."""
    path = tmp_path / "f.parquet"
    want = _write(path, "snappy", dictionary_pagesize_limit=16 * 1024)
    with ParquetFile.open(path) as pf:
        col = next(c.index for c in pf.schema.leaves if c.name == "amount")
        meta = pf.column_meta(0, col)
        dict_range = (meta.dictionary_page_offset, (pf.offset_index(0, col).page_locations[0]
                                                    .offset or 0) - (meta.dictionary_page_offset or 0))
        k = sum(s.count or 0 for s in meta.encoding_stats or []
                if s.page_type == 0 and s.encoding in (2, 8))
        firsts = [loc.first_row_index or 0 for loc in pf.offset_index(0, col).page_locations]
    assert 0 < k < len(firsts), "the writer fell back to PLAIN mid-chunk"
    late, early = firsts[k] + 1, firsts[0] + 1  # rows of row group 0 (id = row)
    for row, dictionary_read in ((late, False), (early, True)):
        ds = pqindex.dataset(path)
        scan = ds.scan(columns=["id", "amount"], where=f"id = {row}")
        got = scan.to_table()
        assert got.to_pylist() == want.select(["id", "amount"]).slice(row, 1).to_pylist()
        trace = ds.io_stats()[str(path)].trace
        start, n = dict_range
        assert start is not None
        touched = any(o < start + n and start < o + m for o, m in trace)
        assert touched == dictionary_read, (row, trace)


def test_dictionary_needed_agrees_with_the_pages(tmp_path: Path) -> None:
    """``encoded.dictionary_needed`` says False only for pages that are PLAIN."""
    rng = np.random.default_rng(11)
    for limit, version in itertools.product([256, 4096, 1 << 20], ["1.0", "2.0"]):
        path = tmp_path / f"d{limit}{version}.parquet"
        t = pa.table({"v": rng.integers(0, 5000, 30_000), "f": rng.random(30_000)})
        pq.write_table(t, path, dictionary_pagesize_limit=limit, data_page_version=version,
                       data_page_size=4096, write_page_index=True, row_group_size=10_000)
        with ParquetFile.open(path) as pf:
            for rg, c in itertools.product(range(3), range(2)):
                pages = [p for p in walk_pages(pf, rg, c) if p.page_type in (0, 3)]
                for i, p in enumerate(pages):
                    h = p.header.data_page_header or p.header.data_page_header_v2
                    assert h is not None
                    if not encoded.dictionary_needed(pf, rg, c, [i]):
                        assert h.encoding == 0, (limit, version, rg, c, i)


@pytest.mark.parametrize("where", [None, "id >= 80000", "id >= 100000"])
def test_aggregates_over_whole_row_groups_are_read_by_pyarrow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str | None
) -> None:
    """Row groups where the aggregated column is wanted at every row go to pyarrow's
    reader, several at once; the partial one (``id >= 100000`` cuts row group 2) goes
    through the executor. Values equal a full read + filter; each chunk read once."""
    path = tmp_path / "f.parquet"
    want = _write(path, "zstd")
    calls = _spy(monkeypatch)
    ds = pqindex.dataset(path)
    got = ds.aggregate(["sum(amount)", "min(amount)", "max(user_id)", "count(note)",
                        "count(*)"], where=where)
    ref = want if where is None else want.filter(pc.field("id") >= int(where.split()[-1]))
    assert got["sum(amount)"] == pytest.approx(pc.sum(ref["amount"]).as_py(), rel=1e-12)
    assert got["min(amount)"] == pc.min(ref["amount"]).as_py()
    assert got["max(user_id)"] == pc.max(ref["user_id"]).as_py()
    assert got["count(note)"] == pc.count(ref["note"]).as_py()
    assert got["count(*)"] == ref.num_rows
    first_whole = 0 if where is None else 2 if where.endswith("80000") else 3
    # Row groups the predicate cuts are read by the executor; the rest natively, in
    # one call per task (fewer calls than row groups).
    assert calls["row_groups"] == ROWS // ROW_GROUP - first_whole
    assert 1 <= calls["native"] < calls["row_groups"]
    trace = list(ds.io_stats()[str(path)].trace)
    _no_byte_twice(trace, again=trace[0])
    rep = ds.last_aggregate_report
    assert rep.row_groups_read + rep.row_groups_skipped == ROWS // ROW_GROUP


# ---------------------------------------------------------------- side_by_side


def test_side_by_side_results_in_order_and_errors_raised() -> None:
    import threading

    threads: list[int] = []

    def job(i: int) -> Any:
        threads.append(threading.get_ident())
        # pyarrow releases the GIL while decompressing: the jobs really overlap
        data = pa.compress(bytes(range(256)) * 4096 * (i + 1), codec="zstd", asbytes=True)
        return len(pa.decompress(data, decompressed_size=1024 * 1024 * (i + 1), codec="zstd",
                                 asbytes=True))

    got = whole.side_by_side([lambda i=i: job(i) for i in range(5)])
    assert got == [1024 * 1024 * (i + 1) for i in range(5)]
    assert threading.get_ident() in threads  # the first job ran on the caller

    def bad() -> int:
        raise CorruptFileError("damaged page")

    with pytest.raises(CorruptFileError, match="damaged page"):
        whole.side_by_side([lambda: 1, bad, lambda: 3])
    with pytest.raises(CorruptFileError):
        whole.side_by_side([bad, lambda: 2])


def test_side_by_side_from_every_pool_thread_does_not_deadlock() -> None:
    """Callers that are themselves the pool's threads (all of them, waiting): the jobs
    no thread started are taken back and run by their callers."""
    pool = whole._native_pool()
    n = whole._NATIVE_WORKERS * 2
    barrier = __import__("threading").Barrier(whole._NATIVE_WORKERS, timeout=30)

    def outer(k: int) -> list[int]:
        if k < whole._NATIVE_WORKERS:
            barrier.wait()  # every pool thread is a caller before any inner job runs
        return list(whole.side_by_side([lambda j=j: k * 10 + j for j in range(3)]))

    results = list(pool.map(outer, range(n), timeout=60))
    assert results == [[k * 10, k * 10 + 1, k * 10 + 2] for k in range(n)]
