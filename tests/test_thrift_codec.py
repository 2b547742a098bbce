"""Round-trip and wire-format tests for the Thrift compact-protocol codec."""

from __future__ import annotations

import dataclasses
import math
import os
import struct
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import PARQUET_TESTING
from pqindex.format import structs as S
from pqindex.format import thrift
from pqindex.format.thrift import (
    BINARY,
    BOOL,
    DOUBLE,
    I8,
    I16,
    I32,
    I64,
    MAX_DEPTH,
    STRING,
    ListOf,
    RawField,
    ThriftError,
    ThriftStruct,
    decode,
    encode,
)

CORPUS = Path(os.environ.get("PQINDEX_PARQUET_TESTING", str(PARQUET_TESTING)))

I64_MIN, I64_MAX = -(2**63), 2**63 - 1

# ---------------------------------------------------------------- an independent mini codec
# Written from the spec, not from thrift.py, so the tests do not share the codec's mistakes.


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def zz(n: int) -> bytes:
    """Zigzag varint of a value in the i64 range."""
    return uvarint((n << 1) ^ (n >> 63))


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, pos
        shift += 7


def header(fid: int, wire: int, last: int) -> bytes:
    d = fid - last
    return bytes([d << 4 | wire]) if 0 < d <= 15 else bytes([wire]) + zz(fid)


def emit(fields: list[tuple[int, int, bytes]]) -> bytes:
    """A struct from (field id, wire type, value bytes) in the given wire order."""
    out = bytearray()
    last = 0
    for fid, wire, raw in fields:
        out += header(fid, wire, last) + raw
        last = fid
    out.append(0)
    return bytes(out)


def skip_value(buf: bytes, pos: int, wire: int, elem: bool) -> int:
    if wire in (1, 2):
        return pos + 1 if elem else pos
    if wire == 3:
        return pos + 1
    if wire in (4, 5, 6):
        return read_uvarint(buf, pos)[1]
    if wire == 7:
        return pos + 8
    if wire == 8:
        n, pos = read_uvarint(buf, pos)
        return pos + n
    if wire in (9, 10):
        h = buf[pos]
        pos += 1
        n = h >> 4
        if n == 15:
            n, pos = read_uvarint(buf, pos)
        for _ in range(n):
            pos = skip_value(buf, pos, h & 15, True)
        return pos
    if wire == 11:
        n, pos = read_uvarint(buf, pos)
        if n:
            kv = buf[pos]
            pos += 1
            for _ in range(n):
                pos = skip_value(buf, pos, kv >> 4, True)
                pos = skip_value(buf, pos, kv & 15, True)
        return pos
    if wire == 12:
        return split_fields(buf, pos)[1]
    raise AssertionError(wire)


def split_fields(buf: bytes, pos: int = 0) -> tuple[list[tuple[int, int, bytes]], int]:
    """The top-level fields of the struct at ``pos`` and the position after it."""
    fields = []
    last = 0
    while True:
        h = buf[pos]
        pos += 1
        if h == 0:
            return fields, pos
        wire = h & 15
        if h >> 4:
            fid = last + (h >> 4)
        else:
            raw, pos = read_uvarint(buf, pos)
            fid = (raw >> 1) ^ -(raw & 1)
        start = pos
        pos = skip_value(buf, pos, wire, False)
        fields.append((fid, wire, buf[start:pos]))
        last = fid


def double(x: float) -> bytes:
    return struct.pack("<d", x)


# ---------------------------------------------------------------- structural comparison


