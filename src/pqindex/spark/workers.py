"""Can Spark's Python workers import pqindex? Check once per session, ship it if not.

Spark starts its Python workers with ``PYSPARK_PYTHON`` (``python3`` from ``PATH``
when unset), not with the driver's interpreter, so a driver that imports
pqindex from a virtualenv may have workers that cannot. Before a job runs
Python on the workers, :func:`ensure_workers` runs a tiny job that imports what
the tasks import. When only pqindex itself is missing, a zip of the driver's
package is shipped (``addPyFile``, or ``addArtifacts`` on Spark Connect) and the
check runs again; the zip has no compiled extension, so the workers decode
Thrift with the pure-Python path. When a dependency (pyarrow, numpy, ...) is
missing, nothing can be shipped: :class:`SparkWorkerError` says what to set.

Works with classic and Spark Connect sessions: no ``sparkContext`` and no
``_jdf`` on the Connect path.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pqindex.errors import PqIndexError

__all__ = [
    "SparkWorkerError",
    "WorkerCheck",
    "ensure_workers",
    "is_connect",
    "package_zip",
    "probe_workers",
]

# Rows of the probe job: enough that every one of the default partitions gets
# some, so the largest partition id tells the default parallelism.
_PROBE_ROWS = 4096

# The modules a pqindex task imports on a worker.
_PROBE_MODULES = (
    "pqindex",
    "pqindex.spark.task",
    "pqindex.spark.source",
    "pqindex.spark.indexing",
)

# Built with exec so that cloudpickle ships the function by value: pickled by
# reference, it would need pqindex on the worker to be unpickled.
_PROBE_SOURCE = f"""
def probe(_partition, _memo={{}}):
    if "r" not in _memo:
        import importlib, sys
        try:
            for name in {_PROBE_MODULES!r}:
                importlib.import_module(name)
            import pqindex
            _memo["r"] = "\\t".join(("ok", "", sys.executable, pqindex.__file__ or ""))
        except ImportError as e:
            _memo["r"] = "\\t".join(("missing", e.name or "", sys.executable, str(e)))
        except Exception as e:
            _memo["r"] = "\\t".join(("error", "", sys.executable, f"{{type(e).__name__}}: {{e}}"))
    return _memo["r"]
"""


class SparkWorkerError(PqIndexError):
    """Spark's Python workers cannot run pqindex, and shipping it would not help."""


@dataclass(frozen=True)
class WorkerCheck:
    """What the probe found: the workers' interpreter(s) and whether pqindex was shipped."""

    pythons: tuple[str, ...]
    locations: tuple[str, ...]  # where the workers imported pqindex from
    shipped: str | None  # the zip shipped to the workers, None when they had pqindex
    parallelism: int  # Spark's default parallelism (partitions of spark.range)
    connect: bool


@dataclass(frozen=True)
class _Probe:
    status: str  # ok / missing / error
    module: str
    python: str
    detail: str


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no JVM, no ``sparkContext``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _session_key(spark: Any) -> tuple[str, str]:
    if is_connect(spark):
        return ("connect", str(spark.session_id))
    # addPyFile is per SparkContext: every session of one context shares it.
    return ("classic", str(spark.sparkContext.applicationId))


_checked: dict[tuple[str, str], WorkerCheck] = {}
_lock = threading.Lock()


def _probe_function() -> Any:
    namespace: dict[str, Any] = {"__name__": "pqindex_worker_probe"}
    exec(_PROBE_SOURCE, namespace)
    return namespace["probe"]


def probe_workers(spark: Any) -> tuple[list[_Probe], int]:
    """Run the import probe on the workers: the distinct answers and the parallelism."""
    from pyspark.sql import functions as F

    probe = F.udf(_probe_function(), "string", useArrow=False)
    rows = (
        spark.range(0, _PROBE_ROWS)
        .select(F.spark_partition_id().alias("p"))
        .select("p", probe("p").alias("r"))
        .groupBy("r")
        .agg(F.max("p").alias("top"))
        .collect()
    )
    answers = []
    for row in rows:
        status, module, python, detail = [*str(row["r"]).split("\t", 3), "", "", ""][:4]
        answers.append(_Probe(status, module, python, detail))
    parallelism = 1 + max((int(row["top"]) for row in rows), default=0)
    return sorted(answers, key=lambda a: (a.status, a.python)), parallelism


