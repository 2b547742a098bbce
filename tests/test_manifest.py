"""The dataset manifest: files pruned before any footer read, never a wrong row.

A lake of files sorted by ``id`` across files is planned with and without its
``_pqindex_manifest.json``; on random predicates both give the rows an
independent reference gives (the plain-Python evaluator and DuckDB of
test_scan_differential, over pyarrow's read of the same files). Then the
manifest is made stale (a file rewritten), partial (a file added), corrupt,
of an unknown version, or replaced between the listing and its read: the
answers stay identical, the untrusted entries falling back to the footers.
On S3 (moto behind the counting proxy) a pruned file costs no request: a
500-file lake is planned with one LIST, one GET of the manifest and the
requests of the files that survive.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import random
import shutil
import uuid
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pqindex
import scan_fixtures
import test_scan_differential as diff
from pqindex.dataset.manifest import (
    MANIFEST_NAME,
    ManifestError,
    parse_manifest,
    write_manifest,
)
from pqindex.io.cache import metadata_cache
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)

FILES = 10
ROWS = 2_000
# Columns the random predicates use (lists and structs are projected only).
PRED_COLUMNS = ("id", "desc", "shuffled", "f64", "category", "long_text", "day", "ts",
                "price", "flag", "u32", "u64", "f32", "name", "i16", "ts_naive", "late",
                "blob")


def _write_lake(root: Path, table: pa.Table, files: int = FILES) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    per = table.num_rows // files
    out = []
    for k in range(files):
        p = root / f"part-{k:03d}.parquet"
        pq.write_table(table.slice(k * per, per), p, row_group_size=per // 2,
                       max_rows_per_page=25)
        out.append(p)
    return out


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    """Ten files, ``id`` ascending across them, a distinct index on ``category`` (whose
    run of add_indexes writes the manifest)."""
    table = scan_fixtures.make_scan_table(ROWS)
    # One value of category per file, so the file-level distinct sets prune.
    cats = [f"cat-{k // (ROWS // FILES)}" for k in range(ROWS)]
    table = table.set_column(table.schema.get_field_index("category"), "category",
                             pa.array(cats))
    root = tmp_path_factory.mktemp("lake") / "lake"
    _write_lake(root, table)
    pqindex.add_indexes(str(root), distinct=["category"])
    assert (root / MANIFEST_NAME).exists()
    return root, table


def _copy(lake: tuple[Path, pa.Table], dst: Path, manifest: bool = True) -> Path:
    """The lake copied (mtimes kept), its manifest's entries given the copies' ctimes:
    as if written for these files (a copy's new ctimes alone leave every entry
    unmatched, see test_a_copied_lake_plans_from_footers_until_its_manifest_is_written)."""
    root, _ = lake
    shutil.copytree(root, dst)
    path = dst / MANIFEST_NAME
    if not manifest:
        path.unlink()
        return dst
    m = json.loads(path.read_text())
    for e in m["files"]:
        e["ctime"] = os.stat(dst / e["path"]).st_ctime_ns
    path.write_text(json.dumps(m))
    return dst


def _current_table(root: Path) -> pa.Table:
    """The data files as pyarrow reads them, in pqindex's file order."""
    files = pqindex.dataset(str(root)).files
    return pa.concat_tables([pq.read_table(f) for f in files])


def _check(roots: list[Path], seed: str, n: int = 24) -> dict[str, int]:
    """Random predicates: every dataset over ``roots`` gives the reference rows.

    Returns how many files were skipped per level, summed over the predicates."""
    table = _current_table(roots[0])
    for r in roots[1:]:  # copies of the same files
        names = [os.path.relpath(f, r) for f in pqindex.dataset(str(r)).files]
        assert names == [os.path.relpath(f, roots[0]) for f in pqindex.dataset(str(roots[0])).files]
    case = diff.Case(roots[0], table, PRED_COLUMNS)
    rng = random.Random(zlib.crc32(seed.encode()))
    gen = diff.Generator(case.columns, rng)
    skipped: dict[str, int] = {}
    failures = []
    for _ in range(n):
        pred = gen.tree()
        where = pred.pq()
        columns = case.projection(rng, pred)
        expected = case.reference(columns).take(pa.array(case.expected_rows(pred), pa.int64()))
        for r in roots:
            scan = pqindex.dataset(str(r)).scan(columns=columns, where=where)
            try:
                diff.assert_same_rows(scan.to_table(), expected, f"{r.name}: where {where}")
            except AssertionError as e:
                failures.append(str(e)[:2000])
            for k, v in scan.report.files_skipped.items():
                skipped[k] = skipped.get(k, 0) + v
    assert not failures, "\n\n".join(failures[:4])
    return skipped


