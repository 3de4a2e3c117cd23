//! The herder: decides what runs. It owns the worker's shared parts (through [`Shared`]) and
//! the lifecycle of connectors: create, reconfigure, pause, resume, stop, restart, delete, with
//! configs and target states persisted in the data directory (standalone) or on the cluster's
//! topics (distributed). Standalone, every task runs in this process; distributed, only what
//! the group's assignment gives this worker (`Herder::assign`, driven by
//! `crate::distributed::cluster`).
//!
//! - [`Herder`] is the handle REST, the CLI and tests use. Changes go as messages to the control
//!   loop (`control.rs`), which hands each connector's to its actor (`actor.rs`); reads are
//!   served from the snapshot the actors publish (`view.rs`), so they never wait.
//! - `crate::worker` builds and supervises the task runners.

mod actor;
pub mod capacity;
mod control;
mod offsets;
mod progress;
pub mod status;
#[cfg(test)]
mod tests;
mod view;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};

pub use crate::storage::TargetState;
pub use capacity::{Capacity, CapacityLimits, Claim};
pub use offsets::ConnectorOffset;
pub use progress::report_progress;
pub use view::HIDDEN;

use self::actor::Command;
use self::control::{ControlLoop, Message, not_found};
use self::offsets::OffsetAdmin;
use self::status::{ConnectorInfo, ConnectorStatus, TaskId, TaskInfo, TaskStatus};
use self::view::{ConnectorView, Snapshot, info_of, masked, status_of};
use crate::broker::EmbeddedBroker;
use crate::config::{ConnectorConfig, WorkerConfig};
use crate::kafka::clients::ClientKind;
use crate::kafka::health::KafkaHealth;
use crate::kafka::producer::Producer;
use crate::kafka::topics::TopicCreator;
use crate::offsets::{FileOffsetStore, OffsetStore};
use crate::registry::Registry;
use crate::sandbox::Sandbox;
use crate::storage::{ConfigLog, FileConfigLog, MemoryStatusStore};
pub(crate) use crate::worker::Shared;
use crate::worker::{Worker, WorkerOps};

/// What the control loop and the connector actors need of a worker: running connectors and
/// tasks, and the admin of their offsets. `Worker` in the process; fakes in unit tests.
pub(crate) trait Runtime: WorkerOps + OffsetAdmin {}

impl<T: WorkerOps + OffsetAdmin> Runtime for T {}

/// Why a herder operation failed; the REST layer maps the kind to a status code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HerderError {
    /// No such connector or task (404).
    NotFound(String),
    /// A connector of that name exists (409).
    Conflict(String),
    /// The request or config is invalid (400).
    BadRequest(String),
    /// Something failed inside the worker (500).
    Internal(String),
}

impl std::fmt::Display for HerderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HerderError::NotFound(m)
            | HerderError::Conflict(m)
            | HerderError::BadRequest(m)
            | HerderError::Internal(m) => f.write_str(m),
        }
    }
}

/// A task's counters, as `GET /connectors/{name}/tasks/{id}/metrics` shows them.
#[derive(Debug, serde::Serialize)]
pub struct TaskMetricsView {
    pub id: u32,
    pub state: &'static str,
    /// Records the task produced (source) or consumed (sink).
    pub records_in: u64,
    /// Records Kafka acknowledged (source) or the plugin wrote (sink).
    pub records_done: u64,
    pub restarts: u64,
    /// Record errors (Kafka Connect's task error metrics).
    pub errors: serde_json::Value,
}

