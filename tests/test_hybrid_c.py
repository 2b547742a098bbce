"""The C kernel for the RLE / bit-packed hybrid encoding (pqindex.scan._hybrid)
against the numpy code of pqindex.scan.hybrid and against pyarrow.

Three references: a plain-Python encoder (every bit width 1..32, mixed runs,
repeated headers, last runs cut short or padded), the numpy decoder (which must
accept and reject exactly the same streams, with the same messages), and
pyarrow's own files (dictionary indices and definition levels as pyarrow wrote
and decodes them).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import import_or_missing
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.scan import encoded, hybrid
from pqindex.scan.page_decode import arrow_schema

_c: Any = import_or_missing("pqindex.scan._hybrid", "the C module pqindex.scan._hybrid")
pytestmark = pytest.mark.skipif(not hybrid.accelerated(),
                                reason="C kernel disabled (PQINDEX_PURE_PYTHON)")

Plan = list[tuple[bool, int]]


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _encode(values: list[int], width: int, plan: Plan, *, cut: int | None = None) -> bytes:
    """``values`` run by run as ``plan`` says (bit-packed?, length); a bit-packed
    run's last group padded with zeros. ``cut``: the last bit-packed run stops at
    the last byte its values need (the spec lets a writer drop the padding)."""
    out = bytearray()
    pos = 0
    for k, (packed, length) in enumerate(plan):
        run = values[pos : pos + length]
        pos += length
        if packed:
            groups = (len(run) + 7) // 8
            out += _varint(groups << 1 | 1)
            bits = 0
            for i, v in enumerate(run):
                bits |= v << (i * width)
            body = bits.to_bytes(groups * width, "little")
            if cut is not None and k == len(plan) - 1:
                body = body[: (len(run) * width + 7) // 8]
            out += body
        else:
            value = run[0] if run else 0
            out += _varint(len(run) << 1) + value.to_bytes((width + 7) // 8, "little")
    return bytes(out)


_WIDTHS = st.integers(1, 32)


@st.composite
def _case(draw: st.DrawFn, widths: st.SearchStrategy[int] = _WIDTHS
          ) -> tuple[list[int], int, Plan]:
    width = draw(widths)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    # Few distinct values too, so that searches find runs of hits.
    pool = rng.integers(0, 1 << width, draw(st.sampled_from([2, 5, 1 << min(width, 12)])))
    plan: Plan = []
    values: list[int] = []
    for _ in range(draw(st.integers(1, 10))):
        if draw(st.booleans()):
            groups = draw(st.sampled_from([1, 2, 3, 8, 64]))
            for _ in range(draw(st.integers(1, 3))):  # repeated headers, as writers do
                n = groups * 8 - draw(st.sampled_from([0, 0, 1, 7]))
                plan.append((True, n))
                values += [int(v) for v in pool[rng.integers(0, pool.size, n)]]
        else:
            n = draw(st.integers(0, 300))
            plan.append((False, n))
            values += [int(pool[rng.integers(0, pool.size)])] * n
    return values, width, plan


def _outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    """What a decoder does with ``args``: its result as a list, or its ValueError."""
    try:
        out = fn(*args)
    except ValueError as e:
        return "error", str(e)
    if isinstance(out, list):
        return "ok", [np.asarray(o).tolist() for o in out]
    return "ok", np.asarray(out).tolist()


def _expected(values: list[int], plan: Plan, count: int) -> list[int]:
    """The values a reader returns: a bit-packed run shorter than its groups gives
    zeros (the padding) up to its groups' end."""
    out: list[int] = []
    pos = 0
    for packed, n in plan:
        out += values[pos : pos + n]
        pos += n
        if packed:
            out += [0] * (-n % 8)
    return out[:count]


def _numpy_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hybrid, "_c", None)


# ---------------------------------------------------------------- valid streams


