"""truncate_column_index: short ColumnIndex bounds that never lie.

Checked on real pyarrow files (pyarrow stores bounds in full, so they are the
pages' exact min and max): every lower bound <= the page's actual min, every
upper bound >= its actual max, valid UTF-8 for strings, at most ``cap`` bytes,
the boundary order kept, and point lookups of values in the data selecting
exactly the pages the full bounds select. ``test_index_sizes`` measures what
the truncation saves (run with ``-s`` to see the table).
"""

from __future__ import annotations

import decimal
import itertools
import string
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pqindex.format.column_index import PageIndex
from pqindex.format.file import ParquetFile
from pqindex.format.match import LeafOp, Match
from pqindex.format.schema import BoundaryOrder, LeafColumn
from pqindex.format.structs import ColumnIndex, OffsetIndex
from pqindex.format.truncate import lower_bound, truncate_column_index, upper_bound
from pqindex.format.values import validate_column_index

# ---------------------------------------------------------------- helpers


def write(tmp: Path, values: list[Any], typ: pa.DataType, *, rows_per_page: int = 37,
          name: str = "c") -> Path:
    path = tmp / f"{name}.parquet"
    pq.write_table(pa.table({name: pa.array(values, typ)}), path, write_page_index=True,
                   use_dictionary=False, max_rows_per_page=rows_per_page,
                   write_batch_size=rows_per_page, data_page_size=1 << 20,
                   row_group_size=1 << 30, compression="none")
    return path


def load(path: Path, col: int = 0) -> tuple[ColumnIndex, OffsetIndex, LeafColumn, int]:
    with ParquetFile.open(path) as pf:
        ci, oi = pf.column_index(0, col), pf.offset_index(0, col)
        assert ci is not None and oi is not None
        return ci, oi, pf.leaf(col), pf.row_group_rows(0)


def as_bytes(v: Any) -> bytes:
    return v.encode("utf-8") if isinstance(v, str) else bytes(v)


def page_extremes(values: list[Any], oi: OffsetIndex) -> list[tuple[bytes, bytes] | None]:
    """Each page's actual (min, max) in byte order, None for an all-null page."""
    firsts = [loc.first_row_index or 0 for loc in oi.page_locations or []]
    out: list[tuple[bytes, bytes] | None] = []
    for a, b in zip(firsts, [*firsts[1:], len(values)], strict=True):
        present = [as_bytes(v) for v in values[a:b] if v is not None]
        out.append((min(present), max(present)) if present else None)
    return out


def check_sound(ci: ColumnIndex, t: ColumnIndex, extremes: list[tuple[bytes, bytes] | None],
                cap: int, text: bool) -> None:
    assert t.min_values is not None and t.max_values is not None
    assert ci.min_values is not None and ci.max_values is not None
    for i, ext in enumerate(extremes):
        lo, hi = t.min_values[i], t.max_values[i]
        if ext is None:
            assert (lo, hi) == (ci.min_values[i], ci.max_values[i])  # null page untouched
            continue
        assert lo <= ext[0], (i, lo, ext[0])
        assert hi >= ext[1], (i, hi, ext[1])
        assert len(lo) <= cap
        assert len(hi) <= cap or hi == ci.max_values[i]
        if text:
            lo.decode("utf-8")
            hi.decode("utf-8")


def matches(pi: PageIndex, v: bytes) -> list[bool]:
    return [m != Match.NONE for m in pi.matching_pages(LeafOp.EQ, (v,)).tolist()]


# ---------------------------------------------------------------- single bounds


def test_lower_bound_cuts_between_code_points() -> None:
    s = ("a" * 63 + "é").encode()  # é is 2 bytes: byte 64 is inside it
    # the byte left holds the largest 1-byte code point, which sorts below é
    assert lower_bound(s, 64, text=True) == b"a" * 63 + b"\x7f"
    assert lower_bound(s, 64) == s[:64]  # binary cuts anywhere
    assert lower_bound(b"short", 64, text=True) == b"short"
    assert lower_bound("x😀😀".encode(), 4, text=True) == "x\uffff".encode()
    assert lower_bound("😀😀".encode(), 1, text=True) == b"\x7f"
    assert lower_bound("€".encode() * 3, 8, text=True) == "€€\u07ff".encode()


