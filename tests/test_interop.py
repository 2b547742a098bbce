"""Interop: scans as Arrow PyCapsule streams, pqindex's pruning as a pyarrow dataset,
and the main job's output (inspect, explain's page map).

References are independent: the file read whole by pyarrow and filtered with a
pyarrow expression the test builds itself from the same random predicate.
"""

from __future__ import annotations

import datetime as dt
import decimal
import gc
import json
import math
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import pqindex
import writers
from conftest import import_or_missing
from pqindex.cli import cli
from pqindex.dataset.explain import PAGE_MAP_LEGEND, PAGE_MAP_WIDTH
from pqindex.dataset.interop import arrow_expression
from pqindex.errors import UserInputError

duckdb = import_or_missing("duckdb", "duckdb")
pl = import_or_missing("polars", "polars")
datafusion = import_or_missing("datafusion", "datafusion")

DIFF_WRITERS = ("pyarrow_v1_none_dict", "pyarrow_v2_zstd_plain", "duckdb", "datafusion", "polars")
COLUMNS = ["id", "shuffled", "f64", "category", "day", "price", "flag"]
CASES_PER_WRITER = 6


# ---------------------------------------------------------------- random predicates

Pred = tuple[str, Callable[[], pc.Expression]]  # (SQL text, reference expression)


