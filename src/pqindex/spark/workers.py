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
    "fingerprint",
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

# Run by exec, here and on the workers: cloudpickle ships functions of a module
# that is not in sys.modules by value (by reference, unpickling them would need
# pqindex). ``fingerprint`` names a package's content; the probe compares the
# workers' pqindex with the driver's without importing it, so that a worker
# never keeps a stale pqindex imported.
_PROBE_SOURCE = """
import hashlib, importlib, importlib.util, os, re, sys

def package_files(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for fn in sorted(filenames):
            if fn.endswith((".py", ".typed")):
                out.append(os.path.join(dirpath, fn))
    return out

def fingerprint(root):
    if not os.path.isdir(root):  # shipped: the zip is named after the fingerprint
        m = re.search(r"pqindex-([0-9a-f]{16})[.]zip", root)
        return m.group(1) if m else ""
    h = hashlib.sha256()
    parent = os.path.dirname(os.path.abspath(root))
    for f in package_files(root):
        h.update(os.path.relpath(f, parent).replace(os.sep, "/").encode() + b"\\0")
        with open(f, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()[:16]

def probe(_partition, _memo={}):
    if "r" not in _memo:
        def answer(status, module, where, digest, detail):
            return "\\t".join((status, module, sys.executable, where, digest, detail))
        try:
            spec = importlib.util.find_spec("pqindex")
            if spec is None or not spec.submodule_search_locations:
                r = answer("missing", "pqindex", "", "", "No module named 'pqindex'")
            else:
                root = list(spec.submodule_search_locations)[0]
                digest = fingerprint(root)
                if WANT and digest != WANT:
                    r = answer("stale", "", root, digest, "another version of pqindex")
                else:
                    for name in MODULES:
                        importlib.import_module(name)
                    r = answer("ok", "", root, digest, "")
        except ImportError as e:
            r = answer("missing", e.name or "", "", "", str(e))
        except Exception as e:
            r = answer("error", "", "", "", f"{type(e).__name__}: {e}")
        _memo["r"] = r
    return _memo["r"]
"""


def _probe_namespace(want: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {
        "__name__": "pqindex_worker_probe",
        "WANT": want,
        "MODULES": _PROBE_MODULES,
    }
    exec(_PROBE_SOURCE, namespace)
    return namespace


def _package_root() -> str:
    import pqindex

    return str(Path(pqindex.__file__).resolve().parent)


def fingerprint() -> str:
    """A name for the content of the pqindex package this process imported."""
    return str(_probe_namespace("")["fingerprint"](_package_root()))


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
    status: str  # ok / missing / stale / error
    module: str
    python: str
    location: str
    digest: str
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


def probe_workers(spark: Any) -> tuple[list[_Probe], int]:
    """Run the import probe on the workers: the distinct answers and the parallelism."""
    from pyspark.sql import functions as F

    probe = F.udf(_probe_namespace(fingerprint())["probe"], "string", useArrow=False)
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
        fields = [*str(row["r"]).split("\t", 5), "", "", "", "", ""][:6]
        answers.append(_Probe(*fields))
    parallelism = 1 + max((int(row["top"]) for row in rows), default=0)
    return sorted(answers, key=lambda a: (a.status, a.python)), parallelism


def package_zip(directory: str | None = None) -> str:
    """A zip of the pqindex package this process imported (Python files only).

    Named after its content (:func:`fingerprint`), so shipping it twice to one
    session is harmless, a changed package gets a new name, and a worker can
    tell which version it imported.
    """
    ns = _probe_namespace("")
    root = _package_root()
    out_dir = Path(directory or os.path.join(tempfile.gettempdir(), f"pqindex-ship-{os.getuid()}"))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"pqindex-{ns['fingerprint'](root)}.zip"
    if not target.exists():
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            for f in ns["package_files"](root):
                name = os.path.relpath(f, os.path.dirname(root)).replace(os.sep, "/")
                # A fixed timestamp: the same package gives the same bytes.
                info = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                with open(f, "rb") as fh:
                    z.writestr(info, fh.read())
        os.replace(tmp, target)
    return str(target)


def _ship(spark: Any, zip_path: str) -> None:
    if is_connect(spark):
        spark.addArtifacts(zip_path, pyfile=True)
    else:
        spark.sparkContext.addPyFile(zip_path)


def _advice(problem: _Probe, connect: bool) -> str:
    where = "the Spark Connect server's" if connect else "Spark's"
    if problem.status == "stale":
        return (
            f"{where} Python workers ({problem.python}) import another version of pqindex "
            f"({problem.location}) than this driver ({_package_root()}), even after it was "
            f"shipped to them; run them with this driver's interpreter (PYSPARK_PYTHON="
            f"{sys.executable}) or install the same pqindex there"
        )
    return (
        f"{where} Python workers ({problem.python or 'unknown interpreter'}) cannot run "
        f"pqindex: {problem.detail}. Run them with an interpreter that has pqindex's "
        f"dependencies: set PYSPARK_PYTHON (or spark.pyspark.python) to one, e.g. "
        f"PYSPARK_PYTHON={sys.executable}, before the Spark "
        f"{'server' if connect else 'session'} starts; on a cluster, ship a packed "
        f"environment with spark.archives (e.g. env.tar.gz#env with "
        f"PYSPARK_PYTHON=./env/bin/python)"
    )


def _shippable(p: _Probe) -> bool:
    """The worker lacks pqindex, or has another version of it: the zip fixes that."""
    return p.status == "stale" or (
        p.status == "missing" and (p.module == "pqindex" or p.module.startswith("pqindex."))
    )


def _probe_or_explain(spark: Any, connect: bool) -> tuple[list[_Probe], int]:
    try:
        return probe_workers(spark)
    except Exception as e:  # the worker died before the probe could answer
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SparkWorkerError(
            _advice(_Probe("error", "", "", "", "", f"a probe job failed: {first[:300]}"), connect)
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
        if any(_shippable(a) for a in answers) and all(
            a.status == "ok" or _shippable(a) for a in answers
        ):
            shipped = package_zip()
            _ship(spark, shipped)
            answers, parallelism = _probe_or_explain(spark, connect)
        bad = [a for a in answers if a.status != "ok"]
        if bad:
            raise SparkWorkerError(_advice(bad[0], connect))
        check = WorkerCheck(
            tuple(sorted({a.python for a in answers})),
            tuple(sorted({a.location for a in answers})),
            shipped,
            parallelism,
            connect,
        )
        _checked[key] = check
        return check
