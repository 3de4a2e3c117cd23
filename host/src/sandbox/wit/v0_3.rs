//! Contract 0.3.0, the newest: its types are the host's (`super::types`, `super::batch`), and
//! its imports carry the host's implementation, which older versions delegate to. The connector
//! is a resource with a lifecycle (`create`, `task-configs`, `monitor`, `stop`).

use wasmtime::Store;
use wasmtime::component::{Component, Linker, ResourceAny};

use super::types::{
    Config, ConfigError, ConnectorSpec, PluginError, RecordFailure, SourcePosition, TopicPartition,
    TopicPartitionOffset,
};
use super::{Connector, Contract, MonitorReport, on_connector};
use crate::plugin::World;
use crate::sandbox::put_batch::PutBatch;
use crate::sandbox::source_batch::Polled;
use crate::sandbox::state::HostState;

/// The `source-connector` world, with the types and imports every version shares.
pub mod source {
    wasmtime::component::bindgen!({
        world: "source-connector",
        path: "../wit/0.3.0",
        imports: { "wasm-connect:plugin/offsets.read": trappable },
        exports: { default: async },
        additional_derives: [PartialEq, Eq],
    });
}

/// The `sink-connector` world: the same imports as the source world.
pub mod sink {
    wasmtime::component::bindgen!({
        world: "sink-connector",
        path: "../wit/0.3.0",
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

super::worlds!("0.3.0");

impl Plugin {
    fn resource(connector: &Connector) -> wasmtime::Result<ResourceAny> {
        match connector {
            Connector::Resource(handle) => Ok(*handle),
            Connector::Config(_) => Err(wasmtime::format_err!(
                "worker bug: a 0.3.0 connector without its resource"
            )),
        }
    }
}

impl Contract for Plugin {
    fn monitors(&self) -> bool {
        true
    }

    super::describe_calls!();

    async fn connector_create(
        &self,
        store: &mut Store<HostState>,
        config: &Config,
    ) -> wasmtime::Result<Result<Connector, PluginError>> {
        let created = on_connector!(self, |c| c
            .connector_instance()
            .call_create(store, config)
            .await)?;
        Ok(created.map(Connector::Resource))
    }

    async fn task_configs(
        &self,
        store: &mut Store<HostState>,
        connector: &Connector,
        max_tasks: u32,
    ) -> wasmtime::Result<Result<Vec<Config>, PluginError>> {
        let handle = Self::resource(connector)?;
        on_connector!(self, |c| c
            .connector_instance()
            .call_task_configs(store, handle, max_tasks)
            .await)
    }

    async fn monitor(
        &self,
        store: &mut Store<HostState>,
        connector: &Connector,
    ) -> wasmtime::Result<Result<MonitorReport, PluginError>> {
        let handle = Self::resource(connector)?;
        // Each world's bindings have their own type for the report; the source world's is the
        // host's.
        match self {
            Plugin::Source(b) => {
                b.wasm_connect_plugin_connector()
                    .connector_instance()
                    .call_monitor(store, handle)
                    .await
            }
            Plugin::Sink(b) => Ok(b
                .wasm_connect_plugin_connector()
                .connector_instance()
                .call_monitor(store, handle)
                .await?
                .map(|report| MonitorReport {
                    reconfigure: report.reconfigure,
                    next_call_ms: report.next_call_ms,
                })),
        }
    }

    async fn connector_stop(
        &self,
        store: &mut Store<HostState>,
        connector: &Connector,
    ) -> wasmtime::Result<()> {
        let handle = Self::resource(connector)?;
        on_connector!(self, |c| c
            .connector_instance()
            .call_stop(&mut *store, handle)
            .await)?;
        handle.resource_drop_async(store).await
    }

    async fn poll(
        &self,
        store: &mut Store<HostState>,
        task: ResourceAny,
        max_records: u32,
        max_bytes: usize,
    ) -> wasmtime::Result<Result<Polled, PluginError>> {
        let polled = self.source()?.call_poll(store, task, max_records).await?;
        Ok(polled.map(|batch| Polled::packed(batch, max_bytes)))
    }

    async fn put(
        &self,
        store: &mut Store<HostState>,
        task: ResourceAny,
        batch: &PutBatch,
    ) -> Result<wasmtime::Result<Result<Vec<RecordFailure>, PluginError>>, String> {
        Ok(async { self.sink()?.call_put(store, task, batch.as_wit()).await }.await)
    }

    super::task_calls!();
}
