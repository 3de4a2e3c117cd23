//! The decision core without a broker: the control loop and the connector actors against a fake
//! worker and an in-memory config log, with paused time, one test per rule (as Kafka Connect's
//! `DistributedHerderTest` tests its herder against mocks). What the fakes run is checked
//! against what the log holds: every task is started from a split the log held at that moment.
//!
//! The fake plugin is steered by keys of the connector config:
//! - `tasks.max`: the split has that many tasks, task `i`'s config `{"task": i}`.
//! - `fake.invalid`: the config does not check out.
//! - `fake.split.retriable=N`: `task-configs` fails retriably its first N calls (per connector).
//! - `fake.split.fatal`: `task-configs` fails for good.
//! - `fake.generation`: each task config also carries the number of `task-configs` calls so
//!   far, so every split differs from the one before.
//! - `fake.hang`: preparing the connector never ends.
//! - `fake.create.retriable=N`: `create` fails retriably its first N calls (per connector).
//! - `fake.monitor=reconfigure|fatal`: the connector is monitored; `monitor` reports a change
//!   in its work, or fails for good.
//!
//! The fake plugin's build is the worker's `build` (a plugin replaced between runs).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{Notify, mpsc, oneshot, watch};

use super::actor::Command;
use super::control::{ControlLoop, Message};
use super::offsets::{ConnectorOffset, OffsetAdmin};
use super::status::{ConnectorInfo, ConnectorStatus};
use super::view::{ConnectorView, Snapshot, status_of};
use super::{Capacity, CapacityLimits, Claim, HerderError};
use crate::config::{ConnectorConfig, Problem};
use crate::plugin::World;
use crate::sandbox::CallError;
use crate::sandbox::wit::types::PluginError;
use crate::storage::{
    ConfigEvent, ConfigLog, ConfigRecord, ConfigState, ConnectorTaskId, MemoryStatusStore, Pairs,
    StatusStore, TargetState,
};
use crate::task::{ActiveTopics, Control, TaskMetrics, TaskState};
use crate::worker::{
    ConnectorFacts, ConnectorOps, MonitorReport, PluginBuild, RestartPolicy, WorkerOps,
};

/// The config log in memory; its writes fail while `fail` is set, and with a `lag` its
/// subscribers get each append's events that long after it returned (as a Kafka consumer reads
/// back a record some time after the producer's ack), in order.
#[derive(Default)]
struct MemoryLog {
    state: Mutex<ConfigState>,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<ConfigEvent>>>,
    fail: AtomicBool,
    lag: Mutex<Option<mpsc::UnboundedSender<Appended>>>,
}

/// An append's events, and when it returned.
type Appended = (tokio::time::Instant, Vec<ConfigEvent>);

impl MemoryLog {
    /// Deliver every later append's events `lag` after it.
    fn lag(self: &Arc<Self>, lag: Duration) {
        let (tx, mut rx) = mpsc::unbounded_channel::<Appended>();
        *self.lag.lock().unwrap() = Some(tx);
        let log = Arc::clone(self);
        tokio::spawn(async move {
            while let Some((at, events)) = rx.recv().await {
                tokio::time::sleep_until(at + lag).await;
                log.deliver(&events);
            }
        });
    }

    fn deliver(&self, events: &[ConfigEvent]) {
        for subscriber in self.subscribers.lock().unwrap().iter() {
            for event in events {
                let _ = subscriber.send(event.clone());
            }
        }
    }
}

impl ConfigLog for MemoryLog {
    fn read(&self) -> Result<ConfigState, String> {
        Ok(self.state.lock().unwrap().clone())
    }

    fn append(
        &self,
        records: Vec<ConfigRecord>,
    ) -> BoxFuture<'_, Result<Vec<ConfigEvent>, String>> {
        Box::pin(async move {
            if self.fail.load(Ordering::SeqCst) {
                return Err("the disk is full".to_owned());
            }
            let events = self.state.lock().unwrap().append(records);
            match &*self.lag.lock().unwrap() {
                Some(lagging) => {
                    let _ = lagging.send((tokio::time::Instant::now(), events.clone()));
                }
                None => self.deliver(&events),
            }
            Ok(events)
        })
    }

    fn subscribe(&self) -> mpsc::UnboundedReceiver<ConfigEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.subscribers.lock().unwrap().push(tx);
        rx
    }
}

/// One task the fake runs.
struct FakeTask {
    config: Pairs,
    metrics: Arc<TaskMetrics>,
}

/// The fake worker: runs nothing, records every call, and checks that each task it starts
/// runs a split the log holds.
struct FakeWorker {
    log: Arc<MemoryLog>,
    capacity: Capacity,
    status: Arc<dyn StatusStore>,
    calls: Mutex<Vec<String>>,
    tasks: Mutex<BTreeMap<ConnectorTaskId, FakeTask>>,
    /// `task-configs` calls per connector.
    splits: Mutex<HashMap<String, u32>>,
    /// `create` calls per connector.
    creates: Mutex<HashMap<String, u32>>,
    /// The content hash of the fake plugin's build.
    build: Mutex<String>,
    /// Starts of tasks whose config the log did not hold.
    unstored_starts: Mutex<Vec<ConnectorTaskId>>,
    /// Notified by every call recorded.
    called: Notify,
    /// What each connector's instances notify to ask for a new split.
    reconfigure: Mutex<HashMap<String, Arc<Notify>>>,
    /// The connector instances it runs, by name.
    connectors: Mutex<HashMap<String, Arc<FakeConnector>>>,
}

