"""Cold opens read and parse only what a query uses.

* A chunk's dictionary page is fetched only when a chosen data page is
  dictionary-encoded (pages after a writer's fallback to PLAIN need none).
* Embedded "bloom" blobs are probed one 32-byte block per value, header and
  blocks of every row group in one wave, never read whole.
* The embedded region's directory entries are validated per column, when the
  column is first used; damage in another column's entries never matters.

Results are compared with pyarrow's read + filter; what was read comes from the
I/O trace (no timing).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import xxhash

import pqindex
from pqindex.dataset.indexing import add_indexes
from pqindex.expr.bind import bind
from pqindex.expr.sql import parse_where
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.indexes.base import Scope
from pqindex.indexes.encoding import RegionError
from pqindex.indexes.region import PROBE_MIN_BYTES, BlobEntry, Region, read_region
from pqindex.io.source import LocalFileSource
from pqindex.plan.planner import plan_file
from pqindex.scan.batch import scan_file
from pqindex.scan.executor import ScanOptions, ScanStats
from pqindex.scan.page_decode import arrow_schema


class WaveLog(LocalFileSource):
    """A local file that logs each wave of requests."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path)
        self.waves: list[list[tuple[int, int]]] = []

    def read(self, offset: int, length: int) -> bytes:
        self.waves.append([(offset, length)])
        return super().read(offset, length)

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        if ranges:
            self.waves.append(list(ranges))
        return super().read_ranges(ranges)

    def read_views(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        if ranges:
            self.waves.append(list(ranges))
        return super().read_views(ranges)


def run_file(path: Path, where: str, columns: Sequence[str]
             ) -> tuple[pa.Table, WaveLog, ParquetFile, list[str]]:
    """Plan and scan one file the way a dataset does, through a ``WaveLog``."""
    src = WaveLog(path)
    pf = ParquetFile(src)
    bound = bind(parse_where(where), pf.schema)
    cols = [c.index for c in pf.schema.leaves if c.path[0] in columns]
    warnings: list[str] = []
    plan = plan_file(pf, bound, cols, warnings=warnings)
    schema = arrow_schema(pf)
    tables = [t.select(list(columns)) for t in scan_file(
        pf, plan, [r for r in plan.row_groups if not r.skipped], bound, columns, schema, {},
        ScanOptions(), ScanStats())]
    out = pa.concat_tables(tables) if tables else schema.empty_table().select(list(columns))
    return out, src, pf, warnings


def _expected(path: Path, columns: Sequence[str], mask: Any) -> pa.Table:
    return pq.read_table(path, columns=list(columns)).filter(mask)


def _overlap(reads: Sequence[tuple[int, int]], lo: int, hi: int) -> int:
    return sum(max(0, min(o + n, hi) - max(o, lo)) for o, n in reads)


# ------------------------------------------------------------------ dictionaries


@pytest.fixture(scope="module")
def fallback_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One row group whose `id` dictionary fills up: early pages dictionary-encoded,
    later ones PLAIN (pyarrow's fallback)."""
    n = 40_000
    path = tmp_path_factory.mktemp("dict") / "fallback.parquet"
    t = pa.table({"id": pa.array(np.arange(n, dtype=np.int64) * 7),
                  "v": pa.array(np.arange(n, dtype=np.float64) / 3)})
    pq.write_table(t, path, dictionary_pagesize_limit=64 * 1024, max_rows_per_page=1000,
                   write_page_index=True, compression="snappy")
    with ParquetFile.open(path) as pf:
        stats = pf.column_meta(0, 0).encoding_stats or []
        assert {s.encoding for s in stats if s.page_type == 0} == {0, 8}  # PLAIN + RLE_DICT
    return path


def _dictionary_range(pf: ParquetFile, col: int) -> tuple[int, int]:
    start = chunk_range(pf.column_meta(0, col))[0]
    oi = pf.offset_index(0, col)
    assert oi is not None and oi.page_locations
    first = oi.page_locations[0].offset or 0
    assert first > start
    return start, first


@pytest.mark.parametrize("row", [3, 5_000, 39_999])
def test_dictionary_page_read_only_for_dictionary_encoded_pages(
        fallback_file: Path, row: int) -> None:
    value = row * 7
    got, log, pf, _ = run_file(fallback_file, f"id = {value}", ["id", "v"])
    assert got.equals(_expected(fallback_file, ["id", "v"], pc.field("id") == value))
    assert got.num_rows == 1
    lo, hi = _dictionary_range(pf, 0)
    reads = [r for w in log.waves for r in w]
    oi = pf.offset_index(0, 0)
    assert oi is not None and oi.page_locations
    page = int(np.searchsorted([p.first_row_index or 0 for p in oi.page_locations], row,
                               side="right")) - 1
    encoded = pf.pages_need_dictionary(0, 0, [page])
    read_dictionary = _overlap(reads, lo, hi) > 0
    # Tail reads may hold the dictionary of a small file: only check the data waves.
    if not encoded:
        assert not read_dictionary, (row, page)
    else:
        assert read_dictionary


def test_wrong_encoding_stats_still_decode(fallback_file: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A footer whose encoding stats would say no page needs the dictionary: the
    dictionary is read on demand, the rows are right."""
    monkeypatch.setattr(ParquetFile, "_leading_dictionary_pages", lambda self, rg, col: 0)
    for value in (0, 7 * 123, 7 * 39_000):
        got, _log, _pf, _ = run_file(fallback_file, f"id = {value}", ["id", "v"])
        assert got.equals(_expected(fallback_file, ["id", "v"], pc.field("id") == value))
        assert got.num_rows == 1
    ds = pqindex.dataset(str(fallback_file))
    t = ds.scan(columns=["id", "v"], where="id BETWEEN 700 AND 210000").to_table()
    assert t.equals(_expected(fallback_file, ["id", "v"],
                              (pc.field("id") >= 700) & (pc.field("id") <= 210000)))


# ------------------------------------------------------------------ embedded Bloom probes


@pytest.fixture(scope="module")
def bloom_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(7)
    n = 160_000
    keys = rng.integers(0, 10**12, n, dtype=np.int64)
    t = pa.table({"id": pa.array(np.arange(n, dtype=np.int64)), "k": pa.array(keys)})
    path = tmp_path_factory.mktemp("bloom") / "b.parquet"
    pq.write_table(t, path, row_group_size=40_000, max_rows_per_page=10_000,
                   write_page_index=True, use_dictionary=False)
    add_indexes(path, bloom="k", bloom_scope="row_group,page")
    return path


# Keys are random in [0, 10^12): values near the middle are absent (checked by the
# tests' reference reads) and inside every row group's min/max, so the footer
# statistics cannot decide and the Bloom filters must.
ABSENT = 500_000_000_001


def _bloom_blobs(path: Path, scope: Scope) -> tuple[int, list[BlobEntry]]:
    with ParquetFile.open(path) as pf:
        region, _ = read_region(pf)
    assert region is not None
    blobs = [e for e in region.find(kind="bloom", column="k") if e.scope == scope]
    return region.region_offset, blobs


@pytest.mark.parametrize("values", [[ABSENT], [ABSENT + 1, ABSENT + 2, ABSENT + 3],
                                    "present"])
def test_embedded_bloom_probe_reads_one_block_per_value(bloom_file: Path,
                                                        values: Any) -> None:
    keys = pq.read_table(bloom_file, columns=["k"]).column(0).to_numpy()
    if values == "present":
        values = [int(keys[12_345]), int(keys[150_000])]
    where = (f"k = {values[0]}" if len(values) == 1
             else f"k IN ({', '.join(map(str, values))})")
    got, log, _pf, _ = run_file(bloom_file, where, ["id", "k"])
    want = _expected(bloom_file, ["id", "k"], pc.is_in(pc.field("k"), pa.array(values)))
    assert got.sort_by("id").equals(want.sort_by("id"))
    base, rg_blobs = _bloom_blobs(bloom_file, Scope.ROW_GROUP)
    assert len(rg_blobs) == 4 and all(e.length >= PROBE_MIN_BYTES for e in rg_blobs)
    waves_touching = []
    for e in rg_blobs:
        lo, hi = base + e.offset, base + e.offset + e.length
        hlen = e.length - int(e.properties["bytes"])
        read = [0] + [_overlap(w, lo, hi) for w in log.waves[1:]]  # not the tail read
        # The header and one block per value, not the bitset.
        assert sum(read) <= hlen + 32 * len(values), (e, read)
        waves_touching.append({i for i, n in enumerate(read) if n})
    # Every row group's probe in the same single wave.
    assert len(set().union(*waves_touching)) == 1
    _, page_blobs = _bloom_blobs(bloom_file, Scope.PAGE)
    for e in page_blobs:
        lo, hi = base + e.offset, base + e.offset + e.length
        hlen = e.length - int(e.properties["bytes"])
        assert sum(_overlap(w, lo, hi) for w in log.waves[1:]) <= hlen + 32 * len(values)


def _flip(path: Path, offset: int, mask: int = 0xFF) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ mask]))


def test_damaged_probed_header_is_ignored(bloom_file: Path, tmp_path: Path) -> None:
    """A probed blob whose header is bad answers nothing (a warning), never drops rows."""
    path = tmp_path / "damaged.parquet"
    shutil.copyfile(bloom_file, path)
    base, rg_blobs = _bloom_blobs(path, Scope.ROW_GROUP)
    _flip(path, base + rg_blobs[1].offset)  # the body version byte
    keys = pq.read_table(path, columns=["k"]).column(0).to_numpy()
    value = int(keys[50_000])  # in row group 1
    got, _log, _pf, warnings = run_file(path, f"k = {value}", ["id", "k"])
    assert got.equals(_expected(path, ["id", "k"], pc.field("k") == value))
    assert got.num_rows >= 1
    assert any("bloom blob for column 'k' (row group 1)" in w for w in warnings), warnings


# ------------------------------------------------------------------ lazy directory


def _region(entries: list[dict[str, Any]], blob: bytes) -> bytes:
    d = json.dumps({"blobs": entries}).encode()
    return (struct.pack("<4sHH", b"PQIX", 2, 0) + blob + d
            + struct.pack("<IQHH4s", len(d), xxhash.xxh64_intdigest(d, 0), 2, 0, b"PQIX"))


def _entry(column: str, offset: int, length: int, blob: bytes, **extra: Any) -> dict[str, Any]:
    return {"kind": "zone_maps", "column": column, "scope": "file", "offset": offset,
            "length": length, "xxh64": f"{xxhash.xxh64_intdigest(blob, 0):016x}", **extra}


def test_directory_entries_validated_when_their_column_is_used() -> None:
    blob = b"x" * 16
    entries = [
        _entry("a", 8, 16, blob),
        _entry("b", 8, 10_000, blob),  # runs past the blob area
        {"kind": "zone_maps", "column": "c", "scope": "page", "offset": 8, "length": 16,
         "xxh64": "0" * 16},  # page scope without row group and page
    ]
    data = _region(entries, blob)
    region = Region.parse(data, file_size=len(data) + 4, region_offset=4)
    assert region.warnings == []  # nothing validated yet
    assert [e.column for e in region.find(column="a")] == ["a"]
    assert region.warnings == []  # `a` alone: the others are not looked at
    assert region.find(column="b") == []
    assert len(region.warnings) == 1 and "'b'" in region.warnings[0]
    assert [e.column for e in region.blobs] == ["a"]  # every column now
    assert len(region.warnings) == 2 and "'c'" in region.warnings[1]
    with pytest.raises(RegionError):
        Region.parse(data, file_size=len(data) + 4, region_offset=4, strict=True)


def test_bad_checksum_found_when_its_column_opens() -> None:
    good, bad = b"g" * 16, b"b" * 16
    entries = [_entry("a", 8, 16, good), _entry("b", 24, 16, good)]  # b's sum is a's
    data = _region(entries, good + bad)
    region = Region.parse(data, file_size=len(data) + 4, region_offset=4)
    region.find(column="a")
    assert region.warnings == []
    assert region.find(column="b") == []  # held bytes checked as `b` opens: dropped
    assert any("checksum" in w for w in region.warnings)


def test_warm_probes_of_new_values_in_one_wave(bloom_file: Path) -> None:
    """A second query on the same open file probes its own values' blocks of every
    row group in one wave too (the headers are not read again)."""
    src = WaveLog(bloom_file)
    pf = ParquetFile(src)
    base, rg_blobs = _bloom_blobs(bloom_file, Scope.ROW_GROUP)
    for value in (ABSENT + 11, ABSENT + 12):
        before = len(src.waves)
        bound = bind(parse_where(f"k = {value}"), pf.schema)
        plan = plan_file(pf, bound, [0, 1])
        assert all(rg.skipped for rg in plan.row_groups)  # absent values
        new = src.waves[before:]
        touching = [i for i, w in enumerate(new)
                    if any(_overlap(w, base + e.offset, base + e.offset + e.length)
                           for e in rg_blobs)]
        assert len(touching) == 1, new
        assert sum(_overlap(new[touching[0]], base + e.offset, base + e.offset + e.length)
                   for e in rg_blobs) <= len(rg_blobs) * (32 + 64)
