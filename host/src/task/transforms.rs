//! A task's transform chain between its plugin and its converters: the record a source plugin
//! polled, or a sink's converted message, as a `transform::Record`; and what the chain made of
//! it. A task without transforms never comes here.

use std::borrow::Cow;

use crate::errors::{RecordError, Stage};
use crate::sandbox::RecordRef;
use crate::transform::{Chain, Record, Side};

/// What the chain made of one record.
pub enum Outcome<'a> {
    /// Transformed (changed sides written back): send or put it.
    Keep(Record<'a>),
    /// A transform (Filter) dropped it: its position is committed as if it were sent.
    Dropped,
    /// A transform failed on it, or its new key or value cannot be written: error handling
    /// takes the original record.
    Failed(RecordError),
}

/// Run `record` through `chain`.
pub fn apply<'a>(chain: &mut Chain, mut record: Record<'a>) -> Outcome<'a> {
    match chain.apply(&mut record) {
        Ok(true) => {}
        Ok(false) => return Outcome::Dropped,
        Err(failed) => {
            return Outcome::Failed(RecordError::new(
                Stage::Transformation,
                failed.class.clone(),
                failed.error.kind,
                failed.to_string(),
            ));
        }
    }
    for (stage, side) in [
        (Stage::KeyConverter, &mut record.key),
        (Stage::ValueConverter, &mut record.value),
    ] {
        if let Err(e) = chain.write(side) {
            let what = if stage == Stage::KeyConverter {
                "key"
            } else {
                "value"
            };
            return Outcome::Failed(RecordError::new(
                stage,
                "transforms",
                "ConversionError",
                format!("the transformed {what} cannot be written: {e}"),
            ));
        }
    }
    Outcome::Keep(record)
}

/// A polled record as the chain sees it (the topic is the connector's `topic` where the
/// record names none).
pub fn from_polled<'a>(record: &RecordRef<'a>, default_topic: Option<&'a str>) -> Record<'a> {
    Record {
        topic: Cow::Borrowed(record.topic.or(default_topic).unwrap_or("")),
        partition: record.partition,
        offset: None,
        timestamp: record.timestamp,
        key: Side::polled(record.key, record.key_schema),
        value: Side::polled(record.value, record.value_schema),
        headers: record
            .headers
            .iter()
            .map(|(k, v)| (Cow::Borrowed(*k), v.map(Cow::Borrowed)))
            .collect(),
    }
}

/// The transformed record to send, with the original's source position.
pub fn to_polled<'o>(record: &'o Record<'_>, original: &RecordRef<'o>) -> RecordRef<'o> {
    let (key, key_schema) = record.key.data_ref();
    let (value, value_schema) = record.value.data_ref();
    RecordRef {
        topic: (!record.topic.is_empty()).then_some(&*record.topic),
        partition: record.partition,
        key,
        value,
        headers: record
            .headers
            .iter()
            .map(|(k, v)| (&**k, v.as_deref()))
            .collect(),
        timestamp: record.timestamp,
        source_partition: original.source_partition,
        source_offset: original.source_offset,
        key_schema,
        value_schema,
    }
}
