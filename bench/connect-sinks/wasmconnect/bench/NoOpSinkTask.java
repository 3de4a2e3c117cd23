package wasmconnect.bench;

import java.util.Collection;
import java.util.Map;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/**
 * Drops every record: what is left is Kafka Connect itself (consumer, converters, the task loop),
 * as wasm-connect's bench-sink leaves the worker and its plugin boundary. It reports how many
 * records it was handed through a progress file (see Progress).
 */
public class NoOpSinkTask extends SinkTask {
    private Progress progress;

    @Override
    public String version() {
        return "1";
    }

    @Override
    public void start(Map<String, String> props) {
        progress = Progress.of(props.get("progress.file"));
    }

    @Override
    public void put(Collection<SinkRecord> records) {
        progress.add(records.size());
    }

    @Override
    public void stop() {}
}
