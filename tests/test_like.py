"""``LIKE`` and ``ILIKE`` with ``%`` and ``_`` anywhere in the pattern.

Reference: DuckDB's ``LIKE`` (no escape character by default: a backslash is then
refused here, where DuckDB and Spark disagree; ``ESCAPE 'c'`` as both read it) on the
same files, by the rows' ids. Files from pyarrow
(dictionary-encoded strings, one vocabulary per row group so dictionaries rule row
groups out), pqindex's writer with a distinct-value index, and a hive-partitioned
lake whose partition value is matched against the pattern.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import pqindex
from pqindex.errors import UserInputError
from pqindex.expr import col
from pqindex.expr.bind import bind
from pqindex.expr.sql import parse_where
from pqindex.format.file import ParquetFile
from pqindex.io.source import LocalFileSource

WORDS = ["alpha", "alphabet", "beta", "abc", "a_c", "a%c", "ácb", "日本語", "", "ab\nc",
         "zeta", "xyz", "alpha beta", "b", "ALPHA", "Beta", "ÉCOLE", "école", "AbC",
         "a\\c", "x!y%"]
ROWS_PER_GROUP = 400


def _table() -> pa.Table:
    """Row group g holds the words of vocabulary g % 3 only (plus NULLs)."""
    groups = [WORDS[0::3], WORDS[1::3], WORDS[2::3]]
    ids, words = [], []
    for g in range(6):
        vocab = groups[g % 3]
        for i in range(ROWS_PER_GROUP):
            ids.append(g * ROWS_PER_GROUP + i)
            words.append(None if i % 37 == 5 else vocab[i % len(vocab)])
    return pa.table({"id": pa.array(ids, pa.int64()), "s": pa.array(words, pa.string()),
                     "n": pa.array([i % 11 for i in ids], pa.int64())})


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("like")
    t = _table()
    out = {}
    out["pyarrow"] = root / "pyarrow.parquet"
    pq.write_table(t, out["pyarrow"], row_group_size=ROWS_PER_GROUP, write_page_index=True,
                   data_page_size=512)
    out["plain"] = root / "plain.parquet"
    pq.write_table(t, out["plain"], row_group_size=ROWS_PER_GROUP, use_dictionary=False)
    out["pqindex"] = root / "pqindex.parquet"
    pqindex.write_table(t, out["pqindex"], row_group_rows=ROWS_PER_GROUP, page_rows=100,
                        indexes={"distinct": ["s"]})
    lake = root / "lake"
    for g, word in enumerate(["alpha", "beta", "a_c"]):
        d = lake / f"tag={word}"
        d.mkdir(parents=True)
        pq.write_table(t.slice(g * 2 * ROWS_PER_GROUP, 2 * ROWS_PER_GROUP), d / "part.parquet")
    out["lake"] = lake
    return out


PATTERNS = ["%ph%", "a_c", "a%c", "%c", "_", "%", "%%", "a%", "%a", "al%ha%", "%b%t%",
            "á%", "%本%", "__", "___", "a_c%", "%\n%", "", "%z", "% %", "nothing%here"]


def _duck(path: Path, where: str) -> list[int]:
    src = f"read_parquet('{path}/**/*.parquet', hive_partitioning=true)" if path.is_dir() \
        else f"read_parquet('{path}')"
    rows = duckdb.connect().execute(f"SELECT id FROM {src} WHERE {where} ORDER BY id")
    return [r[0] for r in rows.fetchall()]


def _ours(path: Path, where: str) -> tuple[list[int], Any]:
    scan = pqindex.dataset(path).scan(["id"], where)
    return sorted(scan.to_table().column("id").to_pylist()), scan.report


def _sql(pattern: str) -> str:
    return "'" + pattern.replace("'", "''") + "'"


@pytest.mark.parametrize("name", ["pyarrow", "plain", "pqindex"])
def test_like_matches_duckdb(files: dict[str, Path], name: str) -> None:
    path = files[name]
    for pattern in PATTERNS:
        for where in (f"s LIKE {_sql(pattern)}", f"s NOT LIKE {_sql(pattern)}",
                      f"NOT (s LIKE {_sql(pattern)}) AND n < 5",
                      f"s LIKE {_sql(pattern)} OR n = 3"):
            assert _ours(path, where)[0] == _duck(path, where), (name, where)
        ds = pqindex.dataset(path)
        where = f"s LIKE {_sql(pattern)}"
        want = len(_duck(path, where))
        assert ds.count_rows(where) == want, where
        assert ds.head(3, ["id"], where).num_rows == min(3, want), where


ILIKE_PATTERNS = ["%AL%", "beta", "É%", "%ÉCOLE", "abc", "_B_", "%", "%Á%", "a%C", "%hab%",
                  "ALPHA BETA"]


@pytest.mark.parametrize("name", ["pyarrow", "plain", "pqindex"])
def test_ilike_matches_duckdb(files: dict[str, Path], name: str) -> None:
    path = files[name]
    for pattern in ILIKE_PATTERNS:
        for where in (f"s ILIKE {_sql(pattern)}", f"s NOT ILIKE {_sql(pattern)}",
                      f"NOT (s ILIKE {_sql(pattern)} AND n > 2)"):
            assert _ours(path, where)[0] == _duck(path, where), (name, where)
    # '%HAB%' holds in vocabulary 1 only, whatever the case: 4 row groups ruled out.
    got, report = _ours(path, "s ILIKE '%HAB%'")
    assert got == _duck(path, "s ILIKE '%HAB%'")
    if name != "plain":
        assert report.row_groups_read == 2, (name, report)


REGEXPS = ["ph", "^a", "a$", "a.c", "^(alpha|beta)$", "[0-9]", "é", "(?i)ALPHA", "^$", "b.c",
           "本", "^word", "x?yz", "\\bbeta\\b"]


@pytest.mark.parametrize("name", ["pyarrow", "plain", "pqindex"])
def test_regexp_matches_matches_duckdb(files: dict[str, Path], name: str) -> None:
    path = files[name]
    for pattern in REGEXPS:
        for where in (f"regexp_matches(s, {_sql(pattern)})",
                      f"NOT regexp_matches(s, {_sql(pattern)})",
                      f"regexp_matches(s, {_sql(pattern)}) OR n = 4"):
            assert _ours(path, where)[0] == _duck(path, where), (name, where)
    got, report = _ours(path, "regexp_matches(s, 'hab')")
    assert got == _duck(path, "regexp_matches(s, 'hab')")
    if name != "plain":  # the dictionaries or distinct sets rule 6 of 8 row groups out
        assert report.row_groups_read == 2, (name, report)


def test_an_anchored_regexp_prunes_by_its_literal_start(tmp_path: Path) -> None:
    """'^lit...' holds only where the value starts with "lit": a prefix match is ANDed
    in, which min/max prune with on a sorted column (no dictionary needed)."""
    words = sorted(f"{c}{i:04d}" for c in "abcdefgh" for i in range(500))
    t = pa.table({"id": pa.array(range(len(words)), pa.int64()), "s": words})
    path = tmp_path / "sorted.parquet"
    pq.write_table(t, path, row_group_size=500, use_dictionary=False, write_page_index=True)
    for pattern, read in (("^c01", 1), ("^c01.5", 1), ("^(c|d)0", 8), ("^c0|^d0", 8),
                          ("^c0[0-9]*9$", 1), ("^c\\d", 1), ("^cc?", 1), ("^h04+9", 1)):
        where = f"regexp_matches(s, {_sql(pattern)})"
        got, report = _ours(path, where)
        assert got == _duck(path, where), pattern
        assert report.row_groups_read == read, (pattern, report)
        not_where = f"NOT {where}"
        assert _ours(path, not_where)[0] == _duck(path, not_where), pattern


_RE_PIECES = st.sampled_from(["a", "b", "ab", ".", "*", "+", "?", "|", "(", ")", "[ab]",
                              "\\.", "\\d", "{2}", "$", "^", "本", "\\|", "[|]", "(a|b)"])


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(_RE_PIECES, max_size=6),
       values=st.lists(st.text(alphabet="ab.|本1\n", max_size=6), max_size=20))
def test_regexp_prefix_holds_for_every_match(pieces: list[str], values: list[str]) -> None:
    """Every value RE2 matches (Arrow's kernel, as the evaluation) starts with the
    prefix that prunes."""
    import pyarrow.compute as pc

    from pqindex.expr.nodes import regexp_prefix

    pattern = "^" + "".join(pieces)
    try:
        mask = pc.match_substring_regex(pa.array(values, pa.string()), pattern=pattern)
    except pa.ArrowInvalid:
        return  # not RE2: refused at bind time
    prefix = regexp_prefix(pattern)
    for v, hit in zip(values, mask.to_pylist(), strict=True):
        assert not hit or v.startswith(prefix), (pattern, prefix, v)


def test_like_on_a_partition_value(files: dict[str, Path]) -> None:
    lake = files["lake"]
    for pattern in ("a%", "%c", "_eta", "a_c", "%"):
        for where in (f"tag LIKE {_sql(pattern)}", f"tag NOT LIKE {_sql(pattern)} AND s LIKE '%a%'",
                      f"tag ILIKE {_sql(pattern.upper())}"):
            got, report = _ours(lake, where)
            assert got == _duck(lake, where), where
    # The partition values rule files out: no row of `tag = 'a_c'` is read for '%a',
    # only `tag = 'beta'`'s for '_eta'.
    _, report = _ours(lake, "tag LIKE '%a'")
    assert report.files_read == 2 and report.files_skipped, report
    _, report = _ours(lake, "tag LIKE '_eta'")
    assert report.files_read == 1 and report.rows_matched == 2 * ROWS_PER_GROUP, report


def test_dictionaries_and_distinct_sets_rule_row_groups_out(files: dict[str, Path]) -> None:
    """'%hab%' occurs in vocabulary 1 only: 4 of 6 row groups are ruled out without a
    data page read, by their dictionaries (pyarrow) or distinct sets (pqindex)."""
    for name, by in (("pyarrow", "dictionary"), ("pqindex", "embedded index")):
        got, report = _ours(files[name], "s LIKE '%hab%'")
        assert got == _duck(files[name], "s LIKE '%hab%'")
        assert report.row_groups_read == 2, (name, report)
        assert report.row_groups_skipped.get(by, 0) == 4, (name, report.row_groups_skipped)
    # Every value of vocabulary 1 matches '%' but NULLs: no group is ruled out.
    _, report = _ours(files["pyarrow"], "s LIKE '%_%'")
    assert report.row_groups_read == 6
    # No word matches: every row group ruled out, nothing but indexes read.
    got, report = _ours(files["pqindex"], "s LIKE '%qq%'")
    assert got == [] and report.row_groups_read == 0 and report.pages_read == 0


def test_a_manifest_prunes_files_by_their_distinct_sets(tmp_path: Path) -> None:
    """The manifest keeps each file's small distinct sets: a pattern none of a file's
    values match skips the file with no request for it."""
    from pqindex.dataset.manifest import write_manifest

    vocab = [["alpha", "beta"], ["gamma", "delta"], ["epsilon", "Zeta"]]
    for i, words in enumerate(vocab):
        t = pa.table({"id": pa.array(range(i * 100, i * 100 + 100), pa.int64()),
                      "s": [words[k % 2] for k in range(100)]})
        pqindex.write_table(t, tmp_path / f"f{i}.parquet", indexes={"distinct": ["s"]})
    write_manifest(str(tmp_path))
    for where, skipped in (("s LIKE '%mm%'", 2), ("s ILIKE '%ZE%'", 2), ("s LIKE '%e%'", 0),
                           ("s NOT LIKE '%a'", 2), ("s LIKE '_e%'", 0), ("s LIKE 'g%a'", 2)):
        ds = pqindex.dataset(tmp_path)
        scan = ds.scan(["id"], where)
        got = sorted(scan.to_table().column("id").to_pylist())
        assert got == _duck(tmp_path, where), where
        assert scan.report.files_skipped.get("manifest", 0) == skipped, (where, scan.report)
        assert len(ds.io_stats()) == 3 - skipped, where  # skipped files: no request


ESCAPED = [("a!%c", "!"), ("a!_c", "!"), ("%!%%", "!"), ("%!_%", "!"), ("a!!c", "!"),
           ("x!!y!%", "!"), ("%\\\\%", "\\"), ("a\\%%", "\\"), ("a\\c", "!"),
           ("a\\\\c", "\\"), ("_!%_", "!"), ("%", "!"), ("!%", "!"), ("a!_%", "!")]


@pytest.mark.parametrize("name", ["pyarrow", "plain", "pqindex"])
def test_like_escape_matches_duckdb(files: dict[str, Path], name: str) -> None:
    """``LIKE ... ESCAPE``: an escaped %, _ or escape character is itself; with the
    escape given, a backslash in the pattern is read as DuckDB and Spark both read it."""
    path = files[name]
    for pattern, esc in ESCAPED:
        like = f"{_sql(pattern)} ESCAPE {_sql(esc)}"
        for where in (f"s LIKE {like}", f"s NOT LIKE {like}", f"s ILIKE {like}",
                      f"NOT (s LIKE {like}) AND n < 5", f"s LIKE {like} OR n = 3"):
            assert _ours(path, where)[0] == _duck(path, where), (name, where)
        where = f"s LIKE {like}"
        want = len(_duck(path, where))
        ds = pqindex.dataset(path)
        assert ds.count_rows(where) == want, where
        assert ds.head(3, ["id"], where).num_rows == min(3, want), where
        # Printed back, parsed or bound (Arrow's pattern form), the predicate reads the
        # same in DuckDB and in pqindex.
        for text in (str(parse_where(where)),
                     str(bind(parse_where(where), ParquetFile(LocalFileSource(
                         str(files["pyarrow"]))).schema))):
            assert _duck(path, text) == _duck(path, where), (where, text)
            assert _ours(path, text)[0] == _duck(path, where), (where, text)


def test_like_escape_prunes_with_its_literal_prefix(files: dict[str, Path]) -> None:
    """An escaped wildcard is part of the literal prefix: 'a!%%' is 'a%' followed by
    anything, which the dictionaries of the two vocabularies without "a%c" rule out."""
    got, report = _ours(files["pyarrow"], "s LIKE 'a!%%' ESCAPE '!'")
    assert got == _duck(files["pyarrow"], "s LIKE 'a!%%' ESCAPE '!'") != []
    assert report.row_groups_read == 2, report
    assert str(parse_where("s LIKE 'a!%%' ESCAPE '!'")) == "starts_with(s, 'a%')"
    assert str(parse_where("s LIKE 'a!%c' ESCAPE '!'")) == "s = 'a%c'"
    assert col("s").like("a!%c", escape="!") == parse_where("s LIKE 'a!%c' ESCAPE '!'")


def test_like_escape_through_pyarrow_dataset(files: dict[str, Path]) -> None:
    ds = pqindex.dataset(files["pyarrow"])
    for pattern, esc in ESCAPED:
        where = f"s LIKE {_sql(pattern)} ESCAPE {_sql(esc)} OR s ILIKE {_sql(pattern)} " \
                f"ESCAPE {_sql(esc)}"
        got = ds.to_pyarrow_dataset(where=where).to_table(columns=["id"])
        assert sorted(got.column("id").to_pylist()) == _duck(files["pyarrow"], where), where


_PIECES = st.sampled_from(["a", "c", "!", "\\", "%", "_", "!%", "!_", "!!", "x", "y"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(_PIECES, max_size=6), negated=st.booleans())
def test_random_escaped_patterns_match_duckdb(files: dict[str, Path], pieces: list[str],
                                              negated: bool) -> None:
    pattern = "".join(p for p in pieces if p != "!")  # a lone escape is refused (below)
    word = "NOT LIKE" if negated else "LIKE"
    where = f"s {word} {_sql(pattern)} ESCAPE '!'"
    for name in ("pyarrow", "pqindex"):
        assert _ours(files[name], where)[0] == _duck(files[name], where), (name, where)


@pytest.mark.parametrize(("where", "message"), [
    ("s LIKE '%a\\b%'", "backslash"),
    ("s LIKE 'a!b' ESCAPE '!'", "must be followed by %, _ or itself"),
    ("s LIKE 'ab!' ESCAPE '!'", "must be followed by %, _ or itself"),
    ("s LIKE 'a' ESCAPE 'ab'", "one character"),
    ("s LIKE 'a' ESCAPE '%'", "other than % and _"),
    ("s LIKE 'a' ESCAPE 1", "one character"),
    ("s ESCAPE 'a'", "ESCAPE outside LIKE"),
    ("n LIKE '%1%'", "needs a string column"),
    ("s LIKE 5", "string pattern"),
    ("n ILIKE '%a'", "ILIKE '%a' needs a string column"),
    ("regexp_matches(s, 'a(')", "not a valid RE2 expression"),
    ("regexp_matches(n, '1')", "needs a string column"),
    ("regexp_matches(s, 'a', 'i')", "options are not supported"),
])
def test_pattern_refusals_are_clear(files: dict[str, Path], where: str, message: str) -> None:
    with pytest.raises(UserInputError, match=message):
        pqindex.dataset(files["pyarrow"]).to_table(where=where)


def test_like_through_pyarrow_dataset(files: dict[str, Path]) -> None:
    """The translation to a pyarrow expression (``to_pyarrow_dataset``) keeps the rows."""
    ds = pqindex.dataset(files["pyarrow"])
    for pattern in ("%ph%", "a_c", "%本%", "_"):
        where = f"s LIKE {_sql(pattern)}"
        got = ds.to_pyarrow_dataset(where=where).to_table(columns=["id"])
        assert sorted(got.column("id").to_pylist()) == _duck(files["pyarrow"], where)


_ALPHABET = st.sampled_from(["a", "b", "á", "%", "_", " ", "'", "é", "C"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(pattern=st.lists(_ALPHABET, max_size=6).map("".join), negated=st.booleans())
def test_random_patterns_match_duckdb(files: dict[str, Path], pattern: str,
                                      negated: bool) -> None:
    word = "NOT LIKE" if negated else "LIKE"
    where = f"s {word} {_sql(pattern)}"
    if len(pattern) % 2:  # the same pattern case-insensitively, upper-cased
        where = f"s {word.replace('LIKE', 'ILIKE')} {_sql(pattern.upper())}"
    for name in ("pyarrow", "pqindex"):
        assert _ours(files[name], where)[0] == _duck(files[name], where), (name, where)


_TEXT = st.text(alphabet=st.sampled_from(["a", "b", "c", "é", " ", "本"]), max_size=5)


@settings(max_examples=150, deadline=None)
@example(values=["xa", "b", None, "ab", "é", "本a"], literal="ab", large=False, cut=0)
@example(values=["é本", "本é"], literal="本é", large=True, cut=0)
@given(values=st.lists(st.one_of(st.none(), _TEXT), max_size=40),
       literal=st.text(alphabet=st.sampled_from(["a", "b", "é", "本"]), min_size=1, max_size=3),
       large=st.booleans(), cut=st.integers(0, 5))
def test_substring_search_is_arrows_match_like(values: list[str | None], literal: str,
                                               large: bool, cut: int) -> None:
    """``'%literal%'`` searched in the string buffer at once (``evaluate._contains``):
    the same mask as Arrow's ``match_like``, NULL kept NULL (NOT LIKE must not select
    it), on sliced, large and chunked arrays, a literal across two strings not found."""
    import pyarrow.compute as pc

    from pqindex.expr.evaluate import like_mask

    arr = pa.array(values, pa.large_string() if large else pa.string()).slice(min(cut, len(values)))
    for a in (arr, pa.chunked_array([arr, arr], type=arr.type)):
        got = like_mask(a, f"%{literal}%")
        want = pc.match_like(a, f"%{literal}%")
        assert got.to_pylist() == want.to_pylist()
        assert pc.invert(got).to_pylist() == pc.invert(want).to_pylist()


_LIKE_CHARS = st.sampled_from(["a", "b", "\\", "%", "_", "é"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(_LIKE_CHARS, max_size=5) | st.none(), min_size=1, max_size=8),
       st.lists(st.tuples(_LIKE_CHARS, st.booleans()), max_size=5))
@example(["a\\", "\\", "ab\\"], [("%", True), ("\\", False)])
def test_like_mask_matches_duckdb_on_escaped_patterns(
        values: list[str | None], tokens: list[tuple[str, bool]]) -> None:
    # Arrow's '%literal' shortcut once kept '\\\\' escaped: '%\\\\' matched nothing.
    from pqindex.expr.evaluate import like_mask
    pattern = "".join(c if wild and c in "%_" else ("\\" + c if c in "%_\\" else c)
                      for c, wild in tokens)
    got = like_mask(pa.array(values, pa.string()), pattern).to_pylist()
    rows = duckdb.execute("SELECT v LIKE ? ESCAPE '\\' FROM unnest(?) AS t(v)",
                          [pattern, values]).fetchall()
    assert got == [r[0] for r in rows]
