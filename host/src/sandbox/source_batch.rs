//! What a source task's `poll` returned, read in place: the worker sends each record's key,
//! value and headers straight from the lifted batch to the producer, with no owned record in
//! between (unpacking into owned records cost allocations and copies per record, the largest
//! host cost of a source task; see docs/benchmark-journal.md).

use super::data_ref::DataRef;
use super::instance::CallError;
use super::wit::batch::{SchemaColumns, SourceBatch};
use super::wit::types::{Header, SourceRecord};

/// One polled batch, as the plugin's contract version lifted it.
pub struct Polled {
    batch: Batch,
    /// The plugin's memory limit, which caps what a packed batch may describe.
    max_bytes: usize,
}

enum Batch {
    /// Contract 0.1.0: a list of records.
    Records(Vec<SourceRecord>),
    /// Contract 0.2.0 on: a packed batch and its schemas (none before 0.4.0), not yet checked.
    Packed(Box<(SourceBatch, SchemaColumns)>),
}

/// A header's key and value (`None`: null), borrowed.
pub type HeaderRef<'a> = (&'a str, Option<&'a [u8]>);

/// One record of a polled batch, borrowed from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub topic: Option<&'a str>,
    pub partition: Option<i32>,
    pub key: Option<DataRef<'a>>,
    pub value: Option<DataRef<'a>>,
    /// Keys and values; empty (no allocation) for a record without headers.
    pub headers: Vec<HeaderRef<'a>>,
    pub timestamp: Option<i64>,
    pub source_partition: &'a str,
    pub source_offset: &'a str,
    /// The key's Kafka Connect schema (JSON text), if the plugin gave one (0.4.0 on).
    pub key_schema: Option<&'a str>,
    /// The value's Kafka Connect schema (JSON text), if the plugin gave one (0.4.0 on).
    pub value_schema: Option<&'a str>,
}

impl Polled {
    pub(super) fn records(records: Vec<SourceRecord>, max_bytes: usize) -> Self {
        Polled {
            batch: Batch::Records(records),
            max_bytes,
        }
    }

    pub(super) fn packed(batch: SourceBatch, schemas: SchemaColumns, max_bytes: usize) -> Self {
        Polled {
            batch: Batch::Packed(Box::new((batch, schemas))),
            max_bytes,
        }
    }

    /// How many records the plugin returned.
    pub fn len(&self) -> usize {
        match &self.batch {
            Batch::Records(records) => records.len(),
            Batch::Packed(packed) => packed.0.topic.len(),
        }
    }

    /// Whether the plugin returned no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every record, borrowed; a packed batch that breaks a rule of the contract is refused
    /// whole (a contract violation of `poll`), before any record is used.
    pub fn read(&self) -> Result<Vec<RecordRef<'_>>, CallError> {
        self.read_within(usize::MAX, usize::MAX)
    }

    /// [`Polled::read`], refusing a packed batch whose records would add up to more than
    /// `batch_bytes` on the host or carry more than `record_headers` headers each, before
    /// anything is allocated for them (a 0.1.0 batch arrives as records, already bounded by
    /// the plugin's memory limit).
    pub fn read_within(
        &self,
        batch_bytes: usize,
        record_headers: usize,
    ) -> Result<Vec<RecordRef<'_>>, CallError> {
        use super::packed::{BatchError, Budget};
        match &self.batch {
            Batch::Records(records) => Ok(records.iter().map(RecordRef::from).collect()),
            Batch::Packed(packed) => {
                let (batch, schemas) = &**packed;
                let budget = Budget {
                    memory_bytes: self.max_bytes,
                    batch_bytes,
                    record_headers,
                };
                super::packed::view_source_within(batch, schemas, budget).map_err(|e| {
                    let message = match e {
                        BatchError::Malformed(m) => {
                            format!("the task returned a malformed batch: {m}")
                        }
                        BatchError::OverBudget(m) => {
                            format!("the task returned a batch over the worker's limits: {m}")
                        }
                    };
                    CallError::Contract {
                        function: "poll",
                        message,
                    }
                })
            }
        }
    }
}

impl RecordRef<'_> {
    /// The bytes the record carries (key, value, header keys and values), which the worker's
    /// record and in-flight limits count.
    pub fn size(&self) -> usize {
        let data = |d: &Option<DataRef<'_>>| d.map_or(0, |d| d.bytes().len());
        data(&self.key)
            + data(&self.value)
            + self
                .headers
                .iter()
                .map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len))
                .sum::<usize>()
    }

    /// An owned copy (without its schemas, which the contract's record does not carry).
    pub fn to_record(&self) -> SourceRecord {
        SourceRecord {
            topic: self.topic.map(str::to_owned),
            partition: self.partition,
            key: self.key.map(|d| d.to_data()),
            value: self.value.map(|d| d.to_data()),
            headers: self
                .headers
                .iter()
                .map(|(key, value)| Header {
                    key: (*key).to_owned(),
                    value: value.map(<[u8]>::to_vec),
                })
                .collect(),
            timestamp: self.timestamp,
            source_partition: self.source_partition.to_owned(),
            source_offset: self.source_offset.to_owned(),
        }
    }
}

impl<'a> From<&'a SourceRecord> for RecordRef<'a> {
    fn from(r: &'a SourceRecord) -> Self {
        RecordRef {
            topic: r.topic.as_deref(),
            partition: r.partition,
            key: r.key.as_ref().map(DataRef::from),
            value: r.value.as_ref().map(DataRef::from),
            headers: r
                .headers
                .iter()
                .map(|h| (h.key.as_str(), h.value.as_deref()))
                .collect(),
            timestamp: r.timestamp,
            source_partition: &r.source_partition,
            source_offset: &r.source_offset,
            key_schema: None,
            value_schema: None,
        }
    }
}
