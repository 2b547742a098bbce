"""``add_indexes`` on Azure and GCS objects without moving the data.

S3 copies the data range as ranged parts (``write.remote_index``); the other
two stores get their own server-side paths, chosen by :func:`server_plan`
before the new tail is built, because the tail's offsets depend on the layout:

* **keep the whole object** (``keep_whole``): the new object is the old one,
  untouched, followed by the new tail (page indexes, Bloom filters, embedded
  region, footer). Parquet readers start from the footer at the end and every
  offset is absolute, so the old footer and indexes are dead bytes in the
  middle; the tail refers to old structures in place where they are kept. GCS
  does this with ``compose([object@generation, tail object])``; Azure with a
  block list naming the blob's committed blocks and one new block, when the
  blob was written in blocks (obstore's multipart uploads are) — nothing is
  copied at all. The object grows by the tail on each run.
* **the data range** (Azure blobs written in one Put Blob, which have no block
  list): Put Block From URL of ``[0, data end)`` in blocks of at most 100 MiB,
  conditional on the ETag read, then Put Block of the tail. Azurite answers
  501 to Put Block From URL; the caller then streams (``write.remote``).

Both commit only if the object is still the one read (Put Block List with
``If-Match``; compose with ``ifGenerationMatch`` on source and destination).
Emulators that ignore a condition (fake-gcs-server ignores them all) are
covered by a look at the ETag/generation just before the commit, as on S3: a
change before that look is always caught, one in the instant after only where
the condition is honoured. A failure leaves the object as it was: the GCS
tail object is deleted; staged Azure blocks cannot be deleted, stay
uncommitted and are discarded by the store (at the blob's next commit, or
after a week).
"""

from __future__ import annotations

import base64
import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pqindex.io.azblocks import (
    MAX_BLOCKS,
    MAX_COPY_BLOCK_BYTES,
    AzureBlocks,
    BlockNotSupportedError,
    azure_config,
    block_id_size,
    new_block_ids,
)
from pqindex.io.errors import ObjectChangedError, StorageError
from pqindex.io.gcscompose import GcsCompose, gcs_config, temp_name
from pqindex.io.source import ByteSource
from pqindex.write.remote import RemoteRewrite, even_ranges, run_all
from pqindex.write.tail import RewriteResult

__all__ = ["COPY_BLOCK_BYTES", "COPY_CONCURRENCY", "AzurePlan", "GcsPlan", "ServerPlan",
           "block_ranges", "server_plan"]

COPY_CONCURRENCY = 8  # Put Block From URL requests in flight per object
COPY_BLOCK_BYTES = MAX_COPY_BLOCK_BYTES  # read at call time (tests lower it)


class ServerPlan(Protocol):
    """A server-side rewrite of one object, decided before its tail is built."""

    keep_whole: bool  # the tail goes after the whole object, not after the data

    def run(self, source: ByteSource, base: int, tail_bytes: bytes,
            done: RewriteResult) -> RemoteRewrite | str:
        """Replace the object by ``[0, base)`` + ``tail_bytes``; or why that is not
        possible here (nothing was changed; the caller streams)."""

    def close(self) -> None: ...


def _bare(etag: str | None) -> str:
    return (etag or "").strip().removeprefix("W/").strip('"')


def _changed(url: str, operation: str, was: str | None, now: str | None) -> ObjectChangedError:
    return ObjectChangedError(
        f"the object changed while indexes were added ({was} -> {now}); nothing was replaced",
        path=url, operation=operation)


def server_plan(url: str, storage_options: Mapping[str, Any] | None, source: ByteSource,
                size: int) -> ServerPlan | str:
    """How to rewrite ``url`` server side, or why there is no such plan (S3 has its
    own path; no usable configuration: see ``io.azblocks``/``io.gcscompose``)."""
    scheme = url.split("://", 1)[0].lower()
    if scheme in ("gs", "gcs"):
        gcfg = gcs_config(url, storage_options)
        if gcfg is None:
            return ("compose needs a token pqindex can obtain (user credentials, an "
                    "emulator or anonymous access); obstore's service-account and "
                    "metadata-server tokens are not handed out")
        return GcsPlan(GcsCompose(gcfg), url)
    if scheme in ("az", "azure", "abfs", "abfss", "adl"):
        acfg = azure_config(url, storage_options)
        if acfg is None:
            return ("block requests need an account key, a SAS token or a bearer token in "
                    "the options or environment; obstore's other credentials (managed "
                    "identity, service principal, Azure CLI) are not handed out")
        client = AzureBlocks(acfg)
        try:
            return AzurePlan.for_blob(client, url, source, size)
        except BaseException:
            client.close()
            raise
    return "no server-side copy for this store"


# ---------------------------------------------------------------- GCS


