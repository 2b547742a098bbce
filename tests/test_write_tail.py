"""rewrite: a new index tail after untouched data pages, installed atomically.

Files from pyarrow (page index + Bloom filter), DuckDB (no page index) and
Spark are rewritten with their own indexes, truncated column indexes, dropped
Bloom filters and an opaque region; every engine reads the same rows back,
filtered queries that use the page index (DataFusion, Spark) return the same
rows, the data pages are byte-identical, and pqindex sees the new tail. Then
the failure cases: SIGKILL at random moments, a read-only directory, ENOSPC,
a source that changes meanwhile, stale temporaries.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pqindex.write.tail as tail_mod
import writers
from pqindex.errors import CorruptFileError, UnsupportedError, UserInputError
from pqindex.format.file import ParquetFile
from pqindex.format.structs import ColumnIndex, SortingColumn
from pqindex.format.truncate import truncate_column_index
from pqindex.write.tail import (
    REGION_KEY,
    RewriteError,
    SourceChangedError,
    Tail,
    data_end,
    read_region,
    region_locator,
    rewrite,
)

SRC = Path(__file__).resolve().parents[1] / "src"
REGION = b"PQIX" + bytes(range(256)) * 40

# ---------------------------------------------------------------- helpers


@pytest.fixture
def copy_of(written_files: writers.FileCache, tmp_path: Path) -> Callable[[str], Path]:
    """A private copy of a session fixture file (rewrites must not touch the shared one)."""

    def make(name: str) -> Path:
        dst = tmp_path / f"{name}.parquet"
        shutil.copyfile(written_files[name], dst)
        return dst

    return make


def pages_digest(path: Path) -> tuple[int, str]:
    with ParquetFile.open(path) as pf:
        end = data_end(pf)
    with open(path, "rb") as f:
        f.seek(4)
        return end, hashlib.sha256(f.read(end - 4)).hexdigest()


def rows_by_reader(path: Path, spark: Any = None) -> dict[str, str]:
    """Each engine's rows, ordered by id, as text (NaN == NaN)."""
    import datafusion
    import duckdb
    import polars as pl

    p = str(path)
    out = {"pyarrow": repr(pq.read_table(p).sort_by("id").to_pylist())}
    con = duckdb.connect()
    try:
        out["duckdb"] = repr(con.sql(f"SELECT * FROM read_parquet('{p}') ORDER BY id")
                             .to_arrow_table().to_pylist())
    finally:
        con.close()
    ctx = datafusion.SessionContext()
    ctx.register_parquet("t", p)
    out["datafusion"] = repr(ctx.sql("SELECT * FROM t ORDER BY id").to_arrow_table().to_pylist())
    out["polars"] = repr(pl.read_parquet(p).sort("id").to_dicts())
    if spark is not None:
        out["spark"] = repr([r.asDict(recursive=True)
                             for r in spark.read.parquet(p).orderBy("id").collect()])
    return out


FILTERS = [
    "id = 1234",
    "id BETWEEN 1990 AND 2010",
    "desc < 30",
    "long_text = '002500-" + "".join("abcdefghijklmnopqrstuvwxyz"[(2500 * 7 + j) % 26]
                                     for j in range(93)) + "'",
    "long_text > '004990-'",
    "long_text < '000003-'",
    "long_text = '001000-zzz'",
    "category = 'beta' AND id < 40",
]


def filtered_rows(path: Path, spark: Any = None) -> dict[str, list[str]]:
    """Filtered queries through readers that prune pages with the column index."""
    import datafusion

    p = str(path)
    config = datafusion.SessionConfig().set(
        "datafusion.execution.parquet.pushdown_filters", "true")
    ctx = datafusion.SessionContext(config)
    ctx.register_parquet("t", p)
    out = {"datafusion": [repr(ctx.sql(f"SELECT id, long_text FROM t WHERE {f} ORDER BY id")
                               .to_arrow_table().to_pylist()) for f in FILTERS]}
    if spark is not None:
        df = spark.read.parquet(p)
        out["spark"] = [repr([tuple(r) for r in df.where(f).select("id", "long_text")
                              .orderBy("id").collect()]) for f in FILTERS]
    return out


