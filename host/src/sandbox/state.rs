//! What a store holds for one plugin instance, and the host side of the plugin's imports
//! (`log`, `offsets`, `context`).

use std::sync::Arc;

use tokio::sync::Notify;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::limits::Meter;
use super::wit::latest::{batch, context, log, offsets, types};

/// Identifies an instance in logs and errors.
#[derive(Debug, Clone)]
pub struct Tags {
    /// The connector name (or the plugin file, while loading it).
    pub connector: String,
    /// The task id; `None` for the connector instance.
    pub task: Option<u32>,
}

impl Tags {
    /// `connector` for the connector instance, `task-N` for a task.
    pub fn task_label(&self) -> String {
        match self.task {
            Some(id) => format!("task-{id}"),
            None => "connector".to_owned(),
        }
    }
}

/// Read access to the connector's committed source offsets, given to the `offsets` import.
pub trait OffsetReader: Send + Sync {
    /// The last committed offset (JSON text) of one source partition (JSON text); `None` where
    /// there is none. Partitions compare by JSON value.
    fn offset(&self, source_partition: &str) -> Option<String>;
}

/// The reader for instances that have no offsets (connector instances, sinks, inspection).
pub struct NoOffsets;

impl OffsetReader for NoOffsets {
    fn offset(&self, _source_partition: &str) -> Option<String> {
        None
    }
}

/// `offsets.read`: the offset of each of `source_partitions`, aligned by index, unless the
/// answer would take more than `max_bytes` on the worker (each answer's bookkeeping and text):
/// partitions may repeat, so a small request could otherwise ask for every stored offset many
/// times over. The error is the trap's message.
pub(crate) fn read_offsets(
    reader: &dyn OffsetReader,
    source_partitions: &[String],
    max_bytes: usize,
) -> Result<Vec<Option<String>>, String> {
    const ENTRY: usize = std::mem::size_of::<Option<String>>();
    let mut used = source_partitions.len().saturating_mul(ENTRY);
    let over = |used: usize| {
        format!(
            "offsets.read: the answer for {} source partitions would take more than {max_bytes} bytes (sandbox.call.copy.max.bytes; {used} bytes so far); ask for fewer partitions at a time",
            source_partitions.len()
        )
    };
    if used > max_bytes {
        return Err(over(used));
    }
    let mut answers = Vec::with_capacity(source_partitions.len());
    for partition in source_partitions {
        let offset = reader.offset(partition);
        used = used.saturating_add(offset.as_ref().map_or(0, String::len));
        if used > max_bytes {
            return Err(over(used));
        }
        answers.push(offset);
    }
    Ok(answers)
}

/// The data of one instance's store.
pub struct HostState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    /// The instance's network grant and what it resolved and was refused (shared with the
    /// socket check inside `wasi`).
    pub(crate) net: Arc<super::capabilities::NetAccess>,
    /// `wasi:http`'s context, and the hooks that check and send each request.
    pub(crate) http: wasmtime_wasi_http::WasiHttpCtx,
    pub(crate) http_gate: super::http::HttpGate,
    pub(crate) meter: Meter,
    pub(crate) tags: Tags,
    pub(crate) offsets: Arc<dyn OffsetReader>,
    pub(crate) reconfigure: Arc<Notify>,
    /// Shared with stdout and stderr.
    pub(crate) log_budget: Arc<super::stdio::LogBudget>,
    /// Reconfiguration requests since the last line that reported them.
    pub(crate) reconfigure_requests: u64,
    /// When reconfiguration requests were last logged.
    pub(crate) reconfigure_logged: Option<std::time::Instant>,
}

/// Reconfiguration requests of one instance are logged at most this often.
pub const RECONFIGURE_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wasmtime_wasi_http::WasiHttpView for HostState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            hooks: &mut self.http_gate,
            table: &mut self.table,
            ctx: &mut self.http,
        }
    }
}

