"""The kernels do not trust their Python callers: sizes, buffers, subclasses, re-entry.

Crash cases run in a subprocess, so a regression fails the test instead of the run.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from kafkawire import _kernels as K
from kafkawire.log.index import OffsetIndex, TimeIndex

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(src: str, backend: str, **env) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, KAFKAWIRE_BACKEND=backend, **env)
    if os.environ.get("KAFKAWIRE_TEST_INSTALLED") != "1":   # a checkout: import it, not a wheel
        full_env["PYTHONPATH"] = ROOT + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(src)], capture_output=True,
                          text=True, env=full_env, timeout=120)


def _backends():
    return ["fast", "pure"] if K.fast_available() else ["pure"]


HUGE = [1 << 61, (1 << 62) + 1, sys.maxsize]


@pytest.mark.parametrize("n", HUGE)
def test_index_entry_counts_beyond_the_buffer_are_clamped(n):
    offsets = b"\0\0\0\1\0\0\0\2" + b"\0\0\0\3\0\0\0\4"
    times = (b"\0" * 7 + b"\1" + b"\0\0\0\1") * 2
    assert K.offset_index_lookup(b"\0" * 16, n, 5) == 1
    assert K.offset_index_lookup(offsets, n, 5) == 1
    assert K.time_index_lookup(times, n, 5) == 1
    assert K.offset_index_real_entries(offsets, n) == 2
    assert K.time_index_real_entries(times, n) == 1
    assert K.offset_index_first_unordered(offsets, n, 100) == -1
    assert K.time_index_first_unordered(times, n) == 1
    assert OffsetIndex(b"\0" * 16, 0, n).lookup(5) == (0, 0)
    assert TimeIndex(times, 0, n).lookup(5) is not None


@pytest.mark.one_backend
def test_huge_entry_counts_do_not_crash_the_interpreter():
    src = """
        from kafkawire import _kernels as K
        from kafkawire.log.index import OffsetIndex
        print(K.offset_index_lookup(b'\\0' * 16, 1 << 61, 5), OffsetIndex(b'\\0' * 16, 0, 1 << 61).lookup(5))
    """
    for backend in _backends():
        r = _run(src, backend)
        assert r.returncode == 0, (backend, r.returncode, r.stderr[-500:])
        assert r.stdout.split() == ["1", "(0,", "0)"], (backend, r.stdout)


NON_CONTIGUOUS = [
    ("offset_index_lookup", (8, 5)),
    ("time_index_lookup", (5, 5)),
    ("offset_index_real_entries", (8,)),
    ("time_index_real_entries", (5,)),
    ("offset_index_first_unordered", (8, 100)),
    ("time_index_first_unordered", (5,)),
    ("buffer_is_zero", (0, 64)),
    ("records_find_timestamp", (0, 64, 1, 0, 0, 0, 0)),
    ("crc32c", ()),
    ("scan_batches", (0, -1, -1, False)),
    ("read_varint", (0,)),
    ("read_uvarint", (0, 64)),
]


@pytest.mark.parametrize("name,args", NON_CONTIGUOUS)
def test_non_contiguous_buffers_are_refused_by_both_twins(name, args):
    view = memoryview(bytes(range(64)))[::-1]
    with pytest.raises(BufferError):
        getattr(K, name)(view, *args)
    # a contiguous view of the same bytes is read
    getattr(K, name)(memoryview(bytes(range(64))), *args)


def test_buffers_of_wider_items_are_read_as_bytes():
    import array
    entries = array.array("B", b"\0\0\0\1\0\0\0\2\0\0\0\3\0\0\0\4")
    assert K.offset_index_lookup(memoryview(entries).cast("B").cast("I"), 2, 5) == 1


@pytest.mark.one_backend
def test_batch_header_subclass_with_a_dict_survives():
    src = """
        from kafkawire import _kernels as K
        from kafkawire.records import BatchBuilder
        b = BatchBuilder(2, 'none', base_offset=7)
        b.append(b'v')
        data = b.build()
        class WithDict(K.BatchHeader):
            pass
        class WithSlots(K.BatchHeader):
            __slots__ = ('extra',)
        for cls in (WithDict, WithSlots):
            rows = K.scan_batch_objects(data, 0, -1, -1, False, cls, 0, None)[0]
            h = rows[0]
            if cls is WithDict:
                h.note = 'kept'
                assert h.__dict__ == {'note': 'kept'}
            else:
                h.extra = 1
            print(type(h).__name__, h.base_offset, h.record_count)
        del rows, h
        import gc; gc.collect()
    """
    for backend in _backends():
        r = _run(src, backend)
        assert r.returncode == 0, (backend, r.returncode, r.stderr[-800:])
        assert r.stdout.split() == ["WithDict", "7", "1", "WithSlots", "7", "1"], r.stdout


# A finalizer that re-enters the iterator while the iterator releases a dropped
# record's old field values (the finalizer finds the record through gc).
REENTER = """
    import gc, sys
    import kafkawire
    from kafkawire.records import BatchBuilder
    mode, calls, hold = sys.argv[1], int(sys.argv[2]), sys.argv[3] == '1'
    b = BatchBuilder(2, 'none', base_offset=0)
    for i in range(40):
        b.append(b'value-%d' % i, key=b'key-%d' % i, timestamp=1000 + i,
                 headers=[('h', b'x')] if mode == 'headers' else ())
    batch = next(iter(kafkawire.iter_batches(b.build())))
    it = iter(batch)
    got, armed = [], [True]
    class Finalizer:
        def __del__(self):
            if not armed[0]:
                return
            armed[0] = False
            found = [o for o in gc.get_objects() if type(o).__name__ == 'Record']
            if not hold:
                del found
            for _ in range(calls):
                got.append(next(it))
    r = next(it)
    if mode == 'headers':
        r.headers[0] = ('h', Finalizer())
    else:
        setattr(r, mode, Finalizer())
    del r
    seen = [(type(x).__name__, x.offset, x.key, x.value) for x in it]
    seen += [(type(x).__name__, x.offset, x.key, x.value) for x in got]
    assert all(s[0] == 'Record' for s in seen), seen
    seen.sort(key=lambda s: s[1])
    want = [('Record', i, b'key-%d' % i, b'value-%d' % i) for i in range(1, 40)]
    assert seen == want, seen
    print('ok')
