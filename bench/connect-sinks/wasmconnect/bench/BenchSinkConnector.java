package wasmconnect.bench;

import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.kafka.connect.sink.SinkConnector;

/** What the benchmark's sink connectors share: every task gets the connector's config. */
abstract class BenchSinkConnector extends SinkConnector {
    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        this.props = props;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return Collections.nCopies(maxTasks, props);
    }

    @Override
    public void stop() {}

    @Override
    public String version() {
        return "1";
    }
}
