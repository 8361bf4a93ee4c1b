"""Kafka's offset checkpoint files, its clean-shutdown marker and ``meta.properties``.

A broker keeps, in each of its ``log.dirs``, text files naming one offset per
partition: ``recovery-point-offset-checkpoint`` (everything below is on
disk and need not be re-validated after a crash), ``log-start-offset-checkpoint``
(offsets below were deleted, e.g. by DeleteRecords) and
``replication-offset-checkpoint`` (high watermarks).  The format is a version
line (``0``), a count line, then ``topic partition offset`` lines.  Files are
replaced atomically (temporary file, fsync, rename, fsync of the folder), as
Kafka's ``CheckpointFile`` does.

``.kafka_cleanshutdown`` in a log dir says the broker stopped cleanly: logs
were flushed and indexes trimmed, so no recovery is needed at the next start.
"""
from __future__ import annotations

import base64
import json
import os
import time
import uuid
from typing import Dict, Iterable, Mapping, Tuple

from kafkawire.errors import LogError
from kafkawire.log.files import fsync_dir, write_atomic

__all__ = ["RECOVERY_POINT_CHECKPOINT", "LOG_START_OFFSET_CHECKPOINT", "REPLICATION_CHECKPOINT",
           "CLEAN_SHUTDOWN_FILE", "META_PROPERTIES", "read_offset_checkpoint",
           "write_offset_checkpoint", "write_atomic", "read_properties", "write_properties",
           "random_kafka_uuid", "kafka_uuid_string", "parse_kafka_uuid",
           "write_clean_shutdown", "take_clean_shutdown"]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
_MAX_CHECKPOINT_BYTES = 64 * 1024 * 1024

TopicPartition = Tuple[str, int]


def read_offset_checkpoint(path: str) -> Dict[TopicPartition, int]:
    """``{(topic, partition): offset}`` from a checkpoint file ({} when it does not exist).

    Raises :class:`~kafkawire.errors.LogError` naming the file and line for a
    malformed file (wrong version, count not matching the lines, bad numbers)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_CHECKPOINT_BYTES + 1)
    except FileNotFoundError:
        return {}
    if len(raw) > _MAX_CHECKPOINT_BYTES:
        raise LogError(f"{path}: checkpoint file larger than {_MAX_CHECKPOINT_BYTES} bytes")
    lines = raw.decode("utf-8", errors="replace").splitlines()
    if len(lines) < 2 or lines[0].strip() != "0":
        raise LogError(f"{path}: not a version-0 offset checkpoint (first line "
                       f"{lines[0] if lines else ''!r})")
    try:
        count = int(lines[1])
    except ValueError:
        raise LogError(f"{path}: line 2 should be the entry count, got {lines[1]!r}") from None
    out: Dict[TopicPartition, int] = {}
    for n, line in enumerate(lines[2:], start=3):
        if not line.strip():
            continue
        parts = line.split(" ")
        try:
            if len(parts) != 3:
                raise ValueError
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise LogError(f"{path}: line {n} should be 'topic partition offset', "
                           f"got {line!r}") from None
    if len(out) != count:
        raise LogError(f"{path}: announces {count} entries but holds {len(out)}")
    return out


def write_offset_checkpoint(path: str, entries: Mapping[TopicPartition, int]) -> None:
    """Write ``entries`` in Kafka's checkpoint format, atomically."""
    lines = ["0", str(len(entries))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    write_atomic(path, ("\n".join(lines) + "\n").encode("utf-8"))


def read_properties(path: str) -> Dict[str, str]:
    """A Java ``.properties`` file of ``key=value`` lines (comments skipped)."""
    out: Dict[str, str] = {}
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        for line in f.read(1 << 20).splitlines():
            line = line.strip()
            if not line or line[0] in "#!" or "=" not in line:
                continue
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def write_properties(path: str, props: Iterable[Tuple[str, str]]) -> None:
    """Write ``key=value`` lines after a date comment, as Java's ``Properties.store`` does."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    body = "#\n#" + stamp + "\n" + "".join(f"{k}={v}\n" for k, v in props)
    write_atomic(path, body.encode("utf-8"))


def kafka_uuid_string(u: uuid.UUID) -> str:
    """A UUID as Kafka prints it: URL-safe base64 of its 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """The inverse of :func:`kafka_uuid_string`; ValueError for anything else."""
    raw = base64.urlsafe_b64decode(text.strip() + "==")
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a Kafka UUID (22 base64 characters)")
    return uuid.UUID(bytes=raw)


def random_kafka_uuid() -> uuid.UUID:
    """A random UUID Kafka would accept as a topic, cluster or directory id (its string
    form does not start with '-'; never the zero UUID)."""
    while True:
        u = uuid.uuid4()
        if not kafka_uuid_string(u).startswith("-"):
            return u


def write_clean_shutdown(log_dir: str, broker_epoch: int = -1) -> None:
    """Write the clean-shutdown marker in ``log_dir`` (Kafka 3.9's JSON body)."""
    body = json.dumps({"version": 0, "brokerEpoch": broker_epoch}).encode("ascii")
    write_atomic(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), body)


def take_clean_shutdown(log_dir: str) -> bool:
    """Whether ``log_dir`` was shut down cleanly; removes the marker (a broker that then
    crashes must be recovered next time)."""
    path = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
    if not os.path.exists(path):
        return False
    os.remove(path)
    fsync_dir(log_dir)
    return True

