"""``verify``, ``recover``, ``retention``, ``stats`` and ``find``: the commands that work on whole partitions."""
from __future__ import annotations

import datetime
import os
import struct
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import kafkawire
from kafkawire.cli import jsonout, text
from kafkawire.cli.logbytes import LogBytes
from kafkawire.cli.output import Printer, err
from kafkawire.cli.paths import PartitionTarget, PathError, resolve
from kafkawire.cli.progress import Progress, total_size
from kafkawire.compression import decompress
from kafkawire.errors import (CodecNotInstalledError, CorruptRecordError, KafkaWireError,
                              OffsetOutOfRangeError)
from kafkawire.log import files as F
from kafkawire.log.compact import Cleaner
from kafkawire.log.retention import plan_retention, purge_deleted
from kafkawire.log.storage import is_url, storage_for
from kafkawire.log.verify import VerifyReport, describe_tail, verify_segment


# ===================================================================== stats

@dataclass
class PartitionStats:
    partition: str
    path: str
    segments: int = 0
    batches: int = 0
    records: int = 0
    bytes: int = 0
    codecs: Counter[str] = field(default_factory=Counter)
    magics: Counter[int] = field(default_factory=Counter)
    first_offset: Optional[int] = None
    last_offset: Optional[int] = None
    min_timestamp: Optional[int] = None
    max_timestamp: Optional[int] = None
    compressed_bytes: int = 0
    uncompressed_bytes: int = 0
    control_batches: int = 0
    transactional_batches: int = 0
    invalid_bytes: int = 0
    topic_id: Optional[str] = None
    leader_epochs: List[Tuple[int, int]] = field(default_factory=list)
    ignored_files: List[str] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    #: codec -> [batches not decompressed, why]: its library is missing (not damage)
    not_decoded: Dict[str, List[Any]] = field(default_factory=dict)

    @property
    def compression_ratio(self) -> Optional[float]:
        """Uncompressed / stored size of the compressed batches (None: nothing compressed)."""
        if not self.compressed_bytes:
            return None
        return self.uncompressed_bytes / self.compressed_bytes

    def add_batch(self, batch: Any, records: int, uncompressed: Optional[int]) -> None:
        self.batches += 1
        self.records += records
        self.codecs[batch.compression] += 1
        self.magics[batch.magic] += 1
        if batch.is_control:
            self.control_batches += 1
        if batch.is_transactional:
            self.transactional_batches += 1
        if self.first_offset is None:
            self.first_offset = batch.base_offset
        self.last_offset = batch.last_offset if self.last_offset is None else max(
            self.last_offset, batch.last_offset)
        if batch.magic > 0:
            lo = batch.first_timestamp
            hi = batch.max_timestamp
            if batch.delete_horizon is not None or lo < 0:
                lo = hi
            if lo >= 0:
                self.min_timestamp = lo if self.min_timestamp is None else min(self.min_timestamp, lo)
            if hi >= 0:
                self.max_timestamp = hi if self.max_timestamp is None else max(self.max_timestamp, hi)
        if uncompressed is not None:
            self.compressed_bytes += batch.size
            self.uncompressed_bytes += uncompressed

    def as_json(self) -> Dict[str, Any]:
        return {"type": "partition", "partition": self.partition, "path": self.path,
                "segments": self.segments, "batches": self.batches, "records": self.records,
                "bytes": self.bytes, "codecs": dict(self.codecs),
                "magic": {str(k): v for k, v in sorted(self.magics.items())},
                "firstOffset": self.first_offset, "lastOffset": self.last_offset,
                "minTimestamp": self.min_timestamp, "maxTimestamp": self.max_timestamp,
                "compressedBytes": self.compressed_bytes,
                "uncompressedBytes": self.uncompressed_bytes,
                "compressionRatio": self.compression_ratio,
                "controlBatches": self.control_batches,
                "transactionalBatches": self.transactional_batches,
                "invalidBytes": self.invalid_bytes, "topicId": self.topic_id,
                "leaderEpochs": [list(e) for e in self.leader_epochs],
                "ignoredFiles": self.ignored_files, "errors": self.errors,
                "notDecoded": {c: {"batches": n, "message": m}
                               for c, (n, m) in self.not_decoded.items()}}

    def as_text(self) -> str:
        codecs = ", ".join(f"{k} {v}" for k, v in sorted(self.codecs.items())) or "-"
        ratio = "-" if self.compression_ratio is None else f"{self.compression_ratio:.2f}"
        offsets = ("-" if self.first_offset is None
                   else f"{self.first_offset}..{self.last_offset}")
        # a batch whose first timestamp is set but whose max is -1 leaves max_timestamp None
        times = ("-" if self.min_timestamp is None
                 else f"{self.min_timestamp}..{_or_dash(self.max_timestamp)} "
                      f"({_iso(self.min_timestamp)} .. {_iso(self.max_timestamp)})")
        lines = [f"{self.partition}  ({self.path})",
                 f"  segments: {self.segments}  batches: {self.batches}  records: {self.records}  "
                 f"bytes: {self.bytes}",
                 f"  offsets: {offsets}",
                 f"  timestamps: {times}",
                 f"  codecs (batches): {codecs}  compression ratio: {ratio}",
                 "  magic: " + (", ".join(f"v{k} {v}" for k, v in sorted(self.magics.items()))
                                 or "-")
                 + f"  transactional batches: {self.transactional_batches}  "
                   f"control batches: {self.control_batches}"]
        if self.topic_id or self.leader_epochs:
            epochs = ", ".join(f"{e}@{o}" for e, o in self.leader_epochs) or "-"
            lines.append(f"  topic id: {self.topic_id or '-'}  leader epochs (epoch@start offset): "
                         f"{epochs}")
        if self.invalid_bytes:
            lines.append(f"  invalid bytes: {self.invalid_bytes}")
        if self.ignored_files:
            lines.append(f"  ignored (.deleted/.cleaned/.swap leftovers): {len(self.ignored_files)}")
        lines.extend(f"  not decoded (left out of the compression ratio): {n} {c} batches: {m}"
                     for c, (n, m) in self.not_decoded.items())
        lines.extend(f"  error: {e}" for e in self.errors)
        return "\n".join(lines)


