"""A :class:`ByteSource` as a read-only Python file object, for pyarrow.

pyarrow opens local paths itself but not objects of a store configured by
pqindex's storage options; handing it this file object makes its reads go
through the source (counted, and with the source's credentials).
"""

from __future__ import annotations

import io
from typing import Any

from pqindex.io.source import ByteSource, LocalFileSource

__all__ = ["SourceReader", "for_pyarrow"]


class SourceReader(io.RawIOBase):
    """``source`` as a seekable, readable file object."""

    def __init__(self, source: ByteSource) -> None:
        self._src = source
        self._size = source.size()
        self._pos = 0

    def read(self, size: int | None = -1) -> bytes | memoryview:
        # memoryview: a subclass may hand pyarrow bytes it holds without a copy.
        n = self._size - self._pos if size is None or size < 0 else min(size,
                                                                         self._size - self._pos)
        if n <= 0:
            return b""
        data = self._src.read(self._pos, n)
        self._pos += n
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        self._pos = pos if whence == 0 else self._pos + pos if whence == 1 else self._size + pos
        return self._pos

    def tell(self) -> int:
        return self._pos


def for_pyarrow(path: str, source: ByteSource) -> Any:
    """What to hand pyarrow for the file at ``path``: a local file opened through the
    descriptor ``source`` holds (the version its footer came from, never the path
    opened again), else a file object over ``source``."""
    if isinstance(source, LocalFileSource) and source.native_readable:
        return source.native_file()
    if "://" in path and not path.startswith("file://"):
        return SourceReader(source)
    return path
