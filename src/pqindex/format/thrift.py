"""Thrift compact protocol: decode and encode typed structs, keeping unknown fields.

Each struct is a dataclass subclass of :class:`ThriftStruct` with a ``THRIFT``
table of ``(field id, attribute, type)``. Decoders are generated once per class
(plain Python source compiled with ``exec``): the footer of a large file holds
tens of thousands of fields, and a table-driven interpreter is several times
slower. Fields a class does not know, or that arrive with an unexpected wire
type, are kept as raw bytes and written back unchanged, so that re-encoding an
untouched struct reproduces its bytes exactly.

Values must fit their declared types: a varint wider than 64 bits, an i16/i32
outside its range or a field id outside i16 raises :class:`ThriftError`, as
does a list<bool> element other than 0, 1 or 2, or one list whose false
elements are written both as 0 and as 2 (its bytes could not be re-encoded).

Every length and count is checked against the bytes that remain and nesting is
bounded, so a damaged buffer raises :class:`ThriftError` instead of hanging,
recursing without end or allocating what a length field claims.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import struct as _struct
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

__all__ = [
    "BINARY",
    "BOOL",
    "DOUBLE",
    "I8",
    "I16",
    "I32",
    "I64",
    "MAX_DEPTH",
    "STRING",
    "ListOf",
    "RawField",
    "ThriftError",
    "ThriftStruct",
    "decode",
    "encode",
]

MAX_DEPTH = 64

# Compact protocol wire types.
CT_STOP = 0
CT_TRUE = 1
CT_FALSE = 2
CT_BYTE = 3
CT_I16 = 4
CT_I32 = 5
CT_I64 = 6
CT_DOUBLE = 7
CT_BINARY = 8
CT_LIST = 9
CT_SET = 10
CT_MAP = 11
CT_STRUCT = 12

_DOUBLE = _struct.Struct("<d")


class ThriftError(Exception):
    """Malformed compact-protocol bytes; ``offset`` is relative to the decoded buffer."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.reason = message
        self.offset = offset


class _Scalar:
    """A scalar field type: its name and its wire type."""

    __slots__ = ("name", "wire")

    def __init__(self, name: str, wire: int) -> None:
        self.name = name
        self.wire = wire

    def __repr__(self) -> str:
        return self.name


BOOL = _Scalar("bool", CT_TRUE)
I8 = _Scalar("i8", CT_BYTE)
I16 = _Scalar("i16", CT_I16)
I32 = _Scalar("i32", CT_I32)
I64 = _Scalar("i64", CT_I64)
DOUBLE = _Scalar("double", CT_DOUBLE)
BINARY = _Scalar("binary", CT_BINARY)
STRING = _Scalar("string", CT_BINARY)


class ListOf:
    """``list<elem>``; elem is a scalar, a struct class or another list."""

    __slots__ = ("elem",)
    wire = CT_LIST

    def __init__(self, elem: FieldType) -> None:
        self.elem = elem

    def __repr__(self) -> str:
        return f"list<{self.elem!r}>"


FieldType = _Scalar | ListOf | type["ThriftStruct"]


@dataclass(frozen=True, slots=True)
class RawField:
    """A field this version does not know: id, wire type and the value's bytes."""

    fid: int
    wire: int
    raw: bytes


@dataclass(slots=True)
class ThriftStruct:
    """Base of every Thrift struct; subclasses set ``THRIFT``."""

    THRIFT: ClassVar[tuple[tuple[int, str, Any], ...]] = ()

    # Fields kept verbatim for re-encoding; not part of equality.
    unknown_fields: tuple[RawField, ...] = field(
        default=(), kw_only=True, repr=False, compare=False
    )
    # Field ids in wire order, only when a writer did not write them ascending.
    wire_order: tuple[int, ...] | None = field(
        default=None, kw_only=True, repr=False, compare=False
    )
    # list<bool> fields whose element type was written as 2 (false) instead of 1;
    # both are valid and writers differ.
    bool_lists_typed_false: tuple[str, ...] = field(
        default=(), kw_only=True, repr=False, compare=False
    )
    # list<bool> fields whose false elements were written as 0 instead of 2; again
    # both are valid.
    bool_lists_false_zero: tuple[str, ...] = field(
        default=(), kw_only=True, repr=False, compare=False
    )

    @classmethod
    def decode(cls: type[_S], buf: bytes) -> _S:
        """Decode one struct that fills ``buf``'s prefix; trailing bytes are ignored."""
        obj, _ = decode(cls, buf, 0)
        return obj

    def encode(self) -> bytes:
        """The compact-protocol bytes of this struct."""
        return encode(self)


