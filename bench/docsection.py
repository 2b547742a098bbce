"""The bench scripts' sections of docs/benchmarks.md: how one was produced, a row of
pqindex against its peers, and replacing a marked section."""

from __future__ import annotations

import datetime as dt
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path


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


def replace_section(doc: Path, start: str, end: str, section: str) -> None:
    """Put ``section`` (which begins with ``start`` and ends with ``end``) where the
    marked section was, or at the end of ``doc`` the first time."""
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    if start in text and end in text:
        text = text[: text.index(start)] + section + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    doc.write_text(text)
