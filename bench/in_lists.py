"""Large IN lists: pqindex's planning time and query time against DuckDB and polars.

    .venv/bin/python bench/in_lists.py [--parts one,lake] [--sizes 1000,100000]
        [--rounds 3] [--warmup 1] [--readers pqindex,duckdb,polars] [--src DIR]
    [--dir DIR] [--skip lake:100000]

Data (written once under ``--dir``, reused): ``one``: one file of 1,000,000 rows
(``id`` ascending int64, ``name`` string, ``amount`` double) in row groups of
125,000, with a page index and a Bloom filter on ``id``; ``lake``: 1,000 files of
2,000 rows (disjoint ``id`` ranges, page index). The query: ``id IN (k keys)``,
``k`` random keys over twice the ``id`` range (about half of them present),
returning ``id`` and ``amount``. ``--warmup`` untimed runs of each reader
first (imports, OS page cache). Every run is cold for the library (a fresh
dataset with pqindex's metadata cache cleared, a fresh DuckDB connection, a fresh
polars LazyFrame; OS page cache warm). ``plan``: ``Dataset.plan`` alone (bind,
statistics, page index, dictionaries, Bloom filters: no data page read);
``query``: the rows. Readers interleaved round by round; medians; every reader
must return the same number of rows. ``--src``: import pqindex from there (to
time another checkout's planner with the same script).
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


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--parts", default="one,lake")
    p.add_argument("--sizes", default="1000,100000")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1, help="untimed runs of each reader first")
    p.add_argument("--readers", default="pqindex,duckdb,polars")
    p.add_argument("--src", default=str(ROOT / "src"))
    p.add_argument("--dir", default="/tmp/pqindex-bench-in-lists")
    p.add_argument("--skip", default="", help="part:size pairs not run, e.g. lake:100000")
    return p.parse_args()


def write_data(root: Path) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(11)
    one = root / "one.parquet"
    if not one.exists():
        n = 1_000_000
        t = pa.table({
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "name": pa.array([f"n{v:07d}" for v in rng.integers(0, 10**7, n)]),
            "amount": pa.array(rng.random(n)),
        })
        pq.write_table(t, str(one) + ".tmp", row_group_size=125_000, write_page_index=True,
                       bloom_filter_options={"id": {"ndv": n}})
        os.replace(str(one) + ".tmp", one)
    lake = root / "lake"
    if not (root / "lake.done").exists():
        lake.mkdir(parents=True, exist_ok=True)
        m = 2_000
        for i in range(1_000):
            ids = np.arange(i * m, (i + 1) * m, dtype=np.int64)
            t = pa.table({"id": ids, "name": pa.array([f"n{v:07d}" for v in ids]),
                          "amount": rng.random(m)})
            pq.write_table(t, lake / f"part-{i:04d}.parquet", write_page_index=True)
        (root / "lake.done").write_text("")


def main() -> None:
    args = _args()
    sys.path.insert(0, args.src)
    import numpy as np

    import pqindex
    from pqindex.io.cache import metadata_cache

    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    write_data(root)
    readers = args.readers.split(",")
    sources = {"one": (root / "one.parquet", 1_000_000),
               "lake": (root / "lake", 2_000_000)}
    cols = ["id", "amount"]

    def cold() -> Any:
        clear = getattr(metadata_cache(), "clear", None)
        if callable(clear):
            clear()

    results: dict[tuple[str, int, str], list[float]] = {}
    rows: dict[tuple[str, int, str], int] = {}
    for part in args.parts.split(","):
        path, span = sources[part]
        glob = str(path / "*.parquet") if path.is_dir() else str(path)
        for size in map(int, args.sizes.split(",")):
            if f"{part}:{size}" in args.skip.split(","):
                continue
            keys = np.random.default_rng(size).integers(0, 2 * span, size).tolist()
            sql_list = ", ".join(map(str, keys))

            def pq_plan(path: Path = path, keys: list[int] = keys) -> int:
                cold()
                plan = pqindex.dataset(str(path)).plan(cols, pqindex.col("id").isin(keys))
                return len(plan.files)

            def pq_query(path: Path = path, keys: list[int] = keys) -> int:
                cold()
                t = pqindex.dataset(str(path)).to_table(cols, pqindex.col("id").isin(keys))
                return int(t.num_rows)

            def duck(glob: str = glob, sql_list: str = sql_list) -> int:
                import duckdb

                con = duckdb.connect()
                got = con.sql(f"SELECT id, amount FROM read_parquet('{glob}') "
                              f"WHERE id IN ({sql_list})").to_arrow_table()
                con.close()
                return int(got.num_rows)

            def polars(glob: str = glob, keys: list[int] = keys) -> int:
                import polars as pl

                got = (pl.scan_parquet(glob).filter(pl.col("id").is_in(keys))
                       .select(cols).collect())
                return int(got.height)

            runs: dict[str, Any] = {}
            if "pqindex" in readers:
                runs["pqindex plan"] = pq_plan
                runs["pqindex query"] = pq_query
            if "duckdb" in readers:
                runs["duckdb query"] = duck
            if "polars" in readers:
                runs["polars query"] = polars
            for r in range(args.warmup + args.rounds):
                for name, fn in runs.items():
                    t0 = time.perf_counter()
                    got = fn()
                    if r < args.warmup:
                        continue
                    results.setdefault((part, size, name), []).append(time.perf_counter() - t0)
                    rows[(part, size, name)] = got
                    print(f"{part} {size} {name}: {results[(part, size, name)][-1]:.3f}s "
                          f"({got})", file=sys.stderr, flush=True)
            counts = {rows[(part, size, n)] for n in runs if n.endswith("query")}
            if len(counts) > 1:
                raise SystemExit(f"readers disagree on {part} {size}: {counts}")
    print("| data | IN values | reader | median ms | runs |")
    print("| --- | ---: | --- | ---: | ---: |")
    for (part, size, name), ts in results.items():
        print(f"| {part} | {size:,} | {name} | {statistics.median(ts) * 1000:,.0f} | {len(ts)} |")
    print(f"load {os.getloadavg()[0]:.2f}; pqindex from {args.src}")


if __name__ == "__main__":
    main()