_S = TypeVar("_S", bound=ThriftStruct)


def _wire(t: FieldType) -> int:
    if isinstance(t, (_Scalar, ListOf)):
        return t.wire
    return CT_STRUCT


# ---------------------------------------------------------------- primitives


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            # the 10th byte holds only bit 63
            if shift < 63 or b < 2:
                return result, pos
            raise ThriftError("varint wider than 64 bits", pos)
        shift += 7
        if shift > 63:
            raise ThriftError("varint longer than 10 bytes", pos)


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def skip(buf: bytes, pos: int, wire: int, depth: int) -> int:
    """Position after one value of wire type ``wire`` starting at ``pos``."""
    if depth > MAX_DEPTH:
        raise ThriftError(f"nesting deeper than {MAX_DEPTH}", pos)
    if wire in (CT_TRUE, CT_FALSE):
        return pos
    if wire == CT_BYTE:
        buf[pos]
        return pos + 1
    if wire in (CT_I16, CT_I32, CT_I64):
        return _varint(buf, pos)[1]
    if wire == CT_DOUBLE:
        if pos + 8 > len(buf):
            raise ThriftError("double runs past the end", pos)
        return pos + 8
    if wire == CT_BINARY:
        n, pos = _varint(buf, pos)
        if n > len(buf) - pos:
            raise ThriftError(f"binary of {n} bytes runs past the end", pos)
        return pos + n
    if wire in (CT_LIST, CT_SET):
        h = buf[pos]
        pos += 1
        size, et = h >> 4, h & 15
        if size == 15:
            size, pos = _varint(buf, pos)
        if size > len(buf) - pos:
            raise ThriftError(f"list of {size} elements runs past the end", pos)
        if et in (CT_TRUE, CT_FALSE):
            return pos + size
        for _ in range(size):
            pos = skip(buf, pos, et, depth + 1)
        return pos
    if wire == CT_MAP:
        size, pos = _varint(buf, pos)
        if size == 0:
            return pos
        if 2 * size > len(buf) - pos:
            raise ThriftError(f"map of {size} entries runs past the end", pos)
        kv = buf[pos]
        pos += 1
        kt, vt = kv >> 4, kv & 15
        for _ in range(size):
            pos = _skip_elem(buf, pos, kt, depth + 1)
            pos = _skip_elem(buf, pos, vt, depth + 1)
        return pos
    if wire == CT_STRUCT:
        while True:
            h = buf[pos]
            pos += 1
            if h == CT_STOP:
                return pos
            ft = h & 15
            if not h >> 4:
                pos = _varint(buf, pos)[1]
            pos = skip(buf, pos, ft, depth + 1)
    raise ThriftError(f"unknown wire type {wire}", pos)


def _skip_elem(buf: bytes, pos: int, wire: int, depth: int) -> int:
    # Inside collections a bool is a whole byte.
    if wire in (CT_TRUE, CT_FALSE):
        buf[pos]
        return pos + 1
    return skip(buf, pos, wire, depth)


def _field_order(buf: bytes, pos: int) -> tuple[int, ...]:
    """Field ids of the struct at ``pos`` in wire order (rare path)."""
    order: list[int] = []
    last = 0
    while True:
        h = buf[pos]
        pos += 1
        if h == CT_STOP:
            return tuple(order)
        ft = h & 15
        if h >> 4:
            fid = last + (h >> 4)
        else:
            raw, pos = _varint(buf, pos)
            fid = _zigzag(raw)
        order.append(fid)
        last = fid
        pos = skip(buf, pos, ft, 1)


# ---------------------------------------------------------------- code generation

_DECODERS: dict[type[ThriftStruct], Any] = {}


