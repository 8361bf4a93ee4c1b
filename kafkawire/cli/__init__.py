"""The ``kafkawire`` command: ``dump`` (like kafka-dump-log.sh), ``verify``, ``recover``, ``stats``, ``find``."""
from __future__ import annotations

from kafkawire.cli.main import main

__all__ = ["main"]