@settings(max_examples=400, deadline=None)
@given(_case(), st.data())
def test_c_decodes_like_numpy_and_the_encoder(case: tuple[list[int], int, Plan],
                                              data: st.DataObject) -> None:
    values, width, plan = case
    cut = data.draw(st.booleans())
    buf = b"\x5a" + _encode(values, width, plan, cut=True if cut else None)
    full = _expected(values, plan, 1 << 30)
    # A stream cut short has values only up to the last one encoded.
    count = data.draw(st.integers(0, len(values) if cut else len(full)))
    c = hybrid.decode_hybrid(buf, 1, len(buf), width, count)
    assert c.dtype == np.intp
    assert c.tolist() == full[:count]
    assert hybrid._decode_np(buf, 1, len(buf), width, count).tolist() == full[:count]
    if width <= 8:
        flags = np.frombuffer(_c.decode(buf, 1, len(buf), width, count, 1), np.uint8)
        assert flags.tolist() == full[:count]
    narrow = np.frombuffer(_c.decode(buf, 1, len(buf), width, count, 4), np.uint32)
    assert narrow.tolist() == full[:count]


@settings(max_examples=400, deadline=None)
@given(_case(), st.data())
def test_c_finds_what_numpy_finds(case: tuple[list[int], int, Plan], data: st.DataObject) -> None:
    values, width, plan = case
    full = _expected(values, plan, 1 << 30)
    count = data.draw(st.integers(0, len(full)))
    buf = _encode(values, width, plan)
    # Present values, absent ones and values too wide for the stream.
    pool = [*sorted(set(full)), 0, (1 << width) - 1, 1 << width, 3 << 40]
    ids = np.array(sorted(set(data.draw(st.lists(st.sampled_from(pool), max_size=12)))),
                   dtype=np.int64)
    want = [i for i, v in enumerate(full[:count]) if v in set(ids.tolist())]
    streams = [(buf, 0, len(buf), count), (b"\x00" + buf, 1, len(buf) + 1, count)]
    assert [h.tolist() for h in hybrid.find_many(streams, width, ids)] == [want, want]
    small = ids[ids < 1 << width]
    assert hybrid._find_many_np(streams[:1], width, small)[0].tolist() == want
    table = np.zeros(1 << min(width, 16), dtype=np.bool_)
    table[small[small < table.size]] = True
    by_table = [i for i, v in enumerate(full[:count]) if v < table.size and table[v]]
    assert hybrid.find_table(streams[:1], width, table)[0].tolist() == by_table


@settings(max_examples=300, deadline=None)
@given(_case(), st.data())
def test_c_values_at_positions(case: tuple[list[int], int, Plan], data: st.DataObject) -> None:
    values, width, plan = case
    full = _expected(values, plan, 1 << 30)
    count = data.draw(st.integers(0, len(full)))
    buf = b"\xff" + _encode(values, width, plan) + b"\xff"
    at = sorted(data.draw(st.lists(st.integers(0, max(count - 1, 0)), max_size=20)))
    at = [a for a in at if a < count]  # repeats allowed
    got = hybrid.decode_hybrid_at(buf, 1, len(buf) - 1, width, count, np.array(at))
    assert got.tolist() == [full[a] for a in at]
    assert hybrid._decode_at_np(buf, 1, len(buf) - 1, width, count,
                                np.array(at)).tolist() == got.tolist()


