"""Writer defaults: how the page size trades lookup bytes against index size and compression.

    .venv/bin/python bench/page_size_sweep.py [--rows 2000000] [--repeats 3] [--rounds 9]
        [--lookups 15] [--out docs/benchmarks.md]
    .venv/bin/python bench/page_size_sweep.py --rows 200000 --repeats 1 --rounds 1 --out -

Builds the table of ``bench/selective.py`` in memory (id sorted int64, ts, category:
20 values plus 'rare' in 10 rows, user_id, amount, a 100-character payload), then,
for every page setting of the sweep, writes it with ``pqindex.write_table(sort_by="id",
page_rows=…, page_bytes=…, compression="zstd")`` (1M-row row groups; everything else
the writer's defaults) and measures:

* the file's size, and its ColumnIndex and OffsetIndex bytes (the sums of
  ``column_index_length`` and ``offset_index_length`` over the footer's column chunks);
* the write time (median of ``--repeats`` writes, in rounds over the settings);
* pqindex reads, each through a fresh ``pqindex.dataset(path)`` (the OS page cache
  stays warm): ``--lookups`` point lookups ``id = k`` (all columns, and id, ts, amount)
  and as many 1,000-row ranges ``id BETWEEN a AND a + 999`` at random keys, the rare
  value ``category = 'rare'``, and a full scan of ``amount``. Bytes and requests are
  the scan report's (medians over the keys); latency is the median over keys ×
  ``--rounds``, each query running on every file back to back (the order alternating).

The line of the writer's current defaults (``DEFAULT_PAGE_ROWS``, ``DEFAULT_PAGE_BYTES``
of ``pqindex.write.writer``) is marked and the others are compared with it. Prints the
section and replaces the one between ``<!-- page-size:start -->`` and
``<!-- page-size:end -->`` of ``--out`` (default ``docs/benchmarks.md``; ``-``: print
only); text after the end marker (the conclusion) is kept. The files are written to a
temporary directory and removed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pqindex
from pqindex.format.file import ParquetFile
from pqindex.write import writer
from selective import RARE_ROWS, ROW_GROUP, SEED, _row_group_table, cpu_snapshot

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- page-size:start -->", "<!-- page-size:end -->"
TITLE = "## Writer defaults: page-size sweep"
DEFAULT_PAGE_ROWS: int = writer.DEFAULT_PAGE_ROWS
# write_table has no named page_bytes default yet (None: pyarrow's 1 MiB); pick one up if added
DEFAULT_PAGE_BYTES: int | None = getattr(writer, "DEFAULT_PAGE_BYTES", None)

RANGE_ROWS = 1_000
NARROW = ["id", "ts", "amount"]  # bench/selective.py's projection
KINDS = ("point", "point3", "range", "rare", "scan")
SINGLE_RUNS = 4  # runs per round of the queries without keys (rare value, full scan)
KIB = 1024


@dataclass(frozen=True)
class Setting:
    """One point of the sweep: ``page_rows`` and ``page_bytes`` as passed to the writer."""

    page_rows: int
    page_bytes: int | None = None  # None: pyarrow's data_page_size (1 MiB)

    @property
    def label(self) -> str:
        if self.page_bytes is None:
            return f"{self.page_rows:,}"
        return f"{self.page_rows:,}, {self.page_bytes // KIB} KiB"

    @property
    def slug(self) -> str:
        return f"p{self.page_rows}-b{self.page_bytes or 0}"


SETTINGS = [
    *(Setting(n) for n in (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)),
    *(Setting(20_000, kib * KIB) for kib in (64, 128, 256, 512)),
]


def parse_settings(text: str) -> list[Setting]:
    """``1000,20000:262144`` → page_rows, or page_rows:page_bytes, comma-separated."""
    out = []
    for item in text.split(","):
        rows, _, size = item.strip().partition(":")
        out.append(Setting(int(rows), int(size) if size else None))
    return out


@dataclass
class Lookup:
    """One query kind on one file: per-key bytes and requests, and every timed run."""

    bytes: list[int] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)

    def median_bytes(self) -> float:
        return statistics.median(self.bytes)

    def median_requests(self) -> float:
        return statistics.median(self.requests)

    def median_ms(self) -> float:
        return statistics.median(self.ms)


@dataclass
class Result:
    setting: Setting
    path: Path
    file_bytes: int = 0
    column_index_bytes: int = 0
    offset_index_bytes: int = 0
    pages: dict[str, int] = field(default_factory=dict)  # data pages per column, whole file
    text_file_bytes: int = 0  # the compressible log-text column written alone
    write_s: list[float] = field(default_factory=list)
    lookups: dict[str, Lookup] = field(default_factory=dict)


# ---------------------------------------------------------------- data


def make_table(rows: int) -> pa.Table:
    """The table of bench/selective.py (same generator, same seed)."""
    rare = np.sort(np.random.default_rng(SEED).choice(rows, RARE_ROWS, replace=False))
    parts = [_row_group_table(rows, rg, rare) for rg in range((rows + ROW_GROUP - 1) // ROW_GROUP)]
    return pa.concat_tables(parts).combine_chunks()


def log_lines(rows: int) -> pa.Table:
    """One compressible string column (~90-character web-server log lines, time-ordered).

    The table above is random and compresses about 2:1 whatever the page size; this
    column compresses about 5:1 and shows what shorter pages cost zstd.
    """
    rng = np.random.default_rng([SEED, 11])

    def pick(values: list[str], p: list[float] | None = None) -> pa.Array:
        return pa.array(values).take(pa.array(rng.choice(len(values), rows, p=p)))

    ms_of_day = np.sort(rng.integers(0, 86_400_000, rows)) + 1_717_200_000_000
    ts = pc.strftime(pa.array(ms_of_day, pa.timestamp("ms")), format="%Y-%m-%dT%H:%M:%S")
    method = pick(["GET", "POST", "PUT", "DELETE"], [0.7, 0.2, 0.07, 0.03])
    resource = pick(["users", "orders", "items", "carts", "sessions", "search", "reviews",
                     "payments"])
    key = pa.array(rng.integers(0, 10**6, rows)).cast(pa.string())
    path = pc.binary_join_element_wise("/api/v2/", resource, "/", key, "")
    status = pick(["200", "201", "204", "304", "400", "401", "404", "500"],
                  [0.72, 0.06, 0.04, 0.08, 0.03, 0.02, 0.04, 0.01])
    took = pc.binary_join_element_wise(pa.array(rng.integers(1, 2000, rows)).cast(pa.string()),
                                       "ms", "")
    agent = pick(["Mozilla/5.0 (X11; Linux x86_64)", "Mozilla/5.0 (Macintosh; Intel Mac OS X "
                  "14_5)", "curl/8.5.0", "python-requests/2.32.3", "okhttp/4.12.0"])
    line = pc.binary_join_element_wise(ts, method, path, status, took, agent, " ")
    return pa.table({"line": line})


def write(table: pa.Table, s: Setting, path: Path, sort_by: str | None = "id") -> float:
    t0 = time.perf_counter()
    pqindex.write_table(
        table, path, sort_by=sort_by, page_rows=s.page_rows, page_bytes=s.page_bytes,
        row_group_rows=ROW_GROUP, compression="zstd",
    )
    return time.perf_counter() - t0


def describe(r: Result) -> None:
    """File size, page-index bytes and data pages per column, from the footer."""
    r.file_bytes = r.path.stat().st_size
    with ParquetFile.open(r.path) as pf:
        for rg in range(pf.num_row_groups):
            for leaf in pf.schema.leaves:
                cc = pf.column_chunk(rg, leaf.index)
                r.column_index_bytes += cc.column_index_length or 0
                r.offset_index_bytes += cc.offset_index_length or 0
                oi = pf.offset_index(rg, leaf.index)
                n = len(oi.page_locations or []) if oi is not None else 0
                r.pages[leaf.name] = r.pages.get(leaf.name, 0) + n


# ---------------------------------------------------------------- reads


@dataclass(frozen=True)
class Query:
    kind: str
    where: str
    columns: list[str] | None  # None: all columns
    expect_rows: int


def make_queries(rows: int, lookups: int) -> list[Query]:
    rng = np.random.default_rng([SEED, 7])
    points = rng.integers(0, rows, lookups)
    starts = rng.integers(0, rows - RANGE_ROWS, lookups)
    qs = [Query("point", f"id = {k}", None, 1) for k in points]
    qs += [Query("point3", f"id = {k}", NARROW, 1) for k in points]
    qs += [Query("range", f"id BETWEEN {a} AND {a + RANGE_ROWS - 1}", None, RANGE_ROWS)
           for a in starts]
    # one query each, run SINGLE_RUNS times a round: as many timings as a few keys give
    qs += [Query("rare", "category = 'rare'", None, RARE_ROWS)] * SINGLE_RUNS
    qs += [Query("scan", "", ["amount"], rows)] * SINGLE_RUNS
    return qs


def run_query(path: Path, q: Query) -> tuple[float, dict[str, Any]]:
    """One cold read (fresh dataset): seconds and the scan report."""
    t0 = time.perf_counter()
    ds = pqindex.dataset(str(path))
    try:
        scan = ds.scan(columns=q.columns, where=q.where or None)
        t = scan.to_table()
        if q.kind == "scan":
            pc.sum(t.column("amount"))
        seconds = time.perf_counter() - t0
        report = scan.report.to_dict()
    finally:
        ds.close()
    if t.num_rows != q.expect_rows:
        raise AssertionError(f"{path.name}: {q.where or 'full scan'} returned {t.num_rows} "
                             f"rows, expected {q.expect_rows}")
    return seconds, report


def measure_reads(results: list[Result], queries: list[Query], rounds: int) -> float:
    """Fill every result's lookups; return the CPU other processes used meanwhile (cores).

    Each query runs on every file back to back (the order alternating), so that a burst
    of load from elsewhere falls on all settings alike.
    """
    for r in results:
        r.lookups = {q.kind: Lookup() for q in queries}
        for q in queries:  # warm-up; bytes and requests do not change between runs
            _, rep = run_query(r.path, q)
            r.lookups[q.kind].bytes.append(int(rep["bytes_read"]))
            r.lookups[q.kind].requests.append(int(rep["requests"]))
    wall0, busy0, own0 = cpu_snapshot()
    flip = False
    for i in range(rounds):
        for q in queries:
            flip = not flip
            for r in results if flip else results[::-1]:
                gc.collect()  # the previous result's garbage, not this run's
                seconds, _ = run_query(r.path, q)
                r.lookups[q.kind].ms.append(seconds * 1000)
        print(f"  read round {i + 1}/{rounds}", file=sys.stderr)
    wall1, busy1, own1 = cpu_snapshot()
    return max(0.0, (busy1 - busy0) - (own1 - own0)) / (wall1 - wall0)


# ---------------------------------------------------------------- report


def _kb(n: float) -> str:
    return f"{n / 1000:,.0f} KB" if n < 10**6 else f"{n / 1e6:,.2f} MB"


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def render(args: argparse.Namespace, results: list[Result], started: dt.datetime,
           elapsed: float, other_cores: float) -> str:
    default = Setting(DEFAULT_PAGE_ROWS, DEFAULT_PAGE_BYTES)
    base = next((r for r in results if r.setting == default), results[0])

    vs = "default" if base.setting == default else base.setting.label

    def label(r: Result) -> str:
        return f"**{r.setting.label}** (default)" if r.setting == default else r.setting.label

    L: list[str] = []
    w = L.append
    w(START)
    w(TITLE)
    w("")
    custom = "" if args.settings == SETTINGS else " --settings " + ",".join(
        f"{r.setting.page_rows}" + (f":{r.setting.page_bytes}" if r.setting.page_bytes else "")
        for r in results)
    w(f"Produced by `bench/page_size_sweep.py --rows {args.rows} --repeats {args.repeats} "
      f"--rounds {args.rounds} --lookups {args.lookups}{custom}` on {started:%Y-%m-%d %H:%M} UTC in "
      f"{elapsed:.0f} s. Machine: {os.cpu_count()} cores, {platform.machine()}; Python "
      f"{platform.python_version()}; pyarrow {pa.__version__}. Other processes used "
      f"{other_cores:.2f} cores on average while the reads were timed.")
    w("")
    w(f"Method: the table of `bench/selective.py` ({args.rows:,} rows: `id` sorted int64, `ts`, "
      f"`category` with 20 values and 'rare' in {RARE_ROWS} rows, `user_id`, `amount`, a "
      "100-character hex `payload`; random values, so zstd has little to gain from longer "
      "pages) is written with `pqindex.write_table(sort_by=\"id\", compression=\"zstd\")`, "
      "1M-row row groups, and the `page_rows` and `page_bytes` of each line (`page_bytes` "
      "not given: pyarrow's `data_page_size` of 1 MiB, so a `payload` page holds at most "
      "~10,000 rows whatever `page_rows` says). The log-text file is a separate one-column "
      f"file of {args.rows:,} ~90-character web-server log lines (time-ordered timestamps; a "
      "few methods, paths, statuses and agents; zstd gets about 5:1), written with the same "
      "settings to show what shorter pages cost a compressible column. Index bytes are the "
      "footer's "
      "`column_index_length` and `offset_index_length` summed over the column chunks; the "
      f"write time is the median of {args.repeats} writes. Reads are pqindex scans, each "
      "through a fresh `pqindex.dataset(path)` (footer and page index read every time; the "
      f"OS page cache stays warm): {args.lookups} point lookups `id = k` of all columns and of "
      f"`{', '.join(NARROW)}` (bench/selective.py's projection), {args.lookups} ranges "
      f"`id BETWEEN a AND a + {RANGE_ROWS - 1}` of all columns, at random keys (the same for "
      "every line), `category = 'rare'` (all columns; the value lies inside every page's "
      "[min, max], so every `category` page is read and then only the matching pages of the "
      "other columns), and a full scan of `amount` (these two run "
      f"{SINGLE_RUNS} times a round). Bytes and requests are the scan report's, median over "
      f"the keys; latency is the median over all runs of {args.rounds} rounds after one "
      "warm-up; each query runs on every file back to back (alternating the order), so that "
      "load from elsewhere falls on all lines alike, with `gc.collect()` before each run.")
    w("")
    w("### Size and write cost")
    w("")
    w(f"| page_rows, page_bytes | pages (id / payload) | file | vs {vs} | ColumnIndex "
      f"| OffsetIndex | write s | log-text file | vs {vs} |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        rel = r.file_bytes / base.file_bytes - 1
        text_rel = r.text_file_bytes / base.text_file_bytes - 1
        w(f"| {label(r)} | {r.pages.get('id', 0):,} / {r.pages.get('payload', 0):,} "
          f"| {_mb(r.file_bytes)} | {rel:+.1%} | {_kb(r.column_index_bytes)} "
          f"| {_kb(r.offset_index_bytes)} | {statistics.median(r.write_s):.2f} "
          f"| {_mb(r.text_file_bytes)} | {text_rel:+.1%} |")
    w("")
    heads = ["point, all columns", f"point, {len(NARROW)} columns",
             f"{RANGE_ROWS:,}-row range", "category = 'rare'", "full scan of amount"]
    w("### Bytes read (median over keys; requests in brackets)")
    w("")
    w("| page_rows, page_bytes | " + " | ".join(heads) + " |")
    w("| --- |" + " ---: |" * len(heads))
    for r in results:
        cells = [f"{_kb(r.lookups[k].median_bytes())} [{r.lookups[k].median_requests():.0f}]"
                 for k in KINDS]
        w(f"| {label(r)} | " + " | ".join(cells) + " |")
    w("")
    w(f"### Latency (median ms; ×N = vs {vs})")
    w("")
    w("| page_rows, page_bytes | " + " | ".join(heads) + " |")
    w("| --- |" + " ---: |" * len(heads))
    for r in results:
        cells = []
        for k in KINDS:
            ms = r.lookups[k].median_ms()
            cells.append(f"{ms:.1f} (×{ms / base.lookups[k].median_ms():.2f})")
        w(f"| {label(r)} | " + " | ".join(cells) + " |")
    w("")
    w(END)
    return "\n".join(L) + "\n"


def write_section(out: Path, section: str) -> None:
    if out.exists():
        text = out.read_text()
        if START in text and END in text:
            before = text[: text.index(START)]
            after = text[text.index(END) + len(END):].lstrip("\n")
            text = before + section + ("\n" + after if after else "")
        else:
            text = text.rstrip("\n") + "\n\n" + section
    else:
        text = "# Benchmarks\n\n" + section
    out.write_text(text)


# ---------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeats", type=int, default=3, help="writes per setting")
    ap.add_argument("--rounds", type=int, default=7, help="timed read rounds")
    ap.add_argument("--lookups", type=int, default=15, help="keys per point / range query")
    ap.add_argument("--settings", type=parse_settings, default=SETTINGS,
                    help="page_rows[:page_bytes],… (default: the sweep in the docs)")
    ap.add_argument("--out", default=str(DOC), help="markdown file to update ('-': print only)")
    args = ap.parse_args()
    if args.rows <= RANGE_ROWS:
        ap.error(f"--rows must exceed {RANGE_ROWS}")

    started = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    table = make_table(args.rows)
    print(f"table: {args.rows:,} rows, {table.nbytes / 1e6:.0f} MB of Arrow data "
          f"({time.perf_counter() - t0:.0f}s)", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="pqindex-page-sweep-") as tmp:
        results = [Result(s, Path(tmp) / f"{s.slug}.parquet") for s in args.settings]
        for i in range(args.repeats):
            for r in results if i % 2 == 0 else results[::-1]:
                r.write_s.append(write(table, r.setting, r.path))
            print(f"  write round {i + 1}/{args.repeats}", file=sys.stderr)
        for r in results:
            describe(r)
        text = log_lines(args.rows)
        text_path = Path(tmp) / "text.parquet"
        for r in results:
            write(text, r.setting, text_path, sort_by=None)
            r.text_file_bytes = text_path.stat().st_size
        print(f"  log text: {text.nbytes / 1e6:.0f} MB of Arrow data", file=sys.stderr)
        del text
        other = measure_reads(results, make_queries(args.rows, args.lookups), args.rounds)
    section = render(args, results, started, time.perf_counter() - t0, other)
    print(section)
    if args.out != "-":
        write_section(Path(args.out), section)
        print(f"wrote the section to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
