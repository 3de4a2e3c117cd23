//! The worker configuration: which Kafka cluster, where plugins and state live, converter and
//! sandbox defaults, timings, and pass-through client settings. Read from `.properties` (as
//! Kafka Connect's `connect-standalone.properties`) or `.toml`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::capacity::{
    CapacityLimits, FILES_BUDGET, MEMORY_BUDGET, TASKS_PER_CONNECTOR, TASKS_PER_WORKER,
};
use super::connector::{Problem, describe};
use super::file::{self, Pairs};
use super::keys::{HTTPS_LISTENER_PREFIX, Scope};
use super::providers::{Providers, Resolved};
use super::restart::RestartPolicy;
use crate::kafka::clients::{self, ClientSettings};
use crate::sandbox::Limits;

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
    pub capacity: CapacityLimits,
    /// Batch sizes, record size and in-flight limits of tasks (connectors may override them).
    pub task: crate::task::RunnerSettings,
    pub topic_creation_enable: bool,
    pub topic_default_partitions: i32,
    pub topic_default_replication: i32,
    pub plugin_scan_interval: Duration,
    pub embedded_listener: String,
    pub worker_id: String,
    /// Restart policy defaults for failed tasks.
    pub restart: RestartPolicy,
    /// The Kafka clients' settings: the security keys every client takes, `producer.*`,
    /// `consumer.*` and `admin.*` over them, in librdkafka's terms; and what connectors may
    /// override.
    pub clients: ClientSettings,
    /// The config providers connector configs' placeholders are resolved with.
    pub providers: Providers,
}

