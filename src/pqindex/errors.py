"""The exception hierarchy: one root, every message names where it happened."""

from __future__ import annotations


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