"""


@pytest.mark.one_backend
@pytest.mark.parametrize("mode", ["key", "value", "headers"])
def test_reentering_the_iterator_from_a_finalizer_is_safe(mode):
    for backend in _backends():
        for calls in (1, 2, 3):
            for hold in ("0", "1"):
                full_env = dict(os.environ, KAFKAWIRE_BACKEND=backend)
                if os.environ.get("KAFKAWIRE_TEST_INSTALLED") != "1":   # a checkout: import it, not a wheel
                    full_env["PYTHONPATH"] = ROOT + os.pathsep + full_env.get("PYTHONPATH", "")
                r = subprocess.run([sys.executable, "-c", textwrap.dedent(REENTER), mode,
                                    str(calls), hold], capture_output=True, text=True,
                                   env=full_env, timeout=120)
                assert r.returncode == 0 and r.stdout.strip() == "ok", \
                    (backend, mode, calls, hold, r.returncode, r.stderr[-800:])


@pytest.mark.one_backend
@pytest.mark.parametrize("tricks", ["0", "reuse", "reuse,inplace", "gc_new", "attrs"])
def test_interpreter_tricks_switched_off_give_the_same_records(tricks):
    src = """
        import kafkawire
        from kafkawire.records import BatchBuilder
        b = BatchBuilder(2, 'none', base_offset=3)
        for i in range(300):
            b.append(b'v%d' % i, key=None if i % 3 else b'k%d' % i, timestamp=10 ** 12 + i // 7,
                     headers=[('a', b'%d' % i)] if i % 5 == 0 else ())
        data = b.build()
        out = [(r.offset, r.timestamp, r.key, r.value, r.headers)
               for bt in kafkawire.iter_batches(data) for r in bt]
        out += [(bt.base_offset, bt.last_offset, bt.max_timestamp, bt.compression,
                 bt.first_timestamp, bt.producer_id, bt.record_count, bt.attributes, bt.position)
                for bt in kafkawire.iter_batches(data)]
        print(repr(out))
    """
    if not K.fast_available():
        pytest.skip("compiled backend not built")
    on = _run(src, "fast")
    off = _run(src, "fast", KAFKAWIRE_INTERPRETER_TRICKS=tricks)
    assert on.returncode == 0 and off.returncode == 0, (on.stderr[-500:], off.stderr[-500:])
    assert on.stdout == off.stdout
