"""The main job: TPC-H lineitem → the PySpark pipeline → queries with and without indexes.

1. generate TPC-H ``lineitem`` with tpchgen-cli (scale factor 1 by default);
2. build it with pqindex's PySpark pipeline on local Spark: sorted by
   ``l_shipdate``, a Bloom filter on ``l_orderkey``, a distinct-value index on
   ``l_shipmode``; and a plain copy written by Spark itself;
3. run TPC-H Q6's and Q14's filters, an order-key lookup and an absent ship mode
   through pqindex and through Spark, on the indexed dataset and on the plain
   copy, and print rows, pages and bytes read, and time.

With ``--store s3`` the same pipeline writes to an S3 endpoint started on
127.0.0.1 (moto's server behind the counting proxy of tests/s3_server.py, from
the test extras that demo.sh installs), and the queries print the requests,
round trips and bytes each one cost at the endpoint. Spark itself has no S3
connector in this setup, so the Spark rows are shown for the local store only.

Run through scripts/demo.sh, which sets up the virtual environment first.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

QUERIES: list[tuple[str, str, list[str]]] = [
    (
        "TPC-H Q6 filter",
        "l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
        "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
        ["l_extendedprice", "l_discount"],
    ),
    (
        "TPC-H Q14 filter",
        "l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'",
        ["l_partkey", "l_extendedprice", "l_discount"],
    ),
    ("order-key lookup", "l_orderkey = 4000000", ["l_orderkey", "l_partkey", "l_quantity"]),
    ("absent ship mode", "l_shipmode = 'BLIMP'", ["l_orderkey", "l_quantity"]),
]


def queries(scale: float) -> list[tuple[str, str, list[str]]]:
    """QUERIES with the looked-up order key inside this scale's key range (keys grow
    with the scale factor; 4,000,000 at scale 1 is a key tpchgen generates)."""
    key = max(32, round(4_000_000 * scale / 32) * 32)
    return [(n, f"l_orderkey = {key}" if n == "order-key lookup" else w, c)
            for n, w, c in QUERIES]


# Under the result tables: why the plain copy finds an order key cheaply too.
DATA_NOTE = (
    "indexed: the pqindex pipeline's files, sorted by l_shipdate, where an order key is "
    "found by page Bloom filters; plain: Spark's own copy, in the generator's l_orderkey "
    "order, so its ColumnIndex finds an order key by itself. One cold run each; the first "
    "query also pays the process's one-time imports."
)


def say(msg: str) -> None:
    print(f"\n== {msg}", flush=True)


def generate(scale: float, out: Path) -> Path:
    """lineitem.parquet from tpchgen-cli, generated once per scale factor."""
    target = out / f"tpch-sf{scale:g}"
    path = target / "lineitem.parquet"
    if path.exists():
        say(f"reusing {path}")
        return path
    exe = shutil.which("tpchgen-cli") or str(Path(sys.executable).parent / "tpchgen-cli")
    t0 = time.perf_counter()
    subprocess.run(
        [exe, "parquet", "-s", f"{scale:g}", "--tables", "lineitem", "-o", str(target)],
        check=True,
    )
    say(f"generated {path} ({path.stat().st_size / 2**20:.1f} MiB) in {time.perf_counter() - t0:.1f} s")
    return path


def spark_session(master: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("pqindex-demo")
        .config("spark.ui.enabled", "false")
        # Stage progress bars would interleave with the demo's own output.
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def jvm_rchar(spark: Any) -> int:
    """Bytes the Spark JVM has read so far (its /proc io counter): Spark's reads."""
    pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return 0


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    ap.add_argument("--data", type=Path, default=ROOT / "data", help="output directory")
    ap.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    ap.add_argument("--store", choices=["local", "s3"], default="local",
                    help="where the datasets go: local disk (default) or an S3 endpoint "
                         "(moto) started on 127.0.0.1")
    args = ap.parse_args()
    if args.store == "s3":
        main_s3(args)
        return
    args.data.mkdir(parents=True, exist_ok=True)

    from rich.console import Console
    from rich.table import Table

    import pqindex
    import pqindex.spark

    src = generate(args.scale, args.data)
    indexed = args.data / f"lineitem-sf{args.scale:g}-pqindex"
    plain = args.data / f"lineitem-sf{args.scale:g}-spark"

    say(f"starting Spark ({args.master})")
    spark = spark_session(args.master)
    df = spark.read.parquet(str(src))

    say("building the indexed dataset with the pqindex PySpark pipeline")
    summary, secs = timed(
        lambda: pqindex.spark.write(
            df,
            str(indexed),
            sort_by=["l_shipdate"],
            bloom=["l_orderkey"],
            # page-scope Bloom: l_orderkey lookups narrowed to pages, not row groups
            indexes={"distinct": ["l_shipmode"], "bloom": ["l_orderkey"]},
            bloom_scope="page",
            mode="overwrite",
        )
    )
    print(f"   {summary['files']} files, {summary['rows']:,} rows, "
          f"{summary['bytes'] / 2**20:.1f} MiB ({summary['index_bytes'] / 2**20:.2f} MiB indexes) "
          f"in {secs:.1f} s")

    say("writing a plain copy with Spark's own Parquet writer")
    _, secs = timed(lambda: df.write.mode("overwrite").parquet(str(plain)))
    print(f"   done in {secs:.1f} s")

    say("pqindex inspect of one indexed file (row group 0, l_shipdate pages)")
    first = sorted(p for p in indexed.rglob("*.parquet"))[0]
    subprocess.run(
        [sys.executable, "-m", "pqindex", "inspect", str(first), "--row-group", "0",
         "--column", "l_shipdate", "--pages"],
        check=True,
    )

    say("pqindex explain of the Q14 filter on that file (chunks of many pages get a page map)")
    subprocess.run(
        [sys.executable, "-m", "pqindex", "explain", str(first), "--where", QUERIES[1][1],
         "--columns", ",".join(QUERIES[1][2])],
        check=True,
    )

    say("queries")
    # The indexed dataset as a Spark SQL view read through pqindex (its WHERE reaches
    # pqindex's indexes; on this classic session the JVM read shim: Spark's own Parquet
    # reader on the row groups pqindex keeps); the plain copy as Spark's own Parquet view.
    pqindex.spark.table(spark, "lineitem_indexed", str(indexed))
    spark.read.parquet(str(plain)).createOrReplaceTempView("lineitem_plain")
    rows_out = []
    for name, where, cols in queries(args.scale):
        for label, path in (("indexed", indexed), ("plain", plain)):
            ds = pqindex.dataset(str(path))
            scan = ds.scan(columns=cols, where=where)
            table, secs = timed(scan.to_table)
            rep = scan.report
            rows_out.append((name, f"pqindex · {label}", table.num_rows,
                             f"{rep.pages_read:,}/{rep.pages_total:,}", rep.bytes_read, secs))
        # Spark's own idiom: SQL over views. pqindex's view prunes with the filters Spark
        # pushes to its data source; the plain copy is read by Spark's Parquet reader.
        for label, view in (("indexed", "lineitem_indexed"), ("plain", "lineitem_plain")):
            before = jvm_rchar(spark)
            sdf = spark.sql(f"SELECT {', '.join(cols)} FROM {view} WHERE {where}")
            n, secs = timed(sdf.count)
            rows_out.append((name, f"Spark SQL · {label}", n, "n/a",
                             jvm_rchar(spark) - before, secs))

    t = Table(title="What each query read (bytes: pqindex's counter; Spark: its JVM's read "
                    "bytes, which leave out pqindex's Python workers)")
    for h in ("query", "reader · data", "rows", "pages read/total", "bytes read", "time"):
        t.add_column(h, justify="right" if h not in ("query", "reader · data") else "left")
    for name, who, n, pages, nbytes, secs in rows_out:
        t.add_row(name, who, f"{n:,}", pages, f"{nbytes / 2**20:,.2f} MiB", f"{secs * 1000:,.0f} ms")
    console = Console(width=max(100, shutil.get_terminal_size().columns))
    console.print(t)
    console.print(DATA_NOTE)
    spark.stop()


