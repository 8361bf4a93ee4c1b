// Prints a .log file the way Kafka 3.9's kafka-dump-log.sh (DumpLogSegments.dumpLog) does,
// using only kafka-clients' FileRecords/RecordBatch/Record API, so the CLI's field values
// (sequences, counts, checksums, validity, timestamp types) can be compared with Kafka's own.
// Usage: DumpLogFormat FILE [deep|data]
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.AbstractLegacyRecordBatch;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.EndTransactionMarker;
import org.apache.kafka.common.record.FileLogInputStream;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.utils.Utils;

import java.io.File;
import java.nio.charset.StandardCharsets;

public class DumpLogFormat {
    public static void main(String[] args) throws Exception {
        File file = new File(args[0]);
        boolean deep = args.length > 1;
        boolean data = args.length > 1 && args[1].equals("data");
        FileRecords records = FileRecords.open(file, false);
        long validBytes = 0;
        StringBuilder out = new StringBuilder();
        for (FileLogInputStream.FileChannelRecordBatch batch : records.batches()) {
            if (batch.magic() >= RecordBatch.MAGIC_VALUE_V2) {
                out.append("baseOffset: ").append(batch.baseOffset())
                   .append(" lastOffset: ").append(batch.lastOffset())
                   .append(" count: ").append(batch.countOrNull())
                   .append(" baseSequence: ").append(batch.baseSequence())
                   .append(" lastSequence: ").append(batch.lastSequence())
                   .append(" producerId: ").append(batch.producerId())
                   .append(" producerEpoch: ").append(batch.producerEpoch())
                   .append(" partitionLeaderEpoch: ").append(batch.partitionLeaderEpoch())
                   .append(" isTransactional: ").append(batch.isTransactional())
                   .append(" isControl: ").append(batch.isControlBatch())
                   .append(" deleteHorizonMs: ").append(batch.deleteHorizonMs());
            } else {
                out.append("offset: ").append(batch.lastOffset());
            }
            out.append(" position: ").append(validBytes)
               .append(" ").append(batch.timestampType()).append(": ").append(batch.maxTimestamp())
               .append(" size: ").append(batch.sizeInBytes())
               .append(" magic: ").append(batch.magic())
               .append(" compresscodec: ").append(batch.compressionType().name)
               .append(" crc: ").append(batch.checksum())
               .append(" isvalid: ").append(batch.isValid()).append('\n');
            if (deep) {
                for (Record record : batch) {
                    String prefix = "| ";
                    out.append(prefix).append("offset: ").append(record.offset()).append(' ')
                       .append(batch.timestampType()).append(": ").append(record.timestamp())
                       .append(" keySize: ").append(record.keySize())
                       .append(" valueSize: ").append(record.valueSize());
                    prefix = " ";
                    if (batch.magic() >= RecordBatch.MAGIC_VALUE_V2) {
                        StringBuilder keys = new StringBuilder("[");
                        Header[] headers = record.headers();
                        for (int i = 0; i < headers.length; i++) {
                            if (i > 0) keys.append(',');
                            keys.append(headers[i].key());
                        }
                        out.append(" sequence: ").append(record.sequence())
                           .append(" headerKeys: ").append(keys).append(']');
                    }
                    if (record instanceof AbstractLegacyRecordBatch) {
                        AbstractLegacyRecordBatch legacy = (AbstractLegacyRecordBatch) record;
                        // Kafka 3.9 prints a stray closing brace here; kept on purpose
                        out.append(" isValid: ").append(legacy.isValid())
                           .append(" crc: ").append(legacy.checksum()).append('}');
                    }
                    if (batch.isControlBatch()) {
                        short typeId = ControlRecordType.parseTypeId(record.key());
                        ControlRecordType type = ControlRecordType.fromTypeId(typeId);
                        if (type == ControlRecordType.ABORT || type == ControlRecordType.COMMIT) {
                            EndTransactionMarker m = EndTransactionMarker.deserialize(record);
                            out.append(" endTxnMarker: ").append(m.controlType())
                               .append(" coordinatorEpoch: ").append(m.coordinatorEpoch());
                        } else {
                            out.append(" controlType: ").append(type).append('(').append(typeId).append(')');
                        }
                    }
                    if (data && !batch.isControlBatch()) {
                        if (record.hasKey()) {
                            out.append(prefix).append("key: ").append(
                                new String(Utils.readBytes(record.key()), StandardCharsets.UTF_8));
                        }
                        if (record.hasValue()) {
                            out.append(" payload: ").append(
                                new String(Utils.readBytes(record.value()), StandardCharsets.UTF_8));
                        }
                    }
                    out.append('\n');
                }
            }
            validBytes += batch.sizeInBytes();
        }
        long trailing = records.sizeInBytes() - validBytes;
        if (trailing > 0)
            out.append("Found ").append(trailing).append(" invalid bytes at the end of ")
               .append(file.getName()).append('\n');
        System.out.print(out);
    }
}
