"""Shared fixtures: the writer files (tests/writers.py), written once per session."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any, NoReturn

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import writers

# The parquet-testing files the tests read, kept in the repository (see its README.md).
PARQUET_TESTING = Path(__file__).resolve().parent / "data" / "parquet-testing"
CORPUS = PARQUET_TESTING

# The CLI's human output fits the console's width; pytest-xdist's workers inherit
# COLUMNS=80 from the controller, which would wrap the paths the tests look for.
os.environ["COLUMNS"] = "200"


def in_ci() -> bool:
    """Whether this run is CI's (``CI=true``): every emulator the suite uses must be there."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing(what: str) -> NoReturn:
    """A test's emulator or runtime is missing: skipped locally (saying what is
    missing), a failure under ``CI=true``, where it must be present."""
    if in_ci():
        pytest.fail(f"{what} (CI=true: the run needs it)", pytrace=False)
    pytest.skip(what, allow_module_level=True)


def import_or_missing(module: str, what: str) -> Any:
    """``module`` imported, else :func:`missing` saying ``what`` is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        missing(f"{what} is not installed ({e})")


_spark: Any = None


def _spark_session() -> Any:
    """The run's one SparkSession, created on first use."""
    global _spark
    if _spark is None:
        import_or_missing("pyspark", "pyspark")
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            missing("no Java runtime (java on PATH or JAVA_HOME): Spark cannot start")
        from pyspark.sql import SparkSession

        # Spark's Python workers run this interpreter (they must import pqindex's deps).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        with warnings.catch_warnings():  # pyspark frets about the pandas version
            warnings.simplefilter("ignore", FutureWarning)
            _spark = (
                SparkSession.builder.master("local[1]")
                .appName("pqindex-tests")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .config("spark.driver.memory", "1g")
                .config("spark.sql.session.timeZone", "UTC")
                .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
                .getOrCreate()
            )
        _spark.sparkContext.setLogLevel("ERROR")
    return _spark


def _uses_spark(item: pytest.Item) -> bool:
    if item.get_closest_marker("spark") is not None or item.path.name.startswith("test_spark"):
        return True
    if any("spark" in name for name in getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "spark" in [v for v in callspec.params.values() if isinstance(v, str)]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Under pytest-xdist (--dist loadgroup), every test that needs Spark runs on one
    # worker, so a run starts one SparkSession, not one per worker.
    for item in items:
        if _uses_spark(item):
            item.add_marker(pytest.mark.xdist_group("spark"))


@pytest.fixture(scope="session")
def spark() -> Any:
    """A local[1] SparkSession; stopped at the end of the run."""
    return _spark_session()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _spark
    if _spark is not None:
        _spark.stop()
        _spark = None


@pytest.fixture(scope="session")
def python_without_pqindex(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An interpreter with this environment's packages but not pqindex (spark_servers.py)."""
    import spark_servers

    return spark_servers.python_without_pqindex(tmp_path_factory.mktemp("venv-nopq"))


@pytest.fixture(scope="session")
def written_files(tmp_path_factory: pytest.TempPathFactory) -> writers.FileCache:
    """Lazily written files, by name: ``written_files["duckdb"]`` -> Path.

    Names are ``writers.ALL_WRITERS`` plus ``"wide_footer"``. ``"spark"`` starts the
    run's SparkSession on first use: mark such tests ``@pytest.mark.spark``.
    """
    return writers.FileCache(tmp_path_factory.mktemp("writers"), spark=_spark_session)


@pytest.fixture
def page_by_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small row groups no index narrows go through the page-by-page flow, as on large
    files, instead of being read whole and filtered (dataset.SIFT_ROW_GROUP_BYTES):
    for tests of that flow's machinery on small files."""
    import importlib

    module = importlib.import_module("pqindex.dataset.dataset")
    monkeypatch.setattr(module, "SIFT_ROW_GROUP_BYTES", 0)
