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
//! - `connect`: opens a TCP connection to `address` (`host:port`, a name is looked up first);
//!   returns a record `connected to <peer>` and then nothing, or fails fatally with the error.
//! - `http`: sends `GET address` (a URL) through `wasi:http`; returns a record `HTTP <status>`,
//!   or fails fatally with the error.
//! - `resolve`: looks up the host of `address`; returns a record with the addresses, or fails
//!   fatally with the error.
//! - `poison`: returns records 0..`count` (JSON `{"seq": n}`), except that the indices in
//!   `bad.json` carry invalid JSON and those in `big` a text value of `size` bytes, sent to
//!   `big.topic` (default: `topic`).
//! - `sleep` with `sleep.in`: sleeps `sleep.ms` in `poll` (the default), `commit` (polls return a
//!   record each), `stop`, `validate` or `task-configs`.
//! - `offsets-loop`, `clock-loop`, `stderr-loop`: call the `offsets` import, read the clock, or
//!   write one byte to stderr (no newline), in a loop that never ends.
//! - `big-log`: logs `count` messages of `size` bytes per poll.
//! - `reconfigure`: asks for a reconfiguration in a loop that never ends.
//! - `partitions`: every record in a source partition of its own.
//! - `big-offset`: 20 records a poll whose source offsets are `size` bytes.
//! - `open-files`: opens the file `path` again and again, keeping every handle.
//! - `write-to`: records for the topic `write.topic` (which the connector may not be granted).
//! - `topic-per-record`: record n for topic `write.topic`-n.
//! - `resplit-once`: every task config carries `generation`, the number of the connector
//!   instance's `task-configs` call (other modes split the same way every time); a task of generation 1 asks for a reconfiguration from its
//!   first `poll`, once. Records are `{"generation": n}`.
//! - `split-fails`: `task-configs` fails retriably its first `fail.times` (default 2) calls on a
//!   connector instance, then splits as usual. The error quotes `secret`, if set.
//! - `monitor-once`: like `resplit-once`, task configs carry `generation`, but the connector's
//!   `monitor` reports the change, on its first call only (and asks for its next call in 200
//!   ms); tasks never ask.
//! - `monitor-fails`: the connector's `monitor` fails fatally, with an error that quotes
//!   `secret`, if set.
//! - `echo-secret`: the first poll of each task instance logs the value of `secret` (log import,
//!   stdout, stderr) and returns it as a record; the next fails fatally with an error that
//!   quotes it (config provider tests: the value must reach the plugin and no status or log
//!   line).
//! - `tasks` (any mode): how many task configs to return (at most `tasks.max`).
//!
//! Whatever the mode, the connector logs `misbehave: validate called`, `misbehave: create
//! called` and `misbehave: task-configs called` (through the log import) when the worker calls
//! it, so a test can count the worker's calls in its log.

use wasm_connect_sdk::{
    Config, ConfigDef, ConfigType, Connector, Data, Error, MonitorReport, Result, SourceConnector,
    SourceRecord, SourceTask, Spec, export_source_connector, json, log, read_offsets,
};

/// The running connector: what it counted so far (the worker keeps it between splits; each
/// task has an instance of its own).
pub struct Misbehave {
    /// `task-configs` calls.
    splits: u32,
    /// `monitor` calls.
    monitored: u32,
}

/// The spec's version: a marker a test can rewrite in the built file to make a second version
/// of this plugin (same length, so the component stays valid).
const VERSION: &str = "0.1.0-build.a";

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
    "resolve",
    "http",
    "poison",
    "offsets-loop",
    "clock-loop",
    "stderr-loop",
    "big-log",
    "reconfigure",
    "partitions",
    "big-offset",
    "open-files",
    "write-to",
    "topic-per-record",
    "resplit-once",
    "split-fails",
    "monitor-once",
    "monitor-fails",
    "echo-secret",
];

impl Connector for Misbehave {
    fn create(_config: &Config) -> Result<Self> {
        log::info("misbehave: create called");
        Ok(Self {
            splits: 0,
            monitored: 0,
        })
    }

    fn spec() -> Spec {
        Spec::new("misbehave", VERSION, "Misbehaves on purpose")
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
                ConfigDef::new(
                    "address",
                    ConfigType::String,
                    "host:port (modes connect, resolve).",
                )
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
            .config(
                ConfigDef::new("sleep.in", ConfigType::String, "Where mode sleep sleeps.")
                    .allowed(&["poll", "commit", "stop", "validate", "task-configs"])
                    .default("poll"),
            )
            .config(
                ConfigDef::new(
                    "write.topic",
                    ConfigType::String,
                    "Topic (modes write-to, topic-per-record).",
                )
                .default(""),
            )
            .config(ConfigDef::new("tasks", ConfigType::Int, "Task configs to return.").default(1))
            .config(
                ConfigDef::new(
                    "fail.times",
                    ConfigType::Int,
                    "Failing splits (mode split-fails).",
                )
                .default(2),
            )
    }

