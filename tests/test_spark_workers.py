"""Spark's Python workers without pqindex: shipped a zip, or told what to set (issue 11).

Shipping itself runs on a real cluster and through Spark Connect in
test_spark_cluster.py. Here: the issue's set-up (workers run a ``python3``
without pqindex's dependencies) in a driver subprocess (tests/spark_driver.py,
``pqindex`` on its ``sys.path``, not ``PYTHONPATH``, so workers do not inherit
it); the zip imported by another interpreter; the probe against another version
of pqindex; the check on the suite's own session.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.format import thrift
from pqindex.spark import workers
from pqindex.spark.workers import is_connect, package_zip
from spark_servers import bare_python, base_env, run_driver


@pytest.mark.spark
@pytest.mark.slow
def test_missing_dependencies_raise_a_clear_error(tmp_path: Path) -> None:
    # The set-up: no PYSPARK_PYTHON, and the python3 first on PATH has none of
    # pqindex's dependencies (a fresh venv stands in for a system interpreter).
    bare = bare_python(tmp_path / "bare")
    env = base_env(tmp_path, PATH=f"{Path(bare).parent}{os.pathsep}{os.environ['PATH']}")
    out, _err = run_driver(tmp_path, "--steps", "pipeline", env=env)
    assert "crash" not in out, out.get("crash")
    assert out["error"]["type"] == "SparkWorkerError", out
    message = out["error"]["message"]
    assert "No module named 'pyarrow'" in message or "No module named 'numpy'" in message
    assert "PYSPARK_PYTHON" in message and "spark.archives" in message
    assert not (tmp_path / "lake").exists()


def test_shipped_zip_decodes_without_the_c_extension(
    tmp_path: Path, python_without_pqindex: str, written_files: Any
) -> None:
    """Imported from the zip, pqindex finds no compiled Thrift decoder and uses the pure one."""
    z = package_zip(str(tmp_path))
    names = __import__("zipfile").ZipFile(z).namelist()
    assert "pqindex/format/thrift.py" in names and not any(n.endswith(".so") for n in names)
    assert package_zip(str(tmp_path)) == z  # same package, same name
    paths = [str(written_files[w]) for w in ("pyarrow_bloom", "duckdb", "datafusion", "polars")]
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import pqindex\n"
        "from pqindex.format import thrift\n"
        "out = {'file': pqindex.__file__, 'accel': thrift._accel is not None, 'files': []}\n"
        "for p in sys.argv[2:]:\n"
        "    meta = repr(pqindex.ParquetFile.open(p).metadata)\n"
        "    rows = pqindex.dataset(p).to_table(where='id < 50').num_rows\n"
        "    out['files'].append([meta, rows])\n"
        "print(json.dumps(out))\n"
    )
    r = subprocess.run(
        [python_without_pqindex, "-c", script, z, *paths],
        capture_output=True,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    got = json.loads(r.stdout)
    assert got["file"].startswith(z) and got["accel"] is False
    for p, (meta, rows) in zip(paths, got["files"], strict=True):
        assert meta == repr(pqindex.ParquetFile.open(p).metadata), p  # pure == this decoder
        want = pq.read_table(p).filter(pc.field("id") < 50).num_rows
        assert rows == want > 0, p
    if thrift._accel is None:
        pytest.skip("the C decoder is not built here; only the zip side was checked")


def _run_probe(python: str, want: str, path: list[str], pythonpath: str) -> list[str]:
    """The workers' probe, run by ``python`` as a worker would, with ``path`` first."""
    script = (
        "import json, sys; sys.path[1:1] = json.loads(sys.argv[1])\n"
        f"exec(sys.stdin.read(), ns := {{'__name__': 'probe', 'WANT': {want!r},"
        f" 'MODULES': {workers._PROBE_MODULES!r}}})\n"
        "print(ns['probe'](0))\n"
    )
    r = subprocess.run(
        [python, "-c", script, json.dumps(path)],
        input=workers._PROBE_SOURCE.encode(),
        capture_output=True,
        check=True,
        env={
            **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            "PYTHONPATH": pythonpath,
        },
    )
    return r.stdout.decode().rstrip("\n").split("\t")


def test_probe_tells_missing_stale_and_shipped(tmp_path: Path, python_without_pqindex: str) -> None:
    want = workers.fingerprint()
    status, module, python, *_ = _run_probe(python_without_pqindex, want, [], "")
    assert (status, module, python) == ("missing", "pqindex", python_without_pqindex)
    # Another version first on the path (an older install, say): a copy with one change.
    other = tmp_path / "other"
    shutil.copytree(Path(pqindex.__file__).parent, other / "pqindex")
    with open(other / "pqindex" / "errors.py", "a", encoding="utf-8") as f:
        f.write("\n# another version\n")
    status, _, _, where, digest, _ = _run_probe(python_without_pqindex, want, [], str(other))
    assert status == "stale" and where == str(other / "pqindex") and digest != want
    # Shipped, the zip comes first (Spark inserts it at sys.path[1]) and wins.
    z = package_zip(str(tmp_path))
    status, _, _, where, digest, detail = _run_probe(python_without_pqindex, want, [z], str(other))
    assert (status, digest) == ("ok", want), detail
    assert where.startswith(z)


@pytest.mark.spark
def test_check_on_a_session_whose_workers_have_pqindex(spark: Any) -> None:
    check = workers.ensure_workers(spark)
    assert check.shipped is None and check.connect is False and not is_connect(spark)
    assert check.locations == (str(Path(pqindex.__file__).parent),)
    assert check.parallelism == spark.sparkContext.defaultParallelism
    assert workers.ensure_workers(spark) is check  # once per session


@pytest.mark.spark
def test_plan_size_is_sparks_estimate(spark: Any) -> None:
    """Task sizing reads Spark's plan statistics from explain, which Connect has too;
    the classic session's JVM gives the exact figure to compare with."""
    from pqindex.spark.pipeline import plan_size

    for n in (10, 5000, 200_000):
        df = spark.range(n).selectExpr("id", "cast(id as string) as s", "id * 0.5 as x")
        exact = int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
        got = plan_size(df)
        assert got is not None and abs(got - exact) <= 0.05 * exact, (n, got, exact)
