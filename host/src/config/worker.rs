//! The worker configuration: which Kafka cluster, where plugins and state live, converter and
//! sandbox defaults, timings, and pass-through client settings. Read from `.properties` (as
//! Kafka Connect's `connect-standalone.properties`) or `.toml`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::connector::{Problem, describe};
use super::file::{self, Pairs};
use crate::sandbox::Limits;

/// Every key the worker config understands, with its default and meaning (for docs and errors).
pub const KEYS: &[(&str, &str, &str)] = &[
    (
        "bootstrap.servers",
        "(none)",
        "Kafka brokers, host:port[,host:port]. Without it the worker starts an embedded broker.",
    ),
    (
        "plugin.path",
        "dist/plugins",
        "Directory of connector plugins (.wasm); watched for changes.",
    ),
    (
        "data.dir",
        "wasm-connect-data",
        "Directory for offsets, connector state, the compile cache and the embedded broker.",
    ),
    (
        "offset.flush.interval.ms",
        "10000",
        "How often source offsets are flushed and sink offsets committed.",
    ),
    (
        "key.converter",
        "string",
        "Default key converter: string, json or bytes (Kafka Connect class names work too).",
    ),
    (
        "value.converter",
        "json",
        "Default value converter: string, json or bytes.",
    ),
    (
        "key.converter.schemas.enable",
        "true",
        "For the json converter: wrap keys in a {schema, payload} envelope.",
    ),
    (
        "value.converter.schemas.enable",
        "true",
        "For the json converter: wrap values in a {schema, payload} envelope.",
    ),
    (
        "sandbox.memory.max.bytes",
        "268435456",
        "Default linear memory limit of a plugin instance.",
    ),
    (
        "sandbox.memory.reservation.bytes",
        "(sandbox.memory.max.bytes)",
        "Address space reserved per instance for its linear memory; no connector's memory limit may exceed it. 4294967296 or more: no bounds checks in plugin code (fastest), at 4 GiB of address space per instance.",
    ),
    (
        "sandbox.call.timeout.ms",
        "10000",
        "Default CPU time limit of one call into a plugin.",
    ),
    (
        "sandbox.call.wall.timeout.ms",
        "30000",
        "Default wall-clock deadline of one poll, put, commit, open, close or create call; past it the call and its instance are abandoned and the task fails.",
    ),
    (
        "sandbox.flush.wall.timeout.ms",
        "60000",
        "Default wall-clock deadline of one flush or stop call.",
    ),
    (
        "sandbox.config.wall.timeout.ms",
        "30000",
        "Default wall-clock deadline of one spec, validate or task-configs call (also when a plugin file is loaded).",
    ),
    (
        "tasks.max.per.worker",
        "(from the machine)",
        "Most task instances this worker runs; beyond it connectors are refused. Default: the smaller of RAM / 1 MiB and (vm.max_map_count - 4096) / 4.",
    ),
    (
        "tasks.max.per.connector",
        "(1000)",
        "Most tasks one connector may ask for (tasks.max); default 1000, or tasks.max.per.worker if lower.",
    ),
    (
        "sandbox.memory.budget.bytes",
        "(4 x RAM)",
        "Sum of the memory limits (sandbox.memory.max.bytes) of every task instance; beyond it connectors are refused.",
    ),
    (
        "sandbox.files.budget",
        "(open-file limit - reserve)",
        "Sum of the handle limits (sandbox.handles.max) of every task instance with a directory grant; beyond it such connectors are refused. Default: the open-file limit less a quarter of it (at least 256) kept for the worker.",
    ),
    (
        "sandbox.log.lines.per.second",
        "100",
        "Default output lines (stdout, stderr, log) a plugin instance may write per second.",
    ),
    (
        "sandbox.log.bytes.per.second",
        "65536",
        "Default bytes of output (all lines together) a plugin instance may write per second, in bursts of ten seconds' worth.",
    ),
    (
        "sandbox.log.message.max.bytes",
        "8192",
        "Default longest log message or output line of a plugin; longer ones are cut, with a marker saying how much.",
    ),
    (
        "sandbox.handles.max",
        "256",
        "Default most handles (open files, directory streams, streams, pollables) one plugin instance may hold.",
    ),
    (
        "sandbox.call.copy.max.bytes",
        "134217728",
        "Default most bytes the worker copies out of a plugin in one crossing: a call's result, or the arguments of one call the plugin makes to the worker (and what offsets.read answers); each string and list is counted each time it is referenced.",
    ),
    (
        "source.poll.max.records",
        "2000",
        "Most records asked of a source task per poll.",
    ),
    (
        "source.max.in.flight.records",
        "20000",
        "Most records a source task may have sent but not acknowledged.",
    ),
    (
        "source.max.in.flight.bytes",
        "67108864",
        "Most bytes a source task may have sent but not acknowledged.",
    ),
    (
        "sink.batch.max.records",
        "2000",
        "Most records handed to a sink task per put.",
    ),
    (
        "sandbox.record.max.bytes",
        "1000000",
        "Largest record (key, value and headers) allowed across the plugin boundary.",
    ),
    (
        "sandbox.record.max.headers",
        "1000",
        "Most header entries one record from a source plugin may carry.",
    ),
    (
        "sandbox.batch.max.bytes",
        "67108864",
        "Most bytes one polled batch may expand to on the host (shared spans and headers counted each time a record uses them).",
    ),
    (
        "sandbox.source.offset.max.bytes",
        "16384",
        "Longest source partition or source offset (JSON text) of one record.",
    ),
    (
        "sandbox.source.partitions.max",
        "10000",
        "Most distinct source partitions one source task may track; a connector may have offsets stored for this many per task.",
    ),
    (
        "sandbox.topics.max",
        "1000",
        "Most distinct topics one source connector may write to (and so create) since its active topics were last reset.",
    ),
    (
        "connector.monitor.interval.ms",
        "5000",
        "How often a running connector's monitor is called (contract 0.3.0 on).",
    ),
    (
        "topic.creation.enable",
        "true",
        "Create missing topics of source connectors (KIP-158 settings in the connector).",
    ),
    (
        "topic.creation.default.partitions",
        "1",
        "Partitions of a created topic unless the connector says otherwise.",
    ),
    (
        "topic.creation.default.replication.factor",
        "-1",
        "Replication of a created topic unless the connector says otherwise (-1: broker default).",
    ),
    (
        "plugin.scan.interval.ms",
        "2000",
        "How often the plugin directory is checked for changes.",
    ),
    (
        "embedded.broker.listener",
        "127.0.0.1:9092",
        "Where the embedded broker listens (only without bootstrap.servers).",
    ),
    (
        "worker.id",
        "(hostname:pid)",
        "This worker's id in statuses.",
    ),
    (
        "task.shutdown.graceful.timeout.ms",
        "5000",
        "How long a stopping task's plugin may take to finish its call in progress and stop; past it the instance is abandoned (offsets of acknowledged records are still written).",
    ),
    (
        "task.restart.max.attempts",
        "5",
        "Restarts of a failed task within the window before it stays FAILED.",
    ),
    (
        "task.restart.window.ms",
        "600000",
        "The window in which restarts are counted.",
    ),
    (
        "task.restart.backoff.initial.ms",
        "1000",
        "Wait before the first restart; doubles per restart.",
    ),
    (
        "task.restart.backoff.max.ms",
        "60000",
        "Longest wait between restarts.",
    ),
    (
        "listeners",
        "http://127.0.0.1:8083",
        "Where the REST API listens.",
    ),
    (
        "rest.auth.token.file",
        "(none)",
        "File of bearer tokens the REST API accepts.",
    ),
    (
        "rest.auth.basic.file",
        "(none)",
        "File of user:password lines the REST API accepts.",
    ),
];

