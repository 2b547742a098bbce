"""pqindex's pyiceberg FileIO (``py-io-impl``): Iceberg metadata on S3 in one GET each.

On moto behind the counting proxy: a catalog configured with
``PqIndexFileIO`` loads a table with one GET of its metadata.json (pyiceberg's
default FileIO: a HEAD, then the GET); a cold point lookup of a table of several
commits is then four round trips (metadata; the manifest list with the manifest its
commit wrote; the other manifests; the file's tail). Rows are compared with
pyiceberg's and polars' reads of the same table through pyiceberg's default FileIO.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from conftest import import_or_missing

pyiceberg = import_or_missing("pyiceberg", "pyiceberg")

import pqindex  # noqa: E402
from pqindex.dataset.tables.iceberg_io import (  # noqa: E402
    PqIndexFileIO,
    storage_options,
    table_storage_options,
)
from s3_server import S3Endpoint, s3  # noqa: E402, F401  (the session fixture)
from table_rows import normalize, random_predicate  # noqa: E402

IO_IMPL = "pqindex.dataset.tables.iceberg_io.PqIndexFileIO"


def _rows(n: int, start: int = 0) -> pa.Table:
    rng = random.Random(start)
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "user": pa.array([f"u{rng.randrange(300):04d}" for _ in ids], pa.string()),
        "amount": pa.array([None if rng.random() < 0.1 else rng.uniform(-50, 50) for _ in ids],
                           pa.float64()),
        "region": pa.array([rng.choice(["eu", "us", "ap"]) for _ in ids], pa.string()),
    })


def _props(s3: S3Endpoint, url: str) -> dict[str, str]:  # noqa: F811
    opts = s3.storage_options()
    return {"s3.endpoint": url, "s3.access-key-id": opts["access_key_id"],
            "s3.secret-access-key": opts["secret_access_key"], "s3.region": opts["region"]}


def _catalog(db: Path, bucket: str, props: dict[str, str]) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("io", uri=f"sqlite:///{db}", warehouse=f"s3://{bucket}/wh", **props)


@pytest.fixture(scope="module")
def written(s3: S3Endpoint, tmp_path_factory: pytest.TempPathFactory  # noqa: F811
            ) -> tuple[Path, str]:
    """A table of four appends (four manifests) and a delete, written around the proxy."""
    bucket = s3.new_bucket()
    db = tmp_path_factory.mktemp("io") / "cat.db"
    writer = _catalog(db, bucket, _props(s3, s3.direct_url))
    writer.create_namespace("ns")
    t = writer.create_table("ns.t", schema=_rows(1).schema)
    for i in range(4):
        t.append(_rows(150, i * 150))
    t.delete("id >= 280 AND id < 320")
    return db, bucket


def test_the_catalog_loads_and_pqindex_reads_with_one_get_per_metadata_file(
        s3: S3Endpoint, written: tuple[Path, str]) -> None:  # noqa: F811
    db, bucket = written
    reference_table = _catalog(db, bucket, _props(s3, s3.url)).load_table("ns.t")
    reference = reference_table.scan().to_arrow()

    s3.reset_log()
    s3.delay = 0.05  # a wave's requests overlap for sure: the proxy counts waves
    try:
        table = _catalog(db, bucket, {**_props(s3, s3.url), "py-io-impl": IO_IMPL}
                         ).load_table("ns.t")
        assert isinstance(table.io, PqIndexFileIO)
        loaded = list(s3.requests)
        # No storage_options: the catalog's S3 settings, as its FileIO maps them.
        got = pqindex.dataset(table).to_table(where="id = 170")
    finally:
        s3.delay = 0.0
    requests, waves = list(s3.requests), s3.waves
    assert [r.method for r in loaded] == ["GET"]
    assert loaded[0].path.endswith(".metadata.json") and loaded[0].range is None
    assert normalize(got) == normalize(reference.filter(pc.field("id") == 170))
    metadata = [r for r in requests if "/metadata/" in r.path]
    assert all(r.method == "GET" for r in metadata), metadata
    manifests = table.current_snapshot().manifests(table.io)
    live = [m for m in manifests if m.has_added_files() or m.has_existing_files()]
    # metadata.json, the manifest list, the manifests holding live files.
    assert len(metadata) == 2 + len(live), metadata
    assert waves == 4, "\n".join(f"{r.method} {r.path[-50:]} {r.range}" for r in requests)


def test_rows_equal_pyicebergs_and_polars_reads_through_the_default_fileio(
        s3: S3Endpoint, written: tuple[Path, str]) -> None:  # noqa: F811
    import polars as pl

    db, bucket = written
    plain = _catalog(db, bucket, _props(s3, s3.direct_url)).load_table("ns.t")
    ours = _catalog(db, bucket, {**_props(s3, s3.direct_url), "py-io-impl": IO_IMPL}
                    ).load_table("ns.t")
    reference = plain.scan().to_arrow()
    # pyiceberg's own scan through this FileIO: its data files by pyarrow as before.
    assert normalize(ours.scan().to_arrow()) == normalize(reference)
    os.environ.setdefault("POLARS_ICEBERG_PLANNER", "pyiceberg")
    opts = s3.storage_options()
    popts = {"aws_endpoint_url": s3.direct_url, "aws_access_key_id": opts["access_key_id"],
             "aws_secret_access_key": opts["secret_access_key"],
             "aws_region": opts["region"], "aws_allow_http": "true"}
    assert normalize(pl.scan_iceberg(plain, storage_options=popts).collect().to_arrow()
                     ) == normalize(reference)
    rng = random.Random(41)
    ds = pqindex.dataset(ours)
    assert normalize(ds.to_table()) == normalize(reference)
    for snap in plain.snapshots():  # every snapshot: appends and the delete's rewrite
        want = plain.scan(snapshot_id=snap.snapshot_id).to_arrow()
        ds = pqindex.dataset(ours, snapshot_id=snap.snapshot_id)
        for _ in range(6):
            sql, expr = random_predicate(rng, 700, 300)
            if "day" in sql:
                continue
            assert normalize(ds.to_table(where=sql)) == normalize(want.filter(expr)), sql


def test_a_setting_pqindex_does_not_map_keeps_pyarrows_reads(
        s3: S3Endpoint, written: tuple[Path, str]) -> None:  # noqa: F811
    db, bucket = written
    props = {**_props(s3, s3.url), "s3.connect-timeout": "30", "py-io-impl": IO_IMPL}
    assert storage_options(props) is None
    s3.reset_log()
    table = _catalog(db, bucket, props).load_table("ns.t")
    assert [r.method for r in s3.requests] == ["HEAD", "GET"]  # pyarrow's client
    assert normalize(pqindex.dataset(table, storage_options=s3.storage_options()).to_table(
        where="id < 20")) == normalize(table.scan(row_filter="id < 20").to_arrow())


def test_the_mapping_and_a_missing_object(s3: S3Endpoint) -> None:  # noqa: F811
    assert storage_options({"s3.endpoint": "http://h:1", "client.region": "eu-west-1",
                            "client.access-key-id": "a", "s3.access-key-id": "b",
                            "uri": "sqlite://", "warehouse": "s3://b/wh"}) == {
        "endpoint": "http://h:1", "region": "eu-west-1", "access_key_id": "b",
        "allow_http": "true"}
    assert storage_options({"client.role-arn": "arn:aws:iam::1:role/r"}) is None

    class Local:  # a table elsewhere than S3: the S3 settings are not its
        io = PqIndexFileIO({"s3.region": "eu-west-1"})

        def location(self) -> str:
            return "file:///tmp/wh/ns/t"

    assert table_storage_options(Local()) is None
    io = PqIndexFileIO(_props(s3, s3.url))
    bucket = s3.new_bucket()
    missing = io.new_input(f"s3://{bucket}/nothing.avro")
    with pytest.raises(FileNotFoundError):
        missing.open()
    assert not missing.exists()
    s3.put(bucket, "some.json", b"{}")
    found = io.new_input(f"s3://{bucket}/some.json")
    assert found.open().read() == b"{}" and len(found) == 2 and found.exists()


def test_indexing_a_table_loaded_through_it_commits_a_snapshot_pyiceberg_reads(
        s3: S3Endpoint, tmp_path: Path) -> None:  # noqa: F811
    bucket = s3.new_bucket()
    db = tmp_path / "cat.db"
    props = {**_props(s3, s3.direct_url), "py-io-impl": IO_IMPL}
    t = _catalog(db, bucket, props)
    t.create_namespace("ns")
    table = t.create_table("ns.t", schema=_rows(1).schema)
    for i in range(2):
        table.append(_rows(100, i * 100))
    before = normalize(table.scan().to_arrow())
    old = table.current_snapshot().snapshot_id
    pqindex.add_indexes(table, bloom="user", bloom_scope="file,row_group")
    again = _catalog(db, bucket, _props(s3, s3.direct_url)).load_table("ns.t")
    assert again.current_snapshot().snapshot_id != old
    assert normalize(again.scan().to_arrow()) == before
    user = before[37]["user"]
    reloaded = _catalog(db, bucket, props).load_table("ns.t")
    assert normalize(pqindex.dataset(reloaded).to_table(where=f"user = '{user}'")) == [
        r for r in before if r["user"] == user]
