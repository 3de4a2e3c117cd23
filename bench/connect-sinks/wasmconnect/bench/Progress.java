package wasmconnect.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.connect.errors.ConnectException;

/**
 * A count of records, written to a file at most every 20 ms (replaced atomically, so a reader
 * never sees half a number) for the benchmark harness to read. The tasks of one connector share
 * one count per file ({@link #of}), as the harness reads one file per run.
 */
final class Progress {
    private static final long EVERY_NANOS = 20_000_000L;
    private static final ConcurrentHashMap<String, Progress> BY_FILE = new ConcurrentHashMap<>();
    private final Path file;
    private final Path temporary;
    private long count;
    private long written = System.nanoTime();

    private Progress(String file) {
        this.file = Paths.get(file);
        this.temporary = Paths.get(file + ".tmp");
    }

    /** The count written to {@code file}, shared by every task that names it. */
    static Progress of(String file) {
        return BY_FILE.computeIfAbsent(file, Progress::new);
    }

    synchronized void add(long records) {
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
