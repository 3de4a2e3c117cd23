//! Packed batches (contract 0.2.0, `wit/0.2.0/batch.wit`): reading what a source returns in
//! place, checking every rule, and the pieces `super::put_batch` shares to pack what a sink is
//! handed.

use super::data_ref::DataRef;
use super::source_batch::{HeaderRef, RecordRef};
use super::wit::batch::{
    DataColumn, HeaderRanges, PackedHeader, SchemaColumns, SourceBatch, Span, SpanColumn,
};
use super::wit::types::{Data, Header};

/// `data-column.kind` values.
pub(super) const NULL: u8 = 0;
pub(super) const BYTES: u8 = 1;
pub(super) const TEXT: u8 = 2;
pub(super) const JSON: u8 = 3;

/// Read what `source-task.poll` returned in place, or say which rule of the contract it breaks
/// (the whole batch is checked before any record is used). `max_bytes` (the plugin's memory
/// limit) caps the bytes the batch's spans describe in all: spans may overlap, so without it a
/// small batch could make the host copy without end.
#[cfg(test)]
pub(super) fn view_source<'a>(
    batch: &'a SourceBatch,
    schemas: &'a SchemaColumns,
    max_bytes: usize,
) -> Result<Vec<RecordRef<'a>>, String> {
    view_source_within(batch, schemas, Budget::memory(max_bytes)).map_err(|e| match e {
        BatchError::Malformed(m) | BatchError::OverBudget(m) => m,
    })
}

/// What a polled batch may cost the host, checked before anything is allocated for its
/// records.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// The plugin's memory limit: spans may overlap, but a batch may not describe more bytes
    /// than the plugin may hold.
    pub memory_bytes: usize,
    /// `sandbox.batch.max.bytes`: what the batch's records add up to on the host, every
    /// shared span and header counted each time it is used, with each header reference's
    /// bookkeeping.
    pub batch_bytes: usize,
    /// `sandbox.record.max.headers`: header entries one record may carry.
    pub record_headers: usize,
}

impl Budget {
    /// Only the memory limit.
    #[cfg(test)]
    pub fn memory(memory_bytes: usize) -> Self {
        Budget {
            memory_bytes,
            batch_bytes: usize::MAX,
            record_headers: usize::MAX,
        }
    }
}

/// Why a polled batch was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchError {
    /// It breaks a rule of `batch.wit`.
    Malformed(String),
    /// It keeps the rules but would cost the host more than its [`Budget`].
    OverBudget(String),
}

/// Host bytes one header reference costs besides its key and value (a borrowed key and value).
const HEADER_REF_BYTES: u64 = std::mem::size_of::<HeaderRef<'static>>() as u64;

