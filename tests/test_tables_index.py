"""Indexing lake tables: a file a table's log records is never rewritten in place.

Tables are written by deltalake and pyiceberg themselves and read back by
deltalake, polars and pyiceberg after ``pqindex index``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

deltalake = pytest.importorskip("deltalake")
pl = pytest.importorskip("polars")

from pqindex.cli import cli  # noqa: E402
from pqindex.dataset.indexing import add_indexes  # noqa: E402
from pqindex.dataset.tables.commit import TableCommitError, index_delta_table  # noqa: E402
from pqindex.dataset.tables.detect import TableFormat, find_table  # noqa: E402
from pqindex.errors import UnsupportedError  # noqa: E402
from pqindex.format.file import ParquetFile  # noqa: E402
from pqindex.write.add_indexes import index_file  # noqa: E402
from s3_server import S3Endpoint, s3  # noqa: E402, F401  (the session fixture)


def _rows(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "cat": [f"c{i % 7}" for i in ids],
        "user": [f"u{(i * 7919) % 1000:04d}" for i in ids],
        "part": [i % 3 for i in ids],
    })


def _delta_table(path: Path, partitioned: bool = True) -> Path:
    from deltalake import write_deltalake

    by = ["part"] if partitioned else None
    write_deltalake(str(path), _rows(300), partition_by=by)
    write_deltalake(str(path), _rows(200, 300), mode="append", partition_by=by)
    return path


def _sorted(t: pa.Table) -> list[dict[str, Any]]:
    t = t.select(sorted(t.column_names))
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def _delta_rows(path: Path, version: int | None = None) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return _sorted(DeltaTable(str(path), version=version).to_pyarrow_table())


def _polars_rows(path: Path) -> list[dict[str, Any]]:
    df = pl.read_delta(str(path))
    t = df.to_arrow()
    return _sorted(t.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_large_string(
        f.type) or pa.types.is_string_view(f.type) else f for f in t.schema])))


def _recorded_sizes_match(path: Path) -> None:
    from deltalake import DeltaTable

    adds = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).to_pylist()
    for a in adds:
        assert os.path.getsize(path / a["path"]) == a["size_bytes"], a["path"]


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_pqindex_index_on_a_delta_table_commits_and_every_reader_still_reads_it(
        tmp_path: Path) -> None:
    """The issue's case: `pqindex index DIR --distinct cat --bloom user` on a table
    deltalake wrote (a write and an append) made it unreadable; now it is a commit."""
    from deltalake import DeltaTable

    table = _delta_table(tmp_path / "t")
    before = _delta_rows(table)
    v0 = DeltaTable(str(table)).version()
    res = CliRunner().invoke(cli, ["index", str(table), "--distinct", "cat", "--bloom", "user"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    dt = DeltaTable(str(table))
    assert dt.version() == v0 + 1
    assert _delta_rows(table) == before
    assert _polars_rows(table) == before
    assert _delta_rows(table, v0) == before  # time travel to the old version still reads
    _recorded_sizes_match(table)
    # The active files carry the embedded indexes asked for; none is a file of v0.
    old = set(DeltaTable(str(table), version=v0).file_uris())
    for uri in dt.file_uris():
        assert uri not in old
        with ParquetFile.open(uri.removeprefix("file://")) as pf:
            assert any(kv.key.startswith("pqindex") for kv in pf.metadata.key_value_metadata or [])
    commit = dt.history(1)[0]
    assert commit["operation"] == "WRITE"
    assert not (table / "_pqindex_manifest.json").exists()
    # Statistics and partition values kept: the log still prunes as before.
    adds = pa.table(dt.get_add_actions(flatten=True))
    assert adds.column("num_records").to_pylist() and all(
        v is not None for v in adds.column("min.id").to_pylist())
    assert sorted(set(adds.column("partition.part").to_pylist())) == [0, 1, 2]


def test_add_indexes_on_one_file_of_a_delta_table_commits_only_that_file(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    table = _delta_table(tmp_path / "t", partitioned=False)
    before = _delta_rows(table)
    files = [u.removeprefix("file://") for u in DeltaTable(str(table)).file_uris()]
    results = add_indexes(files[0], distinct="cat")
    assert len(results) == 1
    after = [u.removeprefix("file://") for u in DeltaTable(str(table)).file_uris()]
    assert files[1] in after and files[0] not in after
    assert _delta_rows(table) == before
    _recorded_sizes_match(table)


def test_a_file_the_log_removed_is_left_alone(tmp_path: Path) -> None:
    """Older versions name removed files with their sizes: time travel needs them whole."""
    from deltalake import DeltaTable

    table = _delta_table(tmp_path / "t", partitioned=False)
    DeltaTable(str(table)).delete("id < 100")
    removed = {p for p in _digests(table) if p.endswith(".parquet")} - {
        os.path.relpath(u.removeprefix("file://"), table)
        for u in DeltaTable(str(table)).file_uris()}
    assert removed
    before = _digests(table)
    add_indexes(str(table), distinct="cat")
    after = _digests(table)
    for p in removed:
        assert after[p] == before[p]
    assert _delta_rows(table, 1) == _sorted(pa.concat_tables([_rows(300), _rows(200, 300)]))


def test_output_copies_the_active_files_and_leaves_the_table(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    table = _delta_table(tmp_path / "t")
    DeltaTable(str(table)).delete("id < 100")
    before = _digests(table)
    results = add_indexes(str(table), distinct="cat", output=str(tmp_path / "out"))
    assert len(results) == len(DeltaTable(str(table)).file_uris())
    assert _digests(table) == before


def _iceberg_table(tmp_path: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    wh = tmp_path / "wh"
    wh.mkdir()
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/cat.db", warehouse=f"file://{wh}")
    catalog.create_namespace("ns")
    t = catalog.create_table("ns.t", schema=_rows(10).schema)
    t.append(_rows(100))
    t.append(_rows(50, 100))
    return t


def test_an_iceberg_table_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    t = _iceberg_table(tmp_path)
    location = Path(t.location().removeprefix("file://"))
    before = _digests(location)
    data_file = next(p for p in location.rglob("*.parquet"))
    for target in (location, location / "data", data_file):
        res = CliRunner().invoke(cli, ["index", str(target), "--distinct", "cat"])
        assert res.exit_code == 2, res.output
        assert "Iceberg table" in res.output and "no file was changed" in res.output
        with pytest.raises(UnsupportedError, match="Iceberg table"):
            add_indexes(str(target), distinct="cat")
    assert _digests(location) == before
    assert t.scan().to_arrow().num_rows == 150


@pytest.mark.parametrize(("markers", "fmt"), [
    ((".hoodie",), TableFormat.HUDI),
    (("snapshot", "manifest"), TableFormat.PAIMON),
])
def test_hudi_and_paimon_layouts_are_detected_from_a_deep_file_and_refused(
        tmp_path: Path, markers: tuple[str, ...], fmt: TableFormat) -> None:
    import pyarrow.parquet as pq

    root = tmp_path / "table"
    for m in markers:
        (root / m).mkdir(parents=True)
    f = root / "dt=2024-01-01" / "bucket-0" / "data.parquet"
    f.parent.mkdir(parents=True)
    pq.write_table(_rows(10), f)
    found = find_table(f)
    assert found is not None and found.format is fmt and found.root == str(root)
    digest = _digests(root)
    with pytest.raises(UnsupportedError, match="no file was changed"):
        add_indexes(str(f), distinct="cat")
    assert _digests(root) == digest


def test_a_conflicting_concurrent_commit_fails_cleanly_and_removes_the_copies(
        tmp_path: Path) -> None:
    """Another writer removes the same files (a delete) while pqindex indexes: delta-rs's
    conflict check refuses pqindex's commit; the other writer's version stands."""
    from deltalake import DeltaTable

    table = _delta_table(tmp_path / "t", partitioned=False)
    done = []

    def index_then_race(src: str, dst: str) -> Any:
        out = index_file(src, output=dst, distinct="cat")
        if not done:
            DeltaTable(str(table)).delete("id < 350")  # rewrites both files
        done.append(dst)
        return out

    with pytest.raises(TableCommitError, match="table is unchanged"):
        index_delta_table(str(table), index_then_race)
    for p in done:
        assert not os.path.exists(p)
    assert [r["id"] for r in _delta_rows(table)] == list(range(350, 500))
    _recorded_sizes_match(table)


def test_a_concurrent_append_does_not_conflict(tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake

    table = _delta_table(tmp_path / "t", partitioned=False)
    raced = []

    def index_then_append(src: str, dst: str) -> Any:
        out = index_file(src, output=dst, distinct="cat")
        if not raced:
            write_deltalake(str(table), _rows(10, 1000), mode="append")
            raced.append(dst)
        return out

    _results, version = index_delta_table(str(table), index_then_append)
    assert version == DeltaTable(str(table)).version()
    ids = [r["id"] for r in _delta_rows(table)]
    assert ids == [*range(500), *range(1000, 1010)]
    _recorded_sizes_match(table)


def test_a_kill_during_indexing_leaves_the_table_at_its_old_version(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    table = _delta_table(tmp_path / "t")
    before = _delta_rows(table)
    version = DeltaTable(str(table)).version()
    script = (
        "import os, sys\n"
        "from pqindex.dataset.indexing import add_indexes\n"
        "add_indexes(sys.argv[1], distinct='cat', progress=lambda n, total, r: os._exit(9))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).parents[1] / "src"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", script, str(table)], env=env, check=False)
    assert proc.returncode == 9
    assert DeltaTable(str(table)).version() == version
    assert _delta_rows(table) == before
    assert _polars_rows(table) == before
    _recorded_sizes_match(table)


def test_an_iceberg_table_object_is_indexed_by_an_overwrite_snapshot(tmp_path: Path) -> None:
    import polars as pl

    t = _iceberg_table(tmp_path)
    before = _sorted(t.scan().to_arrow())
    old_snapshot = t.current_snapshot().snapshot_id
    old_files = {task.file.file_path for task in t.scan().plan_files()}
    results = add_indexes(t, distinct="cat", bloom="user")
    assert len(results) == len(old_files)
    assert t.current_snapshot().snapshot_id != old_snapshot
    tasks = list(t.scan().plan_files())
    for task in tasks:
        assert task.file.file_path not in old_files
        path = task.file.file_path.removeprefix("file://")
        assert os.path.getsize(path) == task.file.file_size_in_bytes
        with ParquetFile.open(path) as pf:
            assert any(kv.key.startswith("pqindex")
                       for kv in pf.metadata.key_value_metadata or [])
    assert _sorted(t.scan().to_arrow()) == before
    assert _sorted(t.scan(snapshot_id=old_snapshot).to_arrow()) == before
    os.environ.setdefault("POLARS_ICEBERG_PLANNER", "pyiceberg")
    assert _sorted(pl.scan_iceberg(t).collect().to_arrow().cast(
        t.scan().to_arrow().schema)) == before
    import pqindex

    assert _sorted(pqindex.dataset(t).to_table(where="cat = 'c3'")) == [
        r for r in before if r["cat"] == "c3"]


def test_a_concurrent_iceberg_commit_fails_the_index_cleanly(tmp_path: Path) -> None:
    """Another writer deletes rows (rewriting the same data files) between planning and
    pqindex's commit: pyiceberg's validation refuses pqindex's snapshot."""
    from pqindex.dataset.tables.commit import index_iceberg_table

    t = _iceberg_table(tmp_path)
    other = t.catalog.load_table("ns.t")
    written: list[str] = []

    def index_then_race(src: str, dst: str) -> Any:
        out = index_file(src, output=dst, distinct="cat")
        written.append(dst)
        if len(written) == 1:
            other.delete("id < 120")
        return out

    with pytest.raises(TableCommitError, match="table is unchanged"):
        index_iceberg_table(t, index_then_race)
    for p in written:
        assert not os.path.exists(p)
    t = t.catalog.load_table("ns.t")
    assert [r["id"] for r in _sorted(t.scan().to_arrow())] == list(range(120, 150))
    for task in t.scan().plan_files():
        assert os.path.getsize(task.file.file_path.removeprefix("file://")) == (
            task.file.file_size_in_bytes)


