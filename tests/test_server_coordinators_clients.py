"""Groups and transactions on ``kafkawire serve``, proved with clients nobody here wrote.

confluent-kafka (librdkafka), kafka-python and aiokafka join one group and
split its partitions; offsets committed by one library are read by another
after the broker restarts, and ``kafkawire dump --offsets-decoder`` reads
what the broker wrote; a confluent-kafka transactional producer's committed
records are visible and aborted ones invisible to read_committed consumers;
``send_offsets_to_transaction`` commits a group's offsets with the output.
"""
from __future__ import annotations

import asyncio
import glob
import io
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from contextlib import redirect_stdout

import pytest

from kafkawire.cli.main import main as cli_main
from kafkawire.protocol import (ApiVersionsRequest, FindCoordinatorRequest, decode_response,
                                encode_request)
from kafkawire.testing import running_broker

ck = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.one_backend

CONFIG = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5",
          "transaction.state.log.num.partitions": "3"}


def produce(bootstrap, topic, n, partitions, prefix="v"):
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=f"{prefix}{i}".encode(), partition=i % partitions)
    assert p.flush(30) == 0


def confluent_consumer(bootstrap, group, **extra):
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500, "partition.assignment.strategy": "roundrobin"}
    conf.update(extra)
    return ck.Consumer(conf)


def drain(consumer, want, timeout=30.0):
    got = []
    deadline = time.time() + timeout
    while len(got) < want and time.time() < deadline:
        m = consumer.poll(0.2)
        if m is None or m.error():
            continue
        got.append((m.partition(), m.offset(), m.value()))
    return got


class Member(threading.Thread):
    """One group member polling in a thread of its own until told to stop."""

    def __init__(self, name, poll, assignment, close):
        super().__init__(daemon=True, name=name)
        self.poll_once, self.read_assignment, self.close_fn = poll, assignment, close
        self.records = []
        self.owned = set()
        self.error = None
        self.stop_flag = threading.Event()

    def assignment(self):
        return set(self.owned)

    def run(self):
        # Every call on the client happens in this thread (clients are not shared).
        try:
            while not self.stop_flag.is_set():
                self.records.extend(self.poll_once())
                self.owned = self.read_assignment()
        except Exception as exc:  # reported by the test
            self.error = exc
        finally:
            try:
                self.close_fn()
            except Exception:
                pass


def confluent_member(bootstrap, group, topic):
    c = confluent_consumer(bootstrap, group)
    c.subscribe([topic])

    def poll():
        m = c.poll(0.1)
        if m is None or m.error():
            return []
        return [(m.partition(), m.offset(), m.value())]
    return Member("confluent", poll, lambda: {tp.partition for tp in c.assignment()}, c.close)


def kafka_python_member(bootstrap, group, topic):
    kp = pytest.importorskip("kafka")
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    c = kp.KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         session_timeout_ms=10000, heartbeat_interval_ms=500,
                         partition_assignment_strategy=[RoundRobinPartitionAssignor])

    def poll():
        out = []
        for tp, msgs in c.poll(timeout_ms=100).items():
            out.extend((m.partition, m.offset, m.value) for m in msgs)
        return out
    return Member("kafka-python", poll, lambda: {tp.partition for tp in c.assignment()}, c.close)


def aiokafka_member(bootstrap, group, topic):
    aiokafka = pytest.importorskip("aiokafka")
    loop = asyncio.new_event_loop()
    state = {}

    async def start():
        cons = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                         auto_offset_reset="earliest", enable_auto_commit=False,
                                         session_timeout_ms=10000, heartbeat_interval_ms=500)
        await cons.start()
        state["c"] = cons

    async def getmany():
        out = []
        for tp, msgs in (await state["c"].getmany(timeout_ms=100)).items():
            out.extend((m.partition, m.offset, m.value) for m in msgs)
        return out

    def poll():
        if "c" not in state:
            loop.run_until_complete(start())
        return loop.run_until_complete(getmany())

    def assignment():
        cons = state.get("c")
        return set() if cons is None else {tp.partition for tp in cons.assignment()}

    def close():
        if "c" in state:
            loop.run_until_complete(state["c"].stop())
        loop.close()
    return Member("aiokafka", poll, assignment, close)


