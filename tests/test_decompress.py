"""Pages decompressed together (pqindex.scan.decompress) against one call per page.

The zstd frame parser is checked against libzstd (through ``pa.decompress``) on
frames pyarrow compresses and on frames built here block by block (raw and RLE
blocks, every content-size field width, checksums); batches against one
``pa.decompress`` per part; damaged frames against the error of their own call;
and scans of zstd files (data pages v1 and v2, nulls, dictionary and PLAIN) against
pyarrow's full read + filter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pqindex
from conftest import PARQUET_TESTING, import_or_missing, missing
from pqindex.errors import CorruptFileError, PqIndexError
from pqindex.format import codec as fc
from pqindex.format.file import ParquetFile, chunk_range
from pqindex.format.schema import Codec
from pqindex.scan import decompress as dm
from pqindex.scan import encoded

CORPUS = PARQUET_TESTING / "data"
MAGIC = b"\x28\xb5\x2f\xfd"


# ---------------------------------------------------------------- frames built here


def _frame(pieces: list[tuple[str, bytes]], width: int | None, single: bool,
           checksum: bool) -> bytes:
    """A zstd frame of raw / RLE blocks holding ``pieces`` (an RLE piece is one byte
    repeated), its content size in a field of ``width`` bytes (None: not stated)."""
    content = b"".join(pieces_content(k, b) for k, b in pieces)
    flag = {None: 0, 1: 0, 2: 1, 4: 2, 8: 3}[width]
    out = bytearray(MAGIC)
    out.append(flag << 6 | (0x20 if single else 0) | (0x04 if checksum else 0))
    if not single:
        out.append(10 << 3)  # a 1 MiB window: any content here fits
    if width:
        out += (len(content) - (256 if width == 2 else 0)).to_bytes(width, "little")
    if not pieces:
        pieces = [("raw", b"")]
    for i, (kind, body) in enumerate(pieces):
        last = i == len(pieces) - 1
        if kind == "raw":
            out += ((len(body) << 3) | last).to_bytes(3, "little") + body
        else:
            out += ((body[1] << 3) | 2 | last).to_bytes(3, "little") + body[:1]
    if checksum:
        out += (xxhash.xxh64(content).intdigest() & 0xFFFFFFFF).to_bytes(4, "little")
    return bytes(out)


def pieces_content(kind: str, body: bytes) -> bytes:
    return body if kind == "raw" else body[:1] * body[1]


def _header_length(frame: bytes) -> int:
    """Bytes before a frame's first block."""
    fhd = frame[4]
    single = fhd & 0x20
    width = 1 if fhd >> 6 == 0 and single else (0, 2, 4, 8)[fhd >> 6]
    return 5 + (0 if single else 1) + width


@st.composite
def _built_frame(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """(frame, content) of a frame built block by block."""
    pieces: list[tuple[str, bytes]] = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            pieces.append(("raw", draw(st.binary(max_size=300))))
        else:
            pieces.append(("rle", bytes([draw(st.integers(0, 255)), draw(st.integers(0, 255))])))
    content = b"".join(pieces_content(k, b) for k, b in pieces)
    n = len(content)
    widths: list[int | None] = [None, 4, 8]
    if 256 <= n < 65536 + 256:
        widths.append(2)
    width = draw(st.sampled_from(widths + ([1] if n < 256 else [])))
    single = width == 1 or (width is not None and draw(st.booleans()))
    return _frame(pieces, width, single, draw(st.booleans())), content


@st.composite
def _part(draw: st.DrawFn) -> tuple[bytes, int]:
    """A page's compressed part and its size: pyarrow's frames or frames built here."""
    if draw(st.booleans()):
        frame, content = draw(_built_frame())
        return frame, len(content)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.sampled_from([0, 1, 100, 5000, 40_000, 200_000]))
    spread = draw(st.sampled_from([3, 1000, 2**62]))  # compressible to incompressible
    data = rng.integers(0, spread, n // 8 + 1).astype("<i8").tobytes()[:n]
    return pa.compress(data, codec="zstd", asbytes=True), n


def _one_by_one(parts: list[tuple[bytes, int]]) -> list[bytes]:
    return [bytes(pa.decompress(p, decompressed_size=n, codec="zstd")) for p, n in parts]


@settings(max_examples=300, deadline=None)
@given(_built_frame())
def test_built_frames_decode_and_their_size_is_known(case: tuple[bytes, bytes]) -> None:
    frame, content = case
    assert bytes(pa.decompress(frame, decompressed_size=len(content), codec="zstd")) == content
    assert dm.zstd_frame_content_size(frame) == len(content)
    assert dm.zstd_frame_content_size(memoryview(frame)) == len(content)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_part(), max_size=12), st.sampled_from([1, 50_000, 8 << 20]))
