"""Request dispatch: which coroutine answers which API, at which versions.

A handler is ``async def handler(ctx, request, version) -> response`` where
``response`` is a response :class:`~kafkawire.protocol.Message`, a
:class:`RawResponse` (a message whose record fields are file regions sent
with ``sendfile``), an :class:`EncodedResponse` (bytes the handler encoded
itself), or None (no answer: Produce with acks=0).  Register it
with :meth:`Dispatcher.register`.  ApiVersions is answered from the registry
alone: an API without a handler is absent, never answered wrongly.

A hot API may instead register a synchronous handler (:meth:`Dispatcher.register_now`)
that answers at once or returns :class:`Later` (a coroutine function finishing the
answer, e.g. a Fetch long poll): the network layer then answers requests that arrive on
an idle connection straight from the socket's read callback, without a task switch.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, Optional, Tuple, Union

from kafkawire.protocol import ApiKey, ApiVersionsResponse, Message, request_class

if TYPE_CHECKING:
    from kafkawire.server.broker import Broker
    from kafkawire.server.partitions import FileRegion

__all__ = ["RequestContext", "Dispatcher", "Handler", "NowHandler", "RawResponse",
           "EncodedResponse", "Later", "KAFKA_39_VERSIONS"]

log = logging.getLogger("kafkawire.server.dispatch")

#: The versions Kafka 3.9 speaks, per API key (the upper bound of what is advertised).
KAFKA_39_VERSIONS: Dict[int, Tuple[int, int]] = {
    0: (0, 11), 1: (0, 17), 2: (0, 9), 3: (0, 12), 8: (0, 9), 9: (0, 9), 10: (0, 6),
    11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 17: (0, 1),
    18: (0, 4), 19: (0, 7), 20: (0, 6), 21: (0, 2), 22: (0, 5), 24: (0, 5), 25: (0, 4),
    26: (0, 4), 28: (0, 4), 32: (0, 4), 36: (0, 2), 37: (0, 3), 42: (0, 2), 44: (0, 1),
    47: (0, 0), 60: (0, 1),
}


@dataclass
class RequestContext:
    """What a handler knows about the request beyond its body."""
    broker: "Broker"
    peer: str
    client_id: Optional[str]
    api_key: int
    api_version: int
    correlation_id: int
    #: Set by the network layer: whether file regions may be sent with sendfile.
    plaintext: bool = True
    #: Per-connection state handlers may keep (SASL, fetch sessions...).
    connection: Dict[str, Any] = field(default_factory=dict)


@dataclass
class RawResponse:
    """A response message whose record fields hold placeholders for file regions.

    ``regions`` maps each placeholder (a unique 16-byte token set as a
    ``records`` value in ``message``) to the :class:`FileRegion` to send in its place."""
    message: Message
    regions: Dict[bytes, "FileRegion"]


@dataclass
class EncodedResponse:
    """A response a handler encoded itself (a hot API's fast path): the whole frame, size
    prefix and response header included, sent as it is."""
    frame: bytes


class Later:
    """What a synchronous handler returns when it cannot answer yet: ``wait()`` is a
    coroutine giving the response (its side effects so far are kept: it is not run again)."""
    __slots__ = ("wait",)

    def __init__(self, wait: Callable[[], Awaitable["Response"]]) -> None:
        self.wait = wait


Response = Union[Message, RawResponse, EncodedResponse, None]
Handler = Callable[[RequestContext, Any, int], Awaitable[Response]]
NowHandler = Callable[[RequestContext, Any, int], Union[Response, Later]]


class Dispatcher:
    """The registry ``api_key -> handler`` and the versions advertised for each."""

    def __init__(self) -> None:
        self._handlers: Dict[int, Tuple[Handler, int, int]] = {}
        #: Synchronous handlers by API key (see :meth:`register_now`).
        self.now: Dict[int, NowHandler] = {}
        self._versions_body: Optional[ApiVersionsResponse] = None   # made once per registry
        self.register_now(ApiKey.API_VERSIONS, self._api_versions)

    def register(self, api_key: int, handler: Handler,
                 versions: Optional[Tuple[int, int]] = None) -> None:
        """Answer ``api_key`` with ``handler`` at ``versions`` (default: every version the
        schema and Kafka 3.9 both speak)."""
        lo, hi = request_class(api_key).VERSIONS
        k_lo, k_hi = KAFKA_39_VERSIONS.get(int(api_key), (lo, hi))
        lo, hi = max(lo, k_lo), min(hi, k_hi)
        if versions is not None:
            lo, hi = max(lo, versions[0]), min(hi, versions[1])
        if lo > hi:
            raise ValueError(f"no version of API {api_key} is both wanted and spoken")
        self._handlers[int(api_key)] = (handler, lo, hi)
        self.now.pop(int(api_key), None)
        self._versions_body = None

    def register_now(self, api_key: int, handler: NowHandler,
                     versions: Optional[Tuple[int, int]] = None) -> None:
        """Answer ``api_key`` with the synchronous ``handler`` (a response, or
        :class:`Later` to await); also registered as an ordinary handler."""
        async def run(ctx: RequestContext, request: Any, version: int) -> Response:
            answer = handler(ctx, request, version)
            if isinstance(answer, Later):
                return await answer.wait()
            return answer
        self.register(api_key, run, versions)
        self.now[int(api_key)] = handler

    def unregister(self, api_key: int) -> None:
        self._handlers.pop(int(api_key), None)
        self.now.pop(int(api_key), None)
        self._versions_body = None

    def versions(self, api_key: int) -> Optional[Tuple[int, int]]:
        """``(min, max)`` advertised for ``api_key``, or None when it has no handler."""
        h = self._handlers.get(int(api_key))
        return None if h is None else (h[1], h[2])

    def handler(self, api_key: int) -> Optional[Handler]:
        h = self._handlers.get(int(api_key))
        return None if h is None else h[0]

    def api_versions(self, error_code: int = 0) -> ApiVersionsResponse:
        """The ApiVersions response body: every registered API, sorted by key (the error-free
        one is made once per registry: every connection asks for it first)."""
        if error_code == 0 and self._versions_body is not None:
            return self._versions_body
        keys: List[ApiVersionsResponse.ApiVersion] = [
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (_, lo, hi) in sorted(self._handlers.items())]
        body = ApiVersionsResponse(error_code=error_code, api_keys=keys, throttle_time_ms=0)
        if error_code == 0:
            self._versions_body = body
        return body

    def _api_versions(self, ctx: RequestContext, request: Any, version: int) -> Message:
        if version >= 3:
            ctx.connection["client_software"] = (request.client_software_name,
                                                 request.client_software_version)
        return self.api_versions()
