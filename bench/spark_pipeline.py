"""Spark's own sorted write against the pqindex PySpark pipeline, and what queries read.

    .venv/bin/python bench/spark_pipeline.py [--scale 1] [--runs 3] [--partitions N] [--no-write]
    .venv/bin/python bench/spark_pipeline.py --engines [--scale 1] [--runs 3]

On TPC-H ``lineitem`` (generated with tpchgen-cli into ``data/tpch-sf<scale>`` when
missing), with ONE local Spark session (``local[*]``, no UI, Python workers on this
interpreter), in the same run:

(a) Spark native: ``df.repartitionByRange(n, "l_shipdate").sortWithinPartitions("l_shipdate")
    .write.mode("overwrite").parquet(dir_a)``;
(b) ``pqindex.spark.write(df, dir_b, sort_by=["l_shipdate"], bloom=["l_orderkey"],
    indexes={"distinct": ["l_shipmode"]}, mode="overwrite", num_partitions=n)``.

``n`` is what ``pqindex.spark.write`` would choose by itself (unless ``--partitions``),
and both writes use it. One warm-up of each, then ``--runs`` interleaved rounds (the
order alternates); medians, and the throughput ratio time(a) / time(b) (target >= 0.7).

Then the queries of scripts/demo.py, on (a) with ``spark.read.parquet(dir_a).where(w)
.select(cols)`` and on (b) with ``pqindex.spark.read(spark, dir_b, where=w, columns=cols)``,
each executed with Spark's ``noop`` sink (every selected column is materialized): one
warm-up each, then ``--runs`` interleaved rounds; bytes = growth of the Spark JVM's
``rchar`` (/proc/<pid>/io), plus, for (b), the growth of this (driver) process's
``rchar`` while pqindex plans (footers and indexes it reads in Python).

Background load: for every timed run, the CPU time the whole machine used minus the
CPU time of this process tree (driver, JVM, Python workers), per second of wall time.

pqindex is imported (here and in Spark's Python workers, through PYTHONPATH) from a
copy of src/pqindex taken at the start. Writes the section between
``<!-- spark:start -->`` and ``<!-- spark:end -->`` of docs/benchmarks.md.

``--engines``: the same four queries on the pipeline's output (written once when
missing, as scripts/demo.py writes it: a distinct index on ``l_shipmode`` and an
embedded page-scope Bloom index on ``l_orderkey``; without the latter with
``--no-page-bloom``), read with ``pqindex.spark.read(...,
engine=)`` for ``native`` (Spark's reader on the files pqindex keeps), ``pqindex``
(the "pqindex" data source: tasks read only the pages the plan keeps) and ``auto``;
one warm-up each, then ``--runs`` rounds (``ENGINE_ORDERS``, GC before each run);
medians of time and of bytes read by the whole process tree (driver, JVM, Python
workers: ``rchar``). Targets: ``auto`` <= 1.0x the better of the other two on every
query; the order-key lookup with ``pqindex`` <= 0.5x ``native``. Writes
``<!-- spark-engines:start -->`` ... ``:end -->``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- spark:start -->", "<!-- spark:end -->"
TARGET_RATIO = 0.7

# as in scripts/demo.py QUERIES
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


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- code version, snapshot


def code_version(base: Path) -> str:
    def git(*a: str) -> str:
        r = subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=False)
        return r.stdout.strip()

    h = hashlib.sha256()
    for f in sorted(base.rglob("*.py")):
        h.update(str(f.relative_to(base)).encode())
        h.update(f.read_bytes())
    dirty = git("status", "--porcelain", "--", "src")
    return (f"commit {git('rev-parse', '--short', 'HEAD')}"
            f"{' + uncommitted changes in src/' if dirty else ''}, src digest {h.hexdigest()[:12]}")


def snapshot_src() -> Path:
    """Copy src/pqindex aside and import it from there (driver and Spark workers)."""
    snap = Path(tempfile.mkdtemp(prefix="pqindex-spark-bench-"))
    shutil.copytree(ROOT / "src" / "pqindex", snap / "pqindex",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(snap))
    r = subprocess.run([sys.executable, "-c", "import pqindex.spark.pipeline"],
                       env=env, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"src/pqindex snapshot does not import:\n{r.stderr}")
    sys.path.insert(0, str(snap))
    os.environ["PYTHONPATH"] = str(snap)
    return snap


# ---------------------------------------------------------------- load and I/O counters

TICK = os.sysconf("SC_CLK_TCK")


def _machine_busy() -> float:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / TICK  # minus idle and iowait


def _tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and all its descendants (reaped children included)."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
        except OSError:
            continue
        rest = s[s.rindex(")") + 2:].split()
        pid = int(d)
        parent[pid] = int(rest[1])
        cpu[pid] = sum(int(x) for x in rest[11:15]) / TICK  # utime stime cutime cstime
    total = 0.0
    for pid, c in cpu.items():
        p, seen = pid, 0
        while p and seen < 64:
            if p == root:
                total += c
                break
            p = parent.get(p, 0)
            seen += 1
    return total


class Load:
    def __init__(self) -> None:
        self.t = time.perf_counter()
        self.busy = _machine_busy()
        self.own = _tree_cpu(os.getpid())

    def others(self) -> float:
        """Mean cores used by processes outside this tree since construction."""
        wall = time.perf_counter() - self.t
        busy = _machine_busy() - self.busy
        own = _tree_cpu(os.getpid()) - self.own
        return max(0.0, (busy - own) / wall) if wall > 0 else 0.0


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def rchar(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return 0


def jvm_pid(spark: Any) -> int:
    return int(spark.sparkContext._jvm.ProcessHandle.current().pid())


# ---------------------------------------------------------------- data and Spark


def generate(scale: float) -> Path:
    target = ROOT / "data" / f"tpch-sf{scale:g}"
    path = target / "lineitem.parquet"
    if path.exists():
        log(f"reusing {path}")
        return path
    exe = shutil.which("tpchgen-cli") or str(Path(sys.executable).parent / "tpchgen-cli")
    t0 = time.perf_counter()
    subprocess.run([exe, "parquet", "-s", f"{scale:g}", "--tables", "lineitem", "-o",
                    str(target)], check=True)
    log(f"generated {path} in {time.perf_counter() - t0:.1f} s")
    return path


def spark_session() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[*]")
        .appName("pqindex-bench-spark-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def dir_facts(path: Path) -> dict[str, Any]:
    files = sorted(p for p in path.rglob("*.parquet"))
    return {"files": len(files), "bytes": sum(p.stat().st_size for p in files)}


def machine(spark: Any) -> dict[str, str]:
    import pyarrow as pa
    import pyspark

    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    java = spark.sparkContext._jvm.System.getProperty("java.version")
    return {
        "cpu": f"{os.cpu_count()} cores, {cpu}, {mem:.0f} GiB RAM",
        "os": f"{platform.system()} {platform.release()}",
        "versions": (f"Python {platform.python_version()}, PySpark {pyspark.__version__}, "
                     f"Java {java}, pyarrow {pa.__version__}"),
    }


# ---------------------------------------------------------------- measurement


def timed(fn: Callable[[], Any]) -> dict[str, Any]:
    load = Load()
    t0 = time.perf_counter()
    out = fn()
    secs = time.perf_counter() - t0
    return {"s": secs, "others": load.others(), "out": out}


def bench_writes(spark: Any, df: Any, n: int, dir_a: Path, dir_b: Path, runs: int
                 ) -> dict[str, list[dict[str, Any]]]:
    import pqindex.spark

    def native() -> Any:
        (df.repartitionByRange(n, "l_shipdate").sortWithinPartitions("l_shipdate")
         .write.mode("overwrite").parquet(str(dir_a)))

    def pipeline() -> Any:
        return pqindex.spark.write(df, str(dir_b), sort_by=["l_shipdate"], bloom=["l_orderkey"],
                                   indexes={"distinct": ["l_shipmode"]}, mode="overwrite",
                                   num_partitions=n)

    fns = {"a": native, "b": pipeline}
    res: dict[str, list[dict[str, Any]]] = {"a": [], "b": [], "warm": []}
    for k in ("a", "b"):
        r = timed(fns[k])
        log(f"write warm-up ({k}): {r['s']:.1f} s, others {r['others']:.2f} cores")
        res["warm"].append({"k": k, "s": r["s"], "others": r["others"]})
    for i in range(runs):
        for k in (("a", "b") if i % 2 == 0 else ("b", "a")):
            r = timed(fns[k])
            log(f"write round {i + 1} ({k}): {r['s']:.1f} s, others {r['others']:.2f} cores")
            entry = {"s": r["s"], "others": r["others"]}
            if k == "b":
                entry["summary"] = {x: r["out"][x] for x in
                                    ("files", "rows", "bytes", "index_bytes", "tasks")}
            res[k].append(entry)
    return res


def bench_queries(spark: Any, dir_a: Path, dir_b: Path, runs: int) -> list[dict[str, Any]]:
    import pqindex.spark

    pid = jvm_pid(spark)
    out = []
    for name, where, cols in QUERIES:
        def run_a(where: str = where, cols: list[str] = cols) -> dict[str, int]:
            j0 = rchar(pid)
            d0 = rchar()
            sdf = spark.read.parquet(str(dir_a)).where(where).select(*cols)
            d1 = rchar()
            sdf.write.format("noop").mode("overwrite").save()
            return {"jvm": rchar(pid) - j0, "driver": d1 - d0}

        def run_b(where: str = where, cols: list[str] = cols) -> dict[str, int]:
            j0 = rchar(pid)
            d0 = rchar()
            sdf = pqindex.spark.read(spark, str(dir_b), where=where, columns=cols)
            d1 = rchar()
            sdf.write.format("noop").mode("overwrite").save()
            return {"jvm": rchar(pid) - j0, "driver": d1 - d0}

        fns = {"a": run_a, "b": run_b}
        for k in ("a", "b"):
            fns[k]()  # warm-up
        meas: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
        for i in range(runs):
            for k in (("a", "b") if i % 2 == 0 else ("b", "a")):
                r = timed(fns[k])
                meas[k].append({"s": r["s"], "others": r["others"], **r["out"]})
        rows_a = spark.read.parquet(str(dir_a)).where(where).count()
        rows_b = pqindex.spark.read(spark, str(dir_b), where=where, columns=cols).count()
        if rows_a != rows_b:
            raise SystemExit(f"{name}: (a) has {rows_a} rows, (b) {rows_b}")
        ex = pqindex.spark.explain(spark, str(dir_b), where)
        q = {"name": name, "where": where, "cols": cols, "rows": rows_a, "meas": meas,
             "files_b": (ex["files_kept"], ex["files_total"]), "fallback": ex["fallback"]}
        log(f"{name}: rows {rows_a:,}; "
            + "; ".join(f"{k} {statistics.median(m['s'] for m in meas[k]) * 1e3:.0f} ms "
                        f"jvm {statistics.median(m['jvm'] for m in meas[k]) / 2**20:.2f} MiB"
                        for k in ("a", "b")))
        out.append(q)
    return out


# ---------------------------------------------------------------- engines

ENGINES = ("native", "pqindex", "auto")
E_START, E_END = "<!-- spark-engines:start -->", "<!-- spark-engines:end -->"


def tree_rchar(root: int) -> int:
    """``rchar`` of ``root`` and its live descendants (driver, JVM, Python workers)."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    s = f.read()
            except OSError:
                continue
            parent[int(d)] = int(s[s.rindex(")") + 2:].split()[1])
    total = 0
    for pid in parent:
        p, seen = pid, 0
        while p and seen < 64:
            if p == root:
                with contextlib.suppress(OSError):
                    total += rchar(pid)
                break
            p = parent.get(p, 0)
            seen += 1
    return total


