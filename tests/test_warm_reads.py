"""What warm queries (same open dataset) skip: dictionary pages numpy already decoded,
dictionary evidence the planner already built. Results against pyarrow read + filter;
what was read from the scan report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pqindex
from pqindex.format.file import ParquetFile
from pqindex.plan import planner

ROWS = 40_000
RG = 10_000
PAGE = 1_000


@pytest.fixture(scope="module")
def fallback_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``id`` unique (its dictionary fills and falls back to PLAIN mid-chunk), ``amount``
    likewise, ``user`` a 300-value dictionary per row group, ``k`` nullable."""
    rng = np.random.default_rng(5)
    ids = np.arange(ROWS, dtype=np.int64)
    t = pa.table({
        "id": ids,
        "amount": rng.random(ROWS),
        "user": rng.choice(rng.integers(0, 10**12, 300), ROWS),
        "k": pa.array(rng.integers(0, 50, ROWS), mask=rng.random(ROWS) < 0.1),
    })
    path = tmp_path_factory.mktemp("warm") / "fallback.parquet"
    pq.write_table(t, path, row_group_size=RG, write_page_index=True,
                   max_rows_per_page=PAGE, dictionary_pagesize_limit=16 * 1024,
                   compression="snappy")
    return path


def _expected(path: Path, where: pc.Expression, columns: list[str]) -> pa.Table:
    return pq.read_table(path, columns=columns).filter(where).sort_by("id")


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, ROWS - 1), min_size=1, max_size=3))
def test_warm_lookups_skip_decoded_dictionaries(fallback_file: Path, ids: list[int]) -> None:
    cols = ["id", "amount", "k"]
    ds = pqindex.dataset(str(fallback_file))
    try:
        where = f"id IN ({', '.join(map(str, ids))})"
        reads = []
        for _ in range(2):
            scan = ds.scan(columns=cols, where=where)
            got = scan.to_table().sort_by("id")
            want = _expected(fallback_file, pc.field("id").isin(ids), cols)
            assert got.equals(want.cast(got.schema))
            reads.append(scan.report.bytes_read)
        # The second run reads no dictionary page numpy decoded in the first.
        assert reads[1] <= reads[0]
    finally:
        ds.close()


