"""The CLI keeps outputs out of its inputs, says why a path cannot be read, and prints
a table a person can read: a screenful by default, one line a row (issue 39)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import pqindex
from pqindex.cli import cli
from pqindex.errors import StorageError
from pqindex.io.errors import ObjectNotFoundError, StorageAccessError

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner(env=env).invoke(cli, list(args), catch_exceptions=False)


def _lake(d: Path, files: int = 2, rows: int = 300) -> Path:
    d.mkdir()
    for k in range(files):
        ids = np.arange(k * rows, (k + 1) * rows, dtype=np.int64)
        pq.write_table(pa.table({"id": ids, "s": [f"v{i % 7}" for i in ids]}),
                       d / f"part-{k}.parquet")
    return d


def _listing(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


# ---------------------------------------------------------------- outputs inside inputs


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_query_refuses_an_output_inside_its_input_directory(tmp_path: Path, fmt: str) -> None:
    """``--output DIR/out`` that does not exist yet: refused (the next query over DIR
    would read it too), as through a glob of DIR or a symlink to DIR."""
    d = _lake(tmp_path / "d")
    before = _listing(d)
    (tmp_path / "link").symlink_to(d)
    for given, out in ((d, d / "out.parquet"), (f"{d}/*.parquet", d / "out.parquet"),
                       (tmp_path / "link", d / "new.parquet"),
                       (d, tmp_path / "link" / "x.parquet")):
        res = _run("query", str(given), "--format", fmt, "--output", str(out))
        assert res.exit_code == 2, (given, out, res.output)
        assert "inside the input" in res.stderr, res.stderr
        assert _listing(d) == before
    res = _run("query", str(d), "--format", fmt, "--output", str(tmp_path / "out"),
               "--no-report")
    assert res.exit_code == 0, res.output


def test_index_refuses_an_output_inside_its_input(tmp_path: Path) -> None:
    d = _lake(tmp_path / "d")
    before = _listing(d)
    for out in (d / "indexed", d, d / "deeper" / "still"):
        res = _run("index", str(d), "--hll", "id", "--output", str(out))
        assert res.exit_code == 2, (out, res.output)
        assert "inside the input" in res.stderr
        assert _listing(d) == before
    # A file given alone, its own directory as the output: it would be written over.
    res = _run("index", str(d / "part-0.parquet"), "--hll", "id", "--output", str(d))
    assert res.exit_code == 2 and "overwrite the input" in res.stderr, res.output
    assert _listing(d) == before
    res = _run("index", str(d), "--hll", "id", "--output", str(tmp_path / "indexed"))
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "indexed").glob("*.parquet")) == [
        "part-0.parquet", "part-1.parquet"]


# ---------------------------------------------------------------- storage errors


def test_missing_files_and_directories_are_storage_errors(tmp_path: Path) -> None:
    from pqindex.format.file import ParquetFile

    with pytest.raises(ObjectNotFoundError, match="open failed: no such file"):
        ParquetFile.open(tmp_path / "nope.parquet")
    with pytest.raises(StorageError, match="is a directory, not a file"):
        ParquetFile.open(tmp_path)
    f = tmp_path / "f.parquet"
    f.write_bytes(b"x")
    with pytest.raises(ObjectNotFoundError, match="not a directory"):
        ParquetFile.open(f / "inner.parquet")
    assert issubclass(StorageAccessError, pqindex.PqIndexError)


def _without_permission_override() -> list[str]:
    """A command prefix that makes this process obey file permissions: root drops the
    capabilities that bypass them (setpriv)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root without setpriv: permissions cannot be denied")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_without_permission_override(), sys.executable, "-m", "pqindex",
                           *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})


def test_unreadable_files_and_directories_say_permission_denied(tmp_path: Path) -> None:
    """A directory the user cannot list is not a directory without data files; a file
    the user cannot read is not missing."""
    d = _lake(tmp_path / "d")
    os.chmod(d, 0)
    try:
        out = _cli("query", str(d))
        assert out.returncode == 2, out
        assert "list failed: permission denied" in out.stderr, out.stderr
        assert "no data files" not in out.stderr
    finally:
        os.chmod(d, 0o755)
    os.chmod(d / "part-1.parquet", 0)
    out = _cli("query", str(d))
    assert out.returncode == 2, out
    assert "part-1.parquet: open failed: permission denied" in out.stderr, out.stderr
    os.chmod(d / "part-1.parquet", 0o644)


# ---------------------------------------------------------------- the table format


def _wide(path: Path, rows: int, columns: int = 22) -> pa.Table:
    t = pa.table({f"column_{k:02d}": [f"value {i} of a rather long column {k}" if k % 3
                                      else i * 1000 + k for i in range(rows)]
                  for k in range(columns)})
    pq.write_table(t, path)
    return t


def test_the_table_is_a_screenful_and_says_what_was_left_out(tmp_path: Path) -> None:
    path = tmp_path / "w.parquet"
    _wide(path, 500)
    env = {"LINES": "30", "COLUMNS": "100"}
    res = _run("query", str(path), "--no-report", env=env)
    assert res.exit_code == 0, res.output
    lines = res.stdout.rstrip("\n").splitlines()
    shown = 30 - 6
    assert len(lines) == shown + 3  # the header, its rule, the rows, the last line
    assert all(len(line) <= 100 for line in lines[:-1])  # one line a row, cut to fit
    last = lines[-1]
    assert f"{shown} rows" in last and f"{500 - shown} more not shown" in last
    assert "18 more column(s) not shown: column_04, " in last
    # --limit: that many rows, no note about rows left.
    res = _run("query", str(path), "--no-report", "--limit", "3", env=env)
    lines = res.stdout.rstrip("\n").splitlines()
    assert len(lines) == 3 + 3 and "more not shown" not in lines[-1]
    # With a predicate: what is left counts the matching rows only.
    res = _run("query", str(path), "--no-report", "--where", "column_00 < 100000", env=env)
    assert f"{100 - shown} more not shown" in res.stdout.splitlines()[-1]
    # Few rows: all of them, nothing said of rows left out.
    res = _run("query", str(path), "--no-report", "--where", "column_00 < 5000",
               "--columns", "column_00,column_01", env=env)
    lines = res.stdout.rstrip("\n").splitlines()
    assert len(lines) == 5 + 3 and lines[-1] == "5 rows"


def test_columns_accepts_quoted_names(tmp_path: Path) -> None:
    path = tmp_path / "q.parquet"
    pq.write_table(pa.table({"a,b": [1, 2], "c": ["x", "y"], 'say "hi"': [True, False]}), path)
    res = _run("query", str(path), "--format", "json", "--no-report",
               "--columns", '"a,b", c', "--columns", '"say ""hi"""')
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[0] == '{"a,b": 1, "c": "x", "say \\"hi\\"": true}'
    res = _run("query", str(path), "--columns", '"a,b', "--no-report")
    assert res.exit_code == 2 and "--columns" in res.stderr
