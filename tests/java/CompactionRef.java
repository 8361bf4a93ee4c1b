import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecords.RecordFilter;
import org.apache.kafka.common.record.MemoryRecords.RecordFilter.BatchRetention;
import org.apache.kafka.common.record.MemoryRecords.RecordFilter.BatchRetentionResult;
import org.apache.kafka.common.record.MutableRecordBatch;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.utils.BufferSupplier;

import java.io.File;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;

/**
 * What one round of Kafka's log cleaner keeps of a partition folder, by Kafka 3.9.1's own
 * {@code MemoryRecords.filterTo} with a {@code RecordFilter} holding the cleaner's rules
 * (offset map over the dirty section, tombstones until the delete horizon, aborted
 * transactions and their markers, producers' last batches kept empty, the round's last batch).
 *
 * <pre>java CompactionRef DIR NOW_MS DELETE_RETENTION_MS PRODUCER_EXPIRATION_MS</pre>
 * Prints {@code U upper} (first uncleanable offset), then per kept batch
 * {@code B base last magic attributes baseTimestamp maxTimestamp pid epoch sequence leaderEpoch count}
 * and its records {@code R offset timestamp keyhex valuehex headers}.
 */
public class CompactionRef {
    static final StringBuilder OUT = new StringBuilder();

    static String hex(ByteBuffer b) {
        if (b == null) return "-";
        StringBuilder s = new StringBuilder("x");
        ByteBuffer d = b.duplicate();
        while (d.hasRemaining()) s.append(String.format("%02x", d.get() & 0xff));
        return s.toString();
    }

    static String md5(ByteBuffer key) throws Exception {
        byte[] k = new byte[key.remaining()];
        key.duplicate().get(k);
        return Arrays.toString(MessageDigest.getInstance("MD5").digest(k));
    }

    static class Txn { long pid, first, last, lso; Txn(long p, long f, long l, long s) { pid = p; first = f; last = l; lso = s; } }

    /** The cleaner's transaction bookkeeping (CleanedTransactionMetadata). */
    static class TxnMeta {
        PriorityQueue<Txn> pending = new PriorityQueue<>((a, b) -> Long.compare(a.first, b.first));
        Set<Long> committed = new HashSet<>();
        Map<Long, boolean[]> aborted = new HashMap<>();
        void reach(long off) {
            while (!pending.isEmpty() && pending.peek().first <= off) {
                Txn t = pending.poll();
                aborted.putIfAbsent(t.pid, new boolean[1]);
            }
        }
        boolean onControl(RecordBatch b) {
            reach(b.lastOffset());
            java.util.Iterator<Record> it = b.iterator();
            if (!it.hasNext()) return true;
            ControlRecordType t = ControlRecordType.parse(it.next().key());
            if (t == ControlRecordType.ABORT) {
                boolean[] seen = aborted.remove(b.producerId());
                return !(seen != null && seen[0]);
            }
            if (t == ControlRecordType.COMMIT) return !committed.remove(b.producerId());
            return false;
        }
        boolean onData(RecordBatch b) {
            reach(b.lastOffset());
            if (!b.isTransactional()) return false;
            boolean[] seen = aborted.get(b.producerId());
            if (seen != null) { seen[0] = true; return true; }
            committed.add(b.producerId());
            return false;
        }
    }

