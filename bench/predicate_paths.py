"""Which path evaluates a predicate on a column chunk that must be read whole.

    .venv/bin/python bench/predicate_paths.py FILE --column category --value rare
    .venv/bin/python bench/predicate_paths.py FILE --column user_id --value 917029376656

For every row group of a local file, ``column = value`` is evaluated three ways,
timed in interleaved rounds (medians of wall and process CPU time, ms for the
whole file; the CPU time is the steadier figure on a shared machine):

* ``encoded``: pqindex's numpy path on the chunk's encoded pages
  (``scan/encoded.matching_rows``: the predicate once per dictionary entry,
  the indices searched for the matching ids only); "n/a" where that module
  does not handle the chunk;
* ``native per row group``: pyarrow's reader on the local file, one row group
  per call (as ``scan/executor.whole_fields`` reads it; dictionary strings
  kept as dictionaries), then ``pyarrow.compute``;
* ``native, all row groups``: one ``read_row_groups`` call over every row group
  (pyarrow's threads across them), then the same comparison.

All paths must find the same rows (the script stops otherwise). The choice the
scanner makes per chunk shape (``encoded.worth_matching``) and these
measurements are described in docs/ARCHITECTURE.md ("A scan", step 3).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pqindex.format.file import ParquetFile, chunk_range
from pqindex.scan import encoded
from pqindex.scan.fetch import arrow_metadata


def _rows_of(arr: Any, value: Any) -> np.ndarray:
    """Positions where ``arr == value`` (a dictionary array: compared per entry)."""
    if pa.types.is_dictionary(arr.type):
        ids = np.flatnonzero(pc.fill_null(pc.equal(arr.dictionary, value), False)
                             .to_numpy(zero_copy_only=False))
        idx = arr.indices.fill_null(-1).to_numpy(zero_copy_only=False)
        return np.flatnonzero(np.isin(idx, ids))
    return np.flatnonzero(pc.fill_null(pc.equal(arr, value), False)
                          .to_numpy(zero_copy_only=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--column", required=True)
    ap.add_argument("--value", required=True)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    path = args.file
    pf = ParquetFile.open(path)
    md = arrow_metadata(pf)
    schema = md.schema.to_arrow_schema()
    target = schema.field(args.column).type
    value: Any = args.value if pa.types.is_string(target) else int(args.value)
    col = next(c.index for c in pf.schema.leaves if c.path == (args.column,))
    rgs = list(range(md.num_row_groups))
    bases = np.cumsum([0] + [md.row_group(i).num_rows for i in rgs])[:-1].tolist()
    dictionary = [args.column] if pa.types.is_string(target) else None
    fd = os.open(path, os.O_RDONLY)

    def evaluate(arr: pa.Array) -> pa.BooleanArray:
        return pc.fill_null(pc.equal(arr, value), False)

    # Each path gives the matching rows file-wide, ascending.
    def run_encoded() -> np.ndarray | None:
        out = []
        for rg in rgs:
            start, length = chunk_range(pf.column_meta(rg, col))
            rows = encoded.matching_rows(pf, rg, col, target, os.pread(fd, length, start),
                                         evaluate)
            if rows is None:
                return None
            out.append(rows + bases[rg])
        return np.concatenate(out)

    def run_native() -> np.ndarray:
        out = []
        for rg in rgs:
            with pa.OSFile(path) as f:
                reader = pq.ParquetFile(f, metadata=md, pre_buffer=True,
                                        read_dictionary=dictionary)
                column = reader.read_row_group(rg, columns=[args.column]).column(0)
            out.append(_rows_of(column.combine_chunks(), value) + bases[rg])
        return np.concatenate(out)

    def run_native_all() -> np.ndarray:
        with pa.OSFile(path) as f:
            reader = pq.ParquetFile(f, metadata=md, pre_buffer=True, read_dictionary=dictionary)
            column = reader.read_row_groups(rgs, columns=[args.column], use_threads=True).column(0)
        # Chunks need not be row groups: positions made file-wide, as one list.
        out, base = [], 0
        for chunk in column.chunks:
            out.append(_rows_of(chunk, value) + base)
            base += len(chunk)
        return np.concatenate(out)

    paths: dict[str, Callable[[], np.ndarray | None]] = {
        "encoded": run_encoded,
        "native per row group": run_native,
        "native, all row groups": run_native_all,
    }
    reference = run_native()
    handled = {}
    for name, fn in paths.items():
        got = fn()
        handled[name] = got is not None
        if got is not None and got.tolist() != reference.tolist():
            sys.exit(f"{name} found other rows than pyarrow")
    walls: dict[str, list[float]] = {n: [] for n in paths}
    cpus: dict[str, list[float]] = {n: [] for n in paths}
    order = list(paths)
    for i in range(args.rounds):
        for name in order if i % 2 == 0 else order[::-1]:
            if not handled[name]:
                continue
            t0, c0 = time.perf_counter(), time.process_time()
            paths[name]()
            walls[name].append(time.perf_counter() - t0)
            cpus[name].append(time.process_time() - c0)
    load = os.getloadavg()
    chosen = sum(encoded.worth_matching(pf, rg, col, target) for rg in rgs)
    print(f"{path}: `{args.column} = {value!r}`, {len(rgs)} row groups, "
          f"{reference.size} rows match; load average {load[0]:.2f}; the scanner "
          f"evaluates {chosen} of these chunks on the encoded pages "
          "(encoded.worth_matching), pyarrow reads the rest per row group")
    print("| path | wall (ms) | CPU (ms) |")
    print("| --- | ---: | ---: |")
    for name in paths:
        if not handled[name]:
            print(f"| {name} | n/a | n/a |")
            continue
        print(f"| {name} | {statistics.median(walls[name]) * 1e3:.1f} "
              f"| {statistics.median(cpus[name]) * 1e3:.1f} |")
    os.close(fd)
    pf.close()


if __name__ == "__main__":
    main()
