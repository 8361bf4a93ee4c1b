"""The codec's own behaviour: round trips, headers, frames, bad input, primitives."""
from __future__ import annotations

import random
import uuid

import pytest

import kafkawire.protocol as P
from kafkawire import _kernels
from kafkawire import _protocol_common as C
from kafkawire.errors import KafkaWireError, ProtocolError, UnsupportedVersionError
from kafkawire.protocol.primitives import Reader, Writer
from kafkawire.protocol.schema import snake_case
from protocol_samples import REQUESTS, RESPONSES, all_versions, sample


def test_every_api_has_both_directions():
    assert len(P.ApiKey) == 29
    for key in P.ApiKey:
        req, resp = P.request_class(key), P.response_class(key)
        assert req.__name__.endswith("Request") and resp.__name__.endswith("Response")
        assert req.VERSIONS == resp.VERSIONS and req.FLEXIBLE == resp.FLEXIBLE
        assert req.__name__ in P.__all__ and resp.__name__ in P.__all__


@pytest.mark.parametrize("cls,version", list(all_versions(REQUESTS + RESPONSES)),
                         ids=lambda x: getattr(x, "__name__", str(x)))
def test_random_round_trip(cls, version):
    rnd = random.Random(f"{cls.__name__}{version}")
    for _ in range(3):
        msg = sample(cls, version, rnd)
        data = msg.encode(version)
        back = cls.decode(data, version)
        assert back.encode(version) == data
        assert cls.decode(data, version).to_dict() == back.to_dict()


@pytest.mark.one_backend
def test_backends_encode_and_decode_identically():
    if not _kernels.fast_available():
        pytest.skip("compiled backend not built")
    rnd = random.Random(5)
    try:
        for cls, version in all_versions(REQUESTS + RESPONSES):
            msg = sample(cls, version, rnd)
            _kernels.use("pure")
            a = msg.encode(version)
            da = cls.decode(a, version).to_dict()
            _kernels.use("fast")
            assert msg.encode(version) == a, (cls.__name__, version)
            assert cls.decode(a, version).to_dict() == da
    finally:
        _kernels.use("fast")


@pytest.mark.one_backend
def test_kernel_codes_agree():
    if not _kernels.fast_available():
        pytest.skip("compiled backend not built")
    fast = _kernels._load("fast")["protocol"]
    for name, code in fast.CODES.items():
        assert getattr(C, name) == code, name


def test_snake_case_attributes_and_dict_construction():
    req = P.ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[
        {"name": "t", "partition_data": [{"index": 0, "records": b"\x01\x02"}]}])
    assert isinstance(req.topic_data[0], P.ProduceRequest.TopicProduceData)
    assert req.topic_data[0].partition_data[0].index == 0
    assert req.transactional_id is None
    assert snake_case("PartitionIndex") == "partition_index"
    assert snake_case("ThrottleTimeMs") == "throttle_time_ms"
    d = req.to_dict()
    assert d["topic_data"][0]["partition_data"][0]["records"] == b"\x01\x02"
    assert P.ProduceRequest(**d) == req
    with pytest.raises(TypeError, match="no field"):
        P.ProduceRequest(ackz=1)


def test_records_are_views_into_the_frame():
    resp = P.FetchResponse(responses=[{"topic": "t", "partitions": [
        {"partition_index": 3, "records": b"batch-bytes"}]}])
    frame = P.encode_response(resp, 11, correlation_id=9)
    corr, back = P.decode_response(P.ApiKey.FETCH, 11, frame)
    recs = back.responses[0].partitions[0].records
    assert corr == 9 and isinstance(recs, memoryview) and recs.obj is frame
    assert bytes(recs) == b"batch-bytes"


def test_request_header_v2_keeps_classic_client_id():
    req = P.ApiVersionsRequest(client_software_name="kw", client_software_version="1")
    frame = P.encode_request(req, 3, correlation_id=0x01020304, client_id="abc")
    # size | api key 18 | version 3 | correlation | client id: int16 length 3 + "abc" | no tags
    assert frame[4:17] == bytes.fromhex("00120003010203040003616263") and frame[17] == 0
    decoded = P.decode_request(frame)
    assert decoded.client_id == "abc" and decoded.message == req
    assert P.request_header_version(18, 3) == 2 and P.request_header_version(18, 2) == 1
    null_client = P.encode_request(req, 3, correlation_id=1, client_id=None)
    assert null_client[12:14] == b"\xff\xff"


