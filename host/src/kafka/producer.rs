//! The worker's producer: one idempotent, `acks=all` producer shared by every source task (one
//! librdkafka client instead of one per task keeps a thousand tasks cheap). Each record carries
//! its task's acknowledgement channel, so delivery reports go straight back to the task that
//! sent it, and a task never waits on a future per record.

use std::borrow::Cow;
use std::ffi::CString;
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::bindings as rdsys;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer as _, ProducerContext, ThreadedProducer};
use tokio::sync::mpsc;

use super::OwnClient;
pub use super::delivery::Delivered;
use super::delivery::{Batch, Target};
use super::security::LastFailure;
use crate::offsets::Submitted;

/// Where a record's delivery report goes.
#[derive(Clone)]
pub struct AckTarget {
    pub tx: mpsc::UnboundedSender<Report>,
    pub record: Submitted,
    /// Bytes of the record (for in-flight accounting), handed back in the report.
    pub bytes: usize,
    /// Whether the record went through error handling (a dead-letter write, or a skip): its
    /// success is not a record done, and its failure is not reported again.
    pub dlq: bool,
}

/// What a task's acknowledgement channel carries.
#[derive(Debug)]
pub enum Report {
    /// One record's report: a record sent on its own, or a record of a batch that failed.
    One(Ack),
    /// The records of one batch call that were delivered, in one message once the last
    /// record of the call was reported (a channel message per record cost both the delivery
    /// thread and the task).
    Delivered(Delivered),
}

/// A delivery report. Kept small (the failure is boxed): one crosses a channel per record, and
/// a report carrying a rejected record inline was copied three times on the way.
#[derive(Debug)]
pub struct Ack {
    pub record: Submitted,
    pub bytes: usize,
    pub dlq: bool,
    /// Set when delivery failed for good (librdkafka has already retried retriable errors
    /// until `delivery.timeout.ms`).
    pub error: Option<Box<DeliveryError>>,
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
pub struct AckRouter {
    /// Set for a connector's own producer (KIP-458): where its failures go.
    own: Option<Arc<OwnClient>>,
    /// The worker's producer's last failure to authenticate or to set up TLS, which the health
    /// probe (asking through this client) names in an outage. A connector's own producer keeps
    /// its failures in `own` instead, and this stays empty.
    last_failure: LastFailure,
}

impl AckRouter {
    fn keeper(&self) -> super::Keeper<'_> {
        match self.own.as_deref() {
            Some(own) => super::Keeper::Own(own),
            None => super::Keeper::Worker(&self.last_failure),
        }
    }
}

impl ClientContext for AckRouter {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        super::route_log(self.keeper(), level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        super::route_error(self.keeper(), error, reason);
    }
}

impl ProducerContext for AckRouter {
    type DeliveryOpaque = Target;

    fn delivery(&self, result: &DeliveryResult<'_>, target: Target) {
        let error = match result {
            Ok(_) => {
                super::succeeded(self.own.as_deref());
                None
            }
            Err((e, message)) => Some(Box::new(DeliveryError {
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
            })),
        };
        target.report(error);
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
    /// Distributed mode: sends wait while the worker's group membership is unconfirmed.
    fence: Option<Arc<crate::kafka::group::Fence>>,
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

/// A record for [`Producer::send_batch`]. It has no headers and no timestamp of its own:
/// librdkafka's batch call takes neither (such records go through [`Producer::send`]).
pub struct Queued<'a> {
    pub partition: Option<i32>,
    pub key: Option<Cow<'a, [u8]>>,
    pub value: Option<Cow<'a, [u8]>>,
    /// What its delivery report carries back.
    pub record: Submitted,
    pub bytes: usize,
}

/// librdkafka's `RD_KAFKA_PARTITION_UA`: let the partitioner choose.
const PARTITION_UA: i32 = -1;

/// librdkafka's handle on one topic, for [`Producer::send_batch`].
pub struct Topic {
    name: String,
    handle: *mut rdsys::rd_kafka_topic_t,
    /// Keeps the client alive: librdkafka wants its topic handles destroyed first.
    _producer: Arc<Producer>,
}

// SAFETY: librdkafka's topic handles may be used and destroyed from any thread.
unsafe impl Send for Topic {}
// SAFETY: as above; the handle is only passed to librdkafka, which locks what it shares.
unsafe impl Sync for Topic {}

impl Topic {
    /// The topic's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Topic {
    fn drop(&mut self) {
        // SAFETY: the handle came from `rd_kafka_topic_new` and is released once.
        unsafe { rdsys::rd_kafka_topic_destroy(self.handle) }
    }
}

impl Producer {
    /// Create the producer for `bootstrap` with our delivery settings and the worker's
    /// `producer.*` overrides.
    pub fn new(
        bootstrap: &str,
        client_id: &str,
        overrides: &[(String, String)],
    ) -> Result<Self, String> {
        Self::create(bootstrap, client_id, overrides, None)
    }

