"""The main job: generate TPC-H lineitem, write it sorted with a page index, inspect it.

Run through scripts/demo.sh, which sets up the virtual environment first.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent


def generate(scale: float, out: Path) -> Path:
    """lineitem.parquet from tpchgen-cli, generated once per scale factor."""
    target = out / f"tpch-sf{scale:g}"
    path = target / "lineitem.parquet"
    if path.exists():
        print(f"[1/3] reusing {path}")
        return path
    exe = shutil.which("tpchgen-cli") or str(Path(sys.executable).parent / "tpchgen-cli")
    t0 = time.perf_counter()
    subprocess.run(
        [exe, "parquet", "-s", f"{scale:g}", "--tables", "lineitem", "-o", str(target)],
        check=True,
    )
    print(
        f"[1/3] generated {path} ({path.stat().st_size / 2**20:.1f} MiB) "
        f"in {time.perf_counter() - t0:.1f} s"
    )
    return path


def write_indexed(src: Path, dst: Path) -> None:
    """Sorted by l_shipdate, 1M-row row groups, 20k-row pages, with a page index."""
    t0 = time.perf_counter()
    table = pq.read_table(src)
    # tpchgen-cli writes string_view, which pyarrow's sort/take kernels don't take yet.
    schema = pa.schema(
        [f.with_type(pa.string()) if f.type == pa.string_view() else f for f in table.schema]
    )
    table = table.cast(schema).sort_by("l_shipdate")
    pq.write_table(
        table,
        dst,
        row_group_size=1_000_000,
        max_rows_per_page=20_000,
        write_page_index=True,
        compression="zstd",
        sorting_columns=[pq.SortingColumn(table.schema.get_field_index("l_shipdate"))],
    )
    print(
        f"[2/3] wrote {dst} ({table.num_rows:,} rows, {dst.stat().st_size / 2**20:.1f} MiB) "
        f"in {time.perf_counter() - t0:.1f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    ap.add_argument("--data", type=Path, default=ROOT / "data", help="output directory")
    args = ap.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    src = generate(args.scale, args.data)
    dst = args.data / f"lineitem-sf{args.scale:g}-indexed.parquet"
    write_indexed(src, dst)
    pqindex = [sys.executable, "-m", "pqindex"]
    print("[3/3] pqindex inspect")
    subprocess.run([*pqindex, "inspect", str(dst), "--row-group", "0"], check=True)
    subprocess.run(
        [*pqindex, "inspect", str(dst), "--row-group", "0", "--column", "l_shipdate", "--pages"],
        check=True,
    )


if __name__ == "__main__":
    main()
