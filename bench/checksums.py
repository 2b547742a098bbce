"""What checking page CRCs costs: full scans and a point lookup, with and without
``verify_checksums``, against pyarrow's ``page_checksum_verification``.

    .venv/bin/python bench/checksums.py [--rows 4000000] [--rounds 5]

One local file written by ``pqindex.write_table`` (zstd, CRCs in every page, 20k-row
pages, 1M-row row groups; int64 id sorted, random int64, float64, a 1,000-value
string column: the last dictionary-encoded). The page cache is warm (each reader runs
once before timing); readers interleave round by round; medians of wall time and of
process CPU time are printed with the 1-minute load average.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import pqindex  # noqa: E402
from pqindex.format.file import ParquetFile  # noqa: E402
from pqindex.format.pages import check_file  # noqa: E402


def write(path: Path, rows: int) -> None:
    rng = np.random.default_rng(7)
    t = pa.table({
        "id": np.arange(rows, dtype=np.int64),
        "amount": rng.integers(0, 1 << 40, rows),
        "score": rng.normal(size=rows),
        "category": pa.array([f"cat-{v:04d}" for v in rng.integers(0, 1_000, rows)]),
    })
    pqindex.write_table(t, path, indexes=None)


def readers(path: Path, lookup: int) -> dict[str, Callable[[], object]]:
    p = str(path)

    def scan(verify: bool, where: str | None = None) -> Callable[[], object]:
        ds = pqindex.dataset(p)  # one dataset: footers warm, as a service would hold it
        return lambda: ds.scan(where=where, verify_checksums=verify).to_table()

    def check() -> int:
        with ParquetFile.open(p) as pf:
            return check_file(pf, decode=False)

    return {
        "pqindex full scan": scan(False),
        "pqindex full scan, verify_checksums": scan(True),
        "pyarrow read_table": lambda: pq.read_table(p),
        "pyarrow read_table, page_checksum_verification": lambda: pq.read_table(
            p, page_checksum_verification=True),
        "pqindex lookup id = k": scan(False, f"id = {lookup}"),
        "pqindex lookup id = k, verify_checksums": scan(True, f"id = {lookup}"),
        "pqindex check --no-decode (CRCs only)": check,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "crc.parquet"
        write(path, args.rows)
        runs = readers(path, args.rows // 3)
        for fn in runs.values():
            fn()  # warm: page cache, footers
        wall: dict[str, list[float]] = {k: [] for k in runs}
        cpu: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(args.rounds):
            for name, fn in runs.items():
                w0, c0 = time.perf_counter(), time.process_time()
                fn()
                wall[name].append(time.perf_counter() - w0)
                cpu[name].append(time.process_time() - c0)
        size = path.stat().st_size
    print(f"{args.rows:,} rows, {size / 2**20:.1f} MiB, {args.rounds} rounds, "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for name in runs:
        print(f"  {name:<50} wall {statistics.median(wall[name]) * 1e3:8.1f} ms"
              f"   cpu {statistics.median(cpu[name]) * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