    /// A connector's own producer (KIP-458 overrides in `overrides`), whose failures to
    /// authenticate or to set up TLS go to `own`.
    pub fn own(
        bootstrap: &str,
        client_id: &str,
        overrides: &[(String, String)],
        own: Arc<OwnClient>,
    ) -> Result<Self, String> {
        Self::create(bootstrap, client_id, overrides, Some(own))
    }

    fn create(
        bootstrap: &str,
        client_id: &str,
        overrides: &[(String, String)],
        own: Option<Arc<OwnClient>>,
    ) -> Result<Self, String> {
        let mut config = super::base_config(bootstrap, client_id);
        for (key, value) in SETTINGS {
            config.set(*key, *value);
        }
        super::apply(&mut config, overrides);
        let router = AckRouter {
            own,
            last_failure: LastFailure::default(),
        };
        let inner = super::clients::create(&config, router, "producer")?;
        Ok(Self { inner, fence: None })
    }

    /// Sends wait while `fence` is closed (distributed mode: see
    /// [`crate::kafka::group::Fence`]).
    pub fn fenced(mut self, fence: Option<Arc<crate::kafka::group::Fence>>) -> Self {
        self.fence = fence;
        self
    }

    /// Wait while the fence, if any, is closed.
    async fn through_fence(&self) {
        if let Some(fence) = &self.fence {
            fence.wait_open().await;
        }
    }

