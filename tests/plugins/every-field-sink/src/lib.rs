//! Test plugin: a sink that appends every field of each record it gets to `file`, one JSON
//! object per line, so a test can compare what the plugin saw with what is in Kafka:
//! `{"topic", "partition", "offset", "key", "value", "headers", "timestamp"}`, where a key or
//! value is `null` or `{"kind": "bytes"|"text"|"json", "data": ...}` (bytes as a list of
//! numbers) and headers are `[key, value-bytes-or-null]` pairs.

use std::fs::{File, OpenOptions};
use std::io::Write;

use wasm_connect_sdk::serde_json::Value;
use wasm_connect_sdk::{
    Config, ConfigDef, ConfigType, Connector, DataRef, Error, RecordFailure, Result, SinkConnector,
    SinkRecords, SinkTask, Spec, TopicPartitionOffset, export_sink_connector, json,
};

pub struct EveryFieldSink;

impl Connector for EveryFieldSink {
    fn create(_config: &Config) -> Result<Self> {
        Ok(Self)
    }

    fn spec() -> Spec {
        Spec::new(
            "every-field-sink",
            "0.1.0",
            "Writes every field of each record",
        )
        .config(ConfigDef::new("file", ConfigType::String, "Output file.").required())
    }
}

impl SinkConnector for EveryFieldSink {
    type Task = Task;
}

pub struct Task {
    file: File,
}

fn data(data: Option<DataRef>) -> Value {
    match data {
        None => Value::Null,
        Some(DataRef::Bytes(b)) => json!({ "kind": "bytes", "data": b }),
        Some(DataRef::Text(s)) => json!({ "kind": "text", "data": s }),
        Some(DataRef::Json(s)) => json!({ "kind": "json", "data": s }),
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
        Ok(Task { file })
    }

    fn put(&mut self, records: &SinkRecords) -> Result<Vec<RecordFailure>> {
        let mut out = Vec::new();
        for record in records {
            let headers: Vec<Value> = record.headers().map(|h| json!([h.key, h.value])).collect();
            let line = json!({
                "topic": record.topic(),
                "partition": record.partition(),
                "offset": record.offset(),
                "key": data(record.key()),
                "value": data(record.value()),
                "headers": headers,
                "timestamp": record.timestamp(),
            });
            out.extend_from_slice(line.to_string().as_bytes());
            out.push(b'\n');
        }
        self.file
            .write_all(&out)
            .map_err(|e| Error::fatal(e.to_string()))?;
        Ok(Vec::new())
    }

    fn flush(&mut self, offsets: Vec<TopicPartitionOffset>) -> Result<Vec<TopicPartitionOffset>> {
        self.file
            .sync_data()
            .map_err(|e| Error::retriable(e.to_string()))?;
        Ok(offsets)
    }
}

export_sink_connector!(EveryFieldSink);
