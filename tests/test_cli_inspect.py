"""`pqindex inspect` and `pqindex check` on real files: output, JSON schema, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from conftest import PARQUET_TESTING
from pqindex.cli import cli

CORPUS = PARQUET_TESTING
DATA = CORPUS / "data"
BAD = CORPUS / "bad_data"


def _is_encrypted(p: Path) -> bool:
    with p.open("rb") as f:
        f.seek(-4, 2)
        tail = f.read(4)
    return tail == b"PARE" or "encrypt" in p.name


ALL_DATA = sorted([*DATA.rglob("*.parquet"), *DATA.rglob("*.parquet.encrypted")])
PLAIN = [p for p in ALL_DATA if not _is_encrypted(p)]
ENCRYPTED = [p for p in ALL_DATA if _is_encrypted(p)]
BAD_FILES = sorted(BAD.glob("*.parquet"))


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


def test_corpus_is_there() -> None:
    assert len(PLAIN) >= 60, "the parquet-testing corpus is missing"
    assert ENCRYPTED and BAD_FILES


@pytest.mark.parametrize("path", PLAIN, ids=lambda p: p.name)
def test_every_corpus_file_inspects_as_json_with_pages(path: Path) -> None:
    code, out, err = run("inspect", str(path), "--pages", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["schema_version"] == 1
    try:
        md = pq.read_metadata(path)
    except pa.ArrowInvalid:
        # pyarrow refuses some schemas (incorrect_map_schema); the metadata is still readable.
        assert report["num_rows"] >= 0
        return
    assert report["num_rows"] == md.num_rows
    assert report["num_row_groups"] == md.num_row_groups
    assert report["num_columns"] == md.num_columns
    for g, rg in zip(report["row_groups"], range(md.num_row_groups), strict=True):
        assert g["num_rows"] == md.row_group(rg).num_rows
        for c in g["columns"]:
            cm = md.row_group(rg).column(c["column"])
            assert c["num_values"] == cm.num_values
            assert c["compressed_size"] == cm.total_compressed_size
            assert (c["column_index"] is not None) == cm.has_column_index
            assert (c["offset_index"] is not None) == cm.has_offset_index
            pages = c["pages"]
            if pages is not None:
                rows = sum(p["rows"] for p in pages["pages"])
                assert rows == md.row_group(rg).num_rows


@pytest.mark.parametrize("path", PLAIN[:10], ids=lambda p: p.name)
def test_human_output_names_the_file_and_columns(path: Path) -> None:
    code, out, err = run("inspect", str(path), "--pages")
    assert code == 0, err
    assert str(path) in out
    md = pq.read_metadata(path)
    assert f"{md.num_rows:,} rows" in out


@pytest.mark.parametrize("path", ENCRYPTED, ids=lambda p: p.name)
def test_encrypted_files_fail_with_one_line(path: Path) -> None:
    code, out, err = run("inspect", str(path))
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "encrypt" in err and str(path) in err


def test_bad_data_fails_cleanly_in_check() -> None:
    # ARROW-GH-43605 was a reader crash on a valid file (bit width 0 with a one-entry
    # dictionary); today's readers decode it, and so does the check.
    valid = {"ARROW-GH-43605.parquet"}
    for path in BAD_FILES:
        code, out, err = run("check", str(path))
        if path.name in valid:
            assert code == 0, err
            continue
        assert code == 2, f"{path.name}: {out}"
        assert err.startswith("pqindex: error: ") and str(path) in err
        assert "Traceback" not in err


@pytest.mark.parametrize("path", BAD_FILES, ids=lambda p: p.name)
def test_bad_data_inspect_never_crashes(path: Path) -> None:
    code, _out, err = run("inspect", str(path), "--pages", "--json")
    assert code in (0, 2), err
    if code == 2:
        assert err.count("\n") == 1 and str(path) in err


def test_missing_file_and_not_parquet(tmp_path: Path) -> None:
    code, _, err = run("inspect", str(tmp_path / "nope.parquet"))
    assert code == 2 and "no such file" in err
    txt = tmp_path / "notes.txt"
    txt.write_text("hello, this is not parquet at all")
    code, _, err = run("inspect", str(txt))
    assert code == 2 and "not a Parquet file" in err
    code, _, err = run("inspect", str(tmp_path))
    assert code == 2 and "directory" in err
    tiny = tmp_path / "tiny.parquet"
    tiny.write_bytes(b"PAR1")
    code, _, err = run("inspect", str(tiny))
    assert code == 2 and "too small" in err


def test_truncated_file(tmp_path: Path) -> None:
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": list(range(1000))}), src, write_page_index=True)
    data = src.read_bytes()
    for cut in (1, 8, 100, len(data) // 2):
        bad = tmp_path / f"cut{cut}.parquet"
        bad.write_bytes(data[:-cut])
        code, _, err = run("inspect", str(bad), "--pages")
        assert code == 2, f"cut {cut}"
        assert str(bad) in err and err.count("\n") == 1


def test_corrupt_footer_names_offset(tmp_path: Path) -> None:
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": list(range(100))}), src)
    data = bytearray(src.read_bytes())
    footer_len = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - footer_len
    data[start : start + 8] = b"\xff" * 8  # garbage where the first field headers were
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(data))
    code, _, err = run("inspect", str(bad))
    assert code == 2 and "offset" in err


def test_row_group_and_column_filters(tmp_path: Path) -> None:
    p = tmp_path / "f.parquet"
    t = pa.table({"a": list(range(3000)), "b": [str(i) for i in range(3000)]})
    pq.write_table(t, p, row_group_size=1000, write_page_index=True, max_rows_per_page=100)
    code, out, err = run(
        "inspect", str(p), "--row-group", "1", "--column", "b", "--pages", "--json"
    )
    assert code == 0, err
    r = json.loads(out)
    assert [g["index"] for g in r["row_groups"]] == [1]
    assert [c["path"] for c in r["columns"]] == ["b"]
    pages = r["row_groups"][0]["columns"][0]["pages"]
    assert len(pages["pages"]) == 10
    assert pages["pages"][0]["first_row"] == 0 and pages["pages"][0]["rows"] == 100
    code, _, err = run("inspect", str(p), "--row-group", "7")
    assert code == 2 and "row group 7" in err
    code, _, err = run("inspect", str(p), "--column", "nope")
    assert code == 2 and "nope" in err


def test_long_values_are_shortened_for_people_but_not_in_json(tmp_path: Path) -> None:
    p = tmp_path / "long.parquet"
    long = "k" * 300
    pq.write_table(pa.table({"s": [long, long + "z"]}), p, write_page_index=True)
    code, out, _ = run("inspect", str(p), "--pages")
    assert code == 0 and long not in out and "…" in out
    code, out, _ = run("inspect", str(p), "--pages", "--json")
    page = json.loads(out)["row_groups"][0]["columns"][0]["pages"]["pages"][0]
    assert page["min"] == long and page["max"] == long + "z"


def test_cli_build_defaults_are_the_writers() -> None:
    # The CLI spells its defaults out (no heavy import at start-up): keep them in step.
    from pqindex.cli import build
    from pqindex.write.writer import DEFAULT_PAGE_ROWS, DEFAULT_ROW_GROUP_ROWS

    defaults = {p.name: p.default for p in build.params}
    assert defaults["page_rows"] == DEFAULT_PAGE_ROWS
    assert defaults["row_group_rows"] == DEFAULT_ROW_GROUP_ROWS
