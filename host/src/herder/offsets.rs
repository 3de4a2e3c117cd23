//! Connector offsets (KIP-875): read them (from the snapshot, at once), and, while the
//! connector is STOPPED, alter or reset them (in the connector's actor, so a resume of the same
//! connector is handled before or after, never in between). Source offsets live in the
//! worker's offset store; sink offsets are the consumer group `connect-<name>`'s committed
//! offsets (`kafka::group_offsets`), whose partitions and offsets are written in Kafka
//! Connect's `kafka_topic` / `kafka_partition` / `kafka_offset` form. The REST request and
//! response bodies are `rest/`'s.

use serde_json::{Value, json};

use super::view::ConnectorView;
use super::{Herder, HerderError, Shared};
use crate::kafka::clients::ClientKind;
use crate::kafka::group_offsets::{self, group_of};
use crate::plugin::World;

/// One partition of a connector and its offset, both JSON objects as Kafka Connect shows them
/// (its `ConnectorOffset`). In a change, no offset means "forget this partition's offset".
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectorOffset {
    /// A source connector's own source partition, or `{"kafka_topic", "kafka_partition"}`.
    pub partition: Value,
    /// A source connector's own source offset, or `{"kafka_offset"}`.
    pub offset: Option<Value>,
}

impl Herder {
    /// The connector's committed offsets.
    pub async fn offsets(&self, name: &str) -> Result<Vec<ConnectorOffset>, HerderError> {
        let view = self.view(name)?;
        let (kind, topics) = kind_and_topics(name, &view)?;
        Ok(match kind {
            World::Source => self
                .shared
                .offsets
                .offsets_of(name)
                .into_iter()
                .map(|(partition, offset)| ConnectorOffset {
                    partition,
                    offset: Some(offset),
                })
                .collect(),
            World::Sink => group_offsets::committed(
                &self.shared.bootstrap,
                self.shared.config.clients.librdkafka(ClientKind::Consumer),
                &group_of(name),
                topics,
            )
            .await
            .map_err(HerderError::Internal)?
            .into_iter()
            .map(|(topic, partition, offset)| ConnectorOffset {
                partition: json!({"kafka_topic": topic, "kafka_partition": partition}),
                offset: Some(json!({"kafka_offset": offset})),
            })
            .collect(),
        })
    }
}

/// Offsets admin a connector's actor asks for: the worker's, or a fake in unit tests.
pub(crate) trait OffsetAdmin {
    /// Apply `changes` to the offsets of a connector its actor knows to be STOPPED.
    fn alter_offsets(
        &self,
        name: &str,
        view: &ConnectorView,
        changes: &[ConnectorOffset],
    ) -> impl std::future::Future<Output = Result<(), HerderError>> + Send;

    /// Forget every offset of a connector its actor knows to be STOPPED.
    fn reset_offsets(
        &self,
        name: &str,
        view: &ConnectorView,
    ) -> impl std::future::Future<Output = Result<(), HerderError>> + Send;
}

impl OffsetAdmin for crate::worker::Worker {
    async fn alter_offsets(
        &self,
        name: &str,
        view: &ConnectorView,
        changes: &[ConnectorOffset],
    ) -> Result<(), HerderError> {
        alter(self.shared(), name, view, changes).await
    }

    async fn reset_offsets(&self, name: &str, view: &ConnectorView) -> Result<(), HerderError> {
        reset(self.shared(), name, view).await
    }
}

/// Apply `changes` to the offsets of a connector its actor knows to be STOPPED.
async fn alter(
    shared: &Shared,
    name: &str,
    view: &ConnectorView,
    changes: &[ConnectorOffset],
) -> Result<(), HerderError> {
    let (kind, _) = kind_and_topics(name, view)?;
    match kind {
        World::Source => {
            let changes: Vec<(Value, Option<Value>)> = changes
                .iter()
                .map(|c| (c.partition.clone(), c.offset.clone()))
                .collect();
            shared
                .offsets
                .alter(name, &changes)
                .await
                .map_err(HerderError::Internal)
        }
        World::Sink => {
            let mut offsets = Vec::new();
            for change in changes {
                let topic = change.partition["kafka_topic"].as_str();
                let partition = change.partition["kafka_partition"]
                    .as_i64()
                    .and_then(|p| i32::try_from(p).ok());
                let offset = change
                    .offset
                    .as_ref()
                    .and_then(|o| o["kafka_offset"].as_i64());
                match (topic, partition, offset) {
                    (Some(t), Some(p), Some(o)) if o >= 0 => offsets.push((t.to_owned(), p, o)),
                    _ => {
                        return Err(HerderError::BadRequest(
                            "sink offsets look like {\"partition\": {\"kafka_topic\": \"t\", \"kafka_partition\": 0}, \"offset\": {\"kafka_offset\": 42}}".into(),
                        ));
                    }
                }
            }
            group_offsets::commit(
                &shared.bootstrap,
                shared.config.clients.librdkafka(ClientKind::Consumer),
                &group_of(name),
                &offsets,
            )
            .await
            .map_err(HerderError::Internal)
        }
    }
}

/// Forget every offset of a connector its actor knows to be STOPPED.
async fn reset(shared: &Shared, name: &str, view: &ConnectorView) -> Result<(), HerderError> {
    let (kind, _) = kind_and_topics(name, view)?;
    match kind {
        World::Source => shared
            .offsets
            .reset(name)
            .await
            .map_err(HerderError::Internal),
        World::Sink => group_offsets::delete_group(
            &shared.bootstrap,
            shared.config.clients.librdkafka(ClientKind::Admin),
            &group_of(name),
        )
        .await
        .map_err(HerderError::Internal),
    }
}

fn kind_and_topics(name: &str, view: &ConnectorView) -> Result<(World, Vec<String>), HerderError> {
    let kind = view
        .kind()
        .ok_or_else(|| HerderError::BadRequest(format!("connector {name} has no valid config")))?;
    let mut topics: Vec<String> = view
        .topics
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .collect();
    if let Some(list) = view.config.get("topics") {
        for t in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            if !topics.iter().any(|x| x == t) {
                topics.push(t.to_owned());
            }
        }
    }
    Ok((kind, topics))
}
