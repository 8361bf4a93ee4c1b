"""Hostile input: truncations, byte flips and random bytes decode or raise a kafkawire error.

Both backends must agree on every outcome (a differential check of the twins).
The atheris target ``tests/fuzz/fuzz_records.py`` runs briefly here; longer with --runslow.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkawire import _kernels

from fuzz import samples as S
from fuzz.harness import damage, exercise, run_atheris

SEEDS = S.seeds()


def both(data, verify_crc=False):
    """Outcome on each backend (the fast one only when built)."""
    results = {}
    for name in ("fast", "pure") if _kernels.fast_available() else ("pure",):
        _kernels.use(name)
        results[name] = exercise(data, verify_crc)
    return results


def agree(data, verify_crc=False):
    previous = _kernels.backend
    try:
        res = both(data, verify_crc)
    finally:
        _kernels.use(previous)
    vals = list(res.values())
    assert all(v == vals[0] for v in vals), (data.hex(), res)
    return vals[0]


@pytest.mark.one_backend
@pytest.mark.parametrize("seed", range(len(SEEDS)))
def test_seeds_decode_cleanly(seed):
    out = agree(SEEDS[seed], verify_crc=True)
    assert out[-1][1] is None  # no partial tail
    assert all(row[-1] == "valid" for row in out[:-1]), out


@pytest.mark.one_backend
@pytest.mark.parametrize("seed", range(len(SEEDS)))
def test_every_truncation(seed):
    data = SEEDS[seed]
    for cut in range(len(data)):
        agree(data[:cut])


@pytest.mark.one_backend
@pytest.mark.parametrize("seed", range(len(SEEDS) - 1))
def test_every_single_byte_flip(seed):
    data = SEEDS[seed]
    for pos in range(len(data)):
        for x in (0x01, 0x80, 0xFF):
            bad = bytearray(data)
            bad[pos] ^= x
            agree(bytes(bad), verify_crc=bool(pos & 1))


@pytest.mark.one_backend
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, len(SEEDS) - 1), data=st.data())
def test_random_damage(seed, data):
    agree(damage(SEEDS[seed], data, 4), verify_crc=data.draw(st.booleans()))


@pytest.mark.one_backend
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes(blob):
    agree(blob)


@pytest.mark.one_backend
def test_atheris_fuzz_briefly(tmp_path):
    run_atheris("records", 20, tmp_path)


@pytest.mark.one_backend
@pytest.mark.slow
def test_atheris_fuzz_long(tmp_path):
    run_atheris("records", int(os.environ.get("KAFKAWIRE_FUZZ_SECONDS", "600")), tmp_path)