def test_upper_bound_increments_last_code_point() -> None:
    assert upper_bound(b"abc" * 30, 4, text=True) == b"abcb"
    assert upper_bound(("x" * 10 + "é" * 10).encode(), 12, text=True) == ("x" * 10 + "ê").encode()
    # U+D7FF increments past the surrogates to U+E000
    got = upper_bound(("\ud7ff" * 10).encode(), 6, text=True)
    assert got == "\ud7ff\ue000".encode()
    got.decode("utf-8")
    # U+10FFFF cannot be incremented: the code point before it is
    raw = ("ab" + "\U0010ffff" * 20).encode()
    assert upper_bound(raw, 10, text=True) == b"ac"
    # U+007F -> U+0080 grows to 2 bytes; it must still fit the cap
    assert upper_bound(b"a\x7f" + b"z" * 100, 2, text=True) == b"b"


def test_upper_bound_keeps_value_when_nothing_shorter_exists() -> None:
    assert upper_bound(b"\xff" * 100, 64) == b"\xff" * 100
    assert upper_bound(("\U0010ffff" * 30).encode(), 64, text=True) == ("\U0010ffff" * 30).encode()
    assert upper_bound(b"a" + b"\xff" * 100, 64) == b"b"
    bad = b"\xc3" * 100  # not UTF-8: kept whole
    assert upper_bound(bad, 64, text=True) == bad
    assert lower_bound(bad, 64, text=True) == bad


# ---------------------------------------------------------------- random sorted data

ALPHABET = [*"abcxyz09 ~", "\x7f", "é", "ÿ", "€", "\ud7ff", "\ue000", "😀", "\U0010ffff"]


def random_strings(rng: np.random.Generator, n: int) -> list[str]:
    prefixes = ["", "shared/prefix/", "shared/prefix/deeper/", "€uro-", "😀"]
    out = []
    for _ in range(n):
        p = prefixes[rng.integers(len(prefixes))]
        k = int(rng.integers(0, 120))
        out.append(p + "".join(ALPHABET[j] for j in rng.integers(len(ALPHABET), size=k)))
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["string", "binary"])
@pytest.mark.parametrize("descending", [False, True])
def test_random_sorted_columns(tmp_path: Path, seed: int, kind: str, descending: bool) -> None:
    rng = np.random.default_rng(seed)
    base = random_strings(rng, 1500)
    base += list(rng.choice(base, 300))  # duplicates: some pages share a boundary value
    values: list[Any] = sorted(base, key=as_bytes, reverse=descending)
    if kind == "binary":
        values = [as_bytes(v) + (b"\xff" * 3 if i % 5 == 0 else b"") for i, v in enumerate(values)]
        values.sort(reverse=descending)
    for i in rng.choice(len(values), 200, replace=False):
        values[i] = None
    values[300:400] = [None] * 100  # whole null pages in the middle
    typ = pa.string() if kind == "string" else pa.binary()
    ci, oi, leaf, rows = load(write(tmp_path, values, typ, rows_per_page=int(rng.integers(5, 40))))
    want_order = BoundaryOrder.DESCENDING if descending else BoundaryOrder.ASCENDING
    assert ci.boundary_order == want_order
    full = PageIndex.build(ci, oi, leaf, rows)
    present = [as_bytes(v) for v in values if v is not None]
    absent = [as_bytes(s) for s in random_strings(rng, 300)]
    text = kind == "string"
    assert ci.null_pages is not None and ci.min_values is not None and ci.max_values is not None
    seq = [i for i, null in enumerate(ci.null_pages) if not null]
    seq = seq[::-1] if descending else seq  # from small values to large
    gaps = [(a, b) for a, b in itertools.pairwise(seq)
            if ci.max_values[a] < ci.min_values[b]]
    for cap in (64, 16, 8):
        t = truncate_column_index(ci, leaf, cap)
        assert t.boundary_order == want_order
        assert validate_column_index(t, len(oi.page_locations or []), leaf) is None
        check_sound(ci, t, page_extremes(values, oi), cap, text)
        assert t.min_values is not None and t.max_values is not None
        separable = [g for g in gaps
                     if can_separate(ci.max_values[g[0]], ci.min_values[g[1]], cap, text)]
        for a, b in separable:
            assert t.max_values[a] < t.min_values[b], (cap, a, b)
        if text and cap == 64:  # the shared prefixes are short: every gap can be cut
            assert separable == gaps
        short = PageIndex.build(t, oi, leaf, rows)
        assert short.ordered
        for i in rng.choice(len(present), 300):
            a, b = matches(full, present[i]), matches(short, present[i])
            if separable == gaps:
                assert a == b, present[i]
            assert all(y or not x for x, y in zip(a, b, strict=True))
        # Absent values may fall into a widened gap, never out of a page they match.
        for v in absent:
            a, b = matches(full, v), matches(short, v)
            assert all(y or not x for x, y in zip(a, b, strict=True))


