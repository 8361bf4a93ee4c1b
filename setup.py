"""Build script: compiles every ``kafkawire/_fast/*.pyx`` kernel with optimisation.

The install never fails for want of a compiler: with ``KAFKAWIRE_NO_EXTENSIONS=1``,
or when Cython or the C build is unavailable, kafkawire installs without its
extensions and runs on the pure-Python twins.  Extra C sources for a module
are named in the ``.pyx`` header (``# distutils: sources = ...``).
"""
import glob
import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Build the extensions, but fall back to pure Python if compiling fails."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any build failure means "pure"
            self._warn(exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self._warn(exc)

    def _warn(self, exc):
        if os.environ.get("KAFKAWIRE_REQUIRE_EXTENSIONS") == "1":
            raise exc
        sys.stderr.write(
            f"WARNING: kafkawire's compiled extensions could not be built ({exc}); "
            "installing the pure-Python backend.\n")


def extensions():
    if os.environ.get("KAFKAWIRE_NO_EXTENSIONS") == "1":
        return []
    try:
        from Cython.Build import cythonize
        import numpy
    except ImportError as exc:
        sys.stderr.write(f"WARNING: Cython/numpy unavailable ({exc}); pure-Python backend only.\n")
        return []
    from setuptools import Extension

    if sys.platform == "win32":
        args = ["/O2"]
    else:
        args = ["-O3", "-fno-strict-aliasing"]
    exts = []
    for pyx in sorted(glob.glob(os.path.join("kafkawire", "_fast", "*.pyx"))):
        name = "kafkawire._fast." + os.path.splitext(os.path.basename(pyx))[0]
        exts.append(Extension(name, [pyx], include_dirs=[numpy.get_include(), "kafkawire/_fast"],
                              extra_compile_args=args,
                              define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]))
    return cythonize(exts, language_level=3, compiler_directives={
        "boundscheck": False, "wraparound": False, "cdivision": True,
        "initializedcheck": False, "embedsignature": True})


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
