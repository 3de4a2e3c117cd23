//! The worker's single wasmtime engine: configuration, the epoch ticker behind call deadlines,
//! the compile cache and the linker with the host imports.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::Notify;
use wasmtime::component::{Component, Linker};
use wasmtime::{CallHook, Engine, Store, UpdateDeadline};

use super::cache::{CompileCache, Origin};
use super::capabilities::Grants;
use super::limits::{EPOCH_TICK, Limits, Meter};
use super::state::{HostState, NoOffsets, OffsetReader, Tags};

/// Set (to anything) to write a `perf` map of the guests' compiled code, so `perf report`
/// shows plugin functions by name instead of `[JIT]` addresses.
pub const PERF_MAP_ENV: &str = "WASM_CONNECT_PERF_MAP";

/// Everything an instance is created with besides the component.
#[derive(Clone)]
pub struct InstanceContext {
    /// Connector name and task id, for logs and errors.
    pub tags: Tags,
    /// What the instance may touch.
    pub grants: Grants,
    /// Memory and CPU limits.
    pub limits: Limits,
    /// The connector's committed source offsets.
    pub offsets: Arc<dyn OffsetReader>,
    /// Notified when the plugin calls `context.request-reconfiguration`.
    pub reconfigure: Arc<Notify>,
    /// Values config providers resolved in the instance's config: redacted from its log
    /// lines and output.
    pub secrets: Arc<Vec<String>>,
}

impl InstanceContext {
    /// A context with no capabilities, default limits and no offsets, for `connector`.
    pub fn bare(connector: impl Into<String>) -> Self {
        Self {
            tags: Tags {
                connector: connector.into(),
                task: None,
            },
            grants: Grants::none(),
            limits: Limits::default(),
            offsets: Arc::new(NoOffsets),
            reconfigure: Arc::new(Notify::new()),
            secrets: Arc::default(),
        }
    }
}

/// The engine wrapper: one per worker, shared by every plugin instance.
pub struct Sandbox {
    engine: Engine,
    linker: Linker<HostState>,
    cache: Arc<CompileCache>,
}

impl Sandbox {
    /// A sandbox whose compile cache lives in `cache_dir` (none: compile every time), with
    /// the default memory reservation.
    pub fn new(cache_dir: Option<PathBuf>) -> anyhow::Result<Arc<Self>> {
        Self::with_reservation(cache_dir, DEFAULT_MEMORY_RESERVATION)
    }