def test_every_width_and_value_edge() -> None:
    for width in range(1, 33):
        top = (1 << width) - 1
        values = [top, 0, top, 1, top // 2, top, 0, top] * 3 + [top] * 5
        plan: Plan = [(True, 24), (False, 5)]
        buf = _encode(values, width, plan)
        assert hybrid.decode_hybrid(buf, 0, len(buf), width, 29).tolist() == values
        hits = hybrid.find_many([(buf, 0, len(buf), 29)], width, np.array([top]))[0]
        assert hits.tolist() == [i for i, v in enumerate(values) if v == top]


# ---------------------------------------------------------------- malformed streams


def _all_outcomes(buf: bytes, pos: int, end: int, width: int, count: int,
                  ids: np.ndarray) -> list[tuple[str, Any]]:
    at = np.arange(0, max(count, 0), 7)
    return [
        _outcome(hybrid.decode_hybrid, buf, pos, end, width, count),
        _outcome(hybrid._decode_np, buf, pos, end, width, count),
        _outcome(hybrid.decode_hybrid_at, buf, pos, end, width, count, at),
        _outcome(hybrid._decode_at_np, buf, pos, end, width, count, at),
        _outcome(hybrid.find_many, [(buf, pos, end, count)], width, ids),
        _outcome(hybrid._find_many_np, [(buf, pos, end, count)], width,
                 ids[ids < 1 << min(width, 62)]),
    ]


def _agree(outcomes: list[tuple[str, Any]]) -> None:
    decode, decode_np, at, at_np, find, find_np = outcomes
    assert decode == decode_np
    assert at == at_np
    assert find == find_np
    # Every function rejects a stream, or none does, and for the same reason.
    kinds = {o[0] for o in outcomes}
    assert len(kinds) == 1, outcomes
    if kinds == {"error"}:
        assert len({o[1] for o in outcomes}) == 1, outcomes


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_case(st.integers(1, 12)), st.data())
def test_corrupt_streams_fail_alike(case: tuple[list[int], int, Plan],
                                    data: st.DataObject) -> None:
    """Truncated, bit-flipped and over-asked streams: the C kernel and numpy give
    the same values or the same ValueError (never a crash, never another error)."""
    values, width, plan = case
    buf = bytearray(_encode(values, width, plan))
    for _ in range(data.draw(st.integers(0, 4))):
        if buf:
            i = data.draw(st.integers(0, len(buf) - 1))
            buf[i] = data.draw(st.integers(0, 255))
    end = data.draw(st.integers(0, len(buf)))
    count = data.draw(st.integers(-2, len(values) + 40))
    ids = np.array(data.draw(st.lists(st.integers(0, (1 << width) - 1), max_size=3)) or [0],
                   dtype=np.int64)
    _agree(_all_outcomes(bytes(buf), 0, end, width, count, ids))


def test_random_bytes_fuzz() -> None:
    """A quick fuzz loop over random bytes, widths and counts."""
    rng = np.random.default_rng(12)
    for trial in range(3000):
        n = int(rng.integers(0, 64))
        buf = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        if trial % 3 == 0 and n:  # mostly small headers: more runs that parse
            buf = bytes(b & 0x3F for b in buf)
        width = int(rng.integers(1, 33))
        count = int(rng.integers(-1, 300))
        pos = int(rng.integers(0, n + 1))
        ids = rng.integers(0, 1 << min(width, 8), int(rng.integers(1, 4)))
        _agree(_all_outcomes(buf, pos, n, width, count, ids))


def test_the_messages_are_numpy_s() -> None:
    cases = [
        (bytes([0x80] * 3), 3, 1, "run header runs past the data"),
        (bytes([0x80] * 7 + [0]), 3, 1, "run header runs past the data"),  # > 35 bits
        (bytes([8 << 1, 5]), 3, 9, "runs end after 8 of 9 values"),
        (bytes([2 << 1 | 1]) + bytes(5), 3, 16, "bit-packed run runs past the data"),
        (bytes([4 << 1]), 9, 4, "RLE run value runs past the data"),
        (bytes([4 << 1, 9]), 3, 4, "RLE value 9 wider than 3 bits"),
        (bytes([4 << 1, 0xFF, 0xFF, 0xFF, 0xFF]), 31, 4, f"RLE value {2**32 - 1} wider than 31 bits"),
    ]
    for buf, width, count, message in cases:
        for fn in (hybrid.decode_hybrid, hybrid._decode_np):
            with pytest.raises(ValueError) as e:
                fn(buf, 0, len(buf), width, count)
            assert str(e.value) == message
    for width in (0, 33, -1):
        with pytest.raises(ValueError, match=f"bit width {width}"):
            _c.decode(b"\x02\x00", 0, 2, width, 1)


