"""Fetch: records straight from the segment files, long poll on ``max_wait_ms``/``min_bytes``.

Each partition's records are one region of one segment file (Kafka's
``LogSegment.read``): from the batch holding the fetch offset, at most the
partition's ``max_bytes`` (the first batch whole even if larger, as KIP-74
asks), never past the high watermark or, for ``read_committed``, the last
stable offset, with the aborted transactions overlapping the data.  Regions
are sent with ``sendfile`` (see :mod:`kafkawire.server.network`).

Fetch sessions (KIP-227): a request with epoch 0 opens a session holding its
partitions; later requests name only partitions whose fetch offset changed
(and forget some), and their responses carry only partitions with records,
an error, or a changed high watermark, last stable offset or log start.
"""
from __future__ import annotations

import os
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from kafkawire.errors import OffsetOutOfRangeError
from kafkawire.protocol import ApiKey, FetchResponse
from kafkawire.protocol.schema import ZERO_UUID
from kafkawire.server.codes import (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
                                    OFFSET_OUT_OF_RANGE,
                                    UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION)
from kafkawire.server.dispatch import Later, RawResponse, RequestContext
from kafkawire.server.partitions import FileRegion

if TYPE_CHECKING:
    from kafkawire.server.broker import Broker

__all__ = ["register"]

_MAX_WAIT_S = 30.0
#: Fetch sessions kept at once (Kafka's max.incremental.fetch.session.cache.slots).
MAX_SESSIONS = 1000

# A partition to read: (topic key (name, or id from v13), partition, fetch offset, max bytes).
Want = Tuple[Any, int, int, int]


class _Cached:
    """A session's partition: what the client asked last and what it was told last."""
    __slots__ = ("fetch_offset", "max_bytes", "hw", "lso", "log_start")

    def __init__(self, fetch_offset: int, max_bytes: int) -> None:
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        self.hw = self.lso = self.log_start = -1


class FetchSession:
    """An incremental fetch session (KIP-227): the partitions a client fetches, so that
    later requests name only what changed and responses carry only what changed."""

    def __init__(self, session_id: int) -> None:
        self.id = session_id
        self.epoch = 1
        self.partitions: Dict[Tuple[Any, int], _Cached] = {}


class FetchSessionCache:
    """The broker's fetch sessions by id, the least recently used evicted beyond the limit."""

    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self.limit = limit
        self.sessions: "OrderedDict[int, FetchSession]" = OrderedDict()

    def new(self) -> FetchSession:
        while True:
            sid = int.from_bytes(os.urandom(4), "big") & 0x7FFFFFFF
            if sid and sid not in self.sessions:
                break
        session = self.sessions[sid] = FetchSession(sid)
        while len(self.sessions) > self.limit:
            self.sessions.popitem(last=False)
        return session

    def get(self, sid: int) -> Optional[FetchSession]:
        session = self.sessions.get(sid)
        if session is not None:
            self.sessions.move_to_end(sid)
        return session

    def remove(self, sid: int) -> None:
        self.sessions.pop(sid, None)


def _wanted(req: Any, version: int) -> List[Want]:
    out = []
    for ft in req.topics:
        key = ft.topic_id if version >= 13 else ft.topic
        for fp in ft.partitions:
            out.append((key, fp.partition, fp.fetch_offset, fp.partition_max_bytes))
    return out


def _gather(ctx: RequestContext, req: Any, version: int, wanted: List[Want]
            ) -> Tuple[List[Tuple[Any, Any]], Dict[bytes, FileRegion], int, bool]:
    """Read every wanted partition: ``([(topic key, PartitionData)], regions, bytes, error)``."""
    pm = ctx.broker.partitions
    P = FetchResponse.FetchableTopicResponse.PartitionData
    committed = version >= 4 and req.isolation_level == 1
    # Kafka: a consumer's answer holds at most the smaller of its max_bytes and the broker's
    # fetch.max.bytes (the first batch still goes whole)
    budget = min(req.max_bytes if version >= 3 else 0x7FFFFFFF,
                 ctx.broker.config.int("fetch.max.bytes"))
    regions: Dict[bytes, FileRegion] = {}
    total = 0
    error = False
    by_id = {t.topic_id: t.name for t in pm.topics.values()} if version >= 13 else {}
    out = []
    for key, index, offset, max_bytes in wanted:
        name = by_id.get(key) if version >= 13 else key
        pr = P(partition_index=index, error_code=0, high_watermark=-1,
               last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
               preferred_read_replica=-1, records=b"")
        out.append((key, pr))
        part = pm.partition(name, index) if name is not None else None
        if part is None:
            pr.error_code = UNKNOWN_TOPIC_ID if version >= 13 and name is None \
                else UNKNOWN_TOPIC_OR_PARTITION
            error = True
            continue
        try:
            got = part.read(offset, min(max_bytes, budget), committed=committed,
                            min_one=not regions)
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
    return out, regions, total, error


