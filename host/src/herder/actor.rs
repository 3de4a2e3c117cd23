//! One actor per connector: a tokio task holding the connector's state machine: its config and
//! target state as stored, its running connector (from the worker), the split its tasks run
//! from, whether it failed or waits to retry, and its retries. Commands for the connector
//! arrive in order on its queue, so the slow work they need (preparing the plugin, `validate`,
//! `task-configs`, stopping tasks) holds up only this connector's later commands, never the
//! control loop or another connector. After every change it publishes its [`ConnectorView`]
//! for reads and its state to the status store.
//!
//! Stored first, acted on after: a change to what is stored (config, split, target state,
//! removal) is checked, appended to the config log, and applied only when its event comes back
//! from the log (through the control loop, as [`Command::Stored`]), as Kafka Connect's herder
//! reacts to its config store's callbacks. The requester is answered then. So a failed write
//! changes nothing that runs, and what runs is what the log holds.
//!
//! Invariants: only this actor starts or stops the connector's tasks and changes its state;
//! tasks run only from the stored split; appends of this actor are applied in log order.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{Notify, mpsc, oneshot};

use super::control::Message;
use super::status::{ConnectorInfo, ConnectorStatus};
use super::view::{ConnectorView, Snapshot, info_of, status_of};
use super::{HerderError, Runtime};
use crate::config::ConnectorConfig;
use crate::storage::{
    ConfigEvent, ConfigLog, ConfigRecord, ConnectorState, ConnectorTaskId, Pairs, StoredStatus,
    TargetState, config::same_split,
};
use crate::task::{ActiveTopics, Control, TaskMetrics, TaskState};
use crate::worker::{ConnectorFacts, ConnectorOps, problems_message};

/// A connector is split again on its own request at most this often; requests meanwhile are
/// coalesced into the next split, so a plugin asking in a loop costs one split (and at most one
/// restart of its tasks) per interval.
pub(crate) const RESPLIT_MIN_INTERVAL: std::time::Duration = std::time::Duration::from_secs(2);

/// The shortest wait between two `monitor` calls a connector may ask for (the WIT says so).
const MONITOR_MIN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// A reply to whoever asked.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, HerderError>>;

/// Where a connector being started comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Created now (REST, a connector file): a bad config is refused and nothing is stored.
    Created,
    /// Stored by an earlier run, with the split stored then (if any) and the content hash of
    /// the plugin build that made it: its tasks start from it without splitting again, unless
    /// the plugin is another build now. A config that no longer checks out (say its plugin was
    /// removed) is kept, FAILED with the reason, so it is not lost.
    Stored {
        split: Option<Vec<Pairs>>,
        build: Option<String>,
    },
}

/// What of a connector this worker runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Share {
    /// All of it: the connector instance and every task (standalone).
    All,
    /// What the group's assignment gives this worker (distributed mode): the connector
    /// instance (created, split, monitored here) if `connector`, and the tasks listed. A
    /// worker that runs tasks of a connector but not its instance keeps an instance that is
    /// never created (the plugin loaded and its config checked, for the tasks to start from).
    Assigned {
        connector: bool,
        tasks: std::collections::BTreeSet<u32>,
    },
}

impl Share {
    /// Whether the connector instance runs here.
    pub fn connector(&self) -> bool {
        match self {
            Share::All => true,
            Share::Assigned { connector, .. } => *connector,
        }
    }

    /// Whether task `id` runs here.
    pub fn task(&self, id: u32) -> bool {
        match self {
            Share::All => true,
            Share::Assigned { tasks, .. } => tasks.contains(&id),
        }
    }
}

/// What a connector's actor is asked to do.
pub(crate) enum Command {
    /// Prepare the connector and start its tasks per `target`. Replies whether it was created
    /// (always, for this command) and its info.
    Start {
        target: TargetState,
        origin: Origin,
        reply: Reply<(bool, ConnectorInfo)>,
    },
    /// Replace the config: the new one is checked before the running one is touched.
    Reconfigure {
        config: ConnectorConfig,
        reply: Reply<(bool, ConnectorInfo)>,
    },
    SetTarget {
        target: TargetState,
        reply: Reply<()>,
    },
    Restart {
        include_tasks: bool,
        only_failed: bool,
        reply: Reply<ConnectorStatus>,
    },
    RestartTask {
        id: u32,
        reply: Reply<()>,
    },
    AlterOffsets {
        changes: Vec<super::offsets::ConnectorOffset>,
        reply: Reply<()>,
    },
    ResetOffsets {
        reply: Reply<()>,
    },
    /// The plugin directory changed: restart on the plugin build the config now resolves to,
    /// if that is another one.
    PluginsChanged,
    /// Stop the tasks and remove the connector (its offsets stay, as in Kafka Connect).
    Delete {
        reply: Reply<()>,
    },
    /// A record about this connector is stored (read back from the config log).
    Stored(ConfigEvent),
    /// Run `share` of the connector from now on (a rebalance): what is no longer this
    /// worker's stops first, then what is new starts. Answered once done.
    Assign {
        share: Share,
        reply: oneshot::Sender<()>,
    },
    /// Stop the tasks, keep the connector stored: the worker is stopping. Replies records
    /// done and failed tasks.
    Shutdown {
        reply: oneshot::Sender<(u64, usize)>,
    },
}

impl Command {
    /// Answer the command with `error` without doing it.
    pub fn refuse(self, error: HerderError) {
        match self {
            Command::Start { reply, .. } | Command::Reconfigure { reply, .. } => {
                let _ = reply.send(Err(error));
            }
            Command::SetTarget { reply, .. }
            | Command::RestartTask { reply, .. }
            | Command::Delete { reply }
            | Command::AlterOffsets { reply, .. }
            | Command::ResetOffsets { reply } => {
                let _ = reply.send(Err(error));
            }
            Command::Restart { reply, .. } => {
                let _ = reply.send(Err(error));
            }
            Command::Shutdown { reply } => {
                let _ = reply.send((0, 0));
            }
            Command::Assign { reply, .. } => {
                let _ = reply.send(());
            }
            Command::PluginsChanged | Command::Stored(_) => {}
        }
    }
}

/// The control loop's handle on an actor.
pub(crate) struct ActorHandle {
    pub commands: mpsc::UnboundedSender<Command>,
}

/// Where an actor starts from: its connector's config, what of it runs here, and the offset
/// of the last config event already reflected in what it is given (later ones are applied).
pub(crate) struct Seed {
    pub config: ConnectorConfig,
    pub share: Share,
    pub applied: u64,
}

/// Start the actor of connector `seed.config.name`; it does nothing until its first command.
pub(crate) fn spawn<W: Runtime>(
    worker: Arc<W>,
    log: Arc<dyn ConfigLog>,
    seed: Seed,
    snapshot: Arc<Snapshot>,
    control: mpsc::UnboundedSender<Message>,
) -> ActorHandle {
    let Seed {
        config,
        share,
        applied,
    } = seed;
    let (commands, queue) = mpsc::unbounded_channel();
    let actor = Actor {
        name: config.name.clone(),
        worker,
        log,
        config,
        target: TargetState::Running,
        failure: None,
        retrying: None,
        split: None,
        running: BTreeMap::new(),
        topics: ActiveTopics::default(),
        reconfigure: Arc::new(Notify::new()),
        split_failures: VecDeque::new(),
        retry_at: None,
        resplit_allowed: tokio::time::Instant::now(),
        monitor_at: None,
        applied,
        share,
        started: false,
        pending: VecDeque::new(),
        snapshot,
        control,
    };
    tokio::spawn(actor.run(queue));
    ActorHandle { commands }
}

