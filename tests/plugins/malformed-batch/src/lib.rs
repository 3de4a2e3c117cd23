//! Test plugin: a source that returns packed batches breaking the rules of contract 0.2.0's
//! `batch` interface, as `mode` says. Written against the raw bindings, because the SDK can only
//! pack correct batches. The worker must fail the task with a trace naming the broken rule.
//! - `span`: a value span that ends past the batch's data;
//! - `utf8`: a text value that is not UTF-8;
//! - `headers`: a header range past the batch's headers list;
//! - `columns`: a per-record list longer than the others.

// The raw exports only make sense in a WebAssembly build (a native `cargo build` of the
// workspace must not try to link them).
#[cfg(target_arch = "wasm32")]
mod plugin {
    wit_bindgen::generate!({
        world: "source-connector",
        path: "../../../wit/0.2.0",
    });

    use exports::wasm_connect::plugin::connector::Guest as ConnectorGuest;
    use exports::wasm_connect::plugin::source::{
        Guest as SourceGuest, GuestSourceTask, SourceTask,
    };
    use wasm_connect::plugin::batch::{DataColumn, HeaderRanges, SourceBatch, SpanColumn};
    use wasm_connect::plugin::types::{
        Config, ConfigDef, ConfigError, ConfigType, ConnectorKind, ConnectorSpec, Importance,
        PluginError,
    };

    struct Plugin;

    impl ConnectorGuest for Plugin {
        fn spec() -> ConnectorSpec {
            let def = |name: &str, documentation: &str| ConfigDef {
                name: name.to_owned(),
                type_: ConfigType::String,
                default_value: Some(String::new()),
                required: false,
                importance: Importance::Low,
                documentation: documentation.to_owned(),
                allowed_values: Vec::new(),
            };
            ConnectorSpec {
                name: "malformed-batch".to_owned(),
                version: "0.1.0".to_owned(),
                kind: ConnectorKind::Source,
                description: "Returns batches that break the packing rules".to_owned(),
                config_defs: vec![
                    def("mode", "span, utf8, headers or columns."),
                    def("topic", "Topic of the records."),
                ],
            }
        }

        fn validate(_config: Config) -> Vec<ConfigError> {
            Vec::new()
        }

        fn task_configs(config: Config, _max_tasks: u32) -> Result<Vec<Config>, PluginError> {
            Ok(vec![config])
        }
    }

    struct Task {
        mode: String,
    }

    impl SourceGuest for Plugin {
        type SourceTask = Task;
    }

    impl GuestSourceTask for Task {
        fn create(config: Config) -> Result<SourceTask, PluginError> {
            let mode = config
                .iter()
                .find(|(k, _)| k == "mode")
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            Ok(SourceTask::new(Task { mode }))
        }

        fn poll(&self, _max_records: u32) -> Result<SourceBatch, PluginError> {
            // data: `{}` (partition and offset) then `ok` (the value).
            let mut batch = SourceBatch {
                data: b"{}ok".to_vec(),
                topics: Vec::new(),
                topic: vec![-1],
                partition: vec![-1],
                timestamp: vec![-1],
                key: DataColumn {
                    kind: vec![0],
                    start: vec![0],
                    len: vec![0],
                },
                value: DataColumn {
                    kind: vec![2],
                    start: vec![2],
                    len: vec![2],
                },
                source_partition: SpanColumn {
                    start: vec![0],
                    len: vec![2],
                },
                source_offset: SpanColumn {
                    start: vec![0],
                    len: vec![2],
                },
                headers: Vec::new(),
                header_ranges: HeaderRanges {
                    first: vec![0],
                    count: vec![0],
                },
            };
            match self.mode.as_str() {
                "span" => batch.value.len[0] = 4000,
                "utf8" => batch.data[2] = 0xff,
                "headers" => batch.header_ranges.count[0] = 3,
                "columns" => batch.timestamp.push(7),
                other => return Err(PluginError::Fatal(format!("unknown mode {other:?}"))),
            }
            Ok(batch)
        }

        fn commit(
            &self,
            _positions: Vec<wasm_connect::plugin::types::SourcePosition>,
        ) -> Result<(), PluginError> {
            Ok(())
        }

        fn stop(&self) {}
    }

    export!(Plugin);
}
