import java.io.File;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;

/**
 * Kafka's own reader on a file of record batches, for benchmarks/bench_records.py.
 * Usage: BenchRecords SECONDS_WARMUP REPEATS FILE...
 * For each file prints one JSON line with the best time (seconds) of
 * header-only iteration, full decode touching every field, and ensureValid() (CRC),
 * in CPU time of the measuring thread.
 * Every measurement runs over FileRecords.open(file) after JIT warm-up.
 */
public class BenchRecords {
    static long sink;
    static final ThreadMXBean CPU = ManagementFactory.getThreadMXBean();

    /** CPU time of this thread (the machines are shared: waiting for a core is not work). */
    static long now() {
        return CPU.getCurrentThreadCpuTime();
    }

    public static void main(String[] args) throws Exception {
        double warm = Double.parseDouble(args[0]);
        int repeats = Integer.parseInt(args[1]);
        for (int i = 2; i < args.length; i++) {
            File f = new File(args[i]);
            try (FileRecords records = FileRecords.open(f, false)) {
                long records_n = decode(records);
                double[] best = {1e9, 1e9, 1e9};
                long deadline = System.nanoTime() + (long) (warm * 1e9);
                while (System.nanoTime() < deadline) {   // JIT warm-up on all three paths
                    headers(records); decode(records); crc(records);
                }
                for (int r = 0; r < repeats; r++) {
                    long t0 = now(); headers(records);
                    long t1 = now(); decode(records);
                    long t2 = now(); crc(records);
                    long t3 = now();
                    best[0] = Math.min(best[0], (t1 - t0) / 1e9);
                    best[1] = Math.min(best[1], (t2 - t1) / 1e9);
                    best[2] = Math.min(best[2], (t3 - t2) / 1e9);
                }
                System.out.println("{\"path\":\"" + f.getPath() + "\",\"records\":" + records_n
                        + ",\"header\":" + best[0] + ",\"decode\":" + best[1] + ",\"crc\":" + best[2]
                        + ",\"sink\":" + (sink & 1) + "}");
            }
        }
    }

    static void headers(FileRecords records) {
        long s = 0;
        for (RecordBatch b : records.batches()) {
            s += b.baseOffset() + b.lastOffset() + b.maxTimestamp() + b.producerId() + b.baseSequence()
                    + b.partitionLeaderEpoch() + b.sizeInBytes() + b.magic();
        }
        sink += s;
    }

    static long decode(FileRecords records) {
        long s = 0, n = 0;
        for (RecordBatch b : records.batches()) {
            for (Record r : b) {
                n++;
                s += r.offset() + r.timestamp();
                ByteBuffer k = r.key(), v = r.value();
                if (k != null) s += k.remaining();
                if (v != null) s += v.remaining();
                for (Header h : r.headers()) {
                    s += h.key().length();
                    byte[] hv = h.value();
                    if (hv != null) s += hv.length;
                }
            }
        }
        sink += s;
        return n;
    }

    static void crc(FileRecords records) {
        for (RecordBatch b : records.batches()) b.ensureValid();
    }
}
