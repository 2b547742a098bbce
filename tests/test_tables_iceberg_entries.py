"""pqindex's reading of Iceberg manifest entries against pyiceberg's own.

pqindex decodes the live entries of a snapshot's data manifests with pyiceberg's Avro
reader into plain Records, and makes pyiceberg's DataFile only for the files its
vectorized bounds pass keeps (``iceberg._live_entries``). Here every entry it produces
(each DataFile field: path, format, counts, partition, bounds...; spec id) is compared with
pyiceberg's ``fetch_manifest_entry``, the integer-like bounds it decodes with
pyiceberg's ``from_bytes``, and its file plans with pyiceberg's ``plan_files``, on
tables written by pyiceberg with many column types, NaNs, nulls, a partition spec,
several manifests and deleted entries.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import random
import uuid
from typing import Any

import pyarrow as pa
import pytest

from conftest import import_or_missing

pyiceberg = import_or_missing("pyiceberg", "pyiceberg")

from pqindex.dataset.tables import iceberg  # noqa: E402
from pqindex.dataset.tables.iceberg import load_iceberg  # noqa: E402
from pqindex.expr.sql import parse_where  # noqa: E402

UTC = dt.UTC


def _schema() -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        BinaryType,
        BooleanType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        NestedField,
        StringType,
        TimestampType,
        TimestamptzType,
        UUIDType,
    )

    types = [("i", IntegerType()), ("l", LongType()), ("d", DateType()),
             ("ts", TimestampType()), ("tz", TimestamptzType()), ("dec", DecimalType(9, 2)),
             ("s", StringType()), ("b", BinaryType()), ("f", FloatType()),
             ("x", DoubleType()), ("ok", BooleanType()), ("u", UUIDType()),
             ("region", StringType())]
    return Schema(*[NestedField(i + 1, n, t, required=False) for i, (n, t) in enumerate(types)])


def _rows(schema: Any, n: int, seed: int) -> pa.Table:
    rng = random.Random(seed)

    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.1 else v

    def one(k: int) -> dict[str, Any]:
        base = seed * 1000 + k
        return {
            "i": maybe(rng.randrange(-2**31, 2**31)), "l": maybe(base - 500),
            "d": maybe(dt.date(1960, 1, 1) + dt.timedelta(days=rng.randrange(40_000))),
            "ts": maybe(dt.datetime(1965, 1, 1) + dt.timedelta(microseconds=rng.randrange(
                2**52))),
            "tz": maybe(dt.datetime(1965, 1, 1, tzinfo=UTC) + dt.timedelta(
                microseconds=rng.randrange(2**52))),
            "dec": maybe(decimal.Decimal(rng.randrange(-10**8, 10**8)).scaleb(-2)),
            "s": maybe(rng.choice(["", "a", "zz", "é", "naïve"]) + str(rng.randrange(99))),
            "b": maybe(bytes(rng.randrange(256) for _ in range(rng.randrange(4)))),
            "f": maybe(rng.choice([float("nan"), rng.uniform(-1e6, 1e6)])),
            "x": maybe(rng.choice([float("nan"), float("-inf"), rng.uniform(-1e9, 1e9)])),
            "ok": maybe(rng.random() < 0.5),
            "u": maybe(uuid.UUID(int=rng.getrandbits(128)).bytes),
            "region": rng.choice(["eu", "us", "ap"]),
        }

    return pa.Table.from_pylist([one(k) for k in range(n)], schema=schema.as_arrow())


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[int]]:
    """Partitioned by identity(region) (each append writes a file per region), through
    appends (a manifest each), a delete and an overwrite (deleted entries), and a spec
    change (two partition specs); the snapshot ids along the way."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.transforms import IdentityTransform

    tmp = tmp_path_factory.mktemp("entries")
    (tmp / "wh").mkdir()
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp}/cat.db", warehouse=f"file://{tmp}/wh")
    catalog.create_namespace("ns")
    schema = _schema()
    t = catalog.create_table("ns.t", schema=schema)
    with t.update_spec() as spec:
        spec.add_field("region", IdentityTransform(), "region")
    snapshots = []
    for seed in range(4):
        t.append(_rows(schema, 60, seed))
        snapshots.append(t.current_snapshot().snapshot_id)
    t.delete("l < 100")
    snapshots.append(t.current_snapshot().snapshot_id)
    t.overwrite(_rows(schema, 30, 9), overwrite_filter="l >= 2000")
    snapshots.append(t.current_snapshot().snapshot_id)
    with t.update_spec() as spec:
        spec.add_field("ok", IdentityTransform(), "ok_part")
    t = catalog.load_table("ns.t")
    t.append(_rows(schema, 40, 7))
    snapshots.append(t.current_snapshot().snapshot_id)
    return t, snapshots


