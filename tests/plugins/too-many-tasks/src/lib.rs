//! Test plugin: a source connector that breaks the contract by returning `tasks.max + 1` task
//! configs. The worker must refuse, not truncate.

use wasm_connect_sdk::{
    Config, Connector, Result, SourceConnector, SourceRecord, SourceTask, Spec,
    export_source_connector,
};

pub struct Greedy;

impl Connector for Greedy {
    fn create(_config: &Config) -> Result<Self> {
        Ok(Self)
    }

    fn spec() -> Spec {
        Spec::new(
            "too-many-tasks",
            "0.1.0",
            "Returns more task configs than allowed",
        )
    }

    fn task_configs(&mut self, config: &Config, max_tasks: u32) -> Result<Vec<Config>> {
        Ok((0..=max_tasks)
            .map(|i| config.clone().with("task", i.to_string()))
            .collect())
    }
}

impl SourceConnector for Greedy {
    type Task = Idle;
}

pub struct Idle;

impl SourceTask for Idle {
    fn create(_config: Config) -> Result<Self> {
        Ok(Idle)
    }

    fn poll(&mut self, _max_records: u32) -> Result<Vec<SourceRecord>> {
        Ok(Vec::new())
    }
}

export_source_connector!(Greedy);
