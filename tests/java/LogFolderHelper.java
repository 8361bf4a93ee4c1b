import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.EndTransactionMarker;
import org.apache.kafka.common.record.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.TimestampType;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * Partition folders written and read by Kafka 3.9.1's own record classes, for kafkawire's log tests.
 *
 * <pre>
 *   java LogFolderHelper write DIR key=value...   write a partition folder (FileRecords for .log, indexes
 *                                                  by the broker's LogSegment rules); prints S/B/R/A lines
 *   java LogFolderHelper read DIR                  FileRecords + ensureValid over every .log, index checks;
 *                                                  prints B/R lines then "OK"
 *   java LogFolderHelper offsetlookup DIR N...    Kafka's offset lookup (index + searchForOffsetWithSize)
 *   java LogFolderHelper timelookup DIR T...      Kafka's fetchOffsetByTimestamp (time index + offset index
 *                                                  + FileRecords.searchForTimestamp)
 *   java LogFolderHelper bench DIR SECONDS        deep record iteration with FileRecords, records/s
 *   java LogFolderHelper multi                    the commands above, one per stdin line, each output ending "END"
 * </pre>
 * Output lines: {@code S base} (segment), {@code B segBase position size base last magic maxTs ctrl txn pid},
 * {@code R offset timestamp keyhex valuehex}, {@code A pid first last lso} (aborted transaction).
 */
public class LogFolderHelper {
    static final StringBuilder OUT = new StringBuilder();

