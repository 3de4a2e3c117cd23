//! Constants for the connector configuration keys the worker matches on. The list of every key
//! it interprets, with defaults and docs, is `config::keys::KEYS` (a test checks these are in it).

/// Comma-separated host directories a plugin may read (granted read-only).
pub const FS_READ: &str = "sandbox.fs.read";
/// Comma-separated host directories a plugin may read and write.
pub const FS_WRITE: &str = "sandbox.fs.write";
/// Comma-separated TCP peers (`host:port`, `*.domain:port`, `address:port`, `CIDR:port`) a
/// plugin may connect to; the names listed are the only ones it may look up.
pub const NET_CONNECT: &str = "sandbox.net.connect";
/// Comma-separated URL prefixes (`https://host[:port][/path/]`) a plugin may send HTTP requests
/// to through `wasi:http`.
pub const HTTP_ALLOW: &str = "sandbox.http.allow";
/// A PEM file of CA certificates a plugin's HTTPS requests trust besides the system's roots.
pub const HTTP_TLS_CA: &str = "sandbox.http.tls.ca.location";
/// Per-connector override of the instance memory limit, in bytes.
pub const MEMORY_MAX_BYTES: &str = "sandbox.memory.max.bytes";
/// Per-connector override of the CPU deadline of one plugin call, in milliseconds.
pub const CALL_TIMEOUT_MS: &str = "sandbox.call.timeout.ms";
/// Per-connector override of the wall-clock deadline of `poll`, `put`, `commit`, `open`,
/// `close` and `create`, in milliseconds.
pub const CALL_WALL_TIMEOUT_MS: &str = "sandbox.call.wall.timeout.ms";
/// Per-connector override of the wall-clock deadline of `flush` and `stop`, in milliseconds.
pub const FLUSH_WALL_TIMEOUT_MS: &str = "sandbox.flush.wall.timeout.ms";
/// Per-connector override of the wall-clock deadline of `spec`, `validate` and
/// `task-configs`, in milliseconds.
pub const CONFIG_WALL_TIMEOUT_MS: &str = "sandbox.config.wall.timeout.ms";
/// Per-connector override of how many bytes of output a plugin instance may log per second.
pub const LOG_BYTES_PER_SECOND: &str = "sandbox.log.bytes.per.second";
/// Per-connector override of the longest log message or output line, in bytes.
pub const LOG_MESSAGE_MAX_BYTES: &str = "sandbox.log.message.max.bytes";
/// Per-connector override of how many handles (files, streams, pollables) an instance may hold.
pub const HANDLES_MAX: &str = "sandbox.handles.max";
/// Per-connector override of how many bytes the worker copies out of a plugin in one call (a
/// call's result, or the arguments of one call the plugin makes to the worker).
pub const CALL_COPY_MAX_BYTES: &str = "sandbox.call.copy.max.bytes";
/// Per-connector override of how many output lines a plugin instance may log per second.
pub const LOG_LINES_PER_SECOND: &str = "sandbox.log.lines.per.second";
/// Comma-separated topics a source connector may write to besides `topic` and `topics`.
pub const TOPICS_WRITE: &str = "sandbox.topics.write";
/// A regular expression: a source connector may write to the topics it matches whole.
pub const TOPICS_WRITE_REGEX: &str = "sandbox.topics.write.regex";
/// The connector's name.
pub const NAME: &str = "name";
/// The plugin that implements the connector (its spec name).
pub const CONNECTOR_CLASS: &str = "connector.class";
/// The most tasks the connector may run.
pub const TASKS_MAX: &str = "tasks.max";
