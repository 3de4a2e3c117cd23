//! The config log: what the operator asked for (connector configs, target states) and what
//! the connectors split their work into (task configs), as a sequence of records with offsets,
//! after Kafka Connect's `ConfigBackingStore`.
//!
//! Invariants: records are delivered to subscribers in offset order, each exactly once, and
//! only once durable; a batch of records given to one [`ConfigLog::append`] is stored whole or
//! not at all; a connector's task configs are one record (Kafka Connect writes one record per
//! task and a commit record after them, and readers act on the set only once committed: one
//! record here is that set).

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

/// Config pairs in the order given.
pub type Pairs = Vec<(String, String)>;

/// What the operator asked a connector to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TargetState {
    Running,
    Paused,
    Stopped,
}

/// One task of one connector (Kafka Connect's `ConnectorTaskId`): the unit the worker starts,
/// stops and reports on, whatever other tasks of the connector run here.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectorTaskId {
    /// The connector's name.
    pub connector: String,
    /// The task's index in the connector's split.
    pub task: u32,
}

impl ConnectorTaskId {
    /// Task `task` of `connector`.
    pub fn new(connector: &str, task: u32) -> Self {
        Self {
            connector: connector.to_owned(),
            task,
        }
    }
}

impl std::fmt::Display for ConnectorTaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.connector, self.task)
    }
}

/// One change to the config log. Its JSON form (tagged by `type`) is what a worker sends the
/// group's leader to append (distributed mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ConfigRecord {
    /// A connector's config as the operator gave it (config provider placeholders kept).
    Connector { name: String, config: Pairs },
    /// A connector removed; its task configs and target state go with it.
    Removed { name: String },
    /// A connector's whole split: task `i` runs from `configs[i]` (placeholders put back where
    /// the plugin copied a resolved value, so no secret is stored), split by the plugin build
    /// whose content hash is `build` (a restore on another build splits again).
    Tasks {
        name: String,
        configs: Vec<Pairs>,
        build: Option<String>,
    },
    /// The operator's target state for a connector.
    Target { name: String, state: TargetState },
    /// An operator's request to restart a connector (KIP-745), for every worker to act on
    /// for what it runs: the connector instance unless `only_failed` and it is not FAILED, and
    /// with `include_tasks` its tasks (only FAILED ones with `only_failed`). Changes nothing
    /// stored. Distributed mode only.
    Restart {
        name: String,
        include_tasks: bool,
        only_failed: bool,
    },
}

impl ConfigRecord {
    /// The connector the record is about.
    pub fn connector(&self) -> &str {
        match self {
            ConfigRecord::Connector { name, .. }
            | ConfigRecord::Removed { name }
            | ConfigRecord::Tasks { name, .. }
            | ConfigRecord::Target { name, .. }
            | ConfigRecord::Restart { name, .. } => name,
        }
    }
}

/// A record as stored, with its offset in the log: offsets start at 1 and grow from record to
/// record (by one in the file log; with gaps on Kafka, where a record may take several Kafka
/// records).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEvent {
    pub offset: u64,
    pub record: ConfigRecord,
}

/// One connector as the log has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredConnector {
    /// The config as the operator gave it.
    pub config: Pairs,
    pub target: TargetState,
    /// The stored split; `None` until one is stored (a connector stored by a version without
    /// task configs, or whose split has not succeeded yet).
    pub tasks: Option<Vec<Pairs>>,
    /// The content hash of the plugin build that made the stored split, if known.
    pub tasks_build: Option<String>,
}

/// Everything the log holds as of `offset` (Kafka Connect's `ClusterConfigState`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigState {
    /// The offset of the last record applied (0: none).
    pub offset: u64,
    pub connectors: BTreeMap<String, StoredConnector>,
}

impl ConfigState {
    /// Give `records` the offsets after this state's and apply them; their events.
    pub fn append(&mut self, records: Vec<ConfigRecord>) -> Vec<ConfigEvent> {
        let first = self.offset + 1;
        let events: Vec<ConfigEvent> = records
            .into_iter()
            .enumerate()
            .map(|(i, record)| ConfigEvent {
                offset: first + i as u64,
                record,
            })
            .collect();
        for event in &events {
            self.apply(event);
        }
        events
    }

