//! The contract versions the worker runs (`wit/<version>/`), one module each, as Zed's
//! extension host does it: the newest version's types are the host's, and every older version
//! is adapted to them in its own module.
//!
//! - [`v0_4`] is the newest: its `types` and `batch` are [`types`] and [`batch`], and its
//!   imports carry the host's implementation (`super::state`).
//! - [`v0_3`], [`v0_2`] and [`v0_1`] map their `types` (and from 0.2.0 their `batch`) onto
//!   0.4.0's, which have the same shapes (0.4.0's `batch` adds types, it changes none; wasmtime
//!   checks the shapes when it instantiates a component); their imports delegate to 0.4.0's;
//!   their batches go without schemas; the connector of 0.1.0 and 0.2.0, plain functions
//!   without an instance, is given the lifecycle of the connector resource by keeping its
//!   config on the host.
//! - Each version's `Plugin` implements [`Contract`] in host types; [`Bindings`] holds one of
//!   them, and `super::instance` calls it through `dispatch!`.
//!
//! Adding a version: its module (bindgen, `worlds!`, the previous newest's imports now
//! `delegate_imports!`, `Contract` with the shared call macros), a
//! variant of [`Bindings`] with its arm in `dispatch!` and [`Bindings::instantiate`], its line
//! in [`add_to_linker`], and its entry in `crate::plugin::contract::SUPPORTED`.

use wasmtime::Store;
use wasmtime::component::{Component, Linker, ResourceAny};

use super::put_batch::PutBatch;
use super::source_batch::Polled;
use super::state::HostState;
use crate::plugin::{Version, World};

pub mod v0_1;
pub mod v0_2;
pub mod v0_3;
pub mod v0_4;

/// The newest contract version's bindings.
pub use v0_4 as latest;

/// The host's packed batch types (0.2.0 and 0.3.0 use those of them they have).
pub use latest::batch;
/// What a connector's `monitor` reports (0.3.0 on).
pub use latest::source::exports::wasm_connect::plugin::connector::MonitorReport;
/// The host's record, config and error types (the newest version's; every version has these
/// shapes).
pub use latest::types;

use types::{
    Config, ConfigError, ConnectorSpec, PluginError, RecordFailure, SourcePosition, TopicPartition,
    TopicPartitionOffset,
};

/// Schema columns for a batch without schemas (contracts before 0.4.0).
pub(crate) fn no_schemas() -> batch::SchemaColumns {
    let none = || batch::SpanColumn {
        start: Vec::new(),
        len: Vec::new(),
    };
    batch::SchemaColumns {
        key: none(),
        value: none(),
    }
}

/// A created connector, as its contract version keeps it.
pub enum Connector {
    /// 0.3.0 on: the plugin's `connector-instance` resource.
    Resource(ResourceAny),
    /// Before 0.3.0: the config it was created with, which each `task-configs` call passes.
    Config(Config),
}

/// One contract version's calls into a plugin, in the host's types. Each returns wasmtime's
/// error for a trap; a plugin's own error is the inner `Result`.
pub(crate) trait Contract: Sized {
    /// Instantiate `component` as `world`.
    async fn instantiate(
        store: &mut Store<HostState>,
        component: &Component,
        linker: &Linker<HostState>,
        world: World,
    ) -> wasmtime::Result<Self>;

    /// Whether the connector has a `monitor` worth calling.
    fn monitors(&self) -> bool;

    /// `connector.spec`.
    async fn spec(&self, store: &mut Store<HostState>) -> wasmtime::Result<ConnectorSpec>;

    /// `connector.validate`.
    async fn validate(
        &self,
        store: &mut Store<HostState>,
        config: &Config,
    ) -> wasmtime::Result<Vec<ConfigError>>;

    /// `connector-instance.create`.
    async fn connector_create(
        &self,
        store: &mut Store<HostState>,
        config: &Config,
    ) -> wasmtime::Result<Result<Connector, PluginError>>;

    /// `connector-instance.task-configs` (before 0.3.0, `connector.task-configs` with the
    /// connector's config).
    async fn task_configs(
        &self,
        store: &mut Store<HostState>,
        connector: &Connector,
        max_tasks: u32,
    ) -> wasmtime::Result<Result<Vec<Config>, PluginError>>;

    /// `connector-instance.monitor` (before 0.3.0: nothing to report).
    async fn monitor(
        &self,
        store: &mut Store<HostState>,
        connector: &Connector,
    ) -> wasmtime::Result<Result<MonitorReport, PluginError>>;

    /// `connector-instance.stop`, then drop the resource.
    async fn connector_stop(
        &self,
        store: &mut Store<HostState>,
        connector: &Connector,
    ) -> wasmtime::Result<()>;

