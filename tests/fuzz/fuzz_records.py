"""atheris fuzz target for kafkawire's compiled record decoders.

Run: ``python tests/fuzz/fuzz_records.py -max_total_time=60 [corpus_dir]``.
Seeds are valid v2/v0/v1 batches (``samples.seeds()``).  Any exception other
than a ``KafkaWireError`` (or a crash) is a finding.
"""
from __future__ import annotations

import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Instrument the Python front end (the compiled kernels are not instrumented; the
# fuzzer is steered by the Python paths they lead to and by the seeds).
with atheris.instrument_imports():
    import kafkawire  # noqa: F401
    import kafkawire.compression  # noqa: F401
    import kafkawire.records.batch  # noqa: F401
    import kafkawire.records.iterate  # noqa: F401
    import kafkawire.records.legacy  # noqa: F401
    from kafkawire import _kernels
    from fuzz import samples
    from fuzz.harness import exercise


def one_input(data: bytes) -> None:
    if len(data) < 1:
        return
    verify = bool(data[0] & 1)
    exercise(data[1:], verify_crc=verify)
    # the kernels directly, with the header fields taken from the input
    buf = data[1:]
    try:
        _kernels.decode_records_v2(buf, 0, -1, data[0] % 32, 0, 0, 0, data[0] >> 7)
    except kafkawire.errors.KafkaWireError:
        pass
    try:
        _kernels.decode_legacy_messages(buf, 0, -1, 5, data[0] % 3 - 1, 0, data[0] >> 7, verify)
    except kafkawire.errors.KafkaWireError:
        pass
    one_pass_agrees(buf)


def one_pass_agrees(buf: bytes) -> None:
    """The one-pass check of a v2 batch (validate()'s kernel), with the CRC made to match
    so that its records walk decides: its verdict must be the checked walker's."""
    if len(buf) < 61:
        return
    size = int.from_bytes(buf[8:12], "big") + 12
    if not 61 <= size <= len(buf):
        size = len(buf)
    crc = _kernels.crc32c(buf, 21, size)
    count = int.from_bytes(buf[57:61], "big", signed=True)
    base = int.from_bytes(buf[0:8], "big", signed=True)
    last = base + int.from_bytes(buf[23:27], "big", signed=True)
    last = (last + (1 << 63)) % (1 << 64) - (1 << 63)     # the header's int64 arithmetic
    ok = _kernels.check_batch_v2(buf, 0, size, crc, count, base, last)
    try:
        checked = count >= 0 and last >= base and \
            _kernels.validate_records_v2(buf, 61, size, count, base, last) is None
    except kafkawire.errors.KafkaWireError:
        checked = False
    if ok != checked:
        raise AssertionError(f"one-pass check says {ok}, the checked walker {checked}")


def main() -> None:
    args = list(sys.argv)
    corpus = [a for a in args[1:] if not a.startswith("-")]
    if corpus:
        os.makedirs(corpus[0], exist_ok=True)
        for i, seed in enumerate(samples.seeds()):
            with open(os.path.join(corpus[0], f"seed-{i}"), "wb") as f:
                f.write(b"\x00" + seed)
    _kernels.use("fast")
    atheris.Setup(args, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
