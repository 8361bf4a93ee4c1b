import java.io.File;
import java.io.FileOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Random;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.EndTransactionMarker;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.SimpleRecord;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.utils.ByteBufferOutputStream;

/**
 * Writes record batches of every kind with Kafka's own MemoryRecordsBuilder into
 * OUTDIR/<case>.bin (one file per case; "mixed.bin" concatenates several magics).
 * Usage: RecordsWriter OUTDIR
 */
public class RecordsWriter {
    static final long T0 = 1_700_000_000_000L;
    static final long LAT = 1_700_000_999_999L;
    static final byte[] BIG = new byte[1 << 20];
    static File dir;

    static {
        byte[] pattern = new byte[4096];
        new Random(5).nextBytes(pattern);
        for (int i = 0; i < BIG.length; i += pattern.length) System.arraycopy(pattern, 0, BIG, i, pattern.length);
    }

    public static void main(String[] args) throws Exception {
        dir = new File(args[0]);
        dir.mkdirs();
        String[] codecs = {"none", "gzip", "snappy", "lz4", "zstd"};
        ByteBuffer mixed = ByteBuffer.allocate(1 << 16);
        for (byte magic = 0; magic <= 2; magic++) {
            for (String codec : codecs) {
                if (codec.equals("zstd") && magic < 2) continue;
                String tag = "m" + magic + "_" + codec;
                CompressionType ct = CompressionType.forName(codec);
                TimestampType tt = magic == 0 ? TimestampType.NO_TIMESTAMP_TYPE : TimestampType.CREATE_TIME;
                MemoryRecordsBuilder b = builder(magic, ct, tt, 100, -1, -1, (short) -1, -1, false, -1, -1);
                appendSample(b, magic, 8, 1, null);
                write(tag + "_basic", b.build());
                mixed.put(b.build().buffer().duplicate());

                b = builder(magic, ct, tt, 1000, -1, -1, (short) -1, -1, false, -1, -1);
                appendSample(b, magic, 5, 2, new long[]{1000, 1003, 1004, 1010, 1042});
                write(tag + "_gaps", b.build());

                b = builder(magic, ct, tt, 7, -1, -1, (short) -1, -1, false, -1, -1);
                b.appendWithOffset(7, magic == 0 ? RecordBatch.NO_TIMESTAMP : T0, "big".getBytes(StandardCharsets.UTF_8), BIG, new Header[0]);
                write(tag + "_large", b.build());

                if (magic > 0) {
                    b = builder(magic, ct, TimestampType.LOG_APPEND_TIME, 50, LAT, -1, (short) -1, -1, false, -1, -1);
                    appendSample(b, magic, 6, 3, null);
                    write(tag + "_lat", b.build());
                    // withRecords: the convenience path producers and tests use
                    write(tag + "_simple", MemoryRecords.withRecords(magic, 300L, Compression.of(ct).build(),
                            tt, new SimpleRecord(T0, "a".getBytes(), "1".getBytes()),
                            new SimpleRecord(T0 + 1, null, "2".getBytes()),
                            new SimpleRecord(T0 - 5, "c".getBytes(), null)));
                }
                if (magic == 2) {
                    b = builder(magic, ct, tt, 20, -1, 42, (short) 3, 7, false, -1, -1);
                    appendSample(b, magic, 5, 4, null);
                    write(tag + "_idempotent", b.build());

                    b = builder(magic, ct, tt, 30, -1, 43, (short) 1, 0, true, 17, -1);
                    appendSample(b, magic, 5, 5, null);
                    write(tag + "_transactional", b.build());

                    b = builder(magic, ct, tt, 40, -1, -1, (short) -1, -1, false, -1, T0 + 10_000_000L);
                    appendSample(b, magic, 4, 6, null);
                    write(tag + "_horizon", b.build());
                }
            }
        }
        write("control_commit", MemoryRecords.withEndTransactionMarker(200L, T0, 2, 43L, (short) 1,
                new EndTransactionMarker(ControlRecordType.COMMIT, 4)));
        write("control_abort", MemoryRecords.withEndTransactionMarker(201L, T0 + 1, 2, 43L, (short) 1,
                new EndTransactionMarker(ControlRecordType.ABORT, 9)));
        mixed.flip();
        write("mixed", MemoryRecords.readableRecords(mixed));
    }

    static MemoryRecordsBuilder builder(byte magic, CompressionType ct, TimestampType tt, long baseOffset,
                                        long logAppendTime, long pid, short epoch, int seq, boolean txn,
                                        int ple, long horizon) {
        ByteBufferOutputStream out = new ByteBufferOutputStream(1 << 16);
        return new MemoryRecordsBuilder(out, magic, Compression.of(ct).build(), tt, baseOffset, logAppendTime,
                pid, epoch, seq, txn, false, ple, Integer.MAX_VALUE, horizon);
    }

    /** Null/empty keys and values, tombstones, random values, headers (v2) with a null value. */
    static void appendSample(MemoryRecordsBuilder b, byte magic, int n, int seed, long[] offsets) {
        Random rnd = new Random(seed);
        Header[] all = {
            new RecordHeader("h1", "x".getBytes()), new RecordHeader("", new byte[0]),
            new RecordHeader("nul", null), new RecordHeader("\u00fcn\u00ef\uD83D\uDE00", new byte[]{0, (byte) 0xff}),
        };
        long offset = offsets == null ? 0 : offsets[0];
        for (int i = 0; i < n; i++) {
            byte[] key, value;
            if (i == 0) { key = null; value = "v0".getBytes(); }
            else if (i == 1) { key = new byte[0]; value = new byte[0]; }
            else if (i == 2) { key = "k-tomb".getBytes(); value = null; }
            else if (i == 3) { key = null; value = null; }
            else {
                key = ("key-" + i).getBytes();
                value = new byte[rnd.nextInt(300)];
                rnd.nextBytes(value);
            }
            long ts = magic == 0 ? RecordBatch.NO_TIMESTAMP : (i < 3 ? T0 + (5 - i) * 1000L : T0 + i * 7L);
            Header[] hs = new Header[magic == 2 ? i % 5 : 0];
            System.arraycopy(all, 0, hs, 0, hs.length);
            if (offsets != null) b.appendWithOffset(offsets[i], ts, key, value, hs);
            else b.append(ts, key, value, hs);
        }
    }

    static void write(String name, MemoryRecords records) throws Exception {
        ByteBuffer buf = records.buffer().duplicate();
        byte[] bytes = new byte[buf.remaining()];
        buf.get(bytes);
        try (FileOutputStream f = new FileOutputStream(new File(dir, name + ".bin"))) {
            f.write(bytes);
        }
    }
}
