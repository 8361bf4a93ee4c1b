"""BatchBuilder, control_batch and set_base_offset: layout, validation, exact round trips."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkawire
from kafkawire.errors import UnsupportedCodecError, UnsupportedVersionError
from kafkawire.records.builder import BatchBuilder, control_batch, set_base_offset

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
T0 = 1_700_000_000_000


def _records(data):
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers))
            for b in kafkawire.iter_batches(data, verify_crc=True) for r in b]


def test_exported_from_records():
    import kafkawire.records as R
    assert R.BatchBuilder is BatchBuilder and R.control_batch is control_batch
    assert R.set_base_offset is set_base_offset


def test_v2_header_layout():
    b = BatchBuilder(base_offset=10, producer_id=7, producer_epoch=2, base_sequence=5,
                     is_transactional=True, partition_leader_epoch=3, compression="gzip")
    assert b.append(b"a", timestamp=T0) == 10
    assert b.append(b"b", timestamp=T0 - 9, offset=13) == 13
    assert b.append(b"c", timestamp=T0 + 4) == 14
    assert len(b) == 3 and b.last_offset == 14
    data = b.build()
    (base, length, ple, magic, crc, attrs, last_delta, base_ts, max_ts, pid, epoch, seq,
     count) = struct.unpack_from(">qiibIhiqqqhii", data)
    assert (base, length, ple, magic) == (10, len(data) - 12, 3, 2)
    assert attrs == 0x10 | 1 and last_delta == 4
    assert (base_ts, max_ts) == (T0, T0 + 4)     # base is the first record's, not the minimum
    assert (pid, epoch, seq, count) == (7, 2, 5, 3)
    from kafkawire._pure.crc import crc32c
    assert crc == crc32c(data, 21, -1)
    (batch,) = kafkawire.iter_batches(data)
    batch.validate()
    assert [r.offset for r in batch] == [10, 13, 14]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_round_trip_every_magic_and_codec(magic, codec):
    if codec == "zstd" and magic < 2:
        with pytest.raises(UnsupportedCodecError):
            BatchBuilder(magic, codec)
        return
    b = BatchBuilder(magic, codec, base_offset=5)
    rows = [(b"v%d" % i if i % 3 else None, None if i % 4 == 0 else b"k%d" % i, T0 + i)
            for i in range(50)]
    for value, key, ts in rows:
        b.append(value, key=key, timestamp=ts,
                 headers=[("h", b"%d" % ts)] if magic == 2 and ts % 2 else ())
    got = _records(b.build())
    want = [(5 + i, -1 if magic == 0 else ts, key, value,
             [("h", b"%d" % ts)] if magic == 2 and ts % 2 else [])
            for i, (value, key, ts) in enumerate(rows)]
    assert got == want


def test_log_append_time():
    for magic in (1, 2):
        for codec in ("none", "lz4"):
            b = BatchBuilder(magic, codec, timestamp_type="LogAppendTime", log_append_time=T0 + 99)
            for i in range(3):
                b.append(b"x", timestamp=T0 + i)
            batches = list(kafkawire.iter_batches(b.build(), verify_crc=True))
            assert all(x.timestamp_type == "LogAppendTime" and x.max_timestamp == T0 + 99
                       for x in batches)
            assert [r.timestamp for x in batches for r in x] == [T0 + 99] * 3


def test_delete_horizon_negative_deltas():
    b = BatchBuilder(delete_horizon=T0 + 10_000)
    b.append(b"a", timestamp=T0)
    b.append(b"b", timestamp=T0 + 5)
    (batch,) = kafkawire.iter_batches(b.build(), verify_crc=True)
    assert batch.delete_horizon == T0 + 10_000 and batch.attributes & 0x40
    assert batch.first_timestamp == T0 + 10_000 and batch.max_timestamp == T0 + 5
    assert [r.timestamp for r in batch] == [T0, T0 + 5]


def test_empty_and_thinned_batches():
    b = BatchBuilder(base_offset=90, producer_id=5, producer_epoch=0, base_sequence=3)
    (batch,) = kafkawire.iter_batches(b.build(last_offset=99), verify_crc=True)
    assert (batch.record_count, batch.last_offset, batch.first_timestamp) == (0, 99, -1)
    assert batch.records() == []
    b = BatchBuilder(base_offset=60, compression="snappy")
    b.append(b"x", timestamp=T0)
    b.append(b"y", timestamp=T0, offset=65)
    (batch,) = kafkawire.iter_batches(b.build(last_offset=70), verify_crc=True)
    assert batch.last_offset == 70 and [r.offset for r in batch] == [60, 65]
    assert BatchBuilder(1).build() == b""


@pytest.mark.parametrize("marker", ["commit", "abort"])
def test_control_batch(marker):
    data = control_batch(marker, base_offset=77, producer_id=9, producer_epoch=4,
                         coordinator_epoch=12, timestamp=T0)
    (batch,) = kafkawire.iter_batches(data, verify_crc=True)
    assert batch.is_control and batch.is_transactional
    assert (batch.control_type, batch.coordinator_epoch) == (marker, 12)
    assert (batch.producer_id, batch.producer_epoch, batch.base_offset) == (9, 4, 77)
    with pytest.raises(ValueError):
        control_batch("maybe", producer_id=1, producer_epoch=0)


def test_validation_errors():
    with pytest.raises(UnsupportedVersionError):
        BatchBuilder(3)
    with pytest.raises(ValueError, match="headers"):
        BatchBuilder(1).append(b"x", headers=[("a", b"b")])
    with pytest.raises(ValueError, match="magic 2"):
        BatchBuilder(1, producer_id=4)
    with pytest.raises(ValueError, match="timestamps"):
        BatchBuilder(0, timestamp_type="LogAppendTime")
    with pytest.raises(ValueError):
        BatchBuilder(timestamp_type="Wallclock")
    b = BatchBuilder(base_offset=10)
    b.append(b"x")
    with pytest.raises(ValueError, match="monotonically"):
        b.append(b"y", offset=10)
    with pytest.raises(ValueError, match="monotonically"):
        BatchBuilder(base_offset=10).append(b"y", offset=9)
    with pytest.raises(ValueError, match="2\\^31"):
        BatchBuilder().append(b"z", offset=1 << 31)
    with pytest.raises(TypeError, match="encode"):
        BatchBuilder().append("text")
    with pytest.raises(TypeError):
        BatchBuilder().append(b"v", key=12)
    with pytest.raises(ValueError):
        BatchBuilder(base_offset=5).build(last_offset=4)


def test_default_timestamps_are_now():
    import time
    before = int(time.time() * 1000)
    b = BatchBuilder()
    b.append(b"x")
    (r,) = _records(b.build())
    assert before <= r[1] <= int(time.time() * 1000)
    b0 = BatchBuilder(0)
    b0.append(b"x")
    assert _records(b0.build())[0][1] == -1


@pytest.mark.parametrize("magic,codec", [(2, "none"), (2, "zstd"), (1, "none"), (1, "gzip"),
                                         (0, "none"), (0, "lz4"), (0, "snappy")])
def test_set_base_offset(magic, codec):
    parts = []
    for start in (0, 3):
        b = BatchBuilder(magic, codec, base_offset=start)
        for i in range(3):
            b.append(b"v%d" % i, timestamp=T0 + i, offset=start + (i * 2 if start == 3 else i))
        parts.append(b.build())
    data = b"".join(parts)
    before = [r[0] for r in _records(data)]
    moved = set_base_offset(bytearray(data), 1_000_000)
    after = [r[0] for r in _records(moved)]
    assert after == [o + 1_000_000 for o in before]
    assert [r[2:] for r in _records(moved)] == [r[2:] for r in _records(data)]
    for batch in kafkawire.iter_batches(moved, verify_crc=True):
        batch.validate()
    if not (magic == 0 and codec != "none"):
        assert len(moved) == len(data)


_bytes_or_none = st.one_of(st.none(), st.binary(max_size=40))
_record = st.tuples(_bytes_or_none, _bytes_or_none,
                    st.integers(min_value=-1, max_value=1 << 45),
                    st.lists(st.tuples(st.text(max_size=8), _bytes_or_none), max_size=3),
                    st.integers(min_value=1, max_value=1000))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(_record, max_size=20), codec=st.sampled_from(CODECS),
       base=st.integers(min_value=0, max_value=1 << 60), transactional=st.booleans())
def test_v2_round_trip_property(records, codec, base, transactional):
    b = BatchBuilder(2, codec, base_offset=base, producer_id=3 if transactional else -1,
                     producer_epoch=0 if transactional else -1, is_transactional=transactional)
    offset = base
    want = []
    for key, value, ts, headers, gap in records:
        offset += gap
        b.append(value, key=key, timestamp=ts, headers=headers, offset=offset)
        want.append((offset, ts, key, value, headers))
    data = b.build()
    if not records:
        assert _records(data) == []
        return
    assert _records(data) == want
    # the batch's base offset (not its first record's) becomes 7
    assert [r[0] for r in _records(set_base_offset(data, 7))] == [o - base + 7 for o, *_ in want]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.tuples(_bytes_or_none, _bytes_or_none,
                                  st.integers(min_value=0, max_value=1 << 45),
                                  st.integers(min_value=1, max_value=9)), min_size=1, max_size=15),
       magic=st.sampled_from([0, 1]), codec=st.sampled_from(CODECS[:4]))
def test_legacy_round_trip_property(records, magic, codec):
    b = BatchBuilder(magic, codec, base_offset=100)
    offset = 100
    want = []
    for i, (key, value, ts, gap) in enumerate(records):
        if i:
            offset += gap
        b.append(value, key=key, timestamp=ts, offset=offset)
        want.append((offset, -1 if magic == 0 else ts, key, value, []))
    assert _records(b.build()) == want