# ------------------------------------------------------------------ the format


def test_manifest_records_files_with_typed_truncated_bounds(lake: tuple[Path, pa.Table]) -> None:
    root, table = lake
    m = json.loads((root / MANIFEST_NAME).read_text())
    assert m["version"] == 1 and m["rows"] == ROWS and len(m["files"]) == FILES
    parsed = parse_manifest((root / MANIFEST_NAME).read_bytes(), str(root / MANIFEST_NAME))
    schema = parsed.schemas[0].schema
    ids = [leaf.name for leaf in schema.leaves].index("id")
    text = [leaf.name for leaf in schema.leaves].index("long_text")
    for k, f in enumerate(m["files"]):
        st = os.stat(root / f["path"])
        assert (f["bytes"], f["mtime"], f["rows"]) == (st.st_size, st.st_mtime_ns, ROWS // FILES)
        c = f["columns"][ids]
        lo, hi = (int.from_bytes(base64.b64decode(c[s]), "little", signed=True)
                  for s in ("min", "max"))
        part = table.slice(k * (ROWS // FILES), ROWS // FILES)
        assert (lo, hi) == (min(part["id"].to_pylist()), max(part["id"].to_pylist()))
        # long strings are cut to 64 bytes and marked inexact, min below, max above
        t = f["columns"][text]
        values = [v.encode() for v in part["long_text"].to_pylist() if v is not None]
        tlo, thi = base64.b64decode(t["min"]), base64.b64decode(t["max"])
        assert len(tlo) <= 64 and len(thi) <= 64
        assert tlo <= min(values) and thi >= max(values)
        if max(len(v) for v in values) > 64:
            assert t["min_exact"] is False or t["max_exact"] is False
        assert [s["kind"] for s in f["summaries"]] == ["distinct"]


def test_corrupt_or_unknown_manifests_are_refused_whole() -> None:
    good = {"version": 1, "schemas": [], "files": [{"path": "a.parquet", "bytes": 10}]}
    assert parse_manifest(json.dumps(good).encode(), "m").entries["a.parquet"].size == 10
    bad: list[Any] = [
        b"{not json",
        b"[]",
        {**good, "version": 2},
        {**good, "files": [{"path": "a.parquet", "bytes": -1}]},
        {**good, "files": [{"path": "a.parquet", "bytes": 1, "schema": 0}]},  # no schema 0
        {**good, "schemas": ["***"]},
        {**good, "schemas": [base64.b64encode(b"\x00garbage").decode()]},
        {**good, "files": [good["files"][0], good["files"][0]]},
    ]
    for b in bad:
        data = b if isinstance(b, bytes) else json.dumps(b).encode()
        with pytest.raises(ManifestError):
            parse_manifest(data, "m")


# ------------------------------------------------------------------ local


def test_random_predicates_same_rows_with_and_without(
    lake: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    root, _ = lake
    plain = _copy(lake, tmp_path / "plain", manifest=False)
    skipped = _check([root, plain], "manifest-local", n=40)
    assert skipped.get("manifest", 0) > 0  # the manifest did prune


def test_pruned_files_are_never_opened(lake: tuple[Path, pa.Table]) -> None:
    root, _ = lake
    ds = pqindex.dataset(str(root))
    scan = ds.scan(where="id = 1234")
    assert scan.to_table()["id"].to_pylist() == [1234]
    assert scan.report.files_skipped["manifest"] == FILES - 1
    assert list(ds._open) == [str(root / "part-006.parquet")]
    text = pqindex.dataset(str(root)).explain(where="id = 1234")
    assert text.count("skipped by manifest") == FILES - 1
    # file-level distinct summaries prune too: category holds one value per file
    ds = pqindex.dataset(str(root))
    scan = ds.scan(where="category IN ('cat-3', 'nope')")
    assert scan.to_table().num_rows == ROWS // FILES
    assert list(ds._open) == [str(root / "part-003.parquet")]
    # nothing can match: no data file is opened, the schema comes from the manifest
    ds = pqindex.dataset(str(root))
    empty = ds.scan(where="id > 99999").to_table()
    assert empty.num_rows == 0 and empty.schema == pq.read_schema(root / "part-000.parquet")
    assert not ds._open


def test_stale_manifest_falls_back_to_footers(lake: tuple[Path, pa.Table], tmp_path: Path) -> None:
    root = _copy(lake, tmp_path / "stale")
    # part-002 rewritten with ids its old manifest entry rules out (another size)
    victim = root / "part-002.parquet"
    t = pq.read_table(victim)
    t = t.set_column(0, "id", pa.array(np.arange(50_000, 50_000 + t.num_rows), pa.int64()))
    pq.write_table(t.slice(0, 150), victim)
    assert pqindex.dataset(str(root)).to_table(where="id = 50007")["id"].to_pylist() == [50007]
    _check([root], "manifest-stale")


def test_manifest_reports_progress_and_the_cli_writes_it(tmp_path: Path) -> None:
    """``progress(done, total)`` runs from 0 to the file count, one file at a time; the
    CLI's bar (off when standard error is not a terminal) changes nothing printed."""
    from click.testing import CliRunner

    from pqindex.cli import cli

    root = tmp_path / "lake"
    root.mkdir()
    for k in range(5):
        pq.write_table(pa.table({"id": pa.array(np.arange(k * 10, k * 10 + 10))}),
                       root / f"f{k}.parquet")
    (root / "broken.parquet").write_bytes(b"PAR1 not a parquet file PAR1")
    seen: list[tuple[int, int]] = []
    m = write_manifest(str(root), progress=lambda done, total: seen.append((done, total)))
    assert [d for d, _ in seen] == list(range(7)) and {t for _, t in seen} == {6}
    assert len(m["files"]) == 5  # the broken file has no entry: its footer says why
    res = CliRunner().invoke(cli, ["manifest", str(root)])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == f"{root}: manifest of 5 file(s), 50 rows"


_PLAIN: dict[str, Any] = {"compression": "none", "use_dictionary": False}


def _three_files_and_a_manifest(root: Path) -> Path:
    """ids 0-9, 10-19, 20-29 in f0..f2 (fixed-width pages: a rewrite of f1 with other
    ids has its size), a manifest; returns f1."""
    root.mkdir()
    for k in range(3):
        pq.write_table(pa.table({"id": pa.array(np.arange(k * 10, k * 10 + 10))}),
                       root / f"f{k}.parquet", **_PLAIN)
    write_manifest(str(root))
    return root / "f1.parquet"


def test_same_size_rewrite_is_caught_by_mtime(tmp_path: Path) -> None:
    root = tmp_path / "same"
    f1 = _three_files_and_a_manifest(root)
    size = os.path.getsize(f1)
    pq.write_table(pa.table({"id": pa.array(np.arange(500, 510))}), f1, **_PLAIN)
    assert os.path.getsize(f1) == size
    st = os.stat(f1)
    os.utime(f1, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert pqindex.dataset(str(root)).to_table(where="id = 505")["id"].to_pylist() == [505]


def test_same_size_rewrite_with_mtime_restored_is_caught_by_ctime(tmp_path: Path) -> None:
    """Rewritten with the same size and its mtime put back: the ctime, which every
    write and utime moves, tells the entry is for another version (10 rows, not 0)."""
    root = tmp_path / "same"
    f1 = _three_files_and_a_manifest(root)
    before = os.stat(f1)
    pq.write_table(pa.table({"id": pa.array(np.arange(500, 510))}), f1, **_PLAIN)
    os.utime(f1, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(f1)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    scan = pqindex.dataset(str(root)).scan(where="id >= 500")
    assert sorted(scan.to_table()["id"].to_pylist()) == list(range(500, 510))
    assert scan.report.files_skipped.get("manifest", 0) == 2


def test_a_copied_lake_plans_from_footers_until_its_manifest_is_written(
    lake: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    """Copied with mtimes kept (copy2): every ctime is new, so no entry is trusted
    (the rows are the same); ``write_manifest`` again makes them count."""
    root, _ = lake
    dst = tmp_path / "copied"
    shutil.copytree(root, dst)
    scan = pqindex.dataset(str(dst)).scan(where="id = 90001")
    assert scan.to_table().num_rows == 0
    assert scan.report.files_skipped.get("manifest", 0) == 0
    write_manifest(str(dst))
    scan = pqindex.dataset(str(dst)).scan(where="id = 90001")
    assert scan.to_table().num_rows == 0
    assert scan.report.files_skipped["manifest"] == FILES


def test_partial_manifest_plans_new_files_from_footers(
    lake: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    root = _copy(lake, tmp_path / "partial")
    extra = pq.read_table(root / "part-000.parquet").slice(0, 40)
    extra = extra.set_column(0, "id", pa.array(np.arange(90_000, 90_040), pa.int64()))
    pq.write_table(extra, root / "part-zzz.parquet")
    scan = pqindex.dataset(str(root)).scan(where="id = 90001")
    assert scan.to_table()["id"].to_pylist() == [90001]
    assert scan.report.files_skipped["manifest"] == FILES
    _check([root], "manifest-partial")


@pytest.mark.parametrize("damage", ["garbage", "truncated", "version", "bad bound", "empty"])
def test_corrupt_manifest_is_ignored_with_a_warning(
    lake: tuple[Path, pa.Table], tmp_path: Path, damage: str
) -> None:
    root = _copy(lake, tmp_path / damage.replace(" ", "_"))
    path = root / MANIFEST_NAME
    text = path.read_text()
    m = json.loads(text)
    if damage == "garbage":
        path.write_bytes(os.urandom(300))
    elif damage == "truncated":
        path.write_text(text[: len(text) // 2])
    elif damage == "version":
        m["version"] = 99
        path.write_text(json.dumps(m))
    elif damage == "bad bound":
        m["files"][3]["columns"][0]["min"] = "not base64!"
        path.write_text(json.dumps(m))
    else:
        path.write_text("")
    scan = pqindex.dataset(str(root)).scan(where="id = 1234")
    assert scan.to_table()["id"].to_pylist() == [1234]
    assert "manifest" not in scan.report.files_skipped
    assert any("manifest not used" in w for w in scan.report.warnings)
    _check([root], f"manifest-{damage}", n=8)


def test_a_lying_schema_entry_cannot_bind_wrongly(
    lake: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    """Entries are trusted only for matching files; a file whose manifest columns do not
    fit its schema makes the whole manifest unusable."""
    root = _copy(lake, tmp_path / "cols")
    path = root / MANIFEST_NAME
    m = json.loads(path.read_text())
    m["files"][0]["columns"] = m["files"][0]["columns"][:-1]
    path.write_text(json.dumps(m))
    scan = pqindex.dataset(str(root)).scan(where="id = 3")
    assert scan.to_table()["id"].to_pylist() == [3]
    assert "manifest" not in scan.report.files_skipped


def test_manifest_replaced_between_listing_and_reading(
    lake: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    root = _copy(lake, tmp_path / "race")
    ds = pqindex.dataset(str(root))
    listed = ds.discovery  # the listing is taken now
    # a writer adds a file, rewrites another and refreshes the manifest
    t = pq.read_table(root / "part-004.parquet")
    pq.write_table(t.slice(0, 10), root / "part-004.parquet")
    pq.write_table(t, root / "part-new.parquet")
    write_manifest(str(root))
    scan = ds.scan(where="id BETWEEN 800 AND 1000")
    got = scan.to_table()
    # the same as a plan without any manifest over the same listing
    ref = pqindex.dataset([f.path for f in listed.files]).to_table(
        where="id BETWEEN 800 AND 1000")
    diff.assert_same_rows(got, ref, "manifest replaced after the listing")
    assert got["id"].to_pylist() == [*range(800, 810), 1000]  # part-004 is 10 rows now
    # entries of unchanged files still prune; the rewritten one is read from its footer
    assert scan.report.files_skipped["manifest"] == FILES - 2


def test_cli_writes_and_refreshes(lake: tuple[Path, pa.Table], tmp_path: Path) -> None:
    from click.testing import CliRunner

    from pqindex.cli import cli

    root = _copy(lake, tmp_path / "cli", manifest=False)
    res = CliRunner().invoke(cli, ["manifest", str(root)])
    assert res.exit_code == 0, res.output
    assert f"{FILES} file(s)" in res.output
    assert pqindex.dataset(str(root)).scan(where="id = 5").report.files_skipped == {}
    scan = pqindex.dataset(str(root)).scan(where="id = 5")
    scan.to_table()
    assert scan.report.files_skipped["manifest"] == FILES - 1
    bad = CliRunner().invoke(cli, ["manifest", str(tmp_path / "absent")])
    assert bad.exit_code != 0 and "Traceback" not in bad.output
    one = CliRunner().invoke(cli, ["manifest", str(root / "part-000.parquet")])
    assert one.exit_code != 0 and "not one file" in one.output
    # pqindex index on the directory rewrites the files and refreshes the manifest
    res = CliRunner().invoke(cli, ["index", str(root), "--distinct", "i16"])
    assert res.exit_code == 0, res.output
    m = json.loads((root / MANIFEST_NAME).read_text())
    assert all(f["bytes"] == os.path.getsize(root / f["path"]) for f in m["files"])
    assert {(s["kind"], s["column"]) for f in m["files"] for s in f["summaries"]} == {
        ("distinct", "i16")}
    scan = pqindex.dataset(str(root)).scan(where="id = 5")
    assert scan.to_table()["id"].to_pylist() == [5]
    assert scan.report.files_skipped["manifest"] == FILES - 1


def test_hive_partitioned_lake_same_rows(tmp_path: Path) -> None:
    root = scan_fixtures.write_hive_tree(tmp_path / "hive", rows_per_file=200)
    m = write_manifest(str(root))
    assert all("=" in f["path"] for f in m["files"])
    files = pqindex.dataset(str(root)).files
    table = scan_fixtures.hive_table_with_partitions(root, files)
    case = diff.Case(root, table, [*PRED_COLUMNS, "year", "month", "region"])
    rng = random.Random(11)
    gen = diff.Generator(case.columns, rng)
    pruned = 0
    for _ in range(24):
        pred = gen.tree()
        expected = table.take(pa.array(case.expected_rows(pred), pa.int64()))
        scan = pqindex.dataset(str(root)).scan(where=pred.pq())
        diff.assert_same_rows(scan.to_table(), expected, f"where {pred.pq()}")
        pruned += scan.report.files_skipped.get("manifest", 0)
    scan = pqindex.dataset(str(root)).scan(where="id = 5 AND year >= 2000")
    assert scan.to_table()["id"].to_pylist() == [5]
    assert scan.report.files_skipped["manifest"] + scan.report.files_skipped["partition"] == (
        len(files) - 1)


def test_put_object_create_and_overwrite(
    s3: S3Endpoint, tmp_path: Path  # noqa: F811
) -> None:
    from pqindex.io.errors import StorageError
    from pqindex.io.objects import get_object, put_object

    bucket = s3.new_bucket("put")
    opts = s3.storage_options()
    for url in (str(tmp_path / "obj.json"), f"s3://{bucket}/a/obj.json"):
        assert get_object(url, opts) is None
        put_object(url, b"one", opts, mode="create")
        with pytest.raises(StorageError):
            put_object(url, b"two", opts, mode="create")
        assert get_object(url, opts) == b"one"
        put_object(url, b"three", opts)
        assert get_object(url, opts) == b"three"
    assert [p.name for p in tmp_path.iterdir()] == ["obj.json"]  # no temporary left


def test_spark_commit_writes_a_manifest_the_planner_uses(tmp_path: Path) -> None:
    from pqindex.spark.commit import commit_job, job_dir, load_manifest

    dest = tmp_path / "out"
    staged = Path(job_dir(str(dest), "job1"))
    staged.mkdir(parents=True)
    files = []
    for k in range(4):
        p = staged / f"part-{k}.parquet"
        pq.write_table(pa.table({"id": pa.array(np.arange(k * 100, k * 100 + 100))}), p)
        files.append({"staged": str(p), "path": f"part-{k}.parquet", "rows": 100,
                      "bytes": p.stat().st_size, "key_range": {"id": [k * 100, k * 100 + 99]}})
    commit_job(str(dest), "job1", files, mode="error", info={"sort_by": ["id"]})
    m = load_manifest(str(dest))
    assert m is not None and m["sort_by"] == ["id"] and m["rows"] == 400
    assert all(f["key_range"] and f["columns"][0]["min"] for f in m["files"])
    scan = pqindex.dataset(str(dest)).scan(where="id = 250")
    assert scan.to_table()["id"].to_pylist() == [250]
    assert scan.report.files_skipped["manifest"] == 3


# ------------------------------------------------------------------ S3


def _upload(ep: S3Endpoint, bucket: str, prefix: str, root: Path) -> str:
    for p in sorted(root.rglob("*")):
        if p.is_file():
            ep.put(bucket, f"{prefix}/{p.relative_to(root).as_posix()}", p.read_bytes())
    return f"s3://{bucket}/{prefix}"


@pytest.fixture(scope="module")
def s3_lake(s3: S3Endpoint, lake: tuple[Path, pa.Table],  # noqa: F811
            tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The lake on S3 twice: with a manifest written there by pqindex, and without."""
    plain = _copy(lake, tmp_path_factory.mktemp("s3plain") / "lake", manifest=False)
    bucket = s3.new_bucket("manifest")
    with_m = _upload(s3, bucket, "with", plain)
    write_manifest(with_m, s3.storage_options())
    without = _upload(s3, bucket, "without", plain)
    return with_m, without


def test_s3_same_rows_and_pruned_files_cost_nothing(
    s3: S3Endpoint, s3_lake: tuple[str, str], lake: tuple[Path, pa.Table]  # noqa: F811
) -> None:
    with_m, without = s3_lake
    opts = s3.storage_options()
    table = lake[1]
    case = diff.Case(None, table, PRED_COLUMNS)
    rng = random.Random(7)
    gen = diff.Generator(case.columns, rng)
    for _ in range(12):
        pred = gen.tree()
        expected = table.take(pa.array(case.expected_rows(pred), pa.int64()))
        for url in (with_m, without):
            got = pqindex.dataset(url, storage_options=opts).to_table(where=pred.pq())
            diff.assert_same_rows(got, expected, f"{url}: where {pred.pq()}")
    metadata_cache().clear()
    s3.reset_log()
    scan = pqindex.dataset(with_m, storage_options=opts).scan(where="id = 1234")
    assert scan.to_table()["id"].to_pylist() == [1234]
    keys = [r.path.split("/", 2)[2] for r in s3.requests if r.query == "" or r.range]
    assert {k for k in keys if k.endswith(".parquet")} == {"with/part-006.parquet"}
    assert sum(1 for r in s3.requests if r.query.startswith("list-type=2")) == 1
    assert keys.count(f"with/{MANIFEST_NAME}") == 1


def test_s3_stale_and_concurrent_rewrite(
    s3: S3Endpoint, lake: tuple[Path, pa.Table], tmp_path: Path  # noqa: F811
) -> None:
    root = _copy(lake, tmp_path / "s3stale", manifest=False)
    bucket = s3.new_bucket("stale")
    url = _upload(s3, bucket, "t", root)
    opts = s3.storage_options()
    write_manifest(url, opts)
    # stale: part-002 replaced with other ids (other size and ETag)
    t = pq.read_table(root / "part-002.parquet")
    t = t.set_column(0, "id", pa.array(np.arange(70_000, 70_000 + t.num_rows), pa.int64()))
    sink = pa.BufferOutputStream()
    pq.write_table(t, sink)
    s3.put(bucket, "t/part-002.parquet", sink.getvalue().to_pybytes())
    metadata_cache().clear()
    got = pqindex.dataset(url, storage_options=opts).to_table(where="id = 70003")
    assert got["id"].to_pylist() == [70003]
    # concurrent: the manifest is replaced by a corrupt one after the listing. Its
    # bytes came with the LIST (fetched beside the first page): that version is used.
    ds = pqindex.dataset(url, storage_options=opts)
    disc = ds.discovery
    assert disc.manifest is not None and disc.manifest_data is not None
    s3.put(bucket, f"t/{MANIFEST_NAME}", b'{"version": 1, "files": [')
    scan = ds.scan(where="id = 70003 OR id = 5")
    assert sorted(scan.to_table()["id"].to_pylist()) == [5, 70003]
    assert not scan.report.warnings
    # A listing that did not bring it (Spark's discovery) GETs it: the corrupt one now.
    ds = pqindex.dataset(url, storage_options=opts,
                         discovery=dataclasses.replace(disc, manifest_data=None))
    scan = ds.scan(where="id = 70003 OR id = 5")
    assert sorted(scan.to_table()["id"].to_pylist()) == [5, 70003]
    assert any("manifest not used" in w for w in scan.report.warnings)
    # and a new listing sees the corrupt one too
    scan = pqindex.dataset(url, storage_options=opts).scan(where="id = 70003 OR id = 5")
    assert sorted(scan.to_table()["id"].to_pylist()) == [5, 70003]
    assert any("manifest not used" in w for w in scan.report.warnings)


def test_s3_many_files_one_list_one_get_plus_survivors(
    s3: S3Endpoint, tmp_path: Path  # noqa: F811
) -> None:
    n = 500
    bucket = s3.new_bucket("many")
    client = s3.boto3()
    for k in range(n):
        sink = pa.BufferOutputStream()
        pq.write_table(pa.table({"id": pa.array(np.arange(k * 20, k * 20 + 20)),
                                 "v": pa.array([f"v{k}"] * 20)}), sink)
        client.put_object(Bucket=bucket, Key=f"lake/f{k:04d}.parquet",
                          Body=sink.getvalue().to_pybytes())
    url = f"s3://{bucket}/lake"
    opts = s3.storage_options()
    write_manifest(url, opts)
    metadata_cache().clear()
    s3.reset_log()
    s3.delay = 0.05  # a wave's requests overlap for sure: the proxy counts waves
    try:
        ds = pqindex.dataset(url, storage_options=opts)
        scan = ds.scan(where="id IN (4321, 9005)")
        assert sorted(scan.to_table()["id"].to_pylist()) == [4321, 9005]
    finally:
        s3.delay = 0.0
    reqs = s3.requests
    lists = [r for r in reqs if r.query.startswith("list-type=2")]
    manifest_gets = [r for r in reqs if r.path.endswith(MANIFEST_NAME)]
    touched = {r.path.rsplit("/", 1)[1] for r in reqs if r.path.endswith(".parquet")}
    assert len(lists) == 1 and len(manifest_gets) == 1
    assert touched == {"f0216.parquet", "f0450.parquet"}
    # The report counts every request, the LIST and the manifest GET included: the
    # GET rides with the LIST, then the two files' tails (each holds its whole file).
    assert len(reqs) == scan.report.requests == 4
    assert scan.report.round_trips == s3.waves == 2
    # later scans of the same dataset: no LIST or manifest again, and never a
    # negative count (regression: the stand-in's waves were taken from the open file)
    for columns, where in ((["v"], None), (["id"], "id IN (4321, 9005)"), (["v"], None)):
        s3.reset_log()
        again = ds.scan(columns=columns, where=where)
        again.to_table()
        assert again.report.requests == len(s3.requests)
        assert 0 <= again.report.round_trips <= max(1, s3.waves)
    # without the manifest every footer is read
    client.delete_object(Bucket=bucket, Key=f"lake/{MANIFEST_NAME}")
    metadata_cache().clear()
    s3.reset_log()
    scan = pqindex.dataset(url, storage_options=opts).scan(where="id IN (4321, 9005)")
    assert sorted(scan.to_table()["id"].to_pylist()) == [4321, 9005]
    assert len({r.path for r in s3.requests if r.path.endswith(".parquet")}) == n


def test_s3_cli_manifest(s3: S3Endpoint, lake: tuple[Path, pa.Table], tmp_path: Path) -> None:  # noqa: F811
    from click.testing import CliRunner

    from pqindex.cli import cli

    root = _copy(lake, tmp_path / "s3cli", manifest=False)
    bucket = s3.new_bucket("cli")
    url = _upload(s3, bucket, f"d{uuid.uuid4().hex[:6]}", root)
    opts = [a for k, v in s3.storage_options().items() for a in ("--storage-option", f"{k}={v}")]
    res = CliRunner().invoke(cli, ["manifest", url, *opts])
    assert res.exit_code == 0, res.output
    key = url.split("/", 3)[3] + "/" + MANIFEST_NAME
    body = s3.boto3().get_object(Bucket=bucket, Key=key)["Body"].read()
    m = parse_manifest(body, key)
    assert len(m.entries) == FILES and all(e.etag for e in m.entries.values())
