"""atheris fuzz target for the columnar decoder (``iter_column_chunks`` and its kernels).

The first input byte picks the options (headers, chunk limits, an offset window);
the rest is the buffer.  Any exception other than a ``KafkaWireError`` (or a crash)
is a finding.  Run: ``python tests/fuzz/fuzz_columnar.py -max_total_time=60 [corpus]``.
"""
from __future__ import annotations

import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

with atheris.instrument_imports():
    import kafkawire.compression  # noqa: F401
    from kafkawire.errors import KafkaWireError
    from kafkawire.records.columnar import iter_column_chunks
    from fuzz import samples
    from fuzz.runner import main


def one_input(data: bytes) -> None:
    if len(data) < 1:
        return
    opts = data[0]
    buf = data[1:]
    window = {}
    if opts & 0x08:
        window = {"start_offset": opts & 7, "end_offset": (opts & 7) + 4}
    it = iter_column_chunks(buf, include_headers=bool(opts & 1),
                            max_records=1 + (opts >> 4), max_bytes=64 if opts & 2 else 1 << 20,
                            max_decompressed_size=1 << 20, **window)
    try:
        for chunk in it:
            n = len(chunk)
            assert len(chunk.offset) == n and len(chunk.key_offsets) == n + 1
            chunk.to_numpy()
            if n and opts & 4:
                chunk.filter(chunk.offset >= chunk.offset[0])
    except KafkaWireError:
        pass


if __name__ == "__main__":
    main(one_input, [bytes([i * 37 % 256]) + s for i, s in enumerate(samples.seeds())])