    fn validate(config: &Config) -> Vec<wasm_connect_sdk::ConfigError> {
        log::info("misbehave: validate called");
        sleep_if(config, "validate");
        Vec::new()
    }

    fn task_configs(&mut self, config: &Config, max_tasks: u32) -> Result<Vec<Config>> {
        log::info("misbehave: task-configs called");
        sleep_if(config, "task-configs");
        self.splits += 1;
        let split = self.splits;
        if config.string_or("mode", "") == "split-fails" {
            let fails: u32 = config.parse_or("fail.times", 2)?;
            if split <= fails {
                return Err(Error::retriable(format!(
                    "split {split} fails on purpose (fail.times {fails}){}",
                    quoted_secret(config)
                )));
            }
        }
        let tasks: u32 = config.parse_or("tasks", 1)?;
        // Only these modes vary their split: the others keep one, however often they are asked.
        let task = match config.string_or("mode", "").as_str() {
            "resplit-once" | "split-fails" | "monitor-once" => {
                config.clone().with("generation", split.to_string())
            }
            _ => config.clone(),
        };
        Ok((0..tasks.min(max_tasks)).map(|_| task.clone()).collect())
    }

    fn monitor(&mut self, config: &Config) -> Result<MonitorReport> {
        self.monitored += 1;
        match config.string_or("mode", "").as_str() {
            "monitor-once" if self.monitored == 1 => {
                log::info("monitor: the work changed");
                Ok(
                    MonitorReport::reconfigure()
                        .next_call_in(std::time::Duration::from_millis(200)),
                )
            }
            "monitor-fails" => Err(Error::fatal(format!(
                "monitor call {} fails on purpose{}",
                self.monitored,
                quoted_secret(config)
            ))),
            _ => Ok(MonitorReport::unchanged()),
        }
    }
}

/// " with <secret>" when the config sets `secret`: errors that quote a credential, as careless
/// connectors' do (the worker must redact them).
fn quoted_secret(config: &Config) -> String {
    match config.string_or("secret", "") {
        secret if secret.is_empty() => String::new(),
        secret => format!(" with {secret}"),
    }
}

