"""The key index on an object store: requests and round trips from the proxy's log.

A lake of files whose ``user_id`` is unique and random across files (every file's
min/max covers nearly every key, so statistics rule nothing out); the index is built
with ``pqindex manifest --key-index``. Counts are asserted from what reached the
proxy, never durations.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

import pqindex
from pqindex.cli import cli
from pqindex.io.cache import metadata_cache
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)

FILES = 12
ROWS = 2_000


@pytest.fixture(scope="module")
def lake(s3: S3Endpoint, tmp_path_factory: pytest.TempPathFactory  # noqa: F811
         ) -> tuple[str, pa.Table]:
    bucket = s3.new_bucket("keyindex")
    rng = np.random.default_rng(41)
    ids = rng.permutation(10 * FILES * ROWS)[: FILES * ROWS].astype(np.int64)
    tables = []
    for k in range(FILES):
        part = ids[k * ROWS:(k + 1) * ROWS]
        t = pa.table({"user_id": part, "v": pa.array([f"v{x}" for x in part])})
        local = tmp_path_factory.mktemp("ki") / "f.parquet"
        pqindex.write_table(t, local, row_group_rows=500, indexes=None)
        s3.put(bucket, f"lake/part-{k:03d}.parquet", local.read_bytes())
        tables.append(t)
    url = f"s3://{bucket}/lake"
    opts = s3.storage_options()
    args = ["manifest", url, "--key-index", "user_id"]
    for k, v in opts.items():
        args += ["--storage-option", f"{k}={v}"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    return url, pa.concat_tables(tables)


def _cold_scan(s3: S3Endpoint, url: str, where: str) -> tuple[pa.Table, dict]:  # noqa: F811
    metadata_cache().clear()
    s3.reset_log()
    scan = pqindex.dataset(url, storage_options=s3.storage_options()).scan(where=where)
    got = scan.to_table()
    return got, scan.report.to_dict()


def _data_gets(s3: S3Endpoint) -> list[str]:  # noqa: F811
    return [r.path for r in s3.requests if r.path.endswith(".parquet")]


def test_one_key_is_a_few_round_trips(s3: S3Endpoint, lake: tuple[str, pa.Table]  # noqa: F811
                                      ) -> None:
    url, ref = lake
    key = int(ref["user_id"][ROWS * 5 + 7].as_py())
    got, rep = _cold_scan(s3, url, f"user_id = {key}")
    assert got.column("user_id").to_pylist() == [key]
    files = set(_data_gets(s3))
    assert len(files) == 1, files  # the one file holding the key, nothing else
    assert rep["key_index"]["files_named"] == 1
    assert rep["requests"] == len(s3.requests)
    # LIST (the manifest GET beside it), shard tail, shard pages, data tail, data pages.
    assert s3.waves <= 5, [(r.method, r.path, r.range) for r in s3.requests]
    assert len(s3.requests) <= 3 + 2 * len(files), [(r.path, r.range) for r in s3.requests]


def test_an_in_list_is_one_wave_of_probes(s3: S3Endpoint, lake: tuple[str, pa.Table]  # noqa: F811
                                          ) -> None:
    url, ref = lake
    keys = [int(ref["user_id"][i].as_py()) for i in range(0, FILES * ROWS, FILES * ROWS // 20)]
    got, rep = _cold_scan(s3, url, f"user_id IN ({', '.join(map(str, keys))})")
    assert sorted(got.column("user_id").to_pylist()) == sorted(keys)
    assert rep["key_index"]["shards"] and rep["key_index"]["fallback"] is None
    files = set(_data_gets(s3))
    assert len(files) == len({i // ROWS for i in range(0, FILES * ROWS, FILES * ROWS // 20)})
    assert s3.waves <= 5
    assert len(s3.requests) <= 3 + 2 * len(files)


def test_an_absent_key_opens_no_data_file(s3: S3Endpoint, lake: tuple[str, pa.Table]  # noqa: F811
                                          ) -> None:
    url, ref = lake
    present = set(ref["user_id"].to_pylist())
    lo, hi = pc.min(ref["user_id"]).as_py(), pc.max(ref["user_id"]).as_py()
    absent = next(k for k in range((lo + hi) // 2, hi) if k not in present)
    got, rep = _cold_scan(s3, url, f"user_id = {absent}")
    assert got.num_rows == 0
    assert _data_gets(s3) == []
    assert rep["files_skipped"].get("key index") == FILES
    assert s3.waves <= 3, [(r.method, r.path, r.range) for r in s3.requests]
