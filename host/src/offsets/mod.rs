//! Source offsets: the durable store (behind [`OffsetStore`]; standalone: a file) and the
//! tracking of which offsets Kafka has acknowledged far enough to commit.

pub mod store;
pub mod tracker;

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

pub use store::FileOffsetStore;
pub use tracker::{Submitted, SubmittedRecords};

use crate::sandbox::OffsetReader;

/// Where source connectors' committed offsets are kept, keyed as Kafka Connect keys them
/// (`["<connector>", {<source partition>}]`). Standalone: [`FileOffsetStore`].
pub trait OffsetStore: Send + Sync + 'static {
    /// Record `offsets` (source partition, offset; both JSON text) of `connector` and return
    /// once they are durable. A commit that would give `connector` offsets for more than
    /// `max_partitions` source partitions is refused whole; unparseable JSON is reported, not
    /// stored.
    fn commit<'a>(
        &'a self,
        connector: &'a str,
        offsets: &'a [(String, String)],
        max_partitions: usize,
    ) -> BoxFuture<'a, Result<(), String>>;

    /// The committed offset of `connector`'s source partition `partition`.
    fn offset(&self, connector: &str, partition: &Value) -> Option<Value>;

    /// Every (source partition, offset) of `connector`.
    fn offsets_of(&self, connector: &str) -> Vec<(Value, Value)>;

    /// Set (`Some`) or remove (`None`) offsets of `connector`'s source partitions and return
    /// once that is durable. On failure nothing changes.
    fn alter<'a>(
        &'a self,
        connector: &'a str,
        changes: &'a [(Value, Option<Value>)],
    ) -> BoxFuture<'a, Result<(), String>>;

    /// Remove every offset of `connector` and return once that is durable.
    fn reset<'a>(&'a self, connector: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let partitions: Vec<(Value, Option<Value>)> = self
                .offsets_of(connector)
                .into_iter()
                .map(|(p, _)| (p, None))
                .collect();
            self.alter(connector, &partitions).await
        })
    }
}

/// `offsets` (source partition, offset; JSON text) of `connector` parsed: each store's key (the
/// canonical `["<connector>",{...}]`) and offset. Text that is not JSON is an error naming it.
pub fn parse_commit(
    connector: &str,
    offsets: &[(String, String)],
) -> Result<Vec<(String, Value)>, String> {
    offsets
        .iter()
        .map(|(partition, offset)| {
            let p: Value = serde_json::from_str(partition)
                .map_err(|e| format!("source partition {partition:?} is not JSON: {e}"))?;
            let o: Value = serde_json::from_str(offset)
                .map_err(|e| format!("source offset {offset:?} is not JSON: {e}"))?;
            Ok((store::key(connector, &p), o))
        })
        .collect()
}

/// Whether `new` more source partitions fit beside the `stored` ones of `connector` under
/// `max_partitions` (`sandbox.source.partitions.max`); the refusal says why.
pub fn check_partition_limit(
    connector: &str,
    stored: usize,
    new: usize,
    max_partitions: usize,
) -> Result<(), String> {
    if new > 0 && stored.saturating_add(new) > max_partitions {
        return Err(format!(
            "connector {connector} has offsets stored for {stored} source partitions; {new} more would pass the limit of {max_partitions} (sandbox.source.partitions.max); a connector should reuse a bounded set of source partitions"
        ));
    }
    Ok(())
}

/// A reader of `connector`'s offsets in `store`, for its plugin instances.
pub fn reader(store: &Arc<dyn OffsetStore>, connector: &str) -> Arc<dyn OffsetReader> {
    Arc::new(ConnectorOffsets {
        store: Arc::clone(store),
        connector: connector.to_owned(),
    })
}

struct ConnectorOffsets {
    store: Arc<dyn OffsetStore>,
    connector: String,
}

impl OffsetReader for ConnectorOffsets {
    fn offset(&self, source_partition: &str) -> Option<String> {
        let partition: Value = serde_json::from_str(source_partition).ok()?;
        self.store
            .offset(&self.connector, &partition)
            .map(|o| o.to_string())
    }
}
