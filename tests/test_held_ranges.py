"""``ParquetFile``'s held bytes: what a wave still has to read.

``_gaps`` (the parts of a range no earlier read holds) is checked against the
bytes themselves: a set of held offsets built from random, overlapping, touching
and empty buffers; and a prefetch never reads a byte a buffer holds.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pqindex.format.file import ParquetFile, _gaps


def _held(bufs: list[tuple[int, int]]) -> tuple[list[int], dict[int, tuple[int, bytes]]]:
    """The buffers as ``ParquetFile._held`` gives them: disjoint spans (reads fill only
    gaps), their sorted starts and start -> (stop, bytes)."""
    starts: list[int] = []
    stops: list[int] = []
    for a, b in sorted(bufs):
        if a == b:
            continue
        if stops and a <= stops[-1]:
            stops[-1] = max(stops[-1], b)
        else:
            starts.append(a)
            stops.append(b)
    return starts, {a: (b, b"") for a, b in zip(starts, stops, strict=True)}


def test_gaps_are_exactly_the_bytes_not_held() -> None:
    rng = random.Random(7)
    for case in range(5000):
        bufs = []
        for _ in range(rng.randint(0, 8)):
            a = rng.randint(0, 100)
            bufs.append((a, a + rng.randint(0, 30)))
        offset, length = rng.randint(0, 120), rng.randint(1, 50)
        held_bytes = {i for a, b in bufs for i in range(a, b)}
        got = _gaps(_held(bufs), offset, length)
        want = [i for i in range(offset, offset + length) if i not in held_bytes]
        assert [i for o, n in got for i in range(o, o + n)] == want, (case, bufs, got)
        # maximal pieces: none empty, none touching the next
        assert all(n > 0 for _, n in got)
        assert all(o + n < o2 for (o, n), (o2, _) in itertools.pairwise(got))


def test_prefetch_reads_only_what_is_not_held(tmp_path: Path) -> None:
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"x": list(range(50_000))}), path)
    with ParquetFile.open(str(path)) as pf:
        size = pf.source.size()
        reads: list[tuple[int, int]] = []
        orig = pf.source.read_ranges

        def logged(ranges: list[tuple[int, int]]) -> list[bytes]:
            reads.extend(ranges)
            return orig(ranges)

        pf.source.read_ranges = logged  # type: ignore[method-assign]
        pf.prefetch([], exact=[(100, 50), (4_000, 32), (4_040, 64)])
        assert reads == [(100, 50), (4_000, 32), (4_040, 64)]  # exact: as they are
        reads.clear()
        # held now: nothing of these is read again, only the new bytes
        pf.prefetch([(120, 20), (4_010, 100)], max_gap=0)
        assert reads == [(4_032, 8), (4_104, 6)]
        reads.clear()
        pf.prefetch([(size - 8, 8)])  # the tail read at open
        assert reads == []
        with open(path, "rb") as f:
            data = f.read()
        assert pf.read_bytes(90, 4_100) == data[90:4_190]


def test_read_into_copies_held_bytes_and_reads_only_the_rest(tmp_path: Path) -> None:
    """``read_into`` fills each range with the file's bytes: what a prefetch holds is
    copied (never read again), the rest read straight into the buffer, one request
    per merged gap and one wave; bytes outside the merged ranges stay untouched."""
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"x": list(range(60_000)), "y": [str(i) for i in range(60_000)]}),
                   path, row_group_size=7_000)
    data = path.read_bytes()
    rng = random.Random(3)
    for case in range(60):
        with ParquetFile.open(str(path)) as pf:
            end = pf.footer_offset
            held = []
            for _ in range(rng.randint(0, 4)):
                a = rng.randint(4, end - 200)
                held.append((a, rng.randint(1, 3_000)))
            held = [(a, min(n, end - a)) for a, n in held]
            if held:
                pf.prefetch([], exact=held)
            ranges = []
            for _ in range(rng.randint(1, 6)):
                a = rng.randint(4, end - 2)
                ranges.append((a, rng.randint(0, min(20_000, end - a))))
            ranges.sort()
            gap = rng.choice([0, 100, 10_000, None])
            before = (pf.source.stats.requests, pf.source.stats.round_trips,
                      len(pf.source.stats.trace))
            out = bytearray(b"\xee" * len(data))
            reqs = pf.read_into(ranges, memoryview(out), gap)
            stats = pf.source.stats
            for o, n in ranges:
                assert out[o:o + n] == data[o:o + n], (case, o, n)
            new = stats.trace[before[2]:]
            assert new == reqs
            assert stats.requests - before[0] == len(reqs)
            assert stats.round_trips - before[1] == (1 if reqs else 0)
            held_bytes = {i for a, n in held for i in range(a, a + n)}
            for o, n in reqs:
                assert not held_bytes & set(range(o, o + n)), (case, "held byte read again")
            if gap == 0:  # nothing merged: only bytes of the ranges are written
                wanted = {i for o, n in ranges for i in range(o, o + n)}
                assert all(out[i] == 0xEE for i in rng.sample(range(len(data)), 2_000)
                           if i not in wanted)
