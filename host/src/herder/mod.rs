//! The herder: owns the worker's shared parts (sandbox, plugin registry, Kafka clients, offset
//! store, embedded broker) and the lifecycle of connectors and their tasks: create, reconfigure,
//! pause, resume, stop, restart, delete, with configs and target states persisted in the data
//! directory. Standalone mode: every task runs in this process.

pub mod capacity;
mod connector;
mod offsets;
mod progress;
pub mod status;
pub mod store;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, watch};
use tokio::task::JoinHandle;

pub use capacity::{Capacity, CapacityLimits, Claim};
pub use connector::RestartPolicy;
pub use progress::report_progress;
pub use store::TargetState;

use self::connector::{Prepared, TaskHandle, prepare, problems_message, spawn_task};
use self::status::{ConnectorInfo, ConnectorStatus, InstanceState, TaskId, TaskInfo, TaskStatus};
use self::store::ConfigStore;
use crate::broker::EmbeddedBroker;
use crate::config::{ConnectorConfig, WorkerConfig};
use crate::kafka::health::KafkaHealth;
use crate::kafka::producer::Producer;
use crate::kafka::topics::TopicCreator;
use crate::offsets::FileOffsetStore;
use crate::plugin::World;
use crate::registry::Registry;
use crate::sandbox::Sandbox;
use crate::task::{ActiveTopics, Control, TaskState};

/// Shown instead of the value of a `PASSWORD` config key.
pub const HIDDEN: &str = "[hidden]";

/// How long a stopping task may take before it is aborted.
const STOP_GRACE: Duration = Duration::from_secs(60);

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

/// The parts every connector shares.
pub(crate) struct Shared {
    pub config: WorkerConfig,
    pub sandbox: Arc<Sandbox>,
    pub registry: Arc<Registry>,
    pub bootstrap: String,
    pub producer: Arc<Producer>,
    pub topics: Arc<TopicCreator>,
    pub offsets: Arc<FileOffsetStore>,
    /// The tasks and memory admitted so far.
    pub capacity: Capacity,
    /// Whether the Kafka cluster answers.
    pub health: Arc<KafkaHealth>,
    /// This worker's identity across restarts (kept in the data directory): part of its sink
    /// consumers' static group membership ids.
    pub instance_id: String,
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

/// One connector as the herder keeps it.
struct Entry {
    config: ConnectorConfig,
    target: TargetState,
    /// Why the connector itself is failed (bad config at start, task split failed), if it is.
    failure: Option<String>,
    prepared: Option<Arc<Prepared>>,
    tasks: Vec<TaskHandle>,
    topics: ActiveTopics,
}

impl Entry {
    fn kind(&self) -> Option<World> {
        self.prepared.as_ref().map(|p| p.plugin.world)
    }
}

/// The standalone worker.
pub struct Herder {
    shared: Arc<Shared>,
    connectors: Mutex<BTreeMap<String, Entry>>,
    store: ConfigStore,
    _broker: Option<EmbeddedBroker>,
    /// The plugin directory's watcher, once start-up has scanned it.
    watcher: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// True once [`Herder::load`] has loaded the plugins and restored the stored connectors.
    started: watch::Sender<bool>,
}

fn not_found(name: &str) -> HerderError {
    HerderError::NotFound(format!("Connector {name} not found"))
}

impl Herder {
    /// Start the worker's shared parts: data directory, sandbox with the compile cache, the
    /// plugin registry (scanned, then watched), the embedded broker if no cluster is named, and
    /// the Kafka clients. Connectors persisted by an earlier run are started again.
    pub async fn start(config: WorkerConfig) -> Result<Arc<Self>, String> {
        std::fs::create_dir_all(&config.data_dir)
            .map_err(|e| format!("data.dir: cannot create {}: {e}", config.data_dir.display()))?;
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
        let producer = Arc::new(Producer::new(&bootstrap, &client_id, &config.producer)?);
        let topics = Arc::new(TopicCreator::new(
            &bootstrap,
            &client_id,
            &config.admin,
            config.topic_creation_enable,
            config.topic_default_partitions,
            replication,
        )?);
        let offsets = FileOffsetStore::open(config.data_dir.join("offsets.json"))?;
        let store = ConfigStore::new(config.data_dir.join("connectors.json"));
        let capacity = Capacity::new(config.capacity);
        let health = Arc::new(KafkaHealth::default());
        health.watch(&producer);
        let instance_id = instance_id(&config.data_dir)?;
        // Read now: a stored file that cannot be read stops the start, before REST is up.
        store.load()?;
        let herder = Arc::new(Self {
            shared: Arc::new(Shared {
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
            }),
            connectors: Mutex::new(BTreeMap::new()),
            store,
            _broker: broker,
            watcher: std::sync::Mutex::new(None),
            started: watch::channel(false).0,
        });
        Ok(herder)
    }

