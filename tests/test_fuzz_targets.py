"""The atheris targets in ``tests/fuzz/``: a few seconds each here, ten minutes with --runslow.

Targets: the record decoders (``fuzz_records``, run by ``test_records_fuzz.py``),
the columnar decoder, index parsing, the protocol response decoders and the dump
formatter.  A target fails on any exception that is not a ``KafkaWireError``, a
crash, a hang past ``-timeout`` or more than 2 GiB of memory.
"""
from __future__ import annotations

import os

import pytest

from fuzz.harness import run_atheris

TARGETS = ["columnar", "index", "protocol", "dump"]
BRIEF_SECONDS = 4


@pytest.mark.one_backend
@pytest.mark.parametrize("name", TARGETS)
def test_atheris_target_briefly(name, tmp_path):
    run_atheris(name, BRIEF_SECONDS, tmp_path)


@pytest.mark.one_backend
@pytest.mark.slow
@pytest.mark.parametrize("name", TARGETS)
def test_atheris_target_long(name, tmp_path):
    run_atheris(name, int(os.environ.get("KAFKAWIRE_FUZZ_SECONDS", "600")), tmp_path)
