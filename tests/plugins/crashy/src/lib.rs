//! Test plugin: a source of `count` numbered records whose first `fail.first` instances trap
//! (panic) after sending a few records. It counts its instances in a file in `state.dir` (a
//! granted directory), since every restart gets a fresh instance with fresh memory.

use wasm_connect_sdk::{
    Config, ConfigDef, ConfigType, Connector, Data, Result, SourceConnector, SourceRecord,
    SourceTask, Spec, export_source_connector, json,
};

pub struct Crashy;

impl Connector for Crashy {
    fn create(_config: &Config) -> Result<Self> {
        Ok(Self)
    }

    fn spec() -> Spec {
        Spec::new("crashy", "0.1.0", "Traps in its first instances")
            .config(ConfigDef::new("topic", ConfigType::String, "Topic.").required())
            .config(
                ConfigDef::new(
                    "state.dir",
                    ConfigType::String,
                    "Writable directory for the instance counter.",
                )
                .required(),
            )
            .config(
                ConfigDef::new("fail.first", ConfigType::Int, "Instances that trap.").default(2),
            )
            .config(ConfigDef::new("count", ConfigType::Long, "Records in all.").default(200))
    }
}

impl SourceConnector for Crashy {
    type Task = Task;
}

pub struct Task {
    next: u64,
    count: u64,
    doomed: bool,
    sent_here: u64,
}

impl SourceTask for Task {
    fn create(config: Config) -> Result<Self> {
        let counter = format!("{}/instances", config.string("state.dir")?);
        let instances: u32 = std::fs::read_to_string(&counter)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
            + 1;
        std::fs::write(&counter, instances.to_string()).map_err(|e| {
            wasm_connect_sdk::ConfigError::new(
                "state.dir",
                format!("cannot write {counter}: {e}; grant it with sandbox.fs.write"),
            )
        })?;
        let fail_first: u32 = config.parse_or("fail.first", 2)?;
        let stored = wasm_connect_sdk::read_offsets(&[json!({"crashy": 0})]);
        let next = stored[0]
            .as_ref()
            .and_then(|o| o["next"].as_u64())
            .unwrap_or(0);
        Ok(Task {
            next,
            count: config.parse_or("count", 200)?,
            doomed: instances <= fail_first,
            sent_here: 0,
        })
    }

    fn poll(&mut self, _max_records: u32) -> Result<Vec<SourceRecord>> {
        if self.doomed && self.sent_here >= 20 {
            panic!("crashy instance gives up after {} records", self.sent_here);
        }
        let mut out = Vec::new();
        while self.next < self.count && out.len() < 10 {
            out.push(SourceRecord::new(
                &json!({"crashy": 0}),
                &json!({"next": self.next + 1}),
                Data::Text(self.next.to_string()),
            ));
            self.next += 1;
            self.sent_here += 1;
        }
        Ok(out)
    }
}

export_source_connector!(Crashy);
