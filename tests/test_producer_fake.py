"""The producer against scripted brokers: the faults a real peer will not show on demand.

``fake_brokers.IdempotentLog`` keeps each partition's log the way a broker's producer state
does (KIP-98): per producer id and epoch, a batch whose first sequence is the
next expected one is appended, a batch already written (one of the last five)
is answered with its original offset and not written again, anything else is
OUT_OF_ORDER_SEQUENCE_NUMBER.  The tests lose answers, close connections and
return errors, then check the log: no duplicate, no reordering, no loss.
"""
from __future__ import annotations

import threading
import time

import pytest

from kafkawire import protocol as P
from kafkawire.client import partition_for_key
from kafkawire.client.config import ConfigError
from kafkawire.client.exceptions import (BufferFullError, DeliveryTimeoutError,
                                         ProducerClosedError)
from kafkawire.client.producer import Producer
from kafkawire.errors import ProtocolError
from kafkawire.protocol import error_codes as E
from fake_brokers import IdempotentLog, numbered, send_all

pytestmark = pytest.mark.one_backend


@pytest.fixture
def broker(fake):
    return IdempotentLog(fake)


def _error_once(broker, n, code):
    """A fault: the ``n``-th Produce request is answered with ``code`` (nothing written)."""
    return lambda node, req, i: broker.answer(req, codes={("t", 0): code}) if i == n else None



def test_delivers_in_order_with_metadata(fake, broker):
    with Producer(fake.bootstrap, linger_ms=1, batch_size=200) as p:
        futures = send_all(p, numbered(100))
    assert broker.values() == numbered(100)
    mds = [f.result() for f in futures]
    assert [m.offset for m in mds] == list(range(100))
    assert {(m.topic, m.partition) for m in mds} == {("t", 0)}
    # several batches, each with its own sequence, one producer id
    seqs = sorted({r[5] for r in broker.logs[("t", 0)]})
    assert len(seqs) > 3 and seqs[0] == 0 and len(broker.init_requests) == 1


def test_lost_answer_is_retried_without_duplicates(fake, broker):
    def lose_second(node, req, n):
        if n == 2:
            broker.answer(req)  # written, but the answer never arrives
            return "silent"
    broker.fault = lose_second
    with Producer(fake.bootstrap, linger_ms=0, batch_size=100, request_timeout_ms=400,
                  retry_backoff_ms=10) as p:
        futures = send_all(p, numbered(60))
    assert broker.values() == numbered(60)
    assert [f.result().offset for f in futures] == list(range(60))


def test_connection_drop_with_requests_in_flight(fake, broker):
    def drop(node, req, n):
        if n in (3, 4):
            if n == 3:
                broker.answer(req)
            return "close"
    broker.fault = drop
    with Producer(fake.bootstrap, linger_ms=0, batch_size=100, retry_backoff_ms=5,
                  reconnect_backoff_ms=5) as p:
        futures = send_all(p, numbered(80))
    assert broker.values() == numbered(80)
    assert [f.result().offset for f in futures] == list(range(80))


def test_out_of_order_after_a_failed_batch_is_retried_in_order(fake, broker):
    """Batch k fails (retriable); k+1.. in flight behind it get OUT_OF_ORDER: all are resent in order."""
    broker.fault = _error_once(broker, 3, 19)  # NOT_ENOUGH_REPLICAS
    with Producer(fake.bootstrap, linger_ms=0, batch_size=100, retry_backoff_ms=5,
                  max_in_flight_requests_per_connection=5) as p:
        futures = send_all(p, numbered(150))
    assert broker.values() == numbered(150)
    assert [f.result().offset for f in futures] == list(range(150))


