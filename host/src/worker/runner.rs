//! Task runners: build one task's instance and loop from the connector's prepared settings,
//! and supervise it (a failure restarts it under the connector's restart policy).

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{Prepared, Shared, connector_context};
use crate::errors::ErrorReporter;
use crate::kafka::OwnClient;
use crate::kafka::clients::ClientKind;
use crate::kafka::consumer::{self, Subscription};
use crate::kafka::producer::Producer;
use crate::plugin::World;
use crate::sandbox::{InstanceContext, SinkTaskInstance, SourceTaskInstance};
use crate::storage::{ConnectorTaskId, Pairs};
use crate::task::poll_ahead::PollAhead;
use crate::task::put_behind::PutBehind;
use crate::task::sink::SinkRunner;
use crate::task::source::SourceRunner;
use crate::task::{ActiveTopics, Control, Failure, TaskMetrics, TaskState};

/// A running task.
pub(crate) struct TaskHandle {
    pub metrics: Arc<TaskMetrics>,
    pub control: watch::Sender<Control>,
    pub join: JoinHandle<()>,
    /// How long a stop may take before the task is aborted: the shutdown grace (which bounds
    /// every plugin call it waits on once told to stop) plus [`STOP_MARGIN`] for its Kafka
    /// work (the last commits, leaving the group).
    pub stop_within: std::time::Duration,
}

/// What a stopping task may take beyond the shutdown grace before it is aborted.
pub(crate) const STOP_MARGIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Start task `id` under `control` from `task_config` (one of a split of `split_size`),
/// supervised: a failure restarts it from scratch (a new instance, resuming from the committed
/// offsets) under the connector's restart policy. Its states go to the status store.
pub(crate) fn spawn_task(
    shared: &Arc<Shared>,
    id: &ConnectorTaskId,
    prepared: &Arc<Prepared>,
    task_config: Pairs,
    split_size: usize,
    initial: Control,
    topics_used: &ActiveTopics,
) -> TaskHandle {
    let metrics = Arc::new(TaskMetrics::reporting(
        id.clone(),
        Arc::clone(&shared.status),
        shared.config.worker_id.clone(),
    ));
    metrics.set_state(if initial == Control::Pause {
        TaskState::Paused
    } else {
        TaskState::Running
    });
    let (control, control_rx) = watch::channel(initial);
    let join = tokio::spawn(supervise(
        Arc::clone(shared),
        id.connector.clone(),
        Arc::clone(prepared),
        Assigned {
            id: id.task,
            config: task_config,
            split_size,
        },
        control_rx,
        Arc::clone(&metrics),
        Arc::clone(topics_used),
    ));
    TaskHandle {
        metrics,
        control,
        join,
        stop_within: prepared.settings.shutdown_grace + STOP_MARGIN,
    }
}

/// The task a runner runs: its id, its config, and the size of the split it is part of.
struct Assigned {
    id: u32,
    config: Pairs,
    split_size: usize,
}

async fn supervise(
    shared: Arc<Shared>,
    name: String,
    prepared: Arc<Prepared>,
    task: Assigned,
    mut control_rx: watch::Receiver<Control>,
    metrics: Arc<TaskMetrics>,
    topics_used: ActiveTopics,
) {
    let policy = prepared.restart;
    let id = task.id;
    let mut failures: std::collections::VecDeque<std::time::Instant> = Default::default();
    loop {
        let outcome = run_once(
            &shared,
            &name,
            &prepared,
            &task,
            control_rx.clone(),
            &metrics,
            &topics_used,
        )
        .await;
        let failure = match outcome {
            Ok(()) => {
                metrics.set_state(TaskState::Stopped);
                return;
            }
            Err(failure) => failure,
        };
        let now = std::time::Instant::now();
        failures.push_back(now);
        while failures
            .front()
            .is_some_and(|t| now.duration_since(*t) > policy.window)
        {
            failures.pop_front();
        }
        let attempt = failures.len() as u32;
        let give_up = if crate::task::control(&control_rx) == Control::Stop {
            Some(String::new())
        } else if !failure.restartable {
            Some(" (not restarted: a restart would fail the same way; fix the cause, then restart the task)".to_owned())
        } else if attempt > policy.max_attempts {
            Some(format!(
                " (not restarted: it failed {attempt} times within {} s; task.restart.max.attempts is {})",
                policy.window.as_secs(),
                policy.max_attempts
            ))
        } else {
            None
        };
        if let Some(why) = give_up {
            tracing::error!(connector = %name, task = id, "task failed: {}{why}", failure.trace);
            metrics.set_state(TaskState::Failed(format!("{}{why}", failure.trace)));
            return;
        }
        let delay = policy.delay(attempt);
        tracing::warn!(connector = %name, task = id, "task failed: {}; restarting it in {delay:?} (restart {attempt} of at most {})", failure.trace, policy.max_attempts);
        metrics.set_state(TaskState::Restarting(failure.trace));
        metrics
            .restarts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + delay;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break,
                changed = control_rx.changed() => {
                    if changed.is_err() || *control_rx.borrow() == Control::Stop {
                        metrics.set_state(TaskState::Stopped);
                        return;
                    }
                }
            }
        }
    }
}

