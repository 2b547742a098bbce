"""The I/O loop's life: a clean exit with requests in flight, and fork().

obstore's native tasks hand results back from tokio threads by taking the GIL;
one that does so while the interpreter finalizes aborts the process (SIGABRT,
after the CLI printed its answer). ``objstore.shutdown`` (at exit) waits for
them. Each case runs real subprocesses against moto behind the delaying proxy.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.io import objstore
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)

SRC = str(Path(pqindex.__file__).resolve().parents[1])
LAKE_FILES = 20


@pytest.fixture(scope="module")
def lake(s3: S3Endpoint) -> Iterator[str]:  # noqa: F811
    """s3://<bucket>/many/: LAKE_FILES small Parquet files, read behind a 25 ms delay."""
    bucket = s3.new_bucket("lifecycle")
    for i in range(LAKE_FILES):
        t = pa.table({"id": pa.array(range(i * 100, i * 100 + 100), pa.int64()),
                      "s": [f"v{j}" for j in range(100)]})
        buf = io.BytesIO()
        pq.write_table(t, buf, write_page_index=True)
        s3.put(bucket, f"many/part-{i:04d}.parquet", buf.getvalue())
    was = s3.delay
    s3.delay = 0.025
    try:
        yield bucket
    finally:
        s3.delay = was


def _env(s3: S3Endpoint) -> dict[str, str]:  # noqa: F811
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ENDPOINT_URL=s3.url, AWS_ACCESS_KEY_ID="testing",
               AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1",
               AWS_ALLOW_HTTP="true", PYTHONPATH=SRC)
    return env


def _run_many(args: list[str], env: dict[str, str], runs: int, cwd: Path
              ) -> list[subprocess.CompletedProcess[str]]:
    def one(_: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True,
                              text=True, timeout=300)

    # Each run mostly waits (imports, the proxy's delay): four at a time on 2 cores.
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, range(runs)))


@pytest.mark.slow
def test_cli_manifest_exits_zero_over_20_runs(s3: S3Endpoint, lake: str,  # noqa: F811
                                              tmp_path: Path) -> None:
    """Regression: ``pqindex manifest s3://…/many/`` printed its result, then died of
    SIGABRT in about 2 runs of 5 (the manifest PUT's native task handed its result
    over while the interpreter finalized). 20 runs miss a rate that high with a
    chance of 0.6**20 (4e-5); 50 cost the suite 25 s more."""
    url = f"s3://{lake}/many/"
    runs = _run_many(["-c", "from pqindex.cli import main; main()", "manifest", url],
                     _env(s3), 20, tmp_path)
    bad = [(r.returncode, r.stderr[-500:]) for r in runs if r.returncode != 0]
    assert not bad, f"{len(bad)} of 20 runs failed: {bad[:3]}"
    for r in runs:
        assert f"manifest of {LAKE_FILES} file(s)" in r.stdout, r.stdout


_IN_FLIGHT = textwrap.dedent("""
    import sys
    import obstore
    from pqindex.io.objstore import get_store, submit

    handle, _ = get_store(sys.argv[1])

    async def get(key):
        res = await obstore.get_async(handle.store, key)
        return await res.bytes_async()

    keys = [f"many/part-{i % LAKE_FILES:04d}.parquet" for i in range(100)]
    futures = [submit(get(k)) for k in keys]
    futures[0].result()
    print("leaving with", sum(not f.done() for f in futures), "in flight")
""").replace("LAKE_FILES", str(LAKE_FILES))


def test_exit_with_requests_in_flight_is_clean(s3: S3Endpoint, lake: str,  # noqa: F811
                                               tmp_path: Path) -> None:
    """A process that leaves while 100 GETs are in flight or landing exits 0 (before
    the shutdown at exit, 11 of 20 such runs died of SIGABRT or SIGSEGV)."""
    script = tmp_path / "in_flight.py"
    script.write_text(_IN_FLIGHT)
    runs = _run_many([str(script), f"s3://{lake}/many/part-0000.parquet"], _env(s3), 8,
                     tmp_path)
    assert [r.returncode for r in runs] == [0] * 8, [r.stderr[-500:] for r in runs]
    assert any("in flight" in r.stdout and not r.stdout.startswith("leaving with 0 ")
               for r in runs), "no run left with requests in flight: the case is not tested"


def test_shutdown_then_read_again(s3: S3Endpoint, lake: str) -> None:  # noqa: F811
    """After ``shutdown`` (what runs at exit) the next read starts a new loop."""
    url = f"s3://{lake}/many/part-0001.parquet"
    opts = s3.storage_options()
    before = pqindex.dataset(url, storage_options=opts).scan().to_table()
    objstore.shutdown()
    after = pqindex.dataset(url, storage_options=opts).scan().to_table()
    assert after.equals(before)
    assert before.column("id").to_pylist() == list(range(100, 200))  # as the lake wrote them
    assert before.column("s").to_pylist() == [f"v{j}" for j in range(100)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() on this platform")
def test_fork_after_read_reads_in_child(s3: S3Endpoint, lake: str) -> None:  # noqa: F811
    """A forked child reads S3 with a loop, clients and an obstore runtime of its own
    (the parent's tokio workers are not in it: before, every request hung), through
    a new dataset and through the parent's, and gets the parent's rows."""
    opts = s3.storage_options()
    url = f"s3://{lake}/many/"
    ds = pqindex.dataset(url, storage_options=opts)
    parent = ds.scan(where="id >= 150").to_table()
    assert parent.num_rows == LAKE_FILES * 100 - 150
    s3.reset_log()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, and never return into pytest
        status = 1
        try:
            os.close(read_fd)
            objstore_loop = objstore._loop
            fresh = pqindex.dataset(url, storage_options=opts).scan(where="id >= 150").to_table()
            # The parent's dataset too: its sources take clients of the child's own.
            child = ds.scan(where="id >= 150", columns=["id", "s"]).to_table()
            assert child.equals(fresh)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, child.schema) as w:
                w.write_table(child)
            with os.fdopen(write_fd, "wb") as f:
                f.write(b"fresh" if objstore_loop is None else b"stale")
                f.write(sink.getvalue().to_pybytes())
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as f:
        got = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert got[:5] == b"fresh", "the child inherited the parent's loop object"
    child = pa.ipc.open_stream(got[5:]).read_all()
    assert child.sort_by("id").equals(parent.sort_by("id"))
    # The child listed and read over connections of its own (it sent requests).
    assert any(r.method == "GET" for r in s3.requests)