/// A worker's herder (standalone or distributed).
pub struct Herder {
    shared: Arc<Shared>,
    /// The control loop's inbox.
    control: mpsc::UnboundedSender<Message>,
    /// What reads are served from.
    snapshot: Arc<Snapshot>,
    _broker: Option<EmbeddedBroker>,
    /// Held for the worker's life: no second worker may use the same data directory.
    _data_lock: std::fs::File,
    /// True once [`Herder::load`] has loaded the plugins and given every stored connector its
    /// actor: changes are taken from then on.
    loaded: watch::Sender<bool>,
    /// True once [`Herder::load`] has loaded the plugins and restored the stored connectors.
    started: watch::Receiver<bool>,
    /// The last health ping: when it was answered (or given up on) and whether it was answered.
    /// Held while a ping is out, so there is one at a time.
    last_ping: tokio::sync::Mutex<Option<(std::time::Instant, bool)>>,
    /// The Kafka cluster's id, once it answered (`GET /`).
    pub(crate) cluster_id: std::sync::OnceLock<String>,
    /// Distributed mode: the worker's cluster (membership, the config topic's writer).
    cluster: Option<Arc<crate::distributed::cluster::Cluster>>,
}

/// How far a request about a task has been forwarded between a cluster's workers (the
/// `forward` query parameter: absent, `leader`, `false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// From a client.
    FromClient,
    /// From a worker to the leader.
    ToLeader,
    /// From the leader to the worker that runs the task: the last hop.
    ToOwner,
}

/// Where a worker keeps its state: its data directory (standalone), or the cluster's topics.
enum Stores {
    Standalone,
    Distributed(Box<crate::distributed::settings::DistributedSettings>),
}

/// A worker's stores: offsets, config log, statuses, and (distributed) its cluster.
type Opened = (
    Arc<dyn OffsetStore>,
    Arc<dyn ConfigLog>,
    Arc<dyn crate::storage::StatusStore>,
    Option<Arc<crate::distributed::cluster::Cluster>>,
);

impl Herder {
    /// Start the worker's shared parts: data directory, sandbox with the compile cache, the
    /// plugin registry (scanned, then watched), the embedded broker if no cluster is named, and
    /// the Kafka clients. Connectors persisted by an earlier run are started again.
    pub async fn start(config: WorkerConfig) -> Result<Arc<Self>, String> {
        Self::start_with(config, Stores::Standalone).await
    }

    /// Start a distributed worker: as [`Herder::start`], but configs, offsets and statuses
    /// live on the cluster's topics (created if missing), and the worker runs only what the
    /// group gives it once [`crate::distributed::cluster::Cluster::run`] has it join.
    pub async fn start_distributed(
        config: WorkerConfig,
        settings: crate::distributed::settings::DistributedSettings,
    ) -> Result<Arc<Self>, String> {
        Self::start_with(config, Stores::Distributed(Box::new(settings))).await
    }

