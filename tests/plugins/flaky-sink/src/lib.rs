//! Test plugin: a sink (`tasks.max` tasks) that appends each value as a line to `file`, but whose first
//! `fail.times` calls to `put` fail with a retriable error (writing nothing), so a test can show
//! the worker re-delivers the same batch and loses or reorders nothing. Values containing
//! `reject` (when set) are reported as per-record failures from `put`, the first
//! `reject.times` times each record is offered (default: always).

use std::fs::{File, OpenOptions};
use std::io::Write;

use wasm_connect_sdk::{
    Config, ConfigDef, ConfigType, Connector, Error, RecordFailure, Result, SinkConnector,
    SinkRecords, SinkTask, Spec, TopicPartitionOffset, export_sink_connector,
};

pub struct FlakySink;

impl Connector for FlakySink {
    fn create(_config: &Config) -> Result<Self> {
        Ok(Self)
    }

    /// `tasks.max` tasks, all consuming the same topics (the group shares the partitions out).
    fn task_configs(&mut self, config: &Config, max_tasks: u32) -> Result<Vec<Config>> {
        Ok(vec![config.clone(); max_tasks as usize])
    }

    fn spec() -> Spec {
        Spec::new(
            "flaky-sink",
            "0.1.0",
            "Fails put retriably, then writes lines",
        )
        .config(ConfigDef::new("file", ConfigType::String, "Output file.").required())
        .config(
            ConfigDef::new("fail.times", ConfigType::Int, "Failing put calls first.").default(3),
        )
        .config(
            ConfigDef::new(
                "reject",
                ConfigType::String,
                "Reject values containing this.",
            )
            .default(""),
        )
        .config(
            ConfigDef::new("reject.times", ConfigType::Long, "Rejections per record.").default(-1),
        )
        .config(
            ConfigDef::new(
                "sleep.in",
                ConfigType::String,
                "Sleep sleep.ms in this call: put, flush or stop (none: never).",
            )
            .default("none"),
        )
        .config(ConfigDef::new("sleep.ms", ConfigType::Long, "How long to sleep.").default(1000))
        .config(ConfigDef::new(
            "secret",
            ConfigType::Password,
            "A secret that must never be echoed back.",
        ))
    }
}

impl SinkConnector for FlakySink {
    type Task = Task;
}

pub struct Task {
    file: File,
    failures_left: u32,
    reject: String,
    reject_times: i64,
    /// How often each (partition, offset) was rejected.
    rejected: std::collections::HashMap<(i32, i64), i64>,
    sleep_in: String,
    sleep_ms: u64,
}

impl Task {
    fn sleep_if(&self, call: &str) {
        if self.sleep_in == call {
            // A line in the worker's log, so a test can wait for the plugin to hang.
            eprintln!("sleeping in {call} for {} ms", self.sleep_ms);
            std::thread::sleep(std::time::Duration::from_millis(self.sleep_ms));
        }
    }
}

impl SinkTask for Task {
    fn create(config: Config) -> Result<Self> {
        let path = config.string("file")?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::fatal(format!("cannot open {path}: {e}")))?;
        Ok(Task {
            file,
            failures_left: config.parse_or("fail.times", 3)?,
            reject: config.string_or("reject", ""),
            reject_times: config.parse_or("reject.times", -1)?,
            rejected: Default::default(),
            sleep_in: config.string_or("sleep.in", "none"),
            sleep_ms: config.parse_or("sleep.ms", 1000)?,
        })
    }

    fn put(&mut self, records: &SinkRecords) -> Result<Vec<RecordFailure>> {
        self.sleep_if("put");
        if self.failures_left > 0 {
            self.failures_left -= 1;
            return Err(Error::retriable(format!(
                "pretending the target is busy ({} more failures)",
                self.failures_left
            )));
        }
        let mut failures = Vec::new();
        for record in records {
            let value = record.value().map_or(&b"null"[..], |v| v.as_bytes());
            if !self.reject.is_empty() && String::from_utf8_lossy(value).contains(&self.reject) {
                let count = self
                    .rejected
                    .entry((record.partition(), record.offset()))
                    .or_insert(0);
                if self.reject_times < 0 || *count < self.reject_times {
                    *count += 1;
                    failures.push(RecordFailure {
                        index: record.index(),
                        message: format!(
                            "refusing a value with {:?} (rejection {count})",
                            self.reject
                        ),
                    });
                    continue;
                }
            }
            // One write per line, so tasks appending to the same file never interleave.
            let mut line = Vec::with_capacity(value.len() + 1);
            line.extend_from_slice(value);
            line.push(b'\n');
            self.file
                .write_all(&line)
                .map_err(|e| Error::fatal(e.to_string()))?;
        }
        Ok(failures)
    }

    fn flush(&mut self, offsets: Vec<TopicPartitionOffset>) -> Result<Vec<TopicPartitionOffset>> {
        self.sleep_if("flush");
        self.file
            .sync_data()
            .map_err(|e| Error::retriable(e.to_string()))?;
        Ok(offsets)
    }

    fn stop(&mut self) {
        self.sleep_if("stop");
    }
}

export_sink_connector!(FlakySink);
