//! The worker: runs what the herder decided. It owns the parts every connector shares
//! (sandbox, registry, Kafka clients, offset store, capacity), prepares a connector from its
//! config into a [`RunningConnector`] (the plugin's connector instance with the settings parsed
//! once), owns every connector instance it runs by connector name and every task by
//! [`ConnectorTaskId`], so it can start and stop any subset of a connector's tasks (what an
//! assignment asks for). Tasks report their state through the status store.
//!
//! A prepared connector belongs to whoever asked for it (the connector's actor, while the
//! change it is for is checked and stored) until it is handed to [`WorkerOps::run_connector`];
//! from then on the worker owns it, and the actor reaches it by name.
//!
//! The herder reaches it through [`WorkerOps`] and [`ConnectorOps`], which its unit tests
//! implement with fakes.

mod prepare;
mod restart;
mod runner;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::Notify;

pub(crate) use prepare::{Prepared, connector_context, problems_message};
pub use restart::{
    RESTART_BACKOFF_INITIAL_MS, RESTART_BACKOFF_MAX_MS, RESTART_MAX_ATTEMPTS, RESTART_WINDOW_MS,
    RestartPolicy,
};
pub(crate) use runner::{STOP_MARGIN, TaskHandle};

use crate::config::{ConnectorConfig, Problem, WorkerConfig};
use crate::herder::{Capacity, Claim};
use crate::kafka::health::KafkaHealth;
use crate::kafka::producer::Producer;
use crate::kafka::topics::TopicCreator;
use crate::offsets::OffsetStore;
use crate::plugin::World;
use crate::registry::Registry;
use crate::sandbox::{CallError, ConnectorInstance, Sandbox};
use crate::storage::{ConnectorTaskId, Pairs, StatusStore};
use crate::task::{ActiveTopics, Control, TaskMetrics};

pub use crate::sandbox::instance::MonitorReport;

/// The parts every connector shares.
pub(crate) struct Shared {
    pub config: WorkerConfig,
    pub sandbox: Arc<Sandbox>,
    pub registry: Arc<Registry>,
    pub bootstrap: String,
    pub producer: Arc<Producer>,
    pub topics: Arc<TopicCreator>,
    pub offsets: Arc<dyn OffsetStore>,
    /// The tasks and memory admitted so far.
    pub capacity: Capacity,
    /// Whether the Kafka cluster answers.
    pub health: Arc<KafkaHealth>,
    /// This worker's identity across restarts (kept in the data directory): part of its sink
    /// consumers' static group membership ids.
    pub instance_id: String,
    /// Where connectors and tasks report their states.
    pub status: Arc<dyn StatusStore>,
    /// Distributed mode: what every producer's sends wait on while the worker's group
    /// membership is unconfirmed.
    pub fence: Option<Arc<crate::kafka::group::Fence>>,
}

/// What a connector is, as the herder shows it: known once its config checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorFacts {
    /// Source or sink.
    pub world: World,
    /// The plugin's name and version (KIP-891's `version` in statuses).
    pub plugin: String,
    pub version: String,
    /// Which build of the plugin: its file and content hash (a file rescanned after a touch,
    /// or an atomic copy of the same bytes, is the same build).
    pub build: (std::path::PathBuf, String),
    /// Keys whose values are secrets (`PASSWORD` in the plugin's spec), hidden when shown.
    pub secret_keys: std::collections::BTreeSet<String>,
    /// `tasks.max`.
    pub tasks_max: u32,
    /// When its failed tasks (and failed splits) are retried.
    pub restart: RestartPolicy,
    /// How often its `monitor` is called, unless it asks for another time.
    pub monitor_interval: Duration,
}

/// A build of a plugin in the plugin directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginBuild {
    /// Its file and content hash, as [`ConnectorFacts::build`].
    pub file: (std::path::PathBuf, String),
    /// The version its spec gives.
    pub version: String,
}

