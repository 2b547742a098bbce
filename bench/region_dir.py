"""Region directory formats compared: 2.0 (one JSON directory) vs 3.0 (per column).

    .venv/bin/python bench/region_dir.py OLD_SRC OLD_FILE NEW_SRC NEW_FILE [--rounds 7]

``OLD_FILE`` was indexed by the code in ``OLD_SRC`` (format 2.0), ``NEW_FILE`` by
``NEW_SRC`` (3.0), from the same plain file (``bench/selective.py --shape issue``,
or a copy rewritten with smaller pages). Each measurement is a fresh process (a
cold open: nothing cached but the OS page cache); old and new alternate round by
round. Prints directory bytes, then per query the median CPU time
(``time.process_time``), wall time, bytes read and requests (pqindex's report).
The machine is shared: CPU time and bytes are the figures to trust.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_CHILD = r"""
import json, sys, time
import pqindex
path, where = sys.argv[1], sys.argv[2]
ds = pqindex.dataset(path)
c0, w0 = time.process_time(), time.perf_counter()
scan = ds.scan(columns=["id", "ts", "amount"], where=where)
t = scan.to_table()
c1, w1 = time.process_time(), time.perf_counter()
r = scan.report.to_dict()
print(json.dumps({"cpu": c1 - c0, "wall": w1 - w0, "rows": t.num_rows,
                  "bytes": r["bytes_read"], "requests": r["requests"]}))
"""

_DIR = r"""
import json, sys
from pqindex.format.file import ParquetFile
from pqindex.indexes.region import read_region
with ParquetFile.open(sys.argv[1]) as pf:
    region, _ = read_region(pf)
    blobs = sum(e.length for e in region.blobs)
    print(json.dumps({"version": region.version, "region": region.size,
                      "directory": region.size - blobs - 28, "blobs": len(region.blobs)}))
"""


def _run(src: str, code: str, *args: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": src})
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("old_src")
    ap.add_argument("old_file")
    ap.add_argument("new_src")
    ap.add_argument("new_file")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--user-id", type=int, required=True)
    ap.add_argument("--point", type=int, default=2_440_007)
    a = ap.parse_args()
    sides = {"old": (a.old_src, a.old_file), "new": (a.new_src, a.new_file)}
    for name, (_src, path) in sides.items():
        print(name, _run(a.new_src, _DIR, path))  # the new reader reads both versions
    queries = {"point": f"id = {a.point}", "absent": "category = 'absent'",
               "user_id": f"user_id = {a.user_id}"}
    got: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(a.rounds):
        for q, where in queries.items():
            for name, (src, path) in sides.items():
                got.setdefault((q, name), []).append(_run(src, _CHILD, path, where))
    print(f"load average {os.getloadavg()}")
    print("| query | side | CPU ms | wall ms | bytes read | requests | rows |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (q, name), runs in got.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"| {q} | {name} | {med['cpu'] * 1e3:.1f} | {med['wall'] * 1e3:.1f} | "
              f"{med['bytes']:,.0f} | {med['requests']:.0f} | {med['rows']:.0f} |")


if __name__ == "__main__":
    main()