def truncated_tail(path: Path, cap: int = 16) -> Tail:
    """Every column index truncated, every Bloom filter dropped, a region."""
    cis: dict[tuple[int, int], ColumnIndex | None] = {}
    with ParquetFile.open(path) as pf:
        for rg in range(pf.num_row_groups):
            for col in range(len(pf.schema.leaves)):
                ci = pf.column_index(rg, col)
                if ci is not None:
                    cis[(rg, col)] = truncate_column_index(ci, pf.leaf(col), cap)
        blooms: dict[tuple[int, int], bytes | None] = {
            (rg, col): None for rg in range(pf.num_row_groups)
            for col in range(len(pf.schema.leaves))}
    return Tail(column_indexes=cis, bloom_filters=blooms, region=REGION,
                key_value={"pqindex.test": "yes"})


def temps(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f".{path.name}{tail_mod.TMP_MARKER}*"))


def check_rewritten(src: Path, dst: Path, tail: Tail, *, before: dict[str, str],
                    digest: tuple[int, str], spark: Any = None) -> None:
    assert rows_by_reader(dst, spark) == before
    assert pages_digest(dst) == digest
    with ParquetFile.open(dst) as new, ParquetFile.open(src) as old:
        assert new.num_rows == old.num_rows
        for rg in range(new.num_row_groups):
            for col in range(len(new.schema.leaves)):
                k = (rg, col)
                want_ci = tail.column_indexes.get(k, old.column_index(*k))
                assert new.column_index(*k) == want_ci
                assert new.offset_index(*k) == old.offset_index(*k)
                if k in tail.bloom_filters:
                    assert new.bloom_filter(*k) is None
                else:
                    b0, b1 = old.bloom_filter(*k), new.bloom_filter(*k)
                    assert (b0 is None) == (b1 is None)
                    assert b0 is None or b1 is None or b0.bitset == b1.bitset
        if tail.region is not None:
            loc = region_locator(new)
            assert loc is not None and loc[1] == len(tail.region)
            assert read_region(new) == tail.region
            with open(dst, "rb") as f:
                f.seek(loc[0])
                assert f.read(loc[1]) == tail.region
            assert loc[0] + loc[1] == new.footer_offset  # just before the footer
        for key, value in tail.key_value.items():
            assert new.key_value_metadata.get(key) == value
        # everything else in the footer is what it was
        assert [kv for kv in old.metadata.key_value_metadata or []
                if kv.key != REGION_KEY and kv.key not in tail.key_value] == [
            kv for kv in new.metadata.key_value_metadata or []
            if kv.key != REGION_KEY and kv.key not in tail.key_value]
        assert new.metadata.schema == old.metadata.schema
        assert new.metadata.created_by == old.metadata.created_by
    assert not temps(dst)


# ---------------------------------------------------------------- rewrites read back


@pytest.mark.parametrize("name", ["pyarrow_bloom", "pyarrow_v2_zstd_plain", "duckdb"])
def test_rewrite_keeps_rows_and_pages(name: str, copy_of: Callable[[str], Path],
                                      tmp_path: Path) -> None:
    src = copy_of(name)
    before, digest = rows_by_reader(src), pages_digest(src)
    filters = filtered_rows(src)

    same = tmp_path / "same.parquet"
    r = rewrite(src, Tail(), same)
    assert r.size == same.stat().st_size and r.data_end == digest[0]
    check_rewritten(src, same, Tail(), before=before, digest=digest)

    t = truncated_tail(src)
    small = tmp_path / "small.parquet"
    r = rewrite(src, t, small)
    assert r.region is not None and r.region[1] == len(REGION)
    assert r.bloom_filter_bytes == 0
    check_rewritten(src, small, t, before=before, digest=digest)
    assert filtered_rows(small) == filters
    if name.startswith("pyarrow"):
        assert r.column_index_bytes < rewrite(src, Tail(), same).column_index_bytes

    # No indexes at all: still plain Parquet every engine reads.
    bare = tmp_path / "bare.parquet"
    r = rewrite(src, Tail(), bare, keep_existing=False)
    assert r.column_index_bytes == r.offset_index_bytes == r.bloom_filter_bytes == 0
    assert rows_by_reader(bare) == before and filtered_rows(bare) == filters
    with ParquetFile.open(bare) as pf:
        assert not any(pf.has_offset_index(0, c) or pf.bloom_filter(0, c)
                       for c in range(len(pf.schema.leaves)))
    assert src.read_bytes()[-4:] == b"PAR1"  # the source was only read


