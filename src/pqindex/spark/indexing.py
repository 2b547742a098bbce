"""``pqindex.spark.add_indexes``: index the files of a lake as one Spark job."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
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
) -> dict[str, Any]:
    """Run ``pqindex.add_indexes`` over every file under ``path`` as a Spark job.

    Files are spread over ``num_tasks`` tasks (default: Spark's parallelism, at
    most one file per task); each file is rewritten atomically (or into
    ``output``). A file that fails is reported in ``errors`` and the others go
    on. A pqindex manifest in a directory given is refreshed to the new sizes.
    """
    from pyspark.sql import functions as F

    from pqindex.spark.commit import load_manifest, manifest_status, write_manifest
    from pqindex.spark.workers import ensure_workers
    from pqindex.write.add_indexes import index_targets

    t0 = time.perf_counter()
    targets = index_targets(path if isinstance(path, list) else os.fspath(path), output)
    kinds: dict[str, list[str]] = {
        "distinct": list([distinct] if isinstance(distinct, str) else distinct),
        "bloom": list([bloom] if isinstance(bloom, str) else bloom),
        "zone_maps": list([zone_maps] if isinstance(zone_maps, str) else zone_maps),
        "hll": list([hll] if isinstance(hll, str) else hll),
    }
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
        m["bytes"] = sum(int(f["bytes"]) for f in m["files"])
        summary = m.setdefault("index_summary", {})
        summary["region_bytes"] = sum(int(f.get("region_bytes") or 0) for f in m["files"])
        summary["files_with_region"] = sum(1 for f in m["files"] if f.get("region_bytes"))
        added = summary.setdefault("added", {})
        for kind in ("distinct", "bloom", "zone_maps", "hll"):
            if kinds[kind]:
                added[kind] = sorted(set(added.get(kind, [])) | set(kinds[kind]))
        write_manifest(d, m)
    return {
        "files": len(done),
        "errors": errors,
        "bytes_before": sum(r["bytes_before"] for r in done),
        "bytes_after": sum(r["bytes_after"] for r in done),
        "region_bytes": sum(r["region_bytes"] for r in done),
        "page_index_added": sum(r["page_index_added"] for r in done),
        "tasks": n,
        "seconds": time.perf_counter() - t0,
        "results": done,
    }
