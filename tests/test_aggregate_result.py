"""``Dataset.aggregate`` returns its report with its values: threads sharing a
dataset each get their own (the dataset's ``last_aggregate_report`` is whichever
finished last)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import pqindex


def test_each_call_gets_its_own_report(tmp_path: Path) -> None:
    for k in range(4):
        pq.write_table(pa.table({"id": pa.array(range(k * 100, k * 100 + 100), pa.int64())}),
                       tmp_path / f"f{k}.parquet")
    ds = pqindex.dataset(tmp_path)
    wheres = [f"id < {100 * (k + 1)}" for k in range(4)] * 4

    def run(where: str) -> tuple[str, int, int]:
        got = ds.aggregate(["count(*)"], where)
        return (where, int(got["count(*)"]),
                got.report.row_groups_from_metadata + got.report.row_groups_read)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, wheres))
    for where, count, files in results:
        k = int(where.split("<")[1]) // 100
        assert count == 100 * k, where
        assert files == k, where  # this call's row groups, not another thread's
    one = ds.aggregate(["count(*)", "max(id)"], "id >= 350")
    assert dict(one) == {"count(*)": 50, "max(id)": 399}
    assert one.report is ds.last_aggregate_report


def test_scan_schema_is_known_before_any_read(tmp_path: Path) -> None:
    """The projected schema of a scan that has not run: no data page read for it."""
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32()), "s": ["a", "b"]}),
                   tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": pa.array([3], pa.int64()), "s": ["c"]}),
                   tmp_path / "b.parquet")
    ds = pqindex.dataset(tmp_path)
    scan = ds.scan(["s", "id"], "id > 1")
    assert scan.schema == pa.schema([("s", pa.string()), ("id", pa.int64())])
    assert scan.report.pages_read == 0 and scan.report.rows_matched == 0
    assert scan.to_table().num_rows == 2
