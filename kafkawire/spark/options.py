"""Parse and validate the data source's options.

Spark hands a data source its options as strings with lower-cased keys.  The
names and meanings follow Spark's Kafka source where they apply (subscribe,
startingOffsets, ...); a few are kafkawire's own (isolation, maxBytesPerTask,
pushFilters, ...).  Anything unknown or contradictory is an error raised here,
on the driver, before any task runs: a typo must never read as "no rows".
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple, Union

from kafkawire.errors import KafkaWireError, StorageError

TopicPartition = Tuple[str, int]
#: startingOffsets / endingOffsets: "earliest", "latest", or an offset per topic-partition
#: (EARLIEST, LATEST or >= 0)
OffsetSpec = Union[str, Dict[TopicPartition, int]]
#: The ...Timestamp options: none, one timestamp for every partition, or one per topic-partition
TimestampSpec = Union[None, int, Dict[TopicPartition, int]]

EARLIEST = -2
LATEST = -1

log = logging.getLogger("kafkawire.spark")


class OptionError(KafkaWireError, ValueError):
    """An option the kafkawire data source cannot accept (unknown, malformed or contradictory)."""


#: option (lower-cased) -> one-line help, in the order the README lists them.
KNOWN = {
    "path": "log.dirs folder, topic-partition folder, glob, or comma-separated list of them",
    "paths": "(set by Spark for load([...]))",
    "subscribe": "comma-separated topics",
    "subscribepattern": "regular expression matched against whole topic names",
    "assign": 'JSON {"topic":[0,1]}',
    "startingoffsets": 'earliest | latest | JSON {"topic":{"0":23,"1":-2}} (-2 earliest, -1 latest)',
    "endingoffsets": 'latest | JSON {"topic":{"0":50,"1":-1}}',
    "startingtimestamp": "epoch ms for every partition",
    "endingtimestamp": "epoch ms for every partition",
    "startingoffsetsbytimestamp": 'JSON {"topic":{"0":1700000000000}}',
    "endingoffsetsbytimestamp": 'JSON {"topic":{"0":1700000000000}}',
    "startingoffsetsbytimestampstrategy": "error | latest (no offset at/after the timestamp)",
    "includeheaders": "true | false",
    "minpartitions": "minimum number of Spark tasks",
    "maxrecordsperpartition": "maximum records (offsets) per Spark task",
    "maxoffsetspertrigger": "streaming: maximum offsets per micro-batch",
    "minoffsetspertrigger": "streaming: wait for at least this many offsets (up to maxTriggerDelay)",
    "maxtriggerdelay": "streaming: longest wait for minOffsetsPerTrigger (e.g. 15m, 30s; default 15m)",
    "isolation": "read_uncommitted | read_committed",
    "kafka.isolation.level": "alias of isolation",
    "failondataloss": "true | false: false skips offsets that are gone or out of range, with a warning",
    "skipcorruptdata": "true | false: skip damaged batches up to the next valid index entry, logged at WARN",
    "maxbytespertask": "largest byte range of .log files one task reads (e.g. 64m)",
    "recordsperbatch": "rows per Arrow batch a task decodes at most (10000..100000)",
    "pushfilters": "true | false: accept Spark's pushed filters (off by default, see README)",
    "verifycrc": "true | false: check every batch's CRC while reading",
    "storage_options": 'JSON object of fsspec settings for URL paths, e.g. {"anon": true}',
}

#: Options of Spark's Kafka source that only mean something to a live cluster: accepted, so a
#: job runs with only the format name changed, and ignored (logged once).  Every ``kafka.*``
#: consumer setting is one, except ``kafka.isolation.level``.
CLUSTER_ONLY = ("groupidprefix", "fetchoffset.numretries", "fetchoffset.retryintervalms",
                "kafkaconsumer.polltimeoutms")

#: Storage settings for URL paths, in Hadoop's names (see kafkawire.log.storage.storage_options);
#: any other ``fs.*`` option is accepted (Hadoop tuning a job may carry) and has no effect.
STORAGE_PREFIXES = ("fs.", "google.cloud.auth.")


@dataclass
class ReadOptions:
    """Validated options; offsets are resolved against the files later (planning)."""

    paths: List[str]
    subscribe: Optional[List[str]] = None
    subscribe_pattern: Optional[str] = None
    assign: Optional[List[TopicPartition]] = None
    starting: OffsetSpec = "earliest"
    ending: OffsetSpec = "latest"
    starting_ts: TimestampSpec = None
    ending_ts: TimestampSpec = None
    starting_ts_strategy: str = "error"
    include_headers: bool = False
    min_partitions: Optional[int] = None
    max_records_per_partition: Optional[int] = None
    max_offsets_per_trigger: Optional[int] = None
    min_offsets_per_trigger: Optional[int] = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    isolation: str = "read_uncommitted"
    fail_on_data_loss: bool = True
    skip_corrupt_data: bool = False
    max_bytes_per_task: Optional[int] = None   # None: Spark's split rule (see planning.task_bytes)
    records_per_batch: int = 65536
    push_filters: bool = False
    verify_crc: bool = False
    storage_options: Dict[str, str] = field(default_factory=dict)   # fs.* and storage_options
    raw: Dict[str, str] = field(default_factory=dict)


def parse_options(options: Mapping[str, str], *, streaming: Optional[bool] = False) -> ReadOptions:
    """Validate Spark's option map (keys lower-cased here too, values strings).

    ``streaming=None`` (schema time: batch or stream is not known yet) skips
    the checks that depend on it.
    """
    opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in options.items()}
    storage = {k: v for k, v in opts.items() if k.startswith(STORAGE_PREFIXES) or k == "storage_options"}
    ignored = sorted(k for k in opts if k not in KNOWN and (k.startswith("kafka.") or k in CLUSTER_ONLY))
    unknown = sorted(set(opts) - set(KNOWN) - set(storage) - set(ignored))
    if unknown:
        raise OptionError(
            f"unknown option(s) for format 'kafkawire': {', '.join(unknown)}; "
            f"known options: {', '.join(k for k in KNOWN if k != 'paths')}, "
            "plus Spark's Kafka-source options for a live cluster (kafka.*, groupIdPrefix, "
            "fetchOffset.*, kafkaConsumer.pollTimeoutMs), which are ignored")
    _log_ignored(ignored)
    ro = ReadOptions(paths=_paths(opts), raw=opts, storage_options=storage)
    if not ro.paths:
        raise OptionError("no path given: use spark.read.format('kafkawire').load('/path/to/log.dirs')")
    _check_storage(ro)

    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(chosen) > 1:
        raise OptionError(f"options {' and '.join(chosen)} exclude each other; give only one of "
                          "subscribe, subscribePattern or assign (or none for every topic)")
    if "subscribe" in opts:
        topics = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
        if not topics:
            raise OptionError("option subscribe is empty: give comma-separated topic names")
        ro.subscribe = topics
    if "subscribepattern" in opts:
        try:
            re.compile(opts["subscribepattern"])
        except re.error as exc:
            raise OptionError(f"option subscribePattern is not a valid regular expression: {exc}") from None
        ro.subscribe_pattern = opts["subscribepattern"]
    if "assign" in opts:
        ro.assign = _parse_assign(opts["assign"])

    if "startingoffsets" in opts:
        ro.starting = _parse_offsets("startingOffsets", opts["startingoffsets"])
    elif streaming is True:
        ro.starting = "latest"
    if "endingoffsets" in opts:
        if streaming is True:
            raise OptionError("endingOffsets applies to batch reads only; a streaming read never ends")
        ro.ending = _parse_offsets("endingOffsets", opts["endingoffsets"])
    if streaming is False:
        if ro.starting == "latest" or (isinstance(ro.starting, dict) and LATEST in ro.starting.values()):
            raise OptionError("startingOffsets latest (-1) is not allowed for batch reads "
                              "(it would read nothing); use earliest, offsets, or a timestamp")
    if ro.ending == "earliest" or (isinstance(ro.ending, dict) and EARLIEST in ro.ending.values()):
        raise OptionError("endingOffsets earliest (-2) is not allowed (it would read nothing); "
                          "use latest or explicit offsets")

    ro.starting_ts = _parse_ts(opts, "startingtimestamp", "startingoffsetsbytimestamp")
    ro.ending_ts = _parse_ts(opts, "endingtimestamp", "endingoffsetsbytimestamp")
    if streaming is True and ro.ending_ts is not None:
        raise OptionError("endingTimestamp / endingOffsetsByTimestamp apply to batch reads only")
    if isinstance(ro.starting_ts, int) and isinstance(ro.ending_ts, int) and ro.starting_ts > ro.ending_ts:
        raise OptionError(f"startingTimestamp {ro.starting_ts} is after endingTimestamp {ro.ending_ts}: "
                          "the range is empty; swap them or fix the values")
    if isinstance(ro.starting, dict) and isinstance(ro.ending, dict):
        for tp, start in ro.starting.items():
            end = ro.ending.get(tp)
            if start >= 0 and end is not None and end >= 0 and start > end:
                raise OptionError(f"startingOffsets {start} is after endingOffsets {end} for "
                                  f"{tp[0]}-{tp[1]}: the range is empty; fix the offsets")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError("startingOffsetsByTimestampStrategy must be error or latest")
    ro.starting_ts_strategy = strategy

    ro.include_headers = bool_option(opts, "includeheaders", False)
    ro.min_partitions = int_option(opts, "minpartitions", minimum=1)
    ro.max_records_per_partition = int_option(opts, "maxrecordsperpartition", minimum=1)
    ro.max_offsets_per_trigger = int_option(opts, "maxoffsetspertrigger", minimum=1)
    ro.min_offsets_per_trigger = int_option(opts, "minoffsetspertrigger", minimum=1)
    delay = _duration(opts, "maxtriggerdelay")
    if delay is not None:
        ro.max_trigger_delay_ms = delay
    for key in ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"):
        if key in opts and streaming is False:
            raise OptionError(f"{_NAMES[key]} applies to streaming reads only "
                              "(spark.readStream); for batch reads use endingOffsets")
    if (ro.min_offsets_per_trigger is not None and ro.max_offsets_per_trigger is not None
            and ro.min_offsets_per_trigger > ro.max_offsets_per_trigger):
        raise OptionError(f"minOffsetsPerTrigger ({ro.min_offsets_per_trigger}) is larger than "
                          f"maxOffsetsPerTrigger ({ro.max_offsets_per_trigger})")
    iso = opts.get("isolation", opts.get("kafka.isolation.level", "read_uncommitted")).strip().lower()
    if iso not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"isolation must be read_uncommitted or read_committed, not {iso!r}")
    ro.isolation = iso
    ro.fail_on_data_loss = bool_option(opts, "failondataloss", True)
    ro.skip_corrupt_data = bool_option(opts, "skipcorruptdata", False)
    size = size_option(opts, "maxbytespertask")
    if size is not None:
        ro.max_bytes_per_task = size
    rows = int_option(opts, "recordsperbatch", minimum=1)
    if rows is not None:
        if not 10_000 <= rows <= 100_000:
            raise OptionError("recordsPerBatch must be between 10000 and 100000 (rows per Arrow batch)")
        ro.records_per_batch = rows
    ro.push_filters = bool_option(opts, "pushfilters", False)
    ro.verify_crc = bool_option(opts, "verifycrc", False)
    return ro


_NAMES = {"maxoffsetspertrigger": "maxOffsetsPerTrigger", "minoffsetspertrigger": "minOffsetsPerTrigger",
          "maxtriggerdelay": "maxTriggerDelay"}
_logged: Set[Tuple[str, ...]] = set()


def _log_ignored(keys: List[str]) -> None:
    """One log line per process for each set of cluster-only options."""
    key = tuple(keys)
    if keys and key not in _logged:
        _logged.add(key)
        log.info("kafkawire reads log files, not a cluster: ignoring %s", ", ".join(keys))


_DURATION_UNITS = {"ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                   "d": 86_400_000}


def _duration(opts: Dict[str, str], key: str) -> Optional[int]:
    """Milliseconds from Spark's duration syntax (``15m``, ``30s``, ``500ms``; bare numbers are ms)."""
    if key not in opts:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", opts[key].lower())
    if not m or (m.group(2) and m.group(2) not in _DURATION_UNITS):
        raise OptionError(f"option {_NAMES.get(key, key)} must be a duration like 15m, 30s or 500ms, "
                          f"not {opts[key]!r}")
    return int(m.group(1)) * _DURATION_UNITS.get(m.group(2) or "ms", 1)


