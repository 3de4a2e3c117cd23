//! Sink consumers take fetched messages a batch at a time, from each assigned partition's own
//! queue.
//!
//! rdkafka hands out one message per poll of the consumer queue, and each poll costs more than
//! the message: two clock reads, a queue lock, an event and a reference-counted allocation.
//! That was most of a sink task's thread (see docs/benchmark-journal.md).
//! librdkafka's `rd_kafka_consume_batch_queue` takes a whole run under one lock, but it must not
//! serve the consumer queue: rdkafka uses the event API, and a rebalance met there without a
//! rebalance callback is answered by unassigning everything. So each partition's fetch queue is
//! split off the consumer queue (`rd_kafka_queue_forward(queue, NULL)`) *before* librdkafka
//! assigns it, and messages are taken in batches from those queues; rebalances, errors and
//! commits stay on the consumer queue, which the task still polls once per batch.
//!
//! A split is permanent for the consumer's life (librdkafka keeps an application's forwarding
//! choice across reassignments), so a queue handle is kept once made; a revoked partition's
//! handle is only marked inactive. Every handle must be destroyed before the consumer:
//! [`FetchQueues`] does that when dropped, and `SinkConsumer` drops it first.

use std::ffi::{CString, c_void};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rdkafka::Timestamp;
use rdkafka::bindings as rdsys;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedHeaders, Message};
use tokio::sync::Notify;

/// One partition's fetch queue, split off the consumer queue.
struct Split {
    topic: Arc<str>,
    partition: i32,
    queue: *mut rdsys::rd_kafka_queue_t,
    /// Assigned now; a revoked partition's queue is kept but not read.
    active: bool,
}

/// The splits, shared by the consumer's rebalance handling (which makes them) and the task
/// (which reads them).
#[derive(Default)]
struct Splits {
    queues: Vec<Split>,
    /// Set once [`FetchQueues`] destroyed the handles: no more are made.
    closed: bool,
}

// SAFETY: librdkafka queue handles may be used and destroyed from any thread.
unsafe impl Send for Splits {}

/// A queue handle copied out of the list for one [`FetchQueues::take`].
struct Queue(*mut rdsys::rd_kafka_queue_t);

/// The part the consumer's context holds.
#[derive(Default)]
pub struct Shared {
    splits: Mutex<Splits>,
    /// Notified when a split queue goes from empty to non-empty.
    ready: Notify,
}

/// Called by librdkafka (on one of its threads) when a split queue gets its first message.
unsafe extern "C" fn wake(_rk: *mut rdsys::rd_kafka_t, opaque: *mut c_void) {
    // SAFETY: `opaque` is the `Notify` of a `Shared` that the consumer's context keeps alive
    // for as long as librdkafka runs, and the callback is removed before the handle goes.
    let ready = unsafe { &*(opaque as *const Notify) };
    ready.notify_one();
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Splits> {
        // A panic while holding the lock leaves the list itself consistent.
        self.splits.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Split off the queues of `partitions`, about to be assigned on `consumer`. A partition
    /// whose queue cannot be split keeps feeding the consumer queue, which is read too.
    pub fn split<C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        partitions: &[(String, i32)],
    ) {
        let rk = consumer.client().native_ptr();
        let mut splits = self.lock();
        if splits.closed {
            return;
        }
        for (topic, partition) in partitions {
            if let Some(split) = splits
                .queues
                .iter_mut()
                .find(|s| &*s.topic == topic && s.partition == *partition)
            {
                split.active = true;
                // SAFETY: a live handle. Messages it already holds raise no callback.
                if unsafe { rdsys::rd_kafka_queue_length(split.queue) } > 0 {
                    self.ready.notify_one();
                }
                continue;
            }
            let Ok(name) = CString::new(topic.as_str()) else {
                continue;
            };
            // SAFETY: `rk` is the live consumer borrowed above; the name is a valid C string
            // for the call.
            let queue =
                unsafe { rdsys::rd_kafka_queue_get_partition(rk, name.as_ptr(), *partition) };
            if queue.is_null() {
                tracing::debug!(
                    topic,
                    partition,
                    "partition queue not split; read from the consumer queue"
                );
                continue;
            }
            // SAFETY: `queue` is the handle just made; the opaque outlives it (see `wake`).
            unsafe {
                rdsys::rd_kafka_queue_forward(queue, std::ptr::null_mut());
                rdsys::rd_kafka_queue_cb_event_enable(
                    queue,
                    Some(wake),
                    &self.ready as *const Notify as *mut c_void,
                );
                // Anything fetched before the callback was set would otherwise wait unseen.
                if rdsys::rd_kafka_queue_length(queue) > 0 {
                    self.ready.notify_one();
                }
            }
            splits.queues.push(Split {
                topic: Arc::from(topic.as_str()),
                partition: *partition,
                queue,
                active: true,
            });
        }
    }

    /// Stop reading the queues of `partitions`, about to be revoked.
    pub fn revoke(&self, partitions: &[(String, i32)]) {
        for split in self.lock().queues.iter_mut() {
            if partitions
                .iter()
                .any(|(t, p)| &*split.topic == t && split.partition == *p)
            {
                split.active = false;
            }
        }
    }
}

