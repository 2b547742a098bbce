"""Which files a dataset path names: directories, glob patterns, ``~``.

The reference for a pattern is Python's own matching of the same pattern against
the tree's relative paths (``pathlib.PurePosixPath.full_match`` is 3.13+, so a
segment-by-segment ``fnmatch`` written here independently), and the rows are
``pyarrow.parquet.read_table`` of the matched files.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pqindex
from pqindex.dataset.discovery import _glob_match, discover

TREE = [
    "a.parquet", "b.pq", "dt=2024-01-01/part-0.parquet", "dt=2024-01-01/part-1.parquet",
    "dt=2024-01-02/part-0.parquet", "dt=2024-01-03/x/part-0.parquet", "_tmp/part-0.parquet",
    ".hidden/part-0.parquet", "dt=2024-01-02/_SUCCESS",
]


def _tree(root: Path) -> None:
    for i, rel in enumerate(TREE):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.name.startswith("_"):
            p.write_bytes(b"")
            continue
        pq.write_table(pa.table({"id": np.arange(i * 10, i * 10 + 10, dtype=np.int64)}), p)


def _expected(root: Path, pattern: str) -> list[str]:
    """The tree's data files (no ``_``/``.`` component) matching ``pattern`` below root."""
    def matches(parts: list[str], pat: list[str]) -> bool:
        if not pat:
            return not parts
        if pat[0] == "**":
            return any(matches(parts[i:], pat[1:]) for i in range(len(parts) + 1))
        return bool(parts) and fnmatch.fnmatchcase(parts[0], pat[0]) and matches(
            parts[1:], pat[1:])

    return sorted(str(root / rel) for rel in TREE
                  if not any(c.startswith(("_", ".")) for c in rel.split("/"))
                  and matches(rel.split("/"), pattern.split("/")))


@pytest.mark.parametrize("pattern", [
    "*.parquet", "*", "*/*.parquet", "dt=2024-01-0[12]/*", "**/*.parquet", "**",
    "dt=*/part-?.parquet", "**/x/*", "dt=2024-01-01/part-1.parquet",
])
def test_glob_patterns_name_the_files_python_matches(tmp_path: Path, pattern: str) -> None:
    _tree(tmp_path)
    want = _expected(tmp_path, pattern)
    if "*" not in pattern and "?" not in pattern and "[" not in pattern:
        assert [f.path for f in discover(str(tmp_path / pattern)).files] == want
        return
    got = sorted(f.path for f in discover(f"{tmp_path}/{pattern}").files)
    assert got == want
    ds = pqindex.dataset(f"{tmp_path}/{pattern}")
    rows = sorted(ds.to_table(columns=["id"])["id"].to_pylist())
    assert rows == sorted(v for p in want for v in pq.read_table(p)["id"].to_pylist())


def test_a_pattern_reads_hive_partitions_below_its_base(tmp_path: Path) -> None:
    _tree(tmp_path)
    ds = pqindex.dataset(f"{tmp_path}/dt=*/part-0.parquet")
    assert ds.schema.field("dt").type == pa.date32()
    t = ds.to_table(where="dt >= DATE '2024-01-02'")
    assert sorted(t["id"].to_pylist()) == list(range(40, 50))


def test_no_match_tilde_and_literal_brackets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    _tree(tmp_path)
    with pytest.raises(pqindex.UserInputError, match="no data files match"):
        pqindex.dataset(f"{tmp_path}/*.csv").to_table()
    with pytest.raises(pqindex.UserInputError, match="no such directory"):
        pqindex.dataset(f"{tmp_path}/nope/*.parquet").to_table()
    monkeypatch.setenv("HOME", str(tmp_path))
    assert pqindex.dataset("~/a.parquet").to_table().num_rows == 10
    assert pqindex.dataset("~/*.pq").to_table().num_rows == 10
    # A file whose name holds glob characters is that file when it exists.
    odd = tmp_path / "odd[1].parquet"
    pq.write_table(pa.table({"id": [7]}), odd)
    assert pqindex.dataset(str(odd)).to_table()["id"].to_pylist() == [7]


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(parts=st.lists(st.sampled_from(["a", "b", "ab", "x=1"]), max_size=4),
       pattern=st.lists(st.sampled_from(["*", "**", "a", "?", "a*", "[ab]", "x=*"]),
                        min_size=1, max_size=4))
def test_glob_match_agrees_with_a_regex_translation(parts: list[str], pattern: list[str]
                                                    ) -> None:
    """``**`` as zero or more whole segments, the rest as fnmatch within one."""
    import re

    def seg(p: str) -> str:
        t = fnmatch.translate(p)[4:-3]  # '(?s:...)\\Z' without the wrappers
        # Within one segment: '*' and '?' never match a '/'.
        return t.replace(".*", "\0").replace(".", "[^/]").replace("\0", "[^/]*")

    rx = "".join("(?:[^/]+/)*" if p == "**" else seg(p) + "/" for p in pattern)
    assert _glob_match(parts, pattern) == bool(
        re.fullmatch(rx, "".join(x + "/" for x in parts))), (parts, pattern)


def test_an_explicit_file_list_is_unchanged(tmp_path: Path) -> None:
    _tree(tmp_path)
    files = [str(tmp_path / "a.parquet"), str(tmp_path / "b.pq")]
    assert [f.path for f in discover(files).files] == files
    assert os.path.exists(files[0])


def test_index_takes_a_pattern_and_manifest_refuses_one(tmp_path: Path) -> None:
    from pqindex.dataset.manifest import write_manifest
    from pqindex.write.add_indexes import index_targets

    _tree(tmp_path)
    pattern = f"{tmp_path}/dt=*/*.parquet"
    targets = index_targets([pattern], tmp_path / "out")
    assert [t.source for t in targets] == _expected(tmp_path, "dt=*/*.parquet")
    # Each output lands under its path relative to the pattern's base.
    assert [t.output for t in targets] == [
        str(tmp_path / "out" / Path(t.source).relative_to(tmp_path)) for t in targets]
    with pytest.raises(pqindex.UserInputError, match="no data files match"):
        index_targets([f"{tmp_path}/*.csv"])
    with pytest.raises(pqindex.UserInputError, match="not a pattern"):
        write_manifest(pattern)


def test_an_empty_delta_log_is_read_as_parquet_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A directory holding a ``_delta_log`` without any commit is no Delta table yet:
    its files are read (as Spark's read.parquet and DuckDB's read_parquet read them),
    and every scan's report, and the log once, say so. (A table with commits is read
    through its log: tests/test_tables_delta.py; a damaged log is an error.)"""
    import logging

    _tree(tmp_path)
    (tmp_path / "_delta_log").mkdir()
    with caplog.at_level(logging.WARNING, logger="pqindex"):
        ds = pqindex.dataset(tmp_path)
        scan = ds.scan(columns=["id"])
        assert scan.to_table().num_rows == 10 * len(_expected(tmp_path, "**"))
    assert any("Delta Lake" in w and "_delta_log" in w for w in scan.report.warnings)
    assert sum("Delta Lake" in r.getMessage() for r in caplog.records) == 1
    plain = pqindex.dataset(tmp_path / "dt=2024-01-01").scan()
    assert plain.to_table().num_rows == 20 and not plain.report.warnings
    (tmp_path / "_delta_log" / "00000000000000000000.json").write_text("{}")
    with pytest.raises(pqindex.UserInputError, match="Delta"):
        pqindex.dataset(tmp_path)
