"""One module per API (or group of related APIs), each holding request and response schemas."""
from __future__ import annotations

from kafkawire.protocol.messages.admin import *  # noqa: F401,F403
from kafkawire.protocol.messages.api_versions import *  # noqa: F401,F403
from kafkawire.protocol.messages.fetch import *  # noqa: F401,F403
from kafkawire.protocol.messages.find_coordinator import *  # noqa: F401,F403
from kafkawire.protocol.messages.groups import *  # noqa: F401,F403
from kafkawire.protocol.messages.init_producer_id import *  # noqa: F401,F403
from kafkawire.protocol.messages.list_offsets import *  # noqa: F401,F403
from kafkawire.protocol.messages.metadata import *  # noqa: F401,F403
from kafkawire.protocol.messages.offsets import *  # noqa: F401,F403
from kafkawire.protocol.messages.produce import *  # noqa: F401,F403
from kafkawire.protocol.messages.sasl import *  # noqa: F401,F403
from kafkawire.protocol.messages.topics import *  # noqa: F401,F403
from kafkawire.protocol.messages.transactions import *  # noqa: F401,F403
from kafkawire.protocol.messages import (admin, api_versions, fetch, find_coordinator, groups,
                                         init_producer_id, list_offsets, metadata, offsets,
                                         produce, sasl, topics, transactions)

__all__ = [n for m in (produce, fetch, list_offsets, metadata, offsets, find_coordinator, groups,
                       sasl, api_versions, topics, init_producer_id, transactions, admin)
           for n in m.__all__]
