"""Whole small objects: read one (a manifest) or write one atomically.

``get_object`` and ``put_object`` work on local paths, ``file://``, object-store
URLs (obstore) and other fsspec URLs. Local writes go to a temporary name in
the same directory and are renamed into place, so a reader sees the old or the
new object, never a part of one. Object-store PUTs are atomic by themselves.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pqindex.io.errors import ObjectNotFoundError, StorageError, translate
from pqindex.io.source import IOStats, is_object_store_url

__all__ = ["get_object", "get_objects", "get_versioned", "put_object", "replace_object"]

PutMode = Literal["overwrite", "create"]


def _local(url: str) -> str | None:
    if url.startswith("file://"):
        return url[len("file://"):]
    return None if "://" in url else url


def get_object(
    url: str, storage_options: Mapping[str, Any] | None = None, stats: IOStats | None = None
) -> bytes | None:
    """The whole object at ``url`` in one request, or None when there is none."""
    path = _local(url)
    if path is not None:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise translate(e, url, "read") from None
    elif is_object_store_url(url):
        from pqindex.io.native import obstore_api
        from pqindex.io.objstore import get_store, run

        obs = obstore_api()

        handle, key = get_store(url, storage_options)

        async def fetch() -> bytes:
            res = await obs.get_async(handle.store, key)
            return bytes(await res.bytes_async())

        try:
            data = run(fetch())
        except Exception as e:
            err = translate(e, url, "GET")
            if isinstance(err, ObjectNotFoundError):
                return None
            raise err from None
    else:
        import fsspec

        try:
            fs, fp = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
            data = fs.cat_file(fp)
        except FileNotFoundError:
            return None
        except Exception as e:
            raise translate(e, url, "GET") from None
    if stats is not None:
        stats.record(0, len(data))
        stats.record_wave()
    return data


def get_objects(
    urls: Sequence[str], storage_options: Mapping[str, Any] | None = None
) -> list[bytes | None]:
    """Whole objects (None where there is none), fetched at once: on object stores
    one concurrent wave of GETs (bounded by the store's ``max_in_flight``), so a
    table's metadata files cost one round trip, not one each."""
    if not urls:
        return []
    if not all(is_object_store_url(u) for u in urls):
        return [get_object(u, storage_options) for u in urls]
    import asyncio

    from pqindex.io.native import obstore_api
    from pqindex.io.objstore import get_store, run

    obs = obstore_api()
    handles = [get_store(u, storage_options) for u in urls]

    async def one(i: int, limit: asyncio.Semaphore) -> bytes | None:
        handle, key = handles[i]
        async with limit:
            try:
                res = await obs.get_async(handle.store, key)
                return bytes(await res.bytes_async())
            except Exception as e:
                err = translate(e, urls[i], "GET")
                if isinstance(err, ObjectNotFoundError):
                    return None
                raise err from None

    async def every() -> list[bytes | None]:
        limit = asyncio.Semaphore(max(1, handles[0][0].max_in_flight))
        return list(await asyncio.gather(*(one(i, limit) for i in range(len(urls)))))

    return run(every())


def put_object(
    url: str,
    data: bytes,
    storage_options: Mapping[str, Any] | None = None,
    *,
    mode: PutMode = "overwrite",
) -> str | None:
    """Write ``data`` as the whole object ``url``, atomically; its ETag on object
    stores (None elsewhere).

    ``mode="create"`` fails with :class:`StorageError` when the object exists
    (a conditional PUT on object stores, a hard link on local disks).
    """
    if mode not in ("overwrite", "create"):
        raise ValueError(f"unknown put mode {mode!r}")
    path = _local(url)
    if path is not None:
        _put_local(path, data, mode)
        return None
    if is_object_store_url(url):
        from pqindex.io.native import obstore_api
        from pqindex.io.objstore import get_store, run

        obs = obstore_api()

        handle, key = get_store(url, storage_options)

        async def put() -> str | None:
            got = await obs.put_async(handle.store, key, data, mode=mode)
            etag = got.get("e_tag")
            return etag if isinstance(etag, str) else None

        try:
            return run(put())
        except Exception as e:
            if isinstance(e, obs.exceptions.AlreadyExistsError):
                raise StorageError("the object already exists", path=url,
                                   operation="PUT (create)") from None
            raise translate(e, url, "PUT") from None
    import fsspec

    try:
        fs, fp = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
        if mode == "create" and fs.exists(fp):
            raise StorageError("the object already exists", path=url, operation="PUT (create)")
        fs.pipe_file(fp, data)
    except StorageError:
        raise
    except Exception as e:
        raise translate(e, url, "PUT") from None
    return None


def _put_local(path: str, data: bytes, mode: PutMode) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode == "create":
            try:
                os.link(tmp, path)  # fails if the name exists: an atomic create
            except FileExistsError:
                raise StorageError("the file already exists", path=path,
                                   operation="write (create)") from None
        else:
            os.replace(tmp, path)
    except OSError as e:
        raise translate(e, path, "write") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _local_version(path: str) -> str | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return f"{st.st_mtime_ns}-{st.st_size}-{st.st_ino}"


def get_versioned(url: str, storage_options: Mapping[str, Any] | None = None
                  ) -> tuple[bytes, str | None] | None:
    """The whole object and its version (an ETag on object stores; mtime, size and
    inode locally; None elsewhere), or None when there is no object: what
    :func:`replace_object` is conditional on."""
    path = _local(url)
    if path is not None:
        version = _local_version(path)
        data = get_object(url, storage_options)
        return None if data is None else (data, version)
    if not is_object_store_url(url):
        data = get_object(url, storage_options)
        return None if data is None else (data, None)
    from pqindex.io.native import obstore_api
    from pqindex.io.objstore import get_store, run

    obs = obstore_api()
    handle, key = get_store(url, storage_options)

    async def fetch() -> tuple[bytes, str | None]:
        res = await obs.get_async(handle.store, key)
        return bytes(await res.bytes_async()), res.meta.get("e_tag")

    try:
        return run(fetch())
    except Exception as e:
        err = translate(e, url, "GET")
        if isinstance(err, ObjectNotFoundError):
            return None
        raise err from None


def replace_object(url: str, data: bytes, version: str | None,
                   storage_options: Mapping[str, Any] | None = None) -> None:
    """Write ``data`` over the object ``url`` only if it is still at ``version``
    (:func:`get_versioned`): a conditional PUT (If-Match) on object stores, a check
    just before the rename locally. A :class:`StorageError` with operation
    ``"PUT (if-match)"`` when another writer replaced it meanwhile."""
    path = _local(url)
    if path is not None:
        if version is not None and _local_version(path) != version:
            raise StorageError("the object changed since it was read", path=url,
                               operation="PUT (if-match)")
        _put_local(path, data, "overwrite")
        return
    if not is_object_store_url(url) or version is None:
        put_object(url, data, storage_options)
        return
    from pqindex.io.native import obstore_api
    from pqindex.io.objstore import get_store, run

    obs = obstore_api()
    handle, key = get_store(url, storage_options)

    async def put() -> None:
        await obs.put_async(handle.store, key, data, mode={"e_tag": version})

    try:
        run(put())
    except Exception as e:
        if isinstance(e, obs.exceptions.PreconditionError):
            raise StorageError("the object changed since it was read", path=url,
                               operation="PUT (if-match)") from None
        raise translate(e, url, "PUT") from None