    /// Apply `event`, the record after those applied so far.
    pub fn apply(&mut self, event: &ConfigEvent) {
        self.offset = self.offset.max(event.offset);
        match &event.record {
            ConfigRecord::Connector { name, config } => {
                match self.connectors.get_mut(name) {
                    // A new config drops the stored split, which belongs to the old one: a
                    // `Tasks` record after it stores the new config's split.
                    Some(stored) => {
                        if stored.config != *config {
                            stored.tasks = None;
                            stored.tasks_build = None;
                        }
                        stored.config = config.clone();
                    }
                    // A new connector runs unless a target state says otherwise (Kafka
                    // Connect's default too).
                    None => {
                        self.connectors.insert(
                            name.clone(),
                            StoredConnector {
                                config: config.clone(),
                                target: TargetState::Running,
                                tasks: None,
                                tasks_build: None,
                            },
                        );
                    }
                }
            }
            ConfigRecord::Removed { name } => {
                self.connectors.remove(name);
            }
            // Task configs and target states of a connector with no config are dropped, as
            // Kafka Connect drops them: they can only be left over from a removed connector.
            ConfigRecord::Tasks {
                name,
                configs,
                build,
            } => {
                if let Some(stored) = self.connectors.get_mut(name) {
                    stored.tasks = Some(configs.clone());
                    stored.tasks_build = build.clone();
                }
            }
            ConfigRecord::Target { name, state } => {
                if let Some(stored) = self.connectors.get_mut(name) {
                    stored.target = *state;
                }
            }
            ConfigRecord::Restart { .. } => {}
        }
    }
}

/// The config log. Several writers may append; the log orders their records.
pub trait ConfigLog: Send + Sync + 'static {
    /// Everything stored, read now; an unreadable store is an error that names it and says
    /// what to do.
    fn read(&self) -> Result<ConfigState, String>;

    /// Append `records`, stored together or not at all (on Kafka: as one transaction). Returns
    /// their events once durable; every subscriber gets them too, after the events of every
    /// earlier append.
    fn append(&self, records: Vec<ConfigRecord>)
    -> BoxFuture<'_, Result<Vec<ConfigEvent>, String>>;

    /// Everything stored as far as this process has read it, without waiting to read more
    /// (what a subscriber has been sent, or is about to be); by default [`ConfigLog::read`].
    fn current(&self) -> Result<ConfigState, String> {
        self.read()
    }

    /// The events of every append from now on, in offset order.
    fn subscribe(&self) -> mpsc::UnboundedReceiver<ConfigEvent>;
}

/// How an append's error starts when the log refused the records because of what it holds
/// (a creation of a connector another writer created first): a conflict, not a failure.
pub const CONFLICT: &str = "conflict: ";

/// Whether two splits are the same: task by task, the same keys with the same values, in any
/// order (a plugin need not return its keys in the same order every time).
pub fn same_split(a: &[Pairs], b: &[Pairs]) -> bool {
    let canonical = |c: &Pairs| c.iter().cloned().collect::<BTreeMap<String, String>>();
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| canonical(x) == canonical(y))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::file::pairs_of as pairs;

    #[test]
    fn state_follows_the_records_in_order() {
        let mut state = ConfigState::default();
        let events = [
            ConfigRecord::Connector {
                name: "a".into(),
                config: pairs(&[("x", "1")]),
            },
            ConfigRecord::Target {
                name: "a".into(),
                state: TargetState::Paused,
            },
            ConfigRecord::Tasks {
                name: "a".into(),
                configs: vec![pairs(&[("t", "0")])],
                build: Some("b1".into()),
            },
            // Left over from a connector that is gone: ignored.
            ConfigRecord::Tasks {
                name: "gone".into(),
                configs: vec![],
                build: None,
            },
            // The same config again keeps the split; another drops it.
            ConfigRecord::Connector {
                name: "a".into(),
                config: pairs(&[("x", "1")]),
            },
        ];
        for (i, record) in events.into_iter().enumerate() {
            state.apply(&ConfigEvent {
                offset: i as u64 + 1,
                record,
            });
        }
        assert_eq!(state.offset, 5);
        assert_eq!(
            state.connectors["a"],
            StoredConnector {
                config: pairs(&[("x", "1")]),
                target: TargetState::Paused,
                tasks: Some(vec![pairs(&[("t", "0")])]),
                tasks_build: Some("b1".into()),
            }
        );
        assert!(!state.connectors.contains_key("gone"));
        state.apply(&ConfigEvent {
            offset: 6,
            record: ConfigRecord::Connector {
                name: "a".into(),
                config: pairs(&[("x", "2")]),
            },
        });
        assert_eq!(state.connectors["a"].tasks, None);
        state.apply(&ConfigEvent {
            offset: 7,
            record: ConfigRecord::Removed { name: "a".into() },
        });
        assert!(state.connectors.is_empty());
    }

    #[test]
    fn splits_compare_by_key_not_order() {
        let a = vec![pairs(&[("x", "1"), ("y", "2")])];
        let b = vec![pairs(&[("y", "2"), ("x", "1")])];
        assert!(same_split(&a, &b));
        assert!(!same_split(&a, &[pairs(&[("x", "1")])]));
        assert!(!same_split(&a, &[]));
    }
}
