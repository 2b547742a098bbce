"""The lake-wide key index on S3: an unsorted key in many files, cold, fresh processes.

    .venv/bin/python bench/key_index.py [--files 1000] [--rows 10000] [--rounds 3]
                                         [--delay-ms 25] [--no-doc]

moto on 127.0.0.1 behind the proxy that delays every request by ``--delay-ms`` and
logs it (tests/s3_server.py). ``--files`` files of ``--rows`` rows; ``user_id`` is
unique and random across files (every file's min/max spans nearly the whole key
range, so statistics rule no file out), with ``amount`` and ``name``. The same files
under three prefixes: ``plain/`` with ``pqindex manifest``; ``listed/`` with
``pqindex manifest --key-index user_id`` (a manifest over a listing: the build cost
against ``plain/``'s); ``indexed/`` committed as pqindex's pipeline commits a job (a
commit-point manifest), then ``--key-index user_id``, which adds the index to that
manifest. Then 10 files are appended to ``listed/`` and ``--key-index`` run again (a
delta shard: the append cost), and ``pqindex manifest --compact-key-index`` merges it.

Queries: one present key, a 20-key IN list, a 1,000-key IN list, and an absent key
inside every file's range. Readers: pqindex with the key index on the commit point
(``listing=False``: no LIST), the same on ``listed/`` (LIST validated), pqindex
without it (``plain/``), DataFusion (pushdown and page index on) and polars
(``plain/*.parquet``). Every run is a fresh Python process (imports not timed; the
dataset / context made inside the timing); requests and round trips (requests that
arrived while none was in flight) come from the proxy's log; medians of
``--rounds``. Results replace the section between ``<!-- key-index:start -->`` and
``<!-- key-index:end -->`` of docs/benchmarks.md.

A whole run at 1,000 files takes longer than one benchmark slot (10 minutes), so it
can run in parts against one moto server kept between them (started by hand:
``python -m moto.server -H 127.0.0.1 -p PORT``; each part puts its own delaying,
counting proxy in front of it), its results gathered in ``--state`` (JSON)::

    key_index.py --moto-port P --state S --phase setup    # lake + builds (timed)
    key_index.py --moto-port P --state S --phase lake     # the lake alone (untimed)
    key_index.py --moto-port P --state S --phase rebuild  # builds, --rounds, medians
    key_index.py --moto-port P --state S --phase query --readers DataFusion
    key_index.py --moto-port P --state S --phase append   # delta + compaction
    key_index.py --moto-port P --state S --phase doc      # the section
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- key-index:start -->", "<!-- key-index:end -->"
REGION = "us-east-1"
READERS = ("pqindex + key index", "pqindex + key index, LIST", "pqindex, no index",
           "DataFusion", "polars")


# ------------------------------------------------------------------ the child


def _child(reader: str, url: str, endpoint: str, where: str, keys: list[int]) -> None:
    """One cold query in this fresh process; prints {"ms", "rows"} as JSON. An empty
    ``endpoint``: ``url`` is a local directory."""
    local = not endpoint
    if reader.startswith("pqindex"):
        import pqindex

        opts = None if local else {
            "endpoint": endpoint, "access_key_id": "testing",
            "secret_access_key": "testing", "region": REGION, "allow_http": "true"}
        t0 = time.perf_counter()
        # The pipeline-committed lake: its manifest names the files (no LIST).
        listing = False if reader == "pqindex + key index" and not local else None
        scan = pqindex.dataset(url, storage_options=opts, listing=listing).scan(
            columns=["user_id", "amount", "name"], where=where)
        rows = scan.to_table().num_rows
        extra = scan.report.to_dict().get("key_index")
    elif reader == "DataFusion":
        from datafusion import SessionConfig, SessionContext
        from datafusion.object_store import AmazonS3

        t0 = time.perf_counter()
        bucket = url.split("/")[2]
        cfg = (SessionConfig()
               .set("datafusion.execution.parquet.pushdown_filters", "true")
               .set("datafusion.execution.parquet.enable_page_index", "true"))
        ctx = SessionContext(cfg)
        if local:
            ctx.register_parquet("t", url.rstrip("/") + "/")
            rows = ctx.sql(f"SELECT user_id, amount, name FROM t WHERE {where}"
                           ).to_arrow_table().num_rows
            print(json.dumps({"ms": (time.perf_counter() - t0) * 1000, "rows": rows,
                              "key_index": None}), flush=True)
            return
        store = AmazonS3(bucket_name=bucket, region=REGION, access_key_id="testing",
                         secret_access_key="testing", endpoint=endpoint, allow_http=True)
        ctx.register_parquet("t", url.rstrip("/") + "/", object_store=store)
        rows = ctx.sql(f"SELECT user_id, amount, name FROM t WHERE {where}"
                       ).to_arrow_table().num_rows
        extra = None
    else:
        import polars as pl

        t0 = time.perf_counter()
        opts = None if local else {
            "aws_endpoint_url": endpoint, "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing", "aws_region": REGION,
            "aws_allow_http": "true"}
        rows = (pl.scan_parquet(url.rstrip("/") + "/*.parquet", storage_options=opts)
                .filter(pl.col("user_id").is_in(keys)).select(["user_id", "amount", "name"])
                .collect().height)
        extra = None
    print(json.dumps({"ms": (time.perf_counter() - t0) * 1000, "rows": rows,
                      "key_index": extra}), flush=True)


# ------------------------------------------------------------------ the lake


def write_lake(ep: Any, bucket: str, files: int, rows: int, tmp: Path) -> list[int]:
    """The files under ``plain/``, ``listed/`` and ``indexed/``; returns every user_id,
    file by file. ``indexed/`` is committed as pqindex's pipeline commits a job (the
    files staged, then ``commit_job_remote``: a commit-point manifest, which readers
    trust without a LIST); the other two are plain uploads."""
    import numpy as np
    import pyarrow as pa

    import pqindex
    from pqindex.spark.commit import STAGING
    from pqindex.spark.remote_commit import commit_job_remote

    rng = np.random.default_rng(41)
    # Unique random 62-bit ids (as user or trace ids are), in random order.
    drawn = np.unique(rng.integers(0, 2**62, size=files * rows + files * rows // 10 + 16))
    ids = rng.permutation(drawn)[: files * rows].astype(np.int64)
    client = ep.boto3()
    job = "0" * 32
    staged = []
    for k in range(files):
        part = ids[k * rows:(k + 1) * rows]
        t = pa.table({"user_id": part, "amount": rng.normal(size=rows),
                      "name": pa.array([f"user {x}" for x in part])})
        local = tmp / f"part-{k:05d}.parquet"
        pqindex.write_table(t, local, row_group_rows=rows, indexes=None)
        data = local.read_bytes()
        local.unlink()
        name = f"part-{k:05d}.parquet"
        for prefix in ("plain", "listed"):
            client.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=data)
        key = f"indexed/{STAGING}/{job}/task-0-0/{name}"
        client.put_object(Bucket=bucket, Key=key, Body=data)
        staged.append({"path": name, "staged": f"s3://{bucket}/{key}", "rows": rows,
                       "bytes": len(data), "job": job})
    commit_job_remote(f"s3://{bucket}/indexed", job, staged, mode="append", info={},
                      base_etag=None, storage_options=ep.storage_options())
    return [int(x) for x in ids]


_BUILD = """
import json, sys, time
from pqindex.dataset.key_index import write_manifest_with_key_index
from pqindex.dataset.manifest import write_manifest
url, opts, key_index = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "1"
t0 = time.perf_counter()
if key_index:
    write_manifest_with_key_index(url, ["user_id"], storage_options=opts)
