package wasmconnect.bench;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.source.SourceConnector;

/**
 * The benchmark's low-rate source for Kafka Connect, the counterpart of wasm-connect's datagen
 * with a `rate`: each task writes `rate` records a second of `value.size` bytes to `topic` (see
 * RateSourceTask). The density workload runs many of these.
 */
public class RateSourceConnector extends SourceConnector {
    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return RateSourceTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        // Each task is told its index, which `tag.task` writes into its values (as datagen's
        // values carry theirs), so the distributed benchmark can tell whose records it reads.
        List<Map<String, String>> configs = new ArrayList<>();
        for (int i = 0; i < maxTasks; i++) {
            Map<String, String> config = new HashMap<>(props);
            config.put("task.index", Integer.toString(i));
            configs.add(config);
        }
        return configs;
    }

    @Override
    public void stop() {}

    @Override
    public ConfigDef config() {
        return new ConfigDef()
                .define("topic", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "Where to write.")
                .define("rate", ConfigDef.Type.DOUBLE, 1.0, ConfigDef.Importance.HIGH,
                        "Records a second each task writes.")
                .define("value.size", ConfigDef.Type.INT, 100, ConfigDef.Importance.LOW,
                        "Bytes of each value.")
                .define("stamp", ConfigDef.Type.BOOLEAN, false, ConfigDef.Importance.LOW,
                        "Start each value with the time (ms since the epoch) it was due.")
                .define("tag.task", ConfigDef.Type.BOOLEAN, false, ConfigDef.Importance.LOW,
                        "Write values as {\"task\":i,\"seq\":s}, as datagen's name their task.");
    }

    @Override
    public String version() {
        return "1";
    }
}
