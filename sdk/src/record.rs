//! Records and positions that cross the boundary.
//!
//! `SourceRecord`, `SinkRecord`, `Data` and `Header` are the contract's `types.source-record`,
//! `types.sink-record`, `types.data` and `types.header`. They cross packed (`batch.wit`); the
//! SDK packs and unpacks them, so plugins never see the packed form.

pub use crate::bindings::wit::{
    RecordFailure, SourcePosition, TopicPartition, TopicPartitionOffset,
};

/// The key or value of a record. From a source task it tells the worker's converters how to
/// read the data; into a sink task the converter chose the case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    /// Opaque bytes (the `bytes` converter passes them through unchanged).
    Bytes(Vec<u8>),
    /// UTF-8 text.
    Text(String),
    /// A JSON document as text (the `json` converter can wrap it in a schema envelope).
    Json(String),
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

/// A Kafka record header; `None` is a null header value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub key: String,
    pub value: Option<Vec<u8>>,
}

/// A record produced by a source task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRecord {
    /// The Kafka topic; `None` means the connector config's `topic` key.
    pub topic: Option<String>,
    /// The Kafka partition; `None` (or a negative number) lets the producer's partitioner
    /// choose (by key).
    pub partition: Option<i32>,
    /// The record key; `None` is a null key.
    pub key: Option<Data>,
    /// The record value; `None` is a null value (a tombstone).
    pub value: Option<Data>,
    /// Headers, in order; duplicates are allowed, as in Kafka.
    pub headers: Vec<Header>,
    /// Milliseconds since the Unix epoch; `None` (or a negative number) lets the worker use
    /// the current time.
    pub timestamp: Option<i64>,
    /// Which part of the external system this record came from, as a JSON object text.
    pub source_partition: String,
    /// How far into that partition this record is, as a JSON object text. The worker records
    /// it once Kafka acknowledged this record and every earlier one of the same partition.
    pub source_offset: String,
    /// The key's Kafka Connect schema as JSON text, in the JsonConverter's form (e.g.
    /// `{"type":"int64","optional":false}`); `None`: the converter infers one if it needs it.
    pub key_schema: Option<String>,
    /// The value's Kafka Connect schema as JSON text, in the JsonConverter's form (e.g.
    /// `{"type":"struct","fields":[...],"optional":false,"name":"orders"}`), the value being
    /// its payload in that converter's encoding; `None`: the converter infers one if it needs
    /// it.
    pub value_schema: Option<String>,
}

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
            key_schema: None,
            value_schema: None,
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

/// A record consumed from Kafka and handed to a sink task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkRecord {
    pub topic: String,
    pub partition: i32,
    /// The record's offset in its partition.
    pub offset: i64,
    pub key: Option<Data>,
    pub value: Option<Data>,
    pub headers: Vec<Header>,
    /// Milliseconds since the Unix epoch, as stored in Kafka; `None` if the broker had none.
    pub timestamp: Option<i64>,
    /// The key's Kafka Connect schema (JSON text), where the worker's key converter has one
    /// (the json converter with `schemas.enable=true`).
    pub key_schema: Option<String>,
    /// The value's Kafka Connect schema (JSON text), where the worker's value converter has
    /// one (the json converter with `schemas.enable=true`).
    pub value_schema: Option<String>,
}