/// Sleep `sleep.ms` if mode `sleep` sleeps in `call`.
fn sleep_if(config: &Config, call: &str) {
    if config.string_or("mode", "") == "sleep" && config.string_or("sleep.in", "poll") == call {
        let ms: u64 = config.parse_or("sleep.ms", 1000).unwrap_or(1000);
        eprintln!("sleeping in {call} for {ms} ms");
        std::thread::sleep(std::time::Duration::from_millis(ms));
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
    sleep_in: String,
    write_topic: String,
    /// The connector's split this task belongs to (mode resplit-once).
    generation: u32,
    /// Whether this task asked for a reconfiguration already.
    asked: bool,
    /// Handles kept open (mode open-files).
    files: Vec<std::fs::File>,
    /// The value of `secret` (mode echo-secret), and whether this instance showed it yet.
    secret: String,
    echoed: bool,
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
            sleep_in: config.string_or("sleep.in", "poll"),
            write_topic: config.string_or("write.topic", ""),
            generation: config.parse_or("generation", 0)?,
            asked: false,
            files: Vec::new(),
            secret: config.string_or("secret", ""),
            echoed: false,
        })
    }

    fn commit(&mut self, _positions: Vec<wasm_connect_sdk::SourcePosition>) -> Result<()> {
        if self.mode == "sleep" && self.sleep_in == "commit" {
            std::thread::sleep(std::time::Duration::from_millis(self.sleep_ms));
        }
        Ok(())
    }

    fn stop(&mut self) {
        if self.mode == "sleep" && self.sleep_in == "stop" {
            std::thread::sleep(std::time::Duration::from_millis(self.sleep_ms));
        }
    }

    fn poll(&mut self, max_records: u32) -> Result<Vec<SourceRecord>> {
        let record = |offset: u64, data: Data| {
            SourceRecord::new(&json!(PARTITION), &json!(offset), data).with_topic(&self.topic)
        };
        match self.mode.as_str() {
            "echo-secret" if !self.echoed => {
                log::info(&format!("the secret is {}", self.secret));
                println!("stdout: the secret is {}", self.secret);
                eprintln!("stderr: the secret is {}", self.secret);
                self.echoed = true;
                let offset = self.next;
                self.next += 1;
                return Ok(vec![record(offset, Data::Text(self.secret.clone()))]);
            }
            "echo-secret" => {
                return Err(Error::fatal(format!("cannot log in with {}", self.secret)));
            }
            "log" => {
                log::info("hello through the log import");
                println!("hello through stdout");
                eprintln!("hello through stderr");
            }
            "sleep" if self.sleep_in == "poll" => {
                eprintln!("sleeping in poll for {} ms", self.sleep_ms);
                std::thread::sleep(std::time::Duration::from_millis(self.sleep_ms))
            }
            "sleep" if self.sleep_in == "commit" => {
                let offset = self.next;
                self.next += 1;
                return Ok(vec![record(offset, Data::Text("tick".into()))]);
            }
            "offsets-loop" => loop {
                std::hint::black_box(read_offsets(&[json!(PARTITION)]));
            },
            "clock-loop" => loop {
                std::hint::black_box(std::time::Instant::now());
            },
            "stderr-loop" => {
                use std::io::Write;
                let mut err = std::io::stderr();
                loop {
                    let _ = err.write_all(b"x");
                }
            }
            "big-log" => {
                let message = "y".repeat(self.size);
                for _ in 0..self.count {
                    log::info(&message);
                }
            }
            "resplit-once" | "monitor-once" => {
                if self.mode == "resplit-once" && self.generation == 1 && !self.asked {
                    self.asked = true;
                    wasm_connect_sdk::request_reconfiguration();
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
                let n = self.next;
                self.next += 1;
                return Ok(vec![record(
                    n,
                    Data::Json(json!({"generation": self.generation}).to_string()),
                )]);
            }
            "reconfigure" => loop {
                wasm_connect_sdk::request_reconfiguration();
            },
            "partitions" => {
                let start = self.next;
                self.next += u64::from(max_records);
                return Ok((start..self.next)
                    .map(|i| {
                        SourceRecord::new(&json!({ "p": i }), &json!(i), Data::Text("p".into()))
                            .with_topic(&self.topic)
                    })
                    .collect());
            }
            "big-offset" => {
                let offset = json!("o".repeat(self.size));
                return Ok((0..20)
                    .map(|_| {
                        SourceRecord::new(&json!(PARTITION), &offset, Data::Text("b".into()))
                            .with_topic(&self.topic)
                    })
                    .collect());
            }
            "open-files" => loop {
                match std::fs::File::open(&self.path) {
                    Ok(file) => self.files.push(file),
                    Err(e) => {
                        return Err(Error::fatal(format!(
                            "opened {} files, then: {e}",
                            self.files.len()
                        )));
                    }
                }
            },
            "write-to" => {
                let offset = self.next;
                self.next += 1;
                return Ok(vec![
                    record(offset, Data::Text("injected".into())).with_topic(&self.write_topic),
                ]);
            }
            "topic-per-record" => {
                let offset = self.next;
                self.next += 1;
                let topic = format!("{}-{offset}", self.write_topic);
                return Ok(vec![
                    record(offset, Data::Text("t".into())).with_topic(&topic),
                ]);
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
                if self.next > 0 {
                    return Ok(Vec::new());
                }
                self.next = 1;
                return match std::net::TcpStream::connect(&self.address) {
                    Ok(stream) => {
                        let peer = stream
                            .peer_addr()
                            .map_or_else(|e| e.to_string(), |a| a.to_string());
                        Ok(vec![record(0, Data::Text(format!("connected to {peer}")))])
                    }
                    Err(e) => Err(Error::fatal(format!(
                        "cannot connect to {}: {e}",
                        self.address
                    ))),
                };
            }
            "http" => {
                if self.next > 0 {
                    return Ok(Vec::new());
                }
                self.next = 1;
                return match http_get(&self.address) {
                    Ok(status) => Ok(vec![record(0, Data::Text(format!("HTTP {status}")))]),
                    Err(e) => Err(Error::fatal(format!("cannot GET {}: {e}", self.address))),
                };
            }
            "resolve" => {
                if self.next > 0 {
                    return Ok(Vec::new());
                }
                self.next = 1;
                use std::net::ToSocketAddrs;
                return match self.address.to_socket_addrs() {
                    Ok(addrs) => {
                        let list: Vec<String> = addrs.map(|a| a.ip().to_string()).collect();
                        Ok(vec![record(
                            0,
                            Data::Text(format!("resolved to {}", list.join(","))),
                        )])
                    }
                    Err(e) => Err(Error::fatal(format!(
                        "cannot resolve {}: {e}",
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

/// `GET url` through `wasi:http`, waiting for the response's status.
fn http_get(url: &str) -> std::result::Result<u16, String> {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{Fields, OutgoingRequest, Scheme};
    let (scheme, rest) = url.split_once("://").ok_or("not a URL")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let request = OutgoingRequest::new(Fields::new());
    let scheme = if scheme == "https" {
        Scheme::Https
    } else {
        Scheme::Http
    };
    request
        .set_scheme(Some(&scheme))
        .map_err(|()| "bad scheme")?;
    request
        .set_authority(Some(authority))
        .map_err(|()| "bad authority")?;
    request
        .set_path_with_query(Some(path))
        .map_err(|()| "bad path")?;
    let response = outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
    response.subscribe().block();
    match response.get() {
        Some(Ok(Ok(response))) => Ok(response.status()),
        Some(Ok(Err(e))) => Err(format!("{e:?}")),
        _ => Err("no response".to_owned()),
    }
}