def _or_dash(value: Optional[int]) -> str:
    return "-" if value is None else str(value)


def _iso(ms: Optional[int]) -> str:
    if ms is None:
        return "-"
    try:
        dt = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return "?"
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def uncompressed_size(batch: Any) -> Optional[int]:
    """Bytes the batch would take uncompressed (None when it is not compressed)."""
    if batch.compression == "none":
        return None
    raw = batch.raw
    if batch.magic >= 2:
        return 61 + len(decompress(batch.compression, raw[61:], magic=2))
    pos = 12 + 4 + 1 + 1 + (8 if batch.magic == 1 else 0)
    klen = struct.unpack_from(">i", raw, pos)[0]
    pos += 4 + max(klen, 0)
    vlen: int = struct.unpack_from(">i", raw, pos)[0]
    pos += 4
    size: int = batch.size
    if vlen < 0:
        return size
    inner = decompress(batch.compression, raw[pos:pos + vlen], magic=batch.magic)
    return size - vlen + len(inner)


def partition_stats(target: PartitionTarget, bar: Optional[Progress] = None) -> PartitionStats:
    st = PartitionStats(target.name, target.path)
    if target.logs is None:
        _partition_metadata(st)
    for log_path in target.log_files():
        st.segments += 1
        if bar is not None:
            bar.set_label(os.path.basename(log_path))
        with LogBytes(log_path) as lb:   # mapped, or streamed from object storage
            size = lb.size
            st.bytes += size
            consumed = 0
            reported = 0
            last = -1
            for buf, base, stop in lb.blocks():
                it = kafkawire.iter_batches(buf, end=stop, base_position=base)
                try:
                    for batch in it:
                        count = batch.record_count
                        try:
                            if count is None:
                                count = len(batch.records())
                            unc = uncompressed_size(batch)
                        except CodecNotInstalledError as e:
                            entry = st.not_decoded.setdefault(e.codec, [0, str(e)])
                            entry[0] += 1
                            unc = None
                            count = count or 0
                        except KafkaWireError as e:
                            st.errors.append(f"{log_path}: {e}")
                            unc = None
                            count = count or 0
                        st.add_batch(batch, count, unc)
                        consumed = batch.position + batch.size
                        last = max(last, batch.last_offset)
                        if bar is not None and consumed - reported >= _PROGRESS_STEP:
                            bar.advance(consumed - reported)
                            reported = consumed
                except KafkaWireError as e:
                    # Invalid bytes at the end are reported below, the same way zero-filled or not.
                    if not (getattr(e, "reason", None) in ("length", "truncated")
                            and (lb.partial_at(consumed) or lb.zero_from(consumed))):
                        st.errors.append(f"{log_path}: {e}")
                    break
                if consumed != base + stop:
                    break       # a batch running past the end: the rest is the tail
            st.invalid_bytes += size - consumed
            if size > consumed:
                st.errors.append(f"{log_path}: position {consumed}: "
                                 + describe_tail(None, consumed, size, last,
                                                 zero=lb.zero_from(consumed))[1])
        if bar is not None:
            bar.advance(size - reported)
    return st


