"""The dump formatter kernels (``K.dump_batches``/``K.dump_records``).

``kafkawire dump --deep-iteration`` renders plain v2 batches with them and
every other batch through batch objects; these tests hold the two paths to
the same bytes on many kinds of batches, the two kernel twins to the same
results (hostile input included), and the kernels to their contract.
"""
from __future__ import annotations

import random

import pytest

from kafkawire import _dumpfmt_common as FMT
from kafkawire import _kernels
from kafkawire.cli import dump as dumpmod
from kafkawire.cli import main
from kafkawire.errors import CorruptRecordError
from kafkawire.records import BatchBuilder, control_batch

INT32_MAX = 2 ** 31 - 1
HEADER_KEYS = ["plain", 'qu"ote', "back\\slash", "new\nline", "ctl\x01\x1f\x7f", "ключ", "🙂",
               "tab\tcr\rbs\bff\f", ""]


def _plain(base_offset, n, rng, **kw):
    b = BatchBuilder(base_offset=base_offset, **kw)
    for i in range(n):
        key = None if i % 5 == 3 else (b"" if i % 7 == 2 else b"key-%d" % (base_offset + i))
        value = None if i % 6 == 4 else bytes(rng.choice(b"abcxyz\"\\\n\x00 ") for _ in range(
            rng.randrange(0, 40)))
        headers = []
        if i % 3 == 1:
            headers = [(rng.choice(HEADER_KEYS), None if j % 2 else b"v%d" % j)
                       for j in range(rng.randrange(1, 4))]
        b.append(value, key=key, timestamp=1_700_000_000_000 + rng.randrange(-5000, 5000),
                 headers=headers)
    return b.build()


def segment_batches(seed: int = 1):
    """A segment mixing every kind of batch the dump meets, as a list of batch bytes."""
    rng = random.Random(seed)
    out, off = [], 0

    def add(raw, n):
        nonlocal off
        out.append(raw)
        off += n

    add(_plain(off, 20, rng, partition_leader_epoch=3), 20)
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        add(_plain(off, 15, rng, compression=codec), 15)
    add(_plain(off, 6, rng, timestamp_type="LogAppendTime", log_append_time=1_800_000_000_000), 6)
    add(_plain(off, 6, rng, compression="lz4", timestamp_type="LogAppendTime",
               log_append_time=1_800_000_000_001), 6)
    add(_plain(off, 8, rng, producer_id=42, producer_epoch=3, base_sequence=INT32_MAX - 3,
               is_transactional=True), 8)
    add(_plain(off, 4, rng, delete_horizon=1_700_000_009_999), 4)
    add(control_batch("commit", base_offset=off, producer_id=42, producer_epoch=3,
                      coordinator_epoch=9, timestamp=5), 1)
    add(control_batch("abort", base_offset=off, producer_id=42, producer_epoch=3), 1)
    gap = BatchBuilder(base_offset=off + 10)           # compaction gaps, inside and before
    gap.append(b"a", key=b"k", timestamp=1, offset=off + 10)
    gap.append(b"b", key=None, timestamp=2, offset=off + 13)
    add(gap.build(), 14)
    bad = BatchBuilder(base_offset=off)                # needs Java's UTF-8 replacement
    bad.append(b"\xff\xfe ok \xed\xa0\x80", key=b"k\xc3", timestamp=3)
    bad.append(b"fine", key=b"\xe2\x82", timestamp=4)
    add(bad.build(), 2)
    uni = BatchBuilder(base_offset=off)
    uni.append("héllo wörld 🙂".encode(), key="ключ".encode(), timestamp=5,
               headers=[("🙂", "ü".encode())])
    add(uni.build(), 1)
    for magic in (0, 1):
        for codec in ("none", "gzip"):
            lb = BatchBuilder(magic=magic, compression=codec, base_offset=off)
            lb.append(b"legacy", key=b"lk", timestamp=7)
            lb.append(b"two", key=None, timestamp=8)
            add(lb.build(), 2)
    big = BatchBuilder(base_offset=2 ** 62, producer_id=2 ** 40, producer_epoch=-1)
    big.append(b"x" * 300, key=b"y" * 200, timestamp=-1)
    big.append(b"", key=None, timestamp=2 ** 62)
    out.append(big.build())
    return out