def test_unknown_producer_id_bumps_the_epoch(fake, broker):
    broker.fault = _error_once(broker, 2, 59)  # UNKNOWN_PRODUCER_ID
    with Producer(fake.bootstrap, linger_ms=0, batch_size=100, retry_backoff_ms=5) as p:
        futures = send_all(p, numbered(50))
    assert broker.values() == numbered(50)
    assert [f.result().offset for f in futures] == list(range(50))
    assert broker.init_requests == [(-1, -1), (1001, 0)]
    epochs = [r[4] for r in broker.logs[("t", 0)]]
    assert epochs == sorted(epochs) and epochs[-1] == 1


def test_real_out_of_order_fails_the_batch_and_bumps_the_epoch(fake, broker):
    broker.fault = _error_once(broker, 1, 45)  # OUT_OF_ORDER_SEQUENCE_NUMBER
    errors = []
    with Producer(fake.bootstrap, linger_ms=0, retry_backoff_ms=5) as p:
        f1 = p.send("t", b"first", partition=0, on_delivery=lambda e, m: errors.append(e))
        with pytest.raises(E.OutOfOrderSequenceNumberError):
            f1.result(10)
        f2 = p.send("t", b"second", partition=0)
        assert f2.result(10).offset == 0
    assert isinstance(errors[0], E.OutOfOrderSequenceNumberError)
    assert broker.values() == [b"second"] and broker.init_requests[-1] == (1001, 0)


def test_not_leader_refreshes_metadata_and_follows_the_leader(fake, broker):
    fake.leaders[("t", 0)] = 0

    def fault(node, req, n):
        if node == 0:
            fake.leaders[("t", 0)] = 1
            return broker.answer(req, codes={("t", 0): 6})
    broker.fault = fault
    with Producer(fake.bootstrap, linger_ms=0, retry_backoff_ms=5) as p:
        futures = send_all(p, numbered(10))
    assert broker.values() == numbered(10)
    assert any(r[0] == 1 and r[1] == 0 for r in fake.requests)


def test_delivery_timeout_fails_records_with_the_last_error(fake, broker):
    broker.fault = lambda node, req, n: broker.answer(req, codes={("t", 0): 19})
    errors = []
    with Producer(fake.bootstrap, delivery_timeout_ms=300, retry_backoff_ms=20,
                  on_delivery=lambda e, m: errors.append(e)) as p:
        f = p.send("t", b"x", partition=0)
        with pytest.raises(DeliveryTimeoutError, match="NOT_ENOUGH_REPLICAS"):
            f.result(10)
    assert len(errors) == 1 and isinstance(errors[0], DeliveryTimeoutError)


def test_non_retriable_error_reaches_future_and_callback(fake, broker):
    broker.fault = lambda node, req, n: broker.answer(req, codes={("t", 0): 10})
    seen = []
    with Producer(fake.bootstrap) as p:
        f = p.send("t", b"x", partition=0, on_delivery=lambda e, m: seen.append((e, m)))
        with pytest.raises(E.MessageTooLargeError):
            f.result(10)
    assert isinstance(seen[0][0], E.MessageTooLargeError) and seen[0][1] is None
    assert broker.n == 1


def test_answer_for_an_unrequested_partition_is_a_protocol_error(fake, broker):
    def fault(node, req, n):
        return P.ProduceResponse(responses=[{"name": "t", "partition_responses": [
            {"index": 1, "error_code": 0, "base_offset": 7}]}])
    broker.fault = fault
    with Producer(fake.bootstrap) as p:
        with pytest.raises(ProtocolError, match="t-1"):
            p.send("t", b"x", partition=0).result(10)


def test_buffer_full_blocks_then_raises(fake, broker):
    broker.fault = lambda node, req, n: "silent"
    with Producer(fake.bootstrap, buffer_memory=1000, max_block_ms=200, linger_ms=0,
                  request_timeout_ms=60_000) as p:
        p.send("t", b"x" * 600, partition=0)
        t0 = time.monotonic()
        with pytest.raises(BufferFullError, match="buffer_memory"):
            p.send("t", b"y" * 600, partition=0)
        assert 0.15 < time.monotonic() - t0 < 5
        p.close(0.2)


