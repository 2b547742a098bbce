"""Thread pools kept for the life of the process, by name and size.

Starting a pool's threads per call costs 0.3-3 ms (more on a busy machine),
several percent of a 20 ms read. A forked child (Spark's Python workers) gets
pools of its own: the parent's threads are not in it.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["shared_pool"]

_pools: dict[tuple[str, int], ThreadPoolExecutor] = {}
_pid = os.getpid()
_lock = threading.Lock()


def shared_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """The process's pool ``name`` of ``workers`` threads (named ``pqindex-<name>``).
    Callers share it: a task on it must never wait on the same pool."""
    global _pid
    with _lock:
        if _pid != os.getpid():
            _pools.clear()
            _pid = os.getpid()
        pool = _pools.get((name, workers))
        if pool is None:
            pool = _pools[(name, workers)] = ThreadPoolExecutor(
                workers, thread_name_prefix=f"pqindex-{name}")
        return pool
