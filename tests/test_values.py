"""Typed bounds and their order: decoding against pyarrow, and the ColumnOrder rules."""

from __future__ import annotations

import datetime as dt
import math
import random
import struct
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import PARQUET_TESTING, missing
from pqindex.format.schema import LeafColumn, PhysicalType, Schema
from pqindex.format.structs import (
    ColumnChunk,
    ColumnIndex,
    ColumnOrder,
    DecimalType,
    FileMetaData,
    GeometryType,
    IEEE754TotalOrder,
    Int96TimestampOrder,
    IntType,
    ListType,
    LogicalType,
    MilliSeconds,
    NanoSeconds,
    OffsetIndex,
    SchemaElement,
    Statistics,
    StringType,
    TimestampType,
    TimeUnit,
    TypeDefinedOrder,
    UUIDType,
    VariantType,
)
from pqindex.format.value_type import Int96, Kind, NanoTimestamp, ValueType
from pqindex.format.values import (
    Bounds,
    Comparison,
    bound_order,
    page_bounds,
    page_is_contradictory,
    statistics_bounds,
    total_order_key,
    validate_column_index,
)

CORPUS = PARQUET_TESTING / "data"

TYPE_ORDER = ColumnOrder(TYPE_ORDER=TypeDefinedOrder())
IEEE_ORDER = ColumnOrder(IEEE_754_TOTAL_ORDER=IEEE754TotalOrder())
INT96_ORDER = ColumnOrder(INT96_TIMESTAMP_ORDER=Int96TimestampOrder())


# ---------------------------------------------------------------- helpers


def read_footer(path: Path) -> tuple[bytes, FileMetaData, Schema]:
    data = path.read_bytes()
    n = struct.unpack("<I", data[-8:-4])[0]
    md = FileMetaData.decode(data[-8 - n : -8])
    assert md.schema is not None
    return data, md, Schema.from_elements(md.schema, md.column_orders)


def read_page_index(data: bytes, cc: ColumnChunk) -> tuple[ColumnIndex, OffsetIndex]:
    assert cc.column_index_offset is not None and cc.column_index_length is not None
    assert cc.offset_index_offset is not None and cc.offset_index_length is not None
    ci = ColumnIndex.decode(
        data[cc.column_index_offset : cc.column_index_offset + cc.column_index_length]
    )
    oi = OffsetIndex.decode(
        data[cc.offset_index_offset : cc.offset_index_offset + cc.offset_index_length]
    )
    return ci, oi


def make_leaf(el: SchemaElement, order: ColumnOrder | None = TYPE_ORDER) -> LeafColumn:
    return LeafColumn(0, (el.name or "c",), el, 1, 0, order)


def el(ptype: PhysicalType, **kw: Any) -> SchemaElement:
    return SchemaElement(type=int(ptype), name="c", repetition_type=1, **kw)


def i32(v: int) -> bytes:
    return struct.pack("<i", v)


def f64(v: float) -> bytes:
    return struct.pack("<d", v)


_NANOS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
_VT_NANOS = {"millis": 10**6, "micros": 10**3, "nanos": 1}


