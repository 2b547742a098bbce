"""The file level of the footer statistics (plan/file_level.py): a file is ruled out
by its row groups' statistics folded together, before any row-group stage, region
read or wave; checked against independent references on files of several writers."""

from __future__ import annotations

import random
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pqindex
import scan_fixtures
import test_scan_differential as diff
import writers
from conftest import missing
from pqindex.expr.bind import bind
from pqindex.expr.sql import parse_where
from pqindex.format.file import ParquetFile
from pqindex.format.structs import Statistics
from pqindex.plan.file_level import REASON, fold_statistics
from pqindex.plan.planner import plan_file, settled_by_statistics
from test_cold_open import WaveLog

CASES = 60


def _check_file(path: Path, seed: str, n: int = CASES) -> int:
    """Random predicates on one file: where the file level rules the file out, no row
    matches (Python and DuckDB references) and every row group's own statistics rule
    it out too (the folded bounds are a relaxation of theirs). Returns how often the
    file level decided."""
    case = diff.file_case(path)
    rng = random.Random(zlib.crc32(seed.encode()))
    gen = diff.Generator(case.columns, rng)
    decided = 0
    with ParquetFile.open(path) as pf:
        every_rg = range(pf.num_row_groups)
        for _ in range(n):
            pred = gen.tree()
            where = pred.pq()
            try:
                bound = bind(parse_where(where), pf.schema)
            except pqindex.PqIndexError:
                continue  # not bindable here: the scan reports it, nothing to plan
            plan = settled_by_statistics(pf, bound, {})
            if plan is None:
                continue
            decided += 1
            assert case.expected_rows(pred).size == 0, where
            assert [rg.skipped for rg in plan.row_groups] == [True] * pf.num_row_groups
            # The row-group stages alone (a row-group selection bypasses the file level).
            per_rg = plan_file(pf, bound, [], row_groups=every_rg)
            assert all(rg.skipped for rg in per_rg.row_groups), where
    return decided


@pytest.mark.parametrize("name", list(scan_fixtures.SCAN_VARIANTS))
def test_pyarrow_layouts(tmp_path: Path, name: str) -> None:
    path = scan_fixtures.write_scan_variant(tmp_path, name)
    _check_file(path, f"file-level:{name}")


@pytest.mark.parametrize("name", list(writers.WRITERS))
def test_writer_files(written_files: writers.FileCache, name: str) -> None:
    _check_file(written_files[name], f"file-level:writer:{name}")


@pytest.mark.parametrize("name", diff.CORPUS_FILES)
def test_corpus_files(name: str) -> None:
    path = diff.CORPUS / name
    if not path.exists():
        missing(f"{name} is not in the corpus")
    _check_file(path, f"file-level:corpus:{name}")


def _sorted_file(path: Path) -> Path:
    n = 40_000
    t = pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "x": pa.array(np.where(np.arange(n) % 7 == 0, np.nan, np.arange(n) / 3.0)),
        "s": pa.array([f"k{i:06d}" for i in range(n)]),
    })
    pq.write_table(t, path, row_group_size=10_000, write_page_index=True)
    return path


def test_decides_often_on_a_sorted_file(tmp_path: Path) -> None:
    # A sorted file's bounds rule out most comparisons outside them: the level is used.
    assert _check_file(_sorted_file(tmp_path / "s.parquet"), "file-level:sorted", 120) >= 5


def test_plan_file_decides_first_without_reading(tmp_path: Path) -> None:
    path = _sorted_file(tmp_path / "s.parquet")
    pqindex.add_indexes(path, bloom="id", distinct="s")
    src = WaveLog(path)
    pf = ParquetFile(src)
    before = len(src.waves)
    for where in ("id = 99999999", "s = 'zz'", "id < 0 OR s > 'l'", "x > 1e9"):
        plan = plan_file(pf, bind(parse_where(where), pf.schema), [0, 1, 2])
        assert plan.skipped and {rg.decided_by for rg in plan.row_groups} == {"statistics"}
        assert {rg.reason for rg in plan.row_groups} == {REASON}
    # Neither the embedded region nor any index was read for them.
    assert len(src.waves) == before
    # Inside the file's bounds: the row-group levels decide, as before (row group 0
    # holds k000000..k009999: its statistics cannot rule the value out).
    plan = plan_file(pf, bind(parse_where("s = 'k00012a'"), pf.schema), [0])
    assert plan.skipped and all(rg.reason != REASON for rg in plan.row_groups)
    assert plan.row_groups[0].decided_by != "statistics"