    /// Queue a record; its delivery report goes to `target`. Waits (asynchronously) while the
    /// client's local queue is full. A record the client refuses hands `target` back, for error
    /// handling.
    pub async fn send(
        &self,
        record: Outgoing<'_>,
        target: AckTarget,
    ) -> Result<(), (SendError, AckTarget)> {
        self.through_fence().await;
        let mut base = BaseRecord::with_opaque_to(record.topic, Target::Single(Box::new(target)));
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
                    let Target::Single(target) = back.delivery_opaque else {
                        unreachable!("a record sent on its own carries its own target")
                    };
                    return Err((error, *target));
                }
            }
        }
    }

    /// A handle on `name` for [`Producer::send_batch`].
    pub fn topic(self: &Arc<Self>, name: &str) -> Result<Topic, SendError> {
        let refused = |why: String| SendError {
            message: format!("cannot send to topic {name}: {why}"),
            rejects_record: false,
        };
        let cname = CString::new(name).map_err(|_| refused("the name holds a NUL byte".into()))?;
        // SAFETY: the client pointer is live for `self`; a null configuration means the
        // producer's defaults; the name is copied by librdkafka.
        let handle = unsafe {
            rdsys::rd_kafka_topic_new(
                self.inner.client().native_ptr(),
                cname.as_ptr(),
                ptr::null_mut(),
            )
        };
        if handle.is_null() {
            return Err(refused("librdkafka refused a handle on it".into()));
        }
        Ok(Topic {
            name: name.to_owned(),
            handle,
            _producer: Arc::clone(self),
        })
    }

    /// Queue `records` for `topic` with one call into librdkafka per attempt, in order; their
    /// delivery reports go to `acks`. Waits (asynchronously) while the client's
    /// local queue is full. The records the client refused come back with their errors, in
    /// order.
    ///
    /// Against one `send` per record: librdkafka's per-record call looks the topic up by name,
    /// reads the clock twice and parses its arguments, and rdkafka copies the name into a
    /// `CString`, for every record.
    pub async fn send_batch<'a>(
        &self,
        topic: &Topic,
        mut records: Vec<Queued<'a>>,
        acks: &mpsc::UnboundedSender<Report>,
    ) -> Vec<(SendError, Queued<'a>)> {
        self.through_fence().await;
        let mut refused = Vec::new();
        while !records.is_empty() {
            let full = self.enqueue(topic, records, acks, &mut refused);
            records = full;
            if !records.is_empty() {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        refused
    }

    /// One `rd_kafka_produce_batch` call: returns the records to try again (the queue was
    /// full) and adds the refused ones to `refused`.
    fn enqueue<'a>(
        &self,
        topic: &Topic,
        records: Vec<Queued<'a>>,
        acks: &mpsc::UnboundedSender<Report>,
        refused: &mut Vec<(SendError, Queued<'a>)>,
    ) -> Vec<Queued<'a>> {
        let bytes = |data: &Option<Cow<'_, [u8]>>| match data {
            Some(d) => (d.as_ptr().cast_mut().cast(), d.len()),
            None => (ptr::null_mut(), 0),
        };
        // From the call on librdkafka owns the targets of the records it took, and hands each
        // to `AckRouter::delivery` once.
        let targets = Batch::new(acks, records.iter().map(|r| (r.record, r.bytes)));
        let mut messages: Vec<_> = records
            .iter()
            .enumerate()
            .map(|(i, record)| {
                let (payload, len) = bytes(&record.value);
                let (key, key_len) = bytes(&record.key);
                rdsys::rd_kafka_message_t {
                    err: rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR,
                    rkt: ptr::null_mut(),
                    partition: record.partition.unwrap_or(PARTITION_UA),
                    payload,
                    len,
                    key,
                    key_len,
                    offset: 0,
                    _private: targets.opaque(i),
                }
            })
            .collect();
        let count = i32::try_from(messages.len()).unwrap_or(i32::MAX);
        // SAFETY: `messages` holds `count` initialised messages whose key and payload point
        // into `records`, alive until after the call; librdkafka copies them (`F_COPY`) and
        // writes only each message's `err`.
        unsafe {
            rdsys::rd_kafka_produce_batch(
                topic.handle,
                PARTITION_UA,
                rdsys::RD_KAFKA_MSG_F_COPY | rdsys::RD_KAFKA_MSG_F_PARTITION,
                messages.as_mut_ptr(),
                count,
            );
        }
        let mut full = Vec::new();
        let mut not_taken = 0;
        for (i, (message, record)) in messages.iter().zip(records).enumerate() {
            let err = if i < count as usize {
                message.err
            } else {
                rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__QUEUE_FULL
            };
            if err == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                continue;
            }
            not_taken += 1;
            let code = RDKafkaErrorCode::from(err);
            if code == RDKafkaErrorCode::QueueFull {
                full.push(record);
            } else {
                let e = KafkaError::MessageProduction(code);
                let error = SendError {
                    message: format!("cannot send to topic {}: {e}", topic.name),
                    rejects_record: rejects_record(&e),
                };
                refused.push((error, record));
            }
        }
        targets.hand_over(not_taken);
        full
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

    /// This producer's last failure to authenticate or to set up TLS (this worker's, not the
    /// process's: each worker has its own producer).
    pub fn last_failure(&self) -> &LastFailure {
        &self.inner.context().last_failure
    }
}
