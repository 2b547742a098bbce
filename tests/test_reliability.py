"""Regression tests for issue 13: every failure a PqIndexError, nothing of the user's
lost, no silent wrong rows. One test (or more) per bullet of the issue."""

from __future__ import annotations

import itertools
import os
import re
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pqindex
from conftest import PARQUET_TESTING
from pqindex.cli import cli
from pqindex.errors import (
    CorruptFileError,
    InternalError,
    PqIndexError,
    StorageError,
    UnsupportedError,
    UserInputError,
    located,
    public_api,
    translate,
)
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.format.pages import walk_pages

CORPUS = PARQUET_TESTING


def _run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _small(path: Path, rows: int = 2_000, **kw: Any) -> Path:
    table = pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "s": pa.array([f"v{i % 50:03d}" for i in range(rows)]),
        "tags": pa.array([[i % 3, i % 5] for i in range(rows)], pa.list_(pa.int32())),
    })
    pq.write_table(table, path, row_group_size=1_000, data_page_size=1_024,
                   write_page_index=True, compression=kw.pop("compression", "snappy"), **kw)
    return path


def _damage_first_data_page_body(path: Path, column: int = 0) -> None:
    with ParquetFile.open(path) as pf:
        page = next(p for p in walk_pages(pf, 0, column) if p.page_type in (0, 3))
        body = page.offset + page.header_length
        size = page.header.compressed_page_size or 0
    data = bytearray(path.read_bytes())
    for i in range(body, body + size):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


# ---------------------------------------------------------------- 1. the boundary


def test_translate_maps_foreign_exceptions_to_the_right_subclass() -> None:
    assert isinstance(translate(FileNotFoundError(2, "No such file", "/x")), UserInputError)
    assert translate(FileNotFoundError(2, "No such file", "/x")).path == "/x"
    assert isinstance(translate(OSError(28, "No space left on device")), StorageError)
    assert isinstance(translate(OSError("Couldn't deserialize thrift"), default=CorruptFileError),
                      CorruptFileError)
    assert isinstance(translate(pa.ArrowNotImplementedError("x")), UnsupportedError)
    assert isinstance(translate(RecursionError()), UserInputError)
    assert isinstance(translate(UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogate")),
                      UserInputError)
    assert isinstance(translate(KeyError("k")), InternalError)
    err = translate(ValueError("bad"), default=CorruptFileError, path="f", row_group=3,
                    column="c", offset=9)
    assert (err.path, err.row_group, err.column, err.offset) == ("f", 3, "c", 9)
    assert str(err) == "f, row group 3, column 'c', offset 9: bad"
    # A PqIndexError keeps its class and gets the missing location parts.
    kept = translate(CorruptFileError("x", column="c"), path="f")
    assert type(kept) is CorruptFileError and kept.path == "f" and kept.column == "c"


def test_public_api_wraps_functions_and_generators() -> None:
    @public_api
    def boom() -> None:
        raise KeyError("k")

    @public_api
    def gen() -> Any:
        yield 1
        raise OSError("damaged")

    with pytest.raises(InternalError) as e:
        boom()
    assert isinstance(e.value.__cause__, KeyError)
    g = gen()
    assert next(g) == 1
    with pytest.raises(InternalError):
        next(g)
    with pytest.raises(CorruptFileError), located(default=CorruptFileError):
        raise ValueError("x")


def test_damaged_compressed_page_body_is_a_corrupt_file_error_naming_the_row_group(
    tmp_path: Path,
) -> None:
    # Before: pyarrow's OSError escaped (the executor caught ArrowException only).
    path = _small(tmp_path / "d.parquet")
    _damage_first_data_page_body(path)
    with pytest.raises(PqIndexError) as e:
        pqindex.dataset(path).to_table()
    assert isinstance(e.value, CorruptFileError), e.value
    assert e.value.path == str(path) and "row group" in str(e.value)
    with pytest.raises(CorruptFileError) as e:
        pqindex.dataset(path).to_table(where="id < 10")
    assert e.value.row_group == 0
    with pytest.raises(CorruptFileError):
        list(pqindex.dataset(path).scan(where="id >= 0").to_batches())


def test_damaged_arrow_schema_metadata_is_a_corrupt_file_error(tmp_path: Path) -> None:
    path = tmp_path / "m.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3]}), path)
    data = bytearray(path.read_bytes())
    at = data.rindex(b"ARROW:schema") + len(b"ARROW:schema")
    at = data.index(b"/", at) - 8  # inside the base64 value; same length, still base64
    data[at - 40:at] = b"A" * 40
    path.write_bytes(bytes(data))
    with pytest.raises(PqIndexError) as e:
        pqindex.dataset(path).to_table(where="id = 2")
    assert isinstance(e.value, CorruptFileError) and e.value.path == str(path)


def test_bad_data_corpus_full_scans_raise_pqindex_errors_only() -> None:
    files = sorted((CORPUS / "bad_data").glob("*.parquet"))
    assert files, "the corpus' bad_data/ is missing"
    for f in files:
        for where in (None, "1 = 1"):
            try:
                pqindex.dataset(f).to_table(where=where)
            except PqIndexError as e:
                assert not isinstance(e, InternalError), f"{f.name}: {e}"


def test_dataset_of_none_and_write_into_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(UserInputError):
        pqindex.dataset(None)  # type: ignore[arg-type]
    with pytest.raises(UserInputError) as e:
        pqindex.write_table(pa.table({"a": [1]}), tmp_path / "missing" / "x.parquet")
    assert "does not exist" in str(e.value)
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("kwargs", [
    {"max_workers": 0}, {"max_workers": -1}, {"max_workers": 2.5}, {"max_workers": "4"},
    {"max_workers": True}, {"tail_bytes": -5}, {"tail_bytes": 1.5},
])
def test_bad_dataset_options_are_user_input_errors(small_file: Path, kwargs: Any) -> None:
    # Not a ValueError from the thread pool at the first scan, nor an "internal error".
    with pytest.raises(UserInputError, match=next(iter(kwargs))):
        pqindex.dataset(small_file, **kwargs)


def test_dataset_options_take_numpy_integers(small_file: Path) -> None:
    import numpy as np

    ds = pqindex.dataset(small_file, max_workers=np.int64(3), tail_bytes=np.int32(0))
    assert ds.max_workers == 3 and type(ds.max_workers) is int
    assert ds.scan(columns=["id"]).to_table().num_rows == 3_000


def test_one_column_or_aggregate_given_as_a_string(small_file: Path) -> None:
    # A string is one name, as polars takes it: never its letters.
    ds = pqindex.dataset(small_file)
    want = pq.read_table(small_file, columns=["id"]).filter(pc.less(pc.field("id"), 10))
    assert ds.scan("id", "id < 10").to_table().equals(want)
    assert ds.to_table("id", "id < 10").equals(want)
    assert ds.plan("id", "id < 10").fields == ("id",)
    assert ds.to_pyarrow_dataset(where="id < 10", columns="id").to_table().equals(want)
    assert ds.aggregate("count(*)", where="id < 10") == {"count(*)": want.num_rows}
    with pytest.raises(UserInputError, match="names"):
        ds.scan([1]).to_table()  # type: ignore[list-item]
    with pytest.raises(UserInputError, match="aggregate"):
        ds.aggregate([3])  # type: ignore[list-item]


def test_add_indexes_on_a_damaged_file_is_a_corrupt_file_error(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"id": list(range(5000))}), path, write_page_index=False,
                   data_page_size=1024)
    before = path.read_bytes()
    _damage_first_data_page_body(path)
    damaged = path.read_bytes()
    assert damaged != before
    with pytest.raises(PqIndexError) as e:
        pqindex.add_indexes(path, page_index="add")
    assert not isinstance(e.value, InternalError), e.value
    assert e.value.path == str(path)
    assert path.read_bytes() == damaged  # untouched
    assert [p.name for p in tmp_path.iterdir()] == ["d.parquet"]  # no litter