class GcsPlan:
    """Compose the object and an uploaded tail object over the object."""

    keep_whole = True

    def __init__(self, client: GcsCompose, url: str) -> None:
        from pqindex.io.objstore import split_url

        self.client = client
        self.url = url
        self.key = split_url(url)[1]

    def close(self) -> None:
        self.client.close()

    def run(self, source: ByteSource, base: int, tail_bytes: bytes,
            done: RewriteResult) -> RemoteRewrite | str:
        c, key = self.client, self.key
        if not source.version:
            return "the object's generation is unknown (compose could not be conditional)"
        tmp = temp_name(key)
        tmp_gen = c.create(tmp, tail_bytes)
        try:
            meta = c.metadata(key)
            gen = int(meta["generation"])
            if str(gen) != str(source.version) or int(meta.get("size", -1)) != base \
                    or not _same_content(meta, source.etag):
                raise _changed(self.url, "GET object metadata",
                               f"generation {source.version}", f"generation {gen}")
            new = c.compose(key, [(key, gen), (tmp, tmp_gen)], if_generation=gen, keep=meta,
                            expect_size=base + len(tail_bytes))
            if int(new.get("size", -1)) != base + len(tail_bytes):
                raise StorageError(f"compose made an object of {new.get('size')} bytes, not "
                                   f"{base + len(tail_bytes)}", path=self.url,
                                   operation="compose")
        finally:
            try:
                c.delete(tmp, tmp_gen)
            except StorageError as bad:
                warnings.warn(f"the temporary index tail gs://{c.config.bucket}/{tmp} "
                              f"could not be deleted: {bad}", RuntimeWarning, stacklevel=2)
        return RemoteRewrite(done, uploaded=len(tail_bytes), copied_server_side=base, parts=2)


def _same_content(meta: Mapping[str, Any], etag: str | None) -> bool:
    """Whether the ETag obstore read (the XML API's: the MD5 in hex, or the
    JSON form on emulators) can be the object ``meta`` describes. A composite
    object has no MD5: then only the generation tells (emulators that keep the
    generation on overwrite, as fake-gcs-server does, are caught by the MD5)."""
    md5 = meta.get("md5Hash")
    if not etag or not md5:
        return True
    try:
        hexed = base64.b64decode(str(md5)).hex()
    except ValueError:
        hexed = ""
    return _bare(etag) in (str(md5), hexed, _bare(str(meta.get("etag", ""))))


# ---------------------------------------------------------------- Azure


def block_ranges(size: int, block_bytes: int | None = None) -> list[tuple[int, int]]:
    """``[0, size)`` as even ``(start, end)`` blocks of at most ``block_bytes``
    (``COPY_BLOCK_BYTES``)."""
    n = max(1, -(-size // (block_bytes or COPY_BLOCK_BYTES)))
    return even_ranges(size, n)


class AzurePlan:
    """A new block list: the blob's committed blocks (``keep_whole``) or blocks
    copied from its data range, then the tail block."""

    def __init__(self, client: AzureBlocks, url: str, blob: str, etag: str,
                 committed: list[tuple[str, int]], props: Mapping[str, str],
                 keep_whole: bool) -> None:
        self.client = client
        self.url = url
        self.blob = blob
        self.etag = etag
        self.committed = committed
        self.props = props
        self.keep_whole = keep_whole

    @classmethod
    def for_blob(cls, client: AzureBlocks, url: str, source: ByteSource,
                 size: int) -> AzurePlan:
        from pqindex.io.objstore import split_url

        blob = split_url(url)[1]
        props = client.properties(blob)
        etag = props.get("etag", "")
        if source.etag and _bare(etag) != _bare(source.etag):
            raise _changed(url, "Get Blob Properties", source.etag, etag)
        committed: list[tuple[str, int]] = []
        if props.get("x-ms-blob-type", "BlockBlob") == "BlockBlob":
            list_etag, committed = client.committed_blocks(blob)
            if _bare(list_etag) != _bare(etag):
                raise _changed(url, "Get Block List", etag, list_etag)
        whole = (bool(committed) and sum(n for _b, n in committed) == size
                 and len(committed) < MAX_BLOCKS)
        return cls(client, url, blob, etag, committed, props, whole)

    def close(self) -> None:
        self.client.close()

    def run(self, source: ByteSource, base: int, tail_bytes: bytes,
            done: RewriteResult) -> RemoteRewrite | str:
        c, blob = self.client, self.blob
        taken = [b for b, _n in self.committed]
        id_size = block_id_size(self.committed)
        if self.keep_whole:
            [tail_id] = new_block_ids(1, taken, id_size)
            c.put_block(blob, tail_id, tail_bytes)
            blocks = [("Committed", b) for b in taken] + [("Uncommitted", tail_id)]
            copied = 0  # nothing copied: the committed blocks are named again
        else:
            ranges = block_ranges(base)
            if len(ranges) + 1 > MAX_BLOCKS:
                return "the blob needs more blocks than Azure allows"
            ids = new_block_ids(len(ranges) + 1, taken, id_size)
            source_url = c.source_address(blob)
            jobs: list[Callable[[], None]] = [
                functools.partial(c.put_block_from_url, blob, i, source_url, start, end,
                                  source_if_match=self.etag)
                for i, (start, end) in zip(ids, ranges, strict=False)]
            jobs.append(functools.partial(c.put_block, blob, ids[-1], tail_bytes))
            try:
                run_all(jobs, COPY_CONCURRENCY)
            except BlockNotSupportedError as e:
                # nothing committed: the staged blocks are discarded
                return f"the store does not implement Put Block From URL ({e.detail})"
            blocks = [("Uncommitted", b) for b in ids]
            copied = base
        now = c.properties(blob).get("etag", "")  # for stores that ignore If-Match
        if _bare(now) != _bare(self.etag):
            raise _changed(self.url, "Get Blob Properties", self.etag, now)
        c.put_block_list(blob, blocks, if_match=self.etag, keep=self.props)
        kept = base if self.keep_whole else copied
        return RemoteRewrite(done, uploaded=len(tail_bytes), copied_server_side=kept,
                             parts=len(blocks))
