//! The sink task loop. Consumed messages are converted and handed to the plugin's `put` in
//! batches; a retriable error delivers the same batch again after a backoff. While it waits on
//! the plugin (an answer, or a backoff) the loop keeps serving the consumer queue, so the task
//! stays in its group however long the target is away (see `kafka::consumer`). Every
//! `offset.flush.interval.ms` (and on stop) the plugin's `flush` says which offsets are safe,
//! and exactly those are committed to the consumer group.
//!
//! A record that cannot be converted, is larger than `sandbox.record.max.bytes`, or that `put`
//! reports as failed goes to the connector's error handling (`errors.*`): it fails the task, or
//! is skipped and written to the dead-letter queue. Offsets past a skipped record are committed
//! only after its dead-letter write is acknowledged.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{BorrowedMessage, Headers};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::{mpsc, watch};

use super::poll_ahead::answer_or_stop;
use super::put_behind::{PendingPut, PutBehind};
use super::transforms::{self, Outcome};
use super::{
    ActiveTopics, Control, Failure, RunnerSettings, TaskMetrics, TaskState, backoff, control,
    note_topic,
};
use crate::convert::Converter;
use crate::errors::dlq::FailedRecord;
use crate::errors::{ErrorReporter, RecordError, Stage};
use crate::kafka::consumer::{RebalanceEvent, SinkConsumer};
use crate::kafka::headers::ConsumedMessage;
use crate::kafka::producer::{AckTarget, Report};
use crate::offsets::Submitted;
use crate::sandbox::wit::types::{SinkRecord, TopicPartition, TopicPartitionOffset};
use crate::sandbox::{DataRef, Fields, PutBatch};
use crate::transform::{Chain, Record, Side};

/// Everything one sink task runs with.
pub struct SinkRunner {
    pub connector: String,
    pub task: u32,
    /// The plugin instance, served behind the loop (see `put_behind`).
    pub instance: PutBehind,
    pub consumer: SinkConsumer,
    pub events: mpsc::UnboundedReceiver<RebalanceEvent>,
    pub key_converter: Converter,
    pub value_converter: Converter,
    pub settings: RunnerSettings,
    pub metrics: Arc<TaskMetrics>,
    pub topics_used: ActiveTopics,
    /// The plugin's name, for error reports.
    pub plugin: String,
    pub errors: ErrorReporter,
    pub dead_letters: DeadLetters,
    /// The connector's transforms (`transforms=`), run on each converted record before it is
    /// packed for `put`; `None` without transforms (most connectors), which costs nothing.
    /// (A lock only because packing borrows the runner shared; one task uses it.)
    pub transforms: Option<std::sync::Mutex<Chain>>,
}

/// Dead-letter writes not yet acknowledged; offsets are committed only once they are.
pub struct DeadLetters {
    rx: mpsc::UnboundedReceiver<Report>,
    outstanding: Outstanding,
    /// Set once a dead-letter write failed: offsets must never again be committed past it.
    failed: Option<Failure>,
}

/// The sending half: shared by reference while a consumed message is borrowed.
struct Outstanding {
    tx: mpsc::UnboundedSender<Report>,
    count: AtomicUsize,
}

impl Default for DeadLetters {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            rx,
            failed: None,
            outstanding: Outstanding {
                tx,
                count: AtomicUsize::new(0),
            },
        }
    }
}

/// A consumed record's key and value bytes.
type RawRecord = (Option<Vec<u8>>, Option<Vec<u8>>);

/// How long a stopping task waits to leave its consumer group before it closes.
const LEAVE_GRACE: Duration = Duration::from_secs(5);

/// How long a flush waits for dead-letter acknowledgements.
const DEAD_LETTER_GRACE: Duration = Duration::from_secs(30);

/// How often a task waiting on its plugin polls the consumer queue when nothing wakes it:
/// librdkafka counts polls, not waits, against `max.poll.interval.ms`, which cannot usefully be
/// set below the broker's smallest session timeout (6 s by default).
const SERVE_EVERY: Duration = Duration::from_millis(500);

impl Outstanding {
    fn target(&self) -> AckTarget {
        self.count.fetch_add(1, Ordering::Relaxed);
        AckTarget {
            tx: self.tx.clone(),
            record: Submitted {
                partition: 0,
                seq: 0,
            },
            bytes: 0,
            dlq: false,
        }
    }
}

/// A batch handed to the plugin, with what its offsets need once `put` has answered.
struct InFlight {
    put: PendingPut,
    /// The consumed bytes of each record, when failures may be dead-lettered.
    raw: Vec<RawRecord>,
    /// Where the batch ends per partition, skipped records included.
    consumed: BTreeMap<(String, i32), i64>,
    started: Instant,
}

