"""Fuzz the protocol decoders (both backends): random bytes, truncations and byte
flips of valid messages never raise anything but kafkawire.errors, never hang,
and whatever decodes re-encodes."""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkawire.protocol as P
from kafkawire.errors import KafkaWireError
from protocol_samples import REQUESTS, RESPONSES, all_versions, sample

CASES = list(all_versions(RESPONSES))
REQUEST_CASES = list(all_versions(REQUESTS))
FUZZ = settings(max_examples=400, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SLOW = settings(max_examples=20000, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

_SAMPLES = {}


def _valid(cls, version):
    key = (cls, version)
    if key not in _SAMPLES:
        _SAMPLES[key] = sample(cls, version, random.Random(f"fuzz{cls.__name__}{version}")).encode(version)
    return _SAMPLES[key]


def _decode_or_kafkawire_error(cls, data, version):
    try:
        msg = cls.decode(data, version)
    except KafkaWireError:
        return None
    msg.encode(version)  # whatever decodes must encode again
    return msg


def _check_random(case, data):
    cls, version = CASES[case % len(CASES)]
    _decode_or_kafkawire_error(cls, data, version)


def _check_mutation(case, cut, flips):
    cls, version = CASES[case % len(CASES)]
    good = bytearray(_valid(cls, version))
    for pos, val in flips:
        if good:
            good[pos % len(good)] = val
    data = bytes(good[:cut % (len(good) + 1)])
    _decode_or_kafkawire_error(cls, data, version)
    try:
        P.decode_response(cls.API_KEY, version, P.frame(data), max_frame_size=1 << 20)
    except KafkaWireError:
        pass


@FUZZ
@given(case=st.integers(0, 10_000), data=st.binary(max_size=300))
def test_random_bytes_to_every_response_decoder(case, data):
    _check_random(case, data)


@FUZZ
@given(case=st.integers(0, 10_000), cut=st.integers(0, 1 << 16),
       flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=4))
def test_truncated_and_flipped_responses(case, cut, flips):
    _check_mutation(case, cut, flips)


def test_every_truncation_of_every_response_version():
    for cls, version in CASES:
        good = _valid(cls, version)
        step = max(1, len(good) // 40)
        for cut in list(range(0, len(good), step)) + [len(good) - 1]:
            with pytest.raises(KafkaWireError):
                cls.decode(good[:cut], version)


@FUZZ
@given(data=st.binary(max_size=200))
def test_random_request_frames(data):
    try:
        P.decode_request(P.frame(data))
    except KafkaWireError:
        pass


@FUZZ
@given(case=st.integers(0, 10_000), cut=st.integers(0, 1 << 16),
       flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=3))
def test_truncated_and_flipped_request_frames(case, cut, flips):
    cls, version = REQUEST_CASES[case % len(REQUEST_CASES)]
    frame = bytearray(P.encode_request(sample(cls, version, random.Random(case)), version, 1, "c"))
    for pos, val in flips:
        frame[4 + pos % (len(frame) - 4)] = val
    try:
        P.decode_request(bytes(frame[:cut % (len(frame) + 1)]))
    except KafkaWireError:
        pass


@pytest.mark.slow
@SLOW
@given(case=st.integers(0, 10_000), cut=st.integers(0, 1 << 16),
       flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=8),
       data=st.binary(max_size=2000))
def test_long_response_fuzz(case, cut, flips, data):
    _check_mutation(case, cut, flips)
    _check_random(case, data)
