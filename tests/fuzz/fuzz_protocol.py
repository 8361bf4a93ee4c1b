"""atheris fuzz target for the protocol response decoders.

The first two input bytes pick the response type and version (every one the
schemas define); the rest is the response payload, decoded framed (after its
header) through ``decode_response`` and bare through the message class.  Anything
that decodes must encode again.  Any exception other than a ``KafkaWireError``
(or a crash) is a finding.
"""
from __future__ import annotations

import os
import random
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

with atheris.instrument_imports():
    import kafkawire.protocol as P
    from kafkawire.errors import KafkaWireError
    from protocol_samples import RESPONSES, all_versions, sample
    from fuzz.runner import main

CASES = list(all_versions(RESPONSES))


def one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    cls, version = CASES[(data[0] << 8 | data[1]) % len(CASES)]
    body = data[2:]
    try:
        msg = cls.decode(body, version)
    except KafkaWireError:
        msg = None
    if msg is not None:
        msg.encode(version)
    try:
        P.decode_response(cls.API_KEY, version, P.frame(body), max_frame_size=1 << 20,
                          allow_trailing=bool(data[0] & 0x80))
    except KafkaWireError:
        pass


def _seeds():
    rnd = random.Random(11)
    out = []
    for i, (cls, version) in enumerate(CASES):
        if i % 7 == 0:
            out.append(bytes([i >> 8, i & 0xFF]) + sample(cls, version, rnd).encode(version))
    return out


if __name__ == "__main__":
    main(one_input, _seeds())
