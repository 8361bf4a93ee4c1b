"""Hostile samples (``fuzz.samples.hostile``) and random damage to them, on both backends.

Legacy-wrapper corner cases, nested wrappers and payloads of many empty compressed
members: every path decodes them or raises a ``kafkawire.errors`` exception, and the
fast and pure kernels agree on the outcome (records path and columnar path).
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkawire import _kernels
from kafkawire.errors import KafkaWireError
from kafkawire.records.columnar import iter_column_chunks

from fuzz import samples as S
from fuzz.harness import exercise

HOSTILE = S.hostile()
NAMES = [n for n, _ in HOSTILE]
DATA = dict(HOSTILE)


def _columns(data):
    try:
        it = iter_column_chunks(data, include_headers=True, max_records=4,
                                max_decompressed_size=1 << 20)
        chunks = [{k: (None if v is None else v.tolist()) for k, v in c.to_numpy().items()}
                  for c in it]
        return ("ok", chunks, it.partial_tail, it.stop_position)
    except KafkaWireError as exc:
        return ("error", type(exc).__name__, getattr(exc, "position", None),
                getattr(exc, "reason", None))


def _agree(data, verify_crc=False):
    backends = ("fast", "pure") if _kernels.fast_available() else ("pure",)
    previous = _kernels.backend
    out = {}
    try:
        for name in backends:
            _kernels.use(name)
            out[name] = (exercise(data, verify_crc), _columns(data))
    finally:
        _kernels.use(previous)
    vals = list(out.values())
    assert all(v == vals[0] for v in vals), (data[:200].hex(), out)
    return vals[0]


@pytest.mark.one_backend
@pytest.mark.parametrize("name", NAMES)
def test_hostile_samples_agree(name):
    records, columns = _agree(DATA[name], verify_crc=True)
    if name in ("wrapper_offset0", "gzip_members", "snappy_empty_blocks"):
        assert columns[0] == "ok"
        offsets = [r[0] for row in records[:-1] for r in row[-2]]
        assert offsets == [0, 1, 2]
    if name.startswith("wrapper_") and name != "wrapper_offset0":
        assert columns[0] == "error"


@pytest.mark.one_backend
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(NAMES), data=st.data())
def test_random_damage_to_hostile_samples(name, data):
    buf = bytearray(DATA[name])
    for _ in range(data.draw(st.integers(1, 3))):
        if not buf:
            break
        pos = data.draw(st.integers(0, len(buf) - 1))
        kind = data.draw(st.sampled_from(["flip", "set", "cut", "dup"]))
        if kind == "flip":
            buf[pos] ^= data.draw(st.integers(1, 255))
        elif kind == "set":
            buf[pos] = data.draw(st.sampled_from([0, 0x7F, 0x80, 0xFF]))
        elif kind == "cut":
            del buf[pos:]
        else:
            buf[pos:pos] = buf[pos:pos + data.draw(st.integers(1, 64))]
    _agree(bytes(buf), verify_crc=data.draw(st.booleans()))
