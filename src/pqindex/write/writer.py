"""Writing indexed Parquet: sorted data, a page index with minimal bounds, Bloom
filters and embedded indexes, in files every Parquet reader reads unchanged.

pyarrow writes the data pages (and its page index and Bloom filters); then the
index tail — everything after the last data page — is rebuilt by
``write.tail.rewrite``: string bounds in the ColumnIndex truncated to short
separators, the embedded index region added, the footer re-encoded. The data
pages are never touched by the second step.

Defaults (the page sizes measured by ``bench/page_size_sweep.py``: docs/benchmarks.md,
"Writer defaults: page-size sweep"):

* ``page_rows=20_000`` (parquet-java's and arrow-rs's page row limit too): the knee
  of the sweep. Longer pages read 1.5-3.8x the bytes per point lookup and are
  1.3-1.8x slower; shorter pages save lookup bytes but slow scans (x1.2 at 10,000
  rows, x1.3 at 5,000) and grow the page index past the reader's 64 KiB footer
  read, which costs a lookup up to two more requests. zstd loses at most ~1% even
  at 1,000-row pages, so compression does not decide it.
* ``page_bytes=None``: pyarrow's 1 MiB ``data_page_size``, which also bounds the
  pages of wide columns (~10,000 rows of 100-byte strings). A 256 KiB cap reads 43%
  fewer bytes in all-column lookups but more than doubles the page index (the same
  extra requests); pass it for wide rows read from a local disk.
* ``row_group_rows=1_000_000``.
* ``dictionary="auto"``: dictionary encoding only for columns whose distinct
  values are at most 10% of a row group's rows and whose dictionary would stay
  under 256 KiB — a large dictionary page is read with every page lookup.
* ``compression="zstd"``.
* Decimals of precision at most 9 are stored as INT32, at most 18 as INT64, wider
  ones as FIXED_LEN_BYTE_ARRAY (the spec's choice and parquet-java's): every reader
  decodes integers much faster than big-endian byte arrays.
* ``page_checksums=True``: each page header holds the CRC32 of the page's stored
  bytes, as parquet-java writes by default (``format.checksum``; ``pqindex check``
  and scans with ``verify_checksums=True`` check them). The tail rewrite and the
  footer splice never move a page, so the CRCs stay valid.
* ``indexes="auto"``: an embedded "distinct" index (value sets per file, row
  group and page) on each column with at most 1,024 distinct values in every row
  group, within a budget of 2% of the file's data bytes (``write.auto_indexes``
  has the rule). An equality or ``IN`` on such a column then reads only the pages
  holding the value. ``indexes=None`` (or ``{}``) embeds nothing; a mapping embeds
  exactly what it names, and no auto index.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pqindex.errors import PqIndexError, UserInputError, public_api
from pqindex.format.file import ParquetFile
from pqindex.format.schema import BoundaryOrder
from pqindex.format.structs import ColumnIndex
from pqindex.format.views import computable, computable_table
from pqindex.indexes import REGISTRY
from pqindex.write.auto_indexes import AUTO

__all__ = ["AUTO", "IndexSpec", "WriteResult", "Writer", "normalize_sort", "to_table",
           "write_table"]

DEFAULT_PAGE_ROWS = 20_000  # measured: docs/benchmarks.md, "Writer defaults: page-size sweep"
DEFAULT_ROW_GROUP_ROWS = 1_000_000
DICTIONARY_MAX_RATIO = 0.10
DICTIONARY_MAX_BYTES = 256 * 1024
SAMPLE_ROWS = 16_384
# The embedded index kinds: the registry's (importing pqindex.indexes registers them).
INDEX_KINDS = tuple(REGISTRY)
DEFAULT_TARGET_FILE_BYTES = 512 * 1024 * 1024
# ``indexes=``: {kind: columns}, "auto" (the default: see write.auto_indexes) or None.
IndexSpec = Mapping[str, str | Sequence[str]] | str | None


@dataclass
class WriteResult:
    """What one written file holds."""

    path: str
    rows: int
    row_groups: int
    bytes: int
    index_bytes: int  # ColumnIndex + OffsetIndex + Bloom filters + embedded region
    region_bytes: int
    seconds: float
    boundary_orders: dict[str, str] = field(default_factory=dict)
    dictionary_columns: list[str] = field(default_factory=list)
    indexes: dict[str, list[str]] = field(default_factory=dict)  # embedded: {kind: columns}


def to_table(data: Any) -> pa.Table:
    """An Arrow table from a table, record batch(es), a reader or a pandas frame."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if hasattr(data, "__dataframe__") or type(data).__name__ == "DataFrame":
        try:
            return pa.Table.from_pandas(data, preserve_index=False)
        except (TypeError, pa.ArrowException) as e:
            raise UserInputError(f"cannot convert the data frame to Arrow: {e}") from None
    if isinstance(data, Iterable):
        batches = list(data)
        if batches and all(isinstance(b, pa.RecordBatch) for b in batches):
            return pa.Table.from_batches(batches)
    raise UserInputError(
        f"cannot write {type(data).__name__}: give a pyarrow Table, RecordBatch(es) or a pandas DataFrame"
    )


