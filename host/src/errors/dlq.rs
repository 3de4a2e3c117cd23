//! The dead-letter record: the original key, value and headers, plus (when
//! `errors.deadletterqueue.context.headers.enable=true`) Kafka Connect's `__connect.errors.*`
//! headers saying where the record came from and what went wrong. Values are UTF-8 text, as
//! Kafka Connect writes them.

use super::report::RecordError;

pub const TOPIC: &str = "__connect.errors.topic";
pub const PARTITION: &str = "__connect.errors.partition";
pub const OFFSET: &str = "__connect.errors.offset";
pub const CONNECTOR: &str = "__connect.errors.connector.name";
pub const TASK: &str = "__connect.errors.task.id";
pub const STAGE: &str = "__connect.errors.stage";
pub const CLASS: &str = "__connect.errors.class.name";
pub const EXCEPTION_CLASS: &str = "__connect.errors.exception.class.name";
pub const EXCEPTION_MESSAGE: &str = "__connect.errors.exception.message";
pub const EXCEPTION_STACKTRACE: &str = "__connect.errors.exception.stacktrace";
/// Ours: set (to the value's size and the reason) when the value was too large to keep.
pub const VALUE_OMITTED: &str = "__connect.errors.value.omitted";
/// Ours (source records have no Kafka position): the record's source partition, as JSON.
pub const SOURCE_PARTITION: &str = "__connect.errors.source.partition";
/// Ours: the record's source offset, as JSON.
pub const SOURCE_OFFSET: &str = "__connect.errors.source.offset";

/// A record that failed, as far as it is known at the failing stage.
#[derive(Debug, Clone, Default)]
pub struct FailedRecord {
    /// The topic it was consumed from (sink) or meant for (source).
    pub topic: String,
    /// Its Kafka partition and offset (sink records).
    pub partition: Option<i32>,
    pub offset: Option<i64>,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: Option<i64>,
    /// Its source partition and offset (source records).
    pub source_position: Option<(String, String)>,
}

impl FailedRecord {
    /// Where the record is, for logs and traces.
    pub fn describe(&self) -> String {
        match (&self.partition, &self.offset, &self.source_position) {
            (Some(p), Some(o), _) => format!("{}-{p} offset {o}", self.topic),
            (_, _, Some((partition, offset))) => format!(
                "for topic {} (source partition {partition}, offset {offset})",
                self.topic
            ),
            _ => format!("for topic {}", self.topic),
        }
    }
}

/// The `__connect.errors.*` headers for `record` failing with `error` in `connector`'s `task`.
pub fn context_headers(
    record: &FailedRecord,
    error: &RecordError,
    connector: &str,
    task: u32,
) -> Vec<(&'static str, String)> {
    let mut headers = vec![(TOPIC, record.topic.clone())];
    if let Some(p) = record.partition {
        headers.push((PARTITION, p.to_string()));
    }
    if let Some(o) = record.offset {
        headers.push((OFFSET, o.to_string()));
    }
    if let Some((partition, offset)) = &record.source_position {
        headers.push((SOURCE_PARTITION, partition.clone()));
        headers.push((SOURCE_OFFSET, offset.clone()));
    }
    headers.extend([
        (CONNECTOR, connector.to_owned()),
        (TASK, task.to_string()),
        (STAGE, error.stage.name().to_owned()),
        (CLASS, error.class.clone()),
        (EXCEPTION_CLASS, error.kind.to_owned()),
        (EXCEPTION_MESSAGE, error.message.clone()),
        (
            EXCEPTION_STACKTRACE,
            format!(
                "{}: {}\n\tat {} ({})",
                error.kind,
                error.message,
                error.stage.name(),
                error.class
            ),
        ),
    ]);
    headers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::Stage;

    #[test]
    fn sink_records_carry_their_position_and_the_cause() {
        let record = FailedRecord {
            topic: "orders".into(),
            partition: Some(2),
            offset: Some(41),
            ..Default::default()
        };
        let error = RecordError::new(
            Stage::ValueConverter,
            "json",
            "ConversionError",
            "not valid JSON",
        );
        let headers = context_headers(&record, &error, "c", 3);
        let get = |k: &str| {
            headers
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get(TOPIC), Some("orders"));
        assert_eq!(get(PARTITION), Some("2"));
        assert_eq!(get(OFFSET), Some("41"));
        assert_eq!(get(TASK), Some("3"));
        assert_eq!(get(STAGE), Some("VALUE_CONVERTER"));
        assert_eq!(get(EXCEPTION_MESSAGE), Some("not valid JSON"));
        assert_eq!(get(SOURCE_PARTITION), None);
        assert_eq!(record.describe(), "orders-2 offset 41");
    }
}
