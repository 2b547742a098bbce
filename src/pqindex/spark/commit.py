"""The commit protocol of Spark writes, with no Spark in it.

Tasks write under ``<dest>/_pqindex_staging/<job>/task-<partition>-<attempt>/``
and report their files in a commit message; the job commit (on the driver, in
another process than the tasks) moves each file into place with ``os.replace``,
writes ``_SUCCESS`` and the manifest, and removes the staging directory. An
overwrite first moves the old entries into ``<dest>/_pqindex_trash/<job>/`` and
deletes them only once the new files are in place. Names starting with ``_``
are not data for pqindex, Spark or pyarrow, so nothing staged is ever read.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pqindex.errors import PqIndexError, UserInputError

__all__ = [
    "MANIFEST",
    "STAGING",
    "TRASH",
    "abort_job",
    "commit_job",
    "data_files",
    "job_dir",
    "job_summary",
    "load_manifest",
    "manifest_status",
]

STAGING = "_pqindex_staging"
TRASH = "_pqindex_trash"
MANIFEST = "_pqindex_manifest.json"
SUCCESS = "_SUCCESS"
MANIFEST_VERSION = 1


def job_dir(dest: str, job_id: str) -> str:
    return os.path.join(dest, STAGING, job_id)


def _is_data_name(name: str) -> bool:
    return not name.startswith(("_", "."))


def data_files(dest: str) -> dict[str, int]:
    """Data files under ``dest`` (relative path -> size), as readers see them."""
    out: dict[str, int] = {}
    if not os.path.isdir(dest):
        return out
    for dirpath, dirnames, filenames in os.walk(dest):
        dirnames[:] = sorted(d for d in dirnames if _is_data_name(d))
        for fn in filenames:
            if _is_data_name(fn) and not fn.endswith((".crc", ".tmp")):
                full = os.path.join(dirpath, fn)
                with contextlib.suppress(FileNotFoundError):
                    out[os.path.relpath(full, dest)] = os.stat(full).st_size
    return out


def load_manifest(dest: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(dest, MANIFEST), encoding="utf-8") as f:
            m = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(m, dict) or m.get("version") != MANIFEST_VERSION:
        return None
    return m


def manifest_status(
    dest: str, manifest: Mapping[str, Any] | None, on_disk: Mapping[str, int] | None = None
) -> str:
    """``current`` when the manifest names exactly the data files on disk, with their
    sizes; ``stale`` otherwise; ``absent`` without one. A stale manifest is never used."""
    if manifest is None:
        return "absent"
    disk = data_files(dest) if on_disk is None else on_disk
    listed = {f["path"]: f["bytes"] for f in manifest.get("files", [])}
    return "current" if listed == dict(disk) else "stale"


def _rmtree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _rmdir_empty(path: str) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(path)


def abort_job(dest: str, job_id: str, *, created_dest: bool = False) -> None:
    """Remove the job's staging data; the destination is as it was before the job."""
    _rmtree(job_dir(dest, job_id))
    _rmdir_empty(os.path.join(dest, STAGING))
    if created_dest:
        _rmdir_empty(dest)  # only if nothing else appeared there meanwhile


def _move_old_aside(dest: str, trash: str) -> list[tuple[str, str]]:
    """Every entry of ``dest`` but our own directories, moved into ``trash``."""
    moved = []
    os.makedirs(trash, exist_ok=True)
    for name in sorted(os.listdir(dest)):
        if name in (STAGING, TRASH):
            continue
        src = os.path.join(dest, name)
        dst = os.path.join(trash, name)
        os.replace(src, dst)
        moved.append((src, dst))
    return moved



