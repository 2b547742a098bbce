"""Mutation fuzz of the Thrift decoder over real footers: it returns or raises ThriftError.

``PQINDEX_FUZZ_CASES`` sets the number of cases (default 3000) and ``PQINDEX_FUZZ_SEED``
the seed; every case draws from its own ``Random(f"{seed}:{case}")`` so one can be replayed
alone with :func:`make_case`.
"""

from __future__ import annotations

import contextlib
import gc
import os
import random
import signal
import struct
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from conftest import PARQUET_TESTING
from pqindex.format import structs as S
from pqindex.format import thrift
from pqindex.format.thrift import ThriftError, ThriftStruct, decode, encode

CORPUS = Path(os.environ.get("PQINDEX_PARQUET_TESTING", str(PARQUET_TESTING)))
CASES = int(os.environ.get("PQINDEX_FUZZ_CASES", "3000"))
SEED = int(os.environ.get("PQINDEX_FUZZ_SEED", "1729"))
CASE_SECONDS = 2.0  # one decode of a mangled 40 KB footer takes milliseconds
ALL_STRUCTS: list[type[ThriftStruct]] = [getattr(S, n) for n in S.__all__]

# The C decoder, when built, and the pure-Python one: each must keep the contract, and
# they must agree on every input.
DECODERS: dict[str, Any] = {"default": decode}
if getattr(thrift, "_accel", None) is not None and hasattr(thrift, "_decode_py"):
    DECODERS["pure"] = thrift._decode_py


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def zz(n: int) -> bytes:
    return uvarint((n << 1) ^ (n >> 63))


# ---------------------------------------------------------------- seeds


def _footer(data: bytes) -> bytes | None:
    if len(data) < 12 or data[-4:] != b"PAR1":
        return None
    n = int.from_bytes(data[-8:-4], "little")
    return data[-8 - n : -8] if n <= len(data) - 12 else None


def _synthetic() -> list[tuple[type[ThriftStruct], bytes]]:
    """Seeds when the corpus is absent: small structs touching every field kind."""
    stats = S.Statistics(max=b"\xff" * 3, min=b"", null_count=-1, is_max_value_exact=True)
    meta = S.ColumnMetaData(
        type=6, encodings=[0, 8] * 9, path_in_schema=["a", "é"], codec=1, num_values=2**40,
        statistics=stats, key_value_metadata=[S.KeyValue(key="k", value="v")],
        size_statistics=S.SizeStatistics(repetition_level_histogram=[1, 2]),
        geospatial_statistics=S.GeospatialStatistics(bbox=S.BoundingBox(xmin=-1.5, ymax=2.0)),
    )
    fm = S.FileMetaData(
        version=2, num_rows=3, created_by="fuzz",
        schema=[S.SchemaElement(name="r", num_children=1),
                S.SchemaElement(name="a", type=6, logicalType=S.LogicalType(
                    TIMESTAMP=S.TimestampType(isAdjustedToUTC=False,
                                              unit=S.TimeUnit(NANOS=S.NanoSeconds()))))],
        row_groups=[S.RowGroup(columns=[S.ColumnChunk(file_offset=4, meta_data=meta)],
                               sorting_columns=[S.SortingColumn(0, True, False)], ordinal=0)],
        column_orders=[S.ColumnOrder(TYPE_ORDER=S.TypeDefinedOrder())],
    )
    ci = S.ColumnIndex(null_pages=[False, True] * 8, min_values=[b"a"] * 16,
                       max_values=[b"z"] * 16, boundary_order=1, null_counts=list(range(16)))
    oi = S.OffsetIndex(page_locations=[S.PageLocation(4 + i, 10, i * 7) for i in range(20)])
    ph = S.PageHeader(type=0, uncompressed_page_size=9, compressed_page_size=9, crc=-5,
                      data_page_header=S.DataPageHeader(1, 0, 3, 3, stats))
    return [(S.FileMetaData, fm.encode()), (S.ColumnIndex, ci.encode()),
            (S.OffsetIndex, oi.encode()), (S.PageHeader, ph.encode())]


