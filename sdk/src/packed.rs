//! Packed batches (`wit/0.2.0/batch.wit`) to and from the record types plugin authors use:
//! records a source task returns are packed into one buffer, and a sink batch is unpacked into
//! records before `SinkTask::put` sees it.

use crate::Error;
use crate::bindings::batch::{
    DataKind, PackedHeader, PackedSinkRecord, PackedSourceRecord, SinkBatch, SourceBatch, Span,
};
use crate::record::{Data, Header, SinkRecord, SourceRecord};

/// Pack what `SourceTask::poll` returned for `source-task.poll`.
pub(crate) fn pack_source(records: &[SourceRecord]) -> Result<SourceBatch, Error> {
    let bytes = records
        .iter()
        .map(|r| {
            r.topic.as_ref().map_or(0, String::len)
                + data_bytes(r.key.as_ref()).len()
                + data_bytes(r.value.as_ref()).len()
                + r.source_partition.len()
                + r.source_offset.len()
        })
        .sum();
    let mut data = Writer(Vec::with_capacity(bytes));
    let mut headers = Vec::new();
    let mut packed = Vec::with_capacity(records.len());
    for record in records {
        let topic = match &record.topic {
            Some(topic) => Some(data.push(topic.as_bytes())?),
            None => None,
        };
        let (key_kind, key) = data.data(record.key.as_ref())?;
        let (value_kind, value) = data.data(record.value.as_ref())?;
        let header_span = data.headers(&record.headers, &mut headers)?;
        packed.push(PackedSourceRecord {
            topic,
            partition: record.partition,
            key_kind,
            key,
            value_kind,
            value,
            headers: header_span,
            timestamp: record.timestamp,
            source_partition: data.push(record.source_partition.as_bytes())?,
            source_offset: data.push(record.source_offset.as_bytes())?,
        });
    }
    Ok(SourceBatch {
        data: data.0,
        records: packed,
        headers,
    })
}

/// Unpack a `sink-task.put` batch into the records `SinkTask::put` takes.
pub(crate) fn unpack_sink(batch: SinkBatch) -> Result<Vec<SinkRecord>, Error> {
    let reader = Reader {
        data: &batch.data,
        headers: &batch.headers,
    };
    batch
        .records
        .iter()
        .enumerate()
        .map(|(index, packed)| {
            reader.sink_record(packed, &batch.topics).map_err(|problem| {
                Error::fatal(format!(
                    "the worker sent a malformed batch (record {index}: {problem}); the worker and wasm-connect-sdk disagree on the contract"
                ))
            })
        })
        .collect()
}

fn data_bytes(data: Option<&Data>) -> &[u8] {
    match data {
        None => &[],
        Some(Data::Bytes(b)) => b,
        Some(Data::Text(s) | Data::Json(s)) => s.as_bytes(),
    }
}

fn to_u32(n: usize) -> Result<u32, Error> {
    u32::try_from(n).map_err(|_| {
        Error::fatal(
            "a poll returned more than 4 GiB of record data; return fewer records per poll",
        )
    })
}

/// Appends fields to a batch's `data`.
struct Writer(Vec<u8>);

impl Writer {
    fn push(&mut self, bytes: &[u8]) -> Result<Span, Error> {
        let span = Span {
            start: to_u32(self.0.len())?,
            len: to_u32(bytes.len())?,
        };
        self.0.extend_from_slice(bytes);
        to_u32(self.0.len())?;
        Ok(span)
    }

    fn data(&mut self, data: Option<&Data>) -> Result<(DataKind, Span), Error> {
        let kind = match data {
            None => return Ok((DataKind::Null, Span { start: 0, len: 0 })),
            Some(Data::Bytes(_)) => DataKind::Bytes,
            Some(Data::Text(_)) => DataKind::Text,
            Some(Data::Json(_)) => DataKind::Json,
        };
        Ok((kind, self.push(data_bytes(data))?))
    }

