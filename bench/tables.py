"""Lake tables on S3: pqindex on a Delta table as written and after indexing, against
deltalake and polars reading the same versions.

    .venv/bin/python bench/tables.py [--files 100] [--rows 2000] [--delay 20] [--rounds 3]

A Delta table of ``--files`` files (one per value of a ``part`` partition column,
``--rows`` rows each) is written by deltalake locally, sorted by ``id`` across files,
with an unsorted ``user_id``; ``pqindex.add_indexes`` then indexes it by a commit
(page-scope Bloom filters on ``user_id``): version 0 is the table as written,
version 1 the indexed one. The table directory (both versions' files and the log) is
uploaded to moto on 127.0.0.1 behind the proxy that delays every request by
``--delay`` ms (tests/s3_server.py). Queries: a point lookup on ``id``, a 1,000-row
range, a rare ``user_id`` (one row), an absent ``user_id``. Every reader runs each
query cold (a fresh table object, pqindex's metadata cache cleared); latency is the
median of ``--rounds``; requests and round trips are counted by the proxy. Results
replace the section between ``<!-- tables:start -->`` and ``<!-- tables:end -->`` of
docs/benchmarks.md (with ``--write``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

import pqindex  # noqa: E402
from pqindex.io.cache import metadata_cache  # noqa: E402
from s3_server import S3Endpoint  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- tables:start -->", "<!-- tables:end -->"
RARE, ABSENT = 2_777_777, 3_888_888  # inside the range of user_id: bounds cannot rule them out


def build(root: Path, files: int, rows: int) -> None:
    from deltalake import write_deltalake

    rng = np.random.default_rng(40)
    n = files * rows
    user = rng.integers(0, 5_000_000, n)
    user[user == RARE] = RARE + 1
    user[user == ABSENT] = ABSENT + 1
    user[n // 2 + 17] = RARE
    table = pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "user_id": pa.array(user, pa.int64()),
        "amount": pa.array(rng.normal(100, 30, n)),
        "part": pa.array(np.arange(n) // rows, pa.int64()),
    })
    write_deltalake(str(root), table, partition_by=["part"])
    pqindex.add_indexes(str(root), bloom=["user_id"], bloom_scope="row_group,page")


def upload(ep: S3Endpoint, bucket: str, root: Path, prefix: str) -> None:
    client = ep.boto3()
    for p in root.rglob("*"):
        if p.is_file():
            client.upload_file(str(p), bucket, f"{prefix}/{p.relative_to(root).as_posix()}")



def queries(n: int) -> dict[str, tuple[str, pc.Expression, Any]]:
    mid = n // 3 + 5
    return {
        "point id": (f"id = {mid}", pc.field("id") == mid, ("id", "==", mid)),
        "1,000-row range": (f"id BETWEEN {mid} AND {mid + 999}",
                            (pc.field("id") >= mid) & (pc.field("id") <= mid + 999),
                            ("id", "between", (mid, mid + 999))),
        "rare user_id": (f"user_id = {RARE}", pc.field("user_id") == RARE,
                         ("user_id", "==", RARE)),
        "absent user_id": (f"user_id = {ABSENT}", pc.field("user_id") == ABSENT,
                           ("user_id", "==", ABSENT)),
    }


def run_pqindex(url: str, opts: dict[str, str], version: int, sql: str) -> int:
    metadata_cache().clear()
    ds = pqindex.dataset(url, storage_options=opts, version=version)
    return int(ds.to_table(where=sql).num_rows)


def run_deltalake(url: str, opts: dict[str, str], version: int, expr: pc.Expression) -> int:
    from deltalake import DeltaTable

    dt_ = DeltaTable(url, version=version, storage_options=opts)
    return int(dt_.to_pyarrow_dataset().to_table(filter=expr).num_rows)


def run_polars(url: str, opts: dict[str, str], version: int, spec: Any) -> int:
    import polars as pl

    col, op, v = spec
    lf = pl.scan_delta(url, version=version, storage_options=opts)
    cond = pl.col(col).is_between(*v) if op == "between" else pl.col(col) == v
    return int(lf.filter(cond).collect().height)


def measure(ep: S3Endpoint, fn: Callable[[], int], rounds: int) -> dict[str, Any]:
    times, reqs, waves, rows = [], [], [], []
    for _ in range(rounds):
        ep.reset_log()
        t0 = time.perf_counter()
        rows.append(fn())
        times.append(time.perf_counter() - t0)
        reqs.append(len(ep.requests))
        waves.append(ep.waves)
    return {"ms": statistics.median(times) * 1000, "requests": statistics.median(reqs),
            "round_trips": statistics.median(waves), "rows": rows[-1],
            "load": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--delay", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = ap.parse_args()
    t_start = time.perf_counter()
    ep = S3Endpoint(separate_process=True)
    try:
        bucket = ep.new_bucket("tables")
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "t"
            build(root, args.files, args.rows)
            upload(ep, bucket, root, "t")
        url = f"s3://{bucket}/t"
        opts = ep.storage_options()
        ep.delay = args.delay / 1000
        n = args.files * args.rows
        results = []
        for name, (sql, expr, spec) in queries(n).items():
            readers: dict[str, Callable[[], int]] = {
                "pqindex (as written)": lambda sql=sql: run_pqindex(url, opts, 0, sql),
                "pqindex (indexed)": lambda sql=sql: run_pqindex(url, opts, 1, sql),
                "deltalake": lambda expr=expr: run_deltalake(url, opts, 0, expr),
                "polars": lambda spec=spec: run_polars(url, opts, 0, spec),
            }
            got = {r: measure(ep, fn, args.rounds) for r, fn in readers.items()}
            counts = {g["rows"] for g in got.values()}
            if len(counts) != 1:
                raise AssertionError(f"{name}: readers disagree: {got}")
            results.append((name, got))
            print(name, {r: f"{g['ms']:.0f} ms {g['requests']} req {g['round_trips']} rt"
                         for r, g in got.items()}, flush=True)
    finally:
        ep.stop()
    text = render(results, args, time.perf_counter() - t_start)
    print(text)
    if args.write:
        doc = DOC.read_text()
        if START in doc:
            doc = doc[:doc.index(START)] + text + doc[doc.index(END) + len(END):]
        else:
            doc = doc.rstrip("\n") + "\n\n" + text + "\n"
        DOC.write_text(doc)


def render(results: list[tuple[str, dict[str, dict[str, Any]]]], args: argparse.Namespace,
           seconds: float) -> str:
    loads = sorted(g["load"] for _, got in results for g in got.values()) or [0.0]
    readers = list(results[0][1]) if results else []
    lines = [
        START,
        "## Lake tables on S3 (bench/tables.py)",
        "",
        f"{dt.date.today()}, {platform.machine()}, Python {platform.python_version()}: a "
        f"Delta table of {args.files} files x {args.rows:,} rows (deltalake 1.6.6; `id` "
        "sorted across files, `user_id` unsorted), indexed by a pqindex commit (page-scope "
        "Bloom filters on `user_id`: version 1). moto in its own process behind a proxy "
        f"adding {args.delay:.0f} ms per request; cold reads (a fresh table object, "
        f"pqindex's metadata cache cleared), median of {args.rounds} rounds; identical "
        f"rows checked. Run took {seconds:.0f} s on a shared 2-core machine (1-minute load "
        f"average {loads[0]:.1f}–{loads[-1]:.1f}): timings are noisy.",
        "",
        "| query | " + " | ".join(readers) + " |",
        "|---|" + "---:|" * len(readers),
    ]
    for name, got in results:
        cells = [f"{g['ms']:,.0f} ms, {g['requests']:.0f} req, {g['round_trips']:.0f} rt"
                 for g in got.values()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append(END)
    return "\n".join(lines)


if __name__ == "__main__":
    main()
