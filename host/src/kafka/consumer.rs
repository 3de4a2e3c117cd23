//! Consumers for sink tasks: group `connect-<connector>`, offsets committed only by the task
//! runner (after the plugin's `flush`), cooperative rebalancing, and rebalance events passed to
//! the runner so it can call the plugin's `open` / `close`.
//!
//! Revocations are part of the rebalance, as in Kafka Connect (whose consumer commits inside
//! `onPartitionsRevoked`): the rebalance callback does not give revoked partitions up. It
//! reports them, and the group waits (librdkafka's "wait for the unassign call") until the
//! runner has flushed and committed them and calls [`SinkConsumer::release_revoked`]. So their
//! next owner starts after what this task wrote, not from an older commit. Lost partitions
//! (the session expired) are given up at once: nothing can be committed for them. Under the
//! eager protocol (if an operator sets another `partition.assignment.strategy`) revocations are
//! given up at once and committed right after, as before.
//!
//! While the runner waits on the plugin (a `put`, or the backoff before a retriable `put` is
//! delivered again) it keeps serving the consumer queue ([`SinkConsumer::serve`]): librdkafka
//! runs rebalance callbacks only there, and counts the time since the application last polled
//! against `max.poll.interval.ms`, past which it takes the task out of the group. Serving hands
//! no message out of turn: one that comes out of the consumer queue meanwhile (a partition
//! whose queue could not be split) is kept and handed out first ([`SinkConsumer::take_carried`]).

use std::collections::VecDeque;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{
    BaseConsumer, Consumer, ConsumerContext, Rebalance, RebalanceProtocol, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;

use super::OwnClient;
use super::fetch_queues::{self, FetchQueues};

/// A partition assignment change, in `(topic, partition)` terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebalanceEvent {
    Assigned(Vec<(String, i32)>),
    /// Under the cooperative protocol, still assigned until the runner calls
    /// [`SinkConsumer::release_revoked`].
    Revoked(Vec<(String, i32)>),
    /// Already given up: the group moved on without this consumer.
    Lost(Vec<(String, i32)>),
}

/// Forwards rebalance events to the task runner, and splits each partition's fetch queue off
/// before it is assigned (see `fetch_queues`).
pub struct SinkContext {
    events: mpsc::UnboundedSender<RebalanceEvent>,
    fetch: Arc<fetch_queues::Shared>,
    /// Whether revocations wait for the runner (false once it stops: leaving the group must
    /// not wait on a runner that is no longer there).
    hold_revoked: AtomicBool,
    /// Revoked partitions the runner has not released yet.
    held: Mutex<Vec<(String, i32)>>,
    /// Set for a connector's own consumer (KIP-458): where its failures go.
    own: Option<Arc<OwnClient>>,
}

impl ClientContext for SinkContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        super::route_log(self.keeper(), level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        super::route_error(self.keeper(), error, reason);
    }
}

impl SinkContext {
    /// Where this consumer's failures go: its task's status for a connector's own consumer,
    /// the log for the worker's (see [`super::Keeper::Log`]).
    fn keeper(&self) -> super::Keeper<'_> {
        self.own
            .as_deref()
            .map_or(super::Keeper::Log, super::Keeper::Own)
    }
}

fn partitions(tpl: &rdkafka::TopicPartitionList) -> Vec<(String, i32)> {
    tpl.elements()
        .iter()
        .map(|e| (e.topic().to_owned(), e.partition()))
        .collect()
}

impl ConsumerContext for SinkContext {
    /// rdkafka's rebalance (pre, (un)assign, post), except that a cooperative revocation is
    /// held for the runner, which releases it once the partitions are committed.
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let (outcome, rebalance) = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                self.pre_rebalance(consumer, &Rebalance::Assign(tpl));
                let outcome = match consumer.rebalance_protocol() {
                    RebalanceProtocol::Cooperative => consumer.incremental_assign(tpl),
                    _ => consumer.assign(tpl),
                };
                (outcome, Rebalance::Assign(tpl))
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                let revoked = partitions(tpl);
                self.fetch.revoke(&revoked);
                let cooperative = matches!(
                    consumer.rebalance_protocol(),
                    RebalanceProtocol::Cooperative
                );
                let lost = consumer.assignment_lost();
                if cooperative && !lost && self.hold_revoked.load(Ordering::Acquire) {
                    self.held
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend(revoked.iter().cloned());
                    let _ = self.events.send(RebalanceEvent::Revoked(revoked));
                    return;
                }
                // Given up at once: lost, or the eager protocol (an operator's
                // `partition.assignment.strategy`), whose revocation the runner still commits
                // right after, or the runner is stopping (it hears no more events).
                let _ = self.events.send(if lost {
                    RebalanceEvent::Lost(revoked)
                } else {
                    RebalanceEvent::Revoked(revoked)
                });
                let outcome = if cooperative {
                    consumer.incremental_unassign(tpl)
                } else {
                    consumer.unassign()
                };
                (outcome, Rebalance::Revoke(tpl))
            }
            other => {
                tracing::error!("consumer group rebalance failed: {other:?}");
                (
                    consumer.unassign(),
                    Rebalance::Error(KafkaError::Rebalance(other.into())),
                )
            }
        };
        if let Err(e) = outcome {
            tracing::warn!("cannot apply the group's new assignment: {e}");
        }
        self.post_rebalance(consumer, &rebalance);
    }

    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => self.fetch.split(consumer, &partitions(tpl)),
            // `rebalance` handles revocations itself.
            Rebalance::Revoke(_) | Rebalance::Error(_) => {}
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            // The group coordinator took this member in: the client reaches the cluster.
            super::succeeded(self.own.as_deref());
            let _ = self.events.send(RebalanceEvent::Assigned(partitions(tpl)));
        }
    }
}

