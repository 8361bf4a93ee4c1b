"""``kafkawire dump``: text and JSON output compared with expected values for batches built here."""
from __future__ import annotations

import base64
import json
import os
import struct

import pytest

from kafkawire import _kernels as K
from kafkawire.cli import main

from cli_support import run_cli
from cli_support import require_headers_decoded

records = pytest.importorskip("kafkawire.records")
if not hasattr(records, "BatchBuilder") or not hasattr(records, "iter_batches"):
    pytest.skip("kafkawire.records (iter_batches, BatchBuilder) not available yet",
                allow_module_level=True)
from kafkawire.records import BatchBuilder, control_batch  # noqa: E402


def v2_crc(raw: bytes) -> int:
    return K.crc32c(raw, 21, len(raw))


def build_segment():
    """Four v2 batches: plain with a header, gzip with nulls, transactional, commit marker."""
    b1 = BatchBuilder(partition_leader_epoch=0)
    b1.append(b"v0", key=b"k0", timestamp=1000)
    b1.append(b"v1", key=b"k1", timestamp=1001, headers=[("h1", b"x"), ("h2", None)])
    b1.append(b"v2", key=b"k2", timestamp=1002)
    b2 = BatchBuilder(compression="gzip", base_offset=3, partition_leader_epoch=0)
    b2.append(None, key=None, timestamp=2000)
    b2.append(b"", key=b"", timestamp=2001)
    b3 = BatchBuilder(base_offset=5, producer_id=7, producer_epoch=1, base_sequence=0,
                      is_transactional=True, partition_leader_epoch=0)
    b3.append(b"t0", timestamp=3000)
    b3.append(b"t1", timestamp=3001)
    b4 = control_batch("commit", base_offset=7, producer_id=7, producer_epoch=1,
                       coordinator_epoch=5, timestamp=4000, partition_leader_epoch=0)
    return [b1.build(), b2.build(), b3.build(), b4]


@pytest.fixture
def segment(tmp_path):
    d = tmp_path / "orders-0"
    d.mkdir()
    batches = build_segment()
    path = d / "00000000000000000000.log"
    path.write_bytes(b"".join(batches))
    return str(path), batches


def positions(batches):
    pos, out = 0, []
    for b in batches:
        out.append(pos)
        pos += len(b)
    return out


def expected_batch_lines(batches):
    p = positions(batches)
    b1, b2, b3, b4 = batches
    return [
        f"baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 "
        f"producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        f"deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1002 size: {len(b1)} "
        f"magic: 2 compresscodec: none crc: {v2_crc(b1)} isvalid: true",
        f"baseOffset: 3 lastOffset: 4 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
        f"producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        f"deleteHorizonMs: OptionalLong.empty position: {p[1]} CreateTime: 2001 size: {len(b2)} "
        f"magic: 2 compresscodec: gzip crc: {v2_crc(b2)} isvalid: true",
        f"baseOffset: 5 lastOffset: 6 count: 2 baseSequence: 0 lastSequence: 1 producerId: 7 "
        f"producerEpoch: 1 partitionLeaderEpoch: 0 isTransactional: true isControl: false "
        f"deleteHorizonMs: OptionalLong.empty position: {p[2]} CreateTime: 3001 size: {len(b3)} "
        f"magic: 2 compresscodec: none crc: {v2_crc(b3)} isvalid: true",
        f"baseOffset: 7 lastOffset: 7 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 "
        f"producerEpoch: 1 partitionLeaderEpoch: 0 isTransactional: true isControl: true "
        f"deleteHorizonMs: OptionalLong.empty position: {p[3]} CreateTime: 4000 size: {len(b4)} "
        f"magic: 2 compresscodec: none crc: {v2_crc(b4)} isvalid: true",
    ]


def test_shallow_text_matches_kafka_format(capsys, segment):
    path, batches = segment
    code, out, err = run_cli(capsys, "dump", "--files", path)
    assert code == 0, err
    assert out.splitlines() == [f"Dumping {path}", "Log starting offset: 0"] + \
        expected_batch_lines(batches)
    assert err == ""


