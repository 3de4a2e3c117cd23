//! Per-instance resource limits: linear memory (a store limiter) and CPU time per guest call
//! (epoch deadlines), with worker-wide defaults that a connector config may override.
//!
//! Guest time is measured at every epoch tick the guest reaches: the wall time since the last
//! checkpoint, minus the time spent in host calls meanwhile (the store's call hook reports
//! those), capped at one tick so a guest resumed late by a busy executor is charged at most one
//! tick for the wait. Host calls therefore cost the guest nothing, however long they take, and a
//! guest that calls the host in a loop still runs out of time.

use std::time::{Duration, Instant};

use crate::config_keys::{CALL_TIMEOUT_MS, LOG_LINES_PER_SECOND, MEMORY_MAX_BYTES};

/// How often the engine's epoch advances; the granularity of call deadlines.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Limits applied to one plugin instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum linear memory of the instance, in bytes (all memories together).
    pub memory_bytes: usize,
    /// Maximum guest CPU time of one call into the plugin.
    pub call_timeout: Duration,
    /// Lines of output (stdout, stderr, `log`) the instance may write per second.
    pub log_lines_per_second: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 256 * 1024 * 1024,
            call_timeout: Duration::from_secs(10),
            log_lines_per_second: 100,
        }
    }
}

impl Limits {
    /// These limits with the overrides a connector config makes (`sandbox.memory.max.bytes`,
    /// `sandbox.call.timeout.ms`, `sandbox.log.lines.per.second`); an error names the key and
    /// the bad value.
    pub fn with_overrides(self, config: &[(String, String)]) -> Result<Self, String> {
        let mut limits = self;
        for (key, value) in config {
            let parse = || {
                value
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|v| *v > 0)
                    .ok_or_else(|| format!("{key}: must be a positive integer, got {value:?}"))
            };
            match key.as_str() {
                MEMORY_MAX_BYTES => {
                    limits.memory_bytes = usize::try_from(parse()?).unwrap_or(usize::MAX)
                }
                CALL_TIMEOUT_MS => limits.call_timeout = Duration::from_millis(parse()?),
                LOG_LINES_PER_SECOND => {
                    limits.log_lines_per_second = parse()?.min(u64::from(u32::MAX)) as u32
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

    /// The host call returns to the guest.
    pub(crate) fn leave_host(&mut self) {
        if let Some(entered) = self.host_entered.take() {
            self.host_time += entered.elapsed();
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
            ]))
            .unwrap();
        assert_eq!(limits.memory_bytes, 1 << 20);
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
    fn meter_runs_out_after_the_budget_and_host_time_is_free() {
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
