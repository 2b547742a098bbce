"""Fixture builders: one small deterministic table, written by several Parquet writers.

Every builder takes a target directory and returns the path of the file it wrote
(``write_pyarrow_variants`` returns a dict of them). The files are small (5,000
rows) but cut into many pages and a few row groups, so page indexes have
something to say. ``FileCache`` writes each file once, on first use; conftest
keeps one per test session.
"""

from __future__ import annotations

import datetime as dt
import decimal
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

NUM_ROWS = 5_000
ROW_GROUP_ROWS = 2_000  # 3 row groups where the writer honours it
PAGE_ROWS = 250  # rows per page where the writer takes a row limit
PAGE_BYTES = 2_048  # page size target where it takes a byte limit
CATEGORIES = ("alpha", "beta", "gamma", "delta")

# name -> keyword arguments of write_pyarrow
PYARROW_VARIANTS: dict[str, dict[str, Any]] = {
    "pyarrow_v1_none_dict": {"data_page_version": "1.0", "compression": "none"},
    "pyarrow_v1_snappy_plain": {
        "data_page_version": "1.0",
        "compression": "snappy",
        "use_dictionary": False,
    },
    "pyarrow_v1_zstd_dict": {"data_page_version": "1.0", "compression": "zstd"},
    "pyarrow_v2_none_plain": {
        "data_page_version": "2.0",
        "compression": "none",
        "use_dictionary": False,
    },
    "pyarrow_v2_snappy_dict": {"data_page_version": "2.0", "compression": "snappy"},
    "pyarrow_v2_zstd_plain": {
        "data_page_version": "2.0",
        "compression": "zstd",
        "use_dictionary": False,
    },
    "pyarrow_bloom": {"compression": "snappy", "bloom": True},
}