def same(a: Any, b: Any) -> bool:
    """Equality where floats compare by their bits (NaN payloads, -0.0) and unknown fields count."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, float) and isinstance(b, float) and double(a) == double(b)
    if isinstance(a, ThriftStruct):
        if type(a) is not type(b):
            return False
        if sorted(a.unknown_fields, key=lambda r: r.fid) != list(b.unknown_fields):
            return False
        return all(same(getattr(a, name), getattr(b, name)) for _, name, _ in a.THRIFT)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same, a, b))
    return type(a) is type(b) and a == b


def identical(a: Any, b: Any) -> bool:
    """Exact equality, bookkeeping included (unknown fields, wire order, typed-false lists)."""
    if isinstance(a, ThriftStruct):
        return (
            type(a) is type(b)
            and a.unknown_fields == b.unknown_fields
            and a.wire_order == b.wire_order
            and a.bool_lists_typed_false == b.bool_lists_typed_false
            and a.bool_lists_false_zero == b.bool_lists_false_zero
            and all(identical(getattr(a, n), getattr(b, n)) for _, n, _ in a.THRIFT)
        )
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(identical, a, b))
    return same(a, b)


# The C decoder, when built, and the pure-Python one must give the same results.
DECODERS: dict[str, Any] = {"default": decode}
if getattr(thrift, "_accel", None) is not None and hasattr(thrift, "_decode_py"):
    DECODERS["pure"] = thrift._decode_py


def dec_end(cls: type[ThriftStruct], b: bytes, pos: int = 0) -> tuple[Any, int]:
    """Decode with every decoder; they must agree exactly."""
    (obj, end), *rest = [f(cls, b, pos) for f in DECODERS.values()]
    for other, other_end in rest:
        assert other_end == end and identical(other, obj)
    return obj, end


def dec(cls: type[ThriftStruct], b: bytes) -> Any:
    return dec_end(cls, b)[0]


def rejected(cls: type[ThriftStruct], b: bytes) -> bool:
    """Every decoder raises ThriftError (else each must succeed, agreeing)."""
    outcomes = []
    for f in DECODERS.values():
        try:
            f(cls, b, 0)
        except ThriftError as e:
            assert 0 <= e.offset <= len(b)
            outcomes.append(True)
        else:
            outcomes.append(False)
    assert len(set(outcomes)) == 1, outcomes
    if not outcomes[0]:
        dec(cls, b)
    return outcomes[0]


# ---------------------------------------------------------------- strategies from THRIFT tables

ALL_STRUCTS = [getattr(S, name) for name in S.__all__]

# Raw doubles from arbitrary bits so NaN payloads and signed zeros turn up.
doubles = st.floats() | st.integers(0, 2**64 - 1).map(
    lambda u: struct.unpack("<d", u.to_bytes(8, "little"))[0]
)

SCALARS: dict[Any, st.SearchStrategy[Any]] = {
    BOOL: st.booleans(),
    I8: st.integers(-(2**7), 2**7 - 1),
    I16: st.integers(-(2**15), 2**15 - 1),
    I32: st.integers(-(2**31), 2**31 - 1),
    I64: st.integers(I64_MIN, I64_MAX)
    | st.sampled_from([I64_MIN, I64_MAX, -1, 0, 1, 63, -64, 64, -65]),
    DOUBLE: doubles,
    BINARY: st.binary(max_size=40),
    STRING: st.text(st.characters(codec="utf-8"), max_size=20),
}


def values(t: Any) -> st.SearchStrategy[Any]:
    if isinstance(t, ListOf):
        # Scalar lists may pass 15 elements (long-form size); struct lists stay small.
        small = isinstance(t.elem, type)
        return st.lists(values(t.elem), max_size=3 if small else 20)
    if isinstance(t, type):
        return instances(t)
    return SCALARS[t]


@st.composite
def raw_value(draw: st.DrawFn, depth: int = 0) -> tuple[int, bytes]:
    """Any compact value as (wire type, bytes), for unknown fields."""
    wires = [1, 2, 3, 4, 5, 6, 7, 8] + ([9, 10, 11, 12] if depth < 3 else [])
    wire = draw(st.sampled_from(wires))
    return wire, draw(raw_body(wire, depth, elem=False))


@st.composite
def raw_body(draw: st.DrawFn, wire: int, depth: int, elem: bool) -> bytes:
    if wire in (1, 2):
        return bytes([draw(st.sampled_from([1, 2]))]) if elem else b""
    if wire == 3:
        return bytes([draw(st.integers(0, 255))])
    if wire in (4, 5, 6):
        return zz(draw(st.integers(I64_MIN, I64_MAX)))
    if wire == 7:
        return double(draw(doubles))
    if wire == 8:
        b = draw(st.binary(max_size=20))
        return uvarint(len(b)) + b
    if wire in (9, 10):
        et = draw(st.sampled_from([1, 3, 4, 5, 6, 7, 8, 12]))
        n = draw(st.integers(0, 17))
        head = bytes([n << 4 | et]) if n < 15 else bytes([0xF0 | et]) + uvarint(n)
        return head + b"".join(draw(raw_body(et, depth + 1, elem=True)) for _ in range(n))
    if wire == 11:
        n = draw(st.integers(0, 3))
        if n == 0:
            return b"\x00"
        kt = draw(st.sampled_from([5, 8]))
        vt = draw(st.sampled_from([1, 6, 8, 12]))
        body = b"".join(
            draw(raw_body(kt, depth + 1, True)) + draw(raw_body(vt, depth + 1, True))
            for _ in range(n)
        )
        return uvarint(n) + bytes([kt << 4 | vt]) + body
    # struct: ascending ids, sometimes with gaps past 15 (long-form headers)
    ids = sorted(draw(st.sets(st.integers(1, 40), max_size=3)))
    return emit([(fid, *draw(raw_value(depth + 1))) for fid in ids])


@cache
def instances(cls: type[ThriftStruct]) -> st.SearchStrategy[Any]:
    fields = {name: st.none() | values(t) for _, name, t in cls.THRIFT}
    known = {fid for fid, _, _ in cls.THRIFT}
    bool_lists = [n for _, n, t in cls.THRIFT if isinstance(t, ListOf) and t.elem is BOOL]

    @st.composite
    def build(draw: st.DrawFn) -> ThriftStruct:
        obj = cls(**{name: draw(s) for name, s in fields.items()})
        # Occasionally unknown fields, including ids below the known ones.
        if draw(st.integers(0, 9)) == 0:
            ids = draw(st.sets(st.integers(-3, 40).filter(lambda i: i not in known), max_size=3))
            obj.unknown_fields = tuple(RawField(i, *draw(raw_value())) for i in sorted(ids))
        present = tuple(n for n in bool_lists if getattr(obj, n) is not None)
        if present and draw(st.booleans()):
            obj.bool_lists_typed_false = present
        if present and draw(st.booleans()):
            obj.bool_lists_false_zero = present
        return obj

    return build()


def reachable(roots: list[type[ThriftStruct]]) -> set[type[ThriftStruct]]:
    seen: set[type[ThriftStruct]] = set()
    todo = list(roots)
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        for _, _, t in cls.THRIFT:
            while isinstance(t, ListOf):
                t = t.elem
            if isinstance(t, type):
                todo.append(t)
    return seen


# Each family root reaches its nested structs; ColumnMetaData and SchemaElement get their own
# runs because random footers rarely reach that deep with all fields filled.
FAMILIES = [
    S.FileMetaData,
    S.ColumnMetaData,
    S.SchemaElement,
    S.ColumnIndex,
    S.OffsetIndex,
    S.PageHeader,
    S.BloomFilterHeader,
    S.FileCryptoMetaData,
    S.ColumnCryptoMetaData,
]

RT_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def test_families_cover_every_struct() -> None:
    assert reachable(FAMILIES) == set(ALL_STRUCTS)


@pytest.mark.parametrize("root", FAMILIES, ids=lambda c: c.__name__)
def test_round_trip(root: type[ThriftStruct]) -> None:
    @RT_SETTINGS
    @given(instances(root))
    def check(x: ThriftStruct) -> None:
        b = encode(x)
        y, end = dec_end(root, b, 0)
        assert end == len(b)
        assert same(x, y)
        assert encode(y) == b
        # The struct also decodes in place, after a prefix and before trailing bytes.
        z, end = dec_end(root, b"\xff\xfe" + b + b"\x00junk", 2)
        assert end == 2 + len(b)
        assert encode(z) == b

    check()


@pytest.mark.parametrize("root", FAMILIES, ids=lambda c: c.__name__)
def test_generated_encoders_match_the_generic_walk(
    root: type[ThriftStruct], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-class encoders write exactly the bytes of the table-driven walk they replace,
    unknown fields, bool-list styles and missing fields included."""

    @RT_SETTINGS
    @given(instances(root))
    def check(x: ThriftStruct) -> None:
        generated = encode(x)
        with monkeypatch.context() as m:
            m.setattr(thrift, "_put_struct", thrift._put_struct_generic)
            generic = encode(x)
        assert generated == generic

    check()


