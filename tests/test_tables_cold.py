"""A cold read of a lake table on a store reads its metadata in few round trips.

Iceberg: the snapshot is planned once (pyiceberg's planning on the manifest list and
manifests pqindex fetched itself: one GET each, the manifests side by side, no HEAD),
and predicates are evaluated on the manifest entries it holds. Counted by the proxy
in front of moto; rows compared with pyiceberg's.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from conftest import import_or_missing

pyiceberg = import_or_missing("pyiceberg", "pyiceberg")

import pqindex  # noqa: E402
from s3_server import S3Endpoint, s3  # noqa: E402, F401  (the session fixture)
from table_rows import normalize  # noqa: E402


def _rows(n: int, start: int = 0) -> pa.Table:
    rng = random.Random(start)
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "user": pa.array([rng.randrange(10_000) for _ in ids], pa.int64()),
                     "region": pa.array([rng.choice(["eu", "us"]) for _ in ids], pa.string())})


def _iceberg_catalog(s3: S3Endpoint, db: Path, bucket: str, url: str) -> Any:  # noqa: F811
    from pyiceberg.catalog.sql import SqlCatalog

    opts = s3.storage_options()
    return SqlCatalog("cold", uri=f"sqlite:///{db}", warehouse=f"s3://{bucket}/wh",
                      **{"s3.endpoint": url, "s3.access-key-id": opts["access_key_id"],
                         "s3.secret-access-key": opts["secret_access_key"],
                         "s3.region": opts["region"]})


def test_a_cold_iceberg_read_plans_once_from_one_wave_of_manifests(
        s3: S3Endpoint, tmp_path: Path) -> None:  # noqa: F811
    from pyiceberg.transforms import IdentityTransform

    bucket = s3.new_bucket()
    db = tmp_path / "cat.db"
    # Written around the proxy (its counts are for the read), read through it.
    writer = _iceberg_catalog(s3, db, bucket, s3.direct_url)
    writer.create_namespace("ns")
    t = writer.create_table("ns.t", schema=_rows(1).schema)
    with t.update_spec() as spec:
        spec.add_field("region", IdentityTransform(), "region")
    for i in range(3):  # three snapshots: three manifests in the last one's list
        t.append(_rows(100, i * 100))
    table = _iceberg_catalog(s3, db, bucket, s3.url).load_table("ns.t")
    manifests = table.current_snapshot().manifests(table.io)
    assert len(manifests) == 3
    reference = table.scan().to_arrow()
    kept = len(list(table.scan(row_filter="id = 150 AND region = 'eu'").plan_files()))
    assert kept == 1

    s3.reset_log()
    s3.delay = 0.05  # a wave's requests overlap for sure: the proxy counts waves
    try:
        ds = pqindex.dataset(table, storage_options=s3.storage_options())
        got = ds.to_table(where="id = 150 AND region = 'eu'")
    finally:
        s3.delay = 0.0
    assert normalize(got) == normalize(reference.filter((pc.field("id") == 150)
                                                        & (pc.field("region") == "eu")))
    metadata = [r for r in s3.requests if "/metadata/" in r.path]
    assert all(r.method == "GET" for r in metadata), metadata  # no HEAD before a GET
    # The list once, each manifest once: one plan for the dataset and its query.
    assert len(metadata) == 1 + len(manifests), metadata
    data = [r for r in s3.requests if "/data/" in r.path]
    assert len(data) == kept, data  # the one file bounds and partition leave: its tail
    # The list, the manifests side by side with the look for a key index of this
    # snapshot (a GET of its descriptor), the tail.
    keyed = sum(1 for r in s3.requests if r.path.endswith("/_pqindex/key_index.json"))
    assert keyed == 1
    assert len(s3.requests) == len(metadata) + len(data) + keyed
    assert s3.waves == 3, "\n".join(f"{r.method} {r.path[-50:]} {r.range}"
                                    for r in s3.requests)

    # Every predicate is decided on the entries held: no request at all.
    s3.reset_log()
    assert ds.explain(where="user < 0 OR region = 'eu'") is not None
    assert normalize(ds.to_table(where="region = 'us' AND id >= 250")) == normalize(
        reference.filter((pc.field("region") == "us") & (pc.field("id") >= 250)))
    assert not [r for r in s3.requests if "/metadata/" in r.path]


def test_a_snapshot_of_one_commit_comes_with_its_manifest_list(
        s3: S3Endpoint, tmp_path: Path) -> None:  # noqa: F811
    """The manifest the snapshot's commit wrote first (``<commit uuid>-m0.avro``, as
    the writers name it) is fetched beside its list: a table written in one commit,
    and the snapshot of pqindex's index commit, are read in two round trips."""
    import pyarrow.parquet as pq

    bucket = s3.new_bucket()
    db = tmp_path / "cat.db"
    writer = _iceberg_catalog(s3, db, bucket, s3.direct_url)
    writer.create_namespace("ns")
    t = writer.create_table("ns.t", schema=_rows(1).schema,
                            location=f"s3://{bucket}/wh/ns.db/t")
    client = s3.boto3()
    paths = []
    for i in range(4):
        sink = pa.BufferOutputStream()
        pq.write_table(_rows(50, i * 50), sink)
        client.put_object(Bucket=bucket, Key=f"wh/ns.db/t/data/f{i}.parquet",
                          Body=sink.getvalue().to_pybytes())
        paths.append(f"s3://{bucket}/wh/ns.db/t/data/f{i}.parquet")
    t.add_files(paths)  # one commit: one manifest
    written = t.current_snapshot().snapshot_id
    pqindex.add_indexes(t, bloom="user", storage_options=s3.storage_options())
    table = _iceberg_catalog(s3, db, bucket, s3.url).load_table("ns.t")
    indexed = table.current_snapshot().snapshot_id
    assert indexed != written

    for snap in (written, indexed):
        reference = table.scan(snapshot_id=snap).to_arrow()
        manifests = table.snapshot_by_id(snap).manifests(table.io)
        live = [m for m in manifests if m.has_added_files() or m.has_existing_files()]
        assert len(live) == 1 and live[0].manifest_path.endswith("-m0.avro")
        s3.reset_log()
        s3.delay = 0.05  # a wave's requests overlap for sure: the proxy counts waves
        try:
            got = pqindex.dataset(table, storage_options=s3.storage_options(),
                                  snapshot_id=snap).to_table(where="id = 123")
        finally:
            s3.delay = 0.0
        assert normalize(got) == normalize(reference.filter(pc.field("id") == 123))
        names = [r.path.rsplit("/", 1)[-1] for r in s3.requests]
        # The list, its manifest and the key index descriptor; the one file's tail.
        assert len(names) == 4 and sum(n.endswith("-m0.avro") for n in names) == 1, names
        assert s3.waves == 2, names


