//! What a task does with one failed record: count it, log it if asked, and either fail the task
//! (`errors.tolerance=none`) or skip the record, writing it to the dead-letter queue when one
//! is configured. A skipped record's delivery report (immediately, or once the DLQ write is
//! acknowledged) goes where the record's own report would have gone, so offsets move past it
//! only when it is safely dealt with.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rdkafka::message::{Header, OwnedHeaders};
use serde::Serialize;

use super::dlq::{self, FailedRecord};
use super::policy::ErrorPolicy;
use crate::kafka::producer::{Ack, AckTarget, Outgoing, Producer, Report};
use crate::kafka::topics::{self, TopicCreator};
use crate::task::Failure;

/// Where in the pipeline a record failed, with Kafka Connect's stage names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    KeyConverter,
    ValueConverter,
    HeaderConverter,
    Transformation,
    TaskPoll,
    TaskPut,
    KafkaProduce,
    KafkaConsume,
}

impl Stage {
    /// The name in `__connect.errors.stage`.
    pub fn name(self) -> &'static str {
        match self {
            Stage::KeyConverter => "KEY_CONVERTER",
            Stage::ValueConverter => "VALUE_CONVERTER",
            Stage::HeaderConverter => "HEADER_CONVERTER",
            Stage::Transformation => "TRANSFORMATION",
            Stage::TaskPoll => "TASK_POLL",
            Stage::TaskPut => "TASK_PUT",
            Stage::KafkaProduce => "KAFKA_PRODUCE",
            Stage::KafkaConsume => "KAFKA_CONSUME",
        }
    }
}

/// One record's failure.
#[derive(Debug, Clone)]
pub struct RecordError {
    pub stage: Stage,
    /// What ran the stage: a converter, the plugin, the producer.
    pub class: String,
    /// The kind of error (Kafka Connect's exception class), e.g. `ConversionError`.
    pub kind: &'static str,
    pub message: String,
    /// Whether restarting the task could help (a conversion failure repeats; a record the
    /// plugin could not write may succeed later).
    pub restartable: bool,
}

impl RecordError {
    /// A failure that a restart would repeat.
    pub fn new(
        stage: Stage,
        class: impl Into<String>,
        kind: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            stage,
            class: class.into(),
            kind,
            message: message.into(),
            restartable: false,
        }
    }
}

/// Per-task error counters (Kafka Connect's task error metrics).
#[derive(Debug, Default, Serialize)]
pub struct ErrorCounts {
    /// Records that failed.
    pub total_record_errors: AtomicU64,
    /// Records skipped under `errors.tolerance=all`.
    pub total_records_skipped: AtomicU64,
    /// Retries of failed record writes.
    pub total_retries: AtomicU64,
    /// Errors logged (`errors.log.enable`).
    pub total_errors_logged: AtomicU64,
    /// Records written to the dead-letter queue.
    pub deadletterqueue_produce_requests: AtomicU64,
    /// Dead-letter writes Kafka did not take (each fails the task).
    pub deadletterqueue_produce_failures: AtomicU64,
}

impl ErrorCounts {
    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// What happened to a tolerated record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// Skipped; no DLQ configured.
    Skipped,
    /// Skipped and queued for the DLQ.
    SentToDlq,
}

/// One task's error handling.
pub struct ErrorReporter {
    policy: Arc<ErrorPolicy>,
    connector: String,
    task: u32,
    producer: Arc<Producer>,
    topics: Arc<TopicCreator>,
    counts: Arc<ErrorCounts>,
}

/// Longest key or value text put in a log line.
const LOG_SNIPPET: usize = 4096;

