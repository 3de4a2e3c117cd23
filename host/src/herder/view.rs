//! What reads are served from: each connector actor publishes a [`ConnectorView`] whenever its
//! state changes, and `GET` endpoints read the latest views without waiting on the control loop
//! or any actor, so they answer while a connector is being created, reconfigured or stopped.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

use super::Shared;
use super::status::{ConnectorInfo, ConnectorStatus, InstanceState, TaskId, TaskStatus};
use super::store::TargetState;
use crate::config::ConnectorConfig;
use crate::plugin::World;
use crate::task::{ActiveTopics, TaskMetrics, TaskState};
use crate::worker::Prepared;

/// Shown instead of the value of a `PASSWORD` config key.
pub const HIDDEN: &str = "[hidden]";

/// One connector as its actor last published it.
#[derive(Clone)]
pub(crate) struct ConnectorView {
    /// The config as the operator gave it.
    pub config: ConnectorConfig,
    pub target: TargetState,
    /// Why the connector itself is failed (bad config at start, task split failed), if it is.
    pub failure: Option<String>,
    /// Set while a retriable failure of the connector (its task split) waits to be retried.
    pub retrying: Option<String>,
    pub prepared: Option<Arc<Prepared>>,
    /// Each running task's counters and state, by task id.
    pub tasks: Vec<Arc<TaskMetrics>>,
    pub topics: ActiveTopics,
}

impl ConnectorView {
    /// Source or sink, once the plugin is known.
    pub fn kind(&self) -> Option<World> {
        self.prepared.as_ref().map(|p| p.plugin.world)
    }

    /// The task configs the tasks run from (none while STOPPED), as they may be shown: with
    /// config provider placeholders where the plugin copied resolved values.
    pub fn task_configs(&self) -> Vec<Vec<(String, String)>> {
        match (&self.prepared, self.target) {
            (_, TargetState::Stopped) | (None, _) => Vec::new(),
            (Some(p), _) => p
                .task_configs
                .iter()
                .map(|c| p.resolved.restore(c))
                .collect(),
        }
    }
}

/// The latest view of every connector. The lock is only ever held to copy an `Arc` in or out,
/// never across an `.await`.
#[derive(Default)]
pub(crate) struct Snapshot {
    connectors: RwLock<BTreeMap<String, Arc<ConnectorView>>>,
}

impl Snapshot {
    /// Publish `view` as connector `name`'s.
    pub fn publish(&self, name: &str, view: ConnectorView) {
        self.write().insert(name.to_owned(), Arc::new(view));
    }

    /// Remove connector `name` (deleted).
    pub fn remove(&self, name: &str) {
        self.write().remove(name);
    }

    /// Connector `name`'s latest view.
    pub fn get(&self, name: &str) -> Option<Arc<ConnectorView>> {
        self.read().get(name).cloned()
    }

    /// Every connector's latest view, by name.
    pub fn all(&self) -> Vec<(String, Arc<ConnectorView>)> {
        self.read()
            .iter()
            .map(|(n, v)| (n.clone(), Arc::clone(v)))
            .collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<ConnectorView>>> {
        self.connectors.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<ConnectorView>>> {
        self.connectors.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// `pairs` with the values of secret keys hidden.
pub(crate) fn masked(view: &ConnectorView, pairs: &[(String, String)]) -> BTreeMap<String, String> {
    // Without a loaded plugin (a restored connector whose plugin is gone) its key types are
    // unknown: hide anything named like a secret rather than risk echoing one.
    let secret: BTreeSet<&str> = match view.prepared.as_ref() {
        Some(p) => p
            .plugin
            .spec
            .config
            .iter()
            .filter(|k| k.ty == "PASSWORD")
            .map(|k| k.name.as_str())
            .collect(),
        None => pairs
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| {
                ["password", "secret", "token", "credential", "key"]
                    .iter()
                    .any(|w| k.to_ascii_lowercase().contains(w))
            })
            .filter(|k| !k.ends_with(".converter") && !k.starts_with("key."))
            .collect(),
    };
    pairs
        .iter()
        .map(|(k, v)| {
            let value = if secret.contains(k.as_str()) {
                HIDDEN.to_owned()
            } else {
                v.clone()
            };
            (k.clone(), value)
        })
        .collect()
}

/// `GET /connectors/{name}`.
pub(crate) fn info_of(name: &str, view: &ConnectorView) -> ConnectorInfo {
    let count = if view.target == TargetState::Stopped {
        0
    } else {
        view.tasks.len()
    };
    ConnectorInfo {
        name: name.to_owned(),
        config: masked(view, &view.config.pairs),
        tasks: (0..count as u32)
            .map(|task| TaskId {
                connector: name.to_owned(),
                task,
            })
            .collect(),
        kind: kind_name(view.kind()),
    }
}

/// `GET /connectors/{name}/status`.
pub(crate) fn status_of(shared: &Shared, name: &str, view: &ConnectorView) -> ConnectorStatus {
    let worker_id = shared.config.worker_id.clone();
    let version = view
        .prepared
        .as_ref()
        .map(|p| p.plugin.spec.version.clone());
    // A RUNNING connector or task says so when the cluster does not answer: its records wait
    // (nothing is lost) but nothing moves.
    let outage = shared.health.outage().map(|o| {
        format!(
            "{}; records wait and are sent once it answers",
            o.describe()
        )
    });
    let connector = match (&view.failure, &view.retrying, view.target) {
        (Some(trace), _, _) => InstanceState {
            state: "FAILED",
            worker_id: worker_id.clone(),
            version: version.clone(),
            trace: Some(trace.clone()),
        },
        (None, Some(trace), target) if target != TargetState::Stopped => InstanceState {
            state: "RESTARTING",
            worker_id: worker_id.clone(),
            version: version.clone(),
            trace: Some(trace.clone()),
        },
        (None, _, target) => InstanceState {
            state: match target {
                TargetState::Running => "RUNNING",
                TargetState::Paused => "PAUSED",
                TargetState::Stopped => "STOPPED",
            },
            worker_id: worker_id.clone(),
            version: version.clone(),
            trace: outage.clone().filter(|_| target == TargetState::Running),
        },
    };
    let tasks = view
        .tasks
        .iter()
        .enumerate()
        .map(|(id, metrics)| {
            let state = metrics.state();
            TaskStatus {
                id: id as u32,
                state: InstanceState {
                    state: state.name(),
                    worker_id: worker_id.clone(),
                    version: version.clone(),
                    trace: match state {
                        TaskState::Failed(trace) | TaskState::Restarting(trace) => Some(trace),
                        TaskState::Running => {
                            let parts: Vec<String> = [
                                outage.clone(),
                                metrics.own_client_trouble(),
                                metrics.detail(),
                            ]
                            .into_iter()
                            .flatten()
                            .collect();
                            (!parts.is_empty()).then(|| parts.join("; "))
                        }
                        _ => None,
                    },
                },
            }
        })
        .collect();
    ConnectorStatus {
        name: name.to_owned(),
        connector,
        tasks,
        kind: kind_name(view.kind()),
    }
}

fn kind_name(kind: Option<World>) -> &'static str {
    match kind {
        Some(World::Source) => "source",
        Some(World::Sink) => "sink",
        None => "unknown",
    }
}
