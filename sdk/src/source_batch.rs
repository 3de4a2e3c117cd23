//! The records of one `SourceTask::poll_into`, written straight into the packed batch the worker
//! reads (`wit/0.4.0/batch.wit`). A task that fills it from borrowed fields allocates nothing per
//! record (profiled: building an owned `SourceRecord` per record, and freeing it after packing,
//! was the largest cost of a no-op source plugin inside the sandbox).

use crate::Error;
use crate::bindings::batch::{self, HeaderRanges, PackedHeader, SchemaColumns, Span, SpanColumn};
use crate::packed::{Writer, data_column, same_bytes, to_u32, topic_index};
use crate::record::SourceRecord;
use crate::sink_records::{DataRef, HeaderRef};

/// A source record's fields, borrowed: what [`SourceBatch::push_ref`] packs. The fields mean
/// what [`SourceRecord`]'s do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceRecordRef<'a> {
    /// `None`: the connector config's `topic`.
    pub topic: Option<&'a str>,
    /// `None`: the producer's partitioner chooses (by key).
    pub partition: Option<i32>,
    /// `None`: a null key.
    pub key: Option<DataRef<'a>>,
    /// `None`: a null value (a tombstone).
    pub value: Option<DataRef<'a>>,
    pub headers: &'a [HeaderRef<'a>],
    /// Milliseconds since the Unix epoch; `None`: the worker's current time.
    pub timestamp: Option<i64>,
    /// JSON object text, e.g. `{"file":"/data/in.txt"}`.
    pub source_partition: &'a str,
    /// JSON object text, e.g. `{"position":42}`.
    pub source_offset: &'a str,
    /// The key's Kafka Connect schema (JSON text; see [`SourceRecord::key_schema`]).
    pub key_schema: Option<&'a str>,
    /// The value's Kafka Connect schema (JSON text; see [`SourceRecord::value_schema`]).
    pub value_schema: Option<&'a str>,
}

impl<'a> SourceRecordRef<'a> {
    /// A record with a value, from `source_partition` at `source_offset` (JSON object text),
    /// for the connector's default topic, with no key, headers or timestamp.
    pub fn new(source_partition: &'a str, source_offset: &'a str, value: DataRef<'a>) -> Self {
        Self {
            topic: None,
            partition: None,
            key: None,
            value: Some(value),
            headers: &[],
            timestamp: None,
            source_partition,
            source_offset,
            key_schema: None,
            value_schema: None,
        }
    }

    /// Set the key.
    pub fn with_key(mut self, key: DataRef<'a>) -> Self {
        self.key = Some(key);
        self
    }

    /// Send to `topic` instead of the connector's `topic`.
    pub fn with_topic(mut self, topic: &'a str) -> Self {
        self.topic = Some(topic);
        self
    }

    /// Give the key a Kafka Connect schema (JSON text).
    pub fn with_key_schema(mut self, schema: &'a str) -> Self {
        self.key_schema = Some(schema);
        self
    }

    /// Give the value a Kafka Connect schema (JSON text).
    pub fn with_value_schema(mut self, schema: &'a str) -> Self {
        self.value_schema = Some(schema);
        self
    }
}

/// Records for the worker, packed as they are added: what [`crate::SourceTask::poll_into`]
/// fills. Add at most the `max_records` the call was given: the worker fails a task that
/// returns more.
pub struct SourceBatch {
    data: Writer,
    batch: batch::SourceBatch,
    /// The previous record's source partition: a repeated one is stored once.
    previous_partition: Option<Span>,
    /// The records' schemas; a column stays empty until a record has such a schema.
    schemas: SchemaColumns,
}

impl SourceBatch {
    /// An empty batch with room for `records` records.
    pub(crate) fn with_capacity(records: usize) -> Self {
        let span_column = || SpanColumn {
            start: Vec::with_capacity(records),
            len: Vec::with_capacity(records),
        };
        SourceBatch {
            data: Writer(Vec::new()),
            batch: batch::SourceBatch {
                data: Vec::new(),
                topics: Vec::new(),
                topic: Vec::with_capacity(records),
                partition: Vec::with_capacity(records),
                timestamp: Vec::with_capacity(records),
                key: data_column(records),
                value: data_column(records),
                source_partition: span_column(),
                source_offset: span_column(),
                headers: Vec::new(),
                header_ranges: HeaderRanges {
                    first: Vec::with_capacity(records),
                    count: Vec::with_capacity(records),
                },
            },
            previous_partition: None,
            schemas: SchemaColumns {
                key: SpanColumn {
                    start: Vec::new(),
                    len: Vec::new(),
                },
                value: SpanColumn {
                    start: Vec::new(),
                    len: Vec::new(),
                },
            },
        }
    }

    /// How many records the batch has.
    pub fn len(&self) -> usize {
        self.batch.topic.len()
    }

