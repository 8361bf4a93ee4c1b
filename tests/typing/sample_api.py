"""A small program using kafkawire's public API, checked with ``mypy --strict``.

tests/test_typing.py type-checks this file (and runs it): every ``reveal_type``
below must name a real type, never ``Any``.  It is also an example of what an
editor knows about each entry point.
"""
from __future__ import annotations

import sys
import tempfile
from typing import TYPE_CHECKING, Iterator, List, Optional, Tuple

import kafkawire
from kafkawire import Log, LogDir, LogWriter, Record, RecordBatch, Segment, iter_batches
from kafkawire.client import Client, FetchResult
from kafkawire.errors import CorruptRecordError
from kafkawire.log import VerifyReport
from kafkawire.protocol import FetchResponse, MetadataRequest, MetadataResponse
from kafkawire.records import BatchBuilder, LegacyBatch


def build_batch(values: List[bytes]) -> bytes:
    """One v2 batch of ``values`` keyed by their index."""
    builder = kafkawire.BatchBuilder(compression="none", base_offset=0)
    for i, value in enumerate(values):
        builder.append(value, key=str(i).encode())
    data = builder.build()
    if TYPE_CHECKING:
        reveal_type(builder)
        reveal_type(builder.append)
        reveal_type(data)
    return data


def read_batches(data: bytes) -> List[Tuple[int, Optional[bytes]]]:
    """``(offset, value)`` of every record in ``data``."""
    out: List[Tuple[int, Optional[bytes]]] = []
    batches = iter_batches(data, verify_crc=True)
    for batch in batches:
        if isinstance(batch, RecordBatch):
            codec: str = batch.compression
            assert codec == "none"
        for record in batch:
            out.append((record.offset, record.value))
            if TYPE_CHECKING:
                reveal_type(record)
                reveal_type(record.key)
                reveal_type(record.headers)
        if TYPE_CHECKING:
            reveal_type(batch)
            reveal_type(batch.base_offset)
            reveal_type(batch.records())
    if TYPE_CHECKING:
        reveal_type(kafkawire.iter_batches)
        reveal_type(batches)
        reveal_type(batches.partial_tail)
    return out


def write_and_read(folder: str) -> int:
    """Append to a partition folder, read it back through ``Log`` and ``LogDir``."""
    partition = folder + "/orders-0"
    with LogWriter(partition, segment_bytes=4096) as writer:
        first, last = writer.append_records([b"a", (b"k", b"b"), {"value": b"c"}])
        writer.append_batch(build_batch([b"d", b"e"]))
        if TYPE_CHECKING:
            reveal_type(writer)
            reveal_type(writer.next_offset)
    assert (first, last) == (0, 2)
    with Log.open(partition) as log:
        found = log.locate(3)
        assert found is not None
        segment, position = found
        values = [r.value for r in log.records(start_offset=1)]
        assert values == [b"b", b"c", b"d", b"e"], values
        report = log.verify()
        assert report.ok
        stamp = log.offset_for_timestamp(0)
        if TYPE_CHECKING:
            reveal_type(Log.open)
            reveal_type(log)
            reveal_type(log.segments)
            reveal_type(log.records())
            reveal_type(log.batches())
            reveal_type(found)
            reveal_type(report)
            reveal_type(stamp)
        seg = Segment.open(segment.path)
        try:
            n = sum(1 for _ in seg.batches())
            if TYPE_CHECKING:
                reveal_type(seg)
                reveal_type(seg.batches())
        finally:
            seg.close()
    with LogDir.open(folder) as logs:
        assert logs.partitions() == [("orders", 0)]
        total = sum(1 for _ in logs.records())
        if TYPE_CHECKING:
            reveal_type(logs)
            reveal_type(logs.log("orders", 0))
    assert total == 5
    return n


def protocol_round_trip() -> None:
    """Encode a request and decode it back."""
    req = MetadataRequest(topics=[{"name": "orders"}], allow_auto_topic_creation=False)
    data = req.encode(12)
    back = MetadataRequest.decode(data, 12)
    assert back.topics is not None and back.topics[0].name == "orders"
    if TYPE_CHECKING:
        reveal_type(req)
        reveal_type(back)
        reveal_type(back.topics)
        reveal_type(MetadataResponse.decode)
        reveal_type(FetchResponse().responses)


def client_types(bootstrap: str) -> Optional[FetchResult]:
    """What an editor knows about the client (not run: it needs a cluster)."""
    with Client(bootstrap, request_timeout_ms=1000) as client:
        result = client.fetch("orders", 0, 0)
        if TYPE_CHECKING:
            reveal_type(client)
            reveal_type(result)
            reveal_type(result.records())
            reveal_type(client.produce("orders", [b"x"]))
            reveal_type(client.list_offsets("orders", 0))
        return result


def producer_types(bootstrap: str) -> None:
    """What an editor knows about the producer (not run: it needs a cluster)."""
    producer = kafkawire.Producer(bootstrap)
    future = producer.send("orders", b"value", key=b"key")
    if TYPE_CHECKING:
        reveal_type(producer)
        reveal_type(future)
        reveal_type(producer.flush())
    producer.close()


def consumer_types(bootstrap: str) -> None:
    """What an editor knows about the consumer (not run: it needs a cluster)."""
    with kafkawire.Consumer(bootstrap, group_id="readers") as consumer:
        consumer.subscribe(["orders"])
        records = consumer.poll(timeout_ms=100)
        if TYPE_CHECKING:
            reveal_type(consumer)
            reveal_type(records[0].offset)
            reveal_type(records[0].headers)
            reveal_type(consumer.assignment())


def main() -> None:
    data = build_batch([b"x", b"y"])
    assert read_batches(data) == [(0, b"x"), (1, b"y")]
    try:
        list(iter_batches(b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\x00" * 60))
    except CorruptRecordError as exc:
        assert exc.position == 0
    r = Record(offset=3, value=b"v")
    assert r.offset == 3 and r.key is None
    built: BatchBuilder = BatchBuilder()
    assert len(built) == 0
    legacy: Optional[LegacyBatch] = None
    assert legacy is None
    with tempfile.TemporaryDirectory() as folder:
        assert write_and_read(folder) >= 1
    protocol_round_trip()
    report: Optional[VerifyReport] = None
    assert report is None
    it: Iterator[Record] = iter(())
    assert list(it) == []
    if TYPE_CHECKING:
        reveal_type(kafkawire.Record)
        reveal_type(kafkawire.Log)
        reveal_type(kafkawire.Client)
        reveal_type(kafkawire.backend)
        reveal_type(kafkawire.__version__)
    print("ok", kafkawire.backend, file=sys.stderr)


if __name__ == "__main__":
    main()
