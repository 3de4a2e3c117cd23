//! The records of one `SinkTask::put`, read in place from the packed batch the worker sent
//! (`wit/0.4.0/batch.wit`): no record is copied unless the plugin asks for an owned copy.

use crate::Error;
use crate::bindings::batch::{
    DataColumn, PackedHeader, SchemaColumns, SinkBatch, Span, SpanColumn,
};
use crate::packed::{BYTES, JSON, NULL, TEXT, Writer, data_column, topic_index};
use crate::record::{Data, Header, SinkRecord};

/// The records of one `put`, in offset order per partition. Iterate over `&records` (or
/// [`SinkRecords::iter`]) for [`SinkRecordRef`]s; [`SinkRecordRef::index`] is what a
/// [`crate::RecordFailure`] names.
pub struct SinkRecords {
    batch: SinkBatch,
    schemas: SchemaColumns,
}

/// A key or value, borrowed from the batch: [`Data`] without the copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataRef<'a> {
    /// Opaque bytes.
    Bytes(&'a [u8]),
    /// UTF-8 text.
    Text(&'a str),
    /// A JSON document as text.
    Json(&'a str),
}

impl<'a> DataRef<'a> {
    /// The data as bytes, whatever the case (text and JSON as UTF-8).
    pub fn as_bytes(&self) -> &'a [u8] {
        match self {
            DataRef::Bytes(b) => b,
            DataRef::Text(s) | DataRef::Json(s) => s.as_bytes(),
        }
    }

    /// An owned copy.
    pub fn to_data(&self) -> Data {
        match self {
            DataRef::Bytes(b) => Data::Bytes(b.to_vec()),
            DataRef::Text(s) => Data::Text((*s).to_owned()),
            DataRef::Json(s) => Data::Json((*s).to_owned()),
        }
    }
}

impl<'a> From<&'a Data> for DataRef<'a> {
    fn from(data: &'a Data) -> Self {
        match data {
            Data::Bytes(b) => DataRef::Bytes(b),
            Data::Text(s) => DataRef::Text(s),
            Data::Json(s) => DataRef::Json(s),
        }
    }
}

/// A header, borrowed from the batch; `value` `None` is a null header value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRef<'a> {
    pub key: &'a str,
    pub value: Option<&'a [u8]>,
}

/// One record of a [`SinkRecords`] batch.
#[derive(Clone, Copy)]
pub struct SinkRecordRef<'a> {
    batch: &'a SinkBatch,
    schemas: &'a SchemaColumns,
    index: usize,
}

impl SinkRecords {
    /// Check the batch's rules once, so that reading it later cannot fail.
    pub(crate) fn new(batch: SinkBatch, schemas: SchemaColumns) -> Result<Self, Error> {
        check(&batch, &schemas).map_err(|problem| {
            Error::fatal(format!(
                "the worker sent a malformed batch ({problem}); the worker and wasm-connect-sdk disagree on the contract"
            ))
        })?;
        Ok(Self { batch, schemas })
    }

    /// A batch of `records`, packed as the worker packs them: for a sink task's unit tests,
    /// which run natively, without a worker. Fails only past the contract's 4 GiB.
    pub fn from_records(records: &[SinkRecord]) -> Result<Self, Error> {
        let mut data = Writer(Vec::new());
        let mut batch = SinkBatch {
            data: Vec::new(),
            topics: Vec::new(),
            topic: Vec::new(),
            partition: Vec::new(),
            offset: Vec::new(),
            timestamp: Vec::new(),
            key: data_column(0),
            value: data_column(0),
            headers: Vec::new(),
            header_ranges: crate::bindings::batch::HeaderRanges {
                first: Vec::new(),
                count: Vec::new(),
            },
        };
        let index = |n: usize| u32::try_from(n).map_err(|_| Error::fatal("too many records"));
        let mut schemas = SchemaColumns {
            key: SpanColumn {
                start: Vec::new(),
                len: Vec::new(),
            },
            value: SpanColumn {
                start: Vec::new(),
                len: Vec::new(),
            },
        };
        for (i, record) in records.iter().enumerate() {
            let topic = topic_index(&mut batch.topics, &record.topic);
            batch.topic.push(index(topic)?);
            batch.partition.push(record.partition);
            batch.offset.push(record.offset);
            batch.timestamp.push(record.timestamp.unwrap_or(-1));
            data.data(record.key.as_ref().map(DataRef::from), &mut batch.key)?;
            data.data(record.value.as_ref().map(DataRef::from), &mut batch.value)?;
            data.headers(
                &record.headers,
                &mut batch.headers,
                &mut batch.header_ranges,
            )?;
            let (key, value) = (record.key_schema.as_deref(), record.value_schema.as_deref());
            crate::source_batch::push_schema(&mut data, &mut schemas.key, i, key)?;
            crate::source_batch::push_schema(&mut data, &mut schemas.value, i, value)?;
        }
        batch.data = data.0;
        Ok(Self { batch, schemas })
    }