def can_separate(hi: bytes, lo: bytes, cap: int, text: bool) -> bool:
    """Whether some u, l of at most ``cap`` bytes have hi <= u < l <= lo (hi < lo).

    The best l is the shortest prefix of lo above hi; the best u the smallest
    string >= hi that fits: hi itself, or a prefix of it with its last
    incrementable unit incremented (brute force over the prefixes).
    """
    units: list[Any] = list(hi.decode()) if text else [bytes([x]) for x in hi]
    lo_units: list[Any] = list(lo.decode()) if text else [bytes([x]) for x in lo]
    join = (lambda u: "".join(u).encode()) if text else b"".join
    p = 0
    while p < min(len(units), len(lo_units)) and units[p] == lo_units[p]:
        p += 1
    lower = join(lo_units[: p + 1])
    if len(lower) > cap:
        return False
    if len(hi) <= cap:
        return hi < lower
    best = None
    for j in range(len(units)):
        u = units[j]
        if text:
            c = ord(u) + 1
            c = 0xE000 if 0xD800 <= c <= 0xDFFF else c
            nxt = chr(c) if c <= 0x10FFFF else None
        else:
            nxt = bytes([u[0] + 1]) if u[0] < 255 else None
        if nxt is None:
            continue
        cand = join([*units[:j], nxt])
        if len(cand) <= cap and (best is None or cand < best):
            best = cand
    return best is not None and best < lower