/// Create `task`'s instance and run it until it stops or fails.
async fn run_once(
    shared: &Arc<Shared>,
    name: &str,
    prepared: &Prepared,
    task: &Assigned,
    control_rx: watch::Receiver<Control>,
    metrics: &Arc<TaskMetrics>,
    topics_used: &ActiveTopics,
) -> Result<(), Failure> {
    let id = task.id;
    // Config provider placeholders are resolved again for every start of the task, so a
    // restart picks up a rotated secret (a value the plugin built from a secret stays as the
    // connector's split made it).
    let fresh = shared.config.providers.resolve(&task.config).map_err(|p| {
        Failure::fatal(prepared.resolved.redact(&super::problems_message(name, &p)))
    })?;
    // Capabilities come from the operator's connector config, never from the task config a
    // plugin returned, so a plugin cannot grant itself more.
    let mut ctx = connector_context(name, prepared);
    ctx.tags.task = Some(id);
    let mut secrets = prepared.resolved.secrets().to_vec();
    secrets.extend(fresh.secrets().iter().cloned());
    // Longest first, so a secret inside a longer one cannot leave part of the longer.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    ctx.secrets = Arc::new(secrets);
    let secrets = Arc::clone(&ctx.secrets);
    // A plugin's error may quote its config: no resolved secret reaches a status or the log.
    run_instance(
        shared,
        name,
        prepared,
        task,
        control_rx,
        metrics,
        topics_used,
        ctx,
        &fresh.pairs,
    )
    .await
    .map_err(|mut failure| {
        failure.trace = crate::config::providers::redact(&secrets, &failure.trace);
        failure
    })
}

