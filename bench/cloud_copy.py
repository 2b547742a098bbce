"""``add_indexes`` on a large Azure / GCS object: server side vs moving the data.

Azurite and fake-gcs-server on 127.0.0.1, each behind tests/s3_server.py's
counting proxy (bytes up and down, requests). A ``--mib`` MiB object (pyarrow,
uncompressed, no page index), ``add_indexes(url, distinct=["k"])``:

* Azure: the committed blocks named again plus one tail block
  (``write.cloud_copy``), vs pqindex's streaming path (the server-side plan
  turned off), vs GET to a file + local ``add_indexes`` + PUT (obstore);
* GCS: compose of the object and the uploaded tail, vs GET to a file + local
  ``add_indexes`` + upload (the emulator's JSON API: it does not take
  obstore's XML PUT, so pqindex's streaming path cannot run against it).

Before each run the original object is put back (obstore multipart: blocks on
Azure). One warm-up round, then ``--runs`` interleaved rounds (order
rotating); medians. The result replaces the section between the markers in
docs/benchmarks.md. The machine is shared: the load average is recorded.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import io
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- cloud-copy:start -->", "<!-- cloud-copy:end -->"


def log(msg: str) -> None:
    print(f"[cloud_copy] {msg}", file=sys.stderr, flush=True)


def _object(mib: int) -> bytes:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = mib * (1 << 20) // 24
    rng = np.random.default_rng(1)
    t = pa.table({"id": np.arange(n), "k": rng.integers(0, 5000, n), "x": rng.normal(size=n)})
    buf = io.BytesIO()
    pq.write_table(t, buf, compression="none", use_dictionary=False, row_group_size=1_000_000)
    return buf.getvalue()


def _rounds(fns: dict[str, Callable[[], dict[str, Any]]], restore: Callable[[], None],
            proxy: Any, runs: int, store: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in fns}
    names = list(fns)
    for i in range(runs + 1):
        for name in names[i % len(names):] + names[: i % len(names)]:
            restore()
            with proxy.log.lock:
                proxy.log.requests.clear()
                proxy.log.body_bytes = 0
            t0 = time.perf_counter()
            res = fns[name]()
            secs = time.perf_counter() - t0
            if i == 0:
                continue  # warm-up
            with proxy.log.lock:
                up = sum(r.length for r in proxy.log.requests)
                res.update(seconds=secs, up=up, down=proxy.log.body_bytes,
                           requests=len(proxy.log.requests))
            out[name].append(res)
            log(f"{store} {name}: {secs:.2f} s, up {up / 2**20:.2f} MiB, "
                f"down {res['down'] / 2**20:.1f} MiB, {res['requests']} requests")
    return out


def _local(get: Callable[[Path], None], put: Callable[[Path], None]) -> dict[str, Any]:
    import pqindex

    with tempfile.TemporaryDirectory() as d:
        local = Path(d) / "big.parquet"
        get(local)
        [r] = pqindex.add_indexes(str(local), distinct=["k"])
        put(local)
        return {"reported_up": r.bytes_after, "copied": 0, "size": r.bytes_after}


def bench_azure(original: bytes, runs: int) -> dict[str, list[dict[str, Any]]]:
    import obstore as obs
    from obstore.store import AzureStore

    import pqindex
    from azurite_server import ACCOUNT, ACCOUNT_KEY, Azurite, azurite_binary
    from pqindex.write import remote_index
    from s3_server import _Log, _Proxy

    binary = azurite_binary()
    if binary is None:
        raise SystemExit("Azurite is not installed (PQINDEX_AZURITE)")
    az = Azurite(binary)
    proxy = _Proxy(("127.0.0.1", az.port), _Log())
    try:
        container = az.new_container("bench")
        store = az.store(container)
        endpoint = f"http://127.0.0.1:{proxy.port}/{ACCOUNT}"
        counted = AzureStore(container, account_name=ACCOUNT, access_key=ACCOUNT_KEY,
                             endpoint=endpoint, allow_http=True)
        so = {"account_name": ACCOUNT, "account_key": ACCOUNT_KEY, "allow_http": "true",
              "endpoint": endpoint}
        url = f"az://{container}/big.parquet"

        def restore() -> None:
            obs.put(store, "big.parquet", io.BytesIO(original), use_multipart=True)

        def server() -> dict[str, Any]:
            [r] = pqindex.add_indexes(url, distinct=["k"], storage_options=so)
            return {"reported_up": r.bytes_uploaded, "copied": r.bytes_copied_server_side,
                    "size": r.bytes_after}

        def stream() -> dict[str, Any]:
            plan = remote_index.server_plan
            remote_index.server_plan = lambda *a, **k: None  # type: ignore[assignment]
            try:
                return server()
            finally:
                remote_index.server_plan = plan

        def get(p: Path) -> None:
            with open(p, "wb") as f:
                for chunk in obs.get(counted, "big.parquet"):
                    f.write(chunk)

        def put(p: Path) -> None:
            obs.put(counted, "big.parquet", p)

        return _rounds({"server": server, "stream": stream,
                        "baseline": lambda: _local(get, put)}, restore, proxy, runs, "azure")
    finally:
        proxy.stop()
        az.stop()


def bench_gcs(original: bytes, runs: int) -> dict[str, list[dict[str, Any]]]:
    import json
    import socket
    import subprocess
    import urllib.parse
    import urllib.request

    import pqindex
    from gcs_server import Gcs, _binary
    from s3_server import _Log, _Proxy

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proxy = _Proxy(("127.0.0.1", port), _Log())
    proc = subprocess.Popen(
        [_binary(), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), "-backend",
         "memory", "-public-host", f"127.0.0.1:{proxy.port}", "-log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        g = Gcs(f"http://127.0.0.1:{proxy.port}", proxy)
        direct = f"http://127.0.0.1:{port}"
        bucket = g.new_bucket("bench")
        url = f"gs://{bucket}/big.parquet"

        def upload(data: bytes, base: str) -> None:
            q = urllib.parse.urlencode({"uploadType": "media", "name": "big.parquet"})
            req = urllib.request.Request(f"{base}/upload/storage/v1/b/{bucket}/o?{q}",
                                         method="POST", data=data,
                                         headers={"Content-Type": "application/octet-stream"})
            with urllib.request.urlopen(req, timeout=300) as res:
                json.loads(res.read())

        def server() -> dict[str, Any]:
            [r] = pqindex.add_indexes(url, distinct=["k"], storage_options=g.options)
            return {"reported_up": r.bytes_uploaded, "copied": r.bytes_copied_server_side,
                    "size": r.bytes_after}

        def get(p: Path) -> None:
            p.write_bytes(g.get(bucket, "big.parquet"))

        def put(p: Path) -> None:
            upload(p.read_bytes(), g.url)

        return _rounds({"server": server, "baseline": lambda: _local(get, put)},
                       lambda: upload(original, direct), proxy, runs, "gcs")
    finally:
        proc.terminate()
        proc.wait(10)
        proxy.stop()


def render(size: int, az: dict[str, list[dict[str, Any]]], gcs: dict[str, list[dict[str, Any]]],
           load: list[tuple[float, float, float]], runs: int, took: float) -> str:
    when = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    labels = {
        ("azure", "server"): "Azure: `add_indexes(url)`: committed blocks named again + tail block",
        ("azure", "stream"): "Azure: `add_indexes(url)`, streaming path",
        ("azure", "baseline"): "Azure: GET to a file + `add_indexes` + PUT",
        ("gcs", "server"): "GCS: `add_indexes(url)`: compose(object, tail object)",
        ("gcs", "baseline"): "GCS: GET to a file + `add_indexes` + upload",
    }
    lines = [
        "## add_indexes on Azure and GCS objects: server side vs moving the data", "",
        f"Produced by `bench/cloud_copy.py --runs {runs}` on {when} in {took / 60:.1f} min: "
        f"a {size / 2**20:.0f} MiB object (pyarrow, uncompressed, int64 `id`, `k`, float "
        "`x`), `add_indexes(url, distinct=[\"k\"])`; Azurite 3.35 and fake-gcs-server on "
        "127.0.0.1 behind tests/s3_server.py's counting proxy (no added delay). Object put "
        "back before each run; one warm-up round, then interleaved rounds; medians. Load "
        f"average {load[0][0]:.1f} / {load[0][1]:.1f} / {load[0][2]:.1f} at the start, "
        f"{load[1][0]:.1f} / {load[1][1]:.1f} / {load[1][2]:.1f} at the end, "
        f"{os.cpu_count()} cores shared with other jobs: **noisy**.", "",
        "| approach | median time | uploaded | downloaded | kept server side | requests "
        "| uploaded / object |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for store, res in (("azure", az), ("gcs", gcs)):
        for name, rs in res.items():
            if not rs:
                continue
            up = statistics.median(r["up"] for r in rs)
            lines.append(
                f"| {labels[(store, name)]} | {statistics.median(r['seconds'] for r in rs):.2f} s "
                f"| {up / 2**10:,.1f} KiB | {statistics.median(r['down'] for r in rs) / 2**20:.1f}"
                f" MiB | {statistics.median(r['copied'] for r in rs) / 2**20:.1f} MiB "
                f"| {statistics.median(r['requests'] for r in rs):.0f} "
                f"| {100 * up / size:.3f}% |")
    lines += [
        "",
        "Only the new tail (and the Azure block list or the GCS compose request) goes up; "
        "what comes down is the tail and column `k`, which the distinct index is built "
        "from. *Kept server side* is the old object, which stays where it is: on Azure "
        "nothing is even copied (the block list names the blob's committed blocks again), "
        "GCS composes it with the uploaded tail object. The object grows by the new tail "
        "(the old footer stays as dead bytes). There is no GCS streaming row: "
        "fake-gcs-server answers obstore's XML PUT with 400 (invalid uploadType), so "
        "pqindex's streaming path cannot run against it; the GET + local + upload row "
        "stands in. The emulators keep objects in memory on this machine, so these times "
        "are their work plus the reads, not a real store's.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--mib", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-write", action="store_true", help="print, do not edit the doc")
    args = ap.parse_args()
    t0 = time.perf_counter()
    load = [os.getloadavg()]
    original = _object(args.mib)
    log(f"object of {len(original) / 2**20:.1f} MiB")
    az = bench_azure(original, args.runs)
    gcs = bench_gcs(original, args.runs)
    load.append(os.getloadavg())
    text = render(len(original), az, gcs, load, args.runs, time.perf_counter() - t0)
    print(text)
    if not args.no_write:
        doc = DOC.read_text()
        section = f"{START}\n{text}{END}"
        if START in doc:
            doc = doc[: doc.index(START)] + section + doc[doc.index(END) + len(END):]
        else:
            doc = doc.rstrip("\n") + "\n\n" + section + "\n"
        DOC.write_text(doc)


if __name__ == "__main__":
    main()