def test_separators_are_shorter_than_the_cap(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    values = sorted("".join(rng.choice(list(string.ascii_lowercase), 200)) for _ in range(5000))
    ci, _, leaf, _ = load(write(tmp_path, values, pa.string(), rows_per_page=100))
    capped = truncate_column_index(ci, leaf, 64, separate=False)
    t = truncate_column_index(ci, leaf, 64)
    assert t.min_values is not None and t.max_values is not None
    assert capped.min_values is not None
    # Only the first min and the last max have no neighbour to separate from.
    assert all(len(v) <= 6 for v in t.min_values[1:] + t.max_values[:-1])
    assert len(t.min_values[0]) == 64 and len(capped.min_values[5]) == 64


def test_utf8_cut_cannot_break_the_order(tmp_path: Path) -> None:
    # Cut at 64 bytes, "a"*63+"é"... keeps only 63 bytes of its text, which would
    # sort below the previous page's "a"*63+"b": the last byte is filled instead.
    values = ["a" * 63 + "b" + "x" * 10] * 3 + ["a" * 63 + "é" + "x" * 10] * 3
    ci, oi, leaf, _ = load(write(tmp_path, values, pa.string(), rows_per_page=3))
    for separate in (False, True):
        t = truncate_column_index(ci, leaf, 64, separate=separate)
        assert t.boundary_order == BoundaryOrder.ASCENDING
        assert validate_column_index(t, 2, leaf) is None
        check_sound(ci, t, page_extremes(values, oi), 64, True)


def test_unordered_only_caps(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    values = ["".join(rng.choice(list("abcdef"), 100)) for _ in range(400)]
    ci, oi, leaf, _ = load(write(tmp_path, values, pa.string(), rows_per_page=40))
    assert ci.boundary_order == BoundaryOrder.UNORDERED
    t = truncate_column_index(ci, leaf, 16)
    assert t.boundary_order == BoundaryOrder.UNORDERED
    assert t.min_values is not None and ci.min_values is not None
    assert t.min_values == [v[:16] for v in ci.min_values]
    check_sound(ci, t, page_extremes(values, oi), 16, True)


def test_all_null_and_constant_pages(tmp_path: Path) -> None:
    values = [None] * 10 + ["same" * 30] * 20 + [None] * 10
    ci, oi, leaf, _ = load(write(tmp_path, values, pa.string(), rows_per_page=10))
    t = truncate_column_index(ci, leaf, 8)
    assert t.null_pages == [True, False, False, True]
    assert t.min_values is not None and t.max_values is not None
    assert t.min_values[0] == t.max_values[0] == b""
    assert t.min_values[1:3] == [b"samesame"] * 2 and t.max_values[1:3] == [b"samesamf"] * 2
    check_sound(ci, t, page_extremes(values, oi), 8, True)


@pytest.mark.parametrize("typ,values", [
    (pa.decimal128(38, 2), [decimal.Decimal(i) / 4 for i in range(200)]),
    (pa.binary(40), [bytes([i % 256]) * 40 for i in range(200)]),
    (pa.float16(), [np.float16(i) for i in range(200)]),
    (pa.uuid(), [uuid.UUID(int=i).bytes for i in range(200)]),
    (pa.int64(), list(range(200))),
])
def test_other_types_untouched(tmp_path: Path, typ: pa.DataType, values: list[Any]) -> None:
    ci, _, leaf, _ = load(write(tmp_path, values, typ, rows_per_page=20))
    assert truncate_column_index(ci, leaf, 1) is ci


def test_invalid_index_untouched(tmp_path: Path) -> None:
    ci, _, leaf, _ = load(write(tmp_path, ["b" * 100, "a" * 100], pa.string(), rows_per_page=1))
    assert ci.min_values is not None
    bad = ColumnIndex(null_pages=ci.null_pages, min_values=ci.min_values[::-1],
                      max_values=ci.max_values, boundary_order=BoundaryOrder.ASCENDING)
    assert truncate_column_index(bad, leaf) is bad
    with pytest.raises(ValueError):
        truncate_column_index(ci, leaf, 0)


# ---------------------------------------------------------------- sizes


def _tpch_like(n: int, rng: np.random.Generator) -> pa.Table:
    words = np.array(["furiously", "express", "requests", "sleep", "carefully", "final",
                      "deposits", "haggle", "slyly", "bold", "accounts", "ironic", "packages"])
    colors = np.array(["almond", "antique", "aquamarine", "azure", "beige", "bisque", "black",
                       "blanched", "blue", "blush", "brown", "burlywood", "chartreuse"])
    alnum = np.frombuffer((string.ascii_letters + string.digits + ",. ").encode(), np.uint8)
    address = alnum[rng.integers(len(alnum), size=(n, 40))].view("S40").ravel().astype(str)
    comment = words[rng.integers(len(words), size=(n, 12))]
    return pa.table({
        "c_name": [f"Customer#{i:09d}" for i in range(n)],  # sorted
        "c_address": [a[: 10 + i % 31] for i, a in enumerate(address.tolist())],
        "p_name": [" ".join(r) for r in colors[rng.integers(len(colors), size=(n, 5))].tolist()],
        "o_clerk": [f"Clerk#{k:09d}" for k in rng.integers(1, 1000, size=n).tolist()],
        "c_comment": [" ".join(r[: 4 + i % 9]) for i, r in enumerate(comment.tolist())],
    })


def index_sizes(path: Path, cap: int = 64) -> dict[str, tuple[int, int, int]]:
    """Per column: ColumnIndex bytes as written, capped at ``cap``, and truncated."""
    out: dict[str, tuple[int, int, int]] = {}
    with ParquetFile.open(path) as pf:
        for col, leaf in enumerate(pf.schema.leaves):
            sizes = [0, 0, 0]
            for rg in range(pf.num_row_groups):
                ci = pf.column_index(rg, col)
                assert ci is not None
                sizes[0] += len(ci.encode())
                sizes[1] += len(truncate_column_index(ci, leaf, cap, separate=False).encode())
                sizes[2] += len(truncate_column_index(ci, leaf, cap).encode())
            out[leaf.name] = (sizes[0], sizes[1], sizes[2])
    return out


def test_index_sizes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(11)
    n = 100_000
    letters = rng.integers(ord("a"), ord("z") + 1, size=(n, 200), dtype=np.uint8)
    keys = sorted(letters.view("S200").ravel().astype(str).tolist())
    p1 = tmp_path / "keys200.parquet"
    pq.write_table(pa.table({"key200": keys}), p1, write_page_index=True, use_dictionary=False,
                   max_rows_per_page=1000, row_group_size=n, compression="zstd")
    p2 = tmp_path / "tpch_like.parquet"
    pq.write_table(_tpch_like(n, rng), p2, write_page_index=True, max_rows_per_page=1000,
                   row_group_size=n, compression="zstd")
    table = {**index_sizes(p1), **index_sizes(p2)}
    with capsys.disabled():
        print("\nColumnIndex bytes (100 pages of 1000 rows): pyarrow | 64-byte cap | separators")
        for name, (full, capped, ours) in table.items():
            print(f"  {name:10s} {full:8d} {capped:8d} {ours:8d}")
    full, capped, ours = table["key200"]
    assert ours * 5 < capped < full / 2
    for name, (f, c, o) in table.items():
        assert o <= c <= f, name
    assert table["c_name"][2] < table["c_name"][0]
