"""Regression tests for issue 13: every failure a PqIndexError, nothing of the user's
lost, no silent wrong rows. One test (or more) per bullet of the issue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import pqindex
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
from pqindex.format.file import ParquetFile
from pqindex.format.pages import walk_pages

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "parquet-testing"


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