def run_group(members, bootstrap, topic, partitions, n, broker, group):
    for m in members:
        m.start()
    try:
        # wait for one stable generation in which every member owns partitions
        deadline = time.time() + 60
        while time.time() < deadline:
            g = broker.call(lambda: broker.group_coordinator.groups.get(group))
            owned = [m.assignment() for m in members]
            if g is not None and g.state == "Stable" and len(g.members) == len(members) \
                    and all(owned) and sum(len(o) for o in owned) == partitions:
                break
            assert not any(m.error for m in members), [m.error for m in members]
            time.sleep(0.2)
        else:
            pytest.fail(f"the group did not settle: {[m.assignment() for m in members]}")
        produce(bootstrap, topic, n, partitions)
        deadline = time.time() + 60
        while sum(len(m.records) for m in members) < n and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)  # anything read twice would show up now
    finally:
        for m in members:
            m.stop_flag.set()
        for m in members:
            m.join(30)
    assert not any(m.error for m in members), [m.error for m in members]
    values = [v for m in members for _, _, v in m.records]
    assert len(values) == n and set(values) == {f"v{i}".encode() for i in range(n)}
    parts = [{p for p, _, _ in m.records} for m in members]
    for i, a in enumerate(parts):
        assert a, f"{members[i].name} read nothing"
        for b in parts[i + 1:]:
            assert not a & b, "a partition was read by two members"


def test_two_confluent_consumers_split_partitions_exactly_once(tmp_path):
    with running_broker(str(tmp_path / "logs"), config=CONFIG) as broker:
        broker.create_topic("split", 6)
        bs = broker.bootstrap_servers
        run_group([confluent_member(bs, "two", "split"), confluent_member(bs, "two", "split")],
                  bs, "split", 6, 600, broker, "two")


def test_three_libraries_in_one_group(tmp_path):
    pytest.importorskip("kafka")
    pytest.importorskip("aiokafka")
    with running_broker(str(tmp_path / "logs"), config=CONFIG) as broker:
        broker.create_topic("mixed", 6)
        bs = broker.bootstrap_servers
        members = [confluent_member(bs, "three", "mixed"), kafka_python_member(bs, "three", "mixed"),
                   aiokafka_member(bs, "three", "mixed")]
        run_group(members, bs, "mixed", 6, 300, broker, "three")


def test_offsets_committed_by_one_library_are_read_by_others_after_restart(tmp_path):
    kp = pytest.importorskip("kafka")
    logs = str(tmp_path / "logs")
    with running_broker(logs, config=CONFIG) as broker:
        broker.create_topic("c", 2)
        produce(broker.bootstrap_servers, "c", 40, 2)
        c = confluent_consumer(broker.bootstrap_servers, "shared")
        c.subscribe(["c"])
        assert len(drain(c, 40)) == 40
        c.commit(offsets=[ck.TopicPartition("c", 0, 15), ck.TopicPartition("c", 1, 20)],
                 asynchronous=False)
        c.close()
    with running_broker(logs, config=CONFIG) as broker:
        bs = broker.bootstrap_servers
        k = kp.KafkaConsumer(bootstrap_servers=bs, group_id="shared", enable_auto_commit=False)
        tps = [kp.TopicPartition("c", 0), kp.TopicPartition("c", 1)]
        assert [k.committed(tp) for tp in tps] == [15, 20]
        k.subscribe(["c"])
        got = []
        deadline = time.time() + 30
        while len(got) < 5 and time.time() < deadline:
            for tp, msgs in k.poll(timeout_ms=200).items():
                got.extend((m.partition, m.offset) for m in msgs)
        for tp, msgs in k.poll(timeout_ms=500).items():
            got.extend((m.partition, m.offset) for m in msgs)
        assert sorted(got) == [(0, o) for o in range(15, 20)]
        k.commit({kp.TopicPartition("c", 0): kp.OffsetAndMetadata(20, "", -1)})
        k.close()
        c2 = confluent_consumer(bs, "shared")
        assert [tp.offset for tp in c2.committed([ck.TopicPartition("c", 0),
                                                 ck.TopicPartition("c", 1)], timeout=10)] == [20, 20]
        c2.close()
    # the dump tool reads what the broker wrote, as Kafka's kafka-dump-log.sh would
    folders = glob.glob(os.path.join(logs, "__consumer_offsets-*"))
    assert len(folders) == 5
    out = io.StringIO()
    with redirect_stdout(out):
        for f in folders:
            for seg in glob.glob(os.path.join(f, "*.log")):
                assert cli_main(["dump", "--offsets-decoder", "--no-progress", "--files", seg]) == 0
    text = out.getvalue()
    commits = [line for line in text.splitlines() if '"group":"shared","topic":"c"' in line]
    assert commits and all("Error at offset" not in line for line in text.splitlines())
    payloads = [json.loads(line.split("payload: ", 1)[1]) for line in commits if "payload: " in line]
    assert {p["data"]["offset"] for p in payloads} >= {15, 20}


