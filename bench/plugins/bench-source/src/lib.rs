//! Benchmark plugin: `poll_into` adds `max_records` copies of one prepared record whose value is
//! `record.size` bytes, so a benchmark of the host↔guest boundary measures lifting the results
//! rather than generating them.
//!
//! With `rate`, a task instead adds the records due at that rate since it started (none when
//! none is due); with `stamp`, each value starts with the wall-clock time in milliseconds at
//! which its record was due, for the latency benchmark (the harness reads it back from the
//! topic and subtracts it from the broker's append time).

use wasm_connect_sdk::{
    Config, ConfigDef, ConfigType, Connector, Data, DataRef, Result, SourceBatch, SourceConnector,
    SourceRecord, SourceRecordRef, SourceTask, Spec, export_source_connector, json,
};

pub struct BenchSource;

impl Connector for BenchSource {
    fn create(_config: &Config) -> Result<Self> {
        Ok(Self)
    }

    fn spec() -> Spec {
        Spec::new(
            "bench-source",
            "0.1.0",
            "Returns prepared records as fast as asked",
        )
        .config(
            ConfigDef::new(
                "topic",
                ConfigType::String,
                "The topic every record is written to.",
            )
            .default("bench"),
        )
        .config(ConfigDef::new(
            "key",
            ConfigType::String,
            "A text key for every record; without it, keys are null.",
        ))
        .config(
            ConfigDef::new(
                "record.size",
                ConfigType::Int,
                "Bytes of each record's value.",
            )
            .default(100),
        )
        .config(
            ConfigDef::new(
                "rate",
                ConfigType::Double,
                "Records a second; 0 for as many as the worker asks for.",
            )
            .default(0),
        )
        .config(
            ConfigDef::new(
                "stamp",
                ConfigType::Boolean,
                "Start each value with the time (ms since the epoch) its record was due.",
            )
            .default(false),
        )
    }
}

impl SourceConnector for BenchSource {
    type Task = Task;
}

pub struct Task {
    record: SourceRecord,
    topic: String,
    key: Option<String>,
    size: usize,
    /// Records a second (0: as many as asked for).
    rate: f64,
    stamp: bool,
    started: std::time::Instant,
    /// The wall-clock time of `started`, in ms since the epoch.
    started_ms: f64,
    /// Records added since `started`.
    sent: u64,
    value: String,
}

impl SourceTask for Task {
    fn create(config: Config) -> Result<Self> {
        let size: usize = config.parse_or("record.size", 100)?;
        let topic = config.get("topic").unwrap_or("bench");
        let mut record =
            SourceRecord::new(&json!("bench"), &json!(0), Data::Bytes(vec![b'x'; size]))
                .with_topic(topic);
        if let Some(key) = config.get("key") {
            record = record.with_key(Data::Text(key.to_owned()));
        }
        let rate: f64 = config.parse_or("rate", 0.0)?;
        let stamp = config.get("stamp") == Some("true");
        let started_ms = wall_ms();
        Ok(Task {
            record,
            topic: topic.to_owned(),
            key: config.get("key").map(str::to_owned),
            size,
            rate,
            stamp,
            started: std::time::Instant::now(),
            started_ms,
            sent: 0,
            value: String::with_capacity(size.max(20)),
        })
    }

    fn poll_into(&mut self, max_records: u32, batch: &mut SourceBatch) -> Result<()> {
        let mut n = u64::from(max_records);
        if self.rate > 0.0 {
            let due = (self.started.elapsed().as_secs_f64() * self.rate) as u64;
            n = n.min(due.saturating_sub(self.sent));
        }
        if !self.stamp {
            for _ in 0..n {
                batch.push(&self.record)?;
            }
            self.sent += n;
            return Ok(());
        }
        for _ in 0..n {
            let due_ms = if self.rate > 0.0 {
                self.started_ms + self.sent as f64 * 1000.0 / self.rate
            } else {
                wall_ms()
            };
            self.value.clear();
            self.value.push_str(&(due_ms as i64).to_string());
            while self.value.len() < self.size {
                self.value.push(' ');
            }
            let mut record = SourceRecordRef::new("\"bench\"", "0", DataRef::Text(&self.value))
                .with_topic(&self.topic);
            if let Some(key) = &self.key {
                record = record.with_key(DataRef::Text(key));
            }
            batch.push_ref(record)?;
            self.sent += 1;
        }
        Ok(())
    }
}

/// The wall-clock time in ms since the epoch.
fn wall_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

export_source_connector!(BenchSource);