def test_a_manifest_the_list_names_otherwise_comes_in_a_second_wave(
        s3: S3Endpoint, tmp_path: Path) -> None:  # noqa: F811
    """Where the commit's first manifest is not where its name says (a list written
    under another commit's name) or the list is named otherwise, the manifests it
    names come in a wave of their own, and the guess is not used."""
    import importlib

    iceberg = importlib.import_module("pqindex.dataset.tables.iceberg")
    bucket = s3.new_bucket()
    db = tmp_path / "cat.db"
    writer = _iceberg_catalog(s3, db, bucket, s3.direct_url)
    writer.create_namespace("ns")
    t = writer.create_table("ns.t", schema=_rows(1).schema)
    t.append(_rows(100))
    table = _iceberg_catalog(s3, db, bucket, s3.url).load_table("ns.t")
    listed = table.current_snapshot().manifest_list
    data = table.io.new_input(listed).open().read()
    (manifest,) = [m.manifest_path for m in table.current_snapshot().manifests(table.io)]
    root = listed.rsplit("/", 1)[0]
    key = root.split(f"s3://{bucket}/", 1)[1]
    for name, guessed in (("snap-1-1-00000000-0000-0000-0000-000000000000.avro", 1),
                          ("list.avro", 0)):
        s3.put(bucket, f"{key}/{name}", data)
        s3.reset_log()
        s3.delay = 0.05
        try:
            fio, descriptor = iceberg._prefetched(table.io, f"{root}/{name}",
                                                  s3.storage_options(), table.location())
        finally:
            s3.delay = 0.0
        assert descriptor == (None,)  # fetched: there is none
        assert set(fio.held) == {f"{root}/{name}", manifest}
        got = [r.path.rsplit("/", 1)[-1] for r in s3.requests]
        # The list, the guess (absent) and the descriptor; then the named manifest.
        assert len(got) == 3 + guessed and s3.waves == 2, got
        assert got.count(manifest.rsplit("/", 1)[-1]) == 1


def test_the_collector_is_paused_while_a_snapshot_decodes(
        s3: S3Endpoint, tmp_path: Path, monkeypatch: Any) -> None:  # noqa: F811
    import gc
    import importlib

    source = importlib.import_module("pqindex.dataset.tables.source")
    bucket = s3.new_bucket()
    writer = _iceberg_catalog(s3, tmp_path / "cat.db", bucket, s3.direct_url)
    writer.create_namespace("ns")
    t = writer.create_table("ns.t", schema=_rows(1).schema)
    t.append(_rows(30))
    seen = []
    load = source.load_iceberg

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return load(*args, **kwargs)

    monkeypatch.setattr(source, "load_iceberg", spy)
    assert gc.isenabled()
    assert pqindex.dataset(t).to_table(where="id = 3").num_rows == 1
    assert seen == [False] and gc.isenabled()