@RT_SETTINGS
@given(instances(S.ColumnChunk), st.randoms(use_true_random=False))
def test_any_field_order_re_encodes_exactly(x: ThriftStruct, rnd: Any) -> None:
    fields, _ = split_fields(encode(x))
    rnd.shuffle(fields)
    b = emit(fields)
    y = dec(S.ColumnChunk, b)
    assert same(
        dataclasses.replace(x, unknown_fields=()), dataclasses.replace(y, unknown_fields=())
    )
    assert sorted(y.unknown_fields, key=lambda r: r.fid) == sorted(
        x.unknown_fields, key=lambda r: r.fid
    )
    assert y.encode() == b


# ---------------------------------------------------------------- hand-written wire vectors


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (I64_MAX, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (I64_MIN, b"\xff" * 9 + b"\x01"),
    ],
)
def test_zigzag_varint_i64(value: int, wire: bytes) -> None:
    b = b"\x36" + wire + b"\x00"  # Statistics.null_count, field 3, i64
    assert S.Statistics(null_count=value).encode() == b
    assert dec(S.Statistics, b).null_count == value


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_zigzag_varint_i32_and_i16(value: int, wire: bytes) -> None:
    b = b"\x15" + wire + b"\x00"  # DecimalType.scale, i32
    assert S.DecimalType(scale=value).encode() == b
    assert dec(S.DecimalType, b).scale == value
    if -(2**15) <= value < 2**15:
        b = b"\x74" + wire + b"\x00"  # RowGroup.ordinal, field 7, i16
        assert S.RowGroup(ordinal=value).encode() == b
        assert dec(S.RowGroup, b).ordinal == value


