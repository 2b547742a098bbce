"""The file-level planning stages, each alone (dataset/stages.py, dataset/sources.py).

The vectorized statistics stage is compared with per-file pruning (the manifest
view's ``prune``, which asks each file's ``StatisticsEvidence``) on random
manifests: int64, double (NaN values and NaN bounds), strings (shortened bounds,
inexact flags, legacy min/max), nulls and all-null files, absent statistics. The
two must rule out exactly the same files; where every leaf has a vectorized form,
the vectorized pass alone must (no file left to the per-file fallback). The
partition stage is compared with per-file partition pruning the same way.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pqindex.dataset.discovery import DataFile, Discovery
from pqindex.dataset.manifest import FileEntry, Manifest, ManifestView, schema_stub, stub_file
from pqindex.dataset.sources import ListingSource, ManifestSource, partition_column
from pqindex.dataset.stages import (
    FileSelection,
    embedded_stage,
    partition_stage,
    statistics_stage,
)
from pqindex.expr.bind import BoundExpr, bind
from pqindex.expr.sql import parse_where
from pqindex.format.file import ParquetFile
from pqindex.format.match import Match
from pqindex.format.structs import Statistics
from pqindex.indexes.evidence import ConstantEvidence
from pqindex.plan.tree import evaluate

COLUMNS = ("i", "d", "s")


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> ParquetFile:
    """A footer-only file of schema (i int64, d double, s string), as a manifest keeps."""
    p = tmp_path_factory.mktemp("schema") / "f.parquet"
    pq.write_table(pa.table({"i": pa.array([1], pa.int64()), "d": [1.0], "s": ["a"]}), p)
    with ParquetFile.open(str(p)) as pf:
        return stub_file(schema_stub(pf), "manifest#schema0")


ints = st.integers(-20, 20)
floats = st.one_of(st.floats(-20, 20, allow_nan=False), st.just(math.nan),
                   st.just(-0.0), st.just(0.0))
texts = st.text(alphabet="abcz\u00e9", min_size=0, max_size=4)


def _enc(col: str, v: object) -> bytes:
    if col == "i":
        return struct.pack("<q", v)
    if col == "d":
        return struct.pack("<d", v)
    assert isinstance(v, str)
    return v.encode()


@st.composite
def column_stats(draw: st.DrawFn, col: str) -> tuple[Statistics, int] | None:
    """One file's statistics of one column, as a manifest entry holds them."""
    if draw(st.integers(0, 9)) == 0:
        return None  # no statistics for this column
    values = draw(st.integers(1, 50))
    nulls = draw(st.one_of(st.none(), st.integers(0, values)))
    stats = Statistics(null_count=nulls)
    if col == "d":
        stats.nan_count = draw(st.one_of(st.none(), st.integers(0, values - (nulls or 0))))
    strat = {"i": ints, "d": floats, "s": texts}[col]
    if nulls != values and draw(st.integers(0, 7)) > 0:
        a, b = draw(strat), draw(strat)
        if not (isinstance(a, float) and math.isnan(a)) and not (
                isinstance(b, float) and math.isnan(b)):
            a, b = (a, b) if a <= b else (b, a)  # type: ignore[operator]
        if col == "s" and draw(st.booleans()):
            b = b + "z"  # a shortened max: rounded up, inexact
            stats.is_max_value_exact = False
        if col != "d" and draw(st.integers(0, 5)) == 0:
            stats.min, stats.max = _enc(col, a), _enc(col, b)  # legacy fields
        else:
            stats.min_value, stats.max_value = _enc(col, a), _enc(col, b)
            if stats.is_max_value_exact is None:
                stats.is_max_value_exact = draw(st.booleans())
            stats.is_min_value_exact = draw(st.booleans())
    return stats, values


@st.composite
def manifests(draw: st.DrawFn) -> list[FileEntry]:
    n = draw(st.integers(1, 12))
    out = []
    for k in range(n):
        cols = tuple(draw(column_stats(c)) for c in COLUMNS)
        out.append(FileEntry(f"p{k}.parquet", 100, draw(st.one_of(st.none(), st.integers(0, 5))),
                             None, None, 0, cols))
    return out


def _literal(col: str, draw: st.DrawFn) -> str:
    if col == "i":
        return str(draw(ints))
    if col == "d":
        return repr(draw(st.floats(-20, 20, allow_nan=False)))
    return "'" + draw(texts).replace("'", "''") + "'"


@st.composite
def leaves(draw: st.DrawFn) -> str:
    col = draw(st.sampled_from(COLUMNS))
    kind = draw(st.sampled_from(["cmp", "in", "null", "like"] if col == "s"
                                else ["cmp", "in", "null"]))
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
        return f"{col} {op} {_literal(col, draw)}"
    if kind == "in":
        vals = ", ".join(_literal(col, draw) for _ in range(draw(st.integers(1, 4))))
        return f"{col} {draw(st.sampled_from(['IN', 'NOT IN']))} ({vals})"
    if kind == "null":
        return f"{col} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    prefix = draw(texts).replace("'", "''").replace("%", "").replace("_", "")
    return f"s {draw(st.sampled_from(['LIKE', 'NOT LIKE']))} '{prefix}%'"


