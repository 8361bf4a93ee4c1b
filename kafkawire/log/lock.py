"""The ``.lock`` file: one writer or applying recovery per partition folder at a time.

A broker holds an OS file lock on the ``.lock`` file of each of its
``log.dirs`` folders while it runs.  kafkawire takes the same kind of lock
before it changes a partition folder (``LogWriter``; ``recover``,
``retention`` and ``compact`` with ``apply``): an exclusive lock on ``<partition>/.lock`` (conflicting with
another writer or recovery in this or any other process), and, when the
folder above is a broker's ``log.dirs`` (it has a ``.lock``), a shared lock
on that one, which a running broker's exclusive lock refuses.  A second
taker fails at once with :class:`~kafkawire.errors.LogLockedError` naming
the folder and, when known, the holder.  The locks go when released or when
the process exits.  Readers take no lock.
"""
from __future__ import annotations

import os
import threading
from typing import Dict, Optional, Tuple

from kafkawire.errors import LogLockedError

try:
    import fcntl
except ImportError:   # pragma: no cover - Windows: no advisory locks, nothing enforced
    fcntl = None  # type: ignore[assignment]

LOCK_FILE_NAME = ".lock"

# Shared locks on a log.dirs folder's .lock, one per folder per process (POSIX record locks
# belong to the process: closing any descriptor of the file would drop them all).
_parent_locks: Dict[str, Tuple[int, int]] = {}
_parent_mutex = threading.Lock()


def _holder(path: str) -> str:
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            text = f.read(200).strip()
    except OSError:
        return ""
    return f" (held by {text})" if text else ""


class FolderLock:
    """An exclusive lock on a partition folder; :meth:`release` (or ``with``) lets it go."""

    def __init__(self, folder: str, purpose: str) -> None:
        self.folder = os.path.abspath(folder)
        self.path = os.path.join(self.folder, LOCK_FILE_NAME)
        self.purpose = purpose
        self._fd: Optional[int] = None
        self._parent: Optional[str] = None
        if fcntl is None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise LogLockedError(
                f"{self.folder} is locked by another LogWriter, recover --apply, retention --apply or compact --apply"
                f"{_holder(self.path)}; only one may change a partition folder at a time "
                f"(its lock file is {self.path})") from None
        try:
            self._lock_parent()
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{purpose}, process {os.getpid()}".encode(), 0)
        self._fd = fd

    def _lock_parent(self) -> None:
        parent = os.path.dirname(self.folder)
        path = os.path.join(parent, LOCK_FILE_NAME)
        if not os.path.isfile(path):
            return
        with _parent_mutex:
            held = _parent_locks.get(path)
            if held is not None:
                _parent_locks[path] = (held[0], held[1] + 1)
                self._parent = path
                return
            fd = os.open(path, os.O_RDONLY)
            try:
                fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise LogLockedError(
                    f"{parent} is locked by a running broker (or another program holding "
                    f"{path}); stop it before changing {self.folder}") from None
            _parent_locks[path] = (fd, 1)
            self._parent = path

    def release(self) -> None:
        """Let the lock go (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)   # closing drops the flock
        parent, self._parent = self._parent, None
        if parent is not None:
            with _parent_mutex:
                pfd, count = _parent_locks[parent]
                if count > 1:
                    _parent_locks[parent] = (pfd, count - 1)
                else:
                    del _parent_locks[parent]
                    os.close(pfd)

    def __enter__(self) -> "FolderLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:
            pass


class LogDirLock:
    """A broker's exclusive lock on a ``log.dirs`` folder's ``.lock`` (Kafka's own lock, a
    POSIX record lock, so a Java broker and this process exclude each other).

    While held, :class:`FolderLock`\\ s taken in this process on partition folders inside
    it share the one descriptor instead of taking (and, on release, dropping) a lock of
    their own.  Raises :class:`~kafkawire.errors.LogLockedError` when another process holds it.
    """

    def __init__(self, log_dir: str) -> None:
        self.folder = os.path.abspath(log_dir)
        self.path = os.path.join(self.folder, LOCK_FILE_NAME)
        self._held = False
        if fcntl is None:
            return
        with _parent_mutex:
            if self.path in _parent_locks:
                raise LogLockedError(f"{self.folder} is already in use in this process "
                                     "(a broker or a LogWriter is open on it)")
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise LogLockedError(
                    f"{self.folder} is locked by a running broker or a program changing it "
                    f"(lock file {self.path}); only one broker may serve a log dir") from None
            _parent_locks[self.path] = (fd, 1)
            self._held = True

    def release(self) -> None:
        """Let the lock go once no partition lock in this process shares it (idempotent)."""
        if not self._held:
            return
        self._held = False
        with _parent_mutex:
            fd, count = _parent_locks[self.path]
            if count > 1:
                _parent_locks[self.path] = (fd, count - 1)
            else:
                del _parent_locks[self.path]
                os.close(fd)

    def __enter__(self) -> "LogDirLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