/// Whether the actor goes on after a command.
#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    Exit,
}

/// A split, or why it could not be had and is retried.
type Split = Result<Vec<Pairs>, String>;

/// A change appended to the config log, applied when its last record comes back.
struct Pending<C> {
    /// The offsets of its records.
    first: u64,
    last: u64,
    change: Staged<C>,
}

/// What is applied when a change's records come back from the log.
enum Staged<C> {
    /// Start a connector (created, or restored without a stored split) with its new
    /// connector instance and split.
    Start {
        connector: C,
        split: Split,
        reply: Reply<(bool, ConnectorInfo)>,
    },
    /// Run a new config.
    Reconfigure {
        config: ConnectorConfig,
        connector: C,
        split: Split,
        reply: Option<Reply<(bool, ConnectorInfo)>>,
    },
    /// Run, pause or stop.
    Target {
        target: TargetState,
        reply: Reply<()>,
    },
    /// Restart the tasks on a new split of the running connector.
    Split { split: Vec<Pairs> },
    /// Restart the connector (a new instance, and its split, changed or not).
    Restart {
        connector: C,
        split: Split,
        include_tasks: bool,
        only_failed: bool,
        reply: Reply<ConnectorStatus>,
    },
    /// Remove the connector.
    Delete { reply: Reply<()> },
    /// Distributed: a restart request stored for every worker to act on; this worker acts
    /// on it for what it runs, then answers with the restart plan.
    Requested {
        include_tasks: bool,
        only_failed: bool,
        reply: Reply<ConnectorStatus>,
    },
}

impl<C: ConnectorOps> Staged<C> {
    /// The change was not stored: stop the connector instance it brought (if any) and answer
    /// its requester with `error`.
    async fn refuse(self, grace: std::time::Duration, error: HerderError) {
        match self {
            Staged::Start {
                connector, reply, ..
            } => {
                connector.stop(grace).await;
                let _ = reply.send(Err(error));
            }
            Staged::Reconfigure {
                connector, reply, ..
            } => {
                connector.stop(grace).await;
                if let Some(reply) = reply {
                    let _ = reply.send(Err(error));
                }
            }
            Staged::Restart {
                connector, reply, ..
            } => {
                connector.stop(grace).await;
                let _ = reply.send(Err(error));
            }
            Staged::Target { reply, .. } | Staged::Delete { reply } => {
                let _ = reply.send(Err(error));
            }
            Staged::Requested { reply, .. } => {
                let _ = reply.send(Err(error));
            }
            Staged::Split { .. } => {}
        }
    }
}

/// The record storing `configs` as connector `name`'s split, made by the build `facts` names.
fn tasks_record(name: &str, facts: &ConnectorFacts, configs: Vec<Pairs>) -> ConfigRecord {
    ConfigRecord::Tasks {
        name: name.to_owned(),
        configs,
        build: Some(facts.build.1.clone()),
    }
}

struct Actor<W: Runtime> {
    name: String,
    worker: Arc<W>,
    log: Arc<dyn ConfigLog>,
    /// The config as the operator gave it (what the log holds, once started).
    config: ConnectorConfig,
    target: TargetState,
    /// Why the connector is FAILED; it runs no tasks until restarted or given a new config.
    failure: Option<String>,
    /// Why the last split failed retriably, while a retry is scheduled.
    retrying: Option<String>,
    /// The stored split the tasks run from; `None` until one is stored.
    split: Option<Vec<Pairs>>,
    /// The tasks started here, by task id.
    running: BTreeMap<u32, Arc<TaskMetrics>>,
    topics: ActiveTopics,
    /// Notified by `context.request-reconfiguration` from the connector instance or any of its
    /// tasks' instances. One per actor, so a request is never lost across a config change.
    reconfigure: Arc<Notify>,
    /// When retriable split failures happened, within the restart window.
    split_failures: VecDeque<Instant>,
    /// When the failed split is tried again.
    retry_at: Option<tokio::time::Instant>,
    /// The connector's next request for a split is acted on no sooner than this.
    resplit_allowed: tokio::time::Instant,
    /// When the connector's `monitor` is called next; `None` while it is not to be monitored
    /// (not RUNNING, failed, waiting to retry a split, or a contract without `monitor`).
    monitor_at: Option<tokio::time::Instant>,
    /// The offset of the last config event applied.
    applied: u64,
    /// What of the connector runs on this worker.
    share: Share,
    /// Whether the connector was started (or failed to): until then its status is UNASSIGNED.
    started: bool,
    /// Appended changes waiting for their records to come back, in log order.
    pending: VecDeque<Pending<W::Connector>>,
    snapshot: Arc<Snapshot>,
    control: mpsc::UnboundedSender<Message>,
}

impl<W: Runtime> Actor<W> {
    async fn run(mut self, mut queue: mpsc::UnboundedReceiver<Command>) {
        // Commands that came while a change was pending: decided once it is applied, against
        // the state it leaves (a restart or a re-split must not work from the config or split
        // a stored change is about to replace).
        let mut deferred: VecDeque<Command> = VecDeque::new();
        loop {
            let idle = self.pending.is_empty();
            if idle && let Some(command) = deferred.pop_front() {
                if self.handle(command).await == Flow::Exit {
                    self.exit(deferred, queue).await;
                    return;
                }
                continue;
            }
            self.schedule_monitor();
            let reconfigure = Arc::clone(&self.reconfigure);
            let retry_at = self.retry_at;
            let resplit_allowed = self.resplit_allowed;
            let monitor_at = self.monitor_at;
            tokio::select! {
                command = queue.recv() => {
                    let Some(command) = command else {
                        // The control loop is gone: stop what runs.
                        self.stop_tasks().await;
                        self.stop_connector().await;
                        return;
                    };
                    let now = idle || matches!(command, Command::Stored(_) | Command::Shutdown { .. } | Command::Assign { .. });
                    if !now {
                        deferred.push_back(command);
                    } else if self.handle(command).await == Flow::Exit {
                        self.exit(deferred, queue).await;
                        return;
                    }
                }
                // Requests wait (a stored permit) until the interval since the last is over,
                // and until no change is pending.
                () = async { tokio::time::sleep_until(resplit_allowed).await; reconfigure.notified().await }, if idle => {
                    tracing::info!(connector = %self.name, "the connector asked for new task configs");
                    self.resplit_allowed = tokio::time::Instant::now() + RESPLIT_MIN_INTERVAL;
                    self.resplit().await;
                }
                () = async { tokio::time::sleep_until(retry_at.unwrap_or_else(tokio::time::Instant::now)).await }, if idle && retry_at.is_some() => {
                    self.retry_at = None;
                    self.resplit().await;
                }
                () = async { tokio::time::sleep_until(monitor_at.unwrap_or_else(tokio::time::Instant::now)).await }, if idle && monitor_at.is_some() => {
                    self.monitor().await;
                }
            }
        }
    }

    /// The connector is gone; until the control loop has heard (and drops this queue's
    /// sender), commands deferred or already on their way find it gone too.
    async fn exit(&self, deferred: VecDeque<Command>, mut queue: mpsc::UnboundedReceiver<Command>) {
        for late in deferred {
            late.refuse(super::control::not_found(&self.name));
        }
        while let Some(late) = queue.recv().await {
            late.refuse(super::control::not_found(&self.name));
        }
    }

