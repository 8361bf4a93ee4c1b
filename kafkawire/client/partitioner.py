"""Kafka's default partitioner: murmur2 of the key bytes, made positive, modulo the partition count.

Records with the same key land in the same partition as they would with the
Java producer (``BuiltInPartitioner.partitionForKey``), so kafkawire and Java
producers can share a keyed topic.  Keyless records stick to one partition per
``produce`` call and the next call moves on, like Kafka's sticky partitioner
moves on per batch.
"""
from __future__ import annotations

import itertools
import struct
import threading
from typing import Dict, Optional, Sequence

__all__ = ["murmur2", "to_positive", "partition_for_key", "DefaultPartitioner"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: 32-bit MurmurHash2 with Kafka's seed, as a signed int."""
    data = bytes(data)
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    for (k,) in struct.iter_unpack("<I", data[:whole]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        if tail == 3:
            h ^= data[whole + 2] << 16
        if tail >= 2:
            h ^= data[whole + 1] << 8
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``, which breaks on MIN_VALUE)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key``."""
    if num_partitions <= 0:
        raise ValueError(f"a topic needs at least one partition, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


class DefaultPartitioner:
    """Keyed: murmur2; keyless: one partition per call, rotating over available partitions."""

    def __init__(self) -> None:
        self._counters: Dict[str, "itertools.count[int]"] = {}
        self._lock = threading.Lock()

    def __call__(self, topic: str, key: Optional[bytes], num_partitions: int,
                 available: Sequence[int] = ()) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        return self.sticky(topic, num_partitions, available)

    def sticky(self, topic: str, num_partitions: int, available: Sequence[int] = ()) -> int:
        """The next keyless partition for ``topic``; prefers partitions that have a leader."""
        with self._lock:
            counter = self._counters.setdefault(topic, itertools.count())
            n = next(counter)
        if available:
            return available[n % len(available)]
        return n % num_partitions
