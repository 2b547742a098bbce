"""The C decoder (pqindex.format._compact) against the pure-Python one.

Both must give the same objects, down to the kw-only bookkeeping attributes,
and fail on exactly the same inputs.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import random
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import PARQUET_TESTING, import_or_missing
from pqindex.format import thrift
from pqindex.format.structs import (
    ColumnIndex,
    FileMetaData,
    OffsetIndex,
    PageHeader,
    Statistics,
)

_compact = import_or_missing("pqindex.format._compact", "the C module pqindex.format._compact")

pytestmark = pytest.mark.skipif(
    thrift._accel is None, reason="C decoder disabled (PQINDEX_PURE_PYTHON)"
)

CORPUS = PARQUET_TESTING / "data"

FALLBACK = "fallback"


def c_decode(cls: type, buf: bytes, pos: int = 0) -> Any:
    """The C decoder alone; FALLBACK where it hands the buffer to the pure path."""
    spec = thrift._accel_spec(cls)
    assert spec, f"no C spec for {cls.__name__}"
    res = _compact.decode(spec, buf, pos)
    return FALLBACK if res is None else res


def same(a: Any, b: Any) -> bool:
    """Deep equality incl. kw-only attributes, exact types and float bits (NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, thrift.ThriftStruct):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return bool(a == b)


def all_tracked(a: Any) -> bool:
    """The C decoder untracks what it builds while it runs; all must be tracked after."""
    if isinstance(a, thrift.ThriftStruct):
        return gc.is_tracked(a) and all(
            all_tracked(getattr(a, f.name)) for f in dataclasses.fields(a)
        )
    if isinstance(a, list):
        return gc.is_tracked(a) and all(all_tracked(x) for x in a)
    return True


def encoded(obj: thrift.ThriftStruct) -> Any:
    try:
        return obj.encode()
    except Exception as e:  # same failure on both sides is fine
        return type(e)


def outcome(fn: Any, cls: type, buf: bytes, pos: int = 0) -> Any:
    try:
        return fn(cls, buf, pos)
    except thrift.ThriftError:
        return thrift.ThriftError


def assert_parity(cls: type, buf: bytes, pos: int = 0) -> Any:
    """C and pure results agree; returns the pure result (or ThriftError)."""
    py = outcome(thrift._decode_py, cls, buf, pos)
    c = outcome(c_decode, cls, buf, pos)
    if c is FALLBACK:
        return py
    if py is thrift.ThriftError or c is thrift.ThriftError:
        assert c is py, f"C gave {c!r}, pure gave {py!r}"
        return py
    (po, pend), (co, cend) = py, c
    assert cend == pend
    assert same(co, po)
    assert all_tracked(co)
    assert encoded(co) == encoded(po)
    return py


# ---------------------------------------------------------------- corpus


def corpus_files() -> list[Path]:
    """The corpus files with a plain footer (the corpus is in the repository)."""
    assert CORPUS.is_dir(), f"no parquet-testing corpus at {CORPUS}"
    out = []
    for p in sorted(CORPUS.rglob("*.parquet")):
        with p.open("rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() < 12:
                continue
            f.seek(-4, os.SEEK_END)
            if f.read(4) == b"PAR1":
                out.append(p)
    return out


def footer(data: bytes) -> bytes:
    (n,) = struct.unpack("<I", data[-8:-4])
    return data[max(0, len(data) - 8 - n) : -8]


FILES = corpus_files()


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_corpus_parity(path: Path) -> None:
    data = path.read_bytes()
    buf = footer(data)
    py = assert_parity(FileMetaData, buf)
    if py is thrift.ThriftError:
        return
    meta = py[0]
    assert thrift.decode(FileMetaData, buf)[0] == meta
    assert c_decode(FileMetaData, buf)[0] == meta
    # Page indexes and the first page headers exercise the other structs and pos > 0.
    for rg in meta.row_groups or ():
        for cc in rg.columns or ():
            if cc.column_index_offset is not None:
                assert_parity(ColumnIndex, data, cc.column_index_offset)
            if cc.offset_index_offset is not None:
                assert_parity(OffsetIndex, data, cc.offset_index_offset)
            md = cc.meta_data
            if md is not None:
                for off in (md.dictionary_page_offset, md.data_page_offset):
                    if off is not None and 0 <= off < len(data):
                        assert_parity(PageHeader, data, off)


# ---------------------------------------------------------------- mutation fuzz


def fuzz_seeds() -> list[bytes]:
    seeds = []
    for p in FILES:
        buf = footer(p.read_bytes())
        if 0 < len(buf) <= 12_000 and not isinstance(
            outcome(thrift._decode_py, FileMetaData, buf), type
        ):
            seeds.append(buf)
    return seeds


def mutate(rng: random.Random, buf: bytes) -> bytes:
    b = bytearray(buf)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):
        op = rng.randrange(7)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b:  # replace a byte
            b[min(i, len(b) - 1)] = rng.randrange(256)
        elif op == 1 and b:  # flip a bit
            b[min(i, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif op == 2:  # truncate
            del b[i:]
        elif op == 3:  # insert random bytes
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12)))
        elif op == 4:  # delete a run
            del b[i : i + rng.randrange(1, 16)]
        elif op == 5:  # duplicate a run (repeated fields, lists)
            j = rng.randrange(len(b) + 1)
            b[j:j] = b[i : i + rng.randrange(1, 64)]
        else:  # interesting values: continuation bytes, long headers, 0xFF
            b[i:i] = bytes([rng.choice((0x80, 0xFF, 0x0C, 0x19, 0x1C, 0xF9, 0x00, 0x01))])
    return bytes(b)


