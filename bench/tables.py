"""Lake tables on S3: pqindex on a Delta and an Iceberg table as written and after
pqindex indexed them on S3, against the tables' own readers and polars.

    .venv/bin/python bench/tables.py [--files 1000] [--rows 2000] [--delay 20] [--rounds 3]
                                     [--big-files 100] [--big-mib 5.5]
                                     [--part delta|iceberg|big|all] [--queries 'point id']
                                     [--write]

Each ``--part`` (each under 10 minutes) saves its results in ``--results``
(a JSON file in the temporary directory); ``--write`` renders the saved parts.

Tables (moto in its own process, on 127.0.0.1, behind the proxy of tests/s3_server.py
that delays every request by ``--delay`` ms; the proxy runs in a process of its own:
in a thread of this process it shared the GIL with the Python readers, not with the
native threads of deltalake and polars; ``--proxy thread`` runs it as before):

* Delta: ``--files`` files of ``--rows`` rows (one per value of a ``part`` partition
  column) written by deltalake, ``id`` sorted across files, an unsorted ``user_id``;
  uploaded as version 0, then indexed on S3 by ``pqindex.add_indexes`` (Bloom filters
  on ``user_id`` at file, row-group and page scope): version 1, with its evidence
  sidecar (``_pqindex/delta-<version>.json``).
* Iceberg: the same rows in ``--files`` Parquet files written by pyarrow and added by
  pyiceberg (``add_files``, SQL catalog on sqlite, the warehouse on moto): the first
  snapshot; then indexed by ``pqindex.add_indexes(table)``: the second snapshot.

pqindex's readers load the Iceberg table through the catalog configured with
pqindex's FileIO (``py-io-impl``, metadata files in one GET each), as its users would;
"pqindex (indexed, pyiceberg's FileIO)" and the peers through pyiceberg's default.

Queries: a point lookup on ``id``, a 1,000-row range, a rare ``user_id`` (one row), an
absent ``user_id`` (both inside every file's bounds). The readers take turns in each
round (the load of a shared machine drifts alike for all), each after a full garbage
collection outside its time (the collector's debt of the reader before is not its own).
Every reader runs each query cold:
a fresh table object (its log or metadata read again), pqindex's metadata cache
cleared. Latency is the median of ``--rounds``; requests and round trips as the proxy
counted them. Rows are compared across readers.

Uploads: indexing a table of ``--big-files`` files of ``--big-mib`` MiB (over S3's 5 MiB
part minimum, so the data ranges are copied by the store) is measured separately:
bytes sent to the store against the table's bytes.

With ``--write`` the results replace the section between ``<!-- tables:start -->``
and ``<!-- tables:end -->`` of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

import pqindex  # noqa: E402
from pqindex.io.cache import metadata_cache  # noqa: E402
from s3_server import S3Endpoint  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- tables:start -->", "<!-- tables:end -->"
RARE, ABSENT = 2_777_777, 3_888_888  # inside the range of user_id: bounds cannot rule them out
BLOOM_SCOPE = "file,row_group,page"


def rows_table(files: int, rows: int, payload: int = 0, seed: int = 40) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = files * rows
    user = rng.integers(0, 5_000_000, n)
    user[user == RARE] = RARE + 1
    user[user == ABSENT] = ABSENT + 1
    user[n // 2 + 17] = RARE
    cols: dict[str, Any] = {
        "id": pa.array(np.arange(n), pa.int64()),
        "user_id": pa.array(user, pa.int64()),
        "amount": pa.array(rng.normal(100, 30, n)),
        "part": pa.array(np.arange(n) // rows, pa.int64()),
    }
    if payload:  # incompressible bytes: files over S3's part minimum
        blob = rng.bytes(n * payload)
        cols["payload"] = pa.array([blob[i * payload:(i + 1) * payload] for i in range(n)],
                                   pa.binary())
    return pa.table(cols)


def upload(ep: S3Endpoint, bucket: str, root: Path, prefix: str) -> int:
    from concurrent.futures import ThreadPoolExecutor

    client = ep.boto3()
    files = [p for p in root.rglob("*") if p.is_file()]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: client.upload_file(
            str(p), bucket, f"{prefix}/{p.relative_to(root).as_posix()}"), files))
    return sum(p.stat().st_size for p in files if p.suffix == ".parquet")


def delta_opts(ep: S3Endpoint) -> dict[str, str]:
    return {**ep.storage_options(), "aws_s3_allow_unsafe_rename": "true"}


def build_delta(ep: S3Endpoint, bucket: str, files: int, rows: int) -> dict[str, Any]:
    """The Delta table at version 0 (written) and 1 (indexed on S3); what indexing cost."""
    from deltalake import write_deltalake

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "t"
        write_deltalake(str(root), rows_table(files, rows), partition_by=["part"])
        nbytes = upload(ep, bucket, root, "delta")
    url = f"s3://{bucket}/delta"
    ep.reset_log()
    t0 = time.perf_counter()
    results = pqindex.add_indexes(url, bloom="user_id", bloom_scope=BLOOM_SCOPE,
                                  storage_options=delta_opts(ep))
    return {"url": url, "bytes": nbytes, "files": len(results),
            "seconds": time.perf_counter() - t0, "uploaded": ep.uploaded_bytes,
            "requests": len(ep.requests),
            "copied": sum(r.bytes_copied_server_side for r in results)}


PQINDEX_IO = "pqindex.dataset.tables.iceberg_io.PqIndexFileIO"


def iceberg_catalog(ep: S3Endpoint, db: Path, bucket: str, endpoint: str,
                    pqindex_io: bool = False) -> Any:
    """The SQL catalog; ``pqindex_io``: configured with pqindex's FileIO (``py-io-impl``:
    metadata files in one GET each, no HEAD), as a pqindex user would configure it."""
    from pyiceberg.catalog.sql import SqlCatalog

    opts = ep.storage_options()
    return SqlCatalog("bench", uri=f"sqlite:///{db}", warehouse=f"s3://{bucket}/wh",
                      **{"s3.endpoint": endpoint, "s3.access-key-id": opts["access_key_id"],
                         "s3.secret-access-key": opts["secret_access_key"],
                         "s3.region": opts["region"],
                         **({"py-io-impl": PQINDEX_IO} if pqindex_io else {})})


def build_iceberg(ep: S3Endpoint, bucket: str, db: Path, files: int,
                  rows: int) -> dict[str, Any]:
    """The Iceberg table: snapshot 1 (pyiceberg's add_files), snapshot 2 (indexed)."""
    table = rows_table(files, rows).drop_columns(["part"])
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        for i in range(files):
            pq.write_table(table.slice(i * rows, rows), data / f"f{i:05d}.parquet")
        nbytes = upload(ep, bucket, data, "wh/ns.db/t/data")
    # pyarrow's uploads stall behind the delaying proxy: the table is built directly.
    catalog = iceberg_catalog(ep, db, bucket, ep.direct_url)
    catalog.create_namespace("ns")
    t = catalog.create_table("ns.t", schema=table.schema,
                             location=f"s3://{bucket}/wh/ns.db/t")
    t.add_files([f"s3://{bucket}/wh/ns.db/t/data/f{i:05d}.parquet" for i in range(files)])
    written = t.current_snapshot().snapshot_id
    ep.reset_log()
    t0 = time.perf_counter()
    results = pqindex.add_indexes(t, bloom="user_id", bloom_scope=BLOOM_SCOPE,
                                  storage_options=ep.storage_options())
    seconds = time.perf_counter() - t0
    t = catalog.load_table("ns.t")
    return {"written": written, "indexed": t.current_snapshot().snapshot_id, "bytes": nbytes,
            "files": len(results), "seconds": seconds, "uploaded": ep.uploaded_bytes,
            "requests": len(ep.requests),
            "copied": sum(r.bytes_copied_server_side for r in results)}


def big_upload(ep: S3Endpoint, bucket: str, files: int, mib: float) -> dict[str, Any]:
    """Indexing a Delta table of ``files`` files of ``mib`` MiB: bytes sent vs held."""
    from deltalake import write_deltalake

    rows = int(mib * (1 << 20) / 1040)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "big"
        write_deltalake(str(root), rows_table(files, rows, payload=1000, seed=7),
                        partition_by=["part"])
        nbytes = upload(ep, bucket, root, "big")
    ep.reset_log()
    t0 = time.perf_counter()
    results = pqindex.add_indexes(f"s3://{bucket}/big", bloom="user_id",
                                  bloom_scope=BLOOM_SCOPE, storage_options=delta_opts(ep))
    return {"files": len(results), "bytes": nbytes, "seconds": time.perf_counter() - t0,
            "uploaded": ep.uploaded_bytes, "requests": len(ep.requests),
            "copied": sum(r.bytes_copied_server_side for r in results),
            "streamed": sum(1 for r in results if r.streamed_because)}


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


def polars_cond(spec: Any) -> Any:
    import polars as pl

    col, op, v = spec
    return pl.col(col).is_between(*v) if op == "between" else pl.col(col) == v


def delta_readers(url: str, ep: S3Endpoint, sql: str, expr: pc.Expression,
                  spec: Any) -> dict[str, Callable[[], int]]:
    from deltalake import DeltaTable

    opts = ep.storage_options()

    def pqi(version: int) -> int:
        metadata_cache().clear()
        return int(pqindex.dataset(url, storage_options=opts, version=version)
                   .to_table(where=sql).num_rows)

    def deltalake_() -> int:
        t = DeltaTable(url, version=0, storage_options=opts)
        return int(t.to_pyarrow_dataset().to_table(filter=expr).num_rows)

    def polars_() -> int:
        import polars as pl

        lf = pl.scan_delta(url, version=0, storage_options=opts)
        return int(lf.filter(polars_cond(spec)).collect().height)

    def datafusion_() -> int:
        from datafusion import SessionContext

        ctx = SessionContext()
        ctx.register_table("t", DeltaTable(url, version=0, storage_options=opts))
        return int(ctx.sql(f"SELECT * FROM t WHERE {sql}").to_arrow_table().num_rows)

    return {"pqindex (as written)": lambda: pqi(0), "pqindex (indexed)": lambda: pqi(1),
            "deltalake": deltalake_, "polars": polars_, "DataFusion": datafusion_}


def iceberg_readers(ep: S3Endpoint, db: Path, bucket: str, snaps: dict[str, Any], sql: str,
                    spec: Any) -> dict[str, Callable[[], int]]:
    from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, LessThanOrEqual

    opts = ep.storage_options()
    col, op, v = spec
    row_filter = (And(GreaterThanOrEqual(col, v[0]), LessThanOrEqual(col, v[1]))
                  if op == "between" else EqualTo(col, v))

    def table(pqindex_io: bool = False) -> Any:  # a fresh table object: its metadata read
        return iceberg_catalog(ep, db, bucket, ep.url, pqindex_io).load_table("ns.t")

    def pqi(snapshot: int, pqindex_io: bool = True) -> int:
        metadata_cache().clear()
        return int(pqindex.dataset(table(pqindex_io), storage_options=opts,
                                   snapshot_id=snapshot).to_table(where=sql).num_rows)

    def pyiceberg_() -> int:
        return int(table().scan(row_filter=row_filter, snapshot_id=snaps["written"])
                   .to_arrow().num_rows)

    def polars_() -> int:
        import polars as pl
        from polars.io.iceberg._cache import reset_metadata_file_cache

        # Cold like the others: polars keeps metadata files it read in a process-wide
        # cache, which served its later rounds without reading the manifests.
        reset_metadata_file_cache()
        popts = {"aws_endpoint_url": ep.url, "aws_access_key_id": opts["access_key_id"],
                 "aws_secret_access_key": opts["secret_access_key"],
                 "aws_region": opts["region"], "aws_allow_http": "true"}
        lf = pl.scan_iceberg(table(), snapshot_id=snaps["written"], storage_options=popts)
        return int(lf.filter(polars_cond(spec)).collect().height)

    return {"pqindex (as written)": lambda: pqi(snaps["written"]),
            "pqindex (indexed)": lambda: pqi(snaps["indexed"]),
            "pqindex (indexed, pyiceberg's FileIO)": lambda: pqi(snaps["indexed"], False),
            "pyiceberg": pyiceberg_, "polars": polars_}


def measure(ep: S3Endpoint, readers: dict[str, Callable[[], int]], rounds: int,
            slow: float = 15.0) -> dict[str, dict[str, Any]]:
    """Per reader, the median of ``rounds`` cold rounds, the readers taking turns in
    each round (the machine's load drifts alike for all); a reader whose round takes
    over ``slow`` seconds runs once (its number is far from any ratio's)."""
    got: dict[str, dict[str, list[Any]]] = {r: {"times": [], "reqs": [], "waves": [],
                                                "rows": []} for r in readers}
    errors: dict[str, str] = {}
    for _ in range(rounds):
        for r, fn in readers.items():
            g = got[r]
            if r in errors or (g["times"] and g["times"][-1] > slow):
                continue
            ep.reset_log()
            # The collector's debt left by the reader before (pyiceberg's objects) is
            # not this reader's: a full collection first, outside the timing.
            gc.collect()
            try:
                t0 = time.perf_counter()
                g["rows"].append(fn())
                g["times"].append(time.perf_counter() - t0)
            except Exception as e:  # a peer that cannot read the table here: said in the table
                errors[r] = f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
                continue
            g["reqs"].append(len(ep.requests))
            g["waves"].append(ep.waves)
    load = os.getloadavg()[0]
    out: dict[str, dict[str, Any]] = {}
    for r, g in got.items():
        if r in errors:
            out[r] = {"error": errors[r], "load": load}
            continue
        out[r] = {"ms": statistics.median(g["times"]) * 1000,
                  "requests": statistics.median(g["reqs"]),
                  "round_trips": statistics.median(g["waves"]), "rows": g["rows"][-1],
                  "rounds": len(g["times"]), "load": load}
    return out


def run_queries(ep: S3Endpoint, n: int, make: Callable[[str, pc.Expression, Any],
                                                        dict[str, Callable[[], int]]],
                rounds: int, label: str, only: Sequence[str] | None = None
                ) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    out = []
    for name, (sql, expr, spec) in queries(n).items():
        if only and name not in only:
            continue
        got = measure(ep, make(sql, expr, spec), rounds)
        counts = {g["rows"] for g in got.values() if "rows" in g}
        if len(counts) != 1:
            raise AssertionError(f"{label} {name}: readers disagree: {got}")
        out.append((name, got))
        print(label, name, {r: (f"{g['ms']:.0f} ms {g['requests']} req {g['round_trips']} rt"
                                if "ms" in g else g["error"]) for r, g in got.items()},
              flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--delay", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--big-files", type=int, default=100)
    ap.add_argument("--big-mib", type=float, default=5.5)
    ap.add_argument("--part", choices=["delta", "iceberg", "big", "all"], default="all",
                    help="run one part (each well under 10 minutes) and save its results")
    ap.add_argument("--results", default=str(Path(tempfile.gettempdir())
                                             / "pqindex-bench-tables.json"),
                    help="the parts' results, kept between runs")
    ap.add_argument("--queries", default=None,
                    help="query names to run, separated by ';' (default: all), e.g. 'point id'")
    ap.add_argument("--proxy", choices=["process", "thread"], default="process",
                    help="where the delaying proxy runs: its own process (default; no "
                         "reader shares the GIL with it) or a thread of the bench's process")
    ap.add_argument("--write", action="store_true",
                    help="update docs/benchmarks.md from the saved results")
    args = ap.parse_args()
    only = [q.strip() for q in args.queries.split(";")] if args.queries else None
    t_start = time.perf_counter()
    load0 = os.getloadavg()[0]
    saved = Path(args.results)
    results: dict[str, Any] = json.loads(saved.read_text()) if saved.exists() else {}
    parts = ["delta", "iceberg", "big"] if args.part == "all" else [args.part]
    ep = S3Endpoint(separate_process=True, proxy_process=args.proxy == "process")
    try:
        bucket = ep.new_bucket("tables")
        n = args.files * args.rows
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "catalog.db"
            for part in parts:
                t0, l0 = time.perf_counter(), os.getloadavg()[0]
                ep.delay = 0.0
                if part == "big":
                    got: Any = (big_upload(ep, ep.new_bucket("big"), args.big_files,
                                           args.big_mib) if args.big_files else None)
                    print("big", got, flush=True)
                    results["big"] = {"meta": got, "mib": args.big_mib}
                    continue
                if part == "delta":
                    meta = build_delta(ep, bucket, args.files, args.rows)
                    print("delta indexed", meta, flush=True)
                    ep.delay = args.delay / 1000
                    got = run_queries(
                        ep, n, lambda sql, expr, spec, m=meta: delta_readers(
                            m["url"], ep, sql, expr, spec), args.rounds, "delta", only)
                else:
                    meta = build_iceberg(ep, bucket, db, args.files, args.rows)
                    print("iceberg indexed", meta, flush=True)
                    ep.delay = args.delay / 1000
                    got = run_queries(
                        ep, n, lambda sql, _expr, spec, m=meta: iceberg_readers(
                            ep, db, bucket, m, sql, spec), args.rounds, "iceberg", only)
                results[part] = {"meta": meta, "results": got, "minutes": (
                    time.perf_counter() - t0) / 60, "load0": l0, "date": str(dt.date.today()),
                    "files": args.files, "rows": args.rows, "delay": args.delay,
                    "rounds": args.rounds, "proxy": args.proxy}
    finally:
        ep.stop()
    saved.write_text(json.dumps(results, indent=1, default=str))
    print(f"run took {(time.perf_counter() - t_start) / 60:.1f} min, load {load0:.1f}",
          flush=True)
    if args.write and "delta" in results and "iceberg" in results:
        text = render(results)
        print(text)
        doc = DOC.read_text()
        if START in doc:
            doc = doc[:doc.index(START)] + text + doc[doc.index(END) + len(END):]
        else:
            doc = doc.rstrip("\n") + "\n\n" + text + "\n"
        DOC.write_text(doc)


def _table(results: list[tuple[str, dict[str, dict[str, Any]]]]) -> list[str]:
    readers = list(results[0][1]) if results else []
    lines = ["| query | " + " | ".join(readers) + " | pqindex (indexed) / fastest peer |",
             "|---|" + "---:|" * (len(readers) + 1)]
    for name, got in results:
        cells = [f"{g['ms']:,.0f} ms, {g['requests']:.0f} req, {g['round_trips']:.0f} rt"
                 if "ms" in g else f"fails ({g['error']})" for g in got.values()]
        peers = [g["ms"] for r, g in got.items() if not r.startswith("pqindex") and "ms" in g]
        ratio = (f"{got['pqindex (indexed)']['ms'] / min(peers):.2f}x"
                 if peers and "ms" in got["pqindex (indexed)"] else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {ratio} |")
    return lines


def _ratio(results: list[Any], query: str) -> float | None:
    for name, got in results:
        peers = [g["ms"] for r, g in got.items() if not r.startswith("pqindex") and "ms" in g]
        if name == query and peers and "ms" in got["pqindex (indexed)"]:
            return float(got["pqindex (indexed)"]["ms"] / min(peers))
    return None


def _indexing(label: str, d: dict[str, Any]) -> str:
    return (f"{label}: {d['files']:,} files, {d['bytes'] / 1e6:,.1f} MB, indexed in "
            f"{d['seconds']:.1f} s with {d['requests']:,} requests; "
            f"{d['uploaded'] / 1e6:,.2f} MB uploaded ({d['uploaded'] / d['bytes']:.1%} of the "
            f"table), {d['copied'] / 1e6:,.1f} MB copied by the store")


def render(saved: dict[str, Any]) -> str:
    import deltalake
    import polars
    import pyiceberg

    d, i, big = saved["delta"], saved["iceberg"], saved.get("big")
    delta, iceberg = d["results"], i["results"]
    loads = sorted([d["load0"], i["load0"]] + [g["load"] for res in (delta, iceberg)
                                                for _, got in res for g in got.values()])
    minutes = d["minutes"] + i["minutes"]
    lines = [
        START,
        "## Lake tables on S3 (bench/tables.py)",
        "",
        f"{d['date']}, {platform.machine()}, Python {platform.python_version()}, "
        f"deltalake {deltalake.__version__}, pyiceberg {pyiceberg.__version__}, polars "
        f"{polars.__version__}: tables of {d['files']:,} files x {d['rows']:,} rows (`id` "
        "sorted across files, `user_id` unsorted) on moto in its own process behind a proxy "
        f"adding {d['delay']:.0f} ms per request ("
        + ("in a process of its own" if d.get("proxy") == "process"
           else "in a thread of the bench's process") + "); cold reads (a fresh table object, "
        "pqindex's metadata cache cleared, polars' Iceberg metadata cache reset), median of "
        f"{d['rounds']} rounds, the readers taking turns in each (a reader whose round takes "
        "over 15 s: one round); identical "
        f"rows checked. The Delta and Iceberg parts ran separately, {minutes:.1f} min in all, "
        f"on a shared 2-core machine (1-minute load average {loads[0]:.1f}-{loads[-1]:.1f}): "
        "timings are noisy. \"indexed\": after `pqindex.add_indexes(table, "
        f"bloom=\"user_id\", bloom_scope=\"{BLOOM_SCOPE}\")` on S3 (a commit of indexed "
        "copies and the version's evidence sidecar); the peers read the table as written.",
        "",
        "**Delta** (deltalake `write_deltalake`, one file per `part`; version 0 as written, "
        "1 indexed; DataFusion through deltalake's table provider):",
        "",
        *_table(delta),
        "",
        "**Iceberg** (pyiceberg `add_files` of pyarrow-written files, SQL catalog; the "
        "first snapshot as written, the second indexed):",
        "",
        *_table(iceberg),
        "",
        "Indexing on S3 (no delay):",
        "",
        f"* {_indexing('Delta', d['meta'])} (files under S3's 5 MiB part minimum are "
        "streamed).",
        f"* {_indexing('Iceberg', i['meta'])}.",
    ]
    if big is not None and big.get("meta"):
        b, mib = big["meta"], big["mib"]
        lines.append(f"* {_indexing(f'Delta of {mib} MiB files', b)}; "
                     f"{b['streamed']} streamed.")
    lines += ["", "Targets (pqindex after indexing / the fastest peer that read the table):",
              ""]
    for label, res in (("Delta", delta), ("Iceberg", iceberg)):
        for name, limit in (("point id", 0.5), ("rare user_id", 0.2), ("absent user_id", 0.2)):
            r = _ratio(res, name)
            if r is not None:
                lines.append(f"* {label} {name}: {r:.2f}x (target <= {limit}x): "
                             f"{'met' if r <= limit else 'missed'}")
    if big is not None and big.get("meta"):
        share = big["meta"]["uploaded"] / big["meta"]["bytes"]
        lines.append(f"* uploads when indexing {big['meta']['files']} files of {big['mib']} "
                     f"MiB: {share:.1%} of the table (target <= 5%): "
                     f"{'met' if share <= 0.05 else 'missed'}")
    lines.append(END)
    return "\n".join(lines)


if __name__ == "__main__":
    main()
