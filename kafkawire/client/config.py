"""Client settings: Kafka's configuration keys as snake_case keyword arguments.

Each kind of client (``"producer"``, ``"consumer"``) has a table of the
settings it understands: the common connection and security keys plus its
own.  :func:`resolve` checks a user's keyword arguments against the table:
unknown names raise :class:`ConfigError` naming the setting (and the closest
known one), values are validated, and missing ones take their defaults.
``linger_ms=5`` means what ``linger.ms=5`` means to Kafka's Java client.

Another module adds its kind's table with :func:`register`, e.g.::

    register("consumer", {**COMMON, "group_id": Setting(None, optional(str_)), ...})
"""
from __future__ import annotations

import difflib
import ssl
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Tuple

from kafkawire.client.assignors import get_assignor
from kafkawire.compression import CODECS
from kafkawire.errors import KafkaWireError

__all__ = ["ConfigError", "Setting", "Config", "COMMON", "PRODUCER", "CONSUMER", "register", "resolve",
           "settings_of", "int_range", "one_of", "bool_", "str_", "optional", "callable_",
           "SECURITY_PROTOCOLS", "SASL_MECHANISMS"]


class ConfigError(KafkaWireError, ValueError):
    """A setting that is unknown, or a value a setting cannot take."""


Check = Callable[[str, Any], Any]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


