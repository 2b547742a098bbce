"""Page checksums: written by default, checked by ``check`` and by verifying reads.

The reference for which bytes a CRC covers is pyarrow's own check
(``page_checksum_verification=True``): a byte flipped in a page fails it exactly
when it fails ours, for dictionary pages, v1 and v2 data pages (v2's levels too).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pqindex
from conftest import CORPUS, import_or_missing, missing
from pqindex.cli import cli
from pqindex.errors import CorruptFileError
from pqindex.format.checksum import page_crc
from pqindex.format.file import ParquetFile
from pqindex.format.pages import check_file, walk_pages
from pqindex.format.schema import PageType
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)
from test_scan_differential import assert_same_rows

DATA = CORPUS / "data"
CLEAN_CORPUS = ("datapage_v1-snappy-compressed-checksum.parquet",
                "datapage_v1-uncompressed-checksum.parquet",
                "plain-dict-uncompressed-checksum.parquet",
                "rle-dict-snappy-checksum.parquet")
DAMAGED_CORPUS = {  # file -> (column, the damaged page's offset)
    "datapage_v1-corrupt-checksum.parquet": ("a", 4),
    "rle-dict-uncompressed-corrupt-checksum.parquet": ("long_field", 4),
}
KINDS = {"dictionary": PageType.DICTIONARY_PAGE, "v1": PageType.DATA_PAGE,
         "v2": PageType.DATA_PAGE_V2}


@dataclass(frozen=True)
class Page:
    row_group: int
    column: str
    offset: int  # the header's
    body: int  # the page's stored bytes: [body, end)
    end: int
    kind: int
    crc: int | None


def pages_of(path: Path) -> list[Page]:
    with ParquetFile.open(str(path)) as pf:
        return [Page(rg, leaf.name, p.offset, p.offset + p.header_length,
                     p.offset + p.total_length, p.page_type, p.header.crc)
                for rg in range(pf.num_row_groups) for leaf in pf.schema.leaves
                for p in walk_pages(pf, rg, leaf.index)]


def first_row(path: Path, page: Page) -> int:
    """The first row (in its row group) of a data page; 0 for a dictionary page."""
    with ParquetFile.open(str(path)) as pf:
        oi = pf.offset_index(page.row_group, pf.schema.leaf(page.column).index)
        assert oi is not None and oi.page_locations
        return next((loc.first_row_index or 0 for loc in oi.page_locations
                     if loc.offset == page.offset), 0)


def checked(path: Path) -> int:
    with ParquetFile.open(str(path)) as pf:
        return check_file(pf)


def flip(path: Path, at: int, mask: int = 0x5A) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)[0]
        f.seek(at)
        f.write(bytes([b ^ mask]))


def assert_names(err: CorruptFileError, page: Page) -> None:
    assert "checksum" in err.reason, err
    assert (err.row_group, err.column, err.offset) == (page.row_group, page.column, page.offset), err


def table(n: int = 6_000) -> pa.Table:
    i = np.arange(n, dtype=np.int64)
    return pa.table({
        "id": i,
        "value": pa.array((i * 7919) % 1_000_003, pa.int64(), mask=i % 11 == 3),
        "category": pa.array([f"c{k % 5}" for k in range(n)]),
        "text": pa.array([f"row {k:06d} " + "x" * (k % 17) for k in range(n)],
                         mask=np.asarray(i % 13 == 5)),
    })


def write_with_crcs(path: Path, kind: str, codec: str = "snappy") -> Path:
    """pyarrow, page index and CRCs on: ``kind`` picks the data page version."""
    pq.write_table(table(), path, row_group_size=3_000, data_page_size=4_096,
                   write_page_index=True, write_page_checksum=True, compression=codec,
                   data_page_version="2.0" if kind == "v2" else "1.0",
                   use_dictionary=["category"] if kind == "dictionary" else False)
    return path


# ------------------------------------------------------------------ writing


def test_write_table_puts_a_crc_in_every_page(tmp_path: Path) -> None:
    path = tmp_path / "w.parquet"
    pqindex.write_table(table(), path, sort_by="id", page_rows=1_000, row_group_rows=3_000,
                        indexes={"distinct": ["category"]})
    pages = pages_of(path)
    assert {p.kind for p in pages} == {PageType.DICTIONARY_PAGE, PageType.DATA_PAGE}
    assert all(p.crc is not None for p in pages)
    assert checked(path) == len(pages)
    with open(path, "rb") as f:
        raw = f.read()
    assert all(page_crc(raw[p.body : p.end]) == p.crc for p in pages)
    assert pq.read_table(path, page_checksum_verification=True).equals(pq.read_table(path))
    duckdb = import_or_missing("duckdb", "duckdb")
    got = duckdb.sql(f"SELECT * FROM '{path}' ORDER BY id").to_arrow_table()
    assert got.equals(pq.read_table(path).sort_by("id"))

    plain = tmp_path / "plain.parquet"
    pqindex.write_table(table(), plain, page_checksums=False)
    assert all(p.crc is None for p in pages_of(plain)) and checked(plain) == 0


def test_add_indexes_keeps_the_crcs_valid(tmp_path: Path) -> None:
    path = write_with_crcs(tmp_path / "a.parquet", "v2")
    before = checked(path)
    pqindex.add_indexes(str(path), output=str(tmp_path / "out"), distinct=["category"],
                        zone_maps=["value"])
    out = tmp_path / "out" / "a.parquet"
    assert before > 0 and checked(out) == before
    assert pq.read_table(out, page_checksum_verification=True).equals(pq.read_table(path))


# ------------------------------------------------------------------ damage found


@pytest.mark.parametrize("kind", ["dictionary", "v1", "v2", "v2-levels"])
def test_a_damaged_page_of_each_kind_is_found(tmp_path: Path, kind: str,
                                              page_by_page: None) -> None:
    path = write_with_crcs(tmp_path / "d.parquet", kind.split("-")[0])
    want = KINDS[kind.split("-")[0]]
    column = "category" if kind == "dictionary" else "text"
    candidates = [p for p in pages_of(path)
                  if p.kind == want and p.column == column and p.row_group == 1]
    assert candidates and all(p.crc is not None for p in candidates)
    page = candidates[len(candidates) // 2]
    # v2-levels: the first byte of the page is its definition levels (stored apart).
    flip(path, page.body if kind == "v2-levels" else (page.body + page.end) // 2)

    with pytest.raises((OSError, pa.ArrowException), match=r"(?i)crc"):  # the reference
        pq.read_table(path, page_checksum_verification=True)
    with pytest.raises(CorruptFileError) as found:
        checked(path)
    assert_names(found.value, page)
    with pqindex.dataset(str(path)) as ds:
        with pytest.raises(CorruptFileError) as found:
            ds.scan(verify_checksums=True).to_table()
        assert_names(found.value, page)
        # A lookup through the page index reads the damaged page only when it holds
        # the row, and checks it then; another row group's rows read clean.
        row = 3_000 + first_row(path, page)
        with pytest.raises(CorruptFileError) as found:
            ds.scan(columns=["id", column], where=f"id = {row}",
                    verify_checksums=True).to_table()
        assert_names(found.value, page)
        got = ds.scan(columns=["id", column], where="id < 100", verify_checksums=True
                      ).to_table()
        want = pq.ParquetFile(path).read_row_group(0, columns=["id", column]).slice(0, 100)
        assert got.equals(want)

    if kind == "dictionary":  # planning reads it to prune: not used when damaged
        with pqindex.dataset(str(path), verify_checksums=True) as ds:
            plan = ds.plan(where="category = 'c1'")
            assert any("checksum mismatch" in w for w in plan.report.warnings), plan.report
            with pytest.raises(CorruptFileError) as found:
                ds.scan(where="category = 'c1'").to_table()
            assert_names(found.value, page)

    res = CliRunner().invoke(cli, ["check", "--no-decode", str(path)])
    assert res.exit_code != 0 and f"offset {page.offset}" in res.output, res.output
    res = CliRunner().invoke(cli, ["query", str(path), "--verify-checksums", "--format", "csv"])
    assert res.exit_code != 0 and "checksum mismatch" in res.output, res.output


def test_every_read_path_checks_what_it_reads(tmp_path: Path, page_by_page: None) -> None:
    """A damaged page of an int64 column (numpy page decoding, encoded matching, sums)
    and of the sort column: each verifying read that reads it fails."""
    path = tmp_path / "p.parquet"
    pqindex.write_table(table(), path, sort_by="id", page_rows=500, row_group_rows=3_000,
                        indexes=None, dictionary=False)
    pages = pages_of(path)
    value = [p for p in pages if p.column == "value" and p.row_group == 0][3]
    flip(path, (value.body + value.end) // 2)
    reads = {
        "projected page": lambda ds: ds.scan(["id", "value"], "id = 1600",
                                             verify_checksums=True).to_table(),
        "predicate on the page": lambda ds: ds.scan(
            ["id"], f"value = {1600 * 7919 % 1_000_003}", verify_checksums=True).to_table(),
        "whole row group": lambda ds: ds.scan(["value"], verify_checksums=True).to_table(),
        "stream": lambda ds: ds.scan(["value"], verify_checksums=True).head(10_000),
        "sum": lambda ds: pqindex.dataset(str(path), verify_checksums=True).aggregate(
            ["sum(value)"]),
    }
    with pqindex.dataset(str(path)) as ds:
        missed = []
        for name, read in reads.items():
            try:
                read(ds)
            except CorruptFileError as e:
                assert_names(e, value)
            else:
                missed.append(name)
        assert not missed, f"verifying reads that did not fail: {missed}"
        # Pages the read does not need are not read, so not checked.
        ok = ds.scan(["id", "value"], "id = 2600", verify_checksums=True).to_table()
        assert ok.to_pylist() == pq.read_table(path).slice(2600, 1).select(
            ["id", "value"]).to_pylist()


# ------------------------------------------------------------------ clean files


def _same(path: Path, ids: tuple[int, int] | None = None) -> None:
    """A verifying read (all rows, or ``id`` in ``ids``) gives pyarrow's rows."""
    want = pq.read_table(path)
    where = None
    if ids is not None:
        where = f"id BETWEEN {ids[0]} AND {ids[1]}"
        want = want.filter(pc.and_(pc.greater_equal(want["id"], ids[0]),
                                   pc.less_equal(want["id"], ids[1])))
    with pqindex.dataset(str(path), verify_checksums=True) as ds:
        got = ds.scan(where=where).to_table()
    assert_same_rows(got, want, f"{path.name} where {where}")


