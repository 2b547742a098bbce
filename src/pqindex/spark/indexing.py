"""``pqindex.spark.add_indexes``: index the files of a lake as one Spark job."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pqindex.write.add_indexes import PageIndexMode

__all__ = ["add_indexes"]


def _index_one(item: tuple[str, str], options: dict[str, Any]) -> dict[str, Any]:
    """One file, on an executor: ``index_file`` writes the new file next to the old one
    and renames it over it, so a reader sees the old file or the new, whole."""
    from pqindex.errors import PqIndexError
    from pqindex.write.add_indexes import index_file

    src, out = item
    if out == src:
        # Hadoop's local file system checks a `.name.crc` sidecar (Spark writes them):
        # after the rewrite it would no longer match and Spark could not read the file.
        crc = os.path.join(os.path.dirname(src), f".{os.path.basename(src)}.crc")
        if os.path.exists(crc):
            os.unlink(crc)
    try:
        r = index_file(src, output=None if out == src else out, **options)
    except PqIndexError as e:
        return {"path": src, "error": str(e)}
    return r.to_dict()


class _IndexJob:
    """The UDF of the job: row ``i`` indexes file ``i``; the result as JSON.

    A ``spark.range`` with ``n`` partitions spreads the files over ``n`` tasks
    without a shuffle (a shuffle of a few rows would be coalesced into one
    task), and works the same on classic and Spark Connect sessions.
    """

    def __init__(self, items: list[tuple[str, str]], options: dict[str, Any]) -> None:
        self.items = items
        self.options = options

    def __call__(self, i: int) -> str:
        return json.dumps(_index_one(self.items[i], self.options), default=str)


class _RemoteIndexJob:
    """The UDF of an object-store job: row ``i`` indexes object ``i`` in place through
    ``pqindex.add_indexes`` (the data copied server-side where the store can). The
    storage options travel in :func:`pqindex.spark.secrets.hide`'s encoding."""

    def __init__(self, urls: list[str], options: dict[str, Any], hidden: str) -> None:
        self.urls = urls
        self.options = options
        self.hidden = hidden

    def __call__(self, i: int) -> str:
        import pqindex
        from pqindex.errors import PqIndexError
        from pqindex.spark.secrets import reveal

        url = self.urls[i]
        try:
            r = pqindex.add_indexes(url, storage_options=reveal(self.hidden), **self.options)
        except PqIndexError as e:
            return json.dumps({"path": url, "error": str(e)})
        return json.dumps(r[0].to_dict(), default=str)


def _add_to_summary(m: dict[str, Any], summary: dict[str, Any],
                    kinds: Mapping[str, Sequence[str]]) -> None:
    """A manifest's totals after indexing: bytes, region bytes, files with a region,
    and the index kinds added (by column)."""
    m["bytes"] = sum(int(f["bytes"]) for f in m["files"])
    summary["region_bytes"] = sum(int(f.get("region_bytes") or 0) for f in m["files"])
    summary["files_with_region"] = sum(1 for f in m["files"] if f.get("region_bytes"))
    added = summary.setdefault("added", {})
    for kind, cols in kinds.items():
        if cols:
            added[kind] = sorted(set(added.get(kind, [])) | set(cols))


def _totals(done: list[dict[str, Any]], errors: list[dict[str, Any]], tasks: int,
            t0: float, **extra: Any) -> dict[str, Any]:
    """What an indexing job returns: its files' sums, errors and per-file results."""
    return {
        "files": len(done),
        "errors": errors,
        "bytes_before": sum(r["bytes_before"] for r in done),
        "bytes_after": sum(r["bytes_after"] for r in done),
        "region_bytes": sum(r["region_bytes"] for r in done),
        "page_index_added": sum(r["page_index_added"] for r in done),
        **extra,
        "tasks": tasks,
        "seconds": time.perf_counter() - t0,
        "results": done,
    }


def _refresh_remote_manifest(dest: str, done: list[dict[str, Any]], kinds: dict[str, list[str]],
                             base: dict[str, Any], etag: str,
                             storage_options: dict[str, Any]) -> None:
    """The pipeline's manifest at ``dest`` with the indexed objects' entries built anew
    (sizes, ETags, embedded summaries), put only if unchanged since the job started."""
    from pqindex.spark.commit import _index_summary
    from pqindex.spark.remote_commit import (
        _entries,
        _manifest_url,
        _put_manifest,
        data_objects,
    )

    root = dest.rstrip("/") + "/"
    rels = [r["path"][len(root):] for r in done if r["path"].startswith(root)]
    infos = {rel: inf for rel, inf in data_objects(dest, storage_options).items() if rel in rels}
    stats, new_schemas = _entries(dest, rels, infos, storage_options)
    schemas = list(base.get("schemas") or [])
    by_rel = {r["path"][len(root):]: r for r in done}
    for f in base["files"]:
        st = stats.get(f["path"])
        if st is None:
            continue
        st = dict(st)
        stub = new_schemas[int(st["schema"])]
        if stub not in schemas:
            schemas.append(stub)
        st["schema"] = schemas.index(stub)
        f.update(st)
        f["region_bytes"] = by_rel[f["path"]]["region_bytes"]
        f["indexes_added"] = by_rel[f["path"]]["indexes"]
    base["schemas"] = schemas
    _add_to_summary(base, base.setdefault("index_summary", _index_summary(base["files"], base)),
                    kinds)
    body = json.dumps(base, indent=1, default=str).encode()
    _put_manifest(_manifest_url(dest), body, etag, storage_options)