def _check_storage(ro: ReadOptions) -> None:
    """URL schemes and storage settings must be usable: say so now, not in a task."""
    # cheap: the data source module PySpark imports for every session (through this one)
    # loads no log readers
    from kafkawire.log.storage import PROTOCOLS, storage_options, url_scheme
    for p in ro.paths:
        scheme = url_scheme(p)
        if scheme is None:
            continue
        if scheme not in PROTOCOLS:
            raise OptionError(f"path {p!r}: unsupported URL scheme {scheme}://; kafkawire reads "
                              f"{', '.join(s + '://' for s in PROTOCOLS)} and local paths")
        try:
            storage_options(PROTOCOLS[scheme], ro.storage_options)
        except StorageError as exc:
            raise OptionError(str(exc)) from None


def _paths(opts: Dict[str, str]) -> List[str]:
    out: List[str] = []
    if opts.get("paths"):
        try:
            vals = json.loads(opts["paths"])
        except ValueError:
            vals = [opts["paths"]]
        out.extend(str(v) for v in (vals if isinstance(vals, list) else [vals]))
    if opts.get("path"):
        raw = opts["path"].strip()
        if raw.startswith("["):
            try:
                out.extend(str(v) for v in json.loads(raw))
            except ValueError:
                raise OptionError("option path looks like a JSON list but is not valid JSON") from None
        else:
            out.extend(p.strip() for p in raw.split(",") if p.strip())
    return out


