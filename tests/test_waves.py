"""Round trips: a scan is a few waves of requests, whatever the number of row groups.

Asserted on I/O traces, never on durations. ``WaveLog`` is a local file source that
also records which ranges went out together (one ``read`` or ``read_ranges`` call
is one wave); the dataset-level tests use the counters every source keeps
(``IOStats.round_trips``) and check them against that log at the executor level.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
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
import scan_fixtures as F
import writers
from pqindex.expr.bind import bind
from pqindex.expr.sql import parse_where
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.format.structs import BloomFilterHeader
from pqindex.format.thrift import decode
from pqindex.io.cache import metadata_cache
from pqindex.io.source import IOStats, LocalFileSource
from pqindex.plan.planner import plan_file
from pqindex.scan.batch import scan_file
from pqindex.scan.executor import ScanOptions, ScanStats
from pqindex.scan.page_decode import arrow_schema
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)


class WaveLog(LocalFileSource):
    """A local file that logs each wave of requests: the ranges of one call."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path)
        self.waves: list[list[tuple[int, int]]] = []

    def read(self, offset: int, length: int) -> bytes:
        self.waves.append([(offset, length)])
        return super().read(offset, length)

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        if ranges:
            self.waves.append(list(ranges))
        return super().read_ranges(ranges)

    def read_views(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        if ranges:
            self.waves.append(list(ranges))
        return super().read_views(ranges)


def run_file(path: Path, where: str | None, columns: Sequence[str], *,
             tail_bytes: int = 64 * 1024, options: ScanOptions | None = None,
             ) -> tuple[pa.Table, WaveLog, ParquetFile]:
    """Plan and scan one file the way a dataset does, through a ``WaveLog``."""
    src = WaveLog(path)
    pf = ParquetFile(src, tail_bytes=tail_bytes)
    bound = bind(parse_where(where) if where else pqindex.expr.TRUE, pf.schema)
    cols = [c.index for c in pf.schema.leaves if c.path[0] in columns]
    plan = plan_file(pf, bound, cols)
    schema = arrow_schema(pf)
    tables = [t.select(list(columns)) for t in scan_file(
        pf, plan, [r for r in plan.row_groups if not r.skipped], bound, columns, schema, {},
        options or ScanOptions(), ScanStats())]
    out = pa.concat_tables(tables) if tables else schema.empty_table().select(list(columns))
    return out, src, pf


def row_groups_of(pf: ParquetFile, wave: Sequence[tuple[int, int]]) -> set[int]:
    """Row groups whose column chunks the ranges of a wave overlap."""
    out = set()
    for rg in range(pf.num_row_groups):
        for leaf in pf.schema.leaves:
            s, n = chunk_range(pf.column_meta(rg, leaf.index))
            if any(o < s + n and s < o + m for o, m in wave):
                out.add(rg)
    return out


def expected(path: Path, columns: Sequence[str], mask: Any) -> list[dict[str, Any]]:
    t = pq.read_table(path, columns=list(columns))
    t = t.filter(mask(t)) if mask is not None else t
    return t.sort_by([(columns[0], "ascending")]).to_pylist()


def rows(t: pa.Table, columns: Sequence[str]) -> list[dict[str, Any]]:
    return t.select(list(columns)).sort_by([(columns[0], "ascending")]).to_pylist()


@pytest.fixture(scope="module")
def io_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return F.write_io_file(tmp_path_factory.mktemp("waves"))


USER_17 = 17
SELECTIVE = [
    # (where, pyarrow mask): each keeps several row groups of the I/O file
    (f"user_id = {USER_17}", lambda t: pc.equal(t["user_id"], USER_17)),
    (f"category = '{F.IO_RARE}'", lambda t: pc.equal(t["category"], F.IO_RARE)),
    ("id BETWEEN 98000 AND 103998 OR id BETWEEN 300000 AND 300100",
     lambda t: pc.or_(pc.and_(pc.greater_equal(t["id"], 98000), pc.less_equal(t["id"], 103998)),
                      pc.and_(pc.greater_equal(t["id"], 300000),
                              pc.less_equal(t["id"], 300100)))),
    ("user_id < 3 AND amount > 0",
     lambda t: pc.and_(pc.less(t["user_id"], 3), pc.greater(t["amount"], 0))),
]
IO_COLUMNS = ["id", "user_id", "category", "amount", "payload"]


# ------------------------------------------------------------------ waves of one file


@pytest.mark.parametrize(("where", "mask"), SELECTIVE, ids=[w for w, _ in SELECTIVE])
def test_selective_scan_takes_at_most_three_waves_after_the_tail(
        io_file: Path, where: str, mask: Any) -> None:
    table, log, pf = run_file(io_file, where, IO_COLUMNS)
    assert rows(table, IO_COLUMNS) == expected(io_file, IO_COLUMNS, mask)
    # pyarrow's own reads of whole chunks of a local file (whole.read_native_ranges)
    # are counted as requests and one wave, but never pass through WaveLog.
    native = log.stats.round_trips - len(log.waves)
    assert native in (0, 1)
    logged = sum(len(w) for w in log.waves)
    assert log.stats.requests == len(log.stats.trace)
    assert logged == log.stats.requests if not native else logged < log.stats.requests
    assert log.waves[0] == [(pf.file_size - 64 * 1024, 64 * 1024)], "the tail comes first"
    after_tail = log.waves[1:]
    assert len(after_tail) + native <= 3, [
        (len(w), sorted(row_groups_of(pf, w))) for w in after_tail]
    # The data of the row groups is fetched together, not one row group after another.
    kept = {rg.index for rg in plan_file(pf, bind(parse_where(where), pf.schema), [0]).row_groups
            if not rg.skipped}
    if len(kept) > 1:
        assert any(len(row_groups_of(pf, w)) > 1 for w in after_tail)


@pytest.mark.parametrize(("where", "mask"), SELECTIVE, ids=[w for w, _ in SELECTIVE])
def test_page_index_of_all_row_groups_in_one_wave(io_file: Path, where: str, mask: Any) -> None:
    """With a tail holding only the footer, the page-index entries of every kept row
    group come in one wave, then at most the two data waves."""
    with ParquetFile.open(io_file) as probe:
        footer = probe.file_size - probe.footer_offset
    table, log, pf = run_file(io_file, where, IO_COLUMNS, tail_bytes=footer)
    assert rows(table, IO_COLUMNS) == expected(io_file, IO_COLUMNS, mask)
    index_regions = []
    for rg in range(pf.num_row_groups):
        for leaf in pf.schema.leaves:
            cc = pf.column_chunk(rg, leaf.index)
            index_regions += [(cc.column_index_offset or 0, cc.column_index_length or 0),
                              (cc.offset_index_offset or 0, cc.offset_index_length or 0)]

    def reads_index(wave: Sequence[tuple[int, int]]) -> bool:
        return any(o < s + n and s < o + m for o, m in wave for s, n in index_regions)

    index_waves = [i for i, w in enumerate(log.waves) if reads_index(w)]
    # On a local file (bytes first) the page index of row groups an equality
    # dictionary may rule out waits one wave for the dictionaries.
    waited = index_waves == [2] and "=" in where and "<" not in where
    assert index_waves == [1] or waited, [len(w) for w in log.waves]
    # A range comparison on a dictionary-encoded column adds the dictionaries of the
    # row groups the page index kept (one wave for all of them).
    late_dictionaries = "user_id <" in where
    assert len(log.waves) <= 1 + 3 + late_dictionaries + waited


def test_read_ahead_limit_splits_the_waves(io_file: Path) -> None:
    """A read-ahead of one byte takes the row groups one at a time: more waves, each
    touching one row group, and the same rows."""
    where, mask = SELECTIVE[0]
    small = ScanOptions(read_ahead_bytes=1)
    table, log, pf = run_file(io_file, where, IO_COLUMNS, options=small)
    assert rows(table, IO_COLUMNS) == expected(io_file, IO_COLUMNS, mask)
    _, together, _ = run_file(io_file, where, IO_COLUMNS)
    data_waves = log.waves[2:]
    assert all(len(row_groups_of(pf, w)) == 1 for w in data_waves)
    assert len(log.waves) > len(together.waves)


def test_to_batches_streams_within_a_file(io_file: Path) -> None:
    """With a small read-ahead, the first batch comes out before the last row group
    is read."""
    ds = pqindex.dataset(io_file, scan_options=ScanOptions(read_ahead_bytes=1))
    batches = ds.scan(columns=IO_COLUMNS, where="user_id < 50").to_batches()
    first = next(batches)
    assert first.num_rows > 0
    stats = ds._open[str(io_file)].stats
    read_so_far = stats.bytes_read
    rest = sum(b.num_rows for b in batches)
    assert stats.bytes_read > read_so_far
    full = pq.read_table(io_file, columns=["user_id"]).column(0)
    assert first.num_rows + rest == pc.sum(pc.less(full, 50)).as_py()


# ------------------------------------------------------------------ the report


@pytest.mark.parametrize("where", [None, "id = 123456", *[w for w, _ in SELECTIVE]])
@pytest.mark.parametrize("mode", ["to_table", "to_batches"])
def test_report_counters_equal_the_trace(io_file: Path, where: str | None, mode: str) -> None:
    ds = pqindex.dataset(io_file)
    scan = ds.scan(columns=["id", "amount", "payload"], where=where)
    n = scan.to_table().num_rows if mode == "to_table" else sum(
        b.num_rows for b in scan.to_batches())
    stats = ds._open[str(io_file)].stats
    rep = scan.report.to_dict()
    assert rep["requests"] == stats.requests == len(stats.trace)
    assert rep["bytes_read"] == stats.bytes_read == sum(m for _, m in stats.trace)
    assert rep["round_trips"] == stats.round_trips  # one file: its waves are the path
    # Streaming a local full scan: pyarrow reads each row group as it is consumed.
    most = 1 + rep["row_groups_read"] if mode == "to_batches" and where is None else 4
    assert 2 <= rep["round_trips"] <= most
    assert rep["rows_matched"] == n
    assert f"{rep['round_trips']} round trips" in str(scan.report)
    # Planning alone (explain) reports its own waves.
    plan = pqindex.dataset(io_file).explain(["id"], where, format="json")
    assert '"round_trips": 1' in plan or '"round_trips": 2' in plan


def test_files_overlap_their_waves(tmp_path: Path) -> None:
    """Files read concurrently: the report's round trips are the critical path."""
    table = F.make_scan_table(4_000)
    paths = []
    for k in range(4):
        p = tmp_path / f"part-{k}.parquet"
        pq.write_table(table.slice(k * 1000, 1000), p, row_group_size=250,
                       data_page_size=512, write_page_index=True)
        paths.append(p)
    ds = pqindex.dataset(tmp_path)
    where = "u32 > 3000000000"
    scan = ds.scan(columns=["id", "u32", "name"], where=where)
    got = scan.to_table()
    want = pq.read_table(paths[0].parent).filter(pc.greater(pc.field("u32"), 3_000_000_000))
    assert sorted(got.column("id").to_pylist()) == sorted(want.column("id").to_pylist())
    per_file = [of.stats.round_trips for of in ds._open.values()]
    assert len(per_file) == 4 and min(per_file) >= 2
    rep = scan.report.to_dict()
    # Per phase (tails, planning, data) the pool thread that waited for the most waves:
    # never less than one file's waves, never more than all files' one after another
    # (how much overlaps depends on how the pool spread the files over its threads).
    assert max(per_file) <= rep["round_trips"] <= sum(per_file)
    assert rep["requests"] == sum(of.stats.requests for of in ds._open.values())


def test_the_critical_path_is_the_busiest_thread() -> None:
    """Waves on one thread add up; threads side by side count as their busiest."""
    import threading

    from pqindex.dataset.planning import WaveClock as _WaveClock

    clock = _WaveClock()
    clock.add(2)
    clock.add(3)
    other = threading.Thread(target=lambda: [clock.add(1) for _ in range(4)])
    other.start()
    other.join()
    assert clock.critical() == 5
    assert _WaveClock().critical() == 0


# ------------------------------------------------------------------ randomized


WRITERS = ["pyarrow_v1_none_dict", "pyarrow_v2_snappy_dict", "pyarrow_v2_zstd_plain",
           "pyarrow_bloom", "duckdb", "polars", "datafusion"]
COLUMNS = ["id", "shuffled", "category", "long_text"]


@st.composite
def predicates(draw: st.DrawFn) -> tuple[str, Any]:
    kind = draw(st.sampled_from(["point", "range", "in", "category", "shuffled", "or"]))
    n = writers.NUM_ROWS
    a = draw(st.integers(-10, n + 10))
    b = a + draw(st.integers(0, 800))
    if kind == "point":
        return f"id = {a}", lambda t: pc.equal(t["id"], a)
    if kind == "range":
        return (f"id BETWEEN {a} AND {b}",
                lambda t: pc.and_(pc.greater_equal(t["id"], a), pc.less_equal(t["id"], b)))
    if kind == "in":
        vals = draw(st.lists(st.integers(-5, n + 5), min_size=1, max_size=6))
        return (f"id IN ({', '.join(map(str, vals))})",
                lambda t: pc.is_in(t["id"], pa.array(vals, pa.int64())))
    if kind == "category":
        c = draw(st.sampled_from([*writers.CATEGORIES, "omega"]))
        return f"category = '{c}'", lambda t: pc.equal(t["category"], c)
    if kind == "shuffled":
        return (f"shuffled < {a} AND id > {b}",
                lambda t: pc.and_(pc.less(t["shuffled"], a), pc.greater(t["id"], b)))
    return (f"id < {a % 300} OR shuffled = {b}",
            lambda t: pc.or_kleene(pc.less(t["id"], a % 300), pc.equal(t["shuffled"], b)))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writer=st.sampled_from(WRITERS), pred=predicates(),
       options=st.sampled_from([
           ScanOptions(),
           ScanOptions(read_ahead_bytes=1),
           ScanOptions(speculative_bytes=1 << 30),  # the remote path, on a local file
           ScanOptions(coalesce_gap=1 << 20, read_ahead_bytes=4096),
       ]),
       streaming=st.booleans())