def _scalar_read(t: _Scalar, target: str, ind: str) -> list[str]:
    """Lines that read one scalar element into ``target`` (collection context)."""
    if t is BOOL:
        return [f"{ind}{target} = buf[pos] == 1", f"{ind}pos += 1"]
    if t is I8:
        return [
            f"{ind}{target} = buf[pos]",
            f"{ind}pos += 1",
            f"{ind}if {target} > 127: {target} -= 256",
        ]
    if t in (I16, I32, I64):
        lines = [
            f"{ind}x = buf[pos]",
            f"{ind}pos += 1",
            f"{ind}if x > 127:",
            f"{ind}    x, pos = _varint_tail(buf, pos, x)",
        ]
        # zigzag(x) fits in n bits exactly when x < 2**n; one byte always fits
        if t is not I64:
            bits = 16 if t is I16 else 32
            lines.append(
                f"{ind}    if x >> {bits}: raise ThriftError('{t.name} value out of range', pos)"
            )
        return [*lines, f"{ind}{target} = (x >> 1) ^ -(x & 1)"]
    if t is DOUBLE:
        return [
            f"{ind}if pos + 8 > n_buf: raise ThriftError('double runs past the end', pos)",
            f"{ind}{target} = _unpack_double(buf, pos)[0]",
            f"{ind}pos += 8",
        ]
    if t in (BINARY, STRING):
        conv = ".decode('utf-8', 'surrogateescape')" if t is STRING else ""
        return [
            f"{ind}n = buf[pos]",
            f"{ind}pos += 1",
            f"{ind}if n > 127: n, pos = _varint_tail(buf, pos, n)",
            f"{ind}if n > n_buf - pos: raise ThriftError('binary of %d bytes runs past the end' % n, pos)",
            f"{ind}{target} = buf[pos:pos + n]{conv}",
            f"{ind}pos += n",
        ]
    raise AssertionError(t)


def _value_read(
    t: FieldType, target: str, ind: str, ns: dict[str, Any], uid: list[int]
) -> list[str]:
    """Lines that read a value of type ``t`` (already type-checked) into ``target``."""
    if isinstance(t, _Scalar):
        return _scalar_read(t, target, ind)
    if isinstance(t, ListOf):
        uid[0] += 1
        k = uid[0]
        et = t.elem
        lines = [
            f"{ind}h = buf[pos]",
            f"{ind}pos += 1",
            f"{ind}size_{k} = h >> 4",
            f"{ind}if size_{k} == 15: size_{k}, pos = _varint(buf, pos)",
            f"{ind}if size_{k} > n_buf - pos: raise ThriftError('list of %d elements runs past the end' % size_{k}, pos)",
        ]
        if et is BOOL:
            lines.append(f"{ind}if (h & 15) not in (1, 2): raise _Mismatch")
            lines.append(f"{ind}if (h & 15) == 2: typed_false.append({target!r})")
            lines += _bool_list_read(target, k, ind)
            return lines
        lines.append(f"{ind}if (h & 15) != {_wire(et)}: raise _Mismatch")
        lines.append(f"{ind}lst_{k} = []")
        lines.append(f"{ind}app_{k} = lst_{k}.append")
        lines.append(f"{ind}for _ in range(size_{k}):")
        lines += _value_read(et, f"e_{k}", ind + "    ", ns, uid)
        lines.append(f"{ind}    app_{k}(e_{k})")
        lines.append(f"{ind}{target} = lst_{k}")
        return lines
    # Parquet's structs have no cycles, so the nested decoder can be built first.
    ns_name = f"_dec_{t.__name__}"
    ns[ns_name] = _decoder(t)
    return [f"{ind}{target}, pos = {ns_name}(buf, pos, depth + 1)"]


def _bool_list_read(target: str, k: int, ind: str) -> list[str]:
    """Lines that read ``size_{k}`` list<bool> elements into ``target``.

    False is 2 or 0 (writers differ); the list remembers which so that it
    re-encodes exactly, and so may not mix them.
    """
    return [
        f"{ind}lst_{k} = []",
        f"{ind}app_{k} = lst_{k}.append",
        f"{ind}fb_{k} = -1",
        f"{ind}for _ in range(size_{k}):",
        f"{ind}    e_{k} = buf[pos]",
        f"{ind}    pos += 1",
        f"{ind}    if e_{k} == 1:",
        f"{ind}        app_{k}(True)",
        f"{ind}        continue",
        f"{ind}    if e_{k} != fb_{k}:",
        f"{ind}        if e_{k} > 2: raise ThriftError('list<bool> element %d is not 0, 1 or 2' % e_{k}, pos - 1)",
        f"{ind}        if fb_{k} != -1: raise ThriftError('list<bool> writes false as both 0 and 2', pos - 1)",
        f"{ind}        fb_{k} = e_{k}",
        f"{ind}    app_{k}(False)",
        f"{ind}if fb_{k} == 0: false_zero.append({target!r})",
        f"{ind}{target} = lst_{k}",
    ]


