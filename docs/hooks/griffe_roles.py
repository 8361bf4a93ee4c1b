"""A griffe extension: kafkawire's docstrings use a few reStructuredText habits
(``:class:`X``` roles, ``::`` before a literal block) that Markdown would show
verbatim.  Rewrite them into Markdown before mkdocstrings renders the docstring.
"""
from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|meth|func|attr|mod|data|exc|obj):`~?([^`]+)`")


def _literal_blocks(text: str) -> str:
    """Turn ``para::`` + indented block into ``para:`` + a fenced block."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::") and not line.strip().startswith(">>>"):
            head = line.rstrip()[:-1]
            out.append(head if head.strip() else "")
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            block = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            if block:
                indent = min(len(b) - len(b.lstrip()) for b in block if b.strip())
                out.append("")
                out.append("```text")
                out.extend(b[indent:] for b in block)
                out.append("```")
                out.append("")
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx cross-reference roles and literal blocks as Markdown."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        doc = obj.docstring
        if doc is None:
            return
        text = _ROLE.sub(lambda m: f"`{m.group(1)}`", doc.value)
        doc.value = _literal_blocks(text)