#: Bytes between progress updates within a segment.
_PROGRESS_STEP = 4 << 20


def _partition_metadata(st: PartitionStats) -> None:
    """Topic id, leader epochs and ignored leftovers of a partition folder (best effort)."""
    try:
        pf = F.list_partition(st.path)
    except OSError as e:
        st.errors.append(f"{st.path}: {e}")
        return
    st.ignored_files = [os.path.basename(p) for p in pf.leftovers]
    try:
        if pf.partition_metadata:
            st.topic_id = F.read_partition_metadata(pf.partition_metadata).get("topic_id")
        if pf.leader_epoch_checkpoint:
            st.leader_epochs = F.read_leader_epoch_checkpoint(pf.leader_epoch_checkpoint)
    except (OSError, ValueError) as e:
        st.errors.append(f"{st.path}: {e}")


def stats(paths: Sequence[str], *, json_mode: bool = False, progress: bool = True) -> int:
    targets = resolve(paths)
    out = Printer(sys.stdout, json_mode=json_mode)
    total = total_size([f for t in targets for f in t.log_files()])
    status = 0
    with Progress(total, enabled=None if progress else False) as bar:
        results = []
        for t in targets:
            results.append(partition_stats(t, bar))
    for i, st in enumerate(results):
        if i and not json_mode:
            out.text("")
        out.emit(st.as_text, st.as_json)
        if st.errors:
            status = 1
    return status


# ====================================================================== find

def _open_log(path: str, partition: Optional[str]) -> kafkawire.Log:
    if partition is not None:
        path = os.path.join(path, partition)
        if not storage_for(path).isdir(path):
            raise PathError(f"{path}: no such partition folder")
    targets = resolve([path])
    if len(targets) != 1:
        names = ", ".join(t.name for t in targets[:5])
        raise PathError(f"{path} holds {len(targets)} partitions ({names}, ...); "
                        "pick one with --partition TOPIC-N")
    return kafkawire.Log.open(targets[0].path)


def find(path: str, *, offset: Optional[int] = None, timestamp: Optional[int] = None,
         partition: Optional[str] = None, print_data: bool = False,
         json_mode: bool = False) -> int:
    """Print the batch and record at ``offset``, or the first record at or after ``timestamp``."""
    if offset is None and timestamp is None:
        raise ValueError("find needs an offset or a timestamp")
    out = Printer(sys.stdout, json_mode=json_mode)
    log = _open_log(path, partition)
    try:
        if timestamp is not None:
            found = log.find_timestamp(timestamp)
            if found is None:
                err(f"kafkawire find: no record with a timestamp at or after {timestamp} "
                    f"in {log.path}")
                return 1
            target = found[0]
        else:
            assert offset is not None  # checked on entry
            target = offset
        if target < log.start_offset:
            err(f"kafkawire find: offset {target} is below the log start offset "
                f"{log.start_offset} of {log.path} (deleted by retention or never written here)")
            return 1
        try:
            segment, position = log.locate(target)
        except OffsetOutOfRangeError as e:
            err(f"kafkawire find: {e}")
            return 1
        try:
            batch = next(iter(kafkawire.iter_batches(segment.buffer, start=position)), None)
            if batch is None:
                err(f"kafkawire find: no readable batch at position {position} of {segment.path}")
                return 1
            records = batch.records()
        except CorruptRecordError as e:
            raise e.at(path=segment.path) from None
        rec = next((r for r in records if r.offset >= target), None)
        if timestamp is not None:
            rec = next((r for r in records if r.offset >= target and r.timestamp >= timestamp),
                       rec)
        try:
            batch.validate()
            valid = True
        except KafkaWireError:
            valid = False
        out.emit(f"segment: {segment.path} position: {position}",
                 {"type": "location", "segment": segment.path, "position": position,
                  "offset": None if rec is None else rec.offset, "requestedOffset": offset,
                  "requestedTimestamp": timestamp})
        out.emit(text.batch_line(batch, position, valid), jsonout.batch_obj(batch, position, valid))
        if rec is None:
            err(f"kafkawire find: the batch at position {position} holds no record at or after "
                f"offset {target} (compacted away)")
            return 1
        if offset is not None and rec.offset != offset:
            err(f"kafkawire find: offset {offset} was compacted away; the next record is "
                f"offset {rec.offset}")
        out.emit(text.record_line(batch, rec, print_contents=print_data),
                 jsonout.record_obj(batch, rec))
        return 0
    finally:
        log.close()


