//! What a store holds for one plugin instance, and the host side of the plugin's imports
//! (`log`, `offsets`, `context`).

use std::sync::Arc;

use tokio::sync::Notify;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::source::wasm_connect::plugin::{context, log, offsets, types};
use super::limits::Meter;

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
    /// The last committed offset (JSON text) of each source partition (JSON text), aligned by
    /// index; `None` where there is none. Partitions compare by JSON value.
    fn read(&self, source_partitions: &[String]) -> Vec<Option<String>>;
}

/// The reader for instances that have no offsets (connector instances, sinks, inspection).
pub struct NoOffsets;

impl OffsetReader for NoOffsets {
    fn read(&self, source_partitions: &[String]) -> Vec<Option<String>> {
        vec![None; source_partitions.len()]
    }
}

/// The data of one instance's store.
pub struct HostState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) meter: Meter,
    pub(crate) tags: Tags,
    pub(crate) offsets: Arc<dyn OffsetReader>,
    pub(crate) reconfigure: Arc<Notify>,
    /// Shared with stdout and stderr.
    pub(crate) log_budget: Arc<super::stdio::LogBudget>,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl log::Host for HostState {
    fn log(&mut self, level: log::Level, message: String) {
        if !self.log_budget.admit_line(&self.tags) {
            return;
        }
        let (connector, task) = (&self.tags.connector, self.tags.task_label());
        match level {
            log::Level::Trace => {
                tracing::trace!(target: "plugin", connector = %connector, task = %task, "{message}")
            }
            log::Level::Debug => {
                tracing::debug!(target: "plugin", connector = %connector, task = %task, "{message}")
            }
            log::Level::Info => {
                tracing::info!(target: "plugin", connector = %connector, task = %task, "{message}")
            }
            log::Level::Warn => {
                tracing::warn!(target: "plugin", connector = %connector, task = %task, "{message}")
            }
            log::Level::Error => {
                tracing::error!(target: "plugin", connector = %connector, task = %task, "{message}")
            }
        }
    }
}

impl offsets::Host for HostState {
    fn read(&mut self, source_partitions: Vec<String>) -> Vec<Option<String>> {
        self.offsets.read(&source_partitions)
    }
}

impl context::Host for HostState {
    fn request_reconfiguration(&mut self) {
        tracing::info!(connector = %self.tags.connector, task = %self.tags.task_label(), "plugin requested a task reconfiguration");
        self.reconfigure.notify_one();
    }
}

impl types::Host for HostState {}
