"""Files written without a page index (pyarrow's default): page locations built from
the page headers (``encoded.header_offset_index``) let a scan take a few rows from
the pages holding them; and the dictionary entries the planner matched are handed to
the scan (``planned_hits``), which then never decompresses the dictionary page.
References: the offset index pyarrow writes for the same pages, and pyarrow's own
read + filter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pqindex
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.format.pages import walk_pages
from pqindex.format.schema import PageType
from pqindex.plan.planner import dictionary_hits
from pqindex.scan import encoded
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)

# The page-by-page flow's machinery, on small files: none of their row groups is
# read whole and filtered instead (conftest.page_by_page).
pytestmark = pytest.mark.usefixtures("page_by_page")

CODECS = ["NONE", "SNAPPY", "ZSTD", "GZIP"]


@st.composite
def _tables(draw: Any) -> tuple[pa.Table, dict[str, Any]]:
    """A table of a few flat types (nulls in some) and how to write it: codec, page
    version, dictionary or not, small pages (many per chunk)."""
    n = draw(st.integers(1, 3000))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    nulls = draw(st.booleans())

    def masked(arr: np.ndarray, typ: pa.DataType) -> pa.Array:
        mask = rng.random(n) < 0.2 if nulls else None
        return pa.array(arr, typ, mask=mask)

    t = pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "i32": masked(rng.integers(-50, 50, n).astype(np.int32), pa.int32()),
        "f64": masked(rng.normal(size=n), pa.float64()),
        "s": masked(np.array([f"v{k}" for k in rng.integers(0, 40, n)]), pa.string()),
    })
    opts = {
        "compression": draw(st.sampled_from(CODECS)),
        "data_page_version": draw(st.sampled_from(["1.0", "2.0"])),
        "use_dictionary": draw(st.booleans()),
        "data_page_size": draw(st.sampled_from([256, 1024, 8192, 1 << 20])),
        "row_group_size": draw(st.sampled_from([700, 1500, 5000])),
    }
    return t, opts


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_tables())
def test_header_offset_index_is_the_one_pyarrow_writes(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[pa.Table, dict[str, Any]]
) -> None:
    """The same table written with and without a page index has pages of the same
    rows (the headers differ: statistics go to the page index or to the headers): the
    rows of the index built from the headers are the ones pyarrow wrote, its
    locations the pages ``walk_pages`` finds header by header."""
    t, opts = case
    d = tmp_path_factory.mktemp("hdr")
    pq.write_table(t, d / "with.parquet", write_page_index=True, **opts)
    pq.write_table(t, d / "without.parquet", write_page_index=False, **opts)
    raw = (d / "without.parquet").read_bytes()
    with ParquetFile.open(d / "with.parquet") as ref, \
            ParquetFile.open(d / "without.parquet") as pf:
        for rg in range(pf.num_row_groups):
            for col in range(len(pf.schema.leaves)):
                assert pf.offset_index(rg, col) is None
                start, length = chunk_range(pf.column_meta(rg, col))
                got = encoded.header_offset_index(pf, rg, col, raw[start:start + length])
                want = ref.offset_index(rg, col)
                assert got is not None and want is not None
                locs = got.page_locations or []
                assert [p.first_row_index for p in locs] == [
                    p.first_row_index for p in want.page_locations or []]
                assert [(p.offset, p.compressed_page_size) for p in locs] == [
                    (p.offset, p.total_length) for p in walk_pages(pf, rg, col)
                    if p.page_type != PageType.DICTIONARY_PAGE]
                # Bytes that are not the chunk's make no index.
                assert encoded.header_offset_index(
                    pf, rg, col, raw[start:start + length - 1]) is None


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_tables(), pick=st.data())
def test_a_few_rows_of_a_file_without_page_index_are_pyarrows(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[pa.Table, dict[str, Any]],
    pick: Any,
) -> None:
    """A few ids looked up twice (the second scan takes single pages by the locations
    the first built): every column's values are pyarrow's read + filter."""
    t, opts = case
    path = tmp_path_factory.mktemp("few") / "t.parquet"
    pq.write_table(t, path, **opts)
    ids = pick.draw(st.lists(st.integers(0, t.num_rows + 5), min_size=1, max_size=4,
                             unique=True))
    where = f"id IN ({', '.join(map(str, ids))})"
    want = pq.read_table(path).filter(pc.field("id").isin(ids)).sort_by("id")
    ds = pqindex.dataset(path)
    for _ in range(2):
        got = ds.scan(where=where).to_table().sort_by("id")
        assert got.equals(want.cast(got.schema))
    ds.close()


def _lake(path: Path, rows: int = 40_000, groups: int = 4) -> list[str]:
    """A file without page index: ``email`` from 8,000 strings (large dictionaries, no
    row group ruled out by statistics), ``id`` and ``x`` returned."""
    words = np.array([f"user{i:06d}@example.org" for i in range(8_000)])
    rng = np.random.default_rng(5)
    pq.write_table(pa.table({"id": np.arange(rows), "email": words[rng.integers(0, 8_000, rows)],
                             "x": rng.normal(size=rows)}),
                   path, row_group_size=rows // groups, data_page_size=16 * 1024)
    return [str(w) for w in words]


def _two_lookups(ds: pqindex.Dataset, path: Path, words: list[str]) -> list[Any]:
    """Two lookups of different values returning ``id`` and ``x``: their reports, the
    rows checked against pyarrow's read + filter."""
    reports = []
    for w in (words[17], words[4321]):
        s = ds.scan(columns=["id", "x"], where=f"email = '{w}'")
        got = s.to_table()
        want = pq.read_table(path).filter(pc.field("email") == w).select(["id", "x"])
        assert got.sort_by("id").equals(want.sort_by("id"))
        reports.append(s.report)
    return reports


