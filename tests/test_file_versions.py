"""A file is one version: a file that changes between planning and reading, or in the
middle of a stream, gives an ObjectChangedError or the rows of one version, never a
mix (issue 39). Locally (replaced by a rename, rewritten in place with the same size,
and with its mtime put back) and on S3 (moto: the object replaced)."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.format.file import ParquetFile
from pqindex.io.errors import ObjectChangedError
from pqindex.scan.fetch import ScanOptions
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)

ROWS = 60_000
ROW_GROUP = 10_000
OLD, NEW = 0, 1_000_000  # the two versions' first id


def _version(base: int, rows: int = ROWS) -> pa.Table:
    ids = np.arange(base, base + rows, dtype=np.int64)
    return pa.table({"id": ids, "v": ids * 3 + 1})


def _bytes(base: int, codec: str, rows: int = ROWS) -> bytes:
    sink = io.BytesIO()
    # No dictionary: fixed-width PLAIN pages, so an uncompressed rewrite has the same size.
    pq.write_table(_version(base, rows), sink, compression=codec, row_group_size=ROW_GROUP,
                   use_dictionary=False, write_page_index=True, data_page_size=16 * 1024)
    return sink.getvalue()


def _expected(base: int, where: str | None, rows: int = ROWS) -> pa.Table:
    t = _version(base, rows)
    return t if where is None else t.filter(pc.field("v") != 7)


def _where(where: str | None) -> str | None:
    """The predicate of a case: None, or "filtered" (every row but one of OLD: not
    all-match, so the pages are read and filtered)."""
    return None if where is None else "v != 7"


def _change(path: Path, how: str, codec: str) -> None:
    """``path`` (version OLD) becomes version NEW, ``how``."""
    new = _bytes(NEW, codec)
    before = os.stat(path)
    if how == "rename":
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(new)
        os.replace(tmp, path)
        return
    with open(path, "r+b") as f:  # in place: the same inode
        f.write(new)
        f.truncate()
    if how == "in_place_mtime_restored":
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = os.stat(path)
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def _one_version(got: pa.Table, where: str | None, versions: tuple[int, ...]) -> None:
    """``got`` is exactly the rows of one of ``versions``."""
    for base in versions:
        want = _expected(base, where)
        if got.num_rows == want.num_rows and got.equals(want.cast(got.schema)):
            return
    ids = got.column("id")
    raise AssertionError(f"{got.num_rows} rows, ids {pc.min(ids)}..{pc.max(ids)}: "
                         f"not one version of {versions}")


def _rest(reader: pa.RecordBatchReader) -> list[pa.RecordBatch] | ObjectChangedError:
    try:
        return list(reader)
    except ObjectChangedError as e:
        return e


@pytest.mark.parametrize("where", [None, "filtered"])
@pytest.mark.parametrize("codec", ["none", "snappy"])
@pytest.mark.parametrize("how", ["rename", "in_place", "in_place_mtime_restored"])
def test_a_file_changed_mid_stream_is_never_mixed(
    tmp_path: Path, how: str, codec: str, where: str | None
) -> None:
    """One batch read, the file changed, the rest read: ObjectChangedError, or (a
    rename: the descriptor still reads the old inode) every row of the old version.
    Before: 10,000 old rows then 50,000 new ones (uncompressed), or a CorruptFileError
    on a healthy file (snappy)."""
    path = tmp_path / "f.parquet"
    path.write_bytes(_bytes(OLD, codec))
    if codec == "none" and how != "rename":
        assert len(_bytes(NEW, codec)) == path.stat().st_size  # the hard case
    ds = pqindex.dataset(path)
    reader = ds.scan(where=_where(where)).to_reader()
    first = reader.read_next_batch()
    assert first.num_rows > 0
    _change(path, how, codec)
    rest = _rest(reader)
    if isinstance(rest, ObjectChangedError):
        assert str(path) in str(rest)
        assert how != "rename" or "replaced" in str(rest)
        return
    assert how == "rename", "a file rewritten in place was read on"
    _one_version(pa.Table.from_batches([first, *rest]), where, (OLD,))


@pytest.mark.parametrize("how", ["in_place", "in_place_mtime_restored"])
def test_one_dataset_over_a_file_rewritten_between_scans(tmp_path: Path, how: str) -> None:
    """Two scans of one Dataset, the file rewritten in place with the same size in
    between: a scan that reads its pages raises ObjectChangedError (before: the new
    bytes decoded under the old footer, wrong rows and no error). A dataset is a
    snapshot: a scan its metadata answers alone gives the old version's answer. A new
    dataset reads the new version."""
    path = tmp_path / "f.parquet"
    path.write_bytes(_bytes(OLD, "none"))
    ds = pqindex.dataset(path)
    assert ds.scan(where="id < 5").to_table().num_rows == 5
    _change(path, how, "none")
    assert ds.scan(where=f"id >= {NEW}").to_table().num_rows == 0  # the footer's answer
    for where in ("id >= 30000", "v != 7", None):
        with pytest.raises(ObjectChangedError, match="modified since it was opened"):
            ds.scan(where=where).to_table()
    fresh = pqindex.dataset(path).scan(where=f"id >= {NEW + 30_000}").to_table()
    assert fresh.num_rows == 30_000


def test_a_rewrite_stat_cannot_see_is_caught_by_the_footer_bytes(tmp_path: Path) -> None:
    """A rewrite within the timestamps' resolution of the file's last change shows in
    no stat field; the footer bytes the tail read returned tell it (simulated: the
    recorded stat is the rewritten file's)."""
    path = tmp_path / "f.parquet"
    path.write_bytes(_bytes(OLD, "none"))
    pf = ParquetFile.open(path)
    src: Any = pf.source
    with open(path, "r+b") as f:
        f.write(_bytes(NEW, "none"))
    src._adopt(os.stat(path))  # as if stat had shown nothing
    src._racy_until = 1 << 62
    with pytest.raises(ObjectChangedError, match="footer changed"):
        pf.read_bytes(4, 100)
    pf.close()


def test_a_touched_file_reads_on(tmp_path: Path) -> None:
    """Same bytes, mtime moved (touch, chmod): the footer bytes are the same, the
    file reads on and gives every row."""
    path = tmp_path / "f.parquet"
    path.write_bytes(_bytes(OLD, "snappy"))
    ds = pqindex.dataset(path)
    assert ds.scan(where="id < 5").to_table().num_rows == 5
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    os.chmod(path, 0o640)
    _one_version(ds.scan(where="v != 7").to_table(), "filtered", (OLD,))


# ------------------------------------------------------------------ S3 (moto)

# Larger than the 512 KiB tail read at open (which would hold a small object whole).
S3_ROWS = 200_000


@pytest.mark.parametrize("codec", ["none", "snappy"])
def test_an_object_replaced_mid_stream_is_never_mixed(
    s3: S3Endpoint, codec: str  # noqa: F811
) -> None:
    """Reads after the first response are conditional on its ETag: the object replaced
    mid-stream is an ObjectChangedError at the next row group's GET."""
    bucket = s3.new_bucket("versions")
    data = _bytes(OLD, codec, S3_ROWS)
    assert len(data) > 512 * 1024
    s3.put(bucket, "f.parquet", data)
    # One row group a wave: the stream is still reading when the object changes.
    ds = pqindex.dataset(f"s3://{bucket}/f.parquet", storage_options=s3.storage_options(),
                         scan_options=ScanOptions(read_ahead_bytes=1))
    reader = ds.scan().to_reader()
    first = reader.read_next_batch()
    assert first.column("id")[0].as_py() == OLD
    s3.put(bucket, "f.parquet", _bytes(NEW, codec, S3_ROWS))
    rest = _rest(reader)
    assert isinstance(rest, ObjectChangedError), "rows read past the change"
    assert "f.parquet" in str(rest)


def test_one_dataset_over_an_object_replaced_between_scans(
    s3: S3Endpoint  # noqa: F811
) -> None:
    bucket = s3.new_bucket("versions")
    s3.put(bucket, "f.parquet", _bytes(OLD, "none", S3_ROWS))
    ds = pqindex.dataset(f"s3://{bucket}/f.parquet", storage_options=s3.storage_options())
    assert ds.scan(where="id < 5").to_table().num_rows == 5
    # The same size, another ETag: the pages not held are read conditionally.
    s3.put(bucket, "f.parquet", _bytes(NEW, "none", S3_ROWS))
    for where in ("filtered", None):
        with pytest.raises(ObjectChangedError, match=r"f\.parquet"):
            ds.scan(where=_where(where)).to_table()
    fresh = pqindex.dataset(f"s3://{bucket}/f.parquet", storage_options=s3.storage_options())
    assert fresh.scan(where=f"id >= {NEW + 30_000}").to_table().num_rows == S3_ROWS - 30_000
