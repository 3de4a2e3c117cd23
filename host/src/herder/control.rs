//! The control loop: one tokio task that takes the herder's requests and its actors' events as
//! messages, in order. It owns which connectors exist (one actor each) and the stored configs
//! and target states; it never waits on an actor, so a slow plugin holds up only its own
//! connector's later requests. The exception is shutdown, which waits for every actor to stop
//! its tasks.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::HerderError;
use super::actor::{self, ActorHandle, Command, Origin, Reply};
use super::status::ConnectorInfo;
use super::store::{ConfigStore, TargetState};
use super::view::Snapshot;
use crate::config::ConnectorConfig;
use crate::worker::{Shared, problems_message};

/// What the control loop is told: requests (from the herder's API) and events (from actors).
pub(crate) enum Message {
    /// The plugins are loaded: watch the directory and restore the stored connectors.
    Load {
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
    /// An actor's event: store this connector's config and target state, then say so.
    Store {
        name: String,
        pairs: Vec<(String, String)>,
        target: TargetState,
        done: oneshot::Sender<Result<(), HerderError>>,
    },
    /// An actor's event: its connector is gone (deleted, or never created). The loop forgets
    /// it (and stores that with `persist`), then calls `then` with the outcome, so whoever
    /// asked hears back only once the name is free.
    Gone {
        name: String,
        persist: bool,
        then: Box<dyn FnOnce(Result<(), HerderError>) + Send>,
    },
}

/// One connector as the control loop knows it.
struct Slot {
    actor: ActorHandle,
    /// Set once a delete was asked for: the name is not free until the actor is gone.
    deleting: bool,
}

/// The loop's state.
pub(crate) struct ControlLoop {
    shared: Arc<Shared>,
    snapshot: Arc<Snapshot>,
    store: ConfigStore,
    /// Every connector, by name, including those being created or deleted.
    slots: BTreeMap<String, Slot>,
    /// What is stored, by name (configs as given, and target states).
    stored: BTreeMap<String, (Vec<(String, String)>, TargetState)>,
    /// Its own sender, for actors' events.
    messages: mpsc::UnboundedSender<Message>,
    /// Set to true once the stored connectors are back (taken by the first `Load`).
    started: Option<watch::Sender<bool>>,
    /// The plugin directory's watcher, and the task that turns its changes into messages.
    watcher: Vec<JoinHandle<()>>,
}

impl ControlLoop {
    /// Start the loop; its sender is how the herder reaches it.
    pub fn spawn(
        shared: Arc<Shared>,
        snapshot: Arc<Snapshot>,
        store: ConfigStore,
        started: watch::Sender<bool>,
    ) -> mpsc::UnboundedSender<Message> {
        let (messages, inbox) = mpsc::unbounded_channel();
        let control = ControlLoop {
            shared,
            snapshot,
            store,
            slots: BTreeMap::new(),
            stored: BTreeMap::new(),
            messages: messages.clone(),
            started: Some(started),
            watcher: Vec::new(),
        };
        tokio::spawn(control.run(inbox));
        messages
    }

    async fn run(mut self, mut inbox: mpsc::UnboundedReceiver<Message>) {
        while let Some(message) = inbox.recv().await {
            match message {
                Message::Load { reply } => self.load(reply),
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
                Message::Store { .. } | Message::Gone { .. } => self.event(message).await,
            }
        }
    }

