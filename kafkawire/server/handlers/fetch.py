"""Fetch: records straight from the segment files, long poll on ``max_wait_ms``/``min_bytes``.

Each partition's records are one region of one segment file (Kafka's
``LogSegment.read``): from the batch holding the fetch offset, at most the
partition's ``max_bytes`` (the first batch whole even if larger, as KIP-74
asks), never past the high watermark or, for ``read_committed``, the last
stable offset, with the aborted transactions overlapping the data.  Regions
are sent with ``sendfile`` (see :mod:`kafkawire.server.network`).

Fetch sessions (KIP-227) are not kept: every response has session id 0,
which tells clients to send full fetch requests.
"""
from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Dict, List, Tuple

from kafkawire.errors import OffsetOutOfRangeError
from kafkawire.protocol import ApiKey, FetchResponse
from kafkawire.protocol.schema import ZERO_UUID
from kafkawire.server.codes import (FETCH_SESSION_ID_NOT_FOUND, OFFSET_OUT_OF_RANGE,
                                    UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION)
from kafkawire.server.dispatch import RawResponse, RequestContext
from kafkawire.server.partitions import FileRegion

if TYPE_CHECKING:
    from kafkawire.server.broker import Broker

__all__ = ["register"]

_MAX_WAIT_S = 30.0


def _gather(ctx: RequestContext, req: Any, version: int
            ) -> Tuple[List[FetchResponse.FetchableTopicResponse], Dict[bytes, FileRegion], int, bool]:
    pm = ctx.broker.partitions
    T = FetchResponse.FetchableTopicResponse
    P = T.PartitionData
    committed = version >= 4 and req.isolation_level == 1
    budget = req.max_bytes if version >= 3 else 0x7FFFFFFF
    regions: Dict[bytes, FileRegion] = {}
    total = 0
    error = False
    by_id = {t.topic_id: t.name for t in pm.topics.values()} if version >= 13 else {}
    topics = []
    for ft in req.topics:
        name = by_id.get(ft.topic_id) if version >= 13 else ft.topic
        tr = T(topic_id=ft.topic_id if version >= 13 else ZERO_UUID, topic=name or "",
               partitions=[])
        topics.append(tr)
        for fp in ft.partitions:
            pr = P(partition_index=fp.partition, error_code=0, high_watermark=-1,
                   last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                   preferred_read_replica=-1, records=b"")
            tr.partitions.append(pr)
            part = pm.partition(name, fp.partition) if name is not None else None
            if part is None:
                pr.error_code = UNKNOWN_TOPIC_ID if version >= 13 and name is None \
                    else UNKNOWN_TOPIC_OR_PARTITION
                error = True
                continue
            try:
                got = part.read(fp.fetch_offset, min(fp.partition_max_bytes, budget),
                                committed=committed, min_one=not regions)
            except OffsetOutOfRangeError:
                pr.error_code = OFFSET_OUT_OF_RANGE
                pr.high_watermark = part.high_watermark
                pr.last_stable_offset = part.last_stable_offset
                pr.log_start_offset = part.log_start_offset
                error = True
                continue
            pr.high_watermark = got.high_watermark
            pr.last_stable_offset = got.last_stable_offset
            pr.log_start_offset = got.log_start_offset
            if got.aborted is not None:
                pr.aborted_transactions = [P.AbortedTransaction(producer_id=a.producer_id,
                                                                first_offset=a.first_offset)
                                           for a in got.aborted]
            if got.records is not None:
                token = os.urandom(16)
                pr.records = token
                regions[token] = got.records
                total += got.records.size
                budget = max(budget - got.records.size, 0)
    return topics, regions, total, error


async def handle_fetch(ctx: RequestContext, req: Any, version: int) -> Any:
    if version >= 7 and req.session_epoch > 0:
        # No session was ever handed out (responses carry session id 0).
        return FetchResponse(throttle_time_ms=0, error_code=FETCH_SESSION_ID_NOT_FOUND,
                             session_id=0, responses=[])
    pm = ctx.broker.partitions
    deadline = time.monotonic() + min(max(req.max_wait_ms, 0) / 1000.0, _MAX_WAIT_S)
    while True:
        topics, regions, total, error = _gather(ctx, req, version)
        remaining = deadline - time.monotonic()
        if total >= req.min_bytes or error or remaining <= 0 or ctx.broker.stopping:
            break
        await pm.wait_for_data(remaining)
    msg = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)
    if not regions:
        return msg
    return RawResponse(msg, regions)


def register(broker: "Broker") -> None:
    broker.dispatcher.register(ApiKey.FETCH, handle_fetch, versions=(4, 17))

