"""Dictionary pages as Arrow arrays of their PLAIN entries (format/plain.py's
``plain_entries``, the C splitter ``_plain`` or its Python walk) and the pruning
that compares literals with them in pyarrow kernels (DictionaryEvidence), against
pyarrow's own read + filter."""

from __future__ import annotations

import struct
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
from pqindex.errors import CorruptFileError
from pqindex.format import plain
from pqindex.format.schema import PhysicalType

# The page-by-page flow's machinery, on small files: none of their row groups is
# read whole and filtered instead (conftest.page_by_page).
pytestmark = pytest.mark.usefixtures("page_by_page")


def _encoded(values: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(v)) + v for v in values)


@pytest.fixture(params=["c", "python"])
def splitter(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "c":
        if plain._c is None:
            pytest.skip("the C module _plain was not built")
    else:
        monkeypatch.setattr(plain, "_c", None)
    return str(request.param)


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.binary(max_size=40), max_size=60), extra=st.binary(max_size=8))
def test_byte_array_entries_are_the_values(splitter: str, values: list[bytes],
                                           extra: bytes) -> None:
    data = _encoded(values) + extra  # bytes after the values are not theirs
    arr = plain.plain_entries(PhysicalType.BYTE_ARRAY, None, data, len(values))
    assert arr.type == pa.binary()
    assert arr.to_pylist() == values
    arr.validate(full=True)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.binary(min_size=1, max_size=20), min_size=1, max_size=20),
       cut=st.integers(1, 200))
def test_a_short_or_lying_byte_array_page_is_corrupt(splitter: str, values: list[bytes],
                                                     cut: int) -> None:
    data = _encoded(values)
    short = data[: max(len(data) - cut, 0)]
    with pytest.raises(CorruptFileError):
        plain.plain_entries(PhysicalType.BYTE_ARRAY, None, short, len(values))
    lying = struct.pack("<I", 2**31 + 5) + data  # a length past the page
    with pytest.raises(CorruptFileError):
        plain.split_byte_array(lying, 1)


def test_fixed_width_entries_are_views_of_the_page() -> None:
    v = np.arange(-5, 20, dtype=np.int64)
    data = v.tobytes() + b"xyz"
    arr = plain.plain_entries(PhysicalType.INT64, None, data, len(v))
    assert arr.type == pa.binary(8)
    assert [bytes(x) for x in arr.to_pylist()] == [x.tobytes() for x in v]
    with pytest.raises(CorruptFileError):
        plain.plain_entries(PhysicalType.INT64, None, data[:40], len(v))
    with pytest.raises(CorruptFileError):
        plain.plain_entries(PhysicalType.BYTE_ARRAY, None, data, -1)


WORDS = ["", "a", "ab", "abc", "b", "ba", "bab", "caf\u00e9", "zz", "z"]


@st.composite
def _dictionary_files(draw: Any) -> tuple[list[list[str]], list[list[int]]]:
    """Row groups of strings and of ints, each drawn from a small subset of a pool, so
    that a value is absent from some row groups (their dictionaries rule them out)."""
    groups = draw(st.integers(1, 5))
    strs = [draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=30))
            for _ in range(groups)]
    ints = [draw(st.lists(st.integers(-3, 12), min_size=len(s), max_size=len(s)))
            for s in strs]
    return strs, ints


def _predicate(draw: Any) -> tuple[str, Any]:
    """(where text, the same as a pyarrow expression)."""
    kind = draw(st.sampled_from(["eq", "in", "ne", "not_in", "like", "not_like", "int_eq",
                                 "int_in", "int_ne"]))
    s, x = pc.field("s"), pc.field("x")
    pool = [*WORDS, "absent", "q"]
    if kind in ("eq", "ne"):
        w = draw(st.sampled_from(pool))
        lit = "'" + w + "'"
        return (f"s = {lit}", s == w) if kind == "eq" else (f"s != {lit}", s != w)
    if kind in ("in", "not_in"):
        ws = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4, unique=True))
        lits = ", ".join("'" + w + "'" for w in ws)
        if kind == "in":
            return f"s IN ({lits})", s.isin(ws)
        return f"s NOT IN ({lits})", ~s.isin(ws)
    if kind in ("like", "not_like"):
        p = draw(st.sampled_from(["a", "ab", "b", "caf", "z", "q", ""]))
        expr = pc.starts_with(s, p)
        if kind == "like":
            return f"s LIKE '{p}%'", expr
        return f"NOT s LIKE '{p}%'", ~expr
    v = draw(st.integers(-5, 14))
    if kind == "int_eq":
        return f"x = {v}", x == v
    if kind == "int_ne":
        return f"x != {v}", x != v
    vs = draw(st.lists(st.integers(-5, 14), min_size=1, max_size=4, unique=True))
    return f"x IN ({', '.join(map(str, vs))})", x.isin(vs)


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_dictionary_files(), pred=st.data())
def test_dictionary_pruning_keeps_every_matching_row(
    tmp_path_factory: pytest.TempPathFactory,
    data: tuple[list[list[str]], list[list[int]]], pred: Any,
) -> None:
    """Files without statistics (only the dictionaries can prune), random =, IN, !=,
    NOT IN and prefix predicates: pqindex's rows are pyarrow's, and a row group is
    skipped by its dictionary only when pyarrow finds no row in it."""
    strs, ints = data
    where, expr = _predicate(pred.draw)
    path = tmp_path_factory.mktemp("dict") / "t.parquet"
    tables = [pa.table({"s": pa.array(s, pa.string()), "x": pa.array(i, pa.int64()),
                        "g": pa.array([k] * len(s), pa.int32())})
              for k, (s, i) in enumerate(zip(strs, ints, strict=True))]
    with pq.ParquetWriter(path, tables[0].schema, use_dictionary=["s", "x"],
                          write_statistics=False) as w:
        for t in tables:
            w.write_table(t)
    ds = pqindex.dataset(path)
    got = ds.scan(where=where).to_table()
    want = pq.read_table(path).filter(expr)
    key = ["g", "x", "s"]
    assert got.sort_by([(k, "ascending") for k in key]).equals(
        want.sort_by([(k, "ascending") for k in key]).cast(got.schema))
    plan = ds.plan(None, where)
    (entry,) = plan.files
    for rg in entry.row_groups:
        if rg.skipped:
            assert want.filter(pc.field("g") == rg.index).num_rows == 0, rg.reason
    ds.close()


