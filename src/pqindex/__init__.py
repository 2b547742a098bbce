"""pqindex: selective reads of Parquet through every index the format offers."""

from pqindex.errors import CorruptFileError, PqIndexError, UnsupportedError, UserInputError
from pqindex.format.file import ParquetFile
from pqindex.io.source import IOStats

__all__ = [
    "CorruptFileError",
    "IOStats",
    "ParquetFile",
    "PqIndexError",
    "UnsupportedError",
    "UserInputError",
]