/// What the herder needs of a worker.
pub(crate) trait WorkerOps: Send + Sync + 'static {
    /// A connector as this worker prepares and runs it.
    type Connector: ConnectorOps;

    /// Check `config` completely (worker keys, the plugin's definitions, grants, limits,
    /// converters, then the plugin's own `validate`) and instantiate its connector, not yet
    /// created. Its instances (the connector's and its tasks') notify `reconfigure` to ask for
    /// a new split.
    fn prepare(
        &self,
        config: &ConnectorConfig,
        reconfigure: Arc<Notify>,
    ) -> impl Future<Output = Result<Self::Connector, Vec<Problem>>> + Send;

    /// Run `connector` as connector `name`'s instance from now on: the worker owns it, and
    /// the connector's tasks start from its plugin. The instance it replaces, if any, is
    /// stopped (within the shutdown grace).
    fn run_connector(
        &self,
        name: &str,
        connector: Self::Connector,
    ) -> impl Future<Output = ()> + Send;

    /// Connector `name`'s instance, if this worker runs one.
    fn connector(&self, name: &str) -> Option<Arc<Self::Connector>>;

    /// Stop connector `name`'s instance, if this worker runs one (within the shutdown grace),
    /// and forget it.
    fn stop_connector(&self, name: &str) -> impl Future<Output = ()> + Send;

    /// Start task `id` from `config` (a config of its connector's stored split, which has
    /// `split_size` tasks) with the plugin of the connector instance this worker runs, in
    /// `control` state, reporting its state through the status store. `None` if no instance
    /// of the connector runs here (a caller's bug, logged). A task of that id already running
    /// here is replaced only after it stopped: the caller stops it first.
    fn start_task(
        &self,
        id: ConnectorTaskId,
        config: &Pairs,
        split_size: usize,
        control: Control,
        topics: &ActiveTopics,
    ) -> Option<Arc<TaskMetrics>>;

    /// Stop tasks `ids` at once (each flushes and commits first) and wait for them; each is
    /// abandoned past the shutdown grace.
    fn stop_tasks(&self, ids: Vec<ConnectorTaskId>) -> impl Future<Output = ()> + Send;

    /// Tell running tasks `ids` to run or pause.
    fn control_tasks(&self, ids: &[ConnectorTaskId], control: Control);

    /// The capacity connectors are admitted against.
    fn capacity(&self) -> &Capacity;

    /// The build `config` resolves to in the plugin directory now, if any: its file, content
    /// hash and version.
    fn current_build(&self, config: &ConnectorConfig) -> Option<PluginBuild>;

    /// The status store.
    fn status(&self) -> &Arc<dyn StatusStore>;

    /// This worker's id, as statuses show it.
    fn worker_id(&self) -> &str;

    /// Watch the plugin directory: `changed` is called after every change, until it returns
    /// false. Returns the tasks that watch, to abort when the worker stops.
    fn watch_plugins(
        &self,
        changed: Box<dyn Fn() -> bool + Send + Sync>,
    ) -> Vec<tokio::task::JoinHandle<()>>;

    /// Send what the shared producer holds, within a bound (the worker is stopping).
    fn flush(&self) -> impl Future<Output = ()> + Send;

    /// How long a plugin's `stop` may take (`task.shutdown.graceful.timeout.ms`).
    fn shutdown_grace(&self) -> Duration;

    /// Why the Kafka cluster does not answer, if it does not.
    fn outage(&self) -> Option<String>;
}

/// One prepared connector: the plugin's connector instance and what it was prepared with. Its
/// calls take `&self`: whoever holds it (its actor, or the worker through an `Arc`) calls it
/// from one place at a time.
pub(crate) trait ConnectorOps: Send + Sync + 'static {
    /// What the connector is.
    fn facts(&self) -> &ConnectorFacts;

    /// What `tasks` of its tasks claim of the worker's capacity.
    fn claim(&self, tasks: usize) -> Claim;

    /// `text` (a plugin's error, say) without the resolved secrets of its config.
    fn redact(&self, text: &str) -> String;

    /// Whether the connector's contract has a `monitor`.
    fn monitors(&self) -> bool;

    /// Whether `create` succeeded (and `stop` was not called since).
    fn is_created(&self) -> bool;

    /// `connector-instance.create` with the connector's config, if not done yet.
    fn create(&self) -> impl Future<Output = Result<(), CallError>> + Send;

    /// Create the connector if that is not done yet, then split its work into at most
    /// `tasks.max` task configs, with config provider placeholders put back where a value is
    /// exactly a resolved one (what is stored).
    fn task_configs(&self) -> impl Future<Output = Result<Vec<Pairs>, CallError>> + Send;

    /// `connector-instance.monitor`.
    fn monitor(&self) -> impl Future<Output = Result<MonitorReport, CallError>> + Send;

    /// `connector-instance.stop`, abandoned past `grace`; logs a failure.
    fn stop(&self, grace: Duration) -> impl Future<Output = ()> + Send;
}

/// The worker: the shared parts, every connector instance running here by name, and every
/// task by id.
pub(crate) struct Worker {
    shared: Arc<Shared>,
    connectors: Mutex<HashMap<String, Arc<RunningConnector>>>,
    tasks: Mutex<HashMap<ConnectorTaskId, TaskHandle>>,
}

