"""Files planned in bulk (dataset/planning.py ``Deferred``, dataset/stages.py
``every_row_stage``): files every row of which matches by the columnar manifest's
statistics are planned without opening a footer until a scan, an entry or explain
needs them.

References: per file, the manifest entry's own evidence (``StatisticsEvidence``
evaluated over the predicate tree) for "every row matches", on random manifests
(int64, doubles with NaN, strings with shortened bounds, nulls, absent statistics);
on a lake, the same dataset planned file by file (the bulk path off) for every
entry, count and explain line, and pyarrow's full read + filter for the rows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings

import pqindex
from pqindex.dataset import planning
from pqindex.dataset.manifest import FileEntry, _Summaries, write_manifest
from pqindex.dataset.sources import ManifestSource
from pqindex.dataset.stages import every_row_stage
from pqindex.expr.bind import BoundExpr, BoundPredicate, bind
from pqindex.expr.sql import parse_where
from pqindex.format.file import ParquetFile
from pqindex.format.match import Match
from pqindex.plan.tree import evaluate
from test_stages import _view, manifests, predicates, stand_in  # noqa: F401  (fixture)


def _every_row_per_file(entry: FileEntry, stand_in: ParquetFile,  # noqa: F811
                        bound: BoundExpr) -> bool:
    """Whether the entry's own evidence says every row of the file matches."""
    s = _Summaries(entry, stand_in)

    def leaf(pred: BoundPredicate) -> Match:
        answers = [Match(ev.match(pred)) for ev in s.evidence(pred.leaf)]
        return (Match.NONE if Match.NONE in answers
                else Match.ALL if Match.ALL in answers else Match.SOME)

    return bool(evaluate(bound, leaf) == Match.ALL)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=manifests(), where=predicates())
def test_every_row_stage_equals_per_file(stand_in: ParquetFile,  # noqa: F811
                                         entries: list[FileEntry],
                                         where: str) -> None:
    bound = bind(parse_where(where), stand_in.schema)
    view, disc = _view(entries, stand_in)
    facts = ManifestSource(view, disc).facts()
    got = every_row_stage(facts, lambda _sid: bound, np.ones(facts.num_files, np.bool_))
    want = [_every_row_per_file(e, stand_in, bound) for e in entries]
    # Sound: a file planned in bulk has every row matching by its own evidence.
    assert not (got & ~np.array(want, np.bool_)).any(), where
    if not any(w in where for w in ("LIKE", " IN ")):  # every leaf has a vectorized form
        assert got.tolist() == want, where
    # Only the kept files are considered.
    none = every_row_stage(facts, lambda _sid: bound, np.zeros(facts.num_files, np.bool_))
    assert not none.any()


FILES = 30


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    root = tmp_path_factory.mktemp("bulk")
    rng = np.random.default_rng(3)
    parts = []
    for k in range(FILES):
        n = 60
        x = rng.normal(size=n)
        x[rng.random(n) < 0.1] = np.nan
        t = pa.table({
            "id": pa.array(np.arange(k * n, k * n + n), pa.int64()),
            "x": pa.array(x, mask=rng.random(n) < 0.2),
            "s": pa.array([f"k{k:02d}-{i:03d}" for i in range(n)]),
        })
        pq.write_table(t, root / f"part-{k:03d}.parquet", row_group_size=25,
                       write_page_index=True)
        parts.append(t)
    write_manifest(root)
    return root, pa.concat_tables(parts)


WHERES = [
    ("id >= 0", pc.field("id") >= 0),
    ("id >= 590", pc.field("id") >= 590),  # a file kept in part, the rest whole
    ("s >= 'k05' AND id < 100000", (pc.field("s") >= "k05") & (pc.field("id") < 100000)),
    ("id < 0 OR s IS NOT NULL", (pc.field("id") < 0) | pc.field("s").is_valid()),
    ("id != 7", pc.field("id") != 7),
    (None, None),
]


def _plan(root: Path, bulk_min: int, monkeypatch: pytest.MonkeyPatch, where: str | None,
          ) -> tuple[pqindex.Dataset, object]:
    monkeypatch.setattr(planning, "BULK_MIN_FILES", bulk_min)
    ds = pqindex.dataset(root)
    return ds, ds.plan(["id", "x"], where)


