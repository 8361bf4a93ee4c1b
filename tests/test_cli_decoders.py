"""__consumer_offsets and __transaction_state decoders, on records hand-encoded per Kafka's schemas."""
from __future__ import annotations

import base64
import json
import struct

import pytest

from kafkawire.cli import offsets_decoder as od
from kafkawire.cli import txn_decoder as td


# --- hand encoders (Kafka's generated-message wire format) ---------------------
def i16(v): return struct.pack(">h", v)
def i32(v): return struct.pack(">i", v)
def i64(v): return struct.pack(">q", v)


def s(v):  # legacy (non-flexible) string
    if v is None:
        return i16(-1)
    b = v.encode()
    return i16(len(b)) + b


def by(v):  # legacy bytes
    if v is None:
        return i32(-1)
    return i32(len(v)) + v


def uv(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def cs(v):  # compact string
    if v is None:
        return uv(0)
    b = v.encode()
    return uv(len(b) + 1) + b


def cb(v):  # compact bytes
    return uv(0) if v is None else uv(len(v) + 1) + v


def arr(items, enc):
    return i32(len(items)) + b"".join(enc(x) for x in items)


def carr(items, enc):
    return uv(len(items) + 1) + b"".join(enc(x) for x in items)


def offset_key(version, group, topic, partition):
    return i16(version) + s(group) + s(topic) + i32(partition)


def subscription_v1(topics, owned, user_data=None):
    return (i16(1) + arr(topics, s) + by(user_data)
            + arr(owned, lambda tp: s(tp[0]) + arr(tp[1], i32)))


def assignment_v0(parts, user_data=None):
    return i16(0) + arr(parts, lambda tp: s(tp[0]) + arr(tp[1], i32)) + by(user_data)


# --- offset commits ------------------------------------------------------------
@pytest.mark.parametrize("version,body,expected", [
    (0, i64(42) + s("meta") + i64(1000),
     {"offset": 42, "metadata": "meta", "commitTimestamp": 1000}),
    (1, i64(42) + s("") + i64(1000) + i64(2000),
     {"offset": 42, "metadata": "", "commitTimestamp": 1000, "expireTimestamp": 2000}),
    (2, i64(7) + s("m") + i64(5),
     {"offset": 7, "metadata": "m", "commitTimestamp": 5}),
    (3, i64(7) + i32(3) + s("m") + i64(5),
     {"offset": 7, "leaderEpoch": 3, "metadata": "m", "commitTimestamp": 5}),
    (4, i64(7) + i32(-1) + cs("m") + i64(5) + uv(0),
     {"offset": 7, "leaderEpoch": -1, "metadata": "m", "commitTimestamp": 5}),
])
def test_offset_commit_values(version, body, expected):
    key = offset_key(1, "grp", "orders", 3)
    k, v = od.parse_record(key, i16(version) + body, 10)
    assert k == '{"type":"1","data":{"group":"grp","topic":"orders","partition":3}}'
    assert json.loads(v) == {"version": str(version), "data": expected}
    # field order is the schema's, as Kafka's JSON converter writes it
    assert list(json.loads(v)["data"]) == list(expected)
    assert v == json.dumps({"version": str(version), "data": expected}, separators=(",", ":"))


def test_offset_commit_key_v0_and_tombstone():
    k, v = od.parse_record(offset_key(0, "g", "t", 0), None, 5)
    assert k == '{"type":"0","data":{"group":"g","topic":"t","partition":0}}'
    assert v == "<DELETE>"


def _member(version, member_id, subscription, assignment, instance=None):
    out = s(member_id)
    if version >= 3:
        out += s(instance)
    out += s("client-1") + s("/10.0.0.1")
    if version >= 1:
        out += i32(300000)
    out += i32(45000) + by(subscription) + by(assignment)
    return out


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_group_metadata_consumer_protocol(version):
    sub = subscription_v1(["orders"], [("orders", [0, 1])], b"ud")
    asg = assignment_v0([("orders", [0, 1])])
    body = s("consumer") + i32(5) + s("range") + s("m-1")
    if version >= 2:
        body += i64(1700000000000)
    body += arr([0], lambda _: _member(version, "m-1", sub, asg, "inst"))
    key = i16(2) + s("grp")
    k, v = od.parse_record(key, i16(version) + body, 0)
    assert k == '{"type":"2","data":{"group":"grp"}}'
    data = json.loads(v)
    assert data["version"] == str(version)
    d = data["data"]
    assert d["protocolType"] == "consumer" and d["generation"] == 5
    assert d["protocol"] == "range" and d["leader"] == "m-1"
    assert ("currentStateTimestamp" in d) == (version >= 2)
    m = d["members"][0]
    expected_keys = ["memberId"] + (["groupInstanceId"] if version >= 3 else []) + \
        ["clientId", "clientHost"] + (["rebalanceTimeout"] if version >= 1 else []) + \
        ["sessionTimeout", "subscription", "assignment"]
    assert list(m) == expected_keys
    assert m["subscription"] == {"topics": ["orders"], "userData": base64.b64encode(b"ud").decode(),
                                 "ownedPartitions": [{"topic": "orders", "partitions": [0, 1]}]}
    assert m["assignment"] == {"assignedPartitions": [{"topic": "orders", "partitions": [0, 1]}],
                               "userData": None}


def test_group_metadata_v4_flexible_and_non_consumer_protocol():
    member = (cs("m-1") + cs(None) + cs("c") + cs("h") + i32(1) + i32(2)
              + cb(b"\x00\x01") + cb(b"\x02") + uv(0))
    body = cs("connect") + i32(1) + cs(None) + cs(None) + i64(-1) + carr([0], lambda _: member) + uv(0)
    k, v = od.parse_record(i16(2) + s("g"), i16(4) + body, 0)
    d = json.loads(v)["data"]
    assert d["protocol"] is None and d["leader"] is None
    # not the consumer protocol: subscription/assignment stay base64 bytes
    assert d["members"][0]["subscription"] == "AAE="
    assert d["members"][0]["assignment"] == "Ag=="
    assert d["members"][0]["groupInstanceId"] is None


def test_consumer_member_with_undecodable_subscription_keeps_bytes():
    member = _member(0, "m", b"\x00", b"\xff\xff")
    body = s("consumer") + i32(1) + s("range") + s("m") + arr([0], lambda _: member)
    d = json.loads(od.parse_record(i16(2) + s("g"), i16(0) + body, 0)[1])["data"]
    assert d["members"][0]["subscription"] == "AA=="
    assert d["members"][0]["assignment"] == "//8="


def test_offsets_unknown_and_damaged():
    assert od.parse_record(i16(9) + s("g"), b"", 12) == \
        ("Unknown record type 9 at offset 12, skipping.", None)
    k, v = od.parse_record(offset_key(1, "g", "t", 0), i16(1) + i64(1), 13)
    assert k.startswith("Error at offset 13, skipping.") and v is None
    k, v = od.parse_record(None, b"x", 14)
    assert "missing key" in k and v is None
    k, v = od.parse_record(offset_key(1, "g", "t", 0), i16(9) + b"\x00" * 30, 15)
    assert "Can't read version 9 of OffsetCommitValue" in k
    # hostile array length: an error, not a huge allocation
    k, _ = od.parse_record(i16(2) + s("g"), i16(0) + s("consumer") + i32(1) + s(None) + s(None)
                           + i32(2 ** 31 - 1), 16)
    assert k.startswith("Error at offset 16")


# --- transaction log -------------------------------------------------------------
def test_txn_value_v0():
    key = i16(0) + s("tx-1")
    value = (i16(0) + i64(1000) + i16(2) + i32(60000) + struct.pack(">b", 1)
             + arr([("orders", [0, 2])], lambda tp: s(tp[0]) + arr(tp[1], i32)) + i64(111) + i64(100))
    k, v = td.parse_record(key, value, 3)
    assert k == '{"type":"0","data":{"transactionalId":"tx-1"}}'
    assert json.loads(v) == {"version": "0", "data": {
        "producerId": 1000, "producerEpoch": 2, "transactionTimeoutMs": 60000,
        "transactionStatus": 1,
        "transactionPartitions": [{"topic": "orders", "partitionIds": [0, 2]}],
        "transactionLastUpdateTimestampMs": 111, "transactionStartTimestampMs": 100}}
    assert td.TXN_STATES[1] == "Ongoing"


def test_txn_value_v1_flexible_with_tags_and_null_partitions():
    tags = uv(2) + uv(0) + uv(8) + i64(999) + uv(2) + uv(2) + i16(2)
    value = (i16(1) + i64(5) + i16(0) + i32(1) + struct.pack(">b", 4) + uv(0)
             + i64(2) + i64(1) + tags)
    k, v = td.parse_record(i16(0) + s("t"), value, 0)
    d = json.loads(v)["data"]
    assert d["transactionPartitions"] is None
    assert d["previousProducerId"] == 999 and d["clientTransactionVersion"] == 2
    assert list(d)[:3] == ["producerId", "previousProducerId", "producerEpoch"]


def test_txn_tombstone_unknown_and_damaged():
    assert td.parse_record(i16(0) + s("t"), None, 0)[1] == "<DELETE>"
    assert td.parse_record(i16(3) + s("t"), b"", 8) == \
        ("Unknown record type 3 at offset 8, skipping.", None)
    k, v = td.parse_record(i16(0) + s("t"), i16(0) + i64(1), 9)
    assert k.startswith("Error at offset 9, skipping.") and v is None


@pytest.mark.parametrize("data,expected", [
    (b"caf\xc3\xa9", "café"),
    (b"\xed\xa0\x80x", "\ufffdx"),            # an encoded surrogate: one replacement (Python: three)
    (b"a\xe2\x82", "a\ufffd"),                # truncated at the end
    (b"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"),
    (b"\xc0\xaf", "\ufffd\ufffd"),
    (b"\xe0\x80\x80", "\ufffd\ufffd\ufffd"),
])
def test_java_utf8(data, expected):
    from kafkawire.cli.javastr import java_utf8
    assert java_utf8(data) == expected