impl ErrorReporter {
    /// The reporter of `connector`'s task `task`.
    pub fn new(
        policy: Arc<ErrorPolicy>,
        connector: &str,
        task: u32,
        producer: Arc<Producer>,
        topics: Arc<TopicCreator>,
        counts: Arc<ErrorCounts>,
    ) -> Self {
        Self {
            policy,
            connector: connector.to_owned(),
            task,
            producer,
            topics,
            counts,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &ErrorPolicy {
        &self.policy
    }

    /// The counters.
    pub fn counts(&self) -> &ErrorCounts {
        &self.counts
    }

    /// Deal with one failed record. `Err` fails the task (intolerable error, or the DLQ write
    /// could not be queued); `Ok` means the record is skipped, and `ack` receives its report.
    pub async fn report(
        &self,
        error: RecordError,
        record: FailedRecord,
        ack: AckTarget,
    ) -> Result<Handled, Failure> {
        ErrorCounts::bump(&self.counts.total_record_errors);
        let summary = format!(
            "record {}: {} (stage {}, {})",
            record.describe(),
            error.message,
            error.stage.name(),
            error.class
        );
        if self.policy.log {
            ErrorCounts::bump(&self.counts.total_errors_logged);
            let messages = if self.policy.log_messages {
                format!(
                    "; key={} value={}",
                    snippet(record.key.as_deref()),
                    snippet(record.value.as_deref())
                )
            } else {
                String::new()
            };
            tracing::error!(target: "wasm_connect::errors", connector = %self.connector, task = self.task, "{summary}{messages}");
        }
        if !self.policy.tolerate_all {
            let trace = format!(
                "{summary} (errors.tolerance=none; set errors.tolerance=all to skip bad records{})",
                if self.policy.dlq_topic.is_none() {
                    ", and errors.deadletterqueue.topic.name to keep them"
                } else {
                    ""
                }
            );
            return Err(Failure {
                trace,
                restartable: error.restartable,
            });
        }
        ErrorCounts::bump(&self.counts.total_records_skipped);
        let Some(topic) = self.policy.dlq_topic.clone() else {
            let _ = ack.tx.send(Report::One(Ack {
                record: ack.record,
                bytes: ack.bytes,
                dlq: true,
                error: None,
            }));
            return Ok(Handled::Skipped);
        };
        self.send_to_dlq(&topic, &error, &record, ack).await?;
        Ok(Handled::SentToDlq)
    }

    async fn send_to_dlq<'a>(
        &self,
        topic: &'a str,
        error: &RecordError,
        record: &'a FailedRecord,
        mut ack: AckTarget,
    ) -> Result<(), Failure> {
        let creation = [
            (topics::PARTITIONS.to_owned(), "1".to_owned()),
            (
                topics::REPLICATION.to_owned(),
                self.policy.dlq_replication.to_string(),
            ),
        ];
        self.topics
            .ensure(topic, &creation)
            .await
            .map_err(|e| Failure::from(format!("dead-letter queue: {e}")))?;
        let mut headers = OwnedHeaders::new_with_capacity(record.headers.len() + 12);
        for (key, value) in &record.headers {
            headers = headers.insert(Header {
                key,
                value: value.as_deref(),
            });
        }
        if self.policy.dlq_context_headers {
            for (key, value) in dlq::context_headers(record, error, &self.connector, self.task) {
                headers = headers.insert(Header {
                    key,
                    value: Some(value.as_bytes()),
                });
            }
        }
        ack.dlq = true;
        ErrorCounts::bump(&self.counts.deadletterqueue_produce_requests);
        let outgoing = |value: Option<&'a [u8]>, headers: OwnedHeaders| Outgoing {
            topic,
            partition: None,
            key: record.key.as_deref(),
            value,
            headers: Some(headers),
            timestamp: record.timestamp,
        };
        let first = self
            .producer
            .send(outgoing(record.value.as_deref(), headers.clone()), ack)
            .await;
        let outcome = match first {
            // Too large for the client: keep the record's context, drop its value.
            Err((e, ack)) if e.rejects_record => {
                let size = record.value.as_ref().map_or(0, Vec::len);
                let note = format!("{size} bytes, too large for the dead-letter queue ({e})");
                let headers = headers.insert(Header {
                    key: dlq::VALUE_OMITTED,
                    value: Some(note.as_bytes()),
                });
                self.producer.send(outgoing(None, headers), ack).await
            }
            other => other,
        };
        outcome.map_err(|(e, _)| {
            ErrorCounts::bump(&self.counts.deadletterqueue_produce_failures);
            Failure::from(format!(
                "cannot write record {} to the dead-letter queue: {e}",
                record.describe()
            ))
        })
    }

    /// A DLQ write was not acknowledged: count it and fail the task (the record was not
    /// dealt with, so its offset must not be committed; a restart sees it again).
    pub fn dlq_failed(&self, message: &str) -> Failure {
        ErrorCounts::bump(&self.counts.deadletterqueue_produce_failures);
        Failure::from(format!(
            "Kafka did not take a record for the dead-letter queue {}: {message}",
            self.policy.dlq_topic.as_deref().unwrap_or("")
        ))
    }
}

fn snippet(bytes: Option<&[u8]>) -> String {
    match bytes {
        None => "null".to_owned(),
        Some(b) => {
            let text = String::from_utf8_lossy(&b[..b.len().min(LOG_SNIPPET)]);
            if b.len() > LOG_SNIPPET {
                format!("{text:?}... ({} bytes)", b.len())
            } else {
                format!("{text:?}")
            }
        }
    }
}