    /// Arm the next `monitor` call one interval from now when the connector has just become
    /// one to monitor; disarm it when it no longer is.
    fn schedule_monitor(&mut self) {
        let monitored = self.target == TargetState::Running
            && self.failure.is_none()
            && self.retrying.is_none()
            && self
                .connector()
                .is_some_and(|c| c.is_created() && c.monitors());
        match (monitored, self.monitor_at) {
            (false, _) => self.monitor_at = None,
            (true, None) => {
                self.monitor_at = Some(tokio::time::Instant::now() + self.monitor_interval())
            }
            (true, Some(_)) => {}
        }
    }

    fn monitor_interval(&self) -> std::time::Duration {
        self.connector()
            .map_or(std::time::Duration::from_secs(60), |c| {
                c.facts().monitor_interval
            })
    }

    /// Call the connector's `monitor`: re-split when it reports a change, fail the connector
    /// when it fails for good, and set when it is called next.
    async fn monitor(&mut self) {
        let interval = self.monitor_interval();
        let Some(connector) = self.connector() else {
            self.monitor_at = None;
            return;
        };
        match connector.monitor().await {
            Ok(report) => {
                let next = report.next_call_ms.map_or(interval, |ms| {
                    std::time::Duration::from_millis(u64::from(ms)).max(MONITOR_MIN_INTERVAL)
                });
                self.monitor_at = Some(tokio::time::Instant::now() + next);
                if report.reconfigure {
                    tracing::info!(connector = %self.name, "the connector's monitor reported a change in its work");
                    // The same request as `context.request-reconfiguration`, under the same
                    // interval: acted on at once, or when the interval since the last is over.
                    self.reconfigure.notify_one();
                }
            }
            Err(e) if e.is_retriable() => {
                let e = self.redact(&e.to_string());
                tracing::warn!(connector = %self.name, "the connector's monitor failed: {e}; calling it again in {interval:?}");
                self.monitor_at = Some(tokio::time::Instant::now() + interval);
            }
            Err(e) => {
                self.stop_tasks().await;
                self.fail(e.to_string());
                self.publish();
            }
        }
    }

    async fn handle(&mut self, command: Command) -> Flow {
        match command {
            Command::Start {
                target,
                origin,
                reply,
            } => return self.start(target, origin, reply).await,
            Command::Reconfigure { config, reply } => self.reconfigure(config, Some(reply)).await,
            Command::SetTarget { target, reply } => self.set_target(target, reply).await,
            Command::Restart {
                include_tasks,
                only_failed,
                reply,
            } if self.share != Share::All => {
                // Stored, so that every worker restarts what it runs of the connector.
                let request = ConfigRecord::Restart {
                    name: self.name.clone(),
                    include_tasks,
                    only_failed,
                };
                let change = Staged::Requested {
                    include_tasks,
                    only_failed,
                    reply,
                };
                if let Err((change, e)) = self.stage(vec![request], change).await {
                    change.refuse(self.grace(), e).await;
                }
            }
            Command::Restart {
                include_tasks,
                only_failed,
                reply,
            } => self.restart(include_tasks, only_failed, reply).await,
            Command::RestartTask { id, reply } => {
                let _ = reply.send(self.restart_task(id).await);
            }
            Command::AlterOffsets { changes, reply } => {
                let outcome = async {
                    self.require_stopped()?;
                    self.worker
                        .alter_offsets(&self.name, &self.view(), &changes)
                        .await
                };
                let _ = reply.send(outcome.await);
            }
            Command::ResetOffsets { reply } => {
                let outcome = async {
                    self.require_stopped()?;
                    self.worker.reset_offsets(&self.name, &self.view()).await
                };
                let _ = reply.send(outcome.await);
            }
            Command::PluginsChanged => self.follow_plugin().await,
            Command::Delete { reply } => {
                tracing::info!(connector = %self.name, "deleting connector {}: stopping its tasks", self.name);
                let removed = ConfigRecord::Removed {
                    name: self.name.clone(),
                };
                if let Err((change, e)) = self.stage(vec![removed], Staged::Delete { reply }).await
                {
                    // Not deleted: it takes commands again.
                    let _ = self.control.send(Message::DeleteRefused {
                        name: self.name.clone(),
                    });
                    change.refuse(self.grace(), e).await;
                }
            }
            Command::Stored(event) => return self.stored(event).await,
            Command::Assign { share, reply } => {
                self.assign(share).await;
                let _ = reply.send(());
            }
            Command::Shutdown { reply } => {
                // Read once the tasks have stopped: their final counts and states.
                let metrics: Vec<_> = self.running.values().cloned().collect();
                self.stop_tasks().await;
                self.stop_connector().await;
                let done = metrics.iter().map(|m| m.done()).sum();
                let failed = metrics
                    .iter()
                    .filter(|m| matches!(m.state(), TaskState::Failed(_)))
                    .count()
                    + usize::from(self.failure.is_some());
                let _ = reply.send((done, failed));
                return Flow::Exit;
            }
        }
        Flow::Continue
    }

    /// Append `records` to the config log; their first and last offsets once stored.
    async fn append(&self, records: Vec<ConfigRecord>) -> Result<(u64, u64), HerderError> {
        let events = self.log.append(records).await.map_err(|e| {
            if let Some(conflict) = e.strip_prefix(crate::storage::config::CONFLICT) {
                return HerderError::Conflict(conflict.to_owned());
            }
            HerderError::Internal(format!(
                "the change to connector {} was not stored, so nothing changed: {e}",
                self.name
            ))
        })?;
        match (events.first(), events.last()) {
            (Some(first), Some(last)) => Ok((first.offset, last.offset)),
            _ => Err(HerderError::Internal("worker bug: nothing appended".into())),
        }
    }

    /// Store `records`, to apply `change` when the last of them comes back from the log; if
    /// the write fails, `change` comes back with the error, not applied.
    async fn stage(
        &mut self,
        records: Vec<ConfigRecord>,
        change: Staged<W::Connector>,
    ) -> Result<(), (Staged<W::Connector>, HerderError)> {
        match self.append(records).await {
            Ok((first, last)) => {
                self.pending.push_back(Pending {
                    first,
                    last,
                    change,
                });
                Ok(())
            }
            Err(e) => Err((change, e)),
        }
    }

    /// A record about this connector came back from the log: apply the change it completes,
    /// or, if another writer stored it, react to it.
    async fn stored(&mut self, event: ConfigEvent) -> Flow {
        if event.offset <= self.applied {
            return Flow::Continue;
        }
        if let Some(pending) = self.pending.front()
            && (pending.first..=pending.last).contains(&event.offset)
        {
            if event.offset < pending.last {
                return Flow::Continue;
            }
            self.applied = event.offset;
            let Some(pending) = self.pending.pop_front() else {
                return Flow::Continue;
            };
            return self.apply(pending.change).await;
        }
        self.applied = event.offset;
        self.foreign(event.record).await
    }

    /// Apply a change of this actor's whose records are stored; then, if the connector
    /// instance is not this worker's to run, stop it (it stays for the tasks to start from).
    async fn apply(&mut self, change: Staged<W::Connector>) -> Flow {
        let flow = self.apply_change(change).await;
        if flow == Flow::Continue && !self.share.connector() {
            self.demote().await;
        }
        flow
    }

