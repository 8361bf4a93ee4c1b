"""RecordBatch.validate()'s one-pass check (the ``check_batch_v2`` kernel): on intact and
damaged batches its verdict is the checked path's, in both backends, and validate()
raises the same error either way."""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkawire import _kernels as K
from kafkawire.errors import CorruptRecordError
from kafkawire.records.batch import RecordBatch
from kafkawire.records.builder import BatchBuilder


def _batch(seed: int, n: int = 30, base_offset: int = 1000) -> bytes:
    """A batch whose records vary in every field's size: null and empty keys, values
    from empty to 20 KB (one- to three-byte length varints), zero to three headers with
    ASCII, non-ASCII and null values."""
    rnd = random.Random(seed)
    bb = BatchBuilder(base_offset=base_offset)
    for i in range(n):
        key = None if rnd.random() < 0.2 else bytes(rnd.randrange(256) for _ in range(rnd.randrange(20)))
        size = rnd.choice([0, 1, 7, 63, 64, 100, 200, 9000, 20000]) if rnd.random() < 0.3 \
            else rnd.randrange(40)
        value = None if rnd.random() < 0.1 else bytes(rnd.randrange(256) for _ in range(size))
        headers = [(rnd.choice(["h", "trace-id", "content-type", "é-clé", "a" * 20]),
                    None if rnd.random() < 0.2 else b"x" * rnd.randrange(30))
                   for _ in range(rnd.randrange(4))]
        bb.append(value, key=key, headers=headers, timestamp=1_700_000_000_000 + i * rnd.randrange(1, 5000))
    return bb.build()


def _recrc(data: bytearray) -> bytes:
    """The batch with its CRC recomputed (so the record checks are what decides)."""
    data[17:21] = K.crc32c(bytes(data), 21, len(data)).to_bytes(4, "big")
    return bytes(data)


def _fields(data: bytes):
    return (int.from_bytes(data[17:21], "big"), int.from_bytes(data[57:61], "big", signed=True),
            int.from_bytes(data[0:8], "big", signed=True),
            int.from_bytes(data[0:8], "big", signed=True)
            + int.from_bytes(data[23:27], "big", signed=True))


def _outcome(call):
    """("ok",) or the error's position, offset, reason and message."""
    try:
        call()
    except CorruptRecordError as exc:
        return ("error", exc.position, exc.offset, exc.reason, str(exc))
    return ("ok",)


def _checked_verdict(data: bytes):
    """validate()'s outcome through the front end's checks alone (None: no batch here)."""
    try:
        b = RecordBatch.from_buffer(data)
    except CorruptRecordError:
        return None
    return _outcome(b._validate_checked)


def _validate_outcome(data: bytes):
    return _outcome(RecordBatch.from_buffer(data).validate)


def _damaged(seed: int):
    """Intact batches, then ones with bytes changed in the records (CRC recomputed), with
    the CRC left stale, with the count or last offset delta changed, cut or extended."""
    rnd = random.Random(seed)
    base = _batch(seed)
    yield base
    for _ in range(60):
        d = bytearray(base)
        for _ in range(rnd.randrange(1, 3)):
            d[rnd.randrange(61, len(d))] = rnd.choice([0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF,
                                                       rnd.randrange(256)])
        yield _recrc(d)
        if rnd.random() < 0.2:
            yield bytes(d)   # the CRC no longer matches
    for count in (0, 29, 31, -1, 1 << 30):
        d = bytearray(base)
        d[57:61] = count.to_bytes(4, "big", signed=True)
        yield _recrc(d)
    for delta in (0, 10, 28, 29, 30, -1):
        d = bytearray(base)
        d[23:27] = delta.to_bytes(4, "big", signed=True)
        yield _recrc(d)
    for cut in (1, 2, 5, 17, 40):
        d = bytearray(base[:-cut])
        d[8:12] = (len(d) - 12).to_bytes(4, "big")
        yield _recrc(d)
    for extra in (b"\0", b"\x02", b"\0" * 20):
        d = bytearray(base + extra)
        d[8:12] = (len(d) - 12).to_bytes(4, "big")
        yield _recrc(d)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_pass_check_agrees_with_the_checked_path(backend, seed):
    for data in _damaged(seed):
        verdict = _checked_verdict(data)
        if verdict is None:
            continue
        crc, count, base, last = _fields(data)
        ok = K.check_batch_v2(data, 0, len(data), crc, count, base, last)
        assert ok == (verdict == ("ok",)), (seed, data.hex())
        # validate() raises exactly what the checked path raises
        assert _validate_outcome(data) == verdict


