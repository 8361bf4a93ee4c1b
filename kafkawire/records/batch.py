"""``RecordBatch``: one v2 record batch (magic 2), a thin view over the kernels.

The header fields come from the scan kernel's row (no payload touched);
records are decompressed and decoded only when the batch is iterated.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple, Type, cast

from kafkawire import _format as F
from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire.compression import decompress as _decompress
from kafkawire.errors import CorruptRecordError, KafkaWireError

if TYPE_CHECKING:
    from kafkawire.records._types import Record

__all__ = ["RecordBatch", "CODEC_NAMES", "concrete_batch_class"]

#: Codec names by attribute id (bits 0-2).
CODEC_NAMES = F.CODEC_NAMES
_CONTROL_TYPES = F.CONTROL_TYPE_NAMES
_INT32_MAX = 0x7FFFFFFF


def _relocate(err: CorruptRecordError, batch: "RecordBatch", compressed: bool) -> CorruptRecordError:
    """Re-anchor a kernel error (buffer position) to the caller's absolute position."""
    if compressed:
        where = "" if err.position is None else f" (byte {err.position} of the decompressed records)"
        return type(err)(f"batch at offset {batch.base_offset}: {err.message}{where}",
                         position=batch.position, offset=err.offset, reason=err.reason,
                         path=err.path)
    pos = None if err.position is None else err.position + batch._base_position
    return type(err)(f"batch at offset {batch.base_offset}: {err.message}", position=pos,
                     offset=err.offset, reason=err.reason, path=err.path)


if TYPE_CHECKING:
    # The header fields are the kernel backend's ``BatchHeader``'s (see the class docstring).
    from kafkawire._fast.scan import BatchHeader as _KernelHeader
else:
    _KernelHeader = object


