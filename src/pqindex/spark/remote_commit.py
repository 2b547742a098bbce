"""The commit protocol of Spark writes on object stores (no Spark in it).

Tasks write their files through the storage layer under
``<dest>/_pqindex_staging/<job>/task-<partition>-<attempt>/``. The job commit
on the driver:

1. reads the manifest the job started from again; if its ETag changed (or a
   manifest appeared for a new table) another job committed meanwhile: abort;
2. copies each staged file into place (server-side ``copy``, concurrently: S3
   has no rename);
3. writes the manifest with a conditional PUT — create-only for a new table,
   ``If-Match`` the starting ETag otherwise — so of two concurrent committers
   exactly one wins; the loser deletes the files it copied and its staging and
   raises :class:`ConcurrentCommitError`;
4. writes ``_SUCCESS``, deletes the files an overwrite replaced (only now that
   the new manifest is in place), and removes the staging objects.

A reader using the manifest sees the old file list or the new one, never a
partial write. ``abort`` removes the staging objects.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pqindex.errors import PqIndexError, UserInputError
from pqindex.io.errors import ObjectNotFoundError, StorageError, translate
from pqindex.io.listing import list_objects
from pqindex.io.source import ObjectInfo

__all__ = ["ConcurrentCommitError", "abort_job_remote", "commit_job_remote", "data_objects",
           "manifest_etag"]

_PARALLEL = 16  # copies and deletes in flight


class ConcurrentCommitError(PqIndexError):
    """Another job committed to the same destination after this one started."""


def _is_data_rel(rel: str) -> bool:
    return all(not part.startswith(("_", ".")) for part in rel.split("/")) and not rel.endswith(
        (".crc", ".tmp"))


def _join(dest: str, rel: str) -> str:
    return f"{dest.rstrip('/')}/{rel}"


def data_objects(dest: str, storage_options: Mapping[str, Any] | None
                 ) -> dict[str, ObjectInfo]:
    """Data objects under ``dest`` (relative path -> listing info), as readers see them."""
    root = dest.rstrip("/") + "/"
    out: dict[str, ObjectInfo] = {}
    for url, info in list_objects(root, storage_options):
        rel = url[len(root):] if url.startswith(root) else url
        if rel and _is_data_rel(rel):
            out[rel] = info
    return out


def _manifest_url(dest: str) -> str:
    from pqindex.spark.commit import MANIFEST

    return _join(dest, MANIFEST)


def _get(url: str, storage_options: Mapping[str, Any] | None) -> tuple[bytes | None, str | None]:
    """The object and its ETag, or (None, None) when there is none."""
    from pqindex.io.native import obstore_api

    obs = obstore_api()

    from pqindex.io.objstore import get_store, run

    handle, key = get_store(url, storage_options)

    async def fetch() -> tuple[bytes, str | None]:
        res = await obs.get_async(handle.store, key)
        data = bytes(await res.bytes_async())
        return data, res.meta.get("e_tag")

    try:
        return run(fetch())
    except Exception as e:
        err = translate(e, url, "GET")
        if isinstance(err, ObjectNotFoundError) and "bucket" not in err.detail:
            return None, None
        raise err from None


def manifest_etag(dest: str, storage_options: Mapping[str, Any] | None) -> str | None:
    """The ETag of ``dest``'s manifest now (None without one): what a job starts from."""
    return _get(_manifest_url(dest), storage_options)[1]


def _load(dest: str, storage_options: Mapping[str, Any] | None
          ) -> tuple[dict[str, Any] | None, str | None]:
    from pqindex.spark.commit import MANIFEST_VERSION

    raw, etag = _get(_manifest_url(dest), storage_options)
    if raw is None:
        return None, None
    try:
        m = json.loads(raw)
    except ValueError:
        return None, etag
    if not isinstance(m, dict) or m.get("version") != MANIFEST_VERSION:
        return None, etag
    return m, etag