    /// The rest of start-up, which REST may already serve during: load the plugins (each file
    /// concurrently, its `spec()` under its deadline, so a file that hangs delays nothing but
    /// itself), watch the directory, and start the connectors an earlier run stored. Changes
    /// asked for meanwhile wait for it; reads answer at once.
    pub async fn load(&self) -> Result<(), String> {
        let registry = &self.shared.registry;
        let report = registry.scan().await?;
        tracing::info!(plugins = registry.plugins().len(), skipped = report.failed.len(), dir = %registry.dir().display(), "plugins loaded");
        let watcher = registry.watch(self.shared.config.plugin_scan_interval);
        if let Some(old) = self
            .watcher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(watcher)
        {
            old.abort();
        }
        for (name, (pairs, target)) in self.store.load()? {
            match ConnectorConfig::from_pairs(pairs) {
                Ok(config) => self.restore(config, target).await,
                Err(problems) => {
                    tracing::error!(connector = %name, "stored config is invalid: {}", problems_message(&name, &problems))
                }
            }
        }
        self.started.send_replace(true);
        Ok(())
    }

    /// Whether [`Herder::load`] has finished.
    pub fn is_started(&self) -> bool {
        *self.started.borrow()
    }

    /// Wait until start-up has loaded the plugins and restored the stored connectors: a change
    /// made before then would race the restore (and persist a file without its connectors).
    pub(crate) async fn until_started(&self) {
        let mut started = self.started.subscribe();
        let _ = started.wait_for(|s| *s).await;
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
            self.until_started().await;
        }
        let plugin = self
            .shared
            .registry
            .find(&config.plugin, config.plugin_version.as_deref())
            .ok_or_else(|| {
                HerderError::NotFound(format!("Unknown connector plugin {}", config.plugin))
            })?;
        let problems = match prepare(&self.shared, config).await {
            Ok(prepared) => self
                .shared
                .capacity
                .fits(&config.name, claim_of(&prepared))
                .err()
                .into_iter()
                .collect(),
            Err(problems) => problems,
        };
        Ok((plugin, problems))
    }

    /// Create a connector in `target` state. Fails with `Conflict` if the name is taken and
    /// `BadRequest` (listing every problem) if the config is invalid; nothing is created then.
    pub async fn create(
        &self,
        config: ConnectorConfig,
        target: TargetState,
    ) -> Result<ConnectorInfo, HerderError> {
        self.until_started().await;
        let mut connectors = self.connectors.lock().await;
        if connectors.contains_key(&config.name) {
            return Err(HerderError::Conflict(format!(
                "Connector {} already exists",
                config.name
            )));
        }
        let name = config.name.clone();
        let entry = self.build(config, target).await?;
        connectors.insert(name.clone(), entry);
        self.persist(&connectors)?;
        Ok(self.info_of(&name, &connectors[&name]))
    }

    /// Bring back a stored connector. One that no longer checks out (say its plugin was
    /// removed) is kept, FAILED with the reason, so its config is not lost; a restart or a new
    /// config brings it back.
    async fn restore(&self, config: ConnectorConfig, target: TargetState) {
        let mut connectors = self.connectors.lock().await;
        let name = config.name.clone();
        let entry = match self.build(config.clone(), target).await {
            Ok(entry) => entry,
            Err(e) => {
                tracing::error!(connector = %name, "cannot restore the stored connector: {e}");
                Entry {
                    config,
                    target,
                    failure: Some(e.to_string()),
                    prepared: None,
                    tasks: Vec::new(),
                    topics: ActiveTopics::default(),
                }
            }
        };
        connectors.insert(name, entry);
    }