    static List<Txn> txnIndex(File f) throws Exception {
        List<Txn> out = new ArrayList<>();
        if (!f.exists()) return out;
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(f.toPath()));
        while (b.remaining() >= 34) {
            b.getShort();
            out.add(new Txn(b.getLong(), b.getLong(), b.getLong(), b.getLong()));
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        long now = Long.parseLong(args[1]);
        long deleteRetention = Long.parseLong(args[2]);
        long expiration = Long.parseLong(args[3]);
        File[] logs = dir.listFiles((d, n) -> n.matches("\\d{20}\\.log"));
        Arrays.sort(logs);
        List<MemoryRecords> segs = new ArrayList<>();
        long[] bases = new long[logs.length];
        for (int i = 0; i < logs.length; i++) {
            bases[i] = Long.parseLong(logs[i].getName().substring(0, 20));
            segs.add(MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(logs[i].toPath()))));
        }
        // Producer state, replayed from every batch (ProducerStateManager's rules).
        Map<Long, long[]> prod = new HashMap<>();   // pid -> {epoch, lastDataOffset, lastTs, txnFirst}
        for (MemoryRecords s : segs) for (RecordBatch b : s.batches()) {
            if (b.magic() < 2 || b.producerId() < 0) continue;
            long[] e = prod.computeIfAbsent(b.producerId(), k -> new long[]{b.producerEpoch(), -1, -1, -1});
            if (e[0] != b.producerEpoch()) { e[0] = b.producerEpoch(); e[1] = -1; }
            e[2] = b.maxTimestamp();
            if (b.isControlBatch()) e[3] = -1;
            else { e[1] = b.lastOffset(); if (b.isTransactional() && e[3] < 0) e[3] = b.baseOffset(); }
        }
        long uncleanable = bases[bases.length - 1];
        Map<Long, long[]> active = new HashMap<>();
        for (Map.Entry<Long, long[]> en : prod.entrySet()) {
            long[] e = en.getValue();
            if (e[3] >= 0) uncleanable = Math.min(uncleanable, e[3]);
            if (e[3] >= 0 || now - e[2] < expiration) active.put(en.getKey(), e);
        }
        int upperSeg = 0;
        for (int i = 0; i < bases.length; i++) if (bases[i] <= uncleanable) upperSeg = i;
        final long upper = bases[upperSeg];
        OUT.append("U ").append(upper).append('\n');
        List<Txn> allTxns = new ArrayList<>();
        for (File f : logs) allTxns.addAll(txnIndex(new File(f.getPath().replace(".log", ".txnindex"))));

        // The offset map over [log start, upper), skipping aborted batches.
        Map<String, Long> map = new HashMap<>();
        long latest = -1;
        TxnMeta mapTxn = new TxnMeta();
        for (Txn t : allTxns) if (t.first < upper) mapTxn.pending.add(t);
        for (int i = 0; i < upperSeg; i++) {
            for (RecordBatch b : segs.get(i).batches()) {
                if (b.isControlBatch()) mapTxn.onControl(b);
                else if (!mapTxn.onData(b))
                    for (Record r : b) if (r.hasKey()) { map.put(md5(r.key()), r.offset()); latest = r.offset(); }
                latest = b.lastOffset();
            }
            latest = bases[i + 1] - 1;
        }
        final long latestOffset = latest;

        TxnMeta meta = new TxnMeta();
        for (int i = 0; i < upperSeg; i++) {
            long segEnd = bases[i + 1];
            for (Txn t : allTxns) if (t.last >= bases[i] && t.first < segEnd) meta.pending.add(t);
            RecordFilter filter = new RecordFilter(now, deleteRetention) {
                boolean discardRecords;
                @Override
                protected BatchRetentionResult checkBatchRetention(RecordBatch batch) {
                    boolean canDiscard = batch.isControlBatch() ? meta.onControl(batch) : meta.onData(batch);
                    if (batch.isControlBatch())
                        discardRecords = canDiscard && batch.deleteHorizonMs().isPresent()
                                && batch.deleteHorizonMs().getAsLong() <= currentTime;
                    else
                        discardRecords = canDiscard;
                    long[] last = batch.hasProducerId() ? active.get(batch.producerId()) : null;
                    boolean lastOfProducer = last != null && (last[1] >= 0 ? batch.lastOffset() == last[1]
                            : batch.isControlBatch() && batch.producerEpoch() == last[0]);
                    BatchRetention r;
                    if (lastOfProducer) r = BatchRetention.RETAIN_EMPTY;
                    else if (batch.nextOffset() == upper) r = BatchRetention.RETAIN_EMPTY;
                    else if (discardRecords) r = BatchRetention.DELETE;
                    else r = BatchRetention.DELETE_EMPTY;
                    return new BatchRetentionResult(r, canDiscard && batch.isControlBatch());
                }
                @Override
                protected boolean shouldRetainRecord(RecordBatch batch, Record record) {
                    if (discardRecords) return false;
                    if (batch.isControlBatch()) return true;
                    if (record.offset() > latestOffset) return true;
                    if (!record.hasKey()) return false;
                    Long found;
                    try { found = map.get(md5(record.key())); } catch (Exception e) { throw new RuntimeException(e); }
                    boolean latestForKey = record.offset() >= (found == null ? -1 : found);
                    boolean keepDeletes = !batch.deleteHorizonMs().isPresent() || currentTime < batch.deleteHorizonMs().getAsLong();
                    return latestForKey && (record.hasValue() || keepDeletes);
                }
            };
            MemoryRecords src = segs.get(i);
            ByteBuffer dest = ByteBuffer.allocate(src.sizeInBytes() + 4096);
            MemoryRecords.FilterResult res = src.filterTo(new TopicPartition("t", 0), filter, dest,
                    Integer.MAX_VALUE, BufferSupplier.create());
            ByteBuffer outBuf = res.outputBuffer();
            outBuf.flip();
            for (MutableRecordBatch b : MemoryRecords.readableRecords(outBuf).batches()) {
                b.ensureValid();
                OUT.append("B ").append(b.baseOffset()).append(' ').append(b.lastOffset()).append(' ')
                   .append(b.magic()).append(' ').append(attributes(b)).append(' ')
                   .append(baseTimestamp(b)).append(' ').append(b.maxTimestamp()).append(' ')
                   .append(b.producerId()).append(' ').append(b.producerEpoch()).append(' ')
                   .append(b.baseSequence()).append(' ').append(b.partitionLeaderEpoch()).append(' ')
                   .append(b.magic() >= 2 ? String.valueOf(b.countOrNull()) : "-").append('\n');
                for (Record r : b) {
                    OUT.append("R ").append(r.offset()).append(' ').append(r.timestamp()).append(' ')
                       .append(hex(r.key())).append(' ').append(hex(r.value())).append(' ')
                       .append(r.headers().length).append('\n');
                }
            }
        }
        System.out.print(OUT);
    }

    /** The attributes field as stored (v2: int16 at 21; v0/v1: the wrapper's byte at 17). */
    static int attributes(RecordBatch b) {
        ByteBuffer buf = ByteBuffer.allocate(b.sizeInBytes());
        b.writeTo(buf);
        return b.magic() >= 2 ? buf.getShort(21) & 0xffff : buf.get(17) & 0xff;
    }

    /** The v2 base timestamp field ("-" for v0/v1, which have none). */
    static String baseTimestamp(RecordBatch b) {
        if (b.magic() < 2) return "-";
        ByteBuffer buf = ByteBuffer.allocate(b.sizeInBytes());
        b.writeTo(buf);
        return String.valueOf(buf.getLong(27));
    }
}
