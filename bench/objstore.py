"""Object storage: pqindex against pyarrow.dataset, polars and DataFusion on S3.

    .venv/bin/python bench/objstore.py [--files 1000] [--rounds 3] [--delays 20,50]

An S3 server (moto, on 127.0.0.1) behind a proxy that delays every request by
``--delays`` milliseconds and logs it (tests/s3_server.py). Three datasets: one
2M-row file (4 row groups, 20k-row pages), ``--files`` files of 20k rows,
sorted by ``id`` across files, and the same files beside a dataset manifest (``id`` = 2 x row number, so odd values are absent
inside the range). Four queries: a point lookup, a 1,000-row range, an absent
value, one full column. Each reader runs each query cold (a fresh dataset /
filesystem / context, pqindex's metadata cache cleared; the objects are the
same) and warm (the same one again). Latency is the median of ``--rounds``;
requests, response bytes and round trips come from the proxy (a round trip is a
request that arrived while no other was in flight: the sequential waves the
reader waited for). Results replace the section between
``<!-- objstore:start -->`` and ``<!-- objstore:end -->`` of docs/benchmarks.md.
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
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

import pqindex  # noqa: E402
from pqindex.dataset.manifest import write_manifest  # noqa: E402
from pqindex.io.cache import metadata_cache  # noqa: E402
from s3_server import REGION, S3Endpoint  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- objstore:start -->", "<!-- objstore:end -->"
CATEGORIES = ["able", "baker", "charlie", "dog", "easy", "fox", "george", "how"]


def _table(first_row: int, rows: int) -> pa.Table:
    rng = np.random.default_rng(first_row)
    i = np.arange(first_row, first_row + rows, dtype=np.int64)
    return pa.table({
        "id": 2 * i,
        "value": rng.normal(size=rows),
        "category": pa.array(np.array(CATEGORIES)[i % len(CATEGORIES)]),
    })


DATASETS = ("one", "many", "manifest")


def upload(ep: S3Endpoint, bucket: str, files: int, tmp: Path,
           wanted: Collection[str] = DATASETS) -> dict[str, dict[str, Any]]:
    """The datasets named in ``wanted`` (of DATASETS); returns name -> {prefix, rows}."""
    client = ep.boto3()
    out: dict[str, dict[str, Any]] = {}
    if "one" in wanted:
        one = tmp / "one.parquet"
        pqindex.write_table(_table(0, 2_000_000), one, sort_by="id", row_group_rows=500_000,
                            page_rows=20_000)
        client.upload_file(str(one), bucket, "one/data.parquet")
        out["one file, 2M rows"] = {"prefix": "one/data.parquet", "rows": 2_000_000}
    if not {"many", "manifest"} & set(wanted):
        return out
    part = tmp / "part.parquet"
    for k in range(files):
        pqindex.write_table(_table(k * 20_000, 20_000), part, sort_by="id",
                            row_group_rows=20_000, page_rows=20_000)
        client.upload_file(str(part), bucket, f"many/part-{k:05d}.parquet")
        if "manifest" in wanted:
            # The same files again beside a dataset manifest (pqindex prunes files with it).
            client.copy_object(
                Bucket=bucket, Key=f"manifest/part-{k:05d}.parquet",
                CopySource={"Bucket": bucket, "Key": f"many/part-{k:05d}.parquet"})
    if "many" in wanted:
        out[f"{files} files × 20k rows"] = {"prefix": "many/", "rows": files * 20_000}
    if "manifest" in wanted:
        write_manifest(f"s3://{bucket}/manifest/", ep.storage_options())
        out[f"{files} files × 20k rows, with a manifest"] = {"prefix": "manifest/",
                                                             "rows": files * 20_000}
    return out


def queries(rows: int) -> dict[str, tuple[str | None, list[str], int]]:
    """name -> (where, columns, expected rows)."""
    mid = rows // 2 + 123
    return {
        "point": (f"id = {2 * mid}", ["id", "value", "category"], 1),
        "range 1,000": (f"id BETWEEN {2 * mid} AND {2 * (mid + 999)}",
                        ["id", "value", "category"], 1000),
        "absent": (f"id = {2 * mid + 1}", ["id", "value", "category"], 0),
        "full column": (None, ["value"], rows),
    }


# ------------------------------------------------------------------ readers


class Reader:
    name = ""

    def __init__(self, ep: S3Endpoint, bucket: str, prefix: str) -> None:
        self.ep, self.bucket, self.prefix = ep, bucket, prefix

    def cold(self) -> None:
        """Forget everything (a new process would)."""

    def run(self, where: str | None, columns: list[str]) -> int:
        raise NotImplementedError


class PqIndex(Reader):
    name = "pqindex"

    def cold(self) -> None:
        metadata_cache().clear()
        self.ds = pqindex.dataset(f"s3://{self.bucket}/{self.prefix}",
                                  storage_options=self.ep.storage_options())

    def run(self, where: str | None, columns: list[str]) -> int:
        scan = self.ds.scan(columns=columns, where=where)
        t = scan.to_table()
        self.report = scan.report  # its own counts, printed beside the proxy's
        return t.num_rows


def _worker(conn: Any) -> None:
    """pqindex in a process of its own (``--pqindex-process``): one dataset at a time."""
    ds: Any = None
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            return
        if msg[0] == "cold":
            metadata_cache().clear()
            ds = pqindex.dataset(msg[1], storage_options=msg[2])
            conn.send(None)
        else:
            scan = ds.scan(columns=msg[2], where=msg[1])
            n = scan.to_table().num_rows
            conn.send((n, scan.report))


class _Child:
    """The one pqindex worker process, started on first use."""

    conn: Any = None
    proc: Any = None

    @classmethod
    def ask(cls, *msg: Any) -> Any:
        if cls.conn is None:
            import multiprocessing as mp

            ctx = mp.get_context("spawn")
            cls.conn, child = ctx.Pipe()
            cls.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
            cls.proc.start()
        cls.conn.send(msg)
        return cls.conn.recv()

    @classmethod
    def stop(cls) -> None:
        if cls.conn is not None:
            cls.conn.send(("stop",))
            cls.proc.join(10)
            cls.conn = cls.proc = None


class PqIndexProcess(PqIndex):
    """pqindex run in another process: its Python work does not share the GIL with
    the proxy (the other readers release it in their Rust/C++ code)."""

    def cold(self) -> None:
        _Child.ask("cold", f"s3://{self.bucket}/{self.prefix}", self.ep.storage_options())

    def run(self, where: str | None, columns: list[str]) -> int:
        n, self.report = _Child.ask("run", where, columns)
        return int(n)


def _arrow_filter(where: str | None) -> Any:
    import pyarrow.compute as pc

    if where is None:
        return None
    if "BETWEEN" in where:
        lo, hi = (int(x) for x in where.split("BETWEEN")[1].split("AND"))
        return (pc.field("id") >= lo) & (pc.field("id") <= hi)
    return pc.field("id") == int(where.split("=")[1])


class PyArrow(Reader):
    name = "pyarrow.dataset"

    def cold(self) -> None:
        import pyarrow.dataset as pads
        from pyarrow import fs

        s3fs = fs.S3FileSystem(endpoint_override=self.ep.url, scheme="http",
                               access_key="testing", secret_key="testing", region=REGION)
        self.ds = pads.dataset(f"{self.bucket}/{self.prefix}".rstrip("/"), filesystem=s3fs,
                               format="parquet")

    def run(self, where: str | None, columns: list[str]) -> int:
        return int(self.ds.to_table(columns=columns, filter=_arrow_filter(where)).num_rows)


class Polars(Reader):
    name = "polars"

    def run(self, where: str | None, columns: list[str]) -> int:
        import polars as pl

        opts = {"aws_endpoint_url": self.ep.url, "aws_access_key_id": "testing",
                "aws_secret_access_key": "testing", "aws_region": REGION,
                "aws_allow_http": "true"}
        path = f"s3://{self.bucket}/{self.prefix}"
        if path.endswith("/"):
            path += "*.parquet"
        lf = pl.scan_parquet(path, storage_options=opts)
        if where is not None:
            if "BETWEEN" in where:
                lo, hi = (int(x) for x in where.split("BETWEEN")[1].split("AND"))
                lf = lf.filter(pl.col("id").is_between(lo, hi))
            else:
                lf = lf.filter(pl.col("id") == int(where.split("=")[1]))
        return int(lf.select(columns).collect().height)


class DataFusion(Reader):
    name = "DataFusion"

    def cold(self) -> None:
        from datafusion import SessionConfig, SessionContext
        from datafusion.object_store import AmazonS3

        cfg = (SessionConfig()
               .set("datafusion.execution.parquet.pushdown_filters", "true")
               .set("datafusion.execution.parquet.enable_page_index", "true"))
        self.ctx = SessionContext(cfg)
        store = AmazonS3(bucket_name=self.bucket, region=REGION, access_key_id="testing",
                         secret_access_key="testing", endpoint=self.ep.url, allow_http=True)
        self.ctx.register_parquet("t", f"s3://{self.bucket}/{self.prefix}", object_store=store)

    def run(self, where: str | None, columns: list[str]) -> int:
        sql = f"SELECT {', '.join(columns)} FROM t" + (f" WHERE {where}" if where else "")
        return int(self.ctx.sql(sql).to_arrow_table().num_rows)


READERS: list[type[Reader]] = [PqIndex, PyArrow, Polars, DataFusion]


# ------------------------------------------------------------------ measuring


def measure(ep: S3Endpoint, reader: Reader, mode: str, where: str | None, columns: list[str],
            expected: int, rounds: int) -> dict[str, Any]:
    times, reqs, nbytes, waves, own = [], [], [], [], []
    reader.cold()
    if mode == "warm":
        reader.run(where, columns)  # metadata read once
    for _ in range(rounds):
        ep.reset_log()
        t0 = time.perf_counter()
        if mode == "cold":
            reader.cold()  # counted: listing and schema inference are part of a cold query
        n = reader.run(where, columns)
        times.append(time.perf_counter() - t0)
        if n != expected:
            raise AssertionError(f"{reader.name}: {n} rows, expected {expected}")
        reqs.append(len(ep.requests))
        nbytes.append(ep.body_bytes)
        waves.append(ep.waves)
        rep = getattr(reader, "report", None)
        if rep is not None:
            own.append(f"{rep.requests} req {rep.round_trips} rt, plan {rep.plan_seconds * 1e3:.0f}"
                       f" fetch {rep.fetch_seconds * 1e3:.0f} decode "
                       f"{rep.decode_seconds * 1e3:.0f} ms")
    return {"ms": statistics.median(times) * 1000, "requests": statistics.median(reqs),
            "bytes": statistics.median(nbytes), "round_trips": statistics.median(waves),
            "load": os.getloadavg()[0], "reported": ", ".join(own)}


def _kb(n: float) -> str:
    return f"{n / 1024:,.0f} KiB" if n < 10 * 1024 * 1024 else f"{n / 1024 / 1024:,.1f} MiB"


def render(results: list[dict[str, Any]], args: argparse.Namespace, seconds: float) -> str:
    loads = sorted(r["load"] for r in results) or [0.0]
    lines = [
        START,
        "## Object storage (bench/objstore.py)",
        "",
        f"{dt.date.today()}, {platform.machine()}, Python {platform.python_version()}, "
        f"moto on 127.0.0.1 ({'a thread of the benchmark' if args.moto_in_process else 'its own process'}) "
        "behind a proxy adding a fixed delay per request; pqindex ran in "
        f"{'a process of its own' if args.pqindex_process else 'the benchmark process'}; "
        f"median of {args.rounds} rounds; run took {seconds:.0f} s on a shared 2-core machine "
        f"(1-minute load average {loads[0]:.1f}–{loads[-1]:.1f}, median "
        f"{statistics.median(loads):.1f}, sampled after each measurement). "
        "Cold: a fresh dataset / filesystem / context and pqindex's metadata cache cleared "
        "(the objects are the same, unlike the issue's table). Warm: the same one again. "
        "Requests, response bytes and round trips are counted by the proxy (a round trip = "
        "a request that arrived while none was in flight).",
        "",
    ]
    for delay in sorted({r["delay"] for r in results}):
        for data in dict.fromkeys(r["data"] for r in results):
            lines += [f"### {data}, {delay} ms per request", "",
                      "| query | mode | " + " | ".join(c.name for c in READERS) + " |",
                      "|---|---|" + "---:|" * len(READERS)]
            rows = [r for r in results if r["delay"] == delay and r["data"] == data]
            for q in dict.fromkeys(r["query"] for r in rows):
                for mode in ("cold", "warm"):
                    cells = []
                    for c in READERS:
                        m = next((r for r in rows if r["query"] == q and r["mode"] == mode
                                  and r["reader"] == c.name), None)
                        cells.append("—" if m is None else
                                     f"{m['ms']:,.0f} ms, {m['requests']:.0f} req, "
                                     f"{m['round_trips']:.0f} rt, {_kb(m['bytes'])}")
                    lines.append(f"| {q} | {mode} | " + " | ".join(cells) + " |")
            lines.append("")
    lines.append(END)
    return "\n".join(lines)


def write_doc(section: str) -> None:
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOC.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delays", default="20,50", help="milliseconds, comma-separated")
    ap.add_argument("--readers", default=",".join(c.name for c in READERS))
    ap.add_argument("--no-doc", action="store_true", help="print, don't edit docs/")
    ap.add_argument("--data", default=",".join(DATASETS),
                    help="datasets, comma-separated, of: " + ", ".join(DATASETS))
    ap.add_argument("--queries", default="point,range 1,000,absent,full column",
                    help="queries, comma-separated (names as in the tables; "
                         "'range 1,000' is matched by 'range')")
    ap.add_argument("--modes", default="cold,warm")
    ap.add_argument("--pqindex-process", action="store_true",
                    help="run pqindex in a child process (its Python work then does not "
                         "compete with the proxy for this process's GIL)")
    ap.add_argument("--moto-in-process", action="store_true",
                    help="run moto in a thread of this process (before 2026-11-25: it then "
                         "competes for the GIL with the Python readers)")
    args = ap.parse_args()
    wanted = set(args.readers.split(","))
    if args.pqindex_process:
        READERS[0] = PqIndexProcess
    t0 = time.perf_counter()
    ep = S3Endpoint(separate_process=not args.moto_in_process)
    results: list[dict[str, Any]] = []
    try:
        bucket = ep.new_bucket("bench")
        with tempfile.TemporaryDirectory() as tmp:
            datasets = upload(ep, bucket, args.files, Path(tmp), args.data.split(","))
        print(f"uploaded in {time.perf_counter() - t0:.0f} s", flush=True)
        for delay in (int(d) for d in args.delays.split(",")):
            ep.delay = delay / 1000
            for data, d in datasets.items():
                for q, (where, columns, expected) in queries(d["rows"]).items():
                    if not any(w and q.startswith(w) for w in args.queries.split(",")):
                        continue
                    for cls in READERS:
                        if cls.name not in wanted:
                            continue
                        for mode in args.modes.split(","):
                            reader = cls(ep, bucket, d["prefix"])
                            m = measure(ep, reader, mode, where, columns, expected,
                                        args.rounds)
                            m.update(delay=delay, data=data, query=q, mode=mode,
                                     reader=cls.name)
                            results.append(m)
                            print(f"{delay} ms | {data} | {q} | {mode} | {cls.name}: "
                                  f"{m['ms']:.0f} ms, {m['requests']:.0f} req, "
                                  f"{m['round_trips']:.0f} rt, {_kb(m['bytes'])}, "
                                  f"load {m['load']:.1f}"
                                  + (f" (report: {m['reported']})" if m["reported"] else ""),
                                  flush=True)
    finally:
        _Child.stop()
        ep.stop()
    section = render(results, args, time.perf_counter() - t0)
    if args.no_doc:
        print(section)
    else:
        write_doc(section)
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
