"""Kafka's compression codecs: none, gzip, snappy, lz4 and zstd, with bounded output.

Kafka compresses a whole v2 batch's records (or a legacy wrapper message's
inner message set) as one payload.  Each codec has a Kafka-specific twist:

* **snappy** — the Java client writes snappy-java's *xerial* framing: a 16-byte
  header (``\\x82SNAPPY\\x00`` + big-endian version and compatible-version ints)
  then big-endian int32 length-prefixed raw snappy blocks.  Other clients
  (librdkafka, kafka-python) sometimes write bare raw snappy.  We read both and
  write xerial, as the Java client does.
* **lz4** — Kafka's LZ4 *frame* format (independent 64 KiB blocks, no
  checksums).  Magic-0 messages were written with a wrong frame-header
  checksum (KAFKA-3160: computed over the 4 magic bytes too); Kafka ignores the
  header checksum when reading magic 0 and writes the broken one for magic 0.
  We do the same, so the frame is parsed here and only blocks go to ``lz4.block``.
* **zstd** — one call into ``zstandard`` per frame: a frame that declares its content
  size is sized by it, one that does not (Kafka's Java client writes those) by its
  block headers; a frame that may inflate past the bound is streamed in small pieces.

Decompression is bounded: output past ``max_size`` raises
:class:`~kafkawire.errors.RecordTooLargeError` (reason ``"too_large"``) before
the memory is spent.  Damaged payloads raise
:class:`~kafkawire.errors.CorruptRecordError` (reason ``"compression"``); the
caller relocates the error to the batch's position with ``err.at(...)``.
A codec whose library is missing raises
:class:`~kafkawire.errors.CodecNotInstalledError` (an ``UnsupportedCodecError``)
naming what to install: not damage, the data may be fine.
"""
from __future__ import annotations

import struct
import zlib
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from kafkawire.errors import (CodecNotInstalledError, CorruptRecordError, RecordTooLargeError,
                              UnsupportedCodecError)

__all__ = ["CODECS", "DEFAULT_MAX_SIZE", "codec_id", "codec_name", "compress", "decompress",
           "available", "XERIAL_MAGIC", "xxh32"]

#: Codec names by Kafka's attribute id (bits 0-2 of the attributes).
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_IDS = {name: i for i, name in enumerate(CODECS)}

#: The bound used when ``max_size`` is None: 256 MiB of decompressed records per batch.
DEFAULT_MAX_SIZE = 256 << 20

#: snappy-java's stream header magic (then int32 version, int32 compatible version).
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024          # snappy-java SnappyOutputStream's default block size

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_U32LE = struct.Struct("<I")
_U64LE = struct.Struct("<Q")
_LZ4_BLOCK_SIZES = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}

_EXTRA_HINT = {
    "snappy": "pip install python-snappy  (a dependency of kafkawire; reinstall kafkawire)",
    "lz4": "pip install lz4  (a dependency of kafkawire; reinstall kafkawire)",
    "zstd": "pip install 'kafkawire[zstd]'",
}

Buffer = Union[bytes, bytearray, memoryview]


def codec_id(name: Union[str, int]) -> int:
    """Kafka's numeric id for codec ``name`` (an id passes through after a range check)."""
    if isinstance(name, int):
        if 0 <= name < len(CODECS):
            return name
        raise UnsupportedCodecError(
            f"unknown compression codec id {name}; Kafka defines 0-4 ({', '.join(CODECS)})")
    try:
        return _IDS[name.lower()]
    except (KeyError, AttributeError):
        raise UnsupportedCodecError(
            f"unknown compression codec {name!r}; use one of {', '.join(CODECS)}") from None


def codec_name(cid: Union[int, str]) -> str:
    """The codec name for Kafka's id ``cid`` (a name passes through after a check)."""
    return CODECS[codec_id(cid)]


# --------------------------------------------------------------- library loading

_libs: Dict[str, Any] = {}