/// [`view_source`] within `budget`.
pub(super) fn view_source_within<'a>(
    batch: &'a SourceBatch,
    schemas: &'a SchemaColumns,
    budget: Budget,
) -> Result<Vec<RecordRef<'a>>, BatchError> {
    let malformed = BatchError::Malformed;
    let n = batch.topic.len();
    let lengths = [
        ("partition", batch.partition.len()),
        ("timestamp", batch.timestamp.len()),
        ("key.kind", batch.key.kind.len()),
        ("key.start", batch.key.start.len()),
        ("key.len", batch.key.len.len()),
        ("value.kind", batch.value.kind.len()),
        ("value.start", batch.value.start.len()),
        ("value.len", batch.value.len.len()),
        ("source-partition.start", batch.source_partition.start.len()),
        ("source-partition.len", batch.source_partition.len.len()),
        ("source-offset.start", batch.source_offset.start.len()),
        ("source-offset.len", batch.source_offset.len.len()),
        ("header-ranges.first", batch.header_ranges.first.len()),
        ("header-ranges.count", batch.header_ranges.count.len()),
    ];
    if let Some((list, len)) = lengths.iter().find(|(_, len)| *len != n) {
        return Err(malformed(format!(
            "its {list} list has {len} entries but the batch has {n} records (entries in topic)"
        )));
    }
    for (name, column) in [("key", &schemas.key), ("value", &schemas.value)] {
        let (starts, lens) = (column.start.len(), column.len.len());
        if starts != lens || (starts != 0 && starts != n) {
            return Err(malformed(format!(
                "its {name} schema column has {starts} starts and {lens} lengths; both are empty (no record has a {name} schema) or have one entry for each of the batch's {n} records"
            )));
        }
    }
    // Before anything is allocated per record: a header list shared by every record is cheap
    // for the plugin to return and costs the host once per record.
    if let Some(i) = (0..n).find(|&i| batch.header_ranges.count[i] as usize > budget.record_headers)
    {
        return Err(BatchError::OverBudget(format!(
            "record {i} of the batch has {} headers, over the limit of {} (sandbox.record.max.headers)",
            batch.header_ranges.count[i], budget.record_headers
        )));
    }
    let reader = Reader::whole_batch(&batch.data, &batch.headers);
    // Every header is checked, even one no record points to: the rules hold for the batch.
    for (index, header) in batch.headers.iter().enumerate() {
        let checked = reader
            .text(header.key, "key")
            .and_then(|_| match header.value {
                Some(v) => reader.bytes(v, "value").map(drop),
                None => Ok(()),
            });
        checked.map_err(|problem| malformed(format!("header {index} of the batch: {problem}")))?;
    }
    let described = described_bytes(batch) + schema_bytes(schemas);
    if described > budget.batch_bytes as u64 {
        return Err(BatchError::OverBudget(format!(
            "its records add up to {described} bytes on the host (every shared span and header counted each time a record uses it), over the limit of {} bytes (sandbox.batch.max.bytes); return smaller batches",
            budget.batch_bytes
        )));
    }
    let max_bytes = budget.memory_bytes;
    if described > max_bytes as u64 {
        return Err(malformed(format!(
            "its spans add up to {described} bytes, over the plugin's memory limit of {max_bytes} bytes (sandbox.memory.max.bytes); spans may overlap, but a batch may not describe more bytes than the plugin may hold"
        )));
    }
    // Sized up front: collecting `Result`s would grow the vector by doubling, copying it.
    let mut records = Vec::with_capacity(n);
    let mut last_partition = None;
    let mut key_schemas = SchemaReader::new(&schemas.key, "key schema");
    let mut value_schemas = SchemaReader::new(&schemas.value, "value schema");
    for i in 0..n {
        let record = reader
            .record_ref(batch, i, &mut last_partition)
            .and_then(|mut record| {
                record.key_schema = key_schemas.read(&reader, i)?;
                record.value_schema = value_schemas.read(&reader, i)?;
                Ok(record)
            })
            .map_err(|problem| malformed(format!("record {i} of the batch: {problem}")))?;
        records.push(record);
    }
    Ok(records)
}

/// The bytes the schema spans describe, each counted for every record that uses it (the json
/// converter writes a record's schema into its envelope).
fn schema_bytes(schemas: &SchemaColumns) -> u64 {
    [&schemas.key, &schemas.value]
        .iter()
        .flat_map(|column| column.len.iter())
        .map(|&len| u64::from(len))
        .sum()
}

/// Reads one schema column, checking each distinct span once: a schema is stored once and
/// shared by consecutive records (the SDK does so), so a batch's schemas cost one check each.
struct SchemaReader<'a> {
    column: &'a SchemaColumn,
    field: &'static str,
    last: Option<((u32, u32), &'a str)>,
}

type SchemaColumn = SpanColumn;

impl<'a> SchemaReader<'a> {
    fn new(column: &'a SchemaColumn, field: &'static str) -> Self {
        SchemaReader {
            column,
            field,
            last: None,
        }
    }