/// Worker key: address space reserved per instance for its linear memory.
pub const MEMORY_RESERVATION: &str = "sandbox.memory.reservation.bytes";

/// Prefixes of keys passed to the Kafka clients (as Kafka Connect's `producer.`, `consumer.`).
pub const CLIENT_PREFIXES: &[&str] = &["producer.", "consumer.", "admin."];

/// The parsed worker configuration.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The cluster, or `None` for the embedded broker.
    pub bootstrap_servers: Option<String>,
    pub plugin_path: PathBuf,
    pub data_dir: PathBuf,
    /// Converter defaults and other keys connectors inherit (`key.converter`, ...).
    pub converter_defaults: Pairs,
    pub limits: Limits,
    /// Address space reserved per instance for its linear memory (at least every limit).
    pub memory_reservation: u64,
    /// How many tasks, and how much memory their limits claim, the worker admits.
    pub capacity: crate::herder::CapacityLimits,
    /// Batch sizes, record size and in-flight limits of tasks (connectors may override them).
    pub task: crate::task::RunnerSettings,
    pub topic_creation_enable: bool,
    pub topic_default_partitions: i32,
    pub topic_default_replication: i32,
    pub plugin_scan_interval: Duration,
    pub embedded_listener: String,
    pub worker_id: String,
    /// Restart policy defaults for failed tasks.
    pub restart: crate::worker::RestartPolicy,
    /// The REST listener, `http://IP:PORT`.
    pub listeners: String,
    pub rest_token_file: Option<String>,
    pub rest_basic_file: Option<String>,
    /// `producer.*` settings, prefix removed.
    pub producer: Pairs,
    /// `consumer.*` settings, prefix removed.
    pub consumer: Pairs,
    /// `admin.*` settings, prefix removed.
    pub admin: Pairs,
}

