"""The bench scripts' sections of docs/benchmarks.md: how one was produced, a row of
pqindex against its peers, and replacing a marked section; and the interleaved
cold / warm rounds the smaller scripts time their readers with."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


def provenance(command: str, seconds: float, load: tuple[float, float]) -> str:
    """The "Produced by" sentence: command, date, duration, machine, library versions,
    load at the start and the end."""
    import duckdb
    import polars as pl
    import pyarrow as pa

    return (
        f"Produced by `{command}` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC in "
        f"{seconds / 60:.1f} min; {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"pyarrow {pa.__version__}, DuckDB {duckdb.__version__}, polars {pl.__version__}. "
        f"1-minute load average {load[0]:.2f} at the start, {load[1]:.2f} at the end (the "
        "machine is shared).")


def peer_cells(ms: Mapping[str, float], peers: Sequence[str]) -> str:
    """pqindex's time (bold), each peer's with its ratio to pqindex, and pqindex against
    the fastest peer: the cells of one table row, joined."""
    ours = ms["pqindex"]
    cells = [f"**{ours:,.1f}**"] + [f"{ms[n]:,.1f} (×{ms[n] / ours:.2f})" for n in peers]
    best = min(peers, key=lambda n: ms[n])
    return " | ".join(cells) + f" | {ours / ms[best]:.2f}× ({best})"


def cold_warm_table(res: Mapping[tuple[str, str, str], float], rows: Mapping[str, int],
                    titles: Sequence[str], readers: Sequence[str]) -> list[str]:
    """The lines of a table of :func:`cold_and_warm`'s medians: per query, a cold and
    a warm row, pqindex (``readers[0]``) against the others."""
    lines = ["| query | rows | mode | " + " | ".join(readers) + " | pqindex / fastest peer |",
             "| --- | ---: | --- | " + " | ".join("---:" for _ in readers) + " | ---: |"]
    for title in titles:
        for mode in ("cold", "warm"):
            ms = {n: res[(title, mode, n)] for n in readers}
            lines.append(f"| {title} | {rows[title]:,} | {mode} | "
                         f"{peer_cells(ms, readers[1:])} |")
    return lines


def replace_section(doc: Path, start: str, end: str, section: str) -> None:
    """Put ``section`` (which begins with ``start`` and ends with ``end``) where the
    marked section was, or at the end of ``doc`` the first time."""
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    if start in text and end in text:
        text = text[: text.index(start)] + section + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    doc.write_text(text)


def datafusion_context(source: str) -> Any:
    """A DataFusion context with ``source`` (a file, or a directory ending in ``/``)
    registered as table ``t``, filter pushdown and the page index on (what a user
    tuning it for selective reads sets)."""
    import datafusion

    cfg = (datafusion.SessionConfig()
           .set("datafusion.execution.parquet.pushdown_filters", "true")
           .set("datafusion.execution.parquet.enable_page_index", "true"))
    ctx = datafusion.SessionContext(cfg)
    ctx.register_parquet("t", source)
    return ctx


def duckdb_view(source: str) -> Any:
    """A DuckDB connection with view ``t`` over ``read_parquet(source)``."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{source}')")
    return con


Opener = Callable[[], Any]
Runner = Callable[[Any, Any], Any]


def cold_and_warm(made: Mapping[str, tuple[Opener, Runner]], order: Sequence[str],
                  queries: Sequence[tuple[str, Any]], rounds: int
                  ) -> tuple[dict[tuple[str, str, str], float], dict[str, int]]:
    """(query, mode, reader) -> median ms, and query -> rows matched. ``made``: reader
    -> (open() -> state, run(state, query) -> (rows, a checksum)); every reader must
    give the same result. Per round, readers in ``order`` (reversed every other
    round), each cold (a fresh state) then warm (one kept state)."""
    warm = {name: opener() for name, (opener, _) in made.items()}
    times: dict[tuple[str, str, str], list[float]] = {}
    rows: dict[str, int] = {}
    for title, query in queries:
        expected = {name: run(warm[name], query) for name, (_, run) in made.items()}
        if len(set(expected.values())) != 1:
            raise AssertionError(f"{title}: readers disagree {expected}")
        rows[title] = next(iter(expected.values()))[0]
        for r in range(rounds):
            for name in order if r % 2 == 0 else order[::-1]:
                opener, run = made[name]
                t0 = time.perf_counter()
                got_cold = run(opener(), query)
                t1 = time.perf_counter()
                got_warm = run(warm[name], query)
                t2 = time.perf_counter()
                if got_cold != expected[name] or got_warm != expected[name]:
                    raise AssertionError(f"{name} {title}: result changed")
                times.setdefault((title, "cold", name), []).append(t1 - t0)
                times.setdefault((title, "warm", name), []).append(t2 - t1)
    return {k: statistics.median(v) * 1000 for k, v in times.items()}, rows


def rows_rounds_args(doc: str | None) -> argparse.Namespace:
    """``--rows``, ``--rounds`` and ``--no-doc``, the options of the smaller scripts."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--no-doc", action="store_true", help="print, don't edit docs/")
    return ap.parse_args()
