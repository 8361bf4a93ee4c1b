"""``kafkawire serve``: run a broker over log directories until SIGTERM or SIGINT."""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Any, Dict, List, Optional

__all__ = ["add_parser", "serve"]


def _config(items: Optional[List[str]]) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"--config takes NAME=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def add_parser(sub: Any) -> None:
    """Add the ``serve`` command to the ``kafkawire`` parser's subcommands."""
    s = sub.add_parser(
        "serve", help="run a single-node Kafka-compatible broker over log directories",
        description="Serve log directories to any Kafka client: topics are <topic>-<partition> "
                    "folders in Kafka's own layout and format. SIGTERM or SIGINT stops it "
                    "cleanly (requests in progress answered, logs flushed).")
    s.add_argument("--log-dirs", required=True, action="append", metavar="DIR[,DIR...]",
                   help="log directories to serve (created if missing, unless --read-only)")
    s.add_argument("--listen", default="127.0.0.1:9092", metavar="HOST:PORT",
                   help="address to listen on (default 127.0.0.1:9092; port 0 picks a free one); "
                        "--config listeners=... replaces it with Kafka's listeners, e.g. "
                        "PLAINTEXT://:9092,SASL_SSL://:9093")
    s.add_argument("--advertised", metavar="HOST:PORT",
                   help="address clients are told to connect to (default: the listening one)")
    s.add_argument("--read-only", action="store_true",
                   help="serve existing folders as they are and refuse every write")
    s.add_argument("--config", action="append", metavar="NAME=VALUE",
                   help="a Kafka broker setting, e.g. num.partitions=3, log.segment.bytes=1048576, "
                        "ssl.keystore.location=server.pem or sasl.user.alice=SECRET (repeatable)")
    s.add_argument("--log-level", default="INFO",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="logging level (default INFO)")
    s.set_defaults(func=serve)


def serve(args: argparse.Namespace) -> int:
    """Run the broker in the foreground; returns the exit status."""
    from kafkawire.server.broker import Broker  # cheap: other commands never load the broker
    logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    dirs = [d for item in args.log_dirs for d in item.split(",") if d]
    try:
        broker = Broker(dirs, listen=args.listen, advertised=args.advertised,
                        read_only=args.read_only, config=_config(args.config))
    except (argparse.ArgumentTypeError, ValueError) as exc:
        sys.stderr.write(f"kafkawire serve: error: {exc}\n")
        return 2
    done = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        done.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        broker.start()
        listeners = broker.listeners
        if list(listeners) != ["PLAINTEXT"]:
            for name, address in listeners.items():
                sys.stderr.write(f"kafkawire serve: listener {name} on {address}\n")
        sys.stderr.write(f"kafkawire serve: listening on {broker.bootstrap_servers}\n")
        sys.stderr.flush()
        while not done.wait(0.5):
            if not broker.running:
                sys.stderr.write("kafkawire serve: the broker stopped unexpectedly\n")
                return 1
    finally:
        broker.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
