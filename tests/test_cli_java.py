"""``kafkawire dump`` against a Java helper that prints kafka-clients' own view of the same file."""
from __future__ import annotations

import pytest

from kafkawire.cli import main
from cli_support import require_headers_decoded

records = pytest.importorskip("kafkawire.records")
from kafkawire.records import BatchBuilder, control_batch  # noqa: E402
from kafkawire.compression import available  # noqa: E402

pytestmark = pytest.mark.java


def mixed_segment() -> bytes:
    out = []
    off = 0
    for magic in (0, 1):
        for codec in ("none", "gzip", "snappy", "lz4"):
            if not available(codec):
                continue
            b = BatchBuilder(magic=magic, compression=codec, base_offset=off)
            for i in range(3):
                b.append(f"value-{magic}-{codec}-{i}".encode(), key=None if i == 1 else b"key",
                         timestamp=1_600_000_000_000 + i)
            out.append(b.build())
            off += 3
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        if not available(codec):
            continue
        b = BatchBuilder(compression=codec, base_offset=off, partition_leader_epoch=4,
                         producer_id=99, producer_epoch=2, base_sequence=2 ** 31 - 2)
        b.append(b"v\xc3\xa9", key=b"k", timestamp=1_700_000_000_000,
                 headers=[("a", b"1"), ("b", None)])
        b.append(None, key=b"tomb", timestamp=1_700_000_000_005)
        b.append(b"", key=None, timestamp=1_699_999_999_999)
        out.append(b.build())
        off += 3
    b = BatchBuilder(base_offset=off, producer_id=5, producer_epoch=0, base_sequence=0,
                     is_transactional=True, timestamp_type="LogAppendTime",
                     log_append_time=1_800_000_000_000)
    b.append(b"txn", timestamp=1)
    out.append(b.build())
    out.append(control_batch("abort", base_offset=off + 1, producer_id=5, producer_epoch=0,
                             coordinator_epoch=9, timestamp=1_800_000_000_001))
    out.append(control_batch("commit", base_offset=off + 2, producer_id=5, producer_epoch=0,
                             coordinator_epoch=9, timestamp=1_800_000_000_002))
    b = BatchBuilder(base_offset=off + 3, delete_horizon=1_900_000_000_000)
    b.append(None, key=b"gone", timestamp=1_800_000_000_010)
    b.append(b"kept", key=b"k", timestamp=1_800_000_000_011)
    out.append(b.build())
    data = b"".join(out)
    return data + out[-4][:40]   # a partial tail, as after a crash


@pytest.mark.one_backend
@pytest.mark.parametrize("mode,flags", [("shallow", []), ("deep", ["--deep-iteration"]),
                                        ("data", ["--print-data-log"])])
def test_dump_matches_kafka_clients_view(java_runner, tmp_path, capsys, mode, flags):
    require_headers_decoded()
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(mixed_segment())
    args = [str(path)] + ([] if mode == "shallow" else [mode])
    expected = java_runner.run("DumpLogFormat", *args).stdout.decode("utf-8").splitlines()
    # Same lines as Kafka's tool; the status follows kafkawire's rule: invalid bytes at the
    # end of the segment are damage (1).
    tail = expected[-1].startswith("Found ") and "invalid bytes" in expected[-1]
    assert main(["dump", "--files", str(path)] + flags) == (1 if tail else 0)
    got = capsys.readouterr().out.splitlines()
    assert got[:2] == [f"Dumping {path}", "Log starting offset: 0"]
    assert len(got[2:]) == len(expected)
    for g, e in zip(got[2:], expected):
        assert g == e


