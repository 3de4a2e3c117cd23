//! The source task loop. Records a plugin returns are converted and handed to the shared
//! producer; acknowledgements come back on the task's channel and advance the committable
//! offsets; every `offset.flush.interval.ms` (and on stop) those offsets are written to the
//! offset store and then passed to the plugin's `commit`. At most `source.max.in.flight.records`
//! records (and `source.max.in.flight.bytes` bytes) are unacknowledged at a time, so a fast
//! plugin meets back-pressure, and a task whose cluster is unreachable stops polling.
//! A record that is too large, cannot be converted or that Kafka rejects goes to the
//! connector's error handling (`errors.*`): it fails the task, or is skipped (and written to
//! the dead-letter queue) with its offset committed only once that is done.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rdkafka::message::{Header, OwnedHeaders};
use tokio::sync::{mpsc, watch};

use super::poll_ahead::{PendingPoll, PollAhead, answer_or_stop};
use super::transforms::{self, Outcome};
use super::{
    ActiveTopics, Control, Failure, RunnerSettings, TaskMetrics, TaskState, backoff, control,
    note_topic,
};
use crate::convert::Converter;
use crate::errors::dlq::FailedRecord;
use crate::errors::{ErrorReporter, RecordError, Stage};
use crate::kafka::producer::{
    Ack, AckTarget, DeliveryError, Outgoing, Producer, Queued, Report, Topic,
};
use crate::kafka::topics::TopicCreator;
use crate::offsets::{OffsetStore, Submitted, SubmittedRecords};
use crate::sandbox::capabilities::TopicGrant;
use crate::sandbox::instance::SourcePosition;
use crate::sandbox::{DataRef, RecordRef};
use crate::transform::Chain;

/// How many batches the plugin may be asked for ahead of the one being sent. Two, because the
/// plugin's thread shares two cores with the producer's threads and the broker: with one, the
/// loop still waited for the plugin (see docs/benchmark-journal.md).
const POLL_AHEAD: usize = 2;

/// How long a stopping task waits for outstanding acknowledgements.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// Everything one source task runs with.
pub struct SourceRunner {
    pub connector: String,
    pub task: u32,
    /// The plugin instance, served ahead of the loop (see `poll_ahead`).
    pub instance: PollAhead,
    pub producer: Arc<Producer>,
    pub topics: Arc<TopicCreator>,
    pub offsets: Arc<dyn OffsetStore>,
    /// The connector config (default `topic`, topic creation settings).
    pub config: Vec<(String, String)>,
    pub key_converter: Converter,
    pub value_converter: Converter,
    pub settings: RunnerSettings,
    pub metrics: Arc<TaskMetrics>,
    pub topics_used: ActiveTopics,
    /// The topics the connector may write to.
    pub grant: TopicGrant,
    /// The plugin's name, for error reports.
    pub plugin: String,
    pub errors: ErrorReporter,
    /// The connector's transforms (`transforms=`), run on each polled record before the
    /// converters; empty for most connectors, which then skip it.
    pub transforms: Chain,
}

/// Check the record's source partition and offset, and remember the partition's canonical
/// JSON (keys sorted, no whitespace) in `state.last_partition`, so partitions compare by value
/// as the contract says. The previous record's partition text is kept, since consecutive records
/// mostly share it: then nothing is parsed or copied.
fn check_position(
    state: &mut Loop,
    settings: &RunnerSettings,
    record: &RecordRef<'_>,
) -> Result<(), String> {
    let longest = record
        .source_partition
        .len()
        .max(record.source_offset.len());
    if longest > settings.source_offset_max_bytes {
        return Err(format!(
            "its source partition is {} bytes and its source offset {} bytes, over the limit of {} bytes (sandbox.source.offset.max.bytes)",
            record.source_partition.len(),
            record.source_offset.len(),
            settings.source_offset_max_bytes
        ));
    }
    if !matches!(&state.last_partition, Some((raw, _)) if raw == record.source_partition) {
        let value: serde_json::Value = serde_json::from_str(record.source_partition)
            .map_err(|e| format!("its source partition is not JSON ({e})"))?;
        let canonical = value.to_string();
        let max = settings.source_partitions_max;
        if !state.tracker.admits(&canonical, max) {
            return Err(format!(
                "it names a new source partition, but the task already tracks {} source partitions, the limit (sandbox.source.partitions.max); a connector should reuse a bounded set of source partitions",
                state.tracker.partitions()
            ));
        }
        state.last_partition = Some((record.source_partition.to_owned(), canonical));
    }
    serde_json::from_str::<serde::de::IgnoredAny>(record.source_offset)
        .map_err(|e| format!("its source offset is not JSON ({e})"))?;
    Ok(())
}

