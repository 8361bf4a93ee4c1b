"""The records the coordinators write to ``__consumer_offsets`` and ``__transaction_state``.

They must read back through the CLI decoders (which print exactly what Kafka's
``kafka-dump-log.sh`` prints), and a group must land in the partition Kafka
picks (Java's ``String.hashCode``, checked against the JVM).
"""
from __future__ import annotations

import json

import pytest

from kafkawire.cli import offsets_decoder as od
from kafkawire.cli import txn_decoder as td
from kafkawire.protocol import MessageDecodeError
from kafkawire.protocol import coordinator_records as R

NAMES = ["", "a", "my-group", "hello", "polygenelubricants", "grüße", "组", "emoji-\U0001F600",
         "console-consumer-12345", "x" * 300]


def test_offset_commit_record_reads_back_through_the_dump_decoder():
    key = R.encode(R.OffsetCommitKey(group="g1", topic="orders", partition=7))
    value = R.encode(R.OffsetCommitValue(offset=1234, leader_epoch=3, metadata="m",
                                         commit_timestamp=1700000000000))
    k, v = od.parse_record(key, value, 0)
    assert json.loads(k) == {"type": "1", "data": {"group": "g1", "topic": "orders", "partition": 7}}
    assert json.loads(v) == {"version": "3", "data": {"offset": 1234, "leaderEpoch": 3, "metadata": "m",
                                                      "commitTimestamp": 1700000000000}}
    dk = R.decode_offsets_key(key)
    assert isinstance(dk, R.OffsetCommitKey) and dk.partition == 7
    assert R.decode_offsets_value(dk, value).offset == 1234


def test_group_metadata_record_reads_back_through_the_dump_decoder():
    sub = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"
    member = R.GroupMetadataValue.MemberMetadata(
        member_id="m-1", group_instance_id="i-1", client_id="c", client_host="/127.0.0.1",
        rebalance_timeout=300000, session_timeout=10000, subscription=sub, assignment=b"")
    value = R.encode(R.GroupMetadataValue(protocol_type="consumer", generation=4,
                                          protocol="range", leader="m-1",
                                          current_state_timestamp=5, members=[member]))
    k, v = od.parse_record(R.encode(R.GroupMetadataKey(group="g1")), value, 3)
    assert json.loads(k) == {"type": "2", "data": {"group": "g1"}}
    data = json.loads(v)["data"]
    assert data["generation"] == 4 and data["leader"] == "m-1"
    assert data["members"][0]["groupInstanceId"] == "i-1"
    assert data["members"][0]["subscription"]["topics"] == ["t"]
    assert od.parse_record(R.encode(R.GroupMetadataKey(group="g1")), None, 4)[1] == "<DELETE>"


@pytest.mark.parametrize("version", [0, 1])
def test_transaction_log_record_reads_back_through_the_dump_decoder(version):
    value = R.TransactionLogValue(
        producer_id=9, producer_epoch=2, transaction_timeout_ms=60000, transaction_status=1,
        transaction_partitions=[{"topic": "t", "partition_ids": [0, 2]}],
        transaction_last_update_timestamp_ms=11, transaction_start_timestamp_ms=10)
    raw = R.encode(value, version)
    k, v = td.parse_record(R.encode(R.TransactionLogKey(transactional_id="tx")), raw, 0)
    assert json.loads(k) == {"type": "0", "data": {"transactionalId": "tx"}}
    data = json.loads(v)["data"]
    assert data["transactionPartitions"] == [{"topic": "t", "partitionIds": [0, 2]}]
    assert data["transactionStatus"] == 1 and data["producerEpoch"] == 2
    assert R.decode_txn_value(raw) == value
    assert R.decode_txn_key(R.encode(R.TransactionLogKey(transactional_id="tx"))).transactional_id == "tx"


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\x00\x09abc", b"\x00\x01\x00\x05ab", b"\xff\xff"])
def test_hostile_keys_raise_typed_errors(raw):
    with pytest.raises(MessageDecodeError):
        R.decode_offsets_key(raw)
    with pytest.raises(MessageDecodeError):
        R.decode_txn_key(raw)


def test_unknown_value_version_is_refused():
    key = R.decode_offsets_key(R.encode(R.OffsetCommitKey(group="g", topic="t", partition=0)))
    with pytest.raises(MessageDecodeError, match="Can't read version 9 of OffsetCommitValue"):
        R.decode_offsets_value(key, b"\x00\x09" + b"\x00" * 30)


def test_partition_for_is_kafkas_hash_code_rule():
    assert R.java_string_hash("hello") == 99162322
    assert R.java_string_hash("polygenelubricants") == -(2 ** 31)
    assert R.partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert all(0 <= R.partition_for(n, 50) < 50 for n in NAMES)
    with pytest.raises(ValueError):
        R.partition_for("g", 0)


@pytest.mark.one_backend
def test_java_string_hash_matches_the_jvm(java_runner):
    out = java_runner.run("StringHashRef", *[n.encode().hex() for n in NAMES]).stdout.decode()
    assert [int(x) for x in out.split()] == [R.java_string_hash(n) for n in NAMES]
