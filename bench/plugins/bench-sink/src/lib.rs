//! Benchmark plugin: `put` accepts every record and does nothing with it, so a benchmark of the
//! host↔guest boundary measures lowering the batch into the guest.

use wasm_connect_sdk::{
    Config, Connector, RecordFailure, Result, SinkConnector, SinkRecords, SinkTask, Spec,
    TopicPartitionOffset, export_sink_connector,
};

pub struct BenchSink;

impl Connector for BenchSink {
    fn create(_config: &Config) -> Result<Self> {
        Ok(Self)
    }

    fn spec() -> Spec {
        Spec::new("bench-sink", "0.1.0", "Accepts records and drops them")
    }

    /// `tasks.max` tasks, as Kafka Connect's sink connectors make: the consumer group spreads
    /// the topics' partitions over them.
    fn task_configs(&mut self, config: &Config, max_tasks: u32) -> Result<Vec<Config>> {
        Ok(vec![config.clone(); max_tasks.max(1) as usize])
    }
}

impl SinkConnector for BenchSink {
    type Task = Task;
}

pub struct Task;

impl SinkTask for Task {
    fn create(_config: Config) -> Result<Self> {
        Ok(Task)
    }

    fn put(&mut self, records: &SinkRecords) -> Result<Vec<RecordFailure>> {
        std::hint::black_box(&records);
        Ok(Vec::new())
    }

    fn flush(&mut self, offsets: Vec<TopicPartitionOffset>) -> Result<Vec<TopicPartitionOffset>> {
        Ok(offsets)
    }
}

export_sink_connector!(BenchSink);
