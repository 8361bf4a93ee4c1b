"""Retention: Kafka's deletion rules (time, size, log start offset) planned and applied,
readers left whole, on folders LogWriter wrote and on folders Kafka's own classes wrote."""
from __future__ import annotations

import os
import time

import pytest

from kafkawire import Log, LogWriter
from kafkawire.log import files as F
from kafkawire.log.retention import plan_retention, purge_deleted

from cli_support import run_cli

TS = 1_700_000_000_000


def _write(d, n=60, per_segment=10):
    """``n`` appends of one 100-byte record, ``per_segment`` per segment, timestamps TS+i*1000."""
    with LogWriter(d) as w:
        for i in range(n):
            if i and i % per_segment == 0:
                w.roll()
            w.append_records([{"value": bytes(100), "timestamp": TS + i * 1000}])
    return str(d)


def _sizes(d):
    return [os.path.getsize(s.log) for s in F.list_partition(d).segments]


def test_by_time_deletes_a_prefix_never_the_active_segment(tmp_path):
    d = _write(tmp_path / "t-0")
    # segment k holds timestamps TS + (10k .. 10k+9) s; now = TS + 35 s, limit 10 s:
    # segments whose largest timestamp is before TS + 25 s go: 0 (9 s) and 1 (19 s).
    plan = plan_retention(d, retention_ms=10_000, now_ms=TS + 35_000)
    assert [x.base_offset for x in plan.deletions] == [0, 10]
    assert [x.reason for x in plan.deletions] == ["retention_ms"] * 2
    assert plan.records == 20 and plan.log_start_offset == 20
    assert [(x.base_offset, x.next_offset) for x in plan.deletions] == [(0, 10), (10, 20)]
    # everything expired: all but the active segment
    plan = plan_retention(d, retention_ms=0, now_ms=TS + 10 ** 9)
    assert [x.base_offset for x in plan.deletions] == [0, 10, 20, 30, 40]
    assert plan.log_start_offset == 50


def test_by_time_stops_at_the_first_young_segment(tmp_path):
    d = tmp_path / "t-0"
    with LogWriter(d) as w:
        for ts in (TS, TS + 100_000, TS, TS):        # segment 1 is young, 2 is old again
            w.append_records([{"value": b"x", "timestamp": ts}])
            w.roll()
    plan = plan_retention(str(d), retention_ms=50_000, now_ms=TS + 120_000)
    assert [x.base_offset for x in plan.deletions] == [0]


def test_by_bytes_keeps_at_least_retention_bytes(tmp_path):
    d = _write(tmp_path / "t-0")
    sizes = _sizes(d)
    total = sum(sizes)
    for limit in (0, 1, sizes[-1], total - sizes[0] - 1, total - sizes[0], total - sizes[0] + 1,
                  total, total + 10):
        plan = plan_retention(d, retention_bytes=limit)
        k = len(plan.deletions)
        assert k == 0 or total - plan.bytes >= limit
        # one more segment would go below the limit (or is the active one)
        assert k == len(sizes) - 1 or total - plan.bytes - sizes[k] < limit
        assert all(x.reason == "retention_bytes" for x in plan.deletions)
    assert plan_retention(d, retention_bytes=-1).empty


def test_by_log_start_offset(tmp_path):
    d = _write(tmp_path / "t-0")
    assert plan_retention(d, log_start_offset=9).empty
    assert [x.base_offset for x in plan_retention(d, log_start_offset=10).deletions] == [0]
    plan = plan_retention(d, log_start_offset=35)
    assert [x.base_offset for x in plan.deletions] == [0, 10, 20]
    assert plan.log_start_offset == 35
    assert len(plan_retention(d, log_start_offset=10 ** 6).deletions) == 5


def test_rules_combine_in_kafkas_order(tmp_path):
    d = _write(tmp_path / "t-0")
    size = _sizes(d)[0]
    plan = plan_retention(d, retention_ms=30_000, retention_bytes=4 * size,
                          log_start_offset=30, now_ms=TS + 40_000)
    assert [x.reason for x in plan.deletions] == ["retention_ms", "retention_bytes", "log_start_offset"]


