"""The ``pqindex`` command line.

Errors that pqindex raises on purpose (:class:`PqIndexError`) print one line
naming the file and, where known, row group, column and offset, and exit with
status 2; nothing prints a traceback for bad input. Anything else is a bug: one
line saying so, exit status 1. ``--debug`` (or ``PQINDEX_DEBUG=1``) adds the
traceback to either.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from functools import wraps
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from pqindex.errors import InternalError, PqIndexError, UserInputError

__all__ = ["main"]

F = TypeVar("F", bound=Callable[..., Any])
_DISPLAY_WIDTH = 32


def _debug() -> bool:
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    flag = bool(root is not None and isinstance(root.obj, dict) and root.obj.get("debug"))
    return flag or os.environ.get("PQINDEX_DEBUG", "") not in ("", "0")


def _report_bug(e: BaseException) -> None:
    cause = e.__cause__ if isinstance(e, InternalError) and e.__cause__ is not None else e
    click.echo(
        f"pqindex: internal error (a bug in pqindex, please report it): "
        f"{type(cause).__name__}: {cause}"
        + ("" if _debug() else " (run with --debug for the traceback)"),
        err=True,
    )


def _fail_cleanly(fn: F) -> F:
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:
            sys.exit(0)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit,
                KeyboardInterrupt):
            raise
        except InternalError as e:
            if _debug():
                traceback.print_exc()
            _report_bug(e)
            sys.exit(1)
        except PqIndexError as e:
            if _debug():
                traceback.print_exc()
            click.echo(f"pqindex: error: {e}", err=True)
            sys.exit(2)
        except Exception as e:
            if _debug():
                traceback.print_exc()
            _report_bug(e)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def _short(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        s = _blob_text(value)
    elif isinstance(value, (dict, list, tuple)):  # nested: as JSON text (NaN left bare)
        s = json.dumps(_plain(value, json=False), default=str)
    else:
        s = str(value)
    return s if len(s) <= _DISPLAY_WIDTH else s[: _DISPLAY_WIDTH - 1] + "…"


def _blob_text(b: bytes) -> str:
    """Bytes as DuckDB prints a BLOB: printable ASCII as is, every other byte (and
    the backslash and quotes) as ``\\xNN``, so the text maps back to the bytes."""
    return "".join(chr(c) if 32 <= c <= 126 and c not in (34, 39, 92) else f"\\x{c:02X}"
                   for c in b)


def _plain(value: Any, *, json: bool = True) -> Any:
    """A result value as JSON can hold it: bytes as :func:`_blob_text`, and (``json``)
    NaN and the infinities as the strings Spark's ``to_json`` writes ("NaN",
    "Infinity", "-Infinity"): a bare NaN is not JSON. Other scalars as ``str``."""
    if isinstance(value, bytes):
        return _blob_text(value)
    if isinstance(value, dict):
        return {k: _plain(v, json=json) for k, v in value.items()}
    if isinstance(value, (list, tuple)):  # a map's entries come as (key, value) pairs
        return [_plain(v, json=json) for v in value]
    if json and isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return value


def _json_text(value: Any) -> str:
    return json.dumps(_plain(value), default=str, allow_nan=False)


@contextlib.contextmanager
def _progress(description: str, total: int | None = None
              ) -> Iterator[Callable[[int, int, str | None], None]]:
    """A progress bar on standard error (only on a terminal, gone when done), and its
    update: ``(done, total, what is being worked on or None)``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    err_console = Console(stderr=True, highlight=False)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   console=err_console, transient=True, disable=not err_console.is_terminal)
    with bar:
        task = bar.add_task(description, total=total)

        def update(done: int, total: int, what: str | None = None) -> None:
            bar.update(task, completed=done, total=total,
                       description=description if what is None else _short(what))

        yield update


def _size(n: int | None) -> str:
    if n is None:
        return ""
    x = float(n)
    for unit in ("B", "K", "M", "G"):
        if abs(x) < 1024 or unit == "G":
            return f"{n}B" if unit == "B" else f"{x:.1f}{unit}"
        x /= 1024
    return str(n)


def _yes(region: dict[str, Any] | None) -> str:
    if region is None:
        return "-"
    return _size(region.get("length")) if region.get("length") else "yes"


# Short names keep the chunk table readable in an 80-column terminal.
_ENCODING_ABBREV = {
    "PLAIN": "PL",
    "PLAIN_DICTIONARY": "PD",
    "RLE": "RLE",
    "BIT_PACKED": "BP",
    "DELTA_BINARY_PACKED": "DBP",
    "DELTA_LENGTH_BYTE_ARRAY": "DLBA",
    "DELTA_BYTE_ARRAY": "DBA",
    "RLE_DICTIONARY": "RD",
    "BYTE_STREAM_SPLIT": "BSS",
}


