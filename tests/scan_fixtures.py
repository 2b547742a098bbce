"""File builders for the scan tests: pyarrow layout variants, hive trees, the I/O file.

``make_scan_table`` extends the shared table of ``writers.make_table`` with the
column kinds pruning gets wrong most often (unsigned integers above the signed
range, float32 with NaN and both zeros, runs of nulls long enough to fill whole
pages, naive timestamps) and puts its rows in ascending, descending or shuffled
``id`` order. ``SCAN_VARIANTS`` lists the pyarrow layouts the differential tests
run against; together they cover both data page versions, dictionary on and off,
tiny (10-row) and large pages, a file without a page index and every codec.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import writers

SCAN_ROWS = 2_000
SCAN_ROW_GROUP_ROWS = 700  # 3 row groups


def make_scan_table(num_rows: int = SCAN_ROWS, order: str = "asc") -> pa.Table:
    """``writers.make_table`` plus edge-case columns, rows in ``order`` of ``id``."""
    base = writers.make_table(num_rows)
    rng = np.random.default_rng(99)
    i = np.arange(num_rows)
    u32 = (2**31 + (i * 2_654_435_761) % 2**31).astype(np.uint64)
    u32[i % 5 == 0] = i[i % 5 == 0]  # small values too: signed order would put them last
    u64 = (np.uint64(2**63) + (i * 40_503).astype(np.uint64)).astype(np.uint64)
    u64[i % 4 == 1] = (i[i % 4 == 1] * 3).astype(np.uint64)
    f32 = rng.normal(0, 4, num_rows).astype(np.float32)
    f32[i % 17 == 2] = np.nan
    f32[i % 23 == 4] = 0.0
    f32[i % 29 == 6] = -0.0
    f32[(i >= 300) & (i < 330)] = np.nan  # whole NaN pages when pages are 10 rows
    f32_mask = (i % 19 == 8) | ((i >= 600) & (i < 620))  # and whole null pages
    name_mask = ((i >= 100) & (i < 140)) | (i % 31 == 0)
    names = [f"{'abcxyz'[k % 6]}{k % 37:02d}-{k % 5}" for k in range(num_rows)]
    i16_mask = ((i >= 500) & (i < 560)) | (i % 9 == 0)
    t0 = np.datetime64("2023-05-06T07:08:09.123", "ms")
    ts_ms = t0 + (i * 86_399_999 // 7).astype("timedelta64[ms]")
    extra = {
        "u32": pa.array(u32.astype(np.uint32), pa.uint32()),
        "u64": pa.array(u64, pa.uint64(), mask=i % 13 == 0),
        "f32": pa.array(f32, pa.float32(), mask=f32_mask),
        "name": pa.array(names, pa.string(), mask=name_mask),
        "i16": pa.array((i % 200 - 100).astype(np.int16), pa.int16(), mask=i16_mask),
        "ts_naive": pa.array(ts_ms, pa.timestamp("ms")),
        # NULL in the whole first row group (ascending order): no bounds at all there
        "late": pa.array(i % 50, pa.int32(), mask=i < SCAN_ROW_GROUP_ROWS),
        "blob": pa.array([bytes([k % 7 * 40, 255, k % 256]) + b"z" * (k % 3)
                          for k in range(num_rows)], pa.binary()),
    }
    table = base
    for k, v in extra.items():
        table = table.append_column(k, v)
    if order == "asc":
        return table
    if order == "desc":
        return table.take(pa.array(np.arange(num_rows - 1, -1, -1)))
    if order == "shuffled":
        return table.take(pa.array(np.random.default_rng(5).permutation(num_rows)))
    raise ValueError(order)


# name -> (row order, pq.write_table keyword arguments)
SCAN_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "asc_tiny_v1_dict_none": ("asc", {
        "max_rows_per_page": 10, "data_page_version": "1.0", "compression": "none"}),
    "asc_large_v2_plain_snappy": ("asc", {
        "data_page_version": "2.0", "use_dictionary": False, "compression": "snappy"}),
    "desc_tiny_v2_dict_zstd": ("desc", {
        "max_rows_per_page": 10, "data_page_version": "2.0", "compression": "zstd"}),
    "desc_large_v1_plain_gzip": ("desc", {
        "data_page_version": "1.0", "use_dictionary": False, "compression": "gzip"}),
    "shuffled_tiny_v1_plain_brotli": ("shuffled", {
        "max_rows_per_page": 10, "data_page_version": "1.0", "use_dictionary": False,
        "compression": "brotli"}),
    "shuffled_large_v2_dict_lz4": ("shuffled", {
        "data_page_version": "2.0", "compression": "lz4"}),
    "asc_100rows_v2_dict_gzip_decimal_int": ("asc", {
        "max_rows_per_page": 100, "data_page_version": "2.0", "compression": "gzip",
        "store_decimal_as_integer": True}),
    "shuffled_100rows_v1_dict_snappy_bloom": ("shuffled", {
        "max_rows_per_page": 100, "data_page_version": "1.0", "compression": "snappy",
        "bloom_filter_options": {"id": {"ndv": SCAN_ROWS}, "category": {"ndv": 8},
                                 "name": {"ndv": 300}, "u64": {"ndv": SCAN_ROWS}}}),
    # dictionaries overflow a 600-byte limit: chunks switch to PLAIN part way through
    "shuffled_20rows_dict_fallback": ("shuffled", {
        "max_rows_per_page": 20, "compression": "zstd", "dictionary_pagesize_limit": 600}),
    "asc_no_page_index": ("asc", {
        "max_rows_per_page": 50, "compression": "snappy", "write_page_index": False}),
}


def write_scan_variant(target_dir: str | os.PathLike[str], name: str) -> Path:
    """One entry of ``SCAN_VARIANTS`` as ``<target_dir>/<name>.parquet``."""
    order, kw = SCAN_VARIANTS[name]
    kw = dict(kw)
    kw.setdefault("write_page_index", True)
    kw.setdefault("write_batch_size", min(kw.get("max_rows_per_page", 1024), 1024))
    path = Path(target_dir) / f"{name}.parquet"
    pq.write_table(make_scan_table(order=order), path, row_group_size=SCAN_ROW_GROUP_ROWS, **kw)
    return path


# ------------------------------------------------------------------ hive trees

# (year, month, region) of each file; None is the hive null marker.
HIVE_PARTS: tuple[tuple[int, int, str | None], ...] = (
    (2023, 11, "eu"),
    (2023, 12, None),
    (2024, 1, "eu"),
    (2024, 1, "us"),
    (2024, 2, "us"),
    (2024, 10, None),
)
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def write_hive_tree(root: str | os.PathLike[str], rows_per_file: int = 300) -> Path:
    """``year=Y/month=M/region=R/part.parquet`` files with slices of the scan table."""
    root = Path(root)
    table = make_scan_table(rows_per_file * len(HIVE_PARTS)).drop_columns(["tags"])
    for k, (year, month, region) in enumerate(HIVE_PARTS):
        d = root / f"year={year}" / f"month={month}" / f"region={region or HIVE_NULL}"
        d.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.slice(k * rows_per_file, rows_per_file), d / "part.parquet",
                       row_group_size=120, max_rows_per_page=25, write_page_index=True)
    return root


def hive_table_with_partitions(root: str | os.PathLike[str], files: list[str]) -> pa.Table:
    """The rows of ``files`` in that order with typed partition columns appended
    (int64 for integer keys, string otherwise, null for the hive null marker)."""
    tables = []
    for f in files:
        parts = dict(p.split("=", 1) for p in Path(f).relative_to(root).parts[:-1])
        t = pq.read_table(f)
        n = t.num_rows
        t = t.append_column("year", pa.array([int(parts["year"])] * n, pa.int64()))
        t = t.append_column("month", pa.array([int(parts["month"])] * n, pa.int64()))
        region = None if parts["region"] == HIVE_NULL else parts["region"]
        t = t.append_column("region", pa.array([region] * n, pa.string()))
        tables.append(t)
    return pa.concat_tables(tables)


# ------------------------------------------------------------------ the I/O file

IO_ROWS = 200_000
IO_ROW_GROUP_ROWS = 50_000
IO_PAGE_ROWS = 1_000
IO_RARE = "zulu"  # sorts after every common category: page bounds can exclude it
IO_RARE_ROWS = (12_345, 13_999, 160_500)
IO_CATEGORIES = ("alpha", "beta", "delta", "gamma")


def make_io_table() -> pa.Table:
    """Sorted by id: id, ts, category (one rare value), user_id, amount, payload."""
    i = np.arange(IO_ROWS, dtype=np.int64)
    rng = np.random.default_rng(1)
    cats = np.array(IO_CATEGORIES, dtype=object)[i % len(IO_CATEGORIES)]
    cats[list(IO_RARE_ROWS)] = IO_RARE
    t0 = np.datetime64("2024-01-01T00:00:00", "us")
    return pa.table({
        "id": pa.array(i * 2, pa.int64()),  # even ids only: odd ones are absent
        "ts": pa.array(t0 + (i * 1_500_000).astype("timedelta64[us]"), pa.timestamp("us")),
        "category": pa.array(cats, pa.string()),
        "user_id": pa.array(rng.integers(0, 5_000, IO_ROWS), pa.int64()),
        "amount": pa.array(np.round(rng.gamma(2.0, 20.0, IO_ROWS), 2), pa.float64()),
        "payload": pa.array([f"payload-{k:07d}-{'x' * (k % 17)}" for k in range(IO_ROWS)]),
    })


def write_io_file(target_dir: str | os.PathLike[str]) -> Path:
    """The I/O file: 4 row groups of 50 pages of 1,000 rows per column, dictionary off
    for id, ts, amount and payload, on for category and user_id."""
    path = Path(target_dir) / "io.parquet"
    pq.write_table(
        make_io_table(), path,
        row_group_size=IO_ROW_GROUP_ROWS,
        max_rows_per_page=IO_PAGE_ROWS,
        write_batch_size=IO_PAGE_ROWS,
        data_page_size=1 << 20,
        use_dictionary=["category", "user_id"],
        compression="snappy",
        write_page_index=True,
        sorting_columns=[pq.SortingColumn(0)],
    )
    return path


# ------------------------------------------------------------------ lying page indexes


def rewrite_column_index(src: str | os.PathLike[str], dst: str | os.PathLike[str], rg: int,
                         col: int, mutate: Any) -> Path:
    """Copy ``src`` to ``dst`` with one chunk's ColumnIndex replaced by ``mutate(ci)``.

    The new ColumnIndex is written where the footer was and the footer, re-encoded
    with the chunk's new column_index_offset/length, after it: every other offset
    still points at the same bytes. Readers that ignore the page index see the
    same file.
    """
    import struct

    from pqindex.format.file import ParquetFile
    from pqindex.format.structs import ColumnIndex, FileMetaData
    from pqindex.format.thrift import decode, encode

    data = Path(src).read_bytes()
    with ParquetFile.open(src) as pf:
        footer_offset = pf.footer_offset
        ci = pf.column_index(rg, col)
    assert ci is not None, "the source file has no column index there"
    md, _ = decode(FileMetaData, data[footer_offset:-8])
    new_ci = encode(mutate(decode(ColumnIndex, encode(ci))[0]))
    cc = (md.row_groups or [])[rg].columns[col]  # type: ignore[index]
    cc.column_index_offset = footer_offset
    cc.column_index_length = len(new_ci)
    footer = encode(md)
    out = data[:footer_offset] + new_ci + footer + struct.pack("<I", len(footer)) + b"PAR1"
    Path(dst).write_bytes(out)
    return Path(dst)


def damage_except(path: Path, keep: set[int]) -> None:
    """Overwrite the first page header of every column chunk of the row groups not in
    ``keep``: any read of one of them fails."""
    md = pq.ParquetFile(path).metadata
    with open(path, "r+b") as f:
        for rg in range(md.num_row_groups):
            if rg in keep:
                continue
            for c in range(md.num_columns):
                cc = md.row_group(rg).column(c)
                first = cc.dictionary_page_offset if cc.has_dictionary_page else None
                f.seek(first if first else cc.data_page_offset)
                f.write(b"\xff" * 12)