def _each(dest: str, storage_options: Mapping[str, Any] | None, op: str,
          pairs: Sequence[tuple[str, str]]) -> None:
    """Copy (``op="copy"``: (from key, to key)) or delete (first of each pair) objects
    of ``dest``'s store, ``_PARALLEL`` at a time."""
    from pqindex.io.native import obstore_api

    obs = obstore_api()

    from pqindex.io.objstore import get_store, run

    if not pairs:
        return
    handle, _ = get_store(dest, storage_options)
    if op == "delete":
        keys = [a for a, _ in pairs]
        try:
            for i in range(0, len(keys), 1000):
                obs.delete(handle.store, keys[i:i + 1000])
        except Exception as e:
            raise translate(e, dest, "DELETE") from None
        return

    async def go() -> None:
        sem = asyncio.Semaphore(_PARALLEL)

        async def one(a: str, b: str) -> None:
            async with sem:
                await obs.copy_async(handle.store, a, b)

        await asyncio.gather(*(one(a, b) for a, b in pairs))

    try:
        run(go())
    except Exception as e:
        raise translate(e, dest, "COPY") from None


def _key(url: str, storage_options: Mapping[str, Any] | None) -> str:
    from pqindex.io.objstore import get_store

    return get_store(url, storage_options)[1]


def abort_job_remote(dest: str, job_id: str, storage_options: Mapping[str, Any] | None) -> None:
    """Remove the job's staging objects; the destination is as it was before the job."""
    from pqindex.spark.commit import STAGING

    staging = _join(dest, f"{STAGING}/{job_id}/")
    try:
        listed = list_objects(staging, storage_options)
    except StorageError:
        return
    _each(dest, storage_options, "delete", [(_key(u, storage_options), "") for u, _ in listed])


def _entries(dest: str, rels: Sequence[str], infos: Mapping[str, ObjectInfo],
             storage_options: Mapping[str, Any] | None) -> tuple[dict[str, dict[str, Any]],
                                                                 list[str]]:
    """Manifest statistics of the files ``rels`` (as ``dataset.manifest.annotate``)."""
    from pqindex.dataset.manifest import _b64, file_entry, schema_stub
    from pqindex.format.file import ParquetFile

    schemas: list[str] = []
    index: dict[str, int] = {}
    out: dict[str, dict[str, Any]] = {}
    for rel in rels:
        try:
            with ParquetFile.open(_join(dest, rel), storage_options=storage_options,
                                  info=infos.get(rel)) as pf:
                stub = _b64(schema_stub(pf))
                assert stub is not None
                if stub not in index:
                    index[stub] = len(schemas)
                    schemas.append(stub)
                out[rel] = file_entry(pf, rel, infos.get(rel), index[stub])
        except PqIndexError:
            continue  # no statistics: the planner reads its footer
    return out, schemas


