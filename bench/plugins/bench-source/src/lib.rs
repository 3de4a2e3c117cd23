//! Benchmark plugin: `poll_into` adds `max_records` copies of one prepared record whose value is
//! `record.size` bytes, so a benchmark of the host↔guest boundary measures lifting the results
//! rather than generating them.

use wasm_connect_sdk::{
    Config, ConfigDef, ConfigType, Connector, Data, Result, SourceBatch, SourceConnector,
    SourceRecord, SourceTask, Spec, export_source_connector, json,
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
    }
}

impl SourceConnector for BenchSource {
    type Task = Task;
}

pub struct Task {
    record: SourceRecord,
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
        Ok(Task { record })
    }

    fn poll_into(&mut self, max_records: u32, batch: &mut SourceBatch) -> Result<()> {
        for _ in 0..max_records {
            batch.push(&self.record)?;
        }
        Ok(())
    }
}

export_source_connector!(BenchSource);