def test_close_fails_what_cannot_be_delivered(fake, broker):
    broker.fault = lambda node, req, n: "silent"
    p = Producer(fake.bootstrap, linger_ms=0, request_timeout_ms=60_000)
    f = p.send("t", b"x", partition=0)
    p.close(0.3)
    with pytest.raises(ProducerClosedError):
        f.result(5)
    with pytest.raises(ProducerClosedError):
        p.send("t", b"y")


def test_acks_zero_without_idempotence(fake, broker):
    broker.fault = lambda node, req, n: (broker.answer(req) and None) or "silent"
    with Producer(fake.bootstrap, acks=0, enable_idempotence=False) as p:
        f = p.send("t", b"x", partition=0)
        assert f.result(10).offset == -1
    end = time.monotonic() + 5  # no answer to wait for: the broker may still be reading it
    while not broker.values() and time.monotonic() < end:
        time.sleep(0.01)
    assert broker.values() == [b"x"] and not broker.init_requests
    assert [r[3].acks for r in fake.requests if r[1] == 0] == [0]


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="'linger'.*'linger_ms'"):
        Producer("127.0.0.1:1", linger=5)
    with pytest.raises(ConfigError, match="acks='all'"):
        Producer("127.0.0.1:1", acks=1)


def test_partitioners(fake, broker):
    fake.partitions["t"] = 4
    with Producer(fake.bootstrap, linger_ms=0) as p:
        keyed = [p.send("t", b"v", key=b"key-%d" % i) for i in range(20)]
        p.flush(10)
        assert [f.result().partition for f in keyed] == \
            [partition_for_key(b"key-%d" % i, 4) for i in range(20)]
    # every key length (murmur2's tail cases), most of them appended by the compiled fast path
    fake.partitions["k"] = 7
    with Producer(fake.bootstrap, linger_ms=2000) as p:
        keys = [bytes(range(n)) for n in range(41)] * 2
        futures = [p.send("k", b"v", key=k) for k in keys]
        p.flush(10)
        assert [f.result().partition for f in futures] == [partition_for_key(k, 7) for k in keys]
    with Producer(fake.bootstrap, partitioner="round_robin", linger_ms=0) as p:
        rr = [p.send("t", b"v", key=b"same") for _ in range(8)]
        p.flush(10)
        assert [f.result().partition for f in rr] == [0, 1, 2, 3] * 2
    with Producer(fake.bootstrap, partitioner=lambda key, n: len(key) % n) as p:
        assert p.send("t", b"v", key=b"abc").result(10).partition == 3
    with Producer(fake.bootstrap, batch_size=1000, linger_ms=0) as p:
        sticky = [p.send("t", b"v" * 90) for _ in range(40)]
        p.flush(10)
        parts = [f.result().partition for f in sticky]
        runs = [len(list(g)) for _, g in __import__("itertools").groupby(parts)]
        assert len(runs) > 1 and all(r >= 9 for r in runs[:-1])  # ~batch_size per partition


def test_serializers_headers_and_callbacks(fake, broker):
    calls = []
    with Producer(fake.bootstrap, key_serializer=str.encode,
                  value_serializer=lambda v: repr(v).encode(),
                  on_delivery=lambda e, m: calls.append(("producer", m.offset))) as p:
        p.send("t", {"a": 1}, key="k", headers={"h": b"1"}, partition=0)
        p.send("t", [2], key="k2", headers=[("x", None)], partition=0,
               on_delivery=lambda e, m: calls.append(("send", m.offset)))
        p.flush(10)
    assert broker.logs[("t", 0)] == [
        (b"{'a': 1}", b"k", [("h", b"1")], 1001, 0, 0),
        (b"[2]", b"k2", [("x", None)], 1001, 0, 0)]
    assert sorted(calls) == [("producer", 0), ("send", 1)]


def test_bad_values_are_refused_at_send(fake, broker):
    with Producer(fake.bootstrap) as p:
        with pytest.raises(TypeError, match="value_serializer"):
            p.send("t", "text")
        with pytest.raises(ValueError, match="partitions 0..1"):
            p.send("t", b"x", partition=5)
        with pytest.raises(E.MessageTooLargeError):
            p.send("t", b"x" * 2_000_000)


