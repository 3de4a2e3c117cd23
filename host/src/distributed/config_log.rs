//! The config log on Kafka: [`ConfigLog`] over the config topic (one partition, compacted),
//! in Kafka Connect's record format ([`super::config_topic`]). Every worker reads the whole
//! topic from the beginning and follows it; an append is produced (idempotent, `acks=all`, in
//! order on the one partition) and its events reach subscribers when the records are read
//! back, as Kafka Connect's herder learns of its own writes through its config store's
//! callbacks.
//!
//! Offsets: an event's offset is the Kafka offset of the record that completes it, plus one
//! (the commit record for a split), so offsets start at 1 and grow, with gaps.
//!
//! Invariants: events reach subscribers in offset order, each once; [`ConfigLog::read`]
//! returns the state as of the end of the topic when it was called (it waits for the reader
//! to get there).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use tokio::sync::mpsc;

use super::config_topic::{Reader, encode};
use super::follower::{Follower, Record};
use crate::kafka::TracingContext;
use crate::storage::{ConfigEvent, ConfigLog, ConfigRecord, ConfigState};

/// How long a transaction's start, commit or abort may take.
const TIMEOUT: Duration = super::WRITE_TIMEOUT;

/// What the follower's callback and the log share.
struct Shared {
    topic: String,
    state: Mutex<ConfigState>,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<ConfigEvent>>>,
    /// The last session key read (Kafka Connect's `session-key` record): what requests
    /// between workers are signed with.
    session_key: Mutex<Option<Vec<u8>>>,
}

/// The config topic's key of the session key record (Kafka Connect's).
const SESSION_KEY: &str = "session-key";

/// The config topic as a [`ConfigLog`].
pub struct KafkaConfigLog {
    shared: Arc<Shared>,
    /// The transactional producer while this worker is the writer (the group's leader), whose
    /// every append is a transaction; `None` otherwise (appends are refused).
    writer: std::sync::Mutex<Option<FutureProducer<TracingContext>>>,
    /// What a writer's producer is made from: bootstrap, settings, client id.
    bootstrap: String,
    producer_settings: Vec<(String, String)>,
    client_id: String,
    /// Held for a whole append: one transaction at a time.
    writing: tokio::sync::Mutex<()>,
    follower: Follower,
}

impl KafkaConfigLog {
    /// Start reading `topic` (which must exist, with one partition) from the beginning with
    /// clients made from `consumer` and `producer` settings (librdkafka's terms, the worker's
    /// security included). Only with a `transactional_id` may it append: every append is one
    /// transaction, all of it stored or none, and opening fences any earlier writer with the
    /// same id (a deposed leader's late writes fail); this blocks until the broker has fenced
    /// it.
    pub fn open(
        bootstrap: &str,
        topic: &str,
        producer: &[(String, String)],
        consumer: &[(String, String)],
        client_id: &str,
        transactional_id: Option<&str>,
    ) -> Result<Self, String> {
        let shared = Arc::new(Shared {
            topic: topic.to_owned(),
            state: Mutex::new(ConfigState::default()),
            subscribers: Mutex::new(Vec::new()),
            session_key: Mutex::new(None),
        });
        let mut reader = Reader::default();
        let follower = {
            let shared = Arc::clone(&shared);
            Follower::start(
                bootstrap,
                topic,
                &[0],
                consumer,
                &format!("{client_id}-configs"),
                move |record| apply(&shared, &mut reader, record),
            )?
        };
        let log = Self {
            shared,
            writer: std::sync::Mutex::new(None),
            bootstrap: bootstrap.to_owned(),
            producer_settings: producer.to_vec(),
            client_id: client_id.to_owned(),
            writing: tokio::sync::Mutex::new(()),
            follower,
        };
        if let Some(id) = transactional_id {
            log.become_writer(id)?;
        }
        Ok(log)
    }

    /// Become the topic's writer with transactional id `id` (blocking until the broker has
    /// fenced any earlier writer with that id, whose later writes then fail). Replaces this
    /// log's own earlier producer, if any.
    pub fn become_writer(&self, id: &str) -> Result<(), String> {
        let topic = &self.shared.topic;
        let producer = super::state_producer(
            &self.bootstrap,
            &self.producer_settings,
            &format!("{}-configs", self.client_id),
            &[("transactional.id", id)],
            "config topic producer",
        )?;
        producer
            .init_transactions(TIMEOUT)
            .map_err(|e| format!("cannot become the writer of the config topic {topic}: {e}"))?;
        *self.writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(producer);
        Ok(())
    }

