"""Rows a table deleted without rewriting their file: Delta deletion vectors.

deltalake 1.6 does not write deletion vectors (its ``delete`` rewrites files), so they
come from two places: tables Delta's reference implementation wrote (delta-rs's test
data, ``tests/data/delta-rs``), and vectors written here by the protocol's format onto
tables deltalake wrote with several row groups per file, in each storage kind (``u``
relative with a random prefix, ``i`` inline, ``p`` absolute). Rows are compared with
polars' and deltalake's DataFusion reads, which apply the vectors with delta-kernel's
decoder, under random predicates; ``drop_deleted`` is checked against a row mask.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
import uuid
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import import_or_missing

deltalake = import_or_missing("deltalake", "deltalake")
pl = import_or_missing("polars", "polars")
pyroaring = import_or_missing("pyroaring", "pyroaring")

import pqindex  # noqa: E402
from pqindex.dataset.tables.deletes import drop_deleted, row_group_holes  # noqa: E402
from pqindex.errors import CorruptFileError, PqIndexError, UnsupportedError  # noqa: E402
from pqindex.format.match import Match  # noqa: E402
from pqindex.format.row_ranges import RowRanges  # noqa: E402
from pqindex.plan.planner import FilePlan, RowGroupPlan  # noqa: E402
from s3_server import S3Endpoint, s3  # noqa: E402, F401  (the session fixture)
from table_rows import normalize, random_predicate  # noqa: E402
from test_tables_delta import _rows  # noqa: E402

DATA = Path(__file__).parent / "data" / "delta-rs"
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_MAGIC = 1681511377


def _z85(data: bytes) -> str:
    out = []
    for i in range(0, len(data), 4):
        n = int.from_bytes(data[i:i + 4], "big")
        out.append("".join(_Z85[n // 85 ** k % 85] for k in range(4, -1, -1)))
    return "".join(out)


def _vector(rows: list[int]) -> bytes:
    """A deletion vector's bytes: the magic number, then the portable 64-bit bitmap."""
    return struct.pack("<I", _MAGIC) + pyroaring.BitMap64(rows).serialize()


def _polars(path: Path, version: int | None = None) -> pa.Table:
    return pl.read_delta(str(path), version=version).to_arrow()


def _log_adds(path: Path) -> dict[str, dict[str, Any]]:
    """Each file's latest add action in the table's JSON commits."""
    adds: dict[str, dict[str, Any]] = {}
    for commit in sorted((path / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                adds[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                adds.pop(action["remove"]["path"], None)
    return adds


def _commit_vectors(path: Path, deleted: dict[str, tuple[str, list[int]]]) -> int:
    """Commit deletion vectors: file (as the log names it) -> (storage kind, row
    positions); the table's protocol gains the feature. The new version."""
    from deltalake import DeltaTable

    version = DeltaTable(str(path)).version() + 1
    adds = _log_adds(path)
    actions: list[dict[str, Any]] = [{"protocol": {
        "minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors"]}}]
    for rel, (kind, rows) in deleted.items():
        old = adds[rel]
        data = _vector(rows)
        dv: dict[str, Any] = {"storageType": kind, "sizeInBytes": len(data),
                              "cardinality": len(set(rows))}
        if kind == "i":
            dv["pathOrInlineDv"] = _z85(data + b"\0" * (-len(data) % 4))
        else:
            uid = uuid.uuid4()
            prefix = "ab" if kind == "u" else ""
            folder = path / prefix if kind == "u" else path.parent / "elsewhere"
            folder.mkdir(exist_ok=True)
            file = folder / f"deletion_vector_{uid}.bin"
            file.write_bytes(b"\x01" + struct.pack(">I", len(data)) + data
                             + struct.pack(">I", zlib.crc32(data)))
            dv["pathOrInlineDv"] = (prefix + _z85(uid.bytes) if kind == "u"
                                    else file.as_uri())
            dv["offset"] = 1
        # A logical file is its path and its vector: the remove names both.
        actions.append({"remove": {"path": rel, "dataChange": True,
                                   "deletionTimestamp": 1, "size": old["size"],
                                   "partitionValues": old["partitionValues"],
                                   **({"deletionVector": old["deletionVector"]}
                                      if "deletionVector" in old else {})}})
        actions.append({"add": {**old, "deletionVector": dv, "dataChange": True}})
    log = path / "_delta_log" / f"{version:020d}.json"
    log.write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return version


def test_the_z85_helper_names_the_reference_tables_vector_file() -> None:
    # The reference table's descriptor and its file name: the helper encodes as Delta does.
    uid = uuid.UUID("61d16c75-6994-46b7-a15b-8b538852e50e")
    assert _z85(uid.bytes) == "vBn[lx{q8@P<9BNH/isA"


@pytest.mark.parametrize("name", ["table-with-dv-small", "table_with_deletion_logs"])
def test_tables_delta_wrote_read_as_polars_reads_them(name: str, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    path = tmp_path / name
    shutil.copytree(DATA / name, path)
    reference = _polars(path)
    ds = pqindex.dataset(str(path))
    assert normalize_any(ds.to_table()) == normalize_any(reference)
    masks = pa.table(DeltaTable(str(path)).deletion_vectors())
    deleted = sum(m.count(False) for m in masks.column("selection_vector").to_pylist())
    assert deleted and ds.count_rows() == reference.num_rows
    assert "rows deleted by the deletion vector" in ds.explain()
    with pytest.raises(UnsupportedError, match="deleted rows"):
        ds.to_pyarrow_dataset()


def normalize_any(t: pa.Table) -> list[dict[str, Any]]:
    """Rows sorted whatever the columns (the reference tables have no ``id`` for all)."""
    t = t.select(sorted(t.column_names))
    t = t.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_string_view(f.type)
                          or pa.types.is_large_string(f.type) else f for f in t.schema]))
    return sorted(t.to_pylist(), key=repr)


