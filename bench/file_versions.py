"""What checking a local file's version costs: a warm point lookup and a full scan of
one file, on a file written more than ``io.source.RACY_NS`` ago (each read: one
``fstat``) and on a file just written (each read also compares the footer bytes).

    PYTHONPATH=src python bench/file_versions.py [--rows N] [--runs K]

Run it against two trees (PYTHONPATH) to compare; timings are medians of ``--runs``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import pqindex


def _write(path: Path, rows: int) -> None:
    rng = np.random.default_rng(7)
    pq.write_table(pa.table({"id": np.arange(rows, dtype=np.int64),
                             "amount": rng.random(rows),
                             "category": pa.array([f"c{i % 50}" for i in range(rows)])}),
                   path, row_group_size=250_000, write_page_index=True,
                   data_page_size=64 * 1024, compression="snappy")


def _median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        old, fresh = Path(d) / "old.parquet", Path(d) / "fresh.parquet"
        _write(old, args.rows)
        time.sleep(2.5)  # older than RACY_NS by the time it is opened
        _write(fresh, args.rows)
        print(f"load average {os.getloadavg()[0]:.2f}; {args.rows:,} rows, snappy")
        for name, path in (("aged", old), ("fresh", fresh)):
            lookup, full = _measure(path, args.rows, args.runs)
            print(f"{name:6s} lookup {lookup:7.2f} ms   full scan (2 columns) {full:7.1f} ms")


def _measure(path: Path, rows: int, runs: int) -> tuple[float, float]:
    """Median ms of a warm point lookup (a new key each time) and of a full scan."""
    ds = pqindex.dataset(path)
    keys = iter(np.random.default_rng(1).integers(0, rows, 10_000).tolist())
    lookup = _median_ms(lambda: ds.scan(where=f"id = {next(keys)}").to_table(), runs)
    full = _median_ms(lambda: ds.to_table(columns=["id", "amount"]), max(3, runs // 5))
    return lookup, full

if __name__ == "__main__":
    main()