def test_i8_is_one_raw_byte() -> None:
    for v, byte in [(0, 0x00), (64, 0x40), (127, 0x7F), (-1, 0xFF), (-128, 0x80)]:
        b = bytes([0x13, byte, 0x00])
        assert S.IntType(bitWidth=v).encode() == b
        assert dec(S.IntType, b).bitWidth == v


def test_double_is_little_endian() -> None:
    b = b"\x17" + bytes.fromhex("000000000000f83f") + b"\x00"
    assert S.BoundingBox(xmin=1.5).encode() == b
    assert dec(S.BoundingBox, b).xmin == 1.5
    nan = struct.unpack("<d", bytes.fromhex("0100000000f8ff7f"))[0]
    b = b"\x27" + double(nan) + b"\x00"
    y = dec(S.BoundingBox, b)
    assert y.xmin is None and math.isnan(y.xmax) and y.encode() == b


def test_binary_length_varint_and_string() -> None:
    payload = bytes(range(200))
    b = b"\x18\xc8\x01" + payload + b"\x00"
    assert S.Statistics(max=payload).encode() == b
    assert dec(S.Statistics, b).max == payload
    b = b"\x18\x03\xe2\x82\xac\x18\x00\x00"  # key "€", value ""
    assert S.KeyValue(key="€", value="").encode() == b
    assert dec(S.KeyValue, b) == S.KeyValue(key="€", value="")


def test_invalid_utf8_in_string_survives() -> None:
    b = b"\x18\x02\xff\xfe\x00"
    assert dec(S.KeyValue, b).encode() == b


@pytest.mark.parametrize(
    ("obj", "wire"),
    [
        (S.LogicalType(FLOAT16=S.Float16Type()), b"\xfc\x00\x00"),  # delta 15: short form
        (S.LogicalType(VARIANT=S.VariantType()), b"\x0c\x20\x00\x00"),  # delta 16: long form
        (S.LogicalType(STRING=S.StringType(), VARIANT=S.VariantType()), b"\x1c\x00\xfc\x00\x00"),
        (S.LogicalType(STRING=S.StringType(), VECTOR=S.VectorType()), b"\x1c\x00\x0c\x26\x00\x00"),
        (S.ColumnMetaData(type=1, bloom_filter_length=2), b"\x15\x02\xe5\x04\x00"),
        (S.ColumnMetaData(type=1, size_statistics=S.SizeStatistics()), b"\x15\x02\xfc\x00\x00"),
        (S.ColumnMetaData(geospatial_statistics=S.GeospatialStatistics()), b"\x0c\x22\x00\x00"),
    ],
)
def test_field_header_forms(obj: ThriftStruct, wire: bytes) -> None:
    assert obj.encode() == wire
    assert dec(type(obj), wire) == obj


