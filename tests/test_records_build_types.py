"""``BatchBuilder.append`` checks each field's type when it is called, naming the field.

A wrong type must not be accepted and then fail later in ``build()`` with an
unrelated error (as the other Python clients check at send time).
"""
from __future__ import annotations

import numpy as np
import pytest

import kafkawire
from kafkawire.records import BatchBuilder


@pytest.mark.parametrize("kwargs, field", [
    ({"timestamp": "1243812793"}, "timestamp"),
    ({"timestamp": 1.5}, "timestamp"),
    ({"timestamp": True}, "timestamp"),
    ({"timestamp": b"1"}, "timestamp"),
    ({"offset": "3"}, "offset"),
    ({"offset": 3.0}, "offset"),
    ({"key": "text"}, "key"),
    ({"key": 12}, "key"),
    ({"headers": "h"}, "headers"),
    ({"headers": {"h": b"v"}}, "headers"),
    ({"headers": [("h",)]}, "headers[0]"),
    ({"headers": [(1, b"v")]}, "headers[0] key"),
    ({"headers": [("h", "text")]}, "headers[0] value"),
    ({"headers": [("h", b"v"), ("g", 5)]}, "headers[1] value"),
])
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_wrong_types_raise_at_append(kwargs, field, magic):
    if magic < 2 and "headers" in kwargs:
        magic = 2
    b = BatchBuilder(magic=magic)
    with pytest.raises(TypeError, match=field.replace("[", r"\[").replace("]", r"\]")):
        b.append(b"v", **kwargs)
    assert b.build() == (b"" if magic < 2 else b.build())   # nothing was added


def test_wrong_value_type_names_the_value():
    with pytest.raises(TypeError, match="value"):
        BatchBuilder().append("text")


@pytest.mark.parametrize("ts", [1 << 63, -(1 << 63) - 1])
def test_out_of_range_timestamp_is_a_value_error(ts):
    with pytest.raises(ValueError, match="timestamp"):
        BatchBuilder().append(b"v", timestamp=ts)


def test_int_like_values_are_accepted():
    b = BatchBuilder()
    b.append(b"v", timestamp=np.int64(1243812793), offset=np.int32(0),
             headers=[("h", bytearray(b"x")), (b"k", None)])
    (batch,) = kafkawire.iter_batches(b.build())
    (rec,) = batch.records()
    assert rec.timestamp == 1243812793 and rec.offset == 0
    assert rec.headers == [("h", b"x"), ("k", None)]