    async fn apply_change(&mut self, change: Staged<W::Connector>) -> Flow {
        match change {
            Staged::Start {
                connector,
                split,
                reply,
            } => {
                self.started = true;
                self.adopt(connector, split).await;
                self.start_tasks();
                self.publish();
                let _ = reply.send(Ok((true, info_of(&self.name, &self.view()))));
            }
            Staged::Reconfigure {
                config,
                connector,
                split,
                reply,
            } => {
                self.stop_tasks().await;
                self.take_config(config);
                self.adopt(connector, split).await;
                self.start_tasks();
                self.publish();
                if let Some(reply) = reply {
                    let _ = reply.send(Ok((false, info_of(&self.name, &self.view()))));
                }
            }
            Staged::Target { target, reply } => {
                self.apply_target(target).await;
                let _ = reply.send(Ok(()));
            }
            Staged::Split { split } => {
                tracing::info!(connector = %self.name, tasks = split.len(), "the task configs changed; restarting the connector's tasks");
                self.stop_tasks().await;
                self.split = Some(split);
                self.start_tasks();
                self.publish();
            }
            Staged::Restart {
                connector,
                split,
                include_tasks,
                only_failed,
                reply,
            } => {
                let changed = match &split {
                    Ok(new) => self.split.as_ref().is_none_or(|old| !same_split(old, new)),
                    Err(_) => true,
                };
                let build_changed = self
                    .connector()
                    .is_none_or(|c| c.facts().build != connector.facts().build);
                let was_failed = self.failure.is_some() || self.retrying.is_some();
                // The old connector instance stops after the tasks it split for (which keep
                // running only when the new split is the same).
                if changed || build_changed || was_failed {
                    self.stop_tasks().await;
                }
                self.failure = None;
                self.retrying = None;
                self.retry_at = None;
                // A restart asked for by the operator starts the retry budget afresh.
                self.split_failures.clear();
                self.adopt(connector, split).await;
                let status = self.restart_tasks(true, include_tasks, only_failed).await;
                let _ = reply.send(Ok(status));
            }
            Staged::Requested {
                include_tasks,
                only_failed,
                reply,
            } => {
                let plan = self.restart_share(include_tasks, only_failed).await;
                let _ = reply.send(Ok(plan));
            }
            Staged::Delete { reply } => {
                self.retire().await;
                self.worker.status().remove_connector(&self.name);
                let _ = self.control.send(Message::Gone {
                    name: self.name.clone(),
                    then: Box::new(move || {
                        let _ = reply.send(Ok(()));
                    }),
                });
                return Flow::Exit;
            }
        }
        Flow::Continue
    }

    /// A record another writer stored (distributed mode: another worker's REST request).
    async fn foreign(&mut self, record: ConfigRecord) -> Flow {
        match record {
            ConfigRecord::Connector { config, .. } => match ConnectorConfig::from_pairs(config) {
                Ok(config) => {
                    self.reconfigure_stored(config).await;
                }
                Err(problems) => {
                    self.stop_tasks().await;
                    self.fail(problems_message(&self.name, &problems));
                    self.publish();
                }
            },
            ConfigRecord::Tasks { configs, .. } if self.share != Share::All => {
                // Distributed: a split stored by whichever worker made it. The same split
                // again (the instance's owner checking a split another worker stored)
                // restarts nothing.
                self.retrying = None;
                self.retry_at = None;
                if self.split.as_ref().is_some_and(|s| same_split(s, &configs)) {
                    self.start_tasks();
                    self.publish();
                } else {
                    self.apply(Staged::Split { split: configs }).await;
                }
            }
            ConfigRecord::Tasks { configs, .. } => {
                self.apply(Staged::Split { split: configs }).await;
            }
            ConfigRecord::Target { state, .. } => self.apply_target(state).await,
            ConfigRecord::Restart {
                include_tasks,
                only_failed,
                ..
            } => {
                self.restart_share(include_tasks, only_failed).await;
            }
            ConfigRecord::Removed { .. } => {
                self.retire().await;
                self.worker.status().remove_connector(&self.name);
                let _ = self.control.send(Message::Gone {
                    name: self.name.clone(),
                    then: Box::new(|| {}),
                });
                return Flow::Exit;
            }
        }
        Flow::Continue
    }

    /// Prepare the connector from its config: its instance (not created), or what is wrong
    /// with the config, in one message.
    async fn prepare_own(&self) -> Result<W::Connector, String> {
        self.worker
            .prepare(&self.config, Arc::clone(&self.reconfigure))
            .await
            .map_err(|p| problems_message(&self.name, &p))
    }

    /// Take `config` as the connector's, with a clean slate: no failure, no retries, and no
    /// split (the old one belongs to the old config; the log dropped it too). The caller has
    /// stopped the tasks.
    fn take_config(&mut self, config: ConnectorConfig) {
        self.config = config;
        self.failure = None;
        self.retrying = None;
        self.retry_at = None;
        self.split_failures.clear();
        self.split = None;
    }

    /// Keep `connector` as the running one (stopping the one before) with `split`, or
    /// schedule a retry of the split.
    async fn adopt(&mut self, connector: W::Connector, split: Split) {
        self.worker.run_connector(&self.name, connector).await;
        self.monitor_at = None;
        match split {
            Ok(split) => self.split = Some(split),
            Err(error) => self.split_failed(error),
        }
    }

    /// The connector is going away (deleted, or never created): stop its tasks, drop its
    /// instance, release its claim and withdraw its view.
    async fn retire(&mut self) {
        self.stop_tasks().await;
        self.stop_connector().await;
        self.worker.capacity().release(&self.name);
        self.snapshot.remove(&self.name);
    }

    /// The connector goes away before anything was stored: answer `reply` with `error` once
    /// the control loop has freed the name.
    async fn abandon(&mut self, error: HerderError, reply: Reply<(bool, ConnectorInfo)>) -> Flow {
        self.retire().await;
        let _ = self.control.send(Message::Gone {
            name: self.name.clone(),
            then: Box::new(move || {
                let _ = reply.send(Err(error));
            }),
        });
        Flow::Exit
    }

