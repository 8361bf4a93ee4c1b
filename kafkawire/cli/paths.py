"""Turn command-line PATHs into partitions: a log.dirs folder, a partition folder, or segment files.

Folders are discovered by the log's own rule (:func:`kafkawire.log.files.find_partitions`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Optional, Sequence

from kafkawire.errors import PathError
from kafkawire.log import files as F
from kafkawire.log.storage import absolute, storage_for

__all__ = ["PartitionTarget", "PathError", "resolve"]


@dataclass
class PartitionTarget:
    """One partition to work on: its folder and, when a file was named, just those ``.log`` files."""

    path: str
    name: str
    logs: Optional[List[str]] = None   # None: every segment of the folder

    def log_files(self) -> List[str]:
        if self.logs is not None:
            return self.logs
        return [s.log for s in F.list_partition(self.path).segments if s.log]


def resolve(paths: Sequence[str]) -> List[PartitionTarget]:
    """Partitions named by ``paths``, in order (a log.dirs folder expands to its partitions)."""
    out: List[PartitionTarget] = []
    for p in paths:
        st = storage_for(p)   # local paths, or URLs (s3://, gs://, ...) set up from the environment
        if st.isfile(p):
            if not p.endswith(F.LOG_SUFFIX):
                raise PathError(f"{p}: give a .log segment file, a partition folder or a log.dirs "
                                "folder (index files are checked with their .log)")
            folder = os.path.dirname(absolute(p))
            out.append(PartitionTarget(folder, os.path.basename(folder), [p]))
        elif st.isdir(p):
            found = F.find_partitions(p, st)
            if not found:
                raise PathError(f"{p}: no Kafka partition folders (<topic>-<partition>) or segment "
                                "files found here")
            for path, _key in found:
                out.append(PartitionTarget(path, os.path.basename(absolute(path))))
        elif not st.exists(p):
            raise FileNotFoundError(2, "No such file or directory", p)
        else:
            raise PathError(f"{p}: not a regular file or directory")
    return out
