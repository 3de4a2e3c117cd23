//! The worker's state behind traits, as Kafka Connect keeps it in its backing stores:
//!
//! - [`ConfigLog`] (`config.rs`): connector configs, task configs and target states, each
//!   change an event with an offset. The control loop applies a request by appending it and
//!   reacts to the event it reads back, so what runs is always what was stored. Standalone:
//!   [`FileConfigLog`] (`connectors.json` in the data directory).
//! - [`StatusStore`] (`status.rs`): the last reported state of every connector and task,
//!   written by whoever runs it. Standalone: [`MemoryStatusStore`] (as Kafka Connect's
//!   standalone worker, statuses are not kept across restarts).
//! - The offset store is `crate::offsets::OffsetStore`.
//!
//! Distributed mode adds Kafka-topic implementations behind the same traits.

pub mod config;
pub mod config_file;
pub mod status;

pub use config::{
    ConfigEvent, ConfigLog, ConfigRecord, ConfigState, ConnectorTaskId, Pairs, StoredConnector,
    TargetState,
};
pub use config_file::FileConfigLog;
pub use status::{ConnectorState, MemoryStatusStore, StatusStore, StoredStatus};
