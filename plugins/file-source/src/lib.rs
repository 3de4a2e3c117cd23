//! `file-source`: a source connector that reads lines from files into Kafka.
//!
//! Files come from `files` (a list) and/or `directory` (every regular file in it, sorted). The
//! connector splits them into contiguous groups, one per task (5 files with `tasks.max=3` gives
//! 2, 2 and 1). A record's value is one line (text, without the line ending); its source
//! partition is `{"file":path}` and its offset `{"position":bytes}`, the byte position just after
//! the line, so a restarted task resumes mid-file. With `tail=true` (the default) the task keeps
//! reading lines appended later; an incomplete last line waits for its newline.
//!
//! In directory mode the connector watches the directory (its `monitor`, every
//! `connector.monitor.interval.ms`): when the regular files in it change, the worker asks for a
//! new split, and tasks restart over the new groups, each file resuming from its committed
//! offset.
//!
//! The worker must grant the files' directories with `sandbox.fs.read`; a file outside the grant
//! is an error, never read.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Seek, SeekFrom};
use std::path::Path;

use wasm_connect_sdk::serde_json::{self, Value};
use wasm_connect_sdk::{
    Config, ConfigDef, ConfigError, ConfigType, Connector, DataRef, Error, MonitorReport, Result,
    SourceBatch, SourceConnector, SourceRecordRef, SourceTask, Spec, export_source_connector, json,
    split_evenly,
};

/// The task config key holding the task's files (a JSON array, so any file name works).
const TASK_FILES: &str = "file-source.task.files";

/// The connector: lists the files and splits them across tasks; in directory mode, watches the
/// directory for files added or removed.
pub struct FileSource {
    /// The files of the last split.
    split: Vec<String>,
}

impl Connector for FileSource {
    fn create(_config: &Config) -> Result<Self> {
        Ok(Self { split: Vec::new() })
    }

    fn spec() -> Spec {
        Spec::new(
            "file-source",
            env!("CARGO_PKG_VERSION"),
            "Reads lines from files (a list or a directory) into a topic, following appended lines",
        )
        .config(ConfigDef::new("topic", ConfigType::String, "Topic to write the lines to.").required())
        .config(ConfigDef::new(
            "files",
            ConfigType::List,
            "Absolute paths of the files to read. Their directories must be granted with sandbox.fs.read.",
        ))
        .config(ConfigDef::new(
            "directory",
            ConfigType::String,
            "Absolute path of a directory; every regular file in it is read (in name order). Must be granted with sandbox.fs.read.",
        ))
        .config(
            ConfigDef::new(
                "tail",
                ConfigType::Boolean,
                "Keep reading lines appended to the files after reaching their end.",
            )
            .default(true),
        )
    }

    fn validate(config: &Config) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        if config.list("files").is_empty() && config.get("directory").is_none() {
            errors.push(ConfigError::new(
                "files",
                "set files (a list of paths) or directory (or both)",
            ));
        }
        for file in config.list("files") {
            if !Path::new(&file).is_absolute() {
                errors.push(ConfigError::new(
                    "files",
                    format!("{file:?} is not an absolute path"),
                ));
            }
        }
        if let Err(e) = config.bool_or("tail", true) {
            errors.push(e);
        }
        // A directory that cannot be listed would fail the first split: say so now (validate
        // runs with the connector's grants).
        if let Some(dir) = config.get("directory")
            && let Err(e) = std::fs::read_dir(dir)
        {
            errors.push(ConfigError::new(
                "directory",
                format!("cannot list {dir}: {e} (is it granted with sandbox.fs.read?)"),
            ));
        }
        errors
    }

    fn task_configs(&mut self, config: &Config, max_tasks: u32) -> Result<Vec<Config>> {
        // The first split fails on a directory it cannot list (a config or grant problem);
        // a later one (after `monitor` saw a change) is retried instead.
        let files = all_files(config).map_err(|e| {
            if self.split.is_empty() {
                e
            } else {
                Error::retriable(e.to_string())
            }
        })?;
        let configs = split_evenly(&files, max_tasks as usize)
            .into_iter()
            .map(|group| {
                let list = serde_json::to_string(group).unwrap_or_else(|_| "[]".into());
                config.clone().with(TASK_FILES, list)
            })
            .collect();
        self.split = files;
        Ok(configs)
    }

    fn monitor(&mut self, config: &Config) -> Result<MonitorReport> {
        if config.get("directory").is_none() {
            return Ok(MonitorReport::unchanged());
        }
        // A directory that cannot be listed right now is tried again at the next call.
        let files = all_files(config).map_err(|e| Error::retriable(e.to_string()))?;
        Ok(if files == self.split {
            MonitorReport::unchanged()
        } else {
            wasm_connect_sdk::log::info(&format!(
                "the directory now has {} files (the running split has {}); asking for a new split",
                files.len(),
                self.split.len()
            ));
            MonitorReport::reconfigure()
        })
    }
}

