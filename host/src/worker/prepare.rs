//! Preparing one connector: find its plugin, check its config (the worker's keys, the plugin's
//! config definitions, the plugin's own `validate`), and split it into at most `tasks.max` task
//! configs with the connector instance, which the connector's actor keeps for later splits.

use std::sync::Arc;

use tokio::sync::Notify;

use super::{RestartPolicy, Shared};
use crate::config::ConnectorConfig;
use crate::config::connector::{Problem, describe};
use crate::config::providers::Resolved;
use crate::convert::Converter;
use crate::errors::ErrorPolicy;
use crate::kafka::clients::ConnectorClients;
use crate::kafka::consumer::Subscription;
use crate::plugin::{Plugin, World};
use crate::sandbox::{ConnectorInstance, Grants, InstanceContext, Limits, Tags};
use crate::task::RunnerSettings;

/// A connector whose config checked out, with its task configs.
#[derive(Clone)]
pub(crate) struct Prepared {
    pub plugin: Arc<Plugin>,
    /// The connector config with the plugin's defaults filled in.
    pub pairs: Vec<(String, String)>,
    pub tasks_max: u32,
    pub grants: Grants,
    pub limits: Limits,
    pub key_converter: Converter,
    pub value_converter: Converter,
    pub restart: RestartPolicy,
    pub settings: RunnerSettings,
    pub errors: Arc<ErrorPolicy>,
    /// What the connector instance and its tasks' instances notify to ask for a new split.
    pub reconfigure: Arc<Notify>,
    /// The connector's own Kafka client settings, where it overrides the worker's (KIP-458).
    pub clients: ConnectorClients,
    /// The config with its config provider placeholders resolved (what `pairs` came from),
    /// to restore the placeholders in what is shown and to redact the values.
    pub resolved: Arc<Resolved>,
}

impl Prepared {
    /// What the connector is, as the herder shows it.
    pub fn facts(&self) -> super::ConnectorFacts {
        let spec = &self.plugin.spec;
        super::ConnectorFacts {
            world: self.plugin.world,
            plugin: spec.name.clone(),
            version: spec.version.clone(),
            build: (self.plugin.path.clone(), self.plugin.sha256.clone()),
            secret_keys: spec
                .config
                .iter()
                .filter(|k| k.ty == "PASSWORD")
                .map(|k| k.name.clone())
                .collect(),
            tasks_max: self.tasks_max,
            restart: self.restart,
            monitor_interval: self.settings.monitor_interval,
        }
    }
}