/// The task's side: takes batches from the split queues, and destroys the handles when dropped
/// (which must happen before the consumer is).
pub struct FetchQueues {
    shared: Arc<Shared>,
    /// Where the next [`take`](Self::take) starts, so one busy partition cannot starve others.
    next: AtomicUsize,
}

impl FetchQueues {
    /// The task's side of `shared`.
    pub fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            next: AtomicUsize::new(0),
        }
    }

    /// Resolves once a split queue may have messages (possibly spuriously).
    pub async fn ready(&self) {
        self.shared.ready.notified().await;
    }

    /// Up to `max` messages already fetched for the assigned partitions, in each partition's
    /// order; waits for none.
    pub fn take(&self, max: usize) -> Taken<'_> {
        let mut taken = Taken {
            messages: Vec::new(),
            runs: Vec::new(),
            _queues: PhantomData,
        };
        if max == 0 {
            return taken;
        }
        // Not read under the lock: librdkafka serves any non-message op it meets in a queue,
        // and nothing it calls back into may find the lock held.
        let active: Vec<(Arc<str>, Queue)> = {
            let splits = self.shared.lock();
            splits
                .queues
                .iter()
                .filter(|s| s.active)
                .map(|s| (Arc::clone(&s.topic), Queue(s.queue)))
                .collect()
        };
        let count = active.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..count {
            let (topic, queue) = &active[(start + i) % count];
            let room = max - taken.messages.len();
            if room == 0 {
                break;
            }
            taken.messages.reserve(room);
            let len = taken.messages.len();
            // SAFETY: the handle lives until `Drop` (which needs `&mut self`, so not while
            // `self` is borrowed); the buffer has room for `room` pointers past `len`, and librdkafka
            // writes at most that many, returning how many (or -1 on error).
            let got = unsafe {
                rdsys::rd_kafka_consume_batch_queue(
                    queue.0,
                    0,
                    // `MessagePtr` is a transparent message pointer.
                    taken.messages.as_mut_ptr().add(len).cast(),
                    room,
                )
            };
            if got > 0 {
                // SAFETY: librdkafka initialised `got` (≤ room) pointers past `len`.
                unsafe { taken.messages.set_len(len + got as usize) };
                taken.runs.push((Arc::clone(topic), taken.messages.len()));
            }
        }
        taken
    }
}

impl Drop for FetchQueues {
    fn drop(&mut self) {
        let mut splits = self.shared.lock();
        splits.closed = true;
        for split in splits.queues.drain(..) {
            // SAFETY: each handle was made by `split` and is destroyed exactly once, callback
            // first, while the consumer is still alive.
            unsafe {
                rdsys::rd_kafka_queue_cb_event_enable(split.queue, None, std::ptr::null_mut());
                rdsys::rd_kafka_queue_destroy(split.queue);
            }
        }
    }
}

/// Messages taken from the split queues, destroyed when this is dropped.
pub struct Taken<'q> {
    messages: Vec<MessagePtr>,
    /// The topic of each run of messages, and where the run ends.
    runs: Vec<(Arc<str>, usize)>,
    _queues: PhantomData<&'q FetchQueues>,
}

/// A message librdkafka returned, as `rd_kafka_consume_batch_queue` writes it.
#[repr(transparent)]
struct MessagePtr(*mut rdsys::rd_kafka_message_t);

// SAFETY: librdkafka messages may be read and destroyed from any thread; `Taken` only reads
// them through `&self` and destroys them in `Drop`.
unsafe impl Send for MessagePtr {}
unsafe impl Sync for MessagePtr {}