def job_summary(job_id: str, mode: str, files: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a committed job wrote, as its summary and the manifest's ``job`` entry."""
    return {
        "job": job_id,
        "mode": mode,
        "files": len(files),
        "rows": sum(int(f["rows"]) for f in files),
        "bytes": sum(int(f["bytes"]) for f in files),
        "index_bytes": sum(int(f.get("index_bytes", 0)) for f in files),
        "region_bytes": sum(int(f.get("region_bytes", 0)) for f in files),
        "commit_seconds": 0.0,
    }

def commit_job(
    dest: str,
    job_id: str,
    files: Sequence[Mapping[str, Any]],
    *,
    mode: str,
    info: Mapping[str, Any],
    finish: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Move the staged ``files`` into place and write ``_SUCCESS`` and the manifest
    (``finish`` adds to it once the files are in place: the key index).

    Each file entry has ``staged`` (absolute path), ``path`` (relative to
    ``dest``), ``rows``, ``bytes`` and index figures. If a move fails, the files
    already moved go back to staging and an overwrite's old entries come back
    from the trash before the error is raised.
    """
    t0 = time.perf_counter()
    if mode not in ("error", "append", "overwrite"):
        raise UserInputError(f"unknown write mode {mode!r} (error, append or overwrite)")
    old_manifest = load_manifest(dest)
    old_disk = data_files(dest)
    if mode == "error" and old_disk:
        abort_job(dest, job_id)
        raise UserInputError("the destination already holds data (mode='error')", path=dest)
    trash = os.path.join(dest, TRASH, job_id)
    aside: list[tuple[str, str]] = []
    placed: list[tuple[str, str]] = []
    try:
        if mode == "overwrite":
            aside = _move_old_aside(dest, trash)
        for f in files:
            target = os.path.join(dest, f["path"])
            if os.path.exists(target):
                raise PqIndexError("a committed file already exists", path=target)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.replace(f["staged"], target)
            placed.append((f["staged"], target))
    except BaseException:
        for staged, target in reversed(placed):
            with contextlib.suppress(OSError):
                os.replace(target, staged)
        for src, dst in reversed(aside):
            with contextlib.suppress(OSError):
                os.replace(dst, src)
        _rmdir_empty(trash)
        _rmdir_empty(os.path.join(dest, TRASH))
        raise
    _rmtree(trash)
    _rmdir_empty(os.path.join(dest, TRASH))
    _rmtree(job_dir(dest, job_id))
    _rmdir_empty(os.path.join(dest, STAGING))

    entries: dict[str, dict[str, Any]] = {}
    if mode == "append":
        # Files from before keep their manifest entries only if that manifest was current.
        known = {}
        if old_manifest is not None and manifest_status(dest, old_manifest, old_disk) == "current":
            known = {f["path"]: f for f in old_manifest.get("files", [])}
        for rel, size in old_disk.items():
            entries[rel] = dict(known.get(rel) or {"path": rel, "bytes": size, "rows": None})
    for f in files:
        entries[f["path"]] = {k: v for k, v in f.items() if k != "staged"}
    summary = job_summary(job_id, mode, files)
    manifest = {
        "version": MANIFEST_VERSION,
        "format": "pqindex",
        **dict(info),
        "files": [entries[k] for k in sorted(entries)],
        "rows": _total(e.get("rows") for e in entries.values()),
        "bytes": sum(int(e["bytes"]) for e in entries.values()),
        "index_summary": _index_summary(entries.values(), info),
        "last_commit": summary,
        "commit_point": True,  # names every file: readers need no LIST
    }
    from pqindex.dataset.manifest import annotate

    manifest = annotate(dest, manifest)  # per-file statistics: the dataset-level index
    if finish is not None:
        manifest = finish(manifest)
    summary["commit_seconds"] = time.perf_counter() - t0
    write_manifest(dest, manifest)
    with open(os.path.join(dest, SUCCESS), "wb"):
        pass
    return summary


def _total(values: Iterable[Any]) -> int | None:
    total = 0
    for v in values:
        if v is None:
            return None
        total += int(v)
    return total


def _index_summary(entries: Iterable[Mapping[str, Any]], info: Mapping[str, Any]) -> dict[str, Any]:
    es = list(entries)
    return {
        "bloom": list(info.get("bloom") or []),
        "indexes": _written_indexes(es, info.get("indexes")),
        "index_bytes": sum(int(e.get("index_bytes") or 0) for e in es),
        "region_bytes": sum(int(e.get("region_bytes") or 0) for e in es),
        "files_with_region": sum(1 for e in es if e.get("region_bytes")),
    }


def _written_indexes(entries: Iterable[Mapping[str, Any]], asked: Any) -> dict[str, list[str]]:
    """The embedded indexes asked for, or with ``"auto"`` those the files got."""
    if isinstance(asked, Mapping):
        return {str(k): list(v) for k, v in asked.items()}
    out: dict[str, list[str]] = {}
    for e in entries:
        for kind, cols in (e.get("indexes") or {}).items():
            out.setdefault(kind, [])
            out[kind] += [c for c in cols if c not in out[kind]]
    return out


def write_manifest(dest: str, manifest: Mapping[str, Any]) -> None:
    """Atomically (re)write the manifest."""
    tmp = os.path.join(dest, f"_{MANIFEST}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, default=str)
    os.replace(tmp, os.path.join(dest, MANIFEST))
    from pqindex.dataset.manifest_columnar import write_columnar

    write_columnar(dest, manifest)  # the same facts as Arrow columns, for planning
