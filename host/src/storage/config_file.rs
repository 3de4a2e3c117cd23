//! The standalone config log: the state the log's records add up to, kept in one JSON file in
//! the data directory (`connectors.json`) and replaced atomically by every append, so a crash
//! leaves the state before or after an append, never part of one.
//!
//! The file holds the state, not the records: a standalone worker only ever needs the state to
//! start, and subscribers are in this process. Files written before task configs were stored
//! (no `format`, no `tasks`) are read as connectors without a stored split; the next append
//! writes the new shape.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::config::{ConfigEvent, ConfigLog, ConfigRecord, ConfigState, StoredConnector};
use super::config::{Pairs, TargetState};
use crate::offsets::store::write_atomically;

/// The file's format version (files without one are the first shape: no task configs).
const FORMAT: u64 = 2;

#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    config: BTreeMap<String, String>,
    target_state: TargetState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tasks: Option<Vec<BTreeMap<String, String>>>,
    /// The content hash of the plugin build that split `tasks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tasks_build: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    #[serde(default)]
    format: u64,
    #[serde(default)]
    offset: u64,
    connectors: BTreeMap<String, Stored>,
}

/// The config log in a file.
pub struct FileConfigLog {
    path: PathBuf,
    /// The state as stored, and the subscribers. Appends hold it while they write, so they are
    /// stored and delivered in offset order.
    inner: tokio::sync::Mutex<Inner>,
    /// Subscribers, also reachable without waiting for an append in progress.
    subscribers: Mutex<Vec<mpsc::UnboundedSender<ConfigEvent>>>,
}

struct Inner {
    /// `None` until the file was read once.
    state: Option<ConfigState>,
}