def test_projected_columns_take_single_pages_once_located(tmp_path: Path) -> None:
    """The first lookup reads the projected chunks and locates their pages; the next
    reads only the pages holding its rows: fewer pages and bytes, same rows."""
    path = tmp_path / "t.parquet"
    words = _lake(path)
    ds = pqindex.dataset(path)
    first, second = _two_lookups(ds, path, words)
    pf = next(iter(ds._open.values())).pf
    assert all(pf.offset_index(rg, 0) is not None for rg in range(pf.num_row_groups))
    assert all(not pf.has_offset_index(rg, 0) for rg in range(pf.num_row_groups))
    assert second.pages_read < first.pages_read
    assert second.bytes_read < first.bytes_read
    ds.close()


def test_the_scan_takes_the_planners_matching_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """= and IN: the scan searches the indices for the entries the planner matched and
    never builds the dictionary; left for another predicate, they are not used."""
    path = tmp_path / "t.parquet"
    words = _lake(path)
    built: list[int] = []
    real = encoded._dictionary_array

    def counting(*a: Any, **k: Any) -> Any:
        built.append(1)
        return real(*a, **k)

    monkeypatch.setattr(encoded, "_dictionary_array", counting)
    monkeypatch.setattr(encoded, "_planned_dictionary", lambda *a, **k: None)
    table = pq.read_table(path)
    ds = pqindex.dataset(path)
    for where, expr in ((f"email = '{words[3]}'", pc.field("email") == words[3]),
                        (f"email IN ('{words[9]}', '{words[7000]}', 'nobody')",
                         pc.field("email").isin([words[9], words[7000], "nobody"]))):
        got = ds.scan(columns=["id"], where=where).to_table()
        assert sorted(got.column("id").to_pylist()) == sorted(
            table.filter(expr).column("id").to_pylist())
    assert built == []
    # Entries left for a different value: the scan compares the dictionary itself.
    pf = next(iter(ds._open.values())).pf
    ds.scan(columns=["id"], where=f"email = '{words[5]}'").to_table()
    stale = {k: v for k, v in pf.derived.items()
             if isinstance(k, tuple) and k[0] == "dictionary_hits"}
    assert stale
    bound_other = next(iter(stale.values()))[0]
    for k, (p, _ids, size) in stale.items():
        found = dictionary_hits(pf, k[1], k[2], p)  # positions a plan may leave unresolved
        assert found is not None
        pf.derived[k] = (bound_other, (found[0] + 1) % size, size)  # wrong entries
    monkeypatch.setattr(ds, "_plan", _no_new_hits(ds._plan, pf))
    got = ds.scan(columns=["id"], where=f"email = '{words[6]}'").to_table()
    assert sorted(got.column("id").to_pylist()) == sorted(
        table.filter(pc.field("email") == words[6]).column("id").to_pylist())
    assert built  # compared by the scan, not taken from the stale entries
    ds.close()


