//! Connector offsets over REST (KIP-875): read them, and, while the connector is STOPPED, alter
//! or reset them. Source offsets live in the worker's offset store; sink offsets are the
//! consumer group `connect-<name>`'s committed offsets, in Kafka Connect's
//! `kafka_topic` / `kafka_partition` / `kafka_offset` form.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{Value, json};

use super::{Herder, HerderError, TargetState, not_found};
use crate::kafka::TracingContext;
use crate::plugin::World;

const TIMEOUT: Duration = Duration::from_secs(15);

impl Herder {
    /// `GET /connectors/{name}/offsets`.
    pub async fn offsets(&self, name: &str) -> Result<Value, HerderError> {
        let (kind, topics) = self.kind_and_topics(name).await?;
        let offsets: Vec<Value> = match kind {
            World::Source => self
                .shared
                .offsets
                .offsets_of(name)
                .into_iter()
                .map(|(partition, offset)| json!({"partition": partition, "offset": offset}))
                .collect(),
            World::Sink => {
                let consumer = self.group_client(name)?;
                tokio::task::spawn_blocking(move || committed(&consumer, &topics))
                    .await
                    .map_err(|e| HerderError::Internal(e.to_string()))??
                    .into_iter()
                    .map(|(topic, partition, offset)| {
                        json!({
                            "partition": {"kafka_topic": topic, "kafka_partition": partition},
                            "offset": {"kafka_offset": offset}
                        })
                    })
                    .collect()
            }
        };
        Ok(json!({ "offsets": offsets }))
    }

    /// `PATCH /connectors/{name}/offsets` with `{"offsets": [{"partition": .., "offset": ..}]}`.
    pub async fn alter_offsets(&self, name: &str, body: &Value) -> Result<Value, HerderError> {
        let (kind, _) = self.kind_and_topics(name).await?;
        self.require_stopped(name).await?;
        let entries = body
            .get("offsets")
            .and_then(Value::as_array)
            .filter(|entries| !entries.is_empty())
            .ok_or_else(|| {
                HerderError::BadRequest(
                    "the body must be {\"offsets\": [{\"partition\": {...}, \"offset\": {...}}]} with at least one entry".into(),
                )
            })?;
        match kind {
            World::Source => {
                let mut changes = Vec::new();
                for e in entries {
                    let partition =
                        e.get("partition")
                            .filter(|p| p.is_object())
                            .ok_or_else(|| {
                                HerderError::BadRequest(
                                    "every entry needs a \"partition\" object".into(),
                                )
                            })?;
                    let offset = match e.get("offset") {
                        None | Some(Value::Null) => None,
                        Some(o) if o.is_object() => Some(o.clone()),
                        Some(_) => {
                            return Err(HerderError::BadRequest(
                                "an \"offset\" must be an object or null".into(),
                            ));
                        }
                    };
                    changes.push((partition.clone(), offset));
                }
                self.shared
                    .offsets
                    .alter(name, &changes)
                    .map_err(HerderError::Internal)?;
            }
            World::Sink => {
                let mut tpl = TopicPartitionList::new();
                for e in entries {
                    let topic = e["partition"]["kafka_topic"].as_str();
                    let partition = e["partition"]["kafka_partition"].as_i64();
                    let offset = e["offset"]["kafka_offset"].as_i64();
                    match (topic, partition, offset) {
                        (Some(t), Some(p), Some(o)) if o >= 0 => {
                            tpl.add_partition_offset(t, p as i32, Offset::Offset(o))
                                .map_err(|e| HerderError::BadRequest(e.to_string()))?;
                        }
                        _ => {
                            return Err(HerderError::BadRequest(
                                "sink offsets look like {\"partition\": {\"kafka_topic\": \"t\", \"kafka_partition\": 0}, \"offset\": {\"kafka_offset\": 42}}".into(),
                            ));
                        }
                    }
                }
                let consumer = self.group_client(name)?;
                tokio::task::spawn_blocking(move || consumer.commit(&tpl, CommitMode::Sync))
                    .await
                    .map_err(|e| HerderError::Internal(e.to_string()))?
                    .map_err(|e| {
                        HerderError::Internal(format!("cannot commit the offsets: {e}"))
                    })?;
            }
        }
        Ok(json!({"message": "The offsets for this connector have been altered successfully"}))
    }