def test_a_cut_last_run_needs_only_its_values() -> None:
    values = list(range(8)) * 2 + [5, 6, 7]  # 19 values of 3 bits: 8 bytes needed
    buf = _encode(values, 3, [(True, 19)], cut=True)
    assert len(buf) == 1 + 8
    assert hybrid.decode_hybrid(buf, 0, len(buf), 3, 19).tolist() == values
    assert hybrid.find_many([(buf, 0, len(buf), 19)], 3, np.array([7]))[0].tolist() == [7, 15, 18]
    with pytest.raises(ValueError, match="bit-packed run runs past the data"):
        hybrid.decode_hybrid(buf, 0, len(buf) - 1, 3, 19)
    # The runs end where the values do: asking for one more fails.
    with pytest.raises(ValueError, match="runs end after 24 of 25 values"):
        hybrid.decode_hybrid(_encode(values, 3, [(True, 19)]), 0, 10, 3, 25)


def test_an_empty_bit_packed_run_is_skipped() -> None:
    buf = bytes([1, 4 << 1, 3])  # 0 groups, then an RLE run
    for fn in (hybrid.decode_hybrid, hybrid._decode_np):
        assert fn(buf, 0, 3, 2, 4).tolist() == [3, 3, 3, 3]


def test_strict_tables_reject_indices_past_the_dictionary() -> None:
    """find_table(strict=True): an index not below the table (dictionary) size is a
    ValueError, on every path (RLE, word compare, unpacked); padding is not checked."""
    table = np.zeros(5, dtype=np.bool_)
    table[2] = True
    good = [0, 1, 2, 3, 4, 2, 2, 1, 0, 4]
    for width in (3, 4, 12):
        for ids in ([2], [1, 2], list(range(5))):
            t = np.zeros(5, dtype=np.bool_)
            t[ids] = True
            ok = _encode(good, width, [(True, 10)])
            want = [i for i, v in enumerate(good) if t[v]]
            for fn in (hybrid.find_table, hybrid._find_table_np):
                assert fn([(ok, 0, len(ok), 10)], width, t, strict=True)[0].tolist() == want
            for bad, plan in (([*good[:9], 5], [(True, 10)]), ([6] * 10, [(False, 10)]),
                              ([0] * 8 + [7, 1], [(True, 10)])):
                buf = _encode(bad, width, plan)
                for fn in (hybrid.find_table, hybrid._find_table_np):
                    with pytest.raises(ValueError, match=r"value \d+ not below 5"):
                        fn([(buf, 0, len(buf), 10)], width, t, strict=True)
                    # not strict: simply no hit
                    fn([(buf, 0, len(buf), 10)], width, t)
    # A value past the count (the last group's padding) is never checked.
    buf = _encode([1, 2, 7], 3, [(True, 3)])
    assert hybrid.find_table([(buf, 0, len(buf), 2)], 3, table, strict=True)[0].tolist() == [1]


def test_buffers_are_read_in_place() -> None:
    values = [3, 1, 4, 1, 5, 9, 2, 6] * 100
    enc = _encode(values, 4, [(True, 800)])
    raw = bytearray(b"\x00\x00\x00" + enc)
    arr = np.frombuffer(bytes(raw), dtype=np.uint8)
    for buf in (bytes(raw), raw, memoryview(raw), memoryview(bytes(raw))[0:],
                arr, pa.py_buffer(bytes(raw))):
        got = hybrid.decode_hybrid(buf, 3, len(raw), 4, 800)
        assert got.tolist() == values
        assert hybrid.find_many([(buf, 3, len(raw), 800)], 4, np.array([9]))[0].tolist() == \
            [i for i, v in enumerate(values) if v == 9]
    with pytest.raises(ValueError, match="outside a buffer"):
        hybrid.decode_hybrid(enc, 0, len(enc) + 1, 4, 800)
    with pytest.raises((BufferError, TypeError, ValueError)):  # not contiguous
        hybrid.decode_hybrid(np.zeros(100, np.uint8)[::2], 0, 10, 4, 8)
    with pytest.raises(ValueError, match="ascending"):
        hybrid.decode_hybrid_at(enc, 0, len(enc), 4, 800, np.array([5, 3]))
    with pytest.raises(ValueError, match="ascending"):
        hybrid.decode_hybrid_at(enc, 0, len(enc), 4, 800, np.array([800]))


