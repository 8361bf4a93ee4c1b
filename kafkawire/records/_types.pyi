# The type of ``kafkawire.Record`` as type checkers see it.
#
# At run time ``Record`` is the active kernel backend's class (compiled in
# ``kafkawire._fast.records``, plain Python in ``kafkawire._pure.records``);
# both have exactly these attributes and this constructor.  This module exists
# only for type checkers: ``kafkawire`` and ``kafkawire.records`` import it under
# ``TYPE_CHECKING``.
from typing import ClassVar, Iterable, List, Optional, Tuple

Header = Tuple[str, Optional[bytes]]

class Record:
    """One record of a batch (v2) or message set (v0/v1)."""

    offset: int
    timestamp: int
    timestamp_type: str
    key: Optional[bytes]
    value: Optional[bytes]
    headers: List[Header]

    def __init__(self, offset: int = 0, timestamp: int = -1, key: Optional[bytes] = None,
                 value: Optional[bytes] = None, headers: Optional[Iterable[Header]] = None,
                 timestamp_type: str = "CreateTime") -> None: ...
    def __eq__(self, other: object) -> bool: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]
