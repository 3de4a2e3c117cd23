//! Per-instance resource limits: linear memory (a store limiter), CPU time and wall-clock time
//! per guest call, log volume and handles, with worker-wide defaults that a connector config
//! may override.
//!
//! Guest time is measured at every epoch tick the guest reaches: the wall time since the last
//! checkpoint, minus the waits in host calls meanwhile (the store's call hook reports those),
//! capped at one tick so a guest resumed late by a busy executor is charged at most one tick
//! for the wait. A host call that returns within [`HOST_WAIT`] is work the host did for the
//! plugin (a clock read, random bytes, an offset lookup, a write) and counts as the plugin's
//! CPU time, so a guest calling the host in a loop runs out of time like a guest spinning; a
//! longer host call is a wait (a sleep, blocking I/O) and is not CPU time, but every call also
//! has a wall-clock deadline that bounds waits and work alike.

use std::time::{Duration, Instant};

use crate::config_keys::{
    CALL_COPY_MAX_BYTES, CALL_TIMEOUT_MS, CALL_WALL_TIMEOUT_MS, CONFIG_WALL_TIMEOUT_MS,
    FLUSH_WALL_TIMEOUT_MS, HANDLES_MAX, LOG_BYTES_PER_SECOND, LOG_LINES_PER_SECOND,
    LOG_MESSAGE_MAX_BYTES, MEMORY_MAX_BYTES,
};

/// How often the engine's epoch advances; the granularity of call deadlines.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// A host call that takes longer than this is a wait, not CPU time spent for the plugin.
pub const HOST_WAIT: Duration = Duration::from_millis(1);

/// Which wall-clock deadline a call into a plugin runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// `source-task.create`, `poll`, `commit`, `sink-task.create`, `put`, `open`, `close`.
    Data,
    /// `flush` and `stop`: may have a batch's worth of writing to finish.
    Flush,
    /// `spec`, `validate` and the connector instance's `create`, `task-configs`, `monitor` and
    /// `stop`: answered while a REST caller or the worker waits.
    Config,
}

impl CallKind {
    /// The kind of the plugin function `function`.
    pub fn of(function: &str) -> Self {
        match function {
            "flush" | "stop" => CallKind::Flush,
            // Everything the connector instance does (the WIT's promise for `connector-instance`).
            "spec"
            | "validate"
            | "task-configs"
            | "monitor"
            | "connector-instance.create"
            | "connector-instance.stop" => CallKind::Config,
            _ => CallKind::Data,
        }
    }

    /// The key that sets this kind's deadline.
    pub fn key(self) -> &'static str {
        match self {
            CallKind::Data => CALL_WALL_TIMEOUT_MS,
            CallKind::Flush => FLUSH_WALL_TIMEOUT_MS,
            CallKind::Config => CONFIG_WALL_TIMEOUT_MS,
        }
    }
}

/// Limits applied to one plugin instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum linear memory of the instance, in bytes (all memories together).
    pub memory_bytes: usize,
    /// Maximum guest CPU time of one call into the plugin.
    pub call_timeout: Duration,
    /// Wall-clock time one `poll`, `put`, `commit`, `open`, `close` or `create` may take.
    pub call_wall: Duration,
    /// Wall-clock time one `flush` or `stop` may take.
    pub flush_wall: Duration,
    /// Wall-clock time one `spec` or `validate`, or one call to a connector instance, may take.
    pub config_wall: Duration,
    /// Lines of output (stdout, stderr, `log`) the instance may write per second.
    pub log_lines_per_second: u32,
    /// Bytes of output the instance may write per second (all lines together).
    pub log_bytes_per_second: u32,
    /// Longest single log message or output line; longer ones are cut with a marker.
    pub log_message_max_bytes: usize,
    /// Most handles (open files, directory streams, streams, pollables) the instance may hold.
    pub handles_max: usize,
    /// Most bytes the worker copies out of the instance in one crossing: the result of one call
    /// into the plugin, or the arguments of one call the plugin makes to the worker (and what
    /// `offsets.read` answers). Every string and list is counted each time it is referenced,
    /// before it is copied, so references that share guest bytes cannot multiply the copy.
    pub copy_bytes: usize,
}

impl Default for Limits {
    /// The key table's defaults (`config::keys`).
    fn default() -> Self {
        let zero = Self {
            memory_bytes: 0,
            call_timeout: Duration::ZERO,
            call_wall: Duration::ZERO,
            flush_wall: Duration::ZERO,
            config_wall: Duration::ZERO,
            log_lines_per_second: 0,
            log_bytes_per_second: 0,
            log_message_max_bytes: 0,
            handles_max: 0,
            copy_bytes: 0,
        };
        zero.with_overrides(&crate::config::keys::defaults())
            .unwrap_or_else(|e| panic!("the key table's sandbox defaults: {e}"))
    }
}