    /// Prepare the connector from its config and start it per `target`: a created one is
    /// stored (config, target state, split) before it runs; a stored one runs from its stored
    /// split, split first only if none is stored.
    async fn start(
        &mut self,
        target: TargetState,
        origin: Origin,
        reply: Reply<(bool, ConnectorInfo)>,
    ) -> Flow {
        self.target = target;
        let created = origin == Origin::Created;
        if !created {
            // Shown at once, UNASSIGNED until it runs: a stored connector exists meanwhile.
            self.publish();
        }
        let connector = match self.prepare_own().await {
            Ok(connector) => connector,
            Err(message) => {
                if created {
                    return self.abandon(HerderError::BadRequest(message), reply).await;
                }
                tracing::error!(connector = %self.name, "cannot restore the stored connector: {message}");
                self.fail(message);
                self.publish();
                let _ = reply.send(Ok((true, info_of(&self.name, &self.view()))));
                return Flow::Continue;
            }
        };
        let stored_split = match origin {
            Origin::Stored {
                split: Some(split),
                build,
            } => {
                let now = &connector.facts().build.1;
                if build.as_ref().is_some_and(|b| b != now) {
                    // Another build may want other task configs.
                    tracing::info!(connector = %self.name, "plugin {} is another build than the one that split the connector's work (now {}); splitting again", self.config.plugin, connector.facts().version);
                    None
                } else {
                    Some(split)
                }
            }
            Origin::Stored { split: None, .. } | Origin::Created => None,
        };
        let reused = stored_split.is_some();
        let owner = self.share.connector();
        let split = match stored_split {
            // Only the worker that runs the connector instance creates it.
            Some(split) if !owner => Ok(split),
            Some(split) => {
                // Kept while a retriable `create` failure waits to be retried.
                self.split = Some(split.clone());
                connector.create().await.map(|()| split)
            }
            None if !owner && !created => {
                // Its split is made where the connector instance runs, and comes through the
                // config log; meanwhile the instance is kept (not created) for its tasks.
                self.started = true;
                self.worker.run_connector(&self.name, connector).await;
                self.publish();
                let _ = reply.send(Ok((true, info_of(&self.name, &self.view()))));
                return Flow::Continue;
            }
            None => connector.task_configs().await,
        };
        let split = match split {
            Ok(split) => Ok(split),
            // Shown in the connector's status: no resolved secret in it.
            Err(e) if e.is_retriable() => Err(connector.redact(&e.to_string())),
            Err(e) => {
                let message = problems_message(
                    &self.name,
                    &[crate::config::Problem::new("", e.to_string())],
                );
                let message = connector.redact(&message);
                connector.stop(self.grace()).await;
                if created {
                    return self.abandon(HerderError::BadRequest(message), reply).await;
                }
                self.fail(message);
                self.publish();
                let _ = reply.send(Ok((true, info_of(&self.name, &self.view()))));
                return Flow::Continue;
            }
        };
        if let Ok(split) = &split
            && let Err(e) = self.admit(&connector, split.len(), target)
        {
            connector.stop(self.grace()).await;
            if created {
                return self.abandon(e, reply).await;
            }
            self.fail(e.to_string());
            self.publish();
            let _ = reply.send(Ok((true, info_of(&self.name, &self.view()))));
            return Flow::Continue;
        }
        let mut records = Vec::new();
        if created {
            records.push(ConfigRecord::Connector {
                name: self.name.clone(),
                config: self.config.pairs.clone(),
            });
            records.push(ConfigRecord::Target {
                name: self.name.clone(),
                state: target,
            });
        }
        if let (Ok(split), false) = (&split, reused) {
            records.push(tasks_record(&self.name, connector.facts(), split.clone()));
        }
        if records.is_empty() {
            // Nothing new to store: it runs what is stored.
            return self
                .apply(Staged::Start {
                    connector,
                    split,
                    reply,
                })
                .await;
        }
        let change = Staged::Start {
            connector,
            split,
            reply,
        };
        let Err((change, e)) = self.stage(records, change).await else {
            return Flow::Continue;
        };
        let Staged::Start {
            connector, reply, ..
        } = change
        else {
            // `stage` hands back the change it was given: a Start.
            return Flow::Continue;
        };
        connector.stop(self.grace()).await;
        self.worker.capacity().release(&self.name);
        if created {
            return self.abandon(e, reply).await;
        }
        // A stored connector whose split cannot be stored: it runs nothing.
        self.fail(e.to_string());
        self.publish();
        let _ = reply.send(Ok((true, info_of(&self.name, &self.view()))));
        Flow::Continue
    }

    /// Prepare `config` and split it: the new connector and its split, or what is wrong with
    /// it (the caller's running connector is untouched either way).
    async fn prepare_split(
        &mut self,
        config: &ConnectorConfig,
    ) -> Result<(W::Connector, Split), HerderError> {
        let connector = self
            .worker
            .prepare(config, Arc::clone(&self.reconfigure))
            .await
            .map_err(|p| HerderError::BadRequest(problems_message(&config.name, &p)))?;
        match connector.task_configs().await {
            Ok(split) => Ok((connector, Ok(split))),
            Err(e) if e.is_retriable() => {
                let error = connector.redact(&e.to_string());
                Ok((connector, Err(error)))
            }
            Err(e) => {
                let message = problems_message(
                    &config.name,
                    &[crate::config::Problem::new("", e.to_string())],
                );
                let message = connector.redact(&message);
                connector.stop(self.grace()).await;
                Err(HerderError::BadRequest(message))
            }
        }
    }

    /// A new config: checked, split and admitted before the running one is touched, then
    /// stored, then run.
    async fn reconfigure(
        &mut self,
        config: ConnectorConfig,
        reply: Option<Reply<(bool, ConnectorInfo)>>,
    ) {
        let refuse = |reply: Option<Reply<(bool, ConnectorInfo)>>, e: HerderError| {
            if let Some(reply) = reply {
                let _ = reply.send(Err(e));
            }
        };
        let (connector, split) = match self.prepare_split(&config).await {
            Ok(prepared) => prepared,
            Err(e) => return refuse(reply, e),
        };
        let before = self.worker.capacity().claim_of(&self.name);
        if let Ok(split) = &split
            && let Err(e) = self.admit(&connector, split.len(), self.target)
        {
            connector.stop(self.grace()).await;
            return refuse(reply, e);
        }
        let mut records = vec![ConfigRecord::Connector {
            name: self.name.clone(),
            config: config.pairs.clone(),
        }];
        if let Ok(split) = &split {
            records.push(tasks_record(&self.name, connector.facts(), split.clone()));
        }
        let change = Staged::Reconfigure {
            config,
            connector,
            split,
            reply,
        };
        if let Err((change, e)) = self.stage(records, change).await {
            self.worker.capacity().restore(&self.name, before);
            change.refuse(self.grace(), e).await;
        }
    }

    /// A new config another writer stored: prepared, split (the split stored), then run.
    /// Distributed: the writer stored its split with the config (or could not); the instance's
    /// owner checks the split once the writer's has had time to arrive, and stores its own if
    /// none came or it differs.
    async fn reconfigure_stored(&mut self, config: ConnectorConfig) {
        if self.share != Share::All {
            self.stop_tasks().await;
            self.take_config(config);
            self.monitor_at = None;
            match self.prepare_own().await {
                Ok(connector) => {
                    let created = if self.share.connector() {
                        Some(connector.create().await)
                    } else {
                        None
                    };
                    self.worker.run_connector(&self.name, connector).await;
                    match created {
                        Some(Ok(())) => {
                            self.retry_at =
                                Some(tokio::time::Instant::now() + RESPLIT_MIN_INTERVAL);
                        }
                        Some(Err(e)) if e.is_retriable() => self.split_failed(e.to_string()),
                        Some(Err(e)) => self.fail(e.to_string()),
                        None => {}
                    }
                }
                Err(message) => {
                    self.worker.stop_connector(&self.name).await;
                    self.fail(message);
                }
            }
            self.publish();
            return;
        }
        match self.prepare_split(&config).await {
            Ok((connector, split)) => {
                if let Ok(split) = &split {
                    let tasks = tasks_record(&self.name, connector.facts(), split.clone());
                    if let Err(e) = self.append(vec![tasks]).await {
                        tracing::error!(connector = %self.name, "{e}");
                    }
                }
                self.apply(Staged::Reconfigure {
                    config,
                    connector,
                    split,
                    reply: None,
                })
                .await;
            }
            Err(e) => {
                self.stop_tasks().await;
                self.config = config;
                self.fail(e.to_string());
                self.publish();
            }
        }
    }