# --------------------------------------------------------------- validators
def int_range(lo: Optional[int] = None, hi: Optional[int] = None) -> Check:
    """An integer within [lo, hi] (bools refused)."""
    def check(name: str, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            try:
                if isinstance(v, bool) or float(v) != int(v):
                    raise ValueError
                v = int(v)
            except (TypeError, ValueError):
                raise ConfigError(f"{name} must be an integer, not {v!r}") from None
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            bounds = f"between {lo} and {hi}" if lo is not None and hi is not None else \
                f"at least {lo}" if lo is not None else f"at most {hi}"
            raise ConfigError(f"{name} must be {bounds}, not {v}")
        return v
    return check


def one_of(*choices: Any, aliases: Optional[Mapping[Any, Any]] = None) -> Check:
    """One of ``choices`` (strings compared case-insensitively); ``aliases`` map to a choice."""
    aliases = dict(aliases or {})

    def check(name: str, v: Any) -> Any:
        if v in aliases:
            return aliases[v]
        for c in choices:
            if v == c or (isinstance(v, str) and isinstance(c, str) and v.lower() == c.lower()):
                return c
        raise ConfigError(f"{name} must be one of {', '.join(map(repr, choices))}, not {v!r}")
    return check


def bool_(name: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    raise ConfigError(f"{name} must be True or False, not {v!r}")


def str_(name: str, v: Any) -> str:
    if not isinstance(v, str):
        raise ConfigError(f"{name} must be a string, not {type(v).__name__}")
    return v


def callable_(name: str, v: Any) -> Any:
    if not callable(v):
        raise ConfigError(f"{name} must be callable, not {type(v).__name__}")
    return v


def optional(check: Check) -> Check:
    """``check``, or None."""
    def opt(name: str, v: Any) -> Any:
        return None if v is None else check(name, v)
    return opt


def _ssl_context(name: str, v: Any) -> Any:
    if v is not None and not isinstance(v, ssl.SSLContext):
        raise ConfigError(f"{name} must be an ssl.SSLContext, not {type(v).__name__}")
    return v


@dataclass(frozen=True)
class Setting:
    """A setting's default and the check its value passes (which may normalise it)."""
    default: Any
    check: Check
    doc: str = ""


# Connection, retry and security settings every client kind shares.
COMMON: Dict[str, Setting] = {
    "client_id": Setting("kafkawire", str_, "sent with every request; shows in broker logs and quotas"),
    "request_timeout_ms": Setting(30_000, int_range(1), "how long to wait for one response"),
    "socket_connection_setup_timeout_ms": Setting(10_000, int_range(1),
                                                  "how long one TCP (+TLS) connect may take"),
    "metadata_max_age_ms": Setting(300_000, int_range(0), "refresh metadata at least this often"),
    "retry_backoff_ms": Setting(100, int_range(0), "pause before retrying a failed request"),
    "retry_backoff_max_ms": Setting(1_000, int_range(0), "cap of the growing retry pause"),
    "reconnect_backoff_ms": Setting(50, int_range(0), "first pause before reconnecting to a broker"),
    "reconnect_backoff_max_ms": Setting(1_000, int_range(0),
                                        "cap of the doubling pause between reconnects"),
    "max_frame_size": Setting(104_857_600, int_range(1024),
                              "largest response accepted from a broker"),
    "allow_auto_create_topics": Setting(True, bool_, "let metadata requests create topics"),
    "security_protocol": Setting("PLAINTEXT", one_of(*SECURITY_PROTOCOLS)),
    "ssl_context": Setting(None, _ssl_context, "a ready ssl.SSLContext (overrides ssl_* files)"),
    "ssl_cafile": Setting(None, optional(str_), "CA bundle that signed the brokers' certificates"),
    "ssl_certfile": Setting(None, optional(str_), "client certificate (PEM) for mutual TLS"),
    "ssl_keyfile": Setting(None, optional(str_), "the client certificate's private key (PEM)"),
    "ssl_password": Setting(None, optional(str_), "password of an encrypted ssl_keyfile"),
    "ssl_check_hostname": Setting(True, bool_, "check the broker's certificate names its host"),
    "sasl_mechanism": Setting("PLAIN", one_of(*SASL_MECHANISMS)),
    "sasl_plain_username": Setting(None, optional(str_), "user for PLAIN and SCRAM"),
    "sasl_plain_password": Setting(None, optional(str_), "password for PLAIN and SCRAM"),
    "sasl_oauth_token_provider": Setting(None, optional(callable_),
                                         "OAUTHBEARER: a callable returning a token string, or "
                                         "(token, {extension: value})"),
}

_ACKS_ALIASES = {"all": -1, "-1": -1, "0": 0, "1": 1, -1: -1, 0: 0, 1: 1}


def _acks(name: str, v: Any) -> int:
    key = v.lower() if isinstance(v, str) else v
    if isinstance(v, bool) or key not in _ACKS_ALIASES:
        raise ConfigError(f"{name} must be 0, 1, -1 or 'all', not {v!r}")
    return _ACKS_ALIASES[key]


def _compression(name: str, v: Any) -> str:
    if v is None:
        return "none"
    if not isinstance(v, str) or v.lower() not in CODECS:
        raise ConfigError(f"{name} must be one of {', '.join(CODECS)}, not {v!r}")
    return v.lower()


def _partitioner(name: str, v: Any) -> Any:
    if callable(v):
        return v
    return one_of("default", "round_robin", aliases={"round-robin": "round_robin",
                                                     "murmur2_random": "default",
                                                     "consistent_random": "default"})(name, v)


PRODUCER: Dict[str, Setting] = {
    **COMMON,
    "acks": Setting(-1, _acks, "0: no answer, 1: the leader wrote it, 'all': every in-sync replica"),
    "linger_ms": Setting(5, int_range(0), "wait up to this long for more records per batch"),
    # Kafka's Java producer closes batches at 16 KiB; each batch costs a Python client far more
    # than it costs Java, so the default is librdkafka's order of magnitude instead.
    "batch_size": Setting(262_144, int_range(0), "bytes of records that close a batch"),
    "buffer_memory": Setting(33_554_432, int_range(1), "bytes of records waiting to be sent"),
    "max_block_ms": Setting(60_000, int_range(0),
                            "how long send() may block on a full buffer or missing metadata"),
    "compression_type": Setting("none", _compression),
    "compression_level": Setting(None, optional(int_range())),
    "enable_idempotence": Setting(True, bool_, "no duplicates or reordering on retry"),
    "max_in_flight_requests_per_connection": Setting(5, int_range(1)),
    "retries": Setting(2_147_483_647, int_range(0)),
    "delivery_timeout_ms": Setting(120_000, int_range(1),
                                   "give up on a record this long after send()"),
    "max_request_size": Setting(1_048_576, int_range(1)),
    "partitioner": Setting("default", _partitioner,
                           "'default' (murmur2 keys, sticky keyless), 'round_robin' or a callable "
                           "partition(key, num_partitions) -> int"),
    "partitioner_ignore_keys": Setting(False, bool_),
    "key_serializer": Setting(None, optional(callable_)),
    "value_serializer": Setting(None, optional(callable_)),
    "on_delivery": Setting(None, optional(callable_),
                           "called as on_delivery(error, metadata) for every record"),
    "transactional_id": Setting(None, optional(str_)),
    "transaction_timeout_ms": Setting(60_000, int_range(1)),
}

def _strategies(name: str, v: Any) -> Tuple[Any, ...]:
    """Assignor names ("range", "roundrobin", "cooperative-sticky"), comma-separated or a list."""
    items = [s.strip() for s in v.split(",")] if isinstance(v, str) else \
        list(v) if isinstance(v, (list, tuple)) else [v]
    if not items:
        raise ConfigError(f"{name} needs at least one assignor")
    try:
        return tuple(get_assignor(s) and s for s in items)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None


CONSUMER: Dict[str, Setting] = {
    **COMMON,
    "group_instance_id": Setting(None, optional(str_),
                                 "a stable member name: static membership, no rebalance on restart"),
    "client_rack": Setting(None, optional(str_), "the rack this consumer runs in"),
    "session_timeout_ms": Setting(45_000, int_range(1),
                                  "a member silent this long is removed from the group"),
    "heartbeat_interval_ms": Setting(3_000, int_range(1), "how often the member heartbeats"),
    "max_poll_interval_ms": Setting(300_000, int_range(1),
                                    "a member that does not poll this long leaves the group"),
    "max_poll_records": Setting(500, int_range(1), "records one poll() returns at most"),
    "partition_assignment_strategy": Setting(("range", "cooperative-sticky"), _strategies,
                                             "assignors offered to the group, preferred first"),
    "auto_offset_reset": Setting("latest", one_of("earliest", "latest", "none"),
                                 "where to start without a committed offset"),
    "enable_auto_commit": Setting(True, bool_, "commit positions every auto_commit_interval_ms"),
    "auto_commit_interval_ms": Setting(5_000, int_range(0)),
    "isolation_level": Setting("read_uncommitted", one_of("read_uncommitted", "read_committed"),
                               "read_committed hides aborted and open transactions"),
    "fetch_min_bytes": Setting(1, int_range(0), "a fetch waits for at least this much data"),
    "fetch_max_wait_ms": Setting(500, int_range(0), "...but no longer than this"),
    "fetch_max_bytes": Setting(52_428_800, int_range(1), "bytes one fetch returns at most"),
    "max_partition_fetch_bytes": Setting(1_048_576, int_range(1),
                                         "bytes per partition one fetch returns at most"),
    "check_crcs": Setting(False, bool_, "verify each batch's CRC-32C"),
    "exclude_internal_topics": Setting(True, bool_, "patterns never match internal topics"),
    "key_deserializer": Setting(None, optional(callable_)),
    "value_deserializer": Setting(None, optional(callable_)),
    "default_api_timeout_ms": Setting(60_000, int_range(1),
                                      "timeout of commit, committed, position, offsets_for_times"),
}

_TABLES: Dict[str, Dict[str, Setting]] = {"producer": PRODUCER, "consumer": CONSUMER}


def register(kind: str, table: Mapping[str, Setting]) -> None:
    """Make ``kind``'s settings known (replacing an earlier table of that kind)."""
    _TABLES[kind] = dict(table)


def settings_of(kind: str) -> Dict[str, Setting]:
    try:
        return _TABLES[kind]
    except KeyError:
        raise ConfigError(f"no settings table for a {kind!r} client") from None


class Config(Mapping[str, Any]):
    """Resolved settings: every key of the kind's table, read as ``cfg.linger_ms`` or ``cfg["linger_ms"]``."""

    def __init__(self, kind: str, values: Dict[str, Any]) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"{self.kind} has no setting {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("settings are read-only once resolved")

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shown = {k: ("***" if "password" in k and v is not None else v)
                 for k, v in self._values.items()}
        return f"Config({self.kind!r}, {shown})"


def _unknown(kind: str, name: str, table: Mapping[str, Setting]) -> ConfigError:
    guess = name.replace(".", "_").replace("-", "_").lower()
    if guess in table and guess != name:
        hint = f"; did you mean {guess!r}? (settings use snake_case)"
    else:
        close = difflib.get_close_matches(guess, list(table), n=1, cutoff=0.7)
        hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"unknown {kind} setting {name!r}{hint}")


def resolve(kind: str, given: Mapping[str, Any]) -> Config:
    """Check ``given`` against ``kind``'s table and fill in the defaults."""
    table = settings_of(kind)
    values: Dict[str, Any] = {}
    for name, value in given.items():
        setting = table.get(name)
        if setting is None:
            raise _unknown(kind, name, table)
        values[name] = setting.check(name, value)
    for name, setting in table.items():
        if name not in values:
            values[name] = setting.default
    _cross_check(kind, values)
    return Config(kind, values)


def _cross_check(kind: str, v: Dict[str, Any]) -> None:
    proto = v.get("security_protocol", "PLAINTEXT")
    if proto.startswith("SASL"):
        mech = v.get("sasl_mechanism")
        if mech == "OAUTHBEARER":
            if v.get("sasl_oauth_token_provider") is None:
                raise ConfigError("sasl_mechanism='OAUTHBEARER' needs sasl_oauth_token_provider, "
                                  "a callable returning the token")
        elif v.get("sasl_plain_username") is None or v.get("sasl_plain_password") is None:
            raise ConfigError(f"sasl_mechanism={mech!r} needs sasl_plain_username and "
                              "sasl_plain_password")
    if kind == "producer":
        if v["enable_idempotence"] or v["transactional_id"] is not None:
            what = "transactional_id" if v["transactional_id"] is not None else \
                "enable_idempotence=True"
            if v["acks"] != -1:
                raise ConfigError(f"{what} needs acks='all' (got acks={v['acks']}); set "
                                  "enable_idempotence=False to use fewer acks")
            if v["max_in_flight_requests_per_connection"] > 5:
                raise ConfigError(f"{what} allows at most 5 max_in_flight_requests_per_connection, "
                                  f"not {v['max_in_flight_requests_per_connection']}")
        if v["transactional_id"] is not None and not v["enable_idempotence"]:
            raise ConfigError("transactional_id needs enable_idempotence=True")


def connection_kwargs(cfg: Mapping[str, Any]) -> Dict[str, Any]:
    """The keyword arguments of :class:`kafkawire.client.Client` taken from resolved settings."""
    keys = ("client_id", "request_timeout_ms", "metadata_max_age_ms", "retry_backoff_ms",
            "reconnect_backoff_ms", "reconnect_backoff_max_ms", "max_frame_size",
            "allow_auto_create_topics", "security_protocol", "ssl_context", "ssl_cafile",
            "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_check_hostname",
            "sasl_mechanism", "sasl_plain_username", "sasl_plain_password",
            "sasl_oauth_token_provider")
    out = {k: cfg[k] for k in keys if k in cfg}
    if "socket_connection_setup_timeout_ms" in cfg:
        out["connect_timeout_ms"] = cfg["socket_connection_setup_timeout_ms"]
    return out


def describe(kind: str) -> Tuple[Tuple[str, Any, str], ...]:
    """``(name, default, doc)`` rows of a kind's settings, for documentation."""
    return tuple((n, s.default, s.doc) for n, s in settings_of(kind).items())
