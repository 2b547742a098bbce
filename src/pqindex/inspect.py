"""What ``pqindex inspect`` reports: a plain, JSON-ready description of a file.

The structure is documented in docs/inspect-json.md and versioned by
``schema_version``; fields are only ever added.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import uuid
from typing import Any

from pqindex.errors import PqIndexError, public_api
from pqindex.format.file import ParquetFile
from pqindex.format.layout import chunk_range
from pqindex.format.schema import (
    BoundaryOrder,
    Codec,
    ConvertedType,
    Encoding,
    LeafColumn,
    PageType,
    PhysicalType,
    Repetition,
    enum_name,
)
from pqindex.format.structs import ColumnOrder, LogicalType
from pqindex.format.value_type import ValueType
from pqindex.format.values import Bounds, page_bounds, statistics_bounds, validate_column_index

__all__ = ["SCHEMA_VERSION", "inspect_file", "json_value"]

SCHEMA_VERSION = 1


def json_value(value: Any) -> Any:
    """A decoded bound as JSON: numbers and strings stay, the rest become strings."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if isinstance(value, (dt.date, dt.time, dt.datetime)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    return str(value)


def _logical_name(lt: LogicalType | None) -> str | None:
    if lt is None:
        return None
    for _, name, _ in LogicalType.THRIFT:
        sub = getattr(lt, name)
        if sub is None:
            continue
        if name == "DECIMAL":
            return f"DECIMAL({sub.precision},{sub.scale})"
        if name in ("TIMESTAMP", "TIME"):
            unit = (
                next(
                    (u for _, u, _ in type(sub.unit).THRIFT if getattr(sub.unit, u) is not None),
                    "?",
                )
                if sub.unit
                else "?"
            )
            return f"{name}({unit.lower()}, utc={'true' if sub.isAdjustedToUTC else 'false'})"
        if name == "INTEGER":
            return f"INT({sub.bitWidth}, {'signed' if sub.isSigned else 'unsigned'})"
        return name
    return "UNKNOWN_LOGICAL_TYPE"


def _order_name(co: ColumnOrder | None) -> str | None:
    if co is None:
        return None
    for _, name, _ in ColumnOrder.THRIFT:
        if getattr(co, name) is not None:
            return name
    return "UNKNOWN_ORDER"


def _column(leaf: LeafColumn) -> dict[str, Any]:
    el = leaf.element
    return {
        "index": leaf.index,
        "path": leaf.name,
        "physical_type": enum_name(PhysicalType, el.type),
        "type_length": el.type_length,
        "logical_type": _logical_name(el.logicalType),
        "converted_type": enum_name(ConvertedType, el.converted_type),
        "value_type": ValueType.from_leaf(leaf).name,
        "repetition": enum_name(Repetition, el.repetition_type),
        "precision": el.precision,
        "scale": el.scale,
        "field_id": el.field_id,
        "max_definition_level": leaf.max_definition_level,
        "max_repetition_level": leaf.max_repetition_level,
        "column_order": _order_name(leaf.column_order),
    }


def _bounds(b: Bounds, vt: ValueType) -> dict[str, Any]:
    return {
        "min": json_value(b.min),
        "max": json_value(b.max),
        "min_display": vt.display(b.min) if b.min is not None else None,
        "max_display": vt.display(b.max) if b.max is not None else None,
        "usable": b.usable,
        "unusable_reason": b.reason,
        "null_count": b.null_count,
        "nan_count": b.nan_count,
        "min_exact": b.min_exact,
        "max_exact": b.max_exact,
        "source": b.source,
    }


def _region(offset: int | None, length: int | None) -> dict[str, Any] | None:
    if offset is None:
        return None
    return {"offset": offset, "length": length}