# The orders of a round: every engine runs first, second and third equally often, and
# after each other engine equally often (a Williams design over 6 rounds). A plain
# rotation (N P A, P A N, A N P) ran auto right after pqindex 6 rounds in 9 and native
# after it 2 in 9, and a pqindex run handing 100k rows to the JVM leaves garbage that
# the next run collects.
ENGINE_ORDERS = (("native", "pqindex", "auto"), ("pqindex", "auto", "native"),
                 ("auto", "native", "pqindex"), ("native", "auto", "pqindex"),
                 ("pqindex", "native", "auto"), ("auto", "pqindex", "native"))


def settle(spark: Any) -> None:
    """Garbage of the previous run collected (driver and JVM) before the next is timed."""
    import gc

    gc.collect()
    spark.sparkContext._jvm.System.gc()


def bench_engines(spark: Any, dir_b: Path, runs: int) -> list[dict[str, Any]]:
    import pqindex.spark

    out = []
    for name, where, cols in QUERIES:
        def run(engine: str, where: str = where, cols: list[str] = cols) -> dict[str, int]:
            b0 = tree_rchar(os.getpid())
            sdf = pqindex.spark.read(spark, str(dir_b), where=where, columns=cols, engine=engine)
            sdf.write.format("noop").mode("overwrite").save()
            return {"bytes": tree_rchar(os.getpid()) - b0}

        for e in ENGINES:
            run(e)  # warm-up
        meas: dict[str, list[dict[str, Any]]] = {e: [] for e in ENGINES}
        for i in range(runs):
            for e in ENGINE_ORDERS[i % len(ENGINE_ORDERS)]:
                settle(spark)
                r = timed(lambda e=e: run(e))  # type: ignore[misc]
                meas[e].append({"s": r["s"], "others": r["others"], **r["out"]})
        counts = {e: pqindex.spark.read(spark, str(dir_b), where=where, columns=cols,
                                        engine=e).count() for e in ENGINES}
        if len(set(counts.values())) != 1:
            raise SystemExit(f"{name}: engines disagree on the row count: {counts}")
        ex = pqindex.spark.explain(spark, str(dir_b), where, columns=cols, engine="auto")
        q = {"name": name, "where": where, "cols": cols, "rows": counts["native"],
             "meas": meas, "auto": ex["engine"], "auto_reason": ex["engine_reason"],
             "bytes_kept": ex["bytes_kept"], "units": ex["units"],
             "mode": pqindex.spark.explain(spark, str(dir_b), where, columns=cols,
                                           engine="pqindex")["engine_mode"]}
        log(f"{name}: rows {q['rows']:,}; auto -> {ex['engine']}; "
            + "; ".join(f"{e} {med(meas[e], 's') * 1e3:.0f} ms "
                        f"{med(meas[e], 'bytes') / 2**20:.2f} MiB" for e in ENGINES))
        out.append(q)
    return out