impl WorkerConfig {
    /// Read a worker config file; relative paths in it are relative to the current directory,
    /// as with Kafka Connect.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        Self::from_file_with(path, |_| Ok(())).map(|(config, ())| config)
    }

    /// Read a worker config file, and with it the settings of a subsystem above `config/` (the
    /// REST API's listeners, say) that `section` reads from the same keys, provider placeholders
    /// resolved. Its problems are reported with the worker config's, in one message.
    pub fn from_file_with<T>(
        path: &Path,
        section: impl FnOnce(&[(String, String)]) -> Result<T, Vec<Problem>>,
    ) -> Result<(Self, T), String> {
        let pairs = file::read(path)?;
        Self::from_pairs_with(&pairs, section)
            .map_err(|p| describe(&path.display().to_string(), &p))
    }

    /// Parse worker config pairs; every bad key is reported.
    pub fn from_pairs(raw: &Pairs) -> Result<Self, Vec<Problem>> {
        Self::from_pairs_with(raw, |_| Ok(())).map(|(config, ())| config)
    }

    /// Parse worker config pairs and, from the same resolved keys, `section`'s settings (see
    /// [`Self::from_file_with`]); every bad key is reported. `config/` knows no subsystem above
    /// it: those read their own keys here, so that one start-up error names every problem.
    pub fn from_pairs_with<T>(
        raw: &Pairs,
        section: impl FnOnce(&[(String, String)]) -> Result<T, Vec<Problem>>,
    ) -> Result<(Self, T), Vec<Problem>> {
        let mut problems = Vec::new();
        // The worker file may use its own providers (`sasl.jaas.config=${file:...}`); they are
        // resolved once, here.
        let providers = Providers::from_worker(raw).unwrap_or_else(|p| {
            problems.extend(p);
            Providers::default()
        });
        let resolved = providers.resolve(raw).unwrap_or_else(|p| {
            problems.extend(p);
            Resolved::plain(raw)
        });
        let pairs = &resolved.pairs;
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.trim())
        };
        for (key, _) in pairs {
            let known = super::keys::key(key).is_some_and(|k| k.scope != Scope::Connector)
                || CLIENT_PREFIXES.iter().any(|p| key.starts_with(p))
                || clients::is_common_key(key)
                || key.starts_with("config.providers.")
                || key.starts_with(HTTPS_LISTENER_PREFIX)
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
        let clients = ClientSettings::from_worker(pairs).unwrap_or_else(|p| {
            problems.extend(p);
            ClientSettings::default()
        });
        let section = section(pairs).map_err(|p| problems.extend(p));
        // Keys without a fixed default in the key table pass theirs; the table's kind says what
        // each takes.
        let mut number_or = |key: &str, default: u64| -> u64 {
            let Some(raw) = get(key) else {
                return default;
            };
            super::keys::kind(key).number(raw).unwrap_or_else(|e| {
                problems.push(Problem::new(key, e));
                default
            })
        };
        let fixed = super::keys::number;
        let flush_ms = number_or(
            "offset.flush.interval.ms",
            fixed("offset.flush.interval.ms"),
        );
        let grace = crate::task::settings::SHUTDOWN_GRACE_MS;
        let shutdown_ms = number_or(grace, fixed(grace));
        let memory_reservation = number_or(MEMORY_RESERVATION, limits.memory_bytes as u64);
        let machine = CapacityLimits::for_this_machine(memory_reservation);
        let tasks_per_worker = number_or(TASKS_PER_WORKER, u64::from(machine.tasks_per_worker))
            .min(u64::from(u32::MAX)) as u32;
        let tasks_per_connector = number_or(
            TASKS_PER_CONNECTOR,
            u64::from(machine.tasks_per_connector.min(tasks_per_worker)),
        )
        .min(u64::from(tasks_per_worker)) as u32;
        let memory_budget = number_or(MEMORY_BUDGET, machine.memory_budget);
        let files_budget = number_or(FILES_BUDGET, machine.files_budget);
        let scan_ms = number_or("plugin.scan.interval.ms", fixed("plugin.scan.interval.ms"));
        let partitions = number_or(
            "topic.creation.default.partitions",
            fixed("topic.creation.default.partitions"),
        );
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
        let topic_creation_enable = get("topic.creation.enable").is_none_or(|raw| {
            super::keys::Kind::boolean(raw).unwrap_or_else(|e| {
                problems.push(Problem::new("topic.creation.enable", e));
                true
            })
        });
        let restart = RestartPolicy::configured(Default::default(), pairs)
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
        if bootstrap_servers.is_none() && clients.secured() {
            problems.push(Problem::new(
                "security.protocol",
                "is set, but bootstrap.servers is not: the embedded broker speaks PLAINTEXT only. Name your cluster in bootstrap.servers, or remove the security settings",
            ));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        // Problems were reported above.
        let Ok(section) = section else {
            return Err(problems);
        };
        let config = Self {
            bootstrap_servers,
            plugin_path: PathBuf::from(get("plugin.path").unwrap_or("dist/plugins")),
            data_dir: PathBuf::from(get("data.dir").unwrap_or("wasm-connect-data")),
            converter_defaults,
            limits,
            memory_reservation,
            capacity: CapacityLimits {
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
            clients,
            providers,
        };
        Ok((config, section))
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
        assert_eq!(
            c.clients.librdkafka(clients::ClientKind::Producer),
            pairs(&[("linger.ms", "20")])
        );
        assert_eq!(
            c.converter_defaults,
            pairs(&[("value.converter", "string")])
        );
    }

    #[test]
    fn a_section_above_config_reads_the_same_keys_and_reports_with_them() {
        let (_, listeners) =
            WorkerConfig::from_pairs_with(&pairs(&[("listeners", "http://127.0.0.1:0")]), |p| {
                Ok(file::last(p, "listeners").map(str::to_owned))
            })
            .unwrap();
        assert_eq!(listeners.as_deref(), Some("http://127.0.0.1:0"));
        let problems =
            WorkerConfig::from_pairs_with(&pairs(&[("offset.flush.interval.ms", "soon")]), |_| {
                Err::<(), _>(vec![Problem::new("listeners", "names no listener")])
            })
            .unwrap_err();
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 2, "{text:?}");
        assert!(
            text[0].starts_with("listeners: names no listener"),
            "{text:?}"
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