    /// Stop being the writer (leadership moved): appends are refused from now on.
    pub fn stop_writing(&self) {
        self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// Whether this log is the topic's writer.
    pub fn is_writer(&self) -> bool {
        self.producer().is_some()
    }

    /// The writer's producer, while this log is the writer.
    fn producer(&self) -> Option<FutureProducer<TracingContext>> {
        self.writer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The session key read last, if any.
    pub fn session_key(&self) -> Option<Vec<u8>> {
        self.shared
            .session_key
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Store `key` as the group's session key (Kafka Connect's `session-key` record: base64
    /// key, algorithm, creation time), in a transaction; only the writer can.
    pub async fn write_session_key(&self, key: &[u8]) -> Result<(), String> {
        use base64::Engine;
        let topic = self.shared.topic.clone();
        let failed = |e: String| format!("cannot write the session key to {topic}: {e}");
        let _writing = self.writing.lock().await;
        let Some(producer) = self.producer() else {
            return Err(failed("this worker is not the writer".into()));
        };
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let value = serde_json::json!({
            "key": base64::engine::general_purpose::STANDARD.encode(key),
            "algorithm": "HmacSHA256",
            "creation-timestamp": created,
        })
        .to_string();
        let to = topic.clone();
        tokio::task::spawn_blocking(move || {
            producer.begin_transaction()?;
            let sent = producer.send_result(
                FutureRecord::to(&to)
                    .partition(0)
                    .key(SESSION_KEY)
                    .payload(value.as_bytes()),
            );
            if let Err((e, _)) = sent {
                let _ = producer.abort_transaction(TIMEOUT);
                return Err(e);
            }
            producer.commit_transaction(TIMEOUT)
        })
        .await
        .map_err(|e| failed(e.to_string()))?
        .map_err(|e| failed(e.to_string()))
    }

    /// The state as read so far, without waiting for the end of the topic.
    pub fn snapshot(&self) -> ConfigState {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The Kafka offset the reader has read up to (the next one to read): what this worker
    /// reports in its join metadata.
    pub fn position(&self) -> i64 {
        self.follower.position(0)
    }
}

impl KafkaConfigLog {
    /// Append `records` if `check` accepts the state as of everything stored before them:
    /// the topic is read to its end under the writer's lock, so no append of this writer
    /// comes between the check and the write (the writer is the only one).
    pub async fn append_checked(
        &self,
        records: Vec<ConfigRecord>,
        check: impl FnOnce(&ConfigState) -> Result<(), String>,
    ) -> Result<Vec<ConfigEvent>, String> {
        let writing = self.writing.lock().await;
        crate::kafka::blocking(|| self.follower.read_to_end())?;
        check(&self.snapshot())?;
        self.transact(records, writing).await
    }

    /// Store `records` in one transaction; `_writing` is the writer's lock, held throughout.
    /// A failure drops the producer (a fenced or broken one cannot go on); the leader claims
    /// the writer again.
    async fn transact(
        &self,
        records: Vec<ConfigRecord>,
        _writing: tokio::sync::MutexGuard<'_, ()>,
    ) -> Result<Vec<ConfigEvent>, String> {
        let topic = self.shared.topic.clone();
        let failed = |e: String| format!("cannot write to the config topic {topic}: {e}");
        let Some(producer) = self.producer() else {
            // Only the group's leader writes, in transactions (all or nothing, fenced).
            return Err(failed(
                "this worker is not the group's leader, which alone writes it; try again".into(),
            ));
        };
        let begin = producer.clone();
        tokio::task::spawn_blocking(move || begin.begin_transaction())
            .await
            .map_err(|e| failed(e.to_string()))?
            .map_err(|e| failed(e.to_string()))?;
        let mut sent = Vec::new();
        let mut outcome = Ok(());
        'records: for record in &records {
            let encoded = encode(record);
            let last = encoded.len().saturating_sub(1);
            let mut deliveries = Vec::new();
            for (key, value) in &encoded {
                let mut produced = FutureRecord::to(&topic).partition(0).key(key.as_str());
                if let Some(value) = value {
                    produced = produced.payload(value.as_slice());
                }
                match producer.send_result(produced) {
                    Ok(delivery) => deliveries.push(delivery),
                    Err((e, _)) => {
                        outcome = Err(failed(e.to_string()));
                        break 'records;
                    }
                }
            }
            // The record that completes it: a split's commit, a removal's first
            // tombstone (see `encode`).
            let completing = match record {
                ConfigRecord::Tasks { .. } => last,
                _ => 0,
            };
            sent.push((deliveries, completing));
        }
        if outcome.is_ok() {
            let producer = producer.clone();
            outcome = tokio::task::spawn_blocking(move || producer.commit_transaction(TIMEOUT))
                .await
                .map_err(|e| failed(e.to_string()))
                .and_then(|r| r.map_err(|e| failed(e.to_string())));
        }
        let mut events = Vec::with_capacity(records.len());
        for ((deliveries, completing), record) in sent.into_iter().zip(records) {
            let mut offset = None;
            for (i, delivery) in deliveries.into_iter().enumerate() {
                match delivery.await {
                    Ok(Ok(delivered)) if i == completing => offset = Some(delivered.offset),
                    Ok(Ok(_)) => {}
                    Ok(Err((e, _))) => outcome = outcome.and(Err(failed(e.to_string()))),
                    Err(_) => outcome = outcome.and(Err(failed("the producer went away".into()))),
                }
            }
            if let Some(offset) = offset {
                events.push(ConfigEvent {
                    offset: u64::try_from(offset + 1).unwrap_or(0),
                    record,
                });
            }
        }
        if let Err(e) = outcome {
            let _ = tokio::task::spawn_blocking(move || producer.abort_transaction(TIMEOUT)).await;
            self.stop_writing();
            return Err(e);
        }
        Ok(events)
    }
}

/// One record of the topic, read: into the state and to subscribers, if it completes anything.
fn apply(shared: &Shared, reader: &mut Reader, record: Record<'_>) {
    let key = record
        .key
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .unwrap_or_default();
    if key == SESSION_KEY {
        use base64::Engine;
        let read = record
            .value
            .and_then(|v| serde_json::from_slice::<serde_json::Value>(v).ok())
            .and_then(|v| v.get("key").and_then(|k| k.as_str()).map(str::to_owned))
            .and_then(|k| base64::engine::general_purpose::STANDARD.decode(k).ok());
        match read {
            Some(k) => *shared.session_key.lock().unwrap_or_else(|e| e.into_inner()) = Some(k),
            None => {
                tracing::warn!(topic = %shared.topic, "the session key record at offset {} is not readable; skipped", record.offset)
            }
        }
        return;
    }
    match reader.read(&key, record.value) {
        Ok(Some(stored)) => {
            let event = ConfigEvent {
                offset: u64::try_from(record.offset + 1).unwrap_or(0),
                record: stored,
            };
            shared
                .state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .apply(&event);
            shared
                .subscribers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|s| s.send(event.clone()).is_ok());
        }
        Ok(None) => {}
        Err(skipped) => {
            tracing::warn!(topic = %shared.topic, key = %skipped.key, "config topic record at offset {} skipped: {}", record.offset, skipped.why);
        }
    }
}

impl ConfigLog for KafkaConfigLog {
    fn read(&self) -> Result<ConfigState, String> {
        crate::kafka::blocking(|| self.follower.read_to_end())?;
        Ok(self
            .shared
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone())
    }

    fn append(
        &self,
        records: Vec<ConfigRecord>,
    ) -> BoxFuture<'_, Result<Vec<ConfigEvent>, String>> {
        Box::pin(async move {
            // One transaction at a time on the producer; appends are rare.
            let writing = self.writing.lock().await;
            self.transact(records, writing).await
        })
    }

    fn current(&self) -> Result<ConfigState, String> {
        Ok(self.snapshot())
    }

    fn subscribe(&self) -> mpsc::UnboundedReceiver<ConfigEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.shared
            .subscribers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tx);
        rx
    }
}
