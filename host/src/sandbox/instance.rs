//! Plugin instances: the connector instance (spec, validate, task-configs) and one instance per
//! task. Each owns its store; whoever owns the value is the only one calling into it, so guest
//! state needs no locks and a trap poisons only this instance.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use wasmtime::Store;
use wasmtime::component::{Component, ResourceAny};

use super::bindings::{types, v0_1, v0_2};
use super::engine::{InstanceContext, Sandbox};
use super::limits::CallKind;
use super::put_batch::PutBatch;
use super::source_batch::{Polled, RecordRef};
use super::state::HostState;
use crate::plugin::{Version, World};

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

/// Instantiate under the wall-clock deadline of `kind` (instantiation runs the component's
/// start functions, which are plugin code).
async fn instantiate<T>(
    ctx: &InstanceContext,
    kind: CallKind,
    instantiating: impl Future<Output = wasmtime::Result<T>>,
) -> anyhow::Result<T> {
    let deadline = Deadline {
        kind,
        limit: ctx.limits.wall(kind),
    };
    deadline
        .run(instantiating)
        .await
        .map_err(|e| match e.downcast_ref::<WallDeadline>() {
            Some(late) => anyhow::anyhow!("instantiation: {late}"),
            None => anyhow::Error::from(e),
        })
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
        self.store.set_epoch_deadline(1);
        Ok(&mut self.store)
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
            Ok(Err(error)) => Err(CallError::Plugin { function, error }),
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
        let tags = &self.store.data().tags;
        tracing::warn!(connector = %tags.connector, task = %tags.task_label(), "plugin trapped in {function}: {message}");
        CallError::Trap { function, message }
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

/// Which bindings a component is called through: its contract version's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Generation {
    V0_1,
    V0_2,
}

impl Generation {
    fn of(version: Version) -> anyhow::Result<Self> {
        match (version.major, version.minor) {
            (0, 1) => Ok(Generation::V0_1),
            (0, 2) => Ok(Generation::V0_2),
            _ => anyhow::bail!(
                "this worker has no bindings for contract {}@{version}",
                crate::plugin::contract::PACKAGE
            ),
        }
    }
}

enum ConnectorBindings {
    SourceV0_1(v0_1::source::SourceConnector),
    SinkV0_1(v0_1::sink::SinkConnector),
    SourceV0_2(v0_2::source::SourceConnector),
    SinkV0_2(v0_2::sink::SinkConnector),
}

/// Run `$call` on the `connector` export of whichever world and version `$bindings` holds
/// (the interface is the same in all of them, with the same host types).
macro_rules! on_connector {
    ($bindings:expr, |$connector:ident| $call:expr) => {
        match $bindings {
            ConnectorBindings::SourceV0_1(b) => {
                let $connector = b.wasm_connect_plugin_connector();
                $call
            }
            ConnectorBindings::SinkV0_1(b) => {
                let $connector = b.wasm_connect_plugin_connector();
                $call
            }
            ConnectorBindings::SourceV0_2(b) => {
                let $connector = b.wasm_connect_plugin_connector();
                $call
            }
            ConnectorBindings::SinkV0_2(b) => {
                let $connector = b.wasm_connect_plugin_connector();
                $call
            }
        }
    };
}