    /// Record `i`'s schema: `None` when the column is empty or the span's length is 0.
    fn read(&mut self, reader: &Reader<'a>, i: usize) -> Result<Option<&'a str>, String> {
        let (Some(&start), Some(&len)) = (self.column.start.get(i), self.column.len.get(i)) else {
            return Ok(None);
        };
        if len == 0 {
            return Ok(None);
        }
        if let Some((span, text)) = self.last
            && span == (start, len)
        {
            return Ok(Some(text));
        }
        let text = reader.text(Span { start, len }, self.field)?;
        check_schema(text).map_err(|problem| format!("its {} {problem}", self.field))?;
        self.last = Some(((start, len), text));
        Ok(Some(text))
    }
}

/// Whether `text` is a Kafka Connect schema as the JsonConverter writes one, as far as the
/// host relies on it: a JSON object with a string `type`.
pub(crate) fn check_schema(text: &str) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(rename = "type")]
        _type: String,
    }
    serde_json::from_str::<Head>(text).map(drop).map_err(|e| {
        format!("is not a Kafka Connect schema (a JSON object with a string \"type\"): {e}")
    })
}

/// The bytes the records of `batch` (whose per-record lists all have the same length) would
/// copy out of it, counting overlapping spans each time; header ranges outside the batch count
/// nothing here (unpacking reports them).
fn described_bytes(batch: &SourceBatch) -> u64 {
    let header_bytes: Vec<u64> = batch
        .headers
        .iter()
        .map(|h| u64::from(h.key.len) + h.value.map_or(0, |v| u64::from(v.len)))
        .collect();
    (0..batch.topic.len())
        .map(|i| {
            let first = batch.header_ranges.first[i] as usize;
            let count = batch.header_ranges.count[i] as usize;
            let headers: u64 = first
                .checked_add(count)
                .and_then(|end| header_bytes.get(first..end))
                .map_or(0, |h| {
                    h.iter().sum::<u64>() + HEADER_REF_BYTES * count as u64
                });
            let data = |column: &DataColumn| match column.kind[i] {
                NULL => 0,
                _ => u64::from(column.len[i]),
            };
            data(&batch.key)
                + data(&batch.value)
                + headers
                + u64::from(batch.source_partition.len[i])
                + u64::from(batch.source_offset.len[i])
        })
        .sum()
}

pub(super) fn data_column(n: usize) -> DataColumn {
    DataColumn {
        kind: Vec::with_capacity(n),
        start: Vec::with_capacity(n),
        len: Vec::with_capacity(n),
    }
}

pub(super) fn to_u32(n: usize) -> Result<u32, String> {
    u32::try_from(n).map_err(|_| {
        format!("a batch of more than {} bytes or records cannot be packed; lower sink.batch.max.records or sandbox.record.max.bytes", u32::MAX)
    })
}

/// Reads fields out of a packed batch, checking each span.
pub(super) struct Reader<'a> {
    data: &'a [u8],
    headers: &'a [PackedHeader],
    /// Whether every byte of `data` is known to be ASCII: then every span of it is valid
    /// UTF-8 and text fields need no check of their own. Private, and set only by
    /// [`Reader::whole_batch`], which checks it: [`Reader::text`] relies on it for soundness.
    ascii: bool,
}

impl<'a> Reader<'a> {
    /// A reader that checks each text field it reads: for a few fields of a batch.
    pub(super) fn new(data: &'a [u8], headers: &'a [PackedHeader]) -> Self {
        Reader {
            data,
            headers,
            ascii: false,
        }
    }

    /// A reader for every field of a batch: one pass over `data` first, and when it is all
    /// ASCII no text field needs a check of its own (per-field checks were a large share of
    /// reading a source batch; see docs/benchmark-journal.md).
    pub(super) fn whole_batch(data: &'a [u8], headers: &'a [PackedHeader]) -> Self {
        Reader {
            data,
            headers,
            ascii: data.is_ascii(),
        }
    }

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

