"""``LegacyBatch``: one top-level v0/v1 message (Kafka's shallow model).

An uncompressed message is a batch of one record.  A compressed *wrapper*
message's value is an inner message set: iterating the batch decompresses it
and yields the inner records, with absolute offsets (magic 0 stores them
absolute; magic 1 stores them relative, the wrapper carrying the last one)
and, under a LogAppendTime magic-1 wrapper, the wrapper's timestamp.

Kafka's rules for wrappers apply (its legacy deep iterator): a magic-1 wrapper
at offset 0 is produce-side data whose inner offsets are the record offsets as
they stand; a nonzero wrapper offset below the last inner offset, an empty
inner set and a compressed inner message are corrupt.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Tuple, cast

from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire import compression
from kafkawire.errors import CorruptRecordError, KafkaWireError
from kafkawire.records.batch import CODEC_NAMES

if TYPE_CHECKING:
    from kafkawire.records._types import Record

__all__ = ["LegacyBatch"]

class LegacyBatch:
    """A v0/v1 top-level message; see the module docstring."""

    __slots__ = ("_buf", "_pos", "_base_position", "_max_size", "size", "magic", "last_offset",
                 "attributes", "crc", "timestamp", "_base_offset", "_count")

    _buf: Any
    _pos: int
    _base_position: int
    _max_size: Optional[int]
    size: int
    magic: int
    last_offset: int
    attributes: int
    crc: int
    timestamp: int
    _base_offset: Optional[int]
    _count: Optional[int]

    partition_leader_epoch = -1
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    last_sequence = -1
    is_transactional = False
    is_control = False
    has_delete_horizon = False
    delete_horizon: Optional[int] = None
    control_type: Optional[str] = None
    coordinator_epoch: Optional[int] = None

    @classmethod
    def _from_row(cls, buf: Any, row: Any, base_position: int = 0,
                  max_size: Optional[int] = None) -> "LegacyBatch":
        b = cls.__new__(cls)
        b._buf = buf
        b._pos = row[C.POSITION]
        b.size = row[C.SIZE]
        b.last_offset = row[C.LAST_OFFSET]
        b.magic = row[C.MAGIC]
        b.attributes = row[C.ATTRIBUTES]
        b.crc = row[C.CRC]
        b.timestamp = row[C.MAX_TIMESTAMP]
        b._base_position = base_position
        b._max_size = max_size
        if row[C.RECORD_COUNT] == 1:
            b._base_offset = b.last_offset
            b._count = 1
        else:
            b._base_offset = None
            b._count = None
        return b

    # -- header-derived attributes -------------------------------------------
    @property
    def position(self) -> int:
        return self._base_position + self._pos

    @property
    def offset(self) -> int:
        """The message's own offset (for a wrapper: its last inner offset)."""
        return self.last_offset

    @property
    def base_offset(self) -> int:
        """First offset; for a compressed wrapper this decompresses (as Kafka does)."""
        if self._base_offset is None:
            recs = self.records()
            self._base_offset = recs[0].offset if recs else self.last_offset
        return self._base_offset

    @property
    def record_count(self) -> Optional[int]:
        """1 for a plain message; None for a wrapper until it is decompressed."""
        return self._count

    @property
    def compression(self) -> str:
        cid = self.attributes & C.LEGACY_COMPRESSION_MASK
        if cid >= len(CODEC_NAMES):
            raise CorruptRecordError(f"unknown compression codec id {cid} in attributes",
                                     position=self.position, offset=self.last_offset,
                                     reason="attributes")
        return CODEC_NAMES[cid]

    @property
    def timestamp_type(self) -> str:
        if self.magic == 0:
            return "NoTimestampType"
        return "LogAppendTime" if self.attributes & C.LEGACY_TIMESTAMP_TYPE_MASK else "CreateTime"

    @property
    def first_timestamp(self) -> int:
        return self.timestamp

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def raw(self) -> memoryview:
        return memoryview(self._buf).cast("B")[self._pos:self._pos + self.size]

    # -- records ------------------------------------------------------------------
    def _fail(self, exc: CorruptRecordError, inner: bool) -> CorruptRecordError:
        if inner:
            where = "" if exc.position is None else f" (byte {exc.position} of the decompressed messages)"
            return type(exc)(f"message at offset {self.last_offset}: {exc.message}{where}",
                             position=self.position, offset=exc.offset, reason=exc.reason)
        pos = None if exc.position is None else exc.position + self._base_position
        return type(exc)(f"message at offset {self.last_offset}: {exc.message}", position=pos,
                         offset=exc.offset, reason=exc.reason)

    def _expand(self, wrapper: Tuple[Any, ...], check_crc: bool) -> List[Record]:
        """Decompress a wrapper tuple from the kernel and decode its inner records.

        As in Kafka, the inner set is decoded once and may not hold compressed
        messages (the kernel refuses them), so ``max_decompressed_size`` bounds
        everything one batch can inflate to.
        """
        _pos, w_offset, w_magic, w_attrs, w_ts, value = wrapper
        if value is None:
            raise CorruptRecordError("compressed wrapper message with a null value",
                                     position=self.position, offset=w_offset, reason="compression")
        cid = w_attrs & C.LEGACY_COMPRESSION_MASK
        try:
            data = compression.decompress(cid, value, magic=w_magic, max_size=self._max_size)
        except CorruptRecordError as exc:
            raise type(exc)(f"message at offset {w_offset}: {exc.message}",
                            position=self.position, offset=w_offset, reason=exc.reason) from None
        w_type = 1 if (w_magic >= 1 and w_attrs & C.LEGACY_TIMESTAMP_TYPE_MASK) else 0
        try:
            return cast("List[Record]", K.decode_legacy_messages(
                data, 0, len(data), w_offset, w_magic, w_ts, w_type, check_crc))
        except CorruptRecordError as exc:
            raise self._fail(exc, True) from None

    def _decode(self, check_crc: bool) -> List[Record]:
        try:
            items = K.decode_legacy_messages(self._buf, self._pos, self._pos + self.size, -1, -1,
                                             -1, 0, check_crc)
        except CorruptRecordError as exc:
            raise self._fail(exc, False) from None
        if not items or type(items[0]) is not tuple:
            return cast("List[Record]", items)
        out = self._expand(items[0], check_crc)
        if self._count is None:
            self._count = len(out)
            if self._base_offset is None:
                self._base_offset = out[0].offset if out else self.last_offset
        return out

    def records(self) -> List[Record]:
        """Decode the message (decompressing a wrapper) into a new list of ``Record``s."""
        return self._decode(False)

    def __iter__(self) -> Iterator[Record]:
        return iter(self._decode(False))

    def compute_crc(self) -> int:
        """CRC-32 of the message from its magic byte to its end."""
        crc: int = K.crc32(self._buf, self._pos + C.MAGIC_OFFSET, self._pos + self.size)
        return crc

    def is_valid(self) -> bool:
        try:
            self.validate()
        except KafkaWireError:
            return False
        return True

    def validate(self) -> None:
        """Check the CRC-32 (and every inner message's) and the structure."""
        computed = self.compute_crc()
        if computed != self.crc:
            raise CorruptRecordError(
                f"message at offset {self.last_offset}: CRC-32 mismatch (stored {self.crc:#010x}, "
                f"computed {computed:#010x})", position=self.position, offset=self.last_offset,
                reason="crc")
        self.compression  # noqa: B018 - raises on an unknown codec id
        recs = self._decode(True)
        if self.magic == 1 and self.attributes & C.LEGACY_COMPRESSION_MASK and self.last_offset:
            # (a wrapper at offset 0 is produce-side data: its inner offsets stand as they are)
            for r in recs:
                if r.offset > self.last_offset:
                    raise CorruptRecordError(
                        f"inner offset {r.offset} after the wrapper's offset {self.last_offset}",
                        position=self.position, offset=r.offset, reason="offset")

    def __repr__(self) -> str:
        return (f"LegacyBatch(magic={self.magic}, offset={self.last_offset}, "
                f"codec={self.attributes & C.LEGACY_COMPRESSION_MASK}, "
                f"position={self.position}, size={self.size})")
