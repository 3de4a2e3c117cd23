//! Test plugin: a source task that misbehaves in the way `mode` says, to show the sandbox and
//! the error handling contain it. Modes:
//! - `log`: logs and prints, then returns nothing. `sleep`: sleeps `sleep.ms` (waiting in a host
//!   call, which must not count against the CPU deadline), then returns nothing.
//! - `spin`: never returns. `alloc`: allocates until memory runs out. `recurse`: recurses until
//!   the stack overflows. `panic`: traps. `flood`: prints to stdout in a tight loop.
//! - `oversized`: returns a record of `size` bytes. `too-many`: returns one record more than
//!   asked for.
//! - `read`: reads the file `path` and returns its content as a record (so a test can check
//!   nothing leaked); fails fatally with the I/O error when the sandbox refuses.
//! - `connect`: opens a TCP connection to `address`; fails fatally with the error.
//! - `poison`: returns records 0..`count` (JSON `{"seq": n}`), except that the indices in
//!   `bad.json` carry invalid JSON and those in `big` a text value of `size` bytes, sent to
//!   `big.topic` (default: `topic`).

use wasm_connect_sdk::{
    Config, ConfigDef, ConfigType, Connector, Data, Error, Result, SourceConnector, SourceRecord,
    SourceTask, Spec, export_source_connector, json, log, read_offsets,
};

pub struct Misbehave;

const MODES: &[&str] = &[
    "log",
    "sleep",
    "spin",
    "alloc",
    "recurse",
    "panic",
    "flood",
    "oversized",
    "too-many",
    "read",
    "connect",
    "poison",
];

impl Connector for Misbehave {
    fn spec() -> Spec {
        Spec::new("misbehave", "0.1.0", "Misbehaves on purpose")
            .config(
                ConfigDef::new("mode", ConfigType::String, "How to misbehave in poll.")
                    .allowed(MODES)
                    .required(),
            )
            .config(
                ConfigDef::new("topic", ConfigType::String, "Topic of returned records.")
                    .default("misbehave"),
            )
            .config(
                ConfigDef::new(
                    "sleep.ms",
                    ConfigType::Long,
                    "How long to sleep (mode sleep).",
                )
                .default(1000),
            )
            .config(ConfigDef::new("size", ConfigType::Int, "Size of big records.").default(4096))
            .config(
                ConfigDef::new("path", ConfigType::String, "File to read (mode read).").default(""),
            )
            .config(
                ConfigDef::new("address", ConfigType::String, "host:port (mode connect).")
                    .default("127.0.0.1:19092"),
            )
            .config(
                ConfigDef::new("count", ConfigType::Long, "Records (mode poison).").default(100),
            )
            .config(
                ConfigDef::new("bad.json", ConfigType::List, "Indices with invalid JSON.")
                    .default(""),
            )
            .config(
                ConfigDef::new("big", ConfigType::List, "Indices with `size`-byte values.")
                    .default(""),
            )
    }
}

impl SourceConnector for Misbehave {
    type Task = Task;
}

pub struct Task {
    mode: String,
    topic: String,
    size: usize,
    path: String,
    address: String,
    count: u64,
    sleep_ms: u64,
    next: u64,
    bad_json: Vec<u64>,
    big: Vec<u64>,
    big_topic: String,
}

fn indices(config: &Config, key: &str) -> Vec<u64> {
    config
        .list(key)
        .iter()
        .filter_map(|i| i.trim().parse().ok())
        .collect()
}

const PARTITION: &str = "misbehave";

impl SourceTask for Task {
    fn create(config: Config) -> Result<Self> {
        let next = read_offsets(&[json!(PARTITION)])
            .into_iter()
            .next()
            .flatten()
            .and_then(|o| o.as_u64())
            .map_or(0, |last| last + 1);
        Ok(Task {
            mode: config.string("mode")?,
            topic: config.string_or("topic", "misbehave"),
            size: config.parse_or("size", 4096)?,
            path: config.string_or("path", ""),
            address: config.string_or("address", "127.0.0.1:19092"),
            count: config.parse_or("count", 100)?,
            sleep_ms: config.parse_or("sleep.ms", 1000)?,
            next,
            bad_json: indices(&config, "bad.json"),
            big: indices(&config, "big"),
            big_topic: config.string_or("big.topic", ""),
        })
    }

    fn poll(&mut self, max_records: u32) -> Result<Vec<SourceRecord>> {
        let record = |offset: u64, data: Data| {
            SourceRecord::new(&json!(PARTITION), &json!(offset), data).with_topic(&self.topic)
        };
        match self.mode.as_str() {
            "log" => {
                log::info("hello through the log import");
                println!("hello through stdout");
                eprintln!("hello through stderr");
            }
            "sleep" => std::thread::sleep(std::time::Duration::from_millis(self.sleep_ms)),
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
            "recurse" => {
                std::hint::black_box(recurse(std::hint::black_box(1)));
            }
            "panic" => panic!("misbehave panicked on purpose"),
            "flood" => {
                let mut i: u64 = 0;
                loop {
                    println!("flooding the log, line {i}");
                    i += 1;
                }
            }
            "oversized" => return Ok(vec![record(0, Data::Text("x".repeat(self.size)))]),
            "too-many" => {
                return Ok((0..=u64::from(max_records))
                    .map(|i| record(i, Data::Json(format!("{i}"))))
                    .collect());
            }
            "read" => {
                return match std::fs::read(&self.path) {
                    Ok(content) => Ok(vec![record(0, Data::Bytes(content))]),
                    Err(e) => Err(Error::fatal(format!("cannot read {}: {e}", self.path))),
                };
            }
            "connect" => {
                return match std::net::TcpStream::connect(&self.address) {
                    Ok(_) => Ok(vec![record(0, Data::Text("connected".into()))]),
                    Err(e) => Err(Error::fatal(format!(
                        "cannot connect to {}: {e}",
                        self.address
                    ))),
                };
            }
            "poison" => {
                let end = self.count.min(self.next + u64::from(max_records));
                let records = (self.next..end)
                    .map(|i| {
                        if self.bad_json.contains(&i) {
                            record(i, Data::Json(format!("{{\"seq\": {i}, broken")))
                        } else if self.big.contains(&i) {
                            let big = record(i, Data::Text("x".repeat(self.size)));
                            if self.big_topic.is_empty() {
                                big
                            } else {
                                big.with_topic(&self.big_topic)
                            }
                        } else {
                            record(i, Data::Json(format!("{{\"seq\":{i}}}")))
                        }
                    })
                    .collect();
                self.next = end;
                return Ok(records);
            }
            _ => {}
        }
        Ok(Vec::new())
    }
}

/// Recurses without end (not a tail call, so every level keeps a frame on the wasm stack).
fn recurse(depth: u64) -> u64 {
    if std::hint::black_box(depth) == u64::MAX {
        return 0;
    }
    recurse(std::hint::black_box(depth + 1)).wrapping_mul(3) ^ depth
}

export_source_connector!(Misbehave);