def test_deep_iteration_with_data(capsys, segment):
    require_headers_decoded()
    path, batches = segment
    code, out, err = run_cli(capsys, "dump", "--files", path, "--print-data-log")
    assert code == 0, err
    lines = out.splitlines()[2:]
    bl = expected_batch_lines(batches)
    assert lines == [
        bl[0],
        "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [] key: k0 payload: v0",
        "| offset: 1 CreateTime: 1001 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [h1,h2] key: k1 payload: v1",
        "| offset: 2 CreateTime: 1002 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [] key: k2 payload: v2",
        bl[1],
        "| offset: 3 CreateTime: 2000 keySize: -1 valueSize: -1 sequence: -1 headerKeys: []",
        "| offset: 4 CreateTime: 2001 keySize: 0 valueSize: 0 sequence: -1 headerKeys: [] key:  payload: ",
        bl[2],
        "| offset: 5 CreateTime: 3000 keySize: -1 valueSize: 2 sequence: 0 headerKeys: [] payload: t0",
        "| offset: 6 CreateTime: 3001 keySize: -1 valueSize: 2 sequence: 1 headerKeys: [] payload: t1",
        bl[3],
        "| offset: 7 CreateTime: 4000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 5",
    ]


def test_deep_iteration_without_data_and_skip_metadata(capsys, segment):
    path, _ = segment
    _, out, _ = run_cli(capsys, "dump", "--files", path, "--deep-iteration")
    assert "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: []" \
        in out.splitlines()
    assert "payload" not in out
    _, out, _ = run_cli(capsys, "dump", "--files", path, "--print-data-log", "--skip-record-metadata")
    lines = out.splitlines()
    assert "| key: k0 payload: v0" in lines
    # as Kafka: the "| " prefix is only printed with metadata or a key
    assert " payload: t0" in lines
    assert lines[-1] == ""  # the commit marker: no metadata, no contents


BATCH_KEYS = ["type", "baseOffset", "lastOffset", "magic", "compresscodec", "isTransactional",
              "isControl", "producerId", "producerEpoch", "baseSequence", "partitionLeaderEpoch",
              "position", "size", "crc", "isvalid"]
RECORD_KEYS = ["type", "offset", "timestamp", "timestampType", "key", "value", "headers"]


def test_json_objects(capsys, segment):
    require_headers_decoded()
    path, batches = segment
    code, out, err = run_cli(capsys, "dump", "--files", path, "--deep-iteration", "--json")
    assert code == 0, err
    objs = [json.loads(line) for line in out.splitlines()]
    assert objs[0] == {"type": "file", "file": path}
    b = [o for o in objs if o["type"] == "batch"]
    r = [o for o in objs if o["type"] == "record"]
    assert all(sorted(o) == sorted(BATCH_KEYS) for o in b)
    assert all(sorted(o) == sorted(RECORD_KEYS) for o in r)
    assert b[0] == {"type": "batch", "baseOffset": 0, "lastOffset": 2, "magic": 2,
                    "compresscodec": "none", "isTransactional": False, "isControl": False,
                    "producerId": -1, "producerEpoch": -1, "baseSequence": -1,
                    "partitionLeaderEpoch": 0, "position": 0, "size": len(batches[0]),
                    "crc": v2_crc(batches[0]), "isvalid": True}
    assert b[2]["producerId"] == 7 and b[2]["isTransactional"] is True
    assert b[3]["isControl"] is True and b[1]["compresscodec"] == "gzip"
    assert r[1] == {"type": "record", "offset": 1, "timestamp": 1001, "timestampType": "CreateTime",
                    "key": base64.b64encode(b"k1").decode(), "value": base64.b64encode(b"v1").decode(),
                    "headers": [["h1", base64.b64encode(b"x").decode()], ["h2", None]]}
    assert r[3]["key"] is None and r[3]["value"] is None
    assert r[4]["key"] == "" and r[4]["value"] == ""
    assert [o["offset"] for o in r] == list(range(8))


def test_partial_tail_and_max_bytes(capsys, segment):
    path, batches = segment
    with open(path, "ab") as f:
        f.write(batches[0][:30])
    code, out, err = run_cli(capsys, "dump", "--files", path)
    assert code == 1        # invalid bytes at the end are damage, as a zero-filled tail is
    assert out.splitlines()[-1] == "Found 30 invalid bytes at the end of 00000000000000000000.log"
    assert len(err.strip().splitlines()) == 1 and "30 invalid bytes" in err
    _, out, _ = run_cli(capsys, "dump", "--files", path, "--max-bytes", str(len(batches[0]) + 10))
    lines = out.splitlines()
    assert len(lines) == 3 and lines[2].startswith("baseOffset: 0 lastOffset: 2")


