//! Plugin instances: the connector instance (spec and validate; then the running connector's
//! create, task-configs, monitor and stop) and one instance per task. Each owns its store; whoever owns the value is the only one calling into it, so guest
//! state needs no locks and a trap poisons only this instance.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use wasmtime::Store;
use wasmtime::component::{Component, ResourceAny};

use super::engine::{InstanceContext, Sandbox};
use super::limits::CallKind;
use super::put_batch::PutBatch;
use super::source_batch::{Polled, RecordRef};
use super::state::HostState;
use super::wit::{Bindings, Connector, Contract, dispatch, types};
use crate::plugin::{Version, World};

pub use super::wit::MonitorReport;
pub use types::{
    Config, ConfigError, ConnectorSpec, PluginError, RecordFailure, SourcePosition, SourceRecord,
    TopicPartition, TopicPartitionOffset,
};

/// The largest task config (keys and values) a connector may return: Kafka's default largest
/// record, since distributed mode stores each task config as one.
pub const MAX_TASK_CONFIG_BYTES: usize = 1_000_000;

/// The most all of a connector's task configs may add up to.
pub const MAX_TASK_CONFIGS_BYTES: usize = 16 * 1024 * 1024;

/// Why a call into a plugin did not return a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The plugin returned an error (retriable, fatal or invalid-config).
    #[error("{function}: {}", describe_plugin_error(.error))]
    Plugin {
        function: &'static str,
        error: PluginError,
    },
    /// The guest trapped (panic, out of bounds, out of memory, deadline...); the instance is
    /// unusable afterwards.
    #[error("{function}: the plugin trapped: {message}")]
    Trap {
        function: &'static str,
        message: String,
    },
    /// The plugin broke the contract (e.g. more task configs or records than allowed).
    #[error("{function}: {message}")]
    Contract {
        function: &'static str,
        message: String,
    },
    /// The call did not return within its wall-clock deadline: it was abandoned, and the
    /// instance with it.
    #[error("{function}: {message}")]
    Abandoned {
        function: &'static str,
        message: String,
    },
    /// A previous trap left the instance unusable; it must be rebuilt.
    #[error("{function}: the instance is unusable after an earlier trap and must be recreated")]
    Poisoned { function: &'static str },
    /// The worker task that served the instance ended without answering (a worker bug, not
    /// the plugin's); the instance is gone.
    #[error("{function}: the worker lost the plugin instance ({message})")]
    Lost {
        function: &'static str,
        message: String,
    },
}

impl CallError {
    /// Whether the host should retry the same call after a backoff.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            CallError::Plugin {
                error: PluginError::Retriable(_),
                ..
            }
        )
    }
}

/// One line for a plugin error.
pub fn describe_plugin_error(error: &PluginError) -> String {
    match error {
        PluginError::Retriable(m) => format!("retriable error: {m}"),
        PluginError::Fatal(m) => format!("fatal error: {m}"),
        PluginError::InvalidConfig(errors) => {
            let list: Vec<String> = errors
                .iter()
                .map(|e| {
                    if e.key.is_empty() {
                        e.message.clone()
                    } else {
                        format!("{}: {}", e.key, e.message)
                    }
                })
                .collect();
            format!("invalid config: {}", list.join("; "))
        }
    }
}

impl fmt::Display for types::ConnectorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            types::ConnectorKind::Source => "source",
            types::ConnectorKind::Sink => "sink",
        })
    }
}

/// The wall-clock deadline of one call.
#[derive(Debug, Clone, Copy)]
struct Deadline {
    kind: CallKind,
    limit: Duration,
}

/// The error a call abandoned at its [`Deadline`] ends with.
#[derive(Debug)]
struct WallDeadline(Deadline);

impl fmt::Display for WallDeadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the call did not return within its wall-clock deadline of {} ms ({}); it was abandoned with its instance",
            self.0.limit.as_millis(),
            self.0.kind.key()
        )
    }
}

impl std::error::Error for WallDeadline {}

