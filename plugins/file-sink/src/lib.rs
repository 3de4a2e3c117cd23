//! `file-sink`: a sink connector that writes each record's value as a line to a file.
//!
//! `file` names the output file; with `{topic}` and/or `{partition}` in it, each topic
//! partition gets a file of its own. Values are written as they arrive (text and JSON as UTF-8,
//! bytes unchanged, a null value as `null`, like Kafka's FileStreamSink) and made durable
//! (`fsync`) when the worker calls `flush`, which then returns the offsets as safe to commit.
//! The worker must grant the output directory with `sandbox.fs.write`.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};

use wasm_connect_sdk::{
    Config, ConfigDef, ConfigError, ConfigType, Connector, Error, RecordFailure, Result,
    SinkConnector, SinkRecords, SinkTask, Spec, TopicPartitionOffset, export_sink_connector,
};

/// The connector; every task writes the same way, so the default task split applies.
pub struct FileSink;

impl Connector for FileSink {
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
    writers: BTreeMap<String, BufWriter<File>>,
}

impl FileSinkTask {
    /// The file for records of `topic`/`partition`.
    fn path(&self, topic: &str, partition: i32) -> String {
        self.template
            .replace("{topic}", topic)
            .replace("{partition}", &partition.to_string())
    }

    /// The writer for `path`, opening the file on first use.
    fn writer(&mut self, path: &str) -> Result<&mut BufWriter<File>> {
        if !self.writers.contains_key(path) {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|err| {
                    Error::from(ConfigError::new(
                        "file",
                        format!(
                            "cannot open {path} for appending: {err}; its directory must exist and be granted with sandbox.fs.write"
                        ),
                    ))
                })?;
            self.writers
                .insert(path.to_owned(), BufWriter::with_capacity(256 * 1024, file));
        }
        self.writers
            .get_mut(path)
            .ok_or_else(|| Error::fatal(format!("no writer for {path}")))
    }
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
            let writer = self.writer(&path)?;
            for record in (start..end).filter_map(|i| records.get(i)) {
                let value: &[u8] = match record.value() {
                    Some(data) => data.as_bytes(),
                    None => b"null",
                };
                writer
                    .write_all(value)
                    .and_then(|()| writer.write_all(b"\n"))
                    .map_err(|e| Error::fatal(format!("cannot write: {e}")))?;
            }
            start = end;
        }
        Ok(Vec::new())
    }

    fn flush(&mut self, offsets: Vec<TopicPartitionOffset>) -> Result<Vec<TopicPartitionOffset>> {
        for (path, writer) in &mut self.writers {
            writer
                .flush()
                .and_then(|()| writer.get_ref().sync_data())
                .map_err(|e| Error::retriable(format!("cannot flush {path}: {e}")))?;
        }
        Ok(offsets)
    }

    fn stop(&mut self) {
        for writer in self.writers.values_mut() {
            let _ = writer.flush();
        }
    }
}

export_sink_connector!(FileSink);
