//! `file-sink` under repeated SIGKILL: a worker killed in the middle of a write can leave the
//! last line of the output file half written; the next start cuts it off before appending, so
//! the file ends up holding every record, each on a complete line (duplicates allowed: at least
//! once).

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use wasm_connect_tests::kafka::{self, create_topic, produce, unique_topic};
use wasm_connect_tests::worker::{Worker, eventually, write_properties};
use wasm_connect_tests::{plugin_dir, wasm_connect_bin};

/// Records produced up front: enough that the sink needs well over the kill loop's total
/// running time to write them all.
const RECORDS: usize = 1_000_000;
/// SIGKILLs before the last, orderly run.
const KILLS: usize = 12;
/// The plugin's warning when it cut a torn last line (followed by ` ({cut} bytes)`).
const REPAIRED: &str = "removed an incomplete last line";

/// A small xorshift generator for the kill delays (no dependency, seed printed).
struct XorShift(u64);

impl XorShift {
    fn seeded() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Self((nanos ^ u64::from(std::process::id()).rotate_left(32)) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// The value of record `id`: one JSON line, `{"id":<id>,"payload":"<250 to 350 chars>"}`, the
/// payload's length and text varying with the id.
fn value(id: usize) -> Vec<u8> {
    const ALPHABET: &[u8] =
        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_.:/+=";
    let len = 250 + (id * 7919) % 101;
    let payload: String = (0..len)
        .map(|i| ALPHABET[(id * 31 + i * 17 + i * i) % ALPHABET.len()] as char)
        .collect();
    format!("{{\"id\":{id},\"payload\":\"{payload}\"}}").into_bytes()
}

/// The length of `path`, 0 while it does not exist.
fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// The last byte of `path`, `None` while it is empty or missing.
fn last_byte(path: &Path) -> Option<u8> {
    let mut file = fs::File::open(path).ok()?;
    file.seek(SeekFrom::End(-1)).ok()?;
    let mut byte = [0u8];
    file.read_exact(&mut byte).ok()?;
    Some(byte[0])
}

/// What the complete lines of the output file hold so far, read incrementally.
///
/// Only complete lines are read, and the plugin's repair cuts a file back to just after its last
/// newline, so what has been read is never cut away: the tally can follow the file across kills
/// and restarts.
struct Tally {
    /// Bytes read: the file up to and including its last newline seen.
    read: u64,
    /// The bytes after that newline when the file was last read: an incomplete last line.
    tail: usize,
    lines: usize,
    seen: Vec<bool>,
    distinct: usize,
    /// Lines that are not `{"id":<n>,...` with `n` in range (the final check says which).
    odd: usize,
}

impl Tally {
    fn new() -> Self {
        Self {
            read: 0,
            tail: 0,
            lines: 0,
            seen: vec![false; RECORDS],
            distinct: 0,
            odd: 0,
        }
    }

    /// Read the complete lines appended since the last call.
    fn advance(&mut self, path: &Path) {
        let Ok(mut file) = fs::File::open(path) else {
            return;
        };
        let len = file.metadata().expect("output file metadata").len();
        assert!(
            len >= self.read,
            "the output file shrank to {len} bytes, below the {} bytes of complete lines already read: complete lines were cut",
            self.read
        );
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(self.read)).expect("seek");
        file.read_to_end(&mut bytes).expect("read the output file");
        let mut start = 0;
        while let Some(end) = bytes[start..].iter().position(|&b| b == b'\n') {
            let line = &bytes[start..start + end];
            match quick_id(line) {
                Some(id) if id < RECORDS => {
                    if !self.seen[id] {
                        self.seen[id] = true;
                        self.distinct += 1;
                    }
                }
                _ => self.odd += 1,
            }
            self.lines += 1;
            start += end + 1;
        }
        self.read += start as u64;
        self.tail = bytes.len() - start;
    }

    fn complete(&self) -> bool {
        self.distinct == RECORDS
    }
}

/// The id of a line `{"id":<n>,...` (a cheap parse; the final check parses the JSON).
fn quick_id(line: &[u8]) -> Option<usize> {
    let rest = line.strip_prefix(b"{\"id\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || rest.get(digits) != Some(&b',') {
        return None;
    }
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// `bytes` around `at`, for failure messages.
fn around(bytes: &[u8], at: usize) -> String {
    let start = at.saturating_sub(400);
    let end = (at + 400).min(bytes.len());
    format!(
        "bytes {start}..{end}: {:?}",
        String::from_utf8_lossy(&bytes[start..end])
    )
}

/// The repairs a run's log reports: `Some(cut)` for "removed ... ({cut} bytes)", `None` for
/// a repair warning whose byte count does not parse.
fn repairs_logged(log: &str) -> Vec<Option<u64>> {
    log.match_indices(REPAIRED)
        .map(|(i, _)| {
            let rest = log[i + REPAIRED.len()..].strip_prefix(" (")?;
            rest[..rest.find(' ')?].parse().ok()
        })
        .collect()
}

/// Check the log of the run that followed a kill which left `torn` bytes after the last
/// newline: it repaired exactly those bytes, or nothing when there were none.
fn assert_repair_logged(run: usize, torn: usize, log: &str) {
    let repairs = repairs_logged(log);
    if torn > 0 {
        assert_eq!(
            repairs,
            vec![Some(torn as u64)],
            "run {run} started on a file with a torn last line of {torn} bytes: its log must say it removed them:\n{log}"
        );
    } else {
        assert!(
            repairs.is_empty(),
            "run {run} started on a file ending with a newline, yet it logged a repair:\n{log}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn file_sink_never_leaves_a_torn_line_across_many_sigkills() {
    let began = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_topic("torn");
    create_topic(&topic, 1).await;
    for chunk in (0..RECORDS).step_by(100_000) {
        let values: Vec<Vec<u8>> = (chunk..RECORDS.min(chunk + 100_000)).map(value).collect();
        produce(&topic, &values);
    }
    eprintln!("produced {RECORDS} records in {:?}", began.elapsed());
    // Build the binary and the plugins now, so that the first run's start is like the others.
    let building = Instant::now();
    wasm_connect_bin();
    plugin_dir();
    let build_time = building.elapsed();
    let kills_began = Instant::now();

    let out = dir.path().join("out");
    fs::create_dir_all(&out).unwrap();
    let out_file = out.join("out.txt");
    let connector: PathBuf = dir.path().join("sink.properties");
    write_properties(
        &connector,
        &[
            // The consumer group is named after the connector: unique per test run.
            ("name", topic.clone()),
            ("connector.class", "file-sink".into()),
            ("topics", topic.clone()),
            ("file", out_file.display().to_string()),
            ("sandbox.fs.write", out.display().to_string()),
            ("value.converter", "string".into()),
        ],
    );
    let settings = kafka::worker_settings(300);
    let start = || Worker::start(dir.path(), &settings, std::slice::from_ref(&connector));

    let mut rng = XorShift::seeded();
    eprintln!("kill delays seeded with {:#x}", rng.0);
    let mut tally = Tally::new();
    // Bytes after the last newline right after the previous kill (0: it ended with a newline).
    let mut torn_before = 0usize;
    let mut torn_kills = 0;
    let mut mid_stream_kills = 0;
    for run in 0..KILLS {
        let size_at_start = file_len(&out_file);
        let started = Instant::now();
        let worker = start();
        let deadline = Instant::now() + Duration::from_secs(120);
        while file_len(&out_file) <= size_at_start {
            assert!(
                Instant::now() < deadline,
                "run {run}: the output file did not grow past {size_at_start} bytes in 120 s (did the sink already write everything? then RECORDS is too small):\n{}",
                worker.log_text()
            );
            std::thread::sleep(Duration::from_millis(3));
        }
        let to_growth = started.elapsed();
        let delay = rng.next() % 401;
        std::thread::sleep(Duration::from_millis(delay));
        let log = worker.kill();
        // The file is written by this run only once it has been repaired.
        assert_repair_logged(run, torn_before, &log);

        tally.advance(&out_file);
        torn_before = tally.tail;
        let torn = last_byte(&out_file).is_some_and(|b| b != b'\n');
        assert_eq!(torn, torn_before > 0, "the tally follows the file");
        if torn {
            torn_kills += 1;
        }
        if !tally.complete() {
            mid_stream_kills += 1;
        }
        eprintln!(
            "kill {run}: growth {to_growth:?} after the start, killed {delay} ms later, {} lines ({} distinct ids, {} not records), {} bytes after the last newline",
            tally.lines, tally.distinct, tally.odd, torn_before
        );
    }
    eprintln!(
        "{torn_kills} of {KILLS} kills left an incomplete last line; {mid_stream_kills} came before every record was written (the kills took {:?})",
        kills_began.elapsed()
    );
    assert!(
        mid_stream_kills > 0,
        "no kill came mid-stream: the sink wrote all {RECORDS} records too soon"
    );

    let last_began = Instant::now();
    let worker = start();
    assert!(
        eventually(Duration::from_secs(300), || {
            tally.advance(&out_file);
            tally.complete()
        }),
        "the last run wrote only {} of {RECORDS} ids ({} lines):\n{}",
        tally.distinct,
        tally.lines,
        worker.log_text()
    );
    let (status, log) = worker.stop();
    assert!(
        status.success(),
        "the last run exits cleanly ({status}):\n{log}"
    );
    assert_repair_logged(KILLS, torn_before, &log);

    // Every line is a whole record; every record is there.
    let bytes = fs::read(&out_file).expect("read the output file");
    assert_eq!(
        bytes.last(),
        Some(&b'\n'),
        "after an orderly stop the file ends with a newline ({})",
        around(&bytes, bytes.len())
    );
    let mut seen = vec![0u32; RECORDS];
    let mut offset = 0;
    let mut lines = 0;
    for (number, line) in bytes[..bytes.len() - 1].split(|&b| b == b'\n').enumerate() {
        let id = serde_json::from_slice::<Value>(line)
            .ok()
            .and_then(|v| v["id"].as_u64())
            .filter(|&id| (id as usize) < RECORDS);
        let Some(id) = id else {
            panic!(
                "line {} (at byte {offset}) is not a whole record: {:?}\n{}",
                number + 1,
                String::from_utf8_lossy(line),
                around(&bytes, offset)
            );
        };
        seen[id as usize] += 1;
        offset += line.len() + 1;
        lines += 1;
    }
    let missing: Vec<usize> = (0..RECORDS).filter(|&id| seen[id] == 0).collect();
    assert!(
        missing.is_empty(),
        "{} ids are missing, the first: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    let duplicates = lines - RECORDS;
    eprintln!(
        "{lines} lines for {RECORDS} records: {duplicates} duplicates (at least once); {torn_kills} of {KILLS} kills landed mid-line; the last run and the checks took {:?}; {:?} in all, {build_time:?} of which building the binary and plugins",
        last_began.elapsed(),
        began.elapsed()
    );
}
