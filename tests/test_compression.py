"""kafkawire.compression: Kafka's codecs, their quirks, bounds and error types."""
from __future__ import annotations

import gzip
import os
import struct
import sys
import zlib

import lz4.block
import lz4.frame
import pytest
import snappy

from kafkawire import compression as C
from kafkawire.errors import (CorruptRecordError, KafkaWireError, RecordTooLargeError,
                              UnsupportedCodecError)

# Codecs do not touch the kernels: one run is enough.
pytestmark = pytest.mark.one_backend

DATA = b"".join(b"key-%06d|value-%06d|" % (i, i * 7) + os.urandom(8) for i in range(4000))
CASES = [(c, m) for c in C.CODECS for m in (0, 1, 2) if not (c == "zstd" and m < 2)]


@pytest.mark.parametrize("codec,magic", CASES)
@pytest.mark.parametrize("payload", [b"", b"x", DATA, os.urandom(200_000)])
def test_round_trip(codec, magic, payload):
    packed = C.compress(codec, payload, magic=magic)
    assert C.decompress(codec, packed, magic=magic) == payload
    assert C.decompress(C.codec_id(codec), memoryview(bytearray(packed)), magic=magic) == payload


def test_codec_ids():
    assert [C.codec_id(n) for n in C.CODECS] == [0, 1, 2, 3, 4]
    assert [C.codec_name(i) for i in range(5)] == list(C.CODECS)
    assert C.codec_id("LZ4") == 3 and C.codec_name("zstd") == "zstd"
    for bad in (5, 7, -1, "brotli"):
        with pytest.raises(UnsupportedCodecError):
            C.codec_id(bad)
    with pytest.raises(UnsupportedCodecError):
        C.decompress(6, b"")


def test_zstd_needs_magic_2():
    with pytest.raises(UnsupportedCodecError, match="magic 2"):
        C.compress("zstd", DATA, magic=1)


