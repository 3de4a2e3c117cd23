//! A sink connector's offsets are its consumer group's (`connect-<name>`) committed offsets:
//! read them, commit new ones, or delete the group (KIP-875's reset). Each call makes a
//! short-lived client with the worker's consumer (or admin) settings; the blocking calls run on
//! a blocking thread.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::TracingContext;

/// How long one metadata, offsets or admin request may take.
const TIMEOUT: Duration = Duration::from_secs(15);

/// One partition's committed offset: (topic, partition, offset).
pub type Committed = (String, i32, i64);

/// The group whose offsets are connector `name`'s (Kafka Connect's naming).
pub fn group_of(connector: &str) -> String {
    format!("connect-{connector}")
}

/// A consumer client of `group` that commits only when told (never joins the group).
fn client(
    bootstrap: &str,
    overrides: &[(String, String)],
    group: &str,
) -> Result<BaseConsumer<TracingContext>, String> {
    let mut config = super::base_config(bootstrap, "wasm-connect-offsets");
    config
        .set("group.id", group)
        .set("enable.auto.commit", "false");
    super::apply(&mut config, overrides);
    super::clients::create(&config, TracingContext, "offsets client")
}

/// `group`'s committed offsets for every partition of `topics`.
pub async fn committed(
    bootstrap: &str,
    overrides: &[(String, String)],
    group: &str,
    topics: Vec<String>,
) -> Result<Vec<Committed>, String> {
    let consumer = client(bootstrap, overrides, group)?;
    tokio::task::spawn_blocking(move || {
        let mut tpl = TopicPartitionList::new();
        for topic in &topics {
            let metadata = consumer
                .fetch_metadata(Some(topic), TIMEOUT)
                .map_err(|e| format!("cannot read metadata of {topic}: {e}"))?;
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
            .map_err(|e| format!("cannot read committed offsets: {e}"))?;
        Ok(committed
            .elements()
            .iter()
            .filter_map(|e| match e.offset() {
                Offset::Offset(o) => Some((e.topic().to_owned(), e.partition(), o)),
                _ => None,
            })
            .collect())
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Commit `offsets` for `group` (each at least 0).
pub async fn commit(
    bootstrap: &str,
    overrides: &[(String, String)],
    group: &str,
    offsets: &[Committed],
) -> Result<(), String> {
    let mut tpl = TopicPartitionList::new();
    for (topic, partition, offset) in offsets {
        tpl.add_partition_offset(topic, *partition, Offset::Offset(*offset))
            .map_err(|e| format!("{topic}-{partition} at {offset}: {e}"))?;
    }
    let consumer = client(bootstrap, overrides, group)?;
    tokio::task::spawn_blocking(move || consumer.commit(&tpl, CommitMode::Sync))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("cannot commit the offsets: {e}"))
}

/// Delete `group` and so its committed offsets; a group that does not exist is fine.
pub async fn delete_group(
    bootstrap: &str,
    overrides: &[(String, String)],
    group: &str,
) -> Result<(), String> {
    let mut config = super::base_config(bootstrap, "wasm-connect-admin");
    super::apply(&mut config, overrides);
    let admin: AdminClient<TracingContext> =
        super::clients::create(&config, TracingContext, "admin client")?;
    let results = admin
        .delete_groups(
            &[group],
            &AdminOptions::new().operation_timeout(Some(TIMEOUT)),
        )
        .await
        .map_err(|e| format!("cannot delete group {group}: {e}"))?;
    for r in results {
        match r {
            Ok(_) | Err((_, rdkafka::types::RDKafkaErrorCode::GroupIdNotFound)) => {}
            Err((_, code)) => return Err(format!("cannot delete group {group}: {code}")),
        }
    }
    Ok(())
}
