"""A lake whose predicate column has large dictionaries: pqindex against
pyarrow.dataset, DuckDB, DataFusion and polars.

    .venv/bin/python bench/high_cardinality.py [--files 100] [--rounds 5] [--no-doc]

``--files`` files of 200,000 rows written by ``pyarrow.parquet.write_table`` with
its defaults (4 row groups of 50,000 rows, snappy, dictionary encoding, statistics,
no page index), one column ``email`` drawn from 40,000 distinct strings of 30 bytes,
so every row group's dictionary has ~29,000 entries (~900 KB), and ``id``. Min/max
statistics rule nothing out for a value inside the range: only the dictionaries can.
Queries project ``id``: one present value (~5 rows per file), an absent value, and
three present values (IN). Each runs cold (a fresh dataset / connection / context /
LazyFrame; the OS page cache warm) and warm (the same one again); readers
interleaved round by round, medians. Results replace the section between
``<!-- high-cardinality:start -->`` and ``<!-- high-cardinality:end -->`` of
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import selective  # noqa: E402
from docsection import cold_and_warm, cold_warm_table, provenance, replace_section  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- high-cardinality:start -->", "<!-- high-cardinality:end -->"
READERS = ["pqindex", "pyarrow.dataset", "duckdb", "datafusion", "polars"]
ROWS = 200_000
DISTINCT = 40_000


def _word(i: int) -> str:
    return f"user{i:08d}@example.org" + "x" * 4


def generate(files: int) -> Path:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = ROOT / "data" / "bench" / f"high-cardinality-{files}-v1"
    if d.exists():
        return d
    tmp = d.with_name(d.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    words = np.array([_word(i) for i in range(DISTINCT)])
    rng = np.random.default_rng(11)
    for k in range(files):
        pq.write_table(pa.table({"id": np.arange(k * ROWS, (k + 1) * ROWS, dtype=np.int64),
                                 "email": words[rng.integers(0, DISTINCT, ROWS)]}),
                       tmp / f"part-{k:05d}.parquet", row_group_size=ROWS // 4)
    tmp.rename(d)
    return d


def queries() -> list[tuple[str, list[str]]]:
    """(title, values of ``email IN``)."""
    return [("one present value", [_word(12_345)]),
            ("an absent value", [_word(12_345).replace("@", "#")]),
            ("three present values", [_word(7), _word(20_000), _word(39_999)])]


def readers(d: Path) -> dict[str, Any]:
    import polars as pl
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    import pqindex

    def result(t: Any) -> tuple[int, int]:
        return t.num_rows, int(pc.sum(t.column("id")).as_py() or 0)

    def where(values: list[str]) -> str:
        return "email IN (" + ", ".join(f"'{v}'" for v in values) + ")"

    glob = str(d / "*.parquet")

    def duck() -> Any:
        import duckdb

        con = duckdb.connect()
        con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{glob}')")
        return con

    def fusion() -> Any:
        ctx = selective.DatafusionReader().open(d)
        return ctx

    def pl_run(lf: Any, values: list[str]) -> tuple[int, int]:
        df = lf.filter(pl.col("email").is_in(values)).select("id").collect()
        return df.height, int(df["id"].sum() or 0)

    return {
        "pqindex": (lambda: pqindex.dataset(str(d)),
                    lambda ds, v: result(ds.scan(columns=["id"], where=where(v)).to_table())),
        "pyarrow.dataset": (lambda: pads.dataset(str(d), format="parquet"),
                            lambda ds, v: result(ds.to_table(
                                columns=["id"], filter=pc.field("email").isin(pa.array(v))))),
        "duckdb": (duck, lambda con, v: result(con.sql(
            f"SELECT id FROM t WHERE {where(v)}").to_arrow_table())),
        "datafusion": (fusion, lambda ctx, v: result(ctx.sql(
            f"SELECT id FROM t WHERE {where(v)}").to_arrow_table())),
        "polars": (lambda: pl.scan_parquet(glob), pl_run),
    }


def render(res: dict[tuple[str, str, str], float], rows: dict[str, int],
           args: argparse.Namespace, d: Path, seconds: float, load: tuple[float, float]) -> str:
    lines = [
        START,
        "## A lake with large dictionaries on the predicate column (bench/high_cardinality.py)",
        "",
        provenance(f"bench/high_cardinality.py --files {args.files} --rounds {args.rounds}",
                   seconds, load),
        "",
        f"Data: `{d.name}`: {args.files} files of {ROWS:,} rows written by "
        "`pyarrow.parquet.write_table` with its defaults (4 row groups, snappy, dictionary "
        f"encoding, statistics, no page index); `email` drawn from {DISTINCT:,} distinct "
        "30-byte strings (~29,000 dictionary entries per row group), `id` returned. "
        "Statistics rule nothing out: only the dictionaries can. Cold: a fresh dataset / "
        "connection / context / LazyFrame per run (the OS page cache warm); warm: the same "
        f"one again. Readers interleaved round by round, medians of {args.rounds}; ms, "
        "(×N) = reader / pqindex.",
        "",
        *cold_warm_table(res, rows, [t for t, _ in queries()], READERS),
    ]
    lines += ["", END]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-doc", action="store_true", help="print, don't edit docs/")
    args = ap.parse_args()
    t0 = time.time()
    load0 = os.getloadavg()[0]
    d = generate(args.files)
    res, rows = cold_and_warm(readers(d), READERS, queries(), args.rounds)
    section = render(res, rows, args, d, time.time() - t0, (load0, os.getloadavg()[0]))
    print(section)
    if not args.no_doc:
        replace_section(DOC, START, END, section)


if __name__ == "__main__":
    main()