/// The records of one batch, as collected from the consumer.
struct Collected {
    count: usize,
    raw: Vec<RawRecord>,
    consumed: BTreeMap<(String, i32), i64>,
}

impl SinkRunner {
    /// Run until told to stop or the task fails; `Err` carries the failure trace.
    pub async fn run(mut self, mut stop: watch::Receiver<Control>) -> Result<(), Failure> {
        // Next offset to commit per partition: one past the last record handed to `put`.
        let mut positions: BTreeMap<(String, i32), i64> = BTreeMap::new();
        let mut in_flight = None;
        let mut outcome = self
            .consume_loop(&mut positions, &mut in_flight, &mut stop)
            .await;
        // A batch the plugin was still writing counts once it answered, whatever ended the loop.
        if let Some(flight) = in_flight.take() {
            let landed = self.land(flight, &mut positions, &stop).await;
            outcome = outcome.and(landed.map(drop));
        }
        // Partitions lost while a failed batch was waited on must not be committed for: their
        // new owner has them (revocations still held are committed, then released).
        while let Ok(event) = self.events.try_recv() {
            if let RebalanceEvent::Lost(parts) = event {
                for p in &parts {
                    positions.remove(p);
                }
            }
        }
        // Even after a failure, what earlier batches handed over can still be made durable and
        // committed (positions only cover records the plugin accepted).
        let flushed = self
            .flush_and_commit(&mut positions, CommitMode::Sync, true)
            .await;
        if let (Err(_), Err(flush_error)) = (&outcome, &flushed) {
            tracing::warn!(connector = %self.connector, task = self.task, "final flush after failure: {flush_error}");
        }
        // Its offsets are committed: let the group move its partitions on.
        self.leave_group().await;
        self.metrics.set_detail(None);
        if let Err(e) = self.instance.stop(self.settings.shutdown_grace).await {
            tracing::warn!(connector = %self.connector, task = self.task, "stop: {e}");
        }
        outcome.and(flushed)
    }

    /// Consume, convert and hand batches to the plugin. While the plugin writes one batch the
    /// next is collected from what the consumer has buffered; anything else (a rebalance, a
    /// flush, a pause or stop) first waits for the batch in flight.
    async fn consume_loop(
        &mut self,
        positions: &mut BTreeMap<(String, i32), i64>,
        in_flight: &mut Option<InFlight>,
        stop: &mut watch::Receiver<Control>,
    ) -> Result<(), Failure> {
        let mut last_flush = Instant::now();
        let mut paused = false;
        self.note_assignment();
        // Two batches alternate, one collected while the other is written, so a steady stream
        // of batches allocates nothing for them.
        let mut building = PutBatch::default();
        let mut spare = None;
        let mut rebalanced = false;
        loop {
            self.check_fatal()?;
            let control_now = control(stop);
            let needs_quiet = !self.events.is_empty()
                || last_flush.elapsed() >= self.settings.flush_interval
                || match control_now {
                    Control::Stop => true,
                    Control::Pause => !paused || rebalanced,
                    Control::Run => paused,
                };
            if needs_quiet && let Some(flight) = in_flight.take() {
                spare = Some(self.land(flight, positions, stop).await?);
            }
            while let Ok(event) = self.events.try_recv() {
                self.on_rebalance(event, positions).await?;
                rebalanced = true;
            }
            if last_flush.elapsed() >= self.settings.flush_interval {
                self.flush_and_commit(positions, CommitMode::Async, false)
                    .await?;
                last_flush = Instant::now();
            }
            match control(stop) {
                Control::Stop => return Ok(()),
                Control::Pause if !paused || std::mem::take(&mut rebalanced) => {
                    // Keep the assignment (and group membership) but fetch nothing.
                    self.set_paused(true);
                    paused = true;
                    self.metrics.set_state(TaskState::Paused);
                }
                Control::Run if paused => {
                    self.set_paused(false);
                    paused = false;
                    self.metrics.set_state(TaskState::Running);
                }
                _ => {}
            }
            building.clear();
            let collected = if let Some(flight) = in_flight.take() {
                // Collect what is already buffered, then see how the batch in flight went.
                let collected = self.collect(None, &mut building).await;
                spare = Some(self.land(flight, positions, stop).await?);
                collected?
            } else {
                // What is already fetched first: a partition queue signals only when it
                // goes from empty to non-empty, so one left non-empty would wait unseen.
                let ready = self.collect(None, &mut building).await?;
                if ready.count > 0 {
                    self.start_put(ready, &mut building, &mut spare, positions, in_flight);
                    continue;
                }
                let wait = self
                    .settings
                    .flush_interval
                    .saturating_sub(last_flush.elapsed());
                let first = tokio::select! {
                    message = self.consumer.recv() => Some(message),
                    () = self.consumer.fetched().ready() => None,
                    event = self.events.recv() => {
                        if let Some(event) = event {
                            self.on_rebalance(event, positions).await?;
                            // New partitions of a paused task must be paused too.
                            rebalanced = true;
                        }
                        continue;
                    }
                    _ = tokio::time::sleep(wait) => continue,
                    _ = stop.changed() => continue,
                };
                self.collect(first, &mut building).await?
            };
            self.start_put(collected, &mut building, &mut spare, positions, in_flight);
        }
    }

