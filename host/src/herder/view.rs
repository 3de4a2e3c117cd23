//! What reads are served from: each connector actor publishes a [`ConnectorView`] whenever its
//! state changes, and `GET` endpoints read the latest views without waiting on the control loop
//! or any actor, so they answer while a connector is being created, reconfigured or stopped.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

use super::status::{ConnectorInfo, ConnectorStatus, InstanceState, TaskId, TaskStatus};
use crate::config::ConnectorConfig;
use crate::plugin::World;
use crate::storage::{ConnectorTaskId, Pairs, StatusStore};
use crate::task::{ActiveTopics, TaskMetrics, TaskState};
use crate::worker::ConnectorFacts;

/// Shown instead of the value of a `PASSWORD` config key.
pub const HIDDEN: &str = "[hidden]";

/// One connector as its actor last published it.
#[derive(Clone)]
pub(crate) struct ConnectorView {
    /// The config as the operator gave it.
    pub config: ConnectorConfig,
    /// What the connector is, once its config checked out.
    pub facts: Option<ConnectorFacts>,
    /// The stored split its tasks run from, as it may be shown (resolved values redacted);
    /// empty while STOPPED (as Kafka Connect, which stores an empty split on a stop).
    pub split: Vec<Pairs>,
    /// Whether its status lists the split's tasks: they run or may run (not STOPPED, FAILED
    /// or waiting to retry its split).
    pub tasks_listed: bool,
    /// The tasks running here, by task id: counters, and live detail for statuses.
    pub tasks: BTreeMap<u32, Arc<TaskMetrics>>,
    pub topics: ActiveTopics,
}

impl ConnectorView {
    /// Source or sink, once the plugin is known.
    pub fn kind(&self) -> Option<World> {
        self.facts.as_ref().map(|f| f.world)
    }

    /// The task configs the tasks run from (none while STOPPED), as they may be shown.
    pub fn task_configs(&self) -> &[Pairs] {
        &self.split
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
    let secret: BTreeSet<&str> = match view.facts.as_ref() {
        Some(f) => f.secret_keys.iter().map(String::as_str).collect(),
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
    ConnectorInfo {
        name: name.to_owned(),
        config: masked(view, &view.config.pairs),
        tasks: (0..view.split.len() as u32)
            .map(|task| TaskId {
                connector: name.to_owned(),
                task,
            })
            .collect(),
        kind: kind_name(view.kind()),
    }
}

/// `GET /connectors/{name}/status`: the states the status store holds, with what a RUNNING
/// connector or task waits for (`outage`: the Kafka cluster does not answer) as its trace.
pub(crate) fn status_of(
    store: &dyn StatusStore,
    outage: Option<String>,
    name: &str,
    view: &ConnectorView,
) -> ConnectorStatus {
    let version = view.facts.as_ref().map(|f| f.version.clone());
    // A RUNNING connector or task says so when the cluster does not answer: its records wait
    // (nothing is lost) but nothing moves.
    let outage = outage.map(|o| format!("{o}; records wait and are sent once it answers"));
    let unassigned = || crate::storage::StoredStatus {
        state: "UNASSIGNED",
        trace: None,
        worker_id: String::new(),
    };
    let stored = store.connector(name).unwrap_or_else(unassigned);
    let connector = InstanceState {
        state: stored.state,
        worker_id: stored.worker_id,
        version: version.clone(),
        trace: stored
            .trace
            .or_else(|| outage.clone().filter(|_| stored.state == "RUNNING")),
    };
    let listed = if view.tasks_listed {
        view.split.len()
    } else {
        0
    };
    let tasks = (0..listed as u32)
        .map(|id| {
            let stored = store
                .task(&ConnectorTaskId::new(name, id))
                .unwrap_or_else(unassigned);
            let live = view.tasks.get(&id);
            let trace = match (stored.trace, live) {
                (Some(trace), _) => Some(trace),
                (None, Some(metrics)) if metrics.state() == TaskState::Running => {
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
                (None, _) => None,
            };
            TaskStatus {
                id,
                state: InstanceState {
                    state: stored.state,
                    worker_id: stored.worker_id,
                    version: version.clone(),
                    trace,
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
