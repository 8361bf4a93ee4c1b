"""Where the CLI writes: text lines like Kafka's tools, or one JSON object per line."""
from __future__ import annotations

import codecs
import json
import os
import sys
from typing import Any, Callable, Dict, Optional, TextIO

from kafkawire.cli.progress import Progress, clear_active


class Printer:
    """Writes either the text line or the JSON object of each item.

    ``text`` may be a string or a zero-argument callable (so JSON mode never
    pays for formatting text it won't print, and the reverse).
    """

    def __init__(self, stream: Optional[TextIO] = None, json_mode: bool = False) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.json_mode = json_mode
        self.progress: Optional[Progress] = None  # a Progress to erase before writing
        self._raw: Any = False  # the stream's binary layer when it takes UTF-8 (found on first use)

    def _clear(self) -> None:
        if self.progress is not None and self._tty():
            self.progress.clear()

    def _tty(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def emit(self, text: "str | Callable[[], str] | None",
             obj: "Dict[str, Any] | Callable[[], Dict[str, Any]] | None" = None) -> None:
        self._clear()
        if self.json_mode:
            if obj is None:
                return
            if callable(obj):
                obj = obj()
            self.stream.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False))
            self.stream.write("\n")
        else:
            if text is None:
                return
            if callable(text):
                text = text()
            self.stream.write(text)
            self.stream.write("\n")

    def write_lines(self, lines: "list[str]") -> None:
        """Already formatted lines (text or JSON), written in one call."""
        self._clear()
        self.stream.write("\n".join(lines))
        self.stream.write("\n")

    def write_bytes(self, data: bytes) -> None:
        """Already formatted UTF-8 lines (each ending in a newline), as one chunk.

        Goes straight to the binary layer of a UTF-8 text stream (``sys.stdout``),
        flushing the text layer first to keep the order; other streams get the text.
        """
        if not data:
            return
        self._clear()
        raw = self._binary()
        if raw is not None:
            self.stream.flush()
            raw.write(data)
        else:
            self.stream.write(data.decode("utf-8"))

    def _binary(self) -> "Any":
        if self._raw is False:
            self._raw = None
            buf = getattr(self.stream, "buffer", None)
            enc = getattr(self.stream, "encoding", None)
            if buf is not None and enc and os.linesep == "\n":
                try:
                    if codecs.lookup(enc).name == "utf-8":
                        self._raw = buf
                except LookupError:
                    pass
        return self._raw

    def text(self, line: str) -> None:
        """A line printed only in text mode (headers like ``Dumping FILE``)."""
        if not self.json_mode:
            self._clear()
            self.stream.write(line)
            self.stream.write("\n")


def err(line: str) -> None:
    """One line on stderr (erasing a progress bar first)."""
    clear_active()
    sys.stderr.write(line)
    sys.stderr.write("\n")
