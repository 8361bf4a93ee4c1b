"""The client against a scripted broker on loopback: failure paths a real peer won't show on demand.

The fake broker (``fake_brokers.FakeCluster``) decodes requests with
``kafkawire.protocol.decode_request`` and answers with ``encode_response``; each
test scripts the answers (errors,
silence, broken connections, wrong correlation ids) to check the client's
retries, metadata refreshes, timeouts and clean failure.
"""
from __future__ import annotations

import socket
import struct
import time

import pytest

import kafkawire
from kafkawire import protocol as P
from kafkawire.client import Client, NoBrokersAvailableError, RequestTimeoutError
from kafkawire.errors import ProtocolError, UnsupportedVersionError
from kafkawire.protocol import error_codes as E
from kafkawire.records.builder import BatchBuilder

from fake_brokers import TOPIC_ID, FakeCluster

pytestmark = pytest.mark.one_backend


def _produce_ok(node, req):
    return P.ProduceResponse(responses=[
        {"name": t.name, "partition_responses": [
            {"index": p.index, "error_code": 0, "base_offset": 100} for p in t.partition_data]}
        for t in req.message.topic_data])


def test_negotiates_highest_common_version(fake):
    fake.versions[3] = (0, 7)
    with Client(fake.bootstrap, client_id="neg") as c:
        c.metadata()
        assert c.api_version(3) == 7
        assert c.api_version(0) == P.ProduceRequest.VERSIONS[1]
    meta = [r for r in fake.requests if r[1] == 3]
    assert meta and all(r[2] == 7 for r in meta)


def test_no_common_version_is_a_clear_error(fake):
    fake.versions[0] = (0, 2)  # kafkawire produces v2 batches: Produce v3+
    with Client(fake.bootstrap) as c:
        with pytest.raises(UnsupportedVersionError, match="Produce"):
            c.produce("t", [b"x"], partition=0)


@pytest.mark.parametrize("refusal, settled", [
    # what a broker does: v0 body, error 35, its own ApiVersions range: straight to v2
    (struct.pack(">ihhh", 1, 18, 0, 2), 2),
    # librdkafka's mock cluster: a body not in the v0 layout: v0, which every broker speaks
    # (one round trip), not one version down at a time
    (bytes.fromhex("01001200000002"), 0),
])
def test_api_versions_step_down(refusal, settled):
    fake = FakeCluster(1)
    fake.versions[18] = (0, 2)
    sent = []

    def api_versions(node, req):
        sent.append(req.api_version)
        if req.api_version > 2:
            body = struct.pack(">ih", req.correlation_id, 35) + refusal
            return struct.pack(">i", len(body)) + body
        return fake._api_versions(node, req)

    fake.handlers[18] = api_versions
    try:
        with Client(fake.bootstrap) as c:
            c.metadata()
            assert c._any().api_versions_version == settled
        assert sent == [max(P.ApiVersionsRequest.VERSIONS), settled]
    finally:
        fake.close()


def test_produce_refreshes_metadata_on_not_leader(fake):
    fake.leaders[("t", 1)] = 0
    calls = []

    def produce(node, req):
        calls.append(node)
        if node == 0:
            fake.leaders[("t", 1)] = 1  # leadership moved; the client must re-learn it
            return P.ProduceResponse(responses=[{"name": "t", "partition_responses": [
                {"index": 1, "error_code": 6, "base_offset": -1}]}])
        return _produce_ok(node, req)

    fake.handlers[0] = produce
    with Client(fake.bootstrap, retry_backoff_ms=1) as c:
        res = c.produce("t", [b"a", b"b"], partition=1)
    assert calls == [0, 1]
    assert res[0].base_offset == 100 and res[0].record_count == 2
    assert fake.count(3) >= 2  # metadata fetched again after NOT_LEADER_OR_FOLLOWER


def test_non_retriable_produce_error_raises(fake):
    fake.handlers[0] = lambda node, req: P.ProduceResponse(responses=[{
        "name": "t", "partition_responses": [
            {"index": 0, "error_code": 10, "base_offset": -1,
             "error_message": "too big for us"}]}])
    with Client(fake.bootstrap) as c:
        with pytest.raises(E.MessageTooLargeError) as info:
            c.produce("t", [b"x"], partition=0)
    assert info.value.topic == "t" and info.value.partition == 0
    assert "too big for us" in str(info.value)


