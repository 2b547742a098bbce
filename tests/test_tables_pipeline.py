"""``pqindex.spark.write(..., table_format="delta")``: Spark writes indexed files, the
driver commits them as one Delta transaction; deltalake, polars and pqindex read it."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from conftest import import_or_missing

deltalake = import_or_missing("deltalake", "deltalake")
pl = import_or_missing("polars", "polars")

import pqindex  # noqa: E402
import pqindex.spark  # noqa: E402
from pqindex.format.file import ParquetFile  # noqa: E402
from s3_server import S3Endpoint, s3  # noqa: E402, F401  (the session fixture)


def _table(n: int, start: int = 0) -> pa.Table:
    rng = np.random.default_rng(start)
    return pa.table({
        "id": pa.array(np.arange(start, start + n), pa.int64()),
        "user": pa.array([f"u{v:04d}" for v in rng.integers(0, 800, n)]),
        "day": pa.array([datetime.date(2024, 1, 1) + datetime.timedelta(days=int(v))
                         for v in rng.integers(0, 3, n)]),
        "region": pa.array(rng.choice(["eu", "us"], n)),
    })


def _rows(t: pa.Table) -> list[tuple[Any, ...]]:
    t = t.select(["id", "user", "day", "region"])
    t = t.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_large_string(f.type)
                          or pa.types.is_string_view(f.type) else f for f in t.schema]))
    return sorted(tuple(r.values()) for r in t.to_pylist())


def test_the_pipeline_writes_a_delta_table_every_reader_reads(spark: Any, tmp_path: Path
                                                              ) -> None:
    from deltalake import DeltaTable

    path = tmp_path / "t"
    first, second = _table(3000), _table(1000, 3000)
    opts: dict[str, Any] = dict(sort_by=["id"], partition_by=["region"], bloom=["user"],
                                page_rows=500, target_file_bytes=40_000, num_partitions=3,
                                table_format="delta")
    done = pqindex.spark.write(spark.createDataFrame(first), path, **opts)
    assert done["version"] == 0
    pqindex.spark.write(spark.createDataFrame(second), path, mode="append", **opts)
    dt = DeltaTable(str(path))
    assert dt.version() == 1
    want = _rows(pa.concat_tables([first, second]))
    assert _rows(dt.to_pyarrow_table()) == want
    assert _rows(pl.read_delta(str(path)).to_arrow()) == want
    assert _rows(pqindex.dataset(str(path)).to_table()) == want
    assert not (path / "_pqindex_table_staging").exists() or not any(
        (path / "_pqindex_table_staging").iterdir())
    adds = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    for a in adds:  # sizes and statistics recorded, files indexed
        full = path / a["path"]
        assert full.stat().st_size == a["size_bytes"]
        assert a["min.id"] is not None and a["max.id"] >= a["min.id"]
        with ParquetFile.open(str(full)) as pf:
            assert pf.column_chunk(0, 0).offset_index_offset is not None
    got = pqindex.dataset(str(path)).scan(where="id = 3500 AND region = 'eu'")
    table = got.to_table()
    assert _rows(table) == [r for r in want if r[0] == 3500 and r[3] == "eu"]
    assert got.report.files_skipped["table statistics"] >= len(adds) - 2
    pqindex.spark.write(spark.createDataFrame(second), path, mode="overwrite", **opts)
    assert _rows(DeltaTable(str(path)).to_pyarrow_table()) == _rows(second)
    # Read back in Spark: the overwritten files are still in the directory, and no
    # engine reads them (Spark's Parquet reader would list them).
    got = pqindex.spark.read(spark, str(path), where="id >= 3900", engine="native")
    assert _rows(got.toArrow()) == [r for r in _rows(second) if r[0] >= 3900]


def test_the_pipeline_writes_an_iceberg_table_through_a_catalog(spark: Any, tmp_path: Path
                                                                ) -> None:
    from pyiceberg.catalog import load_catalog

    (tmp_path / "wh").mkdir()
    catalog = {"type": "sql", "uri": f"sqlite:///{tmp_path}/cat.db",
               "warehouse": f"file://{tmp_path}/wh"}
    load_catalog("pqindex", **catalog).create_namespace("ns")
    first, second = _table(2000), _table(500, 2000)
    opts: dict[str, Any] = dict(sort_by=["id"], bloom=["user"], page_rows=500,
                                num_partitions=2, table_format="iceberg", catalog=catalog)
    pqindex.spark.write(spark.createDataFrame(first), "ns.t", **opts)
    done = pqindex.spark.write(spark.createDataFrame(second), "ns.t", mode="append", **opts)
    table = load_catalog("pqindex", **catalog).load_table("ns.t")
    assert done["snapshot_id"] == table.current_snapshot().snapshot_id
    want = _rows(pa.concat_tables([first, second]))
    assert _rows(table.scan().to_arrow()) == want
    assert _rows(pqindex.dataset(table).to_table()) == want
    for task in table.scan().plan_files():
        path = task.file.file_path.removeprefix("file://")
        assert Path(path).stat().st_size == task.file.file_size_in_bytes
        with ParquetFile.open(path) as pf:
            assert pf.column_chunk(0, 0).offset_index_offset is not None
    got = pqindex.dataset(table).scan(where="id = 2100")
    assert _rows(got.to_table()) == [r for r in want if r[0] == 2100]
    assert got.report.files_skipped["table statistics"] >= 1
    pqindex.spark.write(spark.createDataFrame(second), "ns.t", mode="overwrite", **opts)
    table = load_catalog("pqindex", **catalog).load_table("ns.t")
    assert _rows(table.scan().to_arrow()) == _rows(second)


def test_the_pipeline_writes_a_delta_table_on_s3(spark: Any, s3: S3Endpoint) -> None:  # noqa: F811
    """On a store (no rename) the job's files stay in their own directory inside the
    table and the log names them there; deltalake and polars read the table with the
    same storage_options, every size the log records is its object's."""
    from deltalake import DeltaTable

    bucket = s3.new_bucket()
    url = f"s3://{bucket}/t"
    so = {**s3.storage_options(), "aws_s3_allow_unsafe_rename": "true"}
    first, second = _table(800), _table(400, 800)
    opts: dict[str, Any] = dict(sort_by=["id"], partition_by=["region"], num_partitions=2,
                                table_format="delta", storage_options=so)
    assert pqindex.spark.write(spark.createDataFrame(first), url, **opts)["version"] == 0
    pqindex.spark.write(spark.createDataFrame(second), url, mode="append", **opts)
    dt = DeltaTable(url, storage_options=so)
    want = _rows(pa.concat_tables([first, second]))
    assert dt.version() == 1 and _rows(dt.to_pyarrow_table()) == want
    assert _rows(pl.read_delta(url, storage_options=so).to_arrow()) == want
    assert _rows(pqindex.dataset(url, storage_options=so).to_table()) == want
    sizes = {o["Key"]: o["Size"] for o in s3.boto3().list_objects_v2(
        Bucket=bucket, Prefix="t/")["Contents"]}
    adds = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    assert adds and all(sizes[f"t/{a['path']}"] == a["size_bytes"] for a in adds)
    assert all(a["partition.region"] in ("eu", "us") and a["min.id"] is not None for a in adds)
    # The job's commit point is gone once the log names its files.
    assert not [k for k in sizes if k.endswith("_pqindex_manifest.json")], sorted(sizes)


