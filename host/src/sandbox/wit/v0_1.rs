//! Contract 0.1.0: records cross as lists of records (one allocation per field), unpacked
//! from and into the host's batches here. The connector is a set of plain functions, as in
//! 0.2.0. Types are the host's (0.3.0 has the same shapes); the imports delegate to 0.3.0's.

use wasmtime::Store;
use wasmtime::component::{Component, Linker, ResourceAny};

use super::types::{
    Config, ConfigError, ConnectorSpec, PluginError, RecordFailure, SourcePosition, TopicPartition,
    TopicPartitionOffset,
};
use super::{Connector, Contract, MonitorReport, latest, not_a};
use crate::plugin::World;
use crate::sandbox::put_batch::PutBatch;
use crate::sandbox::source_batch::Polled;
use crate::sandbox::state::HostState;

/// The `source-connector` world.
pub mod source {
    wasmtime::component::bindgen!({
        world: "source-connector",
        path: "../wit/0.1.0",
        imports: { "wasm-connect:plugin/offsets.read": trappable },
        exports: { default: async },
        with: {
            "wasm-connect:plugin/types": crate::sandbox::wit::types,
        },
    });
}

/// The `sink-connector` world: the same imports as the source world.
pub mod sink {
    wasmtime::component::bindgen!({
        world: "sink-connector",
        path: "../wit/0.1.0",
        exports: { default: async },
        with: {
            "wasm-connect:plugin/types": crate::sandbox::wit::types,
            "wasm-connect:plugin/log": super::source::wasm_connect::plugin::log,
            "wasm-connect:plugin/offsets": super::source::wasm_connect::plugin::offsets,
            "wasm-connect:plugin/context": super::source::wasm_connect::plugin::context,
        },
    });
}

use source::wasm_connect::plugin::{context, log, offsets};

/// A 0.1.0 component, instantiated as the world it implements.
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

    super::describe_calls!();
    super::stateless_connector!();

    async fn poll(
        &self,
        store: &mut Store<HostState>,
        task: ResourceAny,
        max_records: u32,
        max_bytes: usize,
    ) -> wasmtime::Result<Result<Polled, PluginError>> {
        let polled = self.source()?.call_poll(store, task, max_records).await?;
        Ok(polled.map(|records| Polled::records(records, max_bytes)))
    }

    async fn put(
        &self,
        store: &mut Store<HostState>,
        task: ResourceAny,
        batch: &PutBatch,
    ) -> Result<wasmtime::Result<Result<Vec<RecordFailure>, PluginError>>, String> {
        let records = batch.records()?;
        Ok(async { self.sink()?.call_put(store, task, &records).await }.await)
    }

    super::task_calls!();
}

impl log::Host for HostState {
    fn log(&mut self, level: log::Level, message: String) {
        use log::Level as L;
        let level = match level {
            L::Trace => latest::log::Level::Trace,
            L::Debug => latest::log::Level::Debug,
            L::Info => latest::log::Level::Info,
            L::Warn => latest::log::Level::Warn,
            L::Error => latest::log::Level::Error,
        };
        latest::log::Host::log(self, level, message)
    }
}

impl offsets::Host for HostState {
    fn read(&mut self, source_partitions: Vec<String>) -> wasmtime::Result<Vec<Option<String>>> {
        latest::offsets::Host::read(self, source_partitions)
    }
}

impl context::Host for HostState {
    fn request_reconfiguration(&mut self) {
        latest::context::Host::request_reconfiguration(self)
    }
}
