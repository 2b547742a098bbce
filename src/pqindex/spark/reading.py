"""Spark reads that use pqindex's indexes: plan on the driver, read the kept files natively.

The file list is Spark's own (``inputFiles()`` of ``spark.read.parquet(path)``):
pqindex only takes files away from it, so Spark never reads a file it would not
have read, and the result keeps the full dataset's schema (partition column
types included) because it is passed explicitly. Whenever pqindex cannot judge
a predicate the way Spark does (syntax it does not parse, a partition column
Spark types differently), nothing is pruned.
"""

from __future__ import annotations

import os
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pqindex.errors import PqIndexError

__all__ = ["SparkPlan", "explain", "plan", "read"]


@dataclass
class SparkPlan:
    """Which of Spark's files a query needs, and why the others were dropped."""

    path: str
    where: str | None
    files_total: int = 0
    kept: list[str] = field(default_factory=list)  # as Spark names them (URIs)
    pruned: list[dict[str, str]] = field(default_factory=list)  # file, by, reason
    manifest: str = "absent"  # current / stale / absent
    fallback: str | None = None  # why nothing could be pruned
    plan_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "where": self.where,
            "files_total": self.files_total,
            "files_kept": len(self.kept),
            "files_pruned": len(self.pruned),
            "kept": list(self.kept),
            "pruned": list(self.pruned),
            "manifest": self.manifest,
            "fallback": self.fallback,
            "plan_seconds": self.plan_seconds,
        }

    def __str__(self) -> str:
        lines = [
            f"{self.path} where {self.where or 'true'}: {len(self.kept)} of "
            f"{self.files_total} file(s) to read, {len(self.pruned)} pruned "
            f"(manifest {self.manifest}, planned in {self.plan_seconds * 1000:.0f} ms)"
        ]
        if self.fallback:
            lines.append(f"  no pruning: {self.fallback}")
        for p in self.pruned:
            lines.append(f"  - {p['file']}: {p['by']} — {p['reason']}")
        return "\n".join(lines)


def _local(uri: str) -> str | None:
    u = urllib.parse.urlparse(uri)
    if u.scheme in ("", "file"):
        return os.path.normpath(urllib.parse.unquote(u.path))
    return None


def _mismatched_partitions(spark_schema: Any, disc: Any) -> set[str]:
    """Partition columns pqindex would type differently from Spark."""
    from pyspark.sql import types as T

    out = set()
    for k in disc.partition_columns:
        if k not in spark_schema.fieldNames():
            out.add(k)
            continue
        dt = spark_schema[k].dataType
        ours = disc.partition_types.get(k)
        same = (ours == "int64" and isinstance(dt, (T.IntegerType, T.LongType))) or (
            ours == "string" and isinstance(dt, T.StringType)
        )
        if not same:
            out.add(k)
    return out


PLANNING_TAIL_BYTES = 16 * 1024


def _manifest_discovery(dest: str, manifest: dict[str, Any]) -> Any:
    from pqindex.dataset.discovery import DataFile, Discovery, _hive_parts, _infer_type

    files = []
    for f in manifest["files"]:
        rel = f["path"].split("/")
        files.append(DataFile(os.path.join(dest, *rel), _hive_parts(rel[:-1])))
    keys: list[str] = []
    for df in files:
        for k, _ in df.partition:
            if k not in keys:
                keys.append(k)
    types = {k: _infer_type(v for df in files for kk, v in df.partition if kk == k) for k in keys}
    return Discovery(tuple(files), tuple(keys), types)


