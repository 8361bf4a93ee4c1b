"""``kafkawire dump``: the equivalent of Kafka's ``kafka-dump-log.sh``.

Each file is dispatched on its suffix like Kafka's tool: ``.log`` segments
are scanned batch by batch (records decoded only with ``--deep-iteration``),
``.index``/``.timeindex`` entries printed and checked against the log,
``.txnindex`` and ``.snapshot`` printed; anything else is ignored with
Kafka's message.  Problems found in indexes are reported after all files,
on stderr, with Kafka's wording (in ``--json`` mode, as JSON objects).
"""
from __future__ import annotations

import json
import os
import re
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import kafkawire
from kafkawire import _dumpfmt_common as FMT
from kafkawire import _kernels as K
from kafkawire import compression
from kafkawire.cli import indexdump, jsonout, text
from kafkawire.cli.logbytes import LogBytes
from kafkawire.cli.output import Printer, err
from kafkawire.cli.progress import Progress, total_size
from kafkawire.errors import CodecNotInstalledError, CorruptRecordError, KafkaWireError
from kafkawire.log.storage import storage_for
from kafkawire.log.verify import describe_tail

INT32_MAX = 2 ** 31 - 1
_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
#: output bytes per ``K.dump_batches`` call (one write to stdout each)
_CHUNK = 1 << 20
#: render plain batches with the formatter kernels (``K.dump_batches``/``K.dump_records``);
#: False takes the batch-object path everywhere (the tests compare the two)
FORMATTER = True


@dataclass
class DumpOptions:
    files: List[str]
    deep_iteration: bool = False
    print_data_log: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_bytes: int = INT32_MAX
    max_message_size: int = 5 * 1024 * 1024
    skip_record_metadata: bool = False
    offsets_decoder: bool = False
    transaction_log_decoder: bool = False
    json: bool = False
    max_decompressed_size: Optional[int] = None
    progress: Optional[bool] = None

    def __post_init__(self) -> None:
        # as in Kafka: a decoder implies printing the data, which implies deep iteration
        if self.offsets_decoder or self.transaction_log_decoder:
            self.print_data_log = True
        if self.print_data_log:
            self.deep_iteration = True

    @property
    def parser(self) -> text.Parser:
        if self.offsets_decoder:
            # cheap: only these dumps load the protocol schemas the decoders read with
            from kafkawire.cli.offsets_decoder import parse_record
            return parse_record
        if self.transaction_log_decoder:
            from kafkawire.cli.txn_decoder import parse_record as parse_txn  # cheap: as above
            return parse_txn
        return text.string_parser

    @property
    def decoding(self) -> bool:
        return self.offsets_decoder or self.transaction_log_decoder


def expand_files(files: Sequence[str]) -> List[str]:
    """``--files`` entries; a directory stands for the segment files inside it."""
    out: List[str] = []
    for f in files:
        st = storage_for(f)
        if st.isdir(f):
            names = sorted(n for n in st.listdir(f) if n.endswith(SEGMENT_SUFFIXES))
            out.extend(os.path.join(f, n) for n in names)
        else:
            out.append(f)
    return out


def _suffix(path: str) -> str:
    name = os.path.basename(path)
    i = name.rfind(".")
    return name[i:] if i >= 0 else ""


def _maybe_json(s: Optional[str]) -> Any:
    if s is None:
        return None
    try:
        return json.loads(s)
    except ValueError:
        return s


def legacy_inner_checksums(batch: Any, max_size: Optional[int]) -> Optional[List[Tuple[int, bool]]]:
    """``(stored crc, valid)`` of every message of a v0/v1 batch, in order.

    An uncompressed message is its own record.  A compressed wrapper's inner
    message set is decompressed and walked; None if that fails (the caller
    then reports the wrapper's own checksum).
    """
    if batch.compression == "none":
        return None
    raw = bytes(batch.raw)
    pos = 12 + 4 + 1 + 1 + (8 if batch.magic == 1 else 0)
    try:
        klen = struct.unpack_from(">i", raw, pos)[0]
        pos += 4 + max(klen, 0)
        vlen = struct.unpack_from(">i", raw, pos)[0]
        pos += 4
        if vlen < 0:
            return None
        inner = compression.decompress(batch.compression, raw[pos:pos + vlen], magic=batch.magic,
                           max_size=max_size)
    except (struct.error, KafkaWireError):
        return None
    out: List[Tuple[int, bool]] = []
    p = 0
    while p + 12 <= len(inner):
        size = struct.unpack_from(">i", inner, p + 8)[0]
        if size < 14 or p + 12 + size > len(inner):
            break
        stored = struct.unpack_from(">I", inner, p + 12)[0]
        computed = zlib.crc32(inner[p + 16:p + 12 + size]) & 0xFFFFFFFF
        out.append((stored, stored == computed))
        p += 12 + size
    return out


