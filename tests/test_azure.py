"""Azure Blob Storage (Azurite): the read path gives the same rows as local files.

Azure has no suffix ranges, so a tail is a bounded range GET at the end of the
size the listing gave (a single named object costs a HEAD first). Skipped with
the reason when node or Azurite is not installed (see tests/azurite_server.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import obstore
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex
from azurite_server import Azurite, azurite  # noqa: F401  (the session fixture)
from conftest import CORPUS
from pqindex.io.cache import metadata_cache
from pqindex.io.source import REMOTE_TAIL_BYTES

DATA = CORPUS / "data"
# Small, unencrypted corpus files of several writers and encodings.
CORPUS_FILES = sorted(
    p for p in DATA.glob("*.parquet") if "encrypt" not in p.name and p.stat().st_size < 300_000
)[:12]


@pytest.fixture(scope="module")
def corpus_container(azurite: Azurite) -> str:  # noqa: F811
    container = azurite.new_container("corpus")
    store = azurite.store(container)
    for p in CORPUS_FILES:
        obstore.put(store, f"corpus/{p.name}", p.read_bytes())
    return container


def _read_or_error(source: str, **kw: Any) -> pa.Table | type[BaseException]:
    try:
        return pqindex.dataset(source, **kw).to_table()
    except Exception as e:  # the same failure both ways (not this test's concern which)
        return type(e)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in CORPUS_FILES])
def test_corpus_reads_the_same_on_azure(
    azurite: Azurite, corpus_container: str, path: Path  # noqa: F811
) -> None:
    local = _read_or_error(str(path))
    url = f"az://{corpus_container}/corpus/{path.name}"
    metadata_cache().clear()
    remote = _read_or_error(url, storage_options=azurite.storage_options())
    if isinstance(local, pa.Table):
        assert isinstance(remote, pa.Table), remote
        assert remote.schema == local.schema
        assert remote.equals(local) or repr(remote.to_pylist()) == repr(local.to_pylist())
    else:
        assert remote is local


def test_dataset_scan_on_azure(
    azurite: Azurite, tmp_path: Path  # noqa: F811
) -> None:
    """A listed dataset: one LIST wave, one tail GET per file (a bounded range: the
    listing gave the size, so no HEAD), the rows of pyarrow's filter."""
    container = azurite.new_container("lake")
    store = azurite.store(container)
    tables = []
    for k in range(4):
        t = pa.table({"id": pa.array(range(k * 5000, (k + 1) * 5000), pa.int64()),
                      "s": pa.array([f"v{i % 31}" for i in range(5000)])})
        local = tmp_path / f"part-{k}.parquet"
        pqindex.write_table(t, local, sort_by="id", page_rows=500)
        obstore.put(store, f"lake/part-{k}.parquet", local.read_bytes())
        tables.append(t)
    ref = pa.concat_tables(tables)
    metadata_cache().clear()
    ds = pqindex.dataset(f"az://{container}/lake", storage_options=azurite.storage_options())
    for where, mask in [("id = 12345", pc.field("id") == 12345),
                        ("id BETWEEN 4990 AND 5010 AND s = 'v3'",
                         (pc.field("id") >= 4990) & (pc.field("id") <= 5010)
                         & (pc.field("s") == "v3")),
                        (None, None)]:
        got = ds.to_table(where=where)
        want = ref if mask is None else ref.filter(mask)
        assert got.sort_by("id").equals(want.sort_by("id")), where
    stats = ds.io_stats()
    assert len(stats) == 4
    for url, st in stats.items():
        size = len(obstore.get(store, url.split(f"{container}/", 1)[1]).bytes())
        tail = (max(0, size - REMOTE_TAIL_BYTES), min(size, REMOTE_TAIL_BYTES))
        assert st.trace[0] == tail, (url, st.trace)  # the tail first, no HEAD (0, 0)
        assert (0, 0) not in st.trace
    # the LIST, and the manifest looked for beside it (absent): one round trip
    assert (ds.discovery.io.requests, ds.discovery.io.round_trips) == (2, 1)


def test_single_object_costs_a_head_then_the_tail(
    azurite: Azurite, corpus_container: str  # noqa: F811
) -> None:
    """Without a listing the size is unknown and Azure has no suffix range: a HEAD,
    then one range GET for the tail; the report counts both."""
    path = next(p for p in CORPUS_FILES if p.name == "alltypes_plain.parquet")
    metadata_cache().clear()
    ds = pqindex.dataset(f"az://{corpus_container}/corpus/{path.name}",
                         storage_options=azurite.storage_options())
    scan = ds.scan(where="id = 3")
    got = scan.to_table()
    want = pq.read_table(path).filter(pc.field("id") == 3)
    assert got.equals(want)
    assert ds.discovery.io.trace == [(0, 0), (0, path.stat().st_size)]
    assert scan.report.requests == ds.discovery.io.requests + sum(
        st.requests for st in ds.io_stats().values())
    assert scan.report.round_trips >= 2