/// How many messages, and how many bytes of keys and values, [`SinkConsumer::serve`] keeps at
/// most: detached messages no longer count against librdkafka's own prefetch limits.
const CARRIED_MAX: usize = 10_000;
const CARRIED_MAX_BYTES: usize = 64 << 20;

/// The messages [`SinkConsumer::serve`] kept, with the bytes of their keys and values.
/// Invariant: `bytes` is that sum over `messages` (kept by every change, so checking the cap
/// costs nothing per served message).
#[derive(Default)]
struct Carried {
    messages: VecDeque<OwnedMessage>,
    bytes: usize,
}

impl Carried {
    fn size(m: &OwnedMessage) -> usize {
        m.key().map_or(0, <[u8]>::len) + m.payload().map_or(0, <[u8]>::len)
    }

    fn push(&mut self, m: OwnedMessage) {
        self.bytes += Self::size(&m);
        self.messages.push_back(m);
    }

    /// Up to `max` messages, oldest first.
    fn take(&mut self, max: usize) -> Vec<OwnedMessage> {
        let n = self.messages.len().min(max);
        let taken: Vec<OwnedMessage> = self.messages.drain(..n).collect();
        self.bytes -= taken.iter().map(Self::size).sum::<usize>();
        taken
    }

    /// Keeps the messages `keep` accepts.
    fn retain(&mut self, mut keep: impl FnMut(&OwnedMessage) -> bool) {
        self.messages.retain(|m| keep(m));
        self.bytes = self.messages.iter().map(Self::size).sum();
    }
}

/// A sink task's consumer: rdkafka's, for the consumer queue (rebalances, errors, commits, and
/// messages of any partition not split), and the split partition queues that hold its messages.
pub struct SinkConsumer {
    // Dropped first: every queue handle must go before the consumer does.
    fetch: FetchQueues,
    consumer: StreamConsumer<SinkContext>,
    /// Messages that came out of the consumer queue while it was only being served, in the
    /// order they came; handed out before anything else.
    carried: Mutex<Carried>,
}

impl SinkConsumer {
    /// The member id the group coordinator gave this consumer; `None` while it has none
    /// (before it joined, and from the moment it sends its leave).
    pub fn member_id(&self) -> Option<String> {
        let rk = self.consumer.client().native_ptr();
        // SAFETY: `rk` is the live client this consumer owns; librdkafka returns a copy (or
        // NULL) that the caller frees with `rd_kafka_mem_free`, done here and nowhere else.
        unsafe {
            let id = rdkafka::bindings::rd_kafka_memberid(rk);
            if id.is_null() {
                return None;
            }
            let text = std::ffi::CStr::from_ptr(id).to_string_lossy().into_owned();
            rdkafka::bindings::rd_kafka_mem_free(rk, id.cast());
            (!text.is_empty()).then_some(text)
        }
    }

    /// The assigned partitions' queues.
    pub fn fetched(&self) -> &FetchQueues {
        &self.fetch
    }

    /// Give up the revoked partitions the group is waiting for (their offsets are committed,
    /// or they never will be), so the rebalance can complete.
    pub fn release_revoked(&self) {
        let context = self.consumer.context();
        let held = std::mem::take(&mut *context.held.lock().unwrap_or_else(|e| e.into_inner()));
        if held.is_empty() {
            return;
        }
        let mut tpl = TopicPartitionList::new();
        for (topic, partition) in &held {
            let _ = tpl.add_partition_offset(topic, *partition, Offset::Invalid);
        }
        if let Err(e) = self.consumer.incremental_unassign(&tpl) {
            tracing::warn!("cannot give up the revoked partitions {held:?}: {e}");
        }
    }