def make_table(num_rows: int = NUM_ROWS) -> pa.Table:
    """The shared table. Deterministic: same rows on every call."""
    rng = np.random.default_rng(20240611)
    i = np.arange(num_rows, dtype=np.int64)
    shuffled = rng.permutation(num_rows).astype(np.int64)
    shuffled_mask = (i % 7) == 3
    floats = rng.normal(0.0, 100.0, num_rows)
    floats[i % 11 == 5] = np.nan
    float_mask = (i % 13) == 7
    letters = "abcdefghijklmnopqrstuvwxyz"
    longs = [
        f"{k:06d}-" + "".join(letters[(k * 7 + j) % 26] for j in range(93)) for k in range(num_rows)
    ]
    epoch = dt.date(2020, 1, 1)
    t0 = dt.datetime(2021, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
    lists = [None if k % 9 == 4 else list(range(k % 5)) for k in range(num_rows)]
    structs = [
        None if k % 10 == 6 else {"a": int(k % 100), "b": CATEGORIES[k % 3]}
        for k in range(num_rows)
    ]
    return pa.table(
        {
            "id": pa.array(i, pa.int64()),
            "desc": pa.array(num_rows - i, pa.int64()),
            "shuffled": pa.array(shuffled, pa.int64(), mask=shuffled_mask),
            "f64": pa.array(floats, pa.float64(), mask=float_mask),
            "category": pa.array([CATEGORIES[k % len(CATEGORIES)] for k in range(num_rows)]),
            "long_text": pa.array(longs, pa.string()),
            "day": pa.array(
                [epoch + dt.timedelta(days=k // 10) for k in range(num_rows)], pa.date32()
            ),
            "ts": pa.array(
                [t0 + dt.timedelta(seconds=37 * k) for k in range(num_rows)],
                pa.timestamp("us", tz="UTC"),
            ),
            "price": pa.array(
                [decimal.Decimal(k * 37 % 100_000) / 100 for k in range(num_rows)],
                pa.decimal128(10, 2),
            ),
            "flag": pa.array([k % 3 == 0 for k in range(num_rows)], pa.bool_()),
            "tags": pa.array(lists, pa.list_(pa.int32())),
            "point": pa.array(structs, pa.struct([("a", pa.int32()), ("b", pa.string())])),
        }
    )


# ------------------------------------------------------------------ writers


def write_pyarrow(
    target_dir: str | Path,
    name: str = "pyarrow",
    *,
    data_page_version: str = "1.0",
    compression: str = "snappy",
    use_dictionary: bool = True,
    bloom: bool = False,
    table: pa.Table | None = None,
) -> Path:
    """pyarrow with a page index, small pages and 3 row groups; optional Bloom filter on id."""
    path = Path(target_dir) / f"{name}.parquet"
    extra: dict[str, Any] = {}
    if bloom:
        extra["bloom_filter_options"] = {"id": {"ndv": NUM_ROWS, "fpp": 0.01}}
    pq.write_table(
        make_table() if table is None else table,
        path,
        row_group_size=ROW_GROUP_ROWS,
        data_page_size=PAGE_BYTES,
        max_rows_per_page=PAGE_ROWS,
        write_batch_size=PAGE_ROWS,
        data_page_version=data_page_version,
        compression=compression,
        use_dictionary=use_dictionary,
        write_page_index=True,
        **extra,
    )
    return path


def write_pyarrow_variants(target_dir: str | Path) -> dict[str, Path]:
    """Every entry of PYARROW_VARIANTS."""
    return {n: write_pyarrow(target_dir, n, **kw) for n, kw in PYARROW_VARIANTS.items()}


def write_duckdb(target_dir: str | Path) -> Path:
    """DuckDB's COPY ... TO ... (FORMAT parquet)."""
    import duckdb

    path = Path(target_dir) / "duckdb.parquet"
    con = duckdb.connect()
    try:
        con.register("t", make_table())
        con.execute(
            f"COPY (SELECT * FROM t ORDER BY id) TO '{path}' "
            f"(FORMAT parquet, ROW_GROUP_SIZE {ROW_GROUP_ROWS}, COMPRESSION snappy)"
        )
    finally:
        con.close()
    return path


def write_datafusion(target_dir: str | Path) -> Path:
    """DataFusion's DataFrame.write_parquet (arrow-rs writer; writes a page index)."""
    import datafusion

    path = Path(target_dir) / "datafusion.parquet"
    ctx = datafusion.SessionContext()
    df = ctx.from_arrow(make_table())
    opts = datafusion.ParquetWriterOptions(
        data_pagesize_limit=PAGE_BYTES,
        data_page_row_count_limit=PAGE_ROWS,
        write_batch_size=PAGE_ROWS,
        max_row_group_size=ROW_GROUP_ROWS,
        compression="snappy",
        allow_single_file_parallelism=False,
    )
    df.write_parquet(str(path), opts)
    if path.is_dir():  # some versions write a directory of parts
        parts = sorted(path.glob("*.parquet"))
        assert len(parts) == 1, parts
        single = Path(target_dir) / "datafusion_single.parquet"
        shutil.move(parts[0], single)
        shutil.rmtree(path)
        return single
    return path


def write_polars(target_dir: str | Path) -> Path:
    """polars' native writer."""
    import polars as pl

    path = Path(target_dir) / "polars.parquet"
    pl.from_arrow(make_table()).write_parquet(
        path,
        compression="zstd",
        statistics=True,
        row_group_size=ROW_GROUP_ROWS,
        data_page_size=PAGE_BYTES,
    )
    return path


SPARK_OPTIONS = {
    "parquet.block.size": str(64 * 1024),
    "parquet.page.size": str(PAGE_BYTES),
    "parquet.page.row.count.limit": str(PAGE_ROWS),
    "parquet.page.size.row.check.min": "10",
    "parquet.page.size.row.check.max": "100",
    "parquet.block.size.row.check.min": "10",
    "parquet.block.size.row.check.max": "100",
    "parquet.bloom.filter.enabled#id": "true",
    "parquet.bloom.filter.expected.ndv#id": str(NUM_ROWS),
    "parquet.enable.dictionary": "true",
    "compression": "snappy",
}


def write_spark(spark: Any, target_dir: str | Path) -> Path:
    """parquet-java through Spark: one part file, small pages and blocks, Bloom filter on id."""
    out = Path(target_dir) / "spark_out"
    with warnings.catch_warnings():  # pyspark frets about the pandas version
        warnings.simplefilter("ignore", FutureWarning)
        df = spark.createDataFrame(make_table()).coalesce(1).sortWithinPartitions("id")
    writer = df.write.mode("overwrite")
    for k, v in SPARK_OPTIONS.items():
        writer = writer.option(k, v)
    writer.parquet(str(out))
    parts = sorted(out.glob("part-*.parquet"))
    assert len(parts) == 1, parts
    path = Path(target_dir) / "spark.parquet"
    shutil.move(parts[0], path)
    shutil.rmtree(out)
    return path


def write_wide_footer(target_dir: str | Path, columns: int = 200, row_groups: int = 8) -> Path:
    """A file whose footer is larger than 64 KiB (many columns x many row groups)."""
    path = Path(target_dir) / "wide_footer.parquet"
    rows = row_groups * 10
    table = pa.table(
        {f"column_with_a_long_name_{c:04d}": pa.array(np.arange(rows) + c) for c in range(columns)}
    )
    pq.write_table(table, path, row_group_size=10, write_page_index=True, compression="none")
    return path


WRITERS: dict[str, Callable[[Path], Path]] = {
    **{n: (lambda d, n=n, kw=kw: write_pyarrow(d, n, **kw)) for n, kw in PYARROW_VARIANTS.items()},
    "duckdb": write_duckdb,
    "datafusion": write_datafusion,
    "polars": write_polars,
}
SPARK_WRITERS = ("spark",)
ALL_WRITERS = (*WRITERS, *SPARK_WRITERS)


class FileCache:
    """Writes each named file on first request, into ``root``, and remembers it.

    ``spark`` is a zero-argument callable returning a SparkSession; it is only
    called when a Spark file is requested.
    """

    def __init__(self, root: str | Path, spark: Callable[[], Any] | None = None) -> None:
        self.root = Path(root)
        self._spark = spark
        self._paths: dict[str, Path] = {}

    def __getitem__(self, name: str) -> Path:
        if name not in self._paths:
            d = self.root / name
            d.mkdir(parents=True, exist_ok=True)
            if name in WRITERS:
                self._paths[name] = WRITERS[name](d)
            elif name == "spark":
                if self._spark is None:
                    raise KeyError("spark files need a SparkSession factory")
                self._paths[name] = write_spark(self._spark(), d)
            elif name == "wide_footer":
                self._paths[name] = write_wide_footer(d)
            else:
                raise KeyError(name)
        return self._paths[name]