def start_s3() -> Any:
    """moto's S3 server and the counting proxy (tests/s3_server.py), on 127.0.0.1."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from s3_server import S3Endpoint
    except ImportError as e:
        sys.exit(f"--store s3 needs the test extras (moto): {e}; run scripts/demo.sh")
    return S3Endpoint()


def main_s3(args: argparse.Namespace) -> None:
    """The pipeline and the queries against an S3 endpoint on 127.0.0.1."""
    from rich.console import Console
    from rich.table import Table

    import pqindex
    import pqindex.spark
    from pqindex.io.listing import list_objects

    src = generate(args.scale, args.data)
    plain_local = args.data / f"lineitem-sf{args.scale:g}-spark"
    say("starting an S3 endpoint (moto) on 127.0.0.1")
    ep = start_s3()
    so = ep.storage_options()
    # The CLI runs below read the standard variables (obstore takes them too).
    os.environ.update({"AWS_ENDPOINT_URL": so["endpoint"], "AWS_ACCESS_KEY_ID": so["access_key_id"],
                       "AWS_SECRET_ACCESS_KEY": so["secret_access_key"], "AWS_REGION": so["region"],
                       "AWS_ALLOW_HTTP": "true"})
    bucket = ep.new_bucket("demo")
    indexed = f"s3://{bucket}/lineitem-sf{args.scale:g}-pqindex"
    plain = f"s3://{bucket}/lineitem-sf{args.scale:g}-spark"
    print(f"   {ep.url} (bucket {bucket})")
    try:
        say(f"starting Spark ({args.master})")
        spark = spark_session(args.master)
        df = spark.read.parquet(str(src))

        say(f"building the indexed dataset at {indexed} with the pqindex PySpark pipeline")
        ep.reset_log()
        summary, secs = timed(lambda: pqindex.spark.write(
            df, indexed, sort_by=["l_shipdate"], bloom=["l_orderkey"],
            indexes={"distinct": ["l_shipmode"], "bloom": ["l_orderkey"]}, bloom_scope="page",
            mode="overwrite", storage_options=so))
        print(f"   {summary['files']} files, {summary['rows']:,} rows, "
              f"{summary['bytes'] / 2**20:.1f} MiB ({summary['index_bytes'] / 2**20:.2f} MiB "
              f"indexes) in {secs:.1f} s; {len(ep.requests):,} requests to the endpoint")

        say(f"a plain copy: Spark's own writer on local disk, uploaded to {plain}")
        df.write.mode("overwrite").parquet(str(plain_local))
        import obstore as obs

        from pqindex.io.objstore import get_store

        for f in sorted(plain_local.rglob("*.parquet")):
            handle, key = get_store(f"{plain}/{f.relative_to(plain_local).as_posix()}", so)
            obs.put(handle.store, key, f)
        spark.stop()

        first = sorted(u for u, _ in list_objects(indexed + "/", so) if u.endswith(".parquet"))[0]
        say("pqindex explain of the Q14 filter on one indexed object")
        subprocess.run([sys.executable, "-m", "pqindex", "explain", first, "--where", QUERIES[1][1],
                        "--columns", ",".join(QUERIES[1][2])], check=True)

        say("queries (endpoint figures: requests, sequential round trips, response bytes)")
        rows_out = []
        for name, where, cols in queries(args.scale):
            for label, path in (("indexed", indexed), ("plain", plain)):
                ep.reset_log()
                ds = pqindex.dataset(path, storage_options=so)
                scan = ds.scan(columns=cols, where=where)
                table, secs = timed(scan.to_table)
                rep = scan.report
                rows_out.append((name, f"pqindex · {label}", table.num_rows,
                                 f"{rep.pages_read:,}/{rep.pages_total:,}", len(ep.requests),
                                 ep.waves, ep.body_bytes, secs))
        t = Table(title="What each query cost at the S3 endpoint (open + plan + read)")
        for h in ("query", "reader · data", "rows", "pages read/total", "requests", "round trips",
                  "bytes", "time"):
            t.add_column(h, justify="right" if h not in ("query", "reader · data") else "left")
        for name, who, n, pages, reqs, waves, nbytes, secs in rows_out:
            t.add_row(name, who, f"{n:,}", pages, f"{reqs:,}", f"{waves:,}",
                      f"{nbytes / 2**20:,.2f} MiB", f"{secs * 1000:,.0f} ms")
        console = Console(width=max(100, shutil.get_terminal_size().columns))
        console.print(t)
        console.print(DATA_NOTE)
    finally:
        ep.stop()


if __name__ == "__main__":
    main()
