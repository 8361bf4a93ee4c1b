# The type of ``kafkawire.Record`` as type checkers see it.
#
# At run time ``Record`` is the active kernel backend's class (compiled in
# ``kafkawire._fast.records``, plain Python in ``kafkawire._pure.records``); both
# have the attributes and constructor the kernel stubs declare.  This module exists
# only for type checkers: ``kafkawire`` and ``kafkawire.records`` import it under
# ``TYPE_CHECKING``.
from kafkawire._fast.records import Record as Record

__all__ = ["Record"]