/// What a dead-letter copy of `record` (for `topic`) carries: the key and value as far as
/// conversion got, and its own headers, timestamp and source position.
fn failed_record(
    topic: &str,
    record: &RecordRef<'_>,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    source_position: Option<(String, String)>,
) -> FailedRecord {
    FailedRecord {
        topic: topic.to_owned(),
        key,
        value,
        headers: record
            .headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.map(<[u8]>::to_vec)))
            .collect(),
        timestamp: record.timestamp,
        source_position,
        ..Default::default()
    }
}

/// The failure of a task whose record `index` has a position [`check_position`] refused.
fn position_failure(index: usize, record: &RecordRef<'_>, problem: String) -> Failure {
    Failure::from(format!(
        "record {index} of the batch (source partition {}, offset {}): {problem}",
        excerpt(record.source_partition),
        excerpt(record.source_offset)
    ))
}

/// A plugin's text as quoted in a trace: at most [`EXCERPT`] bytes of it.
fn excerpt(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= EXCERPT {
        return text.into();
    }
    let mut end = EXCERPT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &text[..end], text.len()).into()
}

/// How much of a plugin's source partition or offset a trace quotes.
const EXCERPT: usize = 200;

/// What a record costs the in-flight byte budget until it is acknowledged: its Kafka bytes
/// (`size`) and its source position, which the offset tracker holds meanwhile.
fn in_flight_cost(record: &RecordRef<'_>, size: usize) -> usize {
    size + record.source_partition.len() + record.source_offset.len()
}

/// A delivery report of a record Kafka did not take.
struct FailedAck {
    record: Submitted,
    dlq: bool,
    error: Box<DeliveryError>,
}

struct Loop {
    tracker: SubmittedRecords,
    acks_tx: mpsc::UnboundedSender<Report>,
    acks: mpsc::UnboundedReceiver<Report>,
    /// The first delivery failure, which fails the task.
    delivery_error: Option<Failure>,
    /// Bytes sent and not yet acknowledged.
    in_flight_bytes: usize,
    /// Submitted records that will never be acknowledged (their failure ends the task).
    abandoned: usize,
    /// The last source partition text seen and its canonical form.
    last_partition: Option<(String, String)>,
    /// The topic of the previous record (checked to exist and noted as active).
    last_topic: String,
    /// The producer's handle on the last topic records were queued for.
    topic: Option<Topic>,
    /// The task's stop signal, for waits deep in sending.
    stop: watch::Receiver<Control>,
    /// Set when a stop request ended a wait while sending: the batch ends without failing the
    /// task.
    stopped: bool,
}

impl Loop {
    /// Track `record` (whose position `check_position` accepted) as sent, `bytes` in flight
    /// (see [`in_flight_cost`]).
    fn submit(&mut self, record: &RecordRef<'_>, bytes: usize) -> Submitted {
        let partition = self.last_partition.as_ref().map_or("", |(_, c)| c.as_str());
        self.in_flight_bytes += bytes;
        self.tracker.submit(partition, record.source_offset)
    }

    /// A target of its own for `record`'s delivery report (`bytes` is what it counts in flight):
    /// for a record sent on its own or handed to error handling.
    fn target(&self, record: Submitted, bytes: usize) -> AckTarget {
        AckTarget {
            tx: self.acks_tx.clone(),
            record,
            bytes,
            dlq: false,
        }
    }
}

impl SourceRunner {
    /// Run until told to stop or the task fails; `Err` carries the failure trace.
    pub async fn run(mut self, mut stop: watch::Receiver<Control>) -> Result<(), Failure> {
        let (acks_tx, acks) = mpsc::unbounded_channel();
        let mut state = Loop {
            tracker: SubmittedRecords::default(),
            acks_tx,
            acks,
            delivery_error: None,
            in_flight_bytes: 0,
            abandoned: 0,
            last_partition: None,
            last_topic: String::new(),
            topic: None,
            stop: stop.clone(),
            stopped: false,
        };
        let outcome = self.poll_loop(&mut state, &mut stop).await;
        // Whatever happened, record what Kafka has acknowledged so nothing is replayed twice
        // needlessly; then let the plugin release its resources.
        self.drain(&mut state).await;
        let flushed = self.flush(&mut state, true).await;
        if let Err(e) = self.instance.stop(self.settings.shutdown_grace).await {
            tracing::warn!(connector = %self.connector, task = self.task, "stop: {e}");
        }
        outcome.and(flushed)
    }