@pytest.mark.one_backend
def test_consumer_protocol_members_match_kafka_json(java_runner):
    """Subscriptions/assignments serialised by kafka-clients decode to Kafka's own JSON."""
    import json
    import struct
    from kafkawire.cli.offsets_decoder import parse_record

    def s(v):
        b = v.encode()
        return struct.pack(">h", len(b)) + b

    lines = java_runner.run("ConsumerProtocolRef").stdout.decode().splitlines()
    assert len(lines) == 8
    refs = {}
    for line in lines:
        kind, version, hexbytes, js = line.split(" ", 3)
        refs[(kind, int(version))] = (bytes.fromhex(hexbytes), js)
    for v in range(4):
        sub, sub_json = refs[("subscription", v)]
        asg, asg_json = refs[("assignment", v)]
        member = (s("m-1") + s("inst") + s("client") + s("/127.0.0.1") + struct.pack(">ii", 1, 2)
                  + struct.pack(">i", len(sub)) + sub + struct.pack(">i", len(asg)) + asg)
        value = (struct.pack(">h", 3) + s("consumer") + struct.pack(">i", 1) + s("range") + s("m-1")
                 + struct.pack(">q", 5) + struct.pack(">i", 1) + member)
        _, text = parse_record(struct.pack(">h", 2) + s("g"), value, 0)
        assert f'"subscription":{sub_json},"assignment":{asg_json}' in text
        assert json.loads(text)["data"]["members"][0]["subscription"] == json.loads(sub_json)


def _kafka_folder(java_runner, folder, **opts):
    args = [f"{k}={v}" for k, v in opts.items()]
    java_runner.run("LogFolderHelper", "write", str(folder), *args)
    return folder


@pytest.mark.one_backend
@pytest.mark.parametrize("opts", [
    dict(codec="lz4", appends=60, records=20, segmentBytes=32768, interval=2048),
    dict(txn=1, appends=40, records=5, segmentBytes=16384, interval=1024, active="preallocated"),
    dict(magic=1, codec="gzip", appends=40, records=5, segmentBytes=16384, interval=1024),
])
def test_kafka_written_partition_is_clean(java_runner, tmp_path, capsys, opts):
    require_headers_decoded()
    import os
    folder = _kafka_folder(java_runner, tmp_path / "orders-0", **opts)
    assert main(["verify", str(folder)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    names = sorted(os.listdir(folder))
    idx = [str(folder / n) for n in names if n.endswith((".index", ".timeindex"))]
    assert idx
    assert main(["dump", "--files", ",".join(idx), "--verify-index-only"]) == 0
    out, err = capsys.readouterr()
    assert err == ""          # no mismatch, no out-of-order timestamp, no offset not found
    for n in names:
        if n.endswith(".log"):
            path = str(folder / n)
            expected = java_runner.run("DumpLogFormat", path, "data").stdout.decode().splitlines()
            assert main(["dump", "--files", path, "--print-data-log"]) == 0
            assert capsys.readouterr().out.splitlines()[2:] == expected


@pytest.mark.one_backend
def test_follower_chunk_indexes_report_like_kafka(java_runner, tmp_path, capsys):
    """An index entry naming the last offset of a 3-batch append points at the append's first
    batch: Kafka's own dump tool reports that as a mismatch, and so do we (verify does not)."""
    import os
    folder = _kafka_folder(java_runner, tmp_path / "orders-0", appends=30, batchesPerAppend=3,
                           records=5, segmentBytes=1 << 20, interval=1024)
    assert main(["verify", str(folder)]) == 0
    capsys.readouterr()
    idx = str(folder / "00000000000000000000.index")
    assert os.path.getsize(idx) > 0
    main(["dump", "--files", idx, "--verify-index-only"])
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"Mismatches in :{idx}"
    for line in err[1:]:
        index_offset, log_offset = (int(x.split(": ")[1]) for x in line.strip().split(", "))
        assert log_offset < index_offset


@pytest.mark.one_backend
def test_malformed_utf8_replaced_like_java(java_runner):
    import random
    from kafkawire.cli.javastr import java_utf8
    rnd = random.Random(7)
    pieces = [b"a", b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\xed\xa0\x80", b"\xc0",
              b"\xc1\x80", b"\xe0\x80", b"\xe0\xa0", b"\xf0\x80", b"\xf4\x90\x80\x80", b"\xf5",
              b"\xff", b"\x80", b"\xe1", b"\xf0\x9f", b"\xf0\x9f\x98", b"\xed", b"\xee\x80"]
    cases = [bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 12))) for _ in range(2000)]
    cases += [b"".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 6))) for _ in range(2000)]
    stdin = ("\n".join(c.hex() for c in cases) + "\n").encode()
    out = java_runner.run("Utf8Ref", input=stdin).stdout.decode().splitlines()
    assert len(out) == len(cases)
    for c, o in zip(cases, out):
        assert java_utf8(c) == bytes.fromhex(o).decode("utf-16-be"), c.hex()
