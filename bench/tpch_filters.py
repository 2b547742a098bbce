"""TPC-H lineitem's WHERE clauses into Arrow: pqindex against DuckDB, polars and
DataFusion, on three copies of the same rows (issue 43).

Copies (built once under ``--data``):

* ``generator``: the file ``tpchgen-cli parquet`` writes (one file, decimals as
  INT64, dates as INT32, strings as string_view, page index on, order-key order);
* ``spark``: Spark's own write of it (local Spark, parquet-java, snappy);
* ``pqindex``: the pqindex PySpark pipeline's output as ``scripts/demo.py`` builds
  it (sorted by ``l_shipdate``, Bloom filters on ``l_orderkey``, a distinct-value
  index on ``l_shipmode``).

Each query is the part of a TPC-H query's WHERE clause on ``lineitem``, with the
lineitem columns the query needs (Q5 has none: a plain read). Every reader's rows
are checked equal to DuckDB's before timing. Per copy and query, rounds of every
reader interleaved (order reversed every other round), each cold (a fresh dataset,
connection, LazyFrame or context) then warm (one kept); medians. Bytes: pqindex's
``report.bytes_read`` (cold); the peers' ``rchar`` of ``/proc/self/io`` over one
cold run (page-cache reads included; DataFusion and DuckDB read through it too).
A query pqindex refuses (a column-to-column comparison before the expression work
of issue 43 lands) is reported as refused, with its message.

    python bench/tpch_filters.py --scale 1 --rounds 5
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "scripts"))

from docsection import datafusion_context, provenance, replace_section  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- tpch-filters:start -->", "<!-- tpch-filters:end -->"
READERS = ["pqindex", "duckdb", "polars", "datafusion"]
PEERS = READERS[1:]
Q19_BRANCH = ("l_quantity >= {lo} AND l_quantity <= {hi} AND l_shipmode IN ('AIR', 'AIR REG') "
              "AND l_shipinstruct = 'DELIVER IN PERSON'")


@dataclass(frozen=True)
class Query:
    name: str
    where: str | None
    columns: tuple[str, ...]


QUERIES = [
    Query("Q1", "l_shipdate <= DATE '1998-09-02'",
          ("l_returnflag", "l_linestatus", "l_quantity", "l_extendedprice", "l_discount",
           "l_tax")),
    Query("Q3", "l_shipdate > DATE '1995-03-15'",
          ("l_orderkey", "l_extendedprice", "l_discount")),
    Query("Q4", "l_commitdate < l_receiptdate", ("l_orderkey",)),
    Query("Q5", None, ("l_orderkey", "l_suppkey", "l_extendedprice", "l_discount")),
    Query("Q6", "l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
                "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
          ("l_extendedprice", "l_discount")),
    Query("Q7", "l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'",
          ("l_orderkey", "l_suppkey", "l_shipdate", "l_extendedprice", "l_discount")),
    Query("Q10", "l_returnflag = 'R'", ("l_orderkey", "l_extendedprice", "l_discount")),
    Query("Q12", "l_shipmode IN ('MAIL', 'SHIP') AND l_commitdate < l_receiptdate "
                 "AND l_shipdate < l_commitdate AND l_receiptdate >= DATE '1994-01-01' "
                 "AND l_receiptdate < DATE '1995-01-01'", ("l_orderkey", "l_shipmode")),
    Query("Q14", "l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'",
          ("l_partkey", "l_extendedprice", "l_discount")),
    Query("Q15", "l_shipdate >= DATE '1996-01-01' AND l_shipdate < DATE '1996-04-01'",
          ("l_suppkey", "l_extendedprice", "l_discount")),
    Query("Q19", " OR ".join(f"({Q19_BRANCH.format(lo=lo, hi=lo + 10)})" for lo in (1, 10, 20)),
          ("l_partkey", "l_quantity", "l_extendedprice", "l_discount")),
    Query("Q20", "l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'",
          ("l_partkey", "l_suppkey", "l_quantity")),
]


# ------------------------------------------------------------------ the copies


def build_copies(scale: float, data: Path, which: list[str]) -> dict[str, Path]:
    """The three copies, each built once (the Spark ones with a local session)."""
    from demo import generate

    data.mkdir(parents=True, exist_ok=True)
    gen = generate(scale, data)
    out = {"generator": gen,
           "spark": data / f"lineitem-sf{scale:g}-spark",
           "pqindex": data / f"lineitem-sf{scale:g}-pqindex"}
    missing = [c for c in ("spark", "pqindex") if c in which and not out[c].exists()]
    if missing:
        from demo import spark_session

        import pqindex.spark

        spark = spark_session("local[*]")
        df = spark.read.parquet(str(gen))
        if "spark" in missing:
            df.write.mode("overwrite").parquet(str(out["spark"]))
        if "pqindex" in missing:
            pqindex.spark.write(df, str(out["pqindex"]), sort_by=["l_shipdate"],
                                bloom=["l_orderkey"],
                                indexes={"distinct": ["l_shipmode"], "bloom": ["l_orderkey"]},
                                bloom_scope="page", mode="overwrite")
        spark.stop()
    return {c: out[c] for c in which}


def parquet_glob(path: Path) -> str:
    return str(path) if path.is_file() else str(path / "*.parquet")


# ------------------------------------------------------------------ readers


def _sql(q: Query, source: str) -> str:
    where = f" WHERE {q.where}" if q.where else ""
    return f"SELECT {', '.join(q.columns)} FROM {source}{where}"


def pqindex_reader(path: Path) -> tuple[Callable[[], Any], Callable[[Any, Query], pa.Table]]:
    import pqindex

    def run(ds: Any, q: Query) -> pa.Table:
        scan = ds.scan(columns=list(q.columns), where=q.where)
        t = scan.to_table()
        run.last_report = scan.report  # type: ignore[attr-defined]
        return t

    return (lambda: pqindex.dataset(str(path))), run


def duckdb_reader(path: Path) -> tuple[Callable[[], Any], Callable[[Any, Query], pa.Table]]:
    import duckdb

    def opener() -> Any:
        return duckdb.connect()

    def run(con: Any, q: Query) -> pa.Table:
        t: pa.Table = con.sql(_sql(q, f"read_parquet('{parquet_glob(path)}')")).to_arrow_table()
        return t

    return opener, run


def polars_reader(path: Path) -> tuple[Callable[[], Any], Callable[[Any, Query], pa.Table]]:
    import polars as pl

    def opener() -> Any:
        return pl.SQLContext(t=pl.scan_parquet(parquet_glob(path)))

    def run(ctx: Any, q: Query) -> pa.Table:
        t: pa.Table = ctx.execute(_sql(q, "t")).collect().to_arrow()
        return t

    return opener, run


def datafusion_reader(path: Path) -> tuple[Callable[[], Any], Callable[[Any, Query], pa.Table]]:
    source = str(path) if path.is_file() else str(path) + "/"

    def run(ctx: Any, q: Query) -> pa.Table:
        t: pa.Table = ctx.sql(_sql(q, "t")).to_arrow_table()
        return t

    return (lambda: datafusion_context(source)), run


MAKERS = {"pqindex": pqindex_reader, "duckdb": duckdb_reader, "polars": polars_reader,
          "datafusion": datafusion_reader}


def normalized(t: pa.Table, columns: tuple[str, ...]) -> pa.Table:
    """Rows comparable across readers: views as strings, dates as dates, sorted."""
    t = t.select(list(columns))
    fields = []
    for f in t.schema:
        typ = f.type
        if pa.types.is_string_view(typ) or pa.types.is_large_string(typ):
            typ = pa.string()
        elif pa.types.is_binary_view(typ) or pa.types.is_large_binary(typ):
            typ = pa.binary()
        elif pa.types.is_dictionary(typ):
            typ = typ.value_type
        fields.append(pa.field(f.name, typ))
    t = t.cast(pa.schema(fields))
    return t.sort_by([(c, "ascending") for c in columns])


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def rchar() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return 0


# ------------------------------------------------------------------ the rounds


@dataclass
class Result:
    rows: int | None = None
    refused: str | None = None
    cold_ms: float = math.nan
    warm_ms: float = math.nan
    # process CPU (user + system, every thread: the readers all run in this process)
    warm_cpu_ms: float = math.nan
    bytes: int | None = None
    plan_ms: float | None = None


def run_copy(path: Path, queries: list[Query], rounds: int) -> dict[tuple[str, str], Result]:
    made = {name: MAKERS[name](path) for name in READERS}
    warm = {name: opener() for name, (opener, _) in made.items()}
    out: dict[tuple[str, str], Result] = {}
    for q in queries:
        ref = normalized(made["duckdb"][1](warm["duckdb"], q), q.columns)
        for name in READERS:
            res = out[(q.name, name)] = Result()
            try:
                got = made[name][1](warm[name], q)
            except Exception as e:  # a refusal is a result to report
                res.refused = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
                continue
            if not normalized(got, q.columns).equals(ref.cast(normalized(got, q.columns).schema)):
                raise AssertionError(f"{path.name} {q.name}: {name}'s rows differ from DuckDB's")
            res.rows = got.num_rows
        live = [n for n in READERS if out[(q.name, n)].refused is None]
        cold: dict[str, list[float]] = {n: [] for n in live}
        hot: dict[str, list[float]] = {n: [] for n in live}
        hot_cpu: dict[str, list[float]] = {n: [] for n in live}
        for r in range(rounds):
            for name in live if r % 2 == 0 else live[::-1]:
                opener, run = made[name]
                before = rchar()
                t0 = time.perf_counter()
                run(opener(), q)
                t1 = time.perf_counter()
                read = rchar() - before
                c1 = cpu_seconds()
                run(warm[name], q)
                t2 = time.perf_counter()
                hot_cpu[name].append(cpu_seconds() - c1)
                cold[name].append(t1 - t0)
                hot[name].append(t2 - t1)
                res = out[(q.name, name)]
                if name == "pqindex":
                    rep = run.last_report  # type: ignore[attr-defined]
                    res.plan_ms = rep.plan_seconds * 1000
                    if r == 0:
                        # the cold run's report: pqindex's own count of what it read
                        res.bytes = rep.bytes_read
                elif r == 0:
                    res.bytes = read
        for name in live:
            out[(q.name, name)].cold_ms = statistics.median(cold[name]) * 1000
            out[(q.name, name)].warm_ms = statistics.median(hot[name]) * 1000
            out[(q.name, name)].warm_cpu_ms = statistics.median(hot_cpu[name]) * 1000
    return out


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def section(results: dict[str, dict[tuple[str, str], Result]], queries: list[Query],
            command: str, seconds: float, load: tuple[float, float]) -> str:
    lines = [START, "## TPC-H lineitem filters (bench/tpch_filters.py)", "",
             provenance(command, seconds, load), "",
             "Times are medians (ms); ratio = pqindex / the fastest peer in that mode. "
             "Bytes: pqindex's own count, the peers' `rchar` (MB, cold). plan: pqindex's "
             "`plan_seconds` of the warm run (ms). Rows are checked equal to DuckDB's.", ""]
    for copy, res in results.items():
        lines += [f"### {copy}", "",
                  "| query | rows | mode | " + " | ".join(READERS)
                  + " | ratio | plan ms | MB pqindex / duckdb / polars / datafusion |",
                  "| --- | ---: | --- | " + " | ".join("---:" for _ in READERS)
                  + " | ---: | ---: | --- |"]
        ratios: dict[str, list[float]] = {"cold": [], "warm": []}
        for q in queries:
            ours = res[(q.name, "pqindex")]
            if ours.refused:
                lines.append(f"| {q.name} | — | — | refused: {ours.refused} | | | | | | |")
                continue
            for mode in ("cold", "warm"):
                ms = {n: getattr(res[(q.name, n)], f"{mode}_ms") for n in READERS}
                peers = [ms[n] for n in PEERS if math.isfinite(ms[n])]
                ratio = ms["pqindex"] / min(peers) if peers else math.nan
                ratios[mode].append(ratio)
                mb = " / ".join("—" if res[(q.name, n)].bytes is None
                                else f"{res[(q.name, n)].bytes / 1e6:,.1f}" for n in READERS)
                plan = f"{ours.plan_ms:,.1f}" if ours.plan_ms is not None else "—"
                lines.append(
                    f"| {q.name} | {ours.rows:,} | {mode} | "
                    + " | ".join(f"{ms[n]:,.1f}" for n in READERS)
                    + f" | {ratio:.2f}× | {plan} | {mb} |")
        lines += ["", f"Geometric mean of the ratios on {copy}: cold "
                  f"{geomean(ratios['cold']):.2f}×, warm {geomean(ratios['warm']):.2f}×.", ""]
        lines += cpu_table(res, queries, copy)
    lines.append(END)
    return "\n".join(lines)


def cpu_table(res: dict[tuple[str, str], Result], queries: list[Query], copy: str
              ) -> list[str]:
    """Warm runs' process CPU (every reader runs in this process, its threads
    included): on a shared machine a steadier measure of the work than wall time."""
    lines = [f"Warm CPU ms on {copy} (user + system, all threads; ratio = pqindex / the "
             "least CPU of a peer):", "",
             "| query | " + " | ".join(READERS) + " | CPU ratio |",
             "| --- | " + " | ".join("---:" for _ in READERS) + " | ---: |"]
    ratios = []
    for q in queries:
        if res[(q.name, "pqindex")].refused:
            continue
        ms = {n: res[(q.name, n)].warm_cpu_ms for n in READERS}
        peers = [ms[n] for n in PEERS if math.isfinite(ms[n])]
        ratio = ms["pqindex"] / min(peers) if peers else math.nan
        ratios.append(ratio)
        lines.append(f"| {q.name} | " + " | ".join(f"{ms[n]:,.1f}" for n in READERS)
                     + f" | {ratio:.2f}× |")
    lines += ["", f"Geometric mean of the CPU ratios on {copy}: {geomean(ratios):.2f}×.", ""]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--data", type=Path, default=ROOT / "data")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--copies", default="generator,spark,pqindex")
    ap.add_argument("--queries", default=",".join(q.name for q in QUERIES))
    ap.add_argument("--no-doc", action="store_true", help="print, don't edit docs/")
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    wanted = args.queries.split(",")
    queries = [q for q in QUERIES if q.name in wanted]
    copies = build_copies(args.scale, args.data, args.copies.split(","))
    results = {name: run_copy(path, queries, args.rounds) for name, path in copies.items()}
    text = section(results, queries, "python " + " ".join(sys.argv),
                   time.perf_counter() - t0, (load0, os.getloadavg()[0]))
    print(text)
    if not args.no_doc:
        replace_section(DOC, START, END, text)


if __name__ == "__main__":
    main()