def test_the_pipeline_writes_an_iceberg_table_on_s3(spark: Any, s3: S3Endpoint,  # noqa: F811
                                                    tmp_path: Path) -> None:
    """A SQL catalog with its warehouse on moto: the job writes under the table's
    ``data/`` with ``storage_options``, pyiceberg commits the files where they are;
    pyiceberg, polars and pqindex read the rows, every size the manifests record is
    its object's, and the job leaves no commit point of its own in the table."""
    from pyiceberg.catalog import load_catalog

    bucket = s3.new_bucket()
    so = s3.storage_options()
    catalog = {"type": "sql", "uri": f"sqlite:///{tmp_path}/cat.db",
               # pyarrow's uploads stall behind the proxy: pyiceberg goes around it.
               "warehouse": f"s3://{bucket}/wh", "s3.endpoint": s3.direct_url,
               "s3.access-key-id": so["access_key_id"],
               "s3.secret-access-key": so["secret_access_key"], "s3.region": so["region"]}
    load_catalog("pqindex", **catalog).create_namespace("ns")
    first, second = _table(600), _table(300, 600)
    opts: dict[str, Any] = dict(sort_by=["id"], bloom=["user"], num_partitions=2,
                                table_format="iceberg", catalog=catalog, storage_options=so)
    pqindex.spark.write(spark.createDataFrame(first), "ns.t", **opts)
    done = pqindex.spark.write(spark.createDataFrame(second), "ns.t", mode="append", **opts)
    table = load_catalog("pqindex", **catalog).load_table("ns.t")
    assert done["snapshot_id"] == table.current_snapshot().snapshot_id
    want = _rows(pa.concat_tables([first, second]))
    assert _rows(table.scan().to_arrow()) == want
    popts = {"aws_endpoint_url": s3.url, "aws_access_key_id": so["access_key_id"],
             "aws_secret_access_key": so["secret_access_key"], "aws_region": so["region"],
             "aws_allow_http": "true"}
    assert _rows(pl.scan_iceberg(table, storage_options=popts).collect().to_arrow()) == want
    assert _rows(pqindex.dataset(table, storage_options=so).to_table()) == want
    keys = {o["Key"]: o["Size"] for o in s3.boto3().list_objects_v2(
        Bucket=bucket, Prefix="wh/")["Contents"]}
    tasks = list(table.scan().plan_files())
    assert tasks
    for task in tasks:
        key = task.file.file_path.removeprefix(f"s3://{bucket}/")
        assert keys[key] == task.file.file_size_in_bytes
    assert not [k for k in keys if k.endswith("_pqindex_manifest.json")]
    # A commit that fails: the job's files are removed, the table is unchanged.
    from pyiceberg.table import Transaction

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("commit refused")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Transaction, "add_files", refuse)
        with pytest.raises(pqindex.errors.PqIndexError, match="commit refused"):
            pqindex.spark.write(spark.createDataFrame(second), "ns.t", mode="append", **opts)
    after = {o["Key"] for o in s3.boto3().list_objects_v2(Bucket=bucket,
                                                          Prefix="wh/")["Contents"]}
    assert {k for k in after if "/data/" in k} == {k for k in keys if "/data/" in k}
    table = load_catalog("pqindex", **catalog).load_table("ns.t")
    assert _rows(table.scan().to_arrow()) == want
    pqindex.spark.write(spark.createDataFrame(second), "ns.t", mode="overwrite", **opts)
    table = load_catalog("pqindex", **catalog).load_table("ns.t")
    assert _rows(table.scan().to_arrow()) == _rows(second)