    /// `source-task.create`.
    async fn source_create(
        &self,
        store: &mut Store<HostState>,
        config: &Config,
    ) -> wasmtime::Result<Result<ResourceAny, PluginError>>;

    /// `source-task.poll`, the batch checked against `max_bytes` when it is read.
    async fn poll(
        &self,
        store: &mut Store<HostState>,
        task: ResourceAny,
        max_records: u32,
        max_bytes: usize,
    ) -> wasmtime::Result<Result<Polled, PluginError>>;

    /// `source-task.commit`.
    async fn commit(
        &self,
        store: &mut Store<HostState>,
        task: ResourceAny,
        positions: &[SourcePosition],
    ) -> wasmtime::Result<Result<(), PluginError>>;

    /// `sink-task.create`.
    async fn sink_create(
        &self,
        store: &mut Store<HostState>,
        config: &Config,
    ) -> wasmtime::Result<Result<ResourceAny, PluginError>>;

    /// `sink-task.open`.
    async fn open(
        &self,
        store: &mut Store<HostState>,
        task: ResourceAny,
        partitions: &[TopicPartition],
    ) -> wasmtime::Result<Result<(), PluginError>>;

    /// `sink-task.close`.
    async fn close(
        &self,
        store: &mut Store<HostState>,
        task: ResourceAny,
        partitions: &[TopicPartition],
    ) -> wasmtime::Result<Result<(), PluginError>>;

    /// `sink-task.put`. The outer error: the batch could not be put in this version's form
    /// (nothing was called).
    async fn put(
        &self,
        store: &mut Store<HostState>,
        task: ResourceAny,
        batch: &PutBatch,
    ) -> Result<wasmtime::Result<Result<Vec<RecordFailure>, PluginError>>, String>;

    /// `sink-task.flush`.
    async fn flush(
        &self,
        store: &mut Store<HostState>,
        task: ResourceAny,
        offsets: &[TopicPartitionOffset],
    ) -> wasmtime::Result<Result<Vec<TopicPartitionOffset>, PluginError>>;

    /// `source-task.stop` or `sink-task.stop` (the caller drops the resource).
    async fn task_stop(
        &self,
        store: &mut Store<HostState>,
        task: ResourceAny,
    ) -> wasmtime::Result<()>;
}

/// The error for a task call on a plugin of the other world (a worker bug: the host picks the
/// task kind from the world).
pub(crate) fn not_a(world: World) -> wasmtime::Error {
    wasmtime::format_err!("worker bug: a {world} task call on a plugin that is not a {world}")
}

/// Run `$call` on the `connector` export of a version's `Plugin`, whichever world it is (each
/// world's bindings have their own type for the same export).
macro_rules! on_connector {
    ($plugin:expr, |$connector:ident| $call:expr) => {
        match $plugin {
            Plugin::Source(b) => {
                let $connector = b.wasm_connect_plugin_connector();
                $call
            }
            Plugin::Sink(b) => {
                let $connector = b.wasm_connect_plugin_connector();
                $call
            }
        }
    };
}
pub(crate) use on_connector;

/// What every version's module has alike, expanded in it: `Plugin` (the component as the world
/// it implements, over that module's `source` and `sink` bindgen modules), its task exports, and
/// `add_to_linker` for its imports (the sink world imports the same as the source world).
macro_rules! worlds {
    ($version:literal) => {
        #[doc = concat!("A ", $version, " component, instantiated as the world it implements.")]
        pub enum Plugin {
            Source(source::SourceConnector),
            Sink(sink::SinkConnector),
        }

        impl Plugin {
            fn source(
                &self,
            ) -> wasmtime::Result<source::exports::wasm_connect::plugin::source::GuestSourceTask<'_>>
            {
                match self {
                    Plugin::Source(b) => Ok(b.wasm_connect_plugin_source().source_task()),
                    Plugin::Sink(_) => Err($crate::sandbox::wit::not_a($crate::plugin::World::Source)),
                }
            }

            fn sink(
                &self,
            ) -> wasmtime::Result<sink::exports::wasm_connect::plugin::sink::GuestSinkTask<'_>> {
                match self {
                    Plugin::Sink(b) => Ok(b.wasm_connect_plugin_sink().sink_task()),
                    Plugin::Source(_) => Err($crate::sandbox::wit::not_a($crate::plugin::World::Sink)),
                }
            }
        }

        /// Registers the imports of both worlds (the sink world imports the same).
        pub fn add_to_linker(
            linker: &mut wasmtime::component::Linker<$crate::sandbox::state::HostState>,
        ) -> wasmtime::Result<()> {
            source::SourceConnector::add_to_linker::<_, wasmtime::component::HasSelf<_>>(
                linker,
                |s| s,
            )
        }
    };
}
pub(crate) use worlds;

