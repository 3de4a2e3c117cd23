//! Constructors for the generated record types (inherent impls must live in this crate).

use crate::wasm_connect::plugin::types::{Data, Header, SourceRecord};

impl SourceRecord {
    /// A record with a value, from `source_partition` at `source_offset` (both JSON objects,
    /// e.g. `json!({"file": path})` and `json!({"position": 42})`), for the connector's default
    /// topic, with no key, headers or timestamp.
    pub fn new(
        source_partition: &serde_json::Value,
        source_offset: &serde_json::Value,
        value: Data,
    ) -> Self {
        Self {
            topic: None,
            partition: None,
            key: None,
            value: Some(value),
            headers: Vec::new(),
            timestamp: None,
            source_partition: source_partition.to_string(),
            source_offset: source_offset.to_string(),
        }
    }

    /// Set the key.
    pub fn with_key(mut self, key: Data) -> Self {
        self.key = Some(key);
        self
    }

    /// Send to `topic` instead of the connector's `topic`.
    pub fn with_topic(mut self, topic: impl Into<String>) -> Self {
        self.topic = Some(topic.into());
        self
    }

    /// Add a header.
    pub fn with_header(mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push(Header {
            key: key.into(),
            value: Some(value.into()),
        });
        self
    }

    /// Set the timestamp (milliseconds since the Unix epoch).
    pub fn with_timestamp(mut self, millis: i64) -> Self {
        self.timestamp = Some(millis);
        self
    }
}

impl Data {
    /// The data as bytes, whatever the case (text and JSON as UTF-8).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Data::Bytes(b) => b,
            Data::Text(s) | Data::Json(s) => s.as_bytes(),
        }
    }
}