@pytest.fixture(scope="module")
def dv_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """Three appends (partitioned by region, row groups of 64 rows), then deletion
    vectors of each storage kind, then one vector replaced by a larger one."""
    from deltalake import WriterProperties, write_deltalake

    path = tmp_path_factory.mktemp("dv") / "t"
    props = WriterProperties(max_row_group_size=64)
    for i in range(3):
        write_deltalake(str(path), _rows(400, i * 400, seed=7), mode="append",
                        partition_by=["region"], writer_properties=props)
    versions = [2]
    rels = sorted(_log_adds(path))
    rng = random.Random(5)
    kinds = ["u", "i", "p"]
    deleted = {}
    adds = _log_adds(path)
    for j, rel in enumerate(rels[:6]):
        rows = int(json.loads(adds[rel]["stats"])["numRecords"])
        picked = set(rng.sample(range(rows), rows // 4))
        if j == 0:
            picked |= set(range(64, min(128, rows)))  # a whole row group deleted
        picked.add(rows - 1)  # the file's last row
        deleted[rel] = (kinds[j % 3], sorted(picked))
    versions.append(_commit_vectors(path, deleted))
    first = rels[0]
    rows_deleted = deleted[first][1]
    versions.append(_commit_vectors(path, {first: ("i", [*rows_deleted, 0, 1, 2, 3])}))
    return path, versions


def test_deletion_vectors_give_polars_rows_at_every_version(
        dv_table: tuple[Path, list[int]]) -> None:
    from deltalake import DeltaTable, QueryBuilder

    path, versions = dv_table
    rng = random.Random(46)
    for version in versions:
        reference = _polars(path, version)
        ds = pqindex.dataset(str(path), version=version)
        assert normalize(ds.to_table()) == normalize(reference), version
        for _ in range(10):
            sql, expr = random_predicate(rng, 1300, 520)
            assert normalize(ds.to_table(where=sql)) == normalize(reference.filter(expr)), sql
    # deltalake's own DataFusion reader agrees at the last version.
    qb = pa.table(QueryBuilder().register("t", DeltaTable(str(path))).execute(
        "SELECT * FROM t").read_all())
    assert normalize(pqindex.dataset(str(path)).to_table()) == normalize(
        qb.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_string_view(f.type)
                           else f for f in qb.schema])))


def test_aggregates_head_and_counts_leave_deleted_rows_out(
        dv_table: tuple[Path, list[int]]) -> None:
    path, _ = dv_table
    reference = _polars(path)
    ds = pqindex.dataset(str(path))
    got = ds.aggregate(["count(*)", "min(id)", "max(id)", "sum(id)", "count(amount)"])
    assert got["count(*)"] == reference.num_rows
    assert got["min(id)"] == pc.min(reference["id"]).as_py()
    assert got["max(id)"] == pc.max(reference["id"]).as_py()
    assert got["sum(id)"] == pc.sum(reference["id"]).as_py()
    assert got["count(amount)"] == pc.count(reference["amount"]).as_py()
    live = set(reference.column("id").to_pylist())
    assert set(ds.head(50).column("id").to_pylist()) <= live
    for where in ("id < 300", "region = 'eu'", "amount IS NULL"):
        want = reference.filter(_expr(where)).num_rows
        assert ds.count_rows(where) == want, where


def _expr(where: str) -> pc.Expression:
    return {"id < 300": pc.field("id") < 300, "region = 'eu'": pc.field("region") == "eu",
            "amount IS NULL": pc.field("amount").is_null()}[where]


