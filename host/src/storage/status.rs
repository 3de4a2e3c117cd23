//! The status store: the state each connector and task last reported, with the worker that
//! runs it (Kafka Connect's `StatusBackingStore`). Written by whoever runs the connector or
//! task (its actor, its task's supervisor), read by the REST API.

use std::collections::BTreeMap;
use std::sync::RwLock;

use super::config::ConnectorTaskId;

/// A connector's state, with Kafka Connect's names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectorState {
    Unassigned,
    Running,
    Paused,
    Stopped,
    /// Failed for a reason a retry may fix; retried after a backoff (the trace says why).
    Restarting(String),
    /// Failed; the trace says why.
    Failed(String),
}

impl ConnectorState {
    /// The Kafka Connect state name.
    pub fn name(&self) -> &'static str {
        match self {
            ConnectorState::Unassigned => "UNASSIGNED",
            ConnectorState::Running => "RUNNING",
            ConnectorState::Paused => "PAUSED",
            ConnectorState::Stopped => "STOPPED",
            ConnectorState::Restarting(_) => "RESTARTING",
            ConnectorState::Failed(_) => "FAILED",
        }
    }

    /// Why it failed, if it did.
    pub fn trace(&self) -> Option<&str> {
        match self {
            ConnectorState::Restarting(t) | ConnectorState::Failed(t) => Some(t),
            _ => None,
        }
    }
}

/// A connector's or task's reported state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredStatus {
    /// The Kafka Connect state name (`RUNNING`, `FAILED`, ...).
    pub state: &'static str,
    /// Why it failed, if it did.
    pub trace: Option<String>,
    /// The worker that runs it.
    pub worker_id: String,
}

/// Where statuses are kept.
pub trait StatusStore: Send + Sync + 'static {
    /// Record connector `name`'s state.
    fn put_connector(&self, name: &str, status: StoredStatus);
    /// Record task `id`'s state.
    fn put_task(&self, id: &ConnectorTaskId, status: StoredStatus);
    /// Connector `name`'s last state.
    fn connector(&self, name: &str) -> Option<StoredStatus>;
    /// Task `id`'s last state.
    fn task(&self, id: &ConnectorTaskId) -> Option<StoredStatus>;
    /// Forget task `id` (the connector's split has no such task any more).
    fn remove_task(&self, id: &ConnectorTaskId);
    /// Forget connector `name` and its tasks (deleted).
    fn remove_connector(&self, name: &str);
}

/// Statuses in memory: a standalone worker's, which starts from nothing on every start.
#[derive(Default)]
pub struct MemoryStatusStore {
    connectors: RwLock<BTreeMap<String, StoredStatus>>,
    tasks: RwLock<BTreeMap<ConnectorTaskId, StoredStatus>>,
}

impl StatusStore for MemoryStatusStore {
    fn put_connector(&self, name: &str, status: StoredStatus) {
        write(&self.connectors).insert(name.to_owned(), status);
    }

    fn put_task(&self, id: &ConnectorTaskId, status: StoredStatus) {
        write(&self.tasks).insert(id.clone(), status);
    }

    fn connector(&self, name: &str) -> Option<StoredStatus> {
        read(&self.connectors).get(name).cloned()
    }

    fn task(&self, id: &ConnectorTaskId) -> Option<StoredStatus> {
        read(&self.tasks).get(id).cloned()
    }

    fn remove_task(&self, id: &ConnectorTaskId) {
        write(&self.tasks).remove(id);
    }

    fn remove_connector(&self, name: &str) {
        write(&self.connectors).remove(name);
        write(&self.tasks).retain(|id, _| id.connector != name);
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}
