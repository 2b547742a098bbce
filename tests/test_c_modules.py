"""The optional C modules are built where a compiler is.

setup.py builds them with ``optional=True``: a module that fails to compile only
warns, and the pure-Python or numpy code takes over, slower but right. This test
makes such a failure visible: with a C compiler on the machine, every module
must import and offer what its Python side looks for.
"""

from __future__ import annotations

import importlib
import os
import shutil

import pytest

MODULES = {
    "pqindex.format._compact": ["decode"],
    "pqindex.format._plain": ["split"],
    "pqindex.scan._snappy": ["gather", "decompress_many"],
    "pqindex.scan._hybrid": ["find_many", "decode", "decode_at", "dict_sum"],
}


@pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")),
                    reason="no C compiler: the pure-Python code is used")
@pytest.mark.skipif(os.environ.get("PQINDEX_PURE_PYTHON", "") not in ("", "0"),
                    reason="PQINDEX_PURE_PYTHON is set")
@pytest.mark.parametrize("name", sorted(MODULES))
def test_the_c_module_is_built(name: str) -> None:
    module = importlib.import_module(name)
    missing = [f for f in MODULES[name] if not hasattr(module, f)]
    assert not missing, f"{name} lacks {missing}: rebuild it (pip install -e .)"
