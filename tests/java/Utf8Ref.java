// Decodes each stdin line (hex bytes) with new String(bytes, UTF_8), as Kafka's StringDecoder
// does, and prints the result as UTF-16BE hex: the reference for kafkawire's Java-compatible
// replacement of malformed UTF-8 in dump output.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

public class Utf8Ref {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            byte[] b = new byte[line.length() / 2];
            for (int i = 0; i < b.length; i++)
                b[i] = (byte) Integer.parseInt(line.substring(2 * i, 2 * i + 2), 16);
            String s = new String(b, StandardCharsets.UTF_8);
            for (byte x : s.getBytes(StandardCharsets.UTF_16BE))
                out.append(String.format("%02x", x & 0xff));
            out.append('\n');
        }
        System.out.print(out);
    }
}
