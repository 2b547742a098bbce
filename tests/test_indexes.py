"""Embedded indexes: the region container, its damage handling, and each kind's evidence.

Evidence is checked against brute force on random data: NONE must never hide a
matching row, ALL must only be said when every row of the unit matches.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import random
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

from pqindex.errors import PqIndexError
from pqindex.expr import BoundAnd, BoundOr, BoundPredicate, bind, parse_where, to_arrow_mask
from pqindex.format.file import ParquetFile
from pqindex.format.match import Match
from pqindex.format.structs import KeyValue
from pqindex.format.thrift import encode
from pqindex.indexes import (
    REGION_KEY,
    REGISTRY,
    Blob,
    Region,
    RegionError,
    RegionVersionError,
    Scope,
    encode_region,
    read_region,
    region_key_value,
)
from pqindex.indexes.bloom_file import read_bloom
from pqindex.indexes.hashing import xxh64_fixed
from pqindex.indexes.hll import HyperLogLog, estimate
from pqindex.indexes.leaf_values import exact_int_sum, limb_sum, unscaled_limbs
from pqindex.indexes.region import HEADER_SIZE, TRAILER_SIZE
from pqindex.indexes.zone_maps import aggregates
from pqindex.io.source import IOStats

ROWS = 3_000
RG_ROWS = 1_000
PAGE_ROWS = 173  # pages that do not line up with row groups' round numbers

# ---------------------------------------------------------------- fixtures


def _table(seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = ROWS
    nulls = rng.random(n) < 0.08
    ints = rng.integers(-50, 50, n)
    ints[: n // 3] = rng.integers(0, 5, n // 3)  # a low-cardinality stretch
    floats = rng.normal(0, 10, n).round(1)
    floats[rng.random(n) < 0.05] = np.nan
    floats[rng.random(n) < 0.05] = -0.0
    floats[1500:1600] = np.nan  # a stretch of NaN only
    cats = np.array(["apple", "apricot", "banana", "berry", "cherry", "date", "elder"])
    strs = cats[rng.integers(0, len(cats), n)]
    strs[2000:2300] = "banana"  # a constant stretch
    big = rng.integers(0, 10**6, n)  # high cardinality: distinct sets go over the cap
    days = rng.integers(0, 60, n)
    return pa.table({
        "i64": pa.array(ints, pa.int64(), mask=nulls),
        "i32": pa.array(rng.integers(0, 3, n), pa.int32()),
        "u8": pa.array(rng.integers(0, 256, n), pa.uint8()),
        "f64": pa.array(floats, pa.float64(), mask=rng.random(n) < 0.05),
        "f32": pa.array(floats.astype(np.float32), pa.float32()),
        "s": pa.array(strs.tolist(), pa.string(), mask=rng.random(n) < 0.03),
        "big": pa.array(big, pa.int64()),
        "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=int(x)) for x in days],
                      pa.date32()),
        "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(hours=int(x))
                        for x in days], pa.timestamp("us", tz="UTC")),
        "dec": pa.array([Decimal(int(x)).scaleb(-2) for x in ints], pa.decimal128(9, 2),
                        mask=nulls),
        "dec_big": pa.array([Decimal(int(x) * 10**15).scaleb(-3) for x in ints],
                            pa.decimal128(30, 3)),
    })


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[pa.Table, Path]:
    table = _table()
    path = tmp_path_factory.mktemp("indexes") / "t.parquet"
    pq.write_table(table, path, row_group_size=RG_ROWS, write_page_index=True,
                   max_rows_per_page=PAGE_ROWS, data_page_size=1 << 20)
    return table, path


def _bounds(pf: ParquetFile, col: int) -> tuple[list[tuple[int, int]], list[list[tuple[int, int]]]]:
    rgs, pages = [], []
    start = 0
    for rg in range(pf.num_row_groups):
        rows = pf.row_group_rows(rg)
        rgs.append((start, start + rows))
        page_rows = pf.page_rows(rg, col)
        assert page_rows is not None
        spans, p = [], start
        for r in page_rows:
            spans.append((p, p + r))
            p += r
        pages.append(spans)
        start += rows
    return rgs, pages


def _build(written: tuple[pa.Table, Path], kind: str, options: dict[str, Any] | None = None,
           columns: list[str] | None = None) -> tuple[ParquetFile, list[Blob]]:
    table, path = written
    pf = ParquetFile.open(path)
    blobs: list[Blob] = []
    for leaf in pf.schema.leaves:
        if columns is not None and leaf.name not in columns:
            continue
        rgs, pages = _bounds(pf, leaf.index)
        blobs += REGISTRY[kind]().build(leaf, table[leaf.name], rgs, pages, options or {})
    return pf, blobs


# ---------------------------------------------------------------- predicates


def _sql(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.replace(tzinfo=None).isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _predicates(table: pa.Table, name: str, rng: random.Random) -> list[str]:
    values = [v for v in table[name].to_pylist() if v is not None
              and not (isinstance(v, float) and v != v)]
    picks = [rng.choice(values) for _ in range(6)]
    if isinstance(picks[0], str):
        picks += ["aaa", "zzz", "banana"]
    elif isinstance(picks[0], (int, float, Decimal)) and not isinstance(picks[0], bool):
        lo, hi = min(values), max(values)
        picks += [lo, hi, type(lo)(-10**7), type(lo)(10**7), type(lo)(0)]
    out = [f"{name} IS NULL", f"{name} IS NOT NULL"]
    for v in picks:
        lit = _sql(v)
        out += [f"{name} {op} {lit}" for op in ("=", "!=", "<", "<=", ">", ">=")]
    for a, b in itertools.pairwise(picks):
        out += [f"{name} IN ({_sql(a)}, {_sql(b)})", f"{name} NOT IN ({_sql(a)}, {_sql(b)})"]
    out.append(f"{name} IN ({', '.join(_sql(v) for v in sorted(set(values))[:3])})")
    if isinstance(picks[0], str):
        for p in ("ap", "b", "cherry", "x", "banana"):
            out += [f"{name} LIKE '{p}%'", f"{name} NOT LIKE '{p}%'"]
    if isinstance(picks[0], float):
        out += [f"isnan({name})", f"NOT isnan({name})"]
    return out


def _leaves(expr: Any) -> list[BoundPredicate]:
    if isinstance(expr, BoundPredicate):
        return [expr]
    if isinstance(expr, (BoundAnd, BoundOr)):
        return _leaves(expr.left) + _leaves(expr.right)
    return []


def _check_against_rows(table: pa.Table, pf: ParquetFile, region: Region, kind: str) -> dict[
        Match, int]:
    """Every (unit, predicate leaf) answer checked against the unit's rows."""
    rng = random.Random(11)
    seen = {Match.NONE: 0, Match.SOME: 0, Match.ALL: 0}
    units: dict[tuple[Any, ...], tuple[int, int]] = {}
    for leaf in pf.schema.leaves:
        rgs, pages = _bounds(pf, leaf.index)
        units[(leaf.name, Scope.FILE, None, None)] = (0, table.num_rows)
        for rg, span in enumerate(rgs):
            units[(leaf.name, Scope.ROW_GROUP, rg, None)] = span
            for p, pspan in enumerate(pages[rg]):
                units[(leaf.name, Scope.PAGE, rg, p)] = pspan
    for name in {e.column for e in region.blobs if e.kind == kind}:
        preds = [leaf for sql in _predicates(table, name, rng)
                 for leaf in _leaves(bind(parse_where(sql), pf.schema))]
        for e in region.blobs:
            if e.column != name or e.kind != kind:
                continue
            start, end = units[(name, e.scope, e.row_group, e.page)]
            rows = table.slice(start, end - start)
            evidence = region.evidence(e.scope, name, e.row_group, e.page)
            assert len(evidence) == 1, e
            for pred in preds:
                got = evidence[0].match(pred)
                matching = to_arrow_mask(pred, rows).true_count if rows.num_rows else 0
                where = f"{kind} {e.scope.value} rg={e.row_group} page={e.page}: {pred}"
                if got == Match.NONE:
                    assert matching == 0, f"{where}: NONE but {matching} rows match"
                if got == Match.ALL:
                    assert matching == rows.num_rows, (
                        f"{where}: ALL but only {matching} of {rows.num_rows} rows match")
                seen[got] += 1
    assert not region.warnings
    return seen


