"""``pqindex.dataset(..., schema=)``: the dataset's schema given, not unified from
every footer.

Reference: ``pyarrow.dataset`` given the same schema over the same files (it casts
each file to it and reads a column a file lacks as NULL), filtered by the same
predicate. A stream, and DuckDB's ``LIMIT`` over it, then opens the files it reads
only: on S3 (moto), one tail instead of one per file.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pqindex
from pqindex.errors import UserInputError
from pqindex.io.cache import metadata_cache
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)

FILES = 12
ROWS = 200
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.float64()), ("tag", pa.string()),
                    ("w", pa.string())])


def _lake(root: Path) -> Path:
    """Files typed differently (int32 then int64 ids), a column only the later ones
    have (``tag``), one no file has (``w``, in SCHEMA) and one SCHEMA lacks (``extra``)."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(FILES):
        ids = range(i * ROWS, (i + 1) * ROWS)
        cols = {"id": pa.array(ids, pa.int32() if i < FILES // 2 else pa.int64()),
                "v": pa.array([k / 7 for k in ids]),
                "extra": pa.array([k % 3 for k in ids], pa.int16())}
        if i >= 3:
            cols["tag"] = pa.array([f"t{k % 5}" for k in ids])
        pq.write_table(pa.table(cols), root / f"part-{i:03d}.parquet", row_group_size=50,
                       write_page_index=True)
    return root


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _lake(tmp_path_factory.mktemp("given") / "lake")


WHERES = [None, "id BETWEEN 590 AND 1210", "tag = 't3' AND v > 100", "tag IS NULL",
          "w IS NULL AND id < 40", "id = 2399", "v < 0", "tag IN ('t1', 't4') OR id < 5"]


@pytest.mark.parametrize("where", WHERES)
def test_rows_and_types_are_the_given_schemas(lake: Path, where: str | None) -> None:
    cols = ["id", "v", "tag", "w"]
    ds = pqindex.dataset(lake, schema=SCHEMA)
    got = ds.to_table(columns=cols, where=where)
    assert got.schema == SCHEMA
    # Reference: pyarrow.dataset with the same schema, filtered by DuckDB.
    every = pads.dataset(lake, schema=SCHEMA, format="parquet").to_table(columns=cols)  # noqa: F841
    sql = "SELECT * FROM every" + (f" WHERE {where}" if where else "") + " ORDER BY id"
    want = duckdb.execute(sql).fetchall()
    assert [tuple(r.values()) for r in got.sort_by("id").to_pylist()] == want, where
    # The stream, head and the count agree with it.
    batches = list(ds.scan(cols, where).to_batches())
    streamed = pa.Table.from_batches(batches, SCHEMA)
    assert [tuple(r.values()) for r in streamed.sort_by("id").to_pylist()] == want, where
    assert ds.count_rows(where) == len(want)
    head = ds.head(5, cols, where)
    assert head.schema == SCHEMA and head.num_rows == min(5, len(want))


_LEAF = st.one_of(
    st.builds(lambda op, k: f"id {op} {k}", st.sampled_from(["<", ">=", "=", "<>"]),
              st.integers(-5, FILES * ROWS + 5)),
    st.builds(lambda op, x: f"v {op} {x}", st.sampled_from(["<", ">"]),
              st.floats(-1, FILES * ROWS / 7 + 1, allow_nan=False)),
    st.builds(lambda t: f"tag = '{t}'", st.sampled_from(["t0", "t2", "t4", "t9"])),
    st.sampled_from(["tag IS NULL", "tag IS NOT NULL", "w IS NULL", "w IS NOT NULL"]),
)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_LEAF, min_size=1, max_size=3), joins=st.lists(
    st.sampled_from(["AND", "OR"]), min_size=2, max_size=2))
def test_random_predicates_with_a_given_schema(lake: Path, parts: list[str],
                                               joins: list[str]) -> None:
    where = parts[0] + "".join(f" {j} {p}" for j, p in zip(joins, parts[1:], strict=False))
    got = pqindex.dataset(lake, schema=SCHEMA).to_table(["id", "tag"], where)
    every = pads.dataset(lake, schema=SCHEMA, format="parquet").to_table()  # noqa: F841
    want = duckdb.execute(f"SELECT id, tag FROM every WHERE {where} ORDER BY id").fetchall()
    assert [tuple(r.values()) for r in got.sort_by("id").to_pylist()] == want, where


