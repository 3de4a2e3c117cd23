package wasmconnect.bench;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.Collection;
import java.util.Map;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/** Appends each record's value as a line through a 64 KiB buffer; flushes it when Connect commits. */
public class BufferedFileSinkTask extends SinkTask {
    private BufferedWriter out;

    @Override
    public String version() {
        return "1";
    }

    @Override
    public void start(Map<String, String> props) {
        try {
            out = new BufferedWriter(new OutputStreamWriter(Files.newOutputStream(
                    Paths.get(props.get("file")), StandardOpenOption.CREATE,
                    StandardOpenOption.APPEND), StandardCharsets.UTF_8), 1 << 16);
        } catch (IOException e) {
            throw new ConnectException("cannot open " + props.get("file"), e);
        }
    }

    @Override
    public void put(Collection<SinkRecord> records) {
        try {
            for (SinkRecord record : records) {
                out.write(String.valueOf(record.value()));
                out.write('\n');
            }
        } catch (IOException e) {
            throw new ConnectException(e);
        }
    }

    @Override
    public void flush(Map<TopicPartition, OffsetAndMetadata> offsets) {
        try {
            out.flush();
        } catch (IOException e) {
            throw new ConnectException(e);
        }
    }

    @Override
    public void stop() {
        try {
            out.close();
        } catch (IOException e) {
            throw new ConnectException(e);
        }
    }
}
