"""Format 3.0 of the embedded index region: per-column sub-directories.

Round trips of the directory codec, regions of format 2.0 (one JSON directory,
written here by ``_encode_v2``, the old encoder kept as test code) still read,
damage to one column's sub-directory drops that column's indexes only (results
still equal pyarrow's read + filter), and I/O traces: a query reads the
sub-directories of its own columns only.
"""

from __future__ import annotations

import dataclasses
import json
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
from pqindex.format.file import ParquetFile
from pqindex.format.structs import KeyValue
from pqindex.format.thrift import encode
from pqindex.indexes.base import Blob, Scope
from pqindex.indexes.encoding import RegionError
from pqindex.indexes.region import (
    HEADER_SIZE,
    REGION_KEY,
    SUBDIRECTORY_AHEAD_BYTES,
    TRAILER_SIZE,
    Region,
    encode_region,
    read_region,
    region_key_value,
)
from pqindex.io.source import IOStats

ROWS = 40_000


def _encode_v2(blobs: Sequence[Blob]) -> bytes:
    """A format-2.0 region, as the old encoder wrote it: one JSON directory."""
    entries = []
    pos = HEADER_SIZE
    for b in blobs:
        e: dict[str, Any] = {"kind": b.kind, "column": b.column, "scope": Scope(b.scope).value}
        if b.row_group is not None:
            e["row_group"] = b.row_group
        if b.page is not None:
            e["page"] = b.page
        e.update(offset=pos, length=len(b.data),
                 xxh64=f"{xxhash.xxh64_intdigest(b.data, 0):016x}")
        if b.properties:
            e["properties"] = dict(b.properties)
        entries.append(e)
        pos += len(b.data)
    d = json.dumps({"blobs": entries}, separators=(",", ":")).encode()
    return b"".join([struct.pack("<4sHH", b"PQIX", 2, 0), *(b.data for b in blobs), d,
                     struct.pack("<IQHH4s", len(d), xxhash.xxh64_intdigest(d, 0), 2, 0,
                                 b"PQIX")])


def _blobs() -> list[Blob]:
    out = [Blob("distinct", "a", Scope.PAGE, rg, p, bytes([rg, p]) * (3 + p),
                {"count": p, **({"omitted": True} if p == 2 else {})})
           for rg in range(3) for p in range(4)]
    out += [Blob("bloom", "b.c", Scope.ROW_GROUP, rg, None, bytes(40 + rg),
                 {"ndv": 1000 + rg, "fpp": 0.01, "bytes": 32}) for rg in range(3)]
    out += [Blob("future_kind", "a", Scope.FILE, None, None, b"\x00\x01",
                 {"nested": {"x": [1, 2.5, None]}, "big": 2**70, "neg": -3})]
    out += [Blob("zone_maps", "b.c", Scope.FILE, None, None, b"zz", {})]
    return out


def _key(e: Any) -> tuple[Any, ...]:
    return (e.kind, e.column, Scope(e.scope), e.row_group, e.page, dict(e.properties))


@pytest.mark.parametrize("encoder", [encode_region, _encode_v2])
def test_round_trip(encoder: Any) -> None:
    blobs = _blobs()
    data = encoder(blobs)
    region = Region.parse(data, file_size=len(data) + 4, region_offset=4, strict=True)
    assert region.version == ((3, 0) if encoder is encode_region else (2, 0))
    assert sorted(map(_key, region.blobs), key=repr) == sorted(map(_key, blobs), key=repr)
    for e in region.blobs:
        b = region.blob(e)
        assert b.data == next(x.data for x in blobs if _key(x) == _key(e))
    assert not region.warnings


def test_directory_is_small() -> None:
    """Compact columnar sub-directories: a fraction of the JSON directory's bytes."""
    blobs = [Blob("bloom", "u", Scope.PAGE, rg, p, bytes(64), {"ndv": 900 + p, "fpp": 0.01,
                                                              "bytes": 32})
             for rg in range(8) for p in range(500)]
    new, old = encode_region(blobs), _encode_v2(blobs)
    blob_bytes = sum(len(b.data) for b in blobs)
    new_dir = len(new) - blob_bytes - HEADER_SIZE - TRAILER_SIZE
    old_dir = len(old) - blob_bytes - HEADER_SIZE - TRAILER_SIZE
    assert new_dir * 5 < old_dir and new_dir < 4000 * 24


