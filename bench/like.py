"""LIKE, ILIKE and regexp_matches patterns: pqindex against pyarrow.dataset, DuckDB,
DataFusion and polars (its SQL context), on a file nobody indexed and on a copy
after ``pqindex index --distinct category``.

    .venv/bin/python bench/like.py [--rows 4000000] [--rounds 7] [--no-doc]

The file: ``--rows`` rows written by ``pyarrow.parquet.write_table`` with its
defaults (dictionary encoding until a chunk's dictionary reaches 1 MiB, snappy)
in 8 row groups; ``category`` one of 50 words ``word_00`` ... ``word_49`` and, in
10 rows of one row group, ``xylophone``; ``note`` a random string (no dictionary
once it overflows). Patterns: a rare substring, ILIKE of it, a suffix with a
wildcard, a common substring, a substring of the high-cardinality column, and
regular expressions on both columns.
Cold: a fresh dataset / connection / context / LazyFrame per run (pqindex's
metadata cache cleared; the OS page cache warm); warm: the same one again.
Readers interleaved round by round; medians; every reader must return the same
rows (count and sum of ``id``). Replaces the section between ``<!-- like:start
-->`` and ``<!-- like:end -->`` of docs/benchmarks.md.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import pqindex  # noqa: E402
from docsection import (  # noqa: E402
    cold_and_warm,
    cold_warm_table,
    datafusion_context,
    duckdb_view,
    provenance,
    replace_section,
    rows_rounds_args,
)
from pqindex.io.cache import metadata_cache  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- like:start -->", "<!-- like:end -->"
READERS = ["pqindex", "pyarrow.dataset", "duckdb", "datafusion", "polars"]
PROJECTION = ["id", "amount"]
QUERIES = [
    ("rare substring", "category LIKE '%lop%'"),
    ("rare substring, ILIKE", "category ILIKE '%LOP%'"),
    ("suffix after a wildcard (10%)", "category LIKE 'w%_7'"),
    ("common substring (20%)", "category LIKE '%d_2%'"),
    ("high-cardinality substring", "note LIKE '%12345%'"),
    ("rare regular expression", "regexp_matches(category, 'lo.h')"),
    ("high-cardinality regular expression", "regexp_matches(note, '^note 1234')"),
]


def write_file(path: Path, rows: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(5)
    words = np.array([f"word_{i:02d}" for i in range(50)], dtype=object)
    category = words[rng.integers(0, 50, rows)]
    rare = rows // 8 * 5 + rng.choice(rows // 8, 10, replace=False)
    category[rare] = "xylophone"
    t = pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "category": pa.array(category, pa.string()),
        "note": pa.array([f"note {v}" for v in rng.integers(0, 10**8, rows)], pa.string()),
        "amount": pa.array(rng.random(rows) * 1000),
    })
    pq.write_table(t, path, row_group_size=rows // 8, write_page_index=True)


def readers(path: Path) -> dict[str, tuple[Any, Any]]:
    """name -> (open() -> state, run(state, where) -> (rows, sum of id))."""
    import polars as pl
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    def checked(t: Any) -> tuple[int, int]:
        return t.num_rows, int(pc.sum(t.column("id")).as_py() or 0)

    def sql(where: str, regexp: str = "regexp_matches") -> str:
        # DataFusion and polars call DuckDB's regexp_matches regexp_like.
        where = where.replace("regexp_matches(", f"{regexp}(")
        return f"SELECT {', '.join(PROJECTION)} FROM t WHERE {where}"

    def pq_open() -> Any:
        metadata_cache().clear()
        return pqindex.dataset(path)

    def arrow_filter(where: str) -> Any:
        if where.startswith("regexp_matches("):
            column, pattern = where[len("regexp_matches("):-1].split(", ")
            return pc.match_substring_regex(pc.field(column), pattern.strip("'"))
        column, word, pattern = where.split(" ", 2)
        pattern = pattern.strip("'")
        if word == "ILIKE":
            return pc.match_like(pc.field(column), pattern, ignore_case=True)
        return pc.match_like(pc.field(column), pattern)

    def pl_open() -> Any:
        return pl.SQLContext(t=pl.scan_parquet(path))

    return {
        "pqindex": (pq_open, lambda ds, w: checked(ds.scan(PROJECTION, w).to_table())),
        "pyarrow.dataset": (lambda: pads.dataset(path), lambda d, w: checked(
            d.to_table(columns=PROJECTION, filter=arrow_filter(w)))),
        "duckdb": (lambda: duckdb_view(str(path)),
                   lambda con, w: checked(con.sql(sql(w)).to_arrow_table())),
        "datafusion": (lambda: datafusion_context(str(path)),
                       lambda ctx, w: checked(ctx.sql(sql(w, "regexp_like")).to_arrow_table())),
        "polars": (pl_open, lambda c, w: checked(
            c.execute(sql(w, "regexp_like")).collect().to_arrow())),
    }


def main() -> None:
    args = rows_rounds_args(__doc__)
    t0 = time.time()
    load0 = os.getloadavg()[0]
    sections = []
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "plain.parquet"
        write_file(plain, args.rows)
        indexed = Path(tmp) / "indexed.parquet"
        shutil.copy(plain, indexed)
        pqindex.add_indexes(indexed, distinct=["category"])
        for label, path in (("pyarrow's file", plain),
                            ("after `pqindex index --distinct category`", indexed)):
            res, rows = cold_and_warm(readers(path), READERS, QUERIES, args.rounds)
            titles = [t for t, _ in QUERIES]
            sections += [f"**{label}** ({path.stat().st_size / 2**20:.1f} MiB):", "",
                         *cold_warm_table(res, rows, titles, READERS), ""]
            reports = []
            for title, where in QUERIES:
                scan = pqindex.dataset(path).scan(PROJECTION, where)
                scan.to_table()
                r = scan.report
                reports.append(f"{title}: row groups {r.row_groups_read}/{r.row_groups_total}"
                               f", pages {r.pages_read}/{r.pages_total}")
            sections += ["pqindex read (cold): " + "; ".join(reports) + ".", ""]
    lines = [
        START,
        "## LIKE, ILIKE and regular expressions (bench/like.py)",
        "",
        provenance(f"bench/like.py --rows {args.rows} --rounds {args.rounds}",
                   time.time() - t0, (load0, os.getloadavg()[0])),
        "",
        f"Data: {args.rows:,} rows written by `pyarrow.parquet.write_table` (defaults: "
        "dictionary encoding, snappy; page index on) in 8 row groups: `category` one of 50 "
        "words `word_00` ... `word_49` and `xylophone` in 10 rows of one row group; `note` "
        "a random `note <number>` (past the 1 MiB dictionary: PLAIN). Queries (each "
        "projects `id, amount`): " + ", ".join(f"{t} `{w}`" for t, w in QUERIES) + ". "
        "polars runs them through its SQL context, pyarrow.dataset as `match_like` / "
        "`match_substring_regex` expressions; DataFusion and polars spell `regexp_matches` "
        "`regexp_like`. Cold: a fresh dataset / connection / context / LazyFrame per run "
        "(pqindex's metadata cache cleared; the OS page cache warm); warm: the same one "
        f"again. Readers interleaved round by round, medians of {args.rounds}; ms, (×N) = "
        "reader / pqindex.",
        "",
        *sections,
        END,
    ]
    section = "\n".join(lines)
    print(section)
    if not args.no_doc:
        replace_section(DOC, START, END, section)


if __name__ == "__main__":
    main()