impl Deadline {
    /// Run `call`, or give up on it when the deadline passes. Giving up drops the call's
    /// future: wasmtime then unwinds the guest's stack at its next suspension point (an epoch
    /// yield, at most a tick away, or a host call's await), so whatever the plugin is doing,
    /// sleeping, waiting on I/O, spinning or calling the host in a loop, ends here.
    async fn run<T>(self, call: impl Future<Output = wasmtime::Result<T>>) -> wasmtime::Result<T> {
        match tokio::time::timeout(self.limit, call).await {
            Ok(outcome) => outcome,
            Err(_) => Err(wasmtime::Error::new(WallDeadline(self))),
        }
    }
}

/// The store of one instance plus the poison flag and the call guard.
struct Guarded {
    store: Store<HostState>,
    poisoned: bool,
}

impl Guarded {
    /// The wall-clock deadline of a call to `function`.
    fn deadline(&self, function: &'static str) -> Deadline {
        let kind = CallKind::of(function);
        Deadline {
            kind,
            limit: self.store.data().meter.limits().wall(kind),
        }
    }

    /// Arm the CPU deadline for a call, or refuse when the instance is poisoned.
    fn begin(&mut self, function: &'static str) -> Result<&mut Store<HostState>, CallError> {
        if self.poisoned {
            return Err(CallError::Poisoned { function });
        }
        self.store.data_mut().meter.start_call();
        self.store.data().net.clear_denials();
        self.store.set_epoch_deadline(1);
        Ok(&mut self.store)
    }

    /// What the sandbox refused during the call, as a clause for its error, if anything: a
    /// plugin's own error ("connection failed: permission denied") does not say why.
    fn refusals(&self) -> Option<String> {
        let denials = self.store.data().net.take_denials();
        (!denials.is_empty()).then(|| format!("(the sandbox refused {})", denials.join("; ")))
    }

    /// Map the outcome of a call: a wasmtime error is a trap (and poisons the instance), a
    /// plugin error keeps the instance usable.
    fn finish<T>(
        &mut self,
        function: &'static str,
        outcome: wasmtime::Result<Result<T, PluginError>>,
    ) -> Result<T, CallError> {
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => {
                let error = match self.refusals() {
                    Some(refused) => with_clause(error, &refused),
                    None => error,
                };
                Err(CallError::Plugin { function, error })
            }
            Err(trap) => Err(self.trap(function, trap)),
        }
    }

    fn finish_infallible<T>(
        &mut self,
        function: &'static str,
        outcome: wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        outcome.map_err(|trap| self.trap(function, trap))
    }

    fn trap(&mut self, function: &'static str, trap: wasmtime::Error) -> CallError {
        self.poisoned = true;
        if let Some(late) = trap.downcast_ref::<WallDeadline>() {
            let message = late.to_string();
            let tags = &self.store.data().tags;
            tracing::warn!(connector = %tags.connector, task = %tags.task_label(), "plugin call {function} abandoned: {message}");
            return CallError::Abandoned { function, message };
        }
        let meter = &self.store.data().meter;
        let limits = meter.limits();
        let message = if meter.deadline_hit {
            format!(
                "the call ran longer than its CPU deadline of {} ms (sandbox.call.timeout.ms)",
                limits.call_timeout.as_millis()
            )
        } else if trap_message(&trap).contains("resource table has no free keys") {
            format!(
                "the plugin tried to hold more than {} handles (open files, directory streams, streams, pollables) (sandbox.handles.max): {}",
                limits.handles_max,
                trap_message(&trap)
            )
        } else if trap_message(&trap).contains(COPY_EXHAUSTED) {
            format!(
                "the plugin handed the worker more than {} bytes in one crossing (sandbox.call.copy.max.bytes): every string and list is counted each time it is referenced, shared bytes or not; return less per call",
                limits.copy_bytes
            )
        } else if let Some(desired) = meter.memory_denied {
            format!(
                "the plugin tried to grow its memory to {desired} bytes, over its limit of {} bytes (sandbox.memory.max.bytes)",
                limits.memory_bytes
            )
        } else {
            trap_message(&trap)
        };
        let message = match self.refusals() {
            Some(refused) => format!("{message} {refused}"),
            None => message,
        };
        let tags = &self.store.data().tags;
        tracing::warn!(connector = %tags.connector, task = %tags.task_label(), "plugin trapped in {function}: {message}");
        CallError::Trap { function, message }
    }
}

