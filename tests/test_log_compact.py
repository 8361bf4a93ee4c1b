"""Compaction against Kafka's cleaner: what Kafka's own ``MemoryRecords.filterTo`` keeps with
the cleaner's rules, validated by Kafka's reader; and the ``.cleaned`` -> ``.swap`` protocol
survives a crash at every step."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from kafkawire import Log, LogWriter
from kafkawire.errors import LogLockedError
from kafkawire.log import compact
from kafkawire.log.compact import Cleaner
from kafkawire.log.lock import FolderLock

from cli_support import run_cli

TS = 1_700_000_000_000
DAY = 86_400_000


def _describe(folder, below):
    """The same lines as tests/java/CompactionRef.java, for the segments below ``below``."""
    out = []
    with Log.open(folder) as lg:
        for seg in lg.segments:
            if seg.base_offset >= below:
                break
            for b in seg.batches(verify_crc=True):
                v2 = b.magic == 2
                out.append(f"B {b.base_offset} {b.last_offset} {b.magic} {b.attributes} "
                           f"{b.first_timestamp if v2 else '-'} {b.max_timestamp} "
                           f"{b.producer_id} {b.producer_epoch} {b.base_sequence} "
                           f"{b.partition_leader_epoch} {b.record_count if v2 else '-'}")
                for r in b.records():
                    key = "-" if r.key is None else "x" + bytes(r.key).hex()
                    value = "-" if r.value is None else "x" + bytes(r.value).hex()
                    out.append(f"R {r.offset} {r.timestamp} {key} {value} {len(r.headers or ())}")
    return out


def _kafka_keeps(java_runner, folder, now):
    out = java_runner.run("CompactionRef", folder, now, DAY, DAY).stdout.decode().splitlines()
    assert out[0].startswith("U ")
    return int(out[0].split()[1]), out[1:]


@pytest.mark.parametrize("opts", [
    "appends=120 records=5 keys=23 tombstones=7 segmentBytes=6000 valueSize=40",
    "appends=160 records=4 keys=11 tombstones=9 txn=1 segmentBytes=5000 valueSize=30",
    "appends=100 records=6 keys=17 tombstones=5 codec=gzip segmentBytes=4000 valueSize=30",
    "appends=100 records=5 keys=13 tombstones=6 lat=1 codec=lz4 segmentBytes=4000 valueSize=30",
    "appends=100 records=5 keys=13 tombstones=6 magic=1 segmentBytes=4000 valueSize=30",
    "appends=100 records=5 keys=13 tombstones=6 magic=1 codec=snappy segmentBytes=4000 valueSize=30",
    "appends=90 records=5 keys=13 tombstones=6 mixedMagic=1 codec=gzip segmentBytes=4000 valueSize=30",
])
def test_cleaned_log_is_what_kafkas_filter_keeps(java_runner, tmp_path, opts):
    src = str(tmp_path / "src-0")
    java_runner.run("LogFolderHelper", "write", src, *opts.split())
    with Log.open(src) as lg:
        now = lg.segments[-1].max_timestamp + 1000
        before = [(r.offset, r.key, r.value) for r in lg.records(isolation="read_committed")]
    work = str(tmp_path / "t-0")
    shutil.copytree(src, work)
    # Round 1: tombstones kept, their batches get a delete horizon.
    upper, expected = _kafka_keeps(java_runner, src, now)
    plan = compact(work, apply=True, now_ms=now, min_cleanable_dirty_ratio=0.0,
                   segment_bytes=12000)
    assert plan.applied and plan.first_uncleanable_offset == upper
    assert _describe(work, upper) == expected
    if "magic" not in opts:      # v2: batches keeping tombstones carry a delete horizon
        assert any(int(line.split()[4]) & 0x40 for line in expected if line.startswith("B "))
    java_runner.run("LogFolderHelper", "read", work)          # Kafka validates the result
    with Log.open(work) as lg:
        assert lg.verify().ok
        after = {r.offset: (r.key, r.value) for r in lg.records()}
    # Every key's latest record below the uncleanable offset is still there.
    latest = {k: (off, v) for off, k, v in before if off < upper}
    assert all(after.get(off) == (k, v) for k, (off, v) in latest.items() if v is not None)
    # Round 2, past the delete horizon: Kafka's filter on round 1's output decides again.
    later = now + DAY + 1
    again = str(tmp_path / "again-0")
    shutil.copytree(work, again)
    upper2, expected2 = _kafka_keeps(java_runner, again, later)
    compact(work, apply=True, now_ms=later, min_cleanable_dirty_ratio=0.0, segment_bytes=12000)
    assert _describe(work, upper2) == expected2
    java_runner.run("LogFolderHelper", "read", work)


def _write(d, n=90, keys=9):
    with LogWriter(d, segment_bytes=1500) as w:
        for i in range(n):
            w.append_records([{"key": b"k%d" % (i % keys),
                               "value": None if i % 10 == 3 else b"v%d" % i, "timestamp": TS + i}])


def _records(d):
    with Log.open(d) as lg:
        return [(r.offset, r.key, r.value) for r in lg.records()]


def test_dry_run_changes_nothing_and_apply_matches_it(tmp_path):
    d = str(tmp_path / "t-0")
    _write(d)
    names = sorted(os.listdir(d))
    plan = compact(d, now_ms=TS + 1000, min_cleanable_dirty_ratio=0.0)
    assert not plan.applied and plan.records_removed > 0 and sorted(os.listdir(d)) == names
    done = compact(d, apply=True, now_ms=TS + 1000, min_cleanable_dirty_ratio=0.0)
    assert done.records_removed == plan.records_removed
    assert done.bytes_removed == plan.bytes_removed


def test_dirty_ratio_gate_and_checkpoint(tmp_path):
    root = tmp_path / "data"
    d = str(root / "t-0")
    _write(d)
    (root / "cleaner-offset-checkpoint").write_text("0\n0\n")
    assert not compact(d, now_ms=TS + 1000, min_cleanable_dirty_ratio=1.0).cleanable
    plan = compact(d, apply=True, now_ms=TS + 1000, min_cleanable_dirty_ratio=0.5)
    assert plan.applied and plan.passes == 1
    assert (root / "cleaner-offset-checkpoint").read_text() == f"0\n1\nt 0 {plan.end_offset}\n"
    # Everything below the checkpoint is clean: nothing dirty is left to compact.
    assert not compact(d, now_ms=TS + 1000, min_cleanable_dirty_ratio=0.0).cleanable


def test_small_offset_map_cleans_in_passes(tmp_path):
    d = str(tmp_path / "t-0")
    e = str(tmp_path / "u-0")
    _write(d, n=200, keys=40)
    _write(e, n=200, keys=40)
    small = compact(d, apply=True, now_ms=TS + 1000, min_cleanable_dirty_ratio=0.0,
                    dedupe_buffer_size=24 * 12)
    assert small.passes > 1
    compact(e, apply=True, now_ms=TS + 1000, min_cleanable_dirty_ratio=0.0)
    # However many passes, the latest record of every key survives.
    latest_small = {k: (o, v) for o, k, v in _records(d)}
    latest_big = {k: (o, v) for o, k, v in _records(e)}
    assert latest_small == latest_big


def test_apply_is_refused_while_the_folder_is_locked(tmp_path):
    d = str(tmp_path / "t-0")
    _write(d)
    with FolderLock(d, "test"):
        with pytest.raises(LogLockedError):
            compact(d, apply=True, now_ms=TS + 1000, min_cleanable_dirty_ratio=0.0)


class _Crash(Exception):
    pass


def _steps(tmp_path):
    d = str(tmp_path / "probe-0")
    _write(d)
    seen = []
    Cleaner(min_cleanable_dirty_ratio=0.0, step_hook=seen.append).clean(d, now_ms=TS + 1000)
    return seen


def test_a_crash_at_every_swap_step_loses_nothing(tmp_path):
    steps = _steps(tmp_path)
    assert any(s.startswith("swap") for s in steps) and any(s.startswith("rename") for s in steps)
    ref = str(tmp_path / "ref-0")
    _write(ref)
    original = _records(ref)
    compact(ref, apply=True, now_ms=TS + 1000, min_cleanable_dirty_ratio=0.0)
    compacted = _records(ref)
    for i, step in enumerate(steps):
        d = str(tmp_path / f"c{i}-0")
        _write(d)

        def crash(name, at=step):
            if name == at:
                raise _Crash(name)
        with pytest.raises(_Crash):
            Cleaner(min_cleanable_dirty_ratio=0.0, step_hook=crash).clean(d, now_ms=TS + 1000)
        left = [n for n in os.listdir(d) if n.endswith((".swap", ".cleaned", ".deleted"))]
        swaps = [n for n in left if n.endswith(".swap")]
        with Log.open(d) as lg:
            kinds = [p.kind for p in lg.verify().problems]
            assert kinds.count("interrupted swap") == len(swaps), step   # verify names them
            pending = lg.recover()                 # a dry run names what recovery will do
            assert bool(pending.swaps) == bool(left) and pending.clean == (not left)
            done = lg.recover(apply=True)
            assert done.swaps == pending.swaps
        got = _records(d)
        assert got in (original, compacted), step
        assert not [n for n in os.listdir(d) if n.endswith((".swap", ".cleaned", ".deleted"))]
        with Log.open(d) as lg:
            assert lg.verify().ok, step
        # The next compaction finishes the job.
        compact(d, apply=True, now_ms=TS + 1000, min_cleanable_dirty_ratio=0.0)
        assert _records(d) == compacted, step


def test_a_crash_while_writing_cleaned_files_rolls_back(tmp_path):
    d = str(tmp_path / "t-0")
    _write(d)
    original = _records(d)
    # A .cleaned file and a half-renamed .swap, as a crash mid-rename leaves them.
    base = "00000000000000000000"
    with open(os.path.join(d, base + ".log.swap"), "wb") as f:
        f.write(b"garbage")
    with open(os.path.join(d, base + ".index.cleaned"), "wb") as f:
        f.write(b"")
    with LogWriter(d) as w:      # a writer opening the folder recovers it first
        w.append_records([b"more"])
    assert _records(d)[:-1] == original
    assert not [n for n in os.listdir(d) if n.endswith((".swap", ".cleaned"))]


def test_cli_dry_run_then_apply(capsys, tmp_path):
    root = tmp_path / "data"
    d = str(root / "orders-0")
    _write(d)
    before = sorted(os.listdir(d))
    code, out, _ = run_cli(capsys, "compact", str(root), "--min-cleanable-dirty-ratio", "0",
                        "--now", str(TS + 1000))
    assert code == 0 and "would remove" in out and "dry run" in out
    assert sorted(os.listdir(d)) == before
    code, out, _ = run_cli(capsys, "compact", d, "--min-cleanable-dirty-ratio", "0",
                        "--now", str(TS + 1000), "--apply", "--json")
    obj = json.loads(out.splitlines()[0])
    assert code == 0 and obj["type"] == "compact" and obj["applied"] and obj["records_removed"] > 0
    code, out, _ = run_cli(capsys, "compact", d, "--now", str(TS + 1000))
    assert code == 0 and "nothing to remove" in out and "dry run" not in out


def test_cli_usage_errors(capsys, tmp_path):
    d = str(tmp_path / "t-0")
    _write(d)
    assert run_cli(capsys, "compact", d, "--min-cleanable-dirty-ratio", "2")[0] != 0
    assert run_cli(capsys, "compact", d, "--delete-retention-ms", "-1")[0] != 0
    assert run_cli(capsys, "compact", d + "/00000000000000000000.log")[0] != 0


def test_min_compaction_lag_leaves_young_segments(tmp_path):
    d = str(tmp_path / "t-0")
    _write(d)
    plan = compact(d, now_ms=TS + 1000, min_cleanable_dirty_ratio=0.0,
                   min_compaction_lag_ms=10_000)
    assert not plan.cleanable and plan.first_uncleanable_offset == 0
    # Old enough: the lag no longer holds anything back.
    assert compact(d, now_ms=TS + 20_000, min_cleanable_dirty_ratio=0.0,
                   min_compaction_lag_ms=10_000).cleanable


def test_compact_delete_policy_also_applies_retention(tmp_path):
    d = str(tmp_path / "t-0")
    _write(d, n=300, keys=40)
    plan = compact(d, apply=True, now_ms=TS + 1000, min_cleanable_dirty_ratio=0.0,
                   policy="compact,delete", retention_bytes=1, segment_bytes=1500)
    assert plan.applied
    with Log.open(d) as lg:
        assert len(lg.segments) == 1            # only the active segment is left
    with pytest.raises(ValueError):
        compact(d, policy="delete")
