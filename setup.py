"""Build script: compiles every ``kafkawire/_fast/*.pyx`` kernel with optimisation.

The install never fails for want of a compiler: with ``KAFKAWIRE_NO_EXTENSIONS=1``,
or when Cython or the C build is unavailable, kafkawire installs without its
extensions and runs on the pure-Python twins.  A build that was asked to
compile but could not says so on stderr (``pip install -v`` shows it) and
leaves a note in the package, which kafkawire's warning at import repeats.
``KAFKAWIRE_REQUIRE_EXTENSIONS=1`` turns such a failure into an error.
Extra C sources for a module are named in the ``.pyx`` header
(``# distutils: sources = ...``).
"""
import glob
import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

#: Written into the package when the compiled kernels were not built, and why.
NOTE = os.path.join("kafkawire", "_fast", "BUILD-NOTE.txt")
_problem = []


def _announce(reason):
    """Say loudly, once, that this install gets the pure-Python kernels."""
    _problem.append(reason)
    bar = "*" * 78
    sys.stderr.write(
        f"\n{bar}\nkafkawire: the compiled kernels were NOT built: {reason}\n"
        "kafkawire will be installed with its pure-Python kernels only: the same results,\n"
        "but slower. To get the compiled kernels, install a C compiler (gcc or clang;\n"
        "MSVC on Windows) and Python's development headers, then reinstall. Set\n"
        "KAFKAWIRE_REQUIRE_EXTENSIONS=1 to make this an error instead.\n"
        f"{bar}\n\n")


def _write_note(build_lib):
    """The note says why the kernels are missing; a successful build leaves none behind."""
    path = os.path.join(build_lib, NOTE)
    if not _problem:
        if os.path.exists(path):
            os.remove(path)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(_problem[-1] + "\n")


class OptionalBuildExt(build_ext):
    """Build the extensions, but fall back to pure Python if compiling fails."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any build failure means "pure"
            self._failed(exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self._failed(exc)

    def _failed(self, exc):
        if os.environ.get("KAFKAWIRE_REQUIRE_EXTENSIONS") == "1":
            raise exc
        if not _problem:
            _announce(f"compiling failed ({exc})")
        if not self.inplace:
            _write_note(self.build_lib)


class BuildPy(build_py):
    """Leave the note in the package when the extensions were skipped before compiling."""

    def run(self):
        super().run()
        _write_note(self.build_lib)


def extensions():
    if os.environ.get("KAFKAWIRE_NO_EXTENSIONS") == "1":
        _problem.append("the install was asked not to build them (KAFKAWIRE_NO_EXTENSIONS=1)")
        return []
    try:
        from Cython.Build import cythonize
        import numpy
    except ImportError as exc:
        if os.environ.get("KAFKAWIRE_REQUIRE_EXTENSIONS") == "1":
            raise
        _announce(f"Cython or numpy is missing at build time ({exc})")
        return []
    from setuptools import Extension

    if sys.platform == "win32":
        args = ["/O2"]
    else:
        # -g0: no debug information in release builds (it is most of the binaries' size)
        args = ["-O3", "-fno-strict-aliasing"] + ([] if os.environ.get("KAFKAWIRE_DEBUG") == "1" else ["-g0"])
    exts = []
    for pyx in sorted(glob.glob(os.path.join("kafkawire", "_fast", "*.pyx"))):
        name = "kafkawire._fast." + os.path.splitext(os.path.basename(pyx))[0]
        exts.append(Extension(name, [pyx], include_dirs=[numpy.get_include(), "kafkawire/_fast"],
                              extra_compile_args=args,
                              define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]))
    return cythonize(exts, language_level=3, quiet=True, compiler_directives={
        "boundscheck": False, "wraparound": False, "cdivision": True,
        "initializedcheck": False, "embedsignature": True})


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt, "build_py": BuildPy})
