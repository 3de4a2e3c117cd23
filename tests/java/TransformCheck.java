// Kafka Connect's own single message transforms and predicates (connect-transforms), chained the
// way the runtime's TransformationChain does, for differential tests against wasm-connect's.
// Run as a single-file program: java -cp '<Kafka Connect libs>/*' TransformCheck.java < cases.json
//
// Input (stdin): a JSON array of cases
//   {"name": "...", "kind": "sink" | "source", "config": {"transforms": "a,b", "transforms.a.type": "...",
//    "transforms.a.predicate": "p", "transforms.a.negate": "true", "predicates": "p", "predicates.p.type": "..."},
//    "key_converter_schemas": true, "value_converter_schemas": true,  (optional, default true)
//    "records": [{"topic": "t", "partition": 0 | null, "offset": 5 (sink only, default 0),
//                 "timestamp": 1700000000000 | null, "key": <envelope> | null, "value": <envelope> | null,
//                 "headers": [["name", "text" | null], ...]}]}
// Key and value are JsonConverter envelopes {"schema": ..., "payload": ...} (plain JSON when that
// side's *_converter_schemas is false); null means no key/value. Header texts go through
// SimpleHeaderConverter, as a sink's headers do with the default header converter.
//
// Output (stdout): a JSON array, one result per case, in order:
//   {"name": ..., "config_error": "<Exception>: <message>"}   (class load / instantiation / configure
//                                                              failed; "INPUT: ..." for unreadable input)
//   {"name": ..., "config_error": null, "records": [ per input record one of
//     {"dropped": true}
//     {"error": "<Exception simple name>", "message": ...}     (a predicate's test or a transform's apply threw;
//                                                              "OutputConversion:<name>" when JsonConverter refused the result)
//     {"topic": ..., "partition": ..., "timestamp": ..., "key": <converter output>, "value": ..., "headers": [[name, text], ...]} ]}
// Key/value are JsonConverter's own output bytes embedded verbatim (null when it writes none).
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.util.RawValue;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;
import org.apache.kafka.connect.transforms.Transformation;
import org.apache.kafka.connect.transforms.predicates.Predicate;

@SuppressWarnings({"rawtypes", "unchecked"})
public class TransformCheck {
    // Exact decimals, so an envelope's numbers reach JsonConverter as written.
    static final ObjectMapper MAPPER = new ObjectMapper()
            .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
            .configure(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES, false);

    /** One TransformationStage: a transform, with its own predicate instance if it has one. */
    record Stage(Transformation transform, Predicate predicate, boolean negate) {}

    public static void main(String[] args) throws Exception {
        JsonNode cases = MAPPER.readTree(System.in);
        ArrayNode results = MAPPER.createArrayNode();
        for (JsonNode c : cases) {
            ObjectNode result = MAPPER.createObjectNode();
            result.put("name", c.path("name").asText());
            try {
                runCase(c, result);
            } catch (Exception e) {
                result.removeAll();
                result.put("name", c.path("name").asText());
                result.put("config_error", "INPUT: " + e);
            }
            results.add(result);
        }
        System.out.println(MAPPER.writeValueAsString(results));
    }

    static JsonConverter converter(boolean schemas, boolean isKey) {
        JsonConverter converter = new JsonConverter();
        converter.configure(Map.of("schemas.enable", Boolean.toString(schemas)), isKey);
        return converter;
    }

    static void runCase(JsonNode c, ObjectNode result) throws Exception {
        Map<String, String> config = new LinkedHashMap<>();
        for (Map.Entry<String, JsonNode> e : c.path("config").properties()) {
            config.put(e.getKey(), e.getValue().isTextual() ? e.getValue().asText() : e.getValue().toString());
        }
        JsonConverter keyConverter = converter(c.path("key_converter_schemas").asBoolean(true), true);
        JsonConverter valueConverter = converter(c.path("value_converter_schemas").asBoolean(true), false);
        SimpleHeaderConverter headerConverter = new SimpleHeaderConverter();
        headerConverter.configure(Map.of());
        boolean sink = switch (c.path("kind").asText()) {
            case "sink" -> true;
            case "source" -> false;
            default -> throw new IllegalArgumentException("kind must be \"sink\" or \"source\"");
        };

        List<ConnectRecord> records = new ArrayList<>();
        for (JsonNode r : c.path("records")) {
            String topic = r.path("topic").asText();
            SchemaAndValue key = toConnect(keyConverter, topic, r.get("key"));
            SchemaAndValue value = toConnect(valueConverter, topic, r.get("value"));
            Long timestamp = r.path("timestamp").isNumber() ? r.get("timestamp").longValue() : null;
            Integer partition = r.path("partition").isNumber() ? r.get("partition").intValue() : null;
            ConnectHeaders headers = new ConnectHeaders();
            for (JsonNode h : r.path("headers")) {
                String name = h.get(0).asText();
                byte[] text = h.get(1) == null || h.get(1).isNull() ? null : h.get(1).asText().getBytes(StandardCharsets.UTF_8);
                headers.add(name, headerConverter.toConnectHeader(topic, name, text));
            }
            records.add(sink
                    ? new SinkRecord(topic, partition == null ? 0 : partition, key.schema(), key.value(),
                            value.schema(), value.value(), r.path("offset").asLong(0), timestamp,
                            timestamp == null ? TimestampType.NO_TIMESTAMP_TYPE : TimestampType.CREATE_TIME, headers)
                    : new SourceRecord(Map.of("p", 1), Map.of("o", 1), topic, partition, key.schema(), key.value(),
                            value.schema(), value.value(), timestamp, headers));
        }

        List<Stage> stages = new ArrayList<>();
        List<AutoCloseable> plugins = new ArrayList<>();
        try {
            try {
                // Every declared predicate must load and configure, used or not (Connect validates them all).
                for (String alias : aliases(config, "predicates")) {
                    plugins.add(predicate(config, alias));
                }
                for (String alias : aliases(config, "transforms")) {
                    String prefix = "transforms." + alias + ".";
                    Transformation transform = (Transformation) instantiate(config, prefix + "type");
                    plugins.add(transform);
                    // ConnectorConfig.transformationStages: originalsWithPrefix minus predicate and negate
                    // (type, and anything else, is passed on).
                    Map<String, Object> own = withPrefix(config, prefix);
                    Object predicateAlias = own.remove("predicate");
                    Object negate = own.remove("negate");
                    transform.configure(own);
                    Predicate predicate = null;
                    if (predicateAlias != null) {
                        if (!aliases(config, "predicates").contains(predicateAlias.toString())) {
                            throw new ConfigException(prefix + "predicate", predicateAlias,
                                    "no predicate with this alias in \"predicates\"");
                        }
                        predicate = predicate(config, predicateAlias.toString());
                        plugins.add(predicate);
                    }
                    stages.add(new Stage(transform, predicate, negate != null && Boolean.parseBoolean(negate.toString())));
                }
            } catch (Exception e) {
                result.put("config_error", e.getClass().getSimpleName() + ": " + e.getMessage());
                return;
            }
            result.putNull("config_error");
            ArrayNode out = result.putArray("records");
            for (ConnectRecord record : records) {
                out.add(runChain(stages, record, keyConverter, valueConverter, headerConverter));
            }
        } finally {
            for (AutoCloseable plugin : plugins) {
                try { plugin.close(); } catch (Exception ignored) { /* the runtime only logs it */ }
            }
        }
    }