def _pages(pf: ParquetFile, rg: int, col: int, vt: ValueType) -> dict[str, Any] | None:
    oi = pf.offset_index(rg, col)
    if oi is None:
        return None
    ci = pf.column_index(rg, col)
    locs = oi.page_locations or []
    rows = pf.page_rows(rg, col) or []
    leaf = pf.leaf(col)
    reason = validate_column_index(ci, len(locs), leaf) if ci is not None else "no column index"
    pages = []
    for i, loc in enumerate(locs):
        page: dict[str, Any] = {
            "page": i,
            "first_row": loc.first_row_index,
            "rows": rows[i] if i < len(rows) else None,
            "offset": loc.offset,
            "compressed_size": loc.compressed_page_size,
            "null_page": None,
            "null_count": None,
            "nan_count": None,
            "min": None,
            "max": None,
            "min_display": None,
            "max_display": None,
        }
        if ci is not None and reason is None:
            b = page_bounds(ci, leaf, i)
            page.update(
                null_page=b.all_null,
                null_count=b.null_count,
                nan_count=b.nan_count,
                min=json_value(b.min),
                max=json_value(b.max),
                min_display=vt.display(b.min) if b.min is not None else None,
                max_display=vt.display(b.max) if b.max is not None else None,
            )
        elif ci is not None:
            np_ = ci.null_pages or []
            nc = ci.null_counts or []
            page.update(
                null_page=np_[i] if i < len(np_) else None,
                null_count=nc[i] if i < len(nc) else None,
            )
        pages.append(page)
    return {
        "boundary_order": enum_name(BoundaryOrder, ci.boundary_order) if ci is not None else None,
        "column_index_usable": reason is None,
        "unusable_reason": reason,
        "pages": pages,
    }


def _embedded_indexes(
    pf: ParquetFile, column: str | None, row_group: int | None
) -> dict[str, Any] | None:
    """The embedded index region: where it is, its blobs, HLL estimates, damage found."""
    from pqindex.indexes.hll import estimate
    from pqindex.indexes.region import REGION_KEY, read_region

    kv = pf.key_value_metadata
    if REGION_KEY not in kv:
        return None
    region, warnings = read_region(pf)
    out: dict[str, Any] = {
        "locator": kv[REGION_KEY],
        "offset": None,
        "length": None,
        "version": None,
        "blobs": [],
        "kinds": {},
        "distinct_estimates": {},
        "warnings": warnings,
        # What ``blobs`` was narrowed to: a reader can tell "none on this column".
        "column": column,
        "row_group": row_group,
    }
    if region is None:
        return out
    parsed = len(region.warnings)  # already in ``warnings``, with the path
    summary = region.summary()
    out.update(
        offset=summary["offset"],
        length=summary["bytes"],
        version=summary["version"],
        kinds=summary["kinds"],
    )
    for e in region.blobs:
        if column is not None and e.column != column:
            continue
        if row_group is not None and e.row_group not in (None, row_group):
            continue
        entry = e.to_dict()
        entry["bytes"] = e.length
        out["blobs"].append(entry)
        if e.kind == "hll" and e.row_group is None:
            try:
                out["distinct_estimates"][e.column] = round(estimate(region.blob(e)))
            except PqIndexError as err:
                region.warnings.append(
                    f"embedded index: hll blob for {e.column!r} unusable: {err.reason}"
                )
    out["warnings"] = warnings + region.warnings[parsed:]
    return out


