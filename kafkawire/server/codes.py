"""The Kafka error codes the broker answers with.

Every code is named once, in :mod:`kafkawire.protocol.error_codes` (checked there against
Kafka's table); this module gives the broker's modules that namespace under the server.
"""
from __future__ import annotations

from kafkawire.protocol.error_codes import *  # noqa: F401,F403
from kafkawire.protocol.error_codes import __all__  # noqa: F401