impl WorkerConfig {
    /// Read a worker config file; relative paths in it are relative to the current directory,
    /// as with Kafka Connect.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let pairs = file::read(path)?;
        Self::from_pairs(&pairs).map_err(|p| describe(&path.display().to_string(), &p))
    }

    /// Parse worker config pairs; every bad key is reported.
    pub fn from_pairs(pairs: &Pairs) -> Result<Self, Vec<Problem>> {
        let mut problems = Vec::new();
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.trim())
        };
        for (key, _) in pairs {
            let known = KEYS.iter().any(|(k, _, _)| k == key)
                || CLIENT_PREFIXES.iter().any(|p| key.starts_with(p))
                || key.starts_with("key.converter.")
                || key.starts_with("value.converter.");
            if !known {
                tracing::warn!(key = %key, "unknown worker config key (ignored)");
            }
        }
        let limits = Limits::default()
            .with_overrides(pairs)
            .map_err(|m| problems.push(Problem::new("", m)))
            .unwrap_or_default();
        if get("consumer.group.instance.id").is_some() {
            problems.push(Problem::new(
                "consumer.group.instance.id",
                "is set by the worker for each sink task (wasm-connect-<connector>-<task>-<worker instance>), so that a task restarted after a crash rejoins its group at once; one value for every consumer would fence all but one of them. Remove it",
            ));
        }
        let mut number = |key: &str, default: u64, min: u64| -> u64 {
            match get(key) {
                None => default,
                Some(raw) => match raw.parse::<u64>() {
                    Ok(v) if v >= min => v,
                    _ => {
                        problems.push(Problem::new(
                            key,
                            format!("{raw:?} is not an integer >= {min}"),
                        ));
                        default
                    }
                },
            }
        };
        let flush_ms = number("offset.flush.interval.ms", 10_000, 1);
        let shutdown_ms = number(crate::task::settings::SHUTDOWN_GRACE_MS, 5_000, 1);
        let memory_reservation = number(MEMORY_RESERVATION, limits.memory_bytes as u64, 64 * 1024);
        let machine = crate::herder::CapacityLimits::for_this_machine(memory_reservation);
        let tasks_per_worker = number(
            crate::herder::capacity::TASKS_PER_WORKER,
            u64::from(machine.tasks_per_worker),
            1,
        )
        .min(u64::from(u32::MAX)) as u32;
        let tasks_per_connector = number(
            crate::herder::capacity::TASKS_PER_CONNECTOR,
            u64::from(machine.tasks_per_connector.min(tasks_per_worker)),
            1,
        )
        .min(u64::from(tasks_per_worker)) as u32;
        let memory_budget = number(
            crate::herder::capacity::MEMORY_BUDGET,
            machine.memory_budget,
            1,
        );
        let files_budget = number(
            crate::herder::capacity::FILES_BUDGET,
            machine.files_budget,
            0,
        );
        let scan_ms = number("plugin.scan.interval.ms", 2000, 10);
        let partitions = number("topic.creation.default.partitions", 1, 1);
        let replication = match get("topic.creation.default.replication.factor") {
            None => -1,
            Some(raw) => match raw.parse::<i32>() {
                Ok(v) if v == -1 || v >= 1 => v,
                _ => {
                    problems.push(Problem::new(
                        "topic.creation.default.replication.factor",
                        format!("{raw:?} must be -1 (broker default) or at least 1"),
                    ));
                    -1
                }
            },
        };
        let topic_creation_enable = match get("topic.creation.enable") {
            None => true,
            Some(raw) if raw.eq_ignore_ascii_case("true") => true,
            Some(raw) if raw.eq_ignore_ascii_case("false") => false,
            Some(raw) => {
                problems.push(Problem::new(
                    "topic.creation.enable",
                    format!("{raw:?} must be true or false"),
                ));
                true
            }
        };
        let restart = crate::worker::RestartPolicy::configured(Default::default(), pairs)
            .map_err(|m| problems.push(Problem::new("", m)))
            .unwrap_or_default();
        let task = crate::task::RunnerSettings {
            flush_interval: Duration::from_millis(flush_ms),
            shutdown_grace: Duration::from_millis(shutdown_ms),
            ..Default::default()
        }
        .with_overrides(pairs)
        .map_err(|m| problems.push(Problem::new("", m)))
        .unwrap_or_default();
        if memory_reservation < limits.memory_bytes as u64 {
            problems.push(Problem::new(
                MEMORY_RESERVATION,
                format!(
                    "{memory_reservation} is less than sandbox.memory.max.bytes ({}): no instance could have the default memory limit; raise it, or leave it out (it defaults to sandbox.memory.max.bytes)",
                    limits.memory_bytes
                ),
            ));
        }
        let bootstrap_servers = get("bootstrap.servers")
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let converter_defaults: Pairs = pairs
            .iter()
            .filter(|(k, _)| k.starts_with("key.converter") || k.starts_with("value.converter"))
            .cloned()
            .collect();
        for (key, value) in &converter_defaults {
            if let Err(m) = crate::convert::check_setting(key, value) {
                problems.push(Problem::new(key, m));
            }
        }
        let prefixed = |prefix: &str| -> Pairs {
            pairs
                .iter()
                .filter_map(|(k, v)| k.strip_prefix(prefix).map(|k| (k.to_owned(), v.clone())))
                .collect()
        };
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Self {
            bootstrap_servers,
            plugin_path: PathBuf::from(get("plugin.path").unwrap_or("dist/plugins")),
            data_dir: PathBuf::from(get("data.dir").unwrap_or("wasm-connect-data")),
            converter_defaults,
            limits,
            memory_reservation,
            capacity: crate::herder::CapacityLimits {
                tasks_per_worker,
                tasks_per_connector,
                memory_budget,
                files_budget,
            },
            task,
            topic_creation_enable,
            topic_default_partitions: partitions.min(i32::MAX as u64) as i32,
            topic_default_replication: replication,
            plugin_scan_interval: Duration::from_millis(scan_ms),
            embedded_listener: get("embedded.broker.listener")
                .unwrap_or("127.0.0.1:9092")
                .to_owned(),
            worker_id: get("worker.id")
                .map(str::to_owned)
                .unwrap_or_else(default_worker_id),
            restart,
            listeners: get("listeners")
                .unwrap_or("http://127.0.0.1:8083")
                .to_owned(),
            rest_token_file: get("rest.auth.token.file").map(str::to_owned),
            rest_basic_file: get("rest.auth.basic.file").map(str::to_owned),
            producer: prefixed("producer."),
            consumer: prefixed("consumer."),
            admin: prefixed("admin."),
        })
    }
}

