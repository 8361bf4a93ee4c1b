"""ListOffsets: earliest, latest, by timestamp (through the time index), max timestamp."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List

from kafkawire.protocol import ApiKey, ListOffsetsResponse
from kafkawire.server.codes import UNKNOWN_TOPIC_OR_PARTITION
from kafkawire.server.dispatch import RequestContext

if TYPE_CHECKING:
    from kafkawire.server.broker import Broker

__all__ = ["register"]

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


async def handle_list_offsets(ctx: RequestContext, req: Any, version: int) -> ListOffsetsResponse:
    pm = ctx.broker.partitions
    committed = version >= 2 and req.isolation_level == 1
    T = ListOffsetsResponse.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    topics: List[Any] = []
    for lt in req.topics:
        parts = []
        for lp in lt.partitions:
            pr = P(partition_index=lp.partition_index, error_code=0, timestamp=-1, offset=-1,
                   leader_epoch=0)
            parts.append(pr)
            part = pm.partition(lt.name, lp.partition_index)
            if part is None:
                pr.error_code = UNKNOWN_TOPIC_OR_PARTITION
                pr.leader_epoch = -1
                continue
            ts = lp.timestamp
            if ts == LATEST:
                pr.offset = part.last_stable_offset if committed else part.high_watermark
            elif ts in (EARLIEST, EARLIEST_LOCAL):
                pr.offset = part.log_start_offset
            elif ts == LATEST_TIERED:
                pr.offset = -1
            elif ts == MAX_TIMESTAMP:
                off, found_ts = part.max_timestamp()
                if off >= 0:
                    pr.offset, pr.timestamp = off, found_ts
            else:
                found = part.offset_for_timestamp(ts)
                if found is not None:
                    limit = part.last_stable_offset if committed else part.high_watermark
                    if found[0] < limit:
                        pr.offset, pr.timestamp = found
        topics.append(T(name=lt.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def register(broker: "Broker") -> None:
    broker.dispatcher.register(ApiKey.LIST_OFFSETS, handle_list_offsets, versions=(1, 9))
