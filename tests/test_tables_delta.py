"""Reading Delta tables as deltalake reads them: the snapshot's files, typed partition
values, the log's statistics pruning files, time travel, object stores.

Every table here is written by deltalake itself (appends, deletes, overwrites,
compaction, schema evolution); rows are compared with deltalake's and polars'
reads of the same version under random predicates.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

from conftest import import_or_missing

deltalake = import_or_missing("deltalake", "deltalake")
pl = import_or_missing("polars", "polars")

import pqindex  # noqa: E402
from pqindex.cli import cli  # noqa: E402
from pqindex.errors import UserInputError  # noqa: E402
from s3_server import S3Endpoint, s3  # noqa: E402, F401  (the session fixture)
from table_rows import normalize, random_predicate  # noqa: E402


def _rows(n: int, start: int = 0, seed: int = 0) -> pa.Table:
    rng = random.Random(seed + start)
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "user": [f"u{rng.randrange(500):04d}" for _ in ids],
        "amount": pa.array([None if rng.random() < 0.1 else rng.uniform(-50, 50) for _ in ids],
                           pa.float64()),
        "region": [rng.choice(["eu", "us", "ap"]) for _ in ids],
        "day": pa.array([dt.date(2024, 1, 1 + i % 5) for i in ids], pa.date32()),
    })


def _build(path: Path) -> dict[str, int]:
    """A partitioned table through appends, a delete, an overwrite of one partition,
    a compaction and a column added; the versions each step made."""
    from deltalake import DeltaTable, write_deltalake

    versions = {}
    for i in range(4):
        write_deltalake(str(path), _rows(150, i * 150), mode="append",
                        partition_by=["region"])
    versions["appended"] = DeltaTable(str(path)).version()
    DeltaTable(str(path)).delete("id >= 100 AND id < 180")
    versions["deleted"] = DeltaTable(str(path)).version()
    write_deltalake(str(path), _rows(40, 2000).set_column(3, "region", pa.array(["ap"] * 40)),
                    mode="overwrite", predicate="region = 'ap'", partition_by=["region"])
    versions["overwritten"] = DeltaTable(str(path)).version()
    DeltaTable(str(path)).optimize.compact()
    versions["compacted"] = DeltaTable(str(path)).version()
    extra = _rows(60, 3000).append_column("score", pa.array(range(60), pa.int32()))
    write_deltalake(str(path), extra, mode="append", schema_mode="merge",
                    partition_by=["region"])
    versions["evolved"] = DeltaTable(str(path)).version()
    return versions


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    path = tmp_path_factory.mktemp("delta") / "t"
    return path, _build(path)


def test_random_predicates_give_deltalakes_rows_at_every_version(
        table: tuple[Path, dict[str, int]]) -> None:
    from deltalake import DeltaTable

    path, versions = table
    rng = random.Random(40)
    for name, version in versions.items():
        reference = DeltaTable(str(path), version=version).to_pyarrow_table()
        ds = pqindex.dataset(str(path), version=version)
        assert normalize(ds.to_table()) == normalize(reference), name
        for _ in range(12):
            sql, expr = random_predicate(rng, 3100, 520)
            got = ds.to_table(where=sql)
            want = reference.filter(expr)
            assert normalize(got) == normalize(want), f"{name}: {sql}"


def test_current_version_matches_polars_and_reads_no_removed_file(
        table: tuple[Path, dict[str, int]]) -> None:
    from deltalake import DeltaTable

    path, _ = table
    ds = pqindex.dataset(str(path))
    active = {u.removeprefix("file://") for u in DeltaTable(str(path)).file_uris()}
    on_disk = {str(p) for p in path.rglob("*.parquet")}
    assert on_disk - active  # the delete, overwrite and compaction left removed files
    assert set(ds.files) == active
    assert normalize(ds.to_table()) == normalize(pl.read_delta(str(path)).to_arrow())
    scan = ds.scan(where="id < 50")
    scan.to_table()
    assert not scan.report.warnings


def test_partition_values_are_typed_columns(table: tuple[Path, dict[str, int]]) -> None:
    path, _ = table
    ds = pqindex.dataset(str(path))
    schema = ds.schema
    assert schema.field("region").type == pa.string()
    assert schema.field("day").type == pa.date32()
    assert schema.field("score").type == pa.int32()  # the column added later
    got = ds.to_table(columns=["id", "region"], where="region = 'ap'")
    assert set(got.column("region").to_pylist()) == {"ap"}


def test_the_logs_statistics_rule_files_out_before_any_footer_is_read(
        tmp_path: Path) -> None:
    from deltalake import write_deltalake

    path = tmp_path / "t"
    for i in range(8):  # one file per append, ids in disjoint ranges
        write_deltalake(str(path), _rows(100, i * 100), mode="append")
    ds = pqindex.dataset(str(path))
    text = ds.explain(where="id = 250")
    assert "7 file(s) ruled out by the table's statistics" in text
    assert "version 7" in text
    scan = ds.scan(where="id = 250")
    got = scan.to_table()
    assert got.column("id").to_pylist() == [250]
    assert scan.report.files_skipped["table statistics"] == 7
    assert scan.report.files_total == 8
    opened = [p for p, st in ds.io_stats().items() if st.requests or st.bytes_read]
    assert len(opened) == 1  # only the file the statistics kept was ever opened


def test_time_travel_by_timestamp_and_a_table_object(tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake

    path = tmp_path / "t"
    write_deltalake(str(path), _rows(30))
    time.sleep(0.05)
    between = dt.datetime.now(dt.UTC)
    time.sleep(0.05)
    write_deltalake(str(path), _rows(30, 30), mode="append")
    assert pqindex.dataset(str(path), version=between.isoformat()).count_rows() == 30
    assert pqindex.dataset(str(path), version=0).count_rows() == 30
    assert pqindex.dataset(DeltaTable(str(path))).count_rows() == 60
    assert pqindex.dataset(DeltaTable(str(path)), version=0).count_rows() == 30
    with pytest.raises(UserInputError, match="version"):
        pqindex.dataset(str(path), version=7)


def test_column_mapping_reads_logical_names_from_physical_files(tmp_path: Path) -> None:
    """delta.columnMapping.mode=name: the files name columns col-<uuid>; the footers
    are read under the logical names (tables/mapping.py), partition values too."""
    from deltalake import DeltaTable, write_deltalake

    path = tmp_path / "t"
    write_deltalake(str(path), _rows(200), partition_by=["region"], configuration={
        "delta.columnMapping.mode": "name", "delta.minReaderVersion": "2",
        "delta.minWriterVersion": "5"})
    write_deltalake(str(path), _rows(150, 200), mode="append", partition_by=["region"])
    DeltaTable(str(path)).delete("id >= 20 AND id < 60")
    # deltalake's DataFusion reader: its to_pyarrow_table reads a column-mapped,
    # partitioned table's columns as NULL (deltalake 1.6.6), and polars refuses it.
    from deltalake import QueryBuilder

    reference = pa.table(QueryBuilder().register("t", DeltaTable(str(path))).execute(
        "SELECT * FROM t").read_all())
    reference = reference.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_string_view(
        f.type) else f for f in reference.schema]))
    some_file = next(iter(DeltaTable(str(path)).file_uris())).removeprefix("file://")
    import pyarrow.parquet as pq

    assert all(n.startswith("col-") for n in pq.read_schema(some_file).names)
    ds = pqindex.dataset(str(path))
    assert _names(ds.schema) == sorted(reference.column_names)
    assert normalize(ds.to_table()) == normalize(reference)
    rng = random.Random(41)
    for _ in range(15):
        sql, expr = random_predicate(rng, 400, 520)
        assert normalize(ds.to_table(where=sql)) == normalize(reference.filter(expr)), sql
    got = ds.aggregate(["count(*)", "max(id)"], where="user = 'u0007'")
    want = reference.filter(pc.field("user") == "u0007")
    assert got["count(*)"] == want.num_rows
    # The data file read directly keeps its own (physical) names: only the table renames.
    assert pqindex.dataset(some_file).schema.names[0].startswith("col-")


def _names(schema: pa.Schema) -> list[str]:
    return sorted(schema.names)


def test_the_cli_reads_a_table_and_explains_its_version(table: tuple[Path, dict[str, int]]
                                                        ) -> None:
    from deltalake import DeltaTable

    path, versions = table
    res = CliRunner().invoke(cli, ["explain", str(path), "--where", "id = 5"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert f"version {versions['evolved']}" in res.output
    res = CliRunner().invoke(cli, ["query", str(path), "--where", "id < 20", "--format", "csv"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    want = DeltaTable(str(path)).to_pyarrow_table().filter(pc.field("id") < 20).num_rows
    lines = [ln for ln in res.output.splitlines() if ln.strip()
             and not ln.startswith("pqindex:")]  # (the report goes to stderr)
    assert len(lines) == want + 1


def test_a_table_on_s3_with_the_same_storage_options(s3: S3Endpoint) -> None:  # noqa: F811
    from deltalake import DeltaTable, write_deltalake

    bucket = s3.new_bucket()
    url = f"s3://{bucket}/tables/t"
    opts = s3.storage_options()
    write_opts = {**opts, "aws_s3_allow_unsafe_rename": "true"}
    write_deltalake(url, _rows(200), partition_by=["region"], storage_options=write_opts)
    write_deltalake(url, _rows(100, 200), mode="append", partition_by=["region"],
                    storage_options=write_opts)
    DeltaTable(url, storage_options=opts).delete("id < 50")
    reference = DeltaTable(url, storage_options=opts).to_pyarrow_table()
    ds = pqindex.dataset(url, storage_options=opts)
    assert normalize(ds.to_table()) == normalize(reference)
    got = ds.to_table(where="id BETWEEN 40 AND 60 AND region = 'eu'")
    want = reference.filter((pc.field("id") >= 40) & (pc.field("id") <= 60)
                            & (pc.field("region") == "eu"))
    assert normalize(got) == normalize(want)
    assert pqindex.dataset(url, storage_options=opts, version=0).count_rows() == 200


def test_the_manifest_command_on_a_table_shows_its_log_and_writes_nothing(
        table: tuple[Path, dict[str, int]]) -> None:
    import json

    from deltalake import DeltaTable

    path, versions = table
    res = CliRunner().invoke(cli, ["manifest", str(path), "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    assert f"version {versions['evolved']}" in got["table"]
    adds = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).to_pylist()
    assert sorted((f["size"], f["rows"]) for f in got["files"]) == sorted(
        (a["size_bytes"], a["num_records"]) for a in adds)
    assert not (path / "_pqindex_manifest.json").exists()


def test_embedded_indexes_work_under_column_mapping(tmp_path: Path) -> None:
    """Indexing a column-mapped table by logical names indexes the files' physical
    columns; reading the table uses those indexes under the logical names."""
    from deltalake import DeltaTable, QueryBuilder, WriterProperties, write_deltalake

    path = tmp_path / "t"
    write_deltalake(str(path), _rows(1200), writer_properties=WriterProperties(
        max_row_group_size=200), configuration={
        "delta.columnMapping.mode": "name", "delta.minReaderVersion": "2",
        "delta.minWriterVersion": "5"})
    pqindex.add_indexes(str(path), bloom=["user"], distinct=["region"])
    reference = pa.table(QueryBuilder().register("t", DeltaTable(str(path))).execute(
        "SELECT * FROM t").read_all())
    reference = reference.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_string_view(
        f.type) else f for f in reference.schema]))
    ds = pqindex.dataset(str(path))
    # Absent values inside the statistics' range: only the embedded indexes rule them out.
    for where in ("user = 'u0250x'", "region = 'f'"):
        text = ds.explain(where=where)
        assert "embedded index" in text and "0 to read" in text, text
        assert ds.to_table(where=where).num_rows == 0
    for user in ("u0007", "u0123"):
        got = ds.to_table(where=f"user = '{user}'")
        assert normalize(got) == normalize(reference.filter(pc.field("user") == user))
    # The file itself keeps physical names, its indexes too.
    from pqindex.dataset.tables.delta import load_delta

    user = load_delta(str(path)).physical["user"]
    some_file = next(iter(DeltaTable(str(path)).file_uris())).removeprefix("file://")
    assert "embedded index" in pqindex.dataset(some_file).explain(
        where=f"`{user}` = 'u0250x'")
