"""pqindex's own Delta log reader (tables/delta_log.py) against deltalake's.

At every version of tables deltalake wrote (appends, a delete, an overwrite of a
partition, a compaction, a column added, checkpoints, column mapping, partition
columns of many types), the reader's snapshot is deltalake's: the same active files
with the same sizes, row counts and typed partition values, the same schema and
physical names, and the same per-file statistics. What it leaves to deltalake
(deletion vectors, a timestamp version) it leaves. On moto, a cold read is one LIST
and one wave of GETs.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from conftest import import_or_missing

deltalake = import_or_missing("deltalake", "deltalake")

import pqindex  # noqa: E402
from pqindex.dataset.tables.delta import DeltaSnapshot, load_delta  # noqa: E402
from pqindex.dataset.tables.delta_log import read_log  # noqa: E402
from s3_server import S3Endpoint, s3  # noqa: E402, F401  (the session fixture)
from table_rows import normalize  # noqa: E402
from test_tables_delta import _rows as delta_rows  # noqa: E402


def _rows(n: int, start: int = 0) -> pa.Table:
    """test_tables_delta's rows, with a timestamp, a decimal and a boolean column more."""
    ids = list(range(start, start + n))
    return (delta_rows(n, start)
            .append_column("at", pa.array([dt.datetime(2024, 1, 1, 3, 4, 5, 678901, tzinfo=dt.UTC)
                                           + dt.timedelta(hours=i) for i in ids],
                                          pa.timestamp("us", tz="UTC")))
            .append_column("price", pa.array([decimal.Decimal(i % 997) / 100 for i in ids],
                                             pa.decimal128(9, 2)))
            .append_column("flag", pa.array([i % 3 == 0 for i in ids], pa.bool_())))


def _same(mine: DeltaSnapshot | None, theirs: DeltaSnapshot) -> None:
    assert mine is not None
    assert mine.version == theirs.version
    assert mine.location == theirs.location
    assert mine.schema == theirs.schema
    assert mine.physical == theirs.physical
    assert mine.partition_columns == theirs.partition_columns
    key = lambda f: f.path  # noqa: E731
    assert sorted(mine.files, key=key) == sorted(theirs.files, key=key)
    assert mine.stats is not None and theirs.stats is not None
    order = {f.path: i for i, f in enumerate(theirs.files)}
    at = pa.array([order[f.path] for f in mine.files])
    theirs_stats = theirs.stats.take(pc.sort_indices(pc.sort_indices(at)))
    # deltalake's statistics of flat columns, all of them, in the same types and values
    # (one it has only as nulls is not in mine: unknown either way).
    for name in theirs_stats.column_names:
        want = theirs_stats.column(name).combine_chunks()
        if name not in mine.stats.column_names:
            assert want.null_count == len(want), name
            continue
        got = mine.stats.column(name).combine_chunks()
        if pa.types.is_floating(want.type):  # NaN bounds: unknown in both
            want = pc.if_else(pc.is_nan(want), pa.scalar(None, want.type), want)
            got = pc.if_else(pc.is_nan(got), pa.scalar(None, got.type), got)
        assert got.type == want.type, name
        assert got.to_pylist() == want.to_pylist(), name
    assert set(mine.stats.column_names) <= set(theirs_stats.column_names)


def _versions(path: Path) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(str(path)).version())


def _each_version(path: Path) -> None:
    for v in range(_versions(path) + 1):
        _same(read_log(str(path), v), load_delta(str(path), v))
    _same(read_log(str(path), None), load_delta(str(path)))