def _txn_producer(bootstrap, tid, **extra):
    conf = {"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5}
    conf.update(extra)
    p = ck.Producer(conf)
    p.init_transactions(30)
    return p


def test_transactions_committed_visible_aborted_invisible(tmp_path):
    with running_broker(str(tmp_path / "logs"), config=CONFIG) as broker:
        broker.create_topic("tx", 2)
        bs = broker.bootstrap_servers
        p = _txn_producer(bs, "tx-1")
        for batch, commit in (("a", True), ("b", False), ("c", True)):
            p.begin_transaction()
            for i in range(10):
                p.produce("tx", value=f"{batch}{i}".encode(), partition=i % 2)
            p.flush(30)  # an abort purges unsent messages: send them, so the log holds them
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
        committed = confluent_consumer(bs, "rc", **{"isolation.level": "read_committed"})
        committed.subscribe(["tx"])
        got = {v for _, _, v in drain(committed, 20)}
        committed.close()
        assert got == {f"{b}{i}".encode() for b in "ac" for i in range(10)}
        everything = confluent_consumer(bs, "ru", **{"isolation.level": "read_uncommitted"})
        everything.subscribe(["tx"])
        assert len(drain(everything, 30)) == 30
        everything.close()
        # a second producer with the same transactional id fences the first
        p2 = _txn_producer(bs, "tx-1")
        p.begin_transaction()
        p.produce("tx", value=b"zombie", partition=0)
        with pytest.raises(ck.KafkaException):
            p.commit_transaction(10)
        p2.begin_transaction()
        p2.produce("tx", value=b"d0", partition=0)
        p2.commit_transaction(30)
        state = broker.call(lambda: broker.txn_coordinator.txns["tx-1"])
        assert state.state == 4  # CompleteCommit
        logs = broker.log_dirs[0]
    # the aborted transaction is in the partitions' .txnindex; the state log reads as Kafka's
    assert any(os.path.getsize(f) > 0 for f in glob.glob(os.path.join(logs, "tx-*", "*.txnindex")))
    out = io.StringIO()
    with redirect_stdout(out):
        for seg in glob.glob(os.path.join(logs, "__transaction_state-*", "*.log")):
            assert cli_main(["dump", "--transaction-log-decoder", "--no-progress",
                             "--files", seg]) == 0
    lines = [line for line in out.getvalue().splitlines() if '"transactionalId":"tx-1"' in line]
    assert lines and not any("Error at offset" in line for line in out.getvalue().splitlines())
    assert '"transactionStatus":4' in lines[-1]


def test_send_offsets_to_transaction(tmp_path):
    logs = str(tmp_path / "logs")
    with running_broker(logs, config=CONFIG) as broker:
        broker.create_topic("in", 1)
        broker.create_topic("out", 1)
        bs = broker.bootstrap_servers
        produce(bs, "in", 10, 1)
        c = confluent_consumer(bs, "eos", **{"isolation.level": "read_committed"})
        c.subscribe(["in"])
        msgs = drain(c, 10)
        assert len(msgs) == 10
        p = _txn_producer(bs, "eos-1")

        def step(n_offset, commit):
            p.begin_transaction()
            p.produce("out", value=b"x", partition=0)
            p.send_offsets_to_transaction([ck.TopicPartition("in", 0, n_offset)],
                                          c.consumer_group_metadata(), 30)
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
        step(4, True)
        assert c.committed([ck.TopicPartition("in", 0)], timeout=10)[0].offset == 4
        step(9, False)
        assert c.committed([ck.TopicPartition("in", 0)], timeout=10)[0].offset == 4
        step(10, True)
        assert c.committed([ck.TopicPartition("in", 0)], timeout=10)[0].offset == 10
        c.close()
    with running_broker(logs, config=CONFIG) as broker:
        c = confluent_consumer(broker.bootstrap_servers, "eos")
        assert c.committed([ck.TopicPartition("in", 0)], timeout=10)[0].offset == 10
        c.close()


def test_admin_lists_describes_and_deletes_groups(tmp_path):
    from confluent_kafka.admin import AdminClient
    with running_broker(str(tmp_path / "logs"), config=CONFIG) as broker:
        broker.create_topic("adm", 2)
        bs = broker.bootstrap_servers
        produce(bs, "adm", 4, 2)
        c = confluent_consumer(bs, "live")
        c.subscribe(["adm"])
        assert len(drain(c, 4)) == 4
        c.commit(asynchronous=False)
        done = confluent_consumer(bs, "done")
        done.commit(offsets=[ck.TopicPartition("adm", 0, 1)], asynchronous=False)
        done.close()
        admin = AdminClient({"bootstrap.servers": bs})
        listed = admin.list_consumer_groups().result(30)
        assert {g.group_id for g in listed.valid} == {"live", "done"}
        desc = admin.describe_consumer_groups(["live"])["live"].result(30)
        assert str(desc.state).endswith("STABLE") and len(desc.members) == 1
        assert {tp.partition for tp in desc.members[0].assignment.topic_partitions} == {0, 1}
        bad = admin.delete_consumer_groups(["live"])["live"]
        with pytest.raises(ck.KafkaException, match="NON_EMPTY_GROUP"):
            bad.result(30)
        admin.delete_consumer_groups(["done"])["done"].result(30)
        assert {g.group_id for g in admin.list_consumer_groups().result(30).valid} == {"live"}
        c.close()


def _call(broker, message, version):
    with socket.create_connection(broker.address) as s:
        s.sendall(encode_request(message, version, 7, "raw"))
        s.settimeout(10)
        data = b""
        while len(data) < 4 or len(data) - 4 < struct.unpack(">i", data[:4])[0]:
            chunk = s.recv(65536)
            assert chunk, "connection closed"
            data += chunk
    return decode_response(type(message).API_KEY, version, data).message


def test_find_coordinator_every_form(tmp_path):
    with running_broker(str(tmp_path / "logs"), config=CONFIG) as broker:
        host, port = broker.address
        old = _call(broker, FindCoordinatorRequest(key="g"), 0)
        assert (old.error_code, old.node_id, old.host, old.port) == (0, broker.node_id, host, port)
        txn = _call(broker, FindCoordinatorRequest(key="t", key_type=1), 3)
        assert txn.error_code == 0 and txn.port == port
        batched = _call(broker, FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), 4)
        assert [(c.key, c.error_code, c.port) for c in batched.coordinators] == \
            [("a", 0, port), ("b", 0, port)]
        bad = _call(broker, FindCoordinatorRequest(key_type=5, coordinator_keys=["a"]), 6)
        assert bad.coordinators[0].error_code != 0
        # the internal topics now exist, with Kafka's compacted configs
        assert broker.call(lambda: broker.partitions.topics["__consumer_offsets"].configs)[
            "cleanup.policy"] == "compact"
        assert len(broker.call(lambda: broker.partitions.topics["__transaction_state"].partitions)) == 3
        keys = {k.api_key: (k.min_version, k.max_version)
                for k in _call(broker, ApiVersionsRequest(), 3).api_keys}
        for api, top in ((10, 6), (11, 9), (12, 4), (13, 5), (14, 5), (15, 5), (16, 5), (8, 9),
                         (9, 9), (42, 2), (22, 5), (24, 5), (25, 4), (26, 4), (28, 4)):
            assert keys[api] == (0, top), api


