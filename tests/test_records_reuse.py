"""Records iterated one at a time: a record the caller dropped may be reused in place.

Reuse must never be observable: records (and headers lists) the caller still
holds, directly or through a field, keep their values.
"""
from __future__ import annotations

import gc

import kafkawire
from kafkawire.records import BatchBuilder


def _batch(n=50, headers_every=0):
    b = BatchBuilder(2, "none", base_offset=100)
    for i in range(n):
        hs = [("h", b"%d" % i)] if headers_every and i % headers_every == 0 else ()
        b.append(b"value-%d" % i, key=None if i % 3 == 0 else b"key-%d" % i,
                 timestamp=1_000 + i, headers=hs)
    return b.build()


def _expected(i):
    return (100 + i, 1_000 + i, None if i % 3 == 0 else b"key-%d" % i, b"value-%d" % i)


def test_kept_records_keep_their_values():
    data = _batch()
    kept = [r for b in kafkawire.iter_batches(data) for r in b]
    assert [(r.offset, r.timestamp, r.key, r.value) for r in kept] == [_expected(i) for i in range(50)]
    assert len({id(r) for r in kept}) == 50
    assert len({id(r.headers) for r in kept}) == 50


def test_kept_fields_and_headers_lists_survive_reuse():
    data = _batch(headers_every=7)
    values, keys, lists = [], [], []
    for b in kafkawire.iter_batches(data):
        for i, r in enumerate(b):
            values.append(r.value)
            keys.append(r.key)
            lists.append(r.headers)
            r.headers.append(("mine", b"%d" % i)) if i % 5 == 0 else None
    for i in range(50):
        assert (keys[i], values[i]) == _expected(i)[2:]
        want = ([("h", b"%d" % i)] if i % 7 == 0 else []) + ([("mine", b"%d" % i)] if i % 5 == 0 else [])
        assert lists[i] == want
    assert len({id(h) for h in lists}) == 50


def test_dropped_records_with_mutated_or_deleted_fields():
    data = _batch()
    seen = []
    for b in kafkawire.iter_batches(data):
        for i, r in enumerate(b):
            seen.append((r.offset, r.timestamp, r.key, r.value, list(r.headers)))
            if i % 4 == 0:
                del r.key
            elif i % 4 == 1:
                r.headers = ("not", "a list")
            elif i % 4 == 2:
                r.headers.append(("x", None))
                r.value = object()
    assert seen == [_expected(i) + ([],) for i in range(50)]


def test_records_list_after_partial_iteration():
    data = _batch()
    it = iter(next(iter(kafkawire.iter_batches(data))))
    first = next(it)
    second = next(it)
    rest = list(it)
    gc.collect()
    got = [first, second] + rest
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in got] == \
        [_expected(i) + ([],) for i in range(50)]


def test_kept_ints_and_bytes_keep_their_values_and_hashes():
    data = _batch(n=200)
    offsets, stamps, hashes = [], [], []
    for b in kafkawire.iter_batches(data):
        for i, r in enumerate(b):
            if i % 2:
                offsets.append(r.offset)      # held: must never change
                stamps.append(r.timestamp)
            # hashed then dropped: the next value must not inherit the cached hash
            hashes.append(hash(r.value) == hash(b"value-%d" % i) and r.value == b"value-%d" % i)
            assert r.offset == 100 + i and r.timestamp == 1_000 + i
    assert all(hashes)
    assert offsets == [100 + i for i in range(1, 200, 2)]
    assert stamps == [1_000 + i for i in range(1, 200, 2)]
    d = {}
    for b in kafkawire.iter_batches(data):
        for r in b:
            d[r.value] = r.offset
    assert d == {b"value-%d" % i: 100 + i for i in range(200)}


def test_shared_timestamps_stay_right():
    b = BatchBuilder(2, "none")
    for i in range(30):
        b.append(b"v%02d" % i, timestamp=5_000_000 + i // 4)
    got = []
    for batch in kafkawire.iter_batches(b.build()):
        for r in batch:
            got.append(r.timestamp)
    assert got == [5_000_000 + i // 4 for i in range(30)]


def test_kept_header_lists_and_pairs_never_change():
    b = BatchBuilder(2, "none")
    for i in range(60):
        b.append(b"v%03d" % i, headers=[("a", b"%03d" % i), ("b", None if i % 2 else b"x%03d" % i)])
    pairs, lists, seen = [], [], []
    for batch in kafkawire.iter_batches(b.build()):
        for i, r in enumerate(batch):
            seen.append(list(r.headers))
            if i % 3 == 0:
                pairs.append((i, r.headers[0]))
            elif i % 3 == 1:
                lists.append((i, r.headers))
            elif i % 5 == 0:
                r.headers[1] = ("mine", b"!")
    want = [[("a", b"%03d" % i), ("b", None if i % 2 else b"x%03d" % i)] for i in range(60)]
    assert seen == want
    assert all(p == ("a", b"%03d" % i) for i, p in pairs)
    assert all(h == want[i] for i, h in lists)
