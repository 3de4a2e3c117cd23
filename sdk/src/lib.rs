#![doc = include_str!("../README.md")]

// Lets the generated bindings (and the export macros expanded in plugin crates) name this crate
// the same way from inside and outside.
extern crate self as wasm_connect_sdk;

#[doc(hidden)]
pub mod bindings;
mod config;
mod error;
#[doc(hidden)]
pub mod glue;
mod host;
mod packed;
mod record;
mod sink_records;
mod source_batch;
mod spec;
mod split;
mod traits;

pub use config::Config;
pub use error::{ConfigError, Error, Result};
pub use host::{log, read_offsets, request_reconfiguration};
pub use record::{
    Data, Header, RecordFailure, SinkRecord, SourcePosition, SourceRecord, TopicPartition,
    TopicPartitionOffset,
};
pub use sink_records::{DataRef, HeaderRef, SinkRecordRef, SinkRecords};
pub use source_batch::{SourceBatch, SourceRecordRef};
pub use spec::{ConfigDef, ConfigType, Importance, Spec};
pub use split::split_evenly;
pub use traits::{Connector, MonitorReport, SinkConnector, SinkTask, SourceConnector, SourceTask};

/// Re-exported so plugin crates need no direct dependency on `serde_json` for offsets.
pub use serde_json::{self, json};

#[doc(hidden)]
pub mod __rt {
    pub use wit_bindgen;
}

/// Export a [`SourceConnector`] (and its [`SourceTask`]) as this crate's component, implementing
/// the `wasm-connect:plugin/source-connector` world. Use it once, at the crate root.
#[macro_export]
macro_rules! export_source_connector {
    ($connector:ty) => {
        // Only a WebAssembly build exports the world; a native build of the same crate (for
        // its unit tests) has no component to be.
        #[doc(hidden)]
        #[cfg(target_arch = "wasm32")]
        type __WasmConnectSourcePlugin = $crate::glue::SourcePlugin<$connector>;
        #[cfg(target_arch = "wasm32")]
        $crate::bindings::source::export_source_world!(
            __WasmConnectSourcePlugin with_types_in $crate::bindings::source
        );
    };
}

/// Export a [`SinkConnector`] (and its [`SinkTask`]) as this crate's component, implementing
/// the `wasm-connect:plugin/sink-connector` world. Use it once, at the crate root.
#[macro_export]
macro_rules! export_sink_connector {
    ($connector:ty) => {
        // Only a WebAssembly build exports the world; a native build of the same crate (for
        // its unit tests) has no component to be.
        #[doc(hidden)]
        #[cfg(target_arch = "wasm32")]
        type __WasmConnectSinkPlugin = $crate::glue::SinkPlugin<$connector>;
        #[cfg(target_arch = "wasm32")]
        $crate::bindings::sink::export_sink_world!(
            __WasmConnectSinkPlugin with_types_in $crate::bindings::sink
        );
    };
}
