"""The kernel boundary: both twins and the stubs agree on names, signatures and constants."""
from __future__ import annotations

import ast
import inspect
import os
import re

import pytest

from kafkawire import _format as F
from kafkawire import _kernels as K

FAST_DIR = os.path.join(os.path.dirname(os.path.abspath(K.__file__)), "_fast")  # as imported
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # the checkout
SOURCE_FAST = os.path.join(SOURCE_ROOT, "kafkawire", "_fast")


def _params(sig: inspect.Signature):
    return [(p.name, p.kind.name, p.default) for p in sig.parameters.values()]


def _literal(node):
    if node is None:
        return inspect.Parameter.empty
    return ast.literal_eval(node)


def _stub_params(fn: ast.FunctionDef):
    a = fn.args
    out = []
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for arg, default in zip(positional, defaults):
        kind = "POSITIONAL_ONLY" if arg in a.posonlyargs else "POSITIONAL_OR_KEYWORD"
        out.append((arg.arg, kind, _literal(default)))
    if a.vararg:
        out.append((a.vararg.arg, "VAR_POSITIONAL", inspect.Parameter.empty))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        out.append((arg.arg, "KEYWORD_ONLY", _literal(default)))
    if a.kwarg:
        out.append((a.kwarg.arg, "VAR_KEYWORD", inspect.Parameter.empty))
    return out


def _stub(module: str):
    path = os.path.join(FAST_DIR, module + ".pyi")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name: {m.name: m for m in n.body if isinstance(m, ast.FunctionDef)}
               for n in tree.body if isinstance(n, ast.ClassDef)}
    return funcs, classes


@pytest.mark.one_backend
@pytest.mark.parametrize("module", K.MODULES)
def test_every_kernel_module_has_a_stub_matching_the_pure_twin(module):
    pure = K._load("pure")[module]
    funcs, classes = _stub(module)
    assert set(funcs) | set(classes) >= set(pure.__all__), module
    for name in pure.__all__:
        obj = getattr(pure, name)
        if isinstance(obj, type):
            for meth, node in classes[name].items():
                if meth.startswith("_") and meth != "__init__":
                    continue
                target = getattr(obj, meth)
                if isinstance(target, property):
                    continue
                want = _params(inspect.signature(target))
                assert _stub_params(node) == want, (module, name, meth)
        else:
            assert _stub_params(funcs[name]) == _params(inspect.signature(obj)), (module, name)


@pytest.mark.one_backend
@pytest.mark.parametrize("module", K.MODULES)
def test_compiled_and_pure_twins_have_the_same_signatures(module):
    if not K.fast_available():
        pytest.skip("compiled backend not built")
    fast, pure = K._load("fast")[module], K._load("pure")[module]
    assert sorted(fast.__all__) == sorted(pure.__all__), module
    for name in pure.__all__:
        f, p = getattr(fast, name), getattr(pure, name)
        if isinstance(p, type):
            assert isinstance(f, type), name
            for meth in vars(p):
                if meth.startswith("_") and meth != "__init__":
                    continue
                assert hasattr(f, meth), (module, name, meth)
            if "__init__" in vars(p):
                # a compiled class states its constructor's signature through
                # embedsignature, as the first line of its docstring
                first = (f.__doc__ or "").splitlines()[0]
                assert first.startswith(name + "("), (module, name, first)
                node = ast.parse(f"def _{first[len(name):]}: pass").body[0]
                want = _params(inspect.signature(p.__init__))[1:]
                assert _stub_params(node) == want, (module, name, first)
            continue
        assert _params(inspect.signature(f)) == _params(inspect.signature(p)), (module, name)


@pytest.mark.one_backend
def test_the_facade_stub_names_every_kernel():
    path = os.path.join(os.path.dirname(FAST_DIR), "_kernels.pyi")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    exported = {a.asname for n in tree.body if isinstance(n, ast.ImportFrom)
                and (n.module or "").startswith("kafkawire._fast.") for a in n.names}
    pure = K._load("pure")
    assert exported == {name for m in K.MODULES for name in pure[m].__all__}


@pytest.mark.one_backend
def test_stubs_ship_in_the_wheel():
    with open(os.path.join(SOURCE_ROOT, "pyproject.toml"), encoding="utf-8") as f:
        assert re.search(r'"\*" = \[[^\]]*"\*\.pyi"', f.read())
    # Every kernel source has a stub beside the package that is imported (the installed
    # wheel's when the suite runs against one).
    for pyx in os.listdir(SOURCE_FAST):
        if pyx.endswith(".pyx"):
            assert os.path.exists(os.path.join(FAST_DIR, pyx[:-4] + ".pyi")), pyx


@pytest.mark.one_backend
def test_format_constants_are_declared_alike_for_python_and_cython():
    with open(os.path.join(SOURCE_FAST, "format.pxd"), encoding="utf-8") as f:
        declared = dict((m.group(1), int(m.group(2)))
                        for m in re.finditer(r"^\s+([A-Z0-9_]+) = (-?\d+)\s*$", f.read(), re.M))
    assert declared == {name: getattr(F, name) for name in F.INT_CONSTANTS}
    assert len(F.CODEC_NAMES) == F.CODEC_ZSTD + 1
    assert F.V2_RECORDS == F.V2_HEADER_SIZE == F.V2_RECORD_COUNT + 4


@pytest.mark.one_backend
def test_kernels_call_no_front_end_method():
    """What a kernel needs from the front end is passed down (hooks, callables), never
    looked up by name on the front end's objects."""
    pure_dir = os.path.join(SOURCE_ROOT, "kafkawire", "_pure")
    front_end_methods = ("_payload", "_unknown_codec", "_on_kernel_error", "_relocate")
    for folder, ext in ((SOURCE_FAST, (".pyx", ".pxd")), (pure_dir, (".py",))):
        for name in os.listdir(folder):
            if name.endswith(ext):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    text = f.read()
                for method in front_end_methods:
                    assert "." + method not in text, (name, method)


def test_batches_made_without_hooks_still_decode_uncompressed_records():
    from kafkawire.records import BatchBuilder
    from kafkawire.records.batch import concrete_batch_class
    b = BatchBuilder(2, "none", base_offset=5)
    b.append(b"v", key=b"k")
    objs = K.scan_batch_objects(b.build(), 0, -1, -1, False, concrete_batch_class(), 0, None)[0]
    assert [(r.offset, r.key, r.value) for r in objs[0]] == [(5, b"k", b"v")]


def test_batches_over_bytes_stay_out_of_the_cycle_collector(backend):
    """Batch objects holding only bytes, ints and the front end's hook functions cannot
    form a cycle: the compiled scan leaves them untracked (the GC would rescan them)."""
    import gc

    import kafkawire
    from kafkawire.records import BatchBuilder
    if backend != "fast":
        pytest.skip("the pure twin's objects are ordinary instances")
    b = BatchBuilder(2, "none")
    b.append(b"v")
    assert [gc.is_tracked(o) for o in kafkawire.iter_batches(b.build() * 3)] == [False] * 3
