"""The ``kafkawire`` command line: dump, verify, recover, retention, compact, stats, find, serve.

Every expected failure (unreadable or damaged files, bad arguments) ends in
one line on stderr and a non-zero exit status, never a traceback:
0 success/clean, 1 problems found or a file could not be processed,
2 usage errors (argparse's convention).
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional, Sequence

from kafkawire import __version__
from kafkawire.cli import serve as serve_command
from kafkawire.cli.output import Printer
from kafkawire.errors import KafkaWireError

INT32_MAX = 2 ** 31 - 1


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _files(text: str) -> List[str]:
    return [f for f in text.split(",") if f]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kafkawire",
        description="Read, check and repair Apache Kafka's on-disk logs without a broker.")
    p.add_argument("--version", action="version", version=f"kafkawire {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    d = sub.add_parser(
        "dump", help="print segment, index and snapshot files (like kafka-dump-log.sh)",
        description="Parse log, index, time index, transaction index and producer snapshot "
                    "files and print their contents, like Kafka's kafka-dump-log.sh.")
    d.add_argument("--files", type=_files, action="append", metavar="FILE1,FILE2,...",
                   help="REQUIRED (or give files as arguments): comma separated list of data "
                        "and index log files to be dumped; a directory means its segment files")
    d.add_argument("paths", nargs="*", metavar="FILE", help="more files to dump")
    d.add_argument("--deep-iteration", action="store_true",
                   help="iterate records, not only batches (implied by --print-data-log)")
    d.add_argument("--print-data-log", action="store_true",
                   help="print record keys and values (implied by a decoder option)")
    d.add_argument("--verify-index-only", action="store_true",
                   help="check index entries against the log without printing them")
    d.add_argument("--index-sanity-check", action="store_true",
                   help="only run Kafka's index sanity check (the one a broker runs at startup)")
    d.add_argument("--max-bytes", type=_int, default=INT32_MAX, metavar="SIZE",
                   help="read only the batches within the first SIZE bytes of each .log file")
    d.add_argument("--max-message-size", type=_int, default=5 * 1024 * 1024, metavar="SIZE",
                   help="size of the largest batch, when checking an index (default 5242880)")
    d.add_argument("--skip-record-metadata", action="store_true",
                   help="do not print each record's metadata")
    dec = d.add_mutually_exclusive_group()
    dec.add_argument("--offsets-decoder", action="store_true",
                     help="decode records as __consumer_offsets offset commits and group metadata")
    dec.add_argument("--transaction-log-decoder", action="store_true",
                     help="decode records as __transaction_state transaction metadata")
    d.add_argument("--json", action="store_true",
                   help="one JSON object per line: per batch and, deep, per record")
    d.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    d.set_defaults(func=cmd_dump)

    v = sub.add_parser("verify", help="check every batch and index entry of a log; exit 0 only when clean",
                       description="Walk every batch (CRC, lengths, offsets, magic, attributes) and "
                                   "check every index entry against the log.")
    v.add_argument("path", nargs="+", metavar="PATH",
                   help="a log.dirs folder, a <topic>-<partition> folder or a segment file")
    v.add_argument("--json", action="store_true", help="one JSON object per problem")
    v.add_argument("--deep", action="store_true",
                   help="also decompress and decode every batch's records")
    v.add_argument("--skip-indexes", action="store_true", help="do not check index entries")
    v.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    v.set_defaults(func=cmd_verify)

    r = sub.add_parser("recover", help="truncate logs at their first invalid batch (dry run unless --apply)",
                       description="Follow Kafka's LogSegment.recover: keep the longest valid prefix, "
                                   "truncate at the first invalid batch and rebuild the indexes. "
                                   "Dry run unless --apply; bytes cut are saved beside the segment.")
    r.add_argument("path", nargs="+", metavar="PATH")
    r.add_argument("--apply", action="store_true", help="really truncate and rebuild")
    r.add_argument("--json", action="store_true")
    r.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    r.set_defaults(func=cmd_recover)

    s = sub.add_parser("stats", help="per topic-partition summary: segments, batches, records, bytes, codecs",
                       description="Summarise every topic-partition: segments, batches, records, bytes, "
                                   "codecs, offset and time range, compression ratio.")
    s.add_argument("path", nargs="+", metavar="PATH")
    s.add_argument("--json", action="store_true", help="one JSON object per partition")
    s.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    s.set_defaults(func=cmd_stats)

    rt = sub.add_parser(
        "retention", help="delete segments past retention limits (dry run unless --apply)",
        description="Apply Kafka's deletion rules to partition folders: whole segments, oldest first, "
                    "never the active one; by age (largest timestamp), by partition size, and below "
                    "a log start offset. Dry run unless --apply; deleted files are renamed .deleted "
                    "and removed after --file-delete-delay-ms.")
    rt.add_argument("path", nargs="+", metavar="PATH",
                    help="a log.dirs folder or a <topic>-<partition> folder")
    rt.add_argument("--retention-ms", type=_int, metavar="MS",
                    help="delete segments whose largest timestamp is older than MS (-1: no limit)")
    rt.add_argument("--retention-bytes", type=_int, metavar="SIZE",
                    help="delete the oldest segments while each partition keeps at least SIZE "
                         "bytes (-1: no limit)")
    rt.add_argument("--log-start-offset", type=_int, metavar="N",
                    help="delete segments wholly below offset N")
    rt.add_argument("--now", type=_int, metavar="T",
                    help="the time retention is judged at, in ms since the epoch (default: now)")
    rt.add_argument("--file-delete-delay-ms", type=_int, default=0, metavar="MS",
                    help="leave deleted files renamed .deleted for MS (removed by a later run); "
                         "default 0: remove at once")
    rt.add_argument("--apply", action="store_true", help="really delete")
    rt.add_argument("--json", action="store_true", help="one JSON object per partition")
    rt.set_defaults(func=cmd_retention)

    cp = sub.add_parser(
        "compact", help="keep the latest record per key, as Kafka's log cleaner (dry run unless --apply)",
        description="Compact partition folders as Kafka's log cleaner does for cleanup.policy=compact: "
                    "keep each key's latest record, drop tombstones once --delete-retention-ms has "
                    "passed since a cleaning first kept them, drop aborted transactions and spent "
                    "transaction markers; never the active segment. Records keep their offsets. "
                    "Dry run unless --apply; cleaned segments are swapped in so that a crash at any "
                    "moment leaves a folder that 'recover --apply' (or the next compact) completes.")
    cp.add_argument("path", nargs="+", metavar="PATH",
                    help="a log.dirs folder or a <topic>-<partition> folder")
    cp.add_argument("--delete-retention-ms", type=_int, default=86_400_000, metavar="MS",
                    help="how long tombstones and transaction markers outlive the cleaning that "
                         "first kept them (default 86400000, one day)")
    cp.add_argument("--min-cleanable-dirty-ratio", type=float, default=0.5, metavar="R",
                    help="compact only when the dirty share of the log is above R (default 0.5; "
                         "0 compacts whatever is dirty)")
    cp.add_argument("--min-compaction-lag-ms", type=_int, default=0, metavar="MS",
                    help="leave segments holding records younger than MS uncompacted")
    cp.add_argument("--segment-bytes", type=_int, default=1 << 30, metavar="SIZE",
                    help="largest segment a group of cleaned segments may become (default 1 GiB)")
    cp.add_argument("--dedupe-buffer-size", type=_int, default=128 << 20, metavar="SIZE",
                    help="memory for the key map, as log.cleaner.dedupe.buffer.size "
                         "(default 128 MiB); a smaller map compacts in more passes")
    cp.add_argument("--now", type=_int, metavar="T",
                    help="the time compaction is judged at, in ms since the epoch (default: now)")
    cp.add_argument("--apply", action="store_true", help="really compact")
    cp.add_argument("--json", action="store_true", help="one JSON object per partition")
    cp.set_defaults(func=cmd_compact)

    f = sub.add_parser("find", help="find the batch and record at an offset or timestamp",
                       description="Find the record at an offset, or the first record at or after a "
                                   "timestamp (ms since the epoch), in a partition folder.")
    f.add_argument("path", metavar="PATH", help="a <topic>-<partition> folder (or a log.dirs folder "
                                                "with --partition)")
    g = f.add_mutually_exclusive_group(required=True)
    g.add_argument("--offset", type=_int, metavar="N")
    g.add_argument("--timestamp", type=_int, metavar="T", help="milliseconds since the epoch")
    f.add_argument("--partition", metavar="TOPIC-N",
                   help="with a log.dirs folder: which partition to search")
    f.add_argument("--print-data-log", action="store_true", help="print the record's key and value")
    f.add_argument("--json", action="store_true")
    f.set_defaults(func=cmd_find)
    serve_command.add_parser(sub)
    return p


def cmd_dump(args: argparse.Namespace) -> int:
    # cheap: `kafkawire --help` and usage errors load no readers; each command loads its own
    from kafkawire.cli.dump import DumpOptions, Dumper
    files = [f for group in (args.files or []) for f in group] + list(args.paths)
    if not files:
        raise UsageError("dump needs --files FILE1,FILE2,... (or files as arguments)")
    opts = DumpOptions(
        files=files, deep_iteration=args.deep_iteration, print_data_log=args.print_data_log,
        verify_index_only=args.verify_index_only, index_sanity_check=args.index_sanity_check,
        max_bytes=args.max_bytes, max_message_size=args.max_message_size,
        skip_record_metadata=args.skip_record_metadata, offsets_decoder=args.offsets_decoder,
        transaction_log_decoder=args.transaction_log_decoder, json=args.json,
        progress=False if args.no_progress else None)
    return Dumper(opts, Printer(sys.stdout, json_mode=args.json)).run()


def cmd_verify(args: argparse.Namespace) -> int:
    from kafkawire.cli import commands  # cheap: loaded by the command that runs
    return commands.verify(args.path, json_mode=args.json, progress=not args.no_progress,
                           deep=args.deep, check_indexes=not args.skip_indexes)


def cmd_recover(args: argparse.Namespace) -> int:
    from kafkawire.cli import commands  # cheap: loaded by the command that runs
    return commands.recover(args.path, apply=args.apply, json_mode=args.json,
                            progress=not args.no_progress)


def cmd_retention(args: argparse.Namespace) -> int:
    from kafkawire.cli import commands  # cheap: loaded by the command that runs
    if args.retention_ms is None and args.retention_bytes is None and args.log_start_offset is None:
        raise UsageError("give --retention-ms, --retention-bytes or --log-start-offset")
    if args.file_delete_delay_ms < 0:
        raise UsageError("--file-delete-delay-ms must be >= 0")
    return commands.retention(args.path, retention_ms=args.retention_ms,
                              retention_bytes=args.retention_bytes,
                              log_start_offset=args.log_start_offset, now_ms=args.now,
                              file_delete_delay_ms=args.file_delete_delay_ms, apply=args.apply,
                              json_mode=args.json)


def cmd_compact(args: argparse.Namespace) -> int:
    from kafkawire.cli import commands  # cheap: loaded by the command that runs
    if args.delete_retention_ms < 0:
        raise UsageError("--delete-retention-ms must be >= 0")
    if not 0.0 <= args.min_cleanable_dirty_ratio <= 1.0:
        raise UsageError("--min-cleanable-dirty-ratio must lie between 0 and 1")
    if args.dedupe_buffer_size < 24 or args.segment_bytes < 64:
        raise UsageError("--dedupe-buffer-size must be at least 24 and --segment-bytes at least 64")
    return commands.compact(args.path, apply=args.apply, json_mode=args.json, now_ms=args.now,
                            delete_retention_ms=args.delete_retention_ms,
                            min_cleanable_dirty_ratio=args.min_cleanable_dirty_ratio,
                            min_compaction_lag_ms=args.min_compaction_lag_ms,
                            segment_bytes=args.segment_bytes,
                            dedupe_buffer_size=args.dedupe_buffer_size)


def cmd_stats(args: argparse.Namespace) -> int:
    from kafkawire.cli import commands  # cheap: loaded by the command that runs
    return commands.stats(args.path, json_mode=args.json, progress=not args.no_progress)


def cmd_find(args: argparse.Namespace) -> int:
    from kafkawire.cli import commands  # cheap: loaded by the command that runs
    return commands.find(args.path, offset=args.offset, timestamp=args.timestamp,
                         partition=args.partition, print_data=args.print_data_log,
                         json_mode=args.json)


class UsageError(Exception):
    """Bad command-line usage found after parsing."""


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``kafkawire`` command; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as e:  # --help, --version, usage errors
        return int(e.code) if isinstance(e.code, int) else (0 if e.code is None else 2)
    try:
        status: int = args.func(args)
        return status
    except BrokenPipeError:
        # the reader went away (`kafkawire dump ... | head`): stop quietly, like a killed pipe
        try:
            import os
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 141
    except UsageError as e:
        sys.stderr.write(f"kafkawire {args.command}: error: {e}\n")
        return 2
    except (KafkaWireError, OSError) as e:
        sys.stderr.write(f"kafkawire: error: {_describe(e)}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("kafkawire: interrupted\n")
        return 130


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror + (f": {e.filename}" if e.filename else "")
    return str(e)