def test_the_given_schema_is_the_datasets_columns(lake: Path) -> None:
    ds = pqindex.dataset(lake, schema=SCHEMA)
    assert ds.schema == SCHEMA
    with pytest.raises(UserInputError, match="no column named 'extra'"):
        ds.to_table(columns=["extra"])
    with pytest.raises(UserInputError, match="no column named 'extra' in the dataset's schema"):
        ds.to_table(where="extra = 1")
    # Without it, the footers unify: int64 ids, and the column SCHEMA leaves out.
    assert pqindex.dataset(lake).schema.names == ["id", "v", "extra", "tag"]


def test_a_value_that_does_not_convert_names_the_file(lake: Path) -> None:
    narrow = pa.schema([("id", pa.int8())])
    with pytest.raises(UserInputError, match=r"part-000\.parquet.*'id'.*int8"):
        pqindex.dataset(lake, schema=narrow).to_table()


@pytest.mark.parametrize("bad", [{"id": "int64"}, "id int64"])
def test_schema_must_be_an_arrow_schema(lake: Path, bad: object) -> None:
    with pytest.raises(UserInputError, match=r"pyarrow\.Schema"):
        pqindex.dataset(lake, schema=bad)  # type: ignore[arg-type]
    with pytest.raises(UserInputError, match="twice"):
        pqindex.dataset(lake, schema=pa.schema([("id", pa.int64()), ("id", pa.int32())]))


def test_limit_over_the_stream_opens_only_the_files_it_reads(lake: Path) -> None:
    """DuckDB's LIMIT over the Arrow stream: with the schema given, the stream's
    schema needs no footer, and the first step of files has the rows."""
    metadata_cache().clear()
    ds = pqindex.dataset(lake, schema=SCHEMA)
    scan = ds.scan(["id", "tag"], "id >= 0")
    got = duckdb.execute("SELECT count(*) FROM (SELECT * FROM scan LIMIT 10)").fetchall()
    assert got == [(10,)]
    assert len(ds.io_stats()) == 1
    metadata_cache().clear()
    unified = pqindex.dataset(lake)
    scan = unified.scan(["id", "tag"], "id >= 0")  # noqa: F841  (DuckDB reads it by name)
    duckdb.execute("SELECT count(*) FROM (SELECT * FROM scan LIMIT 10)").fetchall()
    assert len(unified.io_stats()) == FILES  # the stream's schema read every footer


def test_on_s3_the_stream_reads_one_tail(s3: S3Endpoint, lake: Path) -> None:  # noqa: F811
    bucket = s3.new_bucket()
    root = f"given-{uuid.uuid4().hex[:8]}"
    for p in sorted(lake.iterdir()):
        s3.put(bucket, f"{root}/{p.name}", p.read_bytes())
    url = f"s3://{bucket}/{root}/"
    metadata_cache().clear()
    s3.reset_log()
    ds = pqindex.dataset(url, storage_options=s3.storage_options(), schema=SCHEMA)
    reader = ds.scan(["id", "v"], "v >= 0").to_reader()
    first = reader.read_next_batch()
    assert first.num_rows > 0 and reader.schema == pa.schema([SCHEMA.field("id"),
                                                              SCHEMA.field("v")])
    reader.close()
    tails = [r for r in s3.requests if r.method == "GET" and r.range
             and r.range.startswith("bytes=-")]
    assert len(tails) == 1, [(r.path, r.range) for r in s3.requests]
    # The rows are the local files' (cast to the given schema).
    got = ds.to_table(["id", "v"], "id < 300")
    assert got.column("id").to_pylist() == list(range(300))
    assert got.schema.field("id").type == pa.int64()
    assert pc.sum(got.column("v")).as_py() == pytest.approx(sum(k / 7 for k in range(300)))
