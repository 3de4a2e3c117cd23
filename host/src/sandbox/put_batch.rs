//! The records of one `sink-task.put`, packed as contract 0.2.0's `sink-batch` while they are
//! consumed: each key, value and header is copied once, from the consumed message into the
//! batch's bytes, with no owned record in between (building a record per message and packing
//! it again was a large share of a sink task; see docs/benchmark-journal.md). Plugins built for
//! 0.1.0 get records unpacked from it.

use super::data_ref::DataRef;
use super::packed::{BYTES, JSON, NULL, Reader, TEXT, data_column, to_u32};
use super::wit::batch::{
    DataColumn, HeaderRanges, PackedHeader, SchemaColumns, SinkBatch, Span, SpanColumn,
};
use super::wit::types::SinkRecord;

/// One consumed record's fields, borrowed from the message and the converters' output.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: Option<i64>,
    pub key: Option<DataRef<'a>>,
    pub value: Option<DataRef<'a>>,
    /// The key's Kafka Connect schema (JSON text), where the key converter has one.
    pub key_schema: Option<&'a str>,
    /// The value's Kafka Connect schema (JSON text), where the value converter has one.
    pub value_schema: Option<&'a str>,
}

/// A packed batch for `put`, built record by record.
///
/// Invariant: each schema column is empty while no record of the batch has such a schema, and
/// has one entry per record from the first that has one (earlier records get length 0).
#[derive(Debug)]
pub struct PutBatch {
    batch: SinkBatch,
    schemas: SchemaColumns,
}

impl Default for PutBatch {
    fn default() -> Self {
        Self::with_capacity(0, 0)
    }
}

impl PutBatch {
    /// An empty batch with room for `records` records of `bytes` bytes in all.
    pub fn with_capacity(records: usize, bytes: usize) -> Self {
        Self {
            batch: SinkBatch {
                data: Vec::with_capacity(bytes),
                topics: Vec::new(),
                topic: Vec::with_capacity(records),
                partition: Vec::with_capacity(records),
                offset: Vec::with_capacity(records),
                timestamp: Vec::with_capacity(records),
                key: data_column(records),
                value: data_column(records),
                headers: Vec::new(),
                header_ranges: HeaderRanges {
                    first: Vec::with_capacity(records),
                    count: Vec::with_capacity(records),
                },
            },
            schemas: super::wit::no_schemas(),
        }
    }

    /// Pack `records` (tests, benchmarks, and retries of part of a batch).
    pub fn from_records(records: &[SinkRecord]) -> Result<Self, String> {
        let bytes = records
            .iter()
            .flat_map(|r| [&r.key, &r.value])
            .map(|d| d.as_ref().map_or(0, |d| DataRef::from(d).bytes().len()))
            .sum();
        let mut batch = Self::with_capacity(records.len(), bytes);
        for r in records {
            let fields = Fields {
                topic: &r.topic,
                partition: r.partition,
                offset: r.offset,
                timestamp: r.timestamp,
                key: r.key.as_ref().map(DataRef::from),
                value: r.value.as_ref().map(DataRef::from),
                key_schema: None,
                value_schema: None,
            };
            let headers = r
                .headers
                .iter()
                .map(|h| (h.key.as_str(), h.value.as_deref()));
            batch.push(fields, headers)?;
        }
        Ok(batch)
    }