def test_one_pass_check_on_every_cut_of_a_batch(backend):
    """Cut at every length (the batch's length field and CRC rewritten): the records near
    the region's end are where the one-pass walk hands over to the checked reader."""
    bb = BatchBuilder(base_offset=0)
    for i in range(12):
        bb.append(b"v" * (i * 11 % 90), key=None if i % 4 == 0 else b"k%d" % i,
                  headers=[("h", b"x")] if i % 3 == 0 else None)
    base = bb.build()
    for cut in range(1, len(base) - 61):
        d = bytearray(base[:len(base) - cut])
        d[8:12] = (len(d) - 12).to_bytes(4, "big")
        data = _recrc(d)
        verdict = _checked_verdict(data)
        if verdict is None:
            continue
        crc, count, base_offset, last = _fields(data)
        assert K.check_batch_v2(data, 0, len(data), crc, count, base_offset, last) == \
            (verdict == ("ok",))


def test_one_pass_check_twins_agree():
    if not K.fast_available():
        pytest.skip("compiled backend not built")
    fast, pure = K._load("fast")["records"], K._load("pure")["records"]
    for data in _damaged(4):
        crc, count, base, last = _fields(data)
        for args in ((data, 0, len(data), crc, count, base, last),
                     (b"\0" * 7 + data, 7, len(data), crc, count, base, last),
                     (data, 0, len(data) + 1, crc, count, base, last),   # past the buffer
                     (data, 0, 60, crc, count, base, last),
                     (data, -1, len(data), crc, count, base, last),
                     (data, 0, len(data), crc ^ 1, count, base, last),
                     # numbers outside the header's ranges are no batch, not an error
                     (data, 0, len(data), crc, count, base, 1 << 70),
                     (data, 0, 1 << 70, crc, count, base, last),
                     (data, -(1 << 70), len(data), crc, count, base, last),
                     (data, 0, len(data), 1 << 40, count, base, last),
                     (data, 0, len(data), -1, count, base, last),
                     (data, 0, len(data), crc, -5, base, last),
                     (data, 0, len(data), crc, count, last + 1, last)):
            assert fast.check_batch_v2(*args) == pure.check_batch_v2(*args), args[1:]


def test_one_pass_check_on_a_batch_inside_a_larger_buffer(backend):
    data = _batch(5)
    crc, count, base, last = _fields(data)
    buf = bytearray(b"\xff" * 100) + data + b"\x80" * 100   # varint-like bytes around it
    assert K.check_batch_v2(bytes(buf), 100, len(data), crc, count, base, last)
    assert K.check_batch_v2(memoryview(buf), 100, len(data), crc, count, base, last)
    assert not K.check_batch_v2(bytes(buf), 100, len(data) + 1, crc, count, base, last)


def test_validate_of_control_and_compressed_batches_still_checks_them(backend):
    bb = BatchBuilder(base_offset=3, compression="gzip")
    for i in range(5):
        bb.append(b"v%d" % i, key=b"k")
    data = bb.build()
    RecordBatch.from_buffer(data).validate()
    from kafkawire.records.builder import control_batch
    ctl = control_batch("commit", base_offset=9, producer_id=5, producer_epoch=1,
                        coordinator_epoch=2)
    b = RecordBatch.from_buffer(ctl)
    b.validate()
    assert b.control_type == "commit"