def test_batches_decompress_like_one_call_per_part(
    parts: list[tuple[bytes, int]], batch_bytes: int
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dm, "BATCH_BYTES", batch_bytes)
        got = [bytes(b) for b in dm.decompress_many(Codec.ZSTD, parts)]
    assert got == _one_by_one(parts)


def test_pyarrow_frames_state_their_size() -> None:
    for n in (1, 255, 256, 70_000, 300_000):
        data = np.arange(n // 8 + 1, dtype="<i8").tobytes()[:n]
        assert dm.zstd_frame_content_size(pa.compress(data, codec="zstd", asbytes=True)) == n


def test_frame_sizes_not_known_without_decompressing_are_refused() -> None:
    data = np.arange(5000, dtype="<i8").tobytes()
    frame = pa.compress(data, codec="zstd", asbytes=True)
    # Every truncation, trailing bytes, two frames in one part.
    assert all(dm.zstd_frame_content_size(frame[:k]) is None for k in range(len(frame)))
    assert dm.zstd_frame_content_size(frame + b"\0") is None
    assert dm.zstd_frame_content_size(frame + frame) is None
    # A compressed block with no stated size: only decompressing tells its output.
    no_size = MAGIC + bytes([0, 10 << 3]) + frame[_header_length(frame):]
    assert bytes(pa.decompress(no_size, decompressed_size=len(data), codec="zstd")) == data
    assert dm.zstd_frame_content_size(no_size) is None
    # A skippable frame, a dictionary id, the reserved block type.
    assert dm.zstd_frame_content_size(b"\x50\x2a\x4d\x18" + bytes(8)) is None
    raw = _frame([("raw", b"abc")], 4, False, False)
    assert dm.zstd_frame_content_size(raw[:4] + bytes([raw[4] | 1]) + raw[5:6] + b"\1"
                                      + raw[6:]) is None
    reserved = bytearray(raw)
    reserved[10] |= 0x06
    assert dm.zstd_frame_content_size(bytes(reserved)) is None


def test_a_frame_stating_another_pages_size_is_not_joined() -> None:
    """Two frames whose stated sizes are swapped between their pages: joined, their
    output would have the right total and wrong slices; each call alone fails."""
    a, b = b"a" * 3000, np.arange(900, dtype="<i8").tobytes()
    fa, fb = (pa.compress(x, codec="zstd", asbytes=True) for x in (a, b))
    parts = [(fa, len(b)), (fb, len(a))]
    assert bytes(pa.decompress(fa + fb, decompressed_size=len(a) + len(b),
                               codec="zstd")) == a + b
    with pytest.raises(OSError):
        dm.decompress_many(Codec.ZSTD, parts)


def _damaged_block(frame: bytes) -> bytes:
    """The frame with its compressed block's body overwritten (headers kept)."""
    body = _header_length(frame) + 3
    out = frame[:body] + b"\xff" * (len(frame) - body)
    assert dm.zstd_frame_content_size(out) is not None  # still looks joinable
    return out


def test_a_damaged_part_raises_its_own_error_in_a_batch() -> None:
    rng = np.random.default_rng(4)
    datas = [rng.integers(0, 50, 2000).astype("<i8").tobytes() for _ in range(5)]
    parts = [(pa.compress(d, codec="zstd", asbytes=True), len(d)) for d in datas]
    bad = _damaged_block(parts[2][0])
    with pytest.raises(OSError) as alone:
        pa.decompress(bad, decompressed_size=len(datas[2]), codec="zstd")
    parts[2] = (bad, len(datas[2]))
    calls: list[int] = []
    real = pa.decompress

    def counted(data: Any, **kw: Any) -> Any:
        calls.append(kw["decompressed_size"])
        return real(data, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dm.pa, "decompress", counted)
        with pytest.raises(OSError) as batched:
            dm.decompress_many(Codec.ZSTD, parts)
    assert str(batched.value) == str(alone.value)
    # The batch was tried, then the parts one by one up to the damaged one.
    assert calls == [sum(len(d) for d in datas), *(len(d) for d in datas[:3])]


def test_snappy_parts_decompress_in_one_call_and_a_damaged_one_raises_its_own_error(
) -> None:
    import_or_missing("pqindex.scan._snappy", "the C module pqindex.scan._snappy")
    rng = np.random.default_rng(5)
    datas = [rng.integers(0, 50, 2000).astype("<i8").tobytes() for _ in range(5)]
    parts = [(pa.compress(d, codec="snappy", asbytes=True), len(d)) for d in datas]
    one_by_one: list[int] = []
    real = dm.decompress

    def counted(data: Any, codec: int, size: int) -> Any:
        one_by_one.append(size)
        return real(data, codec, size)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dm, "decompress", counted)
        assert [bytes(b) for b in dm.decompress_many(Codec.SNAPPY, parts)] == datas
        assert one_by_one == []  # all in the C module's one call
        bad = bytearray(parts[2][0])
        bad[len(bad) // 2 :] = b"\xff" * (len(bad) - len(bad) // 2)
        parts[2] = (bytes(bad), len(datas[2]))
        with pytest.raises(OSError) as alone:  # pyarrow's error, as format/codec.py gives it
            real(parts[2][0], Codec.SNAPPY, len(datas[2]))
        with pytest.raises(OSError) as batched:
            dm.decompress_many(Codec.SNAPPY, parts)
    assert str(batched.value) == str(alone.value)
    assert one_by_one == [len(datas[2])]  # only the damaged part again, on its own


def test_other_codecs_are_one_call_per_part() -> None:
    datas = [bytes(range(256)) * 20, b"x" * 5000]
    for codec, name in [(Codec.SNAPPY, "snappy"), (Codec.GZIP, "gzip"),
                        (Codec.LZ4_RAW, "lz4_raw"), (Codec.BROTLI, "brotli")]:
        parts = [(pa.compress(d, codec=name, asbytes=True), len(d)) for d in datas]
        assert [bytes(b) for b in dm.decompress_many(codec, parts)] == datas
    assert dm.decompress_many(Codec.UNCOMPRESSED, [(b"ab", 2)]) == [b"ab"]


def _corpus_zstd_parts(path: Path) -> list[list[tuple[bytes, int]]]:
    with ParquetFile.open(path) as pf:
        chunks = []
        for rg in range(pf.num_row_groups):
            for leaf in pf.schema.leaves:
                meta = pf.column_meta(rg, leaf.index)
                if meta.codec != Codec.ZSTD:
                    continue
                start, n = chunk_range(meta)
                raw = pf.read_bytes(start, n)
                pos, parts = 0, []
                while pos < n:
                    s = encoded._stored(raw, pos)
                    if isinstance(s, int):
                        pos = s
                        continue
                    pos = s.end
                    if s.compressed:
                        parts.append((bytes(s.part), s.size))
                chunks.append(parts)
        return chunks


@pytest.mark.parametrize("name", ["byte_stream_split.zstd.parquet",
                                  "delta_length_byte_array.parquet",
                                  "nested_structs.rust.parquet",
                                  "page_v2_empty_compressed.parquet"])
def test_corpus_zstd_pages_decompress_together_like_one_by_one(name: str) -> None:
    path = CORPUS / name
    if not path.exists():
        missing(f"{name} is not in the corpus")
    chunks = _corpus_zstd_parts(path)
    assert chunks
    for parts in chunks:
        assert [bytes(b) for b in dm.decompress_many(Codec.ZSTD, parts)] == _one_by_one(parts)


# ---------------------------------------------------------------- through the scanner


def _table(n: int, seed: int, periodic: bool = False) -> pa.Table:
    """Random rows; ``periodic``: dictionary ids repeat a pattern, so that their pages
    compress (v2 pages that don't are stored uncompressed)."""
    rng = np.random.default_rng(seed)
    cats = np.array([f"c{i:02d}" for i in range(30)] + ["rare"])
    idx = np.arange(n) * 7 % 30 if periodic else rng.integers(0, 30, n)
    idx[rng.choice(n, 9, replace=False)] = 30
    small = np.arange(n) % 40 if periodic else rng.integers(0, 40, n)
    return pa.table({
        "id": np.arange(n, dtype=np.int64),
        "category": pa.array(cats[idx], mask=rng.random(n) < 0.05),
        "user_id": pa.array(rng.integers(0, 10**12, n)),  # PLAIN after the dictionary fills
        "small": pa.array(small.astype(np.int32), mask=rng.random(n) < 0.2),
        "amount": pa.array(np.round(rng.random(n) * 100, 2), mask=rng.random(n) < 0.1),
    })


@pytest.fixture
def batched_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of parts of every batched call made."""
    calls: list[int] = []
    real = dm._batch

    def spy(parts: Any, batch: list[int], total: int, out: list[Any]) -> None:
        calls.append(len(batch))
        real(parts, batch, total, out)

    monkeypatch.setattr(dm, "_batch", spy)
    return calls


@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("dictionary", [True, False])
def test_zstd_scans_return_what_pyarrow_read_and_filter_return(
    tmp_path: Path, version: str, dictionary: bool, batched_calls: list[int]
) -> None:
    table = _table(60_000, 7)
    path = tmp_path / "z.parquet"
    pq.write_table(table, path, compression="zstd", data_page_version=version,
                   write_page_index=True, row_group_size=20_000, data_page_size=4096,
                   use_dictionary=["category", "small"] if dictionary else ["category"],
                   dictionary_pagesize_limit=64 << 10)
    uid = int(table.column("user_id")[31_337].as_py())
    ds = pqindex.dataset(str(path))
    cases = [
        ("category = 'rare'", pc.equal(table.column("category"), "rare")),
        ("category IS NULL AND id < 30000", pc.and_(pc.is_null(table.column("category")),
                                                    pc.less(table.column("id"), 30_000))),
        ("category = 'c03' AND id BETWEEN 25000 AND 41000",
         pc.and_(pc.equal(table.column("category"), "c03"),
                 pc.and_(pc.greater_equal(table.column("id"), 25_000),
                         pc.less_equal(table.column("id"), 41_000)))),
        (f"user_id = {uid}", pc.equal(table.column("user_id"), uid)),
        ("small = 7", pc.equal(table.column("small"), 7)),
        ("amount < 2.5", pc.less(table.column("amount"), 2.5)),
        ("id IN (5, 4999, 20000, 45123)", pc.is_in(table.column("id"),
                                                   pa.array([5, 4999, 20000, 45123]))),
        ("id BETWEEN 100 AND 5000", pc.and_(pc.greater_equal(table.column("id"), 100),
                                            pc.less_equal(table.column("id"), 5000))),
    ]
    columns = ["id", "category", "user_id", "small", "amount"]
    for where, mask in cases:
        got = ds.scan(columns=columns, where=where).to_table()
        want = pq.read_table(path).filter(mask).select(columns)
        assert got.sort_by("id").equals(want), where
    assert batched_calls and max(batched_calls) > 1  # the batched path ran


def _scan_fails_at_row_group_1(bad: Path, columns: list[str], where: str) -> None:
    """The scan of a damaged copy: a CorruptFileError naming the file and row group 1."""
    with pytest.raises(PqIndexError) as e:
        pqindex.dataset(str(bad)).scan(columns=columns, where=where).to_table()
    assert isinstance(e.value, CorruptFileError), e.value
    assert e.value.path == str(bad) and e.value.row_group == 1, e.value


def _patched_copy(path: Path, at: int, new: bytes, bad: Path) -> Path:
    """A copy of ``path`` with ``new`` written at offset ``at``."""
    data = bytearray(path.read_bytes())
    data[at : at + len(new)] = new
    bad.write_bytes(bytes(data))
    return bad


def _damage_page(path: Path, rg: int, col: str, how: str) -> Path:
    """A copy of the file with the first compressed data page of ``col`` in row group
    ``rg`` damaged so that zstd refuses it (v2 pages may be stored uncompressed)."""
    with ParquetFile.open(path) as pf:
        leaf = next(c for c in pf.schema.leaves if c.path[0] == col)
        oi = pf.offset_index(rg, leaf.index)
        assert oi is not None and oi.page_locations
        for loc in oi.page_locations:
            raw = pf.read_bytes(loc.offset or 0, loc.compressed_page_size or 0)
            s = encoded._stored(raw, 0)
            assert not isinstance(s, int)
            if s.compressed and (how == "magic" or (bytes(s.part)[_header_length(
                    bytes(s.part))] >> 1) & 3 == 2):  # a compressed block to damage
                break
        else:
            raise AssertionError(f"no compressed page in {col}")
    part = bytes(s.part)
    bad = part[:1] + b"\0" + part[2:] if how == "magic" else _damaged_block(part)
    with pytest.raises(OSError):
        pa.decompress(bad, decompressed_size=s.size, codec="zstd")
    return _patched_copy(path, (loc.offset or 0) + len(raw) - len(part), bad,
                         path.with_name(f"{path.stem}-{col}-{how}.parquet"))


@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("how", ["magic", "block"])
@pytest.mark.parametrize(("col", "where"), [
    ("category", "category = 'rare'"),      # a dictionary chunk matched on its pages
    ("user_id", "id BETWEEN 20100 AND 20110"),  # a few rows gathered from PLAIN pages
    ("small", "small = 3"),
])
def test_damaged_zstd_pages_are_corrupt_file_errors_naming_file_and_row_group(
    tmp_path: Path, version: str, how: str, col: str, where: str
) -> None:
    """As before batching: the page's own call fails, the numpy path gives up and
    pyarrow's decode names the error."""
    path = tmp_path / "z.parquet"
    pq.write_table(_table(40_000, 3, periodic=True), path, compression="zstd", data_page_version=version,
                   write_page_index=True, row_group_size=20_000, data_page_size=4096,
                   use_dictionary=["category", "small"])
    _scan_fails_at_row_group_1(_damage_page(path, 1, col, how), ["id", col], where)


# ---------------------------------------------------------------- snappy gather

needs_gather = pytest.mark.skipif(dm._snappy is None, reason="pqindex.scan._snappy not built")


@st.composite
def _snappy_case(draw: st.DrawFn) -> tuple[bytes, np.ndarray, int]:
    """Data of several shapes (incompressible, sorted integers, a few repeated values,
    short periodic runs), up to ~5 fragments, and some value positions in it."""
    kind = draw(st.sampled_from(["random", "sorted", "steps", "mixed", "few", "period"]))
    n = draw(st.integers(1, 40_000))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "random":
        data = rng.bytes(n * 8)
    elif kind == "sorted":
        data = (np.arange(n, dtype=np.int64) * int(rng.integers(1, 2000))).tobytes()
    elif kind == "steps":  # timestamps: sorted, random gaps (pairs of elements repeat, broken)
        data = np.cumsum(rng.integers(1, int(rng.integers(2, 5000)), n)).astype(np.int64).tobytes()
    elif kind == "mixed":  # sorted runs between random stretches
        parts = [np.arange(int(rng.integers(1, 3000)), dtype=np.int64) + int(rng.integers(0, 2**40))
                 if j % 2 == 0 else rng.integers(0, 2**62, int(rng.integers(1, 500)))
                 for j in range(int(rng.integers(1, 8)))]
        data = np.concatenate(parts).astype(np.int64).tobytes()
    elif kind == "few":
        data = rng.choice(rng.random(int(rng.integers(1, 60))), n).tobytes()
    else:
        data = bytes(rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8)) * n
    width = draw(st.sampled_from([1, 4, 8, 12]))
    width = min(width, len(data))
    k = draw(st.integers(1, 6))
    offsets = np.sort(rng.integers(0, len(data) - width + 1, k)).astype(np.int64)
    return data, offsets, width


