package wasmconnect.bench;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;

/**
 * A file sink written the way a Connect developer would write a fast one: values as lines
 * through a 64 KiB buffer, flushed when Connect commits (see BufferedFileSinkTask). Connect's own
 * FileStreamSink makes one write per record.
 */
public class BufferedFileSinkConnector extends BenchSinkConnector {
    @Override
    public Class<? extends Task> taskClass() {
        return BufferedFileSinkTask.class;
    }

    @Override
    public ConfigDef config() {
        return new ConfigDef()
                .define("file", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH,
                        "The file to append the values to, one a line.");
    }
}
