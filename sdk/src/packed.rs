//! The pieces of a packed batch (`wit/0.4.0/batch.wit`: one buffer of bytes plus one list per
//! field) that source and sink batches share.

use crate::Error;
use crate::bindings::batch::{DataColumn, HeaderRanges, PackedHeader, Span};
use crate::record::Header;
use crate::sink_records::DataRef;

/// `data-column.kind` values.
pub(crate) const NULL: u8 = 0;
pub(crate) const BYTES: u8 = 1;
pub(crate) const TEXT: u8 = 2;
pub(crate) const JSON: u8 = 3;

/// `topic`'s index in a batch's `topics`, added if it is new. Batches hold one or a few
/// topics: a scan beats hashing.
pub(crate) fn topic_index(topics: &mut Vec<String>, topic: &str) -> usize {
    match topics
        .iter()
        .rposition(|t| same_bytes(t.as_bytes(), topic.as_bytes()))
    {
        Some(index) => index,
        None => {
            topics.push(topic.to_owned());
            topics.len() - 1
        }
    }
}

/// `a == b`, eight bytes at a time. Slice equality compiles to a call of the guest libc's
/// `memcmp`, which compares byte by byte (profiled: a tenth of a plugin's packing time, for
/// the short texts packing compares once a record).
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let (a_rest, b_rest) = (a8.remainder(), b8.remainder());
    let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().unwrap_or_default());
    a8.zip(b8).all(|(x, y)| word(x) == word(y)) && a_rest.iter().zip(b_rest).all(|(x, y)| x == y)
}

pub(crate) fn data_column(n: usize) -> DataColumn {
    DataColumn {
        kind: Vec::with_capacity(n),
        start: Vec::with_capacity(n),
        len: Vec::with_capacity(n),
    }
}

fn too_big() -> Error {
    Error::fatal("a poll returned more than 4 GiB of record data; return fewer records per poll")
}

pub(crate) fn to_u32(n: usize) -> Result<u32, Error> {
    u32::try_from(n).map_err(|_| too_big())
}

/// Appends fields to a batch's `data`.
pub(crate) struct Writer(pub(crate) Vec<u8>);

impl Writer {
    /// The bytes of `span`, which this writer returned.
    pub(crate) fn get(&self, span: Span) -> &[u8] {
        &self.0[span.start as usize..][..span.len as usize]
    }

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
        data: Option<DataRef<'_>>,
        column: &mut DataColumn,
    ) -> Result<(), Error> {
        let (kind, span) = match data {
            None => (NULL, Span { start: 0, len: 0 }),
            Some(d) => {
                let kind = match d {
                    DataRef::Bytes(_) => BYTES,
                    DataRef::Text(_) => TEXT,
                    DataRef::Json(_) => JSON,
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

    #[test]
    fn same_bytes_agrees_with_slice_equality() {
        let text: Vec<u8> = (0..40u8).collect();
        for len in 0..text.len() {
            let a = &text[..len];
            assert!(same_bytes(a, a), "{len} bytes against themselves");
            assert!(
                !same_bytes(a, &text[..len + 1]),
                "{len} against {}",
                len + 1
            );
            for at in 0..len {
                let mut b = a.to_vec();
                b[at] ^= 0x80;
                assert!(!same_bytes(a, &b), "{len} bytes, differing at {at}");
            }
        }
    }
}
