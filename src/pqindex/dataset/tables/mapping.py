"""Column names a table maps: a data file's columns read under the table's names.

Iceberg binds columns by field id (``rename_by_field_id``): a file's column takes the
current name of its field id, so a renamed column is found under its new name and a
dropped one (even if a new column took its name) is not.

Delta column mapping:

Under ``delta.columnMapping.mode`` (``name`` or ``id``) the files name their columns
by physical names (``col-<uuid>``) that the log maps to the logical names users see.
A file of such a table is opened as any other, then its decoded footer is renamed:
the top-level schema elements and each column chunk's ``path_in_schema`` take the
logical names, the footer bytes are encoded again from it and the ``ARROW:schema``
entry (written with the physical names) is dropped. Every later step — binding the
predicate, planning, pyarrow's reads of the real file through that footer — then sees
the logical names; the bytes of the file are untouched and the metadata cache keeps
the real footer (only this open file is renamed). pqindex's embedded indexes in the
file keep the physical names: the file's region is asked by the logical ones
(``Region.alias_columns``), so its Bloom filters, zone maps and sets are used.
"""

from __future__ import annotations

from collections.abc import Mapping

from pqindex.format.file import ParquetFile
from pqindex.format.schema import Schema
from pqindex.format.thrift import encode

__all__ = ["field_ids", "rename_by_field_id", "rename_columns"]


# A file column that is no physical name of the table is read as absent (as the
# protocol's readers resolve columns by physical name): it gets a name no query uses.
UNMAPPED = "__pqindex_unmapped__"


def _top_level(elements: list) -> list[int]:  # type: ignore[type-arg]
    """The indexes of the root's children, walked by their child counts."""
    i, top = 1, []
    while i < len(elements):
        top.append(i)
        i = _skip(elements, i)
    return top


def field_ids(pf: ParquetFile) -> dict[str, int] | None:
    """The file's top-level column names -> field ids, or None when a column has none."""
    elements = pf.metadata.schema or []
    out = {}
    for at in _top_level(elements):
        el = elements[at]
        if el.field_id is None:
            return None
        out[el.name or ""] = el.field_id
    return out


def rename_by_field_id(pf: ParquetFile, names: Mapping[int, str]) -> bool:
    """Rename ``pf``'s top-level columns to ``names[field id]`` (Iceberg: columns are
    bound by field id, so a renamed column is found and a dropped one is not); False,
    renaming nothing, when some column has no field id."""
    ids = field_ids(pf)
    if ids is None:
        return False
    rename_columns(pf, {name: names[i] for name, i in ids.items() if i in names})
    return True


def rename_columns(pf: ParquetFile, logical: Mapping[str, str]) -> None:
    """Rename ``pf``'s top-level columns by ``logical`` (every physical name of the
    table -> its logical name); other top-level columns become unreachable."""
    md = pf.metadata
    elements = md.schema or []
    if not elements:
        return
    top = _top_level(elements)
    logical = {**{(elements[at].name or ""): UNMAPPED + (elements[at].name or "")
                  for at in top}, **logical}
    changed = False
    for at in top:
        el = elements[at]
        new = logical.get(el.name or "")
        if new is not None and new != el.name:
            el.name = new
            changed = True
    if not changed:
        return
    for rg in md.row_groups or []:
        for cc in rg.columns or []:
            meta = cc.meta_data
            if meta is not None and meta.path_in_schema:
                head = logical.get(meta.path_in_schema[0])
                if head is not None:
                    meta.path_in_schema = [head, *meta.path_in_schema[1:]]
    if md.key_value_metadata:
        md.key_value_metadata = [kv for kv in md.key_value_metadata if kv.key != "ARROW:schema"]
    pf.footer_bytes = encode(md)
    pf.schema = Schema.from_elements(elements, md.column_orders)
    pf.derived.clear()
    # The embedded indexes name the columns as the file does: asked by the new names.
    pf.derived["column_aliases"] = {new: old for old, new in logical.items()}


def _skip(elements: list, i: int) -> int:  # type: ignore[type-arg]
    """The index after element ``i`` and all its descendants."""
    n = elements[i].num_children or 0
    i += 1
    for _ in range(n):
        i = _skip(elements, i)
    return i
