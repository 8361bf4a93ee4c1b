// Serialises consumer-protocol subscriptions and assignments (v0-v3) with kafka-clients'
// ConsumerProtocol and prints, per line: kind, version, hex bytes, and the JSON that Kafka's
// generated JsonConverter writes for them (what kafka-dump-log --offsets-decoder embeds).
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.message.ConsumerProtocolAssignment;
import org.apache.kafka.common.message.ConsumerProtocolAssignmentJsonConverter;
import org.apache.kafka.common.message.ConsumerProtocolSubscription;
import org.apache.kafka.common.message.ConsumerProtocolSubscriptionJsonConverter;
import org.apache.kafka.common.protocol.ByteBufferAccessor;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Optional;

public class ConsumerProtocolRef {
    static String hex(ByteBuffer b) {
        StringBuilder sb = new StringBuilder();
        ByteBuffer d = b.duplicate();
        while (d.hasRemaining()) sb.append(String.format("%02x", d.get()));
        return sb.toString();
    }

    public static void main(String[] args) {
        for (short v = 0; v <= 3; v++) {
            Subscription s = new Subscription(Arrays.asList("orders", "payments"),
                v % 2 == 0 ? ByteBuffer.wrap(new byte[]{1, 2, 3}) : null,
                Arrays.asList(new TopicPartition("orders", 0), new TopicPartition("orders", 2)),
                7, v == 3 ? Optional.of("rack-a") : Optional.empty());
            ByteBuffer sb = ConsumerProtocol.serializeSubscription(s, v);
            ByteBufferAccessor acc = new ByteBufferAccessor(sb.duplicate());
            short sv = acc.readShort();
            String sj = ConsumerProtocolSubscriptionJsonConverter.write(
                new ConsumerProtocolSubscription(acc, sv), sv).toString();
            System.out.println("subscription " + v + " " + hex(sb) + " " + sj);

            Assignment a = new Assignment(Arrays.asList(new TopicPartition("orders", 1),
                new TopicPartition("payments", 4)), v == 1 ? ByteBuffer.wrap(new byte[]{9}) : null);
            ByteBuffer ab = ConsumerProtocol.serializeAssignment(a, v);
            acc = new ByteBufferAccessor(ab.duplicate());
            short av = acc.readShort();
            String aj = ConsumerProtocolAssignmentJsonConverter.write(
                new ConsumerProtocolAssignment(acc, av), av).toString();
            System.out.println("assignment " + v + " " + hex(ab) + " " + aj);
        }
    }
}