/// The instance that answers for a connector as a whole.
pub struct ConnectorInstance {
    guard: Guarded,
    bindings: ConnectorBindings,
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
        let mut store = sandbox.store(ctx).map_err(anyhow::Error::from)?;
        let linker = sandbox.linker();
        let bindings = match (world, Generation::of(version)?) {
            (World::Source, Generation::V0_1) => ConnectorBindings::SourceV0_1(
                instantiate(
                    ctx,
                    CallKind::Config,
                    v0_1::source::SourceConnector::instantiate_async(&mut store, component, linker),
                )
                .await?,
            ),
            (World::Sink, Generation::V0_1) => ConnectorBindings::SinkV0_1(
                instantiate(
                    ctx,
                    CallKind::Config,
                    v0_1::sink::SinkConnector::instantiate_async(&mut store, component, linker),
                )
                .await?,
            ),
            (World::Source, Generation::V0_2) => ConnectorBindings::SourceV0_2(
                instantiate(
                    ctx,
                    CallKind::Config,
                    v0_2::source::SourceConnector::instantiate_async(&mut store, component, linker),
                )
                .await?,
            ),
            (World::Sink, Generation::V0_2) => ConnectorBindings::SinkV0_2(
                instantiate(
                    ctx,
                    CallKind::Config,
                    v0_2::sink::SinkConnector::instantiate_async(&mut store, component, linker),
                )
                .await?,
            ),
        };
        Ok(Self {
            guard: Guarded {
                store,
                poisoned: false,
            },
            bindings,
        })
    }

    /// The plugin's self-description.
    pub async fn spec(&mut self) -> Result<ConnectorSpec, CallError> {
        const F: &str = "spec";
        let deadline = self.guard.deadline(F);
        let store = self.guard.begin(F)?;
        let bindings = &self.bindings;
        let outcome = deadline
            .run(async { on_connector!(bindings, |c| c.call_spec(store).await) })
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
            .run(async { on_connector!(bindings, |c| c.call_validate(store, config).await) })
            .await;
        self.guard.finish_infallible(F, outcome)
    }

    /// Split the job into task configs. More than `max_tasks` configs is a contract violation,
    /// reported as an error rather than truncated.
    pub async fn task_configs(
        &mut self,
        config: &Config,
        max_tasks: u32,
    ) -> Result<Vec<Config>, CallError> {
        const F: &str = "task-configs";
        let deadline = self.guard.deadline(F);
        let store = self.guard.begin(F)?;
        let bindings = &self.bindings;
        let outcome = deadline
            .run(async {
                on_connector!(bindings, |c| c
                    .call_task_configs(store, config, max_tasks)
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
}

enum SourceBindings {
    V0_1(v0_1::source::SourceConnector),
    V0_2(v0_2::source::SourceConnector),
}

/// Run `$call` on the `source-task` resource of whichever version `$bindings` holds, for the
/// functions whose types are the same in every version.
macro_rules! on_source_task {
    ($bindings:expr, |$task:ident| $call:expr) => {
        match $bindings {
            SourceBindings::V0_1(b) => {
                let $task = b.wasm_connect_plugin_source().source_task();
                $call
            }
            SourceBindings::V0_2(b) => {
                let $task = b.wasm_connect_plugin_source().source_task();
                $call
            }
        }
    };
}

/// One running source task.
pub struct SourceTaskInstance {
    guard: Guarded,
    bindings: SourceBindings,
    handle: ResourceAny,
}

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
        let mut store = sandbox.store(ctx).map_err(anyhow::Error::from)?;
        let linker = sandbox.linker();
        let bindings = match Generation::of(version)? {
            Generation::V0_1 => SourceBindings::V0_1(
                instantiate(
                    ctx,
                    CallKind::Data,
                    v0_1::source::SourceConnector::instantiate_async(&mut store, component, linker),
                )
                .await?,
            ),
            Generation::V0_2 => SourceBindings::V0_2(
                instantiate(
                    ctx,
                    CallKind::Data,
                    v0_2::source::SourceConnector::instantiate_async(&mut store, component, linker),
                )
                .await?,
            ),
        };
        let mut guard = Guarded {
            store,
            poisoned: false,
        };
        const F: &str = "source-task.create";
        let deadline = guard.deadline(F);
        let store = match guard.begin(F) {
            Ok(store) => store,
            Err(e) => return Ok(Err(e)),
        };
        let outcome = deadline
            .run(async { on_source_task!(&bindings, |t| t.call_create(store, config).await) })
            .await;
        Ok(guard.finish(F, outcome).map(|handle| Self {
            guard,
            bindings,
            handle,
        }))
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
        let max_bytes = self.guard.store.data().meter.limits().memory_bytes;
        let deadline = self.guard.deadline(F);
        let store = self.guard.begin(F)?;
        let too_many = |count: usize| CallError::Contract {
            function: F,
            message: format!(
                "the task returned {count} records but at most {max_records} were asked for"
            ),
        };
        let polled = match &self.bindings {
            SourceBindings::V0_1(b) => {
                let call = b.wasm_connect_plugin_source().source_task();
                let outcome = deadline
                    .run(call.call_poll(store, self.handle, max_records))
                    .await;
                Polled::records(self.guard.finish(F, outcome)?, max_bytes)
            }
            SourceBindings::V0_2(b) => {
                let call = b.wasm_connect_plugin_source().source_task();
                let outcome = deadline
                    .run(call.call_poll(store, self.handle, max_records))
                    .await;
                Polled::packed(self.guard.finish(F, outcome)?, max_bytes)
            }
        };
        if polled.len() > max_records as usize {
            return Err(too_many(polled.len()));
        }
        Ok(polled)
    }

    /// Tell the task these offsets are durably recorded.
    pub async fn commit(&mut self, positions: &[SourcePosition]) -> Result<(), CallError> {
        const F: &str = "commit";
        let deadline = self.guard.deadline(F);
        let store = self.guard.begin(F)?;
        let handle = self.handle;
        let bindings = &self.bindings;
        let outcome = deadline
            .run(async {
                on_source_task!(bindings, |t| t.call_commit(store, handle, positions).await)
            })
            .await;
        self.guard.finish(F, outcome)
    }

    /// Stop the task and release its resource; the instance is done afterwards.
    pub async fn stop(mut self) -> Result<(), CallError> {
        const F: &str = "stop";
        let deadline = self.guard.deadline(F);
        let store = self.guard.begin(F)?;
        let handle = self.handle;
        let bindings = &self.bindings;
        let outcome = deadline
            .run(async { on_source_task!(bindings, |t| t.call_stop(store, handle).await) })
            .await;
        self.guard.finish_infallible(F, outcome)?;
        let outcome = deadline
            .run(self.handle.resource_drop_async(&mut self.guard.store))
            .await;
        self.guard.finish_infallible("source-task.drop", outcome)
    }
}

enum SinkBindings {
    V0_1(v0_1::sink::SinkConnector),
    V0_2(v0_2::sink::SinkConnector),
}

/// As [`on_source_task`], for the `sink-task` resource.
macro_rules! on_sink_task {
    ($bindings:expr, |$task:ident| $call:expr) => {
        match $bindings {
            SinkBindings::V0_1(b) => {
                let $task = b.wasm_connect_plugin_sink().sink_task();
                $call
            }
            SinkBindings::V0_2(b) => {
                let $task = b.wasm_connect_plugin_sink().sink_task();
                $call
            }
        }
    };
}

/// One running sink task.
pub struct SinkTaskInstance {
    guard: Guarded,
    bindings: SinkBindings,
    handle: ResourceAny,
}

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
        let mut store = sandbox.store(ctx).map_err(anyhow::Error::from)?;
        let linker = sandbox.linker();
        let bindings = match Generation::of(version)? {
            Generation::V0_1 => SinkBindings::V0_1(
                instantiate(
                    ctx,
                    CallKind::Data,
                    v0_1::sink::SinkConnector::instantiate_async(&mut store, component, linker),
                )
                .await?,
            ),
            Generation::V0_2 => SinkBindings::V0_2(
                instantiate(
                    ctx,
                    CallKind::Data,
                    v0_2::sink::SinkConnector::instantiate_async(&mut store, component, linker),
                )
                .await?,
            ),
        };
        let mut guard = Guarded {
            store,
            poisoned: false,
        };
        const F: &str = "sink-task.create";
        let deadline = guard.deadline(F);
        let store = match guard.begin(F) {
            Ok(store) => store,
            Err(e) => return Ok(Err(e)),
        };
        let outcome = deadline
            .run(async { on_sink_task!(&bindings, |t| t.call_create(store, config).await) })
            .await;
        Ok(guard.finish(F, outcome).map(|handle| Self {
            guard,
            bindings,
            handle,
        }))
    }

    /// Partitions assigned to the task.
    pub async fn open(&mut self, partitions: &[TopicPartition]) -> Result<(), CallError> {
        const F: &str = "open";
        let deadline = self.guard.deadline(F);
        let store = self.guard.begin(F)?;
        let handle = self.handle;
        let bindings = &self.bindings;
        let outcome = deadline
            .run(async {
                on_sink_task!(bindings, |t| t.call_open(store, handle, partitions).await)
            })
            .await;
        self.guard.finish(F, outcome)
    }

    /// Partitions taken away from the task.
    pub async fn close(&mut self, partitions: &[TopicPartition]) -> Result<(), CallError> {
        const F: &str = "close";
        let deadline = self.guard.deadline(F);
        let store = self.guard.begin(F)?;
        let handle = self.handle;
        let bindings = &self.bindings;
        let outcome = deadline
            .run(async {
                on_sink_task!(bindings, |t| t.call_close(store, handle, partitions).await)
            })
            .await;
        self.guard.finish(F, outcome)
    }

    /// Hand a batch to the task; returns the records it could not write. A failure index outside
    /// the batch, or the same index twice, is a contract violation.
    pub async fn put(&mut self, batch: &PutBatch) -> Result<Vec<RecordFailure>, CallError> {
        const F: &str = "put";
        let handle = self.handle;
        let outcome = match &self.bindings {
            SinkBindings::V0_1(b) => {
                let records = batch.records().map_err(|message| CallError::Contract {
                    function: F,
                    message,
                })?;
                let deadline = self.guard.deadline(F);
                let store = self.guard.begin(F)?;
                let call = b.wasm_connect_plugin_sink().sink_task();
                deadline.run(call.call_put(store, handle, &records)).await
            }
            SinkBindings::V0_2(b) => {
                let deadline = self.guard.deadline(F);
                let store = self.guard.begin(F)?;
                let call = b.wasm_connect_plugin_sink().sink_task();
                deadline
                    .run(call.call_put(store, handle, batch.as_wit()))
                    .await
            }
        };
        let failures = self.guard.finish(F, outcome)?;
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
        const F: &str = "flush";
        let deadline = self.guard.deadline(F);
        let store = self.guard.begin(F)?;
        let handle = self.handle;
        let bindings = &self.bindings;
        let outcome = deadline
            .run(async { on_sink_task!(bindings, |t| t.call_flush(store, handle, offsets).await) })
            .await;
        self.guard.finish(F, outcome)
    }

    /// Stop the task and release its resource.
    pub async fn stop(mut self) -> Result<(), CallError> {
        const F: &str = "stop";
        let deadline = self.guard.deadline(F);
        let store = self.guard.begin(F)?;
        let handle = self.handle;
        let bindings = &self.bindings;
        let outcome = deadline
            .run(async { on_sink_task!(bindings, |t| t.call_stop(store, handle).await) })
            .await;
        self.guard.finish_infallible(F, outcome)?;
        let outcome = deadline
            .run(self.handle.resource_drop_async(&mut self.guard.store))
            .await;
        self.guard.finish_infallible("sink-task.drop", outcome)
    }
}
