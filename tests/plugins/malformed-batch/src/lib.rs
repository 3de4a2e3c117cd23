//! Test plugin: a source that returns packed batches breaking the rules of contract 0.2.0's
//! `batch` interface, as `mode` says. Written against the raw bindings, because the SDK can only
//! pack correct batches. The worker must fail the task with a trace naming the broken rule.
//! - `span`: a value span that ends past the batch's data;
//! - `utf8`: a text value that is not UTF-8;
//! - `headers`: a header range past the batch's headers list;
//! - `columns`: a per-record list longer than the others.
//! - `shared-headers`: a well-formed batch of as many records as asked for, all pointing at one
//!   list of `headers` headers (default 1000) with 1000-byte values: a few kilobytes from the
//!   plugin that would be gigabytes on the host.
//! - `aliased-topics`: a batch whose `topics` list has `aliases` (default 500 000) entries that
//!   all point at the same `alias.bytes` (default 16 384) bytes of the plugin's memory: 4 MB of
//!   list that would be 8 GB copied, string by string, onto the host.
//! - `aliased-read`: calls `offsets.read` with such a list of source partitions.

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
                    def(
                        "headers",
                        "Headers in the shared list (mode shared-headers).",
                    ),
                    def("aliases", "Entries of the aliased list (modes aliased-*)."),
                    def(
                        "alias.bytes",
                        "Bytes every aliased entry points at (modes aliased-*).",
                    ),
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
        headers: u32,
        aliases: usize,
        alias_bytes: usize,
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
            let number = |key: &str, default: usize| {
                config
                    .iter()
                    .find(|(k, _)| k == key)
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(default)
            };
            Ok(SourceTask::new(Task {
                mode,
                headers: number("headers", 1000) as u32,
                aliases: number("aliases", 500_000),
                alias_bytes: number("alias.bytes", 16_384),
            }))
        }

        fn poll(&self, max_records: u32) -> Result<SourceBatch, PluginError> {
            match self.mode.as_str() {
                "shared-headers" => return Ok(shared_headers(max_records, self.headers)),
                "aliased-read" => {
                    let partitions = aliased(self.aliases, self.alias_bytes);
                    let answers = wasm_connect::plugin::offsets::read(&partitions);
                    // The strings share one buffer: dropping them would free it many times.
                    std::mem::forget(partitions);
                    return Err(PluginError::Fatal(format!(
                        "the worker answered {} aliased partitions",
                        answers.len()
                    )));
                }
                _ => {}
            }
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
                "aliased-topics" => {
                    batch.topics = aliased(self.aliases, self.alias_bytes);
                    batch.topic[0] = 0;
                }
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

    /// `count` strings that all point at one buffer of `bytes` bytes, which is leaked: what a
    /// hostile plugin builds to make the host copy the same bytes `count` times.
    fn aliased(count: usize, bytes: usize) -> Vec<String> {
        let text: &'static mut str = Box::leak("t".repeat(bytes).into_boxed_str());
        let (ptr, len) = (text.as_mut_ptr(), text.len());
        (0..count)
            // SAFETY: none in Rust's terms, on purpose; the strings are only read (lowered
            // into the call) and never dropped.
            .map(|_| unsafe { String::from_raw_parts(ptr, len, len) })
            .collect()
    }

    /// `records` records (value `ok`, partition and offset `{}`), every one with the same list
    /// of `headers` headers `h` = 1000 bytes (one span shared by all).
    fn shared_headers(records: u32, headers: u32) -> SourceBatch {
        use wasm_connect::plugin::batch::{PackedHeader, Span};
        let n = records as usize;
        let mut data = b"{}okh".to_vec();
        data.extend(std::iter::repeat_n(b'v', 1000));
        SourceBatch {
            data,
            topics: Vec::new(),
            topic: vec![-1; n],
            partition: vec![-1; n],
            timestamp: vec![-1; n],
            key: DataColumn {
                kind: vec![0; n],
                start: vec![0; n],
                len: vec![0; n],
            },
            value: DataColumn {
                kind: vec![2; n],
                start: vec![2; n],
                len: vec![2; n],
            },
            source_partition: SpanColumn {
                start: vec![0; n],
                len: vec![2; n],
            },
            source_offset: SpanColumn {
                start: vec![0; n],
                len: vec![2; n],
            },
            headers: vec![
                PackedHeader {
                    key: Span { start: 4, len: 1 },
                    value: Some(Span {
                        start: 5,
                        len: 1000,
                    }),
                };
                headers as usize
            ],
            header_ranges: HeaderRanges {
                first: vec![0; n],
                count: vec![headers; n],
            },
        }
    }

    export!(Plugin);
}