/// `error` with `clause` appended to its message.
fn with_clause(error: PluginError, clause: &str) -> PluginError {
    match error {
        PluginError::Retriable(m) => PluginError::Retriable(format!("{m} {clause}")),
        PluginError::Fatal(m) => PluginError::Fatal(format!("{m} {clause}")),
        PluginError::InvalidConfig(mut errors) => {
            errors.push(types::ConfigError {
                key: String::new(),
                message: clause.to_owned(),
            });
            PluginError::InvalidConfig(errors)
        }
    }
}

/// What wasmtime's error says when lifting a value out of the guest ran past the store's hostcall
/// fuel (`sandbox.call.copy.max.bytes`). Its error type is private, so the text is matched.
const COPY_EXHAUSTED: &str = "fuel allocated for hostcalls has been exhausted";

/// The trap's own message and its root cause, without a Rust backtrace.
fn trap_message(trap: &wasmtime::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in trap.chain() {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}

/// Instantiate `component` (implementing `world` of contract `version`) in a new store, under
/// the wall-clock deadline of `kind`.
async fn instantiate_plugin(
    sandbox: &Sandbox,
    component: &Component,
    world: World,
    version: Version,
    ctx: &InstanceContext,
    kind: CallKind,
) -> anyhow::Result<(Store<HostState>, Bindings)> {
    let mut store = sandbox.store(ctx).map_err(anyhow::Error::from)?;
    let linker = sandbox.linker();
    // Instantiation runs the component's start functions, which are plugin code.
    let deadline = Deadline {
        kind,
        limit: ctx.limits.wall(kind),
    };
    let bindings = deadline
        .run(Bindings::instantiate(
            &mut store, component, linker, world, version,
        ))
        .await
        .map_err(|e| match e.downcast_ref::<WallDeadline>() {
            Some(late) => anyhow::anyhow!("instantiation: {late}"),
            None => anyhow::Error::from(e),
        })?;
    Ok((store, bindings))
}

/// The instance that answers for a connector as a whole: it describes the plugin and checks
/// configs, and once [`ConnectorInstance::create`]d it splits the work, is monitored and is
/// stopped, as contract 0.3.0's `connector-instance` (older contracts are adapted in
/// `super::wit`).
pub struct ConnectorInstance {
    guard: Guarded,
    bindings: Bindings,
    /// Set by `create`; taken by `stop`.
    connector: Option<Connector>,
}

impl ConnectorInstance {
    /// Instantiate `component` (implementing `world` of contract `version`) as a connector
    /// instance.
    pub async fn new(
        sandbox: &Sandbox,
        component: &Component,
        world: World,
        version: Version,
        ctx: &InstanceContext,
    ) -> anyhow::Result<Self> {
        let (store, bindings) =
            instantiate_plugin(sandbox, component, world, version, ctx, CallKind::Config).await?;
        Ok(Self {
            guard: Guarded {
                store,
                poisoned: false,
            },
            bindings,
            connector: None,
        })
    }

    /// The plugin's self-description.
    pub async fn spec(&mut self) -> Result<ConnectorSpec, CallError> {
        const F: &str = "spec";
        let deadline = self.guard.deadline(F);
        let store = self.guard.begin(F)?;
        let bindings = &self.bindings;
        let outcome = deadline
            .run(async { dispatch!(bindings, |p| p.spec(store).await) })
            .await;
        self.guard.finish_infallible(F, outcome)
    }

    /// The plugin's own checks of `config`; empty when valid.
    pub async fn validate(&mut self, config: &Config) -> Result<Vec<ConfigError>, CallError> {
        const F: &str = "validate";
        let deadline = self.guard.deadline(F);
        let store = self.guard.begin(F)?;
        let bindings = &self.bindings;
        let outcome = deadline
            .run(async { dispatch!(bindings, |p| p.validate(store, config).await) })
            .await;
        self.guard.finish_infallible(F, outcome)
    }

    /// Whether the connector was created (and not stopped since).
    pub fn is_created(&self) -> bool {
        self.connector.is_some()
    }

    /// Whether the connector's contract has a `monitor` to call (0.3.0 on).
    pub fn monitors(&self) -> bool {
        dispatch!(&self.bindings, |p| p.monitors())
    }

    /// Start the connector with its (validated) config: `connector-instance.create`.
    pub async fn create(&mut self, config: &Config) -> Result<(), CallError> {
        const F: &str = "connector-instance.create";
        let deadline = self.guard.deadline(F);
        let store = self.guard.begin(F)?;
        let bindings = &self.bindings;
        let outcome = deadline
            .run(async { dispatch!(bindings, |p| p.connector_create(store, config).await) })
            .await;
        self.connector = Some(self.guard.finish(F, outcome)?);
        Ok(())
    }

    fn created<'a>(
        connector: &'a Option<Connector>,
        function: &'static str,
    ) -> Result<&'a Connector, CallError> {
        connector.as_ref().ok_or(CallError::Contract {
            function,
            message: "worker bug: the connector was not created".into(),
        })
    }

    /// Split the job into task configs. More than `max_tasks` configs is a contract violation,
    /// reported as an error rather than truncated.
    pub async fn task_configs(&mut self, max_tasks: u32) -> Result<Vec<Config>, CallError> {
        const F: &str = "task-configs";
        let deadline = self.guard.deadline(F);
        let connector = Self::created(&self.connector, F)?;
        let store = self.guard.begin(F)?;
        let bindings = &self.bindings;
        let outcome = deadline
            .run(async {
                dispatch!(bindings, |p| p
                    .task_configs(store, connector, max_tasks)
                    .await)
            })
            .await;
        let configs = self.guard.finish(F, outcome)?;
        let size = |config: &Config| config.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
        if let Some((index, big)) = configs
            .iter()
            .enumerate()
            .find(|(_, c)| size(c) > MAX_TASK_CONFIG_BYTES)
        {
            return Err(CallError::Contract {
                function: F,
                message: format!(
                    "task config {index} is {} bytes, over the limit of {MAX_TASK_CONFIG_BYTES} bytes; a task config says what to read or write, not the data itself",
                    size(big)
                ),
            });
        }
        let total: usize = configs.iter().map(size).sum();
        if total > MAX_TASK_CONFIGS_BYTES {
            return Err(CallError::Contract {
                function: F,
                message: format!(
                    "the task configs add up to {total} bytes, over the limit of {MAX_TASK_CONFIGS_BYTES} bytes for a connector"
                ),
            });
        }
        if configs.len() > max_tasks as usize {
            return Err(CallError::Contract {
                function: F,
                message: format!(
                    "the connector returned {} task configs but tasks.max is {max_tasks}; a connector must return at most tasks.max configs",
                    configs.len()
                ),
            });
        }
        Ok(configs)
    }

    /// Ask the connector whether its split of work changed: `connector-instance.monitor`.
    pub async fn monitor(&mut self) -> Result<MonitorReport, CallError> {
        const F: &str = "monitor";
        let deadline = self.guard.deadline(F);
        let connector = Self::created(&self.connector, F)?;
        let store = self.guard.begin(F)?;
        let bindings = &self.bindings;
        let outcome = deadline
            .run(async { dispatch!(bindings, |p| p.monitor(store, connector).await) })
            .await;
        self.guard.finish(F, outcome)
    }

    /// Stop a created connector (`connector-instance.stop`) and drop its resource; nothing
    /// to do for one that was never created, or whose instance is unusable.
    pub async fn stop(&mut self) -> Result<(), CallError> {
        const F: &str = "connector-instance.stop";
        let Some(connector) = self.connector.take() else {
            return Ok(());
        };
        if self.guard.poisoned {
            return Ok(());
        }
        let deadline = self.guard.deadline(F);
        let store = self.guard.begin(F)?;
        let bindings = &self.bindings;
        let outcome = deadline
            .run(async { dispatch!(bindings, |p| p.connector_stop(store, &connector).await) })
            .await;
        self.guard.finish_infallible(F, outcome)
    }
}