@pytest.mark.spark
def test_rewrite_spark_file(copy_of: Callable[[str], Path], tmp_path: Path, spark: Any) -> None:
    src = copy_of("spark")
    before, digest = rows_by_reader(src, spark), pages_digest(src)
    filters = filtered_rows(src, spark)
    t = truncated_tail(src, cap=8)
    dst = tmp_path / "spark_small.parquet"
    rewrite(src, t, dst)
    check_rewritten(src, dst, t, before=before, digest=digest, spark=spark)
    assert filtered_rows(dst, spark) == filters


def test_region_carried_replaced_and_dropped(copy_of: Callable[[str], Path]) -> None:
    src = copy_of("pyarrow_bloom")
    rows = pq.read_table(src).to_pylist()
    digest = pages_digest(src)
    rewrite(src, Tail(region=b"first region", key_value={"a": "1"}))
    with ParquetFile.open(src) as pf:
        assert read_region(pf) == b"first region"
    # keep_existing: the region is copied along with the other structures
    r = rewrite(src, Tail(key_value={"b": "2"}))
    with ParquetFile.open(src) as pf:
        assert read_region(pf) == b"first region" and r.region == region_locator(pf)
        assert pf.key_value_metadata["a"] == "1" and pf.key_value_metadata["b"] == "2"
        assert pf.bloom_filter(0, 0) is not None
    rewrite(src, Tail(region=b"second", key_value={"a": None}))
    with ParquetFile.open(src) as pf:
        assert read_region(pf) == b"second" and "a" not in pf.key_value_metadata
    r = rewrite(src, Tail(drop_region=True))
    with ParquetFile.open(src) as pf:
        assert r.region is None and REGION_KEY not in pf.key_value_metadata
        assert pf.bloom_filter(0, 0) is not None
    rewrite(src, Tail(region=b"third"))
    rewrite(src, Tail(), keep_existing=False)
    with ParquetFile.open(src) as pf:
        assert region_locator(pf) is None and pf.bloom_filter(0, 0) is None
        assert not pf.has_column_index(0, 0)
    assert pq.read_table(src).to_pylist().__repr__() == repr(rows)
    assert pages_digest(src) == digest
    assert not temps(src)


def test_sorting_columns_and_mode(copy_of: Callable[[str], Path]) -> None:
    src = copy_of("pyarrow_bloom")
    os.chmod(src, 0o640)
    sc = [SortingColumn(column_idx=0, descending=False, nulls_first=False)]
    rewrite(src, Tail(sorting_columns={0: sc, 1: sc, 2: []}))
    with ParquetFile.open(src) as pf:
        groups = pf.metadata.row_groups or []
        assert groups[0].sorting_columns == sc and groups[2].sorting_columns is None
    assert pq.ParquetFile(src).metadata.row_group(0).sorting_columns[0].column_index == 0
    assert src.stat().st_mode & 0o777 == 0o640


def test_tail_inputs_checked(copy_of: Callable[[str], Path]) -> None:
    src = copy_of("pyarrow_bloom")
    original = src.read_bytes()
    with ParquetFile.open(src) as pf:
        ci = pf.column_index(0, 0)
        oi = pf.offset_index(0, 0)
        assert ci is not None and oi is not None
    bad: list[Tail] = [
        Tail(key_value={REGION_KEY: "1:2"}),
        Tail(bloom_filters={(0, 0): b"\x00" * 40}),
        Tail(column_indexes={(9, 0): ci}),
        Tail(column_indexes={(0, 1): ColumnIndex(null_pages=[False], min_values=[b""],
                                                 max_values=[b""], boundary_order=0)}),
        Tail(region=b"x", drop_region=True),
    ]
    for t in bad:
        with pytest.raises(UserInputError):
            rewrite(src, t)
    with pytest.raises(UserInputError, match="needs an offset index"):
        rewrite(src, Tail(column_indexes={(0, 0): ci}), keep_existing=False)
    with pytest.raises(UserInputError, match="offset index page"):
        rewrite(src, Tail(offset_indexes={(0, 1): oi}))
    assert src.read_bytes() == original and not temps(src)