/// The imports of a version before the newest: each delegates to the newest's (the host's
/// implementation), expanded where that version's `log`, `offsets` and `context` are in scope.
macro_rules! delegate_imports {
    () => {
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
            fn read(
                &mut self,
                source_partitions: Vec<String>,
            ) -> wasmtime::Result<Vec<Option<String>>> {
                latest::offsets::Host::read(self, source_partitions)
            }
        }

        impl context::Host for HostState {
            fn request_reconfiguration(&mut self) {
                latest::context::Host::request_reconfiguration(self)
            }
        }
    };
}
pub(crate) use delegate_imports;

/// `instantiate`, `spec` and `validate`: the same in every version (`spec` and `validate` are plain
/// functions of the `connector` interface in all of them).
macro_rules! describe_calls {
    () => {
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

        async fn spec(&self, store: &mut Store<HostState>) -> wasmtime::Result<ConnectorSpec> {
            $crate::sandbox::wit::on_connector!(self, |c| c.call_spec(store).await)
        }

        async fn validate(
            &self,
            store: &mut Store<HostState>,
            config: &Config,
        ) -> wasmtime::Result<Vec<ConfigError>> {
            $crate::sandbox::wit::on_connector!(self, |c| c.call_validate(store, config).await)
        }
    };
}
pub(crate) use describe_calls;