/// One running task instance: its store, its bindings and the task's resource.
struct TaskInstance {
    guard: Guarded,
    bindings: Bindings,
    handle: ResourceAny,
}

impl TaskInstance {
    /// Instantiate `component` and create the task from `config` with `create` (the
    /// world's `create`, named `function`).
    async fn create<C>(
        sandbox: &Sandbox,
        component: &Component,
        (world, version): (World, Version),
        ctx: &InstanceContext,
        function: &'static str,
        create: C,
    ) -> anyhow::Result<Result<Self, CallError>>
    where
        C: AsyncFnOnce(
            &Bindings,
            &mut Store<HostState>,
        ) -> wasmtime::Result<Result<ResourceAny, PluginError>>,
    {
        let (store, bindings) =
            instantiate_plugin(sandbox, component, world, version, ctx, CallKind::Data).await?;
        let mut guard = Guarded {
            store,
            poisoned: false,
        };
        let deadline = guard.deadline(function);
        let store = match guard.begin(function) {
            Ok(store) => store,
            Err(e) => return Ok(Err(e)),
        };
        let outcome = deadline.run(create(&bindings, store)).await;
        Ok(guard.finish(function, outcome).map(|handle| Self {
            guard,
            bindings,
            handle,
        }))
    }

    /// Call `function` on the task under its deadlines; a trap poisons the instance.
    async fn call<T, C>(&mut self, function: &'static str, call: C) -> Result<T, CallError>
    where
        C: AsyncFnOnce(
            &Bindings,
            &mut Store<HostState>,
            ResourceAny,
        ) -> wasmtime::Result<Result<T, PluginError>>,
    {
        let deadline = self.guard.deadline(function);
        let store = self.guard.begin(function)?;
        let outcome = deadline.run(call(&self.bindings, store, self.handle)).await;
        self.guard.finish(function, outcome)
    }

    /// Stop the task and release its resource; the instance is done afterwards.
    async fn stop(mut self, drop_name: &'static str) -> Result<(), CallError> {
        const F: &str = "stop";
        let deadline = self.guard.deadline(F);
        let store = self.guard.begin(F)?;
        let handle = self.handle;
        let bindings = &self.bindings;
        let outcome = deadline
            .run(async { dispatch!(bindings, |p| p.task_stop(store, handle).await) })
            .await;
        self.guard.finish_infallible(F, outcome)?;
        let outcome = deadline
            .run(self.handle.resource_drop_async(&mut self.guard.store))
            .await;
        self.guard.finish_infallible(drop_name, outcome)
    }
}

/// One running source task.
pub struct SourceTaskInstance(TaskInstance);

impl SourceTaskInstance {
    /// Instantiate `component` (built for contract `version`) and create the task from
    /// `config` (`source-task.create`).
    pub async fn create(
        sandbox: &Sandbox,
        component: &Component,
        version: Version,
        ctx: &InstanceContext,
        config: &Config,
    ) -> anyhow::Result<Result<Self, CallError>> {
        let created = TaskInstance::create(
            sandbox,
            component,
            (World::Source, version),
            ctx,
            "source-task.create",
            async |bindings: &Bindings, store: &mut Store<HostState>| {
                dispatch!(bindings, |p| p.source_create(store, config).await)
            },
        )
        .await?;
        Ok(created.map(Self))
    }