def _verdicts_agree(data: bytes, prefix: bytes = b"") -> None:
    """Both backends' one-pass verdicts (on the batch alone, and at the end of a larger
    buffer) equal the checked path's, and validate() raises the same error in both."""
    crc, count, base_offset, last = _fields(data)
    outcomes = set()
    previous = K.backend
    for name in (("fast", "pure") if K.fast_available() else ("pure",)):
        K.use(name)
        try:
            verdict = _checked_verdict(data)
            if verdict is None:
                continue
            ok = verdict == ("ok",)
            assert K.check_batch_v2(data, 0, len(data), crc, count, base_offset, last) == ok
            # the batch ends exactly where the buffer does
            assert K.check_batch_v2(memoryview(prefix + data), len(prefix), len(data), crc, count,
                                    base_offset, last) == ok
            outcomes.add(_validate_outcome(data))
        finally:
            K.use(previous)
    assert len(outcomes) <= 1


@pytest.mark.one_backend
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 50), edits=st.lists(st.tuples(st.integers(0, 1 << 20),
                                                          st.integers(0, 255)), max_size=4),
       cut=st.integers(0, 30), stale_crc=st.booleans())
def test_one_pass_check_hypothesis(seed, edits, cut, stale_crc):
    """Random edits, cuts and stale CRCs: both backends' one-pass verdicts equal the checked
    path's, and validate() raises the same typed error in both."""
    base = _batch(seed, n=8 + seed % 13)
    d = bytearray(base[:len(base) - cut] if cut < len(base) - 61 else base)
    d[8:12] = (len(d) - 12).to_bytes(4, "big")
    for pos, val in edits:
        d[61 + pos % (len(d) - 61)] = val
    data = bytes(d) if stale_crc else _recrc(d)
    _verdicts_agree(data)


# -- runs of records of one shape ------------------------------------------------------
# The one-pass walk checks a record whose key, value and headers have the layout of the
# record walked before it by comparing a few bytes (the length varints, the header keys'
# top bits) instead of walking it: these batches are made of such runs, then damaged.

_KEYS = ["", "h", "trace-id", "content-type", "k" * 8, "k" * 9, "x" * 16, "y" * 17,
         "z" * 32, "w" * 33, "é-clé", "kéy"]
_shape = st.tuples(
    st.sampled_from([None, 0, 1, 7, 16, 70, 200]),                       # key length
    st.sampled_from([None, 0, 1, 5, 63, 64, 100, 300, 9000]),            # value length
    st.lists(st.tuples(st.sampled_from(_KEYS), st.sampled_from([None, 0, 1, 16, 64, 130])),
             max_size=5))                                                # headers


def _shaped_batch(rnd: random.Random, shapes, pattern, base_offset: int = 77) -> bytes:
    """Records of the given shapes (the pattern says which, one per record), every byte
    of their keys, values and header values random, timestamps and offsets spread so the
    deltas take one, two and three bytes."""
    bb = BatchBuilder(base_offset=base_offset)
    offset = base_offset
    for i, which in enumerate(pattern):
        klen, vlen, headers = shapes[which % len(shapes)]

        def blob(n):
            return None if n is None else bytes(rnd.randrange(256) for _ in range(n))
        bb.append(blob(vlen), key=blob(klen), headers=[(k, blob(n)) for k, n in headers],
                  timestamp=1_700_000_000_000 + i * rnd.choice([0, 1, 40, 1000, 70000]),
                  offset=offset)
        offset += rnd.choice([1, 1, 1, 2, 100])
    return bb.build()


@pytest.mark.one_backend
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 1 << 16), shapes=st.lists(_shape, min_size=1, max_size=3),
       pattern=st.lists(st.integers(0, 2), min_size=1, max_size=90),
       edits=st.lists(st.tuples(st.integers(0, 1 << 20),
                                st.sampled_from([0x00, 0x01, 0x02, 0x7F, 0x80, 0xC3, 0xFF])),
                      max_size=3),
       utf8_at=st.none() | st.integers(0, 1 << 20), cut=st.integers(0, 3),
       prefix=st.sampled_from([b"", b"\x80" * 9, b"\xff" * 3]))
