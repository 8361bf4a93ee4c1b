"""The client's side of each API: build requests and read responses across versions.

Everything version-dependent the client needs lives here (which field holds
the topic in Fetch v13+, how OffsetFetch v8+ nests groups, ...), so
``client.py`` reads as Kafka policy only.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import kafkawire
from kafkawire import _kernels as K
from kafkawire import compression as _compression
from kafkawire import protocol as P
from kafkawire.client.accumulator import encode_batch
from kafkawire.client.results import FetchResult, OffsetAndMetadata
from kafkawire.records.builder import BatchBuilder

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS = 18, 19, 20
SASL_HANDSHAKE, SASL_AUTHENTICATE, INIT_PRODUCER_ID = 17, 36, 22

# Lowest versions the client itself is willing to use (v2 record batches need Produce v3,
# Fetch v4 returns them with last stable offsets; ListOffsets v1 drops the old offset array).
_CLIENT_MIN = {PRODUCE: 3, FETCH: 4, LIST_OFFSETS: 1, OFFSET_FETCH: 1, METADATA: 1}

# Highest versions a client sends: AddPartitionsToTxn v4+ is for brokers verifying
# partitions on a producer's behalf (KIP-890); Kafka's clients stop at v3.
_CLIENT_MAX = {24: 3}

CLIENT_SOFTWARE_NAME = "kafkawire"


def api_key_of(message) -> int:
    return type(message).API_KEY


def api_name(api_key: int) -> str:
    try:
        return P.request_class(api_key).__name__[:-len("Request")]
    except Exception:
        return f"API {api_key}"


def min_version(api_key: int) -> int:
    return max(P.request_class(api_key).VERSIONS[0], _CLIENT_MIN.get(api_key, 0))


def max_version(api_key: int) -> int:
    return min(P.request_class(api_key).VERSIONS[1], _CLIENT_MAX.get(api_key, 1 << 15))


def encode_request(message, version: int, correlation_id: int, client_id: str) -> bytes:
    return P.encode_request(message, version, correlation_id, client_id)


def decode_response(api_key: int, version: int, payload) -> Any:
    """Body of a response payload (size prefix already stripped by the connection).

    Decoding is strict; a body followed by stray bytes (librdkafka's mock
    broker appends one to flexible responses) is accepted the way Kafka's own
    clients accept it, by ignoring what follows the last field.
    """
    try:
        return P.decode_response(api_key, version, payload, sized=False,
                                 max_frame_size=max(len(payload), 1)).message
    except P.MessageDecodeError as exc:
        if getattr(exc, "reason", None) != "trailing":
            raise
    mv = memoryview(payload)
    header_prog = P.ResponseHeader.program(P.response_header_version(api_key, version))
    _, pos = K.decode_struct(mv, 0, mv.nbytes, header_prog)
    return P.response_class(api_key).decode(mv, version, pos=pos, allow_trailing=True)


# ------------------------------------------------------------------ requests
def api_versions_request(client_id: str):
    return P.ApiVersionsRequest(client_software_name=CLIENT_SOFTWARE_NAME,
                                client_software_version=kafkawire.__version__)


def metadata_request(topics: Optional[Sequence[str]], auto_create: bool, version: int):
    if topics is None:
        return P.MetadataRequest(topics=None if version >= 1 else [],
                                 allow_auto_topic_creation=auto_create)
    return P.MetadataRequest(topics=[{"name": t} for t in topics],
                             allow_auto_topic_creation=auto_create)


def build_batch(records: Sequence[tuple], compression: str, now_ms: int) -> bytes:
    """One v2 batch of ``(value, key, headers, timestamp, partition)`` tuples."""
    codec = _compression.codec_id(compression)
    values: List[Any] = []
    keys: List[Any] = []
    for value, key, headers, ts, _ in records:
        if headers or ts is not None:  # checked and encoded by the batch builder
            return _build_checked(records, compression, now_ms)
        values.append(value)
        keys.append(key)
    # Plain records (bytes or None, as normalize_record made them): one kernel call
    n = len(values)
    blob = K.encode_records_v2(range(n), [0] * n, keys, values, [None] * n)
    return encode_batch(blob, n, now_ms, now_ms, codec, None, -1, -1, -1, False)


def _build_checked(records: Sequence[tuple], compression: str, now_ms: int) -> bytes:
    b = BatchBuilder(magic=2, compression=compression)
    append = b.append
    for value, key, headers, ts, _ in records:
        append(value, key, now_ms if ts is None else ts, headers)
    return b.build()


def produce_request(topic: str, batches: Mapping[int, bytes], acks: int, timeout_ms: int):
    return P.ProduceRequest(acks=acks, timeout_ms=timeout_ms, topic_data=[{
        "name": topic,
        "partition_data": [{"index": p, "records": data} for p, data in sorted(batches.items())],
    }])


def produce_partitions(resp) -> List[Any]:
    return [p for t in resp.responses for p in t.partition_responses]


def produce_partitions_checked(resp, topic: str, requested: Iterable[int]) -> List[Any]:
    """The partition answers of a Produce response, which must answer exactly what was asked."""
    wanted = set(requested)
    out, seen = [], set()
    for t in resp.responses:
        for p in t.partition_responses:
            if t.name != topic or p.index not in wanted or p.index in seen:
                raise kafkawire.errors.ProtocolError(
                    f"Produce response answers {t.name}-{p.index}, which this request did not "
                    f"write (or answers it twice); it wrote {topic} partitions {sorted(wanted)}")
            seen.add(p.index)
            out.append(p)
    missing = wanted - seen
    if missing:
        raise kafkawire.errors.ProtocolError(
            f"Produce response has no answer for {topic} partition(s) {sorted(missing)}; their "
            "records may or may not have been written")
    return out


def check_answered(api: str, names: Iterable[str], answers: Mapping[str, Any]) -> None:
    """Raise ``ProtocolError`` when a response left out topics that the request named."""
    missing = [n for n in names if n not in answers]
    if missing:
        raise kafkawire.errors.ProtocolError(
            f"{api} response has no answer for topic(s) {missing}")


def fetch_request(topic: str, topic_id, partition: int, offset: int, max_wait_ms: int,
                  min_bytes: int, max_bytes: int, partition_max_bytes: int,
                  isolation_level: int, version: int, leader_epoch: int):
    t: Dict[str, Any] = {"partitions": [{
        "partition": partition, "fetch_offset": offset, "partition_max_bytes": partition_max_bytes,
        "current_leader_epoch": leader_epoch if leader_epoch is not None else -1,
    }]}
    if version >= 13:
        if topic_id is None or int(topic_id) == 0:
            raise kafkawire.errors.UnsupportedVersionError(
                f"Fetch v{version} needs the topic id of {topic!r}, which metadata did not give")
        t["topic_id"] = topic_id
    else:
        t["topic"] = topic
    return P.FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                          isolation_level=isolation_level, topics=[t])


def fetch_partition(resp, topic: str, topic_id, partition: int):
    for t in resp.responses:
        same = (t.topic == topic) if getattr(t, "topic", "") else (t.topic_id == topic_id)
        if not same:
            continue
        for p in t.partitions:
            if p.partition_index == partition:
                return p
    raise kafkawire.errors.ProtocolError(
        f"Fetch response has no entry for {topic}-{partition}")


def fetch_result(topic: str, partition: int, offset: int, p, verify_crc: bool) -> FetchResult:
    data = p.records
    batches: list = []
    partial = None
    size = 0
    if data is not None and len(data):
        size = len(data)
        it = kafkawire.iter_batches(data, verify_crc=verify_crc)
        batches = list(it)
        partial = it.partial_tail
    aborted = [(a.producer_id, a.first_offset) for a in (p.aborted_transactions or ())]
    return FetchResult(topic, partition, offset, p.high_watermark,
                       getattr(p, "last_stable_offset", -1), getattr(p, "log_start_offset", -1),
                       batches, aborted, partial, size)


def list_offsets_request(topic: str, partition: int, timestamp: int, isolation_level: int,
                         version: int):
    return P.ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[{
        "name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}],
    }])


def find_coordinator_request(key: str, key_type: int, version: int):
    if version >= 4:
        return P.FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
    return P.FindCoordinatorRequest(key=key, key_type=key_type)


def coordinator_of(resp, key: str, version: int = 0) -> Tuple[int, Optional[str], int, str, int]:
    """(error_code, error_message, node_id, host, port) across versions."""
    if version >= 4 or resp.coordinators:
        for c in resp.coordinators or ():
            if c.key == key:
                return c.error_code, c.error_message, c.node_id, c.host, c.port
        raise kafkawire.errors.ProtocolError(
            f"FindCoordinator v{version} response has no coordinator for {key!r}")
    return (resp.error_code, getattr(resp, "error_message", None), resp.node_id, resp.host,
            resp.port)


def offset_commit_request(group: str, offsets: Mapping[Tuple[str, int], OffsetAndMetadata],
                          generation_id: int, member_id: str, version: int):
    by_topic: Dict[str, list] = {}
    for (topic, partition), om in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append({
            "partition_index": partition, "committed_offset": om.offset,
            "committed_leader_epoch": om.leader_epoch, "committed_metadata": om.metadata,
        })
    return P.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation_id,
                                 member_id=member_id,
                                 topics=[{"name": t, "partitions": ps}
                                         for t, ps in by_topic.items()])


def offset_fetch_request(group: str, partitions: Optional[Sequence[Tuple[str, int]]],
                         version: int):
    topics = None
    if partitions is not None:
        by_topic: Dict[str, list] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        topics = [{"name": t, "partition_indexes": sorted(ps)} for t, ps in by_topic.items()]
    if topics is None and version < 2:
        raise kafkawire.errors.UnsupportedVersionError(
            "fetching all of a group's offsets needs OffsetFetch v2+; name the partitions")
    if version >= 8:
        return P.OffsetFetchRequest(groups=[{"group_id": group, "topics": topics}])
    return P.OffsetFetchRequest(group_id=group, topics=topics)


def offset_fetch_topics(resp, group: str) -> Tuple[int, list]:
    """(group-level error code, topics) across versions."""
    if resp.groups:
        for g in resp.groups:
            if g.group_id == group:
                return g.error_code, g.topics
        return resp.groups[0].error_code, resp.groups[0].topics
    return getattr(resp, "error_code", 0), resp.topics


def create_topics_request(specs: Iterable[Mapping[str, Any]], timeout_ms: int,
                          validate_only: bool, version: int):
    topics = []
    for s in specs:
        topics.append({"name": s["name"], "num_partitions": s["num_partitions"],
                       "replication_factor": s["replication_factor"],
                       "configs": [{"name": k, "value": v} for k, v in s["configs"].items()]})
    return P.CreateTopicsRequest(topics=topics, timeout_ms=timeout_ms,
                                 validate_only=validate_only)


def delete_topics_request(names: Sequence[str], timeout_ms: int, version: int):
    if version >= 6:
        return P.DeleteTopicsRequest(topics=[{"name": n} for n in names], timeout_ms=timeout_ms)
    return P.DeleteTopicsRequest(topic_names=list(names), timeout_ms=timeout_ms)


def delete_topics_results(resp) -> list:
    return list(resp.responses)
