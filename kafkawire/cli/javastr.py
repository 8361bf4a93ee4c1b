"""UTF-8 decoding that replaces malformed bytes exactly as Java's ``new String(bytes, UTF_8)``.

Kafka's dump tool prints keys and payloads through ``StringDecoder``; for
binary data the number of U+FFFD characters depends on the decoder's rules
for malformed sequences, and Java's (JDK 9+ ``String`` UTF-8 decoder) differ
from Python's ``errors="replace"`` (e.g. an encoded surrogate is one
replacement in Java, three in Python; a truncated sequence at the very end
ends the string).  Valid UTF-8 takes the fast path of ``bytes.decode``.
"""
from __future__ import annotations

from typing import List

REPL = "\ufffd"


def _cont(b: int) -> bool:
    return (b & 0xC0) == 0x80


def _malformed3(b1: int, b2: int) -> int:
    return 1 if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2) else 2


def _malformed4(b1: int, b2: int, b3: int) -> int:
    if (b1 > 0xF4 or (b1 == 0xF0 and (b2 < 0x90 or b2 > 0xBF))
            or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) or not _cont(b2)):
        return 1
    if not _cont(b3):
        return 2
    return 3


def java_utf8(data: bytes) -> str:
    """``new String(data, StandardCharsets.UTF_8)``."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out: List[str] = []
    append = out.append
    sp, sl = 0, len(data)
    while sp < sl:
        # copy the longest valid run in one go
        try:
            append(data[sp:].decode("utf-8"))
            break
        except UnicodeDecodeError as e:
            if e.start:
                append(data[sp:sp + e.start].decode("utf-8"))
            sp += e.start
        b1 = data[sp]
        sp += 1
        if 0xC2 <= b1 <= 0xDF:
            if sp < sl:
                # the second byte is not a continuation (else this was valid)
                append(REPL)
                continue
            append(REPL)
            break
        if 0xE0 <= b1 <= 0xEF:
            if sp + 1 < sl:
                b2, b3 = data[sp], data[sp + 1]
                sp += 2
                malformed = (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2) or not _cont(b3)
                append(REPL)
                if malformed:
                    sp = sp - 3 + _malformed3(b1, b2)
                # else: an encoded surrogate, one replacement for all three bytes
                continue
            if sp < sl and ((b1 == 0xE0 and (data[sp] & 0xE0) == 0x80) or not _cont(data[sp])):
                append(REPL)
                continue
            append(REPL)
            break
        if 0xF0 <= b1 <= 0xF7:
            if sp + 2 < sl:
                b2, b3 = data[sp], data[sp + 1]
                sp += 3
                append(REPL)
                sp = sp - 4 + _malformed4(b1, b2, b3)
                continue
            if b1 > 0xF4 or (sp < sl and (
                    (b1 == 0xF0 and (data[sp] < 0x90 or data[sp] > 0xBF))
                    or (b1 == 0xF4 and (data[sp] & 0xF0) != 0x80) or not _cont(data[sp]))):
                append(REPL)
                continue
            sp += 1
            append(REPL)
            if sp < sl and not _cont(data[sp]):
                continue
            break
        append(REPL)
    return "".join(out)
