//! Packed batches (contract 0.2.0, `wit/0.2.0/batch.wit`) to and from the host's record types:
//! the host packs what it hands a sink and unpacks, checking every rule, what a source returns.

use super::bindings::batch::{
    DataKind, PackedHeader, PackedSinkRecord, PackedSourceRecord, SinkBatch, SourceBatch, Span,
};
use super::bindings::types::{Data, Header, SinkRecord, SourceRecord};

/// Pack `records` for `sink-task.put`. Fails only when the batch's bytes would not fit the
/// contract's 32-bit spans.
pub fn pack_sink(records: &[SinkRecord]) -> Result<SinkBatch, String> {
    let mut writer = Writer::with_capacity(
        records
            .iter()
            .map(|r| data_len(r.key.as_ref()) + data_len(r.value.as_ref()))
            .sum(),
    );
    let mut topics: Vec<String> = Vec::new();
    let mut packed = Vec::with_capacity(records.len());
    let mut headers = Vec::new();
    for record in records {
        // Batches hold one or a few topics: a scan beats hashing.
        let topic = match topics.iter().rposition(|t| *t == record.topic) {
            Some(index) => index,
            None => {
                topics.push(record.topic.clone());
                topics.len() - 1
            }
        };
        let (key_kind, key) = writer.data(record.key.as_ref())?;
        let (value_kind, value) = writer.data(record.value.as_ref())?;
        packed.push(PackedSinkRecord {
            topic: to_u32(topic)?,
            partition: record.partition,
            offset: record.offset,
            key_kind,
            key,
            value_kind,
            value,
            headers: writer.headers(&record.headers, &mut headers)?,
            timestamp: record.timestamp,
        });
    }
    Ok(SinkBatch {
        data: writer.data,
        topics,
        records: packed,
        headers,
    })
}

/// Unpack what `source-task.poll` returned, or say which rule of the contract it breaks.
pub fn unpack_source(batch: SourceBatch) -> Result<Vec<SourceRecord>, String> {
    let reader = Reader {
        data: &batch.data,
        headers: &batch.headers,
    };
    batch
        .records
        .iter()
        .enumerate()
        .map(|(index, packed)| {
            reader
                .source_record(packed)
                .map_err(|problem| format!("record {index} of the batch: {problem}"))
        })
        .collect()
}

fn data_len(data: Option<&Data>) -> usize {
    data.map_or(0, |d| match d {
        Data::Bytes(b) => b.len(),
        Data::Text(s) | Data::Json(s) => s.len(),
    })
}

fn to_u32(n: usize) -> Result<u32, String> {
    u32::try_from(n).map_err(|_| {
        format!("a batch of more than {} bytes or records cannot be packed; lower the sink batch size (consumer.max.poll.records)", u32::MAX)
    })
}

/// Appends fields to a batch's `data`.
struct Writer {
    data: Vec<u8>,
}

impl Writer {
    fn with_capacity(bytes: usize) -> Self {
        Self {
            data: Vec::with_capacity(bytes),
        }
    }

    fn bytes(&mut self, bytes: &[u8]) -> Result<Span, String> {
        let span = Span {
            start: to_u32(self.data.len())?,
            len: to_u32(bytes.len())?,
        };
        self.data.extend_from_slice(bytes);
        to_u32(self.data.len())?;
        Ok(span)
    }

    fn data(&mut self, data: Option<&Data>) -> Result<(DataKind, Span), String> {
        let (kind, bytes) = match data {
            None => return Ok((DataKind::Null, Span { start: 0, len: 0 })),
            Some(Data::Bytes(b)) => (DataKind::Bytes, b.as_slice()),
            Some(Data::Text(s)) => (DataKind::Text, s.as_bytes()),
            Some(Data::Json(s)) => (DataKind::Json, s.as_bytes()),
        };
        Ok((kind, self.bytes(bytes)?))
    }

