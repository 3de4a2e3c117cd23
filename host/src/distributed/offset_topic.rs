//! Source offsets on Kafka: [`OffsetStore`] over the offsets topic (compacted, many
//! partitions), Kafka Connect's format (`KafkaOffsetBackingStore`): the key is the JSON
//! `["<connector>",{<source partition>}]`, the value the offset's JSON, a tombstone removes it.
//! Records are partitioned by key with Java's murmur2 (librdkafka's `murmur2_random`), so a key
//! lands where a Java worker puts it, and compaction keeps its last value.
//!
//! Every worker follows the whole topic into memory; a task that moves to another worker
//! resumes from what its previous owner committed, once the new owner has read to the end.
//!
//! Invariants: keys are compared as parsed JSON (Java writes a partition's fields in its
//! HashMap's order), through the store's canonical [`key`]; a commit returns only once every
//! record is acknowledged by the broker (`acks=all`), and is visible to this worker's reads at
//! once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::Value;

use super::follower::{Follower, Record};
use crate::kafka::TracingContext;
use crate::offsets::OffsetStore;
use crate::offsets::store::key;

/// Offsets by canonical key (`["<connector>",{...}]`, fields sorted).
type Offsets = BTreeMap<String, Value>;

/// The offsets topic as an [`OffsetStore`].
pub struct KafkaOffsetStore {
    topic: String,
    producer: FutureProducer<TracingContext>,
    offsets: Arc<Mutex<Offsets>>,
    follower: Follower,
}

impl KafkaOffsetStore {
    /// Follow `topic` (which must exist) from its beginning, and write to it, with clients made
    /// from `producer` and `consumer` settings (librdkafka's terms); returns once what the
    /// topic held has been read.
    pub fn open(
        bootstrap: &str,
        topic: &str,
        producer: &[(String, String)],
        consumer: &[(String, String)],
        client_id: &str,
    ) -> Result<Self, String> {
        let (producer, offsets, follower) = super::open_keyed(
            bootstrap,
            topic,
            producer,
            consumer,
            &format!("{client_id}-offsets"),
            "offsets topic",
            read,
        )?;
        Ok(Self {
            topic: topic.to_owned(),
            producer,
            offsets,
            follower,
        })
    }

    /// Wait until every offset written before this call (by any worker) is read.
    pub fn read_to_end(&self) -> Result<(), String> {
        crate::kafka::blocking(|| self.follower.read_to_end())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Offsets> {
        self.offsets.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Write `changes` (canonical key, key as written, offset or tombstone) and wait for the
    /// broker's acknowledgements; then apply them here.
    async fn write(&self, changes: Vec<(String, Option<Value>)>) -> Result<(), String> {
        let topic = &self.topic;
        let mut deliveries = Vec::with_capacity(changes.len());
        let encoded: Vec<(String, Option<String>)> = changes
            .iter()
            .map(|(k, v)| (k.clone(), v.as_ref().map(Value::to_string)))
            .collect();
        for (k, v) in &encoded {
            let mut record = FutureRecord::to(topic).key(k.as_str());
            if let Some(v) = v {
                record = record.payload(v.as_str());
            }
            let delivery = self
                .producer
                .send_result(record)
                .map_err(|(e, _)| format!("cannot write offsets to {topic}: {e}"))?;
            deliveries.push(delivery);
        }
        for delivery in deliveries {
            match delivery.await {
                Ok(Ok(_)) => {}
                Ok(Err((e, _))) => return Err(format!("cannot write offsets to {topic}: {e}")),
                Err(_) => {
                    return Err(format!(
                        "cannot write offsets to {topic}: the producer went away"
                    ));
                }
            }
        }
        let mut offsets = self.lock();
        for (k, v) in changes {
            match v {
                Some(v) => offsets.insert(k, v),
                None => offsets.remove(&k),
            };
        }
        Ok(())
    }
}

/// One record of the topic into the offsets.
fn read(topic: &str, offsets: &Mutex<Offsets>, record: Record<'_>) {
    let parsed = record
        .key
        .and_then(|k| serde_json::from_slice::<Value>(k).ok())
        .and_then(|k| match k.as_array().map(Vec::as_slice) {
            Some([Value::String(connector), partition]) => Some(key(connector, partition)),
            _ => None,
        });
    let Some(canonical) = parsed else {
        tracing::warn!(topic = %topic, "offset record at partition {} offset {} skipped: its key is not [\"<connector>\", {{partition}}]", record.partition, record.offset);
        return;
    };
    let mut offsets = offsets.lock().unwrap_or_else(|e| e.into_inner());
    match record.value.map(serde_json::from_slice::<Value>) {
        None => {
            offsets.remove(&canonical);
        }
        Some(Ok(value)) => {
            offsets.insert(canonical, value);
        }
        Some(Err(e)) => {
            tracing::warn!(topic = %topic, "offset record at partition {} offset {} skipped: its value is not JSON: {e}", record.partition, record.offset);
        }
    }
}

/// The connector of a canonical key.
fn connector_of(key: &str) -> Option<String> {
    let parsed: Value = serde_json::from_str(key).ok()?;
    parsed[0].as_str().map(str::to_owned)
}

impl OffsetStore for KafkaOffsetStore {
    fn commit<'a>(
        &'a self,
        connector: &'a str,
        offsets: &'a [(String, String)],
        max_partitions: usize,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let changes: Vec<(String, Option<Value>)> =
                crate::offsets::parse_commit(connector, offsets)?
                    .into_iter()
                    .map(|(k, v)| (k, Some(v)))
                    .collect();
            if max_partitions != usize::MAX {
                let held = self.lock();
                let stored = held
                    .keys()
                    .filter(|k| connector_of(k).as_deref() == Some(connector))
                    .count();
                let new = changes
                    .iter()
                    .filter(|(k, _)| !held.contains_key(k))
                    .count();
                crate::offsets::check_partition_limit(connector, stored, new, max_partitions)?;
            }
            self.write(changes).await
        })
    }

    fn offset(&self, connector: &str, partition: &Value) -> Option<Value> {
        self.lock().get(&key(connector, partition)).cloned()
    }

    fn offsets_of(&self, connector: &str) -> Vec<(Value, Value)> {
        self.lock()
            .iter()
            .filter_map(|(k, v)| {
                let key: Value = serde_json::from_str(k).ok()?;
                (key[0].as_str() == Some(connector)).then(|| (key[1].clone(), v.clone()))
            })
            .collect()
    }

    fn alter<'a>(
        &'a self,
        connector: &'a str,
        changes: &'a [(Value, Option<Value>)],
    ) -> BoxFuture<'a, Result<(), String>> {
        let changes = changes
            .iter()
            .map(|(p, o)| (key(connector, p), o.clone()))
            .collect();
        Box::pin(self.write(changes))
    }
}
