"""What a scan did: per level, what was considered, skipped and read."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ScanReport"]


@dataclass
class ScanReport:
    """Counters of one scan; ``to_dict()`` is the stable, JSON-ready form.

    ``pages_total`` counts the data pages of the columns the scan involves in every
    row group of every opened file, skipped ones included (from the offset index when
    it was read, else the footer's encoding stats, else one per chunk);
    ``bytes_read`` and ``requests`` count every request the scan caused: the LIST
    pages, probe and manifest GET of the dataset's first scan, and every read of
    every file, footers included; ``round_trips`` is the number of sequential waves
    of requests the scan waited for: each LIST page (pages follow one another; the
    manifest GET rides with the first), a manifest GET made on its own, then per
    file, a wave is one batch of ranges issued together; files planned or read
    concurrently count as their slowest one (the critical path).
    """

    files_total: int = 0
    files_skipped: Counter[str] = field(default_factory=Counter)
    files_read: int = 0
    row_groups_total: int = 0
    row_groups_skipped: Counter[str] = field(default_factory=Counter)
    row_groups_read: int = 0
    pages_total: int = 0
    pages_read: int = 0
    rows_total: int = 0
    rows_matched: int = 0
    bytes_read: int = 0
    requests: int = 0
    round_trips: int = 0
    data_bytes: int = 0
    # Row groups of small local files planned without their dictionaries: the ones
    # checked before had not ruled rows out (dataset/planning.DictionaryUse).
    dictionaries_unchecked: int = 0
    plan_seconds: float = 0.0
    fetch_seconds: float = 0.0
    decode_seconds: float = 0.0
    total_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    # The table snapshot planned ("Delta table <root>, version 3, 12 files"), if any.
    table: str | None = None
    # What the manifest's key index said (dataset/key_index.KeyLookup.to_dict), if used.
    key_index: dict[str, Any] | None = None

    def merge(self, other: ScanReport) -> None:
        """Add the counters of ``other``, a scan that ran after this one (its waves
        follow these: round trips add up); a warning both have is kept once."""
        for name in ("files_total", "files_read", "row_groups_total", "row_groups_read",
                     "pages_total", "pages_read", "rows_total", "rows_matched", "bytes_read",
                     "requests", "round_trips", "data_bytes", "dictionaries_unchecked",
                     "plan_seconds", "fetch_seconds", "decode_seconds", "total_seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.files_skipped.update(other.files_skipped)
        self.row_groups_skipped.update(other.row_groups_skipped)
        self.warnings += [w for w in other.warnings if w not in self.warnings]
        self.table = self.table or other.table
        self.key_index = self.key_index or other.key_index

    def to_dict(self) -> dict[str, Any]:
        return {
            "files_total": self.files_total,
            "files_read": self.files_read,
            "files_skipped": dict(self.files_skipped),
            "row_groups_total": self.row_groups_total,
            "row_groups_read": self.row_groups_read,
            "row_groups_skipped": dict(self.row_groups_skipped),
            "pages_total": self.pages_total,
            "pages_read": self.pages_read,
            "rows_total": self.rows_total,
            "rows_matched": self.rows_matched,
            "bytes_read": self.bytes_read,
            "requests": self.requests,
            "round_trips": self.round_trips,
            "data_bytes": self.data_bytes,
            "dictionaries_unchecked": self.dictionaries_unchecked,
            "plan_seconds": round(self.plan_seconds, 6),
            "fetch_seconds": round(self.fetch_seconds, 6),
            "decode_seconds": round(self.decode_seconds, 6),
            "total_seconds": round(self.total_seconds, 6),
            "warnings": list(self.warnings),
            **({"table": self.table} if self.table is not None else {}),
            **({"key_index": self.key_index} if self.key_index is not None else {}),
        }

    def __str__(self) -> str:
        d = self.to_dict()
        skipped_rg = ", ".join(f"{k} {v}" for k, v in self.row_groups_skipped.items()) or "none"
        return (
            f"files {d['files_read']}/{d['files_total']} read, "
            f"row groups {d['row_groups_read']}/{d['row_groups_total']} read "
            f"(skipped by {skipped_rg}), pages {d['pages_read']}/{d['pages_total']} read, "
            f"{d['rows_matched']:,} rows, {d['bytes_read']:,} bytes in {d['requests']} requests, "
            f"{d['round_trips']} round trips"
        )