    /// How many records the batch has.
    pub fn len(&self) -> usize {
        self.batch.topic.len()
    }

    /// Whether the batch has no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Record `index`, if the batch has it.
    pub fn get(&self, index: usize) -> Option<SinkRecordRef<'_>> {
        (index < self.len()).then_some(SinkRecordRef {
            batch: &self.batch,
            schemas: &self.schemas,
            index,
        })
    }

    /// The records, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = SinkRecordRef<'_>> {
        (0..self.len()).map(|index| SinkRecordRef {
            batch: &self.batch,
            schemas: &self.schemas,
            index,
        })
    }

    /// Owned copies of every record.
    pub fn to_vec(&self) -> Vec<SinkRecord> {
        self.iter().map(|r| r.to_record()).collect()
    }
}

impl<'a> IntoIterator for &'a SinkRecords {
    type Item = SinkRecordRef<'a>;
    type IntoIter = Box<dyn ExactSizeIterator<Item = SinkRecordRef<'a>> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl std::fmt::Debug for SinkRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl std::fmt::Debug for SinkRecordRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.to_record(), f)
    }
}

impl<'a> SinkRecordRef<'a> {
    /// The record's index in its batch (for [`crate::RecordFailure::index`]).
    pub fn index(&self) -> u32 {
        // A batch has at most u32::MAX records (its lists are indexed by u32).
        self.index as u32
    }

    /// The Kafka topic.
    pub fn topic(&self) -> &'a str {
        let topic = self.batch.topic[self.index] as usize;
        &self.batch.topics[topic]
    }

    /// The Kafka partition.
    pub fn partition(&self) -> i32 {
        self.batch.partition[self.index]
    }

    /// The record's offset in its partition.
    pub fn offset(&self) -> i64 {
        self.batch.offset[self.index]
    }

    /// Milliseconds since the Unix epoch, as stored in Kafka; `None` if the broker had none.
    pub fn timestamp(&self) -> Option<i64> {
        Some(self.batch.timestamp[self.index]).filter(|t| *t >= 0)
    }

    /// The key; `None` is a null key.
    pub fn key(&self) -> Option<DataRef<'a>> {
        data(self.batch, &self.batch.key, self.index)
    }

    /// The value; `None` is a null value (a tombstone).
    pub fn value(&self) -> Option<DataRef<'a>> {
        data(self.batch, &self.batch.value, self.index)
    }

    /// The key's Kafka Connect schema (JSON text, the JsonConverter's form), where the
    /// worker's key converter has one (`key.converter=json` with `schemas.enable=true`).
    pub fn key_schema(&self) -> Option<&'a str> {
        schema(self.batch, &self.schemas.key, self.index)
    }

    /// The value's Kafka Connect schema (JSON text, the JsonConverter's form), where the
    /// worker's value converter has one (`value.converter=json` with `schemas.enable=true`):
    /// then [`SinkRecordRef::value`] is the envelope's payload.
    pub fn value_schema(&self) -> Option<&'a str> {
        schema(self.batch, &self.schemas.value, self.index)
    }

    /// The headers, in order.
    pub fn headers(&self) -> impl ExactSizeIterator<Item = HeaderRef<'a>> + 'a {
        let batch = self.batch;
        let first = batch.header_ranges.first[self.index] as usize;
        let count = batch.header_ranges.count[self.index] as usize;
        batch.headers[first..first + count]
            .iter()
            .map(move |h| HeaderRef {
                key: text(batch, h.key),
                value: h.value.map(|v| bytes(batch, v)),
            })
    }

    /// An owned copy of the record.
    pub fn to_record(&self) -> SinkRecord {
        SinkRecord {
            topic: self.topic().to_owned(),
            partition: self.partition(),
            offset: self.offset(),
            key: self.key().map(|d| d.to_data()),
            value: self.value().map(|d| d.to_data()),
            headers: self
                .headers()
                .map(|h| Header {
                    key: h.key.to_owned(),
                    value: h.value.map(<[u8]>::to_vec),
                })
                .collect(),
            timestamp: self.timestamp(),
            key_schema: self.key_schema().map(str::to_owned),
            value_schema: self.value_schema().map(str::to_owned),
        }
    }
}

fn schema<'a>(batch: &'a SinkBatch, column: &SpanColumn, i: usize) -> Option<&'a str> {
    match (column.start.get(i), column.len.get(i)) {
        (Some(&start), Some(&len)) if len > 0 => Some(text(batch, Span { start, len })),
        _ => None,
    }
}

// The readers below index without checks: `check` proved every index in range when the batch
// arrived, and the batch is never changed afterwards.

