//! The limits and batch sizes a task runs with: worker-wide defaults (worker config) that a
//! connector config may override key by key. Together with the sandbox's memory and CPU limits
//! they bound what one task can cost the worker (see SECURITY.md for the table).

use std::time::Duration;

/// Most records asked of a source task per `poll`.
pub const POLL_MAX_RECORDS: &str = "source.poll.max.records";
/// Most records a source task may have sent but not yet had acknowledged.
pub const MAX_IN_FLIGHT_RECORDS: &str = "source.max.in.flight.records";
/// Most bytes (keys, values, headers) a source task may have sent but not yet had acknowledged.
pub const MAX_IN_FLIGHT_BYTES: &str = "source.max.in.flight.bytes";
/// Most records handed to a sink task per `put`.
pub const SINK_BATCH_MAX_RECORDS: &str = "sink.batch.max.records";
/// Largest record (key + value + headers) allowed across the plugin boundary either way.
pub const RECORD_MAX_BYTES: &str = "sandbox.record.max.bytes";

/// Most distinct source partitions a source task may track, and a connector may have offsets
/// stored for.
pub const SOURCE_PARTITIONS_MAX: &str = "sandbox.source.partitions.max";
/// Longest source partition or source offset (JSON text) a source task may return.
pub const SOURCE_OFFSET_MAX_BYTES: &str = "sandbox.source.offset.max.bytes";
/// Most header entries one record may carry.
pub const RECORD_MAX_HEADERS: &str = "sandbox.record.max.headers";
/// Most bytes one polled batch may expand to on the host.
pub const BATCH_MAX_BYTES: &str = "sandbox.batch.max.bytes";
/// Most distinct topics a source connector may write to (and so create) since its active
/// topics were last reset.
pub const TOPICS_MAX: &str = "sandbox.topics.max";

/// How long a stopping task's plugin may take to finish its call in progress and `stop` before
/// its instance is abandoned (Kafka Connect's key; worker config only).
pub const SHUTDOWN_GRACE_MS: &str = "task.shutdown.graceful.timeout.ms";

/// How often the host calls a running connector's `monitor` (contract 0.3.0 on), unless its
/// last report asked for another delay. Read by the connector's actor, not by its tasks.
pub const MONITOR_INTERVAL_MS: &str = "connector.monitor.interval.ms";

/// The keys a connector may override, for config checks and docs.
pub const OVERRIDABLE: &[&str] = &[
    POLL_MAX_RECORDS,
    MAX_IN_FLIGHT_RECORDS,
    MAX_IN_FLIGHT_BYTES,
    SINK_BATCH_MAX_RECORDS,
    RECORD_MAX_BYTES,
    SOURCE_PARTITIONS_MAX,
    SOURCE_OFFSET_MAX_BYTES,
    RECORD_MAX_HEADERS,
    BATCH_MAX_BYTES,
    TOPICS_MAX,
    MONITOR_INTERVAL_MS,
];

/// Settings every runner needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunnerSettings {
    /// How often offsets are flushed (worker-wide, `offset.flush.interval.ms`).
    pub flush_interval: Duration,
    pub source_poll_max_records: u32,
    pub source_max_in_flight: usize,
    pub source_max_in_flight_bytes: usize,
    pub sink_batch_max_records: usize,
    pub record_max_bytes: usize,
    /// `sandbox.source.partitions.max`.
    pub source_partitions_max: usize,
    /// Most source partitions the connector may have offsets stored for: the per-task limit
    /// times its tasks (set when a task is spawned).
    pub stored_partitions_max: usize,
    /// `sandbox.source.offset.max.bytes`.
    pub source_offset_max_bytes: usize,
    /// `sandbox.record.max.headers`.
    pub record_max_headers: usize,
    /// `sandbox.batch.max.bytes`.
    pub batch_max_bytes: usize,
    /// `sandbox.topics.max`.
    pub topics_max: usize,
    /// How long a stopping task's plugin may take (`task.shutdown.graceful.timeout.ms`).
    pub shutdown_grace: Duration,
    /// `connector.monitor.interval.ms` (the connector's actor reads it).
    pub monitor_interval: Duration,
}