def _lib(name: str) -> Any:
    """Import the codec library lazily; a missing one names the package to install."""
    mod = _libs.get(name)
    if mod is not None:
        return mod
    try:
        if name == "snappy":
            import snappy as mod  # type: ignore[no-redef]
        elif name == "lz4":
            import lz4.block
            import lz4.frame
            mod = lz4
        else:
            import zstandard as mod
    except ImportError as exc:
        raise CodecNotInstalledError(
            f"the {name} codec needs a library that is not installed ({exc}); "
            f"run: {_EXTRA_HINT[name]}", codec=name,
            extra="zstd" if name == "zstd" else None) from exc
    _libs[name] = mod
    return mod


def available(codec: Union[str, int]) -> bool:
    """True when ``codec``'s library imports (``none`` and ``gzip`` always do)."""
    name = codec_name(codec)
    if name in ("none", "gzip"):
        return True
    try:
        _lib(name)
        return True
    except UnsupportedCodecError:
        return False


def _as_bytes_view(data: Buffer) -> memoryview:
    mv = memoryview(data)
    return mv if mv.format == "B" and mv.ndim == 1 else mv.cast("B")


def _corrupt(codec: str, detail: object) -> CorruptRecordError:
    return CorruptRecordError(f"{codec} payload cannot be decompressed: {detail}",
                              reason="compression")


def _too_large(codec: str, limit: int) -> RecordTooLargeError:
    return RecordTooLargeError(
        f"{codec} payload inflates past the {limit}-byte limit; raise max_decompressed_size "
        "if the data is trusted", reason="too_large")


