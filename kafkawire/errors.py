"""The exceptions kafkawire raises.

Every decoder turns malformed, truncated or hostile bytes into one of these,
naming the byte position (and the offset, where known) so the user can find
the damage with ``kafkawire dump`` or a hex editor.
"""
from __future__ import annotations

from typing import Optional


class KafkaWireError(Exception):
    """Base class of every error kafkawire raises on purpose."""


class CorruptRecordError(KafkaWireError):
    """A batch or message that cannot be decoded as written.

    ``position`` is the byte position of the problem in the buffer or file
    (absolute where the caller knows the file position), ``offset`` the Kafka
    offset where known, ``reason`` a short machine-friendly word: ``"crc"``,
    ``"length"``, ``"truncated"``, ``"varint"``, ``"attributes"``,
    ``"magic"``, ``"offset"``, ``"compression"``, ``"too_large"``.
    """

    def __init__(self, message: str, *, position: Optional[int] = None,
                 offset: Optional[int] = None, reason: str = "corrupt",
                 path: Optional[str] = None) -> None:
        self.message = message
        self.position = position
        self.offset = offset
        self.reason = reason
        self.path = path
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.path is not None:
            where.append(str(self.path))
        if self.position is not None:
            where.append(f"position {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        prefix = f"{', '.join(where)}: " if where else ""
        return f"{prefix}{self.message}"

    def at(self, *, position_delta: int = 0, path: Optional[str] = None,
           offset: Optional[int] = None) -> "CorruptRecordError":
        """Return a copy relocated into an enclosing buffer or file."""
        pos = None if self.position is None else self.position + position_delta
        return type(self)(self.message, position=pos,
                          offset=self.offset if offset is None else offset,
                          reason=self.reason, path=path or self.path)


class RecordTooLargeError(CorruptRecordError):
    """A batch would inflate (or claims to be) past the configured limit."""


class UnsupportedVersionError(KafkaWireError):
    """A magic byte, protocol version or API key kafkawire does not speak."""


class UnsupportedCodecError(KafkaWireError):
    """A compression codec that is unknown or whose library is not installed."""


class MissingDependencyError(KafkaWireError, ImportError):
    """An optional library a feature needs is not installed; the message names the extra.

    Also an ``ImportError``, so code that guards an optional import keeps working.
    """

    def __init__(self, message: str, *, extra: Optional[str] = None) -> None:
        super().__init__(message)
        self.extra = extra


class CodecNotInstalledError(UnsupportedCodecError, MissingDependencyError):
    """A known codec whose library is missing: the data may be fine, it cannot be read here.

    Not a sign of damage: ``verify`` and ``stats`` report it once, apart from problems.
    ``codec`` is the codec's name.
    """

    def __init__(self, message: str, *, codec: str, extra: Optional[str] = None) -> None:
        super().__init__(message, extra=extra)
        self.codec = codec


class IndexCorruptError(KafkaWireError):
    """An offset, time or transaction index that fails Kafka's sanity checks."""


class LogError(KafkaWireError):
    """A log directory or segment that cannot be opened or written."""


class OffsetOutOfRangeError(LogError):
    """An offset no batch of the log holds (below its start, at or past its end); the
    message states the log's range."""


class LogLockedError(LogError):
    """A partition folder another writer or recovery (or a running broker) is changing."""


class LogInUseError(LogError):
    """A change refused because readers of the same ``Log`` still hold its files mapped."""


class PathError(LogError, ValueError):
    """A path that is neither a log.dirs folder, a partition folder nor a segment file."""


class StorageError(LogError):
    """A log file on remote storage that cannot be read (after retries), or storage settings
    that cannot be used."""


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """A file or object that does not exist (the message names it)."""


class ObjectTruncatedError(StorageError):
    """An object shorter than the bytes a reader was told it holds (cut or rewritten meanwhile)."""


class ProtocolError(KafkaWireError):
    """A malformed, truncated or oversized protocol frame."""


class AuthenticationError(KafkaWireError):
    """A broker refused the client's credentials (SASL), or proved it does not know them.

    The clients raise :class:`kafkawire.client.AuthenticationError`, a subclass.
    """


class PureBackendWarning(RuntimeWarning):
    """kafkawire fell back to its pure-Python kernels because the compiled ones did not load.

    Results are the same, only slower.  Raised once, at import.  Silence it
    with ``KAFKAWIRE_BACKEND=pure`` (choosing the pure backend) or a warnings
    filter; get the compiled kernels by installing a wheel or building with a
    C compiler.
    """