def _region(blobs: list[Blob], pf: ParquetFile | None = None) -> Region:
    data = encode_region(blobs)
    region = Region.parse(data, file_size=len(data) + 100, region_offset=4,
                          schema=pf.schema if pf else None)
    assert not region.warnings and not region.ignored
    return region


# ---------------------------------------------------------------- kinds vs brute force


def test_distinct_evidence_never_drops_a_matching_row(written: tuple[pa.Table, Path]) -> None:
    pf, blobs = _build(written, "distinct", {"max_values": 64})
    region = _region(blobs, pf)
    seen = _check_against_rows(written[0], pf, region, "distinct")
    assert seen[Match.NONE] > 100 and seen[Match.ALL] > 100  # the index does prune
    big = [e for e in region.blobs if e.column == "big" and e.scope == Scope.FILE]
    assert big and big[0].properties.get("omitted") is True  # over the cap: counts only


def test_zone_map_evidence_never_drops_a_matching_row(written: tuple[pa.Table, Path]) -> None:
    pf, blobs = _build(written, "zone_maps", {"scopes": ["file", "row_group", "page"]})
    assert {b.column for b in blobs} == {"i64", "i32", "u8", "f64", "f32", "big", "d", "ts",
                                         "dec", "dec_big"}  # strings have no zone map
    region = _region(blobs, pf)
    seen = _check_against_rows(written[0], pf, region, "zone_maps")
    assert seen[Match.NONE] > 100 and seen[Match.ALL] > 100