fn default_worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Pairs {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn defaults_and_overrides() {
        let c = WorkerConfig::from_pairs(&pairs(&[])).unwrap();
        assert!(c.bootstrap_servers.is_none());
        assert_eq!(c.task.flush_interval, Duration::from_secs(10));
        let c = WorkerConfig::from_pairs(&pairs(&[
            ("bootstrap.servers", "127.0.0.1:19092"),
            ("offset.flush.interval.ms", "250"),
            ("producer.linger.ms", "20"),
            ("value.converter", "string"),
        ]))
        .unwrap();
        assert_eq!(c.bootstrap_servers.as_deref(), Some("127.0.0.1:19092"));
        assert_eq!(c.task.flush_interval, Duration::from_millis(250));
        assert_eq!(c.producer, pairs(&[("linger.ms", "20")]));
        assert_eq!(
            c.converter_defaults,
            pairs(&[("value.converter", "string")])
        );
    }

    #[test]
    fn bad_values_are_named() {
        let problems = WorkerConfig::from_pairs(&pairs(&[
            ("offset.flush.interval.ms", "soon"),
            ("value.converter", "avro"),
        ]))
        .unwrap_err();
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert!(
            text[0].starts_with("offset.flush.interval.ms: \"soon\""),
            "{text:?}"
        );
        assert!(
            text[1].starts_with("value.converter: ") && text[1].contains("avro"),
            "{text:?}"
        );
    }
}
