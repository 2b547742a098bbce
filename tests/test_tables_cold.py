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