def test_bloom_evidence_never_drops_a_matching_row(written: tuple[pa.Table, Path]) -> None:
    pf, blobs = _build(written, "bloom", {"scopes": ["file", "row_group"]})
    region = _region(blobs, pf)
    seen = _check_against_rows(written[0], pf, region, "bloom")
    assert seen[Match.NONE] > 10 and seen[Match.ALL] == 0


def test_bloom_matches_parquet_hashing(written: tuple[pa.Table, Path]) -> None:
    """The file filter holds exactly the PLAIN-bytes hashes a Parquet Bloom filter would."""
    table, _ = written
    _pf, blobs = _build(written, "bloom", columns=["s", "i64"])
    for blob in blobs:
        _, bloom = read_bloom(blob)
        for v in table[blob.column].drop_null().to_pylist()[:200]:
            raw = v.encode() if isinstance(v, str) else struct.pack("<q", v)
            assert bloom.might_contain(raw)


def test_zone_map_aggregates_are_exact(written: tuple[pa.Table, Path]) -> None:
    table, _ = written
    _pf, blobs = _build(written, "zone_maps", {"scopes": ["file"]})
    by_col = {b.column: aggregates(b) for b in blobs}
    i64 = table["i64"].drop_null().to_pylist()
    assert by_col["i64"] == {"count": ROWS, "null_count": table["i64"].null_count,
                             "nan_count": 0, "min": min(i64), "max": max(i64), "sum": sum(i64)}
    dec = by_col["dec_big"]
    assert dec["sum"] == sum(table["dec_big"].to_pylist())
    assert isinstance(dec["sum"], Decimal)
    assert by_col["u8"]["sum"] == sum(table["u8"].to_pylist())
    assert by_col["f64"]["sum"] != by_col["f64"]["sum"]  # a NaN makes SUM NaN
    assert by_col["d"]["sum"] is None and by_col["d"]["min"] == min(table["d"].to_pylist())