def test_an_absent_value_is_ruled_out_by_dictionaries_of_many_entries(
    tmp_path: Path,
) -> None:
    """Dictionaries of 20,000 distinct strings per row group, no statistics: a value in
    one row group keeps only that one, decided by the dictionaries."""
    path = tmp_path / "t.parquet"
    words = np.array([f"user-{i:06d}@example.org" for i in range(80_000)])
    t = pa.table({"s": words, "id": np.arange(80_000)})
    pq.write_table(t, path, row_group_size=20_000, write_statistics=False)
    ds = pqindex.dataset(path)
    plan = ds.plan(["id"], "s = 'user-045678@example.org'")
    (entry,) = plan.files
    assert entry.row_groups_kept == [2]
    assert {rg.decided_by for rg in entry.row_groups if rg.skipped} == {"dictionary"}
    assert ds.scan(plan=plan).to_table().column("id").to_pylist() == [45678]
    assert ds.scan(columns=["id"], where="s IN ('user-000001@example.org', "
                   "'user-079999@example.org', 'nobody')").to_table().column(
                       "id").to_pylist() == [1, 79_999]
    ds.close()


def test_open_files_share_one_bounded_budget_for_what_they_keep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten files of large dictionaries, budgets of 1 MiB for the whole process: the
    bytes kept stay within them, the rows are pyarrow's, and the files' shares come
    back when the dataset is gone."""
    import gc

    from pqindex.io import cache

    budgets = (cache.KEPT_PAGES, cache.DICTIONARY_EVIDENCE, cache.DECODED_DICTIONARIES)
    for b in budgets:
        monkeypatch.setattr(b, "max_bytes", 1 << 20)
    d = tmp_path / "d"
    d.mkdir()
    words = np.array([f"w{i:07d}-{'x' * 20}" for i in range(30_000)])
    rng = np.random.default_rng(3)
    for k in range(10):
        pq.write_table(pa.table({"s": words[rng.integers(0, len(words), 30_000)],
                                 "id": np.arange(k * 30_000, (k + 1) * 30_000)}),
                       d / f"p{k}.parquet", row_group_size=15_000)
    # Files of earlier tests still in reference cycles (an embedded region's reader
    # holds its file) give their shares back now, not in the middle of this test.
    gc.collect()
    used0 = [b.used for b in budgets]
    ds = pqindex.dataset(d)
    # The same value twice: the second lookup decodes the `id` dictionaries whole.
    for w in ("w0000007-" + "x" * 20, "w0012345-" + "x" * 20, "w0012345-" + "x" * 20):
        got = ds.scan(columns=["id"], where=f"s = '{w}'").to_table()
        want = pq.read_table(d).filter(pc.field("s") == w).select(["id"])
        assert sorted(got.column("id").to_pylist()) == sorted(want.column("id").to_pylist())
        for b, u0 in zip(budgets, used0, strict=True):
            assert b.used - u0 <= 1 << 20
    # Some of each were kept.
    assert all(b.used > u0 for b, u0 in zip(budgets[1:], used0[1:], strict=True))
    ds.close()
    del ds
    gc.collect()
    assert [b.used for b in budgets] == used0


def test_the_c_splitter_returns_none_when_its_buffer_changes_under_it() -> None:
    """The C splitter measures the values, then copies them without the GIL: a
    writable buffer another thread changes meanwhile makes it return None (the
    Python walk then splits a copy, or says the page is corrupt), never offsets
    padded with zeros. A thread flips one value's length between its own and one
    past the buffer's end while the splitter runs on the same buffer."""
    if plain._c is None:
        pytest.skip("the C module _plain was not built")
    import sys
    import threading

    values = [bytes([65 + i % 26]) * (1 + i % 7) for i in range(50_000)]
    buf = bytearray(_encoded(values))
    at = len(_encoded(values[:40_000]))  # the length field of value 40,000
    small, huge = buf[at : at + 4], struct.pack("<I", 1 << 30)
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            buf[at : at + 4] = huge
            buf[at : at + 4] = small

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # the GIL back to this thread soon after each call
    t = threading.Thread(target=flip)
    t.start()
    results = []
    try:
        for _ in range(200):
            results.append(plain._c.split(buf, len(values)))
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(switch)
    want = _encoded(values)
    for got in results:
        if got is None:
            continue
        offsets, body = got
        ends = np.frombuffer(offsets, dtype=np.int32)
        assert int(ends[-1]) == len(body) and bool((np.diff(ends) >= 0).all())
        assert len(body) == len(want) - 4 * len(values)
