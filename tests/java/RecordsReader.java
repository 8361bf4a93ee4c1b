import java.io.File;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.Base64;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.DefaultRecordBatch;
import org.apache.kafka.common.record.EndTransactionMarker;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.Records;

/**
 * Reads files of concatenated record batches with Kafka's own code and prints, per file,
 * one JSON line: {"path":..., "batches":[{header fields..., "valid":..., "records":[...]}]}.
 * Every batch gets ensureValid() (CRC + structure); failures are reported, not thrown.
 *
 * Usage: RecordsReader mem|file PATH...
 *   mem  = MemoryRecords.readableRecords over the file's bytes
 *   file = FileRecords.open (what a broker's log uses)
 */
public class RecordsReader {
    public static void main(String[] args) throws Exception {
        boolean file = args[0].equals("file");
        StringBuilder out = new StringBuilder();
        for (int i = 1; i < args.length; i++) {
            String path = args[i];
            out.setLength(0);
            out.append("{\"path\":").append(str(path)).append(",\"batches\":[");
            Records records;
            FileRecords fr = null;
            if (file) {
                fr = FileRecords.open(new File(path), false);
                records = fr;
            } else {
                records = MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(new File(path).toPath())));
            }
            boolean first = true;
            try {
                for (RecordBatch batch : records.batches()) {
                    if (!first) out.append(',');
                    first = false;
                    describe(batch, out);
                }
                out.append("]");
            } catch (Exception e) {
                out.append("],\"error\":").append(str(e.toString()));
            }
            out.append('}');
            if (fr != null) fr.closeHandlers();
            System.out.println(out);
        }
    }

    static void describe(RecordBatch b, StringBuilder o) {
        String valid = "true";
        try {
            b.ensureValid();
        } catch (Exception e) {
            valid = e.toString();
        }
        o.append("{\"valid\":").append(valid.equals("true") ? "true" : str(valid));
        o.append(",\"base_offset\":").append(b.baseOffset());
        o.append(",\"last_offset\":").append(b.lastOffset());
        o.append(",\"magic\":").append(b.magic());
        o.append(",\"compression\":").append(str(b.compressionType().name));
        o.append(",\"timestamp_type\":").append(str(b.timestampType().name));
        o.append(",\"max_timestamp\":").append(b.maxTimestamp());
        o.append(",\"producer_id\":").append(b.producerId());
        o.append(",\"producer_epoch\":").append(b.producerEpoch());
        o.append(",\"base_sequence\":").append(b.baseSequence());
        o.append(",\"last_sequence\":").append(b.lastSequence());
        o.append(",\"partition_leader_epoch\":").append(b.partitionLeaderEpoch());
        o.append(",\"is_transactional\":").append(b.isTransactional());
        o.append(",\"is_control\":").append(b.isControlBatch());
        o.append(",\"delete_horizon\":").append(b.deleteHorizonMs().isPresent() ? String.valueOf(b.deleteHorizonMs().getAsLong()) : "null");
        o.append(",\"crc\":").append(b.checksum());
        o.append(",\"size\":").append(b.sizeInBytes());
        Integer count = b.countOrNull();
        o.append(",\"record_count\":").append(count == null ? "null" : count.toString());
        if (b instanceof DefaultRecordBatch) {
            o.append(",\"first_timestamp\":").append(((DefaultRecordBatch) b).baseTimestamp());
        }
        if (!valid.equals("true")) {
            o.append('}');
            return;
        }
        o.append(",\"records\":[");
        boolean first = true;
        String controlType = null;
        int coordinatorEpoch = -1;
        for (Record r : b) {
            r.ensureValid();
            if (!first) o.append(',');
            if (first && b.isControlBatch()) {
                ControlRecordType t = ControlRecordType.parse(r.key());
                controlType = t.name().toLowerCase();
                if (t == ControlRecordType.COMMIT || t == ControlRecordType.ABORT)
                    coordinatorEpoch = EndTransactionMarker.deserialize(r).coordinatorEpoch();
            }
            first = false;
            o.append("{\"offset\":").append(r.offset());
            o.append(",\"timestamp\":").append(r.timestamp());
            o.append(",\"key\":").append(bytes(r.hasKey() ? r.key() : null));
            o.append(",\"value\":").append(bytes(r.hasValue() ? r.value() : null));
            o.append(",\"headers\":[");
            Header[] hs = r.headers();
            for (int h = 0; h < hs.length; h++) {
                if (h > 0) o.append(',');
                o.append('[').append(str(hs[h].key())).append(',');
                byte[] v = hs[h].value();
                o.append(v == null ? "null" : str(Base64.getEncoder().encodeToString(v))).append(']');
            }
            o.append("]}");
        }
        o.append(']');
        if (b.isControlBatch()) {
            o.append(",\"control_type\":").append(controlType == null ? "null" : str(controlType));
            o.append(",\"coordinator_epoch\":").append(coordinatorEpoch);
        }
        o.append('}');
    }

    static String bytes(ByteBuffer buf) {
        if (buf == null) return "null";
        byte[] a = new byte[buf.remaining()];
        buf.duplicate().get(a);
        return str(Base64.getEncoder().encodeToString(a));
    }

    static String str(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
}
