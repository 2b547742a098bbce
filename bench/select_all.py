"""``SELECT *`` with an equality on one column: the column the predicate fixes is
returned too. pqindex (its values repeated from the literal, and the same scan with
them decoded from the pages, as before) against pyarrow.dataset, DuckDB, DataFusion
and polars.

    .venv/bin/python bench/select_all.py [--rows 4000000] [--rounds 7] [--no-doc]

bench/selective.py's queries return ``id, ts, amount``, never the predicate's
column. Here every column is returned, on bench/selective.py's issue-shaped file
as pyarrow wrote it (``plain``) and as ``pqindex.write_table`` rewrote it
(``written``). Each query runs cold (a fresh dataset / connection / context /
LazyFrame per run; the OS page cache warm) and warm (the same one again); readers
interleaved round by round, medians. Every reader's row count and sum of ``id``
must agree. Results replace the section between ``<!-- select-all:start -->`` and
``<!-- select-all:end -->`` of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import selective  # noqa: E402
from docsection import (  # noqa: E402
    cold_and_warm,
    peer_cells,
    provenance,
    replace_section,
    rows_rounds_args,
)

DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- select-all:start -->", "<!-- select-all:end -->"
DECODED = "pqindex, values decoded"
READERS = ["pqindex", DECODED, "pyarrow.dataset", "duckdb", "datafusion", "polars"]
PEERS = READERS[2:]


def queries(rows: int) -> list[tuple[str, str]]:
    """(title, WHERE text): the rare value, the user_id equality and the point lookup
    of bench/selective.py."""
    by_name = {q.name: q for q in selective.make_queries(selective.data_path(rows), rows)}
    return [(by_name[n].title, str(by_name[n].where)) for n in ("rare", "user", "point")]


def _result(t: Any) -> tuple[int, int]:
    import pyarrow.compute as pc

    return t.num_rows, int(pc.sum(t.column("id")).as_py() or 0)


@contextmanager
def _values_decoded() -> Iterator[None]:
    """pqindex as before implied values: every returned column read from its pages."""
    from pqindex.scan import executor

    keep = executor.implied_values
    executor.implied_values = lambda expr, fields, schema: {}
    try:
        yield
    finally:
        executor.implied_values = keep


def readers(path: Path, rows: int
            ) -> dict[str, tuple[Callable[[], Any], Callable[[Any, str], Any]]]:
    """name -> (open() -> state, run(state, where) -> (rows, sum of id))."""
    import polars as pl
    import pyarrow.dataset as pads

    import pqindex

    def pq_run(ds: Any, where: str) -> tuple[int, int]:
        return _result(ds.scan(where=where).to_table())

    def pq_decoded(ds: Any, where: str) -> tuple[int, int]:
        with _values_decoded():
            return pq_run(ds, where)

    # pyarrow's filter for each WHERE text, made once (make_queries reads the file).
    filters = {q.where: q.arrow_filter() for q in selective.make_queries(path, rows)
               if q.where is not None}

    def pa_run(ds: Any, where: str) -> tuple[int, int]:
        return _result(ds.to_table(filter=filters[where]))

    def pl_run(lf: Any, where: str) -> tuple[int, int]:
        df = lf.filter(pl.sql_expr(where)).collect()
        return df.height, int(df["id"].sum() or 0)

    sql = "SELECT * FROM t WHERE {}".format
    return {
        "pqindex": (lambda: pqindex.dataset(str(path)), pq_run),
        DECODED: (lambda: pqindex.dataset(str(path)), pq_decoded),
        "pyarrow.dataset": (lambda: pads.dataset(str(path), format="parquet"), pa_run),
        "duckdb": (lambda: selective.DuckdbReader().open(path),
                   lambda con, w: _result(con.sql(sql(w)).to_arrow_table())),
        "datafusion": (lambda: selective.DatafusionReader().open(path),
                       lambda ctx, w: _result(ctx.sql(sql(w)).to_arrow_table())),
        "polars": (lambda: pl.scan_parquet(str(path)), pl_run),
    }


def measure(path: Path, rows: int, rounds: int
            ) -> tuple[dict[tuple[str, str, str], float], dict[str, int]]:
    """(query, mode, reader) -> median ms; query -> rows matched."""
    return cold_and_warm(readers(path, rows), READERS, queries(rows), rounds)


def render(results: list[tuple[str, Path, dict[tuple[str, str, str], float],
                               dict[str, int]]],
           args: argparse.Namespace, seconds: float, load: tuple[float, float]) -> str:
    lines = [
        START,
        "## SELECT * with an equality: the fixed column returned too (bench/select_all.py)",
        "",
        provenance(f"bench/select_all.py --rows {args.rows} --rounds {args.rounds}", seconds,
                   load),
        "",
        "Data: bench/selective.py's issue-shaped files, as pyarrow wrote it (`plain`: "
        "dictionary-encoded columns until the dictionary fills, snappy) and as "
        "`pqindex.write_table` rewrote it (`written`: zstd, PLAIN numbers, a distinct index "
        "on `category`). Query: `SELECT * WHERE …`. `pqindex, values decoded`: the same "
        "scan with the column the predicate fixes read from its pages (before "
        "`executor.implied_values`). Cold: a fresh dataset / connection / context / "
        "LazyFrame per run (the OS page cache warm); warm: the same one again. Readers "
        f"interleaved round by round, medians of {args.rounds}; ms, (×N) = reader / pqindex.",
        "",
        "| file | query | rows | mode | " + " | ".join(READERS)
        + " | pqindex / fastest peer |",
        "| --- | --- | ---: | --- | " + " | ".join("---:" for _ in READERS) + " | ---: |",
    ]
    for variant, _path, res, matched in results:
        for title in matched:
            for mode in ("cold", "warm"):
                ms = {n: res[(title, mode, n)] for n in READERS}
                lines.append(f"| {variant} | {title} | {matched[title]:,} | {mode} | "
                             f"{peer_cells(ms, [DECODED, *PEERS]).rsplit(' | ', 1)[0]} | "
                             f"{_against_peers(ms)} |")
    lines += ["", END]
    return "\n".join(lines)


def _against_peers(ms: dict[str, float]) -> str:
    best = min(PEERS, key=lambda n: ms[n])
    return f"{ms['pqindex'] / ms[best]:.2f}× ({best})"


def main() -> None:
    args = rows_rounds_args(__doc__)
    t0 = time.time()
    load0 = os.getloadavg()[0]
    results = []
    for variant in ("plain", "written"):
        selective.configure("issue", variant, args.rows)
        path = selective.generate(args.rows)
        res, matched = measure(path, args.rows, args.rounds)
        results.append((variant, path, res, matched))
    section = render(results, args, time.time() - t0, (load0, os.getloadavg()[0]))
    print(section)
    if not args.no_doc:
        replace_section(DOC, START, END, section)


if __name__ == "__main__":
    main()