def test_index_keep_going_continues_past_a_damaged_file(tmp_path: Path) -> None:
    good1 = tmp_path / "a.parquet"
    bad = tmp_path / "b.parquet"
    good2 = tmp_path / "c.parquet"
    for p in (good1, bad, good2):
        pq.write_table(pa.table({"id": list(range(5000))}), p, write_page_index=False,
                       data_page_size=1024)
    _damage_first_data_page_body(bad)
    res = _run("index", "--page-index", "add", "--keep-going", "--json", str(tmp_path))
    assert res.exit_code == 2
    assert "b.parquet" in res.stderr and "Traceback" not in res.output
    for p in (good1, good2):
        with ParquetFile.open(p) as pf:
            assert pf.offset_index(0, 0) is not None


# ---------------------------------------------------------------- CLI errors


def test_cli_pqindex_error_is_one_line_exit_2(tmp_path: Path) -> None:
    path = _small(tmp_path / "d.parquet")
    _damage_first_data_page_body(path)
    res = _run("query", str(path))
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pqindex: error: ")
    assert str(path) in lines[0] and "row group 0" in lines[0]


def test_cli_internal_error_says_bug_exit_1_traceback_only_with_debug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pqindex.format.pages as pages

    def broken(*a: Any, **k: Any) -> None:
        raise KeyError("oops")

    monkeypatch.setattr(pages, "check_file", broken)
    path = _small(tmp_path / "d.parquet")
    res = _run("check", str(path))
    assert res.exit_code == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "bug" in lines[0] and "--debug" in lines[0]
    assert "KeyError" in lines[0]
    res = _run("--debug", "check", str(path))
    assert res.exit_code == 1
    assert "Traceback" in res.stderr and "bug" in res.stderr


# ---------------------------------------------------------------- 2. wide trees, bounds


@pytest.fixture(scope="module")
def small_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _small(tmp_path_factory.mktemp("small") / "s.parquet", rows=3_000)


def _expected(path: Path, keep: Any) -> int:
    ids = pq.read_table(path, columns=["id"]).column("id").to_pylist()
    return sum(1 for i in ids if keep(i))


@pytest.mark.parametrize("terms", [1_000, 10_000])
def test_wide_or_and_and_plan_evaluate_and_explain(small_file: Path, terms: int) -> None:
    ds = pqindex.dataset(small_file)
    wanted = set(range(0, terms * 3, 7))
    where = " OR ".join(f"id = {i}" for i in sorted(wanted)[:terms])
    assert ds.to_table(where=where).num_rows == _expected(small_file, lambda i: i in wanted)
    assert "id" in ds.explain(where=where)
    assert ds.aggregate(["count(*)"], where=where)["count(*)"] == _expected(
        small_file, lambda i: i in wanted)
    where = " AND ".join(f"id != {i}" for i in range(terms))
    assert ds.to_table(where=where).num_rows == _expected(small_file, lambda i: i >= terms)


def test_1000_dnf_groups_and_a_deep_alternating_expression(small_file: Path) -> None:
    ds = pqindex.dataset(small_file)
    groups = [[("id", "=", i), ("s", "!=", "zzz")] for i in range(0, 3_000, 3)]
    assert ds.to_table(filters=groups).num_rows == 1_000
    # ((((id = 0 AND ...) OR ...) AND ...) ...: depth 3,000, built through the API.
    x = pqindex.col("id") == 0
    keep = {0}
    for i in range(1, 3_000):
        if i % 2:
            x = x | (pqindex.col("id") == i)
            keep.add(i)
        else:
            x = x & (pqindex.col("id") != i)
            keep.discard(i)
    assert ds.to_table(where=x).num_rows == len(keep)


