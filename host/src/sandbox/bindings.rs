//! Host-side bindings of every contract version the worker runs (`wit/<version>/`).
//!
//! The host's own record and config types are those of 0.1.0 (`types`): 0.2.0's `types`
//! interface has the same shape, so its bindings reuse them and only batches differ
//! (`super::packed` converts). Each version's sink world reuses its source world's imports.

/// Contract 0.1.0: records cross as lists of records.
pub mod v0_1 {
    /// The `source-connector` world, plus the shared types and imports.
    pub mod source {
        wasmtime::component::bindgen!({
            world: "source-connector",
            path: "../wit/0.1.0",
            imports: { "wasm-connect:plugin/offsets.read": trappable },
            exports: { default: async },
            additional_derives: [PartialEq, Eq],
        });
    }

    /// The `sink-connector` world.
    pub mod sink {
        wasmtime::component::bindgen!({
            world: "sink-connector",
            path: "../wit/0.1.0",
            exports: { default: async },
            with: {
                "wasm-connect:plugin/types": super::source::wasm_connect::plugin::types,
                "wasm-connect:plugin/log": super::source::wasm_connect::plugin::log,
                "wasm-connect:plugin/offsets": super::source::wasm_connect::plugin::offsets,
                "wasm-connect:plugin/context": super::source::wasm_connect::plugin::context,
            },
        });
    }
}

/// Contract 0.2.0: records cross as packed batches (`batch`).
pub mod v0_2 {
    /// The `source-connector` world, plus the batch types and imports.
    pub mod source {
        wasmtime::component::bindgen!({
            world: "source-connector",
            path: "../wit/0.2.0",
            imports: { "wasm-connect:plugin/offsets.read": trappable },
            exports: { default: async },
            additional_derives: [PartialEq, Eq],
            with: {
                "wasm-connect:plugin/types": crate::sandbox::bindings::types,
            },
        });
    }

    /// The `sink-connector` world.
    pub mod sink {
        wasmtime::component::bindgen!({
            world: "sink-connector",
            path: "../wit/0.2.0",
            exports: { default: async },
            with: {
                "wasm-connect:plugin/types": crate::sandbox::bindings::types,
                "wasm-connect:plugin/batch": super::source::wasm_connect::plugin::batch,
                "wasm-connect:plugin/log": super::source::wasm_connect::plugin::log,
                "wasm-connect:plugin/offsets": super::source::wasm_connect::plugin::offsets,
                "wasm-connect:plugin/context": super::source::wasm_connect::plugin::context,
            },
        });
    }
}

/// The host's record, config and error types (0.1.0's, shared by every version).
pub use v0_1::source::wasm_connect::plugin::types;
/// The packed batch types of 0.2.0.
pub use v0_2::source::wasm_connect::plugin::batch;