    /// Whether the batch has no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Add a copy of `record`.
    pub fn push(&mut self, record: &SourceRecord) -> Result<(), Error> {
        let headers = record
            .headers
            .iter()
            .map(|h| (h.key.as_str(), h.value.as_deref()));
        self.add(
            SourceRecordRef {
                topic: record.topic.as_deref(),
                partition: record.partition,
                key: record.key.as_ref().map(DataRef::from),
                value: record.value.as_ref().map(DataRef::from),
                headers: &[],
                timestamp: record.timestamp,
                source_partition: &record.source_partition,
                source_offset: &record.source_offset,
                key_schema: record.key_schema.as_deref(),
                value_schema: record.value_schema.as_deref(),
            },
            headers,
        )
    }

    /// Add a copy of a record given by its borrowed fields (no allocation of its own).
    pub fn push_ref(&mut self, record: SourceRecordRef<'_>) -> Result<(), Error> {
        let headers = record.headers.iter().map(|h| (h.key, h.value));
        self.add(record, headers)
    }

    /// Fails only past the contract's 4 GiB of data or records per batch.
    fn add<'h>(
        &mut self,
        record: SourceRecordRef<'_>,
        headers: impl ExactSizeIterator<Item = (&'h str, Option<&'h [u8]>)>,
    ) -> Result<(), Error> {
        let batch = &mut self.batch;
        let topic = match record.topic {
            None => -1,
            Some(topic) => i32::try_from(to_u32(topic_index(&mut batch.topics, topic))?)
                .map_err(|_| Error::fatal("a poll returned more than 2^31 topics"))?,
        };
        batch.topic.push(topic);
        batch.partition.push(record.partition.unwrap_or(-1));
        batch.timestamp.push(record.timestamp.unwrap_or(-1));
        self.data.data(record.key, &mut batch.key)?;
        self.data.data(record.value, &mut batch.value)?;
        let partition = match self.previous_partition {
            Some(span) if same_bytes(self.data.get(span), record.source_partition.as_bytes()) => {
                span
            }
            _ => self.data.push(record.source_partition.as_bytes())?,
        };
        self.previous_partition = Some(partition);
        push_span(&mut batch.source_partition, partition);
        let offset = self.data.push(record.source_offset.as_bytes())?;
        push_span(&mut batch.source_offset, offset);
        let ranges = &mut batch.header_ranges;
        ranges.first.push(to_u32(batch.headers.len())?);
        ranges.count.push(to_u32(headers.len())?);
        for (key, value) in headers {
            let key = self.data.push(key.as_bytes())?;
            let value = value.map(|v| self.data.push(v)).transpose()?;
            batch.headers.push(PackedHeader { key, value });
        }
        let index = batch.topic.len() - 1;
        push_schema(
            &mut self.data,
            &mut self.schemas.key,
            index,
            record.key_schema,
        )?;
        push_schema(
            &mut self.data,
            &mut self.schemas.value,
            index,
            record.value_schema,
        )?;
        Ok(())
    }

    /// The batch as `source-task.poll` returns it.
    pub(crate) fn finish(self) -> batch::PolledBatch {
        let mut batch = self.batch;
        batch.data = self.data.0;
        batch::PolledBatch {
            records: batch,
            schemas: self.schemas,
        }
    }
}

/// Record `index`'s schema into `column`: an empty column until a record has a schema (then
/// length 0 for the records before it), and a schema equal to the previous record's shares its
/// span (a table's rows all carry the same one).
pub(crate) fn push_schema(
    data: &mut Writer,
    column: &mut SpanColumn,
    index: usize,
    schema: Option<&str>,
) -> Result<(), Error> {
    if column.len.is_empty() {
        if schema.is_none() {
            return Ok(());
        }
        column.start.resize(index, 0);
        column.len.resize(index, 0);
    }
    let span = match schema {
        None => Span { start: 0, len: 0 },
        Some(text) => match (column.start.last(), column.len.last()) {
            (Some(&start), Some(&len))
                if len > 0 && same_bytes(data.get(Span { start, len }), text.as_bytes()) =>
            {
                Span { start, len }
            }
            _ => data.push(text.as_bytes())?,
        },
    };
    push_span(column, span);
    Ok(())
}