    /// Append one record. Fails only when the batch's bytes would not fit the contract's
    /// 32-bit spans; the batch is then unusable.
    pub fn push<'h>(
        &mut self,
        fields: Fields<'_>,
        headers: impl IntoIterator<Item = (&'h str, Option<&'h [u8]>)>,
    ) -> Result<(), String> {
        let b = &mut self.batch;
        // Batches hold one or a few topics: a scan beats hashing.
        let topic = match b.topics.iter().rposition(|t| t == fields.topic) {
            Some(index) => index,
            None => {
                b.topics.push(fields.topic.to_owned());
                b.topics.len() - 1
            }
        };
        b.topic.push(to_u32(topic)?);
        b.partition.push(fields.partition);
        b.offset.push(fields.offset);
        b.timestamp.push(fields.timestamp.unwrap_or(-1));
        push_data(&mut b.data, fields.key, &mut b.key)?;
        push_data(&mut b.data, fields.value, &mut b.value)?;
        b.header_ranges.first.push(to_u32(b.headers.len())?);
        let mut count = 0u32;
        for (key, value) in headers {
            let key = push_bytes(&mut b.data, key.as_bytes())?;
            let value = value.map(|v| push_bytes(&mut b.data, v)).transpose()?;
            b.headers.push(PackedHeader { key, value });
            count += 1;
        }
        b.header_ranges.count.push(count);
        let index = b.topic.len() - 1;
        push_schema(&mut b.data, &mut self.schemas.key, index, fields.key_schema)?;
        push_schema(
            &mut b.data,
            &mut self.schemas.value,
            index,
            fields.value_schema,
        )?;
        Ok(())
    }

    /// Empty the batch, keeping its buffers for the next one.
    pub fn clear(&mut self) {
        let b = &mut self.batch;
        b.data.clear();
        b.topics.clear();
        b.topic.clear();
        b.partition.clear();
        b.offset.clear();
        b.timestamp.clear();
        for column in [&mut b.key, &mut b.value] {
            column.kind.clear();
            column.start.clear();
            column.len.clear();
        }
        b.headers.clear();
        b.header_ranges.first.clear();
        b.header_ranges.count.clear();
        for column in [&mut self.schemas.key, &mut self.schemas.value] {
            column.start.clear();
            column.len.clear();
        }
    }

    /// How many records the batch holds.
    pub fn len(&self) -> usize {
        self.batch.topic.len()
    }

    /// Whether the batch holds no records.
    pub fn is_empty(&self) -> bool {
        self.batch.topic.is_empty()
    }

    /// Record `index`, unpacked (for dead-letter copies and 0.1.0 plugins).
    pub fn record(&self, index: usize) -> Result<SinkRecord, String> {
        let b = &self.batch;
        if index >= self.len() {
            return Err(format!(
                "record {index} of a batch of {} was asked for",
                self.len()
            ));
        }
        // Checking the whole batch would cost more than this one record's fields.
        let reader = Reader::new(&b.data, &b.headers);
        let topic = b
            .topics
            .get(b.topic[index] as usize)
            .cloned()
            .ok_or_else(|| format!("record {index} names no topic of the batch"))?;
        Ok(SinkRecord {
            topic,
            partition: b.partition[index],
            offset: b.offset[index],
            key: reader.data(&b.key, index, "key")?,
            value: reader.data(&b.value, index, "value")?,
            headers: reader.headers(&b.header_ranges, index)?,
            timestamp: Some(b.timestamp[index]).filter(|t| *t >= 0),
        })
    }

    /// Every record, unpacked (what a 0.1.0 plugin's `put` takes).
    pub fn records(&self) -> Result<Vec<SinkRecord>, String> {
        (0..self.len()).map(|i| self.record(i)).collect()
    }

    /// A batch of the records at `indices`, in that order, with their schemas.
    pub fn subset(&self, indices: &[usize]) -> Result<Self, String> {
        let b = &self.batch;
        let reader = Reader::new(&b.data, &b.headers);
        let schema = |column: &SpanColumn, i: usize, field: &str| -> Result<Option<&str>, String> {
            match (column.start.get(i), column.len.get(i)) {
                (Some(&start), Some(&len)) if len > 0 => {
                    reader.text(Span { start, len }, field).map(Some)
                }
                _ => Ok(None),
            }
        };
        let mut subset = Self::with_capacity(indices.len(), 0);
        for &i in indices {
            let record = self.record(i)?;
            let fields = Fields {
                topic: &record.topic,
                partition: record.partition,
                offset: record.offset,
                timestamp: record.timestamp,
                key: record.key.as_ref().map(DataRef::from),
                value: record.value.as_ref().map(DataRef::from),
                key_schema: schema(&self.schemas.key, i, "key schema")?,
                value_schema: schema(&self.schemas.value, i, "value schema")?,
            };
            let headers = record
                .headers
                .iter()
                .map(|h| (h.key.as_str(), h.value.as_deref()));
            subset.push(fields, headers)?;
        }
        Ok(subset)
    }

    /// The batch and its schemas as the contract's types.
    pub(super) fn as_wit(&self) -> (&SinkBatch, &SchemaColumns) {
        (&self.batch, &self.schemas)
    }
}

