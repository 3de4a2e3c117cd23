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
}

/// The config topic as a [`ConfigLog`].
pub struct KafkaConfigLog {
    shared: Arc<Shared>,
    producer: FutureProducer<TracingContext>,
    /// Whether this log may write: the leader's, whose every append is a transaction.
    transactional: bool,
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
        let extra: Vec<(&str, &str)> = transactional_id
            .map(|id| ("transactional.id", id))
            .into_iter()
            .collect();
        let producer = super::state_producer(
            bootstrap,
            producer,
            &format!("{client_id}-configs"),
            &extra,
            "config topic producer",
        )?;
        if transactional_id.is_some() {
            producer.init_transactions(TIMEOUT).map_err(|e| {
                format!("cannot become the writer of the config topic {topic}: {e}")
            })?;
        }
        let shared = Arc::new(Shared {
            topic: topic.to_owned(),
            state: Mutex::new(ConfigState::default()),
            subscribers: Mutex::new(Vec::new()),
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
        Ok(Self {
            shared,
            producer,
            transactional: transactional_id.is_some(),
            writing: tokio::sync::Mutex::new(()),
            follower,
        })
    }

    /// The Kafka offset the reader has read up to (the next one to read): what this worker
    /// reports in its join metadata.
    pub fn position(&self) -> i64 {
        self.follower.position(0)
    }
}

/// One record of the topic, read: into the state and to subscribers, if it completes anything.
fn apply(shared: &Shared, reader: &mut Reader, record: Record<'_>) {
    let key = record
        .key
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .unwrap_or_default();
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
            let topic = self.shared.topic.clone();
            let failed = |e: String| format!("cannot write to the config topic {topic}: {e}");
            if !self.transactional {
                // Only the group's leader writes, in transactions (all or nothing, fenced).
                return Err(failed(
                    "this worker opened it to read only (worker bug: writes go through the leader)"
                        .into(),
                ));
            }
            // One transaction at a time on the producer; appends are rare.
            let _writing = self.writing.lock().await;
            let producer = self.producer.clone();
            tokio::task::spawn_blocking(move || producer.begin_transaction())
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
                    match self.producer.send_result(produced) {
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
                let producer = self.producer.clone();
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
                        Err(_) => {
                            outcome = outcome.and(Err(failed("the producer went away".into())))
                        }
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
                let producer = self.producer.clone();
                let _ =
                    tokio::task::spawn_blocking(move || producer.abort_transaction(TIMEOUT)).await;
                return Err(e);
            }
            Ok(events)
        })
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
