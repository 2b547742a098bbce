"""Planning behind the tail wave: on an object store each file is planned, and its
data requested, as soon as its own tail lands, while other tails are in flight.

Asserted on the order in which requests reached the counting proxy and on the
report's counts, never on durations.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import pqindex
from pqindex.errors import PqIndexError
from pqindex.io.cache import metadata_cache
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)

FILES = 8
ROWS = 4_000
TAIL = 16 * 1024  # covers footer and page index, not the data pages


@pytest.fixture(scope="module")
def lake(s3: S3Endpoint, tmp_path_factory: pytest.TempPathFactory  # noqa: F811
         ) -> tuple[str, pa.Table]:
    """Eight files of 4,000 ids each, sorted across files, data larger than the tail."""
    bucket = s3.new_bucket("tailwave")
    rng = np.random.default_rng(5)
    tables = []
    for k in range(FILES):
        ids = np.arange(k * ROWS, (k + 1) * ROWS, dtype=np.int64)
        t = pa.table({"id": ids, "x": rng.normal(size=ROWS),
                      "s": pa.array([f"{v:09d}-{h:016x}" for v, h in
                                     zip(ids, rng.integers(0, 2**62, ROWS), strict=True)])})
        local = tmp_path_factory.mktemp("tailwave") / "f.parquet"
        pqindex.write_table(t, local, sort_by="id", row_group_rows=ROWS, page_rows=500)
        assert local.stat().st_size > 4 * TAIL
        s3.put(bucket, f"t/part-{k:02d}.parquet", local.read_bytes())
        tables.append(t)
    return f"s3://{bucket}/t", pa.concat_tables(tables)


def _expected(ref: pa.Table, lo: int, hi: int) -> list[int]:
    mask = pc.and_(pc.greater_equal(ref["id"], lo), pc.less_equal(ref["id"], hi))
    return sorted(ref.filter(mask).column("id").to_pylist())


def _file_of(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def test_an_early_file_is_read_before_the_last_tail(
    s3: S3Endpoint, lake: tuple[str, pa.Table]  # noqa: F811
) -> None:
    """Two tails in flight at a time (``max_in_flight``): the tails go out in four
    batches; the rows of the first file are requested right after its tail landed,
    before the last batch of tails is sent."""
    url, ref = lake
    lo, hi = 100, 1_300  # inside the first file
    metadata_cache().clear()
    s3.reset_log()
    s3.delay = 0.1
    try:
        ds = pqindex.dataset(url, storage_options=s3.storage_options(max_in_flight="2"),
                             tail_bytes=TAIL)
        scan = ds.scan(columns=["id", "s"], where=f"id BETWEEN {lo} AND {hi}")
        got = scan.to_table()
    finally:
        s3.delay = 0.0
    assert sorted(got.column("id").to_pylist()) == _expected(ref, lo, hi)
    log = [r for r in s3.requests if r.method == "GET" and r.path.endswith(".parquet")]
    tails = [i for i, r in enumerate(log) if r.range == f"bytes=-{TAIL}"]
    assert len(tails) == FILES
    data = [i for i, r in enumerate(log) if r.range is not None and i not in tails]
    assert data, "the rows must come from a range read, not from the tail"
    assert {_file_of(log[i].path) for i in data} == {"part-00.parquet"}
    # The overlap: the first file's data request reached the store before the last tail.
    assert data[0] < tails[-1], [(_file_of(r.path), r.range) for r in log]
    # Overlapped or not, a file's chain is still tail -> data: the LIST, one wave of
    # tails, one of data (the manifest probe goes with the LIST).
    rep = scan.report.to_dict()
    assert rep["requests"] == len(s3.requests)
    assert rep["round_trips"] == 3
    assert rep["files_read"] == 1


def test_reading_while_planning_counts_like_planning_first(
    s3: S3Endpoint, lake: tuple[str, pa.Table]  # noqa: F811
) -> None:
    """A scan that reads files while others are planned makes the same requests and
    reports the same round trips as planning everything first (``scan(plan=...)``),
    and gives the same rows."""
    url, ref = lake
    where = f"id BETWEEN {ROWS - 50} AND {3 * ROWS + 20} AND x > 0"
    mask = pc.and_(pc.and_(pc.greater_equal(ref["id"], ROWS - 50),
                           pc.less_equal(ref["id"], 3 * ROWS + 20)),
                   pc.greater(ref["x"], 0))
    seen = []
    for premade in (False, True):
        metadata_cache().clear()
        s3.reset_log()
        ds = pqindex.dataset(url, storage_options=s3.storage_options(), tail_bytes=TAIL)
        if premade:
            scan = ds.scan(plan=ds.plan(["id", "x", "s"], where))
        else:
            scan = ds.scan(["id", "x", "s"], where)
        got = scan.to_table()
        assert got.sort_by("id").equals(ref.filter(mask).sort_by("id"))
        rep = scan.report.to_dict()
        if not premade:  # a premade plan's report counts the scan's own requests
            assert rep["requests"] == len(s3.requests)
        ranges = sorted((r.path, r.range or "") for r in s3.requests)
        seen.append((ranges, {k: rep[k] for k in ("round_trips", "files_read",
                                                  "row_groups_read", "pages_read")}))
    assert seen[0] == seen[1]
    assert seen[0][1]["files_read"] == 4


def test_columns_none_reads_every_column_while_planning(
    s3: S3Endpoint, lake: tuple[str, pa.Table]  # noqa: F811
) -> None:
    """Without ``columns`` a file read during planning gives all its columns, in the
    dataset's order."""
    url, ref = lake
    metadata_cache().clear()
    ds = pqindex.dataset(url, storage_options=s3.storage_options(), tail_bytes=TAIL)
    got = ds.scan(where=f"id BETWEEN {2 * ROWS - 3} AND {2 * ROWS + 3}").to_table()
    assert got.schema.names == ref.schema.names
    mask = pc.and_(pc.greater_equal(ref["id"], 2 * ROWS - 3),
                   pc.less_equal(ref["id"], 2 * ROWS + 3))
    assert got.sort_by("id").equals(ref.filter(mask).sort_by("id"))


