import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.*;

/**
 * Kafka 3.9.1's Admin, a plain idempotent KafkaProducer and a KafkaConsumer in a group, against
 * the broker.  Arguments after the fixed ones are extra client settings, NAME=VALUE (security).
 *
 * admin BOOTSTRAP GROUP: create, describe and delete topics, describe the cluster, list groups
 * and GROUP's committed offsets; one line per fact (see the prints).
 * produce BOOTSTRAP TOPIC COUNT PARTITIONS: record i has key "k<i>", value "v<i>-..." and header
 * "i", to partition i % PARTITIONS; prints "sent I PARTITION OFFSET" per acknowledged record.
 * group BOOTSTRAP TOPIC GROUP: subscribe with the range assignor; print "assigned P,P..." on
 * each assignment and "record PARTITION OFFSET VALUE" per record, until a line "stop" on stdin;
 * then commitSync, print "committed PARTITION OFFSET" per partition and "closed".
 */
public class BrokerClients {
    static Properties props(String bootstrap, String[] args, int from) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "60000");
        p.put("default.api.timeout.ms", "120000");
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            p.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return p;
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "admin": admin(args); break;
            case "produce": produce(args); break;
            default: group(args);
        }
        System.out.flush();
    }

    static void admin(String[] args) throws Exception {
        String group = args[2];
        try (Admin a = Admin.create(props(args[1], args, 3))) {
            a.createTopics(Arrays.asList(
                new NewTopic("adm-a", 3, (short) 1).configs(Collections.singletonMap("cleanup.policy", "compact")),
                new NewTopic("adm-b", 1, (short) 1))).all().get();
            System.out.println("created adm-a adm-b");
            try {
                a.createTopics(Collections.singletonList(new NewTopic("adm-a", 1, (short) 1))).all().get();
                System.out.println("created again");
            } catch (ExecutionException e) {
                System.out.println("exists " + e.getCause().getClass().getSimpleName());
            }
            Map<String, TopicDescription> topics = a.describeTopics(Arrays.asList("adm-a", "adm-b"))
                .allTopicNames().get();
            for (String name : new TreeSet<>(topics.keySet())) {
                TopicDescription d = topics.get(name);
                StringBuilder leaders = new StringBuilder();
                for (org.apache.kafka.common.TopicPartitionInfo pi : d.partitions()) {
                    leaders.append(" ").append(pi.partition()).append(":").append(pi.leader().id());
                }
                System.out.println("topic " + name + " " + d.partitions().size() + " internal="
                    + d.isInternal() + leaders);
            }
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, "adm-a");
            Config cfg = a.describeConfigs(Collections.singletonList(res)).all().get().get(res);
            System.out.println("config cleanup.policy " + cfg.get("cleanup.policy").value());
            DescribeClusterResult cluster = a.describeCluster();
            StringBuilder nodes = new StringBuilder();
            for (Node n : cluster.nodes().get()) {
                nodes.append(" ").append(n.id()).append("@").append(n.host()).append(":").append(n.port());
            }
            System.out.println("cluster " + cluster.clusterId().get() + " controller "
                + cluster.controller().get().id() + " nodes" + nodes);
            System.out.println("names " + String.join(",", new TreeSet<>(a.listTopics().names().get())));
            for (ConsumerGroupListing g : a.listConsumerGroups().valid().get()) {
                System.out.println("group " + g.groupId());
            }
            Map<TopicPartition, OffsetAndMetadata> offsets =
                a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                System.out.println("offset " + e.getKey().topic() + " " + e.getKey().partition() + " "
                    + e.getValue().offset());
            }
            Map<TopicPartition, OffsetSpec> ends = new HashMap<>();
            for (TopicPartition tp : offsets.keySet()) ends.put(tp, OffsetSpec.latest());
            for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e
                    : a.listOffsets(ends).all().get().entrySet()) {
                System.out.println("end " + e.getKey().topic() + " " + e.getKey().partition() + " "
                    + e.getValue().offset());
            }
            ConsumerGroupDescription gd = a.describeConsumerGroups(Collections.singletonList(group))
                .all().get().get(group);
            System.out.println("described " + gd.groupId() + " " + gd.state() + " members=" + gd.members().size());
            a.deleteTopics(Collections.singletonList("adm-b")).all().get();
            long deadline = System.currentTimeMillis() + 60000;
            while (a.listTopics().names().get().contains("adm-b")) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("adm-b not deleted");
                Thread.sleep(100);
            }
            System.out.println("deleted adm-b");
        }
    }

    static void produce(String[] args) throws Exception {
        String topic = args[2];
        int count = Integer.parseInt(args[3]), partitions = Integer.parseInt(args[4]);
        Properties p = props(args[1], args, 5);
        p.put("enable.idempotence", "true");
        p.put("acks", "all");
        p.put("linger.ms", "5");
        p.put("delivery.timeout.ms", "120000");
        String[] lines = new String[count];
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p, new StringSerializer(),
                new StringSerializer())) {
            List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                StringBuilder v = new StringBuilder("v" + i + "-");
                for (int j = 0; j < i % 97; j++) v.append((char) ('a' + j % 26));
                ProducerRecord<String, String> r = new ProducerRecord<>(topic, i % partitions, "k" + i, v.toString());
                r.headers().add("i", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                sent.add(prod.send(r));
            }
            prod.flush();
            for (int i = 0; i < count; i++) {
                RecordMetadata m = sent.get(i).get();
                lines[i] = "sent " + i + " " + m.partition() + " " + m.offset();
            }
        }
        for (String line : lines) System.out.println(line);
    }

    static void group(String[] args) throws Exception {
        String topic = args[2];
        Properties p = props(args[1], args, 4);
        p.put("group.id", args[3]);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("session.timeout.ms", "60000");
        p.put("heartbeat.interval.ms", "1000");
        p.put("max.poll.interval.ms", "300000");
        p.put("partition.assignment.strategy", "org.apache.kafka.clients.consumer.RangeAssignor");
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("stop")) break;
                }
            } catch (Exception e) {
                // stdin closed: stop as well
            }
            stop.set(true);
        });
        reader.setDaemon(true);
        reader.start();
        try (KafkaConsumer<byte[], String> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(),
                new StringDeserializer())) {
            c.subscribe(Collections.singletonList(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    if (!parts.isEmpty()) c.commitSync();
                }
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    List<Integer> ps = new ArrayList<>();
                    for (TopicPartition tp : c.assignment()) ps.add(tp.partition());
                    Collections.sort(ps);
                    StringBuilder s = new StringBuilder();
                    for (int q : ps) s.append(s.length() == 0 ? "" : ",").append(q);
                    System.out.println("assigned " + s);
                    System.out.flush();
                }
            });
            while (!stop.get()) {
                for (ConsumerRecord<byte[], String> r : c.poll(Duration.ofMillis(200))) {
                    System.out.println("record " + r.partition() + " " + r.offset() + " " + r.value());
                }
                System.out.flush();
            }
            c.commitSync();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : c.committed(c.assignment()).entrySet()) {
                System.out.println("committed " + e.getKey().partition() + " "
                    + (e.getValue() == null ? -1 : e.getValue().offset()));
            }
        }
        System.out.println("closed");
    }
}