def normalize_sort(
    sort_by: str | Sequence[str | tuple[str, str]] | None, schema: pa.Schema
) -> list[tuple[str, str]]:
    """``[(column, "ascending"|"descending")]`` from the forms users write."""
    if sort_by is None:
        return []
    items = [sort_by] if isinstance(sort_by, str) else list(sort_by)
    out = []
    for item in items:
        if isinstance(item, str):
            name, order = item, "ascending"
        else:
            name, order = item[0], item[1]
        if order not in ("ascending", "descending"):
            raise UserInputError(f"sort order of {name!r} must be 'ascending' or 'descending'")
        if schema.get_field_index(name) < 0:
            raise UserInputError(f"cannot sort by {name!r}: no such column ({', '.join(schema.names)})")
        out.append((name, order))
    return out


def _auto_dictionary(table: pa.Table, row_group_rows: int) -> list[str]:
    """Columns worth dictionary-encoding (see the module docstring)."""
    out = []
    for f in table.schema:
        t = f.type
        if not (
            pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_binary(t)
            or pa.types.is_large_binary(t)
            or pa.types.is_integer(t)
            or pa.types.is_date(t)
            or pa.types.is_dictionary(t)
            or pa.types.is_decimal(t)
        ):
            continue
        col = computable(table.column(f.name))  # take has no kernel for view types
        if pa.types.is_dictionary(t):
            out.append(f.name)
            continue
        # A strided sample: counting distinct values of every row costs more than the
        # write; runs of equal values (sorted data) still show their cardinality.
        step = max(1, table.num_rows // SAMPLE_ROWS)
        sample = col.take(pa.array(np.arange(0, table.num_rows, step, dtype=np.int64)))
        distinct = pc.count_distinct(sample).as_py()
        if distinct > DICTIONARY_MAX_RATIO * len(sample):
            continue
        width = sample.nbytes / max(1, len(sample))
        if distinct * width > DICTIONARY_MAX_BYTES:
            continue
        out.append(f.name)
    return out


def _bloom_options(
    bloom: Sequence[str] | Mapping[str, Mapping[str, Any]] | None, table: pa.Table
) -> dict[str, dict[str, Any]] | None:
    if not bloom:
        return None
    items: Mapping[str, Mapping[str, Any]] = (
        {name: {} for name in bloom} if not isinstance(bloom, Mapping) else bloom
    )
    out = {}
    for name, opts in items.items():
        if table.schema.get_field_index(name) < 0:
            raise UserInputError(f"no column {name!r} for a Bloom filter")
        ndv = int(opts.get("ndv") or max(1, pc.count_distinct(table.column(name)).as_py()))
        out[name] = {"ndv": ndv, "fpp": float(opts.get("fpp", 0.01))}
    return out


def index_kinds(indexes: IndexSpec) -> dict[str, list[str]]:
    """``{kind: columns}`` checked against the registry (a kind registered later,
    by a plugin, is accepted as well); a single column may be a string."""
    out: dict[str, list[str]] = {}
    if isinstance(indexes, str):
        raise UserInputError(f"indexes must be 'auto', None or {{kind: columns}}, not {indexes!r}")
    for kind, cols in (indexes or {}).items():
        if kind not in REGISTRY:
            raise UserInputError(f"unknown index kind {kind!r} (kinds: {', '.join(REGISTRY)})")
        out[kind] = [cols] if isinstance(cols, str) else list(cols)
    return out


def _indexes(indexes: IndexSpec) -> dict[str, list[str]] | str:
    """``index_kinds``, or ``AUTO`` for the auto default."""
    return AUTO if indexes == AUTO else index_kinds(indexes)


def _check_presorted(table: pa.Table, sort: list[tuple[str, str]], path: str) -> None:
    """Data given as presorted must be in the first sort key's order (nulls at one end).

    Checked on the values, before anything is written: page bounds alone can't see
    rows out of order inside a page.
    """
    name, order = sort[0]
    col = computable(table.column(name))  # no kernels for view types
    valid = pc.is_valid(col)
    if col.null_count:
        flags = np.asarray(valid.to_numpy(zero_copy_only=False), dtype=bool)
        changes = int(np.count_nonzero(flags[1:] != flags[:-1]))
        if changes > 1:
            raise UserInputError(
                f"data given as presorted by {name} has nulls in the middle", path=path,
                column=name,
            )
        col = col.filter(valid)
    if len(col) < 2:
        return
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    a, b = col.slice(0, len(col) - 1), col.slice(1)
    ok = pc.greater_equal(b, a) if order == "ascending" else pc.less_equal(b, a)
    if not pc.all(ok).as_py():
        bad = int(np.argmin(np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)))
        raise UserInputError(
            f"data given as presorted by {name} {order} is not: row {bad + 1} is out of order",
            path=path,
            column=name,
        )