def test_a_damaged_vector_file_is_a_clean_error(dv_table: tuple[Path, list[int]],
                                                tmp_path: Path) -> None:
    path = tmp_path / "t"
    shutil.copytree(dv_table[0], path)
    shutil.copytree(dv_table[0].parent / "elsewhere", tmp_path / "elsewhere")
    for f in (path / "ab").glob("*.bin"):
        data = bytearray(f.read_bytes())
        data[12] ^= 0xFF  # inside the bitmap: its checksum no longer holds
        f.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=r"deletion vectors not readable.*checksum"):
        pqindex.dataset(str(path)).to_table()


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=5), data=st.data())
def test_drop_deleted_takes_exactly_the_deleted_positions_out(
        sizes: list[int], data: st.DataObject) -> None:
    total = sum(sizes)
    deleted = np.array(sorted(data.draw(st.sets(st.integers(0, total - 1)))), np.int64)
    firsts = np.concatenate(([0], np.cumsum(sizes)))
    groups = []
    masks = []
    for i, n in enumerate(sizes):
        maybe = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
        sure = [m and data.draw(st.booleans()) for m in maybe]
        match = Match.ALL if all(sure) else Match.SOME if any(maybe) else Match.NONE
        groups.append(RowGroupPlan(i, n, match, "statistics", "", RowRanges.from_mask(maybe),
                                   RowRanges.from_mask(sure)))
        masks.append((np.array(maybe, bool), np.array(sure, bool)))
    plan = FilePlan("f", total, tuple(groups))
    holes = row_group_holes(_FakeFile(sizes), deleted, "deletion vector")  # type: ignore[arg-type]
    got = drop_deleted(plan, holes, "deletion vector")
    for i, (rgp, (maybe, sure)) in enumerate(zip(got.row_groups, masks, strict=True)):
        live = ~np.isin(np.arange(firsts[i], firsts[i + 1]), deleted)
        assert np.array_equal(rgp.maybe.to_mask(sizes[i]), maybe & live)
        assert np.array_equal(rgp.all.to_mask(sizes[i]), sure & live)
        assert rgp.match != Match.ALL or rgp.all.count() == sizes[i]
        assert (rgp.match == Match.NONE) == rgp.maybe.is_empty or groups[i].match == Match.NONE


class _FakeFile:
    """What drop_deleted reads of a file: its row groups' row counts, its path."""

    def __init__(self, sizes: list[int]) -> None:
        self.path = "f"
        self.metadata = type("M", (), {"row_groups": [type("R", (), {"num_rows": n})()
                                                      for n in sizes]})()


def test_a_vector_past_the_files_end_is_refused() -> None:
    with pytest.raises(PqIndexError, match="does not belong"):
        row_group_holes(_FakeFile([10]), np.array([3, 10], np.int64),  # type: ignore[arg-type]
                        "deletion vector")


def test_indexing_a_table_with_deletion_vectors_is_refused_unchanged(
        dv_table: tuple[Path, list[int]], tmp_path: Path) -> None:
    from deltalake import DeltaTable

    path = tmp_path / "t"
    shutil.copytree(dv_table[0], path)
    shutil.copytree(dv_table[0].parent / "elsewhere", tmp_path / "elsewhere")
    version = DeltaTable(str(path)).version()
    with pytest.raises(UnsupportedError, match="deletion vectors"):
        pqindex.add_indexes(str(path), bloom=["user"])
    assert DeltaTable(str(path)).version() == version
    assert not list(path.rglob("*.pqindex-*"))


def test_spark_reads_a_table_with_deletion_vectors_without_its_deleted_rows(
        spark: Any, dv_table: tuple[Path, list[int]]) -> None:
    import pqindex.spark

    path, _ = dv_table
    reference = _polars(path).filter(pc.field("id") >= 200)
    # Even when the plan is large enough for Spark's tasks (driver_read_bytes=0): their
    # plain per-file reads would return the deleted rows, so the driver reads it.
    got = pqindex.spark.read(spark, str(path), where="id >= 200", driver_read_bytes=0)
    assert sorted(got.toArrow().column("id").to_pylist()) == sorted(
        reference.column("id").to_pylist())


def test_a_table_with_deletion_vectors_on_s3(s3: S3Endpoint) -> None:  # noqa: F811
    """The reference table on moto: its vectors are read with the same storage options."""
    bucket = s3.new_bucket()
    root = DATA / "table-with-dv-small"
    for f in root.rglob("*"):
        if f.is_file():
            s3.put(bucket, f"t/{f.relative_to(root).as_posix()}", f.read_bytes())
    url = f"s3://{bucket}/t"
    ds = pqindex.dataset(url, storage_options=s3.storage_options())
    assert normalize_any(ds.to_table()) == normalize_any(_polars(root))
    assert ds.count_rows("value > 3") == _polars(root).filter(pc.field("value") > 3).num_rows == 5