def bootstrap_median_ci(xs: list[float], draws: int = 4000, seed: int = 7
                        ) -> tuple[float, float]:
    """A 95% percentile-bootstrap interval of the median of ``xs``."""
    import random

    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(draws))
    return meds[int(0.025 * draws)], meds[int(0.975 * draws) - 1]


def render_engines(info: dict[str, Any]) -> str:
    from pqindex.spark.reading import AUTO_THRESHOLD_BYTES, DRIVER_READ_BYTES

    L = [E_START, "## Spark reads: Spark's reader vs pqindex's reader vs auto", ""]
    L.append(
        f"Produced by `bench/spark_pipeline.py --engines --scale {info['scale']:g} --runs "
        f"{info['runs']}` on {info['started']} in {info['minutes']:.1f} min. Machine: "
        f"{info['machine']['cpu']}; {info['machine']['versions']}; one `local[*]` session. "
        f"pqindex code: {info['version0']}. Load average {info['load0']} at the start, "
        f"{info['load1']} at the end: **the machine was shared with other engineers' jobs "
        f"during the run** (*others* below = cores they used per timed run).")
    L.append("")
    L.append(
        f"Data: the pipeline's output for TPC-H `lineitem` sf {info['scale']:g} "
        f"({info['facts']['files']} files, {info['facts']['bytes'] / 2**20:,.1f} MiB; sorted on "
        f"`l_shipdate`, Parquet Bloom filters on `l_orderkey`, distinct index on `l_shipmode`"
        + ("" if info.get("lake") == "no page bloom" else
           "; an embedded page-scope Bloom index on `l_orderkey`, `bloom_scope=\"page\"`, "
           "as scripts/demo.py writes it")
        + "). Every query: "
        f"`pqindex.spark.read(spark, lake, where=w, columns=cols, engine=e)` run to Spark's "
        f"`noop` sink, planning included. *native*: Spark's Parquet reader on the files "
        f"pqindex keeps; *pqindex*: pqindex's reader, on the driver when the plan keeps at "
        f"most {DRIVER_READ_BYTES / 2**20:g} MiB of pages, else in the \"pqindex\" data "
        f"source's tasks (*kept by plan*: the planner's upper bound); *auto*: pqindex's "
        f"reader when the plan keeps at most {AUTO_THRESHOLD_BYTES / 2**10:g} KiB, else "
        f"native. Bytes: growth of "
        f"`rchar` (/proc/<pid>/io) summed over the driver, the JVM and its Python workers. "
        f"One warm-up per engine, then {info['runs']} rounds, the engines' order cycling "
        f"through the 6 orders of a Williams design (each engine first, second, third and "
        f"after each other one equally often), the garbage of the driver and the JVM "
        f"collected before each timed run; medians.")
    L.append("")
    L.append("| query | rows | kept by plan | native ms | pqindex ms (where) | auto ms (→ engine) "
             "| native MiB | pqindex MiB | auto MiB | auto / best | auto / best, paired "
             "| pqindex / native | pqindex / native, paired | others (cores) |")
    L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             "| ---: | --- |")
    auto_ok, lookup_ok = [], None
    for q in info["queries"]:
        m = q["meas"]
        t = {e: med(m[e], "s") for e in ENGINES}
        b = {e: med(m[e], "bytes") for e in ENGINES}
        best = min(("native", "pqindex"), key=lambda e: t[e])
        ratio = t["auto"] / t[best]
        pn = t["pqindex"] / t["native"]
        # Paired: the median over rounds of the ratio within a round (the three engines
        # run back to back, so they share that moment's load from other jobs), against
        # the engine better by median. (Not the faster of the two in each round: with
        # two engines about as fast, that minimum of two noisy times is biased low.)
        ratios = [m["auto"][i]["s"] / m[best][i]["s"] for i in range(len(m["auto"]))]
        ratio_p = statistics.median(ratios)
        ci = bootstrap_median_ci(ratios)
        pn_p = statistics.median(m["pqindex"][i]["s"] / m["native"][i]["s"]
                                 for i in range(len(m["auto"])))
        auto_ok.append((q["name"], ratio, ratio_p, ci))
        if q["name"] == "order-key lookup":
            lookup_ok = (pn, pn_p)
        oth = statistics.median(x["others"] for e in ENGINES for x in m[e])
        L.append(
            f"| {q['name']} | {q['rows']:,} | {_mib(q['bytes_kept'] or 0)} | "
            f"{t['native'] * 1e3:,.0f} | {t['pqindex'] * 1e3:,.0f} ({q['mode']}) | "
            f"{t['auto'] * 1e3:,.0f} (→ {q['auto']}) | {b['native'] / 2**20:,.2f} | "
            f"{b['pqindex'] / 2**20:,.2f} | {b['auto'] / 2**20:,.2f} | {ratio:.2f}× | "
            f"{ratio_p:.2f}× | {pn:.2f}× | {pn_p:.2f}× | {oth:.2f} |")
    L.append("")
    over = [(n, r, rp, ci) for n, r, rp, ci in auto_ok if max(r, rp) > 1.0]
    # Above 1.0 by the point estimates, but with 1.0 inside the paired ratio's interval:
    # no difference these rounds can show (auto runs the engine it picks, unchanged).
    tied = [x for x in over if x[3][0] <= 1.0]
    bad = [x for x in over if x[3][0] > 1.0]

    def said(xs: list[Any]) -> str:
        return ", ".join(f"{n} ({r:.2f}×, paired {rp:.2f}×, 95% interval "
                         f"{ci[0]:.2f}–{ci[1]:.2f}×)" for n, r, rp, ci in xs)

    verdict = ("**not met** on " + said(bad) + "." if bad else "**met**" + (
        "." if not tied else " within the measurement's precision: above 1.0× by the "
        "point estimates on " + said(tied) + ", 1.0× inside the interval."))
    L.append(
        "Target `auto` ≤ 1.0× the better of native and pqindex on every query (medians and "
        "paired; the interval is a bootstrap 95% interval of the paired median): " + verdict)
    L.append("")
    L.append("| query | auto / best, paired | 95% interval |")
    L.append("| --- | ---: | --- |")
    L += [f"| {n} | {rp:.3f}× | {ci[0]:.3f}–{ci[1]:.3f}× |" for n, _, rp, ci in auto_ok]
    L.append("")
    if lookup_ok is not None:
        ok = max(lookup_ok) <= 0.5
        L.append(f"Target order-key lookup with pqindex's reader ≤ 0.5× Spark native: "
                 f"{lookup_ok[0]:.2f}× (paired {lookup_ok[1]:.2f}×), "
                 f"**{'met' if ok else 'not met'}**.")
    L.append("")
    L.append("Predicates: " + "; ".join(f"{q['name']}: `{q['where']}` → "
                                        f"`{', '.join(q['cols'])}`" for q in info["queries"]) + ".")
    L.append(E_END)
    return "\n".join(L) + "\n"


