import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.utils.Utils;

/**
 * Reads hex-encoded keys, one per line, from stdin and prints, per key,
 * murmur2(key) and the default partition toPositive(murmur2(key)) % n for each n given as an argument.
 */
public class Murmur2Ref {
    public static void main(String[] args) throws Exception {
        java.io.BufferedReader in = new java.io.BufferedReader(
            new java.io.InputStreamReader(System.in, StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            byte[] key = new byte[line.length() / 2];
            for (int i = 0; i < key.length; i++) {
                key[i] = (byte) Integer.parseInt(line.substring(2 * i, 2 * i + 2), 16);
            }
            int h = Utils.murmur2(key);
            out.append(h);
            for (String a : args) {
                out.append(' ').append(Utils.toPositive(h) % Integer.parseInt(a));
            }
            out.append('\n');
        }
        System.out.print(out);
    }
}
