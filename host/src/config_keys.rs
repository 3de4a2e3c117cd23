//! Names of the connector configuration keys the worker itself interprets, in one place.

/// Comma-separated host directories a plugin may read (granted read-only).
pub const FS_READ: &str = "sandbox.fs.read";
/// Comma-separated host directories a plugin may read and write.
pub const FS_WRITE: &str = "sandbox.fs.write";
/// Per-connector override of the instance memory limit, in bytes.
pub const MEMORY_MAX_BYTES: &str = "sandbox.memory.max.bytes";
/// Per-connector override of the CPU deadline of one plugin call, in milliseconds.
pub const CALL_TIMEOUT_MS: &str = "sandbox.call.timeout.ms";
/// Per-connector override of how many output lines a plugin instance may log per second.
pub const LOG_LINES_PER_SECOND: &str = "sandbox.log.lines.per.second";
/// The connector's name.
pub const NAME: &str = "name";
/// The plugin that implements the connector (its spec name).
pub const CONNECTOR_CLASS: &str = "connector.class";
/// The most tasks the connector may run.
pub const TASKS_MAX: &str = "tasks.max";