def write_engines_section(section: str) -> None:
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    if E_START in text and E_END in text:
        before = text[: text.index(E_START)]
        after = text[text.index(E_END) + len(E_END):].lstrip("\n")
        text = before + section + ("\n" + after if after else "")
    elif END in text:
        i = text.index(END) + len(END)
        text = text[:i] + "\n\n" + section + text[i:]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    DOC.write_text(text)


def engines_lake(args: Any) -> tuple[Path, dict[str, Any]]:
    """The lake the engines are compared on, and its write options besides sort and
    Parquet Bloom: the demo's, a distinct index on ``l_shipmode`` and an embedded
    page-scope Bloom index on ``l_orderkey``, so that pqindex narrows the order-key
    lookup to pages (the data is sorted by ship date: no page statistics of
    ``l_orderkey`` can); only the distinct index with ``--no-page-bloom``."""
    if args.no_page_bloom:
        return (args.out / f"spark-sf{args.scale:g}-pqindex",
                {"indexes": {"distinct": ["l_shipmode"]}})
    return (args.out / f"spark-sf{args.scale:g}-pqindex-pagebloom",
            {"indexes": {"distinct": ["l_shipmode"], "bloom": ["l_orderkey"]},
             "bloom_scope": "page"})


def main_engines(args: Any) -> None:
    started = dt.datetime.now(dt.UTC)
    t_start = time.perf_counter()
    load0 = loadavg()
    snap = snapshot_src()
    version0 = code_version(snap / "pqindex")
    src = generate(args.scale)
    import pqindex.spark

    spark = spark_session()
    try:
        dir_b, extra = engines_lake(args)
        if not (dir_b / "_SUCCESS").exists():
            log(f"writing {dir_b}")
            pqindex.spark.write(spark.read.parquet(str(src)), str(dir_b),
                                sort_by=["l_shipdate"], bloom=["l_orderkey"], mode="overwrite",
                                **extra)
        queries = bench_engines(spark, dir_b, args.runs)
        info = {"scale": args.scale, "runs": args.runs, "machine": machine(spark),
                "started": started.strftime("%Y-%m-%d %H:%M UTC"), "version0": version0,
                "facts": dir_facts(dir_b), "queries": queries, "load0": load0,
                "lake": "no page bloom" if args.no_page_bloom else "demo"}
    finally:
        spark.stop()
        shutil.rmtree(snap, ignore_errors=True)
    info["load1"] = loadavg()
    info["minutes"] = (time.perf_counter() - t_start) / 60
    section = render_engines(info)
    print(section)
    if not args.no_write:
        write_engines_section(section)
        log(f"wrote {DOC.relative_to(ROOT)}")