def test_fold_bound_short_circuits_like_the_recursive_form(small_file: Path) -> None:
    from pqindex.expr.bind import bind
    from pqindex.expr.sql import parse_where
    from pqindex.format.match import Match
    from pqindex.plan.tree import evaluate

    with ParquetFile.open(small_file) as pf:
        expr = parse_where("id = 1 AND (id = 2 OR id = 3) AND id = 4")
        bound = bind(expr, pf.schema)
    seen: list[int] = []

    def leaf(pred: Any) -> Match:
        v = pred.values[0]
        seen.append(v)
        return Match.NONE if v == 3 else Match.SOME if v != 2 else Match.ALL

    assert evaluate(bound, leaf) == Match.SOME
    assert seen == [1, 2, 4]  # OR stopped at ALL (3 never asked)
    seen.clear()

    def none_at_1(pred: Any) -> Match:
        seen.append(pred.values[0])
        return Match.NONE

    assert evaluate(bound, none_at_1) == Match.NONE
    assert seen == [1]


def test_literal_size_and_in_list_bounds(small_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pqindex.expr import nodes

    # The bound is read at call time; a smaller one tests the same edge in 1/50 the time
    # (a 1,000,000-value list costs ~15 s of planning: per-value literals and evidence keys).
    monkeypatch.setattr(nodes, "MAX_IN_VALUES", 20_000)
    ds = pqindex.dataset(small_file)
    for where in ("id = " + "9" * 5_000, "id = 1." + "9" * 5_000):
        with pytest.raises(UserInputError, match="too"):
            ds.to_table(where=where)
    with pytest.raises(UserInputError, match="too large"):
        ds.to_table(where=pqindex.col("id") == 10 ** 5_000)
    # Checked by len() or by counting, never materialized.
    with pytest.raises(UserInputError, match="IN list longer"):
        ds.to_table(filters=[("id", "in", range(10 ** 9))])
    with pytest.raises(UserInputError, match="IN list longer"):
        ds.to_table(filters=[("id", "in", (i for i in iter(int, 1)))])  # endless
    with pytest.raises(UserInputError, match="IN list longer"):
        pqindex.col("id").isin(range(10 ** 30))
    rows = ds.to_table(filters=[("id", "in", range(nodes.MAX_IN_VALUES))]).num_rows
    assert rows == 3_000
    with pytest.raises(UserInputError, match="IN list longer than 20,000"):
        ds.to_table(filters=[("id", "in", list(range(nodes.MAX_IN_VALUES + 1)))])


def test_lone_surrogate_is_a_user_input_error(small_file: Path) -> None:
    ds = pqindex.dataset(small_file)
    with pytest.raises(UserInputError, match="surrogate"):
        ds.to_table(where="s = '\ud800'")
    with pytest.raises(UserInputError, match="surrogate"):
        ds.to_table(where=pqindex.col("s").isin(["ok", "\udfff"]))
    res = _run("query", str(small_file), "--where", "s = '\ud800'")
    assert res.exit_code == 2 and "surrogate" in res.stderr


def test_aggregate_type_errors_are_clear(small_file: Path, tmp_path: Path) -> None:
    ds = pqindex.dataset(small_file)
    with pytest.raises(UserInputError, match="sum needs a numeric column"):
        ds.aggregate(["sum(s)"])
    with pytest.raises(UserInputError, match="ordered values"):
        ds.aggregate(["max(tags)"])
    # Struct fields by dotted path (was a KeyError from pyarrow).
    path = tmp_path / "st.parquet"
    t = pa.table({"id": list(range(100)),
                  "p": [None if i % 7 == 0 else {"a": i} for i in range(100)]})
    pq.write_table(t, path)
    got = pqindex.dataset(path).aggregate(["sum(p.a)", "count(p.a)"], where="id > 10")
    keep = [i for i in range(11, 100) if i % 7]
    assert got == {"sum(p.a)": sum(keep), "count(p.a)": len(keep)}


# ---------------------------------------------------------------- 3. every operator, every evaluator

_NAN = float("nan")
_OP_TABLE = pa.table({
    "i": pa.array([1, 5, None, 7, 3, 5, None, 9, 0, -2] * 30, pa.int64()),
    "f": pa.array([0.0, -0.0, _NAN, None, 2.5, -1.0, _NAN, 7.0, None, 3.0] * 30, pa.float64()),
    "s": pa.array(["ab", "abc", None, "b", "", "ba", "abd", None, "zz", "a"] * 30),
})


def _like(v: str, pattern: str) -> bool:
    """SQL LIKE without an escape character, written out with fnmatch's rules."""
    import fnmatch

    glob = "".join("*" if c == "%" else "?" if c == "_" else f"[{c}]" for c in pattern)
    return fnmatch.fnmatchcase(v, glob)


def _ref(op: Any, v: Any, args: tuple[Any, ...]) -> bool:
    """SQL three-valued logic with IEEE floats, NULL never selects a row."""
    from pqindex.format.match import LeafOp

    if op == LeafOp.IS_NULL:
        return v is None
    if op == LeafOp.IS_NOT_NULL:
        return v is not None
    if v is None:
        return False
    nan = isinstance(v, float) and v != v
    table = {
        LeafOp.EQ: lambda: v == args[0], LeafOp.NE: lambda: nan or v != args[0],
        LeafOp.LT: lambda: v < args[0], LeafOp.LE: lambda: v <= args[0],
        LeafOp.GT: lambda: v > args[0], LeafOp.GE: lambda: v >= args[0],
        LeafOp.IN: lambda: v in args, LeafOp.NOT_IN: lambda: nan or v not in args,
        LeafOp.IS_NAN: lambda: nan, LeafOp.IS_NOT_NAN: lambda: not nan,
        LeafOp.STARTS_WITH: lambda: v.startswith(args[0]),
        LeafOp.NOT_STARTS_WITH: lambda: not v.startswith(args[0]),
        LeafOp.LIKE: lambda: _like(v, args[0]),
        LeafOp.NOT_LIKE: lambda: not _like(v, args[0]),
        LeafOp.ILIKE: lambda: _like(v.lower(), args[0].lower()),
        LeafOp.NOT_ILIKE: lambda: not _like(v.lower(), args[0].lower()),
        LeafOp.REGEXP: lambda: re.search(args[0], v) is not None,
        LeafOp.NOT_REGEXP: lambda: re.search(args[0], v) is None,
    }
    return bool(table[op]())


def _op_cases() -> list[tuple[Any, str, tuple[Any, ...]]]:
    from pqindex.format.match import LeafOp

    cases: list[tuple[Any, str, tuple[Any, ...]]] = []
    for op in (LeafOp.EQ, LeafOp.NE, LeafOp.LT, LeafOp.LE, LeafOp.GT, LeafOp.GE):
        cases += [(op, "i", (5,)), (op, "f", (0.0,)), (op, "s", ("ab",))]
    cases += [(op, c, a) for op in (LeafOp.IN, LeafOp.NOT_IN)
              for c, a in (("i", (1, 5, 11)), ("f", (-0.0, 2.5)), ("s", ("b", "zz")))]
    cases += [(op, c, ()) for op in (LeafOp.IS_NULL, LeafOp.IS_NOT_NULL) for c in "ifs"]
    cases += [(op, "f", ()) for op in (LeafOp.IS_NAN, LeafOp.IS_NOT_NAN)]
    cases += [(op, "s", (p,)) for op in (LeafOp.STARTS_WITH, LeafOp.NOT_STARTS_WITH)
              for p in ("ab", "", "b")]
    cases += [(op, "s", (p,)) for op in (LeafOp.LIKE, LeafOp.NOT_LIKE)
              for p in ("%b%", "_b%", "_", "%%", "%a", "__")]
    cases += [(op, "s", (p,)) for op in (LeafOp.ILIKE, LeafOp.NOT_ILIKE)
              for p in ("%B%", "AB", "_", "z%")]
    cases += [(op, "s", (p,)) for op in (LeafOp.REGEXP, LeafOp.NOT_REGEXP)
              for p in ("b", "^a", "b$", "a.d", "(ab|zz)", "^[bz]+$", "^$")]
    return cases


def test_every_leaf_op_is_covered_by_the_cases() -> None:
    from pqindex.format.match import LeafOp

    assert {c[0] for c in _op_cases()} == set(LeafOp)


@pytest.fixture(scope="module")
def op_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ops") / "ops.parquet"
    pq.write_table(_OP_TABLE, path, row_group_size=100, data_page_size=256,
                   write_page_index=True)
    return path


@pytest.mark.parametrize("case", _op_cases(), ids=lambda c: f"{c[1]} {c[0].value} {c[2]}")
def test_every_leaf_op_in_every_evaluator(case: Any, op_file: Path) -> None:
    import pyarrow.compute as pc

    from pqindex.expr import bind, to_arrow_mask, to_pyarrow_expression
    from pqindex.expr.nodes import Column, Literal, leaf_node
    from pqindex.expr.sql import parse_where

    op, name, args = case
    expr = leaf_node(op, Column(name), tuple(Literal(a) for a in args))
    want = [_ref(op, v, args) for v in _OP_TABLE.column(name).to_pylist()]
    with ParquetFile.open(op_file) as pf:
        bound = bind(expr, pf.schema)
    # Exact row evaluation: plain arrays, dictionary arrays, a pyarrow Expression.
    assert to_arrow_mask(bound, _OP_TABLE).to_pylist() == want, "to_arrow_mask"
    encoded = _OP_TABLE.set_column(2, "s", pc.dictionary_encode(_OP_TABLE.column("s")))
    assert to_arrow_mask(bound, encoded).to_pylist() == want, "to_arrow_mask (dictionary)"
    got = _OP_TABLE.filter(to_pyarrow_expression(bound)).num_rows
    assert got == sum(want), "to_pyarrow_expression"
    # The printed SQL parses back to the same leaf.
    assert parse_where(str(expr)) == expr
    # The planner (statistics, page index) and the executor: same rows as the reference.
    ids = [k for k, w in enumerate(want) if w]
    t = pqindex.dataset(op_file).to_table(where=expr)
    assert t.num_rows == len(ids), "dataset scan"
    assert t.column(name).to_pylist() == [_OP_TABLE.column(name)[k].as_py() for k in ids] or (
        name == "f")  # NaN != NaN in list equality
    assert pqindex.dataset(op_file).aggregate(["count(*)"], where=expr)["count(*)"] == len(ids)


def test_an_unknown_operator_fails_loudly_instead_of_matching_as_starts_with(
    op_file: Path,
) -> None:
    import dataclasses

    from pqindex.expr import bind, to_arrow_mask
    from pqindex.expr.nodes import col

    with ParquetFile.open(op_file) as pf:
        bound = bind(col("s") == "ab", pf.schema)
    bogus = dataclasses.replace(bound, op="bogus")  # type: ignore[type-var]
    with pytest.raises(AssertionError):
        to_arrow_mask(bogus, _OP_TABLE)


# ---------------------------------------------------------------- 4. schemas across files


def test_int32_and_int64_files_unify_to_int64(tmp_path: Path) -> None:
    pq.write_table(pa.table({"x": pa.array([1, 2, 3], pa.int32()), "s": ["a", "b", "c"]}),
                   tmp_path / "1.parquet")
    pq.write_table(pa.table({"x": pa.array([4, 2 ** 40], pa.int64()), "s": ["d", "e"]}),
                   tmp_path / "2.parquet")
    ds = pqindex.dataset(tmp_path)
    assert ds.schema.field("x").type == pa.int64()
    t = ds.to_table(where="x > 1")
    ref = pa.unify_schemas([pq.read_schema(tmp_path / f"{i}.parquet") for i in (1, 2)],
                           promote_options="permissive")
    assert t.schema.field("x").type == ref.field("x").type
    assert sorted(t.column("x").to_pylist()) == [2, 3, 4, 2 ** 40]
    assert len(list(ds.scan(where="x >= 4").to_batches())) >= 1


def test_irreconcilable_types_name_the_column_and_both_files(tmp_path: Path) -> None:
    pq.write_table(pa.table({"x": pa.array([1], pa.int64())}), tmp_path / "1.parquet")
    pq.write_table(pa.table({"x": pa.array(["z"])}), tmp_path / "2.parquet")
    with pytest.raises(UserInputError) as e:
        pqindex.dataset(tmp_path).to_table()
    msg = str(e.value)
    assert "1.parquet" in msg and "2.parquet" in msg and "'x'" in msg
    assert "int64" in msg and "string" in msg
    with pytest.raises(UserInputError):
        pqindex.dataset(tmp_path).schema  # noqa: B018


def test_a_column_missing_from_some_files_is_null_there(tmp_path: Path) -> None:
    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / "1.parquet")
    pq.write_table(pa.table({"x": [3], "y": ["new"]}), tmp_path / "2.parquet")
    t = pqindex.dataset(tmp_path).to_table()
    assert t.sort_by("x").to_pylist() == [{"x": 1, "y": None}, {"x": 2, "y": None},
                                          {"x": 3, "y": "new"}]