impl Limits {
    /// The wall-clock deadline of a call of `kind`.
    pub fn wall(&self, kind: CallKind) -> Duration {
        match kind {
            CallKind::Data => self.call_wall,
            CallKind::Flush => self.flush_wall,
            CallKind::Config => self.config_wall,
        }
    }

    /// These limits with the overrides a connector config makes (`sandbox.memory.max.bytes`,
    /// `sandbox.call.timeout.ms`, the wall-clock deadlines, the log budgets,
    /// `sandbox.handles.max`, `sandbox.call.copy.max.bytes`); an error names the key and the bad
    /// value.
    pub fn with_overrides(self, config: &[(String, String)]) -> Result<Self, String> {
        let mut limits = self;
        for (key, value) in config {
            let parse = || crate::config::keys::read_number(key, value);
            match key.as_str() {
                MEMORY_MAX_BYTES => {
                    limits.memory_bytes = usize::try_from(parse()?).unwrap_or(usize::MAX)
                }
                CALL_TIMEOUT_MS => limits.call_timeout = Duration::from_millis(parse()?),
                CALL_WALL_TIMEOUT_MS => limits.call_wall = Duration::from_millis(parse()?),
                FLUSH_WALL_TIMEOUT_MS => limits.flush_wall = Duration::from_millis(parse()?),
                CONFIG_WALL_TIMEOUT_MS => limits.config_wall = Duration::from_millis(parse()?),
                LOG_LINES_PER_SECOND => {
                    limits.log_lines_per_second = parse()?.min(u64::from(u32::MAX)) as u32
                }
                LOG_BYTES_PER_SECOND => {
                    limits.log_bytes_per_second = parse()?.min(u64::from(u32::MAX)) as u32
                }
                LOG_MESSAGE_MAX_BYTES => {
                    limits.log_message_max_bytes = usize::try_from(parse()?).unwrap_or(usize::MAX)
                }
                HANDLES_MAX => limits.handles_max = usize::try_from(parse()?).unwrap_or(usize::MAX),
                CALL_COPY_MAX_BYTES => {
                    limits.copy_bytes = usize::try_from(parse()?).unwrap_or(usize::MAX)
                }
                _ => {}
            }
        }
        Ok(limits)
    }
}

/// Tracks one instance's memory and the CPU budget of the call in progress; it lives in the
/// store, so a limit hit is recorded where the error report can find it.
#[derive(Debug)]
pub(crate) struct Meter {
    limits: Limits,
    /// Guest time the current call has used.
    guest_used: Duration,
    /// When guest time was last accounted.
    checkpoint: Instant,
    /// Host time since the checkpoint.
    host_time: Duration,
    /// When the host call in progress began.
    host_entered: Option<Instant>,
    /// Set when the current call ran out of CPU time.
    pub(crate) deadline_hit: bool,
    /// Set (to the total asked for) when the instance tried to grow past its memory limit.
    pub(crate) memory_denied: Option<usize>,
    /// Bytes of linear memory of all the instance's memories together.
    memory_used: usize,
}

impl Meter {
    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            limits,
            guest_used: Duration::ZERO,
            checkpoint: Instant::now(),
            host_time: Duration::ZERO,
            host_entered: None,
            deadline_hit: false,
            memory_denied: None,
            memory_used: 0,
        }
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// Called before each call into the guest.
    pub(crate) fn start_call(&mut self) {
        self.guest_used = Duration::ZERO;
        self.checkpoint = Instant::now();
        self.host_time = Duration::ZERO;
        self.host_entered = None;
        self.deadline_hit = false;
    }

    /// The guest calls the host.
    pub(crate) fn enter_host(&mut self) {
        self.host_entered = Some(Instant::now());
    }

    /// The host call returns to the guest: a wait is credited, work is the guest's.
    pub(crate) fn leave_host(&mut self) {
        if let Some(entered) = self.host_entered.take() {
            let spent = entered.elapsed();
            if spent > HOST_WAIT {
                self.host_time += spent;
            }
        }
    }

    /// Called each time the guest reaches an epoch deadline (about once per tick of guest
    /// time, since each yield re-arms the deadline one tick ahead); `false` means out of time.
    pub(crate) fn tick(&mut self) -> bool {
        self.tick_at(Instant::now())
    }

    fn tick_at(&mut self, now: Instant) -> bool {
        let span = now
            .saturating_duration_since(self.checkpoint)
            .saturating_sub(self.host_time);
        self.guest_used += span.min(EPOCH_TICK);
        self.checkpoint = now;
        self.host_time = Duration::ZERO;
        if self.guest_used > self.limits.call_timeout {
            self.deadline_hit = true;
            return false;
        }
        true
    }
}