fn push_bytes(data: &mut Vec<u8>, bytes: &[u8]) -> Result<Span, String> {
    let span = Span {
        start: to_u32(data.len())?,
        len: to_u32(bytes.len())?,
    };
    data.extend_from_slice(bytes);
    to_u32(data.len())?;
    Ok(span)
}

/// Record `index`'s schema into `column` (see [`PutBatch`]'s invariant). A schema equal to the
/// previous record's is not copied again: its span is shared, as the contract allows.
fn push_schema(
    data: &mut Vec<u8>,
    column: &mut SpanColumn,
    index: usize,
    schema: Option<&str>,
) -> Result<(), String> {
    if column.len.is_empty() {
        if schema.is_none() {
            return Ok(());
        }
        column.start.resize(index, 0);
        column.len.resize(index, 0);
    }
    let span = match schema {
        None => Span { start: 0, len: 0 },
        Some(text) => {
            let previous = match (column.start.last(), column.len.last()) {
                (Some(&start), Some(&len)) if len > 0 => data
                    .get(start as usize..start as usize + len as usize)
                    .filter(|bytes| *bytes == text.as_bytes())
                    .map(|_| Span { start, len }),
                _ => None,
            };
            match previous {
                Some(span) => span,
                None => push_bytes(data, text.as_bytes())?,
            }
        }
    };
    column.start.push(span.start);
    column.len.push(span.len);
    Ok(())
}