def test_apply_renames_then_removes(tmp_path):
    d = _write(tmp_path / "t-0")
    with LogWriter(d) as w:                       # a transaction index and a snapshot to take along
        w.append_records([b"t"], producer_id=5, producer_epoch=0, is_transactional=True)
        w.append_control("abort", producer_id=5, producer_epoch=0)
    open(os.path.join(d, F.segment_file_name(10, F.SNAPSHOT_SUFFIX)), "wb").close()
    plan = plan_retention(d, log_start_offset=20)
    assert str(plan).startswith("would delete 2 of 7 segments")
    assert os.path.join(d, F.segment_file_name(10, F.SNAPSHOT_SUFFIX)) in plan.deletions[1].files
    plan.apply(file_delete_delay_ms=3_600_000)
    names = sorted(os.listdir(d))
    assert "00000000000000000000.log.deleted" in names
    assert "00000000000000000010.snapshot.deleted" in names
    assert "00000000000000000000.log" not in names
    with Log.open(d) as log:
        assert log.start_offset == 20
        assert [r.offset for r in log.records()][:2] == [20, 21]
        assert log.verify().ok
    assert purge_deleted(d, older_than_ms=3_600_000) == []
    assert len(purge_deleted(d)) == 2 * 3 + 1
    assert not [n for n in os.listdir(d) if n.endswith(".deleted")]
    plan = plan_retention(d, log_start_offset=30).apply()
    assert not [n for n in os.listdir(d) if n.endswith(".deleted")]
    assert F.list_partition(d).segments[0].base_offset == 30
    with pytest.raises(Exception):
        plan.apply()


def test_apply_is_refused_while_a_writer_holds_the_folder(tmp_path):
    """Retention changes the folder, so it takes the folder's lock as writers do: with a
    LogWriter open it is refused at once and nothing is renamed."""
    from kafkawire.errors import LogLockedError
    d = _write(tmp_path / "t-0")
    before = sorted(os.listdir(d))
    plan = plan_retention(d, log_start_offset=20)
    with LogWriter(d):
        with pytest.raises(LogLockedError, match="locked"):
            plan.apply()
    assert sorted(os.listdir(d)) == before
    plan.apply()
    assert F.list_partition(d).segments[0].base_offset == 20


def test_delayed_removal_happens(tmp_path):
    d = _write(tmp_path / "t-0", n=20)
    plan_retention(d, log_start_offset=10).apply(file_delete_delay_ms=50)
    deadline = time.time() + 10
    while any(n.endswith(".deleted") for n in os.listdir(d)) and time.time() < deadline:
        time.sleep(0.02)
    assert not any(n.endswith(".deleted") for n in os.listdir(d))


def test_reader_open_during_deletion_finishes_with_its_records(tmp_path):
    d = _write(tmp_path / "t-0", n=50)
    log = Log.open(d)
    it = log.records()
    first = [next(it).offset for _ in range(3)]       # the reader is inside segment 0
    plan = plan_retention(log, retention_ms=0, now_ms=TS + 10 ** 9)
    assert len(plan.deletions) == 4
    plan.apply()                                       # renamed and unlinked at once
    assert [n for n in os.listdir(d) if n.endswith(".log")] == ["00000000000000000040.log"]
    rest = [r.offset for r in it]
    assert first + rest == list(range(50))
    assert [r.offset for r in log.records()] == list(range(40, 50))   # new readers: what remains
    log.close()


def test_empty_and_single_segment_folders(tmp_path):
    d = _write(tmp_path / "t-0", n=5)
    assert plan_retention(d, retention_ms=0, retention_bytes=0, log_start_offset=100,
                          now_ms=TS + 10 ** 9).empty
    e = tmp_path / "e-0"
    e.mkdir()
    assert plan_retention(str(e), retention_bytes=0).empty


# ------------------------------------------------- folders Kafka's own classes wrote

def _java_segments(out):
    segs, max_ts = [], {}
    for line in out.decode().splitlines():
        f = line.split()
        if f and f[0] == "S":
            segs.append(int(f[1]))
        elif f and f[0] == "B":
            max_ts[int(f[1])] = max(max_ts.get(int(f[1]), -1), int(f[7]))
    return segs, max_ts


def _java_records(out):
    return [tuple(line.split()[1:3]) for line in out.decode().splitlines() if line.startswith("R ")]


@pytest.mark.parametrize("opts", ["appends=300 segmentBytes=20000",
                                  "codec=zstd appends=240 txn=1 segmentBytes=15000",
                                  "magic=1 codec=snappy appends=200 gaps=1 segmentBytes=15000"])
