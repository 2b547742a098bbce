"""What Spark itself costs a query that returns a selective filter's rows: the floor
below which no data source can bring the query.

    .venv/bin/python bench/spark_floor.py --lake DIR [--rounds 21]

On the pipeline's TPC-H ``lineitem`` lake (as bench/spark_native.py reads it), one
``local[*]`` session runs TPC-H Q14's filter (its three columns) to Spark's ``noop``
sink with:

* *pqindex*: ``pqindex.spark.table`` on the lake (the JVM shim), the filter in SQL;
* *native*: ``spark.read.parquet(lake)`` and the filter, in SQL;
* *cached*: the same rows, already in Spark's in-memory columnar cache;
* *local relation*: the same rows as a DataFrame made from Arrow on the driver
  (``createDataFrame``: a LocalRelation);
* *no scan*: the query on ``spark.read.parquet(lake).where(false)``, emptied by the
  optimizer (no scan, no task).

The cached and local relations read nothing: what they cost is Spark moving the rows
through a job. One warm-up each, then ``--rounds`` rounds in rotating order; medians.
Prints a Markdown table (docs/benchmarks.md takes it by hand).
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pqindex.spark
from spark_pipeline import loadavg, spark_session

WHERE = "l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'"
COLS = "l_partkey, l_extendedprice, l_discount"


def readers(spark: Any, lake: Path) -> dict[str, Callable[[], Any]]:
    spark.read.parquet(str(lake)).createOrReplaceTempView("floor_native")

    def native() -> Any:
        return spark.sql(f"SELECT {COLS} FROM floor_native WHERE {WHERE}")

    rows = native().toArrow()
    spark.createDataFrame(rows.to_pandas()).createOrReplaceTempView("floor_local")
    # A plan of its own: Spark's cache would otherwise answer the native query too.
    cached = native().selectExpr("*", "1 AS one").cache()
    cached.count()
    cached.createOrReplaceTempView("floor_cached")
    spark.read.parquet(str(lake)).where("false").createOrReplaceTempView("floor_empty")
    pqindex.spark.table(spark, "floor_pqindex", str(lake))
    return {
        "pqindex": lambda: spark.sql(f"SELECT {COLS} FROM floor_pqindex WHERE {WHERE}"),
        "native": native,
        "cached": lambda: spark.sql(f"SELECT {COLS} FROM floor_cached"),
        "local relation": lambda: spark.sql(f"SELECT {COLS} FROM floor_local"),
        "no scan": lambda: spark.sql(f"SELECT {COLS} FROM floor_empty"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lake", type=Path, required=True,
                    help="the pipeline's TPC-H lineitem lake (bench/spark_native.py's)")
    ap.add_argument("--rounds", type=int, default=21)
    args = ap.parse_args()
    load_start, started = loadavg(), dt.datetime.now(dt.UTC)
    spark = spark_session()
    queries = readers(spark, args.lake)
    names = list(queries)
    times: dict[str, list[float]] = {k: [] for k in names}
    for k in names:  # warm-up
        queries[k]().write.format("noop").mode("overwrite").save()
    for r in range(args.rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            q = queries[k]()
            t0 = time.perf_counter()
            q.write.format("noop").mode("overwrite").save()
            times[k].append(time.perf_counter() - t0)
    native = statistics.median(times["native"])
    print(f"TPC-H Q14 filter ({COLS}), {started:%Y-%m-%d %H:%M} UTC, {args.rounds} rounds; "
          f"load {load_start} at the start, {loadavg()} at the end.\n")
    print("| reader | median ms | min ms | / native |")
    print("| --- | ---: | ---: | ---: |")
    for k in names:
        m = statistics.median(times[k])
        print(f"| {k} | {m * 1000:.1f} | {min(times[k]) * 1000:.1f} | {m / native:.2f}× |")
    spark.stop()


if __name__ == "__main__":
    main()
