"""Planning with embedded indexes added to a file another writer wrote.

The shape of issue 12's indexed benchmark file, small: pyarrow's defaults
(dictionary pages), several row groups of many pages, then ``add_indexes`` with
distinct sets on a low-cardinality column (every page's set the same but for a
rare value) and Bloom filters per row group and page on a high-cardinality one.

* rows equal pyarrow's full read + filter, for random predicates, on a fresh
  dataset per query (cold: every index decoded again) and on a reused one (warm);
* page-scope blobs prune pages (fewer pages read than without embedded indexes);
* I/O traces: a row group's page blobs asked at once are read in one request.
"""

from __future__ import annotations

import itertools
import random
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pqindex
from pqindex.expr.bind import BoundPredicate, bind
from pqindex.expr.sql import parse_where
from pqindex.format.file import ParquetFile
from pqindex.format.match import Match
from pqindex.indexes.base import Scope
from pqindex.indexes.region import REGION_KEY, TRAILER_SIZE, Region
from pqindex.plan.planner import PlanOptions

ROWS = 24_000
RG_ROWS = 6_000
PAGE_ROWS = 200
CATS = [f"c{i:02d}" for i in range(12)]
RARE = "c05x"  # between two common values: min/max cannot rule it out
RARE_AT = [17, 6_450, 6_451, 19_999]


def _table() -> pa.Table:
    rng = np.random.default_rng(12)
    cats = np.array(CATS, dtype=object)[rng.integers(0, len(CATS), ROWS)]
    cats[RARE_AT] = RARE
    mask = rng.random(ROWS) < 0.01
    mask[RARE_AT] = False
    return pa.table({
        "id": np.arange(ROWS, dtype=np.int64),
        "cat": pa.array(list(cats), pa.string(), mask=mask),
        "uid": rng.integers(0, 50_000, ROWS).astype(np.int64),
        "amount": np.round(rng.normal(0, 10, ROWS), 2),
    })


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[pa.Table, Path]:
    t = _table()
    path = tmp_path_factory.mktemp("region_planning") / "t.parquet"
    pq.write_table(t, path, row_group_size=RG_ROWS, max_rows_per_page=PAGE_ROWS,
                   write_batch_size=PAGE_ROWS, write_page_index=True)
    pqindex.add_indexes(str(path), distinct=["cat"], bloom=["uid"])
    return t, path


class _Gen:
    def __init__(self, rng: random.Random, t: pa.Table) -> None:
        self.rng = rng
        self.uids = t.column("uid").to_pylist()

    def leaf(self) -> tuple[str, Any]:
        r = self.rng
        c = r.choice(["cat_eq", "cat_in", "cat_cmp", "uid_eq", "uid_in", "null", "id"])
        if c == "cat_eq":
            v = r.choice([RARE, "absent", "c05y", *CATS])
            return f"cat = '{v}'", pc.field("cat") == v
        if c == "cat_in":
            vs = r.sample([RARE, "absent", *CATS], r.randint(1, 3))
            return "cat IN (" + ", ".join(f"'{v}'" for v in vs) + ")", pc.field("cat").isin(vs)
        if c == "cat_cmp":
            v = r.choice([RARE, *CATS])
            op = r.choice(["<", ">=", "!="])
            e = {"<": pc.field("cat") < v, ">=": pc.field("cat") >= v,
                 "!=": pc.field("cat") != v}[op]
            return f"cat {op} '{v}'", e
        if c == "uid_eq":
            v = r.choice(self.uids) if r.random() < 0.7 else r.randint(50_000, 60_000)
            return f"uid = {v}", pc.field("uid") == v
        if c == "uid_in":
            vs = [r.choice(self.uids) if r.random() < 0.5 else r.randint(0, 60_000)
                  for _ in range(r.randint(1, 4))]
            return "uid IN (" + ", ".join(map(str, vs)) + ")", pc.field("uid").isin(vs)
        if c == "null":
            return ("cat IS NULL", pc.field("cat").is_null()) if r.random() < 0.5 else (
                "cat IS NOT NULL", pc.field("cat").is_valid())
        lo = r.randint(0, ROWS)
        return f"id >= {lo}", pc.field("id") >= lo

    def tree(self, depth: int = 0) -> tuple[str, Any]:
        r = self.rng
        if depth >= 2 or r.random() < 0.5:
            return self.leaf()
        (a, ea), (b, eb) = self.tree(depth + 1), self.tree(depth + 1)
        if r.random() < 0.5:
            return f"({a}) AND ({b})", ea & eb
        return f"({a}) OR ({b})", ea | eb


def test_random_predicates_equal_pyarrow(indexed: tuple[pa.Table, Path]) -> None:
    t, path = indexed
    ref = pq.read_table(path)
    assert ref.equals(t)
    gen = _Gen(random.Random(1212), t)
    warm = pqindex.dataset(str(path))
    nonempty = skipped = 0
    for i in range(160):
        where, expr = gen.tree()
        want = ref.filter(expr).column("id").to_pylist()
        for ds in (pqindex.dataset(str(path)), warm):
            scan = ds.scan(columns=["id", "amount"], where=where)
            got = scan.to_table()
            assert got.column("id").to_pylist() == want, (i, where)
            assert scan.report.warnings == [], (i, where)
        nonempty += bool(want)
        skipped += sum(scan.report.row_groups_skipped.values()) > 0
    assert nonempty > 40 and skipped > 20