def test_retriable_errors_give_up_after_retries(fake):
    fake.handlers[0] = lambda node, req: P.ProduceResponse(responses=[{
        "name": "t", "partition_responses": [{"index": 0, "error_code": 19, "base_offset": -1}]}])
    with Client(fake.bootstrap, retries=2, retry_backoff_ms=1) as c:
        with pytest.raises(E.NotEnoughReplicasError):
            c.produce("t", [b"x"], partition=0)
    assert fake.count(0) == 3


def test_acks_zero_expects_no_response(fake):
    fake.handlers[0] = lambda node, req: None
    with Client(fake.bootstrap) as c:
        res = c.produce("t", [b"x"], partition=0, acks=0)
        assert res[0].base_offset == -1
        c.metadata()  # the connection is still in step: no response was waited for
    assert [r[3].acks for r in fake.requests if r[1] == 0] == [0]


def test_silent_broker_times_out_then_recovers(fake):
    state = {"silent": True}

    def list_offsets(node, req):
        if state["silent"]:
            state["silent"] = False
            return "silent"
        return P.ListOffsetsResponse(topics=[{"name": "t", "partitions": [
            {"partition_index": 0, "offset": 42, "timestamp": -1}]}])

    fake.handlers[2] = list_offsets
    with Client(fake.bootstrap, retries=0, request_timeout_ms=5000) as c:
        t0 = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            c.list_offsets("t", 0, "latest", timeout_ms=300)
        assert time.monotonic() - t0 < 3
        assert c.list_offsets("t", 0, "latest").offset == 42  # reconnected


def test_timeout_is_retried_within_budget(fake):
    state = {"n": 0}

    def list_offsets(node, req):
        state["n"] += 1
        if state["n"] == 1:
            return "silent"
        return P.ListOffsetsResponse(topics=[{"name": "t", "partitions": [
            {"partition_index": 0, "offset": 7}]}])

    fake.handlers[2] = list_offsets
    with Client(fake.bootstrap, request_timeout_ms=300, retry_backoff_ms=1) as c:
        assert c.list_offsets("t", 0, "earliest", timeout_ms=3000).offset == 7


def test_connection_closed_by_broker(fake):
    state = {"n": 0}

    def fetch(node, req):
        state["n"] += 1
        if state["n"] == 1:
            return "close"
        b = BatchBuilder(base_offset=5)
        b.append(b"v", key=b"k", timestamp=9, headers=[("h", b"1")])
        return P.FetchResponse(responses=[{"topic_id": TOPIC_ID, "topic": "t", "partitions": [
            {"partition_index": 0, "high_watermark": 6, "records": b.build()}]}])

    fake.handlers[1] = fetch
    with Client(fake.bootstrap, retry_backoff_ms=1) as c:
        res = c.fetch("t", 0, 5)
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in res.records()] == \
        [(5, b"k", b"v", [("h", b"1")], 9)]
    assert res.high_watermark == 6 and res.next_offset == 6
    assert fake.count(3) >= 2  # socket error -> metadata refreshed


def test_wrong_correlation_id_is_a_protocol_error(fake):
    def list_offsets(node, req):
        resp = P.ListOffsetsResponse(topics=[])
        return P.encode_response(resp, req.api_version, req.correlation_id + 1000)

    fake.handlers[2] = list_offsets
    with Client(fake.bootstrap, retries=0) as c:
        with pytest.raises(ProtocolError, match="correlation id"):
            c.list_offsets("t", 0)


def test_oversized_frame_is_refused(fake):
    fake.handlers[2] = lambda node, req: struct.pack(">i", 1 << 30) + b"\0" * 16
    with Client(fake.bootstrap, retries=0, max_frame_size=1 << 20) as c:
        with pytest.raises(ProtocolError, match="limit"):
            c.list_offsets("t", 0)


def test_unreachable_bootstrap():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with Client(f"127.0.0.1:{port}", connect_timeout_ms=500) as c:
        with pytest.raises(NoBrokersAvailableError):
            c.metadata()


