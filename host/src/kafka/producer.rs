//! The worker's producer: one idempotent, `acks=all` producer shared by every source task (one
//! librdkafka client instead of one per task keeps a thousand tasks cheap). Each record carries
//! its task's acknowledgement channel, so delivery reports go straight back to the task that
//! sent it, and a task never waits on a future per record.

use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer as _, ProducerContext, ThreadedProducer};
use tokio::sync::mpsc;

use super::TracingContext;
use crate::offsets::Submitted;

/// Where a record's delivery report goes.
pub struct AckTarget {
    pub tx: mpsc::UnboundedSender<Ack>,
    pub record: Submitted,
}

/// A delivery report.
#[derive(Debug)]
pub struct Ack {
    pub record: Submitted,
    /// The broker's or client's error, when delivery failed for good (librdkafka has already
    /// retried retriable errors until `delivery.timeout.ms`).
    pub error: Option<String>,
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
            Err((e, _)) => Some(e.to_string()),
        };
        // A task that already ended has dropped its receiver; nothing to tell it.
        let _ = target.tx.send(Ack {
            record: target.record,
            error,
        });
    }
}

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
        config
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("linger.ms", "5")
            .set("batch.num.messages", "10000")
            .set("batch.size", "1048576")
            .set("queue.buffering.max.messages", "1000000")
            .set("queue.buffering.max.kbytes", "1048576");
        super::apply(&mut config, overrides);
        let inner = config
            .create_with_context(AckRouter)
            .map_err(|e| format!("cannot create the Kafka producer: {e}"))?;
        Ok(Self { inner })
    }

    /// Queue a record; its delivery report goes to `target`. Waits (asynchronously) while the
    /// client's local queue is full.
    pub async fn send(&self, record: Outgoing<'_>, target: AckTarget) -> Result<(), String> {
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
                Err((e, _)) => return Err(format!("cannot send to topic {}: {e}", record.topic)),
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
