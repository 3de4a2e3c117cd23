//! Test plugin: a source whose `spec()` sleeps for an hour, so loading it must run under the
//! wall-clock deadline and must delay neither REST nor the other plugins.

use wasm_connect_sdk::{
    Config, Connector, Result, SourceConnector, SourceRecord, SourceTask, Spec,
    export_source_connector,
};

pub struct SlowSpec;

impl Connector for SlowSpec {
    fn create(_config: &Config) -> Result<Self> {
        Ok(Self)
    }

    fn spec() -> Spec {
        std::thread::sleep(std::time::Duration::from_secs(3600));
        Spec::new("slow-spec", "0.1.0", "Sleeps in spec()")
    }
}

impl SourceConnector for SlowSpec {
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

export_source_connector!(SlowSpec);
