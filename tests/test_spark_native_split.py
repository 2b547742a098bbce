"""A plan keeping few row groups but many pages is split into page-aligned row ranges
across tasks (``pqindex.spark.reader.tasks_of``), each task reading only its rows' pages.

Checked without Spark (the reader's ``partitions``/``read`` called directly) against
pyarrow's full read filtered by pyarrow, with damage proving what a task reads: every
data page outside one task's rows is overwritten, and that task still reads its rows.
One Spark test compares the split read with ``spark.read.parquet``.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql.pandas.types import from_arrow_schema

import pqindex
from pqindex.errors import PqIndexError
from pqindex.spark.reader import FileUnit, PqIndexReader, ReadTask, task_share

ROWS = 40_000
PAGE = 1_000
WHERE = "id >= 3500 AND id < 31000 AND x > 0"


def _table() -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({"id": np.arange(ROWS), "x": rng.normal(size=ROWS).round(3),
                     "s": [f"v{k % 13}" for k in range(ROWS)]})


@pytest.fixture(scope="module")
def one_group(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40k rows sorted by id, one row group of 40 pages."""
    path = tmp_path_factory.mktemp("split") / "one.parquet"
    pqindex.write_table(_table(), path, sort_by="id", row_group_rows=ROWS, page_rows=PAGE)
    assert pq.ParquetFile(path).metadata.num_row_groups == 1
    return path


def _reader(path: Path, **options: str) -> PqIndexReader:
    with pqindex.dataset(str(path)) as ds:
        schema = ds.schema
    return PqIndexReader({"path": str(path), "where": WHERE, **options}, from_arrow_schema(schema))


def _expected(path: Path) -> pa.Table:
    t = pq.read_table(path)
    return t.filter(pc.field("id") >= 3500).filter(pc.field("id") < 31000).filter(
        pc.field("x") > 0)


def test_one_row_group_is_split_at_page_boundaries(one_group: Path) -> None:
    r = _reader(one_group, task_bytes="1", parallelism="4")
    parts = r.partitions()
    units = [u for t in parts for u in t.units]  # type: ignore[attr-defined]
    assert len(parts) > 4 and all(len(u.ranges) == 1 for u in units)
    bounds = [u.ranges[0][1:] for u in units]
    # The ranges partition the row group; every cut is a page's first row.
    assert bounds[0][0] == 0 and bounds[-1][1] == ROWS
    assert all(a[1] == b[0] and a[1] % PAGE == 0 for a, b in itertools.pairwise(bounds))
    got = []
    for task, (lo, hi) in zip(parts, bounds, strict=True):
        rows = pa.Table.from_batches(list(r.read(task)), schema=r.target)
        ids = rows.column("id").to_numpy()
        assert ((ids >= lo) & (ids < hi)).all()  # a task's rows are its range's
        got.append(rows)
    want = _expected(one_group)
    assert pa.concat_tables(got).sort_by("id").equals(want.cast(r.target).sort_by("id"))
    # The partitions travel as JSON when the driver plans (pqindex.spark.read).
    assert [ReadTask.from_json(t.to_json()) for t in parts] == parts  # type: ignore[attr-defined]
    assert FileUnit.from_json(["p", [], [0], []]).ranges == ()  # the earlier form


def test_a_task_reads_only_its_pages(one_group: Path, tmp_path: Path) -> None:
    """Every data page outside the third task's rows damaged: that task still reads its
    rows, and the whole read fails (the damage is real)."""
    r = _reader(one_group, task_bytes="1", parallelism="4")
    parts = r.partitions()
    task = parts[2]
    _g, lo, hi = task.units[0].ranges[0]  # type: ignore[attr-defined]
    damaged = tmp_path / "one.parquet"
    damaged.write_bytes(one_group.read_bytes())
    with pqindex.dataset(str(damaged)) as ds:
        pf = ds.plan(["id"]).kept[0].file
        locations = [pf.offset_index(0, c).page_locations
                     for c in range(len(pf.schema.leaves))]
    with open(damaged, "r+b") as f:
        for pages in locations:
            for loc in pages:
                if not lo <= loc.first_row_index < hi:
                    f.seek(loc.offset)
                    f.write(b"\xff" * 12)
    d = _reader(damaged, task_bytes="1", parallelism="4")
    unit = task.units[0]  # type: ignore[attr-defined]
    mine = ReadTask((FileUnit(str(damaged), unit.partition, unit.row_groups,
                              unit.partition_types, unit.ranges),))
    rows = pa.Table.from_batches(list(d.read(mine)), schema=d.target)
    want = _expected(one_group)
    want = want.filter((pc.field("id") >= lo) & (pc.field("id") < hi))
    assert rows.num_rows > 0 and rows.sort_by("id").equals(want.cast(d.target).sort_by("id"))
    with pytest.raises(PqIndexError):
        pqindex.dataset(str(damaged)).to_table(where=WHERE)


def test_task_share() -> None:
    mib = 1 << 20
    assert task_share(22 * mib, 2) == 11 * mib  # one wave of 2 tasks (<= 16 MiB each)
    assert task_share(10 * mib, 2) == 5 * mib
    assert task_share(2 * mib, 2) == 4 * mib  # a small plan stays one task
    assert task_share(100 * mib, 2) == 100 * mib // 8  # 4 waves


@pytest.mark.spark
def test_split_read_matches_spark(spark: Any, one_group: Path) -> None:
    from pyspark.sql import functions as fn

    import pqindex.spark as ps

    ps.register(spark)
    df = (spark.read.format("pqindex").option("task_bytes", "1").option("parallelism", "4")
          .load(str(one_group)))
    q = df.where((fn.col("id") >= 3500) & (fn.col("id") < 31000) & (fn.col("x") > 0))
    assert q.rdd.getNumPartitions() > 4
    native = spark.read.parquet(str(one_group)).where(WHERE)
    assert sorted(map(tuple, q.collect())) == sorted(map(tuple, native.collect()))
