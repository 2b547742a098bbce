"""The exception hierarchy: one root, every message names where it happened.

Also the error boundary: ``translate`` turns a foreign exception (``OSError``,
pyarrow's, ``RecursionError``, ``UnicodeError``, ...) into a ``PqIndexError``
subclass, ``located`` adds where it happened, and ``public_api`` applies both at
the entry points of the library, so nothing else reaches a user.
"""

from __future__ import annotations

import errno
import functools
import inspect
import struct
import zlib
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import pyarrow as pa

__all__ = [
    "CorruptFileError",
    "InternalError",
    "PqIndexError",
    "StorageError",
    "UnsupportedError",
    "UserInputError",
    "located",
    "public_api",
    "translate",
]

F = TypeVar("F", bound=Callable[..., Any])


class PqIndexError(Exception):
    """Root of every error pqindex raises on purpose.

    ``path``, ``row_group``, ``column`` and ``offset`` say where the problem is,
    when known; they are also part of the message.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        row_group: int | None = None,
        column: str | None = None,
        offset: int | None = None,
    ) -> None:
        self.reason = message
        self.path = path
        self.row_group = row_group
        self.column = column
        self.offset = offset
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.path is not None:
            where.append(self.path)
        if self.row_group is not None:
            where.append(f"row group {self.row_group}")
        if self.column is not None:
            where.append(f"column {self.column!r}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{': '.join([', '.join(where), self.reason]) if where else self.reason}"

    def located(
        self,
        *,
        path: str | None = None,
        row_group: int | None = None,
        column: str | None = None,
        offset: int | None = None,
    ) -> PqIndexError:
        """A copy of this error with missing location parts filled in."""
        err = type(self).__new__(type(self))
        PqIndexError.__init__(
            err,
            self.reason,
            path=self.path if self.path is not None else path,
            row_group=self.row_group if self.row_group is not None else row_group,
            column=self.column if self.column is not None else column,
            offset=self.offset if self.offset is not None else offset,
        )
        return err

    def with_path(self, path: str) -> PqIndexError:
        """A copy of this error naming ``path`` instead of its own (a temporary file)."""
        err = type(self).__new__(type(self))
        PqIndexError.__init__(
            err, self.reason, path=path, row_group=self.row_group, column=self.column,
            offset=self.offset,
        )
        return err


class CorruptFileError(PqIndexError):
    """The file is truncated, damaged, or not Parquet at all."""


class UnsupportedError(PqIndexError):
    """A valid file uses a feature pqindex does not handle (encryption, for instance)."""


class UserInputError(PqIndexError):
    """A bad argument: unknown column, unparsable predicate, literal of the wrong type."""


class StorageError(PqIndexError):
    """Reading or writing failed below pqindex: disk full, I/O error, connection lost."""


class InternalError(PqIndexError):
    """An unexpected failure inside pqindex: a bug. The original exception is the cause."""


# A path problem is the caller's; any other errno is the storage's.
_USER_ERRNOS = frozenset({
    errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM, errno.EEXIST,
    errno.ENAMETOOLONG, errno.ELOOP, errno.EROFS, errno.EXDEV,
})

# Exceptions that decoding damaged bytes can raise from pyarrow, numpy or the codecs.
DECODE_ERRORS: tuple[type[BaseException], ...] = (
    pa.ArrowException, OSError, ValueError, KeyError, IndexError, TypeError, OverflowError,
    EOFError, struct.error, zlib.error, UnicodeError, AssertionError, ZeroDivisionError,
)


def translate(
    exc: BaseException,
    *,
    default: type[PqIndexError] = InternalError,
    what: str = "",
    path: str | None = None,
    row_group: int | None = None,
    column: str | None = None,
    offset: int | None = None,
) -> PqIndexError:
    """``exc`` as a ``PqIndexError`` subclass, located where known.

    A ``PqIndexError`` keeps its class; a file system error is ``UserInputError``
    (missing file, permission) or ``StorageError``; pyarrow's "not implemented" is
    ``UnsupportedError``; runaway recursion is ``UserInputError`` (a predicate nested
    too deeply); anything else becomes ``default``. ``what`` prefixes the message
    ("cannot decode", ...).
    """
    where: dict[str, Any] = {"path": path, "row_group": row_group, "column": column,
                             "offset": offset}
    if isinstance(exc, PqIndexError):
        return exc.located(**where)
    prefix = f"{what}: " if what else ""
    cls: type[PqIndexError] = default
    if isinstance(exc, RecursionError):
        return UserInputError(f"{prefix}input nested too deeply to process", **where)
    if isinstance(exc, MemoryError):
        return UnsupportedError(f"{prefix}out of memory", **where)
    if isinstance(exc, pa.ArrowNotImplementedError):
        cls = UnsupportedError
    elif isinstance(exc, OSError) and exc.errno is not None:
        cls = UserInputError if exc.errno in _USER_ERRNOS else StorageError
        filename = exc.filename if isinstance(exc.filename, str) else None
        message = exc.strerror or str(exc)
        return cls(f"{prefix}{message}", **{**where, "path": filename or path})
    elif isinstance(exc, UnicodeError) and default is InternalError:
        cls = UserInputError
    detail = str(exc) or type(exc).__name__
    if cls is InternalError:
        detail = f"{type(exc).__name__}: {detail}"
    return cls(f"{prefix}{detail}", **where)


class _Located:
    __slots__ = ("column", "default", "offset", "path", "row_group", "what")

    def __init__(self, default: type[PqIndexError], what: str, path: str | None,
                 row_group: int | None, column: str | None, offset: int | None) -> None:
        self.default, self.what, self.path = default, what, path
        self.row_group, self.column, self.offset = row_group, column, offset

    def __enter__(self) -> None:
        return None

    def __exit__(self, tp: type[BaseException] | None, e: BaseException | None,
                 tb: Any) -> Literal[False]:
        if e is None or isinstance(e, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            return False
        new = translate(e, default=self.default, what=self.what, path=self.path,
                        row_group=self.row_group, column=self.column, offset=self.offset)
        if new is e:
            return False
        raise new from (e.__cause__ if isinstance(e, PqIndexError) else e)


def located(
    *,
    default: type[PqIndexError] = InternalError,
    what: str = "",
    path: str | None = None,
    row_group: int | None = None,
    column: str | None = None,
    offset: int | None = None,
) -> _Located:
    """Inside: any exception leaves as a located ``PqIndexError`` (see ``translate``).
    A plain context manager, not a generator's: entered a few times per file."""
    return _Located(default, what, path, row_group, column, offset)


def public_api(fn: F) -> F:
    """The error boundary of one public entry point (a function or a generator):
    whatever escapes is a ``PqIndexError``; ``InternalError`` for the unexpected."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen_wrapper(*args: Any, **kwargs: Any) -> Any:
            with located():
                yield from fn(*args, **kwargs)

        return gen_wrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with located():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