def test_bootstrap_skips_dead_server(fake):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    with Client(f"127.0.0.1:{dead},{fake.bootstrap}", connect_timeout_ms=500) as c:
        assert set(c.metadata().brokers) == {0, 1}


def test_pipelined_requests_on_one_connection(fake):
    with Client(fake.bootstrap) as c:
        c.metadata()
        pendings = [c.send(P.MetadataRequest(topics=[]), node_id=0) for _ in range(20)]
        conn = pendings[0].conn
        assert all(p.conn is conn for p in pendings) and conn.in_flight == 20
        for p in reversed(pendings):  # results in any order; the reads stay in order
            assert p.result().controller_id == 0
        assert conn.in_flight == 0


def test_create_and_delete_topics_follow_controller(fake):
    fake.controller = 1
    created = []

    def create(node, req):
        if node != 1:
            return P.CreateTopicsResponse(topics=[{"name": t.name, "error_code": 41}
                                                  for t in req.message.topics])
        out = []
        for t in req.message.topics:
            if t.name in fake.partitions:
                out.append({"name": t.name, "error_code": 36,
                            "error_message": f"Topic '{t.name}' already exists."})
            else:
                fake.partitions[t.name] = t.num_partitions
                created.append((t.name, t.num_partitions, t.replication_factor,
                                {cfg.name: cfg.value for cfg in t.configs}))
                out.append({"name": t.name, "error_code": 0,
                            "num_partitions": t.num_partitions,
                            "replication_factor": t.replication_factor})
        return P.CreateTopicsResponse(topics=out)

    def delete(node, req):
        names = [t.name for t in req.message.topics] or list(req.message.topic_names)
        out = []
        for n in names:
            code = 0 if fake.partitions.pop(n, None) is not None else 3
            out.append({"name": n, "error_code": code})
        return P.DeleteTopicsResponse(responses=out)

    fake.handlers[19] = create
    fake.handlers[20] = delete
    with Client(fake.bootstrap, retry_backoff_ms=1) as c:
        res = c.create_topics(["a", {"name": "b", "num_partitions": 6,
                                     "configs": {"cleanup.policy": "compact"}}],
                              num_partitions=3)
        assert set(res) == {"a", "b"} and all(r.error is None for r in res.values())
        assert created == [("a", 3, 1, {}), ("b", 6, 1, {"cleanup.policy": "compact"})]
        assert c.metadata(["b"]).topics["b"].num_partitions == 6
        with pytest.raises(E.TopicAlreadyExistsError, match="already exists"):
            c.create_topics("a")
        res = c.create_topics(["a", "c"], raise_errors=False)
        assert isinstance(res["a"].error, E.TopicAlreadyExistsError) and res["c"].error is None
        c.delete_topics(["a", "b"])
        with pytest.raises(E.UnknownTopicOrPartitionError):
            c.delete_topics("a")
    assert all(node == 1 for node, key, _, _ in fake.requests if key in (19, 20))


def test_create_topics_not_controller_refreshes(fake):
    fake.controller = 0
    seen = []

    def create(node, req):
        seen.append(node)
        if node != 1:
            fake.controller = 1  # the controller moved
            return P.CreateTopicsResponse(topics=[{"name": "x", "error_code": 41}])
        return P.CreateTopicsResponse(topics=[{"name": "x", "error_code": 0}])

    fake.handlers[19] = create
    with Client(fake.bootstrap, retry_backoff_ms=1) as c:
        c.create_topics("x")
    assert seen == [0, 1]


def test_delete_topics_old_version_uses_names(fake):
    fake.versions[20] = (0, 5)
    fake.handlers[20] = lambda node, req: P.DeleteTopicsResponse(responses=[
        {"name": n, "error_code": 0} for n in req.message.topic_names])
    with Client(fake.bootstrap) as c:
        assert list(c.delete_topics(["t"])) == ["t"]