@needs_gather
@settings(max_examples=300, deadline=None)
@given(_snappy_case())
def test_gathered_values_are_the_decompressed_bytes(case: tuple[bytes, np.ndarray, int]
                                                    ) -> None:
    data, offsets, width = case
    part = pa.compress(data, codec="snappy", asbytes=True)
    assert dm._snappy is not None
    got = dm._snappy.gather(part, len(data), offsets, width)
    # snappy compresses 64 KiB fragments on their own: never a copy across them.
    assert got == b"".join(data[o : o + width] for o in offsets)


@needs_gather
@settings(max_examples=200, deadline=None)
@given(_snappy_case(), st.floats(0.0, 1.0))
def test_a_cut_block_gives_none_or_the_right_bytes(case: tuple[bytes, np.ndarray, int],
                                                   keep: float) -> None:
    """Cut anywhere (the stated size kept): the skipping, run by run or one element at
    a time, never reads past the end; values before the cut may still be served."""
    data, offsets, width = case
    part = pa.compress(data, codec="snappy", asbytes=True)
    assert dm._snappy is not None
    got = dm._snappy.gather(part[: int(len(part) * keep)], len(data), offsets, width)
    assert got is None or got == b"".join(data[o : o + width] for o in offsets)


@needs_gather
def test_gather_declines_where_decompressing_whole_is_as_cheap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    data = np.arange(200_000, dtype=np.int64).tobytes()
    part = pa.compress(data, codec="snappy", asbytes=True)
    one = np.array([8 * 150_000], dtype=np.int64)
    assert dm.gather(part, Codec.SNAPPY, len(data), one, 8) == data[one[0] : one[0] + 8]
    spread = np.arange(0, len(data) - 8, 40_000, dtype=np.int64)  # every fragment
    assert dm.gather(part, Codec.SNAPPY, len(data), spread, 8) is None
    small = pa.compress(data[:4000], codec="snappy", asbytes=True)
    assert dm.gather(small, Codec.SNAPPY, 4000, np.array([3000], dtype=np.int64), 8) is None
    zstd = pa.compress(data, codec="zstd", asbytes=True)
    assert dm.gather(zstd, Codec.ZSTD, len(data), one, 8) is None
    monkeypatch.setattr(dm, "_snappy", None)  # built without the C module
    assert dm.gather(part, Codec.SNAPPY, len(data), one, 8) is None


