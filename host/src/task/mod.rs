//! Task runners: one async task per connector task, each owning its sandboxed instance.
//! `source`: poll → convert → produce → acknowledge → commit offsets.
//! `sink`: consume → convert → put → flush → commit consumer offsets.

pub mod poll_ahead;
pub mod put_behind;
pub mod settings;
pub mod sink;
pub mod source;
pub mod transforms;

pub use settings::RunnerSettings;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::backoff::Backoff;

/// What the herder wants a task to do; runners watch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Move data.
    Run,
    /// Stop moving data but keep the instance, offsets and assignment (Kafka Connect's pause).
    Pause,
    /// Finish: flush offsets, stop the plugin, end the runner.
    Stop,
}

/// The current control value; a dropped sender means stop.
pub(crate) fn control(rx: &tokio::sync::watch::Receiver<Control>) -> Control {
    if rx.has_changed().is_err() {
        Control::Stop
    } else {
        *rx.borrow()
    }
}

/// Why a task ended, and whether restarting it can help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What went wrong, in plugin terms.
    pub trace: String,
    /// False for failures that a restart repeats (invalid config, a record that cannot be
    /// converted): the restart policy leaves those FAILED at once.
    pub restartable: bool,
}

impl Failure {
    /// A failure a restart would only repeat.
    pub fn fatal(trace: impl Into<String>) -> Self {
        Self {
            trace: trace.into(),
            restartable: false,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.trace)
    }
}

impl From<String> for Failure {
    fn from(trace: String) -> Self {
        Self {
            trace,
            restartable: true,
        }
    }
}

impl From<crate::sandbox::CallError> for Failure {
    fn from(e: crate::sandbox::CallError) -> Self {
        use crate::sandbox::wit::types::PluginError;
        let restartable = !matches!(
            e,
            crate::sandbox::CallError::Plugin {
                error: PluginError::InvalidConfig(_),
                ..
            }
        );
        Self {
            trace: e.to_string(),
            restartable,
        }
    }
}

/// The lifecycle state of a task, with Kafka Connect's names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskState {
    Unassigned,
    Running,
    Paused,
    /// The task failed and waits to be restarted; the trace says why.
    Restarting(String),
    /// The task failed; the trace says why in plugin terms.
    Failed(String),
    Stopped,
}

impl TaskState {
    /// The Kafka Connect state name.
    pub fn name(&self) -> &'static str {
        match self {
            TaskState::Unassigned => "UNASSIGNED",
            TaskState::Running => "RUNNING",
            TaskState::Paused => "PAUSED",
            TaskState::Restarting(_) => "RESTARTING",
            TaskState::Failed(_) => "FAILED",
            TaskState::Stopped => "STOPPED",
        }
    }
}

/// Counters and state of one task, shared with the herder and progress reporting.
#[derive(Debug)]
pub struct TaskMetrics {
    /// Records the task produced (source) or consumed (sink).
    pub records_in: AtomicU64,
    /// Records Kafka acknowledged (source) or the plugin accepted (sink).
    pub records_done: AtomicU64,
    /// How often the task was restarted after a failure.
    pub restarts: AtomicU64,
    /// Failed records, skipped records and dead-letter writes (kept across restarts).
    pub errors: std::sync::Arc<crate::errors::ErrorCounts>,
    state: Mutex<TaskState>,
    /// What a RUNNING task is waiting for, when it is not moving data for a reason outside it
    /// (no partitions assigned); shown as the status trace.
    detail: Mutex<Option<String>>,
    /// The task's clients made from the connector's own settings (KIP-458), whose failures
    /// the status shows.
    own_clients: Mutex<Vec<std::sync::Arc<crate::kafka::OwnClient>>>,
    /// Where its state changes are reported, as whom.
    status: Option<StatusReporter>,
}

