"""Constants and the decode error shared by both protocol kernel twins.

A *program* is the compiled form of one struct schema at one version (built
by :mod:`kafkawire.protocol.schema`); the kernels interpret it:

``(cls, ops, tagged, tag_map, defaults, flexible)``

* ``ops``      tuple of ``(attr_name, code, arg)`` in wire order;
* ``tagged``   tuple of ``(tag, attr_name, code, arg, default)`` sorted by tag;
* ``tag_map``  dict ``tag -> (attr_name, code, arg)``;
* ``defaults`` tuple of ``(attr_name, value, factory)`` filled in when the
  field did not come off the wire (absent in this version, or tagged and
  omitted); ``factory`` (or None) makes a fresh mutable default;
* ``flexible`` whether the struct ends with a tagged-field section.

``arg`` is a struct program for STRUCT codes, ``(elem_code, elem_arg)`` for
ARRAY codes, and None otherwise.
"""
from __future__ import annotations

from typing import Optional

from kafkawire.errors import ProtocolError

BOOL, INT8, INT16, INT32, INT64, UINT16, UINT32, VARINT, VARLONG, UVARINT, FLOAT64, UUID = range(12)
STRING, NSTRING, CSTRING, CNSTRING = 12, 13, 14, 15
BYTES, NBYTES, CBYTES, CNBYTES = 16, 17, 18, 19
RECORDS, CRECORDS = 20, 21
ARRAY, NARRAY, CARRAY, CNARRAY = 22, 23, 24, 25
STRUCT, NSTRUCT = 26, 27

CODE_NAMES = {v: k for k, v in list(globals().items()) if k.isupper() and isinstance(v, int)}

#: Slot holding a struct's unknown tagged fields, a list of (tag, bytes); unset when
#: there are none (structs expose it as ``unknown_tagged_fields``).
UNKNOWN_TAGS = "_unknown_tags"


class MessageDecodeError(ProtocolError):
    """Bytes that do not decode under the message's schema.

    ``position`` is the byte offset in the decoded buffer, ``reason`` one of
    ``"truncated"``, ``"length"``, ``"utf8"``, ``"varint"``, ``"tag"``,
    ``"trailing"``.
    """

    def __init__(self, message: str, *, position: Optional[int] = None,
                 reason: str = "malformed") -> None:
        self.message = message
        self.position = position
        self.reason = reason
        where = f"position {position}: " if position is not None else ""
        super().__init__(f"{where}{message}")