def test_warm_lookup_reads_less(fallback_file: Path) -> None:
    ds = pqindex.dataset(str(fallback_file))
    try:
        first = ds.scan(columns=["id", "amount"], where="id = 25500")
        assert first.to_table().num_rows == 1
        second = ds.scan(columns=["id", "amount"], where="id = 25600")
        assert second.to_table().column("id").to_pylist() == [25600]
        # Same row group and chunks: the dictionary pages (read cold) are not read
        # again, only the one data page of each column that holds row 25600.
        with ParquetFile.open(fallback_file) as pf:
            rg, row = divmod(25_600, RG)
            pages = 0
            for name in ("id", "amount"):
                leaf = pf.schema.leaf(name)
                assert leaf is not None
                assert pf.dictionary_extent(rg, leaf.index) is not None
                oi = pf.offset_index(rg, leaf.index)
                assert oi is not None and oi.page_locations
                loc = oi.page_locations[row // PAGE]
                pages += loc.compressed_page_size or 0
        assert second.report.bytes_read == pages
    finally:
        ds.close()


def test_dictionary_evidence_kept_per_file(fallback_file: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[int] = []
    original = planner._RowGroupEvidence._read_dictionary

    def counting(self: Any, *args: Any) -> Any:
        decoded.append(self.rg)
        return original(self, *args)

    monkeypatch.setattr(planner._RowGroupEvidence, "_read_dictionary", counting)
    users = pq.read_table(fallback_file, columns=["user"]).column(0).to_numpy()
    lo, hi = int(users.min()), int(users.max())
    absent = next(v for v in range(lo + 1, hi) if v not in set(users.tolist()))
    present = int(users[12_345])
    ds = pqindex.dataset(str(fallback_file))
    try:
        for _ in range(2):
            scan = ds.scan(columns=["id"], where=f"user = {absent}")
            assert scan.to_table().num_rows == 0
            assert scan.report.row_groups_skipped["dictionary"] == ROWS // RG
        # Warm: the dictionaries are neither read nor decoded again.
        assert scan.report.bytes_read == 0
        assert sorted(decoded) == list(range(ROWS // RG))
        for _ in range(2):
            scan = ds.scan(columns=["id", "user"], where=f"user = {present}")
            got = scan.to_table().sort_by("id")
            want = _expected(fallback_file, pc.field("user") == present, ["id", "user"])
            assert got.equals(want.cast(got.schema))
        assert sorted(decoded) == list(range(ROWS // RG))
    finally:
        ds.close()


def test_a_long_lived_file_keeps_a_bounded_number_of_buffers(tmp_path: Path) -> None:
    """Probe-sized waves (Bloom blocks) on one open file, forever: the held list stays
    bounded, dropped ranges are read again, and every byte returned is the file's."""
    from pqindex.format import file as file_mod

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": np.arange(200_000, dtype=np.int64)}), path)
    data = path.read_bytes()
    pf = ParquetFile.open(path)
    pinned = len(pf._buffers)
    limit = file_mod.MAX_HELD_BUFFERS
    offsets = [4 + 64 * i for i in range(limit + 500)]
    for off in offsets:
        pf.prefetch([], exact=[(off, 32)])
    assert len(pf._buffers) <= pinned + limit
    before = pf.source.stats.requests
    assert pf.read_bytes(offsets[0], 32) == data[offsets[0] : offsets[0] + 32]  # dropped
    assert pf.source.stats.requests == before + 1
    assert pf.read_bytes(offsets[-1], 32) == data[offsets[-1] : offsets[-1] + 32]  # held
    assert pf.source.stats.requests == before + 1
    # One wave larger than the limit is kept whole while it is being used.
    pf.prefetch([], exact=[(40 + 64 * i, 16) for i in range(limit + 10)])
    assert len(pf._buffers) >= limit + 10
    pf.close()


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["prefetch", "exact", "read", "keep", "iter"]),
                              st.integers(0, 60_000), st.integers(0, 3_000)),
                    min_size=1, max_size=60),
       limit=st.sampled_from([4, 16, 4096]))
def test_held_buffers_serve_the_files_bytes_whatever_was_read_or_dropped(
    tmp_path_factory: Any, ops: list[tuple[str, int, int]], limit: int
) -> None:
    """Random waves, kept reads and lookups on one open file, with the held list at
    various bounds (buffers dropped midway): every read returns the file's bytes, and,
    while nothing was dropped, a range read right after its wave costs no request."""
    from pqindex.format import file as file_mod

    path = tmp_path_factory.mktemp("held") / "t.parquet"
    if not path.exists():
        pq.write_table(pa.table({"x": np.arange(10_000, dtype=np.int64)}), path,
                       compression="none")
    data = path.read_bytes()
    size = len(data) - 64  # before the footer's tail (always held)
    old = file_mod.MAX_HELD_BUFFERS
    file_mod.MAX_HELD_BUFFERS = limit
    try:
        pf = ParquetFile.open(path)
        for op, off, n in ops:
            off = 4 + off % size
            n = min(n, len(data) - off)
            if op in ("prefetch", "exact"):
                rng = [(off, n), (off + 2 * n + 7, n // 2)]
                rng = [(o, k) for o, k in rng if o + k <= len(data)]
                if op == "prefetch":
                    pf.prefetch(rng)
                else:
                    pf.prefetch([], exact=rng)
                before = pf.source.stats.requests
                kept = limit > len(ops) * 8  # nothing dropped: the wave is held whole
                for o, k in rng:
                    assert not kept or pf.has_bytes(o, k)
                    assert pf.read_bytes(o, k) == data[o : o + k]
                assert not kept or pf.source.stats.requests == before
            elif op == "iter":
                got = pf.read_ranges([(off, n), (max(off - 500, 4), n)])
                assert got[0] == data[off : off + n]
                o2 = max(off - 500, 4)
                assert bytes(got[1]) == data[o2 : o2 + n]
            else:
                assert pf.read_bytes(off, n, keep=op == "keep") == data[off : off + n]
            held = [(s, len(b)) for s, b in pf._buffers if len(b)]
            assert pf.holds_any(off, n) == (n > 0 and any(s < off + n and off < s + k
                                                          for s, k in held))
            assert pf.has_bytes(off, n) == (not file_mod._gaps(pf._held(), off, n))
        pf.close()
    finally:
        file_mod.MAX_HELD_BUFFERS = old


def test_held_buffers_are_read_and_dropped_from_several_threads_at_once(
    tmp_path: Path,
) -> None:
    """Threads prefetching overlapping ranges and reading them while others drop old
    buffers (a small bound): every byte returned is the file's."""
    import threading

    from pqindex.format import file as file_mod

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": np.arange(50_000, dtype=np.int64)}), path,
                   compression="none")
    data = path.read_bytes()
    old = file_mod.MAX_HELD_BUFFERS
    file_mod.MAX_HELD_BUFFERS = 8
    errors: list[str] = []
    pf = ParquetFile.open(path)

    def work(seed: int) -> None:
        r = np.random.default_rng(seed)
        for _ in range(300):
            off = int(r.integers(4, len(data) - 200))
            n = int(r.integers(1, 200))
            pf.prefetch([], exact=[(off, n), (off + 1000, 32)] if off + 1032 < len(data)
                        else [(off, n)])
            if pf.read_bytes(off, n) != data[off : off + n]:
                errors.append(f"read_bytes({off}, {n})")
            lo = max(off - 100, 4)
            if pf.read_bytes(lo, 300, keep=True) != data[lo : lo + 300]:
                errors.append(f"keep({lo}, 300)")

    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        file_mod.MAX_HELD_BUFFERS = old
        pf.close()
    assert errors == []


def test_warm_scans_of_many_files_settle_pruned_files_from_their_footers(
    tmp_path: Path,
) -> None:
    """A warm scan decides the open files their footer statistics rule out without a
    task or a request, with the same report and rows as the cold scan (pyarrow's)."""
    d = tmp_path / "d"
    d.mkdir()
    parts = []
    for i in range(12):
        ids = np.arange(i * 1_000, (i + 1) * 1_000, dtype=np.int64)
        t = pa.table({"id": ids, "v": ids * 2})
        pq.write_table(t, d / f"part-{i:02d}.parquet", row_group_size=250,
                       write_page_index=True)
        parts.append(t)
    every = pa.concat_tables(parts)
    ds = pqindex.dataset(d)
    for where, mask in [("id = 4321", pc.equal(every["id"], 4321)),
                        ("id BETWEEN 2990 AND 3010", pc.and_(pc.greater_equal(every["id"], 2990),
                                                             pc.less_equal(every["id"], 3010))),
                        ("id < 0", pc.less(every["id"], 0))]:
        cold = ds.scan(["id", "v"], where)
        first = cold.to_table()
        warm = ds.scan(["id", "v"], where)
        second = warm.to_table()
        want = every.filter(mask)
        assert first.sort_by("id").equals(want) and second.sort_by("id").equals(want)
        assert warm.report.files_skipped == cold.report.files_skipped
        assert warm.report.row_groups_skipped == cold.report.row_groups_skipped
        assert warm.report.requests <= cold.report.requests


def test_page_level_answers_kept_per_file_and_literal(fallback_file: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm query does not search the page index again; another literal, operator or
    column gets its own answer (results against pyarrow read + filter each time)."""
    from pqindex.format.column_index import PageIndex

    searched: list[tuple[Any, ...]] = []
    original = PageIndex.matching_pages

    def counting(self: PageIndex, op: Any, keys: tuple[Any, ...] = (), **kw: Any) -> Any:
        searched.append((op, keys))
        return original(self, op, keys, **kw)

    monkeypatch.setattr(PageIndex, "matching_pages", counting)
    ks = pq.read_table(fallback_file, columns=["k"]).column(0)
    ds = pqindex.dataset(str(fallback_file))
    try:
        queries = [
            ("k = 7", pc.field("k") == 7),
            ("k = 8", pc.field("k") == 8),
            ("k < 3", pc.field("k") < 3),
            ("k IS NULL", pc.field("k").is_null()),
            ("id BETWEEN 1500 AND 2600", (pc.field("id") >= 1500) & (pc.field("id") <= 2600)),
        ]
        for rnd in range(2):
            for where, ref in queries:
                before = len(searched)
                got = ds.scan(columns=["id", "k"], where=where).to_table().sort_by("id")
                want = _expected(fallback_file, ref, ["id", "k"])
                assert got.equals(want.cast(got.schema)), where
                if rnd == 1:
                    assert len(searched) == before, f"{where}: page index searched again"
        assert ks.null_count  # the IS NULL case has rows to find
    finally:
        ds.close()


@pytest.fixture(scope="module")
def big_dictionary_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pyarrow's defaults, snappy: ``id`` and ``amount`` with 1 MiB dictionary pages
    (``id`` falls back to PLAIN mid-chunk); two row groups."""
    rng = np.random.default_rng(9)
    n = 300_000
    t = pa.table({
        "id": np.arange(n, dtype=np.int64),
        "amount": rng.integers(0, 100_000, n) / 100.0,
        "k": rng.integers(0, 50, n),
    })
    path = tmp_path_factory.mktemp("bigdict") / "big.parquet"
    pq.write_table(t, path, row_group_size=n // 2, write_page_index=True,
                   max_rows_per_page=10_000, compression="snappy")
    return path


@settings(max_examples=15, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 299_999), min_size=1, max_size=4))
def test_cold_lookups_take_dictionary_entries_then_warm_ones_keep_dictionaries(
        big_dictionary_file: Path, ids: list[int]) -> None:
    """A fresh dataset takes only the wanted entries of each dictionary page; the
    same dataset's second query decodes them whole and keeps them; the third reads no
    dictionary page. Every answer against pyarrow read + filter."""
    cols = ["id", "amount"]
    where = f"id IN ({', '.join(map(str, ids))})"
    want = _expected(big_dictionary_file, pc.field("id").isin(ids), cols)
    ds = pqindex.dataset(str(big_dictionary_file))
    try:
        reads = []
        for _ in range(3):
            scan = ds.scan(columns=cols, where=where)
            got = scan.to_table().sort_by("id")
            assert got.equals(want.cast(got.schema))
            reads.append(scan.report.bytes_read)
        data = amount_dictionaries = dictionaries = 0
        with ParquetFile.open(big_dictionary_file) as pf:
            for rg in {i // 150_000 for i in ids}:
                for name in cols:
                    leaf = pf.schema.leaf(name)
                    oi = pf.offset_index(rg, leaf.index) if leaf is not None else None
                    assert leaf is not None and oi is not None and oi.page_locations
                    # Pages are not all 10,000 rows: a writer's fallback to PLAIN cuts one.
                    firsts = [loc.first_row_index or 0 for loc in oi.page_locations]
                    pages = sorted({int(np.searchsorted(firsts, i % 150_000, "right")) - 1
                                    for i in ids if i // 150_000 == rg})
                    data += sum(oi.page_locations[p].compressed_page_size or 0 for p in pages)
                    ext = pf.dictionary_extent(rg, leaf.index)
                    assert ext is not None
                    if pf.pages_need_dictionary(rg, leaf.index, pages):
                        dictionaries += ext[1]
                        amount_dictionaries += ext[1] if name == "amount" else 0
        # The third query reads the data pages only; the second also the dictionary
        # pages the first took entries from (``amount``'s at least: ``id``'s pages are
        # decoded whole for the predicate, their dictionary with them).
        assert reads[2] == data
        assert reads[2] + amount_dictionaries <= reads[1] <= reads[2] + dictionaries
    finally:
        ds.close()


@pytest.fixture(scope="module")
def indexed_issue_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The benchmark's issue file in small: pyarrow's defaults with snappy (1 MiB
    dictionary pages, ``id`` and ``ts`` falling back to PLAIN mid-chunk), a rare
    ``category`` value in a few rows, then ``pqindex index --bloom user_id --distinct
    category`` (no data page rewritten)."""
    rng = np.random.default_rng(21)
    n = 300_000
    cats = np.array([f"c{i:02d}" for i in range(50)] + ["rare"])
    idx = rng.integers(0, 50, n)
    idx[rng.choice(n, 12, replace=False)] = 50
    t = pa.table({
        "id": np.arange(n, dtype=np.int64),
        "ts": pa.array(np.arange(n, dtype=np.int64) * 1000, pa.timestamp("us", "UTC")),
        "category": pa.array(cats[idx]),
        "user_id": rng.integers(0, 10**12, n),
        "amount": np.round(rng.random(n) * 1000, 2),
    })
    path = tmp_path_factory.mktemp("issue") / "issue.parquet"
    pq.write_table(t, path, row_group_size=n // 2, write_page_index=True,
                   max_rows_per_page=10_000, compression="snappy")
    pqindex.add_indexes(str(path), bloom="user_id", distinct="category")
    return path


def test_cold_rare_and_user_lookups_on_an_indexed_file_agree_with_pyarrow(
        indexed_issue_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fresh datasets (cold): the projected values come from a few dictionary entries
    and PLAIN values gathered out of the snappy pages; the rows are pyarrow's.

    Regression: on this file every ``user_id`` lookup failed planning (an assertion,
    reported as CorruptFileError): a page Bloom blob chosen to be probed block by
    block had been read whole meanwhile, as a neighbour of the smaller blobs loaded
    with it, and the probe found its bytes already held."""
    from pqindex.scan import page_values

    gathered: list[bool] = []
    real = page_values.gather

    def spy(*args: Any) -> Any:
        found = real(*args)
        gathered.append(found is not None)
        return found

    monkeypatch.setattr(page_values, "gather", spy)
    table = pq.read_table(indexed_issue_file)
    cols = ["id", "ts", "amount"]
    users = table.column("user_id").to_numpy()[[5, 70_000, 149_999, 150_000, 299_999]]
    cases = [("category = 'rare'", pc.field("category") == "rare")] + [
        (f"user_id = {u}", pc.field("user_id") == int(u)) for u in users]
    for where, ref in cases:
        ds = pqindex.dataset(str(indexed_issue_file))
        try:
            got = ds.scan(columns=cols, where=where).to_table().sort_by("id")
        finally:
            ds.close()
        want = table.filter(ref).select(cols).sort_by("id")
        assert got.equals(want.cast(got.schema)), where
    assert sum(gathered) >= 10, gathered


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(["user", "users", "category", "categories", "id"]),
                          st.integers(0, 299_999), st.integers(0, 299_999)),
                min_size=1, max_size=4))
def test_lookups_on_an_indexed_file_warm_and_cold_agree_with_pyarrow(
        indexed_issue_file: Path, queries: list[tuple[str, int, int]]) -> None:
    table = pq.read_table(indexed_issue_file)
    users = table.column("user_id").to_numpy()
    cols = ["id", "ts", "amount"]
    warm = pqindex.dataset(str(indexed_issue_file))
    try:
        for kind, a, b in queries:
            if kind == "user":
                where, ref = f"user_id = {users[a]}", pc.field("user_id") == int(users[a])
            elif kind == "users":
                vals = [int(users[a]), int(users[b]), 10**13 + a]  # the last one absent
                where = f"user_id IN ({', '.join(map(str, vals))})"
                ref = pc.field("user_id").isin(vals)
            elif kind == "category":
                where, ref = "category = 'rare'", pc.field("category") == "rare"
            elif kind == "categories":
                c = f"c{a % 50:02d}"
                where = f"category IN ('rare', '{c}') AND id < {b}"
                ref = pc.field("category").isin(["rare", c]) & (pc.field("id") < b)
            else:
                lo, hi = min(a, b), min(a, b) + 30
                where, ref = f"id BETWEEN {lo} AND {hi}", (pc.field("id") >= lo) & (
                    pc.field("id") <= hi)
            want = table.filter(ref).select(cols).sort_by("id")
            cold = pqindex.dataset(str(indexed_issue_file))
            try:
                for ds in (cold, warm):
                    got = ds.scan(columns=cols, where=where).to_table().sort_by("id")
                    assert got.equals(want.cast(got.schema)), where
            finally:
                cold.close()
    finally:
        warm.close()
