"""Fuzzing the public API with damaged files (issue 13).

Random byte flips (half of them in the tail, where footer, page index, Bloom
filters and the embedded region live) and truncations of files from every
writer, the corpus' bad_data/ and files with embedded indexes. Every read,
explain, aggregate, check and add_indexes either gives what pyarrow gives on
the same bytes or raises a PqIndexError (never InternalError, never a foreign
exception), each within a time limit enforced by SIGALRM (a hang fails the
test; nothing is asserted about durations).

A short fixed-seed run by default (a few seconds); ``PQINDEX_FUZZ_CASES=2000``
(and optionally ``PQINDEX_FUZZ_SEED``) for a long one.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pqindex
from conftest import PARQUET_TESTING
from pqindex.errors import InternalError, PqIndexError

CORPUS = PARQUET_TESTING
CASES = int(os.environ.get("PQINDEX_FUZZ_CASES", "24"))
SEED = int(os.environ.get("PQINDEX_FUZZ_SEED", "20261124"))
LIMIT_SECONDS = 20  # per operation; generous: a hang, not slowness, is what fails

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="needs SIGALRM")


class Hang(Exception):
    """An operation outlived LIMIT_SECONDS."""


@contextmanager
def _time_limit(what: str) -> Iterator[None]:
    def fire(signum: int, frame: Any) -> None:
        raise Hang(f"{what} did not finish within {LIMIT_SECONDS} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(LIMIT_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _sources(written: Any, tmp: Path) -> list[Path]:
    out = [written[name] for name in ("pyarrow_v1_snappy_plain", "pyarrow_v2_zstd_plain",
                                      "pyarrow_v1_none_dict", "pyarrow_bloom", "duckdb",
                                      "polars", "datafusion")]
    t = pq.read_table(written["pyarrow_v1_none_dict"], columns=["id", "category", "f64", "day"])
    embedded = tmp / "embedded.parquet"
    pqindex.write_table(t, embedded, sort_by="id", row_group_rows=2_000, page_rows=250,
                        bloom=["id"], indexes={"distinct": ["category"], "zone_maps": ["f64"],
                                               "hll": ["id"]})
    out.append(embedded)
    out += sorted((CORPUS / "bad_data").glob("*.parquet"))
    return out


def _mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    n = len(data)
    if rng.random() < 0.25:
        cut = rng.randrange(0, n)
        return data[:cut], f"truncated to {cut}"
    out = bytearray(data)
    flips = rng.choice((1, 1, 2, 4, 16))
    tail = rng.random() < 0.5
    where = []
    for _ in range(flips):
        lo = max(0, n - 4_096) if tail else 0
        i = rng.randrange(lo, n)
        out[i] ^= 1 << rng.randrange(8)
        where.append(i)
    return bytes(out), f"bits flipped at {where}"


def _same(a: pa.Table, b: pa.Table) -> bool:
    """Equal rows; NaN equal to NaN (printing both sides)."""
    if a.column_names != b.column_names or a.num_rows != b.num_rows:
        return False
    for i in range(a.num_columns):
        x, y = a.column(i), b.column(i)
        if x.equals(y):
            continue
        if x.type != y.type:
            return False
        if pa.types.is_string(x.type) or pa.types.is_large_string(x.type):
            # Damaged strings may not be UTF-8: compare the bytes.
            x, y = x.cast(pa.binary()), y.cast(pa.binary())
        try:
            if str(x.to_pylist()) != str(y.to_pylist()):
                return False
        except (UnicodeDecodeError, ValueError, OverflowError):
            return False
    return True


def _one_answer(path: Path, reference: pa.Table) -> bool:
    """Whether pyarrow gives these bytes one answer: row group by row group, all at
    once in one call, and through ``read_table``. A flipped bit that adds a row to
    a list chunk (a repetition level turned to 0) is not caught by pyarrow, whose
    rows then depend on which row groups one call reads together (the extra row
    spills into the next): pqindex's calls group row groups their own way, so no
    reference exists."""
    try:
        f = pq.ParquetFile(path)
        parts = [f.read_row_group(i) for i in range(f.metadata.num_row_groups)]
        at_once = f.read()
    except Exception:
        return True  # pyarrow refuses a row group alone: read_table is the reference
    return not parts or (_same(pa.concat_tables(parts), reference)
                         and _same(at_once, reference))


def _outcome(fn: Callable[[], Any], what: str) -> tuple[str, Any]:
    """("ok", value) or ("error", PqIndexError); anything else fails the test."""
    with _time_limit(what):
        try:
            return "ok", fn()
        except InternalError as e:
            raise AssertionError(f"{what}: internal error {e} (cause {e.__cause__!r})") from e
        except PqIndexError as e:
            return "error", e


def _first_int_column(path: Path) -> str | None:
    try:
        schema = pq.read_schema(path)
    except Exception:
        return None
    for f in schema:
        if pa.types.is_integer(f.type):
            return f.name
    return None


def _one_case(label: str, data: bytes, path: Path, copy: Path) -> None:
    """Every operation on one damaged file."""
    from pqindex.format.file import ParquetFile
    from pqindex.format.pages import check_file, check_indexes
    from pqindex.inspect import check_embedded

    path.write_bytes(data)
    try:
        reference: pa.Table | None = pq.read_table(path)
    except Exception:
        reference = None
    kind, got = _outcome(lambda: pqindex.dataset(path).to_table(), f"{label}: read")
    if kind == "ok" and reference is not None and _one_answer(path, reference):
        assert _same(got, reference), f"{label}: rows differ from pyarrow's"
    column = _first_int_column(path)
    where = f"{column} > 100" if column else None
    _outcome(lambda: pqindex.dataset(path).to_table(where=where), f"{label}: read where")
    _outcome(lambda: pqindex.dataset(path).explain(where=where), f"{label}: explain")
    aggs = ["count(*)"] + ([f"sum({column})", f"max({column})", f"avg({column})",
                            f"count(distinct {column})"] if column else [])
    _outcome(lambda: pqindex.dataset(path).aggregate(aggs, where=where), f"{label}: aggregate")
    # The embedded distinct sets answer count(distinct) of row groups every row matches,
    # and LIKE / ILIKE patterns from the values they hold (as dictionaries do).
    _outcome(lambda: pqindex.dataset(path).aggregate(["count(distinct category)"]),
             f"{label}: distinct sets")
    for like in ("category LIKE '%et%'", "category NOT ILIKE '_E%'"):
        _outcome(lambda w=like: pqindex.dataset(path).to_table(where=w), f"{label}: {like}")
    kind, got = _outcome(lambda: pqindex.dataset(path).head(7, where=where), f"{label}: head")
    if kind == "ok" and reference is not None and where is None:
        assert _same(got, reference.slice(0, 7)), f"{label}: head differs from pyarrow's"

    def check() -> None:
        with ParquetFile.open(path) as pf:
            check_file(pf)
            check_indexes(pf)
            check_embedded(pf)

    _outcome(check, f"{label}: check")
    shutil.copyfile(path, copy)
    kind, _ = _outcome(lambda: pqindex.add_indexes(copy, page_index="add"),
                       f"{label}: add_indexes")
    if kind == "error":
        assert copy.read_bytes() == data, f"{label}: add_indexes changed a file it refused"
    litter = [p.name for p in path.parent.iterdir() if ".pqindex-" in p.name]
    assert not litter, f"{label}: temporaries left: {litter}"
    path.unlink()
    copy.unlink()


def test_fuzz_damaged_files(written_files: Any, tmp_path: Path) -> None:
    sources = _sources(written_files, tmp_path)
    rng = random.Random(SEED)
    for case in range(CASES):
        src = sources[case % len(sources)] if case < len(sources) else rng.choice(sources)
        data, how = _mutate(src.read_bytes(), rng)
        _one_case(f"case {case} ({src.name}, {how})", data, tmp_path / f"case{case}.parquet",
                  tmp_path / f"copy{case}.parquet")
