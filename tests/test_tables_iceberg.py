"""Reading Iceberg tables as pyiceberg reads them: the snapshot's data files from
plan_files (manifest bounds and partition transforms prune), snapshots by id, the
current metadata file from a table location.

Tables are written by pyiceberg itself (SQL catalog on sqlite in tmp_path):
appends, an overwrite, a delete, a column added, a partition spec with transforms.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from conftest import import_or_missing

pyiceberg = import_or_missing("pyiceberg", "pyiceberg")

import pqindex  # noqa: E402
from pqindex.errors import UserInputError  # noqa: E402
from table_rows import normalize, random_predicate  # noqa: E402


def _rows(n: int, start: int = 0) -> pa.Table:
    rng = random.Random(start)
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "user": pa.array([f"u{rng.randrange(300):04d}" for _ in ids], pa.string()),
        "amount": pa.array([None if rng.random() < 0.1 else rng.uniform(-50, 50) for _ in ids],
                           pa.float64()),
        "day": pa.array([dt.date(2024, 1, 1 + i % 6) for i in ids], pa.date32()),
        "region": pa.array([rng.choice(["eu", "us", "ap"]) for _ in ids], pa.string()),
    })


def _catalog(tmp: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    wh = tmp / "wh"
    wh.mkdir(exist_ok=True)
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp}/cat.db", warehouse=f"file://{wh}")
    catalog.create_namespace("ns")
    return catalog


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[int]]:
    """A table partitioned by identity(region), through appends, an overwrite of some
    rows, a delete and a column added; the snapshot ids along the way. (pyiceberg
    writes other transforms only with pyiceberg-core, which is not installed.)"""
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import IntegerType

    catalog = _catalog(tmp_path_factory.mktemp("iceberg"))
    schema = _rows(1).schema
    t = catalog.create_table("ns.t", schema=schema)
    with t.update_spec() as spec:
        spec.add_field("region", IdentityTransform(), "region")
    snapshots = []
    for i in range(3):
        t.append(_rows(120, i * 120))
        snapshots.append(t.current_snapshot().snapshot_id)
    t.delete("id < 50")
    snapshots.append(t.current_snapshot().snapshot_id)
    t.overwrite(_rows(30, 1000), overwrite_filter="id >= 300")
    snapshots.append(t.current_snapshot().snapshot_id)
    with t.update_schema() as update:
        update.add_column("score", IntegerType())
    t = catalog.load_table("ns.t")
    extra = _rows(40, 2000).append_column("score", pa.array(range(40), pa.int32()))
    t.append(extra)
    snapshots.append(t.current_snapshot().snapshot_id)
    return t, snapshots


def test_random_predicates_give_pyicebergs_rows_at_every_snapshot(
        table: tuple[Any, list[int]]) -> None:
    t, snapshots = table
    rng = random.Random(40)
    for snapshot_id in snapshots:
        reference = t.scan(snapshot_id=snapshot_id).to_arrow()
        ds = pqindex.dataset(t, snapshot_id=snapshot_id)
        assert normalize(ds.to_table()) == normalize(reference), snapshot_id
        for _ in range(10):
            sql, expr = random_predicate(rng, 2100, 320)
            got = ds.to_table(where=sql)
            assert normalize(got) == normalize(reference.filter(expr)), sql


def test_the_manifests_prune_files_and_explain_names_the_snapshot(
        table: tuple[Any, list[int]]) -> None:
    t, snapshots = table
    ds = pqindex.dataset(t)
    region = t.scan(row_filter="id = 130").to_arrow().column("region")[0].as_py()
    where = f"region = '{region}' AND id = 130"
    text = ds.explain(where=where)
    assert f"snapshot {snapshots[-1]}" in text
    scan = ds.scan(where=where)
    assert scan.to_table().column("id").to_pylist() == [130]
    ruled_out = scan.report.files_skipped["table statistics"]
    assert ruled_out >= scan.report.files_total - 1  # partition values and id bounds
    opened = [p for p, st in ds.io_stats().items() if st.requests or st.bytes_read]
    assert len(opened) <= scan.report.files_total - ruled_out


def test_a_location_and_a_metadata_file_read_the_current_snapshot(
        table: tuple[Any, list[int]], monkeypatch: pytest.MonkeyPatch) -> None:
    import polars as pl

    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")  # (no polars_iceberg plugin)

    t, _ = table
    location = t.location().removeprefix("file://")
    want = normalize(t.scan().to_arrow())
    assert normalize(pqindex.dataset(location).to_table()) == want
    assert normalize(pqindex.dataset(t.metadata_location).to_table()) == want
    assert normalize(pl.scan_iceberg(t).collect().to_arrow()) == want
    # Only the snapshot's files: pointed at data/ the files of every snapshot are there.
    assert len(pqindex.dataset(location).files) < len(list(Path(location, "data").rglob(
        "*.parquet")))


def test_an_added_column_is_null_in_older_files(table: tuple[Any, list[int]]) -> None:
    t, _ = table
    got = pqindex.dataset(t).to_table(columns=["id", "score"], where="id < 100")
    assert got.num_rows and set(got.column("score").to_pylist()) == {None}
    got = pqindex.dataset(t).to_table(columns=["id", "score"], where="score = 3")
    assert got.column("id").to_pylist() == [2003]


def test_columns_are_bound_by_field_id_renamed_and_dropped_ones_too(tmp_path: Path) -> None:
    """Files name columns as they were at write time: ``user`` renamed ``customer`` is
    found in old files by its field id, and ``amount`` dropped then added again (a new
    id) is NULL in the files written before."""
    from pyiceberg.types import DoubleType

    catalog = _catalog(tmp_path)
    t = catalog.create_table("ns.r", schema=_rows(1).schema)
    t.append(_rows(60))
    with t.update_schema() as update:
        update.rename_column("user", "customer")
    with t.update_schema() as update:
        update.delete_column("amount")
    with t.update_schema() as update:
        update.add_column("amount", DoubleType())
    t = catalog.load_table("ns.r")
    later = _rows(40, 100).rename_columns(["id", "customer", "amount", "day", "region"])
    t.append(later.select([f.name for f in t.schema().as_arrow()]))
    reference = t.scan().to_arrow()
    ds = pqindex.dataset(t)
    assert sorted(ds.schema.names) == sorted(reference.column_names)
    got = ds.to_table()
    assert normalize(got) == normalize(reference)
    old = got.filter(pc.field("id") < 60)
    assert old.column("amount").null_count == 60 and old.column("customer").null_count == 0
    some = reference.column("customer")[3].as_py()
    assert normalize(ds.to_table(where=f"customer = '{some}'")) == normalize(
        reference.filter(pc.field("customer") == some))


def test_an_unknown_snapshot_is_a_user_error(table: tuple[Any, list[int]]) -> None:
    t, _ = table
    with pytest.raises(UserInputError, match="snapshot"):
        pqindex.dataset(t, snapshot_id=12345)