def test_zero_filled_tail_is_one_error_line(capsys, segment):
    path, batches = segment
    with open(path, "ab") as f:
        f.write(b"\0" * 64)
    code, out, err = run_cli(capsys, "dump", "--files", path)
    assert code == 1
    assert len(out.splitlines()) == 2 + 4 + 1   # header lines, 4 batches, "Found 64 invalid bytes"
    assert out.splitlines()[-1] == "Found 64 invalid bytes at the end of 00000000000000000000.log"
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_flipped_byte_shows_isvalid_false(capsys, segment):
    path, batches = segment
    data = bytearray(open(path, "rb").read())
    data[len(batches[0]) - 1] ^= 0xFF   # last byte of batch 1's records
    open(path, "wb").write(bytes(data))
    code, out, err = run_cli(capsys, "dump", "--files", path)
    assert code == 0
    lines = out.splitlines()
    assert lines[2].endswith("isvalid: false") and lines[3].endswith("isvalid: true")


def test_missing_file_and_unknown_suffix(capsys, tmp_path):
    code, out, err = run_cli(capsys, "dump", "--files", str(tmp_path / "nope.log"))
    assert code == 1 and "No such file" in err and "Traceback" not in err
    other = tmp_path / "notes.txt"
    other.write_text("x")
    code, out, err = run_cli(capsys, "dump", "--files", str(other))
    assert code == 1 and err.strip().startswith(f"Ignoring unknown file {other}: not a .log")
    code, _, err = run_cli(capsys, "dump")
    assert code == 2 and "--files" in err


def test_non_consecutive_offsets_reported(capsys, tmp_path):
    b = BatchBuilder()
    b.append(b"a", timestamp=1, offset=0)
    b.append(b"b", timestamp=2, offset=5)   # a compaction gap
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b.build())
    code, out, err = run_cli(capsys, "dump", "--files", str(path), "--deep-iteration")
    assert code == 0
    assert err.splitlines() == [f"Non-consecutive offsets in {path}", "  0 is followed by 5"]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_legacy_messages(capsys, tmp_path, magic, codec):
    b = BatchBuilder(magic=magic, compression=codec, base_offset=10)
    b.append(b"hello", key=b"k", timestamp=5000)
    b.append(b"world", key=None, timestamp=5001)
    raw = b.build()
    path = tmp_path / "00000000000000000010.log"
    path.write_bytes(raw)
    code, out, err = run_cli(capsys, "dump", "--files", str(path), "--print-data-log")
    assert code == 0, err
    lines = out.splitlines()[2:]
    ts_name = "NoTimestampType" if magic == 0 else "CreateTime"
    if codec == "none":
        assert lines[0].startswith(f"offset: 10 position: 0 {ts_name}: ")
        assert lines[0].endswith(f"magic: {magic} compresscodec: none crc: "
                                 f"{struct.unpack_from('>I', raw, 12)[0]} isvalid: true")
        assert lines[1].startswith(f"| offset: 10 {ts_name}: ")
        assert lines[1].endswith(f"isValid: true crc: {struct.unpack_from('>I', raw, 12)[0]}}} "
                                 "key: k payload: hello")
        assert lines[3].endswith("} payload: world")
    else:
        assert lines[0].startswith(f"offset: 11 position: 0 {ts_name}: ")
        assert "compresscodec: gzip" in lines[0]
        assert lines[1].startswith(f"| offset: 10 {ts_name}: ")
        assert " isValid: true crc: " in lines[1] and lines[1].endswith("} key: k payload: hello")
        assert lines[2].startswith(f"| offset: 11 {ts_name}: ")


def test_directory_expands_to_segment_files(capsys, segment):
    path, _ = segment
    folder = os.path.dirname(path)
    code, out, _ = run_cli(capsys, "dump", "--files", folder)
    assert code == 0 and out.splitlines()[0] == f"Dumping {path}"