    /// After a change in the plugin directory: restart on the build `connector.class` (and
    /// `connector.plugin.version`) now resolve to, if it is another one, offsets kept. A
    /// connector whose plugin left the directory keeps running on the build it loaded.
    async fn follow_plugin(&mut self) {
        let found = self.worker.current_build(&self.config);
        let running = self.connector().map(|c| c.facts().clone());
        match (found, running) {
            (Some(new), Some(old)) if new.file == old.build => {}
            (None, Some(old)) => {
                tracing::warn!(connector = %self.name, "plugin {} {} left the plugin directory; the connector keeps running on the build it loaded until it is restarted", old.plugin, old.version);
            }
            (None, None) => {}
            (Some(new), old) => {
                tracing::info!(connector = %self.name, "plugin {} changed ({} -> {} from {}): restarting the connector on it", self.config.plugin, old.map_or_else(|| "missing".to_owned(), |o| o.version), new.version, new.file.0.display());
                let (reply, outcome) = oneshot::channel();
                self.reconfigure(self.config.clone(), Some(reply)).await;
                // Answered when refused, or once the change is stored and applied (by this
                // actor, later: not waited on here).
                let (name, plugin) = (self.name.clone(), self.config.plugin.clone());
                tokio::spawn(async move {
                    if let Ok(Err(e)) = outcome.await {
                        tracing::error!(connector = %name, "cannot restart on the new build of plugin {plugin}: {e}; the connector keeps running as it was");
                    }
                });
            }
        }
    }

    async fn set_target(&mut self, target: TargetState, reply: Reply<()>) {
        // Tasks are started on apply only for a connector that is not FAILED, and only if
        // they (still) fit.
        let before = self.worker.capacity().claim_of(&self.name);
        if target != TargetState::Stopped
            && self.running.is_empty()
            && self.failure.is_none()
            && let (Some(connector), Some(split)) = (self.connector(), &self.split)
            && let Err(e) = self.admit(&connector, split.len(), target)
        {
            let _ = reply.send(Err(e));
            return;
        }
        let record = ConfigRecord::Target {
            name: self.name.clone(),
            state: target,
        };
        if let Err((change, e)) = self
            .stage(vec![record], Staged::Target { target, reply })
            .await
        {
            self.worker.capacity().restore(&self.name, before);
            change.refuse(self.grace(), e).await;
        }
    }

    /// Run, pause or stop per `target`, which is stored.
    async fn apply_target(&mut self, target: TargetState) {
        self.target = target;
        match target {
            TargetState::Stopped => {
                self.stop_tasks().await;
                self.worker.capacity().release(&self.name);
            }
            TargetState::Running | TargetState::Paused => {
                if self.retrying.is_some() && self.retry_at.is_none() {
                    // A split retry that came due while STOPPED is tried now.
                    self.retry_at = Some(tokio::time::Instant::now());
                }
                if self.running.is_empty() {
                    if let (Some(connector), Some(split)) = (self.connector(), &self.split)
                        && self.failure.is_none()
                    {
                        // Admitted when asked for; claimed again here for a change that came
                        // from elsewhere (a no-op otherwise).
                        let claim = connector.claim(split.len());
                        if let Err(p) = self.worker.capacity().admit(&self.name, claim) {
                            self.fail(problems_message(&self.name, &[p]));
                        }
                    }
                    self.start_tasks();
                } else {
                    let control = self.control_for_target();
                    self.worker.control_tasks(&self.task_ids(), control);
                }
            }
        }
        self.publish();
    }

    /// Restart the connector (re-check its config and re-split it with a new instance); with
    /// `include_tasks`, also its tasks (only the failed ones with `only_failed`).
    async fn restart(
        &mut self,
        include_tasks: bool,
        only_failed: bool,
        reply: Reply<ConnectorStatus>,
    ) {
        let connector_failed = self.failure.is_some() || self.retrying.is_some();
        let restart_connector = !only_failed || connector_failed;
        if !restart_connector {
            let status = self.restart_tasks(false, include_tasks, only_failed).await;
            let _ = reply.send(Ok(status));
            return;
        }
        let (connector, split) = match self.prepare_split(&self.config.clone()).await {
            Ok(prepared) => prepared,
            Err(e) => {
                // The config no longer checks out: FAILED with the reason.
                self.stop_tasks().await;
                self.worker.capacity().release(&self.name);
                self.fail(e.to_string());
                let status = self.restart_tasks(false, include_tasks, only_failed).await;
                let _ = reply.send(Ok(status));
                return;
            }
        };
        let before = self.worker.capacity().claim_of(&self.name);
        if let Ok(split) = &split
            && let Err(e) = self.admit(&connector, split.len(), self.target)
        {
            // A new split that does not fit is refused; what runs keeps running.
            connector.stop(self.grace()).await;
            let _ = reply.send(Err(e));
            return;
        }
        let changed = match &split {
            Ok(new) => self.split.as_ref().is_none_or(|old| !same_split(old, new)),
            Err(_) => false,
        };
        let facts = connector.facts().clone();
        let change = Staged::Restart {
            connector,
            split: split.clone(),
            include_tasks,
            only_failed,
            reply,
        };
        let new_split = match (changed, split) {
            (true, Ok(new_split)) => new_split,
            _ => {
                self.apply(change).await;
                return;
            }
        };
        let tasks = tasks_record(&self.name, &facts, new_split);
        if let Err((change, e)) = self.stage(vec![tasks], change).await {
            self.worker.capacity().restore(&self.name, before);
            change.refuse(self.grace(), e).await;
        }
    }

    /// Distributed: act on a stored restart request for what this worker runs (the connector
    /// instance where it runs here, the tasks assigned here); the restart plan as Kafka
    /// Connect answers it: what is restarted, anywhere, says RESTARTING.
    async fn restart_share(&mut self, include_tasks: bool, only_failed: bool) -> ConnectorStatus {
        let before = status_of(
            self.worker.status().as_ref(),
            None,
            &self.name,
            &self.view(),
        );
        if self.share.connector() {
            // Answered here through the plan; the restart's own answer is not needed.
            let (reply, _) = oneshot::channel();
            // Boxed: a restart applies its change, which may be this request's (recursion).
            Box::pin(self.restart(include_tasks, only_failed, reply)).await;
        } else {
            self.restart_tasks(false, include_tasks, only_failed).await;
        }
        let mut plan = status_of(
            self.worker.status().as_ref(),
            self.worker.outage(),
            &self.name,
            &self.view(),
        );
        if !only_failed || before.connector.state == "FAILED" {
            plan.connector.state = "RESTARTING";
        }
        for task in &mut plan.tasks {
            let failed = before
                .tasks
                .iter()
                .any(|t| t.id == task.id && t.state.state == "FAILED");
            if include_tasks && (!only_failed || failed) {
                task.state.state = "RESTARTING";
            }
        }
        plan
    }

    /// The rest of a restart: start tasks that do not run, and with `include_tasks` restart
    /// them (only failed ones with `only_failed`). Returns Kafka Connect's restart plan: what
    /// is restarted says RESTARTING.
    async fn restart_tasks(
        &mut self,
        connector_restarted: bool,
        include_tasks: bool,
        only_failed: bool,
    ) -> ConnectorStatus {
        let runnable = self.runnable();
        let mut restarted = Vec::new();
        if include_tasks && runnable {
            let count = self.split.as_ref().map_or(0, Vec::len);
            for id in 0..count as u32 {
                if !self.share.task(id) {
                    continue;
                }
                let failed = self
                    .running
                    .get(&id)
                    .is_none_or(|t| matches!(t.state(), TaskState::Failed(_)));
                if only_failed && !failed {
                    continue;
                }
                self.restart_one(id).await;
                restarted.push(id);
            }
        } else if self.running.is_empty() && runnable {
            self.start_tasks();
        }
        self.publish();
        let mut status = status_of(
            self.worker.status().as_ref(),
            self.worker.outage(),
            &self.name,
            &self.view(),
        );
        if connector_restarted && self.failure.is_none() {
            status.connector.state = "RESTARTING";
        }
        for task in &mut status.tasks {
            if restarted.contains(&task.id) {
                task.state.state = "RESTARTING";
            }
        }
        status
    }

