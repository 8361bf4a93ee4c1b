"""atheris fuzz target for the dump formatter (``K.dump_batches`` / ``K.dump_records``).

The first input byte picks the output mode (text, ``--print-data-log``, JSON,
shallow) and the header fields handed to ``dump_records``; the rest is a ``.log``
file's bytes (or, for ``dump_records``, a records region).  The formatter never
raises for a malformed ``.log`` (the general path reports it) and raises only
``KafkaWireError`` for malformed records.  Anything else (or a crash) is a finding.
"""
from __future__ import annotations

import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

with atheris.instrument_imports():
    from kafkawire import _dumpfmt_common as FMT
    from kafkawire import _kernels as K
    from kafkawire.errors import KafkaWireError
    from fuzz import samples
    from fuzz.runner import main

MODES = (0, FMT.PRINT, FMT.JSON, FMT.JSON | FMT.PRINT, FMT.SHALLOW, FMT.SHALLOW | FMT.JSON)


def one_input(data: bytes) -> None:
    if len(data) < 1:
        return
    mode = MODES[data[0] % len(MODES)]
    buf = data[1:]
    out, stop, prev, status, gaps = K.dump_batches(buf, 0, len(buf), mode, 100, -1,
                                                   64 if data[0] & 0x40 else 1 << 20)
    assert 0 <= stop <= len(buf) and isinstance(out, bytes)
    if mode & FMT.SHALLOW:
        return
    count = data[0] >> 5
    try:
        K.dump_records(buf, 0, len(buf), count, 50, 50 + count + (data[0] & 1), 1000, 2000,
                       data[0] >> 7, -1 if data[0] & 2 else 5, mode, -1)
    except KafkaWireError:
        pass


if __name__ == "__main__":
    main(one_input, [bytes([i * 41 % 256]) + s for i, s in enumerate(samples.seeds())])
