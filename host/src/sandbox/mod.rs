//! The sandbox: one wasmtime engine per worker, the compile cache, and plugin instances with
//! their limits and capabilities.
//!
//! - [`engine`]: the engine, epoch ticker, linker, store construction.
//! - [`cache`]: compiled components on disk, keyed by content and engine.
//! - [`capabilities`]: the only place a connector config turns into WASI permissions.
//! - `http`: outgoing HTTP (`wasi:http`), each request checked against the connector's grant
//!   and sent by the worker.
//! - `name_lookup`: `wasi:sockets/ip-name-lookup` answering only the names a connector is
//!   granted.
//! - [`limits`]: memory and CPU limits per instance.
//! - [`wit`]: the contract versions' bindings, one module each; the newest's types are the host's.
//! - [`instance`]: connector and task instances, the typed calls into a plugin.
//! - [`state`]: what a store holds, and the host side of the plugin's imports.
//! - `packed`: unpacking packed source batches (contract 0.2.0 on), checking every rule.
//! - [`put_batch`]: a sink's batch, packed as its records are consumed.

pub mod cache;
pub mod capabilities;
mod data_ref;
pub mod engine;
mod http;
pub mod instance;
pub mod limits;
mod name_lookup;
mod packed;
pub mod put_batch;
pub mod source_batch;
pub mod state;
mod stdio;
pub mod wit;

pub use cache::Origin;
pub use capabilities::Grants;
pub use data_ref::DataRef;
pub use engine::{InstanceContext, Sandbox};
pub use instance::{CallError, ConnectorInstance, SinkTaskInstance, SourceTaskInstance};
pub use limits::Limits;
pub use put_batch::{Fields, PutBatch};
pub use source_batch::{Polled, RecordRef};
pub use state::{NoOffsets, OffsetReader, Tags};
