# cython: language_level=3
"""Temporary: re-exports the pure twin until the compiled kernel lands."""
from kafkawire._pure.varint import *  # noqa
from kafkawire._pure.varint import __all__  # noqa
