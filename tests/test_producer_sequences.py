"""Idempotent sequence numbers wrap from 2**31-1 to 0, as Kafka's producer and broker count them.

A partition that has taken 2**31 records from one producer id and epoch goes on
at sequence 0 (Kafka's ``DefaultRecordBatch.incrementSequence``); a batch may
straddle the wrap.  The scripted broker (``IdempotentLog``) checks sequences with
the same wrap, so a duplicate or a gap across it would show.
"""
from __future__ import annotations

import pytest

import kafkawire
from kafkawire.client.producer import Producer
from kafkawire.protocol import error_codes as E

from fake_brokers import IdempotentLog, numbered, send_all

pytestmark = pytest.mark.one_backend


@pytest.fixture
def broker(fake):
    return IdempotentLog(fake)


MAX = 2**31 - 1


def _near_the_wrap(p, broker, acked: int) -> int:
    """Move the producer and the broker to a partition whose last acked sequence is ``acked``."""
    assert p.send("t", b"start", partition=0).result(10).offset == 0
    sender = p._sender
    tp = ("t", 0)
    with broker.lock:
        key = ("t", 0, sender.producer_id)
        epoch, seen = broker.state[key]
        broker.state[key] = (epoch, [(acked, acked, 0)])
    sender.last_acked[tp] = acked
    sender.next_seq[tp] = (acked + 1) & MAX
    return sender.producer_id


def _batches(p_records):
    return [(b.base_sequence, len(b.records())) for b in kafkawire.iter_batches(p_records)]


def _wrapping(req) -> bool:
    """True when the request holds a batch that straddles the wrap or starts after it."""
    for t in req.message.topic_data:
        for part in t.partition_data:
            for seq, n in _batches(part.records):
                if seq + n - 1 > MAX or 0 <= seq < 1000:
                    return True
    return False


def test_sequences_wrap_to_zero_with_a_lost_answer_across_the_wrap(fake, broker):
    sent = []
    lost = []

    def fault(node, req, n):
        for t in req.message.topic_data:
            for part in t.partition_data:
                sent.extend(_batches(part.records))
        if not lost and _wrapping(req):
            lost.append(n)
            broker.answer(req)    # written, but the answer never arrives: the retry is a duplicate
            return "silent"
        return None

    with Producer(fake.bootstrap, linger_ms=0, batch_size=100, request_timeout_ms=400,
                  retry_backoff_ms=10) as p:
        _near_the_wrap(p, broker, MAX - 20)
        broker.fault = fault
        futures = send_all(p, numbered(60))
    assert lost
    assert broker.values() == [b"start"] + numbered(60)
    assert [f.result().offset for f in futures] == list(range(1, 61))
    # The batches' first sequences: from 2**31-20 up, then on from 0 (Kafka's wrap rule);
    # the retried one went out again with the same numbers.
    batches = list(dict.fromkeys(sent))
    assert len(batches) < len(sent)
    expect = MAX - 19
    for seq, n in batches:
        assert seq == expect
        expect = (seq + n) & MAX
    assert expect == (MAX - 19 + 60) & MAX == 40
    assert len(broker.init_requests) == 1   # no epoch bump: nothing went out of order


def test_out_of_order_right_after_the_wrap_bumps_the_epoch(fake, broker):
    """After the wrap, the next expected batch is found (sequence 0 follows 2**31-1): a broker
    that lost our state gets a new epoch, as before the wrap, instead of endless retries."""
    with Producer(fake.bootstrap, linger_ms=0, retry_backoff_ms=5, batch_size=100) as p:
        pid = _near_the_wrap(p, broker, MAX - 2)
        send_all(p, numbered(3, b"w"))            # sequences 2**31-2 .. 0
        assert broker.state[("t", 0, pid)][1][-1][1] == 0   # the last acked: 2**31-1 + 1
        broker.fault = lambda node, req, n: broker.answer(req, codes={("t", 0): 45})
        f = p.send("t", b"lost", partition=0)
        with pytest.raises(E.OutOfOrderSequenceNumberError):
            f.result(10)
        broker.fault = None
        assert p.send("t", b"after", partition=0).result(10).offset == 4
    assert broker.init_requests[-1] == (pid, 0)   # bumped from epoch 0
    assert broker.values() == [b"start", b"w0", b"w1", b"w2", b"after"]
