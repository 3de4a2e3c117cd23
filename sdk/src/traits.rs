//! The traits a plugin implements: one connector plus its task type.

use crate::{
    Config, ConfigError, Error, RecordFailure, Result, SinkRecords, SourceBatch, SourcePosition,
    SourceRecord, Spec, TopicPartition, TopicPartitionOffset,
};

/// What every connector does: describe itself, check configs, and, as a running connector,
/// split its job into task configs and watch for changes to that split.
///
/// A value of the implementing type is one running connector: the worker calls
/// [`Connector::create`] when the connector starts and keeps the value (in an instance of the
/// plugin of its own, never shared with a task) until the connector gets a new config, is
/// restarted, moves to a new plugin build or is deleted, then calls [`Connector::stop`]. It may
/// keep state between calls, such as what it last saw of the external system. Everything a
/// task needs goes into its task config.
pub trait Connector: Sized + 'static {
    /// Describe the plugin. Must not depend on config; the worker reads it once per load.
    fn spec() -> Spec;

    /// Checks beyond what the worker does from `spec().config_defs` (required keys, value
    /// types, allowed values). The default accepts everything. Called before `create`. The REST
    /// validate endpoint calls it and then, for a valid config, also creates the connector,
    /// asks for its task configs and stops it (a split that fails for good is a problem with
    /// the config).
    fn validate(_config: &Config) -> Vec<ConfigError> {
        Vec::new()
    }

    /// Start the connector from its validated config (the operator's keys with the spec's
    /// defaults filled in). An [`Error::retriable`] is retried with backoff; any other error
    /// fails the connector.
    fn create(config: &Config) -> Result<Self>;

    /// Split the job into at most `max_tasks` task configs; `config` is the one the connector
    /// was created with. Called after `create` and whenever a new split was asked for (by
    /// [`Connector::monitor`] or [`crate::request_reconfiguration`]); the worker restarts the
    /// tasks only when the configs differ from the running ones. The default runs one task
    /// with the connector's own config. Returning more than `max_tasks` fails the connector.
    fn task_configs(&mut self, config: &Config, max_tasks: u32) -> Result<Vec<Config>> {
        let _ = max_tasks;
        Ok(vec![config.clone()])
    }

    /// Look at the external system and say whether the split of work changed; `config` is the
    /// one the connector was created with. The worker calls this every
    /// `connector.monitor.interval.ms` while the connector runs (or after the delay the last
    /// report asked for). The default reports no change. An [`Error::retriable`] is logged and
    /// the call repeated later; any other error fails the connector.
    fn monitor(&mut self, config: &Config) -> Result<MonitorReport> {
        let _ = config;
        Ok(MonitorReport::unchanged())
    }

    /// Release what `create` acquired; called once, before the connector goes away.
    fn stop(&mut self) {}
}

/// What one [`Connector::monitor`] call found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MonitorReport {
    /// The split of work changed: the worker asks for task configs again.
    pub reconfigure: bool,
    /// Wait this long before the next call instead of `connector.monitor.interval.ms` (at
    /// least 100 ms).
    pub next_call: Option<std::time::Duration>,
}

impl MonitorReport {
    /// Nothing changed; call again after the configured interval.
    pub fn unchanged() -> Self {
        Self::default()
    }

    /// The split of work changed.
    pub fn reconfigure() -> Self {
        Self {
            reconfigure: true,
            next_call: None,
        }
    }

    /// Ask for the next call after `delay` instead of the configured interval.
    pub fn next_call_in(self, delay: std::time::Duration) -> Self {
        Self {
            next_call: Some(delay),
            ..self
        }
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
    /// Return promptly: the call runs under a CPU deadline. Implement this or
    /// [`SourceTask::poll_into`].
    fn poll(&mut self, max_records: u32) -> Result<Vec<SourceRecord>> {
        let _ = max_records;
        Err(Error::fatal(
            "the plugin's SourceTask implements neither `poll` nor `poll_into`; implement one of them",
        ))
    }

    /// Add up to `max_records` new records to `batch`, which the worker reads as they are
    /// packed; add none when there is nothing right now. The same as [`SourceTask::poll`]
    /// (which the default calls), without an owned [`SourceRecord`] per record: fill it with
    /// [`SourceBatch::push_ref`] from borrowed fields and a task allocates nothing per record.
    /// On an error the records added are dropped, as if none had been returned, so a task
    /// that returns a retriable error must be able to produce them again.
    fn poll_into(&mut self, max_records: u32, batch: &mut SourceBatch) -> Result<()> {
        for record in self.poll(max_records)? {
            batch.push(&record)?;
        }
        Ok(())
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Data, json};

    struct Owned;
    impl SourceTask for Owned {
        fn create(_: Config) -> Result<Self> {
            Ok(Owned)
        }
        fn poll(&mut self, max_records: u32) -> Result<Vec<SourceRecord>> {
            let record = SourceRecord::new(&json!({}), &json!({}), Data::Text("x".into()));
            Ok(vec![record; max_records as usize])
        }
    }

    struct Neither;
    impl SourceTask for Neither {
        fn create(_: Config) -> Result<Self> {
            Ok(Neither)
        }
    }

    #[test]
    fn poll_into_defaults_to_poll_and_a_task_must_implement_one() {
        let mut batch = SourceBatch::with_capacity(0);
        Owned.poll_into(3, &mut batch).unwrap();
        assert_eq!(batch.len(), 3);
        let err = Neither.poll_into(3, &mut batch).unwrap_err().to_string();
        assert!(err.contains("neither `poll` nor `poll_into`"), "{err}");
    }
}