def test_zone_map_integer_sums_do_not_overflow() -> None:
    big = np.array([2**63 - 1] * 5 + [-(2**63)] * 2, dtype=np.int64)
    assert exact_int_sum(big) == 5 * (2**63 - 1) - 2 * 2**63
    ubig = np.array([2**64 - 1] * 3, dtype=np.uint64)
    assert exact_int_sum(ubig) == 3 * (2**64 - 1)
    arr = pa.array([Decimal("-1"), Decimal(10**37), Decimal(-(10**37))], pa.decimal128(38, 0))
    assert limb_sum(unscaled_limbs(arr)) == -1


# ---------------------------------------------------------------- HLL


@pytest.mark.parametrize("n", [100_000, 1_000_000])
def test_hll_estimate_within_three_percent(n: int) -> None:
    sketch = HyperLogLog(14)
    rng = np.random.default_rng(n)
    values = rng.permutation(np.arange(n, dtype=np.int64) * 7919 + 13)
    sketch.add_hashes(xxh64_fixed(values))
    sketch.add_hashes(xxh64_fixed(values[: n // 2]))  # duplicates change nothing
    assert abs(sketch.estimate() / n - 1) < 0.03


def test_hll_small_sets_and_round_trip(written: tuple[pa.Table, Path]) -> None:
    table, _ = written
    pf, blobs = _build(written, "hll", columns=["i32", "s", "big"])
    est = {b.column: estimate(b) for b in blobs}
    assert round(est["i32"]) == 3
    assert round(est["s"]) == len(set(table["s"].drop_null().to_pylist()))
    exact_big = len(set(table["big"].to_pylist()))
    assert abs(est["big"] / exact_big - 1) < 0.03
    assert len(blobs[0].data) < 1000  # a small sketch is stored sparse
    region = _region(blobs, pf)
    assert region.evidence(Scope.FILE, "s") == []  # a sketch is no evidence
    assert HyperLogLog(12).estimate() == 0.0


def test_xxh64_fixed_matches_xxhash() -> None:
    rng = np.random.default_rng(3)
    for dtype in ("<i8", "<u4", "<f4", "<f2"):
        values = rng.integers(0, 2**16, 300).astype(dtype)
        hashes = xxh64_fixed(values)
        for v, h in zip(values, hashes, strict=True):
            assert int(h) == xxhash.xxh64_intdigest(v.tobytes(), 0)


# ---------------------------------------------------------------- the region container


def _sample_blobs() -> list[Blob]:
    return [
        Blob("zone_maps", "a", Scope.ROW_GROUP, 0, None, b"\x01" * 40, {"note": "x"}),
        Blob("zone_maps", "a", Scope.PAGE, 0, 3, b"\x02" * 17),
        Blob("future_kind", "b", Scope.FILE, None, None, b"whatever", {"k": [1, 2]}),
        Blob("distinct", "c.d", Scope.FILE, None, None, b""),
    ]


def test_region_round_trip() -> None:
    blobs = _sample_blobs()
    data = encode_region(blobs)
    assert data[:4] == b"PQIX"
    region = Region.parse(data, file_size=10_000, region_offset=100)
    assert not region.warnings and region.version == (3, 0)
    assert data[-4:] == b"PQIX" and region.blobs[0].offset == HEADER_SIZE
    assert [(e.kind, e.column, e.scope, e.row_group, e.page) for e in region.blobs] == [
        (b.kind, b.column, b.scope, b.row_group, b.page) for b in blobs]
    for entry, blob in zip(region.blobs, blobs, strict=True):
        got = region.blob(entry)
        assert got.data == blob.data and dict(got.properties) == dict(blob.properties)
    assert [e.known for e in region.blobs] == [True, True, False, True]
    summary = region.summary()
    assert summary["kinds"]["zone_maps"]["bytes"] == 57
    assert summary["kinds"]["future_kind"]["known"] is False
    json.dumps(summary)


def test_unknown_kind_is_listed_but_skipped(written: tuple[pa.Table, Path]) -> None:
    pf, blobs = _build(written, "distinct", {"scopes": ["file"]}, columns=["s"])
    blobs.append(Blob("future_kind", "s", Scope.FILE, None, None, b"\x00\x01"))
    region = _region(blobs, pf)
    assert [e.kind for e in region.blobs] == ["distinct", "future_kind"]
    assert len(region.evidence(Scope.FILE, "s")) == 1
    assert not region.warnings


def test_blob_of_the_wrong_type_is_skipped_with_a_warning(
        written: tuple[pa.Table, Path]) -> None:
    pf, blobs = _build(written, "zone_maps", {"scopes": ["file"]}, columns=["i64"])
    moved = [Blob(b.kind, "f64", b.scope, b.row_group, b.page, b.data) for b in blobs]
    region = _region(moved, pf)
    assert region.evidence(Scope.FILE, "f64") == []
    assert "INT64" in region.warnings[0] and "DOUBLE" in region.warnings[0]


def test_encode_rejects_inconsistent_scopes() -> None:
    with pytest.raises(PqIndexError):
        encode_region([Blob("distinct", "a", Scope.FILE, 0, None, b"")])
    with pytest.raises(PqIndexError):
        encode_region([Blob("distinct", "a", Scope.PAGE, 0, None, b"")])


def _with_directory(directory: Any, blob_bytes: bytes = b"", major: int = 2) -> bytes:
    """A version-2 region: header, blob bytes, directory, trailer."""
    d = json.dumps(directory).encode()
    return (struct.pack("<4sHH", b"PQIX", major, 0) + blob_bytes + d
            + struct.pack("<IQHH4s", len(d), xxhash.xxh64_intdigest(d, 0), major, 0,
                          b"PQIX"))


def test_flipped_blob_byte_drops_that_blob_only() -> None:
    blobs = _sample_blobs()
    data = bytearray(encode_region(blobs))
    region = Region.parse(bytes(data), file_size=len(data) + 4, region_offset=4)
    target = region.blobs[1]
    data[target.offset + 5] ^= 0x40
    damaged = Region.parse(bytes(data), file_size=len(data) + 4, region_offset=4)
    assert len(damaged.blobs) == 3 and target not in damaged.blobs
    assert len(damaged.warnings) == 1 and "checksum" in damaged.warnings[0]
    with pytest.raises(RegionError):
        Region.parse(bytes(data), file_size=len(data) + 4, region_offset=4, strict=True)


def test_flipped_directory_byte_ignores_the_region() -> None:
    data = bytearray(encode_region(_sample_blobs()))
    data[-TRAILER_SIZE - 10] ^= 0x01  # the directory ends just before the trailer
    region = Region.parse(bytes(data), file_size=len(data) + 4, region_offset=4)
    assert region.ignored and region.blobs == ()
    assert "directory checksum" in region.warnings[0]


def test_offsets_beyond_the_region_or_file() -> None:
    d = {"blobs": [
        {"kind": "distinct", "column": "a", "scope": "file", "offset": 10_000, "length": 4,
         "xxh64": "0" * 16},
        {"kind": "distinct", "column": "a", "scope": "file", "offset": 0, "length": 4,
         "xxh64": "0" * 16},  # inside the header
        {"kind": "distinct", "column": "a", "scope": "file", "offset": -1, "length": 4,
         "xxh64": "0" * 16},
        {"kind": "distinct", "column": "a", "scope": "page", "row_group": 0, "offset": 0,
         "length": 0, "xxh64": "0" * 16},  # page without a page number
    ]}
    data = _with_directory(d, b"abcd")
    region = Region.parse(data, file_size=len(data) + 4, region_offset=4)
    assert region.blobs == () and len(region.warnings) == 4
    whole = Region.parse(data, file_size=len(data), region_offset=4)  # runs past the file
    assert whole.ignored and "outside the file" in whole.warnings[0]


def test_unknown_major_version_is_refused() -> None:
    data = _with_directory({"blobs": []}, major=4)
    region = Region.parse(data, file_size=len(data) + 4, region_offset=4)
    assert region.ignored and "version 4" in region.warnings[0]
    # the trailer alone says so too (the header is not at hand)
    tail = Region.parse(data[HEADER_SIZE:], file_size=len(data) + 4, region_offset=4,
                        length=len(data))
    assert tail.ignored and "version 4" in tail.warnings[0]
    with pytest.raises(RegionVersionError):
        Region.parse(data, file_size=len(data) + 4, region_offset=4, strict=True)


def test_truncated_region_never_raises() -> None:
    data = encode_region(_sample_blobs())
    for cut in range(len(data)):
        region = Region.parse(data[:cut], file_size=len(data) + 4, region_offset=4)
        if cut < len(data):
            assert region.warnings, cut


def test_mutation_fuzz_raises_nothing_but_documented_errors(
        written: tuple[pa.Table, Path]) -> None:
    """~1,000 damaged regions: parse, decode every blob, summarize; nothing escapes."""
    pf, blobs = _build(written, "distinct", {"scopes": ["file", "row_group"]},
                       columns=["s", "i64", "f64"])
    for kind, opts in (("zone_maps", {}), ("bloom", {"max_bytes": 256}), ("hll",
                                                                          {"precision": 4})):
        blobs += _build(written, kind, {**opts, "scopes": ["file", "row_group"]},
                        columns=["i64", "f64", "dec"])[1]
    good = encode_region(blobs)
    rng = random.Random(1234)
    pred = bind(parse_where("i64 = 3"), pf.schema)
    for i in range(1_000):
        data = bytearray(good)
        how = i % 4
        if how == 0:
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif how == 1:
            del data[rng.randrange(len(data)):]
        elif how == 2:
            pos = rng.randrange(len(data))
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:  # damage inside a blob body, with a matching checksum: a buggy writer
            data = bytearray(_rewrite_blob(good, rng))
        for strict in (False, True):
            try:
                region = Region.parse(bytes(data), file_size=len(data) + 4, region_offset=4,
                                      schema=pf.schema, strict=strict)
                for e in region.blobs:
                    for ev in region.evidence(e.scope, e.column, e.row_group, e.page):
                        if e.column == "i64":
                            assert isinstance(pred, BoundPredicate)
                            ev.match(pred)
                json.dumps(region.summary())
            except PqIndexError:
                assert strict


def _rewrite_blob(good: bytes, rng: random.Random) -> bytes:
    region = Region.parse(good, file_size=len(good) + 4, region_offset=4)
    blobs = [region.blob(e) for e in region.blobs]
    k = rng.randrange(len(blobs))
    data = bytearray(blobs[k].data)
    if data:
        if rng.random() < 0.5:
            data[rng.randrange(len(data))] = rng.randrange(256)
        else:
            del data[rng.randrange(len(data)):]
    b = blobs[k]
    blobs[k] = Blob(b.kind, b.column, b.scope, b.row_group, b.page, bytes(data), b.properties)
    return encode_region(blobs)


# ---------------------------------------------------------------- in a file


def _splice(path: Path, region: bytes, value: str | None = None) -> Path:
    """The file with ``region`` before its footer and the footer key set (as the writer does)."""
    pf = ParquetFile.open(path)
    raw = path.read_bytes()
    body = raw[: pf.footer_offset]
    md = pf.metadata
    kv = [k for k in (md.key_value_metadata or []) if k.key != REGION_KEY]
    kv.append(KeyValue(key=REGION_KEY,
                       value=value or region_key_value(len(body), len(region))))
    md.key_value_metadata = kv
    footer = encode(md)
    out = path.with_name(path.stem + "-indexed.parquet")
    out.write_bytes(body + region + footer + struct.pack("<I", len(footer)) + b"PAR1")
    pf.close()
    return out


def test_read_region_from_a_spliced_file(written: tuple[pa.Table, Path]) -> None:
    table, path = written
    _pf, blobs = _build(written, "distinct", {"scopes": ["file"]}, columns=["s"])
    out = _splice(path, encode_region(blobs))
    floats = ["f64", "f32"]  # NaN != NaN: compare those by bits
    back = pq.read_table(out)
    assert back.drop_columns(floats).equals(table.drop_columns(floats))
    for name in floats:
        assert np.array_equal(back[name].to_numpy().view(np.uint8),
                              table[name].to_numpy().view(np.uint8))
    with ParquetFile.open(out) as f:
        region, warnings = read_region(f)
        assert region is not None and not warnings
        pred = bind(parse_where("s = 'kiwi'"), f.schema)
        assert isinstance(pred, BoundPredicate)
        (ev,) = region.evidence(Scope.FILE, "s")
        assert ev.match(pred) == Match.NONE
    with ParquetFile.open(path) as f:
        assert read_region(f) == (None, [])


@pytest.mark.parametrize("value", ["nonsense", "4:10", "999999999:100", "-5:30"])
def test_bad_region_location_is_ignored(written: tuple[pa.Table, Path], value: str) -> None:
    _, path = written
    out = _splice(path, b"", value)
    with ParquetFile.open(out) as f:
        region, warnings = read_region(f)
        assert region is None and len(warnings) == 1
        with pytest.raises(RegionError):
            read_region(f, strict=True)


# ---------------------------------------------------------------- lazy blob reads


def _big_region_file(written: tuple[pa.Table, Path]) -> tuple[Path, list[Blob], int]:
    """A file whose region (a 256 KiB filler blob first) is far larger than the tail
    read, and a tail size that holds the footer and the region trailer only (not the
    directory before it)."""
    _pf, blobs = _build(written, "distinct", {"scopes": ["file", "row_group"]},
                        columns=["s", "i64"])
    filler = Blob("future_kind", "s", Scope.FILE, None, None, bytes(256 * 1024))
    out = _splice(written[1], encode_region([filler, *blobs]))
    with ParquetFile.open(out) as f:
        tail = f.file_size - f.footer_offset + TRAILER_SIZE  # + the trailer
    return out, blobs, tail


def test_region_opens_from_the_tail_read(written: tuple[pa.Table, Path]) -> None:
    """Directory and trailer end the region, next to the footer: the default tail read
    holds them, whatever the size of the blobs before them."""
    out, _blobs, _tail = _big_region_file(written)
    stats = IOStats()
    with ParquetFile.open(out, stats=stats) as f:
        stats.reset()
        region, warnings = read_region(f)
        assert region is not None and not warnings and region.size > 256 * 1024
        assert stats.requests == 0
        pred = bind(parse_where("s = 'kiwi'"), f.schema)
        assert isinstance(pred, BoundPredicate)
        (ev,) = region.evidence(Scope.FILE, "s")  # buffered too
        assert ev.match(pred) == Match.NONE and stats.requests == 0
        assert not region.warnings


def test_region_opens_with_directory_and_trailer_only(written: tuple[pa.Table, Path]) -> None:
    out, blobs, tail = _big_region_file(written)
    stats = IOStats()
    with ParquetFile.open(out, stats=stats, tail_bytes=tail) as f:
        stats.reset()
        region, warnings = read_region(f)
        assert region is not None and not warnings
        # the directory, sized by the trailer, and the 4 KiB before it, where the
        # sub-directories (and here the small blobs) lie
        assert stats.requests == 1
        assert stats.bytes_read < 8 * 1024 and region.size > 256 * 1024
        pred = bind(parse_where("s = 'kiwi'"), f.schema)
        assert isinstance(pred, BoundPredicate)
        (ev,) = region.evidence(Scope.FILE, "s")
        assert ev.match(pred) == Match.NONE
        assert stats.requests == 1  # sub-directory and blob came with the directory
        before = stats.requests
        for rg in range(len({b.row_group for b in blobs if b.row_group is not None})):
            assert region.evidence(Scope.ROW_GROUP, "i64", rg)
        assert stats.requests <= before + 1  # one column's blobs: at most one request
        assert not region.warnings


def test_version_1_region_is_ignored(written: tuple[pa.Table, Path]) -> None:
    """Version 1 regions (directory first, 8-byte trailer) are refused with a warning."""
    _pf, blobs = _build(written, "distinct", {"scopes": ["file"]}, columns=["s"])
    body = b"".join(b.data for b in blobs)
    entries = [{"kind": b.kind, "column": b.column, "scope": "file", "offset": 0,
                "length": len(b.data), "xxh64": f"{xxhash.xxh64_intdigest(b.data):016x}"}
               for b in blobs]
    d = json.dumps({"blobs": entries, "trailer": 8}).encode()
    data = (struct.pack("<4sHHIQ", b"PQIX", 1, 0, len(d), xxhash.xxh64_intdigest(d, 0))
            + d + body + struct.pack("<I4s", len(d), b"PQIX"))
    out = _splice(written[1], data)
    for tail in (64, None):
        with ParquetFile.open(out, **({} if tail is None else {"tail_bytes": tail})) as f:
            region, warnings = read_region(f)
            assert region is None and len(warnings) == 1 and "version" in warnings[0]
            with pytest.raises(RegionVersionError):
                read_region(f, strict=True)


def test_lazily_read_blob_with_bad_checksum_is_dropped(
        written: tuple[pa.Table, Path]) -> None:
    out, _blobs, tail = _big_region_file(written)
    with ParquetFile.open(out, tail_bytes=tail) as f:
        region, _ = read_region(f)
        assert region is not None
        (entry,) = region.find(kind="distinct", column="s", scope=Scope.FILE)
        at = region.region_offset + entry.offset + entry.length // 2
        n = len(region.blobs)
    raw = bytearray(out.read_bytes())
    raw[at] ^= 0x10
    out.write_bytes(bytes(raw))
    with ParquetFile.open(out, tail_bytes=tail) as f:
        region, warnings = read_region(f)
        assert region is not None and not warnings  # column not opened: not checked yet
        assert region.evidence(Scope.FILE, "s") == []
        assert len(region.warnings) == 1 and "checksum" in region.warnings[0]
        assert len(region.blobs) == n - 1
        with pytest.raises(RegionError):
            region.blob(entry)


def test_distinct_string_keys_are_the_decoded_keys() -> None:
    """Strings and binary skip the per-value decode: the keys must be the same."""
    from pqindex.format.schema import PhysicalType
    from pqindex.format.structs import LogicalType, SchemaElement, StringType
    from pqindex.format.value_type import ValueType
    from pqindex.indexes.distinct import DistinctSet
    from pqindex.indexes.evidence import value_key

    rng = random.Random(5)
    pieces = [b"", b"a", b"\x00", b"\x7f", b"\x80", b"\xc3\xa9", b"\xed\xa0\x80", b"\xff"]
    for logical in (LogicalType(STRING=StringType()), None):
        vt = ValueType.from_element(SchemaElement(
            type=int(PhysicalType.BYTE_ARRAY), name="c", logicalType=logical))
        raw = list({b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 4)))
                    for _ in range(200)})
        got = DistinctSet(vt, len(raw), 0, len(raw), raw)
        assert got.keys == sorted({value_key(vt, vt.decode(r)) for r in raw})
