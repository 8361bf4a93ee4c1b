"""The default partitioner against Kafka's own ``Utils.murmur2`` and ``toPositive``."""
from __future__ import annotations

import random

import pytest

from kafkawire.client.partitioner import (DefaultPartitioner, murmur2, partition_for_key,
                                          to_positive)

pytestmark = pytest.mark.one_backend

COUNTS = (1, 3, 7, 12, 100, 1024)


def _keys():
    rng = random.Random(5)
    keys = [b"", b"\x00", b"a", b"ab", b"abc", b"abcd", b"abcde", b"\xff" * 9,
            "ключ-ü".encode(), b"user-1234"]
    keys += [rng.randbytes(rng.randrange(0, 70)) for _ in range(500)]
    return keys


def test_matches_java(java_runner):
    keys = _keys()
    stdin = "".join(k.hex() + "\n" for k in keys).encode()
    out = java_runner.run("Murmur2Ref", *map(str, COUNTS), input=stdin).stdout.decode()
    lines = out.splitlines()
    assert len(lines) == len(keys)
    for key, line in zip(keys, lines):
        h, *parts = map(int, line.split())
        assert murmur2(key) == h, key
        assert [partition_for_key(key, n) for n in COUNTS] == parts, key


def test_known_values():
    # Reference values printed by Kafka 3.9.1's Utils.murmur2.
    assert murmur2(b"") == 275646681
    assert murmur2(b"\x00") == 375494588
    assert murmur2(b"abc") == 479470107
    assert partition_for_key(b"abc", 7) == 4


def test_to_positive_is_not_abs():
    assert to_positive(-2 ** 31) == 0
    assert to_positive(-1) == 0x7FFFFFFF


def test_bad_partition_count():
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)


def test_keyless_rotates_over_available():
    p = DefaultPartitioner()
    picks = [p("t", None, 4, available=[1, 3]) for _ in range(4)]
    assert picks == [1, 3, 1, 3]
    assert [p("u", None, 3) for _ in range(4)] == [0, 1, 2, 0]
    assert p("t", b"abc", 7) == 4
