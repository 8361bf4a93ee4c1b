"""Where a log's bytes come from: every read of a partition's files goes through a storage.

A :class:`LocalStorage` (the default, :data:`LOCAL`) reads the local
filesystem: small files (indexes, checkpoints, snapshots) whole, ``.log``
segments memory-mapped (:class:`MappedFile`), batch headers by positioned
reads.  :func:`storage_for` picks the storage for a path; a storage for
object stores (ranged reads instead of maps) implements the same methods.
Writing (``LogWriter``, ``recover``) is local and does not go through here.
"""
from __future__ import annotations

import gc
import mmap
import os
from typing import List, Optional

from kafkawire.errors import LogError


class MappedFile:
    """A read-only view of the first ``size`` bytes of a file (the whole file by default).

    ``data`` is an mmap, or ``b""`` for an empty file.  The mapping never
    grows: a reader sees the prefix that existed when it mapped, however
    much a writer appends.  :meth:`close` tolerates views still exported from
    the map (batch objects, record values): the map then closes when the
    last of them goes.
    """

    __slots__ = ("path", "size", "data", "_mm")

    def __init__(self, path: str, size: Optional[int] = None) -> None:
        self.path = path
        with open(path, "rb") as f:
            actual = os.fstat(f.fileno()).st_size
            if size is None:
                size = actual
            elif size > actual:
                raise LogError(f"{path} shrank from {size} to {actual} bytes while it was open "
                               "(truncated by a recovery or a broker?); open it again")
            self._mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else None
        self.size = size
        self.data = self._mm if self._mm is not None else b""

    def __len__(self) -> int:
        return self.size

    def close(self) -> None:
        mm, self._mm = self._mm, None
        self.data = b""
        if mm is None:
            return
        try:
            mm.close()
        except BufferError:
            # A view is still exported (often one held only by a reference cycle, such as a
            # decoder error's traceback): collect and retry, else the map closes with its
            # last view.
            gc.collect()
            try:
                mm.close()
            except BufferError:
                pass

    def __enter__(self) -> "MappedFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, size={self.size})"


class LocalStorage:
    """The local filesystem."""

    name = "local"

    def listdir(self, path: str) -> List[str]:
        return os.listdir(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def isfile(self, path: str) -> bool:
        return os.path.isfile(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def size(self, path: str) -> int:
        """Byte size of ``path`` (``OSError`` if it cannot be read)."""
        return os.stat(path).st_size

    def read(self, path: str) -> bytes:
        """The whole file (``FileNotFoundError`` when absent): for indexes and other small files.

        Index files are read rather than mapped: a broker trims a
        preallocated index when it rolls the segment, and touching a mapped
        page past the new end of file kills the reading process (SIGBUS).
        """
        with open(path, "rb") as f:
            return f.read()

    def read_range(self, path: str, position: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``position`` (fewer at the end of the file)."""
        with open(path, "rb") as f:
            if hasattr(os, "pread"):
                return os.pread(f.fileno(), length, position)
            f.seek(position)
            return f.read(length)

    def read_ranges(self, path: str, ranges) -> List[bytes]:
        """``read_range`` for each ``(position, length)``, through one open file."""
        with open(path, "rb") as f:
            fd = f.fileno()
            if hasattr(os, "pread"):
                return [os.pread(fd, n, p) for p, n in ranges]
            out = []
            for p, n in ranges:
                f.seek(p)
                out.append(f.read(n))
            return out

    def map(self, path: str, size: Optional[int] = None) -> MappedFile:
        """The first ``size`` bytes of ``path`` (all of it by default), memory-mapped."""
        return MappedFile(path, size)


#: The storage every log reader uses unless given another.
LOCAL = LocalStorage()


def storage_for(path) -> LocalStorage:
    """The storage that reads ``path`` (local files; the hook for other filesystems)."""
    return LOCAL


def map_file(path: str, size: Optional[int] = None) -> MappedFile:
    """Memory-map ``path`` read-only through its storage (see :class:`MappedFile`)."""
    return storage_for(path).map(path, size)