    /// Create or replace a connector's config (`PUT /connectors/{name}/config`). Returns whether
    /// it was created. A replaced connector's tasks are stopped and started from the new config,
    /// keeping its target state.
    pub async fn put_config(
        &self,
        config: ConnectorConfig,
    ) -> Result<(bool, ConnectorInfo), HerderError> {
        self.until_started().await;
        let mut connectors = self.connectors.lock().await;
        let name = config.name.clone();
        let (created, target) = match connectors.get(&name) {
            Some(existing) => (false, existing.target),
            None => (true, TargetState::Running),
        };
        // Check the new config, and that its tasks fit, before touching the running one.
        let prepared = self.prepare_or_reject(&config).await?;
        self.admit(&name, &prepared, target)?;
        if let Some(mut old) = connectors.remove(&name) {
            stop_tasks(&mut old.tasks).await;
        }
        let entry = self.build_prepared(config, target, prepared).await;
        connectors.insert(name.clone(), entry);
        self.persist(&connectors)?;
        Ok((created, self.info_of(&name, &connectors[&name])))
    }

    /// Stop and remove a connector (its offsets stay, as in Kafka Connect).
    pub async fn delete(&self, name: &str) -> Result<(), HerderError> {
        self.until_started().await;
        let mut connectors = self.connectors.lock().await;
        let mut entry = connectors.remove(name).ok_or_else(|| not_found(name))?;
        stop_tasks(&mut entry.tasks).await;
        self.shared.capacity.release(name);
        self.persist(&connectors)
    }

    /// Names of every connector.
    pub async fn names(&self) -> Vec<String> {
        self.connectors.lock().await.keys().cloned().collect()
    }

    /// `GET /connectors/{name}`.
    pub async fn info(&self, name: &str) -> Result<ConnectorInfo, HerderError> {
        let connectors = self.connectors.lock().await;
        let entry = connectors.get(name).ok_or_else(|| not_found(name))?;
        Ok(self.info_of(name, entry))
    }

    /// The connector's config as given (password values hidden).
    pub async fn config(&self, name: &str) -> Result<BTreeMap<String, String>, HerderError> {
        Ok(self.info(name).await?.config)
    }

    /// The connector's config as given, passwords included (for PATCH merges).
    pub async fn raw_config(&self, name: &str) -> Result<Vec<(String, String)>, HerderError> {
        let connectors = self.connectors.lock().await;
        let entry = connectors.get(name).ok_or_else(|| not_found(name))?;
        Ok(entry.config.pairs.clone())
    }

    /// `GET /connectors/{name}/status`.
    pub async fn status(&self, name: &str) -> Result<ConnectorStatus, HerderError> {
        let connectors = self.connectors.lock().await;
        let entry = connectors.get(name).ok_or_else(|| not_found(name))?;
        Ok(self.status_of(name, entry))
    }

