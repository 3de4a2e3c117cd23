//! Host-side bindings of the two worlds of `wit/`. The sink world reuses the source world's
//! types and host imports so both worlds share one set of Rust types and one host implementation.

/// The `source-connector` world, plus the shared types and imports.
pub mod source {
    wasmtime::component::bindgen!({
        world: "source-connector",
        path: "../wit",
        exports: { default: async },
        additional_derives: [PartialEq, Eq],
    });
}

/// The `sink-connector` world.
pub mod sink {
    wasmtime::component::bindgen!({
        world: "sink-connector",
        path: "../wit",
        exports: { default: async },
        with: {
            "wasm-connect:plugin/types": super::source::wasm_connect::plugin::types,
            "wasm-connect:plugin/log": super::source::wasm_connect::plugin::log,
            "wasm-connect:plugin/offsets": super::source::wasm_connect::plugin::offsets,
            "wasm-connect:plugin/context": super::source::wasm_connect::plugin::context,
        },
    });
}

pub use source::wasm_connect::plugin::types;