/// The problems with `config` that need no plugin instance (or the connector, not yet split): unknown plugin, the plugin's key
/// definitions, grants, limits, converters, the sink subscription.
fn check(
    shared: &Shared,
    config: &ConnectorConfig,
    reconfigure: Arc<Notify>,
) -> Result<Prepared, Vec<Problem>> {
    let registry = &shared.registry;
    let plugin = registry
        .find(&config.plugin, config.plugin_version.as_deref())
        .ok_or_else(|| {
            let available: Vec<String> = registry
                .plugins()
                .iter()
                .map(|p| format!("{}@{}", p.spec.name, p.spec.version))
                .collect();
            // The plugin is there but no version matches: the version key is what to change.
            let named = registry
                .plugins()
                .iter()
                .any(|p| p.spec.name == config.plugin);
            if let (true, Some(wanted)) = (named, config.plugin_version.as_deref()) {
                let versions: Vec<&String> = available
                    .iter()
                    .filter(|v| v.starts_with(&format!("{}@", config.plugin)))
                    .collect();
                return vec![Problem::new(
                    crate::config::connector::PLUGIN_VERSION,
                    format!(
                        "no version of {} in {} matches {wanted:?} (available: {}); name one of those, or a range that holds one",
                        config.plugin,
                        registry.dir().display(),
                        versions
                            .iter()
                            .map(|v| v.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )];
            }
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
    // Placeholders resolve now, on every start (a restart picks up a rotated secret); what
    // the plugin and the clients get is resolved, what is stored and shown is not.
    let resolved = shared
        .config
        .providers
        .resolve(&config.pairs)
        .unwrap_or_else(|p| {
            problems.extend(p);
            Resolved::plain(&config.pairs)
        });
    let config = &ConnectorConfig {
        pairs: resolved.pairs.clone(),
        ..config.clone()
    };
    // Before any instance exists: a connector that asks for more tasks than one connector may
    // have is refused without asking its plugin to split the work.
    problems.extend(shared.config.capacity.check_tasks_max(config.tasks_max));
    let mut pairs = config.apply_spec(&plugin.spec).unwrap_or_else(|p| {
        problems.extend(p);
        config.pairs.clone()
    });
    // Everything the worker itself interprets (capabilities, limits, converters, restarts,
    // subscriptions, client overrides) comes from the operator's config only, never from a
    // plugin's defaults.
    let operator = &config.pairs;
    let clients = shared
        .config
        .clients
        .for_connector(operator)
        .unwrap_or_else(|p| {
            problems.extend(p);
            ConnectorClients::default()
        });
    // Client overrides are the worker's business, and may hold credentials the plugin must
    // never see.
    pairs.retain(|(k, _)| !crate::kafka::clients::is_override_key(k));
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
    problems.extend(crate::transform::check(operator));
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
        return Err(redacted(&resolved, problems));
    }
    Ok(Prepared {
        plugin,
        pairs,
        tasks_max: config.tasks_max,
        grants,
        limits,
        key_converter,
        value_converter,
        restart,
        settings,
        errors: Arc::new(errors),
        reconfigure,
        clients,
        resolved: Arc::new(resolved),
    })
}

/// `problems` with every resolved secret taken out of their messages (a plugin's `validate`
/// or a value check may quote a value).
fn redacted(resolved: &Resolved, problems: Vec<Problem>) -> Vec<Problem> {
    if !resolved.has_secrets() {
        return problems;
    }
    problems
        .into_iter()
        .map(|p| Problem::new(p.key, resolved.redact(&p.message)))
        .collect()
}

/// The connector instance's context (also the base of its tasks' contexts).
pub(crate) fn connector_context(name: &str, prepared: &Prepared) -> InstanceContext {
    InstanceContext {
        tags: Tags {
            connector: name.to_owned(),
            task: None,
        },
        grants: prepared.grants.clone(),
        limits: prepared.limits,
        // The WIT: only source tasks read offsets; connector instances and sinks see none.
        offsets: Arc::new(crate::sandbox::NoOffsets),
        reconfigure: Arc::clone(&prepared.reconfigure),
        secrets: Arc::new(prepared.resolved.secrets().to_vec()),
    }
}

/// Check `config` completely and instantiate its connector (not yet created): the worker's
/// checks, then the plugin's own `validate`, in a connector instance kept for the connector.
/// The instance is made and asked on the plugin runtime. Its `request-reconfiguration`
/// notifies `reconfigure`.
pub(crate) async fn prepare(
    shared: &Shared,
    config: &ConnectorConfig,
    reconfigure: Arc<Notify>,
) -> Result<(Prepared, ConnectorInstance), Vec<Problem>> {
    let prepared = check(shared, config, reconfigure)?;
    let plugin = Arc::clone(&prepared.plugin);
    let ctx = connector_context(&config.name, &prepared);
    let sandbox = Arc::clone(&shared.sandbox);
    let pairs = prepared.pairs.clone();
    let made = crate::task::poll_ahead::runtime().spawn(async move {
        let mut instance = ConnectorInstance::new(
            &sandbox,
            &plugin.component,
            plugin.world,
            plugin.contract,
            &ctx,
        )
        .await
        .map_err(|e| format!("cannot instantiate plugin {}: {e:#}", plugin.spec.name))?;
        let invalid = instance.validate(&pairs).await.map_err(|e| e.to_string())?;
        Ok::<_, String>((instance, invalid))
    });
    let made = made
        .await
        .unwrap_or_else(|e| Err(format!("worker bug: {e}")));
    let instance_error = |e: String| vec![Problem::new("", prepared.resolved.redact(&e))];
    let (instance, invalid) = made.map_err(instance_error)?;
    if !invalid.is_empty() {
        return Err(redacted(
            &prepared.resolved,
            invalid
                .into_iter()
                .map(|e| Problem::new(e.key, e.message))
                .collect(),
        ));
    }
    Ok((prepared, instance))
}

/// Describe problems from [`prepare`] for connector `name`.
pub(crate) fn problems_message(name: &str, problems: &[Problem]) -> String {
    describe(&format!("connector {name}"), problems)
}
