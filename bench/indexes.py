"""Embedded indexes: what they save on a many-file dataset, and what writing them costs.

    .venv/bin/python bench/indexes.py [--files 50] [--rows 200000] [--runs 5] [--write-files 3]
    .venv/bin/python bench/indexes.py --files 8 --rows 50000 --runs 3     # quick run

Writes (or reuses) three copies of one dataset under ``data/bench/indexes-<files>x<rows>/``
(sorted by ``id``; columns id, ts, category (20 values + 'rare' in 10 rows), user_id,
amount, payload):

* ``a/``: ``pqindex.write_table`` with indexes={"distinct": ["category"], "bloom":
  ["user_id"], "zone_maps": ["amount", "id"], "hll": ["user_id"]};
* ``b/``: ``pqindex.write_table`` without embedded indexes (page index, truncation);
* ``c/``: plain ``pyarrow.parquet.write_table`` (zstd, its defaults).

Queries: an absent category value, the rare category value, a user_id point lookup,
and ``sum(amount), count(*)`` with a range on id. Readers: pqindex on (a) and (b),
DuckDB and DataFusion on (a). Each run opens a fresh dataset / connection / context
(the OS page cache stays warm); the median of ``--runs`` runs after one warm-up.
Bytes: pqindex's report, and for every reader the ``rchar`` delta of /proc/self/io
(helpers of bench/selective.py).

Write throughput: ``pqindex.write_table`` (page index + truncation + the embedded
indexes above, data already sorted: ``presorted=True``) against plain
``pyarrow.parquet.write_table`` with zstd, on the same tables, median of 3.

Replaces the section between ``<!-- indexes:start -->`` and ``<!-- indexes:end -->``
of ``docs/benchmarks.md`` (other sections are kept).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pqindex
from selective import _rchar_overhead, rchar

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "data" / "bench"
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- indexes:start -->", "<!-- indexes:end -->"

SEED = 20240707
FORMAT_VERSION = 3  # 3: region format 2 (directory at the end)
CATEGORIES = [
    "able", "baker", "charlie", "dog", "easy", "fox", "george", "how", "item", "jig",
    "king", "love", "mike", "nan", "oboe", "peter", "queen", "roger", "sugar", "tare",
]  # fmt: skip
# 'absent' (able < absent < baker) and 'rare' (queen < rare < roger) lie inside every
# page's [min, max]: only a dictionary or an embedded distinct set rules them out.
RARE_ROWS = 10
TS_BASE_US = 1_700_000_000_000_000
PAYLOAD_CHARS = 64
INDEXES = {
    "distinct": ["category"],
    "bloom": ["user_id"],
    "zone_maps": ["amount", "id"],
    "hll": ["user_id"],
}
PROJECTION = ["id", "ts", "amount"]
WRITE_TARGET = 0.8


# ---------------------------------------------------------------- data


def file_table(f: int, rows: int, rare: np.ndarray) -> pa.Table:
    """File ``f``: ids [f*rows, (f+1)*rows), already sorted by id."""
    rng = np.random.default_rng([SEED, f])
    start = f * rows
    ids = np.arange(start, start + rows, dtype=np.int64)
    ts = TS_BASE_US + ids * 1000 + rng.integers(0, 1000, rows)
    cat_idx = rng.integers(0, len(CATEGORIES), rows).astype(np.int32)
    local = rare[(rare >= start) & (rare < start + rows)] - start
    cat_idx[local] = len(CATEGORIES)
    category = pa.array([*CATEGORIES, "rare"]).take(pa.array(cat_idx))
    user_id = rng.integers(0, 10**12, rows, dtype=np.int64)
    amount = np.round(rng.random(rows) * 1000.0, 2)
    raw = rng.integers(0, 256, (rows, PAYLOAD_CHARS // 2), dtype=np.uint8)
    hexd = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    chars = np.empty((rows, PAYLOAD_CHARS), dtype=np.uint8)
    chars[:, 0::2] = hexd[raw >> 4]
    chars[:, 1::2] = hexd[raw & 15]
    offsets = np.arange(0, (rows + 1) * PAYLOAD_CHARS, PAYLOAD_CHARS, dtype=np.int32)
    payload = pa.StringArray.from_buffers(
        rows, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes())
    )
    return pa.table(
        {
            "id": ids,
            "ts": pa.array(ts, type=pa.timestamp("us", tz="UTC")),
            "category": category,
            "user_id": user_id,
            "amount": amount,
            "payload": payload,
        }
    )


def rare_rows(files: int, rows: int) -> np.ndarray:
    return np.sort(np.random.default_rng(SEED).choice(files * rows, RARE_ROWS, replace=False))


def write_variant(variant: str, t: pa.Table, path: Path) -> None:
    if variant == "a":
        pqindex.write_table(t, path, sort_by="id", presorted=True, indexes=INDEXES)
    elif variant == "b":
        pqindex.write_table(t, path, sort_by="id", presorted=True)
    else:
        pq.write_table(t, path, compression="zstd")


def generate(files: int, rows: int) -> Path:
    root = DATA_DIR / f"indexes-{files}x{rows}-v{FORMAT_VERSION}"
    done = root / "DONE"
    if done.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    rare = rare_rows(files, rows)
    t0 = time.perf_counter()
    for v in "abc":
        (root / v).mkdir(parents=True)
    for f in range(files):
        t = file_table(f, rows, rare)
        for v in "abc":
            write_variant(v, t, root / v / f"part-{f:05d}.parquet")
        if f % 10 == 9:
            print(
                f"  wrote {f + 1}/{files} files ({time.perf_counter() - t0:.0f}s)", file=sys.stderr
            )
    done.write_text("ok\n")
    return root


def dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.glob("*.parquet"))


# ---------------------------------------------------------------- queries


@dataclass(frozen=True)
class Query:
    name: str
    title: str
    where: str
    aggregate: bool = False


def make_queries(files: int, rows: int) -> list[Query]:
    total = files * rows
    row = int(total * 0.83) + 17
    f, i = divmod(row, rows)
    uid = int(file_table(f, rows, rare_rows(files, rows)).column("user_id")[i].as_py())
    lo = int(total * 0.213) + 11
    hi = int(total * 0.587) + 3
    return [
        Query("absent", "category = absent value", "category = 'absent'"),
        Query("rare", f"category = rare value ({RARE_ROWS} rows)", "category = 'rare'"),
        Query("user", "user_id point lookup", f"user_id = {uid}"),
        Query(
            "agg",
            "sum(amount), count(*), id range (37%)",
            f"id BETWEEN {lo} AND {hi}",
            aggregate=True,
        ),
    ]


def _sql(q: Query, table: str) -> str:
    if q.aggregate:
        return f"SELECT sum(amount) AS s, count(*) AS n FROM {table} WHERE {q.where}"
    return f"SELECT {', '.join(PROJECTION)} FROM {table} WHERE {q.where} ORDER BY id"


def _rows_result(t: pa.Table) -> tuple[int, int]:
    return t.num_rows, int(pc.sum(t.column("id")).as_py() or 0)


# ---------------------------------------------------------------- readers
# run(dir, query) -> (result, pqindex-reported bytes or None); a fresh reader per run.


def run_pqindex(d: Path, q: Query) -> tuple[Any, dict[str, Any]]:
    ds = pqindex.dataset(str(d))
    try:
        if q.aggregate:
            r = ds.aggregate(["sum(amount)", "count(*)"], where=q.where)
            rep = ds.last_aggregate_report
            return (round(r["sum(amount)"], 2), r["count(*)"]), {
                "from_metadata": rep.row_groups_from_metadata,
                "rg_read": rep.row_groups_read,
                "rg_skipped": rep.row_groups_skipped,
                "bytes": sum(of.stats.bytes_read for of in ds._open.values()),
                "requests": sum(of.stats.requests for of in ds._open.values()),
            }
        scan = ds.scan(columns=PROJECTION, where=q.where)
        t = scan.to_table()
        srep = scan.report
        return _rows_result(t), {
            "bytes": srep.bytes_read,
            "requests": srep.requests,
            "rg_read": srep.row_groups_read,
            "rg_total": srep.row_groups_total,
            "pages_read": srep.pages_read,
            "skipped": dict(srep.row_groups_skipped),
        }
    finally:
        ds.close()


def run_duckdb(d: Path, q: Query) -> tuple[Any, dict[str, Any]]:
    import duckdb

    con = duckdb.connect()
    try:
        con.execute("SET threads TO 2")
        sql = _sql(q, f"read_parquet('{d}/*.parquet')")
        if q.aggregate:
            s, n = con.execute(sql).fetchone()  # type: ignore[misc]
            return (round(s, 2) if s is not None else None, n), {}
        return _rows_result(con.sql(sql).to_arrow_table()), {}
    finally:
        con.close()


def run_datafusion(d: Path, q: Query) -> tuple[Any, dict[str, Any]]:
    import datafusion

    ctx = datafusion.SessionContext()
    ctx.register_parquet("t", str(d))
    t = ctx.sql(_sql(q, "t")).to_arrow_table()
    if q.aggregate:
        s, n = t.column("s")[0].as_py(), t.column("n")[0].as_py()
        return (round(s, 2) if s is not None else None, n), {}
    return _rows_result(t), {}


READERS: list[tuple[str, str, Callable[[Path, Query], tuple[Any, dict[str, Any]]]]] = [
    ("pqindex (a)", "a", run_pqindex),
    ("pqindex (b)", "b", run_pqindex),
    ("DuckDB (a)", "a", run_duckdb),
    ("DataFusion (a)", "a", run_datafusion),
]


@dataclass
class Measure:
    reader: str
    query: str
    ms: float
    rchar: int
    result: Any
    info: dict[str, Any]


def measure(root: Path, queries: list[Query], runs: int) -> list[Measure]:
    overhead = _rchar_overhead()
    out = []
    for q in queries:
        for name, variant, fn in READERS:
            d = root / variant
            fn(d, q)  # warm-up
            times, reads = [], []
            result: Any = None
            info: dict[str, Any] = {}
            for _ in range(runs):
                r0 = rchar()
                t0 = time.perf_counter()
                result, info = fn(d, q)
                times.append((time.perf_counter() - t0) * 1000)
                reads.append(rchar() - r0 - overhead)
            m = Measure(
                name, q.name, statistics.median(times), int(statistics.median(reads)), result, info
            )
            print(
                f"  {q.name:7s} {name:15s} {m.ms:9.1f} ms {m.rchar / 1e6:10.2f} MB  {result}",
                file=sys.stderr,
            )
            out.append(m)
    return out


# ---------------------------------------------------------------- write throughput


def measure_writes(files: int, rows: int, write_files: int, tmp: Path) -> dict[str, Any]:
    rare = rare_rows(files, rows)
    tables = [file_table(f, rows, rare) for f in range(min(write_files, files))]
    mb = sum(t.nbytes for t in tables) / 1e6
    n = sum(t.num_rows for t in tables)
    modes: dict[str, Callable[[pa.Table, Path], Any]] = {
        "pyarrow.parquet.write_table (zstd)": lambda t, p: pq.write_table(t, p, compression="zstd"),
        "pyarrow + page index + sorting_columns (zstd)": lambda t, p: pq.write_table(
            t,
            p,
            compression="zstd",
            write_page_index=True,
            sorting_columns=[pq.SortingColumn(0)],
        ),
        "pqindex, no embedded indexes": lambda t, p: pqindex.write_table(
            t, p, sort_by="id", presorted=True
        ),
        "pqindex + embedded indexes": lambda t, p: pqindex.write_table(
            t, p, sort_by="id", presorted=True, indexes=INDEXES
        ),
    }
    tmp.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"rows": n, "arrow_mb": mb, "modes": {}}
    for name, fn in modes.items():
        secs = []
        size = 0
        for _ in range(3):
            for p in tmp.glob("*"):
                p.unlink()
            t0 = time.perf_counter()
            for i, t in enumerate(tables):
                fn(t, tmp / f"w{i}.parquet")
            secs.append(time.perf_counter() - t0)
            size = sum(p.stat().st_size for p in tmp.glob("*.parquet"))
        res["modes"][name] = {"seconds": statistics.median(secs), "bytes": size}
        print(f"  write {name}: {statistics.median(secs):.2f}s", file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
    return res


# ---------------------------------------------------------------- report


def _fmt_bytes(b: int | None) -> str:
    if b is None:
        return "–"
    if b >= 10**6:
        return f"{b / 1e6:,.1f} MB"
    return f"{b / 1e3:,.1f} kB"


def render(
    args: argparse.Namespace,
    root: Path,
    queries: list[Query],
    ms: list[Measure],
    writes: dict[str, Any],
) -> str:
    lines: list[str] = []
    w = lines.append
    by = {(m.query, m.reader): m for m in ms}
    readers = [r for r, _, _ in READERS]
    w(START)
    w("## Embedded indexes (bench/indexes.py)")
    w("")
    w(
        f"Run {dt.date.today().isoformat()} on {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, pyarrow {pa.__version__}: "
        f"`{' '.join(['bench/indexes.py', *sys.argv[1:]])}`."
    )
    w("")
    w(
        f"{args.files} files × {args.rows:,} rows ({args.files * args.rows:,} rows), sorted by "
        "`id` across files; one row group per file, 20,000-row pages, zstd. (a) pqindex with "
        '`indexes={"distinct": ["category"], "bloom": ["user_id"], "zone_maps": '
        '["amount", "id"], "hll": ["user_id"]}`; (b) pqindex without embedded indexes; '
        '(c) plain `pyarrow.parquet.write_table(compression="zstd")`.'
    )
    w("")
    w("| copy | bytes | of which embedded region |")
    w("| --- | ---: | ---: |")
    for v, title in (("a", "(a) pqindex + embedded"), ("b", "(b) pqindex"), ("c", "(c) pyarrow")):
        region = 0
        if v == "a":
            for p in sorted((root / v).glob("*.parquet")):
                with pqindex.ParquetFile.open(str(p)) as pf:
                    loc = pf.key_value_metadata.get("pqindex.region")
                    region += int(loc.split(":")[1]) if loc else 0
        w(
            f"| {title} | {_fmt_bytes(dir_bytes(root / v))} | "
            f"{_fmt_bytes(region) if v == 'a' else '–'} |"
        )
    w("")
    w(
        f"### Latency (median of {args.runs} runs after 1 warm-up, a fresh dataset / "
        "connection / context per run, OS page cache warm; ms)"
    )
    w("")
    w("| query | " + " | ".join(readers) + " |")
    w("| --- |" + " ---: |" * len(readers))
    for q in queries:
        cells = [f"{by[(q.name, r)].ms:,.1f}" for r in readers]
        w(f"| {q.title} | " + " | ".join(cells) + " |")
    w("")
    w("### Bytes read (rchar delta of /proc/self/io; pqindex: its report in brackets)")
    w("")
    w("| query | " + " | ".join(readers) + " |")
    w("| --- |" + " ---: |" * len(readers))
    for q in queries:
        cells = []
        for r in readers:
            m = by[(q.name, r)]
            cell = _fmt_bytes(m.rchar)
            if "bytes" in m.info:
                cell += f" [{_fmt_bytes(m.info['bytes'])}, {m.info.get('requests')} req]"
            cells.append(cell)
        w(f"| {q.title} | " + " | ".join(cells) + " |")
    w("")
    w("### What pqindex did")
    w("")
    w("| query | copy | row groups read | skipped by | pages read | agg. from metadata |")
    w("| --- | --- | ---: | --- | ---: | ---: |")
    for q in queries:
        for r in ("pqindex (a)", "pqindex (b)"):
            i = by[(q.name, r)].info
            skipped = ", ".join(f"{k} {v}" for k, v in i.get("skipped", {}).items()) or (
                f"{i['rg_skipped']} (any level)" if "rg_skipped" in i else "–"
            )
            w(
                f"| {q.title} | {r[-3:]} | {i.get('rg_read', '–')} | {skipped} | "
                f"{i.get('pages_read', '–')} | {i.get('from_metadata', '–')} |"
            )
    w("")
    agree = all(len({repr(by[(q.name, r)].result) for r in readers}) == 1 for q in queries)
    w(f"All readers returned the same results: **{'yes' if agree else 'NO'}**.")
    w("")
    w(
        f"### Write throughput ({writes['rows']:,} rows, {writes['arrow_mb']:,.0f} MB of Arrow "
        "data, already sorted; median of 3)"
    )
    w("")
    base = writes["modes"]["pyarrow.parquet.write_table (zstd)"]["seconds"]
    w("| writer | seconds | rows/s | MB/s (Arrow) | file bytes | throughput vs pyarrow |")
    w("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, v in writes["modes"].items():
        s = v["seconds"]
        w(
            f"| {name} | {s:.2f} | {writes['rows'] / s:,.0f} | {writes['arrow_mb'] / s:,.0f} | "
            f"{_fmt_bytes(v['bytes'])} | {base / s:.2f}× |"
        )
    w("")
    ratio = base / writes["modes"]["pqindex + embedded indexes"]["seconds"]
    w("### Targets")
    w("")
    ok = ratio >= WRITE_TARGET
    w(
        f"* Write throughput of pqindex with page index + truncation + embedded indexes: "
        f"**{ratio:.2f}×** plain pyarrow (target ≥ {WRITE_TARGET}×): "
        f"**{'met' if ok else 'MISSED'}**."
    )
    a_abs = by[("absent", "pqindex (a)")].info
    w(
        f"* Absent value on (a): {a_abs['rg_read']} of {a_abs['rg_total']} row groups read, "
        f"{a_abs['requests']} requests for {args.files} files (tail reads only when "
        f"{'1 per file' if a_abs['requests'] == args.files else 'the region did not fit the tail'})."
    )
    for qn in ("absent", "rare", "user", "agg"):
        pa_ms = by[(qn, "pqindex (a)")].ms
        best = min((by[(qn, r)].ms, r) for r in readers if r != "pqindex (a)")
        verdict = "fastest" if pa_ms <= best[0] else f"slower than {best[1]} ({best[0]:.1f} ms)"
        w(f"* {qn}: pqindex (a) {pa_ms:.1f} ms — {verdict}.")
    w("")
    w(END)
    return "\n".join(lines) + "\n"


def write_section(section: str) -> None:
    if DOC.exists():
        text = DOC.read_text()
        if START in text and END in text:
            before = text[: text.index(START)]
            after = text[text.index(END) + len(END) :].lstrip("\n")
            text = before + section + ("\n" + after if after else "")
        else:
            text = text.rstrip("\n") + "\n\n" + section
    else:
        text = "# Benchmarks\n\n" + section
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--files", type=int, default=50)
    ap.add_argument("--rows", type=int, default=200_000, help="rows per file")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--write-files", type=int, default=3, help="files written per timing")
    ap.add_argument("--no-doc", action="store_true", help="don't update docs/benchmarks.md")
    args = ap.parse_args()
    root = generate(args.files, args.rows)
    queries = make_queries(args.files, args.rows)
    ms = measure(root, queries, args.runs)
    writes = measure_writes(args.files, args.rows, args.write_files, root / "write-tmp")
    section = render(args, root, queries, ms, writes)
    print(section)
    if not args.no_doc:
        write_section(section)


if __name__ == "__main__":
    main()
