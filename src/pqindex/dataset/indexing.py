"""Indexing many files: what ``pqindex.add_indexes`` does above the file level.

``write.add_indexes.index_file`` rewrites one file's tail; here the files a call
names are sorted into plain files and those of lake tables (``dataset.tables``):
a Delta table's files are indexed by a commit, an Iceberg table given as a
pyiceberg Table by a commit, other tables are refused before anything changes.
A directory indexed as a whole then gets its dataset manifest written anew
(``dataset/manifest.py``), on local disks and object stores alike. Kept above
``write/``: tables and manifests are the dataset layer's knowledge.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pqindex.dataset.manifest import write_manifest
from pqindex.dataset.tables.commit import index_delta_table, index_iceberg_table
from pqindex.dataset.tables.delta import load_delta
from pqindex.dataset.tables.detect import TableFormat, find_table, find_table_remote
from pqindex.errors import UnsupportedError, UserInputError, public_api
from pqindex.write.add_indexes import (
    DEFAULT_BLOOM_SCOPE,
    IndexResult,
    IndexTarget,
    PageIndexMode,
    Paths,
    Progress,
    bloom_scopes,
    column_names,
    index_file,
    index_targets,
    requested_kinds,
    truncation_cap,
)

__all__ = ["TableTargets", "add_indexes", "add_indexes_remote", "index_table_targets",
           "refresh_manifest", "split_remote_tables", "split_table_targets"]


@dataclass(frozen=True)
class TableTargets:
    """The files of one Delta table to index by commit (``files`` None: every active one)."""

    root: str
    files: tuple[str, ...] | None


def split_remote_tables(paths: Sequence[str], targets: Sequence[str],
                  storage_options: Mapping[str, Any] | None
                  ) -> tuple[list[str], dict[str, tuple[str, ...] | None]]:
    """``targets`` split into plain objects and, per Delta table root, the objects of it
    asked for (None: the whole table, given at or above its root). An object of
    another table format raises UnsupportedError before any object changes: its
    manifests record the object's size, and pqindex makes no commit to it."""
    cache: dict[str, Any] = {}
    plain: list[str] = []
    tables: dict[str, list[str]] = {}
    # A path given at or below a table's root: its objects are that table's (no LIST
    # per partition directory of a thousand-file table).
    given_roots = [t for t in (find_table_remote(p, storage_options, cache) for p in paths)
                   if t is not None]
    for url in targets:
        table = next((t for t in given_roots if url.startswith(t.root + "/")), None)
        if table is None:
            table = find_table_remote(url, storage_options, cache)
        if table is None:
            plain.append(url)
        elif table.format is TableFormat.DELTA:
            tables.setdefault(table.root, []).append(url)
        else:
            raise UnsupportedError(
                f"a {table.format.value.capitalize()} table: pqindex commits indexes to "
                "Delta tables only there (an Iceberg table: pass its pyiceberg Table); no "
                "object was changed", path=table.root)
    given = [p.rstrip("/") for p in paths if not p.endswith(".parquet")]
    whole = {root: None if any(root == g or root.startswith(g + "/") for g in given)
             else tuple(found) for root, found in tables.items()}
    return plain, whole



def add_indexes_remote(
    paths: Sequence[str],
    *,
    distinct: str | Iterable[str] = (),
    bloom: str | Iterable[str] = (),
    zone_maps: str | Iterable[str] = (),
    hll: str | Iterable[str] = (),
    truncate: bool | int = True,
    page_index: PageIndexMode = "keep",
    drop: bool = False,
    progress: Progress | None = None,
    storage_options: Mapping[str, Any] | None = None,
    indexes: Mapping[str, str | Sequence[str]] | None = None,
    bloom_scope: str | Iterable[str] = DEFAULT_BLOOM_SCOPE,
) -> list[IndexResult]:
    """``add_indexes`` for object-store URLs (in place only; no ``output``): plain
    objects are replaced (``write.remote_index.index_object``), the objects of a Delta
    table are indexed as copies and one commit, another table's are refused; a prefix
    indexed as a whole gets its manifest written anew."""
    # Imported here: object-store writing pulls in urllib / xml (~60 ms at import).
    from pqindex.write.remote_index import index_object, index_object_copy, remote_targets

    options = {"bloom": {"scopes": bloom_scopes(bloom_scope)}}
    kinds = requested_kinds(indexes, distinct=distinct, bloom=bloom, zone_maps=zone_maps, hll=hll)
    if page_index not in ("keep", "add"):
        raise UserInputError(f"page_index must be 'keep' or 'add', not {page_index!r}")
    if drop and (kinds or page_index == "add"):
        raise UserInputError(
            "drop removes the embedded indexes; it takes no index kinds and no page_index='add'")
    cap = truncation_cap(truncate)
    targets, tables = split_remote_tables(paths, remote_targets(paths, storage_options),
                                    storage_options)
    results: list[IndexResult] = []
    for root, only in tables.items():
        # Files of a Delta table: indexed copies under new names, then one commit.
        # Under column mapping the files name columns by their physical names.
        physical = load_delta(root, storage_options=storage_options).physical
        mapped = _physical_columns({"indexes": kinds}, physical).get("indexes", kinds)
        done, _version = index_delta_table(
            root, functools.partial(index_object_copy, kinds=mapped, cap=cap, page_index=page_index,
                                    drop=drop, storage_options=storage_options,
                                    options=options),
            only=only, storage_options=storage_options, progress=progress)
        results += done
    for url in targets:
        results.append(index_object(url, kinds=kinds, cap=cap, page_index=page_index, drop=drop,
                                    storage_options=storage_options, options=options))
        if progress is not None:
            progress(len(results), len(targets), results[-1])
    if (len(paths) == 1 and not paths[0].endswith(".parquet") and targets != [paths[0]]
            and not tables):
        write_manifest(paths[0], storage_options)
    return results