@st.composite
def predicates(draw: st.DrawFn) -> str:
    parts = [draw(leaves()) for _ in range(draw(st.integers(1, 3)))]
    out = parts[0]
    for p in parts[1:]:
        out = f"({out}) {draw(st.sampled_from(['AND', 'OR']))} {p}"
    return f"NOT ({out})" if draw(st.integers(0, 4)) == 0 else out


def _view(entries: list[FileEntry], stand_in: ParquetFile) -> tuple[ManifestView, Discovery]:
    disc = Discovery(tuple(DataFile(f"/lake/{e.path}") for e in entries))
    manifest = Manifest("/lake/_m", [stand_in], {e.path: e for e in entries})
    matched = {f"/lake/{e.path}": (e, stand_in) for e in entries}
    return ManifestView(manifest, "/lake", matched, 0), disc


def _per_file(view: ManifestView, disc: Discovery, bound: BoundExpr) -> list[bool]:
    return [view.prune(df, lambda _pf: bound, {}) is not None for df in disc.files]


def _vectorized(view: ManifestView, disc: Discovery, bound: BoundExpr
                ) -> tuple[FileSelection, FileSelection]:
    facts = ManifestSource(view, disc).facts()
    sel = statistics_stage(facts, lambda _sid: bound, {},
                           FileSelection.everything(facts.num_files))
    done = embedded_stage(facts, sel, lambda i: view.prune(disc.files[i], lambda _pf: bound, {}))
    return sel, done


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=manifests(), where=predicates())
def test_vectorized_statistics_equal_per_file(stand_in: ParquetFile,
                                              entries: list[FileEntry], where: str) -> None:
    bound = bind(parse_where(where), stand_in.schema)
    view, disc = _view(entries, stand_in)
    expected = _per_file(view, disc, bound)
    first, done = _vectorized(view, disc, bound)
    assert done.ruled_out.tolist() == expected, where
    # Only files the vectorized pass left undecided may be decided per file.
    assert not (first.kept & ~done.kept & ~first.undecided).any(), where
    if "LIKE" not in where:  # every leaf has a vectorized form: no file needs the fallback
        assert first.ruled_out.tolist() == expected, where
        assert not first.undecided.any(), where


def test_untrusted_bounds_keep_the_file(stand_in: ParquetFile) -> None:
    """A NaN bound, a shortened max, and absent statistics never rule a file out."""
    nan = Statistics(null_count=0, nan_count=0, min_value=struct.pack("<d", math.nan),
                     max_value=struct.pack("<d", 5.0))
    short = Statistics(null_count=0, min_value=b"abc", max_value=b"abd",
                       is_min_value_exact=True, is_max_value_exact=False)
    entries = [FileEntry("a", 1, 10, None, None, 0, (None, (nan, 10), (short, 10))),
               FileEntry("b", 1, 10, None, None, 0, (None, None, None))]
    view, disc = _view(entries, stand_in)
    facts = ManifestSource(view, disc).facts()
    d = facts.statistics("d")
    assert d is not None and d.min.to_pylist() == [None, None]  # NaN is no bound
    for where, out in [("d < -1", [False, False]), ("d > 6", [True, False]),
                       ("s = 'abcz'", [False, False]), ("s != 'abc'", [False, False]),
                       ("s > 'abd'", [True, False]), ("i = 3", [False, False])]:
        bound = bind(parse_where(where), stand_in.schema)
        sel, _ = _vectorized(view, disc, bound)
        assert sel.ruled_out.tolist() == out, where
        assert out == _per_file(view, disc, bound), where


def test_listing_source_facts() -> None:
    """A listing knows paths, sizes and raw partition values; no statistics."""
    disc = Discovery((DataFile("/l/k=1/a.parquet", (("k", "1"),)),
                      DataFile("/l/k=__HIVE_DEFAULT_PARTITION__/b.parquet",
                               (("k", "__HIVE_DEFAULT_PARTITION__"),))),
                     ("k",), {"k": "int64"})
    facts = ListingSource(disc).facts()
    assert facts.listed and facts.origin == "listing"
    assert facts.paths == ["/l/k=1/a.parquet", "/l/k=__HIVE_DEFAULT_PARTITION__/b.parquet"]
    assert facts.files.column(partition_column("k")).to_pylist() == [
        "1", "__HIVE_DEFAULT_PARTITION__"]
    assert facts.statistics("x") is None


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.integers(0, 5)), min_size=1, max_size=10),
       ops=st.lists(st.tuples(st.sampled_from(["=", "!=", "<", ">=", "IN", "IS NULL",
                                               "IS NOT NULL"]), st.integers(0, 5)),
                    min_size=1, max_size=2),
       conj=st.sampled_from(["AND", "OR"]))