    /// `DELETE /connectors/{name}/offsets`.
    pub async fn reset_offsets(&self, name: &str) -> Result<Value, HerderError> {
        let (kind, _) = self.kind_and_topics(name).await?;
        self.require_stopped(name).await?;
        match kind {
            World::Source => self
                .shared
                .offsets
                .reset(name)
                .map_err(HerderError::Internal)?,
            World::Sink => {
                let mut config =
                    crate::kafka::base_config(&self.shared.bootstrap, "wasm-connect-admin");
                crate::kafka::apply(&mut config, &self.shared.config.admin);
                let admin: AdminClient<TracingContext> = config
                    .create_with_context(TracingContext)
                    .map_err(|e| HerderError::Internal(e.to_string()))?;
                let group = format!("connect-{name}");
                let results = admin
                    .delete_groups(
                        &[group.as_str()],
                        &AdminOptions::new().operation_timeout(Some(TIMEOUT)),
                    )
                    .await
                    .map_err(|e| {
                        HerderError::Internal(format!("cannot delete group {group}: {e}"))
                    })?;
                for r in results {
                    match r {
                        Ok(_) | Err((_, rdkafka::types::RDKafkaErrorCode::GroupIdNotFound)) => {}
                        Err((_, code)) => {
                            return Err(HerderError::Internal(format!(
                                "cannot delete group {group}: {code}"
                            )));
                        }
                    }
                }
            }
        }
        Ok(json!({"message": "The offsets for this connector have been reset successfully"}))
    }

    async fn kind_and_topics(&self, name: &str) -> Result<(World, Vec<String>), HerderError> {
        let connectors = self.connectors.lock().await;
        let entry = connectors.get(name).ok_or_else(|| not_found(name))?;
        let kind = entry.kind().ok_or_else(|| {
            HerderError::BadRequest(format!("connector {name} has no valid config"))
        })?;
        let mut topics: Vec<String> = entry
            .topics
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect();
        if let Some(list) = entry.config.get("topics") {
            for t in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                if !topics.iter().any(|x| x == t) {
                    topics.push(t.to_owned());
                }
            }
        }
        Ok((kind, topics))
    }

    async fn require_stopped(&self, name: &str) -> Result<(), HerderError> {
        self.until_started().await;
        let connectors = self.connectors.lock().await;
        let entry = connectors.get(name).ok_or_else(|| not_found(name))?;
        if entry.target != TargetState::Stopped {
            return Err(HerderError::BadRequest(format!(
                "Connectors must be in the STOPPED state before their offsets can be modified; stop {name} first (PUT /connectors/{name}/stop)"
            )));
        }
        Ok(())
    }

    fn group_client(&self, name: &str) -> Result<BaseConsumer<TracingContext>, HerderError> {
        let mut config = crate::kafka::base_config(&self.shared.bootstrap, "wasm-connect-offsets");
        config
            .set("group.id", format!("connect-{name}"))
            .set("enable.auto.commit", "false");
        crate::kafka::apply(&mut config, &self.shared.config.consumer);
        config
            .create_with_context(TracingContext)
            .map_err(|e| HerderError::Internal(format!("cannot create a Kafka client: {e}")))
    }
}

/// The group's committed offsets for every partition of `topics`.
fn committed(
    consumer: &BaseConsumer<TracingContext>,
    topics: &[String],
) -> Result<Vec<(String, i32, i64)>, HerderError> {
    let mut tpl = TopicPartitionList::new();
    for topic in topics {
        let metadata = consumer
            .fetch_metadata(Some(topic), TIMEOUT)
            .map_err(|e| HerderError::Internal(format!("cannot read metadata of {topic}: {e}")))?;
        for t in metadata.topics() {
            for p in t.partitions() {
                tpl.add_partition(t.name(), p.id());
            }
        }
    }
    if tpl.count() == 0 {
        return Ok(Vec::new());
    }
    let committed = consumer
        .committed_offsets(tpl, TIMEOUT)
        .map_err(|e| HerderError::Internal(format!("cannot read committed offsets: {e}")))?;
    Ok(committed
        .elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.topic().to_owned(), e.partition(), o)),
            _ => None,
        })
        .collect())
}
