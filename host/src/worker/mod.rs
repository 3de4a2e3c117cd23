//! The worker: the parts every connector shares (sandbox, registry, Kafka clients, offset
//! store, capacity), preparing a connector from its config, and building and supervising task
//! runners from settings parsed once. The herder decides *what* runs; this module runs it.

mod prepare;
mod restart;
mod runner;

use std::sync::Arc;

pub(crate) use prepare::{
    NotPrepared, Prepared, connector_context, prepare, problems, problems_message, split,
};
pub use restart::{
    RESTART_BACKOFF_INITIAL_MS, RESTART_BACKOFF_MAX_MS, RESTART_MAX_ATTEMPTS, RESTART_WINDOW_MS,
    RestartPolicy,
};
pub(crate) use runner::{TaskHandle, spawn_task, stop_all};

use crate::config::WorkerConfig;
use crate::herder::{Capacity, Claim};
use crate::kafka::health::KafkaHealth;
use crate::kafka::producer::Producer;
use crate::kafka::topics::TopicCreator;
use crate::offsets::FileOffsetStore;
use crate::registry::Registry;
use crate::sandbox::Sandbox;

/// The parts every connector shares.
pub(crate) struct Shared {
    pub config: WorkerConfig,
    pub sandbox: Arc<Sandbox>,
    pub registry: Arc<Registry>,
    pub bootstrap: String,
    pub producer: Arc<Producer>,
    pub topics: Arc<TopicCreator>,
    pub offsets: Arc<FileOffsetStore>,
    /// The tasks and memory admitted so far.
    pub capacity: Capacity,
    /// Whether the Kafka cluster answers.
    pub health: Arc<KafkaHealth>,
    /// This worker's identity across restarts (kept in the data directory): part of its sink
    /// consumers' static group membership ids.
    pub instance_id: String,
}

/// What a prepared connector's tasks claim of the worker's capacity.
pub(crate) fn claim_of(prepared: &Prepared) -> Claim {
    let claim = Claim::new(prepared.task_configs.len(), prepared.limits.memory_bytes);
    // Only instances with a directory grant can open files; each may hold its handle limit.
    if prepared.grants.dirs().is_empty() {
        claim
    } else {
        claim.with_files(prepared.limits.handles_max)
    }
}