def run_dump(capsys, monkeypatch, path, flags, formatter):
    monkeypatch.setattr(dumpmod, "FORMATTER", formatter)
    code = main(["dump", "--files", str(path), "--no-progress", *flags])
    out, err = capsys.readouterr()
    return code, out, err


FLAG_SETS = [[], ["--json"], ["--deep-iteration"], ["--print-data-log"],
             ["--deep-iteration", "--json"], ["--print-data-log", "--json"]]


@pytest.mark.parametrize("flags", FLAG_SETS, ids=" ".join)
@pytest.mark.parametrize("tail", ["", "partial", "zeros", "flipped"])
def test_formatter_output_equals_the_batch_object_path(capsys, monkeypatch, tmp_path, flags, tail):
    batches = segment_batches()
    data = bytearray(b"".join(batches))
    if tail == "partial":
        data += batches[0][:40]
    elif tail == "zeros":
        data += bytes(100)
    elif tail == "flipped":
        data[len(batches[0]) + 100] ^= 0x40   # inside the gzip batch's payload
        data[30] ^= 0x01                       # the first batch's timestamp: CRC mismatch
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(data))
    general = run_dump(capsys, monkeypatch, path, flags, False)
    formatted = run_dump(capsys, monkeypatch, path, flags, True)
    assert formatted == general
    if tail == "":
        deep = "--deep-iteration" in flags or "--print-data-log" in flags
        assert general[0] == 0
        assert ("| offset: " in general[1] or '"type":"record"' in general[1]) == deep


@pytest.mark.parametrize("flags", FLAG_SETS, ids=lambda f: " ".join(f) or "shallow")
def test_formatter_chunks_many_batches(capsys, monkeypatch, tmp_path, flags):
    rng = random.Random(7)
    batches = [_plain(i * 50, 50, rng) for i in range(60)]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(batches))
    monkeypatch.setattr(dumpmod, "_CHUNK", 3000)   # several batches per call, many calls
    general = run_dump(capsys, monkeypatch, path, flags, False)
    formatted = run_dump(capsys, monkeypatch, path, flags, True)
    assert formatted == general
    assert general[1].count("\n") > (60 if "--deep-iteration" not in flags
                                      and "--print-data-log" not in flags else 3000)


def _recompressed_with_damage(raw: bytes, codec: str, rng: random.Random) -> bytes:
    """``raw`` (an uncompressed v2 batch) with a byte or two of its records changed,
    then compressed with ``codec`` and given a valid CRC: only decoding finds the damage."""
    import struct
    from kafkawire.compression import compress
    records = bytearray(raw[61:])
    for _ in range(rng.randrange(1, 3)):
        records[rng.randrange(len(records))] = rng.randrange(256)
    payload = compress(codec, bytes(records))
    head = bytearray(raw[:61])
    head[8:12] = struct.pack(">i", 49 + len(payload))
    attrs = struct.unpack_from(">h", head, 21)[0]
    struct.pack_into(">h", head, 21, (attrs & ~7) | ("none", "gzip", "snappy", "lz4",
                                                      "zstd").index(codec))
    out = bytearray(head + payload)
    crc = _kernels._load("pure")["crc"].crc32c
    out[17:21] = crc(out, 21, len(out)).to_bytes(4, "big")
    return bytes(out)


@pytest.mark.parametrize("flags", FLAG_SETS, ids=lambda f: " ".join(f) or "shallow")
def test_damaged_compressed_batches_with_valid_crc_dump_as_the_batch_object_path(
        capsys, monkeypatch, tmp_path, flags):
    """A compressed batch is decompressed once and checked by the formatter's strict decode
    in place of ``validate()``: its ``isvalid`` and lines must stay those of the general path."""
    rng = random.Random(21)
    parts, off = [], 0
    for i in range(40):
        raw = _plain(off, 12, rng, compression="none")
        parts.append(_recompressed_with_damage(raw, ("gzip", "snappy", "lz4", "zstd")[i % 4], rng)
                     if i % 3 else raw)
        off += 12
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(parts))
    general = run_dump(capsys, monkeypatch, path, flags, False)
    formatted = run_dump(capsys, monkeypatch, path, flags, True)
    assert formatted == general
    assert "isvalid: false" in general[1] or '"isvalid":false' in general[1]