def _reference(t: Any, snapshot_id: int) -> list[Any]:
    """pyiceberg's own live DataFiles of the snapshot's data manifests."""
    snap = t.snapshot_by_id(snapshot_id)
    return [e.data_file for m in snap.manifests(t.io)
            for e in m.fetch_manifest_entry(t.io, discard_deleted=True)]


def _same(a: Any, b: Any) -> bool:
    """Equal values, NaN equal to NaN (in partition values)."""
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return bool(a == b)


def _fields(df: Any) -> dict[str, Any]:
    out = {name: getattr(df, name) for name in iceberg._data_file_positions()}
    for name in ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts",
                 "lower_bounds", "upper_bounds"):
        out[name] = None if out[name] is None else dict(out[name])
    out["partition"] = list(df.partition)
    out["spec_id"] = df.spec_id
    return out


def test_entries_equal_pyicebergs_at_every_snapshot(table: tuple[Any, list[int]]) -> None:
    t, snapshots = table
    deleted_seen = False
    for snapshot_id in snapshots:
        snap = load_iceberg(t, snapshot_id)
        entries = snap.entries
        assert entries is not None and not entries.whole  # Records, not pyiceberg's objects
        ref = _reference(t, snapshot_id)
        mine = [entries.data_file(i) for i in range(len(snap.files))]
        assert sorted(f.path for f in snap.files) == sorted(iceberg._local(d.file_path)
                                                           for d in ref)
        by_path = {d.file_path: d for d in ref}
        for f, df in zip(snap.files, mine, strict=True):
            want = by_path[df.file_path]
            assert (f.path, f.size, f.rows) == (iceberg._local(want.file_path),
                                                want.file_size_in_bytes, want.record_count)
            got, exp = _fields(df), _fields(want)
            assert got.keys() == exp.keys()
            for k in got:
                if k == "partition":
                    assert len(got[k]) == len(exp[k]) and all(
                        _same(a, b) for a, b in zip(got[k], exp[k], strict=True)), k
                else:
                    assert got[k] == exp[k], (k, df.file_path)
            assert type(df.content) is type(want.content)
            assert type(df.file_format) is type(want.file_format)
        manifests = t.snapshot_by_id(snapshot_id).manifests(t.io)
        deleted_seen |= any(m.deleted_files_count for m in manifests)
    assert deleted_seen  # some manifest held deleted entries, which are left out
    assert len({d.spec_id for d in _reference(t, snapshots[-1])}) == 2