impl Default for RunnerSettings {
    /// The key table's defaults (`config::keys`).
    fn default() -> Self {
        use crate::config::keys;
        let zero = Self {
            flush_interval: Duration::from_millis(keys::number("offset.flush.interval.ms")),
            source_poll_max_records: 0,
            source_max_in_flight: 0,
            source_max_in_flight_bytes: 0,
            sink_batch_max_records: 0,
            record_max_bytes: 0,
            source_partitions_max: 0,
            stored_partitions_max: 0,
            source_offset_max_bytes: 0,
            record_max_headers: 0,
            batch_max_bytes: 0,
            topics_max: 0,
            shutdown_grace: Duration::from_millis(keys::number(SHUTDOWN_GRACE_MS)),
            monitor_interval: Duration::ZERO,
        };
        let settings = zero
            .with_overrides(&keys::defaults())
            .unwrap_or_else(|e| panic!("the key table's task defaults: {e}"));
        Self {
            stored_partitions_max: settings.source_partitions_max,
            ..settings
        }
    }
}

impl RunnerSettings {
    /// These settings with the overrides in `config`; an error names the key and the value.
    pub fn with_overrides(self, config: &[(String, String)]) -> Result<Self, String> {
        let mut settings = self;
        for (key, value) in config {
            if !OVERRIDABLE.contains(&key.as_str()) {
                continue;
            }
            let n = crate::config::keys::read_number(key, value)?;
            let size = usize::try_from(n).unwrap_or(usize::MAX);
            match key.as_str() {
                POLL_MAX_RECORDS => {
                    settings.source_poll_max_records = n.min(u32::MAX.into()) as u32
                }
                MAX_IN_FLIGHT_RECORDS => settings.source_max_in_flight = size,
                MAX_IN_FLIGHT_BYTES => settings.source_max_in_flight_bytes = size,
                SINK_BATCH_MAX_RECORDS => settings.sink_batch_max_records = size,
                RECORD_MAX_BYTES => settings.record_max_bytes = size,
                SOURCE_PARTITIONS_MAX => settings.source_partitions_max = size,
                SOURCE_OFFSET_MAX_BYTES => settings.source_offset_max_bytes = size,
                RECORD_MAX_HEADERS => settings.record_max_headers = size,
                BATCH_MAX_BYTES => settings.batch_max_bytes = size,
                TOPICS_MAX => settings.topics_max = size,
                MONITOR_INTERVAL_MS => settings.monitor_interval = Duration::from_millis(n),
                _ => {}
            }
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_and_defaults_are_the_key_table_s() {
        use crate::config::keys::{key, number};
        for name in OVERRIDABLE.iter().chain([&SHUTDOWN_GRACE_MS]) {
            assert!(key(name).is_some(), "{name} is not in the key table");
        }
        let task = RunnerSettings::default();
        assert_eq!(
            task.sink_batch_max_records as u64,
            number("sink.batch.max.records")
        );
        assert_eq!(
            task.monitor_interval.as_millis() as u64,
            number("connector.monitor.interval.ms")
        );
        assert_eq!(task.stored_partitions_max, task.source_partitions_max);
    }

    #[test]
    fn overrides_apply_and_bad_values_name_the_key() {
        let config = vec![
            (RECORD_MAX_BYTES.to_owned(), "1024".to_owned()),
            (POLL_MAX_RECORDS.to_owned(), "7".to_owned()),
            ("unrelated".to_owned(), "x".to_owned()),
        ];
        let s = RunnerSettings::default().with_overrides(&config).unwrap();
        assert_eq!((s.record_max_bytes, s.source_poll_max_records), (1024, 7));
        assert_eq!(s.sink_batch_max_records, 2000);
        let err = RunnerSettings::default()
            .with_overrides(&[(MAX_IN_FLIGHT_BYTES.to_owned(), "0".to_owned())])
            .unwrap_err();
        assert!(
            err.starts_with(MAX_IN_FLIGHT_BYTES) && err.contains("\"0\""),
            "{err}"
        );
    }
}