impl FakeWorker {
    fn new(log: Arc<MemoryLog>, tasks_per_worker: u32) -> Self {
        Self {
            log,
            capacity: Capacity::new(CapacityLimits {
                tasks_per_worker,
                tasks_per_connector: tasks_per_worker,
                memory_budget: u64::MAX,
                files_budget: u64::MAX,
            }),
            status: Arc::new(MemoryStatusStore::default()),
            calls: Mutex::new(Vec::new()),
            tasks: Mutex::new(BTreeMap::new()),
            splits: Mutex::new(HashMap::new()),
            creates: Mutex::new(HashMap::new()),
            build: Mutex::new("build-1".into()),
            unstored_starts: Mutex::new(Vec::new()),
            called: Notify::new(),
            reconfigure: Mutex::new(HashMap::new()),
            connectors: Mutex::new(HashMap::new()),
        }
    }

    fn record(&self, call: String) {
        self.calls.lock().unwrap().push(call);
        self.called.notify_waiters();
    }

    /// Calls recorded so far that start with `prefix`.
    fn count(&self, prefix: &str) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.starts_with(prefix))
            .count()
    }

    /// The tasks running, with their configs' `task` and their state.
    fn running(&self) -> Vec<(String, TaskState)> {
        self.tasks
            .lock()
            .unwrap()
            .iter()
            .map(|(id, t)| (id.to_string(), t.metrics.state()))
            .collect()
    }

    fn running_config(&self, id: &ConnectorTaskId) -> Option<Pairs> {
        self.tasks.lock().unwrap().get(id).map(|t| t.config.clone())
    }

    fn fail_task(&self, id: &ConnectorTaskId) {
        if let Some(task) = self.tasks.lock().unwrap().get(id) {
            task.metrics.set_state(TaskState::Failed("boom".into()));
        }
    }
}

struct FakeConnector {
    name: String,
    config: ConnectorConfig,
    created: AtomicBool,
    facts: ConnectorFacts,
    worker: Arc<FakeWorker>,
}

impl ConnectorOps for FakeConnector {
    fn facts(&self) -> &ConnectorFacts {
        &self.facts
    }

    fn claim(&self, tasks: usize) -> Claim {
        Claim::new(tasks, 1 << 20)
    }

    fn redact(&self, text: &str) -> String {
        text.to_owned()
    }

    fn monitors(&self) -> bool {
        self.is_created() && self.config.get("fake.monitor").is_some()
    }

    fn is_created(&self) -> bool {
        self.created.load(Ordering::SeqCst)
    }

    async fn create(&self) -> Result<(), CallError> {
        if self.is_created() {
            return Ok(());
        }
        self.worker.record(format!("create {}", self.name));
        let calls = {
            let mut creates = self.worker.creates.lock().unwrap();
            let calls = creates.entry(self.name.clone()).or_default();
            *calls += 1;
            *calls
        };
        let retriable: u32 = self
            .config
            .get("fake.create.retriable")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if calls <= retriable {
            return Err(CallError::Plugin {
                function: "create",
                error: PluginError::Retriable("the database is starting".into()),
            });
        }
        self.created.store(true, Ordering::SeqCst);
        Ok(())
    }

    async fn task_configs(&self) -> Result<Vec<Pairs>, CallError> {
        self.create().await?;
        self.worker.record(format!("task-configs {}", self.name));
        let calls = {
            let mut splits = self.worker.splits.lock().unwrap();
            let calls = splits.entry(self.name.clone()).or_default();
            *calls += 1;
            *calls
        };
        let retriable: u32 = self
            .config
            .get("fake.split.retriable")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if calls <= retriable {
            return Err(CallError::Plugin {
                function: "task-configs",
                error: PluginError::Retriable("not yet".into()),
            });
        }
        if self.config.get("fake.split.fatal").is_some() {
            return Err(CallError::Plugin {
                function: "task-configs",
                error: PluginError::Fatal("never".into()),
            });
        }
        let generation = self.config.get("fake.generation").is_some();
        Ok((0..self.config.tasks_max)
            .map(|i| {
                let mut config = vec![("task".to_owned(), i.to_string())];
                if generation {
                    config.push(("generation".to_owned(), calls.to_string()));
                }
                config
            })
            .collect())
    }

    async fn monitor(&self) -> Result<MonitorReport, CallError> {
        self.worker.record(format!("monitor {}", self.name));
        match self.config.get("fake.monitor") {
            Some("fatal") => Err(CallError::Plugin {
                function: "monitor",
                error: PluginError::Fatal("the table is gone".into()),
            }),
            report => Ok(MonitorReport {
                reconfigure: report == Some("reconfigure"),
                next_call_ms: None,
            }),
        }
    }

    async fn stop(&self, _grace: Duration) {
        self.created.store(false, Ordering::SeqCst);
        self.worker.record(format!("stop-connector {}", self.name));
    }
}

impl WorkerOps for Arc<FakeWorker> {
    type Connector = FakeConnector;

