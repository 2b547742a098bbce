"""Spark's own idiom on pqindex's datasets: DataFrame filters and SQL, pushed down.

    .venv/bin/python bench/spark_native.py [--scale 1] [--runs 3] [--lake DIR --copy DIR] [--write]

On TPC-H ``lineitem`` (tpchgen-cli, into ``data/tpch-sf<scale>`` when missing),
written once by pqindex's pipeline as scripts/demo.py writes it (sorted by
``l_shipdate``, Parquet Bloom filters on ``l_orderkey``, a distinct index on
``l_shipmode``, a page-scope embedded Bloom index on ``l_orderkey``) and once by
Spark itself (``df.write.parquet``), one ``local[*]`` session runs TPC-H Q6's and
Q14's filters, an order-key lookup and an absent ship mode, each as a DataFrame
filter (``df.where(col(...) ...).select(...)``, decimal literals as ``Decimal``: a float
literal makes Spark compare the decimal column cast to double, which it cannot push)
and as SQL over a view, with:

* *pqindex*: ``pqindex.spark.frame(spark, lake)`` / ``pqindex.spark.table`` as a
  classic session gets them: the JVM read shim (``pqindex.spark.shim``): Spark pushes
  the filters and the required columns, pqindex plans on the driver (a Py4J call
  back into Python), Spark's own Parquet reader reads the kept row groups (only
  their kept pages when the planner's implied filter on a sorted column applies); a
  plan keeping at most ``shim.DRIVER_READ_BYTES`` of pages is read by pqindex on the
  driver instead (a LocalScan up to ``shim.LOCAL_ROWS`` rows, else Arrow streams
  read as columns in the tasks);
* *pqindex, tasks only*: the same with ``driver_read_bytes=-1`` (every read in
  Spark's tasks: byte ranges);
* *pqindex, Python source*: the same with ``shim=False``: the ``"pqindex"`` Python
  data source (guarded), as Spark Connect gets it; no column pruning;
* *native*: ``spark.read.parquet(lake)``, the same files;
* *native, own copy*: ``spark.read.parquet`` of Spark's copy;
* *empty source*: a Python data source of the same schema that reads nothing (its
  ``pushFilters`` gives every filter back, its one task yields no row): what any
  Python data source pays per query before reading a byte;
* *no scan*: the query on ``spark.read.parquet(lake).where(lit(False))``, which the
  optimizer turns into an empty relation: what any Spark query to the sink pays.

Every query is run to Spark's ``noop`` sink (the selected columns materialized):
one warm-up per reader, then ``--runs`` rounds in rotating order; medians of
wall time and of bytes read by the whole process tree (driver, JVM, Python
workers: growth of ``rchar`` in /proc/<pid>/io). Rows are checked equal across
readers. Prints a Markdown section; ``--write`` also puts it between
``<!-- spark-native:start -->`` and ``<!-- spark-native:end -->`` of
docs/benchmarks.md (which holds hand-written analysis: off by default).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from docsection import replace_section
from spark_pipeline import (
    DOC,
    ROOT,
    code_version,
    generate,
    loadavg,
    log,
    machine,
    spark_session,
    tree_rchar,
)

START, END = "<!-- spark-native:start -->", "<!-- spark-native:end -->"
READERS = ("pqindex", "pqindex, tasks only", "pqindex, Python source", "native", "native, own copy", "empty source",
           "no scan")
# The analysis of the measured numbers is written by hand in docs/benchmarks.md.
WHY = ("Causes and analysis: see the hand-written notes of issue 42 in docs/benchmarks.md.")
SELECTIVE = ("TPC-H Q14 filter", "order-key lookup", "absent ship mode")


def queries(scale: float) -> list[tuple[str, str, list[str], Callable[[], Any]]]:
    """(name, SQL WHERE, columns, the same filter as a Column) per query; the order key
    inside this scale's key range, as scripts/demo.py picks it."""
    from pyspark.sql import functions as F

    key = max(32, round(4_000_000 * scale / 32) * 32)
    c = F.col
    return [
        ("TPC-H Q6 filter",
         "l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
         "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
         ["l_extendedprice", "l_discount"],
         lambda: ((c("l_shipdate") >= dt.date(1994, 1, 1)) & (c("l_shipdate") < dt.date(1995, 1, 1))
                  & c("l_discount").between(Decimal("0.05"), Decimal("0.07"))
                  & (c("l_quantity") < 24))),
        ("TPC-H Q14 filter",
         "l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'",
         ["l_partkey", "l_extendedprice", "l_discount"],
         lambda: (c("l_shipdate") >= dt.date(1995, 9, 1)) & (c("l_shipdate") < dt.date(1995, 10, 1))),
        ("order-key lookup", f"l_orderkey = {key}", ["l_orderkey", "l_partkey", "l_quantity"],
         lambda: c("l_orderkey") == key),
        ("absent ship mode", "l_shipmode = 'BLIMP'", ["l_orderkey", "l_quantity"],
         lambda: c("l_shipmode") == "BLIMP"),
    ]


