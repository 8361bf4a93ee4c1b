"""Turn command-line PATHs into partitions: a log.dirs folder, a partition folder, or segment files."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

from kafkawire.errors import KafkaWireError


class PathError(KafkaWireError):
    """A PATH that is neither a log directory, a partition folder nor a segment file."""


@dataclass
class PartitionTarget:
    """One partition to work on: its folder and, when a file was named, just those ``.log`` files."""

    path: str
    name: str
    logs: Optional[List[str]] = None   # None: every segment of the folder

    def log_files(self) -> List[str]:
        if self.logs is not None:
            return self.logs
        from kafkawire.log.files import list_partition
        return [s.log for s in list_partition(self.path).segments if s.log]


def _is_partition_dir(path: str) -> bool:
    from kafkawire.log.files import parse_segment_file_name
    try:
        return any(parse_segment_file_name(n) for n in os.listdir(path))
    except OSError:
        return False


def resolve(paths: Sequence[str]) -> List[PartitionTarget]:
    """Partitions named by ``paths``, in order (a log.dirs folder expands to its partitions)."""
    from kafkawire.log.files import parse_partition_dir_name
    out: List[PartitionTarget] = []
    for p in paths:
        if os.path.isfile(p):
            if not p.endswith(".log"):
                raise PathError(f"{p}: give a .log segment file, a partition folder or a log.dirs "
                                "folder (index files are checked with their .log)")
            folder = os.path.dirname(os.path.abspath(p))
            out.append(PartitionTarget(folder, os.path.basename(folder), [p]))
        elif os.path.isdir(p):
            name = os.path.basename(os.path.abspath(p))
            if _is_partition_dir(p) or parse_partition_dir_name(name):
                out.append(PartitionTarget(p, name))
                continue
            found = False
            for child in sorted(os.listdir(p)):
                full = os.path.join(p, child)
                if os.path.isdir(full) and parse_partition_dir_name(child) and _is_partition_dir(full):
                    out.append(PartitionTarget(full, child))
                    found = True
            if not found:
                raise PathError(f"{p}: no Kafka partition folders (<topic>-<partition>) or segment "
                                "files found here")
        elif not os.path.exists(p):
            raise FileNotFoundError(2, "No such file or directory", p)
        else:
            raise PathError(f"{p}: not a regular file or directory")
    return out