def _console() -> Console:
    con = Console(highlight=False)
    if not con.is_terminal:  # 200 columns, or what COLUMNS says
        import shutil

        con = Console(highlight=False, width=shutil.get_terminal_size((200, 24)).columns)
    return con


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pqindex")
@click.option("--debug", is_flag=True, help="Print the traceback of an error.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Selective reads of Parquet through the Page Index, Bloom filters and embedded indexes."""
    ctx.obj = {"debug": debug}


def _storage_options(values: tuple[str, ...]) -> dict[str, str]:
    """``KEY=VALUE`` pairs of --storage-option as a mapping."""
    from pqindex.errors import UserInputError

    out = {}
    for v in values:
        key, eq, value = v.partition("=")
        if not eq or not key.strip():
            raise UserInputError(f"--storage-option wants KEY=VALUE, got {v!r}")
        out[key.strip()] = value
    return out


_storage_option = click.option(
    "--storage-option",
    "storage_option",
    multiple=True,
    metavar="KEY=VALUE",
    help="Object store setting (endpoint, access_key_id, region, allow_http, ...); repeatable. "
    "Without them the standard environment variables (AWS_ENDPOINT_URL, ...) apply.",
)


@cli.command()
@click.argument("file", type=str)
@click.option("--row-group", "row_group", type=int, default=None, help="Only this row group.")
@click.option("--column", type=str, default=None, help="Only this column (dotted path).")
@click.option("--pages", is_flag=True, help="Show each chunk's page index, page by page.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the report as JSON (docs/inspect-json.md)."
)
@_storage_option
@_fail_cleanly
def inspect(
    file: str,
    row_group: int | None,
    column: str | None,
    pages: bool,
    as_json: bool,
    storage_option: tuple[str, ...] = (),
) -> None:
    """Show what a Parquet file records about its layout and indexes."""
    from pqindex.format.file import ParquetFile
    from pqindex.inspect import inspect_file

    with ParquetFile.open(file, storage_options=_storage_options(storage_option)) as pf:
        report = inspect_file(pf, row_group=row_group, column=column, pages=pages)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    _render_inspect(report)


def _render_inspect(r: dict[str, Any]) -> None:
    con = _console()
    con.print(f"[bold]{r['file']}[/bold]")
    con.print(
        f"  {r['num_rows']:,} rows · {r['num_row_groups']} row groups · {r['num_columns']} columns · "
        f"{_size(r['file_size'])} · footer {_size(r['footer_length'])}"
    )
    con.print(
        f"  created by: {r['created_by'] or '(unknown)'}   format version: {r['format_version']}"
    )
    for w in r["warnings"]:
        con.print(f"  [yellow]warning:[/yellow] {w}")
    schema = Table(title="Schema", title_justify="left", show_edge=False)
    for h in ("#", "column", "physical", "logical", "repetition", "order"):
        schema.add_column(h)
    for c in r["columns"]:
        physical = c["physical_type"] + (f"({c['type_length']})" if c["type_length"] else "")
        logical = c["logical_type"] or c["converted_type"] or ""
        schema.add_row(
            str(c["index"]),
            c["path"],
            physical,
            logical,
            c["repetition"] or "",
            c["column_order"] or "-",
        )
    con.print(schema)
    for g in r["row_groups"]:
        sorting = ", ".join(
            f"{s['path']} {'desc' if s['descending'] else 'asc'}" for s in g["sorting_columns"]
        )
        title = (
            f"Row group {g['index']}: {g['num_rows']:,} rows, "
            f"{_size(g['total_compressed_size'] or g['total_byte_size'])}"
            + (f", sorted by {sorting}" if sorting else "")
        )
        t = Table(title=title, title_justify="left", show_edge=False)
        for h in (
            "column",
            "codec",
            "enc",
            "values",
            "size",
            "min",
            "max",
            "nulls",
            "dict",
            "bloom",
            "col/off idx",
        ):
            t.add_column(h, no_wrap=h not in ("column", "min", "max"))
        for c in g["columns"]:
            st = c["statistics"]
            mn = mx = nulls = ""
            if st is not None:
                mn = _short(st["min_display"]) if st["min"] is not None else "?"
                mx = _short(st["max_display"]) if st["max"] is not None else "?"
                nulls = "" if st["null_count"] is None else str(st["null_count"])
            pidx = "-"
            if c["column_index"] or c["offset_index"]:
                pidx = f"{_yes(c['column_index'])}/{_yes(c['offset_index'])}"
            t.add_row(
                c["path"],
                c["codec"],
                ",".join(_ENCODING_ABBREV.get(e, e) for e in c["encodings"]),
                f"{c['num_values']:,}",
                f"{_size(c['compressed_size'])}/{_size(c['uncompressed_size'])}",
                mn,
                mx,
                nulls,
                _yes(c["dictionary_page"]),
                _yes(c["bloom_filter"]),
                pidx,
            )
        con.print(t)
        for c in g["columns"]:
            if "pages" in c:
                _render_pages(con, g["index"], c)
    con.print(
        "enc: "
        + ", ".join(f"{v}={k}" for k, v in _ENCODING_ABBREV.items())
        + "; size: compressed/uncompressed; ? = bound not usable (see --json)"
    )
    _render_embedded(con, r.get("embedded_indexes"))
    if r["key_value_metadata"]:
        con.print("key/value metadata: " + ", ".join(r["key_value_metadata"]))


def _render_embedded(con: Console, e: dict[str, Any] | None) -> None:
    if e is None:
        return
    if e["offset"] is None:
        con.print(f"Embedded indexes: region {e['locator']!r} unusable")
    elif not e["blobs"]:
        # An empty table would read as "no indexes"; say what the region does hold.
        where = (f"on this column ({e['column']})" if e.get("column") is not None
                 else "in this row group")
        indexed = sorted({c for k in e["kinds"].values() for c in k.get("columns", {})})
        con.print(
            f"Embedded indexes: region at {e['offset']}, {_size(e['length'])}: none {where}"
            + (f"; indexed columns: {', '.join(indexed)}" if indexed else "")
        )
    else:
        t = Table(
            title=f"Embedded indexes: region at {e['offset']}, {_size(e['length'])}, "
            f"version {e['version']}",
            title_justify="left",
            show_edge=False,
        )
        for h in ("kind", "column", "scopes", "blobs", "bytes", "distinct (est.)"):
            t.add_column(h)
        # One row per kind and column: page-scope blobs would make a long table.
        counts: dict[tuple[str, str], list[Any]] = {}
        for b in e["blobs"]:
            row = counts.setdefault((b["kind"], b["column"]), [[], 0, 0])
            if b["scope"] not in row[0]:
                row[0].append(b["scope"])
            row[1] += 1
            row[2] += b["bytes"]
        for (kind, column), (scopes, n, size) in counts.items():
            est = e["distinct_estimates"].get(column) if kind == "hll" else None
            t.add_row(
                kind + ("" if e["kinds"].get(kind, {}).get("known", True) else " (unknown)"),
                column,
                ",".join(scopes),
                str(n),
                _size(size),
                "" if est is None else f"{est:,}",
            )
        con.print(t)
    for w in e["warnings"]:
        con.print(f"  [yellow]warning:[/yellow] {w}")


def _render_pages(con: Console, rg: int, c: dict[str, Any]) -> None:
    p = c["pages"]
    if p is None:
        con.print(f"  {c['path']} (row group {rg}): no page index")
        return
    note = "" if p["column_index_usable"] else f" — column index unusable: {p['unusable_reason']}"
    t = Table(
        title=f"  {c['path']} (row group {rg}): boundary order {p['boundary_order'] or '-'}{note}",
        title_justify="left",
        show_edge=False,
    )
    for h in (
        "page",
        "first row",
        "rows",
        "offset",
        "size",
        "null page",
        "nulls",
        "NaNs",
        "min",
        "max",
    ):
        t.add_column(h)
    for pg in p["pages"]:
        t.add_row(
            str(pg["page"]),
            str(pg["first_row"]),
            "" if pg["rows"] is None else str(pg["rows"]),
            str(pg["offset"]),
            _size(pg["compressed_size"]),
            "" if pg["null_page"] is None else ("yes" if pg["null_page"] else "no"),
            "" if pg["null_count"] is None else str(pg["null_count"]),
            "" if pg["nan_count"] is None else str(pg["nan_count"]),
            _short(pg["min_display"]),
            _short(pg["max_display"]),
        )
    con.print(t)


@cli.command()
@click.argument("files", nargs=-1, required=True)
@click.option("--no-decode", is_flag=True,
              help="Check page headers and checksums only, don't decode data.")
@_storage_option
@_fail_cleanly
def check(files: tuple[str, ...], no_decode: bool, storage_option: tuple[str, ...] = ()) -> None:
    """Check files end to end: footer, page headers, page checksums (every page
    CRC32 present), page index (decoded and validated), Bloom filters (decoded; by
    default every value looked up), the embedded index region (directory,
    checksums, each blob decoded), and (by default) the data."""
    from pqindex.format.file import ParquetFile
    from pqindex.format.pages import check_file, check_indexes
    from pqindex.inspect import check_embedded

    so = _storage_options(storage_option)
    for f in files:
        with ParquetFile.open(f, storage_options=so) as pf:
            check_file(pf, decode=not no_decode)
            warnings = check_indexes(pf, values=not no_decode)
            check_embedded(pf)
        for w in warnings:
            click.echo(f"{f}: warning: {w}", err=True)
        click.echo(f"{f}: ok")


@cli.command(name="manifest")
@click.argument("path", type=str)
@click.option("--json", "as_json", is_flag=True, help="Print the manifest written.")
@click.option("--key-index", "key_index", multiple=True,
              help="Build (or extend) the key index of this column (repeatable).")
@click.option("--compact-key-index", "compact", is_flag=True,
              help="Merge the key index's shards (delta shards of appends) into one run.")
@_storage_option
@_fail_cleanly
def manifest_command(path: str, as_json: bool, storage_option: tuple[str, ...] = (),
                     key_index: tuple[str, ...] = (), compact: bool = False) -> None:
    """Write or refresh the dataset manifest (_pqindex_manifest.json) of directory PATH.
    For a Delta or Iceberg table the table's own log is its manifest: nothing is
    written, the snapshot's files are shown."""
    from pqindex.dataset.manifest import write_manifest
    from pqindex.dataset.tables.source import is_table_source, table_source

    if is_table_source(path):
        table = table_source(path, storage_options=_storage_options(storage_option))
        files = [{"path": f.path, "size": None if f.info is None else f.info.size,
                  "rows": rows} for f, rows in zip(table.discovery.files, table.rows,
                                                   strict=True)]
        if key_index:
            from pqindex.dataset.key_index import build_table_key_index

            build_table_key_index(table, key_index,
                                  storage_options=_storage_options(storage_option))
        if as_json:
            click.echo(json.dumps({"table": table.description, "files": files}, indent=1))
        elif key_index:
            click.echo(f"{table.description}: key index of {', '.join(key_index)} written "
                       "for this version (other versions ignore it)")
        else:
            click.echo(f"{table.description}: the table's log is its manifest; nothing "
                       "written")
        return

    with _progress("reading footers") as update:
        if compact and not key_index:
            from pqindex.dataset.key_index import compact_key_index

            m = compact_key_index(path, storage_options=_storage_options(storage_option))
        elif key_index:
            from pqindex.dataset.key_index import write_manifest_with_key_index

            m = write_manifest_with_key_index(
                path, key_index, storage_options=_storage_options(storage_option),
                progress=lambda done, total: update(done, total, None))
            if compact:
                from pqindex.dataset.key_index import compact_key_index

                m = compact_key_index(path, storage_options=_storage_options(storage_option))
        else:
            m = write_manifest(path, _storage_options(storage_option),
                               progress=lambda done, total: update(done, total, None))
    if as_json:
        click.echo(json.dumps(m, indent=1, default=str))
    else:
        click.echo(f"{path}: manifest of {len(m['files'])} file(s), {m['rows']:,} rows")


def _columns(values: tuple[str, ...]) -> list[str] | None:
    """``--columns`` values: comma-separated names; a name holding a comma in double
    quotes, as in CSV (``'"a,b",c'``; a quote inside such a name is doubled)."""
    import csv

    out: list[str] = []
    for v in values:
        try:
            names = next(csv.reader([v], skipinitialspace=True, strict=True))
        except (csv.Error, StopIteration) as e:
            raise UserInputError(f"--columns {v!r}: {e or 'empty'}") from None
        out += [c.strip() for c in names if c.strip()]
    return out or None


@cli.command()
@click.argument("path", nargs=-1, required=True)
@click.option("--where", "where", default=None, help='SQL WHERE text, e.g. "id BETWEEN 1 AND 9".')
@click.option("--columns", "columns", multiple=True, help="Columns to read (comma-separated).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@_storage_option
@_fail_cleanly
def explain(
    path: tuple[str, ...],
    where: str | None,
    columns: tuple[str, ...],
    as_json: bool,
    storage_option: tuple[str, ...] = (),
) -> None:
    """Show how a query would read PATH (files, row groups, pages) without reading data."""
    import pqindex

    with pqindex.dataset(list(path), storage_options=_storage_options(storage_option)) as ds:
        click.echo(
            ds.explain(columns=_columns(columns), where=where, format="json" if as_json else "text")
        )


@cli.command()
@click.argument("path", nargs=-1, required=True)
@click.option("--where", "where", default=None, help="SQL WHERE text.")
@click.option("--columns", "columns", multiple=True, help="Columns to read (comma-separated).")
@click.option("--limit", type=int, default=None,
              help="At most this many rows (table format to the screen: a screenful by "
              "default, a last line saying how many were left out).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json", "parquet"]),
    default="table",
    show_default=True,
    help="json: one object a line; binary values as DuckDB prints BLOBs (\\xNN "
    "escapes), NaN and infinities as \"NaN\", \"Infinity\", \"-Infinity\". csv: "
    "nested values as JSON text, binary ones escaped the same way.",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write here instead of standard output (required for parquet).",
)
@click.option(
    "--report/--no-report",
    default=True,
    show_default=True,
    help="Print what was read and skipped to standard error.",
)
@click.option("--verify-checksums", is_flag=True,
              help="Check the CRC32 of every page read that has one (a mismatch fails).")
