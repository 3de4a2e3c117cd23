//! `file-sink`: a sink connector that writes each record's value as a line to a file.
//!
//! `file` names the output file; with `{topic}` and/or `{partition}` in it, each topic
//! partition gets a file of its own. Values are written as they arrive (text and JSON as UTF-8,
//! bytes unchanged, a null value as `null`, like Kafka's FileStreamSink) and made durable
//! (`fsync`) when the worker calls `flush`, which then returns the offsets as safe to commit.
//! The worker must grant the output directory with `sandbox.fs.write`.
//!
//! A file is never left with a torn record: a worker killed mid-write can leave the last line
//! of a file incomplete, so before a task appends to a file it cuts off everything after the
//! file's last newline. Those bytes belong to records whose offsets were not committed (a
//! `flush` makes every written line durable before its offsets are returned), so the worker
//! delivers them again and they are written whole.
//!
//! The connector runs one task (the default split), so that task is the only writer of its
//! files: it writes each at the end it found on opening it. Two connectors must not name the
//! same file.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;

use wasm_connect_sdk::{
    Config, ConfigDef, ConfigError, ConfigType, Connector, Error, RecordFailure, Result,
    SinkConnector, SinkRecords, SinkTask, Spec, TopicPartitionOffset, export_sink_connector,
};

/// The connector; the default split, one task, keeps one writer per file (see [`Output`]).
pub struct FileSink;

impl Connector for FileSink {
    fn create(_config: &Config) -> Result<Self> {
        Ok(Self)
    }

    fn spec() -> Spec {
        Spec::new(
            "file-sink",
            env!("CARGO_PKG_VERSION"),
            "Writes each record's value as a line to a file (or one file per topic partition)",
        )
        .config(ConfigDef::new("topics", ConfigType::List, "Topics to consume (or use topics.regex)."))
        .config(
            ConfigDef::new(
                "file",
                ConfigType::String,
                "Absolute path of the output file. `{topic}` and `{partition}` in it give one file per topic partition. Its directory must be granted with sandbox.fs.write.",
            )
            .required(),
        )
    }

    fn validate(config: &Config) -> Vec<ConfigError> {
        match config.get("file") {
            Some(f) if f.starts_with('/') => Vec::new(),
            Some(f) => vec![ConfigError::new(
                "file",
                format!("{f:?} is not an absolute path"),
            )],
            None => vec![ConfigError::new("file", "is required")],
        }
    }
}

impl SinkConnector for FileSink {
    type Task = FileSinkTask;
}

/// One task: appends values to the output file(s).
pub struct FileSinkTask {
    template: String,
    /// Whether the file name depends on the record's topic or partition.
    per_partition: bool,
    writers: BTreeMap<String, Output>,
}

/// Bytes of values an output buffers before writing them: the whole buffer goes to the host in
/// one call (see [`Output`]).
const BUFFER_BYTES: usize = 1 << 20;

/// One output file, written at its end through a buffer of [`BUFFER_BYTES`].
///
/// Written with positional writes (`pwrite`, WASI's `descriptor.write`), not through a stream
/// in append mode: a stream takes at most 64 KiB a call, and each call is a trip to one of the
/// host's blocking threads and back, which cost the sink throughput; one positional write
/// hands the host the whole buffer. Invariant: `end` is the file's length as this task last
/// left it; the task is the file's only writer (the repair on open relies on that as well).
struct Output {
    file: File,
    buffer: Vec<u8>,
    end: u64,
}

impl Output {
    fn append(&mut self, value: &[u8]) -> std::io::Result<()> {
        if self.buffer.len() + value.len() + 1 > BUFFER_BYTES && !self.buffer.is_empty() {
            self.write_out()?;
        }
        self.buffer.extend_from_slice(value);
        self.buffer.push(b'\n');
        Ok(())
    }

    /// Write the buffer at the end of the file.
    fn write_out(&mut self) -> std::io::Result<()> {
        let mut done = 0;
        while done < self.buffer.len() {
            let rest = &self.buffer[done..];
            let at = libc::off_t::try_from(self.end + done as u64)
                .map_err(|_| std::io::Error::other("the file is too large"))?;
            // SAFETY: `rest` is a live, initialised buffer of `rest.len()` bytes, and the
            // descriptor belongs to `self.file`, which outlives the call.
            let written = unsafe {
                libc::pwrite(self.file.as_raw_fd(), rest.as_ptr().cast(), rest.len(), at)
            };
            match written {
                n if n > 0 => done += n as usize,
                0 => return Err(std::io::ErrorKind::WriteZero.into()),
                _ => {
                    let error = std::io::Error::last_os_error();
                    if error.kind() != std::io::ErrorKind::Interrupted {
                        return Err(error);
                    }
                }
            }
        }
        self.end += done as u64;
        self.buffer.clear();
        Ok(())
    }
}

impl FileSinkTask {
    /// The file for records of `topic`/`partition`.
    fn path(&self, topic: &str, partition: i32) -> String {
        self.template
            .replace("{topic}", topic)
            .replace("{partition}", &partition.to_string())
    }

