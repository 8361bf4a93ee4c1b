"""The declarative schema language messages are written in, and its compiler.

A message is a class listing its fields once, with Kafka's names and version
ranges::

    class FindCoordinatorRequest(Message):
        API_KEY, VERSIONS, FLEXIBLE = 10, (0, 6), 3
        FIELDS = (
            F("Key", STRING, "0-3"),
            F("KeyType", INT8, "1+"),
            F("CoordinatorKeys", Array(STRING), "4+"),
        )

Nothing is written per version: for each version the schema compiles (once,
cached) to a *program* — a flat tuple of wire operations with compact or
classic forms chosen by the message's flexible versions, nullable forms by
the field's nullable versions, tagged fields and defaults resolved — that
the protocol kernel (:mod:`kafkawire._pure.protocol` or its compiled twin)
interprets.  Attributes are the snake_case of Kafka's field names
(``PartitionIndex`` -> ``partition_index``); unknown tagged fields survive a
decode/encode round trip in ``unknown_tagged_fields``.
"""
from __future__ import annotations

import gc
import re
import struct
import uuid as _uuid
from types import TracebackType
from typing import Any, Callable, Dict, List, Literal, Optional, Tuple, Type, TypeVar, Union

from kafkawire import _kernels as K
from kafkawire import _protocol_common as C
from kafkawire.errors import UnsupportedVersionError
from kafkawire.protocol.errors import MessageDecodeError, MessageEncodeError

__all__ = ["Prim", "Array", "F", "Struct", "Message", "BOOL", "INT8", "INT16", "INT32", "INT64",
           "UINT16", "UINT32", "VARINT", "VARLONG", "UVARINT", "FLOAT64", "UUID", "STRING", "BYTES",
           "RECORDS", "ZERO_UUID", "snake_case", "VersionRange", "REGISTRY"]

ZERO_UUID = _uuid.UUID(int=0)
#: A message's compiled wire program at one version (read by the protocol kernel).
Program = Tuple[Any, ...]
_MISSING = object()


class Prim:
    """A primitive wire type; picks its classic/compact and nullable encodings."""

    __slots__ = ("name", "codes", "default")

    def __init__(self, name: str, codes: Tuple[int, int, int, int], default: Any) -> None:
        self.name = name
        self.codes = codes  # classic, classic nullable, compact, compact nullable
        self.default = default

    def code(self, compact: bool, nullable: bool) -> int:
        return self.codes[2 * compact + nullable]

    def __repr__(self) -> str:
        return self.name


def _fixed(name: str, code: int, default: Any) -> Prim:
    return Prim(name, (code, code, code, code), default)


BOOL = _fixed("bool", C.BOOL, False)
INT8 = _fixed("int8", C.INT8, 0)
INT16 = _fixed("int16", C.INT16, 0)
INT32 = _fixed("int32", C.INT32, 0)
INT64 = _fixed("int64", C.INT64, 0)
UINT16 = _fixed("uint16", C.UINT16, 0)
UINT32 = _fixed("uint32", C.UINT32, 0)
VARINT = _fixed("varint", C.VARINT, 0)
VARLONG = _fixed("varlong", C.VARLONG, 0)
UVARINT = _fixed("uvarint", C.UVARINT, 0)
FLOAT64 = _fixed("float64", C.FLOAT64, 0.0)
UUID = _fixed("uuid", C.UUID, ZERO_UUID)
STRING = Prim("string", (C.STRING, C.NSTRING, C.CSTRING, C.CNSTRING), "")
BYTES = Prim("bytes", (C.BYTES, C.NBYTES, C.CBYTES, C.CNBYTES), b"")
#: Record data: decoded as a zero-copy memoryview for ``kafkawire.iter_batches``.
RECORDS = Prim("records", (C.RECORDS, C.RECORDS, C.CRECORDS, C.CRECORDS), None)


class Array:
    """An array of a primitive type or of a :class:`Struct` subclass."""

    __slots__ = ("of",)

    def __init__(self, of: "Prim | Type[Struct]") -> None:
        self.of = of

    def __repr__(self) -> str:
        return f"Array({getattr(self.of, '__name__', self.of)!r})"