impl Worker {
    /// A worker running nothing yet.
    pub fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            connectors: Mutex::new(HashMap::new()),
            tasks: Mutex::new(HashMap::new()),
        }
    }

    /// The shared parts.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    fn tasks(&self) -> std::sync::MutexGuard<'_, HashMap<ConnectorTaskId, TaskHandle>> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn connectors(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<RunningConnector>>> {
        self.connectors.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl WorkerOps for Worker {
    type Connector = RunningConnector;

    async fn prepare(
        &self,
        config: &ConnectorConfig,
        reconfigure: Arc<Notify>,
    ) -> Result<RunningConnector, Vec<Problem>> {
        let (prepared, instance) = prepare::prepare(&self.shared, config, reconfigure).await?;
        let facts = prepared.facts();
        Ok(RunningConnector {
            name: config.name.clone(),
            prepared: Arc::new(prepared),
            monitors: instance.monitors(),
            instance: tokio::sync::Mutex::new(Some(instance)),
            created: AtomicBool::new(false),
            facts,
        })
    }

    async fn run_connector(&self, name: &str, connector: RunningConnector) {
        let replaced = self
            .connectors()
            .insert(name.to_owned(), Arc::new(connector));
        if let Some(old) = replaced {
            old.stop(self.shutdown_grace()).await;
        }
    }

    fn connector(&self, name: &str) -> Option<Arc<RunningConnector>> {
        self.connectors().get(name).cloned()
    }

    async fn stop_connector(&self, name: &str) {
        let stopped = self.connectors().remove(name);
        if let Some(old) = stopped {
            old.stop(self.shutdown_grace()).await;
        }
    }

    fn start_task(
        &self,
        id: ConnectorTaskId,
        config: &Pairs,
        split_size: usize,
        control: Control,
        topics: &ActiveTopics,
    ) -> Option<Arc<TaskMetrics>> {
        let Some(connector) = self.connector(&id.connector) else {
            tracing::error!(connector = %id.connector, task = id.task, "worker bug: task {id} was to start with no instance of its connector running here; not started");
            return None;
        };
        let handle = runner::spawn_task(
            &self.shared,
            &id,
            &connector.prepared,
            config.clone(),
            split_size,
            control,
            topics,
        );
        let metrics = Arc::clone(&handle.metrics);
        if let Some(replaced) = self.tasks().insert(id.clone(), handle) {
            // The caller stops a task before it starts it again; one still here is a bug.
            tracing::error!(connector = %id.connector, task = id.task, "worker bug: task {id} was started while it ran; the old one is aborted");
            replaced.join.abort();
        }
        Some(metrics)
    }

    async fn stop_tasks(&self, ids: Vec<ConnectorTaskId>) {
        let mut handles: Vec<TaskHandle> = {
            let mut tasks = self.tasks();
            ids.iter().filter_map(|id| tasks.remove(id)).collect()
        };
        runner::stop_all(&mut handles).await;
    }

    fn control_tasks(&self, ids: &[ConnectorTaskId], control: Control) {
        let tasks = self.tasks();
        for id in ids {
            if let Some(task) = tasks.get(id) {
                let _ = task.control.send(control);
            }
        }
    }

    fn capacity(&self) -> &Capacity {
        &self.shared.capacity
    }

    fn current_build(&self, config: &ConnectorConfig) -> Option<PluginBuild> {
        self.shared
            .registry
            .find(&config.plugin, config.plugin_version.as_deref())
            .map(|p| PluginBuild {
                file: (p.path.clone(), p.sha256.clone()),
                version: p.spec.version.clone(),
            })
    }

    fn status(&self) -> &Arc<dyn StatusStore> {
        &self.shared.status
    }

    fn worker_id(&self) -> &str {
        &self.shared.config.worker_id
    }

    fn shutdown_grace(&self) -> Duration {
        self.shared.config.task.shutdown_grace
    }

    fn watch_plugins(
        &self,
        changed: Box<dyn Fn() -> bool + Send + Sync>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let registry = &self.shared.registry;
        let mut changes = registry.subscribe();
        vec![
            registry.watch(self.shared.config.plugin_scan_interval),
            tokio::spawn(async move {
                while changes.changed().await.is_ok() {
                    if !changed() {
                        return;
                    }
                }
            }),
        ]
    }

    async fn flush(&self) {
        let producer = Arc::clone(&self.shared.producer);
        let _ = tokio::task::spawn_blocking(move || producer.flush(Duration::from_secs(10))).await;
    }

    fn outage(&self) -> Option<String> {
        self.shared.health.outage().map(|o| o.describe())
    }
}

/// A connector prepared by the [`Worker`]: its settings and its plugin instance. Every call
/// into the instance runs on the plugin runtime, where task calls run, never on the runtime of
/// the control loop, the record loops and the REST server.
pub(crate) struct RunningConnector {
    name: String,
    prepared: Arc<Prepared>,
    /// `None` only while a call is out on the plugin runtime, or after one was lost there. The
    /// lock is held for the whole call, so calls never overlap.
    instance: tokio::sync::Mutex<Option<ConnectorInstance>>,
    /// Whether the instance's contract has `monitor`.
    monitors: bool,
    created: AtomicBool,
    facts: ConnectorFacts,
}

