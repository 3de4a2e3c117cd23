//! Preparing one connector (find its plugin, check its config: the worker's keys, the plugin's
//! config definitions, the plugin's own `validate`; split it into at most `tasks.max` task
//! configs) and spawning the runner of one of its tasks.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::Shared;
use crate::config::ConnectorConfig;
use crate::config::connector::{Problem, describe};
use crate::convert::Converter;
use crate::errors::{ErrorPolicy, ErrorReporter};
use crate::kafka::consumer::{self, Subscription};
use crate::plugin::{Plugin, World};
use crate::sandbox::{
    ConnectorInstance, Grants, InstanceContext, Limits, SinkTaskInstance, SourceTaskInstance, Tags,
};
use crate::task::poll_ahead::PollAhead;
use crate::task::put_behind::PutBehind;
use crate::task::sink::SinkRunner;
use crate::task::source::SourceRunner;
use crate::task::{ActiveTopics, Control, Failure, RunnerSettings, TaskMetrics, TaskState};

/// A connector whose config checked out, with its task configs.
pub(crate) struct Prepared {
    pub plugin: Arc<Plugin>,
    /// The connector config with the plugin's defaults filled in.
    pub pairs: Vec<(String, String)>,
    pub grants: Grants,
    pub limits: Limits,
    pub key_converter: Converter,
    pub value_converter: Converter,
    pub task_configs: Vec<Vec<(String, String)>>,
    pub restart: RestartPolicy,
    pub settings: RunnerSettings,
    pub errors: Arc<ErrorPolicy>,
}

/// A running task.
pub(crate) struct TaskHandle {
    pub metrics: Arc<TaskMetrics>,
    pub control: watch::Sender<Control>,
    pub join: JoinHandle<()>,
}

