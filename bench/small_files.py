"""A local lake of many small files nobody indexed, predicates no statistic narrows:
pqindex against pyarrow.dataset, DuckDB, DataFusion and polars.

    .venv/bin/python bench/small_files.py [--files 1000] [--rounds 5] [--no-doc]

``--files`` files of 2,000 rows written by ``pyarrow.parquet.write_table`` with
its defaults but 500-row row groups (what a streaming job or an over-partitioned
Spark write leaves: many files of a few row groups), eight columns, ``id``
increasing across files. Queries: a string equality on an unsorted column (2%
of the rows), an ``IN`` on an unsorted integer, a range on a random double
(0.1%), and a point lookup on ``id``; each cold (a fresh dataset / connection /
context / LazyFrame, pqindex's metadata cache cleared; the OS page cache warm)
and warm (the same one again). Readers interleaved round by round; medians; all
readers must return the same rows (count and sum of ``id``). Results replace the
section between ``<!-- small-files:start -->`` and ``<!-- small-files:end -->``
of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import pqindex  # noqa: E402
from docsection import (  # noqa: E402
    cold_and_warm,
    cold_warm_table,
    datafusion_context,
    duckdb_view,
    provenance,
    replace_section,
)
from pqindex.io.cache import metadata_cache  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- small-files:start -->", "<!-- small-files:end -->"
ROWS_PER_FILE = 2_000
ROW_GROUP = 500
READERS = ["pqindex", "pyarrow.dataset", "duckdb", "datafusion", "polars"]


def write_lake(root: Path, files: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(11)
    n = ROWS_PER_FILE
    for i in range(files):
        t = pa.table({
            "id": np.arange(i * n, (i + 1) * n, dtype=np.int64),
            "k": rng.integers(0, 100, n),
            "s": pa.array([f"v{x}" for x in rng.integers(0, 50, n)]),
            "a": rng.random(n),
            "b": rng.integers(0, 10**9, n),
            "c": rng.random(n),
            "d": pa.array([f"note {x}" for x in rng.integers(0, 10**6, n)]),
            "ts": pa.array(rng.integers(0, 10**15, n), pa.timestamp("us")),
        })
        pq.write_table(t, root / f"part-{i:05d}.parquet", row_group_size=ROW_GROUP)


Query = tuple[str, list[str], int | None]


def queries(files: int) -> list[tuple[str, Query]]:
    """(title, (SQL predicate, projected columns, LIMIT or None))."""
    point = files * ROWS_PER_FILE * 61 // 100 + 7
    return [
        ("string equality (2%)", ("s = 'v7'", ["id", "a", "ts"], None)),
        ("integer IN (2%)", ("k IN (3, 58)", ["id", "s"], None)),
        ("double range (0.1%)", ("a > 0.999", ["id", "k", "d"], None)),
        ("point lookup on id", (f"id = {point}", ["id", "a", "ts"], None)),
        # Any 10 matching rows: engines may return different ones (no ORDER BY), so
        # each is checked to match, not compared by id.
        ("first 10 rows (LIMIT 10)", ("k = 3", ["id", "k", "s"], 10)),
    ]


def _arrow_filter(where: str) -> Any:
    import pyarrow.compute as pc

    if where.startswith("s ="):
        return pc.field("s") == where.split("'")[1]
    if where.startswith("k IN"):
        vals = [int(v) for v in where.split("(")[1].rstrip(")").split(",")]
        return pc.field("k").isin(vals)
    if where.startswith("a >"):
        return pc.field("a") > float(where.split(">")[1])
    column, value = where.split("=")
    return pc.field(column.strip()) == int(value)


def _polars_filter(where: str) -> Any:
    import polars as pl

    if where.startswith("s ="):
        return pl.col("s") == where.split("'")[1]
    if where.startswith("k IN"):
        return pl.col("k").is_in([int(v) for v in where.split("(")[1].rstrip(")").split(",")])
    if where.startswith("a >"):
        return pl.col("a") > float(where.split(">")[1])
    column, value = where.split("=")
    return pl.col(column.strip()) == int(value)


def readers(root: Path) -> dict[str, tuple[Any, Any]]:
    """name -> (open() -> state, run(state, (where, columns)) -> (rows, sum of id))."""
    import polars as pl
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    def checked(t: Any, q: Query) -> tuple[int, int]:
        """(rows, sum of id); under a LIMIT, (rows, rows with k = 3)."""
        if q[2] is not None:
            return t.num_rows, int(pc.sum(pc.equal(t.column("k"), 3)).as_py() or 0)
        return t.num_rows, int(pc.sum(t.column("id")).as_py() or 0)

    def pq_open() -> Any:
        metadata_cache().clear()
        return pqindex.dataset(root)

    def pa_open() -> Any:
        return pads.dataset(root, format="parquet")

    def duck_open() -> Any:
        return duckdb_view(f"{root}/*.parquet")

    def df_open() -> Any:
        return datafusion_context(f"{root}/")

    def sql(q: Query) -> str:
        limit = f" LIMIT {q[2]}" if q[2] is not None else ""
        return f"SELECT {', '.join(q[1])} FROM t WHERE {q[0]}{limit}"

    def pq_run(ds: Any, q: Query) -> tuple[int, int]:
        if q[2] is not None:
            return checked(ds.head(q[2], q[1], where=q[0]), q)
        return checked(ds.scan(q[1], where=q[0]).to_table(), q)

    def pa_run(ds: Any, q: Query) -> tuple[int, int]:
        if q[2] is not None:
            return checked(ds.head(q[2], columns=q[1], filter=_arrow_filter(q[0])), q)
        return checked(ds.to_table(columns=q[1], filter=_arrow_filter(q[0])), q)

    def pl_run(lf: Any, q: Query) -> tuple[int, int]:
        lf = lf.filter(_polars_filter(q[0])).select(q[1])
        return checked((lf.head(q[2]) if q[2] is not None else lf).collect().to_arrow(), q)

    return {
        "pqindex": (pq_open, pq_run),
        "pyarrow.dataset": (pa_open, pa_run),
        "duckdb": (duck_open, lambda con, q: checked(con.sql(sql(q)).to_arrow_table(), q)),
        "datafusion": (df_open, lambda ctx, q: checked(ctx.sql(sql(q)).to_arrow_table(), q)),
        "polars": (lambda: pl.scan_parquet(f"{root}/*.parquet"), pl_run),
    }


def render(res: dict[tuple[str, str, str], float], rows: dict[str, int],
           args: argparse.Namespace, seconds: float, load: tuple[float, float]) -> str:
    titles = [t for t, _ in queries(args.files)]
    lines = [
        START,
        "## A lake of small files, predicates no statistic narrows (bench/small_files.py)",
        "",
        provenance(f"bench/small_files.py --files {args.files} --rounds {args.rounds}",
                   seconds, load),
        "",
        f"Data: {args.files:,} files × {ROWS_PER_FILE:,} rows written by "
        f"`pyarrow.parquet.write_table` (defaults: snappy, dictionary, no page index) with "
        f"{ROW_GROUP}-row row groups; eight columns (`id` increasing across files, `k` "
        "int64 in [0, 100), `s` one of 50 strings, `a`, `c` random doubles, `b` random "
        "int64, `d` a random string, `ts` a timestamp). Predicates (projections in the "
        "script): " + ", ".join(f"{t} `{q[0]}`" for t, q in queries(args.files)) + " (any 10 "
        "matching rows: pqindex's and pyarrow's `head`, SQL `LIMIT`, polars' `head`). "
        "Cold: a fresh dataset / connection / context / LazyFrame per run (pqindex's "
        "metadata cache cleared; the OS page cache warm); warm: the same one again. "
        f"Readers interleaved round by round, medians of {args.rounds}; ms, (×N) = reader "
        "/ pqindex.",
        "",
        *cold_warm_table(res, rows, titles, READERS),
        "",
        END,
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-doc", action="store_true", help="print, don't edit docs/")
    args = ap.parse_args()
    t0 = time.time()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "lake"
        root.mkdir()
        write_lake(root, args.files)
        res, rows = cold_and_warm(readers(root), READERS, queries(args.files), args.rounds)
    section = render(res, rows, args, time.time() - t0, (load0, os.getloadavg()[0]))
    print(section)
    if not args.no_doc:
        replace_section(DOC, START, END, section)


if __name__ == "__main__":
    main()
