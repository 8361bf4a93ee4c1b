"""Hostile compressed payloads cost work linear in their size, on every decoding path.

A gzip payload may hold many concatenated members (Java's GZIPInputStream reads
them all); empty ones add no output, so no output bound stops them.  The work
is measured as the bytes handed to zlib, which must stay within a small
multiple of the payload whatever its member count (no timings in tests).
"""
from __future__ import annotations

import gzip
import zlib

import pytest

import kafkawire
from kafkawire import compression
from kafkawire.cli import main
from kafkawire.records.columnar import decode_columns

from fuzz import samples as S

EMPTY_MEMBER = gzip.compress(b"")
MEMBERS = 20_000


class _CountingZlib:
    """Stands in for ``zlib`` inside kafkawire.compression; counts input bytes fed."""

    def __init__(self) -> None:
        self.fed = 0
        self.error = zlib.error

    def decompressobj(self, *args):
        real = zlib.decompressobj(*args)
        outer = self

        class Counting:
            def decompress(self, data, *rest):
                outer.fed += len(data)
                return real.decompress(data, *rest)

            def __getattr__(self, name):
                return getattr(real, name)

        return Counting()

    def __getattr__(self, name):
        return getattr(zlib, name)


@pytest.fixture
def counting(monkeypatch):
    z = _CountingZlib()
    monkeypatch.setattr(compression, "zlib", z)
    return z


def _records():
    return [S.v2_record(i, i, b"k%d" % i, b"value-%d" % i) for i in range(3)]


def many_member_v2() -> bytes:
    payload = gzip.compress(b"".join(_records())) + EMPTY_MEMBER * MEMBERS
    return S.v2_batch(_records(), attributes=1, payload=payload, count=3, base_offset=10)


def many_member_v1() -> bytes:
    inner = S.legacy_message(0, b"a") + S.legacy_message(1, b"b")
    payload = gzip.compress(inner) + EMPTY_MEMBER * MEMBERS
    return S.legacy_message(21, payload, attributes=1)


PAYLOAD = len(EMPTY_MEMBER) * MEMBERS


def test_gzip_many_members_decompress_linearly(counting):
    data = gzip.compress(b"hello") + EMPTY_MEMBER * MEMBERS
    assert compression.decompress("gzip", data, max_size=1 << 20) == b"hello"
    assert counting.fed <= 8 * len(data)


@pytest.mark.parametrize("make", [many_member_v2, many_member_v1])
def test_records_path_is_linear(counting, make):
    data = make()
    recs = [r.value for b in kafkawire.iter_batches(data) for r in b]
    assert len(recs) in (2, 3)
    assert counting.fed <= 8 * len(data)


@pytest.mark.parametrize("make", [many_member_v2, many_member_v1])
def test_columnar_path_is_linear(counting, make):
    data = make()
    chunk = decode_columns(data)
    assert len(chunk) in (2, 3)
    assert counting.fed <= 8 * len(data)


@pytest.mark.parametrize("make", [many_member_v2, many_member_v1])
@pytest.mark.parametrize("argv", [["dump", "--deep-iteration", "--print-data-log", "--files"],
                                  ["verify", "--deep", "--no-progress"]])
def test_cli_paths_are_linear(counting, capsys, tmp_path, make, argv):
    data = make()
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    code = main(argv + [str(path)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert code == 0, (out, err)
    # a command may inflate a wrapper more than once; each pass must be linear
    assert counting.fed <= 32 * len(data)