    async fn poll_loop(
        &mut self,
        state: &mut Loop,
        stop: &mut watch::Receiver<Control>,
    ) -> Result<(), Failure> {
        let default_topic = self
            .config
            .iter()
            .find(|(k, _)| k == "topic")
            .map(|(_, v)| v.clone());
        let mut last_flush = Instant::now();
        let mut idle = Duration::from_millis(1);
        let mut retries = 0;
        // Batches asked for while the last ones were sent, with the most records each may hold.
        let mut ahead: VecDeque<(PendingPoll, usize)> = VecDeque::with_capacity(POLL_AHEAD);
        loop {
            self.take_acks(state).await;
            if let Some(e) = &state.delivery_error {
                return Err(e.clone());
            }
            if last_flush.elapsed() >= self.settings.flush_interval {
                self.flush(state, false).await?;
                last_flush = Instant::now();
                state.last_topic.clear();
            }
            match control(stop) {
                // A batch the plugin already returned is sent before the task pauses or stops,
                // as the contract says of records returned before `stop`; nothing more is
                // asked for.
                Control::Stop | Control::Pause if !ahead.is_empty() => {}
                Control::Stop => return Ok(()),
                Control::Pause => {
                    // No polling; acknowledgements and offset flushes go on.
                    self.metrics.set_state(TaskState::Paused);
                    tokio::select! {
                        ack = state.acks.recv() => if let Some(ack) = ack { self.on_ack(state, ack).await },
                        _ = tokio::time::sleep(self.settings.flush_interval) => {}
                        _ = stop.changed() => {}
                    }
                    continue;
                }
                Control::Run => self.metrics.set_state(TaskState::Running),
            }
            let pending = match ahead.pop_front() {
                Some((pending, _)) => pending,
                None => {
                    let Some(max) = self.room(state, 0) else {
                        // Back-pressure: wait for Kafka to acknowledge something. While the
                        // cluster is unreachable this is where the task waits, polling nothing.
                        tokio::select! {
                            ack = state.acks.recv() => if let Some(ack) = ack { self.on_ack(state, ack).await },
                            _ = tokio::time::sleep(self.settings.flush_interval) => {}
                            _ = stop.changed() => {}
                        }
                        continue;
                    };
                    self.instance.poll(max)
                }
            };
            let grace = self.settings.shutdown_grace;
            let Some(taken) = answer_or_stop(pending.take(), stop, grace).await else {
                tracing::warn!(connector = %self.connector, task = self.task, "poll did not return within {} ms of the stop request (task.shutdown.graceful.timeout.ms); abandoning the plugin instance", grace.as_millis());
                self.instance.abandon();
                return Ok(());
            };
            let polled = match taken {
                Ok(polled) => {
                    retries = 0;
                    polled
                }
                Err(e) if e.is_retriable() => {
                    let wait = backoff(retries);
                    retries += 1;
                    tracing::warn!(connector = %self.connector, task = self.task, "{e}; polling again in {wait:?}");
                    tokio::select! { _ = tokio::time::sleep(wait) => {}, _ = stop.changed() => {} }
                    continue;
                }
                Err(e) => return Err(Failure::from(e)),
            };
            if polled.is_empty() {
                tokio::select! {
                    _ = tokio::time::sleep(idle) => {}
                    _ = stop.changed() => {}
                }
                idle = (idle * 2).min(Duration::from_millis(50));
                continue;
            }
            idle = Duration::from_millis(1);
            // The plugin starts on the next batches while this one is sent (not after an empty
            // batch, which backs off instead).
            while ahead.len() < POLL_AHEAD && matches!(control(stop), Control::Run) {
                let asked: usize = ahead.iter().map(|(_, max)| max).sum();
                let Some(max) = self.room(state, polled.len() + asked) else {
                    break;
                };
                ahead.push_back((self.instance.poll(max), max as usize));
            }
            let records = polled.read_within(
                self.settings.batch_max_bytes,
                self.settings.record_max_headers,
            )?;
            self.metrics
                .records_in
                .fetch_add(records.len() as u64, Ordering::Relaxed);
            // The transforms run over the whole batch first (they only compute); what they made
            // of each record is then sent in the batch's order, so positions are submitted in
            // order whatever was dropped or failed.
            let outcomes: Vec<Outcome<'_>> = if self.transforms.is_empty() {
                Vec::new()
            } else {
                records
                    .iter()
                    .map(|r| {
                        let record = transforms::from_polled(r, default_topic.as_deref());
                        transforms::apply(&mut self.transforms, record)
                    })
                    .collect()
            };
            // Records without headers or a timestamp of their own are queued and handed to
            // the producer together, in order with the others.
            let mut queued = Vec::with_capacity(records.len());
            let mut sent = Ok(());
            for (index, record) in records.iter().enumerate() {
                let transformed;
                let record = match outcomes.get(index) {
                    None => record,
                    Some(Outcome::Keep(t)) => {
                        transformed = transforms::to_polled(t, record);
                        &transformed
                    }
                    Some(Outcome::Dropped) => {
                        sent = self.drop_record(state, index, record);
                        if sent.is_err() {
                            break;
                        }
                        continue;
                    }
                    Some(Outcome::Failed(error)) => {
                        sent = self
                            .fail_record(
                                state,
                                index,
                                record,
                                default_topic.as_deref(),
                                error,
                                &mut queued,
                            )
                            .await;
                        if sent.is_err() {
                            break;
                        }
                        continue;
                    }
                };
                if self.queue_plain(state, record, default_topic.as_deref(), &mut queued) {
                    continue;
                }
                sent = self
                    .send(state, index, record, default_topic.as_deref(), &mut queued)
                    .await;
                if sent.is_err() {
                    break;
                }
            }
            // Records queued before a failure are sent all the same: they were submitted, and
            // the task waits for their acknowledgements when it stops.
            let flushed = self.send_queued(state, &mut queued).await;
            if state.stopped {
                // Stopped while waiting for the cluster: not a failure of the task.
                return flushed;
            }
            sent.and(flushed)?;
        }
    }

    /// How many records the next poll may return, with `pending` more about to be sent;
    /// `None` while the in-flight limits are reached.
    fn room(&self, state: &Loop, pending: usize) -> Option<u32> {
        let room = self
            .settings
            .source_max_in_flight
            .saturating_sub(state.tracker.in_flight() + pending);
        let full = room == 0 || state.in_flight_bytes >= self.settings.source_max_in_flight_bytes;
        (!full).then(|| (self.settings.source_poll_max_records as usize).min(room) as u32)
    }

    /// Queue the common record without an `.await`: one for the topic of the record before,
    /// with no headers or timestamp of its own, a valid position, within the size limit, and
    /// converted by both converters. `false`: nothing was done, and [`Self::send`] takes the
    /// record (and reports whatever is wrong with it). This path builds no future per record,
    /// which `send` does.
    fn queue_plain<'b>(
        &self,
        state: &mut Loop,
        record: &RecordRef<'b>,
        default_topic: Option<&str>,
        queued: &mut Vec<Queued<'b>>,
    ) -> bool {
        let plain = record.headers.is_empty() && record.timestamp.is_none();
        let topic = record.topic.or(default_topic);
        if !plain || topic.is_none_or(|t| t.is_empty() || t != state.last_topic) {
            return false;
        }
        let bytes = record.size();
        if bytes > self.settings.record_max_bytes
            || check_position(state, &self.settings, record).is_err()
        {
            return false;
        }
        let (Ok(key), Ok(value)) = (
            self.key_converter
                .to_kafka_with(record.key, record.key_schema),
            self.value_converter
                .to_kafka_with(record.value, record.value_schema),
        ) else {
            return false;
        };
        let bytes = in_flight_cost(record, bytes);
        let submitted = state.submit(record, bytes);
        queued.push(Queued {
            partition: record.partition,
            key,
            value,
            record: submitted,
            bytes,
        });
        true
    }

    async fn send<'b>(
        &mut self,
        state: &mut Loop,
        index: usize,
        record: &RecordRef<'b>,
        default_topic: Option<&str>,
        queued: &mut Vec<Queued<'b>>,
    ) -> Result<(), Failure> {
        let topic = record.topic.or(default_topic).ok_or_else(|| {
            position_failure(
                index,
                record,
                "it names no topic and the connector config has no `topic`".to_owned(),
            )
        })?;
        // Consecutive records mostly share a topic; the check is repeated after each flush so a
        // topics reset notices the topic again.
        if state.last_topic != topic {
            self.send_queued(state, queued).await?;
            if let Some(reason) = self.topic_refusal(topic) {
                return self
                    .refuse_topic(state, index, record, topic, reason, queued)
                    .await;
            }
            self.ensure_topic(state, topic).await?;
            topic.clone_into(&mut state.last_topic);
        }
        check_position(state, &self.settings, record)
            .map_err(|e| position_failure(index, record, e))?;
        let bytes = in_flight_cost(record, record.size());
        let submitted = state.submit(record, bytes);
        let outcome = self
            .deliver(state, record, topic, submitted, bytes, queued)
            .await;
        if outcome.is_err() {
            // Failing the task: this record will never be acknowledged.
            state.abandoned += 1;
        }
        outcome
    }

    /// A record a transform dropped: its position is submitted and acknowledged at once, in
    /// order with the records around it, so the offsets move past it (Kafka Connect commits a
    /// filtered record's offset as well).
    fn drop_record(
        &self,
        state: &mut Loop,
        index: usize,
        record: &RecordRef<'_>,
    ) -> Result<(), Failure> {
        check_position(state, &self.settings, record)
            .map_err(|e| position_failure(index, record, e))?;
        let bytes = in_flight_cost(record, 0);
        let submitted = state.submit(record, bytes);
        let _ = state.acks_tx.send(Report::One(Ack {
            record: submitted,
            bytes,
            dlq: true,
            error: None,
        }));
        Ok(())
    }

    /// A record a transform failed on: error handling takes the record as the plugin gave it.
    async fn fail_record<'b>(
        &mut self,
        state: &mut Loop,
        index: usize,
        record: &RecordRef<'b>,
        default_topic: Option<&str>,
        error: &RecordError,
        queued: &mut Vec<Queued<'b>>,
    ) -> Result<(), Failure> {
        check_position(state, &self.settings, record)
            .map_err(|e| position_failure(index, record, e))?;
        let bytes = in_flight_cost(record, record.size());
        let submitted = state.submit(record, bytes);
        let raw = |data: Option<DataRef<'_>>| data.map(|d| d.bytes().to_vec());
        let topic = record.topic.or(default_topic).unwrap_or("");
        let failed = failed_record(
            topic,
            record,
            raw(record.key),
            raw(record.value),
            state.tracker.position(submitted),
        );
        let target = state.target(submitted, bytes);
        let outcome = self
            .reject(state, queued, error.clone(), failed, target)
            .await;
        if outcome.is_err() {
            state.abandoned += 1;
        }
        outcome
    }

    /// Make sure `topic` exists. While the cluster does not answer (an outage, credentials it
    /// refuses) the task waits and asks again, as its records wait, instead of failing; the
    /// status trace says what it waits for. A stop request ends the wait: `state.stopped` is
    /// set and the error only ends the batch (nothing of it was submitted, so nothing of it is
    /// committed, and the next run polls it again).
    async fn ensure_topic(&self, state: &mut Loop, topic: &str) -> Result<(), Failure> {
        let mut attempt = 0;
        loop {
            let mut stop = state.stop.clone();
            let stopping = async move {
                let _ = stop.wait_for(|c| *c == Control::Stop).await;
            };
            let outcome = tokio::select! {
                outcome = self.topics.try_ensure(topic, &self.config) => outcome,
                () = stopping => {
                    state.stopped = true;
                    return Err(Failure::from(format!("stopped while waiting to create topic {topic}")));
                }
            };
            match outcome {
                Ok(()) => {
                    // Also clears what an earlier run of the task was waiting for.
                    self.metrics.set_detail(None);
                    if attempt > 0 {
                        tracing::info!(connector = %self.connector, task = self.task, topic, "the topic is there; sending again");
                    }
                    return Ok(());
                }
                Err(e) if e.unanswered => {
                    let wait = backoff(attempt);
                    if attempt == 0 {
                        tracing::warn!(connector = %self.connector, task = self.task, "{}; records wait and the task asks again", e.message);
                    }
                    self.metrics.set_detail(Some(format!(
                        "{}; records wait and the task asks again",
                        e.message
                    )));
                    attempt += 1;
                    let mut stop = state.stop.clone();
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        _ = stop.wait_for(|c| *c == Control::Stop) => {
                            state.stopped = true;
                            return Err(Failure::from(format!("stopped while waiting to create topic {topic}")));
                        }
                    }
                }
                Err(e) if e.invalid => return Err(Failure::fatal(e.message)),
                Err(e) => return Err(Failure::from(e.message)),
            }
        }
    }

    /// Why records may not go to `topic`: it is not granted, or the connector already writes
    /// to as many topics as it may (which also bounds the topics it creates).
    fn topic_refusal(&self, topic: &str) -> Option<String> {
        if !self.grant.allows(topic) {
            return Some(format!(
                "the connector may write only to the topics its config grants ({}; keys topic, topics, sandbox.topics.write, sandbox.topics.write.regex), not to {topic}",
                self.grant.describe()
            ));
        }
        note_topic(&self.topics_used, topic, self.settings.topics_max)
            .err()
            .map(|used| {
                format!(
                    "the connector already writes to {used} topics, the limit (sandbox.topics.max); {topic} would be one more"
                )
            })
    }

    /// Hand a record for a topic it may not write to error handling (the task fails, or the
    /// record is skipped and dead-lettered): nothing reaches that topic, nor creates it.
    async fn refuse_topic<'b>(
        &mut self,
        state: &mut Loop,
        index: usize,
        record: &RecordRef<'b>,
        topic: &str,
        reason: String,
        queued: &mut Vec<Queued<'b>>,
    ) -> Result<(), Failure> {
        check_position(state, &self.settings, record)
            .map_err(|e| position_failure(index, record, e))?;
        let bytes = in_flight_cost(record, record.size());
        let submitted = state.submit(record, bytes);
        let error = RecordError::new(Stage::TaskPoll, &self.plugin, "TopicNotGranted", reason);
        let failed = failed_record(
            topic,
            record,
            record.key.map(|d| d.bytes().to_vec()),
            record.value.map(|d| d.bytes().to_vec()),
            state.tracker.position(submitted),
        );
        let target = state.target(submitted, bytes);
        let outcome = self.reject(state, queued, error, failed, target).await;
        if outcome.is_err() {
            state.abandoned += 1;
        }
        outcome
    }

    /// Hand the queued records to the producer; a record it refuses goes to error handling.
    async fn send_queued(
        &mut self,
        state: &mut Loop,
        queued: &mut Vec<Queued<'_>>,
    ) -> Result<(), Failure> {
        if queued.is_empty() {
            return Ok(());
        }
        let topic = match state.topic.take() {
            Some(topic) if topic.name() == state.last_topic => topic,
            _ => self
                .producer
                .topic(&state.last_topic)
                .map_err(|e| Failure::from(e.message))?,
        };
        let refused = self
            .producer
            .send_batch(&topic, std::mem::take(queued), &state.acks_tx)
            .await;
        let mut unhandled = refused.len();
        let mut outcome = Ok(());
        for (e, record) in refused {
            if !e.rejects_record {
                outcome = Err(Failure::from(e.message));
                break;
            }
            let error =
                RecordError::new(Stage::KafkaProduce, "producer", "RecordRejected", e.message);
            let failed = FailedRecord {
                topic: topic.name().to_owned(),
                key: record.key.map(Cow::into_owned),
                value: record.value.map(Cow::into_owned),
                timestamp: None,
                source_position: state.tracker.position(record.record),
                ..Default::default()
            };
            let target = state.target(record.record, record.bytes);
            if let Err(failure) = self.errors.report(error, failed, target).await {
                outcome = Err(failure);
                break;
            }
            unhandled -= 1;
        }
        state.topic = Some(topic);
        if outcome.is_err() {
            // Failing the task: these records will never be acknowledged.
            state.abandoned += unhandled;
        }
        outcome
    }

    /// Check, convert and send a submitted record; a bad record goes to error handling (its
    /// source position is looked up in `tracker` only then, and its fields copied). A record
    /// sent on its own or to error handling gets an [`AckTarget`] of its own; a queued one
    /// shares its batch's (see `kafka::delivery`).
    async fn deliver<'b>(
        &mut self,
        state: &mut Loop,
        record: &RecordRef<'b>,
        topic: &str,
        submitted: Submitted,
        bytes: usize,
        queued: &mut Vec<Queued<'b>>,
    ) -> Result<(), Failure> {
        // What a dead-letter record carries: the key and value as far as conversion got.
        let failed = |key: Option<Vec<u8>>, value: Option<Vec<u8>>, tracker: &SubmittedRecords| {
            failed_record(topic, record, key, value, tracker.position(submitted))
        };
        let raw = |data: Option<DataRef<'_>>| data.map(|d| d.bytes().to_vec());
        let size = record.size();
        if size > self.settings.record_max_bytes {
            let error = RecordError::new(
                Stage::TaskPoll,
                &self.plugin,
                "RecordTooLarge",
                format!(
                    "the record is {size} bytes, over the limit of {} bytes (sandbox.record.max.bytes)",
                    self.settings.record_max_bytes
                ),
            );
            let failed = failed(raw(record.key), raw(record.value), &state.tracker);
            return self
                .reject(state, queued, error, failed, state.target(submitted, bytes))
                .await;
        }
        let key = match self
            .key_converter
            .to_kafka_with(record.key, record.key_schema)
        {
            Ok(key) => key,
            Err(e) => {
                let error = RecordError::new(
                    Stage::KeyConverter,
                    self.key_converter.name(),
                    "ConversionError",
                    format!("the key converter failed: {e}"),
                );
                let failed = failed(raw(record.key), raw(record.value), &state.tracker);
                return self
                    .reject(state, queued, error, failed, state.target(submitted, bytes))
                    .await;
            }
        };
        let value = match self
            .value_converter
            .to_kafka_with(record.value, record.value_schema)
        {
            Ok(value) => value,
            Err(e) => {
                let error = RecordError::new(
                    Stage::ValueConverter,
                    self.value_converter.name(),
                    "ConversionError",
                    format!("the value converter failed: {e}"),
                );
                let failed = failed(key.map(Cow::into_owned), raw(record.value), &state.tracker);
                return self
                    .reject(state, queued, error, failed, state.target(submitted, bytes))
                    .await;
            }
        };
        if record.headers.is_empty() && record.timestamp.is_none() {
            queued.push(Queued {
                partition: record.partition,
                key,
                value,
                record: submitted,
                bytes,
            });
            return Ok(());
        }
        self.send_queued(state, queued).await?;
        let headers = (!record.headers.is_empty()).then(|| {
            record.headers.iter().fold(
                OwnedHeaders::new_with_capacity(record.headers.len()),
                |h, (key, value)| h.insert(Header { key, value: *value }),
            )
        });
        let sent = self
            .producer
            .send(
                Outgoing {
                    topic,
                    partition: record.partition,
                    key: key.as_deref(),
                    value: value.as_deref(),
                    headers,
                    timestamp: record.timestamp,
                },
                state.target(submitted, bytes),
            )
            .await;
        match sent {
            Ok(()) => Ok(()),
            Err((e, ack)) if e.rejects_record => {
                let error =
                    RecordError::new(Stage::KafkaProduce, "producer", "RecordRejected", e.message);
                let failed = failed(
                    key.map(Cow::into_owned),
                    value.map(Cow::into_owned),
                    &state.tracker,
                );
                self.errors.report(error, failed, ack).await.map(drop)
            }
            Err((e, _)) => Err(Failure::from(e.message)),
        }
    }

    /// Hand a record that cannot be sent to error handling, after the records queued before
    /// it, so records keep their order.
    async fn reject(
        &mut self,
        state: &mut Loop,
        queued: &mut Vec<Queued<'_>>,
        error: RecordError,
        failed: FailedRecord,
        target: AckTarget,
    ) -> Result<(), Failure> {
        self.send_queued(state, queued).await?;
        self.errors.report(error, failed, target).await.map(drop)
    }

    async fn take_acks(&mut self, state: &mut Loop) {
        while let Ok(ack) = state.acks.try_recv() {
            if let Some(failed) = self.count_ack(state, ack) {
                self.on_failed_ack(state, failed).await;
            }
        }
    }

    async fn on_ack(&mut self, state: &mut Loop, ack: Report) {
        if let Some(failed) = self.count_ack(state, ack) {
            self.on_failed_ack(state, failed).await;
        }
    }

    /// Account for a delivery report; a failed delivery is handed back. Not `async`, so the
    /// common case costs no future.
    fn count_ack(&self, state: &mut Loop, report: Report) -> Option<FailedAck> {
        let ack = match report {
            Report::One(ack) => ack,
            Report::Delivered(delivered) => {
                let mut done = 0;
                for (record, bytes) in delivered.records() {
                    state.in_flight_bytes = state.in_flight_bytes.saturating_sub(bytes);
                    state.tracker.ack(record);
                    done += 1;
                }
                self.metrics.records_done.fetch_add(done, Ordering::Relaxed);
                return None;
            }
        };
        state.in_flight_bytes = state.in_flight_bytes.saturating_sub(ack.bytes);
        match ack.error {
            None => {
                state.tracker.ack(ack.record);
                // Skipped records (and their dead-letter copies) are not records done.
                if !ack.dlq {
                    self.metrics.records_done.fetch_add(1, Ordering::Relaxed);
                }
                None
            }
            Some(error) => Some(FailedAck {
                record: ack.record,
                dlq: ack.dlq,
                error,
            }),
        }
    }

    async fn on_failed_ack(&mut self, state: &mut Loop, ack: FailedAck) {
        let failure = match *ack.error {
            error if ack.dlq => self.errors.dlq_failed(&error.message),
            DeliveryError {
                message,
                rejected: Some(returned),
            } => {
                // Kafka refused this record itself (e.g. too large for the topic): that is a
                // record error, which the connector may tolerate.
                let error = RecordError::new(
                    Stage::KafkaProduce,
                    "producer",
                    "RecordRejected",
                    format!("Kafka rejected the record: {message}"),
                );
                let failed = FailedRecord {
                    topic: returned.topic,
                    key: returned.key,
                    value: returned.value,
                    headers: returned.headers,
                    timestamp: returned.timestamp,
                    source_position: state.tracker.position(ack.record),
                    ..Default::default()
                };
                let target = state.target(ack.record, 0);
                match self.errors.report(error, failed, target).await {
                    Ok(_) => return,
                    Err(failure) => failure,
                }
            }
            error => Failure::from(format!(
                "Kafka did not acknowledge a record: {}",
                error.message
            )),
        };
        if state.delivery_error.is_none() {
            state.delivery_error = Some(failure);
        }
    }

    /// Wait (bounded) for outstanding acknowledgements.
    async fn drain(&mut self, state: &mut Loop) {
        let deadline = tokio::time::Instant::now() + STOP_GRACE;
        while state.tracker.in_flight() > state.abandoned && state.delivery_error.is_none() {
            tokio::select! {
                ack = state.acks.recv() => match ack {
                    Some(ack) => self.on_ack(state, ack).await,
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => {
                    tracing::warn!(connector = %self.connector, task = self.task, in_flight = state.tracker.in_flight(), "stopping with unacknowledged records; they will be sent again after a restart");
                    break;
                }
            }
        }
    }

    /// Persist the committable offsets, then tell the plugin (which, when the task is
    /// `stopping`, has `task.shutdown.graceful.timeout.ms` to take them, not its call deadline).
    async fn flush(&mut self, state: &mut Loop, stopping: bool) -> Result<(), Failure> {
        self.take_acks(state).await;
        let committable = state.tracker.take_committable();
        if committable.is_empty() {
            return Ok(());
        }
        self.offsets
            .commit(
                &self.connector,
                &committable,
                self.settings.stored_partitions_max,
            )
            .await?;
        tracing::debug!(connector = %self.connector, task = self.task, partitions = committable.len(), "flushed source offsets");
        if self.instance.is_abandoned() {
            // The offsets are stored; there is no instance left to tell.
            return Ok(());
        }
        let positions: Vec<SourcePosition> = committable
            .into_iter()
            .map(|(source_partition, source_offset)| SourcePosition {
                source_partition,
                source_offset,
            })
            .collect();
        let committed = if stopping {
            let grace = self.settings.shutdown_grace;
            match tokio::time::timeout(grace, self.instance.commit(positions)).await {
                Ok(committed) => committed,
                Err(_) => {
                    // The offsets are stored; only the plugin's notice is given up.
                    tracing::warn!(connector = %self.connector, task = self.task, "commit did not return within {} ms of the stop request (task.shutdown.graceful.timeout.ms); abandoning the plugin instance", grace.as_millis());
                    self.instance.abandon();
                    return Ok(());
                }
            }
        } else {
            self.instance.commit(positions).await
        };
        match committed {
            Ok(()) => Ok(()),
            // Told to stop while the plugin's `commit` hung: the offsets are stored; only the
            // plugin's notice was given up, after the grace.
            Err(e) if self.instance.is_abandoned() => {
                tracing::warn!(connector = %self.connector, task = self.task, "{e}");
                Ok(())
            }
            Err(e) if e.is_retriable() => {
                tracing::warn!(connector = %self.connector, task = self.task, "commit: {e}");
                Ok(())
            }
            Err(e) => Err(Failure::from(e)),
        }
    }
}
