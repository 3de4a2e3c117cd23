//! Generated bindings of the `wasm-connect:plugin/source-connector` world, with the types and
//! host imports both worlds share. Internal to `wasm-connect-sdk`; plugin authors use its
//! traits and `export_source_connector!` instead.
//!
//! Each world lives in a crate of its own because wit-bindgen names the per-interface export
//! macros after the interface (`connector` is exported by both worlds), and `#[macro_export]`
//! puts them at the crate root.

// The generated code and the export macros (expanded in plugin crates) reach the wit-bindgen
// runtime through `wasm_connect_sdk::__rt`; inside this crate that name means this crate.
extern crate self as wasm_connect_sdk;

#[doc(hidden)]
pub mod __rt {
    pub use wit_bindgen;
}

wit_bindgen::generate!({
    world: "source-connector",
    path: "../../../wit/0.4.0",
    pub_export_macro: true,
    export_macro_name: "export_source_world",
    default_bindings_module: "wasm_connect_sdk::bindings::source",
    runtime_path: "wasm_connect_sdk::__rt::wit_bindgen::rt",
    generate_all,
});
