"""Printing plans: which level decided what for each file and row group, and why."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from pqindex.dataset.key_index import describe_lookup
from pqindex.plan.planner import FilePlan, PlanOptions, RowGroupPlan, plan_file
from pqindex.scan.batch import planned_data_waves
from pqindex.scan.report import ScanReport

__all__ = ["PAGE_MAP_LEGEND", "explain_json", "explain_text", "page_maps"]

_MAX_PAGES_SHOWN = 12

# The page map: one character per data page of a chunk.
READ, SKIPPED_BY_COLUMN_INDEX, SKIPPED_BY_EMBEDDED = "#", ".", "e"
PAGE_MAP_LEGEND = (
    f"page map: {READ} read · {SKIPPED_BY_COLUMN_INDEX} not read, ruled out by the "
    f"ColumnIndex · {SKIPPED_BY_EMBEDDED} not read, ruled out by an embedded page index"
)
PAGE_MAP_MIN_PAGES = 8  # fewer pages: the page list says it all
PAGE_MAP_WIDTH = 64
_MAX_MAPS_SHOWN = 24  # in the text output; JSON has every map
_MAX_MAP_PAGES_SHOWN = 1024

# Maps by (row group, column): the key of ``page_maps``' result.
PageMaps = dict[tuple[int, int], str]


def page_maps(of: Any, plan: FilePlan, bound: Any) -> PageMaps:
    """Per kept row group and column with a page list: one character per page.

    A page the plan does not read was skipped by the ColumnIndex, unless the plan
    without embedded indexes would read it: then an embedded page index skipped it.
    That second plan is made only when the file's embedded region was read while
    planning; every index it needs is cached by then, so it reads nothing.
    """
    maps: PageMaps = {}
    wanted = [
        (rg, r) for rg in plan.row_groups if not rg.skipped for r in rg.reads
        if r.pages is not None and r.pages_total is not None
        and r.pages_total >= PAGE_MAP_MIN_PAGES
    ]
    if not wanted:
        return maps
    without: dict[tuple[int, int], tuple[int, ...] | None] = {}
    pf = getattr(of, "pf", None)
    if pf is not None and bound is not None and pf.derived.get("region") is not None:
        columns = sorted({r.column for _rg, r in wanted})
        bare = plan_file(
            pf, bound, columns, partition=plan.partition,
            options=PlanOptions(dictionary=False, bloom=False, embedded=False),
        )
        for brg in bare.row_groups:
            for r in brg.reads:
                without[(brg.index, r.column)] = r.pages
    for rg, r in wanted:
        assert r.pages is not None and r.pages_total is not None
        read = set(r.pages)
        key = (rg.index, r.column)
        if key in without:
            plain = without[key]
            by_column_index = (set() if plain is None else set(range(r.pages_total)) - set(plain))
        else:
            by_column_index = set(range(r.pages_total)) - read
        maps[key] = "".join(
            READ if p in read
            else SKIPPED_BY_COLUMN_INDEX if p in by_column_index
            else SKIPPED_BY_EMBEDDED
            for p in range(r.pages_total)
        )
    return maps


def _map_lines(page_map: str, indent: str) -> list[str]:
    shown = page_map[:_MAX_MAP_PAGES_SHOWN]
    lines = [f"{indent}{shown[i:i + PAGE_MAP_WIDTH]}" for i in range(0, len(shown), PAGE_MAP_WIDTH)]
    if len(page_map) > len(shown):
        lines.append(f"{indent}… (+{len(page_map) - len(shown)} pages)")
    return lines


def _pages(pages: tuple[int, ...] | None, total: int | None) -> str:
    if pages is None:
        return f"whole chunk ({total} pages)" if total is not None else "whole chunk"
    shown = ", ".join(str(p) for p in pages[:_MAX_PAGES_SHOWN])
    more = f", … (+{len(pages) - _MAX_PAGES_SHOWN})" if len(pages) > _MAX_PAGES_SHOWN else ""
    of = f" of {total}" if total is not None else ""
    return f"pages [{shown}{more}]{of}"


def _size(n: int) -> str:
    x = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if x < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{n} B"


def _rg_json(rg: RowGroupPlan, maps: PageMaps) -> dict[str, Any]:
    return {
        "row_group": rg.index,
        "rows": rg.num_rows,
        "match": rg.match.name,
        "decided_by": rg.decided_by,
        "reason": rg.reason,
        "rows_may_match": rg.maybe.count(),
        "rows_all_match": rg.all.count(),
        "row_ranges": [list(r) for r in rg.maybe.intervals()[:1000]],
        "reads": [
            {
                "column": r.name,
                "pages": list(r.pages) if r.pages is not None else None,
                "pages_total": r.pages_total,
                "bytes": r.bytes,
                "page_map": maps.get((rg.index, r.column)),
            }
            for r in rg.reads
        ],
    }


def explain_json(
    files: Sequence[tuple[Any, Any, FilePlan | None, Any]], report: ScanReport
) -> dict[str, Any]:
    out = []
    for df, of, plan, bound in files:
        if plan is None:
            out.append(
                {
                    "file": df.path,
                    "skipped_by": "partition",
                    "partition": dict(df.partition),
                    "row_groups": [],
                }
            )
            continue
        maps = page_maps(of, plan, bound)
        out.append(
            {
                "file": plan.path,
                "rows": plan.num_rows,
                "partition": plan.partition,
                "predicate": str(bound),
                "skipped": plan.skipped,
                **({"skipped_by": plan.skipped_by} if plan.skipped_by is not None else {}),
                "row_groups": [_rg_json(rg, maps) for rg in plan.row_groups],
                "bytes_to_read": sum(r.bytes for rg in plan.row_groups for r in rg.reads),
                "data_waves": planned_data_waves(plan, bound),
                "stages": list(plan.stages),
            }
        )
    summary = report.to_dict()
    # Metadata waves already taken, then the files' data waves side by side.
    summary["data_waves"] = max((f.get("data_waves", 0) for f in out), default=0)
    return {"files": out, "summary": summary}


def _skip_key(rg: RowGroupPlan) -> tuple[str, str] | None:
    return (rg.decided_by, rg.reason) if rg.skipped else None


def _skipped_line(run: Sequence[RowGroupPlan]) -> str:
    """One line for consecutive row groups skipped by the same level for the same reason."""
    first, last = run[0], run[-1]
    which = (f"row group {first.index}" if len(run) == 1
             else f"row groups {first.index}–{last.index}")
    return f"│  ├─ {which}: skipped by {first.decided_by} — {first.reason}"


def explain_text(files: Sequence[tuple[Any, Any, FilePlan | None, Any]], report: ScanReport,
                 source: str | None = None) -> str:
    """``source``: where the files came from (``Dataset.source_description``)."""
    lines = []
    total_bytes = 0
    predicate = next((str(b) for _, _, p, b in files if b is not None), None)
    lines.append(
        f"scan of {report.files_total} file(s)" + (f" where {predicate}" if predicate else "")
    )
    if source is not None:
        lines.append(f"files: {source}")
    if report.table is not None:
        ruled_out = report.files_skipped.get("table statistics", 0)
        lines.append(f"{report.table}: {ruled_out} file(s) ruled out by the table's statistics")
    if report.key_index is not None:
        lines.append(describe_lookup(report.key_index))
    maps_shown = maps_left_out = 0
    for df, of, plan, bound in files:
        if plan is None:
            parts = ", ".join(f"{k}={v}" for k, v in df.partition)
            lines.append(f"├─ {df.path}: skipped by partition ({parts})")
            continue
        if plan.skipped_by is not None:  # decided before the file was opened
            lines.append(f"├─ {df.path}: skipped by {plan.skipped_by} — {plan.reason}")
            continue
        kept = [rg for rg in plan.row_groups if not rg.skipped]
        maps = page_maps(of, plan, bound)
        lines.append(
            f"├─ {plan.path}: {plan.num_rows:,} rows, {len(plan.row_groups)} row groups, "
            f"{len(kept)} to read"
        )
        if plan.stages:
            lines.append(f"│  planner: {' → '.join(plan.stages)}")
        for skip, group in itertools.groupby(plan.row_groups, key=_skip_key):
            run = list(group)
            if skip is not None:  # consecutive row groups skipped alike: one line
                lines.append(_skipped_line(run))
                continue
            for rg in run:
                how = (
                    "all rows match"
                    if rg.all.count() == rg.num_rows
                    else (
                        f"{rg.maybe.count():,} of {rg.num_rows:,} rows may match"
                        + (f", {rg.all.count():,} surely" if rg.all.count() else "")
                    )
                )
                lines.append(
                    f"│  ├─ row group {rg.index}: {how} ({rg.decided_by}: {rg.reason})"
                )
                for r in rg.reads:
                    total_bytes += r.bytes
                    lines.append(
                        f"│  │  └─ {r.name}: {_pages(r.pages, r.pages_total)}, "
                        f"≤ {_size(r.bytes)}"
                    )
                    page_map = maps.get((rg.index, r.column))
                    if page_map is None:
                        continue
                    if maps_shown < _MAX_MAPS_SHOWN:
                        maps_shown += 1
                        lines += _map_lines(page_map, "│  │       ")
                    else:
                        maps_left_out += 1
    if maps_left_out:
        lines.append(f"│  ({maps_left_out} more page maps in the JSON output)")
    if maps_shown:
        lines.append(f"│  {PAGE_MAP_LEGEND}")
    lines.append(
        f"└─ will read at most {_size(total_bytes)} of data pages "
        f"(metadata read so far: {_size(report.bytes_read)})"
    )
    return "\n".join(lines)