def test_offsets_and_transaction_log_decoders_end_to_end(capsys, tmp_path):
    def s(v):
        b = v.encode()
        return struct.pack(">h", len(b)) + b
    b = BatchBuilder()
    b.append(struct.pack(">h", 3) + struct.pack(">qi", 42, 5) + s("") + struct.pack(">q", 1700),
             key=struct.pack(">h", 1) + s("grp") + s("orders") + struct.pack(">i", 2), timestamp=1)
    b.append(None, key=struct.pack(">h", 1) + s("grp") + s("orders") + struct.pack(">i", 3),
             timestamp=2)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b.build())
    code, out, err = run_cli(capsys, "dump", "--files", str(path), "--offsets-decoder")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[3].endswith(
        'headerKeys: [] key: {"type":"1","data":{"group":"grp","topic":"orders","partition":2}} '
        'payload: {"version":"3","data":{"offset":42,"leaderEpoch":5,"metadata":"",'
        '"commitTimestamp":1700}}')
    assert lines[4].endswith('"partition":3}} payload: <DELETE>')
    code, out, err = run_cli(capsys, "dump", "--files", str(path), "--offsets-decoder", "--json")
    recs = [json.loads(x) for x in out.splitlines() if '"record"' in x]
    assert recs[0]["decodedKey"] == {"type": "1", "data": {"group": "grp", "topic": "orders",
                                                           "partition": 2}}
    assert recs[0]["decodedValue"]["data"]["offset"] == 42 and recs[1]["decodedValue"] == "<DELETE>"

    t = BatchBuilder()
    t.append(struct.pack(">hqhib", 0, 9, 1, 60000, 4) + struct.pack(">i", -1) + struct.pack(">qq", 5, 4),
             key=struct.pack(">h", 0) + s("tx"), timestamp=1)
    path.write_bytes(t.build())
    code, out, err = run_cli(capsys, "dump", "--files", str(path), "--transaction-log-decoder")
    assert code == 0, err
    assert out.splitlines()[3].endswith(
        'key: {"type":"0","data":{"transactionalId":"tx"}} payload: {"version":"0","data":'
        '{"producerId":9,"producerEpoch":1,"transactionTimeoutMs":60000,"transactionStatus":4,'
        '"transactionPartitions":null,"transactionLastUpdateTimestampMs":5,'
        '"transactionStartTimestampMs":4}}')


def test_broken_pipe_stops_quietly(monkeypatch, capsys, segment):
    path, _ = segment

    class Closed:
        def write(self, s):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass

        def isatty(self):
            return False

    monkeypatch.setattr("sys.stdout", Closed())
    assert main(["dump", "--files", path, "--deep-iteration"]) == 141
    assert capsys.readouterr().err == ""


def test_kraft_snapshot_checkpoint(capsys, tmp_path):
    b = BatchBuilder()
    b.append(b"x", timestamp=1)
    path = tmp_path / "00000000000000000100-0000000003.checkpoint"
    path.write_bytes(b.build())
    code, out, _ = run_cli(capsys, "dump", "--files", str(path))
    assert code == 0
    assert out.splitlines()[:3] == [f"Dumping {path}", "Snapshot end offset: 100, epoch: 3",
                                    out.splitlines()[2]]
    assert out.splitlines()[2].startswith("baseOffset: 0 lastOffset: 0 count: 1")


def test_progress_bar_on_a_terminal(monkeypatch, capsys, tmp_path):
    import io

    class Tty(io.StringIO):
        def isatty(self):
            return True

    for i in range(3):
        b = BatchBuilder()
        b.append(b"x", timestamp=1)
        (tmp_path / f"{i:020d}.log").write_bytes(b.build())
    files = ",".join(str(tmp_path / f"{i:020d}.log") for i in range(3))
    fake = Tty()
    monkeypatch.setattr("sys.stderr", fake)
    assert main(["dump", "--files", files]) == 0      # stdout is not a terminal: bar on stderr
    drawn = fake.getvalue()
    assert "%" in drawn and drawn.endswith("\r\x1b[K")
    fake.seek(0)
    fake.truncate()
    assert main(["dump", "--files", files, "--no-progress"]) == 0
    assert fake.getvalue() == ""
    capsys.readouterr()
