"""Random, fully populated protocol messages built from our schemas (test helper)."""
from __future__ import annotations

import random
import uuid

import kafkawire.protocol as P
from kafkawire.protocol.schema import Array, Prim, Struct

RESPONSES = [c for c in vars(P).values()
             if isinstance(c, type) and issubclass(c, P.Message) and c.API_KEY >= 0 and c.IS_RESPONSE]
REQUESTS = [c for c in vars(P).values()
            if isinstance(c, type) and issubclass(c, P.Message) and c.API_KEY >= 0 and not c.IS_RESPONSE]

_RANGES = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (-2**31, 2**31 - 1),
           "int64": (-2**63, 2**63 - 1), "uint16": (0, 65535), "uint32": (0, 2**32 - 1)}


def sample(cls, version: int, rnd: random.Random, flexible: bool = None):
    """An instance of struct ``cls`` with every field present at ``version`` filled."""
    if flexible is None:
        flexible = cls.is_flexible(version)
    values = {}
    for f in cls.FIELDS:
        if version not in f.versions or (f.tag is not None and not flexible):
            continue
        if version in f.nullable and rnd.random() < 0.2:
            values[f.name] = None
            continue
        values[f.name] = _value(f.type, version, rnd, flexible)
    return cls(**values)


def _value(t, version, rnd, flexible):
    if isinstance(t, Array):
        return [_value(t.of, version, rnd, flexible) for _ in range(rnd.randint(0, 3))]
    if isinstance(t, type) and issubclass(t, Struct):
        return sample(t, version, rnd, flexible)
    name = t.name
    if name in _RANGES:
        lo, hi = _RANGES[name]
        return rnd.choice([lo, hi, 0, -1 if lo < 0 else 1, rnd.randint(lo, hi)])
    if name == "bool":
        return rnd.random() < 0.5
    if name == "float64":
        return rnd.uniform(-1e6, 1e6)
    if name == "uuid":
        return uuid.UUID(int=rnd.getrandbits(128))
    if name == "string":
        return rnd.choice(["", "topic", "tö-π", "x" * rnd.randint(0, 300)])
    if name in ("bytes", "records"):
        return bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 40)))
    raise AssertionError(name)


def all_versions(classes):
    for cls in classes:
        lo, hi = cls.VERSIONS
        for v in range(lo, hi + 1):
            yield cls, v
