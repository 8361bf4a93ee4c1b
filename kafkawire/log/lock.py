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
from typing import Any, Callable, Dict, Optional, Tuple

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


def _open_locked(path: str, open_flags: int, lock: Callable[[int, int], Any], op: int,
                 refused: str) -> int:
    """Open ``path`` and take ``lock(fd, op | LOCK_NB)`` on it; on refusal close it and raise
    :class:`LogLockedError` with the message ``refused``."""
    fd = os.open(path, open_flags, 0o644)
    try:
        lock(fd, op | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise LogLockedError(refused) from None
    return fd


def _drop_shared(path: str) -> None:
    """Count one user of the process-wide lock on ``path`` off; the last one closes it."""
    with _parent_mutex:
        fd, count = _parent_locks[path]
        if count > 1:
            _parent_locks[path] = (fd, count - 1)
        else:
            del _parent_locks[path]
            os.close(fd)


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
        fd = _open_locked(
            self.path, os.O_RDWR | os.O_CREAT, fcntl.flock, fcntl.LOCK_EX,
            f"{self.folder} is locked by another LogWriter, recover --apply, retention --apply "
            f"or compact --apply{_holder(self.path)}; only one may change a partition folder "
            f"at a time (its lock file is {self.path})")
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
            fd = _open_locked(
                path, os.O_RDONLY, fcntl.lockf, fcntl.LOCK_SH,
                f"{parent} is locked by a running broker (or another program holding "
                f"{path}); stop it before changing {self.folder}")
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
            _drop_shared(parent)

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
            fd = _open_locked(
                self.path, os.O_RDWR | os.O_CREAT, fcntl.lockf, fcntl.LOCK_EX,
                f"{self.folder} is locked by a running broker or a program changing it "
                f"(lock file {self.path}); only one broker may serve a log dir")
            _parent_locks[self.path] = (fd, 1)
            self._held = True

    def release(self) -> None:
        """Let the lock go once no partition lock in this process shares it (idempotent)."""
        if not self._held:
            return
        self._held = False
        _drop_shared(self.path)

    def __enter__(self) -> "LogDirLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