else:
    write_manifest(url, opts)
print(time.perf_counter() - t0)
"""


def build(url: str, opts: dict[str, str], key_index: bool) -> float:
    """Seconds to write ``url``'s manifest (with the key index of ``user_id``): what
    ``pqindex manifest URL [--key-index user_id]`` runs, timed in a fresh process
    (imports not timed). Not in this one: the proxy's thread here forwards every
    byte of the shards' uploads and would compete with the build for the GIL."""
    out = subprocess.run([sys.executable, "-c", _BUILD, url, json.dumps(opts),
                          "1" if key_index else "0"],
                         check=True, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")}).stdout
    return float(out.strip().splitlines()[-1])


def append_and_compact(ep: Any, bucket: str, rows: int, opts: dict[str, str]
                       ) -> tuple[float, float]:
    """Seconds to index 10 appended files of ``listed/`` (a delta shard), and to
    compact the index after."""
    import numpy as np
    import pyarrow as pa

    import pqindex
    from pqindex.dataset.key_index import compact_key_index
    from pqindex.io.cache import metadata_cache

    rng = np.random.default_rng(99)
    client = ep.boto3()
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(10):
            ids = rng.integers(2**62, 2**63 - 1, size=rows)  # above every key so far
            t = pa.table({"user_id": ids, "amount": rng.normal(size=rows),
                          "name": pa.array([f"user {x}" for x in ids])})
            local = Path(tmp) / "f.parquet"
            pqindex.write_table(t, local, row_group_rows=rows, indexes=None)
            client.put_object(Bucket=bucket, Key=f"listed/append-{k:03d}.parquet",
                              Body=local.read_bytes())
    append = build(f"s3://{bucket}/listed", opts, key_index=True)
    metadata_cache().clear()
    t0 = time.perf_counter()
    compact_key_index(f"s3://{bucket}/listed", storage_options=opts)
    return append, time.perf_counter() - t0


def index_size(ep: Any, bucket: str) -> tuple[int, int]:
    """Bytes of the key index's shards and of their descriptor in the manifest."""
    client = ep.boto3()
    got = client.list_objects_v2(Bucket=bucket, Prefix="listed/_pqindex/key_index/")
    shards = sum(o["Size"] for o in got.get("Contents", []))
    m = json.loads(client.get_object(Bucket=bucket, Key="listed/_pqindex_manifest.json")
                   ["Body"].read())
    return shards, len(json.dumps(m["key_index"]))


# ------------------------------------------------------------------ measuring


def run(ep: Any, reader: str, url: str, where: str, keys: list[int]) -> dict[str, Any]:
    ep.reset_log()
    out = subprocess.run([sys.executable, __file__, "--child", reader, "--url", url,
                          "--endpoint", ep.url, "--where", where, "--keys", json.dumps(keys)],
                         capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    # The JSON line is printed before the process ends: an abort at exit (seen now and
    # then with obstore behind the delaying proxy) does not lose the measurement.
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"{reader} failed ({out.returncode}): {out.stderr[-3000:]}")
    got = json.loads(lines[-1])
    got["exit_code"] = out.returncode
    got["requests"] = len(ep.requests)
    got["round_trips"] = ep.waves
    got["data_files"] = len({r.path for r in ep.requests if r.path.endswith(".parquet")})
    return dict(got)


# ------------------------------------------------------------------ local files

LOCAL_READERS = ("pqindex + key index", "pqindex, no index", "DataFusion", "polars")


def local_setup(root: Path, args: argparse.Namespace, state: dict[str, Any]) -> None:
    """``--files`` files under ``root/plain`` (``pqindex manifest``) and the same files
    hard-linked under ``root/indexed`` (``--key-index user_id``); the builds timed."""
    import numpy as np
    import pyarrow as pa

    import pqindex
    from pqindex.io.cache import metadata_cache

    rng = np.random.default_rng(41)
    n = args.files * args.rows
    drawn = np.unique(rng.integers(0, 2**62, size=n + n // 10 + 16))
    ids = rng.permutation(drawn)[:n].astype(np.int64)
    for d in ("plain", "indexed"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for k in range(args.files):
        part = ids[k * args.rows:(k + 1) * args.rows]
        t = pa.table({"user_id": part, "amount": rng.normal(size=args.rows),
                      "name": pa.array([f"user {x}" for x in part])})
        name = f"part-{k:05d}.parquet"
        pqindex.write_table(t, root / "plain" / name, row_group_rows=args.rows, indexes=None)
        os.link(root / "plain" / name, root / "indexed" / name)
    np.save(root / "ids.npy", ids)
    # The files were just written: both builds find them in the OS page cache.
    metadata_cache().clear()
    t0 = time.perf_counter()
    from pqindex.dataset.manifest import write_manifest

    write_manifest(str(root / "plain"))
    state["local_build_plain"] = time.perf_counter() - t0
    from pqindex.dataset.key_index import write_manifest_with_key_index

    metadata_cache().clear()
    t0 = time.perf_counter()
    write_manifest_with_key_index(str(root / "indexed"), ["user_id"])
    state["local_build_indexed"] = time.perf_counter() - t0
    shards = sum(p.stat().st_size for p in (root / "indexed" / "_pqindex").rglob("*.pqkey"))
    state["local_shard_bytes"] = shards


def local_measure(root: Path, args: argparse.Namespace, readers: list[str],
                  titles: list[str], state: dict[str, Any]) -> None:
    import numpy as np

    ids = [int(x) for x in np.load(root / "ids.npy")]
    present = set(ids)
    urls = {"pqindex + key index": str(root / "indexed"), "pqindex, no index":
            str(root / "plain"), "DataFusion": str(root / "plain"),
            "polars": str(root / "plain")}
    results = state.setdefault("local_results", {})
    for title, keys in _queries(ids):
        if title not in titles:
            continue
        where = (f"user_id = {keys[0]}" if len(keys) == 1
                 else f"user_id IN ({', '.join(map(str, keys))})")
        expected = len(set(keys) & present)
        for reader in readers:
            runs = []
            for _ in range(args.rounds):
                out = subprocess.run(
                    [sys.executable, __file__, "--child", reader, "--url", urls[reader],
                     "--endpoint", "", "--where", where, "--keys", json.dumps(keys)],
                    capture_output=True, text=True,
                    env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
                lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
                if not lines:
                    raise RuntimeError(f"{reader} failed: {out.stderr[-3000:]}")
                got = json.loads(lines[-1])
                if got["rows"] != expected:
                    raise AssertionError(f"{reader} {title}: {got['rows']} rows, "
                                         f"expected {expected}")
                runs.append(got)
            med = {"ms": statistics.median(r["ms"] for r in runs), "rounds": args.rounds,
                   "load": os.getloadavg()[0], "key_index": runs[-1].get("key_index")}
            results[f"{title}|{reader}"] = med
            print("local", title, reader, round(med["ms"]), flush=True)


def local_section(args: argparse.Namespace, state: dict[str, Any]) -> list[str]:
    results = state.get("local_results", {})
    if not results:
        return []
    files, rows = state["local_files"], state["local_rows"]
    lines = ["", f"### {files:,} local files", "",
             f"`--local DIR --files {files} --rows {rows}`: {files:,} files of {rows:,} rows "
             f"on the local disk (warm OS page cache), the same `user_id` layout; fresh "
             f"processes, medians of {state.get('local_rounds', args.rounds)} rounds; "
             f"1-minute load {min(state['local_loads']):.2f} to "
             f"{max(state['local_loads']):.2f}.", "",
             "| query | reader | ms |", "| --- | --- | ---: |"]
    for title in TITLES:
        for reader in LOCAL_READERS:
            r = results.get(f"{title}|{reader}")
            if r is not None:
                lines.append(f"| {title} | {reader} | {r['ms']:,.0f} |")
    ratios = [f"{t}: {results[f'{t}|{LOCAL_READERS[0]}']['ms'] / results[f'{t}|DataFusion']['ms']:.3f}×"
              for t in TITLES if f"{t}|{LOCAL_READERS[0]}" in results
              and f"{t}|DataFusion" in results]
    lines += ["", "pqindex + key index against DataFusion: " + ", ".join(ratios) + "."]
    if "local_build_plain" in state:
        bp, bi = state["local_build_plain"], state["local_build_indexed"]
        lines += ["", f"Build: `pqindex manifest` {bp:.1f} s, with `--key-index user_id` "
                  f"{bi:.1f} s ({bi / bp:.2f}×); {state['local_shard_bytes']:,} bytes of "
                  f"shards ({state['local_shard_bytes'] / (files * rows):.1f} bytes a key)."]
    return lines


def _attach(port: int) -> Any:
    """An S3Endpoint whose moto server runs elsewhere (kept between parts), with a
    proxy of this process in front of it."""
    from s3_server import S3Endpoint, _Log, _Proxy

    class _Kept:
        def get_host_and_port(self) -> tuple[str, int]:
            return "127.0.0.1", port

        def stop(self) -> None:
            pass  # not this process's to stop

    ep = S3Endpoint.__new__(S3Endpoint)
    ep._moto = _Kept()
    ep.direct_url = f"http://127.0.0.1:{port}"
    ep._log = _Log()
    ep._remote = None  # the proxy runs in this process
    ep._proxy = _Proxy(("127.0.0.1", port), ep._log)
    ep.url = f"http://127.0.0.1:{ep._proxy.port}"
    return ep


BUCKET = "keyindex"
TITLES = ("one key", "20-key IN", "1,000-key IN", "absent key")


def _queries(ids: list[int]) -> list[tuple[str, list[int]]]:
    import random

    rng = random.Random(7)
    present = set(ids)
    lo, hi = min(ids), max(ids)
    absent = next(k for k in range((lo + hi) // 2, hi) if k not in present)
    assert lo < absent < hi  # inside every file's range, not a value
    return [("one key", [rng.choice(ids)]), ("20-key IN", rng.sample(ids, 20)),
            ("1,000-key IN", rng.sample(ids, 1000)), ("absent key", [absent])]


def setup(ep: Any, bucket: str, args: argparse.Namespace, state: dict[str, Any]) -> list[int]:
    """The lake written and its manifests built (timed); returns every user_id."""
    ep.delay = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        ids = write_lake(ep, bucket, args.files, args.rows, Path(tmp))
    ep.delay = args.delay_ms / 1000
    opts = ep.storage_options()
    state["build_plain"] = build(f"s3://{bucket}/plain", opts, key_index=False)
    state["build_listed"] = build(f"s3://{bucket}/listed", opts, key_index=True)
    # On the commit point the index joins the pipeline's manifest (no rewrite).
    state["build_indexed"] = build(f"s3://{bucket}/indexed", opts, key_index=True)
    state["shard_bytes"], state["descriptor_bytes"] = index_size(ep, bucket)
    return ids


def rebuild(ep: Any, bucket: str, args: argparse.Namespace, state: dict[str, Any]) -> None:
    """The builds timed again on the lake as it is (the code may have changed since
    setup), ``--rounds`` times, interleaved; medians kept (every round in
    ``build_rounds``). Before each index build its prefix's key index is dropped
    from its manifest (not timed), so ``--key-index`` builds it whole rather than
    finding every file covered (a rebuild: the manifest is there)."""
    from pqindex.dataset.key_index import commit_key_index, read_manifest

    ep.delay = args.delay_ms / 1000
    opts = ep.storage_options()

    def drop(prefix: str) -> None:
        url = f"s3://{bucket}/{prefix}"
        manifest, version = read_manifest(url, opts)
        if manifest is not None and "key_index" in manifest:
            commit_key_index(url, manifest, version, None, opts)

    rounds: dict[str, list[float]] = {k: [] for k in (
        "build_plain", "build_listed_plain", "build_listed", "build_indexed")}
    for _ in range(args.rounds):
        rounds["build_plain"].append(build(f"s3://{bucket}/plain", opts, key_index=False))
        drop("listed")
        # listed/ may hold the appended files by now: its own manifest is the reference.
        rounds["build_listed_plain"].append(
            build(f"s3://{bucket}/listed", opts, key_index=False))
        rounds["build_listed"].append(build(f"s3://{bucket}/listed", opts, key_index=True))
        drop("indexed")
        rounds["build_indexed"].append(build(f"s3://{bucket}/indexed", opts, key_index=True))
        state.setdefault("build_loads", []).append(os.getloadavg()[0])
        print({k: round(v[-1], 2) for k, v in rounds.items()}, flush=True)
    for k, v in rounds.items():
        state[k] = statistics.median(v)
    state["build_rounds"] = rounds
    state["shard_bytes"], state["descriptor_bytes"] = index_size(ep, bucket)
    pages = ep.boto3().get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix="listed/", Delimiter="/")
    state["keys_indexed"] = args.rows * sum(
        o["Key"].endswith(".parquet") for page in pages for o in page.get("Contents", []))
    state["rebuilt"] = True
    print({k: state[k] for k in ("build_plain", "build_listed_plain", "build_listed",
                                 "build_indexed")})


def measure(ep: Any, bucket: str, ids: list[int], args: argparse.Namespace,
            readers: list[str], titles: list[str], state: dict[str, Any]) -> None:
    ep.delay = args.delay_ms / 1000
    present = set(ids)
    urls = {"pqindex + key index": f"s3://{bucket}/indexed",
            "pqindex + key index, LIST": f"s3://{bucket}/listed",
            "pqindex, no index": f"s3://{bucket}/plain",
            "DataFusion": f"s3://{bucket}/plain", "polars": f"s3://{bucket}/plain"}
    results = state.setdefault("results", {})
    for title, keys in _queries(ids):
        if title not in titles:
            continue
        where = (f"user_id = {keys[0]}" if len(keys) == 1
                 else f"user_id IN ({', '.join(map(str, keys))})")
        expected = len(set(keys) & present)
        for reader in readers:
            runs = [run(ep, reader, urls[reader], where, keys) for _ in range(args.rounds)]
            for r in runs:
                if r["rows"] != expected:
                    raise AssertionError(f"{reader} {title}: {r['rows']} rows, "
                                         f"expected {expected}")
            med = {k: statistics.median(r[k] for r in runs)
                   for k in ("ms", "requests", "round_trips", "data_files")}
            med["key_index"] = runs[-1].get("key_index")
            med["load"] = os.getloadavg()[0]
            med["rounds"] = args.rounds
            results[f"{title}|{reader}"] = med
            print(title, reader, {k: v for k, v in med.items() if k != "key_index"},
                  flush=True)


def section(args: argparse.Namespace, state: dict[str, Any]) -> str:
    results = state["results"]
    loads = state.get("loads", [])
    rounds: dict[int, list[str]] = {}
    for name, r in results.items():
        reader = name.split("|")[1]
        have = rounds.setdefault(int(r.get("rounds", args.rounds)), [])
        if reader not in have:
            have.append(reader)
    lines = [START, "## The key index: an unsorted key in many files on S3", ""]
    lines.append(
        f"`bench/key_index.py --files {args.files} --rows {args.rows} --rounds {args.rounds} "
        f"--delay-ms {args.delay_ms:g}`: {args.files:,} files of {args.rows:,} rows on moto "
        f"behind the proxy that adds {args.delay_ms:g} ms to every request; `user_id` unique "
        "and random across files (statistics rule no file out). Every run is a fresh "
        "process, cold; medians of the rounds"
        + ("" if len(rounds) < 2 else " (" + "; ".join(
            f"{n}: {', '.join(rs)}" for n, rs in sorted(rounds.items())) + ")")
        + "; requests and round trips from the proxy. "
        f"{os.cpu_count()} cores, 1-minute load average {min(loads):.2f} to "
        f"{max(loads):.2f} over the parts of the run (the machine is shared: timings are "
        f"noisy, imports not timed); {state.get('minutes', 0):.1f} min in all.")
    if args.files < 1000:
        lines.append(f"Scaled down from the issue's 1,000 files to {args.files} (machine "
                     "load).")
    lines += ["", "| query | reader | ms | requests | round trips | data files opened |",
              "| --- | --- | ---: | ---: | ---: | ---: |"]
    for title in TITLES:
        for reader in READERS:
            r = results.get(f"{title}|{reader}")
            if r is None:
                continue
            lines.append(f"| {title} | {reader} | {r['ms']:,.0f} | {r['requests']:,.0f} | "
                         f"{r['round_trips']:,.0f} | {r['data_files']:,.0f} |")
    ratios = [f"{t}: {results[f'{t}|{READERS[0]}']['ms'] / results[f'{t}|DataFusion']['ms']:.3f}×"
              for t in TITLES if f"{t}|{READERS[0]}" in results and f"{t}|DataFusion" in results]
    lines += ["", "pqindex + key index against DataFusion (time ratio): " + ", ".join(ratios)
              + "."]
    keys_total = state.get("keys_indexed", args.files * args.rows)
    sb, bp, bl, bi = (state["shard_bytes"], state["build_plain"], state["build_listed"],
                      state["build_indexed"])
    blp = state.get("build_listed_plain", bp)
    text = (f"Index: {sb:,} bytes of shards for {keys_total:,} keys "
            f"({sb / keys_total:.1f} bytes per key, the 8-byte key included), "
            f"and {state['descriptor_bytes']:,} bytes of descriptor in the manifest. Build: "
            f"`pqindex manifest` {blp:.1f} s, with `--key-index user_id` "
            f"{bl:.1f} s ({bl / blp:.2f}×); the index added to "
            f"the pipeline's commit-point manifest {bi:.1f} s "
            f"({bi / bp:.2f}× `pqindex manifest`).")
    if "append" in state:
        text += (f" Append: 10 files added, `--key-index` again (a delta shard, manifest "
                 f"refreshed) {state['append']:.1f} s; `--compact-key-index` (the delta "
                 f"merged) {state['compact']:.1f} s.")
    lines += ["", text]
    lines += local_section(args, state)
    lines += ["", END]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delay-ms", type=float, default=25.0)
    ap.add_argument("--no-doc", action="store_true")
    ap.add_argument("--moto-port", type=int, help="a moto server kept between parts")
    ap.add_argument("--state", help="JSON file gathering the parts' results")
    ap.add_argument("--phase", choices=["all", "lake", "setup", "query", "rebuild", "append",
                                        "doc"],
                    default="all")
    ap.add_argument("--readers", help="a ;-separated list (default: all)")
    ap.add_argument("--queries", help="comma list of titles (default: all)")
    ap.add_argument("--local", help="a directory: the local-files run (setup, query)")
    ap.add_argument("--also", help="another part's --state to fold into the section")
    ap.add_argument("--child")
    ap.add_argument("--url")
    ap.add_argument("--endpoint")
    ap.add_argument("--where")
    ap.add_argument("--keys")
    args = ap.parse_args()
    if args.child:
        _child(args.child, args.url, args.endpoint, args.where, json.loads(args.keys))
        return

    from docsection import replace_section
    from s3_server import S3Endpoint

    state_path = Path(args.state) if args.state else None
    state: dict[str, Any] = (json.loads(state_path.read_text())
                             if state_path is not None and state_path.exists() else {})
    ids_path = state_path.with_suffix(".ids.npy") if state_path is not None else None
    state.setdefault("loads", []).append(os.getloadavg()[0])
    t_start = time.perf_counter()
    readers = args.readers.split(";") if args.readers else list(READERS)
    titles = args.queries.split(",") if args.queries else list(TITLES)
    if args.local:
        root = Path(args.local)
        state.setdefault("local_loads", []).append(os.getloadavg()[0])
        state["local_files"], state["local_rows"] = args.files, args.rows
        state["local_rounds"] = args.rounds
        readers = args.readers.split(";") if args.readers else list(LOCAL_READERS)
        if args.phase == "setup":
            local_setup(root, args, state)
        elif args.phase == "query":
            local_measure(root, args, readers, titles, state)
        state["local_loads"].append(os.getloadavg()[0])
        if state_path is not None:
            state_path.write_text(json.dumps(state))
        return
    if args.also:
        state.update({k: v for k, v in json.loads(Path(args.also).read_text()).items()
                      if k.startswith("local")})
    ep = None
    if args.phase != "doc":
        ep = (_attach(args.moto_port) if args.moto_port
              else S3Endpoint(separate_process=True))
    try:
        if args.phase in ("all", "setup", "lake"):
            bucket = ep.new_bucket(BUCKET) if args.phase == "all" else BUCKET
            if args.phase != "all":
                ep.boto3().create_bucket(Bucket=bucket)
            state["bucket"] = bucket
            if args.phase == "lake":  # the files alone (nothing timed: `rebuild` builds)
                with tempfile.TemporaryDirectory() as tmp:
                    ids = write_lake(ep, bucket, args.files, args.rows, Path(tmp))
            else:
                ids = setup(ep, bucket, args, state)
            if ids_path is not None:
                import numpy as np

                np.save(ids_path, np.array(ids, dtype=np.int64))
        else:
            bucket = state.get("bucket", BUCKET)
            if args.phase != "doc":
                import numpy as np

                assert ids_path is not None, "--state: the setup part's"
                ids = [int(x) for x in np.load(ids_path)]
        if args.phase in ("all", "query"):
            measure(ep, bucket, ids, args, readers, titles, state)
        if args.phase == "rebuild":
            rebuild(ep, bucket, args, state)
        if args.phase in ("all", "append"):
            state["append"], state["compact"] = append_and_compact(
                ep, bucket, args.rows, ep.storage_options())
    finally:
        if ep is not None:
            ep.stop()
        # Saved even when a part fails: the runs before the failure are kept.
        state["loads"].append(os.getloadavg()[0])
        state["minutes"] = state.get("minutes", 0.0) + (time.perf_counter() - t_start) / 60
        if state_path is not None:
            state_path.write_text(json.dumps(state))
    if args.phase in ("all", "doc"):
        text = section(args, state)
        print(text)
        if not args.no_doc:
            replace_section(DOC, START, END, text)


if __name__ == "__main__":
    main()