@cache
def seeds() -> list[tuple[type[ThriftStruct], bytes]]:
    """Footers, page indexes and first page headers of every corpus file (data/ and bad_data/)."""
    out: list[tuple[type[ThriftStruct], bytes]] = []
    files = sorted(CORPUS.rglob("*.parquet")) if CORPUS.is_dir() else []
    for path in files:
        data = path.read_bytes()
        footer = _footer(data)
        if footer is None:  # encrypted or damaged: its tail is still a useful input
            out.append((S.FileMetaData, data[-4096:]))
            continue
        out.append((S.FileMetaData, footer))
        try:
            fm = S.FileMetaData.decode(footer)
        except ThriftError:
            continue
        chunks = [cc for rg in fm.row_groups or [] for cc in rg.columns or []][:4]
        for cc in chunks:
            for cls, off, n in ((S.ColumnIndex, cc.column_index_offset, cc.column_index_length),
                                (S.OffsetIndex, cc.offset_index_offset, cc.offset_index_length)):
                if off is not None and n is not None and off >= 0 and off + n <= len(data):
                    out.append((cls, data[off : off + n]))
            md = cc.meta_data
            page = md and (md.dictionary_page_offset or md.data_page_offset)
            if page and 0 < page < len(data):
                with contextlib.suppress(ThriftError):
                    _, end = decode(S.PageHeader, data, page)
                    out.append((S.PageHeader, data[page:end]))
    return out or _synthetic()


@cache
def seed_groups() -> tuple[list[Any], list[Any]]:
    """Footers and the rest, drawn half and half: page headers outnumber footers."""
    footers = [s for s in seeds() if s[0] is S.FileMetaData]
    return footers, [s for s in seeds() if s[0] is not S.FileMetaData]


# ---------------------------------------------------------------- mutators

HUGE = [2**31 - 1, 2**31, 2**32, 2**60, 2**63 - 1, 2**63, 2**64 - 1]
INTERESTING = [0x00, 0x01, 0x0F, 0x10, 0x7F, 0x80, 0xF0, 0xFF, 0x19, 0x1C, 0x1B, 0xF9, 0x0C]


def _pos(rnd: random.Random, buf: bytes) -> int:
    return rnd.randrange(len(buf) + 1)


def flip_bits(rnd: random.Random, buf: bytes) -> bytes:
    b = bytearray(buf)
    for _ in range(rnd.randint(1, 8)):
        if b:
            b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
    return bytes(b)


def set_bytes(rnd: random.Random, buf: bytes) -> bytes:
    b = bytearray(buf)
    for _ in range(rnd.randint(1, 4)):
        if b:
            b[rnd.randrange(len(b))] = rnd.choice([*INTERESTING, rnd.randrange(256)])
    return bytes(b)


def truncate(rnd: random.Random, buf: bytes) -> bytes:
    return buf[: rnd.randrange(len(buf) + 1)]


def insert(rnd: random.Random, buf: bytes) -> bytes:
    p = _pos(rnd, buf)
    return buf[:p] + rnd.randbytes(rnd.randint(1, 16)) + buf[p:]


def delete(rnd: random.Random, buf: bytes) -> bytes:
    p = _pos(rnd, buf)
    return buf[:p] + buf[p + rnd.randint(1, 32) :]


def duplicate(rnd: random.Random, buf: bytes) -> bytes:
    i = _pos(rnd, buf)
    j = min(len(buf), i + rnd.randint(1, 256))
    k = _pos(rnd, buf)
    return buf[:k] + buf[i:j] * rnd.randint(1, 3) + buf[k:]


def huge_varint(rnd: random.Random, buf: bytes) -> bytes:
    """A length/count/value varint far past the buffer, or an overlong one."""
    n = rnd.choice(HUGE)
    v = rnd.choice([uvarint(n), zz(n - 2**63 if n >= 2**63 else n), b"\xff" * rnd.randint(9, 12)])
    p = _pos(rnd, buf)
    # Sometimes right after a plausible header: list/set/binary/map in a field slot.
    head = rnd.choice([b"", b"\x19\xf5", b"\x1a\xfc", b"\x18", b"\x1b", b"\x29\xfc", b"\x19\xf1"])
    tail = buf[p + rnd.randint(0, 2) :] if rnd.random() < 0.5 else buf[p:]
    return buf[:p] + head + v + tail


def deep_nesting(rnd: random.Random, buf: bytes) -> bytes:
    unit = rnd.choice([b"\x1c", b"\x19", b"\x1a", b"\x01\xbb", b"\x1c\x19\x1c", b"\x2c\x1c"])
    depth = rnd.choice([65, 100, 1000, 10_000])
    p = _pos(rnd, buf)
    closing = b"\x00" * depth if rnd.random() < 0.3 else b""
    return buf[:p] + unit * depth + closing + buf[p:]


def splice(rnd: random.Random, buf: bytes) -> bytes:
    _, other = rnd.choice(seeds())
    return buf[: _pos(rnd, buf)] + other[_pos(rnd, other) :]


