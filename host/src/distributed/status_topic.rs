//! Statuses on Kafka: [`StatusStore`] over the status topic (compacted), Kafka Connect's format
//! (`KafkaStatusBackingStore`): keys `status-connector-<name>` and `status-task-<name>-<id>`,
//! values `{"state":"RUNNING","trace":null,"worker_id":"host:8083","generation":5}`, a
//! tombstone when a connector or task is gone. Each worker writes the states of what it runs;
//! every worker follows the whole topic, so any worker answers a status request with the right
//! `worker_id`s.
//!
//! Generations settle who is right when two workers wrote about the same connector or task
//! (the one that ran it before a rebalance, and the one that runs it now):
//! - a worker does not overwrite a status that another worker wrote in a later generation (it
//!   is the stale one);
//! - an `UNASSIGNED` read back does not replace a `RUNNING` of the same or a later generation.
//!
//! Writes return at once (statuses are written from record loops and actors); a write that
//! fails is logged, and the next state change writes again.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{Value, json};

use super::follower::{Follower, Record};
use crate::kafka::TracingContext;
use crate::storage::{ConnectorTaskId, StatusStore, StoredStatus};

const CONNECTOR: &str = "status-connector-";
const TASK: &str = "status-task-";

/// A status as read or written, with the generation it was written in.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Versioned {
    status: StoredStatus,
    generation: i32,
}

#[derive(Default)]
struct Statuses {
    connectors: BTreeMap<String, Versioned>,
    tasks: BTreeMap<ConnectorTaskId, Versioned>,
}

/// The status topic as a [`StatusStore`].
pub struct KafkaStatusStore {
    topic: String,
    producer: FutureProducer<TracingContext>,
    statuses: Arc<Mutex<Statuses>>,
    /// The group generation this worker's writes carry.
    generation: AtomicI32,
    follower: Follower,
}

impl KafkaStatusStore {
    /// Follow `topic` (which must exist) from its beginning and write to it, with clients made
    /// from `producer` and `consumer` settings (librdkafka's terms); returns once what the
    /// topic held has been read.
    pub fn open(
        bootstrap: &str,
        topic: &str,
        producer: &[(String, String)],
        consumer: &[(String, String)],
        client_id: &str,
    ) -> Result<Self, String> {
        let (producer, statuses, follower) = super::open_keyed(
            bootstrap,
            topic,
            producer,
            consumer,
            &format!("{client_id}-statuses"),
            "status topic",
            read,
        )?;
        Ok(Self {
            topic: topic.to_owned(),
            producer,
            statuses,
            generation: AtomicI32::new(-1),
            follower,
        })
    }

    /// The group generation this worker's writes carry from now on.
    pub fn set_generation(&self, generation: i32) {
        self.generation.store(generation, Ordering::Release);
    }

    /// Wait until every status written before this call (by any worker) is read.
    pub fn read_to_end(&self) -> Result<(), String> {
        crate::kafka::blocking(|| self.follower.read_to_end())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Statuses> {
        self.statuses.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Send `value` (or a tombstone) under `key` without waiting; a failure is logged.
    fn send(&self, key: String, value: Option<String>) {
        let mut record = FutureRecord::to(&self.topic).key(key.as_str());
        if let Some(value) = &value {
            record = record.payload(value.as_str());
        }
        match self.producer.send_result(record) {
            Ok(delivery) => {
                let topic = self.topic.clone();
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move {
                        if let Ok(Err((e, _))) = delivery.await {
                            tracing::warn!(topic = %topic, "status {key} not written: {e}; the next change writes it again");
                        }
                    });
                }
            }
            Err((e, _)) => {
                tracing::warn!(topic = %self.topic, "status {key} not written: {e}; the next change writes it again");
            }
        }
    }

    fn versioned(&self, status: StoredStatus) -> Versioned {
        Versioned {
            status,
            generation: self.generation.load(Ordering::Acquire),
        }
    }
}

/// Whether `new`, written by this worker, may replace `cached`: not over a later generation's
/// status written by another worker.
fn may_write(cached: Option<&Versioned>, new: &Versioned) -> bool {
    cached.is_none_or(|c| {
        c.status.worker_id == new.status.worker_id || c.generation <= new.generation
    })
}

/// Whether `new`, read back, replaces `cached`: an UNASSIGNED does not replace a RUNNING of
/// the same or a later generation.
fn may_read(cached: Option<&Versioned>, new: &Versioned) -> bool {
    !(new.status.state == "UNASSIGNED"
        && cached.is_some_and(|c| c.status.state == "RUNNING" && c.generation >= new.generation))
}

fn encode(v: &Versioned) -> String {
    json!({
        "state": v.status.state,
        "trace": v.status.trace,
        "worker_id": v.status.worker_id,
        "generation": v.generation,
    })
    .to_string()
}

fn decode(bytes: &[u8]) -> Result<Versioned, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let state = match value["state"].as_str() {
        Some("UNASSIGNED") => "UNASSIGNED",
        Some("RUNNING") => "RUNNING",
        Some("PAUSED") => "PAUSED",
        Some("STOPPED") => "STOPPED",
        Some("RESTARTING") => "RESTARTING",
        Some("FAILED") => "FAILED",
        other => return Err(format!("unknown state {other:?}")),
    };
    Ok(Versioned {
        status: StoredStatus {
            state,
            trace: value["trace"].as_str().map(str::to_owned),
            worker_id: value["worker_id"].as_str().unwrap_or_default().to_owned(),
        },
        generation: value["generation"]
            .as_i64()
            .and_then(|g| i32::try_from(g).ok())
            .unwrap_or(-1),
    })
}

