import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.protocol.Errors;

/** Prints Kafka's error-code table: code TAB name TAB retriable(0/1) TAB default message. */
public class ErrorsTable {
    public static void main(String[] args) {
        StringBuilder out = new StringBuilder();
        for (Errors e : Errors.values()) {
            ApiException ex = e.exception();
            boolean retriable = ex instanceof RetriableException;
            String msg = e.message();
            if (e == Errors.NONE) msg = "";
            out.append(e.code()).append('\t').append(e.name()).append('\t')
               .append(retriable ? 1 : 0).append('\t')
               .append(msg == null ? "" : msg.replace('\t', ' ').replace('\n', ' ')).append('\n');
        }
        System.out.print(out);
    }
}
