"""Builds the optional C modules (Thrift decoder, PLAIN BYTE_ARRAY splitter, snappy
gather, hybrid-encoding kernel); all metadata lives in pyproject.toml.

optional=True: without a compiler the build only warns and thrift.py falls
back to its pure-Python decoder, format/plain.py to its Python walk,
scan/decompress.py to whole-page snappy, scan/hybrid.py to its numpy code.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "pqindex.format._compact",
            ["src/pqindex/format/_compact.c"],
            optional=True,
        ),
        Extension(
            "pqindex.format._plain",
            ["src/pqindex/format/_plain.c"],
            optional=True,
        ),
        Extension(
            "pqindex.scan._snappy",
            ["src/pqindex/scan/_snappy.c"],
            optional=True,
        ),
        Extension(
            "pqindex.scan._hybrid",
            ["src/pqindex/scan/_hybrid.c"],
            optional=True,
        ),
    ]
)