@pytest.mark.parametrize("where", [f"cat = '{RARE}'", f"cat IN ('{RARE}', 'absent')"])
def test_page_sets_prune_pages(indexed: tuple[pa.Table, Path], where: str) -> None:
    """The rare value's pages only: every other page's set lacks it (and equal sets
    are asked once, the answer shared)."""
    _t, path = indexed
    rows = pqindex.dataset(str(path)).scan(columns=["id", "cat"], where=where)
    got = rows.to_table()
    assert got.column("id").to_pylist() == RARE_AT
    plain = pqindex.dataset(str(path), plan_options=PlanOptions(embedded=False)).scan(
        columns=["id", "cat"], where=where)
    assert plain.to_table().equals(got)
    # pages holding the rare rows, per projected column: the predicate column and id
    pages = {(r // RG_ROWS, (r % RG_ROWS) // PAGE_ROWS) for r in RARE_AT}
    with ParquetFile.open(str(path)) as pf:
        firsts = {c: [loc.first_row_index for loc in
                      (pf.offset_index(0, c).page_locations or [])] for c in (0, 1)}
    # pyarrow's pages hold PAGE_ROWS rows here: the arithmetic above is the layout
    assert all(f == [k * PAGE_ROWS for k in range(RG_ROWS // PAGE_ROWS)]
               for f in firsts.values())
    assert rows.report.pages_read == 2 * len(pages)
    assert plain.report.pages_read > rows.report.pages_read


def _region(path: Path, reads: list[tuple[int, int]]) -> tuple[Region, ParquetFile]:
    """The file's region parsed from its trailer and directories only; blob reads logged."""
    pf = ParquetFile.open(str(path))
    kv = {e.key: e.value for e in pf.metadata.key_value_metadata or []}
    offset, length = map(int, str(kv[REGION_KEY]).split(":"))
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)

    def fetch(at: int, n: int) -> bytes:
        reads.append((at, n))
        return data[at:at + n]

    dir_len = struct.unpack_from("<I", data, len(data) - TRAILER_SIZE)[0]
    tail = len(data) - TRAILER_SIZE - dir_len
    region = Region.parse(data[tail:], file_size=pf.source.size(), region_offset=offset,
                          length=length, fetch=fetch, schema=pf.schema)
    return region, pf


def _bound(pf: ParquetFile, where: str) -> BoundPredicate:
    expr = bind(parse_where(where), pf.schema)
    assert isinstance(expr, BoundPredicate)
    return expr


def test_page_blobs_of_a_row_group_in_one_request(indexed: tuple[pa.Table, Path]) -> None:
    _t, path = indexed
    reads: list[tuple[int, int]] = []
    region, pf = _region(path, reads)
    pages = RG_ROWS // PAGE_ROWS
    units: list[tuple[int | None, int | None]] = [(1, p) for p in range(pages)]
    region.open_columns(["cat"])
    reads.clear()
    evs = region.evidence_of_units(Scope.PAGE, "cat", units)
    assert len(reads) == 1, reads  # every page blob of row group 1 at once
    assert all(len(e) == 1 for e in evs)
    pred = _bound(pf, f"cat = '{RARE}'")
    answers = [Match(e[0].match(pred)) for e in evs]
    # the same answers unit by unit, from a region that reads blob after blob
    other, _ = _region(path, [])
    one_by_one = [Match(other.evidence(Scope.PAGE, "cat", 1, p)[0].match(pred))
                  for p in range(pages)]
    assert answers == one_by_one
    truth = [any(r // RG_ROWS == 1 and (r % RG_ROWS) // PAGE_ROWS == p for r in RARE_AT)
             for p in range(pages)]
    assert [a != Match.NONE for a in answers] == truth
    # Asked again: nothing read.
    reads.clear()
    region.evidence_of_units(Scope.PAGE, "cat", units)
    assert reads == []
    pf.close()


def test_every_row_group_asked_in_turn_reads_few_requests(
        indexed: tuple[pa.Table, Path]) -> None:
    """Neighbouring blobs (up to 64 KiB) come along with a wanted one: a planner asking
    row group after row group reads each blob once, in a few requests."""
    _t, path = indexed
    reads: list[tuple[int, int]] = []
    region, pf = _region(path, reads)
    region.open_columns(["cat"])
    reads.clear()
    pages = RG_ROWS // PAGE_ROWS
    for rg in range(ROWS // RG_ROWS):
        region.evidence_of_units(Scope.PAGE, "cat", [(rg, p) for p in range(pages)])
    spans = sorted(reads)
    assert all(a + n <= b for (a, n), (b, _) in itertools.pairwise(spans)), spans
    blob_bytes = sum(e.length for e in region.find(column="cat", scope=Scope.PAGE))
    assert sum(n for _, n in reads) <= blob_bytes + 4096 * len(reads)
    assert len(reads) <= blob_bytes // (64 * 1024) + 2 < ROWS // RG_ROWS * pages
    pf.close()


@pytest.mark.parametrize("codec", ["zstd", "snappy"])
def test_large_dictionaries_decoded_side_by_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 codec: str) -> None:
    """Sparse rows of several columns whose pages need a large dictionary page (pyarrow's
    default encoding of unique values): zstd pages are decompressed whole, on two threads;
    snappy ones give their few entries (decompress.gather) here. The rows equal pyarrow's
    read + filter, cold and warm."""
    from pqindex.scan import executor

    rng = np.random.default_rng(5)
    n = 120_000
    t = pa.table({
        "id": np.arange(n, dtype=np.int64),
        "a": rng.integers(-(2**62), 2**62, n),
        "b": rng.random(n),
        "c": pa.array(rng.integers(0, 2**31, n).astype(np.int32), mask=rng.random(n) < 0.1),
    })
    path = tmp_path / "dict.parquet"
    pq.write_table(t, path, row_group_size=60_000, max_rows_per_page=2_000,
                   write_page_index=True, compression=codec)
    with ParquetFile.open(str(path)) as pf:
        sizes = [ext[1] for rg in range(2) for c in (1, 2)
                 if (ext := pf.dictionary_extent(rg, c)) is not None]
    assert len(sizes) == 4 and min(sizes) >= executor._SIDE_BY_SIDE_BYTES
    calls: list[int] = []
    real = executor.side_by_side

    def spy(jobs: Any) -> list[Any]:
        calls.append(len(jobs))
        return real(jobs)

    monkeypatch.setattr(executor, "side_by_side", spy)
    warm = pqindex.dataset(str(path))
    for lo in (17, 59_990, 61_000, 119_995):
        where = f"id BETWEEN {lo} AND {lo + 12}"
        want = t.filter((pc.field("id") >= lo) & (pc.field("id") <= lo + 12))
        for ds in (pqindex.dataset(str(path)), warm):
            got = ds.scan(columns=["id", "a", "b", "c"], where=where).to_table()
            assert got.equals(want.select(got.column_names)), where
    if codec == "zstd":
        assert calls and max(calls) >= 2  # the path ran (cold: dictionaries not decoded yet)
    else:
        assert not calls


def test_exact_value_sets_spare_the_dictionary_reads(indexed: tuple[pa.Table, Path]) -> None:
    """A row group's exact embedded value set tells all a dictionary page could: planning
    reads no dictionary page of that column (it does without embedded indexes)."""
    from pqindex.io.source import LocalFileSource
    from pqindex.plan.planner import plan_file

    t, path = indexed

    class Log(LocalFileSource):
        def __init__(self, p: Path) -> None:
            super().__init__(str(p))
            self.ranges: list[tuple[int, int]] = []

        def read_ranges(self, ranges: Any) -> list[bytes]:
            self.ranges += list(ranges)
            return super().read_ranges(ranges)

        def read_views(self, ranges: Any) -> list[memoryview]:
            self.ranges += list(ranges)
            return super().read_views(ranges)

        def read(self, offset: int, length: int) -> bytes:
            self.ranges.append((offset, length))
            return super().read(offset, length)

    for where in (f"cat = '{RARE}'", "cat IN ('c01', 'absent')", "cat > 'c10'"):
        reads = {}
        for embedded in (True, False):
            src = Log(path)
            pf = ParquetFile(src)
            tail = list(src.ranges)
            bound = bind(parse_where(where), pf.schema)
            plan = plan_file(pf, bound, [0, 1], options=PlanOptions(embedded=embedded))
            cat = pf.schema.leaf("cat")
            assert cat is not None
            dicts = [pf.dictionary_extent(rg, cat.index) for rg in range(2)]
            assert all(d is not None for d in dicts)
            reads[embedded] = [d for d in dicts if d is not None and any(
                o < d[0] + d[1] and d[0] < o + n for o, n in src.ranges[len(tail):])]
            want = t.filter(pc.field("id") < 2 * RG_ROWS).filter(
                parse_where_arrow(where)).column("id").to_pylist()
            kept = [i for rgp in plan.row_groups[:2] for a, b in rgp.maybe.intervals()
                    for i in range(rgp.index * RG_ROWS + a, rgp.index * RG_ROWS + b)]
            assert set(want) <= set(kept), (where, embedded)
            pf.close()
        assert reads[True] == [], where
        if ">" in where:
            # A range is answered from the entries' min and max: no better than the
            # chunk's exact statistics, so no dictionary is read either way.
            assert reads[False] == [], where
        else:
            assert reads[False], where  # the observation works: without them it reads them


def parse_where_arrow(where: str) -> Any:
    if where.startswith("cat IN"):
        return pc.field("cat").isin(["c01", "absent"])
    if where.startswith("cat >"):
        return pc.field("cat") > "c10"
    return pc.field("cat") == RARE
