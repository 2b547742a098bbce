"""A long-lived service: lookups of changing keys on one open dataset, pqindex against
pyarrow.dataset, DuckDB, DataFusion and polars.

    .venv/bin/python bench/service.py [--rows 4000000] [--queries 400] [--no-doc]

bench/selective.py's warm mode repeats one query, so whatever a reader caches for
that key (pqindex: the Bloom blocks it probed) is at hand on every run. A service
looks up a different key each time. Here each reader opens the indexed issue file
of bench/selective.py (``--variant indexed``: ``pqindex index --bloom user_id
--distinct category``) once and answers ``--queries`` lookups in turn: ``user_id =
v`` with ``v`` taken from the file (one row) or absent (no row), and ``id = v`` (one
row), each projecting ``id, ts, amount``. Every query runs on every reader, in an
order that rotates, and all must return the same rows. Reported: the median and
95th percentile per kind, over the first and the last quarter of the run (a reader
whose state grows with the keys it has seen slows down between the two).
Results replace the section between ``<!-- service:start -->`` and
``<!-- service:end -->`` of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import selective  # noqa: E402
from docsection import provenance, replace_section  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- service:start -->", "<!-- service:end -->"
COLUMNS = ["id", "ts", "amount"]
READERS = ["pqindex", "pyarrow.dataset", "duckdb", "datafusion", "polars"]
KINDS = ("user_id, present", "user_id, absent", "id")


def workload(path: Path, n: int, seed: int = 7) -> list[tuple[str, str, int]]:
    """``n`` lookups (kind, column, value), kinds in turn, values drawn at random."""
    import numpy as np
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    users = pq.read_table(path, columns=["user_id"]).column(0).to_numpy()
    present = set(users.tolist())
    out: list[tuple[str, str, int]] = []
    for k in range(n):
        kind = KINDS[k % len(KINDS)]
        if kind == "id":
            out.append((kind, "id", int(rng.integers(0, len(users)))))
        elif kind == "user_id, present":
            out.append((kind, "user_id", int(users[rng.integers(0, len(users))])))
        else:
            v = int(rng.integers(0, 10**12))
            while v in present:
                v += 1
            out.append((kind, "user_id", v))
    return out


def readers(path: Path) -> dict[str, tuple[Any, Any]]:
    """name -> (state opened once, run(state, column, value) -> (rows, sum of id))."""
    import polars as pl
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    import pqindex

    def result(t: Any) -> tuple[int, int]:
        return t.num_rows, int(pc.sum(t.column("id")).as_py() or 0)

    def sql(col: str, v: int) -> str:
        return f"SELECT {', '.join(COLUMNS)} FROM t WHERE {col} = {v}"

    def pl_run(lf: Any, col: str, v: int) -> tuple[int, int]:
        df = lf.filter(pl.col(col) == v).select(COLUMNS).collect()
        return df.height, int(df["id"].sum() or 0)

    return {
        "pqindex": (pqindex.dataset(str(path)), lambda ds, c, v: result(
            ds.scan(columns=COLUMNS, where=f"{c} = {v}").to_table())),
        "pyarrow.dataset": (pads.dataset(str(path), format="parquet"), lambda ds, c, v: result(
            ds.to_table(columns=COLUMNS, filter=pc.field(c) == v))),
        "duckdb": (selective.DuckdbReader().open(path),
                   lambda con, c, v: result(con.sql(sql(c, v)).to_arrow_table())),
        "datafusion": (selective.DatafusionReader().open(path),
                       lambda ctx, c, v: result(ctx.sql(sql(c, v)).to_arrow_table())),
        "polars": (pl.scan_parquet(str(path)), pl_run),
    }


def measure(path: Path, n: int) -> dict[tuple[str, str, str], list[float]]:
    """(reader, kind, "first" | "last") -> seconds of each lookup in that quarter."""
    made = readers(path)
    work = workload(path, n)
    for state, run in made.values():  # each reader's first query: not timed
        run(state, "id", 0)
    times: dict[tuple[str, str, str], list[float]] = {}
    quarter = n // 4
    for k, (kind, col, v) in enumerate(work):
        order = READERS[k % len(READERS):] + READERS[: k % len(READERS)]
        got = {}
        for name in order:
            state, run = made[name]
            t0 = time.perf_counter()
            got[name] = run(state, col, v)
            dt = time.perf_counter() - t0
            part = "first" if k < quarter else "last" if k >= n - quarter else None
            if part is not None:
                times.setdefault((name, kind, part), []).append(dt)
        if len(set(got.values())) != 1:
            raise AssertionError(f"{kind} {col} = {v}: readers disagree {got}")
        if k % 50 == 49:
            print(f"  {k + 1}/{n} lookups", file=sys.stderr)
    return times


def _p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(0.95 * len(s)))]


def render(times: dict[tuple[str, str, str], list[float]], args: argparse.Namespace,
           path: Path, seconds: float, load: tuple[float, float]) -> str:
    per = args.queries // 4 // len(KINDS)
    lines = [
        START,
        "## A long-lived service: lookups of changing keys (bench/service.py)",
        "",
        provenance(f"bench/service.py --rows {args.rows} --queries {args.queries}",
                   seconds, load),
        "",
        f"Data: `{path.name}` (bench/selective.py's issue file after `pqindex index --bloom "
        "user_id --distinct category`). Each reader opened once (one `pqindex.dataset`, "
        "DuckDB connection, DataFusion context, `pyarrow.dataset`, polars LazyFrame), then "
        f"{args.queries} lookups of a different key each, `user_id` taken from the file, "
        "`user_id` absent from it and `id` in turn, projecting `id, ts, amount`; every "
        "lookup on every reader (order rotating), results compared. ms: median (95th "
        f"percentile) of the ~{per} lookups of a kind in the first and in the last quarter "
        "of the run.",
        "",
        "| lookup | quarter | " + " | ".join(READERS) + " | pqindex / fastest peer |",
        "| --- | --- | " + " | ".join("---:" for _ in READERS) + " | ---: |",
    ]
    for kind in KINDS:
        for part in ("first", "last"):
            med = {n: statistics.median(times[(n, kind, part)]) * 1e3 for n in READERS}
            cells = [f"{med[n]:,.2f} ({_p95(times[(n, kind, part)]) * 1e3:,.1f})"
                     for n in READERS]
            cells[0] = f"**{cells[0]}**"
            best = min(READERS[1:], key=lambda n: med[n])
            lines.append(f"| `{kind}` | {part} | " + " | ".join(cells)
                         + f" | {med['pqindex'] / med[best]:.2f}× ({best}) |")
    lines += ["", END]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--no-doc", action="store_true", help="print, don't edit docs/")
    args = ap.parse_args()
    t0 = time.time()
    load0 = os.getloadavg()[0]
    selective.configure("issue", "indexed", args.rows)
    path = selective.generate(args.rows)
    times = measure(path, args.queries)
    section = render(times, args, path, time.time() - t0, (load0, os.getloadavg()[0]))
    print(section)
    if not args.no_doc:
        replace_section(DOC, START, END, section)


if __name__ == "__main__":
    main()