    /// Hand the batch in `building` to the plugin (a spare batch takes its place), or, with
    /// nothing to write (none buffered, or all skipped), just move the offsets on.
    fn start_put(
        &mut self,
        collected: Collected,
        building: &mut PutBatch,
        spare: &mut Option<PutBatch>,
        positions: &mut BTreeMap<(String, i32), i64>,
        in_flight: &mut Option<InFlight>,
    ) {
        self.metrics
            .records_in
            .fetch_add(collected.count as u64, Ordering::Relaxed);
        if building.is_empty() {
            positions.extend(collected.consumed);
            return;
        }
        let next = spare.take().unwrap_or_default();
        *in_flight = Some(InFlight {
            put: self.instance.put(std::mem::replace(building, next)),
            raw: collected.raw,
            consumed: collected.consumed,
            started: Instant::now(),
        });
    }

    /// Convert and pack into `batch` the messages the consumer has ready, after `first` if
    /// given, up to `sink.batch.max.records`; waits for none.
    async fn collect(
        &self,
        first: Option<KafkaResult<BorrowedMessage<'_>>>,
        batch: &mut PutBatch,
    ) -> Result<Collected, Failure> {
        // The consumed bytes of each batch record, when `put` failures may be dead-lettered
        // (the copy must be the original, not a re-encoding).
        let keep_raw = {
            let policy = self.errors.policy();
            policy.tolerate_all && policy.dlq_topic.is_some()
        };
        let mut collected = Collected {
            count: 0,
            raw: Vec::new(),
            consumed: BTreeMap::new(),
        };
        let max = self.settings.sink_batch_max_records;
        // Messages kept while the consumer queue was served during a wait came out of it
        // before anything still in it.
        for m in self.consumer.take_carried(max) {
            self.add(&m, keep_raw, batch, &mut collected).await?;
        }
        if collected.count >= max {
            return Ok(collected);
        }
        // The consumer queue first: polling it serves rebalances (whose events the loop then
        // handles) and errors, and brings messages of any partition not split off.
        // One stream for the whole batch: each `recv` makes (and drops) a stream, which
        // registers a waker slot.
        {
            let mut rest = self.consumer.stream();
            let mut next = first.or_else(|| rest.next().now_or_never().flatten());
            while let Some(message) = next {
                match message {
                    Ok(m) => self.add(&m, keep_raw, batch, &mut collected).await?,
                    Err(e) => self.consumer_error(&e),
                }
                if collected.count >= max {
                    return Ok(collected);
                }
                next = rest.next().now_or_never().flatten();
            }
        }
        // Then the assigned partitions' own queues, a batch at a time (see `fetch_queues`).
        let taken = self.consumer.fetched().take(max - collected.count);
        for message in taken.iter() {
            match message {
                Ok(m) => self.add(&m, keep_raw, batch, &mut collected).await?,
                Err(e) => self.consumer_error(&e),
            }
        }
        Ok(collected)
    }

    /// Convert and pack one consumed message, noting how far its partition was consumed.
    async fn add(
        &self,
        m: &impl ConsumedMessage,
        keep_raw: bool,
        batch: &mut PutBatch,
        collected: &mut Collected,
    ) -> Result<(), Failure> {
        collected.count += 1;
        // librdkafka's topic name costs a strlen and a UTF-8 check per call.
        let topic = m.topic();
        let packed = convert(
            m,
            topic,
            (&self.key_converter, &self.value_converter),
            self.settings.record_max_bytes,
            (&self.errors, &self.dead_letters.outstanding),
            self.transforms.as_ref(),
            batch,
        )
        .await?;
        if packed && keep_raw {
            collected
                .raw
                .push((m.key().map(<[u8]>::to_vec), m.payload().map(<[u8]>::to_vec)));
        }
        // (No owned key for the lookup: this runs per record.)
        let end = m.offset() + 1;
        match collected
            .consumed
            .iter_mut()
            .find(|((t, p), _)| t == topic && *p == m.partition())
        {
            Some((_, e)) => *e = end,
            None => {
                collected
                    .consumed
                    .insert((topic.to_owned(), m.partition()), end);
            }
        }
        Ok(())
    }

