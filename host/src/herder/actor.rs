//! One actor per connector: a tokio task that owns the connector's long-lived instance (created
//! when the connector starts, asked for task configs, kept until it stops), its target state,
//! its tasks' handles, and its retries. Commands for the connector arrive in order on its queue,
//! so the slow work they need (instantiating the plugin, `validate`, `task-configs`, stopping
//! tasks) holds up only this connector's later commands, never the control loop or another
//! connector. After every change the actor publishes its [`ConnectorView`] for reads.
//!
//! Invariants: only this actor starts or stops the connector's tasks and changes its state;
//! a config or target change is stored (through the control loop) before it is acknowledged.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{Notify, mpsc, oneshot};

use super::control::Message;
use super::status::{ConnectorInfo, ConnectorStatus};
use super::store::TargetState;
use super::view::{ConnectorView, Snapshot, info_of, status_of};
use super::{HerderError, offsets};
use crate::config::ConnectorConfig;
use crate::sandbox::ConnectorInstance;
use crate::task::{ActiveTopics, Control, TaskState};
use crate::worker::{
    NotPrepared, Prepared, Shared, TaskHandle, claim_of, prepare, problems_message, spawn_task,
    split, stop_all,
};

/// A connector is split again on its own request at most this often; requests meanwhile are
/// coalesced into the next split, so a plugin asking in a loop costs one split (and at most one
/// restart of its tasks) per interval.
pub(crate) const RESPLIT_MIN_INTERVAL: std::time::Duration = std::time::Duration::from_secs(2);

/// The shortest wait between two `monitor` calls a connector may ask for (the WIT says so).
const MONITOR_MIN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// A reply to whoever asked.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, HerderError>>;

/// Where a connector being started comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Created now (REST, a connector file): a bad config is refused and nothing is kept.
    Created,
    /// Stored by an earlier run: a config that no longer checks out (say its plugin was
    /// removed) is kept, FAILED with the reason, so it is not lost.
    Stored,
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
            | Command::Delete { reply } => {
                let _ = reply.send(Err(error));
            }
            Command::Restart { reply, .. } => {
                let _ = reply.send(Err(error));
            }
            Command::AlterOffsets { reply, .. } | Command::ResetOffsets { reply } => {
                let _ = reply.send(Err(error));
            }
            Command::Shutdown { reply } => {
                let _ = reply.send((0, 0));
            }
            Command::PluginsChanged => {}
        }
    }
}

/// The control loop's handle on an actor.
pub(crate) struct ActorHandle {
    pub commands: mpsc::UnboundedSender<Command>,
}