def _rows(t: pa.Table) -> list[tuple[int, str]]:
    """(id, x) pairs by id, NaN and null spelled out (NaN is not equal to itself)."""
    t = t.sort_by("id")
    return list(zip(t.column("id").to_pylist(), map(repr, t.column("x").to_pylist()),
                    strict=True))


@pytest.mark.parametrize(("where", "expr"), WHERES)
def test_bulk_plan_equals_per_file(lake: tuple[Path, pa.Table], monkeypatch: pytest.MonkeyPatch,
                                   where: str | None, expr: object) -> None:
    root, table = lake
    ds_b, bulk = _plan(root, 2, monkeypatch, where)
    ds_f, each = _plan(root, 10**9, monkeypatch, where)
    assert bulk.schema == each.schema and bulk.fields == each.fields  # type: ignore[attr-defined]
    b_files, f_files = bulk.files, each.files  # type: ignore[attr-defined]
    assert len(b_files) == len(f_files) == FILES
    for b, f in zip(b_files, f_files, strict=True):
        assert (b.path, b.skipped_by, b.partition) == (f.path, f.skipped_by, f.partition)
        assert b.access == f.access, b.path  # row groups, ranges, reads
        assert str(b.predicate) == str(f.predicate)
    rb, rf = bulk.report, each.report  # type: ignore[attr-defined]
    for name in ("files_total", "rows_total", "row_groups_total", "pages_total"):
        assert getattr(rb, name) == getattr(rf, name), name
    assert rb.files_skipped == rf.files_skipped
    assert rb.row_groups_skipped == rf.row_groups_skipped
    # explain and the scan, bulk on, against the per-file path and pyarrow.
    lines = [ln for ln in ds_b.explain(["id"], where).splitlines() if ".parquet" in ln]
    assert lines == [ln for ln in ds_f.explain(["id"], where).splitlines() if ".parquet" in ln]
    scan = ds_b.scan(["id", "x"], where)
    got = scan.to_table()
    want = table.select(["id", "x"]) if expr is None else table.filter(expr).select(["id", "x"])
    assert got.num_rows == want.num_rows
    assert _rows(got) == _rows(want)
    ref = ds_f.scan(["id", "x"], where)
    ref.to_table()
    for name in ("files_read", "row_groups_read", "rows_total", "row_groups_total"):
        assert getattr(scan.report, name) == getattr(ref.report, name), name


def test_keep_every_file_plan_reads_no_footer(lake: tuple[Path, pa.Table],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root, table = lake
    monkeypatch.setattr(planning, "BULK_MIN_FILES", 2)
    ds = pqindex.dataset(root)
    before = ds.io_counts()
    plan = ds.plan(["id"], "id >= 0")
    # Planning read the manifest only: no data file opened, no request to one.
    assert ds.io_stats() == {}
    assert {k: v for k, v in ds.io_counts().items() if v != before.get(k)} == {
        k: v for k, v in ds.io_counts().items()
        if k.startswith("\0") and v != before.get(k)}
    assert len(plan.files) == FILES and plan.report.rows_total == table.num_rows
    assert plan.files[0].path.endswith("part-000.parquet")
    assert ds.io_stats() == {}  # a path needs no footer either
    # An entry's access plan is made when asked for: every bulk file's footer read once.
    assert [rg.match for rg in plan.files[3].row_groups] == [Match.ALL] * 3
    stats = ds.io_stats()
    assert len(stats) == FILES and all(s.requests == 1 for s in stats.values())
    assert plan.report.row_groups_total == FILES * 3
    # The scan of a premade plan reads the data only.
    scan = ds.scan(plan=plan)
    assert scan.to_table().num_rows == table.num_rows
    assert all(s.requests >= 2 for s in ds.io_stats().values())


def test_no_bulk_below_the_threshold_or_with_row_groups(lake: tuple[Path, pa.Table],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = lake
    monkeypatch.setattr(planning, "BULK_MIN_FILES", FILES + 1)
    ds = pqindex.dataset(root)
    assert isinstance(ds.plan(["id"], "id >= 0").files, tuple)
    assert len(ds.io_stats()) == FILES  # planned file by file: every footer read
    monkeypatch.setattr(planning, "BULK_MIN_FILES", 2)
    first = str(root / "part-000.parquet")
    ds = pqindex.dataset(root, row_groups={first: [1]})
    plan = ds.plan(["id"], "id >= 0")
    assert isinstance(plan.files, tuple)
    assert plan.files[0].row_groups_kept == [1]
