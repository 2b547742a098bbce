"""format/arrow_build: arrays, scalars and masks built from buffers equal pyarrow's
own conversions (pa.array, pa.scalar, to_pylist) on random values."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from pqindex.format.arrow_build import (
    int64_array,
    ints_of,
    key_array,
    mask_of,
    string_array,
    typed_scalar,
)

_INT64 = st.integers(-(2**63), 2**63 - 1)


def _nan_free(v: Any) -> Any:
    return "NaN" if isinstance(v, float) and v != v else v


@settings(max_examples=60, deadline=None)
@given(st.one_of(
    st.tuples(st.just("int64"), st.lists(st.one_of(st.none(), _INT64, st.integers()))),
    st.tuples(st.just("float64"), st.lists(st.one_of(st.none(), st.floats()))),
    st.tuples(st.just("binary"), st.lists(st.one_of(st.none(), st.binary(max_size=9))))))
def test_key_array_is_pa_array(case: tuple[str, list[Any]]) -> None:
    kind, values = case
    arrow = {"int64": pa.int64(), "float64": pa.float64(), "binary": pa.binary()}[kind]
    got = key_array(values, arrow)
    try:
        want = pa.array(values, arrow)
    except (OverflowError, pa.ArrowInvalid):
        assert got is None
        return
    assert got is not None
    got.validate(full=True)
    assert [_nan_free(v) for v in got.to_pylist()] == [_nan_free(v) for v in want.to_pylist()]
    assert got.null_count == want.null_count


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=6))), st.integers(0, 3))
def test_strings_and_masks(values: list[str | None], offset: int) -> None:
    arr = string_array(values)
    arr.validate(full=True)
    assert arr.to_pylist() == values
    valid = arr.is_valid()
    assert mask_of(valid).tolist() == valid.to_pylist()
    sliced = pc.equal(arr, pa.scalar("a"))[offset:]  # nulls read as False
    assert mask_of(sliced).tolist() == [bool(v) for v in sliced.to_pylist()]
    assert mask_of(pa.chunked_array([sliced, sliced], pa.bool_())).tolist() == (
        [bool(v) for v in sliced.to_pylist()] * 2)
    ints = pa.array([None if v is None else len(v) for v in values], pa.int32())[offset:]
    assert ints_of(ints, -1).tolist() == [-1 if v is None else v for v in ints.to_pylist()]
    plain = int64_array([len(v or "") for v in values])
    assert plain.to_pylist() == [len(v or "") for v in values]


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.integers(), st.floats(), st.text(max_size=5), st.binary(max_size=5),
                 st.booleans()),
       st.sampled_from([pa.int8(), pa.int32(), pa.int64(), pa.uint16(), pa.uint64(),
                        pa.float64(), pa.string(), pa.large_string(), pa.binary(),
                        pa.bool_()]))
def test_typed_scalar_is_pa_scalar(value: Any, arrow: pa.DataType) -> None:
    got = typed_scalar(value, arrow)
    if got is None:
        return  # the caller asks pa.scalar
    want = pa.scalar(value, arrow)
    assert got.type == want.type
    assert got.equals(want) or (got.as_py() != got.as_py() and want.as_py() != want.as_py())
