"""Spark processes for the tests: a standalone cluster and a Spark Connect server.

Everything is started from pyspark's own scripts (``bin/spark-class``,
``sbin/start-connect-server.sh``), bound to 127.0.0.1 on free ports, each in its
own process group so that stopping it also stops what it started (executor
JVMs, Python workers).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
DRIVER = str(Path(__file__).resolve().parent / "spark_driver.py")


def spark_home() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def base_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The environment of a Spark process: local addresses only, logs under ``tmp``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.pop("PYTHONPATH", None)
    env.update(
        SPARK_HOME=spark_home(),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_HOSTNAME="localhost",
        SPARK_LOG_DIR=str(tmp / "logs"),
        SPARK_PID_DIR=str(tmp / "pids"),
        SPARK_NO_DAEMONIZE="1",
    )
    env.update(extra)
    return env


@dataclass
class Processes:
    """Started process groups and their logs; ``stop`` ends every group."""

    procs: list[tuple[subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def start(self, args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            p = subprocess.Popen(
                args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.procs.append((p, log))
        return p

    def wait_for(self, ready: Callable[[], bool], what: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            for p, log in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{what}: {p.args!r} exited; log:\n{self.tail(log)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not ready after {timeout} s")
            time.sleep(0.5)

    @staticmethod
    def tail(log: Path, n: int = 40) -> str:
        try:
            return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        for p, _log in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p, _log in reversed(self.procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
            # Children (executors, Python workers) share the group: make sure it is empty.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        self.procs.clear()


@contextlib.contextmanager
def standalone_cluster(
    tmp: Path, workers: int = 2, env: dict[str, str] | None = None
) -> Iterator[str]:
    """A master and ``workers`` workers (1 core, 1 GiB each); yields the master URL.

    ``env`` is added to the workers' environment, which their executors and Python
    workers inherit (object-store credentials that then appear in no Spark conf)."""
    spark_class = os.path.join(spark_home(), "bin", "spark-class")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    worker_env = base_env(tmp, **(env or {}))
    env = base_env(tmp)
    procs = Processes()
    try:
        procs.start(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(free_port()),
            ],
            env,
            tmp / "master.log",
        )
        procs.wait_for(lambda: _listening(port), "Spark master")
        logs = []
        for i in range(workers):
            work = tmp / f"worker{i}"
            work.mkdir(parents=True, exist_ok=True)
            log = tmp / f"worker{i}.log"
            logs.append(log)
            procs.start(
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    str(work),
                ],
                {**worker_env, "SPARK_WORKER_DIR": str(work)},
                log,
            )
        procs.wait_for(
            lambda: all("registered with master" in Processes.tail(log, 200) for log in logs),
            "Spark workers",
        )
        yield url
    finally:
        procs.stop()


@contextlib.contextmanager
def connect_server(
    tmp: Path, python: str, master: str = "local[2]", env: dict[str, str] | None = None
) -> Iterator[str]:
    """A Spark Connect server (``sbin/start-connect-server.sh``) whose Python workers
    run ``python``, with ``env`` added to its environment; yields its ``sc://`` URL.
    Its event log (plans, statements, environment) goes to ``tmp/events``."""
    script = os.path.join(spark_home(), "sbin", "start-connect-server.sh")
    port = free_port()
    events = tmp / "events"
    events.mkdir(parents=True, exist_ok=True)
    env = base_env(tmp, PYSPARK_PYTHON=python, **(env or {}))
    procs = Processes()
    try:
        procs.start(
            [
                script,
                "--wait",
                "--master",
                master,
                "--driver-memory",
                "1g",
                "--conf",
                "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf",
                f"spark.connect.grpc.binding.port={port}",
                "--conf",
                "spark.driver.host=127.0.0.1",
                "--conf",
                "spark.driver.bindAddress=127.0.0.1",
                "--conf",
                "spark.ui.enabled=false",
                "--conf",
                "spark.sql.shuffle.partitions=2",
                "--conf",
                "spark.sql.session.timeZone=UTC",
                # On a standalone cluster: one small executor per worker.
                "--conf",
                "spark.executor.memory=512m",
                "--conf",
                "spark.executor.cores=1",
                "--conf",
                "spark.cores.max=2",
                *event_log_conf(events),
            ],
            env,
            tmp / "connect.log",
        )
        procs.wait_for(lambda: _listening(port), "Spark Connect server", timeout=240)
        yield f"sc://127.0.0.1:{port}"
    finally:
        procs.stop()


def event_log_conf(where: Path) -> list[str]:
    """``--conf`` arguments writing Spark's event log uncompressed under ``where``."""
    return [
        "--conf",
        "spark.eventLog.enabled=true",
        "--conf",
        f"spark.eventLog.dir={where}",
        "--conf",
        "spark.eventLog.compress=false",
    ]


def files_containing(needle: str, *roots: Path) -> list[str]:
    """Files under ``roots`` whose bytes contain ``needle`` (logs, event logs, work dirs)."""
    raw = needle.encode()
    out = []
    for root in roots:
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                path = os.path.join(dirpath, name)
                try:
                    with open(path, "rb") as f:
                        if raw in f.read():
                            out.append(path)
                except OSError:
                    pass
    return out


def files_matching(pattern: str, *roots: Path) -> list[str]:
    """Files under ``roots`` where the regex ``pattern`` matches (as bytes)."""
    rx = re.compile(pattern.encode())
    out = []
    for root in roots:
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                path = os.path.join(dirpath, name)
                try:
                    with open(path, "rb") as f:
                        if rx.search(f.read()):
                            out.append(path)
                except OSError:
                    pass
    return out


def python_without_pqindex(where: Path) -> str:
    """An interpreter with this one's packages (pyarrow, pyspark, ...) but not pqindex.

    A venv whose ``.pth`` adds this environment's site-packages as a plain path:
    the ``.pth`` files in there (pqindex's editable install) are not processed.
    """
    import sysconfig

    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(where)],
        check=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    site = sysconfig.get_paths()["purelib"]
    (
        where
        / "lib"
        / f"python{sys.version_info[0]}.{sys.version_info[1]}"
        / "site-packages"
        / "deps.pth"
    ).write_text(site + "\n")
    return str(where / "bin" / "python")


def bare_python(where: Path) -> str:
    """An interpreter with no third-party packages at all (like a system ``python3``)."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(where)],
        check=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    return str(where / "bin" / "python")


def run_driver(
    tmp: Path, *args: str, env: dict[str, str], timeout: float = 600
) -> tuple[dict[str, object], str]:
    """Run ``spark_driver.py`` with this interpreter; its JSON answer and its stderr."""
    import json

    r = subprocess.run(
        [sys.executable, DRIVER, "--src", SRC, "--out", str(tmp), *args],
        env=env,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    err = r.stderr.decode(errors="replace")
    lines = r.stdout.decode(errors="replace").strip().splitlines()
    if not lines:
        raise AssertionError(f"driver printed nothing (exit {r.returncode}):\n{err[-4000:]}")
    return json.loads(lines[-1]), err
