"""Log directories on object storage: S3 over loopback (moto's server), ``file://`` URLs.

Everything read through an ``s3://`` URL must equal the local read of the same
folders: ``Log.records()``, the CLI commands, the Spark data source.  The
server is a real S3 protocol peer (HTTP, ranged GETs, listings), started in
this process on 127.0.0.1.
"""
from __future__ import annotations

import itertools
import json
import logging
import os

import pytest

from spark_fixtures import (expected_rows, logdirs, read_in_process, rows_of_spark,  # noqa: F401
                            rows_of_table, spark)
from storage_support import assert_cli_like_local, assert_logs_like_local, cli as _cli, folder_commands, records as _records

from kafkawire.errors import CorruptRecordError, ObjectNotFoundError, ObjectTruncatedError, StorageError
from kafkawire.log import Log, LogDir
from kafkawire.log import storage as S

pytest.importorskip("moto.server")
pytest.importorskip("s3fs")
pytest.importorskip("boto3")

BUCKET = "kafka-backups"
KEY, SECRET = "test-key", "test-secret"


@pytest.fixture(scope="module")
def s3(logdirs, tmp_path_factory):
    """A moto S3 server on loopback holding a copy of ``logdirs`` under s3://kafka-backups/logs/."""
    import boto3
    from moto.server import ThreadedMotoServer
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                          aws_secret_access_key=SECRET, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    for d, _, names in os.walk(logdirs):
        for n in names:
            full = os.path.join(d, n)
            client.upload_file(full, BUCKET, "logs/" + os.path.relpath(full, logdirs))
    yield {"endpoint": endpoint, "client": client, "url": f"s3://{BUCKET}/logs",
           "options": {"fs.s3a.endpoint": endpoint, "fs.s3a.access.key": KEY,
                       "fs.s3a.secret.key": SECRET, "fs.s3a.path.style.access": "true"}}
    server.stop()