class RecordBatch(_KernelHeader):
    """A v2 record batch.  Iterate it (or call :meth:`records`) for its ``Record``s.

    The header fields (``base_offset`` ... ``record_count``) live in the current
    backend's ``K.BatchHeader`` (C fields in the compiled one, read as ints on
    access); batch objects are instances of :func:`concrete_batch_class`, a
    subclass of both, so ``isinstance(b, RecordBatch)`` holds for either backend.
    """

    __slots__ = ()
    if TYPE_CHECKING:
        _control: Optional[Tuple[Optional[str], Optional[int]]]

    magic = 2

    @classmethod
    def _from_row(cls, buf: Any, row: Any, base_position: int = 0,
                  max_size: Optional[int] = None) -> "RecordBatch":
        concrete = concrete_batch_class()
        b = concrete.__new__(concrete)
        (b._pos, b.size, b.base_offset, b.last_offset, _, b.attributes, b.crc,
         b.partition_leader_epoch, b.first_timestamp, b.max_timestamp, b.producer_id,
         b.producer_epoch, b.base_sequence, b.record_count) = row
        b._buf = buf
        b._base_position = base_position
        b._max_size = max_size
        b._control = None
        b._hooks = KERNEL_HOOKS
        return b

    @classmethod
    def from_buffer(cls, buf: Any, position: int = 0, *, base_position: int = 0,
                    max_decompressed_size: Optional[int] = None) -> "RecordBatch":
        """The v2 batch starting at ``position`` of ``buf`` (raises if there is none)."""
        rows, stop, status = K.scan_batches(buf, position, -1, 1, False)
        if len(rows) != 1 or rows[0, C.MAGIC] != 2:
            raise CorruptRecordError(
                f"no complete v2 batch here (scan status {C.STATUS_NAMES[status]})",
                position=base_position + position, reason="length")
        return cls._from_row(buf, rows[0].tolist(), base_position, max_decompressed_size)

    # -- header-derived attributes -------------------------------------------
    @property
    def position(self) -> int:
        """Byte position of the batch (base_position + position in the buffer)."""
        return self._base_position + self._pos

    @property
    def compression(self) -> str:
        """Codec name ("none" .. "zstd"); ``K.BatchHeader`` answers first, in C when compiled."""
        cid = self.attributes & C.COMPRESSION_MASK
        if cid >= len(CODEC_NAMES):
            return self._unknown_codec(cid)
        return CODEC_NAMES[cid]

    def _unknown_codec(self, cid: int) -> str:
        raise CorruptRecordError(f"unknown compression codec id {cid} in attributes",
                                 position=self.position, offset=self.base_offset,
                                 reason="attributes")

    @property
    def timestamp_type(self) -> str:
        return "LogAppendTime" if self.attributes & C.TIMESTAMP_TYPE_MASK else "CreateTime"

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & C.TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & C.CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & C.DELETE_HORIZON_MASK)

    @property
    def delete_horizon(self) -> Optional[int]:
        """KIP-534 delete horizon (ms) when attributes bit 6 is set: the base timestamp."""
        return self.first_timestamp if self.attributes & C.DELETE_HORIZON_MASK else None

    @property
    def base_timestamp(self) -> int:
        return self.first_timestamp

    @property
    def last_offset_delta(self) -> int:
        return self.last_offset - self.base_offset

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wraps at 2**31-1 like Kafka); -1 without one."""
        if self.base_sequence < 0:
            return -1
        delta = self.last_offset - self.base_offset
        if self.base_sequence > _INT32_MAX - delta:
            return delta - (_INT32_MAX - self.base_sequence) - 1
        return self.base_sequence + delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def raw(self) -> memoryview:
        """The batch's bytes (a view, no copy)."""
        return memoryview(self._buf).cast("B")[self._pos:self._pos + self.size]

    # -- control batches --------------------------------------------------------
    def _control_marker(self) -> Tuple[Optional[str], Optional[int]]:
        if self._control is None:
            if not self.is_control:
                self._control = (None, None)
            else:
                recs = self.records()
                if not recs or recs[0].key is None or len(recs[0].key) < 4:
                    raise CorruptRecordError("control batch without a valid control record",
                                             position=self.position, offset=self.base_offset,
                                             reason="control")
                ctype = struct.unpack_from(">h", recs[0].key, 2)[0]
                epoch = None
                val = recs[0].value
                if val is not None and len(val) >= 6:
                    epoch = struct.unpack_from(">i", val, 2)[0]
                self._control = (_CONTROL_TYPES.get(ctype, f"unknown({ctype})"), epoch)
        return self._control

    @property
    def control_type(self) -> Optional[str]:
        """"abort" or "commit" for a control batch's marker, else None."""
        return self._control_marker()[0]

    @property
    def coordinator_epoch(self) -> Optional[int]:
        return self._control_marker()[1]

    # -- records ------------------------------------------------------------------
    def _payload(self) -> Tuple[Any, int, int, bool]:
        """(buffer, start, end, compressed) of the records region, decompressed if needed."""
        pos = self._pos
        cid = self.attributes & 7                       # C.COMPRESSION_MASK
        if cid == 0:
            return self._buf, pos + 61, pos + self.size, False   # C.V2_RECORDS_START
        if cid >= len(CODEC_NAMES):
            self._unknown_codec(cid)
        view = memoryview(self._buf)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        view = view[pos + 61:pos + self.size]
        try:
            data = _decompress(cid, view, magic=2, max_size=self._max_size)
        except CorruptRecordError as exc:
            raise type(exc)(f"batch at offset {self.base_offset}: {self.compression}: "
                            f"{exc.message}", position=self.position, offset=self.base_offset,
                            reason=exc.reason) from None
        return data, 0, len(data), True

    def _args(self) -> Tuple[Any, ...]:
        buf, start, end, compressed = self._payload()
        if compressed:
            def on_error(exc: CorruptRecordError, batch: RecordBatch = self) -> CorruptRecordError:
                return _relocate(exc, batch, True)
        else:
            def on_error(exc: CorruptRecordError, batch: RecordBatch = self) -> CorruptRecordError:
                return _relocate(exc, batch, False)
        return (buf, start, end, self.record_count, self.base_offset, self.first_timestamp,
                self.max_timestamp, 1 if self.attributes & C.TIMESTAMP_TYPE_MASK else 0, on_error)

    def records_bytes(self) -> "bytes | memoryview":
        """The records region (what follows the 61-byte header), decompressed if needed.

        A memoryview of the buffer (no copy) for an uncompressed batch; the
        decompressed ``bytes`` otherwise, bounded by ``max_decompressed_size``
        (``RecordTooLargeError``; a damaged payload raises ``CorruptRecordError``).
        Use it to hand the raw records to other code, or to time decompression alone.
        """
        buf, start, end, compressed = self._payload()
        if compressed:
            return cast(bytes, buf)
        return memoryview(buf).cast("B")[start:end]

    def records(self) -> List[Record]:
        """Decode every record (decompressing first if needed) into a new list."""
        records: List[Record] = K.decode_records_v2(*self._args())
        return records

    def __iter__(self) -> Iterator[Record]:
        """Decode lazily, one record per step (cheaper than ``records()`` when streaming)."""
        records: Iterator[Record] = K.iter_records_v2(*self._args())
        return records

    def compute_crc(self) -> int:
        """CRC-32C of the batch from its attributes to its end."""
        crc: int = K.crc32c(self._buf, self._pos + C.V2_CRC_START, self._pos + self.size)
        return crc

    def is_valid(self) -> bool:
        try:
            self.validate()
        except KafkaWireError:
            return False
        return True

    def validate(self) -> None:
        """Check the CRC and the structure (codec, records, counts); raise CorruptRecordError.

        The compiled backend's ``K.BatchHeader.validate`` answers first: it checks an
        uncompressed, non-control batch in one kernel pass and comes here only when
        that pass finds something wrong (or for the other batches).
        """
        self._validate_checked()

    def _validate_checked(self) -> None:
        """``validate()``'s checks one by one, each raising its own error."""
        computed = self.compute_crc()
        if computed != self.crc:
            raise CorruptRecordError(
                f"batch at offset {self.base_offset}: CRC-32C mismatch (stored {self.crc:#010x}, "
                f"computed {computed:#010x})", position=self.position, offset=self.base_offset,
                reason="crc")
        if self.record_count < 0:
            raise CorruptRecordError(f"negative record count {self.record_count}",
                                     position=self.position, offset=self.base_offset,
                                     reason="count")
        if self.last_offset < self.base_offset:
            raise CorruptRecordError(f"negative last offset delta {self.last_offset_delta}",
                                     position=self.position, offset=self.base_offset,
                                     reason="offset")
        # the records' structure, checked by the kernel's walker without making records
        if self.attributes & C.COMPRESSION_MASK == 0:
            buf, start, end, compressed = self._buf, self._pos + 61, self._pos + self.size, False
        else:
            buf, start, end, compressed = self._payload()
        try:
            outside = K.validate_records_v2(buf, start, end, self.record_count, self.base_offset,
                                            self.last_offset)
        except CorruptRecordError as exc:
            raise _relocate(exc, self, compressed) from None
        if outside is not None:
            raise CorruptRecordError(
                f"record offset {outside} outside the batch's range "
                f"[{self.base_offset}, {self.last_offset}]", position=self.position,
                offset=outside, reason="offset")
        if self.is_control:
            self._control = None
            self._control_marker()

    def __repr__(self) -> str:
        return (f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"count={self.record_count}, codec={self.attributes & C.COMPRESSION_MASK}, "
                f"timestamp_type={self.timestamp_type!r}, position={self.position}, "
                f"size={self.size})")