def test_partition_stage_equals_per_file(tmp_path_factory: pytest.TempPathFactory,
                                         stand_in: ParquetFile, values: list[int | None],
                                         ops: list[tuple[str, int]], conj: str) -> None:
    raw = ["__HIVE_DEFAULT_PARTITION__" if v is None else str(v) for v in values]
    disc = Discovery(tuple(DataFile(f"/l/k={r}/f{i}.parquet", (("k", r),))
                           for i, r in enumerate(raw)), ("k",), {"k": "int64"})
    facts = ListingSource(disc).facts()
    schema = _with_partition(stand_in)
    parts = []
    for op, v in ops:
        parts.append(f"k {op}" if "NULL" in op else f"k IN ({v}, {v + 2})" if op == "IN"
                     else f"k {op} {v} OR i = 1" if op == "!=" else f"k {op} {v}")
    bound = bind(parse_where(f" {conj} ".join(f"({p})" for p in parts)), schema)
    n = len(stand_in.schema.leaves)
    sel = partition_stage(facts, bound, n, {"k": "int64"})

    def per_file(df: DataFile) -> bool:
        vals = disc.partition_values(df)

        def leaf(pred: object) -> Match:
            p = pred  # a BoundPredicate
            if p.leaf.index >= n:  # type: ignore[attr-defined]
                return ConstantEvidence(vals.get(p.leaf.name)).match(p)  # type: ignore[attr-defined]
            return Match.SOME
        return evaluate(bound, leaf) == Match.NONE

    assert sel.ruled_out.tolist() == [per_file(df) for df in disc.files]
    assert not sel.undecided.any()


def _with_partition(pf: ParquetFile) -> object:
    """``pf``'s schema plus an int64 partition leaf ``k`` (as Dataset binds)."""
    from pqindex.format.schema import LeafColumn, Repetition, Schema
    from pqindex.format.structs import ColumnOrder, SchemaElement, TypeDefinedOrder

    el = SchemaElement(type=2, repetition_type=Repetition.OPTIONAL, name="k")
    leaf = LeafColumn(len(pf.schema.leaves), ("k",), el, 1, 0,
                      ColumnOrder(TYPE_ORDER=TypeDefinedOrder()))
    return Schema(pf.schema.root, (*pf.schema.leaves, leaf))


def test_stage_selection_composes() -> None:
    sel = FileSelection.everything(4)
    a = sel.then("partition", np.array([True, False, False, False]))
    b = a.then("statistics", np.array([True, True, False, False]),
               np.array([False, False, True, False]))
    assert b.decided_by.tolist() == ["partition", "statistics", None, None]
    assert b.undecided.tolist() == [False, False, True, False]
    assert b.kept.tolist() == [False, False, True, True]


def test_stage_skipped_files_counted_and_listed_in_order(tmp_path: Path) -> None:
    # The files the file stages rule out stay in bulk (no per-file plan); the scan's
    # counts, explain's lines and Dataset.plan's entries still cover every file, in
    # the dataset's order, against a full pyarrow read.
    import json

    import pyarrow.compute as pc

    import pqindex
    from pqindex.dataset.manifest import write_manifest

    for part in (1, 2):
        d = tmp_path / f"p={part}"
        d.mkdir()
        for f in range(6):
            lo = (part * 6 + f) * 10
            pq.write_table(pa.table({"id": pa.array(range(lo, lo + 10), pa.int64())}),
                           d / f"{f:02d}.parquet")
    write_manifest(tmp_path)
    ds = pqindex.dataset(tmp_path)
    where = "p = 2 AND id BETWEEN 125 AND 134"
    scan = ds.scan(["id", "p"], where)
    got = scan.to_table()
    want = pq.read_table(tmp_path).filter(
        (pc.field("p") == 2) & (pc.field("id") >= 125) & (pc.field("id") <= 134))
    assert sorted(got.column("id").to_pylist()) == sorted(want.column("id").to_pylist())
    report = scan.report
    assert report.files_total == 12
    assert report.files_skipped["partition"] == 6
    assert report.files_skipped["manifest"] == 4
    entries = ds.plan(["id"], where).files
    assert [e.path for e in entries] == [df.path for df in ds.discovery.files]
    assert [e.skipped_by is not None for e in entries].count(True) == 10
    text = ds.explain(["id"], where)
    listed = [line for line in text.splitlines() if ".parquet" in line]
    assert [line.split(": ", 1)[0].split(" ")[-1] for line in listed] == [
        df.path for df in ds.discovery.files]
    assert len(json.loads(ds.explain(["id"], where, format="json"))["files"]) == 12