def test_tails_of_a_wave_land_one_by_one(
    s3: S3Endpoint, lake: tuple[str, pa.Table]  # noqa: F811
) -> None:
    """``start_tails``: each file can be waited for alone; the wave counts one round
    trip per file from its start and fills the metadata cache."""
    from pqindex.dataset.discovery import discover
    from pqindex.io.objstore import start_tails
    from pqindex.io.source import IOStats

    url, _ = lake
    metadata_cache().clear()
    disc = discover(url, s3.storage_options())
    stats = {df.path: IOStats() for df in disc.files}
    s3.reset_log()
    tails = start_tails([(df.path, df.info, stats[df.path]) for df in disc.files],
                        s3.storage_options(), TAIL)
    assert tails is not None and len(tails) == FILES
    assert all(st.round_trips == 1 for st in stats.values())
    first = disc.files[0].path
    tails.wait(first)
    assert stats[first].requests == 1
    assert tails.join() == FILES
    assert all(st.requests == 1 and st.bytes_read == TAIL for st in stats.values())
    assert len(s3.requests) == FILES
    # Cached: a second wave has nothing to read.
    assert start_tails([(df.path, df.info, None) for df in disc.files],
                       s3.storage_options(), TAIL) is None


def test_a_damaged_file_in_the_wave_is_named(
    s3: S3Endpoint, lake: tuple[str, pa.Table]  # noqa: F811
) -> None:
    """A file whose tail is not Parquet, landing among the others: the scan raises
    an error naming it, and once it did, no tail of the wave is still awaited."""
    url, _ = lake
    bucket = url.split("/")[2]
    for k in range(3):
        src = s3.boto3().get_object(Bucket=bucket, Key=f"t/part-{k:02d}.parquet")["Body"]
        s3.put(bucket, f"bad/part-{k:02d}.parquet", src.read())
    s3.put(bucket, "bad/part-01x.parquet", b"not parquet at all" * 100)
    metadata_cache().clear()
    ds = pqindex.dataset(f"s3://{bucket}/bad", storage_options=s3.storage_options(),
                         tail_bytes=TAIL)
    with pytest.raises(PqIndexError) as exc:
        ds.scan(["id"], "id = 5").to_table()
    assert "part-01x.parquet" in str(exc.value)
    assert not ds._landing


