//! Calls into the worker: logging, stored offsets, reconfiguration requests.

use crate::bindings::source::wasm_connect::plugin as imports;

/// Log into the worker's logs; the worker tags each line with the connector and task.
pub mod log {
    use super::imports::log::{Level, log};

    /// Log at `trace` level.
    pub fn trace(message: &str) {
        log(Level::Trace, message);
    }
    /// Log at `debug` level.
    pub fn debug(message: &str) {
        log(Level::Debug, message);
    }
    /// Log at `info` level.
    pub fn info(message: &str) {
        log(Level::Info, message);
    }
    /// Log at `warn` level.
    pub fn warn(message: &str) {
        log(Level::Warn, message);
    }
    /// Log at `error` level.
    pub fn error(message: &str) {
        log(Level::Error, message);
    }
}

/// The last offsets the worker durably recorded for these source partitions, aligned by index;
/// `None` where it has none (start from the beginning). Offsets that are not valid JSON (which
/// the worker never stores) come back as `None`.
pub fn read_offsets(source_partitions: &[serde_json::Value]) -> Vec<Option<serde_json::Value>> {
    let keys: Vec<String> = source_partitions.iter().map(|p| p.to_string()).collect();
    imports::offsets::read(&keys)
        .into_iter()
        .map(|o| o.and_then(|text| serde_json::from_str(&text).ok()))
        .collect()
}

/// Ask the worker to call `task_configs` again because the split of work changed.
pub fn request_reconfiguration() {
    imports::context::request_reconfiguration();
}