def test_api_versions_response_uses_header_v0_even_when_flexible():
    assert P.response_header_version(P.ApiKey.API_VERSIONS, 3) == 0
    assert P.response_header_version(P.ApiKey.METADATA, 9) == 1
    assert P.response_header_version(P.ApiKey.METADATA, 8) == 0
    resp = P.ApiVersionsResponse(api_keys=[{"api_key": 3, "min_version": 0, "max_version": 12}])
    frame = P.encode_response(resp, 3, correlation_id=7)
    assert frame[4:8] == b"\0\0\0\7" and frame[8:10] == b"\0\0"  # no header tag byte
    assert P.decode_response(18, 3, frame).message == resp
    meta = P.encode_response(P.MetadataResponse(), 9, correlation_id=7)
    assert meta[8] == 0  # header v1: empty tag section after the correlation id


def test_unknown_tagged_fields_round_trip():
    w = Writer().int16(0).array([], lambda w, x: None, compact=True).int32(5)
    w.tagged_fields({50: b"zz", 77: b"\x01"})
    data = w.getvalue()
    msg = P.ApiVersionsResponse.decode(data, 3)
    assert msg.throttle_time_ms == 5
    assert sorted(msg.unknown_tagged_fields) == [(50, b"zz"), (77, b"\x01")]
    assert msg.encode(3) == data
    assert msg.supported_features == [] or msg.supported_features is not None


def test_tagged_field_known_and_default_omitted():
    resp = P.FetchResponse(responses=[{"topic_id": uuid.UUID(int=1), "partitions": [
        {"partition_index": 0, "current_leader": {"leader_id": 4, "leader_epoch": 2}}]}])
    data = resp.encode(13)
    back = P.FetchResponse.decode(data, 13)
    part = back.responses[0].partitions[0]
    assert part.current_leader.leader_id == 4
    assert part.diverging_epoch == P.FetchResponse.FetchableTopicResponse.PartitionData.EpochEndOffset()
    # at defaults the tagged fields are not written at all: 1 byte empty tag section
    plain = P.FetchResponse(responses=[{"topic_id": uuid.UUID(int=1), "partitions": [
        {"partition_index": 0}]}]).encode(13)
    assert len(data) > len(plain)


# ---- bad input -----------------------------------------------------------------------

def _metadata_frame():
    rnd = random.Random(1)
    msg = sample(P.MetadataResponse, 12, rnd)
    return msg, P.encode_response(msg, 12, correlation_id=3)