@pytest.mark.parametrize("fc_max, of_max", [(6, 9), (3, 7)])
def test_coordinator_and_offsets_both_layouts(fake, fc_max, of_max):
    fake.versions[10] = (0, fc_max)
    fake.versions[9] = (0, of_max)
    fake.versions[8] = (0, of_max)
    committed = {}

    def find(node, req):
        m = req.message
        if req.api_version >= 4:
            return P.FindCoordinatorResponse(coordinators=[{
                "key": k, "node_id": 1, "host": "127.0.0.1", "port": fake.port(1)}
                for k in m.coordinator_keys])
        return P.FindCoordinatorResponse(node_id=1, host="127.0.0.1", port=fake.port(1))

    def commit(node, req):
        if node != 1:
            return P.OffsetCommitResponse(topics=[{"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": 16}
                for p in t.partitions]} for t in req.message.topics])
        for t in req.message.topics:
            for p in t.partitions:
                committed[(t.name, p.partition_index)] = (p.committed_offset,
                                                          p.committed_metadata)
        return P.OffsetCommitResponse(topics=[{"name": t.name, "partitions": [
            {"partition_index": p.partition_index} for p in t.partitions]}
            for t in req.message.topics])

    def fetch_offsets(node, req):
        m = req.message
        if req.api_version >= 8:
            g = m.groups[0]
            wanted = None if g.topics is None else {(t.name, p) for t in g.topics
                                                     for p in t.partition_indexes}
        else:
            wanted = None if m.topics is None else {(t.name, p) for t in m.topics
                                                     for p in t.partition_indexes}
        items = sorted(committed.items()) if wanted is None else \
            [(tp, committed.get(tp, (-1, None))) for tp in sorted(wanted)]
        by_topic = {}
        for (t, p), (off, meta) in items:
            by_topic.setdefault(t, []).append({"partition_index": p, "committed_offset": off,
                                               "metadata": meta})
        topics = [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
        if req.api_version >= 8:
            return P.OffsetFetchResponse(groups=[{"group_id": m.groups[0].group_id,
                                                  "topics": topics}])
        return P.OffsetFetchResponse(topics=topics)

    fake.handlers[10] = find
    fake.handlers[8] = commit
    fake.handlers[9] = fetch_offsets
    with Client(fake.bootstrap, retry_backoff_ms=1) as c:
        assert c.find_coordinator("g").node_id == 1
        c._coordinators["g"] = 0  # stale: the first commit answers NOT_COORDINATOR
        c.commit_offsets("g", {("t", 0): 10, ("t", 1): (20, "m")})
        assert committed == {("t", 0): (10, ""), ("t", 1): (20, "m")}
        got = c.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 9)])
        assert {tp: (o.offset, o.metadata) for tp, o in got.items()} == {
            ("t", 0): (10, ""), ("t", 1): (20, "m"), ("t", 9): (-1, None)}
        assert set(c.fetch_offsets("g")) == {("t", 0), ("t", 1)}


def test_unknown_topic_raises_after_refresh(fake):
    with Client(fake.bootstrap, retries=1, retry_backoff_ms=1) as c:
        with pytest.raises(E.UnknownTopicOrPartitionError, match="nope"):
            c.produce("nope", [b"x"])


def test_closed_client_refuses_work(fake):
    c = Client(fake.bootstrap)
    c.metadata()
    c.close()
    c.close()
    with pytest.raises(kafkawire.errors.KafkaWireError):
        c.metadata()


def test_context_manager_closes_sockets(fake):
    with Client(fake.bootstrap) as c:
        c.metadata()
        conns = list(c._conns.values())
        assert conns and all(x.connected for x in conns)
    assert not any(x.connected for x in conns)


def test_list_offsets_by_timestamp(fake):
    asked = []

    def list_offsets(node, req):
        p = req.message.topics[0].partitions[0]
        asked.append((req.api_version, p.timestamp))
        return P.ListOffsetsResponse(topics=[{"name": "t", "partitions": [
            {"partition_index": p.partition_index, "offset": 17, "timestamp": p.timestamp + 5}]}])

    fake.handlers[2] = list_offsets
    with Client(fake.bootstrap) as c:
        res = c.list_offsets("t", 1, 1_700_000_000_000)
        assert (res.offset, res.timestamp, res.partition) == (17, 1_700_000_000_005, 1)
        c.list_offsets("t", 1, "earliest")
        c.list_offsets("t", 1, "max_timestamp")
    assert [ts for _, ts in asked] == [1_700_000_000_000, -2, -3]
    assert all(v >= 1 for v, _ in asked)