    fn consumer_error(&self, error: &KafkaError) {
        // Rate-limited: while the cluster is away the consumer reports the same error over and
        // over.
        let key = format!(
            "consumer:{}:{}:{}",
            self.connector,
            self.task,
            crate::kafka::error_kind(error)
        );
        if let Some(held) = crate::kafka::repeats().admit(&key) {
            tracing::warn!(connector = %self.connector, task = self.task, "consumer: {error}{}", crate::kafka::held_back(held));
        }
    }

    /// Fail the task if its consumer hit a fatal error (it was fenced by another member with its
    /// `group.instance.id`, say): such a consumer can neither consume nor commit again, so the
    /// task must not go on as if running. The restart policy brings it back with a new one.
    fn check_fatal(&self) -> Result<(), Failure> {
        match self.consumer.client().fatal_error() {
            None => Ok(()),
            Some((code, reason)) => Err(Failure::from(format!(
                "the Kafka consumer hit a fatal error and cannot consume or commit again ({code:?}: {reason}); the task restarts with a new consumer"
            ))),
        }
    }

    /// Run `work` (a wait on the plugin) while serving the consumer queue, so rebalances are
    /// heard and the task is not taken out of its group for not polling.
    async fn serving<T>(&self, work: impl Future<Output = T>) -> T {
        let mut work = std::pin::pin!(work);
        loop {
            tokio::select! {
                biased;
                out = &mut work => return out,
                error = self.consumer.serve() => if let Some(e) = error {
                    self.consumer_error(&e);
                },
                () = tokio::time::sleep(SERVE_EVERY) => {}
            }
        }
    }