    /// Append `headers` to the batch's list; the span of the appended entries.
    fn headers(&mut self, headers: &[Header], all: &mut Vec<PackedHeader>) -> Result<Span, String> {
        let start = to_u32(all.len())?;
        for header in headers {
            let key = self.bytes(header.key.as_bytes())?;
            let value = match &header.value {
                Some(v) => Some(self.bytes(v)?),
                None => None,
            };
            all.push(PackedHeader { key, value });
        }
        Ok(Span {
            start,
            len: to_u32(headers.len())?,
        })
    }
}

/// Reads fields out of a batch a plugin returned, checking each span.
struct Reader<'a> {
    data: &'a [u8],
    headers: &'a [PackedHeader],
}

impl<'a> Reader<'a> {
    fn bytes(&self, span: Span, field: &str) -> Result<&'a [u8], String> {
        let start = span.start as usize;
        start
            .checked_add(span.len as usize)
            .and_then(|end| self.data.get(start..end))
            .ok_or_else(|| {
                format!(
                    "its {field} span ({} bytes from byte {}) lies outside the batch's {} data bytes",
                    span.len,
                    span.start,
                    self.data.len()
                )
            })
    }

    fn text(&self, span: Span, field: &str) -> Result<String, String> {
        let bytes = self.bytes(span, field)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| format!("its {field} is not valid UTF-8"))
    }

    fn data(&self, kind: DataKind, span: Span, field: &str) -> Result<Option<Data>, String> {
        Ok(match kind {
            DataKind::Null => None,
            DataKind::Bytes => Some(Data::Bytes(self.bytes(span, field)?.to_vec())),
            DataKind::Text => Some(Data::Text(self.text(span, field)?)),
            DataKind::Json => Some(Data::Json(self.text(span, field)?)),
        })
    }

    fn headers(&self, span: Span) -> Result<Vec<Header>, String> {
        let start = span.start as usize;
        let entries = start
            .checked_add(span.len as usize)
            .and_then(|end| self.headers.get(start..end))
            .ok_or_else(|| {
                format!(
                    "its headers span ({} entries from entry {}) lies outside the batch's {} headers",
                    span.len,
                    span.start,
                    self.headers.len()
                )
            })?;
        entries
            .iter()
            .map(|h| {
                Ok(Header {
                    key: self.text(h.key, "header key")?,
                    value: match h.value {
                        Some(v) => Some(self.bytes(v, "header value")?.to_vec()),
                        None => None,
                    },
                })
            })
            .collect()
    }

    fn source_record(&self, packed: &PackedSourceRecord) -> Result<SourceRecord, String> {
        Ok(SourceRecord {
            topic: match packed.topic {
                Some(span) => Some(self.text(span, "topic")?),
                None => None,
            },
            partition: packed.partition,
            key: self.data(packed.key_kind, packed.key, "key")?,
            value: self.data(packed.value_kind, packed.value, "value")?,
            headers: self.headers(packed.headers)?,
            timestamp: packed.timestamp,
            source_partition: self.text(packed.source_partition, "source partition")?,
            source_offset: self.text(packed.source_offset, "source offset")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink_record(topic: &str, offset: i64) -> SinkRecord {
        SinkRecord {
            topic: topic.to_owned(),
            partition: 2,
            offset,
            key: Some(Data::Text(format!("k{offset}"))),
            value: if offset % 2 == 0 {
                Some(Data::Json(format!("{{\"n\":{offset}}}")))
            } else {
                None
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
            timestamp: Some(1_000 + offset),
        }
    }

    /// Reads a sink batch back the way a guest SDK would, through the source-side reader.
    fn read_sink(batch: &SinkBatch) -> Vec<SinkRecord> {
        let reader = Reader {
            data: &batch.data,
            headers: &batch.headers,
        };
        batch
            .records
            .iter()
            .map(|p| SinkRecord {
                topic: batch.topics[p.topic as usize].clone(),
                partition: p.partition,
                offset: p.offset,
                key: reader.data(p.key_kind, p.key, "key").unwrap(),
                value: reader.data(p.value_kind, p.value, "value").unwrap(),
                headers: reader.headers(p.headers).unwrap(),
                timestamp: p.timestamp,
            })
            .collect()
    }

    #[test]
    fn sink_batches_carry_every_field_and_name_each_topic_once() {
        let records: Vec<SinkRecord> = (0..5)
            .map(|i| sink_record(if i < 3 { "a" } else { "b" }, i))
            .collect();
        let batch = pack_sink(&records).unwrap();
        assert_eq!(batch.topics, vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!(batch.records.len(), 5);
        assert_eq!(batch.headers.len(), 10);
        assert_eq!(read_sink(&batch), records);
        assert_eq!(pack_sink(&[]).unwrap().records, Vec::new());
    }

    fn source_batch() -> SourceBatch {
        // "t" "k" "{\"v\":1}" "{\"f\":1}" "{\"p\":1}" "hk" "hv"
        let data = b"tk{\"v\":1}{\"f\":1}{\"p\":1}hkhv".to_vec();
        let span = |start, len| Span { start, len };
        SourceBatch {
            data,
            records: vec![
                PackedSourceRecord {
                    topic: Some(span(0, 1)),
                    partition: Some(3),
                    key_kind: DataKind::Bytes,
                    key: span(1, 1),
                    value_kind: DataKind::Json,
                    value: span(2, 7),
                    headers: span(0, 1),
                    timestamp: Some(7),
                    source_partition: span(9, 7),
                    source_offset: span(16, 7),
                },
                PackedSourceRecord {
                    topic: None,
                    partition: None,
                    key_kind: DataKind::Null,
                    key: span(999, 999),
                    value_kind: DataKind::Text,
                    value: span(1, 1),
                    headers: span(1, 0),
                    timestamp: None,
                    source_partition: span(9, 7),
                    source_offset: span(16, 7),
                },
            ],
            headers: vec![PackedHeader {
                key: span(23, 2),
                value: Some(span(25, 2)),
            }],
        }
    }

    #[test]
    fn source_batches_unpack_with_shared_and_ignored_spans() {
        let records = unpack_source(source_batch()).unwrap();
        assert_eq!(
            records[0],
            SourceRecord {
                topic: Some("t".to_owned()),
                partition: Some(3),
                key: Some(Data::Bytes(b"k".to_vec())),
                value: Some(Data::Json("{\"v\":1}".to_owned())),
                headers: vec![Header {
                    key: "hk".to_owned(),
                    value: Some(b"hv".to_vec()),
                }],
                timestamp: Some(7),
                source_partition: "{\"f\":1}".to_owned(),
                source_offset: "{\"p\":1}".to_owned(),
            }
        );
        assert_eq!(records[1].key, None);
        assert_eq!(records[1].value, Some(Data::Text("k".to_owned())));
        assert!(records[1].headers.is_empty());
    }

    #[test]
    fn broken_source_batches_name_the_record_and_the_rule() {
        let mut batch = source_batch();
        batch.records[1].value.len = 100;
        let err = unpack_source(batch).unwrap_err();
        assert!(
            err.contains("record 1") && err.contains("value span") && err.contains("27 data bytes"),
            "{err}"
        );

        let mut batch = source_batch();
        batch.records[0].source_offset.start = u32::MAX;
        let err = unpack_source(batch).unwrap_err();
        assert!(err.contains("source offset span"), "{err}");

        let mut batch = source_batch();
        batch.data[0] = 0xff;
        let err = unpack_source(batch).unwrap_err();
        assert!(
            err.contains("record 0") && err.contains("topic is not valid UTF-8"),
            "{err}"
        );

        let mut batch = source_batch();
        batch.records[0].headers.len = 2;
        let err = unpack_source(batch).unwrap_err();
        assert!(
            err.contains("headers span") && err.contains("1 headers"),
            "{err}"
        );
    }
}