#: What the batch kernels need from this module, passed down to ``K.scan_batch_objects``:
#: decompression of a batch's records and re-anchoring of a records error.
KERNEL_HOOKS = (RecordBatch._payload, _relocate)

_CONCRETE: Dict[type, Type[RecordBatch]] = {}


def _reduce(batch: RecordBatch) -> Tuple[Callable[..., RecordBatch], Tuple[Any, int, int, Optional[int]]]:
    """Pickle a batch as its buffer and position (re-read by ``from_buffer`` on load)."""
    return (_unpickle, (batch._buf, batch._pos, batch._base_position, batch._max_size))


def _unpickle(buf: Any, pos: int, base_position: int, max_size: Optional[int]) -> "RecordBatch":
    return RecordBatch.from_buffer(buf, pos, base_position=base_position,
                                   max_decompressed_size=max_size)


def concrete_batch_class() -> Type[RecordBatch]:
    """The class of v2 batch objects for the current backend: ``K.BatchHeader`` + ``RecordBatch``.

    Built once per backend, at call time (the tests switch backends at run time).
    """
    base = K.BatchHeader
    cls = _CONCRETE.get(base)
    if cls is None:
        cls = type("RecordBatch", (base, RecordBatch),
                   {"__slots__": (), "__module__": __name__, "__qualname__": "RecordBatch",
                    "__doc__": RecordBatch.__doc__, "__reduce__": _reduce})
        _CONCRETE[base] = cls
    return cls