    /// Up to `max_records` records, owned; more than that, or a batch that breaks the packing
    /// rules, is a contract violation. The task loop reads batches in place instead
    /// ([`SourceTaskInstance::poll_batch`]).
    pub async fn poll(&mut self, max_records: u32) -> Result<Vec<SourceRecord>, CallError> {
        let polled = self.poll_batch(max_records).await?;
        Ok(polled.read()?.iter().map(RecordRef::to_record).collect())
    }

    /// Up to `max_records` records, as the plugin returned them; more than that is a contract
    /// violation, and so is a batch that breaks the packing rules (which [`Polled::read`]
    /// checks).
    pub async fn poll_batch(&mut self, max_records: u32) -> Result<Polled, CallError> {
        const F: &str = "poll";
        let max_bytes = self.0.guard.store.data().meter.limits().memory_bytes;
        let polled = self
            .0
            .call(F, async |bindings, store, task| {
                dispatch!(bindings, |p| p
                    .poll(store, task, max_records, max_bytes)
                    .await)
            })
            .await?;
        if polled.len() > max_records as usize {
            return Err(CallError::Contract {
                function: F,
                message: format!(
                    "the task returned {} records but at most {max_records} were asked for",
                    polled.len()
                ),
            });
        }
        Ok(polled)
    }

