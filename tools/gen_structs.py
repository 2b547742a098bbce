"""Generates src/pqindex/format/structs.py from a compact description of parquet.thrift.

Run once when the format adds fields; the output is committed.
"""
SPEC = r"""
SizeStatistics: 1 unencoded_byte_array_data_bytes i64; 2 repetition_level_histogram list<i64>; 3 definition_level_histogram list<i64>
BoundingBox: 1 xmin double; 2 xmax double; 3 ymin double; 4 ymax double; 5 zmin double; 6 zmax double; 7 mmin double; 8 mmax double
GeospatialStatistics: 1 bbox BoundingBox; 2 geospatial_types list<i32>
Statistics: 1 max binary; 2 min binary; 3 null_count i64; 4 distinct_count i64; 5 max_value binary; 6 min_value binary; 7 is_max_value_exact bool; 8 is_min_value_exact bool; 9 nan_count i64
StringType:
UUIDType:
MapType:
ListType:
VectorType:
EnumType:
DateType:
Float16Type:
NullType:
DecimalType: 1 scale i32; 2 precision i32
MilliSeconds:
MicroSeconds:
NanoSeconds:
TimeUnit: 1 MILLIS MilliSeconds; 2 MICROS MicroSeconds; 3 NANOS NanoSeconds
TimestampType: 1 isAdjustedToUTC bool; 2 unit TimeUnit
TimeType: 1 isAdjustedToUTC bool; 2 unit TimeUnit
IntType: 1 bitWidth i8; 2 isSigned bool
JsonType:
BsonType:
VariantType: 1 specification_version i8
GeometryType: 1 crs string
GeographyType: 1 crs string; 2 algorithm i32
LogicalType: 1 STRING StringType; 2 MAP MapType; 3 LIST ListType; 4 ENUM EnumType; 5 DECIMAL DecimalType; 6 DATE DateType; 7 TIME TimeType; 8 TIMESTAMP TimestampType; 10 INTEGER IntType; 11 UNKNOWN NullType; 12 JSON JsonType; 13 BSON BsonType; 14 UUID UUIDType; 15 FLOAT16 Float16Type; 16 VARIANT VariantType; 17 GEOMETRY GeometryType; 18 GEOGRAPHY GeographyType; 19 VECTOR VectorType
SchemaElement: 1 type i32; 2 type_length i32; 3 repetition_type i32; 4 name string; 5 num_children i32; 6 converted_type i32; 7 scale i32; 8 precision i32; 9 field_id i32; 10 logicalType LogicalType; 11 vector_length i32
DataPageHeader: 1 num_values i32; 2 encoding i32; 3 definition_level_encoding i32; 4 repetition_level_encoding i32; 5 statistics Statistics
IndexPageHeader:
DictionaryPageHeader: 1 num_values i32; 2 encoding i32; 3 is_sorted bool
DataPageHeaderV2: 1 num_values i32; 2 num_nulls i32; 3 num_rows i32; 4 encoding i32; 5 definition_levels_byte_length i32; 6 repetition_levels_byte_length i32; 7 is_compressed bool; 8 statistics Statistics
SplitBlockAlgorithm:
BloomFilterAlgorithm: 1 BLOCK SplitBlockAlgorithm
XxHash:
BloomFilterHash: 1 XXHASH XxHash
Uncompressed:
BloomFilterCompression: 1 UNCOMPRESSED Uncompressed
BloomFilterHeader: 1 numBytes i32; 2 algorithm BloomFilterAlgorithm; 3 hash BloomFilterHash; 4 compression BloomFilterCompression
PageHeader: 1 type i32; 2 uncompressed_page_size i32; 3 compressed_page_size i32; 4 crc i32; 5 data_page_header DataPageHeader; 6 index_page_header IndexPageHeader; 7 dictionary_page_header DictionaryPageHeader; 8 data_page_header_v2 DataPageHeaderV2
KeyValue: 1 key string; 2 value string
SortingColumn: 1 column_idx i32; 2 descending bool; 3 nulls_first bool
PageEncodingStats: 1 page_type i32; 2 encoding i32; 3 count i32
ColumnMetaData: 1 type i32; 2 encodings list<i32>; 3 path_in_schema list<string>; 4 codec i32; 5 num_values i64; 6 total_uncompressed_size i64; 7 total_compressed_size i64; 8 key_value_metadata list<KeyValue>; 9 data_page_offset i64; 10 index_page_offset i64; 11 dictionary_page_offset i64; 12 statistics Statistics; 13 encoding_stats list<PageEncodingStats>; 14 bloom_filter_offset i64; 15 bloom_filter_length i32; 16 size_statistics SizeStatistics; 17 geospatial_statistics GeospatialStatistics
EncryptionWithFooterKey:
EncryptionWithColumnKey: 1 path_in_schema list<string>; 2 key_metadata binary
ColumnCryptoMetaData: 1 ENCRYPTION_WITH_FOOTER_KEY EncryptionWithFooterKey; 2 ENCRYPTION_WITH_COLUMN_KEY EncryptionWithColumnKey
ColumnChunk: 1 file_path string; 2 file_offset i64; 3 meta_data ColumnMetaData; 4 offset_index_offset i64; 5 offset_index_length i32; 6 column_index_offset i64; 7 column_index_length i32; 8 crypto_metadata ColumnCryptoMetaData; 9 encrypted_column_metadata binary
RowGroup: 1 columns list<ColumnChunk>; 2 total_byte_size i64; 3 num_rows i64; 4 sorting_columns list<SortingColumn>; 5 file_offset i64; 6 total_compressed_size i64; 7 ordinal i16
TypeDefinedOrder:
IEEE754TotalOrder:
Int96TimestampOrder:
ColumnOrder: 1 TYPE_ORDER TypeDefinedOrder; 2 IEEE_754_TOTAL_ORDER IEEE754TotalOrder; 3 INT96_TIMESTAMP_ORDER Int96TimestampOrder
PageLocation: 1 offset i64; 2 compressed_page_size i32; 3 first_row_index i64
OffsetIndex: 1 page_locations list<PageLocation>; 2 unencoded_byte_array_data_bytes list<i64>
ColumnIndex: 1 null_pages list<bool>; 2 min_values list<binary>; 3 max_values list<binary>; 4 boundary_order i32; 5 null_counts list<i64>; 6 repetition_level_histograms list<i64>; 7 definition_level_histograms list<i64>; 8 nan_counts list<i64>
AesGcmV1: 1 aad_prefix binary; 2 aad_file_unique binary; 3 supply_aad_prefix bool
AesGcmCtrV1: 1 aad_prefix binary; 2 aad_file_unique binary; 3 supply_aad_prefix bool
EncryptionAlgorithm: 1 AES_GCM_V1 AesGcmV1; 2 AES_GCM_CTR_V1 AesGcmCtrV1
FileMetaData: 1 version i32; 2 schema list<SchemaElement>; 3 num_rows i64; 4 row_groups list<RowGroup>; 5 key_value_metadata list<KeyValue>; 6 created_by string; 7 column_orders list<ColumnOrder>; 8 encryption_algorithm EncryptionAlgorithm; 9 footer_signing_key_metadata binary
FileCryptoMetaData: 1 encryption_algorithm EncryptionAlgorithm; 2 key_metadata binary
"""