def test_find_opens_only_matching_columns() -> None:
    data = encode_region(_blobs())
    reads: list[tuple[int, int]] = []

    def fetch(at: int, n: int) -> bytes:
        reads.append((at, n))
        return data[at:at + n]

    tail = len(data) - TRAILER_SIZE - struct.unpack_from("<I", data, len(data) - 20)[0]
    region = Region.parse(data[tail:], file_size=len(data) + 4, region_offset=4,
                          length=len(data), fetch=fetch)
    found = region.find(kind="bloom")
    assert {e.column for e in found} == {"b.c"} and len(found) == 3
    # Only "b.c"'s sub-directory was read (one request), not "a"'s.
    assert len(reads) == 1 and tail - reads[0][0] < 200
    assert region.find(kind="bloom", column="a") == []


# ---------------------------------------------------------------- real files


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[pa.Table, Path]:
    rng = np.random.default_rng(7)
    table = pa.table({
        "id": np.arange(ROWS, dtype=np.int64),
        "cat": pa.array([f"c{v}" for v in rng.integers(0, 30, ROWS)]),
        "user": rng.integers(0, 10**12, ROWS, dtype=np.int64),
    })
    path = tmp_path_factory.mktemp("regiondir") / "t.parquet"
    pq.write_table(table, path, row_group_size=10_000, max_rows_per_page=100,
                   write_page_index=True)
    add_indexes(path, bloom="user", distinct="cat")
    return table, path


def _location(path: Path) -> tuple[int, int]:
    with ParquetFile.open(path) as pf:
        off, length = pf.key_value_metadata[REGION_KEY].split(":")
    return int(off), int(length)


def _splice(src: Path, dst: Path, region: bytes) -> Path:
    """``src`` with ``region`` appended to its body and the footer key pointing at it."""
    with ParquetFile.open(src) as pf:
        raw = src.read_bytes()
        body = raw[: pf.footer_offset]
        md = pf.metadata
        kv = [k for k in (md.key_value_metadata or []) if k.key != REGION_KEY]
        kv.append(KeyValue(key=REGION_KEY, value=region_key_value(len(body), len(region))))
        md.key_value_metadata = kv
        footer = encode(md)
    dst.write_bytes(body + region + footer + struct.pack("<I", len(footer)) + b"PAR1")
    return dst


def _region_blobs(path: Path) -> list[Blob]:
    off, length = _location(path)
    data = path.read_bytes()
    region = Region.parse(data[off:off + length], file_size=len(data), region_offset=off,
                          strict=True)
    return [region.blob(e) for e in sorted(region.blobs, key=lambda e: e.offset)]


def _queries(table: pa.Table) -> list[tuple[str, pc.Expression]]:
    u = table.column("user")
    return [(f"user = {u[123].as_py()}", pc.field("user") == u[123].as_py()),
            ("user = 5", pc.field("user") == 5),
            ("cat = 'c7'", pc.field("cat") == "c7"),
            ("cat = 'absent'", pc.field("cat") == "absent"),
            (f"cat = 'c3' AND user = {u[31_000].as_py()}",
             (pc.field("cat") == "c3") & (pc.field("user") == u[31_000].as_py()))]


def _check_results(path: Path, table: pa.Table) -> list[str]:
    warnings: list[str] = []
    ds = pqindex.dataset(str(path))
    for where, expr in _queries(table):
        scan = ds.scan(where=where)
        got = scan.to_table().sort_by("id")
        want = pq.read_table(path).filter(expr).sort_by("id")
        assert got.equals(want), where
        warnings += scan.report.to_dict().get("warnings", [])
    return warnings


