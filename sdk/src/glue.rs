//! Adapters from the SDK traits to the generated world bindings. Used by the export macros only.

use std::cell::RefCell;
use std::marker::PhantomData;

use crate::bindings::{batch, sink, source, wit};
use crate::{
    Config, Connector, SinkConnector, SinkRecords, SinkTask, SourceBatch, SourceConnector,
    SourceTask,
};

/// The most records a poll's batch reserves room for up front; its lists grow past it. Kept
/// small because a source that returns few records (most polls of a slow source) would
/// otherwise make each of a batch's twelve lists a large allocation, whose boundary tags dirty
/// pages of guest memory: with room for 2 000 records, 1 000 idle `datagen` tasks took
/// 209 MiB instead of 147 MiB.
const MAX_PREALLOCATED: u32 = 64;

/// Exports a [`SourceConnector`] as the `source-connector` world.
pub struct SourcePlugin<C>(PhantomData<C>);

/// Exports a [`SinkConnector`] as the `sink-connector` world.
pub struct SinkPlugin<C>(PhantomData<C>);

/// A task behind a resource handle; the worker calls one method at a time.
pub struct TaskCell<T>(RefCell<T>);

type WitResult<T> = Result<T, wit::PluginError>;

fn validate<C: Connector>(config: wit::Config) -> Vec<wit::ConfigError> {
    C::validate(&Config::from(config))
        .into_iter()
        .map(Into::into)
        .collect()
}

/// A running connector and the config it was created with.
pub struct ConnectorCell<C> {
    connector: RefCell<C>,
    config: Config,
}

impl<C: Connector> ConnectorCell<C> {
    fn create(config: wit::Config) -> WitResult<Self> {
        let config = Config::from(config);
        let connector = C::create(&config)?;
        Ok(Self {
            connector: RefCell::new(connector),
            config,
        })
    }

    fn task_configs(&self, max_tasks: u32) -> WitResult<Vec<wit::Config>> {
        let configs = self
            .connector
            .borrow_mut()
            .task_configs(&self.config, max_tasks)?;
        Ok(configs.into_iter().map(Into::into).collect())
    }

    fn monitor(&self) -> WitResult<(bool, Option<u32>)> {
        let report = self.connector.borrow_mut().monitor(&self.config)?;
        let next = report
            .next_call
            .map(|d| u32::try_from(d.as_millis()).unwrap_or(u32::MAX));
        Ok((report.reconfigure, next))
    }

    fn stop(&self) {
        self.connector.borrow_mut().stop();
    }
}

/// The `connector` interface of world `$world` (`source` or `sink`) for plugin type `$plugin`
/// with bound `$bound`: the same code for both worlds, whose bindings have their own types.
macro_rules! connector_exports {
    ($world:ident, $plugin:ident, $bound:ident, $kind:ident) => {
        impl<C: $bound> $world::exports::wasm_connect::plugin::connector::Guest for $plugin<C> {
            type ConnectorInstance = ConnectorCell<C>;

            fn spec() -> wit::ConnectorSpec {
                C::spec().into_wit(wit::ConnectorKind::$kind)
            }
            fn validate(config: wit::Config) -> Vec<wit::ConfigError> {
                validate::<C>(config)
            }
        }

        impl<C: $bound> $world::exports::wasm_connect::plugin::connector::GuestConnectorInstance
            for ConnectorCell<C>
        {
            fn create(
                config: wit::Config,
            ) -> WitResult<$world::exports::wasm_connect::plugin::connector::ConnectorInstance>
            {
                Ok(
                    $world::exports::wasm_connect::plugin::connector::ConnectorInstance::new(
                        ConnectorCell::<C>::create(config)?,
                    ),
                )
            }
            fn task_configs(&self, max_tasks: u32) -> WitResult<Vec<wit::Config>> {
                ConnectorCell::task_configs(self, max_tasks)
            }
            fn monitor(
                &self,
            ) -> WitResult<$world::exports::wasm_connect::plugin::connector::MonitorReport> {
                let (reconfigure, next_call_ms) = ConnectorCell::monitor(self)?;
                Ok(
                    $world::exports::wasm_connect::plugin::connector::MonitorReport {
                        reconfigure,
                        next_call_ms,
                    },
                )
            }
            fn stop(&self) {
                ConnectorCell::stop(self)
            }
        }
    };
}

connector_exports!(source, SourcePlugin, SourceConnector, Source);
connector_exports!(sink, SinkPlugin, SinkConnector, Sink);

mod source_task {
    pub use crate::bindings::source::exports::wasm_connect::plugin::source::{
        Guest, GuestSourceTask, SourceTask as Handle,
    };
}

impl<C: SourceConnector> source_task::Guest for SourcePlugin<C> {
    type SourceTask = TaskCell<C::Task>;
}

impl<T: SourceTask> source_task::GuestSourceTask for TaskCell<T> {
    fn create(config: wit::Config) -> WitResult<source_task::Handle> {
        let task = T::create(Config::from(config))?;
        Ok(source_task::Handle::new(TaskCell(RefCell::new(task))))
    }
    fn poll(&self, max_records: u32) -> WitResult<batch::PolledBatch> {
        let mut batch = SourceBatch::with_capacity(max_records.min(MAX_PREALLOCATED) as usize);
        self.0.borrow_mut().poll_into(max_records, &mut batch)?;
        Ok(batch.finish())
    }
    fn commit(&self, positions: Vec<wit::SourcePosition>) -> WitResult<()> {
        Ok(self.0.borrow_mut().commit(positions)?)
    }
    fn stop(&self) {
        self.0.borrow_mut().stop();
    }
}

mod sink_task {
    pub use crate::bindings::sink::exports::wasm_connect::plugin::sink::{
        Guest, GuestSinkTask, SinkTask as Handle,
    };
}

impl<C: SinkConnector> sink_task::Guest for SinkPlugin<C> {
    type SinkTask = TaskCell<C::Task>;
}

impl<T: SinkTask> sink_task::GuestSinkTask for TaskCell<T> {
    fn create(config: wit::Config) -> WitResult<sink_task::Handle> {
        let task = T::create(Config::from(config))?;
        Ok(sink_task::Handle::new(TaskCell(RefCell::new(task))))
    }
    fn open(&self, partitions: Vec<wit::TopicPartition>) -> WitResult<()> {
        Ok(self.0.borrow_mut().open(partitions)?)
    }
    fn close(&self, partitions: Vec<wit::TopicPartition>) -> WitResult<()> {
        Ok(self.0.borrow_mut().close(partitions)?)
    }
    fn put(
        &self,
        batch: batch::SinkBatch,
        schemas: batch::SchemaColumns,
    ) -> WitResult<Vec<wit::RecordFailure>> {
        let records = SinkRecords::new(batch, schemas)?;
        Ok(self.0.borrow_mut().put(&records)?)
    }
    fn flush(
        &self,
        offsets: Vec<wit::TopicPartitionOffset>,
    ) -> WitResult<Vec<wit::TopicPartitionOffset>> {
        Ok(self.0.borrow_mut().flush(offsets)?)
    }
    fn stop(&self) {
        self.0.borrow_mut().stop();
    }
}
