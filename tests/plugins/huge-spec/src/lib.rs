//! Test plugin: a source whose `spec()` describes 100 MB, so the worker must refuse it at load
//! instead of keeping and serving it.

use wasm_connect_sdk::{
    Config, Connector, Result, SourceConnector, SourceRecord, SourceTask, Spec,
    export_source_connector,
};

pub struct HugeSpec;

impl Connector for HugeSpec {
    fn create(_config: &Config) -> Result<Self> {
        Ok(Self)
    }

    fn spec() -> Spec {
        Spec::new("huge-spec", "0.1.0", &"x".repeat(100 * 1024 * 1024))
    }
}

impl SourceConnector for HugeSpec {
    type Task = Task;
}

pub struct Task;

impl SourceTask for Task {
    fn create(_config: Config) -> Result<Self> {
        Ok(Task)
    }

    fn poll(&mut self, _max_records: u32) -> Result<Vec<SourceRecord>> {
        Ok(Vec::new())
    }
}

export_source_connector!(HugeSpec);
