//! A topic read from its beginning and followed, on a thread of its own (Kafka Connect's
//! `KafkaBasedLog`): every record of the given partitions goes, in each partition's order, to
//! the owner's callback; [`Follower::read_to_end`] waits until everything written before the
//! call has gone there. The config, offsets and status topics are each read this way.
//!
//! Invariant: a partition's position (how far the callback has seen it) only grows, and moves
//! past a record only after the callback returned for it; transaction markers (which take
//! offsets but are never delivered) are passed only while the consumer is idle, so an end
//! reached means every record before it was handed over.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use crate::kafka::TracingContext;

/// How long a read to the end may take before it is an error that names the topic.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// One record: partition, offset, key, value (`None`: a tombstone).
pub struct Record<'a> {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

/// A followed topic.
pub struct Follower {
    topic: String,
    /// The next offset to hand over, by partition.
    positions: Arc<BTreeMap<i32, AtomicI64>>,
    /// For the end offsets.
    watermarks: BaseConsumer<TracingContext>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Follower {
    /// Follow `partitions` of `topic` from their beginning with clients made from `consumer`
    /// settings (librdkafka's terms), handing each record to `on_record`. Only committed
    /// transactions are read.
    pub fn start(
        bootstrap: &str,
        topic: &str,
        partitions: &[i32],
        consumer: &[(String, String)],
        client_id: &str,
        mut on_record: impl FnMut(Record<'_>) + Send + 'static,
    ) -> Result<Self, String> {
        let config = |suffix: &str| {
            let mut config = crate::kafka::base_config(bootstrap, &format!("{client_id}{suffix}"));
            crate::kafka::apply(&mut config, consumer);
            // Assigned, never subscribed: no group is joined; the id is librdkafka's need.
            config
                .set("group.id", client_id)
                .set("enable.auto.commit", "false")
                .set("enable.partition.eof", "false")
                .set("isolation.level", "read_committed");
            config
        };
        let reading: BaseConsumer<TracingContext> =
            crate::kafka::clients::create(&config(""), TracingContext, "topic reader")?;
        let watermarks: BaseConsumer<TracingContext> =
            crate::kafka::clients::create(&config("-end"), TracingContext, "topic reader")?;
        let mut assignment = TopicPartitionList::new();
        for partition in partitions {
            assignment
                .add_partition_offset(topic, *partition, Offset::Beginning)
                .map_err(|e| e.to_string())?;
        }
        reading
            .assign(&assignment)
            .map_err(|e| format!("cannot read topic {topic}: {e}"))?;
        let positions: Arc<BTreeMap<i32, AtomicI64>> =
            Arc::new(partitions.iter().map(|p| (*p, AtomicI64::new(0))).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (positions, stop, topic) =
                (Arc::clone(&positions), Arc::clone(&stop), topic.to_owned());
            std::thread::Builder::new()
                .name(format!("follow-{topic}"))
                .spawn(move || {
                    while !stop.load(Ordering::Acquire) {
                        let Some(message) = reading.poll(Duration::from_millis(100)) else {
                            // Idle: everything delivered was handed over, so the consumer's
                            // positions (past any transaction markers) are how far it read.
                            if let Ok(now) = reading.position() {
                                for e in now.elements() {
                                    if let (Some(at), Some(next)) =
                                        (positions.get(&e.partition()), e.offset().to_raw())
                                    {
                                        at.fetch_max(next, Ordering::AcqRel);
                                    }
                                }
                            }
                            continue;
                        };
                        match message {
                            Ok(m) => {
                                on_record(Record {
                                    partition: m.partition(),
                                    offset: m.offset(),
                                    key: m.key(),
                                    value: m.payload(),
                                });
                                if let Some(at) = positions.get(&m.partition()) {
                                    at.fetch_max(m.offset() + 1, Ordering::AcqRel);
                                }
                            }
                            Err(e) => tracing::warn!(topic = %topic, "reading: {e}"),
                        }
                    }
                })
                .map_err(|e| e.to_string())?
        };
        Ok(Self {
            topic: topic.to_owned(),
            positions,
            watermarks,
            stop,
            thread: Some(thread),
        })
    }

    /// How far `partition` has been handed over (the next offset).
    pub fn position(&self, partition: i32) -> i64 {
        self.positions
            .get(&partition)
            .map_or(0, |p| p.load(Ordering::Acquire))
    }

    /// Wait (blocking) until every record written before this call has been handed over.
    pub fn read_to_end(&self) -> Result<(), String> {
        let topic = &self.topic;
        let mut ends = Vec::new();
        for partition in self.positions.keys() {
            let (_, high) = self
                .watermarks
                .fetch_watermarks(topic, *partition, READ_TIMEOUT)
                .map_err(|e| format!("cannot read the end of topic {topic}: {e}"))?;
            ends.push((*partition, high));
        }
        let deadline = std::time::Instant::now() + READ_TIMEOUT;
        for (partition, high) in ends {
            while self.position(partition) < high {
                if std::time::Instant::now() > deadline {
                    return Err(format!(
                        "topic {topic} was not read to its end (partition {partition}, offset {high}) within {} s; is the broker answering?",
                        READ_TIMEOUT.as_secs()
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(())
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
