"""Less selective predicates on a column no index narrows, the column returned:
pqindex against pyarrow.dataset, DuckDB, DataFusion and polars.

    .venv/bin/python bench/dense.py [--rows 4000000] [--rounds 7] [--no-doc]

bench/selective.py's queries match a handful of rows and return other columns. Here
``category IN (k values)`` matches from 10 rows to about half of them, with
``category`` among the returned columns, on the issue-shaped file of
bench/selective.py (``--shape issue``: pyarrow's defaults, every column
dictionary-encoded until the dictionary fills, snappy, 8 row groups, 20k-row
pages). Each query runs cold (a fresh dataset / connection / context /
LazyFrame per run; the OS page cache warm) and warm (the same one again); readers
interleaved round by round, medians. Every reader's row count and sum of ``id``
must agree. Results replace the section between ``<!-- dense:start -->`` and
``<!-- dense:end -->`` of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import selective  # noqa: E402
from docsection import (  # noqa: E402
    cold_and_warm,
    cold_warm_table,
    provenance,
    replace_section,
    rows_rounds_args,
)

DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- dense:start -->", "<!-- dense:end -->"
COLUMNS = ["id", "category", "amount"]
READERS = ["pqindex", "pyarrow.dataset", "duckdb", "datafusion", "polars"]


def queries() -> list[tuple[str, list[str]]]:
    """(title, values of ``category IN``): the rare value, then 1, 5 and 25 common ones
    (the common ones are about 2% of the rows each)."""
    common = sorted(selective.CATEGORIES)
    return [("rare value (10 rows)", ["rare"])] + [
        (f"{k} common value{'s' if k > 1 else ''}", common[:k]) for k in (1, 5, 25)]


def _sql(values: list[str]) -> str:
    listed = ", ".join(f"'{v}'" for v in values)
    return f"SELECT {', '.join(COLUMNS)} FROM t WHERE category IN ({listed})"


def _result(t: Any) -> tuple[int, int]:
    import pyarrow.compute as pc

    return t.num_rows, int(pc.sum(t.column("id")).as_py() or 0)


def readers(path: Path) -> dict[str, Any]:
    """name -> (open() -> state, run(state, values) -> (rows, sum of id))."""
    import polars as pl
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    import pqindex

    def pq_run(ds: Any, values: list[str]) -> tuple[int, int]:
        listed = ", ".join(f"'{v}'" for v in values)
        return _result(ds.scan(columns=COLUMNS, where=f"category IN ({listed})").to_table())

    def pa_run(ds: Any, values: list[str]) -> tuple[int, int]:
        flt = pc.field("category").isin(pa.array(values))
        return _result(ds.to_table(columns=COLUMNS, filter=flt))

    def pl_run(lf: Any, values: list[str]) -> tuple[int, int]:
        df = lf.filter(pl.col("category").is_in(values)).select(COLUMNS).collect()
        return df.height, int(df["id"].sum() or 0)

    return {
        "pqindex": (lambda: pqindex.dataset(str(path)), pq_run),
        "pyarrow.dataset": (lambda: pads.dataset(str(path), format="parquet"), pa_run),
        "duckdb": (lambda: selective.DuckdbReader().open(path),
                   lambda con, v: _result(con.sql(_sql(v)).to_arrow_table())),
        "datafusion": (lambda: selective.DatafusionReader().open(path),
                       lambda ctx, v: _result(ctx.sql(_sql(v)).to_arrow_table())),
        "polars": (lambda: pl.scan_parquet(str(path)), pl_run),
    }


def decode_floor(path: Path, rounds: int) -> float:
    """Median ms of pyarrow decoding the returned columns whole (its threads, no
    filter, ``category`` kept as dictionary indices): what a reader that decodes
    with pyarrow pays before it evaluates anything."""
    import pyarrow.parquet as pq

    times = []
    for _ in range(rounds + 1):
        t0 = time.perf_counter()
        pq.read_table(path, columns=COLUMNS, read_dictionary=["category"])
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:]) * 1000


def measure(path: Path, rounds: int) -> tuple[dict[tuple[str, str, str], float],
                                               dict[str, int]]:
    """(query, mode, reader) -> median ms; query -> rows matched."""
    return cold_and_warm(readers(path), READERS, queries(), rounds)


def render(res: dict[tuple[str, str, str], float], rows: dict[str, int], floor: float,
           args: argparse.Namespace, path: Path, seconds: float,
           load: tuple[float, float]) -> str:
    lines = [
        START,
        "## Less selective predicates, the predicate column returned (bench/dense.py)",
        "",
        provenance(f"bench/dense.py --rows {args.rows} --rounds {args.rounds}", seconds, load),
        "",
        f"Data: `{path.name}`, bench/selective.py's issue-shaped file (pyarrow's defaults: "
        "dictionary-encoded columns, snappy, 8 row groups, 20k-row pages). Query: "
        f"`SELECT {', '.join(COLUMNS)} WHERE category IN (…)`. Cold: a fresh dataset / "
        "connection / context / LazyFrame per run (the OS page cache warm); warm: the same "
        f"one again. Readers interleaved round by round, medians of {args.rounds}; ms, "
        "(×N) = reader / pqindex.",
        "",
        *cold_warm_table(res, rows, [t for t, _ in queries()], READERS),
    ]
    lines += [
        "",
        f"Decode floor: pyarrow decodes the three returned columns whole in {floor:,.1f} ms "
        "(`pq.read_table(columns=…, read_dictionary=['category'])`, its threads, no filter; "
        "median of the same rounds). Every matching page of `id` and `amount` must be "
        "decompressed whatever the predicate: once the matches touch most pages, a reader "
        "that decodes with pyarrow (or, like pqindex, with numpy after `pyarrow.decompress`) "
        "pays about this much.",
        "", END]
    return "\n".join(lines)


def main() -> None:
    args = rows_rounds_args(__doc__)
    t0 = time.time()
    load0 = os.getloadavg()[0]
    selective.configure("issue", "plain", args.rows)
    path = selective.generate(args.rows)
    res, rows = measure(path, args.rounds)
    floor = decode_floor(path, args.rounds)
    section = render(res, rows, floor, args, path, time.time() - t0,
                     (load0, os.getloadavg()[0]))
    print(section)
    if not args.no_doc:
        replace_section(DOC, START, END, section)


if __name__ == "__main__":
    main()