@pytest.mark.parametrize(
    ("n", "head"),
    [
        (0, b"\x05"),
        (1, b"\x15"),
        (14, b"\xe5"),
        (15, b"\xf5\x0f"),
        (16, b"\xf5\x10"),
        (200, b"\xf5\xc8\x01"),
    ],
)
def test_list_size_forms(n: int, head: bytes) -> None:
    b = b"\x29" + head + b"\x02" * n + b"\x00"  # ColumnMetaData.encodings, list<i32> of 1s
    obj = S.ColumnMetaData(encodings=[1] * n)
    assert obj.encode() == b
    assert dec(S.ColumnMetaData, b) == obj


def test_bool_fields_live_in_the_type_nibble() -> None:
    b = b"\x15\x00\x11\x12\x00"
    obj = S.SortingColumn(column_idx=0, descending=True, nulls_first=False)
    assert obj.encode() == b
    assert dec(S.SortingColumn, b) == obj
    # Fields 7 and 8 of Statistics after field 3: deltas 4 and 1.
    b = b"\x36\x00\x42\x11\x00"
    obj = S.Statistics(null_count=0, is_max_value_exact=False, is_min_value_exact=True)
    assert obj.encode() == b
    assert dec(S.Statistics, b) == obj


@pytest.mark.parametrize("elem_type", [1, 2])
def test_list_bool_element_bytes(elem_type: int) -> None:
    # Elements are whole bytes (1 true, 2 false); the header's element type may be 1 or 2.
    pages = [True, False, True] + [False] * 13
    b = b"\x19" + bytes([0xF0 | elem_type, 16]) + bytes(1 if p else 2 for p in pages) + b"\x00"
    ci = dec(S.ColumnIndex, b)
    assert ci.null_pages == pages
    assert ci.encode() == b
    assert S.ColumnIndex(null_pages=pages).encode() == b"\x19\xf1\x10" + b[3:]
    empty = b"\x19" + bytes([elem_type]) + b"\x00"
    assert dec(S.ColumnIndex, empty).null_pages == []
    assert dec(S.ColumnIndex, empty).encode() == empty


def test_list_bool_zero_false_element_survives() -> None:
    b = b"\x19\x21\x01\x00\x00"
    ci = dec(S.ColumnIndex, b)
    assert ci.null_pages == [True, False]
    assert ci.encode() == b


@pytest.mark.parametrize("elem_type", [1, 2])
def test_list_bool_false_zero_bookkeeping(elem_type: int) -> None:
    pages = [False, True] + [False] * 14
    b = b"\x19" + bytes([0xF0 | elem_type, 16]) + bytes(p for p in pages) + b"\x00"
    ci = dec(S.ColumnIndex, b)
    assert ci.null_pages == pages
    assert ci.bool_lists_false_zero == ("null_pages",)
    assert ci.bool_lists_typed_false == (("null_pages",) if elem_type == 2 else ())
    assert ci.encode() == b
    # Only lists that hold a false element can say how false was written.
    assert dec(S.ColumnIndex, b"\x19\x21\x01\x01\x00").bool_lists_false_zero == ()
    assert dec(S.ColumnIndex, b"\x19\x21\x01\x02\x00").bool_lists_false_zero == ()
    # Set by hand, the encoder follows it.
    obj = S.ColumnIndex(null_pages=[True, False], bool_lists_false_zero=("null_pages",))
    assert obj.encode() == b"\x19\x21\x01\x00\x00"


@pytest.mark.parametrize(
    "elems",
    [
        b"\x01\x03",  # not a bool
        b"\xff",
        b"\x00\x02",  # false written both ways: could not re-encode
        b"\x02\x01\x00",
    ],
)
def test_list_bool_bad_elements_are_rejected(elems: bytes) -> None:
    b = b"\x19" + bytes([len(elems) << 4 | 1]) + elems + b"\x00"
    assert rejected(S.ColumnIndex, b)
    # An unknown field's list is kept verbatim whatever its bytes.
    obj = dec(S.Statistics, b)
    assert obj.unknown_fields == (RawField(1, 9, b[1:-1]),) and obj.encode() == b


def test_varint_wider_than_64_bits_is_rejected_or_kept() -> None:
    b = b"\x36" + b"\xff" * 9 + b"\x7f" + b"\x00"
    try:
        s = dec(S.Statistics, b)
    except ThriftError:
        return
    assert I64_MIN <= s.null_count <= I64_MAX
    assert s.encode() == b


