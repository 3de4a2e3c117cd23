//! Task runners: one async task per connector task, each owning its sandboxed instance.
//! `source`: poll → convert → produce → acknowledge → commit offsets.
//! `sink`: consume → convert → put → flush → commit consumer offsets.

pub mod sink;
pub mod source;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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

/// The lifecycle state of a task, with Kafka Connect's names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskState {
    Unassigned,
    Running,
    Paused,
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
    state: Mutex<TaskState>,
}

impl Default for TaskMetrics {
    fn default() -> Self {
        Self {
            records_in: AtomicU64::new(0),
            records_done: AtomicU64::new(0),
            state: Mutex::new(TaskState::Unassigned),
        }
    }
}

impl TaskMetrics {
    /// Records done so far.
    pub fn done(&self) -> u64 {
        self.records_done.load(Ordering::Relaxed)
    }

    /// The current state.
    pub fn state(&self) -> TaskState {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Set the state.
    pub fn set_state(&self, state: TaskState) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = state;
    }
}

/// The topics a connector has used since it was created or its topics were reset (Kafka
/// Connect's "active topics").
pub type ActiveTopics = std::sync::Arc<Mutex<std::collections::BTreeSet<String>>>;

/// Record that `topic` is in use.
pub(crate) fn note_topic(topics: &ActiveTopics, topic: &str) {
    let mut set = topics.lock().unwrap_or_else(|e| e.into_inner());
    if !set.contains(topic) {
        set.insert(topic.to_owned());
    }
}

/// Settings every runner needs from the worker.
#[derive(Debug, Clone, Copy)]
pub struct RunnerSettings {
    pub flush_interval: Duration,
    pub source_poll_max_records: u32,
    pub source_max_in_flight: usize,
    pub sink_batch_max_records: usize,
}

/// Exponential backoff for retriable plugin errors: 100 ms doubling up to 10 s.
pub(crate) fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(100u64.saturating_mul(1 << attempt.min(7))).min(Duration::from_secs(10))
}
