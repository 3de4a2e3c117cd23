package wasmconnect.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import org.apache.kafka.connect.errors.ConnectException;

/**
 * A count of records, written to a file at most every 20 ms (replaced atomically, so a reader
 * never sees half a number) for the benchmark harness to read.
 */
final class Progress {
    private static final long EVERY_NANOS = 20_000_000L;
    private final Path file;
    private final Path temporary;
    private long count;
    private long written = System.nanoTime();

    Progress(String file) {
        this.file = Paths.get(file);
        this.temporary = Paths.get(file + ".tmp");
    }

    void add(long records) {
        count += records;
        long now = System.nanoTime();
        if (now - written >= EVERY_NANOS) {
            written = now;
            try {
                Files.write(temporary, Long.toString(count).getBytes(StandardCharsets.US_ASCII));
                Files.move(temporary, file, StandardCopyOption.ATOMIC_MOVE,
                        StandardCopyOption.REPLACE_EXISTING);
            } catch (IOException e) {
                throw new ConnectException("cannot write the progress file " + file, e);
            }
        }
    }
}
