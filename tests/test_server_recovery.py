"""The broker's start-up recovery after an unclean stop, with Kafka's rules: segments wholly
below a partition's recovery point (``recovery-point-offset-checkpoint``) were flushed and
are trusted; the segment holding it and later ones are re-validated, and a damaged batch
there is cut with everything after it, while the data before it stays."""
from __future__ import annotations

import glob
import logging
import os

import pytest

from kafkawire import Log
from kafkawire.log.checkpoints import (CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT,
                                       read_offset_checkpoint, write_offset_checkpoint)
from kafkawire.records import BatchBuilder
from kafkawire.testing import running_broker

pytestmark = pytest.mark.one_backend


def _batch(i: int) -> bytes:
    b = BatchBuilder(2, "none")
    b.append(b"v%05d" % i + b"." * 150, key=b"k%d" % i)
    return b.build()


def _append(broker, topic: str, first: int, count: int) -> None:
    def run():
        for i in range(first, first + count):
            broker.partitions.append(topic, 0, _batch(i))
    broker.call(run)


def _records(folder: str):
    with Log.open(folder) as lg:
        return [(r.offset, r.value[:6]) for r in lg.records()]


def test_unclean_start_revalidates_only_past_the_recovery_point(tmp_path, caplog):
    d = str(tmp_path / "logs")
    folder = os.path.join(d, "t-0")
    with running_broker(d) as b:
        b.create_topic("t", 1, {"segment.bytes": "1024"})
        _append(b, "t", 0, 60)                     # ~10 segments of ~5 batches
        b.call(b.partitions.flush_all)             # recovery point = 60, checkpointed
        point = read_offset_checkpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT))
        assert point[("t", 0)] == 60
        _append(b, "t", 60, 12)                    # a tail past the recovery point
    # Make it look like a crash: no clean-shutdown marker, the recovery point as it was
    # when the last checkpoint was written before the crash.
    os.remove(os.path.join(d, CLEAN_SHUTDOWN_FILE))
    write_offset_checkpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT), point)
    with Log.open(folder) as lg:
        segs = [(s.base_offset, s.path) for s in lg.segments]
        seg_of_66 = max(p for base, p in segs if base <= 66)
        base_66 = max(base for base, p in segs if base <= 66)
        pos = lg.locate(66)[1]
    trusted = sum(1 for i, (base, _p) in enumerate(segs)
                  if i + 1 < len(segs) and segs[i + 1][0] <= 60)
    assert trusted >= 5 and base_66 > 0
    with open(seg_of_66, "r+b") as f:              # damage batch 66 (a byte of its value)
        f.seek(pos + 70)
        byte = f.read(1)
        f.seek(pos + 70)
        f.write(bytes([byte[0] ^ 0xFF]))

    caplog.set_level(logging.INFO, logger="kafkawire.server.partitions")
    with running_broker(d) as b:
        stats = dict(b.partitions.recovery_stats)
        part = b.partitions.partition("t", 0)
        assert part.log_end_offset == 66
        report = part.writer.recovery
    assert stats["trusted_segments"] == trusted == report.trusted_segments
    assert stats["validated_segments"] == len(segs) - trusted
    assert report.removed_offsets == [(66, 71)]
    assert any("trusted %d below it" % trusted in r.getMessage() for r in caplog.records)
    got = _records(folder)
    assert [o for o, _v in got] == list(range(66))
    assert [v for _o, v in got] == [b"v%05d" % i for i in range(66)]
    assert glob.glob(os.path.join(folder, "*.cut-*"))   # the cut bytes were saved


def _filled(tmp_path, count: int = 40):
    """A log dir whose topic ``t`` holds ``count`` batches in small segments, cleanly
    stopped; ``(log dir, segments)``."""
    d = str(tmp_path / "logs")
    with running_broker(d) as b:
        b.create_topic("t", 1, {"segment.bytes": "1024"})
        _append(b, "t", 0, count)
    with Log.open(os.path.join(d, "t-0")) as lg:
        return d, len(lg.segments)


def test_clean_start_revalidates_only_the_last_segment(tmp_path):
    d, segments = _filled(tmp_path)
    with running_broker(d) as b:
        stats = dict(b.partitions.recovery_stats)
        assert b.partitions.partition("t", 0).log_end_offset == 40
    assert stats["validated_segments"] == 1
    assert stats["trusted_segments"] == segments - 1


def test_without_a_checkpoint_every_segment_is_revalidated(tmp_path):
    d, segments = _filled(tmp_path)
    os.remove(os.path.join(d, CLEAN_SHUTDOWN_FILE))
    os.remove(os.path.join(d, RECOVERY_POINT_CHECKPOINT))
    with running_broker(d) as b:
        stats = dict(b.partitions.recovery_stats)
        assert b.partitions.partition("t", 0).log_end_offset == 40
    assert stats == {"validated_segments": segments, "trusted_segments": 0,
                     "recovered_partitions": 1}
