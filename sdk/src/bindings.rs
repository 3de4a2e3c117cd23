//! The generated bindings of both worlds (each in an internal crate of its own). Plugin authors
//! never use these directly: the traits and export macros of this crate wrap them.
//!
//! Both worlds share one set of types and host imports, so a `SourceRecord` is the same Rust
//! type whichever world a plugin implements. The export macros are expanded in the plugin crate,
//! which therefore carries only its own world's export metadata.

pub use wasm_connect_sdk_sink_bindings as sink;
pub use wasm_connect_sdk_source_bindings as source;

pub(crate) use source::wasm_connect::plugin::batch;
pub(crate) use source::wasm_connect::plugin::types as wit;
