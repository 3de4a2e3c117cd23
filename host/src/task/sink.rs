//! The sink task loop. Consumed messages are converted and handed to the plugin's `put` in
//! batches; a retriable error delivers the same batch again after a backoff. Every
//! `offset.flush.interval.ms` (and on stop) the plugin's `flush` says which offsets are safe,
//! and exactly those are committed to the consumer group.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use futures::FutureExt;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::{mpsc, watch};

use super::{
    ActiveTopics, Control, Failure, RunnerSettings, TaskMetrics, TaskState, backoff, control,
    note_topic,
};
use crate::convert::Converter;
use crate::kafka::consumer::{RebalanceEvent, SinkConsumer};
use crate::sandbox::SinkTaskInstance;
use crate::sandbox::bindings::types::{Header, SinkRecord, TopicPartition, TopicPartitionOffset};

/// Everything one sink task runs with.
pub struct SinkRunner {
    pub connector: String,
    pub task: u32,
    pub instance: SinkTaskInstance,
    pub consumer: SinkConsumer,
    pub events: mpsc::UnboundedReceiver<RebalanceEvent>,
    pub key_converter: Converter,
    pub value_converter: Converter,
    pub settings: RunnerSettings,
    pub metrics: Arc<TaskMetrics>,
    pub topics_used: ActiveTopics,
}

impl SinkRunner {
    /// Run until told to stop or the task fails; `Err` carries the failure trace.
    pub async fn run(mut self, mut stop: watch::Receiver<Control>) -> Result<(), Failure> {
        // Next offset to commit per partition: one past the last record handed to `put`.
        let mut positions: BTreeMap<(String, i32), i64> = BTreeMap::new();
        let outcome = self.consume_loop(&mut positions, &mut stop).await;
        // Even after a failure, what earlier batches handed over can still be made durable and
        // committed (positions only cover records the plugin accepted).
        let flushed = self
            .flush_and_commit(&mut positions, CommitMode::Sync)
            .await;
        if let (Err(_), Err(flush_error)) = (&outcome, &flushed) {
            tracing::warn!(connector = %self.connector, task = self.task, "final flush after failure: {flush_error}");
        }
        if let Err(e) = self.instance.stop().await {
            tracing::warn!(connector = %self.connector, task = self.task, "stop: {e}");
        }
        outcome.and(flushed)
    }