@pytest.mark.parametrize(
    "b",
    [
        b"\x36" + b"\xff" * 9 + b"\x7f" + b"\x00",  # i64 wider than 64 bits
        b"\x16" + b"\xff" * 9 + b"\x02" + b"\x00",  # just wider
        b"\x29\x16\x81" + b"\x80" * 8 + b"\x7f\x00",  # in a list
        b"\x16" + b"\xff" * 9 + b"\x7f" + b"\x00",  # in an unknown field
        b"\x18" + b"\x80" * 9 + b"\x02" + b"\x00",  # as a binary length
        b"\x06" + uvarint(2**62) + zz(1) + b"\x00",  # long-form field id far out
        b"\x06" + uvarint(2**64 - 1) + zz(1) + b"\x00",
    ],
)
def test_values_past_64_bits_are_rejected(b: bytes) -> None:
    assert rejected(S.SizeStatistics, b)


@pytest.mark.parametrize(
    ("cls", "b", "ok"),
    [
        (S.SortingColumn, b"\x15" + zz(2**31 - 1) + b"\x00", True),
        (S.SortingColumn, b"\x15" + zz(-(2**31)) + b"\x00", True),
        (S.SortingColumn, b"\x15" + zz(2**31) + b"\x00", False),
        (S.SortingColumn, b"\x15" + zz(-(2**31) - 1) + b"\x00", False),
        (S.SortingColumn, b"\x15" + zz(I64_MIN) + b"\x00", False),
        (S.RowGroup, b"\x74" + zz(2**15 - 1) + b"\x00", True),
        (S.RowGroup, b"\x74" + zz(-(2**15)) + b"\x00", True),
        (S.RowGroup, b"\x74" + zz(2**15) + b"\x00", False),
        (S.RowGroup, b"\x74" + zz(-(2**15) - 1) + b"\x00", False),
        (S.ColumnMetaData, b"\x29\x25" + zz(1) + zz(2**31) + b"\x00", False),  # list<i32>
        # an i32 on the wire where an i64 is known: an unknown field, kept as is
        (S.Statistics, b"\x35" + zz(I64_MIN) + b"\x00", True),
    ],
)
def test_narrow_ints_must_fit_their_type(cls: type[ThriftStruct], b: bytes, ok: bool) -> None:
    assert rejected(cls, b) is not ok
    if ok:
        assert dec(cls, b).encode() == b


@pytest.mark.parametrize(
    ("b", "ok"),
    [
        (b"\x02" + zz(2**15 - 1) + b"\x00", True),
        (b"\x02" + zz(-(2**15)) + b"\x00", True),
        (b"\x02" + zz(2**15) + b"\x00", False),
        (b"\x02" + zz(-(2**15) - 1) + b"\x00", False),
        (b"\x02" + zz(2**15 - 16) + b"\xf2\x00", True),  # delta up to 32767
        (b"\x02" + zz(2**15 - 16) + b"\xf2\x12\x00", False),  # delta past it
    ],
)
def test_field_ids_are_i16(b: bytes, ok: bool) -> None:
    assert rejected(S.Statistics, b) is not ok
    if ok:
        assert dec(S.Statistics, b).encode() == b


def test_wire_order_with_fields_outside_it() -> None:
    obj = S.SortingColumn(column_idx=1, descending=True, nulls_first=False, wire_order=(3,))
    obj.unknown_fields = (RawField(5, 1, b""),)
    # 3 first as recorded, then the rest ascending: 1 (long form, back), 2, 5
    assert obj.encode() == b"\x32" + b"\x05" + zz(1) + zz(1) + b"\x11\x31\x00"


def test_both_decoders_are_tested() -> None:
    if "pure" not in DECODERS:
        pytest.skip("no C decoder built (or PQINDEX_PURE_PYTHON set): one path only")
    assert DECODERS["pure"] is not DECODERS["default"]


# ---------------------------------------------------------------- unknown and mistyped fields