impl RunningConnector {
    /// Run `call` on the instance on the plugin runtime and wait for it. A call whose task
    /// ended without handing the instance back (it panicked: a worker bug) loses the instance:
    /// later calls fail with `Lost`.
    async fn call<T: Send + 'static>(
        &self,
        function: &'static str,
        call: impl for<'a> FnOnce(&'a mut ConnectorInstance) -> BoxFuture<'a, Result<T, CallError>>
        + Send
        + 'static,
    ) -> Result<T, CallError> {
        let mut slot = self.instance.lock().await;
        let Some(mut instance) = slot.take() else {
            return Err(CallError::Lost {
                function,
                message: "an earlier call lost the connector instance".to_owned(),
            });
        };
        let task = crate::task::poll_ahead::runtime().spawn(async move {
            let outcome = call(&mut instance).await;
            (instance, outcome)
        });
        // Dropped (its caller gave up on it): the call is cancelled, and the instance with it.
        let mut task = AbortOnDrop(task);
        match (&mut task.0).await {
            Ok((instance, outcome)) => {
                *slot = Some(instance);
                outcome
            }
            Err(e) => Err(CallError::Lost {
                function,
                message: e.to_string(),
            }),
        }
    }
}

/// Aborts its task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl ConnectorOps for RunningConnector {
    fn facts(&self) -> &ConnectorFacts {
        &self.facts
    }

    fn claim(&self, tasks: usize) -> Claim {
        let prepared = &self.prepared;
        let claim = Claim::new(tasks, prepared.limits.memory_bytes);
        // Only instances with a directory grant can open files; each may hold its handle limit.
        if prepared.grants.dirs().is_empty() {
            claim
        } else {
            claim.with_files(prepared.limits.handles_max)
        }
    }

    fn redact(&self, text: &str) -> String {
        self.prepared.resolved.redact(text)
    }

    fn monitors(&self) -> bool {
        self.is_created() && self.monitors
    }

    fn is_created(&self) -> bool {
        self.created.load(Ordering::Acquire)
    }

    async fn create(&self) -> Result<(), CallError> {
        if self.is_created() {
            return Ok(());
        }
        let pairs = self.prepared.pairs.clone();
        self.call("connector-instance.create", move |i| {
            Box::pin(async move { i.create(&pairs).await })
        })
        .await?;
        self.created.store(true, Ordering::Release);
        Ok(())
    }

    async fn task_configs(&self) -> Result<Vec<Pairs>, CallError> {
        self.create().await?;
        let max = self.prepared.tasks_max;
        let configs = self
            .call("task-configs", move |i| {
                Box::pin(async move { i.task_configs(max).await })
            })
            .await?;
        let prepared = &self.prepared;
        tracing::info!(connector = %self.name, plugin = %prepared.plugin.spec.name, version = %prepared.plugin.spec.version, tasks = configs.len(), tasks_max = max, "connector configured");
        Ok(configs
            .iter()
            .map(|c| prepared.resolved.placeholders_back(c))
            .collect())
    }

    async fn monitor(&self) -> Result<MonitorReport, CallError> {
        self.call("monitor", |i| Box::pin(async move { i.monitor().await }))
            .await
    }

    async fn stop(&self, grace: Duration) {
        self.created.store(false, Ordering::Release);
        let stopping = self.call("connector-instance.stop", |i| {
            Box::pin(async move { i.stop().await })
        });
        match tokio::time::timeout(grace, stopping).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let e = self.redact(&e.to_string());
                tracing::warn!(connector = %self.name, "the connector's stop failed: {e}");
            }
            Err(_) => {
                tracing::warn!(connector = %self.name, "the connector's stop did not return within {grace:?} (task.shutdown.graceful.timeout.ms); abandoned");
            }
        }
    }
}

/// Every problem with `config` for the plugin it names, without creating the connector or
/// splitting its work: the worker's checks, the plugin's `validate`, and whether one task of
/// it fits the worker's capacity (the split, which decides how many tasks there are, is judged
/// when the connector is created).
pub(crate) async fn validate(shared: &Shared, config: &ConnectorConfig) -> Vec<Problem> {
    match prepare::prepare(shared, config, Arc::new(Notify::new())).await {
        Ok((prepared, _instance)) => {
            let connector = RunningConnector {
                name: config.name.clone(),
                facts: prepared.facts(),
                prepared: Arc::new(prepared),
                monitors: false,
                instance: tokio::sync::Mutex::new(None),
                created: AtomicBool::new(false),
            };
            shared
                .capacity
                .fits(&config.name, connector.claim(1))
                .err()
                .into_iter()
                .collect()
        }
        Err(problems) => problems,
    }
}