def _literal(data: bytes) -> bytes:
    n = len(data) - 1
    if n < 60:
        return bytes([n << 2]) + data
    width = (n.bit_length() + 7) // 8
    return bytes([(59 + width) << 2]) + n.to_bytes(width, "little") + data


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out) + bytes([n])


@needs_gather
def test_a_copy_reaching_before_its_fragment_is_declined_not_misread() -> None:
    # Valid snappy no known compressor writes: a copy in the second fragment whose
    # source is in the first. pyarrow decodes it; gather must not guess.
    body = bytes(range(256)) * 274  # 70,144 bytes
    copy = bytes([(64 - 1) << 2 | 2]) + (65_000).to_bytes(2, "little")  # 64 bytes back 65,000
    block = _varint(len(body) + 64) + _literal(body) + copy
    full = pa.decompress(block, len(body) + 64, codec="snappy", asbytes=True)
    assert dm._snappy is not None
    at = len(body) + 8
    assert dm._snappy.gather(block, len(full), np.array([at], dtype=np.int64), 8) is None
    first = np.array([100], dtype=np.int64)
    assert dm._snappy.gather(block, len(full), first, 8) == full[100:108]


def _copy(offset: int, length: int, kind: int) -> bytes:
    """A copy element of tag kind 1 (4-11 bytes, offset < 2048), 2 or 4 (1-64 bytes)."""
    if kind == 1:
        return bytes([(offset >> 8) << 5 | (length - 4) << 2 | 1, offset & 0xFF])
    width = 2 if kind == 2 else 4
    return bytes([(length - 1) << 2 | (2 if kind == 2 else 3)]) + offset.to_bytes(width, "little")


