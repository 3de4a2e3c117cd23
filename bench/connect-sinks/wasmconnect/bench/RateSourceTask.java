package wasmconnect.bench;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/**
 * Writes `rate` records a second, paced from its start as datagen paces itself: each poll returns
 * the records due by then, or waits (at most 100 ms) for the next one. Its offset is the record's
 * sequence number, as datagen's. With `stamp=true` each value starts with the wall-clock time in
 * milliseconds at which its record was due (as wasm-connect's bench-source does), for the latency
 * benchmark. With `tag.task=true` each value is instead `{"task":i,"seq":s}` (`i` the task's
 * index among the connector's tasks), as datagen's values name their task, for the distributed
 * benchmark.
 */
public class RateSourceTask extends SourceTask {
    private static final int MAX_PER_POLL = 2000;
    private String topic;
    private double rate;
    private String value;
    private long started;
    private long startedMs;
    private boolean stamp;
    private String tag;
    private int size;
    private long sent;
    private Map<String, ?> partition;

    @Override
    public String version() {
        return "1";
    }

    @Override
    public void start(Map<String, String> props) {
        topic = props.get("topic");
        rate = Double.parseDouble(props.getOrDefault("rate", "1"));
        size = Integer.parseInt(props.getOrDefault("value.size", "100"));
        stamp = Boolean.parseBoolean(props.getOrDefault("stamp", "false"));
        tag = Boolean.parseBoolean(props.getOrDefault("tag.task", "false"))
                ? "{\"task\":" + props.getOrDefault("task.index", "0") + ",\"seq\":"
                : null;
        value = "x".repeat(size);
        partition = Collections.singletonMap("connector", props.get("name"));
        started = System.nanoTime();
        startedMs = System.currentTimeMillis();
    }

    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        long due = (long) ((System.nanoTime() - started) / 1e9 * rate);
        if (due <= sent) {
            long next = started + (long) ((sent + 1) / rate * 1e9);
            long waitMs = Math.max(1, Math.min(100, (next - System.nanoTime()) / 1_000_000));
            Thread.sleep(waitMs);
            return null;
        }
        List<SourceRecord> records = new ArrayList<>();
        for (; sent < due && records.size() < MAX_PER_POLL; sent++) {
            records.add(new SourceRecord(partition, Collections.singletonMap("seq", sent), topic,
                    null, Schema.STRING_SCHEMA, Long.toString(sent), Schema.STRING_SCHEMA,
                    tag != null ? tag + sent + "}" : stamp ? stamped(sent) : value));
        }
        return records;
    }

    /** The value of record `seq`: the time it was due, padded with spaces to the value size. */
    private String stamped(long seq) {
        StringBuilder text = new StringBuilder(size);
        text.append((long) (startedMs + seq * 1000.0 / rate));
        while (text.length() < size) {
            text.append(' ');
        }
        return text.toString();
    }

    @Override
    public void stop() {}
}
