"""Hundreds of connections at once: ~300 clients each run ApiVersions, Metadata, Produce
and Fetch while hostile clients hold connections open: one sent half a request and stalls,
one announces a request beyond ``socket.request.max.bytes`` (its connection is closed
without reading it), and several announce requests just under the limit and send a few
bytes (what the broker keeps for them stays bounded by what actually arrived).  None of
them delays the others: every one of the 300 is answered while the stalled request is
still unanswered."""
from __future__ import annotations

import asyncio
import struct
import tracemalloc

import pytest

from broker_support import WAIT
from kafkawire.protocol import (ApiVersionsRequest, FetchRequest, MetadataRequest,
                                ProduceRequest, decode_response, encode_request)
from kafkawire.records import BatchBuilder, RecordBatch
from kafkawire.testing import running_broker

pytestmark = pytest.mark.one_backend

CLIENTS = 300
PARTITIONS = 4
MAX_REQUEST = 1 << 20


async def _call(reader, writer, msg, version: int, corr: int):
    writer.write(encode_request(msg, version, corr, "c%d" % corr))
    await writer.drain()
    head = await reader.readexactly(4)
    body = await reader.readexactly(struct.unpack(">i", head)[0])
    return decode_response(type(msg).API_KEY, version, head + body).message


async def _client(address, n: int, opened: asyncio.Event, go: asyncio.Event):
    reader, writer = await asyncio.open_connection(*address)
    opened.set()
    await go.wait()
    try:
        versions = await _call(reader, writer, ApiVersionsRequest(
            client_software_name="conn-test", client_software_version="1"), 3, 1)
        assert versions.error_code == 0
        meta = await _call(reader, writer, MetadataRequest(
            topics=[dict(name="conn")], allow_auto_topic_creation=False), 9, 2)
        assert len(meta.topics[0].partitions) == PARTITIONS
        part = n % PARTITIONS
        b = BatchBuilder(2, "none")
        b.append(b"client %d" % n, key=b"%d" % n)
        produced = await _call(reader, writer, ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[
            dict(name="conn", partition_data=[dict(index=part, records=b.build())])]), 9, 3)
        pr = produced.responses[0].partition_responses[0]
        assert pr.error_code == 0
        fetched = await _call(reader, writer, FetchRequest(
            max_wait_ms=0, min_bytes=0, isolation_level=0, topics=[
                dict(topic="conn", partitions=[dict(partition=part, fetch_offset=pr.base_offset,
                                                    partition_max_bytes=1 << 16)])]), 11, 4)
        records = bytes(fetched.responses[0].partitions[0].records)
        first = RecordBatch.from_buffer(records)
        assert [r.value for r in first] == [b"client %d" % n]
        return n
    finally:
        writer.close()


async def _scenario(broker) -> None:
    address = broker.address
    # A client that sends half a request and stalls.
    stall_r, stall_w = await asyncio.open_connection(*address)
    half = encode_request(MetadataRequest(topics=None), 9, 99, "stalled")
    stall_w.write(half[:len(half) // 2])
    await stall_w.drain()
    # A client announcing a request over socket.request.max.bytes: closed unread.
    big_r, big_w = await asyncio.open_connection(*address)
    big_w.write(struct.pack(">i", MAX_REQUEST + 1) + b"x" * 100)
    await big_w.drain()
    assert await asyncio.wait_for(big_r.read(), WAIT) == b""     # EOF: the broker closed it

    # Hostile claims just under the limit, a few bytes each: memory follows what arrived.
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        claims = []
        for _ in range(20):
            r, w = await asyncio.open_connection(*address)
            w.write(struct.pack(">i", MAX_REQUEST - 1) + b"y" * 64)
            await w.drain()
            claims.append((r, w))
        # a round trip on another connection: the broker's loop has read the claims by now
        probe = await asyncio.open_connection(*address)
        await _call(*probe, ApiVersionsRequest(client_software_name="p",
                                               client_software_version="1"), 3, 7)
        probe[1].close()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 20 * MAX_REQUEST // 4, grown     # not a buffer of the announced size each

    opened = [asyncio.Event() for _ in range(CLIENTS)]
    go = asyncio.Event()
    tasks = [asyncio.ensure_future(_client(address, n, opened[n], go)) for n in range(CLIENTS)]
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in opened)), WAIT)
    assert len(broker._network.connections) >= CLIENTS     # all open at once
    go.set()
    done = await asyncio.wait_for(asyncio.gather(*tasks), WAIT)
    assert sorted(done) == list(range(CLIENTS))
    # The stalled request is still unanswered, its connection still open.
    assert not stall_r.at_eof()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(stall_r.read(1), 0.2)
    for _r, w in claims:
        w.close()
    stall_w.close()
    big_w.close()


def test_hundreds_of_connections_and_hostile_clients(tmp_path):
    with running_broker(str(tmp_path / "logs"),
                        config={"socket.request.max.bytes": str(MAX_REQUEST)}) as broker:
        broker.create_topic("conn", PARTITIONS)
        asyncio.run(_scenario(broker))
        total = sum(broker.call(lambda: broker.partitions.partition("conn", i).log_end_offset)
                    for i in range(PARTITIONS))
        assert total == CLIENTS