    /// Wait for the consumer queue's next event, serving it: rebalance callbacks run, the wait
    /// counts as the application polling (`max.poll.interval.ms`), and a message is kept for
    /// [`SinkConsumer::take_carried`] instead of being handed out. Returns the consumer's
    /// error, if that is what came. Cancel-safe: dropping the future loses nothing.
    pub async fn serve(&self) -> Option<KafkaError> {
        // Kept messages cost memory, and a partition whose queue was not split keeps feeding
        // the consumer queue: past this many, wait as before (the caller's work decides).
        if self.carried_full() {
            return std::future::pending().await;
        }
        match self.consumer.recv().await {
            Ok(message) => {
                self.lock_carried().push(message.detach());
                None
            }
            Err(e) => Some(e),
        }
    }

    /// Up to `max` of the messages [`SinkConsumer::serve`] kept, oldest first.
    pub fn take_carried(&self, max: usize) -> Vec<OwnedMessage> {
        self.lock_carried().take(max)
    }

    /// Forget the kept messages of `partitions` (revoked or lost: their next owner consumes them
    /// from the last commit, and none of them was handed to the plugin).
    pub fn drop_carried(&self, partitions: &[(String, i32)]) {
        self.lock_carried().retain(|m| {
            !partitions
                .iter()
                .any(|(t, p)| t == m.topic() && *p == m.partition())
        });
    }

    /// Whether the kept messages reached [`CARRIED_MAX`] or [`CARRIED_MAX_BYTES`].
    fn carried_full(&self) -> bool {
        let carried = self.lock_carried();
        carried.messages.len() >= CARRIED_MAX || carried.bytes >= CARRIED_MAX_BYTES
    }

    fn lock_carried(&self) -> std::sync::MutexGuard<'_, Carried> {
        // A panic while holding the lock leaves the queue itself consistent (its byte count at
        // worst off, which moves only the cap).
        self.carried.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// From now on revocations are not held for the runner (it is stopping), and any held one
    /// is released.
    pub fn stop_holding_revocations(&self) {
        self.consumer
            .context()
            .hold_revoked
            .store(false, Ordering::Release);
        self.release_revoked();
    }
}

impl Drop for SinkConsumer {
    /// Closing the consumer revokes what it holds: that must not wait for a runner that is gone.
    fn drop(&mut self) {
        self.stop_holding_revocations();
    }
}

impl Deref for SinkConsumer {
    type Target = StreamConsumer<SinkContext>;

    fn deref(&self) -> &Self::Target {
        &self.consumer
    }
}

/// What a sink connector consumes: `topics` or `topics.regex`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subscription {
    Topics(Vec<String>),
    Regex(String),
}

impl Subscription {
    /// Whether `topic` is consumed: listed, or matched by the whole pattern.
    pub fn includes(&self, topic: &str) -> bool {
        match self {
            Subscription::Topics(topics) => topics.iter().any(|t| t == topic),
            Subscription::Regex(pattern) => {
                regex::Regex::new(&format!("^(?:{pattern})$")).is_ok_and(|re| re.is_match(topic))
            }
        }
    }

    /// From a connector config; exactly one of `topics` and `topics.regex` must be set.
    pub fn from_config(config: &[(String, String)]) -> Result<Self, String> {
        let get = |k: &str| {
            config
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.trim())
                .filter(|v| !v.is_empty())
        };
        match (get("topics"), get("topics.regex")) {
            (Some(_), Some(_)) => Err("topics and topics.regex: set only one of them".to_owned()),
            (Some(list), None) => Ok(Subscription::Topics(
                list.split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned)
                    .collect(),
            )),
            (None, Some(regex)) => Ok(Subscription::Regex(regex.to_owned())),
            (None, None) => {
                Err("topics: a sink connector needs topics (a list) or topics.regex".to_owned())
            }
        }
    }
}

/// The sink consumers' settings besides group and offset handling; `consumer.*` in the worker
/// config overrides them. Public so the benchmarks' native baseline consumes the same way.
///
/// librdkafka stops prefetching a partition once `queued.min.messages` are buffered, and
/// then waits `fetch.queue.backoff.ms` (1 s by default) before it looks again. A task that
/// drains the buffer faster than that sat idle most of each second (see
/// docs/benchmark-journal.md).
pub const SETTINGS: &[(&str, &str)] = &[("fetch.queue.backoff.ms", "10")];

