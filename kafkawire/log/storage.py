"""Where a log's bytes come from: every read of a partition's files goes through a storage.

A :class:`LocalStorage` (the default, :data:`LOCAL`) reads the local
filesystem: small files (indexes, checkpoints, snapshots) whole, ``.log``
segments memory-mapped (:class:`MappedFile`), batch headers by positioned
reads.  :func:`storage_for` picks the storage for a path: a URL
(``s3://``, ``s3a://``, ``gs://``, ``abfs://``, ``hdfs://``, ``file://``) gets
an :class:`ObjectStorage`, which implements the same methods with ranged
reads through fsspec (``map`` then reads the bytes into memory;
:meth:`ObjectStorage.stream` reads a byte range in large sequential blocks,
one block ahead).  Writing (``LogWriter``, ``recover``) is local and does not
go through here.
"""
from __future__ import annotations

import gc
import json
import logging
import mmap
import os
import random
import re
import stat
import threading
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Dict, Generator, Iterable, List, Mapping, Optional, Tuple, TypeVar, Union

from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire.errors import LogError, ObjectNotFoundError, ObjectTruncatedError, StorageError

log = logging.getLogger("kafkawire.log.storage")
T = TypeVar("T")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: str) -> Tuple[int, int]:
    """``(fd, size)`` of ``path`` opened for reading; LogError unless it is a regular file.

    Opened without blocking (a FIFO would otherwise wait forever for a
    writer) and checked on the open descriptor, so a symlink to
    ``/dev/zero`` or a FIFO named like a segment file is refused, never read.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise LogError(f"{path} is {_kind(st.st_mode)}, not a regular file; Kafka's log, "
                           "index and snapshot files are regular files")
        return fd, st.st_size
    except BaseException:
        os.close(fd)
        raise


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
        fd, actual = open_regular(path)
        with open(fd, "rb") as f:
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

    def close(self) -> bool:
        """Unmap; True when the map is gone, False when views exported from it (batches,
        records, memoryviews a reader still holds) keep it alive until the last goes."""
        mm, self._mm = self._mm, None
        self.data = b""
        if mm is None:
            return True
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
                return False
        return True

    def __enter__(self) -> "MappedFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, size={self.size})"


class LocalStorage:
    """The local filesystem."""

    name = "local"
    #: False: ``.log`` files are memory-mapped, so readers take ``map``'s buffer whole.
    ranged = False

    def listdir(self, path: str) -> List[str]:
        return os.listdir(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def isfile(self, path: str) -> bool:
        return os.path.isfile(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def size(self, path: str) -> int:
        """Byte size of ``path`` (``OSError`` if it cannot be read; LogError if it is not a
        regular file)."""
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise LogError(f"{path} is {_kind(st.st_mode)}, not a regular file; Kafka's log, "
                           "index and snapshot files are regular files")
        return st.st_size

    def read(self, path: str, limit: Optional[int] = None) -> bytes:
        """The whole file, or its first ``limit`` bytes (``FileNotFoundError`` when absent):
        for indexes and other small files.  LogError if ``path`` is not a regular file.

        Index files are read rather than mapped: a broker trims a
        preallocated index when it rolls the segment, and touching a mapped
        page past the new end of file kills the reading process (SIGBUS).
        """
        return self.read_bounded(path, limit)[0]

    def read_bounded(self, path: str, limit: Optional[int] = None) -> Tuple[bytes, int]:
        """``(data, file_size)``: at most ``limit`` bytes from the start of ``path`` (all of it
        when None) and the file's full size; LogError if it is not a regular file."""
        fd, size = open_regular(path)
        with open(fd, "rb") as f:
            want = size if limit is None else min(size, max(limit, 0))
            return f.read(want), size

    def read_range(self, path: str, position: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``position`` (fewer at the end of the file)."""
        with open(path, "rb") as f:
            if hasattr(os, "pread"):
                return os.pread(f.fileno(), length, position)
            f.seek(position)
            return f.read(length)

    def read_ranges(self, path: str, ranges: Iterable[Tuple[int, int]]) -> List[bytes]:
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

_URL_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
#: URL schemes and the fsspec protocol that reads them (Hadoop's names included).
PROTOCOLS = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gcs", "gcs": "gcs", "abfs": "abfs",
             "abfss": "abfs", "az": "abfs", "hdfs": "hdfs", "file": "file"}
#: The package each protocol needs, and the extra that installs it.
_PACKAGES = {"s3": ("s3fs", "s3"), "gcs": ("gcsfs", "gcs"), "abfs": ("adlfs", "azure"),
             "hdfs": ("pyarrow", "hdfs"), "file": ("fsspec", "remote")}


def url_scheme(path: Any) -> Optional[str]:
    """The scheme of a URL (``"s3a"`` for ``s3a://bucket/key``), None for a local path."""
    m = _URL_RE.match(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else None
    return m.group(1).lower() if m else None


def is_url(path: Any) -> bool:
    """Whether ``path`` is a URL (read through :class:`ObjectStorage`) rather than a local path."""
    return url_scheme(path) is not None


def absolute(path: Union[str, "os.PathLike[str]"]) -> str:
    """``os.path.abspath`` for local paths; a URL is kept, without a trailing slash."""
    path = os.fspath(path)
    if is_url(path):
        head, _, rest = path.partition("://")
        return f"{head}://{rest.rstrip('/')}" if rest.rstrip("/") else path
    return os.path.abspath(path)


# -- configuration -----------------------------------------------------------------

def _endpoint(value: str, ssl: Optional[str]) -> str:
    if "://" in value:
        return value
    return ("http://" if (ssl or "true").strip().lower() == "false" else "https://") + value


def storage_options(protocol: str, options: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """fsspec keyword arguments for ``protocol`` from Spark/Hadoop-style options.

    Recognised: ``fs.s3a.endpoint`` (with ``fs.s3a.connection.ssl.enabled``),
    ``fs.s3a.access.key``, ``fs.s3a.secret.key``, ``fs.s3a.session.token``,
    ``fs.s3a.endpoint.region`` / ``fs.s3a.region``, ``fs.s3a.path.style.access``,
    an anonymous ``fs.s3a.aws.credentials.provider``; ``fs.gs.project.id``;
    ``fs.azure.account.key.<account>.<host>``.  A ``storage_options`` JSON
    object is passed to fsspec as is and wins over the rest.  With no options
    at all the filesystem library finds its settings the standard way
    (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, profiles, instance
    credentials, ``GOOGLE_APPLICATION_CREDENTIALS``, ``STORAGE_EMULATOR_HOST``, ...).
    """
    opts = {str(k).lower(): str(v) for k, v in (options or {}).items()}
    out: Dict[str, Any] = {}
    if protocol == "s3":
        client: Dict[str, Any] = {}
        if opts.get("fs.s3a.endpoint"):
            client["endpoint_url"] = _endpoint(opts["fs.s3a.endpoint"],
                                               opts.get("fs.s3a.connection.ssl.enabled"))
        region = opts.get("fs.s3a.endpoint.region") or opts.get("fs.s3a.region")
        if region:
            client["region_name"] = region
        if client:
            out["client_kwargs"] = client
        for key, name in (("fs.s3a.access.key", "key"), ("fs.s3a.secret.key", "secret"),
                          ("fs.s3a.session.token", "token")):
            if opts.get(key):
                out[name] = opts[key]
        if opts.get("fs.s3a.path.style.access", "").strip().lower() == "true":
            out["config_kwargs"] = {"s3": {"addressing_style": "path"}}
        if "anonymous" in opts.get("fs.s3a.aws.credentials.provider", "").lower():
            out["anon"] = True
    elif protocol == "gcs":
        if opts.get("fs.gs.project.id"):
            out["project"] = opts["fs.gs.project.id"]
        keyfile = opts.get("google.cloud.auth.service.account.json.keyfile")
        if keyfile:
            out["token"] = keyfile
    elif protocol == "abfs":
        for k, v in opts.items():
            m = re.fullmatch(r"fs\.azure\.account\.key\.([^.]+)\..+", k)
            if m:
                out["account_name"], out["account_key"] = m.group(1), v
    raw = opts.get("storage_options")
    if raw:
        try:
            extra = json.loads(raw)
        except ValueError as exc:
            raise StorageError(f"storage_options is not valid JSON ({exc}): {raw!r}") from None
        if not isinstance(extra, dict):
            raise StorageError('storage_options must be a JSON object like {"anon": true}')
        out.update(extra)
    return out


# -- object stores -----------------------------------------------------------------

#: Block size of ranged reads from a remote store (S3, GCS, Azure, HDFS).
REMOTE_BLOCK = 16 << 20
#: Block size of ranged reads of ``file://`` URLs (fits the CPU's cache).
LOCAL_BLOCK = 2 << 20

#: Exceptions that are never worth retrying: the object is absent or the request is wrong.
_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
              ValueError, TypeError, KeyError, ImportError, StorageError)


class ObjectStorage:
    """A filesystem reached through fsspec: object stores (S3, GCS, Azure), HDFS, ``file://``.

    Paths stay URLs everywhere in the log model (``s3a://bucket/kafka/orders-0/...``).
    Small files are read whole, ``.log`` bytes by ranged reads: :meth:`stream`
    yields a byte range in ``block_size`` pieces, fetching the next while the
    caller works on the current one.  Transient failures are retried
    ``retries`` times with exponential backoff; an absent object raises
    :class:`~kafkawire.errors.ObjectNotFoundError`, one shorter than expected
    :class:`~kafkawire.errors.ObjectTruncatedError`, both naming it.
    """

    name = "object"
    #: True: ``.log`` bytes are read by ranges, never mapped.
    ranged = True

    def __init__(self, protocol: str, options: Optional[Dict[str, Any]] = None, *, fs: Any = None,
                 block_size: Optional[int] = None, read_ahead: Optional[bool] = None,
                 retries: int = 5, backoff: float = 0.2) -> None:
        self.protocol = protocol
        self.options = dict(options or {})
        local = protocol == "file"
        #: Bytes per ranged read of :meth:`stream`: large for a remote store (a request costs
        #: tens of milliseconds), small for local disks, where a block that stays in the CPU
        #: cache until it is decoded makes the copy nearly free.
        self.block_size = block_size or (LOCAL_BLOCK if local else REMOTE_BLOCK)
        #: Whether :meth:`stream` reads the next block on a thread while the caller decodes:
        #: it hides a remote store's latency; a local read is a copy from the page cache,
        #: cheaper done in line than handed between threads.
        self.read_ahead = (not local) if read_ahead is None else read_ahead
        self.retries = retries
        self.backoff = backoff
        self._fs = fs
        self._lock = threading.Lock()

    @property
    def fs(self) -> Any:
        """The fsspec filesystem (created on first use, so a storage pickles as its settings)."""
        if self._fs is None:
            with self._lock:
                if self._fs is None:
                    self._fs = _filesystem(self.protocol, self.options)
        return self._fs

    def __getstate__(self) -> Dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_fs", "_lock")}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._fs = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ObjectStorage({self.protocol!r})"

    def _key(self, path: str) -> str:
        key: str = self.fs._strip_protocol(path)
        return key

    def _call(self, what: str, path: str, fn: Callable[[], T]) -> T:
        """``fn()``, retried with backoff on transient errors; absent objects named."""
        delay = self.backoff
        for attempt in range(self.retries + 1):
            try:
                return fn()
            except FileNotFoundError as exc:
                raise ObjectNotFoundError(f"{path} does not exist ({what})") from exc
            except _PERMANENT:
                raise
            except Exception as exc:   # network and server errors: the library's own types
                if attempt == self.retries:
                    raise StorageError(f"{what} {path} failed after {self.retries + 1} attempts: "
                                       f"{type(exc).__name__}: {exc}") from exc
                log.warning("%s %s failed (%s: %s); retrying in %.1f s", what, path,
                            type(exc).__name__, exc, delay)
                time.sleep(delay * (0.5 + random.random()))
                delay *= 2
        raise AssertionError("unreachable")

    # -- the LocalStorage methods ---------------------------------------------------
    def listdir(self, path: str) -> List[str]:
        key = self._key(path).rstrip("/")
        names = self._call("listing", path, lambda: self.fs.ls(key, detail=False))
        out = []
        for n in names:
            n = str(n).rstrip("/")
            base = n.rsplit("/", 1)[-1]
            if n != key and base:
                out.append(base)
        return out

    def isdir(self, path: str) -> bool:
        return bool(self._call("checking", path, lambda: self.fs.isdir(self._key(path))))

    def isfile(self, path: str) -> bool:
        return bool(self._call("checking", path, lambda: self.fs.isfile(self._key(path))))

    def exists(self, path: str) -> bool:
        return bool(self._call("checking", path, lambda: self.fs.exists(self._key(path))))

    def size(self, path: str) -> int:
        return int(self._call("sizing", path, lambda: self.fs.size(self._key(path))))

    def read(self, path: str, limit: Optional[int] = None) -> bytes:
        """The whole object, or its first ``limit`` bytes (``ObjectNotFoundError``, a
        ``FileNotFoundError``, when absent)."""
        if limit is not None:
            return self.read_bounded(path, limit)[0]
        return bytes(self._call("reading", path, lambda: self.fs.cat_file(self._key(path))))

    def read_bounded(self, path: str, limit: Optional[int] = None) -> Tuple[bytes, int]:
        """``(data, size)``: at most ``limit`` bytes from the start (all when None) and the
        object's full size."""
        size = self.size(path)
        want = size if limit is None else min(size, max(limit, 0))
        return self.read_range(path, 0, want), size

    def read_range(self, path: str, position: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``position`` (fewer at the end of the object)."""
        if length <= 0:
            return b""
        key = self._key(path)
        return bytes(self._call("reading", path,
                                lambda: self.fs.cat_file(key, start=position, end=position + length)))

    def read_ranges(self, path: str, ranges: Iterable[Tuple[int, int]]) -> List[bytes]:
        return [self.read_range(path, p, n) for p, n in ranges]

    def read_exact(self, path: str, position: int, length: int) -> bytes:
        """Exactly ``length`` bytes at ``position``; ``ObjectTruncatedError`` when the object ends first."""
        data = self.read_range(path, position, length)
        if len(data) != length:
            raise _truncated(path, position, length, len(data))
        return data

    def _open(self, path: str) -> Any:
        """A file object for ranged reads: no read-ahead cache of the library's own where the
        filesystem takes ``cache_type`` (each ``readinto`` is then one ranged request)."""
        key = self._key(path)

        def go() -> Any:
            try:
                return self.fs.open(key, "rb", cache_type="none")
            except TypeError:
                return self.fs.open(key, "rb")
        return self._call("opening", path, go)

    def _fill(self, f: Any, path: str, position: int, view: memoryview) -> memoryview:
        """``view`` filled from ``position`` (retried on transient errors); ObjectTruncatedError
        when the object ends first."""
        def go() -> int:
            f.seek(position)
            got = 0
            while got < len(view):
                n = f.readinto(view[got:])
                if not n:
                    break
                got += n
            return got
        got = self._call("reading", path, go)
        if got < len(view):
            raise _truncated(path, position, len(view), got)
        return view

    def stream(self, path: str, start: int, end: int, block_size: Optional[int] = None,
               buffers: Optional[List[bytearray]] = None, *, batches: bool = True,
               read_ahead: Optional[bool] = None) -> Generator[memoryview, None, None]:
        """Bytes ``[start, end)`` in order, in blocks of about ``block_size``; with ``read_ahead``
        the next block is read on a thread while the caller works on the current one.

        With ``batches`` (for ``.log`` ranges, which start at a batch) each block
        ends at a batch boundary wherever the bytes allow: a batch cut by a
        block's end starts the next block (its bytes already fetched are moved
        there, not fetched again), and a batch larger than a block gets a block
        of its own, so a caller decodes every block whole, without stitching.
        Whatever the bytes, the blocks put together are exactly the range.

        Blocks are read into reused buffers (``buffers``, a list the caller may
        keep and pass again across calls): one, or two taking turns with
        read-ahead; they hold a block, or the largest batch read.  A yielded
        block is valid until the caller asks for the next one.  ``read_ahead``
        overrides the storage's setting (False for lookups reading a few batches).
        """
        block = max(block_size or self.block_size, C.LOG_OVERHEAD)
        if end <= start:
            return
        bufs = buffers if buffers is not None else []
        while len(bufs) < 2:
            bufs.append(bytearray(0))
        f = self._open(path)
        try:
            ahead = self.read_ahead if read_ahead is None else read_ahead
            if not (ahead and end - start > block):
                # in line: a batch cut by a block's end is read again with the next block
                # (a copy from the page cache, cheaper than moving it in a shared buffer)
                pos = start
                while pos < end:
                    view, pos, _tail = self._block(f, path, bufs, 0, pos, end, block, None, batches)
                    yield view
                return
            with ThreadPoolExecutor(1, thread_name_prefix="kafkawire-readahead") as pool:
                nxt: Optional[Future[Tuple[memoryview, int, Optional[memoryview]]]] = pool.submit(
                    self._block, f, path, bufs, 0, start, end, block, None, batches)
                k = 0
                while nxt is not None:
                    view, pos, tail = nxt.result()
                    k += 1
                    nxt = (pool.submit(self._block, f, path, bufs, k % 2, pos, end, block, tail, batches)
                           if pos < end else None)
                    yield view
        finally:
            f.close()

    def _block(self, f: Any, path: str, bufs: List[bytearray], i: int, pos: int, end: int,
               block: int, tail: Optional[memoryview],
               batches: bool) -> Tuple[memoryview, int, Optional[memoryview]]:
        """Read the block starting at file position ``pos`` into ``bufs[i]``, after ``tail`` (the
        bytes from ``pos`` on that the previous block already holds): ``(block, end of block,
        bytes read past its end)``."""
        t = len(tail) if tail is not None else 0
        want = min(max(block, t), end - pos)
        buf = bufs[i]
        if len(buf) < want:
            buf = bufs[i] = bytearray(want)     # new, not resized: a caller may hold a view
        mv = memoryview(buf)
        if tail is not None and t:
            mv[:t] = tail
        if want > t:
            self._fill(f, path, pos + t, mv[t:want])
        cut = want
        if batches:
            _rows, stop, status = K.scan_batches(mv, 0, want, -1, False)
            if stop > 0:
                cut = stop
            elif status == C.PARTIAL and want >= C.LOG_OVERHEAD:
                # the first batch is larger than a block: give it a block of its own when the
                # range holds it (a length past the range is left for the decoder to report)
                size = C.LOG_OVERHEAD + int.from_bytes(mv[8:12], "big", signed=True)
                if want < size <= end - pos:
                    big = bufs[i] = bytearray(size)
                    mv, old = memoryview(big), mv
                    mv[:want] = old[:want]
                    self._fill(f, path, pos + want, mv[want:size])
                    cut = want = size
        return mv[:cut], pos + cut, (mv[cut:want] if cut < want else None)

    def map(self, path: str, size: Optional[int] = None) -> "RemoteFile":
        """The first ``size`` bytes (all by default) read into memory, for whole-buffer readers."""
        if size is None:
            size = self.size(path)
        buf = bytearray(size)
        if size:
            f = self._open(path)
            try:
                view = memoryview(buf)
                for pos in range(0, size, self.block_size):
                    self._fill(f, path, pos, view[pos:pos + self.block_size])
            finally:
                f.close()
        return RemoteFile(path, buf)

    def glob(self, pattern: str) -> List[str]:
        """URLs matching a glob pattern (the scheme of ``pattern`` kept)."""
        scheme = url_scheme(pattern)
        found = self._call("listing", pattern, lambda: self.fs.glob(self._key(pattern)))
        return sorted(f"{scheme}://{str(p).lstrip('/')}" if scheme != "file" else f"file://{p}"
                      for p in found)


def _truncated(path: str, position: int, length: int, got: int) -> ObjectTruncatedError:
    return ObjectTruncatedError(
        f"{path} is truncated: expected bytes {position}..{position + length}, the object ends at "
        f"{position + got} (rewritten or cut since it was listed?)")


class RemoteFile:
    """Bytes of an object held in memory, with :class:`MappedFile`'s interface."""

    __slots__ = ("path", "size", "data")

    def __init__(self, path: str, data: Union[bytes, bytearray]) -> None:
        self.path = path
        self.size = len(data)
        self.data = data

    def __len__(self) -> int:
        return self.size

    def close(self) -> None:
        self.data = b""

    def __enter__(self) -> "RemoteFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _filesystem(protocol: str, options: Dict[str, Any]) -> Any:
    try:
        import fsspec
    except ImportError:
        raise StorageError(f"reading {protocol}:// URLs needs fsspec: "
                           f"pip install 'kafkawire[{_PACKAGES.get(protocol, ('', 'remote'))[1]}]'") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)   # fsspec's nag about old s3fs releases
            if protocol == "gcs" and (options.get("endpoint_url") or _gcs_emulator()):
                return _gcs_http_filesystem(options)
            return fsspec.filesystem(protocol, skip_instance_cache=True, **options)
    except ImportError as exc:
        pkg, extra = _PACKAGES.get(protocol, ("its fsspec driver", "remote"))
        raise StorageError(f"reading {protocol}:// URLs needs {pkg}: "
                           f"pip install 'kafkawire[{extra}]' ({exc})") from None
    except TypeError as exc:
        raise StorageError(f"storage options for {protocol}:// rejected: {exc}") from None


def _gcs_emulator() -> bool:
    """Whether ``STORAGE_EMULATOR_HOST`` points the Google Cloud Storage libraries at an emulator."""
    return os.environ.get("STORAGE_EMULATOR_HOST", "") not in ("", "default")


def _gcs_http_filesystem(options: Dict[str, Any]) -> Any:
    """gcsfs's JSON-API filesystem, for an emulator or another endpoint than Google's.

    Newer gcsfs releases register a filesystem that first asks Google's gRPC
    control API what kind of bucket it reads; an emulator does not serve that
    API, so every call would wait on it and log a warning before falling back
    to the JSON API, which is all this layer uses.
    """
    from gcsfs.core import GCSFileSystem
    return GCSFileSystem(skip_instance_cache=True, **options)


_cache: Dict[Tuple[str, str], ObjectStorage] = {}
_cache_lock = threading.Lock()


def object_storage(url: str, options: Optional[Mapping[str, str]] = None) -> ObjectStorage:
    """The (shared, per process) :class:`ObjectStorage` for ``url``'s scheme and ``options``
    (Spark-style or ``storage_options``, see :func:`storage_options`)."""
    scheme = url_scheme(url)
    protocol = PROTOCOLS.get(scheme or "")
    if protocol is None:
        raise StorageError(f"{url}: unsupported URL scheme {scheme!r}; kafkawire reads "
                           f"{', '.join(s + '://' for s in PROTOCOLS)} and local paths")
    kwargs = storage_options(protocol, options)
    key = (protocol, json.dumps(kwargs, sort_keys=True, default=str))
    with _cache_lock:
        st = _cache.get(key)
        if st is None:
            st = _cache[key] = ObjectStorage(protocol, kwargs)
    return st


#: Where a log's files are read from: the local filesystem or an object store.
Storage = Union[LocalStorage, ObjectStorage]


def storage_for(path: Any, options: Optional[Mapping[str, str]] = None) -> Storage:
    """The storage that reads ``path``: :data:`LOCAL` for local paths, an :class:`ObjectStorage`
    for URLs (``options`` configure it, see :func:`storage_options`)."""
    if is_url(path):
        return object_storage(os.fspath(path), options)
    return LOCAL


def map_file(path: str, size: Optional[int] = None,
             storage: Optional[Storage] = None) -> Union[MappedFile, RemoteFile]:
    """The first ``size`` bytes of ``path`` through its storage: a :class:`MappedFile` (local) or a
    :class:`RemoteFile` (read into memory)."""
    return (storage or storage_for(path)).map(path, size)