impl FileConfigLog {
    /// The log in `path` (read on first use).
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            inner: tokio::sync::Mutex::new(Inner { state: None }),
            subscribers: Mutex::new(Vec::new()),
        }
    }

    fn read_file(&self) -> Result<ConfigState, String> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(ConfigState::default());
            }
            Err(e) => return Err(format!("cannot read {}: {e}", self.path.display())),
        };
        let unreadable = |why: String| {
            format!(
                "{} is not readable ({why}); move it away to start without stored connectors",
                self.path.display()
            )
        };
        let file: File = serde_json::from_slice(&bytes).map_err(|e| unreadable(e.to_string()))?;
        if file.format > FORMAT {
            return Err(unreadable(format!(
                "format {} is newer than this worker's {FORMAT}",
                file.format
            )));
        }
        let pairs = |m: BTreeMap<String, String>| -> Pairs { m.into_iter().collect() };
        Ok(ConfigState {
            offset: file.offset,
            connectors: file
                .connectors
                .into_iter()
                .map(|(name, s)| {
                    let stored = StoredConnector {
                        config: pairs(s.config),
                        target: s.target_state,
                        tasks: s.tasks.map(|t| t.into_iter().map(pairs).collect()),
                        tasks_build: s.tasks_build,
                    };
                    (name, stored)
                })
                .collect(),
        })
    }

    fn write_file(path: &std::path::Path, state: &ConfigState) -> Result<(), String> {
        let map = |p: &Pairs| p.iter().cloned().collect::<BTreeMap<_, _>>();
        let file = File {
            format: FORMAT,
            offset: state.offset,
            connectors: state
                .connectors
                .iter()
                .map(|(name, c)| {
                    let stored = Stored {
                        config: map(&c.config),
                        target_state: c.target,
                        tasks: c.tasks.as_ref().map(|t| t.iter().map(map).collect()),
                        tasks_build: c.tasks_build.clone(),
                    };
                    (name.clone(), stored)
                })
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| e.to_string())?;
        write_atomically(path, &bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

impl ConfigLog for FileConfigLog {
    fn read(&self) -> Result<ConfigState, String> {
        self.read_file()
    }

    fn append(
        &self,
        records: Vec<ConfigRecord>,
    ) -> BoxFuture<'_, Result<Vec<ConfigEvent>, String>> {
        Box::pin(async move {
            let mut inner = self.inner.lock().await;
            let current = match inner.state.take() {
                Some(state) => state,
                None => self.read_file()?,
            };
            let mut next = current.clone();
            let events = next.append(records);
            let path = self.path.clone();
            let snapshot = next.clone();
            // Written off the async threads; the lock keeps appends in order meanwhile.
            let written = tokio::task::spawn_blocking(move || Self::write_file(&path, &snapshot))
                .await
                .map_err(|e| format!("cannot write {}: {e}", self.path.display()))
                .and_then(|r| r);
            if let Err(e) = written {
                inner.state = Some(current);
                return Err(e);
            }
            inner.state = Some(next);
            let mut subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
            subscribers.retain(|s| events.iter().all(|e| s.send(e.clone()).is_ok()));
            Ok(events)
        })
    }

    fn subscribe(&self) -> mpsc::UnboundedReceiver<ConfigEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.subscribers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tx);
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::file::pairs_of as pairs;

    #[tokio::test]
    async fn appends_are_stored_delivered_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("connectors.json");
        let log = FileConfigLog::new(path.clone());
        let mut events = log.subscribe();
        let appended = log
            .append(vec![
                ConfigRecord::Connector {
                    name: "a".into(),
                    config: pairs(&[("name", "a")]),
                },
                ConfigRecord::Tasks {
                    name: "a".into(),
                    configs: vec![pairs(&[("t", "0")]), pairs(&[("t", "1")])],
                    build: Some("b1".into()),
                },
            ])
            .await
            .unwrap();
        assert_eq!(
            appended.iter().map(|e| e.offset).collect::<Vec<_>>(),
            [1, 2]
        );
        assert_eq!(events.recv().await.unwrap(), appended[0]);
        assert_eq!(events.recv().await.unwrap(), appended[1]);
        let state = FileConfigLog::new(path).read().unwrap();
        assert_eq!(state.offset, 2);
        assert_eq!(
            state.connectors["a"].tasks,
            Some(vec![pairs(&[("t", "0")]), pairs(&[("t", "1")])])
        );
        assert_eq!(state.connectors["a"].tasks_build.as_deref(), Some("b1"));
    }

    #[tokio::test]
    async fn a_failed_write_changes_nothing_and_delivers_nothing() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be: every write fails.
        let path = dir.path().join("connectors.json");
        let log = FileConfigLog::new(path.clone());
        log.append(vec![ConfigRecord::Connector {
            name: "a".into(),
            config: vec![],
        }])
        .await
        .unwrap();
        let mut events = log.subscribe();
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let failed = log
            .append(vec![ConfigRecord::Removed { name: "a".into() }])
            .await;
        assert!(failed.unwrap_err().contains("connectors.json"));
        assert!(events.try_recv().is_err());
        std::fs::remove_dir(&path).unwrap();
        // The next append continues from the state before the failed one.
        let next = log
            .append(vec![ConfigRecord::Target {
                name: "a".into(),
                state: TargetState::Paused,
            }])
            .await
            .unwrap();
        assert_eq!(next[0].offset, 2);
        let state = log.read().unwrap();
        assert_eq!(state.connectors["a"].target, TargetState::Paused);
    }

    #[test]
    fn files_of_the_first_shape_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("connectors.json");
        std::fs::write(
            &path,
            r#"{"connectors": {"a": {"config": {"name": "a", "tasks.max": "2"}, "target_state": "PAUSED"}}}"#,
        )
        .unwrap();
        let state = FileConfigLog::new(path).read().unwrap();
        assert_eq!(state.offset, 0);
        let a = &state.connectors["a"];
        assert_eq!(a.target, TargetState::Paused);
        assert_eq!(a.tasks, None);
        assert_eq!(a.config, pairs(&[("name", "a"), ("tasks.max", "2")]));
    }

    #[test]
    fn an_unreadable_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("connectors.json");
        std::fs::write(&path, "{not json").unwrap();
        let err = FileConfigLog::new(path).read().unwrap_err();
        assert!(
            err.contains("connectors.json") && err.contains("move it away"),
            "{err}"
        );
    }
}