def test_partition_values_take_part(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    for p in ("a", "b"):
        (root / f"p={p}").mkdir(parents=True)
        _sorted_file(root / f"p={p}" / "f.parquet")
    ds = pqindex.dataset(root)
    want = pq.read_table(root / "p=b" / "f.parquet").filter(
        pa.compute.field("id") >= 39_990)
    for _ in range(2):  # cold, then warm (open files settled on the calling thread)
        scan = ds.scan(where="(p = 'a' AND id > 50000) OR (p = 'b' AND id >= 39990)",
                       columns=["id", "s"])
        got = scan.to_table()
        assert got.sort_by("id").equals(want.select(["id", "s"]).sort_by("id"))
        r = scan.report
        assert r.files_total == 2 and r.files_skipped.get("row groups") == 1
        assert r.row_groups_skipped.get("statistics", 0) >= 4 + 3


def _string_file(path: Path) -> ParquetFile:
    t = pa.table({"s": pa.array(["b", "c", "bb", "c"])})
    pq.write_table(t, path, row_group_size=2)
    return ParquetFile.open(path)


def _set(pf: ParquetFile, rg: int, lo: bytes, lo_exact: bool, hi: bytes, hi_exact: bool) -> None:
    meta = pf.column_meta(rg, 0)
    meta.statistics = Statistics(null_count=0, min_value=lo, max_value=hi,
                                 is_min_value_exact=lo_exact, is_max_value_exact=hi_exact)


def test_fold_keeps_exact_only_when_every_tied_bound_is(tmp_path: Path) -> None:
    with _string_file(tmp_path / "t.parquet") as pf:
        # Row group 1's min is a shortened bound of "bb", equal to row group 0's exact "b".
        _set(pf, 0, b"b", True, b"c", True)
        _set(pf, 1, b"b", False, b"c", True)
        folded = fold_statistics(pf, pf.schema.leaves[0])
        assert folded is not None and folded.statistics.min_value == b"b"
        assert folded.statistics.is_min_value_exact is False
        assert folded.statistics.is_max_value_exact is True
        _set(pf, 1, b"b", True, b"c", None)  # type: ignore[arg-type]
        pf.derived.clear()  # decoded statistics are kept per open file: footers don't change
        folded = fold_statistics(pf, pf.schema.leaves[0])
        assert folded is not None and folded.statistics.is_min_value_exact is True
        assert folded.statistics.is_max_value_exact is None


def test_unknown_statistics_decide_nothing(tmp_path: Path) -> None:
    with _string_file(tmp_path / "t.parquet") as pf:
        pf.column_meta(1, 0).statistics = None
        assert fold_statistics(pf, pf.schema.leaves[0]) is None
        bound = bind(parse_where("s = 'zzz'"), pf.schema)
        assert settled_by_statistics(pf, bound, {}) is None
        # The row-group level still rules out the row group that has statistics; the
        # other one is left to its dictionary.
        plan = plan_file(pf, bound, [0])
        assert [(rg.decided_by, rg.reason) for rg in plan.row_groups] == [
            ("statistics", "no row matches"), ("dictionary", "no row matches")]


def test_warm_dataset_of_many_files(tmp_path: Path) -> None:
    """A warm scan settles the files their statistics rule out without planning
    them again: the report and the rows are those of a cold scan."""
    root = tmp_path / "many"
    root.mkdir()
    for k in range(40):
        ids = np.arange(k * 500, (k + 1) * 500, dtype=np.int64)
        pqindex.write_table(pa.table({"id": ids, "c": pa.array(np.array(["a", "b"])[ids % 2])}),
                            root / f"part-{k:03d}.parquet", indexes={"distinct": ["c"]})
    ds = pqindex.dataset(root)
    reports: list[dict[str, Any]] = []
    for _ in range(2):
        scan = ds.scan(where="id BETWEEN 7400 AND 7600", columns=["id"])
        assert scan.to_table().column("id").to_pylist() == list(range(7400, 7601))
        r = scan.report
        reports.append({"files": r.files_total, "skipped": dict(r.files_skipped),
                        "rg": dict(r.row_groups_skipped)})
    assert reports[0] == reports[1]
    assert reports[0]["skipped"] == {"row groups": 38} and reports[0]["rg"] == {
        "statistics": 38}