class _Mismatch(Exception):
    """A list whose element type differs from the schema: kept as an unknown field."""


def _has_bool_list(t: FieldType) -> bool:
    while isinstance(t, ListOf):
        if t.elem is BOOL:
            return True
        t = t.elem
    return False


def _decoder(cls: type[ThriftStruct]) -> Any:
    fn = _DECODERS.get(cls)
    if fn is not None:
        return fn
    ns: dict[str, Any] = {
        "cls": cls,
        "ThriftError": ThriftError,
        "_varint": _varint,
        "_varint_tail": _varint_tail,
        "_unpack_double": _DOUBLE.unpack_from,
        "_skip": skip,
        "_field_order": _field_order,
        "RawField": RawField,
        "_Mismatch": _Mismatch,
        "MAX_DEPTH": MAX_DEPTH,
    }
    uid = [0]
    names = [f.name for f in dataclasses.fields(cls) if f.init and not f.kw_only]
    table = {fid: (name, t) for fid, name, t in cls.THRIFT}
    var = {name: f"v_{i}" for i, name in enumerate(names)}
    ns["names"] = {v: k for k, v in var.items()}
    src = [
        "def decode_struct(buf, pos, depth):",
        "    if depth > MAX_DEPTH: raise ThriftError('nesting deeper than %d' % MAX_DEPTH, pos)",
        "    n_buf = len(buf)",
        "    start = pos",
    ]
    src += [f"    {v} = None" for v in var.values()]
    src.append("    unknown = None")
    # list<bool> bookkeeping only where one occurs: two lists fewer per struct
    bool_lists = any(_has_bool_list(t) for _, _, t in cls.THRIFT)
    if bool_lists:
        src += ["    typed_false = []", "    false_zero = []"]
    src += [
        "    jumbled = False",
        "    last = 0",
        "    while True:",
        "        b = buf[pos]",
        "        pos += 1",
        "        if b == 0: break",
        "        t = b & 15",
        "        d = b >> 4",
        "        if d:",
        "            fid = last + d",
        "        else:",
        "            x, pos = _varint(buf, pos)",
        "            if x > 0xFFFF: raise ThriftError('field id out of range', pos)",
        "            fid = (x >> 1) ^ -(x & 1)",
        "            if fid <= last: jumbled = True",
        "        last = fid",
        "        vstart = pos",
    ]
    first = True
    for fid in sorted(table):
        name, t = table[fid]
        kw = "if" if first else "elif"
        first = False
        target = var[name]
        if t is BOOL:
            src.append(f"        {kw} fid == {fid} and (t == 1 or t == 2):")
            src.append(f"            {target} = t == 1")
            src.append("            continue")
            continue
        src.append(f"        {kw} fid == {fid} and t == {_wire(t)}:")
        if isinstance(t, ListOf):
            src.append("            try:")
            src += _value_read(t, target, "                ", ns, uid)
            src.append("                continue")
            src.append("            except _Mismatch:")
            src.append("                pos = vstart")
        else:
            src += _value_read(t, target, "            ", ns, uid)
            src.append("            continue")
    src += [
        # Known ids are i16, so a delta-form id past 32767 can only arrive here.
        "        if fid > 32767: raise ThriftError('field id out of range', pos)",
        "        pos = _skip(buf, pos, t, depth + 1)",
        "        if unknown is None: unknown = []",
        "        unknown.append(RawField(fid, t, buf[vstart:pos]))",
        "    obj = cls(" + ", ".join(var.values()) + ")",
        "    if unknown is not None: obj.unknown_fields = tuple(unknown)",
        "    if jumbled: obj.wire_order = _field_order(buf, start)",
    ]
    if bool_lists:
        src += [
            "    if typed_false: obj.bool_lists_typed_false = tuple(names[v] for v in typed_false)",
            "    if false_zero: obj.bool_lists_false_zero = tuple(names[v] for v in false_zero)",
        ]
    src += ["    return obj, pos"]
    code = "\n".join(src)
    exec(compile(code, f"<thrift decoder {cls.__name__}>", "exec"), ns)
    fn = ns["decode_struct"]
    _DECODERS[cls] = fn
    return fn