/// Run `task`'s instance, created with `ctx` from `task_config` (its config resolved), until
/// it stops or fails.
#[allow(clippy::too_many_arguments)]
async fn run_instance(
    shared: &Arc<Shared>,
    name: &str,
    prepared: &Prepared,
    task: &Assigned,
    control_rx: watch::Receiver<Control>,
    metrics: &Arc<TaskMetrics>,
    topics_used: &ActiveTopics,
    mut ctx: InstanceContext,
    task_config: &[(String, String)],
) -> Result<(), Failure> {
    let id = task.id;
    let plugin = &prepared.plugin;
    if plugin.world == World::Source {
        ctx.offsets = crate::offsets::reader(&shared.offsets, name);
    }
    let mut settings = prepared.settings;
    // Each task may track its own partitions; the connector's store holds all of theirs.
    settings.stored_partitions_max = settings
        .source_partitions_max
        .saturating_mul(task.split_size.max(1));
    metrics.set_state(if crate::task::control(&control_rx) == Control::Pause {
        TaskState::Paused
    } else {
        TaskState::Running
    });
    // A connector that overrides client settings (KIP-458) gets clients of its own, per task
    // as in Kafka Connect; the rest share the worker's.
    let client_id = format!("wasm-connect-{name}-{id}");
    // A connector's own clients report their failures to the task's status (the worker's
    // probe cannot see them).
    let own_client = |keys, settings| {
        Arc::new(OwnClient::new(
            keys,
            format!("connector {name} task {id}"),
            settings,
        ))
    };
    let mut own_clients = Vec::new();
    let producer = match prepared.clients.get(ClientKind::Producer) {
        None => Arc::clone(&shared.producer),
        Some(settings) => {
            let own = own_client("producer.override.*", settings);
            own_clients.push(Arc::clone(&own));
            Arc::new(
                Producer::own(&shared.bootstrap, &client_id, &settings.pairs, own)?
                    .fenced(shared.fence.clone()),
            )
        }
    };
    let topics = match prepared.clients.get(ClientKind::Admin) {
        None => Arc::clone(&shared.topics),
        Some(own) => Arc::new(shared.topics.with_client(
            &shared.bootstrap,
            &client_id,
            &own.pairs,
        )?),
    };
    let errors = ErrorReporter::new(
        Arc::clone(&prepared.errors),
        name,
        id,
        Arc::clone(&producer),
        Arc::clone(&topics),
        Arc::clone(&metrics.errors),
    );
    let cannot = |e: anyhow::Error| Failure::from(format!("cannot instantiate the plugin: {e:#}"));
    // Checked when the connector was configured; a failure here is a config changed since.
    let chain = crate::transform::Chain::from_config(&prepared.pairs).map_err(|problems| {
        Failure::fatal(crate::config::connector::describe(
            "the connector's transforms",
            &problems,
        ))
    })?;
    match plugin.world {
        World::Source => {
            metrics.set_own_clients(own_clients);
            let instance = SourceTaskInstance::create(
                &shared.sandbox,
                &plugin.component,
                plugin.contract,
                &ctx,
                &task_config.to_vec(),
            )
            .await
            .map_err(cannot)??;
            SourceRunner {
                connector: name.to_owned(),
                task: id,
                instance: PollAhead::spawn(instance, control_rx.clone(), settings.shutdown_grace),
                producer,
                topics,
                offsets: Arc::clone(&shared.offsets),
                config: prepared.pairs.clone(),
                key_converter: prepared.key_converter,
                value_converter: prepared.value_converter,
                settings,
                metrics: Arc::clone(metrics),
                topics_used: Arc::clone(topics_used),
                grant: prepared.grants.topics().clone(),
                plugin: plugin.spec.name.clone(),
                errors,
                transforms: chain,
            }
            .run(control_rx)
            .await
        }
        World::Sink => {
            let instance = SinkTaskInstance::create(
                &shared.sandbox,
                &plugin.component,
                plugin.contract,
                &ctx,
                &task_config.to_vec(),
            )
            .await
            .map_err(cannot)??;
            let subscription =
                Subscription::from_config(&prepared.pairs).map_err(Failure::fatal)?;
            let own_consumer = prepared.clients.get(ClientKind::Consumer);
            let own = own_consumer.map(|settings| own_client("consumer.override.*", settings));
            own_clients.extend(own.clone());
            metrics.set_own_clients(own_clients);
            let (consumer, events) = consumer::create(
                &shared.bootstrap,
                &client_id,
                name,
                &format!("{client_id}-{}", shared.instance_id),
                &subscription,
                own_consumer.map_or(
                    shared.config.clients.librdkafka(ClientKind::Consumer),
                    |t| &t.pairs,
                ),
                own,
            )?;
            SinkRunner {
                connector: name.to_owned(),
                task: id,
                instance: PutBehind::spawn(instance, control_rx.clone(), settings.shutdown_grace),
                consumer,
                events,
                key_converter: prepared.key_converter,
                value_converter: prepared.value_converter,
                settings,
                metrics: Arc::clone(metrics),
                topics_used: Arc::clone(topics_used),
                plugin: plugin.spec.name.clone(),
                errors,
                dead_letters: Default::default(),
                transforms: (!chain.is_empty()).then(|| std::sync::Mutex::new(chain)),
            }
            .run(control_rx)
            .await
        }
    }
}

impl TaskHandle {
    /// Tell the task to stop and wait until it has (offsets flushed and committed).
    pub async fn stop(&mut self) {
        let _ = self.control.send(Control::Stop);
        if tokio::time::timeout(self.stop_within, &mut self.join)
            .await
            .is_err()
        {
            tracing::warn!(
                "a task did not stop within {:?}; aborting it",
                self.stop_within
            );
            self.join.abort();
        }
    }
}

/// Stop every task of `tasks` at once, so stopping takes as long as the slowest, not the sum.
pub(crate) async fn stop_all(tasks: &mut Vec<TaskHandle>) {
    for task in tasks.iter() {
        let _ = task.control.send(Control::Stop);
    }
    futures::future::join_all(tasks.iter_mut().map(TaskHandle::stop)).await;
    tasks.clear();
}
