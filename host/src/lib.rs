//! wasm-connect: a Kafka Connect worker whose connectors are WebAssembly components.
//!
//! - [`sandbox`]: the wasmtime engine, compile cache, limits, capabilities and instances.
//! - [`plugin`]: loading one plugin file and checking it against the contract.
//! - [`registry`]: the plugin directory, watched for changes.
//! - [`cli`]: the `wasm-connect` command line.

pub mod cli;
pub mod config_keys;
pub mod plugin;
pub mod registry;
pub mod sandbox;