# ==================================================================== verify

def _problem_obj(partition: str, p: Any) -> Dict[str, Any]:
    return {"type": "problem", "partition": partition, "segment": p.segment,
            "position": p.position, "offset": p.offset, "kind": p.kind, "message": p.message}


def verify(paths: Sequence[str], *, json_mode: bool = False, progress: bool = True,
           deep: bool = False, check_indexes: bool = True) -> int:
    """Check every batch and index entry; 0 only when no problem was found anywhere."""
    targets = resolve(paths)
    out = Printer(sys.stdout, json_mode=json_mode)
    total = total_size([f for t in targets for f in t.log_files()])
    clean = True
    with Progress(total, enabled=None if progress else False) as bar:
        out.progress = bar
        for t in targets:
            report = VerifyReport()
            if t.logs is not None:
                segments = [kafkawire.Segment.open(p) for p in t.logs]
                closer: List[Union[kafkawire.Segment, kafkawire.Log]] = list(segments)
            else:
                log = kafkawire.Log.open(t.path)
                segments = list(log.segments)
                closer = [log]
            try:
                prev_last = -1
                for seg in segments:
                    bar.set_label(os.path.basename(seg.path))
                    prev_last = verify_segment(seg, report, check_indexes=check_indexes,
                                               deep=deep, prev_last=prev_last,
                                               progress=bar.advance)
            finally:
                for c in closer:
                    c.close()
            clean = clean and report.ok and report.complete
            head = (f"{t.name}: {report.segments} segments, {report.batches} batches, "
                    f"{report.bytes} bytes, {report.index_entries} index entries: "
                    + (f"{len(report.problems)} problem(s)" if not report.ok
                       else "ok" if report.complete else "no problems in what could be read"))
            out.text(head)
            for p in report.problems:
                # emit calls these at once, so they see this iteration's p and t
                out.emit(lambda: f"  {p}", lambda: _problem_obj(t.name, p))
            for codec, (n, why) in report.not_decoded.items():
                out.text(f"  not checked: the records of {n} {codec} batches: {why}")
            out.emit(None, {"type": "summary", "partition": t.name, "path": t.path,
                            "segments": report.segments, "batches": report.batches,
                            "bytes": report.bytes, "indexEntries": report.index_entries,
                            "problems": len(report.problems), "ok": report.ok,
                            "notDecoded": {c: {"batches": n, "message": m}
                                           for c, (n, m) in report.not_decoded.items()}})
    return 0 if clean else 1


# =================================================================== recover

