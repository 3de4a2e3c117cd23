//! Configuration files: the worker config and connector configs, in Kafka Connect's
//! `.properties` and `.json` formats or our `.toml`.

pub mod connector;
pub mod file;
pub mod keys;
pub mod properties;
pub mod providers;
pub mod worker;

pub use connector::{ConnectorConfig, Problem};
pub use file::Pairs;
pub use worker::WorkerConfig;