@_storage_option
@_fail_cleanly
def query(
    path: tuple[str, ...],
    where: str | None,
    columns: tuple[str, ...],
    limit: int | None,
    fmt: str,
    output: str | None,
    report: bool,
    verify_checksums: bool = False,
    storage_option: tuple[str, ...] = (),
) -> None:
    """Read the rows of PATH that match --where, using every index the files have."""

    import pqindex

    if limit is not None and limit < 0:
        raise pqindex.UserInputError("--limit must be at least 0")
    if fmt == "parquet" and output is None:
        raise pqindex.UserInputError("--format parquet needs --output FILE")
    if output is not None:
        _check_output(output, path)
    screen = limit is None and fmt == "table" and output is None
    with pqindex.dataset(list(path), storage_options=_storage_options(storage_option)) as ds:
        if output is not None:
            _check_output(output, ds.files)
        scan = ds.scan(columns=_columns(columns), where=where, verify_checksums=verify_checksums)
        # --limit: Scan.head stops reading (and, on a lake, opening files) once it has them.
        # The table on the screen: a screenful, one more row telling whether rows are left.
        rows = _screen_rows() if screen else limit
        table = scan.head(rows + screen) if rows is not None else scan.to_table()
        left = 0
        if screen and rows is not None and table.num_rows > rows:
            table = table.slice(0, rows)
            left = ds.count_rows(where) - rows
    _write_result(table, fmt, output, left)
    if report:
        click.echo(f"pqindex: {scan.report}", err=True)