def _tmp_name(path: str) -> str:
    d, name = os.path.split(os.path.abspath(path))
    return os.path.join(d, f".{name}.pqindex-write-{secrets.token_hex(4)}")


@public_api
def write_table(
    data: Any,
    path: str | os.PathLike[str],
    *,
    sort_by: str | Sequence[str | tuple[str, str]] | None = None,
    presorted: bool = False,
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
    page_rows: int = DEFAULT_PAGE_ROWS,
    page_bytes: int | None = None,
    compression: str = "zstd",
    dictionary: str | bool | Sequence[str] = "auto",
    bloom: Sequence[str] | Mapping[str, Mapping[str, Any]] | None = None,
    indexes: IndexSpec = AUTO,
    truncate: int | None = 64,
    metadata: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    bloom_scope: str | Iterable[str] | None = None,
    page_checksums: bool = True,
) -> WriteResult:
    """Write ``data`` as one indexed Parquet file at ``path`` (atomically).

    ``path`` may be an object-store URL (``s3://``, ``gs://``, ``az://``, ...;
    ``storage_options`` configure the store): the file then streams to the store
    as a multipart upload that completes only once the whole file is sent
    (``write.remote``), with no local copy.

    ``sort_by`` names columns (or ``(column, "descending")``); the data is sorted
    unless ``presorted``, and SortingColumn metadata is written either way; the
    boundary order of the first sort column is checked on read-back. ``bloom``
    lists columns (or maps them to ``{"ndv": …, "fpp": …}``) for Parquet Bloom
    filters; ``indexes`` maps embedded index kinds (``distinct``, ``bloom``,
    ``zone_maps``, ``hll``) to columns; the default ``"auto"`` embeds a distinct
    index on each low-cardinality column (module docstring, ``write.auto_indexes``);
    None or ``{}`` embeds none. ``bloom_scope``: the scopes of the embedded
    ``bloom`` index's filters ("file", "row_group", "page", as ``add_indexes``;
    None: one filter per file). ``truncate`` caps ColumnIndex string bounds (None
    keeps pyarrow's full bounds). ``page_checksums``: a CRC32 in every page header.
    """
    t0 = time.perf_counter()
    from pqindex.write.remote import is_remote

    directory = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not is_remote(os.fspath(path)) and not os.path.isdir(directory):
        raise UserInputError(f"the directory {directory} does not exist", path=os.fspath(path))
    table = to_table(data)
    if row_group_rows <= 0 or page_rows <= 0:
        raise UserInputError("row_group_rows and page_rows must be positive")
    sort = normalize_sort(sort_by, table.schema)
    if sort and not presorted:
        # Sorted as large types where the table has views (pyarrow has no sort or take
        # kernel for them), then cast back: the file keeps the table's types.
        done = computable_table(table).sort_by(sort)
        table = done if done.schema.types == table.schema.types else done.cast(table.schema)
    elif sort:
        _check_presorted(table, sort, os.fspath(path))
    kinds = _indexes(indexes)
    kind_options = _kind_options(bloom_scope)
    if dictionary == "auto":
        dict_cols: list[str] | bool = _auto_dictionary(table, row_group_rows)
    elif isinstance(dictionary, bool):
        dict_cols = dictionary
    else:
        dict_cols = list(dictionary)
    sorting = [
        pq.SortingColumn(table.schema.get_field_index(name), descending=order == "descending")
        for name, order in sort
    ]
    target = os.fspath(path)
    writer_options: dict[str, Any] = dict(
        max_rows_per_page=page_rows,
        data_page_size=page_bytes,
        compression=compression,
        use_dictionary=dict_cols,
        write_page_index=True,
        write_statistics=True,
        write_page_checksum=page_checksums,
        # Decimals of precision <= 9 as INT32 and <= 18 as INT64 (as parquet-java
        # writes them): readers decode integers several times faster than
        # FIXED_LEN_BYTE_ARRAY (pyarrow: 37-61 ms per million values per column).
        store_decimal_as_integer=True,
        sorting_columns=sorting or None,
        bloom_filter_options=_bloom_options(bloom, table),
    )
    if is_remote(target):
        result = _write_remote(table, target, writer_options, row_group_rows, kinds, truncate,
                               metadata, sort, storage_options, kind_options)
    else:
        tmp = _tmp_name(target)
        try:
            pq.write_table(table, tmp, row_group_size=row_group_rows, **writer_options)
            result = finish_file(
                tmp, target, table=table, indexes=kinds, truncate=truncate, metadata=metadata,
                sort=sort, kind_options=kind_options,
            )
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    result.seconds = time.perf_counter() - t0
    result.dictionary_columns = (
        list(dict_cols) if isinstance(dict_cols, list) else (table.schema.names if dict_cols else [])
    )
    return result


