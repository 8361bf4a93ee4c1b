"""How kafkawire's own modules import each other (read from the checkout's sources).

* No module reaches into another module's private names (``from kafkawire.x import
  _name`` or ``x._name`` on an imported kafkawire module): a name shared between
  modules gets a public name where it belongs.
* A private module (``_name.py``) is imported only from inside its own package, except
  the package-wide internals listed in ``SHARED_INTERNALS``; the kernel backends
  (``kafkawire._fast``, ``kafkawire._pure``) are reached through ``kafkawire._kernels``.
* An import of a kafkawire module inside a function says why it is there: a comment
  naming a ``cycle`` it breaks, or that it keeps an import ``cheap`` (on the import's
  lines or in the comment right above it or its run of imports).
"""
from __future__ import annotations

import ast
import os
import re
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

pytestmark = pytest.mark.one_backend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "kafkawire")

#: Private modules meant to be shared by the whole package.
SHARED_INTERNALS = {
    "kafkawire._kernels": "the kernel facade: the one way to the active backend",
    "kafkawire._format": "the record format's constants, for Python code",
    "kafkawire._deps": "optional-dependency loading with the extra's install hint",
    # the contract of one kernel module, shared by its two twins and the code calling it
    "kafkawire._scan_common": "the scan kernel's row columns and status codes",
    "kafkawire._columnar_common": "the columnar kernels' statuses and columns",
    "kafkawire._protocol_common": "the protocol kernels' program opcodes and decode error",
    "kafkawire._dumpfmt_common": "the dump formatter kernel's mode bits and messages",
    "kafkawire.records._types": "a stub giving type checkers Record's type (TYPE_CHECKING only)",
}
KERNEL_PACKAGES = ("kafkawire._fast", "kafkawire._pure")
WHY_LOCAL = re.compile(r"#.*\b(cheap|cycle)\b")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _sources() -> Iterator[Tuple[str, str]]:
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
                name = rel[:-3].replace("/", ".")
                if name.endswith(".__init__"):
                    name = name[: -len(".__init__")]
                yield path, name


MODULES = {name for _path, name in _sources()}
PACKAGES = {name for path, name in _sources() if path.endswith("__init__.py")}


def _is_module(name: str) -> bool:
    return name in MODULES or os.path.exists(os.path.join(ROOT, *name.split(".")) + ".pyi")


def _resolve(current: str, node: ast.ImportFrom) -> Optional[str]:
    if node.level == 0:
        return node.module
    base = current.split(".")
    if current not in PACKAGES:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _owner(module: str) -> str:
    """The package a private module belongs to: its parent package."""
    return module.rsplit(".", 1)[0]


def _private_module_refused(importer: str, module: str, type_checking: bool) -> Optional[str]:
    parts = module.split(".")
    for i in range(1, len(parts)):
        if not _is_private(parts[i]):
            continue
        private = ".".join(parts[: i + 1])
        if private in KERNEL_PACKAGES:
            if importer == "kafkawire._kernels" or importer.startswith(private) or type_checking:
                continue
            return f"{module} (a kernel backend; use kafkawire._kernels)"
        if private in SHARED_INTERNALS:
            continue
        owner = _owner(private)
        if importer == owner or importer.startswith(owner + "."):
            continue
        return f"{module} (private to {owner})"
    return None


class _Walker(ast.NodeVisitor):
    def __init__(self, module: str, lines: List[str]) -> None:
        self.module = module
        self.lines = lines
        self.depth = 0            # functions entered
        self.type_checking = 0    # `if TYPE_CHECKING:` blocks entered
        self.aliases: Dict[str, str] = {}   # local name -> kafkawire module it is bound to
        self.private: List[str] = []
        self.local: List[str] = []

    def where(self, node: ast.AST) -> str:
        return f"{self.module}:{getattr(node, 'lineno', '?')}"

    def visit_FunctionDef(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        is_tc = (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
        if not is_tc:
            self.generic_visit(node)
            return
        self.type_checking += 1
        for child in node.body:
            self.visit(child)
        self.type_checking -= 1
        for child in node.orelse:
            self.visit(child)

    def _local(self, node: ast.stmt, module: str) -> None:
        if not self.depth:
            return
        first = node.lineno - 1
        last = getattr(node, "end_lineno", node.lineno)
        while first > 0 and self.lines[first - 1].lstrip().startswith(("#", "from ", "import ")):
            first -= 1      # the comment right above (over a run of imports) counts too
        if not any(WHY_LOCAL.search(line) for line in self.lines[first:last]):
            self.local.append(f"{self.where(node)} imports {module} inside a function")

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.name.split(".")[0] != "kafkawire":
                continue
            self._local(node, a.name)
            why = _private_module_refused(self.module, a.name, bool(self.type_checking))
            if why:
                self.private.append(f"{self.where(node)} imports {why}")
            if a.asname:
                self.aliases[a.asname] = a.name

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        source = _resolve(self.module, node)
        if not source or source.split(".")[0] != "kafkawire":
            return
        self._local(node, source)
        tc = bool(self.type_checking)
        why = _private_module_refused(self.module, source, tc)
        if why:
            self.private.append(f"{self.where(node)} imports from {why}")
        for a in node.names:
            target = f"{source}.{a.name}"
            if _is_module(target):
                why = _private_module_refused(self.module, target, tc)
                if why:
                    self.private.append(f"{self.where(node)} imports {why}")
                self.aliases[a.asname or a.name] = target
            elif _is_private(a.name) and source != self.module:
                self.private.append(f"{self.where(node)} imports {a.name} from {source}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and _is_private(node.attr):
            module = self.aliases.get(node.value.id)
            if module and module != self.module and not _is_module(f"{module}.{node.attr}"):
                self.private.append(f"{self.where(node)} uses {module}.{node.attr}")
        self.generic_visit(node)


def _walk_all() -> Tuple[List[str], List[str]]:
    private: List[str] = []
    local: List[str] = []
    for path, module in _sources():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        w = _Walker(module, text.splitlines())
        w.visit(ast.parse(text, path))
        private += w.private
        local += w.local
    return private, local


def test_the_walk_sees_the_package():
    assert {"kafkawire.log.verify", "kafkawire.client.results", "kafkawire._kernels"} <= MODULES


def test_no_module_uses_another_modules_private_names():
    private, _local = _walk_all()
    assert private == [], "\n".join(private)


def test_function_local_imports_say_why():
    _private, local = _walk_all()
    assert local == [], "\n".join(local) + (
        "\n(move the import to the top, or say on its line which cycle it breaks or that it "
        "keeps an import cheap)")


def test_the_checks_catch_what_they_are_for():
    src = (
        "from kafkawire.log import verify\n"
        "from kafkawire.spark.options import _bool\n"
        "from kafkawire.client import _api\n"
        "from kafkawire._pure import scan\n"
        "def f():\n"
        "    from kafkawire.log import index\n"
        "    from kafkawire.log import segment  # cycle: segment imports this module\n"
        "    return verify._check(index)\n"
    )
    w = _Walker("kafkawire.cli.example", src.splitlines())
    w.visit(ast.parse(src))
    joined = "\n".join(w.private)
    assert "_bool" in joined and "private to kafkawire.client" in joined
    assert "kernel backend" in joined and "verify._check" in joined
    assert w.local == ["kafkawire.cli.example:6 imports kafkawire.log inside a function"]
    seen: Set[str] = set(SHARED_INTERNALS)
    assert all(_is_module(m) for m in seen), seen - {m for m in seen if _is_module(m)}