class VersionRange:
    """Kafka's version range notation: ``"3+"``, ``"0-8"``, ``"5"`` or ``"none"``."""

    __slots__ = ("lo", "hi")

    def __init__(self, spec: Optional[str]) -> None:
        spec = (spec or "none").strip()
        if spec == "none":
            self.lo, self.hi = 1, 0
        elif spec.endswith("+"):
            self.lo, self.hi = int(spec[:-1]), 1 << 15
        elif "-" in spec:
            lo, hi = spec.split("-")
            self.lo, self.hi = int(lo), int(hi)
        else:
            self.lo = self.hi = int(spec)

    def __contains__(self, version: int) -> bool:
        return self.lo <= version <= self.hi

    def __repr__(self) -> str:
        if self.lo > self.hi:
            return "none"
        return f"{self.lo}+" if self.hi == 1 << 15 else f"{self.lo}-{self.hi}"


def snake_case(name: str) -> str:
    """Kafka's field name to the attribute name: ``PartitionIndex`` -> ``partition_index``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class F:
    """One field: Kafka name, type, versions, and optionally nullable versions,
    a tag (tagged field), a default, or ``classic=True`` for a field that keeps
    its classic encoding in flexible versions (``ClientId`` of request header v2)."""

    __slots__ = ("kafka_name", "name", "type", "versions", "nullable", "tag", "default_value",
                 "classic", "about")

    def __init__(self, kafka_name: str, type: Any, versions: str, *, nullable: Optional[str] = None,
                 tag: Optional[int] = None, default: Any = _MISSING, classic: bool = False,
                 about: str = "") -> None:
        self.kafka_name = kafka_name
        self.name = snake_case(kafka_name)
        self.type = type
        self.versions = VersionRange(versions)
        self.nullable = VersionRange(nullable)
        self.tag = tag
        self.classic = classic
        self.about = about
        if default is _MISSING:
            if isinstance(type, Prim):
                default = type.default
            elif isinstance(type, Array):
                default = []
            else:
                default = None  # a struct: a fresh default instance, see factory()
        self.default_value = default

    def factory(self) -> Optional[Callable[[], Any]]:
        """A maker of fresh mutable defaults, or None when the default is immutable."""
        if isinstance(self.type, Array) and self.default_value is not None:
            return list
        if isinstance(self.type, type) and issubclass(self.type, Struct) and self.default_value is None \
                and self.nullable.lo > self.nullable.hi:
            return self.type
        return None

    def fresh_default(self) -> Any:
        f = self.factory()
        return f() if f is not None else self.default_value

    def __repr__(self) -> str:
        return f"F({self.kafka_name!r}, {self.type!r}, {self.versions!r})"


class _StructMeta(type):
    """Gives every struct class ``__slots__`` named after its fields: decoded
    objects then carry no per-instance dict (cheaper to build and to free)."""

    def __new__(mcls, name: str, bases: Tuple[type, ...], ns: Dict[str, Any],
                **kw: Any) -> "_StructMeta":
        if "__slots__" not in ns:
            ns["__slots__"] = tuple(f.name for f in ns.get("FIELDS", ()))
        return super().__new__(mcls, name, bases, ns, **kw)


_S = TypeVar("_S", bound="Struct")
_M = TypeVar("_M", bound="Message")


class Struct(metaclass=_StructMeta):
    """Base of every message and nested struct: keyword construction, defaults,
    equality, ``to_dict()``; subclasses list ``FIELDS``."""

    __slots__ = (C.UNKNOWN_TAGS,)
    FIELDS: Tuple[F, ...] = ()
    _by_name: Dict[str, F] = {}
    _programs: Dict[Tuple[int, bool], Program] = {}

    @property
    def unknown_tagged_fields(self) -> List[Tuple[int, bytes]]:
        """Tagged fields this schema does not know, as (tag, raw bytes); kept so a
        decoded message re-encodes to the same bytes."""
        return getattr(self, C.UNKNOWN_TAGS, None) or []

    @unknown_tagged_fields.setter
    def unknown_tagged_fields(self, value: List[Tuple[int, bytes]]) -> None:
        setattr(self, C.UNKNOWN_TAGS, list(value))

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls._by_name = {f.name: f for f in cls.FIELDS}
        cls._programs = {}

    def __init__(self, **values: Any) -> None:
        for f in self.FIELDS:
            if f.name in values:
                setattr(self, f.name, _coerce(f.type, values.pop(f.name)))
            else:
                setattr(self, f.name, f.fresh_default())
        if values:
            unknown = values.pop("unknown_tagged_fields", None)
            if unknown:
                setattr(self, C.UNKNOWN_TAGS, list(unknown))
        if values:
            raise TypeError(f"{type(self).__name__} has no field(s) {', '.join(sorted(values))}; "
                            f"fields are {', '.join(f.name for f in self.FIELDS)}")

    @classmethod
    def from_dict(cls: Type[_S], data: Dict[str, Any]) -> _S:
        """Build from a mapping of attribute names (nested dicts become structs)."""
        return cls(**data)

    def to_dict(self) -> Dict[str, Any]:
        """Plain data: nested structs as dicts, record views as bytes."""
        out = {}
        for f in self.FIELDS:
            out[f.name] = _plain(getattr(self, f.name))
        return out

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in self.FIELDS)

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = ", ".join(f"{f.name}={_short(getattr(self, f.name))}" for f in self.FIELDS)
        return f"{type(self).__name__}({parts})"

    @classmethod
    def _program(cls, version: int, flexible: bool) -> Program:
        key = (version, flexible)
        prog = cls._programs.get(key)
        if prog is None:
            prog = cls._programs[key] = _compile(cls, version, flexible)
        return prog


def _short(v: Any) -> str:
    if isinstance(v, memoryview):
        return f"<{v.nbytes} bytes of records>"
    return repr(v)


def _plain(v: Any) -> Any:
    if isinstance(v, Struct):
        return v.to_dict()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, memoryview):
        return v.tobytes()
    return v


def _coerce(t: Any, v: Any) -> Any:
    """Let callers pass dicts for nested structs."""
    if isinstance(t, Array) and isinstance(t.of, type) and v is not None:
        return [t.of(**x) if isinstance(x, dict) else x for x in v]
    if isinstance(t, type) and isinstance(v, dict):
        return t(**v)
    return v


def _type_code(t: Any, f: F, version: int, flexible: bool) -> Tuple[int, Any]:
    compact = flexible and not f.classic
    nullable = version in f.nullable
    if isinstance(t, Prim):
        return t.code(compact, nullable), None
    if isinstance(t, Array):
        code = (C.ARRAY, C.NARRAY, C.CARRAY, C.CNARRAY)[2 * compact + nullable]
        if isinstance(t.of, Prim):
            return code, (t.of.code(compact, False), None)
        return code, (C.STRUCT, t.of._program(version, flexible))
    if isinstance(t, type) and issubclass(t, Struct):
        return (C.NSTRUCT if nullable else C.STRUCT), t._program(version, flexible)
    raise TypeError(f"field {f.kafka_name}: unsupported schema type {t!r}")


def _compile(cls: Type[Struct], version: int, flexible: bool) -> Program:
    ops: List[Tuple[Any, ...]] = []
    tagged: List[Tuple[Any, ...]] = []
    tag_map: Dict[int, Tuple[Any, ...]] = {}
    defaults: List[Tuple[Any, ...]] = []
    for f in cls.FIELDS:
        if version not in f.versions or (f.tag is not None and not flexible):
            defaults.append((f.name, f.default_value, f.factory()))
            continue
        code, arg = _type_code(f.type, f, version, flexible)
        if f.tag is not None:
            tagged.append((f.tag, f.name, code, arg, f.fresh_default()))
            tag_map[f.tag] = (f.name, code, arg)
            defaults.append((f.name, f.default_value, f.factory()))
        else:
            ops.append((f.name, code, arg))
    tagged.sort(key=lambda t: t[0])
    return (cls, tuple(ops), tuple(tagged), tag_map, tuple(defaults), flexible)


class _encode_errors:
    """Turns the kernels' TypeError/ValueError/OverflowError/struct.error on bad field
    values into MessageEncodeError naming the message and version."""

    __slots__ = ("msg", "version")

    def __init__(self, msg: "Message", version: int) -> None:
        self.msg = msg
        self.version = version

    def __enter__(self) -> None:
        return None

    def __exit__(self, etype: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> Literal[False]:
        if exc is None or isinstance(exc, MessageEncodeError):
            return False
        if isinstance(exc, (TypeError, ValueError, OverflowError, KeyError, AttributeError,
                            struct.error)):
            raise MessageEncodeError(
                f"cannot encode {type(self.msg).__name__} v{self.version}: "
                f"{type(exc).__name__}: {exc} (check the field values' types and ranges)") from exc
        return False


#: (api_key, is_response) -> message class, filled as message modules load.
REGISTRY: Dict[Tuple[int, bool], Type["Message"]] = {}


class Message(Struct):
    """A request or response body.  Subclasses set ``API_KEY``, ``VERSIONS``
    (lowest, highest) and ``FLEXIBLE`` (first flexible version, or None)."""

    __slots__ = ()
    API_KEY: int = -1
    VERSIONS: Tuple[int, int] = (0, -1)
    FLEXIBLE: Optional[int] = None
    IS_RESPONSE: bool = False

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls.IS_RESPONSE = cls.__name__.endswith("Response")
        if cls.API_KEY >= 0:
            REGISTRY[(cls.API_KEY, cls.IS_RESPONSE)] = cls

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return cls.FLEXIBLE is not None and version >= cls.FLEXIBLE

    @classmethod
    def check_version(cls, version: int) -> None:
        lo, hi = cls.VERSIONS
        if not isinstance(version, int) or not lo <= version <= hi:
            raise UnsupportedVersionError(
                f"{cls.__name__} version {version} is not supported; kafkawire speaks versions "
                f"{lo}-{hi} (negotiate with ApiVersions and pick a version in that range)")

    @classmethod
    def program(cls, version: int) -> Program:
        """The compiled wire program of this message at ``version``."""
        prog = cls._programs.get((version, True)) or cls._programs.get((version, False))
        if prog is None:
            cls.check_version(version)
            prog = cls._program(version, cls.is_flexible(version))
        return prog

    def encode_into(self, out: bytearray, version: int) -> None:
        """Append the body at ``version`` to ``out``."""
        prog = self.program(version)
        with _encode_errors(self, version):
            K.encode_struct(self, prog, out)

    def encode(self, version: int) -> bytes:
        """The body (no header, no size prefix) at ``version``."""
        return self.encode_with_prefix(version, b"", sized=False)

    def encode_with_prefix(self, version: int, prefix: Union[bytes, bytearray], *,
                           sized: bool) -> bytes:
        """``prefix`` + the body as one bytes object (large record sections copied
        once); with ``sized`` the first 4 bytes of ``prefix`` become the frame size."""
        prog = self.program(version)
        out: bytes
        with _encode_errors(self, version):
            out = K.encode_message(self, prog, prefix, sized)
        return out

    @classmethod
    def decode(cls: Type[_M], data: Any, version: int, *, pos: int = 0, end: Optional[int] = None,
               allow_trailing: bool = False) -> _M:
        """Decode a body at ``version`` from ``data[pos:end]`` (bytes-like, not copied:
        records fields are memoryviews into ``data``)."""
        prog = cls.program(version)
        if end is None:
            end = memoryview(data).nbytes
        # Decoding allocates thousands of containers that are never cyclic garbage;
        # letting the cyclic GC scan them mid-decode costs a third of the time.
        gc_on = gc.isenabled()
        if gc_on:
            gc.disable()
        obj: _M
        try:
            obj, stop = K.decode_struct(data, pos, end, prog)
        finally:
            if gc_on:
                gc.enable()
        if stop != end and not allow_trailing:
            raise MessageDecodeError(
                f"{cls.__name__} v{version} ended after {stop - pos} bytes but the body has "
                f"{end - pos}: wrong version or corrupt message", position=stop, reason="trailing")
        return obj