def _kind_options(bloom_scope: str | Iterable[str] | None
                  ) -> dict[str, dict[str, Any]] | None:
    """Options of the embedded index kinds: the Bloom filters' scopes (None: the kind's
    own default, one filter per file)."""
    if bloom_scope is None:
        return None
    from pqindex.write.add_indexes import bloom_scopes  # it imports this module

    return {"bloom": {"scopes": list(bloom_scopes(bloom_scope))}}


def _write_remote(
    table: pa.Table,
    url: str,
    writer_options: Mapping[str, Any],
    row_group_rows: int,
    kinds: Mapping[str, Sequence[str]] | str,
    truncate: int | None,
    metadata: Mapping[str, str] | None,
    sort: list[tuple[str, str]],
    storage_options: Mapping[str, Any] | None,
    kind_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> WriteResult:
    from pqindex.write.remote import write_parquet_remote

    orders: dict[str, str] = {}
    written: dict[str, list[str]] = {}
    groups = [0]

    def tail_for(pf: ParquetFile) -> Any:
        tail, found, embedded = _tail(pf, url, table=table, indexes=kinds, truncate=truncate,
                                      metadata=metadata, sort=sort, kind_options=kind_options)
        orders.update(found)
        written.update(embedded)
        groups[0] = pf.num_row_groups
        return tail

    sent = write_parquet_remote(table, url, writer_options=writer_options,
                                row_group_rows=row_group_rows, tail_for=tail_for,
                                storage_options=storage_options)
    return _result(url, table.num_rows, groups[0], sent.result, orders, written)


def finish_file(
    written: str,
    target: str,
    *,
    table: pa.Table | None,
    indexes: Mapping[str, Sequence[str]] | str,
    truncate: int | None,
    metadata: Mapping[str, str] | None = None,
    sort: list[tuple[str, str]] | None = None,
    kind_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> WriteResult:
    """Rebuild ``written``'s index tail into ``target``: truncated bounds, embedded region.

    With ``sort``, the first key's boundary order is checked first (read-back check).
    ``indexes="auto"`` chooses the columns from ``table`` (none without it).
    """
    from pqindex.write.tail import rewrite

    with ParquetFile.open(written) as pf:
        tail, orders, embedded = _tail(pf, target, table=table, indexes=indexes,
                                       truncate=truncate, metadata=metadata, sort=sort,
                                       kind_options=kind_options)
        rows, row_groups = pf.num_rows, pf.num_row_groups
        done = rewrite(written, tail, target)
    return _result(target, rows, row_groups, done, orders, embedded)


def _result(target: str, rows: int, row_groups: int, done: Any, orders: dict[str, str],
            embedded: dict[str, list[str]]) -> WriteResult:
    return WriteResult(
        path=target,
        rows=rows,
        row_groups=row_groups,
        bytes=done.size,
        index_bytes=done.footer_offset - done.data_end,
        region_bytes=done.region[1] if done.region else 0,
        seconds=0.0,
        boundary_orders=orders,
        indexes=embedded if done.region else {},
    )


def _tail(
    pf: ParquetFile,
    target: str,
    *,
    table: pa.Table | None,
    indexes: Mapping[str, Sequence[str]] | str,
    truncate: int | None,
    metadata: Mapping[str, str] | None,
    sort: list[tuple[str, str]] | None,
    kind_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[Any, dict[str, str], dict[str, list[str]]]:
    """The new index tail of the file pyarrow wrote, the boundary orders it has and
    the embedded indexes (``{kind: columns}``) it holds."""
    from pqindex.format.truncate import truncate_column_index
    from pqindex.indexes.build import build_region
    from pqindex.write.tail import Tail

    if sort:
        _check_order(pf, sort, target)
    cis: dict[tuple[int, int], ColumnIndex | None] = {}
    if truncate:
        for rg in range(pf.num_row_groups):
            for leaf in pf.schema.leaves:
                ci = pf.column_index(rg, leaf.index)
                if ci is not None:
                    cis[(rg, leaf.index)] = truncate_column_index(ci, leaf, cap=truncate)
    try:
        if isinstance(indexes, str):  # AUTO
            region, embedded = _auto_region(pf, table)
        else:
            region = build_region(pf, table, indexes, kind_options) if indexes else None
            embedded = {k: list(v) for k, v in indexes.items() if v}
    except PqIndexError as e:
        raise e.with_path(target) from None
    tail = Tail(column_indexes=cis, region=region, key_value=dict(metadata or {}))
    orders = {}
    for leaf in pf.schema.leaves:
        ci = cis.get((0, leaf.index)) or (
            pf.column_index(0, leaf.index) if pf.num_row_groups else None
        )
        if ci is not None and ci.boundary_order is not None:
            orders[leaf.name] = BoundaryOrder(ci.boundary_order).name
    return tail, orders, embedded


def _auto_region(pf: ParquetFile, table: pa.Table | None
                 ) -> tuple[bytes | None, dict[str, list[str]]]:
    """The region of the auto indexes (``write.auto_indexes``) and what it covers."""
    from pqindex.indexes.build import place_blobs
    from pqindex.indexes.region import encode_region
    from pqindex.write.auto_indexes import auto_blobs

    if table is None:
        return None, {}
    blobs, embedded = auto_blobs(pf, table)
    return (encode_region(place_blobs(blobs)) if blobs else None), embedded


def _check_order(pf: ParquetFile, sort: list[tuple[str, str]], target: str) -> None:
    """Read-back check: every row group's ColumnIndex of the first sort key must be in
    the promised order. A column whose page bounds are all equal reads as ASCENDING
    whichever order was asked, so only a contradicting order is an error."""
    name, order = sort[0]
    leaf = pf.schema.leaf(name)
    if leaf is None:
        return
    want = BoundaryOrder.ASCENDING if order == "ascending" else BoundaryOrder.DESCENDING
    for rg in range(pf.num_row_groups):
        ci = pf.column_index(rg, leaf.index)
        if ci is None or ci.boundary_order is None or ci.boundary_order == want:
            continue
        distinct = set(ci.min_values or []) | set(ci.max_values or [])
        if ci.boundary_order == BoundaryOrder.ASCENDING and len(distinct) <= 1:
            continue
        raise PqIndexError(
            f"data sorted by {name} {order} reads back as "
            f"{BoundaryOrder(ci.boundary_order).name} in row group {rg}",
            path=target,
            row_group=rg,
            column=name,
        )


class Writer:
    """Streaming writer: batches in, indexed files out, rolling over at a target size.

    With a directory ``path`` files are named ``part-00000.parquet``, … and a new
    file starts once the buffered Arrow data reaches ``target_file_bytes``
    (measured in memory before compression; 512 MiB by default). A ``.parquet``
    path writes one file: reaching ``target_file_bytes`` (when given) is an error.
    With ``sort_by`` each file's rows are sorted before writing (so a file is
    buffered whole), unless ``presorted``. ``path`` may be an object-store URL
    (pass ``storage_options=``): each file streams to the store. The other
    ``options`` are ``write_table``'s, with its defaults (``indexes="auto"``: each
    file chooses its own low-cardinality columns).
    """

    @public_api
    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        target_file_bytes: int | None = None,
        prefix: str = "part",
        **options: Any,
    ) -> None:
        self.path = os.fspath(path)
        self.target_file_bytes = target_file_bytes or DEFAULT_TARGET_FILE_BYTES
        self.prefix = prefix
        self.options = options
        self.results: list[WriteResult] = []
        self._batches: list[pa.RecordBatch] = []
        self._buffered = 0
        self._closed = False
        self._directory = not self.path.endswith(".parquet")
        self._remote = "://" in self.path and not self.path.startswith("file://")
        if self._directory and not self._remote:
            os.makedirs(self.path, exist_ok=True)

    @public_api
    def write(self, data: Any) -> None:
        if self._closed:
            raise UserInputError("the writer is closed")
        table = to_table(data)
        for b in table.to_batches():
            self._batches.append(b)
            self._buffered += b.nbytes
            if self._buffered >= self.target_file_bytes:
                if not self._directory:
                    raise UserInputError(
                        f"{self._buffered:,} bytes buffered for one file, over target_file_bytes "
                        f"{self.target_file_bytes:,}: a single-file Writer cannot roll over; "
                        "give a directory path",
                        path=self.path,
                    )
                self._flush()

    def _next_path(self) -> str:
        if not self._directory:
            if self.results:
                raise UserInputError(
                    "a single-file Writer cannot roll over; give a directory path"
                )
            return self.path
        name = f"{self.prefix}-{len(self.results):05d}.parquet"
        if self._remote:  # an object-store prefix: no directory to create
            return f"{self.path.rstrip('/')}/{name}"
        return os.path.join(self.path, name)

    def _flush(self) -> None:
        if not self._batches:
            return
        table = pa.Table.from_batches(self._batches)
        self._batches = []
        self._buffered = 0
        self.file_rows(table)
        self.results.append(write_table(table, self._next_path(), **self.options))

    def file_rows(self, table: pa.Table) -> None:
        """Called with the rows of each file just before it is written; a subclass
        may look at them (the Spark pipeline takes each file's key range here)."""

    @public_api
    def close(self) -> list[WriteResult]:
        if not self._closed:
            self._flush()
            self._closed = True
        return self.results

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self._batches = []
            self._closed = True