def test_one_pass_check_on_runs_of_one_shape(seed, shapes, pattern, edits, utf8_at, cut, prefix):
    """Runs of same-shaped records, intact or with bytes changed (a length varint, a header
    key's byte, two bytes made a valid non-ASCII character), or cut short: the verdicts
    and errors are the checked path's."""
    rnd = random.Random(seed)
    d = bytearray(_shaped_batch(rnd, shapes, pattern))
    if cut and len(d) - cut > 61:
        d = d[:len(d) - cut]
        d[8:12] = (len(d) - 12).to_bytes(4, "big")
    for pos, val in edits:
        d[61 + pos % (len(d) - 61)] = val
    if utf8_at is not None and len(d) > 62:
        at = 61 + utf8_at % (len(d) - 62)
        d[at:at + 2] = "é".encode()
    _verdicts_agree(_recrc(d), prefix)


@pytest.mark.parametrize("seed", range(4))
def test_one_pass_check_on_every_byte_of_a_run(backend, seed):
    """A run of records with three headers (keys of 8, 6 and 12 ASCII bytes): every byte
    of one record in the middle of the run set to values that change a varint, a key's
    character or nothing; the verdict is the checked path's each time."""
    rnd = random.Random(seed)
    shape = (16, 100, [("trace-id", 16), ("source", 5), ("content-type", 16)])
    base = _shaped_batch(rnd, [shape], [0] * 40)
    length = (len(base) - 61) // 40   # about one record
    middle = 61 + 20 * length
    for pos in range(middle, middle + length + 4):
        for val in (0x00, 0x01, 0x7F, 0x80, 0xC3, base[pos] ^ 0x80, base[pos] ^ 0x02):
            d = bytearray(base)
            d[pos] = val
            data = _recrc(d)
            verdict = _checked_verdict(data)
            crc, count, base_offset, last = _fields(data)
            assert K.check_batch_v2(data, 0, len(data), crc, count, base_offset, last) == \
                (verdict == ("ok",)), (pos, val)


def test_one_pass_check_of_records_with_nothing_after_the_offset_delta(backend):
    """A record whose length ends right after its offset delta (no key, value or header
    count): refused, first in a batch, after a run of one shape, and last."""
    run = BatchBuilder(base_offset=0)
    for i in range(30):
        run.append(b"v" * 20, key=b"k" * 5, headers=[("h", b"x")], timestamp=1000 + i)
    good = run.build()
    region = bytearray(good[61:])
    # length 6: attributes, a four-byte timestamp delta, a one-byte offset delta
    empty = bytes([12, 0, 0x80, 0x80, 0x80, 0x01, 0])
    for at in (0, len(region) // 2, len(region)):
        recs = region[:at] + empty + region[at:]
        d = bytearray(good[:61] + recs)
        d[8:12] = (len(d) - 12).to_bytes(4, "big")
        d[57:61] = (31).to_bytes(4, "big")
        data = _recrc(d)
        verdict = _checked_verdict(data)
        assert verdict is not None and verdict != ("ok",)
        crc, count, base_offset, last = _fields(data)
        assert not K.check_batch_v2(data, 0, len(data), crc, count, base_offset, last)


def test_one_pass_check_of_batches_of_every_size_near_crc_blocks(backend):
    """The CRC is computed alongside the walk in 768-byte blocks (where the CPU has a
    crc32 instruction, for records that are neither tiny nor huge): batches whose CRC'd
    bytes end just before, at and after a block's end, with small, middling and large
    records, at several alignments, pass with their CRC and fail with another."""
    for per_record in (10, 60, 700):
        for total in list(range(740, 800)) + list(range(1500, 1560)) + list(range(2290, 2320)):
            bb = BatchBuilder(base_offset=5)
            size = 61
            while size + per_record + 40 < total:
                bb.append(b"v" * per_record, key=b"k", timestamp=1000)
                size = len(bb.build())
            # the last record's value fills the batch to `total` bytes (about: a length
            # varint may take a byte more)
            bb.append(b"w" * max(0, total - size - 10), key=None, timestamp=1000)
            data = bb.build()
            crc, count, base_offset, last = _fields(data)
            assert K.check_batch_v2(data, 0, len(data), crc, count, base_offset, last), len(data)
            assert not K.check_batch_v2(data, 0, len(data), crc ^ 0x400, count, base_offset, last)
            for pad in (1, 3, 6):   # the CRC'd bytes start at other alignments
                assert K.check_batch_v2(b"\0" * pad + data, pad, len(data), crc, count,
                                        base_offset, last)
