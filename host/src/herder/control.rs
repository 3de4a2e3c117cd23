//! The control loop: one tokio task that takes the herder's requests, the config log's events
//! and its actors' events as messages, in order. It owns which connectors exist (one actor
//! each) and hands each stored record to its connector's actor; it never waits on an actor, so a slow plugin holds up only its own
//! connector's later requests. The exception is shutdown, which waits for every actor to stop
//! its tasks.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::actor::{self, ActorHandle, Command, Origin, Reply, Seed, Share};
use super::status::ConnectorInfo;
use super::view::Snapshot;
use super::{HerderError, Runtime};
use crate::config::ConnectorConfig;
use crate::distributed::protocol::Work;
use crate::storage::{ConfigEvent, ConfigLog, ConfigRecord, ConfigState, TargetState};
use crate::worker::problems_message;

/// What the control loop is told: requests (from the herder's API) and events (from actors).
pub(crate) enum Message {
    /// The plugins are loaded: watch the directory and restore the stored connectors.
    /// `loaded` is answered once every stored connector has its actor (changes may come
    /// then), `reply` once each has come back (running, or FAILED with the reason).
    Load {
        loaded: oneshot::Sender<Result<(), String>>,
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// Create a connector; `Conflict` if the name is taken.
    Create {
        config: ConnectorConfig,
        target: TargetState,
        reply: Reply<(bool, ConnectorInfo)>,
    },
    /// Create or replace a connector's config.
    PutConfig {
        config: ConnectorConfig,
        reply: Reply<(bool, ConnectorInfo)>,
    },
    /// The plugin directory changed: every connector checks whether its plugin did.
    PluginsChanged,
    /// Answer at once: `GET /health` asks whether the loop takes requests.
    Ping { reply: oneshot::Sender<()> },
    /// A command for one connector's actor; `NotFound` if there is no such connector.
    Connector { name: String, command: Command },
    /// Stop every connector's tasks (the stored state stays); replies each connector's records
    /// done and failed tasks.
    Shutdown {
        reply: oneshot::Sender<Vec<(String, u64, usize)>>,
    },
    /// The config log stored a record: the loop's state follows it, and the connector's
    /// actor applies it.
    Stored(ConfigEvent),
    /// An actor's event: a delete of its connector was not stored, so the connector stays and
    /// takes commands again.
    DeleteRefused { name: String },
    /// Distributed mode: run `work` on this worker from now on (everything it runs, after a
    /// rebalance), once the loop has seen every config event up to `offset` (the assignment's
    /// config is then the loop's). Answered once every connector's actor has stopped what it
    /// no longer runs and started what is new.
    Assign {
        work: Work,
        offset: u64,
        reply: oneshot::Sender<()>,
    },
    /// An actor's event: its connector is gone (deleted, or never created). The loop forgets
    /// it, then calls `then`, so whoever asked hears back only once the name is free.
    Gone {
        name: String,
        then: Box<dyn FnOnce() + Send>,
    },
}

/// One connector as the control loop knows it.
struct Slot {
    actor: ActorHandle,
    /// Set once a delete was asked for: the name is not free until the actor is gone.
    deleting: bool,
}

/// The loop's state.
pub(crate) struct ControlLoop<W: Runtime> {
    worker: Arc<W>,
    snapshot: Arc<Snapshot>,
    log: Arc<dyn ConfigLog>,
    /// Every connector, by name, including those being created or deleted.
    slots: BTreeMap<String, Slot>,
    /// Its own sender, for actors' events.
    messages: mpsc::UnboundedSender<Message>,
    /// Set to true once the stored connectors are back (taken by the first `Load`).
    started: Option<watch::Sender<bool>>,
    /// Distributed mode: what this worker runs (its assignment); `None` in standalone mode,
    /// where it runs everything.
    work: Option<Work>,
    /// The offset of the last config event the loop has seen.
    seen: u64,
    /// An assignment waiting for the loop to see the config it was made at.
    waiting: Option<(Work, u64, Vec<oneshot::Sender<()>>)>,
    /// The plugin directory's watcher, and the task that turns its changes into messages.
    watcher: Vec<JoinHandle<()>>,
}

impl<W: Runtime> ControlLoop<W> {
    /// Start the loop; its sender is how the herder reaches it. It follows `log` from now on.
    /// `distributed`: the worker runs only what its assignment gives it (nothing until the
    /// first), and follows connectors other workers store.
    pub fn spawn(
        worker: Arc<W>,
        snapshot: Arc<Snapshot>,
        log: Arc<dyn ConfigLog>,
        started: watch::Sender<bool>,
        distributed: bool,
    ) -> mpsc::UnboundedSender<Message> {
        let (messages, inbox) = mpsc::unbounded_channel();
        let mut events = log.subscribe();
        let forward = messages.clone();
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                if forward.send(Message::Stored(event)).is_err() {
                    return;
                }
            }
        });
        let control = ControlLoop {
            worker,
            snapshot,
            log,
            slots: BTreeMap::new(),
            messages: messages.clone(),
            started: Some(started),
            watcher: Vec::new(),
            work: distributed.then(Work::default),
            seen: 0,
            waiting: None,
        };
        tokio::spawn(control.run(inbox));
        messages
    }

    async fn run(mut self, mut inbox: mpsc::UnboundedReceiver<Message>) {
        while let Some(message) = inbox.recv().await {
            match message {
                Message::Load { loaded, reply } => self.load(loaded, reply),
                Message::Create {
                    config,
                    target,
                    reply,
                } => {
                    if self.slots.contains_key(&config.name) {
                        let _ = reply.send(Err(HerderError::Conflict(format!(
                            "Connector {} already exists",
                            config.name
                        ))));
                        continue;
                    }
                    self.spawn_actor(config, target, Origin::Created, reply);
                }
                Message::PutConfig { config, reply } => match self.slots.get(&config.name) {
                    Some(slot) if slot.deleting => {
                        let _ = reply.send(Err(HerderError::Conflict(format!(
                            "Connector {} is being deleted; try again once it is gone",
                            config.name
                        ))));
                    }
                    Some(slot) => {
                        let command = Command::Reconfigure { config, reply };
                        if let Err(refused) = slot.actor.commands.send(command) {
                            // Its actor ended without saying so (a worker bug): start afresh.
                            let name = match refused.0 {
                                Command::Reconfigure { config, reply } => {
                                    let name = config.name.clone();
                                    self.forget_dead(&name);
                                    self.spawn_actor(
                                        config,
                                        TargetState::Running,
                                        Origin::Created,
                                        reply,
                                    );
                                    name
                                }
                                other => {
                                    other.refuse(HerderError::Internal(
                                        "the connector's actor ended".into(),
                                    ));
                                    continue;
                                }
                            };
                            tracing::warn!(connector = %name, "the connector's actor had ended; it was started again");
                        }
                    }
                    None => self.spawn_actor(config, TargetState::Running, Origin::Created, reply),
                },
                Message::Ping { reply } => {
                    let _ = reply.send(());
                }
                Message::PluginsChanged => {
                    for slot in self.slots.values().filter(|s| !s.deleting) {
                        let _ = slot.actor.commands.send(Command::PluginsChanged);
                    }
                }
                Message::Connector { name, command } => match self.slots.get_mut(&name) {
                    // Once a delete is under way the connector is gone for every later command.
                    Some(slot) if slot.deleting => command.refuse(not_found(&name)),
                    Some(slot) => {
                        slot.deleting = matches!(command, Command::Delete { .. });
                        if let Err(refused) = slot.actor.commands.send(command) {
                            refused.0.refuse(not_found(&name));
                            self.forget_dead(&name);
                        }
                    }
                    None => command.refuse(not_found(&name)),
                },
                Message::Shutdown { reply } => {
                    let summary = self.shutdown(&mut inbox).await;
                    let _ = reply.send(summary);
                    return;
                }
                Message::Assign {
                    work,
                    offset,
                    reply,
                } => {
                    let mut replies = vec![reply];
                    if let Some((_, _, earlier)) = self.waiting.take() {
                        // Superseded before it took effect: answered with this one.
                        replies.extend(earlier);
                    }
                    self.waiting = Some((work, offset, replies));
                    self.assign_if_seen();
                }
                Message::Stored(_) | Message::Gone { .. } | Message::DeleteRefused { .. } => {
                    self.event(message)
                }
            }
        }
    }

    /// A stored record, or an actor's event.
    fn event(&mut self, message: Message) {
        match message {
            Message::Stored(event) => {
                self.seen = self.seen.max(event.offset);
                let name = event.record.connector().to_owned();
                match self.slots.get(&name) {
                    Some(slot) => {
                        let _ = slot.actor.commands.send(Command::Stored(event));
                    }
                    // Distributed: a connector another worker stored (once the plugins are
                    // loaded; `Load` restores everything stored until then).
                    None if self.work.is_some()
                        && self.started.is_none()
                        && matches!(event.record, ConfigRecord::Connector { .. }) =>
                    {
                        self.follow(&name);
                    }
                    None => {}
                }
                self.assign_if_seen();
            }
            Message::Gone { name, then } => {
                self.slots.remove(&name);
                then();
                if self.work.is_some() && self.started.is_none() {
                    // Its actor may have gone (a create refused here) while another worker's
                    // record of the same name was on its way to it.
                    self.follow(&name);
                }
            }
            Message::DeleteRefused { name } => {
                if let Some(slot) = self.slots.get_mut(&name) {
                    slot.deleting = false;
                }
            }
            other => refuse_stopping(other),
        }
    }

    /// Forget connector `name`, whose actor is gone without saying so (it can only have
    /// panicked: a worker bug): its name is free again and its claim released. What was stored
    /// stays, so a restart brings it back.
    fn forget_dead(&mut self, name: &str) {
        tracing::error!(connector = %name, "the connector's actor ended unexpectedly; the connector is forgotten until the worker restarts");
        self.slots.remove(name);
        self.snapshot.remove(name);
        self.worker.capacity().release(name);
    }

    /// What of connector `name` runs here.
    fn share_of(&self, name: &str) -> Share {
        match &self.work {
            None => Share::All,
            Some(work) => Share::Assigned {
                connector: work.connectors.contains(name),
                tasks: work
                    .tasks
                    .iter()
                    .filter(|t| t.connector == name)
                    .map(|t| t.task)
                    .collect(),
            },
        }
    }

    /// Distributed: give connector `name` an actor if the log has it and it has none, started
    /// from the log's state as this worker has read it (later events are applied on top).
    fn follow(&mut self, name: &str) {
        if self.slots.contains_key(name) {
            return;
        }
        let state = match self.log.current() {
            Ok(state) => state,
            Err(e) => {
                tracing::error!(connector = %name, "cannot read the config log to follow connector {name}: {e}");
                return;
            }
        };
        self.restore(name, &state, None);
    }

    /// Start an actor for connector `name` as `state` has it (nothing if it has none); its
    /// answer to `reply`, once started.
    fn restore(
        &mut self,
        name: &str,
        state: &ConfigState,
        reply: Option<Reply<(bool, ConnectorInfo)>>,
    ) {
        let Some(connector) = state.connectors.get(name) else {
            return;
        };
        match ConnectorConfig::from_pairs(connector.config.clone()) {
            Ok(config) => {
                let origin = Origin::Stored {
                    split: connector.tasks.clone(),
                    build: connector.tasks_build.clone(),
                };
                let reply = reply.unwrap_or_else(|| oneshot::channel().0);
                self.spawn_actor_at(config, connector.target, origin, reply, state.offset);
            }
            Err(problems) => {
                // Kept in the log until a new config for it replaces it.
                tracing::error!(connector = %name, "stored config is invalid: {}; it is kept until a new config for {name} replaces it", problems_message(name, &problems));
            }
        }
    }

    /// Apply the waiting assignment if the loop has seen the config it was made at: each
    /// actor whose share changes is told; answered once all are done.
    fn assign_if_seen(&mut self) {
        let Some((_, offset, _)) = &self.waiting else {
            return;
        };
        if self.seen < *offset {
            return;
        }
        let Some((work, _, replies)) = self.waiting.take() else {
            return;
        };
        self.work = Some(work);
        let mut done = Vec::new();
        // Connectors being deleted too: until their removal is stored they run, and must stop
        // what is no longer this worker's.
        for (name, slot) in &self.slots {
            let (reply, assigned) = oneshot::channel();
            let share = self.share_of(name);
            if slot
                .actor
                .commands
                .send(Command::Assign { share, reply })
                .is_ok()
            {
                done.push(assigned);
            }
        }
        tokio::spawn(async move {
            futures::future::join_all(done).await;
            for reply in replies {
                let _ = reply.send(());
            }
        });
    }

    /// Start connector `config.name`'s actor and ask it to start the connector.
    fn spawn_actor(
        &mut self,
        config: ConnectorConfig,
        target: TargetState,
        origin: Origin,
        reply: Reply<(bool, ConnectorInfo)>,
    ) {
        self.spawn_actor_at(config, target, origin, reply, 0);
    }

    /// [`Self::spawn_actor`] for a connector as the log has it at `applied`: later events
    /// about it are applied.
    fn spawn_actor_at(
        &mut self,
        config: ConnectorConfig,
        target: TargetState,
        origin: Origin,
        reply: Reply<(bool, ConnectorInfo)>,
        applied: u64,
    ) {
        let name = config.name.clone();
        let seed = Seed {
            share: self.share_of(&name),
            config,
            applied,
        };
        let handle = actor::spawn(
            Arc::clone(&self.worker),
            Arc::clone(&self.log),
            seed,
            Arc::clone(&self.snapshot),
            self.messages.clone(),
        );
        let _ = handle.commands.send(Command::Start {
            target,
            origin,
            reply,
        });
        self.slots.insert(
            name,
            Slot {
                actor: handle,
                deleting: false,
            },
        );
    }

    /// With the plugins loaded: watch the directory, and restore the stored connectors, all of
    /// them at once, each in its own actor, each from its stored split when it has one.
    /// `loaded` is answered at once (changes to any connector may come now: each waits only
    /// for its own connector's restore, in its actor's queue); the worker is marked started
    /// (and `reply` answered) once each has come back (running, or FAILED with the reason). The
    /// loop goes on taking messages meanwhile, so a shutdown during start-up is not held up.
    fn load(
        &mut self,
        loaded: oneshot::Sender<Result<(), String>>,
        reply: oneshot::Sender<Result<(), String>>,
    ) {
        for old in self.watcher.drain(..) {
            old.abort();
        }
        let messages = self.messages.clone();
        self.watcher = self.worker.watch_plugins(Box::new(move || {
            messages.send(Message::PluginsChanged).is_ok()
        }));
        let stored = match self.log.read() {
            Ok(stored) => stored,
            Err(e) => {
                let _ = loaded.send(Err(e.clone()));
                let _ = reply.send(Err(e));
                return;
            }
        };
        self.seen = self.seen.max(stored.offset);
        let mut restoring = Vec::new();
        for name in stored.connectors.keys() {
            if self.slots.contains_key(name) {
                // Already followed (distributed: another worker stored it meanwhile).
                continue;
            }
            let (reply, restored) = oneshot::channel();
            self.restore(name, &stored, Some(reply));
            restoring.push(restored);
        }
        let _ = loaded.send(Ok(()));
        let started = self.started.take();
        tokio::spawn(async move {
            futures::future::join_all(restoring).await;
            if let Some(started) = started {
                started.send_replace(true);
            }
            let _ = reply.send(Ok(()));
        });
    }

    /// Stop every connector's tasks at once and wait for them; then flush the producer. Actors'
    /// events are still served meanwhile (an actor may be storing a change when the shutdown
    /// comes); new requests are refused.
    async fn shutdown(
        &mut self,
        inbox: &mut mpsc::UnboundedReceiver<Message>,
    ) -> Vec<(String, u64, usize)> {
        let mut stopping = Vec::new();
        for (name, slot) in &self.slots {
            let (reply, stopped) = oneshot::channel();
            if slot
                .actor
                .commands
                .send(Command::Shutdown { reply })
                .is_ok()
            {
                let name = name.clone();
                stopping.push(async move {
                    let (done, failed) = stopped.await.unwrap_or((0, 0));
                    (name, done, failed)
                });
            }
        }
        // However plugins hang, the worker stops within this bound: tasks are told to stop at
        // once and each plugin call they wait on gets the shutdown grace (each task is aborted
        // past the grace and a margin); an actor busy in a plugin call hears the shutdown only
        // after it, so the whole is bounded here too.
        let bound = self.worker.shutdown_grace() + crate::worker::STOP_MARGIN;
        let mut all: futures::stream::FuturesUnordered<_> = stopping.into_iter().collect();
        let deadline = tokio::time::sleep(bound);
        tokio::pin!(deadline);
        let mut summary = Vec::new();
        let mut waiting: std::collections::BTreeSet<String> = self.slots.keys().cloned().collect();
        loop {
            use futures::StreamExt;
            tokio::select! {
                stopped = all.next() => match stopped {
                    Some(stopped) => {
                        waiting.remove(&stopped.0);
                        summary.push(stopped);
                    }
                    None => break,
                },
                Some(message) = inbox.recv() => self.event(message),
                () = &mut deadline => {
                    tracing::error!("connectors {} did not stop within {bound:?} (task.shutdown.graceful.timeout.ms and {:?}); their tasks end with the process, and what they did since their last commit is done again", waiting.iter().cloned().collect::<Vec<_>>().join(", "), crate::worker::STOP_MARGIN);
                    break;
                }
            }
        }
        summary.sort();
        for watcher in self.watcher.drain(..) {
            watcher.abort();
        }
        self.worker.flush().await;
        summary
    }
}

/// Answer a request that comes while the worker stops.
fn refuse_stopping(message: Message) {
    let stopping = || HerderError::Internal("the worker is stopping".into());
    match message {
        Message::Load { loaded, reply } => {
            let _ = loaded.send(Err("the worker is stopping".into()));
            let _ = reply.send(Err("the worker is stopping".into()));
        }
        Message::Create { reply, .. } | Message::PutConfig { reply, .. } => {
            let _ = reply.send(Err(stopping()));
        }
        Message::Connector { command, .. } => command.refuse(stopping()),
        Message::Shutdown { reply } => {
            let _ = reply.send(Vec::new());
        }
        Message::Gone { then, .. } => then(),
        Message::Assign { reply, .. } => {
            let _ = reply.send(());
        }
        Message::Stored(_) | Message::DeleteRefused { .. } => {}
        // Unanswered: a stopping worker is not healthy.
        Message::PluginsChanged | Message::Ping { .. } => {}
    }
}

pub(crate) fn not_found(name: &str) -> HerderError {
    HerderError::NotFound(format!("Connector {name} not found"))
}