    async fn start_with(config: WorkerConfig, stores: Stores) -> Result<Arc<Self>, String> {
        if matches!(stores, Stores::Distributed(_)) && config.bootstrap_servers.is_none() {
            return Err("bootstrap.servers: is required in distributed mode (the workers meet through the Kafka cluster, which the embedded broker is not)".into());
        }
        std::fs::create_dir_all(&config.data_dir)
            .map_err(|e| format!("data.dir: cannot create {}: {e}", config.data_dir.display()))?;
        let data_lock = lock_data_dir(&config.data_dir)?;
        let sandbox = Sandbox::with_reservation(
            Some(config.data_dir.join("compiled")),
            config.memory_reservation,
        )
        .map_err(|e| format!("cannot start the WebAssembly engine: {e:#}"))?;
        let registry =
            Registry::with_limits(Arc::clone(&sandbox), &config.plugin_path, config.limits);
        // A directory that cannot be read fails the start now, before REST listens.
        registry.check_dir()?;
        let (broker, bootstrap) = match &config.bootstrap_servers {
            Some(servers) => (None, servers.clone()),
            None => {
                let broker =
                    EmbeddedBroker::start(&config.data_dir, &config.embedded_listener).await?;
                let bootstrap = broker.bootstrap().to_owned();
                (Some(broker), bootstrap)
            }
        };
        // A single embedded node cannot replicate; the broker default may not know that.
        let replication = if broker.is_some() && config.topic_default_replication == -1 {
            1
        } else {
            config.topic_default_replication
        };
        let client_id = format!("wasm-connect-{}", config.worker_id);
        for note in config.clients.notes() {
            tracing::warn!("{note}");
        }
        // Distributed: sends wait while the group membership is unconfirmed (self-fencing).
        let fence = matches!(stores, Stores::Distributed(_))
            .then(|| Arc::new(crate::kafka::group::Fence::new()));
        let producer = Arc::new(
            Producer::new(
                &bootstrap,
                &client_id,
                config.clients.librdkafka(ClientKind::Producer),
            )?
            .fenced(fence.clone()),
        );
        let topics = Arc::new(TopicCreator::new(
            &bootstrap,
            &client_id,
            config.clients.librdkafka(ClientKind::Admin),
            config.topic_creation_enable,
            config.topic_default_partitions,
            replication,
        )?);
        let (offsets, log, status, cluster): Opened = match stores {
            Stores::Standalone => (
                FileOffsetStore::open(config.data_dir.join("offsets.json"))?,
                Arc::new(FileConfigLog::new(config.data_dir.join("connectors.json"))),
                Arc::new(MemoryStatusStore::default()),
                None,
            ),
            Stores::Distributed(settings) => {
                let cluster =
                    crate::distributed::open_cluster(&bootstrap, &client_id, &config, *settings)
                        .await?;
                (
                    Arc::clone(&cluster.offsets) as Arc<dyn OffsetStore>,
                    Arc::new(crate::distributed::cluster::ClusterLog(Arc::clone(
                        &cluster.cluster,
                    ))) as Arc<dyn ConfigLog>,
                    Arc::clone(&cluster.cluster.status) as Arc<dyn crate::storage::StatusStore>,
                    Some(cluster.cluster),
                )
            }
        };
        let capacity = Capacity::new(config.capacity);
        let health = Arc::new(KafkaHealth::identified(
            config.clients.translated(ClientKind::Producer),
        ));
        health.watch(&producer);
        let instance_id = instance_id(&config.data_dir)?;
        // Read now: a stored file that cannot be read stops the start, before REST is up.
        log.read()?;
        let shared = Arc::new(Shared {
            config,
            sandbox,
            registry,
            bootstrap,
            producer,
            topics,
            offsets,
            capacity,
            health,
            instance_id,
            status,
            fence,
        });
        let snapshot = Arc::new(Snapshot::default());
        let (started_tx, started) = watch::channel(false);
        let worker = Arc::new(Worker::new(Arc::clone(&shared)));
        let control = ControlLoop::spawn(
            worker,
            Arc::clone(&snapshot),
            log,
            started_tx,
            cluster.is_some(),
        );
        Ok(Arc::new(Self {
            shared,
            control,
            snapshot,
            _broker: broker,
            _data_lock: data_lock,
            loaded: watch::channel(false).0,
            started,
            last_ping: tokio::sync::Mutex::new(None),
            cluster_id: std::sync::OnceLock::new(),
            cluster,
        }))
    }

    /// Distributed mode: the fence its producers' sends wait on, for the group member to keep.
    pub fn fence(&self) -> Option<Arc<crate::kafka::group::Fence>> {
        self.shared.fence.clone()
    }

