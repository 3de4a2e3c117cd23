//! Generated bindings of the `wasm-connect:plugin/sink-connector` world; types and host imports
//! are those of `wasm-connect-sdk-source-bindings`. Internal to `wasm-connect-sdk`.

// See the source bindings crate for why this alias exists.
extern crate self as wasm_connect_sdk;

#[doc(hidden)]
pub mod __rt {
    pub use wit_bindgen;
}

wit_bindgen::generate!({
    world: "sink-connector",
    path: "../../../wit/0.4.0",
    pub_export_macro: true,
    export_macro_name: "export_sink_world",
    default_bindings_module: "wasm_connect_sdk::bindings::sink",
    runtime_path: "wasm_connect_sdk::__rt::wit_bindgen::rt",
    with: {
        "wasm-connect:plugin/types@0.4.0": wasm_connect_sdk_source_bindings::wasm_connect::plugin::types,
        "wasm-connect:plugin/batch@0.4.0": wasm_connect_sdk_source_bindings::wasm_connect::plugin::batch,
        "wasm-connect:plugin/log@0.4.0": wasm_connect_sdk_source_bindings::wasm_connect::plugin::log,
        "wasm-connect:plugin/offsets@0.4.0": wasm_connect_sdk_source_bindings::wasm_connect::plugin::offsets,
        "wasm-connect:plugin/context@0.4.0": wasm_connect_sdk_source_bindings::wasm_connect::plugin::context,
        "wasm-connect:plugin/connector@0.4.0": generate,
        "wasm-connect:plugin/sink@0.4.0": generate,
    },
});