def data_keys(vt: ValueType, arr: pa.Array) -> list[Any]:
    """The column's values as sort keys in ValueType.sort_key's domain (None for nulls)."""
    t = arr.type
    if pa.types.is_timestamp(t):
        ticks = arr.view(pa.int64()).to_pylist()
        return [None if v is None else v * _NANOS[t.unit] for v in ticks]
    if pa.types.is_time(t):
        assert vt.unit is not None
        ticks = arr.view(pa.int64() if pa.types.is_time64(t) else pa.int32()).to_pylist()
        return [None if v is None else v * _NANOS[t.unit] // _VT_NANOS[vt.unit] for v in ticks]
    if pa.types.is_date32(t):
        days: list[Any] = arr.view(pa.int32()).to_pylist()
        return days
    if isinstance(t, pa.ExtensionType):
        arr = arr.storage
    return [None if v is None else vt.sort_key(v) for v in arr.to_pylist()]


def pyarrow_stat_key(vt: ValueType, v: Any) -> Any:
    """pyarrow's Statistics.min/max in ValueType.sort_key's domain."""
    if vt.kind == Kind.FLOAT16 and isinstance(v, bytes):
        return struct.unpack("<e", v)[0]
    if vt.kind == Kind.TIMESTAMP and hasattr(v, "value"):  # pandas.Timestamp: exact nanos
        return int(v.value)
    if vt.kind == Kind.UUID and isinstance(v, bytes):
        return v
    return vt.sort_key(v)


# ---------------------------------------------------------------- round trip through pyarrow


def _values(kind: str, rng: random.Random) -> Any:
    if kind == "int8":
        return rng.choice([-128, 127, 0, rng.randint(-128, 127)])
    if kind == "int16":
        return rng.randint(-(2**15), 2**15 - 1)
    if kind == "int32":
        return rng.choice([-(2**31), 2**31 - 1, rng.randint(-(2**31), 2**31 - 1)])
    if kind == "int64":
        return rng.choice([-(2**63), 2**63 - 1, rng.randint(-(2**63), 2**63 - 1)])
    if kind in ("uint8", "uint16", "uint32", "uint64"):
        bits = int(kind[4:])
        return rng.choice([0, 2 ** (bits - 1) + 1, 2**bits - 1, rng.randint(0, 2**bits - 1)])
    if kind in ("float32", "float16", "float64"):
        return rng.choice([-0.0, 0.0, 1.5, -2.25, float(rng.randint(-1000, 1000)) / 8])
    if kind.startswith("decimal"):
        scale = 2
        digits = {"decimal_i32": 7, "decimal_i64": 15, "decimal_flba": 25}.get(kind, 5)
        unscaled = rng.randint(-(10**digits) + 1, 10**digits - 1)
        return Decimal(unscaled).scaleb(-scale)
    if kind == "date":
        return dt.date(1970, 1, 1) + dt.timedelta(days=rng.randint(-50_000, 50_000))
    if kind.startswith("time"):
        return rng.randint(0, 86_399)
    if kind.startswith("ts"):
        return rng.randint(-(2**40), 2**40)
    if kind in ("string", "large_string"):
        chars = ["a", "z", "é", "🚀", "Z", "0"]
        return "".join(rng.choice(chars) for _ in range(rng.randint(0, 4)))
    if kind in ("binary", "large_binary"):
        return bytes(rng.choice([0, 0x7F, 0x80, 0xFF]) for _ in range(rng.randint(0, 3)))
    if kind == "fixed":
        return bytes(rng.choice([0, 0x7F, 0x80, 0xFF]) for _ in range(3))
    if kind == "uuid":
        return uuid.UUID(int=rng.getrandbits(128)).bytes
    if kind == "bool":
        return rng.random() < 0.5
    raise AssertionError(kind)


# (case, arrow type, value generator, expected kind, write options)
CASES: list[tuple[str, pa.DataType, str, Kind, dict[str, Any]]] = [
    ("int8", pa.int8(), "int8", Kind.INT, {}),
    ("int16", pa.int16(), "int16", Kind.INT, {}),
    ("int32", pa.int32(), "int32", Kind.INT, {}),
    ("int64", pa.int64(), "int64", Kind.INT, {}),
    ("uint8", pa.uint8(), "uint8", Kind.UINT, {}),
    ("uint16", pa.uint16(), "uint16", Kind.UINT, {}),
    ("uint32", pa.uint32(), "uint32", Kind.UINT, {}),
    ("uint64", pa.uint64(), "uint64", Kind.UINT, {}),
    ("float32", pa.float32(), "float32", Kind.FLOAT, {}),
    ("float64", pa.float64(), "float64", Kind.DOUBLE, {}),
    ("float16", pa.float16(), "float16", Kind.FLOAT16, {}),
    ("decimal_i32", pa.decimal128(9, 2), "decimal_i32", Kind.DECIMAL,
     {"store_decimal_as_integer": True}),
    ("decimal_i64", pa.decimal128(18, 2), "decimal_i64", Kind.DECIMAL,
     {"store_decimal_as_integer": True}),
    ("decimal_flba", pa.decimal128(27, 2), "decimal_flba", Kind.DECIMAL,
     {"store_decimal_as_integer": True}),
    ("decimal_small_flba", pa.decimal128(7, 2), "decimal_small", Kind.DECIMAL, {}),
    ("decimal256", pa.decimal256(40, 2), "decimal_flba", Kind.DECIMAL, {}),
    ("date32", pa.date32(), "date", Kind.DATE, {}),
    ("time32_s", pa.time32("s"), "time", Kind.TIME, {}),
    ("time32_ms", pa.time32("ms"), "time", Kind.TIME, {}),
    ("time64_us", pa.time64("us"), "time", Kind.TIME, {}),
    ("time64_ns", pa.time64("ns"), "time", Kind.TIME, {}),
    ("ts_ms", pa.timestamp("ms"), "ts", Kind.TIMESTAMP, {}),
    ("ts_us_utc", pa.timestamp("us", tz="UTC"), "ts", Kind.TIMESTAMP, {}),
    ("ts_ns", pa.timestamp("ns"), "ts", Kind.TIMESTAMP, {}),
    ("ts_ns_tz", pa.timestamp("ns", tz="Europe/Paris"), "ts", Kind.TIMESTAMP, {}),
    ("string", pa.string(), "string", Kind.STRING, {}),
    ("large_string", pa.large_string(), "large_string", Kind.STRING, {}),
    ("binary", pa.binary(), "binary", Kind.BINARY, {}),
    ("large_binary", pa.large_binary(), "large_binary", Kind.BINARY, {}),
    ("fixed_binary", pa.binary(3), "fixed", Kind.BINARY, {}),
    ("bool", pa.bool_(), "bool", Kind.BOOL, {}),
]
if hasattr(pa, "uuid"):
    CASES.append(("uuid", pa.uuid(), "uuid", Kind.UUID, {}))


def _column(case: str, typ: pa.DataType, gen: str, n: int = 60) -> pa.Array:
    rng = random.Random(case)
    vals: list[Any] = []
    for i in range(n):
        # rows 14..20 all null: with 7-row pages, page 2 is a null page
        if 14 <= i < 21 or rng.random() < 0.15:
            vals.append(None)
        else:
            vals.append(_values(gen, rng))
    if pa.types.is_time(typ) or pa.types.is_timestamp(typ):
        if typ.unit in ("ms", "us", "ns") and pa.types.is_time(typ):
            scale = {"ms": 10**3, "us": 10**6, "ns": 10**9}[typ.unit]
            vals = [None if v is None else v * scale + (v % scale) for v in vals]
        storage = pa.array(vals, pa.int64() if typ.bit_width == 64 else pa.int32())
        return storage.view(typ)
    if isinstance(typ, pa.ExtensionType):
        return pa.ExtensionArray.from_storage(typ, pa.array(vals, typ.storage_type))
    return pa.array(vals, typ)


@pytest.mark.parametrize("case,typ,gen,kind,opts", CASES, ids=[c[0] for c in CASES])
def test_bounds_match_pyarrow(
    tmp_path: Path, case: str, typ: pa.DataType, gen: str, kind: Kind, opts: dict[str, Any]
) -> None:
    arr = _column(case, typ, gen)
    path = tmp_path / f"{case}.parquet"
    pq.write_table(pa.table({"c": arr}), path, write_page_index=True, store_schema=False,
                   max_rows_per_page=7, **opts)
    data, md, schema = read_footer(path)
    leaf = schema.leaves[0]
    vt = ValueType.from_leaf(leaf)
    assert vt.kind == kind, vt
    order = bound_order(leaf)
    assert order.usable, order.reason

    # chunk statistics equal pyarrow's
    assert md.row_groups is not None and md.row_groups[0].columns is not None
    cc = md.row_groups[0].columns[0]
    assert cc.meta_data is not None
    b = statistics_bounds(cc.meta_data.statistics, leaf, cc.meta_data.num_values)
    assert b.usable, b.reason
    assert b.min is not None and b.max is not None
    assert b.null_count == arr.null_count
    pstats = pq.ParquetFile(path).metadata.row_group(0).column(0).statistics
    assert pstats.has_min_max
    got = (vt.sort_key(b.min), vt.sort_key(b.max))
    want = (pyarrow_stat_key(vt, pstats.min), pyarrow_stat_key(vt, pstats.max))
    if kind == Kind.TIME and vt.unit == "nanos":
        # pyarrow hands TIME(NANOS) back as datetime.time, cut to microseconds
        assert (got[0] // 1000 * 1000, got[1] // 1000 * 1000) == want
    else:
        assert got == want

    # and equal the data's own extremes (pyarrow writes exact, untruncated bounds)
    keys = [k for k in data_keys(vt, arr) if k is not None]
    assert got[0] <= min(keys) and max(keys) <= got[1]
    assert (order.key(b.min), order.key(b.max)) == (min(keys), max(keys))
    assert isinstance(vt.display(b.min), str) and isinstance(vt.display(b.max), str)

    # every page's values lie within its ColumnIndex bounds
    ci, oi = read_page_index(data, cc)
    assert oi.page_locations is not None
    n_pages = len(oi.page_locations)
    assert n_pages > 3
    assert validate_column_index(ci, n_pages, leaf) is None
    starts = [loc.first_row_index for loc in oi.page_locations] + [len(arr)]
    all_keys = data_keys(vt, arr)
    saw_null_page = False
    for p in range(n_pages):
        page_keys = all_keys[starts[p] : starts[p + 1]]
        present = [k for k in page_keys if k is not None]
        pb = page_bounds(ci, leaf, p)
        assert pb.null_count == len(page_keys) - len(present)
        if not present:
            assert pb.all_null and not pb.usable
            saw_null_page = True
            continue
        assert pb.usable, pb.reason
        assert pb.min is not None and pb.max is not None
        assert order.key(pb.min) <= min(present), (p, pb.min, present)
        assert max(present) <= order.key(pb.max), (p, pb.max, present)
    assert saw_null_page


def test_uint64_above_2_63_from_pyarrow(tmp_path: Path) -> None:
    path = tmp_path / "u.parquet"
    vals = [3, 2**63 + 7, 2**64 - 1, 2**63 - 1]
    pq.write_table(pa.table({"u": pa.array(vals, pa.uint64())}), path,
                   write_page_index=True, store_schema=False)
    _, md, schema = read_footer(path)
    assert md.row_groups is not None and md.row_groups[0].columns is not None
    meta = md.row_groups[0].columns[0].meta_data
    assert meta is not None
    b = statistics_bounds(meta.statistics, schema.leaves[0], meta.num_values)
    assert (b.min, b.max) == (3, 2**64 - 1)
    assert b.comparison == Comparison.UNSIGNED


# ---------------------------------------------------------------- value types


def test_logical_type_wins_over_converted_type() -> None:
    e = el(PhysicalType.INT32, converted_type=15,  # INT_8
           logicalType=LogicalType(INTEGER=IntType(bitWidth=8, isSigned=False)))
    vt = ValueType.from_element(e)
    assert (vt.kind, vt.bit_width) == (Kind.UINT, 8)


def test_converted_types() -> None:
    assert ValueType.from_element(el(PhysicalType.INT64, converted_type=14)).kind == Kind.UINT
    assert ValueType.from_element(el(PhysicalType.BYTE_ARRAY, converted_type=0)).kind \
        == Kind.STRING
    assert ValueType.from_element(el(PhysicalType.BYTE_ARRAY, converted_type=20)).kind \
        == Kind.BINARY  # BSON
    ts = ValueType.from_element(el(PhysicalType.INT64, converted_type=9))  # TIMESTAMP_MILLIS
    assert (ts.kind, ts.unit, ts.utc) == (Kind.TIMESTAMP, "millis", True)
    assert ts.decode(struct.pack("<q", 1000)) == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)
    iv = ValueType.from_element(el(PhysicalType.FIXED_LEN_BYTE_ARRAY, type_length=12,
                                   converted_type=21))
    assert iv.kind == Kind.INTERVAL
    dec = ValueType.from_element(el(PhysicalType.INT32, converted_type=5, scale=2, precision=4))
    assert dec.decode(i32(-123)) == Decimal("-1.23")


def test_physical_defaults_and_mismatches() -> None:
    assert ValueType.from_element(el(PhysicalType.INT96)).kind == Kind.INT96
    assert ValueType.from_element(el(PhysicalType.FIXED_LEN_BYTE_ARRAY, type_length=4)).kind \
        == Kind.BINARY
    # DATE on INT64 is not a date; DECIMAL without scale is not guessed
    bad_date = el(PhysicalType.INT64, converted_type=6)
    assert ValueType.from_element(bad_date).kind == Kind.UNKNOWN
    assert ValueType.from_element(el(PhysicalType.INT32, converted_type=5)).kind == Kind.UNKNOWN


def test_decode_wrong_length_raises() -> None:
    cases = [
        (el(PhysicalType.INT32), b"\x01\x02\x03"),
        (el(PhysicalType.INT64), b"\x00" * 4),
        (el(PhysicalType.DOUBLE), b"\x00" * 4),
        (el(PhysicalType.BOOLEAN), b"\x00\x00"),
        (el(PhysicalType.BOOLEAN), b"\x02"),
        (el(PhysicalType.INT96), b"\x00" * 8),
        (el(PhysicalType.FIXED_LEN_BYTE_ARRAY, type_length=16,
            logicalType=LogicalType(UUID=UUIDType())), b"\x00" * 15),
        (el(PhysicalType.FIXED_LEN_BYTE_ARRAY, type_length=5, scale=2, precision=10,
            logicalType=LogicalType(DECIMAL=DecimalType(2, 10))), b"\x00" * 4),
        (el(PhysicalType.BYTE_ARRAY, scale=2, precision=10,
            logicalType=LogicalType(DECIMAL=DecimalType(2, 10))), b""),
    ]
    for e, raw in cases:
        with pytest.raises(ValueError):
            ValueType.from_element(e).decode(raw)


def test_strings_keep_invalid_utf8_as_bytes() -> None:
    vt = ValueType.from_element(el(PhysicalType.BYTE_ARRAY,
                                   logicalType=LogicalType(STRING=StringType())))
    assert vt.decode("é".encode()) == "é"
    assert vt.decode(b"\xc3") == b"\xc3"  # truncated mid-character
    assert vt.sort_key(b"\xc3") < vt.sort_key("é")


def test_nanosecond_and_out_of_range_temporals() -> None:
    ns = ValueType.from_element(el(PhysicalType.INT64, logicalType=LogicalType(
        TIMESTAMP=TimestampType(isAdjustedToUTC=True, unit=TimeUnit(NANOS=NanoSeconds())))))
    v = ns.decode(struct.pack("<q", 1_000_000_007))
    assert v == NanoTimestamp(1_000_000_007, True)
    assert ns.display(v) == "1970-01-01T00:00:01.000000007+00:00"
    ms = ValueType.from_element(el(PhysicalType.INT64, logicalType=LogicalType(
        TIMESTAMP=TimestampType(isAdjustedToUTC=False, unit=TimeUnit(MILLIS=MilliSeconds())))))
    assert ms.decode(struct.pack("<q", 0)) == dt.datetime(1970, 1, 1)
    far = ms.decode(struct.pack("<q", 2**62))
    assert isinstance(far, NanoTimestamp) and far.nanos == 2**62 * 10**6
    assert ms.sort_key(far) > ms.sort_key(dt.datetime(9999, 12, 31))
    date = ValueType.from_element(el(PhysicalType.INT32, converted_type=6))
    assert date.decode(i32(2**31 - 1)) == 2**31 - 1  # beyond datetime.date
    assert date.decode(i32(-1)) == dt.date(1969, 12, 31)
    us = ValueType.from_element(el(PhysicalType.INT64, converted_type=8))  # TIME_MICROS
    assert us.decode(struct.pack("<q", 3_600_000_001)) == dt.time(1, 0, 0, 1, tzinfo=dt.UTC)


def test_int96_decodes_julian_day_and_nanos() -> None:
    vt = ValueType.from_element(el(PhysicalType.INT96))
    raw = struct.pack("<qi", 3_600 * 10**9, 2_440_589)  # 1970-01-02 01:00
    v = vt.decode(raw)
    assert v == Int96(2_440_589, 3_600 * 10**9)
    assert isinstance(v, Int96)
    assert v.to_timestamp().nanos == (86_400 + 3_600) * 10**9
    assert vt.display(v) == "1970-01-02T01:00:00.000000000"


# ---------------------------------------------------------------- order rules


def test_unsigned_compared_as_unsigned() -> None:
    leaf = make_leaf(el(PhysicalType.INT64, logicalType=LogicalType(
        INTEGER=IntType(bitWidth=64, isSigned=False))))
    lo, hi = struct.pack("<Q", 5), struct.pack("<Q", 2**63 + 1)
    b = statistics_bounds(Statistics(min_value=lo, max_value=hi), leaf)
    assert (b.min, b.max, b.usable) == (5, 2**63 + 1, True)
    # the same bytes under a signed reading would be min > max
    assert validate_column_index(
        ColumnIndex(null_pages=[False], min_values=[lo], max_values=[hi], boundary_order=0),
        1, leaf) is None
    # deprecated min/max are signed-order: never for unsigned columns
    old = statistics_bounds(Statistics(min=lo, max=hi), leaf)
    assert not old.usable and "signed-order" in (old.reason or "")


def test_strings_by_unsigned_bytes() -> None:
    leaf = make_leaf(el(PhysicalType.BYTE_ARRAY, logicalType=LogicalType(STRING=StringType())))
    vt = ValueType.from_leaf(leaf)
    assert vt.sort_key("é") > vt.sort_key("z")
    b = statistics_bounds(Statistics(min_value=b"z", max_value="é".encode()), leaf)
    assert (b.min, b.max, b.usable) == ("z", "é", True)
    # é before z is a contradiction in unsigned byte order (signed bytes would accept it)
    ci = ColumnIndex(null_pages=[False], min_values=["é".encode()], max_values=[b"z"],
                     boundary_order=0, null_counts=[0])
    assert "min" in (validate_column_index(ci, 1, leaf) or "")
    # deprecated min/max of byte arrays were sorted signed by old writers
    assert not statistics_bounds(Statistics(min=b"a", max=b"b"), leaf).usable


def test_negative_decimals_in_flba() -> None:
    e = el(PhysicalType.FIXED_LEN_BYTE_ARRAY, type_length=2, scale=2, precision=4,
           logicalType=LogicalType(DECIMAL=DecimalType(scale=2, precision=4)))
    leaf = make_leaf(e)
    lo = (-123).to_bytes(2, "big", signed=True)  # 0xff85: byte-wise larger than 0x0032
    hi = (50).to_bytes(2, "big", signed=True)
    b = statistics_bounds(Statistics(min_value=lo, max_value=hi), leaf)
    assert (b.min, b.max, b.usable) == (Decimal("-1.23"), Decimal("0.50"), True)
    assert b.comparison == Comparison.SIGNED
    assert validate_column_index(
        ColumnIndex(null_pages=[False, False], min_values=[lo, hi], max_values=[hi, hi],
                    boundary_order=1), 2, leaf) is None
    # FLBA decimals are not usable from the deprecated signed-byte min/max
    assert not statistics_bounds(Statistics(min=lo, max=hi), leaf).usable


def test_nan_is_never_a_bound() -> None:
    leaf = make_leaf(el(PhysicalType.DOUBLE))
    nan = f64(math.nan)
    b = statistics_bounds(Statistics(min_value=f64(1.0), max_value=nan, nan_count=1), leaf)
    assert b.min == 1.0 and b.max is None and not b.usable
    assert b.max_raw == nan and "max is NaN" in (b.reason or "")
    b = statistics_bounds(Statistics(min_value=nan, max_value=f64(2.0)), leaf)
    assert b.min is None and b.max == 2.0
    ci = ColumnIndex(null_pages=[False], min_values=[nan], max_values=[nan], boundary_order=0)
    pb = page_bounds(ci, leaf, 0)
    assert pb.min is None and pb.max is None and not pb.usable
    # a NaN in an ordered column index breaks binary search: reject it
    ci2 = ColumnIndex(null_pages=[False, False], min_values=[f64(1.0), nan],
                      max_values=[f64(2.0), f64(3.0)], boundary_order=1)
    assert validate_column_index(ci2, 2, leaf) is not None


def test_all_nan_under_total_order_and_by_counts() -> None:
    leaf = make_leaf(el(PhysicalType.FLOAT), IEEE_ORDER)
    small_nan, big_nan = b"\x00\x00\xc0\x7f", b"\xff\xff\xff\x7f"
    ci = ColumnIndex(null_pages=[False, False], min_values=[struct.pack("<f", 1.0), small_nan],
                     max_values=[struct.pack("<f", 2.0), big_nan], boundary_order=1,
                     null_counts=[0, 0], nan_counts=[0, 4])
    # +NaN sorts after every number in total order, so the index is ascending
    assert validate_column_index(ci, 2, leaf) is None
    # but -NaN sorts first: an ascending claim with it is false
    ci_neg = ColumnIndex(null_pages=[False, False],
                         min_values=[struct.pack("<f", 1.0), b"\xff\xff\xff\xff"],
                         max_values=[struct.pack("<f", 2.0), big_nan], boundary_order=1)
    assert validate_column_index(ci_neg, 2, leaf) is not None
    pb = page_bounds(ci, leaf, 1)
    assert pb.all_nan and not pb.usable and pb.min is None and pb.nan_count == 4
    assert page_bounds(ci, leaf, 0).usable
    # TYPE_ORDER: all NaN only known from nan_count + null_count == num_values
    leaf2 = make_leaf(el(PhysicalType.FLOAT))
    b = statistics_bounds(Statistics(null_count=1, nan_count=3), leaf2, num_values=4)
    assert b.all_nan and not b.usable


def test_zero_bounds_widened_under_type_order_only() -> None:
    leaf = make_leaf(el(PhysicalType.DOUBLE))
    b = statistics_bounds(Statistics(min_value=f64(0.0), max_value=f64(-0.0)), leaf)
    assert b.usable
    assert math.copysign(1, b.min) == -1 and math.copysign(1, b.max) == 1  # type: ignore[arg-type]
    ieee = make_leaf(el(PhysicalType.DOUBLE), IEEE_ORDER)
    b = statistics_bounds(Statistics(min_value=f64(0.0), max_value=f64(1.0)), ieee)
    assert math.copysign(1, b.min) == 1  # type: ignore[arg-type]


def test_total_order_key() -> None:
    vals = [-math.inf, -1.0, -0.0, 0.0, 1e-300, 1.0, math.inf]
    keys = [total_order_key(v) for v in vals]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert total_order_key(-math.nan) < keys[0] and total_order_key(math.nan) > keys[-1]


def test_int96_needs_int96_order() -> None:
    e = el(PhysicalType.INT96)
    early = struct.pack("<qi", 80_000 * 10**9, 2_440_588)
    late = struct.pack("<qi", 1, 2_440_589)  # smaller nanos, later day
    for order in (TYPE_ORDER, None, ColumnOrder()):
        leaf = make_leaf(e, order)
        assert not bound_order(leaf).usable
        b = statistics_bounds(Statistics(min_value=early, max_value=late, min=early,
                                         max=late), leaf)
        assert not b.usable and b.min is None
    leaf = make_leaf(e, INT96_ORDER)
    bo = bound_order(leaf)
    assert bo.comparison == Comparison.INT96
    b = statistics_bounds(Statistics(min_value=early, max_value=late), leaf)
    assert b.usable and bo.key(b.min) < bo.key(b.max)  # type: ignore[arg-type]
    # days first: the later day wins despite smaller nanos
    ci = ColumnIndex(null_pages=[False], min_values=[late], max_values=[early], boundary_order=0)
    assert validate_column_index(ci, 1, leaf) is not None


def test_no_column_orders() -> None:
    leaf = make_leaf(el(PhysicalType.INT32), None)
    bo = bound_order(leaf)
    assert not bo.usable and bo.reason == "file has no column_orders"
    assert bo.legacy_usable
    b = statistics_bounds(Statistics(min_value=i32(1), max_value=i32(9)), leaf)
    assert not b.usable and "file has no column_orders" in (b.reason or "")
    ci = ColumnIndex(null_pages=[False], min_values=[i32(1)], max_values=[i32(9)],
                     boundary_order=0)
    assert page_bounds(ci, leaf, 0).reason == "file has no column_orders"
    # deprecated signed min/max still serve a signed column
    b = statistics_bounds(Statistics(min_value=i32(1), max_value=i32(9), min=i32(-5),
                                     max=i32(10)), leaf)
    assert (b.min, b.max, b.source) == (-5, 10, "min/max")


def test_prefers_min_value_and_reports_exactness() -> None:
    leaf = make_leaf(el(PhysicalType.INT32))
    b = statistics_bounds(Statistics(min_value=i32(1), max_value=i32(9), min=i32(-5),
                                     max=i32(10), is_min_value_exact=True,
                                     is_max_value_exact=False, null_count=2), leaf, 10)
    assert (b.min, b.max, b.source) == (1, 9, "min_value/max_value")
    assert (b.min_exact, b.max_exact, b.null_count, b.all_null) == (True, False, 2, False)
    assert statistics_bounds(Statistics(null_count=10), leaf, 10).all_null
    assert statistics_bounds(None, leaf).reason == "no statistics"


def test_unusable_orders_and_types() -> None:
    unknown_order = ColumnOrder()
    assert bound_order(make_leaf(el(PhysicalType.INT32), unknown_order)).reason \
        == "unknown column order"
    assert not bound_order(make_leaf(el(PhysicalType.INT32), IEEE_ORDER)).usable
    assert not bound_order(make_leaf(el(PhysicalType.INT32), INT96_ORDER)).usable
    interval = el(PhysicalType.FIXED_LEN_BYTE_ARRAY, type_length=12, converted_type=21)
    assert not bound_order(make_leaf(interval)).usable
    for lt in (LogicalType(LIST=ListType()), LogicalType(VARIANT=VariantType()),
               LogicalType(GEOMETRY=GeometryType()), LogicalType()):
        e = el(PhysicalType.BYTE_ARRAY, logicalType=lt, converted_type=0)
        bo = bound_order(make_leaf(e))
        assert not bo.usable and not bo.legacy_usable, lt
        assert ValueType.from_element(e).kind == Kind.UNKNOWN


def test_legacy_min_max_signed_types_only() -> None:
    usable = [
        el(PhysicalType.INT32), el(PhysicalType.INT64), el(PhysicalType.BOOLEAN),
        el(PhysicalType.FLOAT), el(PhysicalType.DOUBLE), el(PhysicalType.INT32, converted_type=6),
        el(PhysicalType.INT64, converted_type=10),
        el(PhysicalType.INT64, converted_type=5, scale=1, precision=12),
    ]
    unusable = [
        el(PhysicalType.BYTE_ARRAY), el(PhysicalType.BYTE_ARRAY, converted_type=0),
        el(PhysicalType.INT32, converted_type=13), el(PhysicalType.INT96),
        el(PhysicalType.FIXED_LEN_BYTE_ARRAY, type_length=8, converted_type=5, scale=1,
           precision=12),
    ]
    for e in usable:
        assert bound_order(make_leaf(e, None)).legacy_usable, e
    for e in unusable:
        assert not bound_order(make_leaf(e, None)).legacy_usable, e


# ---------------------------------------------------------------- column index validation


def _ci(**kw: Any) -> ColumnIndex:
    base: dict[str, Any] = {"null_pages": [False, True], "min_values": [i32(1), b""],
                            "max_values": [i32(5), b""], "boundary_order": 0,
                            "null_counts": [0, 3]}
    base.update(kw)
    return ColumnIndex(**base)


def test_validate_column_index() -> None:
    leaf = make_leaf(el(PhysicalType.INT32))
    assert validate_column_index(_ci(), 2, leaf) is None
    assert validate_column_index(_ci(), 3, leaf) is not None  # page count differs
    assert validate_column_index(_ci(max_values=[i32(5)]), 2) is not None
    assert validate_column_index(_ci(null_counts=[0]), 2) is not None
    assert validate_column_index(_ci(nan_counts=[0, 0, 0]), 2) is not None
    assert validate_column_index(_ci(boundary_order=3), 2) is not None
    assert validate_column_index(_ci(null_pages=None), 2) is not None
    # a null page with no nulls contradicts itself
    why = validate_column_index(_ci(null_counts=[0, 0]), 2)
    assert why is not None and "null count of 0" in why
    # empty bound on a non-null page of a fixed-width type
    why = validate_column_index(_ci(null_pages=[False, False], null_counts=[0, 0]), 2, leaf)
    assert why is not None and "empty" in why
    # min > max
    why = validate_column_index(_ci(min_values=[i32(7), b""]), 2, leaf)
    assert why is not None and "min 7 > max 5" in why
    assert page_is_contradictory(_ci(min_values=[i32(7), b""]), leaf, 0) is not None
    assert page_is_contradictory(_ci(min_values=[i32(7), b""]), None, 0) is None
    # boundary order claimed but not true
    ci = ColumnIndex(null_pages=[False, True, False], min_values=[i32(5), b"", i32(1)],
                     max_values=[i32(6), b"", i32(9)], boundary_order=1,
                     null_counts=[0, 1, 0])
    why = validate_column_index(ci, 3, leaf)
    assert why is not None and "ASCENDING" in why
    ci.boundary_order = 2
    assert "DESCENDING" in (validate_column_index(ci, 3, leaf) or "")
    # an empty bound is fine for a BYTE_ARRAY page (the empty string)
    sleaf = make_leaf(el(PhysicalType.BYTE_ARRAY, logicalType=LogicalType(STRING=StringType())))
    assert validate_column_index(ColumnIndex(null_pages=[False], min_values=[b""],
                                             max_values=[b"a"], boundary_order=0), 1,
                                 sleaf) is None


def test_page_bounds_out_of_range_and_null_page() -> None:
    leaf = make_leaf(el(PhysicalType.INT32))
    pb = page_bounds(_ci(), leaf, 1)
    assert pb.all_null and pb.null_count == 3 and not pb.usable
    assert not page_bounds(_ci(), leaf, 5).usable


# ---------------------------------------------------------------- corpus files


def corpus(name: str) -> Path:
    path = CORPUS / name
    if not path.exists():
        missing(f"{name} is not in the corpus")
    return path


def _chunk_bounds(path: Path, rg: int = 0, col: int = 0) -> tuple[LeafColumn, Bounds]:
    _, md, schema = read_footer(path)
    assert md.row_groups is not None
    columns = md.row_groups[rg].columns
    assert columns is not None
    meta = columns[col].meta_data
    assert meta is not None
    leaf = schema.leaves[col]
    return leaf, statistics_bounds(meta.statistics, leaf, meta.num_values)


def test_corpus_floating_orders_nan_count() -> None:
    path = corpus("floating_orders_nan_count.parquet")
    data, md, schema = read_footer(path)
    assert md.row_groups is not None
    names = [leaf.name for leaf in schema.leaves]
    for rg_i, rg in enumerate(md.row_groups):
        assert rg.columns is not None
        for i, leaf in enumerate(schema.leaves):
            meta = rg.columns[i].meta_data
            assert meta is not None
            b = statistics_bounds(meta.statistics, leaf, meta.num_values)
            ieee = names[i].endswith("ieee754")
            assert bound_order(leaf).comparison == (
                Comparison.FLOAT_TOTAL if ieee else Comparison.FLOAT)
            if rg_i == 2:  # all NaN
                assert b.all_nan and not b.usable, (names[i], b)
                continue
            if rg_i == 1 and not ieee:  # mixed NaN under TYPE_ORDER: writer left bounds out
                assert not b.usable and not b.all_nan and b.nan_count == 4
                continue
            assert b.usable, (names[i], b)
            if rg_i == 3:  # zero min: widened to -0.0 under TYPE_ORDER only
                assert b.min == 0.0
                assert math.copysign(1, b.min) == (1 if ieee else -1)  # type: ignore[arg-type]
            if rg_i == 4:  # zero max: widened to +0.0 under TYPE_ORDER only
                assert b.max == 0.0
                assert math.copysign(1, b.max) == (-1 if ieee else 1)  # type: ignore[arg-type]
            if rg.columns[i].column_index_offset is not None:
                ci, oi = read_page_index(data, rg.columns[i])
                assert oi.page_locations is not None
                assert validate_column_index(ci, len(oi.page_locations), leaf) is None
                pb = page_bounds(ci, leaf, 0)
                assert pb.usable
    # the all-NaN TYPE_ORDER chunks carry no bounds; the IEEE ones carry NaNs
    b = _chunk_bounds(path, 2, names.index("double_ieee754"))[1]
    assert b.min_raw is not None and math.isnan(struct.unpack("<d", b.min_raw)[0])


def test_corpus_nan_in_stats() -> None:
    _, b = _chunk_bounds(corpus("nan_in_stats.parquet"))
    assert b.min == 1.0 and b.max is None and not b.usable


def test_corpus_int32_with_null_pages() -> None:
    path = corpus("int32_with_null_pages.parquet")
    data, md, schema = read_footer(path)
    assert md.row_groups is not None and md.row_groups[0].columns is not None
    cc = md.row_groups[0].columns[0]
    leaf = schema.leaves[0]
    ci, oi = read_page_index(data, cc)
    assert oi.page_locations is not None
    n = len(oi.page_locations)
    assert validate_column_index(ci, n, leaf) is None
    values = pq.read_table(path).column(0).to_pylist()
    starts = [loc.first_row_index for loc in oi.page_locations] + [len(values)]
    nulls = 0
    for p in range(n):
        page = values[starts[p] : starts[p + 1]]
        present = [v for v in page if v is not None]
        pb = page_bounds(ci, leaf, p)
        assert pb.all_null == (not present)
        nulls += pb.all_null
        if present:
            assert pb.min is not None and pb.max is not None
            assert pb.min <= min(present) and max(present) <= pb.max
    assert nulls > 0


def test_corpus_binary_truncated_min_max() -> None:
    path = corpus("binary_truncated_min_max.parquet")
    _, _, schema = read_footer(path)
    table = pq.read_table(path)
    for i, leaf in enumerate(schema.leaves):
        _, b = _chunk_bounds(path, 0, i)
        assert b.usable
        exact = "no_truncation" in leaf.name
        assert b.min_exact is exact
        vt = ValueType.from_leaf(leaf)
        keys = [vt.sort_key(v) for v in table.column(i).to_pylist() if v is not None]
        assert b.min is not None and b.max is not None
        assert vt.sort_key(b.min) <= min(keys) and max(keys) <= vt.sort_key(b.max)


def test_corpus_int96_from_spark_is_unusable() -> None:
    path = corpus("int96_from_spark.parquet")
    _, _, schema = read_footer(path)
    leaf = schema.leaves[0]
    assert ValueType.from_leaf(leaf).kind == Kind.INT96
    bo = bound_order(leaf)
    assert not bo.usable and not bo.legacy_usable


def test_corpus_decimals() -> None:
    for name, expect in (("int32_decimal.parquet", PhysicalType.INT32),
                         ("int64_decimal.parquet", PhysicalType.INT64)):
        path = corpus(name)
        leaf, b = _chunk_bounds(path)
        vt = ValueType.from_leaf(leaf)
        assert (vt.kind, vt.physical) == (Kind.DECIMAL, expect)
        # no column_orders: only the deprecated signed min/max serve
        assert b.usable and b.source == "min/max"
        values = pq.read_table(path).column(0).to_pylist()
        assert (b.min, b.max) == (min(values), max(values))
    leaf, b = _chunk_bounds(corpus("fixed_length_decimal.parquet"))
    assert ValueType.from_leaf(leaf).kind == Kind.DECIMAL and not b.usable
    leaf, b = _chunk_bounds(corpus("byte_array_decimal.parquet"))
    vt = ValueType.from_leaf(leaf)
    assert (vt.kind, vt.physical) == (Kind.DECIMAL, PhysicalType.BYTE_ARRAY)
    assert not b.usable


def test_corpus_float16() -> None:
    _, b = _chunk_bounds(corpus("float16_nonzeros_and_nans.parquet"))
    assert (b.min, b.max, b.usable) == (-2.0, 2.0, True)
    _, b = _chunk_bounds(corpus("float16_zeros_and_nans.parquet"))
    assert b.usable and b.min == 0.0 and b.max == 0.0
    assert math.copysign(1, b.min) == -1 and math.copysign(1, b.max) == 1  # type: ignore[arg-type]


# ---------------------------------------------------------------- numpy proof = exact checks


@pytest.mark.parametrize("seed", range(8))
def test_integer_column_index_fast_check_agrees_with_exact_checks(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The numpy proof of soundness never accepts what the per-page checks refuse."""
    import pqindex.format.values as values_mod

    rng = random.Random(seed)
    leaves = [
        make_leaf(el(PhysicalType.INT64)),
        make_leaf(el(PhysicalType.INT32)),
        make_leaf(el(PhysicalType.INT32, logicalType=LogicalType(
            INTEGER=IntType(bitWidth=32, isSigned=False)))),
        make_leaf(el(PhysicalType.INT64, logicalType=LogicalType(
            INTEGER=IntType(bitWidth=64, isSigned=False)))),
    ]
    exact_only = values_mod.validate_column_index
    for _ in range(300):
        leaf = rng.choice(leaves)
        width = 8 if leaf.element.type == PhysicalType.INT64 else 4
        signed = bound_order(leaf).comparison == "signed"
        n = rng.randint(1, 12)
        base = sorted(rng.randint(-50, 50) for _ in range(2 * n))
        if rng.random() < 0.5:
            rng.shuffle(base)
        fmt = {4: "i", 8: "q"}[width] if signed else {4: "I", 8: "Q"}[width]

        def enc(v: int, fmt: str = fmt, signed: bool = signed, width: int = width) -> bytes:
            return struct.pack("<" + fmt, v if signed else v % (1 << (8 * width)))

        null_pages = [rng.random() < 0.15 for _ in range(n)]
        mins = [b"" if null_pages[i] else enc(base[2 * i]) for i in range(n)]
        maxs = [b"" if null_pages[i] else enc(base[2 * i + 1]) for i in range(n)]
        if rng.random() < 0.1:  # a short bound
            k = rng.randrange(n)
            mins[k] = mins[k][:-1] if mins[k] else b"\x01"
        counts = [rng.randint(-1 if rng.random() < 0.05 else 0, 3) for _ in range(n)]
        ci = ColumnIndex(
            null_pages=null_pages, min_values=mins, max_values=maxs,
            boundary_order=rng.choice([0, 1, 2]),
            null_counts=counts if rng.random() < 0.8 else None,
        )
        with_fast = validate_column_index(ci, n, leaf)
        with monkeypatch.context() as m:
            m.setattr(values_mod, "_integer_index_is_sound", lambda ci, leaf: False)
            exact = exact_only(ci, n, leaf)
        assert (with_fast is None) == (exact is None), (ci, with_fast, exact)


@pytest.mark.parametrize("seed", range(8))
def test_bytes_column_index_fast_check_agrees_with_exact_checks(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The raw-bytes proof for strings and binary never accepts what the exact checks
    refuse (invalid UTF-8, empty bounds, prefixes and bytes above 0x7f included)."""
    import pqindex.format.values as values_mod

    rng = random.Random(seed)
    leaves = [
        make_leaf(el(PhysicalType.BYTE_ARRAY, converted_type=0,
                     logicalType=LogicalType(STRING=StringType()))),
        make_leaf(el(PhysicalType.BYTE_ARRAY)),
    ]
    alphabet = [b"", b"a", b"ab", b"b", b"\x7f", b"\x80", b"\xc3\xa9", b"\xff", b"\xc3"]
    exact_only = values_mod.validate_column_index
    for _ in range(300):
        leaf = rng.choice(leaves)
        n = rng.randint(1, 10)
        words = [b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))
                 for _ in range(2 * n)]
        if rng.random() < 0.5:
            words.sort()
        null_pages = [rng.random() < 0.15 for _ in range(n)]
        mins = [b"" if null_pages[i] else words[2 * i] for i in range(n)]
        maxs = [b"" if null_pages[i] else words[2 * i + 1] for i in range(n)]
        ci = ColumnIndex(
            null_pages=null_pages, min_values=mins, max_values=maxs,
            boundary_order=rng.choice([0, 1, 2]),
            null_counts=[rng.randint(0, 3) for _ in range(n)] if rng.random() < 0.8 else None,
        )
        with_fast = validate_column_index(ci, n, leaf)
        with monkeypatch.context() as m:
            m.setattr(values_mod, "_bytes_index_is_sound", lambda ci, leaf: False)
            exact = exact_only(ci, n, leaf)
        assert (with_fast is None) == (exact is None), (ci, with_fast, exact)