def _changed(session: Optional[FetchSession], key: Any, pr: Any) -> bool:
    """Whether an incremental response must carry this partition (and remember what it says)."""
    if session is None:
        return True
    cached = session.partitions.get((key, pr.partition_index))
    if cached is None:
        return True
    news = bool(pr.records != b"" or pr.error_code != 0 or cached.hw != pr.high_watermark
                or cached.lso != pr.last_stable_offset or cached.log_start != pr.log_start_offset)
    cached.hw, cached.lso, cached.log_start = (pr.high_watermark, pr.last_stable_offset,
                                               pr.log_start_offset)
    return news


def _session_for(ctx: RequestContext, req: Any, version: int
                 ) -> Tuple[Optional[FetchSession], bool, int]:
    """``(session, incremental, error code)`` for the request's session id and epoch."""
    cache = ctx.broker.fetch_sessions
    if version < 7:
        return None, False, 0
    sid, epoch = req.session_id, req.session_epoch
    if epoch == -1:                                  # sessionless (or closing a session)
        if sid:
            cache.remove(sid)
        return None, False, 0
    if epoch == 0:                                   # a new full session
        if sid:
            cache.remove(sid)
        fresh = cache.new()
        for key, index, offset, max_bytes in _wanted(req, version):
            fresh.partitions[(key, index)] = _Cached(offset, max_bytes)
        return fresh, False, 0
    session = cache.get(sid)
    if session is None:
        return None, True, FETCH_SESSION_ID_NOT_FOUND
    if epoch != session.epoch:
        return None, True, INVALID_FETCH_SESSION_EPOCH
    session.epoch = epoch + 1 if epoch < 0x7FFFFFFF else 1
    for key, index, offset, max_bytes in _wanted(req, version):
        cached = session.partitions.get((key, index))
        if cached is None:
            session.partitions[(key, index)] = _Cached(offset, max_bytes)
        else:
            cached.fetch_offset, cached.max_bytes = offset, max_bytes
    for ft in req.forgotten_topics_data:
        key = ft.topic_id if version >= 13 else ft.topic
        for index in ft.partitions:
            session.partitions.pop((key, index), None)
    return session, True, 0


def handle_fetch(ctx: RequestContext, req: Any, version: int) -> Any:
    """The response when the records are there (or the wait is over at once); else
    :class:`Later`, waiting for records (the session already moved to this request)."""
    session, incremental, code = _session_for(ctx, req, version)
    if code:
        return FetchResponse(throttle_time_ms=0, error_code=code, session_id=0, responses=[])
    if session is not None and incremental:
        wanted = [(k, i, c.fetch_offset, c.max_bytes) for (k, i), c in session.partitions.items()]
    else:
        wanted = _wanted(req, version)
    deadline = time.monotonic() + min(max(req.max_wait_ms, 0) / 1000.0, _MAX_WAIT_S)
    parts, regions, total, error = _gather(ctx, req, version, wanted)
    if (total >= req.min_bytes or error or deadline <= time.monotonic()
            or ctx.broker.stopping):
        return _response(version, session, incremental, parts, regions)

    async def wait() -> Any:
        pm = ctx.broker.partitions
        found: Tuple[List[Tuple[Any, Any]], Dict[bytes, FileRegion], int, bool] = (
            parts, regions, total, error)
        while True:
            remaining = deadline - time.monotonic()
            if found[2] >= req.min_bytes or found[3] or remaining <= 0 or ctx.broker.stopping:
                return _response(version, session, incremental, found[0], found[1])
            await pm.wait_for_data(remaining)
            found = _gather(ctx, req, version, wanted)
    return Later(wait)


def _response(version: int, session: Optional[FetchSession], incremental: bool,
              parts: List[Tuple[Any, Any]], regions: Dict[bytes, FileRegion]) -> Any:
    """The FetchResponse of what was gathered (only what changed, in an incremental
    session)."""
    T = FetchResponse.FetchableTopicResponse
    topics: Dict[Any, Any] = {}
    sent: Dict[bytes, FileRegion] = {}
    for key, pr in parts:
        if incremental:
            if not _changed(session, key, pr):
                continue
            # as Kafka's sessions do: a partition in this answer goes to the end of the
            # session's order, so the next answers' byte budget reaches the others first
            if session is not None:
                k = (key, pr.partition_index)
                session.partitions[k] = session.partitions.pop(k)
        elif session is not None:
            _changed(session, key, pr)               # remember what the full response says
        tr = topics.get(key)
        if tr is None:
            tr = topics[key] = T(topic_id=key if version >= 13 else ZERO_UUID,
                                 topic="" if version >= 13 else key, partitions=[])
        tr.partitions.append(pr)
        if pr.records in regions:
            sent[pr.records] = regions[pr.records]
    msg = FetchResponse(throttle_time_ms=0, error_code=0,
                        session_id=session.id if session is not None else 0,
                        responses=list(topics.values()))
    return RawResponse(msg, sent) if sent else msg


def register(broker: "Broker") -> None:
    broker.dispatcher.register_now(ApiKey.FETCH, handle_fetch, versions=(4, 17))
