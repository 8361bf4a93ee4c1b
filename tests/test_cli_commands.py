"""``kafkawire verify | recover | stats | find`` and index checks in ``dump``, on logs written by LogWriter."""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys

import pytest

import kafkawire

from cli_support import run_cli

pytest.importorskip("kafkawire.log.writer")
from kafkawire.log.writer import LogWriter  # noqa: E402


def write_partition(folder, n_batches=40, per_batch=20, compression="none"):
    with LogWriter(folder, segment_bytes=16 * 1024, index_interval_bytes=1024) as w:
        for b in range(n_batches):
            w.append_records([{"key": b"k%d" % i, "value": b"v" * 50,
                               "timestamp": 1_700_000_000_000 + b * 100 + i}
                              for i in range(per_batch)], compression=compression)
    return folder


@pytest.fixture
def logdir(tmp_path):
    root = tmp_path / "data"
    write_partition(str(root / "orders-0"))
    write_partition(str(root / "events-1"), n_batches=5, compression="gzip")
    return root


def segs(folder):
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".log"))


def test_verify_clean_logdir(capsys, logdir):
    code, out, err = run_cli(capsys, "verify", str(logdir))
    assert code == 0, out + err
    lines = out.splitlines()
    assert len(lines) == 2 and all(line.endswith(": ok") for line in lines)
    assert lines[0].startswith("events-1: ") and lines[1].startswith("orders-0: ")