    /// The writer for `path`, opening (and if need be repairing) the file on first use.
    fn writer(&mut self, path: &str) -> Result<&mut Output> {
        if !self.writers.contains_key(path) {
            let open = |options: &mut OpenOptions| {
                options.create(true).open(path).map_err(|err| {
                    Error::from(ConfigError::new(
                        "file",
                        format!(
                            "cannot open {path} for appending: {err}; its directory must exist and be granted with sandbox.fs.write"
                        ),
                    ))
                })
            };
            let mut file = open(OpenOptions::new().read(true).write(true).truncate(false))?;
            let (cut, end) = repair(&mut file)
                .map_err(|e| Error::retriable(format!("cannot check the end of {path}: {e}")))?;
            if cut > 0 {
                wasm_connect_sdk::log::warn(&format!(
                    "{path}: removed an incomplete last line ({cut} bytes) left by an earlier crash; its record is delivered again"
                ));
            }
            let output = Output {
                file,
                buffer: Vec::with_capacity(BUFFER_BYTES),
                end,
            };
            self.writers.insert(path.to_owned(), output);
        }
        self.writers
            .get_mut(path)
            .ok_or_else(|| Error::fatal(format!("no writer for {path}")))
    }
}

/// Cut `file` back to just after its last newline (to nothing if it has none), so the next
/// write starts a line of its own. Returns how many bytes were cut, and the length kept.
fn repair(file: &mut File) -> std::io::Result<(u64, u64)> {
    let length = file.seek(SeekFrom::End(0))?;
    let keep = complete_length(file, length)?;
    if keep < length {
        file.set_len(keep)?;
        file.sync_data()?;
    }
    Ok((length - keep, keep))
}

/// The length of the prefix of `file` (of `length` bytes) that ends with its last newline,
/// read backwards in chunks.
fn complete_length(file: &mut (impl Read + Seek), length: u64) -> std::io::Result<u64> {
    const CHUNK: u64 = 64 * 1024;
    let mut end = length;
    let mut buf = vec![0u8; CHUNK as usize];
    while end > 0 {
        let start = end.saturating_sub(CHUNK);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

impl SinkTask for FileSinkTask {
    fn create(config: Config) -> Result<Self> {
        let template = config.string("file")?;
        Ok(Self {
            per_partition: template.contains("{topic}") || template.contains("{partition}"),
            template,
            writers: BTreeMap::new(),
        })
    }

    fn put(&mut self, records: &SinkRecords) -> Result<Vec<RecordFailure>> {
        // Records come in runs of one partition: the file and its writer are looked up once
        // per run, not per record (this is the hot path of the sink benchmark; in wasm each
        // string comparison is a byte loop).
        let count = records.len();
        let mut start = 0;
        while let Some(first) = records.get(start) {
            let end = if self.per_partition {
                (start + 1..count)
                    .find(|&i| {
                        records.get(i).is_some_and(|r| {
                            r.partition() != first.partition() || r.topic() != first.topic()
                        })
                    })
                    .unwrap_or(count)
            } else {
                count
            };
            let path = if self.per_partition {
                self.path(first.topic(), first.partition())
            } else {
                self.template.clone()
            };
            let output = self.writer(&path)?;
            for record in (start..end).filter_map(|i| records.get(i)) {
                let value: &[u8] = match record.value() {
                    Some(data) => data.as_bytes(),
                    None => b"null",
                };
                output
                    .append(value)
                    .map_err(|e| Error::fatal(format!("cannot write {path}: {e}")))?;
            }
            start = end;
        }
        Ok(Vec::new())
    }

    fn flush(&mut self, offsets: Vec<TopicPartitionOffset>) -> Result<Vec<TopicPartitionOffset>> {
        for (path, output) in &mut self.writers {
            output
                .write_out()
                .and_then(|()| output.file.sync_data())
                .map_err(|e| Error::retriable(format!("cannot flush {path}: {e}")))?;
        }
        Ok(offsets)
    }

    fn stop(&mut self) {
        for output in self.writers.values_mut() {
            let _ = output.write_out();
        }
    }
}

export_sink_connector!(FileSink);

#[cfg(test)]
mod tests {
    use super::complete_length;
    use std::io::Cursor;

    fn kept(bytes: &[u8]) -> u64 {
        complete_length(&mut Cursor::new(bytes), bytes.len() as u64).unwrap()
    }

    #[test]
    fn a_torn_last_line_is_cut_and_whole_lines_are_kept() {
        assert_eq!(kept(b""), 0);
        assert_eq!(kept(b"{\"id\":1}\n"), 9);
        assert_eq!(kept(b"{\"id\":1}\n{\"id\":2,\"pay"), 9);
        assert_eq!(kept(b"no newline at all"), 0);
        assert_eq!(kept(b"a\n\n"), 3);
    }

    #[test]
    fn the_last_newline_is_found_across_chunks() {
        let mut bytes = b"first\n".to_vec();
        bytes.extend(std::iter::repeat_n(b'x', 200 * 1024));
        assert_eq!(kept(&bytes), 6);
        bytes.extend(b"\n");
        assert_eq!(kept(&bytes), bytes.len() as u64);
    }
}