MUTATORS: list[Callable[[random.Random, bytes], bytes]] = [
    flip_bits, flip_bits, set_bytes, set_bytes, truncate, insert, delete, duplicate,
    huge_varint, huge_varint, deep_nesting, splice,
]


def make_case(case: int, seed: int = SEED) -> tuple[type[ThriftStruct], bytes, list[str]]:
    rnd = random.Random(f"{seed}:{case}")
    footers, others = seed_groups()
    cls, buf = rnd.choice(footers if not others or rnd.random() < 0.5 else others)
    if rnd.random() < 0.1:  # other decoders on foreign bytes
        cls = rnd.choice(ALL_STRUCTS)
    names = []
    for _ in range(rnd.choice([1, 1, 1, 2, 3, 4])):
        m = rnd.choice(MUTATORS)
        buf = m(rnd, buf)
        names.append(m.__name__)
    return cls, buf, names


# ---------------------------------------------------------------- guards


class CaseTimeout(BaseException):
    """Raised by the alarm; a BaseException so no ``except Exception`` swallows it."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    main = threading.current_thread() is threading.main_thread()
    if not hasattr(signal, "setitimer") or not main:
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise CaseTimeout(f"case ran past {seconds}s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def largest_part(obj: Any) -> int:
    """The longest list, bytes or str anywhere in a decoded value."""
    most = 0
    todo = [obj]
    while todo:
        v = todo.pop()
        if isinstance(v, ThriftStruct):
            todo += [getattr(v, name) for _, name, _ in v.THRIFT]
            todo += [r.raw for r in v.unknown_fields]
        elif isinstance(v, list):
            most = max(most, len(v))
            todo += v
        elif isinstance(v, (bytes, str)):
            most = max(most, len(v))
    return most


def identical(a: Any, b: Any) -> bool:
    """Exact equality of decoded values, floats by bits, bookkeeping included."""
    if isinstance(a, ThriftStruct):
        return (
            type(a) is type(b)
            and a.unknown_fields == b.unknown_fields
            and a.wire_order == b.wire_order
            and a.bool_lists_typed_false == b.bool_lists_typed_false
            and all(identical(getattr(a, n), getattr(b, n)) for _, n, _ in a.THRIFT)
        )
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(identical, a, b))
    if isinstance(a, float):
        return isinstance(b, float) and struct.pack("<d", a) == struct.pack("<d", b)
    return type(a) is type(b) and a == b


def check_one(cls: type[ThriftStruct], buf: bytes) -> None:
    """The fuzz contract for one input; raises AssertionError (or anything else) when broken."""
    outcomes = []
    for name, fn in DECODERS.items():
        try:
            obj, end = fn(cls, buf, 0)
        except ThriftError as e:
            assert isinstance(e.offset, int) and 0 <= e.offset <= len(buf), (name, e.offset)
            outcomes.append((name, None, None))
            continue
        assert 0 < end <= len(buf), (name, end)
        assert largest_part(obj) <= len(buf), name
        encode(obj)  # whatever decoded must encode again
        outcomes.append((name, obj, end))
    (_, first, first_end), *rest = outcomes
    for name, obj, end in rest:
        assert (obj is None) == (first is None), f"{name} and default disagree on failing"
        assert end == first_end and (obj is None or identical(obj, first)), f"{name} differs"


# ---------------------------------------------------------------- tests


def test_seeds_decode() -> None:
    assert seeds()
    for cls, buf in seeds():
        check_one(cls, buf)


def test_mutation_fuzz() -> None:
    failures: list[str] = []
    for case in range(CASES):
        cls, buf, names = make_case(case)
        try:
            with time_limit(CASE_SECONDS):
                check_one(cls, buf)
        except (Exception, CaseTimeout) as e:
            failures.append(
                f"case {case} (seed {SEED}) {cls.__name__} {'+'.join(names)} len={len(buf)}: "
                f"{type(e).__name__}: {e}; head={buf[:48].hex()}"
            )
            if len(failures) >= 10:
                break
    # Hangs are caught by the alarm (a generous limit, not a speed check: speed is bench/'s).
    assert not failures, "\n".join(failures)


# Small inputs whose lengths and counts claim far more than is there.
def _claims(n: int) -> list[tuple[type[ThriftStruct], bytes]]:
    pad = b"\x00" * 100
    return [
        (S.FileMetaData, b"\x29\xfc" + uvarint(n) + pad),  # schema: list<struct>
        (S.FileMetaData, b"\x49\xfc" + uvarint(n) + pad),  # row_groups
        (S.ColumnIndex, b"\x19\xf1" + uvarint(n) + pad),  # null_pages: list<bool>
        (S.ColumnIndex, b"\x29\xf8" + uvarint(n) + pad),  # min_values: list<binary>
        (S.ColumnMetaData, b"\x29\xf5" + uvarint(n) + pad),  # encodings: list<i32>
        (S.OffsetIndex, b"\x29\xf6" + uvarint(n) + pad),  # list<i64>
        (S.ColumnMetaData, b"\x39\xf5" + uvarint(n) + pad),  # path_in_schema, wrong elem type
        (S.FileMetaData, b"\x09" + zz(50) + b"\xf5" + uvarint(n) + pad),  # unknown list
        (S.FileMetaData, b"\x0a" + zz(50) + b"\xf2" + uvarint(n) + pad),  # unknown set<bool>
        (S.FileMetaData, b"\x0b" + zz(50) + uvarint(n) + b"\x55" + pad),  # unknown map
        (S.FileMetaData, b"\x0b" + zz(50) + uvarint(n) + b"\x11" + pad),  # map<bool, bool>
        (S.Statistics, b"\x18" + uvarint(n) + pad),  # binary
        (S.KeyValue, b"\x18" + uvarint(n) + pad),  # string
        (S.FileMetaData, b"\x08" + zz(50) + uvarint(n) + pad),  # unknown binary
        (S.FileMetaData, b"\x49\x1c\x19\xfc" + uvarint(n) + pad),  # inside a nested struct
    ]


@pytest.mark.parametrize("which", list(DECODERS))
@pytest.mark.parametrize("n", [101, 2**31 - 1, 2**32, 2**60, 2**63 - 1, 2**64 - 1])
def test_claimed_sizes_raise_without_allocating(n: int, which: str) -> None:
    decode = DECODERS[which]
    cases = _claims(n)
    for cls, buf in cases:  # compile the decoders before measuring
        with contextlib.suppress(ThriftError):
            decode(cls, buf, 0)
    tracemalloc.start()
    try:
        for cls, buf in cases:
            tracemalloc.reset_peak()
            with time_limit(CASE_SECONDS), pytest.raises(ThriftError):
                decode(cls, buf, 0)
            _, peak = tracemalloc.get_traced_memory()
            assert peak < 64 * 1024, (cls.__name__, buf[:12].hex(), peak)
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("which", list(DECODERS))
def test_largest_decoded_list_fits_the_input(which: str) -> None:
    decode = DECODERS[which]
    # 100 bools: exactly the bytes that remain, then the stop byte is missing -> error;
    # with the stop byte present, the list is as long as the input allows and no longer.
    body = b"\x01" * 100
    with pytest.raises(ThriftError):
        decode(S.ColumnIndex, b"\x19\xf1" + uvarint(101) + body, 0)
    ci, _ = decode(S.ColumnIndex, b"\x19\xf1" + uvarint(100) + body + b"\x00", 0)
    assert ci.null_pages == [True] * 100


DEEP = 10_000


@pytest.mark.parametrize(
    "buf",
    [
        b"\x1c" * DEEP,  # struct headers in a field slot that wants an i32
        b"\x1c" * DEEP + b"\x00" * DEEP,  # the same, well formed
        b"\x19" + b"\x19" * DEEP,  # list<list<...>>
        b"\x1a" + b"\x1a" * DEEP,  # set<set<...>>
        b"\x1b" + b"\x01\xbb" * DEEP,  # map<map, map>
        b"\x49\x1c" + b"\x1c" * DEEP,  # under a known list<RowGroup>
        b"\x29\x1c" + b"\x0c\x02" * DEEP,  # long-form headers under a SchemaElement
        b"\x09\x64" + b"\x1c\x1c" * DEEP,  # unknown list<struct<struct ...>>
    ],
    ids=["struct", "struct-closed", "list", "set", "map", "rowgroup", "long-form", "list-struct"],
)
@pytest.mark.parametrize("which", list(DECODERS))
def test_deep_nesting_raises_quickly(buf: bytes, which: str) -> None:
    decode = DECODERS[which]
    with time_limit(CASE_SECONDS), pytest.raises(ThriftError):
        decode(S.FileMetaData, buf, 0)


def test_no_leak_over_repeated_decodes() -> None:
    # Errors, fallbacks and successes alike, through the default (C when built) decoder.
    cases = [make_case(i)[:2] for i in range(300)] + seeds()[:30]

    def run() -> None:
        for cls, buf in cases:
            with contextlib.suppress(ThriftError):
                decode(cls, buf, 0)

    run()
    gc.collect()
    tracemalloc.start()
    try:
        run()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(4):
            run()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 16 * 1024, grown
