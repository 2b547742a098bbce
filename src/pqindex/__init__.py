"""pqindex: selective reads of Parquet through every index the format offers."""

from pqindex.dataset import Dataset, Scan, dataset
from pqindex.dataset.indexing import add_indexes
from pqindex.errors import CorruptFileError, PqIndexError, UnsupportedError, UserInputError
from pqindex.expr import col, lit
from pqindex.format.file import ParquetFile
from pqindex.io.source import IOStats
from pqindex.write.writer import Writer, WriteResult, write_table

__all__ = [
    "CorruptFileError",
    "Dataset",
    "IOStats",
    "ParquetFile",
    "PqIndexError",
    "Scan",
    "UnsupportedError",
    "UserInputError",
    "WriteResult",
    "Writer",
    "add_indexes",
    "col",
    "dataset",
    "lit",
    "write_table",
]