    /// An actor's event.
    async fn event(&mut self, message: Message) {
        match message {
            Message::Store {
                name,
                pairs,
                target,
                done,
            } => {
                self.stored.insert(name, (pairs, target));
                let _ = done.send(self.persist().await);
            }
            Message::Gone {
                name,
                persist,
                then,
            } => {
                self.slots.remove(&name);
                // Whatever was stored for it goes (a create whose write failed left an entry).
                let was_stored = self.stored.remove(&name).is_some();
                let outcome = if persist || was_stored {
                    self.persist().await
                } else {
                    Ok(())
                };
                then(outcome);
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
        self.shared.capacity.release(name);
    }

    /// Start connector `config.name`'s actor and ask it to start the connector.
    fn spawn_actor(
        &mut self,
        config: ConnectorConfig,
        target: TargetState,
        origin: Origin,
        reply: Reply<(bool, ConnectorInfo)>,
    ) {
        let name = config.name.clone();
        let handle = actor::spawn(
            Arc::clone(&self.shared),
            config,
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
    /// them at once, each in its own actor. The worker is marked started (and `reply` answered)
    /// once each has come back (running, or FAILED with the reason); the loop goes on taking
    /// messages meanwhile, so a shutdown during start-up is not held up.
    fn load(&mut self, reply: oneshot::Sender<Result<(), String>>) {
        let registry = &self.shared.registry;
        for old in self.watcher.drain(..) {
            old.abort();
        }
        self.watcher
            .push(registry.watch(self.shared.config.plugin_scan_interval));
        let mut changes = registry.subscribe();
        let messages = self.messages.clone();
        self.watcher.push(tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                if messages.send(Message::PluginsChanged).is_err() {
                    return;
                }
            }
        }));
        let stored = match self.store.load() {
            Ok(stored) => stored,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let mut restoring = Vec::new();
        for (name, (pairs, target)) in stored {
            match ConnectorConfig::from_pairs(pairs.clone()) {
                Ok(config) => {
                    let (reply, restored) = oneshot::channel();
                    self.spawn_actor(config, target, Origin::Stored, reply);
                    self.stored.insert(name, (pairs, target));
                    restoring.push(restored);
                }
                Err(problems) => {
                    tracing::error!(connector = %name, "stored config is invalid: {}; it is kept in the file until a new config for {name} replaces it", problems_message(&name, &problems));
                    // Kept, so the next write of the file does not lose it.
                    self.stored.insert(name, (pairs, target));
                }
            }
        }
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
        let all = futures::future::join_all(stopping);
        tokio::pin!(all);
        let summary = loop {
            tokio::select! {
                summary = &mut all => break summary,
                Some(message) = inbox.recv() => self.event(message).await,
            }
        };
        for watcher in self.watcher.drain(..) {
            watcher.abort();
        }
        let producer = Arc::clone(&self.shared.producer);
        let _ = tokio::task::spawn_blocking(move || producer.flush(Duration::from_secs(10))).await;
        summary
    }

    /// Write what is stored (off the async threads; the loop waits, so writes stay in order).
    async fn persist(&self) -> Result<(), HerderError> {
        let store = self.store.clone();
        let stored = self.stored.clone();
        tokio::task::spawn_blocking(move || {
            store.save(
                stored
                    .iter()
                    .map(|(name, (pairs, target))| (name, pairs.as_slice(), *target)),
            )
        })
        .await
        .map_err(|e| HerderError::Internal(e.to_string()))?
        .map_err(HerderError::Internal)
    }
}

/// Answer a request that comes while the worker stops.
fn refuse_stopping(message: Message) {
    let stopping = || HerderError::Internal("the worker is stopping".into());
    match message {
        Message::Load { reply } => {
            let _ = reply.send(Err("the worker is stopping".into()));
        }
        Message::Create { reply, .. } | Message::PutConfig { reply, .. } => {
            let _ = reply.send(Err(stopping()));
        }
        Message::Connector { command, .. } => command.refuse(stopping()),
        Message::Shutdown { reply } => {
            let _ = reply.send(Vec::new());
        }
        Message::Store { done, .. } => {
            let _ = done.send(Err(stopping()));
        }
        Message::Gone { then, .. } => then(Ok(())),
        // Unanswered: a stopping worker is not healthy.
        Message::PluginsChanged | Message::Ping { .. } => {}
    }
}

pub(crate) fn not_found(name: &str) -> HerderError {
    HerderError::NotFound(format!("Connector {name} not found"))
}
