"""Building a file's embedded index region from its values.

Used when pqindex writes a file (the table is at hand) and when indexing a file
another writer produced (the columns are read back with pyarrow, one at a time).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pqindex.errors import UserInputError
from pqindex.format.file import ParquetFile
from pqindex.format.schema import LeafColumn
from pqindex.indexes.base import REGISTRY, Blob, Scope
from pqindex.indexes.region import encode_region
from pqindex.io.pyfile import for_pyarrow

__all__ = ["build_blobs", "build_region", "column_values", "leaf_for", "place_blobs", "unit_bounds"]


def leaf_for(pf: ParquetFile, name: str) -> LeafColumn:
    """The flat leaf column ``name`` (embedded indexes cover one value per row)."""
    leaf = pf.schema.leaf(name)
    if leaf is None:
        names = ", ".join(c.name for c in pf.schema.leaves[:20])
        raise UserInputError(f"no leaf column {name!r} to index (columns: {names})", path=pf.path)
    if leaf.nested:
        raise UserInputError(
            "embedded indexes need one value per row; this column is inside a list or map",
            path=pf.path,
            column=name,
        )
    return leaf


def column_values(pf: ParquetFile, table: pa.Table | None, leaf: LeafColumn) -> pa.Array:
    """The leaf's values for the whole file: from ``table`` when given, else read back."""
    top = leaf.path[0]
    if table is not None and top in table.column_names:
        arr: Any = table.column(top)
    else:
        arr = pq.read_table(for_pyarrow(pf.path, pf.source), columns=[top]).column(0)
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    for name in leaf.path[1:]:
        # Struct parents' nulls make the leaf null, as a reader sees it.
        arr = arr.flatten()[arr.type.get_field_index(name)]
    return arr


def unit_bounds(pf: ParquetFile, leaf: LeafColumn) -> tuple[list[tuple[int, int]], list[list[tuple[int, int]]] | None]:
    """Row groups' and pages' [start, end) positions in the whole-file column."""
    rgs = []
    pages: list[list[tuple[int, int]]] | None = []
    start = 0
    for rg in range(pf.num_row_groups):
        n = pf.row_group_rows(rg)
        rgs.append((start, start + n))
        rows = pf.page_rows(rg, leaf.index)
        if rows is None or pages is None:
            pages = None
        else:
            spans = []
            s = start
            for r in rows:
                spans.append((s, s + r))
                s += r
            pages.append(spans)
        start += n
    return rgs, pages


def build_blobs(
    pf: ParquetFile,
    table: pa.Table | None,
    indexes: Mapping[str, Sequence[str]],
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Blob]:
    """Blobs of every (kind, column) in ``indexes`` for the file ``pf`` describes, in
    the order they are best placed in the region (``_placement``)."""
    blobs: list[Blob] = []
    cache: dict[str, pa.Array] = {}
    for kind_name, columns in indexes.items():
        factory = REGISTRY.get(kind_name)
        if factory is None:
            known = ", ".join(sorted(REGISTRY))
            raise UserInputError(f"unknown index kind {kind_name!r} (kinds: {known})")
        kind = factory()
        opts = dict((options or {}).get(kind_name, {}))
        for name in columns:
            leaf = leaf_for(pf, name)
            if name not in cache:
                cache[name] = column_values(pf, table, leaf)
            rgs, pages = unit_bounds(pf, leaf)
            blobs += kind.build(leaf, cache[name], rgs, pages, opts)
    return place_blobs(blobs)


def place_blobs(blobs: list[Blob]) -> list[Blob]:
    """``blobs`` in the order they are best placed in the region (``_placement``)."""
    return sorted(blobs, key=_placement)


_SCOPE_RANK = {Scope.PAGE: 0, Scope.ROW_GROUP: 1, Scope.FILE: 2}


def _placement(b: Blob) -> tuple[Any, ...]:
    """Where a blob goes in the region: what planning reads first lies last.

    The region ends next to the footer, inside the tail a reader fetches first:
    file-scope blobs (small ones last) sit there, then row-group blobs, then page
    blobs; blobs that never give evidence (HyperLogLog sketches) come first. The
    blobs of one column and scope are contiguous (in row group, page, kind order),
    so a reader fetches neighbours together.
    """
    factory = REGISTRY.get(b.kind)
    gives = factory is not None and bool(getattr(factory, "gives_evidence", True))
    scope = Scope(b.scope)
    size = -len(b.data) if scope == Scope.FILE else 0
    return (gives, _SCOPE_RANK[scope], size, b.column, b.row_group if b.row_group is not None
            else -1, b.page if b.page is not None else -1, b.kind)


def build_region(
    pf: ParquetFile,
    table: pa.Table | None,
    indexes: Mapping[str, Sequence[str]],
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> bytes | None:
    """The encoded region for ``indexes``, or None when there is nothing to embed."""
    blobs = build_blobs(pf, table, indexes, options)
    return encode_region(blobs) if blobs else None