def _screen_rows() -> int:
    """Rows of a table that fit the terminal (24 lines when it cannot tell)."""
    import shutil

    return max(10, shutil.get_terminal_size((80, 24)).lines - 6)


def _local_input(p: str) -> str | None:
    """The local path an input names (a glob pattern: its base directory), or None
    for an object store URL."""
    from pqindex.dataset.discovery import split_pattern

    if "://" in p and not p.startswith("file://"):
        return None
    p = os.path.expanduser(p[len("file://"):] if p.startswith("file://") else p)
    glob = split_pattern(p)
    return (glob[0] or ".") if glob is not None else p


def _inside(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or lies below it (symbolic links resolved as
    far as the path exists; it need not)."""
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _check_output(output: str, inputs: Sequence[str], *, directory: bool = False) -> None:
    """Refuse an --output that is one of the inputs or lies inside an input directory,
    existing or not (the next read of that directory would read it too), and a file
    output whose directory is missing or that is a directory."""
    if not directory:
        parent = os.path.dirname(os.path.abspath(output))
        if not os.path.isdir(parent):
            raise UserInputError(f"the output's directory {parent} does not exist",
                                 path=output)
        if os.path.isdir(output):
            raise UserInputError("the output is a directory", path=output)
    for given in inputs:
        p = _local_input(given)
        if p is None or not os.path.exists(p):
            continue
        if _inside(output, p) if os.path.isdir(p) else (
                os.path.exists(output) and os.path.samefile(output, p)):
            raise UserInputError(f"the output lies inside the input {given}" if os.path.isdir(p)
                                 else f"the output would overwrite the input {given}",
                                 path=output)


def _csv_ready(table: Any) -> Any:
    """Nested columns (lists, structs, maps) as JSON text, binary ones as
    :func:`_blob_text`: CSV has neither."""
    import pyarrow as pa

    for i, f in enumerate(table.schema):
        t = f.type
        binary = (pa.types.is_binary(t) or pa.types.is_large_binary(t)
                  or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t))
        if pa.types.is_nested(t) or binary:
            # CSV has no bytes either: pyarrow refuses bytes that are not UTF-8.
            text = [None if v is None else _blob_text(v) if binary else _json_text(v)
                    for v in table.column(i).to_pylist()]
            table = table.set_column(i, pa.field(f.name, pa.string()), pa.array(text, pa.string()))
    return table


def _write_result(table: Any, fmt: str, output: str | None, left: int = 0) -> None:
    """The result on standard output, or into ``output`` through a temporary file
    renamed into place (a failed write leaves no partial file). ``left``: matching
    rows not in ``table`` (the table format says so)."""
    if output is None:
        _emit(table, fmt, None, left)
        return
    d, name = os.path.split(os.path.abspath(output))
    tmp = os.path.join(d, f".{name}.pqindex-query-{os.getpid()}")
    try:
        _emit(table, fmt, tmp)
        os.replace(tmp, output)
    except OSError as e:
        raise UserInputError(f"cannot write the output: {e.strerror or e}", path=output) from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _emit(table: Any, fmt: str, output: str | None, left: int = 0) -> None:
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    if fmt == "parquet":
        pq.write_table(table, output, write_page_checksum=True)
        return
    if fmt == "csv":
        table = _csv_ready(table)
        if output:
            pcsv.write_csv(table, output)
        else:
            sink = __import__("io").BytesIO()
            pcsv.write_csv(table, sink)
            click.echo(sink.getvalue().decode(), nl=False)
        return
    if fmt == "json":
        lines = (_json_text(r) for r in table.to_pylist())
        text = "\n".join(lines) + ("\n" if table.num_rows else "")
        if output:
            with open(output, "w", encoding="utf-8") as f:
                f.write(text)
        else:
            click.echo(text, nl=False)
        return
    widths = _column_widths(table)
    with contextlib.ExitStack() as stack:
        if output:  # a file: every column
            f = stack.enter_context(open(output, "w", encoding="utf-8"))
            con = Console(file=f, width=max(80, sum(widths)), highlight=False)
        else:
            con = _console()
        shown = _fitting(widths, con.width)
        # One line a row: cells cut short (…), never wrapped; the columns that fit.
        t = Table(show_edge=False, pad_edge=False)
        names = table.column_names[:shown]
        for name in names:
            t.add_column(name, no_wrap=True, overflow="ellipsis", max_width=_DISPLAY_WIDTH)
        cells = [[_short(v) for v in table.column(n).to_pylist()] for n in names]
        for row in zip(*cells, strict=True):
            t.add_row(*row)
        con.print(t)
        if output:
            return
        notes = [f"{table.num_rows:,} rows"]
        if left:
            notes.append(f"{left:,} more not shown (--limit N shows N)")
        hidden = table.column_names[shown:]
        if hidden:
            names = ", ".join(hidden[:12]) + (", …" if len(hidden) > 12 else "")
            notes.append(f"{len(hidden)} more column(s) not shown: {names} (--columns chooses)")
        con.print("; ".join(notes), markup=False, highlight=False, soft_wrap=True)


def _column_widths(table: Any) -> list[int]:
    """Each column's width in the table format: its name or its widest cell (of the
    first 200), at most :data:`_DISPLAY_WIDTH`, plus the separator."""
    return [min(_DISPLAY_WIDTH, max([len(name), *(len(_short(v)) for v in
                                                   table.column(k).slice(0, 200).to_pylist())]))
            + 3 for k, name in enumerate(table.column_names)]


def _fitting(widths: Sequence[int], width: int) -> int:
    """How many of the first columns fit ``width`` side by side (at least one)."""
    used = 0
    for k, w in enumerate(widths):
        if k and used + w > width:
            return k
        used += w
    return len(widths)


@cli.command(name="index")
@click.argument("path", nargs=-1, required=True)
@click.option(
    "--output",
    type=click.Path(file_okay=False),
    default=None,
    help="Write the indexed files under this directory (same relative names) instead of in place.",
)
@click.option("--distinct", multiple=True, help="Distinct-value index on COL (repeatable).")
@click.option("--bloom", multiple=True, help="Embedded Bloom filter on COL (repeatable).")
@click.option(
    "--bloom-scope",
    "bloom_scope",
    default="row_group,page",  # write.add_indexes.DEFAULT_BLOOM_SCOPE (not imported: startup)
    show_default=True,
    metavar="SCOPES",
    help="What each --bloom filter covers: file, row_group, page, or several comma-separated. "
    "row_group and page filters also skip the row groups and pages without the value; "
    "file alone only rules out values the whole file lacks.",
)
@click.option("--zone-maps", "zone_maps", multiple=True, help="Zone maps on COL (repeatable).")
@click.option("--hll", multiple=True, help="HyperLogLog sketch of COL (repeatable).")
@click.option("--index", "index_specs", multiple=True, metavar="KIND=COL",
              help="Embedded index of any registered KIND on COL (repeatable).")
@click.option(
    "--page-index",
    "page_index",
    type=click.Choice(["keep", "add"]),
    default="keep",
    show_default=True,
    help="add: write a ColumnIndex and OffsetIndex into chunks that have none.",
)
@click.option("--no-truncate", is_flag=True, help="Keep ColumnIndex string bounds whole.")
@click.option("--drop", is_flag=True, help="Remove the embedded indexes, nothing else.")
@click.option(
    "--keep-going",
    is_flag=True,
    help="After a file fails, go on with the others (exit status 2 all the same).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@_storage_option
@_fail_cleanly
def index_command(
    path: tuple[str, ...],
    output: str | None,
    distinct: tuple[str, ...],
    bloom: tuple[str, ...],
    bloom_scope: str,
    zone_maps: tuple[str, ...],
    hll: tuple[str, ...],
    index_specs: tuple[str, ...],
    page_index: str,
    no_truncate: bool,
    drop: bool,
    keep_going: bool,
    as_json: bool,
    storage_option: tuple[str, ...] = (),
) -> None:
    """Add indexes to Parquet files written by any writer (PATH: files, directories or
    quoted glob patterns like 'lake/dt=*/*.parquet'; object-store URLs are indexed in
    place, see --storage-option).

    The first file that fails stops the run (files done before stay done) unless
    --keep-going; either way each failure prints one line naming the file and
    the exit status is 2.
    """
    from pqindex.dataset.indexing import (
        add_indexes,
        index_table_targets,
        refresh_manifest,
        split_table_targets,
    )
    from pqindex.write.add_indexes import IndexResult, bloom_scopes, index_file, index_targets

    options: dict[str, Any] = {
        "distinct": _columns(distinct) or (),
        "bloom": _columns(bloom) or (),
        "zone_maps": _columns(zone_maps) or (),
        "hll": _columns(hll) or (),
        "truncate": not no_truncate,
        "page_index": page_index,
        "drop": drop,
        "indexes": _index_specs(index_specs),
        "bloom_scope": bloom_scopes(bloom_scope),
    }
    if any("://" in p and not p.startswith("file://") for p in path):
        # Object stores: each object replaced only if unchanged since read (write.remote).
        with _progress("indexing") as update:
            done = add_indexes(list(path), output=output,
                               storage_options=_storage_options(storage_option),
                               progress=lambda n, total, r: update(n, total, r.path), **options)
        if as_json:
            click.echo(json.dumps({"files": [r.to_dict() for r in done], "errors": [],
                                   "totals": _index_totals(done)}, indent=2))
        elif done:
            _render_index(done)
        return
    if output is not None:
        _check_output(output, path, directory=True)
    # Files of a Delta table are indexed by a commit; other tables' are refused.
    targets, tables = split_table_targets(list(path), index_targets(list(path), output), output)
    for t in targets:
        if output is not None and os.path.realpath(t.output) == os.path.realpath(t.source):
            raise UserInputError(f"the output would overwrite the input {t.source}",
                                 path=output)
    results: list[IndexResult] = []
    errors: list[tuple[str, str]] = []
    with _progress("indexing", len(targets)) as update:
        for i, t in enumerate(targets):
            update(i, len(targets), t.source)
            try:
                results.append(
                    index_file(t.source, output=None if output is None else t.output, **options)
                )
            except PqIndexError as e:
                errors.append((t.source, str(e)))
                if not keep_going:
                    break
    if tables and (keep_going or not errors):
        try:
            results += index_table_targets(tables, **options)
        except PqIndexError as e:
            errors.append((e.path or "", str(e)))
    if len(path) == 1:
        refresh_manifest(path[0], output)  # the directory's manifest matches the new files
    if as_json:
        click.echo(
            json.dumps(
                {
                    "files": [r.to_dict() for r in results],
                    "errors": [{"path": p, "error": m} for p, m in errors],
                    "totals": _index_totals(results),
                },
                indent=2,
            )
        )
    elif results:
        _render_index(results)
    for _, message in errors:
        click.echo(f"pqindex: error: {message}", err=True)
    if errors:
        sys.exit(2)


def _index_specs(specs: tuple[str, ...]) -> dict[str, list[str]]:
    """``--index KIND=COL[,COL...]`` options as ``{kind: columns}``."""
    out: dict[str, list[str]] = {}
    for spec in specs:
        kind, sep, cols = spec.partition("=")
        names = [c.strip() for c in cols.split(",") if c.strip()]
        if not sep or not kind.strip() or not names:
            raise UserInputError(f"--index takes KIND=COL, not {spec!r}")
        out.setdefault(kind.strip(), []).extend(names)
    return out


def _index_totals(results: list[Any]) -> dict[str, Any]:
    return {
        "files": len(results),
        "bytes_before": sum(r.bytes_before for r in results),
        "bytes_after": sum(r.bytes_after for r in results),
        "region_bytes": sum(r.region_bytes for r in results),
        "page_index_added": sum(r.page_index_added for r in results),
        "bytes_uploaded": sum(r.bytes_uploaded for r in results),
        "bytes_copied_server_side": sum(r.bytes_copied_server_side for r in results),
        "seconds": sum(r.seconds for r in results),
    }


def _render_index(results: list[Any]) -> None:
    con = _console()
    t = Table(show_edge=False)
    for h in ("file", "before", "after", "index", "page idx +", "indexes", "time"):
        t.add_column(h, no_wrap=h not in ("file", "indexes"))
    for r in results:
        kinds = "; ".join(f"{k}: {','.join(cols)}" for k, cols in r.indexes.items())
        t.add_row(
            r.output,
            _size(r.bytes_before),
            _size(r.bytes_after),
            _size(r.region_bytes),
            str(r.page_index_added),
            ("dropped" if r.region_dropped else kinds) or "-",
            f"{r.seconds:.2f}s",
        )
    tot = _index_totals(results)
    t.add_row(
        f"{tot['files']} files",
        _size(tot["bytes_before"]),
        _size(tot["bytes_after"]),
        _size(tot["region_bytes"]),
        str(tot["page_index_added"]),
        "",
        f"{tot['seconds']:.2f}s",
        style="bold",
    )
    con.print(t)
    for r in results:
        for column, reason in r.skipped.items():
            con.print(f"  skipped {r.output} {column}: {reason}")
        if r.streamed_because:
            con.print(f"  streamed {r.output} down and up, not copied by the store: "
                      f"{r.streamed_because}", markup=False)


@cli.command()
@click.argument("input_path", metavar="INPUT")
@click.argument("output", metavar="OUTPUT")
@click.option(
    "--sort-by",
    "sort_by",
    multiple=True,
    help="Sort key, COL or 'COL desc' (repeatable, comma-separated).",
)
@click.option(
    "--cluster-by",
    "cluster_by",
    multiple=True,
    help="Z-order on 2-4 columns instead of a plain sort.",
)
@click.option(
    "--partition-by", "partition_by", multiple=True, help="Hive-style key=value/ directories."
)
@click.option(
    "--input-format",
    "input_format",
    type=click.Choice(["csv", "json", "parquet"]),
    default=None,
    help="Format of INPUT (default: from its extension, else parquet).",
)
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option("--distinct", multiple=True, help="Embedded distinct-value index on COL.")
@click.option("--bloom", multiple=True, help="Parquet Bloom filter on COL.")
@click.option("--zone-maps", "zone_maps", multiple=True, help="Embedded zone maps on COL.")
@click.option("--hll", multiple=True, help="Embedded HyperLogLog sketch of COL.")
@click.option("--index", "index_specs", multiple=True, metavar="KIND=COL",
              help="Embedded index of any registered KIND on COL (repeatable).")
@click.option("--no-auto-indexes", "no_auto", is_flag=True,
              help="Without embedded index options, embed none (default: a distinct index "
                   "on each low-cardinality column, as pqindex.write_table).")
@click.option(
    "--mode",
    type=click.Choice(["error", "append", "overwrite"]),
    default="error",
    show_default=True,
    help="What to do when OUTPUT already holds data.",
)
@click.option("--target-file-mb", "target_file_mb", type=int, default=256, show_default=True)
@click.option("--page-rows", "page_rows", type=int, default=20_000, show_default=True)
@click.option("--row-group-rows", "row_group_rows", type=int, default=1_000_000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@_storage_option
@_fail_cleanly
def build(
    input_path: str,
    output: str,
    sort_by: tuple[str, ...],
    cluster_by: tuple[str, ...],
    partition_by: tuple[str, ...],
    input_format: str | None,
    master: str,
    distinct: tuple[str, ...],
    bloom: tuple[str, ...],
    zone_maps: tuple[str, ...],
    hll: tuple[str, ...],
    index_specs: tuple[str, ...],
    no_auto: bool,
    mode: str,
    target_file_mb: int,
    page_rows: int,
    row_group_rows: int,
    as_json: bool,
    storage_option: tuple[str, ...] = (),
) -> None:
    """Build an indexed dataset at OUTPUT from INPUT with Spark (sorted or Z-ordered).

    OUTPUT may be an object-store URL; --storage-option configures the store for
    the driver and the executors."""
    import os

    from pqindex.errors import UserInputError

    sort: list[str | tuple[str, str]] = []
    for item in _columns(sort_by) or []:
        words = item.split()
        desc = len(words) == 2 and words[1].lower() in ("desc", "descending")
        sort.append((words[0], "descending") if desc else words[0])
    if not sort and not cluster_by:
        raise UserInputError("give --sort-by or --cluster-by")
    fmt = input_format
    if fmt is None:
        ext = os.path.splitext(input_path.rstrip("/"))[1].lower()
        fmt = {".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}.get(
            ext, "parquet"
        )
    indexes = _index_specs(index_specs)
    for kind, cols in (("distinct", distinct), ("zone_maps", zone_maps), ("hll", hll)):
        for c in _columns(cols) or []:
            if c not in indexes.get(kind, []):
                indexes.setdefault(kind, []).append(c)
    summary = _run_build(
        input_path,
        output,
        fmt=fmt,
        master=master,
        sort=sort,
        cluster_by=_columns(cluster_by),
        partition_by=_columns(partition_by),
        bloom=_columns(bloom),
        indexes=indexes or (None if no_auto else "auto"),
        mode=mode,
        target_file_bytes=target_file_mb * 1024 * 1024,
        page_rows=page_rows,
        row_group_rows=row_group_rows,
        storage_options=_storage_options(storage_option) or None,
    )
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    t = Table(show_edge=False, title=f"pqindex build → {summary['path']}")
    for h in ("files", "rows", "bytes", "index bytes", "embedded", "tasks", "time"):
        t.add_column(h, justify="right")
    t.add_row(
        str(summary["files"]),
        f"{summary['rows']:,}",
        _size(summary["bytes"]),
        _size(summary["index_bytes"]),
        _size(summary["region_bytes"]),
        str(summary["tasks"]),
        f"{summary['seconds']:.1f}s",
    )
    _console().print(t)


def _run_build(
    input_path: str, output: str, *, fmt: str, master: str, **options: Any
) -> dict[str, Any]:
    """Read INPUT with Spark and run the pipeline; a session made here is stopped here."""
    import os

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers must import pqindex
    from pyspark.sql import SparkSession

    import pqindex.spark

    existing = SparkSession.getActiveSession()
    spark = existing or (
        SparkSession.builder.master(master)
        .appName("pqindex build")
        .config("spark.ui.showConsoleProgress", "true")
        .getOrCreate()
    )
    if existing is None:
        spark.sparkContext.setLogLevel("WARN")
    try:
        reader = spark.read.format(fmt)
        if fmt == "csv":
            reader = reader.option("header", "true").option("inferSchema", "true")
        df = reader.load(input_path)
        sort = options.pop("sort")
        return pqindex.spark.write(df, output, sort_by=sort or None, **options)
    finally:
        if existing is None:
            spark.stop()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``pqindex`` script."""
    cli.main(args=argv, prog_name="pqindex")