@pytest.mark.parametrize("name", ["pyarrow_v1_zstd_dict", "pyarrow_v2_snappy_dict", "duckdb",
                                  "polars", "datafusion"])
def test_files_without_crcs_pass(written_files: Any, name: str) -> None:
    path = written_files[name]
    assert checked(path) >= 0
    _same(path)
    _same(path, (100, 200))


@pytest.mark.spark
def test_parquet_java_files_have_crcs_that_verify(written_files: Any) -> None:
    path = written_files["spark"]
    assert checked(path) > 0  # parquet-java writes page CRCs by default
    _same(path)
    _same(path, (77, 77))


@pytest.mark.parametrize("name", CLEAN_CORPUS)
def test_corpus_files_with_crcs_verify(name: str) -> None:
    path = DATA / name
    if not path.exists():
        missing(f"{path} is missing")
    assert checked(path) > 0
    assert pq.read_table(path, page_checksum_verification=True).num_rows > 0
    _same(path)


@pytest.mark.parametrize("name", sorted(DAMAGED_CORPUS))
def test_damaged_corpus_files_fail(name: str) -> None:
    path = DATA / name
    if not path.exists():
        missing(f"{path} is missing")
    column, offset = DAMAGED_CORPUS[name]
    for read in (lambda: checked(path),
                 lambda: pqindex.dataset(str(path), verify_checksums=True).to_table()):
        with pytest.raises(CorruptFileError) as found:
            read()
        err = found.value
        assert (err.path, err.row_group, err.column, err.offset) == (str(path), 0, column,
                                                                     offset), err
    pqindex.dataset(str(path)).to_table()  # no check asked: read as before