def test_a_scanned_dataset_is_freed_without_the_cyclic_gc(
    s3: S3Endpoint, lake: tuple[str, pa.Table]  # noqa: F811
) -> None:
    """A dataset whose tails came in one wave holds its footers of every file: once
    dropped it must go by reference counting. (The wave's future kept a callback naming
    the wave and the dataset: a cycle only the full collection, traversing every
    footer, freed; a cold 1,000-file scan paid ~100 ms of GC for it.) The requests
    stay one tail per file plus the data of the one file kept."""
    url, ref = lake
    metadata_cache().clear()
    s3.reset_log()
    gc.collect()
    gc.disable()
    try:
        ds = pqindex.dataset(url, storage_options=s3.storage_options(), tail_bytes=TAIL)
        got = ds.scan(["id"], "id = 4005").to_table()
        gone = weakref.ref(ds)
        files = [weakref.ref(of.pf) for of in ds._open.values()]
        assert len(files) == FILES
        del ds
        assert gone() is None
        assert all(f() is None for f in files)
    finally:
        gc.enable()
    assert got.column("id").to_pylist() == _expected(ref, 4005, 4005)
    gets = [r for r in s3.requests if r.method == "GET" and r.path.endswith(".parquet")]
    tails = [r for r in gets if r.range == f"bytes=-{TAIL}"]
    assert len(tails) == FILES
    assert {_file_of(r.path) for r in gets if r not in tails} == {"part-01.parquet"}


def test_a_file_is_handed_on_once_its_tail_landed(
    s3: S3Endpoint, lake: tuple[str, pa.Table]  # noqa: F811
) -> None:
    """``TailWave.when_landed`` (how planning tasks are submitted): a file outside the
    wave at once; a file of the wave once, after its tail is in the metadata cache;
    after landing at once again. The scan of a dataset planned this way sends one tail
    per file and reads the one file kept, in two round trips (tail, data)."""
    from pqindex.dataset.discovery import discover
    from pqindex.io.objstore import start_tails
    from pqindex.io.source import IOStats

    url, ref = lake
    metadata_cache().clear()
    disc = discover(url, s3.storage_options())
    seen: list[tuple[str, bool]] = []

    def hook(df_path: str) -> None:
        df = next(d for d in disc.files if d.path == df_path)
        key = (df.path, df.info.size, df.info.etag) if df.info is not None else None
        seen.append((df_path, metadata_cache().get(key) is not None))

    s3.delay = 0.2
    try:
        tails = start_tails([(df.path, df.info, IOStats()) for df in disc.files],
                            s3.storage_options(), TAIL)
        assert tails is not None
        elsewhere: list[str] = []
        tails.when_landed(f"{url}/elsewhere.parquet", lambda: elsewhere.append("now"))
        assert elsewhere == ["now"]
        for df in disc.files:
            tails.when_landed(df.path, lambda p=df.path: hook(p))
        assert len(seen) < FILES  # 0.2 s per request: most are still in flight
        tails.join()
    finally:
        s3.delay = 0.0
    assert sorted(seen) == sorted((df.path, True) for df in disc.files)
    first = disc.files[0].path
    tails.when_landed(first, lambda: hook(first))
    assert seen[-1] == (first, True) and len(seen) == FILES + 1

    metadata_cache().clear()
    s3.reset_log()
    ds = pqindex.dataset(url, storage_options=s3.storage_options(), tail_bytes=TAIL)
    scan = ds.scan(["id", "x"], "id = 6001")
    got = scan.to_table()
    assert got.column("id").to_pylist() == _expected(ref, 6001, 6001)
    gets = [r for r in s3.requests if r.method == "GET" and r.path.endswith(".parquet")]
    assert sum(r.range == f"bytes=-{TAIL}" for r in gets) == FILES
    assert {_file_of(r.path) for r in gets if r.range != f"bytes=-{TAIL}"} == {
        "part-01.parquet"}
    assert scan.report.round_trips == 3  # the LIST, the tails, the data