def recover(paths: Sequence[str], *, apply: bool = False, json_mode: bool = False,
            progress: bool = True) -> int:
    """Kafka's LogSegment.recover per partition.

    A dry run exits 0 when nothing has to be cut or rebuilt, 1 when something
    would be (as ``verify``); ``--apply`` exits 0 once every partition was
    repaired (or was clean), so ``recover --apply && ...`` goes on only with
    repaired logs; its report says what was removed.
    """
    for p in paths:
        if is_url(p):
            raise PathError(f"{p}: recover rewrites files in place, so it works on local folders only; "
                            "copy the partition folder to a local disk first")
    targets = resolve(paths)
    for t in targets:
        if t.logs is not None:
            raise PathError(f"{t.logs[0]}: recover works on whole partitions; give the folder "
                            f"{t.path} (later segments may have to go too)")
    out = Printer(sys.stdout, json_mode=json_mode)
    total = total_size([f for t in targets for f in t.log_files()])
    clean = True
    with Progress(total, enabled=None if progress else False) as bar:
        out.progress = bar
        for t in targets:
            bar.set_label(t.name)
            log = kafkawire.Log.open(t.path)
            try:
                report = log.recover(apply=apply)
            finally:
                log.close()
            bar.advance(total_size(t.log_files()))
            clean = clean and (report.clean or apply)
            obj = report.to_dict()
            obj.update(type="recover", partition=t.name, path=t.path)
            out.emit(lambda: f"{t.name}: " + str(report), obj)
            if not apply and not report.clean:
                out.text("  (dry run: nothing was changed; run again with --apply to truncate "
                         "and rebuild, cut bytes are saved beside each segment)")
    return 0 if clean else 1


# ================================================================= retention, compact

def _local_partitions(paths: Sequence[str], why: str) -> List[PartitionTarget]:
    """The partition folders named by ``paths`` for a command that changes files: local
    folders only, whole partitions only (PathError otherwise)."""
    for p in paths:
        if is_url(p):
            raise PathError(f"{p}: {why}, so it works on local folders only")
    targets = resolve(paths)
    for t in targets:
        if t.logs is not None:
            raise PathError(f"{t.logs[0]}: {why.split()[0]} works on whole partitions; "
                            f"give the folder {t.path}")
    return targets


def retention(paths: Sequence[str], *, retention_ms: Optional[int] = None,
              retention_bytes: Optional[int] = None, log_start_offset: Optional[int] = None,
              now_ms: Optional[int] = None, file_delete_delay_ms: int = 0, apply: bool = False,
              json_mode: bool = False) -> int:
    """Kafka's retention per partition, printing each plan; deletes only with ``apply``.

    Exit status 0 either way (a plan is not a problem).  With ``apply``,
    ``.deleted`` files older than ``file_delete_delay_ms`` left by an earlier
    run are removed too.
    """
    out = Printer(sys.stdout, json_mode=json_mode)
    for t in _local_partitions(paths, "retention deletes files"):
        log = kafkawire.Log.open(t.path)
        try:
            plan = plan_retention(log, retention_ms=retention_ms, retention_bytes=retention_bytes,
                                  log_start_offset=log_start_offset, now_ms=now_ms)
            purged: List[str] = []
            if apply:
                purged = purge_deleted(t.path, older_than_ms=file_delete_delay_ms)
                if not plan.empty:
                    plan.apply(file_delete_delay_ms=file_delete_delay_ms)
        finally:
            log.close()
        obj = plan.to_dict()
        obj.update(type="retention", partition=t.name, purged=purged)
        out.emit(lambda: f"{t.name}: {plan}", obj)
        if purged:
            out.text(f"  removed {len(purged)} .deleted files left by an earlier deletion")
        if not apply and not plan.empty:
            out.text("  (dry run: nothing was changed; run again with --apply to delete)")
    return 0


def compact(paths: Sequence[str], *, apply: bool = False, json_mode: bool = False,
            now_ms: Optional[int] = None, **settings: Any) -> int:
    """Kafka's log cleaner per partition, printing each plan; rewrites only with ``apply``.

    ``settings`` are :class:`kafkawire.log.Cleaner`'s.  Exit status 0 either way.
    """
    cleaner = Cleaner(**settings)
    out = Printer(sys.stdout, json_mode=json_mode)
    for t in _local_partitions(paths, "compact rewrites files"):
        plan = cleaner.clean(t.path, now_ms=now_ms) if apply else cleaner.plan(t.path, now_ms=now_ms)
        obj = plan.to_dict()
        obj.update(type="compact", partition=t.name)
        out.emit(lambda: f"{t.name}: {plan}", obj)
        for line in plan.recovered:
            out.text(f"  finished an interrupted compaction: {line}")
        if not apply and plan.bytes_removed:
            out.text("  (dry run: nothing was changed; run again with --apply to compact)")
    return 0