# ------------------------------------------------------------------ property


@st.composite
def damaged_files(draw: Any) -> dict[str, Any]:
    n = draw(st.integers(1, 2_500))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    cols: dict[str, pa.Array] = {"id": pa.array(np.arange(n, dtype=np.int64))}
    nulls = rng.random(n) < draw(st.sampled_from([0.0, 0.2]))
    cols["x"] = pa.array(rng.integers(-50, 50, n), pa.int64(), mask=nulls)
    cols["s"] = pa.array([f"v{int(v)}" for v in rng.integers(0, draw(st.sampled_from([4, 5000])), n)],
                         mask=rng.random(n) < 0.1)
    cols["f"] = pa.array(rng.normal(size=n))
    return {
        "table": pa.table(cols),
        "writer": draw(st.sampled_from(["pqindex", "pyarrow"])),
        "version": draw(st.sampled_from(["1.0", "2.0"])),
        "codec": draw(st.sampled_from(["none", "snappy", "zstd"])),
        "dictionary": draw(st.booleans()),
        "page": draw(st.floats(0, 1, exclude_max=True)),
        "byte": draw(st.floats(0, 1, exclude_max=True)),
        "mask": draw(st.integers(1, 255)),
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=damaged_files())
def test_one_flipped_byte_is_found_in_exactly_its_page(tmp_path: Path, case: dict[str, Any]
                                                       ) -> None:
    path = tmp_path / "r.parquet"
    if case["writer"] == "pqindex":
        pqindex.write_table(case["table"], path, page_rows=300, row_group_rows=1_000,
                            compression=case["codec"], dictionary=case["dictionary"],
                            indexes=None)
    else:
        pq.write_table(case["table"], path, row_group_size=1_000, data_page_size=1_024,
                       compression=case["codec"], use_dictionary=case["dictionary"],
                       data_page_version=case["version"], write_page_checksum=True,
                       write_page_index=True)
    pages = [p for p in pages_of(path) if p.end > p.body]
    assert checked(path) == len(pages_of(path))
    page = pages[int(case["page"] * len(pages))]
    flip(path, page.body + int(case["byte"] * (page.end - page.body)), case["mask"])
    with pytest.raises(CorruptFileError) as found:
        checked(path)
    assert_names(found.value, page)
    with pytest.raises(CorruptFileError) as found:
        pqindex.dataset(str(path), verify_checksums=True).to_table()
    assert_names(found.value, page)


