"""Thread pools kept for the life of the process, by name and size.

Starting a pool's threads per call costs 0.3-3 ms (more on a busy machine),
several percent of a 20 ms read. A forked child (Spark's Python workers) gets
pools of its own: the parent's threads are not in it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["HAND_OFF_SECONDS", "shared_pool", "spread"]

_T = TypeVar("_T")
_R = TypeVar("_R")

# Below this much work per item, running the items on the calling thread beats
# handing them to threads: with pqindex's per-item Python, threads contend for the
# GIL (a 10-row rare value: 0.8 ms per row group, 25-40% slower on the pool;
# 9 ms per row group of PLAIN int64: 1.8x faster on it).
HAND_OFF_SECONDS = 0.002

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


def spread(fn: Callable[[_T], _R], items: Sequence[_T],
           map_fn: Callable[..., Iterable[_R]], costly: bool = False) -> list[_R]:
    """``[fn(x) for x in items]``, in order. Items run on the calling thread while they
    average under ``HAND_OFF_SECONDS`` each; once they take longer, the rest go to
    ``map_fn`` (a pool's ``map``). The work per item is often only known by doing
    it: a few matching rows cost little, a column decoded whole costs much.
    ``costly``: the caller knows each item is worth a thread: all go to ``map_fn``
    (the first one alone here would leave the other cores idle meanwhile)."""
    if map_fn is map or len(items) < 2:
        return [fn(x) for x in items]
    if costly:
        return list(map_fn(fn, items))
    out: list[_R] = []
    t0 = time.perf_counter()
    for i, x in enumerate(items):
        out.append(fn(x))
        if i + 1 < len(items) and time.perf_counter() - t0 >= HAND_OFF_SECONDS * (i + 1):
            out.extend(map_fn(fn, items[i + 1:]))
            break
    return out


# Threads of the process running Python-heavy work at once (planning a local file,
# a sifted read). With the GIL, more of them only take turns, each turn
# a context switch: on 2 cores, a 1,000-file lake's cold scan took 2.4 s and 3.1 s
# of CPU on 4 threads, 2.1 s and 2.3 s with one slot.
PYTHON_SLOTS = max(1, (os.cpu_count() or 2) // 2)
_slots: tuple[int, threading.BoundedSemaphore] | None = None


@contextlib.contextmanager
def python_slot(needed: bool = True) -> Iterator[None]:
    """Hold one of the :data:`PYTHON_SLOTS` while the block runs (``needed``: work
    that waits on a store holds none). Not reentrant: a block never takes a second."""
    global _slots
    if not needed:
        yield
        return
    with _lock:
        if _slots is None or _slots[0] != os.getpid():  # a forked child: fresh slots
            _slots = (os.getpid(), threading.BoundedSemaphore(PYTHON_SLOTS))
        sem = _slots[1]
    with sem:
        yield
