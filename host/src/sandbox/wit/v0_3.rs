//! Contract 0.3.0, the newest: its types are the host's (`super::types`, `super::batch`), and
//! its imports carry the host's implementation, which older versions delegate to. The connector
//! is a resource with a lifecycle (`create`, `task-configs`, `monitor`, `stop`).

use wasmtime::Store;
use wasmtime::component::{Component, Linker, ResourceAny};

use super::types::{
    Config, ConfigError, ConnectorSpec, PluginError, RecordFailure, SourcePosition, TopicPartition,
    TopicPartitionOffset,
};
use super::{Connector, Contract, MonitorReport, not_a, on_connector};
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

/// A 0.3.0 component, instantiated as the world it implements.
pub enum Plugin {
    Source(source::SourceConnector),
    Sink(sink::SinkConnector),
}

impl Plugin {
    fn source(
        &self,
    ) -> wasmtime::Result<source::exports::wasm_connect::plugin::source::GuestSourceTask<'_>> {
        match self {
            Plugin::Source(b) => Ok(b.wasm_connect_plugin_source().source_task()),
            Plugin::Sink(_) => Err(not_a(World::Source)),
        }
    }

    fn sink(
        &self,
    ) -> wasmtime::Result<sink::exports::wasm_connect::plugin::sink::GuestSinkTask<'_>> {
        match self {
            Plugin::Sink(b) => Ok(b.wasm_connect_plugin_sink().sink_task()),
            Plugin::Source(_) => Err(not_a(World::Sink)),
        }
    }

    fn resource(connector: &Connector) -> wasmtime::Result<ResourceAny> {
        match connector {
            Connector::Resource(handle) => Ok(*handle),
            Connector::Config(_) => Err(wasmtime::format_err!(
                "worker bug: a 0.3.0 connector without its resource"
            )),
        }
    }
}

/// Registers the imports of both worlds (the sink world imports the same).
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    source::SourceConnector::add_to_linker::<_, wasmtime::component::HasSelf<_>>(linker, |s| s)
}

impl Contract for Plugin {
    async fn instantiate(
        store: &mut Store<HostState>,
        component: &Component,
        linker: &Linker<HostState>,
        world: World,
    ) -> wasmtime::Result<Self> {
        Ok(match world {
            World::Source => Plugin::Source(
                source::SourceConnector::instantiate_async(store, component, linker).await?,
            ),
            World::Sink => Plugin::Sink(
                sink::SinkConnector::instantiate_async(store, component, linker).await?,
            ),
        })
    }

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