/// The connector lifecycle of 0.3.0 on: the plugin's `connector-instance` resource, created
/// with its config, asked for task configs, monitored, stopped and dropped.
macro_rules! resource_connector {
    () => {
        fn monitors(&self) -> bool {
            true
        }

        async fn connector_create(
            &self,
            store: &mut Store<HostState>,
            config: &Config,
        ) -> wasmtime::Result<Result<Connector, PluginError>> {
            let created = $crate::sandbox::wit::on_connector!(self, |c| c
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
            let handle = $crate::sandbox::wit::resource(connector)?;
            $crate::sandbox::wit::on_connector!(self, |c| c
                .connector_instance()
                .call_task_configs(store, handle, max_tasks)
                .await)
        }

        async fn monitor(
            &self,
            store: &mut Store<HostState>,
            connector: &Connector,
        ) -> wasmtime::Result<Result<MonitorReport, PluginError>> {
            let handle = $crate::sandbox::wit::resource(connector)?;
            // Each world's bindings have their own type for the report.
            $crate::sandbox::wit::on_connector!(self, |c| Ok(c
                .connector_instance()
                .call_monitor(store, handle)
                .await?
                .map(|report| MonitorReport {
                    reconfigure: report.reconfigure,
                    next_call_ms: report.next_call_ms,
                })))
        }

        async fn connector_stop(
            &self,
            store: &mut Store<HostState>,
            connector: &Connector,
        ) -> wasmtime::Result<()> {
            let handle = $crate::sandbox::wit::resource(connector)?;
            $crate::sandbox::wit::on_connector!(self, |c| c
                .connector_instance()
                .call_stop(&mut *store, handle)
                .await)?;
            handle.resource_drop_async(store).await
        }
    };
}
pub(crate) use resource_connector;

/// The handle of a connector of 0.3.0 on.
pub(crate) fn resource(connector: &Connector) -> wasmtime::Result<ResourceAny> {
    match connector {
        Connector::Resource(handle) => Ok(*handle),
        Connector::Config(_) => Err(wasmtime::format_err!(
            "worker bug: a connector of contract 0.3.0 or later without its resource"
        )),
    }
}

/// The connector lifecycle of the versions before 0.3.0, whose connector has no instance: the
/// host keeps the config and passes it to `task-configs`; there is nothing to monitor or stop.
macro_rules! stateless_connector {
    () => {
        fn monitors(&self) -> bool {
            false
        }

        async fn connector_create(
            &self,
            _store: &mut Store<HostState>,
            config: &Config,
        ) -> wasmtime::Result<Result<Connector, PluginError>> {
            Ok(Ok(Connector::Config(config.clone())))
        }

        async fn task_configs(
            &self,
            store: &mut Store<HostState>,
            connector: &Connector,
            max_tasks: u32,
        ) -> wasmtime::Result<Result<Vec<Config>, PluginError>> {
            let Connector::Config(config) = connector else {
                return Err(wasmtime::format_err!(
                    "worker bug: a connector resource for a contract without one"
                ));
            };
            $crate::sandbox::wit::on_connector!(self, |c| c
                .call_task_configs(store, config, max_tasks)
                .await)
        }

        async fn monitor(
            &self,
            _store: &mut Store<HostState>,
            _connector: &Connector,
        ) -> wasmtime::Result<Result<MonitorReport, PluginError>> {
            Ok(Ok(MonitorReport {
                reconfigure: false,
                next_call_ms: None,
            }))
        }

        async fn connector_stop(
            &self,
            _store: &mut Store<HostState>,
            _connector: &Connector,
        ) -> wasmtime::Result<()> {
            Ok(())
        }
    };
}
pub(crate) use stateless_connector;

/// The task calls whose types are the same in every version (all but `poll` and `put`).
macro_rules! task_calls {
    () => {
        async fn source_create(
            &self,
            store: &mut Store<HostState>,
            config: &Config,
        ) -> wasmtime::Result<Result<ResourceAny, PluginError>> {
            self.source()?.call_create(store, config).await
        }

        async fn commit(
            &self,
            store: &mut Store<HostState>,
            task: ResourceAny,
            positions: &[SourcePosition],
        ) -> wasmtime::Result<Result<(), PluginError>> {
            self.source()?.call_commit(store, task, positions).await
        }

        async fn sink_create(
            &self,
            store: &mut Store<HostState>,
            config: &Config,
        ) -> wasmtime::Result<Result<ResourceAny, PluginError>> {
            self.sink()?.call_create(store, config).await
        }

        async fn open(
            &self,
            store: &mut Store<HostState>,
            task: ResourceAny,
            partitions: &[TopicPartition],
        ) -> wasmtime::Result<Result<(), PluginError>> {
            self.sink()?.call_open(store, task, partitions).await
        }

        async fn close(
            &self,
            store: &mut Store<HostState>,
            task: ResourceAny,
            partitions: &[TopicPartition],
        ) -> wasmtime::Result<Result<(), PluginError>> {
            self.sink()?.call_close(store, task, partitions).await
        }

        async fn flush(
            &self,
            store: &mut Store<HostState>,
            task: ResourceAny,
            offsets: &[TopicPartitionOffset],
        ) -> wasmtime::Result<Result<Vec<TopicPartitionOffset>, PluginError>> {
            self.sink()?.call_flush(store, task, offsets).await
        }

        async fn task_stop(
            &self,
            store: &mut Store<HostState>,
            task: ResourceAny,
        ) -> wasmtime::Result<()> {
            match self {
                Plugin::Source(_) => self.source()?.call_stop(store, task).await,
                Plugin::Sink(_) => self.sink()?.call_stop(store, task).await,
            }
        }
    };
}
pub(crate) use task_calls;

/// A component instantiated through the bindings of its contract version.
pub(crate) enum Bindings {
    V0_1(v0_1::Plugin),
    V0_2(v0_2::Plugin),
    V0_3(v0_3::Plugin),
    V0_4(v0_4::Plugin),
}

/// Run `$call` on whichever version's `Plugin` (a [`Contract`]) `$bindings` holds.
macro_rules! dispatch {
    ($bindings:expr, |$plugin:ident| $call:expr) => {
        match $bindings {
            $crate::sandbox::wit::Bindings::V0_1($plugin) => $call,
            $crate::sandbox::wit::Bindings::V0_2($plugin) => $call,
            $crate::sandbox::wit::Bindings::V0_3($plugin) => $call,
            $crate::sandbox::wit::Bindings::V0_4($plugin) => $call,
        }
    };
}
pub(crate) use dispatch;

/// Register the imports of every version the worker runs.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    v0_1::add_to_linker(linker)?;
    v0_2::add_to_linker(linker)?;
    v0_3::add_to_linker(linker)?;
    v0_4::add_to_linker(linker)
}

impl Bindings {
    /// Instantiate `component`, which implements `world` of contract `version`.
    pub(crate) async fn instantiate(
        store: &mut Store<HostState>,
        component: &Component,
        linker: &Linker<HostState>,
        world: World,
        version: Version,
    ) -> wasmtime::Result<Self> {
        Ok(match (version.major, version.minor) {
            (0, 1) => {
                Bindings::V0_1(v0_1::Plugin::instantiate(store, component, linker, world).await?)
            }
            (0, 2) => {
                Bindings::V0_2(v0_2::Plugin::instantiate(store, component, linker, world).await?)
            }
            (0, 3) => {
                Bindings::V0_3(v0_3::Plugin::instantiate(store, component, linker, world).await?)
            }
            (0, 4) => {
                Bindings::V0_4(v0_4::Plugin::instantiate(store, component, linker, world).await?)
            }
            _ => {
                return Err(wasmtime::format_err!(
                    "this worker has no bindings for contract {}@{version}",
                    crate::plugin::contract::PACKAGE
                ));
            }
        })
    }
}