    /// Sleep for a retry's backoff while serving the consumer queue; a stop request ends it.
    async fn back_off(&self, wait: Duration, stop: &watch::Receiver<Control>) {
        let mut stop = stop.clone();
        self.serving(async {
            let deadline = tokio::time::Instant::now() + wait;
            while control(&stop) != Control::Stop {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => return,
                    changed = stop.changed() => if changed.is_err() { return },
                }
            }
        })
        .await;
    }

    /// Show in the task's status whether it has partitions to consume.
    fn note_assignment(&self) {
        let assigned = self.consumer.assignment().map_or(0, |a| a.count());
        self.metrics.set_detail((assigned == 0).then(|| {
            format!(
                "no partitions assigned: waiting for consumer group connect-{} to assign some (the group is rebalancing, or has more tasks than partitions)",
                self.connector
            )
        }));
    }

    /// Leave the consumer group now. Sink consumers are static members (a task restarted after
    /// a crash takes its partitions back at once), and static members do not leave when they
    /// close; a task that stops in order leaves, so its partitions move to the rest of the group
    /// without waiting for its session to time out.
    async fn leave_group(&self) {
        // Nothing is flushed from here on: revocations go through at once.
        self.consumer.stop_holding_revocations();
        self.consumer.unsubscribe();
        let deadline = Instant::now() + LEAVE_GRACE;
        // Serving the consumer queue runs the revocation; librdkafka sends the leave after it
        // and clears the member id as it does. Closing then waits for the leave in transit.
        while Instant::now() < deadline && self.consumer.member_id().is_some() {
            let _ = tokio::time::timeout(Duration::from_millis(50), self.consumer.recv()).await;
        }
        if self.consumer.member_id().is_some() {
            tracing::warn!(connector = %self.connector, task = self.task, "did not leave consumer group connect-{} within {LEAVE_GRACE:?}; its partitions move on once its session times out", self.connector);
        }
    }

    /// Wait for the plugin's answer on the batch in flight, retry what it could not write,
    /// count it, and move the offsets past it. Returns the batch, for reuse.
    async fn land(
        &mut self,
        flight: InFlight,
        positions: &mut BTreeMap<(String, i32), i64>,
        stop: &watch::Receiver<Control>,
    ) -> Result<PutBatch, Failure> {
        let (batch, written) = self
            .put(flight.put, flight.started, &flight.raw, stop)
            .await?;
        self.metrics
            .records_done
            .fetch_add(written as u64, Ordering::Relaxed);
        positions.extend(flight.consumed);
        Ok(batch)
    }

    fn set_paused(&self, pause: bool) {
        let outcome = self.consumer.assignment().and_then(|assignment| {
            if pause {
                self.consumer.pause(&assignment)
            } else {
                self.consumer.resume(&assignment)
            }
        });
        if let Err(e) = outcome {
            tracing::warn!(connector = %self.connector, task = self.task, "cannot {} the consumer: {e}", if pause { "pause" } else { "resume" });
        }
    }

    /// Finish the `put` of a batch (`pending`, asked for at `started`), repeating it after a
    /// backoff while the plugin says retriable. Records `put` reports as failed are retried on
    /// their own for up to `errors.retry.timeout`, then go to error handling. Returns the batch
    /// and how many of its records were written.
    async fn put(
        &mut self,
        pending: PendingPut,
        started: Instant,
        raw: &[RawRecord],
        stop: &watch::Receiver<Control>,
    ) -> Result<(PutBatch, usize), Failure> {
        let (batch, mut failures) = self.put_whole(pending, stop).await?;
        let mut retry = 0;
        while !failures.is_empty() {
            let policy = self.errors.policy();
            let in_time = policy
                .retry_timeout
                .is_none_or(|timeout| started.elapsed() < timeout);
            if control(stop) == Control::Stop {
                // Not written and not given up on: nothing of this batch is committed, so the
                // records come again after a restart.
                return Err(Failure::from(format!(
                    "stopping before {} records the plugin could not write yet were written",
                    failures.len()
                )));
            }
            if !in_time {
                break;
            }
            let wait = backoff(retry).min(policy.retry_delay_max);
            retry += 1;
            self.back_off(wait, stop).await;
            if control(stop) == Control::Stop {
                continue;
            }
            self.errors
                .counts()
                .total_retries
                .fetch_add(1, Ordering::Relaxed);
            let indices: Vec<usize> = failures.iter().map(|(i, _)| *i).collect();
            let subset = batch.subset(&indices).map_err(Failure::from)?;
            let (_, again) = self.put_whole(self.instance.put(subset), stop).await?;
            failures = again
                .into_iter()
                .map(|(i, message)| (failures[i].0, message))
                .collect();
        }
        for (index, message) in &failures {
            let record = batch.record(*index).map_err(Failure::from)?;
            let mut error = RecordError::new(
                Stage::TaskPut,
                &self.plugin,
                "RecordFailure",
                format!("the plugin could not write it: {message}"),
            );
            error.restartable = true;
            let failed = self.failed_record(&record, raw.get(*index));
            report(&self.errors, &self.dead_letters.outstanding, error, failed).await?;
        }
        let written = batch.len().saturating_sub(failures.len());
        Ok((batch, written))
    }

    /// Wait for a `put`, and deliver the same batch again while the plugin says retriable;
    /// the batch and its per-record failures as (index, message).
    async fn put_whole(
        &mut self,
        mut pending: PendingPut,
        stop: &watch::Receiver<Control>,
    ) -> Result<(PutBatch, Vec<(usize, String)>), Failure> {
        let mut attempt = 0;
        loop {
            let grace = self.settings.shutdown_grace;
            let Some(taken) = self
                .serving(answer_or_stop(pending.take(), stop, grace))
                .await
            else {
                self.instance.abandon();
                return Err(Failure::from(format!(
                    "put did not return within {} ms of the stop request (task.shutdown.graceful.timeout.ms); the plugin instance was abandoned and the batch will be delivered again",
                    grace.as_millis()
                )));
            };
            let (batch, outcome) = taken.map_err(Failure::from)?;
            match outcome {
                Ok(failures) => {
                    let failures = failures
                        .into_iter()
                        .map(|f| (f.index as usize, f.message))
                        .collect();
                    return Ok((batch, failures));
                }
                Err(e) if e.is_retriable() => {
                    let stopping = || {
                        Err(Failure::from(format!(
                            "{e} (stopping before the batch was written)"
                        )))
                    };
                    if control(stop) == Control::Stop {
                        return stopping();
                    }
                    let wait = backoff(attempt);
                    attempt += 1;
                    tracing::warn!(connector = %self.connector, task = self.task, "{e}; delivering the same {} records again in {wait:?}", batch.len());
                    self.back_off(wait, stop).await;
                    if control(stop) == Control::Stop {
                        return stopping();
                    }
                    pending = self.instance.put(batch);
                }
                Err(e) => return Err(Failure::from(e)),
            }
        }
    }

    /// A consumed record as its dead-letter copy: the bytes as they are in Kafka (`raw`), else
    /// re-encoded by the converters.
    fn failed_record(&self, record: &SinkRecord, raw: Option<&RawRecord>) -> FailedRecord {
        let bytes = |converter: &Converter, data: &Option<crate::sandbox::wit::types::Data>| {
            converter
                .to_kafka(data.as_ref())
                .unwrap_or_else(|_| data.as_ref().map(|d| DataRef::from(d).bytes().to_vec()))
        };
        let (key, value) = match raw {
            Some((key, value)) => (key.clone(), value.clone()),
            None => (
                bytes(&self.key_converter, &record.key),
                bytes(&self.value_converter, &record.value),
            ),
        };
        FailedRecord {
            topic: record.topic.clone(),
            partition: Some(record.partition),
            offset: Some(record.offset),
            key,
            value,
            headers: record
                .headers
                .iter()
                .map(|h| (h.key.clone(), h.value.clone()))
                .collect(),
            timestamp: record.timestamp,
            source_position: None,
        }
    }

    /// Wait until every dead-letter write so far is acknowledged. `Ok(false)`: some are still
    /// pending (the cluster may be away), so nothing may be committed yet. A failed one fails
    /// the task, now and at every later attempt to commit.
    async fn settle_dead_letters(&mut self) -> Result<bool, Failure> {
        if let Some(failure) = &self.dead_letters.failed {
            return Err(failure.clone());
        }
        let deadline = tokio::time::Instant::now() + DEAD_LETTER_GRACE;
        while self.dead_letters.outstanding.count.load(Ordering::Relaxed) > 0 {
            tokio::select! {
                report = self.dead_letters.rx.recv() => match report {
                    // Dead-letter writes are sent one by one, so their reports come one by one.
                    Some(Report::Delivered(delivered)) => {
                        let n = delivered.records().count();
                        self.dead_letters.outstanding.count.fetch_sub(n, Ordering::Relaxed);
                    }
                    Some(Report::One(ack)) => {
                        self.dead_letters.outstanding.count.fetch_sub(1, Ordering::Relaxed);
                        if let Some(error) = ack.error {
                            let failure = self.errors.dlq_failed(&error.message);
                            self.dead_letters.failed = Some(failure.clone());
                            return Err(failure);
                        }
                    }
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => {
                    tracing::warn!(connector = %self.connector, task = self.task, pending = self.dead_letters.outstanding.count.load(Ordering::Relaxed), "dead-letter writes not acknowledged yet; committing nothing this time");
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    async fn on_rebalance(
        &mut self,
        event: RebalanceEvent,
        positions: &mut BTreeMap<(String, i32), i64>,
    ) -> Result<(), Failure> {
        let as_wit = |parts: &[(String, i32)]| -> Vec<TopicPartition> {
            parts
                .iter()
                .map(|(topic, partition)| TopicPartition {
                    topic: topic.clone(),
                    partition: *partition,
                })
                .collect()
        };
        let outcome = self.rebalanced(event, positions, as_wit).await;
        self.note_assignment();
        outcome
    }

    /// Tell the plugin about a rebalance: `open` what was assigned; flush, commit and `close`
    /// what was revoked.
    async fn rebalanced(
        &mut self,
        event: RebalanceEvent,
        positions: &mut BTreeMap<(String, i32), i64>,
        as_wit: impl Fn(&[(String, i32)]) -> Vec<TopicPartition>,
    ) -> Result<(), Failure> {
        match event {
            RebalanceEvent::Assigned(parts) => {
                for (topic, _) in &parts {
                    // A sink reads only what it subscribed to: no quota applies.
                    let _ = note_topic(&self.topics_used, topic, usize::MAX);
                }
                tracing::info!(connector = %self.connector, task = self.task, ?parts, "partitions assigned");
                self.instance
                    .open(as_wit(&parts))
                    .await
                    .map_err(Failure::from)
            }
            RebalanceEvent::Revoked(parts) => {
                tracing::info!(connector = %self.connector, task = self.task, ?parts, "partitions revoked");
                self.consumer.drop_carried(&parts);
                // Flush and commit what was handed over for these partitions, so their new owner
                // starts after it; if that commit misses the revocation, the new owner gets those
                // records again (at-least-once).
                let mut revoked: BTreeMap<(String, i32), i64> = BTreeMap::new();
                for p in &parts {
                    if let Some(offset) = positions.remove(p) {
                        revoked.insert(p.clone(), offset);
                    }
                }
                let committed = self
                    .flush_and_commit(&mut revoked, CommitMode::Sync, false)
                    .await;
                let closed = self.instance.close(as_wit(&parts)).await;
                // Still assigned until now: the group moves them on after this commit.
                self.consumer.release_revoked();
                committed?;
                match closed {
                    Err(e) if !e.is_retriable() => Err(Failure::from(e)),
                    _ => Ok(()),
                }
            }
            RebalanceEvent::Lost(parts) => {
                self.consumer.drop_carried(&parts);
                tracing::warn!(connector = %self.connector, task = self.task, ?parts, "partitions lost (the group moved on without this task); what was not committed for them is consumed again by their new owner");
                for p in &parts {
                    positions.remove(p);
                }
                match self.instance.close(as_wit(&parts)).await {
                    Err(e) if !e.is_retriable() => Err(Failure::from(e)),
                    _ => Ok(()),
                }
            }
        }
    }

    /// Ask the plugin which offsets are safe and commit those. `stopping`: the task is
    /// stopping, so the plugin has `task.shutdown.graceful.timeout.ms` to answer, not its
    /// flush deadline.
    async fn flush_and_commit(
        &mut self,
        positions: &mut BTreeMap<(String, i32), i64>,
        mode: CommitMode,
        stopping: bool,
    ) -> Result<(), Failure> {
        if positions.is_empty() {
            return Ok(());
        }
        // Offsets may move past skipped records only once their dead-letter copies are safe.
        if !self.settle_dead_letters().await? {
            return Ok(());
        }
        let offsets: Vec<TopicPartitionOffset> = positions
            .iter()
            .map(|((topic, partition), offset)| TopicPartitionOffset {
                topic: topic.clone(),
                partition: *partition,
                offset: *offset,
            })
            .collect();
        if self.instance.is_abandoned() {
            // Nothing the plugin has not vouched for may be committed.
            return Ok(());
        }
        let flushed = if stopping {
            let grace = self.settings.shutdown_grace;
            match tokio::time::timeout(grace, self.instance.flush(offsets)).await {
                Ok(flushed) => flushed,
                Err(_) => {
                    self.instance.abandon();
                    tracing::warn!(connector = %self.connector, task = self.task, "flush did not return within {} ms of the stop request (task.shutdown.graceful.timeout.ms); the plugin instance was abandoned and nothing was committed", grace.as_millis());
                    return Ok(());
                }
            }
        } else {
            self.instance.flush(offsets).await
        };
        let safe = match flushed {
            Ok(safe) => safe,
            // Told to stop while the plugin's `flush` hung: given up after the grace.
            Err(e) if self.instance.is_abandoned() => {
                tracing::warn!(connector = %self.connector, task = self.task, "{e}; nothing was committed");
                return Ok(());
            }
            Err(e) if e.is_retriable() => {
                tracing::warn!(connector = %self.connector, task = self.task, "{e}; committing nothing this time");
                return Ok(());
            }
            Err(e) => return Err(Failure::from(e)),
        };
        let mut tpl = TopicPartitionList::new();
        for o in &safe {
            // A plugin can only vouch for what it was given.
            match positions.get(&(o.topic.clone(), o.partition)) {
                Some(max) if o.offset <= *max && o.offset >= 0 => {
                    let _ =
                        tpl.add_partition_offset(&o.topic, o.partition, Offset::Offset(o.offset));
                }
                _ => {
                    tracing::warn!(connector = %self.connector, task = self.task, offset = ?o, "flush returned an offset the task was never given; ignored")
                }
            }
        }
        if tpl.count() == 0 {
            return Ok(());
        }
        let committed = match mode {
            CommitMode::Sync => crate::kafka::blocking(|| self.consumer.commit(&tpl, mode)),
            CommitMode::Async => self.consumer.commit(&tpl, mode),
        };
        if let Err(e) = committed {
            tracing::warn!(connector = %self.connector, task = self.task, "offset commit failed (the records will be delivered again): {e}");
        }
        Ok(())
    }
}

/// Convert a consumed message and pack it into `batch`; `false` when it failed and error
/// handling skipped it.
async fn convert(
    m: &impl ConsumedMessage,
    topic: &str,
    (key_converter, value_converter): (&Converter, &Converter),
    record_max_bytes: usize,
    (errors, dead_letters): (&ErrorReporter, &Outstanding),
    transforms: Option<&std::sync::Mutex<Chain>>,
    batch: &mut PutBatch,
) -> Result<bool, Failure> {
    let headers = m.headers_fast();
    let header_bytes: usize = headers.map_or(0, |hs| {
        hs.iter()
            .map(|h| h.key.len() + h.value.map_or(0, <[u8]>::len))
            .sum()
    });
    let size = m.key().map_or(0, <[u8]>::len) + m.payload().map_or(0, <[u8]>::len) + header_bytes;
    let outcome = if size > record_max_bytes {
        Err(RecordError::new(
            Stage::KafkaConsume,
            "consumer",
            "RecordTooLarge",
            format!(
                "the record is {size} bytes, over the limit of {} bytes (sandbox.record.max.bytes)",
                record_max_bytes
            ),
        ))
    } else {
        key_converter
            .from_kafka_ref(m.key())
            .map_err(|e| {
                RecordError::new(
                    Stage::KeyConverter,
                    key_converter.name(),
                    "ConversionError",
                    format!("the key converter failed: {e}"),
                )
            })
            .and_then(|key| {
                value_converter
                    .from_kafka_ref(m.payload())
                    .map(|value| (key, value))
                    .map_err(|e| {
                        RecordError::new(
                            Stage::ValueConverter,
                            value_converter.name(),
                            "ConversionError",
                            format!("the value converter failed: {e}"),
                        )
                    })
            })
    };
    let header_pairs = || {
        headers
            .into_iter()
            .flat_map(|hs| hs.iter())
            .map(|h| (h.key, h.value))
    };
    let outcome = outcome.and_then(|(key, value)| {
        let Some(transforms) = transforms else {
            let fields = Fields {
                topic,
                partition: m.partition(),
                offset: m.offset(),
                timestamp: m.timestamp().to_millis(),
                key: key.as_data_ref(),
                value: value.as_data_ref(),
                key_schema: key.schema(),
                value_schema: value.schema(),
            };
            return Ok(Some(batch.push(fields, header_pairs())));
        };
        let record = Record {
            topic: Cow::Borrowed(topic),
            partition: Some(m.partition()),
            offset: Some(m.offset()),
            timestamp: m.timestamp().to_millis(),
            key: Side::raw(key.as_data_ref(), key.schema()),
            value: Side::raw(value.as_data_ref(), value.schema()),
            headers: header_pairs()
                .map(|(k, v)| (Cow::Borrowed(k), v.map(Cow::Borrowed)))
                .collect(),
        };
        // Poisoned only by a panic in a transform, which ended the task's run already.
        let mut chain = transforms.lock().unwrap_or_else(|p| p.into_inner());
        match transforms::apply(&mut chain, record) {
            Outcome::Keep(r) => {
                let (key, key_schema) = r.key.data_ref();
                let (value, value_schema) = r.value.data_ref();
                let fields = Fields {
                    topic: &r.topic,
                    partition: r.partition.unwrap_or(m.partition()),
                    offset: m.offset(),
                    timestamp: r.timestamp,
                    key,
                    value,
                    key_schema,
                    value_schema,
                };
                let headers = r.headers.iter().map(|(k, v)| (&**k, v.as_deref()));
                Ok(Some(batch.push(fields, headers)))
            }
            // Filtered: not put, its offset committed with the batch's.
            Outcome::Dropped => Ok(None),
            Outcome::Failed(error) => Err(error),
        }
    });
    match outcome {
        Ok(Some(pushed)) => {
            pushed.map_err(Failure::from)?;
            Ok(true)
        }
        Ok(None) => Ok(false),
        Err(error) => {
            let failed = FailedRecord {
                topic: topic.to_owned(),
                partition: Some(m.partition()),
                offset: Some(m.offset()),
                key: m.key().map(<[u8]>::to_vec),
                value: m.payload().map(<[u8]>::to_vec),
                headers: header_pairs()
                    .map(|(k, v)| (k.to_owned(), v.map(<[u8]>::to_vec)))
                    .collect(),
                timestamp: m.timestamp().to_millis(),
                source_position: None,
            };
            report(errors, dead_letters, error, failed).await?;
            Ok(false)
        }
    }
}

/// Hand a failed record to error handling.
async fn report(
    errors: &ErrorReporter,
    dead_letters: &Outstanding,
    error: RecordError,
    failed: FailedRecord,
) -> Result<(), Failure> {
    let outcome = errors.report(error, failed, dead_letters.target()).await;
    if outcome.is_err() {
        // Nothing was queued, so no acknowledgement will come.
        dead_letters.count.fetch_sub(1, Ordering::Relaxed);
    }
    outcome.map(drop)
}
