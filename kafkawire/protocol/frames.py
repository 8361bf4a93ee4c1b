"""Size-prefixed frames: an int32 byte count, then that many bytes (header + body).

Every read is bounded by a frame size limit (``max_frame_size``, default
100 MiB like the broker's ``socket.request.max.bytes``) so a hostile or
corrupt length cannot make kafkawire allocate or wait for gigabytes.
"""
from __future__ import annotations

import struct
from typing import List, Optional, Tuple, Union

from kafkawire.protocol.errors import FrameTooLargeError, InvalidFrameError, TruncatedFrameError

__all__ = ["DEFAULT_MAX_FRAME_SIZE", "frame", "frame_size", "read_frame", "FrameReader",
           "peek_correlation_id"]

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024
#: What the frame functions read: any bytes-like object.
Buffer = Union[bytes, bytearray, memoryview]
_SIZE = struct.Struct(">i")


def frame(payload: Buffer) -> bytes:
    """Prefix ``payload`` with its int32 size."""
    return _SIZE.pack(len(payload)) + bytes(payload)


def frame_size(buf: Buffer, pos: int = 0, *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> Optional[int]:
    """The payload size announced at ``buf[pos:pos+4]``, or None if fewer than 4 bytes are
    there; raises InvalidFrameError (negative) or FrameTooLargeError (over the limit)."""
    if len(buf) - pos < 4:
        return None
    size: int = _SIZE.unpack_from(buf, pos)[0]
    if size < 0:
        raise InvalidFrameError(f"negative frame size {size}: the stream is not Kafka protocol "
                                "or is out of sync", position=pos)
    if size > max_frame_size:
        raise FrameTooLargeError(
            f"frame of {size} bytes exceeds the limit of {max_frame_size} "
            "(raise max_frame_size if the peer really sends frames this large)", position=pos)
    return size


def read_frame(buf: Buffer, pos: int = 0, *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
               ) -> Tuple[memoryview, int]:
    """One complete frame at ``buf[pos:]`` -> (payload view, position after it).

    Raises TruncatedFrameError when the buffer ends before the frame does."""
    size = frame_size(buf, pos, max_frame_size=max_frame_size)
    if size is None:
        raise TruncatedFrameError(f"frame size prefix needs 4 bytes, {len(buf) - pos} remain",
                                  position=pos)
    start = pos + 4
    if start + size > len(buf):
        raise TruncatedFrameError(f"frame announces {size} bytes but only {len(buf) - start} "
                                  "follow (truncated frame)", position=pos)
    return memoryview(buf)[start:start + size], start + size


def peek_correlation_id(payload: Buffer) -> int:
    """The correlation id of a response payload (first field of every response header)."""
    if len(payload) < 4:
        raise TruncatedFrameError("response shorter than its correlation id", position=0)
    correlation_id: int = _SIZE.unpack_from(payload, 0)[0]
    return correlation_id


class FrameReader:
    """Cuts a byte stream (socket reads) into frame payloads.

    ``feed(data)`` returns the payloads completed so far (``bytes``); partial
    frames wait for more data.  ``pending`` is how many bytes are buffered.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()

    @property
    def pending(self) -> int:
        return len(self._buf)

    def needed(self) -> int:
        """Bytes still missing before the next frame is complete (4 when unknown)."""
        size = frame_size(self._buf, 0, max_frame_size=self.max_frame_size)
        if size is None:
            return 4 - len(self._buf)
        return max(0, 4 + size - len(self._buf))

    def feed(self, data: Buffer) -> List[bytes]:
        self._buf += data
        out: List[bytes] = []
        pos = 0
        buf = self._buf
        while True:
            size = frame_size(buf, pos, max_frame_size=self.max_frame_size)
            if size is None or pos + 4 + size > len(buf):
                break
            out.append(bytes(buf[pos + 4:pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return out