def test_the_log_is_deltalakes_through_every_kind_of_commit(tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake

    path = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(path), _rows(120, i * 120), mode="append", partition_by=["region"])
    DeltaTable(str(path)).delete("id >= 100 AND id < 180")
    DeltaTable(str(path)).create_checkpoint()  # later versions start from it
    write_deltalake(str(path), _rows(40, 2000).set_column(3, "region", pa.array(["ap"] * 40)),
                    mode="overwrite", predicate="region = 'ap'", partition_by=["region"])
    DeltaTable(str(path)).optimize.compact()
    from deltalake.schema import Field, PrimitiveType

    DeltaTable(str(path)).alter.add_columns([Field("score", PrimitiveType("integer"))])
    extra = _rows(30, 3000).append_column("score", pa.array(range(30), pa.int32()))
    write_deltalake(str(path), extra, mode="append", partition_by=["region"])
    DeltaTable(str(path)).create_checkpoint()
    write_deltalake(str(path), _rows(20, 4000).append_column("score", pa.nulls(20, pa.int32())),
                    mode="append", partition_by=["region"])
    _each_version(path)
    # A dataset of the latest version reads deltalake's rows.
    reference = DeltaTable(str(path)).to_pyarrow_table()
    ds = pqindex.dataset(str(path))
    assert normalize(ds.to_table()) == normalize(reference)
    assert normalize(ds.to_table(where="id BETWEEN 90 AND 250 AND region = 'eu'")) == normalize(
        reference.filter((pc.field("id") >= 90) & (pc.field("id") <= 250)
                         & (pc.field("region") == "eu")))