/// The problems with `config` that need no plugin instance: unknown plugin, the plugin's key
/// definitions, grants, limits, converters, the sink subscription.
pub(crate) fn check(shared: &Shared, config: &ConnectorConfig) -> Result<Checked, Vec<Problem>> {
    let registry = &shared.registry;
    let plugin = registry
        .find(&config.plugin, config.plugin_version.as_deref())
        .ok_or_else(|| {
            let available: Vec<String> = registry
                .plugins()
                .iter()
                .map(|p| format!("{}@{}", p.spec.name, p.spec.version))
                .collect();
            vec![Problem::new(
                "connector.class",
                format!(
                    "no plugin named {}{} in {} (available: {})",
                    config.plugin,
                    config
                        .plugin_version
                        .as_deref()
                        .map(|v| format!("@{v}"))
                        .unwrap_or_default(),
                    registry.dir().display(),
                    if available.is_empty() {
                        "none".to_owned()
                    } else {
                        available.join(", ")
                    }
                ),
            )]
        })?;
    let mut problems = Vec::new();
    // Before any instance exists: a connector that asks for more tasks than one connector may
    // have is refused without asking its plugin to split the work.
    problems.extend(shared.config.capacity.check_tasks_max(config.tasks_max));
    let pairs = config.apply_spec(&plugin.spec).unwrap_or_else(|p| {
        problems.extend(p);
        config.pairs.clone()
    });
    // Everything the worker itself interprets (capabilities, limits, converters, restarts,
    // subscriptions) comes from the operator's config only, never from a plugin's defaults.
    let operator = &config.pairs;
    let grants = Grants::from_config(operator).unwrap_or_else(|m| {
        problems.push(Problem::new("", m));
        Grants::none()
    });
    let limits = shared
        .config
        .limits
        .with_overrides(&pairs)
        .unwrap_or_else(|m| {
            problems.push(Problem::new("", m));
            shared.config.limits
        });
    if limits.memory_bytes as u64 > shared.config.memory_reservation {
        problems.push(Problem::new(
            crate::config_keys::MEMORY_MAX_BYTES,
            format!(
                "{} is more than this worker reserves for an instance's memory ({} = {}); lower it, or raise {} in the worker config",
                limits.memory_bytes,
                crate::config::worker::MEMORY_RESERVATION,
                shared.config.memory_reservation,
                crate::config::worker::MEMORY_RESERVATION
            ),
        ));
    }
    let defaults = &shared.config.converter_defaults;
    let key_converter = Converter::configured("key", operator, defaults).unwrap_or_else(|m| {
        problems.push(Problem::new("", m));
        Converter::String
    });
    let value_converter = Converter::configured("value", operator, defaults).unwrap_or_else(|m| {
        problems.push(Problem::new("", m));
        Converter::String
    });
    let restart = RestartPolicy::configured(shared.config.restart, operator).unwrap_or_else(|m| {
        problems.push(Problem::new("", m));
        shared.config.restart
    });
    let settings = shared
        .config
        .task
        .with_overrides(operator)
        .unwrap_or_else(|m| {
            problems.push(Problem::new("", m));
            shared.config.task
        });
    let errors = ErrorPolicy::from_config(operator).unwrap_or_else(|ms| {
        problems.extend(ms.into_iter().map(|m| Problem::new("", m)));
        ErrorPolicy::default()
    });
    if plugin.world == World::Sink {
        match Subscription::from_config(operator) {
            Err(m) => problems.push(Problem::new("", m)),
            Ok(subscription)
                if errors
                    .dlq_topic
                    .as_ref()
                    .is_some_and(|dlq| subscription.includes(dlq)) =>
            {
                problems.push(Problem::new(
                    crate::errors::policy::DLQ_TOPIC,
                    "is one of the connector's topics; a dead-letter queue must be another topic",
                ))
            }
            Ok(_) => {}
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Checked {
        plugin,
        pairs,
        grants,
        limits,
        key_converter,
        value_converter,
        restart,
        settings,
        errors: Arc::new(errors),
    })
}

/// A connector config that passed [`check`].
pub(crate) struct Checked {
    plugin: Arc<Plugin>,
    pairs: Vec<(String, String)>,
    grants: Grants,
    limits: Limits,
    key_converter: Converter,
    value_converter: Converter,
    restart: RestartPolicy,
    settings: RunnerSettings,
    errors: Arc<ErrorPolicy>,
}

/// The connector instance's context (also the base of its tasks' contexts).
fn connector_context(name: &str, grants: &Grants, limits: Limits) -> InstanceContext {
    InstanceContext {
        tags: Tags {
            connector: name.to_owned(),
            task: None,
        },
        grants: grants.clone(),
        limits,
        // The WIT: only source tasks read offsets; connector instances and sinks see none.
        offsets: Arc::new(crate::sandbox::NoOffsets),
        reconfigure: Arc::new(tokio::sync::Notify::new()),
    }
}

/// Check `config` completely and split it into task configs. `Err` lists every problem.
pub(crate) async fn prepare(
    shared: &Shared,
    config: &ConnectorConfig,
) -> Result<Prepared, Vec<Problem>> {
    let Checked {
        plugin,
        pairs,
        grants,
        limits,
        key_converter,
        value_converter,
        restart,
        settings,
        errors,
    } = check(shared, config)?;
    let ctx = connector_context(&config.name, &grants, limits);
    let instance_error = |e: String| vec![Problem::new("", e)];
    let mut instance = ConnectorInstance::new(
        &shared.sandbox,
        &plugin.component,
        plugin.world,
        plugin.contract,
        &ctx,
    )
    .await
    .map_err(|e| {
        instance_error(format!(
            "cannot instantiate plugin {}: {e:#}",
            plugin.spec.name
        ))
    })?;
    let invalid = instance
        .validate(&pairs)
        .await
        .map_err(|e| instance_error(e.to_string()))?;
    if !invalid.is_empty() {
        return Err(invalid
            .into_iter()
            .map(|e| Problem::new(e.key, e.message))
            .collect());
    }
    let task_configs = instance
        .task_configs(&pairs, config.tasks_max)
        .await
        .map_err(|e| instance_error(e.to_string()))?;
    tracing::info!(connector = %config.name, plugin = %plugin.spec.name, version = %plugin.spec.version, tasks = task_configs.len(), tasks_max = config.tasks_max, "connector configured");
    Ok(Prepared {
        plugin,
        pairs,
        grants,
        limits,
        key_converter,
        value_converter,
        task_configs,
        restart,
        settings,
        errors,
    })
}

/// Describe problems from [`prepare`] for connector `name`.
pub(crate) fn problems_message(name: &str, problems: &[Problem]) -> String {
    describe(&format!("connector {name}"), problems)
}

/// When a failed task is restarted: exponential backoff with jitter, at most `max_attempts`
/// restarts within `window` (per connector, with worker defaults; see docs/configuration.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    pub max_attempts: u32,
    pub window: Duration,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl RestartPolicy {
    /// The worker's defaults with `config`'s overrides; errors name the key.
    pub fn configured(
        defaults: RestartPolicy,
        config: &[(String, String)],
    ) -> Result<Self, String> {
        let mut policy = defaults;
        for (key, value) in config {
            let number = || {
                value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| format!("{key}: {value:?} is not a non-negative integer"))
            };
            match key.as_str() {
                RESTART_MAX_ATTEMPTS => {
                    policy.max_attempts = number()?.min(u64::from(u32::MAX)) as u32
                }
                RESTART_WINDOW_MS => policy.window = Duration::from_millis(number()?),
                RESTART_BACKOFF_INITIAL_MS => {
                    policy.initial_backoff = Duration::from_millis(number()?.max(1))
                }
                RESTART_BACKOFF_MAX_MS => {
                    policy.max_backoff = Duration::from_millis(number()?.max(1))
                }
                _ => {}
            }
        }
        Ok(policy)
    }

    /// The wait before restart number `attempt` (1-based): doubling from the initial backoff up
    /// to the maximum, plus up to 25% jitter so restarts of many tasks spread out.
    pub fn delay(&self, attempt: u32) -> Duration {
        let base = self
            .initial_backoff
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20))
            .min(self.max_backoff);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        base + base.mul_f64(f64::from(nanos % 1000) / 4000.0)
    }
}

