"""Indexing lake tables: a file a table's log records is never rewritten in place.

Tables are written by deltalake and pyiceberg themselves and read back by
deltalake, polars and pyiceberg after ``pqindex index``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

from conftest import import_or_missing

deltalake = import_or_missing("deltalake", "deltalake")
pl = import_or_missing("polars", "polars")

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


def _s3_sizes_match(client: Any, bucket: str, prefix: str, url: str,
                    opts: dict[str, str]) -> None:
    """Every size the log records is its object's size."""
    from deltalake import DeltaTable

    sizes = {o["Key"]: o["Size"] for o in client.list_objects_v2(
        Bucket=bucket, Prefix=prefix)["Contents"]}
    adds = pa.table(DeltaTable(url, storage_options=opts).get_add_actions(flatten=True))
    assert adds.num_rows
    for a in adds.to_pylist():
        assert sizes[f"{prefix}/{a['path']}"] == a["size_bytes"], a["path"]


def test_a_delta_table_on_s3_is_indexed_by_a_commit_and_every_reader_reads_it(
        s3: S3Endpoint) -> None:  # noqa: F811
    """Copies under new names (the data range copied by the store where S3's part
    minimum allows, streamed here: the files are small), one deltalake transaction
    with the same storage_options, the sidecar of the version made; deltalake and
    polars read the same rows, old version included; pqindex's reads use the sidecar."""
    from deltalake import DeltaTable, write_deltalake

    import pqindex
    from pqindex.dataset.tables.evidence import evidence_url

    bucket = s3.new_bucket()
    url = f"s3://{bucket}/lake/t"
    opts = {**s3.storage_options(), "aws_s3_allow_unsafe_rename": "true"}
    write_deltalake(url, _rows(300), partition_by=["part"], storage_options=opts)
    write_deltalake(url, _rows(200, 300), mode="append", partition_by=["part"],
                    storage_options=opts)
    v0 = DeltaTable(url, storage_options=opts).version()
    before = _sorted(DeltaTable(url, storage_options=opts).to_pyarrow_table())
    client = s3.boto3()
    objects_before = {o["Key"]: o["ETag"] for o in client.list_objects_v2(
        Bucket=bucket)["Contents"]}
    results = add_indexes(url, distinct="cat", bloom="user", bloom_scope="file,row_group",
                          storage_options=opts)
    assert len(results) == 6 and all(r.rewritten for r in results)
    dt = DeltaTable(url, storage_options=opts)
    assert dt.version() == v0 + 1
    assert _sorted(dt.to_pyarrow_table()) == before
    assert _sorted(DeltaTable(url, version=v0, storage_options=opts).to_pyarrow_table()) == (
        before)
    polars = pl.read_delta(url, storage_options=opts).to_arrow()
    assert _sorted(polars.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_large_string(
        f.type) or pa.types.is_string_view(f.type) else f for f in polars.schema]))) == before
    _s3_sizes_match(client, bucket, "lake/t", url, opts)
    # No object of the old version changed: the old files stay for time travel.
    after = {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
    assert all(after[k] == e for k, e in objects_before.items())
    commit = s3.boto3().get_object(Bucket=bucket, Key=f"lake/t/_delta_log/{v0 + 1:020d}.json")
    actions = [json.loads(line) for line in commit["Body"].read().splitlines()]
    changes = [a.get("add") or a.get("remove") for a in actions if {"add", "remove"} & set(a)]
    assert len(changes) == 12 and not any(c["dataChange"] for c in changes)
    # The sidecar of the version made names every active file.
    sidecar = evidence_url(url, v0 + 1).split(f"{bucket}/", 1)[1]
    assert sidecar in after
    # pqindex: identical rows; an absent value rules every file out by the sidecar,
    # a present one keeps only the files that hold it.
    ds = pqindex.dataset(url, storage_options=s3.storage_options())
    present = sorted({r["user"] for r in before})
    absent = next(u for u in (f"u{k:04d}" for k in range(1, 999)) if u not in present)
    for user in (present[len(present) // 2], absent):  # inside the log's min/max
        scan = ds.scan(where=f"user = '{user}'")
        got = _sorted(scan.to_table())
        assert got == [r for r in before if r["user"] == user]
        opened = scan.report.files_total - scan.report.files_skipped["table statistics"]
        assert opened <= 2, scan.report.files_skipped


def test_a_conflicting_commit_on_s3_fails_cleanly_and_removes_the_copies(
        s3: S3Endpoint) -> None:  # noqa: F811
    from deltalake import DeltaTable, write_deltalake

    from pqindex.write.remote_index import index_object

    bucket = s3.new_bucket()
    url = f"s3://{bucket}/t"
    opts = {**s3.storage_options(), "aws_s3_allow_unsafe_rename": "true"}
    write_deltalake(url, _rows(300), storage_options=opts)
    write_deltalake(url, _rows(200, 300), mode="append", storage_options=opts)
    copies: list[str] = []

    def index_then_race(src: str, dst: str) -> Any:
        out = index_object(src, kinds={"distinct": ["cat"]}, cap=None, page_index="keep",
                           drop=False, storage_options=opts, output=dst)
        copies.append(dst)
        if len(copies) == 1:
            DeltaTable(url, storage_options=opts).delete("id < 350")  # rewrites both
        return out

    with pytest.raises(TableCommitError, match="table is unchanged"):
        index_delta_table(url, index_then_race, storage_options=opts)
    keys = {o["Key"] for o in s3.boto3().list_objects_v2(Bucket=bucket)["Contents"]}
    assert copies and not any(c.split(f"{bucket}/", 1)[1] in keys for c in copies)
    rows = DeltaTable(url, storage_options=opts).to_pyarrow_table()
    assert sorted(rows.column("id").to_pylist()) == list(range(350, 500))
    _s3_sizes_match(s3.boto3(), bucket, "t", url, opts)


def test_indexing_a_delta_table_on_s3_copies_data_server_side(s3: S3Endpoint) -> None:  # noqa: F811
    """A file over S3's 5 MiB part minimum: its data range is copied by the store, only
    the new tail (and the sidecar) is uploaded."""
    import numpy as np
    from deltalake import DeltaTable, write_deltalake

    bucket = s3.new_bucket()
    url = f"s3://{bucket}/big"
    opts = {**s3.storage_options(), "aws_s3_allow_unsafe_rename": "true"}
    rng = np.random.default_rng(5)
    n = 6_000
    table = pa.table({"id": pa.array(np.arange(n), pa.int64()),
                      "user": [f"u{v}" for v in rng.integers(0, 10**6, n)],
                      "payload": [rng.bytes(1000) for _ in range(n)]})
    write_deltalake(url, table, storage_options=opts)
    size = sum(o["Size"] for o in s3.boto3().list_objects_v2(Bucket=bucket)["Contents"]
               if o["Key"].endswith(".parquet"))
    assert size > 5 << 20
    s3.reset_log()
    results = add_indexes(url, bloom="user", storage_options=opts)
    assert results[0].bytes_copied_server_side > 5 << 20
    assert s3.uploaded_bytes <= 0.05 * size
    dt = DeltaTable(url, storage_options=opts)
    assert dt.to_pyarrow_table().column("id").to_pylist() == list(range(n))
    _s3_sizes_match(s3.boto3(), bucket, "big", url, opts)


def test_the_sidecar_serves_only_its_own_version(tmp_path: Path) -> None:
    """Indexing writes the evidence sidecar of the version it made; a later version (an
    append) or an earlier one (time travel) never reads it, and rows stay exact."""
    from deltalake import write_deltalake

    import pqindex
    from pqindex.dataset.tables.evidence import evidence_url

    table = _delta_table(tmp_path / "t")
    add_indexes(str(table), bloom="user", bloom_scope="file")
    assert os.path.exists(evidence_url(str(table), 2))
    rows = _delta_rows(table)
    present = sorted({r["user"] for r in rows})
    absent = next(u for u in (f"u{k:04d}" for k in range(1, 999)) if u not in present)
    scan = pqindex.dataset(str(table)).scan(where=f"user = '{absent}'")
    assert scan.to_table().num_rows == 0
    assert scan.report.files_skipped["table statistics"] == scan.report.files_total - 1
    write_deltalake(str(table), _rows(10, 1000).set_column(
        2, "user", pa.array([absent] * 10)), mode="append", partition_by=["part"])
    for version, expected in ((3, 10), (2, 0), (1, 0), (0, 0)):
        got = pqindex.dataset(str(table), version=version).to_table(where=f"user = '{absent}'")
        assert got.num_rows == expected, version


def test_an_iceberg_table_on_s3_is_indexed_by_a_snapshot_every_reader_reads_it(
        s3: S3Endpoint, tmp_path: Path) -> None:  # noqa: F811
    """pyiceberg's FileIO on moto: copies under new keys, one overwrite snapshot, the
    sidecar of the snapshot made; pyiceberg and polars read the same rows, every size
    a manifest records is its object's, and pqindex's absent-value read uses the sidecar."""
    from pyiceberg.catalog.sql import SqlCatalog

    import pqindex

    bucket = s3.new_bucket()
    opts = s3.storage_options()
    catalog = SqlCatalog("s3", uri=f"sqlite:///{tmp_path}/cat.db", warehouse=f"s3://{bucket}/wh",
                         # pyarrow's uploads stall behind the test proxy: moto directly.
                         **{"s3.endpoint": s3.direct_url, "s3.access-key-id": "testing",
                            "s3.secret-access-key": "testing", "s3.region": opts["region"]})
    catalog.create_namespace("ns")
    t = catalog.create_table("ns.t", schema=_rows(10).schema)
    t.append(_rows(300))
    t.append(_rows(200, 300))
    before = _sorted(t.scan().to_arrow())
    old_snapshot = t.current_snapshot().snapshot_id
    add_indexes(t, bloom="user", bloom_scope="file,row_group", storage_options=opts)
    assert t.current_snapshot().snapshot_id != old_snapshot
    assert _sorted(t.scan().to_arrow()) == before
    assert _sorted(t.scan(snapshot_id=old_snapshot).to_arrow()) == before
    client = s3.boto3()
    for task in t.scan().plan_files():
        assert ".pqindex-" in task.file.file_path
        key = task.file.file_path.split(f"{bucket}/", 1)[1]
        assert client.head_object(Bucket=bucket, Key=key)["ContentLength"] == (
            task.file.file_size_in_bytes)
    os.environ.setdefault("POLARS_ICEBERG_PLANNER", "pyiceberg")
    polars_opts = {"aws_endpoint_url": s3.direct_url, "aws_access_key_id": "testing",
                   "aws_secret_access_key": "testing", "aws_region": opts["region"],
                   "aws_allow_http": "true"}
    assert _sorted(pl.scan_iceberg(t, storage_options=polars_opts).collect().to_arrow().cast(
        t.scan().to_arrow().schema)) == before
    present = sorted({r["user"] for r in before})
    absent = next(u for u in (f"u{k:04d}" for k in range(1, 999)) if u not in present)
    for user in (present[len(present) // 3], absent):
        scan = pqindex.dataset(t, storage_options=opts).scan(where=f"user = '{user}'")
        assert _sorted(scan.to_table()) == [r for r in before if r["user"] == user]
        assert scan.report.files_total - scan.report.files_skipped["table statistics"] <= 1
    # The overwrite's manifest of the files it replaced (all entries deleted) is not
    # fetched: a cold read GETs the manifests that hold live files only.
    manifests = t.current_snapshot().manifests(t.io)
    live = {m.manifest_path.rsplit("/", 1)[1] for m in manifests
            if m.added_files_count or m.existing_files_count}
    assert 0 < len(live) < len(manifests)
    s3.reset_log()
    assert _sorted(pqindex.dataset(t, storage_options=opts).to_table()) == before
    assert {r.path.rsplit("/", 1)[1] for r in s3.requests if r.path.endswith(".avro")
            and "/snap-" not in r.path} == live
