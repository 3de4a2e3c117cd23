//! Packing what `SourceTask::poll` returns into a `batch.source-batch`
//! (`wit/0.2.0/batch.wit`): one buffer of bytes plus one list per field.

use crate::Error;
use crate::bindings::batch::{
    DataColumn, HeaderRanges, PackedHeader, SourceBatch, Span, SpanColumn,
};
use crate::record::{Data, Header, SourceRecord};

/// `data-column.kind` values.
pub(crate) const NULL: u8 = 0;
pub(crate) const BYTES: u8 = 1;
pub(crate) const TEXT: u8 = 2;
pub(crate) const JSON: u8 = 3;

/// Pack what `SourceTask::poll` returned for `source-task.poll`. A source partition equal to
/// the previous record's is stored once.
pub(crate) fn pack_source(records: &[SourceRecord]) -> Result<SourceBatch, Error> {
    let n = records.len();
    let bytes = records
        .iter()
        .map(|r| {
            data_bytes(r.key.as_ref()).len()
                + data_bytes(r.value.as_ref()).len()
                + r.source_partition.len()
                + r.source_offset.len()
        })
        .sum();
    let mut data = Writer(Vec::with_capacity(bytes));
    let mut batch = SourceBatch {
        data: Vec::new(),
        topics: Vec::new(),
        topic: Vec::with_capacity(n),
        partition: Vec::with_capacity(n),
        timestamp: Vec::with_capacity(n),
        key: data_column(n),
        value: data_column(n),
        source_partition: span_column(n),
        source_offset: span_column(n),
        headers: Vec::new(),
        header_ranges: HeaderRanges {
            first: Vec::with_capacity(n),
            count: Vec::with_capacity(n),
        },
    };
    let mut previous_partition: Option<(&str, Span)> = None;
    for record in records {
        let topic = match &record.topic {
            None => -1,
            Some(topic) => {
                i32::try_from(topic_index(&mut batch.topics, topic)).map_err(|_| too_big())?
            }
        };
        batch.topic.push(topic);
        batch.partition.push(record.partition.unwrap_or(-1));
        batch.timestamp.push(record.timestamp.unwrap_or(-1));
        data.data(record.key.as_ref(), &mut batch.key)?;
        data.data(record.value.as_ref(), &mut batch.value)?;
        let partition = match previous_partition {
            Some((text, span)) if text == record.source_partition => span,
            _ => data.push(record.source_partition.as_bytes())?,
        };
        previous_partition = Some((&record.source_partition, partition));
        push_span(&mut batch.source_partition, partition);
        let offset = data.push(record.source_offset.as_bytes())?;
        push_span(&mut batch.source_offset, offset);
        data.headers(
            &record.headers,
            &mut batch.headers,
            &mut batch.header_ranges,
        )?;
    }
    batch.data = data.0;
    Ok(batch)
}

/// `topic`'s index in a batch's `topics`, added if it is new. Batches hold one or a few
/// topics: a scan beats hashing.
pub(crate) fn topic_index(topics: &mut Vec<String>, topic: &str) -> usize {
    match topics.iter().rposition(|t| t == topic) {
        Some(index) => index,
        None => {
            topics.push(topic.to_owned());
            topics.len() - 1
        }
    }
}

pub(crate) fn data_column(n: usize) -> DataColumn {
    DataColumn {
        kind: Vec::with_capacity(n),
        start: Vec::with_capacity(n),
        len: Vec::with_capacity(n),
    }
}

fn span_column(n: usize) -> SpanColumn {
    SpanColumn {
        start: Vec::with_capacity(n),
        len: Vec::with_capacity(n),
    }
}

fn push_span(column: &mut SpanColumn, span: Span) {
    column.start.push(span.start);
    column.len.push(span.len);
}

fn data_bytes(data: Option<&Data>) -> &[u8] {
    data.map_or(&[], Data::as_bytes)
}

fn too_big() -> Error {
    Error::fatal("a poll returned more than 4 GiB of record data; return fewer records per poll")
}

fn to_u32(n: usize) -> Result<u32, Error> {
    u32::try_from(n).map_err(|_| too_big())
}

/// Appends fields to a batch's `data`.
pub(crate) struct Writer(pub(crate) Vec<u8>);

impl Writer {
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<Span, Error> {
        let span = Span {
            start: to_u32(self.0.len())?,
            len: to_u32(bytes.len())?,
        };
        self.0.extend_from_slice(bytes);
        to_u32(self.0.len())?;
        Ok(span)
    }

    /// Append one record's `headers` to a batch's list, and their range.
    pub(crate) fn headers(
        &mut self,
        headers: &[Header],
        all: &mut Vec<PackedHeader>,
        ranges: &mut HeaderRanges,
    ) -> Result<(), Error> {
        ranges.first.push(to_u32(all.len())?);
        ranges.count.push(to_u32(headers.len())?);
        for header in headers {
            let key = self.push(header.key.as_bytes())?;
            let value = match &header.value {
                Some(v) => Some(self.push(v)?),
                None => None,
            };
            all.push(PackedHeader { key, value });
        }
        Ok(())
    }

    pub(crate) fn data(
        &mut self,
        data: Option<&Data>,
        column: &mut DataColumn,
    ) -> Result<(), Error> {
        let (kind, span) = match data {
            None => (NULL, Span { start: 0, len: 0 }),
            Some(d) => {
                let kind = match d {
                    Data::Bytes(_) => BYTES,
                    Data::Text(_) => TEXT,
                    Data::Json(_) => JSON,
                };
                (kind, self.push(d.as_bytes())?)
            }
        };
        column.kind.push(kind);
        column.start.push(span.start);
        column.len.push(span.len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        }
    }

    fn text(batch: &SourceBatch, start: u32, len: u32) -> String {
        String::from_utf8(batch.data[start as usize..][..len as usize].to_vec()).unwrap()
    }

    #[test]
    fn source_records_are_packed_column_by_column() {
        let records: Vec<SourceRecord> = (0..3).map(source_record).collect();
        let batch = pack_source(&records).unwrap();
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
}