def test_bloom_filters_inside_the_data_stay_in_place(tmp_path: Path) -> None:
    """arrow-rs writes each row group's Bloom filters right after its pages."""
    import datafusion

    src = tmp_path / "arrow_rs.parquet"
    opts = datafusion.ParquetWriterOptions(
        max_row_group_size=writers.ROW_GROUP_ROWS, bloom_filter_on_write=True,
        compression="snappy", allow_single_file_parallelism=False)
    datafusion.SessionContext().from_arrow(writers.make_table()).write_parquet(str(src), opts)
    if src.is_dir():
        part = next(src.glob("*.parquet"))
        shutil.move(part, tmp_path / "part.parquet")
        shutil.rmtree(src)
        src = tmp_path / "part.parquet"
    before = rows_by_reader(src)
    with ParquetFile.open(src) as pf:
        end = data_end(pf)
        old = {rg: pf.column_meta(rg, 0).bloom_filter_offset for rg in range(pf.num_row_groups)}
    inside = [rg for rg, off in old.items() if off is not None and off < end]
    assert inside  # the case this test is about
    dst = tmp_path / "kept.parquet"
    rewrite(src, Tail(region=b"r"), dst)
    with ParquetFile.open(dst) as pf, ParquetFile.open(src) as po:
        for rg in range(pf.num_row_groups):
            off = pf.column_meta(rg, 0).bloom_filter_offset
            assert (off == old[rg]) == (rg in inside)
            b0, b1 = po.bloom_filter(rg, 0), pf.bloom_filter(rg, 0)
            assert b0 is not None and b1 is not None and b0.bitset == b1.bitset
    assert rows_by_reader(dst) == before


def test_unknown_footer_fields_survive(copy_of: Callable[[str], Path], tmp_path: Path) -> None:
    from pqindex.format.structs import FileMetaData
    from pqindex.format.thrift import CT_BINARY, RawField

    src = copy_of("pyarrow_bloom")
    raw = src.read_bytes()
    with ParquetFile.open(src) as pf:
        md = FileMetaData.decode(pf.footer_bytes)
        start = pf.footer_offset
    extra = RawField(fid=200, wire=CT_BINARY, raw=b"\x05hello")
    md.unknown_fields = (extra,)
    groups = md.row_groups or []
    cols = groups[1].columns or []
    cols[2].unknown_fields = (RawField(fid=99, wire=CT_BINARY, raw=b"\x02hi"),)
    footer = md.encode()
    src.write_bytes(raw[:start] + footer + len(footer).to_bytes(4, "little") + b"PAR1")
    dst = tmp_path / "out.parquet"
    rewrite(src, truncated_tail(src), dst)
    with ParquetFile.open(dst) as pf:
        assert pf.metadata.unknown_fields == (extra,)
        new_cols = (pf.metadata.row_groups or [])[1].columns or []
        assert new_cols[2].unknown_fields == cols[2].unknown_fields
    assert repr(pq.read_table(dst).to_pylist()) == repr(pq.read_table(src).to_pylist())


# ---------------------------------------------------------------- failures


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RewriteError, match="no such file") as e:
        rewrite(tmp_path / "nope.parquet", Tail())
    assert str(tmp_path / "nope.parquet") in str(e.value)


def test_encrypted_and_corrupt(copy_of: Callable[[str], Path]) -> None:
    src = copy_of("pyarrow_bloom")
    raw = src.read_bytes()
    src.write_bytes(raw[:-4] + b"PARE")
    with pytest.raises(UnsupportedError):
        rewrite(src, Tail())
    src.write_bytes(raw[:-4] + b"XXXX")
    with pytest.raises(CorruptFileError):
        rewrite(src, Tail())
    src.write_bytes(raw)
    rewrite(src, Tail(region=b"r"))
    with ParquetFile.open(src) as pf:  # a damaged locator is reported, not followed
        kvs = pf.metadata.key_value_metadata or []
    assert any(kv.key == REGION_KEY for kv in kvs)
    text = src.read_bytes()
    loc = text.rindex(REGION_KEY.encode())
    damaged = text.replace(text[loc: loc + 40], text[loc: loc + 40].replace(b":", b"x"), 1)
    src.write_bytes(damaged)
    with pytest.raises(CorruptFileError, match=REGION_KEY):
        rewrite(src, Tail())
    rewrite(src, Tail(drop_region=True))  # the way out
    assert not temps(src)