def test_version_2_region_still_reads(indexed: tuple[pa.Table, Path], tmp_path: Path) -> None:
    table, path = indexed
    blobs = _region_blobs(path)
    old = _splice(path, tmp_path / "v2.parquet", _encode_v2(blobs))
    with ParquetFile.open(old) as pf:
        region, warnings = read_region(pf, strict=True)
        assert region is not None and region.version == (2, 0) and not warnings
        assert sorted(map(_key, region.blobs), key=repr) == sorted(map(_key, blobs), key=repr)
    assert _check_results(old, table) == []


def _reseal_subdirectory(path: Path, column: str, edit: Any) -> None:
    """Replace ``column``'s sub-directory bytes (same length) and fix the checksums
    that cover them (top-level entry, top-level directory): damage a writer made."""
    off, length = _location(path)
    data = bytearray(path.read_bytes())
    trailer = off + length - TRAILER_SIZE
    dir_len = struct.unpack_from("<I", data, trailer)[0]
    d0 = trailer - dir_len
    top = json.loads(bytes(data[d0:trailer]))
    (item,) = [c for c in top["columns"] if c["column"] == column]
    at = off + item["offset"]
    sub = bytearray(data[at:at + item["length"]])
    edit(sub)
    data[at:at + len(sub)] = sub
    item["xxh64"] = f"{xxhash.xxh64_intdigest(bytes(sub), 0):016x}"
    d = json.dumps(top, separators=(",", ":")).encode()
    assert len(d) == dir_len
    data[d0:trailer] = d
    struct.pack_into("<Q", data, trailer + 4, xxhash.xxh64_intdigest(d, 0))
    path.write_bytes(bytes(data))


