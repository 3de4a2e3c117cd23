//! The worker's producer: one idempotent, `acks=all` producer shared by every source task (one
//! librdkafka client instead of one per task keeps a thousand tasks cheap). Each record carries
//! its task's acknowledgement channel, so delivery reports go straight back to the task that
//! sent it, and a task never waits on a future per record.

use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer as _, ProducerContext, ThreadedProducer};
use tokio::sync::mpsc;

use super::TracingContext;
use crate::offsets::Submitted;

/// Where a record's delivery report goes.
#[derive(Clone)]
pub struct AckTarget {
    pub tx: mpsc::UnboundedSender<Ack>,
    pub record: Submitted,
    /// Bytes of the record (for in-flight accounting), handed back in the report.
    pub bytes: usize,
    /// Whether the record went through error handling (a dead-letter write, or a skip): its
    /// success is not a record done, and its failure is not reported again.
    pub dlq: bool,
}

/// A delivery report.
#[derive(Debug)]
pub struct Ack {
    pub record: Submitted,
    pub bytes: usize,
    pub dlq: bool,
    /// Set when delivery failed for good (librdkafka has already retried retriable errors
    /// until `delivery.timeout.ms`).
    pub error: Option<DeliveryError>,
}

/// Why Kafka did not take a record.
#[derive(Debug)]
pub struct DeliveryError {
    pub message: String,
    /// The record itself, when the broker rejected this record (too large, invalid, not
    /// authorised) rather than being unreachable; error handling may route it to a DLQ.
    pub rejected: Option<Returned>,
}

/// A copy of a record Kafka rejected.
#[derive(Debug, Clone)]
pub struct Returned {
    pub topic: String,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: Option<i64>,
}

/// Whether `error` is about the record itself (retrying cannot help; error tolerance applies)
/// rather than about reaching the cluster.
pub fn rejects_record(error: &KafkaError) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        error.rdkafka_error_code(),
        Some(
            C::MessageSizeTooLarge
                | C::InvalidMessageSize
                | C::MessageBatchTooLarge
                | C::InvalidMessage
                | C::InvalidRecord
                | C::InvalidTimestamp
                | C::TopicAuthorizationFailed
                | C::PolicyViolation
        )
    )
}

/// Routes delivery reports to tasks.
pub struct AckRouter;

impl ClientContext for AckRouter {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        TracingContext.log(level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        TracingContext.error(error, reason);
    }
}

impl ProducerContext for AckRouter {
    type DeliveryOpaque = Box<AckTarget>;

    fn delivery(&self, result: &DeliveryResult<'_>, target: Box<AckTarget>) {
        let error = match result {
            Ok(_) => None,
            Err((e, message)) => Some(DeliveryError {
                message: e.to_string(),
                // Copied only on this (rare) path, so the happy path allocates nothing.
                rejected: rejects_record(e).then(|| Returned {
                    topic: message.topic().to_owned(),
                    key: message.key().map(<[u8]>::to_vec),
                    value: message.payload().map(<[u8]>::to_vec),
                    headers: message
                        .headers()
                        .map(|hs| {
                            hs.iter()
                                .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                                .collect()
                        })
                        .unwrap_or_default(),
                    timestamp: message.timestamp().to_millis(),
                }),
            }),
        };
        // A task that already ended has dropped its receiver; nothing to tell it.
        let _ = target.tx.send(Ack {
            record: target.record,
            bytes: target.bytes,
            dlq: target.dlq,
            error,
        });
    }
}

/// The client refused a record before sending it.
#[derive(Debug, Clone)]
pub struct SendError {
    pub message: String,
    /// True when the record itself is the problem (e.g. larger than `message.max.bytes`).
    pub rejects_record: bool,
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The producer's delivery settings (before the worker's `producer.*` overrides); the
/// benchmarks' native baseline sends with the same.
pub const SETTINGS: &[(&str, &str)] = &[
    ("acks", "all"),
    ("enable.idempotence", "true"),
    ("linger.ms", "5"),
    ("batch.num.messages", "10000"),
    ("batch.size", "1048576"),
    ("queue.buffering.max.messages", "1000000"),
    ("queue.buffering.max.kbytes", "1048576"),
];

/// The shared producer.
pub struct Producer {
    inner: ThreadedProducer<AckRouter>,
}

/// One record ready to send.
pub struct Outgoing<'a> {
    pub topic: &'a str,
    pub partition: Option<i32>,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Option<OwnedHeaders>,
    pub timestamp: Option<i64>,
}

impl Producer {
    /// Create the producer for `bootstrap` with our delivery settings and the worker's
    /// `producer.*` overrides.
    pub fn new(
        bootstrap: &str,
        client_id: &str,
        overrides: &[(String, String)],
    ) -> Result<Self, String> {
        let mut config = super::base_config(bootstrap, client_id);
        for (key, value) in SETTINGS {
            config.set(*key, *value);
        }
        super::apply(&mut config, overrides);
        let inner = config
            .create_with_context(AckRouter)
            .map_err(|e| format!("cannot create the Kafka producer: {e}"))?;
        Ok(Self { inner })
    }

    /// Queue a record; its delivery report goes to `target`. Waits (asynchronously) while the
    /// client's local queue is full. A record the client refuses hands `target` back, for error
    /// handling.
    pub async fn send(
        &self,
        record: Outgoing<'_>,
        target: AckTarget,
    ) -> Result<(), (SendError, AckTarget)> {
        let mut base = BaseRecord::with_opaque_to(record.topic, Box::new(target));
        if let Some(p) = record.partition {
            base = base.partition(p);
        }
        if let Some(k) = record.key {
            base = base.key(k);
        }
        if let Some(v) = record.value {
            base = base.payload(v);
        }
        if let Some(h) = record.headers {
            base = base.headers(h);
        }
        if let Some(t) = record.timestamp {
            base = base.timestamp(t);
        }
        loop {
            match self.inner.send(base) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    base = back;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                Err((e, back)) => {
                    let error = SendError {
                        message: format!("cannot send to topic {}: {e}", record.topic),
                        rejects_record: rejects_record(&e),
                    };
                    return Err((error, *back.delivery_opaque));
                }
            }
        }
    }

    /// Wait (blocking) until queued records are delivered or `timeout` passes.
    pub fn flush(&self, timeout: Duration) {
        if let Err(e) = self.inner.flush(timeout) {
            tracing::warn!("producer flush: {e}");
        }
    }

    /// The underlying client, for metadata requests.
    pub fn client(&self) -> &rdkafka::client::Client<AckRouter> {
        self.inner.client()
    }
}
