"""Kafka's wire protocol: one class per message, headers and frames.

Every message class (``MetadataRequest``, ``FetchResponse``, ...) has
snake_case attributes named after Kafka's fields, ``encode(version)``,
``classmethod decode(data, version)`` and ``to_dict()``; nested structs are
nested classes (``ProduceRequest.TopicProduceData``) and constructors accept
dicts for them.  The functions below add headers and size prefixes::

    frame = encode_request(MetadataRequest(topics=None), 12, correlation_id=1, client_id="me")
    corr, resp = decode_response(ApiKey.METADATA, 12, frame_from_socket)

Errors: malformed bytes raise :class:`MessageDecodeError` (a
``kafkawire.errors.ProtocolError``), unsupported versions and unknown API keys
``kafkawire.errors.UnsupportedVersionError``.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple, Type

from kafkawire import _kernels as K
from kafkawire.protocol.api_keys import ApiKey, request_class, response_class, supported_versions
from kafkawire.protocol.errors import (FrameTooLargeError, InvalidFrameError, MessageDecodeError,
                                       MessageEncodeError, ProtocolError, TruncatedFrameError,
                                       UnknownApiKeyError, UnsupportedVersionError)
from kafkawire.protocol.frames import (DEFAULT_MAX_FRAME_SIZE, FrameReader, frame, frame_size,
                                       peek_correlation_id, read_frame)
from kafkawire.protocol.headers import (RequestHeader, ResponseHeader, request_header_version,
                                        response_header_version)
from kafkawire.protocol import messages as _messages
from kafkawire.protocol.messages import *  # noqa: F401,F403
from kafkawire.protocol.schema import Message, Struct

__all__ = list(_messages.__all__)
__all__ += [
    "ApiKey", "request_class", "response_class", "supported_versions",
    "encode_request", "decode_request", "encode_response", "decode_response",
    "RequestFrame", "ResponseFrame", "RequestHeader", "ResponseHeader",
    "request_header_version", "response_header_version",
    "frame", "frame_size", "read_frame", "FrameReader", "peek_correlation_id",
    "DEFAULT_MAX_FRAME_SIZE", "Message", "Struct",
    "ProtocolError", "UnsupportedVersionError", "MessageDecodeError", "MessageEncodeError",
    "TruncatedFrameError", "FrameTooLargeError", "InvalidFrameError", "UnknownApiKeyError",
]


_UNSUPPORTED_VERSION = 35


class RequestFrame(NamedTuple):
    """A decoded request: its header fields and body."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: Optional[str]
    message: Message


class ResponseFrame(NamedTuple):
    """A decoded response: its correlation id and body."""

    correlation_id: int
    message: Message


def _payload(data: Any, sized: bool, max_frame_size: int) -> memoryview:
    mv = memoryview(data)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    if not sized:
        if mv.nbytes > max_frame_size:
            raise FrameTooLargeError(f"frame of {mv.nbytes} bytes exceeds the limit of "
                                     f"{max_frame_size}", position=0)
        return mv
    payload, end = read_frame(mv, 0, max_frame_size=max_frame_size)
    if end != mv.nbytes:
        raise InvalidFrameError(f"frame announces {end - 4} bytes but {mv.nbytes - 4} were given "
                                "(lying size prefix, or several frames: use FrameReader)",
                                position=0)
    return payload


def _check_message(message: Any, response: bool) -> Type[Message]:
    cls = type(message)
    if not isinstance(message, Message) or cls.API_KEY < 0 or cls.IS_RESPONSE != response:
        raise TypeError(f"expected a kafkawire.protocol {'response' if response else 'request'} "
                        f"message, got {cls.__name__}")
    return cls


def encode_request(message: Message, version: int, correlation_id: int,
                   client_id: Optional[str] = None) -> bytes:
    """Header + body of a request, size-prefixed, ready for the socket."""
    cls = _check_message(message, False)
    cls.check_version(version)
    out = bytearray(b"\0\0\0\0")
    hv = request_header_version(cls.API_KEY, version)
    RequestHeader(request_api_key=cls.API_KEY, request_api_version=version,
                  correlation_id=correlation_id, client_id=client_id).encode_into(out, hv)
    return message.encode_with_prefix(version, out, sized=True)


def encode_response(message: Message, version: int, correlation_id: int) -> bytes:
    """Header + body of a response, size-prefixed (what a broker sends)."""
    cls = _check_message(message, True)
    cls.check_version(version)
    out = bytearray(b"\0\0\0\0")
    ResponseHeader(correlation_id=correlation_id).encode_into(
        out, response_header_version(cls.API_KEY, version))
    return message.encode_with_prefix(version, out, sized=True)


def decode_response(api_key: int, version: int, frame: Any, *, sized: bool = True,
                    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                    allow_trailing: bool = False) -> ResponseFrame:
    """Decode a response to a request of ``api_key`` at ``version``.

    ``frame`` includes the 4-byte size prefix (as read off the socket), or is the
    payload alone with ``sized=False`` (what :class:`FrameReader` yields).  Record
    fields are memoryviews into ``frame``.  Bytes after the last field are an
    error unless ``allow_trailing`` (Kafka's Java client ignores them; some mock
    brokers send them).

    A broker that does not support the ApiVersions version asked for answers
    with a v0 body carrying UNSUPPORTED_VERSION (35) and its own version ranges;
    that body is returned as is, so the client can pick a version and retry."""
    cls = response_class(api_key)
    cls.check_version(version)
    payload = _payload(frame, sized, max_frame_size)
    hv = response_header_version(api_key, version)
    header, pos = _decode_header(ResponseHeader, payload, hv)
    try:
        body = cls.decode(payload, version, pos=pos, allow_trailing=allow_trailing)
    except MessageDecodeError:
        if api_key != ApiKey.API_VERSIONS or version == 0:
            raise
        try:
            old: Optional[Message] = cls.decode(payload, 0, pos=pos, allow_trailing=True)
        except MessageDecodeError:
            old = None
        if old is None or getattr(old, "error_code", None) != _UNSUPPORTED_VERSION:
            raise
        body = old
    return ResponseFrame(header.correlation_id, body)


def decode_request(frame: Any, *, sized: bool = True, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                   allow_trailing: bool = False) -> RequestFrame:
    """Decode a request (header and body) as a broker would."""
    payload = _payload(frame, sized, max_frame_size)
    if payload.nbytes < 4:
        raise TruncatedFrameError("request shorter than its api key and version", position=0)
    api_key = int.from_bytes(payload[0:2], "big", signed=True)
    version = int.from_bytes(payload[2:4], "big", signed=True)
    cls = request_class(api_key)
    cls.check_version(version)
    header, pos = _decode_header(RequestHeader, payload, request_header_version(api_key, version))
    body = cls.decode(payload, version, pos=pos, allow_trailing=allow_trailing)
    return RequestFrame(api_key, version, header.correlation_id,
                        getattr(header, "client_id", None), body)


def _decode_header(cls: Type[Message], payload: memoryview, version: int) -> Tuple[Any, int]:
    header: Tuple[Any, int] = K.decode_struct(payload, 0, payload.nbytes, cls.program(version))
    return header