impl Taken<'_> {
    /// How many messages (errors included).
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether none were taken.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The messages in order; a fetch error comes as `Err`.
    pub fn iter(&self) -> impl Iterator<Item = Result<Fetched<'_>, KafkaError>> {
        let mut start = 0;
        self.runs.iter().flat_map(move |(topic, end)| {
            let run = &self.messages[start..*end];
            start = *end;
            run.iter().map(move |&MessagePtr(ptr)| {
                // SAFETY: a message librdkafka returned, alive until `self` drops.
                let err = unsafe { (*ptr).err };
                if err == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                    Ok(Fetched {
                        ptr,
                        topic,
                        _taken: PhantomData,
                    })
                } else {
                    Err(KafkaError::MessageConsumption(err.into()))
                }
            })
        })
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        for &MessagePtr(message) in &self.messages {
            // SAFETY: each message came from `rd_kafka_consume_batch_queue` and is destroyed
            // once, before its queue and consumer (`Taken` borrows them).
            unsafe { rdsys::rd_kafka_message_destroy(message) };
        }
    }
}

/// A fetched message, borrowed from its [`Taken`].
pub struct Fetched<'t> {
    ptr: *mut rdsys::rd_kafka_message_t,
    topic: &'t str,
    _taken: PhantomData<&'t ()>,
}

// SAFETY: a read-only view of a message (see `Taken`).
unsafe impl Send for Fetched<'_> {}
unsafe impl Sync for Fetched<'_> {}

impl Fetched<'_> {
    /// librdkafka's message.
    pub fn ptr(&self) -> *mut rdsys::rd_kafka_message_t {
        self.ptr
    }

    fn raw(&self) -> &rdsys::rd_kafka_message_t {
        // SAFETY: alive as long as the `Taken` this borrows.
        unsafe { &*self.ptr }
    }
}

/// `len` bytes at `data`, or `None` for a null pointer (librdkafka's "no key" / "no value").
///
/// # Safety
/// `data` must be null or point to `len` bytes that live as long as `'a`.
unsafe fn bytes<'a>(data: *mut c_void, len: usize) -> Option<&'a [u8]> {
    if data.is_null() {
        None
    } else {
        // SAFETY: per the caller.
        Some(unsafe { std::slice::from_raw_parts(data as *const u8, len) })
    }
}

impl<'t> Message for Fetched<'t> {
    type Headers = BorrowedHeaders;

    fn key(&self) -> Option<&[u8]> {
        let m = self.raw();
        // SAFETY: librdkafka's key bytes live as long as the message.
        unsafe { bytes(m.key, m.key_len) }
    }

    fn payload(&self) -> Option<&[u8]> {
        let m = self.raw();
        // SAFETY: as for the key.
        unsafe { bytes(m.payload, m.len) }
    }

    unsafe fn payload_mut(&mut self) -> Option<&mut [u8]> {
        let m = self.raw();
        if m.payload.is_null() {
            None
        } else {
            // SAFETY: per the trait's contract, the caller has the message to itself.
            Some(unsafe { std::slice::from_raw_parts_mut(m.payload as *mut u8, m.len) })
        }
    }

    fn topic(&self) -> &str {
        self.topic
    }

    fn partition(&self) -> i32 {
        self.raw().partition
    }

    fn offset(&self) -> i64 {
        self.raw().offset
    }

    fn timestamp(&self) -> Timestamp {
        use rdsys::rd_kafka_timestamp_type_t as Type;
        let mut kind = Type::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        // SAFETY: a live message and a place for the type.
        let millis = unsafe { rdsys::rd_kafka_message_timestamp(self.ptr, &mut kind) };
        match kind {
            _ if millis == -1 => Timestamp::NotAvailable,
            Type::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE => Timestamp::NotAvailable,
            Type::RD_KAFKA_TIMESTAMP_CREATE_TIME => Timestamp::CreateTime(millis),
            Type::RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME => Timestamp::LogAppendTime(millis),
        }
    }

    fn headers(&self) -> Option<&BorrowedHeaders> {
        let mut headers = std::ptr::null_mut();
        // SAFETY: a live message; librdkafka keeps the parsed headers with it.
        let err = unsafe { rdsys::rd_kafka_message_headers(self.ptr, &mut headers) };
        if err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || headers.is_null() {
            return None;
        }
        // SAFETY: `BorrowedHeaders` is rdkafka's zero-sized stand-in for librdkafka's headers,
        // used by address exactly as rdkafka's own `BorrowedMessage::headers` makes it; the
        // headers live as long as the message, which `&self` borrows.
        Some(unsafe { &*(headers as *const BorrowedHeaders) })
    }
}