def _files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for fn in sorted(filenames):
            # Compiled extensions cannot be imported from a zip; the pure path stands in.
            if fn.endswith((".py", ".typed")):
                out.append(Path(dirpath) / fn)
    return out


def package_zip(directory: str | None = None) -> str:
    """A zip of the pqindex package this process imported (Python files only).

    Named after its content, so shipping it twice to one session is harmless and
    a changed package gets a new name.
    """
    import pqindex

    root = Path(pqindex.__file__).resolve().parent
    files = _files(root)
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.relative_to(root.parent).as_posix().encode() + b"\0")
        digest.update(f.read_bytes())
    out_dir = Path(directory or os.path.join(tempfile.gettempdir(), f"pqindex-ship-{os.getuid()}"))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"pqindex-{digest.hexdigest()[:16]}.zip"
    if not target.exists():
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            for f in files:
                # A fixed timestamp: the same package gives the same bytes.
                info = zipfile.ZipInfo(f.relative_to(root.parent).as_posix(), (1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, f.read_bytes())
        os.replace(tmp, target)
    return str(target)


def _ship(spark: Any, zip_path: str) -> None:
    if is_connect(spark):
        spark.addArtifacts(zip_path, pyfile=True)
    else:
        spark.sparkContext.addPyFile(zip_path)


def _advice(problem: _Probe, connect: bool) -> str:
    where = "the Spark Connect server's" if connect else "Spark's"
    return (
        f"{where} Python workers ({problem.python or 'unknown interpreter'}) cannot run "
        f"pqindex: {problem.detail}. Run them with an interpreter that has pqindex's "
        f"dependencies: set PYSPARK_PYTHON (or spark.pyspark.python) to one, e.g. "
        f"PYSPARK_PYTHON={sys.executable}, before the Spark "
        f"{'server' if connect else 'session'} starts; on a cluster, ship a packed "
        f"environment with spark.archives (e.g. env.tar.gz#env with "
        f"PYSPARK_PYTHON=./env/bin/python)"
    )


def _pqindex_missing(p: _Probe) -> bool:
    return p.status == "missing" and (p.module == "pqindex" or p.module.startswith("pqindex."))


def _probe_or_explain(spark: Any, connect: bool) -> tuple[list[_Probe], int]:
    try:
        return probe_workers(spark)
    except Exception as e:  # the worker died before the probe could answer
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SparkWorkerError(
            _advice(_Probe("error", "", "", f"a probe job failed: {first[:300]}"), connect)
        ) from e


def ensure_workers(spark: Any) -> WorkerCheck:
    """Make sure Spark's Python workers import pqindex, shipping it if needed.

    Runs a small probe job the first time per session (per SparkContext on a
    classic session); raises :class:`SparkWorkerError` when the workers lack
    something that cannot be shipped (pyarrow, numpy, another interpreter).
    """
    key = _session_key(spark)
    with _lock:
        if key in _checked:
            return _checked[key]
        connect = is_connect(spark)
        answers, parallelism = _probe_or_explain(spark, connect)
        shipped = None
        if any(_pqindex_missing(a) for a in answers) and all(
            a.status == "ok" or _pqindex_missing(a) for a in answers
        ):
            shipped = package_zip()
            _ship(spark, shipped)
            answers, parallelism = _probe_or_explain(spark, connect)
        bad = [a for a in answers if a.status != "ok"]
        if bad:
            raise SparkWorkerError(_advice(bad[0], connect))
        check = WorkerCheck(
            tuple(sorted({a.python for a in answers})),
            tuple(sorted({a.detail for a in answers})),
            shipped,
            parallelism,
            connect,
        )
        _checked[key] = check
        return check