# ---------------------------------------------------------------- report


def _mib(b: float) -> str:
    return f"{b / 2**20:,.2f} MiB" if b >= 2**20 else f"{b / 2**10:,.1f} KiB"


def med(xs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(x[key] for x in xs)


def render(info: dict[str, Any]) -> str:
    w = info["writes"]
    ta, tb = med(w["a"], "s"), med(w["b"], "s")
    ratio = ta / tb
    rows = info["rows"]
    fa, fb = info["facts_a"], info["facts_b"]
    summ = w["b"][-1]["summary"]
    L: list[str] = [START, "## Spark: native sorted write vs the pqindex pipeline", ""]
    L.append(
        f"Produced by `bench/spark_pipeline.py --scale {info['scale']:g} --runs {info['runs']}` "
        f"on {info['started']} in {info['minutes']:.1f} min. Machine: {info['machine']['cpu']}; "
        f"{info['machine']['os']}; {info['machine']['versions']}. One Spark session, "
        f"`local[*]` (2 cores), `spark.driver.memory=4g`, UI off; Python workers run this "
        f"interpreter (`PYSPARK_PYTHON=sys.executable`).")
    L.append("")
    L.append(f"pqindex code measured: {info['version0']} (src/ copied aside at the start and "
             f"imported from there by the driver and Spark's Python workers).")
    if info["version0"].split("digest ")[-1] != info["version1"].split("digest ")[-1]:
        L.append(f"src/ changed during the run (at the end: {info['version1']}); these numbers "
                 f"describe the snapshot.")
    L.append("")
    L.append(
        f"**Data**: TPC-H `lineitem` at scale factor {info['scale']:g} from tpchgen-cli: "
        f"{rows:,} rows, 16 columns, {info['src_bytes'] / 2**20:,.1f} MiB of Parquet in one "
        f"file. Both writes use n = {info['n']} range partitions on `l_shipdate` (what "
        f"`pqindex.spark.write` picks by itself here{'; set by --partitions' if info['n_forced'] else ''}"
        f"). Output: (a) {fa['files']} files, {fa['bytes'] / 2**20:,.1f} MiB (Spark's Parquet "
        f"writer, its defaults: snappy, 128 MiB row groups, column/offset index); (b) "
        f"{fb['files']} files, {fb['bytes'] / 2**20:,.1f} MiB (zstd, pqindex's writer: page "
        f"index, Bloom filter on `l_orderkey`, distinct-value index on `l_shipmode`; "
        f"{summ['index_bytes'] / 2**20:,.2f} MiB of embedded indexes).")
    L.append("")
    L.append(
        f"**Background load.** Load average {info['load0']} at the start, {info['load1']} at "
        f"the end. *others* = cores used by processes outside this benchmark's process tree "
        f"(driver, JVM, Python workers) during each timed run, from /proc/stat minus the "
        f"tree's CPU time. With 2 cores, anything above ~0.3 slows both writes noticeably.")
    L.append("")
    L.append(f"### Write throughput (one warm-up each, then {info['runs']} interleaved rounds, "
             f"order alternating; seconds)")
    L.append("")
    L.append("| write | runs (s) | median s | rows/s | others (cores, per run) |")
    L.append("| --- | --- | ---: | ---: | --- |")
    for k, label in (("a", "(a) Spark native `repartitionByRange` + `sortWithinPartitions` + "
                            "`write.parquet`"),
                     ("b", "(b) `pqindex.spark.write` (sort, Bloom, distinct index)")):
        runs = ", ".join(f"{x['s']:.1f}" for x in w[k])
        oth = ", ".join(f"{x['others']:.2f}" for x in w[k])
        t = med(w[k], "s")
        L.append(f"| {label} | {runs} | **{t:.1f}** | {rows / t:,.0f} | {oth} |")
    met = ratio >= TARGET_RATIO
    per_round = ", ".join(f"{x['s'] / y['s']:.2f}×" for x, y in zip(w["a"], w["b"], strict=True))
    all_s = [x["s"] for k in ("a", "b") for x in w[k]]
    L.append("")
    L.append(f"Throughput ratio (b)/(a) = time(a) / time(b) = {ta:.1f} / {tb:.1f} = "
             f"**{ratio:.2f}×**; target ≥ {TARGET_RATIO}×: **{'met' if met else 'not met'}**. "
             f"Per round (same round's a / b): "
             f"{per_round}; individual runs ranged {min(all_s):.1f}–{max(all_s):.1f} s, "
             f"mostly with the load of other "
             f"processes (*others*), so the ratio is only as good as that spread allows.")
    L.append("")
    L.append(f"### Bytes read by the demo's queries (one warm-up each, then {info['runs']} "
             f"interleaved rounds; medians)")
    L.append("")
    L.append(
        "(a): `spark.read.parquet(dir_a).where(w).select(cols)`; (b): `pqindex.spark.read(spark, "
        "dir_b, where=w, columns=cols)` (pqindex plans on the driver and hands Spark only the "
        "files it keeps). Each query is executed with Spark's `noop` sink, so every selected "
        "column is read and decoded. *JVM bytes*: growth of the Spark JVM's `rchar` in "
        "/proc/<pid>/io (every `read`/`pread` of the JVM: data, footers, and small py4j socket "
        "traffic). *driver bytes*: growth of the Python driver's `rchar` while "
        "`pqindex.spark.read` plans (footers and indexes read in Python, plus py4j replies); "
        "for (a) the driver reads nothing but py4j replies. Time: from building the DataFrame "
        "(planning included) to the end of the `noop` write.")
    L.append("")
    L.append("| query | rows | (a) JVM bytes | (a) driver bytes | (b) JVM bytes | (b) driver bytes "
             "| (b) / (a), JVM + driver | (b) files kept | (a) ms | (b) ms "
             "| (b) reads fewer bytes? |")
    L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    fewer_not = []
    for q in info["queries"]:
        m = q["meas"]
        ja, jb, db_ = med(m["a"], "jvm"), med(m["b"], "jvm"), med(m["b"], "driver")
        da = med(m["a"], "driver")
        tot_a, tot_b = ja + da, jb + db_
        fewer = tot_b < tot_a
        if not fewer:
            fewer_not.append(q["name"])
        kept, total = q["files_b"]
        L.append(
            f"| {q['name']} | {q['rows']:,} | {_mib(ja)} | {_mib(da)} | {_mib(jb)} | {_mib(db_)} | "
            f"{tot_b / tot_a:.2f}× | {kept}/{total} | {med(m['a'], 's') * 1e3:,.0f} | "
            f"{med(m['b'], 's') * 1e3:,.0f} | {'yes' if fewer else '**no**'} |")
    L.append("")
    L.append("Predicates: " + "; ".join(f"{q['name']}: `{q['where']}` → "
                                        f"`{', '.join(q['cols'])}`" for q in info["queries"]) + ".")
    L.append("")
    spread = []
    for q in info["queries"]:
        for k in ("a", "b"):
            js = [x["jvm"] for x in q["meas"][k]]
            if max(js) - min(js) > 64 * 1024:
                spread.append(f"{q['name']} ({k}): {', '.join(_mib(j) for j in js)}")
    if spread:
        L.append("JVM bytes varied across runs for: " + "; ".join(spread) + ".")
    else:
        L.append("JVM bytes were the same (within 64 KiB) in every run of each query.")
    L.append("")
    if fewer_not:
        L.append(f"**Where pqindex-built data does not read fewer bytes**: "
                 f"{', '.join(fewer_not)} — there (b)'s JVM + driver bytes are not below "
                 f"(a)'s.")
    else:
        L.append("pqindex-built data read fewer bytes (JVM + driver) for every query.")
    oth = [x["others"] for q in info["queries"] for k in ("a", "b") for x in q["meas"][k]]
    L.append("")
    L.append(f"Other processes used {min(oth):.2f}–{max(oth):.2f} cores (median "
             f"{statistics.median(oth):.2f}) during the timed query runs.")
    L.append(END)
    return "\n".join(L) + "\n"


def write_section(section: str) -> None:
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    if START in text and END in text:
        before = text[: text.index(START)]
        after = text[text.index(END) + len(END):].lstrip("\n")
        text = before + section + ("\n" + after if after else "")
    else:
        anchor = "<!-- footer:end -->"
        if anchor in text:
            i = text.index(anchor) + len(anchor)
        else:
            first = text.find("\n")
            i = first if first >= 0 else len(text)
        text = text[:i].rstrip("\n") + "\n\n" + section + "\n" + text[i:].lstrip("\n")
    DOC.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=None,
                    help="n for both writes (default: what pqindex.spark.write would pick)")
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "bench",
                    help="where the two written datasets go")
    ap.add_argument("--no-write", action="store_true", help="print the section only")
    ap.add_argument("--no-page-bloom", action="store_true",
                    help="--engines on a lake without the page-scope Bloom index on l_orderkey")
    ap.add_argument("--engines", action="store_true",
                    help="only the read engines (native / pqindex / auto) on the pipeline's output")
    args = ap.parse_args()
    if args.engines:
        main_engines(args)
        return

    started = dt.datetime.now(dt.UTC)
    t_start = time.perf_counter()
    load0 = loadavg()
    snap = snapshot_src()
    version0 = code_version(snap / "pqindex")
    src = generate(args.scale)

    import pyarrow.parquet as pq

    from pqindex.spark.pipeline import _partitions
    from pqindex.spark.task import DEFAULT_TARGET_FILE_BYTES
    from pqindex.spark.workers import ensure_workers

    spark = spark_session()
    try:
        r = spark.sparkContext.parallelize([0], 1).map(
            lambda _: __import__("pqindex").__file__).collect()[0]
        if not r.startswith(str(snap)):
            raise SystemExit(f"Spark's workers import pqindex from {r}, not the snapshot")
        df = spark.read.parquet(str(src))
        n = args.partitions or _partitions(
            df, DEFAULT_TARGET_FILE_BYTES, ensure_workers(spark).parallelism)
        rows = pq.ParquetFile(src).metadata.num_rows
        log(f"sf {args.scale:g}: {rows:,} rows, n = {n}, load {load0}")
        args.out.mkdir(parents=True, exist_ok=True)
        dir_a = args.out / f"spark-sf{args.scale:g}-native"
        dir_b = args.out / f"spark-sf{args.scale:g}-pqindex"
        writes = bench_writes(spark, df, n, dir_a, dir_b, args.runs)
        queries = bench_queries(spark, dir_a, dir_b, args.runs)
        info = {
            "scale": args.scale, "runs": args.runs, "n": n, "n_forced": bool(args.partitions),
            "started": started.strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(spark), "version0": version0,
            "version1": code_version(ROOT / "src" / "pqindex"),
            "rows": rows, "src_bytes": src.stat().st_size,
            "facts_a": dir_facts(dir_a), "facts_b": dir_facts(dir_b),
            "writes": writes, "queries": queries, "load0": load0,
        }
    finally:
        spark.stop()
        shutil.rmtree(snap, ignore_errors=True)
    info["load1"] = loadavg()
    info["minutes"] = (time.perf_counter() - t_start) / 60
    print(json.dumps({k: v for k, v in info.items() if k != "machine"}, default=str),
          file=sys.stderr)
    section = render(info)
    print(section)
    if not args.no_write:
        write_section(section)
        log(f"wrote {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