def test_integer_like_bounds_are_decoded_as_pyiceberg_decodes_them(
        table: tuple[Any, list[int]]) -> None:
    from pyiceberg.conversions import from_bytes

    t, snapshots = table
    for snapshot_id in (snapshots[3], snapshots[-1]):
        snap = load_iceberg(t, snapshot_id)
        entries = snap.entries
        assert entries is not None
        schema = t.schema()
        names = ["i", "l", "d", "ts", "tz"]
        stats = snap._bounds(names, names)
        for name in names:
            field = schema.find_field(name)
            for kind, attr in (("min", "lower_bounds"), ("max", "upper_bounds")):
                got = stats.column(f"{kind}.{name}")
                t_int = pa.int32() if name in ("i", "d") else pa.int64()
                got_ints = got.cast(t_int).to_pylist() if name not in ("tz",) else (
                    got.cast(pa.timestamp("us")).cast(pa.int64()).to_pylist())
                want = []
                for i in range(len(snap.files)):
                    raw = (getattr(entries.data_file(i), attr) or {}).get(field.field_id)
                    want.append(None if raw is None else from_bytes(field.field_type, raw))
                assert got_ints == want, (name, kind)
            nulls = [(entries.data_file(i).null_value_counts or {}).get(field.field_id)
                     for i in range(len(snap.files))]
            assert stats.column(f"nulls.{name}").to_pylist() == nulls
        assert any(v is not None for v in stats.column("min.d").to_pylist())


def test_broken_widths_leave_the_bound_unknown() -> None:
    got = iceberg._int_bounds([b"\x01\x00\x00\x00\x00\x00\x00\x00", None, b"\x02\x00"], 8)
    assert got.to_pylist() == [1, None, None]
    got = iceberg._int_bounds([(-5).to_bytes(4, "little", signed=True)] * 2, 4)
    assert got.to_pylist() == [-5, -5] and got.type == pa.int32()


def _pyiceberg_paths(t: Any, snapshot_id: int, where: str) -> set[str]:
    return {iceberg._local(task.file.file_path)
            for task in t.scan(row_filter=where, snapshot_id=snapshot_id).plan_files()}


def test_plans_keep_the_files_pyicebergs_planning_keeps(table: tuple[Any, list[int]]) -> None:
    t, snapshots = table
    rng = random.Random(40)
    ref_rows = t.scan(snapshot_id=snapshots[-1]).to_arrow()
    sizes = []
    for snapshot_id in (snapshots[2], snapshots[-1]):
        snap = load_iceberg(t, snapshot_id)
        for _ in range(25):
            k = rng.choice(["l", "i", "d", "region", "x", "dec"])
            v = ref_rows.column(k)[rng.randrange(ref_rows.num_rows)].as_py()
            if v is None or (isinstance(v, float) and not math.isfinite(v)):
                continue  # (pyiceberg's row filter parser takes finite numbers only)
            lit = (f"'{v}'" if isinstance(v, str) else f"DATE '{v}'"
                   if isinstance(v, dt.date) else str(v))
            op = rng.choice(["=", "<", ">=", "!="])
            where = f"{k} {op} {lit}"
            got = {f.path for f, keep in zip(snap.files, snap.plan(parse_where(where)),
                                             strict=True) if keep}
            want = _pyiceberg_paths(t, snapshot_id, f"{k} {op} {lit}".replace("DATE ", ""))
            assert got == want, where
            sizes.append(len(got) / len(snap.files))
    assert min(sizes) < 0.5 and max(sizes) > 0  # files ruled out, and files kept


def test_pyicebergs_whole_reader_when_the_record_read_fails(
        table: tuple[Any, list[int]], monkeypatch: pytest.MonkeyPatch) -> None:
    t, snapshots = table
    projected = load_iceberg(t, snapshots[-1])

    def refuse(input_file: Any) -> Any:
        raise TypeError("internals moved")

    monkeypatch.setattr(iceberg, "_live_records", refuse)
    whole = load_iceberg(t, snapshots[-1])
    assert whole.entries is not None and whole.entries.whole
    assert whole.files == projected.files
    assert projected.entries is not None
    for i in range(len(whole.files)):
        assert _fields(whole.entries.data_file(i)) == _fields(projected.entries.data_file(i))
    where = parse_where("l >= 1000 AND region = 'eu'")
    assert whole.plan(where) == projected.plan(where)
