import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

/**
 * Kafka 3.9.1's own clients in a consumer group and a transaction, for the broker tests.
 *
 * consume BOOTSTRAP TOPIC GROUP COUNT: subscribe, read COUNT records, commitSync, print
 * "record PARTITION OFFSET VALUE" per record and "committed PARTITION OFFSET" per partition.
 * txn BOOTSTRAP TOPIC TXID GROUP: commit "c0".."c4", abort "a0".."a4", then commit "c5" with
 * the offset 5 of partition 0 of TOPIC sent to GROUP in the transaction; print "done".
 */
public class GroupClients {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[1], topic = args[2];
        if (args[0].equals("consume")) {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("group.id", args[3]);
            p.put("auto.offset.reset", "earliest");
            p.put("enable.auto.commit", "false");
            p.put("isolation.level", "read_committed");
            p.put("partition.assignment.strategy", "org.apache.kafka.clients.consumer.RoundRobinAssignor");
            int want = Integer.parseInt(args[4]);
            try (KafkaConsumer<byte[], String> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(),
                    new StringDeserializer())) {
                c.subscribe(Collections.singletonList(topic));
                int got = 0;
                long deadline = System.currentTimeMillis() + 60000;
                while (got < want && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], String> r : c.poll(Duration.ofMillis(200))) {
                        System.out.println("record " + r.partition() + " " + r.offset() + " " + r.value());
                        got++;
                    }
                }
                c.commitSync();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : c.committed(c.assignment()).entrySet()) {
                    System.out.println("committed " + e.getKey().partition() + " "
                            + (e.getValue() == null ? -1 : e.getValue().offset()));
                }
            }
        } else {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("transactional.id", args[3]);
            try (KafkaProducer<byte[], String> prod = new KafkaProducer<>(p, new ByteArraySerializer(),
                    new StringSerializer())) {
                prod.initTransactions();
                prod.beginTransaction();
                for (int i = 0; i < 5; i++) prod.send(new ProducerRecord<>(topic, 0, null, "c" + i));
                prod.commitTransaction();
                prod.beginTransaction();
                for (int i = 0; i < 5; i++) prod.send(new ProducerRecord<>(topic, 0, null, "a" + i));
                prod.flush();
                prod.abortTransaction();
                prod.beginTransaction();
                prod.send(new ProducerRecord<>(topic, 0, null, "c5"));
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                offsets.put(new TopicPartition(topic, 0), new OffsetAndMetadata(5));
                prod.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(args[4]));
                prod.commitTransaction();
            }
            System.out.println("done");
        }
    }
}