def test_verify_flipped_byte_and_recover(capsys, logdir):
    folder = str(logdir / "orders-0")
    first = segs(folder)[0]
    data = bytearray(open(first, "rb").read())
    data[len(data) // 2] ^= 0x55
    open(first, "wb").write(bytes(data))
    code, out, err = run_cli(capsys, "verify", folder)
    assert code == 1
    assert "crc" in out.lower() and first in out
    code, out, err = run_cli(capsys, "verify", folder, "--json")
    objs = [json.loads(x) for x in out.splitlines()]
    assert any(o["type"] == "problem" and o["segment"] == first for o in objs)
    assert objs[-1]["type"] == "summary" and objs[-1]["ok"] is False

    before = open(first, "rb").read()
    code, out, err = run_cli(capsys, "recover", folder)
    assert code == 1 and "dry run" in out
    assert open(first, "rb").read() == before          # a dry run changes nothing
    code, out, err = run_cli(capsys, "recover", folder, "--apply")
    assert code == 0 and "applied" in out               # repaired: success
    assert any(".cut-" in n for n in os.listdir(folder))  # the cut bytes were saved
    code, out, err = run_cli(capsys, "verify", folder)
    assert code == 0, out
    code, out, err = run_cli(capsys, "recover", folder)
    assert code == 0


def test_recover_refuses_a_single_file(capsys, logdir):
    code, out, err = run_cli(capsys, "recover", segs(str(logdir / "orders-0"))[0])
    assert code == 1 and "whole partitions" in err and "Traceback" not in err


def test_stats(capsys, logdir):
    code, out, err = run_cli(capsys, "stats", str(logdir), "--json")
    assert code == 0, err
    objs = {o["partition"]: o for o in map(json.loads, out.splitlines())}
    o = objs["orders-0"]
    assert o["batches"] == 40 and o["records"] == 800 and o["segments"] == len(segs(str(logdir / "orders-0")))
    assert o["firstOffset"] == 0 and o["lastOffset"] == 799
    assert o["minTimestamp"] == 1_700_000_000_000 and o["maxTimestamp"] == 1_700_000_003_919
    assert o["codecs"] == {"none": 40} and o["compressionRatio"] is None
    assert o["bytes"] == sum(os.path.getsize(p) for p in segs(str(logdir / "orders-0")))
    e = objs["events-1"]
    assert e["codecs"] == {"gzip": 5} and e["compressionRatio"] > 1.5
    code, out, err = run_cli(capsys, "stats", str(logdir / "orders-0"))
    assert code == 0 and "records: 800" in out and "offsets: 0..799" in out



def test_stats_text_with_first_timestamp_but_no_max():
    """A batch whose first timestamp is set but whose max timestamp is -1 (damaged or
    hand-written) leaves no max: the text report says "-" for it instead of failing."""
    from types import SimpleNamespace
    from kafkawire.cli.commands import PartitionStats
    st = PartitionStats("t-0", "/nowhere")
    st.add_batch(SimpleNamespace(compression="none", magic=2, is_control=False,
                                 is_transactional=False, base_offset=0, last_offset=0,
                                 first_timestamp=1_700_000_000_000, max_timestamp=-1,
                                 delete_horizon=None, size=80), 1, None)
    assert st.min_timestamp == 1_700_000_000_000 and st.max_timestamp is None
    assert "timestamps: 1700000000000..- (2023-11-14T22:13:20.000Z .. -)" in st.as_text()


def test_find_needs_an_offset_or_a_timestamp(logdir):
    from kafkawire.cli import commands
    with pytest.raises(ValueError, match="offset or a timestamp"):
        commands.find(str(logdir / "orders-0"))

def test_find_offset_and_timestamp(capsys, logdir):
    folder = str(logdir / "orders-0")
    code, out, err = run_cli(capsys, "find", folder, "--offset", "345", "--print-data-log")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("segment: ") and lines[1].startswith("baseOffset: 340 lastOffset: 359")
    assert lines[2].startswith("| offset: 345 CreateTime: 1700000001705 ")
    assert lines[2].endswith("key: k5 payload: " + "v" * 50)
    code, out, err = run_cli(capsys, "find", folder, "--timestamp", "1700000001705", "--json")
    assert code == 0, err
    objs = [json.loads(x) for x in out.splitlines()]
    assert objs[-1]["type"] == "record" and objs[-1]["offset"] == 345
    code, out, err = run_cli(capsys, "find", folder, "--offset", "5000")
    assert code == 1 and "not in" in err
    code, out, err = run_cli(capsys, "find", str(logdir), "--offset", "1")
    assert code == 1 and "--partition" in err
    code, out, err = run_cli(capsys, "find", str(logdir), "--partition", "orders-0", "--offset", "1")
    assert code == 0


def test_dump_checks_real_indexes(capsys, logdir):
    folder = str(logdir / "orders-0")
    log0 = segs(folder)[0]
    idx, tidx = log0[:-4] + ".index", log0[:-4] + ".timeindex"
    code, out, err = run_cli(capsys, "dump", "--files", f"{idx},{tidx}")
    assert code == 0 and err == "", err
    lines = out.splitlines()
    assert any(line.startswith("offset: ") and " position: " in line for line in lines)
    assert any(line.startswith("timestamp: ") and " offset: " in line for line in lines)
    code, out, err = run_cli(capsys, "dump", "--files", f"{idx},{tidx}", "--verify-index-only")
    assert code == 0 and out.splitlines() == [f"Dumping {idx}", f"Dumping {tidx}"]

    # corrupt an index entry's position and a time entry's timestamp
    raw = bytearray(open(idx, "rb").read())
    rel, pos = struct.unpack_from(">ii", raw, 0)
    struct.pack_into(">ii", raw, 0, rel, 0)
    open(idx, "wb").write(bytes(raw))
    traw = bytearray(open(tidx, "rb").read())
    ts, trel = struct.unpack_from(">qi", traw, 0)
    struct.pack_into(">qi", traw, 0, ts + 1, trel)
    open(tidx, "wb").write(bytes(traw))
    code, out, err = run_cli(capsys, "dump", "--files", f"{idx},{tidx}", "--verify-index-only")
    assert code == 1
    errs = err.splitlines()
    assert errs[0] == f"Mismatches in :{os.path.abspath(idx)}"
    assert errs[1].startswith(f"  Index offset: {rel}, log offset: ")
    assert f"Found timestamp mismatch in :{os.path.abspath(tidx)}" in errs
    assert f"  Index timestamp: {ts + 1}, log timestamp: {ts}" in errs


def test_dump_time_index_offset_not_found(capsys, tmp_path):
    from kafkawire.records import BatchBuilder
    b = BatchBuilder()
    for i in range(3):
        b.append(b"x", timestamp=100 + i)
    (tmp_path / "00000000000000000000.log").write_bytes(b.build())
    # an older broker's entry names the record (offset 1), not the batch's last offset (2)
    tidx = tmp_path / "00000000000000000000.timeindex"
    tidx.write_bytes(struct.pack(">qi", 101, 1) + struct.pack(">qi", 100, 2))
    code, out, err = run_cli(capsys, "dump", "--files", str(tidx))
    assert out.splitlines()[1:] == ["timestamp: 101 offset: 1", "timestamp: 100 offset: 2"]
    assert err.splitlines() == [
        f"Found timestamp mismatch in :{tidx}",
        "  Index timestamp: 100, log timestamp: 102",
        f"Found out of order timestamp in :{tidx}",
        "  Index timestamp: 100, Previously indexed timestamp: 101",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 1, found log offset: 2"]


def test_errors_are_one_line(capsys, tmp_path):
    for argv in (["verify", str(tmp_path / "missing")], ["stats", str(tmp_path)],
                 ["find", str(tmp_path / "nope"), "--offset", "1"]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, argv


@pytest.mark.one_backend
def test_installed_entry_point_smoke(tmp_path):
    folder = write_partition(str(tmp_path / "t-0"), n_batches=3)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(kafkawire.__file__)))
    exe = shutil.which("kafkawire", path=os.path.dirname(sys.executable)) or shutil.which("kafkawire")
    commands = [[sys.executable, "-m", "kafkawire.cli"]]
    if exe:
        commands.append([exe])
    for cmd in commands:
        p = subprocess.run(cmd + ["dump", "--files", segs(folder)[0], "--deep-iteration"],
                           capture_output=True, env=env, timeout=120)
        assert p.returncode == 0, p.stderr
        assert b"| offset: 0 CreateTime: 1700000000000" in p.stdout
        p = subprocess.run(cmd + ["verify", folder], capture_output=True, env=env, timeout=120)
        assert p.returncode == 0 and p.stdout.endswith(b": ok\n")
        p = subprocess.run(cmd + ["verify", str(tmp_path / "missing")], capture_output=True,
                           env=env, timeout=120)
        assert p.returncode == 1 and b"Traceback" not in p.stderr and p.stderr.count(b"\n") == 1
    if not exe:
        pytest.skip("the kafkawire console script is not installed here (CI installs the wheel)")


def test_stats_partition_metadata_and_leftovers(capsys, tmp_path):
    folder = write_partition(str(tmp_path / "t-0"), n_batches=2)
    with open(os.path.join(folder, "partition.metadata"), "w") as f:
        f.write("version: 0\ntopic_id: abcdEFGH1234567890abcd\n")
    with open(os.path.join(folder, "leader-epoch-checkpoint"), "w") as f:
        f.write("0\n2\n0 0\n3 20\n")
    with open(os.path.join(folder, "00000000000000000000.log.deleted"), "wb") as f:
        f.write(b"junk that must not be read")
    code, out, err = run_cli(capsys, "stats", folder, "--json")
    assert code == 0, err
    o = json.loads(out)
    assert o["topicId"] == "abcdEFGH1234567890abcd" and o["leaderEpochs"] == [[0, 0], [3, 20]]
    assert o["ignoredFiles"] == ["00000000000000000000.log.deleted"] and o["records"] == 40
