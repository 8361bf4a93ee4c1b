"""Idempotent and transactional producer state of a partition (Kafka's ``ProducerStateManager``).

Per producer id: its epoch, the metadata of its last five batches (to answer
a retried batch with its original offsets instead of writing it twice), the
coordinator epoch of its last marker and the first offset of its open
transaction.  Batches from clients are checked as Kafka checks them: an
epoch below the known one is INVALID_PRODUCER_EPOCH; a first sequence that
does not follow the last one (or is not 0 for a new producer or epoch) is
OUT_OF_ORDER_SEQUENCE_NUMBER.

State is saved in ``<offset>.snapshot`` files in Kafka's format (version 1,
CRC-32C, one 46-byte entry per producer) when a segment rolls and at
shutdown, and rebuilt at start-up from the newest snapshot plus the batch
headers after it.
"""
from __future__ import annotations

import os
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Deque, Dict, List, Optional, Sequence, Tuple

from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire.errors import KafkaWireError
from kafkawire.log import files as LF
from kafkawire.log.checkpoints import write_atomic
from kafkawire.server.codes import INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER

if TYPE_CHECKING:
    from kafkawire.log.log import Log

__all__ = ["ProducerStateManager", "ProducerStateError", "ProducerEntry", "BatchMetadata",
           "SNAPSHOT_SUFFIX", "write_snapshot"]

SNAPSHOT_SUFFIX = ".snapshot"
NUM_BATCHES_TO_RETAIN = 5
NO_SEQUENCE = -1
NO_EPOCH = -1
_INT32_MAX = 0x7FFFFFFF
_HEADER = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")


class ProducerStateError(KafkaWireError):
    """A batch the producer state refuses: ``code`` is Kafka's error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class BatchMetadata:
    """What is kept of one of a producer's recent batches."""
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        if self.last_seq < self.offset_delta:   # the sequence wrapped
            return _INT32_MAX - (self.offset_delta - self.last_seq) + 1
        return self.last_seq - self.offset_delta

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass
class ProducerEntry:
    """One producer's state."""
    producer_id: int
    epoch: int = NO_EPOCH
    batches: Deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def duplicate_of(self, epoch: int, first_seq: int, last_seq: int) -> Optional[BatchMetadata]:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


def _last_seq(base_seq: int, count: int) -> int:
    if base_seq < 0:
        return NO_SEQUENCE
    last = base_seq + count - 1
    return last - _INT32_MAX - 1 if last > _INT32_MAX else last


def write_snapshot(path: str, entries: Sequence[ProducerEntry]) -> None:
    """Write a ``.snapshot`` file (Kafka's version 1 format) of the producers with a batch."""
    body = bytearray(struct.pack(">i", 0))
    n = 0
    for e in entries:
        if not e.batches:
            continue
        last = e.batches[-1]
        body += _ENTRY.pack(e.producer_id, e.epoch, last.last_seq, last.last_offset,
                            last.offset_delta, last.timestamp, e.coordinator_epoch,
                            e.current_txn_first_offset)
        n += 1
    struct.pack_into(">i", body, 0, n)
    crc = K.crc32c(body, 0, len(body), 0)
    write_atomic(path, struct.pack(">hI", 1, crc) + bytes(body))


