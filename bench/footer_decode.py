"""Footer and ColumnIndex decode speed against pyarrow's C++ (medians, one run).

    .venv/bin/python bench/footer_decode.py [--repeat 30] [--markdown]

Cases:
* a footer of 100 row groups x 20 columns (10 int64 + 10 string, with
  statistics and a page index): ``ParquetFile.open`` (read + decode + checks)
  and the bare Thrift decode, against ``pyarrow.parquet.read_metadata``;
* a 1,000-page ColumnIndex (int64 and string columns): decode, and decode +
  validate + every page's decoded bounds.
Both pqindex decoders are measured: the C one (if built) and pure Python.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm caches and generated decoders
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def make_files(tmp: Path) -> tuple[Path, Path]:
    n = 100 * 1000
    cols: dict[str, object] = {f"i{k}": np.arange(n, dtype=np.int64) * (k + 1) for k in range(10)}
    cols.update({f"s{k}": [f"value-{j:08d}-{k}" for j in range(n)] for k in range(10)})
    footer_file = tmp / "footer_100x20.parquet"
    pq.write_table(pa.table(cols), footer_file, row_group_size=1000, write_page_index=True)
    m = 1000 * 100
    pages = pa.table(
        {
            "id": np.arange(m, dtype=np.int64),
            "name": [f"customer#{j:012d}" for j in range(m)],
        }
    )
    pages_file = tmp / "pages_1000.parquet"
    pq.write_table(
        pages,
        pages_file,
        row_group_size=m,
        max_rows_per_page=100,
        write_page_index=True,
        use_dictionary=False,
    )
    return footer_file, pages_file


def run_case(footer_file: Path, pages_file: Path, repeat: int) -> dict[str, float]:
    from pqindex.format.file import ParquetFile
    from pqindex.format.structs import ColumnIndex, FileMetaData
    from pqindex.format.values import page_bounds, validate_column_index

    raw = footer_file.read_bytes()
    (ln,) = struct.unpack("<I", raw[-8:-4])
    footer = raw[-8 - ln : -8]
    out = {
        "footer_bytes": float(ln),
        "pyarrow_read_metadata": median_ms(lambda: pq.read_metadata(footer_file), repeat),
        "open": median_ms(lambda: ParquetFile.open(footer_file).close(), repeat),
        "decode": median_ms(lambda: FileMetaData.decode(footer), repeat),
    }
    pf = ParquetFile.open(pages_file)
    for col in (0, 1):
        cc = pf.column_chunk(0, col)
        assert cc.column_index_offset is not None and cc.column_index_length is not None
        ci_raw = pf.read_bytes(cc.column_index_offset, cc.column_index_length)
        ci = ColumnIndex.decode(ci_raw)
        leaf = pf.leaf(col)
        assert len(ci.null_pages or []) == 1000, len(ci.null_pages or [])

        def bounds(ci_raw: bytes = ci_raw, leaf: object = leaf) -> None:
            c = ColumnIndex.decode(ci_raw)
            assert validate_column_index(c, 1000, leaf) is None  # type: ignore[arg-type]
            for i in range(1000):
                page_bounds(c, leaf, i)  # type: ignore[arg-type]

        name = leaf.name
        out[f"ci_decode_{name}"] = median_ms(lambda r=ci_raw: ColumnIndex.decode(r), repeat)
        out[f"ci_bounds_{name}"] = median_ms(bounds, max(5, repeat // 3))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        res = run_case(
            args.dir / "footer_100x20.parquet", args.dir / "pages_1000.parquet", args.repeat
        )
        print(repr(res))
        return
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        make_files(tmp)
        results = {}
        for label, env in (("C decoder", {}), ("pure Python", {"PQINDEX_PURE_PYTHON": "1"})):
            proc = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    "--dir",
                    str(tmp),
                    "--repeat",
                    str(args.repeat),
                ],
                env={**os.environ, **env},
                capture_output=True,
                text=True,
                check=True,
            )
            results[label] = eval(proc.stdout.strip().splitlines()[-1])
    from pqindex.format import thrift

    print(
        f"# Footer and ColumnIndex decode ({platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, pyarrow {pa.__version__})"
    )
    print()
    print(
        f"Footer of 100 row groups x 20 columns: {int(results['C decoder']['footer_bytes']):,} bytes."
    )
    print("Medians of", args.repeat, "runs, milliseconds; ratio = pqindex / pyarrow.read_metadata.")
    print()
    print("| case | decoder | pqindex ms | pyarrow ms | ratio |")
    print("|---|---|---:|---:|---:|")
    for label, r in results.items():
        pa_ms = r["pyarrow_read_metadata"]
        print(
            f"| ParquetFile.open (read+decode+checks) | {label} | {r['open']:.2f} | {pa_ms:.2f} | {r['open'] / pa_ms:.1f}x |"
        )
        print(
            f"| FileMetaData.decode (bytes in memory) | {label} | {r['decode']:.2f} | {pa_ms:.2f} | {r['decode'] / pa_ms:.1f}x |"
        )
    print()
    print(
        "| 1,000-page ColumnIndex | decoder | decode ms | decode + validate + 1,000 page bounds ms |"
    )
    print("|---|---|---:|---:|")
    for label, r in results.items():
        for name in ("id", "name"):
            print(
                f"| {name} ({'int64' if name == 'id' else 'string'}) | {label} | "
                f"{r[f'ci_decode_{name}']:.2f} | {r[f'ci_bounds_{name}']:.2f} |"
            )
    _ = thrift


if __name__ == "__main__":
    main()
