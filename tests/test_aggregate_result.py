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
