"""Printing plans: which level decided what for each file and row group, and why."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from pqindex.plan.planner import FilePlan, RowGroupPlan
from pqindex.scan.executor import planned_data_waves
from pqindex.scan.report import ScanReport

__all__ = ["explain_json", "explain_text"]

_MAX_PAGES_SHOWN = 12


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


def _rg_json(rg: RowGroupPlan) -> dict[str, Any]:
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
            }
            for r in rg.reads
        ],
    }


def explain_json(
    files: Sequence[tuple[Any, Any, FilePlan | None, Any]], report: ScanReport
) -> dict[str, Any]:
    out = []
    for df, _of, plan, bound in files:
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
        out.append(
            {
                "file": plan.path,
                "rows": plan.num_rows,
                "partition": plan.partition,
                "predicate": str(bound),
                "skipped": plan.skipped,
                "row_groups": [_rg_json(rg) for rg in plan.row_groups],
                "bytes_to_read": sum(r.bytes for rg in plan.row_groups for r in rg.reads),
                "data_waves": planned_data_waves(plan, bound),
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


def explain_text(files: Sequence[tuple[Any, Any, FilePlan | None, Any]], report: ScanReport) -> str:
    lines = []
    total_bytes = 0
    predicate = next((str(b) for _, _, p, b in files if b is not None), None)
    lines.append(
        f"scan of {report.files_total} file(s)" + (f" where {predicate}" if predicate else "")
    )
    for df, _of, plan, _bound in files:
        if plan is None:
            parts = ", ".join(f"{k}={v}" for k, v in df.partition)
            lines.append(f"├─ {df.path}: skipped by partition ({parts})")
            continue
        kept = [rg for rg in plan.row_groups if not rg.skipped]
        lines.append(
            f"├─ {plan.path}: {plan.num_rows:,} rows, {len(plan.row_groups)} row groups, "
            f"{len(kept)} to read"
        )
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
    lines.append(
        f"└─ will read at most {_size(total_bytes)} of data pages "
        f"(metadata read so far: {_size(report.bytes_read)})"
    )
    return "\n".join(lines)
