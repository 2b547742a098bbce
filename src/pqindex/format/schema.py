"""The schema tree of a file, rebuilt from the flattened ``SchemaElement`` list."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from pqindex.errors import CorruptFileError
from pqindex.format.structs import ColumnOrder, SchemaElement


class PhysicalType(IntEnum):
    BOOLEAN = 0
    INT32 = 1
    INT64 = 2
    INT96 = 3
    FLOAT = 4
    DOUBLE = 5
    BYTE_ARRAY = 6
    FIXED_LEN_BYTE_ARRAY = 7


class ConvertedType(IntEnum):
    UTF8 = 0
    MAP = 1
    MAP_KEY_VALUE = 2
    LIST = 3
    ENUM = 4
    DECIMAL = 5
    DATE = 6
    TIME_MILLIS = 7
    TIME_MICROS = 8
    TIMESTAMP_MILLIS = 9
    TIMESTAMP_MICROS = 10
    UINT_8 = 11
    UINT_16 = 12
    UINT_32 = 13
    UINT_64 = 14
    INT_8 = 15
    INT_16 = 16
    INT_32 = 17
    INT_64 = 18
    JSON = 19
    BSON = 20
    INTERVAL = 21


class Repetition(IntEnum):
    REQUIRED = 0
    OPTIONAL = 1
    REPEATED = 2
    VECTOR = 3


class Encoding(IntEnum):
    PLAIN = 0
    PLAIN_DICTIONARY = 2
    RLE = 3
    BIT_PACKED = 4
    DELTA_BINARY_PACKED = 5
    DELTA_LENGTH_BYTE_ARRAY = 6
    DELTA_BYTE_ARRAY = 7
    RLE_DICTIONARY = 8
    BYTE_STREAM_SPLIT = 9


class Codec(IntEnum):
    UNCOMPRESSED = 0
    SNAPPY = 1
    GZIP = 2
    LZO = 3
    BROTLI = 4
    LZ4 = 5
    ZSTD = 6
    LZ4_RAW = 7


class PageType(IntEnum):
    DATA_PAGE = 0
    INDEX_PAGE = 1
    DICTIONARY_PAGE = 2
    DATA_PAGE_V2 = 3


class BoundaryOrder(IntEnum):
    UNORDERED = 0
    ASCENDING = 1
    DESCENDING = 2


def enum_name(enum: type[IntEnum], value: int | None) -> str | None:
    """The enum member's name, ``UNKNOWN(n)`` for values this version doesn't know."""
    if value is None:
        return None
    try:
        return enum(value).name
    except ValueError:
        return f"UNKNOWN({value})"


@dataclass(frozen=True, slots=True)
class LeafColumn:
    """One leaf (primitive) column: where it is in the tree and how it is stored."""

    index: int  # position among the leaves = position in RowGroup.columns
    path: tuple[str, ...]
    element: SchemaElement
    max_definition_level: int
    max_repetition_level: int
    column_order: ColumnOrder | None  # None when the file has no column_orders
    # Derived once per leaf by the layers above (its bound order): a predicate bound
    # against this leaf keeps the same value type object query after query.
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # The dotted path, the name users write in predicates (kept: opening a file alone
    # asks it for every column chunk).
    name: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", ".".join(self.path))

    @property
    def physical_type(self) -> int:
        assert self.element.type is not None
        return self.element.type

    @property
    def nested(self) -> bool:
        """True inside a list or map (repeated ancestor): rows hold several values."""
        return self.max_repetition_level > 0


@dataclass(frozen=True, slots=True)
class Schema:
    """The root element and the leaves, in file order."""

    root: SchemaElement
    leaves: tuple[LeafColumn, ...]

    @classmethod
    def from_elements(
        cls, elements: list[SchemaElement], column_orders: list[ColumnOrder] | None
    ) -> Schema:
        """Walk the depth-first list; raise CorruptFileError if the counts don't add up."""
        if not elements:
            raise CorruptFileError("schema is empty")
        leaves: list[LeafColumn] = []
        n = len(elements)
        # Each stack entry: (children left, path, def level, rep level).
        pos = 1
        stack: list[tuple[int, tuple[str, ...], int, int]] = []
        root_children = elements[0].num_children or 0
        if root_children < 0 or root_children > n:
            raise CorruptFileError(f"schema root claims {root_children} children")
        stack.append((root_children, (), 0, 0))
        while stack:
            left, path, d, r = stack[-1]
            if left == 0:
                stack.pop()
                continue
            stack[-1] = (left - 1, path, d, r)
            if pos >= n:
                raise CorruptFileError(
                    f"schema ends after {n} elements, but its groups claim more children"
                )
            el = elements[pos]
            pos += 1
            rep = el.repetition_type
            cd = d + (1 if rep in (Repetition.OPTIONAL, Repetition.REPEATED) else 0)
            cr = r + (1 if rep == Repetition.REPEATED else 0)
            cpath = (*path, el.name or "")
            if (el.num_children is not None and el.num_children > 0) or el.type is None:
                kids = el.num_children or 0
                if kids < 0 or kids > n - pos:
                    raise CorruptFileError(f"schema group {el.name!r} claims {kids} children")
                if len(stack) > 256:
                    raise CorruptFileError("schema nesting deeper than 256")
                stack.append((kids, cpath, cd, cr))
            else:
                if el.type is None or not 0 <= el.type <= 7:
                    raise CorruptFileError(
                        f"schema leaf {'.'.join(cpath)!r} has invalid physical type {el.type}"
                    )
                order = None
                if column_orders is not None and len(leaves) < len(column_orders):
                    order = column_orders[len(leaves)]
                leaves.append(LeafColumn(len(leaves), cpath, el, cd, cr, order))
        if pos != n:
            raise CorruptFileError(f"schema has {n - pos} elements outside the tree")
        return cls(elements[0], tuple(leaves))

    def leaf(self, name: str) -> LeafColumn | None:
        """The leaf whose dotted path is ``name``, or None."""
        for leaf in self.leaves:
            if leaf.name == name:
                return leaf
        return None