def test_max_bytes_and_non_consecutive_report(capsys, monkeypatch, tmp_path):
    batches = segment_batches(3)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(batches))
    for flags in (["--deep-iteration", "--max-bytes", str(len(batches[0]) + 10)],
                  ["--deep-iteration", "--json"]):
        general = run_dump(capsys, monkeypatch, path, flags, False)
        assert run_dump(capsys, monkeypatch, path, flags, True) == general
    assert "Non-consecutive offsets" not in general[2]  # JSON mode: problems as objects
    assert '"nonConsecutiveOffsets"' in general[1]


# -- the kernels themselves ---------------------------------------------------------------
def twins():
    if not _kernels.fast_available():
        pytest.skip("compiled backend not built")
    return _kernels._load("fast")["dumpfmt"], _kernels._load("pure")["dumpfmt"]


def _records_call(mod, buf, args):
    try:
        return ("ok", mod.dump_records(buf, *args))
    except CorruptRecordError as e:
        return ("error", type(e), e.message, e.position, e.offset, e.reason)


def _records_args(raw: bytes, mode: int, prev: int = -1):
    import struct
    (base, _, _, _, _, attrs, last_delta, first_ts, max_ts, _, _, base_seq,
     count) = struct.unpack_from(">qiiBIhiqqqhii", raw, 0)
    return (61, len(raw), count, base, base + last_delta, first_ts, max_ts,
            1 if attrs & 8 else 0, base_seq, mode, prev)


@pytest.mark.one_backend
def test_twins_agree_on_segments_and_hostile_mutations():
    fast, pure = twins()
    rng = random.Random(11)
    batches = segment_batches(5)
    seg = b"".join(batches)
    plain = [b for b in batches if b[16] == 2 and not (b[22] & 0x27)]
    for mode in range(8):
        assert fast.dump_batches(seg, 0, -1, mode, 7, -1, 1 << 20) == \
            pure.dump_batches(seg, 0, -1, mode, 7, -1, 1 << 20)
    for trial in range(400):
        data = bytearray(rng.choice(plain) if trial % 2 else seg[:rng.randrange(len(seg))])
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(data))
            data[i] = rng.randrange(256)
        if trial % 5 == 0:
            data = data[:rng.randrange(len(data) + 1)]
        data = bytes(data)
        mode = trial % 8
        prev = rng.choice([-1, 0, 5])
        assert fast.dump_batches(data, 0, -1, mode, 0, prev, 1 << 20) == \
            pure.dump_batches(data, 0, -1, mode, 0, prev, 1 << 20)
        assert fast.dump_batches(data, 0, -1, mode, 0, prev, 1000) == \
            pure.dump_batches(data, 0, -1, mode, 0, prev, 1000)
        if len(data) >= 61:
            args = _records_args(data, mode)
            assert _records_call(fast, data, args) == _records_call(pure, data, args)


@pytest.mark.one_backend
def test_twins_agree_on_crc_fixed_hostile_records():
    """Mutations with the CRC recomputed, so ``dump_batches`` reads the records too."""
    fast, pure = twins()
    rng = random.Random(12)
    plain = [b for b in segment_batches(6) if b[16] == 2 and not (b[22] & 0x27)]
    crc = _kernels._load("pure")["crc"].crc32c
    for trial in range(300):
        data = bytearray(rng.choice(plain))
        for _ in range(rng.randrange(1, 3)):
            i = rng.randrange(61, len(data))
            data[i] = rng.randrange(256)
        data[17:21] = crc(data, 21, len(data)).to_bytes(4, "big")
        data = bytes(data)
        mode = trial % 8
        assert fast.dump_batches(data, 0, -1, mode, 0, -1, 1 << 20) == \
            pure.dump_batches(data, 0, -1, mode, 0, -1, 1 << 20)
        args = _records_args(data, mode)
        assert _records_call(fast, data, args) == _records_call(pure, data, args)