/// Start the actor of connector `config.name`; it does nothing until its first command.
pub(crate) fn spawn(
    shared: Arc<Shared>,
    config: ConnectorConfig,
    snapshot: Arc<Snapshot>,
    control: mpsc::UnboundedSender<Message>,
) -> ActorHandle {
    let (commands, queue) = mpsc::unbounded_channel();
    let actor = Actor {
        name: config.name.clone(),
        shared,
        config,
        target: TargetState::Running,
        failure: None,
        retrying: None,
        prepared: None,
        instance: None,
        tasks: Vec::new(),
        topics: ActiveTopics::default(),
        reconfigure: Arc::new(Notify::new()),
        split_failures: VecDeque::new(),
        retry_at: None,
        resplit_allowed: tokio::time::Instant::now(),
        monitor_at: None,
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

struct Actor {
    name: String,
    shared: Arc<Shared>,
    /// The config as the operator gave it.
    config: ConnectorConfig,
    target: TargetState,
    /// Why the connector is FAILED; it runs no tasks until restarted or given a new config.
    failure: Option<String>,
    /// Why the last split failed retriably, while a retry is scheduled.
    retrying: Option<String>,
    prepared: Option<Arc<Prepared>>,
    /// The connector instance that split the work, kept for the next split. Only ever used
    /// through `&mut self` (`get_mut`, never locked): the mutex is there because a store is
    /// `Send` but not `Sync`, and the actor's future holds `&self` across awaits.
    instance: Option<std::sync::Mutex<ConnectorInstance>>,
    tasks: Vec<TaskHandle>,
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
    snapshot: Arc<Snapshot>,
    control: mpsc::UnboundedSender<Message>,
}

impl Actor {
    async fn run(mut self, mut queue: mpsc::UnboundedReceiver<Command>) {
        loop {
            self.schedule_monitor();
            let reconfigure = Arc::clone(&self.reconfigure);
            let retry_at = self.retry_at;
            let resplit_allowed = self.resplit_allowed;
            let monitor_at = self.monitor_at;
            tokio::select! {
                command = queue.recv() => {
                    let Some(command) = command else {
                        // The control loop is gone: stop what runs.
                        stop_all(&mut self.tasks).await;
                        self.replace_instance(None).await;
                        return;
                    };
                    if self.handle(command).await == Flow::Exit {
                        // The connector is gone; until the control loop has heard (and drops
                        // this queue's sender), commands that were already on their way find it
                        // gone too.
                        while let Some(late) = queue.recv().await {
                            late.refuse(super::control::not_found(&self.name));
                        }
                        return;
                    }
                }
                // Requests wait (a stored permit) until the interval since the last is over.
                () = async { tokio::time::sleep_until(resplit_allowed).await; reconfigure.notified().await } => {
                    tracing::info!(connector = %self.name, "the connector asked for new task configs");
                    self.resplit_allowed = tokio::time::Instant::now() + RESPLIT_MIN_INTERVAL;
                    self.resplit().await;
                }
                () = async { tokio::time::sleep_until(retry_at.unwrap_or_else(tokio::time::Instant::now)).await }, if retry_at.is_some() => {
                    self.retry_at = None;
                    self.resplit().await;
                }
                () = async { tokio::time::sleep_until(monitor_at.unwrap_or_else(tokio::time::Instant::now)).await }, if monitor_at.is_some() => {
                    self.monitor().await;
                }
            }
        }
    }

    /// Arm the next `monitor` call one interval from now when the connector has just become
    /// one to monitor; disarm it when it no longer is.
    fn schedule_monitor(&mut self) {
        let monitored = self.target == TargetState::Running
            && self.failure.is_none()
            && self.retrying.is_none()
            && self
                .instance
                .as_mut()
                .is_some_and(|i| i.get_mut().is_ok_and(|i| i.is_created() && i.monitors()));
        match (monitored, self.monitor_at) {
            (false, _) => self.monitor_at = None,
            (true, None) => {
                self.monitor_at = Some(tokio::time::Instant::now() + self.monitor_interval())
            }
            (true, Some(_)) => {}
        }
    }

    fn monitor_interval(&self) -> std::time::Duration {
        self.prepared
            .as_ref()
            .map_or(self.shared.config.task.monitor_interval, |p| {
                p.settings.monitor_interval
            })
    }

    /// Call the connector's `monitor`: re-split when it reports a change, fail the connector
    /// when it fails for good, and set when it is called next.
    async fn monitor(&mut self) {
        let interval = self.monitor_interval();
        let Some(instance) = self.instance.as_mut() else {
            self.monitor_at = None;
            return;
        };
        let instance = instance.get_mut().unwrap_or_else(|e| e.into_inner());
        match instance.monitor().await {
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
                stop_all(&mut self.tasks).await;
                self.fail(e.to_string());
                self.publish();
            }
        }
    }

    /// Stop the connector instance that runs (if any) and keep `next` in its place.
    async fn replace_instance(&mut self, next: Option<ConnectorInstance>) {
        if let Some(old) = self.instance.take() {
            let mut old = old.into_inner().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = old.stop().await {
                tracing::warn!(connector = %self.name, "the connector's stop failed: {e}");
            }
        }
        self.instance = next.map(std::sync::Mutex::new);
        self.monitor_at = None;
    }

    async fn handle(&mut self, command: Command) -> Flow {
        match command {
            Command::Start {
                target,
                origin,
                reply,
            } => {
                let outcome = self.start(target, origin).await;
                let failed = outcome.is_err();
                if failed && origin == Origin::Created {
                    // Tasks may have started before the config could be stored.
                    self.retire().await;
                    // Nothing was created: the control loop forgets the name, then answers.
                    let _ = self.control.send(Message::Gone {
                        name: self.name.clone(),
                        persist: false,
                        then: Box::new(move |_| {
                            let _ = reply.send(outcome.map(|info| (true, info)));
                        }),
                    });
                    return Flow::Exit;
                }
                let _ = reply.send(outcome.map(|info| (true, info)));
            }
            Command::Reconfigure { config, reply } => {
                let outcome = self.reconfigure(config).await;
                let _ = reply.send(outcome.map(|info| (false, info)));
            }
            Command::SetTarget { target, reply } => {
                let _ = reply.send(self.set_target(target).await);
            }
            Command::Restart {
                include_tasks,
                only_failed,
                reply,
            } => {
                let _ = reply.send(self.restart(include_tasks, only_failed).await);
            }
            Command::RestartTask { id, reply } => {
                let _ = reply.send(self.restart_task(id).await);
            }
            Command::AlterOffsets { changes, reply } => {
                let outcome = async {
                    self.require_stopped()?;
                    offsets::alter(&self.shared, &self.name, &self.view(), &changes).await
                };
                let _ = reply.send(outcome.await);
            }
            Command::ResetOffsets { reply } => {
                let outcome = async {
                    self.require_stopped()?;
                    offsets::reset(&self.shared, &self.name, &self.view()).await
                };
                let _ = reply.send(outcome.await);
            }
            Command::PluginsChanged => self.follow_plugin().await,
            Command::Delete { reply } => {
                tracing::info!(connector = %self.name, "deleting connector {}: stopping its tasks", self.name);
                self.retire().await;
                let _ = self.control.send(Message::Gone {
                    name: self.name.clone(),
                    persist: true,
                    then: Box::new(move |stored| {
                        let _ = reply.send(stored);
                    }),
                });
                return Flow::Exit;
            }
            Command::Shutdown { reply } => {
                // Read once the tasks have stopped: their final counts and states.
                let metrics: Vec<_> = self.tasks.iter().map(|t| Arc::clone(&t.metrics)).collect();
                stop_all(&mut self.tasks).await;
                // The connector's `stop` gets the grace a task's does; past it, it is dropped.
                let grace = self.shared.config.task.shutdown_grace;
                if tokio::time::timeout(grace, self.replace_instance(None))
                    .await
                    .is_err()
                {
                    tracing::warn!(connector = %self.name, "the connector's stop did not return within {grace:?} (task.shutdown.graceful.timeout.ms); abandoned");
                }
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

    /// The connector is going away (deleted, or never created): stop its tasks, drop its
    /// instance, release its claim and withdraw its view.
    async fn retire(&mut self) {
        stop_all(&mut self.tasks).await;
        self.replace_instance(None).await;
        self.shared.capacity.release(&self.name);
        self.snapshot.remove(&self.name);
    }

    /// Prepare the connector from its config and start it per `target`.
    async fn start(
        &mut self,
        target: TargetState,
        origin: Origin,
    ) -> Result<ConnectorInfo, HerderError> {
        self.target = target;
        match prepare(&self.shared, &self.config, Arc::clone(&self.reconfigure)).await {
            Ok((prepared, mut instance)) => {
                if let Err(e) = self.admit(&prepared, target) {
                    discard(&self.name, &mut instance).await;
                    if origin == Origin::Created {
                        return Err(e);
                    }
                    self.fail(e.to_string());
                } else {
                    self.prepared = Some(Arc::new(prepared));
                    self.replace_instance(Some(instance)).await;
                    self.start_tasks();
                }
            }
            Err(NotPrepared::Invalid(problems)) => {
                let message = problems_message(&self.name, &problems);
                if origin == Origin::Created {
                    return Err(HerderError::BadRequest(message));
                }
                tracing::error!(connector = %self.name, "cannot restore the stored connector: {message}");
                self.fail(message);
            }
            Err(NotPrepared::Retry {
                prepared,
                instance,
                error,
            }) => {
                self.prepared = Some(Arc::new(*prepared));
                self.replace_instance(Some(*instance)).await;
                self.split_failed(error);
            }
        }
        if origin == Origin::Created {
            self.store().await?;
        }
        // Published once stored: a connector that could not be stored was never created.
        self.publish();
        Ok(info_of(&self.name, &self.view()))
    }

    /// A new config: checked (and its tasks admitted) before the running one is touched.
    async fn reconfigure(&mut self, config: ConnectorConfig) -> Result<ConnectorInfo, HerderError> {
        let target = self.target;
        let outcome = prepare(&self.shared, &config, Arc::clone(&self.reconfigure)).await;
        let (prepared, instance, retry) = match outcome {
            Ok((prepared, mut instance)) => {
                if let Err(e) = self.admit(&prepared, target) {
                    discard(&config.name, &mut instance).await;
                    return Err(e);
                }
                (prepared, instance, None)
            }
            Err(NotPrepared::Invalid(problems)) => {
                return Err(HerderError::BadRequest(problems_message(
                    &config.name,
                    &problems,
                )));
            }
            Err(NotPrepared::Retry {
                prepared,
                instance,
                error,
            }) => (*prepared, *instance, Some(error)),
        };
        stop_all(&mut self.tasks).await;
        self.config = config;
        self.failure = None;
        self.retrying = None;
        self.retry_at = None;
        self.split_failures.clear();
        self.prepared = Some(Arc::new(prepared));
        self.replace_instance(Some(instance)).await;
        match retry {
            Some(error) => self.split_failed(error),
            None => self.start_tasks(),
        }
        // What runs is what reads show, stored or not.
        self.publish();
        self.store().await?;
        Ok(info_of(&self.name, &self.view()))
    }

    /// After a change in the plugin directory: restart on the build `connector.class` (and
    /// `connector.plugin.version`) now resolve to, if it is another one, offsets kept. A
    /// connector whose plugin left the directory keeps running on the build it loaded.
    async fn follow_plugin(&mut self) {
        let found = self
            .shared
            .registry
            .find(&self.config.plugin, self.config.plugin_version.as_deref());
        let running = self.prepared.as_ref().map(|p| Arc::clone(&p.plugin));
        let new = match (found, running) {
            (Some(new), Some(old)) if same_build(&new, &old) => return,
            (None, Some(old)) => {
                tracing::warn!(connector = %self.name, "plugin {} {} left the plugin directory; the connector keeps running on the build it loaded until it is restarted", old.spec.name, old.spec.version);
                return;
            }
            (None, None) => return,
            (Some(new), old) => {
                tracing::info!(connector = %self.name, "plugin {} changed ({} -> {} from {}): restarting the connector on it", new.spec.name, old.map_or_else(|| "missing".to_owned(), |o| o.spec.version.clone()), new.spec.version, new.path.display());
                new
            }
        };
        if let Err(e) = self.reconfigure(self.config.clone()).await {
            tracing::error!(connector = %self.name, "cannot restart on plugin {} {}: {e}; the connector keeps running as it was", new.spec.name, new.spec.version);
        }
    }

    async fn set_target(&mut self, target: TargetState) -> Result<(), HerderError> {
        // Tasks are started below only for a connector that is not FAILED, and only if they
        // (still) fit.
        if target != TargetState::Stopped
            && self.tasks.is_empty()
            && self.failure.is_none()
            && let Some(prepared) = self.prepared.clone()
        {
            self.admit(&prepared, target)?;
        }
        self.target = target;
        match target {
            TargetState::Stopped => {
                stop_all(&mut self.tasks).await;
                self.shared.capacity.release(&self.name);
            }
            TargetState::Running | TargetState::Paused => {
                if self.retrying.is_some() && self.retry_at.is_none() {
                    // A split retry that came due while STOPPED is tried now.
                    self.retry_at = Some(tokio::time::Instant::now());
                }
                if self.tasks.is_empty() {
                    self.start_tasks();
                } else {
                    let control = self.control_for_target();
                    for task in &self.tasks {
                        let _ = task.control.send(control);
                    }
                }
            }
        }
        self.publish();
        self.store().await
    }

    /// Restart the connector (re-check its config and re-split it with a new instance); with
    /// `include_tasks`, also its tasks (only the failed ones with `only_failed`).
    async fn restart(
        &mut self,
        include_tasks: bool,
        only_failed: bool,
    ) -> Result<ConnectorStatus, HerderError> {
        let connector_failed = self.failure.is_some() || self.retrying.is_some();
        let restart_connector = !only_failed || connector_failed;
        let mut restarted_tasks = Vec::new();
        if restart_connector {
            match prepare(&self.shared, &self.config, Arc::clone(&self.reconfigure)).await {
                Ok((prepared, mut instance)) => {
                    // A new split that does not fit is refused; what runs keeps running.
                    if let Err(e) = self.admit(&prepared, self.target) {
                        discard(&self.name, &mut instance).await;
                        return Err(e);
                    }
                    let changed = self.prepared.as_ref().is_none_or(|p| {
                        p.task_configs != prepared.task_configs
                            || !same_build(&p.plugin, &prepared.plugin)
                    });
                    // The old connector instance stops after the tasks it split for (which
                    // keep running only when the new split is the same).
                    if changed || connector_failed {
                        stop_all(&mut self.tasks).await;
                    }
                    self.prepared = Some(Arc::new(prepared));
                    self.replace_instance(Some(instance)).await;
                    self.failure = None;
                    self.retrying = None;
                    self.retry_at = None;
                    self.split_failures.clear();
                }
                Err(NotPrepared::Invalid(problems)) => {
                    stop_all(&mut self.tasks).await;
                    self.shared.capacity.release(&self.name);
                    self.fail(problems_message(&self.name, &problems));
                }
                Err(NotPrepared::Retry {
                    prepared,
                    instance,
                    error,
                }) => {
                    stop_all(&mut self.tasks).await;
                    self.prepared = Some(Arc::new(*prepared));
                    self.replace_instance(Some(*instance)).await;
                    self.failure = None;
                    // A restart asked for by the operator starts the retry budget afresh.
                    self.split_failures.clear();
                    self.split_failed(error);
                }
            }
        }
        let runnable = self.target != TargetState::Stopped
            && self.failure.is_none()
            && self.retrying.is_none();
        if include_tasks && runnable {
            let count = self.prepared.as_ref().map_or(0, |p| p.task_configs.len());
            for id in 0..count as u32 {
                let failed = self
                    .tasks
                    .get(id as usize)
                    .is_none_or(|t| matches!(t.metrics.state(), TaskState::Failed(_)));
                if only_failed && !failed {
                    continue;
                }
                self.restart_one(id).await;
                restarted_tasks.push(id);
            }
        } else if self.tasks.is_empty() && runnable {
            self.start_tasks();
        }
        self.publish();
        // Kafka Connect answers with the restart plan: what is restarted says RESTARTING (its
        // state moves on from there; the status endpoint shows where it is).
        let mut status = status_of(&self.shared, &self.name, &self.view());
        if restart_connector && self.failure.is_none() {
            status.connector.state = "RESTARTING";
        }
        for task in &mut status.tasks {
            if restarted_tasks.contains(&task.id) {
                task.state.state = "RESTARTING";
            }
        }
        Ok(status)
    }

    async fn restart_task(&mut self, id: u32) -> Result<(), HerderError> {
        if id as usize >= self.tasks.len() {
            return Err(HerderError::NotFound(format!(
                "Task {}-{id} not found",
                self.name
            )));
        }
        self.restart_one(id).await;
        self.publish();
        Ok(())
    }

    /// Stop task `id` (if it runs) and start it again from its current task config.
    async fn restart_one(&mut self, id: u32) {
        let Some(prepared) = self.prepared.clone() else {
            return;
        };
        if let Some(task) = self.tasks.get_mut(id as usize) {
            task.stop().await;
        }
        let handle = spawn_task(
            &self.shared,
            &self.name,
            &prepared,
            id,
            self.control_for_target(),
            &self.topics,
        );
        if (id as usize) < self.tasks.len() {
            self.tasks[id as usize] = handle;
        } else {
            self.tasks.push(handle);
        }
    }

    /// Ask the kept connector instance for task configs again (the connector asked for it, or
    /// a retriable failure's backoff is over). Changed configs restart this connector's tasks
    /// (each flushes and commits its offsets first); unchanged ones change nothing.
    async fn resplit(&mut self) {
        if self.target == TargetState::Stopped || self.failure.is_some() {
            return;
        }
        let (Some(prepared), Some(instance)) = (self.prepared.clone(), self.instance.as_mut())
        else {
            return;
        };
        let instance = instance.get_mut().unwrap_or_else(|e| e.into_inner());
        match split(&self.name, &prepared, instance).await {
            Ok(configs) => {
                let was_retrying = self.retrying.take().is_some();
                self.retry_at = None;
                self.split_failures.clear();
                if configs == prepared.task_configs && !was_retrying {
                    tracing::info!(connector = %self.name, "the task configs are unchanged; the tasks keep running");
                    return;
                }
                let mut next = (*prepared).clone();
                next.task_configs = configs;
                if let Err(e) = self.admit(&next, self.target) {
                    stop_all(&mut self.tasks).await;
                    self.fail(e.to_string());
                    self.publish();
                    return;
                }
                tracing::info!(connector = %self.name, tasks = next.task_configs.len(), "the task configs changed; restarting the connector's tasks");
                stop_all(&mut self.tasks).await;
                self.prepared = Some(Arc::new(next));
                self.start_tasks();
            }
            Err(e) if e.is_retriable() => {
                stop_all(&mut self.tasks).await;
                self.split_failed(e.to_string());
            }
            Err(e) => {
                stop_all(&mut self.tasks).await;
                self.shared.capacity.release(&self.name);
                self.fail(e.to_string());
            }
        }
        self.publish();
    }

    /// A retriable split failure: retry under the restart policy, or give up past it.
    fn split_failed(&mut self, error: String) {
        let error = self.redact(&error);
        let Some(policy) = self.prepared.as_ref().map(|p| p.restart) else {
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
        match &self.prepared {
            Some(p) => p.resolved.redact(text),
            None => text.to_owned(),
        }
    }

    /// The connector is FAILED: it runs no tasks (the caller has stopped them) and claims no
    /// capacity until restarted or given a new config.
    fn fail(&mut self, message: String) {
        let message = self.redact(&message);
        tracing::error!(connector = %self.name, "connector failed: {message}");
        self.shared.capacity.release(&self.name);
        self.failure = Some(message);
        self.retrying = None;
        self.retry_at = None;
    }

    /// Start every task of the current split per the target state (none while STOPPED,
    /// FAILED or waiting to retry the split).
    fn start_tasks(&mut self) {
        if self.target == TargetState::Stopped || self.failure.is_some() || self.retrying.is_some()
        {
            return;
        }
        let Some(prepared) = self.prepared.clone() else {
            return;
        };
        let control = self.control_for_target();
        self.tasks = (0..prepared.task_configs.len() as u32)
            .map(|id| {
                spawn_task(
                    &self.shared,
                    &self.name,
                    &prepared,
                    id,
                    control,
                    &self.topics,
                )
            })
            .collect();
    }

    fn control_for_target(&self) -> Control {
        if self.target == TargetState::Paused {
            Control::Pause
        } else {
            Control::Run
        }
    }

    /// Record what `prepared`'s tasks claim (nothing while `target` is STOPPED), or refuse with
    /// what does not fit and which keys to change.
    fn admit(&self, prepared: &Prepared, target: TargetState) -> Result<(), HerderError> {
        if target == TargetState::Stopped {
            self.shared.capacity.release(&self.name);
            return Ok(());
        }
        self.shared
            .capacity
            .admit(&self.name, claim_of(prepared))
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

    /// Store the config and target state; acknowledged once written.
    async fn store(&self) -> Result<(), HerderError> {
        let (done, stored) = oneshot::channel();
        let _ = self.control.send(Message::Store {
            name: self.name.clone(),
            pairs: self.config.pairs.clone(),
            target: self.target,
            done,
        });
        stored.await.unwrap_or_else(|_| {
            Err(HerderError::Internal(
                "the worker is stopping; the change was not stored".into(),
            ))
        })
    }

    fn view(&self) -> ConnectorView {
        ConnectorView {
            config: self.config.clone(),
            target: self.target,
            failure: self.failure.clone(),
            retrying: self.retrying.clone(),
            prepared: self.prepared.clone(),
            tasks: self.tasks.iter().map(|t| Arc::clone(&t.metrics)).collect(),
            topics: Arc::clone(&self.topics),
        }
    }

    fn publish(&self) {
        self.snapshot.publish(&self.name, self.view());
    }
}

/// Stop a connector instance that will not run (refused, or replaced before it ran).
async fn discard(name: &str, instance: &mut ConnectorInstance) {
    if let Err(e) = instance.stop().await {
        tracing::warn!(connector = %name, "the connector's stop failed: {e}");
    }
}

/// Whether two loaded plugins are the same build: the same file with the same content (a file
/// rescanned after a touch or an atomic copy of the same bytes is a new `Plugin` value).
fn same_build(a: &crate::plugin::Plugin, b: &crate::plugin::Plugin) -> bool {
    a.sha256 == b.sha256 && a.path == b.path
}
