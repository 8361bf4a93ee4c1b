"""Constants and error messages shared by both twins of the dump formatter kernel (``dumpfmt``)."""
from __future__ import annotations

from typing import Optional

from kafkawire.errors import CorruptRecordError

# -- mode bits ------------------------------------------------------------------------------
PRINT = 1   #: --print-data-log: keys and payloads after the record metadata
JSON = 2    #: --json: one JSON object per line instead of Kafka's text
SHALLOW = 4  #: no --deep-iteration: batch lines only (records checked for isvalid, not shown)

# -- dump_batches status (why it stopped at ``stop``) -----------------------------------------
OK = 0        #: reached ``end``
FULL = 1      #: the output reached ``max_output`` bytes; call again from ``stop``
GENERAL = 2   #: the batch at ``stop`` needs the general path (see the kernel's docstring)

# -- error codes of the records loop ----------------------------------------------------------
(E_COUNT, E_REC_LENGTH, E_REC_PAST_END, E_VARINT_TRUNC, E_VARINT_LONG, E_KEY_LEN, E_KEY_PAST,
 E_VALUE_LEN, E_VALUE_PAST, E_HEADER_COUNT, E_HKEY_LEN, E_HKEY_UTF8, E_HVALUE_LEN,
 E_HVALUE_PAST, E_FIELDS, E_LEFTOVER, E_RANGE, E_TS_OVERFLOW) = range(1, 19)

_MESSAGES = {
    E_COUNT: ("record count {a} impossible for {b} bytes of records", "count"),
    E_REC_LENGTH: ("record length {a} is invalid", "length"),
    E_REC_PAST_END: ("record length {a} runs past the end of the batch", "truncated"),
    E_VARINT_TRUNC: ("varint runs past the end of the record", "truncated"),
    E_VARINT_LONG: ("varint longer than its type allows", "varint"),
    E_KEY_LEN: ("invalid key length {a}", "length"),
    E_KEY_PAST: ("key runs past the end of the record", "truncated"),
    E_VALUE_LEN: ("invalid value length {a}", "length"),
    E_VALUE_PAST: ("value runs past the end of the record", "truncated"),
    E_HEADER_COUNT: ("invalid header count {a}", "length"),
    E_HKEY_LEN: ("invalid header key length {a}", "length"),
    E_HKEY_UTF8: ("header key is not valid UTF-8", "utf8"),
    E_HVALUE_LEN: ("invalid header value length {a}", "length"),
    E_HVALUE_PAST: ("header value runs past the end of the record", "truncated"),
    E_FIELDS: ("record declares {a} bytes but its fields use {b}", "length"),
    E_LEFTOVER: ("{a} bytes left after the batch's {b} records", "count"),
    E_RANGE: ("record offset delta {a} outside the batch's offset range", "offset"),
}


def records_error(code: int, position: int, offset: Optional[int], a: int = 0, b: int = 0
                  ) -> CorruptRecordError:
    """The ``CorruptRecordError`` for error ``code`` at ``position`` of the records buffer."""
    msg, reason = _MESSAGES[code]
    return CorruptRecordError(msg.format(a=a, b=b), position=position, offset=offset,
                              reason=reason)