fn push_data(
    data: &mut Vec<u8>,
    field: Option<DataRef<'_>>,
    column: &mut DataColumn,
) -> Result<(), String> {
    let (kind, span) = match field {
        None => (NULL, Span { start: 0, len: 0 }),
        Some(d) => {
            let kind = match d {
                DataRef::Bytes(_) => BYTES,
                DataRef::Text(_) => TEXT,
                DataRef::Json(_) => JSON,
            };
            (kind, push_bytes(data, d.bytes())?)
        }
    };
    column.kind.push(kind);
    column.start.push(span.start);
    column.len.push(span.len);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::wit::types::Data;
    use crate::sandbox::wit::types::Header;

    fn sink_record(topic: &str, offset: i64) -> SinkRecord {
        SinkRecord {
            topic: topic.to_owned(),
            partition: 2,
            offset,
            key: Some(Data::Text(format!("k{offset}"))),
            value: match offset % 3 {
                0 => Some(Data::Json(format!("{{\"n\":{offset}}}"))),
                1 => Some(Data::Bytes(vec![offset as u8, 255])),
                _ => None,
            },
            headers: vec![
                Header {
                    key: "h".to_owned(),
                    value: Some(vec![offset as u8]),
                },
                Header {
                    key: "null".to_owned(),
                    value: None,
                },
            ],
            timestamp: (offset != 4).then_some(1_000 + offset),
        }
    }

    #[test]
    fn batches_carry_every_field_and_name_each_topic_once() {
        let records: Vec<SinkRecord> = (0..6)
            .map(|i| sink_record(if i < 3 { "a" } else { "b" }, i))
            .collect();
        let batch = PutBatch::from_records(&records).unwrap();
        let (wit, _) = batch.as_wit();
        assert_eq!(wit.topics, vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!(wit.topic, vec![0, 0, 0, 1, 1, 1]);
        assert_eq!(wit.headers.len(), 12);
        assert_eq!(wit.timestamp[4], -1);
        assert_eq!(batch.records().unwrap(), records);
        assert_eq!(batch.len(), 6);
        assert!(PutBatch::from_records(&[]).unwrap().is_empty());
        assert!(batch.record(6).unwrap_err().contains("batch of 6"));
        let mut reused = batch;
        reused.clear();
        assert!(reused.is_empty() && reused.as_wit().0.data.is_empty());
        reused
            .push(
                Fields {
                    topic: "c",
                    partition: 1,
                    offset: 0,
                    timestamp: Some(5),
                    key: None,
                    value: None,
                    key_schema: None,
                    value_schema: None,
                },
                [],
            )
            .unwrap();
        assert_eq!(reused.as_wit().0.topics, vec!["c".to_owned()]);
        assert_eq!(reused.record(0).unwrap().topic, "c");
    }

    #[test]
    fn a_subset_keeps_the_chosen_records_in_order() {
        let records: Vec<SinkRecord> = (0..6)
            .map(|i| sink_record(if i % 2 == 0 { "a" } else { "b" }, i))
            .collect();
        let batch = PutBatch::from_records(&records).unwrap();
        let subset = batch.subset(&[5, 1, 2]).unwrap();
        assert_eq!(
            subset.records().unwrap(),
            vec![records[5].clone(), records[1].clone(), records[2].clone()]
        );
        assert_eq!(
            subset.as_wit().0.topics,
            vec!["b".to_owned(), "a".to_owned()]
        );
    }

    #[test]
    fn schemas_are_packed_once_per_run_and_kept_by_subsets() {
        let schema = r#"{"type":"struct","fields":[],"optional":false}"#;
        let other = r#"{"type":"string","optional":false}"#;
        let mut batch = PutBatch::default();
        let push = |batch: &mut PutBatch, offset, value_schema| {
            let fields = Fields {
                topic: "t",
                partition: 0,
                offset,
                timestamp: None,
                key: None,
                value: Some(DataRef::Json("{}")),
                key_schema: None,
                value_schema,
            };
            batch.push(fields, []).unwrap();
        };
        push(&mut batch, 0, None);
        assert!(
            batch.as_wit().1.value.len.is_empty(),
            "no schema yet: empty"
        );
        push(&mut batch, 1, Some(schema));
        push(&mut batch, 2, Some(schema));
        push(&mut batch, 3, Some(other));
        let (wit, schemas) = batch.as_wit();
        assert!(schemas.key.len.is_empty());
        assert_eq!(schemas.value.len[0], 0);
        assert_eq!(
            schemas.value.start[1], schemas.value.start[2],
            "stored once"
        );
        let text = |i: usize| {
            let start = schemas.value.start[i] as usize;
            std::str::from_utf8(&wit.data[start..start + schemas.value.len[i] as usize]).unwrap()
        };
        assert_eq!((text(1), text(2), text(3)), (schema, schema, other));
        let subset = batch.subset(&[3, 0, 1]).unwrap();
        let (wit, schemas) = subset.as_wit();
        let text = |i: usize| {
            let start = schemas.value.start[i] as usize;
            std::str::from_utf8(&wit.data[start..start + schemas.value.len[i] as usize]).unwrap()
        };
        assert_eq!((text(0), text(1), text(2)), (other, "", schema));
        batch.clear();
        assert!(batch.as_wit().1.value.len.is_empty());
    }

    #[test]
    fn borrowed_fields_pack_like_owned_records() {
        let mut batch = PutBatch::default();
        let fields = Fields {
            topic: "t",
            partition: 0,
            offset: 9,
            timestamp: None,
            key: None,
            value: Some(DataRef::Text("é")),
            key_schema: None,
            value_schema: None,
        };
        batch
            .push(fields, [("k", Some(&b"v"[..])), ("n", None)])
            .unwrap();
        assert_eq!(
            batch.record(0).unwrap(),
            SinkRecord {
                topic: "t".to_owned(),
                partition: 0,
                offset: 9,
                key: None,
                value: Some(Data::Text("é".to_owned())),
                headers: vec![
                    Header {
                        key: "k".to_owned(),
                        value: Some(b"v".to_vec())
                    },
                    Header {
                        key: "n".to_owned(),
                        value: None
                    },
                ],
                timestamp: None,
            }
        );
    }
}