def plan(path: str, where: str | None, spark_files: Sequence[str], spark_schema: Any) -> SparkPlan:
    """Prune ``spark_files`` (Spark's listing of the dataset at ``path``) for ``where``."""
    import pqindex
    from pqindex.expr.bind import columns as expr_columns
    from pqindex.expr.sql import parse_where
    from pqindex.spark.commit import load_manifest, manifest_status

    t0 = time.perf_counter()
    dest = os.path.abspath(path)
    out = SparkPlan(dest, where, files_total=len(spark_files), kept=list(spark_files))
    local = {uri: _local(uri) for uri in spark_files}
    try:
        if where is None or not where.strip():
            out.fallback = "no predicate"
            return out
        if any(p is None for p in local.values()) or not os.path.isdir(dest):
            out.fallback = "not a local directory"
            return out
        manifest = load_manifest(dest)
        on_disk = {}
        for p in local.values():
            assert p is not None
            try:
                on_disk[os.path.relpath(p, dest)] = os.stat(p).st_size
            except OSError:
                out.fallback = f"{p} vanished while planning"
                return out
        out.manifest = manifest_status(dest, manifest, on_disk)
        try:
            expr = parse_where(where)
        except PqIndexError as e:
            out.fallback = f"predicate not understood by pqindex: {e}"
            return out
        # Planning decides files only: a small tail read (Spark's footers are a few
        # KiB) and no projection, so no offset index of a non-predicate column is read.
        known = (_manifest_discovery(dest, manifest)  # no second directory walk
                 if out.manifest == "current" and manifest is not None else None)
        with pqindex.dataset(dest, tail_bytes=PLANNING_TAIL_BYTES, discovery=known) as ds:
            disc = ds.discovery
            odd = _mismatched_partitions(spark_schema, disc) & set(expr_columns(expr))
            if odd:
                out.fallback = (
                    f"partition column(s) {', '.join(sorted(odd))} typed differently by Spark"
                )
                return out
            try:
                dplan = ds.plan([], expr)
            except PqIndexError as e:
                out.fallback = f"pqindex could not plan: {e}"
                return out
        pruned: dict[str, dict[str, str]] = {}
        for entry in dplan.files:
            fp = entry.access
            key = os.path.normpath(os.path.abspath(entry.path))
            if fp is None:
                pruned[key] = {"file": key, "by": "partition", "reason": "partition values"}
            elif fp.skipped:
                by = fp.skipped_by or ",".join(sorted({rg.decided_by for rg in fp.row_groups}))
                reason = fp.reason or "; ".join(sorted({rg.reason for rg in fp.row_groups}))
                pruned[key] = {"file": key, "by": by or "empty", "reason": reason or "no rows"}
        out.kept = [uri for uri in spark_files if local[uri] not in pruned]
        out.pruned = [pruned[p] for uri, p in local.items() if p in pruned]
        return out
    finally:
        out.plan_seconds = time.perf_counter() - t0


def _base(spark: Any, path: str | os.PathLike[str]) -> Any:
    return spark.read.parquet(os.fspath(path))


def read(
    spark: Any,
    path: str | os.PathLike[str],
    where: str | None = None,
    columns: Sequence[str] | None = None,
) -> Any:
    """``spark.read.parquet(path).where(where).select(columns)``, reading only the files
    pqindex's planner keeps (hive partitions, footer statistics, embedded file-level
    indexes); Spark's reader then skips row groups and pages inside them."""
    base = _base(spark, path)
    p = plan(os.fspath(path), where, base.inputFiles(), base.schema)
    if p.fallback or not p.pruned:
        df = base
    elif p.kept:
        df = (
            spark.read.schema(base.schema)
            .option("basePath", os.path.abspath(os.fspath(path)))
            .parquet(*p.kept)
        )
    else:
        from pyspark.sql import functions as F

        df = base.where(F.lit(False))  # no file can match: an empty result, same schema
    if where is not None and where.strip():
        df = df.where(where)
    if columns is not None:
        df = df.select(*columns)
    return df


def explain(
    spark: Any, path: str | os.PathLike[str], where: str | None = None, *, show: bool = False
) -> dict[str, Any]:
    """What ``read`` would prune for ``where`` and why (printed too with ``show``)."""
    base = _base(spark, path)
    p = plan(os.fspath(path), where, base.inputFiles(), base.schema)
    if show:
        print(p)
    return p.to_dict()