def test_hive_key_that_is_also_a_file_column_the_path_wins(tmp_path: Path) -> None:
    # Before: KeyError; then the file's column won. Rule (docs/semantics.md): the
    # path's value wins, as in DuckDB, polars and Spark (tests/test_hive_semantics.py).
    for part, ks in ((1, [10, 11]), (2, [20, 21])):
        d = tmp_path / f"k={part}"
        d.mkdir()
        pq.write_table(pa.table({"k": ks, "v": [part, part]}), d / "f.parquet")
    ds = pqindex.dataset(tmp_path)
    t = ds.to_table()
    assert t.schema.names == ["v", "k"]
    assert sorted(t.column("k").to_pylist()) == [1, 1, 2, 2]
    assert ds.to_table(where="k = 1").num_rows == 2
    assert ds.to_table(where="k = 20").num_rows == 0
    assert ds.aggregate(["sum(k)"], where="v = 1") == {"sum(k)": 2}


# ---------------------------------------------------------------- 5. the CLI keeps the user's files


def test_query_never_writes_over_its_input(tmp_path: Path) -> None:
    path = _small(tmp_path / "self.parquet")
    before = path.read_bytes()
    for fmt in ("parquet", "csv", "json", "table"):
        res = _run("query", str(path), "--format", fmt, "--output", str(path))
        assert res.exit_code == 2, (fmt, res.output)
        assert "overwrite the input" in res.stderr
        assert path.read_bytes() == before
    # Through another name: a symlink, and a directory input containing the output.
    link = tmp_path / "link.parquet"
    link.symlink_to(path)
    res = _run("query", str(link), "--format", "parquet", "--output", str(path))
    assert res.exit_code == 2 and path.read_bytes() == before
    res = _run("query", str(tmp_path), "--format", "parquet", "--output", str(path))
    assert res.exit_code == 2 and path.read_bytes() == before