/// Create and subscribe a consumer for one task of connector `connector`, a static member of
/// its group as `instance_id` (KIP-345): the same task restarted after a crash rejoins as the
/// same member and gets its partitions back at once, instead of waiting for the dead member's
/// session to time out. `instance_id` must be unique among the group's live consumers and
/// stable across restarts of the task; the runner leaves the group explicitly when it stops in
/// order (`SinkRunner::leave_group`), since static members do not leave on close. `own` is set
/// when the consumer is the connector's own (KIP-458 overrides in `overrides`).
pub fn create(
    bootstrap: &str,
    client_id: &str,
    connector: &str,
    instance_id: &str,
    subscription: &Subscription,
    overrides: &[(String, String)],
    own: Option<Arc<OwnClient>>,
) -> Result<(SinkConsumer, mpsc::UnboundedReceiver<RebalanceEvent>), String> {
    let mut config = super::base_config(bootstrap, client_id);
    config
        .set("group.id", format!("connect-{connector}"))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("partition.assignment.strategy", "cooperative-sticky")
        .set("enable.partition.eof", "false");
    for (key, value) in SETTINGS {
        config.set(*key, *value);
    }
    super::apply(&mut config, overrides);
    // Set by the worker per task; a worker-wide value would fence every task but one.
    config.set("group.instance.id", instance_id);
    let (tx, rx) = mpsc::unbounded_channel();
    let fetch = Arc::new(fetch_queues::Shared::default());
    let consumer: StreamConsumer<SinkContext> = super::clients::create(
        &config,
        SinkContext {
            events: tx,
            fetch: Arc::clone(&fetch),
            hold_revoked: AtomicBool::new(true),
            held: Mutex::new(Vec::new()),
            own,
        },
        "consumer",
    )?;
    let result = match subscription {
        Subscription::Topics(topics) => {
            let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
            consumer.subscribe(&refs)
        }
        Subscription::Regex(regex) => {
            let pattern = if regex.starts_with('^') {
                regex.clone()
            } else {
                format!("^{regex}")
            };
            consumer.subscribe(&[pattern.as_str()])
        }
    };
    result.map_err(|e| format!("cannot subscribe to {subscription:?}: {e}"))?;
    let consumer = SinkConsumer {
        fetch: FetchQueues::new(fetch),
        consumer,
        carried: Mutex::default(),
    };
    Ok((consumer, rx))
}

#[cfg(test)]
mod tests {
    use super::{Carried, Subscription};
    use rdkafka::Timestamp;
    use rdkafka::message::OwnedMessage;

    fn message(partition: i32, value: &[u8]) -> OwnedMessage {
        OwnedMessage::new(
            Some(value.to_vec()),
            Some(b"k".to_vec()),
            "t".to_owned(),
            Timestamp::NotAvailable,
            partition,
            0,
            None,
        )
    }

    #[test]
    fn carried_messages_keep_their_byte_count() {
        let mut carried = Carried::default();
        carried.push(message(0, b"abc"));
        carried.push(message(1, b"defgh"));
        carried.push(message(0, b"ij"));
        assert_eq!(carried.bytes, 4 + 6 + 3);
        let taken = carried.take(1);
        assert_eq!(taken.len(), 1);
        assert_eq!(carried.bytes, 6 + 3);
        carried.retain(|m| rdkafka::Message::partition(m) != 1);
        assert_eq!(carried.messages.len(), 1);
        assert_eq!(carried.bytes, 3);
        assert_eq!(carried.take(10).len(), 1);
        assert_eq!(carried.bytes, 0);
    }

    fn cfg(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn subscription_needs_exactly_one_of_topics_and_regex() {
        assert_eq!(
            Subscription::from_config(&cfg(&[("topics", "a, b")])),
            Ok(Subscription::Topics(vec!["a".into(), "b".into()]))
        );
        assert_eq!(
            Subscription::from_config(&cfg(&[("topics.regex", "logs-.*")])),
            Ok(Subscription::Regex("logs-.*".into()))
        );
        assert!(
            Subscription::from_config(&cfg(&[]))
                .unwrap_err()
                .starts_with("topics:")
        );
        assert!(
            Subscription::from_config(&cfg(&[("topics", "a"), ("topics.regex", "b")])).is_err()
        );
    }

    #[test]
    fn includes_matches_listed_topics_and_whole_patterns() {
        assert!(Subscription::Topics(vec!["a".into()]).includes("a"));
        assert!(!Subscription::Topics(vec!["a".into()]).includes("ab"));
        let regex = Subscription::Regex("logs-.*".into());
        assert!(regex.includes("logs-dlq") && !regex.includes("my-logs-dlq"));
        assert!(Subscription::Regex("^logs-.*".into()).includes("logs-1"));
    }
}
