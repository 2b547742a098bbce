"""A Spark driver program the cluster and worker tests run in a subprocess.

pyspark allows one kind of session per process (a Connect session switches the
whole process to Connect mode) and one SparkContext, so sessions other than the
suite's shared ``local[1]`` run here. pqindex is imported from ``--src``, added
to ``sys.path`` by hand so that Spark's workers do not inherit it through
``PYTHONPATH``. Prints one JSON object (the last line of stdout).

Steps: ``raw`` registers the data source without pqindex's worker check and
writes (the unguarded path of the issue); ``pipeline`` writes with
``pqindex.spark.write``, then compares ``pqindex.spark.read`` with Spark's own
read on random predicates, runs ``add_indexes`` and compares again; ``s3``
writes the same rows to ``s3://<--s3-bucket>/lake`` (endpoint and credentials
from the ``AWS_*`` environment, which the cluster's executors have too), then
compares ``pqindex.spark.read`` (engines ``pqindex`` and ``auto``: Spark has no
S3 connector here) with Spark's own read of a byte-for-byte local copy of the
objects (downloaded with boto3, not pqindex); ``engines`` reads the pipeline's lake
with ``pqindex.spark.read(engine="pqindex")`` in both of its modes (the data source's
tasks, and a read on the driver: on Connect, no sparkContext and no ``_jdf``) and
compares with Spark's own read.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import random
import sys
import time
import traceback
import warnings
from typing import Any

import numpy as np
import pyarrow as pa

N = 3000
DAY0 = datetime.date(2024, 1, 1)


def table(n: int = N, seed: int = 11) -> pa.Table:
    """The rows every driver writes (the test rebuilds them as its reference)."""
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": pa.array(np.arange(n), pa.int64()),
            "k": pa.array(rng.integers(0, n // 4, n), pa.int64()),
            "s": pa.array([f"s{v:02d}" for v in rng.integers(0, 30, n)]),
            "x": pa.array(rng.normal(0, 10, n).round(2), mask=rng.random(n) < 0.05),
            "d": pa.array([DAY0 + datetime.timedelta(days=int(v)) for v in rng.integers(0, 40, n)]),
            "p": pa.array(rng.integers(0, 3, n), pa.int64()),
        }
    )


def predicates(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    out = ["k < 20", "s = 's99'", "p = 1 AND k >= 700"]
    while len(out) < count:
        kind = rng.choice(["k", "s", "x", "d", "p", "or"])
        if kind == "k":
            a = rng.randint(-5, N // 4 + 5)
            out.append(f"k BETWEEN {a} AND {a + rng.randint(0, 60)}")
        elif kind == "s":
            out.append(f"s IN ('s{rng.randint(0, 40):02d}', 's{rng.randint(0, 40):02d}')")
        elif kind == "x":
            out.append(f"x {rng.choice(['<', '>'])} {rng.uniform(-30, 30):.1f} OR x IS NULL")
        elif kind == "d":
            day = DAY0 + datetime.timedelta(days=rng.randint(-2, 42))
            out.append(f"d {rng.choice(['<', '>=', '='])} DATE '{day.isoformat()}'")
        elif kind == "p":
            out.append(f"p != {rng.randint(0, 3)} AND k < {rng.randint(0, N // 4)}")
        else:
            out.append(f"k = {rng.randint(0, N // 4)} OR s = 's{rng.randint(0, 30):02d}'")
    return out


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def _executor_jvms(spark: Any) -> list[dict[str, Any]]:
    """For each task's Python worker, the JVM above it (pid and whether it is an executor)."""
    from pyspark.sql import functions as F

    def jvm(_: int) -> str:
        pid = os.getpid()
        for _step in range(6):
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            if "java" in cmd.split(" ", 1)[0]:
                return json.dumps([pid, "CoarseGrainedExecutorBackend" in cmd])
        return json.dumps([None, False])

    udf = F.udf(jvm, "string", useArrow=False)
    rows = spark.range(0, 64, 1, 4).select(udf("id").alias("j")).distinct().collect()
    return [dict(zip(("pid", "executor"), json.loads(r["j"]), strict=True)) for r in rows]


def _download(bucket: str, prefix: str, to: str) -> list[str]:
    """Every object under ``prefix`` copied to ``to`` (boto3, the ``AWS_*`` environment)."""
    import boto3

    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            keys.append(obj["Key"])
            local = os.path.join(to, obj["Key"][len(prefix):])
            os.makedirs(os.path.dirname(local), exist_ok=True)
            client.download_file(bucket, obj["Key"], local)
    return keys


def _plan_text(df: Any) -> str:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        df.explain(True)
    return buf.getvalue()