    async fn prepare(
        &self,
        config: &ConnectorConfig,
        reconfigure: Arc<Notify>,
    ) -> Result<FakeConnector, Vec<Problem>> {
        self.record(format!("prepare {}", config.name));
        self.reconfigure
            .lock()
            .unwrap()
            .insert(config.name.clone(), reconfigure);
        if config.get("fake.hang").is_some() {
            std::future::pending::<()>().await;
        }
        if config.get("fake.invalid").is_some() {
            return Err(vec![Problem::new("fake.invalid", "is set")]);
        }
        Ok(FakeConnector {
            name: config.name.clone(),
            config: config.clone(),
            created: AtomicBool::new(false),
            facts: ConnectorFacts {
                world: World::Source,
                plugin: "fake".into(),
                version: "1.0.0".into(),
                build: ("fake.wasm".into(), self.build.lock().unwrap().clone()),
                secret_keys: Default::default(),
                tasks_max: config.tasks_max,
                restart: RestartPolicy {
                    max_attempts: 3,
                    window: Duration::from_secs(300),
                    initial_backoff: Duration::from_secs(1),
                    max_backoff: Duration::from_secs(10),
                },
                monitor_interval: Duration::from_secs(60),
            },
            worker: Arc::clone(self),
        })
    }

    async fn run_connector(&self, name: &str, connector: FakeConnector) {
        let replaced = self
            .connectors
            .lock()
            .unwrap()
            .insert(name.to_owned(), Arc::new(connector));
        if let Some(old) = replaced {
            old.stop(self.shutdown_grace()).await;
        }
    }

    fn connector(&self, name: &str) -> Option<Arc<FakeConnector>> {
        self.connectors.lock().unwrap().get(name).cloned()
    }

    async fn stop_connector(&self, name: &str) {
        let stopped = self.connectors.lock().unwrap().remove(name);
        if let Some(old) = stopped {
            old.stop(self.shutdown_grace()).await;
        }
    }

    fn start_task(
        &self,
        id: ConnectorTaskId,
        config: &Pairs,
        _split_size: usize,
        control: Control,
        _topics: &ActiveTopics,
    ) -> Option<Arc<TaskMetrics>> {
        self.record(format!("start {id}"));
        assert!(
            self.connector(&id.connector).is_some(),
            "{id} was started with no instance of its connector running"
        );
        let stored = self
            .log
            .read()
            .unwrap()
            .connectors
            .get(&id.connector)
            .and_then(|c| {
                c.tasks
                    .as_ref()
                    .and_then(|t| t.get(id.task as usize).cloned())
            });
        if stored.as_ref() != Some(config) {
            self.unstored_starts.lock().unwrap().push(id.clone());
        }
        let metrics = Arc::new(TaskMetrics::reporting(
            id.clone(),
            Arc::clone(&self.status),
            "fake".into(),
        ));
        metrics.set_state(if control == Control::Pause {
            TaskState::Paused
        } else {
            TaskState::Running
        });
        let replaced = self.tasks.lock().unwrap().insert(
            id.clone(),
            FakeTask {
                config: config.clone(),
                metrics: Arc::clone(&metrics),
            },
        );
        assert!(replaced.is_none(), "{id} was started while it ran");
        Some(metrics)
    }

    async fn stop_tasks(&self, ids: Vec<ConnectorTaskId>) {
        for id in ids {
            self.record(format!("stop {id}"));
            if let Some(task) = self.tasks.lock().unwrap().remove(&id) {
                task.metrics.set_state(TaskState::Stopped);
            }
        }
    }

    fn control_tasks(&self, ids: &[ConnectorTaskId], control: Control) {
        let tasks = self.tasks.lock().unwrap();
        for id in ids {
            if let Some(task) = tasks.get(id) {
                task.metrics.set_state(if control == Control::Pause {
                    TaskState::Paused
                } else {
                    TaskState::Running
                });
            }
        }
    }

    fn capacity(&self) -> &Capacity {
        &self.capacity
    }

    fn current_build(&self, _config: &ConnectorConfig) -> Option<PluginBuild> {
        Some(PluginBuild {
            file: ("fake.wasm".into(), self.build.lock().unwrap().clone()),
            version: "1.0.0".into(),
        })
    }

    fn status(&self) -> &Arc<dyn StatusStore> {
        &self.status
    }

    fn worker_id(&self) -> &str {
        "fake"
    }

    fn watch_plugins(
        &self,
        _changed: Box<dyn Fn() -> bool + Send + Sync>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        Vec::new()
    }

    async fn flush(&self) {}

    fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(5)
    }

    fn outage(&self) -> Option<String> {
        None
    }
}

impl OffsetAdmin for Arc<FakeWorker> {
    async fn alter_offsets(
        &self,
        name: &str,
        _view: &ConnectorView,
        _changes: &[ConnectorOffset],
    ) -> Result<(), HerderError> {
        self.record(format!("alter-offsets {name}"));
        Ok(())
    }

    async fn reset_offsets(&self, name: &str, _view: &ConnectorView) -> Result<(), HerderError> {
        self.record(format!("reset-offsets {name}"));
        Ok(())
    }
}

/// The control loop over the fakes, and the herder's requests to it.
struct Harness {
    worker: Arc<FakeWorker>,
    log: Arc<MemoryLog>,
    snapshot: Arc<Snapshot>,
    control: mpsc::UnboundedSender<Message>,
}

fn config(name: &str, extra: &[(&str, &str)]) -> ConnectorConfig {
    let mut pairs = vec![
        ("name".to_owned(), name.to_owned()),
        ("connector.class".to_owned(), "fake".to_owned()),
        ("tasks.max".to_owned(), "2".to_owned()),
    ];
    for (k, v) in extra {
        pairs.retain(|(key, _)| key != k);
        pairs.push((k.to_string(), v.to_string()));
    }
    ConnectorConfig::from_pairs(pairs).unwrap()
}