# Every wire type, with bodies written by hand.
UNKNOWN_VALUES: dict[str, tuple[int, bytes]] = {
    "true": (1, b""),
    "false": (2, b""),
    "byte": (3, b"\x85"),
    "i16": (4, zz(-300)),
    "i32": (5, zz(2**31 - 1)),
    "i64": (6, zz(I64_MIN)),
    "double": (7, double(-2.5)),
    "binary": (8, b"\x03abc"),
    "binary_empty": (8, b"\x00"),
    "list_i32": (9, b"\x35" + zz(1) + zz(-1) + zz(300)),
    "list_long": (9, b"\xf8\x10" + b"\x01x" * 16),
    "list_bool": (9, b"\x31\x01\x02\x01"),
    "list_struct": (9, b"\x2c" + emit([(1, 5, zz(7))]) + emit([])),
    "set_binary": (10, b"\x28\x01a\x02bc"),
    "map": (11, b"\x02\x8c" + b"\x01k" + emit([(2, 1, b"")]) + b"\x00" + emit([])),
    "map_bool": (11, b"\x01\x11\x01\x02"),
    "map_empty": (11, b"\x00"),
    "struct": (12, emit([(1, 2, b""), (3, 8, b"\x01z"), (40, 12, emit([(1, 6, zz(5))]))])),
    "struct_empty": (12, b"\x00"),
}

# SchemaElement knows 1..11; LogicalType has a gap at 9.
BASE_SCHEMA = [(1, 5, zz(6)), (4, 8, b"\x01x"), (5, 5, zz(2)), (10, 12, emit([(1, 12, b"\x00")]))]


@pytest.mark.parametrize("kind", list(UNKNOWN_VALUES))
@pytest.mark.parametrize("fid", [12, 16, 300, 0, -7, 32767])
def test_unknown_fields_survive(kind: str, fid: int) -> None:
    wire, raw = UNKNOWN_VALUES[kind]
    expected = S.SchemaElement(
        type=6, name="x", num_children=2, logicalType=S.LogicalType(STRING=S.StringType())
    )
    for at in range(len(BASE_SCHEMA) + 1):
        fields = [*BASE_SCHEMA[:at], (fid, wire, raw), *BASE_SCHEMA[at:]]
        b = emit(fields)
        obj = dec(S.SchemaElement, b)
        assert obj == expected
        assert obj.unknown_fields == (RawField(fid, wire, raw),)
        assert obj.encode() == b
        # Nested one level down, inside a known struct inside a list.
        outer = emit([(2, 9, b"\x1c" + b)])
        fm = dec(S.FileMetaData, outer)
        assert fm.schema == [expected]
        assert fm.encode() == outer


def test_many_unknown_fields_and_known_gap() -> None:
    fields = [(0, 1, b""), (1, 12, b"\x00")]
    fields += [(9, w, r) for w, r in list(UNKNOWN_VALUES.values())[:3]]  # repeated id 9
    fields += [(10, 12, b"\x00"), (25, 12, b"\x00"), (26, 11, b"\x00"), (-1, 2, b"")]
    b = emit(fields)
    lt = dec(S.LogicalType, b)
    assert lt == S.LogicalType(STRING=S.StringType(), INTEGER=S.IntType())
    assert [r.fid for r in lt.unknown_fields] == [0, 9, 9, 9, 25, 26, -1]
    assert lt.encode() == b


@pytest.mark.parametrize(
    ("cls", "field"),
    [
        (S.SchemaElement, (4, 5, zz(3))),  # string sent as i32
        (S.SchemaElement, (1, 6, zz(3))),  # i32 sent as i64
        (S.SchemaElement, (10, 8, b"\x00")),  # struct sent as binary
        (S.SchemaElement, (4, 1, b"")),  # string sent as bool
        (S.IntType, (2, 3, b"\x01")),  # bool sent as byte
        (S.IntType, (1, 5, zz(8))),  # i8 sent as i32
        (S.ColumnMetaData, (2, 9, b"\x28\x01a\x01b")),  # list<i32> sent as list<binary>
        (S.ColumnMetaData, (2, 10, b"\x15\x02")),  # list sent as set
        (S.ColumnMetaData, (3, 9, b"\x25\x02\x04")),  # list<string> sent as list<i32>
        (S.ColumnIndex, (1, 9, b"\x23\x01\x00")),  # list<bool> sent as list<byte>
        (S.OffsetIndex, (1, 9, b"\x18\x00")),  # list<struct> sent as list<binary>
        (S.FileMetaData, (4, 9, b"\x1c" + emit([(1, 9, b"\x15\x02")]))),  # nested mismatch
    ],
)
def test_wrong_wire_type_is_kept_verbatim(cls: type[ThriftStruct], field: tuple) -> None:
    fid = field[0]
    name = next(n for i, n, _ in cls.THRIFT if i == fid)
    b = emit([field])
    obj = dec(cls, b)
    if cls is S.FileMetaData:  # the mismatch sits inside RowGroup.columns
        rg = obj.row_groups[0]
        assert rg.columns is None and rg.unknown_fields == (RawField(1, 9, b"\x15\x02"),)
    else:
        assert getattr(obj, name) is None
        assert obj.unknown_fields == (RawField(*field),)
    assert obj.encode() == b
    # Alongside well-typed neighbours, before and after.
    others = [f for f in [(1, 5, zz(1)), (11, 5, zz(4)), (30, 2, b"")] if f[0] != fid]
    b = emit(sorted([*others, field]))
    assert dec(cls, b).encode() == b