def _refuse_table(fmt: str, root: str, why: str) -> UnsupportedError:
    return UnsupportedError(
        f"a {fmt} table: {why}; no file was changed (its log or manifests record each "
        "file's size, so rewriting one in place would break the table)", path=root)


def split_table_targets(paths: Paths, targets: Sequence[IndexTarget],
                        output: str | os.PathLike[str] | None = None
                        ) -> tuple[list[IndexTarget], list[TableTargets]]:
    """``targets`` split into plain files and the Delta tables some of them belong to.

    A file of a lake table (found by walking up to the table's root,
    ``dataset.tables.detect``) is never rewritten in place: the files of a Delta
    table are indexed by a commit (``index_table_targets``); with ``output``, only its
    active files are copied (the table itself is not changed). Iceberg, Hudi and
    Paimon tables, where pqindex makes no commit, raise an UnsupportedError before
    anything is written."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    given_dirs = [os.path.realpath(os.fspath(p)) for p in items if os.path.isdir(os.fspath(p))]
    cache: dict[str, Any] = {}
    plain: list[IndexTarget] = []
    by_root: dict[str, list[IndexTarget]] = {}
    for t in targets:
        table = find_table(t.source, cache)
        if table is None:
            plain.append(t)
            continue
        if table.format is TableFormat.ICEBERG:
            raise _refuse_table("Iceberg", table.root, "its commits go through its catalog: "
                                "pass the pyiceberg Table (catalog.load_table(...)) to "
                                "pqindex.add_indexes to index it by a commit")
        if table.format is not TableFormat.DELTA:
            raise _refuse_table(table.format.value.capitalize(), table.root,
                                "pqindex cannot commit indexes to it")
        by_root.setdefault(table.root, []).append(t)
    tables = []
    for root, found in by_root.items():
        real = os.path.realpath(root)
        whole = any(real == d or real.startswith(d.rstrip(os.sep) + os.sep) for d in given_dirs)
        files = None if whole else tuple(t.source for t in found)
        if output is None:
            tables.append(TableTargets(root, files))
            continue
        active = {os.path.realpath(f.path) for f in load_delta(root).files}
        plain += [t for t in found if os.path.realpath(t.source) in active]
    return plain, tables


def index_table_targets(tables: Sequence[TableTargets], progress: Progress | None = None,
                        **options: Any) -> list[IndexResult]:
    """Index the files of Delta tables as one commit per table (``dataset.tables.commit``);
    ``options`` are :func:`index_file`'s."""
    results: list[IndexResult] = []
    for table in tables:
        # Under column mapping the files name columns by physical names: the columns
        # asked for (logical names) are indexed under them.
        physical = load_delta(table.root).physical
        done, _version = index_delta_table(
            table.root, functools.partial(_index_copy, _physical_columns(options, physical)),
            only=table.files, progress=progress)
        results += done
    return results


def _index_copy(options: dict[str, Any], source: str, output: str) -> IndexResult:
    return index_file(source, output=output, **options)


def _physical_columns(options: dict[str, Any], physical: Mapping[str, str]) -> dict[str, Any]:
    """``index_file``'s options with each column named (top-level logical name) by its
    physical name in the files."""
    def one(name: str) -> str:
        head, dot, rest = name.partition(".")
        return physical.get(head, head) + dot + rest

    def names(value: Any) -> list[str]:
        return [one(n) for n in column_names(value)]

    if not any(k != v for k, v in physical.items()):
        return options
    out = dict(options)
    for key in ("distinct", "bloom", "zone_maps", "hll"):
        if out.get(key):
            out[key] = names(out[key])
    if out.get("indexes"):
        out["indexes"] = {kind: names(cols) for kind, cols in out["indexes"].items()}
    return out


# ---------------------------------------------------------------- many files


