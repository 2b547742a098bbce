"""Iceberg position deletes (merge-on-read), applied as pyiceberg applies them.

pyiceberg 0.12 writes no delete file (its ``delete`` rewrites data files, even under
``write.delete.mode=merge-on-read``), so the position delete files here are written
by the spec (a Parquet file of ``file_path``, ``pos`` with the reserved field ids) and
committed in a delete manifest through pyiceberg's own snapshot producer. pyiceberg's
scan, which applies position deletes, is the reference, with random predicates.
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import import_or_missing

pyiceberg = import_or_missing("pyiceberg", "pyiceberg")

import pqindex  # noqa: E402
from pqindex.errors import UnsupportedError  # noqa: E402
from table_rows import normalize, random_predicate  # noqa: E402
from test_tables_iceberg import _catalog, _rows  # noqa: E402

_FILE_PATH_ID, _POS_ID = 2147483546, 2147483545


def _commit_position_deletes(table: Any, deletes: dict[str, list[int]]) -> None:
    """One delete file of ``deletes`` (data file URI -> row positions), committed in a
    delete manifest of a new snapshot."""
    from pyiceberg.manifest import (
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestContent,
        ManifestEntry,
        ManifestEntryStatus,
        ManifestWriterV2,
    )
    from pyiceberg.table.snapshots import Operation
    from pyiceberg.table.update.snapshot import _FastAppendFiles
    from pyiceberg.typedef import Record

    rows = sorted((p, i) for p, ps in deletes.items() for i in ps)
    schema = pa.schema([
        pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": str(_FILE_PATH_ID)}),
        pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": str(_POS_ID)})])
    uri = f"{table.location()}/data/pos-deletes-{uuid.uuid4()}.parquet"
    local = uri.removeprefix("file://")
    pq.write_table(pa.table({"file_path": [p for p, _ in rows], "pos": [i for _, i in rows]},
                            schema=schema), local)
    delete_file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES, file_path=uri,
        file_format=FileFormat.PARQUET, partition=Record(), record_count=len(rows),
        file_size_in_bytes=Path(local).stat().st_size)
    delete_file.spec_id = 0

    class DeleteManifest(ManifestWriterV2):
        def content(self) -> ManifestContent:
            return ManifestContent.DELETES

        @property
        def _meta(self) -> dict[str, str]:
            return {**super()._meta, "content": "deletes"}

    class AddDeletes(_FastAppendFiles):
        def _existing_manifests(self) -> list[Any]:
            writer = DeleteManifest(self._transaction.table_metadata.spec(), self.schema(),
                                    self.new_manifest_output(), self._snapshot_id,
                                    self._compression)
            with writer:
                writer.add(ManifestEntry.from_args(
                    status=ManifestEntryStatus.ADDED, snapshot_id=self._snapshot_id,
                    sequence_number=None, file_sequence_number=None, data_file=delete_file))
            return [*super()._existing_manifests(), writer.to_manifest_file()]

    with table.transaction() as tx:
        AddDeletes(operation=Operation.DELETE, transaction=tx, io=table.io).commit()


@pytest.fixture(scope="module")
def deleted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[int]]:
    """Unpartitioned table, two appends with small row groups; position deletes on
    both files, then more on one of them (two delete files for one data file), and a
    file appended after them."""
    catalog = _catalog(tmp_path_factory.mktemp("ice-del"))
    t = catalog.create_table("ns.d", schema=_rows(1).schema,
                             properties={"write.parquet.row-group-limit": "40"})
    for i in range(2):
        t.append(_rows(150, i * 150))
    snapshots = [t.current_snapshot().snapshot_id]
    files = sorted(task.file.file_path for task in t.scan().plan_files())
    rng = random.Random(3)
    _commit_position_deletes(t, {
        files[0]: sorted(rng.sample(range(150), 40) + list(range(40, 80))),
        files[1]: [0, 149]})
    t = catalog.load_table("ns.d")
    snapshots.append(t.current_snapshot().snapshot_id)
    _commit_position_deletes(t, {files[1]: list(range(100, 120))})
    t = catalog.load_table("ns.d")
    t.append(_rows(60, 900))
    snapshots.append(t.current_snapshot().snapshot_id)
    return catalog.load_table("ns.d"), snapshots


def test_position_deletes_give_pyicebergs_rows_at_every_snapshot(
        deleted: tuple[Any, list[int]]) -> None:
    table, snapshots = deleted
    rng = random.Random(47)
    for sid in snapshots:
        reference = table.scan(snapshot_id=sid).to_arrow()
        ds = pqindex.dataset(table, snapshot_id=sid)
        assert normalize(ds.to_table()) == normalize(reference), sid
        assert ds.count_rows() == reference.num_rows
        for _ in range(10):
            sql, expr = random_predicate(rng, 1000, 320)
            got = ds.to_table(where=sql)
            assert normalize(got) == normalize(reference.filter(expr)), f"{sid}: {sql}"
    last = pqindex.dataset(table)
    assert "rows deleted by the position deletes" in last.explain()
    assert table.scan().to_arrow().num_rows < 360  # the deletes took rows out
    with pytest.raises(UnsupportedError, match="deleted rows"):
        last.to_pyarrow_dataset()


def test_a_location_with_position_deletes_reads_as_the_table_object(
        deleted: tuple[Any, list[int]]) -> None:
    table, _ = deleted
    by_location = pqindex.dataset(table.location().removeprefix("file://"))
    assert normalize(by_location.to_table()) == normalize(table.scan().to_arrow())
