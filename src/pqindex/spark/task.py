"""What one Spark task does with its rows: split them by partition values, write
indexed files into its staging directory, and describe them for the commit.

No Spark here: the task receives Arrow record batches and plain options.
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pqindex.errors import UserInputError
from pqindex.io.source import is_object_store_url
from pqindex.spark.commit import STAGING, job_dir
from pqindex.spark.secrets import reveal
from pqindex.write.writer import (
    AUTO,
    DEFAULT_PAGE_ROWS,
    DEFAULT_ROW_GROUP_ROWS,
    INDEX_KINDS,
    Writer,
)

__all__ = ["HIVE_NULL", "TaskOptions", "hive_dir", "parse_options", "write_task"]

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
DEFAULT_TARGET_FILE_BYTES = 256 * 1024 * 1024
# Characters Spark escapes in partition directory names (ExternalCatalogUtils).
_ESCAPED = set("\"#%'*/:=?\\\x7f{[]^") | {chr(c) for c in range(32)}


@dataclass
class TaskOptions:
    """The data source options, parsed (Spark hands them over as strings)."""

    sort_by: list[tuple[str, str]] = field(default_factory=list)
    partition_by: list[str] = field(default_factory=list)
    cluster_by: list[str] = field(default_factory=list)
    presorted: bool = False
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES
    page_rows: int = DEFAULT_PAGE_ROWS
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS
    compression: str = "zstd"
    bloom: list[str] = field(default_factory=list)
    # {kind: columns}, or "auto": write_table's default (distinct on low-cardinality columns)
    indexes: dict[str, list[str]] | str = AUTO
    bloom_scope: list[str] = field(default_factory=list)  # embedded "bloom" (empty: file)
    mode: str | None = None  # None: from Spark's overwrite flag
    job_id: str | None = None
    fail_task: int | None = None  # tests: this partition fails after writing its files
    # Object-store destinations: the store's options (credentials: never in the manifest).
    storage_options: dict[str, str] = field(default_factory=dict, repr=False)

    def info(self) -> dict[str, Any]:
        """What the manifest records about how the files were written."""
        return {
            "sort_by": [list(s) for s in self.sort_by],
            "partition_by": self.partition_by,
            "cluster_by": self.cluster_by,
            "bloom": self.bloom,
            "indexes": self.indexes,
            **({"bloom_scope": self.bloom_scope} if self.bloom_scope else {}),
            "page_rows": self.page_rows,
            "row_group_rows": self.row_group_rows,
        }


def _list(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _int(options: Mapping[str, str], key: str, default: int) -> int:
    raw = options.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UserInputError(f"option {key} must be an integer, not {raw!r}") from None
    if value <= 0:
        raise UserInputError(f"option {key} must be positive, not {value}")
    return value


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "1", "yes"):
        return True
    if raw.strip().lower() in ("false", "0", "no"):
        return False
    raise UserInputError(f"option {key} must be true or false, not {raw!r}")


def _sort(value: str | None) -> list[tuple[str, str]]:
    out = []
    for item in _list(value):
        words = item.split()
        order = "ascending"
        if len(words) == 2 and words[1].lower() in ("asc", "desc", "ascending", "descending"):
            order = "descending" if words[1].lower().startswith("desc") else "ascending"
        elif len(words) != 1:
            raise UserInputError(f"cannot read sort key {item!r} (COLUMN [asc|desc])")
        out.append((words[0], order))
    return out


def parse_options(options: Mapping[str, str]) -> TaskOptions:
    """Options as ``df.write.format("pqindex").options(...)`` gives them.

    ``sort_by`` ("a, b desc"), ``partition_by``, ``cluster_by``, ``bloom``: comma
    lists; ``indexes``: ``auto`` (the default, as ``pqindex.write_table``'s: a
    distinct index on each low-cardinality column), ``none``, or JSON
    ``{"distinct": ["col"], ...}`` (``{}``: none), and/or ``index.<kind>`` comma lists
    (which replace ``auto``); ``bloom_scope``: the embedded ``bloom`` index's scopes
    (file, row_group, page; comma list, default file); ``presorted``,
    ``target_file_bytes``, ``page_rows``,
    ``row_group_rows``, ``compression``, ``mode``, ``job_id``; for an object-store
    destination ``storage_options`` (JSON object) and/or ``storage_option.<key>``.
    """
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    indexes: dict[str, list[str]] = {}
    given = (opts.get("indexes") or "").strip()
    if given.lower() in ("auto", "none"):
        pass
    elif given:
        try:
            raw = json.loads(opts["indexes"])
        except ValueError:
            raise UserInputError('option indexes must be JSON like {"distinct": ["col"]}') from None
        if not isinstance(raw, dict):
            raise UserInputError("option indexes must be a JSON object")
        for kind, cols in raw.items():
            indexes[str(kind)] = [cols] if isinstance(cols, str) else [str(c) for c in cols]
    for kind in INDEX_KINDS:
        cols = _list(opts.get(f"index.{kind}"))
        if cols:
            indexes.setdefault(kind, [])
            indexes[kind] += [c for c in cols if c not in indexes[kind]]
    for kind in indexes:
        if kind not in INDEX_KINDS:
            raise UserInputError(f"unknown index kind {kind!r} (kinds: {', '.join(INDEX_KINDS)})")
    bloom_scope = _list(opts.get("bloom_scope"))
    if bloom_scope:
        from pqindex.write.add_indexes import bloom_scopes

        bloom_scope = list(bloom_scopes(bloom_scope))  # UserInputError for unknown scopes
    auto = not indexes and given.lower() in ("", "auto")
    mode = opts.get("mode") or None
    if mode is not None and mode not in ("error", "append", "overwrite"):
        raise UserInputError(f"option mode must be error, append or overwrite, not {mode!r}")
    fail = opts.get("pqindex.test.fail_task")
    storage: dict[str, str] = {}
    if opts.get("storage_options"):
        storage = {k: str(v) for k, v in reveal(opts["storage_options"]).items()}
    for k, v in opts.items():
        if k.startswith("storage_option."):
            storage[k[len("storage_option."):]] = v
    return TaskOptions(
        sort_by=_sort(opts.get("sort_by")),
        partition_by=_list(opts.get("partition_by")),
        cluster_by=_list(opts.get("cluster_by")),
        presorted=_bool(opts, "presorted", False),
        target_file_bytes=_int(opts, "target_file_bytes", DEFAULT_TARGET_FILE_BYTES),
        page_rows=_int(opts, "page_rows", DEFAULT_PAGE_ROWS),
        row_group_rows=_int(opts, "row_group_rows", DEFAULT_ROW_GROUP_ROWS),
        compression=opts.get("compression") or "zstd",
        bloom=_list(opts.get("bloom")),
        indexes=AUTO if auto else indexes,
        bloom_scope=bloom_scope,
        mode=mode,
        job_id=opts.get("job_id") or None,
        fail_task=int(fail) if fail not in (None, "") else None,
        storage_options=storage,
    )


def _hive_value(value: Any) -> str:
    if value is None:
        return HIVE_NULL
    if isinstance(value, bool):
        s = "true" if value else "false"
    elif isinstance(value, datetime.datetime):
        s = value.isoformat(sep=" ")
    else:
        s = str(value)
    if s == "":
        return HIVE_NULL  # Spark writes empty strings as the null partition too
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in s)


def hive_dir(keys: Iterable[str], values: Iterable[Any]) -> str:
    """``k1=v1/k2=v2`` with Spark's escaping."""
    return "/".join(
        f"{_hive_value(k) if k else k}={_hive_value(v)}" for k, v in zip(keys, values, strict=True)
    )


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (datetime.date, datetime.datetime, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def key_ranges(table: pa.Table, columns: Iterable[str]) -> dict[str, list[Any]]:
    """Per column, [min, max] of ``table``'s values (nulls and NaN left out, as in
    Parquet statistics; all null: [None, None]; none known for all-NaN or types
    without an order)."""
    out: dict[str, list[Any]] = {}
    for name in columns:
        if name not in table.column_names:
            continue
        try:
            mm = pc.min_max(table.column(name))
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            continue
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if isinstance(lo, float) and lo != lo:  # all NaN: Parquet writes no bounds
            continue
        out[name] = [_jsonable(lo), _jsonable(hi)]
    return out


class _RangeWriter(Writer):
    """pqindex's Writer that also tells each file's key range, from the rows it hands
    to the file (no read of the file back: on an object store, a GET per file)."""

    def __init__(self, path: str, *, key_columns: list[str], **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self.key_columns = key_columns
        self.key_ranges: list[dict[str, list[Any]]] = []  # by file, as self.results

    def file_rows(self, table: pa.Table) -> None:
        self.key_ranges.append(key_ranges(table, self.key_columns) if self.key_columns else {})


def _split(table: pa.Table, keys: list[str]) -> Iterator[tuple[tuple[Any, ...], pa.Table]]:
    """Rows by partition values, in their order; the partition columns dropped."""
    data = table.drop_columns(keys)
    codes = np.zeros(table.num_rows, dtype=np.int64)
    uniques = []
    for k in keys:
        enc = pc.dictionary_encode(table.column(k).combine_chunks())
        idx = enc.indices.fill_null(len(enc.dictionary)).to_numpy(zero_copy_only=False)
        values = [*enc.dictionary.to_pylist(), None]
        codes = codes * len(values) + idx.astype(np.int64)
        uniques.append(values)
    if len(codes) and (codes == codes[0]).all():
        firsts = [0]
        groups = {int(codes[0]): None}
    else:
        found, firsts_arr = np.unique(codes, return_index=True)
        order = np.argsort(firsts_arr)
        firsts = [int(firsts_arr[i]) for i in order]
        groups = {int(found[i]): None for i in order}
    for code, first in zip(groups, firsts, strict=True):
        vals = tuple(table.column(k)[first].as_py() for k in keys)
        if len(groups) == 1:
            yield vals, data
        else:
            yield vals, data.take(pa.array(np.flatnonzero(codes == code)))


def write_task(
    batches: Iterable[pa.RecordBatch],
    *,
    dest: str,
    job_id: str,
    partition_id: int,
    attempt: int,
    options: TaskOptions,
) -> tuple[str, list[dict[str, Any]]]:
    """Write this task's rows into its staging directory; (task dir, file entries)."""
    remote = is_object_store_url(dest)
    if remote:
        task_dir = f"{dest}/{STAGING}/{job_id}/task-{partition_id:05d}-{attempt}"
    else:
        task_dir = os.path.join(job_dir(dest, job_id), f"task-{partition_id:05d}-{attempt}")
    prefix = f"part-{partition_id:05d}-{job_id[:8]}"
    writers: dict[tuple[Any, ...], tuple[str, _RangeWriter]] = {}
    key_cols = [c for c, _ in options.sort_by] + options.cluster_by
    file_opts: dict[str, Any] = {
        "sort_by": options.sort_by or None,
        "presorted": options.presorted,
        "row_group_rows": options.row_group_rows,
        "page_rows": options.page_rows,
        "compression": options.compression,
        "bloom": options.bloom or None,
        "indexes": options.indexes if options.indexes == AUTO else (options.indexes or None),
        "bloom_scope": options.bloom_scope or None,
    }
    if remote:
        file_opts["storage_options"] = options.storage_options
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            table = pa.Table.from_batches([batch])
            parts = (
                _split(table, options.partition_by) if options.partition_by else iter([((), table)])
            )
            for values, rows in parts:
                if values not in writers:
                    rel = hive_dir(options.partition_by, values)
                    w = _RangeWriter(
                        (f"{task_dir}/{rel}" if remote else os.path.join(task_dir, rel))
                        if rel else task_dir,
                        key_columns=key_cols,
                        target_file_bytes=options.target_file_bytes,
                        prefix=prefix,
                        **file_opts,
                    )
                    writers[values] = (rel, w)
                writers[values][1].write(rows)
        entries = []
        for rel, w in writers.values():
            for r, key_range in zip(w.close(), w.key_ranges, strict=True):
                name = r.path.rsplit("/", 1)[-1] if remote else os.path.basename(r.path)
                entries.append(
                    {
                        "path": (f"{rel}/{name}" if remote else os.path.join(rel, name))
                        if rel else name,
                        "staged": r.path,
                        "rows": r.rows,
                        "bytes": r.bytes,
                        "row_groups": r.row_groups,
                        "index_bytes": r.index_bytes,
                        "region_bytes": r.region_bytes,
                        "partition": dict(
                            zip(options.partition_by, _partition_strs(rel), strict=True)
                        )
                        if rel
                        else {},
                        "key_range": key_range,
                        "job": job_id,
                        # What "auto" chose for this file (the options say it otherwise).
                        **({"indexes": r.indexes}
                           if options.indexes == AUTO and r.indexes else {}),
                    }
                )
        if options.fail_task is not None and options.fail_task == partition_id:
            raise RuntimeError(f"pqindex.test.fail_task: task {partition_id} fails after writing")
        return task_dir, entries
    except BaseException:
        if remote:
            _remove_remote(task_dir, options.storage_options)
        else:
            shutil.rmtree(task_dir, ignore_errors=True)
        raise


def _remove_remote(prefix: str, storage_options: Mapping[str, Any]) -> None:
    """Delete a failed task's objects (best effort: the job's abort removes staging too)."""
    import contextlib

    from pqindex.spark.remote_commit import _each, _key

    with contextlib.suppress(Exception):
        from pqindex.io.listing import list_objects

        listed = list_objects(prefix + "/", storage_options)
        _each(prefix, storage_options, "delete",
              [(_key(u, storage_options), "") for u, _ in listed])


def _partition_strs(rel: str) -> list[str]:
    return [p.split("=", 1)[1] for p in rel.split("/")]
