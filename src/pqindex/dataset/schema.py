"""One Arrow schema for the files of a dataset, by pyarrow's unification rules.

Files written at different times may disagree on a column's type. The dataset's
schema is ``pyarrow.unify_schemas(..., promote_options="permissive")`` of the
files' schemas: integers widen (int32 + int64 -> int64), integers and floats
become floats, string + large_string -> large_string, timestamps take the finer
unit, a column missing from some files is NULL there. Types that do not
reconcile (int64 and string, say) raise ``UserInputError`` naming the column and
both files. A view type and its non-view counterpart (``string_view`` and
``string``) give the large type (``large_string``).

A hive key (``key=value/``) that is also a column of the files is not a
partition column: the file's column wins, and the directory's value is ignored
(neither used to prune nor checked against the rows); see docs/semantics.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from pqindex.errors import UserInputError
from pqindex.format import views

__all__ = ["conform", "unify"]

_UNIFY_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)


def _unify(schemas: list[pa.Schema]) -> pa.Schema:
    try:
        return pa.unify_schemas(schemas, promote_options="permissive")
    except _UNIFY_ERRORS:
        # pyarrow does not unify a view with its non-view type (string_view written by
        # arrow-rs, string by pyarrow): views as large types, as string and
        # large_string unify. A lake of views alone keeps them (the first attempt).
        unviewed = [views.computable_schema(s) for s in schemas]
        if all(u is s for u, s in zip(unviewed, schemas, strict=True)):
            raise
        return pa.unify_schemas(unviewed, promote_options="permissive")


def unify(named: Sequence[tuple[str, pa.Schema]]) -> pa.Schema:
    """The unified schema of ``(path, schema)`` pairs, fields in first-seen order."""
    if len(named) == 1:
        return named[0][1]
    try:
        return _unify([s for _, s in named])
    except _UNIFY_ERRORS as e:
        seen: dict[str, tuple[str, pa.Field]] = {}
        for path, schema in named:
            for f in schema:
                if f.name not in seen:
                    seen[f.name] = (path, f)
                    continue
                first_path, first = seen[f.name]
                try:
                    merged = _unify([pa.schema([first]), pa.schema([f])])
                except _UNIFY_ERRORS:
                    raise UserInputError(
                        f"column {f.name!r} is {first.type} in {first_path} but {f.type} "
                        f"in {path}; the types do not reconcile",
                        column=f.name,
                    ) from None
                seen[f.name] = (first_path, merged.field(0))
        raise UserInputError(f"the files' schemas do not reconcile: {e}") from None


def conform(table: pa.Table, schema: pa.Schema, path: str | None = None) -> pa.Table:
    """``table`` (one file's rows) as ``schema``: columns in its order, missing ones
    NULL, types cast to the unified ones."""
    if table.schema.equals(schema):
        return table
    columns = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            if col.type != f.type:
                try:
                    col = views.cast(col, f.type)
                except _UNIFY_ERRORS as e:
                    raise UserInputError(
                        f"column {f.name!r} of type {col.type} does not convert to the "
                        f"dataset's {f.type}: {e}", path=path, column=f.name) from None
            columns.append(col)
        else:
            columns.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=schema)
