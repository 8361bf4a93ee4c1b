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

from fuzz import samples as S
from fuzz.harness import columns_outcome, damage, exercise

HOSTILE = S.hostile()
NAMES = [n for n, _ in HOSTILE]
DATA = dict(HOSTILE)


def _agree(data, verify_crc=False):
    backends = ("fast", "pure") if _kernels.fast_available() else ("pure",)
    previous = _kernels.backend
    out = {}
    try:
        for name in backends:
            _kernels.use(name)
            out[name] = (exercise(data, verify_crc), columns_outcome(data, 4))
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
    _agree(damage(DATA[name], data, 3), verify_crc=data.draw(st.booleans()))