    /// `GET /connectors/{name}/tasks`: each task's config (password values hidden).
    pub async fn tasks(&self, name: &str) -> Result<Vec<TaskInfo>, HerderError> {
        let connectors = self.connectors.lock().await;
        let entry = connectors.get(name).ok_or_else(|| not_found(name))?;
        let configs = entry
            .prepared
            .as_ref()
            .map(|p| p.task_configs.clone())
            .unwrap_or_default();
        if entry.target == TargetState::Stopped {
            return Ok(Vec::new());
        }
        Ok(configs
            .into_iter()
            .enumerate()
            .map(|(i, config)| TaskInfo {
                id: TaskId {
                    connector: name.to_owned(),
                    task: i as u32,
                },
                config: self.masked(entry, &config),
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
        let connectors = self.connectors.lock().await;
        let entry = connectors.get(name).ok_or_else(|| not_found(name))?;
        let task = entry
            .tasks
            .get(id as usize)
            .ok_or_else(|| HerderError::NotFound(format!("Task {name}-{id} not found")))?;
        let m = &task.metrics;
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
        self.until_started().await;
        let mut connectors = self.connectors.lock().await;
        let entry = connectors.get_mut(name).ok_or_else(|| not_found(name))?;
        // Tasks are started below only for a connector that is not FAILED, and only if they
        // (still) fit.
        if target != TargetState::Stopped
            && entry.tasks.is_empty()
            && entry.failure.is_none()
            && let Some(prepared) = entry.prepared.as_ref()
        {
            self.admit(name, prepared, target)?;
        }
        entry.target = target;
        match target {
            TargetState::Stopped => {
                stop_tasks(&mut entry.tasks).await;
                self.shared.capacity.release(name);
            }
            TargetState::Running | TargetState::Paused => {
                let control = if target == TargetState::Paused {
                    Control::Pause
                } else {
                    Control::Run
                };
                if entry.tasks.is_empty() {
                    if entry.failure.is_none() {
                        self.start_tasks(name, entry, control, None).await;
                    }
                } else {
                    for task in &entry.tasks {
                        let _ = task.control.send(control);
                    }
                }
            }
        }
        self.persist(&connectors)
    }

    /// Restart the connector (re-check its config and re-split it); with `include_tasks`, also
    /// its tasks (only the failed ones with `only_failed`). Returns the new status.
    pub async fn restart(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
    ) -> Result<ConnectorStatus, HerderError> {
        self.until_started().await;
        let mut connectors = self.connectors.lock().await;
        let entry = connectors.get_mut(name).ok_or_else(|| not_found(name))?;
        let connector_failed = entry.failure.is_some();
        if !only_failed || connector_failed {
            match prepare(&self.shared, &entry.config).await {
                Ok(prepared) => {
                    // A new split that does not fit is refused; what runs keeps running.
                    self.admit(name, &prepared, entry.target)?;
                    let changed = entry.prepared.as_ref().map(|p| &p.task_configs)
                        != Some(&prepared.task_configs);
                    entry.prepared = Some(Arc::new(prepared));
                    entry.failure = None;
                    if changed || connector_failed {
                        stop_tasks(&mut entry.tasks).await;
                    }
                }
                Err(problems) => {
                    stop_tasks(&mut entry.tasks).await;
                    self.shared.capacity.release(name);
                    entry.failure = Some(problems_message(name, &problems));
                }
            }
        }
        if include_tasks && entry.target != TargetState::Stopped && entry.failure.is_none() {
            let control = if entry.target == TargetState::Paused {
                Control::Pause
            } else {
                Control::Run
            };
            let count = entry.prepared.as_ref().map_or(0, |p| p.task_configs.len());
            for id in 0..count as u32 {
                let failed = entry
                    .tasks
                    .get(id as usize)
                    .is_none_or(|t| matches!(t.metrics.state(), TaskState::Failed(_)));
                if only_failed && !failed {
                    continue;
                }
                self.restart_task_in(name, entry, id, control).await;
            }
        } else if entry.tasks.is_empty()
            && entry.target != TargetState::Stopped
            && entry.failure.is_none()
        {
            let control = if entry.target == TargetState::Paused {
                Control::Pause
            } else {
                Control::Run
            };
            self.start_tasks(name, entry, control, None).await;
        }
        Ok(self.status_of(name, entry))
    }

    /// Restart one task from its current task config.
    pub async fn restart_task(&self, name: &str, id: u32) -> Result<(), HerderError> {
        self.until_started().await;
        let mut connectors = self.connectors.lock().await;
        let entry = connectors.get_mut(name).ok_or_else(|| not_found(name))?;
        if id as usize >= entry.tasks.len() {
            return Err(HerderError::NotFound(format!("Task {name}-{id} not found")));
        }
        let control = if entry.target == TargetState::Paused {
            Control::Pause
        } else {
            Control::Run
        };
        self.restart_task_in(name, entry, id, control).await;
        Ok(())
    }

    async fn restart_task_in(&self, name: &str, entry: &mut Entry, id: u32, control: Control) {
        let Some(prepared) = entry.prepared.as_ref() else {
            return;
        };
        if let Some(task) = entry.tasks.get_mut(id as usize) {
            stop_task(task).await;
        }
        let handle = spawn_task(&self.shared, name, prepared, id, control, &entry.topics);
        if (id as usize) < entry.tasks.len() {
            entry.tasks[id as usize] = handle;
        } else {
            entry.tasks.push(handle);
        }
    }

    /// The topics the connector used (`GET /connectors/{name}/topics`).
    pub async fn topics(&self, name: &str) -> Result<Vec<String>, HerderError> {
        let connectors = self.connectors.lock().await;
        let entry = connectors.get(name).ok_or_else(|| not_found(name))?;
        let set = entry.topics.lock().unwrap_or_else(|e| e.into_inner());
        Ok(set.iter().cloned().collect())
    }

    /// Forget the connector's active topics.
    pub async fn reset_topics(&self, name: &str) -> Result<(), HerderError> {
        let connectors = self.connectors.lock().await;
        let entry = connectors.get(name).ok_or_else(|| not_found(name))?;
        entry
            .topics
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        Ok(())
    }

    /// Every connector's status and counters, for progress reports.
    pub async fn statuses(&self) -> Vec<(ConnectorStatus, u64)> {
        let connectors = self.connectors.lock().await;
        connectors
            .iter()
            .map(|(name, entry)| {
                let done = entry.tasks.iter().map(|t| t.metrics.done()).sum();
                (self.status_of(name, entry), done)
            })
            .collect()
    }

    /// Stop every task (sources flush their offsets, sinks flush and commit) and wait for them.
    /// Target states stay as they are, so a restart brings the same connectors back. Returns
    /// each connector's records done and failed tasks.
    pub async fn shutdown(&self) -> Vec<(String, u64, usize)> {
        let mut connectors = self.connectors.lock().await;
        for entry in connectors.values() {
            for task in &entry.tasks {
                let _ = task.control.send(Control::Stop);
            }
        }
        futures::future::join_all(
            connectors
                .values_mut()
                .flat_map(|entry| entry.tasks.iter_mut())
                .map(stop_task),
        )
        .await;
        let mut summary = Vec::new();
        for (name, entry) in connectors.iter_mut() {
            let done = entry.tasks.iter().map(|t| t.metrics.done()).sum();
            let failed = entry
                .tasks
                .iter()
                .filter(|t| matches!(t.metrics.state(), TaskState::Failed(_)))
                .count();
            summary.push((
                name.clone(),
                done,
                failed + usize::from(entry.failure.is_some()),
            ));
            entry.tasks.clear();
        }
        let producer = Arc::clone(&self.shared.producer);
        let _ = tokio::task::spawn_blocking(move || producer.flush(Duration::from_secs(10))).await;
        summary
    }

    async fn prepare_or_reject(&self, config: &ConnectorConfig) -> Result<Prepared, HerderError> {
        prepare(&self.shared, config)
            .await
            .map_err(|p| HerderError::BadRequest(problems_message(&config.name, &p)))
    }

    /// A new entry for a valid config whose tasks fit, with its tasks started per `target`.
    async fn build(
        &self,
        config: ConnectorConfig,
        target: TargetState,
    ) -> Result<Entry, HerderError> {
        let prepared = self.prepare_or_reject(&config).await?;
        self.admit(&config.name, &prepared, target)?;
        Ok(self.build_prepared(config, target, prepared).await)
    }

    /// Record what `prepared`'s tasks claim for connector `name` (nothing while `target` is
    /// STOPPED), or refuse with what does not fit and which keys to change.
    fn admit(
        &self,
        name: &str,
        prepared: &Prepared,
        target: TargetState,
    ) -> Result<(), HerderError> {
        if target == TargetState::Stopped {
            self.shared.capacity.release(name);
            return Ok(());
        }
        self.shared
            .capacity
            .admit(name, claim_of(prepared))
            .map_err(|p| HerderError::BadRequest(problems_message(name, &[p])))
    }

    async fn build_prepared(
        &self,
        config: ConnectorConfig,
        target: TargetState,
        prepared: Prepared,
    ) -> Entry {
        let mut entry = Entry {
            config,
            target,
            failure: None,
            prepared: Some(Arc::new(prepared)),
            tasks: Vec::new(),
            topics: ActiveTopics::default(),
        };
        let name = entry.config.name.clone();
        match target {
            TargetState::Running => {
                self.start_tasks(&name, &mut entry, Control::Run, None)
                    .await
            }
            TargetState::Paused => {
                self.start_tasks(&name, &mut entry, Control::Pause, None)
                    .await
            }
            TargetState::Stopped => {}
        }
        entry
    }

    /// Start every task of `entry` (a task that cannot start is recorded as failed).
    async fn start_tasks(
        &self,
        name: &str,
        entry: &mut Entry,
        control: Control,
        _only: Option<u32>,
    ) {
        let Some(prepared) = entry.prepared.as_ref() else {
            return;
        };
        let mut tasks = Vec::with_capacity(prepared.task_configs.len());
        for id in 0..prepared.task_configs.len() as u32 {
            tasks.push(spawn_task(
                &self.shared,
                name,
                prepared,
                id,
                control,
                &entry.topics,
            ));
        }
        entry.tasks = tasks;
    }

    fn persist(&self, connectors: &BTreeMap<String, Entry>) -> Result<(), HerderError> {
        self.store
            .save(
                connectors
                    .iter()
                    .map(|(n, e)| (n, e.config.pairs.as_slice(), e.target)),
            )
            .map_err(HerderError::Internal)
    }

    fn masked(&self, entry: &Entry, pairs: &[(String, String)]) -> BTreeMap<String, String> {
        // Without a loaded plugin (a restored connector whose plugin is gone) its key types are
        // unknown: hide anything named like a secret rather than risk echoing one.
        let secret: BTreeSet<&str> = match entry.prepared.as_ref() {
            Some(p) => p
                .plugin
                .spec
                .config
                .iter()
                .filter(|k| k.ty == "PASSWORD")
                .map(|k| k.name.as_str())
                .collect(),
            None => pairs
                .iter()
                .map(|(k, _)| k.as_str())
                .filter(|k| {
                    ["password", "secret", "token", "credential", "key"]
                        .iter()
                        .any(|w| k.to_ascii_lowercase().contains(w))
                })
                .filter(|k| !k.ends_with(".converter") && !k.starts_with("key."))
                .collect(),
        };
        pairs
            .iter()
            .map(|(k, v)| {
                let value = if secret.contains(k.as_str()) {
                    HIDDEN.to_owned()
                } else {
                    v.clone()
                };
                (k.clone(), value)
            })
            .collect()
    }

    fn info_of(&self, name: &str, entry: &Entry) -> ConnectorInfo {
        let count = if entry.target == TargetState::Stopped {
            0
        } else {
            entry.tasks.len()
        };
        ConnectorInfo {
            name: name.to_owned(),
            config: self.masked(entry, &entry.config.pairs),
            tasks: (0..count as u32)
                .map(|task| TaskId {
                    connector: name.to_owned(),
                    task,
                })
                .collect(),
            kind: kind_name(entry.kind()),
        }
    }

    fn status_of(&self, name: &str, entry: &Entry) -> ConnectorStatus {
        let worker_id = self.shared.config.worker_id.clone();
        // A RUNNING connector or task says so when the cluster does not answer: its records
        // wait (nothing is lost) but nothing moves.
        let outage = self.shared.health.outage().map(|o| {
            format!(
                "{}; records wait and are sent once it answers",
                o.describe()
            )
        });
        let connector = match (&entry.failure, entry.target) {
            (Some(trace), _) => InstanceState {
                state: "FAILED",
                worker_id: worker_id.clone(),
                trace: Some(trace.clone()),
            },
            (None, target) => InstanceState {
                state: match target {
                    TargetState::Running => "RUNNING",
                    TargetState::Paused => "PAUSED",
                    TargetState::Stopped => "STOPPED",
                },
                worker_id: worker_id.clone(),
                trace: outage.clone().filter(|_| target == TargetState::Running),
            },
        };
        let tasks = entry
            .tasks
            .iter()
            .enumerate()
            .map(|(id, task)| {
                let state = task.metrics.state();
                TaskStatus {
                    id: id as u32,
                    state: InstanceState {
                        state: state.name(),
                        worker_id: worker_id.clone(),
                        trace: match state {
                            TaskState::Failed(trace) | TaskState::Restarting(trace) => Some(trace),
                            TaskState::Running => {
                                let detail = task.metrics.detail();
                                match (&outage, detail) {
                                    (Some(o), Some(d)) => Some(format!("{o}; {d}")),
                                    (Some(o), None) => Some(o.clone()),
                                    (None, d) => d,
                                }
                            }
                            _ => None,
                        },
                    },
                }
            })
            .collect();
        ConnectorStatus {
            name: name.to_owned(),
            connector,
            tasks,
            kind: kind_name(entry.kind()),
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

/// What a prepared connector's tasks claim of the worker's capacity.
fn claim_of(prepared: &Prepared) -> Claim {
    let claim = Claim::new(prepared.task_configs.len(), prepared.limits.memory_bytes);
    // Only instances with a directory grant can open files; each may hold its handle limit.
    if prepared.grants.dirs().is_empty() {
        claim
    } else {
        claim.with_files(prepared.limits.handles_max)
    }
}

fn kind_name(kind: Option<World>) -> &'static str {
    match kind {
        Some(World::Source) => "source",
        Some(World::Sink) => "sink",
        None => "unknown",
    }
}

async fn stop_task(task: &mut TaskHandle) {
    let _ = task.control.send(Control::Stop);
    if tokio::time::timeout(STOP_GRACE, &mut task.join)
        .await
        .is_err()
    {
        tracing::warn!("a task did not stop within {STOP_GRACE:?}; aborting it");
        task.join.abort();
    }
}

async fn stop_tasks(tasks: &mut Vec<TaskHandle>) {
    for task in tasks.iter() {
        let _ = task.control.send(Control::Stop);
    }
    // In parallel: stopping takes as long as the slowest task, not the sum of all.
    futures::future::join_all(tasks.iter_mut().map(stop_task)).await;
    tasks.clear();
}
