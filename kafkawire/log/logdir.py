"""Many partitions: one or more ``log.dirs`` folders (or partition folders) read together."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union, cast

from kafkawire.errors import LogError
from kafkawire.log import files as F
from kafkawire.log.log import Log
from kafkawire.log.storage import Storage, storage_for
from kafkawire.log.recover import RecoverReport
from kafkawire.log.verify import VerifyReport
from kafkawire.records.iterate import Batch

if TYPE_CHECKING:
    from kafkawire.records._types import Record

PathLike = Union[str, "os.PathLike[str]"]
#: Topic names to select: one name, several, or None for all.
Topics = Union[None, str, Iterable[str]]


class LogDir:
    """Every partition under the given folders, keyed by ``(topic, partition)``.

    Each folder given may be a broker's ``log.dirs`` entry (its
    ``<topic>-<partition>`` subfolders are opened; checkpoint files and
    folders being deleted, ``-future`` or ``-stray`` replicas are skipped) or
    a partition folder itself (see :func:`kafkawire.log.files.find_partitions`).
    """

    def __init__(self, logs: Dict[Tuple[str, int], Log], roots: List[str]) -> None:
        self.logs = logs
        self.roots = roots

    @classmethod
    def open(cls, log_dirs: Union[PathLike, Iterable[PathLike]], *,
             storage: Optional[Storage] = None) -> "LogDir":
        """Open one folder or an iterable of folders (a comma-separated string works too)."""
        if isinstance(log_dirs, (str, os.PathLike)):
            roots = [p for p in os.fspath(log_dirs).split(",") if p]
        else:
            roots = [os.fspath(p) for p in log_dirs]
        logs: Dict[Tuple[str, int], Log] = {}
        for root in roots:
            st = storage or storage_for(root)
            for path, key in F.find_partitions(root, st):
                if key is None:
                    continue   # segments in a folder not named <topic>-<partition>
                if key in logs:
                    raise LogError(f"partition {key[0]}-{key[1]} appears in both {logs[key].path} and "
                                   f"{path}; open the folders separately")
                logs[key] = Log.open(path, storage=st)
        return cls(logs, roots)

    def __iter__(self) -> Iterator[Log]:
        for key in sorted(self.logs):
            yield self.logs[key]

    def __len__(self) -> int:
        return len(self.logs)

    def __contains__(self, key: object) -> bool:
        return key in self.logs

    def __getitem__(self, key: Tuple[str, int]) -> Log:
        return self.log(*key)

    def log(self, topic: str, partition: int) -> Log:
        try:
            return self.logs[(topic, partition)]
        except KeyError:
            raise LogError(f"no partition {topic}-{partition} under {', '.join(self.roots)}") from None

    @property
    def topics(self) -> List[str]:
        return sorted({t for t, _ in self.logs})

    def partitions(self, topic: Optional[str] = None) -> List[Tuple[str, int]]:
        """``(topic, partition)`` keys, all or of one topic."""
        return sorted(k for k in self.logs if topic is None or k[0] == topic)

    def _select(self, topics: Topics) -> List[Log]:
        if topics is None:
            return list(self)
        wanted = {topics} if isinstance(topics, str) else set(topics)
        return [self.logs[k] for k in sorted(self.logs) if k[0] in wanted]

    def records(self, topics: Topics = None,
                **kwargs: Any) -> Iterator[Tuple[Optional[str], Optional[int], Record]]:
        """``(topic, partition, record)`` for each partition in turn; ``kwargs`` as :meth:`Log.records`."""
        for log in self._select(topics):
            for rec in log.records(**kwargs):
                yield log.topic, log.partition, rec

    def batches(self, topics: Topics = None,
                **kwargs: Any) -> Iterator[Tuple[Optional[str], Optional[int], Batch]]:
        """``(topic, partition, batch)``; ``kwargs`` as :meth:`Log.batches`."""
        for log in self._select(topics):
            for batch in log.batches(**kwargs):
                yield log.topic, log.partition, batch

    def offsets_for_timestamp(self, timestamp: int,
                              topics: Topics = None) -> Dict[Tuple[str, int], Optional[int]]:
        """Per partition, the first offset whose timestamp is >= ``timestamp`` (None if none)."""
        return {(cast(str, log.topic), cast(int, log.partition)): log.offset_for_timestamp(timestamp)
                for log in self._select(topics)}

    def verify(self, **kwargs: Any) -> VerifyReport:
        """A combined :class:`~kafkawire.log.verify.VerifyReport` over every partition."""
        report = VerifyReport()
        for log in self:
            report.merge(log.verify(**kwargs))
        return report

    def recover(self, apply: bool = False, **kwargs: Any) -> List[RecoverReport]:
        """``Log.recover`` on every partition; a list of reports."""
        return [log.recover(apply=apply, **kwargs) for log in self]

    def close(self) -> None:
        for log in self.logs.values():
            log.close()

    def __enter__(self) -> "LogDir":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