def test_truncated_frames_raise_truncated():
    msg, frame = _metadata_frame()
    for cut in range(0, len(frame) - 1, max(1, len(frame) // 50)):
        with pytest.raises(ProtocolError):
            P.decode_response(P.ApiKey.METADATA, 12, frame[:cut])
    with pytest.raises(P.TruncatedFrameError):
        P.decode_response(P.ApiKey.METADATA, 12, frame[:-1])


def test_body_truncated_under_an_honest_size_prefix():
    msg, frame = _metadata_frame()
    body = frame[4:-3]
    reframed = P.frame(body)
    with pytest.raises(P.MessageDecodeError) as exc:
        P.decode_response(P.ApiKey.METADATA, 12, reframed)
    assert exc.value.position is not None and exc.value.position <= len(body)


def test_size_limit_negative_and_lying_lengths():
    _msg, frame = _metadata_frame()
    with pytest.raises(P.FrameTooLargeError):
        P.decode_response(P.ApiKey.METADATA, 12, frame, max_frame_size=100)
    with pytest.raises(P.InvalidFrameError):
        P.decode_response(P.ApiKey.METADATA, 12, b"\xff\xff\xff\xfe" + frame[4:])
    with pytest.raises(P.InvalidFrameError):  # prefix says fewer bytes than given
        P.decode_response(P.ApiKey.METADATA, 12, (len(frame) - 10).to_bytes(4, "big") + frame[4:])
    reader = P.FrameReader(max_frame_size=64)
    with pytest.raises(P.FrameTooLargeError):
        reader.feed(b"\x00\x01\x00\x00")


def test_lying_inner_lengths_never_read_past_the_frame():
    # one broker whose host string claims 1000 bytes inside a 12-byte body
    body = b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01" + b"\x03\xe8ab"
    with pytest.raises(P.MessageDecodeError, match="past the end"):
        P.MetadataResponse.decode(body, 0)
    # array count of 2**31-1 elements
    with pytest.raises(P.MessageDecodeError, match="cannot fit"):
        P.MetadataResponse.decode(b"\x7f\xff\xff\xff", 0)
    # negative non-nullable array length
    with pytest.raises(P.MessageDecodeError, match="negative"):
        P.MetadataResponse.decode(b"\xff\xff\xff\xfe", 0)
    # decoding inside a bigger buffer stops at `end`, even if bytes after it would fit
    good = P.SaslHandshakeRequest(mechanism="PLAIN").encode(1)
    with pytest.raises(P.MessageDecodeError):
        P.SaslHandshakeRequest.decode(good + b"more", 1, end=len(good) - 1)
    assert P.SaslHandshakeRequest.decode(good + b"more", 1, end=len(good)).mechanism == "PLAIN"


def test_trailing_bytes_are_an_error():
    good = P.HeartbeatResponse(error_code=0).encode(0)
    with pytest.raises(P.MessageDecodeError, match="wrong version"):
        P.HeartbeatResponse.decode(good + b"\0", 0)


def test_unknown_api_key_and_unsupported_version():
    with pytest.raises(P.UnknownApiKeyError):
        P.decode_response(99, 0, P.frame(b"\0\0\0\1"))
    with pytest.raises(UnsupportedVersionError):
        P.decode_response(P.ApiKey.METADATA, 13, P.frame(b"\0\0\0\1"))
    with pytest.raises(UnsupportedVersionError):
        P.MetadataRequest().encode(-1)
    with pytest.raises(P.UnknownApiKeyError):
        P.decode_request(P.frame(b"\x00\x63\x00\x00\x00\x00\x00\x01\xff\xff"))
    with pytest.raises(UnsupportedVersionError):
        P.decode_request(P.frame(b"\x00\x03\x00\x63\x00\x00\x00\x01\xff\xff"))


def test_bad_utf8_is_a_decode_error():
    body = b"\x00\x02\xff\xfe"
    with pytest.raises(P.MessageDecodeError, match="UTF-8"):
        P.SaslHandshakeRequest.decode(body, 0)


def test_encode_errors_are_clear():
    with pytest.raises(P.MessageEncodeError, match="HeartbeatRequest"):
        P.HeartbeatRequest(generation_id=2**40).encode(0)
    with pytest.raises(P.MessageEncodeError):
        P.HeartbeatRequest(group_id=None).encode(0)
    with pytest.raises(P.MessageEncodeError):
        P.HeartbeatRequest(group_id=123).encode(4)
    with pytest.raises(TypeError):
        P.encode_request(P.HeartbeatResponse(), 0, 1)


def test_frame_reader_splits_a_stream():
    frames = [P.encode_response(P.HeartbeatResponse(error_code=i), 4, correlation_id=i)
              for i in range(5)]
    stream = b"".join(frames)
    reader = P.FrameReader()
    got = []
    for i in range(0, len(stream), 3):
        got += reader.feed(stream[i:i + 3])
    assert reader.pending == 0 and len(got) == 5
    for i, payload in enumerate(got):
        assert P.peek_correlation_id(payload) == i
        corr, msg = P.decode_response(12, 4, payload, sized=False)
        assert corr == i and msg.error_code == i
    payload, end = P.read_frame(stream)
    assert bytes(payload) == got[0] and end == len(frames[0])


def test_supported_versions_cover_kafka_3_9():
    sv = P.supported_versions()
    assert sv[0] == (0, 11) and sv[1] == (0, 17) and sv[3] == (0, 12) and sv[18] == (0, 4)


# ---- primitives ----------------------------------------------------------------------

def test_primitives_round_trip():
    u = uuid.uuid4()
    w = (Writer().int8(-5).bool(True).int16(-300).uint16(65535).int32(-7).uint32(2**32 - 1)
         .int64(-2**63).float64(1.5).uuid(u).uvarint(300).varint(-2**31).varlong(2**63 - 1)
         .string("héllo").string(None, compact=True).string("c", compact=True)
         .bytes(b"\0\1").bytes(None, compact=True).records(b"recs", compact=True)
         .array([1, 2, 3], Writer.int32).array(None, Writer.int32, compact=True)
         .tagged_fields({5: b"x", 1: b""}))
    r = Reader(w.getvalue())
    assert r.int8() == -5 and r.bool() is True and r.int16() == -300 and r.uint16() == 65535
    assert r.int32() == -7 and r.uint32() == 2**32 - 1 and r.int64() == -2**63
    assert r.float64() == 1.5 and r.uuid() == u and r.uvarint() == 300
    assert r.varint() == -2**31 and r.varlong() == 2**63 - 1
    assert r.string() == "héllo" and r.string(compact=True, nullable=True) is None
    assert r.string(compact=True) == "c" and r.bytes() == b"\0\1"
    assert r.bytes(compact=True, nullable=True) is None
    view = r.records(compact=True)
    assert isinstance(view, memoryview) and bytes(view) == b"recs"
    assert r.array(Reader.int32) == [1, 2, 3]
    assert r.array(Reader.int32, compact=True, nullable=True) is None
    assert r.tagged_fields() == {1: b"", 5: b"x"} and r.remaining == 0


def test_primitives_are_bounded():
    with pytest.raises(P.MessageDecodeError):
        Reader(b"\x00\x05ab").string()
    with pytest.raises(P.MessageDecodeError):
        Reader(b"\xff\xff").string()
    with pytest.raises(P.MessageDecodeError):
        Reader(b"\x80\x80\x80\x80\x80\x01").uvarint()
    with pytest.raises(P.MessageDecodeError):
        Reader(b"\x01\x02\x03", end=2).int32()
    assert issubclass(P.MessageDecodeError, KafkaWireError)


def test_kernel_read_uvarint():
    assert _kernels.read_uvarint(b"\xac\x02", 0, 2) == (300, 2)
    with pytest.raises(P.MessageDecodeError):
        _kernels.read_uvarint(b"\xac\x02", 0, 1)


def test_trailing_bytes_allowed_on_request():
    frame = P.encode_response(P.HeartbeatResponse(error_code=3), 4, correlation_id=2)
    padded = P.frame(frame[4:] + b"\0")
    with pytest.raises(P.MessageDecodeError):
        P.decode_response(12, 4, padded)
    assert P.decode_response(12, 4, padded, allow_trailing=True).message.error_code == 3


def test_api_versions_unsupported_version_falls_back_to_v0_body():
    # a broker answering a v4 request it does not know with a v0 body and error 35
    v0 = P.ApiVersionsResponse(error_code=35, api_keys=[
        {"api_key": 18, "min_version": 0, "max_version": 2}])
    frame = P.encode_response(v0, 0, correlation_id=1)
    corr, body = P.decode_response(P.ApiKey.API_VERSIONS, 4, frame)
    assert corr == 1 and body.error_code == 35 and body.api_keys[0].max_version == 2


def test_large_record_sections_encode_exactly():
    big = bytes(range(256)) * 1024  # 256 KiB: takes the copy-once path
    resp = P.FetchResponse(responses=[{"topic_id": uuid.UUID(int=5), "partitions": [
        {"partition_index": i, "records": big[i:]} for i in range(3)] + [
        {"partition_index": 9, "records": b"small"}]}])
    body = resp.encode(16)
    back = P.FetchResponse.decode(body, 16)
    assert [bytes(p.records) for p in back.responses[0].partitions] == \
        [big, big[1:], big[2:], b"small"]
    assert back.encode(16) == body
    frame = P.encode_response(resp, 16, correlation_id=4)
    assert frame[4:] == b"\0\0\0\4\0" + body and int.from_bytes(frame[:4], "big") == len(frame) - 4
    req = P.ProduceRequest(acks=1, timeout_ms=5, topic_data=[
        {"name": "t", "partition_data": [{"index": 0, "records": big}]}])
    rframe = P.encode_request(req, 9, correlation_id=1, client_id="c")
    assert bytes(P.decode_request(rframe).message.topic_data[0].partition_data[0].records) == big


@pytest.mark.one_backend
def test_protocol_kernel_names_are_not_shadowed():
    # _kernels flattens every kernel module into one namespace
    for be in (["fast", "pure"] if _kernels.fast_available() else ["pure"]):
        mods = _kernels._load(be)
        mine = set(mods["protocol"].__all__)
        for name, mod in mods.items():
            if name != "protocol":
                assert not mine & set(mod.__all__), (be, name, mine & set(mod.__all__))
