"""Finding a dataset's files and their hive-style partition values.

``key=value`` directory names become partition columns; their type is inferred
over all files (integers when every value is one, strings otherwise), as
pyarrow's hive partitioning does. Files and directories whose names start with
``_`` or ``.`` (``_SUCCESS``, ``_metadata``, ``.crc``) are not data.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pqindex.errors import UserInputError

__all__ = ["DataFile", "Discovery", "discover"]


@dataclass(frozen=True, slots=True)
class DataFile:
    """One Parquet file of a dataset and the partition values its path carries."""

    path: str
    partition: tuple[tuple[str, str], ...] = ()  # raw (key, value) from the path


@dataclass(frozen=True, slots=True)
class Discovery:
    """The files of a dataset and the typed partition columns."""

    files: tuple[DataFile, ...]
    partition_columns: tuple[str, ...] = ()
    partition_types: dict[str, str] = field(default_factory=dict)  # "int64" or "string"

    def partition_values(self, f: DataFile) -> dict[str, Any]:
        """Typed partition values of one file (None for the hive null marker)."""
        out: dict[str, Any] = {}
        raw = dict(f.partition)
        for k in self.partition_columns:
            v = raw.get(k)
            if v is None or v == "__HIVE_DEFAULT_PARTITION__":
                out[k] = None
            elif self.partition_types.get(k) == "int64":
                out[k] = int(v)
            else:
                out[k] = v
        return out


def _is_data_name(name: str) -> bool:
    return not (name.startswith(("_", ".")) or name.endswith((".crc", ".tmp")))


def _hive_parts(rel_dirs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    parts = []
    for d in rel_dirs:
        if "=" in d:
            k, _, v = d.partition("=")
            parts.append((urllib.parse.unquote(k), urllib.parse.unquote(v)))
    return tuple(parts)


def _walk_local(root: str) -> list[DataFile]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if _is_data_name(d))
        rel = os.path.relpath(dirpath, root)
        rel_dirs = [] if rel == "." else rel.split(os.sep)
        for fn in sorted(filenames):
            if _is_data_name(fn):
                out.append(DataFile(os.path.join(dirpath, fn), _hive_parts(rel_dirs)))
    return out


def _walk_fsspec(url: str) -> list[DataFile]:
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    proto = url.split("://", 1)[0]
    out = []
    for p in sorted(fs.find(root)):
        rel = p[len(root) :].strip("/").split("/")
        if not all(_is_data_name(x) for x in rel):
            continue
        out.append(DataFile(f"{proto}://{p}", _hive_parts(rel[:-1])))
    return out


def _infer_type(values: Iterable[str]) -> str:
    seen = False
    for v in values:
        if v == "__HIVE_DEFAULT_PARTITION__":
            continue
        seen = True
        try:
            int(v)
        except ValueError:
            return "string"
    return "int64" if seen else "string"


def discover(source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> Discovery:
    """The files of a file, a directory tree, or a list of either."""
    items = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    if not items:
        raise UserInputError("no paths given")
    files: list[DataFile] = []
    for item in items:
        p = os.fspath(item)
        if "://" in p and not p.startswith("file://"):
            import fsspec

            fs, fp = fsspec.core.url_to_fs(p)
            if fs.isdir(fp):
                files += _walk_fsspec(p)
            elif fs.exists(fp):
                files.append(DataFile(p))
            else:
                raise UserInputError("no such file or directory", path=p)
            continue
        if p.startswith("file://"):
            p = p[len("file://") :]
        if os.path.isdir(p):
            files += _walk_local(p)
        elif os.path.exists(p):
            files.append(DataFile(p))
        else:
            raise UserInputError("no such file or directory", path=p)
    if not files:
        raise UserInputError("no data files found", path=os.fspath(items[0]))
    keys: list[str] = []
    for f in files:
        for k, _ in f.partition:
            if k not in keys:
                keys.append(k)
    types = {k: _infer_type(v for f in files for kk, v in f.partition if kk == k) for k in keys}
    return Discovery(tuple(files), tuple(keys), types)