def test_fetch_uses_topic_ids_from_v13_and_names_before(fake):
    seen = []

    def fetch(node, req):
        t = req.message.topics[0]
        seen.append((req.api_version, t.topic_id if req.api_version >= 13 else t.topic))
        return P.FetchResponse(responses=[{"topic_id": TOPIC_ID, "topic": "t", "partitions": [
            {"partition_index": 0, "high_watermark": 0}]}])

    fake.handlers[1] = fetch
    with Client(fake.bootstrap) as c:
        assert c.fetch("t", 0, 0).batches == []
    fake.versions[1] = (0, 12)
    with Client(fake.bootstrap) as c:
        c.fetch("t", 0, 0)
    assert seen == [(P.FetchRequest.VERSIONS[1], TOPIC_ID), (12, "t")]


def test_fetch_verify_crc_catches_damage(fake):
    b = BatchBuilder()
    b.append(b"value")
    data = bytearray(b.build())
    data[-1] ^= 0xFF
    fake.handlers[1] = lambda node, req: P.FetchResponse(responses=[{
        "topic_id": TOPIC_ID, "topic": "t", "partitions": [
            {"partition_index": 0, "high_watermark": 1, "records": bytes(data)}]}])
    with Client(fake.bootstrap) as c:
        with pytest.raises(kafkawire.errors.CorruptRecordError):
            c.fetch("t", 0, 0, verify_crc=True)


def test_large_produce_is_cut_into_pipelined_batches(fake):
    fake.leaders[("t", 1)] = 1
    seen = []
    offsets = {}

    def produce(node, req):
        out = []
        for t in req.message.topic_data:
            parts = []
            for pd in t.partition_data:
                batches = list(kafkawire.iter_batches(pd.records))
                assert len(batches) == 1  # Kafka's rule for Produce v3+
                n = len(batches[0].records())
                seen.append((node, pd.index, n))
                base = offsets.get(pd.index, 0)
                offsets[pd.index] = base + n
                parts.append({"index": pd.index, "base_offset": base})
            out.append({"name": t.name, "partition_responses": parts})
        return P.ProduceResponse(responses=out)

    fake.handlers[0] = produce
    recs = [{"value": b"x" * 100, "partition": i % 2} for i in range(100)]
    with Client(fake.bootstrap, max_batch_bytes=1000) as c:
        res = c.produce("t", recs)
    assert [(r.partition, r.base_offset, r.record_count) for r in res] == [(0, 0, 50), (1, 0, 50)]
    assert sum(n for _, _, n in seen) == 100 and max(n for _, _, n in seen) <= 8
    assert {(node, p) for node, p, _ in seen} == {(0, 0), (1, 1)}
    assert offsets == {0: 50, 1: 50}


def test_bootstrap_connection_is_reused_for_its_broker(fake):
    with Client(f"127.0.0.1:{fake.port(0)}") as c:
        c.metadata()
        conn = c._node(0)
        assert conn.node_id == 0 and len(c._conns) == 1


def test_new_leaders_are_connected_together():
    import threading
    cluster = FakeCluster(3)
    try:
        both = threading.Barrier(2)
        together = []

        def api_versions(node, req):
            if node in (1, 2):   # answer once the other broker has the request too
                try:
                    both.wait(timeout=5)
                    together.append(node)
                except threading.BrokenBarrierError:
                    pass
            return cluster._api_versions(node, req)
        cluster.handlers[18] = api_versions
        with Client(f"127.0.0.1:{cluster.port(0)}") as c:
            c.metadata()
            c._open_nodes([0, 1, 2])
            assert sorted(together) == [1, 2]           # both requests were out at once
            assert all(c._conns[n].connected for n in (1, 2))
            assert c._node(1) is c._conns[1] and c._node(0).node_id == 0
    finally:
        cluster.close()


def test_a_leader_that_cannot_be_reached_is_reported_when_used():
    cluster = FakeCluster(3)
    try:
        with Client(f"127.0.0.1:{cluster.port(0)}", reconnect_backoff_ms=10) as c:
            c.metadata()
            cluster.brokers[2][1].close()               # broker 2 stops listening
            c._open_nodes([1, 2])
            assert c._conns[1].connected and 2 not in c._conns
            with pytest.raises(kafkawire.client.KafkaConnectionError):
                c._node(2)
    finally:
        cluster.close()