/// Reports a task's states to the status store.
struct StatusReporter {
    id: crate::storage::ConnectorTaskId,
    store: std::sync::Arc<dyn crate::storage::StatusStore>,
    worker_id: String,
}

impl std::fmt::Debug for StatusReporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StatusReporter({})", self.id)
    }
}

impl Default for TaskMetrics {
    fn default() -> Self {
        Self {
            records_in: AtomicU64::new(0),
            records_done: AtomicU64::new(0),
            restarts: AtomicU64::new(0),
            errors: Default::default(),
            state: Mutex::new(TaskState::Unassigned),
            detail: Mutex::new(None),
            own_clients: Mutex::new(Vec::new()),
            status: None,
        }
    }
}

impl TaskMetrics {
    /// Counters of task `id`, whose every state change is written to `store` as run by
    /// `worker_id`.
    pub fn reporting(
        id: crate::storage::ConnectorTaskId,
        store: std::sync::Arc<dyn crate::storage::StatusStore>,
        worker_id: String,
    ) -> Self {
        Self {
            status: Some(StatusReporter {
                id,
                store,
                worker_id,
            }),
            ..Self::default()
        }
    }

    /// Records done so far.
    pub fn done(&self) -> u64 {
        self.records_done.load(Ordering::Relaxed)
    }

    /// The current state.
    pub fn state(&self) -> TaskState {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Set the state (and report it, if the task reports to a status store).
    pub fn set_state(&self, state: TaskState) {
        let mut current = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // Written under the lock, so the store sees the task's states in the order it had them.
        if let Some(status) = &self.status {
            let trace = match &state {
                TaskState::Failed(t) | TaskState::Restarting(t) => Some(t.clone()),
                _ => None,
            };
            status.store.put_task(
                &status.id,
                crate::storage::StoredStatus {
                    state: state.name(),
                    trace,
                    worker_id: status.worker_id.clone(),
                },
            );
        }
        *current = state;
    }

    /// What the task is waiting for, if anything.
    pub fn detail(&self) -> Option<String> {
        self.detail
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Say what the task is waiting for (`None`: nothing).
    pub fn set_detail(&self, detail: Option<String>) {
        *self.detail.lock().unwrap_or_else(|e| e.into_inner()) = detail;
    }

    /// The clients the task's current run made from the connector's own settings.
    pub fn set_own_clients(&self, clients: Vec<std::sync::Arc<crate::kafka::OwnClient>>) {
        *self.own_clients.lock().unwrap_or_else(|e| e.into_inner()) = clients;
    }

    /// Why one of the connector's own clients cannot reach the cluster, if one cannot.
    pub fn own_client_trouble(&self) -> Option<String> {
        self.own_clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find_map(|c| c.trouble())
    }
}

/// The topics a connector has used since it was created or its topics were reset (Kafka
/// Connect's "active topics").
pub type ActiveTopics = std::sync::Arc<Mutex<std::collections::BTreeSet<String>>>;

/// Record that `topic` is in use, unless the connector already uses `max` other topics;
/// `Err` carries how many it uses.
pub(crate) fn note_topic(topics: &ActiveTopics, topic: &str, max: usize) -> Result<(), usize> {
    let mut set = topics.lock().unwrap_or_else(|e| e.into_inner());
    if set.contains(topic) {
        return Ok(());
    }
    if set.len() >= max {
        return Err(set.len());
    }
    set.insert(topic.to_owned());
    Ok(())
}

/// How long a task waits before it retries a retriable plugin error or asks Kafka again: the
/// worker's one backoff ([`crate::backoff`]), 100 ms doubling up to 10 s, plus jitter.
pub(crate) const RETRY_BACKOFF: Backoff =
    Backoff::new(Duration::from_millis(100), Duration::from_secs(10));

/// The wait before retry `attempt` (0 is the first) under [`RETRY_BACKOFF`].
pub(crate) fn backoff(attempt: u32) -> Duration {
    RETRY_BACKOFF.delay(attempt)
}
