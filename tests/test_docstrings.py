"""Docstrings name only parameters the code has (read from the checkout's sources).

A module docstring that lists its API as ``fn(a, *, b=1)`` must list parameters
``fn`` takes; a function docstring that documents ``name=...`` must be about a
parameter of that function (unless it takes ``**kwargs``).
"""
from __future__ import annotations

import ast
import os
import re
from typing import Dict, Iterator, List, Tuple

import pytest

pytestmark = pytest.mark.one_backend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIGNATURE = re.compile(r"``(\w+)\(([^`]*)\)")          # ``fn(a, b=1, *, c)`` in prose
KEYWORD = re.compile(r"``(\w+)=([^`]*)``")               # ``name=<Python literal>``
ARGUMENT = re.compile(r"(?:^|,)\s*\*{0,2}(\w+)\s*(?==|,|$)")


def _trees() -> Iterator[Tuple[str, ast.Module]]:
    for folder, dirs, files in os.walk(os.path.join(ROOT, "kafkawire")):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "_fast", "_pure"))
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                with open(path, encoding="utf-8") as fh:
                    yield os.path.relpath(path, ROOT), ast.parse(fh.read(), path)


def _params(fn: ast.AST) -> Tuple[List[str], bool]:
    a = fn.args  # type: ignore[attr-defined]
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return names, a.kwarg is not None


def _literal(text: str) -> bool:
    try:
        ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return False
    return True


def _problems(rel: str, tree: ast.Module) -> List[str]:
    out: List[str] = []
    functions: Dict[str, ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, node)
            if node.name.startswith("_"):
                continue
            names, takes_kwargs = _params(node)
            if takes_kwargs:
                continue
            for word, value in KEYWORD.findall(ast.get_docstring(node) or ""):
                if word not in names and _literal(value):   # not a setting's text (key=value)
                    out.append(f"{rel}:{node.lineno} {node.name}() documents {word}=")
    for fname, args in SIGNATURE.findall(ast.get_docstring(tree) or ""):
        fn = functions.get(fname)
        if fn is None:
            continue
        names, takes_kwargs = _params(fn)
        if takes_kwargs:
            continue
        for arg in ARGUMENT.findall(args.replace("\n", " ")):
            if arg not in names and arg != "same_keywords":
                out.append(f"{rel}: the module docstring lists {fname}({arg}), which "
                           f"{fname} does not take")
    return out


def test_docstrings_name_real_parameters():
    problems = [p for rel, tree in _trees() for p in _problems(rel, tree)]
    assert problems == [], "\n".join(problems)


def test_the_check_catches_a_stale_parameter():
    src = ('"""API: ``decode(data, *, start=0, verify_crc=False)``."""\n'
           "def decode(data, *, start=0):\n"
           '    """Decode; ``strict=True`` refuses gaps."""\n')
    found = _problems("example.py", ast.parse(src))
    assert any("decode(verify_crc)" in p for p in found), found
    assert any("documents strict=" in p for p in found), found