impl wasmtime::ResourceLimiter for Meter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // The limit is for the instance: every memory of every core instance counts.
        let total = self
            .memory_used
            .saturating_sub(current)
            .saturating_add(desired);
        if total > self.limits.memory_bytes {
            self.memory_denied = Some(total);
            return Err(wasmtime::format_err!(
                "memory limit of {} bytes exceeded (tried to grow to {total} bytes)",
                self.limits.memory_bytes
            ));
        }
        self.memory_used = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }

    fn instances(&self) -> usize {
        64
    }

    fn memories(&self) -> usize {
        64
    }

    fn tables(&self) -> usize {
        256
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn overrides_apply_and_bad_values_name_the_key() {
        let limits = Limits::default()
            .with_overrides(&cfg(&[
                (MEMORY_MAX_BYTES, "1048576"),
                (CALL_TIMEOUT_MS, "250"),
                (CALL_COPY_MAX_BYTES, "4096"),
            ]))
            .unwrap();
        assert_eq!(limits.memory_bytes, 1 << 20);
        assert_eq!(limits.copy_bytes, 4096);
        assert_eq!(limits.call_timeout, Duration::from_millis(250));
        let err = Limits::default()
            .with_overrides(&cfg(&[(CALL_TIMEOUT_MS, "soon")]))
            .unwrap_err();
        assert!(
            err.contains(CALL_TIMEOUT_MS) && err.contains("soon"),
            "{err}"
        );
    }

    #[test]
    fn the_defaults_are_the_key_table_s() {
        use crate::config::keys::number;
        let limits = Limits::default();
        assert_eq!(
            limits.memory_bytes as u64,
            number("sandbox.memory.max.bytes")
        );
        assert_eq!(
            limits.copy_bytes as u64,
            number("sandbox.call.copy.max.bytes")
        );
    }

    #[test]
    fn short_host_calls_are_the_guests_time() {
        let mut meter = Meter::new(Limits::default());
        meter.start_call();
        meter.enter_host();
        meter.leave_host();
        assert_eq!(meter.host_time, Duration::ZERO, "a quick host call is work");
        meter.host_entered = Some(Instant::now() - HOST_WAIT * 5);
        meter.leave_host();
        assert!(meter.host_time >= HOST_WAIT * 5, "a long one is a wait");
    }

    #[test]
    fn call_kinds_have_their_own_deadlines() {
        let limits = Limits::default()
            .with_overrides(&cfg(&[(FLUSH_WALL_TIMEOUT_MS, "1234")]))
            .unwrap();
        assert_eq!(
            limits.wall(CallKind::of("flush")),
            Duration::from_millis(1234)
        );
        assert_eq!(
            limits.wall(CallKind::of("stop")),
            Duration::from_millis(1234)
        );
        assert_eq!(limits.wall(CallKind::of("poll")), Duration::from_secs(30));
        assert_eq!(
            limits.wall(CallKind::of("validate")),
            Duration::from_secs(30)
        );
        assert_eq!(CallKind::of("put").key(), CALL_WALL_TIMEOUT_MS);
        for connector_call in [
            "connector-instance.create",
            "task-configs",
            "monitor",
            "connector-instance.stop",
        ] {
            assert_eq!(
                CallKind::of(connector_call).key(),
                CONFIG_WALL_TIMEOUT_MS,
                "{connector_call}"
            );
        }
    }

    #[test]
    fn meter_runs_out_after_the_budget_and_waits_are_free() {
        let mut meter = Meter::new(Limits {
            call_timeout: EPOCH_TICK * 3,
            ..Limits::default()
        });
        meter.start_call();
        let start = meter.checkpoint;
        // An hour in a host call, then a tick: charged nothing for the hour.
        meter.host_time = Duration::from_secs(3600);
        assert!(meter.tick_at(start + Duration::from_secs(3600)));
        assert_eq!(meter.guest_used, Duration::ZERO);
        // A late resume is charged one tick at most.
        let mut now = start + Duration::from_secs(3600);
        for _ in 0..3 {
            now += Duration::from_secs(1);
            assert!(meter.tick_at(now));
        }
        assert_eq!(meter.guest_used, EPOCH_TICK * 3);
        assert!(!meter.tick_at(now + EPOCH_TICK));
        assert!(meter.deadline_hit);
        meter.start_call();
        assert!(!meter.deadline_hit);
    }
}