@public_api
def inspect_file(
    pf: ParquetFile,
    *,
    row_group: int | None = None,
    column: str | None = None,
    pages: bool = False,
) -> dict[str, Any]:
    """The report for one file; ``row_group``/``column`` narrow it, ``pages`` adds page tables."""
    from pqindex.format.file import leaf_indices

    md = pf.metadata
    cols = leaf_indices(pf, [column] if column is not None else None)
    rgs = range(pf.num_row_groups) if row_group is None else [row_group]
    if row_group is not None:
        pf.row_group_rows(row_group)  # raises for a row group that doesn't exist
    warnings = []
    if pf.row_count_mismatch is not None:
        declared, counted = pf.row_count_mismatch
        warnings.append(f"footer says {declared} rows, its row groups hold {counted}")
    vts = {c: ValueType.from_leaf(pf.leaf(c)) for c in cols}
    groups = []
    for rg in rgs:
        g = (md.row_groups or [])[rg]
        chunks = []
        if pages:
            pf.prefetch_page_index([rg], cols)
        for c in cols:
            cc = pf.column_chunk(rg, c)
            cmd = pf.column_meta(rg, c)
            leaf = pf.leaf(c)
            start, _length = chunk_range(cmd)
            dic = pf.dictionary_page(rg, c)
            stats = statistics_bounds(cmd.statistics, leaf, cmd.num_values)
            chunk: dict[str, Any] = {
                "column": c,
                "path": leaf.name,
                "codec": enum_name(Codec, cmd.codec),
                "encodings": [enum_name(Encoding, e) for e in cmd.encodings or []],
                "encoding_stats": [
                    {
                        "page_type": enum_name(PageType, s.page_type),
                        "encoding": enum_name(Encoding, s.encoding),
                        "count": s.count,
                    }
                    for s in cmd.encoding_stats or []
                ]
                if cmd.encoding_stats is not None
                else None,
                "num_values": cmd.num_values,
                "offset": start,
                "compressed_size": cmd.total_compressed_size,
                "uncompressed_size": cmd.total_uncompressed_size,
                "data_page_offset": cmd.data_page_offset,
                "statistics": _bounds(stats, vts[c]) if cmd.statistics is not None else None,
                "dictionary_page": {
                    "offset": dic.offset,
                    "length": dic.total_length,
                    "num_values": dic.header.dictionary_page_header.num_values
                    if dic.header.dictionary_page_header
                    else None,
                }
                if dic is not None
                else None,
                "bloom_filter": _region(cmd.bloom_filter_offset, cmd.bloom_filter_length),
                "column_index": _region(cc.column_index_offset, cc.column_index_length),
                "offset_index": _region(cc.offset_index_offset, cc.offset_index_length),
            }
            if pages:
                chunk["pages"] = _pages(pf, rg, c, vts[c])
            chunks.append(chunk)
        groups.append(
            {
                "index": rg,
                "num_rows": g.num_rows,
                "total_byte_size": g.total_byte_size,
                "total_compressed_size": g.total_compressed_size,
                "file_offset": g.file_offset,
                "sorting_columns": [
                    {
                        "column": s.column_idx,
                        "path": pf.leaf(s.column_idx).name
                        if s.column_idx is not None and 0 <= s.column_idx < len(pf.schema.leaves)
                        else None,
                        "descending": s.descending,
                        "nulls_first": s.nulls_first,
                    }
                    for s in g.sorting_columns or []
                ],
                "columns": chunks,
            }
        )
    return {
        "schema_version": SCHEMA_VERSION,
        "file": pf.path,
        "file_size": pf.file_size,
        "footer_length": pf.footer_length,
        "created_by": md.created_by,
        "format_version": md.version,
        "num_rows": md.num_rows,
        "num_row_groups": pf.num_row_groups,
        "num_columns": len(pf.schema.leaves),
        "columns": [_column(pf.leaf(c)) for c in cols],
        "key_value_metadata": [kv.key for kv in md.key_value_metadata or []],
        "row_groups": groups,
        "warnings": warnings,
        "embedded_indexes": _embedded_indexes(pf, column, row_group),
        "io": {"requests": pf.source.stats.requests, "bytes_read": pf.source.stats.bytes_read},
    }


@public_api
def check_embedded(pf: ParquetFile) -> None:
    """Raise a CorruptFileError for a damaged embedded index region: its footer key,
    directory, any blob's checksum, or a blob its kind cannot decode."""
    from pqindex.errors import CorruptFileError
    from pqindex.indexes.base import REGISTRY
    from pqindex.indexes.hll import estimate
    from pqindex.indexes.region import read_region

    region, warnings = read_region(pf)
    if warnings:
        raise CorruptFileError(f"embedded index region: {warnings[0]}", path=pf.path)
    if region is None:
        return
    blobs = region.blobs  # validates every entry, checks the blobs at hand
    if region.warnings:
        raise CorruptFileError(region.warnings[0], path=pf.path)
    leaves = {leaf.name: leaf for leaf in pf.schema.leaves}
    for entry in blobs:
        blob = region.blob(entry)  # RegionError (a CorruptFileError) on a bad checksum
        factory = REGISTRY.get(entry.kind)
        leaf = leaves.get(entry.column)
        if factory is None or leaf is None:
            continue  # a newer writer's kind, or a column this file lacks: not ours to judge
        try:
            factory().evidence(leaf, blob)
            if entry.kind == "hll":
                estimate(blob)
        except PqIndexError as e:
            raise CorruptFileError(f"embedded {entry.kind} index: {e.reason}", path=pf.path,
                                   row_group=entry.row_group, column=entry.column) from e
        except Exception as e:
            raise CorruptFileError(f"embedded {entry.kind} index does not decode: {e}",
                                   path=pf.path, row_group=entry.row_group,
                                   column=entry.column) from e