impl Harness {
    /// A loop over `log` (already holding what an earlier run stored), loaded.
    async fn with_log(log: Arc<MemoryLog>, tasks_per_worker: u32) -> Self {
        Self::start(log, tasks_per_worker, "build-1").await
    }

    /// A loop over `log` whose worker has the fake plugin's build `build`, loaded.
    async fn start(log: Arc<MemoryLog>, tasks_per_worker: u32, build: &str) -> Self {
        let worker = Arc::new(FakeWorker::new(Arc::clone(&log), tasks_per_worker));
        *worker.build.lock().unwrap() = build.to_owned();
        let snapshot = Arc::new(Snapshot::default());
        let (started, _) = watch::channel(false);
        let control = ControlLoop::spawn(
            Arc::new(Arc::clone(&worker)),
            Arc::clone(&snapshot),
            Arc::clone(&log) as Arc<dyn ConfigLog>,
            started,
            false,
        );
        let (loaded, is_loaded) = oneshot::channel();
        let (reply, _restored) = oneshot::channel();
        control.send(Message::Load { loaded, reply }).unwrap();
        is_loaded.await.unwrap().unwrap();
        Self {
            worker,
            log,
            snapshot,
            control,
        }
    }

    async fn new() -> Self {
        Self::with_log(Arc::default(), 100).await
    }

    async fn create(
        &self,
        name: &str,
        extra: &[(&str, &str)],
    ) -> Result<ConnectorInfo, HerderError> {
        let (reply, answer) = oneshot::channel();
        self.control
            .send(Message::Create {
                config: config(name, extra),
                target: TargetState::Running,
                reply,
            })
            .unwrap();
        answer.await.unwrap().map(|(_, info)| info)
    }

    async fn put(
        &self,
        name: &str,
        extra: &[(&str, &str)],
    ) -> Result<(bool, ConnectorInfo), HerderError> {
        let (reply, answer) = oneshot::channel();
        self.control
            .send(Message::PutConfig {
                config: config(name, extra),
                reply,
            })
            .unwrap();
        answer.await.unwrap()
    }

    async fn command<T>(
        &self,
        name: &str,
        make: impl FnOnce(super::actor::Reply<T>) -> Command,
    ) -> Result<T, HerderError> {
        let (reply, answer) = oneshot::channel();
        self.control
            .send(Message::Connector {
                name: name.to_owned(),
                command: make(reply),
            })
            .unwrap();
        answer
            .await
            .unwrap_or_else(|_| Err(HerderError::Internal("unanswered".into())))
    }

    async fn target(&self, name: &str, target: TargetState) -> Result<(), HerderError> {
        self.command(name, |reply| Command::SetTarget { target, reply })
            .await
    }

    async fn restart(
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

    async fn delete(&self, name: &str) -> Result<(), HerderError> {
        self.command(name, |reply| Command::Delete { reply }).await
    }

    /// The status reads would show.
    fn status(&self, name: &str) -> ConnectorStatus {
        let view = self.snapshot.get(name).expect("no such connector");
        status_of(self.worker.status.as_ref(), None, name, &view)
    }

    fn stored(&self) -> ConfigState {
        self.log.read().unwrap()
    }

    fn running(&self) -> Vec<(String, TaskState)> {
        self.worker.running()
    }

    /// Wait (in paused time) until `done` holds.
    async fn until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        for _ in 0..600 {
            if done(self) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "{what} did not happen; calls: {:?}",
            self.worker.calls.lock().unwrap()
        );
    }

    fn no_unstored_starts(&self) {
        assert_eq!(
            *self.worker.unstored_starts.lock().unwrap(),
            Vec::<ConnectorTaskId>::new(),
            "tasks started from a split the log did not hold"
        );
    }
}