def _leaf(rng: random.Random) -> Pred:
    f = pc.field
    kind = rng.randrange(14)
    if kind == 0:
        op = rng.choice(["<", "<=", ">", ">=", "=", "!="])
        k = rng.randrange(-10, writers.NUM_ROWS + 10)
        ops = {"<": f("id") < k, "<=": f("id") <= k, ">": f("id") > k, ">=": f("id") >= k,
               "=": f("id") == k, "!=": f("id") != k}
        return f"id {op} {k}", lambda: ops[op]
    if kind == 1:
        a = rng.randrange(writers.NUM_ROWS)
        b = a + rng.randrange(1, 800)
        return (f"shuffled BETWEEN {a} AND {b}",
                lambda: (f("shuffled") >= a) & (f("shuffled") <= b))
    if kind == 2:
        x = round(rng.gauss(0, 100), 3)
        if rng.random() < 0.5:
            return f"f64 > {x}", lambda: f("f64") > x
        return f"f64 < {x}", lambda: f("f64") < x
    if kind == 3:
        cats = rng.sample(writers.CATEGORIES, rng.randrange(1, 3))
        text = ", ".join(f"'{c}'" for c in cats)
        return f"category IN ({text})", lambda: pc.is_in(f("category"), pa.array(cats))
    if kind == 4:
        prefix = rng.choice(["g", "de", "al", "z"])
        return (f"category LIKE '{prefix}%'",
                lambda: pc.starts_with(f("category"), pattern=prefix))
    if kind == 5:
        day = dt.date(2020, 1, 1) + dt.timedelta(days=rng.randrange(0, 520))
        return f"day < DATE '{day.isoformat()}'", lambda: f("day") < pa.scalar(day)
    if kind == 6:
        if rng.random() < 0.5:
            return "shuffled IS NULL", lambda: f("shuffled").is_null()
        return "shuffled IS NOT NULL", lambda: f("shuffled").is_valid()
    if kind == 7:
        price = decimal.Decimal(rng.randrange(0, 100_000)) / 100
        return f"price >= {price}", lambda: f("price") >= pa.scalar(price)
    if kind == 8:
        k = rng.randrange(writers.NUM_ROWS)
        return f"NOT (id < {k})", lambda: ~(f("id") < k)
    if kind == 9:
        t0 = dt.datetime(2021, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
        at = t0 + dt.timedelta(seconds=rng.randrange(0, 37 * writers.NUM_ROWS))
        op = rng.choice([">=", "<"])
        text = at.replace(tzinfo=None).isoformat(sep=" ")
        scalar = pa.scalar(at, pa.timestamp("us", tz="UTC"))
        return (f"ts {op} TIMESTAMP '{text}'",
                lambda: f("ts") >= scalar if op == ">=" else f("ts") < scalar)
    if kind == 10:
        cats = rng.sample(writers.CATEGORIES, rng.randrange(1, 4))
        text = ", ".join(f"'{c}'" for c in cats)
        return (f"category NOT IN ({text})",
                lambda: ~pc.is_in(f("category"), pa.array(cats)))
    if kind == 11:
        if rng.random() < 0.5:
            return "isnan(f64)", lambda: pc.is_nan(f("f64"))
        return "NOT isnan(f64)", lambda: ~pc.is_nan(f("f64"))
    if kind == 12:
        value = rng.random() < 0.5
        return f"flag = {str(value).upper()}", lambda: f("flag") == value
    k = rng.randrange(writers.NUM_ROWS)
    return f"desc <= {k} AND NOT (shuffled > {k})", lambda: (f("desc") <= k) & ~(f("shuffled") > k)


def random_predicate(rng: random.Random) -> Pred:
    shape = rng.randrange(4)
    a = _leaf(rng)
    if shape == 0:
        return a
    b = _leaf(rng)
    if shape == 1:
        return f"({a[0]}) AND ({b[0]})", lambda: a[1]() & b[1]()
    if shape == 2:
        return f"({a[0]}) OR ({b[0]})", lambda: a[1]() | b[1]()
    c = _leaf(rng)
    return (f"(({a[0]}) OR ({b[0]})) AND ({c[0]})",
            lambda: (a[1]() | b[1]()) & c[1]())


def _value(v: Any) -> Any:
    return "NaN" if isinstance(v, float) and math.isnan(v) else v


def canon(table: Any, columns: list[str] = COLUMNS) -> list[tuple[Any, ...]]:
    """Rows as tuples of Python values sorted by id; NaN made comparable."""
    t = table if isinstance(table, pa.Table) else pa.table(table)
    t = t.select(columns)
    rows = [tuple(_value(r[c]) for c in columns) for r in t.to_pylist()]
    return sorted(rows, key=lambda r: r[0])


def reference(path: Path, ref: Callable[[], pc.Expression], columns: list[str] = COLUMNS) -> Any:
    return canon(pq.read_table(path).filter(ref()), columns)


CASES = [(w, i) for w in DIFF_WRITERS for i in range(CASES_PER_WRITER)]


# ---------------------------------------------------------------- the stream


@pytest.mark.parametrize(("writer", "case"), CASES, ids=[f"{w}-{i}" for w, i in CASES])
def test_every_consumer_of_the_stream_gets_the_reference_rows(
    written_files: writers.FileCache, writer: str, case: int
) -> None:
    path = written_files[writer]
    rng = random.Random(f"{writer}/{case}")
    where, ref = random_predicate(rng)
    expected = reference(path, ref)
    ds = pqindex.dataset(str(path))

    def scan() -> Any:
        return ds.scan(columns=COLUMNS, where=where, batch_size=rng.choice([64, 1000, 65_536]))

    s = scan()
    consumers: dict[str, Callable[[], Any]] = {
        "pyarrow.table": lambda: pa.table(s),
        "RecordBatchReader.from_stream": lambda: pa.RecordBatchReader.from_stream(s).read_all(),
        "polars.DataFrame": lambda: pl.DataFrame(s).to_arrow(),
        "polars.from_arrow": lambda: pl.from_arrow(s).struct.unnest().to_arrow(),
        "datafusion": lambda: datafusion.SessionContext().from_arrow(s).to_arrow_table(),
        "to_polars": lambda: scan().to_polars().to_arrow(),
        "to_reader": lambda: scan().to_reader().read_all(),
    }
    for name, consume in consumers.items():
        assert canon(consume()) == expected, f"{name} differs for {where!r} on {writer}"
    # DuckDB finds the variable by name in this frame (its replacement scan).
    from_duckdb = duckdb.sql("SELECT * FROM s").to_arrow_table()
    assert canon(from_duckdb) == expected, f"duckdb differs for {where!r} on {writer}"
    # pandas through to_pandas, against the reference's own pandas conversion.
    got = scan().to_pandas().sort_values("id").reset_index(drop=True)
    want = pq.read_table(path).filter(ref()).select(COLUMNS).to_pandas()
    want = want.sort_values("id").reset_index(drop=True)
    import pandas.testing

    pandas.testing.assert_frame_equal(got[COLUMNS], want, check_dtype=False)


def test_stream_announces_the_schema_before_reading(written_files: writers.FileCache) -> None:
    path = written_files["pyarrow_v1_none_dict"]
    scan = pqindex.dataset(str(path)).scan(columns=["category", "id"], where="id < 0")
    reader = scan.to_reader()
    assert reader.schema.names == ["category", "id"]
    assert scan.report.rows_matched == 0 and scan.report.row_groups_total == 0  # nothing ran
    t = reader.read_all()
    assert t.num_rows == 0 and t.schema.names == ["category", "id"]
    assert pl.DataFrame(scan).columns == ["category", "id"]


def test_each_stream_is_a_new_execution_and_readers_are_single_use(
    written_files: writers.FileCache,
) -> None:
    path = written_files["duckdb"]
    scan = pqindex.dataset(str(path)).scan(columns=["id"], where="id BETWEEN 10 AND 4000")
    first, second = pa.table(scan), pa.table(scan)
    assert first.equals(second) and first.num_rows == 3991
    assert scan.report.rows_matched == 3991  # the report is the latest execution's
    reader = scan.to_reader()
    assert reader.read_all().num_rows == 3991
    assert reader.read_all().num_rows == 0  # a reader is consumed once; the scan is not
    assert scan.to_reader().read_all().num_rows == 3991


def test_unknown_column_fails_when_the_stream_is_requested(
    written_files: writers.FileCache,
) -> None:
    scan = pqindex.dataset(str(written_files["polars"])).scan(columns=["id", "nope"])
    with pytest.raises(UserInputError, match="nope"):
        pa.table(scan)


def test_an_error_while_streaming_keeps_its_type_and_message(tmp_path: Path) -> None:
    good = writers.write_pyarrow(tmp_path, "a")
    bad = tmp_path / "b.parquet"
    data = bytearray(good.read_bytes())
    data[5_000:25_000] = b"\xff" * 20_000  # data pages of the second file damaged
    bad.write_bytes(bytes(data))
    scan = pqindex.dataset(str(tmp_path)).scan(columns=["id", "long_text"])
    with pytest.raises(Exception) as direct:
        scan.to_table()
    assert isinstance(direct.value, pqindex.CorruptFileError)
    # The stream decodes row group by row group (to_table lets pyarrow read runs of
    # them): the same error, located at least as precisely.
    with pytest.raises(type(direct.value)) as streamed:
        scan.to_reader().read_all()
    cause = str(direct.value).rsplit(": ", 1)[-1]
    for err in (direct.value, streamed.value):
        assert str(bad) in str(err) and cause in str(err)
    with pytest.raises(Exception, match=re.escape(cause)):
        pa.table(scan)


def test_dataset_streams_a_full_scan(written_files: writers.FileCache) -> None:
    path = written_files["datafusion"]
    ds = pqindex.dataset(str(path))
    cols = [f.name for f in pq.read_schema(path)]
    assert canon(pa.table(ds), ["id", "category", "f64"]) == canon(
        pq.read_table(path), ["id", "category", "f64"]
    )
    assert duckdb.sql("SELECT count(*) FROM ds").fetchall() == [(writers.NUM_ROWS,)]
    assert pl.DataFrame(ds).columns == cols


def test_streaming_memory_stays_far_below_the_result(tmp_path: Path) -> None:
    """Peak Arrow memory while consuming the stream is a fraction of the whole result."""
    n, groups = 600_000, 40
    rng = np.random.default_rng(7)
    table = pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "x": pa.array(rng.normal(size=n)),
            "s": pa.array([f"value-{i % 9973:06d}-padding" for i in range(n)]),
        }
    )
    path = tmp_path / "big.parquet"
    pq.write_table(table, path, row_group_size=n // groups, write_page_index=True)
    full = table.nbytes
    del table
    gc.collect()
    base = pa.total_allocated_bytes()
    scan = pqindex.dataset(str(path)).scan(where="id >= 0", batch_size=8_192)
    reader = pa.RecordBatchReader.from_stream(scan)
    peak = rows = batches = 0
    total = 0.0
    for batch in reader:
        peak = max(peak, pa.total_allocated_bytes() - base)
        rows += batch.num_rows
        batches += 1
        total += float(pc.sum(batch.column("x")).as_py())
        del batch
    assert rows == n and batches >= groups
    assert peak < 0.2 * full, f"peak {peak:,} B while streaming a {full:,} B result"
    assert math.isfinite(total)


# ---------------------------------------------------------------- pyarrow dataset


@pytest.mark.parametrize(("writer", "case"), CASES, ids=[f"{w}-{i}" for w, i in CASES])
def test_pyarrow_dataset_scanned_by_each_engine_gives_the_reference_rows(
    written_files: writers.FileCache, writer: str, case: int
) -> None:
    path = written_files[writer]
    rng = random.Random(f"pads/{writer}/{case}")
    where, ref = random_predicate(rng)
    expected = reference(path, ref)
    ds = pqindex.dataset(str(path))
    kept = ds.to_pyarrow_dataset(where, columns=COLUMNS)
    assert isinstance(kept, pads.FileSystemDataset)
    results = {
        "to_table": lambda: kept.to_table(),
        "polars": lambda: pl.scan_pyarrow_dataset(kept).collect().to_arrow(),
    }
    for name, run in results.items():
        assert canon(run()) == expected, f"{name} differs for {where!r} on {writer}"
    from_duckdb = duckdb.sql("SELECT * FROM kept").to_arrow_table()
    assert canon(from_duckdb) == expected, f"duckdb differs for {where!r} on {writer}"
    # The consumer's own filter is combined with the attached one.
    extra = kept.to_table(filter=pc.field("id") < 2500)
    assert canon(extra) == [r for r in expected if r[0] < 2500]


def test_datafusion_scans_the_pruned_dataset_with_the_filter_in_its_sql(
    written_files: writers.FileCache,
) -> None:
    """DataFusion plans from ``get_fragments``, which pyarrow refuses on a filtered
    dataset: it takes the pruned dataset without a filter and the WHERE in SQL."""
    path = written_files["datafusion"]
    where = "id < 2300 AND category = 'beta'"
    ds = pqindex.dataset(str(path))
    ctx = datafusion.SessionContext()
    with pytest.raises(Exception, match="filtered"):
        ctx.register_dataset("filtered", ds.to_pyarrow_dataset(where))
        ctx.sql("SELECT count(*) FROM filtered").to_arrow_table()
    pruned = ds.to_pyarrow_dataset(where, attach_filter=False)
    kept_rows = sum(rg.num_rows for f in pruned.get_fragments() for rg in f.row_groups)
    assert kept_rows < pq.ParquetFile(path).metadata.num_rows
    ctx.register_dataset("pruned", pruned)
    got = ctx.sql(f"SELECT id, category FROM pruned WHERE {where}").to_arrow_table()
    want = pq.read_table(path).filter((pc.field("id") < 2300) & (pc.field("category") == "beta"))
    assert canon(got, ["id", "category"]) == canon(want, ["id", "category"])


def test_requested_schema_is_honoured(written_files: writers.FileCache) -> None:
    scan = pqindex.dataset(str(written_files["pyarrow_v1_none_dict"])).scan(
        columns=["id", "category"], where="id < 300"
    )
    wanted = pa.schema([("id", pa.int32()), ("category", pa.large_string())])
    t = pa.RecordBatchReader.from_stream(scan, schema=wanted).read_all()
    assert t.schema == wanted and t.column("id").to_pylist() == list(range(300))


def test_pyarrow_dataset_keeps_only_the_planned_row_groups(
    written_files: writers.FileCache,
) -> None:
    path = written_files["pyarrow_v1_none_dict"]
    ds = pqindex.dataset(str(path))
    scan = ds.scan(where="id BETWEEN 2100 AND 2200")
    scan.to_table()
    unfiltered = ds.to_pyarrow_dataset("id BETWEEN 2100 AND 2200", attach_filter=False)
    groups = [rg.id for frag in unfiltered.get_fragments() for rg in frag.row_groups]
    total = pq.ParquetFile(path).num_row_groups
    assert len(groups) == scan.report.row_groups_total - sum(
        scan.report.row_groups_skipped.values()
    )
    assert groups == [1] and total == 3


def test_partition_columns_come_back_from_the_fragments(tmp_path: Path) -> None:
    table = writers.make_table().select(["id", "category"])
    for part in (1, 2, 3):
        d = tmp_path / f"part={part}"
        d.mkdir()
        pq.write_table(table.slice((part - 1) * 1000, 1500), d / "f.parquet",
                       row_group_size=500, write_page_index=True)
    ds = pqindex.dataset(str(tmp_path))
    kept = ds.to_pyarrow_dataset("part >= 2 AND id < 1700", columns=["id", "part"])
    got = sorted(kept.to_table().to_pylist(), key=lambda r: (r["part"], r["id"]))
    ref = pads.dataset(str(tmp_path), partitioning="hive").to_table(
        filter=(pc.field("part") >= 2) & (pc.field("id") < 1700), columns=["id", "part"]
    )
    want = sorted(ref.to_pylist(), key=lambda r: (r["part"], r["id"]))
    assert got == want and got
    # part=1 pruned by its partition value, part=3 (ids 2000-3499) by statistics.
    assert [Path(f).parent.name for f in kept.files] == ["part=2"]


def test_untranslatable_predicate_is_refused_or_left_to_the_consumer(
    written_files: writers.FileCache,
) -> None:
    path = written_files["pyarrow_v2_zstd_plain"]
    ds = pqindex.dataset(str(path))
    nan_eq = pqindex.col("f64") == float("nan")
    assert arrow_expression(nan_eq, ds.schema) is None
    fractional = pqindex.col("id") < 2.5  # exact only with a rounding rule: not translated
    assert arrow_expression(fractional, ds.schema) is None
    with pytest.raises(UserInputError, match="exact=False"):
        ds.to_pyarrow_dataset(fractional)
    loose = ds.to_pyarrow_dataset(fractional, exact=False)
    ids = loose.to_table().column("id").to_pylist()
    # Only pruning applied: the first row group, whole; the consumer filters.
    assert ids == list(range(writers.ROW_GROUP_ROWS))
    assert ds.scan(where=fractional).to_table().column("id").to_pylist() == [0, 1, 2]


UNTRANSLATABLE = {
    "fractional literal on an integer column": pqindex.col("id") < 2.5,
    "NaN literal": pqindex.col("f64") != float("nan"),
    "NULL in an IN list": pqindex.col("id").isin([1, None]),
    "literal finer than the column's unit": pqindex.col("day") < dt.datetime(2020, 1, 1, 12),
    "boolean against an integer": pqindex.col("id") == True,  # noqa: E712
    "isnan of an integer column": pqindex.col("id").is_nan(),
}


@pytest.mark.parametrize("name", list(UNTRANSLATABLE))
def test_what_has_no_exact_translation_is_refused(
    written_files: writers.FileCache, name: str
) -> None:
    ds = pqindex.dataset(str(written_files["pyarrow_v1_none_dict"]))
    expr = UNTRANSLATABLE[name]
    assert arrow_expression(expr, ds.schema) is None, name
    # Inside AND / OR / NOT too: a partial translation would not be exact.
    assert arrow_expression((pqindex.col("id") > 3) | expr, ds.schema) is None, name
    assert arrow_expression(~((pqindex.col("id") > 3) & expr), ds.schema) is None, name


def test_filter_columns_stay_in_a_narrowed_dataset_once(
    written_files: writers.FileCache,
) -> None:
    path = written_files["pyarrow_v2_snappy_dict"]
    ds = pqindex.dataset(str(path))
    kept = ds.to_pyarrow_dataset("(desc < 5 OR desc > 4990) AND id != 1", columns=["category"])
    assert kept.schema.names == ["category", "desc", "id"]
    ids = sorted(kept.to_table().column("id").to_pylist())
    want = pq.read_table(path).filter(
        ((pc.field("desc") < 5) | (pc.field("desc") > 4990)) & (pc.field("id") != 1)
    )
    assert ids == sorted(want.column("id").to_pylist()) and ids


class _CountingHandler(pafs.FileSystemHandler):
    """A local filesystem that records every byte range read from data files."""

    def __init__(self) -> None:
        self.local = pafs.LocalFileSystem()
        self.reads: list[tuple[int, int]] = []

    def get_type_name(self) -> str:
        return "counting"

    def equals(self, other: Any) -> bool:
        return other is self

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return list(self.local.get_file_info(paths))

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return list(self.local.get_file_info(selector))

    def normalize_path(self, path: str) -> str:
        return path

    def open_input_file(self, path: str) -> pa.NativeFile:
        handler = self

        class Counting:
            def __init__(self) -> None:
                self.f = open(path, "rb")  # noqa: SIM115 - closed by pyarrow
                self.closed = False

            def read(self, n: int = -1) -> bytes:
                at = self.f.tell()
                data = self.f.read(n)
                handler.reads.append((at, len(data)))
                return data

            def seek(self, pos: int, whence: int = 0) -> int:
                return self.f.seek(pos, whence)

            def tell(self) -> int:
                return self.f.tell()

            def close(self) -> None:
                self.closed = True
                self.f.close()

            def readable(self) -> bool:
                return True

            def seekable(self) -> bool:
                return True

        return pa.PythonFile(Counting(), mode="r")

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.open_input_file(path)

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("read-only")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = _refuse
    delete_file = move = copy_file = open_output_stream = open_append_stream = _refuse


def _row_groups_touched(path: Path, reads: list[tuple[int, int]]) -> set[int]:
    md = pq.read_metadata(path)
    touched = set()
    for rg in range(md.num_row_groups):
        for c in range(md.num_columns):
            col = md.row_group(rg).column(c)
            start = col.dictionary_page_offset or col.data_page_offset
            if col.dictionary_page_offset is not None:
                start = min(start, col.data_page_offset)
            end = start + col.total_compressed_size
            if any(at < end and at + n > start for at, n in reads):
                touched.add(rg)
    return touched


def test_pyarrow_dataset_reads_fewer_row_groups_than_pyarrow_alone(tmp_path: Path) -> None:
    """A Bloom filter (pyarrow's dataset scanner reads none) prunes row groups for every engine."""
    n, groups = 40_000, 10
    rng = np.random.default_rng(3)
    key = rng.permutation(n).astype(np.int64)
    table = pa.table({"key": key, "payload": pa.array([f"p{k:08d}" for k in key])})
    path = tmp_path / "keyed.parquet"
    pqindex.write_table(table, path, row_group_rows=n // groups, bloom=["key"])
    wanted = int(key[12_345])
    where = f"key = {wanted}"
    ds = pqindex.dataset(str(path))
    scan = ds.scan(where=where)
    assert scan.to_table().column("key").to_pylist() == [wanted]
    kept_by_plan = scan.report.row_groups_total - sum(scan.report.row_groups_skipped.values())

    counting = _CountingHandler()
    fs = pafs.PyFileSystem(counting)
    kept = ds.to_pyarrow_dataset(where, filesystem=fs)
    assert kept.to_table().column("key").to_pylist() == [wanted]
    ours = _row_groups_touched(path, counting.reads)
    ours_bytes = sum(n for _, n in counting.reads)

    counting.reads.clear()
    plain = pads.dataset(str(path), filesystem=fs, format="parquet")
    assert plain.to_table(filter=pc.field("key") == wanted).column("key").to_pylist() == [wanted]
    theirs = _row_groups_touched(path, counting.reads)
    theirs_bytes = sum(n for _, n in counting.reads)

    assert len(ours) == kept_by_plan and 12_345 // (n // groups) in ours
    assert len(ours) <= 2 and len(theirs) == groups
    assert ours_bytes * 3 < theirs_bytes


# ---------------------------------------------------------------- the main job's output


def _coded_file(tmp_path: Path, *, embedded: bool) -> Path:
    """150 pages of 100 rows; ``code`` per page: {4,5} (k%3==0), {10,11} (k%3==1),
    {0,9} (k%3==2). ``code = 4``: the ColumnIndex rules out the {10,11} pages, only a
    page-scope distinct index rules out the {0,9} pages."""
    n = 100 * 150
    i = np.arange(n)
    k = i // 100
    code = np.where(k % 3 == 0, 4 + i % 2, np.where(k % 3 == 1, 10 + i % 2, 9 * (i % 2)))
    table = pa.table({"id": i.astype(np.int64), "code": code.astype(np.int64)})
    path = tmp_path / ("embedded.parquet" if embedded else "plain.parquet")
    pqindex.write_table(table, path, sort_by="id", row_group_rows=n, page_rows=100,
                        indexes={"distinct": ["code"]} if embedded else None)
    return path


@pytest.mark.parametrize("embedded", [True, False])
def test_explain_page_map(tmp_path: Path, embedded: bool) -> None:
    path = _coded_file(tmp_path, embedded=embedded)
    ds = pqindex.dataset(str(path))
    expected = "".join(
        "#" if k % 3 == 0 else "." if k % 3 == 1 else ("e" if embedded else "#")
        for k in range(150)
    )
    plan = json.loads(ds.explain(where="code = 4", format="json"))
    reads = plan["files"][0]["row_groups"][0]["reads"]
    for r in reads:
        assert r["page_map"] == expected, r["column"]
        assert [p for p, ch in enumerate(r["page_map"]) if ch == "#"] == r["pages"]
    text = ds.explain(where="code = 4")
    lines = [ln.split()[-1] for ln in text.splitlines()
             if ln.strip("│ ") and set(ln.strip("│ ")) <= set("#.e")]
    assert "".join(lines) == expected * 2  # both columns' maps
    assert all(len(ln) <= PAGE_MAP_WIDTH for ln in lines)
    assert PAGE_MAP_LEGEND in text
    # The rows agree with the map's promise.
    assert ds.scan(where="code = 4").to_table().num_rows == 50 * 50


def test_page_maps_read_nothing_more(tmp_path: Path) -> None:
    """The second plan behind the 'e' marks uses only what planning already read."""
    from pqindex.dataset.dataset import _where
    from pqindex.dataset.explain import page_maps

    ds = pqindex.dataset(str(_coded_file(tmp_path, embedded=True)))
    plans = ds._plan(None, _where("code = 4", None))
    _df, of, plan, bound = plans.files[0]
    before = (of.stats.requests, of.stats.bytes_read)
    maps = page_maps(of, plan, bound)
    assert set(maps[(0, 1)]) == {"#", ".", "e"}
    assert (of.stats.requests, of.stats.bytes_read) == before


def test_explain_has_no_page_map_for_whole_chunks(tmp_path: Path) -> None:
    ds = pqindex.dataset(str(_coded_file(tmp_path, embedded=False)))
    assert PAGE_MAP_LEGEND not in ds.explain(where="id >= 0")
    plan = json.loads(ds.explain(where="id >= 0", format="json"))
    assert all(r["page_map"] is None for r in plan["files"][0]["row_groups"][0]["reads"])


def test_inspect_says_none_on_this_column(tmp_path: Path) -> None:
    path = _coded_file(tmp_path, embedded=True)
    runner = CliRunner()
    other = runner.invoke(cli, ["inspect", str(path), "--column", "id"], catch_exceptions=False)
    assert other.exit_code == 0
    assert "none on this column (id); indexed columns: code" in other.stdout
    assert "distinct (est.)" not in other.stdout  # no empty table
    same = runner.invoke(cli, ["inspect", str(path), "--column", "code"], catch_exceptions=False)
    assert "none on this column" not in same.stdout and "distinct" in same.stdout
    report = json.loads(runner.invoke(cli, ["inspect", str(path), "--column", "id", "--json"],
                                      catch_exceptions=False).stdout)
    assert report["embedded_indexes"]["blobs"] == []
    assert report["embedded_indexes"]["column"] == "id"


def test_demo_turns_spark_progress_bars_off() -> None:
    demo = (Path(__file__).resolve().parents[1] / "scripts" / "demo.py").read_text()
    assert '.config("spark.ui.showConsoleProgress", "false")' in demo


def test_importing_pqindex_does_not_import_pandas() -> None:
    """pandas (~0.2 s to import, through pyarrow.dataset) loads only when a caller
    asks for it: the CLI and every Spark Python worker import pqindex."""
    import subprocess
    import sys

    code = "import sys, pqindex; print('pandas' in sys.modules, 'pyarrow.dataset' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]