    static ObjectNode runChain(List<Stage> stages, ConnectRecord record, JsonConverter keyConverter,
            JsonConverter valueConverter, SimpleHeaderConverter headerConverter) {
        ObjectNode out = MAPPER.createObjectNode();
        try {
            for (Stage stage : stages) {
                // TransformationStage.apply: predicate == null || negate ^ predicate.test(record)
                if (stage.predicate() == null || stage.negate() ^ stage.predicate().test(record)) {
                    record = stage.transform().apply(record);
                    if (record == null) {
                        return out.put("dropped", true);
                    }
                }
            }
        } catch (Exception e) {
            return error(out, e.getClass().getSimpleName(), e);
        }
        try {
            String topic = record.topic();
            byte[] key = keyConverter.fromConnectData(topic, record.keySchema(), record.key());
            byte[] value = valueConverter.fromConnectData(topic, record.valueSchema(), record.value());
            ArrayNode headers = MAPPER.createArrayNode();
            for (Header h : (Iterable<Header>) record.headers()) {
                byte[] text = headerConverter.fromConnectHeader(topic, h.key(), h.schema(), h.value());
                headers.addArray().add(h.key()).add(text == null ? null : new String(text, StandardCharsets.UTF_8));
            }
            out.put("topic", topic);
            out.put("partition", record.kafkaPartition());
            out.put("timestamp", record.timestamp());
            raw(out, "key", key);
            raw(out, "value", value);
            out.set("headers", headers);
            return out;
        } catch (Exception e) {
            out.removeAll();
            return error(out, "OutputConversion:" + e.getClass().getSimpleName(), e);
        }
    }

    static ObjectNode error(ObjectNode out, String name, Exception e) {
        return out.put("error", name).put("message", e.getMessage());
    }

    /** JsonConverter's bytes, verbatim (they are one JSON document), or null. */
    static void raw(ObjectNode out, String field, byte[] bytes) {
        out.putRawValue(field, new RawValue(bytes == null ? "null" : new String(bytes, StandardCharsets.UTF_8)));
    }

    static SchemaAndValue toConnect(JsonConverter converter, String topic, JsonNode node) throws Exception {
        if (node == null || node.isNull()) {
            return SchemaAndValue.NULL;
        }
        return converter.toConnectData(topic, MAPPER.writeValueAsBytes(node));
    }

    /** A LIST config as ConfigDef parses it: trimmed, split on commas with surrounding whitespace. */
    static List<String> aliases(Map<String, String> config, String key) {
        String trimmed = config.getOrDefault(key, "").trim();
        List<String> aliases = trimmed.isEmpty() ? List.of() : List.of(trimmed.split("\\s*,\\s*", -1));
        if (new HashSet<>(aliases).size() != aliases.size()) {
            throw new ConfigException(key, aliases, "Duplicate alias provided.");
        }
        return aliases;
    }

    static Predicate predicate(Map<String, String> config, String alias) throws Exception {
        String prefix = "predicates." + alias + ".";
        Predicate predicate = (Predicate) instantiate(config, prefix + "type");
        predicate.configure(withPrefix(config, prefix));
        return predicate;
    }

    static Object instantiate(Map<String, String> config, String typeKey) throws Exception {
        String type = config.get(typeKey);
        if (type == null) {
            throw new ConfigException("Missing required configuration \"" + typeKey + "\" which has no default value.");
        }
        return Class.forName(type.trim()).getDeclaredConstructor().newInstance();
    }

    static Map<String, Object> withPrefix(Map<String, String> config, String prefix) {
        Map<String, Object> own = new LinkedHashMap<>();
        config.forEach((k, v) -> {
            if (k.startsWith(prefix)) {
                own.put(k.substring(prefix.length()), v);
            }
        });
        return own;
    }
}