impl SourceConnector for FileSource {
    type Task = FileSourceTask;
}

/// The files named by `files` and `directory`, in order, without duplicates.
fn all_files(config: &Config) -> Result<Vec<String>> {
    let mut files = config.list("files");
    if let Some(dir) = config.get("directory") {
        let entries = std::fs::read_dir(dir).map_err(|e| {
            Error::from(ConfigError::new(
                "directory",
                format!("cannot list {dir}: {e} (is it granted with sandbox.fs.read?)"),
            ))
        })?;
        let mut found: Vec<String> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path().to_string_lossy().into_owned())
            .collect();
        found.sort();
        files.extend(found);
    }
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| seen.insert(f.clone()));
    Ok(files)
}

/// One file being read.
struct Tailed {
    path: String,
    line: Cursor,
    reader: Option<BufReader<File>>,
    /// Bytes of a line whose newline has not arrived yet.
    pending: Vec<u8>,
    /// The whole file was read and `tail` is off.
    done: bool,
}

/// One task: reads its files round-robin.
pub struct FileSourceTask {
    files: Vec<Tailed>,
    tail: bool,
    next: usize,
    /// The offset text of the record being packed, reused: a record costs no allocation.
    offset: String,
}

impl SourceTask for FileSourceTask {
    fn create(config: Config) -> Result<Self> {
        let tail = config.bool_or("tail", true)?;
        let paths: Vec<String> = serde_json::from_str(&config.string(TASK_FILES)?)
            .map_err(|e| ConfigError::new(TASK_FILES, format!("not a JSON list of paths: {e}")))?;
        let partitions: Vec<Value> = paths.iter().map(|p| json!({ "file": p })).collect();
        let stored = wasm_connect_sdk::read_offsets(&partitions);
        let mut files = Vec::with_capacity(paths.len());
        for ((path, partition), offset) in paths.into_iter().zip(partitions).zip(stored) {
            let position = offset.and_then(|o| o["position"].as_u64()).unwrap_or(0);
            let mut file = Tailed {
                path,
                line: Cursor {
                    partition: partition.to_string(),
                    position,
                },
                reader: None,
                pending: Vec::new(),
                done: false,
            };
            file.open(tail)?;
            files.push(file);
        }
        Ok(Self {
            files,
            tail,
            next: 0,
            offset: String::with_capacity(32),
        })
    }

    // Lines go straight into the packed batch from the read buffer: no record, value or offset
    // is allocated per line (an owned record per line, with its partition and offset made as
    // JSON values and serialised, cost more CPU per record than Kafka Connect's whole
    // FileStreamSource; docs/benchmark-journal.md).
    fn poll_into(&mut self, max_records: u32, batch: &mut SourceBatch) -> Result<()> {
        let max = max_records as usize;
        let mut emitted = 0;
        let count = self.files.len();
        for _ in 0..count {
            if emitted >= max {
                break;
            }
            let file = &mut self.files[self.next];
            self.next = (self.next + 1) % count;
            emitted += file.read_lines(max - emitted, self.tail, batch, &mut self.offset)?;
        }
        Ok(())
    }
}

