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

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;

use super::config_topic::{Reader, encode};
use crate::kafka::TracingContext;
use crate::storage::{ConfigEvent, ConfigLog, ConfigRecord, ConfigState};

/// How long a write or a read to the end may take before it is an error that names the topic.
const TIMEOUT: Duration = Duration::from_secs(30);

/// What the reader thread and the log share.
struct Shared {
    topic: String,
    state: Mutex<ConfigState>,
    /// The next Kafka offset to read (-1 until the reader has an assignment).
    position: AtomicI64,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<ConfigEvent>>>,
    stop: AtomicBool,
}

/// The config topic as a [`ConfigLog`].
pub struct KafkaConfigLog {
    shared: Arc<Shared>,
    producer: FutureProducer<TracingContext>,
    /// Whether this log may write: the leader's, whose every append is a transaction.
    transactional: bool,
    /// Held for a whole append: one transaction at a time.
    writing: tokio::sync::Mutex<()>,
    /// For reading the end offset.
    watermarks: BaseConsumer<TracingContext>,
    reader: Option<std::thread::JoinHandle<()>>,
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
        let mut config = crate::kafka::base_config(bootstrap, &format!("{client_id}-configs"));
        crate::kafka::apply(&mut config, producer);
        config
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("message.timeout.ms", TIMEOUT.as_millis().to_string());
        if let Some(id) = transactional_id {
            config.set("transactional.id", id);
        }
        let producer: FutureProducer<TracingContext> =
            crate::kafka::clients::create(&config, TracingContext, "config topic producer")?;
        if transactional_id.is_some() {
            producer.init_transactions(TIMEOUT).map_err(|e| {
                format!("cannot become the writer of the config topic {topic}: {e}")
            })?;
        }
        let consumer_config = |suffix: &str| {
            let mut config =
                crate::kafka::base_config(bootstrap, &format!("{client_id}-configs{suffix}"));
            crate::kafka::apply(&mut config, consumer);
            // Assigned, never subscribed: no group is joined; the id is librdkafka's need.
            config
                .set("group.id", format!("{client_id}-configs"))
                .set("enable.auto.commit", "false")
                .set("enable.partition.eof", "false")
                .set("isolation.level", "read_committed");
            config
        };
        let reading: BaseConsumer<TracingContext> = crate::kafka::clients::create(
            &consumer_config(""),
            TracingContext,
            "config topic reader",
        )?;
        let watermarks: BaseConsumer<TracingContext> = crate::kafka::clients::create(
            &consumer_config("-end"),
            TracingContext,
            "config topic reader",
        )?;
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(topic, 0, Offset::Beginning)
            .map_err(|e| e.to_string())?;
        reading
            .assign(&assignment)
            .map_err(|e| format!("cannot read the config topic {topic}: {e}"))?;
        let shared = Arc::new(Shared {
            topic: topic.to_owned(),
            state: Mutex::new(ConfigState::default()),
            position: AtomicI64::new(0),
            subscribers: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let reader = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("config-topic".into())
                .spawn(move || follow(reading, shared))
                .map_err(|e| e.to_string())?
        };
        Ok(Self {
            shared,
            producer,
            transactional: transactional_id.is_some(),
            writing: tokio::sync::Mutex::new(()),
            watermarks,
            reader: Some(reader),
        })
    }

    /// The Kafka offset the reader has read up to (the next one to read): what this worker
    /// reports in its join metadata.
    pub fn position(&self) -> i64 {
        self.shared.position.load(Ordering::Acquire)
    }

    /// Wait until the reader has read everything written before this call.
    pub fn read_to_end(&self) -> Result<(), String> {
        let topic = &self.shared.topic;
        let (_, high) = self
            .watermarks
            .fetch_watermarks(topic, 0, TIMEOUT)
            .map_err(|e| format!("cannot read the end of the config topic {topic}: {e}"))?;
        let deadline = std::time::Instant::now() + TIMEOUT;
        while self.position() < high {
            if std::time::Instant::now() > deadline {
                return Err(format!(
                    "the config topic {topic} was not read to its end (offset {high}) within {} s; is the broker answering?",
                    TIMEOUT.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }
}

impl Drop for KafkaConfigLog {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// The reader thread: every record of the topic, in order, into the state and to subscribers.
fn follow(consumer: BaseConsumer<TracingContext>, shared: Arc<Shared>) {
    let mut reader = Reader::default();
    while !shared.stop.load(Ordering::Acquire) {
        let Some(message) = consumer.poll(Duration::from_millis(100)) else {
            // Idle, so everything delivered is applied: the consumer's position is how far
            // this worker has read. Transaction markers take offsets but are never delivered,
            // so the end of the topic can be past the last record's offset plus one.
            if let Some(next) = consumer
                .position()
                .ok()
                .and_then(|p| p.elements().first().map(|e| e.offset()))
                .and_then(|o| o.to_raw())
            {
                shared.position.fetch_max(next, Ordering::AcqRel);
            }
            continue;
        };
        let message = match message {
            Ok(message) => message,
            Err(e) => {
                tracing::warn!(topic = %shared.topic, "reading the config topic: {e}");
                continue;
            }
        };
        let offset = message.offset();
        let key = message
            .key()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .unwrap_or_default();
        match reader.read(&key, message.payload()) {
            Ok(Some(record)) => {
                let event = ConfigEvent {
                    offset: u64::try_from(offset + 1).unwrap_or(0),
                    record,
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
                tracing::warn!(topic = %shared.topic, key = %skipped.key, "config topic record at offset {offset} skipped: {}", skipped.why);
            }
        }
        shared.position.fetch_max(offset + 1, Ordering::AcqRel);
    }
}

impl ConfigLog for KafkaConfigLog {
    fn read(&self) -> Result<ConfigState, String> {
        crate::kafka::blocking(|| self.read_to_end())?;
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