    fn headers(&mut self, headers: &[Header], all: &mut Vec<PackedHeader>) -> Result<Span, Error> {
        let start = to_u32(all.len())?;
        for header in headers {
            let key = self.push(header.key.as_bytes())?;
            let value = match &header.value {
                Some(v) => Some(self.push(v)?),
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

/// Reads fields out of a batch the worker sent.
struct Reader<'a> {
    data: &'a [u8],
    headers: &'a [PackedHeader],
}

impl<'a> Reader<'a> {
    fn bytes(&self, span: Span) -> Result<&'a [u8], String> {
        let start = span.start as usize;
        start
            .checked_add(span.len as usize)
            .and_then(|end| self.data.get(start..end))
            .ok_or_else(|| format!("a span ends past the batch's {} bytes", self.data.len()))
    }

    fn text(&self, span: Span) -> Result<String, String> {
        std::str::from_utf8(self.bytes(span)?)
            .map(str::to_owned)
            .map_err(|_| "text that is not UTF-8".to_owned())
    }

    fn data(&self, kind: DataKind, span: Span) -> Result<Option<Data>, String> {
        Ok(match kind {
            DataKind::Null => None,
            DataKind::Bytes => Some(Data::Bytes(self.bytes(span)?.to_vec())),
            DataKind::Text => Some(Data::Text(self.text(span)?)),
            DataKind::Json => Some(Data::Json(self.text(span)?)),
        })
    }

    fn sink_record(
        &self,
        packed: &PackedSinkRecord,
        topics: &[String],
    ) -> Result<SinkRecord, String> {
        let topic = topics
            .get(packed.topic as usize)
            .ok_or_else(|| format!("topic index {} of {}", packed.topic, topics.len()))?;
        let start = packed.headers.start as usize;
        let headers = start
            .checked_add(packed.headers.len as usize)
            .and_then(|end| self.headers.get(start..end))
            .ok_or_else(|| format!("headers past the batch's {}", self.headers.len()))?
            .iter()
            .map(|h| {
                Ok(Header {
                    key: self.text(h.key)?,
                    value: match h.value {
                        Some(v) => Some(self.bytes(v)?.to_vec()),
                        None => None,
                    },
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(SinkRecord {
            topic: topic.clone(),
            partition: packed.partition,
            offset: packed.offset,
            key: self.data(packed.key_kind, packed.key)?,
            value: self.data(packed.value_kind, packed.value)?,
            headers,
            timestamp: packed.timestamp,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source_record(n: u8) -> SourceRecord {
        SourceRecord {
            topic: (n == 1).then(|| "other".to_owned()),
            partition: Some(n.into()),
            key: (n != 2).then(|| Data::Bytes(vec![n, 0, 255])),
            value: Some(Data::Json(format!("{{\"n\":{n}}}"))),
            headers: vec![Header {
                key: format!("h{n}"),
                value: (n == 0).then(|| b"v".to_vec()),
            }],
            timestamp: Some(n.into()),
            source_partition: "{\"p\":0}".to_owned(),
            source_offset: format!("{{\"o\":{n}}}"),
        }
    }

    /// Read a packed source batch back (the worker's side of the contract).
    fn read_source(batch: &SourceBatch) -> Vec<SourceRecord> {
        let reader = Reader {
            data: &batch.data,
            headers: &batch.headers,
        };
        batch
            .records
            .iter()
            .map(|p| {
                let headers = &batch.headers
                    [p.headers.start as usize..(p.headers.start + p.headers.len) as usize];
                SourceRecord {
                    topic: p.topic.map(|t| reader.text(t).unwrap()),
                    partition: p.partition,
                    key: reader.data(p.key_kind, p.key).unwrap(),
                    value: reader.data(p.value_kind, p.value).unwrap(),
                    headers: headers
                        .iter()
                        .map(|h| Header {
                            key: reader.text(h.key).unwrap(),
                            value: h.value.map(|v| reader.bytes(v).unwrap().to_vec()),
                        })
                        .collect(),
                    timestamp: p.timestamp,
                    source_partition: reader.text(p.source_partition).unwrap(),
                    source_offset: reader.text(p.source_offset).unwrap(),
                }
            })
            .collect()
    }

    #[test]
    fn source_records_survive_packing() {
        let records: Vec<SourceRecord> = (0..3).map(source_record).collect();
        let batch = pack_source(&records).unwrap();
        assert_eq!(batch.records.len(), 3);
        assert_eq!(batch.headers.len(), 3);
        assert_eq!(read_source(&batch), records);
    }

    fn sink_batch() -> SinkBatch {
        let span = |start, len| Span { start, len };
        SinkBatch {
            data: b"k1{\"a\":1}hv".to_vec(),
            topics: vec!["t".to_owned(), "u".to_owned()],
            records: vec![
                PackedSinkRecord {
                    topic: 1,
                    partition: 4,
                    offset: 9,
                    key_kind: DataKind::Text,
                    key: span(0, 2),
                    value_kind: DataKind::Json,
                    value: span(2, 7),
                    headers: span(0, 1),
                    timestamp: Some(5),
                },
                PackedSinkRecord {
                    topic: 0,
                    partition: 0,
                    offset: 10,
                    key_kind: DataKind::Null,
                    key: span(0, 0),
                    value_kind: DataKind::Bytes,
                    value: span(9, 2),
                    headers: span(1, 0),
                    timestamp: None,
                },
            ],
            headers: vec![PackedHeader {
                key: span(9, 1),
                value: None,
            }],
        }
    }

    #[test]
    fn sink_batches_unpack_into_records() {
        let records = unpack_sink(sink_batch()).unwrap();
        assert_eq!(
            records[0],
            SinkRecord {
                topic: "u".to_owned(),
                partition: 4,
                offset: 9,
                key: Some(Data::Text("k1".to_owned())),
                value: Some(Data::Json("{\"a\":1}".to_owned())),
                headers: vec![Header {
                    key: "h".to_owned(),
                    value: None,
                }],
                timestamp: Some(5),
            }
        );
        assert_eq!(records[1].topic, "t");
        assert_eq!(records[1].key, None);
        assert_eq!(records[1].value, Some(Data::Bytes(b"hv".to_vec())));
    }

    #[test]
    fn malformed_sink_batches_are_fatal_errors() {
        let mut batch = sink_batch();
        batch.records[1].topic = 7;
        let Err(Error::Fatal(message)) = unpack_sink(batch) else {
            panic!("expected a fatal error");
        };
        assert!(
            message.contains("record 1") && message.contains("topic index 7"),
            "{message}"
        );
        let mut batch = sink_batch();
        batch.records[0].value.len = 50;
        assert!(matches!(unpack_sink(batch), Err(Error::Fatal(_))));
    }
}
