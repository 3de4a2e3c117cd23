// Kafka Connect's own JsonConverter (connect-json, schemas.enable=true) reading what
// wasm-connect wrote and writing it again: one JSON envelope per input line, one output line
// each (the converter's bytes, or "ERROR: " and why it refused the envelope). Run as a
// single-file program: java -cp '<Kafka Connect libs>/*' JsonConverterCheck.java
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;

import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.json.JsonConverter;

public class JsonConverterCheck {
    public static void main(String[] args) throws Exception {
        JsonConverter converter = new JsonConverter();
        converter.configure(Map.of("schemas.enable", "true"), false);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            try {
                SchemaAndValue read = converter.toConnectData("t", line.getBytes(StandardCharsets.UTF_8));
                byte[] written = converter.fromConnectData("t", read.schema(), read.value());
                System.out.println(new String(written, StandardCharsets.UTF_8));
            } catch (Exception e) {
                System.out.println("ERROR: " + e);
            }
        }
    }
}
