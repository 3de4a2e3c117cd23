//! Connector offsets over REST (KIP-875): read them (from the snapshot, at once), and, while the
//! connector is STOPPED, alter or reset them (in the connector's actor, so a resume of the same
//! connector is handled before or after, never in between). Source offsets live in the
//! worker's offset store; sink offsets are the consumer group `connect-<name>`'s committed
//! offsets (`kafka::group_offsets`), in Kafka Connect's `kafka_topic` / `kafka_partition` /
//! `kafka_offset` form.

use serde_json::{Value, json};

use super::view::ConnectorView;
use super::{Herder, HerderError, Shared};
use crate::kafka::group_offsets::{self, group_of};
use crate::plugin::World;

impl Herder {
    /// `GET /connectors/{name}/offsets`.
    pub async fn offsets(&self, name: &str) -> Result<Value, HerderError> {
        let view = self.view(name)?;
        let (kind, topics) = kind_and_topics(name, &view)?;
        let offsets: Vec<Value> = match kind {
            World::Source => self
                .shared
                .offsets
                .offsets_of(name)
                .into_iter()
                .map(|(partition, offset)| json!({"partition": partition, "offset": offset}))
                .collect(),
            World::Sink => group_offsets::committed(
                &self.shared.bootstrap,
                &self.shared.config.consumer,
                &group_of(name),
                topics,
            )
            .await
            .map_err(HerderError::Internal)?
            .into_iter()
            .map(|(topic, partition, offset)| {
                json!({
                    "partition": {"kafka_topic": topic, "kafka_partition": partition},
                    "offset": {"kafka_offset": offset}
                })
            })
            .collect(),
        };
        Ok(json!({ "offsets": offsets }))
    }
}

/// `PATCH /connectors/{name}/offsets` with `{"offsets": [{"partition": .., "offset": ..}]}`,
/// for a connector its actor knows to be STOPPED.
pub(crate) async fn alter(
    shared: &Shared,
    name: &str,
    view: &ConnectorView,
    body: &Value,
) -> Result<Value, HerderError> {
    let (kind, _) = kind_and_topics(name, view)?;
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
                let partition = e
                    .get("partition")
                    .filter(|p| p.is_object())
                    .ok_or_else(|| {
                        HerderError::BadRequest("every entry needs a \"partition\" object".into())
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
            shared
                .offsets
                .alter(name, &changes)
                .map_err(HerderError::Internal)?;
        }
        World::Sink => {
            let mut offsets = Vec::new();
            for e in entries {
                let topic = e["partition"]["kafka_topic"].as_str();
                let partition = e["partition"]["kafka_partition"]
                    .as_i64()
                    .and_then(|p| i32::try_from(p).ok());
                let offset = e["offset"]["kafka_offset"].as_i64();
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
                &shared.config.consumer,
                &group_of(name),
                &offsets,
            )
            .await
            .map_err(HerderError::Internal)?;
        }
    }
    Ok(json!({"message": "The offsets for this connector have been altered successfully"}))
}

/// `DELETE /connectors/{name}/offsets`, for a connector its actor knows to be STOPPED.
pub(crate) async fn reset(
    shared: &Shared,
    name: &str,
    view: &ConnectorView,
) -> Result<Value, HerderError> {
    let (kind, _) = kind_and_topics(name, view)?;
    match kind {
        World::Source => shared.offsets.reset(name).map_err(HerderError::Internal)?,
        World::Sink => {
            group_offsets::delete_group(&shared.bootstrap, &shared.config.admin, &group_of(name))
                .await
                .map_err(HerderError::Internal)?
        }
    }
    Ok(json!({"message": "The offsets for this connector have been reset successfully"}))
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