@pytest.fixture
def aws_env(s3, monkeypatch):
    """The standard AWS environment variables pointing at the server (as a shell with the AWS CLI has)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3["endpoint"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    S._cache.clear()
    yield
    S._cache.clear()


def test_log_records_from_s3_equal_local(s3, logdirs):
    st = S.storage_for(s3["url"], s3["options"])
    with LogDir.open(s3["url"], storage=st) as remote, LogDir.open(logdirs) as local:
        assert_logs_like_local(remote, local, "s3://")


def test_log_open_from_the_standard_environment(aws_env, s3, logdirs):
    name = sorted(n for n in os.listdir(logdirs) if n.startswith("orders-"))[0]
    with Log.open(f"s3a://{BUCKET}/logs/{name}/") as r, Log.open(os.path.join(logdirs, name)) as lo:
        assert r.path == f"s3a://{BUCKET}/logs/{name}"
        assert (r.topic, r.partition) == (lo.topic, lo.partition)
        assert _records(r) == _records(lo)


def test_cli_reads_s3_urls_like_local_folders(aws_env, s3, logdirs):
    url = s3["url"]
    assert_cli_like_local(url, logdirs, folder_commands(logdirs))
    part = sorted(n for n in os.listdir(logdirs) if n.startswith("orders-"))[0]
    code, _, errs = _cli("recover", f"{url}/{part}")
    assert code != 0 and "local folders only" in errs


def test_missing_and_truncated_objects_name_the_object(s3, logdirs):
    st = S.storage_for(s3["url"], s3["options"])
    with pytest.raises(ObjectNotFoundError, match="logs/nope/00000000000000000000.log"):
        st.read(f"{s3['url']}/nope/00000000000000000000.log")
    part = sorted(n for n in os.listdir(logdirs) if n.startswith("orders-"))[0]
    log = Log.open(f"{s3['url']}/{part}", storage=st)
    seg = log.segments[0]
    # the object is cut after it was listed: a reader asking for the listed bytes is told so
    key = seg.path.split(f"{BUCKET}/", 1)[1]
    body = s3["client"].get_object(Bucket=BUCKET, Key=key)["Body"].read()
    s3["client"].put_object(Bucket=BUCKET, Key=key, Body=body[: len(body) // 2])
    try:
        with pytest.raises(ObjectTruncatedError, match=key):
            list(log.records())
    finally:
        s3["client"].put_object(Bucket=BUCKET, Key=key, Body=body)
        log.close()


class _Flaky:
    """An fsspec filesystem stand-in whose reads fail ``fails`` times before working."""

    def __init__(self, fails):
        import fsspec
        self.fs = fsspec.filesystem("file")
        self.fails = fails
        self.calls = 0

    def _strip_protocol(self, path):
        return self.fs._strip_protocol(path)

    def cat_file(self, path, start=None, end=None):
        self.calls += 1
        if self.calls <= self.fails:
            raise ConnectionResetError("connection reset by peer")
        return self.fs.cat_file(path, start=start, end=end)


def test_transient_errors_are_retried_with_backoff(tmp_path, caplog):
    f = tmp_path / "a.bin"
    f.write_bytes(b"0123456789")
    flaky = _Flaky(2)
    st = S.ObjectStorage("file", fs=flaky, backoff=0.001)
    with caplog.at_level(logging.WARNING, "kafkawire.log.storage"):
        assert st.read_range(f"file://{f}", 2, 3) == b"234"
    assert flaky.calls == 3 and "retrying" in caplog.text
    st = S.ObjectStorage("file", fs=_Flaky(100), retries=2, backoff=0.001)
    with pytest.raises(StorageError, match="failed after 3 attempts"):
        st.read(f"file://{f}")


def test_file_urls_go_through_the_object_layer(logdirs):
    url = "file://" + logdirs
    st = S.storage_for(url)
    assert st.ranged and isinstance(st, S.ObjectStorage)
    with LogDir.open(url) as remote, LogDir.open(logdirs) as local:
        for key in local.logs:
            assert _records(remote.logs[key]) == _records(local.logs[key])


def test_spark_style_options_become_storage_settings():
    o = S.storage_options("s3", {"fs.s3a.endpoint": "minio:9000", "fs.s3a.connection.ssl.enabled": "false",
                                 "fs.s3a.access.key": "a", "fs.s3a.secret.key": "b",
                                 "fs.s3a.endpoint.region": "eu-west-1",
                                 "fs.s3a.path.style.access": "true"})
    assert o == {"client_kwargs": {"endpoint_url": "http://minio:9000", "region_name": "eu-west-1"},
                 "key": "a", "secret": "b", "config_kwargs": {"s3": {"addressing_style": "path"}}}
    assert S.storage_options("s3", {"fs.s3a.endpoint": "s3.example.com"})["client_kwargs"] == {
        "endpoint_url": "https://s3.example.com"}
    assert S.storage_options("s3", {"storage_options": '{"anon": true}'}) == {"anon": True}
    assert S.storage_options("s3", {}) == {}
    assert S.storage_options("abfs", {"fs.azure.account.key.acct.dfs.core.windows.net": "k"}) == {
        "account_name": "acct", "account_key": "k"}
    with pytest.raises(StorageError, match="not valid JSON"):
        S.storage_options("s3", {"storage_options": "{nope"})
    with pytest.raises(StorageError, match="unsupported URL scheme"):
        S.storage_for("ftp://host/logs")
    assert S.absolute("s3://b/logs/") == "s3://b/logs" and S.absolute("s3://b") == "s3://b"


# -- Spark ---------------------------------------------------------------------------

def _spark_opts(s3):
    """The settings as a Spark job passes them: options named like Hadoop's s3a settings."""
    return dict(s3["options"])