    /// Tell the task these offsets are durably recorded.
    pub async fn commit(&mut self, positions: &[SourcePosition]) -> Result<(), CallError> {
        self.0
            .call("commit", async |bindings, store, task| {
                dispatch!(bindings, |p| p.commit(store, task, positions).await)
            })
            .await
    }

    /// Stop the task and release its resource; the instance is done afterwards.
    pub async fn stop(self) -> Result<(), CallError> {
        self.0.stop("source-task.drop").await
    }
}

/// One running sink task.
pub struct SinkTaskInstance(TaskInstance);

impl SinkTaskInstance {
    /// Instantiate `component` (built for contract `version`) and create the task from
    /// `config` (`sink-task.create`).
    pub async fn create(
        sandbox: &Sandbox,
        component: &Component,
        version: Version,
        ctx: &InstanceContext,
        config: &Config,
    ) -> anyhow::Result<Result<Self, CallError>> {
        let created = TaskInstance::create(
            sandbox,
            component,
            (World::Sink, version),
            ctx,
            "sink-task.create",
            async |bindings: &Bindings, store: &mut Store<HostState>| {
                dispatch!(bindings, |p| p.sink_create(store, config).await)
            },
        )
        .await?;
        Ok(created.map(Self))
    }

    /// Partitions assigned to the task.
    pub async fn open(&mut self, partitions: &[TopicPartition]) -> Result<(), CallError> {
        self.0
            .call("open", async |bindings, store, task| {
                dispatch!(bindings, |p| p.open(store, task, partitions).await)
            })
            .await
    }

    /// Partitions taken away from the task.
    pub async fn close(&mut self, partitions: &[TopicPartition]) -> Result<(), CallError> {
        self.0
            .call("close", async |bindings, store, task| {
                dispatch!(bindings, |p| p.close(store, task, partitions).await)
            })
            .await
    }

    /// Hand a batch to the task; returns the records it could not write. A failure index outside
    /// the batch, or the same index twice, is a contract violation.
    pub async fn put(&mut self, batch: &PutBatch) -> Result<Vec<RecordFailure>, CallError> {
        const F: &str = "put";
        let mut unputtable = None;
        let failures = self
            .0
            .call(F, async |bindings, store, task| {
                match dispatch!(bindings, |p| p.put(store, task, batch).await) {
                    Ok(outcome) => outcome,
                    Err(message) => {
                        unputtable = Some(message);
                        Ok(Ok(Vec::new()))
                    }
                }
            })
            .await?;
        if let Some(message) = unputtable {
            return Err(CallError::Contract {
                function: F,
                message,
            });
        }
        let mut seen = std::collections::HashSet::with_capacity(failures.len());
        if let Some(twice) = failures.iter().find(|f| !seen.insert(f.index)) {
            return Err(CallError::Contract {
                function: F,
                message: format!(
                    "the task reported record index {} as failed more than once",
                    twice.index
                ),
            });
        }
        if let Some(bad) = failures.iter().find(|f| f.index as usize >= batch.len()) {
            return Err(CallError::Contract {
                function: F,
                message: format!(
                    "the task reported a failure for record index {} of a batch of {}",
                    bad.index,
                    batch.len()
                ),
            });
        }
        Ok(failures)
    }

    /// Make everything durable; returns the offsets safe to commit.
    pub async fn flush(
        &mut self,
        offsets: &[TopicPartitionOffset],
    ) -> Result<Vec<TopicPartitionOffset>, CallError> {
        self.0
            .call("flush", async |bindings, store, task| {
                dispatch!(bindings, |p| p.flush(store, task, offsets).await)
            })
            .await
    }

    /// Stop the task and release its resource.
    pub async fn stop(self) -> Result<(), CallError> {
        self.0.stop("sink-task.drop").await
    }
}