@pytest.mark.parametrize("rule", ["bytes", "time", "start"])
def test_retention_on_kafka_written_folders(java_runner, tmp_path, opts, rule):
    d = str(tmp_path / "k-0")
    written = java_runner.run("LogFolderHelper", "write", d, *opts.split()).stdout
    segs, max_ts = _java_segments(written)
    assert len(segs) >= 4
    sizes = [os.path.getsize(os.path.join(d, F.segment_file_name(b))) for b in segs]
    # Kafka's rules, from Kafka's own account of the folder
    if rule == "bytes":
        limit = sum(sizes) // 2
        kw, excess, k = dict(retention_bytes=limit), sum(sizes) - limit, 0
        while k < len(segs) - 1 and excess - sizes[k] >= 0:
            excess -= sizes[k]
            k += 1
    elif rule == "time":
        now = max(max_ts.values()) + 1
        cut = max_ts[segs[len(segs) // 2]]
        kw, k = dict(retention_ms=now - cut - 1, now_ms=now), 0
        while k < len(segs) - 1 and now - max_ts[segs[k]] > now - cut - 1:
            k += 1
    else:
        start = segs[2] + 1
        kw, k = dict(log_start_offset=start), 0
        while k < len(segs) - 1 and segs[k + 1] <= start:
            k += 1
    assert 0 < k < len(segs) - 1
    before = java_runner.run("LogFolderHelper", "read", d).stdout
    plan = plan_retention(d, **kw)
    assert [x.base_offset for x in plan.deletions] == segs[:k]
    plan.apply()
    after = java_runner.run("LogFolderHelper", "read", d).stdout      # Kafka validates what is left
    assert after.decode().rstrip().endswith("OK")
    kept = [r for r in _java_records(before) if int(r[0]) >= segs[k]]
    assert _java_records(after) == kept
    assert [s.base_offset for s in F.list_partition(d).segments] == segs[k:]


# ------------------------------------------------------------------------ the command

def test_cli_dry_run_then_apply(capsys, tmp_path):
    import json
    root = tmp_path / "data"
    a = _write(root / "orders-0")
    b = _write(root / "events-1", n=25)
    before = sorted(os.listdir(a))
    code, out, err = run_cli(capsys, "retention", str(root), "--log-start-offset", "20")
    assert code == 0, err
    assert "orders-0: would delete 2 of 6 segments" in out and "events-1: would delete 2 of 3" in out
    assert "dry run" in out and "segment 10: offsets 10..19" in out
    assert sorted(os.listdir(a)) == before
    code, out, err = run_cli(capsys, "retention", a, "--retention-ms", "10000", "--now",
                          str(TS + 35_000), "--json")
    obj = json.loads(out)
    assert obj["type"] == "retention" and obj["partition"] == "orders-0" and not obj["applied"]
    assert [x["base_offset"] for x in obj["deletions"]] == [0, 10] and obj["records"] == 20
    code, out, err = run_cli(capsys, "retention", str(root), "--retention-bytes", "0",
                          "--file-delete-delay-ms", "3600000", "--apply")
    assert code == 0, err
    assert "orders-0: deleted 5 of 6 segments" in out
    assert [s.base_offset for s in F.list_partition(a).segments] == [50]
    assert [s.base_offset for s in F.list_partition(b).segments] == [20]
    assert any(n.endswith(".deleted") for n in os.listdir(a))
    code, out, err = run_cli(capsys, "retention", b, "--retention-bytes", "0", "--apply")
    assert code == 0 and "removed 6 .deleted files" in out and "nothing to delete" in out
    assert not any(n.endswith(".deleted") for n in os.listdir(b))


def test_cli_usage_errors(capsys, tmp_path):
    a = _write(tmp_path / "t-0", n=5)
    code, out, err = run_cli(capsys, "retention", a)
    assert code == 2 and "--retention-ms" in err
    code, out, err = run_cli(capsys, "retention", os.path.join(a, F.segment_file_name(0)),
                          "--retention-bytes", "0")
    assert code == 1 and "whole partitions" in err and "Traceback" not in err
    code, out, err = run_cli(capsys, "retention", str(tmp_path / "missing"), "--retention-bytes", "0")
    assert code == 1 and "Traceback" not in err