def test_mutation_fuzz_parity() -> None:
    seeds = fuzz_seeds()
    assert seeds
    rng = random.Random(20240611)
    counts = {"ok": 0, "error": 0, "fallback": 0}
    for _ in range(4000):
        buf = mutate(rng, rng.choice(seeds))
        c = outcome(c_decode, FileMetaData, buf)
        if c is FALLBACK:
            counts["fallback"] += 1
        res = assert_parity(FileMetaData, buf)
        counts["error" if res is thrift.ThriftError else "ok"] += 1
    # The mutations must reach both outcomes, and the C path must do the work.
    assert counts["ok"] > 200 and counts["error"] > 200, counts
    assert counts["fallback"] < 100, counts


def test_no_leaks_on_error_paths() -> None:
    """Each leaked instance would keep a reference to its class."""
    seeds = fuzz_seeds()
    assert seeds
    classes = [thrift.RawField, *thrift._ACCEL_SPECS]
    rng = random.Random(7)
    bufs = [mutate(rng, rng.choice(seeds)) for _ in range(300)]
    for buf in bufs:  # warm up caches and specs
        outcome(c_decode, FileMetaData, buf)
    before = [sys.getrefcount(k) for k in classes]
    for _ in range(3):
        for buf in bufs:
            outcome(c_decode, FileMetaData, buf)
    after = [sys.getrefcount(k) for k in classes]
    assert after == before


# ---------------------------------------------------------------- targeted cases


def varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def zz(n: int) -> bytes:
    return varint((n << 1) ^ (n >> 63))


@pytest.mark.parametrize(
    "buf",
    [
        b"",
        b"\x15",  # header, then nothing
        b"\x36" + b"\x80" * 10 + b"\x01\x00",  # 11-byte varint
        b"\x36" + b"\xff" * 9 + b"\x01\x00",  # int64 min: fine
        b"\x36" + b"\xff" * 9 + b"\x7f\x00",  # 70-bit value: pure path's big int
        b"\x16" + b"\xff" * 9 + b"\x7f\x00",  # the same, skipped as unknown
        b"\x18" + varint(1 << 40) + b"ab\x00",  # binary longer than the buffer
        b"\x19\xf5" + varint(1 << 60) + b"\x00",  # huge list count
        b"\x19\xf5" + b"\xff" * 10 + b"\x00",  # huge, wide list count
        b"\x1b" + varint(1 << 62) + b"\x55\x00",  # huge map (unknown field 1 of Statistics)
        b"\x1b\x02\x11\x01\x02\x03\x04\x00",  # map<bool,bool> skipped
        b"\x1b\x01\x00\x00",  # map with invalid kv types
        b"\x1d\x00",  # unknown wire type 13
        b"\x10\x00",  # delta header with wire type 0
        b"\x0c" + zz(-3) + b"\x00\x00",  # negative field id, unknown struct
        b"\x06" + zz(1 << 61) + b"\x02\x00",  # fid too big for C: fallback
        b"\x06" + b"\xff" * 9 + b"\x7f\x02\x00",  # 70-bit fid
        b"\x37\x02\x15\x04\x00",  # ascending ids, wire types that don't fit
        b"\x35\x04\x05" + zz(1) + b"\x08\x00",  # fid 3 then long-form fid 1: jumbled
        b"\x17" + b"\x00" * 7,  # double past the end (unknown 1 in Statistics)
        b"\x19\x38ab\x00",  # list<binary> header with wrong element type
        b"\x19\x3a" + b"\x00" * 5,  # set, unknown elements
    ],
)
def test_edge_cases(buf: bytes) -> None:
    assert_parity(Statistics, buf)
    assert_parity(FileMetaData, buf)
    assert_parity(ColumnIndex, buf)


def nested_unknown(depth: int) -> bytes:
    """An unknown struct field nested ``depth`` structs deep."""
    return (b"\x0c" + zz(99)) * depth + b"\x00" * (depth + 1)