def test_small_row_groups_read_whole_are_checked(tmp_path: Path, monkeypatch: Any) -> None:
    """Row groups sifted (decoded whole by pyarrow, then filtered) are checked first."""
    from pqindex.scan import whole

    path = write_with_crcs(tmp_path / "s.parquet", "v1")
    page = [p for p in pages_of(path) if p.column == "text" and p.row_group == 1][1]
    flip(path, (page.body + page.end) // 2)
    sifted = []
    read_sifted = whole._read_sifted
    monkeypatch.setattr(whole, "_read_sifted", lambda *a: sifted.append(a) or read_sifted(*a))
    with (pqindex.dataset(str(path), verify_checksums=True) as ds,
          pytest.raises(CorruptFileError) as found):
        ds.scan(["id", "text"], "value != 3").to_table()
    assert sifted, "the read did not go through the sifted path"
    assert_names(found.value, page)


def test_pages_fetched_from_an_object_store_are_checked(s3: S3Endpoint,  # noqa: F811
                                                        tmp_path: Path) -> None:
    """Chunks fetched into buffers (pyarrow decodes from memory) and pages fetched
    one by one are checked from the bytes fetched: no second request."""
    path = write_with_crcs(tmp_path / "o.parquet", "v2")
    page = [p for p in pages_of(path) if p.column == "value" and p.row_group == 1][1]
    flip(path, (page.body + page.end) // 2)
    bucket = s3.new_bucket()
    s3.put(bucket, "o.parquet", path.read_bytes())
    url = f"s3://{bucket}/o.parquet"
    with pqindex.dataset(url, storage_options=s3.storage_options(),
                         verify_checksums=True) as ds:
        with pytest.raises(CorruptFileError) as found:
            ds.scan(["id", "value"]).to_table()
        assert found.value.path == url
        assert (found.value.row_group, found.value.column, found.value.offset) == (
            page.row_group, page.column, page.offset)
        got = ds.scan(["id", "value"], "id < 500").to_table()
        assert got.equals(pq.ParquetFile(path).read_row_group(0, columns=["id", "value"])
                          .slice(0, 500))
        before = len(s3.requests)
        with pytest.raises(CorruptFileError) as found:
            ds.scan(["id", "value"], f"id = {3_000 + first_row(path, page)}").to_table()
        assert found.value.offset == page.offset
        gets = [r.range for r in s3.requests[before:] if r.method == "GET"]
        assert len(gets) == len(set(gets)), gets  # checked from the bytes fetched