def s3_step(spark: Any, sdf: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Write to and read from the S3 endpoint of the environment (see the module doc)."""
    import pqindex.spark
    from pqindex.errors import PqIndexError

    dest = f"s3://{args.s3_bucket}/lake"
    r = pqindex.spark.write(sdf, dest, sort_by="k", partition_by="p", bloom=["s"],
                            indexes={"distinct": ["s"]}, page_rows=100,
                            target_file_bytes=40_000)
    out: dict[str, Any] = {"write": {k: r[k] for k in ("files", "rows", "tasks", "path")}}
    copy = os.path.join(args.out, "s3-copy")
    _download(args.s3_bucket, "lake/", copy)
    base = spark.read.parquet(copy)
    mismatches: list[str] = []
    engines: dict[str, set[str]] = {}
    queries = [(w, None) for w in predicates(7, args.predicates)]
    queries.append(("k < 50", ["id", "s"]))
    for w, cols in queries:
        want = base.where(w) if cols is None else base.where(w).select(*cols)
        # pqindex's reader in Spark tasks (executors read S3), and auto's choice.
        for engine, on_driver in (("pqindex", -1), ("auto", None)):
            got = pqindex.spark.read(spark, dest, where=w, columns=cols, engine=engine,
                                     driver_read_bytes=on_driver)
            if got.schema != want.schema or _rows(got) != _rows(want):
                mismatches.append(f"{engine}: {w} {cols or ''}")
        e = pqindex.spark.explain(spark, dest, w, columns=cols, engine="auto")
        engines.setdefault(e["engine"], set()).add(e["engine_reason"])
    out["read"] = {"mismatches": mismatches, "queries": len(queries),
                   "auto": {k: sorted(v) for k, v in engines.items()}}
    try:
        pqindex.spark.read(spark, dest, where="k < 5", engine="native")
        out["native_error"] = None
    except PqIndexError as e:
        out["native_error"] = str(e)
    plans = [_plan_text(pqindex.spark.read(spark, dest, where="k < 20", engine="pqindex",
                                           driver_read_bytes=-1))]
    out["plans"] = plans
    # Credentials given as storage options too (a write and a read in tasks): on a
    # Connect server they travel in each request's plan, which it logs as text (its
    # statement, job and stage descriptions); neither there nor in the plan Spark
    # shows may they appear.
    so = {"endpoint": os.environ["AWS_ENDPOINT_URL"], "region": os.environ["AWS_REGION"],
          "access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
          "secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"], "allow_http": "true"}
    dest_so = f"s3://{args.s3_bucket}/lake-options"
    w = pqindex.spark.write(sdf.where("k < 300"), dest_so, sort_by="k", page_rows=100,
                            storage_options=so)
    got = pqindex.spark.read(spark, dest_so, where="k < 20", engine="pqindex",
                             storage_options=so, driver_read_bytes=-1)
    out["with_options_rows_equal"] = (w["rows"] == sdf.where("k < 300").count()
                                      and _rows(got) == _rows(base.where("k < 20")))
    plans.append(_plan_text(got))
    return out


def pushdown_step(spark: Any, dest: str, args: argparse.Namespace) -> dict[str, Any]:
    """Spark's own idiom on the pipeline's lake: filters pushed to ``pqindex.spark.table``
    (the JVM shim on a classic session; DataFrame and SQL) against Spark's reader."""
    import pqindex.spark

    base = spark.read.parquet(dest)
    df = pqindex.spark.table(spark, "pushdown_lake", dest)
    mismatches = []
    for i, w in enumerate(predicates(19, args.predicates)):
        got = (spark.sql(f"SELECT * FROM pushdown_lake WHERE {w}") if i % 2
               else df.where(w))
        if _rows(got) != _rows(base.where(w)):
            mismatches.append(w)
    conf = spark.conf.get("spark.sql.python.filterPushdown.enabled")
    from pqindex.spark.shim import unavailable

    # None: read through the JVM shim (Spark's reader in the executors, no pqindex class there)
    return {"mismatches": mismatches, "conf": conf, "shim": unavailable(spark)}


ENGINES_WHERE = "k BETWEEN 100 AND 140 OR (s = 's07' AND k < 300)"
ENGINES_COLUMNS = ["id", "s"]


def engines_step(spark: Any, dest: str) -> dict[str, Any]:
    """Both modes of the pqindex engine (driver_read_bytes=-1: every plan in tasks)
    against Spark's reader: rows equal, their count, the mode explain reports."""
    import pqindex.spark

    want = _rows(spark.read.parquet(dest).where(ENGINES_WHERE).select(*ENGINES_COLUMNS))
    out: dict[str, Any] = {}
    for name, kw in (("tasks", {"driver_read_bytes": -1}), ("driver", {})):
        got = _rows(pqindex.spark.read(spark, dest, ENGINES_WHERE, ENGINES_COLUMNS,
                                       engine="pqindex", **kw))
        mode = pqindex.spark.explain(spark, dest, ENGINES_WHERE, columns=ENGINES_COLUMNS,
                                     engine="pqindex", **kw)["engine_mode"]
        out[name] = {"equal": got == want, "rows": len(got), "mode": mode}
    return out


def _session(args: argparse.Namespace) -> Any:
    from pyspark.sql import SparkSession

    if args.remote:
        return SparkSession.builder.remote(args.remote).getOrCreate()
    b = (
        SparkSession.builder.master(args.master)
        .appName("pqindex-driver")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "512m")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if args.master.startswith("spark://"):
        b = (
            b.config("spark.executor.memory", "512m")
            .config("spark.executor.cores", "1")
            .config("spark.cores.max", "2")
            # Wait for both executors before the first job.
            .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
            .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "120s")
        )
    for kv in args.conf:
        k, v = kv.split("=", 1)
        b = b.config(k, v)
    return b.getOrCreate()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--master", default="local[1]")
    ap.add_argument("--remote")
    ap.add_argument("--conf", action="append", default=[])
    ap.add_argument("--steps", default="pipeline")
    ap.add_argument("--predicates", type=int, default=4)
    ap.add_argument("--s3-bucket")
    args = ap.parse_args()
    sys.path.insert(0, args.src)
    warnings.simplefilter("ignore")

    import pqindex.spark
    from pqindex.errors import PqIndexError
    from pqindex.spark.workers import ensure_workers, is_connect

    t0 = time.perf_counter()
    spark = _session(args)
    out: dict[str, Any] = {"connect": is_connect(spark), "pqindex": pqindex.__file__}
    seconds: dict[str, float] = {"session": time.perf_counter() - t0}
    out["seconds"] = seconds

    def lap(name: str) -> None:
        seconds[name] = round(time.perf_counter() - t0 - sum(seconds.values()), 2)

    try:
        if not out["connect"]:
            spark.sparkContext.setLogLevel("ERROR")
        sdf = spark.createDataFrame(table())
        dest = os.path.join(args.out, "lake")
        steps = args.steps.split(",")
        if "raw" in steps:
            from pqindex.spark.source import PqIndexDataSource

            spark.dataSource.register(PqIndexDataSource)  # no worker check
            try:
                sdf.write.format("pqindex").option("sort_by", "k").mode("append").save(
                    os.path.join(args.out, "raw")
                )
                out["raw_error"] = None
            except Exception as e:
                out["raw_error"] = f"{type(e).__name__}: {e}"
        if "pipeline" in steps:
            try:
                r = pqindex.spark.write(
                    sdf,
                    dest,
                    sort_by="k",
                    partition_by="p",
                    bloom=["s"],
                    indexes={"distinct": ["s"]},
                    page_rows=100,
                    target_file_bytes=40_000,
                )
            except PqIndexError as e:
                out["error"] = {"type": type(e).__name__, "message": str(e)}
                return
            lap("write")
            out["write"] = {k: r[k] for k in ("files", "rows", "tasks", "shipped")}
            out["workers"] = dataclasses.asdict(ensure_workers(spark))
            mismatches, pruned = [], 0
            base = spark.read.parquet(dest)
            for w in predicates(7, args.predicates):
                got = pqindex.spark.read(spark, dest, where=w)
                if got.schema != base.schema or _rows(got) != _rows(base.where(w)):
                    mismatches.append(w)
                pruned += pqindex.spark.explain(spark, dest, w)["files_pruned"]
            cols = pqindex.spark.read(spark, dest, where="k < 50", columns=["id", "s"])
            if _rows(cols) != _rows(base.where("k < 50").select("id", "s")):
                mismatches.append("k < 50 [id, s]")
            out["read"] = {"mismatches": mismatches, "files_pruned": pruned}
            lap("read")
            a = pqindex.spark.add_indexes(spark, dest, zone_maps=["x"], distinct=["d"])
            out["add_indexes"] = {k: a[k] for k in ("files", "tasks", "region_bytes")}
            out["add_indexes"]["errors"] = [e["error"] for e in a["errors"]]
            lap("add_indexes")
            e = pqindex.spark.explain(spark, dest, "d = DATE '2023-06-01'")
            out["after_add"] = {"kept": e["files_kept"], "manifest": e["manifest"]}
            out["after_add_rows_equal"] = _rows(
                pqindex.spark.read(spark, dest, where="x > 5")
            ) == _rows(spark.read.parquet(dest).where("x > 5"))
            lap("rest")
        if "engines" in steps:
            out["engines"] = engines_step(spark, dest)
            lap("engines")
        if "pushdown" in steps:
            out["pushdown"] = pushdown_step(spark, dest, args)
            lap("pushdown")
        if "s3" in steps:
            out["s3"] = s3_step(spark, sdf, args)
            lap("s3")
        out["jvms"] = _executor_jvms(spark)
    except Exception:
        out["crash"] = traceback.format_exc()
    finally:
        spark.stop()
        print(json.dumps(out, default=str), flush=True)


if __name__ == "__main__":
    main()