impl Default for RestartPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            window: Duration::from_secs(600),
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
        }
    }
}

/// Restart policy keys (worker defaults, connector overrides).
pub const RESTART_MAX_ATTEMPTS: &str = "task.restart.max.attempts";
pub const RESTART_WINDOW_MS: &str = "task.restart.window.ms";
pub const RESTART_BACKOFF_INITIAL_MS: &str = "task.restart.backoff.initial.ms";
pub const RESTART_BACKOFF_MAX_MS: &str = "task.restart.backoff.max.ms";

/// Start task `id` under `control`, supervised: a failure restarts it from scratch (a new
/// instance, resuming from the committed offsets) under the connector's restart policy.
pub(crate) fn spawn_task(
    shared: &Arc<Shared>,
    name: &str,
    prepared: &Arc<Prepared>,
    id: u32,
    initial: Control,
    topics_used: &ActiveTopics,
) -> TaskHandle {
    let metrics = Arc::new(TaskMetrics::default());
    metrics.set_state(if initial == Control::Pause {
        TaskState::Paused
    } else {
        TaskState::Running
    });
    let (control, control_rx) = watch::channel(initial);
    let join = tokio::spawn(supervise(
        Arc::clone(shared),
        name.to_owned(),
        Arc::clone(prepared),
        id,
        control_rx,
        Arc::clone(&metrics),
        Arc::clone(topics_used),
    ));
    TaskHandle {
        metrics,
        control,
        join,
    }
}

async fn supervise(
    shared: Arc<Shared>,
    name: String,
    prepared: Arc<Prepared>,
    id: u32,
    mut control_rx: watch::Receiver<Control>,
    metrics: Arc<TaskMetrics>,
    topics_used: ActiveTopics,
) {
    let policy = prepared.restart;
    let mut failures: std::collections::VecDeque<std::time::Instant> = Default::default();
    loop {
        let outcome = run_once(
            &shared,
            &name,
            &prepared,
            id,
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

/// Create task `id`'s instance and run it until it stops or fails.
async fn run_once(
    shared: &Arc<Shared>,
    name: &str,
    prepared: &Prepared,
    id: u32,
    control_rx: watch::Receiver<Control>,
    metrics: &Arc<TaskMetrics>,
    topics_used: &ActiveTopics,
) -> Result<(), Failure> {
    let plugin = &prepared.plugin;
    let task_config = prepared
        .task_configs
        .get(id as usize)
        .ok_or_else(|| Failure::fatal(format!("connector {name} has no task {id}")))?;
    // Capabilities come from the operator's connector config, never from the task config a
    // plugin returned, so a plugin cannot grant itself more.
    let mut ctx = connector_context(name, &prepared.grants, prepared.limits);
    ctx.tags.task = Some(id);
    if plugin.world == World::Source {
        ctx.offsets = shared.offsets.reader(name);
    }
    let mut settings = prepared.settings;
    // Each task may track its own partitions; the connector's store holds all of theirs.
    settings.stored_partitions_max = settings
        .source_partitions_max
        .saturating_mul(prepared.task_configs.len().max(1));
    metrics.set_state(if crate::task::control(&control_rx) == Control::Pause {
        TaskState::Paused
    } else {
        TaskState::Running
    });
    let errors = ErrorReporter::new(
        Arc::clone(&prepared.errors),
        name,
        id,
        Arc::clone(&shared.producer),
        Arc::clone(&shared.topics),
        Arc::clone(&metrics.errors),
    );
    let cannot = |e: anyhow::Error| Failure::from(format!("cannot instantiate the plugin: {e:#}"));
    match plugin.world {
        World::Source => {
            let instance = SourceTaskInstance::create(
                &shared.sandbox,
                &plugin.component,
                plugin.contract,
                &ctx,
                task_config,
            )
            .await
            .map_err(cannot)??;
            SourceRunner {
                connector: name.to_owned(),
                task: id,
                instance: PollAhead::spawn(instance),
                producer: Arc::clone(&shared.producer),
                topics: Arc::clone(&shared.topics),
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
                task_config,
            )
            .await
            .map_err(cannot)??;
            let subscription =
                Subscription::from_config(&prepared.pairs).map_err(Failure::fatal)?;
            let client_id = format!("wasm-connect-{name}-{id}");
            let (consumer, events) = consumer::create(
                &shared.bootstrap,
                &client_id,
                name,
                &format!("{client_id}-{}", shared.instance_id),
                &subscription,
                &shared.config.consumer,
            )?;
            SinkRunner {
                connector: name.to_owned(),
                task: id,
                instance: PutBehind::spawn(instance),
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
            }
            .run(control_rx)
            .await
        }
    }
}