    /// A sandbox whose instances each reserve `memory_reservation` bytes of address space for
    /// their linear memory (see [`configure_memories`]); no instance's memory can grow past it.
    pub fn with_reservation(
        cache_dir: Option<PathBuf>,
        memory_reservation: u64,
    ) -> anyhow::Result<Arc<Self>> {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        // For profiling plugins with `perf`: names the guest's functions in /tmp/perf-PID.map.
        if std::env::var_os(PERF_MAP_ENV).is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        configure_memories(&mut config, memory_reservation);
        let engine = Engine::new(&config)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        // Name lookups answer only granted names: WASI's own lookup is replaced.
        super::name_lookup::add_to_linker(&mut linker)?;
        // Outgoing HTTP, each request checked against the connector's grant (`sandbox::http`).
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        super::wit::add_to_linker(&mut linker)?;
        let cache = CompileCache::new(cache_dir)
            .map_err(|e| anyhow::anyhow!("cannot create the compile cache directory: {e}"))?;
        spawn_epoch_ticker(&engine);
        Ok(Arc::new(Self {
            engine,
            linker,
            cache: Arc::new(cache),
        }))
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The linker with WASI and the host imports.
    pub fn linker(&self) -> &Linker<HostState> {
        &self.linker
    }

    /// Compile `bytes` (or load them from the cache). Compiling takes seconds of CPU: from async
    /// code, use [`Sandbox::compile_blocking`].
    pub fn compile(&self, bytes: &[u8], sha256: &str) -> wasmtime::Result<(Component, Origin)> {
        self.cache.load(&self.engine, bytes, sha256)
    }

    /// [`Sandbox::compile`] on a blocking thread, so an async worker thread (REST, task loops)
    /// is not held for the seconds a compilation takes.
    pub async fn compile_blocking(
        &self,
        bytes: std::sync::Arc<[u8]>,
        sha256: String,
    ) -> wasmtime::Result<(Component, Origin)> {
        let engine = self.engine.clone();
        let cache = Arc::clone(&self.cache);
        tokio::task::spawn_blocking(move || cache.load(&engine, &bytes, &sha256))
            .await
            .map_err(|e| wasmtime::format_err!("the compilation did not finish: {e}"))?
    }

    /// How many components were compiled (not loaded from the cache) by this sandbox.
    pub fn compilations(&self) -> u64 {
        self.cache.compilations()
    }

    /// A fresh store for one instance, with its limits, capabilities and deadline handling.
    pub(crate) fn store(&self, ctx: &InstanceContext) -> wasmtime::Result<Store<HostState>> {
        let limits = &ctx.limits;
        let log_budget = super::stdio::LogBudget::with_secrets(
            limits.log_lines_per_second,
            limits.log_bytes_per_second,
            limits.log_message_max_bytes,
            Arc::clone(&ctx.secrets),
        );
        let mut table = wasmtime::component::ResourceTable::new();
        // Every open file, directory stream, stream and pollable is an entry: this bounds the
        // host descriptors and memory a plugin can hold.
        table.set_max_capacity(limits.handles_max);
        let net = Arc::new(super::capabilities::NetAccess::new(
            ctx.grants.net().clone(),
            ctx.tags.clone(),
        ));
        let state = HostState {
            wasi: ctx.grants.wasi_ctx(&ctx.tags, &log_budget, &net)?,
            http: wasmtime_wasi_http::WasiHttpCtx::new(),
            http_gate: super::http::HttpGate::new(ctx.grants.http().clone(), Arc::clone(&net)),
            net,
            log_budget,
            table,
            reconfigure_requests: 0,
            reconfigure_logged: None,
            meter: Meter::new(ctx.limits),
            tags: ctx.tags.clone(),
            offsets: ctx.offsets.clone(),
            reconfigure: ctx.reconfigure.clone(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.meter);
        // wasmtime counts every string and list it lifts out of the guest (a call's result, or
        // the arguments of a call to the host) against this, each time it is referenced and
        // before it is copied: references to shared guest bytes cannot multiply the copy.
        store.set_hostcall_fuel(limits.copy_bytes);
        // Each time the guest reaches its deadline it has run for about one more tick: count
        // it, and yield to the executor so other instances on this thread get to run.
        store.epoch_deadline_callback(|mut ctx| {
            if ctx.data_mut().meter.tick() {
                Ok(UpdateDeadline::Yield(1))
            } else {
                Err(wasmtime::format_err!("CPU deadline exceeded"))
            }
        });
        store.set_epoch_deadline(1);
        // Time in host calls (WASI waits, our imports, libcalls) is not the guest's.
        store.call_hook(|mut ctx, hook| {
            match hook {
                CallHook::CallingHost => ctx.data_mut().meter.enter_host(),
                CallHook::ReturningFromHost => ctx.data_mut().meter.leave_host(),
                _ => {}
            }
            Ok(())
        });
        Ok(store)
    }
}

/// The default address space reserved for one instance's linear memory: the default memory
/// limit ([`Limits::default`]).
pub const DEFAULT_MEMORY_RESERVATION: u64 = 256 * 1024 * 1024;

/// The size of a WebAssembly page; reservations are whole pages.
const WASM_PAGE: u64 = 64 * 1024;

/// Address space the engine may reserve per instance beyond its memory reservation: guard
/// regions around the memory and the async stack the instance's calls run on.
pub const INSTANCE_ADDRESS_SPACE_OVERHEAD: u64 = 64 * 1024 + 2 * 1024 * 1024 + 4096;

/// How linear memories are laid out in the address space.
///
/// A memory is reserved once, at `reservation` bytes (whole pages), and never moves: wasmtime
/// then compiles bounds checks against a constant and keeps the memory's base in a register.
/// Memory limits (`sandbox.memory.max.bytes`) can therefore never exceed the reservation; the
/// herder refuses connectors that ask for more. Below 4 GiB every access is bounds-checked
/// (with wasmtime's Spectre mitigation, which a multi-tenant host must keep), which costs guest
/// code some speed (measured in docs/benchmark-journal.md); 4 GiB or more gives wasmtime's default layout,
/// 4 GiB plus guard regions per instance and no bounds checks, for the fastest guest code at a
/// far larger address-space reservation per instance.
///
/// Either way a memory's initial contents are copied in rather than mapped copy-on-write from
/// an image: the mapping would be one more per instance, and the kernel caps mappings per
/// process (see `herder::capacity`); the copy is a few kilobytes for a typical plugin.
fn configure_memories(config: &mut wasmtime::Config, reservation: u64) {
    const FOUR_GIB: u64 = 1 << 32;
    config.memory_init_cow(false);
    if reservation >= FOUR_GIB {
        return;
    }
    let reservation = reservation.div_ceil(WASM_PAGE).max(1) * WASM_PAGE;
    config
        .memory_reservation(reservation)
        .memory_may_move(false)
        .memory_reservation_for_growth(0)
        .memory_guard_size(WASM_PAGE)
        // Every access is bounds-checked, so a guard before the memory would only add a
        // mapping per instance.
        .guard_before_linear_memory(false);
}

/// Advance the engine's epoch every tick, for as long as the engine lives.
fn spawn_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    let spawned = std::thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the epoch ticker thread, call deadlines are off: {e}");
    }
}