def _flip_sub(path: Path, column: str) -> None:
    off, _ = _location(path)
    with ParquetFile.open(path) as pf:
        region, _ = read_region(pf)
        assert region is not None
        cd = region._columns[column][1]
    data = bytearray(path.read_bytes())
    data[off + cd.offset + cd.length // 2] ^= 0x20
    path.write_bytes(bytes(data))


def _out_of_bounds(sub: bytearray) -> None:
    """An offset jump (else the first blob's length) set far beyond the region."""
    n, jumps = struct.unpack_from("<II", sub, 4)
    widths = sub[16:21]
    pos = 21 + n * (sum(widths) + 8)
    if jumps:
        struct.pack_into("<Q", sub, pos + jumps * 4, 2**40)
        return
    pos = 21 + n * sum(widths[:4])
    w = widths[4]
    assert w >= 2
    sub[pos:pos + w] = (256 ** w - 1).to_bytes(w, "little")


def _absurd_count(sub: bytearray) -> None:
    struct.pack_into("<I", sub, 4, 0x7FFF_FFFF)


@pytest.mark.parametrize("damage", ["checksum", "out_of_bounds", "absurd_count"])
@pytest.mark.parametrize("column", ["user", "cat"])
def test_damaged_subdirectory_drops_that_column(indexed: tuple[pa.Table, Path],
                                                tmp_path: Path, damage: str,
                                                column: str) -> None:
    table, path = indexed
    bad = tmp_path / "bad.parquet"
    shutil.copyfile(path, bad)
    if damage == "checksum":
        _flip_sub(bad, column)
    else:
        _reseal_subdirectory(bad, column, _out_of_bounds if damage == "out_of_bounds"
                             else _absurd_count)
    other = "cat" if column == "user" else "user"
    with ParquetFile.open(bad) as pf:
        region, warnings = read_region(pf)
        assert region is not None and not warnings  # the column is not opened yet
        assert region.find(column=other)
        assert not region.warnings
        assert region.find(column=column) == []
        assert len(region.warnings) == 1 and repr(column) in region.warnings[0]
        with pytest.raises(RegionError):
            read_region(pf, strict=True)
    warnings = _check_results(bad, table)
    assert warnings and all(repr(column) in w for w in warnings)


def test_query_reads_only_its_columns_subdirectory(indexed: tuple[pa.Table, Path],
                                                   tmp_path: Path) -> None:
    """Many page-scope blobs in two columns; a tail read that holds the trailer only:
    a lookup on "user" reads the top-level directory and "user"'s sub-directory, not
    "cat"'s; the 2.0 region of the same blobs reads its whole directory."""
    table, path = indexed
    old = _splice(path, tmp_path / "v2.parquet", _encode_v2(_region_blobs(path)))
    value = table.column("user")[777].as_py()
    read: dict[str, int] = {}
    for name, p in (("new", path), ("old", old)):
        off, _ = _location(p)
        with ParquetFile.open(p) as pf:
            tail = pf.file_size - pf.footer_offset + TRAILER_SIZE
        stats = IOStats()
        with ParquetFile.open(p, stats=stats, tail_bytes=tail) as pf:
            stats.reset()
            region, _ = read_region(pf)
            assert region is not None
            if name == "new":
                spans = {c: (off + cd.offset, off + cd.offset + cd.length)
                         for c, (_, cd) in region._columns.items()}
            region.open_columns(["user"])
            assert region.find(column="user", scope=Scope.PAGE)
            got = [(at, at + n) for at, n in stats.trace]
            read[name] = stats.bytes_read
        if name == "new":
            u0, u1 = spans["user"]
            c0, c1 = spans["cat"]
            # "user"'s read whole; "cat"'s not (at most the 4 KiB read ahead of the
            # top-level directory reaches into it)
            assert any(a <= u0 and u1 <= b for a, b in got)
            assert not any(a <= c0 and c1 <= b for a, b in got)
            assert c1 - c0 > SUBDIRECTORY_AHEAD_BYTES and u1 - u0 > SUBDIRECTORY_AHEAD_BYTES
            assert stats.bytes_read < (u1 - u0) + (c1 - c0)
    assert read["new"] * 3 < read["old"]
    scan = pqindex.dataset(str(path)).scan(where=f"user = {value}")
    assert scan.to_table().sort_by("id").equals(
        pq.read_table(path).filter(pc.field("user") == value).sort_by("id"))


def test_decode_checks_counts_and_bounds_before_allocating() -> None:
    from pqindex.indexes.region_dir import decode_column, parse_columns

    blobs = [b for b in _blobs() if b.column == "a"]
    data = encode_region(blobs)
    dir_len = struct.unpack_from("<I", data, len(data) - TRAILER_SIZE)[0]
    top = json.loads(data[len(data) - TRAILER_SIZE - dir_len:len(data) - TRAILER_SIZE])
    (cd,), blob_end = parse_columns(top, HEADER_SIZE, len(data) - TRAILER_SIZE - dir_len)
    sub = data[cd.offset:cd.offset + cd.length]
    assert len(decode_column(sub, cd, HEADER_SIZE, blob_end)) == len(blobs)
    huge = dataclasses.replace(cd, count=2**31)
    bad = bytearray(sub)
    struct.pack_into("<I", bad, 4, 2**31)  # agrees with the directory, not with the bytes
    with pytest.raises(RegionError, match="need"):
        decode_column(bytes(bad), huge, HEADER_SIZE, blob_end)
    with pytest.raises(RegionError, match="past the blob area"):
        decode_column(sub, cd, HEADER_SIZE, blob_end - 1)  # the last blob one byte over
    with pytest.raises(RegionError):
        decode_column(sub[:-1], cd, HEADER_SIZE, blob_end)  # truncated
    with pytest.raises(RegionError, match="more than its counts"):
        decode_column(sub + b"\x00", cd, HEADER_SIZE, blob_end)
    with pytest.raises(RegionError, match="kind"):
        decode_column(sub, dataclasses.replace(cd, kinds=()), HEADER_SIZE, blob_end)


def test_check_validates_every_subdirectory(indexed: tuple[pa.Table, Path],
                                            tmp_path: Path) -> None:
    from pqindex.errors import CorruptFileError
    from pqindex.inspect import check_embedded

    _, path = indexed
    with ParquetFile.open(path) as pf:
        check_embedded(pf)  # a sound region passes
    bad = tmp_path / "bad.parquet"
    shutil.copyfile(path, bad)
    _reseal_subdirectory(bad, "cat", _out_of_bounds)
    with ParquetFile.open(bad) as pf, pytest.raises(CorruptFileError, match="'cat'"):
        check_embedded(pf)
