package wasmconnect.bench;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;

/** The benchmark's no-op sink for Kafka Connect: its tasks drop every record (see NoOpSinkTask). */
public class NoOpSinkConnector extends BenchSinkConnector {
    @Override
    public Class<? extends Task> taskClass() {
        return NoOpSinkTask.class;
    }

    @Override
    public ConfigDef config() {
        return new ConfigDef()
                .define("progress.file", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH,
                        "Where the task writes how many records it was handed.");
    }
}
