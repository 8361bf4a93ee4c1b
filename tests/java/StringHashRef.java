/** Prints Java's String.hashCode() of each argument (hex-encoded UTF-8), one per line. */
public class StringHashRef {
    public static void main(String[] args) throws Exception {
        for (String hex : args) {
            byte[] b = new byte[hex.length() / 2];
            for (int i = 0; i < b.length; i++) {
                b[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
            }
            String s = new String(b, java.nio.charset.StandardCharsets.UTF_8);
            System.out.println(s.hashCode());
        }
    }
}
