"""A manifest that pqindex's pipeline committed names the dataset's files: planning
reads it instead of listing (DESIGN "Commit points are truth").

Lakes are written by the pipeline's own task writer and job commit (no Spark: the
functions Spark's tasks and driver call), on local disk and on S3 (moto behind the
counting proxy). Answers are compared with pyarrow's read of the same tables; on S3
the LIST requests are counted on the proxy's trace: none with ``listing=False``.
A manifest written by ``pqindex manifest`` over a directory stays validated by the
listing, and ``listing=True`` lists anyway.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import pqindex
from pqindex.dataset.manifest import COMMIT_POINT, MANIFEST_NAME, write_manifest
from pqindex.io.cache import metadata_cache
from pqindex.spark.commit import commit_job
from pqindex.spark.remote_commit import commit_job_remote, manifest_etag
from pqindex.spark.task import parse_options, write_task
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)


def _table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"id": pa.array(np.arange(seed * n, seed * n + n), pa.int64()),
                     "s": pa.array([f"s{v:03d}" for v in rng.integers(0, 300, n)])})


def _stage(dest: str, job: str, t: pa.Table, so: dict[str, str] | None) -> list[dict[str, Any]]:
    raw = {"sort_by": "id", "page_rows": "200"}
    if so is not None:
        raw.update({"storage_option.endpoint": so["endpoint"], "storage_options": json.dumps(so)})
    _dir, files = write_task(t.to_batches(max_chunksize=1000), dest=dest, job_id=job,
                             partition_id=0, attempt=0, options=parse_options(raw))
    return files


def _lists(ep: S3Endpoint) -> int:
    return sum(1 for r in ep.requests if r.query.startswith("list-type=2"))


def test_s3_pipeline_manifest_plans_without_a_list(s3: S3Endpoint) -> None:  # noqa: F811
    so = s3.storage_options()
    bucket = s3.new_bucket("commit")
    dest = f"s3://{bucket}/lake"
    tables = [_table(1500, k) for k in range(4)]
    for k, t in enumerate(tables):  # four jobs: four commits, one manifest
        job = str(k) * 32
        commit_job_remote(dest, job, _stage(dest, job, t, so), mode="append", info={},
                          base_etag=manifest_etag(dest, so), storage_options=so)
    every = pa.concat_tables(tables)
    metadata_cache().clear()
    s3.reset_log()
    s3.delay = 0.05  # a wave's requests overlap for sure: the proxy counts waves
    try:
        ds = pqindex.dataset(dest, storage_options=so, listing=False)
        scan = ds.scan(where="id = 4321")
        got = scan.to_table()
    finally:
        s3.delay = 0.0
    assert got["id"].to_pylist() == [4321]
    assert _lists(s3) == 0
    # The manifest GET, the kept file's tail, its data: at most three round trips.
    assert s3.waves <= 3 and scan.report.round_trips <= 3
    assert s3.requests[0].path.rsplit("/", 1)[1] == MANIFEST_NAME
    assert "no LIST" in ds.explain(where="id = 4321")
    assert json.loads(ds.explain(where="id = 17", format="json"))["files_from"].startswith(
        "named by the commit point")
    assert ds.to_table().sort_by("id").equals(every.sort_by("id"))
    # Asked to list, it lists and validates the manifest's entries against it.
    metadata_cache().clear()
    s3.reset_log()
    listed = pqindex.dataset(dest, storage_options=so, listing=True)
    assert listed.scan(where="id = 4321").to_table()["id"].to_pylist() == [4321]
    assert _lists(s3) >= 1
    assert "found by listing" in listed.explain(where="id = 4321")


def test_local_pipeline_manifest_is_read_instead_of_walking(tmp_path: Path) -> None:
    dest = str(tmp_path / "lake")
    tables = [_table(1000, k) for k in range(3)]
    for k, t in enumerate(tables):
        job = str(k) * 32
        commit_job(dest, job, _stage(dest, job, t, None), mode="append", info={})
    manifest = json.loads((tmp_path / "lake" / MANIFEST_NAME).read_text())
    assert manifest[COMMIT_POINT] is True
    # A file the manifest does not name is not part of the committed dataset.
    pa.parquet.write_table(_table(10, 99), tmp_path / "lake" / "stray.parquet")
    ds = pqindex.dataset(dest)
    assert ds.discovery.named_by is not None
    assert ds.count_rows() == 3000
    assert ds.scan(where="id = 2500").to_table()["id"].to_pylist() == [2500]
    assert "no LIST" in ds.explain(where="id = 2500")
    # Listing finds the stray file too, and the manifest only prunes what it matches.
    walked = pqindex.dataset(dest, listing=True)
    assert walked.discovery.named_by is None
    assert walked.count_rows() == 3010
    # `pqindex manifest` rewrites it from a listing: no longer a commit point.
    write_manifest(dest)
    assert COMMIT_POINT not in json.loads((tmp_path / "lake" / MANIFEST_NAME).read_text())
    again = pqindex.dataset(dest)
    assert again.discovery.named_by is None and again.count_rows() == 3010


def test_listing_option_is_checked(tmp_path: Path) -> None:
    with pytest.raises(pqindex.PqIndexError, match="listing must be"):
        pqindex.dataset(str(tmp_path), listing="yes")  # type: ignore[arg-type]