@st.composite
def _built_block(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A block of fragments built element by element (a raw snappy block and its
    output), mixing what the window writer treats apart: literals short and long and
    near the block's end, copies by each tag kind with offsets under 8, 8-15 and 16 or
    more, lengths up to 16 and past. Copies stay inside their 64 KiB fragment, as every
    known compressor's do."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    fragments = draw(st.integers(1, 3))
    last = draw(st.integers(1, 65_536))
    out = bytearray()
    body = bytearray()
    for f in range(fragments):
        size = 65_536 if f < fragments - 1 else last
        start = len(out)
        while len(out) - start < size:
            room = size - (len(out) - start)
            written = len(out) - start
            if written == 0 or rng.random() < 0.4:
                n = min(room, int(rng.choice([1, 2, 7, 16, 17, 60, 61, 300])))
                lit = rng.bytes(n)
                body += _literal(lit)
                out += lit
                continue
            offset = min(written, int(rng.choice([1, 3, 7, 8, 12, 15, 16, 40, 2047, 5000])))
            kind = 1 if offset < 2048 and rng.random() < 0.5 else int(rng.choice([2, 4]))
            length = min(room, int(rng.integers(4, 12)) if kind == 1 else int(rng.integers(1, 65)))
            if kind == 1 and length < 4:
                kind = 2
            body += _copy(offset, length, kind)
            for _ in range(length):
                out.append(out[-offset])
    return _varint(len(out)) + bytes(body), bytes(out)


@needs_gather
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_built_block(), st.data())
def test_gathered_values_of_built_blocks(block: tuple[bytes, bytes], data: st.DataObject
                                         ) -> None:
    part, full = block
    assert bytes(pa.decompress(part, len(full), codec="snappy")) == full  # a valid block
    width = data.draw(st.sampled_from([1, 8, 16]))
    width = min(width, len(full))
    ends = [len(full) - width, min(len(full) - width, 65_535)]  # the end: no spare bytes
    picked = data.draw(st.lists(st.integers(0, len(full) - width), max_size=4))
    offsets = np.array(sorted({*picked, *ends}), dtype=np.int64)
    assert dm._snappy is not None
    got = dm._snappy.gather(part, len(full), offsets, width)
    assert got == b"".join(full[o : o + width] for o in offsets)