def _in_threads(work, n):
    """Run ``work(0..n-1)`` on ``n`` threads at once; return when all finished."""
    threads = [threading.Thread(target=work, args=(t,)) for t in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_many_threads_keep_each_threads_order(fake, broker):
    with Producer(fake.bootstrap, linger_ms=2, batch_size=300) as p:
        def work(t):
            for i in range(300):
                p.send("t", b"%d-%d" % (t, i), partition=t % 2)
        _in_threads(work, 4)
        assert p.flush(20) == 0
    for part in (0, 1):
        vals = broker.values("t", part)
        assert len(vals) == 600
        for t in (part, part + 2):
            mine = [v for v in vals if v.startswith(b"%d-" % t)]
            assert mine == [b"%d-%d" % (t, i) for i in range(300)]


def test_threads_sending_keyless_under_back_pressure_resolve_every_future(fake, broker):
    # small batches and a small buffer: the compiled fast path, the general path (new
    # batches, sticky moves, waiting for room) and the I/O thread interleave all the time
    with Producer(fake.bootstrap, linger_ms=1, batch_size=800, buffer_memory=6000) as p:
        futures = {}

        def work(t):
            futures[t] = [p.send("t", b"%d-%d" % (t, i), timestamp=1_000 + i)
                          for i in range(400)]
        _in_threads(work, 4)
        assert p.flush(20) == 0
        assert p._acc.used == 0
    seen = set()
    for t, fs in futures.items():
        last = {}
        for i, f in enumerate(fs):
            md = f.result(5)
            assert md.timestamp == 1_000 + i
            assert (md.partition, md.offset) not in seen
            seen.add((md.partition, md.offset))
            assert md.offset > last.get(md.partition, -1)  # each thread's order per partition
            last[md.partition] = md.offset
    assert sum(len(broker.values("t", part)) for part in (0, 1)) == 1600


def test_unknown_topic_times_out_in_send(fake, broker):
    with Producer(fake.bootstrap, max_block_ms=300, retry_backoff_ms=20) as p:
        with pytest.raises(BufferFullError, match="not in the cluster's metadata"):
            p.send("nope", b"x")


class TxnCoordinator:
    """Node 1 coordinates transactions; records what the producer asked, in order."""

    def __init__(self, fake, broker):
        self.calls = []
        self.end_codes = []   # EndTxn answers to give before succeeding
        self.fake = fake
        fake.handlers[10] = self.find
        fake.handlers[24] = self.add_partitions
        fake.handlers[25] = lambda node, req: self._log(req, P.AddOffsetsToTxnResponse())
        fake.handlers[26] = self.end
        fake.handlers[28] = self.offsets
        inner = broker.produce

        def produce(node, req):
            self.calls.append(("Produce", req.message.transactional_id,
                               sorted((t.name, p.index) for t in req.message.topic_data
                                      for p in t.partition_data)))
            return inner(node, req)
        fake.handlers[0] = produce

    def _log(self, req, resp):
        self.calls.append((type(req.message).__name__[:-7], req.message.to_dict()))
        return resp

    def find(self, node, req):
        if req.api_version >= 4:
            return P.FindCoordinatorResponse(coordinators=[{
                "key": k, "node_id": 1, "host": "127.0.0.1", "port": self.fake.port(1)}
                for k in req.message.coordinator_keys])
        return P.FindCoordinatorResponse(node_id=1, host="127.0.0.1", port=self.fake.port(1))

    def add_partitions(self, node, req):
        m = req.message
        return self._log(req, P.AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
            {"name": t.name, "results_by_partition": [
                {"partition_index": p, "partition_error_code": 0} for p in t.partitions]}
            for t in m.v3_and_below_topics]))

    def end(self, node, req):
        code = self.end_codes.pop(0) if self.end_codes else 0
        return self._log(req, P.EndTxnResponse(error_code=code))

    def offsets(self, node, req):
        return self._log(req, P.TxnOffsetCommitResponse(topics=[
            {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": 0}
                                            for p in t.partitions]}
            for t in req.message.topics]))


