"""The contract between embedded index kinds, their builders, and the planner.

An index kind turns column values into a blob when a file is written (or
indexed later), and turns a blob back into evidence the planner can use. The
planner only ever sees ``Evidence`` objects (``match(pred) -> Match``) for a
scope — the whole file, one row group, or one page — so adding a kind touches
no planner code: register it here and it is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Protocol

import pyarrow as pa

from pqindex.format.schema import LeafColumn

__all__ = ["REGISTRY", "Blob", "IndexKind", "Scope", "register"]


class Scope(StrEnum):
    FILE = "file"
    ROW_GROUP = "row_group"
    PAGE = "page"


@dataclass(frozen=True)
class Blob:
    """One entry of the embedded region: what it indexes and its bytes."""

    kind: str
    column: str  # dotted leaf path
    scope: Scope
    row_group: int | None  # None for file scope
    page: int | None  # None unless page scope
    data: bytes
    properties: Mapping[str, Any] = field(default_factory=dict)


class IndexKind(Protocol):
    """A kind of embedded index (distinct values, file Bloom filter, zone maps, HLL)."""

    name: ClassVar[str]

    def build(
        self,
        leaf: LeafColumn,
        column: pa.Array,
        row_group_bounds: list[tuple[int, int]],
        page_bounds: list[list[tuple[int, int]]] | None,
        options: Mapping[str, Any],
    ) -> list[Blob]:
        """Blobs for one leaf column of a file.

        ``column`` holds the leaf's values for the whole file (flat columns);
        ``row_group_bounds[i]`` is row group i's [start, end) in it and
        ``page_bounds[i]`` its pages' [start, end) rows (None when unknown),
        also as positions in ``column`` (not relative to the row group).
        """
        ...

    def evidence(self, leaf: LeafColumn, blob: Blob) -> Any:
        """An object with ``match(pred) -> Match`` for the blob's scope, or None.

        A kind whose blobs never give evidence sets the class attribute
        ``gives_evidence = False``: ``Region.evidence`` then never reads them.
        """
        ...


REGISTRY: dict[str, Callable[[], IndexKind]] = {}


def register(kind: Callable[[], IndexKind]) -> Callable[[], IndexKind]:
    """Class decorator: make a kind known by its ``name``."""
    REGISTRY[kind.name] = kind  # type: ignore[attr-defined]
    return kind
