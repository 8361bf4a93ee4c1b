"""The consumer protocol's member metadata and assignment (the bytes inside JoinGroup/SyncGroup).

A consumer joining a group with protocol type ``"consumer"`` puts a
*subscription* in each JoinGroup protocol's metadata and the leader hands back
an *assignment* per member through SyncGroup.  Both are versioned structures
in the classic (non-flexible) encoding:

* Subscription v0: ``version int16, topics [string], user_data nullable bytes``;
  v1 adds ``owned_partitions [topic string, partitions [int32]]``; v2 adds
  ``generation_id int32``; v3 adds ``rack_id nullable string``.
* Assignment v0-v3: ``version int16, assigned [topic string, partitions [int32]],
  user_data nullable bytes`` (the layout did not change after v0).

Like Kafka's own consumer, a reader accepts versions newer than it knows by
reading the fields it knows and ignoring what follows.  Malformed bytes raise
:class:`kafkawire.errors.ProtocolError` naming the byte position.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional, Sequence

from kafkawire.errors import ProtocolError

__all__ = ["Subscription", "Assignment", "encode_subscription", "decode_subscription",
           "encode_assignment", "decode_assignment", "TopicPartition", "SUBSCRIPTION_VERSION"]

SUBSCRIPTION_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
class TopicPartition(NamedTuple):
    """A partition of a topic (a plain ``(topic, partition)`` tuple works wherever one is taken)."""
    topic: str
    partition: int


# A member's metadata lists topics and partitions; no real group needs more than this,
# and a hostile length must not allocate unbounded lists.
_MAX_ITEMS = 1 << 20


@dataclass
class Subscription:
    """What one member asks for: topics, the partitions it owns now (cooperative), its rack."""
    topics: List[str]
    user_data: Optional[bytes] = None
    owned_partitions: List[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: Optional[str] = None
    version: int = SUBSCRIPTION_VERSION


@dataclass
class Assignment:
    """What the leader gives one member: its partitions (and opaque user data)."""
    partitions: List[TopicPartition]
    user_data: Optional[bytes] = None
    version: int = SUBSCRIPTION_VERSION


class _Writer:
    def __init__(self) -> None:
        self.parts: List[bytes] = []

    def i16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def i32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def string(self, s: Optional[str]) -> None:
        if s is None:
            self.i16(-1)
            return
        b = s.encode("utf-8")
        self.i16(len(b))
        self.parts.append(b)

    def nbytes(self, b: Optional[bytes]) -> None:
        if b is None:
            self.i32(-1)
            return
        self.i32(len(b))
        self.parts.append(bytes(b))

    def topic_partitions(self, tps: Sequence[TopicPartition]) -> None:
        by_topic: Dict[str, List[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        self.i32(len(by_topic))
        for t in sorted(by_topic):
            self.string(t)
            ps = sorted(by_topic[t])
            self.i32(len(ps))
            self.parts.append(struct.pack(f">{len(ps)}i", *ps))

    def value(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = memoryview(bytes(data))
        self.pos = 0
        self.what = what

    def _need(self, n: int) -> None:
        if self.pos + n > len(self.data):
            raise ProtocolError(f"{self.what} is truncated at byte {self.pos} (needs {n} more "
                                f"byte(s), has {len(self.data) - self.pos})")

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def i16(self) -> int:
        self._need(2)
        (v,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return v

    def i32(self) -> int:
        self._need(4)
        (v,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return v

    def count(self) -> int:
        at = self.pos
        n = self.i32()
        if n < 0 or n > _MAX_ITEMS:
            raise ProtocolError(f"{self.what} has an array length of {n} at byte {at}")
        return n

    def string(self, nullable: bool = False) -> Optional[str]:
        at = self.pos
        n = self.i16()
        if n == -1 and nullable:
            return None
        if n < 0:
            raise ProtocolError(f"{self.what} has a string length of {n} at byte {at}")
        self._need(n)
        raw = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"{self.what} has a string that is not UTF-8 at byte {at}") from exc

    def nbytes(self) -> Optional[bytes]:
        at = self.pos
        n = self.i32()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"{self.what} has a byte-string length of {n} at byte {at}")
        self._need(n)
        b = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return b

    def topic_partitions(self) -> List[TopicPartition]:
        out: List[TopicPartition] = []
        for _ in range(self.count()):
            topic = self.string() or ""
            n = self.count()
            self._need(4 * n)
            ps = struct.unpack_from(f">{n}i", self.data, self.pos)
            self.pos += 4 * n
            out.extend(TopicPartition(topic, p) for p in ps)
        return out


def encode_subscription(sub: Subscription) -> bytes:
    """The JoinGroup protocol metadata for ``sub`` in its ``version`` (0-3)."""
    v = sub.version
    if not 0 <= v <= 3:
        raise ValueError(f"subscription version must be 0-3, not {v}")
    w = _Writer()
    w.i16(v)
    w.i32(len(sub.topics))
    for t in sorted(sub.topics):
        w.string(t)
    w.nbytes(sub.user_data)
    if v >= 1:
        w.topic_partitions(sub.owned_partitions)
    if v >= 2:
        w.i32(sub.generation_id)
    if v >= 3:
        w.string(sub.rack_id)
    return w.value()


def decode_subscription(data: bytes) -> Subscription:
    """A member's subscription from its JoinGroup metadata (any version, newer read as v3)."""
    r = _Reader(data, "consumer subscription metadata")
    version = r.i16()
    if version < 0:
        raise ProtocolError(f"consumer subscription metadata has version {version}")
    topics = [r.string() for _ in range(r.count())]
    user_data = r.nbytes()
    sub = Subscription(topics, user_data, version=version)  # type: ignore[arg-type]
    # Missing trailing fields are tolerated the way Kafka tolerates them: a v1+ structure
    # that ends early simply has no owned partitions / generation / rack.
    if version >= 1 and not r.at_end():
        sub.owned_partitions = r.topic_partitions()
    if version >= 2 and not r.at_end():
        sub.generation_id = r.i32()
    if version >= 3 and not r.at_end():
        sub.rack_id = r.string(nullable=True)
    return sub


def encode_assignment(a: Assignment) -> bytes:
    """The SyncGroup assignment bytes for one member."""
    w = _Writer()
    w.i16(a.version)
    w.topic_partitions(a.partitions)
    w.nbytes(a.user_data)
    return w.value()


def decode_assignment(data: Optional[bytes]) -> Assignment:
    """A member's assignment from SyncGroup (empty bytes: no partitions, as Kafka reads them)."""
    if data is None or len(data) == 0:
        return Assignment([], None)
    r = _Reader(data, "consumer assignment")
    version = r.i16()
    if version < 0:
        raise ProtocolError(f"consumer assignment has version {version}")
    parts = r.topic_partitions()
    user_data = r.nbytes() if not r.at_end() else None
    return Assignment(parts, user_data, version=version)
