"""``SELECT * ... LIMIT 10`` over a lake on S3: pqindex's Arrow stream (through DuckDB),
with and without the dataset's schema given, against polars and DataFusion.

    .venv/bin/python bench/stream_limit.py [--files 1000] [--rounds 3] [--delay 20] [--no-doc]

The dataset of bench/objstore.py (``--files`` files of 20k rows) on moto behind the
delaying proxy (tests/s3_server.py), every run cold (pqindex's metadata cache
cleared, a fresh dataset / context / LazyFrame). pqindex: ``pqindex.dataset(url,
schema=...)`` or without, ``scan`` read by DuckDB as ``SELECT count(*) FROM (SELECT *
FROM scan LIMIT 10)``; polars ``scan_parquet(...).head(10)``; DataFusion ``SELECT *
FROM t LIMIT 10``. Readers interleaved round by round, medians; requests counted
by the proxy. Results replace the section between ``<!-- stream-limit:start -->``
and ``<!-- stream-limit:end -->`` of docs/benchmarks.md.
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
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import duckdb  # noqa: E402
import pyarrow as pa  # noqa: E402

import objstore  # noqa: E402
import pqindex  # noqa: E402
from docsection import provenance, replace_section  # noqa: E402
from pqindex.io.cache import metadata_cache  # noqa: E402
from s3_server import REGION, S3Endpoint  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- stream-limit:start -->", "<!-- stream-limit:end -->"
SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.float64()), ("category", pa.string())])


def readers(ep: S3Endpoint, bucket: str) -> dict[str, Callable[[], int]]:
    """name -> one cold run, returning the rows it got."""
    import polars as pl

    url = f"s3://{bucket}/many/"

    def pq_limit(schema: pa.Schema | None) -> int:
        metadata_cache().clear()
        ds = pqindex.dataset(url, storage_options=ep.storage_options(), schema=schema)
        scan = ds.scan(SCHEMA.names)  # noqa: F841  (DuckDB reads it by name)
        return int(duckdb.execute(
            "SELECT count(*) FROM (SELECT * FROM scan LIMIT 10)").fetchall()[0][0])

    def polars_head() -> int:
        opts = {"aws_endpoint_url": ep.url, "aws_access_key_id": "testing",
                "aws_secret_access_key": "testing", "aws_region": REGION,
                "aws_allow_http": "true"}
        return int(pl.scan_parquet(url + "*.parquet", storage_options=opts)
                   .head(10).collect().height)

    def datafusion_limit() -> int:
        r = objstore.DataFusion(ep, bucket, "many/")
        r.cold()
        return int(r.ctx.sql("SELECT * FROM t LIMIT 10").to_arrow_table().num_rows)

    return {"pqindex, schema given": lambda: pq_limit(SCHEMA),
            "pqindex": lambda: pq_limit(None),
            "polars": polars_head, "DataFusion": datafusion_limit}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delay", type=int, default=20, help="milliseconds per request")
    ap.add_argument("--no-doc", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    load0 = os.getloadavg()[0]
    ep = S3Endpoint(separate_process=True)
    try:
        bucket = ep.new_bucket("bench")
        with tempfile.TemporaryDirectory() as tmp:
            objstore.upload(ep, bucket, args.files, Path(tmp), ["many"])
        ep.delay = args.delay / 1000
        runs = readers(ep, bucket)
        got: dict[str, list[tuple[float, int]]] = {name: [] for name in runs}
        for r in range(args.rounds):
            order = list(runs) if r % 2 == 0 else list(reversed(runs))
            for name in order:
                ep.reset_log()
                t = time.perf_counter()
                rows = runs[name]()
                ms = (time.perf_counter() - t) * 1000
                if rows != 10:
                    raise SystemExit(f"{name} returned {rows} rows, not 10")
                got[name].append((ms, len(ep.requests)))
                print(f"{name}: {ms:.0f} ms, {len(ep.requests)} requests", flush=True)
    finally:
        ep.stop()
    load1 = os.getloadavg()[0]
    med = {k: statistics.median(ms for ms, _ in v) for k, v in got.items()}
    fastest_peer = min(med[k] for k in ("polars", "DataFusion"))
    lines = [START, "## LIMIT 10 over a lake's Arrow stream on S3 (bench/stream_limit.py)", "",
             provenance(f"bench/stream_limit.py --files {args.files} --rounds {args.rounds} "
                        f"--delay {args.delay}", time.perf_counter() - t0, (load0, load1)),
             "",
             f"{args.files} files × 20k rows (bench/objstore.py's dataset) on moto, "
             f"{args.delay} ms per request, every run cold; medians of {args.rounds} "
             "interleaved rounds; requests counted by the proxy (the LIST and the "
             "manifest lookup included).", "",
             "| reader | ms | requests | / fastest peer |", "| --- | ---: | ---: | ---: |"]
    for name, v in got.items():
        lines.append(f"| {name} | {med[name]:,.0f} | {v[-1][1]:,} | "
                     f"{med[name] / fastest_peer:.2f}× |")
    lines += ["", "Without a schema (or a manifest), the stream's schema is every footer "
              "unified, read before the first batch; given one, the stream reads the first "
              "step of files only.", END]
    section = "\n".join(lines) + "\n"
    print(section)
    if not args.no_doc:
        replace_section(DOC, START, END, section)


if __name__ == "__main__":
    main()
