//! Preparing one connector (find its plugin, check its config: the worker's keys, the plugin's
//! config definitions, the plugin's own `validate`; split it into at most `tasks.max` task
//! configs) and spawning the runner of one of its tasks.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::Shared;
use crate::config::ConnectorConfig;
use crate::config::connector::{Problem, describe};
use crate::convert::Converter;
use crate::kafka::consumer::{self, Subscription};
use crate::plugin::{Plugin, World};
use crate::sandbox::{
    ConnectorInstance, Grants, InstanceContext, Limits, SinkTaskInstance, SourceTaskInstance, Tags,
};
use crate::task::sink::SinkRunner;
use crate::task::source::SourceRunner;
use crate::task::{ActiveTopics, Control, RunnerSettings, TaskMetrics, TaskState};

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
    let pairs = config.apply_spec(&plugin.spec).unwrap_or_else(|p| {
        problems.extend(p);
        config.pairs.clone()
    });
    let grants = Grants::from_config(&pairs).unwrap_or_else(|m| {
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
    let defaults = &shared.config.converter_defaults;
    let key_converter = Converter::configured("key", &pairs, defaults).unwrap_or_else(|m| {
        problems.push(Problem::new("", m));
        Converter::String
    });
    let value_converter = Converter::configured("value", &pairs, defaults).unwrap_or_else(|m| {
        problems.push(Problem::new("", m));
        Converter::String
    });
    if plugin.world == World::Sink
        && let Err(m) = Subscription::from_config(&pairs)
    {
        problems.push(Problem::new("", m));
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
}

/// The connector instance's context (also the base of its tasks' contexts).
fn connector_context(
    shared: &Shared,
    name: &str,
    grants: &Grants,
    limits: Limits,
) -> InstanceContext {
    InstanceContext {
        tags: Tags {
            connector: name.to_owned(),
            task: None,
        },
        grants: grants.clone(),
        limits,
        offsets: shared.offsets.reader(name),
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
    } = check(shared, config)?;
    let ctx = connector_context(shared, &config.name, &grants, limits);
    let instance_error = |e: String| vec![Problem::new("", e)];
    let mut instance =
        ConnectorInstance::new(&shared.sandbox, &plugin.component, plugin.world, &ctx)
            .await
            .map_err(|e| {
                instance_error(format!(
                    "cannot instantiate plugin {}: {e:#}",
                    plugin.spec.name
                ))
            })?;
    let errors = instance
        .validate(&pairs)
        .await
        .map_err(|e| instance_error(e.to_string()))?;
    if !errors.is_empty() {
        return Err(errors
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
    })
}

/// Describe problems from [`prepare`] for connector `name`.
pub(crate) fn problems_message(name: &str, problems: &[Problem]) -> String {
    describe(&format!("connector {name}"), problems)
}

/// Create task `id`'s instance and start its runner under `control`.
pub(crate) async fn spawn_task(
    shared: &Arc<Shared>,
    name: &str,
    prepared: &Prepared,
    id: u32,
    initial: Control,
    topics_used: &ActiveTopics,
) -> Result<TaskHandle, String> {
    let plugin = &prepared.plugin;
    let task_config = prepared
        .task_configs
        .get(id as usize)
        .ok_or_else(|| format!("connector {name} has no task {id}"))?;
    // Capabilities come from the operator's connector config, never from the task config a
    // plugin returned, so a plugin cannot grant itself more.
    let mut ctx = connector_context(shared, name, &prepared.grants, prepared.limits);
    ctx.tags.task = Some(id);
    let settings = RunnerSettings {
        flush_interval: shared.config.offset_flush_interval,
        source_poll_max_records: shared.config.source_poll_max_records,
        source_max_in_flight: shared.config.source_max_in_flight,
        sink_batch_max_records: shared.config.sink_batch_max_records,
    };
    let metrics = Arc::new(TaskMetrics::default());
    let (control, control_rx) = watch::channel(initial);
    let origin = format!("connector {name} task {id}");
    let runner: std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>> =
        match plugin.world {
            World::Source => {
                let instance = SourceTaskInstance::create(
                    &shared.sandbox,
                    &plugin.component,
                    &ctx,
                    task_config,
                )
                .await
                .map_err(|e| format!("{origin}: cannot instantiate: {e:#}"))?
                .map_err(|e| format!("{origin}: {e}"))?;
                Box::pin(
                    SourceRunner {
                        connector: name.to_owned(),
                        task: id,
                        instance,
                        producer: Arc::clone(&shared.producer),
                        topics: Arc::clone(&shared.topics),
                        offsets: Arc::clone(&shared.offsets),
                        config: prepared.pairs.clone(),
                        key_converter: prepared.key_converter,
                        value_converter: prepared.value_converter,
                        settings,
                        metrics: Arc::clone(&metrics),
                        topics_used: Arc::clone(topics_used),
                    }
                    .run(control_rx),
                )
            }
            World::Sink => {
                let instance =
                    SinkTaskInstance::create(&shared.sandbox, &plugin.component, &ctx, task_config)
                        .await
                        .map_err(|e| format!("{origin}: cannot instantiate: {e:#}"))?
                        .map_err(|e| format!("{origin}: {e}"))?;
                let subscription = Subscription::from_config(&prepared.pairs)
                    .map_err(|e| format!("{origin}: {e}"))?;
                let client_id = format!("wasm-connect-{name}-{id}");
                let (consumer, events) = consumer::create(
                    &shared.bootstrap,
                    &client_id,
                    name,
                    &subscription,
                    &shared.config.consumer,
                )?;
                Box::pin(
                    SinkRunner {
                        connector: name.to_owned(),
                        task: id,
                        instance,
                        consumer,
                        events,
                        key_converter: prepared.key_converter,
                        value_converter: prepared.value_converter,
                        settings,
                        metrics: Arc::clone(&metrics),
                        topics_used: Arc::clone(topics_used),
                    }
                    .run(control_rx),
                )
            }
        };
    metrics.set_state(if initial == Control::Pause {
        TaskState::Paused
    } else {
        TaskState::Running
    });
    let task_metrics = Arc::clone(&metrics);
    let connector = name.to_owned();
    let join = tokio::spawn(async move {
        match runner.await {
            Ok(()) => task_metrics.set_state(TaskState::Stopped),
            Err(trace) => {
                tracing::error!(connector = %connector, task = id, "task failed: {trace}");
                task_metrics.set_state(TaskState::Failed(trace));
            }
        }
    });
    Ok(TaskHandle {
        metrics,
        control,
        join,
    })
}