fn bytes(batch: &SinkBatch, span: Span) -> &[u8] {
    &batch.data[span.start as usize..][..span.len as usize]
}

fn text(batch: &SinkBatch, span: Span) -> &str {
    // SAFETY: the contract guarantees that text spans of a batch the worker sends are UTF-8
    // (the worker packs them from Rust strings), as the canonical ABI guarantees it for
    // `string`s, which wit-bindgen does not check either. Checking again would cost the sink
    // path about 6 % (profiled: one pass over every key and value).
    unsafe { std::str::from_utf8_unchecked(bytes(batch, span)) }
}

fn data<'a>(batch: &'a SinkBatch, column: &DataColumn, i: usize) -> Option<DataRef<'a>> {
    let span = Span {
        start: column.start[i],
        len: column.len[i],
    };
    match column.kind[i] {
        BYTES => Some(DataRef::Bytes(bytes(batch, span))),
        TEXT => Some(DataRef::Text(text(batch, span))),
        JSON => Some(DataRef::Json(text(batch, span))),
        _ => None,
    }
}

/// Every rule of `batch.wit` for a sink batch but UTF-8 (see `text`), so the readers above
/// cannot fail.
fn check(batch: &SinkBatch, schemas: &SchemaColumns) -> Result<(), String> {
    let n = batch.topic.len();
    let lengths = [
        ("partition", batch.partition.len()),
        ("offset", batch.offset.len()),
        ("timestamp", batch.timestamp.len()),
        ("key.kind", batch.key.kind.len()),
        ("key.start", batch.key.start.len()),
        ("key.len", batch.key.len.len()),
        ("value.kind", batch.value.kind.len()),
        ("value.start", batch.value.start.len()),
        ("value.len", batch.value.len.len()),
        ("header-ranges.first", batch.header_ranges.first.len()),
        ("header-ranges.count", batch.header_ranges.count.len()),
    ];
    if let Some((list, len)) = lengths.iter().find(|(_, len)| *len != n) {
        return Err(format!("{list} has {len} entries for {n} records"));
    }
    u32::try_from(n).map_err(|_| format!("{n} records"))?;
    let span = |span: Span, what: &str| -> Result<&[u8], String> {
        let start = span.start as usize;
        start
            .checked_add(span.len as usize)
            .and_then(|end| batch.data.get(start..end))
            .ok_or_else(|| {
                format!(
                    "a {what} span ends past the batch's {} bytes",
                    batch.data.len()
                )
            })
    };
    for (name, column) in [
        ("key schema", &schemas.key),
        ("value schema", &schemas.value),
    ] {
        let (starts, lens) = (column.start.len(), column.len.len());
        if starts != lens || (starts != 0 && starts != n) {
            return Err(format!(
                "{name} has {starts} starts and {lens} lengths for {n} records"
            ));
        }
        for (&start, &len) in column.start.iter().zip(&column.len) {
            span(Span { start, len }, name)?;
        }
    }
    for (name, column) in [("key", &batch.key), ("value", &batch.value)] {
        for i in 0..n {
            let bytes = span(
                Span {
                    start: column.start[i],
                    len: column.len[i],
                },
                name,
            );
            match column.kind[i] {
                NULL => {}
                BYTES | TEXT | JSON => drop(bytes?),
                other => return Err(format!("{name} kind {other}")),
            }
        }
    }
    if let Some(t) = batch
        .topic
        .iter()
        .find(|t| **t as usize >= batch.topics.len())
    {
        return Err(format!("topic index {t} of {}", batch.topics.len()));
    }
    for i in 0..n {
        let first = batch.header_ranges.first[i] as usize;
        let count = batch.header_ranges.count[i] as usize;
        if first
            .checked_add(count)
            .is_none_or(|end| end > batch.headers.len())
        {
            return Err(format!(
                "record {i}'s headers end past the batch's {}",
                batch.headers.len()
            ));
        }
    }
    for PackedHeader { key, value } in &batch.headers {
        span(*key, "header key")?;
        if let Some(value) = value {
            span(*value, "header value")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::batch::HeaderRanges;

    fn sink_batch() -> SinkBatch {
        let span = |start, len| Span { start, len };
        SinkBatch {
            data: b"k1{\"a\":1}hv".to_vec(),
            topics: vec!["t".to_owned(), "u".to_owned()],
            topic: vec![1, 0],
            partition: vec![4, 0],
            offset: vec![9, 10],
            timestamp: vec![5, -1],
            key: DataColumn {
                kind: vec![TEXT, NULL],
                start: vec![0, 0],
                len: vec![2, 0],
            },
            value: DataColumn {
                kind: vec![JSON, BYTES],
                start: vec![2, 9],
                len: vec![7, 2],
            },
            headers: vec![PackedHeader {
                key: span(9, 1),
                value: None,
            }],
            header_ranges: HeaderRanges {
                first: vec![0, 1],
                count: vec![1, 0],
            },
        }
    }

    fn no_schemas() -> SchemaColumns {
        let empty = || SpanColumn {
            start: Vec::new(),
            len: Vec::new(),
        };
        SchemaColumns {
            key: empty(),
            value: empty(),
        }
    }

    #[test]
    fn schema_columns_are_checked_too() {
        let mut schemas = no_schemas();
        schemas.value.start = vec![0];
        schemas.value.len = vec![1];
        let err = SinkRecords::new(sink_batch(), schemas).unwrap_err();
        assert!(
            format!("{err:?}").contains("value schema has 1 starts"),
            "{err:?}"
        );
        let mut schemas = no_schemas();
        schemas.key.start = vec![0, 900];
        schemas.key.len = vec![0, 2];
        let err = SinkRecords::new(sink_batch(), schemas).unwrap_err();
        assert!(
            format!("{err:?}").contains("key schema span ends past"),
            "{err:?}"
        );
    }

    #[test]
    fn records_read_in_place() {
        let records = SinkRecords::new(sink_batch(), no_schemas()).unwrap();
        assert_eq!(records.len(), 2);
        let first = records.get(0).unwrap();
        assert_eq!(
            (
                first.topic(),
                first.partition(),
                first.offset(),
                first.timestamp()
            ),
            ("u", 4, 9, Some(5))
        );
        assert_eq!(first.key(), Some(DataRef::Text("k1")));
        assert_eq!(first.value(), Some(DataRef::Json("{\"a\":1}")));
        let headers: Vec<HeaderRef> = first.headers().collect();
        assert_eq!(
            headers,
            vec![HeaderRef {
                key: "h",
                value: None
            }]
        );
        let second = records.get(1).unwrap();
        assert_eq!(
            (second.topic(), second.key(), second.timestamp()),
            ("t", None, None)
        );
        assert_eq!(second.value().map(|v| v.as_bytes()), Some(&b"hv"[..]));
        assert_eq!(second.headers().count(), 0);
        assert!(records.get(2).is_none());
        let owned = records.to_vec();
        assert_eq!(owned[0].key, Some(Data::Text("k1".to_owned())));
        assert_eq!(owned[1].value, Some(Data::Bytes(b"hv".to_vec())));
        assert_eq!(
            (&records)
                .into_iter()
                .map(|r| r.index())
                .collect::<Vec<_>>(),
            vec![0, 1]
        );
    }

    #[test]
    fn records_survive_from_records() {
        let records = vec![
            SinkRecord {
                topic: "a".to_owned(),
                partition: 1,
                offset: 7,
                key: Some(Data::Bytes(vec![0, 255])),
                value: None,
                headers: vec![
                    Header {
                        key: "k".to_owned(),
                        value: Some(b"v".to_vec()),
                    },
                    Header {
                        key: "n".to_owned(),
                        value: None,
                    },
                ],
                timestamp: Some(3),
                key_schema: None,
                value_schema: None,
            },
            SinkRecord {
                topic: "b".to_owned(),
                partition: 0,
                offset: 8,
                key: Some(Data::Text("t".to_owned())),
                value: Some(Data::Json("{}".to_owned())),
                headers: Vec::new(),
                timestamp: None,
                key_schema: Some(r#"{"type":"string","optional":false}"#.to_owned()),
                value_schema: Some(r#"{"type":"struct","optional":true}"#.to_owned()),
            },
        ];
        let batch = SinkRecords::from_records(&records).unwrap();
        assert!(check(&batch.batch, &batch.schemas).is_ok());
        assert_eq!(batch.schemas.value.len[0], 0, "record 0 has no schema");
        assert_eq!(
            batch.get(1).unwrap().value_schema(),
            Some(r#"{"type":"struct","optional":true}"#)
        );
        assert_eq!(batch.to_vec(), records);
    }

    #[test]
    fn malformed_batches_are_fatal_errors() {
        let malformed = |change: fn(&mut SinkBatch)| {
            let mut batch = sink_batch();
            change(&mut batch);
            match SinkRecords::new(batch, no_schemas()) {
                Err(Error::Fatal(message)) => message,
                other => panic!("expected a fatal error, got {other:?}"),
            }
        };
        assert!(malformed(|b| b.topic[1] = 7).contains("topic index 7 of 2"));
        assert!(malformed(|b| b.value.len[0] = 50).contains("value span ends past"));
        assert!(malformed(|b| b.key.kind[1] = 4).contains("key kind 4"));
        assert!(malformed(|b| b.header_ranges.count[1] = 1).contains("record 1's headers"));
        assert!(
            malformed(|b| {
                b.offset.pop();
            })
            .contains("offset has 1 entries for 2 records")
        );
    }
}
