"""``add_indexes`` on object-store URLs: each object is replaced by its data range
plus a new index tail (``write.remote.rewrite_remote``), only if it is still the
object that was read. See ``write.remote`` for why the data range travels down
and up (obstore has no ranged server-side part copy) and for the ETag checks.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pqindex.errors import PqIndexError, UserInputError
from pqindex.format.file import ParquetFile
from pqindex.io.listing import list_objects
from pqindex.io.source import open_source
from pqindex.write.add_indexes import (
    DEFAULT_BLOOM_SCOPE,
    IndexResult,
    PageIndexMode,
    Progress,
    _cap,
    _is_data_name,
    _kinds,
    _page_index,
    _region,
    bloom_scopes,
)
from pqindex.write.remote import build_tail, is_remote, rewrite_remote, spliced
from pqindex.write.tail import Tail, region_locator

__all__ = ["add_indexes_remote", "index_object", "remote_targets"]


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
                if all(_is_data_name(part) for part in rel.split("/")):
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
) -> IndexResult:
    """Index one object in place (see :func:`pqindex.write.add_indexes.add_indexes`);
    ``options`` per index kind, as ``build_blobs`` takes them (Bloom scopes)."""
    t0 = time.perf_counter()
    src = open_source(url, storage_options=storage_options)
    try:
        with ParquetFile(src) as pf:
            result = IndexResult(path=url, output=url, bytes_before=pf.file_size,
                                 bytes_after=pf.file_size, region_bytes=0)
            tail = Tail()
            old_region = region_locator(pf)
            if drop:
                tail.drop_region = True
                result.region_dropped = old_region is not None
            else:
                _page_index(pf, tail, result, cap, page_index)
            if not (tail.column_indexes or tail.offset_indexes or kinds
                    or (drop and old_region is not None)):
                result.rewritten = False
                result.region_bytes = old_region[1] if old_region is not None else 0
                result.seconds = time.perf_counter() - t0
                return result
            base, tail_bytes, done = build_tail(pf, tail)
        if kinds:
            if tail.offset_indexes:
                # Page-scope blobs are built on the file that has the page index.
                with ParquetFile(spliced(src, base, tail_bytes)) as staged:
                    region_tail = Tail(region=_region(staged, dict(kinds), result, options))
                    _b, more, done = build_tail(staged, region_tail)
                tail_bytes = more
            else:
                with ParquetFile(src) as pf:
                    tail.region = _region(pf, dict(kinds), result, options)
                    base, tail_bytes, done = build_tail(pf, tail)
        sent = rewrite_remote(src, base, tail_bytes, done, url, storage_options)
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


def add_indexes_remote(
    paths: Sequence[str],
    *,
    distinct: str | Iterable[str] = (),
    bloom: str | Iterable[str] = (),
    zone_maps: str | Iterable[str] = (),
    hll: str | Iterable[str] = (),
    truncate: bool | int = True,
    page_index: PageIndexMode = "keep",
    drop: bool = False,
    progress: Progress | None = None,
    storage_options: Mapping[str, Any] | None = None,
    indexes: Mapping[str, str | Sequence[str]] | None = None,
    bloom_scope: str | Iterable[str] = DEFAULT_BLOOM_SCOPE,
) -> list[IndexResult]:
    """``add_indexes`` for object-store URLs (in place only; no ``output``)."""
    options = {"bloom": {"scopes": bloom_scopes(bloom_scope)}}
    kinds = _kinds(indexes, distinct=distinct, bloom=bloom, zone_maps=zone_maps, hll=hll)
    if page_index not in ("keep", "add"):
        raise UserInputError(f"page_index must be 'keep' or 'add', not {page_index!r}")
    if drop and (kinds or page_index == "add"):
        raise UserInputError(
            "drop removes the embedded indexes; it takes no index kinds and no page_index='add'")
    cap = _cap(truncate)
    targets = remote_targets(paths, storage_options)
    results: list[IndexResult] = []
    for url in targets:
        results.append(index_object(url, kinds=kinds, cap=cap, page_index=page_index, drop=drop,
                                    storage_options=storage_options, options=options))
        if progress is not None:
            progress(len(results), len(targets), results[-1])
    if len(paths) == 1 and not paths[0].endswith(".parquet") and targets != [paths[0]]:
        from pqindex.dataset.manifest import write_manifest

        write_manifest(paths[0], storage_options)
    return results
