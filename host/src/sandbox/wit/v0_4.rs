//! Contract 0.4.0, the newest: its types are the host's (`super::types`, `super::batch`), and
//! its imports carry the host's implementation, which older versions delegate to. As 0.3.0,
//! with the Kafka Connect schemas of keys and values beside each batch.

use wasmtime::Store;
use wasmtime::component::{Component, Linker, ResourceAny};

use super::types::{
    Config, ConfigError, ConnectorSpec, PluginError, RecordFailure, SourcePosition, TopicPartition,
    TopicPartitionOffset,
};
use super::{Connector, Contract, MonitorReport};
use crate::plugin::World;
use crate::sandbox::put_batch::PutBatch;
use crate::sandbox::source_batch::Polled;
use crate::sandbox::state::HostState;

/// The `source-connector` world, with the types and imports every version shares.
pub mod source {
    wasmtime::component::bindgen!({
        world: "source-connector",
        path: "../wit/0.4.0",
        imports: { "wasm-connect:plugin/offsets.read": trappable },
        exports: { default: async },
        additional_derives: [PartialEq, Eq],
    });
}

/// The `sink-connector` world: the same imports as the source world.
pub mod sink {
    wasmtime::component::bindgen!({
        world: "sink-connector",
        path: "../wit/0.4.0",
        exports: { default: async },
        with: {
            "wasm-connect:plugin/types": super::source::wasm_connect::plugin::types,
            "wasm-connect:plugin/batch": super::source::wasm_connect::plugin::batch,
            "wasm-connect:plugin/log": super::source::wasm_connect::plugin::log,
            "wasm-connect:plugin/offsets": super::source::wasm_connect::plugin::offsets,
            "wasm-connect:plugin/context": super::source::wasm_connect::plugin::context,
        },
    });
}

pub use source::wasm_connect::plugin::{batch, context, log, offsets, types};

super::worlds!("0.4.0");

impl Contract for Plugin {
    super::describe_calls!();
    super::resource_connector!();

    async fn poll(
        &self,
        store: &mut Store<HostState>,
        task: ResourceAny,
        max_records: u32,
        max_bytes: usize,
    ) -> wasmtime::Result<Result<Polled, PluginError>> {
        let polled = self.source()?.call_poll(store, task, max_records).await?;
        Ok(polled.map(|polled| Polled::packed(polled.records, polled.schemas, max_bytes)))
    }

    async fn put(
        &self,
        store: &mut Store<HostState>,
        task: ResourceAny,
        batch: &PutBatch,
    ) -> Result<wasmtime::Result<Result<Vec<RecordFailure>, PluginError>>, String> {
        let (records, schemas) = batch.as_wit();
        Ok(async { self.sink()?.call_put(store, task, records, schemas).await }.await)
    }

    super::task_calls!();
}