    /// Distributed mode: the worker a request about task `id` of connector `name` goes to,
    /// when the task does not run here: the leader, which knows where each task runs, or (on
    /// the leader) the task's worker. `Ok(None)`: it is this worker's to answer (the task runs
    /// here, is not in the split, or the mode is standalone). `hop`: how far the request has
    /// come (at most client → a worker → the leader → the task's worker).
    pub fn task_elsewhere(
        &self,
        name: &str,
        id: u32,
        hop: Hop,
    ) -> Result<Option<String>, HerderError> {
        use crate::distributed::cluster::Role;
        let Some(cluster) = &self.cluster else {
            return Ok(None);
        };
        let view = self.view(name)?;
        if view.tasks.contains_key(&id) || id as usize >= view.split.len() {
            return Ok(None);
        }
        let moving = || {
            HerderError::Conflict(format!(
                "Task {name}-{id} is not running on any worker now (the workers are rebalancing); try again"
            ))
        };
        match (cluster.role(), hop) {
            (_, Hop::ToOwner) => Err(moving()),
            (Role::Leader, _) => cluster
                .owner_of(&crate::storage::ConnectorTaskId::new(name, id))
                .map(Some)
                .ok_or_else(moving),
            (Role::Follower { leader_url }, Hop::FromClient) => Ok(Some(leader_url)),
            // Sent here as to the leader, which this worker is not (any more).
            (Role::Follower { .. }, Hop::ToLeader) | (Role::Unknown, _) => Err(moving()),
        }
    }

    /// Distributed mode: the worker's cluster.
    pub fn cluster(&self) -> Option<&Arc<crate::distributed::cluster::Cluster>> {
        self.cluster.as_ref()
    }

    /// Distributed mode: run `work` (everything this worker is assigned) from now on, once
    /// the control loop has seen the config log up to `offset`; returns once what is no longer
    /// this worker's has stopped and what is new has started.
    pub(crate) async fn assign(&self, work: crate::distributed::protocol::Work, offset: u64) {
        let (reply, done) = oneshot::channel();
        self.send(Message::Assign {
            work,
            offset,
            reply,
        });
        let _ = done.await;
    }

    /// The rest of start-up, which REST may already serve during: load the plugins (each file
    /// concurrently, its `spec()` under its deadline, so a file that hangs delays nothing but
    /// itself), watch the directory, and start restoring the connectors an earlier run stored.
    /// Returns once every stored connector has its actor: changes may come from then on (a
    /// change to a connector still being restored waits for its restore, in its actor's queue;
    /// no other connector waits for it). Changes asked for before then wait for it; reads
    /// answer at once. [`Herder::is_started`] turns true once every restore has come back.
    pub async fn load(&self) -> Result<(), String> {
        // The scan runs here, not in the control loop, so a shutdown meanwhile is not held up.
        let registry = &self.shared.registry;
        let report = registry.scan().await?;
        tracing::info!(plugins = registry.plugins().len(), skipped = report.failed.len(), dir = %registry.dir().display(), "plugins loaded");
        let (loaded_tx, loaded) = oneshot::channel();
        let (reply, restored) = oneshot::channel();
        self.send(Message::Load {
            loaded: loaded_tx,
            reply,
        });
        let stopping = || Err("the worker is stopping".into());
        loaded.await.unwrap_or_else(|_| stopping())?;
        self.loaded.send_replace(true);
        // Each restore's failure is the connector's (FAILED with the reason), not start-up's.
        tokio::spawn(async move {
            if let Ok(Err(e)) = restored.await {
                tracing::error!("restoring the stored connectors: {e}");
            }
        });
        Ok(())
    }

    /// Whether the control loop takes requests: `true` once it has answered a ping within
    /// `timeout`. A loop stuck on something (or stopping) leaves the ping unanswered.
    ///
    /// One ping at a time, and an answer less than a second old is reused: however many probes
    /// ask (a flood of unauthenticated `/health` requests included), the loop's inbox gets at
    /// most one ping a second.
    pub async fn answers_within(&self, timeout: std::time::Duration) -> bool {
        let mut last = self.last_ping.lock().await;
        if let Some((at, answered)) = *last
            && at.elapsed() < std::time::Duration::from_secs(1)
        {
            return answered;
        }
        let (reply, answer) = oneshot::channel();
        self.send(Message::Ping { reply });
        let answered = matches!(tokio::time::timeout(timeout, answer).await, Ok(Ok(())));
        *last = Some((std::time::Instant::now(), answered));
        answered
    }

