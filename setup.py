"""Builds the optional C modules (Thrift decoder, snappy gather); all metadata
lives in pyproject.toml.

optional=True: without a compiler the build only warns and thrift.py falls
back to its pure-Python decoder, scan/decompress.py to whole-page snappy.
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
            "pqindex.scan._snappy",
            ["src/pqindex/scan/_snappy.c"],
            optional=True,
        ),
    ]
)