fn running(ids: &[&str]) -> Vec<(String, TaskState)> {
    ids.iter()
        .map(|id| (id.to_string(), TaskState::Running))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_created_connector_is_stored_then_run() {
    let h = Harness::new().await;
    let info = h.create("a", &[]).await.unwrap();
    assert_eq!(info.tasks.len(), 2);
    let stored = h.stored();
    let a = &stored.connectors["a"];
    assert_eq!(a.target, TargetState::Running);
    assert_eq!(a.tasks.as_ref().map(Vec::len), Some(2));
    assert_eq!(h.running(), running(&["a-0", "a-1"]));
    h.no_unstored_starts();
    let status = h.status("a");
    assert_eq!(status.connector.state, "RUNNING");
    assert_eq!(
        status
            .tasks
            .iter()
            .map(|t| t.state.state)
            .collect::<Vec<_>>(),
        ["RUNNING", "RUNNING"]
    );
    // The name is taken.
    assert!(matches!(
        h.create("a", &[]).await,
        Err(HerderError::Conflict(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn an_invalid_config_is_refused_and_nothing_is_stored() {
    let h = Harness::new().await;
    let refused = h.create("a", &[("fake.invalid", "yes")]).await;
    assert!(
        matches!(&refused, Err(HerderError::BadRequest(m)) if m.contains("fake.invalid")),
        "{refused:?}"
    );
    // A split that fails for good refuses the create too, and stops the instance it made.
    let refused = h.create("b", &[("fake.split.fatal", "yes")]).await;
    assert!(
        matches!(refused, Err(HerderError::BadRequest(_))),
        "{refused:?}"
    );
    assert_eq!(h.worker.count("stop-connector b"), 1);
    assert!(h.stored().connectors.is_empty());
    assert!(h.running().is_empty());
    assert!(h.snapshot.get("a").is_none());
    // The names are free again.
    h.create("a", &[]).await.unwrap();
    h.create("b", &[]).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_new_config_is_checked_stored_then_run() {
    let h = Harness::new().await;
    h.create("a", &[]).await.unwrap();
    let (created, info) = h.put("a", &[("tasks.max", "3")]).await.unwrap();
    assert!(!created);
    assert_eq!(info.tasks.len(), 3);
    assert_eq!(h.running(), running(&["a-0", "a-1", "a-2"]));
    assert_eq!(
        h.stored().connectors["a"].tasks.as_ref().map(Vec::len),
        Some(3)
    );
    // A config that does not check out leaves what runs (and what is stored) alone.
    let before = h.stored();
    let refused = h.put("a", &[("fake.invalid", "yes")]).await;
    assert!(
        matches!(refused, Err(HerderError::BadRequest(_))),
        "{refused:?}"
    );
    assert_eq!(h.stored(), before);
    assert_eq!(h.running(), running(&["a-0", "a-1", "a-2"]));
    // PUT of a new name creates it.
    let (created, _) = h.put("b", &[("tasks.max", "1")]).await.unwrap();
    assert!(created);
    h.no_unstored_starts();
}

#[tokio::test(start_paused = true)]
async fn pause_resume_and_stop_are_stored_then_applied() {
    use TargetState::{Paused, Running, Stopped};
    // From a RUNNING connector of two tasks, the targets asked for in turn, and after the last:
    // the status, the tasks' states (none: no task runs) and the tasks claimed.
    let cases: [(&[TargetState], &str, Option<TaskState>, u32); 7] = [
        (&[Paused], "PAUSED", Some(TaskState::Paused), 2),
        (&[Paused, Running], "RUNNING", Some(TaskState::Running), 2),
        (&[Stopped], "STOPPED", None, 0),
        (&[Paused, Stopped], "STOPPED", None, 0),
        (&[Stopped, Running], "RUNNING", Some(TaskState::Running), 2),
        (&[Stopped, Paused], "PAUSED", Some(TaskState::Paused), 2),
        (&[Running, Running], "RUNNING", Some(TaskState::Running), 2),
    ];
    for (targets, state, tasks, claimed) in cases {
        let h = Harness::new().await;
        h.create("a", &[]).await.unwrap();
        for target in targets {
            h.target("a", *target).await.unwrap();
        }
        let last = *targets.last().unwrap();
        let what = format!("{targets:?}");
        assert_eq!(h.stored().connectors["a"].target, last, "{what}");
        assert_eq!(h.status("a").connector.state, state, "{what}");
        let expected: Vec<_> = tasks
            .into_iter()
            .flat_map(|t| [("a-0".to_owned(), t.clone()), ("a-1".to_owned(), t)])
            .collect();
        assert_eq!(h.running(), expected, "{what}");
        assert_eq!(h.status("a").tasks.len(), expected.len(), "{what}");
        assert_eq!(h.worker.capacity.used().tasks, claimed, "{what}");
        // Every one runs from the stored split: one split only.
        assert_eq!(h.worker.count("task-configs a"), 1, "{what}");
        h.no_unstored_starts();
    }
}

#[tokio::test(start_paused = true)]
async fn a_delete_is_stored_then_everything_goes() {
    let h = Harness::new().await;
    h.create("a", &[]).await.unwrap();
    h.delete("a").await.unwrap();
    assert!(h.stored().connectors.is_empty());
    assert!(h.running().is_empty());
    assert!(h.snapshot.get("a").is_none());
    assert!(h.worker.status.connector("a").is_none());
    assert_eq!(h.worker.count("stop-connector a"), 1);
    assert_eq!(h.worker.capacity.used().tasks, 0);
    assert!(matches!(h.delete("a").await, Err(HerderError::NotFound(_))));
    assert!(matches!(
        h.target("a", TargetState::Paused).await,
        Err(HerderError::NotFound(_))
    ));
}

/// One restart request and what it must do.
struct RestartCase {
    what: &'static str,
    /// Tasks failed before the request.
    failed: &'static [u32],
    include_tasks: bool,
    only_failed: bool,
    /// The plan's connector state and task states.
    connector: &'static str,
    tasks: [&'static str; 3],
    /// Whether the connector is prepared anew (a new instance, split again).
    new_instance: bool,
    /// The tasks stopped and started again.
    restarted: &'static [u32],
}

#[tokio::test(start_paused = true)]
async fn restarts_follow_include_tasks_and_only_failed() {
    const RUNNING: &str = "RUNNING";
    const RESTARTING: &str = "RESTARTING";
    let cases = [
        RestartCase {
            what: "the connector alone: a new instance splits the same, the tasks keep running",
            failed: &[],
            include_tasks: false,
            only_failed: false,
            connector: RESTARTING,
            tasks: [RUNNING; 3],
            new_instance: true,
            restarted: &[],
        },
        RestartCase {
            what: "with its tasks: every one",
            failed: &[],
            include_tasks: true,
            only_failed: false,
            connector: RESTARTING,
            tasks: [RESTARTING; 3],
            new_instance: true,
            restarted: &[0, 1, 2],
        },
        RestartCase {
            what: "only failed ones: the healthy connector and tasks stay",
            failed: &[1],
            include_tasks: true,
            only_failed: true,
            connector: RUNNING,
            tasks: [RUNNING, RESTARTING, RUNNING],
            new_instance: false,
            restarted: &[1],
        },
        RestartCase {
            what: "only failed, nothing failed: nothing restarts",
            failed: &[],
            include_tasks: true,
            only_failed: true,
            connector: RUNNING,
            tasks: [RUNNING; 3],
            new_instance: false,
            restarted: &[],
        },
        RestartCase {
            what: "only the failed connector, without tasks: a failed task stays failed",
            failed: &[2],
            include_tasks: false,
            only_failed: true,
            connector: RUNNING,
            tasks: [RUNNING, RUNNING, "FAILED"],
            new_instance: false,
            restarted: &[],
        },
    ];
    for case in cases {
        let h = Harness::new().await;
        h.create("a", &[("tasks.max", "3")]).await.unwrap();
        for id in case.failed {
            h.worker.fail_task(&ConnectorTaskId::new("a", *id));
        }
        let plan = h
            .restart("a", case.include_tasks, case.only_failed)
            .await
            .unwrap();
        let what = case.what;
        assert_eq!(plan.connector.state, case.connector, "{what}");
        let states: Vec<_> = plan.tasks.iter().map(|t| t.state.state).collect();
        assert_eq!(states, case.tasks, "{what}");
        let prepares = if case.new_instance { 2 } else { 1 };
        assert_eq!(h.worker.count("prepare a"), prepares, "{what}");
        for id in 0..3 {
            let stops = usize::from(case.restarted.contains(&id));
            assert_eq!(
                h.worker.count(&format!("stop a-{id}")),
                stops,
                "{what}: task {id}"
            );
        }
        h.no_unstored_starts();
    }
}

#[tokio::test(start_paused = true)]
async fn a_single_task_restarts_from_its_stored_config() {
    let h = Harness::new().await;
    h.create("a", &[("tasks.max", "3")]).await.unwrap();
    h.command("a", |reply| Command::RestartTask { id: 2, reply })
        .await
        .unwrap();
    assert_eq!(h.worker.count("stop a-2"), 1);
    assert_eq!(h.worker.count("stop a-0"), 0);
    assert_eq!(h.running(), running(&["a-0", "a-1", "a-2"]));
    assert!(matches!(
        h.command("a", |reply| Command::RestartTask { id: 7, reply })
            .await,
        Err(HerderError::NotFound(_))
    ));
    h.no_unstored_starts();
}

#[tokio::test(start_paused = true)]
async fn a_requested_reconfiguration_stores_a_changed_split_and_coalesces() {
    let h = Harness::new().await;
    h.create("a", &[("fake.generation", "yes"), ("tasks.max", "1")])
        .await
        .unwrap();
    let first = h.stored().connectors["a"].tasks.clone();
    // The connector's own request (the same Notify its instances hold).
    let id = ConnectorTaskId::new("a", 0);
    let notify = Arc::clone(&h.worker.reconfigure.lock().unwrap()["a"]);
    let runs = |generation: &'static str| {
        let id = id.clone();
        move |h: &Harness| {
            h.worker
                .running_config(&id)
                .is_some_and(|c| c.contains(&("generation".into(), generation.into())))
        }
    };
    notify.notify_one();
    h.until("the new split runs", runs("2")).await;
    assert_ne!(h.stored().connectors["a"].tasks, first);
    // Three more requests within the 2 s interval: coalesced into one more split.
    for _ in 0..3 {
        notify.notify_one();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    h.until("the next split runs", runs("3")).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(h.worker.count("task-configs a"), 3);
    h.no_unstored_starts();
}

#[tokio::test(start_paused = true)]
async fn a_split_that_fails_retriably_is_retried_with_backoff_until_it_runs() {
    let h = Harness::new().await;
    h.create("a", &[("fake.split.retriable", "2")])
        .await
        .unwrap();
    assert_eq!(h.status("a").connector.state, "RESTARTING");
    assert!(h.running().is_empty());
    // Stored without a split until one succeeds.
    assert_eq!(h.stored().connectors["a"].tasks, None);
    h.until("the split succeeds", |h| h.running().len() == 2)
        .await;
    assert_eq!(h.worker.count("task-configs a"), 3);
    assert_eq!(h.status("a").connector.state, "RUNNING");
    assert_eq!(
        h.stored().connectors["a"].tasks.as_ref().map(Vec::len),
        Some(2)
    );
    h.no_unstored_starts();
    // Past the restart policy's attempts: FAILED.
    h.create("b", &[("fake.split.retriable", "100")])
        .await
        .unwrap();
    h.until("b fails", |h| h.status("b").connector.state == "FAILED")
        .await;
    let trace = h.status("b").connector.trace.unwrap_or_default();
    assert!(trace.contains("task.restart.max.attempts is 3"), "{trace}");
}

#[tokio::test(start_paused = true)]
async fn what_does_not_fit_is_refused_and_nothing_is_stored() {
    let h = Harness::with_log(Arc::default(), 3).await;
    h.create("a", &[]).await.unwrap();
    let refused = h.create("b", &[]).await;
    assert!(
        matches!(&refused, Err(HerderError::BadRequest(m)) if m.contains("tasks.max.per.worker")),
        "{refused:?}"
    );
    assert!(!h.stored().connectors.contains_key("b"));
    // A bigger split of a running connector is refused; it keeps running as it was.
    let refused = h.put("a", &[("tasks.max", "4")]).await;
    assert!(
        matches!(refused, Err(HerderError::BadRequest(_))),
        "{refused:?}"
    );
    assert_eq!(h.running(), running(&["a-0", "a-1"]));
    // A stopped connector frees its room; resuming needs it back.
    h.target("a", TargetState::Stopped).await.unwrap();
    h.create("b", &[]).await.unwrap();
    let refused = h.target("a", TargetState::Running).await;
    assert!(
        matches!(refused, Err(HerderError::BadRequest(_))),
        "{refused:?}"
    );
    assert_eq!(h.stored().connectors["a"].target, TargetState::Stopped);
    assert_eq!(h.status("a").connector.state, "STOPPED");
}

#[tokio::test(start_paused = true)]
async fn a_failed_store_write_leaves_nothing_running_that_is_not_stored() {
    let h = Harness::new().await;
    h.create("a", &[]).await.unwrap();
    let before = h.stored();
    h.log.fail.store(true, Ordering::SeqCst);
    // A create: refused, its instance stopped, nothing runs, the name is free.
    let refused = h.create("b", &[]).await;
    assert!(
        matches!(&refused, Err(HerderError::Internal(m)) if m.contains("not stored")),
        "{refused:?}"
    );
    assert_eq!(h.worker.count("stop-connector b"), 1);
    assert!(h.snapshot.get("b").is_none());
    // A new config: the old one keeps running.
    assert!(h.put("a", &[("tasks.max", "1")]).await.is_err());
    // A pause, a stop, a delete: nothing changes.
    assert!(h.target("a", TargetState::Paused).await.is_err());
    assert!(h.target("a", TargetState::Stopped).await.is_err());
    assert!(h.delete("a").await.is_err());
    assert_eq!(h.running(), running(&["a-0", "a-1"]));
    assert_eq!(h.stored(), before);
    assert_eq!(h.worker.capacity.used().tasks, 2);
    // Every task that runs runs from what is stored.
    h.no_unstored_starts();
    h.log.fail.store(false, Ordering::SeqCst);
    h.create("b", &[]).await.unwrap();
    // The refused delete left "a" a connector like any other.
    h.target("a", TargetState::Paused).await.unwrap();
    h.put("a", &[("tasks.max", "1")]).await.unwrap();
    h.delete("a").await.unwrap();
    assert!(h.stored().connectors.contains_key("b"));
    assert!(!h.stored().connectors.contains_key("a"));
}

#[tokio::test(start_paused = true)]
async fn a_restart_runs_the_stored_split_without_splitting_again() {
    let log = Arc::new(MemoryLog::default());
    {
        let h = Harness::with_log(Arc::clone(&log), 100).await;
        h.create("a", &[]).await.unwrap();
        h.create("b", &[]).await.unwrap();
        h.target("b", TargetState::Paused).await.unwrap();
    }
    // A connector stored by a version without task configs.
    log.append(vec![ConfigRecord::Connector {
        name: "old".into(),
        config: config("old", &[("tasks.max", "1")]).pairs,
    }])
    .await
    .unwrap();
    let h = Harness::with_log(Arc::clone(&log), 100).await;
    h.until("restored", |h| h.running().len() == 5).await;
    assert_eq!(h.worker.count("task-configs a"), 0);
    assert_eq!(h.worker.count("task-configs b"), 0);
    assert_eq!(h.worker.count("create a"), 1);
    // The connector without a split is split, and its split stored.
    assert_eq!(h.worker.count("task-configs old"), 1);
    assert_eq!(
        log.read().unwrap().connectors["old"]
            .tasks
            .as_ref()
            .map(Vec::len),
        Some(1)
    );
    assert_eq!(h.status("b").tasks[0].state.state, "PAUSED");
    h.no_unstored_starts();
}

#[tokio::test(start_paused = true)]
async fn a_restore_that_hangs_holds_up_no_other_connector() {
    let log = Arc::new(MemoryLog::default());
    log.append(vec![ConfigRecord::Connector {
        name: "stuck".into(),
        config: config("stuck", &[("fake.hang", "yes")]).pairs,
    }])
    .await
    .unwrap();
    let h = Harness::with_log(Arc::clone(&log), 100).await;
    h.create("a", &[]).await.unwrap();
    h.target("a", TargetState::Paused).await.unwrap();
    h.put("a", &[("tasks.max", "1")]).await.unwrap();
    h.delete("a").await.unwrap();
    assert_eq!(h.worker.count("prepare stuck"), 1);
    assert_eq!(
        h.status("stuck").connector.state,
        "UNASSIGNED",
        "still being restored"
    );
}

#[tokio::test(start_paused = true)]
async fn offsets_change_only_while_stopped() {
    let h = Harness::new().await;
    h.create("a", &[]).await.unwrap();
    let refused = h
        .command("a", |reply| Command::ResetOffsets { reply })
        .await;
    assert!(matches!(refused, Err(HerderError::BadRequest(m)) if m.contains("STOPPED")));
    h.target("a", TargetState::Stopped).await.unwrap();
    h.command("a", |reply| Command::ResetOffsets { reply })
        .await
        .unwrap();
    h.command("a", |reply| Command::AlterOffsets {
        changes: vec![],
        reply,
    })
    .await
    .unwrap();
    assert_eq!(h.worker.count("reset-offsets a"), 1);
    assert_eq!(h.worker.count("alter-offsets a"), 1);
}

#[tokio::test(start_paused = true)]
async fn commands_that_come_while_a_change_is_pending_are_decided_after_it() {
    let log = Arc::new(MemoryLog::default());
    log.lag(Duration::from_secs(1));
    let h = Harness::with_log(Arc::clone(&log), 100).await;
    h.create("a", &[]).await.unwrap();
    // A restart of every task asked for right behind a new config of three tasks: it restarts
    // the new config's three, not the two the config replaces.
    let (put, plan) = tokio::join!(
        h.put("a", &[("tasks.max", "3")]),
        h.restart("a", true, false)
    );
    put.unwrap();
    let plan = plan.unwrap();
    let states: Vec<_> = plan.tasks.iter().map(|t| t.state.state).collect();
    assert_eq!(states, ["RESTARTING"; 3]);
    assert_eq!(h.running(), running(&["a-0", "a-1", "a-2"]));
    // A pause right behind a stop: applied after it, so the connector ends PAUSED.
    let (stop, pause) = tokio::join!(
        h.target("a", TargetState::Stopped),
        h.target("a", TargetState::Paused)
    );
    stop.unwrap();
    pause.unwrap();
    assert_eq!(h.stored().connectors["a"].target, TargetState::Paused);
    assert_eq!(h.status("a").connector.state, "PAUSED");
    // A delete right behind a new config: the config is stored first, then the delete.
    let (put, delete) = tokio::join!(h.put("a", &[("tasks.max", "1")]), h.delete("a"));
    put.unwrap();
    delete.unwrap();
    assert!(h.stored().connectors.is_empty());
    assert!(h.running().is_empty());
    h.no_unstored_starts();
}

#[tokio::test(start_paused = true)]
async fn a_monitor_that_reports_a_change_resplits_and_one_that_fails_fails_the_connector() {
    let h = Harness::new().await;
    let extra = [
        ("fake.monitor", "reconfigure"),
        ("fake.generation", "yes"),
        ("tasks.max", "1"),
    ];
    h.create("a", &extra).await.unwrap();
    assert_eq!(
        h.worker.count("monitor a"),
        0,
        "called an interval after start"
    );
    let id = ConnectorTaskId::new("a", 0);
    tokio::time::sleep(Duration::from_secs(61)).await;
    h.until("the monitor's change runs", |h| {
        h.worker
            .running_config(&id)
            .is_some_and(|c| c.contains(&("generation".into(), "2".into())))
    })
    .await;
    assert_eq!(h.worker.count("monitor a"), 1);
    h.no_unstored_starts();
    // Not monitored while paused.
    h.target("a", TargetState::Paused).await.unwrap();
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(h.worker.count("monitor a"), 1);
    // A monitor that fails for good fails the connector and stops its tasks.
    h.create("b", &[("fake.monitor", "fatal")]).await.unwrap();
    tokio::time::sleep(Duration::from_secs(61)).await;
    h.until("b fails", |h| h.status("b").connector.state == "FAILED")
        .await;
    let trace = h.status("b").connector.trace.unwrap_or_default();
    assert!(trace.contains("the table is gone"), "{trace}");
    assert!(!h.running().iter().any(|(id, _)| id.starts_with("b-")));
    assert_eq!(h.worker.capacity.used().tasks, 1, "b claims nothing");
}

#[tokio::test(start_paused = true)]
async fn a_restore_whose_create_fails_retriably_runs_its_stored_split_once_created() {
    let log = Arc::new(MemoryLog::default());
    log.append(vec![
        ConfigRecord::Connector {
            name: "a".into(),
            config: config("a", &[("fake.create.retriable", "2")]).pairs,
        },
        ConfigRecord::Tasks {
            name: "a".into(),
            configs: vec![
                vec![("task".into(), "0".into())],
                vec![("task".into(), "1".into())],
            ],
            build: Some("build-1".into()),
        },
    ])
    .await
    .unwrap();
    let h = Harness::with_log(Arc::clone(&log), 100).await;
    h.until("the first create failed", |h| {
        h.status("a").connector.state == "RESTARTING"
    })
    .await;
    let trace = h.status("a").connector.trace.unwrap_or_default();
    assert!(trace.contains("the database is starting"), "{trace}");
    assert!(h.running().is_empty());
    h.until("created on the third try", |h| h.running().len() == 2)
        .await;
    assert_eq!(h.worker.count("create a"), 3);
    assert_eq!(h.worker.count("task-configs a"), 0, "the stored split runs");
    assert_eq!(h.status("a").connector.state, "RUNNING");
    h.no_unstored_starts();
}

#[tokio::test(start_paused = true)]
async fn a_restore_on_another_plugin_build_splits_again() {
    let log = Arc::new(MemoryLog::default());
    {
        let h = Harness::with_log(Arc::clone(&log), 100).await;
        h.create("a", &[]).await.unwrap();
    }
    let stored = |log: &MemoryLog| log.read().unwrap().connectors["a"].tasks_build.clone();
    assert_eq!(stored(&log).as_deref(), Some("build-1"));
    let h = Harness::start(Arc::clone(&log), 100, "build-2").await;
    h.until("restored", |h| h.running().len() == 2).await;
    assert_eq!(h.worker.count("task-configs a"), 1);
    assert_eq!(stored(&log).as_deref(), Some("build-2"));
    h.no_unstored_starts();
}