    /// Whether [`Herder::load`] has finished.
    pub fn is_started(&self) -> bool {
        *self.started.borrow()
    }

    /// Wait until start-up has loaded the plugins and given every stored connector its actor:
    /// a change made before then would race the restore. It does not wait for the restores
    /// themselves (a change to a connector being restored waits in its actor's queue).
    pub(crate) async fn until_loaded(&self) {
        let mut loaded = self.loaded.subscribe();
        let _ = loaded.wait_for(|s| *s).await;
    }

    /// The Kafka cluster the worker uses (`host:port`).
    pub fn bootstrap(&self) -> &str {
        &self.shared.bootstrap
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.shared.config.data_dir.clone()
    }

    /// This worker's id.
    pub fn worker_id(&self) -> &str {
        &self.shared.config.worker_id
    }

    /// The plugin registry.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.shared.registry
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Every problem with `config` for the plugin it names (the worker's checks and the
    /// plugin's `validate`), without creating anything; `NotFound` if the plugin is unknown.
    pub async fn validate(
        &self,
        config: &ConnectorConfig,
    ) -> Result<(Arc<crate::plugin::Plugin>, Vec<crate::config::Problem>), HerderError> {
        let registry = &self.shared.registry;
        if registry
            .find(&config.plugin, config.plugin_version.as_deref())
            .is_none()
        {
            // Its plugin may still be loading.
            self.until_loaded().await;
        }
        let plugin = registry
            .find(&config.plugin, config.plugin_version.as_deref())
            .ok_or_else(|| {
                HerderError::NotFound(format!("Unknown connector plugin {}", config.plugin))
            })?;
        let problems = crate::worker::validate(&self.shared, config).await;
        Ok((plugin, problems))
    }

    /// Create a connector in `target` state. Fails with `Conflict` if the name is taken and
    /// `BadRequest` (listing every problem) if the config is invalid; nothing is created then.
    pub async fn create(
        &self,
        config: ConnectorConfig,
        target: TargetState,
    ) -> Result<ConnectorInfo, HerderError> {
        self.until_loaded().await;
        let (reply, answer) = oneshot::channel();
        self.send(Message::Create {
            config,
            target,
            reply,
        });
        Ok(wait(answer).await?.1)
    }

    /// Create or replace a connector's config (`PUT /connectors/{name}/config`). Returns whether
    /// it was created. A replaced connector's tasks are stopped and started from the new config,
    /// keeping its target state.
    pub async fn put_config(
        &self,
        config: ConnectorConfig,
    ) -> Result<(bool, ConnectorInfo), HerderError> {
        self.until_loaded().await;
        let (reply, answer) = oneshot::channel();
        self.send(Message::PutConfig { config, reply });
        wait(answer).await
    }

    /// Stop and remove a connector (its offsets stay, as in Kafka Connect).
    pub async fn delete(&self, name: &str) -> Result<(), HerderError> {
        self.command(name, |reply| Command::Delete { reply }).await
    }

    /// Names of every connector.
    pub async fn names(&self) -> Vec<String> {
        self.snapshot.all().into_iter().map(|(n, _)| n).collect()
    }

    /// `GET /connectors/{name}`.
    pub async fn info(&self, name: &str) -> Result<ConnectorInfo, HerderError> {
        Ok(info_of(name, &*self.view(name)?))
    }

    /// The connector's config as given (password values hidden).
    pub async fn config(&self, name: &str) -> Result<BTreeMap<String, String>, HerderError> {
        Ok(self.info(name).await?.config)
    }

    /// The connector's config as given, passwords included (for PATCH merges).
    pub async fn raw_config(&self, name: &str) -> Result<Vec<(String, String)>, HerderError> {
        Ok(self.view(name)?.config.pairs.clone())
    }

    /// `GET /connectors/{name}/status`.
    pub async fn status(&self, name: &str) -> Result<ConnectorStatus, HerderError> {
        Ok(status_of(
            self.shared.status.as_ref(),
            self.outage(),
            name,
            &*self.view(name)?,
        ))
    }

    /// `GET /connectors/{name}/tasks`: each task's config (password values hidden).
    pub async fn tasks(&self, name: &str) -> Result<Vec<TaskInfo>, HerderError> {
        let view = self.view(name)?;
        Ok(view
            .task_configs()
            .iter()
            .enumerate()
            .map(|(i, config)| TaskInfo {
                id: TaskId {
                    connector: name.to_owned(),
                    task: i as u32,
                },
                config: masked(&view, config),
            })
            .collect())
    }

    /// `GET /connectors/{name}/tasks/{id}/status`.
    pub async fn task_status(&self, name: &str, id: u32) -> Result<TaskStatus, HerderError> {
        self.status(name)
            .await?
            .tasks
            .into_iter()
            .find(|t| t.id == id)
            .ok_or_else(|| HerderError::NotFound(format!("Task {name}-{id} not found")))
    }

    /// `GET /connectors/{name}/tasks/{id}/metrics`: the task's record and error counters
    /// (wasm-connect's own endpoint; Kafka Connect exposes these over JMX).
    pub async fn task_metrics(&self, name: &str, id: u32) -> Result<TaskMetricsView, HerderError> {
        let view = self.view(name)?;
        let m = view
            .tasks
            .get(&id)
            .ok_or_else(|| HerderError::NotFound(format!("Task {name}-{id} not found")))?;
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        Ok(TaskMetricsView {
            id,
            state: m.state().name(),
            records_in: load(&m.records_in),
            records_done: load(&m.records_done),
            restarts: load(&m.restarts),
            errors: serde_json::to_value(&*m.errors).unwrap_or_default(),
        })
    }

    /// Pause: tasks stop moving data but keep their instances and offsets.
    pub async fn pause(&self, name: &str) -> Result<(), HerderError> {
        self.set_target(name, TargetState::Paused).await
    }

    /// Resume a paused or stopped connector.
    pub async fn resume(&self, name: &str) -> Result<(), HerderError> {
        self.set_target(name, TargetState::Running).await
    }

    /// Stop: tasks are shut down (offsets flushed); the config stays (KIP-875).
    pub async fn stop(&self, name: &str) -> Result<(), HerderError> {
        self.set_target(name, TargetState::Stopped).await
    }

    async fn set_target(&self, name: &str, target: TargetState) -> Result<(), HerderError> {
        self.command(name, |reply| Command::SetTarget { target, reply })
            .await
    }

    /// Restart the connector (re-check its config and re-split it); with `include_tasks`, also
    /// its tasks (only the failed ones with `only_failed`). Returns the new status.
    pub async fn restart(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
    ) -> Result<ConnectorStatus, HerderError> {
        self.command(name, |reply| Command::Restart {
            include_tasks,
            only_failed,
            reply,
        })
        .await
    }

    /// Restart one task from its current task config.
    pub async fn restart_task(&self, name: &str, id: u32) -> Result<(), HerderError> {
        self.command(name, |reply| Command::RestartTask { id, reply })
            .await
    }

    /// Change a STOPPED connector's offsets (KIP-875's alter).
    pub async fn alter_offsets(
        &self,
        name: &str,
        changes: Vec<ConnectorOffset>,
    ) -> Result<(), HerderError> {
        self.command(name, |reply| Command::AlterOffsets { changes, reply })
            .await
    }

    /// Forget a STOPPED connector's offsets (KIP-875's reset).
    pub async fn reset_offsets(&self, name: &str) -> Result<(), HerderError> {
        self.command(name, |reply| Command::ResetOffsets { reply })
            .await
    }

    /// The topics the connector used (`GET /connectors/{name}/topics`).
    pub async fn topics(&self, name: &str) -> Result<Vec<String>, HerderError> {
        let view = self.view(name)?;
        let set = view.topics.lock().unwrap_or_else(|e| e.into_inner());
        Ok(set.iter().cloned().collect())
    }

    /// Forget the connector's active topics.
    pub async fn reset_topics(&self, name: &str) -> Result<(), HerderError> {
        self.view(name)?
            .topics
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        Ok(())
    }

    /// Every connector's status and counters, for progress reports.
    pub async fn statuses(&self) -> Vec<(ConnectorStatus, u64)> {
        self.snapshot
            .all()
            .into_iter()
            .map(|(name, view)| {
                let done = view.tasks.values().map(|t| t.done()).sum();
                let status = status_of(self.shared.status.as_ref(), self.outage(), &name, &view);
                (status, done)
            })
            .collect()
    }

    /// Stop every task (sources flush their offsets, sinks flush and commit) and wait for them.
    /// Target states stay as they are, so a restart brings the same connectors back. Returns
    /// each connector's records done and failed tasks.
    pub async fn shutdown(&self) -> Vec<(String, u64, usize)> {
        let (reply, summary) = oneshot::channel();
        self.send(Message::Shutdown { reply });
        summary.await.unwrap_or_default()
    }

    /// Why the Kafka cluster does not answer, if it does not.
    fn outage(&self) -> Option<String> {
        self.shared.health.outage().map(|o| o.describe())
    }

    /// Connector `name`'s latest published view.
    fn view(&self, name: &str) -> Result<Arc<ConnectorView>, HerderError> {
        self.snapshot.get(name).ok_or_else(|| not_found(name))
    }

    fn send(&self, message: Message) {
        // The loop runs until shutdown (it holds a sender of its own, so dropping the herder
        // does not end it); a message after shutdown is dropped and its reply reports that the
        // worker is stopping.
        let _ = self.control.send(message);
    }

    /// Send connector `name`'s actor the command `make` builds, once start-up is done, and
    /// wait for its answer.
    async fn command<T>(
        &self,
        name: &str,
        make: impl FnOnce(actor::Reply<T>) -> Command,
    ) -> Result<T, HerderError> {
        self.until_loaded().await;
        let (reply, answer) = oneshot::channel();
        self.send(Message::Connector {
            name: name.to_owned(),
            command: make(reply),
        });
        wait(answer).await
    }
}

/// The answer to a request; a request dropped unanswered means its connector's actor ended
/// (the connector is gone) or the worker is stopping.
async fn wait<T>(answer: oneshot::Receiver<Result<T, HerderError>>) -> Result<T, HerderError> {
    answer.await.unwrap_or_else(|_| {
        Err(HerderError::Internal(
            "the request was not answered: the connector is gone or the worker is stopping".into(),
        ))
    })
}

/// Lock `data_dir` for this worker. Two workers on one data directory would run the same
/// stored connectors twice, overwrite each other's offsets, and share one worker instance id,
/// whose sink consumers fence each other out of their groups. The lock (`flock` on
/// `<data.dir>/lock`) goes with the process, however it ends.
fn lock_data_dir(data_dir: &std::path::Path) -> Result<std::fs::File, String> {
    let path = data_dir.join("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("data.dir: cannot open {}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(format!(
            "data.dir: {} is in use by another wasm-connect worker (it holds {}); give each worker its own data.dir",
            data_dir.display(),
            path.display()
        )),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(format!("data.dir: cannot lock {}: {e}", path.display()))
        }
    }
}

/// The worker's identity across restarts: a random id created in `data_dir` on first start.
fn instance_id(data_dir: &std::path::Path) -> Result<String, String> {
    let path = data_dir.join("worker-instance-id");
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => return Ok(id.trim().to_owned()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("data.dir: cannot read {}: {e}", path.display())),
    }
    let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    crate::offsets::store::write_atomically(&path, id.as_bytes())
        .map_err(|e| format!("data.dir: cannot write {}: {e}", path.display()))?;
    Ok(id)
}
