"""A lake of many small files on the local disk: pqindex against pyarrow.dataset,
DuckDB, DataFusion and polars.

    .venv/bin/python bench/lake_local.py [--files 1000] [--rounds 7] [--no-doc]

``--files`` files of 20k rows written by ``pqindex.write_table`` (its defaults),
sorted by ``id`` across files (``id`` = 2 x row number, so odd values are absent
inside the range) — the same rows as bench/objstore.py's "many" dataset, here in
a local directory. Three queries (point lookup, 1,000-row range, absent value),
each run cold (a fresh dataset / connection / context / LazyFrame, pqindex's
metadata cache cleared; the OS page cache stays warm) and warm (the same one
again: a service answering lookups). Readers are interleaved round by round;
medians. Results replace the section between ``<!-- lake-local:start -->`` and
``<!-- lake-local:end -->`` of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import pqindex  # noqa: E402
from docsection import peer_cells, provenance, replace_section  # noqa: E402
from objstore import _table, queries  # noqa: E402
from pqindex.io.cache import metadata_cache  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- lake-local:start -->", "<!-- lake-local:end -->"
ROWS_PER_FILE = 20_000


def write_lake(root: Path, files: int) -> None:
    for k in range(files):
        pqindex.write_table(_table(k * ROWS_PER_FILE, ROWS_PER_FILE),
                            root / f"part-{k:05d}.parquet", sort_by="id")


def _polars_filter(where: str) -> Any:
    import polars as pl

    if "BETWEEN" in where:
        lo, hi = (int(x) for x in where.split("BETWEEN")[1].split("AND"))
        return pl.col("id").is_between(lo, hi)
    return pl.col("id") == int(where.split("=")[1])


def _arrow_filter(where: str) -> Any:
    import pyarrow.compute as pc

    if "BETWEEN" in where:
        lo, hi = (int(x) for x in where.split("BETWEEN")[1].split("AND"))
        return (pc.field("id") >= lo) & (pc.field("id") <= hi)
    return pc.field("id") == int(where.split("=")[1])


def readers(root: Path) -> dict[str, Callable[[], Any]]:
    """name -> a function making the reader's state; the state's ``run(where, cols)``
    returns the row count."""
    import datafusion
    import duckdb
    import polars as pl
    import pyarrow.dataset as pads

    class PqIndex:
        def __init__(self) -> None:
            metadata_cache().clear()
            self.ds = pqindex.dataset(root)

        def run(self, where: str, cols: list[str]) -> int:
            return int(self.ds.scan(where=where, columns=cols).to_table().num_rows)

    class PyArrow:
        def __init__(self) -> None:
            self.ds = pads.dataset(root, format="parquet")

        def run(self, where: str, cols: list[str]) -> int:
            return int(self.ds.to_table(columns=cols, filter=_arrow_filter(where)).num_rows)

    class DuckDB:
        def __init__(self) -> None:
            self.con = duckdb.connect()
            self.con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{root}/*.parquet')")

        def run(self, where: str, cols: list[str]) -> int:
            return len(self.con.execute(f"SELECT {', '.join(cols)} FROM t WHERE {where}")
                       .fetchall())

    class DataFusion:
        def __init__(self) -> None:
            cfg = (datafusion.SessionConfig()
                   .set("datafusion.execution.parquet.pushdown_filters", "true")
                   .set("datafusion.execution.parquet.enable_page_index", "true"))
            self.ctx = datafusion.SessionContext(cfg)
            self.ctx.register_parquet("t", f"{root}/")

        def run(self, where: str, cols: list[str]) -> int:
            sql = f"SELECT {', '.join(cols)} FROM t WHERE {where}"
            return int(self.ctx.sql(sql).to_arrow_table().num_rows)

    class Polars:
        def __init__(self) -> None:
            self.lf = pl.scan_parquet(f"{root}/*.parquet")

        def run(self, where: str, cols: list[str]) -> int:
            return int(self.lf.filter(_polars_filter(where)).select(cols).collect().height)

    return {"pqindex": PqIndex, "pyarrow.dataset": PyArrow, "duckdb": DuckDB,
            "datafusion": DataFusion, "polars": Polars}


def measure(root: Path, rounds: int, files: int) -> dict[tuple[str, str, str], float]:
    """(query, mode, reader) -> median ms."""
    made = readers(root)
    qs = {k: v for k, v in queries(files * ROWS_PER_FILE).items() if v[0] is not None}
    times: dict[tuple[str, str, str], list[float]] = {}
    warm = {name: make() for name, make in made.items()}
    for state in warm.values():  # metadata read once, before any timed run
        for where, cols, _ in qs.values():
            state.run(where, cols)
    for r in range(rounds):
        order = list(made) if r % 2 == 0 else list(reversed(made))
        for q, (where, cols, expected) in qs.items():
            assert where is not None
            for name in order:
                t0 = time.perf_counter()
                n = made[name]().run(where, cols)
                t1 = time.perf_counter()
                m = warm[name].run(where, cols)
                t2 = time.perf_counter()
                if n != expected or m != expected:
                    raise AssertionError(f"{name} {q}: {n}/{m} rows, expected {expected}")
                times.setdefault((q, "cold", name), []).append(t1 - t0)
                times.setdefault((q, "warm", name), []).append(t2 - t1)
    return {k: statistics.median(v) * 1000 for k, v in times.items()}


def render(res: dict[tuple[str, str, str], float], args: argparse.Namespace,
           seconds: float, load: tuple[float, float]) -> str:
    names = ["pqindex", "pyarrow.dataset", "duckdb", "datafusion", "polars"]
    lines = [
        START,
        "## A local lake of many files (bench/lake_local.py)",
        "",
        provenance(f"bench/lake_local.py --files {args.files} --rounds {args.rounds}",
                   seconds, load),
        "",
        f"Data: {args.files:,} files × {ROWS_PER_FILE:,} rows written by `pqindex.write_table` "
        "(defaults), sorted by `id` across files; the rows of bench/objstore.py's \"many\" "
        "dataset. Cold: a fresh dataset / connection / context / LazyFrame per run (pqindex's "
        "metadata cache cleared; the OS page cache warm). Warm: the same one again. Readers "
        f"interleaved round by round, medians of {args.rounds}; ms, (×N) = reader / pqindex.",
        "",
        "| query | mode | " + " | ".join(names) + " | pqindex / fastest peer |",
        "| --- | --- | " + " | ".join("---:" for _ in names) + " | ---: |",
    ]
    for q in ("point", "range 1,000", "absent"):
        for mode in ("cold", "warm"):
            ms = {n: res[(q, mode, n)] for n in names}
            lines.append(f"| {q} | {mode} | {peer_cells(ms, names[1:])} |")
    lines += ["", END]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--no-doc", action="store_true", help="print, don't edit docs/")
    args = ap.parse_args()
    t0 = time.time()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "lake"
        root.mkdir()
        write_lake(root, args.files)
        res = measure(root, args.rounds, args.files)
    section = render(res, args, time.time() - t0, (load0, os.getloadavg()[0]))
    print(section)
    if not args.no_doc:
        replace_section(DOC, START, END, section)


if __name__ == "__main__":
    main()
