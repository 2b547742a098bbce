"""The Spark pipeline on a standalone cluster and through a Spark Connect server (issue 11).

A master and two workers from pyspark's ``spark-class`` (executors in their own
JVMs and Python workers), and a Connect server from pyspark's ``sbin``, all on
127.0.0.1 and stopped by their fixtures. The driver programs run in
subprocesses (tests/spark_driver.py): one process can hold only one SparkContext,
and a Connect session turns the whole process to Connect mode.

On each: ``pqindex.spark.write`` (range-partitioned, hive-partitioned, Bloom and
distinct indexes), ``pqindex.spark.read`` against Spark's own read of the output
on random predicates, ``add_indexes``, and the lake against pyarrow's read; then
the same on the S3 test endpoint (moto behind the counting proxy), whose
endpoint and credentials the workers, the Connect server and the driver get from
their environment (``AWS_*``), so that they appear in no Spark conf, plan or
event log (checked: every log, event log and work directory is searched for the
secret).
"""

from __future__ import annotations

import json
import re
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyarrow import fs

import spark_driver
from pqindex.spark.secrets import PATTERN
from pqindex.spark.workers import fingerprint
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)
from spark_servers import (
    base_env,
    connect_server,
    event_log_conf,
    files_containing,
    files_matching,
    run_driver,
    standalone_cluster,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# Distinctive, so that a search of logs and plans for it means something (moto
# accepts any credentials).
SECRET = f"pqindex-secret-{uuid.uuid4().hex}"


def aws_env(ep: S3Endpoint) -> dict[str, str]:
    """The S3 endpoint (through the counting proxy) and credentials as environment."""
    return {
        "AWS_ENDPOINT_URL": ep.url,
        "AWS_ACCESS_KEY_ID": "pqindex-test-key",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


def check_lake(path: Path | str, filesystem: Any = None) -> None:
    """The written lake holds exactly the driver's rows (pyarrow as the reference)."""
    want = spark_driver.table().sort_by("id")
    got = pq.read_table(path, filesystem=filesystem).sort_by("id")
    for name in ("id", "k", "s", "x", "d"):
        assert got.column(name).to_pylist() == want.column(name).to_pylist(), name
    assert got.column("p").cast(pa.int64()).to_pylist() == want.column("p").to_pylist()


def check_pipeline(out: dict[str, Any], lake: Path, python: str) -> None:
    assert "crash" not in out, out.get("crash")
    assert "error" not in out, out.get("error")
    assert out["write"]["rows"] == spark_driver.N and out["write"]["files"] >= 2
    assert out["read"]["mismatches"] == []
    assert out["read"]["files_pruned"] > 0  # partitioned and sorted: pruning must happen
    assert out["add_indexes"]["errors"] == [] and out["add_indexes"]["region_bytes"] > 0
    assert out["add_indexes"]["files"] == out["write"]["files"]
    assert out["after_add"]["manifest"] == "current"
    assert out["after_add_rows_equal"] is True
    check_lake(lake)
    # The workers lacked pqindex: they got this checkout's, as a zip named after it.
    shipped = out["write"]["shipped"]
    assert shipped and shipped.endswith(f"pqindex-{fingerprint()}.zip")
    assert out["workers"]["shipped"] == shipped
    assert out["workers"]["pythons"] == [python]
    assert all(".zip" in loc for loc in out["workers"]["locations"])


def check_s3(out: dict[str, Any], ep: S3Endpoint, bucket: str, logs: list[Path]) -> None:
    """The S3 step: rows, the committed objects, the requests, and no secret anywhere."""
    s3out = out["s3"]
    assert s3out["write"]["rows"] == spark_driver.N and s3out["write"]["files"] >= 2
    assert s3out["write"]["path"] == f"s3://{bucket}/lake"
    assert s3out["read"]["mismatches"] == [], s3out["read"]
    assert s3out["read"]["queries"] >= 5
    # No S3 connector in this Spark: auto reads through pqindex, native refuses.
    assert list(s3out["read"]["auto"]) == ["pqindex"], s3out["read"]["auto"]
    assert "no connector" in (s3out["native_error"] or "")
    # Also a write and a read with the credentials as storage options (on Connect too).
    assert s3out["with_options_rows_equal"] is True
    # The commit: data under the hive directories, manifest and _SUCCESS, no staging.
    client = ep.boto3()
    keys = [o["Key"] for p in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix="lake/") for o in p.get("Contents", [])]
    rel = sorted(k[len("lake/"):] for k in keys)
    assert "_SUCCESS" in rel and "_pqindex_manifest.json" in rel, rel
    assert not [k for k in rel if k.startswith("_pqindex_staging")], rel
    data = sorted(k for k in rel if not k.startswith("_"))
    manifest = json.loads(client.get_object(Bucket=bucket, Key="lake/_pqindex_manifest.json")
                          ["Body"].read())
    assert sorted(f["path"] for f in manifest["files"]) == data
    assert len(data) == s3out["write"]["files"] and all(k.startswith("p=") for k in data)
    check_lake(f"{bucket}/lake", fs.S3FileSystem(
        access_key="k", secret_key="s", region="us-east-1", scheme="http",
        endpoint_override=ep.direct_url.removeprefix("http://")))
    # Executors (which only have the environment) staged parts and read pages through
    # the proxy: uploads under the staging prefix, ranged GETs of the data objects.
    reqs = [(r.method, urllib.parse.unquote(r.path), r.range) for r in ep.requests]
    assert any(m == "PUT" and p.startswith(f"/{bucket}/lake/_pqindex_staging/")
               and "/task-" in p
               for m, p, _ in reqs), reqs[:20]
    assert any(m == "GET" and rng and p.startswith(f"/{bucket}/lake/p=")
               for m, p, rng in reqs), reqs[:20]
    # Credentials travel in no plan and no log (explain, event logs, executor logs),
    # neither as given nor in pqindex's encoding of the storage options (that shows
    # only as Spark's redaction text).
    for plan in s3out["plans"]:
        assert "BatchScan pqindex" in plan and SECRET not in plan, plan
        assert not re.search(PATTERN.replace("*", "+"), plan), plan
    assert files_containing(SECRET, *logs) == []
    assert files_matching(PATTERN.replace("*", "+"), *logs) == []


@pytest.fixture(scope="session")
def cluster_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cluster's logs and the workers' work directories."""
    return tmp_path_factory.mktemp("cluster")


@pytest.fixture(scope="session")
def cluster(cluster_dir: Path, s3: S3Endpoint) -> Iterator[str]:  # noqa: F811
    """A standalone cluster whose workers have the S3 endpoint in their environment
    (their executors and Python workers inherit it): its master URL."""
    with standalone_cluster(cluster_dir, env=aws_env(s3)) as url:
        yield url


@pytest.fixture(scope="session")
def connect_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("connect")


@pytest.fixture(scope="session")
def connect(
    connect_dir: Path, python_without_pqindex: str, cluster: str, s3: S3Endpoint  # noqa: F811
) -> Iterator[str]:
    """A Spark Connect server running its jobs on the cluster, whose Python workers lack
    pqindex: its ``sc://`` URL."""
    with connect_server(connect_dir, python_without_pqindex, master=cluster,
                        env=aws_env(s3)) as url:
        yield url


def test_pipeline_on_standalone_cluster(
    tmp_path: Path, cluster: str, cluster_dir: Path, python_without_pqindex: str,
    s3: S3Endpoint,  # noqa: F811
) -> None:
    bucket = s3.new_bucket()
    s3.reset_log()
    env = base_env(tmp_path, PYSPARK_PYTHON=python_without_pqindex, **aws_env(s3))
    events = tmp_path / "events"
    events.mkdir()
    out, err = run_driver(tmp_path, "--master", cluster, "--steps", "raw,pipeline,pushdown,s3",
                          "--s3-bucket", bucket, *event_log_conf(events), env=env)
    # Unguarded, a write fails as the issue reports, deep inside an AnalysisException.
    assert out.get("raw_error") and "No module named 'pqindex'" in out["raw_error"], err[-3000:]
    # pqindex.spark.write checks the workers first and ships the package (addPyFile).
    check_pipeline(out, tmp_path / "lake", python_without_pqindex)
    assert out["connect"] is False
    # Tasks ran in two executor JVMs, not in the driver.
    jvms = {j["pid"] for j in out["jvms"] if j["executor"]}
    assert len(jvms) == 2 and all(j["executor"] for j in out["jvms"]), (out["jvms"], err[-2000:])
    assert out["workers"]["parallelism"] == 2
    # Spark's own filters and SQL, pushed to pqindex's JVM shim (issue 42), whose tasks
    # Spark's reader runs in the executors.
    assert out["pushdown"] == {"mismatches": [], "conf": "true", "shim": None}, out["pushdown"]
    check_s3(out, s3, bucket, [tmp_path, cluster_dir])


def test_pipeline_on_connect(
    tmp_path: Path, connect: str, connect_dir: Path, cluster_dir: Path,
    python_without_pqindex: str, s3: S3Endpoint,  # noqa: F811
) -> None:
    bucket = s3.new_bucket()
    s3.reset_log()
    env = base_env(tmp_path, **aws_env(s3))
    out, err = run_driver(tmp_path, "--remote", connect, "--steps", "pipeline,engines,s3",
                          "--s3-bucket", bucket, env=env)
    assert out["connect"] is True, err[-2000:]
    # pqindex's engine on Connect (no sparkContext, no _jdf), in the data source's tasks
    # and on the driver: Spark's rows, as many as pyarrow counts in the written table
    # for spark_driver.ENGINES_WHERE. On this server, not one of its own: a Connect
    # server's start is most of such a test's time.
    t = spark_driver.table()
    want = t.filter(pc.field("k").isin(range(100, 141)) |
                    ((pc.field("s") == "s07") & (pc.field("k") < 300))).num_rows
    assert want > 0
    assert out["engines"] == {
        "tasks": {"equal": True, "rows": want, "mode": "tasks"},
        "driver": {"equal": True, "rows": want, "mode": "driver"}}, out.get("engines", err[-2000:])
    # The server's workers lacked pqindex: it went over as a session artifact.
    check_pipeline(out, tmp_path / "lake", python_without_pqindex)
    check_s3(out, s3, bucket, [tmp_path, connect_dir, cluster_dir])
    jvms = {j["pid"] for j in out["jvms"] if j["executor"]}
    assert len(jvms) == 2 and all(j["executor"] for j in out["jvms"]), out["jvms"]
