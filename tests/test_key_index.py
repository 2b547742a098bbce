"""The lake-wide key index (dataset/key_index.py): lookups against full scans.

Random lakes of several writers' files (pyarrow, pqindex), key columns of every
supported type with nulls and duplicates, keys in many files; the index built by
``pqindex manifest --key-index``; then files added (delta shards, or not covered at
all), removed, rewritten, and the index's shards damaged or missing. Every answer is
compared with a full pyarrow read filtered by pyarrow: the index may only ever save
reads, never change rows.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import pqindex
from pqindex.cli import cli
from pqindex.dataset.key_index import SHARD_SUFFIX
from pqindex.dataset.manifest import write_manifest
from pqindex.errors import UserInputError
from pqindex.expr.nodes import Column, In, Literal


def _values(kind: str, rng: random.Random, n: int, pool: int) -> pa.Array:
    """``n`` values drawn from ``pool`` distinct ones (duplicates across files), ~10% null."""
    raw = [None if rng.random() < 0.1 else rng.randrange(pool) for _ in range(n)]
    if kind == "int64":
        return pa.array([None if v is None else v * 7919 - 10**6 for v in raw], pa.int64())
    if kind == "int32":
        return pa.array(raw, pa.int32())
    if kind == "string":
        return pa.array([None if v is None else f"user-{v:06d}" for v in raw], pa.string())
    if kind == "binary":
        return pa.array([None if v is None else v.to_bytes(3, "big") + b"\xff" for v in raw],
                        pa.binary())
    if kind == "decimal":
        return pa.array([None if v is None else Decimal(v) / 100 for v in raw],
                        pa.decimal128(12, 2))
    if kind == "date":
        return pa.array([None if v is None else dt.date(2000, 1, 1) + dt.timedelta(days=v)
                         for v in raw], pa.date32())
    if kind == "timestamp":
        return pa.array([None if v is None else v * 1_000_003 for v in raw],
                        pa.timestamp("us"))
    raise AssertionError(kind)


KINDS = ["int64", "int32", "string", "binary", "decimal", "date", "timestamp"]


def _write(path: Path, table: pa.Table, rng: random.Random) -> None:
    if rng.random() < 0.5:
        pq.write_table(table, path, row_group_size=rng.choice([50, 120, 400]))
    else:
        pqindex.write_table(table, path, row_group_rows=rng.choice([64, 200]), indexes=None)


def _lake(root: Path, kind: str, seed: int, files: int = 8, rows: int = 400,
          start: int = 0) -> None:
    rng = random.Random(seed)
    pool = files * rows // 3  # duplicates within and across files
    for i in range(start, start + files):
        key = _values(kind, rng, rows, pool)
        _write(root / f"part-{i:03d}.parquet", pa.table({"k": key, "row": pa.array(
            range(i * rows, (i + 1) * rows), pa.int64())}), rng)


def _build(root: Path, *columns: str) -> None:
    args = ["manifest", str(root)]
    for c in columns:
        args += ["--key-index", c]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output


def _reference(root: Path, keys: list[Any]) -> list[int]:
    t = pads.dataset(str(root), format="parquet").to_table()
    mask = pc.is_in(t["k"], value_set=pa.array(keys, t.schema.field("k").type))
    return sorted(t.filter(mask)["row"].to_pylist())


def _lookup(root: Path, keys: list[Any]) -> tuple[list[int], dict[str, Any]]:
    where = In(Column("k"), tuple(Literal(k) for k in keys))
    scan = pqindex.dataset(str(root)).scan(columns=["row"], where=where)
    got = scan.to_table()
    return sorted(got["row"].to_pylist()), scan.report.to_dict()


def _probe_keys(root: Path, rng: random.Random, n: int) -> list[Any]:
    """Keys present (some in many files) and absent (inside every file's range)."""
    t = pads.dataset(str(root), format="parquet").to_table(columns=["k"])
    present = [v for v in pc.unique(t["k"]).to_pylist() if v is not None]
    keys = rng.sample(present, min(n, len(present)))
    typ = t.schema.field("k").type
    lo, hi = min(present), max(present)
    if pa.types.is_integer(typ):
        keys.append((lo + hi) // 2 * 2 + 1 if (lo + hi) // 2 * 2 + 1 not in present else hi + 1)
    return keys


@pytest.mark.parametrize("kind", KINDS)
def test_lookups_equal_a_full_scan(tmp_path: Path, kind: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from pqindex.dataset import key_index as ki
    from pqindex.dataset import manifest

    # Batches of 3 files, runs of 2: the build sorts 4 runs (a key in several) and
    # merges them.
    monkeypatch.setattr(ki, "_TAIL_BATCH", 3)
    monkeypatch.setattr(ki, "_RUN_FILES", 2)
    monkeypatch.setattr(ki, "_RADIX_MIN", 16)  # integer runs take the radix sort
    monkeypatch.setattr(manifest, "_WRITE_BATCH", 3)
    # Small shards: the runs are merged by key ranges, each cut into several shards.
    monkeypatch.setattr(ki, "SHARD_BYTES", 4 << 10)
    _lake(tmp_path, kind, seed=KINDS.index(kind))
    _build(tmp_path, "k")
    index = ki.parse_key_index(json.loads((tmp_path / "_pqindex_manifest.json").read_text())
                               ["key_index"])
    shards = index.columns["k"].shards
    assert len(shards) > 3 and all(a.max <= b.min for a, b in itertools.pairwise(shards))
    rng = random.Random(7)
    for n in (1, 1, 3, 20):
        keys = _probe_keys(tmp_path, rng, n)
        got, rep = _lookup(tmp_path, keys)
        assert got == _reference(tmp_path, keys), (kind, keys)
        ki = rep["key_index"]
        assert ki["fallback"] is None and ki["files_not_covered"] == 0
        # The files the index names are the only ones opened.
        assert rep["files_total"] - rep["files_skipped"].get("key index", 0) - \
            rep["files_skipped"].get("manifest", 0) <= ki["files_named"]


@pytest.mark.parametrize("kind", KINDS)
def test_built_entries_are_the_distinct_entries_in_key_order(kind: str) -> None:
    """The build's sort (runs sorted apart, then merged): every distinct (key, file,
    row group) once, keys in order, as a Python set and sort say."""
    from pqindex.dataset.key_index import _merge_runs, _sorted_entries

    rng = random.Random(KINDS.index(kind) + 100)
    runs, expected = [], set()
    for r in range(3):
        n = rng.choice([0, 1, 300])
        keys = pc.drop_null(_values(kind, rng, n + 50, pool=40))[:n]
        n = len(keys)
        files = [r * 10 + rng.randrange(3) for _ in range(n)]
        rgs = [rng.randrange(2) for _ in range(n)]
        expected |= set(zip(keys.to_pylist(), files, rgs, strict=True))
        runs.append(_sorted_entries(keys, np.array(rgs, np.int32), np.array(files, np.int32)))
    k, g, f = _merge_runs(runs)
    got = list(zip(k.to_pylist(), f.tolist(), g.tolist(), strict=True))
    assert len(got) == len(set(got)) and set(got) == expected
    assert k.to_pylist() == sorted(k.to_pylist())


@pytest.mark.parametrize("case", ["random", "full-span", "unsigned", "narrow", "skewed",
                                  "equal", "int32", "small"])
def test_the_radix_key_order_is_numpys_stable_argsort(case: str) -> None:
    """The build's key sort (a radix pass on the top bits, then a stable sort of the
    nearly sorted keys) orders as ``np.argsort(kind="stable")``, ties in input order."""
    from pqindex.dataset.key_index import _key_order

    rng = np.random.default_rng(len(case))
    n = 20_000
    info64 = np.iinfo(np.int64)
    raw = {
        "random": lambda: rng.integers(0, 2**62, n, dtype=np.int64),
        "full-span": lambda: np.concatenate((
            rng.integers(info64.min, info64.max, n, dtype=np.int64, endpoint=True),
            [info64.min, info64.max, -1, 0])),
        "unsigned": lambda: rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True),
        "narrow": lambda: rng.integers(-300, 300, n, dtype=np.int64),
        "skewed": lambda: np.concatenate((rng.integers(0, 50, n, dtype=np.int64),
                                          [2**60, -(2**61)])),
        "equal": lambda: np.full(n, 42, np.int64),
        "int32": lambda: rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int32),
        "small": lambda: rng.integers(0, 2**40, 100, dtype=np.int64),
    }[case]()
    raw = np.concatenate((raw, raw[: len(raw) // 3]))  # duplicates
    order, ks = _key_order(raw)
    expected = np.argsort(raw, kind="stable")
    assert np.array_equal(order, expected) and np.array_equal(ks, raw[expected])


def test_an_absent_key_opens_no_file(tmp_path: Path) -> None:
    _lake(tmp_path, "int64", seed=3)
    _build(tmp_path, "k")
    got, rep = _lookup(tmp_path, [1])  # inside every file's range, not a value (7919k - 1e6)
    assert got == []
    assert rep["files_read"] == 0 and rep["row_groups_total"] == 0
    assert rep["files_skipped"]["key index"] == 8


def test_files_added_after_the_index_are_planned_from_their_footers(tmp_path: Path) -> None:
    _lake(tmp_path, "string", seed=4)
    _build(tmp_path, "k")
    _lake(tmp_path, "string", seed=5, files=3, start=8)
    write_manifest(tmp_path)  # the manifest refreshed, the index kept: 3 files not covered
    rng = random.Random(1)
    for _ in range(4):
        keys = _probe_keys(tmp_path, rng, 5)
        got, rep = _lookup(tmp_path, keys)
        assert got == _reference(tmp_path, keys)
        assert rep["key_index"]["files_not_covered"] == 3


def test_an_append_adds_a_delta_shard(tmp_path: Path) -> None:
    _lake(tmp_path, "int64", seed=6)
    _build(tmp_path, "k")
    before = _shards(tmp_path)
    _lake(tmp_path, "int64", seed=7, files=2, start=8)
    _build(tmp_path, "k")
    after = _shards(tmp_path)
    assert [s["path"] for s in after[: len(before)]] == [s["path"] for s in before]
    assert len(after) == len(before) + 1 and after[-1]["delta"] is True
    rng = random.Random(2)
    for _ in range(4):
        keys = _probe_keys(tmp_path, rng, 8)
        got, rep = _lookup(tmp_path, keys)
        assert got == _reference(tmp_path, keys)
        assert rep["key_index"]["files_not_covered"] == 0


def _shards(root: Path) -> list[dict[str, Any]]:
    m = json.loads((root / "_pqindex_manifest.json").read_text())
    return list(m["key_index"]["columns"]["k"]["shards"])


def test_removed_and_rewritten_files(tmp_path: Path) -> None:
    _lake(tmp_path, "int64", seed=8)
    _build(tmp_path, "k")
    (tmp_path / "part-002.parquet").unlink()
    # Rewritten with other keys: the index's entries for it must not be used.
    _lake(tmp_path, "int64", seed=99, files=1, start=5)
    rng = random.Random(3)
    for _ in range(5):
        keys = _probe_keys(tmp_path, rng, 6)
        got, rep = _lookup(tmp_path, keys)
        assert got == _reference(tmp_path, keys)
        # The rewritten file is not covered; the removed one is just not there.
        assert rep["key_index"]["files_not_covered"] == 1


@pytest.mark.parametrize("damage", ["bytes", "same-mtime", "missing", "truncated",
                                    "descriptor"])
def test_a_damaged_index_falls_back_to_the_files(tmp_path: Path, damage: str) -> None:
    _lake(tmp_path, "int64", seed=9)
    _build(tmp_path, "k")
    shard = tmp_path / _shards(tmp_path)[0]["path"]
    if damage == "bytes":  # same size: page bytes flipped (the CRC-32 sees it)
        data = bytearray(shard.read_bytes())
        for i in range(8, len(data) // 2, 97):
            data[i] ^= 0x5A
        shard.write_bytes(bytes(data))
    elif damage == "same-mtime":  # one bit, size and mtime kept: the CRC-32 sees it
        st = shard.stat()
        data = bytearray(shard.read_bytes())
        data[len(data) // 3] ^= 0x01
        shard.write_bytes(bytes(data))
        os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif damage == "missing":
        shard.unlink()
    elif damage == "truncated":
        shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    else:
        m = json.loads((tmp_path / "_pqindex_manifest.json").read_text())
        m["key_index"]["columns"]["k"]["shards"][0]["min"] = "not a key"
        (tmp_path / "_pqindex_manifest.json").write_text(json.dumps(m))
    rng = random.Random(4)
    keys = _probe_keys(tmp_path, rng, 5)
    got, rep = _lookup(tmp_path, keys)
    assert got == _reference(tmp_path, keys)
    assert rep["key_index"]["fallback"], rep["key_index"]
    assert "files_skipped" not in rep or not rep["files_skipped"].get("key index")
    text = pqindex.dataset(str(tmp_path)).explain(where=In(Column("k"), tuple(
        Literal(k) for k in keys)))
    assert "key index on k not used" in str(text)


def test_a_key_column_whose_type_changed_is_an_error_naming_the_files(tmp_path: Path) -> None:
    pq.write_table(pa.table({"k": pa.array([1, 2], pa.int64())}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"k": pa.array(["1", "2"])}), tmp_path / "b.parquet")
    from pqindex.dataset.key_index import build_key_index

    with pytest.raises(UserInputError) as e:
        build_key_index(tmp_path, ["k"])
    assert "a.parquet" in str(e.value) and "b.parquet" in str(e.value)


def test_a_float_key_column_is_refused(tmp_path: Path) -> None:
    pq.write_table(pa.table({"k": pa.array([1.5, 2.5])}), tmp_path / "a.parquet")
    from pqindex.dataset.key_index import build_key_index

    with pytest.raises(UserInputError, match="integers, strings"):
        build_key_index(tmp_path, ["k"])


def test_other_readers_do_not_take_the_index_for_data(tmp_path: Path) -> None:
    import duckdb
    import polars
    _lake(tmp_path, "string", seed=10)

    def counts() -> tuple[int, ...]:
        return (
            pads.dataset(str(tmp_path), format="parquet").count_rows(),
            duckdb.sql(f"SELECT count(*) FROM '{tmp_path}/*.parquet'").fetchall()[0][0],
            duckdb.sql(f"SELECT count(*) FROM '{tmp_path}/**/*.parquet'").fetchall()[0][0],
            polars.scan_parquet(f"{tmp_path}/*.parquet").select(polars.len()).collect().item(),
            polars.scan_parquet(f"{tmp_path}/**/*.parquet").select(polars.len()).collect().item(),
            pqindex.dataset(str(tmp_path)).scan(columns=["row"]).to_table().num_rows,
        )

    before = counts()
    _build(tmp_path, "k", "row")
    shards = [p for p in tmp_path.rglob("*") if p.is_file() and p.name.endswith(SHARD_SUFFIX)]
    assert len(shards) == 2
    assert counts() == before == (3200,) * 6


def test_two_indexed_columns_and_an_and(tmp_path: Path) -> None:
    _lake(tmp_path, "int64", seed=11)
    _build(tmp_path, "k", "row")
    t = pads.dataset(str(tmp_path), format="parquet").to_table()
    row = 1234
    scan = pqindex.dataset(str(tmp_path)).scan(where=f"row = {row} AND k IS NOT NULL")
    got = scan.to_table()
    assert got["row"].to_pylist() == t.filter(pc.and_(pc.equal(t["row"], row),
                                                      pc.is_valid(t["k"])))["row"].to_pylist()
    assert scan.report.to_dict()["key_index"]["files_named"] == 1
    text = str(pqindex.dataset(str(tmp_path)).explain(where=f"row = {row}"))
    assert "key index on row: shards _pqindex/key_index/row/" in text
    assert "named 1 file(s), 1 row group(s)" in text
    assert os.path.isdir(tmp_path / "_pqindex" / "key_index" / "row")


def test_spark_does_not_take_the_index_for_data(tmp_path: Path, spark: Any) -> None:
    _lake(tmp_path, "int64", seed=12, files=3)
    before = spark.read.parquet(str(tmp_path)).count()
    _build(tmp_path, "k")
    assert spark.read.parquet(str(tmp_path)).count() == before == 1200
    assert spark.read.parquet(f"{tmp_path}/*.parquet").count() == before


def test_integer_shards_hold_deltas_and_string_shards_dictionaries(tmp_path: Path) -> None:
    """Shards of integer keys (read whole, checked by their CRC-32): keys, file ids
    and row groups as deltas with no codec, no page checksums; strings keep zstd,
    page checksums and dictionary file ids (a large shard's pages are read alone by
    pqindex's reader). Statistics on the key alone. Lookups still equal a full scan."""
    for kind in ("int64", "string"):
        root = tmp_path / kind
        root.mkdir()
        _lake(root, kind, seed=31, files=12)
        _build(root, "k")
        for sh in _shards(root):
            md = pq.ParquetFile(root / sh["path"]).metadata
            assert md.num_rows == sh["entries"] and md.schema.names == ["key", "row_group",
                                                                         "file"]
            rg = md.row_group(0)
            key, row_group, file = (rg.column(i) for i in range(3))
            assert row_group.compression == file.compression == "UNCOMPRESSED"
            assert key.is_stats_set and not file.is_stats_set
            if kind == "int64":
                for c in (key, row_group, file):
                    assert "DELTA_BINARY_PACKED" in c.encodings, c
                assert key.compression == "UNCOMPRESSED"
            else:
                assert row_group.has_dictionary_page and file.has_dictionary_page
                assert key.compression == "ZSTD"
        _check_lookups(root, 3)


def test_compaction_checks_each_shard_against_its_crc32(tmp_path: Path) -> None:
    """Integer shards carry no page checksums: a compaction reading a damaged one
    (size kept) must refuse it, not merge wrong entries into the new run."""
    from pqindex.dataset.key_index import compact_key_index
    from pqindex.errors import PqIndexError

    _lake(tmp_path, "int64", seed=33, files=4)
    _build(tmp_path, "k")
    shard = tmp_path / _shards(tmp_path)[0]["path"]
    data = bytearray(shard.read_bytes())
    data[len(data) // 3] ^= 0x01
    shard.write_bytes(bytes(data))
    with pytest.raises(PqIndexError, match="CRC-32"):
        compact_key_index(tmp_path)


def test_compaction_merges_delta_shards(tmp_path: Path) -> None:
    _lake(tmp_path, "string", seed=21, files=4)
    _build(tmp_path, "k")
    for start in (4, 6):  # two appends: two delta runs
        _lake(tmp_path, "string", seed=start, files=2, start=start)
        _build(tmp_path, "k")
    os.remove(tmp_path / "part-001.parquet")  # its entries go with the compaction
    assert sum(s["delta"] for s in _shards(tmp_path)) == 2
    r = CliRunner().invoke(cli, ["manifest", str(tmp_path), "--compact-key-index"])
    assert r.exit_code == 0, r.output
    after = _shards(tmp_path)
    assert not any(s["delta"] for s in after)
    keys = sorted(s["min"]["b"] for s in after)
    assert keys == [s["min"]["b"] for s in after]  # one sorted run
    m = json.loads((tmp_path / "_pqindex_manifest.json").read_text())
    assert "part-001.parquet" not in {f["path"] for f in m["key_index"]["files"]}
    # The merged shards are deleted once the manifest naming the new run is in.
    assert _shard_files(tmp_path) == {s["path"] for s in after}
    _check_lookups(tmp_path, 5)


def _shard_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*" + SHARD_SUFFIX)}


def test_a_rebuild_deletes_the_shards_it_supersedes(tmp_path: Path) -> None:
    _lake(tmp_path, "int64", seed=22, files=4)
    _build(tmp_path, "k")
    first = _shard_files(tmp_path)
    assert first == {s["path"] for s in _shards(tmp_path)}
    _lake(tmp_path, "int64", seed=23, files=1, start=4)
    _build(tmp_path, "k")  # a delta: every shard stays named and on disk
    assert first < _shard_files(tmp_path) == {s["path"] for s in _shards(tmp_path)}
    _build(tmp_path, "k", "row")  # other columns: a rebuild
    m = json.loads((tmp_path / "_pqindex_manifest.json").read_text())
    named = {s["path"] for c in m["key_index"]["columns"].values() for s in c["shards"]}
    assert _shard_files(tmp_path) == named and not named & first
    _check_lookups(tmp_path, 6)


def test_large_shards_are_read_page_by_page(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Shards too large to read whole: their tail, then the pages holding the keys
    (the page index pyarrow's writer wrote), checksums verified."""
    from pqindex.dataset import key_index

    monkeypatch.setattr(key_index, "PAGE_BYTES", 1024)  # many pages a shard
    _lake(tmp_path, "string", seed=24, files=6, rows=600)
    _build(tmp_path, "k")
    monkeypatch.setattr(key_index, "WHOLE_SHARD_BYTES", 0)
    rng = random.Random(8)
    for n in (1, 5):
        keys = _probe_keys(tmp_path, rng, n)
        got, rep = _lookup(tmp_path, keys)
        assert got == _reference(tmp_path, keys)
        ki = rep["key_index"]
        assert ki["fallback"] is None and ki["shards_whole"] == 0
        # The pages holding a key (of the key, file and row group columns; a key
        # may straddle two pages), of the dozens the shard has.
        assert 0 < ki["pages"] <= 3 * 2 * len(keys)


def _check_lookups(root: Path, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(3):
        keys = _probe_keys(root, rng, 10)
        got, rep = _lookup(root, keys)
        assert got == _reference(root, keys)
        assert rep["key_index"]["fallback"] is None
        assert rep["key_index"]["files_not_covered"] == 0


def test_spark_write_commits_the_key_index_with_the_manifest(tmp_path: Path, spark: Any
                                                           ) -> None:
    import pqindex.spark

    rng = random.Random(31)
    dest = tmp_path / "lake"
    rows = [(rng.randrange(10**12) if i % 13 else None, i) for i in range(600)]
    pqindex.spark.write(spark.createDataFrame(rows, "k long, row long"), str(dest),
                        sort_by="row", key_index=["k"], num_partitions=2)
    m = json.loads((dest / "_pqindex_manifest.json").read_text())
    assert m["commit_point"] is True and len(m["files"]) == 2
    assert {f["path"] for f in m["key_index"]["files"]} == {f["path"] for f in m["files"]}
    _check_lookups(dest, 1)


def test_spark_writes_that_change_the_index_delete_its_old_shards(tmp_path: Path,
                                                                  spark: Any) -> None:
    """An append indexing other columns, then an overwrite: each commit's manifest
    names new shards only, and the shards it no longer names are deleted."""
    import pqindex.spark

    dest = tmp_path / "lake"
    rng = random.Random(34)

    def frame(start: int) -> Any:
        rows = [(rng.randrange(10**9), i) for i in range(start, start + 300)]
        return spark.createDataFrame(rows, "k long, row long")

    pqindex.spark.write(frame(0), str(dest), sort_by="row", key_index=["k"],
                        num_partitions=1)
    first = _shard_files(dest)
    assert first == {s["path"] for s in _shards(dest)}
    for mode, columns, start in (("append", ["row"], 300), ("overwrite", ["row"], 600)):
        before = _shard_files(dest)
        pqindex.spark.write(frame(start), str(dest), sort_by="row", key_index=columns,
                            num_partitions=1, mode=mode)
        m = json.loads((dest / "_pqindex_manifest.json").read_text())
        named = {s["path"] for c in m["key_index"]["columns"].values() for s in c["shards"]}
        assert list(m["key_index"]["columns"]) == columns
        assert _shard_files(dest) == named and not named & before, mode
    where = In(Column("row"), (Literal(650), Literal(10)))
    got = pqindex.dataset(str(dest)).scan(columns=["row"], where=where).to_table()
    assert got["row"].to_pylist() == [650]


def test_a_pipeline_append_adds_delta_shards_to_the_committed_index(tmp_path: Path) -> None:
    """The job commit's hook without Spark: the functions Spark's tasks and driver call."""
    from pqindex.dataset.key_index import previous_index
    from pqindex.spark.commit import commit_job
    from pqindex.spark.key_index import commit_hook, task_keys
    from pqindex.spark.task import parse_options, write_task

    dest = str(tmp_path / "lake")
    rng = random.Random(32)
    for job, mode in (("a" * 32, "error"), ("b" * 32, "append")):
        t = pa.table({"k": pa.array([rng.randrange(10**6) for _ in range(500)], pa.int64()),
                      "row": pa.array(range(500), pa.int64())})
        _dir, files = write_task(t.to_batches(max_chunksize=250), dest=dest, job_id=job,
                                 partition_id=0, attempt=0,
                                 options=parse_options({"sort_by": "row",
                                                        "row_group_rows": "100"}))
        keys = task_keys(files, ["k"], None)
        previous = previous_index(dest, None) if mode == "append" else None
        commit_job(dest, job, files, mode=mode, info={},
                   finish=commit_hook(dest, ["k"], keys, previous, False, None))
    shards = _shards(Path(dest))
    assert any(s["delta"] for s in shards) and not all(s["delta"] for s in shards)
    m = json.loads((Path(dest) / "_pqindex_manifest.json").read_text())
    assert m["commit_point"] is True and len(m["key_index"]["files"]) == len(m["files"]) == 2
    _check_lookups(Path(dest), 2)


def test_a_spark_job_builds_the_key_index_of_an_existing_lake(tmp_path: Path, spark: Any
                                                            ) -> None:
    import pqindex.spark

    _lake(tmp_path, "string", seed=33, files=5)
    write_manifest(str(tmp_path))
    pqindex.spark.build_key_index(spark, str(tmp_path), ["k"], shards=3)
    m = json.loads((tmp_path / "_pqindex_manifest.json").read_text())
    assert len(m["key_index"]["files"]) == 5
    assert len(m["key_index"]["columns"]["k"]["shards"]) >= 2  # a range per task
    _check_lookups(tmp_path, 3)


def test_a_delta_tables_index_is_tied_to_its_version(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    rng = random.Random(41)
    table = tmp_path / "t"
    rows = 0
    for _ in range(3):
        ks = [rng.randrange(10**9) for _ in range(300)]
        write_deltalake(str(table), pa.table({"k": pa.array(ks, pa.int64()), "row": pa.array(
            range(rows, rows + 300), pa.int64())}), mode="append")
        rows += 300
    r = CliRunner().invoke(cli, ["manifest", str(table), "--key-index", "k"])
    assert r.exit_code == 0, r.output
    every = pqindex.dataset(str(table)).to_table()
    keys = [every["k"][5].as_py(), 10**9 + 1]  # in one file of three; absent

    def lookup(**kw: Any) -> tuple[list[int], dict[str, Any]]:
        scan = pqindex.dataset(str(table), **kw).scan(
            columns=["row"], where=In(Column("k"), tuple(Literal(k) for k in keys)))
        return sorted(scan.to_table()["row"].to_pylist()), scan.report.to_dict()

    want = sorted(r for k, r in zip(every["k"].to_pylist(), every["row"].to_pylist(),
                                    strict=True) if k in set(keys))
    got, rep = lookup()
    assert got == want and rep["key_index"]["fallback"] is None
    assert rep["files_skipped"].get("key index") == 2
    write_deltalake(str(table), pa.table({"k": pa.array(keys[:2], pa.int64()),
                                          "row": pa.array([-1, -2], pa.int64())}),
                    mode="append")
    got, rep = lookup()  # version 3: the index (built at 2) is ignored, rows exact
    assert got == sorted([*want, -1, -2])
    assert "built for table version delta:2" in rep["key_index"]["fallback"]
    got, rep = lookup(version=2)  # the version it was built at uses it again
    assert got == want and rep["key_index"]["fallback"] is None


def test_a_cold_lookup_does_not_import_pandas(tmp_path: Path) -> None:
    """pyarrow imports pandas (0.4-1 s on a loaded machine) on its first ``pa.array``,
    ``to_numpy`` or ``schema.empty_table``: a fresh process looking up an IN list or
    an absent key must not pay it."""
    import subprocess
    import sys

    _lake(tmp_path, "int64", seed=25, files=3)
    _build(tmp_path, "k")
    present = pc.unique(pads.dataset(str(tmp_path)).to_table(columns=["k"])["k"]).to_pylist()
    keys = [k for k in present if k is not None][:20]
    code = (
        "import sys, pqindex\n"
        f"ds = pqindex.dataset({str(tmp_path)!r})\n"
        f"n = ds.scan(where='k IN ({', '.join(map(str, keys))})').to_table().num_rows\n"
        "m = ds.scan(where='k = 1').to_table().num_rows\n"
        "print(n > 0, m, 'pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.split() == ["True", "0", "False"], out.stderr[-2000:]
