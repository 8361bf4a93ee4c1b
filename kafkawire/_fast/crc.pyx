# cython: language_level=3
# distutils: sources = kafkawire/_fast/crc_impl.c
"""Checksums (compiled twin of ``kafkawire/_pure/crc.py``).

``crc32c`` uses the CPU's CRC-32C instruction when present (SSE4.2 on x86-64,
the CRC extension on ARMv8; detected at run time) on three interleaved
streams, otherwise slicing-by-8 tables; the GIL is released for long inputs.
``crc32`` is zlib's CRC-32.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport uint32_t
import zlib

__all__ = ["crc32c", "crc32", "crc32c_impl"]

cdef extern from "crc_impl.h":
    uint32_t kw_crc32c(uint32_t crc, const unsigned char *buf, size_t len) nogil
    const char *kw_crc32c_impl()
    int kw_crc32c_force_software(int on)


def crc32c(data, Py_ssize_t start=0, Py_ssize_t end=-1, value=0):
    """CRC-32C of ``data[start:end]`` (``end=-1``: to the end), continuing from ``value``."""
    cdef Py_buffer view
    cdef uint32_t c = <uint32_t>(value & 0xFFFFFFFF)
    cdef const unsigned char *p
    cdef Py_ssize_t n
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        n = view.len
        if end < 0 or end > n:
            end = n
        if start < 0:
            start = 0
        if start < end:
            p = <const unsigned char *>view.buf + start
            n = end - start
            if n > 65536:
                with nogil:
                    c = kw_crc32c(c, p, <size_t>n)
            else:
                c = kw_crc32c(c, p, <size_t>n)
    finally:
        PyBuffer_Release(&view)
    return c


def crc32(data, Py_ssize_t start=0, Py_ssize_t end=-1, value=0):
    """zlib CRC-32 of ``data[start:end]``, continuing from ``value``."""
    cdef Py_ssize_t n
    if isinstance(data, bytes):
        n = len(<bytes>data)
        if end < 0 or end > n:
            end = n
        if start <= 0 and end == n:
            return zlib.crc32(data, value)
    mv = memoryview(data).cast("B")
    n = len(mv)
    if end < 0 or end > n:
        end = n
    if start < 0:
        start = 0
    if start >= end:
        return value & 0xFFFFFFFF
    return zlib.crc32(mv[start:end], value)


def crc32c_impl():
    """Name of the CRC-32C implementation in use: "sse4.2", "armv8-crc" or "slicing-by-8"."""
    return kw_crc32c_impl().decode()


def _force_software(on):
    """Testing hook: use the table-driven fallback (True) or the best one (False)."""
    return bool(kw_crc32c_force_software(1 if on else 0))