    public static void main(String[] args) throws Exception {
        if (args[0].equals("multi")) {
            // one command per stdin line (space-separated args), each output followed by "END"
            java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) continue;
                run(line.trim().split(" +"));
                OUT.append("END\n");
            }
        } else {
            run(args);
        }
        System.out.print(OUT);
    }

    static void run(String[] args) throws Exception {
        switch (args[0]) {
            case "write": write(new File(args[1]), parse(args, 2)); break;
            case "read": read(new File(args[1])); break;
            case "offsetlookup": offsetLookup(new File(args[1]), Arrays.copyOfRange(args, 2, args.length)); break;
            case "timelookup": timeLookup(new File(args[1]), Arrays.copyOfRange(args, 2, args.length)); break;
            case "bench": bench(new File(args[1]), Double.parseDouble(args[2])); break;
            default: throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    static Map<String, String> parse(String[] args, int from) {
        Map<String, String> m = new HashMap<>();
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            m.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return m;
    }

    static String hex(ByteBuffer b) {
        if (b == null) return "-";
        StringBuilder s = new StringBuilder(b.remaining() * 2 + 1).append('x');
        ByteBuffer d = b.duplicate();
        while (d.hasRemaining()) s.append(String.format("%02x", d.get() & 0xff));
        return s.toString();
    }

    static String segName(long base, String suffix) {
        return String.format("%020d", base) + suffix;
    }

    // ---- writing --------------------------------------------------------------------------

    /** One segment being written, with the index state LogSegment keeps. */
    static final class Seg {
        final long base;
        final FileRecords log;
        final ByteBuffer index = ByteBuffer.allocate(16 << 20);
        final ByteBuffer timeIndex = ByteBuffer.allocate(24 << 20);
        final ByteBuffer txnIndex = ByteBuffer.allocate(1 << 20);
        int bytesSinceLastIndexEntry = 0;
        long maxTs = RecordBatch.NO_TIMESTAMP;
        long offsetOfMaxTs;
        long lastTimeEntryTs = RecordBatch.NO_TIMESTAMP;
        long lastTimeEntryOffset;

        Seg(File dir, long base) throws IOException {
            this.base = base;
            this.offsetOfMaxTs = base;
            this.lastTimeEntryOffset = base;
            this.log = FileRecords.open(new File(dir, segName(base, ".log")));
            OUT.append("S ").append(base).append('\n');
        }

        void maybeTimeEntry() {
            if (maxTs > lastTimeEntryTs) {
                timeIndex.putLong(maxTs).putInt((int) (offsetOfMaxTs - base));
                lastTimeEntryTs = maxTs;
                lastTimeEntryOffset = offsetOfMaxTs;
            }
        }

        void close(File dir, boolean clean, int preallocate) throws IOException {
            if (clean) maybeTimeEntry();
            log.flush();
            log.close();
            writeIndex(new File(dir, segName(base, ".index")), index, clean ? 0 : preallocate / 8 * 8);
            writeIndex(new File(dir, segName(base, ".timeindex")), timeIndex, clean ? 0 : preallocate / 12 * 12);
            if (txnIndex.position() > 0) writeIndex(new File(dir, segName(base, ".txnindex")), txnIndex, 0);
        }
    }

    static void writeIndex(File f, ByteBuffer b, int preallocate) throws IOException {
        try (FileOutputStream out = new FileOutputStream(f)) {
            out.write(b.array(), 0, b.position());
            if (preallocate > b.position()) out.write(new byte[preallocate - b.position()]);
        }
    }

    static void write(File dir, Map<String, String> o) throws Exception {
        dir.mkdirs();
        byte magic = Byte.parseByte(o.getOrDefault("magic", "2"));
        String codec = o.getOrDefault("codec", "none");
        int appends = Integer.parseInt(o.getOrDefault("appends", "100"));
        int perAppend = Integer.parseInt(o.getOrDefault("batchesPerAppend", "1"));
        int perBatch = Integer.parseInt(o.getOrDefault("records", "10"));
        int valueSize = Integer.parseInt(o.getOrDefault("valueSize", "100"));
        int segmentBytes = Integer.parseInt(o.getOrDefault("segmentBytes", "1048576"));
        int interval = Integer.parseInt(o.getOrDefault("interval", "4096"));
        boolean recordTsSemantics = o.getOrDefault("tsMode", "batch").equals("record");
        boolean txn = o.getOrDefault("txn", "0").equals("1");
        boolean gaps = o.getOrDefault("gaps", "0").equals("1");
        boolean shuffleTs = o.getOrDefault("shuffleTs", "0").equals("1");
        boolean logAppendTime = o.getOrDefault("lat", "0").equals("1");
        boolean mixedMagic = o.getOrDefault("mixedMagic", "0").equals("1");  // v0, then v1, then v2
        int baseGap = Integer.parseInt(o.getOrDefault("baseGap", "0"));
        int bigAt = Integer.parseInt(o.getOrDefault("bigAt", "-1"));
        String active = o.getOrDefault("active", "clean");
        int preallocate = Integer.parseInt(o.getOrDefault("preallocate", "65536"));
        long ts = Long.parseLong(o.getOrDefault("baseTs", "1700000000000"));
        long nextOffset = Long.parseLong(o.getOrDefault("startOffset", "0"));
        int distinctKeys = Integer.parseInt(o.getOrDefault("keys", "0"));        // 0: every key unique
        int tombstoneEvery = Integer.parseInt(o.getOrDefault("tombstones", "0")); // 0: no null values
        Random rnd = new Random(Long.parseLong(o.getOrDefault("seed", "1")));
        Compression compression = codec.equals("none") ? Compression.NONE : Compression.of(codec).build();
        TimestampType tsType = magic == 0 ? TimestampType.NO_TIMESTAMP_TYPE
                : (logAppendTime ? TimestampType.LOG_APPEND_TIME : TimestampType.CREATE_TIME);

        Seg seg = new Seg(dir, nextOffset);
        nextOffset += baseGap;
        Map<Long, Long> openTxns = new LinkedHashMap<>();  // pid -> first offset
        for (int a = 0; a < appends; a++) {
            List<MemoryRecords> parts = new ArrayList<>();
            long firstOfAppend = nextOffset;
            int phase = a % 4;
            if (txn && phase >= 2) {
                long pid = 1000 + (phase - 2);
                boolean commit = ((a / 4) + (phase - 2)) % 2 == 0;
                EndTransactionMarker m = new EndTransactionMarker(commit ? ControlRecordType.COMMIT : ControlRecordType.ABORT, 7);
                parts.add(MemoryRecords.withEndTransactionMarker(nextOffset, ts, 0, pid, (short) 3, m));
                Long first = openTxns.remove(pid);
                if (!commit && first != null) {
                    long lso = nextOffset + 1;
                    for (long f : openTxns.values()) lso = Math.min(lso, f);
                    seg.txnIndex.putShort((short) 0).putLong(pid).putLong(first).putLong(nextOffset).putLong(lso);
                    OUT.append("A ").append(pid).append(' ').append(first).append(' ').append(nextOffset)
                       .append(' ').append(lso).append('\n');
                }
                nextOffset++;
            } else {
                byte m = mixedMagic ? (byte) (a * 3 / appends) : magic;
                TimestampType tt = m == 0 ? TimestampType.NO_TIMESTAMP_TYPE : tsType == TimestampType.NO_TIMESTAMP_TYPE ? TimestampType.CREATE_TIME : tsType;
                for (int b = 0; b < perAppend; b++) {
                    long pid = txn ? 1000 + phase : -1;
                    ByteBuffer buf = ByteBuffer.allocate(1 << 20);
                    int vs = a == bigAt ? segmentBytes + 1000 : valueSize;
                    if (vs > buf.capacity() / 2) buf = ByteBuffer.allocate(vs * 2 + 4096);
                    MemoryRecordsBuilder bld = MemoryRecords.builder(buf, m, compression, tt, nextOffset,
                            logAppendTime ? ts + 5 : RecordBatch.NO_TIMESTAMP, pid, (short) (txn ? 3 : -1),
                            txn ? (int) (nextOffset & 0xffff) : -1, txn, 0);
                    if (txn) openTxns.putIfAbsent(pid, nextOffset);
                    for (int r = 0; r < perBatch; r++) {
                        byte[] key = ("k" + (distinctKeys > 0 ? nextOffset % distinctKeys : nextOffset)).getBytes();
                        byte[] value = new byte[vs];
                        rnd.nextBytes(value);
                        if (tombstoneEvery > 0 && nextOffset % tombstoneEvery == 0) value = null;
                        long rts = shuffleTs ? ts + rnd.nextInt(2000) - 1000 : ts;
                        Header[] headers = m == 2 && r % 3 == 0
                                ? new Header[]{new RecordHeader("h", new byte[]{(byte) r})} : new Header[0];
                        bld.appendWithOffset(nextOffset, rts, key, value, headers);
                        nextOffset += gaps && (r % 4 == 1) ? 2 : 1;
                        ts += 1;
                    }
                    parts.add(bld.build());
                }
            }
            int size = 0;
            for (MemoryRecords p : parts) size += p.sizeInBytes();
            if (seg.log.sizeInBytes() > 0 && seg.log.sizeInBytes() + size > segmentBytes) {
                seg.close(dir, true, 0);
                seg = new Seg(dir, firstOfAppend);
                if (baseGap > 0) {
                    // A cleaned segment keeps a base offset below its first surviving batch.
                    for (MemoryRecords p : parts) shift(p, baseGap);
                    nextOffset += baseGap;
                    // the new segment's base stays firstOfAppend; the batches moved up by baseGap
                    for (Map.Entry<Long, Long> e : openTxns.entrySet()) if (e.getValue() >= firstOfAppend) e.setValue(e.getValue() + baseGap);
                }
            }
            long lastOfAppend = -1;
            int position = seg.log.sizeInBytes();
            for (MemoryRecords p : parts) {
                for (RecordBatch batch : p.batches()) {
                    lastOfAppend = batch.lastOffset();
                    if (batch.maxTimestamp() > seg.maxTs) {
                        seg.maxTs = batch.maxTimestamp();
                        seg.offsetOfMaxTs = batch.lastOffset();
                        if (recordTsSemantics && batch.timestampType() == TimestampType.CREATE_TIME) {
                            for (Record rec : batch) {
                                if (rec.timestamp() == batch.maxTimestamp()) { seg.offsetOfMaxTs = rec.offset(); break; }
                            }
                        }
                    }
                }
            }
            if (seg.bytesSinceLastIndexEntry > interval) {
                seg.index.putInt((int) (lastOfAppend - seg.base)).putInt(position);
                seg.maybeTimeEntry();
                seg.bytesSinceLastIndexEntry = 0;
            }
            seg.bytesSinceLastIndexEntry += size;
            for (MemoryRecords p : parts) {
                int pos = seg.log.sizeInBytes();
                seg.log.append(p);
                for (RecordBatch batch : p.batches()) {
                    printBatch(seg.base, pos, batch);
                    pos += batch.sizeInBytes();
                }
            }
        }
        seg.close(dir, active.equals("clean"), preallocate);
        Files.write(new File(dir, "partition.metadata").toPath(),
                "version: 0\ntopic_id: Yp5ydw0pSJ2nJ3sxjbNLdA\n".getBytes());
        Files.write(new File(dir, "leader-epoch-checkpoint").toPath(), "0\n1\n0 0\n".getBytes());
    }

    /** Moves every batch of p up by delta offsets (v2 base offset field; legacy: each shallow offset). */
    static void shift(MemoryRecords p, int delta) {
        ByteBuffer b = p.buffer();
        int pos = 0;
        while (pos < b.limit()) {
            long off = b.getLong(pos);
            b.putLong(pos, off + delta);
            pos += 12 + b.getInt(pos + 8);
        }
        if (b.limit() > 16 && b.get(16) < 2) throw new IllegalArgumentException("baseGap needs magic 2 (legacy CRC)");
    }

    static void printBatch(long segBase, int pos, RecordBatch batch) {
        OUT.append("B ").append(segBase).append(' ').append(pos).append(' ').append(batch.sizeInBytes())
           .append(' ').append(batch.baseOffset()).append(' ').append(batch.lastOffset())
           .append(' ').append(batch.magic()).append(' ').append(batch.maxTimestamp())
           .append(' ').append(batch.isControlBatch() ? 1 : 0).append(' ').append(batch.isTransactional() ? 1 : 0)
           .append(' ').append(batch.producerId()).append('\n');
        for (Record r : batch) {
            OUT.append("R ").append(r.offset()).append(' ').append(r.timestamp()).append(' ')
               .append(hex(r.key())).append(' ').append(hex(r.value())).append('\n');
        }
    }

    // ---- reading and checking -----------------------------------------------------------

    static File[] logs(File dir) {
        File[] fs = dir.listFiles((d, n) -> n.matches("\\d{20}\\.log"));
        Arrays.sort(fs);
        return fs;
    }

    static long baseOf(File f) {
        return Long.parseLong(f.getName().substring(0, 20));
    }

    static void read(File dir) throws Exception {
        for (File f : logs(dir)) {
            long base = baseOf(f);
            Map<Integer, RecordBatch> byPos = new HashMap<>();
            List<RecordBatch> ordered = new ArrayList<>();
            try (FileRecords fr = FileRecords.open(f, false)) {
                long prevLast = -1;
                int end = 0;
                for (FileChannelRecordBatch batch : fr.batches()) {
                    end = batch.position() + batch.sizeInBytes();
                    batch.ensureValid();
                    if (batch.lastOffset() <= prevLast) throw new IllegalStateException(f + ": offsets not increasing at " + batch.position());
                    if (batch.lastOffset() - base > Integer.MAX_VALUE || batch.baseOffset() < base)
                        throw new IllegalStateException(f + ": offset out of segment range at " + batch.position());
                    prevLast = batch.lastOffset();
                    byPos.put(batch.position(), batch);
                    ordered.add(batch);
                    printBatch(base, batch.position(), batch);
                }
                if (end != fr.sizeInBytes())
                    throw new IllegalStateException(f + ": trailing bytes after the last batch");
            }
            checkIndexes(f, base, byPos, ordered);
        }
        OUT.append("OK\n");
    }

    static void checkIndexes(File log, long base, Map<Integer, RecordBatch> byPos, List<RecordBatch> ordered) throws IOException {
        File idx = new File(log.getParentFile(), segName(base, ".index"));
        File tidx = new File(log.getParentFile(), segName(base, ".timeindex"));
        if (idx.exists()) {
            ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(idx.toPath()));
            if (b.limit() % 8 != 0) throw new IllegalStateException(idx + ": size not a multiple of 8");
            int prevRel = -1, prevPos = -1;
            while (b.hasRemaining()) {
                int rel = b.getInt(), pos = b.getInt();
                if (rel <= prevRel || pos <= prevPos) throw new IllegalStateException(idx + ": entries not increasing");
                RecordBatch at = byPos.get(pos);
                if (at == null) throw new IllegalStateException(idx + ": entry position " + pos + " is not a batch");
                if (at.baseOffset() > base + rel || at.lastOffset() > base + rel)
                    throw new IllegalStateException(idx + ": entry offset " + (base + rel) + " before its batch");
                prevRel = rel; prevPos = pos;
            }
            OUT.append("I ").append(base).append(' ').append(b.limit() / 8).append('\n');
        }
        if (tidx.exists()) {
            ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(tidx.toPath()));
            if (b.limit() % 12 != 0) throw new IllegalStateException(tidx + ": size not a multiple of 12");
            long prevTs = Long.MIN_VALUE; int prevRel = -1;
            while (b.hasRemaining()) {
                long t = b.getLong(); int rel = b.getInt();
                if (t <= prevTs || rel < prevRel) throw new IllegalStateException(tidx + ": entries not increasing");
                RecordBatch holder = null;
                for (RecordBatch rb : ordered) if (rb.lastOffset() >= base + rel) { holder = rb; break; }
                if (holder == null || holder.maxTimestamp() != t)
                    throw new IllegalStateException(tidx + ": entry (" + t + ", " + (base + rel) + ") does not match the log");
                prevTs = t; prevRel = rel;
            }
            OUT.append("T ").append(base).append(' ').append(b.limit() / 12).append('\n');
        }
    }

    // ---- lookups by Kafka's code -----------------------------------------------------------

    static int indexLookup(File log, long base, long target) throws IOException {
        File idx = new File(log.getParentFile(), segName(base, ".index"));
        if (!idx.exists()) return 0;
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(idx.toPath()));
        int best = 0;
        while (b.remaining() >= 8) {
            int rel = b.getInt(), pos = b.getInt();
            if (rel == 0 && pos == 0) break;
            if (base + rel <= target) best = pos; else break;
        }
        return best;
    }

    static long[] timeIndexLast(File log, long base) throws IOException {
        File tidx = new File(log.getParentFile(), segName(base, ".timeindex"));
        long[] last = {RecordBatch.NO_TIMESTAMP, base};
        if (!tidx.exists()) return last;
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(tidx.toPath()));
        while (b.remaining() >= 12) { last[0] = b.getLong(); last[1] = base + b.getInt(); }
        return last;
    }

    static long[] timeIndexLookup(File log, long base, long target) throws IOException {
        File tidx = new File(log.getParentFile(), segName(base, ".timeindex"));
        long[] best = {RecordBatch.NO_TIMESTAMP, base};
        if (!tidx.exists()) return best;
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(tidx.toPath()));
        while (b.remaining() >= 12) {
            long t = b.getLong(); int rel = b.getInt();
            if (t <= target) { best[0] = t; best[1] = base + rel; } else break;
        }
        return best;
    }

    static void offsetLookup(File dir, String[] targets) throws Exception {
        File[] fs = logs(dir);
        for (String t : targets) {
            long target = Long.parseLong(t);
            int start = 0;
            for (int i = 0; i < fs.length; i++) if (baseOf(fs[i]) <= target) start = i;
            String answer = "-1 -1";
            for (int i = start; i < fs.length; i++) {
                long base = baseOf(fs[i]);
                try (FileRecords fr = FileRecords.open(fs[i], false)) {
                    FileRecords.LogOffsetPosition p = fr.searchForOffsetWithSize(target, i == start ? indexLookup(fs[i], base, target) : 0);
                    if (p != null) { answer = base + " " + p.position; break; }
                }
            }
            OUT.append("O ").append(target).append(' ').append(answer).append('\n');
        }
    }

    static void timeLookup(File dir, String[] targets) throws Exception {
        File[] fs = logs(dir);
        long logStart = fs.length > 0 ? baseOf(fs[0]) : 0;
        for (String t : targets) {
            long target = Long.parseLong(t);
            String answer = "-1 -1";
            for (File f : fs) {
                long base = baseOf(f);
                if (timeIndexLast(f, base)[0] < target) continue;
                long[] entry = timeIndexLookup(f, base, target);
                int pos = indexLookup(f, base, Math.max(entry[1], logStart));
                try (FileRecords fr = FileRecords.open(f, false)) {
                    FileRecords.TimestampAndOffset r = fr.searchForTimestamp(target, pos, logStart);
                    if (r != null) answer = r.offset + " " + r.timestamp;
                }
                break;  // the broker searches only the first segment whose largest timestamp reaches the target
            }
            OUT.append("T ").append(target).append(' ').append(answer).append('\n');
        }
    }

    // ---- benchmark --------------------------------------------------------------------------

    static long pass(File[] fs) throws IOException {
        long n = 0, sink = 0;
        for (File f : fs) {
            try (FileRecords fr = FileRecords.open(f, false)) {
                for (FileChannelRecordBatch batch : fr.batches()) {
                    for (Record r : batch) {
                        sink += r.offset() + r.timestamp() + r.keySize() + r.valueSize() + r.headers().length;
                        ByteBuffer v = r.value();
                        if (v != null && v.remaining() > 0) sink += v.get(v.position());
                        n++;
                    }
                }
            }
        }
        if (sink == 42) System.err.println();
        return n;
    }

    static void bench(File dir, double seconds) throws Exception {
        File[] fs = logs(dir);
        long t0 = System.nanoTime();
        while (System.nanoTime() - t0 < 3e9) pass(fs);  // JIT warm-up
        long n = 0;
        t0 = System.nanoTime();
        int passes = 0;
        do { n += pass(fs); passes++; } while (System.nanoTime() - t0 < seconds * 1e9);
        double el = (System.nanoTime() - t0) / 1e9;
        OUT.append("records ").append(n).append(" seconds ").append(el).append(" passes ").append(passes)
           .append(" records_per_sec ").append(n / el).append('\n');
    }
}
