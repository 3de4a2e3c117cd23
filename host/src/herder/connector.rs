//! Starting one connector: find its plugin, check its config (the worker's keys, the plugin's
//! config definitions, the plugin's own `validate`), split it into task configs (at most
//! `tasks.max`) and start a runner per task.

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
use crate::task::{RunnerSettings, TaskMetrics, TaskState};

/// A connector's tasks, for status and progress.
pub struct ConnectorStatus {
    pub name: String,
    pub plugin: String,
    pub kind: World,
    pub tasks: Vec<Arc<TaskMetrics>>,
}

/// Everything derived from a checked connector config.
struct Checked {
    plugin: Arc<Plugin>,
    pairs: Vec<(String, String)>,
    grants: Grants,
    limits: Limits,
    key_converter: Converter,
    value_converter: Converter,
}

fn check(shared: &Shared, config: &ConnectorConfig) -> Result<Checked, Vec<Problem>> {
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

/// Start `config`'s tasks; they stop when `stop` turns true.
pub(super) async fn start(
    shared: &Arc<Shared>,
    config: ConnectorConfig,
    stop: watch::Receiver<bool>,
) -> Result<(World, Vec<(Arc<TaskMetrics>, JoinHandle<()>)>), String> {
    let name = config.name.clone();
    let origin = format!("connector {name}");
    let checked = check(shared, &config).map_err(|p| describe(&origin, &p))?;
    let plugin = &checked.plugin;

    // The connector instance: the plugin's own validation, then the task split.
    let ctx = InstanceContext {
        tags: Tags {
            connector: name.clone(),
            task: None,
        },
        grants: checked.grants.clone(),
        limits: checked.limits,
        offsets: shared.offsets.reader(&name),
        reconfigure: Arc::new(tokio::sync::Notify::new()),
    };
    let mut instance =
        ConnectorInstance::new(&shared.sandbox, &plugin.component, plugin.world, &ctx)
            .await
            .map_err(|e| {
                format!(
                    "{origin}: cannot instantiate plugin {}: {e:#}",
                    plugin.spec.name
                )
            })?;
    let errors = instance
        .validate(&checked.pairs)
        .await
        .map_err(|e| format!("{origin}: {e}"))?;
    if !errors.is_empty() {
        let problems: Vec<Problem> = errors
            .into_iter()
            .map(|e| Problem::new(e.key, e.message))
            .collect();
        return Err(describe(&origin, &problems));
    }
    let task_configs = instance
        .task_configs(&checked.pairs, config.tasks_max)
        .await
        .map_err(|e| format!("{origin}: {e}"))?;
    tracing::info!(connector = %name, plugin = %plugin.spec.name, version = %plugin.spec.version, tasks = task_configs.len(), tasks_max = config.tasks_max, "starting connector");

    let settings = RunnerSettings {
        flush_interval: shared.config.offset_flush_interval,
        source_poll_max_records: shared.config.source_poll_max_records,
        source_max_in_flight: shared.config.source_max_in_flight,
        sink_batch_max_records: shared.config.sink_batch_max_records,
    };
    let mut tasks = Vec::with_capacity(task_configs.len());
    for (id, task_config) in task_configs.into_iter().enumerate() {
        let id = id as u32;
        // Capabilities come from the operator's connector config, never from the task config a
        // plugin returned, so a plugin cannot grant itself more.
        let task_ctx = InstanceContext {
            tags: Tags {
                connector: name.clone(),
                task: Some(id),
            },
            ..ctx.clone()
        };
        let metrics = Arc::new(TaskMetrics::default());
        let runner: std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<(), String>> + Send>,
        > = match plugin.world {
            World::Source => {
                let instance = SourceTaskInstance::create(
                    &shared.sandbox,
                    &plugin.component,
                    &task_ctx,
                    &task_config,
                )
                .await
                .map_err(|e| format!("{origin} task {id}: cannot instantiate: {e:#}"))?
                .map_err(|e| format!("{origin} task {id}: {e}"))?;
                Box::pin(
                    SourceRunner {
                        connector: name.clone(),
                        task: id,
                        instance,
                        producer: Arc::clone(&shared.producer),
                        topics: Arc::clone(&shared.topics),
                        offsets: Arc::clone(&shared.offsets),
                        config: checked.pairs.clone(),
                        key_converter: checked.key_converter,
                        value_converter: checked.value_converter,
                        settings,
                        metrics: Arc::clone(&metrics),
                    }
                    .run(stop.clone()),
                )
            }
            World::Sink => {
                let instance = SinkTaskInstance::create(
                    &shared.sandbox,
                    &plugin.component,
                    &task_ctx,
                    &task_config,
                )
                .await
                .map_err(|e| format!("{origin} task {id}: cannot instantiate: {e:#}"))?
                .map_err(|e| format!("{origin} task {id}: {e}"))?;
                let subscription = Subscription::from_config(&checked.pairs)
                    .map_err(|e| format!("{origin}: {e}"))?;
                let client_id = format!("wasm-connect-{name}-{id}");
                let (consumer, events) = consumer::create(
                    &shared.bootstrap,
                    &client_id,
                    &name,
                    &subscription,
                    &shared.config.consumer,
                )?;
                Box::pin(
                    SinkRunner {
                        connector: name.clone(),
                        task: id,
                        instance,
                        consumer,
                        events,
                        key_converter: checked.key_converter,
                        value_converter: checked.value_converter,
                        settings,
                        metrics: Arc::clone(&metrics),
                    }
                    .run(stop.clone()),
                )
            }
        };
        metrics.set_state(TaskState::Running);
        let task_metrics = Arc::clone(&metrics);
        let connector = name.clone();
        let handle = tokio::spawn(async move {
            match runner.await {
                Ok(()) => task_metrics.set_state(TaskState::Stopped),
                Err(trace) => {
                    tracing::error!(connector = %connector, task = id, "task failed: {trace}");
                    task_metrics.set_state(TaskState::Failed(trace));
                }
            }
        });
        tasks.push((metrics, handle));
    }
    Ok((plugin.world, tasks))
}