def commit_job_remote(
    dest: str,
    job_id: str,
    files: Sequence[Mapping[str, Any]],
    *,
    mode: str,
    info: Mapping[str, Any],
    base_etag: str | None,
    storage_options: Mapping[str, Any] | None = None,
    finish: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Commit a job's staged ``files`` into the object-store ``dest`` (see the module doc;
    ``finish`` adds to the manifest once the files are in place: the key index).

    ``base_etag``: the manifest's ETag when the job started (None: there was none).
    """
    from pqindex.io.objects import put_object
    from pqindex.spark.commit import (
        MANIFEST_VERSION,
        SUCCESS,
        _index_summary,
        _total,
        job_summary,
        manifest_status,
    )

    t0 = time.perf_counter()
    if mode not in ("error", "append", "overwrite"):
        raise UserInputError(f"unknown write mode {mode!r} (error, append or overwrite)")
    old_manifest, etag = _load(dest, storage_options)
    if etag != base_etag:
        abort_job_remote(dest, job_id, storage_options)
        raise ConcurrentCommitError(
            "another job committed to this destination after this one started "
            f"(manifest ETag {base_etag} -> {etag}); this job's files were removed", path=dest)
    old = data_objects(dest, storage_options)
    if mode == "error" and old:
        abort_job_remote(dest, job_id, storage_options)
        raise UserInputError("the destination already holds data (mode='error')", path=dest)
    clash = [f["path"] for f in files if f["path"] in old]
    if clash:
        abort_job_remote(dest, job_id, storage_options)
        raise PqIndexError("a committed file already exists", path=_join(dest, clash[0]))
    pairs = [(_key(f["staged"], storage_options), _key(_join(dest, f["path"]), storage_options))
             for f in files]
    placed = False
    try:
        _each(dest, storage_options, "copy", pairs)
        placed = True
        new_rels = [f["path"] for f in files]
        infos = {rel: inf for rel, inf in data_objects(dest, storage_options).items()
                 if rel in set(new_rels)}
        stats, new_schemas = _entries(dest, new_rels, infos, storage_options)
        schemas = list(new_schemas)

        entries: dict[str, dict[str, Any]] = {}
        if mode == "append":
            known = {}
            on_disk = {rel: i.size for rel, i in old.items()}
            if old_manifest is not None and manifest_status(dest, old_manifest,
                                                            on_disk) == "current":
                known = {f["path"]: f for f in old_manifest.get("files", [])}
                before = list(old_manifest.get("schemas") or [])
                schemas = before + [s for s in new_schemas if s not in before]
            for rel, inf in old.items():
                entries[rel] = dict(known.get(rel) or {"path": rel, "bytes": inf.size,
                                                       "rows": None})
        for f in files:
            e = {k: v for k, v in f.items() if k != "staged"}
            st = stats.get(f["path"])
            if st is not None:
                st = dict(st)
                # The schema index is into this manifest's list.
                st["schema"] = schemas.index(new_schemas[int(st["schema"])])
                e.update(st)
            entries[f["path"]] = e
        summary = job_summary(job_id, mode, files)
        manifest = {
            "version": MANIFEST_VERSION,
            "format": "pqindex",
            **dict(info),
            "schemas": schemas,
            "files": [entries[k] for k in sorted(entries)],
            "rows": _total(e.get("rows") for e in entries.values()),
            "bytes": sum(int(e["bytes"]) for e in entries.values()),
            "index_summary": _index_summary(entries.values(), info),
            "last_commit": summary,
            "commit_point": True,  # names every file: readers need no LIST
        }
        if finish is not None:
            manifest = finish(manifest)
        summary["commit_seconds"] = time.perf_counter() - t0
        body = json.dumps(manifest, indent=1, default=str).encode()
        try:
            _put_manifest(_manifest_url(dest), body, base_etag, storage_options)
        except StorageError as e:
            if e.operation in ("PUT (create)", "PUT (if-match)"):
                raise ConcurrentCommitError(
                    "another job committed to this destination while this one was "
                    "committing (its manifest won); this job's files were removed",
                    path=dest) from None
            raise
    except BaseException:
        if placed or pairs:
            # Remove what this job copied in; the winner's files have other names.
            _each(dest, storage_options, "delete", [(b, "") for _, b in pairs])
        abort_job_remote(dest, job_id, storage_options)
        raise
    put_object(_join(dest, SUCCESS), b"", storage_options)
    if mode == "overwrite":
        new = {f["path"] for f in files}
        gone = [_key(_join(dest, rel), storage_options) for rel in old if rel not in new]
        _each(dest, storage_options, "delete", [(k, "") for k in gone])
    abort_job_remote(dest, job_id, storage_options)
    return summary


def _put_manifest(url: str, body: bytes, base_etag: str | None,
                  storage_options: Mapping[str, Any] | None) -> None:
    """The manifest put only if no other job wrote one since this job started: created
    where there was none, else replaced only at the ETag the job read."""
    from pqindex.io.objects import put_object, replace_object

    try:
        if base_etag is None:
            put_object(url, body, storage_options, mode="create")
        else:
            replace_object(url, body, base_etag, storage_options)
    except StorageError as e:
        if e.operation == "PUT (create)":
            raise StorageError("the manifest already exists", path=url,
                               operation=e.operation) from None
        if e.operation == "PUT (if-match)":
            raise StorageError("the manifest changed since the job started", path=url,
                               operation=e.operation) from None
        raise