    async fn restart_task(&mut self, id: u32) -> Result<(), HerderError> {
        let in_split = self.split.as_ref().is_some_and(|s| (id as usize) < s.len());
        if in_split && !self.share.task(id) {
            return Err(HerderError::Conflict(format!(
                "Task {}-{id} runs on another worker; send the restart to the worker that GET /connectors/{}/status names for it",
                self.name, self.name
            )));
        }
        if !self.running.contains_key(&id) {
            return Err(HerderError::NotFound(format!(
                "Task {}-{id} not found",
                self.name
            )));
        }
        self.restart_one(id).await;
        self.publish();
        Ok(())
    }

    /// Stop task `id` (if it runs) and start it again from its stored task config.
    async fn restart_one(&mut self, id: u32) {
        let Some(split) = &self.split else {
            return;
        };
        let Some(config) = split.get(id as usize) else {
            return;
        };
        let task = ConnectorTaskId::new(&self.name, id);
        if self.running.remove(&id).is_some() {
            self.worker.stop_tasks(vec![task.clone()]).await;
        }
        let started = self.worker.start_task(
            task,
            config,
            split.len(),
            self.control_for_target(),
            &self.topics,
        );
        if let Some(metrics) = started {
            self.running.insert(id, metrics);
        }
    }

    /// Ask the kept connector instance for task configs again (the connector asked for it, or
    /// a retriable failure's backoff is over). A changed split is stored, then its tasks
    /// restart (each flushes and commits its offsets first); an unchanged one changes nothing.
    async fn resplit(&mut self) {
        if self.target == TargetState::Stopped || self.failure.is_some() || !self.share.connector()
        {
            return;
        }
        let Some(connector) = self.connector() else {
            return;
        };
        // A stored connector whose `create` failed retriably runs its stored split once created.
        if !connector.is_created()
            && self.retrying.is_some()
            && self.split.is_some()
            && self.pending.is_empty()
        {
            match connector.create().await {
                Ok(()) => {
                    self.retrying = None;
                    self.split_failures.clear();
                    self.admit_and_start();
                }
                Err(e) if e.is_retriable() => self.split_failed(e.to_string()),
                Err(e) => self.fail(e.to_string()),
            }
            self.publish();
            return;
        }
        match connector.task_configs().await {
            Ok(split) => {
                let was_retrying = self.retrying.take().is_some();
                self.retry_at = None;
                self.split_failures.clear();
                let unchanged = self.split.as_ref().is_some_and(|s| same_split(s, &split));
                if unchanged && !was_retrying {
                    tracing::info!(connector = %self.name, "the task configs are unchanged; the tasks keep running");
                    return;
                }
                if unchanged {
                    // Retried after a failure: the tasks start from the split as stored.
                    self.admit_and_start();
                    self.publish();
                    return;
                }
                let before = self.worker.capacity().claim_of(&self.name);
                if let Err(e) = self.admit(&connector, split.len(), self.target) {
                    self.stop_tasks().await;
                    self.fail(e.to_string());
                    self.publish();
                    return;
                }
                let tasks = tasks_record(&self.name, connector.facts(), split.clone());
                match self.stage(vec![tasks], Staged::Split { split }).await {
                    Ok(()) => {}
                    Err((_, e)) => {
                        // What runs stays as stored, claimed as before.
                        self.worker.capacity().restore(&self.name, before);
                        if was_retrying {
                            // Nothing runs: retried like a failed split.
                            self.split_failed(e.to_string());
                            self.publish();
                        } else {
                            tracing::error!(connector = %self.name, "{e}; the tasks keep running on the stored split");
                        }
                    }
                }
            }
            Err(e) if e.is_retriable() => {
                self.stop_tasks().await;
                self.split_failed(e.to_string());
                self.publish();
            }
            Err(e) => {
                self.stop_tasks().await;
                self.worker.capacity().release(&self.name);
                self.fail(e.to_string());
                self.publish();
            }
        }
    }

    /// A retriable split failure: retry under the restart policy, or give up past it.
    fn split_failed(&mut self, error: String) {
        let error = self.redact(&error);
        let Some(policy) = self.connector().map(|c| c.facts().restart) else {
            return;
        };
        let now = Instant::now();
        self.split_failures.push_back(now);
        while self
            .split_failures
            .front()
            .is_some_and(|t| now.duration_since(*t) > policy.window)
        {
            self.split_failures.pop_front();
        }
        let attempt = self.split_failures.len() as u32;
        if attempt > policy.max_attempts {
            self.fail(format!(
                "{error} (not retried: it failed {attempt} times within {} s; task.restart.max.attempts is {})",
                policy.window.as_secs(),
                policy.max_attempts
            ));
            return;
        }
        let delay = policy.delay(attempt);
        tracing::warn!(connector = %self.name, "the connector could not split its work: {error}; retrying in {delay:?} (retry {attempt} of at most {})", policy.max_attempts);
        self.retrying = Some(error);
        self.retry_at = Some(tokio::time::Instant::now() + delay);
    }

    /// `text` (a plugin's error, say) without the resolved secrets of the connector's config:
    /// it is about to be shown in a status or the log.
    fn redact(&self, text: &str) -> String {
        match self.connector() {
            Some(c) => c.redact(text),
            None => text.to_owned(),
        }
    }

    /// The connector is FAILED: it runs no tasks (the caller has stopped them) and claims no
    /// capacity until restarted or given a new config.
    fn fail(&mut self, message: String) {
        let message = self.redact(&message);
        self.started = true;
        tracing::error!(connector = %self.name, "connector failed: {message}");
        self.worker.capacity().release(&self.name);
        self.failure = Some(message);
        self.retrying = None;
        self.retry_at = None;
    }

    /// Whether the connector's tasks may run: not STOPPED, FAILED or waiting to retry a split.
    fn runnable(&self) -> bool {
        self.target != TargetState::Stopped && self.failure.is_none() && self.retrying.is_none()
    }

    /// Claim what the stored split's tasks need, then start them; FAILED if they no longer fit.
    fn admit_and_start(&mut self) {
        if let (Some(connector), Some(split)) = (self.connector(), &self.split)
            && self.runnable()
            && let Err(e) = self.admit(&connector, split.len(), self.target)
        {
            self.fail(e.to_string());
            return;
        }
        self.start_tasks();
    }

    /// Start every task of the stored split that does not run yet, per the target state (none
    /// while STOPPED, FAILED or waiting to retry the split).
    fn start_tasks(&mut self) {
        if !self.runnable() {
            return;
        }
        let Some(split) = &self.split else {
            return;
        };
        let control = self.control_for_target();
        for (id, config) in split.iter().enumerate() {
            let id = id as u32;
            if self.running.contains_key(&id) || !self.share.task(id) {
                continue;
            }
            let started = self.worker.start_task(
                ConnectorTaskId::new(&self.name, id),
                config,
                split.len(),
                control,
                &self.topics,
            );
            if let Some(metrics) = started {
                self.running.insert(id, metrics);
            }
        }
    }