    async fn consume_loop(
        &mut self,
        positions: &mut BTreeMap<(String, i32), i64>,
        stop: &mut watch::Receiver<Control>,
    ) -> Result<(), Failure> {
        let mut last_flush = Instant::now();
        let mut paused = false;
        let mut rebalanced = false;
        loop {
            while let Ok(event) = self.events.try_recv() {
                self.on_rebalance(event, positions).await?;
                rebalanced = true;
            }
            if last_flush.elapsed() >= self.settings.flush_interval {
                self.flush_and_commit(positions, CommitMode::Async).await?;
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
            let wait = self
                .settings
                .flush_interval
                .saturating_sub(last_flush.elapsed());
            let first = tokio::select! {
                message = self.consumer.recv() => message,
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
            let mut batch = Vec::new();
            let mut next = Some(first);
            while let Some(message) = next {
                match message {
                    Ok(m) => batch.push(self.convert(&m)?),
                    Err(e) => {
                        tracing::warn!(connector = %self.connector, task = self.task, "consumer: {e}")
                    }
                }
                if batch.len() >= self.settings.sink_batch_max_records {
                    break;
                }
                next = self.consumer.recv().now_or_never();
            }
            if batch.is_empty() {
                continue;
            }
            self.metrics
                .records_in
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            self.put(&batch, stop).await?;
            for record in &batch {
                positions.insert((record.topic.clone(), record.partition), record.offset + 1);
            }
            self.metrics
                .records_done
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
        }
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

    /// Hand `batch` to the plugin, repeating it after a backoff while the plugin says retriable.
    async fn put(
        &mut self,
        batch: &[SinkRecord],
        stop: &watch::Receiver<Control>,
    ) -> Result<(), Failure> {
        let mut attempt = 0;
        loop {
            match self.instance.put(batch).await {
                Ok(failures) if failures.is_empty() => return Ok(()),
                Ok(failures) => {
                    let first = &failures[0];
                    let record = &batch[first.index as usize];
                    return Err(Failure::from(format!(
                        "the plugin could not write {} record(s); first: {}-{} offset {}: {}",
                        failures.len(),
                        record.topic,
                        record.partition,
                        record.offset,
                        first.message
                    )));
                }
                Err(e) if e.is_retriable() => {
                    if control(stop) == Control::Stop {
                        return Err(Failure::from(format!(
                            "{e} (stopping before the batch was written)"
                        )));
                    }
                    let wait = backoff(attempt);
                    attempt += 1;
                    tracing::warn!(connector = %self.connector, task = self.task, "{e}; delivering the same {} records again in {wait:?}", batch.len());
                    tokio::time::sleep(wait).await;
                }
                Err(e) => return Err(Failure::from(e)),
            }
        }
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
        match event {
            RebalanceEvent::Assigned(parts) => {
                for (topic, _) in &parts {
                    note_topic(&self.topics_used, topic);
                }
                tracing::info!(connector = %self.connector, task = self.task, ?parts, "partitions assigned");
                self.instance
                    .open(&as_wit(&parts))
                    .await
                    .map_err(Failure::from)
            }
            RebalanceEvent::Revoked(parts) => {
                tracing::info!(connector = %self.connector, task = self.task, ?parts, "partitions revoked");
                // Flush and commit what was handed over for these partitions, so their new owner
                // starts after it; if that commit misses the revocation, the new owner gets those
                // records again (at-least-once).
                let mut revoked: BTreeMap<(String, i32), i64> = BTreeMap::new();
                for p in &parts {
                    if let Some(offset) = positions.remove(p) {
                        revoked.insert(p.clone(), offset);
                    }
                }
                self.flush_and_commit(&mut revoked, CommitMode::Sync)
                    .await?;
                match self.instance.close(&as_wit(&parts)).await {
                    Err(e) if !e.is_retriable() => Err(Failure::from(e)),
                    _ => Ok(()),
                }
            }
        }
    }

    async fn flush_and_commit(
        &mut self,
        positions: &mut BTreeMap<(String, i32), i64>,
        mode: CommitMode,
    ) -> Result<(), Failure> {
        if positions.is_empty() {
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
        let safe = match self.instance.flush(&offsets).await {
            Ok(safe) => safe,
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
        if let Err(e) = self.consumer.commit(&tpl, mode) {
            tracing::warn!(connector = %self.connector, task = self.task, "offset commit failed (the records will be delivered again): {e}");
        }
        Ok(())
    }

    fn convert(&self, m: &BorrowedMessage<'_>) -> Result<SinkRecord, Failure> {
        let at = || format!("{}-{} offset {}", m.topic(), m.partition(), m.offset());
        let key = self.key_converter.from_kafka(m.key()).map_err(|e| {
            Failure::fatal(format!("record {}: the key converter failed: {e}", at()))
        })?;
        let value = self.value_converter.from_kafka(m.payload()).map_err(|e| {
            Failure::fatal(format!("record {}: the value converter failed: {e}", at()))
        })?;
        let headers = m
            .headers()
            .map(|hs| {
                hs.iter()
                    .map(|h| Header {
                        key: h.key.to_owned(),
                        value: h.value.map(<[u8]>::to_vec),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(SinkRecord {
            topic: m.topic().to_owned(),
            partition: m.partition(),
            offset: m.offset(),
            key,
            value,
            headers,
            timestamp: m.timestamp().to_millis(),
        })
    }
}