def test_query_output_into_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    path = _small(tmp_path / "d.parquet")
    res = _run("query", str(path), "--format", "csv", "--output",
               str(tmp_path / "missing" / "out.csv"))
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not exist" in lines[0]


def test_query_output_is_written_whole_through_a_temporary(tmp_path: Path) -> None:
    path = _small(tmp_path / "d.parquet")
    out = tmp_path / "out.parquet"
    res = _run("query", str(path), "--where", "id < 10", "--format", "parquet", "--output",
               str(out), "--no-report")
    assert res.exit_code == 0, res.output
    assert pq.read_table(out).equals(pq.read_table(path).filter(pa.compute.less(
        pq.read_table(path).column("id"), 10)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.parquet", "out.parquet"]


def test_query_csv_with_a_list_column_writes_json_text(tmp_path: Path) -> None:
    import csv
    import io
    import json

    path = _small(tmp_path / "d.parquet")
    res = _run("query", str(path), "--where", "id < 3", "--format", "csv", "--no-report")
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    ref = pq.read_table(path).slice(0, 3).to_pylist()
    assert [json.loads(r["tags"]) for r in rows] == [r["tags"] for r in ref]
    assert [int(r["id"]) for r in rows] == [0, 1, 2]


def test_query_json_and_csv_hold_bytes_nan_and_nesting(tmp_path: Path) -> None:
    """JSON lines parse strictly (no bare NaN), binary values print as DuckDB prints
    BLOBs (checked against DuckDB's own cast), and bytes that are not UTF-8 reach CSV
    (pyarrow's CSV writer refuses them: an internal error before)."""
    import csv
    import io
    import json

    import duckdb

    blobs = [bytes(range(256)), b'a"b\'c\\d', None, b"", b"\xff\xfe"]
    t = pa.table({
        "id": pa.array(range(5), pa.int64()),
        "b": pa.array(blobs, pa.binary()),
        "lb": pa.array(blobs, pa.large_binary()),
        "f": [float("nan"), float("inf"), float("-inf"), 1.5, None],
        "st": pa.array([{"x": b"\x01", "y": float("nan")}, None, {"x": None, "y": 2.0},
                        {"x": b"q", "y": None}, None],
                       pa.struct([("x", pa.binary()), ("y", pa.float64())])),
    })
    path = tmp_path / "bytes.parquet"
    pq.write_table(t, path)
    con = duckdb.connect()
    con.register("t", t)
    duck = [r[0] for r in con.execute("SELECT b::VARCHAR FROM t ORDER BY id").fetchall()]
    assert duck[0].startswith("\\x00\\x01") and "\\x5C" in duck[1]  # DuckDB's escapes

    def strict(text: str) -> Any:
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in {text}"))

    res = _run("query", str(path), "--format", "json", "--no-report")
    assert res.exit_code == 0, res.output
    rows = [strict(line) for line in res.stdout.splitlines()]
    assert [r["b"] for r in rows] == duck
    assert [r["lb"] for r in rows] == duck
    assert [r["f"] for r in rows] == ["NaN", "Infinity", "-Infinity", 1.5, None]
    assert rows[0]["st"] == {"x": "\\x01", "y": "NaN"} and rows[1]["st"] is None

    res = _run("query", str(path), "--format", "csv", "--no-report")
    assert res.exit_code == 0, res.output
    got = list(csv.DictReader(io.StringIO(res.stdout)))
    # pyarrow's CSV writer leaves a null empty, as it writes an empty string.
    assert [r["b"] for r in got] == [d or "" for d in duck]
    assert strict(got[0]["st"]) == {"x": "\\x01", "y": "NaN"}

    res = _run("query", str(path), "--columns", "id,b", "--where", "id = 1", "--no-report")
    assert res.exit_code == 0, res.output
    assert duck[1] in res.stdout


# ---------------------------------------------------------------- 6. add_indexes, check


def _plain_file(path: Path, rows: int = 5_000) -> Path:
    pq.write_table(pa.table({"id": list(range(rows)), "s": [f"k{i % 40}" for i in range(rows)]}),
                   path, write_page_index=False, data_page_size=1_024)
    return path


def test_add_indexes_through_a_symlink_rewrites_the_target(tmp_path: Path) -> None:
    real = _plain_file(tmp_path / "real.parquet")
    link = tmp_path / "link.parquet"
    link.symlink_to(real.name)
    pqindex.add_indexes(link, page_index="add", distinct=["s"])
    assert link.is_symlink() and os.readlink(link) == real.name
    with ParquetFile.open(real) as pf:
        assert pf.offset_index(0, 0) is not None
        assert "pqindex.region" in pf.key_value_metadata
    assert pq.read_table(real).equals(pq.read_table(link))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.parquet", "real.parquet"]


def test_add_indexes_keeps_mode_and_owner(tmp_path: Path) -> None:
    path = _plain_file(tmp_path / "m.parquet")
    os.chmod(path, 0o640)
    if os.geteuid() == 0:
        os.chown(path, 4242, 4343)
    pqindex.add_indexes(path, page_index="add")
    st = os.stat(path)
    assert st.st_mode & 0o7777 == 0o640
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (4242, 4343)
    with ParquetFile.open(path) as pf:
        assert pf.offset_index(0, 0) is not None


def test_stale_staging_files_are_removed_live_ones_kept(tmp_path: Path) -> None:
    import subprocess

    from pqindex.write.add_indexes import STALE_SECONDS

    path = _plain_file(tmp_path / "d.parquet")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".d.parquet.pqindex-index-{dead.pid}-0badcafe"
    live = tmp_path / f".d.parquet.pqindex-index-{os.getppid()}-00c0ffee"
    old = tmp_path / ".d.parquet.pqindex-index-deadbeef"
    fresh = tmp_path / ".d.parquet.pqindex-index-feedf00d"
    other = tmp_path / f".e.parquet.pqindex-index-{dead.pid}-0badcafe"
    for p in (stale, live, old, fresh, other):
        p.write_bytes(b"x" * 1000)
    os.utime(old, (0, 0))
    assert STALE_SECONDS < 10 ** 9
    pqindex.add_indexes(path, distinct=["s"])
    left = {p.name for p in tmp_path.iterdir()}
    assert stale.name not in left and old.name not in left
    assert {live.name, fresh.name, other.name} <= left


def test_kill_9_during_add_indexes_leaves_nothing_for_the_next_run(tmp_path: Path) -> None:
    import subprocess
    import textwrap

    path = _plain_file(tmp_path / "d.parquet")
    before = path.read_bytes()
    script = textwrap.dedent(f"""
        import os, signal
        import pqindex
        import pqindex.write.add_indexes as ai
        real = ai.rewrite
        def rewrite(src, tail, dst=None, **kw):
            out = real(src, tail, dst, **kw)
            if ".pqindex-index-" in str(dst):
                os.kill(os.getpid(), signal.SIGKILL)  # staged file written, then killed
            return out
        ai.rewrite = rewrite
        pqindex.add_indexes({str(path)!r}, page_index="add", distinct=["s"])
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, check=False)
    assert proc.returncode == -9
    litter = [p for p in tmp_path.iterdir() if p.name != "d.parquet"]
    assert litter and all(".pqindex-index-" in p.name for p in litter)
    assert path.read_bytes() == before  # nothing lost
    pqindex.add_indexes(path, page_index="add", distinct=["s"])
    assert [p.name for p in tmp_path.iterdir()] == ["d.parquet"]


def _column_index_region(path: Path) -> tuple[int, int]:
    with ParquetFile.open(path) as pf:
        cc = pf.column_chunk(0, 0)
        assert cc.column_index_offset is not None and cc.column_index_length
        return cc.column_index_offset, cc.column_index_length


def test_check_fails_on_a_column_index_that_does_not_decode(tmp_path: Path) -> None:
    path = _small(tmp_path / "ci.parquet")
    assert _run("check", str(path)).exit_code == 0
    off, n = _column_index_region(path)
    data = bytearray(path.read_bytes())
    data[off:off + n] = b"\xff" * n
    path.write_bytes(bytes(data))
    inspect = _run("inspect", "--pages", "--json", str(path))
    res = _run("check", str(path))
    assert res.exit_code == 2, res.output  # was "ok" while inspect said corrupt
    assert "column index" in res.stderr and "row group 0" in res.stderr
    assert inspect.exit_code == 2


def test_check_fails_on_a_damaged_bloom_filter_bitset(tmp_path: Path) -> None:
    path = tmp_path / "b.parquet"
    pqindex.write_table(pa.table({"id": list(range(3_000))}), path, bloom=["id"])
    assert _run("check", str(path)).exit_code == 0
    with ParquetFile.open(path) as pf:
        cmd = pf.column_meta(0, 0)
        off, n = cmd.bloom_filter_offset, cmd.bloom_filter_length
    assert off is not None and n
    data = bytearray(path.read_bytes())
    data[off + n - 256:off + n] = bytes(256)  # the bitset's end zeroed: false negatives
    path.write_bytes(bytes(data))
    res = _run("check", str(path))
    assert res.exit_code == 2 and "Bloom filter" in res.stderr


def test_check_fails_on_a_damaged_embedded_region(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pqindex.write_table(pa.table({"s": [f"v{i % 30}" for i in range(3_000)]}), path,
                        indexes={"distinct": ["s"]})
    assert _run("check", str(path)).exit_code == 0
    with ParquetFile.open(path) as pf:
        off, n = map(int, pf.key_value_metadata["pqindex.region"].split(":"))
    data = bytearray(path.read_bytes())
    data[off + n // 3] ^= 0xFF  # inside the blobs
    path.write_bytes(bytes(data))
    res = _run("check", str(path))
    assert res.exit_code == 2
    assert "embedded" in res.stderr.lower() or "checksum" in res.stderr


# ---------------------------------------------------------------- 7. the report equals the I/O trace


_INT_COLS = ("n", "v", "w")


@pytest.fixture(scope="module")
def report_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    import numpy as np

    d = tmp_path_factory.mktemp("report")
    rng = np.random.default_rng(7)

    def table(rows: int, seed: int) -> pa.Table:
        r = np.random.default_rng(seed)
        return pa.table({
            "n": pa.array(np.arange(rows, 0, -1), mask=r.random(rows) < 0.02),
            "v": pa.array(r.integers(0, 1_000, rows)),
            "w": pa.array(np.arange(rows) // 7, mask=r.random(rows) < 0.3),
            "s": [f"s{i % 37:02d}" for i in range(rows)],
        })

    # Sorted descending, dictionary pages ending inside the 64 KiB tail.
    desc = d / "desc.parquet"
    pq.write_table(table(60_000, 1), desc, row_group_size=25_000, data_page_size=2_048,
                   write_page_index=True)
    multi = []
    for k, opts in enumerate(({"compression": "snappy"}, {"use_dictionary": False},
                              {"data_page_version": "2.0", "compression": "zstd"})):
        p = d / f"part{k}.parquet"
        pq.write_table(table(8_000, 10 + k), p, row_group_size=3_000, data_page_size=1_024,
                       write_page_index=True, **opts)
        multi.append(p)
    assert rng is not None
    return {"desc": [desc], "multi": multi}


def _leaf() -> st.SearchStrategy[tuple[str, Any]]:
    ops = st.sampled_from(["<", "<=", ">", ">=", "=", "!=", "IS NULL", "IS NOT NULL"])
    return st.tuples(st.sampled_from(_INT_COLS), ops, st.integers(-10, 61_000))


_preds = st.recursive(
    _leaf(),
    lambda inner: st.tuples(st.sampled_from(["AND", "OR"]),
                            st.lists(inner, min_size=2, max_size=4)),
    max_leaves=10,
)


def _sql(p: Any) -> str:
    if p[0] in ("AND", "OR"):
        return "(" + f" {p[0]} ".join(_sql(c) for c in p[1]) + ")"
    c, op, v = p
    return f"{c} {op}" if "NULL" in op else f"{c} {op} {v}"


def _truth(p: Any, row: dict[str, Any]) -> bool | None:
    """SQL three-valued logic, in plain Python: the reference."""
    if p[0] in ("AND", "OR"):
        vals = [_truth(c, row) for c in p[1]]
        if p[0] == "AND":
            return False if False in vals else None if None in vals else True
        return True if True in vals else None if None in vals else False
    c, op, v = p
    x = row[c]
    if op == "IS NULL":
        return x is None
    if op == "IS NOT NULL":
        return x is not None
    if x is None:
        return None
    return {"<": x < v, "<=": x <= v, ">": x > v, ">=": x >= v, "=": x == v, "!=": x != v}[op]


_ROWS: dict[str, list[dict[str, Any]]] = {}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pred=_preds, which=st.sampled_from(["desc", "multi"]),
       columns=st.sampled_from([None, ["s"], ["n", "w"]]), gap=st.sampled_from([0, None]))
def test_report_counters_equal_the_io_trace_and_no_byte_is_read_twice(
    report_files: dict[str, list[Path]], pred: Any, which: str, columns: Any, gap: int | None
) -> None:
    from pqindex.scan.executor import ScanOptions

    paths = report_files[which]
    if which not in _ROWS:
        _ROWS[which] = [r for p in paths for r in pq.read_table(p).to_pylist()]
    # Without coalescing, and with the store's policy (a merged gap must skip what
    # was read already): any overlap of two requests is a re-read.
    ds = pqindex.dataset([str(p) for p in paths], scan_options=ScanOptions(coalesce_gap=gap))
    scan = ds.scan(columns=columns, where=_sql(pred))
    got = scan.to_table()
    want = [r for r in _ROWS[which] if _truth(pred, r) is True]
    assert got.num_rows == len(want)
    names = columns or ["n", "v", "w", "s"]
    key = lambda r: tuple((r[c] is None, r[c] or 0) for c in names)  # noqa: E731
    assert sorted(got.to_pylist(), key=key) == sorted(
        ({c: r[c] for c in names} for r in want), key=key)
    rep = scan.report
    opened = ds.io_stats()
    # Every I/O counter is the trace's (the dataset was fresh: its trace is this scan's).
    assert rep.requests == sum(len(s.trace) for s in opened.values())
    assert rep.bytes_read == sum(n for s in opened.values() for _o, n in s.trace)
    assert 0 <= rep.pages_read <= rep.pages_total
    assert rep.data_bytes <= rep.bytes_read
    for path, stats in opened.items():
        # Only data bytes the tail (the file's first request) holds may be read again:
        # pyarrow reads the last row group whole rather than it going the slow way.
        tail = stats.trace[0]
        with ParquetFile.open(path) as pf:
            data_end = max(sum(chunk_range(pf.column_meta(rg, c.index)))
                           for rg in range(pf.num_row_groups) for c in pf.schema.leaves)
        for (a, n), (b, m) in itertools.pairwise(sorted(stats.trace)):
            again = (b, min(a + n, b + m))
            assert b >= a + n or (tail[0] <= again[0] and again[1] <= min(sum(tail), data_end)
                                  ), f"{path}: bytes [{b}, {a + n}) read twice"


# ---------------------------------------------------------------- 9. the public plan


def test_dataset_plan_is_public_and_typed(tmp_path: Path) -> None:
    from pqindex.dataset.plan import DatasetPlan, FileEntry

    for part in (1, 2):
        d = tmp_path / f"p={part}"
        d.mkdir()
        pq.write_table(pa.table({"id": list(range(part * 1_000, part * 1_000 + 1_000))}),
                       d / "f.parquet", row_group_size=250, write_page_index=True)
    ds = pqindex.dataset(tmp_path)
    plan = ds.plan(["id"], "p = 2 AND id < 2100")
    assert isinstance(plan, DatasetPlan) and plan.fields == ("id",)
    assert all(isinstance(f, FileEntry) for f in plan.files)
    by_part = {f.partition["p"]: f for f in plan.files}
    assert by_part[1].skipped_by == "partition" and by_part[1].file is None
    kept = by_part[2]
    assert kept.skipped_by is None and kept.row_groups_kept == [0]
    assert kept.row_ranges[0].count() >= 100  # may keep too much, never too little
    assert set(kept.reasons) == {0, 1, 2, 3}
    assert plan.kept == [kept]
    assert plan.partition_types == {"p": pa.int64()}
    # The aggregate runs on the same public plan.
    assert ds.aggregate(["count(*)", "max(id)"], where="p = 2 AND id < 2100") == {
        "count(*)": 100, "max(id)": 2099}
    assert str(tmp_path / "p=2" / "f.parquet") in ds.io_stats()


def test_a_plan_is_read_as_it_is(tmp_path: Path) -> None:
    """``scan(plan=)`` reads the plan it is given (no second planning pass: no planner
    reads at all), with the rows of a fresh scan; a second use plans afresh."""
    import importlib

    from pqindex.errors import UserInputError

    planning = importlib.import_module("pqindex.dataset.planning")  # plans the files

    path = tmp_path / "f.parquet"
    t = pa.table({"id": list(range(4_000)), "s": [str(i % 7) for i in range(4_000)]})
    pq.write_table(t, path, row_group_size=1_000, data_page_size=512, write_page_index=True)
    where = "id BETWEEN 1500 AND 2600 AND s = '3'"
    want = pqindex.dataset(path).to_table(["id", "s"], where)
    assert want.equals(t.filter(pc.and_(pc.and_(pc.greater_equal(t["id"], 1500),
                                                pc.less_equal(t["id"], 2600)),
                                        pc.equal(t["s"], "3"))))
    ds = pqindex.dataset(path)
    plan = ds.plan(["id", "s"], where)
    calls = []
    real = planning.plan_file

    def counting(*a: Any, **kw: Any) -> Any:
        calls.append(1)
        return real(*a, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(planning, "plan_file", counting)
        scan = ds.scan(plan=plan)
        assert scan.to_table().equals(want) and calls == []
        assert scan.report.row_groups_skipped == plan.report.row_groups_skipped
        assert sum(scan.report.row_groups_skipped.values()) == 2
        assert ds.scan(plan=plan).to_table().equals(want) and calls  # planned again
    with pytest.raises(UserInputError):
        pqindex.dataset(path).scan(plan=ds.plan(["id"], where))  # another dataset's
    with pytest.raises(UserInputError):
        ds.scan(["id"], plan=ds.plan(["id"], where))


def test_no_import_cycle_between_aggregate_and_dataset() -> None:
    import ast
    import importlib
    import inspect

    agg = importlib.import_module("pqindex.dataset.aggregate")

    tree = ast.parse(inspect.getsource(agg))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "pqindex.dataset.dataset" not in imported


def test_index_kinds_come_from_the_registry(tmp_path: Path) -> None:
    from pqindex.indexes import REGISTRY
    from pqindex.write.writer import INDEX_KINDS

    assert set(INDEX_KINDS) == set(REGISTRY)
    a = _plain_file(tmp_path / "a.parquet")
    b = _plain_file(tmp_path / "b.parquet")
    c = _plain_file(tmp_path / "c.parquet")
    new = pqindex.add_indexes(a, indexes={"distinct": ["s"], "zone_maps": "id"})
    old = pqindex.add_indexes(b, distinct=["s"], zone_maps=["id"])
    assert new[0].indexes == old[0].indexes == {"distinct": ["s"], "zone_maps": ["id"]}
    res = _run("index", "--index", "distinct=s", "--index", "zone_maps=id", "--json", str(c))
    assert res.exit_code == 0, res.output
    with ParquetFile.open(a) as pa_, ParquetFile.open(c) as pc_:
        assert pa_.key_value_metadata.keys() == pc_.key_value_metadata.keys()
    with pytest.raises(UserInputError, match="unknown index kind"):
        pqindex.add_indexes(a, indexes={"nope": ["s"]})
    assert _run("index", "--index", "distinct", str(c)).exit_code == 2
    out = tmp_path / "w.parquet"
    pqindex.write_table(pa.table({"s": ["x", "y"] * 100}), out, indexes={"distinct": "s"})
    with ParquetFile.open(out) as pf:
        assert "pqindex.region" in pf.key_value_metadata


def test_deep_expressions_hash_and_compare_without_recursion() -> None:
    import functools
    import operator

    def chain(n: int, last: int) -> Any:
        return functools.reduce(operator.or_, [pqindex.col("id") == i for i in range(n - 1)]
                                + [pqindex.col("id") == last])

    a, b, c = chain(10_000, 9_999), chain(10_000, 9_999), chain(10_000, -1)
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert a != c
    deep = functools.reduce(lambda e, _: ~e, range(5_001), pqindex.col("id") == 1)
    assert deep == functools.reduce(lambda e, _: ~e, range(5_001), pqindex.col("id") == 1)
    assert isinstance(hash(deep), int)