def _wait(predicate, timeout=30.0, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def _group(broker, group):
    return broker.call(lambda: broker.group_coordinator.groups.get(group))


def test_static_member_restarts_without_a_rebalance(tmp_path):
    with running_broker(str(tmp_path / "logs"), config=CONFIG) as broker:
        broker.create_topic("st", 4)
        bs = broker.bootstrap_servers
        def static_member(instance):
            c = confluent_consumer(bs, "static", **{"group.instance.id": instance,
                                                    "session.timeout.ms": 30000})
            c.subscribe(["st"])

            def poll():
                m = c.poll(0.1)
                return [] if m is None or m.error() else [(m.partition(), m.offset(), m.value())]
            return Member(instance, poll, lambda: {tp.partition for tp in c.assignment()}, c.close)

        a, b = static_member("a"), static_member("b")
        members = [a, b]
        for m in members:
            m.start()
        try:
            _wait(lambda: _group(broker, "static") is not None
                  and _group(broker, "static").state == "Stable"
                  and len(a.assignment() | b.assignment()) == 4 and a.assignment()
                  and b.assignment(), what="a stable group of two static members")
            generation = _group(broker, "static").generation
            owned_a = a.assignment()
            a.stop_flag.set()
            a.join(30)       # closing a static member sends no LeaveGroup: its place is kept
            a2 = static_member("a")
            a2.start()
            members.append(a2)
            _wait(lambda: a2.assignment() == owned_a, what="the restarted member's partitions")
            assert _group(broker, "static").generation == generation, "no rebalance happened"
            assert b.assignment() == {0, 1, 2, 3} - owned_a
        finally:
            for m in members:
                m.stop_flag.set()
            for m in members:
                m.join(30)


KILLED_MEMBER = """
import sys, time, confluent_kafka as ck
c = ck.Consumer({"bootstrap.servers": sys.argv[1], "group.id": "killed",
                 "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                 "auto.offset.reset": "earliest"})
c.subscribe(["k"])
while True:
    c.poll(0.1)
    if c.assignment():
        print("assigned", flush=True)
"""


def test_a_killed_member_is_expired_and_its_partitions_move(tmp_path):
    with running_broker(str(tmp_path / "logs"), config=CONFIG) as broker:
        broker.create_topic("k", 4)
        bs = broker.bootstrap_servers
        proc = subprocess.Popen([sys.executable, "-c", KILLED_MEMBER, bs],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        survivor = confluent_member(bs, "killed", "k")
        survivor.start()
        try:
            _wait(lambda: _group(broker, "killed") is not None
                  and len(_group(broker, "killed").members) == 2
                  and _group(broker, "killed").state == "Stable"
                  and 0 < len(survivor.assignment()) < 4, timeout=60, what="two members")
            proc.kill()
            proc.wait(10)
            # the session timeout (6 s) expires the dead member; the survivor takes over
            _wait(lambda: survivor.assignment() == {0, 1, 2, 3}, timeout=30,
                  what="the survivor owning every partition")
            assert len(_group(broker, "killed").members) == 1
        finally:
            if proc.poll() is None:
                proc.kill()
            survivor.stop_flag.set()
            survivor.join(30)


def test_aiokafka_transactions_and_committed_offsets(tmp_path):
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.structs import TopicPartition as ATP

    logs = str(tmp_path / "logs")
    with running_broker(logs, config=CONFIG) as broker:
        broker.create_topic("atx", 1)
        bs = broker.bootstrap_servers

        async def write():
            p = aiokafka.AIOKafkaProducer(bootstrap_servers=bs, transactional_id="aio-tx")
            await p.start()
            try:
                async with p.transaction():
                    for i in range(3):
                        await p.send("atx", f"kept{i}".encode(), partition=0)
                await p.begin_transaction()
                await (await p.send("atx", b"dropped", partition=0))
                await p.abort_transaction()
                async with p.transaction():
                    await p.send("atx", b"kept3", partition=0)
                    await p.send_offsets_to_transaction({ATP("atx", 0): 2}, "aio-group")
            finally:
                await p.stop()
        asyncio.run(write())
        c = confluent_consumer(bs, "aio-reader", **{"isolation.level": "read_committed"})
        c.subscribe(["atx"])
        assert [v for _, _, v in drain(c, 4)] == [b"kept0", b"kept1", b"kept2", b"kept3"]
        c.close()
    with running_broker(logs, config=CONFIG) as broker:
        async def committed():
            cons = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers,
                                             group_id="aio-group", enable_auto_commit=False)
            await cons.start()
            try:
                return await cons.committed(ATP("atx", 0))
            finally:
                await cons.stop()
        assert asyncio.run(committed()) == 2


def test_kafka_python_transactions(tmp_path):
    kp = pytest.importorskip("kafka")
    with running_broker(str(tmp_path / "logs"), config=CONFIG) as broker:
        broker.create_topic("kt", 1)
        bs = broker.bootstrap_servers
        p = kp.KafkaProducer(bootstrap_servers=bs, transactional_id="kp-tx")
        p.init_transactions()
        p.begin_transaction()
        p.send("kt", b"k0", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send("kt", b"dropped", partition=0)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send("kt", b"k1", partition=0)
        p.send_offsets_to_transaction({kp.TopicPartition("kt", 0): kp.OffsetAndMetadata(3, "", -1)},
                                      "kp-group")
        p.commit_transaction()
        p.close()
        c = kp.KafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed",
                             auto_offset_reset="earliest", group_id="kp-reader")
        assert "kt" in c.topics()   # metadata first: the leader then assigns at once
        c.subscribe(["kt"])
        got = []
        deadline = time.time() + 40
        while len(got) < 2 and time.time() < deadline:
            for _tp, msgs in c.poll(timeout_ms=200).items():
                got.extend(m.value for m in msgs)
        c.close()
        assert got == [b"k0", b"k1"]
        check = confluent_consumer(bs, "kp-group")
        assert check.committed([ck.TopicPartition("kt", 0)], timeout=10)[0].offset == 3
        check.close()


def test_kafka_java_clients_group_and_transactions(tmp_path, java_runner):
    with running_broker(str(tmp_path / "logs"), config=CONFIG) as broker:
        broker.create_topic("jt", 2)
        bs = broker.bootstrap_servers
        out = java_runner.run("GroupClients", "txn", bs, "jt", "java-tx", "java-offsets",
                              timeout=120).stdout.decode()
        assert out.split()[-1] == "done"
        # the Java consumer (read_committed, in a group) sees the committed records only
        out = java_runner.run("GroupClients", "consume", bs, "jt", "java-group", "6",
                              timeout=120).stdout.decode().splitlines()
        values = [line.split()[3] for line in out if line.startswith("record ")]
        assert values == [f"c{i}" for i in range(6)]
        committed = {line.split()[1]: int(line.split()[2]) for line in out
                     if line.startswith("committed ")}
        assert committed["0"] == 14  # 6 committed records, 5 aborted, 3 markers
        check = confluent_consumer(bs, "java-group")
        assert check.committed([ck.TopicPartition("jt", 0)], timeout=10)[0].offset == 14
        check.close()
        sent = confluent_consumer(bs, "java-offsets")
        assert sent.committed([ck.TopicPartition("jt", 0)], timeout=10)[0].offset == 5
        sent.close()