    pub(super) fn text(&self, span: Span, field: &str) -> Result<&'a str, String> {
        let bytes = self.bytes(span, field)?;
        if self.ascii {
            // SAFETY: `bytes` is a slice of `data`, all of whose bytes are ASCII, which is
            // valid UTF-8 however it is sliced.
            return Ok(unsafe { std::str::from_utf8_unchecked(bytes) });
        }
        std::str::from_utf8(bytes).map_err(|_| format!("its {field} is not valid UTF-8"))
    }

    fn column_text(&self, column: &SpanColumn, i: usize, field: &str) -> Result<&'a str, String> {
        let span = Span {
            start: column.start[i],
            len: column.len[i],
        };
        self.text(span, field)
    }

    pub(super) fn data(
        &self,
        column: &DataColumn,
        i: usize,
        field: &str,
    ) -> Result<Option<Data>, String> {
        Ok(self.data_ref(column, i, field)?.map(|d| d.to_data()))
    }

    fn data_ref(
        &self,
        column: &DataColumn,
        i: usize,
        field: &str,
    ) -> Result<Option<DataRef<'a>>, String> {
        let span = Span {
            start: column.start[i],
            len: column.len[i],
        };
        Ok(match column.kind[i] {
            NULL => None,
            BYTES => Some(DataRef::Bytes(self.bytes(span, field)?)),
            TEXT => Some(DataRef::Text(self.text(span, field)?)),
            JSON => Some(DataRef::Json(self.text(span, field)?)),
            other => {
                return Err(format!(
                    "its {field} kind is {other}; a data kind is 0 (null), 1 (bytes), 2 (text) or 3 (json)"
                ));
            }
        })
    }

    pub(super) fn headers(&self, ranges: &HeaderRanges, i: usize) -> Result<Vec<Header>, String> {
        Ok(self
            .header_refs(ranges, i)?
            .into_iter()
            .map(|(key, value)| Header {
                key: key.to_owned(),
                value: value.map(<[u8]>::to_vec),
            })
            .collect())
    }

    /// Record `i`'s headers, borrowed (no allocation when it has none).
    fn header_refs(&self, ranges: &HeaderRanges, i: usize) -> Result<Vec<HeaderRef<'a>>, String> {
        let (first, count) = (ranges.first[i], ranges.count[i]);
        let start = first as usize;
        if count == 0 && start <= self.headers.len() {
            return Ok(Vec::new());
        }
        let entries = start
            .checked_add(count as usize)
            .and_then(|end| self.headers.get(start..end))
            .ok_or_else(|| {
                format!(
                    "its header range ({count} entries from entry {first}) lies outside the batch's {} headers",
                    self.headers.len()
                )
            })?;
        entries
            .iter()
            .map(|h| {
                Ok((
                    self.text(h.key, "header key")?,
                    match h.value {
                        Some(v) => Some(self.bytes(v, "header value")?),
                        None => None,
                    },
                ))
            })
            .collect()
    }

    /// Record `i` of `batch`, whose per-record lists all have more than `i` entries.
    /// `last_partition` remembers the last source partition span checked: the SDK
    /// stores a repeated partition once, so consecutive records mostly share the span.
    fn record_ref(
        &self,
        batch: &'a SourceBatch,
        i: usize,
        last_partition: &mut Option<((u32, u32), &'a str)>,
    ) -> Result<RecordRef<'a>, String> {
        let topic = match usize::try_from(batch.topic[i]) {
            Err(_) => None,
            Ok(index) => Some(batch.topics.get(index).map(String::as_str).ok_or_else(|| {
                format!(
                    "its topic index {index} is past the batch's {} topics",
                    batch.topics.len()
                )
            })?),
        };
        let partition_span = (
            batch.source_partition.start[i],
            batch.source_partition.len[i],
        );
        Ok(RecordRef {
            topic,
            partition: Some(batch.partition[i]).filter(|p| *p >= 0),
            key: self.data_ref(&batch.key, i, "key")?,
            value: self.data_ref(&batch.value, i, "value")?,
            headers: self.header_refs(&batch.header_ranges, i)?,
            timestamp: Some(batch.timestamp[i]).filter(|t| *t >= 0),
            source_partition: match *last_partition {
                Some((span, text)) if span == partition_span => text,
                _ => {
                    let text = self.column_text(&batch.source_partition, i, "source partition")?;
                    *last_partition = Some((partition_span, text));
                    text
                }
            },
            source_offset: self.column_text(&batch.source_offset, i, "source offset")?,
            key_schema: None,
            value_schema: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::sandbox::wit::types::SourceRecord;

    const LIMIT: usize = 1 << 20;

    /// The records of `batch`, owned (what `SourceTaskInstance::poll` returns).
    fn unpack_source(batch: SourceBatch, max_bytes: usize) -> Result<Vec<SourceRecord>, String> {
        view_source(&batch, &crate::sandbox::wit::no_schemas(), max_bytes)
            .map(|records| records.iter().map(RecordRef::to_record).collect())
    }

    #[test]
    fn overlapping_spans_cannot_describe_more_than_the_memory_limit() {
        let mut batch = source_batch();
        // Both records' values cover all 26 bytes: with the texts and the header (its bytes
        // and its reference), over 100.
        batch.value.kind = vec![BYTES, BYTES];
        batch.value.start = vec![0, 0];
        batch.value.len = vec![26, 26];
        let err = unpack_source(batch, 100).unwrap_err();
        assert!(
            err.contains("spans add up to") && err.contains("memory limit of 100 bytes"),
            "{err}"
        );
        assert!(
            unpack_source(source_batch(), 100).is_ok(),
            "within the limit"
        );
    }

    #[test]
    fn a_shared_header_list_is_paid_for_by_every_record_that_uses_it() {
        // Two records sharing one header list of 1000 empty headers: 8 bytes of guest data,
        // but 2000 header references on the host.
        let mut batch = source_batch();
        batch.data.extend_from_slice(b"");
        batch.headers = vec![
            PackedHeader {
                key: Span { start: 0, len: 0 },
                value: None,
            };
            1000
        ];
        batch.header_ranges = HeaderRanges {
            first: vec![0, 0],
            count: vec![1000, 1000],
        };
        let budget = |batch_bytes, record_headers| Budget {
            memory_bytes: LIMIT,
            batch_bytes,
            record_headers,
        };
        let over =
            |b: Budget| match view_source_within(&batch, &crate::sandbox::wit::no_schemas(), b) {
                Err(BatchError::OverBudget(m)) => m,
                other => panic!("{:?}", other.map(|r| r.len())),
            };
        let m = over(budget(LIMIT, 999));
        assert!(
            m.contains("record 0 of the batch has 1000 headers, over the limit of 999 (sandbox.record.max.headers)"),
            "{m}"
        );
        let m = over(budget(2000 * 32, 1000));
        assert!(
            m.contains("over the limit of 64000 bytes (sandbox.batch.max.bytes)"),
            "{m}"
        );
        assert_eq!(
            view_source_within(
                &batch,
                &crate::sandbox::wit::no_schemas(),
                budget(LIMIT, 1000)
            )
            .map(|r| r.len()),
            Ok(2)
        );
    }

    #[test]
    fn headers_no_record_points_to_are_checked_too() {
        let mut batch = source_batch();
        batch.headers.push(PackedHeader {
            key: Span { start: 0, len: 1 },
            value: Some(Span { start: 20, len: 99 }),
        });
        let err = unpack_source(batch, LIMIT).unwrap_err();
        assert!(
            err.contains("header 1 of the batch: its value span"),
            "{err}"
        );
        let mut batch = source_batch();
        batch.data[22] = 0xff;
        let err = unpack_source(batch, LIMIT).unwrap_err();
        assert!(
            err.contains("header 0 of the batch: its key is not valid UTF-8"),
            "{err}"
        );
    }

    fn span_column(spans: &[(u32, u32)]) -> SpanColumn {
        SpanColumn {
            start: spans.iter().map(|s| s.0).collect(),
            len: spans.iter().map(|s| s.1).collect(),
        }
    }

    fn source_batch() -> SourceBatch {
        // "k" "{\"v\":1}" "{\"f\":1}" "{\"p\":1}" "hk" "hv"; record 1's value shares the "h".
        let data = b"k{\"v\":1}{\"f\":1}{\"p\":1}hkhv".to_vec();
        let span = |start, len| Span { start, len };
        SourceBatch {
            data,
            topics: vec!["t".to_owned()],
            topic: vec![0, -1],
            partition: vec![3, -1],
            timestamp: vec![7, -1],
            key: DataColumn {
                kind: vec![BYTES, NULL],
                start: vec![0, 999],
                len: vec![1, 999],
            },
            value: DataColumn {
                kind: vec![JSON, TEXT],
                start: vec![1, 22],
                len: vec![7, 1],
            },
            source_partition: span_column(&[(8, 7), (8, 7)]),
            source_offset: span_column(&[(15, 7), (15, 7)]),
            headers: vec![PackedHeader {
                key: span(22, 2),
                value: Some(span(24, 2)),
            }],
            header_ranges: HeaderRanges {
                first: vec![0, 1],
                count: vec![1, 0],
            },
        }
    }

    #[test]
    fn source_batches_unpack_with_shared_and_ignored_spans() {
        let records = unpack_source(source_batch(), LIMIT).unwrap();
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
        assert_eq!(
            records[1],
            SourceRecord {
                topic: None,
                partition: None,
                key: None,
                value: Some(Data::Text("h".to_owned())),
                headers: Vec::new(),
                timestamp: None,
                source_partition: "{\"f\":1}".to_owned(),
                source_offset: "{\"p\":1}".to_owned(),
            }
        );
    }

    /// What unpacking says of `source_batch()` after `change`.
    fn broken(change: fn(&mut SourceBatch)) -> String {
        let mut batch = source_batch();
        change(&mut batch);
        unpack_source(batch, LIMIT).unwrap_err()
    }

    #[test]
    fn broken_source_batches_name_the_record_and_the_rule() {
        let err = broken(|b| b.value.len[1] = 100);
        assert!(
            err.contains("record 1") && err.contains("value span") && err.contains("26 data bytes"),
            "{err}"
        );
        let err = broken(|b| b.source_offset.start[0] = u32::MAX);
        assert!(err.contains("source offset span"), "{err}");
        let mut batch = source_batch();
        batch.data[0] = 0xff;
        let records = unpack_source(batch, LIMIT).expect("bytes need not be UTF-8");
        assert_eq!(records[0].key, Some(Data::Bytes(vec![0xff])));
    }

    #[test]
    fn text_outside_ascii_is_read_and_checked_span_by_span() {
        // Record 1's text value becomes "é" (two bytes), so the batch is no longer all ASCII.
        let mut batch = source_batch();
        batch.data.extend_from_slice("é".as_bytes());
        batch.value.start[1] = 26;
        batch.value.len[1] = 2;
        let records = unpack_source(batch.clone(), LIMIT).unwrap();
        assert_eq!(records[1].value, Some(Data::Text("é".to_owned())));
        // A span that cuts the character in two is not UTF-8, though every byte is in the batch.
        batch.value.len[1] = 1;
        let err = unpack_source(batch, LIMIT).unwrap_err();
        assert!(
            err.contains("record 1") && err.contains("value is not valid UTF-8"),
            "{err}"
        );
    }

    #[test]
    fn every_rule_of_a_source_batch_is_checked() {
        let err = broken(|b| b.data[1] = 0xff);
        assert!(
            err.contains("record 0") && err.contains("value is not valid UTF-8"),
            "{err}"
        );
        let err = broken(|b| b.header_ranges.count[0] = 2);
        assert!(
            err.contains("header range") && err.contains("1 headers"),
            "{err}"
        );
        let err = broken(|b| b.topic[1] = 1);
        assert!(
            err.contains("topic index 1") && err.contains("1 topics"),
            "{err}"
        );
        let err = broken(|b| b.key.kind[0] = 9);
        assert!(err.contains("key kind is 9"), "{err}");
        let err = broken(|b| {
            b.source_offset.len.pop();
        });
        assert!(
            err.contains("source-offset.len list has 1 entries but the batch has 2 records"),
            "{err}"
        );
    }
}