def _json(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise OptionError(f"option {name} is not valid JSON ({exc}): {text!r}") from None


def _parse_assign(text: str) -> List[TopicPartition]:
    data = _json("assign", text)
    if not isinstance(data, dict) or not data:
        raise OptionError('option assign must be a JSON object like {"topicA":[0,1],"topicB":[2]}')
    out: List[TopicPartition] = []
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and p >= 0 for p in parts):
            raise OptionError(f"option assign: partitions of {topic!r} must be a list of ints >= 0")
        out.extend((str(topic), int(p)) for p in parts)
    return out


def _per_partition(name: str, text: str) -> Dict[TopicPartition, int]:
    data = _json(name, text)
    if not isinstance(data, dict):
        raise OptionError(f'option {name} must be a JSON object like {{"topic":{{"0":23}}}}')
    out: Dict[TopicPartition, int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(f'option {name}: value of {topic!r} must be an object like {{"0":23}}')
        for p, v in parts.items():
            try:
                out[(str(topic), int(p))] = int(v)
            except (TypeError, ValueError):
                raise OptionError(f"option {name}: {topic}-{p} must map an integer partition "
                                  f"to an integer, got {p!r}: {v!r}") from None
    return out


def _parse_offsets(name: str, text: str) -> OffsetSpec:
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return word
    if not word.startswith("{"):
        raise OptionError(f"option {name} must be earliest, latest or JSON per topic-partition, "
                          f"not {text!r}")
    offsets = _per_partition(name, text)
    for tp, off in offsets.items():
        if off < -2:
            raise OptionError(f"option {name}: offset {off} for {tp[0]}-{tp[1]} is invalid "
                              "(use >= 0, -2 for earliest, -1 for latest)")
    return offsets


def _parse_ts(opts: Dict[str, str], single: str, per: str) -> TimestampSpec:
    if single in opts:
        try:
            ts = int(opts[single].strip())
        except ValueError:
            raise OptionError(f"option {single} must be epoch milliseconds, not {opts[single]!r}") from None
        if ts < 0:
            raise OptionError(f"option {single} must be >= 0 (epoch milliseconds)")
        return ts
    if per in opts:
        out = _per_partition(per, opts[per])
        bad = [tp for tp, ts in out.items() if ts < 0]
        if bad:
            raise OptionError(f"option {per}: timestamps must be >= 0 (epoch ms), see {bad[0]}")
        return out
    return None


def bool_option(opts: Dict[str, str], key: str, default: bool) -> bool:
    """Option ``key`` as true/false (also 1/0, yes/no); ``default`` when it is not given."""
    if key not in opts:
        return default
    v = opts[key].strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise OptionError(f"option {key} must be true or false, not {opts[key]!r}")


def int_option(opts: Dict[str, str], key: str, *, minimum: int) -> Optional[int]:
    """Option ``key`` as an integer of at least ``minimum``; None when it is not given."""
    if key not in opts:
        return None
    try:
        v = int(opts[key].strip())
    except ValueError:
        raise OptionError(f"option {key} must be an integer, not {opts[key]!r}") from None
    if v < minimum:
        raise OptionError(f"option {key} must be >= {minimum}, not {v}")
    return v


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30}


def size_option(opts: Dict[str, str], key: str) -> Optional[int]:
    """Option ``key`` as a byte count (``65536``, ``64k``, ``64m``, ``1g``; at least 4k)."""
    if key not in opts:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", opts[key].lower())
    if not m or m.group(2) not in _UNITS:
        raise OptionError(f"option {key} must be a size like 65536, 64k, 64m or 1g, not {opts[key]!r}")
    v = int(m.group(1)) * _UNITS[m.group(2)]
    if v < 4096:
        raise OptionError(f"option {key} must be at least 4k")
    return v
