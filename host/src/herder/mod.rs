//! The herder: owns the worker's shared parts (sandbox, plugin registry, Kafka clients, offset
//! store, embedded broker) and the lifecycle of connectors and their tasks. Standalone mode:
//! every task runs in this process.

mod connector;
mod progress;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, watch};
use tokio::task::JoinHandle;

pub use connector::ConnectorStatus;
pub use progress::report_progress;

use crate::broker::EmbeddedBroker;
use crate::config::{ConnectorConfig, WorkerConfig};
use crate::kafka::producer::Producer;
use crate::kafka::topics::TopicCreator;
use crate::offsets::FileOffsetStore;
use crate::registry::Registry;
use crate::sandbox::Sandbox;
use crate::task::TaskMetrics;

/// The parts every connector shares.
pub(crate) struct Shared {
    pub config: WorkerConfig,
    pub sandbox: Arc<Sandbox>,
    pub registry: Arc<Registry>,
    pub bootstrap: String,
    pub producer: Arc<Producer>,
    pub topics: Arc<TopicCreator>,
    pub offsets: Arc<FileOffsetStore>,
}

/// A running connector: its tasks and how to stop them.
struct Running {
    stop: watch::Sender<bool>,
    tasks: Vec<(Arc<TaskMetrics>, JoinHandle<()>)>,
    plugin: String,
    kind: crate::plugin::World,
}

/// The standalone worker.
pub struct Herder {
    shared: Arc<Shared>,
    connectors: Mutex<BTreeMap<String, Running>>,
    _broker: Option<EmbeddedBroker>,
    _watcher: JoinHandle<()>,
}

impl Herder {
    /// Start the worker's shared parts: data directory, sandbox with the compile cache, the
    /// plugin registry (scanned, then watched), the embedded broker if no cluster is named, and
    /// the Kafka clients.
    pub async fn start(config: WorkerConfig) -> Result<Arc<Self>, String> {
        std::fs::create_dir_all(&config.data_dir)
            .map_err(|e| format!("data.dir: cannot create {}: {e}", config.data_dir.display()))?;
        let sandbox = Sandbox::new(Some(config.data_dir.join("compiled")))
            .map_err(|e| format!("cannot start the WebAssembly engine: {e:#}"))?;
        let registry = Registry::new(Arc::clone(&sandbox), &config.plugin_path);
        let report = registry.scan().await?;
        tracing::info!(
            plugins = registry.plugins().len(),
            skipped = report.failed.len(),
            dir = %config.plugin_path.display(),
            "plugins loaded"
        );
        let watcher = registry.watch(config.plugin_scan_interval);

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
        Ok(Arc::new(Self {
            shared: Arc::new(Shared {
                config,
                sandbox,
                registry,
                bootstrap,
                producer,
                topics,
                offsets,
            }),
            connectors: Mutex::new(BTreeMap::new()),
            _broker: broker,
            _watcher: watcher,
        }))
    }

    /// The Kafka cluster the worker uses (`host:port`).
    pub fn bootstrap(&self) -> &str {
        &self.shared.bootstrap
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.shared.config.data_dir.clone()
    }

    /// Validate `config`, split it into tasks and start them. Errors say what is wrong with
    /// which key; nothing is started then.
    pub async fn start_connector(&self, config: ConnectorConfig) -> Result<(), String> {
        let mut connectors = self.connectors.lock().await;
        if connectors.contains_key(&config.name) {
            return Err(format!(
                "name: a connector named {} is already running",
                config.name
            ));
        }
        let name = config.name.clone();
        let plugin = config.plugin.clone();
        let (stop, stop_rx) = watch::channel(false);
        let (kind, tasks) = connector::start(&self.shared, config, stop_rx).await?;
        connectors.insert(
            name,
            Running {
                stop,
                tasks,
                plugin,
                kind,
            },
        );
        Ok(())
    }

    /// Every connector with its tasks' states and counters.
    pub async fn status(&self) -> Vec<ConnectorStatus> {
        self.connectors
            .lock()
            .await
            .iter()
            .map(|(name, running)| ConnectorStatus {
                name: name.clone(),
                plugin: running.plugin.clone(),
                kind: running.kind,
                tasks: running.tasks.iter().map(|(m, _)| Arc::clone(m)).collect(),
            })
            .collect()
    }

    /// Stop every task (sources flush their offsets, sinks flush and commit) and wait for them,
    /// at most `grace`.
    pub async fn shutdown(&self, grace: Duration) {
        let mut connectors = self.connectors.lock().await;
        for running in connectors.values() {
            let _ = running.stop.send(true);
        }
        let deadline = tokio::time::Instant::now() + grace;
        for (name, running) in connectors.iter_mut() {
            for (_, handle) in running.tasks.iter_mut() {
                if tokio::time::timeout_at(deadline, &mut *handle)
                    .await
                    .is_err()
                {
                    tracing::warn!(connector = %name, "a task did not stop in time");
                    handle.abort();
                }
            }
        }
        let producer = Arc::clone(&self.shared.producer);
        let _ = tokio::task::spawn_blocking(move || producer.flush(Duration::from_secs(10))).await;
    }
}
