//! Test plugin: a source task whose `poll` misbehaves in the way `mode` says, to show the
//! sandbox contains it. Modes: `log` (logs and prints, then returns nothing), `spin` (never
//! returns), `alloc` (allocates until memory runs out), `panic` (traps).

use wasm_connect_sdk::{
    Config, ConfigDef, ConfigType, Connector, Result, SourceConnector, SourceRecord, SourceTask,
    Spec, export_source_connector, log,
};

pub struct Misbehave;

impl Connector for Misbehave {
    fn spec() -> Spec {
        Spec::new("misbehave", "0.1.0", "Misbehaves on purpose").config(
            ConfigDef::new("mode", ConfigType::String, "How to misbehave in poll.")
                .allowed(&["log", "spin", "alloc", "panic"])
                .required(),
        )
    }
}

impl SourceConnector for Misbehave {
    type Task = Task;
}

pub struct Task {
    mode: String,
}

impl SourceTask for Task {
    fn create(config: Config) -> Result<Self> {
        Ok(Task {
            mode: config.string("mode")?,
        })
    }

    fn poll(&mut self, _max_records: u32) -> Result<Vec<SourceRecord>> {
        match self.mode.as_str() {
            "log" => {
                log::info("hello through the log import");
                println!("hello through stdout");
                eprintln!("hello through stderr");
            }
            "spin" => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "panic" => panic!("misbehave panicked on purpose"),
            _ => {}
        }
        Ok(Vec::new())
    }
}

export_source_connector!(Misbehave);