@public_api
def add_indexes(
    paths: Paths,
    *,
    distinct: str | Iterable[str] = (),
    bloom: str | Iterable[str] = (),
    zone_maps: str | Iterable[str] = (),
    hll: str | Iterable[str] = (),
    truncate: bool | int = True,
    page_index: PageIndexMode = "keep",
    output: str | os.PathLike[str] | None = None,
    drop: bool = False,
    progress: Progress | None = None,
    indexes: Mapping[str, str | Sequence[str]] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    bloom_scope: str | Iterable[str] = DEFAULT_BLOOM_SCOPE,
) -> list[IndexResult]:
    """Embed indexes into existing Parquet files, in place or into ``output``.

    ``paths``: files, directories (walked recursively, names starting with ``_``
    or ``.`` skipped), or a list of them; or a pyiceberg ``Table``. Files of a
    Delta table, and an Iceberg table given as a Table, are indexed by a table
    commit (``dataset/tables/commit.py``); files of other tables are refused. ``distinct``/``bloom``/``zone_maps``/
    ``hll`` name the flat columns each embedded index kind covers; the new region
    replaces the file's old one (a call naming no kind keeps it). ``truncate``
    cuts ColumnIndex string bounds to 64 bytes (an int sets the cap, False keeps
    them). ``page_index="add"`` writes a ColumnIndex and OffsetIndex into chunks
    without one (see the module doc for what is skipped and why). ``output``
    writes each result under the directory instead, at its name relative to the
    directory given. ``drop=True`` removes the embedded region and nothing else.
    ``progress(done, total, result)`` is called after each file. ``indexes``
    maps any registered index kind to its columns (``{"distinct": ["country"]}``);
    the per-kind keywords are the older spelling of the same.

    Files are processed in order; the first error stops the run (files already
    done stay done) and raises a PqIndexError naming the file. A directory given
    alone then gets its dataset manifest (``_pqindex_manifest.json``) written anew.

    Object-store URLs (``storage_options`` configure the store) are indexed in
    place: each object is replaced only if unchanged since it was read
    (``write.remote_index``; on S3 the data pages are copied by the store, on Azure
    and GCS the object is kept and the new tail appended by the store, and only
    the tail is uploaded; see ``write.cloud_copy`` for when they stream instead);
    ``bytes_uploaded`` and ``bytes_copied_server_side`` in each result say what
    it cost.
    """
    if type(paths).__module__.startswith("pyiceberg"):
        # An Iceberg table object: its data files indexed by a commit (dataset/tables).
        if output is not None:
            raise UserInputError("output is not supported for an Iceberg table (a commit)")
        if storage_options is None:  # its catalog's S3 settings, as pyiceberg reads them
            from pqindex.dataset.tables.iceberg_io import table_storage_options

            storage_options = table_storage_options(paths)

        def index_one(src: str, dst: str) -> IndexResult:
            if "://" in src and not src.startswith("file://"):  # an object: a new object
                from pqindex.write.remote_index import index_object

                return index_object(
                    src, output=dst, kinds=requested_kinds(
                        indexes, distinct=distinct, bloom=bloom, zone_maps=zone_maps, hll=hll),
                    cap=truncation_cap(truncate), page_index=page_index, drop=drop,
                    storage_options=storage_options,
                    options={"bloom": {"scopes": bloom_scopes(bloom_scope)}})
            return index_file(src, output=dst, distinct=distinct, bloom=bloom,
                              zone_maps=zone_maps, hll=hll, truncate=truncate,
                              page_index=page_index, drop=drop, indexes=indexes,
                              bloom_scope=bloom_scope)

        done, _snapshot = index_iceberg_table(paths, index_one, progress=progress,
                                              storage_options=storage_options)
        return list(done)
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if any("://" in os.fspath(p) and not os.fspath(p).startswith("file://") for p in items):
        if output is not None:
            raise UserInputError("output is not supported for object-store URLs (in place only)")
        return add_indexes_remote([os.fspath(p) for p in items], distinct=distinct, bloom=bloom,
                                  zone_maps=zone_maps, hll=hll, truncate=truncate,
                                  page_index=page_index, drop=drop, progress=progress,
                                  storage_options=storage_options, indexes=indexes,
                                  bloom_scope=bloom_scope)
    targets, tables = split_table_targets(paths, index_targets(paths, output), output)
    results = []
    for t in targets:
        results.append(
            index_file(
                t.source,
                output=None if t.output == t.source else t.output,
                distinct=distinct,
                bloom=bloom,
                zone_maps=zone_maps,
                hll=hll,
                truncate=truncate,
                page_index=page_index,
                drop=drop,
                indexes=indexes,
                bloom_scope=bloom_scope,
            )
        )
        if progress is not None:
            progress(len(results), len(targets), results[-1])
    results += index_table_targets(
        tables, progress, distinct=distinct, bloom=bloom, zone_maps=zone_maps, hll=hll,
        truncate=truncate, page_index=page_index, drop=drop, indexes=indexes,
        bloom_scope=bloom_scope)
    refresh_manifest(paths, output)
    return results


def refresh_manifest(paths: Paths, output: str | os.PathLike[str] | None = None) -> None:
    """A directory indexed as a whole gets its dataset manifest rewritten: its entries
    (sizes, mtimes, embedded summaries) would no longer match the files otherwise.
    Nothing happens for files or lists of paths."""
    if not isinstance(paths, (str, os.PathLike)) or not os.path.isdir(paths):
        return
    if find_table(output if output is not None else paths) is not None:
        return  # a table's own log (or manifests) names its files
    write_manifest(os.fspath(paths) if output is None else os.fspath(output))