def test_many_threads_share_the_kernel() -> None:
    """The scans run without the GIL: threads at once get each their own answer."""
    rng = np.random.default_rng(3)
    cases = []
    for width in (2, 6, 13, 17, 32):
        values = [int(v) for v in rng.integers(0, 1 << width, 40_000)]
        cases.append((width, values, _encode(values, width, [(True, 40_000)])))
    errors: list[BaseException] = []

    def work(width: int, values: list[int], buf: bytes) -> None:
        try:
            for _ in range(20):
                assert hybrid.decode_hybrid(buf, 0, len(buf), width, 40_000).tolist() == values
                hit = hybrid.find_many([(buf, 0, len(buf), 40_000)], width,
                                       np.array([values[7]]))[0]
                assert hit.tolist() == [i for i, v in enumerate(values) if v == values[7]]
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=c) for c in cases * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# ---------------------------------------------------------------- pyarrow's streams


def _pages(pf: ParquetFile, rg: int, col: int) -> list[Any]:
    start, length = chunk_range(pf.column_meta(rg, col))
    return list(encoded._walk(pf, rg, col, pf.read_bytes(start, length)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(distinct=st.sampled_from([1, 2, 3, 17, 200, 3000, 70_000]), seed=st.integers(0, 2**31),
       nulls=st.sampled_from([0.0, 0.3, 0.97]), version=st.sampled_from(["1.0", "2.0"]))
def test_pyarrow_dictionary_indices_and_levels(
    distinct: int, seed: int, nulls: float, version: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Index streams and definition levels as pyarrow writes them, decoded by the C
    kernel, equal pyarrow's own decode (its DictionaryArray indices, its nulls)."""
    rng = np.random.default_rng(seed)
    n = 90_000
    pool = rng.permutation(distinct).astype(np.int32)
    # Long stretches of one value (RLE runs) between random ones (bit-packed runs).
    picks = pool[rng.integers(0, distinct, n)]
    picks[20_000:30_000] = pool[0]
    mask = rng.random(n) < nulls
    # Strings: pyarrow hands their dictionary indices back as stored (read_dictionary).
    table = pa.table({"v": pa.array([f"s{v}" for v in picks.tolist()], mask=mask)})
    path = tmp_path_factory.mktemp("pa") / "f.parquet"
    pq.write_table(table, path, data_page_version=version, dictionary_pagesize_limit=1 << 22,
                   data_page_size=1 << 16, compression="snappy", write_page_index=True)
    column = pq.read_table(path, read_dictionary=["v"]).column("v")
    assert column.num_chunks == 1  # one dictionary: its indices are the file's
    indices = column.chunk(0).indices
    pf = ParquetFile.open(path)
    try:
        dict_size = 0
        row = 0
        checked = 0
        for page in _pages(pf, 0, 0):
            if isinstance(page, encoded._Dictionary):
                dict_size = page.count
                continue
            rows = indices.slice(row, page.rows)
            row += page.rows
            want_valid = pc.is_valid(rows).to_numpy(zero_copy_only=False)
            got_valid = np.ones(page.rows, np.bool_) if page.valid is None else page.valid
            assert got_valid.tolist() == want_valid.tolist()
            body = page.body
            width = body[0]
            want = rows.drop_null().to_numpy(zero_copy_only=False).tolist()
            got = hybrid.decode_hybrid(body, 1, len(body), width, page.present)
            assert got.tolist() == want
            assert hybrid._decode_np(bytes(body), 1, len(body), width,
                                     page.present).tolist() == want
            lut = np.zeros(dict_size, dtype=np.bool_)
            lut[rng.integers(0, dict_size, 3)] = True
            hits = hybrid.find_table([(body, 1, len(body), page.present)], width, lut,
                                     strict=True)[0]
            assert hits.tolist() == [i for i, v in enumerate(want) if lut[v]]
            checked += 1
        assert checked and row == n
    finally:
        pf.close()


# ---------------------------------------------------------------- without the kernel


def _issue_like(tmp: Path) -> Path:
    rng = np.random.default_rng(5)
    n = 60_000
    cats = np.array([f"c{i:02d}" for i in range(50)] + ["rare"])
    pick = rng.integers(0, 50, n)
    pick[rng.integers(0, n, 4)] = 50
    table = pa.table({
        "category": pa.array(cats[pick]),
        "user_id": pa.array(rng.integers(0, 1 << 40, n)),
        "opt": pa.array(rng.integers(0, 7, n), mask=rng.random(n) < 0.2),
    })
    path = tmp / "issue.parquet"
    pq.write_table(table, path, row_group_size=30_000, data_page_size=4096,
                   dictionary_pagesize_limit=64 << 10, write_page_index=True)
    return path


def _match_all(path: Path) -> list[Any]:
    """matching_rows and decode_chunk of every chunk (None where not handled)."""
    pf = ParquetFile.open(path)
    schema = arrow_schema(pf)
    out: list[Any] = []
    try:
        ref = pq.ParquetFile(path)
        for rg in range(ref.metadata.num_row_groups):
            want = ref.read_row_group(rg)
            for leaf in pf.schema.leaves:
                name = leaf.path[0]
                start, length = chunk_range(pf.column_meta(rg, leaf.index))
                raw = pf.read_bytes(start, length)
                target = schema.field(name).type
                col = want.column(name).combine_chunks()
                value = col.drop_null()[3]

                def evaluate(a: pa.Array, value: Any = value) -> pa.BooleanArray:
                    return pc.fill_null(pc.equal(a, value), False)

                rows = encoded.matching_rows(pf, rg, leaf.index, target, raw, evaluate)
                expect = np.flatnonzero(
                    pc.fill_null(pc.equal(col, value), False).to_numpy(zero_copy_only=False))
                assert rows is not None and rows.tolist() == expect.tolist(), (rg, name)
                chunk = encoded.decode_chunk(pf, rg, leaf.index, target, raw)
                assert chunk is not None
                plain = chunk.cast(col.type) if pa.types.is_dictionary(chunk.type) else chunk
                assert plain.equals(col), (rg, name)
                out.append((rows.tolist(), plain))
    finally:
        pf.close()
    return out


def test_numpy_fallback_when_the_kernel_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _issue_like(tmp_path)
    with_c = _match_all(path)
    _numpy_only(monkeypatch)
    assert not hybrid.accelerated()
    without = _match_all(path)
    assert [r for r, _ in with_c] == [r for r, _ in without]
    assert all(a.equals(b) for (_, a), (_, b) in zip(with_c, without, strict=True))


def test_pure_python_setting_disables_the_kernel() -> None:
    code = "from pqindex.scan import hybrid; print(hybrid.accelerated())"
    env = dict(os.environ, PQINDEX_PURE_PYTHON="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
    env["PQINDEX_PURE_PYTHON"] = "0"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "True"


def test_scan_reads_the_same_rows_either_way(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import pqindex

    path = _issue_like(tmp_path)
    ref = pq.read_table(path)
    uid = ref.column("user_id")[12345].as_py()
    masks = {  # each query and pyarrow's filter of the whole file: the rows either way
        "category = 'rare'": pc.field("category") == "rare",
        "category IN ('c01', 'c07')": pc.field("category").isin(["c01", "c07"]),
        "opt = 3": pc.field("opt") == 3,
        "opt IS NULL": pc.field("opt").is_null(),
        f"user_id = {uid}": pc.field("user_id") == uid,
    }
    queries = list(masks)

    def run() -> list[pa.Table]:
        ds = pqindex.dataset(str(path))
        return [ds.scan(where=q).to_table() for q in queries]

    with_c = run()
    _numpy_only(monkeypatch)
    without = run()
    for q, a, b in zip(queries, with_c, without, strict=True):
        want = ref.filter(masks[q])
        assert want.num_rows > 0, q
        assert a.equals(want) and b.equals(want), q
