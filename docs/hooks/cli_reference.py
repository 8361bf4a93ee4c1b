"""MkDocs hook: the command-line reference is generated from kafkawire's argument parser.

In ``reference/cli.md`` a line ``<!-- cli: NAME -->`` becomes the usage line and
the table of arguments of ``kafkawire NAME`` (``<!-- cli: kafkawire -->`` for the
top level), so the page cannot drift from the parser.  Commands the page does
not mention are appended at the end (``<!-- cli: rest -->`` marks where), so a
new command is documented the moment it exists.
"""
from __future__ import annotations

import argparse
import os
import re
from typing import Dict, List, Tuple

PAGE = "reference/cli.md"
_MARKER = re.compile(r"^<!-- cli: ([\w\- ]+) -->$", re.M)


def _parser() -> argparse.ArgumentParser:
    from kafkawire.cli.main import build_parser
    return build_parser()


def _subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> Dict[str, Tuple[argparse.ArgumentParser, str]]:
    """``{"dump": (parser, one-line help), "group list": ...}`` in the parser's order."""
    out: Dict[str, Tuple[argparse.ArgumentParser, str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                key = f"{prefix}{name}"
                out[key] = (sub, helps.get(name, ""))
                out.update(_subcommands(sub, key + " "))
    return out


def _usage(parser: argparse.ArgumentParser) -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "92"
    try:
        return parser.format_usage().strip()
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%" in text:
        text = text % {"default": action.default, "prog": "kafkawire"}
    return text


def _table(parser: argparse.ArgumentParser) -> List[str]:
    groups = {}
    for group in parser._mutually_exclusive_groups:
        names = [a.option_strings[0] for a in group._group_actions if a.option_strings]
        for a in group._group_actions:
            groups[id(a)] = (names, group.required)
    rows = ["| Argument | Meaning | Default |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._VersionAction):
            rows.append(f"| `{', '.join(action.option_strings)}` | print the version and exit | |")
            continue
        if action.option_strings:
            flag = ", ".join(action.option_strings)
            if action.nargs != 0:
                flag += f" {action.metavar or action.dest.upper()}"
        else:
            flag = action.metavar or action.dest
            if action.nargs in ("+", "*"):
                flag += " …"
        meaning = _help(action)
        notes = []
        if action.required and action.option_strings:
            notes.append("required")
        if action.choices:
            notes.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
        if id(action) in groups:
            names, required = groups[id(action)]
            others = [n for n in names if n not in action.option_strings]
            notes.append(("exactly one of it and " if required else "excludes ") +
                         ", ".join(f"`{n}`" for n in others))
        if action.nargs == "*" and not action.option_strings:
            notes.append("optional, repeatable")
        elif action.nargs == "+":
            notes.append("one or more")
        if notes:
            meaning = f"{meaning} ({'; '.join(notes)})" if meaning else "; ".join(notes)
        default = ""
        if action.option_strings and action.nargs != 0 and action.default not in (None, argparse.SUPPRESS):
            default = f"`{action.default}`"
        rows.append(f"| `{_cell(flag)}` | {_cell(meaning)} | {default} |")
    return rows


def render(name: str, parser: argparse.ArgumentParser, summary: str = "") -> str:
    lines = ["```text", _usage(parser), "```", ""]
    if parser.description:
        lines += [parser.description, ""]
    elif summary:
        lines += [summary[0].upper() + summary[1:] + ".", ""]
    lines += _table(parser)
    return "\n".join(lines) + "\n"


def generate(markdown: str) -> str:
    top = _parser()
    commands = _subcommands(top)
    seen = set()

    def replace(match: "re.Match[str]") -> str:
        name = match.group(1).strip()
        if name == "rest":
            return "<!-- cli: rest -->"
        if name == "kafkawire":
            return render(name, top)
        if name not in commands:
            raise ValueError(f"{PAGE}: no command 'kafkawire {name}' in the parser "
                             f"(known: {', '.join(commands)})")
        seen.add(name)
        sub, summary = commands[name]
        return render(name, sub, summary)

    text = _MARKER.sub(replace, markdown)
    rest = [n for n in commands if n not in seen]
    extra = "".join(f"\n## kafkawire {n}\n\n{render(n, *commands[n])}" for n in rest)
    if "<!-- cli: rest -->" in text:
        return text.replace("<!-- cli: rest -->", extra)
    return text + extra


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 - MkDocs hook API
    if page.file.src_uri != PAGE:
        return markdown
    return generate(markdown)