class ProducerStateManager:
    """The producer state of one partition folder (see the module docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.producers: Dict[int, ProducerEntry] = {}
        self.loaded = False

    # -- checks and updates ---------------------------------------------------
    def check(self, row: Sequence[int]) -> Optional[BatchMetadata]:
        """Check a client's batch (a ``K.scan_batches`` header row): the cached batch it
        duplicates (answer with its offsets, write nothing), or None to append it.
        Raises :class:`ProducerStateError`."""
        pid, epoch, base_seq = row[C.PRODUCER_ID], row[C.PRODUCER_EPOCH], row[C.BASE_SEQUENCE]
        count = row[C.RECORD_COUNT]
        entry = self.producers.get(pid)
        if entry is None:
            if base_seq != 0 and base_seq != NO_SEQUENCE:
                raise ProducerStateError(OUT_OF_ORDER_SEQUENCE_NUMBER,
                                         f"Out of order sequence number for producer {pid}: "
                                         f"{base_seq} (incoming seq. number), -1 (current end "
                                         "sequence number)")
            return None
        if epoch < entry.epoch:
            raise ProducerStateError(INVALID_PRODUCER_EPOCH,
                                     f"Epoch of producer {pid} at offset is {epoch}, which is "
                                     f"smaller than the last seen epoch {entry.epoch}")
        if base_seq == NO_SEQUENCE:
            return None
        dup = entry.duplicate_of(epoch, base_seq, _last_seq(base_seq, count))
        if dup is not None:
            return dup
        if epoch != entry.epoch:
            if base_seq != 0:
                raise ProducerStateError(OUT_OF_ORDER_SEQUENCE_NUMBER,
                                         f"Invalid sequence number for new epoch of producer "
                                         f"{pid}: {epoch} (request epoch), {base_seq} (seq. number)")
        elif entry.last_seq == NO_SEQUENCE:
            if base_seq != 0:
                raise ProducerStateError(OUT_OF_ORDER_SEQUENCE_NUMBER,
                                         f"Out of order sequence number for producer {pid}: "
                                         f"{base_seq} (incoming seq. number), -1 (current end "
                                         "sequence number)")
        elif not _in_sequence(entry.last_seq, base_seq):
            raise ProducerStateError(OUT_OF_ORDER_SEQUENCE_NUMBER,
                                     f"Out of order sequence number for producer {pid}: "
                                     f"{base_seq} (incoming seq. number), {entry.last_seq} "
                                     "(current end sequence number)")
        return None

    def update(self, row: Sequence[int], first_offset: int, last_offset: int) -> None:
        """Record an appended batch (data or transaction marker) of producer ``row``."""
        pid, epoch = row[C.PRODUCER_ID], row[C.PRODUCER_EPOCH]
        if pid < 0:
            return
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        attrs = row[C.ATTRIBUTES]
        if attrs & C.CONTROL_MASK:
            entry.current_txn_first_offset = -1
            return
        if attrs & C.TRANSACTIONAL_MASK and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
        base_seq = row[C.BASE_SEQUENCE]
        if base_seq != NO_SEQUENCE:
            count = row[C.RECORD_COUNT]
            entry.batches.append(BatchMetadata(_last_seq(base_seq, count), last_offset,
                                               last_offset - first_offset,
                                               row[C.MAX_TIMESTAMP]))

    def update_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """A transaction marker was written for ``producer_id``."""
        entry = self.producers.setdefault(producer_id, ProducerEntry(producer_id))
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = -1

    # -- snapshots and loading ------------------------------------------------
    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.path, LF.segment_file_name(offset, SNAPSHOT_SUFFIX))

    def snapshots(self) -> List[Tuple[int, str]]:
        """``(offset, path)`` of the ``.snapshot`` files, by offset."""
        out = []
        for name in os.listdir(self.path):
            parsed = LF.parse_segment_file_name(name)
            if parsed is not None and parsed[1] == SNAPSHOT_SUFFIX:
                out.append((parsed[0], os.path.join(self.path, name)))
        return sorted(out)

    def take_snapshot(self, offset: int) -> None:
        """Write the state as of ``offset`` (the log end offset) to ``<offset>.snapshot``."""
        write_snapshot(self.snapshot_path(offset), list(self.producers.values()))

    def load(self, log: "Log", log_end_offset: int) -> None:
        """Rebuild the state: the newest readable snapshot at or below the log end, then
        every batch header after it (snapshots past the log end are removed, as Kafka does)."""
        self.producers.clear()
        start = 0
        for offset, path in reversed(self.snapshots()):
            if offset > log_end_offset:
                os.remove(path)
                continue
            try:
                entries = LF.read_producer_snapshot(path)
            except KafkaWireError:
                continue
            for e in entries:
                entry = ProducerEntry(e.producer_id, e.producer_epoch,
                                      coordinator_epoch=e.coordinator_epoch,
                                      current_txn_first_offset=e.current_txn_first_offset)
                if e.last_sequence >= 0:
                    entry.batches.append(BatchMetadata(e.last_sequence, e.last_offset,
                                                       e.offset_delta, e.timestamp))
                self.producers[e.producer_id] = entry
            start = offset
            break
        for seg in log.segments:
            if seg.next_offset <= start:
                continue
            for r in seg.headers().tolist():
                if r[C.MAGIC] != 2 or r[C.PRODUCER_ID] < 0 or r[C.LAST_OFFSET] < start:
                    continue
                self.update(r, r[C.BASE_OFFSET], r[C.LAST_OFFSET])
        self.loaded = True