class Dumper:
    """Runs one ``dump`` invocation; :meth:`run` returns the exit status."""

    def __init__(self, opts: DumpOptions, out: Printer) -> None:
        self.opts = opts
        self.out = out
        self.problems = indexdump.IndexProblems()
        self.status = 0
        self._bar: Optional[Progress] = None
        self._advanced = 0
        self._valid = 0  # bytes of whole batches dumped so far in the current file
        # codec -> (batches whose records could not be read, why)
        self._missing_codecs: Dict[str, Tuple[int, str]] = {}

    # -------------------------------------------------------------- driver
    def run(self) -> int:
        files = expand_files(self.opts.files)
        total = total_size(files)
        # the bar would interleave with records printed to the same terminal
        stdout_tty = hasattr(self.out.stream, "isatty") and self.out.stream.isatty()
        enabled = self.opts.progress
        if enabled is None and stdout_tty:
            enabled = False
        with Progress(total, enabled=enabled, min_total=0 if len(files) > 1 else 64 << 20) as bar:
            self.out.progress = bar
            for path in files:
                bar.set_label(os.path.basename(path))
                self.out.text(f"Dumping {path}")
                self.out.emit(None, {"type": "file", "file": path})
                self._bar = bar
                try:
                    self.dump_file(path)
                except BrokenPipeError:
                    raise
                except (KafkaWireError, OSError) as e:
                    msg = _describe(e)
                    err(f"kafkawire: {msg}" if path in msg else f"kafkawire: {path}: {msg}")
                    self.status = 1
                try:
                    bar.advance(storage_for(path).size(path) - self._advanced)
                except OSError:
                    pass
                self._advanced = 0
        self.report_problems()
        self.report_missing_codecs()
        return self.status

    def report_missing_codecs(self) -> None:
        """One line per codec whose library is missing (not damage: the data may be fine)."""
        for codec, (n, message) in self._missing_codecs.items():
            err(f"kafkawire: records of {n} {codec} batch(es) not shown: {message}")
            self.status = 1

    def _codec_missing(self, exc: CodecNotInstalledError) -> None:
        n, _ = self._missing_codecs.get(exc.codec, (0, ""))
        self._missing_codecs[exc.codec] = (n + 1, str(exc))

    def report_problems(self) -> None:
        if self.out.json_mode:
            for obj in self.problems.as_json():
                self.out.emit(None, obj)
        else:
            for line in self.problems.report():
                err(line)
        if self.opts.verify_index_only and self.problems:
            self.status = 1

    def dump_file(self, path: str) -> None:
        suffix = _suffix(path)
        o = self.opts
        if not storage_for(path).exists(path):
            raise FileNotFoundError(2, "No such file or directory", path)
        if suffix in (".log", ".checkpoint"):
            self.dump_log(path)
        elif suffix == ".index":
            self.status |= indexdump.dump_offset_index(
                path, self.out, self.problems, sanity_only=o.index_sanity_check,
                verify_only=o.verify_index_only, max_message_size=o.max_message_size)
        elif suffix == ".timeindex":
            self.status |= indexdump.dump_time_index(
                path, self.out, self.problems, sanity_only=o.index_sanity_check,
                verify_only=o.verify_index_only)
        elif suffix == ".snapshot":
            self.status |= indexdump.dump_snapshot(path, self.out)
        elif suffix == ".txnindex":
            self.status |= indexdump.dump_txn_index(path, self.out)
        else:
            err(f"Ignoring unknown file {path}: not a .log, .index, .timeindex, .txnindex, "
                ".snapshot or .checkpoint file")
            self.status = 1

    # ----------------------------------------------------------------- log
    def dump_log(self, path: str) -> None:
        o = self.opts
        name = os.path.basename(path)
        if name.endswith(".checkpoint"):
            # a KRaft metadata snapshot: record batches too
            if name == "bootstrap.checkpoint":
                self.out.text("KRaft bootstrap snapshot")
            else:
                m = _SNAPSHOT_NAME.match(name)
                if m is None:
                    raise indexdump.IndexCheckError(
                        f"{path}: not a snapshot name (expected <20-digit offset>-<10-digit "
                        "epoch>.checkpoint)")
                self.out.text(f"Snapshot end offset: {int(m.group(1))}, epoch: {int(m.group(2))}")
        elif name[:1].isdigit():
            self.out.text(f"Log starting offset: {indexdump.base_offset_of(path)}")
        with LogBytes(path, o.max_bytes) as lb:    # mapped, or streamed from object storage
            end = lb.end
            self._valid = 0
            reported = False
            last_offset = -1
            try:
                for buf, base, stop in lb.blocks():
                    last_offset = self._walk_log(path, buf, stop, base, last_offset)
                    if self._valid != base + stop:
                        break   # a batch running past the end: the rest is the tail
            except CorruptRecordError as e:
                if not (e.reason == "length" and e.position == self._valid
                        and lb.zero_from(self._valid)):
                    err(f"kafkawire: {path}: {_describe(e)}")
                    reported = True
                self.status = 1
            trailing = end - self._valid
            if trailing > 0 and o.max_bytes >= INT32_MAX:
                name = os.path.basename(path)
                self.out.emit(f"Found {trailing} invalid bytes at the end of {name}",
                              {"type": "invalidBytes", "file": path, "position": self._valid,
                               "bytes": trailing})
                # Invalid bytes at the end are damage, zero-filled or a batch cut short alike.
                if not reported:
                    err(f"kafkawire: {path}: position {self._valid}: "
                        + describe_tail(None, self._valid, end, lb.last_offset_before(self._valid),
                                        zero=lb.zero_from(self._valid))[1])
                self.status = 1

    def _format_mode(self) -> Optional[int]:
        """The ``K.dump_batches`` mode when the compiled formatter can render this dump."""
        o = self.opts
        if not FORMATTER:
            return None
        json = FMT.JSON if self.out.json_mode else 0
        if not o.deep_iteration:
            return FMT.SHALLOW | json
        if o.skip_record_metadata or o.decoding:
            return None
        if json:
            return json
        return FMT.PRINT if o.print_data_log else 0

    def _walk_log(self, path: str, data: Any, end: int, base: int = 0, last_offset: int = -1) -> int:
        """Dump the batches of ``data[:end]`` (``data`` is the file from position ``base``),
        advancing ``self._valid`` past each one; returns the last offset dumped, which the
        next block's walk checks its first offsets against.

        Runs of plain v2 batches are rendered by ``K.dump_batches`` (whole batches
        straight to bytes); every other batch takes the general path, one at a time.
        """
        mode = self._format_mode()
        if mode is None:
            return self._general(path, data, 0, end, last_offset, None, base=base)
        pos = 0
        while pos < end:
            out, stop, last_offset, status, gaps = K.dump_batches(
                data, pos, end, mode, base, last_offset, _CHUNK)
            for a, b in gaps:
                self.problems._add(self.problems.non_consecutive, path, a, b)
            self.out.write_bytes(out)
            self._advance(stop - pos)
            pos = stop
            if status != FMT.GENERAL:
                continue
            before = self._valid
            last_offset = self._general(path, data, pos, end, last_offset, mode, one=True, base=base)
            if self._valid == before:
                return last_offset  # a partial tail: nothing more to read
            pos = self._valid - base
        return last_offset

    def _advance(self, n: int) -> None:
        self._valid += n
        if self._bar is not None and self._valid - self._advanced >= 1 << 22:
            self._bar.advance(self._valid - self._advanced)
            self._advanced = self._valid

    def _general(self, path: str, data: Any, start: int, end: int, last_offset: int,
                 mode: Optional[int], one: bool = False, base: int = 0) -> int:
        """The batch-object path: every batch from ``start`` (only the first with ``one``);
        ``data`` is the file from position ``base``."""
        o = self.opts
        parser = o.parser
        it = kafkawire.iter_batches(data, start=start, end=_one_batch_end(data, start, end)
                                    if one else end, base_position=base,
                                    max_decompressed_size=o.max_decompressed_size)
        for batch in it:
            position = batch.position
            # A compressed v2 batch the formatter renders was decompressed and
            # checked once, as strictly as validate() would; others are validated.
            rendered = self._format_compressed(batch, last_offset, mode)
            if rendered is not None:
                valid = True
            else:
                try:
                    batch.validate()
                    valid = True
                except CorruptRecordError:
                    valid = False
                except CodecNotInstalledError:
                    # header-level validity (Kafka's isValid: the checksum) needs no codec
                    valid = batch.compute_crc() == batch.crc
            self.out.emit(lambda: text.batch_line(batch, position, valid),
                          lambda: jsonout.batch_obj(batch, position, valid))
            if o.deep_iteration:
                if rendered is not None:
                    out, last_offset, gaps = rendered
                    for a, b in gaps:
                        self.problems._add(self.problems.non_consecutive, path, a, b)
                    self.out.write_bytes(out)
                else:
                    last_offset = self._dump_records(path, batch, parser, last_offset)
            self._advance(batch.size)
        return last_offset

    def _dump_records(self, path: str, batch: Any, parser: text.Parser, last_offset: int) -> int:
        o = self.opts
        try:
            records = batch.records()
        except CodecNotInstalledError as e:
            self._codec_missing(e)
            header_last: int = batch.last_offset  # the header's: offsets stay checked across the batch
            return header_last
        except KafkaWireError as e:
            err(f"kafkawire: {path}: cannot decode the records of the batch at position "
                f"{batch.position}: {_describe(e)}")
            self.status = 1
            return last_offset
        crcs = None
        if batch.magic < 2:
            crcs = legacy_inner_checksums(batch, o.max_decompressed_size)
        for rec in records:
            if last_offset != -1 and rec.offset != last_offset + 1:
                self.problems._add(self.problems.non_consecutive, path, last_offset, rec.offset)
            last_offset = rec.offset
        if self.out.json_mode:
            if o.decoding and not batch.is_control:
                lines = []
                for rec in records:
                    obj = jsonout.record_obj(batch, rec)
                    k, v = parser(rec.key, rec.value, rec.offset)
                    obj["decodedKey"] = _maybe_json(k)
                    obj["decodedValue"] = _maybe_json(v)
                    lines.append(json.dumps(obj, separators=(",", ":"), ensure_ascii=False))
            else:
                lines = jsonout.record_json_lines(batch, records)
        else:
            lines = text.record_lines(batch, records, skip_metadata=o.skip_record_metadata,
                                      print_contents=o.print_data_log, parser=parser,
                                      legacy_crcs=crcs)
        if lines:
            self.out.write_lines(lines)
        return last_offset


    def _format_compressed(self, batch: Any, last_offset: int,
                           mode: Optional[int]) -> Optional[Tuple[bytes, int, List[Tuple[int, int]]]]:
        """A compressed v2 batch's record lines by ``K.dump_records``: ``(out, last_offset,
        gaps)``, or None when the general path must take it (not such a batch, a CRC
        mismatch, damage, text needing Java's replacement rules)."""
        if mode is None or batch.magic < 2 or batch.is_control or batch.compression == "none" \
                or batch.record_count < 0 or batch.last_offset < batch.base_offset \
                or batch.compute_crc() != batch.crc:
            return None
        try:
            data = batch.records_bytes()
            out, last, gaps = K.dump_records(
                data, 0, len(data), batch.record_count, batch.base_offset, batch.last_offset,
                batch.first_timestamp, batch.max_timestamp,
                1 if batch.timestamp_type == "LogAppendTime" else 0, batch.base_sequence, mode,
                last_offset)
        except KafkaWireError:
            return None
        return None if out is None else (out, last, gaps)


def _one_batch_end(data: Any, pos: int, end: int) -> int:
    """``end`` narrowed to the batch at ``pos`` (so a scan reads its header only)."""
    if end - pos >= 12:
        length = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        if length >= 14:
            return min(end, pos + 12 + length)
    return end


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}" + (f" ({e.filename})" if e.filename else "")
    return str(e)
