"""Exceptions of the protocol codec, all subclasses of :mod:`kafkawire.errors` classes."""
from __future__ import annotations

from typing import Optional

from kafkawire._protocol_common import MessageDecodeError
from kafkawire.errors import ProtocolError, UnsupportedVersionError

__all__ = ["ProtocolError", "UnsupportedVersionError", "MessageDecodeError", "MessageEncodeError",
           "TruncatedFrameError", "FrameTooLargeError", "InvalidFrameError", "UnknownApiKeyError"]


class MessageEncodeError(ProtocolError, ValueError):
    """A message whose field values cannot be written (wrong type, out of range, null
    where the version forbids it)."""


class TruncatedFrameError(MessageDecodeError):
    """A frame shorter than its size prefix says (the connection closed mid-frame?)."""

    def __init__(self, message: str, *, position: Optional[int] = None) -> None:
        super().__init__(message, position=position, reason="truncated")


class InvalidFrameError(MessageDecodeError):
    """A negative or impossible size prefix."""

    def __init__(self, message: str, *, position: Optional[int] = None) -> None:
        super().__init__(message, position=position, reason="length")


class FrameTooLargeError(InvalidFrameError):
    """A frame over the configured size limit (``max_frame_size``)."""


class UnknownApiKeyError(UnsupportedVersionError):
    """An API key kafkawire has no schema for."""