@pytest.fixture
def hook(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[str], None]], None]]:
    def install(fn: Callable[[str], None]) -> None:
        monkeypatch.setattr(tail_mod, "_test_hook", fn)

    yield install


def test_read_only_directory(copy_of: Callable[[str], Path], tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    src = copy_of("pyarrow_bloom")
    ro = tmp_path / "ro"
    ro.mkdir()
    target = ro / "t.parquet"
    shutil.copyfile(src, target)
    original = target.read_bytes()
    ro.chmod(0o555)
    try:
        probe = ro / ".probe"
        try:
            probe.touch()
            probe.unlink()
            writable = True  # root ignores the mode: refuse creation the way the kernel would
        except PermissionError:
            writable = False
        if writable:
            real_open = os.open

            def refusing_open(path: Any, flags: int, *args: Any, **kw: Any) -> int:
                if flags & os.O_CREAT and os.path.dirname(os.fspath(path)) == str(ro):
                    raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
                return real_open(path, flags, *args, **kw)

            monkeypatch.setattr(os, "open", refusing_open)
        for dst in (None, target):
            with pytest.raises(RewriteError, match="permission denied") as e:
                rewrite(target if dst is None else src, Tail(region=b"x"), dst)
            assert str(target) in str(e.value)
    finally:
        monkeypatch.undo()
        ro.chmod(0o755)
    assert target.read_bytes() == original and not temps(target)


@pytest.mark.parametrize("where", ["copy", "tail", "fsync"])
def test_no_space(where: str, copy_of: Callable[[str], Path],
                  monkeypatch: pytest.MonkeyPatch) -> None:
    src = copy_of("pyarrow_bloom")
    original = src.read_bytes()

    def full(*args: Any, **kw: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device")

    target = {"copy": (os, "copy_file_range"), "tail": (tail_mod, "_write_all"),
              "fsync": (os, "fsync")}[where]
    monkeypatch.setattr(*target, full)
    with pytest.raises(RewriteError, match="no space left on device") as e:
        rewrite(src, Tail(region=REGION))
    monkeypatch.undo()
    assert str(src) in str(e.value)
    assert src.read_bytes() == original and not temps(src)


def test_copy_fallback(copy_of: Callable[[str], Path], tmp_path: Path,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    src = copy_of("pyarrow_bloom")
    calls = []

    def cross_device(*args: Any, **kw: Any) -> Any:
        calls.append(args)
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", cross_device)
    monkeypatch.setattr(tail_mod, "_COPY_CHUNK", 10_000)
    dst = tmp_path / "fallback.parquet"
    rewrite(src, Tail(region=b"r"), dst)
    assert len(calls) == 1  # tried once, then copied by hand in chunks
    assert pages_digest(dst) == pages_digest(src)
    assert repr(pq.read_table(dst).to_pylist()) == repr(pq.read_table(src).to_pylist())


@pytest.mark.parametrize("phase", ["copy", "tail", "synced"])
def test_source_changes_during_rewrite(phase: str, copy_of: Callable[[str], Path],
                                       hook: Callable[[Callable[[str], None]], None]) -> None:
    src = copy_of("pyarrow_bloom")

    def touch(p: str) -> None:
        if p == phase:
            with open(src, "r+b") as f:  # same size, new mtime
                f.seek(100)
                b = f.read(1)
                f.seek(100)
                f.write(b)
            st = src.stat()
            os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))

    hook(touch)
    changed = None
    with pytest.raises(SourceChangedError, match="changed during the rewrite"):
        rewrite(src, Tail(region=b"x"))
    changed = src.read_bytes()
    with ParquetFile.open(src) as pf:
        assert region_locator(pf) is None  # not replaced
    assert changed[-4:] == b"PAR1" and not temps(src)


def test_source_changes_size(copy_of: Callable[[str], Path], tmp_path: Path,
                             hook: Callable[[Callable[[str], None]], None]) -> None:
    src = copy_of("pyarrow_bloom")
    dst = tmp_path / "out.parquet"

    def grow(p: str) -> None:
        if p == "tail":
            with open(src, "ab") as f:
                f.write(b"more")

    hook(grow)
    with pytest.raises(SourceChangedError):
        rewrite(src, Tail(), dst)
    assert not dst.exists() and not temps(dst)


def test_stale_temporaries(copy_of: Callable[[str], Path]) -> None:
    src = copy_of("pyarrow_bloom")
    stale = src.parent / f".{src.name}{tail_mod.TMP_MARKER}0123456789abcdef"
    stale.write_bytes(b"left by a killed rewrite")
    live = src.parent / f".{src.name}{tail_mod.TMP_MARKER}live"
    live.write_bytes(b"a rewrite still running")
    other = src.parent / f".other.parquet{tail_mod.TMP_MARKER}0123"
    other.write_bytes(b"another file's")
    fd = os.open(live, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        rewrite(src, Tail())
        assert not stale.exists()
        assert live.exists() and other.exists()  # held by its writer; not ours
    finally:
        os.close(fd)
    rewrite(src, Tail())
    assert temps(src) == [] and other.exists()


# ---------------------------------------------------------------- crash safety

# A helper process imports pqindex once, then forks one child per run (a fresh
# interpreter per run would spend most of the test importing). The child is
# killed by its pid, and reaped only afterwards, so the pid cannot be reused.
ZYGOTE = """
import os, sys, time
import pqindex.write.tail as t
print("ready", flush=True)
for line in sys.stdin:
    path, delay = line.split()
    pid = os.fork()
    if pid == 0:
        t._COPY_CHUNK = 64 * 1024
        t._test_hook = lambda phase: time.sleep(float(delay))
        try:
            t.rewrite(path, t.Tail(region=b"R" * 100_000, key_value={"crash": "test"},
                      bloom_filters={(0, 0): None}))
        except BaseException:
            os._exit(1)
        os._exit(0)
    print(pid, flush=True)
    sys.stdin.readline()  # "reap"
    print(os.waitpid(pid, 0)[1], flush=True)
"""


class Zygote:
    def __init__(self) -> None:
        env = {**os.environ,
               "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        self.proc = subprocess.Popen([sys.executable, "-c", ZYGOTE], env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._line() == "ready"

    def _line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def start(self, path: Path, delay: float) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{path} {delay}\n")
        self.proc.stdin.flush()
        return int(self._line())

    def reap(self) -> int:
        """The child's wait status."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("reap\n")
        self.proc.stdin.flush()
        return int(self._line())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _big_file(path: Path) -> pa.Table:
    rng = np.random.default_rng(5)
    n = 120_000
    table = pa.table({"id": np.arange(n), "x": rng.random(n),
                      "s": pa.array([f"key-{i:08d}" for i in range(n)])})
    pq.write_table(table, path, write_page_index=True, row_group_size=30_000,
                   compression="none", use_dictionary=False,
                   bloom_filter_options={"id": {"ndv": n, "fpp": 0.05}})
    return table


@pytest.mark.slow
def test_sigkill_at_random_moments(tmp_path: Path) -> None:
    target = tmp_path / "big.parquet"
    table = _big_file(target)
    original = target.read_bytes()
    delay = 0.002
    zygote = Zygote()
    try:
        # One undisturbed run tells how long a rewrite takes.
        t0 = time.monotonic()
        zygote.start(target, delay)
        assert zygote.reap() == 0
        duration = time.monotonic() - t0
        assert target.read_bytes() != original
        target.write_bytes(original)

        rng = random.Random(1234)
        seen = {"original": 0, "new": 0, "temp left": 0}
        runs = 30
        for i in range(runs):
            pid = zygote.start(target, delay)
            time.sleep((i + rng.random()) / runs * duration * 1.3)
            os.kill(pid, signal.SIGKILL)
            zygote.reap()
            data = target.read_bytes()
            if data == original:
                seen["original"] += 1
            else:
                seen["new"] += 1
                with ParquetFile.open(target) as pf:
                    assert pf.key_value_metadata["crash"] == "test"
                    assert read_region(pf) == b"R" * 100_000
                    assert pf.bloom_filter(0, 0) is None
                assert pq.read_table(target).equals(table)
            # The next rewrite removes what a killed one left behind.
            seen["temp left"] += bool(temps(target))
            rewrite(target, Tail())
            assert temps(target) == []
            target.write_bytes(original)
    finally:
        zygote.close()
    print(f"rewrite {duration:.2f}s undisturbed; after SIGKILL: {seen}")
    assert seen["original"] > 0 and seen["new"] > 0 and seen["temp left"] > 0, seen