@pytest.mark.one_backend
def test_data_source_reads_s3_in_ranged_blocks(s3, logdirs, monkeypatch):
    import kafkawire.spark.reader as R
    opts = {"path": s3["url"], "includeheaders": "true", **_spark_opts(s3)}
    monkeypatch.setattr(R, "READ_BLOCK", 5000)    # batches cut by block ends carry over
    for extra, kw in (({}, {}), ({"isolation": "read_committed", "minpartitions": "3"},
                                 {"isolation": "read_committed"})):
        tasks, table = read_in_process({**opts, **extra})
        assert all(sl.path.startswith("s3://") for t in tasks for sl in t.slices)
        assert rows_of_table(table) == expected_rows(logdirs, **kw)
    # the blocks of a slice fill one column builder: one Arrow batch per 65536 rows, not per block
    from kafkawire.spark.options import parse_options
    st = R.ReadSettings.from_options(parse_options(opts))
    for sl in (sl for t in tasks for sl in t.slices):
        sizes = [b.num_rows for b in R.read_slice(sl, st)]
        assert len(sizes) == max(1, -(-sum(sizes) // st.records_per_batch)), sizes


@pytest.mark.one_backend
def test_data_source_storage_options_are_checked_at_load(s3):
    from kafkawire.spark.options import OptionError, parse_options
    with pytest.raises(OptionError, match="unsupported URL scheme"):
        parse_options({"path": "ftp://host/logs"})
    with pytest.raises(OptionError, match="not valid JSON"):
        parse_options({"path": s3["url"], "storage_options": "{x"})
    ro = parse_options({"path": s3["url"], "fs.s3a.connection.maximum": "50", **_spark_opts(s3)})
    assert ro.storage_options["fs.s3a.endpoint"] == s3["endpoint"]


@pytest.mark.one_backend
@pytest.mark.spark
def test_spark_reads_s3_like_local(spark, s3, logdirs):
    reader = spark.read.format("kafkawire").option("includeHeaders", "true")
    for k, v in _spark_opts(s3).items():
        reader = reader.option(k, v)
    df = reader.load(s3["url"])
    assert rows_of_spark(df.collect()) == expected_rows(logdirs)
    so = json.dumps({"client_kwargs": {"endpoint_url": s3["endpoint"]}, "key": KEY, "secret": SECRET})
    df = (spark.read.format("kafkawire").option("storage_options", so).option("subscribe", "orders")
          .load(s3["url"].replace("s3://", "s3a://")))
    assert df.count() == len(expected_rows(logdirs, topics=["orders"]))


# -- streaming ranged reads ------------------------------------------------------------

def _s3_storage(s3, **kw):
    """An S3 storage for the server with its own settings (block size, read-ahead)."""
    return S.ObjectStorage("s3", S.storage_options("s3", s3["options"]), **kw)


def _no_whole_reads(monkeypatch):
    def refuse(self, path, size=None):
        raise AssertionError(f"{path} read whole")
    monkeypatch.setattr(S.ObjectStorage, "map", refuse)


@pytest.mark.parametrize("block, ahead", [(700, False), (4096, True), (1 << 20, True)])
def test_records_stream_through_small_blocks_equal_local(s3, logdirs, monkeypatch, block, ahead):
    # blocks smaller than many batches (each such batch gets a block of its own), blocks cutting
    # batches (the cut batch starts the next block), and blocks holding whole segments
    _no_whole_reads(monkeypatch)
    st = _s3_storage(s3, block_size=block, read_ahead=ahead)
    with LogDir.open(s3["url"], storage=st) as remote, LogDir.open(logdirs) as local:
        for key in local.logs:
            r, lo = remote.logs[key], local.logs[key]
            assert _records(r) == _records(lo), key
            mid = (lo.start_offset + lo.next_offset) // 2
            assert r.locate(mid)[1] == lo.locate(mid)[1]
            recs = list(lo.records())
            if recs:
                ts = recs[len(recs) // 2].timestamp
                assert r.offset_for_timestamp(ts) == lo.offset_for_timestamp(ts), key
            assert r.verify(deep=True).ok == lo.verify(deep=True).ok, key


def _big_segment(root, total, rnd_seed=7):
    """One partition folder with a single segment of about ``total`` bytes of batches of
    varied sizes (a few larger than the read blocks of the test)."""
    import random
    from kafkawire import LogWriter
    from kafkawire.records import BatchBuilder
    rnd = random.Random(rnd_seed)
    folder = os.path.join(root, "big-0")
    written = 0
    with LogWriter(folder, segment_bytes=1 << 30) as w:
        i = 0
        while written < total:
            b = BatchBuilder(2, "none", base_offset=0)
            n = 1 if i % 97 == 5 else rnd.randint(1, 40)
            size = 300_000 if n == 1 else rnd.randint(10, 400)
            for j in range(n):
                b.append(rnd.randbytes(size), key=b"k%d" % j, timestamp=1_700_000_000_000 + i)
            raw = b.build()
            w.append_batch(raw)
            written += len(raw)
            i += 1
    return folder


def _watch_reads(monkeypatch):
    """Lists filled as object storage is read: ``(position, length)`` of every ranged read of
    a stream, the bytes of read buffers held at each block handed on, each block's length."""
    requests, held, blocks = [], [], []
    fill, stream = S.ObjectStorage._fill, S.ObjectStorage.stream

    def counting(self, f, path, position, view):
        requests.append((position, len(view)))
        return fill(self, f, path, position, view)

    def watched(self, path, start, end, block_size=None, buffers=None, **kw):
        bufs = [] if buffers is None else buffers
        for view in stream(self, path, start, end, block_size, bufs, **kw):
            blocks.append(len(view))
            held.append(sum(len(b) for b in bufs))
            yield view
    monkeypatch.setattr(S.ObjectStorage, "_fill", counting)
    monkeypatch.setattr(S.ObjectStorage, "stream", watched)
    return requests, held, blocks


def test_a_segment_larger_than_the_window_streams_in_bounded_memory(s3, tmp_path, monkeypatch):
    folder = _big_segment(str(tmp_path), 8 << 20)
    for n in os.listdir(folder):
        s3["client"].upload_file(os.path.join(folder, n), BUCKET, f"big/big-0/{n}")
    _no_whole_reads(monkeypatch)
    block, biggest = 256 << 10, 310_000
    st = _s3_storage(s3, block_size=block)
    assert st.read_ahead
    requests, held, blocks = _watch_reads(monkeypatch)
    with Log.open(folder) as lo:
        seg_size = lo.segments[0].size
        want = [(r.offset, r.value) for r in lo.records()]
    assert seg_size > 30 * block
    with Log.open(f"s3://{BUCKET}/big/big-0", storage=st) as r:
        del requests[:], held[:], blocks[:]    # opening the log read index entries and its tail
        count = 0
        for rec, (offset, value) in zip(r.records(), want):
            assert (rec.offset, rec.value) == (offset, value)
            count += 1
    assert count == len(want)
    # finding the first batch reads a little; then one sequential pass in reads of at most a
    # block, or of a batch larger than a block, never fetching a batch cut by a block's end again
    first = max(k for k, (p, _) in enumerate(requests) if p == 0)
    assert sum(n for _, n in requests[:first]) <= 2 * biggest
    reads = requests[first:]
    assert max(n for _, n in reads) <= biggest
    assert [p for p, _ in reads] == list(itertools.accumulate([0] + [n for _, n in reads[:-1]]))
    assert sum(n for _, n in reads) == seg_size
    assert len(reads) < 2 * seg_size / block
    # what is held: two read buffers (the block decoded, the next one read ahead), each a block
    # or the largest batch; each block handed on holds whole batches and is at most that large
    assert max(held) <= 2 * biggest < seg_size / 10
    assert max(blocks) <= biggest and len(blocks) > 30


def test_a_segment_removed_or_cut_while_streaming_names_the_object(s3, logdirs):
    st = _s3_storage(s3, block_size=2048)
    part = sorted(n for n in os.listdir(logdirs) if n.startswith("orders-"))[0]
    log = Log.open(f"{s3['url']}/{part}", storage=st)
    seg = log.segments[0]
    key = seg.path.split(f"{BUCKET}/", 1)[1]
    body = s3["client"].get_object(Bucket=BUCKET, Key=key)["Body"].read()
    try:
        s3["client"].put_object(Bucket=BUCKET, Key=key, Body=body[: len(body) // 2])
        with pytest.raises(ObjectTruncatedError, match=key):
            list(log.records())
        s3["client"].delete_object(Bucket=BUCKET, Key=key)
        with pytest.raises(ObjectNotFoundError, match=key):
            list(log.records())
    finally:
        s3["client"].put_object(Bucket=BUCKET, Key=key, Body=body)
        log.close()


def _batches_file(tmp_path, sizes):
    """A file of v2 batches with one record of each value size: ``(path, batch ends)``."""
    from kafkawire.records import BatchBuilder
    out, ends = bytearray(), []
    for i, n in enumerate(sizes):
        b = BatchBuilder(2, "none", base_offset=i)
        b.append(bytes([i % 251]) * n, timestamp=i)
        out += b.build()
        ends.append(len(out))
    f = tmp_path / "00000000000000000000.log"
    f.write_bytes(bytes(out))
    return str(f), ends, bytes(out)


@pytest.mark.parametrize("ahead", [False, True])
def test_stream_blocks_end_at_batch_boundaries(tmp_path, ahead):
    import random
    rnd = random.Random(3)
    sizes = [rnd.choice([10, 200, 900, 3000]) for _ in range(60)]
    path, ends, data = _batches_file(tmp_path, sizes)
    st = S.ObjectStorage("file", block_size=1000, read_ahead=ahead)
    for start_k, end_k in ((0, len(ends) - 1), (5, 40), (17, 18)):
        start = ends[start_k - 1] if start_k else 0
        end = ends[end_k]
        bufs = []
        pos = start
        for view in st.stream(f"file://{path}", start, end, buffers=bufs):
            assert bytes(view) == data[pos:pos + len(view)]
            pos += len(view)
            assert pos in ends                              # whole batches only
            assert len(view) <= max(1000, max(b - a for a, b in zip([0] + ends, ends)))
        assert pos == end
        assert len(bufs) == 2 and all(len(b) <= 3100 for b in bufs)
    # bytes that are not batches still come back whole, in order
    junk = tmp_path / "junk.log"
    raw = bytes(rnd.getrandbits(8) for _ in range(5000))
    junk.write_bytes(raw)
    got = b"".join(bytes(v) for v in st.stream(f"file://{junk}", 100, 5000))
    assert got == raw[100:]
    # and so do byte ranges read without regard to batches
    views = [bytes(v) for v in st.stream(f"file://{path}", 0, end, batches=False)]
    assert b"".join(views) == data[:end] and {len(v) for v in views[:-1]} == {1000}


class _FlakyFile:
    """A file object whose reads fail ``fails`` times in all before working."""

    def __init__(self, path, counter, fails):
        self.f = open(path, "rb")
        self.counter, self.fails = counter, fails

    def seek(self, pos):
        self.f.seek(pos)

    def readinto(self, view):
        self.counter[0] += 1
        if self.counter[0] <= self.fails:
            raise TimeoutError("read timed out")
        return self.f.readinto(view)

    def close(self):
        self.f.close()


def test_streamed_reads_are_retried_on_transient_errors(tmp_path, caplog):
    path, ends, data = _batches_file(tmp_path, [500] * 20)
    counter = [0]

    class FS:
        def _strip_protocol(self, p):
            return p[len("file://"):]

        def open(self, key, mode, **kw):
            return _FlakyFile(key, counter, 3)
    st = S.ObjectStorage("file", fs=FS(), block_size=2000, backoff=0.001)
    with caplog.at_level(logging.WARNING, "kafkawire.log.storage"):
        got = b"".join(bytes(v) for v in st.stream(f"file://{path}", 0, len(data)))
    assert got == data and "retrying" in caplog.text


@pytest.mark.parametrize("tail", [b"\0" * 5000, b"\0" * 12 + b"\x7f" * 40, None])
def test_damaged_segments_on_s3_read_and_verify_like_local_without_reading_whole(
        s3, logdirs, tmp_path, monkeypatch, tail):
    import shutil
    part = sorted(n for n in os.listdir(logdirs) if n.startswith("orders-"))[0]
    folder = tmp_path / part
    shutil.copytree(os.path.join(logdirs, part), folder)
    seg = sorted(n for n in os.listdir(folder) if n.endswith(".log"))[-1]
    data = (folder / seg).read_bytes()
    if tail is None:       # a CRC flipped in the middle of the segment
        with Log.open(str(folder)) as lo:
            pos = int(lo.segments[-1].headers()[len(lo.segments[-1].headers()) // 2, 0])
        data = data[:pos + 17] + bytes([data[pos + 17] ^ 0xFF]) + data[pos + 18:]
    else:
        data += tail
    (folder / seg).write_bytes(data)
    prefix = f"damaged-{len(tail or b'')}/{part}"
    for n in os.listdir(folder):
        s3["client"].upload_file(str(folder / n), BUCKET, f"{prefix}/{n}")
    _no_whole_reads(monkeypatch)
    url = f"s3://{BUCKET}/{prefix}"

    def problems(log, root):
        rep = log.verify(deep=True)
        return [(p.segment.replace(root, "R"), p.position, p.offset, p.kind, p.message)
                for p in rep.problems], rep.batches
    with Log.open(url, storage=_s3_storage(s3, block_size=1500)) as r, Log.open(str(folder)) as lo:
        assert problems(r, url) == problems(lo, str(folder))
        assert problems(lo, str(folder))[0]

        def read(log, root):
            try:
                return _records(log)
            except CorruptRecordError as exc:
                return str(exc).replace(root, "R")
        assert read(r, url) == read(lo, str(folder))


def test_column_chunks_stream_from_s3_like_local(s3, logdirs, monkeypatch):
    import numpy as np
    _no_whole_reads(monkeypatch)
    st = _s3_storage(s3, block_size=3000, read_ahead=True)
    with LogDir.open(s3["url"], storage=st) as remote, LogDir.open(logdirs) as local:
        for key in local.logs:
            r, lo = remote.logs[key], local.logs[key]
            mid = (lo.start_offset + lo.next_offset) // 2
            for kw in ({}, {"start_offset": mid, "end_offset": mid + 7}):
                got = [c for c in r.column_chunks(include_headers=True, **kw)]
                want = [c for c in lo.column_chunks(include_headers=True, **kw)]
                for col in ("offset", "timestamp"):
                    a = np.concatenate([getattr(c, col) for c in got]) if got else []
                    b = np.concatenate([getattr(c, col) for c in want]) if want else []
                    assert list(a) == list(b), (key, col, kw)
                assert ([v for c in got for v in c.values()] == [v for c in want for v in c.values()])


# -- the CLI given one segment's URL -----------------------------------------------------

def _without_root(result, path):
    """A command's ``(code, stdout, stderr)`` with the segment's folder written ``{R}``."""
    code, out, errs = result
    root = path.rsplit("/", 1)[0]
    return code, out.replace(root, "{R}"), errs.replace(root, "{R}")


_SEGMENT_COMMANDS = (["stats", "--no-progress", "{F}"],
                     ["stats", "--json", "--no-progress", "{F}"],
                     ["dump", "--no-progress", "--files", "{F}"],
                     ["dump", "--no-progress", "--deep-iteration", "--files", "{F}"],
                     ["dump", "--no-progress", "--json", "--deep-iteration", "--files", "{F}"])


def test_stats_and_dump_of_a_segment_url_stream_it_in_bounded_memory(aws_env, s3, tmp_path,
                                                                     monkeypatch):
    folder = _big_segment(str(tmp_path), 8 << 20)
    for n in os.listdir(folder):
        s3["client"].upload_file(os.path.join(folder, n), BUCKET, f"cli-big/big-0/{n}")
    name = sorted(n for n in os.listdir(folder) if n.endswith(".log"))[0]
    local, url = os.path.join(folder, name), f"s3://{BUCKET}/cli-big/big-0/{name}"
    seg_size = os.path.getsize(local)
    block, biggest = 256 << 10, 310_000
    S.object_storage(url).block_size = block      # the storage the CLI takes from the environment
    _no_whole_reads(monkeypatch)
    requests, held, _blocks = _watch_reads(monkeypatch)
    assert seg_size > 30 * block
    for argv in _SEGMENT_COMMANDS:
        del requests[:], held[:], _blocks[:]
        got = _cli(*[a.replace("{F}", url) for a in argv])
        assert got[0] == 0, (argv, got[2])
        # one sequential pass over the segment, each byte fetched once, in reads of a block or
        # of a batch larger than a block; two read buffers held, each a block or the largest batch
        assert [p for p, _ in requests] == list(itertools.accumulate([0] + [n for _, n in requests[:-1]]))
        assert sum(n for _, n in requests) == seg_size, argv
        assert max(n for _, n in requests) <= max(block, biggest)
        assert len(held) > 30 and max(held) <= 2 * max(block, biggest) < seg_size / 10, argv
        want = _cli(*[a.replace("{F}", local) for a in argv])
        assert _without_root(got, url) == _without_root(want, local), argv


@pytest.mark.parametrize("damage", ["zeros", "cut", "garbage", "crc"])
def test_stats_and_dump_of_a_damaged_segment_url_equal_local(aws_env, s3, logdirs, tmp_path,
                                                            monkeypatch, damage):
    part = sorted(n for n in os.listdir(logdirs) if n.startswith("orders-"))[0]
    name = sorted(n for n in os.listdir(os.path.join(logdirs, part)) if n.endswith(".log"))[-1]
    data = open(os.path.join(logdirs, part, name), "rb").read()
    with Log.open(os.path.join(logdirs, part)) as lo:
        rows = lo.segments[-1].headers()
    middle = int(rows[len(rows) // 2, 0])
    if damage == "zeros":
        data += b"\0" * 5000
    elif damage == "cut":           # a batch whose length runs past the end
        data += data[middle:middle + 12] + b"\x01" * 40
    elif damage == "garbage":       # a length below the minimum, then bytes
        data += b"\0" * 8 + b"\0\0\0\x05" + b"\x7f" * 3000
    else:                           # a checksum flipped in the middle
        data = data[:middle + 17] + bytes([data[middle + 17] ^ 0xFF]) + data[middle + 18:]
    (tmp_path / part).mkdir()
    local = tmp_path / part / name
    local.write_bytes(data)
    key = f"damaged-cli-{damage}/{part}/{name}"
    s3["client"].put_object(Bucket=BUCKET, Key=key, Body=data)
    url = f"s3://{BUCKET}/{key}"
    # many blocks: each batch a block of its own (1500), or blocks cutting batches
    S.object_storage(url).block_size = {"zeros": 4000, "cut": 1500, "garbage": 4000, "crc": 7000}[damage]
    _no_whole_reads(monkeypatch)
    for argv in _SEGMENT_COMMANDS + (["dump", "--no-progress", "--print-data-log", "--files", "{F}"],):
        got = _cli(*[a.replace("{F}", url) for a in argv])
        want = _cli(*[a.replace("{F}", str(local)) for a in argv])
        assert _without_root(got, url) == _without_root(want, str(local)), argv
        assert got[0] == 1 or damage == "crc", argv


# -- the CLI given index files' URLs ---------------------------------------------------

_INDEX_COMMANDS = (["dump", "--no-progress", "--files", "{I}", "{T}"],
                   ["dump", "--no-progress", "--json", "--files", "{I}", "{T}"],
                   ["dump", "--no-progress", "--verify-index-only", "--files", "{I}", "{T}"])


def _watch_pages(monkeypatch):
    """``(position, length)`` of every ranged read of the index dump's log, and the bytes of
    pages it held after each."""
    from kafkawire.cli.logbytes import LogPages
    requests, held = [], []
    fill, page = S.ObjectStorage._fill, LogPages._page

    def counting(self, f, path, position, view):
        requests.append((position, len(view)))
        return fill(self, f, path, position, view)

    def watched(self, k):
        view = page(self, k)
        held.append(sum(len(v) for v in self._pages.values()))
        return view
    monkeypatch.setattr(S.ObjectStorage, "_fill", counting)
    monkeypatch.setattr(LogPages, "_page", watched)
    return requests, held


def test_dump_of_index_urls_reads_the_log_in_pages(aws_env, s3, tmp_path, monkeypatch):
    folder = _big_segment(str(tmp_path), 8 << 20)
    for n in os.listdir(folder):
        s3["client"].upload_file(os.path.join(folder, n), BUCKET, f"cli-index/big-0/{n}")
    name = sorted(n for n in os.listdir(folder) if n.endswith(".log"))[0][:-4]
    local, url = os.path.join(folder, name), f"s3://{BUCKET}/cli-index/big-0/{name}"
    seg_size = os.path.getsize(local + ".log")
    assert os.path.getsize(local + ".index") > 8 * 100 and os.path.getsize(local + ".timeindex") > 12 * 100
    block, biggest = 256 << 10, 310_000
    S.object_storage(url).block_size = block
    _no_whole_reads(monkeypatch)
    requests, held = _watch_pages(monkeypatch)
    for argv in _INDEX_COMMANDS:
        del requests[:], held[:]
        got = _cli(*[a.replace("{I}", url + ".index").replace("{T}", url + ".timeindex") for a in argv])
        assert got[0] == 0, (argv, got[2])
        # each file's log read once in pages of a block (a batch larger than a block on its own):
        # about the segment's bytes for the two files, never more than two pages held
        fetched = sum(n for _, n in requests)
        assert seg_size <= fetched <= 2 * seg_size + 16 * biggest, (argv, fetched, seg_size)
        assert max(n for _, n in requests) <= max(block, biggest)
        assert held and max(held) <= 2 * block < seg_size / 10
        want = _cli(*[a.replace("{I}", local + ".index").replace("{T}", local + ".timeindex")
                      for a in argv])
        assert _without_root(got, url) == _without_root(want, local), argv


def _damage_indexes(folder, damage):
    """Damage the last segment of a partition folder copy the way ``damage`` says."""
    import struct
    name = sorted(n for n in os.listdir(folder) if n.endswith(".log"))[-1][:-4]
    log, idx, tix = (os.path.join(folder, name + s) for s in (".log", ".index", ".timeindex"))
    idata, tdata = bytearray(open(idx, "rb").read()), bytearray(open(tix, "rb").read())
    assert len(idata) >= 24 and len(tdata) >= 24, (name, len(idata), len(tdata))
    if damage == "positions":         # entries naming the wrong batch, or no batch at all
        idata[4:8], idata[12:16] = idata[20:24], struct.pack(">i", 7)
        idata[20:24] = struct.pack(">i", os.path.getsize(log) + 100)
    elif damage == "timestamps":      # a wrong timestamp, one out of order, an offset not a batch's end
        ts = struct.unpack(">q", tdata[12:20])[0]
        tdata[0:8] = struct.pack(">q", ts + 5)
        tdata[12:20] = struct.pack(">q", ts - 1000)
        tdata[20:24] = struct.pack(">i", struct.unpack(">i", tdata[20:24])[0] - 1)
    elif damage == "cut-log":         # the log ends before the indexed batches
        with open(log, "r+b") as f:
            f.truncate(os.path.getsize(log) // 3)
    elif damage == "garbage":         # an indexed batch's length and CRC made garbage
        pos = struct.unpack(">i", idata[12:16])[0]
        with open(log, "r+b") as f:
            f.seek(pos + 8)
            f.write(b"\x7f\xff\xff\x00" + b"\x55" * 20)
    elif damage == "no-log":
        os.remove(log)
    open(idx, "wb").write(idata)
    open(tix, "wb").write(tdata)
    return os.path.join(folder, name)


@pytest.mark.parametrize("damage", ["positions", "timestamps", "cut-log", "garbage", "no-log"])
def test_dump_of_damaged_index_urls_equals_local(aws_env, s3, logdirs, tmp_path, monkeypatch,
                                                 damage):
    import shutil
    part = sorted(n for n in os.listdir(logdirs) if n.startswith("orders-"))[0]
    folder = tmp_path / part
    shutil.copytree(os.path.join(logdirs, part), folder)
    local = _damage_indexes(str(folder), damage)
    prefix = f"damaged-index-{damage}/{part}"
    for n in os.listdir(folder):
        s3["client"].upload_file(str(folder / n), BUCKET, f"{prefix}/{n}")
    url = f"s3://{BUCKET}/{prefix}/{os.path.basename(local)}"
    # pages smaller than many batches, so that batches straddle them
    S.object_storage(url).block_size = 1000
    _no_whole_reads(monkeypatch)
    for argv in _INDEX_COMMANDS + (["dump", "--no-progress", "--files", "{D}"],):
        got = _cli(*[a.replace("{I}", url + ".index").replace("{T}", url + ".timeindex")
                     .replace("{D}", url.rsplit("/", 1)[0]) for a in argv])
        want = _cli(*[a.replace("{I}", local + ".index").replace("{T}", local + ".timeindex")
                      .replace("{D}", str(folder)) for a in argv])
        assert _without_root(got, url) == _without_root(want, local), argv
        assert want[2] or '"problem"' in want[1], argv      # every damage is reported
