import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.protocol.types.ArrayOf;
import org.apache.kafka.common.protocol.types.BoundField;
import org.apache.kafka.common.protocol.types.CompactArrayOf;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.RawTaggedField;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.TaggedFields;
import org.apache.kafka.common.protocol.types.Type;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.SimpleRecord;

import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.util.Base64;
import java.util.Map;
import java.util.Random;

/**
 * Golden vectors for kafkawire's protocol codec, made by Kafka 3.9.1's own generated classes.
 *
 * <pre>
 *   java ProtocolGolden schema NAME...     one JSON line per message: its wire schema at each version
 *   java ProtocolGolden golden SEED NAME... lines "name version sample hex json": populated *Data objects
 *                                           serialized by Kafka, with their fields from *DataJsonConverter
 * </pre>
 * Messages are filled through the generated JSON converter from a random JSON document built from
 * the message's schema for that version, so every field present in a version carries a value.
 */
public class ProtocolGolden {
    static final JsonNodeFactory F = JsonNodeFactory.instance;
    static final ObjectMapper M = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        if (args[0].equals("schema")) {
            for (int i = 1; i < args.length; i++) {
                System.out.println(M.writeValueAsString(schemaOf(args[i])));
            }
        } else if (args[0].equals("golden")) {
            long seed = Long.parseLong(args[1]);
            StringBuilder out = new StringBuilder();
            for (int i = 2; i < args.length; i++) golden(args[i], seed, out);
            System.out.print(out);
        } else {
            throw new IllegalArgumentException("mode must be schema or golden");
        }
    }

    static Class<?> dataClass(String name) throws Exception {
        return Class.forName("org.apache.kafka.common.message." + name + "Data");
    }

    static Schema[] schemas(String name) throws Exception {
        return (Schema[]) dataClass(name).getField("SCHEMAS").get(null);
    }

    // ---- schema dump -------------------------------------------------------------------

    static ObjectNode schemaOf(String name) throws Exception {
        ObjectNode root = F.objectNode();
        root.put("name", name);
        Class<?> cls = dataClass(name);
        root.put("lowest", cls.getField("LOWEST_SUPPORTED_VERSION").getShort(null));
        root.put("highest", cls.getField("HIGHEST_SUPPORTED_VERSION").getShort(null));
        ObjectNode versions = root.putObject("versions");
        Schema[] all = schemas(name);
        for (int v = 0; v < all.length; v++) {
            if (all[v] != null) versions.set(Integer.toString(v), typeNode(all[v], cls));
        }
        return root;
    }

    @SuppressWarnings("unchecked")
    static Map<Integer, Field> taggedMap(TaggedFields t) throws Exception {
        java.lang.reflect.Field f = TaggedFields.class.getDeclaredField("fields");
        f.setAccessible(true);
        return (Map<Integer, Field>) f.get(t);
    }

    /** The wire type; for structs also the generated class name and each field's default value. */
    static JsonNode typeNode(Type t, Class<?> cls) throws Exception {
        if (t instanceof Schema) {
            ArrayNode fields = F.arrayNode();
            Object fresh = cls.getDeclaredConstructor().newInstance();
            for (BoundField bf : ((Schema) t).fields()) {
                if (bf.def.type instanceof TaggedFields) {
                    for (Map.Entry<Integer, Field> e : taggedMap((TaggedFields) bf.def.type).entrySet()) {
                        ObjectNode fn = fields.addObject();
                        fn.put("tag", e.getKey());
                        describe(fn, e.getValue(), cls, fresh);
                    }
                    continue;
                }
                describe(fields.addObject(), bf.def, cls, fresh);
            }
            ObjectNode s = F.objectNode();
            s.put("class", cls.getSimpleName());
            s.put("flexible", hasTagBuffer((Schema) t));
            s.set("struct", fields);
            return s;
        }
        if (t instanceof ArrayOf || t instanceof CompactArrayOf) {
            ObjectNode a = F.objectNode();
            a.put("array", t instanceof CompactArrayOf ? "compact" : "classic");
            a.put("nullable", t.isNullable());
            a.set("of", typeNode(t.arrayElementType().get(), cls));
            return a;
        }
        return F.textNode(t.toString());
    }

    static void describe(ObjectNode fn, Field f, Class<?> cls, Object fresh) throws Exception {
        fn.put("name", f.name);
        java.lang.reflect.Field jf = cls.getDeclaredField(camel(f.name));
        jf.setAccessible(true);
        Class<?> inner = jf.getType();
        if (java.util.Collection.class.isAssignableFrom(inner)) {
            java.lang.reflect.Type g = jf.getGenericType();
            if (g instanceof java.lang.reflect.ParameterizedType) {
                java.lang.reflect.Type a = ((java.lang.reflect.ParameterizedType) g).getActualTypeArguments()[0];
                inner = a instanceof Class ? (Class<?>) a : Object.class;
            } else {
                java.lang.reflect.Type sup = inner.getGenericSuperclass();
                inner = (Class<?>) ((java.lang.reflect.ParameterizedType) sup).getActualTypeArguments()[0];
            }
        }
        fn.set("type", typeNode(f.type, inner));
        Object d = jf.get(fresh);
        if (d == null) fn.putNull("default");
        else if (d instanceof Boolean) fn.put("default", (Boolean) d);
        else if (d instanceof Double) fn.put("default", (Double) d);
        else if (d instanceof Number) fn.put("default", ((Number) d).longValue());
        else if (d instanceof String) fn.put("default", (String) d);
        else if (d instanceof Uuid) fn.put("default", d.toString());
        else if (d instanceof byte[]) fn.put("default", "bytes:" + ((byte[]) d).length);
        else if (d instanceof java.util.Collection) fn.put("default", "list:" + ((java.util.Collection<?>) d).size());
        else fn.put("default", "object:" + d.getClass().getSimpleName());
    }

    // ---- golden vectors ----------------------------------------------------------------

    static void golden(String name, long seed, StringBuilder out) throws Exception {
        Class<?> cls = dataClass(name);
        Class<?> conv = Class.forName("org.apache.kafka.common.message." + name + "DataJsonConverter");
        Method read = conv.getMethod("read", JsonNode.class, short.class);
        Method write = conv.getMethod("write", cls, short.class);
        Schema[] all = schemas(name);
        for (int v = 0; v < all.length; v++) {
            if (all[v] == null) continue;
            for (int sample = 0; sample < 3; sample++) {
                Random rnd = new Random(seed * 1000003L + name.hashCode() * 31L + v * 7L + sample);
                JsonNode doc = fill(all[v], rnd, sample, cls);
                Message data = (Message) read.invoke(null, doc, (short) v);
                boolean flexible = hasTagBuffer(all[v]);
                if (sample == 2 && flexible) {
                    data.unknownTaggedFields().add(new RawTaggedField(9000 + v, new byte[]{1, 2, (byte) v}));
                }
                byte[] prefixed = MessageUtil.toVersionPrefixedBytes((short) v, data);
                byte[] body = java.util.Arrays.copyOfRange(prefixed, 2, prefixed.length);
                JsonNode fields = (JsonNode) write.invoke(null, data, (short) v);
                out.append(name).append(' ').append(v).append(' ').append(sample).append(' ')
                   .append(hex(body)).append(' ').append(M.writeValueAsString(fields)).append('\n');
            }
        }
    }

    static boolean hasTagBuffer(Schema s) {
        for (BoundField bf : s.fields()) if (bf.def.type instanceof TaggedFields) return true;
        return false;
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) sb.append(String.format("%02x", x & 0xff));
        return sb.toString();
    }

    /** JSON key used by the converter: the Java field name, i.e. camelCase of the schema name. */
    static String camel(String snake) {
        StringBuilder sb = new StringBuilder();
        boolean up = false;
        for (char c : snake.toCharArray()) {
            if (c == '_') { up = true; continue; }
            sb.append(up ? Character.toUpperCase(c) : c);
            up = false;
        }
        return sb.toString();
    }

    static final String[] WORDS = {"", "a", "topic-1", "tö-π", "__consumer_offsets", "x.y_z", "grp"};

    static JsonNode fill(Schema s, Random rnd, int sample, Class<?> cls) throws Exception {
        ObjectNode o = F.objectNode();
        for (BoundField bf : s.fields()) {
            if (bf.def.type instanceof TaggedFields) {
                for (Field f : taggedMap((TaggedFields) bf.def.type).values()) {
                    // sample 0 leaves tagged fields at their defaults, the others fill them
                    if (sample > 0) o.set(camel(f.name), value(f.type, rnd, sample, cls));
                }
                continue;
            }
            o.set(camel(bf.def.name), value(bf.def.type, rnd, sample, cls));
        }
        return o;
    }

    static JsonNode value(Type t, Random rnd, int sample, Class<?> cls) throws Exception {
        if (t instanceof Schema) return fill((Schema) t, rnd, sample, cls);
        if (t instanceof ArrayOf || t instanceof CompactArrayOf) {
            if (t.isNullable() && sample == 1) return NullNode.instance;
            ArrayNode a = F.arrayNode();
            int n = sample == 1 ? 0 : 1 + rnd.nextInt(2);
            for (int i = 0; i < n; i++) a.add(value(t.arrayElementType().get(), rnd, sample, cls));
            return a;
        }
        if (t.isNullable() && sample == 1 && t != Type.RECORDS && t != Type.COMPACT_RECORDS) return NullNode.instance;
        String n = t.toString();
        switch (n) {
            case "BOOLEAN": return F.booleanNode(rnd.nextBoolean());
            case "INT8": return F.numberNode((byte) rnd.nextInt());
            case "INT16": return F.numberNode((short) rnd.nextInt());
            case "UINT16": return F.numberNode(rnd.nextInt(65536));
            case "INT32": return F.numberNode(sample == 0 ? rnd.nextInt() : rnd.nextInt(100) - 1);
            case "UINT32": case "UNSIGNED_INT32": return F.numberNode(rnd.nextLong() & 0xffffffffL);
            case "INT64": return F.numberNode(rnd.nextLong());
            case "FLOAT64": return F.numberNode(rnd.nextDouble() * 1000);
            case "UUID": return F.textNode(sample == 1 ? Uuid.ZERO_UUID.toString() : new Uuid(rnd.nextLong(), rnd.nextLong()).toString());
            case "STRING": case "COMPACT_STRING": case "NULLABLE_STRING": case "COMPACT_NULLABLE_STRING":
                return F.textNode(WORDS[rnd.nextInt(WORDS.length)] + (sample == 0 ? Integer.toString(rnd.nextInt(1000)) : ""));
            case "BYTES": case "COMPACT_BYTES": case "NULLABLE_BYTES": case "COMPACT_NULLABLE_BYTES": {
                byte[] b = new byte[rnd.nextInt(sample == 0 ? 40 : 3)];
                rnd.nextBytes(b);
                return F.textNode(Base64.getEncoder().encodeToString(b));
            }
            case "RECORDS": case "COMPACT_RECORDS": {
                if (sample == 1) return NullNode.instance;
                MemoryRecords recs = MemoryRecords.withRecords(rnd.nextInt(1000), Compression.NONE,
                        new SimpleRecord(1700000000000L, "k".getBytes(), ("v" + rnd.nextInt()).getBytes()),
                        new SimpleRecord(1700000000001L, null, "second".getBytes()));
                ByteBuffer bb = recs.buffer();
                byte[] b = new byte[bb.remaining()];
                bb.get(b);
                return F.textNode(Base64.getEncoder().encodeToString(b));
            }
            default:
                throw new IllegalArgumentException("unhandled type " + n);
        }
    }
}