# ------------------------------------------------------------------------ xxh32

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: Buffer, seed: int = 0) -> int:
    """XXH32 of ``data`` (used only for the few bytes of an LZ4 frame descriptor)."""
    b = bytes(data)
    n = len(b)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while i <= n - 16:
            a, bb, c, d = struct.unpack_from("<4I", b, i)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + bb * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (k,) = struct.unpack_from("<I", b, i)
        h = (_rotl((h + k * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + b[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


_HC_CACHE: Dict[bytes, int] = {}


def _lz4_hc(descriptor: Buffer) -> int:
    """LZ4 frame header checksum; memoised (frames of one writer share descriptors)."""
    key = bytes(descriptor)
    hc = _HC_CACHE.get(key)
    if hc is None:
        hc = (xxh32(key) >> 8) & 0xFF
        if len(_HC_CACHE) < 4096:
            _HC_CACHE[key] = hc
    return hc


# ----------------------------------------------------------------- decompressors

#: First input slice fed to each gzip member; slices double up to ``_GZIP_FEED_MAX``.
_GZIP_FEED = 64
_GZIP_FEED_MAX = 1 << 20


def _gzip_decompress(data: Buffer, limit: int, magic: int) -> bytes:
    """Inflate one or more concatenated gzip members (as Java's GZIPInputStream does).

    The first member gets the whole payload (one call in the common case).  Later
    members are fed slices of a memoryview that double in size, so the bytes
    zlib copies as a member's ``unused_data`` stay within twice what the member
    used: a payload of many tiny (or empty) members costs linear time, not one
    copy of the rest of the payload per member.
    """
    mv = _as_bytes_view(data)
    n = len(mv)
    out: List[bytes] = []
    total = 0
    pos = 0
    first = True
    while True:
        d = zlib.decompressobj(31)
        step = n if first else _GZIP_FEED
        while True:
            stop = min(n, pos + step)
            try:
                chunk = d.decompress(mv[pos:stop], limit - total + 1)
            except zlib.error as exc:
                if first:
                    raise _corrupt("gzip", exc) from None
                # trailing bytes that are not a gzip member: ignored, as Java does
                return out[0] if len(out) == 1 else b"".join(out)
            if chunk:
                total += len(chunk)
                if total > limit:
                    raise _too_large("gzip", limit)
                out.append(chunk)
            if d.eof:
                pos = stop - len(d.unused_data)
                break
            if d.unconsumed_tail:
                raise _too_large("gzip", limit)
            if stop >= n:
                raise _corrupt("gzip", "truncated stream")
            pos = stop
            if step < _GZIP_FEED_MAX:
                step <<= 1
        first = False
        if n - pos < 2 or mv[pos] != 0x1F or mv[pos + 1] != 0x8B:
            break
    if not out:
        return b""
    return out[0] if len(out) == 1 else b"".join(out)


def _snappy_raw_length(data: Buffer, pos: int, end: int) -> int:
    """The uncompressed length a raw snappy block declares (its leading varint).

    Snappy inflates at most ~21x (a 3-byte copy yields 64 bytes), so a larger
    claim is corrupt: rejecting it here avoids allocating the claimed size.
    """
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end or shift > 28:
            raise _corrupt("snappy", "bad uncompressed-length header")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if result > (end - start) * 22 + 64:
                raise _corrupt("snappy", f"block of {end - start} bytes claims {result} "
                               "uncompressed bytes, more than snappy can encode")
            return result
        shift += 7


def _snappy_decompress(data: Buffer, limit: int, magic: int) -> bytes:
    snappy = _lib("snappy")
    mv = data if type(data) is bytes else _as_bytes_view(data)
    n = len(mv)
    try:
        if n >= 16 and mv[:8] == XERIAL_MAGIC:
            blocks = []
            pos = 16
            total = 0
            while pos < n:
                if pos + 4 > n:
                    raise _corrupt("snappy", f"truncated xerial block header at {pos}")
                (size,) = struct.unpack_from(">i", mv, pos)
                pos += 4
                if size < 0 or pos + size > n:
                    raise _corrupt("snappy", f"xerial block length {size} at {pos - 4} "
                                   f"runs past the payload ({n} bytes)")
                total += _snappy_raw_length(mv, pos, pos + size)
                if total > limit:
                    raise _too_large("snappy", limit)
                blocks.append(snappy.uncompress(mv[pos:pos + size]))
                pos += size
            return blocks[0] if len(blocks) == 1 else b"".join(blocks)
        if _snappy_raw_length(mv, 0, n) > limit:
            raise _too_large("snappy", limit)
        return snappy.uncompress(mv)
    except CorruptRecordError:
        raise
    except Exception as exc:  # python-snappy raises several unrelated types
        raise _corrupt("snappy", exc) from None


_LZ4_DESCRIPTORS: Dict[bytes, Tuple[int, int, int, bool, int]] = {}


def _lz4_descriptor(mv: Buffer, n: int) -> Tuple[int, int, int, bool, int]:
    """Parse an LZ4 frame descriptor: ``(block_max, block_checksum, hc_at, hc_ok, hc)``."""
    if n < 7 or mv[:4] != _LZ4_MAGIC:
        raise _corrupt("lz4", "not an LZ4 frame (bad magic)")
    flg, bd = mv[4], mv[5]
    if flg >> 6 != 1:
        raise _corrupt("lz4", f"unsupported LZ4 frame version {flg >> 6}")
    if flg & 0x02 or bd & 0x8F:
        raise _corrupt("lz4", "reserved LZ4 frame descriptor bits are set")
    block_max = _LZ4_BLOCK_SIZES.get((bd >> 4) & 0x7)
    if block_max is None:
        raise _corrupt("lz4", f"bad LZ4 block-size code {(bd >> 4) & 0x7}")
    hc_at = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if n <= hc_at:
        raise _corrupt("lz4", "truncated LZ4 frame descriptor")
    hc = _lz4_hc(mv[4:hc_at])
    return block_max, 4 if flg & 0x10 else 0, hc_at, mv[hc_at] == hc, hc


#: LZ4 cannot inflate a payload more than this (a 255-byte match run costs one byte).
_LZ4_MAX_RATIO = 256


def _lz4_decompress(data: Buffer, limit: int, magic: int) -> bytes:
    lz4 = _libs.get("lz4") or _lib("lz4")
    n = len(data)
    if magic != 0 and n * _LZ4_MAX_RATIO <= limit:
        # Cannot pass the bound: one library call, which checks the frame itself.
        # What it refuses takes the walk below, for a precise error.
        try:
            return lz4.frame.decompress(data)
        except Exception:
            pass
    head = bytes(data[:7])
    desc = _LZ4_DESCRIPTORS.get(head)      # Kafka's frames all share one 7-byte head
    mv: Buffer
    if desc is None:
        mv = data if type(data) is bytes else _as_bytes_view(data)
        n = len(mv)
        desc = _lz4_descriptor(mv, n)
        if desc[2] == 6 and len(_LZ4_DESCRIPTORS) < 64:
            _LZ4_DESCRIPTORS[head] = desc
    else:
        mv = data
    block_max, block_checksum, hc_at, hc_ok, hc = desc
    if not hc_ok:
        # Magic 0 frames carry KAFKA-3160's broken checksum; Kafka skips the check for them.
        if magic != 0:
            raise _corrupt("lz4", "frame descriptor checksum mismatch (a magic>=1 frame must "
                           "carry the correct checksum; magic 0 frames may carry KAFKA-3160's)")
        fixed = bytearray(mv)
        fixed[hc_at] = hc
        mv = fixed
    # Walk the block headers: bounds the output before anything is inflated.
    pos = hc_at + 1
    bound = 0
    unpack = _U32LE.unpack_from
    while True:
        if pos + 4 > n:
            raise _corrupt("lz4", f"truncated frame: no end mark before byte {n}")
        (size,) = unpack(mv, pos)
        if size == 0:
            break
        size &= 0x7FFFFFFF
        if size > block_max:
            raise _corrupt("lz4", f"block of {size} bytes at {pos} exceeds the frame's "
                           f"{block_max}-byte block size")
        pos += 4 + size + block_checksum
        bound += block_max
    if hc_at > 6 and mv[4] & 0x08:
        bound = min(bound, _U64LE.unpack_from(mv, 6)[0])
    if bound > limit:
        return _lz4_bounded(lz4, mv, limit)
    try:
        return lz4.frame.decompress(mv)
    except Exception as exc:
        raise _corrupt("lz4", exc) from None


def _lz4_bounded(lz4: Any, mv: Buffer, limit: int) -> bytes:
    """Inflate a frame that may exceed ``limit``, stopping as soon as it does."""
    d = lz4.frame.LZ4FrameDecompressor()
    try:
        out = d.decompress(mv, max_length=limit + 1)
    except Exception as exc:
        raise _corrupt("lz4", exc) from None
    if len(out) > limit:
        raise _too_large("lz4", limit)
    if not d.eof:
        raise _corrupt("lz4", "truncated frame")
    return out


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 << 10


def _zstd_frames(mv: Buffer, n: int) -> List[Tuple[int, int, int]]:
    """Walk zstd frame and block headers: ``[(start, end, max_output)]`` per data frame.

    Only headers are read (a few bytes per 128 KiB block), which bounds the
    output before any memory is spent and catches truncation, which the
    streaming APIs of ``zstandard`` report as a silently short output.
    """
    frames = []
    pos = 0
    while pos < n:
        if pos + 4 > n:
            raise _corrupt("zstd", f"truncated frame magic at {pos}")
        (magic,) = struct.unpack_from("<I", mv, pos)
        if 0x184D2A50 <= magic <= 0x184D2A5F:           # skippable frame
            if pos + 8 > n:
                raise _corrupt("zstd", f"truncated skippable frame at {pos}")
            (size,) = struct.unpack_from("<I", mv, pos + 4)
            pos += 8 + size
            if pos > n:
                raise _corrupt("zstd", "skippable frame runs past the payload")
            continue
        if magic != _ZSTD_MAGIC:
            raise _corrupt("zstd", f"bad frame magic {magic:#x} at {pos}")
        start = pos
        if pos + 5 > n:
            raise _corrupt("zstd", f"truncated frame header at {pos}")
        fhd = mv[pos + 4]
        if fhd & 0x08:
            raise _corrupt("zstd", f"reserved frame-header bit set at {pos}")
        single = fhd & 0x20
        fcs_size = (1 if single else 0, 2, 4, 8)[fhd >> 6]
        did_size = (0, 1, 2, 4)[fhd & 3]
        pos += 5 + (0 if single else 1) + did_size
        content_size = -1
        if fcs_size:
            if pos + fcs_size > n:
                raise _corrupt("zstd", "truncated frame header")
            content_size = int.from_bytes(bytes(mv[pos:pos + fcs_size]), "little")
            if fcs_size == 2:
                content_size += 256
        pos += fcs_size
        bound = 0
        while True:
            if pos + 3 > n:
                raise _corrupt("zstd", f"truncated block header at {pos}")
            hdr = mv[pos] | (mv[pos + 1] << 8) | (mv[pos + 2] << 16)
            pos += 3
            btype = (hdr >> 1) & 3
            bsize = hdr >> 3
            if btype == 0:
                pos += bsize
                bound += bsize
            elif btype == 1:
                pos += 1
                bound += bsize
            elif btype == 2:
                pos += bsize
                bound += _ZSTD_BLOCK_MAX
            else:
                raise _corrupt("zstd", f"reserved block type at {pos - 3}")
            if pos > n:
                raise _corrupt("zstd", f"block at {pos - 3} runs past the payload ({n} bytes)")
            if hdr & 1:
                break
        if fhd & 0x04:
            pos += 4
            if pos > n:
                raise _corrupt("zstd", "truncated frame checksum")
        if content_size >= 0:
            bound = min(bound, content_size)
        frames.append((start, pos, bound))
    return frames


def _zstd_one_frame_size(mv: Buffer, n: int) -> int:
    """Content size declared by a payload that starts with a zstd frame header, else -1.

    Only the header is read.  A size no single frame of ``n`` bytes could hold
    (every block has a 3-byte header and yields at most 128 KiB) gives -1 too,
    leaving such payloads to the block walk, which reports them.
    """
    if n < 6 or mv[0] != 0x28 or mv[1] != 0xB5 or mv[2] != 0x2F or mv[3] != 0xFD:
        return -1
    fhd = mv[4]
    fcs_code = fhd >> 6
    single = fhd & 0x20
    if fcs_code == 0 and not single:
        return -1
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
    fcs_size = (1, 2, 4, 8)[fcs_code]
    if pos + fcs_size > n:
        return -1
    size = int.from_bytes(mv[pos:pos + fcs_size], "little")
    if fcs_size == 2:
        size += 256
    if size > (n // 3 + 1) * _ZSTD_BLOCK_MAX:
        return -1
    return size


def _zstd_decompress(data: Buffer, limit: int, magic: int) -> bytes:
    zstd = _libs.get("zstd") or _lib("zstd")
    dctx = _libs.get("zstd_dctx")
    if dctx is None:
        dctx = _libs["zstd_dctx"] = zstd.ZstdDecompressor()
    mv = data if type(data) is bytes else _as_bytes_view(data)
    n = len(mv)
    # Common case (one frame that declares its size, within the limit): one call
    # into the library, which checks the size, truncation and trailing bytes.
    # Anything it refuses goes through the block walk below for a precise error.
    if 0 <= _zstd_one_frame_size(mv, n) <= limit:
        try:
            return dctx.decompress(mv, allow_extra_data=False)
        except zstd.ZstdError:
            pass
    frames = _zstd_frames(mv, n)
    if not frames:
        raise _corrupt("zstd", "no frame in payload")
    out: List[bytes] = []
    total = 0
    try:
        for start, end, bound in frames:
            piece = mv[start:end] if start or end != n else mv
            if total + bound <= limit:
                # ``bound`` (from the block headers) caps the output, so one call does
                # for frames without a content size too
                chunk = dctx.decompress(piece, max_output_size=max(bound, 1),
                                        allow_extra_data=False)
            else:   # may be a bomb: feed small pieces, checking the output as it grows
                dobj = dctx.decompressobj()
                parts = []
                got = 0
                for i in range(start, end, 1024):
                    part = dobj.decompress(mv[i:min(i + 1024, end)])
                    got += len(part)
                    if total + got > limit:
                        raise _too_large("zstd", limit)
                    parts.append(part)
                if not dobj.eof:
                    raise _corrupt("zstd", "truncated frame")
                chunk = b"".join(parts)
            total += len(chunk)
            if total > limit:
                raise _too_large("zstd", limit)
            out.append(chunk)
    except CorruptRecordError:
        raise
    except zstd.ZstdError as exc:
        raise _corrupt("zstd", exc) from None
    return out[0] if len(out) == 1 else b"".join(out)


def _none_decompress(data: Buffer, limit: int, magic: int) -> bytes:
    if len(data) > limit:
        raise _too_large("none", limit)
    return bytes(data)


_DECOMPRESSORS: Dict[int, Callable[[Buffer, int, int], bytes]] = {
    0: _none_decompress, 1: _gzip_decompress, 2: _snappy_decompress,
    3: _lz4_decompress, 4: _zstd_decompress,
}


def decompress(codec: Union[int, str], data: Buffer, *, magic: int = 2,
               max_size: Optional[int] = None) -> bytes:
    """Inflate a Kafka compressed payload written with ``codec``.

    ``magic`` matters for lz4 only (magic 0 accepts KAFKA-3160's header
    checksum).  Output longer than ``max_size`` (default
    :data:`DEFAULT_MAX_SIZE`) raises ``RecordTooLargeError``; damaged input
    raises ``CorruptRecordError(reason="compression")``.
    """
    fn = _DECOMPRESSORS.get(codec) if type(codec) is int else None  # noqa: E721 (fast path)
    if fn is None:
        fn = _DECOMPRESSORS[codec_id(codec)]
    return fn(data, DEFAULT_MAX_SIZE if max_size is None else max_size, magic)


# ------------------------------------------------------------------- compressors

def _gzip_compress(data: Buffer, level: Optional[int], magic: int) -> bytes:
    c = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _snappy_compress(data: Buffer, level: Optional[int], magic: int) -> bytes:
    snappy = _lib("snappy")
    mv = memoryview(data).cast("B")
    parts = [_XERIAL_HEADER]
    for i in range(0, len(mv), _XERIAL_BLOCK):
        block = snappy.compress(mv[i:i + _XERIAL_BLOCK])
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _lz4_compress(data: Buffer, level: Optional[int], magic: int) -> bytes:
    frame_mod = _lib("lz4").frame
    frame = frame_mod.compress(bytes(data), compression_level=0 if level is None else level,
                               block_size=frame_mod.BLOCKSIZE_MAX64KB, block_linked=False,
                               content_checksum=False, block_checksum=False, store_size=False)
    if magic == 0:
        # Kafka writes magic-0 frames with the checksum taken from the magic bytes on.
        out = bytearray(frame)
        out[6] = _lz4_hc(out[:6])
        return bytes(out)
    return frame


def _zstd_compress(data: Buffer, level: Optional[int], magic: int) -> bytes:
    if magic < 2:
        raise UnsupportedCodecError(
            f"zstd needs magic 2 record batches (Kafka 2.1+); magic {magic} cannot carry it")
    zstd = _lib("zstd")
    return zstd.ZstdCompressor(level=3 if level is None else level).compress(data)


def _none_compress(data: Buffer, level: Optional[int], magic: int) -> bytes:
    return bytes(data)


_COMPRESSORS: Dict[int, Callable[[Buffer, Optional[int], int], bytes]] = {
    0: _none_compress, 1: _gzip_compress, 2: _snappy_compress,
    3: _lz4_compress, 4: _zstd_compress,
}


def compress(codec: Union[int, str], data: Buffer, *, magic: int = 2,
             level: Optional[int] = None) -> bytes:
    """Compress ``data`` the way Kafka's Java client does for ``codec`` and ``magic``.

    snappy is written in xerial framing; lz4 as a frame of independent 64 KiB
    blocks, with KAFKA-3160's header checksum when ``magic`` is 0; zstd only
    under magic 2 (``UnsupportedCodecError`` otherwise).
    """
    return _COMPRESSORS[codec_id(codec)](data, level, magic)