def _varint_tail(buf: bytes, pos: int, first: int) -> tuple[int, int]:
    result = first & 0x7F
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if shift < 63 or b < 2:  # as in _varint
                return result, pos
            raise ThriftError("varint wider than 64 bits", pos)
        shift += 7
        if shift > 63:
            raise ThriftError("varint longer than 10 bytes", pos)


# ---------------------------------------------------------------- optional C decoder
#
# pqindex.format._compact decodes from a per-class spec built here; it returns
# None for inputs it leaves to the pure path (only a pos outside the buffer).
# PQINDEX_PURE_PYTHON=1 (read at import) forces the pure path.

_ACCEL_KINDS = {BOOL: 0, I8: 1, I16: 2, I32: 2, I64: 2, DOUBLE: 3, BINARY: 4, STRING: 5}
_ACCEL_SPECS: dict[type[ThriftStruct], Any] = {}


def _load_accel() -> Any:
    if os.environ.get("PQINDEX_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        mod = importlib.import_module("pqindex.format._compact")
    except ImportError:
        return None
    mod.setup(ThriftError, RawField, _field_order, MAX_DEPTH)
    return mod


def _accel_node(t: FieldType, in_list: bool) -> tuple[Any, ...]:
    if isinstance(t, ListOf):
        # the pure decoder records bool_lists_typed_false/_false_zero only for a
        # field's own list
        if in_list and t.elem is BOOL:
            raise TypeError("nested list<bool>")
        return (6, CT_LIST, _accel_node(t.elem, True))
    if isinstance(t, _Scalar):
        return (_ACCEL_KINDS[t], t.wire)
    spec = _accel_spec(t)
    if not spec:
        raise TypeError(f"no spec for {t!r}")
    return (7, CT_STRUCT, spec)


def _slot_descr(cls: type, name: str) -> Any:
    for k in cls.__mro__:
        if name in vars(k):
            return vars(k)[name]
    raise AttributeError(name)


def _build_accel_spec(cls: type[ThriftStruct]) -> Any:
    # C fills the slots itself instead of calling cls(); only sound when
    # construction does nothing else.
    init = getattr(vars(cls).get("__init__"), "__code__", None)
    if cls.__new__ is not object.__new__ or hasattr(cls, "__post_init__"):
        raise TypeError("custom construction")
    if init is None or init.co_filename != "<string>":  # not dataclass-generated
        raise TypeError("custom __init__")
    fields = dataclasses.fields(cls)
    slots = {s for k in cls.__mro__ for s in vars(k).get("__slots__", ())}
    if slots - {"__weakref__"} != {f.name for f in fields} or "__dict__" in slots:
        raise TypeError("fields are not exactly the slots")
    names = [f.name for f in fields if f.init and not f.kw_only]
    kw = []
    for f in fields:
        if not f.init or (f.kw_only and f.default is dataclasses.MISSING):
            raise TypeError(f"unsupported field {f.name}")
        if f.kw_only:
            kw.append((_slot_descr(cls, f.name), f.default))
    if len({fid for fid, _, _ in cls.THRIFT}) != len(cls.THRIFT):
        raise ValueError("duplicate field id")
    table = tuple(
        (fid, names.index(name), _accel_node(t, False), name) for fid, name, t in cls.THRIFT
    )
    special = tuple(
        _slot_descr(cls, n)
        for n in (
            "unknown_fields",
            "wire_order",
            "bool_lists_typed_false",
            "bool_lists_false_zero",
        )
    )
    return _accel.Spec(cls, tuple(_slot_descr(cls, n) for n in names), tuple(kw), special, table)


def _accel_spec(cls: type[ThriftStruct]) -> Any:
    """The class's compiled spec, or False when only the pure path can decode it."""
    spec = _ACCEL_SPECS.get(cls)
    if spec is None:
        _ACCEL_SPECS[cls] = False  # a cycle back here finds False and gives up
        try:
            spec = _build_accel_spec(cls)
        except (TypeError, ValueError, KeyError, AttributeError):
            spec = False
        _ACCEL_SPECS[cls] = spec
    return spec


_accel = _load_accel()


def decode(cls: type[_S], buf: bytes, pos: int = 0, *, track: bool = True
           ) -> tuple[_S, int]:
    """Decode a ``cls`` at ``pos``; returns it and the position after it.

    ``track=False`` (the C decoder only): the cyclic garbage collector never walks
    the decoded tree. For trees kept long and never made to hold a cycle (a cached
    footer: ~75 objects per file, which the first collection after a 1,000-file
    plan otherwise walks for ~20 ms); reference counting still frees them."""
    if not isinstance(buf, bytes):
        buf = bytes(buf)
    if _accel is not None and type(pos) is int:
        spec = _ACCEL_SPECS.get(cls)
        if spec is None:
            spec = _accel_spec(cls)
        if spec:
            res = _accel.decode(spec, buf, pos, track)
            if res is not None:
                return res  # type: ignore[no-any-return]
    return _decode_py(cls, buf, pos)


def _decode_py(cls: type[_S], buf: bytes, pos: int = 0) -> tuple[_S, int]:
    """The pure-Python decoder (``buf`` already bytes)."""
    try:
        obj, end = _decoder(cls)(buf, pos, 0)
    except IndexError:
        n = len(buf)
        raise ThriftError(f"{cls.__name__} runs past the end of {n} bytes", n) from None
    except RecursionError:
        raise ThriftError("nesting too deep", pos) from None
    return obj, end


# ---------------------------------------------------------------- encoding


def _put_varint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _put_zigzag(out: bytearray, n: int) -> None:
    _put_varint(out, (n << 1) ^ (n >> 63))


def _put_value(
    out: bytearray, t: FieldType, v: Any, bool_wire: int = CT_TRUE, false_byte: int = CT_FALSE
) -> None:
    if isinstance(t, _Scalar):
        if t is BOOL:
            out.append(CT_TRUE if v else false_byte)
        elif t is I8:
            out.append(v & 0xFF)
        elif t is DOUBLE:
            out += _DOUBLE.pack(v)
        elif t is BINARY or t is STRING:
            b = v.encode("utf-8", "surrogateescape") if isinstance(v, str) else bytes(v)
            _put_varint(out, len(b))
            out += b
        else:
            _put_zigzag(out, v)
        return
    if isinstance(t, ListOf):
        et = t.elem
        ew = bool_wire if et is BOOL else _wire(et)
        n = len(v)
        if n < 15:
            out.append((n << 4) | ew)
        else:
            out.append(0xF0 | ew)
            _put_varint(out, n)
        for e in v:
            _put_value(out, et, e, false_byte=false_byte)
        return
    _put_struct(out, v)


def _put_header(out: bytearray, fid: int, wire: int, last: int) -> None:
    d = fid - last
    if 0 < d <= 15:
        out.append((d << 4) | wire)
    else:
        out.append(wire)
        _put_zigzag(out, fid)


def _names(cls: type[ThriftStruct]) -> dict[int, str]:
    return {fid: name for fid, name, _ in cls.THRIFT}


def _put_struct(out: bytearray, obj: ThriftStruct) -> None:
    enc = _ENCODERS.get(type(obj))
    if enc is None:
        enc = _encoder(type(obj))
    enc(out, obj)


def _put_struct_generic(out: bytearray, obj: ThriftStruct) -> None:
    """Any struct: unknown fields, a recorded wire order and list<bool> styles kept."""
    cls = type(obj)
    known: dict[int, tuple[FieldType, Any]] = {}
    for fid, name, t in cls.THRIFT:
        v = getattr(obj, name)
        if v is not None:
            known[fid] = (t, v)
    unknown: dict[int, list[RawField]] = {}
    for raw in obj.unknown_fields:
        unknown.setdefault(raw.fid, []).append(raw)
    if obj.wire_order is not None:
        order = list(dict.fromkeys(obj.wire_order))
        order += sorted((set(known) | set(unknown)) - set(order))
    else:
        order = sorted(set(known) | set(unknown))
    last = 0
    for fid in order:
        if fid in known:
            t, v = known.pop(fid)
            if t is BOOL:
                _put_header(out, fid, CT_TRUE if v else CT_FALSE, last)
            else:
                _put_header(out, fid, _wire(t), last)
                if isinstance(t, ListOf) and t.elem is BOOL:
                    name = _names(cls)[fid]
                    typed_false = name in obj.bool_lists_typed_false
                    false_zero = name in obj.bool_lists_false_zero
                    _put_value(
                        out,
                        t,
                        v,
                        CT_FALSE if typed_false else CT_TRUE,
                        0 if false_zero else CT_FALSE,
                    )
                else:
                    _put_value(out, t, v)
            last = fid
        for raw in unknown.pop(fid, ()):
            _put_header(out, fid, raw.wire, last)
            out += raw.raw
            last = fid
    out.append(CT_STOP)


# Encoders are generated per class like the decoders: a synthetic footer is encoded
# for every decode of chosen pages, and the table-driven walk above is several times
# slower. A generated encoder writes known fields in ascending id order; a struct
# carrying anything to reproduce verbatim goes to _put_struct_generic.

_ENCODERS: dict[type[ThriftStruct], Any] = {}


def _value_write(t: FieldType, v: str, ind: str, ns: dict[str, Any], uid: list[int]) -> list[str]:
    """Lines that write the value held in variable ``v`` (of type ``t``)."""
    if isinstance(t, _Scalar):
        if t is BOOL:  # inside a list; a bool field's value travels in its header
            return [f"{ind}out.append({CT_TRUE} if {v} else {CT_FALSE})"]
        if t is I8:
            return [f"{ind}out.append({v} & 0xFF)"]
        if t is DOUBLE:
            return [f"{ind}out += _pack_double({v})"]
        if t is BINARY or t is STRING:
            return [
                f"{ind}b = {v} if type({v}) is bytes else "
                f"({v}.encode('utf-8', 'surrogateescape') if isinstance({v}, str) else bytes({v}))",
                f"{ind}n = len(b)",
                f"{ind}if n < 0x80: out.append(n)",
                f"{ind}else: _put_varint(out, n)",
                f"{ind}out += b",
            ]
        return [
            f"{ind}x = ({v} << 1) ^ ({v} >> 63)",
            f"{ind}if 0 <= x < 0x80: out.append(x)",
            f"{ind}else: _put_varint(out, x)",
        ]
    if isinstance(t, ListOf):
        uid[0] += 1
        k = uid[0]
        ew = _wire(t.elem)
        return [
            f"{ind}n = len({v})",
            f"{ind}if n < 15: out.append((n << 4) | {ew})",
            f"{ind}else:",
            f"{ind}    out.append({0xF0 | ew})",
            f"{ind}    _put_varint(out, n)",
            f"{ind}for e_{k} in {v}:",
            *_value_write(t.elem, f"e_{k}", ind + "    ", ns, uid),
        ]
    ns_name = f"_enc_{t.__name__}"
    ns[ns_name] = _encoder(t)
    return [f"{ind}{ns_name}(out, {v})"]


def _encoder(cls: type[ThriftStruct]) -> Any:
    fn = _ENCODERS.get(cls)
    if fn is not None:
        return fn
    ns: dict[str, Any] = {
        "_put_varint": _put_varint,
        "_put_zigzag": _put_zigzag,
        "_pack_double": _DOUBLE.pack,
        "_generic": _put_struct_generic,
    }
    uid = [0]
    src = [
        "def encode_struct(out, obj):",
        "    if (obj.unknown_fields or obj.wire_order is not None",
        "            or obj.bool_lists_typed_false or obj.bool_lists_false_zero):",
        "        _generic(out, obj)",
        "        return",
        "    last = 0",
    ]
    for fid, name, t in sorted(cls.THRIFT, key=lambda f: f[0]):
        wire = f"({CT_TRUE} if v else {CT_FALSE})" if t is BOOL else str(_wire(t))
        src += [
            f"    v = obj.{name}",
            "    if v is not None:",
            f"        d = {fid} - last",
            f"        if 0 < d <= 15: out.append((d << 4) | {wire})",
            "        else:",
            f"            out.append({wire})",
            f"            _put_zigzag(out, {fid})",
        ]
        if t is not BOOL:
            src += _value_write(t, "v", "        ", ns, uid)
        src.append(f"        last = {fid}")
    src.append(f"    out.append({CT_STOP})")
    exec(compile("\n".join(src), f"<thrift encoder {cls.__name__}>", "exec"), ns)
    fn = ns["encode_struct"]
    _ENCODERS[cls] = fn
    return fn


def encode(obj: ThriftStruct) -> bytes:
    """The compact-protocol bytes of ``obj``."""
    out = bytearray()
    _put_struct(out, obj)
    return bytes(out)