def test_partition_columns_of_many_types_and_an_overwrite(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    path = tmp_path / "t"
    t = _rows(60).append_column("n", pa.array([i % 4 if i % 7 else None for i in range(60)],
                                               pa.int16()))
    t = t.set_column(2, "amount", pa.array([i % 3 / 2 for i in range(60)], pa.float64()))
    parts = ["day", "flag", "n", "price", "at", "amount"]
    write_deltalake(str(path), t.slice(0, 12), partition_by=parts)
    write_deltalake(str(path), t.slice(12, 30), mode="append", partition_by=parts)
    write_deltalake(str(path), t.slice(42), mode="overwrite", partition_by=parts)
    _each_version(path)


def test_column_mapping_names_partitions_and_statistics_physically(tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake

    path = tmp_path / "t"
    write_deltalake(str(path), _rows(100), partition_by=["region"], configuration={
        "delta.columnMapping.mode": "name", "delta.minReaderVersion": "2",
        "delta.minWriterVersion": "5"})
    write_deltalake(str(path), _rows(50, 100), mode="append", partition_by=["region"])
    DeltaTable(str(path)).delete("id < 30")
    mine = read_log(str(path), None)
    assert mine is not None and mine.column_mapping
    _each_version(path)


def test_indexing_checkpoints_the_version_it_commits(tmp_path: Path) -> None:
    """The index commit names every file twice; its checkpoint spares readers that
    JSON: the reader starts from it, and its snapshot is deltalake's."""
    from deltalake import DeltaTable, write_deltalake

    path = tmp_path / "t"
    write_deltalake(str(path), _rows(200), partition_by=["region"])
    write_deltalake(str(path), _rows(100, 200), mode="append", partition_by=["region"])
    pqindex.add_indexes(str(path), bloom="user")
    version = _versions(path)
    assert (path / "_delta_log" / f"{version:020d}.checkpoint.parquet").is_file()
    _same(read_log(str(path), None), load_delta(str(path)))
    assert normalize(pqindex.dataset(str(path)).to_table()) == normalize(
        DeltaTable(str(path)).to_pyarrow_table())


def test_what_it_leaves_to_deltalake(tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake

    path = tmp_path / "t"
    write_deltalake(str(path), _rows(100), configuration={
        "delta.enableDeletionVectors": "true"})
    assert read_log(str(path), None) is not None  # the feature alone: read here
    DeltaTable(str(path)).delete("id < 10")
    if any(a is not None for a in pa.table(DeltaTable(str(path)).get_add_actions(
            flatten=True)).to_pydict().get("deletionVector.storageType", [])):
        assert read_log(str(path), None) is None  # a vector: delta-rs reads it
    assert read_log(str(path), 7) is None  # no such version: deltalake says so
    assert read_log(str(tmp_path / "none"), None) is None
    with pytest.raises(pqindex.errors.UserInputError):
        pqindex.dataset(str(path), version=7)


def test_a_cold_read_on_s3_is_one_list_and_one_wave(s3: S3Endpoint) -> None:  # noqa: F811
    from deltalake import DeltaTable, write_deltalake

    bucket = s3.new_bucket()
    url = f"s3://{bucket}/t"
    opts = s3.storage_options()
    wopts: dict[str, Any] = {**opts, "aws_s3_allow_unsafe_rename": "true"}
    for i in range(3):
        write_deltalake(url, _rows(100, i * 100), mode="append", partition_by=["region"],
                        storage_options=wopts)
    DeltaTable(url, storage_options=opts).create_checkpoint()
    write_deltalake(url, _rows(50, 1000), mode="append", partition_by=["region"],
                    storage_options=wopts)
    DeltaTable(url, storage_options=opts).delete("id < 20")
    _same(read_log(url, None, opts), load_delta(url, storage_options=opts))
    # Version 0 from its commit, 2 from its checkpoint: replayed as they arrive, before
    # the LIST confirms that is all they need; 3 from the checkpoint and a commit.
    for v in (0, 2, 3):
        _same(read_log(url, v, opts), load_delta(url, v, opts))
    reference = DeltaTable(url, storage_options=opts).to_pyarrow_table()

    s3.reset_log()
    s3.delay = 0.05  # a wave's requests overlap for sure: the proxy counts waves
    try:
        ds = pqindex.dataset(url, storage_options=opts)
        got = ds.to_table(where="id = 1010 AND region = 'eu'")
    finally:
        s3.delay = 0.0
    want = reference.filter((pc.field("id") == 1010) & (pc.field("region") == "eu"))
    assert normalize(got) == normalize(want)
    log = [r for r in s3.requests if "/_delta_log/" in r.path]
    # The checkpoint and the two commits after it, side by side.
    assert sorted(r.path.rsplit("/", 1)[1] for r in log) == [
        "00000000000000000002.checkpoint.parquet", "00000000000000000003.json",
        "00000000000000000004.json"], log
    # One LIST (the dataset's, of the table's root: it showed the log's names too).
    lists = [r for r in s3.requests if "list-type" in r.query]
    assert len(lists) == 1
    # Beside the LIST, the look for a pqindex manifest (no round trip of its own).
    beside = [r for r in s3.requests if r.path.endswith("/_pqindex_manifest.json")]
    data = [r for r in s3.requests if r.path.endswith(".parquet") and r not in log]
    # The table's key index descriptor (none here), looked for in the log's wave.
    keyed = [r for r in s3.requests if r.path.endswith("/_pqindex/key_index.json")]
    assert len(keyed) == 1
    assert len(s3.requests) == len(lists) + len(beside) + len(log) + len(data) + len(keyed), [
        (r.method, r.path[-40:], r.query[:30]) for r in s3.requests]
    # LIST, the log's wave, the tails of the files left.
    assert s3.waves == 3, [(r.method, r.path[-40:]) for r in s3.requests]

    # A numbered version with a checkpoint of its own (as pqindex's index commits
    # write): the checkpoint and the descriptor come beside the log's LIST.
    want = DeltaTable(url, version=2, storage_options=opts).to_pyarrow_table().filter(
        pc.field("id") == 110)
    region = want.column("region")[0].as_py()  # one file of the version holds the row
    s3.reset_log()
    s3.delay = 0.05
    try:
        got = pqindex.dataset(url, storage_options=opts, version=2).to_table(
            where=f"id = 110 AND region = '{region}'")
    finally:
        s3.delay = 0.0
    assert normalize(got) == normalize(want) and got.num_rows == 1
    names = [r.path.rsplit("/", 1)[1] for r in s3.requests if "list-type" not in r.query]
    assert sorted(names[:2]) == ["00000000000000000002.checkpoint.parquet",
                                 "key_index.json"], names
    assert len(names) == 3 and names[2].endswith(".parquet"), names
    # The LIST, the checkpoint and the descriptor; the tail of the file kept.
    assert s3.waves == 2, names


def test_statistics_parsed_at_once_equal_those_parsed_file_by_file() -> None:
    """The log's JSON statistics read by Arrow's JSON reader in one pass are what the
    per-file parse makes of them; a text Arrow refuses (damaged JSON, a NaN, a bound
    of the wrong kind) leaves the per-file parse, where only that file is unknown."""
    import json

    from pqindex.dataset.tables import delta_log

    schema = pa.schema([("i8", pa.int8()), ("i", pa.int64()), ("f", pa.float32()),
                        ("d", pa.float64()), ("p", pa.decimal128(9, 2)),
                        ("day", pa.date32()), ("at", pa.timestamp("us", tz="UTC")),
                        ("ntz", pa.timestamp("us")), ("s", pa.string()), ("b", pa.bool_()),
                        ("nested", pa.struct([("x", pa.int32())])), ("part", pa.int64())])
    physical = {f.name: f.name for f in schema} | {"i": "col-7"}
    bounds = [
        {"i8": -3, "col-7": 2**40, "f": 0.1, "d": -1e300, "p": 12.34, "day": "2024-02-29",
         "at": "2024-01-02T03:04:05.123Z", "ntz": "2024-01-02T03:04:05.123", "s": "é\"x",
         "b": True, "nested": {"x": 1}},
        {"i8": 127, "f": 3.4028235e38, "s": None},
        {},
    ]
    texts: list[Any] = [json.dumps({"numRecords": 10 + k, "minValues": b, "maxValues": b,
                                    "nullCount": {n: k for n in b}}, indent=k or None)
                        for k, b in enumerate(bounds)]
    texts += [None, ""]
    fields = delta_log._stats_columns(schema, physical, ["part"])
    logical = {physical[f.name]: f.name for f in schema}
    fast = delta_log._stats_table(schema, physical, ["part"], texts)
    slow = delta_log._stats_python(fields, logical, texts)
    assert delta_log._stats_arrow(fields, texts) is not None  # (the fast path ran)
    assert fast.column("rows").to_pylist() == slow.column("rows").to_pylist() == [
        10, 11, 12, None, None]
    assert fast.column_names == slow.column_names
    assert fast.equals(slow), (fast.to_pylist(), slow.to_pylist())
    assert "min.i" in fast.column_names and "min.nested" not in fast.column_names
    for bad in ('{"numRecords": 5, "minValues": {"i8": NaN}}', "{not json",
                '{"numRecords": 5, "minValues": {"i8": 1.5}}', "[1]"):
        assert delta_log._stats_arrow(fields, [*texts, bad]) is None
        table = delta_log._stats_table(schema, physical, ["part"], [*texts, bad])
        assert table.column("rows").to_pylist()[:5] == [10, 11, 12, None, None]
        if "min.i" in table.column_names:  # the good files' bounds are still known
            assert table.column("min.i")[0].as_py() == 2**40


def test_paths_and_partition_values_made_in_arrow_are_those_made_file_by_file() -> None:
    """The files' paths joined in one kernel and partition values typed by Arrow casts
    are what the per-file join and parse make of them, on the texts that take the
    per-file way too (URL-encoded, absolute, doubled slashes; texts a cast refuses)."""
    from pqindex.dataset.tables import delta_log
    from pqindex.dataset.tables.delta import _join

    rel = ["part=1/a.parquet", "part=x%20y/b.parquet", "/abs/c.parquet", "d//e.parquet",
           "s3://other/f.parquet", "file:///tmp/g.parquet", "h.parquet"]
    for root in ("s3://bucket/table", "/data/table", "/"):
        for rows in (rel[:1] + rel[-1:], rel):
            got = delta_log._paths(root, pa.array(rows, pa.string())).to_pylist()
            assert got == [_join(root, r) for r in rows], (root, rows)
    cases: list[tuple[pa.DataType, list[Any]]] = [
        (pa.int64(), ["1", "-7", "", None, "007"]),
        (pa.int64(), ["+3", " 5", "1_000", "9"]),  # a cast refuses: parsed one by one
        (pa.int8(), ["127", "-128"]),
        (pa.date32(), ["2024-02-29", "", None]),
        (pa.string(), ["a", "", None, "é"]),
        (pa.bool_(), ["true", "false", "TRUE", ""]),
        (pa.float64(), ["1.5", "-0.0", "1e300"]),
        (pa.decimal128(9, 2), ["3.50", "-1.25"]),
        (pa.timestamp("us", tz="UTC"), ["2023-12-31 23:59:59.123456", ""]),
        (pa.timestamp("us"), ["2023-12-31 23:59:59.123456"]),
    ]
    for t, texts in cases:
        got = delta_log._typed(pa.array(texts, pa.string()), t)
        assert got.type == t
        assert got.to_pylist() == pa.array(
            [delta_log._partition_value(v, t) for v in texts], t).to_pylist(), (t, texts)
    with pytest.raises(delta_log._Leave):  # out of the type's range: deltalake says so
        delta_log._typed(pa.array(["300"]), pa.int8())
    # A checkpoint's partition values without a lookup per row: what a lookup finds,
    # whatever the rows' keys (same order or not, missing, repeated, sliced, null).
    import random

    rng = random.Random(40)
    t = pa.map_(pa.string(), pa.string())
    for _ in range(200):
        keys = rng.sample(["a", "b", "c"], rng.randint(1, 3))
        rows: list[Any] = []
        for i in range(rng.randint(1, 6)):
            row = [(k, f"{k}{i}") for k in keys]
            if rng.random() < 0.15:
                rng.shuffle(row)
            if rng.random() < 0.1:
                row = row[1:] + row[:1] if rng.random() < 0.5 else row + row[:1]
            rows.append(None if rng.random() < 0.05 else row)
        arr = pa.array(rows, t)
        if rng.random() < 0.3 and len(arr) > 1:
            arr = arr.slice(1)
        for key in ("a", "b", "c"):
            want = pc.map_lookup(arr, key, "first")
            got = delta_log._same_keys(arr, key)
            assert got is None or got.to_pylist() == want.to_pylist(), (rows, key)


def test_a_replay_begun_before_the_list_fails_as_the_reader_would(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A numbered version's checkpoint is replayed as soon as it arrives, the LIST
    still out: its error is raised where the reader uses that replay (a damaged
    checkpoint), and a replay the LIST does not confirm is not used."""
    import pqindex.io.objects as objects
    from pqindex.dataset.tables import delta_log
    from pqindex.errors import CorruptFileError

    names = [f"{0:020d}.json", f"{1:020d}.json", f"{1:020d}.checkpoint.parquet"]
    fetched: list[str] = []

    def get(urls: list[str], _opts: Any) -> list[bytes | None]:
        fetched.extend(urls)
        return [b"not parquet" if u.endswith(".parquet") else None for u in urls]

    monkeypatch.setattr(delta_log, "_list", lambda *_: names)
    monkeypatch.setattr(objects, "get_objects", get)
    with pytest.raises(CorruptFileError, match="checkpoint"):
        delta_log.read_log("s3://bucket/t", 1, {})
    # The LIST shows the checkpoint only in parts: the guessed one is not the version's.
    names[2:] = [f"{1:020d}.checkpoint.{i:010d}.{2:010d}.parquet" for i in (1, 2)]
    fetched.clear()
    with pytest.raises(CorruptFileError, match="checkpoint part 0"):
        delta_log.read_log("s3://bucket/t", 1, {})
    assert any(".checkpoint.0000000001.0000000002" in u for u in fetched), fetched
