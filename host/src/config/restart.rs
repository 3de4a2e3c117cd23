//! When a failed task (or a connector whose task split failed retriably) is tried again: the
//! restart policy's settings (worker defaults, connector overrides). The worker's runner and the
//! connector actor apply it (`worker::RestartPolicy` is this type).

use std::time::Duration;

use crate::backoff::Backoff;

/// When a failed task is restarted: exponential backoff with jitter, at most `max_attempts`
/// restarts within `window` (per connector, with worker defaults; see docs/configuration.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// `task.restart.max.attempts`: restarts allowed within the window (0: never restart).
    pub max_attempts: u32,
    /// `task.restart.window.ms`: the window restarts are counted in.
    pub window: Duration,
    /// `task.restart.backoff.initial.ms`: the wait before the first restart.
    pub initial_backoff: Duration,
    /// `task.restart.backoff.max.ms`: the longest wait before jitter.
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
            let number = || super::keys::read_number(key, value);
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

    /// The doubling delays between restarts: from the initial backoff up to the maximum.
    pub fn backoff(&self) -> Backoff {
        Backoff::new(self.initial_backoff, self.max_backoff)
    }

    /// The wait before restart number `attempt` (1-based): doubling from the initial backoff up
    /// to the maximum, plus up to 25% random jitter so restarts of many tasks spread out (the
    /// worker's one backoff, [`crate::backoff`]).
    pub fn delay(&self, attempt: u32) -> Duration {
        self.backoff().delay(attempt.saturating_sub(1))
    }
}

impl Default for RestartPolicy {
    /// The key table's defaults (`config::keys`).
    fn default() -> Self {
        let zero = Self {
            max_attempts: 0,
            window: Duration::ZERO,
            initial_backoff: Duration::ZERO,
            max_backoff: Duration::ZERO,
        };
        Self::configured(zero, &super::keys::defaults())
            .unwrap_or_else(|e| panic!("the key table's restart defaults: {e}"))
    }
}

/// Restart policy keys (worker defaults, connector overrides).
pub const RESTART_MAX_ATTEMPTS: &str = "task.restart.max.attempts";
pub const RESTART_WINDOW_MS: &str = "task.restart.window.ms";
pub const RESTART_BACKOFF_INITIAL_MS: &str = "task.restart.backoff.initial.ms";
pub const RESTART_BACKOFF_MAX_MS: &str = "task.restart.backoff.max.ms";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_wait_longer_each_time_with_jitter() {
        let policy = RestartPolicy {
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_millis(1000),
            ..RestartPolicy::default()
        };
        for (attempt, base) in [(1, 200), (2, 400), (3, 800), (4, 1000), (30, 1000)] {
            let base = Duration::from_millis(base);
            let delay = policy.delay(attempt);
            assert!(
                delay >= base && delay < base.mul_f64(1.25),
                "restart {attempt}: {delay:?}"
            );
        }
        assert_eq!(policy.backoff().base(0), policy.initial_backoff);
    }

    #[test]
    fn the_keys_and_defaults_are_the_key_table_s() {
        assert_eq!(
            u64::from(RestartPolicy::default().max_attempts),
            crate::config::keys::number(RESTART_MAX_ATTEMPTS)
        );
    }
}
