import java.io.File;
import java.nio.ByteBuffer;
import java.nio.file.Files;

import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;

/**
 * Reads files of v0/v1 (or any) batches with MemoryRecords and prints, per file, one JSON
 * line: {"path":..., "records":[[offset, timestamp, timestampType, key, value], ...],
 * "error": null or "ExceptionClass: message"}.  Unlike RecordsReader it stops at the first
 * exception thrown while iterating (as a consumer would) and reports it, so the output of
 * a batch that Kafka refuses half way stays well formed.
 *
 * Uses RecordsReader's JSON helpers (compile RecordsReader first).
 *
 * Usage: LegacyRecordsReader PATH...
 */
public class LegacyRecordsReader {
    public static void main(String[] args) throws Exception {
        StringBuilder out = new StringBuilder();
        for (String path : args) {
            out.setLength(0);
            out.append("{\"path\":").append(RecordsReader.str(path)).append(",\"records\":[");
            String error = null;
            boolean first = true;
            try {
                MemoryRecords records = MemoryRecords.readableRecords(
                        ByteBuffer.wrap(Files.readAllBytes(new File(path).toPath())));
                for (RecordBatch batch : records.batches()) {
                    batch.ensureValid();
                    for (Record r : batch) {
                        r.ensureValid();
                        if (!first) out.append(',');
                        first = false;
                        out.append('[').append(r.offset()).append(',').append(r.timestamp());
                        out.append(',').append(RecordsReader.str(batch.timestampType().name));
                        out.append(',').append(RecordsReader.bytes(r.hasKey() ? r.key() : null));
                        out.append(',').append(RecordsReader.bytes(r.hasValue() ? r.value() : null)).append(']');
                    }
                }
            } catch (Exception e) {
                error = e.getClass().getSimpleName() + ": " + e.getMessage();
            }
            out.append("],\"error\":").append(error == null ? "null" : RecordsReader.str(error)).append('}');
            System.out.println(out);
        }
    }
}