/// `status-task-<name>-<id>`: the name may contain dashes; the id follows the last.
fn task_of(rest: &str) -> Option<ConnectorTaskId> {
    let (name, id) = rest.rsplit_once('-')?;
    Some(ConnectorTaskId::new(name, id.parse().ok()?))
}

/// One record of the topic into the statuses.
fn read(topic: &str, statuses: &Mutex<Statuses>, record: Record<'_>) {
    let key = record
        .key
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .unwrap_or_default();
    let value = match record.value.map(decode) {
        None => None,
        Some(Ok(v)) => Some(v),
        Some(Err(e)) => {
            tracing::warn!(topic = %topic, key = %key, "status record skipped: {e}");
            return;
        }
    };
    let mut statuses = statuses.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(name) = key.strip_prefix(CONNECTOR) {
        match value {
            None => {
                statuses.connectors.remove(name);
            }
            Some(v) if may_read(statuses.connectors.get(name), &v) => {
                statuses.connectors.insert(name.to_owned(), v);
            }
            Some(_) => {}
        }
    } else if let Some(id) = key.strip_prefix(TASK).and_then(task_of) {
        match value {
            None => {
                statuses.tasks.remove(&id);
            }
            Some(v) if may_read(statuses.tasks.get(&id), &v) => {
                statuses.tasks.insert(id, v);
            }
            Some(_) => {}
        }
    }
    // Other keys (Connect's topic statuses) are not ours.
}

impl StatusStore for KafkaStatusStore {
    fn put_connector(&self, name: &str, status: StoredStatus) {
        let new = self.versioned(status);
        {
            let mut statuses = self.lock();
            if !may_write(statuses.connectors.get(name), &new) {
                return;
            }
            statuses.connectors.insert(name.to_owned(), new.clone());
        }
        self.send(format!("{CONNECTOR}{name}"), Some(encode(&new)));
    }

    fn put_task(&self, id: &ConnectorTaskId, status: StoredStatus) {
        let new = self.versioned(status);
        {
            let mut statuses = self.lock();
            if !may_write(statuses.tasks.get(id), &new) {
                return;
            }
            statuses.tasks.insert(id.clone(), new.clone());
        }
        self.send(
            format!("{TASK}{}-{}", id.connector, id.task),
            Some(encode(&new)),
        );
    }

    fn connector(&self, name: &str) -> Option<StoredStatus> {
        self.lock().connectors.get(name).map(|v| v.status.clone())
    }

    fn task(&self, id: &ConnectorTaskId) -> Option<StoredStatus> {
        self.lock().tasks.get(id).map(|v| v.status.clone())
    }

    fn remove_task(&self, id: &ConnectorTaskId) {
        self.lock().tasks.remove(id);
        self.send(format!("{TASK}{}-{}", id.connector, id.task), None);
    }

    fn remove_connector(&self, name: &str) {
        let tasks: Vec<ConnectorTaskId> = {
            let mut statuses = self.lock();
            statuses.connectors.remove(name);
            let tasks = statuses
                .tasks
                .keys()
                .filter(|id| id.connector == name)
                .cloned()
                .collect();
            statuses.tasks.retain(|id, _| id.connector != name);
            tasks
        };
        self.send(format!("{CONNECTOR}{name}"), None);
        for id in tasks {
            self.send(format!("{TASK}{}-{}", id.connector, id.task), None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: &'static str, worker: &str, generation: i32) -> Versioned {
        Versioned {
            status: StoredStatus {
                state,
                trace: None,
                worker_id: worker.into(),
            },
            generation,
        }
    }

    #[test]
    fn generations_settle_who_is_right() {
        let running = status("RUNNING", "a:8083", 5);
        // Another worker's write of an older generation is stale; the same worker's is not.
        assert!(!may_write(Some(&running), &status("FAILED", "b:8083", 4)));
        assert!(may_write(Some(&running), &status("FAILED", "b:8083", 5)));
        assert!(may_write(Some(&running), &status("PAUSED", "a:8083", 1)));
        assert!(may_write(None, &status("FAILED", "b:8083", 0)));
        // An UNASSIGNED read back does not hide a RUNNING of its generation or later.
        assert!(!may_read(
            Some(&running),
            &status("UNASSIGNED", "b:8083", 5)
        ));
        assert!(may_read(Some(&running), &status("UNASSIGNED", "b:8083", 6)));
        assert!(may_read(Some(&running), &status("FAILED", "b:8083", 1)));
    }

    #[test]
    fn values_are_kafka_connects() {
        let mut v = status("FAILED", "a:8083", 3);
        v.status.trace = Some("boom".into());
        assert_eq!(
            encode(&v),
            r#"{"generation":3,"state":"FAILED","trace":"boom","worker_id":"a:8083"}"#
        );
        assert_eq!(decode(encode(&v).as_bytes()), Ok(v));
        let connects = br#"{"state":"RUNNING","trace":null,"worker_id":"w:8083","generation":7}"#;
        assert_eq!(decode(connects), Ok(status("RUNNING", "w:8083", 7)));
        assert!(decode(br#"{"state":"DESTROYED"}"#).is_err());
        assert_eq!(
            task_of("my-conn-12"),
            Some(ConnectorTaskId::new("my-conn", 12))
        );
        assert_eq!(task_of("nodash"), None);
    }
}
