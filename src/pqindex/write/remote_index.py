"""``add_indexes`` on object-store URLs: each object is replaced by its data range
plus a new index tail, only if it is still the object that was read.

The data range ``[0, data_end)`` is every byte up to the end of the last column
chunk (``write.tail.data_end``): the new tail (page index, Bloom filters,
embedded region, footer) starts there and no footer offset points past it, so
those bytes stay valid as they are. On S3 they never leave the store
(:func:`rewrite_server_side`): a multipart upload whose first parts are
``UploadPartCopy`` requests with a byte range, conditional on the ETag read
(``x-amz-copy-source-if-match``), and whose last part is the new tail, completed
with ``If-Match`` on that ETag. Azure and GCS have their own server-side paths
(``write.cloud_copy``), chosen before the tail is built since they may keep the
whole object and put the tail after it. A data range under S3's 5 MiB part
minimum, another store, credentials obstore finds but pqindex does not sign
with, or a store that answers NotImplemented take ``write.remote.rewrite_remote``
(the range streamed down and up).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pqindex.errors import PqIndexError, UserInputError
from pqindex.format.file import ParquetFile
from pqindex.io.errors import ObjectChangedError, StorageError
from pqindex.io.listing import list_objects
from pqindex.io.s3multipart import (
    MAX_PART_BYTES,
    MAX_PARTS,
    MIN_PART_BYTES,
    CopyNotSupportedError,
    S3Multipart,
    etag_matches,
    s3_config,
)
from pqindex.io.source import ByteSource, ObjectInfo, open_source
from pqindex.write.add_indexes import (
    IndexResult,
    PageIndexMode,
    fill_page_indexes,
    is_data_name,
    new_region,
)
from pqindex.write.cloud_copy import server_plan
from pqindex.write.remote import (
    RemoteRewrite,
    build_tail,
    even_ranges,
    is_remote,
    rewrite_remote,
    run_all,
    spliced,
)
from pqindex.write.tail import RewriteResult, Tail, region_locator

__all__ = ["COPY_CONCURRENCY", "COPY_PART_BYTES", "copy_ranges", "index_object",
           "index_object_copy", "remote_targets", "rewrite_server_side"]

COPY_PART_BYTES = 32 << 20  # target size of a copied part (each is 1-2x this)
COPY_CONCURRENCY = 16  # part copies in flight per object


def remote_targets(paths: Sequence[str], storage_options: Mapping[str, Any] | None
                   ) -> list[str]:
    """The objects ``paths`` name: an object as given, a prefix (ending in ``/`` or
    holding objects below it) listed recursively, ``_``/``.`` names skipped."""
    out: list[str] = []
    for p in paths:
        if not is_remote(p):
            raise UserInputError("local paths and object-store URLs cannot be mixed", path=p)
        listed = [] if p.endswith(".parquet") else list_objects(p.rstrip("/") + "/",
                                                              storage_options)
        if listed:
            root = p.rstrip("/") + "/"
            for url, _info in listed:
                rel = url[len(root):] if url.startswith(root) else url
                if all(is_data_name(part) for part in rel.split("/")):
                    out.append(url)
        else:
            out.append(p)
    return list(dict.fromkeys(out))


def index_object(
    url: str,
    *,
    kinds: Mapping[str, list[str]],
    cap: int | None,
    page_index: PageIndexMode,
    drop: bool,
    storage_options: Mapping[str, Any] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    output: str | None = None,
    size: int | None = None,
) -> IndexResult:
    """Index one object in place (see :func:`pqindex.write.add_indexes.add_indexes`);
    ``options`` per index kind, as ``build_blobs`` takes them (Bloom scopes).

    ``output``: a new object of the same bucket (a lake table's indexed copy) is
    written instead and ``url`` left as it is; nothing is written when the object
    needs no change. ``size``: the object's size when known (a table's log records
    it: no HEAD)."""
    t0 = time.perf_counter()
    src = open_source(url, storage_options=storage_options,
                      info=None if size is None else ObjectInfo(size))
    try:
        with ParquetFile(src) as pf:
            result = IndexResult(path=url, output=output or url, bytes_before=pf.file_size,
                                 bytes_after=pf.file_size, region_bytes=0)
            tail = Tail()
            old_region = region_locator(pf)
            if drop:
                tail.drop_region = True
                result.region_dropped = old_region is not None
            else:
                fill_page_indexes(pf, tail, result, cap, page_index)
            if not (tail.column_indexes or tail.offset_indexes or kinds
                    or (drop and old_region is not None)):
                result.rewritten = False
                result.region_bytes = old_region[1] if old_region is not None else 0
                result.seconds = time.perf_counter() - t0
                return result
            size = pf.file_size
        # Azure's and GCS's server-side paths keep the object's own name.
        planned = (server_plan(url, storage_options, src, size) if output is None
                   else "a new object: the store's append paths keep the same name")
        plan = None if isinstance(planned, str) else planned
        try:
            # Each server-side path says why it could not be taken (the result keeps it).
            sent: RemoteRewrite | str = planned if isinstance(planned, str) else ""
            whole = plan is not None and plan.keep_whole
            base, tail_bytes, done = _new_tail(src, tail, kinds, result, options, whole)
            if plan is not None:
                sent = plan.run(src, base, tail_bytes, done)
            if isinstance(sent, str) and whole:  # the data-range layout after all
                base, tail_bytes, done = _new_tail(src, tail, kinds, result, options, False)
            if isinstance(sent, str) and url.split("://", 1)[0].lower() in ("s3", "s3a"):
                sent = rewrite_server_side(src, base, tail_bytes, done, url, storage_options,
                                           output=output)
            if isinstance(sent, str):
                result.streamed_because = sent or "no server-side copy for this store"
                sent = rewrite_remote(src, base, tail_bytes, done, url, storage_options,
                                      output=output)
        finally:
            if plan is not None:
                plan.close()
    except PqIndexError as e:
        raise e.located(path=url) from None
    finally:
        src.close()
    result.bytes_after = sent.result.size
    result.region_bytes = sent.result.region[1] if sent.result.region else 0
    result.bytes_uploaded = sent.uploaded
    result.bytes_copied_server_side = sent.copied_server_side
    result.seconds = time.perf_counter() - t0
    return result


def index_object_copy(url: str, output: str, **kw: Any) -> IndexResult:
    """:func:`index_object` into a new object (a table's copy)."""
    return index_object(url, output=output, **kw)


def _new_tail(src: ByteSource, tail: Tail, kinds: Mapping[str, list[str]],
              result: IndexResult, options: Mapping[str, Mapping[str, Any]] | None,
              keep_whole: bool) -> tuple[int, bytes, RewriteResult]:
    """(where the tail starts, its bytes, what they hold): after the data range, or
    after the whole object with ``keep_whole``. ``tail`` holds the page-index
    changes; the embedded region of ``kinds`` is built here (page-scope blobs on
    the file that has the new page index)."""
    tail = dataclasses.replace(tail, column_indexes=dict(tail.column_indexes),
                               offset_indexes=dict(tail.offset_indexes),
                               bloom_filters=dict(tail.bloom_filters),
                               key_value=dict(tail.key_value))
    with ParquetFile(src) as pf:
        at = pf.file_size if keep_whole else None
        if kinds and not tail.offset_indexes:
            tail.region = new_region(pf, dict(kinds), result, options)
        base, tail_bytes, done = build_tail(pf, tail, at=at)
    if kinds and tail.offset_indexes:
        with ParquetFile(spliced(src, base, tail_bytes)) as staged:
            region_tail = Tail(region=new_region(staged, dict(kinds), result, options))
            _b, tail_bytes, done = build_tail(staged, region_tail, at=base)
    return base, tail_bytes, done


def copy_ranges(size: int, part_bytes: int | None = None) -> list[tuple[int, int]]:
    """``[0, size)`` as ``(start, end)`` parts of ``part_bytes`` to twice that (never
    under it, so never under S3's minimum when ``part_bytes`` is not), at most
    5 GiB each."""
    target = max(MIN_PART_BYTES, part_bytes or COPY_PART_BYTES)
    n = max(1, size // target, -(-size // MAX_PART_BYTES))
    return even_ranges(size, n)


def rewrite_server_side(
    source: ByteSource,
    base: int,
    tail_bytes: bytes,
    done: RewriteResult,
    url: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    part_bytes: int | None = None,
    output: str | None = None,
) -> RemoteRewrite | str:
    """Replace the S3 object ``url`` by its bytes ``[0, base)``, copied by S3, plus
    ``tail_bytes``, only if it is still the object ``source`` read; when this
    cannot be done server side, why (the caller streams instead). With ``output``
    (a new key of the same bucket) that object is made instead; ``url`` stays.

    Stores that honour the conditions (AWS S3) refuse a copy from, or a
    completion over, another version with 412. Some S3-compatible servers
    ignore them (moto 5.2 does, on both), so the ETag is also checked with a
    HEAD after the copies: a change before that check is always caught, one in
    the instant between it and the completion only where ``If-Match`` is
    honoured. Any failure aborts the upload; the object stays as it was.
    """
    if base < MIN_PART_BYTES:
        return (f"the data range ({base:,} bytes) is under S3's {MIN_PART_BYTES:,}-byte "
                "part minimum")
    config, reason = s3_config(url, storage_options)
    if config is None:
        return f"pqindex cannot sign the part copies: {reason}"
    ranges = copy_ranges(base, part_bytes)
    if len(ranges) + 1 > MAX_PARTS or len(tail_bytes) > MAX_PART_BYTES:
        return "the object needs more parts than S3 allows"
    etag, version = source.etag, source.version
    client = S3Multipart(config)
    from pqindex.io.objstore import split_url

    key = split_url(url)[1]
    dest = key if output is None else split_url(output)[1]
    if output is not None and split_url(output)[0] != split_url(url)[0]:
        return "the copy goes to another bucket"
    try:
        try:
            upload_id = client.create(dest)
        except CopyNotSupportedError as e:
            return f"the store has no multipart API ({e.detail})"
        try:
            parts = _copy_parts(client, key, upload_id, ranges, tail_bytes, etag, version,
                                dest=dest)
            if etag:
                now, _size = client.head(key)
                if not etag_matches(now, etag):
                    raise ObjectChangedError(
                        f"the object changed while indexes were added (ETag {etag} -> "
                        f"{now}); nothing was replaced", path=url, operation="HEAD")
            client.complete(dest, upload_id, parts, if_match=etag if dest == key else None,
                            size=base + len(tail_bytes))
        except BaseException as e:
            try:
                client.abort(dest, upload_id)
            except StorageError as bad:
                e.add_note(f"the multipart upload {upload_id} could not be aborted: {bad}")
            if isinstance(e, CopyNotSupportedError):
                return f"the store refused UploadPartCopy ({e.detail})"
            raise
    finally:
        client.close()
    return RemoteRewrite(done, uploaded=len(tail_bytes), copied_server_side=base,
                         parts=len(parts))


def _copy_parts(client: S3Multipart, key: str, upload_id: str, ranges: list[tuple[int, int]],
                tail_bytes: bytes, etag: str | None, version: str | None, *,
                dest: str | None = None) -> list[tuple[int, str]]:
    """Copy ``ranges`` of ``key`` as parts 1..n of the upload to ``dest`` (default:
    ``key``) and upload the tail as part n+1, concurrently; the first failure
    cancels what has not started and is raised."""
    last = len(ranges) + 1
    dest = dest or key
    jobs = [functools.partial(client.upload_part, dest, upload_id, last, tail_bytes)]
    jobs += [functools.partial(client.copy_part, dest, upload_id, i, key, start, end,
                               if_match=etag, version=version)
             for i, (start, end) in enumerate(ranges, 1)]
    tail_etag, *etags = run_all(jobs, COPY_CONCURRENCY)
    return [*enumerate(etags, 1), (last, tail_etag)]