def _add_indexes_remote(
    spark: Any, urls: list[str], *, single: bool, kinds: dict[str, list[str]],
    truncate: bool | int, page_index: PageIndexMode, num_tasks: int | None,
    storage_options: dict[str, Any],
) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from pqindex.spark.remote_commit import _load, data_objects
    from pqindex.spark.secrets import hide
    from pqindex.spark.workers import ensure_workers
    from pqindex.write.remote_index import remote_targets

    t0 = time.perf_counter()
    targets = remote_targets(urls, storage_options)
    check = ensure_workers(spark)
    n = max(1, min(len(targets), num_tasks or check.parallelism))
    dest = urls[0].rstrip("/") if single and not urls[0].endswith(".parquet") else None
    manifest, etag = _load(dest, storage_options) if dest is not None else (None, None)
    if manifest is not None:
        from pqindex.spark.commit import manifest_status

        on_store = {rel: i.size for rel, i in data_objects(dest or "", storage_options).items()}
        if manifest_status(dest or "", manifest, on_store) != "current":
            manifest = None  # stale before the job: left as it is (readers list instead)
    options = {**kinds, "truncate": truncate, "page_index": page_index}
    job = F.udf(_RemoteIndexJob(targets, options, hide(spark, storage_options)), "string",
                useArrow=False)
    out = (spark.range(0, len(targets), 1, n).select(job("id").alias("r")).collect()
           if targets else [])
    rows = [json.loads(r["r"]) for r in out]
    done = [r for r in rows if "error" not in r]
    errors = [r for r in rows if "error" in r]
    if manifest is not None and etag is not None and done:
        assert dest is not None
        _refresh_remote_manifest(dest, done, kinds, manifest, etag, storage_options)
    return _totals(done, errors, n, t0,
                   bytes_uploaded=sum(int(r.get("bytes_uploaded") or 0) for r in done))


def add_indexes(
    spark: Any,
    path: str | os.PathLike[str] | list[str],
    *,
    distinct: str | Iterable[str] = (),
    bloom: str | Iterable[str] = (),
    zone_maps: str | Iterable[str] = (),
    hll: str | Iterable[str] = (),
    truncate: bool | int = True,
    page_index: PageIndexMode = "keep",
    output: str | os.PathLike[str] | None = None,
    num_tasks: int | None = None,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``pqindex.add_indexes`` over every file under ``path`` as a Spark job.

    Files are spread over ``num_tasks`` tasks (default: Spark's parallelism, at
    most one file per task); each file is rewritten atomically (or into
    ``output``). A file that fails is reported in ``errors`` and the others go
    on. A pqindex manifest in a directory given is refreshed to the new sizes.

    Object-store URLs (``storage_options`` configure the store; they reach the
    tasks redacted, see :mod:`pqindex.spark.secrets`) are indexed in place by
    ``pqindex.add_indexes`` in the tasks (each object replaced only if unchanged
    since read, its data copied server-side where the store can: ``bytes_uploaded``
    sums what went up); a pipeline manifest at a prefix given is refreshed with a
    conditional PUT (only if it did not change meanwhile).
    """
    from pyspark.sql import functions as F

    from pqindex.io.source import is_object_store_url
    from pqindex.spark.commit import load_manifest, manifest_status, write_manifest
    from pqindex.spark.workers import ensure_workers
    from pqindex.write.add_indexes import index_targets

    t0 = time.perf_counter()
    kinds: dict[str, list[str]] = {
        "distinct": list([distinct] if isinstance(distinct, str) else distinct),
        "bloom": list([bloom] if isinstance(bloom, str) else bloom),
        "zone_maps": list([zone_maps] if isinstance(zone_maps, str) else zone_maps),
        "hll": list([hll] if isinstance(hll, str) else hll),
    }
    given = [os.fspath(p) for p in path] if isinstance(path, list) else [os.fspath(path)]
    if any(is_object_store_url(p) for p in given):
        if output is not None:
            from pqindex.errors import UserInputError

            raise UserInputError("output is not supported for object-store URLs (in place only)")
        return _add_indexes_remote(spark, given, single=not isinstance(path, list), kinds=kinds,
                                   truncate=truncate, page_index=page_index,
                                   num_tasks=num_tasks, storage_options=storage_options or {})
    targets = index_targets(path if isinstance(path, list) else os.fspath(path), output)
    options: dict[str, Any] = {**kinds, "truncate": truncate, "page_index": page_index}
    items = [(t.source, t.output) for t in targets]
    check = ensure_workers(spark)
    n = max(1, min(len(items), num_tasks or check.parallelism))
    # Before the job: a manifest that is current now is refreshed after it.
    dirs = [] if isinstance(path, list) or output is not None else [os.fspath(path)]
    current = {d: m for d in dirs if (m := load_manifest(d)) and manifest_status(d, m) == "current"}
    job = F.udf(_IndexJob(items, options), "string", useArrow=False)
    out = spark.range(0, len(items), 1, n).select(job("id").alias("r")).collect() if items else []
    rows = [json.loads(r["r"]) for r in out]
    done = [r for r in rows if "error" not in r]
    errors = [r for r in rows if "error" in r]
    for d, m in current.items():
        by_path = {os.path.relpath(r["output"], d): r for r in done}
        for f in m["files"]:
            r = by_path.get(f["path"])
            if r is not None:
                f["bytes"] = r["bytes_after"]
                f["region_bytes"] = r["region_bytes"]
                f["indexes_added"] = r["indexes"]
        _add_to_summary(m, m.setdefault("index_summary", {}),
                        {k: kinds[k] for k in ("distinct", "bloom", "zone_maps", "hll")})
        write_manifest(d, m)
    return _totals(done, errors, n, t0)
