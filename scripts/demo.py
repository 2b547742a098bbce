"""The main job: TPC-H lineitem → the PySpark pipeline → queries with and without indexes.

1. generate TPC-H ``lineitem`` with tpchgen-cli (scale factor 1 by default);
2. build it with pqindex's PySpark pipeline on local Spark: sorted by
   ``l_shipdate``, a Bloom filter on ``l_orderkey``, a distinct-value index on
   ``l_shipmode``; and a plain copy written by Spark itself;
3. run TPC-H Q6's and Q14's filters, an order-key lookup and an absent ship mode
   through pqindex and through Spark, on the indexed dataset and on the plain
   copy, and print rows, pages and bytes read, and time.

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
    args = ap.parse_args()
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
            indexes={"distinct": ["l_shipmode"]},
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
    rows_out = []
    for name, where, cols in QUERIES:
        for label, path in (("indexed", indexed), ("plain", plain)):
            ds = pqindex.dataset(str(path))
            scan = ds.scan(columns=cols, where=where)
            table, secs = timed(scan.to_table)
            rep = scan.report
            rows_out.append((name, f"pqindex · {label}", table.num_rows,
                             f"{rep.pages_read:,}/{rep.pages_total:,}", rep.bytes_read, secs))
        for label, path in (("indexed", indexed), ("plain", plain)):
            before = jvm_rchar(spark)
            if label == "indexed":
                sdf = pqindex.spark.read(spark, str(path), where=where, columns=cols)
            else:
                sdf = spark.read.parquet(str(path)).where(where).select(*cols)
            n, secs = timed(sdf.count)
            rows_out.append((name, f"Spark · {label}", n, "n/a", jvm_rchar(spark) - before, secs))

    t = Table(title="What each query read (bytes: pqindex's counter; Spark: its JVM's read bytes)")
    for h in ("query", "reader · data", "rows", "pages read/total", "bytes read", "time"):
        t.add_column(h, justify="right" if h not in ("query", "reader · data") else "left")
    for name, who, n, pages, nbytes, secs in rows_out:
        t.add_row(name, who, f"{n:,}", pages, f"{nbytes / 2**20:,.2f} MiB", f"{secs * 1000:,.0f} ms")
    Console(width=max(100, shutil.get_terminal_size().columns)).print(t)
    spark.stop()


if __name__ == "__main__":
    main()