def test_snappy_writes_xerial_and_reads_raw():
    packed = C.compress("snappy", DATA)
    assert packed[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", packed[8:16]) == (1, 1)
    # 32 KiB input blocks, each length-prefixed big-endian
    pos, blocks = 16, []
    while pos < len(packed):
        (n,) = struct.unpack_from(">i", packed, pos)
        blocks.append(snappy.uncompress(packed[pos + 4:pos + 4 + n]))
        pos += 4 + n
    assert b"".join(blocks) == DATA and all(len(b) == 32768 for b in blocks[:-1])
    assert C.decompress("snappy", snappy.compress(DATA)) == DATA


def test_lz4_frame_shape_and_kafka_3160_checksum():
    good = C.compress("lz4", DATA, magic=1)
    broken = C.compress("lz4", DATA, magic=0)
    assert good[:4] == b"\x04\x22\x4d\x18"
    assert good[4] & 0x20 and not good[4] & 0x1C     # independent blocks, no checksums/size
    assert (good[5] >> 4) & 7 == 4                    # 64 KiB blocks
    assert good[6] == (C.xxh32(good[4:6]) >> 8) & 0xFF
    assert broken[6] == (C.xxh32(broken[0:6]) >> 8) & 0xFF
    assert good[7:] == broken[7:] and good[6] != broken[6]
    assert lz4.frame.decompress(good) == DATA
    # magic 0 accepts both checksums (Kafka skips the check); magic >= 1 only the right one
    assert C.decompress("lz4", broken, magic=0) == DATA
    assert C.decompress("lz4", good, magic=0) == DATA
    for magic in (1, 2):
        with pytest.raises(CorruptRecordError) as info:
            C.decompress("lz4", broken, magic=magic)
        assert info.value.reason == "compression"


@pytest.mark.parametrize("opts", [
    dict(block_linked=True), dict(block_checksum=True), dict(content_checksum=True),
    dict(store_size=True), dict(block_size=lz4.frame.BLOCKSIZE_MAX4MB),
])
def test_lz4_frames_from_other_writers(opts):
    payload = DATA * 3
    frame = lz4.frame.compress(payload, **opts)
    assert C.decompress("lz4", frame) == payload


def test_lz4_uncompressed_blocks():
    payload = os.urandom(100_000)
    frame = lz4.frame.compress(payload, store_size=False)
    assert C.decompress("lz4", frame) == payload


def test_gzip_members_and_formats():
    two = gzip.compress(DATA[:1000]) + gzip.compress(DATA[1000:])
    assert C.decompress("gzip", two) == DATA
    assert C.decompress("gzip", gzip.compress(DATA) + b"\x00\x00trailing") == DATA


def test_zstd_without_content_size_and_multi_frame():
    import zstandard
    cobj = zstandard.ZstdCompressor().compressobj()
    streamed = cobj.compress(DATA) + cobj.flush()
    assert zstandard.frame_content_size(streamed) == -1
    assert C.decompress("zstd", streamed) == DATA
    two = zstandard.ZstdCompressor().compress(DATA[:5]) + streamed
    assert C.decompress("zstd", two) == DATA[:5] + DATA


@pytest.mark.parametrize("codec", C.CODECS)
def test_bounded(codec):
    bomb = b"\x00" * (4 << 20)
    packed = C.compress(codec, bomb)
    assert len(packed) < len(bomb) or codec == "none"
    with pytest.raises(RecordTooLargeError) as info:
        C.decompress(codec, packed, max_size=1 << 20)
    assert info.value.reason == "too_large"
    assert C.decompress(codec, packed, max_size=len(bomb)) == bomb


def test_bounded_raw_snappy_and_lz4_content_size():
    bomb = b"\x00" * (4 << 20)
    with pytest.raises(RecordTooLargeError):
        C.decompress("snappy", snappy.compress(bomb), max_size=1000)
    with pytest.raises(RecordTooLargeError):
        C.decompress("lz4", lz4.frame.compress(bomb, store_size=True), max_size=1000)


@pytest.mark.parametrize("codec,magic", CASES)
def test_damage_raises_typed_errors(codec, magic):
    if codec == "none":
        return
    packed = C.compress(codec, DATA[:3000], magic=magic)
    for cut in range(0, len(packed), max(1, len(packed) // 60)):
        try:
            C.decompress(codec, packed[:cut], magic=magic)
        except KafkaWireError as exc:
            assert isinstance(exc, CorruptRecordError)
    rnd = __import__("random").Random(7)
    for _ in range(60):
        flipped = bytearray(packed)
        i = rnd.randrange(len(flipped))
        flipped[i] ^= 1 << rnd.randrange(8)
        try:
            C.decompress(codec, bytes(flipped), magic=magic)
        except KafkaWireError:
            pass


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_garbage_is_corrupt(codec):
    with pytest.raises(CorruptRecordError) as info:
        C.decompress(codec, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x7f\xff\xff\xff"
                     if codec == "snappy" else b"not compressed at all, no")
    assert info.value.reason == "compression"


@pytest.mark.parametrize("codec,module,hint", [
    ("zstd", "zstandard", "kafkawire[zstd]"), ("snappy", "snappy", "python-snappy"),
    ("lz4", "lz4", "lz4"),
])
def test_missing_library_names_the_install(monkeypatch, codec, module, hint):
    monkeypatch.setattr(C, "_libs", {})
    for name in list(sys.modules):
        if name == module or name.startswith(module + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)
    assert not C.available(codec)
    with pytest.raises(UnsupportedCodecError, match=r"pip install .*" + hint.replace("[", r"\[")):
        C.decompress(codec, b"\x00\x01")
    with pytest.raises(UnsupportedCodecError):
        C.compress(codec, b"abc")


def test_gzip_is_java_compatible_format():
    packed = C.compress("gzip", DATA, level=1)
    assert packed[:2] == b"\x1f\x8b"
    assert zlib.decompress(packed, 31) == DATA


def test_snappy_impossible_length_claim_is_corrupt():
    claim = bytes([0x80, 0x80, 0x80, 0x40]) + b"\x00" * 10     # says 128 MiB, holds 10 bytes
    with pytest.raises(CorruptRecordError) as info:
        C.decompress("snappy", claim)
    assert info.value.reason == "compression"
    framed = C.XERIAL_MAGIC + struct.pack(">iii", 1, 1, len(claim)) + claim
    with pytest.raises(CorruptRecordError):
        C.decompress("snappy", framed)