def build(spark: Any, scale: float, out: Path) -> tuple[Path, Path]:
    """The pipeline's lake and Spark's copy of lineitem (written when missing)."""
    import pqindex.spark

    src = generate(scale)
    lake = out / f"spark-native-sf{scale:g}-pqindex"
    copy = out / f"spark-native-sf{scale:g}-spark"
    df = spark.read.parquet(str(src))
    if not (lake / "_SUCCESS").exists():
        t0 = time.perf_counter()
        pqindex.spark.write(df, str(lake), sort_by=["l_shipdate"], bloom=["l_orderkey"],
                            indexes={"distinct": ["l_shipmode"], "bloom": ["l_orderkey"]},
                            bloom_scope="page", mode="overwrite")
        log(f"pipeline wrote {lake} in {time.perf_counter() - t0:.1f} s")
    if not (copy / "_SUCCESS").exists():
        df.write.mode("overwrite").parquet(str(copy))
    return lake, copy


def empty_source() -> Any:
    """The *empty source* reader's data source class (its schema from option ``schema``)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader

    class EmptyReader(DataSourceReader):
        def __init__(self, schema: Any) -> None:
            self.schema = schema

        def pushFilters(self, filters: list[Any]) -> Any:
            return list(filters)

        def read(self, partition: Any) -> Any:
            return iter(())

    class EmptySource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_empty"

        def schema(self) -> Any:
            import json

            from pyspark.sql.types import StructType

            return StructType.fromJson(json.loads(self.options["schema"]))

        def reader(self, schema: Any) -> Any:
            return EmptyReader(schema)

    return EmptySource


def frame(spark: Any, reader: str, lake: Path, copy: Path,
          columns: list[str] | None = None) -> Any:
    import pqindex.spark

    if reader == "empty source":
        spark.dataSource.register(empty_source())
        schema = spark.read.parquet(str(lake)).schema.json()
        df = spark.read.format("bench_empty").option("schema", schema).load()
        df.createOrReplaceTempView("li_empty_source")
        return df
    if reader == "pqindex":
        return pqindex.spark.table(spark, "li_pqindex", str(lake), shim=True)
    if reader == "pqindex, tasks only":
        return pqindex.spark.table(spark, "li_pqindex_tasks_only", str(lake), shim=True,
                                   driver_read_bytes=-1)
    if reader == "pqindex, Python source":
        return pqindex.spark.table(spark, "li_pqindex_Python_source", str(lake), shim=False)
    if reader == "no scan":
        from pyspark.sql import functions as F

        df = spark.read.parquet(str(lake)).where(F.lit(False))  # Spark drops the scan
        df.createOrReplaceTempView("li_no_scan")
        return df
    path = copy if reader == "native, own copy" else lake
    df = spark.read.parquet(str(path))
    df.createOrReplaceTempView("li_" + reader.replace(",", "").replace(" ", "_"))
    return df


def run_one(spark: Any, df: Any, view: str, form: str, where: str, cols: list[str],
            column: Callable[[], Any], every: bool) -> Any:
    picked = "*" if every else ", ".join(cols)
    if form == "SQL":
        return spark.sql(f"SELECT {picked} FROM {view} WHERE {where}")
    out = df.where(column())
    return out if every else out.select(*cols)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "data")
    ap.add_argument("--lake", type=Path, help="the pipeline's lake of this scale, already written")
    ap.add_argument("--copy", type=Path, help="Spark's copy of this scale, already written")
    ap.add_argument("--write", action="store_true",
                    help="write the section into docs/benchmarks.md (it replaces hand-written text)")
    args = ap.parse_args()
    t_start, load_start = time.perf_counter(), loadavg()
    spark = spark_session()
    if args.lake and args.copy:
        lake, copy = args.lake, args.copy
    else:
        lake, copy = build(spark, args.scale, args.out)
    frames = {r: frame(spark, r, lake, copy) for r in READERS}
    views = {r: "li_" + r.replace(",", "").replace(" ", "_") for r in READERS}
    results = []
    for name, where, cols, column in queries(args.scale):
        tasks: dict[str, int] = {}
        for form in ("DataFrame", "SQL"):
            def go(reader: str, where: str = where, cols: list[str] = cols,
                   column: Callable[[], Any] = column, form: str = form) -> dict[str, float]:
                q = run_one(spark, frames[reader], views[reader], form, where, cols, column,
                            every=False)
                b0, t0 = tree_rchar(os.getpid()), time.perf_counter()
                q.write.format("noop").mode("overwrite").save()
                return {"s": time.perf_counter() - t0, "bytes": tree_rchar(os.getpid()) - b0}

            rows = {}
            for r in READERS:  # warm-up, and the rows every reader must agree on
                q = run_one(spark, frames[r], views[r], form, where, cols, column,
                            every=r == "pqindex, Python source")
                rows[r] = sorted(map(tuple, q.select(*cols).collect()))
                if r in ("pqindex", "pqindex, Python source") and form == "DataFrame":
                    tasks[r] = q.rdd.getNumPartitions()
                    log(f"{name}: {r} {tasks[r]} task(s)")
                go(r)
            same = all(v == rows["native"] for r, v in rows.items()
                       if r not in ("empty source", "no scan"))
            meas: dict[str, list[dict[str, float]]] = {r: [] for r in READERS}
            for i in range(args.runs):
                order = READERS[i % len(READERS):] + READERS[:i % len(READERS)]
                for r in order:
                    meas[r].append(go(r))
            res = {r: {"ms": statistics.median(m["s"] for m in meas[r]) * 1000,
                       "mib": statistics.median(m["bytes"] for m in meas[r]) / 2**20}
                   for r in READERS}
            results.append({"query": name, "form": form, "rows": len(rows["native"]),
                            "same": same, "tasks": f"{tasks.get('pqindex', 0)} / "
                            f"{tasks.get('pqindex, Python source', 0)}",
                            "res": res, "where": where, "cols": cols})
            log(f"{name} {form}: " + ", ".join(f"{r} {v['ms']:.0f} ms" for r, v in res.items()))
    info = machine(spark)
    spark.stop()
    section = render(args, results, info, lake, time.perf_counter() - t_start,
                     load_start, loadavg())
    if args.write:
        replace_section(DOC, START, END, section)
    print(section)


def render(args: Any, results: list[dict[str, Any]], info: dict[str, str], lake: Path,
           seconds: float, load_start: str, load_end: str) -> str:
    files = sorted(lake.rglob("*.parquet"))
    short = {"pqindex": "pqindex", "pqindex, tasks only": "tasks only",
             "pqindex, Python source": "Python source",
             "native": "native", "native, own copy": "own copy", "empty source": "empty source",
             "no scan": "no scan"}
    ratios = ("pqindex", "pqindex, tasks only", "pqindex, Python source", "empty source",
              "no scan")
    lines = [
        START,
        "## Spark's own filters and SQL on pqindex's datasets (bench/spark_native.py)",
        "",
        f"TPC-H `lineitem` sf {args.scale:g}, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC. "
        f"**Load average {load_start} at the start, {load_end} at the end, on "
        f"{info['cpu']}**: ratios between readers measured in the same rounds are the "
        "figures to read.",
        "",
        "| query | form | rows | same rows | tasks (pqindex / Python source) | "
        + " | ".join(f"{short[r]} ms" for r in READERS) + " | "
        + " | ".join(f"{short[r]} / native" for r in ratios) + " | "
        + " | ".join(f"{short[r]} MiB" for r in READERS) + " |",
        "| --- | --- | ---: | --- | ---: | " + " | ".join("---:" for _ in READERS) + " | "
        + " | ".join("---:" for _ in ratios) + " | " + " | ".join("---:" for _ in READERS)
        + " |",
    ]
    for r in results:
        res = r["res"]
        lines.append(
            f"| {r['query']} | {r['form']} | {r['rows']:,} | {'yes' if r['same'] else 'NO'} | "
            f"{r['tasks']} | "
            + " | ".join(f"{res[x]['ms']:,.0f}" for x in READERS) + " | "
            + " | ".join(f"{res[x]['ms'] / res['native']['ms']:.2f}×" for x in ratios) + " | "
            + " | ".join(f"{res[x]['mib']:,.2f}" for x in READERS) + " |")
    lines.append("")
    verdicts = []
    for r in results:
        target = (0.5 if r["query"] in SELECTIVE
                  else 1.0 if r["query"] == "TPC-H Q6 filter" else None)
        if target is None:
            continue
        ratio = r["res"]["pqindex"]["ms"] / r["res"]["native"]["ms"]
        verdicts.append(f"{r['query']} ({r['form']}) {ratio:.2f}× "
                        f"({'met' if ratio <= target else 'missed'}) vs ≤ {target:.1f}×")
    lines.append("Targets (pqindex / native on the same files): " + "; ".join(verdicts) + ".")
    lines.append("")
    lines.append(WHY)
    lines.append("")
    lines.append(
        f"Method: `bench/spark_native.py --scale {args.scale:g} --runs {args.runs}` "
        f"({seconds / 60:.1f} min; {info['versions']}; one `local[*]` session; pqindex code "
        f"{code_version(ROOT / 'src' / 'pqindex')}). Data: the pipeline's lake as "
        f"scripts/demo.py writes it ({len(files)} files, "
        f"{sum(p.stat().st_size for p in files) / 2**20:.1f} MiB) and Spark's own copy. "
        "*pqindex*: `pqindex.spark.table(spark, name, lake)` on a classic session, the JVM "
        "read shim (Spark's Parquet reader on the row groups pqindex keeps); *Python "
        "source*: the same with `shim=False`, every column of the matching rows handed "
        "to Spark; *native*: `spark.read.parquet` of the same files; *own copy*: of "
        "Spark's copy; *empty source*: a Python data source of the same schema that reads "
        "nothing; *no scan*: the query on `spark.read.parquet(lake).where(lit(False))`, "
        "which Spark's optimizer turns into an empty relation (no scan, no task: the floor "
        "of any Spark query to the `noop` sink). Every query run to the `noop` sink; bytes: growth of `rchar` over the "
        f"driver, the JVM and its Python workers. One warm-up, then {args.runs} round(s) "
        "in rotating order; medians.")
    lines.append("")
    lines.append("Predicates: " + "; ".join(f"{r['query']}: `{r['where']}` → "
                                            f"`{', '.join(r['cols'])}`"
                                            for r in results if r["form"] == "SQL") + ".")
    lines.append(END)
    return "\n".join(lines)


if __name__ == "__main__":
    main()