def test_vacuum_removes_the_superseded_files_like_any_other(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    table = _delta_table(tmp_path / "t", partitioned=False)
    before = _delta_rows(table)
    old = {u.removeprefix("file://") for u in DeltaTable(str(table)).file_uris()}
    add_indexes(str(table), bloom="user")
    removed = DeltaTable(str(table)).vacuum(retention_hours=0, dry_run=False,
                                            enforce_retention_duration=False)
    assert {os.path.join(str(table), r) for r in removed} == old
    assert not any(os.path.exists(p) for p in old)
    assert _delta_rows(table) == before
    _recorded_sizes_match(table)


def test_a_delta_table_on_s3_is_refused_and_no_object_changes(s3: S3Endpoint) -> None:  # noqa: F811
    from deltalake import DeltaTable, write_deltalake

    bucket = s3.new_bucket()
    url = f"s3://{bucket}/lake/t"
    opts = s3.storage_options()
    write_deltalake(url, _rows(100), partition_by=["part"],
                    storage_options={**opts, "aws_s3_allow_unsafe_rename": "true"})
    client = s3.boto3()
    before = {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
    data = next(k for k in before if k.endswith(".parquet"))
    for target in (url, f"s3://{bucket}/{data}"):
        with pytest.raises(UnsupportedError, match="Delta table"):
            add_indexes(target, distinct="cat", storage_options=opts)
    after = {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
    assert after == before
    assert DeltaTable(url, storage_options=opts).to_pyarrow_table().num_rows == 100