SCALARS = {"i8": ("I8", "int"), "i16": ("I16", "int"), "i32": ("I32", "int"), "i64": ("I64", "int"),
           "bool": ("BOOL", "bool"), "double": ("DOUBLE", "float"), "binary": ("BINARY", "bytes"),
           "string": ("STRING", "str")}


def tdesc(t: str) -> tuple[str, str]:
    if t.startswith("list<"):
        inner, py = tdesc(t[5:-1])
        return f"ListOf({inner})", f"list[{py}]"
    if t in SCALARS:
        return SCALARS[t]
    return t, t


def main() -> None:
    out = [
        '"""The Parquet Thrift structs (parquet.thrift), as typed classes. Generated by',
        "tools/gen_structs.py; names follow the IDL so the spec reads straight across.",
        '"""',
        "",
        "# ruff: noqa: N815",
        "from __future__ import annotations",
        "",
        "from dataclasses import dataclass",
        "from typing import Any, ClassVar",
        "",
        "from pqindex.format.thrift import BINARY, BOOL, DOUBLE, I8, I16, I32, I64, STRING, ListOf, ThriftStruct",
        "",
        "__all__ = [",
    ]
    names = []
    body = []
    for line in SPEC.strip().splitlines():
        name, _, rest = line.partition(":")
        names.append(name)
        fields = [f.split() for f in rest.split(";") if f.strip()]
        body += ["", "", "@dataclass(slots=True, eq=True)", f"class {name}(ThriftStruct):"]
        if not fields:
            body.append(f'    """``{name}`` (no fields)."""')
        else:
            body.append(f'    """``{name}``."""')
        body.append("")
        table = []
        for fid, fname, t in fields:
            desc, py = tdesc(t)
            body.append(f"    {fname}: {py} | None = None")
            table.append(f"        ({fid}, {fname!r}, {desc}),")
        body.append("")
        body.append("    THRIFT: ClassVar[tuple[tuple[int, str, Any], ...]] = (")
        body += table
        body.append("    )")
    out += [f"    {n!r}," for n in sorted(names)] + ["]"]
    out += body
    out.append("")
    print("\n".join(out))


main()
