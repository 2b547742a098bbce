"""obstore's functions for this process, a forked child included.

obstore runs its requests on a tokio runtime whose worker threads start with the
first request. ``fork()`` copies only the calling thread: in a child forked after
that, every obstore request (sync or async) waits forever for workers that do not
exist (tokio and obstore say so: neither supports fork after start). A child
therefore loads a fresh copy of obstore's extension module, whose runtime starts
in the child; its stores, functions and exception classes are that copy's.
Everything that calls obstore takes it from :func:`obstore_api`.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import threading
from types import ModuleType
from typing import Any

__all__ = ["exception_classes", "from_url", "obstore_api"]

_api: ModuleType | None = None  # obstore's extension module in use
_pid: int | None = None  # the process it was loaded for
_lock = threading.Lock()


def _fresh_copy(original: ModuleType) -> ModuleType:
    """A second instance of ``original`` (an extension module), with statics of its
    own: the dynamic loader shares a library by file identity, so it is a copy."""
    path = original.__file__
    assert path is not None
    folder = tempfile.mkdtemp(prefix="pqindex-obstore-")
    try:
        copy = os.path.join(folder, os.path.basename(path))
        shutil.copyfile(path, copy)
        spec = importlib.util.spec_from_file_location(original.__name__.rsplit(".", 1)[-1],
                                                      copy)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # the loaded mapping stays valid


def obstore_api() -> Any:
    """obstore's extension module for this process (``get_async``, ``put``, ...,
    ``_store.from_url``, ``exceptions``): obstore's own, or in a child forked after
    it was used, a fresh copy."""
    global _api, _pid
    pid = os.getpid()
    api = _api
    if api is not None and _pid == pid:
        return api
    with _lock:
        if _api is None:
            from obstore import _obstore

            _api, _pid = _obstore, pid
        elif _pid != pid:
            _api, _pid = _fresh_copy(_api), pid
        return _api


def from_url(url: str, **kwargs: Any) -> Any:
    """A store of this process's obstore (``obstore.store.from_url``'s arguments)."""
    from obstore import _obstore

    api = obstore_api()
    if api is _obstore:
        from obstore.store import from_url as original

        return original(url, **kwargs)
    return api._store.from_url(url, **kwargs)


def exception_classes() -> Any:
    """``obstore.exceptions`` of this process's obstore."""
    return obstore_api().exceptions


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_after_fork_in_child)