def test_dump_batches_contract(backend):
    rng = random.Random(2)
    batches = [_plain(i * 10, 10, rng) for i in range(5)]
    seg = b"".join(batches)
    out, stop, prev, status, gaps = _kernels.dump_batches(seg, 0, -1, 0, 0, -1, 1 << 20)
    assert (stop, prev, status, gaps) == (len(seg), 49, FMT.OK, [])
    assert out.count(b"\n| offset: ") == 50 and out.startswith(b"baseOffset: 0 lastOffset: 9 count: 10 ")
    # max_output: stops after whole batches, at least one per call
    pos, parts, prev = 0, [], -1
    while pos < len(seg):
        chunk, pos, prev, status, _ = _kernels.dump_batches(seg, pos, -1, 0, 0, prev, 1)
        assert status in (FMT.FULL, FMT.OK)
        parts.append(chunk)
    assert len(parts) == 5 and b"".join(parts) == out
    # a compressed batch stops the run at its position; a gap is reported
    z = BatchBuilder(compression="gzip", base_offset=60)
    z.append(b"z", timestamp=1)
    seg2 = batches[0] + z.build() + batches[1]
    out2, stop2, prev2, status2, gaps2 = _kernels.dump_batches(seg2, 0, -1, 0, 0, 3, 1 << 20)
    assert (stop2, prev2, status2, gaps2) == (len(batches[0]), 9, FMT.GENERAL, [(3, 0)])
    assert _kernels.dump_batches(seg2, stop2, -1, 0, 0, -1, 1 << 20)[1:4] == \
        (stop2, -1, FMT.GENERAL)
    shallow = _kernels.dump_batches(seg, 0, -1, FMT.SHALLOW, 0, -1, 1 << 20)
    assert shallow == (b"".join(line + b"\n" for line in out.split(b"\n")
                                if line.startswith(b"baseOffset: ")), len(seg), -1, FMT.OK, [])
    with pytest.raises(ValueError):
        _kernels.dump_batches(seg, 0, -1, 8, 0, -1, 1)


def test_dump_records_hostile_input_is_a_typed_error(backend):
    b = BatchBuilder(base_offset=100)
    for i in range(4):
        b.append(b"value%d" % i, key=b"k", timestamp=10 + i, headers=[("h", b"x")])
    raw = b.build()
    args = list(_records_args(raw, 0))
    out, prev, gaps = _kernels.dump_records(raw, *args)
    assert prev == 103 and gaps == [] and out.count(b"\n") == 4
    assert out.splitlines()[1] == (b"| offset: 101 CreateTime: 11 keySize: 1 valueSize: 6 "
                                   b"sequence: -1 headerKeys: [h]")
    for cut in range(62, len(raw), 3):
        cargs = list(args)
        cargs[1] = cut
        with pytest.raises(CorruptRecordError) as ei:
            _kernels.dump_records(raw, *cargs)
        assert ei.value.position is not None and 61 <= ei.value.position <= cut
    cargs = list(args)
    cargs[2] = 10 ** 6   # count impossible for the bytes
    with pytest.raises(CorruptRecordError, match="impossible"):
        _kernels.dump_records(raw, *cargs)
    cargs = list(args)
    cargs[4] = 101       # last offset below the records' offsets
    with pytest.raises(CorruptRecordError, match="outside"):
        _kernels.dump_records(raw, *cargs)
    # a value needing Java's replacement: the caller's general path renders it
    bad = BatchBuilder()
    bad.append(b"\xff", timestamp=1)
    braw = bad.build()
    assert _kernels.dump_records(braw, *_records_args(braw, FMT.PRINT))[0] is None
    assert _kernels.dump_records(braw, *_records_args(braw, 0))[0] is not None


def test_text_streams_without_a_binary_layer_get_the_same_text(capsys, monkeypatch, tmp_path):
    """``Printer.write_bytes`` decodes for streams like StringIO (no ``.buffer``)."""
    import contextlib
    import io
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(segment_batches(9)))
    expected = run_dump(capsys, monkeypatch, path, ["--print-data-log"], True)[1]
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        main(["dump", "--files", str(path), "--no-progress", "--print-data-log"])
    assert sink.getvalue() == expected


def test_json_base64_of_every_length(backend):
    """Keys, values and header values of 0..130 random bytes encode as Python's base64 does
    (the compiled twin takes 12 bytes per step with SIMD where the CPU has it)."""
    import base64
    import json
    rng = random.Random(4)
    b = BatchBuilder()
    expect = []
    for n in range(131):
        v = bytes(rng.randrange(256) for _ in range(n))
        k = bytes(rng.randrange(256) for _ in range(n // 3))
        h = bytes(rng.randrange(256) for _ in range(130 - n))
        b.append(v, key=k, timestamp=n, headers=[("h", h)])
        expect.append([base64.b64encode(x).decode() for x in (k, v, h)])
    raw = b.build()
    lines = _kernels.dump_batches(raw, 0, -1, FMT.JSON, 0, -1, 1 << 20)[0].decode().splitlines()
    got = [[o["key"], o["value"], o["headers"][0][1]] for o in map(json.loads, lines[1:])]
    assert got == expect
