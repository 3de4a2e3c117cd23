//! The traits a plugin implements: one connector plus its task type.

use crate::{
    Config, ConfigError, RecordFailure, Result, SinkRecords, SourcePosition, SourceRecord, Spec,
    TopicPartition, TopicPartitionOffset,
};

/// What every connector does: describe itself and split its job into task configs.
///
/// The worker creates one connector instance per configured connector, separate from the task
/// instances, so a connector keeps no state that tasks need: everything a task needs goes into
/// its task config.
pub trait Connector: 'static {
    /// Describe the plugin. Must not depend on config; the worker reads it once per load.
    fn spec() -> Spec;

    /// Checks beyond what the worker does from `spec().config_defs` (required keys, value
    /// types, allowed values). The default accepts everything.
    fn validate(_config: &Config) -> Vec<ConfigError> {
        Vec::new()
    }

    /// Split the job into at most `max_tasks` task configs. The default runs one task with the
    /// connector's own config. Returning more than `max_tasks` fails the connector.
    fn task_configs(config: &Config, max_tasks: u32) -> Result<Vec<Config>> {
        let _ = max_tasks;
        Ok(vec![config.clone()])
    }
}

/// A connector that reads from an external system into Kafka.
pub trait SourceConnector: Connector {
    /// The task type the worker runs for each task config.
    type Task: SourceTask;
}

/// One task of a source connector.
pub trait SourceTask: Sized + 'static {
    /// Create the task from its config; read the offsets to resume from here
    /// ([`crate::read_offsets`]).
    fn create(config: Config) -> Result<Self>;

    /// Return up to `max_records` new records; an empty vector when there is nothing right now.
    /// Return promptly: the call runs under a CPU deadline.
    fn poll(&mut self, max_records: u32) -> Result<Vec<SourceRecord>>;

    /// These offsets are durably recorded by the worker (the records up to them are in Kafka).
    fn commit(&mut self, positions: Vec<SourcePosition>) -> Result<()> {
        let _ = positions;
        Ok(())
    }

    /// The task is being stopped; no further calls follow.
    fn stop(&mut self) {}
}

/// A connector that writes from Kafka into an external system.
pub trait SinkConnector: Connector {
    /// The task type the worker runs for each task config.
    type Task: SinkTask;
}

/// One task of a sink connector.
pub trait SinkTask: Sized + 'static {
    /// Create the task from its config.
    fn create(config: Config) -> Result<Self>;

    /// These partitions were assigned to the task.
    fn open(&mut self, partitions: Vec<TopicPartition>) -> Result<()> {
        let _ = partitions;
        Ok(())
    }

    /// These partitions were taken away (after a `flush`).
    fn close(&mut self, partitions: Vec<TopicPartition>) -> Result<()> {
        let _ = partitions;
        Ok(())
    }

    /// Write (or buffer) a batch; return the records that could not be written, by index
    /// ([`crate::SinkRecordRef::index`]). The records are read in place from the batch the
    /// worker sent; [`crate::SinkRecordRef::to_record`] makes an owned copy of one.
    /// A [`crate::Error::Retriable`] error makes the worker deliver the same batch again.
    fn put(&mut self, records: &SinkRecords) -> Result<Vec<RecordFailure>>;

    /// Make everything passed to `put` durable and return the offsets safe to commit. The
    /// default returns `offsets` unchanged, which is right for a task that writes in `put`.
    fn flush(&mut self, offsets: Vec<TopicPartitionOffset>) -> Result<Vec<TopicPartitionOffset>> {
        Ok(offsets)
    }

    /// The task is being stopped (after a final `flush`); no further calls follow.
    fn stop(&mut self) {}
}
