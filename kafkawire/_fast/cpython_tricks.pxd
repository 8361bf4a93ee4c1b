# Every trick that leans on CPython's internals, in one place, behind one switch.
#
# The switch: KW_TRICKS_BUILD is 1 only on the interpreters the suite is run on
# (CPython 3.9-3.14 with the GIL); free-threaded builds, PyPy and untested versions
# compile the tricks out.  At run time KAFKAWIRE_INTERPRETER_TRICKS=0 turns them all
# off (to rule them out when hunting a bug); a comma-separated list of names keeps
# only those on (to measure what each one pays, on against off).  Kernels read the
# switch once, at import, through tricks_enabled(name).
#
# The tricks, by name, and who uses them:
# * "reuse" (records.RecordIterator): a record the caller dropped is filled again in
#   place for the next record (no allocation), as zip() reuses its result tuple.
# * "inplace" (kw_store_int / kw_store_bytes, with "reuse"): an old int or bytes field
#   value only that record holds is rewritten in place with the new value.
# * "gc_new" (kw_gc_new, scan.scan_batch_objects): batch objects made without
#   zero-filling, after a layout probe, for subclasses of BatchHeader that add no storage.
# * "attrs" (scan.BatchHeader.__getattribute__): the hottest header names answered by
#   identity with interned strings (CPython interns attribute names) before the
#   generic lookup.
# Not a trick (it holds on every interpreter, so it is not switched): Record's member
# descriptors use offsetof on its object struct (records.pyx).
from cpython.object cimport PyObject, PyTypeObject
from libc.stdint cimport int64_t

cdef extern from *:
    """
    #if !defined(Py_GIL_DISABLED) && !defined(PYPY_VERSION) \
        && PY_VERSION_HEX >= 0x03090000 && PY_VERSION_HEX < 0x030F0000
    #define KW_TRICKS_BUILD 1
    #else
    #define KW_TRICKS_BUILD 0
    #endif

    /* Field stores for a record nothing but its iterator holds (so nothing can see
       its old field values either): an old int or bytes value that is likewise
       held by nothing else and has the new value's size is rewritten in place,
       which spares a free and an allocation per field.  Ints only above the
       small-int cache and bytes of two bytes or more (the interpreter shares
       smaller ones); CPython's int layout is used only where known (< 3.12). */
    #if PY_VERSION_HEX < 0x030B0000
    #include <longintrepr.h>
    #endif
    /* "inplace": set at import by the kernel that stores (records.pyx). */
    static int kw_inplace = 0;

    static inline int kw_store_int(PyObject **slot, int64_t v) {
        PyObject *old = *slot;
    #if KW_TRICKS_BUILD && PY_VERSION_HEX < 0x030C0000
        if (kw_inplace && v > 256 && old != NULL && Py_REFCNT(old) == 1 && PyLong_CheckExact(old)) {
            uint64_t u = (uint64_t)v, t = u;
            Py_ssize_t need = 0, i;
            while (t) { need++; t >>= PyLong_SHIFT; }
            if (Py_SIZE(old) == need) {
                for (i = 0; i < need; i++) {
                    ((PyLongObject *)old)->ob_digit[i] = (digit)(u & PyLong_MASK);
                    u >>= PyLong_SHIFT;
                }
                return 0;
            }
        }
    #endif
        PyObject *nw = PyLong_FromLongLong(v);
        if (nw == NULL) return -1;
        *slot = nw;
        Py_XDECREF(old);
        return 0;
    }

    static inline int kw_store_bytes(PyObject **slot, const unsigned char *p, Py_ssize_t n) {
        PyObject *old = *slot;
        PyObject *nw;
    #if KW_TRICKS_BUILD
        if (kw_inplace && n > 1 && old != NULL && Py_REFCNT(old) == 1 && PyBytes_CheckExact(old)
                && PyBytes_GET_SIZE(old) == n) {
            memcpy(PyBytes_AS_STRING(old), p, (size_t)n);
    #if defined(__GNUC__)
    #pragma GCC diagnostic push
    #pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    #endif
            ((PyBytesObject *)old)->ob_shash = -1;   /* forget a cached hash */
    #if defined(__GNUC__)
    #pragma GCC diagnostic pop
    #endif
            return 0;
        }
    #endif
        if (n < 0) {
            Py_INCREF(Py_None);
            nw = Py_None;
        } else {
            nw = PyBytes_FromStringAndSize((const char *)p, n);
            if (nw == NULL) return -1;
        }
        *slot = nw;
        Py_XDECREF(old);
        return 0;
    }

    #if KW_TRICKS_BUILD
    #define kw_gc_new(tp) _PyObject_GC_New(tp)
    #else
    #define kw_gc_new(tp) NULL
    #endif
    """
    const int KW_TRICKS_BUILD
    int kw_inplace
    int kw_store_int(PyObject **slot, int64_t v) except -1
    int kw_store_bytes(PyObject **slot, const unsigned char *p, Py_ssize_t n) except -1
    PyObject *kw_gc_new(PyTypeObject *tp)

cdef inline bint tricks_enabled(str name):
    """Is trick ``name`` on: compiled in for this interpreter, and not turned off by
    KAFKAWIRE_INTERPRETER_TRICKS ("0": all off; "1" or unset: all on; a comma-separated
    list of names: only those on)."""
    import os
    if KW_TRICKS_BUILD == 0:
        return False
    value = os.environ.get("KAFKAWIRE_INTERPRETER_TRICKS", "1").strip()
    if value in ("", "1"):
        return True
    return name in [t.strip() for t in value.split(",")]
