"""The Page Index spec's I/O goals, asserted on the I/O trace of real scans.

The file (``scan_fixtures.write_io_file``): 200,000 rows sorted by ``id`` (even
ids only), 4 row groups of 50,000 rows, 1,000-row pages in every column
(aligned), dictionary encoding off for id, ts, amount and payload and on for
category and user_id; ``category`` holds one rare value (``'zulu'``, rows
12,345, 13,999 and 160,500) that sorts after the common ones.

Every byte range of the file is labelled (footer, column index, offset index,
dictionary page, data page, Bloom filter) from the footer and the offset index
read with ``pqindex.format.file.ParquetFile``, and each test compares the labels
a scan's trace touches with the labels the goal allows.

Most tests open the dataset with ``tail_bytes`` equal to the footer's size (so
the first request holds the footer and nothing else, and every page-index read
shows in the trace) and with ``coalesce_gap=0`` (so the scanner's requests are
the planned ranges themselves, not merged with their neighbours).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import pqindex
import scan_fixtures as F
import writers
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.scan.executor import ScanOptions

COLUMNS = ("id", "ts", "category", "user_id", "amount", "payload")
DICTIONARY_COLUMNS = frozenset({"category", "user_id"})
PAGES_PER_CHUNK = F.IO_ROW_GROUP_ROWS // F.IO_PAGE_ROWS


# ------------------------------------------------------------------ the file map


@dataclass(frozen=True)
class Region:
    """A labelled byte range of the file."""

    kind: str  # footer, column_index, offset_index, dictionary, page, bloom
    offset: int
    length: int
    row_group: int = -1
    column: str = ""
    page: int = -1

    @property
    def label(self) -> tuple[Any, ...]:
        if self.kind == "footer":
            return ("footer",)
        if self.kind == "page":
            return ("page", self.row_group, self.column, self.page)
        return (self.kind, self.row_group, self.column)

    def overlaps(self, offset: int, length: int) -> bool:
        return offset < self.offset + self.length and self.offset < offset + length

    def inside(self, offset: int, length: int) -> bool:
        return offset <= self.offset and self.offset + self.length <= offset + length


class FileMap:
    """Every labelled region of one file, and what a trace touched."""

    def __init__(self, path: Path) -> None:
        with ParquetFile.open(path) as pf:
            self.size = pf.file_size
            self.footer = Region("footer", pf.footer_offset, pf.file_size - pf.footer_offset)
            self.regions = [self.footer]
            self.first_rows: dict[tuple[int, str], list[int]] = {}
            self.rows = [pf.row_group_rows(rg) for rg in range(pf.num_row_groups)]
            for rg in range(pf.num_row_groups):
                for leaf in pf.schema.leaves:
                    self._chunk(pf, rg, leaf.index, leaf.name)

    def _chunk(self, pf: ParquetFile, rg: int, col: int, name: str) -> None:
        cc = pf.column_chunk(rg, col)
        cmd = pf.column_meta(rg, col)
        add = self.regions.append
        if cc.column_index_offset is not None:
            add(Region("column_index", cc.column_index_offset, cc.column_index_length or 0,
                       rg, name))
        if cc.offset_index_offset is not None:
            add(Region("offset_index", cc.offset_index_offset, cc.offset_index_length or 0,
                       rg, name))
        if cmd.bloom_filter_offset is not None:
            add(Region("bloom", cmd.bloom_filter_offset, cmd.bloom_filter_length or 1, rg, name))
        oi = pf.offset_index(rg, col)
        assert oi is not None and oi.page_locations
        locs = oi.page_locations
        start, _ = chunk_range(cmd)
        first = locs[0].offset or 0
        if first > start:
            add(Region("dictionary", start, first - start, rg, name))
        for k, loc in enumerate(locs):
            add(Region("page", loc.offset or 0, loc.compressed_page_size or 0, rg, name, k))
        self.first_rows[(rg, name)] = [loc.first_row_index or 0 for loc in locs]

    def chunk(self, rg: int, column: str) -> tuple[int, int]:
        """``(offset, length)`` of a column chunk: dictionary page and data pages."""
        parts = [r for r in self.regions if r.row_group == rg and r.column == column
                 and r.kind in ("dictionary", "page")]
        start = min(r.offset for r in parts)
        end = max(r.offset + r.length for r in parts)
        return start, end - start

    def touched(self, trace: Sequence[tuple[int, int]]) -> set[tuple[Any, ...]]:
        """Labels of every region a request overlaps."""
        out = set()
        for off, n in trace:
            for r in self.regions:
                if r.overlaps(off, n):
                    out.add(r.label)
        return out

    def partly_read(self, trace: Sequence[tuple[int, int]]) -> set[tuple[Any, ...]]:
        """Labels of data and dictionary pages some request overlaps without holding whole."""
        out = set()
        for off, n in trace:
            for r in self.regions:
                if r.kind in ("page", "dictionary") and r.overlaps(off, n) \
                        and not r.inside(off, n):
                    out.add(r.label)
        return out

    def pages_holding(self, rg: int, column: str, rows: Sequence[int]) -> set[int]:
        """Pages of a chunk whose rows include any of ``rows`` (row numbers in the row group)."""
        firsts = self.first_rows[(rg, column)]
        ends = [*firsts[1:], self.rows[rg]]
        return {k for k, (a, b) in enumerate(zip(firsts, ends, strict=True))
                if any(a <= r < b for r in rows)}


def of_kind(labels: set[tuple[Any, ...]], *kinds: str) -> set[tuple[Any, ...]]:
    return {lab for lab in labels if lab[0] in kinds}


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def io_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return F.write_io_file(tmp_path_factory.mktemp("io"))


@pytest.fixture(scope="module")
def fmap(io_file: Path) -> FileMap:
    return FileMap(io_file)


def open_ds(path: Path, fmap: FileMap, *, footer_only: bool = True, gap: int = 0
            ) -> pqindex.Dataset:
    """A dataset whose first read is exactly the footer, without request merging."""
    tail = fmap.footer.length if footer_only else 64 * 1024
    return pqindex.dataset(path, tail_bytes=tail, scan_options=ScanOptions(coalesce_gap=gap))


def trace_of(ds: pqindex.Dataset, path: Path) -> list[tuple[int, int]]:
    return list(ds.io_stats()[str(path)].trace)


def row_of_id(id_: int) -> tuple[int, int]:
    """(row group, row in the row group) of an id."""
    row = id_ // 2
    return row // F.IO_ROW_GROUP_ROWS, row % F.IO_ROW_GROUP_ROWS


def expected_data(fmap: FileMap, rows_by_rg: dict[int, list[int]], columns: Sequence[str]
                  ) -> set[tuple[Any, ...]]:
    """Data pages holding ``rows_by_rg`` in each of ``columns``, plus their dictionaries."""
    out: set[tuple[Any, ...]] = set()
    for rg, rows in rows_by_rg.items():
        if not rows:
            continue
        for c in columns:
            out |= {("page", rg, c, k) for k in fmap.pages_holding(rg, c, rows)}
            if c in DICTIONARY_COLUMNS:
                out.add(("dictionary", rg, c))
    return out


# ------------------------------------------------------------------ 1. point lookup


@pytest.mark.parametrize("target_id", [0, 24_680, 99_998, 100_000, 250_002, 399_998])
def test_point_lookup_reads_one_page_per_column(io_file: Path, fmap: FileMap,
                                                target_id: int) -> None:
    columns = ["id", "ts", "category", "user_id", "amount", "payload"]
    ds = open_ds(io_file, fmap)
    scan = ds.scan(columns=columns, where=f"id = {target_id}")
    table = scan.to_table()
    assert table.column("id").to_pylist() == [target_id]
    trace = trace_of(ds, io_file)
    rg, row = row_of_id(target_id)
    touched = fmap.touched(trace)

    assert trace[0] == (fmap.footer.offset, fmap.footer.length), "the first read is the footer"
    assert of_kind(touched, "footer") == {("footer",)}
    assert sum(1 for off, n in trace if fmap.footer.overlaps(off, n)) == 1, "footer read once"
    # One data page per column, plus the dictionary of the dictionary-encoded ones.
    assert of_kind(touched, "page", "dictionary") == expected_data(fmap, {rg: [row]}, columns)
    assert not fmap.partly_read(trace)
    # Page-index entries: only those of the row group that can match.
    index = of_kind(touched, "column_index", "offset_index")
    assert {lab[1] for lab in index} == {rg}, sorted(index)
    assert ("column_index", rg, "id") in index
    assert {("offset_index", rg, c) for c in columns} <= index
    assert not of_kind(touched, "bloom")
    assert scan.report.pages_read == len(columns)


def test_point_lookup_with_the_default_tail(io_file: Path, fmap: FileMap) -> None:
    """With the 64 KiB speculative tail the page index comes with the footer: one request
    for metadata, then one per data page (dictionary pages merged when adjacent)."""
    columns = ["id", "category", "amount"]
    ds = pqindex.dataset(io_file)
    scan = ds.scan(columns=columns, where="id = 300000")
    assert scan.to_table().num_rows == 1
    trace = trace_of(ds, io_file)
    rg, row = row_of_id(300_000)
    assert fmap.footer.inside(*trace[0])
    rest = fmap.touched(trace[1:])
    assert rest == expected_data(fmap, {rg: [row]}, columns), sorted(rest)
    assert len(trace) <= 1 + len(columns) + 1


def test_absent_id_reads_no_data_page(io_file: Path, fmap: FileMap) -> None:
    ds = open_ds(io_file, fmap)
    scan = ds.scan(columns=["id", "payload"], where="id = 123457")  # odd: absent
    assert scan.to_table().num_rows == 0
    rg, row = row_of_id(123_456)
    touched = fmap.touched(trace_of(ds, io_file))
    # Page bounds cannot rule out an odd id between two even ones: the id page that
    # could hold it is read, nothing else.
    assert of_kind(touched, "page", "dictionary") <= expected_data(fmap, {rg: [row]}, ["id"])
    assert scan.report.pages_read <= 1


# ------------------------------------------------------------------ 2. range scan


@pytest.mark.parametrize(("lo", "hi"), [
    (20_000, 20_000),  # one row, first of its page
    (1_998, 2_000),  # straddles a page boundary
    (98_000, 103_998),  # straddles the row-group boundary (row 50,000)
    (150_001, 151_999),  # odd bounds: absent ids at both ends
    (0, 9_999),  # from the first row
    (397_000, 500_000),  # past the last id
])
def test_range_scan_reads_exactly_the_overlapping_pages(io_file: Path, fmap: FileMap,
                                                        lo: int, hi: int) -> None:
    columns = ["id", "ts", "category", "payload"]
    ds = open_ds(io_file, fmap)
    scan = ds.scan(columns=columns, where=f"id BETWEEN {lo} AND {hi}")
    table = scan.to_table()
    ids = [i for i in range(lo + lo % 2, min(hi, 399_998) + 1, 2)]
    assert table.column("id").to_pylist() == ids
    rows_by_rg: dict[int, list[int]] = {}
    for i in ids:
        rg, row = row_of_id(i)
        rows_by_rg.setdefault(rg, []).append(row)
    trace = trace_of(ds, io_file)
    touched = fmap.touched(trace)
    assert of_kind(touched, "page", "dictionary") == expected_data(fmap, rows_by_rg, columns)
    assert not fmap.partly_read(trace)
    index_rgs = {lab[1] for lab in of_kind(touched, "column_index", "offset_index")}
    assert index_rgs == set(rows_by_rg)
    assert scan.report.row_groups_read == len(rows_by_rg)


# ------------------------------------------------------------------ 3. late materialization


def test_rare_value_reads_only_pages_with_matches(io_file: Path, fmap: FileMap) -> None:
    """``category = 'zulu'``: its page bounds single out the pages holding it; the other
    columns read only the pages of the matching rows."""
    columns = ["id", "amount", "payload"]
    ds = open_ds(io_file, fmap)
    scan = ds.scan(columns=columns, where=f"category = '{F.IO_RARE}'")
    table = scan.to_table()
    assert table.column("id").to_pylist() == [2 * r for r in F.IO_RARE_ROWS]
    rows_by_rg: dict[int, list[int]] = {}
    for r in F.IO_RARE_ROWS:
        rows_by_rg.setdefault(r // F.IO_ROW_GROUP_ROWS, []).append(r % F.IO_ROW_GROUP_ROWS)
    touched = fmap.touched(trace_of(ds, io_file))
    assert of_kind(touched, "page", "dictionary") == expected_data(
        fmap, rows_by_rg, [*columns, "category"])


def test_selective_predicate_without_useful_bounds(io_file: Path, fmap: FileMap) -> None:
    """``user_id = X`` (random values: page bounds prune little): the predicate column is
    read where its bounds allow, the projected columns only where rows match."""
    full = pq.read_table(io_file, columns=["user_id"]).column("user_id").to_pylist()
    target = 17
    matches = [i for i, v in enumerate(full) if v == target]
    assert 20 < len(matches) < 100
    columns = ["id", "amount", "payload"]
    ds = open_ds(io_file, fmap)
    scan = ds.scan(columns=columns, where=f"user_id = {target}")
    assert scan.to_table().column("id").to_pylist() == [2 * r for r in matches]
    rows_by_rg: dict[int, list[int]] = {}
    for r in matches:
        rows_by_rg.setdefault(r // F.IO_ROW_GROUP_ROWS, []).append(r % F.IO_ROW_GROUP_ROWS)
    touched = fmap.touched(trace_of(ds, io_file))
    for c in columns:
        got = {lab for lab in of_kind(touched, "page") if lab[2] == c}
        assert got == expected_data(fmap, rows_by_rg, [c]), c
    # The predicate column: never more pages than the plan allowed.
    plan = json.loads(open_ds(io_file, fmap).explain(columns, f"user_id = {target}",
                                                      format="json"))
    allowed = {("page", rg["row_group"], r["column"], p)
               for rg in plan["files"][0]["row_groups"] for r in rg["reads"]
               if r["column"] == "user_id" for p in (r["pages"] or range(PAGES_PER_CHUNK))}
    got_user = {lab for lab in of_kind(touched, "page") if lab[2] == "user_id"}
    assert got_user <= allowed


# ------------------------------------------------------------------ 4. no predicate


# Regression: a scan whose row groups all match used to read every projected chunk's
# OffsetIndex when the page index was not inside the speculative tail read.


@pytest.mark.parametrize("where", [None, "id >= 0"], ids=["no-predicate", "matches-all"])
@pytest.mark.parametrize("footer_only", [
    pytest.param(False, id="default-tail"),
    pytest.param(True, id="footer-only-tail"),
])
def test_no_predicate_reads_no_index_bytes(io_file: Path, fmap: FileMap, footer_only: bool,
                                           where: str | None) -> None:
    columns = ["id", "category", "payload"]
    ds = open_ds(io_file, fmap, footer_only=footer_only)
    scan = ds.scan(columns=columns, where=where)
    assert scan.to_table().num_rows == F.IO_ROWS
    trace = trace_of(ds, io_file)
    assert fmap.footer.inside(*trace[0])
    later = fmap.touched(trace[1:])
    assert not of_kind(later, "column_index", "offset_index", "bloom", "footer"), sorted(
        of_kind(later, "column_index", "offset_index"))[:8]
    # Each projected chunk read once: every byte is read, and no two requests after the
    # tail read share a byte (the tail may hold the end of the last chunks).
    for rg in range(len(fmap.rows)):
        for c in columns:
            off, n = fmap.chunk(rg, c)
            pieces = [(max(o, off), min(o + m, off + n)) for o, m in trace[1:]
                      if o < off + n and off < o + m]
            assert sum(b - a for a, b in pieces) == _union(pieces), (rg, c, "read twice")
            assert _union([*pieces, (max(trace[0][0], off), off + n)]) == n, (rg, c)
    unprojected = {lab for lab in of_kind(later, "page", "dictionary") if lab[2] not in columns}
    assert not unprojected


def _union(pieces: list[tuple[int, int]]) -> int:
    total, end = 0, -1
    for a, b in sorted(pieces):
        if b <= a:
            continue
        if a > end:
            total += b - a
        elif b > end:
            total += b - end
        end = max(end, b)
    return total


def test_no_predicate_costs_no_more_than_a_plain_read(io_file: Path, fmap: FileMap) -> None:
    columns = ["id", "amount"]
    ds = pqindex.dataset(io_file)
    scan = ds.scan(columns=columns)
    scan.to_table()
    chunks = sum(fmap.chunk(rg, c)[1] for rg in range(len(fmap.rows)) for c in columns)
    assert scan.report.bytes_read <= chunks + 64 * 1024


# ------------------------------------------------------------------ 5. the report


REPORT_KEYS = ("files_total", "files_read", "row_groups_total", "row_groups_read",
               "pages_total", "pages_read", "bytes_read", "requests")


@pytest.mark.parametrize("where", [
    None, "id = 123456", "id BETWEEN 99000 AND 101000", f"category = '{F.IO_RARE}'",
    "user_id = 17", "id < 0",
])
def test_report_agrees_with_the_trace(io_file: Path, fmap: FileMap, where: str | None) -> None:
    columns = ["id", "category", "amount"]
    ds = open_ds(io_file, fmap)
    for attempt in ("fresh", "cached footer"):
        stats = ds.io_stats().get(str(io_file))
        before = len(stats.trace) if stats is not None else 0
        scan = ds.scan(columns=columns, where=where)
        scan.to_table()
        rep = scan.report.to_dict()
        assert set(REPORT_KEYS) <= set(rep), rep
        trace = trace_of(ds, io_file)[before:]
        assert rep["requests"] == len(trace), attempt
        assert rep["bytes_read"] == sum(n for _, n in trace), attempt
        assert rep["files_total"] == 1
        assert rep["row_groups_total"] == 4
        read_rgs = {lab[1] for lab in of_kind(fmap.touched(trace), "page")}
        if attempt == "fresh":
            assert rep["row_groups_read"] >= len(read_rgs)
            assert rep["files_read"] == (1 if rep["row_groups_read"] else 0)
            pages = of_kind(fmap.touched(trace), "page")
            assert rep["pages_read"] == len(pages), (rep["pages_read"], len(pages))
        assert rep["pages_read"] <= rep["pages_total"]


def test_report_counts_a_point_lookup(io_file: Path, fmap: FileMap) -> None:
    ds = open_ds(io_file, fmap)
    scan = ds.scan(columns=["id", "payload"], where="id = 222222")
    scan.to_table()
    rep = scan.report.to_dict()
    assert (rep["files_total"], rep["files_read"]) == (1, 1)
    assert (rep["row_groups_total"], rep["row_groups_read"]) == (4, 1)
    assert rep["row_groups_skipped"] == {"statistics": 3}
    assert rep["pages_read"] == 2
    # Every page of the projected columns in every row group, skipped ones included.
    assert rep["pages_total"] == 2 * PAGES_PER_CHUNK * 4
    assert rep["rows_matched"] == 1


# ------------------------------------------------------------------ 6. explain


EXPLAINED = [
    ("id = 24680", ["id", "category", "payload"]),
    ("id BETWEEN 98000 AND 103998", ["id", "ts", "user_id"]),
    (f"category = '{F.IO_RARE}'", ["id", "amount"]),
    ("id >= 399000 OR id < 1000", ["payload"]),
]


@pytest.mark.parametrize(("where", "columns"), EXPLAINED)
def test_explain_reads_no_data_pages_and_lists_what_the_scan_reads(
        io_file: Path, fmap: FileMap, where: str, columns: list[str]) -> None:
    ds = open_ds(io_file, fmap)
    plan = json.loads(ds.explain(columns=columns, where=where, format="json"))
    explain_trace = trace_of(ds, io_file)
    touched = fmap.touched(explain_trace)
    assert not of_kind(touched, "page"), sorted(of_kind(touched, "page"))[:8]
    assert touched <= of_kind(touched, "footer", "column_index", "offset_index", "dictionary",
                              "bloom")
    listed = set()
    for rg in plan["files"][0]["row_groups"]:
        for r in rg["reads"]:
            pages = r["pages"] if r["pages"] is not None else range(PAGES_PER_CHUNK)
            listed |= {("page", rg["row_group"], r["column"], p) for p in pages}
    ds.scan(columns=columns, where=where).to_table()
    scan_pages = of_kind(fmap.touched(trace_of(ds, io_file)[len(explain_trace):]), "page")
    assert scan_pages == listed, (sorted(scan_pages ^ listed)[:10])


def test_explain_text_names_levels(io_file: Path, fmap: FileMap) -> None:
    text = open_ds(io_file, fmap).explain(columns=["id"], where="id = 24680")
    assert "skipped by statistics" in text
    assert "page index" in text
    assert "pages [12] of 50" in text


def test_explain_text_collapses_runs_of_skipped_row_groups(io_file: Path, fmap: FileMap) -> None:
    """Consecutive row groups skipped by one level for one reason print as one line;
    every row group is still accounted for, in order."""
    ds = open_ds(io_file, fmap)
    last = F.IO_ROWS - 1
    text = ds.explain(columns=["id"], where=f"id = 24680 OR id = {last * 2}")
    plan = json.loads(ds.explain(columns=["id"], where=f"id = 24680 OR id = {last * 2}",
                                 format="json"))
    groups = plan["files"][0]["row_groups"]
    covered = []
    for line in text.splitlines():
        m = re.search(r"row groups? (\d+)(?:–(\d+))?: (.*)", line)
        if m:
            lo, hi = int(m[1]), int(m[2] or m[1])
            covered += range(lo, hi + 1)
            if hi > lo:
                assert all(groups[i]["match"] == "NONE" for i in range(lo, hi + 1))
                assert m[3].startswith("skipped by statistics")
    assert covered == list(range(len(groups)))
    # The two matching row groups are the first and the last: one run between them.
    assert sum("skipped by" in line for line in text.splitlines()) == 1, text


# ------------------------------------------------------------------ coalescing


def test_default_coalescing_only_merges_small_gaps(io_file: Path, fmap: FileMap) -> None:
    """With the default 64 KiB gap, every request still holds a page the scan needs and
    skips no more than the gap between needed pieces."""
    columns = ["id", "category", "amount", "payload"]
    ds = open_ds(io_file, fmap, gap=64 * 1024)
    scan = ds.scan(columns=columns, where="id BETWEEN 180000 AND 181000")
    scan.to_table()
    trace = trace_of(ds, io_file)
    rows = [row_of_id(i)[1] for i in range(180_000, 181_001, 2)]
    needed = expected_data(fmap, {row_of_id(180_000)[0]: rows}, columns)
    regions = [r for r in fmap.regions if r.label in needed]
    for off, n in trace:
        if fmap.footer.overlaps(off, n) or of_kind(fmap.touched([(off, n)]), "column_index",
                                                   "offset_index"):
            continue
        inside = sorted((r for r in regions if r.overlaps(off, n)), key=lambda r: r.offset)
        assert inside, f"request ({off}, {n}) reads no needed page"
        gaps = [b.offset - (a.offset + a.length) for a, b in itertools.pairwise(inside)]
        assert all(g <= 64 * 1024 for g in gaps), gaps


# ------------------------------------------------------------------ files without a page index

# Regression: chunks without an OffsetIndex used to be read through a new pyarrow
# reader per field and pass, reading the footer tail and the predicate column again.


@pytest.mark.parametrize("columns", [
    pytest.param(["id"], id="predicate-column-not-projected"),
    pytest.param(["category", "id"], id="predicate-column-projected"),
])
def test_file_without_page_index_reads_each_byte_once(written_files: writers.FileCache,
                                                      columns: list[str]) -> None:
    """DuckDB writes no page index: pqindex falls back to whole chunks, which must still
    cost no more than a plain read (footer once, each needed chunk once)."""
    path = written_files["duckdb"]
    ds = pqindex.dataset(path)
    scan = ds.scan(columns=columns, where="category = 'beta'")
    assert scan.to_table().num_rows == writers.NUM_ROWS // 4
    trace = trace_of(ds, path)
    with ParquetFile.open(path) as pf:
        footer = (pf.footer_offset, pf.file_size - pf.footer_offset)
        size = pf.file_size
    assert sum(1 for o, n in trace if o < footer[0] + footer[1] and footer[0] < o + n) == 1
    pieces = [(o, o + n) for o, n in trace]
    assert sum(b - a for a, b in pieces) == _union(pieces), "some bytes were read twice"
    assert scan.report.bytes_read <= size


@pytest.mark.parametrize("writer", [
    "duckdb",
    "polars",
    "datafusion",
    "pyarrow_v1_none_dict",
])
def test_report_pages_read_never_exceed_pages_total(written_files: writers.FileCache, writer: str) -> None:
    ds = pqindex.dataset(written_files[writer])
    for columns, where in [(["id"], "id < 100"), (["category"], "category = 'beta'"),
                           (["id", "point"], "id < 100"), (["id", "tags"], None)]:
        scan = ds.scan(columns=columns, where=where)
        scan.to_table()
        assert scan.report.pages_read <= scan.report.pages_total, (columns, where,
                                                                   str(scan.report))


# ------------------------------------------------------------------ round trips


@pytest.mark.parametrize("target_id", [24_680, 250_002])
def test_point_lookup_round_trips(io_file: Path, fmap: FileMap, target_id: int) -> None:
    """Footer, the page-index entries of the one kept row group, the id page, the
    other columns' pages: four waves, each counted once by the source and the report."""
    ds = open_ds(io_file, fmap)
    scan = ds.scan(columns=["id", "ts", "payload"], where=f"id = {target_id}")
    assert scan.to_table().column("id").to_pylist() == [target_id]
    stats = ds._open[str(io_file)].stats
    assert scan.report.round_trips == stats.round_trips == 4
    assert scan.report.to_dict()["round_trips"] == 4
    assert stats.requests == len(stats.trace) >= 4
