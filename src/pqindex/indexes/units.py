"""The units a builder indexes: the file, each row group, each page, as row spans."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pqindex.errors import UserInputError
from pqindex.indexes.base import Scope

__all__ = ["Unit", "scopes_option", "units"]


@dataclass(frozen=True, slots=True)
class Unit:
    """Rows [start, end) of the column array that one blob describes."""

    scope: Scope
    row_group: int | None
    page: int | None
    start: int
    end: int

    @property
    def rows(self) -> int:
        return self.end - self.start


def scopes_option(options: Mapping[str, Any], default: Sequence[Scope]) -> frozenset[Scope]:
    """The ``scopes`` option ("file", "row_group", "page"); UserInputError for others."""
    raw = options.get("scopes", default)
    if isinstance(raw, str):
        raw = [raw]
    try:
        return frozenset(Scope(s) for s in raw)
    except ValueError:
        raise UserInputError(f"scopes must be among file, row_group, page, not {raw!r}"
                             ) from None


def units(num_rows: int, row_group_bounds: Sequence[tuple[int, int]],
          page_bounds: Sequence[Sequence[tuple[int, int]]] | None,
          scopes: frozenset[Scope]) -> Iterator[Unit]:
    """File, row-group and page units, in that order, for the wanted scopes.

    Row-group and page bounds are positions in the whole-file column array; each
    page must lie inside its row group (a UserInputError otherwise, which is also
    what bounds relative to the row group would usually trip).
    """
    if Scope.FILE in scopes:
        yield Unit(Scope.FILE, None, None, 0, num_rows)
    for rg, (start, end) in enumerate(row_group_bounds):
        if not 0 <= start <= end <= num_rows:
            raise UserInputError(f"row group {rg} bounds [{start}, {end}) outside the "
                                 f"column's {num_rows} rows", row_group=rg)
        if Scope.ROW_GROUP in scopes:
            yield Unit(Scope.ROW_GROUP, rg, None, start, end)
        if Scope.PAGE in scopes and page_bounds is not None and rg < len(page_bounds):
            for page, (p_start, p_end) in enumerate(page_bounds[rg]):
                if not start <= p_start <= p_end <= end:
                    raise UserInputError(
                        f"page {page} bounds [{p_start}, {p_end}) outside row group {rg} "
                        f"[{start}, {end}) (page bounds are positions in the file's column)",
                        row_group=rg)
                yield Unit(Scope.PAGE, rg, page, p_start, p_end)