def test_waves_never_change_the_rows(written_files: writers.FileCache, writer: str,
                                     pred: tuple[str, Any], options: ScanOptions,
                                     streaming: bool) -> None:
    path = written_files[writer]
    where, mask = pred
    ds = pqindex.dataset(path, scan_options=options)
    scan = ds.scan(columns=COLUMNS, where=where)
    if streaming:
        batches = list(scan.to_batches())
        got = pa.Table.from_batches(batches, schema=scan.schema) if batches else None
    else:
        got = scan.to_table()
    want = pq.read_table(path, columns=COLUMNS)
    want = want.filter(pc.fill_null(mask(want), False))
    got_rows = [] if got is None else rows(got, COLUMNS)
    assert got_rows == want.sort_by([("id", "ascending")]).to_pylist(), (writer, where)
    stats = ds._open[str(path)].stats
    assert scan.report.round_trips == stats.round_trips
    assert scan.report.requests == stats.requests


# ------------------------------------------------------------------ Bloom probes


@pytest.fixture(scope="module")
def bloom_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Random keys (page bounds and statistics prune nothing), no dictionary (only the
    Bloom filter can rule a row group out), 4 row groups, 16 KiB filters."""
    rng = np.random.default_rng(5)
    keys = rng.permutation(400_000)[:100_000].astype(np.int64)
    t = pa.table({"k": keys, "v": np.arange(keys.size)})
    path = tmp_path_factory.mktemp("bloom") / "bloom.parquet"
    pq.write_table(t, path, row_group_size=25_000, use_dictionary=False,
                   bloom_filter_options={"k": {"ndv": 25_000}}, write_page_index=True,
                   data_page_size=16 * 1024)
    return path


def bloom_regions(pf: ParquetFile) -> list[tuple[int, int, int]]:
    """``(offset, length, header length)`` of every Bloom filter of the file."""
    out = []
    for rg in range(pf.num_row_groups):
        for leaf in pf.schema.leaves:
            cmd = pf.column_meta(rg, leaf.index)
            if cmd.bloom_filter_offset is None:
                continue
            _, hlen = decode(BloomFilterHeader, pf.read_bytes(cmd.bloom_filter_offset, 64))
            out.append((cmd.bloom_filter_offset, cmd.bloom_filter_length or 0, hlen))
    return out


@pytest.mark.parametrize("n_values", [1, 3])
def test_bloom_probe_reads_the_header_and_one_block_per_value(bloom_file: Path,
                                                               n_values: int) -> None:
    keys = set(pq.read_table(bloom_file, columns=["k"]).column(0).to_pylist())
    # From the middle of the key range: statistics cannot rule them out.
    absent = [k for k in range(200_000, 400_000) if k not in keys][:n_values]
    where = f"k IN ({', '.join(map(str, absent))})" if n_values > 1 else f"k = {absent[0]}"
    table, log, pf = run_file(bloom_file, where, ["k", "v"])
    assert table.num_rows == 0
    with ParquetFile.open(bloom_file) as probe:
        regions = bloom_regions(probe)
    assert len(regions) == 4
    skipped = plan_file(pf, bind(parse_where(where), pf.schema), [0, 1]).row_groups
    tail = pf.file_size - 64 * 1024
    assert log.waves[0] == [(tail, 64 * 1024)]
    for off, length, hlen in regions:
        got = sum(min(o + m, off + length) - max(o, off) for w in log.waves[1:] for o, m in w
                  if o < off + length and off < o + m)
        if off + length <= tail:  # not already in the tail read
            assert got > 0, off
        assert got <= hlen + 32 * n_values, (off, got)
    # Bloom probes of every row group went out in one wave (after the tail): no data.
    assert len(log.waves) == 2, log.waves
    assert {rg.decided_by for rg in skipped} == {"bloom filter"}


def test_bloom_probe_agrees_with_the_whole_filter(bloom_file: Path,
                                                   written_files: writers.FileCache) -> None:
    rnd = random.Random(7)
    for path in (bloom_file, written_files["pyarrow_bloom"]):
        with ParquetFile.open(path) as pf:
            for rg in range(pf.num_row_groups):
                for leaf in pf.schema.leaves:
                    whole = pf.bloom_filter(rg, leaf.index)
                    probe = pf.bloom_probe(rg, leaf.index)
                    assert (whole is None) == (probe is None)
                    if whole is None or probe is None:
                        continue
                    hashes = [rnd.getrandbits(64) for _ in range(300)]
                    hashes += [pqindex.format.bloom.xxhash64(k.to_bytes(8, "little", signed=True))
                               for k in range(200)]
                    assert [whole.might_contain_hash(h) for h in hashes] == [
                        probe.might_contain_hash(h) for h in hashes]


def test_present_key_is_found_through_the_bloom_filter(bloom_file: Path) -> None:
    t = pq.read_table(bloom_file)
    k = t.column("k")[77_777].as_py()
    table, log, _ = run_file(bloom_file, f"k = {k}", ["k", "v"])
    assert table.to_pylist() == [{"k": k, "v": 77_777}]
    assert len(log.waves) <= 4


# ------------------------------------------------------------------ store policy


def test_local_files_merge_small_gaps_only(io_file: Path) -> None:
    src = LocalFileSource(io_file)
    try:
        assert src.coalesce([(0, 10), (10 + 8 * 1024, 10)]) == [(0, 8 * 1024 + 20)]
        assert len(src.coalesce([(0, 10), (11 + 8 * 1024, 10)])) == 2
    finally:
        src.close()


def test_remote_store_point_lookup_is_two_round_trips(
        io_file: Path, s3: S3Endpoint) -> None:  # noqa: F811
    """On S3 the other columns' pages join the predicate's wave: the tail, then one
    wave. Waves are counted by the proxy (requests arriving while none is in flight)."""
    bucket = s3.new_bucket("waves")
    s3.put(bucket, "io.parquet", io_file.read_bytes())
    url = f"s3://{bucket}/io.parquet"
    s3.delay = 0.05  # a wave's requests overlap for sure
    try:
        for target in (123_456, 123_457, 2):
            metadata_cache().clear()
            s3.reset_log()
            ds = pqindex.dataset(url, storage_options=s3.storage_options())
            scan = ds.scan(columns=["id", "category", "payload"], where=f"id = {target}")
            got = scan.to_table()
            assert got.column("id").to_pylist() == ([target] if target % 2 == 0 else [])
            assert s3.waves == 2, [(r.method, r.path) for r in s3.requests]
            # the report counts the same: the probe (the tail GET) is the first wave
            assert scan.report.round_trips == s3.waves, str(scan.report)
            assert scan.report.requests == len(s3.requests), str(scan.report)
    finally:
        s3.delay = 0.0


def test_iostats_counts_waves() -> None:
    stats = IOStats()
    src = pqindex.io.source.BytesSource(bytes(range(256)) * 64, stats=stats)
    src.read(0, 10)
    src.read_ranges([(0, 4), (100, 4), (5000, 4)])
    src.read_ranges([])
    assert (stats.requests, stats.round_trips, stats.bytes_read) == (4, 2, 22)
    assert stats.to_dict()["round_trips"] == 2


@pytest.mark.parametrize("where", [None, "id = 123457", *[w for w, _ in SELECTIVE]])
def test_explain_json_shows_the_planned_waves(io_file: Path, where: str | None) -> None:
    """Planning reads the same metadata for explain as for the scan; the data waves it
    announces are the ones the scan then takes (one fewer when the exact check finds
    no row: nothing left to project)."""
    import json

    plan = json.loads(pqindex.dataset(io_file).explain(IO_COLUMNS, where, format="json"))
    scan = pqindex.dataset(io_file).scan(columns=IO_COLUMNS, where=where)
    scan.to_table()
    summary = plan["summary"]
    assert summary["data_waves"] == plan["files"][0]["data_waves"]
    planned = summary["round_trips"] + summary["data_waves"]
    if scan.report.rows_matched:
        assert scan.report.round_trips == planned
    else:
        assert planned - 1 <= scan.report.round_trips <= planned


def with_bloom_lengths(src: Path, dst: Path, change: Any) -> Path:
    """A copy of ``src`` whose footer declares ``change(length)`` as every chunk's
    ``bloom_filter_length`` (None: not declared). Nothing else moves."""
    from pqindex.format.structs import FileMetaData
    from pqindex.format.thrift import encode

    with ParquetFile.open(src) as pf:
        body = src.read_bytes()[: pf.footer_offset]
        md, _ = decode(FileMetaData, pf.footer_bytes)
    for rg in md.row_groups or []:
        for cc in rg.columns or []:
            cmd = cc.meta_data
            if cmd is not None and cmd.bloom_filter_offset is not None:
                cmd.bloom_filter_length = change(cmd.bloom_filter_length)
    footer = encode(md)
    dst.write_bytes(body + footer + len(footer).to_bytes(4, "little") + b"PAR1")
    return dst


@pytest.mark.parametrize("layout", ["undeclared", "wrong-length"])
def test_bloom_probe_without_a_predictable_header(bloom_file: Path, tmp_path: Path,
                                                   layout: str) -> None:
    """Without a declared length the header is read first (a 64-byte over-read, all
    row groups in one wave), then the blocks (one more wave); a declared length that
    disagrees with the header is noticed, never trusted. Rows are right either way."""
    change = (lambda n: None) if layout == "undeclared" else (lambda n: n + 32)
    path = with_bloom_lengths(bloom_file, tmp_path / "b.parquet", change)
    t = pq.read_table(path)
    keys = set(t.column("k").to_pylist())
    absent = [k for k in range(200_000, 400_000) if k not in keys][:2]
    present = t.column("k")[61_234].as_py()
    for values in (absent, [present, absent[0]]):
        where = f"k IN ({', '.join(map(str, values))})"
        table, log, pf = run_file(path, where, ["k", "v"])
        assert sorted(table.column("k").to_pylist()) == sorted(k for k in values if k in keys)
        if layout == "undeclared" and values == absent:
            assert len(log.waves) == 3  # tail, headers, blocks
            with ParquetFile.open(bloom_file) as probe:
                regions = bloom_regions(probe)
            for off, length, _hlen in regions:
                got = sum(min(o + m, off + length) - max(o, off) for w in log.waves[1:]
                          for o, m in w if o < off + length and off < o + m)
                assert got <= 64 + 32 * len(values), (off, got)
        whole = plan_file(pf, bind(parse_where(where), pf.schema), [0, 1])
        assert sum(not rg.skipped for rg in whole.row_groups) == (0 if values == absent else 1)