impl HostState {
    /// The `log` import of every contract version: one event tagged with connector and task,
    /// cut to `sandbox.log.message.max.bytes`.
    fn log_event(&self, level: tracing::Level, message: &str) {
        let message = self.log_budget.redact(message);
        let message = self.log_budget.cut(&message, message.len());
        if !self.log_budget.admit_line(&self.tags, message.len()) {
            return;
        }
        let (connector, task) = (&self.tags.connector, self.tags.task_label());
        match level {
            tracing::Level::TRACE => {
                tracing::trace!(target: "plugin", connector = %connector, task = %task, "{message}")
            }
            tracing::Level::DEBUG => {
                tracing::debug!(target: "plugin", connector = %connector, task = %task, "{message}")
            }
            tracing::Level::INFO => {
                tracing::info!(target: "plugin", connector = %connector, task = %task, "{message}")
            }
            tracing::Level::WARN => {
                tracing::warn!(target: "plugin", connector = %connector, task = %task, "{message}")
            }
            tracing::Level::ERROR => {
                tracing::error!(target: "plugin", connector = %connector, task = %task, "{message}")
            }
        }
    }

    /// The `context.request-reconfiguration` import of every contract version. Requests
    /// coalesce (the herder acts once on any number), and the log says so at most once per
    /// [`RECONFIGURE_LOG_INTERVAL`], with the count, so a plugin asking in a loop costs a line
    /// every few seconds.
    fn notify_reconfiguration(&mut self) {
        self.reconfigure.notify_one();
        self.reconfigure_requests += 1;
        let now = std::time::Instant::now();
        if self
            .reconfigure_logged
            .is_some_and(|at| now.duration_since(at) < RECONFIGURE_LOG_INTERVAL)
        {
            return;
        }
        let count = std::mem::take(&mut self.reconfigure_requests);
        self.reconfigure_logged = Some(now);
        tracing::info!(connector = %self.tags.connector, task = %self.tags.task_label(), requests = count, "plugin requested a task reconfiguration");
    }
}

impl log::Host for HostState {
    fn log(&mut self, level: log::Level, message: String) {
        let level = match level {
            log::Level::Trace => tracing::Level::TRACE,
            log::Level::Debug => tracing::Level::DEBUG,
            log::Level::Info => tracing::Level::INFO,
            log::Level::Warn => tracing::Level::WARN,
            log::Level::Error => tracing::Level::ERROR,
        };
        self.log_event(level, &message);
    }
}

impl HostState {
    /// `offsets.read` of every contract version; a trap when the answer is over budget.
    fn read_offsets(&self, source_partitions: &[String]) -> wasmtime::Result<Vec<Option<String>>> {
        read_offsets(
            self.offsets.as_ref(),
            source_partitions,
            self.meter.limits().copy_bytes,
        )
        .map_err(|message| wasmtime::format_err!("{message}"))
    }
}

impl offsets::Host for HostState {
    fn read(&mut self, source_partitions: Vec<String>) -> wasmtime::Result<Vec<Option<String>>> {
        self.read_offsets(&source_partitions)
    }
}

impl context::Host for HostState {
    fn request_reconfiguration(&mut self) {
        self.notify_reconfiguration();
    }
}

impl types::Host for HostState {}
impl batch::Host for HostState {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every partition has the same 1000-byte offset.
    struct Big;

    impl OffsetReader for Big {
        fn offset(&self, _source_partition: &str) -> Option<String> {
            Some("x".repeat(1000))
        }
    }

    #[test]
    fn an_offsets_answer_is_bounded_however_often_a_partition_repeats() {
        let entry = std::mem::size_of::<Option<String>>();
        let asked = vec!["{}".to_owned(); 10];
        let answers = read_offsets(&Big, &asked, 10 * (entry + 1000)).unwrap();
        assert_eq!(answers.len(), 10);
        assert!(
            answers
                .iter()
                .all(|a| a.as_deref().map(str::len) == Some(1000))
        );

        let err = read_offsets(&Big, &asked, 10 * (entry + 1000) - 1).unwrap_err();
        assert!(
            err.contains("sandbox.call.copy.max.bytes") && err.contains("10 source partitions"),
            "{err}"
        );
        // The entries alone are counted before any lookup.
        let many = vec![String::new(); 1000];
        let err = read_offsets(&NoOffsets, &many, 1000).unwrap_err();
        assert!(
            err.contains(&format!("{} bytes so far", 1000 * entry)),
            "{err}"
        );
        assert_eq!(
            read_offsets(&NoOffsets, &many, 1000 * entry).unwrap(),
            vec![None; 1000]
        );
    }
}
