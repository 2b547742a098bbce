"""pqindex on Spark: write indexed datasets with Spark, and let Spark queries use them.

Importing this package needs neither pyspark nor Java; each function imports
pyspark when called. Works with classic and Spark Connect sessions. Before a
job runs pqindex on Spark's Python workers, a probe checks that they can import
it; when they cannot, a zip of this package is shipped to them, or, when their
interpreter lacks pqindex's dependencies, a ``SparkWorkerError`` says what to
set (``PYSPARK_PYTHON``, ``spark.archives``). See :mod:`pqindex.spark.workers`.

* :func:`write` — distribute, sort or Z-order, write through the ``"pqindex"``
  data source with a staging/commit protocol and a manifest;
* :func:`register` — ``df.write.format("pqindex")`` and ``spark.read.format("pqindex")``
  in a session, with Spark's filter pushdown on: DataFrame filters and SQL prune;
* :func:`frame` / :func:`table` — a dataset as a DataFrame / a Spark SQL temporary view
  read through pqindex, whose filters and SQL prune;
* :func:`read` / :func:`explain` — plan on the driver; read the kept pages through
  the ``"pqindex"`` data source's reader, or the kept files with Spark's
  (``engine="auto"|"native"|"pqindex"``);
* :func:`add_indexes` — index an existing lake as a Spark job;
* :func:`build_key_index` — the lake-wide key index of an existing lake, as a Spark job.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["add_indexes", "build_key_index", "explain", "frame", "read", "register", "table",
           "write"]


def register(spark: Any) -> None:
    """Register the ``"pqindex"`` data source in ``spark``'s session (after the worker check)
    and turn on Spark's filter pushdown to it (a ``RuntimeWarning`` where Spark has none)."""
    from pqindex.spark.pipeline import register as _register

    _register(spark)


def frame(spark: Any, path: str | os.PathLike[str], **kwargs: Any) -> Any:
    """See :func:`pqindex.spark.reading.frame`."""
    from pqindex.spark.reading import frame as _frame

    return _frame(spark, path, **kwargs)


def table(spark: Any, name: str, path: str | os.PathLike[str], **kwargs: Any) -> Any:
    """See :func:`pqindex.spark.reading.table`."""
    from pqindex.spark.reading import table as _table

    return _table(spark, name, path, **kwargs)


def write(df: Any, path: str | os.PathLike[str], **kwargs: Any) -> dict[str, Any]:
    """See :func:`pqindex.spark.pipeline.write`."""
    from pqindex.spark.pipeline import write as _write

    return _write(df, path, **kwargs)


def read(
    spark: Any,
    path: str | os.PathLike[str],
    where: str | None = None,
    columns: Sequence[str] | None = None,
    engine: str = "auto",
    **kwargs: Any,
) -> Any:
    """See :func:`pqindex.spark.reading.read`."""
    from pqindex.spark.reading import read as _read

    return _read(spark, path, where, columns, engine, **kwargs)


def explain(
    spark: Any, path: str | os.PathLike[str], where: str | None = None, **kwargs: Any
) -> dict[str, Any]:
    """See :func:`pqindex.spark.reading.explain`."""
    from pqindex.spark.reading import explain as _explain

    return _explain(spark, path, where, **kwargs)


def add_indexes(
    spark: Any,
    path: str | os.PathLike[str] | list[str],
    *,
    distinct: str | Iterable[str] = (),
    bloom: str | Iterable[str] = (),
    zone_maps: str | Iterable[str] = (),
    hll: str | Iterable[str] = (),
    **kwargs: Any,
) -> dict[str, Any]:
    """See :func:`pqindex.spark.indexing.add_indexes`."""
    from pqindex.spark.indexing import add_indexes as _add

    return _add(spark, path, distinct=distinct, bloom=bloom, zone_maps=zone_maps, hll=hll, **kwargs)


def build_key_index(spark: Any, path: str | os.PathLike[str], columns: Sequence[str],
                    **kwargs: Any) -> dict[str, Any]:
    """See :func:`pqindex.spark.key_index.build_key_index`."""
    from pqindex.spark.key_index import build_key_index as _build

    return _build(spark, path, columns, **kwargs)
