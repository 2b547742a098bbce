"""The planner's stages, each alone (plan/row_groups.py, plan/pages.py,
plan/embedded.py): typed input, typed output, and what each reads, asserted on
the file's I/O trace.

One small file, four row groups of 1,000 rows, pages of 100 rows, page index on:
``id`` sorted (row groups and pages clustered), ``s`` a dictionary string whose
row group ``k`` holds only ``"k0".."k4"``, ``u`` random (no page narrows a row
group).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pqindex.expr.bind import bind
from pqindex.expr.sql import parse_where
from pqindex.format.file import ParquetFile
from pqindex.format.match import Match
from pqindex.plan.access import PlanOptions
from pqindex.plan.embedded import embedded_file_stage
from pqindex.plan.pages import futile_leaves, page_index_ranges, page_stage
from pqindex.plan.planner import file_context, plan_file
from pqindex.plan.row_groups import (
    FileContext,
    PageOutcome,
    equality_stage,
    footer_stage,
    late_stage,
    selection_of,
)

ROW_GROUPS, ROWS = 4, 1_000
FOOTER = 4_096


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(38)
    n = ROW_GROUPS * ROWS
    t = pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "s": pa.array([f"{i // ROWS}{rng.integers(0, 5)}" for i in range(n)]),
        "u": pa.array(rng.integers(0, 1_000_000, n)),
    })
    p = tmp_path_factory.mktemp("stages") / "f.parquet"
    pq.write_table(t, p, row_group_size=ROWS, data_page_size=1, write_batch_size=100,
                   write_page_index=True, use_dictionary=["s"], write_statistics=["id", "u"])
    return p


def _ctx(path: Path, where: str, options: PlanOptions | None = None) -> tuple[ParquetFile, FileContext]:
    # The footer alone (the file is smaller than a default tail read).
    pf = ParquetFile.open(path, tail_bytes=FOOTER)
    bound = bind(parse_where(where), pf.schema)
    return pf, file_context(pf, bound, [0, 1, 2], options or PlanOptions(), {})


def test_footer_stage_decides_from_statistics_and_reads_nothing(path: Path) -> None:
    pf, ctx = _ctx(path, "id >= 2500")
    before = pf.source.stats.requests
    out = footer_stage(ctx)
    assert [(d.index, d.match, d.decided_by) for d in out] == [
        (0, Match.NONE, "statistics"), (1, Match.NONE, "statistics"),
        (2, Match.SOME, "-"), (3, Match.ALL, "statistics")]
    assert pf.source.stats.requests == before
    # A selection of row groups: the others are skipped "by selection".
    picked = footer_stage(ctx, row_groups={2})
    assert [d.decided_by for d in picked] == ["selection", "selection", "-", "selection"]


def test_equality_stage_reads_dictionaries_in_one_wave(path: Path) -> None:
    """``s = '21'`` is inside every row group's min..max of no statistics: only the
    dictionaries can tell, all four read in one wave; three rule their row group out."""
    pf, ctx = _ctx(path, "s = '21'", PlanOptions(page_index=False))
    footer = footer_stage(ctx)
    assert all(d.undecided for d in footer)
    waves = pf.source.stats.round_trips
    out = equality_stage(ctx, footer, lambda rgs: [])
    assert pf.source.stats.round_trips == waves + 1
    assert [(d.match, d.decided_by) for d in out] == [
        (Match.NONE, "dictionary"), (Match.NONE, "dictionary"), (Match.SOME, "-"),
        (Match.NONE, "dictionary")]
    # Nothing undecided: no wave at all.
    again = pf.source.stats.round_trips
    assert equality_stage(ctx, [d for d in out if not d.undecided], lambda rgs: []
                          ) == [d for d in out if not d.undecided]
    assert pf.source.stats.round_trips == again


def test_page_stage_narrows_a_clustered_column(path: Path) -> None:
    pf, ctx = _ctx(path, "id >= 2550 AND id < 2650")
    footer = footer_stage(ctx)
    futility = futile_leaves(ctx, footer)
    assert futility.futile == {} and futility.suspects == {}
    pf.prefetch(page_index_ranges(ctx, [2], futility.paged))
    out = page_stage(ctx, footer, futility)
    assert [o.selection.maybe.is_empty for o in out] == [True, True, False, True]
    assert out[2].decided_by == "page index"
    # Pages of 100 rows: rows 500..700 of row group 2 may match, no other.
    assert out[2].selection.maybe.count() == 200


def test_unclustered_leaf_is_sampled_once_then_left_alone(path: Path) -> None:
    """``u`` spans the file in every row group and page: one row group's column index
    proves it, the page stage reads no other, and says why."""
    pf, ctx = _ctx(path, "u < 500000")
    footer = footer_stage(ctx)
    futility = futile_leaves(ctx, footer)
    assert list(futility.suspects) == [2] and futility.paged == (2,)
    pf.prefetch(page_index_ranges(ctx, [0, 1, 2, 3], futility.paged))
    settled = futility.settled(ctx, footer)
    assert list(settled.futile) == [2] and "not clustered" in settled.futile[2]
    parsed = [k for k in pf.derived if isinstance(k, tuple) and k[0] == "page_index"]
    assert parsed == [("page_index", 0, 2)]
    out = page_stage(ctx, footer, settled)
    assert all("page index not read" in o.reason for o in out)
    # The file keeps the decision: the next plan's estimate needs no sample.
    assert futile_leaves(ctx, footer).futile == settled.futile


def test_late_stage_consults_dictionaries_of_undecided_row_groups(path: Path) -> None:
    """Given the footer's answers alone (no equality stage), the late stage reads the
    dictionaries and decides; a row group decided before is left as it is."""
    _, ctx = _ctx(path, "s = '31'", PlanOptions(page_index=False, bloom=False))
    footer = footer_stage(ctx)
    kept = [PageOutcome(selection_of(d.match, d.num_rows), d.decided_by, d.reason)
            for d in footer]
    out = late_stage(ctx, footer, kept)
    assert [o.decided_by for o in out] == ["dictionary"] * 3 + ["-"]
    assert [o.selection.maybe.is_empty for o in out] == [True, True, True, False]


def test_embedded_stage_without_region_reads_nothing(path: Path) -> None:
    pf = ParquetFile.open(path, tail_bytes=FOOTER)
    bound = bind(parse_where("id = 5"), pf.schema)
    before = pf.source.stats.requests
    got = embedded_file_stage(pf, bound, PlanOptions(embedded=False), {}, None, [])
    assert got.region is None and got.skipped is None
    assert pf.source.stats.requests == before


def _run_stages(ctx: FileContext) -> list[PageOutcome]:
    footer = footer_stage(ctx)
    futility = futile_leaves(ctx, footer)
    paged = futility.paged
    eq = equality_stage(ctx, footer, lambda rgs: page_index_ranges(ctx, rgs, paged))
    futility = futility.settled(ctx, eq)
    return late_stage(ctx, eq, page_stage(ctx, eq, futility))


def test_stages_compose_to_plan_file(path: Path) -> None:
    """The stages run by hand give ``plan_file``'s row-group answers."""
    for where in ("id >= 2550 AND id < 2650", "s = '21' OR u < 1000", "s IN ('01', '35')"):
        pf, ctx = _ctx(path, where)
        out = _run_stages(ctx)
        plan = plan_file(ParquetFile.open(path), bind(parse_where(where), pf.schema), [0, 1, 2])
        assert [(o.decided_by, o.selection.maybe.count()) for o in out] == [
            (rg.decided_by, rg.maybe.count()) for rg in plan.row_groups], where


def test_busy_clock_counts_the_busiest_other_thread() -> None:
    """plan_seconds adds the busiest pool thread's planning to the caller's own time:
    the caller's thread is left out (its time is counted outside its waits)."""
    import threading

    from pqindex.dataset.planning import BusyClock

    clock = BusyClock()
    clock.add(5.0)  # this thread
    # Both threads alive until both added (a finished thread's id may be reused).
    barrier = threading.Barrier(2)

    def plan(seconds: list[float]) -> None:
        for x in seconds:
            clock.add(x)
        barrier.wait()

    threads = [threading.Thread(target=plan, args=(s,)) for s in ([0.25, 0.5], [1.0])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clock.critical(besides=threading.get_ident()) == 1.0
    assert clock.critical() == 5.0
    assert BusyClock().critical() == 0.0