@pytest.mark.parametrize(
    "order",
    [
        [4, 1, 5, 3],
        [11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1],
        [1, 2, 10, 3],
        [5, 300, 1],  # 300 unknown
        [-2, 1],  # unknown negative id first
        [10, 0, 4],  # unknown id 0
    ],
)
def test_out_of_order_fields_re_encode_exactly(order: list[int]) -> None:
    values = {
        1: (5, zz(1)),
        2: (5, zz(16)),
        3: (5, zz(0)),
        4: (8, b"\x02ab"),
        5: (5, zz(3)),
        6: (5, zz(0)),
        7: (5, zz(2)),
        8: (5, zz(9)),
        9: (5, zz(-5)),
        10: (12, emit([(8, 12, emit([(1, 1, b""), (2, 12, emit([(2, 12, b"\x00")]))]))])),
        11: (5, zz(128)),
    }
    fields = [(f, *values.get(f, (8, b"\x01u"))) for f in order]
    b = emit(fields)
    obj = dec(S.SchemaElement, b)
    assert obj.encode() == b
    # The same struct inside FileMetaData.schema, itself out of order.
    outer = emit([(3, 6, zz(10)), (2, 9, b"\x2c" + b + b), (1, 5, zz(2))])
    fm = dec(S.FileMetaData, outer)
    assert fm.schema == [obj, obj]
    assert fm.encode() == outer
    # Re-encoding after an edit still writes every field once, in the recorded order.
    fm.num_rows = 11
    again = dec(S.FileMetaData, fm.encode())
    assert again.num_rows == 11 and again.schema == fm.schema


def test_nested_unknown_structs_within_depth_limit() -> None:
    # Alternating struct and list<struct> wrappers, one value per level.
    body = b"\x00"
    for level in range(MAX_DEPTH // 4):
        body = emit([(1, 12, body)] if level % 2 else [(2, 6, zz(level)), (3, 9, b"\x1c" + body)])
    b = emit([(3, 6, zz(1)), (77, 12, body)])
    fm = dec(S.FileMetaData, b)
    assert fm.num_rows == 1 and fm.encode() == b


def test_decode_accepts_bytearray_and_memoryview() -> None:
    b = S.KeyValue(key="a", value="b").encode()
    assert S.KeyValue.decode(bytearray(b)) == S.KeyValue.decode(memoryview(b))


# ---------------------------------------------------------------- real footers


def corpus_files() -> list[Path]:
    """Every ``*.parquet`` of the corpus (in the repository; its encrypted files are
    ``*.parquet.encrypted``, not among them)."""
    files = sorted((CORPUS / "data").rglob("*.parquet"))
    assert files, f"no parquet-testing corpus at {CORPUS}"
    return files


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: str(p.relative_to(CORPUS / "data")))
def test_corpus_footer_and_page_index_round_trip(path: Path) -> None:
    data = path.read_bytes()
    assert data[-4:] == b"PAR1"
    n = int.from_bytes(data[-8:-4], "little")
    footer = data[-8 - n : -8]
    fm, end = dec_end(S.FileMetaData, footer, 0)
    assert end == len(footer)
    assert fm.encode() == footer
    chunks = [cc for rg in fm.row_groups or [] for cc in rg.columns or []]
    for cc in chunks:
        if cc.crypto_metadata is not None:
            continue
        for cls, off, length in (
            (S.ColumnIndex, cc.column_index_offset, cc.column_index_length),
            (S.OffsetIndex, cc.offset_index_offset, cc.offset_index_length),
        ):
            if off is None or length is None:
                continue
            blob = data[off : off + length]
            assert len(blob) == length
            obj, end = dec_end(cls, blob, 0)
            assert end == length
            assert obj.encode() == blob
