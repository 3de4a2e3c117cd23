//! Contract 0.3.0: the connector is a resource with a lifecycle (`create`, `task-configs`,
//! `monitor`, `stop`). Its types and batches are the host's (0.4.0's `types` has the same
//! shapes, and its `batch` the same types plus the schema columns, which a 0.3.0 batch goes
//! without); the imports delegate to 0.4.0's.

use wasmtime::Store;
use wasmtime::component::{Component, Linker, ResourceAny};

use super::types::{
    Config, ConfigError, ConnectorSpec, PluginError, RecordFailure, SourcePosition, TopicPartition,
    TopicPartitionOffset,
};
use super::{Connector, Contract, MonitorReport, latest};
use crate::plugin::World;
use crate::sandbox::put_batch::PutBatch;
use crate::sandbox::source_batch::Polled;
use crate::sandbox::state::HostState;

/// The `source-connector` world.
pub mod source {
    wasmtime::component::bindgen!({
        world: "source-connector",
        path: "../wit/0.3.0",
        imports: { "wasm-connect:plugin/offsets.read": trappable },
        exports: { default: async },
        with: {
            "wasm-connect:plugin/types": crate::sandbox::wit::types,
            "wasm-connect:plugin/batch": crate::sandbox::wit::batch,
        },
    });
}

/// The `sink-connector` world: the same imports as the source world.
pub mod sink {
    wasmtime::component::bindgen!({
        world: "sink-connector",
        path: "../wit/0.3.0",
        exports: { default: async },
        with: {
            "wasm-connect:plugin/types": crate::sandbox::wit::types,
            "wasm-connect:plugin/batch": crate::sandbox::wit::batch,
            "wasm-connect:plugin/log": super::source::wasm_connect::plugin::log,
            "wasm-connect:plugin/offsets": super::source::wasm_connect::plugin::offsets,
            "wasm-connect:plugin/context": super::source::wasm_connect::plugin::context,
        },
    });
}

use source::wasm_connect::plugin::{context, log, offsets};

super::worlds!("0.3.0");

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
        Ok(polled.map(|batch| Polled::packed(batch, super::no_schemas(), max_bytes)))
    }

    async fn put(
        &self,
        store: &mut Store<HostState>,
        task: ResourceAny,
        batch: &PutBatch,
    ) -> Result<wasmtime::Result<Result<Vec<RecordFailure>, PluginError>>, String> {
        let (records, _) = batch.as_wit();
        Ok(async { self.sink()?.call_put(store, task, records).await }.await)
    }

    super::task_calls!();
}

super::delegate_imports!();