@needs_gather
def test_malformed_blocks_are_declined() -> None:
    data = np.arange(50_000, dtype=np.int64).tobytes()
    part = pa.compress(data, codec="snappy", asbytes=True)
    last = np.array([len(data) - 8], dtype=np.int64)
    assert dm._snappy is not None
    assert dm._snappy.gather(part[: len(part) // 2], len(data), last, 8) is None
    assert dm._snappy.gather(part, len(data) + 1, last, 8) is None  # another stated size
    assert dm._snappy.gather(part, len(data), np.array([len(data) - 4], dtype=np.int64),
                             8) is None  # past the end
    assert dm._snappy.gather(part, len(data), np.array([16, 8], dtype=np.int64),
                             8) is None  # not ascending
    bad_offset = _varint(8) + _literal(b"abcd") + bytes([(4 - 1) << 2 | 2]) + (9).to_bytes(2, "little")
    assert dm._snappy.gather(bad_offset, 8, np.array([0], dtype=np.int64), 8) is None


# ---------------------------------------------------------------- decoders that count

COUNTED = [Codec.SNAPPY, Codec.GZIP, Codec.BROTLI, Codec.LZ4_RAW]


@settings(max_examples=200, deadline=None)
@given(_snappy_case(), st.sampled_from(COUNTED), st.booleans())
def test_parts_decompress_as_pyarrow_does(case: tuple[bytes, np.ndarray, int], codec: int,
                                          through_cramjam: bool) -> None:
    """``decompress`` gives pyarrow's bytes, with cramjam's decoders (the default where
    it is installed) and without them."""
    data, _, _ = case
    part = pa.compress(data, codec=dm.CODECS[Codec(codec)], asbytes=True)
    with pytest.MonkeyPatch.context() as mp:
        if not through_cramjam:
            mp.setattr(fc, "_into", {})
        got = dm.decompress(memoryview(part), codec, len(data))
    assert bytes(got) == data


def test_cramjam_decoders_are_in_use() -> None:
    """cramjam is a dependency: the counting decoders are the ones in use (no skip: a
    missing cramjam fails here)."""
    assert set(COUNTED) <= set(fc._into)
    part = pa.compress(b"abc" * 1000, codec="snappy", asbytes=True)
    assert isinstance(dm.decompress(part, Codec.SNAPPY, 3000), memoryview)


@pytest.mark.parametrize("codec", COUNTED)
@pytest.mark.parametrize("damage", ["bytes", "short"])
def test_damaged_parts_raise_pyarrows_error(codec: int, damage: str) -> None:
    """A part cramjam cannot decode is left to pyarrow, whose error the callers
    translate as before (or which, where pyarrow decodes it after all, gives its
    answer: the size check below still applies to cramjam's)."""
    name = dm.CODECS[Codec(codec)]
    data = np.arange(20_000, dtype=np.int64).tobytes()
    part = bytearray(pa.compress(data, codec=name, asbytes=True))
    if damage == "bytes":
        part[len(part) // 3 : len(part) // 3 + 40] = b"\xff" * 40
    else:
        part = part[: len(part) // 2]
    try:
        want: Any = pa.decompress(bytes(part), decompressed_size=len(data), codec=name)
    except (OSError, pa.ArrowException) as e:
        want = e
    try:
        got: Any = dm.decompress(bytes(part), codec, len(data))
    except (OSError, pa.ArrowException) as e:
        got = e
    if isinstance(want, BaseException):
        assert isinstance(got, BaseException), (name, damage)
    elif not isinstance(got, BaseException):
        assert bytes(got) == want.to_pybytes()


@pytest.mark.parametrize("codec", COUNTED)
def test_a_page_size_its_data_disagrees_with_is_refused(codec: int) -> None:
    """A page header stating more bytes than its compressed part holds: pyarrow
    returns a buffer of the stated size whose end it never wrote; here it is an
    error (the numpy paths then give up, and pyarrow's page decoder reports the
    page)."""
    name = dm.CODECS[Codec(codec)]
    data = np.arange(20_000, dtype=np.int64).tobytes()
    part = pa.compress(data, codec=name, asbytes=True)
    assert pa.decompress(part, decompressed_size=len(data) + 8, codec=name).size == len(
        data) + 8
    with pytest.raises(pa.ArrowInvalid, match="page header"):
        dm.decompress(part, codec, len(data) + 8)
    assert bytes(dm.decompress(part, codec, len(data))) == data


def test_damaged_snappy_pages_are_corrupt_file_errors(tmp_path: Path) -> None:
    """Through a scan: the damaged page of a snappy file names file and row group."""
    path = tmp_path / "s.parquet"
    pq.write_table(_table(40_000, 3, periodic=True), path, compression="snappy",
                   write_page_index=True, row_group_size=20_000, data_page_size=4096,
                   use_dictionary=["category", "small"])
    with ParquetFile.open(path) as pf:
        leaf = next(c for c in pf.schema.leaves if c.path[0] == "small")
        oi = pf.offset_index(1, leaf.index)
        assert oi is not None and oi.page_locations
        loc = oi.page_locations[0]
        raw = pf.read_bytes(loc.offset or 0, loc.compressed_page_size or 0)
    s = encoded._stored(raw, 0)
    assert not isinstance(s, int) and s.compressed
    part = bytearray(s.part)
    part[3:] = b"\xff" * (len(part) - 3)  # copies reaching far before the output
    with pytest.raises(OSError):
        pa.decompress(bytes(part), decompressed_size=s.size, codec="snappy")
    bad = _patched_copy(path, (loc.offset or 0) + len(raw) - len(part), bytes(part),
                        tmp_path / "bad.parquet")
    _scan_fails_at_row_group_1(bad, ["id", "small"], "small = 2")


@pytest.mark.parametrize("codec", ["snappy", "gzip", "lz4_raw"])
def test_a_page_header_overstating_its_size_is_a_corrupt_file_error(tmp_path: Path,
                                                                    codec: str) -> None:
    """Through a scan: a data page whose header states 8 bytes more than its part
    holds is reported (file, row group), not read past its data."""
    from pqindex.format.structs import PageHeader
    from pqindex.format.thrift import decode, encode

    path = tmp_path / "p.parquet"
    n = 40_000
    table = pa.table({"id": np.arange(n, dtype=np.int64),
                      "v": np.arange(n, dtype=np.int64) % 1000})
    pq.write_table(table, path, compression=codec, write_page_index=True,
                   row_group_size=20_000, data_page_size=8192, use_dictionary=False)
    with ParquetFile.open(path) as pf:
        oi = pf.offset_index(1, 1)
        assert oi is not None and oi.page_locations
        loc = oi.page_locations[0]
        raw = pf.read_bytes(loc.offset or 0, loc.compressed_page_size or 0)
    ph, hlen = decode(PageHeader, raw)
    assert ph.uncompressed_page_size is not None
    ph.uncompressed_page_size += 8
    header = encode(ph)
    assert len(header) == hlen  # the same length: every offset stays right
    bad = _patched_copy(path, loc.offset or 0, header, tmp_path / "bad.parquet")
    _scan_fails_at_row_group_1(bad, ["id", "v"], "v = 7")
