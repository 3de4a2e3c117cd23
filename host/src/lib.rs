//! wasm-connect: a Kafka Connect worker whose connectors are WebAssembly components.
//!
//! - [`backoff`]: the one exponential backoff with jitter every retry and restart waits.
//! - [`sandbox`]: the wasmtime engine, compile cache, limits, capabilities and instances.
//! - [`plugin`]: loading one plugin file and checking it against the contract.
//! - [`registry`]: the plugin directory, watched for changes.
//! - [`config`]: worker and connector config files (.properties, .json, .toml).
//! - [`convert`]: key/value converters (string, bytes, json).
//! - [`kafka`]: the producer, consumers and topic creation (rdkafka).
//! - [`offsets`]: the source offset store and acknowledgement tracking.
//! - [`task`]: the source and sink task loops.
//! - [`errors`]: error tolerance, error logging and dead-letter queues.
//! - [`storage`]: the config log and status store behind traits (files and memory today).
//! - [`herder`]: decides what runs: the control loop and one actor per connector.
//! - [`worker`]: runs what the herder decided: connectors and tasks by id.
//! - [`broker`]: the embedded broker used when no cluster is configured.
//! - [`cli`]: the `wasm-connect` command line.

pub mod backoff;
pub mod broker;
pub mod cli;
pub mod config;
pub mod config_keys;
pub mod convert;
pub mod distributed;
pub mod errors;
pub mod herder;
pub mod kafka;
pub mod logging;
pub mod offsets;
pub mod plugin;
pub mod registry;
pub mod rest;
pub mod sandbox;
pub mod storage;
pub mod task;
pub mod transform;
pub mod worker;
