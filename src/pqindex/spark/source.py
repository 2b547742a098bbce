"""The ``"pqindex"`` Python data source: Spark writes through pqindex's writer, and
reads through pqindex's reader (``reader()``, see :mod:`pqindex.spark.reader`).

``writer()`` runs on the driver and fixes the job id; the writer object is
pickled into every task and into the process that runs ``commit``/``abort``,
so those share nothing but that object, the commit messages and the files.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from pqindex.errors import UserInputError
from pqindex.io.source import is_object_store_url
from pqindex.spark.commit import abort_job, commit_job, data_files
from pqindex.spark.key_index import commit_hook, key_columns, task_keys
from pqindex.spark.reader import GUARD, PqIndexReader
from pqindex.spark.remote_commit import (
    abort_job_remote,
    commit_job_remote,
    data_objects,
    manifest_etag,
)
from pqindex.spark.task import TaskOptions, parse_options, write_task

__all__ = ["PqIndexDataSource", "PqIndexWriter", "TaskCommit"]


@dataclass
class TaskCommit(WriterCommitMessage):
    """One task's staged files (see ``task.write_task`` for the entries)."""

    task_dir: str
    files: list[dict[str, Any]] = field(default_factory=list)
    keys: list[tuple[str, dict[str, bytes]]] = field(default_factory=list)  # key index


class PqIndexDataSource(DataSource):
    """``df.write.format("pqindex").option("sort_by", "k").save(path)``."""

    @classmethod
    def name(cls) -> str:
        return "pqindex"

    def schema(self) -> Any:
        """Spark's types for pqindex's Arrow schema of the dataset (when none is given)."""
        import json

        from pyspark.sql.pandas.types import from_arrow_schema

        import pqindex
        from pqindex.spark.secrets import reveal

        options = {str(k): str(v) for k, v in dict(self.options).items()}
        path = options.get("path")
        if not path:
            raise UserInputError("the pqindex data source needs a path: .load(path)")
        so = reveal(options.get("storage_options"))
        with pqindex.dataset(path, storage_options=so) as ds:
            schema = ds.schema
        if "columns" in options:
            schema = pa.schema([schema.field(c) for c in json.loads(options["columns"])])
        if options.get("guard", "").lower() == "true":  # see reader.GUARD
            schema = schema.append(pa.field(GUARD, pa.int32()))
        return from_arrow_schema(schema)

    def reader(self, schema: Any) -> PqIndexReader:
        """``spark.read.format("pqindex").option("where", ...).load(path)`` (see spark/reader.py)."""
        options = {str(k): str(v) for k, v in dict(self.options).items()}
        return PqIndexReader(options, schema)

    def writer(self, schema: Any, overwrite: bool) -> PqIndexWriter:
        options = {str(k): str(v) for k, v in dict(self.options).items()}
        return PqIndexWriter(options, list(schema.fieldNames()), overwrite)


class PqIndexWriter(DataSourceArrowWriter):
    def __init__(self, options: dict[str, str], columns: Sequence[str], overwrite: bool) -> None:
        path = options.get("path")
        if not path:
            raise UserInputError("the pqindex data source needs a path: .save(path)")
        if path.startswith("file:"):
            path = path[len("file:") :].lstrip("/")
            path = "/" + path
        self.options = parse_options(options)
        self.key_index = key_columns(options)
        self.remote = is_object_store_url(path)
        self.base_etag: str | None = None
        if "://" in path and not self.remote:
            raise UserInputError("the pqindex data source writes local paths and object-store "
                                 "URLs (s3://, gs://, az://, ...)", path=path)
        # An object-store destination stays a URL; a local one becomes absolute.
        self.dest = path.rstrip("/") if self.remote else os.path.abspath(path)
        self.mode = self.options.mode or ("overwrite" if overwrite else "append")
        if overwrite and self.mode != "overwrite":
            raise UserInputError(f"Spark asked for overwrite but option mode is {self.mode!r}")
        self.job_id = self.options.job_id or uuid.uuid4().hex
        self.created_dest = not self.remote and not os.path.exists(self.dest)
        missing = [
            c
            for c in [c for c, _ in self.options.sort_by] + self.options.partition_by
            if c not in columns
        ]
        if missing:
            raise UserInputError(
                f"no column {missing[0]!r} to sort or partition by", path=self.dest
            )
        if self.options.partition_by and len(self.options.partition_by) == len(columns):
            raise UserInputError("partition_by cannot name every column", path=self.dest)
        if self.remote:
            so = self.options.storage_options
            if self.mode == "error" and data_objects(self.dest, so):
                raise UserInputError(
                    "the destination already holds data (mode='error')", path=self.dest
                )
            # The manifest this job starts from: its commit succeeds only if unchanged.
            self.base_etag = manifest_etag(self.dest, so)
        elif self.mode == "error" and data_files(self.dest):
            raise UserInputError(
                "the destination already holds data (mode='error')", path=self.dest
            )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        attempt = ctx.attemptNumber() if ctx is not None else 0
        task_dir, files = write_task(
            iterator,
            dest=self.dest,
            job_id=self.job_id,
            partition_id=pid,
            attempt=attempt,
            options=self.options,
        )
        keys = (task_keys(files, self.key_index, self.options.storage_options)
                if self.key_index else [])
        return TaskCommit(task_dir, files, keys)

    def _key_index_hook(self, messages: list[WriterCommitMessage | None]) -> Any:
        if not self.key_index:
            return None
        from pqindex.dataset.key_index import previous_index

        so = self.options.storage_options
        previous = previous_index(self.dest, so)  # extended, or its shards dropped after
        keys = [k for m in messages if isinstance(m, TaskCommit) for k in m.keys]
        return commit_hook(self.dest, self.key_index, keys, previous, self.remote, so,
                           extend=self.mode != "overwrite")

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        files = [f for m in messages if isinstance(m, TaskCommit) for f in m.files]
        finish = self._key_index_hook(messages)
        if self.remote:
            commit_job_remote(self.dest, self.job_id, files, mode=self.mode,
                              info=_info(self.options), base_etag=self.base_etag,
                              storage_options=self.options.storage_options, finish=finish)
        else:
            commit_job(self.dest, self.job_id, files, mode=self.mode,
                       info=_info(self.options), finish=finish)
        if finish is not None:
            finish.drop_superseded()  # only now: the committed manifest no longer names them

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.remote:
            abort_job_remote(self.dest, self.job_id, self.options.storage_options)
            return
        abort_job(self.dest, self.job_id, created_dest=self.created_dest)


def _info(options: TaskOptions) -> dict[str, Any]:
    return options.info()