impl Tailed {
    /// Open the file at the stored position. A missing file in a visible directory is waited
    /// for in tail mode; anything else is an error that says what to grant.
    fn open(&mut self, tail: bool) -> Result<()> {
        match File::open(&self.path) {
            Ok(mut f) => {
                let len = f.metadata().map(|m| m.len()).unwrap_or(0);
                if len < self.line.position + self.pending.len() as u64 {
                    wasm_connect_sdk::log::warn(&format!(
                        "{} is shorter ({len} bytes) than the stored position {}; reading it from the start",
                        self.path, self.line.position
                    ));
                    self.line.position = 0;
                    self.pending.clear();
                }
                // Continue after the bytes of an unfinished line already buffered.
                let resume_at = self.line.position + self.pending.len() as u64;
                f.seek(SeekFrom::Start(resume_at))
                    .map_err(|e| Error::fatal(format!("cannot seek in {}: {e}", self.path)))?;
                self.reader = Some(BufReader::with_capacity(64 * 1024, f));
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::NotFound && tail && parent_visible(&self.path) => Ok(()),
            Err(e) => Err(ConfigError::new(
                "files",
                format!(
                    "cannot open {}: {e}; the file must exist and its directory must be granted with sandbox.fs.read",
                    self.path
                ),
            )
            .into()),
        }
    }

    /// Pack up to `max` lines into `batch` (`offset`: a buffer for their offsets); returns how
    /// many.
    fn read_lines(
        &mut self,
        max: usize,
        tail: bool,
        batch: &mut SourceBatch,
        offset: &mut String,
    ) -> Result<usize> {
        if self.done {
            return Ok(0);
        }
        if self.reader.is_none() {
            self.open(tail)?;
        }
        let Some(reader) = self.reader.as_mut() else {
            return Ok(0);
        };
        let mut emitted = 0;
        while emitted < max {
            let read = reader
                .read_until(b'\n', &mut self.pending)
                .map_err(|e| Error::retriable(format!("cannot read {}: {e}", self.path)))?;
            let complete = self.pending.last() == Some(&b'\n');
            if read == 0 || !complete {
                // End of the file for now: an unfinished last line waits for its newline unless
                // we are not tailing, in which case it is the last line.
                if !tail {
                    if !self.pending.is_empty() {
                        self.line.pack(&mut self.pending, batch, offset)?;
                        emitted += 1;
                    }
                    self.done = true;
                }
                // A WASI file stream stays at end-of-file once it got there, so the next poll
                // reopens the file to see appended bytes.
                self.reader = None;
                break;
            }
            self.line.pack(&mut self.pending, batch, offset)?;
            emitted += 1;
        }
        Ok(emitted)
    }
}

/// Where the next line of a file starts, and how to turn a line into a record.
struct Cursor {
    /// The file's source partition, `{"file":path}`, as JSON text (made once).
    partition: String,
    /// Byte position just after the last line returned.
    position: u64,
}

impl Cursor {
    /// Pack the record for the line in `pending` (which is cleared) into `batch`, advancing
    /// the position; its offset is `{"position":N}`, written in `offset`.
    fn pack(
        &mut self,
        pending: &mut Vec<u8>,
        batch: &mut SourceBatch,
        offset: &mut String,
    ) -> Result<()> {
        self.position += pending.len() as u64;
        let mut line = pending.as_slice();
        if let Some(rest) = line.strip_suffix(b"\n") {
            line = rest.strip_suffix(b"\r").unwrap_or(rest);
        }
        // Borrowed when the line is UTF-8, as it mostly is.
        let text = String::from_utf8_lossy(line);
        offset.clear();
        let _ = write!(offset, "{{\"position\":{}}}", self.position);
        batch.push_ref(SourceRecordRef::new(
            &self.partition,
            offset,
            DataRef::Text(&text),
        ))?;
        pending.clear();
        Ok(())
    }
}

fn parent_visible(path: &str) -> bool {
    Path::new(path)
        .parent()
        .is_some_and(|dir| std::fs::metadata(dir).is_ok_and(|m| m.is_dir()))
}

export_source_connector!(FileSource);
