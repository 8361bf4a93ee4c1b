// Kafka's side of benchmarks/bench_cli.py: over one .log file, after JIT warm-up, measures
// (1) deep iteration with FileRecords touching every record field and (2) the same plus the text
// kafka-dump-log.sh --deep-iteration prints per batch and record (DumpLogSegments' format),
// written to a null sink. Prints "iterate <records/s>" and "dump <records/s>" (wall time), and
// "iterate_cpu"/"dump_cpu" (records per second of the measuring thread's CPU time).
// Usage: BenchDumpLog FILE SECONDS
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.FileLogInputStream;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;

import java.io.File;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

public class BenchDumpLog {
    static long sink;

    static long iterate(FileRecords fr) {
        long n = 0;
        for (FileLogInputStream.FileChannelRecordBatch batch : fr.batches()) {
            for (Record r : batch) {
                sink += r.offset() + r.timestamp() + r.keySize() + r.valueSize() + r.headers().length;
                n++;
            }
        }
        return n;
    }

    static long dump(FileRecords fr, PrintStream out) {
        long n = 0, position = 0;
        for (FileLogInputStream.FileChannelRecordBatch batch : fr.batches()) {
            out.println("baseOffset: " + batch.baseOffset() + " lastOffset: " + batch.lastOffset()
                + " count: " + batch.countOrNull() + " baseSequence: " + batch.baseSequence()
                + " lastSequence: " + batch.lastSequence() + " producerId: " + batch.producerId()
                + " producerEpoch: " + batch.producerEpoch() + " partitionLeaderEpoch: "
                + batch.partitionLeaderEpoch() + " isTransactional: " + batch.isTransactional()
                + " isControl: " + batch.isControlBatch() + " deleteHorizonMs: " + batch.deleteHorizonMs()
                + " position: " + position + " " + batch.timestampType() + ": " + batch.maxTimestamp()
                + " size: " + batch.sizeInBytes() + " magic: " + batch.magic() + " compresscodec: "
                + batch.compressionType().name + " crc: " + batch.checksum() + " isvalid: " + batch.isValid());
            for (Record r : batch) {
                StringBuilder keys = new StringBuilder("[");
                Header[] hs = r.headers();
                for (int i = 0; i < hs.length; i++) {
                    if (i > 0) keys.append(',');
                    keys.append(hs[i].key());
                }
                out.println("| offset: " + r.offset() + " " + batch.timestampType() + ": " + r.timestamp()
                    + " keySize: " + r.keySize() + " valueSize: " + r.valueSize()
                    + " sequence: " + r.sequence() + " headerKeys: " + keys + "]");
                n++;
            }
            position += batch.sizeInBytes();
        }
        return n;
    }

    static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
    static double lastCpuRate;

    // records/s over wall time; lastCpuRate gets records/s over this thread's CPU time
    static double measure(FileRecords fr, PrintStream out, boolean printing, double seconds) {
        long records = 0;
        long start = System.nanoTime();
        long cpu0 = THREADS.getCurrentThreadCpuTime();
        long deadline = start + (long) (seconds * 1e9);
        do {
            records += printing ? dump(fr, out) : iterate(fr);
        } while (System.nanoTime() < deadline);
        double wall = records / ((System.nanoTime() - start) / 1e9);
        lastCpuRate = records / ((THREADS.getCurrentThreadCpuTime() - cpu0) / 1e9);
        return wall;
    }

    public static void main(String[] args) throws Exception {
        FileRecords fr = FileRecords.open(new File(args[0]), false);
        double seconds = Double.parseDouble(args[1]);
        PrintStream nul = new PrintStream(OutputStream.nullOutputStream(), false);
        measure(fr, nul, false, seconds / 2);   // JIT warm-up
        measure(fr, nul, true, seconds / 2);
        System.out.printf("iterate %.0f%n", measure(fr, nul, false, seconds));
        System.out.printf("iterate_cpu %.0f%n", lastCpuRate);
        System.out.printf("dump %.0f%n", measure(fr, nul, true, seconds));
        System.out.printf("dump_cpu %.0f%n", lastCpuRate);
        System.out.println(sink == 42 ? "" : "ok");
    }
}
