import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka 3.9.1's own KafkaProducer and KafkaConsumer for the client interop tests.
 *
 *   produce BOOTSTRAP COUNT CODEC:TOPIC...   idempotent producer; record i of a topic goes to
 *                                            partition i % 4 with key k<i>, value v<i>, header
 *                                            h=<i>; prints "M topic partition offset" per record
 *   consume BOOTSTRAP COUNT TOPIC...         assigns every partition of the topics from the start
 *                                            and prints each record until COUNT were read
 *   member BOOTSTRAP GROUP TOPIC STRATEGY    a group member: prints "A" lines on assignment and
 *                                            "V" on revocation, records as they come, commits after
 *                                            each poll; a line "stop" on stdin closes it
 *
 * Records print as "R topic partition offset key value timestamp headers" with key, value and
 * header values in hex ("-" for null) and headers as name=hex joined by ",".
 */
public class ClientInterop {
    static String hex(byte[] b) {
        if (b == null) return "-";
        StringBuilder sb = new StringBuilder("x");
        for (byte x : b) sb.append(String.format("%02x", x));
        return sb.toString();
    }

    static void print(ConsumerRecord<byte[], byte[]> r) {
        StringBuilder hs = new StringBuilder();
        for (Header h : r.headers()) {
            if (hs.length() > 0) hs.append(",");
            hs.append(h.key()).append("=").append(hex(h.value()));
        }
        System.out.println("R " + r.topic() + " " + r.partition() + " " + r.offset() + " "
                + hex(r.key()) + " " + hex(r.value()) + " " + r.timestamp() + " "
                + (hs.length() == 0 ? "-" : hs.toString()));
    }

    static Properties consumerProps(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        return p;
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String bootstrap = args[1];
        if (mode.equals("produce")) {
            int count = Integer.parseInt(args[2]);
            for (int a = 3; a < args.length; a++) {
                String[] ct = args[a].split(":", 2);
                Properties p = new Properties();
                p.put("bootstrap.servers", bootstrap);
                p.put("key.serializer", ByteArraySerializer.class.getName());
                p.put("value.serializer", ByteArraySerializer.class.getName());
                p.put("enable.idempotence", "true");
                p.put("acks", "all");
                p.put("compression.type", ct[0]);
                p.put("linger.ms", "5");
                p.put("max.block.ms", "20000");
                p.put("request.timeout.ms", "10000");
                p.put("delivery.timeout.ms", "30000");
                try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                    List<Future<RecordMetadata>> sent = new ArrayList<>();
                    for (int i = 0; i < count; i++) {
                        ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(ct[1], i % 4,
                                ("k" + i).getBytes(StandardCharsets.UTF_8),
                                ("v" + i).getBytes(StandardCharsets.UTF_8));
                        rec.headers().add("h", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                        sent.add(producer.send(rec));
                    }
                    producer.flush();
                    for (Future<RecordMetadata> f : sent) {
                        RecordMetadata md = f.get();
                        System.out.println("M " + md.topic() + " " + md.partition() + " " + md.offset());
                    }
                }
            }
        } else if (mode.equals("consume")) {
            int count = Integer.parseInt(args[2]);
            Properties p = consumerProps(bootstrap);
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                List<TopicPartition> tps = new ArrayList<>();
                for (int a = 3; a < args.length; a++)
                    for (PartitionInfo pi : c.partitionsFor(args[a], Duration.ofSeconds(30)))
                        tps.add(new TopicPartition(pi.topic(), pi.partition()));
                c.assign(tps);
                c.seekToBeginning(tps);
                int got = 0;
                long end = System.currentTimeMillis() + 60_000;
                while (got < count && System.currentTimeMillis() < end) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                        print(r);
                        got++;
                    }
                }
            }
        } else if (mode.equals("member")) {
            String group = args[2], topic = args[3], strategy = args[4];
            Properties p = consumerProps(bootstrap);
            p.put("group.id", group);
            p.put("session.timeout.ms", "6000");
            p.put("heartbeat.interval.ms", "300");
            p.put("partition.assignment.strategy", strategy.equals("roundrobin")
                    ? "org.apache.kafka.clients.consumer.RoundRobinAssignor"
                    : strategy.equals("cooperative-sticky")
                    ? "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
                    : "org.apache.kafka.clients.consumer.RangeAssignor");
            final boolean[] stop = {false};
            Thread reader = new Thread(() -> {
                try {
                    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
                    String line;
                    while ((line = in.readLine()) != null && !line.trim().equals("stop")) { }
                } catch (Exception e) { }
                synchronized (stop) { stop[0] = true; }
            });
            reader.setDaemon(true);
            reader.start();
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                        if (!parts.isEmpty()) c.commitSync();
                        System.out.println("V " + names(parts));
                        System.out.flush();
                    }
                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                        System.out.println("A " + names(parts));
                        System.out.flush();
                    }
                });
                while (true) {
                    synchronized (stop) { if (stop[0]) break; }
                    ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(100));
                    for (ConsumerRecord<byte[], byte[]> r : recs) print(r);
                    System.out.flush();
                    if (!recs.isEmpty()) c.commitSync();
                }
            }
            System.out.println("CLOSED");
        } else {
            throw new IllegalArgumentException("unknown mode " + mode);
        }
        System.out.flush();
    }

    static String names(Collection<TopicPartition> parts) {
        StringBuilder sb = new StringBuilder();
        for (TopicPartition tp : parts) {
            if (sb.length() > 0) sb.append(",");
            sb.append(tp.partition());
        }
        return sb.length() == 0 ? "-" : sb.toString();
    }
}