@pytest.mark.parametrize("depth", [1, 10, 62, 63, 64, 65, 200, 5000])
def test_nesting_limit(depth: int) -> None:
    assert_parity(Statistics, nested_unknown(depth))
    # through lists and maps too
    lists = b"\x09" + zz(99) + b"\x19" * depth + b"\x00" + b"\x00"
    assert_parity(Statistics, lists)
    # map<map, bool>: bools in maps are not depth-checked, nested maps are
    maps = b"\x0b" + zz(99) + b"\x01\xb1" * depth + b"\x00" + b"\x01" * depth + b"\x00"
    assert_parity(Statistics, maps)


def test_bool_list_typed_false_and_mismatch() -> None:
    ci = ColumnIndex(null_pages=[True, False, True], min_values=[b"a"], max_values=[b"b"])
    buf = ci.encode()
    typed_false = buf.replace(b"\x19\x31", b"\x19\x32", 1)
    assert typed_false != buf
    assert_parity(ColumnIndex, typed_false)
    obj = c_decode(ColumnIndex, typed_false)[0]
    assert obj.bool_lists_typed_false == ("null_pages",)
    assert obj.null_pages == [True, False, True]
    # element type 3 (i8) where the schema says bool: kept as an unknown field
    wrong = buf.replace(b"\x19\x31", b"\x19\x33", 1)
    obj = c_decode(ColumnIndex, wrong)[0]
    assert obj.null_pages is None and obj.unknown_fields
    assert_parity(ColumnIndex, wrong)
    # the same list twice: recorded twice, as the pure decoder does
    twice = typed_false[:-1] + b"\x09" + zz(1) + b"\x12\x01" + b"\x00"
    assert_parity(ColumnIndex, twice)
    obj = c_decode(ColumnIndex, twice)[0]
    assert obj.bool_lists_typed_false == ("null_pages", "null_pages")
    assert obj.null_pages == [True] and obj.wire_order is not None


def test_strings_and_wire_order() -> None:
    from pqindex.format.structs import KeyValue

    kv = KeyValue(key="k\udcff", value="v")
    buf = kv.encode()
    assert b"\xff" in buf
    assert_parity(KeyValue, buf)
    assert c_decode(KeyValue, buf)[0].key == "k\udcff"
    swapped = b"\x28\x01v\x08" + zz(1) + b"\x01k\x00"
    obj = c_decode(KeyValue, swapped)[0]
    assert obj.wire_order == (2, 1)
    assert_parity(KeyValue, swapped)


def test_decode_uses_accel_and_env_var_forces_pure() -> None:
    assert thrift._accel is _compact
    code = "from pqindex.format import thrift; print(thrift._accel is None)"
    env = dict(os.environ, PQINDEX_PURE_PYTHON="1")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "True"


def _containers(obj: Any, seen: set[int] | None = None) -> list[Any]:
    """Every struct and list of a decoded tree (depth first)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, list):
        out: list[Any] = [obj]
        for x in obj:
            out += _containers(x, seen)
        return out
    if isinstance(obj, thrift.ThriftStruct):
        out = [obj]
        for f in dataclasses.fields(obj):
            out += _containers(getattr(obj, f.name), seen)
        return out
    return []


def test_untracked_trees_equal_tracked_ones_and_are_freed() -> None:
    """track=False: the same objects, none of them walked by the cyclic collector,
    all freed by reference counting when dropped."""
    import tracemalloc

    buf = footer((CORPUS / "alltypes_tiny_pages.parquet").read_bytes())
    tracked, _ = thrift.decode(FileMetaData, buf)
    untracked, end = thrift.decode(FileMetaData, buf, track=False)
    assert same(tracked, untracked) and end == len(buf)
    inner = _containers(untracked)
    assert len(inner) > 50
    assert not any(gc.is_tracked(x) for x in inner)
    assert all(gc.is_tracked(x) for x in _containers(tracked))
    del tracked, untracked, inner
    for _ in range(50):  # warm-up: free lists, caches
        thrift.decode(FileMetaData, buf, track=False)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(500):
            thrift.decode(FileMetaData, buf, track=False)
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    # 500 trees of ~60 KB each would be ~30 MB if kept.
    assert grown < 1_000_000, grown


def test_parquet_file_metadata_is_left_to_reference_counting(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pqindex.format.file import ParquetFile

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": list(range(100)), "b": ["x"] * 100}), path,
                   row_group_size=30, write_page_index=True)
    pf = ParquetFile.open(str(path))
    assert not gc.is_tracked(pf.metadata)
    assert not gc.is_tracked(pf.metadata.row_groups)
    oi = pf.offset_index(0, 0)
    assert oi is not None and not gc.is_tracked(oi)
    assert not gc.is_tracked(oi.page_locations)