    /// Stop every task running here, at once, and wait for them.
    async fn stop_tasks(&mut self) {
        if self.running.is_empty() {
            return;
        }
        let ids = self.task_ids();
        self.running.clear();
        self.worker.stop_tasks(ids.clone()).await;
        // Tasks past the split are gone for good; the others show their last state.
        let kept = self.split.as_ref().map_or(0, Vec::len) as u32;
        for id in ids.iter().filter(|id| id.task >= kept) {
            self.worker.status().remove_task(id);
        }
    }

    /// Stop the running connector instance, if any.
    async fn stop_connector(&mut self) {
        self.worker.stop_connector(&self.name).await;
        self.monitor_at = None;
    }

    /// The connector's instance, as the worker runs it (kept for the next split); `None` until
    /// started, and when its config does not check out.
    fn connector(&self) -> Option<Arc<W::Connector>> {
        self.worker.connector(&self.name)
    }

    /// How long a plugin's `stop` may take: the task shutdown grace.
    fn grace(&self) -> std::time::Duration {
        self.worker.shutdown_grace()
    }

    fn task_ids(&self) -> Vec<ConnectorTaskId> {
        self.running
            .keys()
            .map(|id| ConnectorTaskId::new(&self.name, *id))
            .collect()
    }

    fn control_for_target(&self) -> Control {
        if self.target == TargetState::Paused {
            Control::Pause
        } else {
            Control::Run
        }
    }

    /// Record what `tasks` tasks of `connector` claim (nothing while `target` is STOPPED), or
    /// refuse with what does not fit and which keys to change.
    fn admit(
        &self,
        connector: &W::Connector,
        tasks: usize,
        target: TargetState,
    ) -> Result<(), HerderError> {
        let capacity = self.worker.capacity();
        if target == TargetState::Stopped {
            capacity.release(&self.name);
            return Ok(());
        }
        // A worker's capacity holds what runs on it: in distributed mode, its share.
        let tasks = match &self.share {
            Share::All => tasks,
            Share::Assigned { tasks: own, .. } => {
                own.iter().filter(|t| (**t as usize) < tasks).count()
            }
        };
        capacity
            .admit(&self.name, connector.claim(tasks))
            .map_err(|p| HerderError::BadRequest(problems_message(&self.name, &[p])))
    }

    fn require_stopped(&self) -> Result<(), HerderError> {
        if self.target != TargetState::Stopped {
            return Err(HerderError::BadRequest(format!(
                "Connectors must be in the STOPPED state before their offsets can be modified; stop {name} first (PUT /connectors/{name}/stop)",
                name = self.name
            )));
        }
        Ok(())
    }

    /// The connector's state, as its status shows it.
    fn state(&self) -> ConnectorState {
        if !self.started {
            return ConnectorState::Unassigned;
        }
        match (&self.failure, &self.retrying, self.target) {
            (Some(trace), _, _) => ConnectorState::Failed(trace.clone()),
            (None, Some(trace), target) if target != TargetState::Stopped => {
                ConnectorState::Restarting(trace.clone())
            }
            (None, _, TargetState::Running) => ConnectorState::Running,
            (None, _, TargetState::Paused) => ConnectorState::Paused,
            (None, _, TargetState::Stopped) => ConnectorState::Stopped,
        }
    }

    fn view(&self) -> ConnectorView {
        let facts = self.connector().map(|c| c.facts().clone());
        // What the tasks run from, as it may be shown: resolved values redacted.
        let listed = !self.running.is_empty() || self.runnable();
        let shown = !self.running.is_empty() || self.target != TargetState::Stopped;
        let split = match &self.split {
            Some(split) if shown => split
                .iter()
                .map(|c| c.iter().map(|(k, v)| (k.clone(), self.redact(v))).collect())
                .collect(),
            _ => Vec::new(),
        };
        ConnectorView {
            config: self.config.clone(),
            facts,
            split,
            tasks_listed: listed,
            tasks: self.running.clone(),
            topics: Arc::clone(&self.topics),
        }
    }

    /// Publish the view for reads and, where the connector instance runs here, its state.
    fn publish(&self) {
        if self.share.connector() {
            let state = self.state();
            self.worker.status().put_connector(
                &self.name,
                StoredStatus {
                    state: state.name(),
                    trace: state.trace().map(str::to_owned),
                    worker_id: self.worker.worker_id().to_owned(),
                },
            );
        }
        self.snapshot.publish(&self.name, self.view());
    }

    /// Run `share` of the connector from now on: tasks no longer this worker's stop first;
    /// then the connector instance is stopped or started as the share says, and the tasks
    /// that are new to this worker start.
    async fn assign(&mut self, share: Share) {
        let had_connector = self.share.connector();
        self.share = share;
        let gone: Vec<ConnectorTaskId> = self
            .running
            .keys()
            .filter(|id| !self.share.task(**id))
            .map(|id| ConnectorTaskId::new(&self.name, *id))
            .collect();
        if !gone.is_empty() {
            for id in &gone {
                self.running.remove(&id.task);
            }
            self.worker.stop_tasks(gone).await;
        }
        match (had_connector, self.share.connector()) {
            (true, false) => self.demote().await,
            (false, true) => self.promote().await,
            _ => {}
        }
        // This worker's capacity holds its new share, or the share does not run here.
        if self.runnable()
            && let (Some(connector), Some(split)) = (self.connector(), &self.split)
            && let Err(e) = self.admit(&connector, split.len(), self.target)
        {
            tracing::error!(connector = %self.name, "the tasks assigned to this worker do not run here: {e}");
            let not_running: Vec<u32> = (0..split.len() as u32)
                .filter(|t| self.share.task(*t) && !self.running.contains_key(t))
                .collect();
            for task in not_running {
                self.worker.status().put_task(
                    &ConnectorTaskId::new(&self.name, task),
                    StoredStatus {
                        state: "FAILED",
                        trace: Some(e.to_string()),
                        worker_id: self.worker.worker_id().to_owned(),
                    },
                );
            }
            self.publish();
            return;
        }
        self.start_tasks();
        self.publish();
    }

    /// The connector instance is this worker's to run now: a fresh instance, created; split
    /// (and the split stored) if no split is stored.
    async fn promote(&mut self) {
        if self.failure.is_some() {
            // FAILED stays FAILED here until restarted or given a new config.
            return;
        }
        let connector = match self.prepare_own().await {
            Ok(connector) => connector,
            Err(message) => {
                self.stop_tasks().await;
                self.fail(message);
                return;
            }
        };
        let created = connector.create().await;
        self.worker.run_connector(&self.name, connector).await;
        self.started = true;
        match created {
            Ok(()) if self.split.is_none() => self.retry_at = Some(tokio::time::Instant::now()),
            Ok(()) => {}
            Err(e) if e.is_retriable() => self.split_failed(e.to_string()),
            Err(e) => {
                self.stop_tasks().await;
                self.fail(e.to_string());
            }
        }
    }

    /// The connector instance is not this worker's to run: stop it (plugin `stop`), keeping
    /// it, never created, for this worker's tasks to start from.
    async fn demote(&mut self) {
        self.monitor_at = None;
        if let Some(connector) = self.connector()
            && connector.is_created()
        {
            connector.stop(self.grace()).await;
        }
    }
}