fn push_span(column: &mut SpanColumn, span: Span) {
    column.start.push(span.start);
    column.len.push(span.len);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packed::{BYTES, JSON, NULL, TEXT};
    use crate::record::{Data, Header};

    fn source_record(n: u8) -> SourceRecord {
        SourceRecord {
            topic: (n == 1).then(|| "other".to_owned()),
            partition: (n != 2).then_some(n.into()),
            key: (n != 2).then(|| Data::Bytes(vec![n, 0, 255])),
            value: Some(Data::Json(format!("{{\"n\":{n}}}"))),
            headers: vec![Header {
                key: format!("h{n}"),
                value: (n == 0).then(|| b"v".to_vec()),
            }],
            timestamp: (n != 2).then_some(n.into()),
            source_partition: "{\"p\":0}".to_owned(),
            source_offset: format!("{{\"o\":{n}}}"),
            key_schema: None,
            value_schema: (n > 0).then(|| r#"{"type":"struct","optional":false}"#.to_owned()),
        }
    }

    fn text(batch: &batch::SourceBatch, start: u32, len: u32) -> String {
        String::from_utf8(batch.data[start as usize..][..len as usize].to_vec()).unwrap()
    }

    #[test]
    fn source_records_are_packed_column_by_column() {
        let mut packed = SourceBatch::with_capacity(0);
        for n in 0..3 {
            packed.push(&source_record(n)).unwrap();
        }
        assert_eq!(packed.len(), 3);
        let batch::PolledBatch {
            records: batch,
            schemas,
        } = packed.finish();
        // No key schemas: an empty column; value schemas from record 1 on, stored once.
        assert!(schemas.key.start.is_empty() && schemas.key.len.is_empty());
        assert_eq!(schemas.value.len[0], 0);
        assert_eq!(schemas.value.start[1], schemas.value.start[2]);
        assert_eq!(
            text(&batch, schemas.value.start[2], schemas.value.len[2]),
            r#"{"type":"struct","optional":false}"#
        );
        assert_eq!(batch.topics, vec!["other".to_owned()]);
        assert_eq!(batch.topic, vec![-1, 0, -1]);
        assert_eq!(batch.partition, vec![0, 1, -1]);
        assert_eq!(batch.timestamp, vec![0, 1, -1]);
        assert_eq!(batch.key.kind, vec![BYTES, BYTES, NULL]);
        assert_eq!(batch.value.kind, vec![JSON; 3]);
        let value = |i: usize| text(&batch, batch.value.start[i], batch.value.len[i]);
        assert_eq!(value(2), "{\"n\":2}");
        let key = &batch.data[batch.key.start[1] as usize..][..3];
        assert_eq!(key, [1, 0, 255]);
        // One partition text for all three records; one offset each.
        assert_eq!(
            batch.source_partition.start,
            vec![batch.source_partition.start[0]; 3]
        );
        let offset = |i: usize| {
            text(
                &batch,
                batch.source_offset.start[i],
                batch.source_offset.len[i],
            )
        };
        assert_eq!(offset(1), "{\"o\":1}");
        assert_eq!(batch.header_ranges.first, vec![0, 1, 2]);
        assert_eq!(batch.header_ranges.count, vec![1, 1, 1]);
        let header = &batch.headers[0];
        assert_eq!(text(&batch, header.key.start, header.key.len), "h0");
        let v = header.value.unwrap();
        assert_eq!(text(&batch, v.start, v.len), "v");
        assert!(batch.headers[1].value.is_none());
    }

    #[test]
    fn a_borrowed_record_packs_like_its_owned_copy() {
        let headers = [HeaderRef {
            key: "h",
            value: None,
        }];
        let borrowed = SourceRecordRef {
            headers: &headers,
            ..SourceRecordRef::new("{\"p\":1}", "{\"o\":7}", DataRef::Text("v"))
                .with_key(DataRef::Bytes(&[9]))
                .with_topic("t")
        };
        let owned = SourceRecord::new(
            &serde_json::json!({"p": 1}),
            &serde_json::json!({"o": 7}),
            Data::Text("v".into()),
        )
        .with_key(Data::Bytes(vec![9]))
        .with_topic("t");
        let owned = SourceRecord {
            headers: vec![Header {
                key: "h".into(),
                value: None,
            }],
            ..owned
        };
        let mut a = SourceBatch::with_capacity(1);
        a.push_ref(borrowed).unwrap();
        let mut b = SourceBatch::with_capacity(1);
        b.push(&owned).unwrap();
        let (a, b) = (a.finish().records, b.finish().records);
        assert_eq!(a.data, b.data);
        assert_eq!(a.topics, b.topics);
        assert_eq!(a.value.kind, vec![TEXT]);
        assert_eq!(a.key.kind, b.key.kind);
        assert_eq!(a.header_ranges.count, b.header_ranges.count);
        assert_eq!(a.headers[0].key.len, b.headers[0].key.len);
        // A second record of another partition stores its partition text anew.
        let mut c = SourceBatch::with_capacity(2);
        c.push_ref(SourceRecordRef::new("{}", "{}", DataRef::Text("x")))
            .unwrap();
        c.push_ref(SourceRecordRef::new("{\"q\":2}", "{}", DataRef::Text("x")))
            .unwrap();
        let c = c.finish().records;
        assert_ne!(c.source_partition.start[0], c.source_partition.start[1]);
        assert_eq!(
            text(&c, c.source_partition.start[1], c.source_partition.len[1]),
            "{\"q\":2}"
        );
    }
}