def test_transaction_protocol_sequence(fake, broker):
    coord = TxnCoordinator(fake, broker)
    coord.end_codes = [51]  # CONCURRENT_TRANSACTIONS once: retried
    with Producer(fake.bootstrap, transactional_id="tx-1", linger_ms=0,
                  retry_backoff_ms=5) as p:
        p.init_transactions(10)
        p.begin_transaction()
        p.send("t", b"a", partition=0)
        p.send("t", b"b", partition=1)
        p.send_offsets_to_transaction({("in", 0): 42}, "grp")
        p.commit_transaction(10)
    kinds = [c[0] for c in coord.calls]
    assert kinds.index("AddPartitionsToTxn") < kinds.index("Produce")
    assert all(c[1] == "tx-1" for c in coord.calls if c[0] == "Produce")
    added = sorted((t["name"], p) for c in coord.calls if c[0] == "AddPartitionsToTxn"
                   for t in c[1]["v3_and_below_topics"] for p in t["partitions"])
    assert added == [("t", 0), ("t", 1)]
    ends = [c[1] for c in coord.calls if c[0] == "EndTxn"]
    assert len(ends) == 2 and all(e["committed"] and e["transactional_id"] == "tx-1"
                                  for e in ends)
    commit = [c[1] for c in coord.calls if c[0] == "TxnOffsetCommit"][0]
    assert commit["group_id"] == "grp" and \
        commit["topics"][0]["partitions"][0]["committed_offset"] == 42
    batches = [b for part in (0, 1) for b in broker.logs[("t", part)]]
    assert len(batches) == 2
    assert broker.init_requests == [(-1, -1)]


def test_failed_record_makes_commit_raise(fake, broker):
    from kafkawire.client.exceptions import TransactionStateError
    TxnCoordinator(fake, broker)
    broker.fault = lambda node, req, n: broker.answer(req, codes={("t", 0): 10})
    with Producer(fake.bootstrap, transactional_id="tx-2", linger_ms=0) as p:
        p.init_transactions(10)
        p.begin_transaction()
        f = p.send("t", b"x" * 10, partition=0)
        with pytest.raises(TransactionStateError, match="abort_transaction") as info:
            p.commit_transaction(10)
        assert isinstance(info.value.__cause__, E.MessageTooLargeError)
        with pytest.raises(E.MessageTooLargeError):
            f.result(1)
        p.abort_transaction(10)


def test_fenced_producer_is_fatal(fake, broker):
    TxnCoordinator(fake, broker)
    fake.handlers[26] = lambda node, req: P.EndTxnResponse(error_code=90)
    with Producer(fake.bootstrap, transactional_id="tx-3", linger_ms=0) as p:
        p.init_transactions(10)
        p.begin_transaction()
        p.send("t", b"x", partition=0)
        with pytest.raises(E.ProducerFencedError):
            p.commit_transaction(10)


def test_vectorised_key_partitions_match_kafkas_murmur2():
    import random

    import numpy as np
    pa = pytest.importorskip("pyarrow")
    from kafkawire.client.bulk import key_partitions
    rnd = random.Random(5)
    keys = [bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 23))) if i % 9 else None
            for i in range(3000)]
    for typ in (pa.binary(), pa.large_binary()):
        arr = pa.array(keys, typ)
        for n in (1, 7, 12):
            got = key_partitions(arr, n, np, pa).tolist()
            assert got == [partition_for_key(k, n) if k is not None else -1 for k in keys]
        sliced = arr.slice(1000, 500)
        assert key_partitions(sliced, 5, np, pa).tolist() == \
            [partition_for_key(k, 5) if k is not None else -1 for k in keys[1000:1500]]
