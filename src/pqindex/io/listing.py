"""Listing objects under a prefix, with what a later open needs (size, ETag, mtime).

One paginated LIST per prefix on object stores (obstore ``list``), ``fs.find``
with details on fsspec filesystems. Object stores answer a LIST page with up to
1,000 keys; the requests are counted that way: one request and one round trip per
page (a page needs the previous one's continuation token).

``list_with(..., also_get=name)`` GETs the object ``name`` below the prefix
(the dataset manifest) while the first page is in flight: a dataset with a
manifest then pays no extra round trip for it, one without pays one 404.

With ``keys_of`` too (the sorted object names the fetched object lists), a
listing longer than one page is not walked page after page: the key space after
page 1 is split at every ``_SEGMENT``-th known name and the segments are LISTed
concurrently (``start-after`` the previous boundary), each paginating until it
passes its own boundary. The names only place the boundaries, so a stale list
(objects added or removed since) still gives the exact listing: a segment with
extra objects pays one more page, never drops one. Round trips: page 1, then the
longest segment (one page when the names are right). S3 only (``start-after``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pqindex.io.errors import ObjectNotFoundError, translate
from pqindex.io.source import IOStats, ObjectInfo, is_object_store_url, quoted_etag

__all__ = ["Listing", "list_objects", "list_with", "probe_object"]

_LIST_PAGE = 1000
# Known names per concurrent segment: one page each when the names are right.
_SEGMENT = 1000
# Stores whose LIST starts after a key server-side (S3's start-after, seen in the
# proxy's log). Elsewhere object_store may filter an offset client-side, which
# would list from the start once per segment: those list page after page.
_START_AFTER = ("s3", "s3a")


def _info(meta: Mapping[str, Any]) -> ObjectInfo:
    lm = meta.get("last_modified")
    return ObjectInfo(
        size=int(meta["size"]),
        etag=quoted_etag(meta.get("e_tag")),
        version=meta.get("version"),
        mtime=None if lm is None else int(lm.timestamp() * 1_000_000_000),
    )


@dataclass(frozen=True, slots=True)
class Listing:
    """The objects below a prefix, and the object fetched beside the LIST."""

    objects: list[tuple[str, ObjectInfo]]
    # ``also_get``'s (bytes, info) when it existed at the time of the GET.
    fetched: tuple[bytes, ObjectInfo] | None = None


def list_objects(
    url: str,
    storage_options: Mapping[str, Any] | None = None,
    stats: IOStats | None = None,
) -> list[tuple[str, ObjectInfo]]:
    """Every object below the "directory" ``url`` (recursively), sorted by URL.

    An absent prefix lists nothing; an absent bucket raises ObjectNotFoundError.
    """
    return list_with(url, storage_options, stats).objects


def list_with(
    url: str,
    storage_options: Mapping[str, Any] | None = None,
    stats: IOStats | None = None,
    also_get: str | None = None,
    keys_of: Callable[[bytes], Sequence[str] | None] | None = None,
) -> Listing:
    """:func:`list_objects`, plus the object ``also_get`` (a name below ``url``)
    fetched concurrently with the first LIST page on object stores (one more
    request, no more round trip; not fetched elsewhere).

    ``keys_of(bytes of also_get)`` gives the names (relative to ``url``) it
    expects below ``url``, or None; with them the pages after the first are
    LISTed as concurrent segments (see the module's docstring).
    """
    if is_object_store_url(url):
        return _list_obstore(url, storage_options, stats, also_get, keys_of)
    return Listing(_list_fsspec(url, storage_options, stats))


def _boundaries(known: Sequence[str], prefix: str | None, after: str) -> list[str]:
    """Every ``_SEGMENT``-th full key of ``known`` past ``after`` (the last key
    page 1 showed), in order: the upper bounds of all segments but the last."""
    base = f"{prefix}/" if prefix else ""
    keys = sorted({base + k for k in known if isinstance(k, str) and k})
    keys = [k for k in keys if k > after]
    return keys[_SEGMENT - 1 :: _SEGMENT]


def _list_obstore(
    url: str, storage_options: Mapping[str, Any] | None, stats: IOStats | None,
    also_get: str | None, keys_of: Callable[[bytes], Sequence[str] | None] | None,
) -> Listing:
    import asyncio

    from pqindex.io.native import obstore_api


    obs = obstore_api()

    from pqindex.io.objstore import get_store, run

    handle, key = get_store(url, storage_options)
    prefix = key.rstrip("/") or None
    if url.split("://", 1)[0].lower() not in _START_AFTER:
        keys_of = None

    async def pages(stream: Any, upper: str | None) -> tuple[list[Any], int]:
        """The objects of a LIST stream up to ``upper`` (inclusive), and how many
        requests that took (a page of up to 1,000 keys each, at least one)."""
        out: list[Any] = []
        n = 0
        async for chunk in stream:
            n += 1
            if upper is None:
                out.extend(chunk)
                continue
            out.extend(m for m in chunk if m["path"] <= upper)
            if not chunk or chunk[-1]["path"] >= upper:
                break  # past the boundary: the next segment lists the rest
        return out, max(1, n)

    async def fetch(name: str) -> tuple[bytes, Any] | BaseException:
        try:
            res = await obs.get_async(handle.store, f"{prefix}/{name}" if prefix else name)
            return bytes(await res.bytes_async()), res.meta
        except Exception as e:  # absent (the usual 404) or refused: left to the caller
            return e

    async def first_page(stream: Any) -> list[Any]:
        try:
            return list(await stream.__anext__())
        except StopAsyncIteration:
            return []

    async def collect() -> tuple[list[Any], tuple[bytes, Any] | BaseException | None,
                                 list[int]]:
        """Objects, ``also_get``'s answer, requests per wave."""
        stream = obs.list(handle.store, prefix, chunk_size=_LIST_PAGE)
        got: tuple[bytes, Any] | BaseException | None = None
        parsing: asyncio.Future[Sequence[str] | None] | None = None

        def names(data: bytes) -> Sequence[str] | None:
            assert keys_of is not None
            try:
                return keys_of(data)
            except Exception:  # the names only place boundaries: none is fine
                return None

        async def fetch_and_parse(name: str) -> tuple[bytes, Any] | BaseException:
            nonlocal parsing
            res = await fetch(name)
            if keys_of is not None and isinstance(res, tuple):
                # parsed in a thread while page 1 may still be on its way
                parsing = asyncio.ensure_future(asyncio.to_thread(names, res[0]))
            return res

        if also_get is None:
            first = await first_page(stream)
        else:
            first, got = await asyncio.gather(first_page(stream), fetch_and_parse(also_get))
        if len(first) < _LIST_PAGE:
            return first, got, [1]
        known = None if parsing is None else await parsing
        if not known:  # page after page, as the store hands them out
            rest, n = await pages(stream, None)
            if not rest:  # the stream ended without another request
                return first, got, [1]
            return first + rest, got, [1] * (1 + n)
        after = max(m["path"] for m in first)
        bounds = _boundaries(known, prefix, after)
        lows = [after, *bounds]
        uppers: list[str | None] = [*bounds, None]
        segs = await asyncio.gather(*(
            pages(obs.list(handle.store, prefix, offset=lo, chunk_size=_LIST_PAGE), hi)
            for lo, hi in zip(lows, uppers, strict=True)))
        # Waves: page 1, then the segments side by side (the k-th page of each).
        longest = max(n for _, n in segs)
        waves = [1] + [sum(1 for _, n in segs if n > i) for i in range(longest)]
        return first + [m for objs, _ in segs for m in objs], got, waves

    try:
        metas, got, waves = run(collect())
    except Exception as e:
        raise translate(e, url, "LIST") from None
    if stats is not None:
        for n in waves:
            for _ in range(n):
                stats.record(0, 0)
            stats.record_wave()
        if got is not None:  # beside the first page: a request, not a round trip
            stats.record(0, len(got[0]) if isinstance(got, tuple) else 0)
    root = handle.url.rstrip("/")
    fetched = (got[0], _info(got[1])) if isinstance(got, tuple) else None
    return Listing(sorted((f"{root}/{m['path']}", _info(m)) for m in metas), fetched)


def _list_fsspec(
    url: str, storage_options: Mapping[str, Any] | None, stats: IOStats | None
) -> list[tuple[str, ObjectInfo]]:
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
        if not fs.isdir(root):
            return []
        found = fs.find(root, detail=True)
    except Exception as e:
        raise translate(e, url, "LIST") from None
    if stats is not None:
        stats.record(0, 0)
        stats.record_wave()
    proto = url.split("://", 1)[0]
    out = []
    for p, meta in found.items():
        if meta.get("type") == "directory":
            continue
        etag = meta.get("ETag") or meta.get("etag")
        mtime = meta.get("mtime") or meta.get("LastModified")
        mt = None
        if isinstance(mtime, (int, float)):
            mt = int(mtime * 1_000_000_000)
        elif mtime is not None and hasattr(mtime, "timestamp"):
            mt = int(mtime.timestamp() * 1_000_000_000)
        out.append((f"{proto}://{p}",
                    ObjectInfo(int(meta.get("size") or 0), str(etag) if etag else None,
                               mtime=mt)))
    return sorted(out)


def probe_object(
    url: str,
    storage_options: Mapping[str, Any] | None = None,
    stats: IOStats | None = None,
    tail_bytes: int | None = None,
) -> ObjectInfo | None:
    """Whether ``url`` is an object, by reading its tail (one suffix GET, no HEAD).

    The tail goes into the metadata cache, so opening the file next costs no
    request. None when there is no such object.
    """
    from pqindex.io.cache import metadata_cache
    from pqindex.io.objstore import ObjectStoreSource

    src = ObjectStoreSource(url, stats, storage_options)
    try:
        tail = src.tail(tail_bytes or src.default_tail_bytes)
    except ObjectNotFoundError:
        return None
    size = src.size()
    metadata_cache().put(src.cache_key(), [(size - len(tail), tail)])
    return ObjectInfo(size, src.etag, src.version, src._mtime)