def _no_new_hits(plan: Any, pf: ParquetFile) -> Any:
    """The dataset's planning, with the planner's entries for the chunks put back as
    they were before it (stale: left for another predicate)."""
    def wrapped(*a: Any, **k: Any) -> Any:
        before = {k2: v for k2, v in pf.derived.items()
                  if isinstance(k2, tuple) and k2[0] == "dictionary_hits"}
        out = plan(*a, **k)
        pf.derived.update(before)
        return out

    return wrapped


def test_on_s3_the_next_lookup_fetches_only_its_pages(
    s3: S3Endpoint, tmp_path: Path  # noqa: F811
) -> None:
    """The same on an object store: the first lookup fetches the projected chunks
    whole, as before; the next fetches only their pages holding its rows, in fewer
    bytes and no more waves (7.2 MB in 4 waves, then 5.3 MB in 2: the predicate
    column is still read whole)."""
    path = tmp_path / "t.parquet"
    words = _lake(path, rows=400_000)  # 7 MB: more than one wave's coalesced reads
    bucket = s3.new_bucket("hdr")
    s3.put(bucket, "t.parquet", path.read_bytes())
    ds = pqindex.dataset(f"s3://{bucket}/t.parquet", storage_options=s3.storage_options())
    first, second = _two_lookups(ds, path, words)
    assert second.bytes_read < first.bytes_read
    assert second.round_trips <= first.round_trips
    ds.close()


def test_damaged_headers_make_no_index(tmp_path: Path) -> None:
    """Flipped bytes anywhere in a chunk: no offset index, or one that tiles the chunk
    in rows; never an exception out of the walk."""
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": np.arange(5000)}), path, data_page_size=2048,
                   compression="NONE")
    raw = bytearray(path.read_bytes())
    with ParquetFile.open(path) as pf:
        start, length = chunk_range(pf.column_meta(0, 0))
        rng = np.random.default_rng(1)
        for _ in range(300):
            bad = bytearray(raw[start:start + length])
            at = int(rng.integers(0, length))
            bad[at] ^= 1 << int(rng.integers(0, 8))
            oi = encoded.header_offset_index(pf, 0, 0, bytes(bad))
            if oi is not None:
                firsts = [p.first_row_index for p in oi.page_locations or []]
                assert firsts[0] == 0 and firsts == sorted(set(firsts))


def test_a_plan_of_the_same_predicate_reads_no_dictionary_it_could_not_keep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No budget for decoded dictionaries: the second plan of a predicate takes the
    first's answers (row groups ruled out alike, no dictionary read); another
    predicate reads them again. Rows are pyarrow's every time."""
    from pqindex.io import cache
    from pqindex.plan import planner

    monkeypatch.setattr(cache.DICTIONARY_EVIDENCE, "max_bytes", 0)
    reads: list[int] = []
    real = planner._RowGroupEvidence._read_dictionary

    def counting(self: Any, *a: Any, **k: Any) -> Any:
        reads.append(self.rg)
        return real(self, *a, **k)

    monkeypatch.setattr(planner._RowGroupEvidence, "_read_dictionary", counting)
    path = tmp_path / "t.parquet"
    words = _lake(path, groups=8)
    table = pq.read_table(path)
    ds = pqindex.dataset(path)
    plans = []
    for w in (words[17], words[17], words[9], words[17]):
        reads.clear()
        plan = ds.plan(["id"], f"email IN ('{w}', 'nobody')")
        (entry,) = plan.files
        plans.append((entry.row_groups_kept, len(reads)))
        got = ds.scan(plan=plan).to_table()
        want = table.filter(pc.field("email").isin([w, "nobody"]))
        assert sorted(got.column("id").to_pylist()) == sorted(want.column("id").to_pylist())
    (kept1, reads1), (kept2, reads2), (_k3, reads3), (kept4, reads4) = plans
    assert reads1 == 8 and reads2 == 0 and kept2 == kept1
    assert reads3 == 8  # another value: its own answers
    assert kept4 == kept1 and reads4 == 8  # the entries left are the latest value's
    assert len(kept1) < 8  # some row group was ruled out by its dictionary
    ds.close()
